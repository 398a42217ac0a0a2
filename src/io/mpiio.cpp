#include "io/mpiio.hpp"

#include "cairn/errors.hpp"
#include "core/fault.hpp"
#include "io/fs.hpp"
#include "io/mpi_hints.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <new>
#include <thread>

#include <unistd.h>

#if defined(__linux__)
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/statfs.h>
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
    m_direct.reset();
    if (m_fh != MPI_FILE_NULL)
        MPI_File_close(&m_fh);
}

// ---- direct writes (write_direct) ----------------------------------------------

namespace {
constexpr std::uint64_t k_direct_align = 4096; // offsets, lengths and memory of direct writes
constexpr std::uint64_t k_direct_buffer = std::uint64_t(4) << 20; // each buffer
constexpr int k_direct_buffers = 4;
constexpr int k_direct_threads = 2; // writes in flight per member

std::uint64_t round_up(std::uint64_t v, std::uint64_t a) { return (v + a - 1) / a * a; }
} // namespace

// The state of write_direct(): a ring of buffers, the one being filled
// (m_fill; its bytes are for [m_off, m_off + m_len) of the file) and those
// handed to the helper threads, which write them in the order handed, two
// at a time; the first failure of a write.
class MpiFile::Direct {
public:
    Direct(int fd, std::uint64_t lo, std::uint64_t hi) : m_fd(fd), m_off(lo), m_lo(lo), m_hi(hi)
    {
        try {
            for (auto& b : m_buf) {
                b.data = static_cast<char*>(std::aligned_alloc(k_direct_align, k_direct_buffer));
                if (!b.data)
                    throw std::bad_alloc();
            }
            for (auto& t : m_threads)
                t = std::thread([this] { run(); });
        } catch (...) {
            stop();
            throw;
        }
    }
    ~Direct() { stop(); }
    Direct(const Direct&) = delete;
    Direct& operator=(const Direct&) = delete;

    /// Whether [offset, offset + size) overlaps the region.
    bool overlaps(std::uint64_t offset, std::uint64_t size) const noexcept
    {
        return offset < m_hi && offset + size > m_lo;
    }
    /// Whether [offset, offset + size) is in the region, at or after every
    /// byte put so far.
    bool takes(std::uint64_t offset, std::uint64_t size) const noexcept
    {
        return offset >= m_off + m_len && offset + size <= m_hi;
    }
    /// Puts `size` bytes for `offset` (takes() is true), zeros before them
    /// back to the last byte put. False: a write failed (failure()).
    bool put(std::uint64_t offset, const char* p, std::uint64_t size)
    {
        if (m_len > 0 && offset >= m_off + k_direct_buffer && !submit())
            return false; // the gap leaves this buffer: write it, start the next at the gap's end
        if (m_len == 0)
            m_off = offset / k_direct_align * k_direct_align;
        return append(nullptr, offset - (m_off + m_len)) && append(p, size);
    }
    /// Writes what is buffered and waits for every write. False: a write failed.
    bool finish()
    {
        if (m_len > 0 && !submit())
            return false;
        std::unique_lock<std::mutex> lock(m_mutex);
        m_cv.wait(lock, [&] {
            for (const auto& b : m_buf)
                if (b.busy)
                    return false;
            return true;
        });
        return m_err == 0;
    }
    /// The first failed write: errno, offset and length.
    int failure(std::uint64_t& offset, std::uint64_t& length) const
    {
        offset = m_err_off;
        length = m_err_len;
        return m_err;
    }

private:
    struct Buffer {
        char* data = nullptr;
        std::uint64_t off = 0, len = 0;
        bool busy = false; // handed to the helper threads
    };

