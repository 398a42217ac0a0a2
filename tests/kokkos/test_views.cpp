// The Kokkos::View adapter: shards of views of both layouts with their true
// strides, subviews with ghost layers, and save on N ranks / load on M ranks
// with another decomposition and the other layout. Where Kokkos has its CUDA
// backend and Cairn its CUDA staging, the same round trips run with views in
// Kokkos::CudaSpace (device memory), alone and mixed with host views, in both
// storage layouts.
#include "fixtures.hpp"

#include <cairn/config.hpp>
#include <cairn/kokkos.hpp>

#include <Kokkos_Core.hpp>

#include <catch2/catch.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

using namespace cairn_test;

#if defined(KOKKOS_ENABLE_CUDA) && CAIRN_HAVE_CUDA
#define CAIRN_TEST_KOKKOS_CUDA 1
#else
#define CAIRN_TEST_KOKKOS_CUDA 0
#endif

namespace {

// nd<T, R>::type is T with R stars: the data type of a rank-R view.
template <class T, std::size_t R>
struct nd {
    using type = typename nd<T, R - 1>::type*;
};
template <class T>
struct nd<T, 0> {
    using type = T;
};

enum class Layout { right, left };

Layout other(Layout l) { return l == Layout::right ? Layout::left : Layout::right; }
const char* name_of(Layout l) { return l == Layout::right ? "LayoutRight" : "LayoutLeft"; }
const char* name_of(Decomp d)
{
    switch (d) {
    case Decomp::dim0: return "dim0";
    case Decomp::last_dim: return "last_dim";
    case Decomp::grid: return "grid";
    case Decomp::replicated: return "replicated";
    case Decomp::single_owner: return "single_owner";
    }
    return "?";
}

// Calls f(idx) for every multi-index of `ext`, the last index fastest.
template <std::size_t R, class F>
void for_each_index(const std::array<std::size_t, R>& ext, F&& f)
{
    for (const std::size_t e : ext)
        if (e == 0)
            return;
    std::array<std::size_t, R> idx{};
    for (;;) {
        f(idx);
        std::size_t d = R;
        for (;;) {
            if (d == 0)
                return;
            --d;
            if (++idx[d] < ext[d])
                break;
            idx[d] = 0;
        }
    }
}

template <class V, std::size_t R, std::size_t... I>
typename V::reference_type at_impl(const V& v, const std::array<std::size_t, R>& i, std::index_sequence<I...>)
{
    return v(i[I]...);
}

// v(i[0], ..., i[R-1]).
template <class V, std::size_t R>
typename V::reference_type at(const V& v, const std::array<std::size_t, R>& i)
{
    return at_impl(v, i, std::make_index_sequence<R>{});
}

// Row-major linear index of `g` in a global array of `shape`.
template <std::size_t R>
std::int64_t linear_index(const cairn::Shape& shape, const std::array<std::int64_t, R>& g)
{
    std::int64_t lin = 0;
    for (std::size_t d = 0; d < R; ++d)
        lin = lin * shape[d] + g[d];
    return lin;
}

constexpr std::int64_t ghost_value = -1;
constexpr std::int64_t unloaded_value = -2;

// One rank's part of a global array, in a view of layout L in memory space
// Space, with `ghost` extra cells on each side of every dimension. The values
// are set and checked in a host mirror (the view itself for host spaces).
struct AnyField {
    virtual ~AnyField() = default;
    /// Interior: the known values; ghosts: ghost_value.
    virtual void fill() = 0;
    /// Interior: unloaded_value; ghosts: ghost_value.
    virtual void clear() = 0;
    /// Number of elements that differ from fill()'s.
    virtual std::int64_t errors() const = 0;
    /// Adds the interior subview.
    virtual void add_to(cairn::StateDict& state) = 0;
};

template <class T, std::size_t R, class L, class Space = Kokkos::HostSpace>
struct Field : AnyField {
    using View = Kokkos::View<typename nd<T, R>::type, L, Space>;

