/* agent/checkpoint: round trips, every corruption, crash before rename,
 * big vectors. On every failed load the caller's buffers stay untouched. */
#include "tests/harness.h"

#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/checkpoint.h"

static char dir[64];
static char path[128];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/murmur-test-ckpt-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    snprintf(path, sizeof path, "%s/model.ckpt", dir);
    return sodium_init() < 0 ? -1 : 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd);
}

static void fill(float *v, uint32_t n, model_rng *rng)
{
    for (uint32_t i = 0; i < n; i++)
        v[i] = (float)((double)model_rng_u64(rng) / 18446744073709551616.0 * 2.0 - 1.0);
}

static uint8_t *slurp(const char *p, size_t *n)
{
    FILE *f = fopen(p, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    rewind(f);
    uint8_t *b = malloc(*n + 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, *n, f), *n);
    fclose(f);
    return b;
}

static void spit(const char *p, const uint8_t *b, size_t n)
{
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, n, f), n);
    fclose(f);
}

/* Recompute the trailing checksum so a deliberate edit passes it. */
static void rehash(uint8_t *b, size_t n)
{
    crypto_generichash(b + n - 32, 32, b, n - 32, NULL, 0);
}

static void round_trip(void **state)
{
    (void)state;
    uint64_t seed = test_seed(11);
    model_rng rng;
    model_rng_seed(&rng, seed, 0);
    enum { DIM = 1000 };
    float p[DIM], mom[DIM], p2[DIM], m2[DIM];
    fill(p, DIM, &rng);
    fill(mom, DIM, &rng);
    p[3] = -0.0f;
    p[4] = 1e-42f; /* subnormal survives */
    agent_checkpoint ck = {.spec = "mlp:256,128",
                           .dim = DIM,
                           .step = 123456789012ull,
                           .round = 77,
                           .epoch = 9,
                           .params = p,
                           .momentum = mom};
    char err[256] = "";
    assert_int_equal(agent_checkpoint_save(path, &ck, err, sizeof err), 0);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_size, 48 + 11 + 2 * 4 * DIM + 32);
    agent_checkpoint_meta meta;
    if (agent_checkpoint_load(path, "mlp:256,128", DIM, &meta, p2, m2, err, sizeof err))
        fail_msg("seed %llu: load failed: %s", (unsigned long long)seed, err);
    assert_memory_equal(p, p2, sizeof p);
    assert_memory_equal(mom, m2, sizeof mom);
    assert_string_equal(meta.spec, "mlp:256,128");
    assert_int_equal(meta.dim, DIM);
    assert_true(meta.step == 123456789012ull && meta.round == 77 && meta.epoch == 9);
    assert_true(meta.has_momentum);

    /* without momentum: the caller's momentum buffer is left alone */
    ck.momentum = NULL;
    ck.spec = "softmax";
    assert_int_equal(agent_checkpoint_save(path, &ck, err, sizeof err), 0);
    for (int i = 0; i < DIM; i++)
        m2[i] = 42.0f;
    assert_int_equal(agent_checkpoint_load(path, NULL, 0, &meta, p2, m2, err, sizeof err), 0);
    assert_false(meta.has_momentum);
    assert_string_equal(meta.spec, "softmax");
    assert_memory_equal(p, p2, sizeof p);
    for (int i = 0; i < DIM; i++)
        assert_true(m2[i] == 42.0f);
    /* header only */
    agent_checkpoint_meta hm;
    assert_int_equal(agent_checkpoint_read_meta(path, &hm, err, sizeof err), 0);
    assert_memory_equal(&hm, &meta, sizeof hm);
}

/* Load must fail with `code` and leave the sentinel-filled buffers alone. */
static void expect_rejected(const char *p, const char *spec, uint32_t dim, int code,
                            const char *what)
{
    enum { N = 64 };
    float params[N], mom[N];
    for (int i = 0; i < N; i++)
        params[i] = mom[i] = 7.0f;
    agent_checkpoint_meta meta;
    memset(&meta, 0xAB, sizeof meta);
    char err[256] = "";
    int rc = agent_checkpoint_load(p, spec, dim, &meta, params, mom, err, sizeof err);
    if (rc != code)
        fail_msg("%s: load returned %d (%s: %s), want %d (%s)", what, rc,
                 agent_checkpoint_strerror(rc), err, code, agent_checkpoint_strerror(code));
    assert_true(strlen(err) > 0);
    for (int i = 0; i < N; i++)
        assert_true(params[i] == 7.0f && mom[i] == 7.0f);
    for (size_t i = 0; i < sizeof meta; i++)
        assert_int_equal(((uint8_t *)&meta)[i], 0xAB);
}

