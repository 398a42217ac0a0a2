// heat2d: Cairn's end-to-end example.
//
// An explicit 2-D heat equation on an nx x ny grid of doubles, decomposed over
// a 2-D Cartesian process grid with one ghost layer. With --checkpoint it saves
// the field and the step counter at the end; with --restart it loads them
// first, from a checkpoint written by any number of ranks, and carries on.
// The last line on rank 0 is a digest of the field that does not depend on
// the decomposition, so a restarted run can be compared with a straight one:
//
//   mpiexec -n 4 heat2d --nx 96 --ny 80 --steps 200
//   mpiexec -n 4 heat2d --nx 96 --ny 80 --steps 100 --checkpoint ckpt
//   mpiexec -n 3 heat2d --nx 96 --ny 80 --steps 200 --restart ckpt
//
// With --checkpoint-every K --checkpoint-dir DIR it saves every K steps
// through a cairn::CheckpointManager (keeping the last 2); --resume DIR
// restarts from the latest committed checkpoint in DIR, whatever killed the
// run before, and on any number of ranks:
//
//   mpiexec -n 4 heat2d --nx 96 --ny 80 --steps 200 --checkpoint-every 20 --resume run
//
// With --local-dir DIR the manager keeps each step on node-local storage
// (a RAM disk or NVMe path; "%n" in DIR becomes the node's index), with
// --redundancy partner or xor[:k] so that a lost node's files can be rebuilt,
// and drains every --flush-every K-th step into --checkpoint-dir; --resume
// with the same options restarts from the newest step of either level
// (with --async, stepping goes on once a step is staged; the node-local
// write, the redundancy and the drain run in the background):
//
//   mpiexec -n 4 heat2d --nx 96 --ny 80 --steps 200 --checkpoint-every 20 --resume run
//           --local-dir /dev/shm/heat2d --redundancy partner --flush-every 5
//
// With --tiles T each rank keeps its rows as T tiles, each in a buffer of its
// own and added to the state dict as a box of its own (several boxes of one
// array per rank); its checkpoints are interchangeable with untiled ones:
//
//   mpiexec -n 4 heat2d --nx 96 --ny 80 --steps 100 --tiles 3 --checkpoint ckpt
//   mpiexec -n 3 heat2d --nx 96 --ny 80 --steps 200 --restart ckpt
//
// The arithmetic is written out operation by operation (and compiled with
// -ffp-contract=off) so the digest is bitwise reproducible.

#include <cairn/async.hpp>
#include <cairn/checkpoint.hpp>
#include <cairn/errors.hpp>
#include <cairn/manager.hpp>
#include <cairn/state_dict.hpp>

#include <mpi.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

constexpr int exit_ok = 0;
constexpr int exit_error = 1;
constexpr int exit_usage = 2;

// An error of this program, raised identically on every rank.
struct AppError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// ---- command line ----------------------------------------------------------

struct Options {
    std::int64_t nx = 0;
    std::int64_t ny = 0;
    std::int64_t steps = -1;
    std::string checkpoint;
    std::string restart;
    std::int64_t checkpoint_step = -1; // -1: at the end
    bool async = false;
    std::int64_t checkpoint_every = 0; // 0: no periodic checkpoints
    std::string checkpoint_dir;        // the manager's root (default: --resume DIR)
    std::string resume;
    bool container = false;
    cairn::DataFiles files; // --files
    std::int64_t tiles = 1; // the rank's rows as this many tiles, each its own buffer
    cairn::LocalLevel local;  // --local-dir, --redundancy, --flush-every, --ranks-per-node
    bool help = false;
};

