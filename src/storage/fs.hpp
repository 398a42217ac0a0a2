// Private: file-system operations of the storage layers, each reporting
// failures as cairn errors that name the path and the system's reason.
#pragma once

#include <cstdint>
#include <string>

namespace cairn::detail::fs {

bool exists(const std::string& path);
bool is_directory(const std::string& path);
/// Creates the directory and its parents (no error when it exists).
void create_directories(const std::string& path);
/// fsync(2) of a file or directory.
void fsync_path(const std::string& path);
/// rename(2); both paths on the same file system.
void rename(const std::string& from, const std::string& to);
/// Reserves the blocks of bytes [from, from + length) of the existing file
/// `path` (fallocate(2), mode 0: the file grows to at least from + length),
/// so that writes inside that range cannot fail for want of space. Returns
/// false where the file system cannot reserve (EOPNOTSUPP, ENOSYS, EINVAL):
/// writes then take their chances. Throws error::WriteError naming the path
/// and the system's reason otherwise (ENOSPC, EDQUOT, ...).
bool reserve(const std::string& path, std::uint64_t from, std::uint64_t length);
/// The size of the regular file `path`; throws error::WriteError.
std::uint64_t file_size(const std::string& path);
/// truncate(2) to `size`, never throws (cleanup paths: frees the space of a
/// file that will be removed).
void truncate_noexcept(const std::string& path, std::uint64_t size) noexcept;
/// Swaps `from` and `to` atomically (renameat2 with RENAME_EXCHANGE; both
/// must exist, on the same file system). False, with nothing changed, where
/// the kernel or the file system cannot (EINVAL, ENOSYS, EOPNOTSUPP): the
/// caller falls back to rename(). Fault point fs.rename, as rename(); an
/// injected EINVAL takes the fallback.
bool exchange(const std::string& from, const std::string& to);
/// Removes a file or a directory tree; no error when it does not exist.
void remove_all(const std::string& path);
/// Removes, never throws (cleanup paths).
void remove_all_noexcept(const std::string& path) noexcept;
/// The parent directory of `path` ("." when it has none).
std::string parent(const std::string& path);
/// `path` without trailing slashes.
std::string strip(const std::string& path);
std::string join(const std::string& dir, const std::string& name);

} // namespace cairn::detail::fs
