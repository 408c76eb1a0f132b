/* agent/store_file — see store_file.h. */
#include "agent/store_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct store_write {
    int used;
    int fd;
    uint8_t id[GOSSIP_STORE_ID_SIZE];
    uint64_t size;
} store_write;

typedef struct agent_store_file {
    char dir[AGENT_STORE_FILE_DIR_MAX];
    uint64_t shard_bytes_max;
    store_write writes[AGENT_STORE_FILE_WRITES_MAX];
} agent_store_file;

static void hex_id(const uint8_t id[GOSSIP_STORE_ID_SIZE], char out[2 * GOSSIP_STORE_ID_SIZE + 1])
{
    static const char digits[] = "0123456789abcdef";
    for (unsigned i = 0; i < GOSSIP_STORE_ID_SIZE; i++) {
        out[2 * i] = digits[id[i] >> 4];
        out[2 * i + 1] = digits[id[i] & 15];
    }
    out[2 * GOSSIP_STORE_ID_SIZE] = 0;
}

static int make_path(const char *dir, const uint8_t *id, const char *suffix, char *out, size_t cap)
{
    char hex[2 * GOSSIP_STORE_ID_SIZE + 1];
    hex_id(id, hex);
    int n = snprintf(out, cap, "%s/%s%s", dir, hex, suffix);
    return n < 0 || (size_t)n >= cap ? GOSSIP_ESPACE : GOSSIP_OK;
}

int agent_store_file_path(const char *dir, const uint8_t id[GOSSIP_STORE_ID_SIZE], char *out,
                          size_t cap)
{
    return make_path(dir, id, AGENT_STORE_FILE_SUFFIX, out, cap);
}

static store_write *find_write(agent_store_file *s, const uint8_t *id)
{
    for (unsigned i = 0; i < AGENT_STORE_FILE_WRITES_MAX; i++)
        if (s->writes[i].used && !memcmp(s->writes[i].id, id, GOSSIP_STORE_ID_SIZE))
            return &s->writes[i];
    return NULL;
}

static int errno_to_gossip(int e)
{
    if (e == ENOSPC || e == EDQUOT)
        return GOSSIP_EFULL;
    if (e == ENOMEM)
        return GOSSIP_ENOMEM;
    if (e == ENOENT)
        return GOSSIP_ENOTFOUND;
    return GOSSIP_EINVAL;
}

static int op_size(void *ctx, const uint8_t id[GOSSIP_STORE_ID_SIZE], uint64_t *size)
{
    agent_store_file *s = ctx;
    char path[AGENT_STORE_FILE_PATH_MAX];
    struct stat st;
    if (make_path(s->dir, id, AGENT_STORE_FILE_SUFFIX, path, sizeof path) || stat(path, &st) ||
        !S_ISREG(st.st_mode))
        return GOSSIP_ENOTFOUND;
    *size = (uint64_t)st.st_size;
    return GOSSIP_OK;
}

static int op_has(void *ctx, const uint8_t id[GOSSIP_STORE_ID_SIZE])
{
    uint64_t size;
    return op_size(ctx, id, &size) == GOSSIP_OK;
}

static int op_read(void *ctx, const uint8_t id[GOSSIP_STORE_ID_SIZE], uint64_t off, void *buf,
                   size_t len)
{
    agent_store_file *s = ctx;
    char path[AGENT_STORE_FILE_PATH_MAX];
    if (make_path(s->dir, id, AGENT_STORE_FILE_SUFFIX, path, sizeof path))
        return GOSSIP_ENOTFOUND;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return GOSSIP_ENOTFOUND;
    struct stat st;
    int rc = GOSSIP_OK;
    if (fstat(fd, &st) || off > (uint64_t)st.st_size || len > (uint64_t)st.st_size - off) {
        rc = GOSSIP_EINVAL;
    } else {
        size_t done = 0;
        while (done < len) {
            ssize_t n = pread(fd, (uint8_t *)buf + done, len - done, (off_t)(off + done));
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0) {
                rc = GOSSIP_EINVAL; /* shrank under us: someone else touched the file */
                break;
            }
            done += (size_t)n;
        }
    }
    close(fd);
    return rc;
}

