// heat2d_kokkos: the heat2d example on Kokkos views.
//
// The same explicit 2-D heat equation, command line, decomposition and
// digest as examples/heat2d/heat2d.cpp, with the field in Kokkos views
// ((lnx+2) x (lny+2), one ghost layer) updated by Kokkos kernels. The
// checkpoint is the interior subview of the field (ghost cells excluded),
// added with cairn::kokkos::add_view under the same names as heat2d's, so
// checkpoints are interchangeable: a heat2d checkpoint restarts here and vice
// versa, on any number of ranks, and with either view layout:
//
//   mpiexec -n 4 heat2d_kokkos --nx 96 --ny 80 --steps 100 --checkpoint ckpt
//   mpiexec -n 3 heat2d_kokkos --nx 96 --ny 80 --steps 200 --restart ckpt --layout left
//   mpiexec -n 2 heat2d        --nx 96 --ny 80 --steps 200 --restart ckpt
//
// --layout right|left picks Kokkos::LayoutRight or LayoutLeft for the field
// (default: the default execution space's layout). The checkpoint stores the
// field in index order, T(i, j) as element [i][j] of the nx x ny array,
// whatever the layout (see cairn/kokkos.hpp).
//
// The arithmetic is written out operation by operation (and compiled with
// -ffp-contract=off; a CUDA build would also need nvcc --fmad=false) so the
// digest is bitwise reproducible and equal to heat2d's.

#include <cairn/checkpoint.hpp>
#include <cairn/errors.hpp>
#include <cairn/kokkos.hpp>
#include <cairn/state_dict.hpp>

#include <Kokkos_Core.hpp>

#include <mpi.h>

#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

