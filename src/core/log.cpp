// CAIRN_LOG and set_log_level, CAIRN_PROFILE and set_profile_path; the
// phase log and profile of save / load / verify.
#include "cairn/log.hpp"

#include "core/phase_log.hpp"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

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

// The profile file: set_profile_path(), else CAIRN_PROFILE read once.
std::mutex g_profile_mutex;
bool g_profile_set = false;
std::string g_profile;

} // namespace

void set_log_level(LogLevel level) noexcept { g_level.store(static_cast<int>(level)); }

void set_profile_path(const std::string& path)
{
    const std::lock_guard<std::mutex> lock(g_profile_mutex);
    g_profile = path;
    g_profile_set = true;
}

std::string profile_path()
{
    const std::lock_guard<std::mutex> lock(g_profile_mutex);
    if (!g_profile_set) {
        const char* v = std::getenv("CAIRN_PROFILE");
        g_profile = v ? v : "";
        g_profile_set = true;
    }
    return g_profile;
}

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

// The profile's gather: per rank a fixed number of words, so that one
// MPI_Gather carries it: the phase count, the total seconds, then per phase
// its seconds, wall seconds (as the bits of doubles) and bytes.
constexpr std::size_t max_phases = 8;
constexpr std::size_t profile_words = 2 + 3 * max_phases;

std::uint64_t double_bits(double d)
{
    std::uint64_t u = 0;
    std::memcpy(&u, &d, sizeof u);
    return u;
}

double bits_double(std::uint64_t u)
{
    double d = 0;
    std::memcpy(&d, &u, sizeof d);
    return d;
}

using Json = nlohmann::ordered_json;

// min / max / mean over the ranks, imbalance = max / mean (1 when the mean
// is 0), the rank with the max (the lowest of equals), and every rank's value.
template <class T>
Json over_ranks(const std::vector<T>& v, const char* max_rank_key)
{
    Json j;
    if (v.empty())
        return j;
    const auto lo = std::min_element(v.begin(), v.end());
    const auto hi = std::max_element(v.begin(), v.end()); // the first of equals
    double sum = 0;
    for (const T x : v)
        sum += static_cast<double>(x);
    const double mean = sum / static_cast<double>(v.size());
    if (std::is_integral<T>::value)
        j["sum"] = std::accumulate(v.begin(), v.end(), T{0});
    j["min"] = *lo;
    j["max"] = *hi;
    j["mean"] = mean;
    j["imbalance"] = mean > 0 ? static_cast<double>(*hi) / mean : 1.0;
    j[max_rank_key] = hi - v.begin();
    j["ranks"] = v;
    return j;
}

// "2026-11-27T20:50:01.123456Z"
std::string utc_text(double unix_seconds)
{
    const auto whole = static_cast<std::time_t>(unix_seconds);
    std::tm tm{};
    gmtime_r(&whole, &tm);
    char buf[48];
    const std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    std::snprintf(buf + n, sizeof buf - n, ".%06dZ",
                  static_cast<int>((unix_seconds - static_cast<double>(whole)) * 1e6));
    return buf;
}

// Appends `text` to the file at `path` in one write() with O_APPEND, so
// that records of processes sharing the file do not interleave. Throws
// std::runtime_error saying what failed.
void append_record(const std::string& path, const std::string& text)
{
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
    if (fd < 0)
        throw std::runtime_error(std::string("cannot open it to append: ") + std::strerror(errno));
    std::size_t done = 0;
    int err = 0;
    while (done < text.size()) {
        const ssize_t got = ::write(fd, text.data() + done, text.size() - done);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            err = got < 0 ? errno : EIO;
            break;
        }
        done += static_cast<std::size_t>(got);
    }
    if (::close(fd) != 0 && err == 0)
        err = errno;
    if (err != 0)
        throw std::runtime_error(std::string("cannot write it: ") + std::strerror(err));
}

// Collective over `comm`: every rank's profile words at rank 0 (index =
// rank), empty elsewhere and when rank 0 could not hold them (it still takes
// part in the gather). Returns MPI_Gather's result.
int gather_profiles(MPI_Comm comm, bool coordinator, std::size_t ranks, const std::uint64_t* mine,
                    std::vector<std::uint64_t>& all) noexcept
{
    try {
        if (coordinator)
            all.resize(ranks * profile_words);
    } catch (...) {
        // out of memory: the coordinator still takes part in the gather, and then writes nothing
    }
    const bool have = !coordinator || !all.empty();
    std::uint64_t spare[profile_words];
    return MPI_Gather(mine, static_cast<int>(profile_words), MPI_UINT64_T, have ? all.data() : spare,
                      static_cast<int>(profile_words), MPI_UINT64_T, 0, comm);
}

} // namespace

PhaseLog::PhaseLog(const char* op, std::string id, int rank, ProgressCallback progress)
    : m_op(op), m_id(std::move(id)), m_rank(rank), m_level(log_level()), m_progress(std::move(progress)),
      m_t0(std::chrono::steady_clock::now()), m_phase_t0(m_t0)
{
    if (m_rank == 0) {
        m_profile = profile_path();
        if (!m_profile.empty())
            m_start = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    }
}

