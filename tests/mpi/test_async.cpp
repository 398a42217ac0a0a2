// async_save: the caller may reuse its buffers once staged; errors in the
// background reach committed on every rank; saves queue, never interleave.
#include "fixtures.hpp"

#include "driver/background.hpp" // detail::async_duplicates

#include <catch2/catch.hpp>

#include <future>

using namespace cairn_test;

namespace {

// Overwrites every array, blob and scalar of a state with junk.
void scribble(TestState& s)
{
    for (auto& a : s.arrays)
        std::fill(a->buf.begin(), a->buf.end(), 0x5A);
    std::fill(s.blob.begin(), s.blob.end(), std::byte{0});
    s.step = -1;
    s.dt = -1;
    s.label = "junk";
}

bool loads_back(const std::string& dir, Decomp d)
{
    const int w = world_size(), r = world_rank();
    TestState back(standard_arrays(), d, w, r, 1, false);
    cairn::load(back.dict, dir, MPI_COMM_WORLD);
    return all(back.errors() == 0);
}

} // namespace

TEST_CASE("async save: buffers may change once staged", "[async]")
{
    const int w = world_size(), r = world_rank();
    const std::string base = fresh_dir("async_" + std::to_string(w));
    for (auto mode : {cairn::AsyncStaging::full_copy, cairn::AsyncStaging::bounded}) {
        const std::string dir = base + (mode == cairn::AsyncStaging::full_copy ? "/full" : "/bounded");
        TestState s(standard_arrays(), Decomp::grid, w, r, 1, true);
        cairn::SaveOptions o;
        o.async_staging = mode;
        o.staging_bytes = 8192; // many flushes through the ring in bounded mode
        auto h = cairn::async_save(s.dict, dir, MPI_COMM_WORLD, o);
        if (mode == cairn::AsyncStaging::full_copy)
            CHECK(h.staged().wait_for(std::chrono::seconds(0)) == std::future_status::ready);
        h.staged().get();
        scribble(s); // the caller moves on while the save is written
        const auto res = h.wait();
        CHECK(h.done());
        CHECK(res.entries == standard_arrays().size() + 4);
        CHECK(cairn::is_distcp_checkpoint(dir));
        CHECK(loads_back(dir, Decomp::last_dim));
    }
}

TEST_CASE("async save (bounded): staged only once the last byte is written", "[async]")
{
    // The writer thread's progress callback holds the write phase at its
    // start until the caller has the handle, then checks at every report
    // with bytes still to write that staged() is not ready yet: no timing.
    const int w = world_size(), r = world_rank();
    for (auto layout : {cairn::Layout::per_rank, cairn::Layout::container}) {
        const std::string dir = fresh_dir("async_staged_" + std::to_string(w)) +
                                (layout == cairn::Layout::container ? "/ckpt.h5" : "/ckpt");
        TestState s(standard_arrays(), Decomp::grid, w, r, 1, true);
        std::promise<void> have_handle;
        const std::shared_future<void> handle_ready = have_handle.get_future().share();
        std::shared_future<void> staged;
        int checks = 0, early = 0; // written by the writer thread only, read after wait()
        cairn::SaveOptions o;
        o.layout = layout;
        o.async_staging = cairn::AsyncStaging::bounded;
        o.staging_bytes = 8192;
        o.progress = [&](const cairn::Progress& p) {
            if (p.phase != cairn::Phase::write || p.done >= p.total)
                return;
            handle_ready.wait();
            ++checks;
            if (staged.wait_for(std::chrono::seconds(0)) == std::future_status::ready)
                ++early;
        };
        auto h = cairn::async_save(s.dict, dir, MPI_COMM_WORLD, o);
        staged = h.staged();
        have_handle.set_value();
        h.wait();
        INFO((layout == cairn::Layout::container ? "container" : "per-rank") << ": " << checks
                                                                              << " reports with bytes to write, "
                                                                              << early << " with staged ready");
        CHECK(all(checks > 0 && early == 0));
        CHECK(loads_back(dir, Decomp::last_dim));
    }
}

TEST_CASE("async save: a failure on one rank reaches committed on every rank", "[async][errors]")
{
    const int w = world_size(), r = world_rank();
    const std::string dir = fresh_dir("async_fail_" + std::to_string(w)) + "/ckpt";
    TestState s(standard_arrays(), Decomp::dim0, w, r, 0, true);
    cairn::SaveOptions o;
    o.storage = std::make_shared<FailingWriter>(w - 1, cairn::DistcpWriterOptions{});
    auto h = cairn::async_save(s.dict, dir, MPI_COMM_WORLD, o);
    std::string msg;
    try {
        h.wait();
    } catch (const cairn::error::WriteError& e) {
        msg = e.what();
    }
    CHECK(all(msg.find("rank " + std::to_string(w - 1) + " (write): injected") != std::string::npos));
    CHECK_FALSE(cairn::is_distcp_checkpoint(dir));

    // Planning errors are thrown by async_save itself, on every rank.
    std::vector<double> buf(4);
    cairn::StateDict bad;
    bad.add_array<double>("u", buf.data(), {w * 4 + 1}, cairn::Box{{r * 4}, {4}});
    CHECK_THROWS_AS(cairn::async_save(bad, dir, MPI_COMM_WORLD), cairn::error::WrongAPIUsage);
}

