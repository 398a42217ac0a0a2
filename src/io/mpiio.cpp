#include "io/mpiio.hpp"

#include "cairn/errors.hpp"
#include "core/fault.hpp"
#include "io/fs.hpp"
#include "io/mpi_hints.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#if defined(__linux__)
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 // Linux 5.14; older kernels answer EINVAL
#endif
#endif

namespace cairn::detail {

namespace {
constexpr std::uint64_t k_max_transfer = std::uint64_t(1) << 30;

std::string mpi_error_string(int rc)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    std::string out;
    for (int i = 0; i < len; ++i) { // one line: MPICH's error stacks span several
        const char c = msg[i];
        const bool space = c == '\n' || c == '\r' || c == '\t' || c == ' ';
        if (!space)
            out += c;
        else if (!out.empty() && out.back() != ' ')
            out += ' ';
    }
    while (!out.empty() && out.back() == ' ')
        out.pop_back();
    return out;
}

// The MPI error class an MPI-IO call reports for a failed system call with
// errno `err` (what an injected fault returns instead of calling MPI).
int mpi_error_of(int err)
{
    switch (err) {
    case ENOSPC: return MPI_ERR_NO_SPACE;
    case EDQUOT: return MPI_ERR_QUOTA;
    case EACCES:
    case EPERM: return MPI_ERR_ACCESS;
    case EROFS: return MPI_ERR_READ_ONLY;
    case ENOENT: return MPI_ERR_NO_SUCH_FILE;
    case EEXIST: return MPI_ERR_FILE_EXISTS;
    case EBUSY: return MPI_ERR_FILE_IN_USE;
    default: return MPI_ERR_IO;
    }
}
} // namespace

std::string distcp_writers(const std::string& name)
{
    const std::string ext = ".distcp";
    if (name.size() < 2 + ext.size() || name.compare(0, 2, "__") != 0 ||
        name.compare(name.size() - ext.size(), ext.size(), ext) != 0)
        return "";
    auto stem = name.substr(2, name.size() - 2 - ext.size());
    const auto us = stem.rfind('_');
    if (us == std::string::npos)
        return "";
    stem.resize(us);
    const auto digits = [](const std::string& t) {
        return !t.empty() && t.find_first_not_of("0123456789") == std::string::npos;
    };
    if (digits(stem))
        return "rank " + stem;
    if (stem.size() > 1 && stem[0] == 'n' && digits(stem.substr(1)))
        return "the ranks on the node of rank " + stem.substr(1);
    const auto dash = stem.find('-');
    if (dash == std::string::npos)
        return "";
    const auto lo = stem.substr(0, dash);
    auto hi = stem.substr(dash + 1);
    std::string step;
    if (const auto x = hi.find('x'); x != std::string::npos) {
        step = hi.substr(x + 1);
        hi.resize(x);
        if (!digits(step))
            return "";
    }
    if (!digits(lo) || !digits(hi))
        return "";
    return "ranks " + lo + " to " + hi + (step.empty() ? "" : " in steps of " + step);
}

void MpiFile::fail(int rc, const std::string& what) const
{
    auto msg = m_path + ": " + what + ": " + mpi_error_string(rc);
    if (m_mode == Mode::write && msg.find(std::strerror(ENOSPC)) == std::string::npos)
        msg += fs::no_space_note(m_path, 4096); // ROMIO reports ENOSPC as "Other I/O error"
    if (m_mode == Mode::write)
        throw error::WriteError(msg);
    throw error::ReadError(msg);
}

MpiFile::MpiFile(const std::string& path, Mode mode, const MpiHints& hints, MPI_Comm comm)
    : m_path(path), m_mode(mode)
{
    int members = 1;
    MPI_Comm_size(comm, &members);
    m_shared = members > 1;
    const int amode = mode == Mode::write ? (MPI_MODE_CREATE | MPI_MODE_WRONLY) : MPI_MODE_RDONLY;
    const MpiInfo info(hints);
    int injected = fault::inject(fault::mpiio_open, path);
    if (m_shared) { // an injected failure on one member fails the open on all, before MPI is called
        const int mine = injected;
        MPI_Allreduce(&mine, &injected, 1, MPI_INT, MPI_MAX, comm);
    }
    const int rc = injected ? mpi_error_of(injected) : MPI_File_open(comm, path.c_str(), amode, info.get(), &m_fh);
    if (rc != MPI_SUCCESS) {
        m_fh = MPI_FILE_NULL;
        fail(rc, mode == Mode::write ? "cannot create" : "cannot open");
    }
    log_hints(m_fh, hints, path);
}

