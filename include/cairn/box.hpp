// Cairn: geometry of N-d boxes and strided copies between them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cairn {

/// Extents of an N-d array, outermost dimension first (row-major order).
using Shape = std::vector<std::int64_t>;

/// An axis-aligned box inside a global array: `offsets[d] <= i < offsets[d] + shape[d]`.
/// A box with any zero extent is empty. A 0-d box (no dimensions) holds one element.
struct Box {
    Shape offsets;
    Shape shape;

    std::size_t ndim() const noexcept { return shape.size(); }
    /// Number of elements (product of extents; 1 for 0-d; 0 when an extent
    /// is 0, -1 when one is negative, INT64_MAX when the product overflows).
    std::int64_t volume() const noexcept;
    /// True when any extent is zero (or negative).
    bool empty() const noexcept { return volume() <= 0; }
    /// True when the box lies inside [0, global_shape).
    bool inside(const Shape& global_shape) const noexcept;
    /// "[o0:o0+s0, o1:o1+s1]" for messages.
    std::string str() const;

    friend bool operator==(const Box& a, const Box& b) { return a.offsets == b.offsets && a.shape == b.shape; }
    friend bool operator!=(const Box& a, const Box& b) { return !(a == b); }
    friend bool operator<(const Box& a, const Box& b)
    {
        return a.offsets != b.offsets ? a.offsets < b.offsets : a.shape < b.shape;
    }
};

/// The box covering a whole array of `global_shape`.
Box whole(const Shape& global_shape);

/// Intersection of two boxes of the same rank; empty optional when they do
/// not overlap (or the overlap is empty), or are malformed or of different
/// ranks.
std::optional<Box> intersect(const Box& a, const Box& b);

/// Product of extents (1 for an empty shape vector = 0-d; 0 when an extent is
/// 0, -1 when one is negative; saturates at INT64_MAX instead of overflowing).
std::int64_t volume(const Shape& shape) noexcept;

/// "[4, 5, 6]" for messages.
std::string shape_str(const Shape& shape);

/// Row-major (C order) element strides of a dense array of `shape`.
Shape row_major_strides(const Shape& shape);

/// A view of N-d elements in memory: a base pointer, extents and strides in
/// elements (strides may describe a window into a larger array).
struct StridedView {
    void* data = nullptr;
    std::size_t elem_size = 0;
    Shape shape;
    Shape strides; ///< element strides, one per dimension; >= 0
};

/// Copies every element of the box `shape` from `src` to `dst`, which must have
/// the same shape and element size. Collapses contiguous inner dimensions so a
/// dense-to-dense copy is one memcpy. Host memory only. Local.
void copy_strided(const StridedView& dst, const StridedView& src);

} // namespace cairn
