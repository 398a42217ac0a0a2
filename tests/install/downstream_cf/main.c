/* Downstream C program of the install test: saves a state through an
 * installed Cairn's C API, loads it into cleared buffers and checks every
 * value. Prints "downstream: OK <version> on <n> ranks" on rank 0 and exits 0
 * when everything matches; otherwise prints what differs and exits 1.
 *
 *   mpiexec -n 2 downstream_c CHECKPOINT_DIR */
#include <cairn/cairn.h>

#include <mpi.h>

#include <stdint.h>
#include <stdio.h>

static int check(int rc, const char* what)
{
    if (rc != CAIRN_SUCCESS)
        fprintf(stderr, "downstream_c: %s: %s\n", what, cairn_last_error());
    return rc != CAIRN_SUCCESS;
}

int main(int argc, char** argv)
{
    int rank = 0, size = 0, bad = 0, total = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char* path = argc > 1 ? argv[1] : "downstream_c_ckpt";

    /* Each rank holds 5 elements of a global array of 5 * size. */
    enum { N = 5 };
    double field[N];
    int64_t step = 42;
    int64_t global = (int64_t)N * size, offset = (int64_t)N * rank, shape = N;
    for (int i = 0; i < N; ++i)
        field[i] = 0.25 * (double)(rank * N + i);

    cairn_state_t* state = NULL;
    cairn_save_options_t* options = NULL;
    bad += check(cairn_state_create(&state), "cairn_state_create");
    bad += check(cairn_state_add_array(state, "field", CAIRN_F64, 1, &global, &offset, &shape, field, NULL),
                 "cairn_state_add_array");
    bad += check(cairn_state_add_scalar(state, "step", CAIRN_I64, &step), "cairn_state_add_scalar");
    bad += check(cairn_save_options_create(&options), "cairn_save_options_create");
    bad += check(cairn_save_options_set_overwrite(options, 1), "cairn_save_options_set_overwrite");
    if (!bad)
        bad += check(cairn_save(state, path, MPI_COMM_WORLD, options, NULL), "cairn_save");

    for (int i = 0; i < N; ++i)
        field[i] = -1.0;
    step = 0;
    if (!bad)
        bad += check(cairn_load(state, path, MPI_COMM_WORLD, NULL, NULL), "cairn_load");
    for (int i = 0; i < N; ++i) {
        const double want = 0.25 * (double)(rank * N + i);
        if (field[i] != want) {
            printf("rank %d: field[%d] = %g, expected %g\n", rank, rank * N + i, field[i], want);
            ++bad;
        }
    }
    if (step != 42) {
        printf("rank %d: step = %lld, expected 42\n", rank, (long long)step);
        ++bad;
    }
    cairn_save_options_free(&options);
    cairn_state_free(&state);

    MPI_Allreduce(&bad, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && total == 0)
        printf("downstream: OK %s on %d ranks\n", cairn_version(), size);
    MPI_Finalize();
    return total == 0 ? 0 : 1;
}
