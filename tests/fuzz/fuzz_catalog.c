/* fuzz_catalog — libFuzzer target for the agent's shard catalog loader
 * (agent/catalog.c, SHARDS_DIR/catalog as `murmur shard` writes it;
 * docs/FUZZING.md).
 *
 * Input: the catalog file, written to a fresh file in a private directory
 * (the loader reads SHARDS_DIR/catalog).
 * The format: one shard per line, "HASH INDEX SAMPLES" (64 hex digits, the
 * line's index from 0, the shard's sample count), lines starting with '#'
 * (after blanks) and blank lines skipped; at least one shard.
 * Properties, any violation aborts:
 *   - an error comes with a message naming the file;
 *   - on success the catalog holds one id per shard line, in order, each
 *     the line's hash, and the sample total is the sum of the counts;
 *   - a file whose every shard line is exactly "HASH INDEX SAMPLES" (lower
 *     case hex, decimal numbers, single spaces) with the right indices, at
 *     most 1000 of them, and whose other lines are comments or blank (of any
 *     length: `murmur shard` writes the data path into its header comment)
 *     loads.
 */
#define _GNU_SOURCE
#include "tests/fuzz/fuzz_util.h"

#include <ctype.h>
#include <inttypes.h>

#include "agent/runtime_internal.h"

#define SHARDS_MAX 1000

static char dir[64];

static void remove_dir(void)
{
    char path[128];
    snprintf(path, sizeof path, "%s/catalog", dir);
    unlink(path);
    rmdir(dir);
}

static int hexval(int c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Parse a canonical shard line "HASH INDEX SAMPLES"; 0 on success. */
static int canonical(const uint8_t *s, size_t len, uint32_t want_index, uint8_t id[32],
                     uint64_t *samples)
{
    if (len < 64 + 4 || s[64] != ' ')
        return -1;
    for (size_t i = 0; i < 32; i++) {
        int a = hexval(s[2 * i]), b = hexval(s[2 * i + 1]);
        if (a < 0 || b < 0)
            return -1;
        id[i] = (uint8_t)(a << 4 | b);
    }
    char buf[64];
    size_t rest = len - 65;
    if (rest >= sizeof buf)
        return -1;
    memcpy(buf, s + 65, rest);
    buf[rest] = '\0';
    char want[32];
    snprintf(want, sizeof want, "%" PRIu32 " ", want_index);
    if (strncmp(buf, want, strlen(want)))
        return -1;
    const char *n = buf + strlen(want);
    if (!*n || (n[0] == '0' && n[1]) || strspn(n, "0123456789") != strlen(n) || strlen(n) > 9)
        return -1;
    *samples = strtoull(n, NULL, 10);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "%s/murmur-fuzz-XXXXXX",
                 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
        FUZZ_CHECK(mkdtemp(dir) != NULL);
        atexit(remove_dir);
    }
    char path[128];
    snprintf(path, sizeof path, "%s/catalog", dir);
    FILE *f = fopen(path, "wb");
    FUZZ_CHECK(f != NULL);
    FUZZ_CHECK(fwrite(data, 1, size, f) == size || size == 0);
    FUZZ_CHECK(fclose(f) == 0);

    /* the independent reading: is every line canonical or a comment? */
    static uint8_t want[SHARDS_MAX][32];
    uint32_t n = 0;
    uint64_t total = 0;
    int canon = 1;
    for (size_t at = 0; at < size && canon;) {
        const uint8_t *nl = memchr(data + at, '\n', size - at);
        size_t len = nl ? (size_t)(nl - (data + at)) : size - at;
        const uint8_t *s = data + at;
        at += len + (nl != NULL);
        if (memchr(s, 0, len) || memchr(s, '\r', len)) {
            canon = 0;
            break;
        }
        size_t k = 0;
        while (k < len && (s[k] == ' ' || s[k] == '\t'))
            k++;
        if (k == len || s[k] == '#')
            continue;
        uint64_t samples;
        if (n == SHARDS_MAX || canonical(s, len, n, want[n], &samples))
            canon = 0;
        else
            total += samples, n++;
    }
    canon &= n > 0;

    agent_runtime *a = calloc(1, sizeof *a);
    FUZZ_CHECK(a != NULL);
    snprintf(a->cfg.shards_dir, sizeof a->cfg.shards_dir, "%s", dir);
    char err[1024] = "";
    int rc = agent_catalog_load(a, err, sizeof err);
    if (rc != 0) {
        if (canon)
            fprintf(stderr, "a well-formed catalog of %u shards refused: %s\n", n, err);
        FUZZ_CHECK(!canon);
        FUZZ_CHECK(fuzz_has_message(err, sizeof err) && strstr(err, dir) != NULL);
    } else {
        FUZZ_CHECK(a->n_catalog >= 1 && a->catalog != NULL);
        if (canon) {
            FUZZ_CHECK(a->n_catalog == n);
            FUZZ_CHECK(memcmp(a->catalog, want, (size_t)n * 32) == 0);
            FUZZ_CHECK(a->catalog_samples == total);
        }
    }
    free(a->catalog);
    free(a);
    return 0;
}
