// Save on N ranks with one decomposition, load on M ranks with another, for
// every N, M up to the world size.
#include "fixtures.hpp"

#include <catch2/catch.hpp>

using namespace cairn_test;

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

TEST_CASE("every dtype, 1-d to 3-d, saved on N ranks loads on M ranks, in both layouts", "[dtype][reshard][container]")
{
    const int w = world_size();
    const auto specs = every_dtype_arrays();
    // Pairs of decompositions, taken in turn: ghost layers on either side.
    const Decomp save_ds[] = {Decomp::dim0, Decomp::grid, Decomp::single_owner, Decomp::last_dim};
    const Decomp load_ds[] = {Decomp::last_dim, Decomp::grid, Decomp::dim0, Decomp::replicated};
    const std::string base = fresh_dir("dtype_nm_" + std::to_string(w));
    for (int n = 1; n <= w; ++n) {
        for (int m = 1; m <= w; ++m) {
            const int k = (n + m) % 4;
            const std::string id = base + "/ckpt_" + std::to_string(n) + "_" + std::to_string(m);
            INFO("saved on " << n << " ranks, loaded on " << m << ", decompositions " << k);
            CHECK(round_trip(specs, id, n, save_ds[k], m, load_ds[k], k % 2, 1 - k % 2, cairn::Layout::per_rank));
            // Containers: verified (independent reads of whole checksum
            // blocks) and unverified (collective hyperslab reads).
            CHECK(round_trip(specs, id + ".h5", n, save_ds[k], m, load_ds[k], 1 - k % 2, k % 2,
                             cairn::Layout::container, (n + m) % 2 == 0));
        }
    }
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
        cairn::SaveOptions so;
        so.checksum_block = 64 * 1024; // 16 rows of 4 KiB per checksum block
        cairn::save(sd, dir, c.get(), so);
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
    // Exactly the band: 16 rows = one whole checksum block, verified.
    CHECK(all(reader->bytes_read() == 16 * 512 * 8));
    // Rows 8..24 straddle two blocks: verification reads both, no more.
    LocalArray mid("big", cairn::DType::f64, g, cairn::Box{{r * 16 + 8, 0}, {16, 512}}, 0, 9);
    cairn::StateDict sd3;
    sd3.add_array("big", mid.shard());
    cairn::load(sd3, dir, MPI_COMM_WORLD, o);
    CHECK(all(mid.errors() == 0));
    CHECK(all(reader->bytes_read() == 2 * 16 * 512 * 8));
    // Without verification only the needed bytes are read.
    auto plain = std::make_shared<cairn::DistcpReader>(std::size_t(64) << 20, false);
    cairn::LoadOptions po;
    po.storage = plain;
    cairn::load(sd3, dir, MPI_COMM_WORLD, po);
    CHECK(all(plain->bytes_read() == 16 * 512 * 8));

    LocalArray cols("big", cairn::DType::f64, g, cairn::Box{{0, r * 16}, {512, 16}}, 0, 9);
    cairn::StateDict sd2;
    sd2.add_array("big", cols.shard());
    cairn::load(sd2, dir, MPI_COMM_WORLD, po);
    CHECK(all(cols.errors() == 0));
    // Column runs of 128 bytes with 3968-byte gaps: without verification
    // no gap is read, only the 64 KiB needed.
    CHECK(all(plain->bytes_read() == 512 * 16 * 8));
}
