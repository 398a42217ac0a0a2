/* spans_hosts: checks that an MPI job really spans several hosts.
 *
 * usage: spans_hosts SIZES [LOCAL_DIR SHARED_DIR]
 *   SIZES       ranks per host in the order of their lowest rank, e.g. 2,2 or 1,2,1
 *   LOCAL_DIR   the node-local directory (the same path on every host, private to
 *               each; default $CAIRN_HOSTS_LOCAL, set by cairn-hosts)
 *   SHARED_DIR  a directory every host sees (the parallel file system; default
 *               $CAIRN_HOSTS_PFS)
 *
 * Asserts, on every rank, that
 *   - MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) makes one group per host, of SIZES;
 *   - the ranks of a group share one hostname and one boot_id, and the groups'
 *     hostnames and boot_ids are distinct; MPI_Get_processor_name is the hostname;
 *   - a file written to LOCAL_DIR is seen by exactly the ranks of its own group,
 *     and a file written to SHARED_DIR by every rank;
 *   - Allreduce over all ranks and over the group leaders give the right sums.
 * Each failed check prints "spans_hosts: rank R (HOST): ..."; rank 0 prints
 * one line per rank and PASS or FAIL; the exit status is 0 only on PASS. */
#include <mpi.h>

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NAME 256

static int rank, failures;
static char host[NAME];

static void fail(const char *what) {
    fprintf(stderr, "spans_hosts: rank %d (%s): %s\n", rank, host, what);
    ++failures;
}

static void read_boot_id(char *out) {
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    out[0] = '\0';
    if (!f || !fgets(out, NAME, f)) fail("cannot read /proc/sys/kernel/random/boot_id");
    if (f) fclose(f);
    out[strcspn(out, "\n")] = '\0';
}

static int write_marker(const char *dir, int r) {
    char path[4096];
    snprintf(path, sizeof path, "%s/spans-%d", dir, r);
    FILE *f = fopen(path, "w");
    if (!f) {
        char msg[4200];
        snprintf(msg, sizeof msg, "cannot create %s: %s", path, strerror(errno));
        fail(msg);
        return 0;
    }
    fprintf(f, "%s\n", host);
    return fclose(f) == 0;
}

/* the ranks whose markers DIR holds, as a bit set of `size` entries */
static void markers_seen(const char *dir, int size, char *seen) {
    memset(seen, 0, (size_t)size);
    DIR *d = opendir(dir);
    struct dirent *e;
    if (!d) { fail("cannot list the node-local directory"); return; }
    while ((e = readdir(d))) {
        int r;
        char extra;
        if (sscanf(e->d_name, "spans-%d%c", &r, &extra) == 1 && r >= 0 && r < size) seen[r] = 1;
    }
    closedir(d);
}

