// Private: how CUDA staging cuts a strided copy into 2-D copies. Plain C++
// (no CUDA), so that the cutting is unit-tested on machines without a GPU;
// cuda_stage.cu issues one cudaMemcpyAsync or cudaMemcpy2DAsync per run.
#pragma once

#include "cairn/box.hpp"

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

/// The dimensions of a view as copies see them: extents of 1 dropped, and
/// each dimension merged into the one outside it where the two are
/// contiguous. Never empty (a single element is {1} / {1}).
struct CollapsedDims {
    std::vector<std::int64_t> shape, strides; // element strides
};

inline CollapsedDims collapse_dims(const StridedView& v)
{
    CollapsedDims d;
    for (std::size_t i = 0; i < v.shape.size(); ++i) {
        if (v.shape[i] == 1)
            continue;
        if (!d.shape.empty() && d.strides.back() == v.strides[i] * v.shape[i]) {
            d.shape.back() *= v.shape[i];
            d.strides.back() = v.strides[i];
        } else {
            d.shape.push_back(v.shape[i]);
            d.strides.push_back(v.strides[i]);
        }
    }
    if (d.shape.empty()) {
        d.shape = {1};
        d.strides = {1};
    }
    return d;
}

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
    const CollapsedDims d = collapse_dims(v);
    const std::size_t n = d.shape.size();
    const auto es = static_cast<std::int64_t>(v.elem_size);
    // The multi-index of element `first`.
    std::vector<std::int64_t> idx(n, 0);
    auto rem = first;
    for (std::size_t k = n; k-- > 0;) {
        idx[k] = rem % d.shape[k];
        rem /= d.shape[k];
    }
    const auto inner = d.shape[n - 1];
    const auto inner_stride = d.strides[n - 1];
    std::size_t buffer = 0;
    for (auto left = count; left > 0;) {
        std::int64_t off = 0;
        for (std::size_t k = 0; k < n; ++k)
            off += idx[k] * d.strides[k];
        CopyRun r;
        r.view_offset = off * es;
        r.buffer_offset = buffer;
        std::int64_t done = 0;
        if (n >= 2 && idx[n - 1] == 0 && inner_stride == 1 && left >= inner) {
            // Full rows, up to the end of the dimension outside them.
            const auto rows = std::min(left / inner, d.shape[n - 2] - idx[n - 2]);
            r.width = static_cast<std::size_t>(inner * es);
            r.pitch = static_cast<std::size_t>(d.strides[n - 2] * es);
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
            if (idx[k] >= d.shape[k]) {
                idx[k] = 0;
                ++idx[k - 1];
            }
        }
    }
}

} // namespace cairn::detail
