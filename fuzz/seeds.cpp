// Writes the seed corpus of the fuzz targets: valid encodings of plans, write
// results and metadata (fuzz/decode_plans.cpp), metadata matching the state
// of fuzz/load_plan.cpp, and metadata files (fuzz/metadata_h5.cpp).
//
//   cairn_fuzz_seeds OUTDIR     -> OUTDIR/{decode_plans,load_plan,metadata_file,metadata_h5}/...
#include "cairn/storage.hpp"
#include "core/codec.hpp"

#include "boxes_fixture.hpp"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

using namespace cairn;
using detail::Bytes;
namespace stdfs = std::filesystem;

namespace {

std::string raw(std::int64_t v)
{
    std::string s(8, '\0');
    std::memcpy(s.data(), &v, 8);
    return s;
}

void put(const stdfs::path& file, const Bytes& b)
{
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    if (!out)
        throw std::runtime_error("cannot write " + file.string());
}

StorageInfo info(const std::string& path, std::uint64_t offset, std::uint64_t length)
{
    StorageInfo s;
    s.path = path;
    s.offset = offset;
    s.length = length;
    return s;
}

ChunkMeta chunk(Box box, const std::string& file, std::uint64_t offset, std::size_t elem)
{
    const auto len = static_cast<std::uint64_t>(box.volume()) * elem;
    return ChunkMeta{std::move(box), info(file, offset, len)};
}

// Metadata of the state of fuzz/load_plan.cpp, saved by two ranks.
Metadata load_plan_metadata()
{
    Metadata md;
    md.library_version = "0.1.0";
    md.world_size = 2;
    md.layout = "distcp";
    md.created = "2024-01-01T00:00:00Z";
    EntryMeta a{ItemKind::array, DType::f64, {8, 6}, {}, {}};
    a.chunks.push_back(chunk(Box{{0, 0}, {4, 6}}, "__0_0.distcp", 0, 8));
    a.chunks.push_back(chunk(Box{{4, 0}, {4, 6}}, "__1_0.distcp", 0, 8));
    md.entries["a"] = a;
    EntryMeta b{ItemKind::array, DType::i32, {10}, {}, {}};
    b.chunks.push_back(chunk(Box{{0}, {5}}, "__0_0.distcp", 4096, 4));
    b.chunks.push_back(chunk(Box{{5}, {5}}, "__1_0.distcp", 4096, 4));
    md.entries["b"] = b;
    EntryMeta z{ItemKind::array, DType::f64, {}, {}, {}};
    z.chunks.push_back(chunk(Box{{}, {}}, "__0_0.distcp", 4116, 8));
    md.entries["z"] = z;
    EntryMeta blob{ItemKind::bytes, DType::u8, {300}, {}, {}};
    blob.chunks.push_back(chunk(Box{{0}, {300}}, "__1_0.distcp", 4116, 1));
    md.entries["blob"] = blob;
    md.entries["step"] = EntryMeta{ItemKind::scalar, DType::i64, {}, {}, raw(4711)};
    md.entries["name"] = EntryMeta{ItemKind::string, DType::u8, {}, {}, "heat run/1"};
    return md;
}

Metadata other_metadata()
{
    Metadata md;
    md.library_version = "0.1.0";
    md.world_size = 3;
    md.layout = "container";
    md.created = "2024-01-01T00:00:00Z";
    EntryMeta u{ItemKind::array, DType::f32, {5, 6, 7}, {}, {}};
    for (std::int64_t i = 0; i < 5; ++i)
        u.chunks.push_back(chunk(Box{{i, 0, 0}, {1, 6, 7}}, "__" + std::to_string(i % 3) + "_0.distcp",
                                 static_cast<std::uint64_t>(i) * 4096, 4));
    md.entries["fluid.u"] = u;
    md.entries["dt"] = EntryMeta{ItemKind::scalar, DType::f64, {}, {}, std::string(8, '\x01')};
    md.entries["flag"] = EntryMeta{ItemKind::scalar, DType::boolean, {}, {}, std::string(1, '\x01')};
    EntryMeta e{ItemKind::array, DType::u16, {0, 4}, {}, {}};
    md.entries["empty"] = e;
    return md;
}

SavePlan save_plan()
{
    SavePlan p;
    WriteItem a;
    a.fqn = "fluid.velocity";
    a.kind = ItemKind::array;
    a.dtype = DType::f32;
    a.global_shape = {8, 10, 12};
    a.box = Box{{0, 5, 6}, {8, 5, 6}};
    a.nbytes = 8 * 5 * 6 * 4;
    a.chunk = 3;
    p.items.push_back(a);
    WriteItem b;
    b.fqn = "blob";
    b.kind = ItemKind::bytes;
    b.global_shape = {100};
    b.box = Box{{0}, {100}};
    b.nbytes = 100;
    b.digest = 0x1234567890abcdefull;
    p.items.push_back(b);
    WriteItem s;
    s.fqn = "step";
    s.kind = ItemKind::scalar;
    s.dtype = DType::i64;
    s.value = raw(100);
    p.items.push_back(s);
    WriteItem t;
    t.fqn = "label";
    t.kind = ItemKind::string;
    t.value = "run 1";
    p.items.push_back(t);
    detail::Encoder e;
    e.str("/scratch/ckpt");
    p.storage_data = e.take();
    return p;
}

// A plan every rank may send as is (replicas only): the coordinator plans it.
SavePlan replicated_plan()
{
    SavePlan p;
    WriteItem a;
    a.fqn = "grid";
    a.dtype = DType::f64;
    a.global_shape = {4, 3};
    a.box = Box{{0, 0}, {4, 3}};
    a.nbytes = 4 * 3 * 8;
    p.items.push_back(a);
    WriteItem z;
    z.fqn = "zero_d";
    z.dtype = DType::i32;
    z.nbytes = 4;
    p.items.push_back(z);
    WriteItem b;
    b.fqn = "blob";
    b.kind = ItemKind::bytes;
    b.global_shape = {5};
    b.box = Box{{0}, {5}};
    b.nbytes = 5;
    b.digest = 77;
    p.items.push_back(b);
    WriteItem s;
    s.fqn = "step";
    s.kind = ItemKind::scalar;
    s.dtype = DType::i64;
    s.value = raw(7);
    p.items.push_back(s);
    WriteItem t;
    t.fqn = "label";
    t.kind = ItemKind::string;
    t.value = "run 1";
    p.items.push_back(t);
    return p;
}

// A plan that lists an array once per box (two row blocks tiling it): the
// coordinator's encoded form declines it, the global plan on the decoded
// plans plans it.
SavePlan several_boxes_plan()
{
    SavePlan p;
    WriteItem a;
    a.fqn = "grid";
    a.dtype = DType::f64;
    a.global_shape = {4, 3};
    a.box = Box{{2, 0}, {2, 3}};
    a.nbytes = 2 * 3 * 8;
    p.items.push_back(a);
    WriteItem s;
    s.fqn = "step";
    s.kind = ItemKind::scalar;
    s.dtype = DType::i64;
    s.value = raw(7);
    p.items.push_back(s);
    a.box = Box{{0, 0}, {2, 3}};
    p.items.push_back(a);
    return p;
}

LoadPlan load_plan()
{
    LoadPlan p;
    p.items.push_back(ReadItem{"fluid.velocity", ItemKind::array, 3, Box{{1, 5, 6}, {2, 5, 6}}});
    p.items.push_back(ReadItem{"blob", ItemKind::bytes, 0, Box{{0}, {100}}});
    p.items.push_back(ReadItem{"zero_d", ItemKind::array, 0, Box{{}, {}}});
    return p;
}

std::vector<WriteResult> results()
{
    return {WriteResult{"fluid.velocity", 3, info("__1_0.distcp", 4096, 960)},
            WriteResult{"blob", 0, info("__1_0.distcp", 0, 100)}};
}

// Rank 1's plan next to the fixed rank 0 plan of boxes_form_input() in
// fuzz/decode_plans.cpp, as its array boxes (boxes_form).
Bytes boxes_rank1()
{
    std::uint64_t skeleton = 0;
    return detail::boxes_form(detail::encode(cairn_fuzz::boxes_fixture_plan(1)), skeleton);
}

// What rank 0 reports for the fixed plan of fuzz/decode_plans.cpp.
std::vector<WriteResult> results_rank0()
{
    return {WriteResult{"fluid.velocity", 0, info("__0_0.distcp", 0, 1920)},
            WriteResult{"blob", 0, info("__0_0.distcp", 1920, 100)}};
}

Bytes file_bytes(const stdfs::path& p)
{
    std::ifstream in(p, std::ios::binary);
    const std::vector<char> c((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    Bytes b(c.size());
    std::memcpy(b.data(), c.data(), c.size());
    return b;
}

} // namespace

int main(int argc, char** argv)
{
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s OUTDIR\n", argv[0]);
        return 2;
    }
    try {
        const stdfs::path out = argv[1];
        for (const char* t : {"decode_plans", "load_plan", "metadata_file", "metadata_h5"})
            stdfs::create_directories(out / t);

        const auto d = out / "decode_plans";
        put(d / "save_plan", detail::encode(save_plan()));
        put(d / "save_plan_empty", detail::encode(SavePlan{}));
        put(d / "save_plan_replicated", detail::encode(replicated_plan()));
        put(d / "save_plan_boxes", boxes_rank1());
        put(d / "save_plan_several_boxes", detail::encode(several_boxes_plan()));
        put(d / "load_plan", detail::encode(load_plan()));
        put(d / "load_plan_empty", detail::encode(LoadPlan{}));
        put(d / "write_results", detail::encode(results()));
        put(d / "write_results_rank0", detail::encode(results_rank0()));
        put(d / "metadata", detail::encode(load_plan_metadata()));
        put(d / "metadata_other", detail::encode(other_metadata()));
        put(d / "metadata_empty", detail::encode(Metadata{}));

        const auto l = out / "load_plan";
        put(l / "matching", detail::encode(load_plan_metadata()));
        auto partial = load_plan_metadata();
        partial.entries.erase("b");
        partial.entries.erase("step");
        put(l / "partial", detail::encode(partial));
        put(l / "other", detail::encode(other_metadata()));

        const auto f = out / "metadata_file";
        put(f / "matching", detail::encode(load_plan_metadata()));
        put(f / "other", detail::encode(other_metadata()));

        const auto m = out / "metadata_h5";
        int k = 0;
        for (const auto& md : {load_plan_metadata(), other_metadata()}) {
            const auto tmp = m / (".tmp" + std::to_string(k) + ".h5");
            write_metadata_file(tmp.string(), md, false);
            put(m / ("metadata" + std::to_string(k++) + ".h5"), file_bytes(tmp));
            stdfs::remove(tmp);
        }
        std::printf("seed corpus written to %s\n", out.string().c_str());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
        return 1;
    }
    return 0;
}
