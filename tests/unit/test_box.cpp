// Geometry of boxes (include/cairn/box.hpp) and copy_strided.
#include "unit_common.hpp"

#include "cairn/box.hpp"
#include "cairn/dtype.hpp"

#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

using namespace cairn;

namespace {

// ---- a naive reference: visit every multi-index of `shape` in row-major order
template <class F>
void for_each_index(const Shape& shape, F&& f)
{
    if (volume(shape) <= 0)
        return;
    Shape idx(shape.size(), 0);
    for (;;) {
        f(idx);
        std::size_t d = shape.size();
        for (; d-- > 0;) {
            if (++idx[d] < shape[d])
                break;
            idx[d] = 0;
        }
        if (d == static_cast<std::size_t>(-1))
            return;
    }
}

std::int64_t offset_of(const Shape& idx, const Shape& strides)
{
    std::int64_t o = 0;
    for (std::size_t d = 0; d < idx.size(); ++d)
        o += idx[d] * strides[d];
    return o;
}

// The byte pattern of element `linear` (every byte of every element differs
// from its neighbours, so a misplaced or partial copy is seen).
std::uint8_t pattern(std::int64_t linear, std::size_t byte)
{
    return static_cast<std::uint8_t>((linear * 31 + static_cast<std::int64_t>(byte) * 7 + 1) % 251);
}

constexpr std::uint8_t k_sentinel = 0xEE;

} // namespace

TEST_CASE("Box: volume, empty, inside, str, comparisons", "[geometry]")
{
    const Box b{{1, 2}, {3, 4}};
    CHECK(b.ndim() == 2);
    CHECK(b.volume() == 12);
    CHECK_FALSE(b.empty());
    CHECK(b.inside({4, 6}));
    CHECK(b.inside({10, 10}));
    CHECK_FALSE(b.inside({4, 5}));   // last column sticks out
    CHECK_FALSE(b.inside({3, 6}));   // last row sticks out
    CHECK_FALSE(b.inside({4}));      // rank differs
    CHECK_FALSE(b.inside({4, 6, 1}));
    CHECK(b.str() == "[1:4, 2:6]");

    SECTION("zero extent: empty, still inside when at the border")
    {
        const Box z{{0, 2}, {0, 5}};
        CHECK(z.volume() == 0);
        CHECK(z.empty());
        CHECK(z.inside({0, 7}));
        CHECK(Box{{2}, {0}}.inside({2}));
        CHECK_FALSE(Box{{3}, {0}}.inside({2}));
        CHECK(z.str() == "[0:0, 2:7]");
    }
    SECTION("0-d box: one element, inside the 0-d shape only")
    {
        const Box s{};
        CHECK(s.ndim() == 0);
        CHECK(s.volume() == 1);
        CHECK_FALSE(s.empty());
        CHECK(s.inside({}));
        CHECK_FALSE(s.inside({1}));
        CHECK(s.str() == "[]");
    }
    SECTION("negative offsets or extents are never inside")
    {
        CHECK_FALSE(Box{{-1}, {2}}.inside({5}));
        CHECK_FALSE(Box{{1}, {-1}}.inside({5}));
        CHECK_FALSE(Box{{0, 0}, {1}}.inside({5, 5})); // shape rank differs from offsets rank
    }
    SECTION("huge extents do not overflow the bounds check")
    {
        const auto big = std::int64_t(1) << 61;
        const auto max = std::numeric_limits<std::int64_t>::max();
        CHECK_FALSE(Box{{big}, {big}}.inside({big + 1}));
        CHECK(Box{{big}, {big}}.inside({2 * big}));
        CHECK_FALSE(Box{{max - 1}, {max - 1}}.inside({max})); // offset + extent overflows
        CHECK(Box{{max - 1}, {1}}.inside({max}));
    }
    SECTION("comparisons")
    {
        CHECK(b == Box{{1, 2}, {3, 4}});
        CHECK(b != Box{{1, 2}, {3, 5}});
        CHECK(b != Box{{1, 3}, {3, 4}});
        CHECK(Box{{0, 9}, {9, 9}} < Box{{1, 0}, {1, 1}}); // offsets compare first
        CHECK(Box{{1, 0}, {1, 1}} < Box{{1, 0}, {1, 2}});
        CHECK_FALSE(b < b);
    }
}

