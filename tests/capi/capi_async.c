/* C API: asynchronous save. A round trip (staged, then committed; the
 * caller's buffers are overwritten right after staged and the checkpoint
 * holds the old values, loaded back on another decomposition), handles of
 * saves that overlap, freeing an unfinished handle, argument errors agreed
 * between the ranks, an unwritable path, and with arguments:
 *
 *   --single  MPI initialized without MPI_THREAD_MULTIPLE: a clear error.
 *   --fault   run with CAIRN_FAULT arming a failing write on one rank: the
 *             error comes from cairn_async_wait_committed on every rank. */
#include "common.h"

enum { NX = 13, NY = 7 };

static double value(int64_t i, int64_t j, int version) { return 1000.0 * (double)i + (double)j + 0.25 * version; }

/* This rank's rows of T[NX][NY] with one ghost layer, and a step, a string
 * and a blob: the state of the round trips. */
typedef struct {
    int64_t i0, ni;
    double* t; /* (ni + 2) x (NY + 2) */
    int64_t step;
    char title[32];
    unsigned char blob[16];
    size_t blob_size;
    cairn_state_t* state;
} Field;

static void field_init(Field* f, int version)
{
    int64_t i, j;
    block(NX, test_size, test_rank, &f->i0, &f->ni);
    f->t = (double*)calloc((size_t)((f->ni + 2) * (NY + 2)), sizeof(double));
    for (i = 0; i < f->ni; ++i)
        for (j = 0; j < NY; ++j)
            f->t[(i + 1) * (NY + 2) + j + 1] = value(f->i0 + i, j, version);
    f->step = 100 + version;
    snprintf(f->title, sizeof f->title, "version %d", version);
    memset(f->blob, version, sizeof f->blob);
    f->blob_size = 5;
    f->state = NULL;
    {
        const int64_t g[2] = {NX, NY}, o[2] = {f->i0, 0}, s[2] = {f->ni, NY}, st[2] = {NY + 2, 1};
        CHECK_OK(cairn_state_create(&f->state));
        CHECK_OK(cairn_state_add_array(f->state, "T", CAIRN_F64, 2, g, o, s, &f->t[NY + 2 + 1], st));
    }
    CHECK_OK(cairn_state_add_scalar(f->state, "step", CAIRN_I64, &f->step));
    CHECK_OK(cairn_state_add_string(f->state, "title", f->title, sizeof f->title));
    CHECK_OK(cairn_state_add_bytes(f->state, "blob", f->blob, sizeof f->blob, &f->blob_size));
}

/* Overwrites everything the state describes (ghost cells too). */
static void field_scribble(Field* f)
{
    int64_t k;
    for (k = 0; k < (f->ni + 2) * (NY + 2); ++k)
        f->t[k] = -1.0;
    f->step = -1;
    snprintf(f->title, sizeof f->title, "scribbled");
    memset(f->blob, 0xEE, sizeof f->blob);
    f->blob_size = 11;
}

static void field_free(Field* f)
{
    CHECK_OK(cairn_state_free(&f->state));
    free(f->t);
    f->t = NULL;
}

/* Loads `path` split along the columns (another decomposition than the
 * save's) and checks it holds `version`. */
static void check_checkpoint(const char* path, int version)
{
    int64_t j0, nj, i, j, step = 0;
    double* t;
    char title[32] = "";
    unsigned char blob[16];
    size_t blob_size = 0, k;
    cairn_state_t* st = NULL;
    char expect[32];
    block(NY, test_size, test_size - 1 - test_rank, &j0, &nj);
    t = (double*)calloc((size_t)(NX * (nj > 0 ? nj : 1)), sizeof(double));
    {
        const int64_t g[2] = {NX, NY}, o[2] = {0, j0}, s[2] = {NX, nj};
        CHECK_OK(cairn_state_create(&st));
        CHECK_OK(cairn_state_add_array(st, "T", CAIRN_F64, 2, g, o, s, t, NULL));
    }
    CHECK_OK(cairn_state_add_scalar(st, "step", CAIRN_I64, &step));
    CHECK_OK(cairn_state_add_string(st, "title", title, sizeof title));
    CHECK_OK(cairn_state_add_bytes(st, "blob", blob, sizeof blob, &blob_size));
    CHECK_OK(cairn_load(st, path, MPI_COMM_WORLD, NULL, NULL));
    for (i = 0; i < NX; ++i)
        for (j = 0; j < nj; ++j)
            if (t[i * nj + j] != value(i, j0 + j, version))
                FAIL_AT("%s: T[%lld][%lld] = %g, expected %g", path, (long long)i, (long long)(j0 + j), t[i * nj + j],
                        value(i, j0 + j, version));
    ++test_checks;
    CHECK(step == 100 + version);
    snprintf(expect, sizeof expect, "version %d", version);
    CHECK(strcmp(title, expect) == 0);
    CHECK(blob_size == 5);
    for (k = 0; k < blob_size; ++k)
        CHECK(blob[k] == (unsigned char)version);
    CHECK_OK(cairn_state_free(&st));
    free(t);
}