    Field(std::string name_, cairn::Shape global_, cairn::Box box_, std::size_t ghost_, int salt_)
        : name(std::move(name_)), global(std::move(global_)), box(std::move(box_)), ghost(ghost_), salt(salt_),
          full(make(std::make_index_sequence<R>{})), mirror(Kokkos::create_mirror_view(full))
    {
    }

    template <std::size_t... I>
    View make(std::index_sequence<I...>) const
    {
        return View(name, static_cast<std::size_t>(box.shape[I] + 2 * static_cast<std::int64_t>(ghost))...);
    }

    template <std::size_t... I>
    auto interior_impl(std::index_sequence<I...>) const
    {
        return Kokkos::subview(full, Kokkos::pair<std::size_t, std::size_t>(
                                         ghost, ghost + static_cast<std::size_t>(box.shape[I]))...);
    }
    auto interior() const { return interior_impl(std::make_index_sequence<R>{}); }

    std::array<std::size_t, R> extents() const
    {
        std::array<std::size_t, R> e{};
        for (std::size_t d = 0; d < R; ++d)
            e[d] = full.extent(d);
        return e;
    }

    // What element `idx` of the full view holds after fill() (or clear()).
    T expected(const std::array<std::size_t, R>& idx, bool loaded) const
    {
        std::array<std::int64_t, R> g{};
        for (std::size_t d = 0; d < R; ++d) {
            if (idx[d] < ghost || idx[d] >= ghost + static_cast<std::size_t>(box.shape[d]))
                return static_cast<T>(ghost_value);
            g[d] = box.offsets[d] + static_cast<std::int64_t>(idx[d] - ghost);
        }
        return static_cast<T>(loaded ? value_at(linear_index(global, g), salt) : unloaded_value);
    }

    void fill() override
    {
        for_each_index(extents(), [&](const auto& i) { at(mirror, i) = expected(i, true); });
        Kokkos::deep_copy(full, mirror);
    }
    void clear() override
    {
        for_each_index(extents(), [&](const auto& i) { at(mirror, i) = expected(i, false); });
        Kokkos::deep_copy(full, mirror);
    }
    std::int64_t errors() const override
    {
        Kokkos::deep_copy(mirror, full);
        std::int64_t n = 0;
        for_each_index(extents(), [&](const auto& i) {
            if (at(mirror, i) != expected(i, true))
                ++n;
        });
        if (n != 0)
            UNSCOPED_INFO("rank " << world_rank() << ": " << n << " wrong elements in " << name << " (" << R << "-d, "
                                  << Space::name() << ", box " << box.str() << ", ghost " << ghost << ")");
        return n;
    }
    void add_to(cairn::StateDict& state) override
    {
        cairn::kokkos::add_view(state, name, interior(), global, box.offsets);
    }

