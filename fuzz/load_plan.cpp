// Fuzz target: metadata as the ranks receive it (decode_metadata of the
// coordinator's broadcast) planned against a fixed state by the default load
// planner, then the scalars and strings set (DefaultLoadPlanner::finish).
// The decode that keeps only the chunks the state's boxes overlap (what
// load() does) must accept exactly the inputs the full decode accepts, keep
// each entry's first chunk and every overlapping one in stored order, and
// plan the same reads (regions and the storage they come from); the same
// metadata re-encoded in frames (the broadcast) and decoded frame by frame
// must keep the same.
// Inputs are first held to what the metadata reader guarantees (every chunk
// box inside its array, src/format/metadata_h5.cpp), since the planner
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

// What read_metadata_columns_group checks of every entry before anyone plans with it.
bool validated(const cairn::Metadata& md)
{
    for (const auto& [fqn, e] : md.entries)
        for (const auto& c : e.chunks)
            if (!c.box.inside(e.global_shape))
                return false;
    return true;
}

// The boxes of the state below.
const std::map<std::string, cairn::Box>& boxes()
{
    static const std::map<std::string, cairn::Box> b{
        {"a", cairn::Box{{2, 0}, {4, 6}}}, {"b", cairn::Box{{0}, {10}}}, {"z", cairn::Box{{}, {}}}};
    return b;
}

// A planned read: entry, region, and where its chunk is stored.
struct Read {
    std::string fqn;
    cairn::Box box;
    std::string path;
    std::uint64_t offset;
    bool operator==(const Read& o) const
    {
        return fqn == o.fqn && box == o.box && path == o.path && offset == o.offset;
    }
};

// The reads planned (empty when the planner refused the metadata: `ok` false).
std::vector<Read> plan(const cairn::Metadata& md, bool partial, bool& ok)
{
    ok = false;
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
        return {};
    }
    ok = true;
    std::vector<Read> reads;
    for (const auto& item : lp.items) {
        const auto e = md.entries.find(item.fqn);
        if (e == md.entries.end() || item.chunk >= e->second.chunks.size())
            fail("a read item names '" + item.fqn + "' chunk " + std::to_string(item.chunk) +
                 ", which the metadata does not have");
        const auto& st = e->second.chunks[item.chunk].storage;
        reads.push_back(Read{item.fqn, item.box, st.path, st.offset});
        if (item.kind != cairn::ItemKind::array)
            continue;
        const auto& mine = boxes().at(item.fqn);
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
    return reads;
}

// `part` is `full` as decoded for the boxes(): same entries; of an array,
// its first chunk and those overlapping its box, in order; of the others,
// all chunks.
void check_part(const cairn::Metadata& full, const cairn::Metadata& part)
{
    if (full.entries.size() != part.entries.size())
        fail("the partial decode has another number of entries");
    for (const auto& [fqn, e] : full.entries) {
        const auto it = part.entries.find(fqn);
        if (it == part.entries.end())
            fail("the partial decode lacks entry '" + fqn + "'");
        const auto& pe = it->second;
        if (pe.kind != e.kind || pe.dtype != e.dtype || pe.global_shape != e.global_shape || pe.value != e.value)
            fail("entry '" + fqn + "' differs in the partial decode");
        const auto want = boxes().find(fqn);
        std::size_t j = 0;
        for (std::size_t k = 0; k < e.chunks.size(); ++k) {
            const auto& c = e.chunks[k];
            const bool overlapping = e.kind != cairn::ItemKind::array ||
                                     (want != boxes().end() && (want->second.ndim() != c.box.ndim() ||
                                                                cairn::intersect(want->second, c.box).has_value()));
            if (k > 0 && !overlapping)
                continue;
            if (j >= pe.chunks.size() || pe.chunks[j].box != c.box || pe.chunks[j].storage.path != c.storage.path ||
                pe.chunks[j].storage.offset != c.storage.offset || pe.chunks[j].storage.length != c.storage.length ||
                pe.chunks[j].storage.checksums != c.storage.checksums)
                fail("entry '" + fqn + "': chunk " + std::to_string(k) + " is not kept as it was");
            ++j;
        }
        if (j != pe.chunks.size())
            fail("entry '" + fqn + "': the partial decode keeps chunks that do not overlap");
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const auto* p = reinterpret_cast<const std::byte*>(data);
    const Bytes in(p, p + size);
    cairn::Metadata md, part;
    bool full_ok = true, part_ok = true;
    try {
        md = cairn::detail::decode_metadata(in);
    } catch (const cairn::error::FormatError&) {
        full_ok = false;
    }
    const cairn::detail::WantedBox wanted = [](const std::string& fqn) -> const cairn::Box* {
        const auto it = boxes().find(fqn);
        return it == boxes().end() ? nullptr : &it->second;
    };
    try {
        part = cairn::detail::decode_metadata(in, wanted);
    } catch (const cairn::error::FormatError&) {
        part_ok = false;
    }
    if (full_ok != part_ok)
        fail(full_ok ? "the partial decode refused what the full one accepts" : "the partial decode accepted what the full one refuses");
    if (!full_ok)
        return 0;
    check_part(md, part);
    // As load() receives it: re-encoded in frames of a few entries, decoded
    // frame by frame.
    {
        cairn::detail::MetadataFrames frames(md);
        cairn::detail::MetadataDecoder dec(wanted);
        for (Bytes f; !(f = frames.next(64)).empty();)
            dec.add(f);
        if (cairn::detail::encode(dec.finish()) != cairn::detail::encode(part))
            fail("decoding frame by frame keeps other chunks than decoding in one piece");
    }
    if (!validated(md))
        return -1; // not a metadata a reader would hand over; keep out of the corpus
    for (const bool partial : {false, true}) {
        bool ok_full = false, ok_part = false;
        const auto reads = plan(md, partial, ok_full);
        const auto part_reads = plan(part, partial, ok_part);
        if (ok_full != ok_part || reads != part_reads)
            fail("the partial decode plans other reads");
    }
    return 0;
}
