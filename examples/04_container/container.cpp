// 04_container: the whole checkpoint in one HDF5 file.
//
// With a checkpoint id ending in ".h5", cairn::save writes a *container*: one
// parallel HDF5 file that all ranks write together, each array a dataset of
// its global shape, each scalar and string a dataset too, and Cairn's
// metadata in the group /cairn. h5dump, h5py or any HDF5 tool reads it
// without Cairn; Cairn loads it like any checkpoint, on any number of ranks.
//
//   mpiexec -n 4 ./04_container [FILE.h5]     (default: ckpt_04_container.h5)
//   h5dump -H FILE.h5                         (what the CTest test checks)
//
// Saves an 8 x 6 field as blocks of rows on all ranks, then loads it as
// blocks of columns on one rank fewer. Prints "04_container: OK" on rank 0
// and exits 0 when every value came back.
#include <cairn/checkpoint.hpp>
#include <cairn/errors.hpp>
#include <cairn/state_dict.hpp>

#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

constexpr std::int64_t NY = 8, NX = 6; // the global field
double value(std::int64_t i, std::int64_t j) { return 10.0 * static_cast<double>(i) + static_cast<double>(j); }

int main(int argc, char** argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const std::string path = argc > 1 ? argv[1] : "ckpt_04_container.h5";
    if (size < 2) { // loading on one rank fewer needs two ranks at least
        std::fprintf(stderr, "04_container: run me on 2 ranks or more\n");
        MPI_Finalize();
        return 1;
    }
    int wrong = 0;
    try {
        // 1. Save on all ranks. Rank r holds rows [i0, i0 + ni): a dense block.
        const std::int64_t i0 = NY * rank / size, ni = NY * (rank + 1) / size - i0;
        std::vector<double> rows(static_cast<std::size_t>(ni * NX));
        for (std::int64_t i = 0; i < ni; ++i)
            for (std::int64_t j = 0; j < NX; ++j)
                rows[static_cast<std::size_t>(i * NX + j)] = value(i0 + i, j);
        std::int64_t step = 42;
        std::string model = "heat";
        cairn::StateDict state;
        state.add_array<double>("temperature", rows.data(), {NY, NX}, cairn::Box{{i0, 0}, {ni, NX}});
        state.add_scalar("step", &step);   // the dataset /step
        state.add_string("model", &model); // the dataset /model
        cairn::SaveOptions options;
        options.overwrite = true; // the layout is chosen by the name: ".h5" means a container
        cairn::save(state, path, MPI_COMM_WORLD, options);
        if (rank == 0)
            std::printf("04_container: saved an 8 x 6 field on %d ranks into one HDF5 file\n", size);

        // 2. Load on the first size - 1 ranks, each a block of columns.
        MPI_Comm fewer = MPI_COMM_NULL;
        MPI_Comm_split(MPI_COMM_WORLD, rank < size - 1 ? 0 : MPI_UNDEFINED, rank, &fewer);
        if (fewer != MPI_COMM_NULL) {
            const int m = size - 1;
            const std::int64_t j0 = NX * rank / m, nj = NX * (rank + 1) / m - j0;
            std::vector<double> cols(static_cast<std::size_t>(NY * nj), -1.0);
            std::int64_t step_in = 0;
            std::string model_in;
            cairn::StateDict loaded;
            loaded.add_array<double>("temperature", cols.data(), {NY, NX}, cairn::Box{{0, j0}, {NY, nj}});
            loaded.add_scalar("step", &step_in);
            loaded.add_string("model", &model_in);
            cairn::load(loaded, path, fewer); // a regular file: Cairn reads it as a container
            for (std::int64_t i = 0; i < NY; ++i)
                for (std::int64_t j = 0; j < nj; ++j)
                    wrong += cols[static_cast<std::size_t>(i * nj + j)] != value(i, j0 + j);
            wrong += step_in != 42 || model_in != "heat";
            if (rank == 0)
                std::printf("04_container: loaded on %d ranks (column blocks)\n", m);
            MPI_Comm_free(&fewer);
        }
    } catch (const cairn::Error& e) { // the same error on every rank of the call
        std::fprintf(stderr, "04_container: error on rank %d: %s\n", rank, e.what());
        wrong = 1;
    }
    int total = 0;
    MPI_Allreduce(&wrong, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        std::printf(total == 0 ? "04_container: OK\n" : "04_container: FAILED (%d wrong values)\n", total);
    MPI_Finalize();
    return total == 0 ? 0 : 1;
}
