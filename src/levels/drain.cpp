// Draining a committed node-local step into the file system, and the record
// of which levels hold which step (root/.cairn-levels).
#include "levels/drain.hpp"

#include "cairn/distcp.hpp"
#include "cairn/errors.hpp"
#include "core/fault.hpp"
#include "storage/per_rank/commit.hpp"
#include "io/fs.hpp"
#include "io/writeback.hpp"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#if defined(__linux__)
#include <linux/aio_abi.h>
#include <sys/sendfile.h>
#include <sys/syscall.h>
#endif
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

namespace cairn::detail {

namespace {

/// Bytes per copy_file_range / sendfile call: large enough to stream at the
/// device's speed, small enough that a cancel is seen promptly.
constexpr std::size_t kernel_chunk = std::size_t(8) << 20;
/// The buffer of the read/write fallback (aligned to the page).
constexpr std::size_t buffer_bytes = std::size_t(4) << 20;
/// With fsync: bytes per file written but not yet on the device (early
/// writeback, io/writeback.hpp), WriteOptions::writeback_bytes' default,
/// so that copying and the device overlap as in a save.
constexpr std::uint64_t writeback_bytes = std::uint64_t(64) << 20;

/// DrainCopy::direct: offsets, lengths and memory of O_DIRECT writes are
/// multiples of this (the page; any device's logical block up to it).
constexpr std::uint64_t direct_align = 4096;
/// DrainCopy::direct: bytes per O_DIRECT write, checked for a cancel
/// between two, and how many are in flight at once (Linux native AIO;
/// one at a time where that is unavailable): enough to keep the device busy
/// while the drain's thread waits for a CPU.
constexpr std::size_t direct_piece = std::size_t(8) << 20;
constexpr int direct_depth = 4;

/// A file is copied by up to Drain's `streams` threads at once (a stream
/// per stream_min_bytes), each a contiguous range starting at a multiple of
/// stream_align, with its own descriptors and early writeback: one thread
/// alternates between copying (processor) and waiting for the device, two
/// keep both busy, and beside a simulation on the same cores they take a
/// larger share of them (docs/BENCHMARKS.md, "Drain of a node-local step").
constexpr int default_streams = 2;
constexpr int max_streams = 64;
constexpr std::uint64_t stream_min_bytes = std::uint64_t(32) << 20;
constexpr std::uint64_t stream_align = std::uint64_t(1) << 20;

/// The suffix of a file being copied: never the name of a data file or of
/// the metadata, so no commit or load takes a partial copy for a complete one.
constexpr const char* part_suffix = ".cairn-part";

struct Cancelled {};

/// How a file is copied.
struct CopyHow {
    bool fsync = false;  ///< made durable before it takes its name
    bool direct = false; ///< DrainCopy::direct (with fsync only)
    int streams = 1;     ///< ranges copied at once
    const std::atomic<bool>* cancel = nullptr; ///< set: stop between two pieces
};

/// When the streams copying one file stop between two pieces: the drain is
/// cancelled, or another stream of the file failed.
class StopFlag {
public:
    explicit StopFlag(const std::atomic<bool>* cancel) noexcept : m_cancel(cancel) {}
    void fail() noexcept { m_failed.store(true, std::memory_order_relaxed); }
    /// Throws Cancelled when the copy is to stop.
    void check() const
    {
        if ((m_cancel && m_cancel->load(std::memory_order_relaxed)) || m_failed.load(std::memory_order_relaxed))
            throw Cancelled{};
    }

private:
    const std::atomic<bool>* m_cancel;
    std::atomic<bool> m_failed{false};
};

std::string sys_error(int err) { return std::strerror(err); }

class Fd {
public:
    explicit Fd(int fd = -1) : m_fd(fd) {}
    ~Fd()
    {
        if (m_fd >= 0)
            ::close(m_fd);
    }
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    int get() const noexcept { return m_fd; }
    /// close(2), reporting its error (a write-back failure shows here).
    int close() noexcept
    {
        const int r = ::close(m_fd);
        m_fd = -1;
        return r == 0 ? 0 : errno;
    }

private:
    int m_fd;
};

/// Whether an errno of copy_file_range / sendfile says "not between these
/// two files" (take the next method) rather than a failure of the copy.
bool unsupported(int err) noexcept
{
    return err == EXDEV || err == EINVAL || err == ENOSYS || err == EOPNOTSUPP || err == EBADF || err == ENOTSUP;
}

/// Whether an errno of an in-kernel copy is the destination's fault.
bool write_side(int err) noexcept
{
    return err == ENOSPC || err == EDQUOT || err == EFBIG || err == EROFS || err == EPERM || err == ETXTBSY;
}

[[noreturn]] void copy_failed(const std::string& src, const std::string& dst, int err)
{
    if (write_side(err))
        throw error::WriteError("cannot write " + dst + " (a copy of " + src + "): " + sys_error(err));
    throw error::ReadError("cannot copy " + src + " to " + dst + ": " + sys_error(err));
}

/// copy_file_range(2) of `want` bytes at `off` (the same offset in both
/// files) on Linux; elsewhere -1 with ENOSYS (unsupported(): the next method).
ssize_t copy_file_range_at(int in, int out, std::uint64_t off, std::size_t want) noexcept
{
#if defined(__linux__)
    auto in_off = static_cast<loff_t>(off), out_off = static_cast<loff_t>(off);
    return ::copy_file_range(in, &in_off, out, &out_off, want, 0);
#else
    (void)in, (void)out, (void)off, (void)want;
    errno = ENOSYS;
    return -1;
#endif
}

/// sendfile(2) of `want` bytes at `off` of `in` to `out`'s file offset on
/// Linux; elsewhere -1 with ENOSYS (unsupported(): the next method).
ssize_t sendfile_at(int in, int out, std::uint64_t off, std::size_t want) noexcept
{
#if defined(__linux__)
    auto in_off = static_cast<off_t>(off);
    return ::sendfile(out, in, &in_off, want);
#else
    (void)in, (void)out, (void)off, (void)want;
    errno = ENOSYS;
    return -1;
#endif
}

/// The bytes of one file copied into its part file by the fastest method
/// the two files allow: copy_file_range, else sendfile, else pread/pwrite
/// through an aligned buffer.
class ByteCopy {
public:
    ByteCopy(int in, int out, const std::string& src, const std::string& part, std::uint64_t size)
        : m_in(in), m_out(out), m_src(src), m_part(part), m_size(size)
    {
    }

