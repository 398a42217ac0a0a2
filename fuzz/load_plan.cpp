// Fuzz target: metadata as the ranks receive it (decode_metadata of the
// coordinator's broadcast) planned against a fixed state by the default load
// planner, then the scalars and strings set (DefaultLoadPlanner::finish).
// Inputs are first held to what the metadata reader guarantees (every chunk
// box inside its array, src/storage/hdf5/metadata_h5.cpp), since the planner
// only ever sees validated metadata from Cairn's own readers. Every input must
// plan or throw a cairn::Error; every read item must lie inside both this
// rank's box and the chunk it reads from.
#include "cairn/errors.hpp"
#include "cairn/planner.hpp"
#include "core/codec.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace {

using cairn::detail::Bytes;

[[noreturn]] void fail(const std::string& why)
{
    std::fprintf(stderr, "load_plan: %s\n", why.c_str());
    std::abort();
}

// What read_metadata_group checks of every entry before anyone plans with it.
bool validated(const cairn::Metadata& md)
{
    for (const auto& [fqn, e] : md.entries)
        for (const auto& c : e.chunks)
            if (!c.box.inside(e.global_shape))
                return false;
    return true;
}

void plan(const cairn::Metadata& md, bool partial)
{
    // This rank's state: a 2-d array (a window with ghosts), a 1-d array, a
    // 0-d array, bytes, a scalar and a string.
    static std::vector<double> a(10 * 8, 0.0);
    static std::vector<std::int32_t> b(10, 0);
    static double z = 0;
    std::vector<std::byte> blob;
    std::int64_t step = 0;
    std::string name;
    cairn::StateDict sd;
    sd.add_array("a", cairn::ArrayShard{cairn::DType::f64, {8, 6}, cairn::Box{{2, 0}, {4, 6}}, a.data() + 9, {8, 1}});
    sd.add_array<std::int32_t>("b", b.data(), {10}, cairn::Box{{0}, {10}});
    sd.add_array("z", cairn::ArrayShard{cairn::DType::f64, {}, cairn::Box{{}, {}}, &z, {}});
    sd.add_bytes("blob", &blob);
    sd.add_scalar("step", &step);
    sd.add_string("name", &name);

    cairn::DefaultLoadPlanner planner(partial);
    cairn::LoadPlan lp;
    try {
        planner.set_up_planner(sd, md, true);
        lp = planner.finish_plan(planner.create_local_plan());
    } catch (const cairn::Error&) {
        return;
    }
    const std::map<std::string, cairn::Box> boxes{{"a", cairn::Box{{2, 0}, {4, 6}}},
                                                  {"b", cairn::Box{{0}, {10}}},
                                                  {"z", cairn::Box{{}, {}}}};
    for (const auto& item : lp.items) {
        const auto e = md.entries.find(item.fqn);
        if (e == md.entries.end() || item.chunk >= e->second.chunks.size())
            fail("a read item names '" + item.fqn + "' chunk " + std::to_string(item.chunk) +
                 ", which the metadata does not have");
        if (item.kind != cairn::ItemKind::array)
            continue;
        const auto& mine = boxes.at(item.fqn);
        const auto& chunk = e->second.chunks[item.chunk].box;
        const auto in_mine = cairn::intersect(mine, item.box);
        const auto in_chunk = cairn::intersect(chunk, item.box);
        if (item.box.ndim() != 0 && (!in_mine || *in_mine != item.box || !in_chunk || *in_chunk != item.box))
            fail("read item " + item.box.str() + " of '" + item.fqn + "' is not inside both the rank's box " +
                 mine.str() + " and the chunk " + chunk.str());
        try {
            const auto dst = planner.resolve_destination(item);
            if (dst.view.shape != item.box.shape)
                fail("destination of '" + item.fqn + "' has the wrong shape");
        } catch (const cairn::Error&) {
        }
    }
    try {
        planner.finish(); // copies scalar values and strings out of the metadata
    } catch (const cairn::Error&) {
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const auto* p = reinterpret_cast<const std::byte*>(data);
    cairn::Metadata md;
    try {
        md = cairn::detail::decode_metadata(Bytes(p, p + size));
    } catch (const cairn::error::FormatError&) {
        return 0;
    }
    if (!validated(md))
        return -1; // not a metadata a reader would hand over; keep out of the corpus
    plan(md, false);
    plan(md, true);
    return 0;
}
