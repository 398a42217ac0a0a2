// Private: how CUDA staging cuts a strided copy into 2-D copies. Plain C++
// (no CUDA), so that the cutting is unit-tested on machines without a GPU;
// cuda_stage.cu issues one cudaMemcpyAsync or cudaMemcpy2DAsync per run.
#pragma once

#include "cairn/box.hpp"
#include "core/strided.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace cairn::detail {

/// One copy between a strided view and a dense buffer: `rows` rows of
/// `width` bytes, `pitch` bytes apart in the view starting `view_offset`
/// bytes after its data pointer, packed one after another in the buffer
/// starting `buffer_offset` bytes into it. `rows == 1`: one linear copy of
/// `width` bytes (then `pitch == width`).
struct CopyRun {
    std::int64_t view_offset = 0;
    std::size_t buffer_offset = 0;
    std::size_t width = 0;
    std::size_t pitch = 0;
    std::size_t rows = 0;
};

/// Calls `f(const CopyRun&)` for the copies that move elements
/// [first, first + count) (row-major order of the view's box) between the
/// view and a dense buffer, in order, each non-empty and the buffer offsets
/// consecutive: several full rows at once where the innermost dimension is
/// contiguous and a run starts at a row, one linear copy for a contiguous
/// part of a row, one gather of single elements (width = element size,
/// pitch = the innermost stride) otherwise. Empty for count <= 0.
template <class F>
void for_each_copy_run(const StridedView& v, std::int64_t first, std::int64_t count, F&& f)
{
    if (count <= 0)
        return;
    // The view's dimensions as copies see them (against the dense buffer,
    // which merges wherever the view does).
    const Collapsed c = collapse(v.shape, v.strides, row_major_strides(v.shape));
    const Shape& shape = c.shape;
    const Shape& strides = c.a;
    const std::size_t n = shape.size();
    const auto es = static_cast<std::int64_t>(v.elem_size);
    // The multi-index of element `first`.
    std::vector<std::int64_t> idx(n, 0);
    auto rem = first;
    for (std::size_t k = n; k-- > 0;) {
        idx[k] = rem % shape[k];
        rem /= shape[k];
    }
    const auto inner = shape[n - 1];
    const auto inner_stride = strides[n - 1];
    std::size_t buffer = 0;
    for (auto left = count; left > 0;) {
        std::int64_t off = 0;
        for (std::size_t k = 0; k < n; ++k)
            off += idx[k] * strides[k];
        CopyRun r;
        r.view_offset = off * es;
        r.buffer_offset = buffer;
        std::int64_t done = 0;
        if (n >= 2 && idx[n - 1] == 0 && inner_stride == 1 && left >= inner) {
            // Full rows, up to the end of the dimension outside them.
            const auto rows = std::min(left / inner, shape[n - 2] - idx[n - 2]);
            r.width = static_cast<std::size_t>(inner * es);
            r.pitch = static_cast<std::size_t>(strides[n - 2] * es);
            r.rows = static_cast<std::size_t>(rows);
            done = rows * inner;
            idx[n - 2] += rows;
        } else {
            const auto run = std::min(inner - idx[n - 1], left);
            if (inner_stride == 1) { // a contiguous part of a row
                r.width = static_cast<std::size_t>(run * es);
                r.pitch = r.width;
                r.rows = 1;
            } else { // a gather of single elements
                r.width = static_cast<std::size_t>(es);
                r.pitch = static_cast<std::size_t>(inner_stride * es);
                r.rows = static_cast<std::size_t>(run);
            }
            done = run;
            idx[n - 1] += run;
        }
        if (r.rows == 1)
            r.pitch = r.width; // one row: a linear copy
        if (done <= 0) // cannot happen for a valid view; never loop forever
            throw std::logic_error("for_each_copy_run: no progress at element " + std::to_string(count - left));
        f(static_cast<const CopyRun&>(r));
        buffer += static_cast<std::size_t>(done * es);
        left -= done;
        // Carry, innermost first, through every dimension that reached its
        // extent (the full-rows case fills dimension n-2, not n-1).
        for (std::size_t k = n; k-- > 1;) {
            if (idx[k] >= shape[k]) {
                idx[k] = 0;
                ++idx[k - 1];
            }
        }
    }
}

} // namespace cairn::detail
