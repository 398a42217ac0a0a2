// async_save in a process without MPI_THREAD_MULTIPLE fails clearly, on every
// rank, and a plain save still works there.
#include <cairn/cairn.hpp>

#include <cstdio>
#include <string>

int main(int argc, char** argv)
{
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const std::string dir = std::string(argc > 1 ? argv[1] : "thread_level_tmp");
    std::vector<double> u(8, 1.0 + rank);
    cairn::StateDict sd;
    sd.add_array<double>("u", u.data(), {size * 8}, cairn::Box{{rank * 8}, {8}});
    int ok = 0;
    try {
        cairn::async_save(sd, dir + "/async", MPI_COMM_WORLD);
    } catch (const cairn::error::WrongAPIUsage& e) {
        ok = std::string(e.what()).find("MPI_THREAD_MULTIPLE") != std::string::npos &&
             std::string(e.what()).find("MPI_THREAD_SINGLE") != std::string::npos;
        if (rank == 0)
            std::printf("expected error: %s\n", e.what());
    }
    cairn::SaveOptions o;
    o.overwrite = true;
    cairn::save(sd, dir + "/sync", MPI_COMM_WORLD, o);
    int all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (rank == 0)
        std::printf("%s\n", all_ok ? "1 passed, 0 failed" : "0 passed, 1 failed");
    MPI_Finalize();
    return all_ok ? 0 : 1;
}
