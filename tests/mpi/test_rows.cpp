// Rows that vary per rank (cairn/rows.hpp): save on N ranks with counts that
// differ per rank (some none), load on M with the even split, given counts
// or a callback, in both layouts; data bitwise, ids in their stored order.
#include "common.hpp"

#include <cairn/cairn.hpp>

#include <catch2/catch.hpp>

#include <numeric>
#include <string>
#include <vector>

using namespace cairn_test;

namespace {

// Rows of rank r of n at save: differ per rank, rank 1 has none.
std::uint64_t saved_rows(int r) { return r == 1 ? 0 : static_cast<std::uint64_t>(3 + 2 * r); }

std::uint64_t saved_offset(int r)
{
    std::uint64_t o = 0;
    for (int i = 0; i < r; ++i)
        o += saved_rows(i);
    return o;
}

double pos(std::uint64_t id, int k) { return static_cast<double>(id) * 0.5 + k * 1e-3 + 1.0 / 3.0; }
float vel(std::uint64_t id) { return static_cast<float>(id) * -0.25f + 0.1f; }

// A particle set: ids, positions {rows, 3}, velocities {rows}.
struct Particles {
    std::vector<std::int64_t> id;
    std::vector<double> x;
    std::vector<float> v;
    cairn::RowGroup group;

    void fill(std::uint64_t first, std::uint64_t rows)
    {
        id.clear();
        x.clear();
        v.clear();
        for (std::uint64_t i = 0; i < rows; ++i) {
            const std::uint64_t g = first + i;
            id.push_back(static_cast<std::int64_t>(g) * 11 + 5);
            for (int k = 0; k < 3; ++k)
                x.push_back(pos(g, k));
            v.push_back(vel(g));
        }
    }
    void bind()
    {
        group = cairn::RowGroup();
        group.add("id", &id).add("x", &x, {3}).add("v", &v);
    }
    // Rows [first, first + rows) of the global order, bitwise.
    bool holds(std::uint64_t first, std::uint64_t rows) const
    {
        if (id.size() != rows || x.size() != 3 * rows || v.size() != rows)
            return false;
        for (std::uint64_t i = 0; i < rows; ++i) {
            const std::uint64_t g = first + i;
            if (id[i] != static_cast<std::int64_t>(g) * 11 + 5 || v[i] != vel(g))
                return false;
            for (int k = 0; k < 3; ++k)
                if (x[3 * i + k] != pos(g, k))
                    return false;
        }
        return true;
    }
};

std::uint64_t total_saved(int n) { return saved_offset(n); }

// Loads `state` from `id`, skipping the checkpoint's other entries.
void load_some(cairn::StateDict& state, const std::string& id, MPI_Comm comm)
{
    cairn::LoadOptions o;
    o.partial = true;
    cairn::load(state, id, comm, o);
}

// Saves the particles of n ranks (and a scalar and a replicated array
// beside them) at `id`.
bool save_particles(const std::string& id, int n)
{
    return run_on(n, [&](SubComm& c) {
        Particles p;
        p.fill(saved_offset(c.rank()), saved_rows(c.rank()));
        p.bind();
        int step = 42;
        std::vector<double> box = {1.0, 2.0, 3.0};
        cairn::StateDict state;
        state.add_scalar("step", &step).add_replicated("box", box.data(), {3});
        cairn::add_rows(state, "particles", p.group);
        cairn::save(state, id, c.get());
        return p.group.local_rows() == saved_rows(c.rank()) && p.group.row_offset() == saved_offset(c.rank()) &&
               p.group.global_rows() == total_saved(c.size());
    });
}

} // namespace

