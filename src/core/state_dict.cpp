#include "cairn/state_dict.hpp"

#include "cairn/errors.hpp"
#include "stage/stage.hpp"

namespace cairn {

Shape ArrayShard::effective_strides() const { return strides.empty() ? row_major_strides(box.shape) : strides; }

StridedView ArrayShard::view() const { return StridedView{data, dtype_size(dtype), box.shape, effective_strides()}; }

namespace {
void check_shard(const std::string& name, const ArrayShard& s)
{
    auto fail = [&](const std::string& why) { throw error::WrongAPIUsage("array '" + name + "': " + why); };
    const int code = static_cast<int>(s.dtype);
    if (!dtype_valid(code))
        fail("invalid dtype code " + std::to_string(code));
    const auto n = s.global_shape.size();
    if (s.box.offsets.size() != n || s.box.shape.size() != n)
        fail("box " + s.box.str() + " has " + std::to_string(s.box.shape.size()) + " dimensions (offsets: " +
             std::to_string(s.box.offsets.size()) + ") but the global shape " + shape_str(s.global_shape) + " has " +
             std::to_string(n));
    if (!s.strides.empty() && s.strides.size() != n)
        fail("strides " + shape_str(s.strides) + " have " + std::to_string(s.strides.size()) +
             " dimensions, the array has " + std::to_string(n));
    for (std::size_t d = 0; d < n; ++d) {
        if (s.global_shape[d] < 0)
            fail("negative extent in global shape " + shape_str(s.global_shape));
        if (s.box.shape[d] < 0)
            fail("negative extent in box " + s.box.str());
        if (!s.strides.empty() && s.strides[d] < 0)
            fail("negative stride in " + shape_str(s.strides));
    }
    if (!s.box.inside(s.global_shape))
        fail("box " + s.box.str() + " lies outside the global shape " + shape_str(s.global_shape));
    if (s.data == nullptr && !s.box.empty())
        fail("null data pointer for the non-empty box " + s.box.str());
    if (s.space == MemorySpace::cuda)
        detail::note_device_memory();
    if (s.space == MemorySpace::cuda && !s.box.empty() && !detail::cuda_pointer_usable(s.data))
        fail("declared in CUDA device memory (MemorySpace::cuda), but its data pointer is pageable host memory; "
             "declare it MemorySpace::host");
}
} // namespace

StateDict& StateDict::add(const std::string& name, Entry entry)
{
    if (name.empty())
        throw error::WrongAPIUsage("state dict: empty entry name");
    if (name.find('\0') != std::string::npos)
        throw error::WrongAPIUsage("state dict: entry name with a NUL byte");
    if (m_index.count(name))
        throw error::WrongAPIUsage("state dict: duplicate entry name '" + name + "'");
    m_index.emplace(name, m_entries.size());
    m_entries.emplace_back(name, std::move(entry));
    return *this;
}

StateDict& StateDict::add_array(const std::string& name, const ArrayShard& shard)
{
    check_shard(name, shard);
    const auto it = m_index.find(name);
    if (it == m_index.end())
        return add(name, shard);
    // Another box of an array already in the dict: the same dtype and global shape.
    const auto* first = std::get_if<ArrayShard>(&m_entries[it->second].second);
    if (!first)
        throw error::WrongAPIUsage("state dict: duplicate entry name '" + name +
                                   "' (an array can take several boxes, other entries one name each)");
    if (first->dtype != shard.dtype || first->global_shape != shard.global_shape)
        throw error::WrongAPIUsage("array '" + name + "': box " + shard.box.str() + " has dtype " +
                                   std::string(dtype_name(shard.dtype)) + " and global shape " +
                                   shape_str(shard.global_shape) + ", but its box " + first->box.str() +
                                   " added before has dtype " + std::string(dtype_name(first->dtype)) +
                                   " and global shape " + shape_str(first->global_shape) +
                                   " (the boxes of one array share both)");
    m_entries.emplace_back(name, shard);
    return *this;
}

std::size_t StateDict::boxes(const std::string& name) const noexcept
{
    const auto it = m_index.find(name);
    if (it == m_index.end() || !std::holds_alternative<ArrayShard>(m_entries[it->second].second))
        return it == m_index.end() ? 0 : 1;
    std::size_t n = 0;
    for (std::size_t i = it->second; i < m_entries.size(); ++i)
        n += m_entries[i].first == name;
    return n;
}

StateDict& StateDict::add_bytes(const std::string& name, std::vector<std::byte>* blob)
{
    if (!blob)
        throw error::WrongAPIUsage("bytes '" + name + "': null pointer");
    return add(name, blob);
}

StateDict& StateDict::add_scalar_ref(const std::string& name, ScalarRef ref)
{
    if (!ref.data)
        throw error::WrongAPIUsage("scalar '" + name + "': null pointer");
    if (!dtype_valid(static_cast<int>(ref.dtype)))
        throw error::WrongAPIUsage("scalar '" + name + "': invalid dtype");
    return add(name, ref);
}

StateDict& StateDict::add_string(const std::string& name, std::string* value)
{
    if (!value)
        throw error::WrongAPIUsage("string '" + name + "': null pointer");
    return add(name, value);
}

StateDict& StateDict::add_stateful(const std::string& name, Stateful* object)
{
    if (!object)
        throw error::WrongAPIUsage("stateful '" + name + "': null pointer");
    return add(name, object);
}

StateDict& StateDict::add_dict(const std::string& name, StateDict dict)
{
    return add(name, std::make_shared<StateDict>(std::move(dict)));
}

bool StateDict::contains(const std::string& name) const noexcept { return m_index.count(name) != 0; }

} // namespace cairn