static void corruption_is_rejected(void **state)
{
    (void)state;
    enum { N = 64 };
    float p[N], mom[N];
    model_rng rng;
    model_rng_seed(&rng, test_seed(12), 0);
    fill(p, N, &rng);
    fill(mom, N, &rng);
    agent_checkpoint ck = {.spec = "mlp:8", .dim = N, .step = 5, .params = p, .momentum = mom};
    char err[256];
    assert_int_equal(agent_checkpoint_save(path, &ck, err, sizeof err), 0);
    size_t n;
    uint8_t *good = slurp(path, &n);
    uint8_t *b = malloc(n + 16);
    assert_non_null(b);
    char bad[160];
    snprintf(bad, sizeof bad, "%s/bad.ckpt", dir);
    const size_t spec_at = 48, params_at = 48 + 5, mom_at = params_at + 4 * N;

    /* every single-byte flip anywhere is caught (by magic, version, flags,
     * lengths or the checksum) */
    for (size_t at = 0; at < n; at++) {
        memcpy(b, good, n);
        b[at] ^= 0x10;
        spit(bad, b, n);
        float q[N];
        int rc = agent_checkpoint_load(bad, NULL, 0, NULL, q, NULL, err, sizeof err);
        if (rc == 0)
            fail_msg("a flipped bit at byte %zu was not detected", at);
    }
    /* the named cases, each with its own error */
    memcpy(b, good, n), b[params_at + 9] ^= 1, spit(bad, b, n);
    expect_rejected(bad, NULL, 0, AGENT_CHECKPOINT_ECHECKSUM, "flipped parameter");
    memcpy(b, good, n), b[mom_at] ^= 1, spit(bad, b, n);
    expect_rejected(bad, NULL, 0, AGENT_CHECKPOINT_ECHECKSUM, "flipped momentum");
    memcpy(b, good, n), b[n - 1] ^= 1, spit(bad, b, n);
    expect_rejected(bad, NULL, 0, AGENT_CHECKPOINT_ECHECKSUM, "flipped checksum");
    memcpy(b, good, n), b[24] ^= 1, spit(bad, b, n);
    expect_rejected(bad, NULL, 0, AGENT_CHECKPOINT_ECHECKSUM, "flipped step");
    memcpy(b, good, n), b[spec_at] = 'M', spit(bad, b, n);
    expect_rejected(bad, NULL, 0, AGENT_CHECKPOINT_ECHECKSUM, "flipped spec");
    memcpy(b, good, n), b[0] = 'X', spit(bad, b, n);
    expect_rejected(bad, NULL, 0, AGENT_CHECKPOINT_EMAGIC, "magic");
    memcpy(b, good, n), b[8] = 2, spit(bad, b, n);
    expect_rejected(bad, NULL, 0, AGENT_CHECKPOINT_EVERSION, "version 2");
    memcpy(b, good, n), b[12] |= 4, spit(bad, b, n);
    expect_rejected(bad, NULL, 0, AGENT_CHECKPOINT_EMALFORMED, "unknown flag");
    memcpy(b, good, n), memset(b + 16, 0, 4), spit(bad, b, n);
    expect_rejected(bad, NULL, 0, AGENT_CHECKPOINT_EMALFORMED, "spec length 0");
    memcpy(b, good, n), memset(b + 20, 0, 4), spit(bad, b, n);
    expect_rejected(bad, NULL, 0, AGENT_CHECKPOINT_EMALFORMED, "dim 0");
    memcpy(b, good, n), b[20] += 1, spit(bad, b, n);
    expect_rejected(bad, NULL, 0, AGENT_CHECKPOINT_ETRUNC, "dim larger than the file");
    memcpy(b, good, n), b[20] -= 1, spit(bad, b, n);
    expect_rejected(bad, NULL, 0, AGENT_CHECKPOINT_EMALFORMED, "dim smaller than the file");
    memcpy(b, good, n), b[23] = 0x7F, spit(bad, b, n);
    expect_rejected(bad, NULL, 0, AGENT_CHECKPOINT_EMALFORMED, "dim above the maximum");
    memcpy(b, good, n), b[n] = 0, spit(bad, b, n + 1);
    expect_rejected(bad, NULL, 0, AGENT_CHECKPOINT_EMALFORMED, "a trailing byte");
    memcpy(b, good, n), b[spec_at + 2] = 0, rehash(b, n), spit(bad, b, n);
    expect_rejected(bad, NULL, 0, AGENT_CHECKPOINT_EMALFORMED, "NUL in the spec");
    /* a NaN with a valid checksum: written by something else, still refused */
    float nan = NAN;
    memcpy(b, good, n), memcpy(b + params_at + 8, &nan, 4), rehash(b, n), spit(bad, b, n);
    expect_rejected(bad, NULL, 0, AGENT_CHECKPOINT_ENONFINITE, "NaN parameter");
    float inf = INFINITY;
    memcpy(b, good, n), memcpy(b + mom_at + 4, &inf, 4), rehash(b, n), spit(bad, b, n);
    expect_rejected(bad, NULL, 0, AGENT_CHECKPOINT_ENONFINITE, "infinite momentum");
    /* truncation at every interesting length */
    const size_t cuts[] = {0, 3, 8, 47, 48, params_at, params_at + 5, mom_at, n - 33, n - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        spit(bad, good, cuts[i]);
        char what[64];
        snprintf(what, sizeof what, "cut at %zu", cuts[i]);
        expect_rejected(bad, NULL, 0, AGENT_CHECKPOINT_ETRUNC, what);
    }
    spit(bad, (const uint8_t *)"hello", 5);
    expect_rejected(bad, NULL, 0, AGENT_CHECKPOINT_EMAGIC, "a short foreign file");
    spit(bad, (const uint8_t *)"#!/bin/sh\necho this is not a checkpoint at all, really\n", 55);
    expect_rejected(bad, NULL, 0, AGENT_CHECKPOINT_EMAGIC, "a foreign file");
    /* the right file for the wrong model */
    expect_rejected(path, "mlp:16", N, AGENT_CHECKPOINT_ESPEC, "wrong spec");
    expect_rejected(path, "mlp:8", N + 1, AGENT_CHECKPOINT_EDIM, "wrong dim");
    char none[160];
    snprintf(none, sizeof none, "%s/none.ckpt", dir);
    expect_rejected(none, NULL, 0, AGENT_CHECKPOINT_ENOENT, "missing file");
    expect_rejected(dir, NULL, 0, AGENT_CHECKPOINT_EIO, "a directory");
    /* and the original is still good */
    float q[N], qm[N];
    assert_int_equal(agent_checkpoint_load(path, "mlp:8", N, NULL, q, qm, err, sizeof err), 0);
    assert_memory_equal(q, p, sizeof q);
    free(b);
    free(good);
}

