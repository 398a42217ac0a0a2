// Private strided packing (src/core/strided.hpp) against a naive reference.
#include "unit_common.hpp"

#include "core/strided.hpp"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

using namespace cairn;
using cairn::detail::is_dense;
using cairn::detail::pack_range;
using cairn::detail::subview;
using cairn::detail::unpack_range;

namespace {

Shape unravel(std::int64_t linear, const Shape& shape)
{
    Shape idx(shape.size());
    for (std::size_t d = shape.size(); d-- > 0;) {
        idx[d] = linear % shape[d];
        linear /= shape[d];
    }
    return idx;
}

std::int64_t elem_offset(const Shape& idx, const Shape& strides)
{
    std::int64_t o = 0;
    for (std::size_t d = 0; d < idx.size(); ++d)
        o += idx[d] * strides[d];
    return o;
}

// Bytes spanned by a view (largest offset + 1 element).
std::size_t span_bytes(const Shape& shape, const Shape& strides, std::size_t es)
{
    std::int64_t last = 0;
    for (std::size_t d = 0; d < shape.size(); ++d)
        last += (shape[d] - 1) * strides[d];
    return static_cast<std::size_t>(last + 1) * es;
}

void naive_pack(const std::uint8_t* view, const Shape& shape, const Shape& strides, std::size_t es, std::int64_t first,
                std::int64_t count, std::uint8_t* dst)
{
    for (std::int64_t k = 0; k < count; ++k) {
        const auto o = static_cast<std::size_t>(elem_offset(unravel(first + k, shape), strides)) * es;
        std::copy(view + o, view + o + es, dst + static_cast<std::size_t>(k) * es);
    }
}

void naive_unpack(std::uint8_t* view, const Shape& shape, const Shape& strides, std::size_t es, std::int64_t first,
                  std::int64_t count, const std::uint8_t* src)
{
    for (std::int64_t k = 0; k < count; ++k) {
        const auto o = static_cast<std::size_t>(elem_offset(unravel(first + k, shape), strides)) * es;
        std::copy(src + static_cast<std::size_t>(k) * es, src + static_cast<std::size_t>(k + 1) * es, view + o);
    }
}

// A random non-overlapping view: padded row-major, with an inner stride > 1,
// or with permuted (transposed) dimensions; extent-1 dims get odd strides.
struct RandomView {
    Shape shape, strides;
    std::size_t es;
};

RandomView random_view(std::mt19937& rng)
{
    static const std::size_t sizes[] = {1, 2, 4, 8, 16};
    std::uniform_int_distribution<int> nd_dist(0, 4), ext(1, 5), pad(0, 3), pick(0, 4), mode_dist(0, 2);
    RandomView v;
    v.es = sizes[pick(rng)];
    const auto nd = static_cast<std::size_t>(nd_dist(rng));
    v.shape.resize(nd);
    for (auto& x : v.shape)
        x = ext(rng) == 1 ? 1 : ext(rng); // extent 1 fairly often
    std::vector<std::size_t> order(nd); // order[0] = outermost in memory
    std::iota(order.begin(), order.end(), std::size_t{0});
    const int mode = mode_dist(rng);
    if (mode == 2)
        std::shuffle(order.begin(), order.end(), rng);
    v.strides.assign(nd, 0);
    std::int64_t s = mode == 1 ? 1 + pad(rng) : 1;
    for (std::size_t k = nd; k-- > 0;) {
        const auto d = order[k];
        v.strides[d] = s;
        s *= v.shape[d] + (pad(rng) == 0 ? pad(rng) : 0);
    }
    for (std::size_t d = 0; d < nd; ++d)
        if (v.shape[d] == 1 && pad(rng) == 0)
            v.strides[d] = 1000 + pad(rng); // never used to address anything
    return v;
}

std::uint8_t byte_of(std::size_t i, std::uint32_t salt) { return static_cast<std::uint8_t>((i * 131 + salt) % 253 + 1); }

constexpr std::uint8_t k_sentinel = 0;

} // namespace

