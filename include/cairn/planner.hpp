// Cairn: planners decide what is written and read. The defaults dedup
// replicated data, validate the global state and reshard on load; subclass
// them (or implement the interfaces) to change a step, e.g. to cast on save.
#pragma once

#include "cairn/plan.hpp"
#include "cairn/state_dict.hpp"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace cairn {

namespace detail {
class ColumnarSavePlanner;  // the global plan on encoded plans (internal)
class FilteringLoadPlanner; // set up before the metadata arrives (internal)
} // namespace detail

/// A readable region of memory handed to a storage writer.
struct DataRef {
    StridedView view;
    MemorySpace space = MemorySpace::host;
};

/// One state-dict entry after flattening nested dicts and Stateful objects.
struct FlatEntry {
    std::string fqn;
    const Entry* entry; ///< never a nested dict or Stateful
};

/// Save planner. Call sequence on every rank (as the seeds' planner):
/// set_up_planner -> create_local_plan -> [coordinator: create_global_plan]
/// -> finish_plan -> resolve_data (called by the storage for each item).
class SavePlanner {
public:
    virtual ~SavePlanner() = default;
    /// Local. Receives the caller's state; may throw error::WrongAPIUsage.
    virtual void set_up_planner(StateDict& state, bool is_coordinator) = 0;
    /// Local. The write items of this rank.
    virtual SavePlan create_local_plan() = 0;
    /// Coordinator only. Validates and dedups all ranks' plans (index = rank),
    /// returns the final plans and the metadata (chunk storage still empty).
    virtual std::pair<std::vector<SavePlan>, Metadata> create_global_plan(std::vector<SavePlan> plans) = 0;
    /// Local. Turns the coordinator's plan for this rank into the plan to execute.
    virtual SavePlan finish_plan(SavePlan central_plan) { return central_plan; }
    /// Local. The memory holding the data of `item` (dense or strided).
    virtual DataRef resolve_data(const WriteItem& item) = 0;
    /// Whether the global plan stores an array box that several ranks hold
    /// identically once, written by one of them (as DefaultSavePlanner's
    /// does): SaveOptions::check_replicas then compares the other holders'
    /// bytes at the commit. The default: false (no check).
    virtual bool stores_replicas_once() const noexcept { return false; }
    /// A faster form of the global plan, on the plans as the ranks send
    /// them, an internal interface offered by the planner Cairn creates when
    /// SaveOptions::planner is unset; nullptr (the default): none, and the
    /// coordinator calls create_global_plan.
    virtual detail::ColumnarSavePlanner* columnar() noexcept { return nullptr; }
};

/// Load planner. Call sequence on every rank: set_up_planner ->
/// create_local_plan -> [create_global_plan on the coordinator when
/// needs_global_plan()] -> finish_plan -> resolve_destination / load_bytes
/// (called by the storage reader) -> finish.
class LoadPlanner {
public:
    virtual ~LoadPlanner() = default;
    virtual void set_up_planner(StateDict& state, const Metadata& metadata, bool is_coordinator) = 0;
    virtual LoadPlan create_local_plan() = 0;
    /// Whether plans are gathered to the coordinator for a global step.
    virtual bool needs_global_plan() const { return false; }
    virtual std::vector<LoadPlan> create_global_plan(std::vector<LoadPlan> plans) { return plans; }
    virtual LoadPlan finish_plan(LoadPlan central_plan) { return central_plan; }
    /// Where the elements of an array read item go (a strided host view of
    /// exactly `item.box`).
    virtual DataRef resolve_destination(const ReadItem& item) = 0;
    /// Receives the whole content of a bytes entry.
    virtual void load_bytes(const ReadItem& item, std::vector<std::byte> data) = 0;
    /// After all reads of this rank: sets scalars and strings, calls
    /// Stateful::load_state_dict.
    virtual void finish() = 0;
    /// After the reads: the keys of the state that the checkpoint lacks
    /// (LoadResult::missing) and the keys of the checkpoint that the state
    /// did not ask for (LoadResult::skipped). The default: none.
    virtual const std::vector<std::string>& missing() const noexcept { return no_keys(); }
    virtual const std::vector<std::string>& skipped() const noexcept { return no_keys(); }
    /// A set-up before the metadata arrives, so that a rank keeps of it only
    /// the chunks it reads, an internal interface offered by the planner
    /// Cairn creates when LoadOptions::planner is unset; nullptr (the
    /// default): none, and set_up_planner gets the whole metadata.
    virtual detail::FilteringLoadPlanner* filtering() noexcept { return nullptr; }

private:
    static const std::vector<std::string>& no_keys() noexcept
    {
        static const std::vector<std::string> none;
        return none;
    }
};

