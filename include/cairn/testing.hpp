// Cairn: TEST-ONLY fault injection. Not part of the stable API and not
// included by <cairn/cairn.hpp>; for the tests of Cairn and of codes that use
// it, to check how they handle a full disk or an I/O error on one rank.
//
// A fault makes a real system call of Cairn fail as the system would (the
// same exception type and message naming the file), on a chosen rank of
// MPI_COMM_WORLD, at a named point, on its n-th call. Nothing is mocked: the
// failure travels through the real error paths, error agreement and cleanup.
//
//     cairn::testing::ScopedFault f({"mpiio.write", 1, 0, 1, ENOSPC});
//     cairn::save(state, "ckpt", MPI_COMM_WORLD);   // throws on every rank
//
// The same from the environment, read once when the library is loaded (for
// programs driven by CTest; several faults separated by ';'):
//
//     CAIRN_FAULT="rank=1,point=mpiio.write,after=0,times=1,errno=ENOSPC"
//
// With action=kill the process sends itself SIGKILL at the point instead (a
// crash there, for kill tests: CAIRN_FAULT="rank=3,point=drain.copy,action=kill").
//
// Points (see fault_points()): per-rank layout and file system
//   mpiio.open mpiio.write mpiio.read mpiio.set_size mpiio.sync
//   mpiio.close fs.mkdir fs.fsync fs.rename fs.remove
// the copy of a rank's data file in a drain of the node-local level, and
// of each range of it that one of the copy's streams takes:
//   drain.copy drain.range
// and the container layout's HDF5 calls, which are still made (collective
// calls must be entered by every rank) and then report the failure:
//   h5.create h5.open h5.write h5.read h5.flush h5.close
// When a fault fires, one line "cairn: injected fault ..." goes to stderr.
// Thread-safe; unarmed, each point costs one relaxed atomic load.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cairn::testing {

/// One armed fault.
struct Fault {
    /// The point, e.g. "mpiio.write" (one of fault_points()).
    std::string point;
    /// Rank in MPI_COMM_WORLD that fails; -1: every rank (and processes
    /// without MPI).
    int rank = -1;
    /// Calls of the point that succeed before the first failure (0: the
    /// first call fails). Counted on each process from when it was armed.
    std::uint64_t after = 0;
    /// Number of calls that fail from then on; 0: every later call.
    std::uint64_t times = 1;
    /// The errno value the call fails with (ENOSPC, EIO, EACCES, EROFS,
    /// EDQUOT, ...).
    int error = EIO;
    /// Instead of failing the call, the process sends itself SIGKILL there
    /// (after the note on stderr): a crash at that point.
    bool kill = false;
};

/// Arms `fault` (in addition to the ones armed already). Local. Throws
/// cairn::error::WrongAPIUsage for an unknown point or a non-positive error.
void arm_fault(const Fault& fault);

/// Disarms every fault and resets the counters. Local.
void disarm_faults() noexcept;

/// Number of failures injected by this process since the last disarm. Local.
std::uint64_t faults_fired() noexcept;

/// Parses one fault of the CAIRN_FAULT syntax: comma-separated key=value
/// pairs, keys point (required), rank, after, times, errno (a name such as
/// ENOSPC, or a number), action (fail, the default, or kill). Throws cairn::error::WrongAPIUsage naming the bad part.
Fault parse_fault(const std::string& spec);

/// The names of all injection points.
std::vector<std::string> fault_points();

/// Recomputes the integrity header of a per-rank metadata file (the HDF5 user
/// block of metadata.h5, docs/FORMAT.md section 2.4) after a test edited the
/// file in place with HDF5, so that the edit reaches the reader's own checks
/// instead of being refused as damage. Local. Throws cairn::error::WriteError.
void reseal_metadata_file(const std::string& path);

/// Bytes of the frames in which load() and verify() broadcast the metadata
/// (about 8 MiB by default; 0 restores that). Small frames take a small
/// checkpoint through the frame-by-frame path. Local: set the same on every
/// rank before a collective call.
void set_metadata_frame_bytes(std::size_t bytes) noexcept;

/// Arms a fault for its lifetime (disarms every fault when destroyed).
class ScopedFault {
public:
    explicit ScopedFault(const Fault& fault) { arm_fault(fault); }
    ~ScopedFault() { disarm_faults(); }
    ScopedFault(const ScopedFault&) = delete;
    ScopedFault& operator=(const ScopedFault&) = delete;
};

} // namespace cairn::testing
