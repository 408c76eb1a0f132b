/* agent/checkpoint — see checkpoint.h for the format and the guarantees. */
#include "agent/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Vectors are converted to and from little-endian bytes through a buffer of
 * this many bytes: large enough that write(2)/read(2) calls are few, small
 * enough for the stack of any thread. */
#define CHUNK_BYTES (64u * 1024u)
_Static_assert(CHUNK_BYTES % 4 == 0, "a chunk holds whole floats");

static const char *const err_names[AGENT_CHECKPOINT_ERR_COUNT] = {
    [AGENT_CHECKPOINT_OK] = "ok",
    [AGENT_CHECKPOINT_EIO] = "I/O error",
    [AGENT_CHECKPOINT_ENOENT] = "no checkpoint",
    [AGENT_CHECKPOINT_ETRUNC] = "truncated checkpoint",
    [AGENT_CHECKPOINT_EMAGIC] = "not a murmur checkpoint",
    [AGENT_CHECKPOINT_EVERSION] = "unsupported checkpoint version",
    [AGENT_CHECKPOINT_EMALFORMED] = "malformed checkpoint",
    [AGENT_CHECKPOINT_ECHECKSUM] = "checkpoint checksum mismatch",
    [AGENT_CHECKPOINT_ENONFINITE] = "non-finite value in checkpoint",
    [AGENT_CHECKPOINT_ESPEC] = "checkpoint is for another model spec",
    [AGENT_CHECKPOINT_EDIM] = "checkpoint has another parameter count",
    [AGENT_CHECKPOINT_ENOMEM] = "out of memory",
    [AGENT_CHECKPOINT_EINVAL] = "invalid argument",
};

const char *agent_checkpoint_strerror(int err)
{
    if (err < 0 || err >= AGENT_CHECKPOINT_ERR_COUNT)
        return "unknown error";
    return err_names[err];
}

static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static void floats_to_le(const float *src, size_t n, uint8_t *dst)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t b;
        memcpy(&b, &src[i], 4);
        put_u32(dst + 4 * i, b);
    }
}

/* Returns false if a value is not finite. */
static bool floats_from_le(const uint8_t *src, size_t n, float *dst)
{
    bool finite = true;
    for (size_t i = 0; i < n; i++) {
        uint32_t b = get_u32(src + 4 * i);
        memcpy(&dst[i], &b, 4);
        finite &= (b & 0x7F800000u) != 0x7F800000u;
    }
    return finite;
}

static bool all_finite(const float *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i]))
            return false;
    return true;
}

static size_t file_size(uint32_t spec_len, uint32_t dim, bool momentum)
{
    return AGENT_CHECKPOINT_HEADER_SIZE + (size_t)spec_len + (size_t)dim * 4u * (momentum ? 2 : 1) +
           AGENT_CHECKPOINT_HASH_SIZE;
}

/* ---- writing ---- */

typedef struct writer {
    int fd;
    crypto_generichash_state hash;
    int saved_errno; /* 0 until a write fails */
} writer;

static void w_bytes(writer *w, const void *p, size_t n)
{
    if (w->saved_errno)
        return;
    crypto_generichash_update(&w->hash, p, n);
    const uint8_t *b = p;
    while (n) {
        ssize_t k = write(w->fd, b, n);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            w->saved_errno = errno;
            return;
        }
        b += k;
        n -= (size_t)k;
    }
}

static void w_floats(writer *w, const float *v, uint32_t dim)
{
    uint8_t buf[CHUNK_BYTES];
    for (size_t at = 0; at < dim && !w->saved_errno;) {
        size_t n = dim - at < CHUNK_BYTES / 4 ? dim - at : CHUNK_BYTES / 4;
        floats_to_le(v + at, n, buf);
        w_bytes(w, buf, 4 * n);
        at += n;
    }
}

static int check_ck(const agent_checkpoint *ck, const char *path, char *err, size_t errlen)
{
    if (!path || !ck || !ck->spec || !ck->params)
        return fail(err, errlen, AGENT_CHECKPOINT_EINVAL, "checkpoint: NULL argument");
    size_t sl = strlen(ck->spec);
    if (sl == 0 || sl >= AGENT_CHECKPOINT_SPEC_MAX)
        return fail(err, errlen, AGENT_CHECKPOINT_EINVAL,
                    "%s: model spec must be 1-%u bytes, not %zu", path,
                    AGENT_CHECKPOINT_SPEC_MAX - 1, sl);
    if (ck->dim == 0 || ck->dim > AGENT_CHECKPOINT_DIM_MAX)
        return fail(err, errlen, AGENT_CHECKPOINT_EINVAL, "%s: dim %u is not in 1..%u", path,
                    ck->dim, AGENT_CHECKPOINT_DIM_MAX);
    if (!all_finite(ck->params, ck->dim) || (ck->momentum && !all_finite(ck->momentum, ck->dim)))
        return fail(err, errlen, AGENT_CHECKPOINT_ENONFINITE,
                    "%s: refusing to save a model with NaN or infinite values", path);
    return 0;
}

