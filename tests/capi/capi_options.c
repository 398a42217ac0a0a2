/* C API: the save and load options beyond the basics.
 *  - the layout chosen explicitly (a container under a name without ".h5", a
 *    per-rank directory under one with it), read back with the explicit
 *    layout and with the automatic one;
 *  - checksums: a flipped bit fails a verified load with CAIRN_ERR_INTEGRITY
 *    naming the array, a load with verification off returns the damaged
 *    value, and a checkpoint saved without checksums loads it unchecked;
 *  - async save with bounded staging: the caller changes its data once
 *    staged, the checkpoint holds the old values;
 *  - the container settings (MPI-IO hints, file locking, independent
 *    transfers, collective metadata, metadata cache) and the per-rank
 *    layout's MPI-IO hints in round trips, on save and load options alike,
 *    and invalid values refused by name;
 *  - progress callbacks: the phases of a save and a load with this rank's
 *    bytes, and a nonzero return cancelling a save (the old checkpoint
 *    stays) or a load on every rank;
 *  - cairn_verify: intact checkpoints of both layouts, a flipped bit
 *    (CAIRN_ERR_INTEGRITY naming array and file), a checkpoint without
 *    checksums, none at all;
 *  - cairn_set_log_level: the phase lines on stderr, and none when off; with
 *    debug, each per-rank file's MPI-IO hints as MPI reports them. */
#include "common.h"

#include <unistd.h>

enum { N = 1 << 16 }; /* doubles per rank: 512 KiB */

static double value(int64_t i, int version) { return 0.5 * (double)i + 1000.0 * (double)version; }

/* This rank's block of the global vector "x" (N per rank). */
typedef struct {
    double* x;
    cairn_state_t* state;
} Vec;

static void vec_init(Vec* v, int version)
{
    const int64_t g = (int64_t)N * test_size, o = (int64_t)N * test_rank, s = N;
    int64_t i;
    v->x = (double*)malloc(N * sizeof(double));
    if (!v->x)
        FAIL_AT("out of memory");
    for (i = 0; i < N; ++i)
        v->x[i] = version < 0 ? -1.0 : value(o + i, version);
    CHECK_OK(cairn_state_create(&v->state));
    CHECK_OK(cairn_state_add_array(v->state, "x", CAIRN_F64, 1, &g, &o, &s, v->x, NULL));
}

static void vec_free(Vec* v)
{
    CHECK_OK(cairn_state_free(&v->state));
    free(v->x);
}