TEST_CASE("volume, shape_str, whole", "[geometry]")
{
    CHECK(volume(Shape{}) == 1);
    CHECK(volume(Shape{7}) == 7);
    CHECK(volume(Shape{2, 3, 4}) == 24);
    CHECK(volume(Shape{2, 0, 4}) == 0);
    CHECK(shape_str({4, 5, 6}) == "[4, 5, 6]");
    CHECK(shape_str({}) == "[]");
    CHECK(whole({3, 4}) == Box{{0, 0}, {3, 4}});
    CHECK(whole({}) == Box{});
    CHECK(whole({}).volume() == 1);
    CHECK(whole({5, 0}).empty());
}

TEST_CASE("intersect", "[geometry]")
{
    SECTION("partial overlap, both orders")
    {
        const Box a{{0, 0}, {4, 4}}, b{{2, 1}, {4, 2}};
        const auto r1 = intersect(a, b), r2 = intersect(b, a);
        REQUIRE(r1.has_value());
        REQUIRE(r2.has_value());
        CHECK(*r1 == Box{{2, 1}, {2, 2}});
        CHECK(*r2 == *r1);
    }
    SECTION("touching edges do not overlap")
    {
        CHECK_FALSE(intersect(Box{{0}, {4}}, Box{{4}, {2}}).has_value());
        CHECK_FALSE(intersect(Box{{4}, {2}}, Box{{0}, {4}}).has_value());
        CHECK_FALSE(intersect(Box{{0, 0}, {2, 2}}, Box{{0, 2}, {2, 2}}).has_value());
        CHECK_FALSE(intersect(Box{{0, 0}, {2, 2}}, Box{{2, 2}, {2, 2}}).has_value()); // corner only
    }
    SECTION("disjoint")
    {
        CHECK_FALSE(intersect(Box{{0}, {3}}, Box{{10}, {3}}).has_value());
        CHECK_FALSE(intersect(Box{{0, 0}, {3, 3}}, Box{{1, 5}, {1, 1}}).has_value()); // overlap in dim 0 only
    }
    SECTION("nested and identical")
    {
        const Box outer{{0, 0, 0}, {8, 8, 8}}, inner{{2, 3, 4}, {1, 2, 3}};
        const auto r = intersect(outer, inner);
        REQUIRE(r.has_value());
        CHECK(*r == inner);
        const auto same = intersect(inner, inner);
        REQUIRE(same.has_value());
        CHECK(*same == inner);
    }
    SECTION("an empty box overlaps nothing")
    {
        CHECK_FALSE(intersect(Box{{1, 1}, {0, 3}}, Box{{0, 0}, {5, 5}}).has_value());
    }
    SECTION("0-d boxes intersect in the 0-d box")
    {
        const auto r = intersect(Box{}, Box{});
        REQUIRE(r.has_value());
        CHECK(r->ndim() == 0);
        CHECK(r->volume() == 1);
    }
    SECTION("different ranks do not intersect")
    {
        CHECK_FALSE(intersect(Box{{0}, {4}}, Box{{0, 0}, {4, 4}}).has_value());
        CHECK_FALSE(intersect(Box{}, Box{{0}, {1}}).has_value());
    }
    SECTION("random boxes against cell counting")
    {
        std::mt19937 rng(12345);
        std::uniform_int_distribution<int> nd_dist(1, 3), off(0, 6), ext(0, 5);
        for (int iter = 0; iter < 500; ++iter) {
            const auto nd = static_cast<std::size_t>(nd_dist(rng));
            Box a, b;
            for (std::size_t d = 0; d < nd; ++d) {
                a.offsets.push_back(off(rng));
                a.shape.push_back(ext(rng));
                b.offsets.push_back(off(rng));
                b.shape.push_back(ext(rng));
            }
            // count the cells of a 12^nd grid in both boxes
            std::int64_t both = 0;
            const auto in = [](const Box& x, const Shape& i) {
                for (std::size_t d = 0; d < i.size(); ++d)
                    if (i[d] < x.offsets[d] || i[d] >= x.offsets[d] + x.shape[d])
                        return false;
                return true;
            };
            const auto r = intersect(a, b);
            bool all_in_r = true;
            for_each_index(Shape(nd, 12), [&](const Shape& i) {
                if (in(a, i) && in(b, i)) {
                    ++both;
                    all_in_r = all_in_r && r && in(*r, i);
                }
            });
            INFO("a = " << a.str() << ", b = " << b.str());
            if (both == 0) {
                CHECK_FALSE(r.has_value());
            } else {
                REQUIRE(r.has_value());
                CHECK(r->volume() == both);
                CHECK(all_in_r);
            }
        }
    }
}

