// Private: a save between its phases, so that save() and async_save() share
// one sequence (src/driver/save.cpp): plan_save() (local plan, exchange,
// global plan, final plan) then write_and_commit() (write, commit).
#pragma once

#include "cairn/checkpoint.hpp"
#include "comm/protocol.hpp"
#include "core/phase_log.hpp"
#include "driver/capabilities.hpp"
#include "plan/columnar.hpp"
#include "io/path_lock.hpp"

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace cairn::detail {

struct SaveSession {
    SaveSession(MPI_Comm c, const std::string& id, ProgressCallback progress)
        : comm(c), log("save", id, comm.rank, std::move(progress))
    {
    }
    Comm comm;
    PhaseLog log;            ///< CAIRN_LOG lines and SaveOptions::progress
    std::uint64_t all_bytes = 0; ///< data bytes of all ranks (the coordinator's; 0 elsewhere)
    std::shared_ptr<SavePlanner> planner;
    std::shared_ptr<StorageWriter> storage;
    SaveForms forms; ///< what the planner and storage offer beyond their public calls
    Metadata metadata; ///< the coordinator's on the struct-based path; empty elsewhere
    /// The coordinator's plan and metadata on the columnar path
    /// (SaveForms::columnar); null elsewhere.
    std::shared_ptr<ColumnarSavePlan> columnar;
    bool plan_reused = false; ///< the kept global plan was reused (plan/plan_cache.hpp)
    std::uint64_t plan_bytes_sent = 0; ///< this rank's local plan as sent to the coordinator
    SavePlan local;    ///< this rank's local plan, until its final plan is known
    SavePlan plan;     ///< this rank's final plan
    /// XXH3 of this rank's whole-array shards (replicas), by name, compared
    /// by the coordinator at the commit (SaveOptions::check_replicas).
    std::vector<std::pair<std::string, std::uint64_t>> replica_digests;
    /// The coordinator's claim on the storage's lock_path(), if any,
    /// from the global plan to the end of the save; released last.
    std::unique_ptr<PathLock> lock;
    /// False while the coordinator claims the path: a save that could not
    /// claim it must not clean up (what is there is another job's).
    bool may_clean = true;
    std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
    /// Seconds since the session began.
    double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); }
};

/// The planning phases. Collective over `comm`: local plans, the coordinator's global
/// plan and metadata, final plans scattered. Same error contract as save().
std::unique_ptr<SaveSession> plan_save(StateDict& state, const std::string& checkpoint_id, MPI_Comm comm,
                                       const SaveOptions& options);

/// The write and the commit. Collective over the session's communicator: every rank writes
/// its plan with data from `source` (the planner, or a staged copy); results
/// go to the coordinator, which commits. `on_written` runs on each rank once
/// its own data is written, before the commit. On any failure the
/// coordinator aborts the storage and every rank throws the same error.
SaveResult write_and_commit(SaveSession& session, SavePlanner& source, const std::function<void()>& on_written = {});

} // namespace cairn::detail