const char* const usage_text =
    "usage: heat2d --nx NX --ny NY --steps S [--checkpoint PATH] [--restart PATH]\n"
    "              [--checkpoint-step K] [--async]\n"
    "              [--checkpoint-every K [--checkpoint-dir DIR]] [--resume DIR] [--container]\n"
    "              [--files per-rank|per-node|N] [--tiles T]\n"
    "              [--local-dir DIR [--redundancy none|partner|xor[:k]] [--flush-every K]]\n"
    "  --nx NX, --ny NY   global grid size (rows, columns), at least 1 each\n"
    "  --steps S          run until global step S (S >= 0)\n"
    "  --checkpoint PATH  save the field and the step counter to PATH at the end\n"
    "  --restart PATH     load the field and the step counter from PATH first\n"
    "  --checkpoint-step K  save at step K instead of at the end, and go on stepping\n"
    "  --async            save with cairn::async_save: stepping goes on while the\n"
    "                     checkpoint is written in the background\n"
    "  --checkpoint-every K  save every K steps into DIR through a checkpoint\n"
    "                     manager (DIR/step_<N>, DIR/LATEST; the last 2 are kept);\n"
    "                     with --async the saves are written in the background\n"
    "                     (also with --local-dir: once staged, stepping goes on)\n"
    "  --checkpoint-dir DIR  root of the periodic checkpoints (default: --resume DIR)\n"
    "  --resume DIR       start from the latest committed checkpoint in DIR (from\n"
    "                     step 0 when there is none)\n"
    "  --container        periodic checkpoints as one HDF5 file each (DIR/step_<N>.h5)\n"
    "  --files F          data files of a per-rank checkpoint: per-rank (one per\n"
    "                     rank, the default), per-node (one per node) or N files in all\n"
    "  --tiles T          keep each rank's rows as T tiles (fewer where it has fewer\n"
    "                     rows), each in a buffer of its own and saved as a box of\n"
    "                     its own; checkpoints are the same as untiled ones\n"
    "  --local-dir DIR    periodic checkpoints go to node-local storage DIR (\"%n\":\n"
    "                     the node's index), every --flush-every K-th of them also\n"
    "                     drained into the checkpoint directory; --resume with the\n"
    "                     same options takes the newest step of either\n"
    "  --redundancy R     of node-local steps: none (default), partner (each node's\n"
    "                     files also on the next node) or xor[:k] (parity over\n"
    "                     groups of k nodes, default 4)\n"
    "  --flush-every K    drain every K-th node-local step into the checkpoint\n"
    "                     directory (default 10; 0: none but the last, which is\n"
    "                     drained at the end of the run)\n"
    "  --ranks-per-node K (testing) every K consecutive ranks form a node\n"
    "Prints `digest <16 hex digits>` on rank 0 as its last line.\n";

bool parse_int(const std::string& text, std::int64_t& value)
{
    if (text.empty())
        return false;
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(text.c_str(), &end, 10);
    if (errno != 0 || end == text.c_str() || *end != '\0')
        return false;
    value = static_cast<std::int64_t>(v);
    return true;
}

