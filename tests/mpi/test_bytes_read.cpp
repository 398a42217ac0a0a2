// Loads read each needed byte once: a rank reads from storage at most the
// bytes its boxes need, rounded out to whole checksum blocks when verifying
// (read_bound.hpp), and LoadResult::bytes_read counts what it read.
#include "fixtures.hpp"
#include "read_bound.hpp"

#include <catch2/catch.hpp>

using namespace cairn_test;

namespace {

struct Loaded {
    std::uint64_t bytes_read = 0, bound = 0, data = 0;
    bool ok = false;
};

// Loads the boxes `want` of `arrays` (global shapes `shapes`, f64) from `path`
// on the calling communicator.
Loaded load_boxes(const std::string& path, MPI_Comm comm, const std::vector<std::string>& arrays,
                  const std::vector<cairn::Shape>& shapes, const std::vector<cairn::Box>& want, bool verify)
{
    Loaded out;
    cairn::StateDict sd;
    std::vector<std::unique_ptr<LocalArray>> held;
    for (std::size_t a = 0; a < arrays.size(); ++a) {
        held.push_back(std::make_unique<LocalArray>(arrays[a], cairn::DType::f64, shapes[a], want[a], 0, static_cast<int>(a)));
        sd.add_array(arrays[a], held.back()->shard());
        out.data += static_cast<std::uint64_t>(want[a].volume()) * 8;
    }
    cairn::LoadOptions lo;
    lo.verify_checksums = verify;
    lo.cooperative = false; // the bound of each rank alone (test_cooperative.cpp: of all ranks together)
    const auto res = cairn::load(sd, path, comm, lo);
    out.bytes_read = res.bytes_read;
    const auto md = cairn::read_metadata(path);
    for (std::size_t a = 0; a < arrays.size(); ++a)
        out.bound += read_bound(md, arrays[a], {want[a]}, verify);
    out.ok = true;
    for (const auto& h : held)
        out.ok = out.ok && h->errors() == 0;
    return out;
}

} // namespace

TEST_CASE("a 2 -> 1 load of arrays whose chunks are smaller than a checksum block reads each block once",
          "[io][reshard][container]")
{
    // Issue 32's reproduction: on 2 ranks `a`, 1,000 doubles per rank, and
    // `b` of {4,000 * 2, 3}, 4,000 rows per rank; loaded whole on 1 rank.
    // The per-rank reader read 576,016,000 bytes for these 208,000.
    const int w = world_size(), r = world_rank();
    if (w < 2)
        return;
    const std::string base = fresh_dir("bytes_read_" + std::to_string(w));
    const std::vector<std::string> names{"a", "b"};
    const std::vector<cairn::Shape> shapes{{2000}, {8000, 3}};
    for (auto layout : {cairn::Layout::per_rank, cairn::Layout::container}) {
        const bool container = layout == cairn::Layout::container;
        const std::string path = base + (container ? "/ckpt.h5" : "/ckpt");
        INFO((container ? "container" : "per-rank"));
        const bool saved = run_on(2, [&](const SubComm& comm) {
            const int cr = comm.rank();
            cairn::StateDict sd;
            LocalArray a("a", cairn::DType::f64, shapes[0], cairn::Box{{1000 * cr}, {1000}}, 0, 0);
            LocalArray b("b", cairn::DType::f64, shapes[1], cairn::Box{{4000 * cr, 0}, {4000, 3}}, 0, 1);
            a.fill();
            b.fill();
            sd.add_array("a", a.shard());
            sd.add_array("b", b.shard());
            cairn::SaveOptions o;
            o.layout = layout;
            o.fsync = false;
            cairn::save(sd, path, comm.get(), o);
            return true;
        });
        REQUIRE(saved);
        for (bool verify : {true, false}) {
            INFO("verify " << verify);
            Loaded got;
            const bool loaded = run_on(1, [&](const SubComm& comm) {
                got = load_boxes(path, comm.get(), names, shapes, {cairn::whole(shapes[0]), cairn::whole(shapes[1])},
                                 verify);
                return got.ok;
            });
            CHECK(loaded);
            if (r == 0) {
                INFO("bytes read " << got.bytes_read << ", bound " << got.bound << ", data " << got.data);
                CHECK(got.data == 208000);
                CHECK(got.bytes_read <= got.bound);
                // The chunks are smaller than a block: the bound is the data.
                CHECK(got.bound == got.data);
            }
        }
    }
}

