/* The C side of test_arrays.F90: loads the arrays "<kind>.rank1" ..
 * "<kind>.rank7" that the Fortran test saved, as whole row-major C arrays,
 * and counts the elements that are not the value of their row-major index
 * (the Fortran test stores VALUE(i1*n2*... + ...) at A(i1+1, i2+1, ...)).
 * Collective over the Fortran communicator `fcomm`. */
#include <cairn/cairn.h>

#include <mpi.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int check_layout(const char* path, const char* kind, MPI_Fint fcomm);

int check_layout(const char* path, const char* kind, MPI_Fint fcomm)
{
    static const int64_t full[7] = {5, 4, 3, 3, 2, 2, 3};
    MPI_Comm comm = MPI_Comm_f2c(fcomm);
    cairn_dtype_t dtype = CAIRN_F64;
    void* buf[7];
    int64_t n[7];
    cairn_state_t* st = NULL;
    int r, bad = 0;

    if (strcmp(kind, "r4") == 0)
        dtype = CAIRN_F32;
    else if (strcmp(kind, "r8") == 0)
        dtype = CAIRN_F64;
    else if (strcmp(kind, "i4") == 0)
        dtype = CAIRN_I32;
    else if (strcmp(kind, "i8") == 0)
        dtype = CAIRN_I64;
    else
        dtype = CAIRN_BOOL;

    if (cairn_state_create(&st) != CAIRN_SUCCESS)
        return -1;
    for (r = 1; r <= 7; ++r) {
        char name[32];
        int d;
        n[r - 1] = 1;
        for (d = 0; d < r; ++d)
            n[r - 1] *= full[d];
        buf[r - 1] = calloc((size_t)n[r - 1], cairn_dtype_size(dtype));
        snprintf(name, sizeof name, "%s.rank%d", kind, r);
        if (cairn_state_add_replicated(st, name, dtype, r, full, buf[r - 1]) != CAIRN_SUCCESS) {
            fprintf(stderr, "check_layout: %s\n", cairn_last_error());
            return -1;
        }
    }
    if (cairn_load(st, path, comm, NULL, NULL) != CAIRN_SUCCESS) {
        fprintf(stderr, "check_layout: %s\n", cairn_last_error());
        return -1;
    }
    for (r = 1; r <= 7; ++r) {
        int64_t i;
        for (i = 0; i < n[r - 1]; ++i) {
            int ok = 0;
            switch (dtype) {
            case CAIRN_F32: ok = ((float*)buf[r - 1])[i] == (float)i; break;
            case CAIRN_F64: ok = ((double*)buf[r - 1])[i] == (double)i; break;
            case CAIRN_I32: ok = ((int32_t*)buf[r - 1])[i] == (int32_t)i; break;
            case CAIRN_I64: ok = ((int64_t*)buf[r - 1])[i] == i * 3000000000LL; break;
            default: ok = ((bool*)buf[r - 1])[i] == (i % 3 == 0); break;
            }
            if (!ok) {
                if (bad < 5)
                    fprintf(stderr, "check_layout: %s.rank%d: element %lld is wrong\n", kind, r, (long long)i);
                ++bad;
            }
        }
        free(buf[r - 1]);
    }
    cairn_state_free(&st);
    return bad;
}