TEST_CASE("pack_range and unpack_range match a naive reference", "[strided]")
{
    std::mt19937 rng(987654321);
    int cases = 0;
    for (int iter = 0; iter < 3000; ++iter) {
        const auto v = random_view(rng);
        const auto n = volume(v.shape);
        std::uniform_int_distribution<std::int64_t> first_dist(0, n);
        const auto first = first_dist(rng);
        std::uniform_int_distribution<std::int64_t> count_dist(0, n - first);
        const auto count = iter % 10 == 0 ? n - first : count_dist(rng);
        const auto bytes = span_bytes(v.shape, v.strides, v.es);
        INFO("iteration " << iter << ": elem_size " << v.es << ", shape " << shape_str(v.shape) << ", strides "
                          << shape_str(v.strides) << ", first " << first << ", count " << count);

        // pack
        std::vector<std::uint8_t> mem(bytes);
        for (std::size_t i = 0; i < bytes; ++i)
            mem[i] = byte_of(i, 7);
        const auto mem_before = mem;
        const std::size_t guard = 2 * v.es;
        std::vector<std::uint8_t> got(static_cast<std::size_t>(count) * v.es + guard, k_sentinel);
        std::vector<std::uint8_t> want(got.size(), k_sentinel);
        pack_range(StridedView{mem.data(), v.es, v.shape, v.strides}, first, count, got.data());
        naive_pack(mem.data(), v.shape, v.strides, v.es, first, count, want.data());
        CHECK(got == want);
        CHECK(mem == mem_before);

        // unpack
        std::vector<std::uint8_t> src(static_cast<std::size_t>(count) * v.es);
        for (std::size_t i = 0; i < src.size(); ++i)
            src[i] = byte_of(i, 91);
        auto mem_naive = mem;
        unpack_range(StridedView{mem.data(), v.es, v.shape, v.strides}, first, count, src.data());
        naive_unpack(mem_naive.data(), v.shape, v.strides, v.es, first, count, src.data());
        CHECK(mem == mem_naive);
        ++cases;
    }
    CHECK(cases == 3000);
}

TEST_CASE("pack_range in pieces equals one whole pack", "[strided]")
{
    // a 5x6x7 window of doubles in a 7x8x9 array
    const Shape shape{5, 6, 7}, strides{72, 9, 1};
    std::vector<double> a(7 * 8 * 9);
    for (std::size_t i = 0; i < a.size(); ++i)
        a[i] = static_cast<double>(i);
    const StridedView v{&a[72 + 9 + 1], sizeof(double), shape, strides};
    std::vector<double> whole_pack(210), pieces(210, -1);
    pack_range(v, 0, 210, whole_pack.data());
    std::int64_t pos = 0;
    for (std::int64_t len : {1, 6, 7, 13, 50, 0, 133}) {
        pack_range(v, pos, len, pieces.data() + pos);
        pos += len;
    }
    REQUIRE(pos == 210);
    CHECK(pieces == whole_pack);
    for (std::int64_t i = 0; i < 5; ++i)
        for (std::int64_t j = 0; j < 6; ++j)
            for (std::int64_t k = 0; k < 7; ++k)
                CHECK(whole_pack[static_cast<std::size_t>(i * 42 + j * 7 + k)] ==
                      a[static_cast<std::size_t>((i + 1) * 72 + (j + 1) * 9 + (k + 1))]);

    // unpacking the packed data into a zeroed array restores the window only
    std::vector<double> b(a.size(), 0.0);
    unpack_range(StridedView{&b[72 + 9 + 1], sizeof(double), shape, strides}, 0, 210, whole_pack.data());
    for (std::size_t i = 0; i < b.size(); ++i) {
        const auto idx = unravel(static_cast<std::int64_t>(i), {7, 8, 9});
        const bool in = idx[0] >= 1 && idx[0] <= 5 && idx[1] >= 1 && idx[1] <= 6 && idx[2] >= 1 && idx[2] <= 7;
        CHECK(b[i] == (in ? a[i] : 0.0));
    }
}

TEST_CASE("pack_range and unpack_range of 0-d views and count 0", "[strided]")
{
    std::int32_t x = 1234567, out[2] = {0, -1};
    pack_range(StridedView{&x, 4, {}, {}}, 0, 1, out);
    CHECK(out[0] == 1234567);
    CHECK(out[1] == -1);
    const std::int32_t in = -5;
    unpack_range(StridedView{&x, 4, {}, {}}, 0, 1, &in);
    CHECK(x == -5);

    std::vector<std::int32_t> m(12, 3), d(4, 9);
    pack_range(StridedView{m.data(), 4, {3, 4}, {4, 1}}, 5, 0, d.data());
    CHECK(d == std::vector<std::int32_t>(4, 9));
    unpack_range(StridedView{m.data(), 4, {3, 4}, {4, 1}}, 5, 0, d.data());
    CHECK(m == std::vector<std::int32_t>(12, 3));
}

