// Private: the nodes of a communicator, for the node-local level
// (cairn::LocalLevel): which ranks share a node's storage, a communicator
// per node and one of the node leaders.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

namespace cairn::detail {

/// The nodes of `comm`: a node is the ranks of one MPI_COMM_TYPE_SHARED group
/// (or, with ranks_per_node K > 0, every K consecutive ranks). Nodes are
/// numbered 0 .. nodes-1 in the order of their lowest rank; a node's ranks
/// are numbered (local_rank) in rank order. Owns its communicators.
class Topology {
public:
    /// Collective over `comm`: error::WrongAPIUsage for ranks_per_node < 0,
    /// error::Error when an MPI call fails (the same on every rank).
    Topology(MPI_Comm comm, int ranks_per_node);
    ~Topology();
    Topology(const Topology&) = delete;
    Topology& operator=(const Topology&) = delete;

    MPI_Comm comm = MPI_COMM_NULL; ///< the communicator given (not owned)
    int rank = 0, size = 1;
    int node = 0, nodes = 1;           ///< this rank's node, and how many there are
    int local_rank = 0, local_size = 1; ///< within the node
    MPI_Comm node_comm = MPI_COMM_NULL; ///< the ranks of this node
    MPI_Comm leaders = MPI_COMM_NULL;   ///< local_rank 0 of every node (rank = node); MPI_COMM_NULL elsewhere
    std::vector<int> node_of_rank;      ///< per rank of `comm`
    std::vector<int> first_rank;        ///< per node: its lowest rank (its leader)
    std::vector<int> ranks_on_node;     ///< per node: how many ranks
    std::vector<std::string> hosts;     ///< per node: its leader's MPI_Get_processor_name

    bool leader() const noexcept { return local_rank == 0; }
    /// The rank of `comm` that is local rank `local` of node `n` (local < ranks_on_node[n]).
    int rank_of(int n, int local) const;
};

/// `dir` with every "%n" replaced by `node`.
std::string expand_node_dir(const std::string& dir, int node);

} // namespace cairn::detail
