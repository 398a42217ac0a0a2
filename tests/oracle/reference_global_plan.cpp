// The reference global plan of DefaultSavePlanner, a test oracle: entry by
// entry in name order, rank by rank, written for clarity rather than speed.
// test_global_plan.cpp and the decode_plans fuzz target check Cairn's
// planner (DefaultSavePlanner::create_global_plan and the coordinator's
// planning on encoded plans, src/plan/columnar.hpp) against it: the same
// final plans and metadata, or the same error. A blob's box must have the
// rank of its shape (the metadata has no place for another).
#include "reference_global_plan.hpp"

#include "cairn/checkpoint.hpp"
#include "cairn/errors.hpp"
#include "cairn/planner.hpp"
#include "core/scalar_text.hpp"
#include "core/tiling.hpp"

#include <algorithm>
#include <map>
#include <string>

using namespace cairn;

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

// Checks that the distinct boxes of an array are disjoint and cover it.
void check_boxes(const std::string& fqn, const Shape& global, std::size_t elem_size, const std::vector<Box>& boxes,
                 const std::map<Box, std::vector<int>>& holders)
{
    if (!cairn::detail::checked_bytes(global, elem_size))
        throw error::WrongAPIUsage("array '" + fqn + "': the global shape " + shape_str(global) +
                                   " has a negative extent or more bytes than a 64-bit size holds");
    const auto p = cairn::detail::check_tiling(global, boxes);
    const auto rank_of = [&](std::size_t i) { return std::to_string(holders.at(boxes[i]).front()); };
    switch (p.kind) {
    case cairn::detail::TilingProblem::none:
        return;
    case cairn::detail::TilingProblem::outside:
        throw error::WrongAPIUsage("array '" + fqn + "': box " + boxes[p.first].str() + " of rank " + rank_of(p.first) +
                                   " lies outside the global shape " + shape_str(global));
    case cairn::detail::TilingProblem::overlap:
        if (global.empty())
            throw error::WrongAPIUsage("array '" + fqn + "': 0-d array with several distinct boxes");
        throw error::WrongAPIUsage("array '" + fqn + "': box " + boxes[p.first].str() + " of rank " +
                                   rank_of(p.first) + " overlaps box " + boxes[p.second].str() + " of rank " +
                                   rank_of(p.second) +
                                   " (saved boxes must be disjoint; replicas must have identical boxes)");
    case cairn::detail::TilingProblem::coverage:
        throw error::WrongAPIUsage("array '" + fqn + "': the ranks' boxes cover " + std::to_string(p.covered) +
                                   " of " + std::to_string(p.total) + " elements of the global shape " +
                                   shape_str(global) + " (every element must be held by some rank)");
    }
}


} // namespace

