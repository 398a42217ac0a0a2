// Private: a checked, RAII MPI-IO file for one rank (MPI_COMM_SELF). Sizes
// are 64-bit; transfers above the int limit of MPI are split.
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
    /// Opens `path` on MPI_COMM_SELF with `hints` (storage/mpi_hints.hpp:
    /// checked, and shown at LogLevel::debug); write mode creates it.
    MpiFile(const std::string& path, Mode mode, const MpiHints& hints = {});
    ~MpiFile();
    MpiFile(const MpiFile&) = delete;
    MpiFile& operator=(const MpiFile&) = delete;

    /// Writes all `size` bytes at `offset`; throws error::WriteError.
    void write_at(std::uint64_t offset, const void* data, std::uint64_t size);
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
    std::string m_path;
    Mode m_mode;
    MPI_File m_fh = MPI_FILE_NULL;
};

} // namespace cairn::detail
