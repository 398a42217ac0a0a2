// Downstream program of the Kokkos install test: saves a LayoutLeft view with
// a ghost layer through an installed Cairn, loads it into a LayoutRight view
// and checks every value. Prints "downstream: OK <version> on <n> ranks" on
// rank 0 and exits 0 when everything matches; otherwise exits 1.
//
//   mpiexec -n 2 downstream CHECKPOINT_DIR
#include <cairn/cairn.hpp>
#include <cairn/kokkos.hpp>

#include <Kokkos_Core.hpp>

#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>

namespace {

double value(std::int64_t i, std::int64_t j) { return 0.5 * static_cast<double>(i * 10 + j); }

int run(const std::string& path)
{
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    // Each rank owns 3 rows of a (3 * size) x 4 array, held with one ghost layer.
    const std::int64_t rows = 3, cols = 4, i0 = rank * rows;
    int bad = 0;
    {
        Kokkos::View<double**, Kokkos::LayoutLeft, Kokkos::HostSpace> t("t", rows + 2, cols + 2);
        Kokkos::deep_copy(t, -1.0);
        for (std::int64_t i = 0; i < rows; ++i)
            for (std::int64_t j = 0; j < cols; ++j)
                t(i + 1, j + 1) = value(i0 + i, j);
        cairn::StateDict state;
        cairn::kokkos::add_view(state, "t",
                                Kokkos::subview(t, Kokkos::pair<int, int>(1, rows + 1), Kokkos::pair<int, int>(1, cols + 1)),
                                {rows * size, cols}, {i0, 0});
        cairn::SaveOptions options;
        options.overwrite = true;
        cairn::save(state, path, MPI_COMM_WORLD, options);
    }
    {
        // Every rank loads the whole array into a LayoutRight view.
        Kokkos::View<double**, Kokkos::LayoutRight, Kokkos::HostSpace> u("u", rows * size, cols);
        cairn::StateDict state;
        cairn::kokkos::add_view(state, "t", u);
        cairn::load(state, path, MPI_COMM_WORLD);
        for (std::int64_t i = 0; i < rows * size; ++i)
            for (std::int64_t j = 0; j < cols; ++j)
                if (u(i, j) != value(i, j)) {
                    std::printf("rank %d: t(%lld, %lld) = %g, expected %g\n", rank, static_cast<long long>(i),
                                static_cast<long long>(j), u(i, j), value(i, j));
                    ++bad;
                }
    }
    int total = 0;
    MPI_Allreduce(&bad, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && total == 0)
        std::printf("downstream: OK %s on %d ranks\n", cairn::version(), size);
    return total == 0 ? 0 : 1;
}

} // namespace

int main(int argc, char** argv)
{
    MPI_Init(&argc, &argv);
    Kokkos::initialize(argc, argv);
    int rc = 0;
    try {
        rc = run(argc > 1 ? argv[1] : "downstream_ckpt");
    } catch (const std::exception& e) {
        std::fprintf(stderr, "downstream: error: %s\n", e.what());
        rc = 1;
    }
    Kokkos::finalize();
    MPI_Finalize();
    return rc;
}
