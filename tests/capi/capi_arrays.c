/* C API: arrays of several dtypes and ranks, dense and strided (ghost cells,
 * column-major windows), replicated and 0-d; round trip, then reshard to
 * another decomposition on the same ranks and from every smaller rank count
 * to all ranks; several boxes (tiles) of one array per rank; cooperative
 * reads (cairn_load_options_set_cooperative). */
#include "common.h"

#include <stdbool.h>

enum { NX = 13, NY = 11 };

static double field(int64_t i, int64_t j) { return (double)(i * 1000 + j) + 0.5; }

/* A 2-D f64 shard [i0, i0+lnx) x [j0, j0+lny) in a local array with `g`
 * ghost layers, row-major (col_major = 0) or column-major (1). */
typedef struct {
    int64_t i0, j0, lnx, lny;
    int g, col_major;
    double* buf;
} Shard;

static int64_t sh_index(const Shard* s, int64_t li, int64_t lj) /* local incl. ghosts */
{
    const int64_t rows = s->lnx + 2 * s->g, cols = s->lny + 2 * s->g;
    return s->col_major ? lj * rows + li : li * cols + lj;
}

static void sh_alloc(Shard* s, double fill)
{
    const int64_t n = (s->lnx + 2 * s->g) * (s->lny + 2 * s->g);
    int64_t k;
    s->buf = (double*)malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    for (k = 0; k < n; ++k)
        s->buf[k] = fill;
}

static void sh_add(cairn_state_t* st, const char* name, Shard* s)
{
    const int64_t gshape[2] = {NX, NY}, offs[2] = {s->i0, s->j0}, shape[2] = {s->lnx, s->lny};
    const int64_t rows = s->lnx + 2 * s->g, cols = s->lny + 2 * s->g;
    int64_t strides[2];
    if (s->col_major) {
        strides[0] = 1;
        strides[1] = rows;
    } else {
        strides[0] = cols;
        strides[1] = 1;
    }
    CHECK_OK(cairn_state_add_array(st, name, CAIRN_F64, 2, gshape, offs, shape, s->buf + sh_index(s, s->g, s->g),
                                   strides));
}

static void sh_fill(Shard* s)
{
    int64_t a, b;
    for (a = 0; a < s->lnx; ++a)
        for (b = 0; b < s->lny; ++b)
            s->buf[sh_index(s, a + s->g, b + s->g)] = field(s->i0 + a, s->j0 + b);
}

/* Interior holds the field, ghosts still hold `ghost`. */
static void sh_verify(const Shard* s, double ghost)
{
    int64_t a, b;
    for (a = 0; a < s->lnx + 2 * s->g; ++a)
        for (b = 0; b < s->lny + 2 * s->g; ++b) {
            const int inside = a >= s->g && a < s->lnx + s->g && b >= s->g && b < s->lny + s->g;
            const double want = inside ? field(s->i0 + a - s->g, s->j0 + b - s->g) : ghost;
            const double got = s->buf[sh_index(s, a, b)];
            if (got != want)
                FAIL_AT("local (%lld, %lld) of box [%lld+%lld, %lld+%lld]: %g, expected %g", (long long)a,
                        (long long)b, (long long)s->i0, (long long)s->lnx, (long long)s->j0, (long long)s->lny, got,
                        want);
        }
    ++test_checks;
}

/* The other arrays: one value function per dtype, the last dimension split. */
static void split_last(int64_t n, int parts, int part, int64_t* off, int64_t* len) { block(n, parts, part, off, len); }

