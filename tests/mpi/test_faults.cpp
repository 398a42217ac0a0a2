// Failure agreement: an I/O error injected at a real system call (see
// include/cairn/testing.hpp) or an exception thrown by a planner, on one rank
// and in any phase, makes every rank throw the same exception, quickly;
// nothing is committed and an earlier checkpoint at the same path survives.
//
// These tests carry the tag [faults]. The cheap ones run like the other MPI
// tests (mpi.faults.np1..4); the hidden ones ([.faults]) in their own CTest
// tests (mpi_faults_np2/4) with a short TIMEOUT: a hang is a failure.
#include "fixtures.hpp"
#include "outcome.hpp"

#include <cairn/manager.hpp>
#include <cairn/testing.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

using namespace cairn_test;
using Kind = cairn::Error::Kind;
namespace stdfs = std::filesystem;

namespace {

// Every failure must reach every rank well within this (oversubscribed
// ranks, sanitizer builds included).
constexpr double k_bound_seconds = 30.0;

std::vector<ArraySpec> fault_arrays(int w)
{
    auto specs = standard_arrays();
    // Large enough for several MPI-IO writes per rank with 8 KiB of staging.
    specs.push_back({"big", cairn::DType::f64, {std::int64_t(w) * 2048}, 9});
    return specs;
}

// The state of these tests; `step` tells an earlier checkpoint (4711) from a
// later one (1).
std::unique_ptr<TestState> make_state(bool filled, std::int64_t step = 4711)
{
    const int w = world_size(), r = world_rank();
    auto s = std::make_unique<TestState>(fault_arrays(w), Decomp::dim0, w, r, 1, filled); // ghosts: staged writes
    if (filled)
        s->step = step;
    return s;
}

cairn::SaveOptions save_options(bool overwrite)
{
    cairn::SaveOptions o;
    o.fsync = true;          // reach the sync and fsync points
    o.staging_bytes = 8192;  // many writes through the staging buffer
    o.overwrite = overwrite;
    return o;
}

// True on every rank when `dir` holds a committed checkpoint whose content is
// the standard state with `step`, and no leftovers of a failed save.
bool holds_checkpoint(const std::string& dir, std::int64_t step)
{
    auto s = make_state(false);
    bool ok = true;
    try {
        cairn::load(s->dict, dir, MPI_COMM_WORLD);
        ok = s->step == step;
        s->step = 4711; // errors() compares with the standard state
        ok = ok && s->errors() == 0;
    } catch (const std::exception& e) {
        UNSCOPED_INFO("rank " << world_rank() << ": loading " << dir << ": " << e.what());
        ok = false;
    }
    return all(ok);
}

// True when nothing of a save is left visible at `dir`: no metadata (or
// temporary metadata), no staging or old sibling directories.
bool nothing_committed(const std::string& dir)
{
    return all(!stdfs::exists(dir + "/metadata.h5") && !stdfs::exists(dir + "/.metadata.h5.tmp") &&
               !stdfs::exists(dir + ".cairn-staging") && !stdfs::exists(dir + ".cairn-old"));
}

bool no_leftovers(const std::string& dir)
{
    return all(!stdfs::exists(dir + "/.metadata.h5.tmp") && !stdfs::exists(dir + ".cairn-staging") &&
               !stdfs::exists(dir + ".cairn-old"));
}

// One injected I/O error.
struct Case {
    const char* point;
    bool coordinator;   // on rank 0 (the coordinator's steps) or on the chosen rank
    std::uint64_t after;
    int error;
    const char* phase;  // the phase named in the agreed message
    const char* needle; // a part of the message
};

// Failures of the data path, on any rank.
const Case k_data_cases[] = {
    {"mpiio.open", false, 0, EACCES, "write", "cannot create"},
    {"mpiio.set_size", false, 0, ENOSPC, "write", "cannot set the size"},
    {"mpiio.write", false, 0, ENOSPC, "write", "write of"},
    {"mpiio.write", false, 2, EIO, "write", "write of"},
    {"mpiio.sync", false, 0, EIO, "write", "sync failed"},
    {"mpiio.close", false, 0, EIO, "write", "close failed"},
};

// Failures of the coordinator's steps before the commit point (the rename
// of the metadata into place).
const Case k_coordinator_cases[] = {
    {"fs.mkdir", true, 0, EACCES, "global plan", "cannot create directory"},
    {"fs.fsync", true, 0, EIO, "commit", ".metadata.h5.tmp"},  // the new metadata file
    {"fs.fsync", true, 1, EIO, "commit", "fsync of"},          // the directory, before the rename
    {"fs.rename", true, 0, ENOSPC, "commit", "cannot rename"}, // the metadata into place
    {"fs.write", true, 0, ENOSPC, "commit", "cannot write the metadata"}, // its bytes, built in memory
};

// The ranks that fail in turn: the last one and rank 1.
std::vector<int> failing_ranks()
{
    const int w = world_size();
    std::vector<int> ranks{w - 1};
    if (w > 2)
        ranks.push_back(1);
    return ranks;
}

std::string describe(const Case& c, int rank)
{
    return std::string(c.point) + " after " + std::to_string(c.after) + " on rank " + std::to_string(rank) +
           " errno " + std::to_string(c.error);
}

// Runs a save of the test state at `dir` with `c` armed on `rank` and checks
// that every rank threw the same WriteError naming the rank, phase and (for
// the data path) the rank's file, within the bound.
void check_failed_save(const std::string& dir, const Case& c, int rank, bool overwrite)
{
    auto s = make_state(true, overwrite ? 1 : 4711);
    MPI_Barrier(MPI_COMM_WORLD);
    Outcome o;
    {
        cairn::testing::ScopedFault fault({c.point, rank, c.after, 1, c.error});
        o = attempt([&] { cairn::save(s->dict, dir, MPI_COMM_WORLD, save_options(overwrite)); });
        CHECK(all(cairn::testing::faults_fired() == (world_rank() == rank ? 1u : 0u)));
    }
    INFO(describe(c, rank) << ": " << o.what);
    CHECK(same_error_everywhere(o, Kind::write));
    CHECK(all(contains(o.what, "rank " + std::to_string(rank) + " (" + c.phase + "): ")));
    CHECK(all(contains(o.what, c.needle)));
    if (!c.coordinator)
        CHECK(all(contains(o.what, "/__" + std::to_string(rank) + "_0.distcp")));
    CHECK(max_seconds(o) < k_bound_seconds);
}

} // namespace

