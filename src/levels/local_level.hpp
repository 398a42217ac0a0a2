// Private: the node-local level of a CheckpointManager (cairn::LocalLevel):
// saving a step into node-local storage, finding the steps the nodes hold,
// and loading one (rebuilding lost files, moving the files a node needs
// between nodes first). docs/FORMAT.md "Node-local level".
#pragma once

#include "cairn/checkpoint.hpp"
#include "cairn/levels.hpp"
#include "core/codec.hpp"
#include "levels/redundancy.hpp"
#include "levels/topology.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace cairn::detail {

/// The manifest of a node-local step, in every node's copy of the step.
inline constexpr const char* level_manifest_name = ".cairn-level.json";

/// What a node-local step's manifest holds.
struct LocalManifest {
    std::int64_t step = 0;
    /// Tells saves of one step apart (the coordinator's clock in ns at the
    /// save): a node whose copy has another save_id than the newest holds a
    /// stale copy, which counts as none.
    std::uint64_t save_id = 0;
    SavedLayout layout;
};
/// The manifest as JSON text (docs/FORMAT.md).
std::string manifest_text(const LocalManifest& m);
/// Parses a manifest; error::FormatError naming `where` when it does not.
LocalManifest parse_manifest(const std::string& text, const std::string& where);

/// A committed node-local step as the current nodes hold it (the same on
/// every rank).
struct LocalStep {
    std::int64_t step = 0;
    LocalManifest manifest;
    /// Per current node: the relative paths its copy of the step holds (empty
    /// when that node holds none of it).
    std::vector<std::set<std::string>> held;
    bool recoverable = false;   ///< every data file is held, or can be rebuilt
    bool needs_rebuild = false; ///< recoverable, but only by a rebuild
    std::string why;            ///< when not recoverable: what is lost (step, nodes, hosts)
};

/// Every node's committed steps as the node leaders listed them before the
/// last node-local save (NodeLevel::plan_save), brought up to date by that
/// save's outcome (NodeLevel::note_saved); what the levels record says.
struct NodeSteps {
    bool known = false; ///< false until a save has listed every node's steps
    /// Per node: its committed steps and the save_id of each copy.
    std::vector<std::map<std::int64_t, std::uint64_t>> committed;
    /// Per node: its other step directories (committed or not), newest
    /// first, without the step being saved and the one it reuses (what the
    /// save's retention sees).
    std::vector<std::vector<std::int64_t>> others;
    std::int64_t saving = -1; ///< the step of a save not (yet) known to be committed
};

struct SaveSession;
class NodeWriter;

/// A node-local save between its two halves (NodeLevel::plan_save,
/// NodeLevel::finish_save).
struct LocalSave {
    std::int64_t step = 0;
    SaveOptions options;
    double t0 = 0;                     ///< MPI_Wtime() at the start
    std::string my_dir, staging, final_dir; ///< this node's directory, the step's staging and final names
    std::shared_ptr<NodeWriter> writer;
    std::shared_ptr<SaveSession> session;
    /// This node's leader: the remains (`<name>.cairn-old`) of the older
    /// step whose files this save reuses, removed with retention's; empty
    /// when it reuses none.
    std::string recycled;
    /// The planner whose data the save writes (before it is staged).
    SavePlanner& planner() const;
};

/// The node-local level over one communicator.
class NodeLevel {
public:
    /// Collective over `comm` (builds the node topology).
    NodeLevel(MPI_Comm comm, const LocalLevel& options);
    /// Waits for the removal of the steps retention dropped.
    ~NodeLevel();
    NodeLevel(const NodeLevel&) = delete;
    NodeLevel& operator=(const NodeLevel&) = delete;

    const Topology& topology() const noexcept { return m_topo; }
    /// Node `node`'s directory (LocalLevel::dir with "%n" replaced).
    std::string node_dir(int node) const;
    /// This node's directory of `step`: <node dir>/step_<N>.
    std::string step_dir(std::int64_t step) const;