static void test_round_trip_and_reshard(void)
{
    char path[4200];
    cairn_state_t* st = NULL;
    Shard a, b;
    int64_t k;
    /* 3-D f32 [4][5][6], split along the last dimension. */
    float f3[4 * 5 * 6], f3_back[4 * 5 * 6];
    int64_t g3[3] = {4, 5, 6}, o3[3] = {0, 0, 0}, s3[3] = {4, 5, 0}, st3[3] = {5 * 6, 6, 1};
    /* 1-D i32 [17], i64 2-D [7][3] (row split), u8 1-D [9], bool [5][4] (row split). */
    int32_t i1[17], i1_back[17];
    int64_t g1[1] = {17}, o1[1], s1[1];
    int64_t i2[7 * 3], i2_back[7 * 3];
    int64_t g2[2] = {7, 3}, o2[2] = {0, 0}, s2[2] = {0, 3};
    uint8_t u1[9], u1_back[9];
    int64_t gu[1] = {9}, ou[1], su[1];
    bool bl[5 * 4], bl_back[5 * 4];
    int64_t gb[2] = {5, 4}, ob[2] = {0, 0}, sb[2] = {0, 4};
    double rep[3 * 4], rep_back[3 * 4];
    int64_t grep[2] = {3, 4};
    int16_t zero_d = (int16_t)(-42), zero_d_back = 0;
    int64_t i, j, l;

    /* Save: rows of the field split over the ranks, row-major, 1 ghost layer. */
    a.i0 = 0;
    a.j0 = 0;
    a.lny = NY;
    a.g = 1;
    a.col_major = 0;
    block(NX, test_size, test_rank, &a.i0, &a.lnx);
    sh_alloc(&a, -1.0);
    sh_fill(&a);

    split_last(6, test_size, test_rank, &o3[2], &s3[2]);
    for (i = 0; i < 4; ++i)
        for (j = 0; j < 5; ++j)
            for (l = 0; l < 6; ++l)
                f3[(i * 5 + j) * 6 + l] = (float)(i * 100 + j * 10 + l) * 0.25f;
    split_last(17, test_size, test_rank, &o1[0], &s1[0]);
    for (k = 0; k < 17; ++k)
        i1[k] = (int32_t)(-3 * k + 7);
    block(7, test_size, test_rank, &o2[0], &s2[0]);
    for (k = 0; k < 21; ++k)
        i2[k] = (int64_t)k * 1000000007LL;
    split_last(9, test_size, test_rank, &ou[0], &su[0]);
    for (k = 0; k < 9; ++k)
        u1[k] = (uint8_t)(250 + k);
    block(5, test_size, test_rank, &ob[0], &sb[0]);
    for (k = 0; k < 20; ++k)
        bl[k] = (k % 3) == 0;
    for (k = 0; k < 12; ++k)
        rep[k] = 1.0 / (double)(k + 1);

    CHECK_OK(cairn_state_create(&st));
    sh_add(st, "field", &a);
    /* data points at the box's first element inside the full local array */
    CHECK_OK(cairn_state_add_array(st, "f32.3d", CAIRN_F32, 3, g3, o3, s3, f3 + o3[2], st3));
    CHECK_OK(cairn_state_add_array(st, "i32.1d", CAIRN_I32, 1, g1, o1, s1, i1 + o1[0], NULL));
    CHECK_OK(cairn_state_add_array(st, "i64.2d", CAIRN_I64, 2, g2, o2, s2, i2 + o2[0] * 3, NULL));
    CHECK_OK(cairn_state_add_array(st, "u8.1d", CAIRN_U8, 1, gu, ou, su, u1 + ou[0], NULL));
    CHECK_OK(cairn_state_add_array(st, "bool.2d", CAIRN_BOOL, 2, gb, ob, sb, bl + ob[0] * 4, NULL));
    CHECK_OK(cairn_state_add_replicated(st, "replicated", CAIRN_F64, 2, grep, rep));
    CHECK_OK(cairn_state_add_replicated(st, "zero_d", CAIRN_I16, 0, NULL, &zero_d));
    {
        size_t n = 0;
        CHECK_OK(cairn_state_size(st, &n));
        CHECK(n == 8);
    }
    {
        cairn_save_result_t r;
        memset(&r, 0xff, sizeof r);
        CHECK_OK(cairn_save(st, test_path(path, sizeof path, "a"), MPI_COMM_WORLD, NULL, &r));
        CHECK(r.entries == 8);
        CHECK(r.bytes_written == (uint64_t)(NX * NY * 8 + 120 * 4 + 17 * 4 + 21 * 8 + 9 + 20 + 12 * 8 + 2));
        CHECK(r.seconds >= 0.0);
    }
    CHECK_OK(cairn_state_free(&st));
    CHECK(st == NULL);

    /* Load into another decomposition: columns split over the ranks in
     * reverse order, column-major local arrays with 2 ghost layers. */
    b.i0 = 0;
    b.lnx = NX;
    b.g = 2;
    b.col_major = 1;
    block(NY, test_size, test_size - 1 - test_rank, &b.j0, &b.lny);
    sh_alloc(&b, -7.0);
    memset(f3_back, 0, sizeof f3_back);
    memset(i1_back, 0, sizeof i1_back);
    memset(i2_back, 0, sizeof i2_back);
    memset(u1_back, 0, sizeof u1_back);
    memset(bl_back, 0, sizeof bl_back);
    memset(rep_back, 0, sizeof rep_back);
    {
        /* everything, whole, on every rank: replicated destinations */
        int64_t z3[3] = {0, 0, 0}, z1[1] = {0}, z2[2] = {0, 0};
        cairn_load_result_t r;
        CHECK_OK(cairn_state_create(&st));
        sh_add(st, "field", &b);
        CHECK_OK(cairn_state_add_array(st, "f32.3d", CAIRN_F32, 3, g3, z3, g3, f3_back, NULL));
        CHECK_OK(cairn_state_add_array(st, "i32.1d", CAIRN_I32, 1, g1, z1, g1, i1_back, NULL));
        CHECK_OK(cairn_state_add_array(st, "i64.2d", CAIRN_I64, 2, g2, z2, g2, i2_back, NULL));
        CHECK_OK(cairn_state_add_replicated(st, "u8.1d", CAIRN_U8, 1, gu, u1_back));
        CHECK_OK(cairn_state_add_replicated(st, "bool.2d", CAIRN_BOOL, 2, gb, bl_back));
        CHECK_OK(cairn_state_add_replicated(st, "replicated", CAIRN_F64, 2, grep, rep_back));
        CHECK_OK(cairn_state_add_replicated(st, "zero_d", CAIRN_I16, 0, NULL, &zero_d_back));
        CHECK_OK(cairn_load(st, path, MPI_COMM_WORLD, NULL, &r));
        CHECK(r.missing == 0 && r.skipped == 0);
        CHECK(r.bytes_read > 0);
        CHECK_OK(cairn_state_free(&st));
    }
    sh_verify(&b, -7.0);
    for (k = 0; k < 120; ++k)
        CHECK(f3_back[k] == f3[k]);
    CHECK(memcmp(i1_back, i1, sizeof i1) == 0);
    CHECK(memcmp(i2_back, i2, sizeof i2) == 0);
    CHECK(memcmp(u1_back, u1, sizeof u1) == 0);
    for (k = 0; k < 20; ++k)
        CHECK(bl_back[k] == bl[k]);
    CHECK(memcmp(rep_back, rep, sizeof rep) == 0);
    CHECK(zero_d_back == -42);
    free(a.buf);
    free(b.buf);
}

