// Private: timing of the phases of a save / load / verify for CAIRN_LOG, and
// the calls of the progress callback. Cheap when both are off: a clock read
// per phase.
#pragma once

#include "cairn/log.hpp"

#include <chrono>
#include <cstdint>
#include <string>

namespace cairn::detail {

class PhaseLog {
public:
    /// `op`: "save", "load" or "verify"; `rank`: this rank in the
    /// operation's communicator (rank 0 prints the info lines).
    PhaseLog(const char* op, std::string id, int rank, ProgressCallback progress);

    /// Whether a progress callback is set (worth reporting per item).
    bool reporting() const noexcept { return static_cast<bool>(m_progress); }
    /// Whether anything is logged or reported (worth counting bytes).
    bool active() const noexcept { return m_level != LogLevel::off || m_progress; }

    /// `phase` begins on this rank: starts its clock. Never throws.
    void begin(Phase phase) noexcept;
    /// Calls the progress callback with done = 0 of `total`, this rank's
    /// bytes of the phase. Call it (and progress(), finished()) inside the
    /// phase's error-agreed section: the callback may throw.
    void started(std::uint64_t total = 0);
    /// This rank's bytes of the current phase done so far (callback only).
    void progress(std::uint64_t done);
    /// Calls the callback with done = total: the phase is over on this rank.
    void finished();
    /// The phase ended on every rank (after its error agreement). `all_bytes`:
    /// the bytes of all ranks when the coordinator knows them (0: none).
    /// `label` overrides the phase's name in the log.
    void end(std::uint64_t all_bytes = 0, const char* label = nullptr);
    /// The last line: the whole operation's time and `all_bytes`.
    void finish(std::uint64_t all_bytes);

private:
    void line(const char* what, double seconds, std::uint64_t bytes, bool all_ranks) const;

    const char* m_op;
    std::string m_id;
    int m_rank;
    LogLevel m_level;
    ProgressCallback m_progress;
    Phase m_phase = Phase::plan;
    std::uint64_t m_total = 0;
    std::uint64_t m_done = 0;
    std::chrono::steady_clock::time_point m_t0;
    std::chrono::steady_clock::time_point m_phase_t0;
};

} // namespace cairn::detail