static void crash_before_rename_keeps_old(void **state)
{
    (void)state;
    enum { N = 500 };
    float a[N], bvec[N], q[N];
    for (int i = 0; i < N; i++)
        a[i] = (float)i, bvec[i] = (float)-i;
    char err[256];
    agent_checkpoint ck = {.spec = "softmax", .dim = N, .step = 1, .params = a};
    assert_int_equal(agent_checkpoint_save(path, &ck, err, sizeof err), 0);

    /* the process dies after writing the temp file, before the rename */
    char tmp[AGENT_CHECKPOINT_PATH_MAX + 16];
    agent_checkpoint ck2 = {.spec = "softmax", .dim = N, .step = 2, .params = bvec};
    assert_int_equal(agent_checkpoint_write_temp(path, &ck2, tmp, sizeof tmp, err, sizeof err), 0);
    assert_int_equal(access(tmp, F_OK), 0);
    assert_int_equal(strncmp(tmp, path, strlen(path)), 0);
    /* ... and another died mid-write, leaving a cut temp file */
    char tmp2[160];
    snprintf(tmp2, sizeof tmp2, "%s.tmp.abc123", path);
    spit(tmp2, (const uint8_t *)"MRMRCK", 6);

    agent_checkpoint_meta meta;
    assert_int_equal(agent_checkpoint_load(path, "softmax", N, &meta, q, NULL, err, sizeof err), 0);
    assert_int_equal(meta.step, 1);
    assert_memory_equal(q, a, sizeof q);

    /* start-up cleanup removes exactly the two temp files */
    char other[160];
    snprintf(other, sizeof other, "%s/model.ckpt.tmp.keep-me-not-mkstemp", dir);
    spit(other, (const uint8_t *)"x", 1);
    unsigned removed = 0;
    assert_int_equal(agent_checkpoint_remove_stale(path, &removed), 0);
    assert_int_equal(removed, 2);
    assert_int_equal(access(tmp, F_OK), -1);
    assert_int_equal(access(tmp2, F_OK), -1);
    assert_int_equal(access(other, F_OK), 0);
    assert_int_equal(access(path, F_OK), 0);
    unlink(other);

    /* a completed write-then-commit replaces it */
    assert_int_equal(agent_checkpoint_write_temp(path, &ck2, tmp, sizeof tmp, err, sizeof err), 0);
    assert_int_equal(agent_checkpoint_commit(tmp, path, err, sizeof err), 0);
    assert_int_equal(agent_checkpoint_load(path, "softmax", N, &meta, q, NULL, err, sizeof err), 0);
    assert_int_equal(meta.step, 2);
    assert_memory_equal(q, bvec, sizeof q);
    assert_int_equal(access(tmp, F_OK), -1);
}