static void dir_of(const char *path, char *out, size_t cap)
{
    const char *slash = strrchr(path, '/');
    if (!slash) {
        snprintf(out, cap, ".");
    } else if (slash == path) {
        snprintf(out, cap, "/");
    } else {
        snprintf(out, cap, "%.*s", (int)(slash - path), path);
    }
}

int agent_checkpoint_write_temp(const char *path, const agent_checkpoint *ck, char *tmp_path,
                                size_t tmp_cap, char *err, size_t errlen)
{
    int rc = check_ck(ck, path, err, errlen);
    if (rc)
        return rc;
    if (!tmp_path || strlen(path) + sizeof ".tmp.XXXXXX" > tmp_cap ||
        strlen(path) >= AGENT_CHECKPOINT_PATH_MAX)
        return fail(err, errlen, AGENT_CHECKPOINT_EINVAL, "%s: path too long", path);
    if (sodium_init() < 0)
        return fail(err, errlen, AGENT_CHECKPOINT_EIO, "libsodium failed to initialise");
    snprintf(tmp_path, tmp_cap, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(tmp_path);
    if (fd < 0)
        return fail(err, errlen, AGENT_CHECKPOINT_EIO, "%s: cannot create a temp file: %s",
                    tmp_path, strerror(errno));
    writer w = {.fd = fd};
    crypto_generichash_init(&w.hash, NULL, 0, AGENT_CHECKPOINT_HASH_SIZE);
    uint8_t h[AGENT_CHECKPOINT_HEADER_SIZE];
    uint32_t spec_len = (uint32_t)strlen(ck->spec);
    memcpy(h, AGENT_CHECKPOINT_MAGIC, 8);
    put_u32(h + 8, AGENT_CHECKPOINT_VERSION);
    put_u32(h + 12, ck->momentum ? AGENT_CHECKPOINT_FLAG_MOMENTUM : 0);
    put_u32(h + 16, spec_len);
    put_u32(h + 20, ck->dim);
    put_u64(h + 24, ck->step);
    put_u64(h + 32, ck->round);
    put_u64(h + 40, ck->epoch);
    w_bytes(&w, h, sizeof h);
    w_bytes(&w, ck->spec, spec_len);
    w_floats(&w, ck->params, ck->dim);
    if (ck->momentum)
        w_floats(&w, ck->momentum, ck->dim);
    uint8_t sum[AGENT_CHECKPOINT_HASH_SIZE];
    crypto_generichash_final(&w.hash, sum, sizeof sum);
    if (!w.saved_errno) {
        /* the checksum itself is not hashed: write it directly */
        const uint8_t *b = sum;
        size_t n = sizeof sum;
        while (n) {
            ssize_t k = write(fd, b, n);
            if (k < 0 && errno == EINTR)
                continue;
            if (k < 0) {
                w.saved_errno = errno;
                break;
            }
            b += k, n -= (size_t)k;
        }
    }
    const char *what = "write";
    if (!w.saved_errno && fsync(fd) != 0)
        w.saved_errno = errno, what = "fsync";
    if (close(fd) != 0 && !w.saved_errno)
        w.saved_errno = errno, what = "close";
    if (w.saved_errno) {
        unlink(tmp_path);
        return fail(err, errlen, AGENT_CHECKPOINT_EIO, "%s: %s failed: %s", tmp_path, what,
                    strerror(w.saved_errno));
    }
    return 0;
}

int agent_checkpoint_commit(const char *tmp_path, const char *path, char *err, size_t errlen)
{
    if (rename(tmp_path, path) != 0) {
        int e = errno;
        unlink(tmp_path);
        return fail(err, errlen, AGENT_CHECKPOINT_EIO, "rename %s -> %s failed: %s", tmp_path, path,
                    strerror(e));
    }
    /* the rename is durable only once the directory entry is on disk */
    char dir[AGENT_CHECKPOINT_PATH_MAX];
    dir_of(path, dir, sizeof dir);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    if (dfd < 0)
        return fail(err, errlen, AGENT_CHECKPOINT_EIO, "%s: cannot open directory to fsync: %s",
                    dir, strerror(errno));
    int rc = fsync(dfd);
    int e = errno;
    close(dfd);
    if (rc != 0)
        return fail(err, errlen, AGENT_CHECKPOINT_EIO, "%s: fsync of directory failed: %s", dir,
                    strerror(e));
    return 0;
}

int agent_checkpoint_save(const char *path, const agent_checkpoint *ck, char *err, size_t errlen)
{
    char tmp[AGENT_CHECKPOINT_PATH_MAX + 16];
    int rc = agent_checkpoint_write_temp(path, ck, tmp, sizeof tmp, err, errlen);
    if (rc)
        return rc;
    return agent_checkpoint_commit(tmp, path, err, errlen);
}

/* ---- reading ---- */

/* Read exactly n bytes; returns 0, or -1 on error (errno set), or 1 at EOF. */
static int read_full(int fd, void *p, size_t n)
{
    uint8_t *b = p;
    while (n) {
        ssize_t k = read(fd, b, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return -1;
        if (k == 0)
            return 1;
        b += k, n -= (size_t)k;
    }
    return 0;
}

/* Open and check the header against the file size. */
static int open_checked(const char *path, int *fd_out, uint8_t h[AGENT_CHECKPOINT_HEADER_SIZE],
                        agent_checkpoint_meta *m, char *err, size_t errlen)
{
    if (!path)
        return fail(err, errlen, AGENT_CHECKPOINT_EINVAL, "checkpoint: NULL path");
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        int e = errno;
        return fail(err, errlen, e == ENOENT ? AGENT_CHECKPOINT_ENOENT : AGENT_CHECKPOINT_EIO,
                    "%s: cannot open checkpoint: %s", path, strerror(e));
    }
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) != 0) {
        rc = fail(err, errlen, AGENT_CHECKPOINT_EIO, "%s: fstat: %s", path, strerror(errno));
        goto out;
    }
    if ((size_t)st.st_size < AGENT_CHECKPOINT_HEADER_SIZE) {
        /* a prefix of our magic (or nothing) is a cut-off write; else foreign */
        size_t have = (size_t)st.st_size < 8 ? (size_t)st.st_size : 8;
        bool ours = read_full(fd, h, have) == 0 && !memcmp(h, AGENT_CHECKPOINT_MAGIC, have);
        rc = fail(err, errlen, ours ? AGENT_CHECKPOINT_ETRUNC : AGENT_CHECKPOINT_EMAGIC,
                  "%s: %lld bytes, shorter than a checkpoint header%s", path, (long long)st.st_size,
                  ours ? " (truncated)" : " (not a murmur checkpoint)");
        goto out;
    }
    int r = read_full(fd, h, AGENT_CHECKPOINT_HEADER_SIZE);
    if (r) {
        rc = fail(err, errlen, r < 0 ? AGENT_CHECKPOINT_EIO : AGENT_CHECKPOINT_ETRUNC,
                  "%s: reading the header failed", path);
        goto out;
    }
    if (memcmp(h, AGENT_CHECKPOINT_MAGIC, 8)) {
        rc = fail(err, errlen, AGENT_CHECKPOINT_EMAGIC, "%s: not a murmur checkpoint (bad magic)",
                  path);
        goto out;
    }
    uint32_t version = get_u32(h + 8), flags = get_u32(h + 12);
    uint32_t spec_len = get_u32(h + 16), dim = get_u32(h + 20);
    if (version != AGENT_CHECKPOINT_VERSION) {
        rc = fail(err, errlen, AGENT_CHECKPOINT_EVERSION,
                  "%s: checkpoint version %u, this build reads version %u", path, version,
                  AGENT_CHECKPOINT_VERSION);
        goto out;
    }
    if (flags & ~AGENT_CHECKPOINT_FLAG_MOMENTUM || spec_len == 0 ||
        spec_len >= AGENT_CHECKPOINT_SPEC_MAX || dim == 0 || dim > AGENT_CHECKPOINT_DIM_MAX) {
        rc = fail(err, errlen, AGENT_CHECKPOINT_EMALFORMED,
                  "%s: bad header (flags %#x, spec length %u, dim %u)", path, flags, spec_len, dim);
        goto out;
    }
    bool mom = flags & AGENT_CHECKPOINT_FLAG_MOMENTUM;
    size_t want = file_size(spec_len, dim, mom);
    if ((size_t)st.st_size != want) {
        rc = fail(err, errlen,
                  (size_t)st.st_size < want ? AGENT_CHECKPOINT_ETRUNC : AGENT_CHECKPOINT_EMALFORMED,
                  "%s: %lld bytes, but its header says %zu (%s)", path, (long long)st.st_size, want,
                  (size_t)st.st_size < want ? "truncated" : "trailing bytes");
        goto out;
    }
    memset(m, 0, sizeof *m);
    if (read_full(fd, m->spec, spec_len)) {
        rc = fail(err, errlen, AGENT_CHECKPOINT_EIO, "%s: reading the spec failed", path);
        goto out;
    }
    m->spec[spec_len] = '\0';
    if (strlen(m->spec) != spec_len) {
        rc = fail(err, errlen, AGENT_CHECKPOINT_EMALFORMED, "%s: NUL byte in the model spec", path);
        goto out;
    }
    m->dim = dim;
    m->step = get_u64(h + 24);
    m->round = get_u64(h + 32);
    m->epoch = get_u64(h + 40);
    m->has_momentum = mom;
