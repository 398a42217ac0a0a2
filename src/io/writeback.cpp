#include "io/writeback.hpp"

#include <algorithm>

#if defined(__linux__)
#include <fcntl.h>
#include <unistd.h>
#endif

namespace cairn::detail {

namespace {
// Written ranges closer than this are one range: what lies between is
// another rank's part or alignment padding, written too or never dirty
// (writeback skips clean pages).
constexpr std::uint64_t k_gap = std::uint64_t(1) << 20;
constexpr std::uint64_t k_min_piece = std::uint64_t(1) << 20;
} // namespace

Writeback::Writeback(const std::string& path, std::uint64_t limit, bool drop) noexcept
{
#if defined(__linux__)
    if (limit == 0)
        return;
    m_limit = limit;
    m_drop = drop;
    m_piece = piece_of(limit);
    m_fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
#else
    (void)path;
    (void)limit;
    (void)drop;
#endif
}

std::uint64_t Writeback::piece_of(std::uint64_t limit) noexcept
{
    return limit == 0 ? 0 : std::max(limit / 4, k_min_piece);
}

Writeback::~Writeback() { disable(); }

void Writeback::disable() noexcept
{
#if defined(__linux__)
    if (m_fd >= 0)
        ::close(m_fd);
#endif
    m_fd = -1;
    m_started.clear();
    m_in_flight = 0;
    m_lo = m_hi = 0;
}

std::uint64_t Writeback::piece(std::uint64_t size) const noexcept
{
    return m_fd >= 0 ? std::min(size, m_piece) : size;
}

void Writeback::wrote(std::uint64_t offset, std::uint64_t size) noexcept
{
    if (m_fd < 0 || size == 0)
        return;
    const auto end = offset + size;
    if (m_hi > m_lo && (offset < m_lo || offset > m_hi + k_gap)) {
        start(m_lo, m_hi); // not next to what is pending: start that alone
        m_lo = m_hi = 0;
    }
    if (m_hi == m_lo) {
        m_lo = offset;
        m_hi = end;
    } else {
        m_hi = std::max(m_hi, end);
    }
    while (m_fd >= 0 && m_hi - m_lo >= m_piece) {
        start(m_lo, m_lo + m_piece);
        m_lo += m_piece;
    }
}

void Writeback::start_rest() noexcept
{
    if (m_fd >= 0 && m_hi > m_lo)
        start(m_lo, m_hi);
    m_lo = m_hi = 0;
}

void Writeback::start(std::uint64_t lo, std::uint64_t hi) noexcept
{
#if defined(__linux__)
    if (::sync_file_range(m_fd, static_cast<off64_t>(lo), static_cast<off64_t>(hi - lo), SYNC_FILE_RANGE_WRITE) != 0) {
        disable(); // unsupported here: the fsync does it all
        return;
    }
    try {
        m_started.emplace_back(lo, hi);
    } catch (...) { // out of memory: early writeback is an optimisation, the fsync does it all
        disable();
        return;
    }
    m_in_flight += hi - lo;
    while (m_in_flight > m_limit && !m_started.empty()) {
        const auto [a, b] = m_started.front();
        m_started.pop_front();
        m_in_flight -= b - a;
        const unsigned flags = SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER;
        if (::sync_file_range(m_fd, static_cast<off64_t>(a), static_cast<off64_t>(b - a), flags) != 0) {
            disable();
            return;
        }
        if (m_drop)
            ::posix_fadvise(m_fd, static_cast<off_t>(a), static_cast<off_t>(b - a), POSIX_FADV_DONTNEED);
    }
#else
    (void)lo;
    (void)hi;
#endif
}

} // namespace cairn::detail
