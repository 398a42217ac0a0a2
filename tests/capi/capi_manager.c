/* C API: the checkpoint manager. Saves of several steps with keep_last = 2
 * (retention removes the older ones, LATEST names the newest), keep_every,
 * latest / restore_latest on an empty root, a restart on another number of
 * ranks and another decomposition, the container layout, async saves (the
 * buffers are overwritten right after the save returns), and errors agreed
 * between the ranks. */
#include "common.h"

#include <inttypes.h>

enum { NX = 11, NY = 6 };

static double value(int64_t i, int64_t j, int64_t step) { return 100.0 * (double)i + (double)j + 0.5 * (double)step; }

/* This rank's rows (block over `comm`) of T[NX][NY], with one ghost layer. */
typedef struct {
    int64_t i0, ni;
    double* t;
    int64_t step;
    cairn_state_t* state;
} Field;

static void field_init(Field* f, MPI_Comm comm)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    block(NX, size, rank, &f->i0, &f->ni);
    f->t = (double*)calloc((size_t)((f->ni + 2) * (NY + 2)), sizeof(double));
    f->step = -7;
    f->state = NULL;
    {
        const int64_t g[2] = {NX, NY}, o[2] = {f->i0, 0}, s[2] = {f->ni, NY}, st[2] = {NY + 2, 1};
        CHECK_OK(cairn_state_create(&f->state));
        CHECK_OK(cairn_state_add_array(f->state, "T", CAIRN_F64, 2, g, o, s, &f->t[NY + 2 + 1], st));
    }
    CHECK_OK(cairn_state_add_scalar(f->state, "step", CAIRN_I64, &f->step));
}

static void field_set(Field* f, int64_t step)
{
    int64_t i, j;
    for (i = 0; i < f->ni; ++i)
        for (j = 0; j < NY; ++j)
            f->t[(i + 1) * (NY + 2) + j + 1] = value(f->i0 + i, j, step);
    f->step = step;
}

static void field_free(Field* f)
{
    CHECK_OK(cairn_state_free(&f->state));
    free(f->t);
}

/* Restores the latest checkpoint of `root` over `comm` split along the
 * columns and checks it is the one of `step`. */
static void check_restore(const char* root, MPI_Comm comm, const cairn_manager_options_t* options, int64_t step)
{
    int rank, size, found = -1;
    int64_t j0, nj, i, j, got = -2, stored = -3;
    double* t;
    cairn_state_t* st = NULL;
    cairn_manager_t* m = NULL;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    block(NY, size, rank, &j0, &nj);
    t = (double*)calloc((size_t)(NX * (nj > 0 ? nj : 1)), sizeof(double));
    {
        const int64_t g[2] = {NX, NY}, o[2] = {0, j0}, s[2] = {NX, nj};
        CHECK_OK(cairn_state_create(&st));
        CHECK_OK(cairn_state_add_array(st, "T", CAIRN_F64, 2, g, o, s, t, NULL));
        CHECK_OK(cairn_state_add_scalar(st, "step", CAIRN_I64, &stored));
    }
    CHECK_OK(cairn_manager_create(root, comm, options, &m));
    CHECK_OK(cairn_manager_restore_latest(m, st, NULL, &got, &found));
    CHECK(found == 1);
    if (got != step)
        FAIL_AT("%s: restore_latest gave step %" PRId64 ", expected %" PRId64, root, got, step);
    CHECK(stored == step);
    for (i = 0; i < NX; ++i)
        for (j = 0; j < nj; ++j)
            if (t[i * nj + j] != value(i, j0 + j, step))
                FAIL_AT("%s: T[%" PRId64 "][%" PRId64 "] = %g, expected %g", root, i, j0 + j, t[i * nj + j],
                        value(i, j0 + j, step));
    ++test_checks;
    CHECK_OK(cairn_manager_free(&m));
    CHECK(m == NULL);
    CHECK_OK(cairn_state_free(&st));
    free(t);
}

/* The content of root/LATEST ("" when absent). */
static void read_latest(const char* root, char* out, size_t size)
{
    char p[4300];
    FILE* fp;
    snprintf(p, sizeof p, "%s/LATEST", root);
    out[0] = '\0';
    fp = fopen(p, "r");
    if (!fp)
        return;
    if (!fgets(out, (int)size, fp))
        out[0] = '\0';
    fclose(fp);
}

static int step_exists(const char* root, int64_t step, int container)
{
    char p[4300];
    snprintf(p, sizeof p, "%s/step_%08" PRId64 "%s", root, step, container ? ".h5" : "");
    return path_is(p, !container);
}