static int op_begin(void *ctx, const uint8_t id[GOSSIP_STORE_ID_SIZE], uint64_t size)
{
    agent_store_file *s = ctx;
    if (size > s->shard_bytes_max || op_has(ctx, id) || find_write(s, id))
        return GOSSIP_EINVAL;
    store_write *w = NULL;
    for (unsigned i = 0; i < AGENT_STORE_FILE_WRITES_MAX && !w; i++)
        if (!s->writes[i].used)
            w = &s->writes[i];
    if (!w)
        return GOSSIP_EFULL;
    char path[AGENT_STORE_FILE_PATH_MAX];
    if (make_path(s->dir, id, AGENT_STORE_FILE_SUFFIX ".part", path, sizeof path))
        return GOSSIP_EINVAL;
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return errno_to_gossip(errno);
    w->used = 1;
    w->fd = fd;
    w->size = size;
    memcpy(w->id, id, GOSSIP_STORE_ID_SIZE);
    return GOSSIP_OK;
}

static int op_write(void *ctx, const uint8_t id[GOSSIP_STORE_ID_SIZE], uint64_t off,
                    const void *buf, size_t len)
{
    store_write *w = find_write(ctx, id);
    if (!w)
        return GOSSIP_ENOTFOUND;
    if (off > w->size || len > w->size - off)
        return GOSSIP_EINVAL;
    size_t done = 0;
    while (done < len) {
        ssize_t n = pwrite(w->fd, (const uint8_t *)buf + done, len - done, (off_t)(off + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return errno_to_gossip(n < 0 ? errno : ENOSPC);
        done += (size_t)n;
    }
    return GOSSIP_OK;
}

static void close_write(agent_store_file *s, store_write *w, int unlink_part)
{
    close(w->fd);
    if (unlink_part) {
        char path[AGENT_STORE_FILE_PATH_MAX];
        if (!make_path(s->dir, w->id, AGENT_STORE_FILE_SUFFIX ".part", path, sizeof path))
            unlink(path);
    }
    memset(w, 0, sizeof *w);
}

static int op_commit(void *ctx, const uint8_t id[GOSSIP_STORE_ID_SIZE])
{
    agent_store_file *s = ctx;
    store_write *w = find_write(s, id);
    if (!w)
        return GOSSIP_ENOTFOUND;
    char part[AGENT_STORE_FILE_PATH_MAX], path[AGENT_STORE_FILE_PATH_MAX];
    struct stat st;
    if (fstat(w->fd, &st) || (uint64_t)st.st_size != w->size) {
        close_write(s, w, 1);
        return GOSSIP_EINVAL; /* not every byte was written */
    }
    if (fsync(w->fd)) {
        int e = errno;
        close_write(s, w, 1);
        return errno_to_gossip(e);
    }
    make_path(s->dir, id, AGENT_STORE_FILE_SUFFIX ".part", part, sizeof part);
    make_path(s->dir, id, AGENT_STORE_FILE_SUFFIX, path, sizeof path);
    if (rename(part, path)) {
        int e = errno;
        close_write(s, w, 1);
        return errno_to_gossip(e);
    }
    close_write(s, w, 0);
    int dfd = open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd); /* the rename is durable; failure here only risks the new name */
        close(dfd);
    }
    return GOSSIP_OK;
}

static void op_abort(void *ctx, const uint8_t id[GOSSIP_STORE_ID_SIZE])
{
    store_write *w = find_write(ctx, id);
    if (w)
        close_write(ctx, w, 1);
}

static int op_drop(void *ctx, const uint8_t id[GOSSIP_STORE_ID_SIZE])
{
    agent_store_file *s = ctx;
    char path[AGENT_STORE_FILE_PATH_MAX];
    if (make_path(s->dir, id, AGENT_STORE_FILE_SUFFIX, path, sizeof path) || unlink(path))
        return GOSSIP_ENOTFOUND;
    return GOSSIP_OK;
}

