#include "cairn/errors.hpp"
#include "cairn/planner.hpp"
#include "core/strided.hpp"
#include "core/tiling.hpp"
#include "plan/own_planners.hpp"
#include "stage/stage.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <string_view>

namespace cairn {

const Entry& DefaultLoadPlanner::lookup(const std::string& fqn) const
{
    auto it = m_index.find(fqn);
    if (it == m_index.end())
        throw error::WrongAPIUsage("load planner: the plan names '" + fqn + "', which is not in this rank's state");
    return *m_flat[it->second].entry;
}

void DefaultLoadPlanner::set_up_planner(StateDict& state, const Metadata& metadata, bool)
{
    m_metadata = &metadata;
    m_keep.clear();
    m_missing.clear();
    m_skipped.clear();
    m_flat = flatten(state, m_keep);
    m_index.clear();
    m_shards.clear();
    m_bounds.clear();
    for (std::size_t i = 0; i < m_flat.size(); ++i) {
        m_index.emplace(m_flat[i].fqn, i);
        if (std::holds_alternative<ArrayShard>(*m_flat[i].entry))
            m_shards[m_flat[i].fqn].push_back(i);
    }
    // Arrays of several boxes: the box that holds them all filters the chunks.
    for (const auto& [fqn, idx] : m_shards) {
        if (idx.size() < 2)
            continue;
        std::optional<Box> bound;
        for (const auto i : idx) {
            const Box& b = std::get<ArrayShard>(*m_flat[i].entry).box;
            if (b.empty())
                continue;
            if (!bound) {
                bound = b;
                continue;
            }
            for (std::size_t d = 0; d < b.ndim(); ++d) {
                const auto lo = std::min(bound->offsets[d], b.offsets[d]);
                const auto hi = std::max(bound->offsets[d] + bound->shape[d], b.offsets[d] + b.shape[d]);
                bound->offsets[d] = lo;
                bound->shape[d] = hi - lo;
            }
        }
        if (bound)
            m_bounds.emplace(fqn, *bound);
    }
}

const Box* DefaultLoadPlanner::requested_box(const std::string& fqn) const
{
    if (const auto b = m_bounds.find(fqn); b != m_bounds.end())
        return &b->second;
    const auto it = m_index.find(fqn);
    if (it == m_index.end())
        return nullptr;
    const auto* a = std::get_if<ArrayShard>(m_flat[it->second].entry);
    return a ? &a->box : nullptr;
}

detail::WantedBox detail::OwnLoadPlanner::set_up_before_metadata(StateDict& state, const Metadata& metadata,
                                                               bool is_coordinator)
{
    set_up_planner(state, metadata, is_coordinator); // flattens the state; reads `metadata` later
    return [this](const std::string& fqn) { return requested_box(fqn); };
}

namespace {
ItemKind kind_of(const Entry& e)
{
    if (std::holds_alternative<ArrayShard>(e))
        return ItemKind::array;
    if (std::holds_alternative<std::vector<std::byte>*>(e))
        return ItemKind::bytes;
    if (std::holds_alternative<ScalarRef>(e))
        return ItemKind::scalar;
    return ItemKind::string;
}
} // namespace

namespace {

// Edit distance of two keys, up to `limit` + 1 (misspellings are close).
std::size_t edit_distance(const std::string& a, const std::string& b, std::size_t limit)
{
    if ((a.size() > b.size() ? a.size() - b.size() : b.size() - a.size()) > limit)
        return limit + 1;
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j)
        row[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diag = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t up = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diag = up;
        }
    }
    return row[b.size()];
}

} // namespace

// "; did you mean 'x'?" when a checkpoint key is within two edits of `key`, else "".
std::string DefaultLoadPlanner::closest_key(const std::string& key, const Metadata& md)
{
    std::size_t best = 3;
    const std::string* name = nullptr;
    for (const auto& kv : md.entries) {
        const std::size_t d = edit_distance(key, kv.first, 2);
        if (d < best) {
            best = d;
            name = &kv.first;
        }
    }
    return name ? "; did you mean '" + *name + "'?" : "";
}

// Whether state key `fqn` may be absent from the checkpoint.
bool DefaultLoadPlanner::may_be_missing(const std::string& fqn) const
{
    return detail::may_be_missing(fqn, m_partial, m_may_be_missing);
}

bool detail::may_be_missing(const std::string& key, bool partial, const std::vector<std::string>& may_be_missing)
{
    if (may_be_missing.empty())
        return partial;
    for (const auto& k : may_be_missing)
        if (k == key || (!k.empty() && k.back() == '.' && key.compare(0, k.size(), k) == 0))
            return true;
    return false;
}

