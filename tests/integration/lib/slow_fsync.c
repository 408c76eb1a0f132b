/* LD_PRELOAD shim of the integration tests (agent_loop_stall.sh): fsync() of
 * a shard being committed, a file whose name ends in ".msh.part" (the name
 * the file store gives a shard while it is fetched, agent/store_file.c),
 * sleeps SLOW_FSYNC_MS milliseconds (default 3000) first, as a slow disk
 * would; every other fsync is the real one at once. fsync is given an fd:
 * its path is read from /proc/self/fd/N. With SLOW_FSYNC_LOG set, each
 * delayed call first appends "slow_fsync ms=N path=P" to that file, so that a test
 * can tell a missing delay from a missing report.
 *
 *   cc -shared -fPIC -O2 -o slow_fsync.so tests/integration/lib/slow_fsync.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SUFFIX ".msh.part"

static int (*real_fsync)(int);

__attribute__((constructor)) static void slow_fsync_init(void)
{
    void *p = dlsym(RTLD_NEXT, "fsync");
    memcpy(&real_fsync, &p, sizeof real_fsync); /* ISO C has no object -> function cast */
}

static int is_part(int fd, char *path, size_t cap)
{
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, cap - 1);
    if (n <= 0)
        return 0;
    path[n] = 0;
    size_t len = (size_t)n, sl = strlen(SUFFIX);
    return len >= sl && !strcmp(path + len - sl, SUFFIX);
}

static long delay_ms(void)
{
    const char *e = getenv("SLOW_FSYNC_MS");
    char *end;
    long ms = e && *e ? strtol(e, &end, 10) : 3000;
    if (e && *e && (*end || ms < 0))
        ms = 3000;
    return ms;
}

static void note(long ms, const char *path)
{
    const char *f = getenv("SLOW_FSYNC_LOG");
    if (!f || !*f)
        return;
    char line[600];
    int n = snprintf(line, sizeof line, "slow_fsync ms=%ld path=%s\n", ms, path);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof line)
        n = (int)sizeof line - 1;
    int lfd = open(f, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (lfd < 0)
        return;
    if (write(lfd, line, (size_t)n) < 0) {
        /* the note is an aid; the delay happened all the same */
    }
    close(lfd);
}

int fsync(int fd)
{
    int saved = errno;
    char path[512];
    if (is_part(fd, path, sizeof path)) {
        long ms = delay_ms();
        note(ms, path);
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) && errno == EINTR) {
        }
    }
    errno = saved;
    if (!real_fsync)
        slow_fsync_init();
    if (!real_fsync) {
        errno = ENOSYS;
        return -1;
    }
    return real_fsync(fd);
}