/* Elements of `v` that differ from `version`'s values, summed over the ranks. */
static long vec_wrong(const Vec* v, int version)
{
    const int64_t o = (int64_t)N * test_rank;
    long wrong = 0, total = 0;
    int64_t i;
    for (i = 0; i < N; ++i)
        wrong += v->x[i] != value(o + i, version);
    MPI_Allreduce(&wrong, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    return total;
}

/* The layout string of the committed checkpoint `id` ("distcp", "container"). */
static void check_layout(const char* id, const char* want)
{
    cairn_metadata_t* md = NULL;
    const char* layout = NULL;
    CHECK_OK(cairn_metadata_read(id, &md));
    CHECK_OK(cairn_metadata_strings(md, NULL, &layout, NULL));
    CHECK(strcmp(layout, want) == 0);
    CHECK_OK(cairn_metadata_free(&md));
}

/* XORs the byte in the middle of `file` with 0x10 (rank 0 only). */
static void flip_middle(const char* file)
{
    if (test_rank == 0) {
        struct stat sb;
        FILE* f;
        long at;
        int c;
        CHECK(stat(file, &sb) == 0);
        at = (long)(sb.st_size / 2);
        f = fopen(file, "r+b");
        CHECK(f != NULL);
        CHECK(fseek(f, at, SEEK_SET) == 0);
        c = fgetc(f);
        CHECK(c != EOF);
        CHECK(fseek(f, at, SEEK_SET) == 0);
        CHECK(fputc(c ^ 0x10, f) != EOF);
        CHECK(fclose(f) == 0);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

static void layouts(void)
{
    char a[4200], b[4200];
    Vec v, back;
    cairn_save_options_t* so = NULL;
    cairn_load_options_t* lo = NULL;
    vec_init(&v, 1);
    CHECK_OK(cairn_save_options_create(&so));
    CHECK_OK(cairn_load_options_create(&lo));

    /* A container under a name without ".h5": one regular file. */
    CHECK_OK(cairn_save_options_set_layout(so, CAIRN_LAYOUT_CONTAINER));
    test_path(a, sizeof a, "container_ckpt");
    CHECK_OK(cairn_save(v.state, a, MPI_COMM_WORLD, so, NULL));
    CHECK(path_is(a, 0));
    check_layout(a, "container");
    /* A per-rank directory under a name ending in ".h5". */
    CHECK_OK(cairn_save_options_set_layout(so, CAIRN_LAYOUT_PER_RANK));
    test_path(b, sizeof b, "per_rank.h5");
    CHECK_OK(cairn_save(v.state, b, MPI_COMM_WORLD, so, NULL));
    CHECK(path_is(b, 1));
    check_layout(b, "distcp");

    /* Read back: automatically (a regular file is a container, a directory
     * per-rank), and with the layout named. */
    vec_init(&back, -1);
    CHECK_OK(cairn_load(back.state, a, MPI_COMM_WORLD, NULL, NULL));
    CHECK(vec_wrong(&back, 1) == 0);
    vec_free(&back);
    vec_init(&back, -1);
    CHECK_OK(cairn_load_options_set_layout(lo, CAIRN_LAYOUT_PER_RANK));
    CHECK_OK(cairn_load(back.state, b, MPI_COMM_WORLD, lo, NULL));
    CHECK(vec_wrong(&back, 1) == 0);
    vec_free(&back);
    vec_init(&back, -1);
    CHECK_OK(cairn_load_options_set_layout(lo, CAIRN_LAYOUT_AUTOMATIC));
    CHECK_OK(cairn_load(back.state, b, MPI_COMM_WORLD, lo, NULL));
    CHECK(vec_wrong(&back, 1) == 0);
    vec_free(&back);
    /* The container read as a per-rank checkpoint: refused, nothing loaded. */
    vec_init(&back, -1);
    CHECK_OK(cairn_load_options_set_layout(lo, CAIRN_LAYOUT_PER_RANK));
    CHECK(cairn_load(back.state, a, MPI_COMM_WORLD, lo, NULL) != CAIRN_SUCCESS);
    check_same_message(MPI_COMM_WORLD, cairn_last_error());
    vec_free(&back);

    /* Invalid layouts, named. */
    CHECK_ERR(cairn_save_options_set_layout(so, 3), CAIRN_ERR_USAGE, "invalid layout 3");
    CHECK_ERR(cairn_load_options_set_layout(lo, -1), CAIRN_ERR_USAGE, "invalid layout -1");
    CHECK_ERR(cairn_save_options_set_layout(NULL, CAIRN_LAYOUT_CONTAINER), CAIRN_ERR_USAGE,
              "the options handle is NULL");
    CHECK_OK(cairn_save_options_free(&so));
    CHECK_OK(cairn_load_options_free(&lo));
    vec_free(&v);
}

static void checksums(void)
{
    char id[4200], file[4300], plain[4200], plain_file[4300];
    Vec v, back;
    cairn_save_options_t* so = NULL;
    cairn_load_options_t* lo = NULL;
    vec_init(&v, 2);
    CHECK_OK(cairn_save_options_create(&so));
    CHECK_OK(cairn_save_options_set_checksum_block(so, 4096));
    test_path(id, sizeof id, "checked");
    CHECK_OK(cairn_save(v.state, id, MPI_COMM_WORLD, so, NULL));
    snprintf(file, sizeof file, "%s/__0_0.distcp", id);
    flip_middle(file);

    /* Verified (the default): refused on every rank, naming the array. */
    vec_init(&back, -1);
    CHECK_ERR(cairn_load(back.state, id, MPI_COMM_WORLD, NULL, NULL), CAIRN_ERR_INTEGRITY, "'x'");
    check_same_message(MPI_COMM_WORLD, cairn_last_error());
    vec_free(&back);
    /* Not verified: loads, one element damaged (on rank 0's block). */
    vec_init(&back, -1);
    CHECK_OK(cairn_load_options_create(&lo));
    CHECK_OK(cairn_load_options_set_verify_checksums(lo, 0));
    CHECK_OK(cairn_load(back.state, id, MPI_COMM_WORLD, lo, NULL));
    CHECK(vec_wrong(&back, 2) == 1);
    vec_free(&back);
    /* Verification on again: refused again. */
    vec_init(&back, -1);
    CHECK_OK(cairn_load_options_set_verify_checksums(lo, 1));
    CHECK_ERR(cairn_load(back.state, id, MPI_COMM_WORLD, lo, NULL), CAIRN_ERR_INTEGRITY, "checksum mismatch in 'x'");
    vec_free(&back);

    /* Saved without checksums: the damage goes unnoticed, as documented. */
    CHECK_OK(cairn_save_options_set_checksum_block(so, 0));
    test_path(plain, sizeof plain, "unchecked");
    CHECK_OK(cairn_save(v.state, plain, MPI_COMM_WORLD, so, NULL));
    snprintf(plain_file, sizeof plain_file, "%s/__0_0.distcp", plain);
    flip_middle(plain_file);
    vec_init(&back, -1);
    CHECK_OK(cairn_load(back.state, plain, MPI_COMM_WORLD, NULL, NULL));
    CHECK(vec_wrong(&back, 2) == 1);
    vec_free(&back);
    CHECK_OK(cairn_save_options_free(&so));
    CHECK_OK(cairn_load_options_free(&lo));
    vec_free(&v);
}

static void bounded_async(void)
{
    char id[4200];
    Vec v, back;
    int64_t i;
    cairn_save_options_t* so = NULL;
    cairn_async_save_t* h = NULL;
    vec_init(&v, 3);
    CHECK_OK(cairn_save_options_create(&so));
    CHECK_OK(cairn_save_options_set_async_staging(so, CAIRN_ASYNC_STAGING_BOUNDED));
    CHECK_OK(cairn_save_options_set_staging_bytes(so, 64 * 1024)); /* several pieces per rank */
    test_path(id, sizeof id, "bounded");
    CHECK_OK(cairn_async_save(v.state, id, MPI_COMM_WORLD, so, &h));
    CHECK_OK(cairn_async_wait_staged(h));
    for (i = 0; i < N; ++i) /* the caller's next step */
        v.x[i] = -2.0;
    CHECK_OK(cairn_async_wait_committed(h, NULL));
    CHECK_OK(cairn_async_free(&h));
    vec_init(&back, -1);
    CHECK_OK(cairn_load(back.state, id, MPI_COMM_WORLD, NULL, NULL));
    CHECK(vec_wrong(&back, 3) == 0);
    vec_free(&back);
    CHECK_ERR(cairn_save_options_set_async_staging(so, 2), CAIRN_ERR_USAGE, "invalid async staging 2");
    CHECK_OK(cairn_save_options_free(&so));
    vec_free(&v);
}

/* Saves `v` (version 4) as `name` with `so` (a directory when `dir`), loads it
 * back with `lo` and checks every value; frees both options. */
static void tuned_round_trip(Vec* v, const char* name, int dir, cairn_save_options_t** so, cairn_load_options_t** lo)
{
    char id[4200];
    Vec back;
    test_path(id, sizeof id, name);
    CHECK_OK(cairn_save(v->state, id, MPI_COMM_WORLD, *so, NULL));
    CHECK(path_is(id, dir));
    vec_init(&back, -1);
    CHECK_OK(cairn_load(back.state, id, MPI_COMM_WORLD, *lo, NULL));
    CHECK(vec_wrong(&back, 4) == 0);
    vec_free(&back);
    CHECK_OK(cairn_save_options_free(so));
    CHECK_OK(cairn_load_options_free(lo));
}

static void container_settings(void)
{
    char id[4200], long_key[512], long_value[MPI_MAX_INFO_VAL + 16];
    Vec v;
    int collective;
    cairn_save_options_t* so = NULL;
    cairn_load_options_t* lo = NULL;
    vec_init(&v, 4);
    for (collective = 1; collective >= 0; --collective) {
        CHECK_OK(cairn_save_options_create(&so));
        CHECK_OK(cairn_load_options_create(&lo));
        CHECK_OK(cairn_save_options_set_container_hint(so, "romio_cb_write", "enable"));
        CHECK_OK(cairn_save_options_set_container_hint(so, "cb_buffer_size", "1048576"));
        CHECK_OK(cairn_save_options_set_container_hint(so, "cairn_unknown_hint", "1"));
        CHECK_OK(cairn_save_options_set_container_hint(so, "cairn_unknown_hint", "2")); /* replaced */
        CHECK_OK(cairn_save_options_set_container_hint(so, "cb_buffer_size", NULL));      /* removed */
        CHECK_OK(cairn_save_options_set_container_hint(so, "no_such_hint", NULL));        /* nothing to remove */
        CHECK_OK(cairn_save_options_set_container_file_locking(so, CAIRN_FILE_LOCKING_OFF));
        CHECK_OK(cairn_save_options_set_container_independent_below(so, collective ? 0 : (size_t)1 << 20));
        CHECK_OK(cairn_save_options_set_container_collective_metadata(so, collective));
        CHECK_OK(cairn_save_options_set_container_metadata_cache_bytes(so, (size_t)8 << 20));
        CHECK_OK(cairn_load_options_set_container_hint(lo, "romio_cb_read", "enable"));
        CHECK_OK(cairn_load_options_set_container_file_locking(lo, CAIRN_FILE_LOCKING_OFF));
        CHECK_OK(cairn_load_options_set_container_independent_below(lo, collective ? 0 : (size_t)1 << 20));
        CHECK_OK(cairn_load_options_set_container_collective_metadata(lo, collective));
        CHECK_OK(cairn_load_options_set_container_metadata_cache_bytes(lo, (size_t)8 << 20));
        tuned_round_trip(&v, collective ? "tuned_collective.h5" : "tuned_independent.h5", 0, &so, &lo);
    }

    /* The per-rank layout's hints, set, replaced and removed alike. */
    CHECK_OK(cairn_save_options_create(&so));
    CHECK_OK(cairn_load_options_create(&lo));
    CHECK_OK(cairn_save_options_set_per_rank_hint(so, "cb_buffer_size", "1048576"));
    CHECK_OK(cairn_save_options_set_per_rank_hint(so, "cb_buffer_size", "2097152")); /* replaced */
    CHECK_OK(cairn_save_options_set_per_rank_hint(so, "cairn_unknown_hint", "1"));
    CHECK_OK(cairn_save_options_set_per_rank_hint(so, "cairn_unknown_hint", NULL)); /* removed */
    CHECK_OK(cairn_load_options_set_per_rank_hint(lo, "romio_ds_read", "disable"));
    tuned_round_trip(&v, "tuned_per_rank", 1, &so, &lo);

    /* Refused by name when set, before any save. */
    CHECK_OK(cairn_save_options_create(&so));
    CHECK_OK(cairn_load_options_create(&lo));
    /* Longer than any MPI's MPI_MAX_INFO_KEY (Open MPI 36, MPICH 255) and than
     * this MPI's MPI_MAX_INFO_VAL (Open MPI 256, MPICH 1024). */
    memset(long_key, 'k', sizeof long_key - 1);
    long_key[sizeof long_key - 1] = '\0';
    memset(long_value, 'v', sizeof long_value - 1);
    long_value[sizeof long_value - 1] = '\0';
    CHECK_ERR(cairn_save_options_set_container_hint(so, long_key, "1"), CAIRN_ERR_USAGE, "MPI-IO hint 'kkkk");
    CHECK_ERR(cairn_load_options_set_container_hint(lo, "cb_nodes", long_value), CAIRN_ERR_USAGE,
              "MPI-IO hint 'cb_nodes'");
    CHECK_ERR(cairn_save_options_set_container_hint(so, "", "1"), CAIRN_ERR_USAGE, "the key is NULL or empty");
    CHECK_ERR(cairn_load_options_set_container_hint(lo, NULL, "1"), CAIRN_ERR_USAGE, "the key is NULL or empty");
    CHECK_ERR(cairn_save_options_set_per_rank_hint(so, long_key, "1"), CAIRN_ERR_USAGE, "MPI-IO hint 'kkkk");
    CHECK_ERR(cairn_load_options_set_per_rank_hint(lo, "striping_factor", long_value), CAIRN_ERR_USAGE,
              "MPI-IO hint 'striping_factor'");
    CHECK_ERR(cairn_save_options_set_per_rank_hint(so, NULL, "1"), CAIRN_ERR_USAGE, "the key is NULL or empty");
    CHECK_ERR(cairn_load_options_set_per_rank_hint(NULL, "cb_nodes", "1"), CAIRN_ERR_USAGE,
              "the options handle is NULL");
    CHECK_ERR(cairn_save_options_set_container_file_locking(so, 7), CAIRN_ERR_USAGE, "invalid file locking 7");
    CHECK_ERR(cairn_load_options_set_container_file_locking(lo, -3), CAIRN_ERR_USAGE, "invalid file locking -3");
    CHECK_ERR(cairn_load_options_set_container_collective_metadata(NULL, 1), CAIRN_ERR_USAGE,
              "the options handle is NULL");
    /* The refused hints were not kept: these options still save. */
    test_path(id, sizeof id, "after_refusals.h5");
    CHECK_OK(cairn_save(v.state, id, MPI_COMM_WORLD, so, NULL));
    CHECK_OK(cairn_save_options_free(&so));
    CHECK_OK(cairn_load_options_free(&lo));
    vec_free(&v);
}

/* What a progress callback saw on this rank, by phase. */
typedef struct {
    int calls[8];
    uint64_t last_done[8], total[8];
    int backwards;  /* `done` decreased within a phase */
    int cancel_in;  /* return nonzero in this phase (-1: never) */
} Seen;

static int record(int phase, uint64_t done, uint64_t total, void* user)
{
    Seen* s = (Seen*)user;
    if (phase < 0 || phase > 7)
        return 99;
    if (s->calls[phase] > 0 && done < s->last_done[phase])
        s->backwards = 1;
    ++s->calls[phase];
    s->last_done[phase] = done;
    s->total[phase] = total;
    return phase == s->cancel_in ? 7 : 0;
}

static void progress(void)
{
    char id[4200];
    Vec v, back;
    Seen seen;
    int layout;
    cairn_save_options_t* so = NULL;
    cairn_load_options_t* lo = NULL;
    for (layout = CAIRN_LAYOUT_PER_RANK; layout <= CAIRN_LAYOUT_CONTAINER; ++layout) {
        vec_init(&v, 5);
        CHECK_OK(cairn_save_options_create(&so));
        CHECK_OK(cairn_load_options_create(&lo));
        CHECK_OK(cairn_save_options_set_layout(so, layout));
        CHECK_OK(cairn_save_options_set_overwrite(so, 1));
        CHECK_OK(cairn_load_options_set_layout(lo, layout));
        test_path(id, sizeof id, layout == CAIRN_LAYOUT_CONTAINER ? "progress_c" : "progress_r");

        /* Every phase of a save, ending with all of this rank's bytes written. */
        memset(&seen, 0, sizeof seen);
        seen.cancel_in = -1;
        CHECK_OK(cairn_save_options_set_progress(so, record, &seen));
        CHECK_OK(cairn_save(v.state, id, MPI_COMM_WORLD, so, NULL));
        CHECK(seen.calls[CAIRN_PHASE_PLAN] >= 2 && seen.calls[CAIRN_PHASE_EXCHANGE] >= 2);
        CHECK(seen.calls[CAIRN_PHASE_WRITE] >= 2 && seen.calls[CAIRN_PHASE_COMMIT] >= 2);
        CHECK(seen.calls[CAIRN_PHASE_READ] == 0);
        CHECK(seen.total[CAIRN_PHASE_WRITE] == N * sizeof(double));
        CHECK(seen.last_done[CAIRN_PHASE_WRITE] == seen.total[CAIRN_PHASE_WRITE]);
        CHECK(!seen.backwards);

        /* A load: plan and read, all of this rank's bytes read. */
        memset(&seen, 0, sizeof seen);
        seen.cancel_in = -1;
        CHECK_OK(cairn_load_options_set_progress(lo, record, &seen));
        vec_init(&back, -1);
        CHECK_OK(cairn_load(back.state, id, MPI_COMM_WORLD, lo, NULL));
        CHECK(vec_wrong(&back, 5) == 0);
        vec_free(&back);
        CHECK(seen.calls[CAIRN_PHASE_PLAN] >= 2 && seen.calls[CAIRN_PHASE_READ] >= 2);
        CHECK(seen.calls[CAIRN_PHASE_WRITE] == 0);
        CHECK(seen.total[CAIRN_PHASE_READ] == N * sizeof(double));
        CHECK(seen.last_done[CAIRN_PHASE_READ] == seen.total[CAIRN_PHASE_READ]);
        CHECK(!seen.backwards);

        /* Cancelled by the last rank while writing a new version over it: the
         * save fails on every rank, naming the callback, and the checkpoint
         * keeps the old values. */
        vec_free(&v);
        vec_init(&v, 6);
        memset(&seen, 0, sizeof seen);
        seen.cancel_in = test_rank == test_size - 1 ? CAIRN_PHASE_WRITE : -1;
        CHECK_ERR(cairn_save(v.state, id, MPI_COMM_WORLD, so, NULL), CAIRN_ERR_OTHER,
                  "progress callback returned 7 in phase 'write'");
        check_same_message(MPI_COMM_WORLD, cairn_last_error());
        CHECK_OK(cairn_load_options_set_progress(lo, NULL, NULL)); /* none */
        vec_init(&back, -1);
        CHECK_OK(cairn_load(back.state, id, MPI_COMM_WORLD, lo, NULL));
        CHECK(vec_wrong(&back, 5) == 0);
        vec_free(&back);

        /* Cancelling a load: every rank fails. */
        memset(&seen, 0, sizeof seen);
        seen.cancel_in = test_rank == 0 ? CAIRN_PHASE_READ : -1;
        CHECK_OK(cairn_load_options_set_progress(lo, record, &seen));
        vec_init(&back, -1);
        CHECK_ERR(cairn_load(back.state, id, MPI_COMM_WORLD, lo, NULL), CAIRN_ERR_OTHER,
                  "progress callback returned 7 in phase 'read'");
        vec_free(&back);
        CHECK_OK(cairn_save_options_free(&so));
        CHECK_OK(cairn_load_options_free(&lo));
        vec_free(&v);
    }
}

/* Runs a save of `v` as `id` with stderr going to `file`, with the per-rank
 * MPI-IO hint `hint` = `value` when `hint` is not NULL; returns 1 when what it
 * printed holds `text`. */
static int save_prints(Vec* v, const char* id, const char* file, const char* text, const char* hint,
                       const char* value)
{
    char buf[8192];
    size_t n;
    FILE* f;
    int saved;
    cairn_save_options_t* so = NULL;
    CHECK_OK(cairn_save_options_create(&so));
    CHECK_OK(cairn_save_options_set_overwrite(so, 1));
    if (hint)
        CHECK_OK(cairn_save_options_set_per_rank_hint(so, hint, value));
    fflush(stderr);
    saved = dup(2);
    f = fopen(file, "w");
    CHECK(f != NULL && saved >= 0);
    dup2(fileno(f), 2);
    CHECK_OK(cairn_save(v->state, id, MPI_COMM_WORLD, so, NULL));
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    fclose(f);
    CHECK_OK(cairn_save_options_free(&so));
    f = fopen(file, "r");
    CHECK(f != NULL);
    n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return strstr(buf, text) != NULL;
}

/* cairn_set_log_level: rank 0 prints the phases with INFO, nothing with OFF. */
static void log_level(void)
{
    char id[4200], file[4300];
    Vec v;
    vec_init(&v, 7);
    test_path(id, sizeof id, "logged");
    snprintf(file, sizeof file, "%s.stderr.%d", id, test_rank);
    CHECK_OK(cairn_set_log_level(CAIRN_LOG_INFO));
    CHECK(save_prints(&v, id, file, "cairn: save '", NULL, NULL) == (test_rank == 0));
    CHECK(!save_prints(&v, id, file, "MPI-IO hints", "cb_buffer_size", "2097152")); /* debug only */
    CHECK_OK(cairn_set_log_level(CAIRN_LOG_DEBUG));
    CHECK(save_prints(&v, id, file, "cairn: [rank ", NULL, NULL));
    CHECK(!save_prints(&v, id, file, "MPI-IO hints", NULL, NULL));
    /* Each rank's file, with what MPI reports for the hint (cb_buffer_size:
     * reported by Open MPI's components and by ROMIO alike). */
    CHECK(save_prints(&v, id, file, "_0.distcp: MPI-IO hints: cb_buffer_size=2097152\n", "cb_buffer_size", "2097152"));
    CHECK_OK(cairn_set_log_level(CAIRN_LOG_OFF));
    CHECK(!save_prints(&v, id, file, "cairn:", NULL, NULL));
    CHECK_ERR(cairn_set_log_level(3), CAIRN_ERR_USAGE, "invalid log level 3");
    vec_free(&v);
}

/* cairn_verify of the checkpoints the other cases left. */
static void verify_checkpoints(void)
{
    char id[4200];
    cairn_verify_result_t r;
    /* Intact, both layouts (a container saved with tuned settings). */
    memset(&r, 0xff, sizeof r);
    CHECK_OK(cairn_verify(test_path(id, sizeof id, "per_rank.h5"), MPI_COMM_WORLD, NULL, &r));
    CHECK(r.problems == 0 && r.checksums == 1 && r.chunks == (uint64_t)test_size);
    CHECK(r.bytes == (uint64_t)N * sizeof(double) * (uint64_t)test_size);
    CHECK_OK(cairn_verify(test_path(id, sizeof id, "tuned_collective.h5"), MPI_COMM_WORLD, NULL, &r));
    CHECK(r.problems == 0 && r.checksums == 1);
    /* A flipped bit (checksums): refused on every rank, naming array and file. */
    memset(&r, 0, sizeof r);
    CHECK_ERR(cairn_verify(test_path(id, sizeof id, "checked"), MPI_COMM_WORLD, NULL, &r), CAIRN_ERR_INTEGRITY,
              "1 damaged chunk:");
    CHECK(strstr(cairn_last_error(), "'x'") && strstr(cairn_last_error(), "__0_0.distcp"));
    check_same_message(MPI_COMM_WORLD, cairn_last_error());
    CHECK(r.problems == 1 && r.checksums == 1);
    /* Without checksums the same damage cannot be seen: read, reported as such. */
    CHECK_OK(cairn_verify(test_path(id, sizeof id, "unchecked"), MPI_COMM_WORLD, NULL, &r));
    CHECK(r.problems == 0 && r.checksums == 0);
    /* No checkpoint, no id. */
    CHECK_ERR(cairn_verify(test_path(id, sizeof id, "nothing_here"), MPI_COMM_WORLD, NULL, NULL), CAIRN_ERR_NOT_FOUND,
              "nothing_here");
    CHECK_ERR(cairn_verify(NULL, MPI_COMM_WORLD, NULL, NULL), CAIRN_ERR_USAGE, "the checkpoint id is NULL");
}

int main(int argc, char** argv)
{
    test_init_thread(&argc, &argv, MPI_THREAD_MULTIPLE);
    layouts();
    checksums();
    bounded_async();
    container_settings();
    progress();
    verify_checkpoints();
    log_level();
    return test_finish("capi_options");
}