namespace cairn_test {

std::pair<std::vector<SavePlan>, Metadata> reference_global_plan(std::vector<SavePlan> plans)
{
    const int nranks = static_cast<int>(plans.size());
    // Every FQN with the ranks that hold it, in name order.
    // An array may have several items (boxes) per rank; other entries one.
    std::map<std::string, std::vector<Ref>> by_name;
    for (int r = 0; r < nranks; ++r) {
        const auto& items = plans[static_cast<std::size_t>(r)].items;
        for (std::size_t i = 0; i < items.size(); ++i) {
            auto& refs = by_name[items[i].fqn];
            if (!refs.empty() && refs.back().rank == r &&
                (items[i].kind != ItemKind::array || items[refs.back().index].kind != ItemKind::array))
                throw error::WrongAPIUsage("entry '" + items[i].fqn + "' appears twice in the plan of rank " +
                                           std::to_string(r));
            refs.push_back(Ref{r, i});
        }
    }

    Metadata md;
    md.world_size = nranks;
    md.library_version = version();
    std::vector<std::uint64_t> load(static_cast<std::size_t>(nranks), 0); // bytes assigned per rank
    std::vector<std::vector<WriteItem>> out(static_cast<std::size_t>(nranks));
    // Replicated items, placed after everything else by decreasing size.
    struct Replica {
        WriteItem item;
        std::vector<int> holders;
    };
    std::vector<Replica> replicas;

    auto item_at = [&](const Ref& ref) -> const WriteItem& {
        return plans[static_cast<std::size_t>(ref.rank)].items[ref.index];
    };

    for (auto& [fqn, refs] : by_name) {
        std::size_t holding = 0; // ranks that have the entry
        for (std::size_t k = 0; k < refs.size(); ++k)
            holding += k == 0 || refs[k].rank != refs[k - 1].rank;
        if (static_cast<int>(holding) != nranks) {
            std::vector<int> lacking;
            std::size_t k = 0;
            for (int r = 0; r < nranks; ++r) {
                if (k < refs.size() && refs[k].rank == r)
                    while (k < refs.size() && refs[k].rank == r)
                        ++k;
                else
                    lacking.push_back(r);
            }
            throw error::Mismatch("entry '" + fqn + "' is missing on rank(s) " + rank_list(lacking) +
                                  " but present on rank " + std::to_string(refs.front().rank) +
                                  " (every rank must describe the same entries)");
        }
        const WriteItem& first = item_at(refs.front());
        for (const auto& ref : refs) {
            const WriteItem& it = item_at(ref);
            const std::string where = " on rank " + std::to_string(refs.front().rank) + " vs. ";
            const std::string there = " on rank " + std::to_string(ref.rank);
            if (it.kind != first.kind)
                throw error::Mismatch("entry '" + fqn + "': " + cairn::item_kind_name(first.kind) + where +
                                      cairn::item_kind_name(it.kind) + there);
            if ((it.kind == ItemKind::array || it.kind == ItemKind::scalar) && it.dtype != first.dtype)
                throw error::Mismatch(std::string(cairn::item_kind_name(it.kind)) + " '" + fqn + "': dtype " +
                                      std::string(dtype_name(first.dtype)) + where + std::string(dtype_name(it.dtype)) +
                                      there);
            if (it.kind == ItemKind::array && it.global_shape != first.global_shape)
                throw error::Mismatch("array '" + fqn + "': global shape " + shape_str(first.global_shape) + where +
                                      shape_str(it.global_shape) + there);
            if (it.kind == ItemKind::scalar && it.value != first.value)
                throw error::Mismatch("scalar '" + fqn + "': " + detail::scalar_text(first.dtype, first.value.data(), first.value.size()) + where +
                                      detail::scalar_text(it.dtype, it.value.data(), it.value.size()) + there + " (scalars must agree)");
            if (it.kind == ItemKind::string && it.value != first.value)
                throw error::Mismatch("string '" + fqn + "': \"" + first.value + "\"" + where + "\"" + it.value + "\"" +
                                      there + " (strings must agree)");
            if (it.kind == ItemKind::bytes && (it.nbytes != first.nbytes || it.digest != first.digest))
                throw error::Mismatch("bytes '" + fqn + "': " + std::to_string(first.nbytes) + " bytes" + where +
                                      std::to_string(it.nbytes) + " bytes" + there + " with different content" +
                                      " (byte blobs must agree)");
        }

        EntryMeta em;
        em.kind = first.kind;
        em.dtype = first.dtype;
        switch (first.kind) {
        case ItemKind::scalar:
        case ItemKind::string: em.value = first.value; break;
        case ItemKind::bytes: {
            if (first.box.ndim() != first.global_shape.size() || first.box.offsets.size() != first.global_shape.size())
                throw error::WrongAPIUsage("bytes '" + fqn + "': box " + first.box.str() + " of rank " +
                                           std::to_string(refs.front().rank) + " does not match the rank of its shape " +
                                           shape_str(first.global_shape));
            em.global_shape = first.global_shape;
            em.chunks.push_back(ChunkMeta{first.box, {}});
            std::vector<int> holders;
            for (const auto& ref : refs)
                holders.push_back(ref.rank);
            WriteItem w = first;
            w.chunk = 0;
            replicas.push_back(Replica{std::move(w), std::move(holders)});
            break;
        }
        case ItemKind::array: {
            em.global_shape = first.global_shape;
            std::map<Box, std::vector<int>> holders; // distinct boxes, sorted
            for (const auto& ref : refs) {
                const auto& b = item_at(ref).box;
                if (b.ndim() != em.global_shape.size() || b.offsets.size() != em.global_shape.size())
                    throw error::WrongAPIUsage("array '" + fqn + "': box " + b.str() + " of rank " +
                                               std::to_string(ref.rank) + " does not match the rank of the global shape " +
                                               shape_str(em.global_shape));
                if (b.empty())
                    continue;
                auto& h = holders[b];
                if (!h.empty() && h.back() == ref.rank)
                    throw error::WrongAPIUsage("array '" + fqn + "': rank " + std::to_string(ref.rank) +
                                               " holds box " + b.str() +
                                               " twice (the boxes a rank saves must be disjoint)");
                h.push_back(ref.rank);
            }
            std::vector<Box> boxes;
            for (const auto& [b, h] : holders)
                boxes.push_back(b);
            check_boxes(fqn, em.global_shape, dtype_size(first.dtype), boxes, holders);
            for (auto& [b, h] : holders) {
                WriteItem w = first;
                w.box = b;
                w.nbytes = static_cast<std::uint64_t>(b.volume()) * dtype_size(first.dtype);
                w.chunk = static_cast<std::uint32_t>(em.chunks.size());
                em.chunks.push_back(ChunkMeta{b, {}});
                if (h.size() == 1) {
                    load[static_cast<std::size_t>(h.front())] += w.nbytes;
                    out[static_cast<std::size_t>(h.front())].push_back(std::move(w));
                } else {
                    replicas.push_back(Replica{std::move(w), h});
                }
            }
            break;
        }
        }
        md.entries.emplace(fqn, std::move(em));
    }

    // Each replicated item goes to its holder with the fewest bytes so far,
    // largest items first (greedy balancing).
    std::stable_sort(replicas.begin(), replicas.end(),
                     [](const Replica& a, const Replica& b) { return a.item.nbytes > b.item.nbytes; });
    for (auto& rep : replicas) {
        int best = rep.holders.front();
        for (int h : rep.holders)
            if (load[static_cast<std::size_t>(h)] < load[static_cast<std::size_t>(best)])
                best = h;
        load[static_cast<std::size_t>(best)] += rep.item.nbytes;
        out[static_cast<std::size_t>(best)].push_back(std::move(rep.item));
    }

    for (int r = 0; r < nranks; ++r)
        plans[static_cast<std::size_t>(r)].items = std::move(out[static_cast<std::size_t>(r)]);
    return {std::move(plans), std::move(md)};
}


} // namespace cairn_test