static int64_t expected_bytes(void) { return (int64_t)NX * NY * 8 + 5; }

/* MPI without MPI_THREAD_MULTIPLE: every rank gets the same clear error. */
static int run_single(int argc, char** argv)
{
    char path[4200];
    Field f;
    cairn_async_save_t* h = (cairn_async_save_t*)&f; /* must be set to NULL */
    test_init(&argc, &argv);
    field_init(&f, 1);
    test_path(path, sizeof path, "single");
    CHECK_ERR(cairn_async_save(f.state, path, MPI_COMM_WORLD, NULL, &h), CAIRN_ERR_USAGE,
              "async_save needs MPI initialized with MPI_THREAD_MULTIPLE (MPI_Init_thread); this process has "
              "MPI_THREAD_SINGLE");
    CHECK(strstr(cairn_last_error(), "cairn_async_save: ") == cairn_last_error());
    check_same_message(MPI_COMM_WORLD, cairn_last_error());
    CHECK(h == NULL);
    CHECK(!path_is(path, 1)); /* nothing was written */
    /* The synchronous save works at this level. */
    CHECK_OK(cairn_save(f.state, path, MPI_COMM_WORLD, NULL, NULL));
    check_checkpoint(path, 1);
    {
        /* So does the refusal of an async manager's node-local save. */
        char root[4200], local[4200];
        int committed = -1;
        cairn_manager_options_t* mo = NULL;
        cairn_manager_t* m = NULL;
        test_path(root, sizeof root, "single_run");
        test_path(local, sizeof local, "single_node%n");
        CHECK_OK(cairn_manager_options_create(&mo));
        CHECK_OK(cairn_manager_options_set_async(mo, 1));
        CHECK_OK(cairn_manager_options_set_local_dir(mo, local));
        CHECK_OK(cairn_manager_options_set_ranks_per_node(mo, 1));
        CHECK_OK(cairn_manager_create(root, MPI_COMM_WORLD, mo, &m));
        CHECK_ERR(cairn_manager_save(m, 1, f.state, &committed, NULL), CAIRN_ERR_USAGE,
                  "CheckpointManager::save (async, node-local level) needs MPI initialized with "
                  "MPI_THREAD_MULTIPLE (MPI_Init_thread); this process has MPI_THREAD_SINGLE");
        check_same_message(MPI_COMM_WORLD, cairn_last_error());
        CHECK(committed == 0);
        CHECK_OK(cairn_manager_free(&m));
        CHECK_OK(cairn_manager_options_free(&mo));
    }
    field_free(&f);
    return test_finish("capi_async --single");
}

/* A write fails on one rank in the background: wait_committed reports it on
 * every rank, and nothing is committed. */
static int run_fault(int argc, char** argv)
{
    char path[4200];
    Field f;
    cairn_async_save_t* h = NULL;
    cairn_save_result_t r = {1, 1, 1.0, 1};
    cairn_metadata_t* md = NULL;
    int flag = 0;
    test_init_thread(&argc, &argv, MPI_THREAD_MULTIPLE);
    field_init(&f, 2);
    test_path(path, sizeof path, "fault");
    CHECK_OK(cairn_async_save(f.state, path, MPI_COMM_WORLD, NULL, &h));
    CHECK(h != NULL);
    CHECK_ERR(cairn_async_wait_committed(h, &r), CAIRN_ERR_WRITE, "cairn_async_wait_committed: ");
    if (!strstr(cairn_last_error(), "rank 1") || !strstr(cairn_last_error(), "__1_0.distcp"))
        FAIL_AT("the message does not name rank 1 and its file: %s", cairn_last_error());
    check_same_message(MPI_COMM_WORLD, cairn_last_error());
    CHECK(r.bytes_written == 0 && r.entries == 0 && r.plan_reused == 0);
    /* Asking again gives the same answer; so does the test call. */
    CHECK_ERR(cairn_async_wait_committed(h, NULL), CAIRN_ERR_WRITE, "cairn_async_wait_committed: ");
    CHECK_ERR(cairn_async_test_committed(h, &flag, &r), CAIRN_ERR_WRITE, "cairn_async_test_committed: ");
    CHECK(flag == 1);
    CHECK_OK(cairn_async_free(&h));
    CHECK(h == NULL);
    CHECK_ERR(cairn_metadata_read(path, &md), CAIRN_ERR_NOT_FOUND, "");
    CHECK(md == NULL);
    field_free(&f);
    return test_finish("capi_async --fault");
}

