// Private: strided packing used by the storage layers.
#pragma once

#include "cairn/box.hpp"

#include <cstdint>
#include <vector>

namespace cairn::detail {

/// Two views of the same extents (element strides `a` and `b`) as copies see
/// them: dimensions of extent 1 dropped, and each dimension merged into the
/// one outside it where both views are contiguous across the two. Never
/// empty (a single element is {1} / {1} / {1}).
struct Collapsed {
    Shape shape, a, b;
};
Collapsed collapse(const Shape& shape, const Shape& a, const Shape& b);

/// True when the view's elements are one dense row-major block.
bool is_dense(const StridedView& view) noexcept;

/// Copies `count` elements, starting at row-major linear index `first` of
/// the view's box, from `view` into the dense buffer `dst`.
void pack_range(const StridedView& view, std::int64_t first, std::int64_t count, void* dst);

/// Copies `count` elements from the dense buffer `src` into the view, starting
/// at row-major linear index `first` of the view's box.
void unpack_range(const StridedView& view, std::int64_t first, std::int64_t count, const void* src);

/// The sub-view of `view` (which covers `view_box`) covering `sub`, a box
/// inside `view_box`, in the same global coordinates.
StridedView subview(const StridedView& view, const Box& view_box, const Box& sub);

/// The contiguous runs of `box` in a row-major array of `shape`, in the
/// box's row-major order: f(first element of the run in the array, its
/// elements). A 0-d box is one run of one element.
template <class F>
void for_each_run(const Shape& shape, const Box& box, F&& f)
{
    const std::size_t nd = shape.size();
    if (nd == 0) {
        f(std::uint64_t(0), std::uint64_t(1));
        return;
    }
    if (box.volume() == 0)
        return;
    // Dimensions after k are whole: a run is box.shape[k] of them.
    std::size_t k = nd - 1;
    std::uint64_t inner = 1; // elements of one index of dimension k
    while (k > 0 && box.shape[k] == shape[k]) {
        inner *= static_cast<std::uint64_t>(shape[k]);
        --k;
    }
    const std::uint64_t run = static_cast<std::uint64_t>(box.shape[k]) * inner;
    const Shape stride = row_major_strides(shape);
    std::vector<std::int64_t> idx(k, 0); // over the dimensions before k
    while (true) {
        std::uint64_t first = static_cast<std::uint64_t>(box.offsets[k] * stride[k]);
        for (std::size_t d = 0; d < k; ++d)
            first += static_cast<std::uint64_t>((box.offsets[d] + idx[d]) * stride[d]);
        f(first, run);
        std::size_t d = k;
        while (d > 0 && ++idx[d - 1] == box.shape[d - 1])
            idx[--d] = 0;
        if (d == 0)
            return;
    }
}

} // namespace cairn::detail