out:
    if (rc)
        close(fd);
    else
        *fd_out = fd;
    return rc;
}

int agent_checkpoint_read_meta(const char *path, agent_checkpoint_meta *meta, char *err,
                               size_t errlen)
{
    uint8_t h[AGENT_CHECKPOINT_HEADER_SIZE];
    agent_checkpoint_meta m;
    int fd = -1;
    int rc = open_checked(path, &fd, h, &m, err, errlen);
    if (rc)
        return rc;
    close(fd);
    if (meta)
        *meta = m;
    return 0;
}

/* Read dim floats into dst, hashing the raw bytes. */
static int r_floats(int fd, crypto_generichash_state *hs, float *dst, uint32_t dim, bool *finite)
{
    uint8_t buf[CHUNK_BYTES];
    for (size_t at = 0; at < dim;) {
        size_t n = dim - at < CHUNK_BYTES / 4 ? dim - at : CHUNK_BYTES / 4;
        int r = read_full(fd, buf, 4 * n);
        if (r)
            return r;
        crypto_generichash_update(hs, buf, 4 * n);
        *finite &= floats_from_le(buf, n, dst + at);
        at += n;
    }
    return 0;
}

int agent_checkpoint_load(const char *path, const char *want_spec, uint32_t want_dim,
                          agent_checkpoint_meta *meta, float *params, float *momentum, char *err,
                          size_t errlen)
{
    if (!params)
        return fail(err, errlen, AGENT_CHECKPOINT_EINVAL, "checkpoint: NULL parameter buffer");
    if (sodium_init() < 0)
        return fail(err, errlen, AGENT_CHECKPOINT_EIO, "libsodium failed to initialise");
    uint8_t h[AGENT_CHECKPOINT_HEADER_SIZE];
    agent_checkpoint_meta m;
    int fd = -1;
    int rc = open_checked(path, &fd, h, &m, err, errlen);
    if (rc)
        return rc;
    /* Check what the caller expects before reading megabytes; a corrupt
     * header that happens to pass is still caught by the checksum below. */
    if (want_spec && strcmp(want_spec, m.spec)) {
        close(fd);
        return fail(err, errlen, AGENT_CHECKPOINT_ESPEC,
                    "%s: checkpoint is for model '%s', this agent runs '%s'", path, m.spec,
                    want_spec);
    }
    if (want_dim && want_dim != m.dim) {
        close(fd);
        return fail(err, errlen, AGENT_CHECKPOINT_EDIM,
                    "%s: checkpoint has %u parameters, this model has %u", path, m.dim, want_dim);
    }
    size_t n = (size_t)m.dim * (m.has_momentum ? 2 : 1);
    float *tmp = malloc(n * sizeof *tmp);
    if (!tmp) {
        close(fd);
        return fail(err, errlen, AGENT_CHECKPOINT_ENOMEM, "%s: cannot allocate %zu bytes", path,
                    n * sizeof *tmp);
    }
    crypto_generichash_state hs;
    crypto_generichash_init(&hs, NULL, 0, AGENT_CHECKPOINT_HASH_SIZE);
    crypto_generichash_update(&hs, h, sizeof h);
    crypto_generichash_update(&hs, (const uint8_t *)m.spec, strlen(m.spec));
    bool finite = true;
    int r = r_floats(fd, &hs, tmp, m.dim, &finite);
    if (!r && m.has_momentum)
        r = r_floats(fd, &hs, tmp + m.dim, m.dim, &finite);
    uint8_t stored[AGENT_CHECKPOINT_HASH_SIZE], computed[AGENT_CHECKPOINT_HASH_SIZE];
    if (!r)
        r = read_full(fd, stored, sizeof stored);
    close(fd);
    if (r) {
        rc = fail(err, errlen, r < 0 ? AGENT_CHECKPOINT_EIO : AGENT_CHECKPOINT_ETRUNC,
                  "%s: reading the vectors failed (file changed while reading?)", path);
        goto out;
    }
    crypto_generichash_final(&hs, computed, sizeof computed);
    if (sodium_memcmp(stored, computed, sizeof stored) != 0) {
        rc = fail(err, errlen, AGENT_CHECKPOINT_ECHECKSUM,
                  "%s: checksum mismatch: the file is corrupt; delete it to start fresh or "
                  "restore a copy",
                  path);
        goto out;
    }
    if (!finite) {
        rc = fail(err, errlen, AGENT_CHECKPOINT_ENONFINITE, "%s: holds NaN or infinite values",
                  path);
        goto out;
    }
    memcpy(params, tmp, (size_t)m.dim * sizeof *tmp);
    if (momentum && m.has_momentum)
        memcpy(momentum, tmp + m.dim, (size_t)m.dim * sizeof *tmp);
    if (meta)
        *meta = m;
out:
    free(tmp);
    return rc;
}

