/* C API: the node-local level of the checkpoint manager. Each rank its own
 * node (ranks_per_node 1) with its storage under <test dir>/node%n, partner
 * redundancy from 2 ranks on: steps saved node-locally, one drained into the
 * root with cairn_manager_flush, one node's directory wiped, then a new
 * manager restores the newest step from node-local storage, its files
 * rebuilt from the partner copies (cairn_manager_last_restore), values
 * intact; cairn_manager_levels says which levels hold each step. An async
 * manager's node-local save returns once staged and is committed in the
 * background. cairn_manager_flush without a node-local level is refused. */
#include "common.h"

enum { PER_RANK = 1000 };

static double value(int64_t i, int64_t step) { return 0.25 * (double)i + 1000.0 * (double)step; }

int main(int argc, char** argv)
{
    char root[4200], local[4200], wiped[4200], drained[4300];
    double* x;
    int64_t step = -1, i, offs[1], shape[1] = {PER_RANK}, gshape[1];
    int64_t drained_step = -5, got = -5;
    int started = -1, found = -1, level = -1, committed = -1, saved = -1;
    size_t rebuilt = 99;
    uint64_t moved = 0;
    cairn_state_t* st = NULL;
    cairn_manager_options_t* mo = NULL;
    cairn_manager_t* m = NULL;

    test_init_thread(&argc, &argv, MPI_THREAD_MULTIPLE); /* for the async manager */
    test_path(root, sizeof root, "run");
    test_path(local, sizeof local, "node%n");
    gshape[0] = (int64_t)PER_RANK * test_size;
    offs[0] = (int64_t)PER_RANK * test_rank;
    x = (double*)malloc(PER_RANK * sizeof(double));
    CHECK_OK(cairn_state_create(&st));
    CHECK_OK(cairn_state_add_array(st, "x", CAIRN_F64, 1, gshape, offs, shape, x, NULL));
    CHECK_OK(cairn_state_add_scalar(st, "step", CAIRN_I64, &step));

    CHECK_OK(cairn_manager_options_create(&mo));
    CHECK_OK(cairn_manager_options_set_local_dir(mo, local));
    CHECK_OK(cairn_manager_options_set_redundancy(mo, test_size > 1 ? "partner" : "none"));
    CHECK_OK(cairn_manager_options_set_flush_every(mo, 0));
    CHECK_OK(cairn_manager_options_set_local_keep_last(mo, 2));
    CHECK_OK(cairn_manager_options_set_ranks_per_node(mo, 1));
    CHECK_OK(cairn_manager_create(root, MPI_COMM_WORLD, mo, &m));
    CHECK_OK(cairn_manager_last_restore(m, &level, &got, &rebuilt, &moved));
    CHECK(level == CAIRN_LEVEL_NONE && got == -1 && rebuilt == 0 && moved == 0);
    for (step = 1; step <= 3; ++step) {
        for (i = 0; i < PER_RANK; ++i)
            x[i] = value(offs[0] + i, step);
        CHECK_OK(cairn_manager_save(m, step, st, &committed, NULL));
        CHECK(committed == 1);
        if (step == 2) {
            /* Step 2 also goes to the root (flush_every 0: only on demand). */
            CHECK_OK(cairn_manager_flush(m, &drained_step, &started));
            CHECK(started == 1 && drained_step == 2);
            CHECK_OK(cairn_manager_wait(m, NULL, NULL));
        }
    }
    {
        /* Steps 2 and 3 on node-local storage (keep 2), step 2 also in the root. */
        int64_t steps[4] = {-1, -1, -1, -1};
        int levels[4] = {-1, -1, -1, -1};
        size_t count = 0;
        CHECK_OK(cairn_manager_levels(m, NULL, NULL, 0, &count));
        CHECK(count == 2);
        CHECK_OK(cairn_manager_levels(m, steps, levels, 4, &count));
        CHECK(count == 2 && steps[0] == 2 && steps[1] == 3);
        CHECK(levels[0] == (CAIRN_STEP_NODE_LOCAL | CAIRN_STEP_FILE_SYSTEM));
        CHECK(levels[1] == CAIRN_STEP_NODE_LOCAL);
        CHECK_ERR(cairn_manager_levels(m, NULL, levels, 4, &count), CAIRN_ERR_USAGE, "NULL with a capacity of 4");
    }
    CHECK_OK(cairn_manager_free(&m));
    snprintf(drained, sizeof drained, "%s/step_00000002/metadata.h5", root);
    CHECK(path_is(drained, 0));
    snprintf(drained, sizeof drained, "%s/step_00000003/metadata.h5", root);
    CHECK(!path_is(drained, 0)); /* step 3 is node-local only */

    /* Node 1 loses its storage (a node replaced by a spare). */
    if (test_size > 1 && test_rank == 0) {
        snprintf(wiped, sizeof wiped, "%s/node1", test_dir_path);
        CHECK(path_is(wiped, 1));
        nftw(wiped, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
        CHECK(!path_is(wiped, 1));
    }
    MPI_Barrier(MPI_COMM_WORLD);

    for (i = 0; i < PER_RANK; ++i)
        x[i] = -1.0;
    step = -1;
    CHECK_OK(cairn_manager_create(root, MPI_COMM_WORLD, mo, &m));
    if (test_size > 1) {
        /* Step 3 is still node-local, once node 1's files are rebuilt. */
        int64_t steps[4];
        int levels[4];
        size_t count = 0;
        CHECK_OK(cairn_manager_levels(m, steps, levels, 4, &count));
        CHECK(count == 2 && steps[1] == 3);
        CHECK(levels[1] == (CAIRN_STEP_NODE_LOCAL | CAIRN_STEP_NEEDS_REBUILD));
    }
    CHECK_OK(cairn_manager_restore_latest(m, st, NULL, &got, &found));
    CHECK(found == 1 && got == 3 && step == 3);
    for (i = 0; i < PER_RANK; ++i)
        CHECK(x[i] == value(offs[0] + i, 3));
    CHECK_OK(cairn_manager_last_restore(m, &level, &got, &rebuilt, &moved));
    CHECK(level == CAIRN_LEVEL_NODE_LOCAL && got == 3);
    if (test_size > 1)
        CHECK(rebuilt > 0 && moved > 0);
    else
        CHECK(rebuilt == 0);
    CHECK_OK(cairn_manager_free(&m));

    /* Async: the save returns once the data is staged; the node-local write,
     * the partner copies and the commit on every node follow in the
     * background, settled by cairn_manager_wait. */
    CHECK_OK(cairn_manager_options_set_async(mo, 1));
    CHECK_OK(cairn_manager_create(root, MPI_COMM_WORLD, mo, &m));
    step = 4;
    for (i = 0; i < PER_RANK; ++i)
        x[i] = value(offs[0] + i, 4);
    CHECK_OK(cairn_manager_save(m, 4, st, &committed, NULL));
    CHECK(committed == 0);
    for (i = 0; i < PER_RANK; ++i)
        x[i] = -1.0; /* staged: the buffer is the caller's again */
    step = -1;
    CHECK_OK(cairn_manager_wait(m, &saved, NULL));
    CHECK(saved == 1);
    CHECK_OK(cairn_manager_restore_latest(m, st, NULL, &got, &found));
    CHECK(found == 1 && got == 4 && step == 4);
    for (i = 0; i < PER_RANK; ++i)
        CHECK(x[i] == value(offs[0] + i, 4));
    CHECK_OK(cairn_manager_last_restore(m, &level, &got, NULL, NULL));
    CHECK(level == CAIRN_LEVEL_NODE_LOCAL && got == 4);
    CHECK_OK(cairn_manager_free(&m));
    CHECK_OK(cairn_manager_options_set_async(mo, 0));

    /* Without a node-local level there is nothing to flush into. */
    {
        cairn_manager_t* plain = NULL;
        CHECK_OK(cairn_manager_create(root, MPI_COMM_WORLD, NULL, &plain));
        CHECK_ERR(cairn_manager_flush(plain, &drained_step, &started), CAIRN_ERR_USAGE, "node-local");
        CHECK(started == 0 && drained_step == -1);
        check_same_message(MPI_COMM_WORLD, cairn_last_error());
        CHECK_OK(cairn_manager_free(&plain));
    }
    CHECK_ERR(cairn_manager_last_restore(NULL, &level, NULL, NULL, NULL), CAIRN_ERR_USAGE,
              "the manager handle is NULL");

    CHECK_OK(cairn_manager_options_free(&mo));
    CHECK_OK(cairn_state_free(&st));
    free(x);
    return test_finish("capi_levels");
}
