/* eio_shim: an LD_PRELOAD library for commit_eio_test.py. It makes the
 * writes that HDF5 itself makes to a file whose name ends in ".cairn-tmp"
 * fail with EIO, as a failing disk would: open() calls made from libhdf5
 * (HDF5's sec2 driver, the container's serial commit) mark the descriptor,
 * and write(), pwrite() and their 64-bit and vector forms on a marked
 * descriptor that still names such a file return -1 / EIO. Files opened by
 * MPI-IO (the collective data writes) and by Cairn are left alone.
 *
 * Environment:
 *   CAIRN_EIO_SUFFIX  the name's ending (default ".cairn-tmp")
 *   CAIRN_EIO_OPENS   how many such opens are doomed (default: all); the
 *                     later ones write normally, so that a retry in the same
 *                     process can succeed
 *   CAIRN_EIO_SPARE   how many such opens go through before the doomed ones
 *                     (default 0: the container's creation is the first,
 *                     its commit's reopen the second)
 *   CAIRN_EIO_SKIP    how many writes of a doomed open succeed before the
 *                     first failure (default 0)
 * The first failed write of each doomed open prints
 *   "eio_shim: EIO on <path>"
 * on stderr. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAX_FD 4096

/* 0: not doomed; 1: doomed, nothing failed yet; 2: doomed, reported */
static unsigned char doomed[MAX_FD];
static long passed[MAX_FD]; /* writes let through since the doomed open */
static long opens_left = -1; /* -1: unlimited */
static long spare = 0;       /* such opens let through before the doomed ones */
static long skip = 0;
static int configured = 0;

static void configure(void)
{
    if (configured)
        return;
    configured = 1;
    const char* n = getenv("CAIRN_EIO_OPENS");
    if (n && *n)
        opens_left = strtol(n, NULL, 10);
    const char* p = getenv("CAIRN_EIO_SPARE");
    if (p && *p)
        spare = strtol(p, NULL, 10);
    const char* k = getenv("CAIRN_EIO_SKIP");
    if (k && *k)
        skip = strtol(k, NULL, 10);
}

static const char* suffix(void)
{
    const char* s = getenv("CAIRN_EIO_SUFFIX");
    return s && *s ? s : ".cairn-tmp";
}

static int ends_with(const char* s, const char* tail)
{
    const size_t a = strlen(s), b = strlen(tail);
    return a >= b && strcmp(s + a - b, tail) == 0;
}

static int from_hdf5(const void* caller)
{
    Dl_info info;
    if (!dladdr(caller, &info) || !info.dli_fname)
        return 0;
    const char* base = strrchr(info.dli_fname, '/');
    base = base ? base + 1 : info.dli_fname;
    return strncmp(base, "libhdf5", 7) == 0;
}

static void note_open(int fd, const char* path, const void* caller)
{
    if (fd < 0 || fd >= MAX_FD)
        return;
    configure();
    doomed[fd] = 0;
    passed[fd] = 0;
    if (path && ends_with(path, suffix()) && from_hdf5(caller) && spare > 0) {
        --spare;
        return;
    }
    if (path && ends_with(path, suffix()) && from_hdf5(caller) && opens_left != 0) {
        doomed[fd] = 1;
        if (opens_left > 0)
            --opens_left;
    }
}

/* Whether a write to fd must fail: it was doomed at its open and still names
 * a file with the suffix (a dup2 over it, or a close and another open, ends
 * that). */
static int must_fail(int fd)
{
    if (fd < 0 || fd >= MAX_FD || !doomed[fd])
        return 0;
    char link[64], target[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    const ssize_t n = readlink(link, target, sizeof target - 1);
    if (n <= 0)
        return 0;
    target[n] = '\0';
    if (!ends_with(target, suffix())) {
        doomed[fd] = 0;
        return 0;
    }
    if (passed[fd] < skip) {
        ++passed[fd];
        return 0;
    }
    if (doomed[fd] == 1) {
        doomed[fd] = 2;
        fprintf(stderr, "eio_shim: EIO on %s\n", target);
    }
    errno = EIO;
    return 1;
}

#define REAL(name, type) ((type)dlsym(RTLD_NEXT, name))

static mode_t mode_of(int flags, va_list ap)
{
    return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? (mode_t)va_arg(ap, int) : 0;
}

int open(const char* path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    const mode_t mode = mode_of(flags, ap);
    va_end(ap);
    const int fd = REAL("open", int (*)(const char*, int, ...))(path, flags, mode);
    note_open(fd, path, __builtin_return_address(0));
    return fd;
}

int open64(const char* path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    const mode_t mode = mode_of(flags, ap);
    va_end(ap);
    const int fd = REAL("open64", int (*)(const char*, int, ...))(path, flags, mode);
    note_open(fd, path, __builtin_return_address(0));
    return fd;
}

ssize_t write(int fd, const void* buf, size_t n)
{
    if (must_fail(fd))
        return -1;
    return REAL("write", ssize_t (*)(int, const void*, size_t))(fd, buf, n);
}

ssize_t pwrite(int fd, const void* buf, size_t n, off_t at)
{
    if (must_fail(fd))
        return -1;
    return REAL("pwrite", ssize_t (*)(int, const void*, size_t, off_t))(fd, buf, n, at);
}

ssize_t pwrite64(int fd, const void* buf, size_t n, off_t at)
{
    if (must_fail(fd))
        return -1;
    return REAL("pwrite64", ssize_t (*)(int, const void*, size_t, off_t))(fd, buf, n, at);
}

ssize_t writev(int fd, const struct iovec* iov, int n)
{
    if (must_fail(fd))
        return -1;
    return REAL("writev", ssize_t (*)(int, const struct iovec*, int))(fd, iov, n);
}

ssize_t pwritev(int fd, const struct iovec* iov, int n, off_t at)
{
    if (must_fail(fd))
        return -1;
    return REAL("pwritev", ssize_t (*)(int, const struct iovec*, int, off_t))(fd, iov, n, at);
}