// Parses argv into `opt`; returns an error message, empty on success.
std::string parse_args(int argc, char** argv, Options& opt)
{
    bool have_nx = false, have_ny = false, have_steps = false;
    for (int k = 1; k < argc; ++k) {
        std::string arg = argv[k];
        if (arg == "-h" || arg == "--help") {
            opt.help = true;
            continue;
        }
        if (arg == "--async") {
            opt.async = true;
            continue;
        }
        if (arg == "--container") {
            opt.container = true;
            continue;
        }
        std::string value;
        const auto eq = arg.find('=');
        if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
            value = arg.substr(eq + 1);
            arg.resize(eq);
        } else if (arg == "--nx" || arg == "--ny" || arg == "--steps" || arg == "--checkpoint" || arg == "--restart" ||
                   arg == "--checkpoint-step" || arg == "--checkpoint-every" || arg == "--checkpoint-dir" ||
                   arg == "--resume" || arg == "--files" || arg == "--tiles" || arg == "--local-dir" ||
                   arg == "--redundancy" || arg == "--flush-every" || arg == "--ranks-per-node") {
            if (k + 1 >= argc)
                return "missing value after " + arg;
            value = argv[++k];
        } else {
            return "unknown argument '" + arg + "'";
        }
        if (arg == "--nx" || arg == "--ny" || arg == "--steps" || arg == "--checkpoint-step" ||
            arg == "--checkpoint-every" || arg == "--tiles" || arg == "--flush-every" || arg == "--ranks-per-node") {
            std::int64_t v = 0;
            if (!parse_int(value, v))
                return "not an integer: " + arg + " '" + value + "'";
            if (arg == "--flush-every" || arg == "--ranks-per-node") {
                if (v < 0 || v > (std::int64_t(1) << 30))
                    return arg + " must be between 0 and 2^30";
                (arg == "--flush-every" ? opt.local.flush_every : opt.local.ranks_per_node) = static_cast<int>(v);
            } else if (arg == "--tiles") {
                if (v < 1 || v > (std::int64_t(1) << 30))
                    return "--tiles must be between 1 and 2^30";
                opt.tiles = v;
            } else if (arg == "--checkpoint-every") {
                if (v < 1)
                    return "--checkpoint-every must be at least 1";
                opt.checkpoint_every = v;
            } else if (arg == "--checkpoint-step") {
                if (v < 0)
                    return "--checkpoint-step must be at least 0";
                opt.checkpoint_step = v;
            } else if (arg == "--nx") {
                opt.nx = v;
                have_nx = true;
            } else if (arg == "--ny") {
                opt.ny = v;
                have_ny = true;
            } else {
                opt.steps = v;
                have_steps = true;
            }
        } else if (arg == "--checkpoint" || arg == "--restart") {
            if (value.empty())
                return "empty path for " + arg;
            (arg == "--checkpoint" ? opt.checkpoint : opt.restart) = value;
        } else if (arg == "--files") {
            try {
                opt.files = cairn::DataFiles::parse(value);
            } catch (const cairn::Error& e) {
                return std::string("--files: ") + e.what();
            }
        } else if (arg == "--local-dir") {
            if (value.empty())
                return "empty path for " + arg;
            opt.local.dir = value;
        } else if (arg == "--redundancy") {
            try {
                opt.local.redundancy = cairn::Redundancy::parse(value);
            } catch (const cairn::Error& e) {
                return std::string("--redundancy: ") + e.what();
            }
        } else if (arg == "--checkpoint-dir" || arg == "--resume") {
            if (value.empty())
                return "empty path for " + arg;
            (arg == "--resume" ? opt.resume : opt.checkpoint_dir) = value;
        } else {
            return "unknown argument '" + arg + "'";
        }
    }
    if (opt.help)
        return {};
    if (!have_nx || !have_ny || !have_steps)
        return "--nx, --ny and --steps are required";
    // The digest indexes cells by i*ny + j; keep that (and the local arrays)
    // far from overflow.
    constexpr std::int64_t max_extent = std::int64_t(1) << 30;
    if (opt.nx < 1 || opt.ny < 1 || opt.nx > max_extent || opt.ny > max_extent)
        return "--nx and --ny must be between 1 and 2^30";
    if (opt.steps < 0)
        return "--steps must be >= 0";
    if (!opt.restart.empty() && !opt.resume.empty())
        return "--restart and --resume exclude each other";
    if (opt.checkpoint_every > 0 && opt.checkpoint_dir.empty() && opt.resume.empty())
        return "--checkpoint-every needs --checkpoint-dir DIR (or --resume DIR)";
    if (opt.checkpoint_every == 0 && !opt.checkpoint_dir.empty())
        return "--checkpoint-dir needs --checkpoint-every K";
    if (!opt.local.dir.empty() && opt.checkpoint_every == 0 && opt.resume.empty())
        return "--local-dir needs --checkpoint-every K or --resume DIR";
    return {};
}

// ---- decomposition ---------------------------------------------------------

// Block distribution of n cells over p parts: the first n % p parts get one extra.
void block(std::int64_t n, int p, int c, std::int64_t& offset, std::int64_t& size)
{
    const std::int64_t base = n / p, rem = n % p;
    size = base + (c < rem ? 1 : 0);
    offset = c * base + (c < rem ? c : rem);
}

struct Grid {
    MPI_Comm comm = MPI_COMM_NULL; // 2-D Cartesian communicator
    int rank = 0, size = 1;
    int dims[2] = {0, 0};
    int coords[2] = {0, 0};
    int up = MPI_PROC_NULL, down = MPI_PROC_NULL;    // neighbours in i (rows)
    int left = MPI_PROC_NULL, right = MPI_PROC_NULL; // neighbours in j (columns)
    std::int64_t nx = 0, ny = 0;                     // global
    std::int64_t i0 = 0, j0 = 0;                     // first owned global cell
    std::int64_t lnx = 0, lny = 0;                   // owned cells (no ghosts)

    std::int64_t row_stride() const { return lny + 2; }
    std::size_t idx(std::int64_t li, std::int64_t lj) const
    {
        return static_cast<std::size_t>(li * row_stride() + lj);
    }
};

