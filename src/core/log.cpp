// CAIRN_LOG and set_log_level; the phase log of save / load / verify.
#include "cairn/log.hpp"

#include "core/phase_log.hpp"

#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <utility>

namespace cairn {

namespace {

constexpr int level_unset = -1;
std::atomic<int> g_level{level_unset};

LogLevel level_from_env() noexcept
{
    const char* v = std::getenv("CAIRN_LOG");
    if (!v || !*v)
        return LogLevel::off;
    std::string s(v);
    for (auto& ch : s)
        ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (s == "off" || s == "0" || s == "none")
        return LogLevel::off;
    if (s == "info" || s == "1")
        return LogLevel::info;
    if (s == "debug" || s == "2")
        return LogLevel::debug;
    std::fprintf(stderr, "cairn: CAIRN_LOG=%s is not off, info or debug: logging is off\n", v);
    return LogLevel::off;
}

} // namespace

void set_log_level(LogLevel level) noexcept { g_level.store(static_cast<int>(level)); }

LogLevel log_level() noexcept
{
    int v = g_level.load(std::memory_order_relaxed);
    if (v == level_unset) {
        int expected = level_unset;
        const int env = static_cast<int>(level_from_env());
        // A concurrent set_log_level() wins over the environment.
        g_level.compare_exchange_strong(expected, env);
        v = g_level.load();
    }
    return static_cast<LogLevel>(v);
}

const char* phase_name(Phase phase) noexcept
{
    switch (phase) {
    case Phase::plan: return "plan";
    case Phase::exchange: return "exchange";
    case Phase::write: return "write";
    case Phase::commit: return "commit";
    case Phase::read: return "read";
    case Phase::verify: return "verify";
    }
    return "?";
}

namespace detail {

namespace {

double seconds_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b)
{
    return std::chrono::duration<double>(b - a).count();
}

// "12.5 MiB" with a binary prefix.
std::string bytes_str(double b)
{
    static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    while (b >= 1024.0 && u < 5) {
        b /= 1024.0;
        ++u;
    }
    char buf[48];
    std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", b, units[u]);
    return buf;
}

} // namespace

PhaseLog::PhaseLog(const char* op, std::string id, int rank, ProgressCallback progress)
    : m_op(op), m_id(std::move(id)), m_rank(rank), m_level(log_level()), m_progress(std::move(progress)),
      m_t0(std::chrono::steady_clock::now()), m_phase_t0(m_t0)
{
}

void PhaseLog::begin(Phase phase) noexcept
{
    m_phase = phase;
    m_total = 0;
    m_done = 0;
    m_phase_t0 = std::chrono::steady_clock::now();
}

void PhaseLog::started(std::uint64_t total)
{
    m_total = total;
    m_done = 0;
    m_cancel = nullptr;
    if (!m_progress)
        return;
    try {
        m_progress(Progress{m_phase, 0, total});
    } catch (...) {
        m_cancel = std::current_exception(); // thrown by progress() or finished()
    }
}

void PhaseLog::progress(std::uint64_t done)
{
    raise();
    if (!m_progress || done <= m_done)
        return;
    m_done = done < m_total ? done : m_total;
    m_progress(Progress{m_phase, m_done, m_total});
}

void PhaseLog::finished()
{
    raise();
    m_done = m_total;
    if (m_progress)
        m_progress(Progress{m_phase, m_total, m_total});
}

void PhaseLog::raise() const
{
    if (m_cancel)
        std::rethrow_exception(m_cancel);
}

void PhaseLog::finished_after_commit() noexcept
{
    try {
        finished();
    } catch (...) {
    }
}

void PhaseLog::end(std::uint64_t all_bytes, const char* label)
{
    if (m_level == LogLevel::off)
        return;
    const double s = seconds_between(m_phase_t0, std::chrono::steady_clock::now());
    const char* what = label ? label : phase_name(m_phase);
    if (m_rank == 0)
        line(what, s, all_bytes, true);
    if (m_level == LogLevel::debug)
        line(what, s, m_total, false);
}

void PhaseLog::finish(std::uint64_t all_bytes)
{
    if (m_level == LogLevel::off || m_rank != 0)
        return;
    line("total", seconds_between(m_t0, std::chrono::steady_clock::now()), all_bytes, true);
}

void PhaseLog::line(const char* what, double seconds, std::uint64_t bytes, bool all_ranks) const
{
    std::string text = "cairn: ";
    if (!all_ranks)
        text += "[rank " + std::to_string(m_rank) + "] ";
    char buf[64];
    std::snprintf(buf, sizeof buf, " %.6f s", seconds);
    text += m_op;
    text += " '" + m_id + "': " + what + buf;
    if (bytes > 0) {
        text += ", " + bytes_str(static_cast<double>(bytes));
        if (seconds > 0)
            text += ", " + bytes_str(static_cast<double>(bytes) / seconds) + "/s";
        if (!all_ranks)
            text += " (this rank)";
    }
    text += "\n";
    std::fputs(text.c_str(), stderr); // one call per line: lines of ranks do not interleave mid-line
}

} // namespace detail
} // namespace cairn
