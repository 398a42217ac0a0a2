// Which ranks of a per-rank save share a data file (DataFiles) and the
// names of the group files (src/storage/per_rank/file_groups.hpp), for rank
// and node counts no MPI test runs.
#include "unit_common.hpp"

#include "storage/per_rank/file_groups.hpp"

#include <set>
#include <string>
#include <vector>

using cairn::DataFiles;
using cairn::detail::data_file_groups;
using cairn::detail::group_file_name;

namespace {
std::set<std::string> names(const std::vector<std::vector<int>>& groups)
{
    std::set<std::string> out;
    for (const auto& g : groups)
        out.insert(group_file_name(g, 0));
    return out;
}
} // namespace

TEST_CASE("data-file groups: per rank, per node, M in all", "[groups]")
{
    // 16,384 ranks over 512 nodes of 32 consecutive ranks.
    const int ranks = 16384, nodes = 512;
    std::vector<int> node_of(ranks);
    for (int r = 0; r < ranks; ++r)
        node_of[static_cast<std::size_t>(r)] = r / (ranks / nodes);
    CHECK(data_file_groups(DataFiles::per_rank(), node_of).size() == std::size_t(ranks));
    const auto per_node = data_file_groups(DataFiles::per_node(), node_of);
    REQUIRE(per_node.size() == std::size_t(nodes));
    CHECK(per_node[1] == std::vector<int>{32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47,
                                          48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63});
    const auto n = names(per_node);
    CHECK(n.size() == std::size_t(nodes));
    CHECK(n.count("__0-31_0.distcp") == 1);
    CHECK(n.count("__16352-16383_0.distcp") == 1);
    CHECK(data_file_groups(DataFiles::in_all(512), node_of).size() == 512u);
    CHECK(data_file_groups(DataFiles::in_all(7), node_of).size() == 7u);
    CHECK(data_file_groups(DataFiles::in_all(1), node_of).size() == 1u);
    CHECK(data_file_groups(DataFiles::in_all(ranks * 2), node_of).size() == std::size_t(ranks));
    // Uneven counts: contiguous groups whose sizes differ by at most one.
    const auto seven = data_file_groups(DataFiles::in_all(3), std::vector<int>(7, 0));
    REQUIRE(seven.size() == 3u);
    CHECK(seven[0] == std::vector<int>{0, 1, 2});
    CHECK(seven[1] == std::vector<int>{3, 4});
    CHECK(seven[2] == std::vector<int>{5, 6});
}

TEST_CASE("data-file groups: nodes whose ranks are scattered", "[groups]")
{
    // Round-robin placement: rank r on node r % 3.
    std::vector<int> node_of;
    for (int r = 0; r < 9; ++r)
        node_of.push_back(r % 3);
    const auto g = data_file_groups(DataFiles::per_node(), node_of);
    REQUIRE(g.size() == 3u);
    CHECK(g[0] == std::vector<int>{0, 3, 6});
    CHECK(group_file_name(g[0], 1) == "__0-6x3_1.distcp");
    CHECK(group_file_name({0, 1, 5}, 0) == "__n0_0.distcp");
    CHECK(group_file_name({4}, 2) == "__4_2.distcp");
    // Node ids need not be small or in rank order.
    const auto h = data_file_groups(DataFiles::per_node(), {900, 17, 900, 17});
    REQUIRE(h.size() == 2u);
    CHECK(h[0] == std::vector<int>{0, 2});
    CHECK(h[1] == std::vector<int>{1, 3});
}
