// Private: redundancy of node-local steps (cairn::Redundancy): partner copies
// and XOR parity, written at save and used at restore to rebuild the data
// files of lost nodes.
//
// In a node-local step directory (docs/FORMAT.md "Node-local level"):
//   __<r>_<k>.distcp          the data files of this node's ranks (as saved)
//   partner/__<r>_<k>.distcp  partner: copies of the files of the node before
//                             this one (node n holds node n-1's, cyclically)
//   xor/<set>.<member>.xor    XOR: this rank's parity piece of its set
#pragma once

#include "cairn/levels.hpp"
#include "levels/topology.hpp"

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace cairn::detail {

/// A data file of a node-local step, as saved.
struct SavedFile {
    std::string name;        ///< relative to the step directory, e.g. "__3_0.distcp"
    std::uint64_t bytes = 0; ///< its size
};

/// What a node-local step holds, as saved: the part of its manifest that the
/// redundancy schemes are a function of. The same on every rank.
struct SavedLayout {
    int nodes = 1;
    std::vector<int> node_of_rank;             ///< per saved rank
    std::vector<std::vector<SavedFile>> files; ///< per saved rank: the data files it wrote
    std::vector<std::string> hosts;            ///< per saved node, to name lost ones
    Redundancy redundancy;
};

/// XOR sets of a layout: member lists of saved ranks, each on a different
/// node of one group. Deterministic, the same on every rank. Groups: nodes
/// in runs of group_size, a remainder of 1 joining the last group; set l of
/// a group takes local rank l % (ranks on the node) of each of its nodes, in
/// node order (a rank of a node with fewer ranks may be in several sets);
/// docs/FORMAT.md "Redundancy data". error::WrongAPIUsage for fewer than 2
/// nodes or group_size < 2.
struct XorSet {
    std::vector<int> members; ///< saved ranks, in order; member j keeps parity piece j
    std::uint64_t piece = 0;  ///< bytes of each parity piece (the members' data, padded, / (size-1))
};
std::vector<XorSet> xor_sets(const SavedLayout& layout);

/// What redundancy data moved at a save (this rank).
struct RedundancyCounts {
    std::uint64_t bytes_sent = 0;
    std::uint64_t bytes_received = 0;
    std::uint64_t bytes_written = 0; ///< redundancy files written on this node by this rank
    double seconds = 0;
};

/// Collective over topo.comm, at save, after every rank wrote its data files
/// into `step_dir` (this node's staging directory of the step): writes this
/// node's redundancy data there (partner copies, or this rank's XOR parity
/// piece), each rank for its own files. `layout` describes this save on
/// `topo` (saved rank = rank of topo.comm). Throws this rank's error; the
/// caller agrees on errors. scheme none: returns at once.
RedundancyCounts encode_redundancy(const Topology& topo, const SavedLayout& layout, const std::string& step_dir);

/// Local, this node's leader, after its own encode_redundancy into
/// `step_dir`: removes the files of the scheme's directory (partner/ or
/// xor/) that no rank of this node writes for `layout` (left there by a
/// recycled older step whose redundancy files the save writes over).
void remove_stale_redundancy(const Topology& topo, const SavedLayout& layout, const std::string& step_dir);

/// Local, pure: whether every data file of `layout` can be had from
/// `available` (relative paths held by any surviving node: data files,
/// partner/..., xor/...); when not, `why` names the files, the saved nodes
/// and hosts whose loss cannot be covered (e.g. "two nodes of XOR group 0
/// lost: node 1 (host b), node 2 (host c)").
bool recoverable(const SavedLayout& layout, const std::set<std::string>& available, std::string* why);

/// Collective over topo.comm, at restore (topo: the current job, which may
/// have other ranks and nodes than the save): makes every data file of
/// `layout` that no current node holds present again in the step directory
/// of some current node: partner copies are renamed in place on the node
/// holding them; XOR-covered files are computed from their set's surviving
/// data files and parity pieces, sent over MPI to one rebuilding node (the
/// rebuilds of several lost ranks run together, piece by piece, spread over
/// the ranks of each node).
/// held[n]: the relative paths current node n holds in its step directory
/// (the same on every rank); step_dir: this node's step directory. Returns,
/// the same on every rank, each rebuilt file's name and the current node
/// that holds it now; `bytes_moved` (when not null) gets the bytes this rank
/// sent. Precondition: recoverable(). Throws this rank's error (the caller
/// agrees on errors).
std::map<std::string, int> rebuild_lost_files(const Topology& topo, const SavedLayout& layout,
                                              const std::vector<std::set<std::string>>& held,
                                              const std::string& step_dir, std::uint64_t* bytes_moved);

} // namespace cairn::detail
