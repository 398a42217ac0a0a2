// Private: MPI-IO hints (cairn::MpiHints) as an MPI_Info, their check, and
// the debug line that shows what the MPI library made of them.
#pragma once

#include "cairn/storage.hpp"

#include <mpi.h>

#include <string>

namespace cairn::detail {

/// Throws error::WrongAPIUsage naming the first hint whose key is empty or
/// longer than MPI_MAX_INFO_KEY - 1, or whose value is longer than
/// MPI_MAX_INFO_VAL - 1 (MPI_Info_set would fail or truncate). Local.
void check_mpi_hints(const MpiHints& hints);

/// An MPI_Info holding `hints` in order (MPI_INFO_NULL when there are none),
/// freed when it goes out of scope. Checks them first (check_mpi_hints).
class MpiInfo {
public:
    explicit MpiInfo(const MpiHints& hints);
    ~MpiInfo();
    MpiInfo(const MpiInfo&) = delete;
    MpiInfo& operator=(const MpiInfo&) = delete;
    MPI_Info get() const noexcept { return m_info; }

private:
    MPI_Info m_info = MPI_INFO_NULL;
};

/// At LogLevel::debug, with hints: prints on stderr, in one line naming this
/// process's rank in MPI_COMM_WORLD and `path`, what the MPI library reports
/// (MPI_File_get_info) for each hint asked of `file` (one line per file
/// handle: a container has two per rank, HDF5's and the one of the small
/// datasets' direct transfers), "key=value", or "key not taken" where it
/// reports nothing (a library
/// reports the hints it uses: ROMIO drops those its file system driver does
/// not know, e.g. striping on a local file system). Never throws.
void log_hints(MPI_File file, const MpiHints& hints, const std::string& path) noexcept;

} // namespace cairn::detail