    std::string name;
    cairn::Shape global;
    cairn::Box box;
    std::size_t ghost;
    int salt;
    View full;
    decltype(Kokkos::create_mirror_view(std::declval<View>())) mirror; // View::HostMirror, renamed in Kokkos 4.x
};

// Where a state's views live: all in host memory, all in device memory, or
// alternating (from device) view by view.
enum class Where { host, device, alternate };

const char* name_of(Where w)
{
    switch (w) {
    case Where::host: return "HostSpace";
    case Where::device: return "CudaSpace";
    case Where::alternate: return "CudaSpace and HostSpace alternating";
    }
    return "?";
}

template <class T, std::size_t R, class Space>
std::unique_ptr<AnyField> make_field_in(Layout l, const std::string& name, const cairn::Shape& g, const cairn::Box& box,
                                        std::size_t ghost, int salt)
{
    if (l == Layout::right)
        return std::make_unique<Field<T, R, Kokkos::LayoutRight, Space>>(name, g, box, ghost, salt);
    return std::make_unique<Field<T, R, Kokkos::LayoutLeft, Space>>(name, g, box, ghost, salt);
}

template <class T, std::size_t R>
std::unique_ptr<AnyField> make_field(Layout l, bool device, const std::string& name, const cairn::Shape& g, Decomp d,
                                     int p, int r, int ghost, int salt)
{
    const cairn::Box box = decompose(g, d, p, r);
    const auto gh = static_cast<std::size_t>(ghost);
#if CAIRN_TEST_KOKKOS_CUDA
    if (device)
        return make_field_in<T, R, Kokkos::CudaSpace>(l, name, g, box, gh, salt);
#else
    REQUIRE_FALSE(device); // no device cases without CUDA
#endif
    return make_field_in<T, R, Kokkos::HostSpace>(l, name, g, box, gh, salt);
}

// The test state: views of ranks 1, 2, 3 and 8 and several dtypes, decomposed
// by `d` over `p` ranks, with layouts alternating from `first`, in memory
// spaces chosen by `where`.
struct State {
    State(Decomp d, Layout first, Where where, int ghost, int p, int r, bool fill)
    {
        Layout l = first;
        bool device = where != Where::host;
        auto next = [&] {
            const Layout now = l;
            l = other(l);
            return now;
        };
        auto dev = [&] {
            const bool now = device;
            if (where == Where::alternate)
                device = !device;
            return now;
        };
        fields.push_back(make_field<double, 1>(next(), dev(), "k1", {29}, d, p, r, ghost, 1));
        fields.push_back(make_field<float, 2>(next(), dev(), "grid.k2", {11, 7}, d, p, r, ghost, 2));
        fields.push_back(make_field<std::int32_t, 3>(next(), dev(), "k3", {5, 6, 4}, d, p, r, ghost, 3));
        fields.push_back(make_field<double, 8>(next(), dev(), "k8", {3, 2, 2, 3, 2, 1, 2, 2}, d, p, r, ghost, 4));
        fields.push_back(make_field<std::int64_t, 2>(next(), dev(), "k2b", {4, 9}, d, p, r, ghost, 5));
        for (auto& f : fields) {
            if (fill)
                f->fill();
            else
                f->clear();
            f->add_to(dict);
        }
    }
    std::int64_t errors() const
    {
        std::int64_t n = 0;
        for (const auto& f : fields)
            n += f->errors();
        return n;
    }
    std::vector<std::unique_ptr<AnyField>> fields;
    cairn::StateDict dict;
};

struct Side {
    Decomp decomp;
    Layout layout;
    int ghost;
    Where where = Where::host;
};

std::string describe(const Side& s)
{
    return std::string(name_of(s.decomp)) + ", first view " + name_of(s.layout) + ", ghost " +
           std::to_string(s.ghost) + ", " + name_of(s.where);
}

// Saves the state on the first `n` ranks, loads it on the first `m`; true on
// every rank when the save left its views alone and the load got every value
// without touching a ghost cell.
bool round_trip(const std::string& dir, int n, Side save, int m, Side load,
                cairn::Layout layout = cairn::Layout::automatic)
{
    const bool saved = run_on(n, [&](SubComm& c) {
        State s(save.decomp, save.layout, save.where, save.ghost, c.size(), c.rank(), true);
        cairn::SaveOptions o;
        o.fsync = false;
        o.layout = layout;
        Kokkos::fence();
        const auto r = cairn::save(s.dict, dir, c.get(), o);
        return r.entries == s.fields.size() && s.errors() == 0;
    });
    return saved && run_on(m, [&](SubComm& c) {
        State s(load.decomp, load.layout, load.where, load.ghost, c.size(), c.rank(), false);
        cairn::LoadOptions o;
        o.layout = layout;
        cairn::load(s.dict, dir, c.get(), o);
        return s.errors() == 0;
    });
}

} // namespace

