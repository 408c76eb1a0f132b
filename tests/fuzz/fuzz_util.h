/* tests/fuzz/fuzz_util.h — helpers shared by the libFuzzer targets
 * (docs/FUZZING.md).
 *
 * FUZZ_CHECK(cond) aborts with the condition, file and line when a property
 * does not hold; libFuzzer then saves the input as a crash. The allocator
 * callbacks give the core a plain malloc-backed gossip_env. fuzz_memfile
 * puts bytes into an anonymous in-memory file and names it by a path, so
 * loaders that only take a path (checkpoints, IDX, CSV, config and
 * scenario files) read fuzzed bytes without touching the disk.
 * Everything here is static: each target is one translation unit.
 */
#ifndef TESTS_FUZZ_UTIL_H
#define TESTS_FUZZ_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static inline void fuzz_fail(const char *what, const char *file, int line)
{
    fprintf(stderr, "%s:%d: property violated: %s\n", file, line, what);
    abort();
}

#define FUZZ_CHECK(cond) ((cond) ? (void)0 : fuzz_fail(#cond, __FILE__, __LINE__))

static inline void *fuzz_alloc(void *ctx, size_t n)
{
    (void)ctx;
    return malloc(n ? n : 1);
}

static inline void fuzz_free(void *ctx, void *p)
{
    (void)ctx;
    free(p);
}

/* A copy of data[0..size) in a buffer of exactly that size (so ASan sees a
 * read one byte past the end); never NULL. Free with free(). */
static inline uint8_t *fuzz_dup(const uint8_t *data, size_t size)
{
    uint8_t *p = malloc(size ? size : 1);
    FUZZ_CHECK(p != NULL);
    if (size)
        memcpy(p, data, size);
    return p;
}

/* The same, NUL-terminated (for text parsers). */
static inline char *fuzz_strdup(const uint8_t *data, size_t size)
{
    char *p = malloc(size + 1);
    FUZZ_CHECK(p != NULL);
    if (size)
        memcpy(p, data, size);
    p[size] = '\0';
    return p;
}

/* Replace the contents of in-memory file number `slot` (0..3) with
 * data[0..size), give it the permission bits set with fuzz_memfile_mode
 * (0600 by default), and write a path that opens it into path. The files
 * live for the whole process; each call truncates and rewrites one. */
static unsigned fuzz_memfile_modes[4] = {0600, 0600, 0600, 0600};

static inline void fuzz_memfile_mode(int slot, unsigned mode)
{
    fuzz_memfile_modes[slot & 3] = mode;
}

static inline void fuzz_memfile(int slot, const uint8_t *data, size_t size, char *path, size_t cap)
{
    static int fds[4] = {-1, -1, -1, -1};
    FUZZ_CHECK(slot >= 0 && slot < 4);
    if (fds[slot] < 0) {
        fds[slot] = memfd_create("murmur-fuzz", 0);
        FUZZ_CHECK(fds[slot] >= 0);
    }
    int fd = fds[slot];
    FUZZ_CHECK(fchmod(fd, fuzz_memfile_modes[slot]) == 0);
    FUZZ_CHECK(ftruncate(fd, 0) == 0);
    size_t done = 0;
    while (done < size) {
        ssize_t k = pwrite(fd, data + done, size - done, (off_t)done);
        FUZZ_CHECK(k > 0);
        done += (size_t)k;
    }
    snprintf(path, cap, "/proc/self/fd/%d", fd);
}

/* 1 when err holds a non-empty, NUL-terminated message within cap bytes. */
static inline int fuzz_has_message(const char *err, size_t cap)
{
    return err[0] != '\0' && memchr(err, '\0', cap) != NULL;
}

#endif