    /// Copies up to `want` bytes at `off` (the same offset in both files):
    /// returns how many, or 0 when the call is to be repeated (interrupted,
    /// or the method changed). Throws error::ReadError / error::WriteError.
    std::size_t once(std::uint64_t off, std::size_t want)
    {
        switch (m_method) {
        case Method::copy_range: return in_kernel(copy_file_range_at(m_in, m_out, off, want), off, Method::send);
        case Method::send:
            if (::lseek(m_out, static_cast<off_t>(off), SEEK_SET) < 0)
                throw error::WriteError("cannot seek in " + m_part + ": " + sys_error(errno));
            return in_kernel(sendfile_at(m_in, m_out, off, want), off, Method::read_write);
        case Method::read_write: return through_buffer(off, want);
        }
        return 0;
    }

private:
    enum class Method { copy_range, send, read_write };

    /// The outcome `n` of an in-kernel copy at `off`; `next`: the method to
    /// fall back on when this one does not work between these two files.
    std::size_t in_kernel(ssize_t n, std::uint64_t off, Method next)
    {
        if (n < 0) {
            const int err = errno;
            if (unsupported(err))
                m_method = next;
            else if (err != EINTR)
                copy_failed(m_src, m_part, err);
            return 0;
        }
        if (n == 0)
            ended(off);
        return static_cast<std::size_t>(n);
    }

    std::size_t through_buffer(std::uint64_t off, std::size_t want)
    {
        if (!m_buf) {
            void* p = nullptr;
            if (::posix_memalign(&p, 4096, buffer_bytes) != 0)
                throw error::WriteError("cannot allocate a copy buffer of " + std::to_string(buffer_bytes) +
                                        " bytes to copy " + m_src);
            m_buf.reset(static_cast<unsigned char*>(p));
        }
        const auto r = ::pread(m_in, m_buf.get(), std::min(want, buffer_bytes), static_cast<off_t>(off));
        if (r < 0) {
            if (errno == EINTR)
                return 0;
            throw error::ReadError("cannot read " + m_src + ": " + sys_error(errno));
        }
        if (r == 0)
            ended(off);
        std::size_t done = 0;
        while (done < static_cast<std::size_t>(r)) {
            const auto w = ::pwrite(m_out, m_buf.get() + done, static_cast<std::size_t>(r) - done,
                                    static_cast<off_t>(off + done));
            if (w < 0) {
                if (errno == EINTR)
                    continue;
                throw error::WriteError("cannot write " + m_part + " (a copy of " + m_src + "): " + sys_error(errno));
            }
            done += static_cast<std::size_t>(w);
        }
        return done;
    }

    [[noreturn]] void ended(std::uint64_t off) const
    {
        throw error::ReadError("cannot copy " + m_src + ": it ended at byte " + std::to_string(off) + " of " +
                               std::to_string(m_size) + " (changed while copied)");
    }

