// Private: a checked, RAII MPI-IO file for one rank (MPI_COMM_SELF) or for
// the ranks of a group sharing one file. Sizes are 64-bit; transfers above
// the int limit of MPI are split.
#pragma once

#include "cairn/storage.hpp"

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace cairn::detail {

class MpiFile {
public:
    enum class Mode { read, write };
    /// Opens `path` on `comm` (collective over it) with `hints`
    /// (io/mpi_hints.hpp: checked, and shown at LogLevel::debug); write
    /// mode creates it. On a shared `comm`, the open fails on every member
    /// or on none, sync() and close() call MPI on every member even where
    /// they fail (so no member waits for one that gave up), and writes and
    /// reads are independent.
    MpiFile(const std::string& path, Mode mode, const MpiHints& hints = {}, MPI_Comm comm = MPI_COMM_SELF);
    ~MpiFile();
    MpiFile(const MpiFile&) = delete;
    MpiFile& operator=(const MpiFile&) = delete;

    /// Writes all `size` bytes at `offset`; throws error::WriteError.
    void write_at(std::uint64_t offset, const void* data, std::uint64_t size);
    /// A member of a shared file on ext4 or XFS (Linux): its writes inside
    /// [lo, hi) (multiples of 4 KiB) from now on bypass the page cache
    /// (O_DIRECT, on a descriptor of its own beside the MPI handle) into
    /// space allocated for the region first (fallocate), so that the
    /// members write at once: a buffered write(2) holds the file's write
    /// lock while it copies, direct writes of allocated, aligned blocks do
    /// not. The writes must come in ascending offsets; they are copied into
    /// a ring of four aligned buffers of 4 MiB, written two at a time by
    /// helper threads while the next fill, the bytes between them zeros.
    /// sync() and close() write what is buffered first.
    /// Returns whether it is on: only with CAIRN_GROUP_WRITES=direct in the
    /// environment, and then not on other file systems, for an unaligned region, and
    /// where the file system refuses. Local; throws error::WriteError where
    /// the region's space cannot be allocated (no space).
    bool write_direct(std::uint64_t lo, std::uint64_t hi);
    /// Whether write_direct() is on.
    bool writes_direct() const noexcept { return m_direct != nullptr; }
    /// Reads exactly `size` bytes at `offset`; throws error::ReadError (also on a short read).
    void read_at(std::uint64_t offset, void* data, std::uint64_t size);
    void set_size(std::uint64_t size);
    std::uint64_t size();
    void sync();
    /// Closes; throws on failure (the destructor closes silently).
    void close();
    const std::string& path() const noexcept { return m_path; }

private:
    class Direct;
    [[noreturn]] void fail(int rc, const std::string& what) const;
    /// Ends write_direct(): writes what is buffered and waits for it.
    /// Throws error::WriteError for a failed direct write.
    void end_direct();
    std::string m_path;
    Mode m_mode;
    bool m_shared = false; // opened on a communicator of several ranks
    MPI_File m_fh = MPI_FILE_NULL;
    std::unique_ptr<Direct> m_direct; // write_direct()
};

/// Who wrote the .distcp file `name` (a plain name, docs/FORMAT.md section
/// 1), for errors: "rank 3", "ranks 0 to 3", "ranks 0 to 6 in steps of 2",
/// "the ranks on the node of rank 4"; "" for a name of another form.
std::string distcp_writers(const std::string& name);

} // namespace cairn::detail
