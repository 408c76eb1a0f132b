/* fuzz_json — libFuzzer target for common/json: the flat-object reader that
 * `murmur status` runs on a remote agent's /status document, and the writer
 * (docs/FUZZING.md).
 *
 * Input: byte 0 picks the mode.
 *   even: the rest is a document (NUL-terminated at its first NUL) for the
 *     reader;
 *   odd: the rest describes up to 8 members (u8 type % 6: string, u64, i64,
 *     number, bool, null; u8 key length % 12 and the key's bytes; then the
 *     value: a string's u8 length % 24 and bytes, 8 bytes for numbers, one
 *     for bool), written with the writer (compact, or indented when bit 1 of
 *     byte 0 is set) and read back.
 * Properties, any violation aborts:
 *   - the walk returns 1 per member and ends with 0 or -1, within one step
 *     per byte of the document, keys and values NUL-terminated in their
 *     buffers; with small buffers it gives the same members, each cut to
 *     the buffer;
 *   - common_json_get agrees with the walk: the value of a key's first
 *     member when the whole walk succeeded (keys under 127 bytes; longer
 *     ones are never found);
 *   - writer then reader: the document is finished without error and reads
 *     back as the same keys and values (strings unescaped, with bytes
 *     below 0x20 other than \n \r \t, and 0x7f, read as '?'; integers in
 *     decimal; numbers exactly, non-finite ones as null; true, false, null).
 */
#define _GNU_SOURCE
#include "tests/fuzz/fuzz_util.h"

#include <inttypes.h>
#include <math.h>

#include "common/json.h"

#define MEMBERS_MAX 8

static void check_reader(const char *doc)
{
    size_t n = strlen(doc);
    common_json_reader r, rs;
    common_json_reader_init(&r, doc);
    common_json_reader_init(&rs, doc);
    char key[256], val[1024], ks[5], vs[7];
    int rc = 0, steps = 0, complete = 0;
    for (;;) {
        rc = common_json_next(&r, key, sizeof key, val, sizeof val);
        int rcs = common_json_next(&rs, ks, sizeof ks, vs, sizeof vs);
        FUZZ_CHECK(rc == 1 || rc == 0 || rc == -1);
        FUZZ_CHECK(rcs == rc);
        if (rc != 1)
            break;
        FUZZ_CHECK(memchr(key, 0, sizeof key) && memchr(val, 0, sizeof val));
        FUZZ_CHECK(strlen(ks) == (strlen(key) < sizeof ks ? strlen(key) : sizeof ks - 1));
        FUZZ_CHECK(strncmp(ks, key, sizeof ks - 1) == 0);
        FUZZ_CHECK(strncmp(vs, val, sizeof vs - 1) == 0);
        FUZZ_CHECK(++steps <= (int)n + 1);
    }
    complete = rc == 0;
    /* common_json_get against the walk, for a complete document */
    if (!complete)
        return;
    common_json_reader_init(&r, doc);
    while (common_json_next(&r, key, sizeof key, val, sizeof val) == 1) {
        if (strlen(key) >= 127)
            continue; /* common_json_get never finds such keys (common/json.h) */
        common_json_reader f;
        common_json_reader_init(&f, doc);
        char k2[256], v2[1024], first[1024] = "";
        while (common_json_next(&f, k2, sizeof k2, v2, sizeof v2) == 1)
            if (!strcmp(k2, key)) {
                snprintf(first, sizeof first, "%s", v2);
                break;
            }
        char got[1024];
        FUZZ_CHECK(common_json_get(doc, key, got, sizeof got) == 1);
        FUZZ_CHECK(strcmp(got, first) == 0);
    }
}

static void readable(char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c < 0x20 && c != '\n' && c != '\r' && c != '\t') || c == 0x7f)
            *s = '?';
    }
}

static void check_writer(const uint8_t *d, size_t size, unsigned indent)
{
    char keys[MEMBERS_MAX][13], vals[MEMBERS_MAX][64];
    int types[MEMBERS_MAX], n = 0;
    char buf[4096];
    common_json j;
    common_json_init_buf(&j, buf, sizeof buf, indent);
    common_json_object_begin(&j, NULL);
    size_t at = 0;
#define NEXT() (at < size ? d[at++] : 0)
    while (at < size && n < MEMBERS_MAX) {
        int t = NEXT() % 6;
        size_t kl = NEXT() % 12;
        memset(keys[n], 0, sizeof keys[n]);
        for (size_t k = 0; k < kl && at < size; k++)
            keys[n][k] = (char)(NEXT() ?: 'k');
        uint64_t u = 0;
        if (t >= 1 && t <= 3)
            for (int k = 0; k < 8; k++)
                u = u << 8 | NEXT();
        switch (t) {
        case 0: {
            char s[24] = "";
            size_t vl = NEXT() % 24;
            for (size_t k = 0; k < vl && k < sizeof s - 1 && at < size; k++)
                s[k] = (char)(NEXT() ?: 's');
            common_json_string(&j, keys[n], s);
            snprintf(vals[n], sizeof vals[n], "%s", s);
            readable(vals[n]);
            break;
        }
        case 1:
            common_json_u64(&j, keys[n], u);
            snprintf(vals[n], sizeof vals[n], "%" PRIu64, u);
            break;
        case 2:
            common_json_i64(&j, keys[n], (int64_t)u);
            snprintf(vals[n], sizeof vals[n], "%" PRId64, (int64_t)u);
            break;
        case 3: {
            double v;
            memcpy(&v, &u, sizeof v);
            common_json_number(&j, keys[n], v);
            if (!isfinite(v))
                snprintf(vals[n], sizeof vals[n], "null");
            else
                memcpy(vals[n], &v, sizeof v); /* compared by value below */
            break;
        }
        case 4: {
            int b = NEXT() & 1;
            common_json_bool(&j, keys[n], b);
            snprintf(vals[n], sizeof vals[n], "%s", b ? "true" : "false");
            break;
        }
        default:
            common_json_null(&j, keys[n]);
            snprintf(vals[n], sizeof vals[n], "null");
            break;
        }
        types[n] = t == 3 && strcmp(vals[n], "null") ? 3 : 0;
        readable(keys[n]);
        n++;
    }
#undef NEXT
    common_json_end(&j);
    size_t len;
    FUZZ_CHECK(common_json_finish(&j, &len) == 0 && len == strlen(buf));
    common_json_reader r;
    common_json_reader_init(&r, buf);
    char key[64], val[128];
    for (int m = 0; m < n; m++) {
        int rc = common_json_next(&r, key, sizeof key, val, sizeof val);
        if (rc != 1)
            fprintf(stderr, "member %d of %d: %d\n%s", m, n, rc, buf);
        FUZZ_CHECK(rc == 1);
        FUZZ_CHECK(strcmp(key, keys[m]) == 0);
        if (types[m] == 3) {
            double want, got;
            memcpy(&want, vals[m], sizeof want);
            char *end;
            got = strtod(val, &end);
            FUZZ_CHECK(*end == '\0' && got == want && signbit(got) == signbit(want));
        } else {
            FUZZ_CHECK(strcmp(val, vals[m]) == 0);
        }
    }
    FUZZ_CHECK(common_json_next(&r, key, sizeof key, val, sizeof val) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (data[0] & 1) {
        check_writer(data + 1, size - 1, (data[0] & 2) ? 2 : 0);
    } else {
        char *doc = fuzz_strdup(data + 1, size - 1);
        check_reader(doc);
        free(doc);
    }
    return 0;
}
