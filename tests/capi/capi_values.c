/* C API: scalars of every dtype, strings and byte blobs: round trip, sizes
 * reported on load, capacity errors agreed between the ranks. */
#include "common.h"

#include <stdbool.h>

/* The Fortran module's helper (src/capi/cairn_fortran.h, private but in
 * libcairn): a blank-padded string; a zero-length Fortran string comes as a
 * NULL buffer of capacity 0. */
int cairn_f_state_add_string(cairn_state_t* state, const char* name, size_t name_len, char* buffer, size_t len);

typedef struct {
    uint16_t f16, bf16;
    float f32;
    double f64;
    int8_t i8;
    int16_t i16;
    int32_t i32;
    int64_t i64;
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    uint64_t u64;
    bool b;
} Scalars;

static void add_scalars(cairn_state_t* st, Scalars* s)
{
    CHECK_OK(cairn_state_add_scalar(st, "s.f16", CAIRN_F16, &s->f16));
    CHECK_OK(cairn_state_add_scalar(st, "s.bf16", CAIRN_BF16, &s->bf16));
    CHECK_OK(cairn_state_add_scalar(st, "s.f32", CAIRN_F32, &s->f32));
    CHECK_OK(cairn_state_add_scalar(st, "s.f64", CAIRN_F64, &s->f64));
    CHECK_OK(cairn_state_add_scalar(st, "s.i8", CAIRN_I8, &s->i8));
    CHECK_OK(cairn_state_add_scalar(st, "s.i16", CAIRN_I16, &s->i16));
    CHECK_OK(cairn_state_add_scalar(st, "s.i32", CAIRN_I32, &s->i32));
    CHECK_OK(cairn_state_add_scalar(st, "s.i64", CAIRN_I64, &s->i64));
    CHECK_OK(cairn_state_add_scalar(st, "s.u8", CAIRN_U8, &s->u8));
    CHECK_OK(cairn_state_add_scalar(st, "s.u16", CAIRN_U16, &s->u16));
    CHECK_OK(cairn_state_add_scalar(st, "s.u32", CAIRN_U32, &s->u32));
    CHECK_OK(cairn_state_add_scalar(st, "s.u64", CAIRN_U64, &s->u64));
    CHECK_OK(cairn_state_add_scalar(st, "s.bool", CAIRN_BOOL, &s->b));
}

