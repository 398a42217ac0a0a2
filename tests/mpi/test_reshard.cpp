// Save on N ranks with one decomposition, load on M ranks with another, for
// every N, M up to the world size.
#include "fixtures.hpp"

#include <catch2/catch.hpp>

using namespace cairn_test;

namespace {

// Saves the standard state on the first `n` ranks, loads it on the first `m`;
// returns true on every rank when every rank of the load got every value.
bool round_trip(const std::string& dir, int n, Decomp save_d, int m, Decomp load_d, int save_ghost, int load_ghost)
{
    const auto specs = standard_arrays();
    const bool saved = run_on(n, [&](SubComm& c) {
        TestState s(specs, save_d, c.size(), c.rank(), save_ghost, true);
        cairn::SaveOptions o;
        o.fsync = false;
        return cairn::save(s.dict, dir, c.get(), o).entries == specs.size() + 4;
    });
    return saved && run_on(m, [&](SubComm& c) {
        TestState s(specs, load_d, c.size(), c.rank(), load_ghost, false);
        cairn::load(s.dict, dir, c.get());
        return s.errors() == 0;
    });
}

} // namespace

TEST_CASE("save on N ranks, load on M ranks with another decomposition", "[reshard]")
{
    const int w = world_size();
    for (int n = 1; n <= w; ++n) {
        for (int m = 1; m <= w; ++m) {
            const std::string dir = fresh_dir("reshard_" + std::to_string(w)) + "/ckpt_" + std::to_string(n) + "_" +
                                    std::to_string(m);
            INFO("save on " << n << " ranks, load on " << m);
            CHECK(round_trip(dir + "_a", n, Decomp::dim0, m, Decomp::last_dim, 1, 0));
            CHECK(round_trip(dir + "_b", n, Decomp::grid, m, Decomp::grid, 0, 2));
            CHECK(round_trip(dir + "_c", n, Decomp::single_owner, m, Decomp::dim0, 1, 1));
            CHECK(round_trip(dir + "_d", n, Decomp::last_dim, m, Decomp::replicated, 0, 1));
        }
    }
}

TEST_CASE("every dtype round-trips and reshards", "[dtype]")
{
    const int w = world_size();
    std::vector<ArraySpec> specs;
    for (int t = 0; t < cairn::dtype_count; ++t)
        specs.push_back({"dt." + std::string(cairn::dtype_name(static_cast<cairn::DType>(t))),
                         static_cast<cairn::DType>(t), {9, 4}, t});
    const std::string dir = fresh_dir("dtypes_" + std::to_string(w)) + "/ckpt";
    {
        TestState s(specs, Decomp::dim0, w, world_rank(), 1, true);
        cairn::save(s.dict, dir, MPI_COMM_WORLD);
    }
    TestState s(specs, Decomp::last_dim, w, world_rank(), 0, false);
    cairn::load(s.dict, dir, MPI_COMM_WORLD);
    CHECK(all(s.errors() == 0));
    // The metadata records each dtype by name.
    const auto md = cairn::read_metadata(dir);
    for (const auto& spec : specs)
        CHECK(md.entries.at(spec.name).dtype == spec.dtype);
}

TEST_CASE("a load reads only the byte runs it needs", "[reshard][io]")
{
    const int w = world_size();
    const std::string dir = fresh_dir("subbox_" + std::to_string(w)) + "/ckpt";
    // One 512 x 512 f64 array (2 MiB) saved by rank 0 alone.
    const cairn::Shape g{512, 512};
    REQUIRE(run_on(1, [&](SubComm& c) {
        LocalArray a("big", cairn::DType::f64, g, cairn::whole(g), 0, 9);
        a.fill();
        cairn::StateDict sd;
        sd.add_array("big", a.shard());
        cairn::save(sd, dir, c.get());
        return true;
    }));
    // Each rank loads a 16-row band and a 16-column band.
    const int r = world_rank();
    LocalArray rows("big", cairn::DType::f64, g, cairn::Box{{r * 16, 0}, {16, 512}}, 1, 9);
    cairn::StateDict sd;
    sd.add_array("big", rows.shard());
    auto reader = std::make_shared<cairn::DistcpReader>();
    cairn::LoadOptions o;
    o.storage = reader;
    cairn::load(sd, dir, MPI_COMM_WORLD, o);
    CHECK(all(rows.errors() == 0));
    CHECK(all(reader->bytes_read() == 16 * 512 * 8));

    LocalArray cols("big", cairn::DType::f64, g, cairn::Box{{0, r * 16}, {512, 16}}, 0, 9);
    cairn::StateDict sd2;
    sd2.add_array("big", cols.shard());
    cairn::load(sd2, dir, MPI_COMM_WORLD, o);
    CHECK(all(cols.errors() == 0));
    // Column runs of 128 bytes with 3968-byte gaps are sieved into one read
    // of their span: at least the 64 KiB needed, less than the whole chunk.
    CHECK(all(reader->bytes_read() < 512 * 512 * 8));
    CHECK(all(reader->bytes_read() >= 512 * 16 * 8));
}
