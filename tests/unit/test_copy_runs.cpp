// How CUDA staging cuts strided copies into 2-D copies (src/stage/copy_runs.hpp),
// checked on the host: each run is carried out as cudaMemcpy2D would, and
// the result compared with a naive element-by-element gather and scatter.
#include "unit_common.hpp"

#include "stage/copy_runs.hpp"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

using namespace cairn;
using cairn::detail::CopyRun;
using cairn::detail::for_each_copy_run;

namespace {

// A box of `shape` inside a parent array of `parent` extents (ghost layers
// where larger), at `origin`, with the parent's dimensions laid out in
// memory in `order` (outermost first: {0, 1, ...} is row-major, the
// reverse is column-major, as a Kokkos LayoutLeft view).
struct Case {
    Shape shape, parent, origin;
    std::vector<std::size_t> order;
};

struct Built {
    std::vector<std::int32_t> memory; // the parent array; element k holds k
    StridedView view;
};

Built build(const Case& c)
{
    const std::size_t n = c.shape.size();
    Shape parent_strides(n, 0);
    std::int64_t s = 1;
    for (std::size_t k = n; k-- > 0;) {
        parent_strides[c.order[k]] = s;
        s *= c.parent[c.order[k]];
    }
    Built b;
    b.memory.resize(static_cast<std::size_t>(s));
    for (std::size_t k = 0; k < b.memory.size(); ++k)
        b.memory[k] = static_cast<std::int32_t>(k);
    std::int64_t origin = 0;
    for (std::size_t d = 0; d < n; ++d)
        origin += c.origin[d] * parent_strides[d];
    b.view.data = b.memory.data() + origin;
    b.view.elem_size = sizeof(std::int32_t);
    b.view.shape = c.shape;
    b.view.strides = parent_strides;
    return b;
}

// Offset in elements of the box's row-major element `linear`.
std::int64_t offset_of(const StridedView& v, std::int64_t linear)
{
    std::int64_t off = 0;
    for (std::size_t d = v.shape.size(); d-- > 0;) {
        off += (linear % v.shape[d]) * v.strides[d];
        linear /= v.shape[d];
    }
    return off;
}

// Carries out `r` as cudaMemcpy2D would between the view and `buffer`.
void apply(const StridedView& v, const CopyRun& r, char* buffer, bool to_buffer)
{
    char* view = static_cast<char*>(v.data) + r.view_offset;
    for (std::size_t row = 0; row < r.rows; ++row) {
        char* at_view = view + row * r.pitch;
        char* at_buffer = buffer + r.buffer_offset + row * r.width;
        if (to_buffer)
            std::memcpy(at_buffer, at_view, r.width);
        else
            std::memcpy(at_view, at_buffer, r.width);
    }
}

// Copies [first, first + count) out and back in through the runs; checks
// the runs are non-empty, consecutive in the buffer and move the right
// elements, and that the scatter writes those and nothing else.
bool check_piece(const Case& c, std::int64_t first, std::int64_t count, std::string& why)
{
    Built b = build(c);
    const auto es = b.view.elem_size;
    std::vector<std::int32_t> out(static_cast<std::size_t>(count), -1);
    std::size_t next = 0;
    bool ok = true;
    for_each_copy_run(b.view, first, count, [&](const CopyRun& r) {
        if (r.rows == 0 || r.width == 0 || r.buffer_offset != next || (r.rows == 1 && r.pitch != r.width)) {
            why = "bad run at buffer offset " + std::to_string(r.buffer_offset);
            ok = false;
        }
        next = r.buffer_offset + r.rows * r.width;
        if (next <= static_cast<std::size_t>(count) * es)
            apply(b.view, r, reinterpret_cast<char*>(out.data()), true);
    });
    if (!ok)
        return false;
    if (next != static_cast<std::size_t>(count) * es) {
        why = "the runs moved " + std::to_string(next) + " bytes, not " + std::to_string(count * es);
        return false;
    }
    for (std::int64_t e = 0; e < count; ++e) {
        const auto want = b.memory[static_cast<std::size_t>(static_cast<std::int32_t*>(b.view.data) -
                                                            b.memory.data() + offset_of(b.view, first + e))];
        if (out[static_cast<std::size_t>(e)] != want) {
            why = "element " + std::to_string(first + e) + " gathered as " +
                  std::to_string(out[static_cast<std::size_t>(e)]) + ", not " + std::to_string(want);
            return false;
        }
    }
    // Scatter negated values back: exactly the piece's elements change.
    for (auto& x : out)
        x = -x - 1;
    const std::vector<std::int32_t> before = b.memory;
    for_each_copy_run(b.view, first, count,
                      [&](const CopyRun& r) { apply(b.view, r, reinterpret_cast<char*>(out.data()), false); });
    std::vector<std::int32_t> expect = before;
    const auto base = static_cast<std::int32_t*>(b.view.data) - b.memory.data();
    for (std::int64_t e = 0; e < count; ++e) {
        auto& x = expect[static_cast<std::size_t>(base + offset_of(b.view, first + e))];
        x = -x - 1;
    }
    if (b.memory != expect) {
        why = "the scatter wrote other elements than the piece's";
        return false;
    }
    return true;
}

std::vector<std::size_t> row_major(std::size_t n)
{
    std::vector<std::size_t> o(n);
    for (std::size_t k = 0; k < n; ++k)
        o[k] = k;
    return o;
}

std::vector<std::size_t> column_major(std::size_t n)
{
    std::vector<std::size_t> o(n);
    for (std::size_t k = 0; k < n; ++k)
        o[k] = n - 1 - k;
    return o;
}

} // namespace

