// 06_kokkos: checkpointing Kokkos views with cairn/kokkos.hpp.
//
// cairn::kokkos::add_view adds a Kokkos::View to a state dict as this rank's
// box of a global array, without copying it: Cairn reads and writes the view
// through its own strides. So a subview that leaves out the ghost cells is
// saved without them (and a load leaves them alone), and element v(i, j) is
// global element [i0 + i][j0 + j] in every layout: a LayoutRight view can be
// restored into a LayoutLeft one, on another number of ranks.
//
//   mpiexec -n 3 ./06_kokkos [CHECKPOINT_DIR]       (default: ckpt_06_kokkos)
//
// Saves an 8 x 6 field (LayoutRight, with ghost cells) and a velocity
// (LayoutLeft) as blocks of rows on all ranks; loads them with the layouts
// swapped as blocks of columns on one rank fewer. Prints "06_kokkos: OK".
#include <cairn/checkpoint.hpp>
#include <cairn/errors.hpp>
#include <cairn/kokkos.hpp> // not in cairn/cairn.hpp: link the CMake target Cairn::kokkos

#include <Kokkos_Core.hpp>
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <string>

constexpr std::int64_t NY = 8, NX = 6, GHOST = -999; // GHOST: what ghost cells hold
double value(std::int64_t i, std::int64_t j) { return 10.0 * static_cast<double>(i) + static_cast<double>(j); }
template <class Layout> using Field = Kokkos::View<double**, Layout, Kokkos::HostSpace>;
using Range = Kokkos::pair<std::int64_t, std::int64_t>;
using Host = Kokkos::DefaultHostExecutionSpace;

int run(const std::string& path, int rank, int size)
{
    // 1. Rows [i0, i0 + ni) on every rank: t with a ghost layer all around.
    const std::int64_t i0 = NY * rank / size, ni = NY * (rank + 1) / size - i0;
    Field<Kokkos::LayoutRight> t("t", ni + 2, NX + 2);
    Field<Kokkos::LayoutLeft> vel("vel", ni, NX); // column-major, like Fortran
    Kokkos::deep_copy(t, GHOST);
    Kokkos::parallel_for("fill", Kokkos::RangePolicy<Host>(0, ni), [=](std::int64_t i) {
        for (std::int64_t j = 0; j < NX; ++j) {
            t(i + 1, j + 1) = value(i0 + i, j);
            vel(i, j) = -value(i0 + i, j);
        }
    });
    Kokkos::fence(); // the kernels writing the views are done before Cairn reads them
    cairn::StateDict state;
    cairn::kokkos::add_view(state, "temperature", Kokkos::subview(t, Range(1, ni + 1), Range(1, NX + 1)), {NY, NX}, {i0, 0});
    cairn::kokkos::add_view(state, "velocity", vel, {NY, NX}, {i0, 0});
    cairn::SaveOptions options;
    options.overwrite = true;
    cairn::save(state, path, MPI_COMM_WORLD, options);
    if (rank == 0)
        std::printf("06_kokkos: saved on %d ranks (LayoutRight subview, LayoutLeft view)\n", size);

    // 2. Columns [j0, j0 + nj) on the first size - 1 ranks, layouts swapped.
    MPI_Comm fewer = MPI_COMM_NULL;
    MPI_Comm_split(MPI_COMM_WORLD, rank < size - 1 ? 0 : MPI_UNDEFINED, rank, &fewer);
    int wrong = 0;
    if (fewer != MPI_COMM_NULL) {
        const std::int64_t m = size - 1, j0 = NX * rank / m, nj = NX * (rank + 1) / m - j0;
        Field<Kokkos::LayoutLeft> t2("t2", NY + 2, nj + 2);
        Field<Kokkos::LayoutRight> vel2("vel2", NY, nj);
        Kokkos::deep_copy(t2, GHOST);
        cairn::StateDict loaded;
        cairn::kokkos::add_view(loaded, "temperature", Kokkos::subview(t2, Range(1, NY + 1), Range(1, nj + 1)), {NY, NX}, {0, j0});
        cairn::kokkos::add_view(loaded, "velocity", vel2, {NY, NX}, {0, j0});
        cairn::load(loaded, path, fewer); // has written the views when it returns
        for (std::int64_t i = 0; i < NY + 2; ++i)
            for (std::int64_t j = 0; j < nj + 2; ++j) {
                const bool ghost = i == 0 || j == 0 || i == NY + 1 || j == nj + 1;
                wrong += t2(i, j) != (ghost ? GHOST : value(i - 1, j0 + j - 1)); // ghosts untouched
                wrong += !ghost && vel2(i - 1, j - 1) != -value(i - 1, j0 + j - 1);
            }
        if (rank == 0)
            std::printf("06_kokkos: loaded on %lld ranks (LayoutLeft subview, LayoutRight view)\n", static_cast<long long>(m));
        MPI_Comm_free(&fewer);
    }
    return wrong;
}

int main(int argc, char** argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, size = 0, wrong = 1, total = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    {
        Kokkos::ScopeGuard kokkos(argc, argv); // views must be gone before Kokkos::finalize
        try {
            wrong = size < 2 ? 1 : run(argc > 1 ? argv[1] : "ckpt_06_kokkos", rank, size);
        } catch (const cairn::Error& e) { // the same error on every rank of the call
            std::fprintf(stderr, "06_kokkos: error on rank %d: %s\n", rank, e.what());
        }
    }
    MPI_Allreduce(&wrong, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        std::printf(total == 0 ? "06_kokkos: OK\n" : "06_kokkos: FAILED (%d wrong values)\n", total);
    MPI_Finalize();
    return total == 0 ? 0 : 1;
}