TEST_CASE("rows saved on N ranks load on M with the even split, both layouts", "[rows]")
{
    const int w = world_size();
    const std::string base = fresh_dir("rows_even_" + std::to_string(w));
    for (const char* ext : {"", ".h5"}) {
        for (int n = 1; n <= w; ++n) {
            const std::string id = base + "/ckpt_" + std::to_string(n) + ext;
            INFO("saved on " << n << " ranks at " << id);
            REQUIRE(save_particles(id, n));
            const auto md = cairn::read_metadata(id);
            CHECK(md.entries.at("particles.x").global_shape == cairn::Shape{std::int64_t(total_saved(n)), 3});
            CHECK(md.entries.at("particles.id").global_shape == cairn::Shape{std::int64_t(total_saved(n))});
            for (int m = 1; m <= w; ++m) {
                INFO("loaded on " << m << " ranks");
                CHECK(run_on(m, [&](SubComm& c) {
                    Particles p;
                    p.bind(); // empty vectors: load resizes them
                    int step = 0;
                    std::vector<double> box(3);
                    cairn::StateDict state;
                    state.add_scalar("step", &step).add_replicated("box", box.data(), {3});
                    cairn::add_rows(state, "particles", p.group);
                    cairn::load(state, id, c.get());
                    const std::uint64_t total = total_saved(n);
                    std::uint64_t first = 0;
                    for (int r = 0; r < c.rank(); ++r)
                        first += cairn::RowGroup::even_share(total, r, c.size());
                    const std::uint64_t rows = cairn::RowGroup::even_share(total, c.rank(), c.size());
                    return step == 42 && box[2] == 3.0 && p.group.local_rows() == rows &&
                           p.group.row_offset() == first && p.group.global_rows() == total && p.holds(first, rows);
                }));
            }
        }
    }
}

TEST_CASE("rows load on M ranks with given counts and with a callback", "[rows]")
{
    const int w = world_size();
    const std::string id = fresh_dir("rows_counts_" + std::to_string(w)) + "/ckpt";
    REQUIRE(save_particles(id, w));
    const std::uint64_t total = total_saved(w);
    for (int m = 1; m <= w; ++m) {
        INFO("loaded on " << m << " ranks");
        // Given counts: rank 0 takes none (when there are others), rank 1
        // two, the last the rest.
        CHECK(run_on(m, [&](SubComm& c) {
            auto want = [&](int r) -> std::uint64_t {
                if (r == c.size() - 1)
                    return total - (c.size() > 2 ? 2 : 0);
                return r == 1 ? 2 : 0;
            };
            Particles p;
            p.bind();
            p.group.split_counts(want(c.rank()));
            cairn::StateDict state;
            cairn::add_rows(state, "particles", p.group);
            load_some(state, id, c.get());
            std::uint64_t first = 0;
            for (int r = 0; r < c.rank(); ++r)
                first += want(r);
            return p.group.local_rows() == want(c.rank()) && p.holds(first, want(c.rank()));
        }));
        // A callback: everything on the last rank.
        CHECK(run_on(m, [&](SubComm& c) {
            Particles p;
            p.bind();
            p.group.split([](std::uint64_t g, int r, int size) { return r == size - 1 ? g : 0; });
            cairn::StateDict state;
            cairn::add_rows(state, "particles", p.group);
            load_some(state, id, c.get());
            const bool last = c.rank() == c.size() - 1;
            return p.holds(0, last ? total : 0) && p.group.row_offset() == 0 && p.group.global_rows() == total;
        }));
    }
}

TEST_CASE("rows: a group in a nested dict, and raw buffers with a resize callback", "[rows]")
{
    const int w = world_size();
    const std::string id = fresh_dir("rows_nested_" + std::to_string(w)) + "/ckpt.h5";
    CHECK(run_on(w, [&](SubComm& c) {
        const std::uint64_t rows = saved_rows(c.rank());
        std::vector<std::uint32_t> tag(rows);
        std::iota(tag.begin(), tag.end(), static_cast<std::uint32_t>(saved_offset(c.rank())));
        cairn::RowGroup g;
        g.add("tag", tag.data(), rows);
        cairn::StateDict inner;
        cairn::add_rows(inner, "cells", g);
        cairn::StateDict state;
        state.add_dict("mesh", std::move(inner));
        cairn::save(state, id, c.get());
        return true;
    }));
    CHECK(cairn::read_metadata(id).entries.count("mesh.cells.tag") == 1);
    CHECK(run_on(w, [&](SubComm& c) {
        std::vector<std::uint32_t> buf;
        std::uint64_t asked = ~std::uint64_t(0);
        cairn::RowGroup g;
        g.add("tag", cairn::DType::u32, {}, [&](std::uint64_t rows) -> void* {
            asked = rows;
            buf.assign(rows, 0);
            return buf.data();
        });
        cairn::StateDict inner;
        cairn::add_rows(inner, "cells", g);
        cairn::StateDict state;
        state.add_dict("mesh", std::move(inner));
        load_some(state, id, c.get());
        const std::uint64_t rows = cairn::RowGroup::even_share(total_saved(c.size()), c.rank(), c.size());
        bool ok = asked == rows && buf.size() == rows;
        for (std::uint64_t i = 0; ok && i < rows; ++i)
            ok = buf[i] == g.row_offset() + i;
        return ok;
    }));
}

