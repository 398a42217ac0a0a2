// Concurrent use of one checkpoint path (docs/robustness.md, "Concurrent use
// of one path"): a save finds the path claimed by another job, two "jobs"
// (the world split into one communicator per rank) saving to one path, a
// claim taken over during a save, a checkpoint replaced while a load or
// verify reads it. The interleavings are forced with held locks and
// progress callbacks, never with sleeps. Tagged [bad_input]; CTest
// mpi.concurrent.np1..4.
#include "outcome.hpp"

#include <cairn/cairn.hpp>

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

using namespace cairn_test;
using Kind = cairn::Error::Kind;
namespace stdfs = std::filesystem;

namespace {

constexpr std::int64_t k_rows = 4096; // elements of "u" per rank: a few checksum blocks

// One array split over the ranks of `comm`, its values offset by `salt`.
struct Field {
    std::vector<double> u;
    cairn::StateDict dict;

    Field(MPI_Comm comm, double salt)
    {
        int r = 0, w = 1;
        MPI_Comm_rank(comm, &r);
        MPI_Comm_size(comm, &w);
        u.resize(static_cast<std::size_t>(k_rows));
        for (std::int64_t i = 0; i < k_rows; ++i)
            u[static_cast<std::size_t>(i)] = salt + static_cast<double>(r * k_rows + i);
        dict.add_array<double>("u", u.data(), {w * k_rows}, cairn::Box{{r * k_rows}, {k_rows}});
    }
};

cairn::SaveOptions quick()
{
    cairn::SaveOptions o;
    o.fsync = false;
    o.checksum_block = 4096;
    return o;
}

bool on_rank0(bool v)
{
    int i = v ? 1 : 0;
    MPI_Bcast(&i, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return i != 0;
}

// How `f` ended on this rank alone (attempt() meets the other ranks).
template <class F>
Outcome attempt_local(F&& f)
{
    Outcome o;
    try {
        f();
    } catch (const cairn::Error& e) {
        o.threw = true;
        o.kind = e.kind();
        o.what = e.what();
    } catch (const std::exception& e) {
        o.foreign = true;
        o.what = e.what();
    }
    return o;
}

bool committed(const std::string& path)
{
    return on_rank0(world_rank() == 0 && (stdfs::is_regular_file(path) || stdfs::exists(path + "/metadata.h5")));
}

// Holds the lock of a checkpoint path as another job would (rank 0 only):
// an open-file-description lock on <path>.cairn-lock with an owner line.
struct HeldLock {
    int fd = -1;
    explicit HeldLock(const std::string& path)
    {
        if (world_rank() != 0)
            return;
        fd = ::open((path + ".cairn-lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        REQUIRE(fd >= 0);
        struct flock fl {};
        fl.l_type = F_WRLCK;
        fl.l_whence = SEEK_SET;
        REQUIRE(fcntl(fd, F_OFD_SETLK, &fl) == 0);
        const std::string text = "cairn-lock 1\nowner host otherhost, pid 4242, since 2026-01-01T00:00:00Z\n";
        REQUIRE(::pwrite(fd, text.data(), text.size(), 0) == static_cast<ssize_t>(text.size()));
    }
    // Releases the lock and leaves the file, as a job that died would.
    void release()
    {
        if (fd >= 0) {
            ::close(fd);
            fd = -1;
        }
    }
    ~HeldLock() { release(); }
};

} // namespace

TEST_CASE("a save to a path another job holds fails on every rank, naming it", "[bad_input]")
{
    const auto dir = fresh_dir("held_lock_" + std::to_string(world_size()));
    for (const char* ext : {"", ".h5"}) {
        DYNAMIC_SECTION("layout " << (*ext ? "container" : "per-rank"))
        {
            const std::string id = dir + "/ckpt" + ext;
            Field f(MPI_COMM_WORLD, 0.0);
            HeldLock held(id);
            MPI_Barrier(MPI_COMM_WORLD);
            const auto o = attempt([&] { cairn::save(f.dict, id, MPI_COMM_WORLD, quick()); });
            INFO(o.what);
            CHECK(same_error_everywhere(o, Kind::concurrent));
            CHECK(all(contains(o.what, "checkpoint " + id + " is being written by another job (host otherhost, pid 4242")));
            CHECK(max_seconds(o) < 30);
            CHECK(!committed(id));
            CHECK(on_rank0(!stdfs::exists(id + ".cairn-tmp") && !stdfs::exists(id + "/__0_0.distcp")));
            // Once the other job is done, the save goes through and leaves no lock file.
            held.release();
            MPI_Barrier(MPI_COMM_WORLD);
            cairn::save(f.dict, id, MPI_COMM_WORLD, quick());
            CHECK(committed(id));
            CHECK(on_rank0(!stdfs::exists(id + ".cairn-lock")));
        }
    }
}

namespace {

// A DistcpWriter that overrides finish(): the save calls every public step
// of it (no columnar commit), as of any plug-in.
class PlainDistcpWriter : public cairn::DistcpWriter {
public:
    void finish(const cairn::Metadata& md, const std::vector<std::vector<cairn::WriteResult>>& r) override
    {
        cairn::DistcpWriter::finish(md, r);
    }
    cairn::detail::ColumnarWriter* columnar() noexcept override { return nullptr; }
};

// A plug-in that writes through a DistcpWriter and names no lock path: it
// keeps other writers off its target itself.
class UnlockedWriter : public PlainDistcpWriter {
public:
    std::string lock_path() const override { return {}; }
};

} // namespace

TEST_CASE("a storage passed in SaveOptions::storage is locked at its lock_path()", "[bad_input]")
{
    const auto dir = fresh_dir("storage_lock_" + std::to_string(world_size()));
    Field f(MPI_COMM_WORLD, 0.0);
    {
        // A subclass of a built-in writer: its path is locked like the built-in's.
        const std::string id = dir + "/plain";
        auto o = quick();
        o.storage = std::make_shared<PlainDistcpWriter>();
        HeldLock held(id);
        MPI_Barrier(MPI_COMM_WORLD);
        const auto out = attempt([&] { cairn::save(f.dict, id, MPI_COMM_WORLD, o); });
        INFO(out.what);
        CHECK(same_error_everywhere(out, Kind::concurrent));
        CHECK(all(contains(out.what, "checkpoint " + id + " is being written by another job")));
        CHECK(!committed(id));
        held.release();
        MPI_Barrier(MPI_COMM_WORLD);
        cairn::save(f.dict, id, MPI_COMM_WORLD, o);
        CHECK(committed(id));
        CHECK(on_rank0(!stdfs::exists(id + ".cairn-lock")));
    }
    {
        // An empty lock_path(): no lock is taken, nor looked at.
        const std::string id = dir + "/unlocked";
        auto o = quick();
        o.storage = std::make_shared<UnlockedWriter>();
        HeldLock held(id);
        MPI_Barrier(MPI_COMM_WORLD);
        cairn::save(f.dict, id, MPI_COMM_WORLD, o);
        CHECK(committed(id));
        CHECK(on_rank0(stdfs::exists(id + ".cairn-lock"))); // the other job's, left alone
    }
}

TEST_CASE("two jobs saving to one path: the second fails clearly, the first commits", "[bad_input]")
{
    if (world_size() < 2)
        return;
    const auto dir = fresh_dir("two_writers_" + std::to_string(world_size()));
    for (const char* ext : {"", ".h5"}) {
        DYNAMIC_SECTION("layout " << (*ext ? "container" : "per-rank"))
        {
            const std::string id = dir + "/ckpt" + ext;
            const int r = world_rank();
            // Job A is rank 0 alone, job B rank 1 alone. A's save, as it
            // begins to write, lets B try and waits until B is done.
            Field f(MPI_COMM_SELF, r == 0 ? 1.0 : 2.0);
            if (r == 0) {
                auto o = quick();
                bool told = false;
                o.progress = [&](const cairn::Progress& p) {
                    if (p.phase != cairn::Phase::write || told)
                        return;
                    told = true;
                    int token = 1;
                    MPI_Send(&token, 1, MPI_INT, 1, 7, MPI_COMM_WORLD);
                    MPI_Recv(&token, 1, MPI_INT, 1, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                };
                const auto a = attempt_local([&] { cairn::save(f.dict, id, MPI_COMM_SELF, o); });
                INFO(a.what);
                CHECK(!a.threw);
                CHECK(told);
            } else if (r == 1) {
                int token = 0;
                MPI_Recv(&token, 1, MPI_INT, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                const auto b = attempt_local([&] { cairn::save(f.dict, id, MPI_COMM_SELF, quick()); });
                MPI_Send(&token, 1, MPI_INT, 0, 8, MPI_COMM_WORLD);
                INFO(b.what);
                CHECK(b.threw);
                CHECK(b.kind == Kind::concurrent);
                CHECK(contains(b.what, "checkpoint " + id + " is being written by another job (host "));
                CHECK(contains(b.what, "pid "));
            }
            MPI_Barrier(MPI_COMM_WORLD);
            // A's checkpoint is whole: rank 0 loads what it saved.
            if (r == 0) {
                Field back(MPI_COMM_SELF, -1.0);
                cairn::load(back.dict, id, MPI_COMM_SELF);
                CHECK(back.u == Field(MPI_COMM_SELF, 1.0).u);
            }
            MPI_Barrier(MPI_COMM_WORLD);
        }
    }
}

TEST_CASE("a save whose path is taken over fails before its commit", "[bad_input]")
{
    // Where the file system has no locks, a second writer rewrites the lock
    // file with its own owner: simulated here from the progress callback.
    const auto dir = fresh_dir("taken_over_" + std::to_string(world_size()));
    for (const char* ext : {"", ".h5"}) {
        DYNAMIC_SECTION("layout " << (*ext ? "container" : "per-rank"))
        {
            const std::string id = dir + "/ckpt" + ext;
            Field f(MPI_COMM_WORLD, 0.0);
            auto o = quick();
            o.progress = [&](const cairn::Progress& p) {
                if (p.phase != cairn::Phase::write || p.done != 0 || world_rank() != 0)
                    return;
                if (std::FILE* fp = std::fopen((id + ".cairn-lock").c_str(), "w")) {
                    std::fputs("cairn-lock 1\nowner host intruder, pid 1, since 2026-01-01T00:00:00Z\n", fp);
                    std::fclose(fp);
                }
            };
            const auto out = attempt([&] { cairn::save(f.dict, id, MPI_COMM_WORLD, o); });
            INFO(out.what);
            CHECK(same_error_everywhere(out, Kind::concurrent));
            CHECK(all(contains(out.what, "checkpoint " + id + " was taken over by another job during this save") &&
                      contains(out.what, "now names host intruder, pid 1")));
            CHECK(!committed(id));
        }
    }
}

TEST_CASE("a checkpoint replaced while a load or verify reads it is reported as such", "[bad_input]")
{
    const auto dir = fresh_dir("replaced_" + std::to_string(world_size()));
    MPI_Comm dup = MPI_COMM_NULL;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    for (const char* ext : {"", ".h5"}) {
        for (const bool verify_checksums : {true, false}) {
            DYNAMIC_SECTION("layout " << (*ext ? "container" : "per-rank") << ", checksums "
                                      << (verify_checksums ? "verified" : "not verified"))
            {
                const std::string id = dir + "/ckpt" + ext, other = dir + "/other" + ext;
                {
                    Field a(MPI_COMM_WORLD, 0.0), b(MPI_COMM_WORLD, 1000.0);
                    cairn::save(a.dict, id, MPI_COMM_WORLD, quick());
                    cairn::save(b.dict, other, MPI_COMM_WORLD, quick());
                }
                // As the read phase begins (the metadata read), `other`
                // replaces `id` as an overwrite's renames would; every rank
                // reads after that.
                const auto replace_at = [&](cairn::Phase phase) {
                    auto once = std::make_shared<bool>(false);
                    return [=](const cairn::Progress& p) {
                        if (p.phase != phase || *once)
                            return;
                        *once = true;
                        if (world_rank() == 0) {
                            stdfs::rename(id, id + ".old");
                            stdfs::rename(other, id);
                        }
                        MPI_Barrier(dup);
                    };
                };
                SECTION("load")
                {
                    Field back(MPI_COMM_WORLD, -1.0);
                    cairn::LoadOptions lo;
                    lo.verify_checksums = verify_checksums;
                    lo.progress = replace_at(cairn::Phase::read);
                    const auto o = attempt([&] { cairn::load(back.dict, id, MPI_COMM_WORLD, lo); });
                    INFO(o.what);
                    CHECK(same_error_everywhere(o, Kind::concurrent));
                    CHECK(all(contains(o.what, "checkpoint " + id + " was replaced by another job during this load")));
                }
                if (verify_checksums)
                    SECTION("verify")
                    {
                        cairn::LoadOptions lo;
                        lo.progress = replace_at(cairn::Phase::verify);
                        const auto o = attempt([&] { cairn::verify(id, MPI_COMM_WORLD, lo); });
                        INFO(o.what);
                        CHECK(same_error_everywhere(o, Kind::concurrent));
                        CHECK(all(contains(o.what, "was replaced by another job during this verify")));
                    }
                // The replacement is whole: it loads.
                Field back(MPI_COMM_WORLD, -1.0);
                cairn::load(back.dict, id, MPI_COMM_WORLD);
                CHECK(all(back.u == Field(MPI_COMM_WORLD, 1000.0).u));
            }
        }
    }
    MPI_Comm_free(&dup);
}

TEST_CASE("find_leftovers lists a lock file that no save holds", "[bad_input]")
{
    const auto root = fresh_dir("lock_leftovers_" + std::to_string(world_size()));
    HeldLock held(root + "/step_00000002"); // a save in flight (rank 0)
    if (world_rank() == 0) {
        std::FILE* fp = std::fopen((root + "/step_00000001.cairn-lock").c_str(), "w"); // a killed save's
        REQUIRE(fp);
        std::fputs("cairn-lock 1\nowner host gone, pid 1, since 2026-01-01T00:00:00Z\n", fp);
        std::fclose(fp);
        const auto found = cairn::find_leftovers(root);
        REQUIRE(found.size() == 1);
        CHECK(found[0].path == root + "/step_00000001.cairn-lock");
        CHECK(contains(found[0].reason, "the lock file of an interrupted save to step_00000001"));
    }
    MPI_Barrier(MPI_COMM_WORLD);
}