TEST_CASE("a view's shard has the view's extents, data and true strides", "[kokkos][shard]")
{
    using cairn::Shape;
    bool ok = true;
    auto expect = [&](bool c, const char* what) {
        if (!c) {
            UNSCOPED_INFO("rank " << world_rank() << ": " << what);
            ok = false;
        }
    };

    Kokkos::View<double**, Kokkos::LayoutRight, Kokkos::HostSpace> r("r", 4, 5);
    auto sr = cairn::kokkos::shard(r, {8, 5}, {4, 0});
    expect(sr.dtype == cairn::DType::f64, "dtype of a double view");
    expect(sr.global_shape == Shape{8, 5} && sr.box.offsets == Shape{4, 0}, "global shape and offsets");
    expect(sr.box.shape == Shape{4, 5}, "LayoutRight box = extents");
    expect(sr.strides == Shape{5, 1}, "LayoutRight strides");
    expect(sr.data == r.data() && sr.space == cairn::MemorySpace::host, "LayoutRight data and space");

    // LayoutLeft: the same index order, the view's column-major strides.
    Kokkos::View<float**, Kokkos::LayoutLeft, Kokkos::HostSpace> l("l", 4, 5);
    auto sl = cairn::kokkos::shard(l, {4, 10}, {0, 5});
    expect(sl.dtype == cairn::DType::f32, "dtype of a float view");
    expect(sl.box.shape == Shape{4, 5}, "LayoutLeft box = extents in index order");
    expect(sl.strides == Shape{1, 4}, "LayoutLeft strides");
    expect(sl.data == l.data(), "LayoutLeft data");

    // A subview without the ghost layer: a strided window, no copy.
    auto li = Kokkos::subview(l, Kokkos::pair<int, int>(1, 3), Kokkos::pair<int, int>(1, 4));
    auto sli = cairn::kokkos::shard(li, {2, 3}, {0, 0});
    expect(sli.box.shape == Shape{2, 3} && sli.strides == Shape{1, 4}, "LayoutLeft subview extents and strides");
    expect(sli.data == &l(1, 1), "LayoutLeft subview data");
    Kokkos::View<std::int32_t***, Kokkos::LayoutRight, Kokkos::HostSpace> r3("r3", 4, 5, 6);
    auto r3i = Kokkos::subview(r3, Kokkos::pair<int, int>(1, 3), Kokkos::pair<int, int>(1, 4), Kokkos::pair<int, int>(2, 4));
    auto sr3 = cairn::kokkos::shard(r3i, {2, 3, 2}, {0, 0, 0});
    expect(sr3.dtype == cairn::DType::i32, "dtype of an int32 view");
    expect(sr3.box.shape == Shape{2, 3, 2} && sr3.strides == Shape{30, 6, 1}, "LayoutRight subview");
    expect(sr3.data == &r3(1, 1, 2), "LayoutRight subview data");

    // Replicated: the whole array; a const view; a 0-d view.
    auto rep = cairn::kokkos::shard(l);
    expect(rep.global_shape == Shape{4, 5} && rep.box == cairn::whole({4, 5}), "replicated shard");
    Kokkos::View<const double**, Kokkos::LayoutRight, Kokkos::HostSpace> c = r;
    expect(cairn::kokkos::shard(c).data == r.data(), "const view");
    Kokkos::View<double, Kokkos::HostSpace> s0("s0");
    auto s0s = cairn::kokkos::shard(s0);
    expect(s0s.global_shape.empty() && s0s.box.shape.empty() && s0s.data == s0.data(), "0-d view");
    expect(cairn::kokkos::detail::memory_space_of<Kokkos::HostSpace>("x") == cairn::MemorySpace::host,
           "HostSpace is host memory");

    // Wrong ranks and boxes outside the global shape are the caller's error.
    cairn::StateDict sd;
    try {
        cairn::kokkos::add_view(sd, "bad_rank", r, {8, 5, 1}, {0, 0, 0});
        expect(false, "no error for a global shape of the wrong rank");
    } catch (const cairn::error::WrongAPIUsage& e) {
        expect(std::string(e.what()).find("'r'") != std::string::npos, "the error names the view");
    }
    try {
        cairn::kokkos::add_view(sd, "outside", r, {4, 5}, {2, 0});
        expect(false, "no error for a box outside the global shape");
    } catch (const cairn::error::WrongAPIUsage&) {
    }
    expect(sd.size() == 0, "nothing added after errors");
    CHECK(cairn_test::all(ok));
}