    // Ends the threads (after the writes handed to them), frees the buffers
    // and closes the descriptor.
    void stop() noexcept
    {
        {
            std::lock_guard<std::mutex> lock(m_mutex);
            m_stop = true;
        }
        m_cv.notify_all();
        for (auto& t : m_threads)
            if (t.joinable())
                t.join();
        for (auto& b : m_buf)
            std::free(b.data);
        ::close(m_fd);
    }
    // Copies `n` bytes from `p` (null: zeros) after the buffered ones,
    // handing each buffer that fills to the threads.
    bool append(const char* p, std::uint64_t n)
    {
        while (n > 0) {
            const auto m = std::min(n, k_direct_buffer - m_len);
            char* dst = m_buf[m_fill].data + m_len;
            if (p) {
                std::memcpy(dst, p, static_cast<std::size_t>(m));
                p += m;
            } else {
                std::memset(dst, 0, static_cast<std::size_t>(m));
            }
            m_len += m;
            n -= m;
            if (m_len == k_direct_buffer && !submit())
                return false;
        }
        return true;
    }
    // Hands the buffer being filled to the threads, padded with zeros to a
    // whole number of blocks (inside the region: its end is aligned), and
    // waits until the next one is free.
    bool submit()
    {
        const auto len = round_up(m_len, k_direct_align);
        std::memset(m_buf[m_fill].data + m_len, 0, static_cast<std::size_t>(len - m_len));
        {
            std::lock_guard<std::mutex> lock(m_mutex);
            m_buf[m_fill] = Buffer{m_buf[m_fill].data, m_off, len, true};
            m_queue.push_back(m_fill);
        }
        m_cv.notify_all();
        m_off += k_direct_buffer;
        m_len = 0;
        m_fill = (m_fill + 1) % k_direct_buffers;
        std::unique_lock<std::mutex> lock(m_mutex);
        m_cv.wait(lock, [&] { return !m_buf[m_fill].busy; });
        return m_err == 0;
    }
    // A helper thread: writes the buffers handed to it, none after a
    // failure, until stop() once none is left.
    void run()
    {
        for (;;) {
            std::unique_lock<std::mutex> lock(m_mutex);
            m_cv.wait(lock, [&] { return !m_queue.empty() || m_stop; });
            if (m_queue.empty())
                return;
            const int k = m_queue.front();
            m_queue.pop_front();
            const Buffer b = m_buf[k];
            const bool write = m_err == 0;
            lock.unlock();
            int err = 0;
            std::uint64_t done = 0;
            while (write && done < b.len) {
                const auto n = ::pwrite(m_fd, b.data + done, static_cast<std::size_t>(b.len - done),
                                        static_cast<off_t>(b.off + done));
                if (n < 0 && errno == EINTR)
                    continue;
                if (n <= 0) {
                    err = n < 0 ? errno : ENOSPC; // no progress: no space for it
                    break;
                }
                done += static_cast<std::uint64_t>(n);
            }
            lock.lock();
            if (err && !m_err) {
                m_err = err;
                m_err_off = b.off;
                m_err_len = b.len;
            }
            m_buf[k].busy = false;
            lock.unlock();
            m_cv.notify_all();
        }
    }

    int m_fd;
    std::uint64_t m_off;      // file offset of the buffer being filled
    std::uint64_t m_len = 0;  // bytes in it
    const std::uint64_t m_lo, m_hi; // the region
    int m_fill = 0;
    Buffer m_buf[k_direct_buffers];
    std::deque<int> m_queue; // buffers handed to the threads, not yet taken
    std::thread m_threads[k_direct_threads];
    std::mutex m_mutex;
    std::condition_variable m_cv;
    bool m_stop = false;
    int m_err = 0; // of the first failed write
    std::uint64_t m_err_off = 0, m_err_len = 0;
};