// A tile: rows [i0, i0 + lnx) of the rank's columns, in buffers of its own
// with one ghost layer (indexed by Grid::idx). Untiled, a rank has one tile,
// its whole box; with --tiles T its rows are split into T tiles (block
// distribution), the same split on the ranks of one process row.
struct Tile {
    std::int64_t i0 = 0, lnx = 0;
    std::vector<double> t, next;
    MPI_Datatype column = MPI_DATATYPE_NULL; // one column of the interior, strided
};

std::vector<Tile> make_tiles(const Grid& g, std::int64_t wanted)
{
    const int count = static_cast<int>(std::min(wanted, g.lnx));
    std::vector<Tile> tiles(static_cast<std::size_t>(count));
    for (int k = 0; k < count; ++k) {
        Tile& tile = tiles[static_cast<std::size_t>(k)];
        std::int64_t offset = 0;
        block(g.lnx, count, k, offset, tile.lnx);
        tile.i0 = g.i0 + offset;
        tile.t.assign(static_cast<std::size_t>((tile.lnx + 2) * g.row_stride()), 0.0);
        tile.next = tile.t;
        MPI_Type_vector(static_cast<int>(tile.lnx), 1, static_cast<int>(g.row_stride()), MPI_DOUBLE, &tile.column);
        MPI_Type_commit(&tile.column);
    }
    return tiles;
}

// ---- physics ---------------------------------------------------------------

double initial_value(std::int64_t i, std::int64_t j)
{
    return static_cast<double>((i * 7 + j * 13) % 101) / 100.0;
}

void initialise(const Grid& g, std::vector<Tile>& tiles)
{
    for (auto& tile : tiles)
        for (std::int64_t li = 1; li <= tile.lnx; ++li)
            for (std::int64_t lj = 1; lj <= g.lny; ++lj)
                tile.t[g.idx(li, lj)] = initial_value(tile.i0 + li - 1, g.j0 + lj - 1);
}

// Fills the ghost layers of the tiles from their four neighbours (corners
// are not needed by the 5-point stencil): neighbouring ranks, and the tiles
// above and below on this rank.
void exchange_halo(const Grid& g, std::vector<Tile>& tiles)
{
    const int n = static_cast<int>(g.lny);
    double* top = tiles.front().t.data();
    double* bottom = tiles.back().t.data();
    const std::int64_t last = tiles.back().lnx;
    // Rows are contiguous: first owned row up, last owned row down.
    MPI_Sendrecv(top + g.idx(1, 1), n, MPI_DOUBLE, g.up, 0, bottom + g.idx(last + 1, 1), n, MPI_DOUBLE, g.down, 0,
                 g.comm, MPI_STATUS_IGNORE);
    MPI_Sendrecv(bottom + g.idx(last, 1), n, MPI_DOUBLE, g.down, 1, top + g.idx(0, 1), n, MPI_DOUBLE, g.up, 1, g.comm,
                 MPI_STATUS_IGNORE);
    for (std::size_t k = 0; k + 1 < tiles.size(); ++k) {
        Tile& a = tiles[k];
        Tile& b = tiles[k + 1];
        std::copy_n(&a.t[g.idx(a.lnx, 1)], n, &b.t[g.idx(0, 1)]);
        std::copy_n(&b.t[g.idx(1, 1)], n, &a.t[g.idx(a.lnx + 1, 1)]);
    }
    // Columns are strided: a vector type of a tile's rows, lny+2 apart. The
    // ranks of a process row split their rows alike: tile k meets tile k.
    for (std::size_t k = 0; k < tiles.size(); ++k) {
        double* a = tiles[k].t.data();
        const MPI_Datatype column = tiles[k].column;
        const int tag = 2 + 2 * static_cast<int>(k);
        MPI_Sendrecv(a + g.idx(1, 1), 1, column, g.left, tag, a + g.idx(1, g.lny + 1), 1, column, g.right, tag, g.comm,
                     MPI_STATUS_IGNORE);
        MPI_Sendrecv(a + g.idx(1, g.lny), 1, column, g.right, tag + 1, a + g.idx(1, 0), 1, column, g.left, tag + 1,
                     g.comm, MPI_STATUS_IGNORE);
    }
}

