// Private: which ranks of a per-rank save share a data file
// (PerRankTuning::files, cairn::DataFiles), and the names of those files.
// Pure functions: the writer splits its communicator into the same groups
// (per node through MPI_COMM_TYPE_SHARED), and the planning benchmark calls
// them for rank counts no test runs.
#pragma once

#include "cairn/distcp.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace cairn::detail {

/// The group of `rank` among `size` ranks saving with DataFiles::in_all(count):
/// `count` contiguous groups of nearly equal size (rank * count / size).
int count_group(int rank, int size, int count);

/// The data-file groups of a save by `node_of.size()` ranks with `files`,
/// `node_of[r]` being the node of rank r (any ids; the ranks of a node need
/// not be consecutive; only DataFiles::per_node looks at them): each group's
/// ranks ascending, the groups in the order of their lowest rank. Each group
/// writes one data file (SaveOptions::files_per_rank files) that holds data.
std::vector<std::vector<int>> data_file_groups(const DataFiles& files, const std::vector<int>& node_of);

/// Name of data file k of the ranks `members` (ascending): one rank,
/// `__<r>_<k>.distcp`; consecutive ranks `__<lo>-<hi>_<k>.distcp`; every
/// s-th rank `__<lo>-<hi>x<s>_<k>.distcp`; any other set (a node whose
/// ranks are scattered) `__n<lo>_<k>.distcp`. docs/FORMAT.md.
std::string group_file_name(const std::vector<int>& members, std::size_t k);

} // namespace cairn::detail
