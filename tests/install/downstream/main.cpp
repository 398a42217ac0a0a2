// Downstream program of the install test: saves a state through an installed
// Cairn, loads it into fresh buffers and checks every value. Prints
// "downstream: OK <version>" on rank 0 and exits 0 when everything matches;
// otherwise prints what differs and exits 1.
//
//   mpiexec -n 2 downstream CHECKPOINT_DIR
#include <cairn/cairn.hpp>

#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

namespace {

int run(const std::string& path)
{
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    // Each rank holds 5 elements of a global array of 5 * size.
    const std::int64_t n = 5, global = n * size;
    std::vector<double> field(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i)
        field[static_cast<std::size_t>(i)] = 0.25 * static_cast<double>(rank * n + i);
    std::int64_t step = 42;
    std::string label = "downstream";

    cairn::StateDict state;
    state.add_array<double>("field", field.data(), {global}, cairn::Box{{rank * n}, {n}});
    state.add_scalar("step", &step);
    state.add_string("label", &label);

    cairn::SaveOptions options;
    options.overwrite = true;
    cairn::save(state, path, MPI_COMM_WORLD, options);

    // Forget everything, then load it back.
    for (double& x : field)
        x = -1.0;
    step = 0;
    label.clear();
    cairn::load(state, path, MPI_COMM_WORLD);

    int bad = 0;
    for (std::int64_t i = 0; i < n; ++i) {
        const double want = 0.25 * static_cast<double>(rank * n + i);
        if (field[static_cast<std::size_t>(i)] != want) {
            std::printf("rank %d: field[%lld] = %g, expected %g\n", rank, static_cast<long long>(rank * n + i),
                        field[static_cast<std::size_t>(i)], want);
            ++bad;
        }
    }
    if (step != 42) {
        std::printf("rank %d: step = %lld, expected 42\n", rank, static_cast<long long>(step));
        ++bad;
    }
    if (label != "downstream") {
        std::printf("rank %d: label = '%s', expected 'downstream'\n", rank, label.c_str());
        ++bad;
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
    int rc = 0;
    try {
        rc = run(argc > 1 ? argv[1] : "downstream_ckpt");
    } catch (const std::exception& e) {
        std::fprintf(stderr, "downstream: error: %s\n", e.what());
        rc = 1;
    }
    MPI_Finalize();
    return rc;
}
