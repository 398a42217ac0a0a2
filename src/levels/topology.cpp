// The nodes of a communicator (levels/topology.hpp).
#include "levels/topology.hpp"

#include "cairn/errors.hpp"

#include <algorithm>
#include <cstring>

namespace cairn::detail {

namespace {

void check(int rc, const char* what)
{
    if (rc != MPI_SUCCESS)
        throw Error(Error::Kind::generic, std::string("node topology: ") + what + " failed");
}

} // namespace

Topology::Topology(MPI_Comm c, int ranks_per_node) : comm(c)
{
    if (ranks_per_node < 0)
        throw error::WrongAPIUsage("ranks_per_node must not be negative, not " + std::to_string(ranks_per_node));
    check(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
    check(MPI_Comm_size(comm, &size), "MPI_Comm_size");
    if (ranks_per_node > 0)
        check(MPI_Comm_split(comm, rank / ranks_per_node, rank, &node_comm), "MPI_Comm_split");
    else
        check(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node_comm),
              "MPI_Comm_split_type");
    check(MPI_Comm_rank(node_comm, &local_rank), "MPI_Comm_rank");
    check(MPI_Comm_size(node_comm, &local_size), "MPI_Comm_size");
    // Every rank learns its node's lowest rank; nodes are numbered in that order.
    int lowest = rank;
    check(MPI_Allreduce(MPI_IN_PLACE, &lowest, 1, MPI_INT, MPI_MIN, node_comm), "MPI_Allreduce");
    std::vector<int> lowest_of(static_cast<std::size_t>(size));
    check(MPI_Allgather(&lowest, 1, MPI_INT, lowest_of.data(), 1, MPI_INT, comm), "MPI_Allgather");
    first_rank = lowest_of;
    std::sort(first_rank.begin(), first_rank.end());
    first_rank.erase(std::unique(first_rank.begin(), first_rank.end()), first_rank.end());
    nodes = static_cast<int>(first_rank.size());
    node_of_rank.resize(static_cast<std::size_t>(size));
    ranks_on_node.assign(static_cast<std::size_t>(nodes), 0);
    for (int r = 0; r < size; ++r) {
        const auto it = std::lower_bound(first_rank.begin(), first_rank.end(), lowest_of[static_cast<std::size_t>(r)]);
        node_of_rank[static_cast<std::size_t>(r)] = static_cast<int>(it - first_rank.begin());
        ++ranks_on_node[static_cast<std::size_t>(node_of_rank[static_cast<std::size_t>(r)])];
    }
    node = node_of_rank[static_cast<std::size_t>(rank)];
    check(MPI_Comm_split(comm, leader() ? 0 : MPI_UNDEFINED, node, &leaders), "MPI_Comm_split");
    // Host names of the leaders, to name lost nodes in errors.
    char name[MPI_MAX_PROCESSOR_NAME + 1] = {};
    int len = 0;
    check(MPI_Get_processor_name(name, &len), "MPI_Get_processor_name");
    std::vector<char> all(static_cast<std::size_t>(size) * (MPI_MAX_PROCESSOR_NAME + 1));
    check(MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME + 1, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME + 1, MPI_CHAR,
                        comm),
          "MPI_Allgather");
    for (int n = 0; n < nodes; ++n) {
        const char* h = all.data() + static_cast<std::size_t>(first_rank[static_cast<std::size_t>(n)]) *
                                         (MPI_MAX_PROCESSOR_NAME + 1);
        hosts.emplace_back(h, strnlen(h, MPI_MAX_PROCESSOR_NAME));
    }
}

Topology::~Topology()
{
    if (leaders != MPI_COMM_NULL)
        MPI_Comm_free(&leaders);
    if (node_comm != MPI_COMM_NULL)
        MPI_Comm_free(&node_comm);
}

int Topology::rank_of(int n, int local) const
{
    // A node's ranks are not always consecutive (MPI_COMM_TYPE_SHARED of a
    // cyclic placement): count.
    int seen = 0;
    for (int r = 0; r < size; ++r)
        if (node_of_rank[static_cast<std::size_t>(r)] == n && seen++ == local)
            return r;
    throw error::WrongAPIUsage("node " + std::to_string(n) + " has no local rank " + std::to_string(local));
}

std::string expand_node_dir(const std::string& dir, int node)
{
    std::string out;
    for (std::size_t i = 0; i < dir.size(); ++i) {
        if (dir[i] == '%' && i + 1 < dir.size() && dir[i + 1] == 'n') {
            out += std::to_string(node);
            ++i;
        } else {
            out += dir[i];
        }
    }
    return out;
}

} // namespace cairn::detail
