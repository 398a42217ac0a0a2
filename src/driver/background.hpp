// Private: the background thread of async saves (src/driver/async.cpp), shared by
// cairn::async_save and by the CheckpointManager's async node-local saves.
// One save of this process runs in the background at a time; MPI_Finalize
// and wait_for_async_saves() join it.
#pragma once

#include "cairn/async.hpp"
#include "cairn/planner.hpp"
#include "comm/protocol.hpp"

#include <functional>
#include <memory>
#include <string>

namespace cairn::detail {

/// The communicators async_save has duplicated in this process: one per
/// caller's communicator, kept on it until it is freed. Local.
std::uint64_t async_duplicates() noexcept;

/// Collective over `c`: every rank throws error::WrongAPIUsage (naming `who`
/// and the thread level found) unless MPI was initialized with
/// MPI_THREAD_MULTIPLE. Then waits for this process's save in the
/// background, if any, and makes MPI_Finalize wait for the next one.
void prepare_background(const Comm& c, const std::string& who);

/// A host copy of this rank's data of `plan`, taken from `source` now and
/// served as a planner's data (AsyncStaging::full_copy). Local;
/// error::WriteError when the source's data does not match the plan.
std::unique_ptr<SavePlanner> stage_copy(const SavePlan& plan, SavePlanner& source);

/// What runs in the background: the rest of a save, collective over its own
/// (duplicated) communicator. It calls `staged` once this rank's data is
/// copied out of the caller's buffers (or not at all when it was staged
/// before the job started) and returns the save's result or throws the
/// error every rank agreed on.
using BackgroundJob = std::function<SaveResult(const std::function<void()>& staged)>;

/// Starts `job` on the background thread (after prepare_background) and
/// returns its handle: staged() is ready at once when `staged_now`, else
/// when the job calls `staged` (or ends); committed() holds its result or
/// error. The job (and what it holds) is destroyed on the background thread
/// after committed() is set.
AsyncSave run_in_background(BackgroundJob job, bool staged_now);

} // namespace cairn::detail
