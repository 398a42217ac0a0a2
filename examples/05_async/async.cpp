// 05_async: save in the background while the simulation goes on.
//
// cairn::async_save returns an AsyncSave with two futures:
//   staged()    ready once Cairn has copied this rank's data out of the
//               application's buffers: from then on they may change;
//   committed() ready once the checkpoint is durable and complete (or holds
//               the error, the same on every rank).
// The checkpoint holds the values of the moment of the call, whatever the
// application writes into its buffers after staged(). Cairn's background
// thread calls MPI, so MPI must be initialized with MPI_THREAD_MULTIPLE.
//
//   mpiexec -n 2 ./05_async [CHECKPOINT_DIR]        (default: ckpt_05_async)
//
// Prints "05_async: OK" on rank 0 and exits 0 when the checkpoint holds
// step 10's values although the buffers had moved on to step 20.
#include <cairn/async.hpp>
#include <cairn/checkpoint.hpp>
#include <cairn/errors.hpp>
#include <cairn/state_dict.hpp>

#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

// The "simulation": u[i] = global index + step, advanced one step at a time.
void advance(std::vector<double>& u, std::int64_t& step)
{
    for (double& x : u)
        x += 1.0;
    ++step;
}

int main(int argc, char** argv)
{
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided); // async_save checks it too
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const std::string path = argc > 1 ? argv[1] : "ckpt_05_async";
    const std::int64_t n = 1000, offset = n * rank;
    std::vector<double> u(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i)
        u[static_cast<std::size_t>(i)] = static_cast<double>(offset + i);
    std::int64_t step = 0;
    int wrong = 0;
    try {
        cairn::StateDict state;
        state.add_array<double>("u", u.data(), {n * size}, cairn::Box{{offset}, {n}});
        state.add_scalar("step", &step);
        while (step < 10)
            advance(u, step);

        // 1. Start the save of step 10; wait only until the data is staged.
        cairn::SaveOptions options;
        options.overwrite = true;
        cairn::AsyncSave save = cairn::async_save(state, path, MPI_COMM_WORLD, options);
        save.staged().get(); // (full_copy staging: already ready on return)

        // 2. Keep computing while the checkpoint is written: the buffers change.
        while (step < 20)
            advance(u, step);

        // 3. Before relying on the checkpoint (or calling HDF5 ourselves): commit.
        const cairn::SaveResult result = save.wait(); // committed().get(), rethrows its error
        if (rank == 0)
            std::printf("05_async: step 10 committed (%llu bytes) while the simulation reached step %lld\n",
                        static_cast<unsigned long long>(result.bytes_written), static_cast<long long>(step));

        // 4. Load into fresh buffers: the checkpoint holds step 10, not 20.
        std::vector<double> v(u.size(), -1.0);
        std::int64_t saved_step = -1;
        cairn::StateDict check;
        check.add_array<double>("u", v.data(), {n * size}, cairn::Box{{offset}, {n}});
        check.add_scalar("step", &saved_step);
        cairn::load(check, path, MPI_COMM_WORLD);
        for (std::int64_t i = 0; i < n; ++i)
            wrong += v[static_cast<std::size_t>(i)] != static_cast<double>(offset + i + 10);
        wrong += saved_step != 10;
        if (rank == 0)
            std::printf("05_async: loaded step %lld\n", static_cast<long long>(saved_step));
    } catch (const cairn::Error& e) {
        std::fprintf(stderr, "05_async: error on rank %d: %s\n", rank, e.what());
        wrong = 1;
    }
    int total = 0;
    MPI_Allreduce(&wrong, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        std::printf(total == 0 ? "05_async: OK\n" : "05_async: FAILED (%d wrong values)\n", total);
    MPI_Finalize();
    return total == 0 ? 0 : 1;
}