TEST_CASE("row_major_strides", "[geometry]")
{
    CHECK(row_major_strides({}) == Shape{});
    CHECK(row_major_strides({5}) == Shape{1});
    CHECK(row_major_strides({2, 3, 4}) == Shape{12, 4, 1});
    CHECK(row_major_strides({3, 0, 2}) == Shape{0, 2, 1});
    CHECK(row_major_strides({2, 3, 4, 5}) == Shape{60, 20, 5, 1});
}

TEST_CASE("copy_strided: dense to dense", "[geometry]")
{
    const Shape shape{3, 4, 5};
    std::vector<double> src(60), dst(60, -1.0);
    for (std::size_t i = 0; i < src.size(); ++i)
        src[i] = 0.5 * static_cast<double>(i);
    copy_strided(StridedView{dst.data(), sizeof(double), shape, row_major_strides(shape)},
                 StridedView{src.data(), sizeof(double), shape, row_major_strides(shape)});
    CHECK(dst == src);
}

TEST_CASE("copy_strided: interior window of an array with ghost cells", "[geometry]")
{
    // a 6x7 local array, interior 4x5 starting at (1, 1): ghost layer of 1
    constexpr int R = 6, C = 7;
    const Shape interior{4, 5};
    const Shape padded_strides{C, 1};

    SECTION("strided window to dense")
    {
        std::vector<std::int32_t> a(R * C);
        for (int i = 0; i < R * C; ++i)
            a[i] = 1000 + i;
        std::vector<std::int32_t> dense(20, -1);
        copy_strided(StridedView{dense.data(), 4, interior, row_major_strides(interior)},
                     StridedView{&a[C + 1], 4, interior, padded_strides});
        for (int i = 0; i < 4; ++i)
            for (int j = 0; j < 5; ++j) {
                INFO("i=" << i << " j=" << j);
                CHECK(dense[i * 5 + j] == a[(i + 1) * C + (j + 1)]);
            }
    }
    SECTION("dense to strided window: ghosts stay untouched")
    {
        std::vector<std::int32_t> dense(20);
        for (int i = 0; i < 20; ++i)
            dense[i] = 7 * i + 3;
        std::vector<std::int32_t> a(R * C, -99);
        copy_strided(StridedView{&a[C + 1], 4, interior, padded_strides},
                     StridedView{dense.data(), 4, interior, row_major_strides(interior)});
        for (int i = 0; i < R; ++i)
            for (int j = 0; j < C; ++j) {
                INFO("i=" << i << " j=" << j);
                const bool ghost = i == 0 || j == 0 || i == R - 1 || j == C - 1;
                CHECK(a[i * C + j] == (ghost ? -99 : dense[(i - 1) * 5 + (j - 1)]));
            }
    }
}

