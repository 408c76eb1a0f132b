#include "agent/keys.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

_Static_assert(AGENT_KEYS_HEX_SIZE == 65, "64 hex digits and a NUL");

const char *agent_keys_strerror(int err)
{
    static const char *const names[AGENT_KEYS_ERR_COUNT] = {
        [AGENT_KEYS_OK] = "success",
        [AGENT_KEYS_EINVAL] = "invalid argument",
        [AGENT_KEYS_EIO] = "cannot read or write the key file",
        [AGENT_KEYS_EEXIST] = "key file exists",
        [AGENT_KEYS_EMODE] = "key file permissions too open",
        [AGENT_KEYS_ESIZE] = "key file has the wrong size",
        [AGENT_KEYS_EFORMAT] = "key file content is malformed",
        [AGENT_KEYS_ETOOMANY] = "too many keys",
    };
    if (err < 0 || err >= AGENT_KEYS_ERR_COUNT)
        return "unknown error";
    return names[err];
}

static int say(char *msg, size_t cap, int err, const char *fmt, ...)
{
    if (msg && cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, cap, fmt, ap);
        va_end(ap);
    }
    return err;
}

void agent_keys_hex(const uint8_t pk[NET_PUBLIC_KEY_SIZE], char out[AGENT_KEYS_HEX_SIZE])
{
    sodium_bin2hex(out, AGENT_KEYS_HEX_SIZE, pk, NET_PUBLIC_KEY_SIZE);
}

int agent_keys_unhex(const char *hex, size_t len, uint8_t pk[NET_PUBLIC_KEY_SIZE])
{
    if (!hex || len != 2 * NET_PUBLIC_KEY_SIZE)
        return AGENT_KEYS_EFORMAT;
    size_t got = 0;
    const char *end = NULL;
    if (sodium_hex2bin(pk, NET_PUBLIC_KEY_SIZE, hex, len, NULL, &got, &end) != 0 ||
        got != NET_PUBLIC_KEY_SIZE || end != hex + len)
        return AGENT_KEYS_EFORMAT;
    return AGENT_KEYS_OK;
}

/* Write data to path atomically: PATH.tmp, fsync, rename. */
static int write_file(const char *path, const void *data, size_t len, mode_t mode, int force,
                      char *msg, size_t cap)
{
    char tmp[AGENT_KEYS_PATH_MAX];
    if (strlen(path) + 5 > sizeof tmp)
        return say(msg, cap, AGENT_KEYS_EINVAL, "%s: path too long", path);
    struct stat st;
    if (!force && lstat(path, &st) == 0)
        return say(msg, cap, AGENT_KEYS_EEXIST,
                   "%s exists; refusing to overwrite a key (use --force to replace it)", path);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    unlink(tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0)
        return say(msg, cap, AGENT_KEYS_EIO, "%s: cannot create: %s", tmp, strerror(errno));
    int ok = fchmod(fd, mode) == 0;
    const uint8_t *p = data;
    size_t left = len;
    while (ok && left) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR)
            continue;
        ok = w > 0;
        if (ok) {
            p += w;
            left -= (size_t)w;
        }
    }
    int saved = errno;
    ok = ok && fsync(fd) == 0;
    if (!ok)
        saved = errno;
    ok = close(fd) == 0 && ok;
    if (ok && rename(tmp, path) != 0) {
        saved = errno;
        ok = 0;
    }
    if (!ok) {
        unlink(tmp);
        return say(msg, cap, AGENT_KEYS_EIO, "%s: cannot write: %s", path, strerror(saved));
    }
    return AGENT_KEYS_OK;
}

/* Read a whole small file (at most cap bytes; *len = size). If secret, the
 * file must be a regular file with no group/other permission bits. */
