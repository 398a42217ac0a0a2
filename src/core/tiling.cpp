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
    return overlaps(a.offsets.data(), a.shape.data(), b.offsets.data(), b.shape.data(), n);
}

bool inside(const std::int64_t* offsets, const std::int64_t* extents, const std::int64_t* global_shape,
            std::size_t nd) noexcept
{
    for (std::size_t d = 0; d < nd; ++d)
        if (offsets[d] < 0 || extents[d] < 0 || offsets[d] > global_shape[d] ||
            extents[d] > global_shape[d] - offsets[d])
            return false;
    return true;
}

bool overlaps(const std::int64_t* a_offsets, const std::int64_t* a_extents, const std::int64_t* b_offsets,
              const std::int64_t* b_extents, std::size_t nd) noexcept
{
    for (std::size_t d = 0; d < nd; ++d) {
        // [a0, a0+as) and [b0, b0+bs) meet iff a0 < b0+bs and b0 < a0+as;
        // compared as differences so that nothing overflows (extents >= 0
        // and offsets >= 0 in boxes that passed inside()).
        if (a_extents[d] <= 0 || b_extents[d] <= 0)
            return false;
        if (a_offsets[d] <= b_offsets[d] ? b_offsets[d] - a_offsets[d] >= a_extents[d]
                                         : a_offsets[d] - b_offsets[d] >= b_extents[d])
            return false;
    }
    return true;
}