TEST_CASE("views of both layouts with ghost cells round-trip and reshard", "[kokkos][reshard]")
{
    const int w = world_size();
    const std::vector<std::pair<Side, Side>> cases = {
        {{Decomp::dim0, Layout::right, 1}, {Decomp::last_dim, Layout::left, 0}},
        {{Decomp::grid, Layout::left, 2}, {Decomp::grid, Layout::right, 1}},
        {{Decomp::single_owner, Layout::left, 0}, {Decomp::dim0, Layout::left, 1}},
        {{Decomp::last_dim, Layout::right, 0}, {Decomp::replicated, Layout::left, 2}},
    };
    for (int n = 1; n <= w; ++n) {
        for (int m = 1; m <= w; ++m) {
            const std::string dir = fresh_dir("kokkos_reshard_" + std::to_string(w)) + "/ckpt_" + std::to_string(n) +
                                    "_" + std::to_string(m) + "_";
            for (std::size_t k = 0; k < cases.size(); ++k) {
                const Side& s = cases[k].first;
                const Side& l = cases[k].second;
                INFO("save on " << n << " ranks (" << describe(s) << "), load on " << m << " (" << describe(l) << ")");
                CHECK(round_trip(dir + std::to_string(k), n, s, m, l));
            }
        }
    }
}

#if CAIRN_TEST_KOKKOS_CUDA
TEST_CASE("views in CUDA device memory are staged, resharded and loaded into either space", "[kokkos][cuda]")
{
    using cairn::Shape;
    // The memory spaces of Kokkos' CUDA backend.
    CHECK(cairn::kokkos::detail::memory_space_of<Kokkos::CudaSpace>("x") == cairn::MemorySpace::cuda);
    CHECK(cairn::kokkos::detail::memory_space_of<Kokkos::CudaUVMSpace>("x") == cairn::MemorySpace::host);
    CHECK(cairn::kokkos::detail::memory_space_of<Kokkos::CudaHostPinnedSpace>("x") == cairn::MemorySpace::host);
    Kokkos::View<double**, Kokkos::CudaSpace> d("d", 6, 4); // LayoutLeft, CUDA's default
    auto sd = cairn::kokkos::shard(Kokkos::subview(d, Kokkos::pair<int, int>(1, 5), Kokkos::pair<int, int>(1, 3)),
                                   {4, 2}, {0, 0});
    CHECK(sd.space == cairn::MemorySpace::cuda);
    CHECK(sd.strides == Shape{1, 6});
    CHECK(sd.data == d.data() + 7);

    const int w = world_size();
    const std::vector<std::pair<Side, Side>> cases = {
        {{Decomp::dim0, Layout::left, 1, Where::device}, {Decomp::last_dim, Layout::right, 2, Where::device}},
        {{Decomp::grid, Layout::right, 2, Where::device}, {Decomp::dim0, Layout::left, 0, Where::host}},
        {{Decomp::single_owner, Layout::left, 0, Where::host}, {Decomp::grid, Layout::left, 1, Where::device}},
        {{Decomp::last_dim, Layout::left, 1, Where::alternate},
         {Decomp::replicated, Layout::right, 1, Where::alternate}},
    };
    const std::vector<std::pair<cairn::Layout, const char*>> layouts = {{cairn::Layout::per_rank, "per-rank"},
                                                                        {cairn::Layout::container, "container"}};
    for (const auto& [layout, layout_name] : layouts) {
        for (const auto& [n, m] : std::vector<std::pair<int, int>>{{w, w}, {w, w > 1 ? w - 1 : 1}, {1, w}}) {
            const std::string dir = fresh_dir("kokkos_cuda_" + std::to_string(w)) + "/" + layout_name + "_" +
                                    std::to_string(n) + "_" + std::to_string(m) + "_";
            for (std::size_t k = 0; k < cases.size(); ++k) {
                const Side& s = cases[k].first;
                const Side& l = cases[k].second;
                INFO(layout_name << " layout: save on " << n << " ranks (" << describe(s) << "), load on " << m << " ("
                                 << describe(l) << ")");
                CHECK(round_trip(dir + std::to_string(k), n, s, m, l, layout));
            }
        }
    }
}
#endif

