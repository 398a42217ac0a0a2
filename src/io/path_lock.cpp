#include "io/path_lock.hpp"

#include "cairn/distcp.hpp" // metadata_file_name: a per-rank checkpoint's identity is its metadata.h5
#include "cairn/errors.hpp"
#include "io/fs.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <random>
#include <system_error>

namespace cairn::detail {

namespace {

std::string errno_text(int e) { return std::strerror(e); }

// "host h, pid p[, job j], since t": who this process is.
std::string owner_text()
{
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) != 0)
        std::strcpy(host, "?");
    std::string out = std::string("host ") + host + ", pid " + std::to_string(static_cast<long long>(getpid()));
    for (const char* var : {"SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "FLUX_JOB_ID", "COBALT_JOBID"})
        if (const char* job = std::getenv(var); job && *job) {
            out += std::string(", job ") + job;
            break;
        }
    char when[32] = {};
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    if (gmtime_r(&now, &tm))
        std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return out + ", since " + when;
}

// The lock file's text (what its owner wrote), without the token line; empty
// when it cannot be read.
std::string read_owner(int fd, std::string* token = nullptr)
{
    std::string text(4096, '\0');
    const ssize_t n = pread(fd, text.data(), text.size(), 0);
    text.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
    std::string owner;
    for (std::size_t p = 0; p < text.size();) {
        auto nl = text.find('\n', p);
        if (nl == std::string::npos)
            nl = text.size();
        const std::string line = text.substr(p, nl - p);
        if (line.rfind("owner ", 0) == 0)
            owner = line.substr(6);
        else if (token && line.rfind("token ", 0) == 0)
            *token = line.substr(6);
        p = nl + 1;
    }
    return owner;
}

bool same_file(int fd, const std::string& path)
{
    struct stat a {}, b {};
    return fstat(fd, &a) == 0 && stat(path.c_str(), &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

} // namespace

std::string lock_file_name(const std::string& checkpoint_path) { return fs::strip(checkpoint_path) + lock_suffix; }

bool lock_held(const std::string& file)
{
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    struct flock fl {};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
#ifdef F_OFD_GETLK
    const int rc = fcntl(fd, F_OFD_GETLK, &fl);
#else
    const int rc = fcntl(fd, F_GETLK, &fl);
#endif
    ::close(fd);
    return rc == 0 && fl.l_type != F_UNLCK;
}

PathLock::PathLock(const std::string& checkpoint_path)
    : m_path(fs::strip(checkpoint_path)), m_file(lock_file_name(checkpoint_path))
{
    {
        std::error_code ec; // the storage reports a directory it cannot create (and its faults fire there)
        for (std::string dir = fs::parent(m_file); dir != "." && dir != "/" && !std::filesystem::exists(dir, ec);) {
            m_created.push_back(dir);
            const auto up = fs::parent(dir);
            if (up == dir)
                break;
            dir = up;
        }
        std::filesystem::create_directories(fs::parent(m_file), ec);
    }
    // A previous owner removes the file before releasing it: a lock taken on
    // a file no longer at the path is retried on the new one.
    for (int attempt = 0; attempt < 16; ++attempt) {
        m_fd = ::open(m_file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (m_fd < 0)
            return; // no lock file here (a path that cannot be created): the storage reports what is wrong
        struct flock fl {};
        fl.l_type = F_WRLCK;
        fl.l_whence = SEEK_SET;
#ifdef F_OFD_SETLK
        const int rc = fcntl(m_fd, F_OFD_SETLK, &fl);
#else
        const int rc = fcntl(m_fd, F_SETLK, &fl);
#endif
        if (rc != 0) {
            const int e = errno;
            if (e == EAGAIN || e == EACCES) {
                const std::string other = read_owner(m_fd);
                ::close(m_fd);
                m_fd = -1;
                throw error::ConcurrentAccess("checkpoint " + m_path + " is being written by another job (" +
                                              (other.empty() ? std::string("owner unknown") : other) +
                                              "; lock file " + m_file + "): one writer per path");
            }
            break; // no locks here (ENOLCK, EINVAL, EOPNOTSUPP...): unlocked, check() still sees a takeover
        }
        if (same_file(m_fd, m_file)) {
            m_locked = true;
            break;
        }
        ::close(m_fd);
        m_fd = -1;
    }
    if (m_fd < 0)
        throw error::ConcurrentAccess("checkpoint " + m_path + ": its lock file " + m_file +
                                      " keeps being replaced by another job");
    std::random_device rd;
    const std::uint64_t token = (std::uint64_t(rd()) << 32) ^ rd() ^ static_cast<std::uint64_t>(std::time(nullptr));
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(token));
    m_owner = owner_text() + ", token " + hex;
    const std::string text = "cairn-lock 1\nowner " + m_owner + "\n";
    if (ftruncate(m_fd, 0) != 0 || pwrite(m_fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
        const int e = errno;
        ::close(m_fd);
        m_fd = -1;
        throw error::WriteError("cannot write the lock file " + m_file + ": " + errno_text(e));
    }
}

PathLock::~PathLock()
{
    if (m_fd < 0)
        return;
    // Removed while still locked (and only when still this save's), so that
    // whoever takes it next creates a new one.
    if (same_file(m_fd, m_file) && read_owner(m_fd) == m_owner)
        ::unlink(m_file.c_str());
    ::close(m_fd);
    // The directories made for the lock file, when a failed save left them
    // empty (rmdir removes no directory that holds anything).
    for (const auto& dir : m_created)
        if (::rmdir(dir.c_str()) != 0)
            break;
}

void PathLock::check() const
{
    if (m_fd < 0)
        return;
    // Read through the path: another save may have replaced the file.
    const int fd = ::open(m_file.c_str(), O_RDONLY | O_CLOEXEC);
    const std::string now = fd < 0 ? std::string() : read_owner(fd);
    if (fd >= 0)
        ::close(fd);
    if (now != m_owner)
        throw error::ConcurrentAccess("checkpoint " + m_path + " was taken over by another job during this save (" +
                                      (now.empty() ? std::string("its lock file " + m_file + " is gone")
                                                   : "lock file " + m_file + " now names " + now) +
                                      "); nothing was committed: one writer per path");
}

namespace {

CheckpointIdentity identity_of(std::string file)
{
    CheckpointIdentity id;
    id.file = std::move(file);
    struct stat st {};
    if (stat(id.file.c_str(), &st) != 0)
        return id;
    id.known = true;
    id.dev = static_cast<std::uint64_t>(st.st_dev);
    id.ino = static_cast<std::uint64_t>(st.st_ino);
    id.mtime_ns =
        static_cast<std::uint64_t>(st.st_mtim.tv_sec) * 1000000000u + static_cast<std::uint64_t>(st.st_mtim.tv_nsec);
    id.size = static_cast<std::uint64_t>(st.st_size);
    return id;
}

} // namespace

CheckpointIdentity checkpoint_identity(const std::string& path, bool container)
{
    return identity_of(container ? fs::strip(path) : fs::join(fs::strip(path), metadata_file_name));
}

bool replaced(const CheckpointIdentity& seen)
{
    if (!seen.known)
        return false;
    const CheckpointIdentity now = identity_of(seen.file);
    return !now.known || now.dev != seen.dev || now.ino != seen.ino || now.mtime_ns != seen.mtime_ns ||
           now.size != seen.size;
}

} // namespace cairn::detail