TEST_CASE("async saves queue behind each other and behind sync saves", "[async]")
{
    const int w = world_size(), r = world_rank();
    const std::string base = fresh_dir("async_queue_" + std::to_string(w));
    TestState s(standard_arrays(), Decomp::dim0, w, r, 0, true);
    cairn::SaveOptions o;
    o.overwrite = true;
    std::vector<cairn::AsyncSave> handles;
    for (int i = 0; i < 3; ++i)
        handles.push_back(cairn::async_save(s.dict, base + "/a" + std::to_string(i % 2), MPI_COMM_WORLD, o));
    // A synchronous save waits for the one in flight.
    cairn::save(s.dict, base + "/sync", MPI_COMM_WORLD, o);
    CHECK(handles[0].done());
    CHECK(handles[1].done());
    CHECK(handles[2].done());
    for (auto& h : handles)
        CHECK_NOTHROW(h.wait());
    cairn::wait_for_async_saves();
    CHECK(loads_back(base + "/a0", Decomp::grid));
    CHECK(loads_back(base + "/a1", Decomp::grid));
    CHECK(loads_back(base + "/sync", Decomp::grid));
}

TEST_CASE("async saves on one communicator share one duplicate of it, freed with it", "[async]")
{
    // async_save keeps its duplicate on the caller's communicator: one per
    // communicator (so grouped files split their groups once), kept after a
    // failed save; MPI_Comm_free of the communicator waits for a save in
    // flight on it.
    const int w = world_size(), r = world_rank();
    const std::string base = fresh_dir("async_dup_" + std::to_string(w));
    TestState s(standard_arrays(), Decomp::dim0, w, r, 0, true);
    MPI_Comm comm = MPI_COMM_NULL, other = MPI_COMM_NULL;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_dup(MPI_COMM_WORLD, &other);
    const std::uint64_t before = cairn::detail::async_duplicates();
    cairn::SaveOptions grouped;
    grouped.per_rank.files = cairn::DataFiles::in_all(1);
    for (int i = 0; i < 3; ++i)
        CHECK_NOTHROW(cairn::async_save(s.dict, base + "/g" + std::to_string(i), comm, grouped).wait());
    CHECK(all(cairn::detail::async_duplicates() == before + 1));

    cairn::SaveOptions failing;
    failing.storage = std::make_shared<FailingWriter>(w - 1, cairn::DistcpWriterOptions{});
    CHECK_THROWS_AS(cairn::async_save(s.dict, base + "/failed", comm, failing).wait(), cairn::error::WriteError);
    CHECK_NOTHROW(cairn::async_save(s.dict, base + "/after", comm, grouped).wait());
    CHECK(all(cairn::detail::async_duplicates() == before + 1));

    CHECK_NOTHROW(cairn::async_save(s.dict, base + "/other", other).wait());
    CHECK(all(cairn::detail::async_duplicates() == before + 2));

    cairn::AsyncSave last = cairn::async_save(s.dict, base + "/last", comm, grouped);
    MPI_Comm_free(&comm);
    CHECK(last.done());
    CHECK_NOTHROW(last.wait());
    MPI_Comm_free(&other);
    for (const char* dir : {"/g2", "/after", "/other", "/last"})
        CHECK(loads_back(base + dir, Decomp::grid));
    CHECK_FALSE(cairn::is_distcp_checkpoint(base + "/failed"));
}

TEST_CASE("device memory without a usable CUDA device fails cleanly on every rank", "[cuda][errors]")
{
    if (cairn::cuda_device_available())
        return; // tests/cuda covers real devices
    const int w = world_size(), r = world_rank();
    const std::string dir = fresh_dir("no_device_" + std::to_string(w)) + "/ckpt";
    std::vector<double> buf(16, 1.0);
    cairn::StateDict sd;
    sd.add_array("u", cairn::ArrayShard{cairn::DType::f64, {w * 16}, cairn::Box{{r * 16}, {16}}, buf.data(), {},
                                        cairn::MemorySpace::cuda});
    std::string msg;
    try {
        cairn::save(sd, dir, MPI_COMM_WORLD);
    } catch (const cairn::Error& e) {
        msg = e.what();
    }
    CHECK(all(!msg.empty()));
    CHECK(all(msg.find("CUDA") != std::string::npos));
    CHECK_FALSE(cairn::is_distcp_checkpoint(dir));
}