int main(int argc, char** argv)
{
    char root[4200], root_every[4200], root_async[4200], root_h5[4200], file[4200], bad_root[4200], ck[4300];
    char latest[64];
    Field f;
    cairn_manager_t* m = NULL;
    cairn_manager_options_t* mo = NULL;
    cairn_save_options_t* so = NULL;
    cairn_save_result_t r;
    int64_t step = 0, s;
    int found = -1, committed = -1, saved = -1;
    MPI_Comm sub = MPI_COMM_NULL;

    test_init_thread(&argc, &argv, MPI_THREAD_MULTIPLE);
    test_path(root, sizeof root, "run");
    test_path(root_every, sizeof root_every, "every");
    test_path(root_async, sizeof root_async, "async");
    test_path(root_h5, sizeof root_h5, "container");
    field_init(&f, MPI_COMM_WORLD);

    CHECK_OK(cairn_save_options_create(&so));
    CHECK_OK(cairn_save_options_set_fsync(so, 0));
    CHECK_OK(cairn_manager_options_create(&mo));
    CHECK_OK(cairn_manager_options_set_keep_last(mo, 2));
    CHECK_OK(cairn_manager_options_set_save_options(mo, so));

    /* 1. An empty (absent) root: nothing to restore, the state untouched. */
    CHECK_OK(cairn_manager_create(root, MPI_COMM_WORLD, mo, &m));
    CHECK(m != NULL);
    CHECK_OK(cairn_manager_latest(m, &step, &found));
    CHECK(found == 0 && step == -1);
    CHECK(!path_is(root, 1)); /* create touches nothing on disk */
    field_set(&f, 3);
    CHECK_OK(cairn_manager_restore_latest(m, f.state, NULL, &step, &found));
    CHECK(found == 0 && step == -1);
    CHECK(f.step == 3 && f.t[NY + 2 + 1] == value(f.i0, 0, 3));
    CHECK_OK(cairn_manager_wait(m, &saved, &r)); /* nothing in flight */
    CHECK(saved == 0 && r.bytes_written == 0);

    /* 2. Steps 10..50 with keep_last = 2. */
    for (s = 10; s <= 50; s += 10) {
        field_set(&f, s);
        memset(&r, 0, sizeof r);
        CHECK_OK(cairn_manager_save(m, s, f.state, &committed, &r));
        CHECK(committed == 1);
        CHECK(r.bytes_written == (uint64_t)NX * NY * 8 && r.entries == 2);
        CHECK_OK(cairn_manager_latest(m, &step, &found));
        CHECK(found == 1 && step == s);
        MPI_Barrier(MPI_COMM_WORLD);
        CHECK(step_exists(root, s, 0));
        if (s >= 30)
            CHECK(!step_exists(root, s - 20, 0)); /* retention removed it */
        if (s >= 20)
            CHECK(step_exists(root, s - 10, 0));
    }
    read_latest(root, latest, sizeof latest);
    CHECK(strcmp(latest, "step_00000050\n") == 0);
    CHECK(!step_exists(root, 10, 0) && !step_exists(root, 20, 0) && !step_exists(root, 30, 0));
    /* Saving the same step again replaces it. */
    field_set(&f, 50);
    CHECK_OK(cairn_manager_save(m, 50, f.state, NULL, NULL));
    CHECK_OK(cairn_manager_latest(m, &step, NULL));
    CHECK(step == 50);
    /* Errors, the same on every rank. */
    if (test_size > 1) {
        CHECK_ERR(cairn_manager_save(m, test_rank == 0 ? 60 : 61, f.state, &committed, NULL), CAIRN_ERR_MISMATCH,
                  "the ranks passed different steps (60 to 61)");
        check_same_message(MPI_COMM_WORLD, cairn_last_error());
        CHECK(committed == 0);
    }
    CHECK_ERR(cairn_manager_save(m, -1, f.state, NULL, NULL), CAIRN_ERR_USAGE, "step must be at least 0, not -1");
    check_same_message(MPI_COMM_WORLD, cairn_last_error());
    {
        char expect[128];
        snprintf(expect, sizeof expect, "cairn_manager_save: rank %d (arguments): the state is NULL", test_size - 1);
        CHECK_ERR(cairn_manager_save(m, 70, test_rank == test_size - 1 ? NULL : f.state, NULL, NULL),
                  CAIRN_ERR_USAGE, expect);
        check_same_message(MPI_COMM_WORLD, cairn_last_error());
    }
    CHECK_ERR(cairn_manager_save(NULL, 70, f.state, NULL, NULL), CAIRN_ERR_USAGE, "the manager handle is NULL");
    CHECK_ERR(cairn_manager_latest(NULL, &step, &found), CAIRN_ERR_USAGE, "cairn_manager_latest: the manager");
    CHECK(found == 0 && step == -1);
    /* The failed saves changed nothing. */
    CHECK_OK(cairn_manager_latest(m, &step, &found));
    CHECK(found == 1 && step == 50);
    CHECK_OK(cairn_manager_free(&m));
    CHECK(m == NULL);
    CHECK_OK(cairn_manager_free(&m));
    CHECK_OK(cairn_manager_free(NULL));

    /* 3. Restart on other rank counts and another decomposition: all ranks,
     *    and all but the last (1 when there is 1). */
    check_restore(root, MPI_COMM_WORLD, mo, 50);
    MPI_Comm_split(MPI_COMM_WORLD, test_size > 1 && test_rank == test_size - 1 ? MPI_UNDEFINED : 0, test_rank, &sub);
    if (sub != MPI_COMM_NULL) {
        check_restore(root, sub, NULL, 50);
        MPI_Comm_free(&sub);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    /* 4. keep_every: keep_last 1 plus every multiple of 20. */
    CHECK_OK(cairn_manager_options_set_keep_last(mo, 1));
    CHECK_OK(cairn_manager_options_set_keep_every(mo, 20));
    CHECK_OK(cairn_manager_create(root_every, MPI_COMM_WORLD, mo, &m));
    for (s = 10; s <= 50; s += 10) {
        field_set(&f, s);
        CHECK_OK(cairn_manager_save(m, s, f.state, NULL, NULL));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(!step_exists(root_every, 10, 0) && step_exists(root_every, 20, 0) && !step_exists(root_every, 30, 0) &&
          step_exists(root_every, 40, 0) && step_exists(root_every, 50, 0));
    /* steps: the count first, then the values; a short buffer gets the first. */
    {
        int64_t got[4] = {-1, -1, -1, -1};
        size_t n = 99;
        CHECK_OK(cairn_manager_steps(m, NULL, 0, &n));
        CHECK(n == 3);
        CHECK_OK(cairn_manager_steps(m, got, 4, &n));
        CHECK(n == 3 && got[0] == 20 && got[1] == 40 && got[2] == 50 && got[3] == -1);
        got[0] = got[1] = -1;
        CHECK_OK(cairn_manager_steps(m, got, 1, &n));
        CHECK(n == 3 && got[0] == 20 && got[1] == -1);
        CHECK_ERR(cairn_manager_steps(m, test_rank == 0 ? NULL : got, 2, &n), CAIRN_ERR_USAGE,
                  "cairn_manager_steps: rank 0 (arguments): steps is NULL with a capacity of 2");
        check_same_message(MPI_COMM_WORLD, cairn_last_error());
        CHECK(n == 0);
    }
    /* leftovers: an interrupted replacement's staging directory and a half
     * written LATEST are found (path and reason), then removed; committed
     * checkpoints stay. */
    {
        char p1[4300], p2[4300];
        const char *path = NULL, *reason = NULL;
        size_t n = 99, i;
        int seen1 = 0, seen2 = 0;
        snprintf(p1, sizeof p1, "%s/step_00000040.cairn-staging", root_every);
        snprintf(p2, sizeof p2, "%s/LATEST.cairn-tmp", root_every);
        CHECK_OK(cairn_manager_leftovers(m, 0, &n));
        CHECK(n == 0);
        if (test_rank == 0) {
            FILE* fp;
            CHECK(mkdir(p1, 0755) == 0);
            fp = fopen(p2, "w");
            CHECK(fp != NULL);
            if (fp) {
                fputs("step_0000", fp);
                fclose(fp);
            }
        }
        MPI_Barrier(MPI_COMM_WORLD);
        CHECK_OK(cairn_manager_leftovers(m, 0, &n));
        CHECK(n == 2);
        for (i = 0; i < n; ++i) {
            CHECK_OK(cairn_manager_leftover(m, i, &path, &reason));
            CHECK(path != NULL && reason != NULL);
            if (path && reason && strcmp(path, p1) == 0 && strstr(reason, "interrupted replacement of step_00000040"))
                seen1 = 1;
            if (path && reason && strcmp(path, p2) == 0 && strstr(reason, "LATEST"))
                seen2 = 1;
        }
        CHECK(seen1 && seen2);
        CHECK_ERR(cairn_manager_leftover(m, 2, &path, &reason), CAIRN_ERR_USAGE,
                  "cairn_manager_leftover: leftover 2 of 2");
        CHECK(path == NULL && reason == NULL);
        CHECK(path_is(p1, 1)); /* finding removes nothing */
        MPI_Barrier(MPI_COMM_WORLD); /* rank 0 removes as soon as it enters the call */
        CHECK_OK(cairn_manager_leftovers(m, 1, &n));
        CHECK(n == 2);
        MPI_Barrier(MPI_COMM_WORLD);
        CHECK(!path_is(p1, 1) && !path_is(p2, 0));
        CHECK_OK(cairn_manager_leftovers(m, 0, &n));
        CHECK(n == 0);
        CHECK_OK(cairn_manager_steps(m, NULL, 0, &n));
        CHECK(n == 3);
    }
    CHECK_OK(cairn_manager_free(&m));

    /* 5. The container layout. */
    CHECK_OK(cairn_manager_options_set_keep_last(mo, 2));
    CHECK_OK(cairn_manager_options_set_keep_every(mo, 0));
    CHECK_OK(cairn_manager_options_set_layout(mo, CAIRN_LAYOUT_CONTAINER));
    CHECK_OK(cairn_manager_create(root_h5, MPI_COMM_WORLD, mo, &m));
    field_set(&f, 7);
    CHECK_OK(cairn_manager_save(m, 7, f.state, &committed, NULL));
    CHECK(committed == 1);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(step_exists(root_h5, 7, 1));
    read_latest(root_h5, latest, sizeof latest);
    CHECK(strcmp(latest, "step_00000007.h5\n") == 0);
    CHECK_OK(cairn_manager_free(&m));
    check_restore(root_h5, MPI_COMM_WORLD, NULL, 7);
    CHECK_OK(cairn_manager_options_set_layout(mo, CAIRN_LAYOUT_PER_RANK));

    /* 6. Async: save returns once staged; the buffers are overwritten at
     *    once; the next call settles the save (commit, LATEST, retention). */
    CHECK_OK(cairn_manager_options_set_async(mo, 1));
    CHECK_OK(cairn_manager_create(root_async, MPI_COMM_WORLD, mo, &m));
    for (s = 1; s <= 4; ++s) {
        field_set(&f, s);
        memset(&r, 0xff, sizeof r);
        CHECK_OK(cairn_manager_save(m, s, f.state, &committed, &r));
        CHECK(committed == 0 && r.bytes_written == 0 && r.entries == 0);
        field_set(&f, -100 * s); /* scribbled: the checkpoint holds step s */
    }
    CHECK_OK(cairn_manager_wait(m, &saved, &r));
    CHECK(saved == 1 && r.bytes_written == (uint64_t)NX * NY * 8);
    CHECK_OK(cairn_manager_wait(m, &saved, &r));
    CHECK(saved == 0);
    CHECK_OK(cairn_manager_latest(m, &step, &found));
    CHECK(found == 1 && step == 4);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(step_exists(root_async, 3, 0) && step_exists(root_async, 4, 0) && !step_exists(root_async, 2, 0) &&
          !step_exists(root_async, 1, 0));
    read_latest(root_async, latest, sizeof latest);
    CHECK(strcmp(latest, "step_00000004\n") == 0);
    /* A save left in flight is settled by free. */
    field_set(&f, 5);
    CHECK_OK(cairn_manager_save(m, 5, f.state, &committed, NULL));
    field_set(&f, -500);
    CHECK_OK(cairn_manager_free(&m));
    MPI_Barrier(MPI_COMM_WORLD);
    read_latest(root_async, latest, sizeof latest);
    CHECK(strcmp(latest, "step_00000005\n") == 0);
    check_restore(root_async, MPI_COMM_WORLD, NULL, 5);
    snprintf(ck, sizeof ck, "%s/step_%08d", root_async, 4);
    {
        /* The older checkpoint, loaded directly, holds the values of step 4. */
        Field g;
        field_init(&g, MPI_COMM_WORLD);
        CHECK_OK(cairn_load(g.state, ck, MPI_COMM_WORLD, NULL, NULL));
        CHECK(g.step == 4 && g.t[NY + 2 + 1] == value(g.i0, 0, 4));
        field_free(&g);
    }
    CHECK_OK(cairn_manager_options_set_async(mo, 0));

    /* 7. Argument errors of create, agreed between the ranks. */
    {
        char expect[128];
        snprintf(expect, sizeof expect, "cairn_manager_create: rank %d (arguments): the root directory is NULL",
                 test_size - 1);
        m = (cairn_manager_t*)&f;
        CHECK_ERR(cairn_manager_create(test_rank == test_size - 1 ? NULL : root, MPI_COMM_WORLD, NULL, &m),
                  CAIRN_ERR_USAGE, expect);
        check_same_message(MPI_COMM_WORLD, cairn_last_error());
        CHECK(m == NULL);
        snprintf(expect, sizeof expect, "cairn_manager_create: rank 0 (arguments): CheckpointManager: empty root");
        CHECK_ERR(cairn_manager_create(test_rank == 0 ? "" : root, MPI_COMM_WORLD, NULL, &m), CAIRN_ERR_USAGE,
                  expect);
        check_same_message(MPI_COMM_WORLD, cairn_last_error());
        CHECK(m == NULL);
    }
    CHECK_ERR(cairn_manager_create(root, MPI_COMM_NULL, NULL, &m), CAIRN_ERR_USAGE, "MPI_COMM_NULL");
    CHECK_ERR(cairn_manager_options_set_keep_last(mo, -1), CAIRN_ERR_USAGE, "keep_last must be at least 0");
    CHECK_ERR(cairn_manager_options_set_keep_every(mo, -5), CAIRN_ERR_USAGE, "keep_every must be at least 0");
    CHECK_ERR(cairn_manager_options_set_layout(mo, 7), CAIRN_ERR_USAGE, "invalid layout 7");
    CHECK_ERR(cairn_manager_options_set_async(NULL, 1), CAIRN_ERR_USAGE, "the options handle is NULL");
    /* The node-local level's options: accepted values, then refusals naming them. */
    {
        cairn_manager_options_t* lo = NULL;
        CHECK_OK(cairn_manager_options_create(&lo));
        CHECK_OK(cairn_manager_options_set_local_dir(lo, "/dev/shm/run-%n"));
        CHECK_OK(cairn_manager_options_set_local_dir(lo, NULL));
        CHECK_OK(cairn_manager_options_set_redundancy(lo, "none"));
        CHECK_OK(cairn_manager_options_set_redundancy(lo, "partner"));
        CHECK_OK(cairn_manager_options_set_redundancy(lo, "xor"));
        CHECK_OK(cairn_manager_options_set_redundancy(lo, "xor:3"));
        CHECK_OK(cairn_manager_options_set_local_keep_last(lo, 1));
        CHECK_OK(cairn_manager_options_set_flush_every(lo, 0));
        CHECK_OK(cairn_manager_options_set_ranks_per_node(lo, 2));
        CHECK_ERR(cairn_manager_options_set_redundancy(lo, "xor:1"), CAIRN_ERR_USAGE,
                  "redundancy 'xor:1': expected none, partner, xor or xor:K with K >= 2");
        CHECK_ERR(cairn_manager_options_set_redundancy(lo, "mirror"), CAIRN_ERR_USAGE, "redundancy 'mirror'");
        CHECK_ERR(cairn_manager_options_set_redundancy(lo, NULL), CAIRN_ERR_USAGE, "the redundancy is NULL");
        CHECK_ERR(cairn_manager_options_set_local_keep_last(lo, 0), CAIRN_ERR_USAGE,
                  "the node-local keep_last must be at least 1, not 0");
        CHECK_ERR(cairn_manager_options_set_flush_every(lo, -1), CAIRN_ERR_USAGE, "flush_every must be at least 0");
        CHECK_ERR(cairn_manager_options_set_ranks_per_node(lo, -2), CAIRN_ERR_USAGE,
                  "ranks_per_node must be at least 0");
        CHECK_ERR(cairn_manager_options_set_local_dir(NULL, "x"), CAIRN_ERR_USAGE, "the options handle is NULL");
        CHECK_OK(cairn_manager_options_free(&lo));
    }

    /* 8. A root that cannot be created (under a regular file): the save
     *    fails on every rank, naming it; nothing is found afterwards. */
    test_path(file, sizeof file, "a-file");
    test_path(bad_root, sizeof bad_root, "a-file/run");
    if (test_rank == 0) {
        FILE* fp = fopen(file, "w");
        CHECK(fp != NULL);
        fputs("not a directory\n", fp);
        fclose(fp);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK_OK(cairn_manager_create(bad_root, MPI_COMM_WORLD, mo, &m));
    {
        int rc = cairn_manager_save(m, 1, f.state, &committed, NULL);
        CHECK(rc == CAIRN_ERR_WRITE || rc == CAIRN_ERR_READ);
        if (!strstr(cairn_last_error(), "a-file"))
            FAIL_AT("the message does not name the root: %s", cairn_last_error());
        check_same_message(MPI_COMM_WORLD, cairn_last_error());
        CHECK(committed == 0);
    }
    CHECK_OK(cairn_manager_free(&m));

    CHECK_OK(cairn_manager_options_free(&mo));
    CHECK(mo == NULL);
    CHECK_OK(cairn_save_options_free(&so));
    field_free(&f);
    return test_finish("capi_manager");
}
