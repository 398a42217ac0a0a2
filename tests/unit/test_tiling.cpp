// Overflow-checked sizes and the tiling check (src/core/tiling.hpp) used by
// the coordinator's global plan and by the metadata reader; overflow-safe
// box arithmetic (include/cairn/box.hpp) on hostile values.
#include "unit_common.hpp"

#include "core/tiling.hpp"

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

using namespace cairn;
using cairn::detail::check_tiling;
using cairn::detail::checked_bytes;
using cairn::detail::TilingProblem;

namespace {
constexpr std::int64_t k_max = std::numeric_limits<std::int64_t>::max();

// A brute-force reference: every element of `global` counted over the boxes.
TilingProblem::Kind reference(const Shape& global, const std::vector<Box>& boxes)
{
    std::vector<int> count(static_cast<std::size_t>(volume(global)), 0);
    const auto strides = row_major_strides(global);
    for (const auto& b : boxes) {
        if (!b.inside(global))
            return TilingProblem::outside;
        if (b.volume() <= 0)
            continue;
        Shape i = b.offsets;
        for (;;) {
            std::int64_t lin = 0;
            for (std::size_t d = 0; d < i.size(); ++d)
                lin += i[d] * strides[d];
            ++count[static_cast<std::size_t>(lin)];
            std::size_t d = i.size();
            while (d > 0 && ++i[d - 1] == b.offsets[d - 1] + b.shape[d - 1]) {
                i[d - 1] = b.offsets[d - 1];
                --d;
            }
            if (d == 0)
                break;
        }
    }
    for (int c : count)
        if (c > 1)
            return TilingProblem::overlap;
    for (int c : count)
        if (c == 0)
            return TilingProblem::coverage;
    return TilingProblem::none;
}
} // namespace

TEST_CASE("checked_bytes refuses products that overflow 64 bits", "[tiling]")
{
    CHECK(checked_bytes({}, 8) == 8);
    CHECK(checked_bytes({3, 4}, 8) == 96);
    CHECK(checked_bytes({0, k_max}, 8) == 0);
    CHECK_FALSE(checked_bytes({std::int64_t(1) << 40, std::int64_t(1) << 40}, 1));
    CHECK_FALSE(checked_bytes({std::int64_t(1) << 61}, 8)); // 2^64 bytes: would wrap to 0
    CHECK(checked_bytes({std::int64_t(1) << 59}, 8) == std::int64_t(1) << 62);
    CHECK_FALSE(checked_bytes({-1}, 1));
}

TEST_CASE("box arithmetic saturates instead of overflowing", "[tiling]")
{
    const Box huge{{0, 0}, {std::int64_t(1) << 40, std::int64_t(1) << 40}};
    CHECK(huge.volume() == k_max);
    CHECK(Box{{1}, {-3}}.volume() == -1);
    CHECK(Box{{1, 2}, {0, 5}}.volume() == 0);
    const Box far{{k_max - 1}, {k_max}};
    CHECK(far.str() == "[" + std::to_string(k_max - 1) + ":" + std::to_string(k_max - 1) + "+" +
                           std::to_string(k_max) + "]");
    const auto i = intersect(far, Box{{0}, {k_max}});
    REQUIRE(i);
    CHECK(i->offsets[0] == k_max - 1);
    CHECK(i->shape[0] == 1);
}

TEST_CASE("check_tiling finds boxes outside, overlapping or leaving holes", "[tiling]")
{
    const Shape g{8, 6};
    const Box top{{0, 0}, {4, 6}}, bottom{{4, 0}, {4, 6}};
    CHECK(check_tiling(g, {top, bottom}).kind == TilingProblem::none);
    CHECK(check_tiling(g, {bottom, top, Box{{2, 3}, {0, 2}}}).kind == TilingProblem::none); // empty boxes ignored
    auto p = check_tiling(g, {top, Box{{3, 0}, {5, 6}}});
    CHECK(p.kind == TilingProblem::overlap);
    CHECK((p.first == 0 && p.second == 1));
    p = check_tiling(g, {top, Box{{4, 0}, {4, 5}}});
    CHECK(p.kind == TilingProblem::coverage);
    CHECK(p.covered == 44);
    CHECK(p.total == 48);
    p = check_tiling(g, {top, Box{{4, 0}, {5, 6}}});
    CHECK(p.kind == TilingProblem::outside);
    CHECK(p.first == 1);
    // A duplicate hides a hole when only volumes are counted.
    CHECK(check_tiling({8}, {Box{{0}, {4}}, Box{{0}, {4}}}).kind == TilingProblem::overlap);
    // 0-d arrays: one box.
    CHECK(check_tiling({}, {Box{}}).kind == TilingProblem::none);
    CHECK(check_tiling({}, {Box{}, Box{}}).kind == TilingProblem::overlap);
    // Columns: every box open at once along dim 0, so the sweep picks dim 1.
    std::vector<Box> cols;
    for (std::int64_t c = 0; c < 6; ++c)
        cols.push_back(Box{{0, c}, {8, 1}});
    CHECK(check_tiling(g, cols).kind == TilingProblem::none);
    cols.push_back(Box{{7, 5}, {1, 1}});
    CHECK(check_tiling(g, cols).kind == TilingProblem::overlap);
}

