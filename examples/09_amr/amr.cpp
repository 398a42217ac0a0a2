// 09_amr: an AMR-like decomposition, several patches per rank.
//
// Block-structured AMR codes (AMReX, Chombo, Cactus) hold each level of
// refinement as many rectangular patches, several per rank, each in an
// array of its own with ghost cells. Cairn takes them as they are: each
// patch is one add_array call under the level's name, with its own buffer
// and box; the boxes of a level must not overlap when saved, and every box
// is filled on load, whatever the patches and ranks then are.
//
//   level0: 24 x 24 coarse cells in patches of 12 x 12, 6 x 6 and 6 x 12;
//   level1: the refined window of coarse cells [6, 18) x [6, 18), 24 x 24
//           fine cells, in patches of 12 x 12, 6 x 6 and 3 x 3 (finer
//           where the solution is steep, here simply in one corner).
//
// The patches are dealt to the ranks by cell count (the largest first, to
// the rank with the fewest cells so far), so ranks hold different numbers of
// patches of different sizes. One 4-rank job plays three jobs in a row:
//
//   1. all 4 ranks save both levels, each patch with one ghost layer;
//   2. ranks 0-2 load them as uniform 8 x 8 patches, dealt the same way;
//   3. rank 0 alone loads each level as one box.
//
//   mpiexec -n 4 ./09_amr [CHECKPOINT_DIR]       (default: ckpt_09_amr)
//
// Prints "09_amr: OK" on rank 0 and exits 0 when every check passed.
#include <cairn/checkpoint.hpp>
#include <cairn/errors.hpp>
#include <cairn/state_dict.hpp>

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace {

constexpr std::int64_t N0 = 24, N1 = 24; // cells of level 0, and of the refined window of level 1

double value(int level, std::int64_t i, std::int64_t j)
{
    return 10000.0 * level + 100.0 * static_cast<double>(i) + static_cast<double>(j);
}

// A patch: its box in its level's index space and a buffer with one ghost
// layer around it (the ghosts are neither saved nor overwritten).
struct Patch {
    int level;
    cairn::Box box;
    std::vector<double> data;
    Patch(int lev, cairn::Box b)
        : level(lev), box(std::move(b)),
          data(static_cast<std::size_t>((box.shape[0] + 2) * (box.shape[1] + 2)), -1.0)
    {
    }
    std::int64_t row() const { return box.shape[1] + 2; }
    double& at(std::int64_t i, std::int64_t j) // global (i, j) of the box, or its ghosts
    {
        return data[static_cast<std::size_t>((i - box.offsets[0] + 1) * row() + (j - box.offsets[1] + 1))];
    }
    void fill()
    {
        for (std::int64_t i = box.offsets[0]; i < box.offsets[0] + box.shape[0]; ++i)
            for (std::int64_t j = box.offsets[1]; j < box.offsets[1] + box.shape[1]; ++j)
                at(i, j) = value(level, i, j);
    }
    // Cells that do not hold their value, plus ghost cells that were written.
    int errors()
    {
        int bad = 0;
        for (std::int64_t i = box.offsets[0] - 1; i <= box.offsets[0] + box.shape[0]; ++i)
            for (std::int64_t j = box.offsets[1] - 1; j <= box.offsets[1] + box.shape[1]; ++j) {
                const bool inside = i >= box.offsets[0] && i < box.offsets[0] + box.shape[0] &&
                                    j >= box.offsets[1] && j < box.offsets[1] + box.shape[1];
                bad += at(i, j) != (inside ? value(level, i, j) : -1.0);
            }
        return bad;
    }
    // One more box of the level: add_array again under the same name.
    void add_to(cairn::StateDict& state)
    {
        const std::int64_t n = level == 0 ? N0 : N1;
        state.add_array<double>("level" + std::to_string(level), &at(box.offsets[0], box.offsets[1]), {n, n}, box,
                                {row(), 1});
    }
};

cairn::Box box(std::int64_t i, std::int64_t j, std::int64_t ni, std::int64_t nj) { return cairn::Box{{i, j}, {ni, nj}}; }

// The patches of the save: mixed sizes that tile each level.
std::vector<std::pair<int, cairn::Box>> saved_patches()
{
    std::vector<std::pair<int, cairn::Box>> p;
    // level 0: one 12 x 12, two 6 x 12 (stacked), 6 x 6 ones elsewhere
    p.push_back({0, box(0, 0, 12, 12)});
    p.push_back({0, box(0, 12, 6, 12)});
    p.push_back({0, box(6, 12, 6, 12)});
    for (std::int64_t i = 12; i < 24; i += 6)
        for (std::int64_t j = 0; j < 24; j += 6)
            p.push_back({0, box(i, j, 6, 6)});
    // level 1: three 12 x 12, the last quarter in 6 x 6 and 3 x 3 patches
    p.push_back({1, box(0, 0, 12, 12)});
    p.push_back({1, box(0, 12, 12, 12)});
    p.push_back({1, box(12, 0, 12, 12)});
    p.push_back({1, box(12, 12, 6, 6)});
    p.push_back({1, box(12, 18, 6, 6)});
    p.push_back({1, box(18, 12, 6, 6)});
    for (std::int64_t i = 18; i < 24; i += 3)
        for (std::int64_t j = 18; j < 24; j += 3)
            p.push_back({1, box(i, j, 3, 3)});
    return p;
}

// Uniform 8 x 8 patches of both levels (the load's).
std::vector<std::pair<int, cairn::Box>> uniform_patches()
{
    std::vector<std::pair<int, cairn::Box>> p;
    for (int level = 0; level < 2; ++level)
        for (std::int64_t i = 0; i < 24; i += 8)
            for (std::int64_t j = 0; j < 24; j += 8)
                p.push_back({level, box(i, j, 8, 8)});
    return p;
}

// This rank's patches of `all` dealt over `size` ranks by cell count.
std::vector<std::unique_ptr<Patch>> deal(std::vector<std::pair<int, cairn::Box>> all, int size, int rank)
{
    std::stable_sort(all.begin(), all.end(),
                     [](const auto& a, const auto& b) { return a.second.volume() > b.second.volume(); });
    std::vector<std::int64_t> cells(static_cast<std::size_t>(size), 0);
    std::vector<std::unique_ptr<Patch>> mine;
    for (const auto& [level, b] : all) {
        const auto to = static_cast<int>(std::min_element(cells.begin(), cells.end()) - cells.begin());
        cells[static_cast<std::size_t>(to)] += b.volume();
        if (to == rank)
            mine.push_back(std::make_unique<Patch>(level, b));
    }
    return mine;
}

// Adds this rank's patches; a level of which it holds none gets an empty
// box (every rank names every array).
cairn::StateDict state_of(std::vector<std::unique_ptr<Patch>>& patches)
{
    cairn::StateDict state;
    for (int level = 0; level < 2; ++level) {
        bool any = false;
        for (auto& p : patches)
            if (p->level == level) {
                p->add_to(state);
                any = true;
            }
        if (!any) {
            const std::int64_t n = level == 0 ? N0 : N1;
            state.add_array<double>("level" + std::to_string(level), nullptr, {n, n}, box(0, 0, 0, 0));
        }
    }
    return state;
}

bool all_ok(bool ok, MPI_Comm comm)
{
    int mine = ok ? 1 : 0, every = 0;
    MPI_Allreduce(&mine, &every, 1, MPI_INT, MPI_MIN, comm);
    return every == 1;
}

} // namespace

