// Private: a checked, RAII MPI-IO file for one rank (MPI_COMM_SELF) or for
// the ranks of a group sharing one file. Sizes are 64-bit; transfers above
// the int limit of MPI are split.
#pragma once

#include "cairn/storage.hpp"

#include <mpi.h>

#include <cstddef>
#include <cstdint>
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
    /// With CAIRN_GROUP_WRITES=mapped in the environment, a member of a
    /// shared file on a local file system (ext4, XFS, btrfs, tmpfs): its
    /// writes inside [lo, hi) from now on go through shared mappings of the
    /// file (POSIX, beside the MPI handle; each mapped for one write and
    /// faulted in writable first with MADV_POPULATE_WRITE, so that a failure
    /// such as no space is an error, not a signal) instead of
    /// MPI_File_write_at, after extending the file to `file_size` if it is
    /// shorter. Such file systems hold the file's write lock for each whole
    /// buffered write(2), so that the members' writes run one at a time;
    /// faults into a mapping take no such lock (docs/DESIGN.md). Returns
    /// whether it is on: off without the variable, elsewhere, and where the
    /// system lacks it. Local; throws error::WriteError where the file
    /// cannot be extended.
    bool map_writes(std::uint64_t lo, std::uint64_t hi, std::uint64_t file_size);
    /// Reads exactly `size` bytes at `offset`; throws error::ReadError (also on a short read).
    void read_at(std::uint64_t offset, void* data, std::uint64_t size);
    void set_size(std::uint64_t size);
    std::uint64_t size();
    void sync();
    /// Closes; throws on failure (the destructor closes silently).
    void close();
    const std::string& path() const noexcept { return m_path; }

private:
    [[noreturn]] void fail(int rc, const std::string& what) const;
    void unmap() noexcept;
    std::string m_path;
    Mode m_mode;
    bool m_shared = false; // opened on a communicator of several ranks
    MPI_File m_fh = MPI_FILE_NULL;
    // map_writes(): a descriptor of the file, and the bytes [m_map_from,
    // m_map_to) written through mappings of it.
    int m_map_fd = -1;
    std::uint64_t m_map_from = 0, m_map_to = 0;
};

/// Who wrote the .distcp file `name` (a plain name, docs/FORMAT.md section
/// 1), for errors: "rank 3", "ranks 0 to 3", "ranks 0 to 6 in steps of 2",
/// "the ranks on the node of rank 4"; "" for a name of another form.
std::string distcp_writers(const std::string& name);

} // namespace cairn::detail
