// Several boxes of one array per rank: tiles saved on N ranks load on M
// ranks into other tiles (overlapping ones included), in both layouts, and
// the errors of boxes that overlap on save.
#include "common.hpp"

#include <cairn/cairn.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

using namespace cairn_test;

namespace {

const cairn::Shape g_shape{23, 17};

double value_at(std::int64_t i, std::int64_t j) { return static_cast<double>(i * 1000 + j); }

// The tiles of a grid of ty x tx uneven tiles of the global array, grown by
// `halo` cells on each side (clipped), tile k held by rank k % n.
std::vector<cairn::Box> tiles_of(int rank, int n, int ty, int tx, int halo)
{
    std::vector<cairn::Box> out;
    const auto cut = [](std::int64_t extent, int parts, int k) { return extent * k * k / (parts * parts); };
    int k = 0;
    for (int a = 0; a < ty; ++a) {
        for (int b = 0; b < tx; ++b, ++k) {
            if (k % n != rank)
                continue;
            std::int64_t i0 = cut(g_shape[0], ty, a), i1 = cut(g_shape[0], ty, a + 1);
            std::int64_t j0 = cut(g_shape[1], tx, b), j1 = cut(g_shape[1], tx, b + 1);
            i0 = std::max<std::int64_t>(0, i0 - halo);
            j0 = std::max<std::int64_t>(0, j0 - halo);
            i1 = std::min(g_shape[0], i1 + halo);
            j1 = std::min(g_shape[1], j1 + halo);
            out.push_back(cairn::Box{{i0, j0}, {i1 - i0, j1 - j0}});
        }
    }
    return out;
}

// One tile in a buffer of its own with a ghost layer of `ghost` cells.
struct Tile {
    cairn::Box box;
    std::int64_t ghost;
    std::vector<double> buf;
    Tile(const cairn::Box& b, std::int64_t g)
        : box(b), ghost(g), buf(static_cast<std::size_t>((b.shape[0] + 2 * g) * (b.shape[1] + 2 * g)), -1.0)
    {
    }
    std::int64_t row() const { return box.shape[1] + 2 * ghost; }
    double& at(std::int64_t i, std::int64_t j)
    {
        return buf[static_cast<std::size_t>((i - box.offsets[0] + ghost) * row() + (j - box.offsets[1] + ghost))];
    }
    void fill()
    {
        for (std::int64_t i = box.offsets[0]; i < box.offsets[0] + box.shape[0]; ++i)
            for (std::int64_t j = box.offsets[1]; j < box.offsets[1] + box.shape[1]; ++j)
                at(i, j) = value_at(i, j);
    }
    // Elements wrong inside the box, plus ghost cells that were written.
    int errors()
    {
        int bad = 0;
        for (std::int64_t i = box.offsets[0] - ghost; i < box.offsets[0] + box.shape[0] + ghost; ++i)
            for (std::int64_t j = box.offsets[1] - ghost; j < box.offsets[1] + box.shape[1] + ghost; ++j) {
                const bool inside = i >= box.offsets[0] && i < box.offsets[0] + box.shape[0] && j >= box.offsets[1] &&
                                    j < box.offsets[1] + box.shape[1];
                bad += at(i, j) != (inside ? value_at(i, j) : -1.0);
            }
        return bad;
    }
    void add_to(cairn::StateDict& sd, const std::string& name)
    {
        sd.add_array(name, &at(box.offsets[0], box.offsets[1]), g_shape, box, {row(), 1});
    }
};

// Tiles of a rank, one buffer each (ghosts on every other tile); a rank
// without tiles adds an empty box.
std::vector<std::unique_ptr<Tile>> make_tiles(const std::vector<cairn::Box>& boxes, cairn::StateDict& sd)
{
    std::vector<std::unique_ptr<Tile>> tiles;
    for (std::size_t k = 0; k < boxes.size(); ++k) {
        tiles.push_back(std::make_unique<Tile>(boxes[k], static_cast<std::int64_t>(k % 2)));
        tiles.back()->add_to(sd, "field");
    }
    if (boxes.empty())
        sd.add_array("field", static_cast<double*>(nullptr), g_shape, cairn::Box{{0, 0}, {0, 0}});
    return tiles;
}

bool tiled_round_trip(const std::string& dir, cairn::Layout layout, int n, int save_ty, int save_tx, int m,
                      int load_ty, int load_tx, int load_halo)
{
    const bool saved = run_on(n, [&](SubComm& c) {
        cairn::StateDict sd;
        auto tiles = make_tiles(tiles_of(c.rank(), n, save_ty, save_tx, 0), sd);
        for (auto& t : tiles)
            t->fill();
        cairn::SaveOptions so;
        so.layout = layout;
        cairn::save(sd, dir, c.get(), so);
        return true;
    });
    return saved && run_on(m, [&](SubComm& c) {
        cairn::StateDict sd;
        auto tiles = make_tiles(tiles_of(c.rank(), m, load_ty, load_tx, load_halo), sd);
        cairn::load(sd, dir, c.get());
        int bad = 0;
        for (auto& t : tiles)
            bad += t->errors();
        if (bad)
            UNSCOPED_INFO("rank " << c.rank() << ": " << bad << " wrong elements");
        return bad == 0;
    });
}

} // namespace

