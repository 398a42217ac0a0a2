// Rows that vary per rank with Kokkos views (cairn::kokkos::add_rows): views
// of counts that differ per rank (rank 1 none) saved on all ranks, loaded on
// every smaller rank count into views that the load reallocates.
#include "common.hpp"

#include <cairn/kokkos.hpp>

#include <Kokkos_Core.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

using namespace cairn_test;

namespace {

std::uint64_t saved_rows(int r) { return r == 1 ? 0 : static_cast<std::uint64_t>(4 + r); }
std::uint64_t saved_offset(int r)
{
    std::uint64_t o = 0;
    for (int i = 0; i < r; ++i)
        o += saved_rows(i);
    return o;
}
double pos(std::uint64_t g, std::size_t k) { return static_cast<double>(g) * 1.5 + static_cast<double>(k) / 7.0; }

} // namespace

TEST_CASE("Kokkos views of rows that vary per rank: saved on N, reallocated and loaded on M", "[kokkos][rows]")
{
    const int w = world_size();
    const std::string id = fresh_dir("kokkos_rows_" + std::to_string(w)) + "/ckpt";
    CHECK(run_on(w, [&](SubComm& c) {
        const std::uint64_t rows = saved_rows(c.rank()), first = saved_offset(c.rank());
        Kokkos::View<std::int64_t*, Kokkos::HostSpace> ids("ids", rows);
        Kokkos::View<double* [3], Kokkos::HostSpace> x("x", rows);
        Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace> q("q", rows, 2);
        for (std::uint64_t i = 0; i < rows; ++i) {
            ids(i) = static_cast<std::int64_t>(first + i);
            for (std::size_t k = 0; k < 3; ++k)
                x(i, k) = pos(first + i, k);
            q(i, 0) = static_cast<float>(first + i);
            q(i, 1) = -static_cast<float>(first + i);
        }
        cairn::RowGroup g;
        cairn::kokkos::add_rows(g, "id", ids);
        cairn::kokkos::add_rows(g, "x", x);
        cairn::kokkos::add_rows(g, "q", q);
        cairn::StateDict state;
        cairn::add_rows(state, "atoms", g);
        cairn::save(state, id, c.get());
        return g.global_rows() == saved_offset(c.size()) && g.row_offset() == first;
    }));
    const auto md = cairn::read_metadata(id);
    CHECK(md.entries.at("atoms.x").global_shape == cairn::Shape{std::int64_t(saved_offset(w)), 3});
    CHECK(md.entries.at("atoms.q").global_shape == cairn::Shape{std::int64_t(saved_offset(w)), 2});
    for (int m = 1; m <= w; ++m) {
        INFO("loaded on " << m << " ranks");
        CHECK(run_on(m, [&](SubComm& c) {
            Kokkos::View<std::int64_t*, Kokkos::HostSpace> ids("ids", 1);
            Kokkos::View<double* [3], Kokkos::HostSpace> x("x", 0);
            Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace> q("q", 5, 2);
            cairn::RowGroup g;
            cairn::kokkos::add_rows(g, "id", ids);
            cairn::kokkos::add_rows(g, "x", x);
            cairn::kokkos::add_rows(g, "q", q);
            cairn::StateDict state;
            cairn::add_rows(state, "atoms", g);
            cairn::load(state, id, c.get());
            const std::uint64_t rows = cairn::RowGroup::even_share(saved_offset(w), c.rank(), c.size());
            bool ok = ids.extent(0) == rows && x.extent(0) == rows && q.extent(0) == rows && q.extent(1) == 2 &&
                      ids.label() == "ids" && g.local_rows() == rows;
            for (std::uint64_t i = 0; ok && i < rows; ++i) {
                const std::uint64_t gi = g.row_offset() + i;
                ok = ids(i) == static_cast<std::int64_t>(gi) && q(i, 0) == static_cast<float>(gi) &&
                     q(i, 1) == -static_cast<float>(gi);
                for (std::size_t k = 0; k < 3; ++k)
                    ok = ok && x(i, k) == pos(gi, k);
            }
            return ok;
        }));
    }
}
