// Private: the collective step of save and load that places the rows of
// RowGroups (include/cairn/rows.hpp) before the plan.
#pragma once

#include "cairn/checkpoint.hpp"
#include "comm/protocol.hpp"

namespace cairn::detail {

/// Save, collective over `c`, before the local plan: finds the RowGroups of
/// `state`, checks that every rank has the same ones and that each group's
/// arrays agree in rows, and places each rank's rows after those of the
/// lower ranks (MPI_Exscan, MPI_Allreduce). One allreduce when no rank has
/// a RowGroup. Throws on every rank when any fails.
void place_rows_for_save(const Comm& c, StateDict& state);

/// Load, collective over `c`, once the coordinator's `storage` is open:
/// finds the RowGroups as save does, the coordinator reads the stored row
/// count of each (StorageReader::read_metadata), each rank takes its share
/// and its arrays are resized. One allreduce when no rank has a RowGroup.
void place_rows_for_load(const Comm& c, StateDict& state, StorageReader* storage, const LoadOptions& options);

} // namespace cairn::detail
