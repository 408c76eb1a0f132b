/* fuzz_checkpoint — libFuzzer target for agent/checkpoint's loader
 * (docs/FUZZING.md).
 *
 * Input: byte 0 holds flags, the rest is a checkpoint file, read through an
 * in-memory file (the loader takes a path).
 *   bit 0: write the true BLAKE2b-256 checksum over the last 32 bytes first,
 *          so that inputs get past the checksum to the value checks;
 *   bit 1: ask for the spec "softmax"; bit 2: ask for dim 3;
 *   bit 3: pass no momentum buffer; bit 4: pass no meta.
 * Properties, any violation aborts:
 *   - read_meta returns OK, ETRUNC, EMAGIC, EVERSION or EMALFORMED; load
 *     that set plus ECHECKSUM, ENONFINITE, ESPEC and EDIM, with a message,
 *     and the same code as read_meta when read_meta fails;
 *   - ESPEC / EDIM only when the header's spec / dim differ from the ones
 *     asked for, and never when they match;
 *   - on any error the caller's parameters, momentum and meta are untouched
 *     (every byte, including past dim);
 *   - on success meta equals read_meta's, the parameters (and momentum when
 *     the file has it) are exactly the file's little-endian floats, all
 *     finite, and nothing past dim was written;
 *   - round trip: saving what was loaded writes back the input bytes exactly.
 */
#define _GNU_SOURCE
#include "tests/fuzz/fuzz_util.h"

#include <sodium.h>
#include <stdbool.h>

#include "agent/checkpoint.h"

#define SENTINEL 0xA5

static char save_dir[64];

static void remove_save_dir(void)
{
    char path[128];
    snprintf(path, sizeof path, "%s/ck", save_dir);
    unlink(path);
    rmdir(save_dir);
}

