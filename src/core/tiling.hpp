// Cairn internal: overflow-checked sizes and the check that a set of boxes
// tiles a global array (disjoint, inside, covering). Used by the
// coordinator's global plan (boxes given by the ranks) and by the metadata
// reader (chunks read from a file, which may be hostile).
#pragma once

#include "cairn/box.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace cairn::detail {

/// Volume of the `nd` extents at `extents`, as cairn::volume(): -1 when one
/// is negative, 0 when one is zero, saturated at INT64_MAX.
inline std::int64_t volume_of(const std::int64_t* extents, std::size_t nd) noexcept
{
    std::int64_t v = 1;
    bool saturated = false;
    for (std::size_t d = 0; d < nd; ++d) {
        if (extents[d] <= 0)
            return extents[d] < 0 ? -1 : 0;
        if (!saturated && __builtin_mul_overflow(v, extents[d], &v))
            saturated = true;
    }
    return saturated ? INT64_MAX : v;
}

/// volume(shape) * elem_size, or nothing when an extent is negative or the
/// product does not fit in an int64_t.
std::optional<std::int64_t> checked_bytes(const Shape& shape, std::uint64_t elem_size) noexcept;

/// True when the boxes (same rank, well formed) share at least one element.
/// Never overflows and never allocates.
bool overlaps(const Box& a, const Box& b) noexcept;
/// Box::inside on a box of `nd` dimensions given as offsets and extents,
/// inside a global shape of as many.
bool inside(const std::int64_t* offsets, const std::int64_t* extents, const std::int64_t* global_shape,
            std::size_t nd) noexcept;
/// overlaps() for boxes of `nd` dimensions given as offsets and extents (no
/// Box needed). For non-negative offsets and extents, true exactly when
/// intersect() of the two boxes has a value.
bool overlaps(const std::int64_t* a_offsets, const std::int64_t* a_extents, const std::int64_t* b_offsets,
              const std::int64_t* b_extents, std::size_t nd) noexcept;

/// What check_tiling found.
struct TilingProblem {
    enum Kind { none, outside, overlap, coverage } kind = none;
    std::size_t first = 0;      ///< outside: the box; overlap: one of the two boxes (indices into `boxes`)
    std::size_t second = 0;     ///< overlap: the other box
    std::int64_t covered = 0;   ///< coverage: elements the boxes hold (saturated)
    std::int64_t total = 0;     ///< coverage: elements of the global shape
    explicit operator bool() const noexcept { return kind != none; }
};

/// Checks that `boxes` lie inside `global`, are pairwise disjoint and cover
/// it. Empty boxes are ignored (they hold nothing). `global`'s volume must
/// fit in an int64_t (see checked_bytes). A sweep along the dimension with
/// the most distinct offsets: O(n log n + n * k), k the number of boxes
/// whose range along that dimension is open at once (small for the
/// decompositions of simulation codes: one process-grid row or column).
/// First a grid test, O(n * nd * log n): when every box is exactly one cell
/// of the grid whose cuts are the boxes' distinct offsets, and every cell is
/// held once, the boxes tile the array (the regular decompositions of
/// simulation codes); anything else goes to the sweep.
TilingProblem check_tiling(const Shape& global, const std::vector<Box>& boxes);

/// The same for `count` boxes of global.size() dimensions stored flat: box i
/// is coords[i*2*nd, i*2*nd + nd) (offsets) then nd extents.
/// Tries rank_order_slabs() first.
TilingProblem check_tiling(const Shape& global, const std::int64_t* coords, std::size_t count);

/// Whether the `n` boxes at `c` (box r's at c + r * 2 * nd) are slabs along
/// one dimension, in order, that tile an array of shape `shape`: along that
/// dimension box 0 starts at 0, every other where the previous one ends,
/// the last one ends at the array's end, none is empty; along the others
/// every box is the whole extent (the split by rows, or by columns, of most
/// simulation codes, in rank order). Then the boxes are distinct, sorted,
/// non-empty and tile the array. False says nothing. One pass, no memory.
bool rank_order_slabs(const std::int64_t* shape, const std::int64_t* c, std::size_t n, std::size_t nd) noexcept;

} // namespace cairn::detail
