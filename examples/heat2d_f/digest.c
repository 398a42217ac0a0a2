/* heat2d_f's 64-bit digest, in C for its unsigned arithmetic: the same sum
 * (mod 2^64) over every cell of splitmix64(bits(T) + golden * (i*ny + j + 1))
 * as examples/heat2d, over the Fortran field t(0:lnx+1, 0:lny+1)
 * (column-major, leading dimension ld = lnx + 2) whose t(li, lj) is global
 * cell (i0 + li - 1, j0 + lj - 1). Reduced to rank 0 of `fcomm`, where `hex`
 * receives 16 lowercase hex digits (no NUL). Collective. */
#include <mpi.h>

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

void heat2d_f_digest(const double* t, int64_t ld, int64_t lnx, int64_t lny, int64_t i0, int64_t j0, int64_t ny,
                     MPI_Fint fcomm, char* hex);

static uint64_t splitmix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void heat2d_f_digest(const double* t, int64_t ld, int64_t lnx, int64_t lny, int64_t i0, int64_t j0, int64_t ny,
                     MPI_Fint fcomm, char* hex)
{
    uint64_t local = 0, global = 0;
    char buf[17];
    int64_t li, lj;
    for (lj = 1; lj <= lny; ++lj) {
        const int64_t j = j0 + lj - 1;
        for (li = 1; li <= lnx; ++li) {
            const int64_t i = i0 + li - 1;
            uint64_t bits = 0;
            memcpy(&bits, &t[li + lj * ld], sizeof bits);
            local += splitmix64(bits + 0x9E3779B97F4A7C15ull * (uint64_t)(i * ny + j + 1));
        }
    }
    MPI_Reduce(&local, &global, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_Comm_f2c(fcomm));
    snprintf(buf, sizeof buf, "%016" PRIx64, global);
    memcpy(hex, buf, 16);
}
