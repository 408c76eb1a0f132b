/* Golden byte vectors (tests/vectors/): the codec encoding at every width
 * and the wire header, compared byte for byte, so that any change of the
 * format (or of the random stream that drives stochastic rounding) shows up
 * as a failing test rather than as peers that silently disagree.
 *
 * File format (text): lines "key value" ('#' starts a comment line), then a
 * line "bytes" followed by the bytes in hex (whitespace ignored) to the end
 * of the file. docs/CODEC.md describes the inputs and how to regenerate:
 *   MURMUR_WRITE_VECTORS=1 build/tests/test_vectors
 * rewrites the codec files from the current code and then fails on purpose
 * (review the diff before committing). Wire header vectors are written by
 * hand and never regenerated. $MURMUR_VECTORS overrides the directory
 * (default tests/vectors, relative to the repository root where make test
 * runs). */
#include "tests/harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/codec.h"
#include "gossip/wire.h"

#define VEC_BYTES_MAX 4096u
#define VEC_KEYS_MAX  16u
#define VEC_LINE_MAX  512u

typedef struct vec_file {
    char keys[VEC_KEYS_MAX][32];
    char vals[VEC_KEYS_MAX][64];
    unsigned nkeys;
    uint8_t bytes[VEC_BYTES_MAX];
    size_t len;
} vec_file;

static void vec_path(char *out, size_t cap, const char *name)
{
    const char *dir = getenv("MURMUR_VECTORS");
    snprintf(out, cap, "%s/%s", dir ? dir : "tests/vectors", name);
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Parses a vector file; fails the test with the file name on any error. */
static void vec_load(const char *name, vec_file *v)
{
    char path[256], line[VEC_LINE_MAX];
    vec_path(path, sizeof path, name);
    FILE *f = fopen(path, "r");
    if (!f)
        fail_msg("cannot open %s (run from the repository root or set MURMUR_VECTORS)", path);
    memset(v, 0, sizeof *v);
    int in_bytes = 0, half = -1;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#')
            continue;
        if (!in_bytes) {
            char k[32], val[64];
            int got = sscanf(line, "%31s %63s", k, val);
            if (got == 1 && strcmp(k, "bytes") == 0) {
                in_bytes = 1;
            } else if (got == 2) {
                if (v->nkeys >= VEC_KEYS_MAX)
                    fail_msg("%s: more than %u keys", path, VEC_KEYS_MAX);
                strcpy(v->keys[v->nkeys], k);
                strcpy(v->vals[v->nkeys], val);
                v->nkeys++;
            } else if (got > 0) {
                fail_msg("%s: bad line '%s'", path, line);
            }
            continue;
        }
        for (const char *c = line; *c; c++) {
            if (*c == ' ' || *c == '\n' || *c == '\t' || *c == '\r')
                continue;
            int h = hexval(*c);
            if (h < 0)
                fail_msg("%s: bad hex digit '%c'", path, *c);
            if (half < 0) {
                half = h;
            } else {
                if (v->len >= VEC_BYTES_MAX)
                    fail_msg("%s: more than %u bytes", path, VEC_BYTES_MAX);
                v->bytes[v->len++] = (uint8_t)(half << 4 | h);
                half = -1;
            }
        }
    }
    fclose(f);
    if (!in_bytes || half >= 0)
        fail_msg("%s: missing 'bytes' section or odd number of hex digits", path);
}

static uint64_t vec_u64(const vec_file *v, const char *key)
{
    for (unsigned i = 0; i < v->nkeys; i++)
        if (strcmp(v->keys[i], key) == 0)
            return strtoull(v->vals[i], NULL, 0);
    fail_msg("vector has no key '%s'", key);
    return 0;
}

static const char *vec_str(const vec_file *v, const char *key)
{
    for (unsigned i = 0; i < v->nkeys; i++)
        if (strcmp(v->keys[i], key) == 0)
            return v->vals[i];
    fail_msg("vector has no key '%s'", key);
    return "";
}

/* ---- codec ---------------------------------------------------------------- */

#define CODEC_VEC_N     301u
#define CODEC_VEC_BLOCK 128u
#define CODEC_VEC_SEED  1u