namespace {

constexpr int exit_ok = 0;
constexpr int exit_error = 1;
constexpr int exit_usage = 2;

// An error of this program, raised identically on every rank.
struct AppError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// ---- command line ----------------------------------------------------------

enum class Layout { automatic, right, left };

struct Options {
    std::int64_t nx = 0;
    std::int64_t ny = 0;
    std::int64_t steps = -1;
    std::string checkpoint;
    std::string restart;
    Layout layout = Layout::automatic;
    bool help = false;
};

const char* const usage_text =
    "usage: heat2d_kokkos --nx NX --ny NY --steps S [--checkpoint PATH] [--restart PATH]\n"
    "                     [--layout right|left] [--kokkos-... Kokkos options]\n"
    "  --nx NX, --ny NY   global grid size (rows, columns), at least 1 each\n"
    "  --steps S          run until global step S (S >= 0)\n"
    "  --checkpoint PATH  save the field and the step counter to PATH at the end\n"
    "  --restart PATH     load the field and the step counter from PATH first\n"
    "  --layout L         layout of the field's views: right (LayoutRight) or\n"
    "                     left (LayoutLeft); default: the execution space's\n"
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

// Parses argv (after Kokkos took its own arguments) into `opt`; returns an
// error message, empty on success.
std::string parse_args(int argc, char** argv, Options& opt)
{
    bool have_nx = false, have_ny = false, have_steps = false;
    for (int k = 1; k < argc; ++k) {
        std::string arg = argv[k];
        if (arg == "-h" || arg == "--help") {
            opt.help = true;
            continue;
        }
        std::string value;
        const auto eq = arg.find('=');
        if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
            value = arg.substr(eq + 1);
            arg.resize(eq);
        } else if (arg == "--nx" || arg == "--ny" || arg == "--steps" || arg == "--checkpoint" || arg == "--restart" ||
                   arg == "--layout") {
            if (k + 1 >= argc)
                return "missing value after " + arg;
            value = argv[++k];
        } else {
            return "unknown argument '" + arg + "'";
        }
        if (arg == "--nx" || arg == "--ny" || arg == "--steps") {
            std::int64_t v = 0;
            if (!parse_int(value, v))
                return "not an integer: " + arg + " '" + value + "'";
            if (arg == "--nx") {
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
        } else if (arg == "--layout") {
            if (value == "right")
                opt.layout = Layout::right;
            else if (value == "left")
                opt.layout = Layout::left;
            else
                return "--layout must be right or left, not '" + value + "'";
        } else {
            return "unknown argument '" + arg + "'";
        }
    }
    if (opt.help)
        return {};
    if (!have_nx || !have_ny || !have_steps)
        return "--nx, --ny and --steps are required";
    constexpr std::int64_t max_extent = std::int64_t(1) << 30;
    if (opt.nx < 1 || opt.ny < 1 || opt.nx > max_extent || opt.ny > max_extent)
        return "--nx and --ny must be between 1 and 2^30";
    if (opt.steps < 0)
        return "--steps must be >= 0";
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
};

using Range = Kokkos::pair<std::int64_t, std::int64_t>;
using Policy2D = Kokkos::MDRangePolicy<Kokkos::Rank<2>, Kokkos::IndexType<std::int64_t>>;

// The owned cells (li, lj) in [1, lnx] x [1, lny] of the local array.
Policy2D interior_policy(const Grid& g) { return Policy2D({1, 1}, {g.lnx + 1, g.lny + 1}); }

// ---- physics ---------------------------------------------------------------

KOKKOS_INLINE_FUNCTION double initial_value(std::int64_t i, std::int64_t j)
{
    return static_cast<double>((i * 7 + j * 13) % 101) / 100.0;
}

KOKKOS_INLINE_FUNCTION std::uint64_t splitmix64(std::uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// Contiguous buffers for one face of the halo, in the field's memory space,
// with host mirrors for MPI (the same views when the field is in host memory).
template <class Field>
struct FaceBuffers {
    using Buffer = Kokkos::View<double*, typename Field::memory_space>;
    Buffer send, recv;
    typename Buffer::HostMirror send_host, recv_host;

    explicit FaceBuffers(std::int64_t n)
        : send("halo_send", static_cast<std::size_t>(n)), recv("halo_recv", static_cast<std::size_t>(n)),
          send_host(Kokkos::create_mirror_view(send)), recv_host(Kokkos::create_mirror_view(recv))
    {
    }

    // Sends `from` (a row or column of the field) to `dest` and receives the
    // ghost row or column `to` from `source`.
    template <class From, class To>
    void exchange(const From& from, int dest, const To& to, int source, int tag, MPI_Comm comm)
    {
        Kokkos::deep_copy(send, from);
        Kokkos::deep_copy(send_host, send);
        const int n = static_cast<int>(send.extent(0));
        MPI_Sendrecv(send_host.data(), n, MPI_DOUBLE, dest, tag, recv_host.data(), n, MPI_DOUBLE, source, tag, comm,
                     MPI_STATUS_IGNORE);
        if (source != MPI_PROC_NULL) {
            Kokkos::deep_copy(recv, recv_host);
            Kokkos::deep_copy(to, recv);
        }
    }
};

template <class Field>
struct Halo {
    FaceBuffers<Field> rows, columns;
    explicit Halo(const Grid& g) : rows(g.lny), columns(g.lnx) {}

    // Fills the ghost layer from the four neighbours (corners are not needed
    // by the 5-point stencil).
    void exchange(const Grid& g, const Field& t)
    {
        const Range in_i(1, g.lnx + 1), in_j(1, g.lny + 1);
        const auto row = [&](std::int64_t li) { return Kokkos::subview(t, li, in_j); };
        const auto col = [&](std::int64_t lj) { return Kokkos::subview(t, in_i, lj); };
        rows.exchange(row(1), g.up, row(g.lnx + 1), g.down, 0, g.comm);
        rows.exchange(row(g.lnx), g.down, row(0), g.up, 1, g.comm);
        columns.exchange(col(1), g.left, col(g.lny + 1), g.right, 2, g.comm);
        columns.exchange(col(g.lny), g.right, col(0), g.left, 3, g.comm);
    }
};

template <class Field>
void initialise(const Grid& g, const Field& t)
{
    const std::int64_t i0 = g.i0, j0 = g.j0;
    Kokkos::parallel_for(
        "heat2d_kokkos::initialise", interior_policy(g), KOKKOS_LAMBDA(const std::int64_t li, const std::int64_t lj) {
            t(li, lj) = initial_value(i0 + li - 1, j0 + lj - 1);
        });
}

// One explicit step from `t` into `next`. Border cells of the global grid keep
// their value.
template <class Field>
void step_once(const Grid& g, const Field& t, const Field& next)
{
    const std::int64_t i0 = g.i0, j0 = g.j0, nx = g.nx, ny = g.ny;
    Kokkos::parallel_for(
        "heat2d_kokkos::step", interior_policy(g), KOKKOS_LAMBDA(const std::int64_t li, const std::int64_t lj) {
            const std::int64_t i = i0 + li - 1;
            const std::int64_t j = j0 + lj - 1;
            const double tc = t(li, lj);
            if (i == 0 || i == nx - 1 || j == 0 || j == ny - 1) {
                next(li, lj) = tc;
                return;
            }
            const double sum = ((t(li - 1, lj) + t(li + 1, lj)) + t(li, lj - 1)) + t(li, lj + 1);
            const double lap = sum - 4.0 * tc;
            next(li, lj) = tc + 0.1 * lap;
        });
}

// Sum (mod 2^64) over every cell of splitmix64(bits(T) + golden * (i*ny + j + 1)):
// independent of the decomposition and equal to heat2d's. Valid on rank 0.
template <class Field>
std::uint64_t digest(const Grid& g, const Field& t)
{
    const std::int64_t i0 = g.i0, j0 = g.j0, ny = g.ny;
    std::uint64_t local = 0;
    Kokkos::parallel_reduce(
        "heat2d_kokkos::digest", interior_policy(g),
        KOKKOS_LAMBDA(const std::int64_t li, const std::int64_t lj, std::uint64_t& sum) {
            const std::int64_t i = i0 + li - 1;
            const std::int64_t j = j0 + lj - 1;
            const double v = t(li, lj);
            std::uint64_t bits = 0;
            std::memcpy(&bits, &v, sizeof bits);
            const std::uint64_t cell = static_cast<std::uint64_t>(i * ny + j + 1);
            sum += splitmix64(bits + 0x9E3779B97F4A7C15ull * cell);
        },
        local);
    std::uint64_t global = 0;
    MPI_Reduce(&local, &global, 1, MPI_UINT64_T, MPI_SUM, 0, g.comm);
    return global;
}

// ---- checkpoint ------------------------------------------------------------

// The state dict of the simulation: the interior subview of `field` (the
// owned box [i0, i0+lnx) x [j0, j0+lny) of the nx x ny array; the ghosts are
// neither saved nor overwritten) and the step counter. The same names, dtype
// and global shape as heat2d's, so checkpoints are interchangeable.
template <class HostField>
cairn::StateDict make_state(const Grid& g, const HostField& field, std::int64_t& step)
{
    cairn::StateDict state;
    const auto interior = Kokkos::subview(field, Range(1, g.lnx + 1), Range(1, g.lny + 1));
    cairn::kokkos::add_view(state, "temperature", interior, {g.nx, g.ny}, {g.i0, g.j0});
    state.add_scalar("step", &step);
    return state;
}

template <class Layout>
const char* layout_name()
{
    return std::is_same<Layout, Kokkos::LayoutLeft>::value ? "LayoutLeft" : "LayoutRight";
}

// The time loop on views of layout L (after the common setup in run()).
template <class L>
int simulate(Grid& g, const Options& opt)
{
    using Field = Kokkos::View<double**, L>;
    if (g.rank == 0)
        std::printf("heat2d_kokkos: %" PRId64 " x %" PRId64 " grid, %d ranks (%d x %d), until step %" PRId64
                    ", Kokkos %s, %s\n",
                    g.nx, g.ny, g.size, g.dims[0], g.dims[1], opt.steps, Kokkos::DefaultExecutionSpace::name(),
                    layout_name<L>());

    const auto rows = static_cast<std::size_t>(g.lnx + 2), cols = static_cast<std::size_t>(g.lny + 2);
    Field t("temperature", rows, cols), next("temperature_next", rows, cols);
    // Cairn reads and writes the field through a host mirror: the field
    // itself when it lives in host memory (Serial, OpenMP, ...), no copy.
    auto host = Kokkos::create_mirror_view(t);
    Halo<Field> halo(g);
    std::int64_t step = 0;

    int rc = exit_ok;
    try {
        if (!opt.restart.empty()) {
            cairn::StateDict state = make_state(g, host, step);
            cairn::load(state, opt.restart, g.comm);
            Kokkos::deep_copy(t, host);
            if (step < 0 || step > opt.steps)
                throw AppError("checkpoint " + opt.restart + " is at step " + std::to_string(step) +
                               ", beyond --steps " + std::to_string(opt.steps));
            if (g.rank == 0)
                std::printf("restarted from %s at step %" PRId64 " on %d ranks\n", opt.restart.c_str(), step, g.size);
        } else {
            initialise(g, t);
        }
        // The border cells are copied, never recomputed: seed `next` with them.
        Kokkos::deep_copy(next, t);

        const double t0 = MPI_Wtime();
        const std::int64_t first = step;
        for (; step < opt.steps; ++step) {
            halo.exchange(g, t);
            step_once(g, t, next);
            std::swap(t, next);
        }
        Kokkos::fence();
        const double elapsed = MPI_Wtime() - t0;
        if (g.rank == 0)
            std::printf("ran steps %" PRId64 "..%" PRId64 " in %.3f s\n", first, step, elapsed);

        if (!opt.checkpoint.empty()) {
            // After the swaps `t` may be the other allocation than `host` mirrors.
            host = Kokkos::create_mirror_view(t);
            Kokkos::deep_copy(host, t); // a no-op when `host` is `t`
            cairn::SaveOptions so;
            so.overwrite = true;
            cairn::StateDict state = make_state(g, host, step);
            const cairn::SaveResult r = cairn::save(state, opt.checkpoint, g.comm, so);
            if (g.rank == 0)
                std::printf("checkpoint %s written: %" PRIu64 " bytes, %zu entries, step %" PRId64 ", %.3f s\n",
                            opt.checkpoint.c_str(), r.bytes_written, r.entries, step, r.seconds);
        }

        const std::uint64_t d = digest(g, t);
        if (g.rank == 0) {
            std::printf("digest %016" PRIx64 "\n", d);
            std::fflush(stdout);
        }
    } catch (const cairn::Error& e) {
        // Collective Cairn calls throw the same exception on every rank.
        if (g.rank == 0)
            std::fprintf(stderr, "heat2d_kokkos: error: %s\n", e.what());
        rc = exit_error;
    } catch (const AppError& e) {
        if (g.rank == 0)
            std::fprintf(stderr, "heat2d_kokkos: error: %s\n", e.what());
        rc = exit_error;
    }
    return rc;
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
            std::fprintf(stderr, "heat2d_kokkos: %s\n%s", bad.c_str(), usage_text);
        return exit_usage;
    }

    Grid g;
    g.nx = opt.nx;
    g.ny = opt.ny;
    MPI_Dims_create(world_size, 2, g.dims);
    if (g.dims[0] > g.nx || g.dims[1] > g.ny) {
        if (world_rank == 0)
            std::fprintf(stderr,
                         "heat2d_kokkos: a %" PRId64 " x %" PRId64 " grid is too small for a %d x %d process grid\n%s",
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

    using DefaultLayout = Kokkos::DefaultExecutionSpace::array_layout;
    const Layout layout = opt.layout != Layout::automatic                                 ? opt.layout
                          : std::is_same<DefaultLayout, Kokkos::LayoutLeft>::value ? Layout::left
                                                                                        : Layout::right;
    const int rc = layout == Layout::left ? simulate<Kokkos::LayoutLeft>(g, opt) : simulate<Kokkos::LayoutRight>(g, opt);
    MPI_Comm_free(&g.comm);
    return rc;
}

} // namespace

int main(int argc, char** argv)
{
    MPI_Init(&argc, &argv);
    Kokkos::initialize(argc, argv); // takes its --kokkos-* arguments out of argv
    int rc = exit_error;
    try {
        rc = run(argc, argv);
    } catch (const std::exception& e) {
        // Not agreed between ranks (e.g. out of memory on one rank): the
        // others may be waiting in a collective call, so abort them all.
        std::fprintf(stderr, "heat2d_kokkos: fatal: %s\n", e.what());
        std::fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, exit_error);
    }
    std::fflush(stdout);
    Kokkos::finalize();
    MPI_Finalize();
    return rc;
}
