// Catch2 main for the MPI tests: every rank runs every test case in the same
// order; the exit status is failure when any rank failed.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <mpi.h>

int main(int argc, char** argv)
{
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided); // async_save needs it
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    Catch::Session session;
    int rc = session.applyCommandLine(argc, argv);
    if (rc == 0) {
        // Only rank 0 reports; the others stay quiet unless they fail.
        if (rank != 0)
            session.configData().reporterName = "compact";
        rc = session.run();
    }
    int worst = 0;
    MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return worst;
}