TEST_CASE("check_tiling agrees with brute force on random box sets", "[tiling]")
{
    std::mt19937_64 rng(20261122);
    for (int trial = 0; trial < 2000; ++trial) {
        const std::size_t nd = 1 + rng() % 3;
        Shape g(nd);
        for (auto& e : g)
            e = 1 + static_cast<std::int64_t>(rng() % 5);
        // A grid decomposition, then maybe a perturbation of one box.
        std::vector<std::vector<std::int64_t>> cuts(nd);
        for (std::size_t d = 0; d < nd; ++d) {
            cuts[d] = {0};
            for (std::int64_t x = 1; x < g[d]; ++x)
                if (rng() % 2)
                    cuts[d].push_back(x);
            cuts[d].push_back(g[d]);
        }
        std::vector<Box> boxes;
        std::vector<std::size_t> idx(nd, 0);
        for (;;) {
            Box b;
            for (std::size_t d = 0; d < nd; ++d) {
                b.offsets.push_back(cuts[d][idx[d]]);
                b.shape.push_back(cuts[d][idx[d] + 1] - cuts[d][idx[d]]);
            }
            boxes.push_back(b);
            std::size_t d = nd;
            while (d > 0 && ++idx[d - 1] + 1 == cuts[d - 1].size()) {
                idx[d - 1] = 0;
                --d;
            }
            if (d == 0)
                break;
        }
        switch (rng() % 4) {
        case 0: break;
        case 1: boxes.erase(boxes.begin() + static_cast<std::ptrdiff_t>(rng() % boxes.size())); break;
        case 2: boxes.push_back(boxes[rng() % boxes.size()]); break;
        default: {
            auto& b = boxes[rng() % boxes.size()];
            const auto d = rng() % nd;
            b.shape[d] += static_cast<std::int64_t>(rng() % 3) - 1;
            b.offsets[d] += static_cast<std::int64_t>(rng() % 3) - 1;
        }
        }
        INFO("trial " << trial << ", global " << shape_str(g));
        // In grid order (offsets non-decreasing along the first dimension:
        // the grid test's forward cursor), then shuffled (its binary search).
        CHECK(check_tiling(g, boxes).kind == reference(g, boxes));
        std::shuffle(boxes.begin(), boxes.end(), rng);
        CHECK(check_tiling(g, boxes).kind == reference(g, boxes));
    }
}

TEST_CASE("check_tiling's grid test refuses a repeated cell and takes flat boxes", "[tiling]")
{
    const Shape g{4, 6};
    // A 2 x 2 grid with one cell twice and one missing: as many boxes as
    // cells, every box a cell.
    const Box a{{0, 0}, {2, 3}}, b{{0, 3}, {2, 3}}, c{{2, 0}, {2, 3}};
    auto p = check_tiling(g, {a, b, c, b});
    CHECK(p.kind == TilingProblem::overlap);
    const std::vector<Box> grid{a, b, c, Box{{2, 3}, {2, 3}}};
    CHECK(check_tiling(g, grid).kind == TilingProblem::none);
    // Flat coordinates: offsets then extents, box after box.
    std::vector<std::int64_t> flat;
    for (const auto& x : {a, b, c, b})
        for (const auto& v : {x.offsets, x.shape})
            flat.insert(flat.end(), v.begin(), v.end());
    p = check_tiling(g, flat.data(), 4);
    CHECK(p.kind == TilingProblem::overlap);
    CHECK(p.first == 1);
    CHECK(p.second == 3);
    flat.resize(12);
    p = check_tiling(g, flat.data(), 3);
    CHECK(p.kind == TilingProblem::coverage);
    CHECK(p.covered == 18);
    flat[8] = 3; // c moves down by one row: outside
    CHECK(check_tiling(g, flat.data(), 3).kind == TilingProblem::outside);
}

TEST_CASE("rank_order_slabs: ordered slabs along one dimension, and nothing else", "[tiling]")
{
    // Slabs along a random dimension in order (the split by rows or columns
    // of a simulation code), sometimes perturbed: rank_order_slabs says yes
    // only where the boxes tile the array, and check_tiling of flat boxes
    // (which tries it first) agrees with brute force either way.
    std::mt19937_64 rng(20261125);
    int slabs = 0;
    for (int trial = 0; trial < 3000; ++trial) {
        const std::size_t nd = 1 + rng() % 3, split = rng() % nd;
        Shape g(nd);
        for (auto& e : g)
            e = 1 + static_cast<std::int64_t>(rng() % 6);
        std::vector<Box> boxes;
        for (std::int64_t at = 0; at < g[split];) {
            const std::int64_t len = std::min<std::int64_t>(g[split] - at, 1 + static_cast<std::int64_t>(rng() % 3));
            Box b{Shape(nd, 0), g};
            b.offsets[split] = at;
            b.shape[split] = len;
            boxes.push_back(b);
            at += len;
        }
        switch (rng() % 6) {
        case 0:
        case 1: break;
        case 2: boxes.erase(boxes.begin() + static_cast<std::ptrdiff_t>(rng() % boxes.size())); break;
        case 3: std::swap(boxes.front(), boxes.back()); break;
        case 4: boxes.push_back(Box{Shape(nd, 0), Shape(nd, 0)}); break; // an empty box
        default: {
            auto& b = boxes[rng() % boxes.size()];
            const auto d = rng() % nd;
            b.shape[d] += static_cast<std::int64_t>(rng() % 3) - 1;
            b.offsets[d] += static_cast<std::int64_t>(rng() % 3) - 1;
        }
        }
        std::vector<std::int64_t> flat;
        for (const auto& b : boxes)
            for (const auto& v : {b.offsets, b.shape})
                flat.insert(flat.end(), v.begin(), v.end());
        INFO("trial " << trial << ", global " << shape_str(g) << ", split along " << split);
        const auto expect = reference(g, boxes);
        const bool fast = cairn::detail::rank_order_slabs(g.data(), flat.data(), boxes.size(), nd);
        slabs += fast;
        if (fast)
            CHECK(expect == TilingProblem::none);
        CHECK(check_tiling(g, flat.data(), boxes.size()).kind == expect);
    }
    CHECK(slabs > 1000); // the unperturbed cases (and harmless perturbations) take the one-pass test
}
