#include "io/fs.hpp"

#include "cairn/errors.hpp"
#include "core/fault.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#if defined(__linux__)
#include <linux/fs.h> // RENAME_EXCHANGE
#include <sys/syscall.h>
#endif

namespace cairn::detail::fs {

namespace stdfs = std::filesystem;

bool exists(const std::string& path)
{
    std::error_code ec;
    return stdfs::exists(path, ec);
}

bool is_directory(const std::string& path)
{
    std::error_code ec;
    return stdfs::is_directory(path, ec);
}

void create_directories(const std::string& path)
{
    std::error_code ec;
    if (const int injected = fault::inject(fault::fs_mkdir, path))
        ec = std::error_code(injected, std::generic_category());
    else
        stdfs::create_directories(path, ec);
    if (ec && !is_directory(path))
        throw error::WriteError("cannot create directory " + path + ": " + ec.message());
}

void fsync_path(const std::string& path)
{
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        throw error::WriteError("cannot open " + path + " to sync it: " + std::strerror(errno));
    const int injected = fault::inject(fault::fs_fsync, path);
    const int rc = injected ? -1 : ::fsync(fd);
    const int err = injected ? injected : errno;
    ::close(fd);
    // Some file systems refuse fsync on directories (EINVAL): not an error.
    if (rc != 0 && err != EINVAL)
        throw error::WriteError("fsync of " + path + " failed: " + std::strerror(err));
}

void rename(const std::string& from, const std::string& to)
{
    const int injected = fault::inject(fault::fs_rename, from);
    if (injected || ::rename(from.c_str(), to.c_str()) != 0)
        throw error::WriteError("cannot rename " + from + " to " + to + ": " +
                                std::strerror(injected ? injected : errno));
}

bool reserve(const std::string& path, std::uint64_t from, std::uint64_t length)
{
    if (length == 0)
        return true;
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        throw error::WriteError("cannot open " + path + " to reserve its space: " + std::strerror(errno));
    int err = fault::inject(fault::fs_reserve, path);
    if (!err) {
        int rc;
        do
            rc = ::fallocate(fd, 0, static_cast<off_t>(from), static_cast<off_t>(length));
        while (rc != 0 && errno == EINTR);
        err = rc == 0 ? 0 : errno;
    }
    ::close(fd);
    if (err == EOPNOTSUPP || err == ENOSYS || err == EINVAL)
        return false;
    if (err)
        throw error::WriteError("cannot reserve " + std::to_string(length) + " bytes for " + path + ": " +
                                std::strerror(err));
    return true;
}

std::uint64_t file_size(const std::string& path)
{
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
        throw error::WriteError("cannot stat " + path + ": " + std::strerror(errno));
    return static_cast<std::uint64_t>(st.st_size);
}

void truncate_noexcept(const std::string& path, std::uint64_t size) noexcept
{
    [[maybe_unused]] const int rc = ::truncate(path.c_str(), static_cast<off_t>(size));
}

namespace {

// renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_EXCHANGE); -1 with errno
// ENOSYS where the system has no such call.
int exchange_call(const std::string& from, const std::string& to)
{
#if defined(__linux__) && defined(RENAME_EXCHANGE) && defined(SYS_renameat2)
    return static_cast<int>(::syscall(SYS_renameat2, AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_EXCHANGE));
#else
    (void)from;
    (void)to;
    errno = ENOSYS;
    return -1;
#endif
}

} // namespace

bool exchange(const std::string& from, const std::string& to)
{
    const int injected = fault::inject(fault::fs_rename, from);
    const int rc = injected ? -1 : exchange_call(from, to);
    const int err = injected ? injected : errno;
    if (rc == 0)
        return true;
    if (err == EINVAL || err == ENOSYS || err == EOPNOTSUPP)
        return false; // the file system (or kernel) cannot exchange: the caller renames
    throw error::WriteError("cannot rename " + from + " to " + to + " (exchanging them): " + std::strerror(err));
}

std::string no_space_note(const std::string& path, std::uint64_t want)
{
    struct statvfs st {};
    if (::statvfs(path.c_str(), &st) != 0 && ::statvfs(parent(path).c_str(), &st) != 0)
        return {};
    const auto avail = static_cast<std::uint64_t>(st.f_bavail) * st.f_frsize;
    if (avail >= want)
        return {};
    return std::string(": ") + std::strerror(ENOSPC) + " (" + std::to_string(avail) + " bytes free)";
}

void remove_all(const std::string& path)
{
    std::error_code ec;
    if (const int injected = fault::inject(fault::fs_remove, path))
        ec = std::error_code(injected, std::generic_category());
    else
        stdfs::remove_all(path, ec);
    if (ec)
        throw error::WriteError("cannot remove " + path + ": " + ec.message());
}

void remove_all_noexcept(const std::string& path) noexcept
{
    std::error_code ec;
    stdfs::remove_all(path, ec);
}

std::string strip(const std::string& path)
{
    auto p = path;
    while (p.size() > 1 && p.back() == '/')
        p.pop_back();
    return p;
}

std::string parent(const std::string& path)
{
    auto p = stdfs::path(strip(path)).parent_path().string();
    return p.empty() ? "." : p;
}

std::string join(const std::string& dir, const std::string& name) { return (stdfs::path(dir) / name).string(); }

std::string file_type_name(unsigned mode)
{
    switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a directory";
    case S_IFLNK: return "a symbolic link";
    case S_IFIFO: return "a FIFO";
    case S_IFSOCK: return "a socket";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    default: return "not a file Cairn knows";
    }
}

