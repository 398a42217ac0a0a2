#include "core/tiling.hpp"

#include <algorithm>
#include <numeric>
#include <unordered_set>

namespace cairn::detail {

std::optional<std::int64_t> checked_bytes(const Shape& shape, std::uint64_t elem_size) noexcept
{
    if (elem_size > static_cast<std::uint64_t>(INT64_MAX))
        return std::nullopt;
    std::int64_t v = static_cast<std::int64_t>(elem_size);
    for (auto s : shape) {
        if (s < 0 || __builtin_mul_overflow(v, s, &v))
            return std::nullopt;
    }
    return v;
}

bool overlaps(const Box& a, const Box& b) noexcept
{
    const std::size_t n = a.shape.size();
    if (b.shape.size() != n || a.offsets.size() != n || b.offsets.size() != n)
        return false;
    for (std::size_t d = 0; d < n; ++d) {
        // [a0, a0+as) and [b0, b0+bs) meet iff a0 < b0+bs and b0 < a0+as;
        // compared as differences so that nothing overflows (extents >= 0
        // and offsets >= 0 in boxes that passed inside()).
        if (a.shape[d] <= 0 || b.shape[d] <= 0)
            return false;
        if (a.offsets[d] <= b.offsets[d] ? b.offsets[d] - a.offsets[d] >= a.shape[d]
                                         : a.offsets[d] - b.offsets[d] >= b.shape[d])
            return false;
    }
    return true;
}

TilingProblem check_tiling(const Shape& global, const std::vector<Box>& boxes)
{
    TilingProblem p;
    const std::size_t nd = global.size();
    std::vector<std::size_t> order;
    order.reserve(boxes.size());
    std::int64_t covered = 0;
    for (std::size_t i = 0; i < boxes.size(); ++i) {
        if (!boxes[i].inside(global)) {
            p.kind = TilingProblem::outside;
            p.first = i;
            return p;
        }
        const auto v = boxes[i].volume(); // inside a global shape whose volume fits: no overflow
        if (v <= 0)
            continue;
        covered += v;
        order.push_back(i);
    }
    if (nd == 0) {
        if (order.size() > 1) {
            p.kind = TilingProblem::overlap;
            p.first = order[0];
            p.second = order[1];
            return p;
        }
    } else {
        // The sweep dimension: the one along which the boxes are cut most.
        std::size_t dim = 0, best = 0;
        for (std::size_t d = 0; d < nd && best < order.size(); ++d) {
            std::unordered_set<std::int64_t> cuts;
            for (auto i : order)
                cuts.insert(boxes[i].offsets[d]);
            if (cuts.size() > best) {
                best = cuts.size();
                dim = d;
            }
        }
        std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
            return boxes[a].offsets[dim] != boxes[b].offsets[dim] ? boxes[a].offsets[dim] < boxes[b].offsets[dim]
                                                                  : a < b;
        });
        std::vector<std::size_t> open;
        for (auto i : order) {
            const Box& b = boxes[i];
            open.erase(std::remove_if(open.begin(), open.end(),
                                      [&](std::size_t o) {
                                          return b.offsets[dim] - boxes[o].offsets[dim] >= boxes[o].shape[dim];
                                      }),
                       open.end());
            for (auto o : open)
                if (overlaps(boxes[o], b)) {
                    p.kind = TilingProblem::overlap;
                    p.first = std::min(o, i);
                    p.second = std::max(o, i);
                    return p;
                }
            open.push_back(i);
        }
    }
    // Disjoint boxes inside the global shape: they cover it iff their volumes add up.
    const auto total = volume(global);
    if (covered != total) {
        p.kind = TilingProblem::coverage;
        p.covered = covered;
        p.total = total;
    }
    return p;
}

} // namespace cairn::detail