int main(int argc, char** argv)
{
    char path[4200], path2[4200];
    cairn_state_t* st = NULL;
    Scalars in, out;
    char title[32] = "heat 2-D, run #7", empty[4] = "", full[6] = {'a', 'b', 'c', 'd', 'e', 'f'} /* no NUL */;
    char title_back[32], empty_back[4], full_back[7], small[5];
    unsigned char blob[100], blob_back[100], tiny[3];
    unsigned char none_back[8];
    size_t blob_size = 37, blob_back_size = 0, none_size = 0, none_back_size = 99, tiny_size = 0;
    int k;

    test_init(&argc, &argv);
    test_path(path, sizeof path, "values");
    test_path(path2, sizeof path2, "values2");

    memset(&in, 0, sizeof in);
    in.f16 = 0x3c00;
    in.bf16 = 0x3f80;
    in.f32 = 1.5f;
    in.f64 = -2.25e300;
    in.i8 = -128;
    in.i16 = -32000;
    in.i32 = -2000000000;
    in.i64 = -9000000000000000000LL;
    in.u8 = 255;
    in.u16 = 65535;
    in.u32 = 4000000000u;
    in.u64 = 18000000000000000000ULL;
    in.b = true;
    for (k = 0; k < 100; ++k)
        blob[k] = (unsigned char)(k * 7 + 3);

    /* Save; the byte blobs and strings are replicated, the same on all ranks. */
    CHECK_OK(cairn_state_create(&st));
    add_scalars(st, &in);
    CHECK_OK(cairn_state_add_string(st, "title", title, sizeof title));
    CHECK_OK(cairn_state_add_string(st, "empty", empty, sizeof empty));
    CHECK_OK(cairn_state_add_string(st, "full", full, sizeof full));
    CHECK_OK(cairn_state_add_bytes(st, "blob", blob, sizeof blob, &blob_size));
    CHECK_OK(cairn_state_add_bytes(st, "none", NULL, 0, &none_size));
    CHECK_OK(cairn_save(st, path, MPI_COMM_WORLD, NULL, NULL));
    /* The copies are taken at each save: change a value and save again. */
    blob[0] = 99;
    strcpy(title, "second");
    CHECK_OK(cairn_save(st, path2, MPI_COMM_WORLD, NULL, NULL));
    CHECK_OK(cairn_state_free(&st));

    /* Load into fresh variables. */
    memset(&out, 0, sizeof out);
    memset(title_back, 'x', sizeof title_back);
    memset(empty_back, 'x', sizeof empty_back);
    memset(full_back, 'x', sizeof full_back);
    memset(blob_back, 0, sizeof blob_back);
    CHECK_OK(cairn_state_create(&st));
    add_scalars(st, &out);
    CHECK_OK(cairn_state_add_string(st, "title", title_back, sizeof title_back));
    CHECK_OK(cairn_state_add_string(st, "empty", empty_back, sizeof empty_back));
    CHECK_OK(cairn_state_add_string(st, "full", full_back, sizeof full_back));
    CHECK_OK(cairn_state_add_bytes(st, "blob", blob_back, sizeof blob_back, &blob_back_size));
    CHECK_OK(cairn_state_add_bytes(st, "none", none_back, sizeof none_back, &none_back_size));
    CHECK_OK(cairn_load(st, path, MPI_COMM_WORLD, NULL, NULL));
    CHECK(memcmp(&in.f16, &out.f16, 2) == 0 && out.bf16 == 0x3f80);
    CHECK(out.f32 == 1.5f && out.f64 == -2.25e300);
    CHECK(out.i8 == -128 && out.i16 == -32000 && out.i32 == -2000000000 && out.i64 == -9000000000000000000LL);
    CHECK(out.u8 == 255 && out.u16 == 65535 && out.u32 == 4000000000u && out.u64 == 18000000000000000000ULL);
    CHECK(out.b == true);
    CHECK(strcmp(title_back, "heat 2-D, run #7") == 0);
    CHECK(strcmp(empty_back, "") == 0);
    CHECK(strcmp(full_back, "abcdef") == 0); /* capacity 6 without NUL: all 6 stored */
    CHECK(blob_back_size == 37);
    CHECK(memcmp(blob_back, blob + 0, 1) != 0 && blob_back[0] == 3);
    for (k = 1; k < 37; ++k)
        CHECK(blob_back[k] == blob[k]);
    CHECK(blob_back[37] == 0);
    CHECK(none_back_size == 0);
    /* The second checkpoint has the changed values. */
    CHECK_OK(cairn_load(st, path2, MPI_COMM_WORLD, NULL, NULL));
    CHECK(strcmp(title_back, "second") == 0);
    CHECK(blob_back[0] == 99 && blob_back_size == 37);
    CHECK_OK(cairn_state_free(&st));

    /* A stored string that does not fit: CAIRN_ERR_USAGE on every rank. */
    CHECK_OK(cairn_state_create(&st));
    CHECK_OK(cairn_state_add_string(st, "title", small, sizeof small));
    {
        cairn_load_options_t* lo = NULL;
        CHECK_OK(cairn_load_options_create(&lo));
        CHECK_OK(cairn_load_options_set_partial(lo, 1));
        CHECK_ERR(cairn_load(st, path, MPI_COMM_WORLD, lo, NULL), CAIRN_ERR_USAGE,
                  "string 'title': the checkpoint holds 16 characters, the buffer has room for 4");
        check_same_message(MPI_COMM_WORLD, cairn_last_error());
        CHECK_OK(cairn_load_options_free(&lo));
    }
    CHECK_OK(cairn_state_free(&st));

    /* A stored blob that does not fit. */
    CHECK_OK(cairn_state_create(&st));
    CHECK_OK(cairn_state_add_bytes(st, "blob", tiny, sizeof tiny, &tiny_size));
    {
        cairn_load_options_t* lo = NULL;
        CHECK_OK(cairn_load_options_create(&lo));
        CHECK_OK(cairn_load_options_set_partial(lo, 1));
        CHECK_ERR(cairn_load(st, path, MPI_COMM_WORLD, lo, NULL), CAIRN_ERR_USAGE,
                  "bytes 'blob': the checkpoint holds 37 bytes, more than the capacity 3");
        check_same_message(MPI_COMM_WORLD, cairn_last_error());
        CHECK_OK(cairn_load_options_free(&lo));
    }
    CHECK_OK(cairn_state_free(&st));

    /* A size larger than the capacity on the last rank only: the save fails on
     * every rank, naming that rank. */
    {
        char expect[128];
        size_t sz = test_rank == test_size - 1 ? 4 : 3;
        CHECK_OK(cairn_state_create(&st));
        CHECK_OK(cairn_state_add_bytes(st, "blob", tiny, sizeof tiny, &sz));
        snprintf(expect, sizeof expect, "cairn_save: rank %d (arguments): bytes 'blob': size 4 is larger than its capacity 3",
                 test_size - 1);
        CHECK_ERR(cairn_save(st, test_path(path2, sizeof path2, "never"), MPI_COMM_WORLD, NULL, NULL), CAIRN_ERR_USAGE,
                  expect);
        check_same_message(MPI_COMM_WORLD, cairn_last_error());
        CHECK_OK(cairn_state_free(&st));
    }

    /* A zero-length Fortran string (NULL buffer, capacity 0): saved as "",
     * loaded back without touching the buffer (no memcpy/memset on NULL, not
     * even of 0 bytes: undefined behaviour that UBSan reports); a longer
     * stored string does not fit, on every rank. */
    {
        char empty_c[4] = "";
        cairn_state_t* st2 = NULL;
        test_path(path2, sizeof path2, "empty-fortran-string");
        CHECK_OK(cairn_state_create(&st));
        CHECK_OK(cairn_f_state_add_string(st, "nothing", 7, NULL, 0));
        CHECK_OK(cairn_save(st, path2, MPI_COMM_WORLD, NULL, NULL));
        CHECK_OK(cairn_load(st, path2, MPI_COMM_WORLD, NULL, NULL));
        CHECK_OK(cairn_state_free(&st));
        /* The stored value is "", loaded into a C buffer. */
        strcpy(empty_c, "xyz");
        CHECK_OK(cairn_state_create(&st2));
        CHECK_OK(cairn_state_add_string(st2, "nothing", empty_c, sizeof empty_c));
        CHECK_OK(cairn_load(st2, path2, MPI_COMM_WORLD, NULL, NULL));
        CHECK(strcmp(empty_c, "") == 0);
        CHECK_OK(cairn_state_free(&st2));
        /* A stored "title" of 16 characters into a zero-length Fortran string. */
        CHECK_OK(cairn_state_create(&st));
        CHECK_OK(cairn_f_state_add_string(st, "title", 5, NULL, 0));
        {
            cairn_load_options_t* lo = NULL;
            CHECK_OK(cairn_load_options_create(&lo));
            CHECK_OK(cairn_load_options_set_partial(lo, 1));
            CHECK_ERR(cairn_load(st, path, MPI_COMM_WORLD, lo, NULL), CAIRN_ERR_USAGE,
                      "string 'title': the checkpoint holds 16 characters, the buffer has room for 0");
            check_same_message(MPI_COMM_WORLD, cairn_last_error());
            CHECK_OK(cairn_load_options_free(&lo));
        }
        CHECK_OK(cairn_state_free(&st));
    }

    return test_finish("capi_values");
}
