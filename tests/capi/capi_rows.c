/* C API: rows that vary per rank (cairn_state_add_rows). Particles with
 * counts that differ per rank (rank 1 has none) saved on all ranks, loaded
 * on every smaller rank count with the even split, given counts and a split
 * callback, buffers from a resize callback; ids and positions bitwise in
 * their stored order; errors that name the arrays. */
#include "common.h"

static uint64_t saved_rows(int r) { return r == 1 ? 0 : (uint64_t)(2 + 3 * r); }
static uint64_t saved_offset(int r)
{
    uint64_t o = 0;
    int i;
    for (i = 0; i < r; ++i)
        o += saved_rows(i);
    return o;
}
static double pos(uint64_t g, int k) { return (double)g * 0.25 + (double)k / 3.0; }

/* A rank's particles, grown by the resize callback. */
typedef struct {
    int64_t* id;
    double* x; /* 3 per row */
    uint64_t asked_id, asked_x;
} Particles;

static void* resize(const char* array, uint64_t rows, void* user)
{
    Particles* p = (Particles*)user;
    if (strcmp(array, "id") == 0) {
        p->asked_id = rows;
        free(p->id);
        p->id = (int64_t*)malloc((size_t)(rows ? rows : 1) * sizeof(int64_t));
        return p->id;
    }
    p->asked_x = rows;
    free(p->x);
    p->x = (double*)malloc((size_t)(rows ? rows : 1) * 3 * sizeof(double));
    return p->x;
}

static uint64_t all_on_last(uint64_t global_rows, int rank, int size, void* user)
{
    (void)user;
    return rank == size - 1 ? global_rows : 0;
}

/* 1 when `p` holds rows [first, first + n) of the stored order. */
static int holds(const Particles* p, uint64_t first, uint64_t n)
{
    uint64_t i;
    int k;
    if (p->asked_id != n || p->asked_x != n)
        return 0;
    for (i = 0; i < n; ++i) {
        if (p->id[i] != (int64_t)(first + i) * 3 + 1)
            return 0;
        for (k = 0; k < 3; ++k)
            if (p->x[3 * i + (uint64_t)k] != pos(first + i, k))
                return 0;
    }
    return 1;
}

/* Loads `path` on `comm` (mode 0: even, 1: given counts, 2: callback) and
 * checks this rank's rows. */
static void load_on(const char* path, MPI_Comm comm, int mode, uint64_t total)
{
    int rank, size, r;
    uint64_t want = 0, first = 0, local = 99, offset = 99, global = 0;
    const int64_t three = 3;
    Particles p = {NULL, NULL, 0, 0};
    cairn_state_t* st = NULL;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    CHECK_OK(cairn_state_create(&st));
    CHECK_OK(cairn_state_add_rows(st, "particles", "id", CAIRN_I64, 0, 0, NULL, NULL, resize, &p));
    CHECK_OK(cairn_state_add_rows(st, "particles", "x", CAIRN_F64, 0, 1, &three, NULL, resize, &p));
    for (r = 0; r <= rank; ++r) {
        uint64_t n;
        if (mode == 0) {
            n = total / (uint64_t)size + ((uint64_t)r < total % (uint64_t)size ? 1 : 0);
        } else if (mode == 1) { /* rank 0 none (with others), the last the rest */
            n = size == 1 ? total : (r == size - 1 ? total - (uint64_t)(size - 2) : (r == 0 ? 0 : 1));
        } else {
            n = r == size - 1 ? total : 0;
        }
        if (r < rank)
            first += n;
        else
            want = n;
    }
    if (mode == 1)
        CHECK_OK(cairn_state_rows_split_counts(st, "particles", want));
    if (mode == 2)
        CHECK_OK(cairn_state_rows_split(st, "particles", all_on_last, NULL));
    CHECK_OK(cairn_load(st, path, comm, NULL, NULL));
    CHECK(holds(&p, first, want));
    CHECK_OK(cairn_state_rows(st, "particles", &local, &offset, &global));
    CHECK(local == want && offset == first && global == total);
    CHECK_OK(cairn_state_free(&st));
    free(p.id);
    free(p.x);
}

