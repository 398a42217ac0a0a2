// A program driven by the environment, as an example would be: CTest sets
// CAIRN_FAULT (a write failure on the last rank); every rank must get the
// same WriteError naming that rank's file, and nothing may be committed.
// Exits 0 when that holds, 1 otherwise (also when the save succeeded).
//
//   CAIRN_FAULT="rank=1,point=mpiio.write,errno=ENOSPC" mpiexec -n 2 cairn_fault_env <dir>
#include <cairn/cairn.hpp>

#include <mpi.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

int main(int argc, char** argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const std::string dir = std::string(argc > 1 ? argv[1] : "cairn-fault-env") + "/ckpt";
    if (rank == 0)
        std::filesystem::remove_all(dir);
    MPI_Barrier(MPI_COMM_WORLD);

    std::vector<double> u(1000, 1.0 + rank);
    cairn::StateDict state;
    state.add_array<double>("u", u.data(), {1000 * size}, cairn::Box{{1000 * rank}, {1000}});
    std::string what;
    bool write_error = false;
    try {
        cairn::save(state, dir, MPI_COMM_WORLD);
    } catch (const cairn::error::WriteError& e) {
        write_error = true;
        what = e.what();
    } catch (const std::exception& e) {
        what = e.what();
    }
    MPI_Barrier(MPI_COMM_WORLD);

    const std::string expect = "rank " + std::to_string(size - 1) + " (write): ";
    const std::string file = "/__" + std::to_string(size - 1) + "_0.distcp";
    bool ok = write_error && what.find(expect) != std::string::npos && what.find(file) != std::string::npos &&
              !cairn::is_distcp_checkpoint(dir);
    // The same message on every rank.
    const unsigned long long h = std::hash<std::string>{}(what);
    unsigned long long lo = 0, hi = 0;
    MPI_Allreduce(&h, &lo, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&h, &hi, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    ok = ok && lo == hi;
    int mine = ok ? 1 : 0, every = 0;
    MPI_Allreduce(&mine, &every, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    std::printf("rank %d: %s: %s\n", rank, ok ? "as expected" : "UNEXPECTED", what.empty() ? "(no error)" : what.c_str());
    MPI_Finalize();
    return every ? 0 : 1;
}
