// Catch2 main for the Kokkos adapter tests: MPI and Kokkos are initialised
// around the session; every rank runs every test case in the same order; the
// exit status is failure when any rank failed.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <Kokkos_Core.hpp>

#include <mpi.h>

int main(int argc, char** argv)
{
    MPI_Init(&argc, &argv);
    Kokkos::initialize(argc, argv); // takes its --kokkos-* arguments out of argv
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int rc = 0;
    {
        Catch::Session session;
        rc = session.applyCommandLine(argc, argv);
        if (rc == 0) {
            // Only rank 0 reports; the others stay quiet unless they fail.
            if (rank != 0)
                session.configData().reporterName = "compact";
            rc = session.run();
        }
    }
    int worst = 0;
    MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    Kokkos::finalize();
    MPI_Finalize();
    return worst;
}
