/* LD_PRELOAD shim of the integration tests: a slow disk under the agent's
 * shard store (agent/store_file.c), on the calls the event loop makes.
 *
 * - fsync() of a shard being committed, a file whose name ends in
 *   ".msh.part" (the name the store gives a shard while it is fetched),
 *   sleeps SLOW_FSYNC_MS milliseconds (default 3000) first
 *   (agent_loop_stall.sh).
 * - pread() of a stored shard, a file whose name ends in ".msh" (what the
 *   store reads to serve a manifest or a chunk to a peer), sleeps
 *   SLOW_PREAD_MS milliseconds (default 0: not delayed) first, and only
 *   while the file named by SLOW_PREAD_IF exists when that is set, so a
 *   test can start the agent at full speed and slow its reads later
 *   (agent_serve_slow.sh).
 *
 * Every other call is the real one at once. Both calls are given an fd:
 * its path is read from /proc/self/fd/N. With SLOW_STORE_LOG set, each
 * delayed call first appends "slow_CALL ms=N path=P" to that file, so that
 * a test can tell a missing delay from a missing report.
 *
 *   cc -shared -fPIC -O2 -o slow_store.so tests/integration/lib/slow_store.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int (*real_fsync)(int);
static ssize_t (*real_pread)(int, void *, size_t, off_t);

__attribute__((constructor)) static void slow_store_init(void)
{
    void *p = dlsym(RTLD_NEXT, "fsync");
    memcpy(&real_fsync, &p, sizeof real_fsync); /* ISO C has no object -> function cast */
    p = dlsym(RTLD_NEXT, "pread");
    memcpy(&real_pread, &p, sizeof real_pread);
}

/* The path of fd into path when it ends in suffix. */
static int path_ends(int fd, const char *suffix, char *path, size_t cap)
{
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, cap - 1);
    if (n <= 0)
        return 0;
    path[n] = 0;
    size_t len = (size_t)n, sl = strlen(suffix);
    return len >= sl && !strcmp(path + len - sl, suffix);
}

static long env_ms(const char *name, long dflt)
{
    const char *e = getenv(name);
    char *end;
    long ms = e && *e ? strtol(e, &end, 10) : dflt;
    if (e && *e && (*end || ms < 0))
        ms = dflt;
    return ms;
}

static void note(const char *call, long ms, const char *path)
{
    const char *f = getenv("SLOW_STORE_LOG");
    if (!f || !*f)
        return;
    char line[600];
    int n = snprintf(line, sizeof line, "slow_%s ms=%ld path=%s\n", call, ms, path);
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

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) && errno == EINTR) {
    }
}

int fsync(int fd)
{
    int saved = errno;
    char path[512];
    if (path_ends(fd, ".msh.part", path, sizeof path)) {
        long ms = env_ms("SLOW_FSYNC_MS", 3000);
        note("fsync", ms, path);
        sleep_ms(ms);
    }
    errno = saved;
    if (!real_fsync)
        slow_store_init();
    if (!real_fsync) {
        errno = ENOSYS;
        return -1;
    }
    return real_fsync(fd);
}

ssize_t pread(int fd, void *buf, size_t count, off_t offset)
{
    int saved = errno;
    long ms = env_ms("SLOW_PREAD_MS", 0);
    const char *gate = getenv("SLOW_PREAD_IF");
    struct stat st;
    char path[512];
    if (ms > 0 && (!gate || !*gate || stat(gate, &st) == 0) &&
        path_ends(fd, ".msh", path, sizeof path)) {
        note("pread", ms, path);
        sleep_ms(ms);
    }
    errno = saved;
    if (!real_pread)
        slow_store_init();
    if (!real_pread) {
        errno = ENOSYS;
        return -1;
    }
    return real_pread(fd, buf, count, offset);
}
