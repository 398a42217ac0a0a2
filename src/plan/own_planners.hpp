// Private: the faster forms a planner may offer beyond SavePlanner and
// LoadPlanner, asked for through SavePlanner::columnar() and
// LoadPlanner::filtering() (nullptr by default), and the planners that offer
// them: the default planners as Cairn creates them when SaveOptions::planner
// or LoadOptions::planner is unset. The driver (src/driver/capabilities.hpp)
// chooses between these forms and the public calls.
#pragma once

#include "cairn/planner.hpp"
#include "core/codec.hpp"
#include "plan/columnar.hpp"

#include <memory>
#include <string>
#include <vector>

namespace cairn::detail {

/// Whether state key `key` may be absent from the checkpoint a load reads
/// (LoadOptions::partial and may_be_missing): with an empty list, when
/// `partial`; else when the list names it, or a prefix of it ending in '.'.
/// The one rule of the default planner and of row groups. Local.
bool may_be_missing(const std::string& key, bool partial, const std::vector<std::string>& may_be_missing);

/// A save planner whose global plan is DefaultSavePlanner's, computed by the
/// coordinator on the plans as the ranks send them (encoded, some in a
/// shorter form), without decoding them into structs.
class ColumnarSavePlanner {
public:
    virtual ~ColumnarSavePlanner() = default;
    /// Coordinator: the global plan of the gathered encoded plans (index =
    /// rank, ColumnarSavePlan::ingest), or nullptr where the columnar plan
    /// declines them (the plans then go through create_global_plan, which
    /// reports any problem). `gathered` must stay alive and unchanged until
    /// the plan's storage_shells() and encode_final() are done.
    virtual std::shared_ptr<ColumnarSavePlan> plan_columns(const std::vector<Bytes>& gathered) = 0;
};

/// A load planner that can be set up before the metadata arrives, so that
/// each rank keeps of the broadcast metadata only the chunks it reads.
class FilteringLoadPlanner {
public:
    virtual ~FilteringLoadPlanner() = default;
    /// LoadPlanner::set_up_planner before `metadata` is set (it is read only
    /// once it is, from create_local_plan on). Returns, for the decoder of
    /// the broadcast, the box of each array that this rank reads (nullptr:
    /// none); valid as long as the planner. Local; may throw as
    /// set_up_planner.
    virtual WantedBox set_up_before_metadata(StateDict& state, const Metadata& metadata, bool is_coordinator) = 0;
};

/// DefaultSavePlanner as Cairn creates it, with its global plan on columns.
/// Final: a subclass could change a step that the columnar plan skips.
class OwnSavePlanner final : public DefaultSavePlanner, public ColumnarSavePlanner {
public:
    ColumnarSavePlanner* columnar() noexcept override { return this; }
    std::shared_ptr<ColumnarSavePlan> plan_columns(const std::vector<Bytes>& gathered) override;
};

/// DefaultLoadPlanner as Cairn creates it, set up before the metadata.
/// Final, for the same reason.
class OwnLoadPlanner final : public DefaultLoadPlanner, public FilteringLoadPlanner {
public:
    OwnLoadPlanner(bool partial, std::vector<std::string> may_be_missing)
        : DefaultLoadPlanner(partial, std::move(may_be_missing))
    {
    }
    FilteringLoadPlanner* filtering() noexcept override { return this; }
    WantedBox set_up_before_metadata(StateDict& state, const Metadata& metadata, bool is_coordinator) override;
};

} // namespace cairn::detail
