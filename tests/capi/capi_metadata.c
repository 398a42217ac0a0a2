/* C API: save and load options (overwrite, files per rank, grouped data
 * files, alignment, staging, fsync), partial loads with their missing and skipped keys, the
 * keys a checkpoint may lack (cairn_load_options_add_may_be_missing), and
 * the metadata of a committed checkpoint. */
#include "common.h"

enum { N = 1000 };

int main(int argc, char** argv)
{
    char path[4200], name[4200];
    cairn_state_t* st = NULL;
    cairn_save_options_t* so = NULL;
    cairn_load_options_t* lo = NULL;
    double* a = NULL;
    int64_t g[1] = {N}, o[1], s[1], step = 12, k;
    char label[16] = "label";
    int run;

    test_init(&argc, &argv);
    test_path(path, sizeof path, "ckpt");
    block(N, test_size, test_rank, &o[0], &s[0]);
    a = (double*)malloc(N * sizeof(double));

    /* Save twice into the same path with overwrite, with several options; the
     * second checkpoint replaces the first. */
    CHECK_OK(cairn_save_options_create(&so));
    CHECK_OK(cairn_save_options_set_overwrite(so, 1));
    CHECK_OK(cairn_save_options_set_files_per_rank(so, 2));
    CHECK_OK(cairn_save_options_set_data_files(so, 1)); /* all ranks into one group: 2 files in all */
    CHECK_OK(cairn_save_options_set_alignment(so, 512));
    CHECK_OK(cairn_save_options_set_staging_bytes(so, 4096));
    CHECK_OK(cairn_save_options_set_writeback_bytes(so, 1 << 20));
    for (run = 0; run < 2; ++run) {
        cairn_save_result_t r;
        CHECK_OK(cairn_save_options_set_fsync(so, run)); /* the second durable, with early writeback */
        for (k = 0; k < s[0]; ++k)
            a[k] = (double)(o[0] + k) + 0.25 * run;
        step = 12 + run;
        CHECK_OK(cairn_state_create(&st));
        CHECK_OK(cairn_state_add_array(st, "a", CAIRN_F64, 1, g, o, s, a, NULL));
        CHECK_OK(cairn_state_add_scalar(st, "step", CAIRN_I64, &step));
        CHECK_OK(cairn_state_add_string(st, "label", label, sizeof label));
        CHECK_OK(cairn_save(st, path, MPI_COMM_WORLD, so, &r));
        CHECK(r.bytes_written == N * 8 && r.entries == 3);
        CHECK_OK(cairn_state_free(&st));
    }
    CHECK_OK(cairn_save_options_free(&so));
    {
        char file[4300];
        /* One group of every rank wrote file 0 (docs/FORMAT.md names); with one
         * array item per rank, file 1 of the group holds nothing and is not
         * written. */
        for (k = 0; k < 2; ++k) {
            if (test_size == 1)
                snprintf(file, sizeof file, "%s/__0_%d.distcp", path, (int)k);
            else
                snprintf(file, sizeof file, "%s/__0-%d_%d.distcp", path, test_size - 1, (int)k);
            CHECK(path_is(file, 0) == (k == 0));
        }
        if (test_size > 1) {
            snprintf(file, sizeof file, "%s/__%d_0.distcp", path, test_size - 1);
            CHECK(!path_is(file, 0) && !path_is(file, 1));
        }
    }

    /* Partial load: the state lacks "label" and has "extra". */
    {
        int64_t extra = -1;
        cairn_load_result_t r;
        const char* nm = NULL;
        memset(a, 0, N * sizeof(double));
        step = 0;
        CHECK_OK(cairn_state_create(&st));
        CHECK_OK(cairn_state_add_array(st, "a", CAIRN_F64, 1, g, o, s, a, NULL));
        CHECK_OK(cairn_state_add_scalar(st, "step", CAIRN_I64, &step));
        CHECK_OK(cairn_state_add_scalar(st, "extra", CAIRN_I64, &extra));
        CHECK_ERR(cairn_load(st, path, MPI_COMM_WORLD, NULL, NULL), CAIRN_ERR_NOT_FOUND, "'extra'");
        CHECK_OK(cairn_load_options_create(&lo));
        CHECK_OK(cairn_load_options_set_partial(lo, 1));
        CHECK_OK(cairn_load_options_set_staging_bytes(lo, 4096));
        CHECK_OK(cairn_load(st, path, MPI_COMM_WORLD, lo, &r));
        CHECK(r.missing == 1 && r.skipped == 1);
        CHECK(r.bytes_read == (uint64_t)s[0] * 8);
        CHECK_OK(cairn_state_missing(st, 0, &nm));
        CHECK(strcmp(nm, "extra") == 0);
        CHECK_OK(cairn_state_skipped(st, 0, &nm));
        CHECK(strcmp(nm, "label") == 0);
        CHECK_ERR(cairn_state_missing(st, 1, &nm), CAIRN_ERR_USAGE, "index 1 is out of range");
        CHECK(extra == -1 && step == 13);
        for (k = 0; k < s[0]; ++k)
            CHECK(a[k] == (double)(o[0] + k) + 0.25);
        CHECK_OK(cairn_load_options_free(&lo));
        CHECK_OK(cairn_state_free(&st));
    }

    /* Keys the checkpoint may lack, named: "extra" may be missing; with
     * partial, a misspelt key ("stpe") is refused with a suggestion. */
    {
        int64_t extra = -1, stpe = -1;
        char label_back[16] = "";
        cairn_load_result_t r;
        const char* nm = NULL;
        step = 0;
        CHECK_OK(cairn_state_create(&st));
        CHECK_OK(cairn_state_add_array(st, "a", CAIRN_F64, 1, g, o, s, a, NULL));
        CHECK_OK(cairn_state_add_scalar(st, "step", CAIRN_I64, &step));
        CHECK_OK(cairn_state_add_string(st, "label", label_back, sizeof label_back));
        CHECK_OK(cairn_state_add_scalar(st, "extra", CAIRN_I64, &extra));
        CHECK_OK(cairn_load_options_create(&lo));
        CHECK_ERR(cairn_load_options_add_may_be_missing(lo, NULL), CAIRN_ERR_USAGE, "the key is NULL or empty");
        CHECK_OK(cairn_load_options_add_may_be_missing(lo, "extra"));
        CHECK_OK(cairn_load(st, path, MPI_COMM_WORLD, lo, &r));
        CHECK(r.missing == 1 && r.skipped == 0 && extra == -1 && step == 13);
        CHECK_OK(cairn_state_missing(st, 0, &nm));
        CHECK(strcmp(nm, "extra") == 0);
        CHECK_OK(cairn_state_free(&st));
        CHECK_OK(cairn_state_create(&st));
        CHECK_OK(cairn_state_add_array(st, "a", CAIRN_F64, 1, g, o, s, a, NULL));
        CHECK_OK(cairn_state_add_scalar(st, "stpe", CAIRN_I64, &stpe));
        CHECK_OK(cairn_load_options_set_partial(lo, 1));
        CHECK_ERR(cairn_load(st, path, MPI_COMM_WORLD, lo, NULL), CAIRN_ERR_NOT_FOUND, "did you mean 'step'");
        CHECK(stpe == -1);
        CHECK_OK(cairn_load_options_free(&lo));
        CHECK_OK(cairn_state_free(&st));
    }

    /* Metadata, read on every rank (a local call). */
    {
        cairn_metadata_t* md = NULL;
        int fv = 0, ws = 0, kind = -1, dtype = -1, ndim = -1;
        size_t n = 0, idx = 99, sz = 0;
        const char *lib = NULL, *layout = NULL, *created = NULL, *nm = NULL;
        const void* val = NULL;
        int64_t shape[1] = {0};
        CHECK_OK(cairn_metadata_read(path, &md));
        CHECK_OK(cairn_metadata_info(md, &fv, &ws, &n));
        CHECK(fv >= 1 && ws == test_size && n == 3);
        CHECK_OK(cairn_metadata_info(md, NULL, NULL, NULL));
        CHECK_OK(cairn_metadata_strings(md, &lib, &layout, &created));
        CHECK(strcmp(lib, cairn_version()) == 0);
        CHECK(strlen(layout) > 0 && strlen(created) >= 20);
        /* entries sorted by name: a, label, step */
        CHECK_OK(cairn_metadata_entry(md, 0, &nm, &kind, &dtype, &ndim));
        CHECK(strcmp(nm, "a") == 0 && kind == CAIRN_KIND_ARRAY && dtype == CAIRN_F64 && ndim == 1);
        CHECK_OK(cairn_metadata_entry_shape(md, 0, shape));
        CHECK(shape[0] == N);
        CHECK_OK(cairn_metadata_entry(md, 1, &nm, &kind, NULL, &ndim));
        CHECK(strcmp(nm, "label") == 0 && kind == CAIRN_KIND_STRING && ndim == 0);
        CHECK_OK(cairn_metadata_entry_value(md, 1, &val, &sz));
        CHECK(sz == 5 && memcmp(val, "label", 5) == 0);
        CHECK_OK(cairn_metadata_find(md, "step", &idx));
        CHECK(idx == 2);
        CHECK_OK(cairn_metadata_entry(md, idx, NULL, &kind, &dtype, NULL));
        CHECK(kind == CAIRN_KIND_SCALAR && dtype == CAIRN_I64);
        CHECK_OK(cairn_metadata_entry_value(md, idx, &val, &sz));
        CHECK(sz == 8);
        memcpy(&step, val, 8);
        CHECK(step == 13);
        CHECK_ERR(cairn_metadata_find(md, "nope", &idx), CAIRN_ERR_NOT_FOUND, "entry 'nope' is not in the checkpoint");
        CHECK_ERR(cairn_metadata_entry(md, 3, &nm, NULL, NULL, NULL), CAIRN_ERR_USAGE, "entry index 3 is out of range");
        CHECK_ERR(cairn_metadata_entry_value(md, 0, &val, &sz), CAIRN_ERR_USAGE, "entry 'a' is array");
        CHECK_OK(cairn_metadata_free(&md));
        CHECK(md == NULL);
        CHECK_OK(cairn_metadata_free(&md));
        snprintf(name, sizeof name, "%s/none", test_dir_path);
        CHECK_ERR(cairn_metadata_read(name, &md), CAIRN_ERR_NOT_FOUND, "no checkpoint");
        CHECK(md == NULL);
    }

    free(a);
    return test_finish("capi_metadata");
}