TEST_CASE("copy_strided: column views and non-unit inner strides", "[geometry]")
{
    // a dense 5x4 matrix
    std::vector<double> m(20);
    for (int i = 0; i < 20; ++i)
        m[i] = i;
    SECTION("a column to a dense vector and back")
    {
        std::vector<double> col(5, -1);
        copy_strided(StridedView{col.data(), 8, {5}, {1}}, StridedView{&m[2], 8, {5}, {4}});
        CHECK(col == std::vector<double>{2, 6, 10, 14, 18});

        std::vector<double> v{100, 101, 102, 103, 104};
        copy_strided(StridedView{&m[1], 8, {5}, {4}}, StridedView{v.data(), 8, {5}, {1}});
        for (int i = 0; i < 5; ++i)
            for (int j = 0; j < 4; ++j)
                CHECK(m[i * 4 + j] == (j == 1 ? 100.0 + i : double(i * 4 + j)));
    }
    SECTION("stride 2 source into stride 3 destination")
    {
        std::vector<std::uint16_t> src(10), dst(15, 0xFFFF);
        for (int i = 0; i < 10; ++i)
            src[i] = static_cast<std::uint16_t>(i * 11);
        copy_strided(StridedView{dst.data(), 2, {5}, {3}}, StridedView{src.data(), 2, {5}, {2}});
        for (int i = 0; i < 15; ++i)
            CHECK(dst[i] == (i % 3 == 0 ? src[(i / 3) * 2] : 0xFFFF));
    }
    SECTION("a transposed view")
    {
        // view the 5x4 matrix as its 4x5 transpose: strides {1, 4}
        std::vector<double> t(20, -1);
        copy_strided(StridedView{t.data(), 8, {4, 5}, {5, 1}}, StridedView{m.data(), 8, {4, 5}, {1, 4}});
        for (int i = 0; i < 4; ++i)
            for (int j = 0; j < 5; ++j)
                CHECK(t[i * 5 + j] == m[j * 4 + i]);
    }
}

TEST_CASE("copy_strided: 0-d views and zero volume", "[geometry]")
{
    SECTION("0-d copies exactly one element")
    {
        std::int64_t src = 0x0123456789ABCDEF, dst[2] = {0, 42};
        copy_strided(StridedView{dst, 8, {}, {}}, StridedView{&src, 8, {}, {}});
        CHECK(dst[0] == src);
        CHECK(dst[1] == 42);
    }
    SECTION("zero volume is a no-op, even with null pointers")
    {
        std::vector<float> dst(6, 3.0f), src(6, 9.0f);
        copy_strided(StridedView{dst.data(), 4, {3, 0, 2}, {0, 2, 1}}, StridedView{src.data(), 4, {3, 0, 2}, {0, 2, 1}});
        CHECK(dst == std::vector<float>(6, 3.0f));
        CHECK_NOTHROW(copy_strided(StridedView{nullptr, 4, {0}, {1}}, StridedView{nullptr, 4, {0}, {1}}));
    }
}

TEST_CASE("copy_strided: mismatched views throw std::invalid_argument", "[geometry]")
{
    std::vector<double> a(64), b(64);
    const auto v = [&](std::vector<double>& x, std::size_t es, Shape shape, Shape strides) {
        return StridedView{x.data(), es, std::move(shape), std::move(strides)};
    };
    CHECK_THROWS_AS(copy_strided(v(a, 8, {4, 4}, {4, 1}), v(b, 8, {4, 5}, {5, 1})), std::invalid_argument);
    CHECK_THROWS_AS(copy_strided(v(a, 8, {4, 4}, {4, 1}), v(b, 8, {16}, {1})), std::invalid_argument);
    CHECK_THROWS_AS(copy_strided(v(a, 8, {4, 4}, {4, 1}), v(b, 4, {4, 4}, {4, 1})), std::invalid_argument);
    CHECK_THROWS_AS(copy_strided(v(a, 8, {4, 4}, {1}), v(b, 8, {4, 4}, {4, 1})), std::invalid_argument);
    CHECK_THROWS_AS(copy_strided(v(a, 8, {4, 4}, {4, 1}), v(b, 8, {4, 4}, {})), std::invalid_argument);
    CHECK(a == std::vector<double>(64, 0.0)); // nothing was written
}