    int m_in, m_out;
    const std::string& m_src;
    const std::string& m_part;
    std::uint64_t m_size;
    Method m_method = Method::copy_range;
    std::unique_ptr<unsigned char, void (*)(void*)> m_buf{nullptr, std::free};
};

/// A read-only mapping of `len` bytes of a file from `off` (a multiple of the
/// page), unmapped when destroyed.
class Mapping {
public:
    Mapping(int fd, std::uint64_t off, std::uint64_t len) noexcept : m_len(static_cast<std::size_t>(len))
    {
        void* p = ::mmap(nullptr, m_len, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(off));
        m_p = p == MAP_FAILED ? nullptr : static_cast<const unsigned char*>(p);
    }
    ~Mapping()
    {
        if (m_p)
            ::munmap(const_cast<unsigned char*>(m_p), m_len);
    }
    Mapping(const Mapping&) = delete;
    Mapping& operator=(const Mapping&) = delete;
    const unsigned char* get() const noexcept { return m_p; }

private:
    const unsigned char* m_p = nullptr;
    std::size_t m_len;
};

/// The O_DIRECT writes of copy_direct() from the pages of `base` (the
/// bytes from file offset `lo` on) at the same offsets of `fd`: up to
/// direct_depth in flight through Linux native AIO (io_submit), else one at
/// a time. Remembers the lowest offset where a write failed or came short
/// and its errno (0: short). The destructor waits for the writes in flight.
class DirectWrites {
public:
    DirectWrites(int fd, const unsigned char* base, std::uint64_t lo, std::uint64_t end) noexcept
        : m_fd(fd), m_base(base), m_lo(lo), m_bad(end)
    {
#if defined(__linux__) && defined(SYS_io_setup)
        m_aio = ::syscall(SYS_io_setup, direct_depth, &m_ctx) == 0;
#endif
    }
    ~DirectWrites()
    {
#if defined(__linux__) && defined(SYS_io_setup)
        if (m_aio)
            ::syscall(SYS_io_destroy, m_ctx); // waits for what is in flight
#endif
    }
    DirectWrites(const DirectWrites&) = delete;
    DirectWrites& operator=(const DirectWrites&) = delete;

    bool failed() const noexcept { return m_failed; }
    std::uint64_t bad() const noexcept { return m_bad; }
    int error() const noexcept { return m_err; }

    /// Writes `len` bytes at `off`, or queues them (waiting for a free slot).
    void write(std::uint64_t off, std::size_t len) noexcept
    {
#if defined(__linux__) && defined(SYS_io_setup)
        if (m_aio) {
            while (m_in_flight == direct_depth && !m_failed)
                reap(1);
            if (m_failed)
                return;
            int slot = 0;
            while (m_busy[slot])
                ++slot;
            iocb& cb = m_cbs[slot];
            cb = iocb{};
            cb.aio_data = static_cast<std::uint64_t>(slot);
            cb.aio_lio_opcode = IOCB_CMD_PWRITE;
            cb.aio_fildes = static_cast<std::uint32_t>(m_fd);
            cb.aio_buf = reinterpret_cast<std::uint64_t>(m_base + (off - m_lo));
            cb.aio_nbytes = len;
            cb.aio_offset = static_cast<std::int64_t>(off);
            iocb* p = &cb;
            for (;;) {
                if (::syscall(SYS_io_submit, m_ctx, 1, &p) == 1) {
                    m_busy[slot] = true;
                    ++m_in_flight;
                    return;
                }
                const int err = errno;
                if (err == EAGAIN && m_in_flight > 0)
                    reap(1);
                else if (err != EINTR && err != EAGAIN)
                    return record(off, len, -err);
            }
        }
#endif
        for (;;) {
            const auto n = ::pwrite(m_fd, m_base + (off - m_lo), len, static_cast<off_t>(off));
            if (n >= 0 || errno != EINTR)
                return record(off, len, n >= 0 ? static_cast<std::int64_t>(n) : -errno);
        }
    }

    /// Waits for every write in flight.
    void finish() noexcept
    {
        while (m_in_flight > 0)
            reap(m_in_flight);
    }

private:
    void reap(int least) noexcept
    {
#if defined(__linux__) && defined(SYS_io_setup)
        io_event ev[direct_depth];
        const long n = ::syscall(SYS_io_getevents, m_ctx, least, direct_depth, ev, nullptr);
        if (n < 0) {
            if (errno == EINTR)
                return;
            // The writes in flight cannot be followed: wait for them all
            // (io_destroy does) and take none of them as written.
            const int err = errno;
            ::syscall(SYS_io_destroy, m_ctx);
            m_aio = false;
            for (int s = 0; s < direct_depth; ++s)
                if (m_busy[s]) {
                    m_busy[s] = false;
                    record(static_cast<std::uint64_t>(m_cbs[s].aio_offset), m_cbs[s].aio_nbytes, -err);
                }
            m_in_flight = 0;
            return;
        }
        for (long k = 0; k < n; ++k) {
            const auto s = static_cast<int>(ev[k].data);
            m_busy[s] = false;
            --m_in_flight;
            record(static_cast<std::uint64_t>(m_cbs[s].aio_offset), m_cbs[s].aio_nbytes, ev[k].res);
        }
#else
        (void)least;
#endif
    }

    void record(std::uint64_t off, std::size_t len, std::int64_t res) noexcept
    {
        if (res == static_cast<std::int64_t>(len))
            return;
        m_failed = true;
        const std::uint64_t at = res >= 0 ? off + static_cast<std::uint64_t>(res) / direct_align * direct_align : off;
        if (at < m_bad || (at == m_bad && m_err == 0)) {
            m_bad = at;
            m_err = res >= 0 ? 0 : static_cast<int>(-res);
        }
    }

