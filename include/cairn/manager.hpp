// Cairn: a checkpoint manager over a root directory, and the fsck-style
// recognition and removal of what interrupted saves leave behind.
//
// The manager names every checkpoint after its step (docs/FORMAT.md,
// "Checkpoint manager directory"):
//
//   root/
//     step_00000100/        a per-rank checkpoint (Layout::per_rank)
//     step_00000200.h5      a container checkpoint (Layout::container)
//     LATEST                "step_00000200\n": the newest committed checkpoint
//
//     cairn::CheckpointManager mgr("run/ckpt", comm, {/*keep_last*/ 2});
//     if (auto step = mgr.restore_latest(state)) ...;   // resume, on any rank count
//     for (...; ++step)
//         if (step % 100 == 0) mgr.save(step, state);
//
// Crash consistency: a save that is killed at any moment (any or all ranks)
// leaves every older checkpoint intact and nothing that latest(), load() or
// LATEST accept as complete; what it leaves is reported by find_leftovers()
// and removed by remove_leftovers() (or `cairn repair ROOT`). A replacement
// killed between its two renames (file systems without an atomic exchange)
// is finished by the manager itself before it looks for checkpoints.
#pragma once

#include "cairn/checkpoint.hpp"
#include "cairn/levels.hpp"

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace cairn {

/// Options of a CheckpointManager.
struct ManagerOptions {
    /// Retention: keep the `keep_last` newest committed checkpoints (by step);
    /// 0 keeps every checkpoint. Must not be negative.
    int keep_last = 2;
    /// Retention: also keep, forever, every checkpoint whose step is a
    /// multiple of `keep_every`; 0: none. Must not be negative.
    std::int64_t keep_every = 0;
    /// Layout of the checkpoints this manager writes: per_rank (directories,
    /// `step_<N>`) or container (files, `step_<N>.h5`); automatic means
    /// per_rank. The manager reads checkpoints of both layouts.
    Layout layout = Layout::per_rank;
    /// save() writes with cairn::async_save: it returns once the data is
    /// staged and the checkpoint is committed in the background; LATEST and
    /// retention follow in the next call of the manager (see save()).
    /// With a node-local level (`local.dir`), everything after staging runs
    /// in the background: the node-local write, the redundancy exchange,
    /// the commit on every node, node-local retention and the start of a
    /// flush step's drain (with the container layout a flush step is saved
    /// synchronously). Needs MPI_THREAD_MULTIPLE.
    bool async = false;
    /// Options of every save. `layout` is replaced by the manager's layout and
    /// `overwrite` is always on (saving a step again replaces it, the old one
    /// staying intact until the new one is committed).
    SaveOptions save_options;
    /// The node-local level (none by default).
    LocalLevel local;
};

/// Which levels hold a step (CheckpointManager::levels()).
struct StepLevels {
    std::int64_t step = 0;
    /// Committed on node-local storage and loadable from it: every data file
    /// is on some node, or can be rebuilt from partner copies or parity.
    bool node_local = false;
    /// node_local, but only after rebuilding lost files.
    bool needs_rebuild = false;
    /// A committed, complete checkpoint in the root (the parallel file system).
    bool file_system = false;
};

/// Something an interrupted save left in a root directory (find_leftovers).
struct Leftover {
    std::string path;   ///< root/name
    std::string reason; ///< why it is a leftover, in words
};

/// A checkpoint that CheckpointManager::restore_latest tried and passed over
/// because its data or metadata is damaged.
struct SkippedCheckpoint {
    std::int64_t step = 0; ///< its step
    std::string path;      ///< root/step_<N> or root/step_<N>.h5
    std::string reason;    ///< the error its load threw (IntegrityError, FormatError or ReadError)
};

/// Manages the checkpoints of one run in a root directory: names them after
/// their step, saves (synchronously or in the background), keeps an
/// atomically replaced pointer to the newest committed one (root/LATEST),
/// applies retention, and finds and restores the latest committed checkpoint.
///
/// Every member function except checkpoint_path(), root() and options() is
/// **Collective over the manager's communicator**: every rank calls it in the
/// same order, and every rank returns the same result or throws the same
/// exception (cairn::Error subclasses). The coordinator (rank 0) does all
/// file-system work of the manager itself (scans, LATEST, retention) and
/// broadcasts the outcome, so that all ranks agree.
///
/// Async saves: every collective member function first *settles* the save
/// in flight, if any: it waits for its commit, for the background thread to
/// end, then updates LATEST and applies retention (and throws the save's
/// error, on every rank, if it failed). The manager reads checkpoint metadata
/// (HDF5, which is usually built without thread safety) only when no save of
/// this process runs in the background, so it never disturbs one.
///
/// One manager (one job) writes to a root at a time. Steps are expected to
/// grow: latest() is the committed checkpoint with the highest step. To go
/// back to an older step, remove the newer checkpoints first or use a new root.
class CheckpointManager {
public:
    /// Local: checks the options (error::WrongAPIUsage) and touches nothing
    /// on disk; `root` is created by the first save. `comm` must stay valid
    /// for the lifetime of the manager (it is not duplicated).
    CheckpointManager(std::string root, MPI_Comm comm, ManagerOptions options = {});
    /// Settles a save in flight (its commit, then LATEST and retention by the
    /// coordinator; an async node-local save's background part, which every
    /// rank's destructor waits for) but makes no MPI call on the caller's
    /// thread other than freeing the node-local level's communicators;
    /// errors are not thrown but written to stderr by rank 0.
    ~CheckpointManager();
    CheckpointManager(const CheckpointManager&) = delete;
    CheckpointManager& operator=(const CheckpointManager&) = delete;

    /// Saves `state` as the checkpoint of `step` (>= 0). First settles the
    /// previous async save and throws its error, if it failed (then nothing
    /// new is saved). Synchronous: returns when the checkpoint is committed,
    /// LATEST names the newest committed checkpoint and retention removed the
    /// checkpoints it does not keep. Async (ManagerOptions::async): returns
    /// once the caller may modify its data (staged) with std::nullopt; the
    /// commit happens in the background, LATEST and retention when the save is
    /// settled: by the next call of the manager (save, wait, latest, steps,
    /// restore_latest, find/remove_leftovers) or by the destructor. Old
    /// checkpoints are removed only after the new one is committed, never the
    /// one LATEST names, never the one just saved. A failed save leaves every
    /// committed checkpoint and LATEST as they were. With a node-local
    /// level, the coordinator writes `root/.cairn-levels` (for `cairn steps`)
    /// after a synchronous save returns, on a thread of its own: the record
    /// is current once the manager's next call (or its destructor) settles.
    std::optional<SaveResult> save(std::int64_t step, StateDict& state);

    /// Settles the async save in flight, if any (its commit, then LATEST and
    /// retention), and the drain in flight, and waits for the removal of the
    /// node-local steps retention dropped (done in the background); returns
    /// the async save's result, std::nullopt when none was in flight, or
    /// throws its error.
    std::optional<SaveResult> wait();

    /// The highest step with a committed, complete checkpoint in the root
    /// (metadata readable and valid, data files present and long enough);
    /// std::nullopt when there is none (or no root). Never an uncommitted or
    /// damaged one, whatever LATEST says. Settles a save in flight first, so
    /// the answer includes it once it is committed.
    std::optional<std::int64_t> latest();

    /// The steps of all committed, complete checkpoints, ascending.
    std::vector<std::int64_t> steps();

    /// Settles a save in flight, then loads the newest checkpoint that loads
    /// into `state` (resharding to this communicator's decomposition) and
    /// returns its step; std::nullopt (and `state` untouched) when the root
    /// holds no committed, complete checkpoint.
    ///
    /// Falls back over damage: it tries the latest() checkpoint first; when
    /// its load fails with error::IntegrityError (a checksum mismatch),
    /// error::FormatError (damaged metadata) or error::ReadError, rank 0
    /// warns on stderr ("cairn: warning: step 40 at root/step_00000040
    /// skipped: <reason>; trying step 30"), the step is appended to
    /// `*skipped` (when not null; cleared first) and the next older complete
    /// checkpoint is tried. When none loads, it throws the error type of the
    /// newest one's failure, with a message naming every step tried and why
    /// it failed. Any other error (error::Mismatch or error::NotFound: the
    /// state does not fit the checkpoint; error::WrongAPIUsage) is thrown at
    /// once, without trying older steps. Collective: every rank tries the
    /// same steps and loads the same one.
    ///
    /// A failed attempt may have written some of the newer step's bytes into
    /// `state`'s memory before the damage was found. The step that loads
    /// overwrites every entry it holds, so after a successful return `state`
    /// is that step's; only with LoadOptions::partial, entries that step
    /// lacks (LoadResult::missing) may hold bytes of a skipped step.
    ///
    /// Before looking, the coordinator finishes a replacement interrupted
    /// between its two renames (`step_<N>` missing, a complete
    /// `step_<N>.cairn-staging` beside it; as remove_leftovers() does), so
    /// that the step is not passed over for an older one; latest(), steps()
    /// and save() do the same.
    std::optional<std::int64_t> restore_latest(StateDict& state, const LoadOptions& options = {},
                                               std::vector<SkippedCheckpoint>* skipped = nullptr);

    /// With a node-local level: starts draining the newest committed
    /// node-local step (the newest the nodes can load, whichever job saved
    /// it) into the root, in the background (as save() does every
    /// LocalLevel::flush_every saves), and returns its step; std::nullopt
    /// when there is none or the root has it. Each rank copies its own files
    /// from its own node, so the step must have been saved by ranks and
    /// nodes laid out as this job's, with every node's copy whole; else rank
    /// 0 warns naming the step and flush() returns std::nullopt. The drain is
    /// committed (atomically, as any save) by the next call of the manager
    /// that settles, or by wait(); the destructor commits nothing and
    /// cannot commit it (the copy ends, the step stays node-local only).
    /// error::WrongAPIUsage without a node-local level.
    std::optional<std::int64_t> flush();

    /// The steps held by any level, ascending, and which levels hold them.
    /// Collective (every node reports what its storage holds).
    std::vector<StepLevels> levels();

    /// Local: how the last successful restore_latest() restored.
    const RestoreReport& last_restore() const noexcept;

    /// Settles a save in flight, then find_leftovers(root()) on the
    /// coordinator and, with a node-local level, find_leftovers of each
    /// node's directory on its leader (what interrupted node-local saves
    /// left: `step_<N>.cairn-staging`, `step_<N>.cairn-old`); every rank gets
    /// the whole list: the root's, then each node's in node order, each
    /// Leftover::path the path on its own host and the reason ending in
    /// "(node-local directory of node <n>, host <host>)". Collective: a
    /// failure on any rank is thrown on every rank (the same error).
    std::vector<Leftover> find_leftovers();
    /// Settles a save in flight, then removes what find_leftovers() lists:
    /// remove_leftovers(root()) on the coordinator, each node's directory's
    /// on its leader (removed, never renamed); every rank gets the list of
    /// what was removed. Collective, failing as find_leftovers() does.
    std::vector<Leftover> remove_leftovers();

    /// Local: the path of the checkpoint of `step` in this manager's layout
    /// (root/step_<N> or root/step_<N>.h5; N has at least 8 digits).
    std::string checkpoint_path(std::int64_t step) const;
    const std::string& root() const noexcept;
    const ManagerOptions& options() const noexcept;

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

/// The leftovers of interrupted saves among the entries of `root` (not
/// recursive): per-rank directories without committed metadata that are named
/// like a managed checkpoint (`step_<N>`) or hold `__*.distcp` or
/// `.metadata.h5.tmp` files (or a drain's partial copies of them,
/// `*.cairn-part`); the siblings `<ckpt>.cairn-staging` and
/// `<ckpt>.cairn-old` of an interrupted replacement (after an exchange the
/// staging name holds the old checkpoint until it is removed), named as a
/// drain's when the staging directory holds `*.cairn-part` files; in a
/// node-local level's directory (`root` a LocalLevel::dir of one node), the
/// `step_<N>.cairn-staging` of a node-local save stopped before its commit
/// and the `step_<N>.cairn-old` of a step retention dropped or a save
/// replaced;
/// `<ckpt>.cairn-lock` files that no save holds locked (the claim of a killed
/// save); `*.cairn-tmp` files
/// (unfinished containers, LATEST being written); `<container>.locktest.<n>`
/// files next to a container file of the root (committed or not) and
/// `__*.distcp.locktest.<n>` files inside a committed per-rank checkpoint,
/// which Open MPI's MPI-IO creates and removes while opening a file (also
/// for reading) and a killed process leaves behind. Never lists a committed
/// checkpoint. **Local**; must not run while a save into `root` is in flight
/// (that save's files would be listed). Sorted by path; empty when `root`
/// does not exist. Throws error::ReadError when `root` cannot be listed.
std::vector<Leftover> find_leftovers(const std::string& root);

/// Removes what find_leftovers(root) lists and returns it. An interrupted
/// replacement is finished rather than lost: when `<ckpt>` is missing, a
/// committed `<ckpt>.cairn-staging` (the new checkpoint) or else a committed
/// `<ckpt>.cairn-old` (the old one) is renamed to `<ckpt>`; a node-local
/// level's are removed, never renamed (as its next save does). Never removes a
/// committed checkpoint under its final name. **Local**, same conditions as
/// find_leftovers; throws error::WriteError when something cannot be removed.
std::vector<Leftover> remove_leftovers(const std::string& root);

/// The recovery of remove_leftovers() for one checkpoint path (not a
/// root): the leftovers `<path>.cairn-staging`, `<path>.cairn-old` and
/// `<path>.cairn-tmp` beside it. When `path` is missing, a committed
/// `<path>.cairn-staging` (or else `<path>.cairn-old`) is renamed to `path`
/// first; the rest is removed. Returns what it renamed and removed (empty:
/// nothing to repair). What `cairn repair PATH` does for a checkpoint path.
/// **Local**, same conditions as find_leftovers; error::WrongAPIUsage for an
/// empty path, error::WriteError when something cannot be renamed or removed.
std::vector<Leftover> repair_checkpoint(const std::string& path);

} // namespace cairn
