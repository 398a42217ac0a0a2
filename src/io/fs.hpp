// Private: file-system operations of the storage layers, each reporting
// failures as cairn errors that name the path and the system's reason.
#pragma once

#include <cstddef>
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
/// Replaces `path` with the `n` bytes at `data`: written to `<path>.cairn-tmp`
/// (fsync'd with `sync`), then renamed over `path`. error::WriteError naming
/// the temporary file; the temporary file is removed on failure.
void write_file_atomic(const std::string& path, const void* data, std::size_t n, bool sync);
/// A file written in parts under `<path>.cairn-tmp` and renamed over `path`
/// by commit() (write_file_atomic's writer, for bytes that arrive in
/// pieces). Errors are error::WriteError naming the temporary file; the
/// temporary file is removed on failure and when the object goes away
/// uncommitted.
class AtomicFile {
public:
    /// Creates (truncates) `<path>.cairn-tmp`.
    explicit AtomicFile(std::string path);
    ~AtomicFile();
    AtomicFile(const AtomicFile&) = delete;
    AtomicFile& operator=(const AtomicFile&) = delete;
    /// Appends `n` bytes.
    void write(const void* data, std::size_t n);
    /// fsync (with `sync`), close, rename over the path.
    void commit(bool sync);
    const std::string& temp_path() const noexcept { return m_tmp; }

private:
    [[noreturn]] void fail(const std::string& what, int err);
    std::string m_path, m_tmp;
    int m_fd = -1;
    bool m_done = false;
};
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
/// ": No space left on device (N bytes free)" when the file system holding
/// `path` (a file or a directory) has less than `want` bytes free, else "":
/// what an error message adds where the MPI library or HDF5 lost the errno
/// of a failed write (Open MPI's ompio reports ENOSPC as a write of nothing,
/// ROMIO as "Other I/O error").
std::string no_space_note(const std::string& path, std::uint64_t want);
/// Removes a file or a directory tree; no error when it does not exist.
void remove_all(const std::string& path);
/// Removes, never throws (cleanup paths).
void remove_all_noexcept(const std::string& path) noexcept;
/// The parent directory of `path` ("." when it has none).
std::string parent(const std::string& path);
/// `path` without trailing slashes.
std::string strip(const std::string& path);
std::string join(const std::string& dir, const std::string& name);

/// What a file of type `mode` (st_mode) is, for messages: "a FIFO", "a
/// directory", "a symbolic link", "a socket", "a character device", "a block
/// device", "a regular file".
std::string file_type_name(unsigned mode);

/// How the last component of a path to be read is treated.
enum class Follow {
    no,  ///< a file inside a checkpoint: a symbolic link is refused
    yes, ///< the checkpoint id itself (a container file): a symbolic link to a regular file is taken
};

/// Checks, before anything opens it, that `path` is a regular file: with
/// Follow::no not a symbolic link either (lstat), with Follow::yes whatever a
/// link in its last component names (stat). Throws error::FormatError
/// naming the file and what it is ("...: not a regular file (a FIFO)",
/// "...: is a symbolic link; Cairn opens only regular files inside the
/// checkpoint"); does nothing when the path does not exist or cannot be
/// examined, so that the open that follows reports that as before.
void check_regular_file(const std::string& path, Follow follow);

/// open(2) of `path` for reading with O_NOFOLLOW | O_NONBLOCK (a FIFO does
/// not block it), then fstat: the descriptor of a regular file, in blocking
/// mode. Throws error::NotFound when it does not exist, error::FormatError as
/// check_regular_file (Follow::no) when it is no regular file, and
/// error::ReadError when it cannot be opened.
int open_regular_file(const std::string& path);

} // namespace cairn::detail::fs