namespace {

// The boxes seen through an accessor: off(i) and ext(i) point at the nd
// offsets and extents of box i (std::vector<Box> or flat coordinates).
struct VecBoxes {
    const std::vector<Box>& b;
    std::size_t size() const noexcept { return b.size(); }
    const std::int64_t* off(std::size_t i) const noexcept { return b[i].offsets.data(); }
    const std::int64_t* ext(std::size_t i) const noexcept { return b[i].shape.data(); }
    bool inside(std::size_t i, const Shape& g) const noexcept { return b[i].inside(g); }
    std::int64_t volume(std::size_t i) const noexcept { return b[i].volume(); }
};

struct FlatBoxes {
    const std::int64_t* c;
    std::size_t n, nd;
    std::size_t size() const noexcept { return n; }
    const std::int64_t* off(std::size_t i) const noexcept { return c + i * 2 * nd; }
    const std::int64_t* ext(std::size_t i) const noexcept { return c + i * 2 * nd + nd; }
    // As Box::inside() and Box::volume() (the box has nd = global.size() dimensions).
    bool inside(std::size_t i, const Shape& g) const noexcept
    {
        const auto *o = off(i), *s = ext(i);
        for (std::size_t d = 0; d < nd; ++d)
            if (o[d] < 0 || s[d] < 0 || o[d] > g[d] || s[d] > g[d] - o[d])
                return false;
        return true;
    }
    std::int64_t volume(std::size_t i) const noexcept { return volume_of(ext(i), nd); }
};

// True when every box matches one cell of a grid (the distinct offsets
// along each dimension are the cuts) and every cell is held exactly once:
// then the boxes lie inside `global`, are disjoint and cover it. False says
// nothing (the sweep decides). O(n * nd * log n).
template <class B>
bool grid_tiling(const Shape& global, const B& boxes)
{
    const std::size_t nd = global.size(), n = boxes.size();
    if (nd == 0 || n == 0)
        return false;
    std::vector<std::vector<std::int64_t>> cuts(nd);
    // Dimensions along which the boxes come in non-decreasing offset order
    // (the usual rank order of a split): a box's cut is then found by a
    // cursor that only moves forward, instead of a binary search.
    std::vector<char> in_order(nd, 1);
    std::uint64_t cells = 1;
    for (std::size_t d = 0; d < nd; ++d) {
        auto& c = cuts[d];
        c.reserve(n);
        std::int64_t prev = 0;
        bool sorted = true;
        for (std::size_t i = 0; i < n; ++i) {
            const auto o = boxes.off(i)[d];
            if (i == 0 || o != prev) { // a first offset of -1 is a cut too (then not at 0: refused below)
                sorted = sorted && (i == 0 || o > prev);
                c.push_back(o);
                prev = o;
            }
        }
        in_order[d] = sorted;
        if (!sorted) {
            std::sort(c.begin(), c.end());
            c.erase(std::unique(c.begin(), c.end()), c.end());
        }
        if (c.front() != 0 || c.back() >= global[d])
            return false;
        cells *= c.size(); // <= n: no overflow before the check below
        if (cells > n)
            return false;
    }
    if (cells != n)
        return false;
    std::vector<bool> seen(n, false);
    std::vector<std::size_t> cursor(nd, 0);
    for (std::size_t i = 0; i < n; ++i) {
        std::uint64_t cell = 0;
        for (std::size_t d = 0; d < nd; ++d) {
            const auto& c = cuts[d];
            const auto o = boxes.off(i)[d];
            std::size_t k;
            if (in_order[d]) { // o is a cut at or after the previous box's
                k = cursor[d];
                while (c[k] < o)
                    ++k;
                cursor[d] = k;
            } else {
                k = static_cast<std::size_t>(std::lower_bound(c.begin(), c.end(), o) - c.begin());
            }
            const std::int64_t end = k + 1 < c.size() ? c[k + 1] : global[d];
            if (boxes.ext(i)[d] != end - o)
                return false;
            cell = cell * c.size() + k;
        }
        if (seen[cell])
            return false;
        seen[cell] = true;
    }
    return true;
}

template <class B>
TilingProblem check_tiling_impl(const Shape& global, const B& boxes)
{
    TilingProblem p;
    const std::size_t nd = global.size();
    if (grid_tiling(global, boxes))
        return p;
    std::vector<std::size_t> order;
    order.reserve(boxes.size());
    std::int64_t covered = 0;
    for (std::size_t i = 0; i < boxes.size(); ++i) {
        if (!boxes.inside(i, global)) {
            p.kind = TilingProblem::outside;
            p.first = i;
            return p;
        }
        const auto v = boxes.volume(i); // inside a global shape whose volume fits: no overflow
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
                cuts.insert(boxes.off(i)[d]);
            if (cuts.size() > best) {
                best = cuts.size();
                dim = d;
            }
        }
        std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
            return boxes.off(a)[dim] != boxes.off(b)[dim] ? boxes.off(a)[dim] < boxes.off(b)[dim] : a < b;
        });
        // Same test as overlaps(), on raw coordinates.
        const auto meet = [&](std::size_t a, std::size_t b) {
            for (std::size_t d = 0; d < nd; ++d) {
                const auto ao = boxes.off(a)[d], bo = boxes.off(b)[d];
                const auto as = boxes.ext(a)[d], bs = boxes.ext(b)[d];
                if (as <= 0 || bs <= 0)
                    return false;
                if (ao <= bo ? bo - ao >= as : ao - bo >= bs)
                    return false;
            }
            return true;
        };
        std::vector<std::size_t> open;
        for (auto i : order) {
            const auto bo = boxes.off(i)[dim];
            open.erase(std::remove_if(open.begin(), open.end(),
                                      [&](std::size_t o) { return bo - boxes.off(o)[dim] >= boxes.ext(o)[dim]; }),
                       open.end());
            for (auto o : open)
                if (meet(o, i)) {
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

} // namespace

TilingProblem check_tiling(const Shape& global, const std::vector<Box>& boxes)
{
    // A box of another rank is outside; so is any box before it that
    // inside() refuses (the first in index order is reported).
    for (std::size_t i = 0; i < boxes.size(); ++i)
        if (!boxes[i].inside(global)) {
            TilingProblem p;
            p.kind = TilingProblem::outside;
            p.first = i;
            return p;
        }
    return check_tiling_impl(global, VecBoxes{boxes});
}

TilingProblem check_tiling(const Shape& global, const std::int64_t* coords, std::size_t count)
{
    if (rank_order_slabs(global.data(), coords, count, global.size()))
        return {};
    return check_tiling_impl(global, FlatBoxes{coords, count, global.size()});
}

bool rank_order_slabs(const std::int64_t* shape, const std::int64_t* c, std::size_t n, std::size_t nd) noexcept
{
    if (nd == 0 || n == 0)
        return false;
    for (std::size_t k = 0; k < nd; ++k)
        if (shape[k] <= 0)
            return false;
    std::size_t d = 0; // the split dimension: the first one rank 0's box does not span
    while (d + 1 < nd && c[nd + d] == shape[d])
        ++d;
    std::int64_t at = 0;
    for (std::size_t r = 0; r < n; ++r) {
        const std::int64_t *o = c + r * 2 * nd, *s = o + nd;
        for (std::size_t k = 0; k < nd; ++k) {
            if (k == d) {
                if (o[k] != at || s[k] <= 0 || s[k] > shape[k] - at)
                    return false;
                at += s[k];
            } else if (o[k] != 0 || s[k] != shape[k]) {
                return false;
            }
        }
    }
    return at == shape[d];
}


} // namespace cairn::detail
