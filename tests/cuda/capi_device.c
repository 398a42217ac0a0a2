/* C API and device memory (cairn_state_add_device_array).
 *
 * With a usable CUDA device on every rank: a strided device shard (one ghost
 * layer) saved in both layouts, loaded resharded into host memory and back
 * into device memory; pageable host memory declared as device memory is
 * refused by name.
 *
 * Without one (the machines CI runs on): the array is accepted, and the save
 * fails on every rank with the same message, which names the array, and
 * leaves the checkpoint it would replace intact. */
#include "../capi/common.h"

#include <cuda_runtime.h>

enum { NX = 40, NY = 30 };

static double field(int64_t i, int64_t j) { return (double)(i * 100 + j) + 0.25; }

#define CHECK_CUDA(call)                                                                                             \
    do {                                                                                                             \
        cudaError_t rc_ = (call);                                                                                    \
        if (rc_ != cudaSuccess)                                                                                      \
            FAIL_AT("%s: %s", #call, cudaGetErrorString(rc_));                                                       \
    } while (0)

/* This rank's rows [*i0, *i0 + *n) of NX. */
static void my_rows(int64_t* i0, int64_t* n)
{
    *n = NX / test_size + (test_rank < NX % test_size ? 1 : 0);
    *i0 = (int64_t)test_rank * (NX / test_size) + (test_rank < NX % test_size ? test_rank : NX % test_size);
}

static void with_device(void)
{
    int64_t i0, n, i, j, k;
    const int64_t ld = NY + 2, gshape[2] = {NX, NY};
    const char* ids[2] = {"dev", "dev.h5"};
    int layout;
    double *host, *dev, *back;
    size_t count;
    char path[4200];
    int ndev = 0;
    CHECK_CUDA(cudaGetDeviceCount(&ndev));
    CHECK_CUDA(cudaSetDevice(test_rank % ndev));
    my_rows(&i0, &n);
    count = (size_t)((n + 2) * ld);
    host = (double*)malloc(count * sizeof(double));
    back = (double*)malloc(count * sizeof(double));
    for (k = 0; k < (int64_t)count; ++k)
        host[k] = -1.0;
    for (i = 0; i < n; ++i)
        for (j = 0; j < NY; ++j)
            host[(i + 1) * ld + j + 1] = field(i0 + i, j);
    CHECK_CUDA(cudaMalloc((void**)&dev, count * sizeof(double)));
    CHECK_CUDA(cudaMemcpy(dev, host, count * sizeof(double), cudaMemcpyHostToDevice));
    for (layout = 0; layout < 2; ++layout) {
        const int64_t offs[2] = {i0, 0}, shape[2] = {n, NY}, strides[2] = {ld, 1};
        const int64_t all_offs[2] = {0, 0};
        double* cols = (double*)calloc((size_t)(NX * NY), sizeof(double));
        double* dev2;
        cairn_state_t *st = NULL, *in = NULL, *in2 = NULL;
        CHECK_OK(cairn_state_create(&st));
        CHECK_OK(cairn_state_add_device_array(st, "u", CAIRN_F64, 2, gshape, offs, shape, dev + ld + 1, strides));
        CHECK_OK(cairn_save(st, test_path(path, sizeof path, ids[layout]), MPI_COMM_WORLD, NULL, NULL));
        /* Every rank loads the whole array into host memory. */
        CHECK_OK(cairn_state_create(&in));
        CHECK_OK(cairn_state_add_array(in, "u", CAIRN_F64, 2, gshape, all_offs, gshape, cols, NULL));
        CHECK_OK(cairn_load(in, path, MPI_COMM_WORLD, NULL, NULL));
        for (i = 0; i < NX; ++i)
            for (j = 0; j < NY; ++j)
                CHECK(cols[i * NY + j] == field(i, j));
        /* This rank's rows back into zeroed device memory: ghosts stay 0. */
        CHECK_CUDA(cudaMalloc((void**)&dev2, count * sizeof(double)));
        CHECK_CUDA(cudaMemset(dev2, 0, count * sizeof(double)));
        CHECK_OK(cairn_state_create(&in2));
        CHECK_OK(cairn_state_add_device_array(in2, "u", CAIRN_F64, 2, gshape, offs, shape, dev2 + ld + 1, strides));
        CHECK_OK(cairn_load(in2, path, MPI_COMM_WORLD, NULL, NULL));
        CHECK_CUDA(cudaMemcpy(back, dev2, count * sizeof(double), cudaMemcpyDeviceToHost));
        for (k = 0; k < (int64_t)count; ++k) {
            const int ghost = k < ld || k >= (n + 1) * ld || k % ld == 0 || k % ld == ld - 1;
            CHECK(back[k] == (ghost ? 0.0 : host[k]));
        }
        CHECK_CUDA(cudaFree(dev2));
        CHECK_OK(cairn_state_free(&in2));
        CHECK_OK(cairn_state_free(&in));
        CHECK_OK(cairn_state_free(&st));
        free(cols);
    }
    {
        /* Pageable host memory declared as device memory. */
        cairn_state_t* st = NULL;
        const int64_t offs[2] = {i0, 0}, shape[2] = {n, NY};
        CHECK_OK(cairn_state_create(&st));
        CHECK_ERR(cairn_state_add_device_array(st, "pageable", CAIRN_F64, 2, gshape, offs, shape, host, NULL),
                  CAIRN_ERR_USAGE, "'pageable'");
        CHECK_OK(cairn_state_free(&st));
    }
    CHECK_CUDA(cudaFree(dev));
    free(host);
    free(back);
}

static void without_device(void)
{
    int64_t i0, n, k;
    const int64_t gshape[1] = {NX};
    double vals[NX], got[NX];
    char path[4200];
    cairn_state_t *good = NULL, *st = NULL, *in = NULL;
    cairn_save_options_t* o = NULL;
    int rc;
    my_rows(&i0, &n);
    for (k = 0; k < n; ++k)
        vals[k] = field(i0 + k, 0);
    /* A good checkpoint first, from host memory. */
    CHECK_OK(cairn_state_create(&good));
    CHECK_OK(cairn_state_add_array(good, "u", CAIRN_F64, 1, gshape, &i0, &n, vals, NULL));
    CHECK_OK(cairn_save(good, test_path(path, sizeof path, "ckpt"), MPI_COMM_WORLD, NULL, NULL));
    /* The same array declared as device memory: accepted (nothing to check
     * it against), refused by the save on every rank. */
    CHECK_OK(cairn_state_create(&st));
    CHECK_OK(cairn_state_add_device_array(st, "u", CAIRN_F64, 1, gshape, &i0, &n, vals, NULL));
    CHECK_OK(cairn_save_options_create(&o));
    CHECK_OK(cairn_save_options_set_overwrite(o, 1));
    rc = cairn_save(st, path, MPI_COMM_WORLD, o, NULL);
    CHECK(rc == CAIRN_ERR_USAGE);
    CHECK(strstr(cairn_last_error(), "array 'u' is in CUDA device memory") != NULL);
    check_same_message(MPI_COMM_WORLD, cairn_last_error());
    if (test_rank == 0)
        printf("the save without a device: %s: %s\n", cairn_error_name(rc), cairn_last_error());
    /* The checkpoint it would have replaced is intact. */
    CHECK_OK(cairn_state_create(&in));
    {
        const int64_t zero = 0, all = NX;
        CHECK_OK(cairn_state_add_array(in, "u", CAIRN_F64, 1, gshape, &zero, &all, got, NULL));
    }
    CHECK_OK(cairn_load(in, path, MPI_COMM_WORLD, NULL, NULL));
    for (k = 0; k < NX; ++k)
        CHECK(got[k] == field(k, 0));
    CHECK_OK(cairn_save_options_free(&o));
    CHECK_OK(cairn_state_free(&in));
    CHECK_OK(cairn_state_free(&st));
    CHECK_OK(cairn_state_free(&good));
}

int main(int argc, char** argv)
{
    int have, all_have = 0;
    test_init(&argc, &argv);
    have = cairn_cuda_device_available();
    MPI_Allreduce(&have, &all_have, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (all_have)
        with_device();
    else
        without_device();
    if (test_rank == 0)
        printf("capi_device (%s): %d checks passed\n", all_have ? "with a device" : "without a device", test_checks);
    MPI_Finalize();
    return 0;
}
