// Cooperative reads (LoadOptions::cooperative): where several ranks need
// bytes of the same checksum block, one reads and verifies it and sends the
// others their parts. Bytes read from storage summed over all ranks stay
// within 1.05 x the blocks the load needs (read_bound.hpp over every rank's
// boxes); every loaded element is checked; with the option off each rank's
// own bound holds; a damaged block fails the load on every rank.
#include "../damage.hpp"
#include "fixtures.hpp"
#include "outcome.hpp"
#include "read_bound.hpp"

#include <catch2/catch.hpp>

#include <memory>
#include <random>

using namespace cairn_test;

namespace {

struct Arr {
    std::string name;
    cairn::DType dtype;
    cairn::Shape shape;
};

// What one rank saw of a load.
struct Seen {
    cairn::LoadResult res;
    std::uint64_t own_bound = 0;   // this rank's boxes alone
    std::uint64_t union_bound = 0; // every rank's boxes together
    bool data_ok = false;
};

// Saves `arrays` on `n` ranks, each array cut by `save_d`.
bool save_on(int n, const std::string& path, const std::vector<Arr>& arrays, Decomp save_d, cairn::Layout layout)
{
    return run_on(n, [&](const SubComm& comm) {
        cairn::StateDict sd;
        std::vector<std::unique_ptr<LocalArray>> held;
        for (std::size_t a = 0; a < arrays.size(); ++a) {
            held.push_back(std::make_unique<LocalArray>(arrays[a].name, arrays[a].dtype, arrays[a].shape,
                                                        decompose(arrays[a].shape, save_d, n, comm.rank()), 0,
                                                        static_cast<int>(a)));
            held.back()->fill();
            sd.add_array(arrays[a].name, held.back()->shard());
        }
        cairn::SaveOptions o;
        o.layout = layout;
        o.fsync = false;
        cairn::save(sd, path, comm.get(), o);
        return true;
    });
}

// Loads on the calling communicator of `m` ranks, rank q taking boxes[q][a]
// of array a (ghost cells of 1 around each box).
Seen load_boxes(const std::string& path, const SubComm& comm, const std::vector<Arr>& arrays,
                const std::vector<std::vector<cairn::Box>>& boxes, bool cooperative, bool verify = true)
{
    Seen out;
    const auto q = static_cast<std::size_t>(comm.rank());
    cairn::StateDict sd;
    std::vector<std::unique_ptr<LocalArray>> held;
    for (std::size_t a = 0; a < arrays.size(); ++a) {
        held.push_back(std::make_unique<LocalArray>(arrays[a].name, arrays[a].dtype, arrays[a].shape, boxes[q][a], 1,
                                                    static_cast<int>(a)));
        sd.add_array(arrays[a].name, held.back()->shard());
    }
    cairn::LoadOptions lo;
    lo.cooperative = cooperative;
    lo.verify_checksums = verify;
    out.res = cairn::load(sd, path, comm.get(), lo);
    const auto md = cairn::read_metadata(path);
    for (std::size_t a = 0; a < arrays.size(); ++a) {
        out.own_bound += read_bound(md, arrays[a].name, {boxes[q][a]}, verify);
        std::vector<cairn::Box> all;
        for (const auto& b : boxes)
            all.push_back(b[a]);
        out.union_bound += read_bound(md, arrays[a].name, all, verify);
    }
    out.data_ok = true;
    for (const auto& h : held)
        out.data_ok = out.data_ok && h->errors() == 0;
    return out;
}

// Every rank's boxes when array a is cut by `d` over m ranks.
std::vector<std::vector<cairn::Box>> cut(const std::vector<Arr>& arrays, Decomp d, int m)
{
    std::vector<std::vector<cairn::Box>> boxes(static_cast<std::size_t>(m));
    for (int q = 0; q < m; ++q)
        for (const auto& a : arrays)
            boxes[static_cast<std::size_t>(q)].push_back(decompose(a.shape, d, m, q));
    return boxes;
}

// Loads cooperatively and not; checks data, both bounds and, on rank 0,
// reports the read amplification. Collective over the m ranks.
bool check_both_ways(const std::string& path, int m, const std::vector<Arr>& arrays,
                     const std::vector<std::vector<cairn::Box>>& boxes, bool expect_shared)
{
    return run_on(m, [&](const SubComm& comm) {
        const Seen on = load_boxes(path, comm, arrays, boxes, true);
        const Seen off = load_boxes(path, comm, arrays, boxes, false);
        std::uint64_t received = on.res.bytes_received;
        MPI_Allreduce(MPI_IN_PLACE, &received, 1, MPI_UINT64_T, MPI_SUM, comm.get());
        bool ok = on.data_ok && off.data_ok;
        // Together: within 1.05 x the blocks any rank needs.
        ok = ok && on.res.bytes_read_all * 100 <= on.union_bound * 105;
        // Alone: each rank within its own bound, nothing received.
        ok = ok && off.res.bytes_read <= off.own_bound && off.res.bytes_received == 0;
        // Something was shared where ranks need the same blocks.
        if (expect_shared && m > 1)
            ok = ok && received > 0 && on.res.bytes_read_all < off.res.bytes_read_all;
        if (!ok)
            UNSCOPED_INFO("rank " << comm.rank() << ": together read " << on.res.bytes_read_all << " (bound "
                                  << on.union_bound << "), received " << received << "; alone read "
                                  << off.res.bytes_read << " (bound " << off.own_bound << "), all "
                                  << off.res.bytes_read_all << "; data " << on.data_ok << off.data_ok);
        return ok;
    });
}

const cairn::Layout layouts[] = {cairn::Layout::per_rank, cairn::Layout::container};
const char* layout_name(cairn::Layout l) { return l == cairn::Layout::container ? "container" : "per-rank"; }

} // namespace