// One explicit step from `t` into `next`. Border cells of the global grid keep
// their value.
void step_once(const Grid& g, Tile& tile)
{
    const std::vector<double>& t = tile.t;
    std::vector<double>& next = tile.next;
    const std::int64_t s = g.row_stride();
    for (std::int64_t li = 1; li <= tile.lnx; ++li) {
        const std::int64_t i = tile.i0 + li - 1;
        const bool border_row = i == 0 || i == g.nx - 1;
        for (std::int64_t lj = 1; lj <= g.lny; ++lj) {
            const std::int64_t j = g.j0 + lj - 1;
            const std::size_t c = static_cast<std::size_t>(li * s + lj);
            const double tc = t[c];
            if (border_row || j == 0 || j == g.ny - 1) {
                next[c] = tc;
                continue;
            }
            const double sum = ((t[c - s] + t[c + s]) + t[c - 1]) + t[c + 1];
            const double lap = sum - 4.0 * tc;
            next[c] = tc + 0.1 * lap;
        }
    }
}

// ---- digest ----------------------------------------------------------------

std::uint64_t splitmix64(std::uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// Sum (mod 2^64) over every cell of splitmix64(bits(T) + golden * (i*ny + j + 1)):
// independent of the decomposition. The result is valid on rank 0.
std::uint64_t digest(const Grid& g, const std::vector<Tile>& tiles)
{
    std::uint64_t local = 0;
    for (const auto& tile : tiles) {
        for (std::int64_t li = 1; li <= tile.lnx; ++li) {
            const std::int64_t i = tile.i0 + li - 1;
            for (std::int64_t lj = 1; lj <= g.lny; ++lj) {
                const std::int64_t j = g.j0 + lj - 1;
                std::uint64_t bits = 0;
                std::memcpy(&bits, &tile.t[g.idx(li, lj)], sizeof bits);
                const std::uint64_t cell = static_cast<std::uint64_t>(i * g.ny + j + 1);
                local += splitmix64(bits + 0x9E3779B97F4A7C15ull * cell);
            }
        }
    }
    std::uint64_t global = 0;
    MPI_Reduce(&local, &global, 1, MPI_UINT64_T, MPI_SUM, 0, g.comm);
    return global;
}

// ---- checkpoint ------------------------------------------------------------

// The state dict of the simulation: this rank's owned box of the field (with
// --tiles, one box per tile: add_array again under the same name), each seen
// through a strided window into its local array (the ghosts are neither
// saved nor overwritten), and the step counter.
cairn::StateDict make_state(const Grid& g, std::vector<Tile>& tiles, std::int64_t& step)
{
    cairn::StateDict state;
    for (auto& tile : tiles)
        state.add_array<double>("temperature", &tile.t[g.idx(1, 1)], {g.nx, g.ny},
                                cairn::Box{{tile.i0, g.j0}, {tile.lnx, g.lny}}, {g.row_stride(), 1});
    state.add_scalar("step", &step);
    return state;
}

int run(int argc, char** argv)
{
    int world_rank = 0, world_size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);

    // Every rank parses the same argv, so every rank takes the same branch.
    Options opt;
    const std::string bad = parse_args(argc, argv, opt);
    if (opt.help) {
        if (world_rank == 0)
            std::fputs(usage_text, stdout);
        return exit_ok;
    }
    if (!bad.empty()) {
        if (world_rank == 0)
            std::fprintf(stderr, "heat2d: %s\n%s", bad.c_str(), usage_text);
        return exit_usage;
    }

    Grid g;
    g.nx = opt.nx;
    g.ny = opt.ny;
    MPI_Dims_create(world_size, 2, g.dims);
    if (g.dims[0] > g.nx || g.dims[1] > g.ny) {
        if (world_rank == 0)
            std::fprintf(stderr, "heat2d: a %" PRId64 " x %" PRId64 " grid is too small for a %d x %d process grid\n%s",
                         g.nx, g.ny, g.dims[0], g.dims[1], usage_text);
        return exit_usage;
    }
    const int periods[2] = {0, 0};
    MPI_Cart_create(MPI_COMM_WORLD, 2, g.dims, periods, 0, &g.comm);
    MPI_Comm_rank(g.comm, &g.rank);
    MPI_Comm_size(g.comm, &g.size);
    MPI_Cart_coords(g.comm, g.rank, 2, g.coords);
    MPI_Cart_shift(g.comm, 0, 1, &g.up, &g.down);
    MPI_Cart_shift(g.comm, 1, 1, &g.left, &g.right);
    block(g.nx, g.dims[0], g.coords[0], g.i0, g.lnx);
    block(g.ny, g.dims[1], g.coords[1], g.j0, g.lny);
    std::vector<Tile> tiles = make_tiles(g, opt.tiles);
    std::int64_t step = 0;

    if (g.rank == 0)
        std::printf("heat2d: %" PRId64 " x %" PRId64 " grid, %d ranks (%d x %d), until step %" PRId64 "\n", g.nx,
                    g.ny, g.size, g.dims[0], g.dims[1], opt.steps);

    int rc = exit_ok;
    try {
        if (!opt.resume.empty()) {
            // The latest committed checkpoint, on whatever number of ranks it
            // was written; none (a first run): from the beginning.
            cairn::ManagerOptions from_options;
            from_options.layout = opt.container ? cairn::Layout::container : cairn::Layout::per_rank;
            from_options.local = opt.local;
            cairn::CheckpointManager from(opt.resume, g.comm, from_options);
            cairn::StateDict state = make_state(g, tiles, step);
            const auto found = from.restore_latest(state);
            if (!found) {
                initialise(g, tiles);
                if (g.rank == 0)
                    std::printf("no committed checkpoint in %s: starting from step 0\n", opt.resume.c_str());
            } else {
                if (step != *found || step > opt.steps)
                    throw AppError("the latest checkpoint in " + opt.resume + " is at step " + std::to_string(step) +
                                   (step != *found ? ", not at the step it is named after"
                                                   : ", beyond --steps " + std::to_string(opt.steps)));
                const cairn::RestoreReport& how = from.last_restore();
                if (g.rank == 0 && how.level == cairn::RestoreReport::Level::node_local)
                    std::printf("resumed from node-local storage %s at step %" PRId64
                                " on %d ranks (%zu files rebuilt, %" PRIu64 " bytes moved between nodes)\n",
                                opt.local.dir.c_str(), step, g.size, how.rebuilt.size(), how.bytes_moved);
                else if (g.rank == 0)
                    std::printf("resumed from %s at step %" PRId64 " on %d ranks\n",
                                from.checkpoint_path(step).c_str(), step, g.size);
            }
        } else if (!opt.restart.empty()) {
            cairn::StateDict state = make_state(g, tiles, step);
            const cairn::LoadResult r = cairn::load(state, opt.restart, g.comm);
            (void)r;
            if (step < 0 || step > opt.steps)
                throw AppError("checkpoint " + opt.restart + " is at step " + std::to_string(step) +
                                         ", beyond --steps " + std::to_string(opt.steps));
            if (g.rank == 0)
                std::printf("restarted from %s at step %" PRId64 " on %d ranks\n", opt.restart.c_str(), step, g.size);
        } else {
            initialise(g, tiles);
        }
        // The border cells are copied, never recomputed: seed `next` with them.
        for (auto& tile : tiles)
            tile.next = tile.t;

        // The checkpoint: at --checkpoint-step (stepping goes on), or at the end.
        const std::int64_t save_at = opt.checkpoint_step >= 0 ? opt.checkpoint_step : opt.steps;
        if (!opt.checkpoint.empty() && (save_at < step || save_at > opt.steps))
            throw AppError("--checkpoint-step " + std::to_string(save_at) + " is outside the steps run, " +
                           std::to_string(step) + ".." + std::to_string(opt.steps));
        cairn::AsyncSave pending;
        auto report = [&](const cairn::SaveResult& r, std::int64_t at) {
            if (g.rank == 0)
                std::printf("checkpoint %s written%s: %" PRIu64 " bytes, %zu entries, step %" PRId64 ", %.3f s\n",
                            opt.checkpoint.c_str(), opt.async ? " in the background" : "", r.bytes_written, r.entries,
                            at, r.seconds);
        };
        auto checkpoint = [&] {
            cairn::SaveOptions so;
            so.overwrite = true;
            so.per_rank.files = opt.files;
            cairn::StateDict state = make_state(g, tiles, step);
            if (!opt.async) {
                report(cairn::save(state, opt.checkpoint, g.comm, so), step);
                return;
            }
            pending = cairn::async_save(state, opt.checkpoint, g.comm, so);
            pending.staged().wait(); // t may change from the next step on
            if (g.rank == 0)
                std::printf("checkpoint of step %" PRId64 " staged, writing in the background\n", step);
        };

        // Periodic checkpoints through a manager: every K steps after the
        // first step of this run (never the step it resumed from).
        std::unique_ptr<cairn::CheckpointManager> manager;
        if (opt.checkpoint_every > 0) {
            cairn::ManagerOptions mo;
            mo.keep_last = 2;
            mo.async = opt.async;
            mo.layout = opt.container ? cairn::Layout::container : cairn::Layout::per_rank;
            mo.save_options.per_rank.files = opt.files;
            mo.local = opt.local;
            manager = std::make_unique<cairn::CheckpointManager>(
                opt.checkpoint_dir.empty() ? opt.resume : opt.checkpoint_dir, g.comm, mo);
        }
        auto report_managed = [&](const cairn::SaveResult& r, std::int64_t at) {
            if (g.rank == 0)
                std::printf("checkpoint of step %" PRId64 " committed: %" PRIu64 " bytes, %.3f s\n", at,
                            r.bytes_written, r.seconds);
        };
        std::int64_t in_background = -1; // the step of the async save in flight
        auto periodic = [&](std::int64_t at, std::int64_t from) {
            if (!manager || at == from || at % opt.checkpoint_every != 0)
                return;
            cairn::StateDict state = make_state(g, tiles, step);
            const std::int64_t before = in_background;
            in_background = -1;
            if (const auto r = manager->save(at, state)) {
                report_managed(*r, at);
                return;
            }
            if (g.rank == 0) {
                if (before >= 0)
                    std::printf("checkpoint of step %" PRId64 " committed in the background\n", before);
                std::printf("checkpoint of step %" PRId64 " staged, writing in the background\n", at);
            }
            in_background = at;
        };

        const double t0 = MPI_Wtime();
        const std::int64_t first = step;
        const std::int64_t checkpoint_step = save_at;
        for (; step < opt.steps; ++step) {
            if (!opt.checkpoint.empty() && step == checkpoint_step)
                checkpoint();
            periodic(step, first);
            exchange_halo(g, tiles);
            for (auto& tile : tiles) {
                step_once(g, tile);
                std::swap(tile.t, tile.next);
            }
        }
        const double elapsed = MPI_Wtime() - t0;
        if (g.rank == 0)
            std::printf("ran steps %" PRId64 "..%" PRId64 " in %.3f s\n", first, step, elapsed);
        if (!opt.checkpoint.empty() && checkpoint_step == opt.steps)
            checkpoint();
        periodic(step, first);
        // The newest node-local step also goes to the file system at the end.
        if (manager && !opt.local.dir.empty() && !opt.container)
            if (const auto drained = manager->flush())
                if (g.rank == 0)
                    std::printf("draining step %" PRId64 " into %s\n", *drained, manager->root().c_str());
        if (manager)
            if (const auto r = manager->wait())
                report_managed(*r, in_background);
        if (pending.valid())
            report(pending.wait(), checkpoint_step);

        const std::uint64_t d = digest(g, tiles);
        if (g.rank == 0) {
            std::printf("digest %016" PRIx64 "\n", d);
            std::fflush(stdout);
        }
    } catch (const cairn::Error& e) {
        // Collective Cairn calls throw the same exception on every rank.
        if (g.rank == 0)
            std::fprintf(stderr, "heat2d: error: %s\n", e.what());
        rc = exit_error;
    } catch (const AppError& e) {
        if (g.rank == 0)
            std::fprintf(stderr, "heat2d: error: %s\n", e.what());
        rc = exit_error;
    }

    for (auto& tile : tiles)
        MPI_Type_free(&tile.column);
    MPI_Comm_free(&g.comm);
    return rc;
}

} // namespace

int main(int argc, char** argv)
{
    // async_save (--async) runs MPI calls on a background thread.
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    int rc = exit_error;
    try {
        rc = run(argc, argv);
    } catch (const std::exception& e) {
        // Not agreed between ranks (e.g. out of memory on one rank): the
        // others may be waiting in a collective call, so abort them all.
        std::fprintf(stderr, "heat2d: fatal: %s\n", e.what());
        std::fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, exit_error);
    }
    std::fflush(stdout);
    MPI_Finalize();
    return rc;
}
