// Private: timing of the phases of a save / load / verify for CAIRN_LOG and
// CAIRN_PROFILE, and the calls of the progress callback. Cheap when all are
// off: two clock reads per phase.
#pragma once

#include "cairn/log.hpp"

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

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
    /// bytes of the phase. Never throws: an exception of the callback is kept
    /// and thrown by the phase's next progress() or finished(), so that a
    /// rank whose callback cancels still takes part in the collective calls
    /// between started() and finished() (a container's writes and reads, the
    /// plan exchange) instead of leaving the other ranks in them. Call all
    /// three inside the phase's error-agreed section.
    void started(std::uint64_t total = 0);
    /// This rank's bytes of the current phase done so far (callback only).
    /// Throws the callback's exception (or the one started() kept): call it
    /// only where a rank may fail alone (per-item progress of the per-rank
    /// layout, of verify).
    void progress(std::uint64_t done);
    /// Calls the callback with done = total: the phase is over on this rank.
    /// Throws the callback's exception, or the one started() kept.
    void finished();
    /// This rank's bytes of the phase for its log line, when they differ
    /// from started()'s total (a load's bytes read, known once it read).
    void count(std::uint64_t bytes) noexcept { m_total = bytes; }
    /// Throws the exception started() kept, if any.
    void raise() const;
    /// finished() once the checkpoint is committed: too late to cancel, so
    /// an exception of the callback is ignored. Never throws.
    void finished_after_commit() noexcept;
    /// The phase ended on every rank (after its error agreement). `all_bytes`:
    /// the bytes of all ranks when the coordinator knows them (0: none).
    /// `label` overrides the phase's name in the log.
    void end(std::uint64_t all_bytes = 0, const char* label = nullptr);
    /// The last line: the whole operation's time and `all_bytes`.
    void finish(std::uint64_t all_bytes);

    /// 1 on the coordinator when it profiles (profile_path() set), else 0:
    /// to be summed over the ranks in the operation's last collective, so
    /// that every rank knows whether to call profile().
    std::uint64_t profile_flag() const noexcept { return m_rank == 0 && !m_profile.empty() ? 1 : 0; }
    /// After finish(), on every rank when the sum of profile_flag() is not 0,
    /// on the success path only: gathers every rank's phases to the
    /// coordinator (one collective), which appends the operation's record to
    /// its profile file. `layout`: "per_rank", "container" or "custom".
    /// A file that cannot be written is a warning on stderr, not an error.
    void profile(MPI_Comm comm, const char* layout) noexcept;

private:
    void line(const char* what, double seconds, std::uint64_t bytes, bool all_ranks) const;

    /// A phase over on this rank: its name, this rank's time (from begin()
    /// to finished(), before waiting for the others), the time until end()
    /// (the phase over on every rank), and this rank's bytes.
    struct Record {
        std::string name;
        double seconds = 0;
        double wall = 0;
        std::uint64_t bytes = 0;
    };

    const char* m_op;
    std::string m_id;
    int m_rank;
    LogLevel m_level;
    ProgressCallback m_progress;
    Phase m_phase = Phase::plan;
    std::uint64_t m_total = 0;
    std::uint64_t m_done = 0;
    std::exception_ptr m_cancel; // the callback's exception in started()
    std::chrono::steady_clock::time_point m_t0;
    std::chrono::steady_clock::time_point m_phase_t0;
    std::chrono::steady_clock::time_point m_finished_t; // finished() of the current phase
    bool m_finished = false;
    std::string m_profile;         // profile_path() when the operation began
    std::vector<Record> m_records; // this rank's phases, in order
    double m_seconds = 0;          // the whole operation, at finish()
    std::uint64_t m_all_bytes = 0; // finish()'s
    double m_start = 0;            // Unix time of the start
};

} // namespace cairn::detail