TEST_CASE("a replicated array loaded by every rank is read once in all", "[io][cooperative][container]")
{
    const int w = world_size();
    const std::string base = fresh_dir("coop_replicated_" + std::to_string(w));
    // 12 MB in rows of 5,600 bytes, and a small 1-d one.
    const std::vector<Arr> arrays{{"field", cairn::DType::f64, {2143, 700}}, {"small", cairn::DType::i32, {999}}};
    for (auto layout : layouts) {
        const std::string path = base + "/ckpt" + (layout == cairn::Layout::container ? ".h5" : "");
        INFO(layout_name(layout) << ", saved on " << w << ", loaded replicated on " << w);
        REQUIRE(save_on(w, path, arrays, Decomp::dim0, layout));
        CHECK(check_both_ways(path, w, arrays, cut(arrays, Decomp::replicated, w), true));
    }
}

TEST_CASE("a 1 -> M load reads each needed block once in all", "[io][cooperative][container]")
{
    const int w = world_size();
    const std::string base = fresh_dir("coop_1m_" + std::to_string(w));
    const std::vector<Arr> arrays{{"rows", cairn::DType::f64, {997, 700}}, {"cube", cairn::DType::f32, {40, 30, 50}},
                                  {"line", cairn::DType::u8, {3001}}};
    for (auto layout : layouts) {
        const std::string path = base + "/ckpt" + (layout == cairn::Layout::container ? ".h5" : "");
        REQUIRE(save_on(1, path, arrays, Decomp::dim0, layout));
        for (auto d : {Decomp::dim0, Decomp::grid, Decomp::last_dim}) {
            INFO(layout_name(layout) << ", 1 -> " << w << ", decomposition " << static_cast<int>(d));
            // Cuts along rows share the blocks at their ends; others share most blocks.
            CHECK(check_both_ways(path, w, arrays, cut(arrays, d, w), d != Decomp::dim0));
        }
    }
}