TEST_CASE("fault injection: the spec syntax and the registry", "[.faults]")
{
    using cairn::testing::Fault;
    const Fault f = cairn::testing::parse_fault(" rank=1, point=mpiio.write ,after=2,errno=ENOSPC,times=3");
    CHECK(f.point == "mpiio.write");
    CHECK(f.rank == 1);
    CHECK(f.after == 2);
    CHECK(f.times == 3);
    CHECK(f.error == ENOSPC);
    const Fault g = cairn::testing::parse_fault("point=fs.rename,errno=13");
    CHECK(g.rank == -1);
    CHECK(g.after == 0);
    CHECK(g.times == 1);
    CHECK(g.error == EACCES);
    CHECK(!g.kill);
    const Fault k = cairn::testing::parse_fault("rank=3,point=drain.copy,after=1,action=kill");
    CHECK(k.point == "drain.copy");
    CHECK(k.kill);
    CHECK(!cairn::testing::parse_fault("point=fs.rename,action=fail").kill);
    for (const char* bad : {"", "rank=1", "point=mpiio.writ", "point=fs.rename,errno=ENOTANERRNO",
                            "point=fs.rename,after=-1", "point=fs.rename,colour=red", "point=fs.rename,rank=x",
                            "point=fs.rename,action=abort"})
        CHECK_THROWS_AS(cairn::testing::parse_fault(bad), cairn::error::WrongAPIUsage);
    CHECK_THROWS_AS(cairn::testing::arm_fault(Fault{"no.such.point", -1, 0, 1, EIO}), cairn::error::WrongAPIUsage);
    CHECK_THROWS_AS(cairn::testing::arm_fault(Fault{"fs.rename", -1, 0, 1, 0}), cairn::error::WrongAPIUsage);
    const auto points = cairn::testing::fault_points();
    for (const char* p : {"mpiio.open", "mpiio.write", "mpiio.read", "mpiio.sync", "fs.rename", "fs.fsync", "fs.mkdir",
                          "fs.reserve", "fs.write",
                          "h5.create", "h5.open", "h5.write", "h5.read", "h5.flush", "h5.close", "drain.copy",
                          "drain.range"})
        CHECK(std::find(points.begin(), points.end(), p) != points.end());
    CHECK(cairn::testing::faults_fired() == 0);
}

TEST_CASE("an I/O error on one rank while saving fails every rank the same way and commits nothing",
          "[.faults][commit]")
{
    const int w = world_size();
    const std::string base = fresh_dir("faults_save_" + std::to_string(w));
    int n = 0;
    for (const int rank : failing_ranks())
        for (const auto& c : k_data_cases) {
            const std::string dir = base + "/c" + std::to_string(n++);
            check_failed_save(dir, c, rank, false);
            CHECK(nothing_committed(dir));
        }
    for (const auto& c : k_coordinator_cases) {
        const std::string dir = base + "/c" + std::to_string(n++);
        check_failed_save(dir, c, 0, false);
        CHECK(nothing_committed(dir));
    }
    // Saving at a place where an earlier save failed works.
    auto s = make_state(true);
    cairn::save(s->dict, base + "/c0", MPI_COMM_WORLD, save_options(false));
    CHECK(holds_checkpoint(base + "/c0", 4711));
}

TEST_CASE("a failed replacement leaves the earlier checkpoint intact", "[.faults][commit]")
{
    const int w = world_size();
    const std::string dir = fresh_dir("faults_overwrite_" + std::to_string(w)) + "/ckpt";
    auto s = make_state(true);
    cairn::save(s->dict, dir, MPI_COMM_WORLD, save_options(false));
    REQUIRE(holds_checkpoint(dir, 4711));

    for (const int rank : failing_ranks())
        for (const auto& c : k_data_cases) {
            check_failed_save(dir, c, rank, true);
            INFO(describe(c, rank));
            CHECK(holds_checkpoint(dir, 4711));
            CHECK(no_leftovers(dir));
        }
    // The coordinator's steps of a replacement: removing an old staging
    // directory, writing the metadata, the exchange that swaps the new
    // checkpoint in (the two renames without it: the next test).
    const Case replace_cases[] = {
        {"fs.remove", true, 0, EBUSY, "global plan", "cannot remove"},
        {"fs.fsync", true, 0, EIO, "commit", ".metadata.h5.tmp"},
        {"fs.rename", true, 0, ENOSPC, "commit", "cannot rename"}, // metadata into place (in staging)
        {"fs.rename", true, 1, EACCES, "commit", "cannot rename"}, // the exchange of the new and the old
    };
    for (const auto& c : replace_cases) {
        check_failed_save(dir, c, 0, true);
        INFO(describe(c, 0));
        CHECK(holds_checkpoint(dir, 4711));
        CHECK(no_leftovers(dir));
    }
    // A replacement without a fault still works.
    auto s1 = make_state(true, 1);
    cairn::save(s1->dict, dir, MPI_COMM_WORLD, save_options(true));
    CHECK(holds_checkpoint(dir, 1));
    CHECK(no_leftovers(dir));
}

