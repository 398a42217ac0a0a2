/* Helpers of the C API tests: checks that abort every rank on failure, and a
 * per-test working directory (CAIRN_TEST_DIR, set by CTest). */
#ifndef CAIRN_TEST_CAPI_COMMON_H
#define CAIRN_TEST_CAPI_COMMON_H

#include <cairn/cairn.h>

#include <mpi.h>

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

static int test_rank = 0;
static int test_size = 1;
static int test_checks = 0;

#define FAIL_AT(...)                                                                                                 \
    do {                                                                                                             \
        fprintf(stderr, "%s:%d: rank %d: ", __FILE__, __LINE__, test_rank);                                          \
        fprintf(stderr, __VA_ARGS__);                                                                                \
        fprintf(stderr, "\n");                                                                                       \
        fflush(stderr);                                                                                              \
        MPI_Abort(MPI_COMM_WORLD, 1);                                                                                \
    } while (0)

/* CHECK(cond): a condition that must hold. */
#define CHECK(cond)                                                                                                  \
    do {                                                                                                             \
        ++test_checks;                                                                                               \
        if (!(cond))                                                                                                 \
            FAIL_AT("CHECK failed: %s", #cond);                                                                      \
    } while (0)

/* CHECK_OK(call): a Cairn call that must succeed. */
#define CHECK_OK(call)                                                                                               \
    do {                                                                                                             \
        int rc_ = (call);                                                                                            \
        ++test_checks;                                                                                               \
        if (rc_ != CAIRN_SUCCESS)                                                                                    \
            FAIL_AT("%s returned %s: %s", #call, cairn_error_name(rc_), cairn_last_error());                        \
    } while (0)

/* CHECK_ERR(call, code, text): a Cairn call that must fail with `code` and a
 * message containing `text`. */
#define CHECK_ERR(call, code, text)                                                                                  \
    do {                                                                                                             \
        int rc_ = (call);                                                                                            \
        ++test_checks;                                                                                               \
        if (rc_ != (code))                                                                                           \
            FAIL_AT("%s returned %s, expected %s (message: %s)", #call, cairn_error_name(rc_), cairn_error_name(code), \
                    cairn_last_error());                                                                             \
        if (cairn_last_error_code() != (code))                                                                       \
            FAIL_AT("%s: cairn_last_error_code() is %s", #call, cairn_error_name(cairn_last_error_code()));          \
        if (!strstr(cairn_last_error(), (text)))                                                                     \
            FAIL_AT("%s: message '%s' does not contain '%s'", #call, cairn_last_error(), (text));                   \
    } while (0)

/* Checks that every rank of `comm` holds the same message. */
static void check_same_message(MPI_Comm comm, const char* message)
{
    int n = (int)strlen(message), root_n = n;
    char* root;
    MPI_Bcast(&root_n, 1, MPI_INT, 0, comm);
    root = (char*)calloc((size_t)root_n + 1, 1);
    if (test_rank == 0)
        memcpy(root, message, (size_t)n);
    MPI_Bcast(root, root_n, MPI_CHAR, 0, comm);
    ++test_checks;
    if (n != root_n || memcmp(root, message, (size_t)n) != 0)
        FAIL_AT("message differs between ranks: '%s' here vs. '%s' on rank 0", message, root);
    free(root);
}

static char test_dir_path[4096];

static int remove_entry(const char* path, const struct stat* sb, int flag, struct FTW* ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* Creates (rank 0) the test's working directory, emptied, and returns it. */
static const char* test_dir(void)
{
    const char* env = getenv("CAIRN_TEST_DIR");
    const char* dir = env && *env ? env : "cairn_capi_test_tmp";
    snprintf(test_dir_path, sizeof test_dir_path, "%s", dir);
    if (test_rank == 0) {
        char tmp[4096];
        size_t i, n = strlen(test_dir_path);
        nftw(test_dir_path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
        for (i = 1; i <= n; ++i) {
            if (test_dir_path[i] == '/' || test_dir_path[i] == '\0') {
                memcpy(tmp, test_dir_path, i);
                tmp[i] = '\0';
                if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
                    FAIL_AT("cannot create %s", tmp);
            }
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    return test_dir_path;
}

/* `buf` = "<test dir>/<name>". */
static const char* test_path(char* buf, size_t size, const char* name)
{
    snprintf(buf, size, "%s/%s", test_dir_path, name);
    return buf;
}

static void test_init(int* argc, char*** argv)
{
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &test_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &test_size);
    test_dir();
}

/* test_init with MPI_Init_thread(`required`); fails unless MPI provides it. */
static void test_init_thread(int* argc, char*** argv, int required)
{
    int provided = MPI_THREAD_SINGLE;
    MPI_Init_thread(argc, argv, required, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &test_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &test_size);
    if (provided < required)
        FAIL_AT("MPI_Init_thread provided thread level %d, the test needs %d", provided, required);
    test_dir();
}

/* 1 when `path` exists and is a directory (dir = 1) or a regular file (dir = 0). */
static int path_is(const char* path, int dir)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return 0;
    return dir ? S_ISDIR(sb.st_mode) : S_ISREG(sb.st_mode);
}

static int test_finish(const char* name)
{
    int total = 0;
    MPI_Reduce(&test_checks, &total, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (test_rank == 0)
        printf("%s: %d checks passed on %d ranks\n", name, total, test_size);
    MPI_Finalize();
    return 0;
}

/* Block distribution of n cells over p parts: offset and size of part c. */
static void block(int64_t n, int p, int c, int64_t* offset, int64_t* size)
{
    int64_t base = n / p, rem = n % p;
    *size = base + (c < rem ? 1 : 0);
    *offset = c * base + (c < rem ? c : rem);
}

#endif