    /// A node-local save, in two halves so that the second can run on a
    /// background thread (an async manager save) or straight after the
    /// first. Together they save `state` as `step` into every node's
    /// storage, add the redundancy data and commit the step on every node,
    /// then apply the node-local retention; each throws the same error on
    /// every rank. The steps retention drops are renamed away (no longer
    /// committed) at once and removed by a thread of this node's leader
    /// while the caller goes on; the next call of this object waits for it.
    /// Recycling: when the retention of this save will drop an older step
    /// on every node, older than the newest step committed on every node
    /// (the nodes agree on it), plan_save renames it on every node
    /// away at once and moves its data files (and its redundancy files of
    /// the same scheme) into the staging directory, where this save writes
    /// over them in place (on a RAM disk, rewriting pages costs a fraction
    /// of allocating them); what this save does not write again is removed.
    /// A failure leaves every other committed node-local step as it was.
    /// plan_save, collective, on the caller's thread: every node's staging
    /// directory made ready, the save planned (the caller's buffers are
    /// read by the write, or by a staged copy of the plan's data).
    std::unique_ptr<LocalSave> plan_save(std::int64_t step, StateDict& state, const SaveOptions& options);
    /// The second half, collective on any one thread: the data written
    /// from `source`, `on_written` called once this rank's data is written,
    /// metadata and manifest on every node, redundancy, commit, retention.
    /// `my_files` (when not null) gets the data files this rank wrote. The
    /// result's `seconds` is the whole node-local save's.
    SaveResult finish_save(LocalSave& s, SavePlanner& source, const std::function<void()>& on_written,
                           std::vector<std::string>* my_files);

    /// Collective: the committed node-local steps that any current node
    /// holds, newest first, with whether each can be loaded (the same on
    /// every rank).
    std::vector<LocalStep> scan();

    /// Collective: makes `s` (recoverable) loadable on every node — the
    /// metadata and manifest on nodes that lack them, lost files rebuilt,
    /// the data files each node's ranks need and it lacks sent over MPI —
    /// and loads it into `state`. Fills `report`'s rebuilt and bytes_moved.
    LoadResult load(const LocalStep& s, StateDict& state, const LoadOptions& options, RestoreReport& report);

    /// Local: the committed steps of this node's directory, ascending (what
    /// its leader sees; the same on every node after a save).
    std::vector<std::int64_t> committed_here() const;

    /// The data files this rank wrote of the step `m` describes (relative
    /// names), or empty when the saved job's layout differs from this one.
    std::vector<std::string> own_files(const LocalManifest& m) const;
    /// Whether the step `m` describes was saved by a job of this one's
    /// ranks and nodes (each rank's files then are on its own node).
    bool same_layout(const LocalManifest& m) const;

    /// What the node leaders listed in the last plan_save, less the step it
    /// saves and the step it reuses (then no longer committed), plus what
    /// note_saved added: every node's committed steps as far as this rank
    /// knows without asking again. Local.
    const NodeSteps& known_steps() const noexcept { return m_known; }
    /// Local, after `ls`'s finish_save succeeded: known_steps() updated with
    /// the save (its step committed on every node, and each node's retention).
    void note_saved(const LocalSave& ls);

    /// Local: waits for the removal of the steps the last save's retention
    /// dropped, if it is still going on.
    void wait_for_removal() noexcept;

private:
    // The steps of plan_save and finish_save (each collective).
    void prepare_staging(const LocalSave& ls);
    void recycle_older_step(LocalSave& ls);
    LocalManifest make_manifest(const LocalSave& ls);
    void copy_metadata_and_manifest(const LocalSave& ls, const LocalManifest& m);
    void commit_step(const LocalSave& ls);
    void apply_retention(const LocalSave& ls);
    // The steps of scan: this node's committed steps (its leader), the
    // coordinator's join of every node's, and one step judged.
    Bytes scan_this_node() const;
    Bytes join_scans(const std::vector<Bytes>& all) const;
    LocalStep judge_step(LocalStep s, const std::string& manifest) const;
    // The steps of load.
    void share_metadata(const LocalStep& s, std::vector<std::set<std::string>>& held);
    std::uint64_t rebuild(const LocalStep& s, std::vector<std::set<std::string>>& held, RestoreReport& report);
    std::vector<std::string> needed_files(const LocalStep& s, StateDict& state, const LoadOptions& options);
    std::uint64_t move_needed_files(const LocalStep& s, const std::vector<std::set<std::string>>& held,
                                    const std::vector<std::vector<std::string>>& needs);

    Topology m_topo;
    LocalLevel m_opt;
    NodeSteps m_known;
    std::thread m_remover;
};

/// "step_<N>" as the manager names a per-rank checkpoint.
std::string local_step_name(std::int64_t step);

} // namespace cairn::detail