int main(int argc, char** argv)
{
    char path[4200], path_h5[4200];
    const int64_t three = 3;
    uint64_t rows, total, i, local = 0, offset = 0, global = 0;
    int64_t* id;
    double* x;
    int m, mode, k;
    cairn_state_t* st = NULL;

    test_init(&argc, &argv);
    test_path(path, sizeof path, "rows");
    test_path(path_h5, sizeof path_h5, "rows.h5");
    rows = saved_rows(test_rank);
    total = saved_offset(test_size);
    id = (int64_t*)malloc((size_t)(rows ? rows : 1) * sizeof(int64_t));
    x = (double*)malloc((size_t)(rows ? rows : 1) * 3 * sizeof(double));
    for (i = 0; i < rows; ++i) {
        const uint64_t g = saved_offset(test_rank) + i;
        id[i] = (int64_t)g * 3 + 1;
        for (k = 0; k < 3; ++k)
            x[3 * i + (uint64_t)k] = pos(g, k);
    }

    /* Save on all ranks, in both layouts. */
    CHECK_OK(cairn_state_create(&st));
    CHECK_OK(cairn_state_add_rows(st, "particles", "id", CAIRN_I64, rows, 0, NULL, rows ? id : NULL, NULL, NULL));
    CHECK_OK(cairn_state_add_rows(st, "particles", "x", CAIRN_F64, rows, 1, &three, rows ? x : NULL, NULL, NULL));
    CHECK_OK(cairn_save(st, path, MPI_COMM_WORLD, NULL, NULL));
    CHECK_OK(cairn_save(st, path_h5, MPI_COMM_WORLD, NULL, NULL));
    CHECK_OK(cairn_state_rows(st, "particles", &local, &offset, &global));
    CHECK(local == rows && offset == saved_offset(test_rank) && global == total);
    CHECK_ERR(cairn_state_rows(st, "nothing", NULL, NULL, NULL), CAIRN_ERR_USAGE, "no row group 'nothing'");
    CHECK_OK(cairn_state_free(&st));

    /* Load on M = 1 .. all ranks, each way of splitting. */
    for (m = 1; m <= test_size; ++m) {
        MPI_Comm comm = MPI_COMM_NULL;
        MPI_Comm_split(MPI_COMM_WORLD, test_rank < m ? 0 : MPI_UNDEFINED, test_rank, &comm);
        if (comm == MPI_COMM_NULL)
            continue;
        for (mode = 0; mode < 3; ++mode) {
            load_on(path, comm, mode, total);
            load_on(path_h5, comm, mode, total);
        }
        MPI_Comm_free(&comm);
    }

    /* Arrays of one group that disagree in rows (on the last rank): every
     * rank fails, naming both arrays. */
    CHECK_OK(cairn_state_create(&st));
    CHECK_OK(cairn_state_add_rows(st, "p", "a", CAIRN_I64, 2, 0, NULL, id, NULL, NULL));
    CHECK_OK(cairn_state_add_rows(st, "p", "b", CAIRN_F64, test_rank == test_size - 1 ? 1 : 2, 0, NULL, x, NULL,
                                  NULL));
    CHECK_ERR(cairn_save(st, path, MPI_COMM_WORLD, NULL, NULL), CAIRN_ERR_USAGE, "'p.a' has 2, 'p.b' has 1");
    check_same_message(MPI_COMM_WORLD, cairn_last_error());
    CHECK_OK(cairn_state_free(&st));

    /* Arguments. */
    CHECK_OK(cairn_state_create(&st));
    CHECK_ERR(cairn_state_add_rows(st, "p", "a.b", CAIRN_I64, 0, 0, NULL, NULL, NULL, NULL), CAIRN_ERR_USAGE,
              "row array 'a.b'");
    CHECK_ERR(cairn_state_add_rows(st, "p", "a", 999, 0, 0, NULL, NULL, NULL, NULL), CAIRN_ERR_USAGE, "999");
    CHECK_ERR(cairn_state_add_rows(st, "p", "a", CAIRN_I64, 4, 0, NULL, NULL, NULL, NULL), CAIRN_ERR_USAGE,
              "null data for 4 rows");
    CHECK_ERR(cairn_state_rows_split_counts(st, "q", 1), CAIRN_ERR_USAGE, "no row group 'q'");
    CHECK_OK(cairn_state_free(&st));

    free(id);
    free(x);
    return test_finish("capi_rows");
}