TEST_CASE("views are stored in index order, whatever their layout", "[kokkos][format]")
{
    const int w = world_size();
    const std::string dir = fresh_dir("kokkos_order_" + std::to_string(w));
    const cairn::Shape g{6, 5, 4};

    // LayoutLeft views with ghosts on every rank -> plain row-major buffers.
    {
        Field<std::int64_t, 3, Kokkos::LayoutLeft> f("cube", g, decompose(g, Decomp::dim0, w, world_rank()), 1, 7);
        f.fill();
        cairn::StateDict sd;
        f.add_to(sd);
        cairn::save(sd, dir + "/left", MPI_COMM_WORLD);
    }
    const auto md = cairn::read_metadata(dir + "/left");
    CHECK(md.entries.at("cube").global_shape == g);
    std::vector<std::int64_t> plain(static_cast<std::size_t>(cairn::volume(g)), -5);
    {
        cairn::StateDict sd;
        sd.add_replicated("cube", plain.data(), g);
        cairn::load(sd, dir + "/left", MPI_COMM_WORLD);
    }
    bool ok = true;
    for (std::size_t i = 0; i < plain.size(); ++i)
        ok = ok && plain[i] == value_at(static_cast<std::int64_t>(i), 7);
    CHECK(cairn_test::all(ok));

    // Plain row-major buffers -> LayoutLeft subviews.
    {
        cairn::StateDict sd;
        sd.add_replicated("cube", plain.data(), g);
        cairn::save(sd, dir + "/plain", MPI_COMM_WORLD);
    }
    Field<std::int64_t, 3, Kokkos::LayoutLeft> f("cube", g, decompose(g, Decomp::grid, w, world_rank()), 2, 7);
    f.clear();
    cairn::StateDict sd;
    f.add_to(sd);
    cairn::load(sd, dir + "/plain", MPI_COMM_WORLD);
    CHECK(cairn_test::all(f.errors() == 0));
}

TEST_CASE("replicated views are stored once and load into the other layout", "[kokkos][replicated]")
{
    const int w = world_size();
    const std::string dir = fresh_dir("kokkos_rep_" + std::to_string(w)) + "/ckpt";
    auto value = [](std::size_t i, std::size_t j) { return static_cast<double>(value_at(static_cast<std::int64_t>(i * 3 + j), 5)); };
    {
        Kokkos::View<double**, Kokkos::LayoutLeft, Kokkos::HostSpace> t("table", 4, 3);
        for (std::size_t i = 0; i < 4; ++i)
            for (std::size_t j = 0; j < 3; ++j)
                t(i, j) = value(i, j);
        Kokkos::View<double, Kokkos::HostSpace> s("scale");
        s() = 2.5;
        cairn::StateDict sd;
        cairn::kokkos::add_view(sd, "table", t);
        cairn::kokkos::add_view(sd, "scale", s);
        cairn::save(sd, dir, MPI_COMM_WORLD);
    }
    const auto md = cairn::read_metadata(dir);
    CHECK(md.entries.at("table").chunks.size() == 1);
    CHECK(md.entries.at("table").global_shape == cairn::Shape{4, 3});
    const int m = w > 1 ? w - 1 : 1;
    CHECK(run_on(m, [&](SubComm& c) {
        Kokkos::View<double**, Kokkos::LayoutRight, Kokkos::HostSpace> u("table", 4, 3);
        Kokkos::deep_copy(u, -1.0);
        Kokkos::View<double, Kokkos::HostSpace> s("scale");
        cairn::StateDict sd;
        cairn::kokkos::add_view(sd, "table", u);
        cairn::kokkos::add_view(sd, "scale", s);
        cairn::load(sd, dir, c.get());
        bool good = s() == 2.5;
        for (std::size_t i = 0; i < 4; ++i)
            for (std::size_t j = 0; j < 3; ++j)
                good = good && u(i, j) == value(i, j);
        return good;
    }));
}