MpiFile::~MpiFile()
{
    unmap();
    if (m_fh != MPI_FILE_NULL)
        MPI_File_close(&m_fh);
}

bool MpiFile::map_writes(std::uint64_t lo, std::uint64_t hi, std::uint64_t file_size)
{
#if defined(__linux__)
    unmap();
    if (m_mode != Mode::write || hi <= lo || file_size < hi)
        return false;
    if (const char* v = std::getenv("CAIRN_GROUP_WRITES"); !v || std::strcmp(v, "mapped") != 0)
        return false; // opt-in: not measured faster than MPI-IO here (docs/BENCHMARKS.md)
    struct statfs sf {};
    if (::statfs(m_path.c_str(), &sf) != 0)
        return false;
    switch (static_cast<unsigned long>(sf.f_type)) {
    case EXT4_SUPER_MAGIC: // also ext2 and ext3
    case XFS_SUPER_MAGIC:
    case BTRFS_SUPER_MAGIC:
    case TMPFS_MAGIC: break;
    default: return false; // parallel file systems lock ranges, not whole files
    }
    const int fd = ::open(m_path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return false;
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        ::close(fd);
        return false;
    }
    // Every member extends to the same size (only ever growing it), so that
    // none cuts off what another wrote.
    if (static_cast<std::uint64_t>(st.st_size) < file_size && ::ftruncate(fd, static_cast<off_t>(file_size)) != 0) {
        const int err = errno;
        ::close(fd);
        throw error::WriteError(m_path + ": cannot extend the file to " + std::to_string(file_size) +
                                " bytes: " + std::strerror(err) + fs::no_space_note(m_path, file_size));
    }
    // A probe: one page mapped and faulted in writable (EINVAL where the
    // kernel cannot).
    const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    const auto map_lo = lo / page * page;
    void* m = ::mmap(nullptr, static_cast<std::size_t>(page), PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                     static_cast<off_t>(map_lo));
    const bool ok = m != MAP_FAILED && ::madvise(m, static_cast<std::size_t>(page), MADV_POPULATE_WRITE) == 0;
    if (m != MAP_FAILED)
        ::munmap(m, static_cast<std::size_t>(page));
    if (!ok) {
        ::close(fd);
        return false; // MPI-IO writes, and reports any error
    }
    m_map_fd = fd;
    m_map_from = lo;
    m_map_to = hi;
    return true;
#else
    (void)lo;
    (void)hi;
    (void)file_size;
    return false;
#endif
}

void MpiFile::unmap() noexcept
{
#if defined(__linux__)
    if (m_map_fd >= 0)
        ::close(m_map_fd);
#endif
    m_map_fd = -1;
    m_map_from = m_map_to = 0;
}

void MpiFile::write_at(std::uint64_t offset, const void* data, std::uint64_t size)
{
    const auto* p = static_cast<const char*>(data);
#if defined(__linux__)
    if (m_map_fd >= 0 && size > 0 && offset >= m_map_from && offset + size <= m_map_to) {
        const auto what = [&] {
            return "write of " + std::to_string(size) + " bytes at offset " + std::to_string(offset);
        };
        if (const int injected = fault::inject(fault::mpiio_write, m_path))
            fail(mpi_error_of(injected), what());
        // Mapped for this write only: unmapped before early writeback
        // starts on the pages, which then need no write-protecting.
        const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
        const auto first = offset / page * page;
        const auto len = static_cast<std::size_t>(offset + size - first);
        void* m = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, m_map_fd, static_cast<off_t>(first));
        if (m == MAP_FAILED || ::madvise(m, len, MADV_POPULATE_WRITE) != 0) {
            const int err = errno;
            if (m != MAP_FAILED)
                ::munmap(m, len);
            // EFAULT: a page the file system could not provide (no space, an I/O error).
            throw error::WriteError(m_path + ": " + what() + " (through a mapping): " +
                                    (err == EFAULT ? std::string("the file system could not provide the pages")
                                                   : std::string(std::strerror(err))) +
                                    fs::no_space_note(m_path, size));
        }
        std::memcpy(static_cast<char*>(m) + (offset - first), p, static_cast<std::size_t>(size));
        ::munmap(m, len);
        return;
    }