static int read_file(const char *path, uint8_t *buf, size_t cap, size_t *len, int secret,
                     size_t want, const char *what, char *msg, size_t mcap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return say(msg, mcap, AGENT_KEYS_EIO, "%s: cannot open %s: %s", path, what,
                   strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return say(msg, mcap, AGENT_KEYS_EIO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return say(msg, mcap, AGENT_KEYS_EMODE, "%s: not a regular file", path);
    }
    if (secret && (st.st_mode & 077)) {
        close(fd);
        return say(msg, mcap, AGENT_KEYS_EMODE,
                   "%s: mode %04o lets other users read or change the %s; run 'chmod 600 %s'", path,
                   (unsigned)(st.st_mode & 07777), what, path);
    }
    if (want && (size_t)st.st_size != want) {
        close(fd);
        return say(msg, mcap, AGENT_KEYS_ESIZE, "%s: %lld bytes, but a %s is exactly %zu bytes",
                   path, (long long)st.st_size, what, want);
    }
    if ((size_t)st.st_size > cap) {
        close(fd);
        return say(msg, mcap, AGENT_KEYS_ESIZE, "%s: %lld bytes, more than a %s can be (%zu)", path,
                   (long long)st.st_size, what, cap);
    }
    size_t got = 0;
    while (got < cap) {
        ssize_t r = read(fd, buf + got, cap - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            close(fd);
            sodium_memzero(buf, cap);
            return say(msg, mcap, AGENT_KEYS_EIO, "%s: read failed: %s", path, strerror(e));
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (want && got != want) {
        sodium_memzero(buf, cap);
        return say(msg, mcap, AGENT_KEYS_ESIZE, "%s: read %zu bytes, expected %zu", path, got,
                   want);
    }
    *len = got;
    return AGENT_KEYS_OK;
}

int agent_keys_write_identity(const char *dir, const net_identity *id, int force, char *msg,
                              size_t msg_cap)
{
    if (!dir || !id)
        return say(msg, msg_cap, AGENT_KEYS_EINVAL, "no directory or identity");
    char sk_path[AGENT_KEYS_PATH_MAX], pk_path[AGENT_KEYS_PATH_MAX];
    if ((size_t)snprintf(sk_path, sizeof sk_path, "%s/%s", dir, AGENT_KEYS_SECRET_NAME) >=
            sizeof sk_path - 8 ||
        (size_t)snprintf(pk_path, sizeof pk_path, "%s/%s", dir, AGENT_KEYS_PUBLIC_NAME) >=
            sizeof pk_path - 8)
        return say(msg, msg_cap, AGENT_KEYS_EINVAL, "%s: directory path too long", dir);
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return say(msg, msg_cap, AGENT_KEYS_EIO, "%s: not a directory (create it first)", dir);
    if (!force && (lstat(sk_path, &st) == 0 || lstat(pk_path, &st) == 0))
        return say(msg, msg_cap, AGENT_KEYS_EEXIST,
                   "%s already holds a murmur key; refusing to overwrite it (use --force)", dir);
    char line[AGENT_KEYS_HEX_SIZE + 1];
    agent_keys_hex(id->pk, line);
    line[AGENT_KEYS_HEX_SIZE - 1] = '\n';
    line[AGENT_KEYS_HEX_SIZE] = 0;
    int rc = write_file(sk_path, id->sk, NET_SECRET_KEY_SIZE, 0600, 1, msg, msg_cap);
    if (rc)
        return rc;
    return write_file(pk_path, line, AGENT_KEYS_HEX_SIZE, 0644, 1, msg, msg_cap);
}

int agent_keys_read_identity(const char *path, net_identity *id, char *msg, size_t msg_cap)
{
    if (!path || !id)
        return say(msg, msg_cap, AGENT_KEYS_EINVAL, "no path or identity");
    uint8_t sk[NET_SECRET_KEY_SIZE];
    size_t len = 0;
    int rc = read_file(path, sk, sizeof sk, &len, 1, sizeof sk, "murmur secret key", msg, msg_cap);
    if (rc) {
        net_identity_wipe(id);
        return rc;
    }
    rc = net_identity_from_secret(id, sk);
    sodium_memzero(sk, sizeof sk);
    if (rc)
        return say(msg, msg_cap, AGENT_KEYS_EFORMAT,
                   "%s: not an Ed25519 secret key (its public half does not match its seed); "
                   "create one with 'murmur keygen --out DIR'",
                   path);
    return AGENT_KEYS_OK;
}

int agent_keys_read_public(const char *path, uint8_t pk[NET_PUBLIC_KEY_SIZE], char *msg,
                           size_t msg_cap)
{
    if (!path || !pk)
        return say(msg, msg_cap, AGENT_KEYS_EINVAL, "no path or key");
    char buf[AGENT_KEYS_HEX_SIZE + 2];
    size_t len = 0;
    int rc =
        read_file(path, (uint8_t *)buf, sizeof buf, &len, 0, 0, "murmur public key", msg, msg_cap);
    if (rc)
        return rc;
    while (len && (buf[len - 1] == '\n' || buf[len - 1] == '\r' || buf[len - 1] == ' '))
        len--;
    if (agent_keys_unhex(buf, len, pk))
        return say(msg, msg_cap, AGENT_KEYS_EFORMAT,
                   "%s: a public key file holds exactly 64 hex digits", path);
    return AGENT_KEYS_OK;
}

int agent_keys_write_network(const char *path, const uint8_t key[NET_NETWORK_KEY_SIZE], int force,
                             char *msg, size_t msg_cap)
{
    if (!path || !key)
        return say(msg, msg_cap, AGENT_KEYS_EINVAL, "no path or key");
    return write_file(path, key, NET_NETWORK_KEY_SIZE, 0600, force, msg, msg_cap);
}

int agent_keys_read_network(const char *path, uint8_t key[NET_NETWORK_KEY_SIZE], char *msg,
                            size_t msg_cap)
{
    if (!path || !key)
        return say(msg, msg_cap, AGENT_KEYS_EINVAL, "no path or key");
    size_t len = 0;
    int rc = read_file(path, key, NET_NETWORK_KEY_SIZE, &len, 1, NET_NETWORK_KEY_SIZE,
                       "network key", msg, msg_cap);
    if (rc)
        sodium_memzero(key, NET_NETWORK_KEY_SIZE);
    return rc;
}

int agent_keys_read_network_ring(const char *path, uint8_t *keys, size_t max, size_t *n, char *msg,
                                 size_t msg_cap)
{
    if (!path || !keys || !n || max == 0)
        return say(msg, msg_cap, AGENT_KEYS_EINVAL, "no path or output");
    *n = 0;
    size_t len = 0;
    /* Read one byte more than max keys: a longer file is refused. */
    size_t cap = max * NET_NETWORK_KEY_SIZE;
    int rc = read_file(path, keys, cap, &len, 1, 0, "network key", msg, msg_cap);
    if (rc)
        return rc;
    if (len == 0 || len % NET_NETWORK_KEY_SIZE) {
        sodium_memzero(keys, cap);
        return say(msg, msg_cap, AGENT_KEYS_ESIZE,
                   "%s: %zu bytes; a network key file holds 1 to %zu keys of exactly %u bytes "
                   "each (create one with 'murmur keygen --network-key FILE')",
                   path, len, max, NET_NETWORK_KEY_SIZE);
    }
    *n = len / NET_NETWORK_KEY_SIZE;
    return AGENT_KEYS_OK;
}

/* Read one line of an allow-list (up to '\n' or the end; at most cap - 1
 * bytes kept in buf, NUL-terminated, without the '\n'); *len = its whole
 * length, *nul = 1 if it holds a NUL byte. 0 at the end of the file. A NUL
 * must be refused, not ended at: fgets + strlen read "#\0<key>" as a
 * comment, and a key after a NUL past 255 bytes of a commented-out line
 * as a line of its own (found by fuzz_keys). */
static int allow_line(FILE *f, char *buf, size_t cap, size_t *len, int *nul)
{
    int c = getc(f);
    if (c == EOF)
        return 0;
    *len = 0;
    *nul = 0;
    for (; c != EOF && c != '\n'; c = getc(f)) {
        if (*len < cap - 1)
            buf[*len] = (char)c;
        *nul |= c == 0;
        (*len)++;
    }
    buf[*len < cap - 1 ? *len : cap - 1] = '\0';
    return 1;
}

int agent_keys_read_allow(const char *path, uint8_t *keys, size_t max, size_t *n, char *msg,
                          size_t msg_cap)
{
    if (!path || !n || (max && !keys))
        return say(msg, msg_cap, AGENT_KEYS_EINVAL, "no path or output");
    *n = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return say(msg, msg_cap, AGENT_KEYS_EIO, "%s: cannot open allow-list: %s", path,
                   strerror(errno));
    /* The list decides who may join: whoever can rewrite it can admit
     * anyone. Checked on the open descriptor, so the file read is the file
     * checked. Readable by all is fine (public keys are not secret). */
    struct stat st;
    int rc = AGENT_KEYS_OK;
    if (fstat(fd, &st) != 0)
        rc = say(msg, msg_cap, AGENT_KEYS_EIO, "%s: cannot stat: %s", path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        rc = say(msg, msg_cap, AGENT_KEYS_EMODE, "%s: the allow-list is not a regular file", path);
    else if (st.st_mode & 022)
        rc = say(msg, msg_cap, AGENT_KEYS_EMODE,
                 "%s: mode %04o lets other users change the allow-list (and admit any key); "
                 "run 'chmod go-w %s'",
                 path, (unsigned)(st.st_mode & 07777), path);
    else if (st.st_uid != geteuid() && st.st_uid != 0)
        rc = say(msg, msg_cap, AGENT_KEYS_EMODE,
                 "%s: owned by uid %u, so another user can change the allow-list; make it "
                 "owned by this user (uid %u) or root",
                 path, (unsigned)st.st_uid, (unsigned)geteuid());
    FILE *f = rc ? NULL : fdopen(fd, "r");
    if (!f) {
        close(fd);
        return rc ? rc
                  : say(msg, msg_cap, AGENT_KEYS_EIO, "%s: cannot read allow-list: %s", path,
                        strerror(errno));
    }
    char line[256];
    unsigned lineno = 0;
    size_t len;
    int nul;
    while (allow_line(f, line, sizeof line, &len, &nul)) {
        lineno++;
        if (len >= sizeof line - 1) {
            rc = say(msg, msg_cap, AGENT_KEYS_EFORMAT, "%s:%u: line too long", path, lineno);
            break;
        }
        if (nul) {
            rc = say(msg, msg_cap, AGENT_KEYS_EFORMAT, "%s:%u: NUL byte in the line", path, lineno);
            break;
        }
        char *s = line;
        while (*s == ' ' || *s == '\t')
            s++;
        len = strlen(s);
        while (len && (s[len - 1] == '\n' || s[len - 1] == '\r' || s[len - 1] == ' ' ||
                       s[len - 1] == '\t'))
            len--;
        if (len == 0 || s[0] == '#')
            continue;
        if (*n >= max) {
            rc = say(msg, msg_cap, AGENT_KEYS_ETOOMANY, "%s:%u: more than %zu keys", path, lineno,
                     max);
            break;
        }
        if (agent_keys_unhex(s, len, keys + *n * NET_PUBLIC_KEY_SIZE)) {
            rc = say(msg, msg_cap, AGENT_KEYS_EFORMAT,
                     "%s:%u: not a public key (64 hex digits, as in a murmur.pub file)", path,
                     lineno);
            break;
        }
        (*n)++;
    }
    if (!rc && ferror(f))
        rc = say(msg, msg_cap, AGENT_KEYS_EIO, "%s: read failed", path);
    fclose(f);
    if (rc)
        *n = 0;
    return rc;
}