static int all_bytes(const void *p, size_t n, uint8_t v)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i] != v)
            return 0;
    return 1;
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p)
{
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

static int meta_equal(const agent_checkpoint_meta *a, const agent_checkpoint_meta *b)
{
    return strcmp(a->spec, b->spec) == 0 && a->dim == b->dim && a->step == b->step &&
           a->round == b->round && a->epoch == b->epoch && a->has_momentum == b->has_momentum;
}

static void round_trip(const uint8_t *b, size_t len, const agent_checkpoint_meta *m,
                       const float *params, const float *momentum)
{
    if (!save_dir[0]) {
        const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(save_dir, sizeof save_dir, "%s/murmur-fuzz-XXXXXX", base);
        FUZZ_CHECK(mkdtemp(save_dir) != NULL);
        atexit(remove_save_dir);
    }
    char path[128], err[256];
    snprintf(path, sizeof path, "%s/ck", save_dir);
    agent_checkpoint ck = {.spec = m->spec,
                           .dim = m->dim,
                           .step = m->step,
                           .round = m->round,
                           .epoch = m->epoch,
                           .params = params,
                           .momentum = m->has_momentum ? momentum : NULL};
    FUZZ_CHECK(agent_checkpoint_save(path, &ck, err, sizeof err) == AGENT_CHECKPOINT_OK);
    FILE *f = fopen(path, "rb");
    FUZZ_CHECK(f != NULL);
    uint8_t *again = malloc(len + 1);
    FUZZ_CHECK(again != NULL);
    size_t got = fread(again, 1, len + 1, f);
    fclose(f);
    FUZZ_CHECK(got == len && memcmp(again, b, len) == 0);
    free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t flags = data[0];
    size_t len = size - 1;
    uint8_t *b = fuzz_dup(data + 1, len);
    if ((flags & 1) && len >= AGENT_CHECKPOINT_HASH_SIZE) {
        FUZZ_CHECK(sodium_init() >= 0);
        crypto_generichash(b + len - AGENT_CHECKPOINT_HASH_SIZE, AGENT_CHECKPOINT_HASH_SIZE, b,
                           len - AGENT_CHECKPOINT_HASH_SIZE, NULL, 0);
    }
    char path[64];
    fuzz_memfile(0, b, len, path, sizeof path);

    char err[512];
    agent_checkpoint_meta rm;
    memset(&rm, 0, sizeof rm);
    int mrc = agent_checkpoint_read_meta(path, &rm, err, sizeof err);
    FUZZ_CHECK(mrc == AGENT_CHECKPOINT_OK || mrc == AGENT_CHECKPOINT_ETRUNC ||
               mrc == AGENT_CHECKPOINT_EMAGIC || mrc == AGENT_CHECKPOINT_EVERSION ||
               mrc == AGENT_CHECKPOINT_EMALFORMED);

    const char *want_spec = (flags & 2) ? "softmax" : NULL;
    uint32_t want_dim = (flags & 4) ? 3 : 0;
    /* Room for any dim this input can hold, plus a tail that must stay. */
    size_t cap = len / 4 + 8;
    float *params = malloc(cap * sizeof(float));
    float *momentum = (flags & 8) ? NULL : malloc(cap * sizeof(float));
    FUZZ_CHECK(params != NULL && ((flags & 8) || momentum != NULL));
    memset(params, SENTINEL, cap * sizeof(float));
    if (momentum)
        memset(momentum, SENTINEL, cap * sizeof(float));
    agent_checkpoint_meta lm;
    memset(&lm, SENTINEL, sizeof lm);
    err[0] = '\0';
    int rc = agent_checkpoint_load(path, want_spec, want_dim, (flags & 16) ? NULL : &lm, params,
                                   momentum, err, sizeof err);
    FUZZ_CHECK(rc >= 0 && rc < AGENT_CHECKPOINT_ERR_COUNT && rc != AGENT_CHECKPOINT_EIO &&
               rc != AGENT_CHECKPOINT_ENOENT && rc != AGENT_CHECKPOINT_EINVAL &&
               rc != AGENT_CHECKPOINT_ENOMEM);
    if (mrc != AGENT_CHECKPOINT_OK)
        FUZZ_CHECK(rc == mrc);
    if (rc == AGENT_CHECKPOINT_ESPEC)
        FUZZ_CHECK(mrc == AGENT_CHECKPOINT_OK && want_spec && strcmp(rm.spec, want_spec) != 0);
    if (rc == AGENT_CHECKPOINT_EDIM)
        FUZZ_CHECK(mrc == AGENT_CHECKPOINT_OK && want_dim && rm.dim != want_dim);
    if (mrc == AGENT_CHECKPOINT_OK && want_spec && strcmp(rm.spec, want_spec) != 0)
        FUZZ_CHECK(rc == AGENT_CHECKPOINT_ESPEC);

    if (rc != AGENT_CHECKPOINT_OK) {
        FUZZ_CHECK(fuzz_has_message(err, sizeof err));
        FUZZ_CHECK(all_bytes(params, cap * sizeof(float), SENTINEL));
        if (momentum)
            FUZZ_CHECK(all_bytes(momentum, cap * sizeof(float), SENTINEL));
        FUZZ_CHECK(all_bytes(&lm, sizeof lm, SENTINEL));
    } else {
        FUZZ_CHECK(mrc == AGENT_CHECKPOINT_OK);
        if (!(flags & 16))
            FUZZ_CHECK(meta_equal(&lm, &rm));
        FUZZ_CHECK(!want_dim || rm.dim == want_dim);
        size_t spec_len = strlen(rm.spec);
        FUZZ_CHECK(le32(b + 16) == spec_len && le32(b + 20) == rm.dim);
        FUZZ_CHECK(le64(b + 24) == rm.step && le64(b + 32) == rm.round && le64(b + 40) == rm.epoch);
        FUZZ_CHECK(rm.dim <= cap);
        const uint8_t *v = b + AGENT_CHECKPOINT_HEADER_SIZE + spec_len;
        for (uint32_t i = 0; i < rm.dim; i++) {
            uint32_t bits;
            memcpy(&bits, &params[i], 4);
            FUZZ_CHECK(bits == le32(v + 4 * i) && (bits & 0x7F800000u) != 0x7F800000u);
        }
        FUZZ_CHECK(all_bytes(params + rm.dim, (cap - rm.dim) * sizeof(float), SENTINEL));
        if (momentum) {
            size_t from = 0;
            if (rm.has_momentum) {
                for (uint32_t i = 0; i < rm.dim; i++) {
                    uint32_t bits;
                    memcpy(&bits, &momentum[i], 4);
                    FUZZ_CHECK(bits == le32(v + 4 * ((size_t)rm.dim + i)));
                }
                from = rm.dim;
            }
            FUZZ_CHECK(all_bytes(momentum + from, (cap - from) * sizeof(float), SENTINEL));
        }
        if (momentum || !rm.has_momentum)
            round_trip(b, len, &rm, params, momentum);
    }
    free(params);
    free(momentum);
    free(b);
    return 0;
}