static void bad_saves_leave_old_file(void **state)
{
    (void)state;
    enum { N = 16 };
    float a[N] = {1, 2, 3}, q[N];
    char err[256];
    agent_checkpoint ck = {.spec = "softmax", .dim = N, .step = 3, .params = a};
    assert_int_equal(agent_checkpoint_save(path, &ck, err, sizeof err), 0);

    float badv[N] = {0};
    badv[5] = NAN;
    agent_checkpoint nan = {.spec = "softmax", .dim = N, .params = badv};
    assert_int_equal(agent_checkpoint_save(path, &nan, err, sizeof err),
                     AGENT_CHECKPOINT_ENONFINITE);
    agent_checkpoint zero = {.spec = "softmax", .dim = 0, .params = a};
    assert_int_equal(agent_checkpoint_save(path, &zero, err, sizeof err), AGENT_CHECKPOINT_EINVAL);
    agent_checkpoint nospec = {.spec = "", .dim = N, .params = a};
    assert_int_equal(agent_checkpoint_save(path, &nospec, err, sizeof err),
                     AGENT_CHECKPOINT_EINVAL);
    char longspec[AGENT_CHECKPOINT_SPEC_MAX + 1];
    memset(longspec, 'm', sizeof longspec - 1);
    longspec[sizeof longspec - 1] = '\0';
    agent_checkpoint ls = {.spec = longspec, .dim = N, .params = a};
    assert_int_equal(agent_checkpoint_save(path, &ls, err, sizeof err), AGENT_CHECKPOINT_EINVAL);
    char nodir[200];
    snprintf(nodir, sizeof nodir, "%s/no/such/dir/m.ckpt", dir);
    assert_int_equal(agent_checkpoint_save(nodir, &ck, err, sizeof err), AGENT_CHECKPOINT_EIO);
    assert_non_null(strstr(err, "no/such/dir"));

    agent_checkpoint_meta meta;
    assert_int_equal(agent_checkpoint_load(path, "softmax", N, &meta, q, NULL, err, sizeof err), 0);
    assert_int_equal(meta.step, 3);
    assert_memory_equal(q, a, sizeof q);
    unsigned removed = 9;
    assert_int_equal(agent_checkpoint_remove_stale(path, &removed), 0);
    assert_int_equal(removed, 0); /* failed saves cleaned up after themselves */
}

