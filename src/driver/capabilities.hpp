// Private: the one place where a save or load chooses between the public
// calls of its planner and storage, which every planner and storage has,
// and the faster forms that some offer (SavePlanner::columnar,
// StorageWriter::columnar, LoadPlanner::filtering, StorageReader::columnar;
// src/plan/own_planners.hpp, src/storage/columnar_storage.hpp). Cairn's own
// planners and storages offer them; a plug-in need not.
#pragma once

#include "cairn/planner.hpp"
#include "cairn/storage.hpp"
#include "plan/own_planners.hpp"
#include "storage/columnar_storage.hpp"

namespace cairn::detail {

/// The forms a save's planner and storage offer.
struct SaveForms {
    ColumnarSavePlanner* planner = nullptr; ///< the global plan on encoded plans
    ColumnarWriter* storage = nullptr;      ///< the commit from metadata columns
    /// Both: the coordinator plans on the encoded plans, sends each rank an
    /// assignment of its own items and commits from columns
    /// (src/plan/columnar.hpp); else the plans are decoded and go through
    /// create_global_plan and finish.
    bool columnar() const noexcept { return planner && storage; }
};

inline SaveForms save_forms(SavePlanner& planner, StorageWriter& storage)
{
    return SaveForms{planner.columnar(), storage.columnar()};
}

/// The forms a load's planner and storage offer.
struct LoadForms {
    FilteringLoadPlanner* planner = nullptr; ///< set up before the metadata
    ColumnarReader* storage = nullptr;       ///< metadata as columns; reads with part of it
    /// Both: each rank keeps of the broadcast metadata only the chunks its
    /// boxes overlap (and each entry's first); else the whole metadata.
    bool filtered() const noexcept { return planner && storage; }
};

inline LoadForms load_forms(LoadPlanner& planner, StorageReader& storage)
{
    return LoadForms{planner.filtering(), storage.columnar()};
}

} // namespace cairn::detail
