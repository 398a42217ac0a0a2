#include "cairn/box.hpp"

#include "core/strided.hpp"
#include "core/tiling.hpp"

#include <algorithm>
#include <cstring>
#include <sstream>

namespace cairn {

std::int64_t volume(const Shape& shape) noexcept { return detail::volume_of(shape.data(), shape.size()); }

std::int64_t Box::volume() const noexcept { return cairn::volume(shape); }

bool Box::inside(const Shape& global_shape) const noexcept
{
    if (offsets.size() != global_shape.size() || shape.size() != global_shape.size())
        return false;
    return detail::inside(offsets.data(), shape.data(), global_shape.data(), shape.size());
}

std::string Box::str() const
{
    std::ostringstream os;
    os << '[';
    for (std::size_t d = 0; d < shape.size(); ++d) {
        if (d)
            os << ", ";
        const auto o = d < offsets.size() ? offsets[d] : 0;
        std::int64_t end = 0;
        if (__builtin_add_overflow(o, shape[d], &end))
            os << o << ':' << o << '+' << shape[d];
        else
            os << o << ':' << end;
    }
    os << ']';
    return os.str();
}

std::string shape_str(const Shape& shape)
{
    std::ostringstream os;
    os << '[';
    for (std::size_t d = 0; d < shape.size(); ++d)
        os << (d ? ", " : "") << shape[d];
    os << ']';
    return os.str();
}

Box whole(const Shape& global_shape) { return Box{Shape(global_shape.size(), 0), global_shape}; }

namespace {
// o + s, saturated (boxes from hostile metadata may hold any values).
std::int64_t end_of(std::int64_t o, std::int64_t s) noexcept
{
    std::int64_t e;
    if (__builtin_add_overflow(o, s, &e))
        return s > 0 ? INT64_MAX : INT64_MIN;
    return e;
}
} // namespace

std::optional<Box> intersect(const Box& a, const Box& b)
{
    if (a.ndim() != b.ndim() || a.offsets.size() != a.ndim() || b.offsets.size() != b.ndim())
        return std::nullopt;
    Box r;
    r.offsets.resize(a.ndim());
    r.shape.resize(a.ndim());
    for (std::size_t d = 0; d < a.ndim(); ++d) {
        const auto lo = std::max(a.offsets[d], b.offsets[d]);
        const auto hi = std::min(end_of(a.offsets[d], a.shape[d]), end_of(b.offsets[d], b.shape[d]));
        if (hi <= lo)
            return std::nullopt;
        r.offsets[d] = lo;
        if (__builtin_sub_overflow(hi, lo, &r.shape[d]))
            r.shape[d] = INT64_MAX;
    }
    return r;
}

Shape row_major_strides(const Shape& shape)
{
    Shape s(shape.size(), 1);
    for (std::size_t d = shape.size(); d-- > 1;)
        s[d - 1] = s[d] * shape[d];
    return s;
}

namespace {

// Copies n elements of size es between strided memory (element strides).
inline void copy_elems(char* dst, std::int64_t dstride, const char* src, std::int64_t sstride, std::int64_t n,
                       std::size_t es)
{
    if (dstride == 1 && sstride == 1) {
        std::memcpy(dst, src, static_cast<std::size_t>(n) * es);
        return;
    }
    const auto db = dstride * static_cast<std::int64_t>(es);
    const auto sb = sstride * static_cast<std::int64_t>(es);
    switch (es) {
    case 8:
        for (std::int64_t i = 0; i < n; ++i)
            std::memcpy(dst + i * db, src + i * sb, 8);
        break;
    case 4:
        for (std::int64_t i = 0; i < n; ++i)
            std::memcpy(dst + i * db, src + i * sb, 4);
        break;
    case 2:
        for (std::int64_t i = 0; i < n; ++i)
            std::memcpy(dst + i * db, src + i * sb, 2);
        break;
    case 1:
        for (std::int64_t i = 0; i < n; ++i)
            dst[i * db] = src[i * sb];
        break;
    default:
        for (std::int64_t i = 0; i < n; ++i)
            std::memcpy(dst + i * db, src + i * sb, es);
    }
}

// Walks `count` elements in row-major order of `shape` starting at linear
// index `first`, copying between a strided view (strides `vs`, base `vbase`)
// and a dense buffer. `to_dense` selects the direction.
void range_copy(const StridedView& view, std::int64_t first, std::int64_t count, char* dense, bool to_dense)
{
    if (count <= 0)
        return;
    const auto dense_strides = row_major_strides(view.shape);
    const auto c = detail::collapse(view.shape, view.strides, dense_strides);
    const std::size_t n = c.shape.size();
    const auto es = view.elem_size;
    // multi-index of `first` in the collapsed shape
    Shape idx(n, 0);
    auto rem = first;
    for (std::size_t d = n; d-- > 0;) {
        idx[d] = rem % c.shape[d];
        rem /= c.shape[d];
    }
    char* vbase = static_cast<char*>(view.data);
    auto left = count;
    while (left > 0) {
        std::int64_t voff = 0;
        for (std::size_t d = 0; d < n; ++d)
            voff += idx[d] * c.a[d];
        const auto run = std::min(c.shape[n - 1] - idx[n - 1], left);
        char* v = vbase + voff * static_cast<std::int64_t>(es);
        if (to_dense)
            copy_elems(dense, 1, v, c.a[n - 1], run, es);
        else
            copy_elems(v, c.a[n - 1], dense, 1, run, es);
        dense += run * static_cast<std::int64_t>(es);
        left -= run;
        idx[n - 1] += run;
        for (std::size_t d = n - 1; d > 0 && idx[d] == c.shape[d]; --d) {
            idx[d] = 0;
            ++idx[d - 1];
        }
    }
}

} // namespace

void copy_strided(const StridedView& dst, const StridedView& src)
{
    if (dst.shape != src.shape || dst.elem_size != src.elem_size || dst.strides.size() != dst.shape.size() ||
        src.strides.size() != src.shape.size())
        throw std::invalid_argument("cairn::copy_strided: views differ in shape, element size or rank");
    if (volume(src.shape) == 0)
        return;
    const auto c = detail::collapse(src.shape, dst.strides, src.strides);
    const std::size_t n = c.shape.size();
    const auto es = static_cast<std::int64_t>(src.elem_size);
    Shape idx(n, 0);
    const auto outer = volume(c.shape) / c.shape[n - 1];
    char* d0 = static_cast<char*>(dst.data);
    const char* s0 = static_cast<const char*>(src.data);
    for (std::int64_t o = 0; o < outer; ++o) {
        std::int64_t doff = 0, soff = 0;
        for (std::size_t d = 0; d + 1 < n; ++d) {
            doff += idx[d] * c.a[d];
            soff += idx[d] * c.b[d];
        }
        copy_elems(d0 + doff * es, c.a[n - 1], s0 + soff * es, c.b[n - 1], c.shape[n - 1], src.elem_size);
        for (std::size_t d = n - 1; d-- > 0;) {
            if (++idx[d] < c.shape[d])
                break;
            idx[d] = 0;
        }
    }
}

namespace detail {

Collapsed collapse(const Shape& shape, const Shape& sa, const Shape& sb)
{
    Collapsed c;
    for (std::size_t d = 0; d < shape.size(); ++d) {
        if (shape[d] == 1)
            continue;
        if (!c.shape.empty() && c.a.back() == sa[d] * shape[d] && c.b.back() == sb[d] * shape[d]) {
            c.shape.back() *= shape[d];
            c.a.back() = sa[d];
            c.b.back() = sb[d];
        } else {
            c.shape.push_back(shape[d]);
            c.a.push_back(sa[d]);
            c.b.push_back(sb[d]);
        }
    }
    if (c.shape.empty()) {
        c.shape = {1};
        c.a = {1};
        c.b = {1};
    }
    return c;
}

bool is_dense(const StridedView& view) noexcept
{
    const auto dense = row_major_strides(view.shape);
    for (std::size_t d = 0; d < view.shape.size(); ++d)
        if (view.shape[d] != 1 && view.strides[d] != dense[d])
            return false;
    return true;
}

void pack_range(const StridedView& view, std::int64_t first, std::int64_t count, void* dst)
{
    range_copy(view, first, count, static_cast<char*>(dst), true);
}

void unpack_range(const StridedView& view, std::int64_t first, std::int64_t count, const void* src)
{
    range_copy(view, first, count, const_cast<char*>(static_cast<const char*>(src)), false);
}

StridedView subview(const StridedView& view, const Box& view_box, const Box& sub)
{
    StridedView r = view;
    std::int64_t off = 0;
    for (std::size_t d = 0; d < sub.ndim(); ++d)
        off += (sub.offsets[d] - view_box.offsets[d]) * view.strides[d];
    r.data = static_cast<char*>(view.data) + off * static_cast<std::int64_t>(view.elem_size);
    r.shape = sub.shape;
    return r;
}

} // namespace detail
} // namespace cairn