int agent_checkpoint_remove_stale(const char *path, unsigned *removed)
{
    char dir[AGENT_CHECKPOINT_PATH_MAX];
    char prefix[AGENT_CHECKPOINT_PATH_MAX];
    if (removed)
        *removed = 0;
    if (!path || strlen(path) >= AGENT_CHECKPOINT_PATH_MAX - 8)
        return AGENT_CHECKPOINT_EINVAL;
    dir_of(path, dir, sizeof dir);
    const char *slash = strrchr(path, '/');
    snprintf(prefix, sizeof prefix, "%s.tmp.", slash ? slash + 1 : path);
    DIR *d = opendir(dir);
    if (!d)
        return AGENT_CHECKPOINT_EIO;
    struct dirent *e;
    size_t pl = strlen(prefix);
    while ((e = readdir(d)) != NULL) {
        /* mkstemp's suffix is exactly 6 characters */
        if (strncmp(e->d_name, prefix, pl) || strlen(e->d_name) != pl + 6)
            continue;
        char full[2 * AGENT_CHECKPOINT_PATH_MAX + 2];
        snprintf(full, sizeof full, "%s/%s", dir, e->d_name);
        if (unlink(full) == 0 && removed)
            (*removed)++;
    }
    closedir(d);
    return 0;
}

