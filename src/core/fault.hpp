// Private: fault injection at the system-call boundary (in the spirit of
// fmt's posix-mock, but on the real code paths). A call site names its point
// and asks whether to fail:
//
//     if (const int err = fault::inject(fault::mpiio_write, m_path))
//         fail(mpi_error_of(err), ...);   // exactly as if the call had failed
//
// Unarmed, inject() is one relaxed atomic load. Faults are armed from tests
// (include/cairn/testing.hpp) or from the environment variable CAIRN_FAULT,
// read once when the library is loaded:
//
//     CAIRN_FAULT="rank=1,point=mpiio.write,after=2,errno=ENOSPC[;...]"
//
// The names below are the complete list of points; arming any other name is
// refused. Every point counts its calls per process, from when it was armed.
#pragma once

#include <atomic>
#include <string>

namespace cairn::detail::fault {

// MPI-IO calls of the per-rank layout (src/io/mpiio.cpp).
inline constexpr const char* mpiio_open = "mpiio.open";         ///< MPI_File_open (read or write)
inline constexpr const char* mpiio_write = "mpiio.write";       ///< MPI_File_write_at
inline constexpr const char* mpiio_read = "mpiio.read";         ///< MPI_File_read_at
inline constexpr const char* mpiio_set_size = "mpiio.set_size"; ///< MPI_File_set_size
inline constexpr const char* mpiio_sync = "mpiio.sync";         ///< MPI_File_sync
inline constexpr const char* mpiio_close = "mpiio.close";       ///< MPI_File_close
// File-system calls of both layouts (src/io/fs.cpp).
inline constexpr const char* fs_mkdir = "fs.mkdir";   ///< create_directories
inline constexpr const char* fs_fsync = "fs.fsync";   ///< fsync_path (files and directories)
inline constexpr const char* fs_rename = "fs.rename"; ///< rename (the commit of metadata and containers)
inline constexpr const char* fs_remove = "fs.remove"; ///< remove_all (not the noexcept cleanup)
inline constexpr const char* fs_reserve = "fs.reserve"; ///< fallocate (a container's space, before it is written)
inline constexpr const char* fs_write = "fs.write";     ///< write of a metadata file (metadata.h5's bytes)
// HDF5 calls of the container layout (src/storage/container/container_*.cpp). The
// call is always made (a collective call skipped on one rank would hang the
// others); a fault makes it report failure afterwards (container::inject).
inline constexpr const char* h5_create = "h5.create"; ///< H5Fcreate of the container, H5Dcreate2 of its datasets
inline constexpr const char* h5_open = "h5.open";     ///< H5Fopen of a container (read, verify, the commit's reopen)
inline constexpr const char* h5_write = "h5.write";   ///< H5Dwrite of array data
inline constexpr const char* h5_read = "h5.read";     ///< H5Dread of array data
inline constexpr const char* h5_flush = "h5.flush";   ///< H5Fflush (the collective sync before the commit)
inline constexpr const char* h5_close = "h5.close";   ///< H5Fclose after the collective writes or reads
// The node-local level (src/levels/drain.cpp).
inline constexpr const char* drain_copy = "drain.copy"; ///< a drain's copy of one data file (its thread)
inline constexpr const char* drain_range = "drain.range"; ///< one stream's copy of a range of a data file (its thread)

/// Whether any fault is armed (the fast path of inject()).
extern std::atomic<bool> g_armed;

/// The slow path of inject(): counts the call and decides.
int inject_slow(const char* point, const std::string& object) noexcept;

/// Called by the code at `point` right before the real call. Returns 0 (go
/// on) or the errno value to fail with, as the system would have; `object`
/// (the file) goes into the note printed to stderr when a fault fires. A
/// fault armed with `kill` does not return: the process is SIGKILLed.
inline int inject(const char* point, const std::string& object) noexcept
{
    if (!g_armed.load(std::memory_order_relaxed))
        return 0;
    return inject_slow(point, object);
}

} // namespace cairn::detail::fault
