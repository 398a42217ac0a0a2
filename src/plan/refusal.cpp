// Why the global plan refuses a set of plans: the checks of
// DefaultSavePlanner::create_global_plan, entry by entry in name order and
// rank by rank, so that the error names the first problem in that order
// whatever the columnar planner (columnar.cpp) stopped at.
#include "cairn/errors.hpp"
#include "cairn/planner.hpp"
#include "core/scalar_text.hpp"
#include "core/tiling.hpp"
#include "plan/columnar.hpp"

#include <map>
#include <string>

namespace cairn::detail {

namespace {

std::string rank_list(const std::vector<int>& ranks)
{
    std::string s;
    for (std::size_t i = 0; i < ranks.size() && i < 8; ++i)
        s += (i ? ", " : "") + std::to_string(ranks[i]);
    if (ranks.size() > 8)
        s += ", ... (" + std::to_string(ranks.size()) + " ranks)";
    return s;
}

// Where one item of the gathered plans sits.
struct Ref {
    int rank;
    std::size_t index;
};

using Refs = std::vector<Ref>;

// Every name with the items that list it (rank by rank, in name order);
// throws on a name listed twice by one rank but for an array's boxes.
std::map<std::string, Refs> items_by_name(const std::vector<SavePlan>& plans)
{
    std::map<std::string, Refs> by_name;
    for (std::size_t r = 0; r < plans.size(); ++r) {
        const auto& items = plans[r].items;
        for (std::size_t i = 0; i < items.size(); ++i) {
            auto& refs = by_name[items[i].fqn];
            if (!refs.empty() && refs.back().rank == static_cast<int>(r) &&
                (items[i].kind != ItemKind::array || items[refs.back().index].kind != ItemKind::array))
                throw error::WrongAPIUsage("entry '" + items[i].fqn + "' appears twice in the plan of rank " +
                                           std::to_string(r));
            refs.push_back(Ref{static_cast<int>(r), i});
        }
    }
    return by_name;
}

// Every rank lists the entry.
void check_held(const std::string& fqn, const Refs& refs, int nranks)
{
    std::vector<int> lacking;
    std::size_t k = 0;
    for (int r = 0; r < nranks; ++r) {
        if (k < refs.size() && refs[k].rank == r)
            while (k < refs.size() && refs[k].rank == r)
                ++k;
        else
            lacking.push_back(r);
    }
    if (!lacking.empty())
        throw error::Mismatch("entry '" + fqn + "' is missing on rank(s) " + rank_list(lacking) +
                              " but present on rank " + std::to_string(refs.front().rank) +
                              " (every rank must describe the same entries)");
}

// Item `it` of rank `rank` agrees with `first`, of rank `first_rank`.
void check_agrees(const std::string& fqn, const WriteItem& first, int first_rank, const WriteItem& it, int rank)
{
    const std::string where = " on rank " + std::to_string(first_rank) + " vs. ";
    const std::string there = " on rank " + std::to_string(rank);
    if (it.kind != first.kind)
        throw error::Mismatch("entry '" + fqn + "': " + item_kind_name(first.kind) + where + item_kind_name(it.kind) +
                              there);
    if ((it.kind == ItemKind::array || it.kind == ItemKind::scalar) && it.dtype != first.dtype)
        throw error::Mismatch(std::string(item_kind_name(it.kind)) + " '" + fqn + "': dtype " +
                              std::string(dtype_name(first.dtype)) + where + std::string(dtype_name(it.dtype)) + there);
    if (it.kind == ItemKind::array && it.global_shape != first.global_shape)
        throw error::Mismatch("array '" + fqn + "': global shape " + shape_str(first.global_shape) + where +
                              shape_str(it.global_shape) + there);
    if (it.kind == ItemKind::scalar && it.value != first.value)
        throw error::Mismatch(
            "scalar '" + fqn + "': " + scalar_text(first.dtype, first.value.data(), first.value.size()) + where +
            scalar_text(it.dtype, it.value.data(), it.value.size()) + there + " (scalars must agree)");
    if (it.kind == ItemKind::string && it.value != first.value)
        throw error::Mismatch("string '" + fqn + "': \"" + first.value + "\"" + where + "\"" + it.value + "\"" + there +
                              " (strings must agree)");
    if (it.kind == ItemKind::bytes && (it.nbytes != first.nbytes || it.digest != first.digest))
        throw error::Mismatch("bytes '" + fqn + "': " + std::to_string(first.nbytes) + " bytes" + where +
                              std::to_string(it.nbytes) + " bytes" + there + " with different content" +
                              " (byte blobs must agree)");
}

// The ranks' boxes of an array: each of the array's rank, none held twice by
// one rank, the distinct ones disjoint and covering the global shape.
void check_boxes(const std::string& fqn, const std::vector<SavePlan>& plans, const Refs& refs)
{
    const WriteItem& first = plans[static_cast<std::size_t>(refs.front().rank)].items[refs.front().index];
    const Shape& global = first.global_shape;
    std::map<Box, std::vector<int>> holders; // distinct non-empty boxes, sorted
    for (const auto& ref : refs) {
        const auto& b = plans[static_cast<std::size_t>(ref.rank)].items[ref.index].box;
        if (b.ndim() != global.size() || b.offsets.size() != global.size())
            throw error::WrongAPIUsage("array '" + fqn + "': box " + b.str() + " of rank " + std::to_string(ref.rank) +
                                       " does not match the rank of the global shape " + shape_str(global));
        if (b.empty())
            continue;
        auto& h = holders[b];
        if (!h.empty() && h.back() == ref.rank)
            throw error::WrongAPIUsage("array '" + fqn + "': rank " + std::to_string(ref.rank) + " holds box " +
                                       b.str() + " twice (the boxes a rank saves must be disjoint)");
        h.push_back(ref.rank);
    }
    if (!checked_bytes(global, dtype_size(first.dtype)))
        throw error::WrongAPIUsage("array '" + fqn + "': the global shape " + shape_str(global) +
                                   " has a negative extent or more bytes than a 64-bit size holds");
    std::vector<Box> boxes;
    for (const auto& [b, h] : holders)
        boxes.push_back(b);
    const auto p = check_tiling(global, boxes);
    const auto rank_of = [&](std::size_t i) { return std::to_string(holders.at(boxes[i]).front()); };
    switch (p.kind) {
    case TilingProblem::none:
        return;
    case TilingProblem::outside:
        throw error::WrongAPIUsage("array '" + fqn + "': box " + boxes[p.first].str() + " of rank " + rank_of(p.first) +
                                   " lies outside the global shape " + shape_str(global));
    case TilingProblem::overlap:
        if (global.empty())
            throw error::WrongAPIUsage("array '" + fqn + "': 0-d array with several distinct boxes");
        throw error::WrongAPIUsage("array '" + fqn + "': box " + boxes[p.first].str() + " of rank " +
                                   rank_of(p.first) + " overlaps box " + boxes[p.second].str() + " of rank " +
                                   rank_of(p.second) +
                                   " (saved boxes must be disjoint; replicas must have identical boxes)");
    case TilingProblem::coverage:
        throw error::WrongAPIUsage("array '" + fqn + "': the ranks' boxes cover " + std::to_string(p.covered) +
                                   " of " + std::to_string(p.total) + " elements of the global shape " +
                                   shape_str(global) + " (every element must be held by some rank)");
    }
}

} // namespace

void explain_refusal(const std::vector<SavePlan>& plans)
{
    const int nranks = static_cast<int>(plans.size());
    for (const auto& [fqn, refs] : items_by_name(plans)) {
        check_held(fqn, refs, nranks);
        const Ref& f = refs.front();
        const WriteItem& first = plans[static_cast<std::size_t>(f.rank)].items[f.index];
        for (const auto& ref : refs)
            check_agrees(fqn, first, f.rank, plans[static_cast<std::size_t>(ref.rank)].items[ref.index], ref.rank);
        if (first.kind == ItemKind::array)
            check_boxes(fqn, plans, refs);
        else if (first.kind == ItemKind::bytes && (first.box.ndim() != first.global_shape.size() ||
                                                   first.box.offsets.size() != first.global_shape.size()))
            throw error::WrongAPIUsage("bytes '" + fqn + "': box " + first.box.str() + " of rank " +
                                       std::to_string(f.rank) + " does not match the rank of its shape " +
                                       shape_str(first.global_shape));
    }
}

} // namespace cairn::detail
