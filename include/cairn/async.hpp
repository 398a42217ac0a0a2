// Cairn: asynchronous save.
#pragma once

#include "cairn/checkpoint.hpp"

#include <mpi.h>

#include <future>
#include <memory>
#include <string>

namespace cairn {

namespace detail {
struct AsyncAccess;
}

/// A save running in the background (see async_save). Copyable; all copies
/// refer to the same save. Destroying the handle does not cancel the save.
class AsyncSave {
public:
    AsyncSave() = default;
    /// Ready when every byte of this rank's data has been copied out of the
    /// caller's buffers: from then on the caller may modify them. Holds the
    /// save's error if it failed before that point.
    std::shared_future<void> staged() const;
    /// Ready when the checkpoint is committed (durable, metadata renamed
    /// into place), or holds the error, the same on every rank.
    std::shared_future<SaveResult> committed() const;
    /// Waits for committed() and returns its result or throws its error.
    SaveResult wait() const;
    /// True when committed() is ready.
    bool done() const;
    bool valid() const noexcept { return m_state != nullptr; }

    struct State;

private:
    friend struct detail::AsyncAccess;
    std::shared_ptr<State> m_state;
};

/// Saves `state` like save(), returning as soon as the data is staged (with
/// SaveOptions::async_staging == full_copy) or once planning is done (with
/// `bounded`: the background thread copies through the bounded staging buffer
/// and staged() becomes ready when it has copied the last byte).
///
/// **Collective over `comm`.** Planning (local plans, global plan) runs on the
/// calling thread on a duplicate of `comm`; writing, the gathering of results
/// and the commit run on a background thread on that duplicate. The first
/// async_save on `comm` makes the duplicate and keeps it on `comm` (an MPI
/// attribute) for the next ones, which also keep what a save caches on its
/// communicator (the group communicators of grouped data files);
/// MPI_Comm_free(comm) waits for a save in flight, then frees it.
/// Requirements: MPI initialized with MPI_THREAD_MULTIPLE (checked on every
/// rank; error::WrongAPIUsage naming the level found otherwise). A second
/// async_save (or save through the same process) waits for the previous
/// async_save to finish first: saves never interleave. load, verify and
/// read_metadata wait for it too, so that Cairn never calls HDF5 (whose
/// builds are usually not thread-safe) from two threads at once; the
/// application's own HDF5 calls must likewise not overlap a save in flight
/// (wait on committed() or call wait_for_async_saves() first). MPI_Finalize waits for
/// a save in flight to complete. Errors of planning are thrown here (the same
/// on every rank); later errors are delivered through committed().
AsyncSave async_save(StateDict& state, const std::string& checkpoint_id, MPI_Comm comm,
                     const SaveOptions& options = {});

/// Waits until this process has no async save in flight. Local.
void wait_for_async_saves();

} // namespace cairn