/* Saves the field from the first k ranks (2-D process grid), loads it on all
 * ranks (rows split, row-major, 1 ghost layer). */
static void test_rank_counts(void)
{
    int k;
    for (k = 1; k <= test_size; ++k) {
        char name[64], path[4200];
        MPI_Comm sub = MPI_COMM_NULL;
        snprintf(name, sizeof name, "from%d", k);
        test_path(path, sizeof path, name);
        MPI_Comm_split(MPI_COMM_WORLD, test_rank < k ? 0 : MPI_UNDEFINED, test_rank, &sub);
        if (sub != MPI_COMM_NULL) {
            int dims[2] = {0, 0}, r;
            Shard s;
            cairn_state_t* st = NULL;
            cairn_save_options_t* so = NULL;
            MPI_Comm_rank(sub, &r);
            MPI_Dims_create(k, 2, dims);
            block(NX, dims[0], r / dims[1], &s.i0, &s.lnx);
            block(NY, dims[1], r % dims[1], &s.j0, &s.lny);
            s.g = 1;
            s.col_major = r % 2;
            sh_alloc(&s, -1.0);
            sh_fill(&s);
            CHECK_OK(cairn_state_create(&st));
            sh_add(st, "field", &s);
            CHECK_OK(cairn_save_options_create(&so));
            CHECK_OK(cairn_save_options_set_overwrite(so, 1));
            CHECK_OK(cairn_save(st, path, sub, so, NULL));
            CHECK_OK(cairn_save_options_free(&so));
            CHECK(so == NULL);
            CHECK_OK(cairn_state_free(&st));
            free(s.buf);
            MPI_Comm_free(&sub);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        {
            Shard s;
            cairn_state_t* st = NULL;
            s.j0 = 0;
            s.lny = NY;
            s.g = 1;
            s.col_major = 0;
            block(NX, test_size, test_rank, &s.i0, &s.lnx);
            sh_alloc(&s, 3.0);
            CHECK_OK(cairn_state_create(&st));
            sh_add(st, "field", &s);
            CHECK_OK(cairn_load(st, path, MPI_COMM_WORLD, NULL, NULL));
            CHECK_OK(cairn_state_free(&st));
            sh_verify(&s, 3.0);
            free(s.buf);
        }
    }
}

/* cairn_save_options_set_reuse_plan: the second of two saves of the same
 * shards reuses the first one's global plan (the result says so on every
 * rank) and loads back. A save without the option first, so that nothing
 * kept by an earlier test counts. */
static void test_reuse_plan(void)
{
    int k;
    for (k = 0; k < 3; ++k) {
        char name[64], path[4200];
        Shard s;
        cairn_state_t* st = NULL;
        cairn_save_options_t* so = NULL;
        cairn_save_result_t res;
        snprintf(name, sizeof name, "reuse%d", k);
        test_path(path, sizeof path, name);
        s.j0 = 0;
        s.lny = NY;
        s.g = 0;
        s.col_major = 0;
        block(NX, test_size, test_rank, &s.i0, &s.lnx);
        sh_alloc(&s, -1.0);
        sh_fill(&s);
        CHECK_OK(cairn_state_create(&st));
        sh_add(st, "field", &s);
        CHECK_OK(cairn_save_options_create(&so));
        CHECK_OK(cairn_save_options_set_fsync(so, 0));
        CHECK_OK(cairn_save_options_set_reuse_plan(so, k > 0));
        memset(&res, 0xff, sizeof res);
        CHECK_OK(cairn_save(st, path, MPI_COMM_WORLD, so, &res));
        CHECK(res.plan_reused == (k == 2));
        CHECK_OK(cairn_save_options_free(&so));
        CHECK_OK(cairn_state_free(&st));
        free(s.buf);
        sh_alloc(&s, 5.0);
        CHECK_OK(cairn_state_create(&st));
        sh_add(st, "field", &s);
        CHECK_OK(cairn_load(st, path, MPI_COMM_WORLD, NULL, NULL));
        CHECK_OK(cairn_state_free(&st));
        sh_verify(&s, 5.0);
        free(s.buf);
    }
}

/* Several boxes of one array per rank: cairn_state_add_array called again
 * with the same name adds a box. Tile k of a 2 x 3 grid of tiles (grown by
 * `halo` cells on each side, clipped) is held by rank k % size, each in its
 * own buffer, every other one with ghosts and column-major; a rank without
 * tiles adds an empty box. */
static int make_tiles(Shard* tiles, int halo, double fill)
{
    int k, n = 0;
    for (k = 0; k < 6; ++k) {
        Shard* s = &tiles[n];
        int64_t i1, j1;
        if (k % test_size != test_rank)
            continue;
        block(NX, 2, k / 3, &s->i0, &s->lnx);
        block(NY, 3, k % 3, &s->j0, &s->lny);
        i1 = s->i0 + s->lnx + halo < NX ? s->i0 + s->lnx + halo : NX;
        j1 = s->j0 + s->lny + halo < NY ? s->j0 + s->lny + halo : NY;
        s->i0 = s->i0 - halo > 0 ? s->i0 - halo : 0;
        s->j0 = s->j0 - halo > 0 ? s->j0 - halo : 0;
        s->lnx = i1 - s->i0;
        s->lny = j1 - s->j0;
        s->g = s->col_major = n % 2;
        sh_alloc(s, fill);
        ++n;
    }
    return n;
}

static void add_tiles(cairn_state_t* st, Shard* tiles, int n)
{
    int k;
    for (k = 0; k < n; ++k)
        sh_add(st, "field", &tiles[k]);
    if (n == 0) {
        const int64_t gshape[2] = {NX, NY}, zero[2] = {0, 0};
        CHECK_OK(cairn_state_add_array(st, "field", CAIRN_F64, 2, gshape, zero, zero, NULL, NULL));
    }
}

static void test_tiles(void)
{
    int layout;
    for (layout = 0; layout < 2; ++layout) {
        char path[4200];
        Shard tiles[6], rows;
        cairn_state_t* st = NULL;
        cairn_save_options_t* so = NULL;
        int n, k;
        test_path(path, sizeof path, layout ? "tiles.h5" : "tiles");
        /* Tiles saved, loaded into one box of rows per rank. */
        n = make_tiles(tiles, 0, -1.0);
        for (k = 0; k < n; ++k)
            sh_fill(&tiles[k]);
        CHECK_OK(cairn_state_create(&st));
        add_tiles(st, tiles, n);
        CHECK_OK(cairn_save_options_create(&so));
        CHECK_OK(cairn_save_options_set_overwrite(so, 1));
        CHECK_OK(cairn_save_options_set_layout(so, layout ? CAIRN_LAYOUT_CONTAINER : CAIRN_LAYOUT_PER_RANK));
        CHECK_OK(cairn_save(st, path, MPI_COMM_WORLD, so, NULL));
        CHECK_OK(cairn_state_free(&st));
        for (k = 0; k < n; ++k)
            free(tiles[k].buf);
        rows.j0 = 0;
        rows.lny = NY;
        rows.g = 1;
        rows.col_major = 0;
        block(NX, test_size, test_rank, &rows.i0, &rows.lnx);
        sh_alloc(&rows, 3.0);
        CHECK_OK(cairn_state_create(&st));
        sh_add(st, "field", &rows);
        CHECK_OK(cairn_load(st, path, MPI_COMM_WORLD, NULL, NULL));
        CHECK_OK(cairn_state_free(&st));
        sh_verify(&rows, 3.0);
        /* Rows saved, loaded into overlapping tiles. */
        sh_fill(&rows);
        CHECK_OK(cairn_state_create(&st));
        sh_add(st, "field", &rows);
        CHECK_OK(cairn_save(st, path, MPI_COMM_WORLD, so, NULL));
        CHECK_OK(cairn_state_free(&st));
        free(rows.buf);
        n = make_tiles(tiles, 1, 7.0);
        CHECK_OK(cairn_state_create(&st));
        add_tiles(st, tiles, n);
        CHECK_OK(cairn_load(st, path, MPI_COMM_WORLD, NULL, NULL));
        CHECK_OK(cairn_state_free(&st));
        for (k = 0; k < n; ++k) {
            sh_verify(&tiles[k], 7.0);
            free(tiles[k].buf);
        }
        CHECK_OK(cairn_save_options_free(&so));
    }
}

/* An array saved in blocks, loaded whole by every rank, plain and with
 * cooperative reads: the same values; summed over the ranks, the plain load
 * reads the array once per rank, the cooperative one once in all, and each
 * rank receives from the others what it did not read itself. */
static void test_cooperative(void)
{
    enum { PER_RANK = 3000 };
    char path[4200];
    const int64_t n = (int64_t)PER_RANK * test_size, gshape[1] = {n};
    const uint64_t total = (uint64_t)n * sizeof(double);
    int64_t offs[1], shape[1] = {PER_RANK}, k;
    double* mine = (double*)malloc(PER_RANK * sizeof(double));
    double* whole = (double*)malloc((size_t)n * sizeof(double));
    cairn_state_t* st = NULL;
    cairn_save_options_t* so = NULL;
    cairn_load_options_t* lo = NULL;
    int coop;
    uint64_t read_sum[2] = {0, 0}, received_sum[2] = {0, 0};
    test_path(path, sizeof path, "cooperative");
    offs[0] = (int64_t)PER_RANK * test_rank;
    for (k = 0; k < PER_RANK; ++k)
        mine[k] = (double)(offs[0] + k) * 0.25 - 7.0;
    CHECK_OK(cairn_save_options_create(&so));
    CHECK_OK(cairn_save_options_set_overwrite(so, 1));
    CHECK_OK(cairn_save_options_set_checksum_block(so, 4096));
    CHECK_OK(cairn_state_create(&st));
    CHECK_OK(cairn_state_add_array(st, "a", CAIRN_F64, 1, gshape, offs, shape, mine, NULL));
    CHECK_OK(cairn_save(st, path, MPI_COMM_WORLD, so, NULL));
    CHECK_OK(cairn_state_free(&st));
    CHECK_OK(cairn_save_options_free(&so));
    for (coop = 0; coop < 2; ++coop) {
        cairn_load_result_t r;
        uint64_t mine_counts[2];
        memset(whole, 0, (size_t)n * sizeof(double));
        CHECK_OK(cairn_load_options_create(&lo));
        CHECK_OK(cairn_load_options_set_cooperative(lo, coop));
        CHECK_OK(cairn_state_create(&st));
        CHECK_OK(cairn_state_add_replicated(st, "a", CAIRN_F64, 1, gshape, whole));
        CHECK_OK(cairn_load(st, path, MPI_COMM_WORLD, lo, &r));
        CHECK_OK(cairn_state_free(&st));
        CHECK_OK(cairn_load_options_free(&lo));
        for (k = 0; k < n; ++k)
            CHECK(whole[k] == (double)k * 0.25 - 7.0);
        if (!coop)
            CHECK(r.bytes_received == 0);
        mine_counts[0] = r.bytes_read;
        mine_counts[1] = r.bytes_received;
        MPI_Allreduce(&mine_counts[0], &read_sum[coop], 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
        MPI_Allreduce(&mine_counts[1], &received_sum[coop], 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    }
    CHECK(read_sum[0] == total * (uint64_t)test_size);
    CHECK(read_sum[1] == total);
    CHECK(received_sum[1] == total * (uint64_t)(test_size - 1));
    if (test_size > 1)
        CHECK(read_sum[1] < read_sum[0]);
    free(mine);
    free(whole);
}

int main(int argc, char** argv)
{
    test_init(&argc, &argv);
    test_round_trip_and_reshard();
    test_rank_counts();
    test_reuse_plan();
    test_tiles();
    test_cooperative();
    return test_finish("capi_arrays");
}
