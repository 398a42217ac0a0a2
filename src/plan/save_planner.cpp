#include "cairn/errors.hpp"
#include "cairn/planner.hpp"
#include "core/codec.hpp"
#include "core/strided.hpp"
#include "plan/columnar.hpp"
#include "plan/own_planners.hpp"
#include "stage/stage.hpp"

#include <algorithm>
#include <cstring>

namespace cairn {

const Entry& DefaultSavePlanner::lookup(const std::string& fqn) const
{
    auto it = m_index.find(fqn);
    if (it == m_index.end())
        throw error::WrongAPIUsage("save planner: the plan names '" + fqn + "', which is not in this rank's state");
    return *m_flat[it->second].entry;
}

void DefaultSavePlanner::set_up_planner(StateDict& state, bool is_coordinator)
{
    m_is_coordinator = is_coordinator;
    m_keep.clear();
    m_flat = flatten(state, m_keep);
    m_index.clear();
    m_shards.clear();
    m_by_box.clear();
    for (std::size_t i = 0; i < m_flat.size(); ++i) {
        m_index.emplace(m_flat[i].fqn, i);
        if (std::holds_alternative<ArrayShard>(*m_flat[i].entry))
            m_shards[m_flat[i].fqn].push_back(i);
    }
}

SavePlan DefaultSavePlanner::create_local_plan()
{
    SavePlan plan;
    plan.items.reserve(m_flat.size());
    for (const auto& fe : m_flat) {
        WriteItem it;
        it.fqn = fe.fqn;
        const Entry& e = *fe.entry;
        if (auto* a = std::get_if<ArrayShard>(&e)) {
            if (a->space != MemorySpace::host) {
                const std::string& why = detail::cuda_unavailable_reason();
                if (!why.empty())
                    throw error::WrongAPIUsage("array '" + fe.fqn + "' is in CUDA device memory, but " + why);
            }
            it.kind = ItemKind::array;
            it.dtype = a->dtype;
            it.global_shape = a->global_shape;
            it.box = a->box;
            it.nbytes = static_cast<std::uint64_t>(a->box.volume()) * dtype_size(a->dtype);
        } else if (auto* b = std::get_if<std::vector<std::byte>*>(&e)) {
            const auto n = static_cast<std::int64_t>((*b)->size());
            it.kind = ItemKind::bytes;
            it.dtype = DType::u8;
            it.global_shape = {n};
            it.box = whole(it.global_shape);
            it.nbytes = static_cast<std::uint64_t>(n);
            it.digest = detail::hash64((*b)->data(), (*b)->size());
        } else if (auto* s = std::get_if<ScalarRef>(&e)) {
            it.kind = ItemKind::scalar;
            it.dtype = s->dtype;
            it.value.assign(static_cast<const char*>(s->data), dtype_size(s->dtype));
        } else if (auto* str = std::get_if<std::string*>(&e)) {
            if ((*str)->find('\0') != std::string::npos)
                throw error::WrongAPIUsage("string '" + fe.fqn +
                                           "' contains a NUL byte; store binary data with add_bytes");
            it.kind = ItemKind::string;
            it.value = **str;
        }
        plan.items.push_back(std::move(it));
    }
    return plan;
}

std::pair<std::vector<SavePlan>, Metadata> DefaultSavePlanner::create_global_plan(std::vector<SavePlan> plans)
{
    return detail::global_plan(std::move(plans));
}

std::shared_ptr<detail::ColumnarSavePlan> detail::OwnSavePlanner::plan_columns(const std::vector<Bytes>& gathered)
{
    auto plan = std::make_shared<ColumnarSavePlan>();
    if (!plan->ingest(gathered) || !plan->plan())
        return nullptr;
    return plan;
}

DataRef DefaultSavePlanner::resolve_data(const WriteItem& item)
{
    const Entry* ep = &lookup(item.fqn);
    if (const auto shards = m_shards.find(item.fqn); shards != m_shards.end() && shards->second.size() > 1) {
        // Several boxes: the one that is the item's box (the default global
        // plan's items are), else one holding it.
        auto& by_box = m_by_box[item.fqn];
        if (by_box.empty())
            for (const auto i : shards->second)
                by_box.emplace(std::get<ArrayShard>(*m_flat[i].entry).box, i);
        const ArrayShard* inside = nullptr;
        if (const auto exact = by_box.find(item.box); exact != by_box.end())
            return DataRef{std::get<ArrayShard>(*m_flat[exact->second].entry).view(),
                           std::get<ArrayShard>(*m_flat[exact->second].entry).space};
        for (const auto i : shards->second) {
            const auto& a = std::get<ArrayShard>(*m_flat[i].entry);
            if (a.box == item.box) {
                inside = &a;
                break;
            }
            const auto common = intersect(item.box, a.box);
            if (!inside && common && common->volume() == item.box.volume() && !item.box.empty())
                inside = &a;
        }
        if (!inside)
            throw error::WrongAPIUsage("array '" + item.fqn + "': planned chunk " + item.box.str() +
                                       " is not inside any of this rank's " + std::to_string(shards->second.size()) +
                                       " boxes");
        for (const auto i : shards->second)
            if (&std::get<ArrayShard>(*m_flat[i].entry) == inside)
                ep = m_flat[i].entry;
    }
    const Entry& e = *ep;
    if (auto* a = std::get_if<ArrayShard>(&e)) {
        auto view = a->view();
        if (item.box != a->box) {
            if (!intersect(item.box, a->box) || intersect(item.box, a->box)->volume() != item.box.volume())
                throw error::WrongAPIUsage("array '" + item.fqn + "': planned chunk " + item.box.str() +
                                           " is not inside this rank's box " + a->box.str());
            view = detail::subview(view, a->box, item.box);
        }
        return DataRef{view, a->space};
    }
    if (auto* b = std::get_if<std::vector<std::byte>*>(&e)) {
        auto* blob = *b;
        return DataRef{StridedView{blob->data(), 1, {static_cast<std::int64_t>(blob->size())}, {1}}, MemorySpace::host};
    }
    throw error::WrongAPIUsage("entry '" + item.fqn + "' holds no data to write");
}

const char* item_kind_name(ItemKind kind) noexcept
{
    switch (kind) {
    case ItemKind::array: return "array";
    case ItemKind::bytes: return "bytes";
    case ItemKind::scalar: return "scalar";
    case ItemKind::string: return "string";
    }
    return "unknown";
}

} // namespace cairn