namespace {

// The non-empty chunks of an array sorted by their offset in the first
// dimension, and the longest extent there: the chunks that meet rows
// [lo, hi) start in [lo - longest + 1, hi).
struct ChunkOrder {
    std::vector<std::int64_t> starts;
    std::vector<std::size_t> chunks;
    std::int64_t longest = 0;
};

const ChunkOrder& chunk_order(std::map<std::string_view, ChunkOrder>& orders, const std::string& fqn,
                              const EntryMeta& em)
{
    auto [it, fresh] = orders.try_emplace(fqn);
    if (!fresh)
        return it->second;
    std::vector<std::pair<std::int64_t, std::size_t>> sorted;
    for (std::size_t c = 0; c < em.chunks.size(); ++c) {
        const Box& b = em.chunks[c].box;
        if (b.ndim() != em.global_shape.size() || b.ndim() == 0 || b.empty())
            continue; // no element to read (a malformed chunk: coverage reports it)
        sorted.emplace_back(b.offsets[0], c);
        it->second.longest = std::max(it->second.longest, b.shape[0]);
    }
    std::sort(sorted.begin(), sorted.end());
    for (const auto& [start, c] : sorted) {
        it->second.starts.push_back(start);
        it->second.chunks.push_back(c);
    }
    return it->second;
}


// The chunks of `em` that `box` overlaps, in stored order, among those whose
// first dimension meets the box's (`order`: chunk_order()).
std::vector<std::size_t> chunks_meeting(const ChunkOrder& order, const Box& box, const EntryMeta& em)
{
    const std::int64_t lo = box.offsets[0], hi = lo + box.shape[0];
    auto first = std::lower_bound(order.starts.begin(), order.starts.end(), lo - order.longest + 1);
    auto last = std::lower_bound(order.starts.begin(), order.starts.end(), hi);
    std::vector<std::size_t> hits;
    for (auto it = first; it != last; ++it) {
        const std::size_t c = order.chunks[static_cast<std::size_t>(it - order.starts.begin())];
        if (detail::overlaps(box, em.chunks[c].box))
            hits.push_back(c);
    }
    std::sort(hits.begin(), hits.end()); // stored order
    return hits;
}

// Throws error::Mismatch (dtype, global shape) or error::WrongAPIUsage (device
// memory without CUDA) where array `fqn` of the state cannot take `em`.
void check_array_matches(const std::string& fqn, const ArrayShard& a, const EntryMeta& em)
{
    if (a.dtype != em.dtype)
        throw error::Mismatch("array '" + fqn + "': dtype " + std::string(dtype_name(a.dtype)) +
                              " in the state vs. " + std::string(dtype_name(em.dtype)) + " in the checkpoint");
    if (a.global_shape != em.global_shape)
        throw error::Mismatch("array '" + fqn + "': global shape " + shape_str(a.global_shape) +
                              " in the state vs. " + shape_str(em.global_shape) + " in the checkpoint");
    if (a.space != MemorySpace::host) {
        const std::string& why = detail::cuda_unavailable_reason();
        if (!why.empty())
            throw error::WrongAPIUsage("array '" + fqn + "' is in CUDA device memory, but " + why);
    }
}

// Throws error::Mismatch (dtype) or error::FormatError (a stored value of
// the wrong size) where scalar `fqn` of the state cannot take `em`.
void check_scalar_matches(const std::string& fqn, const ScalarRef& s, const EntryMeta& em)
{
    if (s.dtype != em.dtype)
        throw error::Mismatch("scalar '" + fqn + "': dtype " + std::string(dtype_name(s.dtype)) +
                              " in the state vs. " + std::string(dtype_name(em.dtype)) + " in the checkpoint");
    if (em.value.size() != dtype_size(em.dtype))
        throw error::FormatError("scalar '" + fqn + "': stored value has " + std::to_string(em.value.size()) +
                                 " bytes, dtype " + std::string(dtype_name(em.dtype)) + " needs " +
                                 std::to_string(dtype_size(em.dtype)));
}

} // namespace