    int m_fd;
    const unsigned char* m_base;
    std::uint64_t m_lo;
    std::uint64_t m_bad;
    int m_err = 0;
    bool m_failed = false;
    bool m_aio = false;
#if defined(__linux__) && defined(SYS_io_setup)
    aio_context_t m_ctx = 0;
    iocb m_cbs[direct_depth] = {};
#endif
    bool m_busy[direct_depth] = {};
    int m_in_flight = 0;
};

/// DrainCopy::direct: writes [lo, hi) of `in` (`src`; `lo` a multiple of the
/// page), rounded down to a multiple of direct_align bytes, into `part` from
/// the pages of a mapping of `in` with O_DIRECT, in direct_piece writes
/// (DirectWrites), into space allocated first. Only the kernel touches the
/// mapping (a source cut meanwhile is EFAULT, never SIGBUS). Returns where
/// the bytes written end, a multiple of direct_align from `lo`: `lo` itself,
/// or before the end, where the mapping, O_DIRECT or an unaligned write is
/// refused, the rest being left to the kernel copy. Throws Cancelled when
/// `stop` says so between two writes, error::ReadError / error::WriteError
/// naming the file.
std::uint64_t copy_direct(int in, const std::string& src, const std::string& part, std::uint64_t size,
                          std::uint64_t lo, std::uint64_t hi, const StopFlag& stop)
{
#if defined(__linux__) && defined(O_DIRECT)
    const std::uint64_t aligned = lo + (hi - lo) / direct_align * direct_align;
    if (aligned == lo)
        return lo;
    const Mapping map(in, lo, aligned - lo);
    if (!map.get())
        return lo;
    Fd out(::open(part.c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC));
    if (out.get() < 0)
        return lo; // refused (EINVAL), or the kernel copy's descriptor will say why
    // Allocated first: the writes then neither extend the file nor find the
    // device full half-way; where allocation is unsupported they extend it.
    if (::fallocate(out.get(), 0, static_cast<off_t>(lo), static_cast<off_t>(aligned - lo)) != 0) {
        const int err = errno;
        if (write_side(err) || err == EIO)
            throw error::WriteError("cannot allocate " + std::to_string(aligned - lo) + " bytes for " + part +
                                    " (a copy of " + src + "): " + sys_error(err) +
                                    fs::no_space_note(part, aligned - lo));
    }
    std::uint64_t off = aligned;
    {
        DirectWrites writes(out.get(), map.get(), lo, aligned); // waits for its writes before `out` closes
        for (std::uint64_t at = lo; at < aligned && !writes.failed(); at += direct_piece) {
            stop.check();
            writes.write(at, static_cast<std::size_t>(std::min<std::uint64_t>(aligned - at, direct_piece)));
        }
        writes.finish();
        if (writes.failed()) {
            // Everything below bad() is written; from there on the kernel
            // copy goes on where O_DIRECT was refused or a write came short.
            off = writes.bad();
            const int err = writes.error();
            if (err == EFAULT)
                throw error::ReadError("cannot copy " + src + ": it ended near byte " + std::to_string(off) + " of " +
                                       std::to_string(size) + " (changed while copied)");
            if (err != 0 && err != EINVAL && err != EOPNOTSUPP && err != ENOTSUP)
                throw error::WriteError("cannot write " + part + " (a copy of " + src + ") at offset " +
                                        std::to_string(off) + ": " + sys_error(err) +
                                        (write_side(err) ? fs::no_space_note(part, aligned - off) : std::string()));
        }
    }
    if (const int err = out.close())
        throw error::WriteError("cannot close " + part + " (a copy of " + src + "): " + sys_error(err));
    return off;
#else
    (void)in;
    (void)src;
    (void)part;
    (void)size;
    (void)hi;
    (void)stop;
    return lo;
#endif
}

/// The size of the regular file open as `fd` (`src`); error::ReadError
/// naming it when it is something else.
std::uint64_t regular_file_size(int fd, const std::string& src)
{
    struct stat st {};
    if (::fstat(fd, &st) != 0)
        throw error::ReadError("cannot stat " + src + ": " + sys_error(errno));
    if (!S_ISREG(st.st_mode))
        throw error::ReadError("cannot copy " + src + ": not a regular file (" +
                               fs::file_type_name(static_cast<unsigned>(st.st_mode)) + ")");
    return static_cast<std::uint64_t>(st.st_size);
}

/// One stream of copy_bytes(): copies [lo, hi) of `in` (`src`, `size`
/// bytes) into `part` through a descriptor of its own: with `fsync` and
/// `direct`, what copy_direct() takes first; the rest in chunks, with early
/// writeback. Returns the bytes written with O_DIRECT. Throws Cancelled when
/// `stop` says so between two chunks.
std::uint64_t copy_range(int in, const std::string& src, const std::string& part, std::uint64_t size,
                         std::uint64_t lo, std::uint64_t hi, bool fsync, bool direct, const StopFlag& stop)
{
    if (const int err = fault::inject(fault::drain_range, part))
        copy_failed(src, part, err);
    const std::uint64_t direct_end = fsync && direct ? copy_direct(in, src, part, size, lo, hi, stop) : lo;
    std::uint64_t off = direct_end;
    if (off == hi)
        return direct_end - lo;
    // Its own descriptor: the sendfile fallback writes at the descriptor's offset.
    Fd out(::open(part.c_str(), O_WRONLY | O_CLOEXEC));
    if (out.get() < 0)
        throw error::WriteError("cannot open " + part + " (to copy " + src + " there): " + sys_error(errno));
    // The copy's pages leave the page cache once on the device: a drained
    // step is read again, if ever, after a restart, and the simulation's
    // memory is worth more. The copy then reuses the pages it just dropped
    // instead of taking fresh ones for every byte (on the benchmark's
    // virtual machine, pages handed back to the host cost 4-8 x the
    // processor time to take again: docs/BENCHMARKS.md).
    Writeback writeback(part, fsync ? writeback_bytes : 0, true);
    ByteCopy copy(in, out.get(), src, part, size);
    while (off < hi) {
        stop.check();
        const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(hi - off, kernel_chunk));
        if (const std::size_t n = copy.once(off, want)) {
            writeback.wrote(off, n);
            off += n;
        }
    }
    writeback.start_rest();
    if (const int err = out.close())
        throw error::WriteError("cannot close " + part + " (a copy of " + src + "): " + sys_error(err));
    return direct_end - lo;
}

/// Copies the `size` bytes of `in` into `out` (`part`, opened before any
/// write, so that its fsync reports every write's failure) in up to
/// `how.streams` contiguous ranges at once (copy_range(), the first on this
/// thread), then, with `how.fsync`, makes it durable. Returns the bytes
/// written with O_DIRECT. Throws a stream's error (the first to fail), else
/// Cancelled when `how.cancel` is set between two chunks.
std::uint64_t copy_bytes(int in, Fd& out, const std::string& src, const std::string& part, std::uint64_t size,
                         const CopyHow& how)
{
    const bool fsync = how.fsync, direct = how.direct;
#if defined(POSIX_FADV_SEQUENTIAL)
    ::posix_fadvise(in, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
    const auto most = static_cast<std::uint64_t>(std::max(1, how.streams));
    const int streams = static_cast<int>(std::max<std::uint64_t>(1, std::min(most, size / stream_min_bytes)));
    std::vector<std::uint64_t> cut(static_cast<std::size_t>(streams) + 1, size);
    for (int k = 0; k < streams; ++k)
        cut[static_cast<std::size_t>(k)] = size / static_cast<std::uint64_t>(streams) * static_cast<std::uint64_t>(k) /
                                           stream_align * stream_align;
    StopFlag stop(how.cancel);
    std::vector<std::uint64_t> direct_bytes(cut.size(), 0);
    std::exception_ptr failed;                 // the first stream's own failure
    std::atomic<bool> cancelled{false};         // a stream stopped by `stop`
    std::mutex failing;
    auto run = [&](std::size_t k) noexcept {
        try {
            direct_bytes[k] = copy_range(in, src, part, size, cut[k], cut[k + 1], fsync, direct, stop);
        } catch (const Cancelled&) {
            cancelled.store(true, std::memory_order_relaxed);
        } catch (...) {
            const std::lock_guard<std::mutex> lock(failing);
            if (!failed)
                failed = std::current_exception();
            stop.fail();
        }
    };
    std::vector<std::thread> helpers;
    std::vector<std::size_t> here{0}; // the streams this thread copies
    for (std::size_t k = 1; k < cut.size() - 1; ++k) {
        try {
            helpers.emplace_back(run, k);
        } catch (const std::exception&) { // no thread to be had: copied here
            here.push_back(k);
        }
    }
    for (const std::size_t k : here)
        run(k);
    for (auto& t : helpers)
        t.join();
    // A stream's own failure, not the Cancelled of those it stopped.
    if (failed)
        std::rethrow_exception(failed);
    if (cancelled.load(std::memory_order_relaxed))
        throw Cancelled{};
    if (fsync && ::fsync(out.get()) != 0)
        throw error::WriteError("fsync of " + part + " (a copy of " + src + ") failed: " + sys_error(errno));
    if (fsync) // what Writeback left in the cache, now on the device
        ::posix_fadvise(out.get(), 0, 0, POSIX_FADV_DONTNEED);
    if (const int err = out.close())
        throw error::WriteError("cannot close " + part + " (a copy of " + src + "): " + sys_error(err));
    std::uint64_t d = 0;
    for (const auto b : direct_bytes)
        d += b;
    return d;
}

/// Copies the regular file `src` to `dst` through `dst` + part_suffix,
/// renamed to `dst` once complete (and durable with `fsync`). Returns the
/// bytes copied; adds those written with O_DIRECT (`how.direct`,
/// copy_bytes()) to `*direct_bytes` when given. Throws Cancelled when
/// `how.cancel` is set between two chunks, error::ReadError /
/// error::WriteError naming the file otherwise; the partial copy is removed.
std::uint64_t copy_file(const std::string& src, const std::string& dst, const CopyHow& how,
                        std::uint64_t* direct_bytes = nullptr)
{
    Fd in(::open(src.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (in.get() < 0)
        throw error::ReadError("cannot open " + src + " to copy it: " + sys_error(errno));
    const std::uint64_t size = regular_file_size(in.get(), src);
    const std::string part = dst + part_suffix;
    Fd out(::open(part.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (out.get() < 0)
        throw error::WriteError("cannot create " + part + " (to copy " + src + " there): " + sys_error(errno));
    try {
        const std::uint64_t d = copy_bytes(in.get(), out, src, part, size, how);
        fs::rename(part, dst);
        if (direct_bytes)
            *direct_bytes += d;
        return size;
    } catch (...) {
        fs::truncate_noexcept(part, 0);
        fs::remove_all_noexcept(part);
        throw;
    }
}

} // namespace

struct Drain::State {
    std::string src_dir, dst_dir;
    std::vector<std::string> files;
    bool fsync = false;
    bool direct = false;
    int streams = default_streams;
    std::atomic<bool> cancel{false};
    std::atomic<bool> finished{false};
    std::uint64_t bytes = 0;    // written by the thread, read after join
    std::uint64_t direct_bytes = 0; // likewise
    std::exception_ptr error;   // likewise

    void run() noexcept
    {
        try {
            fs::create_directories(dst_dir);
            for (const auto& f : files) {
                if (const int err = fault::inject(fault::drain_copy, fs::join(dst_dir, f)))
                    copy_failed(fs::join(src_dir, f), fs::join(dst_dir, f), err);
                bytes += copy_file(fs::join(src_dir, f), fs::join(dst_dir, f), CopyHow{fsync, direct, streams, &cancel},
                                   &direct_bytes);
                if (cancel.load(std::memory_order_relaxed))
                    throw Cancelled{};
            }
        } catch (const Cancelled&) {
            error = std::make_exception_ptr(error::WriteError("the drain of " + src_dir + " into " + dst_dir +
                                                              " was cancelled"));
        } catch (...) {
            error = std::current_exception();
        }
        finished.store(true, std::memory_order_release);
    }
};

namespace {

/// DrainCopy::automatic: CAIRN_DRAIN_COPY, else the default.
DrainCopy copy_from_environment()
{
    const char* v = std::getenv("CAIRN_DRAIN_COPY");
    if (!v || !*v)
        return DrainCopy::kernel;
    if (std::strcmp(v, "direct") == 0)
        return DrainCopy::direct;
    if (std::strcmp(v, "kernel") == 0)
        return DrainCopy::kernel;
    throw error::WrongAPIUsage(std::string("CAIRN_DRAIN_COPY='") + v + "': expected 'direct' or 'kernel'");
}

/// Drain's streams 0: CAIRN_DRAIN_STREAMS, else the default.
int streams_from_environment()
{
    const char* v = std::getenv("CAIRN_DRAIN_STREAMS");
    if (!v || !*v)
        return default_streams;
    char* end = nullptr;
    errno = 0;
    const long n = std::strtol(v, &end, 10);
    if (errno != 0 || *end != '\0' || n < 1 || n > max_streams)
        throw error::WrongAPIUsage(std::string("CAIRN_DRAIN_STREAMS='") + v + "': expected a number from 1 to " +
                                   std::to_string(max_streams));
    return static_cast<int>(n);
}

} // namespace

Drain::Drain(std::string src_dir, std::string dst_dir, std::vector<std::string> files, bool fsync, DrainCopy copy,
             int streams)
    : m_state(std::make_unique<State>())
{
    auto& s = *m_state;
    s.direct = (copy == DrainCopy::automatic ? copy_from_environment() : copy) == DrainCopy::direct;
    if (streams < 0 || streams > max_streams)
        throw error::WrongAPIUsage("drain of " + fs::strip(src_dir) + ": " + std::to_string(streams) +
                                   " streams (from 0, the default, to " + std::to_string(max_streams) + ")");
    s.streams = streams == 0 ? streams_from_environment() : streams;
    s.src_dir = fs::strip(src_dir);
    s.dst_dir = fs::strip(dst_dir);
    s.files = std::move(files);
    s.fsync = fsync;
    for (const auto& f : s.files)
        if (f.empty() || f.find('/') != std::string::npos || f == "." || f == "..")
            throw error::WrongAPIUsage("drain of " + s.src_dir + ": '" + f +
                                       "' is not the name of a file in the step's directory");
    State* p = m_state.get();
    m_thread = std::thread([p] { p->run(); });
}

Drain::~Drain()
{
    m_state->cancel.store(true, std::memory_order_relaxed);
    if (m_thread.joinable())
        m_thread.join();
}

bool Drain::done() const noexcept { return m_state->finished.load(std::memory_order_acquire); }

std::uint64_t Drain::wait()
{
    if (m_thread.joinable())
        m_thread.join();
    if (m_state->error)
        std::rethrow_exception(m_state->error);
    return m_state->bytes;
}

std::uint64_t Drain::direct_bytes() const noexcept { return m_state->direct_bytes; }

std::vector<std::string> rank_data_files(const std::string& dir, int rank)
{
    const std::string prefix = "__" + std::to_string(rank) + "_";
    std::vector<std::string> out;
    std::error_code ec;
    std::filesystem::directory_iterator it(dir, ec), end;
    if (ec)
        throw error::ReadError("cannot list " + dir + ": " + ec.message());
    for (; it != end; it.increment(ec)) {
        const auto name = it->path().filename().string();
        if (name.size() > prefix.size() + 7 && name.compare(0, prefix.size(), prefix) == 0 &&
            name.compare(name.size() - 7, 7, ".distcp") == 0 &&
            name.find_first_not_of("0123456789", prefix.size()) == name.size() - 7)
            out.push_back(name);
    }
    if (ec)
        throw error::ReadError("cannot list " + dir + ": " + ec.message());
    std::sort(out.begin(), out.end());
    return out;
}

std::string drain_destination(const Comm& c, const std::string& path)
{
    Bytes bytes;
    std::exception_ptr err;
    if (c.coordinator()) {
        try {
            const auto p = fs::strip(path);
            if (fs::exists(p) && !fs::is_directory(p))
                throw error::WriteError("cannot drain into " + p + ": it exists and is not a directory");
            std::string dst = p;
            if (fs::exists(fs::join(p, metadata_file_name))) {
                dst = p + ".cairn-staging";
                fs::remove_all(dst);
            } else if (fs::is_directory(p)) {
                std::error_code ec;
                std::vector<std::string> stale;
                for (std::filesystem::directory_iterator it(p, ec), end; !ec && it != end; it.increment(ec)) {
                    const auto name = it->path().filename().string();
                    const auto ends = [&](const char* tail) {
                        const std::size_t n = std::strlen(tail);
                        return name.size() > n && name.compare(name.size() - n, n, tail) == 0;
                    };
                    if ((name.rfind("__", 0) == 0 && (ends(".distcp") || ends(".distcp.cairn-part"))) ||
                        name == ".metadata.h5.tmp" || name == ".metadata.h5.tmp.cairn-part")
                        stale.push_back(it->path().string());
                }
                if (ec)
                    throw error::WriteError("cannot list " + p + ": " + ec.message());
                for (const auto& f : stale)
                    fs::remove_all(f);
            }
            Encoder enc;
            enc.str(dst);
            bytes = enc.take();
        } catch (...) {
            err = std::current_exception();
        }
    }
    agree(c, "drain destination", err);
    bcast_bytes(c, bytes);
    Decoder dec(bytes, "drain destination");
    return dec.str();
}

void commit_drain(const Comm& c, const std::string& src_dir, const std::string& dst_dir, const std::string& path,
                  bool fsync)
{
    std::exception_ptr err;
    if (c.coordinator()) {
        const auto src = fs::strip(src_dir), dst = fs::strip(dst_dir), to = fs::strip(path);
        const auto tmp = fs::join(dst, ".metadata.h5.tmp");
        try {
            const auto src_md = fs::join(src, metadata_file_name);
            if (!fs::exists(src_md))
                throw error::NotFound("cannot drain " + src + ": it is no committed checkpoint (no " +
                                      std::string(metadata_file_name) + ")");
            copy_file(src_md, tmp, CopyHow{fsync, false, 1, nullptr});
            commit_distcp_dir(dst, to, fsync);
        } catch (...) {
            err = std::current_exception();
            // As a failed save: nothing committed is lost, and what was
            // staged is not left to look like a checkpoint.
            if (dst != to)
                fs::remove_all_noexcept(dst);
            else
                fs::remove_all_noexcept(tmp);
        }
    }
    agree(c, "drain commit", err);
}

// ---- the levels record ----

namespace {

using Json = nlohmann::ordered_json;

constexpr const char* record_name = ".cairn-levels";
constexpr const char* record_format = "cairn-levels";
constexpr int record_version = 1;

} // namespace

std::string level_record_path(const std::string& root) { return fs::join(fs::strip(root), record_name); }

void write_level_record(const std::string& root, const LevelRecord& record, bool fsync)
{
    const auto file = level_record_path(root);
    Json j;
    j["format"] = record_format;
    j["version"] = record_version;
    j["local_dir"] = record.local_dir;
    j["redundancy"] = record.redundancy;
    j["nodes"] = record.nodes;
    j["ranks"] = record.ranks;
    j["hosts"] = record.hosts;
    Json steps = Json::array();
    for (const auto& s : record.steps) {
        Json e{{"step", s.step}, {"node_local", s.node_local}, {"file_system", s.file_system}};
        if (!s.partial.empty())
            e["partial"] = s.partial;
        steps.push_back(std::move(e));
    }
    j["steps"] = std::move(steps);
    const std::string text = j.dump(2) + "\n";

    try {
        fs::write_file_atomic(file, text.data(), text.size(), fsync);
        if (fsync)
            fs::fsync_path(fs::parent(file));
    } catch (const Error& e) {
        throw error::WriteError("the levels record " + file + ": " + e.what());
    }
}

namespace {

/// The fields of a levels record being read: each one looked up with its
/// type checked, error::FormatError naming the file otherwise.
class RecordReader {
public:
    explicit RecordReader(const std::string& file) : m_file(file) {}

    error::FormatError bad(const std::string& why) const
    {
        return error::FormatError("the levels record " + m_file + " is damaged: " + why);
    }

    Json parse(const std::string& text) const
    {
        Json j;
        try {
            j = Json::parse(text);
        } catch (const std::exception& e) {
            throw bad(std::string("not JSON (") + e.what() + ")");
        }
        if (!j.is_object())
            throw bad("not a JSON object");
        return j;
    }

    const Json& field(const Json& o, const char* key, Json::value_t type, const char* what) const
    {
        const auto it = o.find(key);
        if (it == o.end())
            throw bad(std::string("no \"") + key + "\"");
        const bool ok = type == Json::value_t::number_integer ? it->is_number_integer() : it->type() == type;
        if (!ok)
            throw bad(std::string("\"") + key + "\" is not " + what);
        return *it;
    }

    std::string text(const Json& o, const char* key) const
    {
        return field(o, key, Json::value_t::string, "a string").get<std::string>();
    }
    std::int64_t integer(const Json& o, const char* key) const
    {
        return field(o, key, Json::value_t::number_integer, "an integer").get<std::int64_t>();
    }
    bool flag(const Json& o, const char* key) const
    {
        return field(o, key, Json::value_t::boolean, "true or false").get<bool>();
    }
    /// A count of nodes or ranks: 0 to 2^30.
    int count(const Json& o, const char* key) const
    {
        const std::int64_t v = integer(o, key);
        if (v < 0 || v > (std::int64_t(1) << 30))
            throw bad(std::string("\"") + key + "\" is " + std::to_string(v));
        return static_cast<int>(v);
    }

    /// The optional "hosts" array (a record without it has none): strings.
    std::vector<std::string> hosts(const Json& j) const
    {
        std::vector<std::string> out;
        const auto it = j.find("hosts");
        if (it == j.end())
            return out;
        if (!it->is_array())
            throw bad("\"hosts\" is not an array");
        for (const auto& h : *it) {
            if (!h.is_string())
                throw bad("an element of \"hosts\" is not a string");
            out.push_back(h.get<std::string>());
        }
        return out;
    }

    /// A step's optional "partial" array (a record without it has none):
    /// node numbers 0 .. nodes-1, strictly ascending.
    std::vector<int> partial(const Json& s, std::int64_t step, int nodes) const
    {
        std::vector<int> out;
        const auto it = s.find("partial");
        if (it == s.end())
            return out;
        if (!it->is_array())
            throw bad("\"partial\" of step " + std::to_string(step) + " is not an array");
        for (const auto& n : *it) {
            if (!n.is_number_integer() || n.get<std::int64_t>() < 0 || n.get<std::int64_t>() >= nodes ||
                (!out.empty() && n.get<std::int64_t>() <= out.back()))
                throw bad("\"partial\" of step " + std::to_string(step) + " is not ascending node numbers below " +
                          std::to_string(nodes));
            out.push_back(static_cast<int>(n.get<std::int64_t>()));
        }
        return out;
    }

    /// The "steps" array, strictly ascending.
    std::vector<LevelRecord::Step> steps(const Json& j, int nodes) const
    {
        std::vector<LevelRecord::Step> out;
        for (const auto& s : field(j, "steps", Json::value_t::array, "an array")) {
            if (!s.is_object())
                throw bad("an element of \"steps\" is not an object");
            LevelRecord::Step st;
            st.step = integer(s, "step");
            st.node_local = flag(s, "node_local");
            st.file_system = flag(s, "file_system");
            st.partial = partial(s, st.step, nodes);
            if (!out.empty() && st.step <= out.back().step)
                throw bad("the steps are not in ascending order (" + std::to_string(st.step) + " after " +
                          std::to_string(out.back().step) + ")");
            out.push_back(st);
        }
        return out;
    }

private:
    const std::string& m_file;
};

/// The text of `file`; false when there is none, error::ReadError when it
/// cannot be read.
bool read_record_text(const std::string& file, std::string& text)
{
    std::ifstream in(file, std::ios::binary);
    if (!in) {
        if (!fs::exists(file))
            return false;
        throw error::ReadError("cannot open the levels record " + file + ": " + sys_error(errno));
    }
    std::stringstream ss;
    ss << in.rdbuf();
    if (in.bad())
        throw error::ReadError("cannot read the levels record " + file);
    text = ss.str();
    return true;
}

} // namespace

bool read_level_record(const std::string& root, LevelRecord& record)
{
    const auto file = level_record_path(root);
    std::string text;
    if (!read_record_text(file, text))
        return false;
    const RecordReader rd(file);
    const Json j = rd.parse(text);
    if (rd.text(j, "format") != record_format)
        throw rd.bad("\"format\" is not \"" + std::string(record_format) + "\"");
    const std::int64_t version = rd.integer(j, "version");
    if (version != record_version)
        throw rd.bad("version " + std::to_string(version) + ", this Cairn reads version " +
                     std::to_string(record_version));
    LevelRecord r;
    r.local_dir = rd.text(j, "local_dir");
    r.redundancy = rd.text(j, "redundancy");
    r.nodes = rd.count(j, "nodes");
    r.ranks = rd.count(j, "ranks");
    r.hosts = rd.hosts(j);
    r.steps = rd.steps(j, r.nodes);
    record = std::move(r);
    return true;
}

} // namespace cairn::detail
