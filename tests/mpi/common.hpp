// Helpers of the MPI tests: sub-communicators, per-test directories,
// decompositions and agreement on assertions across ranks.
#pragma once

#include <cairn/cairn.hpp>

#include <mpi.h>

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <sys/statfs.h>
#include <unistd.h>

namespace cairn_test {

inline int world_rank()
{
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

inline int world_size()
{
    int s = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &s);
    return s;
}

/// True on every rank when `v` is true on every rank of `comm`: assertions go
/// through this so that one rank's failure never leaves the others waiting.
inline bool all(bool v, MPI_Comm comm = MPI_COMM_WORLD)
{
    int in = v ? 1 : 0, out = 0;
    MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_LAND, comm);
    return out != 0;
}

/// A communicator of the first `n` ranks of the world (MPI_COMM_NULL on the
/// others). Collective over the world.
class SubComm {
public:
    explicit SubComm(int n)
    {
        MPI_Comm_split(MPI_COMM_WORLD, world_rank() < n ? 0 : MPI_UNDEFINED, world_rank(), &m_comm);
    }
    ~SubComm()
    {
        if (m_comm != MPI_COMM_NULL)
            MPI_Comm_free(&m_comm);
    }
    SubComm(const SubComm&) = delete;
    SubComm& operator=(const SubComm&) = delete;
    MPI_Comm get() const { return m_comm; }
    bool member() const { return m_comm != MPI_COMM_NULL; }
    int rank() const
    {
        int r = 0;
        MPI_Comm_rank(m_comm, &r);
        return r;
    }
    int size() const
    {
        int s = 0;
        MPI_Comm_size(m_comm, &s);
        return s;
    }

private:
    MPI_Comm m_comm = MPI_COMM_NULL;
};

/// Runs `f(comm)` on the first `n` ranks. True on every world rank when `f`
/// returned true on every member. Exceptions are caught (and reported) so
/// that members and non-members always meet again at the end.
template <class F>
bool run_on(int n, F&& f)
{
    bool ok = true;
    {
        SubComm c(n);
        if (c.member()) {
            try {
                ok = f(c);
            } catch (const std::exception& e) {
                UNSCOPED_INFO("rank " << world_rank() << ": " << e.what());
                ok = false;
            }
        }
    }
    return all(ok);
}

/// A fresh, empty directory for one test (collective over the world): under
/// $CAIRN_TEST_DIR (set per CTest test) or ./cairn-test-tmp.
inline std::string fresh_dir(const std::string& name)
{
    const char* base = std::getenv("CAIRN_TEST_DIR");
    const std::string dir = std::string(base ? base : "cairn-test-tmp") + "/" + name;
    if (world_rank() == 0) {
        std::filesystem::remove_all(dir);
        std::filesystem::create_directories(dir);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    return dir;
}

/// The name of a fresh directory for one test in /dev/shm,
/// cairn-test-<name>-<ranks>-<rank 0's pid>, made (emptied) by rank 0 when
/// `make` is true there. Collective.
inline std::string fresh_shm_dir(const std::string& name, bool make)
{
    long id = static_cast<long>(::getpid());
    MPI_Bcast(&id, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    const std::string dir =
        "/dev/shm/cairn-test-" + name + "-" + std::to_string(world_size()) + "-" + std::to_string(id);
    if (world_rank() == 0 && make) {
        std::filesystem::remove_all(dir);
        std::filesystem::create_directories(dir);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    return dir;
}

/// A fresh directory for one test in /dev/shm where that is a RAM disk
/// (tmpfs) that every rank sees, else "" (no RAM disk, or ranks on hosts of
/// their own, each with its own /dev/shm). Collective.
inline std::string shared_ram_dir(const std::string& name)
{
    struct statfs sf {};
    const bool ram = ::statfs("/dev/shm", &sf) == 0 && static_cast<unsigned long>(sf.f_type) == 0x01021994UL;
    const std::string dir = fresh_shm_dir(name, ram);
    std::error_code ec;
    int seen = ram && std::filesystem::is_directory(dir, ec) ? 1 : 0, everywhere = 0;
    MPI_Allreduce(&seen, &everywhere, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (everywhere)
        return dir;
    if (seen)
        std::filesystem::remove_all(dir, ec);
    MPI_Barrier(MPI_COMM_WORLD);
    return {};
}

/// Block `i` of `p` blocks of an extent `n`; the first n % p blocks are one longer.
inline std::pair<std::int64_t, std::int64_t> block(std::int64_t n, int p, int i)
{
    const std::int64_t base = n / p, extra = n % p;
    const std::int64_t len = base + (i < extra ? 1 : 0);
    const std::int64_t off = i * base + std::min<std::int64_t>(i, extra);
    return {off, len};
}

/// A deterministic value for element `linear` (row-major global index) of
/// array `salt`, exactly representable in every dtype used by the tests.
inline std::int64_t value_at(std::int64_t linear, int salt) { return (linear * 7 + salt * 13) % 101; }

} // namespace cairn_test