/* The fixed input (docs/CODEC.md): k = (37 i) mod 101 - 50, every value an
 * exact float. Block 0 (i < 128): k / 8. Block 1: k / 8192 (a small
 * scale). Block 2 (45 values, a short block): 0 where i % 3 == 0, else
 * k * 64. */
static float codec_vec_input(uint32_t i)
{
    float k = (float)((int)((37u * i) % 101u) - 50);
    if (i < 128)
        return k / 8.0f;
    if (i < 256)
        return k / 8192.0f;
    return i % 3 == 0 ? 0.0f : k * 64.0f;
}

static const unsigned codec_widths[] = {32, 16, 8, 4, 2, 1};

static void write_codec_vector(unsigned bits, const uint8_t *enc, size_t len)
{
    char name[64], path[256];
    snprintf(name, sizeof name, "codec_b%u.hex", bits);
    vec_path(path, sizeof path, name);
    FILE *f = fopen(path, "w");
    if (!f)
        fail_msg("cannot write %s", path);
    fprintf(f,
            "# murmur codec golden vector, %u bits (docs/CODEC.md, \"Golden vectors\").\n"
            "# Input: x[i] for i < n as defined in tests/test_vectors.c codec_vec_input;\n"
            "# RNG: test_env seeded with `seed` (model_rng stream 0).\n"
            "bits %u\nblock %u\nn %u\nseed %u\nbytes\n",
            bits, bits, CODEC_VEC_BLOCK, CODEC_VEC_N, CODEC_VEC_SEED);
    for (size_t i = 0; i < len; i++)
        fprintf(f, "%02x%s", enc[i], (i % 32 == 31 || i + 1 == len) ? "\n" : "");
    fclose(f);
}

static void codec_golden(void **state)
{
    (void)state;
    const int rewrite = getenv("MURMUR_WRITE_VECTORS") != NULL;
    float x[CODEC_VEC_N], dec[CODEC_VEC_N], back[CODEC_VEC_N];
    static uint8_t enc[VEC_BYTES_MAX];
    static vec_file v;
    for (uint32_t i = 0; i < CODEC_VEC_N; i++)
        x[i] = codec_vec_input(i);
    for (size_t w = 0; w < sizeof codec_widths / sizeof codec_widths[0]; w++) {
        unsigned bits = codec_widths[w];
        test_env t;
        test_env_init(&t, CODEC_VEC_SEED);
        size_t size = gossip_codec_size(CODEC_VEC_N, bits, CODEC_VEC_BLOCK);
        assert_true(size <= sizeof enc);
        assert_int_equal(
            gossip_codec_encode(&t.env, x, CODEC_VEC_N, bits, CODEC_VEC_BLOCK, enc, size, dec),
            GOSSIP_OK);
        if (rewrite) {
            write_codec_vector(bits, enc, size);
            continue;
        }
        char name[64];
        snprintf(name, sizeof name, "codec_b%u.hex", bits);
        vec_load(name, &v);
        assert_int_equal(vec_u64(&v, "bits"), bits);
        assert_int_equal(vec_u64(&v, "block"), CODEC_VEC_BLOCK);
        assert_int_equal(vec_u64(&v, "n"), CODEC_VEC_N);
        assert_int_equal(vec_u64(&v, "seed"), CODEC_VEC_SEED);
        if (v.len != size)
            fail_msg("%s: %zu bytes, the codec produced %zu", name, v.len, size);
        for (size_t i = 0; i < size; i++)
            if (v.bytes[i] != enc[i])
                fail_msg("%s: byte %zu is %02x, the codec produced %02x", name, i, v.bytes[i],
                         enc[i]);
        /* the pinned bytes decode to the encoder's decoded copy */
        assert_int_equal(
            gossip_codec_decode(v.bytes, v.len, CODEC_VEC_N, bits, CODEC_VEC_BLOCK, back),
            GOSSIP_OK);
        assert_memory_equal(back, dec, sizeof back);
    }
    if (rewrite)
        fail_msg("MURMUR_WRITE_VECTORS: codec vectors rewritten; review `git diff tests/vectors`");
}

