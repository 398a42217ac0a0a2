// validate_checkpoint_id of the storage interfaces and of the built-in
// storages: which checkpoint ids each one takes (the seeds' automatic storage
// selection). Layout::automatic (src/driver/read_session.cpp, save.cpp)
// asks the container's first, then the per-rank layout's.
#include "cairn/container.hpp"
#include "cairn/distcp.hpp"
#include "cairn/storage.hpp"

#include "io/fs.hpp"

#include <cstring>
#include <filesystem>
#include <system_error>

namespace cairn {

namespace {

// Checkpoint ids of containers end in ".h5" or ".hdf5".
bool has_container_suffix(const std::string& id)
{
    const auto p = detail::fs::strip(id);
    auto ends = [&](const char* suffix) {
        const std::size_t n = std::strlen(suffix);
        return p.size() > n && p.compare(p.size() - n, n, suffix) == 0;
    };
    return ends(".h5") || ends(".hdf5");
}

std::filesystem::file_status status_of(const std::string& id)
{
    std::error_code ec;
    return std::filesystem::status(detail::fs::strip(id), ec);
}

// A per-rank checkpoint is a directory: any non-empty id that does not name
// a regular file (a directory, committed or not, or nothing yet).
bool names_no_file(const std::string& id)
{
    return !id.empty() && !std::filesystem::is_regular_file(status_of(id));
}

} // namespace

bool StorageWriter::validate_checkpoint_id(const std::string&) const { return true; }

bool StorageReader::validate_checkpoint_id(const std::string&) const { return true; }

bool ContainerWriter::validate_checkpoint_id(const std::string& checkpoint_id) const
{
    return has_container_suffix(checkpoint_id);
}

bool ContainerReader::validate_checkpoint_id(const std::string& checkpoint_id) const
{
    const auto st = status_of(checkpoint_id);
    if (std::filesystem::is_regular_file(st))
        return true;
    return !std::filesystem::exists(st) && has_container_suffix(checkpoint_id);
}

bool DistcpWriter::validate_checkpoint_id(const std::string& checkpoint_id) const
{
    return names_no_file(checkpoint_id);
}

bool DistcpReader::validate_checkpoint_id(const std::string& checkpoint_id) const
{
    return names_no_file(checkpoint_id);
}

} // namespace cairn