TEST_CASE("rows: errors name the arrays, the group and the counts", "[rows][errors]")
{
    const int w = world_size();
    const std::string id = fresh_dir("rows_errors_" + std::to_string(w)) + "/ckpt";
    // Arrays of one group that disagree in rows (on the last rank only):
    // every rank fails, naming both arrays.
    CHECK(run_on(w, [&](SubComm& c) {
        std::vector<double> a(4), b(c.rank() == c.size() - 1 ? 3 : 4);
        cairn::RowGroup g;
        g.add("a", &a).add("b", &b);
        cairn::StateDict state;
        cairn::add_rows(state, "p", g);
        try {
            cairn::save(state, id, c.get());
        } catch (const cairn::error::WrongAPIUsage& e) {
            const std::string what = e.what();
            UNSCOPED_INFO(what);
            return what.find("'p.a' has 4") != std::string::npos && what.find("'p.b' has 3") != std::string::npos;
        }
        return false;
    }));
    REQUIRE(save_particles(id, w));
    // Given counts that do not add up to the stored rows.
    CHECK(run_on(w, [&](SubComm& c) {
        Particles p;
        p.bind();
        p.group.split_counts(1);
        cairn::StateDict state;
        cairn::add_rows(state, "particles", p.group);
        try {
            load_some(state, id, c.get());
        } catch (const cairn::error::Mismatch& e) {
            const std::string what = e.what();
            UNSCOPED_INFO(what);
            return what.find("'particles'") != std::string::npos &&
                   what.find("ask for " + std::to_string(c.size()) + " rows in all, the checkpoint has " +
                             std::to_string(total_saved(w))) != std::string::npos;
        }
        return false;
    }));
    // Ranks that add different groups.
    CHECK(run_on(w, [&](SubComm& c) {
        Particles p;
        p.bind();
        cairn::StateDict state;
        cairn::add_rows(state, c.rank() == 0 && c.size() > 1 ? "particles" : "other", p.group);
        try {
            cairn::load(state, id, c.get());
        } catch (const cairn::error::Mismatch& e) {
            UNSCOPED_INFO(e.what());
            return c.size() > 1 && std::string(e.what()).find("different row groups") != std::string::npos;
        } catch (const cairn::error::NotFound& e) {
            UNSCOPED_INFO(e.what());
            return c.size() == 1 && std::string(e.what()).find("row group 'other'") != std::string::npos;
        }
        return false;
    }));
    // A stored array of other trailing dims.
    CHECK(run_on(w, [&](SubComm& c) {
        std::vector<double> x;
        cairn::RowGroup g;
        g.add("x", &x, {2});
        cairn::StateDict state;
        cairn::add_rows(state, "particles", g);
        try {
            load_some(state, id, c.get());
        } catch (const cairn::error::Mismatch& e) {
            const std::string what = e.what();
            UNSCOPED_INFO(what);
            return what.find("'particles.x'") != std::string::npos && what.find("{2}") != std::string::npos;
        }
        return false;
    }));
}

TEST_CASE("rows: each save takes the vectors as they are then", "[rows]")
{
    const int w = world_size();
    const std::string base = fresh_dir("rows_grow_" + std::to_string(w));
    CHECK(run_on(w, [&](SubComm& c) {
        std::vector<std::int64_t> id(static_cast<std::size_t>(c.rank()), c.rank());
        cairn::RowGroup g;
        g.add("id", &id); // added once
        cairn::StateDict state;
        cairn::add_rows(state, "p", g);
        cairn::save(state, base + "/a", c.get());
        const std::uint64_t first = g.global_rows();
        id.resize(id.size() + 1000, c.rank()); // reallocates
        cairn::save(state, base + "/b", c.get());
        const std::uint64_t n = static_cast<std::uint64_t>(c.size());
        return first == n * (n - 1) / 2 && g.global_rows() == first + 1000 * n &&
               g.local_rows() == static_cast<std::uint64_t>(c.rank()) + 1000;
    }));
    const auto md = cairn::read_metadata(base + "/b");
    const std::int64_t n = w;
    CHECK(md.entries.at("p.id").global_shape == cairn::Shape{n * (n - 1) / 2 + 1000 * n});
}