int main(int argc, char** argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const std::string path = argc > 1 ? argv[1] : "ckpt_09_amr";
    bool ok = true;
    try {
        // 1. Save on every rank: several patches of both levels each.
        {
            auto patches = deal(saved_patches(), size, rank);
            for (auto& p : patches)
                p->fill();
            cairn::StateDict state = state_of(patches);
            cairn::SaveOptions options;
            options.overwrite = true;
            cairn::save(state, path, MPI_COMM_WORLD, options);
            int held = static_cast<int>(patches.size()), fewest = 0, most = 0;
            MPI_Reduce(&held, &fewest, 1, MPI_INT, MPI_MIN, 0, MPI_COMM_WORLD);
            MPI_Reduce(&held, &most, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
            if (rank == 0)
                std::printf("09_amr: saved 2 levels, %zu patches on %d ranks (%d to %d per rank)\n",
                            saved_patches().size(), size, fewest, most);
        }
        // 2. Load on (up to) 3 ranks as uniform 8 x 8 patches.
        const int m = std::min(size, 3);
        MPI_Comm sub = MPI_COMM_NULL;
        MPI_Comm_split(MPI_COMM_WORLD, rank < m ? 0 : MPI_UNDEFINED, rank, &sub);
        if (sub != MPI_COMM_NULL) {
            auto patches = deal(uniform_patches(), m, rank);
            cairn::StateDict state = state_of(patches);
            cairn::load(state, path, sub);
            int bad = 0;
            for (auto& p : patches)
                bad += p->errors();
            const bool loaded = all_ok(bad == 0, sub);
            ok = ok && loaded;
            if (rank == 0)
                std::printf("09_amr: loaded on %d ranks as 8 x 8 patches: %s\n", m, loaded ? "OK" : "WRONG");
            MPI_Comm_free(&sub);
        }
        // 3. Load on rank 0 alone, each level as one box.
        MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? 0 : MPI_UNDEFINED, rank, &sub);
        if (sub != MPI_COMM_NULL) {
            std::vector<std::unique_ptr<Patch>> whole;
            whole.push_back(std::make_unique<Patch>(0, box(0, 0, N0, N0)));
            whole.push_back(std::make_unique<Patch>(1, box(0, 0, N1, N1)));
            cairn::StateDict state = state_of(whole);
            cairn::load(state, path, sub);
            const bool loaded = whole[0]->errors() == 0 && whole[1]->errors() == 0;
            ok = ok && loaded;
            std::printf("09_amr: loaded on 1 rank as whole levels: %s\n", loaded ? "OK" : "WRONG");
            MPI_Comm_free(&sub);
        }
    } catch (const cairn::Error& e) {
        if (rank == 0)
            std::fprintf(stderr, "09_amr: %s\n", e.what());
        ok = false;
    }
    ok = all_ok(ok, MPI_COMM_WORLD);
    if (rank == 0 && ok)
        std::printf("09_amr: OK\n");
    MPI_Finalize();
    return ok ? 0 : 1;
}