/* ---- wire header ---------------------------------------------------------- */

static const struct {
    const char *name;
    int err;
} err_names[] = {
    {"OK", GOSSIP_OK},
    {"ETRUNC", GOSSIP_ETRUNC},
    {"EMAGIC", GOSSIP_EMAGIC},
    {"EVERSION", GOSSIP_EVERSION},
    {"ETYPE", GOSSIP_ETYPE},
    {"ETOOBIG", GOSSIP_ETOOBIG},
    {"EMALFORMED", GOSSIP_EMALFORMED},
};

static int err_of(const char *name)
{
    for (size_t i = 0; i < sizeof err_names / sizeof err_names[0]; i++)
        if (strcmp(err_names[i].name, name) == 0)
            return err_names[i].err;
    fail_msg("unknown error name '%s' in a vector", name);
    return -1;
}

/* Valid headers: the fields encode to exactly the pinned bytes, and the
 * pinned bytes (followed by payload_len zero bytes) decode to the fields. */
static void wire_header_golden(void **state)
{
    (void)state;
    static const char *files[] = {"wire_header_ping.hex", "wire_header_mix_push.hex",
                                  "wire_header_model_chunk.hex"};
    static vec_file v;
    for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
        vec_load(files[k], &v);
        gossip_header h = {.version = GOSSIP_WIRE_VERSION,
                           .type = (uint8_t)vec_u64(&v, "type"),
                           .payload_len = (uint32_t)vec_u64(&v, "payload_len"),
                           .sender = vec_u64(&v, "sender"),
                           .epoch = vec_u64(&v, "epoch"),
                           .round = vec_u64(&v, "round")};
        uint8_t out[GOSSIP_HEADER_SIZE];
        gossip_header_encode(&h, out);
        assert_int_equal(v.len, GOSSIP_HEADER_SIZE);
        for (size_t i = 0; i < GOSSIP_HEADER_SIZE; i++)
            if (out[i] != v.bytes[i])
                fail_msg("%s: byte %zu is %02x, gossip_header_encode wrote %02x", files[k], i,
                         v.bytes[i], out[i]);
        size_t len = GOSSIP_HEADER_SIZE + (size_t)h.payload_len;
        uint8_t *frame = calloc(1, len);
        assert_non_null(frame);
        memcpy(frame, v.bytes, GOSSIP_HEADER_SIZE);
        gossip_header d;
        assert_int_equal(gossip_header_decode(frame, len, &d), GOSSIP_OK);
        assert_int_equal(d.version, GOSSIP_WIRE_VERSION);
        assert_int_equal(d.type, h.type);
        assert_int_equal(d.payload_len, h.payload_len);
        assert_true(d.sender == h.sender && d.epoch == h.epoch && d.round == h.round);
        assert_string_equal(gossip_msg_name(d.type), vec_str(&v, "name"));
        free(frame);
    }
}

/* Hostile headers: the pinned bytes, in a frame of frame_len bytes (zeros
 * after the given ones), are rejected with the pinned error. */
static void wire_header_rejects(void **state)
{
    (void)state;
    static const char *files[] = {"wire_header_bad_magic.hex", "wire_header_bad_version.hex",
                                  "wire_header_bad_type.hex",  "wire_header_too_big.hex",
                                  "wire_header_short.hex",     "wire_header_len_mismatch.hex"};
    static vec_file v;
    for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
        vec_load(files[k], &v);
        size_t len = (size_t)vec_u64(&v, "frame_len");
        assert_true(len >= v.len || len < GOSSIP_HEADER_SIZE);
        uint8_t *frame = calloc(1, len ? len : 1);
        assert_non_null(frame);
        memcpy(frame, v.bytes, v.len < len ? v.len : len);
        gossip_header d;
        int rc = gossip_header_decode(frame, len, &d);
        int want = err_of(vec_str(&v, "expect"));
        if (rc != want)
            fail_msg("%s: gossip_header_decode returned %s, the vector expects %s", files[k],
                     gossip_strerror(rc), gossip_strerror(want));
        free(frame);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(codec_golden),
        cmocka_unit_test(wire_header_golden),
        cmocka_unit_test(wire_header_rejects),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