bool MpiFile::write_direct(std::uint64_t lo, std::uint64_t hi)
{
#if defined(__linux__) && defined(O_DIRECT)
    m_direct.reset();
    if (m_mode != Mode::write || hi <= lo || lo % k_direct_align != 0 || hi % k_direct_align != 0)
        return false;
    if (const char* v = std::getenv("CAIRN_GROUP_WRITES"); !v || std::strcmp(v, "direct") != 0)
        return false; // opt-in: on a quiet node buffered writes measured faster
    struct statfs sf {};
    if (::statfs(m_path.c_str(), &sf) != 0)
        return false;
    switch (static_cast<unsigned long>(sf.f_type)) {
    case EXT4_SUPER_MAGIC: // also ext2 and ext3
    case XFS_SUPER_MAGIC: break;
    default: return false; // others may lock the file for direct writes, or lack them
    }
    const int fd = ::open(m_path.c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC);
    if (fd < 0)
        return false;
    // Allocated first: a direct write of allocated, aligned blocks that does
    // not extend the file takes the file's lock shared. Every member extends
    // the file to the end of its region at most, none cuts it.
    if (::fallocate(fd, 0, static_cast<off_t>(lo), static_cast<off_t>(hi - lo)) != 0) {
        const int err = errno;
        ::close(fd);
        if (err == EOPNOTSUPP || err == ENOSYS || err == EINVAL)
            return false;
        throw error::WriteError(m_path + ": cannot allocate " + std::to_string(hi - lo) + " bytes at offset " +
                                std::to_string(lo) + ": " + std::strerror(err) +
                                fs::no_space_note(m_path, hi - lo));
    }
    m_direct = std::make_unique<Direct>(fd, lo, hi); // owns fd, also when it throws
    return true;
#else
    (void)lo;
    (void)hi;
    return false;
#endif
}

void MpiFile::end_direct()
{
    if (!m_direct)
        return;
    const bool ok = m_direct->finish();
    std::uint64_t off = 0, len = 0;
    const int err = m_direct->failure(off, len);
    m_direct.reset();
    if (!ok)
        throw error::WriteError(m_path + ": write of " + std::to_string(len) + " bytes at offset " +
                                std::to_string(off) + " (direct): " + std::strerror(err) +
                                fs::no_space_note(m_path, len));
}

void MpiFile::write_at(std::uint64_t offset, const void* data, std::uint64_t size)
{
    const auto* p = static_cast<const char*>(data);
    if (m_direct && size > 0 && m_direct->overlaps(offset, size)) {
        const auto what = "write of " + std::to_string(size) + " bytes at offset " + std::to_string(offset);
        if (!m_direct->takes(offset, size)) // a page-cache write there could be overwritten by zeros
            throw error::Internal("internal: " + m_path + ": " + what + " (direct) is not after the bytes written");
        if (const int injected = fault::inject(fault::mpiio_write, m_path))
            fail(mpi_error_of(injected), what);
        if (!m_direct->put(offset, p, size))
            end_direct(); // throws the failure
        return;
    }
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
    std::exception_ptr direct; // collective: MPI is called even after a failed direct write
    try {
        end_direct(); // the sync makes the direct writes durable (metadata of allocated blocks, device cache)
    } catch (...) {
        direct = std::current_exception();
    }
    const int injected = fault::inject(fault::mpiio_sync, m_path);
    int rc = MPI_SUCCESS;
    if (m_shared) { // collective: every member calls MPI, an injected failure counts after it
        rc = MPI_File_sync(m_fh);
        if (injected)
            rc = mpi_error_of(injected);
    } else {
        rc = injected ? mpi_error_of(injected) : MPI_File_sync(m_fh);
    }
    if (direct)
        std::rethrow_exception(direct);
    if (rc != MPI_SUCCESS)
        fail(rc, "sync failed");
}

void MpiFile::close()
{
    std::exception_ptr direct; // collective: MPI is called even after a failed direct write
    try {
        end_direct();
    } catch (...) {
        direct = std::current_exception();
    }
    int rc = MPI_File_close(&m_fh);
    m_fh = MPI_FILE_NULL;
    if (const int injected = rc == MPI_SUCCESS ? fault::inject(fault::mpiio_close, m_path) : 0)
        rc = mpi_error_of(injected); // closed all the same, as after a real failure
    if (direct)
        std::rethrow_exception(direct);
    if (rc != MPI_SUCCESS)
        fail(rc, "close failed");
}

} // namespace cairn::detail