/// Flattens nested dicts and Stateful objects (calling their state_dict())
/// into entries named "<outer>.<inner>". `keep` receives the dicts returned by
/// Stateful objects, which the flat entries point into. Throws
/// error::WrongAPIUsage on a duplicate flattened name.
std::vector<FlatEntry> flatten(StateDict& state, std::vector<std::pair<Stateful*, std::shared_ptr<StateDict>>>& keep);

/// The default save planner: one write item per array shard (a rank's
/// several boxes of one array: one item each; empty boxes only validated),
/// bytes, scalars and strings; the global plan checks that
/// every rank has the same keys, dtypes and global shapes, boxes in bounds,
/// disjoint (identical boxes of different ranks are replicas) and covering each array; replicas,
/// bytes, scalars and strings are checked for equal content and written once,
/// by the holder with the fewest bytes assigned so far.
class DefaultSavePlanner : public SavePlanner {
public:
    void set_up_planner(StateDict& state, bool is_coordinator) override;
    SavePlan create_local_plan() override;
    std::pair<std::vector<SavePlan>, Metadata> create_global_plan(std::vector<SavePlan> plans) override;
    DataRef resolve_data(const WriteItem& item) override;
    /// True: replicas are written once, by the holder with the fewest bytes.
    bool stores_replicas_once() const noexcept override { return true; }

protected:
    const Entry& lookup(const std::string& fqn) const;
    bool may_be_missing(const std::string& fqn) const;
    static std::string closest_key(const std::string& key, const Metadata& md);
    std::vector<FlatEntry> m_flat;
    std::vector<std::pair<Stateful*, std::shared_ptr<StateDict>>> m_keep;
    std::map<std::string, std::size_t> m_index; ///< fqn -> its (first) entry in m_flat
    std::map<std::string, std::vector<std::size_t>> m_shards; ///< array fqn -> its boxes in m_flat, in order
    std::map<std::string, std::map<Box, std::size_t>> m_by_box; ///< arrays of several boxes: box -> m_flat (lazily)
    bool m_is_coordinator = false;
};

/// The default load planner: reshards. For each box of each array of the
/// state it intersects the box with the stored chunks and reads only those
/// regions (boxes of a rank may overlap: each is filled). Without `partial`, every key of the state must be in the
/// checkpoint and every key of the checkpoint in the state; with it, keys on
/// either side only are skipped (see missing() and skipped()).
class DefaultLoadPlanner : public LoadPlanner {
public:
    /// `may_be_missing`: state keys (or prefixes ending in '.') the
    /// checkpoint may lack (LoadOptions::may_be_missing).
    explicit DefaultLoadPlanner(bool partial = false, std::vector<std::string> may_be_missing = {})
        : m_partial(partial), m_may_be_missing(std::move(may_be_missing))
    {
    }
    void set_up_planner(StateDict& state, const Metadata& metadata, bool is_coordinator) override;
    LoadPlan create_local_plan() override;
    DataRef resolve_destination(const ReadItem& item) override;
    void load_bytes(const ReadItem& item, std::vector<std::byte> data) override;
    void finish() override;

    /// After set_up_planner: the box of array `fqn` in this rank's state
    /// (several boxes: the smallest box holding them all, or the first
    /// box when they are all empty),
    /// nullptr when the state has no array of that name (or before
    /// set_up_planner). Local, never throws; the pointer stays valid until
    /// the next set_up_planner. A load with LoadOptions::planner unset
    /// decodes only the chunks that overlap it (LoadPlanner::filtering).
    const Box* requested_box(const std::string& fqn) const;

    /// Keys of the state that the checkpoint lacks (partial loads, and the
    /// keys of `may_be_missing`).
    const std::vector<std::string>& missing() const noexcept override { return m_missing; }
    /// Keys of the checkpoint that the state did not ask for (partial loads only).
    const std::vector<std::string>& skipped() const noexcept override { return m_skipped; }

protected:
    const Entry& lookup(const std::string& fqn) const;
    bool may_be_missing(const std::string& fqn) const;
    static std::string closest_key(const std::string& key, const Metadata& md);
    bool m_partial;
    std::vector<std::string> m_may_be_missing;
    const Metadata* m_metadata = nullptr;
    std::vector<FlatEntry> m_flat;
    std::vector<std::pair<Stateful*, std::shared_ptr<StateDict>>> m_keep;
    std::map<std::string, std::size_t> m_index; ///< fqn -> its (first) entry in m_flat
    std::map<std::string, std::vector<std::size_t>> m_shards; ///< array fqn -> its boxes in m_flat, in order
    std::map<std::string, Box> m_bounds; ///< arrays of several boxes: the box holding them all
    std::vector<std::string> m_missing;
    std::vector<std::string> m_skipped;
};

} // namespace cairn