TEST_CASE("N -> 1 and 1 -> M loads read no byte beyond the bound", "[io][reshard][container]")
{
    // The 8 -> 1 and 1 -> 27 shapes at the world's size: arrays of
    // several chunk sizes, one under a block and one of a few blocks.
    const int w = world_size(), r = world_rank();
    const std::string base = fresh_dir("bytes_read_nm_" + std::to_string(w));
    const std::vector<std::string> names{"small", "rows"};
    const std::vector<cairn::Shape> shapes{{3001}, {997, 700}}; // rows of 5,600 bytes: 187 per 1 MiB block
    for (auto layout : {cairn::Layout::per_rank, cairn::Layout::container}) {
        const bool container = layout == cairn::Layout::container;
        for (int n : w > 1 ? std::vector<int>{w, 1} : std::vector<int>{1}) {
            const int m = n == 1 ? w : 1;
            const std::string path = base + "/n" + std::to_string(n) + (container ? ".h5" : "");
            INFO((container ? "container" : "per-rank") << ", " << n << " -> " << m);
            const bool saved = run_on(n, [&](const SubComm& comm) {
                cairn::StateDict sd;
                std::vector<std::unique_ptr<LocalArray>> held;
                for (std::size_t a = 0; a < names.size(); ++a) {
                    held.push_back(std::make_unique<LocalArray>(names[a], cairn::DType::f64, shapes[a],
                                                                decompose(shapes[a], Decomp::dim0, n, comm.rank()), 0,
                                                                static_cast<int>(a)));
                    held.back()->fill();
                    sd.add_array(names[a], held.back()->shard());
                }
                cairn::SaveOptions o;
                o.layout = layout;
                o.fsync = false;
                cairn::save(sd, path, comm.get(), o);
                return true;
            });
            REQUIRE(saved);
            for (bool verify : {true, false}) {
                INFO("verify " << verify);
                const bool loaded = run_on(m, [&](const SubComm& comm) {
                    std::vector<cairn::Box> want;
                    for (const auto& s : shapes)
                        want.push_back(decompose(s, Decomp::grid, m, comm.rank()));
                    const auto got = load_boxes(path, comm.get(), names, shapes, want, verify);
                    if (got.bytes_read > got.bound)
                        UNSCOPED_INFO("rank " << r << ": bytes read " << got.bytes_read << ", bound " << got.bound);
                    return got.ok && got.bytes_read <= got.bound;
                });
                CHECK(loaded);
            }
        }
    }
}

TEST_CASE("boxes of one rank that share checksum blocks read each block once", "[io][reshard]")
{
    // One chunk of 600 rows of 8,000 bytes (131 rows, 1,048,000 bytes, per
    // checksum block: 5 blocks), saved by one rank in the per-rank layout
    // and loaded by one rank as several boxes at once: column halves (every
    // block shared by both), overlapping row bands with a tile inside them,
    // the whole array twice (read straight into dense destinations). The
    // reader read every shared block once per box.
    const int r = world_rank();
    const std::string path = fresh_dir("bytes_read_boxes_" + std::to_string(world_size())) + "/ckpt";
    const cairn::Shape shape{600, 1000};
    const std::vector<std::vector<cairn::Box>> cases{
        {{{0, 0}, {600, 500}}, {{0, 500}, {600, 500}}},
        {{{0, 0}, {400, 1000}}, {{200, 0}, {400, 1000}}, {{100, 100}, {300, 20}}},
        {{{0, 0}, {600, 1000}}, {{0, 0}, {600, 1000}}},
    };
    const bool saved = run_on(1, [&](const SubComm& comm) {
        LocalArray m("m", cairn::DType::f64, shape, cairn::whole(shape), 0, 0);
        m.fill();
        cairn::StateDict sd;
        sd.add_array("m", m.shard());
        cairn::SaveOptions o;
        o.layout = cairn::Layout::per_rank;
        o.fsync = false;
        cairn::save(sd, path, comm.get(), o);
        return true;
    });
    REQUIRE(saved);
    for (std::size_t k = 0; k < cases.size(); ++k)
        for (bool verify : {true, false}) {
            INFO("boxes " << k << ", verify " << verify);
            std::uint64_t read = 0, bound = 0;
            const bool loaded = run_on(1, [&](const SubComm& comm) {
                cairn::StateDict sd;
                std::vector<std::unique_ptr<LocalArray>> held;
                for (const auto& box : cases[k]) {
                    const int ghost = k == 2 ? 0 : 1; // dense destinations, else strided ones
                    held.push_back(std::make_unique<LocalArray>("m", cairn::DType::f64, shape, box, ghost, 0));
                    sd.add_array("m", held.back()->shard());
                }
                cairn::LoadOptions lo;
                lo.verify_checksums = verify;
                read = cairn::load(sd, path, comm.get(), lo).bytes_read;
                bound = read_bound(cairn::read_metadata(path), "m", cases[k], verify);
                bool ok = true;
                for (const auto& h : held)
                    ok = ok && h->errors() == 0;
                return ok;
            });
            CHECK(loaded);
            if (r == 0) {
                INFO("bytes read " << read << ", bound " << bound);
                CHECK(bound == 4800000); // the boxes cover every row
                CHECK(read <= bound);
            }
        }
}
