// Private: strided packing used by the storage layers.
#pragma once

#include "cairn/box.hpp"

#include <cstdint>

namespace cairn::detail {

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

} // namespace cairn::detail