int main(int argc, char **argv) {
    int size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    gethostname(host, sizeof host);
    host[NAME - 1] = '\0';
    const char *local = argc == 4 ? argv[2] : getenv("CAIRN_HOSTS_LOCAL");
    const char *shared = argc == 4 ? argv[3] : getenv("CAIRN_HOSTS_PFS");
    if ((argc != 2 && argc != 4) || !local || !shared) {
        if (rank == 0) fprintf(stderr, "usage: spans_hosts SIZES [LOCAL_DIR SHARED_DIR]\n");
        MPI_Finalize();
        return 2;
    }

    /* expected group sizes */
    int want[256], nwant = 0, total = 0;
    for (char *s = argv[1]; *s && nwant < 256;) {
        want[nwant] = (int)strtol(s, &s, 10);
        total += want[nwant++];
        if (*s == ',') ++s;
    }
    if (total != size) fail("SIZES does not add up to the number of ranks");

    /* the groups of MPI_COMM_TYPE_SHARED */
    MPI_Comm node, leaders;
    int nrank, nsize, ngroups = 0;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &nrank);
    MPI_Comm_size(node, &nsize);
    /* the group's index = its leader's rank among the leaders (ordered by world rank) */
    MPI_Comm_split(MPI_COMM_WORLD, nrank == 0 ? 0 : MPI_UNDEFINED, rank, &leaders);
    int group = 0;
    if (nrank == 0) {
        MPI_Comm_rank(leaders, &group);
        MPI_Comm_size(leaders, &ngroups);
    }
    MPI_Bcast(&group, 1, MPI_INT, 0, node);
    MPI_Bcast(&ngroups, 1, MPI_INT, 0, node);
    if (ngroups != nwant) fail("MPI_COMM_TYPE_SHARED does not give one group per host");
    else if (nsize != want[group]) fail("the size of this rank's MPI_COMM_TYPE_SHARED group is not the host's");

    /* hostnames and boot ids: one per group, distinct between groups */
    char proc[MPI_MAX_PROCESSOR_NAME], boot[NAME];
    int plen;
    MPI_Get_processor_name(proc, &plen);
    if (strcmp(proc, host) != 0) fail("MPI_Get_processor_name differs from gethostname");
    read_boot_id(boot);
    char *hosts = malloc((size_t)size * NAME), *boots = malloc((size_t)size * NAME);
    int *groups = malloc(sizeof(int) * (size_t)size);
    char mine[NAME];
    memset(mine, 0, sizeof mine);
    strncpy(mine, host, NAME - 1);
    MPI_Allgather(mine, NAME, MPI_CHAR, hosts, NAME, MPI_CHAR, MPI_COMM_WORLD);
    memset(mine, 0, sizeof mine);
    strncpy(mine, boot, NAME - 1);
    MPI_Allgather(mine, NAME, MPI_CHAR, boots, NAME, MPI_CHAR, MPI_COMM_WORLD);
    MPI_Allgather(&group, 1, MPI_INT, groups, 1, MPI_INT, MPI_COMM_WORLD);
    for (int r = 0; r < size; ++r) {
        int same_group = groups[r] == group;
        if (same_group != (strcmp(hosts + (size_t)r * NAME, host) == 0))
            fail(same_group ? "a rank of my group has another hostname" : "a rank of another group has my hostname");
        if (same_group != (strcmp(boots + (size_t)r * NAME, boot) == 0))
            fail(same_group ? "a rank of my group has another boot_id" : "a rank of another group has my boot_id");
    }

    /* node-local and shared directories */
    write_marker(local, rank);
    write_marker(shared, rank);
    MPI_Barrier(MPI_COMM_WORLD);
    char *seen = malloc((size_t)size);
    markers_seen(local, size, seen);
    int nlocal = 0;
    for (int r = 0; r < size; ++r) {
        nlocal += seen[r];
        if (seen[r] != (groups[r] == group)) {
            char msg[128];
            snprintf(msg, sizeof msg, "the node-local directory %s rank %d's file", seen[r] ? "holds" : "lacks", r);
            fail(msg);
        }
    }
    markers_seen(shared, size, seen);
    int nshared = 0;
    for (int r = 0; r < size; ++r) nshared += seen[r];
    if (nshared != size) fail("the shared directory does not hold every rank's file");

    /* collectives across hosts */
    long one = rank + 1, sum = 0;
    MPI_Allreduce(&one, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (sum != (long)size * (size + 1) / 2) fail("Allreduce over all ranks gave a wrong sum");
    if (nrank == 0) {
        long n = nsize, ranks = 0;
        MPI_Allreduce(&n, &ranks, 1, MPI_LONG, MPI_SUM, leaders);
        if (ranks != size) fail("Allreduce over the hosts' leaders gave a wrong sum");
        MPI_Comm_free(&leaders);
    }

    char line[512];
    snprintf(line, sizeof line, "rank %d: host %s, group %d (rank %d of %d), %d node-local files, %d shared, %s",
             rank, host, group, nrank, nsize, nlocal, nshared, failures ? "FAILED" : "ok");
    char *lines = rank == 0 ? malloc((size_t)size * sizeof line) : NULL;
    MPI_Gather(line, sizeof line, MPI_CHAR, lines, sizeof line, MPI_CHAR, 0, MPI_COMM_WORLD);
    int bad = 0;
    MPI_Allreduce(&failures, &bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        for (int r = 0; r < size; ++r) printf("%s\n", lines + (size_t)r * sizeof line);
        printf("%s: %d ranks on %d hosts (%s)\n", bad ? "FAIL" : "PASS", size, ngroups, argv[1]);
        fflush(stdout);
        free(lines);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    char path[4096];
    snprintf(path, sizeof path, "%s/spans-%d", local, rank);
    unlink(path);
    snprintf(path, sizeof path, "%s/spans-%d", shared, rank);
    unlink(path);
    free(hosts);
    free(boots);
    free(groups);
    free(seen);
    MPI_Comm_free(&node);
    MPI_Finalize();
    return bad ? 1 : 0;
}