// A replacement swaps the new checkpoint in with one exchange
// (renameat2 RENAME_EXCHANGE), so no moment leaves the path without a
// checkpoint; where the file system cannot (EINVAL, injected here), with two
// renames. Both leave nothing beside the path, and a failure of any of
// these calls leaves the old checkpoint in place.
TEST_CASE("a replacement swaps in one exchange, or in two renames without it", "[.faults][commit]")
{
    const int w = world_size();
    const std::string dir = fresh_dir("faults_exchange_" + std::to_string(w)) + "/ckpt";
    const auto save = [&](std::int64_t step) {
        auto s = make_state(true, step);
        MPI_Barrier(MPI_COMM_WORLD);
        return attempt([&] { cairn::save(s->dict, dir, MPI_COMM_WORLD, save_options(true)); });
    };
    {
        auto s = make_state(true);
        cairn::save(s->dict, dir, MPI_COMM_WORLD, save_options(false));
    }
    REQUIRE(holds_checkpoint(dir, 4711));

    // Two fs.rename calls: the metadata into place, the exchange; a fault on
    // a third (the two-rename path's last) never fires.
    {
        cairn::testing::ScopedFault fault({"fs.rename", 0, 2, 0, EIO});
        const Outcome o = save(1);
        INFO(o.what);
        CHECK(all(!o.threw));
        CHECK(all(cairn::testing::faults_fired() == 0u));
    }
    CHECK(holds_checkpoint(dir, 1));
    CHECK(no_leftovers(dir));

    // The exchange failing: named as such; the old checkpoint stays.
    {
        cairn::testing::ScopedFault fault({"fs.rename", 0, 1, 1, EIO});
        const Outcome o = save(2);
        INFO(o.what);
        CHECK(same_error_everywhere(o, Kind::write));
        CHECK(all(contains(o.what, "(exchanging them)")));
    }
    CHECK(holds_checkpoint(dir, 1));
    CHECK(no_leftovers(dir));

    // No exchange on this file system: two renames, the same result.
    {
        cairn::testing::ScopedFault fault({"fs.rename", 0, 1, 1, EINVAL});
        const Outcome o = save(3);
        INFO(o.what);
        CHECK(all(!o.threw));
        CHECK(all(cairn::testing::faults_fired() == (world_rank() == 0 ? 1u : 0u)));
    }
    CHECK(holds_checkpoint(dir, 3));
    CHECK(no_leftovers(dir));

    // ... where either rename failing (the old checkpoint aside, the new
    // one in) leaves the old checkpoint in place.
    for (const std::uint64_t after : {2, 3}) {
        cairn::testing::ScopedFault fault({"fs.rename", 0, 1, 1, EINVAL});
        cairn::testing::arm_fault({"fs.rename", 0, after, 1, EIO});
        const Outcome o = save(4);
        INFO("rename " << after << ": " << o.what);
        CHECK(same_error_everywhere(o, Kind::write));
        CHECK(all(contains(o.what, "cannot rename")));
        CHECK(holds_checkpoint(dir, 3));
        CHECK(no_leftovers(dir));
    }
    // ... and a failed sync of the parent after the exchange swaps back.
    {
        cairn::testing::ScopedFault fault({"fs.fsync", 0, 3, 1, EIO});
        const Outcome o = save(5);
        INFO(o.what);
        CHECK(same_error_everywhere(o, Kind::write));
    }
    CHECK(holds_checkpoint(dir, 3));
    CHECK(no_leftovers(dir));
}