TEST_CASE("several boxes per rank saved on N ranks load on M ranks, in both layouts", "[boxes][reshard]")
{
    const int w = world_size();
    const std::string base = fresh_dir("boxes_" + std::to_string(w));
    for (int n = 1; n <= w; ++n) {
        for (int m = 1; m <= w; ++m) {
            for (const auto layout : {cairn::Layout::per_rank, cairn::Layout::container}) {
                const std::string id = base + "/ckpt_" + std::to_string(n) + "_" + std::to_string(m) +
                                       (layout == cairn::Layout::container ? ".h5" : "");
                INFO("saved on " << n << " ranks, loaded on " << m << (layout == cairn::Layout::container ? ", container" : ""));
                // Tiles to other tiles, to overlapping tiles (halos), to one box per rank, and back.
                CHECK(tiled_round_trip(id + "_a", layout, n, 3, 4, m, 2, 3, 0));
                CHECK(tiled_round_trip(id + "_b", layout, n, 4, 2, m, 3, 3, 2));
                CHECK(tiled_round_trip(id + "_c", layout, n, 5, 3, m, 1, m, 0));
                CHECK(tiled_round_trip(id + "_d", layout, n, n, 1, m, 4, 5, 1));
                // Many chunks (the load planner's chunk index), to overlapping tiles.
                CHECK(tiled_round_trip(id + "_e", layout, n, 7, 5, m, 5, 4, 1));
            }
        }
    }
}

TEST_CASE("saved boxes that overlap are an error naming the array and both boxes", "[boxes][errors]")
{
    const int w = world_size();
    const std::string dir = fresh_dir("boxes_overlap_" + std::to_string(w)) + "/ckpt";
    std::vector<double> a(100, 1.0), b(100, 2.0);
    const cairn::Shape g{10, 10};
    // Rank 0 holds rows 0..5 and 4..9 (overlapping), the others nothing.
    const int r = world_rank();
    for (const bool twice : {false, true}) {
        cairn::StateDict sd;
        if (r == 0) {
            sd.add_array("x", a.data(), g, cairn::Box{{0, 0}, {6, 10}});
            if (twice)
                sd.add_array("x", b.data(), g, cairn::Box{{0, 0}, {6, 10}});
            else
                sd.add_array("x", b.data(), g, cairn::Box{{4, 0}, {6, 10}});
        } else {
            sd.add_array("x", a.data(), g, cairn::Box{{0, 0}, {0, 0}});
        }
        std::string what;
        try {
            cairn::save(sd, dir + (twice ? "_twice" : "_overlap"), MPI_COMM_WORLD);
        } catch (const cairn::error::WrongAPIUsage& e) {
            what = e.what();
        }
        INFO(what);
        CHECK(what.find("'x'") != std::string::npos);
        if (twice) {
            CHECK(what.find("[0:6, 0:10]") != std::string::npos);
            CHECK(what.find("twice") != std::string::npos);
        } else {
            CHECK(what.find("overlaps") != std::string::npos);
            CHECK(what.find("[0:6, 0:10]") != std::string::npos);
            CHECK(what.find("[4:10, 0:10]") != std::string::npos);
        }
    }
}

TEST_CASE("another box of an array must have its dtype and global shape", "[boxes][errors]")
{
    std::vector<double> a(100);
    std::vector<float> f(100);
    cairn::StateDict sd;
    sd.add_array("x", a.data(), {10, 10}, cairn::Box{{0, 0}, {5, 10}});
    sd.add_array("x", a.data() + 50, {10, 10}, cairn::Box{{5, 0}, {5, 10}});
    CHECK(sd.boxes("x") == 2);
    CHECK(sd.size() == 2);
    std::string what;
    try {
        sd.add_array("x", f.data(), {10, 10}, cairn::Box{{0, 0}, {1, 10}});
    } catch (const cairn::error::WrongAPIUsage& e) {
        what = e.what();
    }
    CHECK(what.find("'x'") != std::string::npos);
    CHECK(what.find("f32") != std::string::npos);
    CHECK(what.find("f64") != std::string::npos);
    what.clear();
    try {
        sd.add_array("x", a.data(), {10, 11}, cairn::Box{{0, 0}, {1, 10}});
    } catch (const cairn::error::WrongAPIUsage& e) {
        what = e.what();
    }
    CHECK(what.find("[10, 11]") != std::string::npos);
    CHECK(what.find("[10, 10]") != std::string::npos);
    // Entries other than arrays still take one name each.
    double s = 0;
    sd.add_scalar("t", &s);
    CHECK_THROWS_AS(sd.add_scalar("t", &s), cairn::error::WrongAPIUsage);
    CHECK_THROWS_AS(sd.add_array("t", a.data(), {10, 10}, cairn::Box{{0, 0}, {1, 10}}), cairn::error::WrongAPIUsage);
    CHECK(sd.boxes("x") == 2);
}

TEST_CASE("several boxes per rank with reuse_plan: planned from scratch, saved right", "[boxes][plan_reuse]")
{
    const int w = world_size();
    const std::string dir = fresh_dir("boxes_reuse_" + std::to_string(w)) + "/ckpt";
    for (int k = 0; k < 2; ++k) {
        cairn::StateDict sd;
        auto tiles = make_tiles(tiles_of(world_rank(), w, 3, 2, 0), sd);
        for (auto& t : tiles)
            t->fill();
        cairn::SaveOptions so;
        so.reuse_plan = true;
        so.overwrite = true;
        const auto r = cairn::save(sd, dir, MPI_COMM_WORLD, so);
        CHECK_FALSE(r.plan_reused);
    }
    cairn::StateDict sd;
    auto tiles = make_tiles(tiles_of(world_rank(), w, 1, w, 0), sd);
    cairn::load(sd, dir, MPI_COMM_WORLD);
    int bad = 0;
    for (auto& t : tiles)
        bad += t->errors();
    CHECK(bad == 0);
}
