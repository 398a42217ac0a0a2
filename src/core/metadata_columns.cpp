#include "core/metadata_columns.hpp"

namespace cairn::detail {

std::vector<std::int64_t> ColumnRows::files_in_use() const
{
    std::vector<std::int64_t> order;
    std::vector<bool> seen(m_md->files.size() + 1, false); // file f at slot f + 1 (slot 0: not written)
    for (const auto f : m_md->chunk_file) {
        const auto slot = static_cast<std::size_t>(f + 1);
        if (!seen[slot]) {
            seen[slot] = true;
            order.push_back(f);
        }
    }
    return order;
}

std::size_t MetadataColumns::add_chunks(std::size_t n)
{
    const std::size_t first = chunk_file.size();
    chunk_file.resize(first + n, -1);
    chunk_offset.resize(first + n, 0);
    chunk_length.resize(first + n, 0);
    sum_begin.resize(first + n, 0);
    sum_count.resize(first + n, 0);
    return first;
}

} // namespace cairn::detail