TEST_CASE("several views of one array per rank (tiles) save on N ranks and load on M as other tiles", "[kokkos][boxes]")
{
    // A 14 x 10 f64 array in tiles of 7 x 5 (tile k held by rank k % n),
    // each a subview with one ghost layer of a view of its own, of either
    // layout; loaded on M ranks into row blocks as two views each (left and
    // right halves, overlapping by one column).
    const int w = world_size();
    const cairn::Shape g{14, 10};
    const auto value = [](std::int64_t i, std::int64_t j) { return static_cast<double>(100 * i + j); };
    using Right = Kokkos::View<double**, Kokkos::LayoutRight, Kokkos::HostSpace>;
    using Left = Kokkos::View<double**, Kokkos::LayoutLeft, Kokkos::HostSpace>;
    const auto inner = [](const auto& v) {
        return Kokkos::subview(v, Kokkos::pair<std::size_t, std::size_t>(1, v.extent(0) - 1),
                               Kokkos::pair<std::size_t, std::size_t>(1, v.extent(1) - 1));
    };
    for (int n = 1; n <= w; ++n) {
        for (int m = 1; m <= w; ++m) {
            const std::string dir =
                fresh_dir("kokkos_tiles_" + std::to_string(w)) + "/ckpt_" + std::to_string(n) + "_" + std::to_string(m);
            INFO("save on " << n << " ranks, load on " << m);
            const bool saved = run_on(n, [&](SubComm& c) {
                cairn::StateDict sd;
                std::vector<Right> rights;
                std::vector<Left> lefts;
                for (int k = c.rank(); k < 4; k += n) {
                    const std::int64_t i0 = 7 * (k / 2), j0 = 5 * (k % 2);
                    const auto fill = [&](const auto& v) {
                        for (std::size_t i = 0; i < 7; ++i)
                            for (std::size_t j = 0; j < 5; ++j)
                                v(i + 1, j + 1) = value(i0 + static_cast<std::int64_t>(i), j0 + static_cast<std::int64_t>(j));
                    };
                    if (k % 2) {
                        lefts.emplace_back("tile", 9, 7);
                        fill(lefts.back());
                        cairn::kokkos::add_view(sd, "u", inner(lefts.back()), g, {i0, j0});
                    } else {
                        rights.emplace_back("tile", 9, 7);
                        fill(rights.back());
                        cairn::kokkos::add_view(sd, "u", inner(rights.back()), g, {i0, j0});
                    }
                }
                if (sd.boxes("u") == 0)
                    cairn::kokkos::add_view(sd, "u", Right("none", 0, 0), g, {0, 0});
                cairn::save(sd, dir, c.get());
                return true;
            });
            CHECK(saved);
            CHECK(run_on(m, [&](SubComm& c) {
                const std::int64_t i0 = 14 * c.rank() / m, i1 = 14 * (c.rank() + 1) / m;
                const auto rows = static_cast<std::size_t>(i1 - i0);
                Left a("a", rows + 2, 6 + 2);  // columns 0..5
                Right b("b", rows + 2, 5 + 2); // columns 5..9
                Kokkos::deep_copy(a, -1.0);
                Kokkos::deep_copy(b, -1.0);
                cairn::StateDict sd;
                cairn::kokkos::add_view(sd, "u", inner(a), g, {i0, 0});
                cairn::kokkos::add_view(sd, "u", inner(b), g, {i0, 5});
                cairn::load(sd, dir, c.get());
                int bad = 0;
                for (std::size_t i = 0; i < rows + 2; ++i) {
                    for (std::size_t j = 0; j < 8; ++j) {
                        const bool in = i >= 1 && i <= rows && j >= 1 && j <= 6;
                        bad += a(i, j) != (in ? value(i0 + static_cast<std::int64_t>(i) - 1, static_cast<std::int64_t>(j) - 1) : -1.0);
                    }
                    for (std::size_t j = 0; j < 7; ++j) {
                        const bool in = i >= 1 && i <= rows && j >= 1 && j <= 5;
                        bad += b(i, j) != (in ? value(i0 + static_cast<std::int64_t>(i) - 1, static_cast<std::int64_t>(j) + 4) : -1.0);
                    }
                }
                return bad == 0;
            }));
        }
    }
}