#endif
    while (size > 0) {
        const int n = static_cast<int>(std::min(size, k_max_transfer));
        MPI_Status st;
        const int injected = fault::inject(fault::mpiio_write, m_path);
        const int rc = injected ? mpi_error_of(injected)
                                : MPI_File_write_at(m_fh, static_cast<MPI_Offset>(offset), p, n, MPI_BYTE, &st);
        if (rc != MPI_SUCCESS)
            fail(rc, "write of " + std::to_string(n) + " bytes at offset " + std::to_string(offset));
        int done = 0;
        MPI_Get_count(&st, MPI_BYTE, &done);
        if (done <= 0)
            throw error::WriteError(m_path + ": write at offset " + std::to_string(offset) + " made no progress" +
                                    fs::no_space_note(m_path, static_cast<std::uint64_t>(n)));
        p += done;
        offset += static_cast<std::uint64_t>(done);
        size -= static_cast<std::uint64_t>(done);
    }
}

void MpiFile::read_at(std::uint64_t offset, void* data, std::uint64_t size)
{
    auto* p = static_cast<char*>(data);
    const auto start = offset;
    const auto want = size;
    while (size > 0) {
        const int n = static_cast<int>(std::min(size, k_max_transfer));
        MPI_Status st;
        const int injected = fault::inject(fault::mpiio_read, m_path);
        const int rc = injected ? mpi_error_of(injected)
                                : MPI_File_read_at(m_fh, static_cast<MPI_Offset>(offset), p, n, MPI_BYTE, &st);
        if (rc != MPI_SUCCESS)
            fail(rc, "read of " + std::to_string(n) + " bytes at offset " + std::to_string(offset));
        int done = 0;
        MPI_Get_count(&st, MPI_BYTE, &done);
        if (done <= 0)
            throw error::ReadError(m_path + ": short read: " + std::to_string(want) + " bytes at offset " +
                                   std::to_string(start) + ", the file ends after " +
                                   std::to_string(offset - start) + " of them (truncated file?)");
        p += done;
        offset += static_cast<std::uint64_t>(done);
        size -= static_cast<std::uint64_t>(done);
    }
}

void MpiFile::set_size(std::uint64_t size)
{
    const int injected = fault::inject(fault::mpiio_set_size, m_path);
    const int rc = injected ? mpi_error_of(injected) : MPI_File_set_size(m_fh, static_cast<MPI_Offset>(size));
    if (rc != MPI_SUCCESS)
        fail(rc, "cannot set the size to " + std::to_string(size));
}

std::uint64_t MpiFile::size()
{
    MPI_Offset s = 0;
    const int rc = MPI_File_get_size(m_fh, &s);
    if (rc != MPI_SUCCESS)
        fail(rc, "cannot get the size");
    return static_cast<std::uint64_t>(s);
}

void MpiFile::sync()
{
    unmap(); // the pages written through it stay dirty in the page cache: the sync writes them
    const int injected = fault::inject(fault::mpiio_sync, m_path);
    int rc = MPI_SUCCESS;
    if (m_shared) { // collective: every member calls MPI, an injected failure counts after it
        rc = MPI_File_sync(m_fh);
        if (injected)
            rc = mpi_error_of(injected);
    } else {
        rc = injected ? mpi_error_of(injected) : MPI_File_sync(m_fh);
    }
    if (rc != MPI_SUCCESS)
        fail(rc, "sync failed");
}

void MpiFile::close()
{
    unmap();
    int rc = MPI_File_close(&m_fh);
    m_fh = MPI_FILE_NULL;
    if (const int injected = rc == MPI_SUCCESS ? fault::inject(fault::mpiio_close, m_path) : 0)
        rc = mpi_error_of(injected); // closed all the same, as after a real failure
    if (rc != MPI_SUCCESS)
        fail(rc, "close failed");
}

} // namespace cairn::detail
