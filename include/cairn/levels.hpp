// Cairn: the options of a CheckpointManager's node-local level (multi-level
// checkpointing, docs/FORMAT.md "Node-local level") and the report of how a
// restore went. cairn/manager.hpp includes this header; the node-local level
// itself (src/levels/) needs only these types.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cairn {

/// Redundancy of a node-local level (LocalLevel::redundancy): what loss of
/// node-local storage a node-local step survives.
struct Redundancy {
    enum class Scheme {
        none,    ///< each node keeps only its own ranks' files: any node lost loses the step
        partner, ///< each node also keeps a copy of one other node's files (node n's on node n+1,
                 ///< cyclically): survives the loss of any nodes no two of which are neighbours
        xor_parity ///< SCR's XOR: the nodes form groups of `group_size` (the last group takes
                   ///< the remainder when it has fewer than 2); each node keeps 1/(k-1) of its
                   ///< data's size in parity: survives the loss of one node per group
    };
    Scheme scheme = Scheme::none;
    /// xor_parity: nodes per group, at least 2.
    int group_size = 4;

    static Redundancy none() { return {}; }
    static Redundancy partner() { return {Scheme::partner, 4}; }
    static Redundancy xor_parity(int k = 4) { return {Scheme::xor_parity, k}; }
    /// "none", "partner", "xor" or "xor:K" (K >= 2); error::WrongAPIUsage
    /// naming the text otherwise.
    static Redundancy parse(const std::string& text);
    /// The form parse() reads: "none", "partner" or "xor:K".
    std::string str() const;
};

/// The node-local level of a CheckpointManager (multi-level checkpointing,
/// docs/FORMAT.md "Node-local level"). With `dir` set, save() writes each
/// step into node-local storage (a RAM disk or NVMe path that each node has
/// under the same name), plus the redundancy data exchanged between nodes,
/// and every `flush_every`-th step (or on demand: flush()) is also drained
/// into the manager's root on the parallel file system, in the background.
/// restore_latest() takes the newest step of any level, from node-local
/// storage when it can (rebuilding a lost node's files from partner copies
/// or parity), else from the root.
struct LocalLevel {
    /// The node-local directory; empty: no node-local level (every save goes
    /// to the root, as without levels). "%n" in it is replaced by the node's
    /// index (0 .. nodes-1), e.g. to keep several nodes' storage apart on one
    /// host or in a shared scratch directory.
    std::string dir;
    Redundancy redundancy;
    /// Node-local steps kept on each node (the newest ones), at least 1.
    int keep_last = 2;
    /// Every flush_every-th save (counted since the last drain of this
    /// manager) is also drained to the root; 0: only on demand (flush()).
    int flush_every = 10;
    /// 0: a node is the ranks of one MPI_COMM_TYPE_SHARED group. K > 0: every
    /// K consecutive ranks form a node (to test several nodes on one host).
    int ranks_per_node = 0;
};

/// How the last restore_latest() restored (CheckpointManager::last_restore()).
struct RestoreReport {
    enum class Level { none, node_local, file_system };
    Level level = Level::none;
    std::int64_t step = -1;
    /// Data files rebuilt from partner copies or XOR parity (names in the step).
    std::vector<std::string> rebuilt;
    /// Bytes of data files sent between nodes over MPI before the load
    /// (rebuilds, and files a node needs that another node holds).
    std::uint64_t bytes_moved = 0;
    double seconds = 0; ///< the whole restore, on the coordinator
};

} // namespace cairn