TEST_CASE("subview", "[strided]")
{
    // the view covers the global box [10:16, 20:27] with padded strides {9, 1}
    std::vector<std::int64_t> a(6 * 9);
    for (std::size_t i = 0; i < a.size(); ++i)
        a[i] = static_cast<std::int64_t>(i);
    const StridedView v{a.data(), 8, {6, 7}, {9, 1}};
    const Box vbox{{10, 20}, {6, 7}};

    const Box sub{{12, 23}, {2, 3}};
    const auto s = subview(v, vbox, sub);
    CHECK(s.data == static_cast<void*>(&a[2 * 9 + 3]));
    CHECK(s.elem_size == 8);
    CHECK(s.shape == Shape{2, 3});
    CHECK(s.strides == Shape{9, 1});
    std::vector<std::int64_t> got(6);
    pack_range(s, 0, 6, got.data());
    CHECK(got == std::vector<std::int64_t>{21, 22, 23, 30, 31, 32});

    SECTION("the whole box is the view itself")
    {
        const auto w = subview(v, vbox, vbox);
        CHECK(w.data == v.data);
        CHECK(w.shape == v.shape);
        CHECK(w.strides == v.strides);
    }
    SECTION("a sub-view of a sub-view")
    {
        const auto s2 = subview(s, sub, Box{{13, 25}, {1, 1}});
        CHECK(s2.data == static_cast<void*>(&a[3 * 9 + 5]));
        CHECK(s2.shape == Shape{1, 1});
    }
    SECTION("a sub-view of a transposed view")
    {
        // the 6x9 array seen as its transpose, covering global box [0:9, 0:6]
        const StridedView t{a.data(), 8, {9, 6}, {1, 9}};
        const auto st = subview(t, Box{{0, 0}, {9, 6}}, Box{{4, 2}, {2, 2}});
        std::vector<std::int64_t> g(4);
        pack_range(st, 0, 4, g.data());
        CHECK(g == std::vector<std::int64_t>{2 * 9 + 4, 3 * 9 + 4, 2 * 9 + 5, 3 * 9 + 5});
    }
    SECTION("0-d")
    {
        std::int64_t x = 5;
        const auto z = subview(StridedView{&x, 8, {}, {}}, Box{}, Box{});
        CHECK(z.data == static_cast<void*>(&x));
        CHECK(z.shape.empty());
    }
}

TEST_CASE("is_dense", "[strided]")
{
    int buf[64] = {};
    const auto v = [&](Shape shape, Shape strides) { return StridedView{buf, 4, std::move(shape), std::move(strides)}; };
    CHECK(is_dense(v({2, 3, 4}, {12, 4, 1})));
    CHECK(is_dense(v({7}, {1})));
    CHECK(is_dense(v({}, {})));
    CHECK(is_dense(v({1, 3}, {42, 1})));       // extent-1 dim: its stride does not matter
    CHECK(is_dense(v({3, 1}, {1, 99})));
    CHECK_FALSE(is_dense(v({2, 3}, {4, 1})));  // padded rows
    CHECK_FALSE(is_dense(v({5}, {4})));        // a column
    CHECK_FALSE(is_dense(v({3, 2}, {1, 3})));  // transposed
    CHECK_FALSE(is_dense(v({4}, {2})));
}

TEST_CASE("for_each_run: the runs of a box are its row-major elements in the array", "[strided]")
{
    std::mt19937 rng(7);
    for (int trial = 0; trial < 300; ++trial) {
        const std::size_t nd = 1 + static_cast<std::size_t>(rng() % 4);
        Shape shape(nd), off(nd), ext(nd);
        for (std::size_t d = 0; d < nd; ++d) {
            shape[d] = 1 + static_cast<std::int64_t>(rng() % 5);
            off[d] = static_cast<std::int64_t>(rng() % static_cast<std::uint32_t>(shape[d]));
            ext[d] = 1 + static_cast<std::int64_t>(rng() % static_cast<std::uint32_t>(shape[d] - off[d]));
            if (rng() % 3 == 0) { // whole dimensions make longer runs
                off[d] = 0;
                ext[d] = shape[d];
            }
        }
        const Box box{off, ext};
        std::vector<std::uint64_t> want; // linear indices in the array, box row-major
        const auto strides = row_major_strides(shape);
        for (std::int64_t i = 0; i < box.volume(); ++i) {
            const Shape idx = unravel(i, ext);
            std::int64_t lin = 0;
            for (std::size_t d = 0; d < nd; ++d)
                lin += (off[d] + idx[d]) * strides[d];
            want.push_back(static_cast<std::uint64_t>(lin));
        }
        std::vector<std::uint64_t> got;
        std::size_t runs = 0;
        cairn::detail::for_each_run(shape, box, [&](std::uint64_t first, std::uint64_t n) {
            ++runs;
            for (std::uint64_t k = 0; k < n; ++k)
                got.push_back(first + k);
        });
        INFO("shape " << shape_str(shape) << " box " << box.str());
        CHECK(got == want);
        if (box == whole(shape))
            CHECK(runs == 1);
    }
    std::size_t calls = 0;
    cairn::detail::for_each_run(Shape{}, Box{}, [&](std::uint64_t first, std::uint64_t n) {
        ++calls;
        CHECK(first == 0);
        CHECK(n == 1);
    });
    CHECK(calls == 1);
}