TEST_CASE("copy_strided: random 1-D to 4-D windows, element sizes 1 to 16", "[geometry]")
{
    std::mt19937 rng(20240601);
    const std::size_t elem_sizes[] = {dtype_size(DType::u8), dtype_size(DType::f16), dtype_size(DType::f32),
                                      dtype_size(DType::f64), 16};
    REQUIRE(elem_sizes[0] == 1);
    REQUIRE(elem_sizes[1] == 2);
    REQUIRE(elem_sizes[2] == 4);
    REQUIRE(elem_sizes[3] == 8);
    std::uniform_int_distribution<int> ext(1, 5), pad(0, 2), coin(0, 3);

    // strides of a window into a larger array: each dim padded (sometimes
    // not), the innermost stride sometimes > 1
    const auto make_strides = [&](const Shape& shape, Shape& alloc_extents) {
        const auto nd = shape.size();
        Shape full(nd);
        for (std::size_t d = 0; d < nd; ++d)
            full[d] = shape[d] + (coin(rng) == 0 ? 0 : pad(rng));
        const std::int64_t inner = coin(rng) == 0 ? 2 + pad(rng) : 1;
        Shape st(nd);
        std::int64_t s = inner;
        for (std::size_t d = nd; d-- > 0;) {
            st[d] = s;
            s *= full[d];
        }
        alloc_extents = {s};
        return st;
    };

    int checked = 0;
    for (std::size_t es : elem_sizes) {
        for (std::size_t nd = 1; nd <= 4; ++nd) {
            for (int iter = 0; iter < 25; ++iter) {
                Shape shape(nd);
                for (auto& x : shape)
                    x = ext(rng);
                Shape sa, da;
                const Shape sst = make_strides(shape, sa);
                const Shape dst_st = make_strides(shape, da);
                std::vector<std::uint8_t> src(static_cast<std::size_t>(sa[0]) * es, k_sentinel);
                std::vector<std::uint8_t> dst(static_cast<std::size_t>(da[0]) * es, k_sentinel);
                // fill the source elements of the window with a pattern
                std::int64_t lin = 0;
                for_each_index(shape, [&](const Shape& i) {
                    const auto o = static_cast<std::size_t>(offset_of(i, sst)) * es;
                    for (std::size_t k = 0; k < es; ++k)
                        src[o + k] = pattern(lin, k);
                    ++lin;
                });
                const auto src_before = src;
                copy_strided(StridedView{dst.data(), es, shape, dst_st}, StridedView{src.data(), es, shape, sst});

                // expected destination: sentinel everywhere but the window
                std::vector<std::uint8_t> expect(dst.size(), k_sentinel);
                lin = 0;
                for_each_index(shape, [&](const Shape& i) {
                    const auto o = static_cast<std::size_t>(offset_of(i, dst_st)) * es;
                    for (std::size_t k = 0; k < es; ++k)
                        expect[o + k] = pattern(lin, k);
                    ++lin;
                });
                INFO("elem_size " << es << ", shape " << shape_str(shape) << ", src strides " << shape_str(sst)
                                  << ", dst strides " << shape_str(dst_st));
                CHECK(dst == expect);
                CHECK(src == src_before);
                ++checked;
            }
        }
    }
    CHECK(checked == 5 * 4 * 25);
}

TEST_CASE("copy_strided: extent-1 dimensions with arbitrary strides", "[geometry]")
{
    const Shape shape{1, 3, 1, 4};
    std::vector<std::int16_t> src(12), dst(100, -1);
    for (int i = 0; i < 12; ++i)
        src[i] = static_cast<std::int16_t>(i + 1);
    // destination: dims of extent 1 get odd strides that must not matter
    const Shape dst_st{999, 10, 77, 2};
    copy_strided(StridedView{dst.data(), 2, shape, dst_st}, StridedView{src.data(), 2, shape, row_major_strides(shape)});
    for (int i = 0; i < 100; ++i) {
        const bool in = (i % 2 == 0) && (i % 10) / 2 < 4 && i / 10 < 3;
        INFO("i=" << i);
        CHECK(dst[i] == (in ? src[(i / 10) * 4 + (i % 10) / 2] : -1));
    }
}
