#include "storage/per_rank/file_groups.hpp"

#include <cstdint>
#include <map>

namespace cairn::detail {

int count_group(int rank, int size, int count)
{
    return static_cast<int>(static_cast<std::int64_t>(rank) * count / size);
}

std::vector<std::vector<int>> data_file_groups(const DataFiles& files, const std::vector<int>& node_of)
{
    const int size = static_cast<int>(node_of.size());
    std::vector<std::vector<int>> groups;
    // Group key of each rank -> index in `groups` (first seen at its lowest rank).
    std::map<int, std::size_t> index;
    for (int r = 0; r < size; ++r) {
        int key = r;
        if (files.kind == DataFiles::Kind::per_node)
            key = node_of[static_cast<std::size_t>(r)];
        else if (files.kind == DataFiles::Kind::count && files.count < size)
            key = count_group(r, size, files.count);
        const auto [it, fresh] = index.emplace(key, groups.size());
        if (fresh)
            groups.emplace_back();
        groups[it->second].push_back(r);
    }
    return groups;
}

std::string group_file_name(const std::vector<int>& members, std::size_t k)
{
    const auto ks = std::to_string(k);
    if (members.size() == 1)
        return "__" + std::to_string(members[0]) + "_" + ks + ".distcp";
    const int lo = members.front(), hi = members.back(), step = members[1] - members[0];
    bool regular = step > 0;
    for (std::size_t i = 1; regular && i < members.size(); ++i)
        regular = members[i] - members[i - 1] == step;
    if (!regular)
        return "__n" + std::to_string(lo) + "_" + ks + ".distcp";
    return "__" + std::to_string(lo) + "-" + std::to_string(hi) + (step > 1 ? "x" + std::to_string(step) : "") +
           "_" + ks + ".distcp";
}

} // namespace cairn::detail