/* A shard whose bytes do not match its id: renamed to <hex>.msh.bad (a
 * previous bad copy of the same shard is replaced), out of the store's
 * view, kept for inspection. */
static int op_quarantine(void *ctx, const uint8_t id[GOSSIP_STORE_ID_SIZE])
{
    agent_store_file *s = ctx;
    char path[AGENT_STORE_FILE_PATH_MAX], bad[AGENT_STORE_FILE_PATH_MAX];
    if (make_path(s->dir, id, AGENT_STORE_FILE_SUFFIX, path, sizeof path) ||
        make_path(s->dir, id, AGENT_STORE_FILE_SUFFIX ".bad", bad, sizeof bad))
        return GOSSIP_EINVAL;
    if (rename(path, bad) == 0)
        return GOSSIP_OK;
    if (errno == ENOENT)
        return GOSSIP_ENOTFOUND;
    return unlink(path) ? GOSSIP_EINVAL : GOSSIP_OK;
}

static const gossip_store_ops store_file_ops = {
    .has = op_has,
    .size = op_size,
    .read = op_read,
    .begin = op_begin,
    .write = op_write,
    .commit = op_commit,
    .abort = op_abort,
    .drop = op_drop,
    .quarantine = op_quarantine,
};

static int is_hex_name(const char *name, const char *suffix)
{
    size_t hex = 2 * GOSSIP_STORE_ID_SIZE;
    if (strlen(name) != hex + strlen(suffix) || strcmp(name + hex, suffix))
        return 0;
    for (size_t i = 0; i < hex; i++)
        if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f')))
            return 0;
    return 1;
}

int agent_store_file_open(gossip_store *out, const char *dir, uint64_t shard_bytes_max, char *err,
                          size_t errlen)
{
    if (err && errlen)
        err[0] = 0;
    out->ops = NULL;
    out->ctx = NULL;
    if (!dir || !*dir || strlen(dir) >= AGENT_STORE_FILE_DIR_MAX || !shard_bytes_max) {
        if (err)
            snprintf(err, errlen, "shard directory: empty or longer than %u bytes",
                     AGENT_STORE_FILE_DIR_MAX - 1);
        return GOSSIP_EINVAL;
    }
    if (mkdir(dir, 0755) && errno != EEXIST) {
        if (err)
            snprintf(err, errlen, "%s: cannot create the shard directory: %s", dir,
                     strerror(errno));
        return GOSSIP_ENOTFOUND;
    }
    DIR *d = opendir(dir);
    if (!d) {
        if (err)
            snprintf(err, errlen, "%s: cannot read the shard directory: %s", dir, strerror(errno));
        return GOSSIP_ENOTFOUND;
    }
    struct dirent *e;
    char path[AGENT_STORE_FILE_PATH_MAX];
    while ((e = readdir(d)))
        if (is_hex_name(e->d_name, AGENT_STORE_FILE_SUFFIX ".part") &&
            (size_t)snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < sizeof path)
            unlink(path);
    closedir(d);
    agent_store_file *s = calloc(1, sizeof *s);
    if (!s) {
        if (err)
            snprintf(err, errlen, "%s: out of memory", dir);
        return GOSSIP_ENOMEM;
    }
    memcpy(s->dir, dir, strlen(dir) + 1);
    s->shard_bytes_max = shard_bytes_max;
    out->ops = &store_file_ops;
    out->ctx = s;
    return GOSSIP_OK;
}

void agent_store_file_close(gossip_store *store)
{
    agent_store_file *s = store ? store->ctx : NULL;
    if (!s)
        return;
    for (unsigned i = 0; i < AGENT_STORE_FILE_WRITES_MAX; i++)
        if (s->writes[i].used)
            close_write(s, &s->writes[i], 1);
    free(s);
    store->ctx = NULL;
    store->ops = NULL;
}

uint32_t agent_store_file_count(const gossip_store *store)
{
    const agent_store_file *s = store->ctx;
    DIR *d = opendir(s->dir);
    if (!d)
        return 0;
    uint32_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += (uint32_t)is_hex_name(e->d_name, AGENT_STORE_FILE_SUFFIX);
    closedir(d);
    return n;
}
