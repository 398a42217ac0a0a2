// Cairn: observability. A log of the phases of save / load / verify (time and
// bandwidth of each, on stderr), a profile of them (a JSON record each, in a
// file), and progress callbacks.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace cairn {

/// How much Cairn reports on stderr.
enum class LogLevel : int {
    /// Nothing (the default).
    off = 0,
    /// The coordinator (rank 0 of the communicator) prints one line per phase
    /// of each save, load and verify, once the phase is over on every rank:
    /// its time and, for data phases, the bytes of all ranks and their rate.
    info = 1,
    /// As info, and every rank prints its own time and bytes of each phase,
    /// and for each file it opens with MPI-IO hints (SaveOptions::per_rank,
    /// ::container, and LoadOptions' alike) what the MPI library reports for
    /// them ("key=value", or "key not taken").
    debug = 2,
};

/// Sets the level of this process, overriding the environment variable
/// CAIRN_LOG. **Local**; never throws. Lines are printed by each rank for
/// itself, so ranks may use different levels without affecting the
/// collectives (no collective depends on the level).
void set_log_level(LogLevel level) noexcept;

/// The level of this process: the last set_log_level(), else CAIRN_LOG read
/// at the first call ("off", "info", "debug", case-insensitive, or "0" / "1" /
/// "2"; anything else is off, with one warning on stderr). **Local**; never throws.
LogLevel log_level() noexcept;

/// Sets the file this process's profiles go to, overriding the environment
/// variable CAIRN_PROFILE; "" turns profiling off. With a file set on the
/// coordinator (rank 0 of the communicator), every save, async_save, load
/// and verify that succeeds gathers each rank's time and bytes of each phase
/// to the coordinator, which appends one JSON record to the file (JSON
/// Lines: one object per line, docs/API.md §8). Only the coordinator's
/// setting counts: the other ranks follow it, whatever theirs. **Local**;
/// never throws.
void set_profile_path(const std::string& path);

/// The profile file of this process: the last set_profile_path(), else
/// CAIRN_PROFILE read at the first call; "" when profiling is off. **Local**.
std::string profile_path();

/// A phase of a save, load or verify, as reported to progress callbacks and in
/// the log.
enum class Phase : int {
    plan = 0,          ///< save: local plans; load: metadata read and broadcast, local plans
    exchange = 1,      ///< save: plans to the coordinator, global plan, final plans back
    write = 2,         ///< save: every rank writes its data
    commit = 3,        ///< save: write results to the coordinator, which commits
    read = 4,          ///< load: every rank reads what it needs
    verify = 5,        ///< verify: every rank reads and checks its share of the chunks
};

/// "plan", "exchange", "write", "commit", "read", "verify".
const char* phase_name(Phase phase) noexcept;

/// What a progress callback receives: this rank's bytes of the data phase
/// (write, read, verify) done so far and in all; `total` is 0 for the other
/// phases.
struct Progress {
    Phase phase = Phase::plan;
    std::uint64_t done = 0;
    std::uint64_t total = 0;
};

/// Progress callback of SaveOptions::progress / LoadOptions::progress. It is
/// called on **every rank** with that rank's own progress, on the thread that
/// runs the phase (the caller's; async_save's background thread for write
/// and commit): once when each phase begins (done = 0), as data goes out or
/// comes in (per-rank layout: after each item; container layout: only at the
/// phase's ends), and once when the phase ends on this rank (done = total).
/// `done` never decreases within a phase. It must be cheap and must not call
/// Cairn or MPI on the same communicator. An exception it throws, in any
/// phase and on any rank, cancels the save / load: it fails like any other
/// error of that rank (every rank throws it), and a cancelled save leaves
/// the last committed checkpoint as it was. A rank whose callback throws as
/// a phase begins still takes part in that phase's collective calls (the
/// container's writes and reads): the call fails at the phase's end, or at
/// the next item of the per-rank layout. At the end of the commit phase the
/// checkpoint is committed: an exception thrown then is ignored.
using ProgressCallback = std::function<void(const Progress&)>;

} // namespace cairn