int main(int argc, char** argv)
{
    char a[4200], b[4200], c[4200], d[4200], bad[4200], file[4200];
    Field f;
    cairn_async_save_t *h = NULL, *h2 = NULL;
    cairn_save_result_t r;
    cairn_save_options_t* so = NULL;
    int flag = -1;

    if (argc > 1 && strcmp(argv[1], "--single") == 0)
        return run_single(argc, argv);
    if (argc > 1 && strcmp(argv[1], "--fault") == 0)
        return run_fault(argc, argv);
    test_init_thread(&argc, &argv, MPI_THREAD_MULTIPLE);
    test_path(a, sizeof a, "a");
    test_path(b, sizeof b, "b");
    test_path(c, sizeof c, "c");
    test_path(d, sizeof d, "d");

    /* 1. Round trip: staged, scribble over the buffers, committed; the
     *    checkpoint holds the values of the save. */
    field_init(&f, 1);
    CHECK_OK(cairn_async_save(f.state, a, MPI_COMM_WORLD, NULL, &h));
    CHECK(h != NULL);
    CHECK_OK(cairn_async_test_staged(h, &flag));
    CHECK(flag == 0 || flag == 1);
    CHECK_OK(cairn_async_wait_staged(h));
    CHECK_OK(cairn_async_test_staged(h, &flag));
    CHECK(flag == 1);
    field_scribble(&f);
    memset(&r, 0xff, sizeof r);
    CHECK_OK(cairn_async_wait_committed(h, &r));
    CHECK(r.bytes_written == (uint64_t)expected_bytes());
    CHECK(r.entries == 4);
    CHECK(r.seconds >= 0.0 && r.seconds < 600.0);
    {
        cairn_save_result_t r2;
        CHECK_OK(cairn_async_test_committed(h, &flag, &r2));
        CHECK(flag == 1 && r2.bytes_written == r.bytes_written && r2.entries == r.entries);
        CHECK_OK(cairn_async_wait_committed(h, &r2)); /* again: the same */
        CHECK(r2.bytes_written == r.bytes_written);
    }
    CHECK_OK(cairn_async_free(&h));
    CHECK(h == NULL);
    CHECK_OK(cairn_async_free(&h)); /* NULL is fine */
    CHECK_OK(cairn_async_free(NULL));
    check_checkpoint(a, 1);
    field_free(&f);

    /* 2. Two saves in a row without waiting: the second waits for the first;
     *    the handles are completed newest first. */
    field_init(&f, 2);
    CHECK_OK(cairn_async_save(f.state, b, MPI_COMM_WORLD, NULL, &h));
    field_scribble(&f); /* staged on return with the default options */
    {
        int64_t i, j;
        for (i = 0; i < f.ni; ++i)
            for (j = 0; j < NY; ++j)
                f.t[(i + 1) * (NY + 2) + j + 1] = value(f.i0 + i, j, 3);
        f.step = 103;
        snprintf(f.title, sizeof f.title, "version 3");
        memset(f.blob, 3, sizeof f.blob);
        f.blob_size = 5;
    }
    CHECK_OK(cairn_async_save(f.state, c, MPI_COMM_WORLD, NULL, &h2));
    CHECK_OK(cairn_async_wait_committed(h2, &r));
    CHECK(r.bytes_written == (uint64_t)expected_bytes());
    CHECK_OK(cairn_async_wait_committed(h, &r));
    CHECK(r.bytes_written == (uint64_t)expected_bytes());
    CHECK_OK(cairn_async_free(&h));
    CHECK_OK(cairn_async_free(&h2));
    check_checkpoint(b, 2);
    check_checkpoint(c, 3);

    /* 3. Freeing an unfinished handle waits for the save; freeing the state
     *    while a save is in flight is safe too. */
    CHECK_OK(cairn_async_save(f.state, d, MPI_COMM_WORLD, NULL, &h));
    field_free(&f);
    CHECK_OK(cairn_async_free(&h));
    CHECK(h == NULL);
    {
        cairn_metadata_t* md = NULL;
        int ws = 0;
        CHECK_OK(cairn_metadata_read(d, &md)); /* committed by the time free returned */
        CHECK_OK(cairn_metadata_info(md, NULL, &ws, NULL));
        CHECK(ws == test_size);
        CHECK_OK(cairn_metadata_free(&md));
    }
    check_checkpoint(d, 3);

    /* 4. Errors of the arguments and of planning: the same on every rank,
     *    no handle. */
    field_init(&f, 4);
    h = (cairn_async_save_t*)&f;
    CHECK_ERR(cairn_async_save(f.state, a, MPI_COMM_WORLD, NULL, &h), CAIRN_ERR_USAGE, "already exists");
    check_same_message(MPI_COMM_WORLD, cairn_last_error());
    CHECK(h == NULL);
    {
        char expect[128];
        snprintf(expect, sizeof expect, "cairn_async_save: rank %d (arguments): the handle pointer is NULL",
                 test_size - 1);
        CHECK_ERR(cairn_async_save(f.state, a, MPI_COMM_WORLD, NULL, test_rank == test_size - 1 ? NULL : &h),
                  CAIRN_ERR_USAGE, expect);
        check_same_message(MPI_COMM_WORLD, cairn_last_error());
        CHECK(h == NULL);
        snprintf(expect, sizeof expect, "cairn_async_save: rank 0 (arguments): the checkpoint id is NULL");
        CHECK_ERR(cairn_async_save(f.state, test_rank == 0 ? NULL : a, MPI_COMM_WORLD, NULL, &h), CAIRN_ERR_USAGE,
                  expect);
        check_same_message(MPI_COMM_WORLD, cairn_last_error());
        snprintf(expect, sizeof expect, "cairn_async_save: rank %d (arguments): the state is NULL", test_size - 1);
        CHECK_ERR(cairn_async_save(test_rank == test_size - 1 ? NULL : f.state, a, MPI_COMM_WORLD, NULL, &h),
                  CAIRN_ERR_USAGE, expect);
        check_same_message(MPI_COMM_WORLD, cairn_last_error());
    }
    CHECK_ERR(cairn_async_save(f.state, a, MPI_COMM_NULL, NULL, &h), CAIRN_ERR_USAGE, "MPI_COMM_NULL");
    CHECK_ERR(cairn_async_wait_staged(NULL), CAIRN_ERR_USAGE, "cairn_async_wait_staged: the async save handle is NULL");
    CHECK_ERR(cairn_async_wait_committed(NULL, NULL), CAIRN_ERR_USAGE, "the async save handle is NULL");
    CHECK_ERR(cairn_async_test_committed(NULL, &flag, NULL), CAIRN_ERR_USAGE, "the async save handle is NULL");
    CHECK(flag == 0);

    /* 5. An unwritable path (under a regular file: not writable even by
     *    root): an error on every rank, naming the path, and no handle. */
    test_path(file, sizeof file, "a-file");
    test_path(bad, sizeof bad, "a-file/ckpt");
    if (test_rank == 0) {
        FILE* fp = fopen(file, "w");
        CHECK(fp != NULL);
        fputs("not a directory\n", fp);
        fclose(fp);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    {
        int rc = cairn_async_save(f.state, bad, MPI_COMM_WORLD, NULL, &h);
        if (rc == CAIRN_SUCCESS) { /* or it fails in the background */
            CHECK(h != NULL);
            rc = cairn_async_wait_committed(h, &r);
            CHECK_OK(cairn_async_free(&h));
        }
        CHECK(rc == CAIRN_ERR_WRITE);
        CHECK(cairn_last_error_code() == rc);
        if (!strstr(cairn_last_error(), "a-file/ckpt"))
            FAIL_AT("the message does not name the path: %s", cairn_last_error());
        check_same_message(MPI_COMM_WORLD, cairn_last_error());
        CHECK(h == NULL);
    }

    /* 6. Options are honoured: overwrite replaces a checkpoint. */
    CHECK_OK(cairn_save_options_create(&so));
    CHECK_OK(cairn_save_options_set_overwrite(so, 1));
    CHECK_OK(cairn_save_options_set_files_per_rank(so, 2));
    CHECK_OK(cairn_async_save(f.state, a, MPI_COMM_WORLD, so, &h));
    CHECK_OK(cairn_async_wait_committed(h, NULL));
    CHECK_OK(cairn_async_free(&h));
    check_checkpoint(a, 4);
    CHECK_OK(cairn_save_options_free(&so));
    field_free(&f);

    return test_finish("capi_async");
}