TEST_CASE("random N -> M round trips read each needed block once in all", "[io][cooperative][reshard][container]")
{
    const int w = world_size();
    const std::string base = fresh_dir("coop_random_" + std::to_string(w));
    std::mt19937_64 rng(0xC00Bu + static_cast<unsigned>(w));
    auto draw = [&](std::int64_t lo, std::int64_t hi) {
        return lo + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(hi - lo + 1));
    };
    const Decomp decomps[] = {Decomp::dim0, Decomp::last_dim, Decomp::grid, Decomp::replicated, Decomp::single_owner};
    const cairn::DType dtypes[] = {cairn::DType::f64, cairn::DType::f32, cairn::DType::i16, cairn::DType::u8};
    for (int it = 0; it < 12; ++it) {
        const int n = static_cast<int>(draw(1, w)), m = static_cast<int>(draw(1, w));
        const auto layout = layouts[draw(0, 1)];
        std::vector<Arr> arrays;
        const int count = static_cast<int>(draw(1, 3));
        for (int a = 0; a < count; ++a) {
            const auto t = dtypes[draw(0, 3)];
            // Rows no longer than a block (FORMAT.md 2.3), from a few bytes to 1.6 MB in all.
            cairn::Shape s;
            switch (draw(1, 3)) {
            case 1: s = {draw(1, 400000)}; break;
            case 2: s = {draw(1, 2000), draw(1, 200)}; break;
            default: s = {draw(1, 60), draw(1, 40), draw(1, 50)}; break;
            }
            arrays.push_back({"a" + std::to_string(a), t, s});
        }
        const auto save_d = decomps[draw(0, 4)];
        std::vector<std::vector<cairn::Box>> boxes(static_cast<std::size_t>(m));
        for (const auto& a : arrays) {
            const auto d = decomps[draw(0, 4)];
            for (int q = 0; q < m; ++q)
                boxes[static_cast<std::size_t>(q)].push_back(decompose(a.shape, d, m, q));
        }
        const std::string path = base + "/c" + std::to_string(it) + (layout == cairn::Layout::container ? ".h5" : "");
        INFO("case " << it << ": " << n << " -> " << m << ", " << layout_name(layout) << ", " << arrays.size()
                     << " arrays");
        REQUIRE(save_on(n, path, arrays, save_d == Decomp::replicated ? Decomp::dim0 : save_d, layout));
        CHECK(check_both_ways(path, m, arrays, boxes, false));
    }
}

TEST_CASE("without checksum verification replicas are still read once", "[io][cooperative]")
{
    const int w = world_size();
    const std::string path = fresh_dir("coop_noverify_" + std::to_string(w)) + "/ckpt";
    const std::vector<Arr> arrays{{"field", cairn::DType::f64, {500, 300}}};
    REQUIRE(save_on(w, path, arrays, Decomp::dim0, cairn::Layout::per_rank));
    const auto boxes = cut(arrays, Decomp::replicated, w);
    const bool ok = run_on(w, [&](const SubComm& comm) {
        const Seen on = load_boxes(path, comm, arrays, boxes, true, false);
        // Exactly the bytes of the array, read once in all.
        return on.data_ok && on.res.bytes_read_all == 500u * 300u * 8u;
    });
    CHECK(ok);
}

TEST_CASE("a damaged block read for several ranks fails the load on each of them", "[io][cooperative][checksum]")
{
    const int w = world_size(), r = world_rank();
    const std::string base = fresh_dir("coop_damaged_" + std::to_string(w));
    const std::vector<Arr> arrays{{"field", cairn::DType::f64, {300, 500}}};
    for (auto layout : layouts) {
        const bool container = layout == cairn::Layout::container;
        const std::string path = base + (container ? "/ckpt.h5" : "/ckpt");
        INFO(layout_name(layout));
        REQUIRE(save_on(1, path, arrays, Decomp::dim0, layout));
        const auto md = cairn::read_metadata(path);
        const auto& entry = md.entries.at("field");
        const auto at = chunk_start(path, entry, entry.chunks.front(), container);
        REQUIRE(at.second >= 0);
        if (r == 0)
            CHECK(flip_bits(at.first, at.second + 8, 0x10)); // the first block: every rank needs it
        MPI_Barrier(MPI_COMM_WORLD);
        const auto boxes = cut(arrays, Decomp::replicated, w);
        const SubComm world(w);
        const auto msg = agreed_error<cairn::error::IntegrityError>(
            [&] { load_boxes(path, world, arrays, boxes, true); });
        INFO(msg);
        CHECK(contains(msg, "'field'"));
        CHECK(contains(msg, container ? "ckpt.h5" : entry.chunks.front().storage.path));
    }
}