void PhaseLog::begin(Phase phase) noexcept
{
    m_phase = phase;
    m_total = 0;
    m_done = 0;
    m_phase_t0 = std::chrono::steady_clock::now();
    m_finished = false;
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
    m_finished = true;
    m_finished_t = std::chrono::steady_clock::now();
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
    // Recorded on every rank whatever the level: the coordinator may profile.
    const auto now = std::chrono::steady_clock::now();
    const double s = seconds_between(m_phase_t0, now);
    const char* what = label ? label : phase_name(m_phase);
    try {
        m_records.push_back(Record{what, seconds_between(m_phase_t0, m_finished ? m_finished_t : now), s, m_total});
    } catch (...) {
        // out of memory: a profile without this phase (profile() checks)
    }
    if (m_level == LogLevel::off)
        return;
    if (m_rank == 0)
        line(what, s, all_bytes, true);
    if (m_level == LogLevel::debug)
        line(what, s, m_total, false);
}

void PhaseLog::finish(std::uint64_t all_bytes)
{
    m_seconds = seconds_between(m_t0, std::chrono::steady_clock::now());
    m_all_bytes = all_bytes;
    if (m_level == LogLevel::off || m_rank != 0)
        return;
    line("total", m_seconds, all_bytes, true);
}

void PhaseLog::profile(MPI_Comm comm, const char* layout) noexcept
{
    int rank = 0, size = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    const bool coordinator = rank == 0;
    std::array<std::uint64_t, profile_words> mine{}; // no allocation before the gather
    const std::size_t n = std::min(m_records.size(), max_phases);
    mine[0] = n;
    mine[1] = double_bits(m_seconds);
    for (std::size_t p = 0; p < n; ++p) {
        mine[2 + 3 * p] = double_bits(m_records[p].seconds);
        mine[3 + 3 * p] = double_bits(m_records[p].wall);
        mine[4 + 3 * p] = m_records[p].bytes;
    }
    std::vector<std::uint64_t> all;
    const auto ranks = static_cast<std::size_t>(size);
    const int rc = gather_profiles(comm, coordinator, ranks, mine.data(), all);
    if (!coordinator)
        return;
    try {
        if (rc != MPI_SUCCESS || all.empty())
            throw std::runtime_error("the gather of the ranks' phases failed");
        const std::uint64_t* w = all.data();
        for (std::size_t r = 0; r < ranks; ++r)
            if (w[r * profile_words] != n)
                throw std::runtime_error("rank " + std::to_string(r) + " has " +
                                         std::to_string(w[r * profile_words]) + " phases, rank 0 has " +
                                         std::to_string(n));
        Json rec;
        rec["cairn_profile"] = 1;
        rec["operation"] = m_op;
        rec["path"] = m_id;
        rec["layout"] = layout;
        rec["ranks"] = size;
        rec["start"] = utc_text(m_start);
        std::vector<double> totals(ranks);
        for (std::size_t r = 0; r < ranks; ++r)
            totals[r] = bits_double(w[r * profile_words + 1]);
        const double seconds = *std::max_element(totals.begin(), totals.end());
        rec["seconds"] = seconds;
        rec["bytes"] = m_all_bytes;
        rec["bandwidth"] = seconds > 0 ? static_cast<double>(m_all_bytes) / seconds : 0.0;
        Json phases = Json::array();
        for (std::size_t p = 0; p < n; ++p) {
            std::vector<double> secs(ranks), walls(ranks);
            std::vector<std::uint64_t> bytes(ranks);
            for (std::size_t r = 0; r < ranks; ++r) {
                secs[r] = bits_double(w[r * profile_words + 2 + 3 * p]);
                walls[r] = bits_double(w[r * profile_words + 3 + 3 * p]);
                bytes[r] = w[r * profile_words + 4 + 3 * p];
            }
            Json ph;
            ph["phase"] = m_records[p].name;
            const double wall = *std::max_element(walls.begin(), walls.end());
            ph["wall"] = wall;
            ph["seconds"] = over_ranks(secs, "slowest_rank");
            ph["bytes"] = over_ranks(bytes, "max_rank");
            const std::uint64_t sum = std::accumulate(bytes.begin(), bytes.end(), std::uint64_t{0});
            ph["bandwidth"] = wall > 0 ? static_cast<double>(sum) / wall : 0.0;
            phases.push_back(std::move(ph));
        }
        rec["phases"] = std::move(phases);
        rec["total"] = over_ranks(totals, "slowest_rank");
        const std::string text = rec.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
        append_record(m_profile, text);
    } catch (const std::exception& e) {
        try {
            std::fputs(("cairn: profile " + m_profile + ": no record of this " + m_op + " of '" + m_id + "': " +
                        e.what() + "\n")
                           .c_str(),
                       stderr);
        } catch (...) {
        }
    } catch (...) {
    }
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
