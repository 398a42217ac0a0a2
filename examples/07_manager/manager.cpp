// 07_manager: periodic checkpoints of a run, retention, and a restart.
//
// A cairn::CheckpointManager owns one directory of checkpoints, each named
// after its step (root/step_00000010, ...). save(step, state) writes one and
// then points root/LATEST at it and applies retention: keep the `keep_last`
// newest, plus every `keep_every`-th step forever. restore_latest(state)
// loads the newest committed checkpoint (on any number of ranks) and returns
// its step, or nothing on a fresh start. All of it is collective.
//
//   mpiexec -n 3 ./07_manager [ROOT_DIR]       (default: ckpt_07_manager)
//
// Job 1 (3 ranks) runs 50 steps from scratch, checkpointing every 10 steps;
// job 2 (2 ranks) restarts from the latest. Prints "07_manager: OK".
#include <cairn/errors.hpp>
#include <cairn/manager.hpp>
#include <cairn/state_dict.hpp>

#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

constexpr std::int64_t N = 12; // u[i] == i + step, for every i of the global array

// One job on `comm`: restore or start fresh, then run to `last`, checkpointing.
int job(const std::string& root, MPI_Comm comm, std::int64_t last, const char* name)
{
    int rank = 0, size = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    const std::int64_t i0 = N * rank / size, n = N * (rank + 1) / size - i0;
    std::vector<double> u(static_cast<std::size_t>(n));
    std::int64_t step = 0;
    for (std::int64_t i = 0; i < n; ++i)
        u[static_cast<std::size_t>(i)] = static_cast<double>(i0 + i);
    cairn::StateDict state;
    state.add_array<double>("u", u.data(), {N}, cairn::Box{{i0}, {n}});
    state.add_scalar("step", &step);

    cairn::ManagerOptions mo;
    mo.keep_last = 2;   // the two newest checkpoints ...
    mo.keep_every = 20; // ... and those of steps 20, 40, ...
    // Every save writes the same arrays split the same way: the coordinator
    // plans the first one and reuses that plan for the next ones (only the
    // data and the step change). Job 2, on fewer ranks, plans anew.
    mo.save_options.reuse_plan = true;
    cairn::CheckpointManager manager(root, comm, mo);
    const auto restored = manager.restore_latest(state); // sets u and step
    int wrong = 0;
    for (std::int64_t i = 0; i < n; ++i)
        wrong += u[static_cast<std::size_t>(i)] != static_cast<double>(i0 + i + step);
    for (; step < last;) {
        for (double& x : u) // the "simulation"
            x += 1.0;
        if (++step % 10 == 0)
            manager.save(step, state);
    }
    std::string kept;
    for (std::int64_t s : manager.steps())
        kept += " " + std::to_string(s);
    if (rank == 0)
        std::printf("07_manager: %s on %d ranks: %s, ran to step %lld, kept:%s\n", name, size,
                    restored ? ("restored step " + std::to_string(*restored)).c_str() : "fresh start",
                    static_cast<long long>(step), kept.c_str());
    return wrong;
}

int main(int argc, char** argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, size = 0, wrong = 0, total = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const std::string root = argc > 1 ? argv[1] : "ckpt_07_manager";
    if (rank == 0)
        std::filesystem::remove_all(root); // start from nothing, even when run again
    MPI_Barrier(MPI_COMM_WORLD);
    try {
        wrong += job(root, MPI_COMM_WORLD, 50, "job 1");
        MPI_Comm fewer = MPI_COMM_NULL; // job 2: the first size - 1 ranks
        MPI_Comm_split(MPI_COMM_WORLD, rank < size - 1 ? 0 : MPI_UNDEFINED, rank, &fewer);
        if (fewer != MPI_COMM_NULL) {
            wrong += job(root, fewer, 70, "job 2");
            MPI_Comm_free(&fewer);
        }
    } catch (const cairn::Error& e) { // the same error on every rank of the call
        std::fprintf(stderr, "07_manager: error on rank %d: %s\n", rank, e.what());
        wrong = 1;
    }
    MPI_Allreduce(&wrong, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        std::printf(total == 0 ? "07_manager: OK\n" : "07_manager: FAILED (%d wrong values)\n", total);
    MPI_Finalize();
    return total == 0 ? 0 : 1;
}