int agent_checkpoint_move_aside(const char *path, int64_t when, char *moved, size_t cap, char *err,
                                size_t errlen)
{
    if (!path || !moved || strlen(path) + AGENT_CHECKPOINT_ASIDE_SUFFIX_MAX >= cap ||
        strlen(path) >= AGENT_CHECKPOINT_PATH_MAX)
        return fail(err, errlen, AGENT_CHECKPOINT_EINVAL, "%s: path too long to move aside",
                    path ? path : "(null)");
    struct stat st;
    if (lstat(path, &st) != 0)
        return fail(err, errlen, AGENT_CHECKPOINT_ENOENT, "%s: %s", path, strerror(errno));
    time_t t = (time_t)when;
    struct tm tm;
    char stamp[32];
    if (!gmtime_r(&t, &tm) || !strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm))
        snprintf(stamp, sizeof stamp, "%lld", (long long)when);
    for (int k = 0; k < 100; k++) {
        if (k == 0)
            snprintf(moved, cap, "%s.unusable-%s", path, stamp);
        else
            snprintf(moved, cap, "%s.unusable-%s-%d", path, stamp, k);
        /* link + unlink never replaces an existing name (rename would). */
        if (link(path, moved) == 0) {
            if (unlink(path) != 0) {
                int e = errno;
                unlink(moved);
                return fail(err, errlen, AGENT_CHECKPOINT_EIO,
                            "%s: cannot remove after linking %s: %s", path, moved, strerror(e));
            }
            char dir[AGENT_CHECKPOINT_PATH_MAX];
            dir_of(path, dir, sizeof dir);
            int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            if (dfd >= 0) {
                fsync(dfd);
                close(dfd);
            }
            return AGENT_CHECKPOINT_OK;
        }
        if (errno != EEXIST)
            return fail(err, errlen, AGENT_CHECKPOINT_EIO, "%s: cannot move it to %s: %s", path,
                        moved, strerror(errno));
    }
    return fail(err, errlen, AGENT_CHECKPOINT_EIO, "%s: 100 .unusable names taken already", path);
}