// A replacement killed between the two renames of the fallback leaves no
// checkpoint at the path, its new version at path.cairn-staging and the old
// one at path.cairn-old. A load there fails with an error that names the
// complete sibling and the repair; repair_checkpoint puts the new one in
// place and removes the old.
TEST_CASE("a load beside an interrupted replacement names it; repair_checkpoint finishes it", "[.faults][commit]")
{
    const int w = world_size();
    const std::string base = fresh_dir("faults_interrupted_" + std::to_string(w));
    const std::string dir = base + "/ckpt";
    {
        auto s = make_state(true, 4711);
        cairn::save(s->dict, base + "/old", MPI_COMM_WORLD, save_options(false));
        auto s1 = make_state(true, 1);
        cairn::save(s1->dict, base + "/new", MPI_COMM_WORLD, save_options(false));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (world_rank() == 0) {
        stdfs::rename(base + "/old", dir + ".cairn-old");
        stdfs::rename(base + "/new", dir + ".cairn-staging");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    auto s = make_state(false);
    const Outcome o = attempt([&] { cairn::load(s->dict, dir, MPI_COMM_WORLD); });
    INFO(o.what);
    CHECK(same_error_everywhere(o, Kind::not_found));
    CHECK(all(contains(o.what, dir + ".cairn-staging (the new checkpoint)")));
    CHECK(all(contains(o.what, dir + ".cairn-old (the checkpoint it replaced)")));
    CHECK(all(contains(o.what, "cairn repair " + dir)));
    const Outcome v = attempt([&] { cairn::verify(dir, MPI_COMM_WORLD); });
    CHECK(all(contains(v.what, "cairn repair " + dir)));

    std::vector<cairn::Leftover> done;
    if (world_rank() == 0)
        done = cairn::repair_checkpoint(dir);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(all(done.size() == (world_rank() == 0 ? 2u : 0u)));
    CHECK(holds_checkpoint(dir, 1));
    CHECK(no_leftovers(dir));
    if (world_rank() == 0)
        CHECK(cairn::repair_checkpoint(dir).empty());
}

// Failures of the coordinator after the metadata has been renamed into place
// (syncing directories, removing the replaced checkpoint). Whatever save
// reports must match what is on disk: when every rank throws, the new
// checkpoint must not be visible (the earlier one is); when no rank throws,
// the new one is committed.
TEST_CASE("a failure after the commit point leaves what save reports", "[.faults][commit]")
{
    const int w = world_size();
    const std::string base = fresh_dir("faults_post_commit_" + std::to_string(w));
    struct Post {
        const char* point;
        std::uint64_t after;
        bool overwrite;
    };
    const Post cases[] = {
        {"fs.fsync", 2, false}, // the checkpoint directory, after the rename
        {"fs.fsync", 3, false}, // its parent
        {"fs.fsync", 3, true},  // the parent, after the new checkpoint was swapped in
        {"fs.remove", 2, true}, // removing the replaced checkpoint
    };
    int n = 0;
    for (const auto& c : cases) {
        const std::string dir = base + "/c" + std::to_string(n++);
        if (c.overwrite) {
            auto s0 = make_state(true);
            cairn::save(s0->dict, dir, MPI_COMM_WORLD, save_options(false));
        }
        auto s = make_state(true, 1);
        MPI_Barrier(MPI_COMM_WORLD);
        Outcome o;
        {
            cairn::testing::ScopedFault fault({c.point, 0, c.after, 1, EIO});
            o = attempt([&] { cairn::save(s->dict, dir, MPI_COMM_WORLD, save_options(c.overwrite)); });
            CHECK(all(cairn::testing::faults_fired() == (world_rank() == 0 ? 1u : 0u)));
        }
        INFO(c.point << " after " << c.after << (c.overwrite ? " (replacing)" : "") << ": " << o.what);
        CHECK(max_seconds(o) < k_bound_seconds);
        if (all(o.threw)) {
            CHECK(same_error_everywhere(o, Kind::write));
            if (c.overwrite)
                CHECK(holds_checkpoint(dir, 4711));
            else
                CHECK(nothing_committed(dir));
        } else {
            CHECK(all(!o.threw && !o.foreign));
            CHECK(holds_checkpoint(dir, 1));
        }
    }
}

TEST_CASE("an I/O error on one rank while loading fails every rank the same way", "[.faults]")
{
    const int w = world_size();
    const std::string dir = fresh_dir("faults_load_" + std::to_string(w)) + "/ckpt";
    {
        auto s = make_state(true);
        cairn::save(s->dict, dir, MPI_COMM_WORLD, save_options(false));
    }
    const Case cases[] = {
        {"mpiio.open", false, 0, EACCES, "read", "cannot open"},
        {"mpiio.read", false, 0, EIO, "read", "read of"},
        {"mpiio.read", false, 1, EIO, "read", "read of"},
        {"mpiio.close", false, 0, EIO, "read", "close failed"},
    };
    for (const int rank : failing_ranks())
        for (const auto& c : cases) {
            auto s = make_state(false);
            MPI_Barrier(MPI_COMM_WORLD);
            Outcome o;
            {
                cairn::testing::ScopedFault fault({c.point, rank, c.after, 1, c.error});
                o = attempt([&] { cairn::load(s->dict, dir, MPI_COMM_WORLD); });
            }
            INFO(describe(c, rank) << ": " << o.what);
            CHECK(same_error_everywhere(o, Kind::read));
            CHECK(all(contains(o.what, "rank " + std::to_string(rank) + " (read): ")));
            CHECK(all(contains(o.what, c.needle)));
            CHECK(all(contains(o.what, ".distcp")));
            CHECK(max_seconds(o) < k_bound_seconds);
        }
    // The checkpoint itself is fine.
    CHECK(holds_checkpoint(dir, 4711));
}

TEST_CASE("an injected write failure on one rank reaches committed() of an async save on every rank",
          "[.faults][async]")
{
    const int w = world_size();
    const std::string dir = fresh_dir("faults_async_" + std::to_string(w)) + "/ckpt";
    for (auto mode : {cairn::AsyncStaging::full_copy, cairn::AsyncStaging::bounded})
        for (const int rank : failing_ranks()) {
            auto s = make_state(true);
            auto o = save_options(false);
            o.async_staging = mode;
            MPI_Barrier(MPI_COMM_WORLD);
            Outcome out;
            {
                cairn::testing::ScopedFault fault({"mpiio.write", rank, 1, 1, ENOSPC});
                out = attempt([&] { cairn::async_save(s->dict, dir, MPI_COMM_WORLD, o).wait(); });
            }
            INFO("rank " << rank << ": " << out.what);
            CHECK(same_error_everywhere(out, Kind::write));
            CHECK(all(contains(out.what, "rank " + std::to_string(rank) + " (write): ")));
            CHECK(all(contains(out.what, "/__" + std::to_string(rank) + "_0.distcp")));
            CHECK(max_seconds(out) < k_bound_seconds);
            CHECK(nothing_committed(dir));
        }
}

TEST_CASE("a failed per-rank save into a new path leaves nothing there", "[faults][cleanup]")
{
    // Into a path that did not exist (nor its parent), the failed save
    // removes what it created; into an existing directory without a
    // checkpoint, what it wrote there; a checkpoint it was replacing stays.
    const int w = world_size();
    const std::string base = fresh_dir("faults_cleanup_" + std::to_string(w));
    const Case cases[] = {
        {"mpiio.write", false, 1, EIO, "write", "write of"},            // a data file, half written
        {"fs.rename", true, 0, ENOSPC, "commit", "cannot rename"},      // the metadata into place
        {"fs.fsync", true, 2, EIO, "commit", "fsync of"},               // the directory, after the rename
    };
    int n = 0;
    for (const bool grouped : {false, true})
        for (const auto& c : cases) {
            const int rank = c.coordinator ? 0 : w - 1;
            const std::string parent = base + "/new" + std::to_string(n);
            const std::string fresh = parent + "/ckpt";
            const std::string existing = base + "/dir" + std::to_string(n++);
            if (world_rank() == 0)
                stdfs::create_directories(existing);
            for (const auto& dir : {fresh, existing}) {
                auto s = make_state(true, 1);
                auto o = save_options(false);
                if (grouped)
                    o.per_rank.files = cairn::DataFiles::in_all(1);
                MPI_Barrier(MPI_COMM_WORLD);
                Outcome out;
                {
                    cairn::testing::ScopedFault fault({c.point, rank, c.after, 1, c.error});
                    out = attempt([&] { cairn::save(s->dict, dir, MPI_COMM_WORLD, o); });
                    CHECK(all(cairn::testing::faults_fired() == (world_rank() == rank ? 1u : 0u)));
                }
                INFO(describe(c, rank) << (grouped ? " (one file)" : "") << " into " << dir << ": " << out.what);
                CHECK(same_error_everywhere(out, Kind::write));
                // (A group's members may report the group's failure first.)
                CHECK(all(contains(out.what, grouped && !c.coordinator ? ".distcp" : c.needle)));
                if (dir == fresh) {
                    CHECK(all(!stdfs::exists(fresh) && !stdfs::exists(parent)));
                } else {
                    bool empty = false;
                    if (world_rank() == 0)
                        empty = stdfs::is_directory(dir) && stdfs::is_empty(dir);
                    CHECK(all(world_rank() != 0 || empty));
                }
            }
        }
    // A failed replacement leaves the earlier checkpoint as it was.
    const std::string dir = base + "/kept";
    auto s0 = make_state(true);
    cairn::save(s0->dict, dir, MPI_COMM_WORLD, save_options(false));
    {
        auto s = make_state(true, 1);
        cairn::testing::ScopedFault fault({"mpiio.write", w - 1, 1, 1, EIO});
        const Outcome out = attempt([&] { cairn::save(s->dict, dir, MPI_COMM_WORLD, save_options(true)); });
        CHECK(same_error_everywhere(out, Kind::write));
    }
    CHECK(holds_checkpoint(dir, 4711));
    CHECK(no_leftovers(dir));
}

TEST_CASE("a failed commit of a container leaves the earlier container intact", "[faults][container]")
{
    const int w = world_size();
    const std::string file = fresh_dir("faults_container_" + std::to_string(w)) + "/ckpt.h5";
    auto s = make_state(true);
    cairn::save(s->dict, file, MPI_COMM_WORLD, save_options(false));
    REQUIRE(holds_checkpoint(file, 4711));
    const Case cases[] = {
        {"fs.fsync", true, 0, EIO, "commit", "fsync of"},
        {"fs.rename", true, 0, ENOSPC, "commit", "cannot rename"},
        {"fs.reserve", true, 0, ENOSPC, "write", "cannot reserve"},  // the file's space, before any write
        {"fs.reserve", true, 1, EDQUOT, "commit", "cannot reserve"}, // the metadata group's, before the reopen
    };
    for (const auto& c : cases) {
        auto s1 = make_state(true, 1);
        MPI_Barrier(MPI_COMM_WORLD);
        Outcome o;
        {
            cairn::testing::ScopedFault fault({c.point, 0, c.after, 1, c.error});
            o = attempt([&] { cairn::save(s1->dict, file, MPI_COMM_WORLD, save_options(true)); });
        }
        INFO(describe(c, 0) << ": " << o.what);
        CHECK(same_error_everywhere(o, Kind::write));
        CHECK(all(contains(o.what, "rank 0 (")));
        CHECK(all(contains(o.what, c.needle)));
        CHECK(max_seconds(o) < k_bound_seconds);
        CHECK(holds_checkpoint(file, 4711));
    }
}

// ---- HDF5 calls of the container layout ---------------------------------------
//
// The points h5.* follow the real HDF5 call (collective calls must be entered
// by every rank): the failing rank notes the error and keeps taking part with
// empty selections, so a failure on one rank must neither hang the others
// nor commit anything.

namespace {

// Failures of a container save's collective part, on any rank.
const Case k_container_write_cases[] = {
    {"h5.create", false, 0, EIO, "write", "creating "},    // H5Fcreate of the temporary file
    {"h5.create", false, 1, ENOSPC, "write", "creating "}, // H5Dcreate2 of the first dataset
    {"h5.write", false, 0, ENOSPC, "write", "writing "},
    {"h5.write", false, 2, EIO, "write", "writing "},
    {"h5.flush", false, 0, EIO, "write", "flushing "},
    {"h5.close", false, 0, EIO, "write", "closing "},
};

// Failures of a container load. Every rank but the coordinator opens the
// file serially to check its share of the datasets (local plan), then in
// parallel to read (read). The coordinator checks its share through the
// serial open that read the metadata (tested below), and on one rank also
// reads through it: at 1 rank (where rank 0 fails) no h5.open case applies.
const Case k_container_read_cases[] = {
    {"h5.open", false, 0, EACCES, "local plan", "opening "},
    {"h5.open", false, 1, EACCES, "read", "opening "},
    {"h5.read", false, 0, EIO, "read", "reading "},
    {"h5.read", false, 1, EIO, "read", "reading "},
    {"h5.close", false, 0, EIO, "read", "closing "},
};

// Every rank threw the same error of `kind` naming the failing rank, the
// phase, the call and `file`, in time.
void check_container_outcome(const Outcome& o, const Case& c, int rank, Kind kind, const std::string& file)
{
    CHECK(same_error_everywhere(o, kind));
    CHECK(all(contains(o.what, "rank " + std::to_string(rank) + " (" + c.phase + "): ")));
    CHECK(all(contains(o.what, c.needle + file)));
    CHECK(all(contains(o.what, std::strerror(c.error))));
    CHECK(max_seconds(o) < k_bound_seconds);
}

bool no_container_temp(const std::string& file) { return all(!stdfs::exists(file + ".cairn-tmp")); }

} // namespace

TEST_CASE("an HDF5 failure on one rank while saving a container fails every rank the same way",
          "[.faults][container]")
{
    const int w = world_size();
    const std::string base = fresh_dir("faults_container_save_" + std::to_string(w));
    const std::string file = base + "/ckpt.h5";
    auto s0 = make_state(true);
    cairn::save(s0->dict, file, MPI_COMM_WORLD, save_options(false));
    REQUIRE(holds_checkpoint(file, 4711));

    int n = 0;
    for (const int rank : failing_ranks())
        for (const auto& c : k_container_write_cases)
            for (const bool replacing : {true, false}) {
                // Replacing the earlier container, and saving a new one.
                const std::string id = replacing ? file : base + "/new" + std::to_string(n++) + ".h5";
                auto s = make_state(true, 1);
                MPI_Barrier(MPI_COMM_WORLD);
                Outcome o;
                {
                    cairn::testing::ScopedFault fault({c.point, rank, c.after, 1, c.error});
                    o = attempt([&] { cairn::save(s->dict, id, MPI_COMM_WORLD, save_options(replacing)); });
                    CHECK(all(cairn::testing::faults_fired() == (world_rank() == rank ? 1u : 0u)));
                }
                INFO(describe(c, rank) << (replacing ? " (replacing)" : "") << ": " << o.what);
                check_container_outcome(o, c, rank, Kind::write, id + ".cairn-tmp");
                CHECK(no_container_temp(id));
                if (replacing)
                    CHECK(holds_checkpoint(file, 4711));
                else
                    CHECK(all(!stdfs::exists(id)));
            }
    // The coordinator's reopening of the written file, before the commit.
    {
        const Case c{"h5.open", true, 0, EIO, "commit", "reopening "};
        auto s = make_state(true, 1);
        MPI_Barrier(MPI_COMM_WORLD);
        Outcome o;
        {
            cairn::testing::ScopedFault fault({c.point, 0, c.after, 1, c.error});
            o = attempt([&] { cairn::save(s->dict, file, MPI_COMM_WORLD, save_options(true)); });
        }
        INFO(describe(c, 0) << ": " << o.what);
        check_container_outcome(o, c, 0, Kind::write, file + ".cairn-tmp");
        CHECK(no_container_temp(file));
        CHECK(holds_checkpoint(file, 4711));
    }
    // Without a fault, the replacement commits.
    auto s1 = make_state(true, 1);
    cairn::save(s1->dict, file, MPI_COMM_WORLD, save_options(true));
    CHECK(holds_checkpoint(file, 1));
    CHECK(no_container_temp(file));
}

TEST_CASE("a write failure on one rank between the writeback pieces of a chunk fails every rank the same way",
          "[.faults][writeback]")
{
    // Dense chunks of 2 MiB per rank with writeback_bytes 1 MiB: written in
    // pieces of 1 MiB (container: collective rounds, per-rank: one MPI-IO
    // write each). The second piece fails on one rank: every rank reports
    // it, none hangs in the remaining rounds, and the checkpoint it was
    // replacing is intact.
    const int w = world_size(), r = world_rank();
    const std::string base = fresh_dir("faults_writeback_" + std::to_string(w));
    const std::vector<ArraySpec> specs{{"a.wide", cairn::DType::f64, {std::int64_t(w) * 4, 65536}, 51}};
    auto options = [] {
        cairn::SaveOptions o;
        o.writeback_bytes = std::size_t(1) << 20;
        o.staging_bytes = std::size_t(1) << 20; // per-rank: chunks of 128 KiB and more go straight from memory
        o.overwrite = true;
        REQUIRE(o.fsync);
        return o;
    };
    auto holds = [&](const std::string& id, std::int64_t step) {
        TestState back(specs, Decomp::grid, w, w - 1 - r, 0, false);
        try {
            cairn::load(back.dict, id, MPI_COMM_WORLD);
        } catch (const std::exception& e) {
            UNSCOPED_INFO("rank " << r << ": loading " << id << ": " << e.what());
            return all(false);
        }
        const bool ok = back.step == step;
        back.step = 4711; // errors() compares with the standard values
        return all(ok && back.errors() == 0);
    };
    const Case cases[] = {
        {"mpiio.write", false, 1, EIO, "write", "write of"},
        {"h5.write", false, 1, ENOSPC, "write", "writing "},
    };
    for (const auto& c : cases) {
        const bool container = std::string(c.point) == "h5.write";
        const std::string id = base + (container ? "/ckpt.h5" : "/ckpt");
        TestState good(specs, Decomp::dim0, w, r, 0, true);
        cairn::save(good.dict, id, MPI_COMM_WORLD, options());
        REQUIRE(holds(id, 4711));
        for (const int rank : failing_ranks()) {
            TestState s(specs, Decomp::dim0, w, r, 0, true);
            s.step = 1;
            MPI_Barrier(MPI_COMM_WORLD);
            Outcome o;
            {
                cairn::testing::ScopedFault fault({c.point, rank, c.after, 1, c.error});
                o = attempt([&] { cairn::save(s.dict, id, MPI_COMM_WORLD, options()); });
                CHECK(all(cairn::testing::faults_fired() == (world_rank() == rank ? 1u : 0u)));
            }
            INFO(describe(c, rank) << ": " << o.what);
            CHECK(same_error_everywhere(o, Kind::write));
            CHECK(all(contains(o.what, "rank " + std::to_string(rank) + " (write): ")));
            CHECK(all(contains(o.what, c.needle)));
            CHECK(all(contains(o.what, container ? "a.wide" : "__" + std::to_string(rank) + "_0.distcp")));
            CHECK(max_seconds(o) < k_bound_seconds);
            CHECK(holds(id, 4711));
        }
    }
}

TEST_CASE("an HDF5 failure on one rank while loading a container fails every rank the same way",
          "[faults][container]")
{
    const int w = world_size();
    const std::string file = fresh_dir("faults_container_load_" + std::to_string(w)) + "/ckpt.h5";
    {
        auto s = make_state(true);
        cairn::save(s->dict, file, MPI_COMM_WORLD, save_options(false));
    }
    // Verified reads (independent, whole checksum blocks) and plain ones
    // (collective transfers where several ranks read a dataset).
    for (const bool verify : {true, false})
        for (const int rank : failing_ranks())
            for (Case c : k_container_read_cases) {
                if (rank == 0 && std::string(c.point) == "h5.open")
                    continue; // the coordinator's only open is the metadata's
                auto s = make_state(false);
                cairn::LoadOptions lo;
                lo.verify_checksums = verify;
                MPI_Barrier(MPI_COMM_WORLD);
                Outcome o;
                {
                    cairn::testing::ScopedFault fault({c.point, rank, c.after, 1, c.error});
                    o = attempt([&] { cairn::load(s->dict, file, MPI_COMM_WORLD, lo); });
                    CHECK(all(cairn::testing::faults_fired() == (world_rank() == rank ? 1u : 0u)));
                }
                INFO(describe(c, rank) << (verify ? " (verified)" : "") << ": " << o.what);
                check_container_outcome(o, c, rank, Kind::read, file);
            }
    // The coordinator's serial open, to read the metadata.
    {
        const Case c{"h5.open", true, 0, EIO, "read metadata", "opening "};
        auto s = make_state(false);
        MPI_Barrier(MPI_COMM_WORLD);
        Outcome o;
        {
            cairn::testing::ScopedFault fault({c.point, 0, c.after, 1, c.error});
            o = attempt([&] { cairn::load(s->dict, file, MPI_COMM_WORLD); });
        }
        INFO(describe(c, 0) << ": " << o.what);
        check_container_outcome(o, c, 0, Kind::read, file);
    }
    // The container itself is fine.
    CHECK(holds_checkpoint(file, 4711));
}

TEST_CASE("a container load opens the file once at 1 rank, twice per rank at more", "[faults][container]")
{
    // Every h5.open past the expected ones fails (times = 0: all later
    // calls), and so does any MPI-IO open of the per-rank layout's code
    // (the direct reads of small datasets use HDF5's own handle): the load,
    // verified or not, and verify() still succeed. The coordinator's serial
    // open reads the metadata and checks its share of the datasets; others
    // open serially for their share; with several ranks all then open
    // together with the MPI-IO driver for the collective transfers. verify()
    // reads through the serial open.
    const int w = world_size();
    const std::string file = fresh_dir("faults_container_opens_" + std::to_string(w)) + "/ckpt.h5";
    {
        auto s = make_state(true);
        cairn::save(s->dict, file, MPI_COMM_WORLD, save_options(false));
    }
    const std::uint64_t opens = w == 1 ? 1 : 2;
    for (const bool verify : {true, false}) {
        auto s = make_state(false);
        cairn::LoadOptions lo;
        lo.verify_checksums = verify;
        MPI_Barrier(MPI_COMM_WORLD);
        Outcome o;
        {
            cairn::testing::ScopedFault fault({"h5.open", -1, opens, 0, EACCES});
            cairn::testing::arm_fault({"mpiio.open", -1, 0, 0, EACCES});
            o = attempt([&] { cairn::load(s->dict, file, MPI_COMM_WORLD, lo); });
            CHECK(all(cairn::testing::faults_fired() == 0));
        }
        INFO((verify ? "verified: " : "") << o.what);
        CHECK(all(!o.threw && !o.foreign));
        CHECK(all(s->step == 4711));
        CHECK(all(s->errors() == 0));
    }
    {
        cairn::testing::ScopedFault fault({"h5.open", -1, 1, 0, EACCES});
        const auto report = cairn::verify(file, MPI_COMM_WORLD);
        CHECK(all(cairn::testing::faults_fired() == 0));
        CHECK(report.ok());
        CHECK(report.chunks > 0);
    }
}

// ---- exceptions thrown by planners ------------------------------------------

namespace {

enum class Throw { runtime_error, mismatch, bad_alloc, not_an_exception };

[[noreturn]] void throw_as(Throw how, const std::string& step)
{
    switch (how) {
    case Throw::runtime_error: throw std::runtime_error("planner failed in " + step);
    case Throw::mismatch: throw cairn::error::Mismatch("planner refused in " + step);
    case Throw::bad_alloc: throw std::bad_alloc();
    case Throw::not_an_exception: throw 42;
    }
    throw 0;
}

// Throws in step `step` on world rank `rank`.
class ThrowingSavePlanner : public cairn::DefaultSavePlanner {
public:
    ThrowingSavePlanner(std::string step, int rank, Throw how) : m_step(std::move(step)), m_rank(rank), m_how(how) {}
    void set_up_planner(cairn::StateDict& state, bool coord) override
    {
        maybe("set_up_planner");
        DefaultSavePlanner::set_up_planner(state, coord);
    }
    cairn::SavePlan create_local_plan() override
    {
        maybe("create_local_plan");
        return DefaultSavePlanner::create_local_plan();
    }
    std::pair<std::vector<cairn::SavePlan>, cairn::Metadata> create_global_plan(std::vector<cairn::SavePlan> p) override
    {
        maybe("create_global_plan");
        return DefaultSavePlanner::create_global_plan(std::move(p));
    }
    cairn::SavePlan finish_plan(cairn::SavePlan p) override
    {
        maybe("finish_plan");
        return DefaultSavePlanner::finish_plan(std::move(p));
    }
    cairn::DataRef resolve_data(const cairn::WriteItem& item) override
    {
        if (item.fqn == "big")
            maybe("resolve_data");
        return DefaultSavePlanner::resolve_data(item);
    }

private:
    void maybe(const std::string& step)
    {
        if (step == m_step && world_rank() == m_rank)
            throw_as(m_how, step);
    }
    std::string m_step;
    int m_rank;
    Throw m_how;
};

class ThrowingLoadPlanner : public cairn::DefaultLoadPlanner {
public:
    ThrowingLoadPlanner(std::string step, int rank, Throw how) : m_step(std::move(step)), m_rank(rank), m_how(how) {}
    void set_up_planner(cairn::StateDict& state, const cairn::Metadata& md, bool coord) override
    {
        maybe("set_up_planner");
        DefaultLoadPlanner::set_up_planner(state, md, coord);
    }
    cairn::LoadPlan create_local_plan() override
    {
        maybe("create_local_plan");
        return DefaultLoadPlanner::create_local_plan();
    }
    bool needs_global_plan() const override { return m_step == "create_global_plan" || m_step == "finish_plan"; }
    std::vector<cairn::LoadPlan> create_global_plan(std::vector<cairn::LoadPlan> p) override
    {
        maybe("create_global_plan");
        return DefaultLoadPlanner::create_global_plan(std::move(p));
    }
    cairn::LoadPlan finish_plan(cairn::LoadPlan p) override
    {
        maybe("finish_plan");
        return DefaultLoadPlanner::finish_plan(std::move(p));
    }
    cairn::DataRef resolve_destination(const cairn::ReadItem& item) override
    {
        if (item.fqn == "big")
            maybe("resolve_destination");
        return DefaultLoadPlanner::resolve_destination(item);
    }
    void load_bytes(const cairn::ReadItem& item, std::vector<std::byte> data) override
    {
        maybe("load_bytes");
        DefaultLoadPlanner::load_bytes(item, std::move(data));
    }
    void finish() override
    {
        maybe("finish");
        DefaultLoadPlanner::finish();
    }

private:
    void maybe(const std::string& step)
    {
        if (step == m_step && world_rank() == m_rank)
            throw_as(m_how, step);
    }
    std::string m_step;
    int m_rank;
    Throw m_how;
};

struct PlannerCase {
    const char* step;
    bool coordinator_only;
    const char* phase;
};

// The agreed message and kind for an exception of `how` thrown in `step`.
void check_planner_outcome(const Outcome& o, Throw how, const PlannerCase& c, int rank)
{
    INFO(c.step << " on rank " << rank << ": " << o.what);
    const std::string prefix = "rank " + std::to_string(rank) + " (" + c.phase + "): ";
    switch (how) {
    case Throw::runtime_error:
        CHECK(same_error_everywhere(o, Kind::generic));
        CHECK(all(o.what == prefix + "planner failed in " + c.step));
        break;
    case Throw::mismatch:
        CHECK(same_error_everywhere(o, Kind::mismatch));
        CHECK(all(o.what == prefix + "planner refused in " + c.step));
        break;
    case Throw::bad_alloc:
        CHECK(same_error_everywhere(o, Kind::generic));
        CHECK(all(o.what == prefix + "out of memory"));
        break;
    case Throw::not_an_exception:
        CHECK(same_error_everywhere(o, Kind::generic));
        CHECK(all(o.what == prefix + "unknown exception"));
        break;
    }
    CHECK(max_seconds(o) < k_bound_seconds);
}

const Throw k_throws[] = {Throw::runtime_error, Throw::mismatch, Throw::bad_alloc, Throw::not_an_exception};

} // namespace

TEST_CASE("an exception from a save planner on one rank, in any step, fails every rank the same way",
          "[.faults][planner]")
{
    const int w = world_size();
    const std::string base = fresh_dir("faults_save_planner_" + std::to_string(w));
    const PlannerCase cases[] = {
        {"set_up_planner", false, "local plan"},
        {"create_local_plan", false, "local plan"},
        {"create_global_plan", true, "global plan"},
        {"finish_plan", false, "finish plan"},
        {"resolve_data", false, "write"},
    };
    int n = 0;
    for (const auto& c : cases)
        for (const int rank : c.coordinator_only ? std::vector<int>{0} : failing_ranks())
            for (const Throw how : k_throws) {
                const std::string dir = base + "/c" + std::to_string(n++);
                auto s = make_state(true);
                auto o = save_options(false);
                o.planner = std::make_shared<ThrowingSavePlanner>(c.step, rank, how);
                const Outcome out = attempt([&] { cairn::save(s->dict, dir, MPI_COMM_WORLD, o); });
                check_planner_outcome(out, how, c, rank);
                CHECK(nothing_committed(dir));
            }
}

TEST_CASE("an exception from a load planner on one rank, in any step, fails every rank the same way",
          "[.faults][planner]")
{
    const int w = world_size();
    const std::string dir = fresh_dir("faults_load_planner_" + std::to_string(w)) + "/ckpt";
    {
        auto s = make_state(true);
        cairn::save(s->dict, dir, MPI_COMM_WORLD, save_options(false));
    }
    const PlannerCase cases[] = {
        {"set_up_planner", false, "local plan"},
        {"create_local_plan", false, "local plan"},
        {"create_global_plan", true, "global plan"},
        {"finish_plan", false, "finish plan"},
        {"resolve_destination", false, "read"},
        {"load_bytes", false, "read"},
        {"finish", false, "read"},
    };
    for (const auto& c : cases)
        for (const int rank : c.coordinator_only ? std::vector<int>{0} : failing_ranks())
            for (const Throw how : k_throws) {
                auto s = make_state(false);
                cairn::LoadOptions o;
                o.planner = std::make_shared<ThrowingLoadPlanner>(c.step, rank, how);
                const Outcome out = attempt([&] { cairn::load(s->dict, dir, MPI_COMM_WORLD, o); });
                check_planner_outcome(out, how, c, rank);
            }
    CHECK(holds_checkpoint(dir, 4711));
}