static void big_vectors(void **state)
{
    (void)state;
    /* 3 Mi parameters + momentum = 24 MiB: many chunks, a partial last one */
    const uint32_t dim = 3u * 1024u * 1024u + 7u;
    uint64_t seed = test_seed(13);
    model_rng rng;
    model_rng_seed(&rng, seed, 0);
    float *p = malloc((size_t)dim * 4), *m = malloc((size_t)dim * 4);
    float *q = malloc((size_t)dim * 4), *qm = malloc((size_t)dim * 4);
    assert_true(p && m && q && qm);
    fill(p, dim, &rng);
    fill(m, dim, &rng);
    char err[256];
    agent_checkpoint ck = {.spec = "mlp:1024,1024",
                           .dim = dim,
                           .step = 1,
                           .round = 2,
                           .epoch = 3,
                           .params = p,
                           .momentum = m};
    assert_int_equal(agent_checkpoint_save(path, &ck, err, sizeof err), 0);
    agent_checkpoint_meta meta;
    if (agent_checkpoint_load(path, "mlp:1024,1024", dim, &meta, q, qm, err, sizeof err))
        fail_msg("seed %llu: %s", (unsigned long long)seed, err);
    assert_memory_equal(p, q, (size_t)dim * 4);
    assert_memory_equal(m, qm, (size_t)dim * 4);
    /* one flipped bit deep inside is still found */
    size_t n;
    uint8_t *b = slurp(path, &n);
    b[n / 2] ^= 0x01;
    spit(path, b, n);
    free(b);
    memset(q, 0, (size_t)dim * 4);
    assert_int_equal(agent_checkpoint_load(path, NULL, dim, NULL, q, NULL, err, sizeof err),
                     AGENT_CHECKPOINT_ECHECKSUM);
    for (uint32_t i = 0; i < dim; i += 4099)
        assert_true(q[i] == 0.0f);
    free(p), free(m), free(q), free(qm);
}

static void errors_have_names(void **state)
{
    (void)state;
    for (int e = 0; e < AGENT_CHECKPOINT_ERR_COUNT; e++)
        assert_true(strlen(agent_checkpoint_strerror(e)) > 1);
    assert_string_equal(agent_checkpoint_strerror(-1), "unknown error");
    float x = 0;
    char err[64];
    assert_int_equal(agent_checkpoint_load(NULL, NULL, 0, NULL, &x, NULL, err, sizeof err),
                     AGENT_CHECKPOINT_EINVAL);
    assert_int_equal(agent_checkpoint_load(path, NULL, 0, NULL, NULL, NULL, err, sizeof err),
                     AGENT_CHECKPOINT_EINVAL);
}

/* A checkpoint the agent cannot use is moved aside under a dated name, the
 * bytes untouched, never replacing another file; a second one of the same
 * second gets its own name; nothing at PATH is ENOENT. */
static void move_aside_keeps_the_file(void **state)
{
    (void)state;
    spit(path, (const uint8_t *)"old model", 9);
    char moved[256], moved2[256], err[256];
    int64_t when = 1795000000; /* 2026-11-18T11:06:40Z */
    assert_int_equal(agent_checkpoint_move_aside(path, when, moved, sizeof moved, err, sizeof err),
                     AGENT_CHECKPOINT_OK);
    char want[256];
    snprintf(want, sizeof want, "%s.unusable-20261118T110640Z", path);
    assert_string_equal(moved, want);
    assert_int_equal(access(path, F_OK), -1);
    size_t n;
    uint8_t *b = slurp(moved, &n);
    assert_int_equal(n, 9);
    assert_memory_equal(b, "old model", 9);
    free(b);
    spit(path, (const uint8_t *)"other", 5);
    assert_int_equal(
        agent_checkpoint_move_aside(path, when, moved2, sizeof moved2, err, sizeof err),
        AGENT_CHECKPOINT_OK);
    assert_string_not_equal(moved, moved2);
    b = slurp(moved, &n);
    assert_int_equal(n, 9); /* the first one was not replaced */
    free(b);
    assert_int_equal(
        agent_checkpoint_move_aside(path, when, moved2, sizeof moved2, err, sizeof err),
        AGENT_CHECKPOINT_ENOENT);
    /* stale-temp cleanup leaves the moved files alone */
    unsigned removed = 0;
    assert_int_equal(agent_checkpoint_remove_stale(path, &removed), 0);
    assert_int_equal(removed, 0);
    assert_int_equal(access(moved, F_OK), 0);
    unlink(moved);
    unlink(moved2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(round_trip),
        cmocka_unit_test(corruption_is_rejected),
        cmocka_unit_test(crash_before_rename_keeps_old),
        cmocka_unit_test(bad_saves_leave_old_file),
        cmocka_unit_test(big_vectors),
        cmocka_unit_test(errors_have_names),
        cmocka_unit_test_setup_teardown(move_aside_keeps_the_file, setup, teardown),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