LoadPlan DefaultLoadPlanner::create_local_plan()
{
    LoadPlan plan;
    const auto& md = *m_metadata;
    std::map<std::string_view, std::uint32_t> next_shard; // arrays of several boxes: the box number
    std::map<std::string_view, ChunkOrder> chunk_orders;  // arrays of several boxes: their chunks by first offset
    for (const auto& fe : m_flat) {
        auto found = md.entries.find(fe.fqn);
        if (found == md.entries.end()) {
            if (may_be_missing(fe.fqn)) {
                const auto shards = m_shards.find(fe.fqn); // an array of several boxes: listed once
                if (shards == m_shards.end() ||
                    shards->second.front() == static_cast<std::size_t>(&fe - m_flat.data()))
                    m_missing.push_back(fe.fqn);
                continue;
            }
            throw error::NotFound("entry '" + fe.fqn + "' is not in the checkpoint (it holds " +
                                  std::to_string(md.entries.size()) + " entries)" +
                                  (m_partial ? ", nor among the keys that may be missing"
                                             : "; pass partial, or name it in may_be_missing, to load the rest") +
                                  closest_key(fe.fqn, md));
        }
        const EntryMeta& em = found->second;
        const ItemKind want = kind_of(*fe.entry);
        if (want != em.kind)
            throw error::Mismatch("entry '" + fe.fqn + "': " + item_kind_name(want) + " in the state vs. " +
                                  item_kind_name(em.kind) + " in the checkpoint");
        if (auto* a = std::get_if<ArrayShard>(fe.entry)) {
            check_array_matches(fe.fqn, *a, em);
            const bool several = m_shards.at(fe.fqn).size() > 1;
            const std::uint32_t shard = several ? next_shard[fe.fqn]++ : 0;
            std::int64_t covered = 0;
            const auto read_chunk = [&](std::size_t c) {
                if (auto overlap = intersect(a->box, em.chunks[c].box)) {
                    covered += overlap->volume();
                    plan.items.push_back(
                        ReadItem{fe.fqn, ItemKind::array, static_cast<std::uint32_t>(c), *overlap, shard});
                }
            };
            if (several && !a->box.empty() && a->box.ndim() > 0 && em.chunks.size() > 16) {
                // Many boxes against many chunks: only the chunks whose first
                // dimension meets the box's (chunks sorted by it once per array).
                for (const auto c : chunks_meeting(chunk_order(chunk_orders, fe.fqn, em), a->box, em))
                    read_chunk(c);
            } else {
                for (std::size_t c = 0; c < em.chunks.size(); ++c)
                    read_chunk(c);
            }
            if (covered != a->box.volume())
                throw error::FormatError("array '" + fe.fqn + "': the checkpoint's chunks cover " +
                                         std::to_string(covered) + " of the " + std::to_string(a->box.volume()) +
                                         " elements of box " + a->box.str() + " (corrupt metadata?)");
        } else if (std::holds_alternative<std::vector<std::byte>*>(*fe.entry)) {
            if (em.chunks.size() != 1)
                throw error::FormatError("bytes '" + fe.fqn + "': " + std::to_string(em.chunks.size()) +
                                         " chunks in the metadata (expected 1)");
            plan.items.push_back(ReadItem{fe.fqn, ItemKind::bytes, 0, em.chunks[0].box});
        } else if (auto* s = std::get_if<ScalarRef>(fe.entry)) {
            check_scalar_matches(fe.fqn, *s, em);
        }
    }
    for (const auto& [fqn, em] : md.entries) {
        if (m_index.count(fqn))
            continue;
        if (!m_partial)
            throw error::NotFound("checkpoint entry '" + fqn + "' (" + item_kind_name(em.kind) +
                                  ") is not in the state dict (pass partial to skip it)");
        m_skipped.push_back(fqn);
    }
    return plan;
}

DataRef DefaultLoadPlanner::resolve_destination(const ReadItem& item)
{
    const auto* a = std::get_if<ArrayShard>(&lookup(item.fqn));
    if (!a)
        throw error::WrongAPIUsage("load planner: '" + item.fqn + "' is not an array in this rank's state");
    if (item.shard != 0) {
        const auto& idx = m_shards.at(item.fqn);
        if (item.shard >= idx.size())
            throw error::WrongAPIUsage("load planner: a read item of array '" + item.fqn + "' names its box " +
                                       std::to_string(item.shard) + ", but this rank holds " +
                                       std::to_string(idx.size()) + " boxes of it");
        a = &std::get<ArrayShard>(*m_flat[idx[item.shard]].entry);
    }
    const auto common = intersect(item.box, a->box);
    if (!item.box.empty() && (!common || common->volume() != item.box.volume()))
        throw error::WrongAPIUsage("load planner: read item " + item.box.str() + " of array '" + item.fqn +
                                   "' is not inside this rank's box " + a->box.str());
    return DataRef{detail::subview(a->view(), a->box, item.box), a->space};
}

void DefaultLoadPlanner::load_bytes(const ReadItem& item, std::vector<std::byte> data)
{
    auto* const* b = std::get_if<std::vector<std::byte>*>(&lookup(item.fqn));
    if (!b)
        throw error::WrongAPIUsage("load planner: '" + item.fqn + "' is not a bytes entry in this rank's state");
    **b = std::move(data);
}

void DefaultLoadPlanner::finish()
{
    for (const auto& fe : m_flat) {
        auto found = m_metadata->entries.find(fe.fqn);
        if (found == m_metadata->entries.end())
            continue;
        if (auto* s = std::get_if<ScalarRef>(fe.entry))
            std::memcpy(s->data, found->second.value.data(), dtype_size(s->dtype));
        else if (auto* str = std::get_if<std::string*>(fe.entry))
            **str = found->second.value;
    }
    // Inner objects first: an outer Stateful may rely on its members' state.
    for (auto it = m_keep.rbegin(); it != m_keep.rend(); ++it)
        it->first->load_state_dict(*it->second);
}

} // namespace cairn