namespace {

[[noreturn]] void refuse(const std::string& path, unsigned mode)
{
    if (S_ISLNK(mode))
        throw error::FormatError(path + ": is a symbolic link; Cairn opens only regular files inside the checkpoint");
    throw error::FormatError(path + ": not a regular file (" + file_type_name(mode) + ")");
}

} // namespace

void check_regular_file(const std::string& path, Follow follow)
{
    struct stat st {};
    const int rc = follow == Follow::yes ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st);
    if (rc != 0)
        return; // the open reports it
    if (!S_ISREG(st.st_mode))
        refuse(path, st.st_mode);
}

int open_regular_file(const std::string& path)
{
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 && (errno == ENOENT || errno == ENOTDIR))
        throw error::NotFound("no such file: " + path);
    // O_NOFOLLOW: a symbolic link put in place after the lstat fails with
    // ELOOP instead of being followed; O_NONBLOCK: opening a FIFO returns at
    // once instead of waiting for a writer. fstat then looks at what was
    // opened, whatever the path names by now.
    const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        const int err = errno;
        if (err == ELOOP)
            refuse(path, S_IFLNK);
        if (err == ENOENT)
            throw error::NotFound("no such file: " + path);
        throw error::ReadError("cannot open " + path + ": " + std::strerror(err));
    }
    if (::fstat(fd, &st) != 0) {
        const int err = errno;
        ::close(fd);
        throw error::ReadError("cannot stat " + path + ": " + std::strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        refuse(path, st.st_mode);
    }
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        const int err = errno;
        ::close(fd);
        throw error::ReadError("cannot open " + path + ": " + std::strerror(err));
    }
    return fd;
}

AtomicFile::AtomicFile(std::string path) : m_path(std::move(path)), m_tmp(m_path + ".cairn-tmp")
{
    m_fd = ::open(m_tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (m_fd < 0)
        throw error::WriteError("cannot create " + m_tmp + ": " + std::strerror(errno));
}

AtomicFile::~AtomicFile()
{
    if (m_fd >= 0)
        ::close(m_fd);
    if (!m_done)
        remove_all_noexcept(m_tmp);
}

void AtomicFile::fail(const std::string& what, int err)
{
    if (m_fd >= 0)
        ::close(m_fd);
    m_fd = -1;
    remove_all_noexcept(m_tmp);
    m_done = true;
    throw error::WriteError(what + ": " + std::strerror(err));
}

void AtomicFile::write(const void* data, std::size_t n)
{
    if (m_fd < 0)
        throw error::WriteError("cannot write " + m_tmp + ": the file is closed");
    const char* p = static_cast<const char*>(data);
    std::size_t done = 0;
    while (done < n) {
        const ssize_t w = ::write(m_fd, p + done, n - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            fail("cannot write " + m_tmp, w < 0 ? errno : ENOSPC);
        done += static_cast<std::size_t>(w);
    }
}

void AtomicFile::commit(bool sync)
{
    if (m_fd < 0)
        throw error::WriteError("cannot commit " + m_tmp + ": the file is closed");
    if (sync && ::fsync(m_fd) != 0)
        fail("fsync of " + m_tmp + " failed", errno);
    const int fd = m_fd;
    m_fd = -1;
    if (::close(fd) != 0)
        fail("cannot close " + m_tmp, errno);
    try {
        rename(m_tmp, m_path);
    } catch (...) {
        remove_all_noexcept(m_tmp);
        m_done = true;
        throw;
    }
    m_done = true;
}

void write_file_atomic(const std::string& path, const void* data, std::size_t n, bool sync)
{
    AtomicFile f(path);
    f.write(data, n);
    f.commit(sync);
}

} // namespace cairn::detail::fs