TEST_CASE("CUDA staging's copy runs move exactly each piece of strided views", "[stage][cuda]")
{
    std::vector<Case> cases = {
        {{7}, {7}, {0}, row_major(1)},
        {{5}, {9}, {2}, row_major(1)},
        {{4, 6}, {4, 6}, {0, 0}, row_major(2)},            // dense: one run
        {{4, 6}, {6, 8}, {1, 1}, row_major(2)},            // ghost layer, 2-D
        {{4, 6}, {6, 8}, {1, 1}, column_major(2)},         // LayoutLeft with ghosts
        {{3, 4, 5}, {5, 6, 7}, {1, 1, 1}, row_major(3)},   // 3-D with ghosts: full rows span dims
        {{3, 4, 5}, {3, 4, 7}, {0, 0, 1}, row_major(3)},   // only the innermost padded
        {{3, 4, 5}, {5, 6, 7}, {1, 1, 1}, column_major(3)},
        {{3, 1, 4, 2}, {5, 3, 6, 4}, {1, 1, 1, 1}, row_major(4)},
        {{3, 2, 2, 3, 2, 1, 2, 2}, {5, 4, 4, 5, 4, 3, 4, 4}, {1, 1, 1, 1, 1, 1, 1, 1}, row_major(8)},
        {{3, 2, 2, 3, 2, 1, 2, 2}, {5, 4, 4, 5, 4, 3, 4, 4}, {1, 1, 1, 1, 1, 1, 1, 1}, column_major(8)},
        {{2, 3, 4}, {4, 3, 6}, {1, 0, 2}, {1, 0, 2}},       // a permuted layout
        {{}, {}, {}, {}},                                   // a 0-d view: one element
    };
    for (const auto& c : cases) {
        const std::int64_t vol = volume(c.shape);
        // The whole view, and the view cut into consecutive pieces of
        // several sizes, as staging cuts it to its bound.
        for (const std::int64_t piece : {vol, std::int64_t{1}, std::int64_t{2}, std::int64_t{3}, std::int64_t{7},
                                         std::int64_t{11}}) {
            for (std::int64_t first = 0; first < vol; first += piece) {
                const auto count = std::min(piece, vol - first);
                std::string why;
                INFO("box " << shape_str(c.shape) << " in " << shape_str(c.parent) << ", piece [" << first << ", "
                            << first + count << ")");
                CHECK(check_piece(c, first, count, why));
                if (!why.empty())
                    FAIL_CHECK(why);
            }
        }
    }
    // Nothing to copy: no runs.
    Built b = build({{3, 4}, {3, 4}, {0, 0}, row_major(2)});
    int runs = 0;
    for_each_copy_run(b.view, 0, 0, [&](const CopyRun&) { ++runs; });
    CHECK(runs == 0);
}

TEST_CASE("CUDA staging's copy runs: full rows span the dimensions outside them", "[stage][cuda]")
{
    // A 3-D box with a ghost layer: the rows of one plane go in one 2-D
    // copy, and the next copy starts the next plane (the carry through two
    // dimensions that once looped forever on a device).
    Built b = build({{3, 4, 5}, {5, 6, 7}, {1, 1, 1}, row_major(3)});
    std::vector<CopyRun> runs;
    for_each_copy_run(b.view, 0, 60, [&](const CopyRun& r) { runs.push_back(r); });
    REQUIRE(runs.size() == 3);
    for (std::size_t k = 0; k < runs.size(); ++k) {
        CHECK(runs[k].rows == 4);
        CHECK(runs[k].width == 5 * sizeof(std::int32_t));
        CHECK(runs[k].pitch == 7 * sizeof(std::int32_t));
        CHECK(runs[k].buffer_offset == k * 20 * sizeof(std::int32_t));
        CHECK(runs[k].view_offset == static_cast<std::int64_t>(k * 42 * sizeof(std::int32_t)));
    }
    // A LayoutLeft 2-D box: single elements gathered along each row.
    Built l = build({{4, 6}, {6, 8}, {1, 1}, column_major(2)});
    runs.clear();
    for_each_copy_run(l.view, 0, 24, [&](const CopyRun& r) { runs.push_back(r); });
    REQUIRE(runs.size() == 4);
    CHECK(runs[0].rows == 6);
    CHECK(runs[0].width == sizeof(std::int32_t));
    CHECK(runs[0].pitch == 6 * sizeof(std::int32_t));
}
