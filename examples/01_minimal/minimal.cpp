// 01_minimal: the smallest complete use of Cairn.
//
// Every rank owns a block of one global 1-D array and all ranks share a step
// counter. We describe that state in a cairn::StateDict, save it, wipe it,
// load it back and check it.
//
//   mpiexec -n 2 ./01_minimal [CHECKPOINT_DIR]       (default: ckpt_01_minimal)
//
// Prints "01_minimal: OK" on rank 0 and exits 0 when every value came back.
#include <cairn/checkpoint.hpp> // cairn::save, cairn::load, SaveOptions
#include <cairn/errors.hpp>     // cairn::Error
#include <cairn/state_dict.hpp> // cairn::StateDict, cairn::Box

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char** argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const std::string path = argc > 1 ? argv[1] : "ckpt_01_minimal";

    // 1. The application's state. The global array `u` has 10 elements per
    //    rank; this rank owns [offset, offset + n). Each element holds its
    //    global index, so the check below knows what to expect.
    const std::int64_t n = 10;
    const std::int64_t global_n = n * size;
    const std::int64_t offset = n * rank;
    std::vector<double> u(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i)
        u[static_cast<std::size_t>(i)] = static_cast<double>(offset + i);
    std::int64_t step = 7; // a scalar: the same value on every rank

    int rc = 0;
    try {
        // 2. Describe the state: names -> memory. Nothing is copied; Cairn
        //    reads these buffers on save and writes into them on load.
        //    The Box says which part of the global array this rank holds.
        cairn::StateDict state;
        state.add_array<double>("u", u.data(), {global_n}, cairn::Box{{offset}, {n}});
        state.add_scalar("step", &step);

        // 3. Save: collective, every rank of the communicator calls it.
        //    `overwrite` replaces a checkpoint left by an earlier run (the
        //    old one stays intact until the new one is committed).
        cairn::SaveOptions options;
        options.overwrite = true;
        const cairn::SaveResult saved = cairn::save(state, path, MPI_COMM_WORLD, options);
        if (rank == 0)
            std::printf("01_minimal: saved %zu entries (%llu bytes of array data) to %s\n", saved.entries,
                        static_cast<unsigned long long>(saved.bytes_written), path.c_str());

        // 4. Pretend we restarted: wipe the state, then load into the same
        //    buffers (collective as well).
        std::fill(u.begin(), u.end(), -1.0);
        step = 0;
        cairn::load(state, path, MPI_COMM_WORLD);

        // 5. Check, then agree on the outcome across ranks.
        int wrong = 0;
        for (std::int64_t i = 0; i < n; ++i)
            wrong += u[static_cast<std::size_t>(i)] != static_cast<double>(offset + i);
        wrong += step != 7;
        int total = 0;
        MPI_Allreduce(&wrong, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        if (rank == 0) {
            std::printf("01_minimal: u restored on %d ranks (%lld values)\n", size, static_cast<long long>(global_n));
            std::printf("01_minimal: step = %lld\n", static_cast<long long>(step));
            std::printf(total == 0 ? "01_minimal: OK\n" : "01_minimal: FAILED (%d wrong values)\n", total);
        }
        rc = total == 0 ? 0 : 1;
    } catch (const cairn::Error& e) {
        // Collective calls throw the same error on every rank, so every rank
        // gets here and nobody waits forever for the others.
        std::fprintf(stderr, "01_minimal: error on rank %d: %s\n", rank, e.what());
        rc = 1;
    }
    MPI_Finalize();
    return rc;
}
