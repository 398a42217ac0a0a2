/* C API: errors are return codes with a thread-local message, never a crash
 * or an exception; collective calls fail identically on every rank, also
 * when only one rank passed a bad argument. */
#include "common.h"

#include <limits.h>

int main(int argc, char** argv)
{
    char path[4200], missing[4200];
    cairn_state_t* st = NULL;
    double x[6] = {1, 2, 3, 4, 5, 6};
    int64_t v = 5;
    int64_t g[2] = {2, 3}, o[2] = {0, 0}, s[2] = {2, 3}, bad[2] = {1, 3}, neg[2] = {-1, 3};

    test_init(&argc, &argv);
    test_path(path, sizeof path, "ok");
    test_path(missing, sizeof missing, "does-not-exist");

    /* Names and codes. */
    CHECK(strcmp(cairn_error_name(CAIRN_SUCCESS), "CAIRN_SUCCESS") == 0);
    CHECK(strcmp(cairn_error_name(CAIRN_ERR_NOT_FOUND), "CAIRN_ERR_NOT_FOUND") == 0);
    CHECK(strcmp(cairn_error_name(12345), "CAIRN_ERR_UNKNOWN") == 0);
    CHECK(strlen(cairn_version()) >= 5);
    CHECK(cairn_dtype_size(CAIRN_F64) == 8 && cairn_dtype_size(CAIRN_BOOL) == 1 && cairn_dtype_size(99) == 0);
    cairn_clear_error();
    CHECK(cairn_last_error_code() == CAIRN_SUCCESS && strcmp(cairn_last_error(), "") == 0);

    /* Local argument errors. */
    CHECK_ERR(cairn_state_create(NULL), CAIRN_ERR_USAGE, "cairn_state_create: the output pointer is NULL");
    CHECK_ERR(cairn_state_add_scalar(NULL, "v", CAIRN_I64, &v), CAIRN_ERR_USAGE, "the state is NULL");
    CHECK_OK(cairn_state_create(&st));
    CHECK_ERR(cairn_state_add_scalar(st, NULL, CAIRN_I64, &v), CAIRN_ERR_USAGE, "the entry name is NULL");
    CHECK_ERR(cairn_state_add_scalar(st, "", CAIRN_I64, &v), CAIRN_ERR_USAGE, "empty entry name");
    CHECK_ERR(cairn_state_add_scalar(st, "v", (cairn_dtype_t)77, &v), CAIRN_ERR_USAGE, "invalid dtype code 77");
    /* Out-of-range dtypes are taken as int and refused before any conversion
     * to the enum (UBSan's -fsanitize=enum would report the load of such an
     * enum value), naming the bad value and the valid range. */
    {
        const int bad_dtypes[5] = {-1, 13, 99, INT_MAX, INT_MIN};
        char expect[160];
        int k;
        for (k = 0; k < 5; ++k) {
            snprintf(expect, sizeof expect,
                     "scalar 'v': invalid dtype code %d (the cairn_dtype_t codes are 0..12, CAIRN_F16..CAIRN_BOOL)",
                     bad_dtypes[k]);
            CHECK_ERR(cairn_state_add_scalar(st, "v", bad_dtypes[k], &v), CAIRN_ERR_USAGE, expect);
            snprintf(expect, sizeof expect, "cairn_state_add_array: array 'x': invalid dtype code %d (the cairn_dtype_t",
                     bad_dtypes[k]);
            CHECK_ERR(cairn_state_add_array(st, "x", bad_dtypes[k], 2, g, o, s, x, NULL), CAIRN_ERR_USAGE, expect);
            snprintf(expect, sizeof expect, "cairn_state_add_replicated: array 'x': invalid dtype code %d",
                     bad_dtypes[k]);
            CHECK_ERR(cairn_state_add_replicated(st, "x", bad_dtypes[k], 2, g, x), CAIRN_ERR_USAGE, expect);
        }
        CHECK(cairn_dtype_size(-1) == 0 && cairn_dtype_size(13) == 0 && cairn_dtype_size(INT_MIN) == 0);
    }
    CHECK_ERR(cairn_state_add_scalar(st, "v", CAIRN_I64, NULL), CAIRN_ERR_USAGE, "scalar 'v': null pointer");
    CHECK_ERR(cairn_state_add_array(st, "x", CAIRN_F64, -1, g, o, s, x, NULL), CAIRN_ERR_USAGE, "ndim -1");
    CHECK_ERR(cairn_state_add_array(st, "x", CAIRN_F64, 2, NULL, o, s, x, NULL), CAIRN_ERR_USAGE, "is NULL");
    CHECK_ERR(cairn_state_add_array(st, "x", CAIRN_F64, 2, bad, o, s, x, NULL), CAIRN_ERR_USAGE,
              "array 'x': box [0:2, 0:3] lies outside the global shape [1, 3]");
    CHECK_ERR(cairn_state_add_array(st, "x", CAIRN_F64, 2, g, o, neg, x, NULL), CAIRN_ERR_USAGE, "negative extent");
    CHECK_ERR(cairn_state_add_array(st, "x", CAIRN_F64, 2, g, o, s, NULL, NULL), CAIRN_ERR_USAGE, "null data pointer");
    CHECK_ERR(cairn_state_add_string(st, "t", NULL, 4), CAIRN_ERR_USAGE, "null buffer");
    CHECK_ERR(cairn_state_add_bytes(st, "b", x, 8, NULL), CAIRN_ERR_USAGE, "the size pointer is NULL");
    CHECK_ERR(cairn_save_options_set_files_per_rank(NULL, 2), CAIRN_ERR_USAGE, "the options handle is NULL");
    {
        size_t n = 7;
        CHECK_OK(cairn_state_size(st, &n));
        CHECK(n == 0); /* nothing was added by the failing calls */
    }
    CHECK_OK(cairn_state_add_array(st, "x", CAIRN_F64, 2, g, o, s, x, NULL));
    CHECK_ERR(cairn_state_add_scalar(st, "x", CAIRN_I64, &v), CAIRN_ERR_USAGE, "duplicate entry name 'x'");
    CHECK_OK(cairn_state_add_scalar(st, "v", CAIRN_I64, &v));
    /* A successful call keeps the last error. */
    CHECK(cairn_last_error_code() == CAIRN_ERR_USAGE && strstr(cairn_last_error(), "duplicate entry name"));
    CHECK_OK(cairn_state_free(&st));
    CHECK_OK(cairn_state_free(&st)); /* NULL is fine */
    CHECK_OK(cairn_state_free(NULL));

    /* No communicator. */
    CHECK_OK(cairn_state_create(&st));
    CHECK_ERR(cairn_save(st, path, MPI_COMM_NULL, NULL, NULL), CAIRN_ERR_USAGE, "MPI_COMM_NULL");
    CHECK_ERR(cairn_load(st, path, MPI_COMM_NULL, NULL, NULL), CAIRN_ERR_USAGE, "MPI_COMM_NULL");
    CHECK_OK(cairn_state_free(&st));

    /* A replicated array on every rank, and a scalar: a good checkpoint. */
    CHECK_OK(cairn_state_create(&st));
    CHECK_OK(cairn_state_add_replicated(st, "x", CAIRN_F64, 2, g, x));
    CHECK_OK(cairn_state_add_scalar(st, "v", CAIRN_I64, &v));
    CHECK_OK(cairn_save(st, path, MPI_COMM_WORLD, NULL, NULL));
    /* Saving again without overwrite is refused, on every rank. */
    CHECK_ERR(cairn_save(st, path, MPI_COMM_WORLD, NULL, NULL), CAIRN_ERR_USAGE, "already exists");
    check_same_message(MPI_COMM_WORLD, cairn_last_error());
    /* One rank passes a NULL checkpoint id: every rank fails, naming it. */
    {
        char expect[128];
        snprintf(expect, sizeof expect, "cairn_save: rank %d (arguments): the checkpoint id is NULL", test_size - 1);
        CHECK_ERR(cairn_save(st, test_rank == test_size - 1 ? NULL : path, MPI_COMM_WORLD, NULL, NULL),
                  CAIRN_ERR_USAGE, expect);
        check_same_message(MPI_COMM_WORLD, cairn_last_error());
        snprintf(expect, sizeof expect, "cairn_load: rank %d (arguments): the state is NULL", test_size - 1);
        CHECK_ERR(cairn_load(test_rank == test_size - 1 ? NULL : st, path, MPI_COMM_WORLD, NULL, NULL),
                  CAIRN_ERR_USAGE, expect);
        check_same_message(MPI_COMM_WORLD, cairn_last_error());
    }
    CHECK_OK(cairn_state_free(&st));

    /* Load errors, the same on every rank. */
    CHECK_OK(cairn_state_create(&st));
    CHECK_OK(cairn_state_add_replicated(st, "x", CAIRN_F64, 2, g, x));
    CHECK_OK(cairn_state_add_scalar(st, "v", CAIRN_I64, &v));
    CHECK_ERR(cairn_load(st, missing, MPI_COMM_WORLD, NULL, NULL), CAIRN_ERR_NOT_FOUND, "no checkpoint at");
    CHECK(strstr(cairn_last_error(), "cairn_load: ") == cairn_last_error());
    check_same_message(MPI_COMM_WORLD, cairn_last_error());
    CHECK_ERR(cairn_load(st, "", MPI_COMM_WORLD, NULL, NULL), CAIRN_ERR_USAGE, "empty checkpoint id");
    CHECK_OK(cairn_state_free(&st));

    CHECK_OK(cairn_state_create(&st));
    {
        float xf[6];
        CHECK_OK(cairn_state_add_replicated(st, "x", CAIRN_F32, 2, g, xf));
        CHECK_OK(cairn_state_add_scalar(st, "v", CAIRN_I64, &v));
        CHECK_ERR(cairn_load(st, path, MPI_COMM_WORLD, NULL, NULL), CAIRN_ERR_MISMATCH,
                  "array 'x': dtype f32 in the state vs. f64 in the checkpoint");
        check_same_message(MPI_COMM_WORLD, cairn_last_error());
    }
    CHECK_OK(cairn_state_free(&st));

    CHECK_OK(cairn_state_create(&st));
    {
        int64_t g2[2] = {3, 2};
        CHECK_OK(cairn_state_add_replicated(st, "x", CAIRN_F64, 2, g2, x));
        CHECK_OK(cairn_state_add_scalar(st, "v", CAIRN_I64, &v));
        CHECK_ERR(cairn_load(st, path, MPI_COMM_WORLD, NULL, NULL), CAIRN_ERR_MISMATCH,
                  "global shape [3, 2] in the state vs. [2, 3] in the checkpoint");
    }
    CHECK_OK(cairn_state_free(&st));

    CHECK_OK(cairn_state_create(&st));
    CHECK_OK(cairn_state_add_replicated(st, "x", CAIRN_F64, 2, g, x));
    CHECK_ERR(cairn_load(st, path, MPI_COMM_WORLD, NULL, NULL), CAIRN_ERR_NOT_FOUND, "'v'");
    check_same_message(MPI_COMM_WORLD, cairn_last_error());
    CHECK_OK(cairn_state_add_scalar(st, "v", CAIRN_I64, &v));
    CHECK_OK(cairn_state_add_scalar(st, "w", CAIRN_I64, &v));
    CHECK_ERR(cairn_load(st, path, MPI_COMM_WORLD, NULL, NULL), CAIRN_ERR_NOT_FOUND,
              "entry 'w' is not in the checkpoint");
    CHECK_OK(cairn_state_free(&st));

    /* Ranks disagree on a global shape while saving. */
    if (test_size > 1) {
        int64_t mine[2] = {2, test_rank == 0 ? 3 : 4}, sh[2] = {0, 0};
        CHECK_OK(cairn_state_create(&st));
        CHECK_OK(cairn_state_add_array(st, "y", CAIRN_F64, 2, mine, o, sh, x, NULL));
        CHECK_ERR(cairn_save(st, test_path(path, sizeof path, "never"), MPI_COMM_WORLD, NULL, NULL),
                  CAIRN_ERR_MISMATCH, "'y'");
        check_same_message(MPI_COMM_WORLD, cairn_last_error());
        CHECK_OK(cairn_state_free(&st));
    }

    /* Options are checked by the save or load, on every rank. */
    {
        cairn_save_options_t* so = NULL;
        cairn_load_options_t* lo = NULL;
        CHECK_OK(cairn_state_create(&st));
        CHECK_OK(cairn_state_add_replicated(st, "x", CAIRN_F64, 2, g, x));
        CHECK_OK(cairn_save_options_create(&so));
        CHECK_ERR(cairn_save_options_set_files_per_rank(so, 0), CAIRN_ERR_USAGE, "at least 1");
        CHECK_ERR(cairn_save_options_set_data_files(so, -2), CAIRN_ERR_USAGE,
                  "CAIRN_FILES_PER_RANK, CAIRN_FILES_PER_NODE or a number of files of at least 1, not -2");
        CHECK_OK(cairn_save_options_set_staging_bytes(so, 100));
        CHECK_ERR(cairn_save(st, test_path(path, sizeof path, "never"), MPI_COMM_WORLD, so, NULL), CAIRN_ERR_USAGE,
                  "staging_bytes must be at least 4096, not 100");
        check_same_message(MPI_COMM_WORLD, cairn_last_error());
        CHECK_OK(cairn_load_options_create(&lo));
        CHECK_OK(cairn_load_options_set_staging_bytes(lo, 10));
        CHECK_ERR(cairn_load(st, test_path(path, sizeof path, "ok"), MPI_COMM_WORLD, lo, NULL), CAIRN_ERR_USAGE,
                  "staging_bytes must be at least 4096, not 10");
        CHECK_OK(cairn_save_options_free(&so));
        CHECK_OK(cairn_load_options_free(&lo));
        CHECK_OK(cairn_state_free(&st));
    }

    /* Nothing was committed by the failed saves. */
    if (test_rank == 0) {
        char md[4300];
        struct stat sb;
        snprintf(md, sizeof md, "%s/never/metadata.h5", test_dir_path);
        CHECK(stat(md, &sb) != 0);
    }
    return test_finish("capi_errors");
}
