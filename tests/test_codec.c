/* Codec: exactness at 32 bits, unbiasedness and the one-quantum bound at
 * every width, error feedback, hostile input, allocation failure, golden
 * byte vectors. Seeds come from test_seed(); every failure message names the
 * seed (rerun with MURMUR_TEST_SEED=<seed>). */
#include "tests/harness.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/codec.h"
#include "gossip/wire.h"

static const unsigned widths[] = {32, 16, 8, 4, 2, 1};
#define N_WIDTHS (sizeof widths / sizeof widths[0])

/* Distance between adjacent levels for a block with scale s: s / L for
 * bits 2..16 (L = 2^(bits-1) - 1), 2s for one bit (levels -s and +s). */
static double quantum(unsigned bits, double s)
{
    if (bits == 1)
        return 2.0 * s;
    return s / (double)((1u << (bits - 1)) - 1u);
}

static float f32_of_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t bits_of_f32(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* Random finite float of varied magnitude (2^-20 .. 2^20), either sign. */
static float rand_value(model_rng *r)
{
    double mag = ldexp(model_rng_uniform_double(r), (int)model_rng_below(r, 41) - 20);
    return (float)(model_rng_below(r, 2) ? mag : -mag);
}

/* Offset of block b's scale in an encoding (bits < 32). */
static size_t block_offset(uint32_t b, unsigned bits, uint32_t block)
{
    return gossip_codec_size(b * block, bits, block);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    assert_non_null(p);
    return p;
}

static void size_formula(void **state)
{
    (void)state;
    /* 300 values, block 128: blocks of 128, 128, 44. */
    assert_int_equal(gossip_codec_size(300, 32, 128), 1200);
    assert_int_equal(gossip_codec_size(300, 16, 128), 3 * 4 + 600);
    assert_int_equal(gossip_codec_size(300, 8, 128), 3 * 4 + 300);
    assert_int_equal(gossip_codec_size(300, 4, 128), 3 * 4 + 64 + 64 + 22);
    assert_int_equal(gossip_codec_size(300, 2, 128), 3 * 4 + 32 + 32 + 11);
    assert_int_equal(gossip_codec_size(300, 1, 128), 3 * 4 + 16 + 16 + 6);
    assert_int_equal(gossip_codec_size(7, 4, 1), 7 * 5);
    assert_int_equal(gossip_codec_size(GOSSIP_CODEC_DIM_MAX, 32, 256),
                     (size_t)GOSSIP_CODEC_DIM_MAX * 4u);
    /* invalid parameters */
    assert_int_equal(gossip_codec_size(0, 8, 256), 0);
    assert_int_equal(gossip_codec_size(GOSSIP_CODEC_DIM_MAX + 1, 8, 256), 0);
    assert_int_equal(gossip_codec_size(10, 3, 256), 0);
    assert_int_equal(gossip_codec_size(10, 0, 256), 0);
    assert_int_equal(gossip_codec_size(10, 8, 0), 0);
    assert_int_equal(gossip_codec_size(10, 8, GOSSIP_CODEC_BLOCK_MAX + 1), 0);
    for (unsigned b = 0; b <= 40; b++)
        assert_int_equal(gossip_codec_bits_valid(b),
                         b == 1 || b == 2 || b == 4 || b == 8 || b == 16 || b == 32);

    test_env t;
    test_env_init(&t, 1);
    float x[10] = {0};
    uint8_t out[64];
    assert_int_equal(gossip_codec_encode(&t.env, x, 10, 3, 4, out, sizeof out, NULL),
                     GOSSIP_EINVAL);
    assert_int_equal(gossip_codec_encode(&t.env, x, 10, 8, 0, out, sizeof out, NULL),
                     GOSSIP_EINVAL);
    size_t need = gossip_codec_size(10, 8, 4);
    assert_int_equal(gossip_codec_encode(&t.env, x, 10, 8, 4, out, need - 1, NULL), GOSSIP_ESPACE);
    assert_int_equal(gossip_codec_encode(&t.env, x, 10, 8, 4, out, need, NULL), GOSSIP_OK);
}

/* 32 bits: bit-identical round trip, including -0, subnormals and extremes;
 * the bytes are the big-endian bit patterns. */
static void exact_at_32(void **state)
{
    (void)state;
    uint64_t seed = test_seed(0xC0DEC032);
    test_env t;
    test_env_init(&t, seed);
    enum { N = 1000 };
    float x[N], dec[N], back[N];
    uint8_t out[4 * N];
    for (int rep = 0; rep < 50; rep++) {
        for (int i = 0; i < N; i++) {
            uint32_t u;
            do
                u = (uint32_t)model_rng_u64(&t.rng);
            while ((u & 0x7f800000u) == 0x7f800000u); /* any finite pattern */
            x[i] = f32_of_bits(u);
        }
        x[0] = -0.0f, x[1] = FLT_MAX, x[2] = -FLT_MAX, x[3] = FLT_TRUE_MIN, x[4] = 0.0f;
        uint32_t block = 1 + (uint32_t)model_rng_below(&t.rng, 300);
        assert_int_equal(gossip_codec_encode(&t.env, x, N, 32, block, out, sizeof out, dec),
                         GOSSIP_OK);
        assert_int_equal(gossip_codec_decode(out, sizeof out, N, 32, block, back), GOSSIP_OK);
        for (int i = 0; i < N; i++) {
            uint32_t u = bits_of_f32(x[i]);
            if (bits_of_f32(back[i]) != u || bits_of_f32(dec[i]) != u)
                fail_msg("seed %llu rep %d: value %d not bit-identical", (unsigned long long)seed,
                         rep, i);
            assert_int_equal(gossip_get_u32(out + 4 * i), u);
        }
    }
}

/* Every decoded value lies within one quantum of its input (on the two
 * levels adjacent to it), the encoder's decoded copy equals the decoder's
 * output bit for bit, and the scale is max |x| of the block. */
static void within_one_quantum(void **state)
{
    (void)state;
    uint64_t seed = test_seed(0xC0DEC001);
    test_env t;
    test_env_init(&t, seed);
    enum { N = 1500 };
    static const uint32_t blocks[] = {1, 7, 64, 256, 1000, 4096};
    for (int rep = 0; rep < 40; rep++) {
        uint32_t n = 1 + (uint32_t)model_rng_below(&t.rng, N);
        uint32_t block = blocks[model_rng_below(&t.rng, 6)];
        /* every buffer exactly n values: ASan sees any access past them */
        float *x = xmalloc(n * sizeof *x), *dec = xmalloc(n * sizeof *dec);
        float *back = xmalloc(n * sizeof *back);
        for (uint32_t i = 0; i < n; i++)
            x[i] = rand_value(&t.rng);
        if (rep % 5 == 0) /* an all-zero stretch */
            memset(x, 0, (n / 2) * sizeof *x);
        for (size_t w = 1; w < N_WIDTHS; w++) {
            unsigned bits = widths[w];
            size_t size = gossip_codec_size(n, bits, block);
            uint8_t *out = xmalloc(size); /* exact size: ASan sees any overrun */
            assert_int_equal(gossip_codec_encode(&t.env, x, n, bits, block, out, size, dec),
                             GOSSIP_OK);
            assert_int_equal(gossip_codec_decode(out, size, n, bits, block, back), GOSSIP_OK);
            for (uint32_t b = 0; b * block < n; b++) {
                uint32_t lo = b * block, hi = lo + block < n ? lo + block : n;
                float s = f32_of_bits(gossip_get_u32(out + block_offset(b, bits, block)));
                float m = 0.0f;
                for (uint32_t i = lo; i < hi; i++)
                    m = fmaxf(m, fabsf(x[i]));
                if (s != m)
                    fail_msg("seed %llu bits %u block %u: scale %g, max |x| %g",
                             (unsigned long long)seed, bits, b, (double)s, (double)m);
                /* float rounding of y = x * L / s and of q * s / L: a few
                 * ulps of s */
                double tol = quantum(bits, s) + 4.0 * (double)s * FLT_EPSILON;
                for (uint32_t i = lo; i < hi; i++) {
                    if (bits_of_f32(dec[i]) != bits_of_f32(back[i]))
                        fail_msg("seed %llu bits %u: decoded copy differs at %u",
                                 (unsigned long long)seed, bits, i);
                    double err = fabs((double)back[i] - (double)x[i]);
                    if (err > tol || fabs((double)back[i]) > (double)s * (1.0 + FLT_EPSILON))
                        fail_msg("seed %llu bits %u block %u value %u: x %.9g decoded %.9g, "
                                 "quantum %.9g",
                                 (unsigned long long)seed, bits, block, i, (double)x[i],
                                 (double)back[i], quantum(bits, s));
                }
            }
            free(out);
        }
        free(x), free(dec), free(back);
    }
}

/* Unbiasedness. A decoded value is x + e with e on the two levels adjacent
 * to x, Delta = one quantum apart, E[e] = bias. Its variance is at most
 * Delta^2 p (1 - p) <= Delta^2 / 4, so the mean of D independent draws has
 * standard deviation <= Delta / (2 sqrt(D)). We allow 6 standard deviations
 * (two-sided normal tail 2e-9 per comparison; ~10^4 comparisons per run give
 * a false-failure rate ~ 2e-5) plus the known deterministic bias: 2^-17
 * Delta from the 16-bit rounding resolution and a few float ulps of s.
 * Per value (D = 4000) the bound is 0.047 Delta: it catches gross bias
 * such as round-to-nearest (up to Delta/2). unbiased_pooled below catches
 * small systematic bias. */
static void unbiased_every_width(void **state)
{
    (void)state;
    uint64_t seed = test_seed(0xC0DEC0B1);
    test_env t;
    test_env_init(&t, seed);
    enum { N = 64, D = 4000 };
    float x[N], dec[N];
    double sum[N];
    uint8_t out[4 * N + 16];
    for (int rep = 0; rep < 4; rep++) {
        float s0 = ldexpf(1.0f, (int)model_rng_below(&t.rng, 20) - 10);
        for (int i = 0; i < N; i++) /* values strictly inside (-s0, s0) */
            x[i] = (float)((model_rng_uniform_double(&t.rng) * 2.0 - 1.0) * s0 * 0.999);
        x[N - 1] = s0;                            /* fixes the scale */
        x[3] = s0 * 0.25f * (float)(1.0 / 127.0); /* mid-quantum at 8 bits */
        x[4] = 0.0f;
        for (size_t w = 1; w < N_WIDTHS; w++) {
            unsigned bits = widths[w];
            size_t size = gossip_codec_size(N, bits, N);
            memset(sum, 0, sizeof sum);
            for (int d = 0; d < D; d++) {
                assert_int_equal(gossip_codec_encode(&t.env, x, N, bits, N, out, size, dec),
                                 GOSSIP_OK);
                for (int i = 0; i < N; i++)
                    sum[i] += (double)dec[i];
            }
            double delta = quantum(bits, s0);
            double slack = delta * 0x1p-17 + 4.0 * (double)s0 * FLT_EPSILON;
            double bound = 6.0 * delta / (2.0 * sqrt((double)D)) + slack;
            double pooled = 0.0;
            for (int i = 0; i < N; i++) {
                double err = sum[i] / D - (double)x[i];
                pooled += err;
                if (fabs(err) > bound)
                    fail_msg("seed %llu bits %u value %d: mean error %.3g > bound %.3g "
                             "(quantum %.3g)",
                             (unsigned long long)seed, bits, i, err, bound, delta);
            }
            pooled /= N;
            double pooled_bound = 6.0 * delta / (2.0 * sqrt((double)N * D)) + slack;
            if (fabs(pooled) > pooled_bound)
                fail_msg("seed %llu bits %u: pooled mean error %.3g > %.3g",
                         (unsigned long long)seed, bits, pooled, pooled_bound);
        }
    }
}

/* Small systematic bias: the mean error over N values and D draws each,
 * pooled (sum of err / (N D)) and pooled with the sign of x (a bias toward
 * or away from zero). Each draw's error has variance <= Delta^2 / 4, so the
 * pooled mean of N*D = 2^23 independent errors has standard deviation
 * <= Delta / (2 * 2^11.5) = Delta / 5793; 6 sigma = Delta / 965, plus the
 * deterministic slack of unbiased_every_width. This fails, e.g., rounding
 * thresholds of 8-bit resolution (k < frac * 2^8: mean bias ~ Delta / 512),
 * which the per-value bound above cannot see. */
static void unbiased_pooled(void **state)
{
    (void)state;
    uint64_t seed = test_seed(0xC0DEC0B2);
    test_env t;
    test_env_init(&t, seed);
    enum { N = 1024, D = 8192 };
    float *x = xmalloc(N * sizeof *x), *dec = xmalloc(N * sizeof *dec);
    double *sum = xmalloc(N * sizeof *sum);
    uint8_t *out = xmalloc(4 * N + 4);
    for (int i = 0; i < N; i++)
        x[i] = (float)(model_rng_uniform_double(&t.rng) * 2.0 - 1.0);
    x[0] = 1.0f; /* s = 1 */
    for (size_t w = 1; w < N_WIDTHS; w++) {
        unsigned bits = widths[w];
        size_t size = gossip_codec_size(N, bits, N);
        memset(sum, 0, N * sizeof *sum);
        for (int d = 0; d < D; d++) {
            assert_int_equal(gossip_codec_encode(&t.env, x, N, bits, N, out, size, dec), GOSSIP_OK);
            for (int i = 0; i < N; i++)
                sum[i] += (double)dec[i];
        }
        double pooled = 0.0, pooled_sign = 0.0;
        for (int i = 0; i < N; i++) {
            double err = sum[i] / D - (double)x[i];
            pooled += err;
            pooled_sign += x[i] < 0.0f ? -err : err;
        }
        pooled /= N, pooled_sign /= N;
        double delta = quantum(bits, 1.0);
        double bound =
            6.0 * delta / (2.0 * sqrt((double)N * D)) + delta * 0x1p-17 + 4.0 * FLT_EPSILON;
        if (fabs(pooled) > bound || fabs(pooled_sign) > bound)
            fail_msg("seed %llu bits %u: pooled mean error %.3g, signed %.3g > %.3g",
                     (unsigned long long)seed, bits, pooled, pooled_sign, bound);
    }
    free(x), free(dec), free(sum), free(out);
}

/* Error feedback: x follows a random walk; after every step ref (the sum of
 * all decoded deltas, what the receiver holds) is within one quantum of x in
 * every block, a receiver that decodes the bytes and accumulates holds
 * exactly ef->ref, and residual = x - ref. For bits >= 4 the scale stays
 * bounded: s_t = max|g_t + r_{t-1}| <= G + s_{t-1} / L, hence
 * s_t <= G * L / (L - 1) with G the largest step of the walk. */
static void error_feedback_tracks(void **state)
{
    (void)state;
    uint64_t seed = test_seed(0xC0DECEF0);
    test_env t;
    test_env_init(&t, seed);
    enum { N = 700, BLOCK = 64, T = 300 };
    float *x = xmalloc(N * sizeof *x), *recv = xmalloc(N * sizeof *recv);
    float *q = xmalloc(N * sizeof *q), *dq = xmalloc(N * sizeof *dq);
    uint8_t *out = xmalloc(gossip_codec_size(N, 32, BLOCK));
    for (size_t w = 0; w + 1 < N_WIDTHS; w++) { /* 1 bit is refused, see below */
        unsigned bits = widths[w];
        size_t size = gossip_codec_size(N, bits, BLOCK);
        for (int i = 0; i < N; i++)
            x[i] = rand_value(&t.rng) * 1e-3f;
        gossip_ef ef;
        assert_int_equal(gossip_ef_init(&ef, &t.env, N, bits, BLOCK, x), GOSSIP_OK);
        memcpy(recv, x, N * sizeof *x);
        const float gmax = 0.01f;
        double smax = 0.0;
        for (int step = 0; step < T; step++) {
            for (int i = 0; i < N; i++)
                x[i] += (float)((model_rng_uniform_double(&t.rng) * 2.0 - 1.0) * gmax);
            assert_int_equal(gossip_ef_encode(&ef, &t.env, x, out, size, q), GOSSIP_OK);
            assert_int_equal(gossip_codec_decode(out, size, N, bits, BLOCK, dq), GOSSIP_OK);
            for (int i = 0; i < N; i++) {
                if (bits_of_f32(dq[i]) != bits_of_f32(q[i]))
                    fail_msg("seed %llu bits %u step %d: q_out differs from the decoding",
                             (unsigned long long)seed, bits, step);
                recv[i] += dq[i];
                if (bits_of_f32(recv[i]) != bits_of_f32(ef.ref[i]))
                    fail_msg("seed %llu bits %u step %d: receiver and ref differ at %d",
                             (unsigned long long)seed, bits, step, i);
            }
            for (uint32_t b = 0; b * BLOCK < N; b++) {
                double s =
                    bits == 32
                        ? 0.0
                        : (double)f32_of_bits(gossip_get_u32(out + block_offset(b, bits, BLOCK)));
                smax = s > smax ? s : smax;
                /* float rounding of x - ref and of ref + q: ulps of |x| */
                for (uint32_t i = b * BLOCK; i < N && i < (b + 1) * BLOCK; i++) {
                    double tol = (bits == 32 ? 0.0 : quantum(bits, s) * (1.0 + 1e-6)) +
                                 4.0 * fabs((double)x[i]) * FLT_EPSILON;
                    double err = fabs((double)ef.ref[i] - (double)x[i]);
                    if (err > tol)
                        fail_msg("seed %llu bits %u step %d value %u: |ref - x| %.3g > %.3g",
                                 (unsigned long long)seed, bits, step, i, err, tol);
                    /* residual = fl(x - ref_old) - q, ref = fl(ref_old + q):
                     * two roundings, each within an ulp of the operands */
                    double r = fabs((double)ef.residual[i] - ((double)x[i] - ef.ref[i]));
                    double mag = fabs((double)x[i]) + fabs((double)ef.ref[i]) + fabs((double)q[i]);
                    if (r > 2.0 * mag * FLT_EPSILON)
                        fail_msg("seed %llu bits %u: residual is not x - ref",
                                 (unsigned long long)seed, bits);
                }
            }
        }
        if (bits >= 4) {
            double L = (double)((1u << (bits - 1)) - 1u);
            double limit = gmax * L / (L - 1.0) * 1.01;
            if (smax > limit)
                fail_msg("seed %llu bits %u: block scale grew to %.3g > %.3g",
                         (unsigned long long)seed, bits, smax, limit);
        }
        gossip_ef_free(&ef, &t.env);
        assert_int_equal(t.alloc.live, 0);
    }
    free(x), free(recv), free(q), free(dq), free(out);
}

/* A failed ef_encode (non-finite input) leaves the state untouched. */
static void error_feedback_rejects(void **state)
{
    (void)state;
    test_env t;
    test_env_init(&t, test_seed(5));
    enum { N = 40 };
    float x[N], ref0[N];
    uint8_t out[256];
    for (int i = 0; i < N; i++)
        x[i] = (float)i * 0.125f;
    gossip_ef ef;
    assert_int_equal(gossip_ef_init(&ef, &t.env, N, 8, 16, NULL), GOSSIP_OK);
    assert_int_equal(gossip_ef_encode(&ef, &t.env, x, out, sizeof out, NULL), GOSSIP_OK);
    memcpy(ref0, ef.ref, sizeof ref0);
    x[17] = NAN;
    assert_int_equal(gossip_ef_encode(&ef, &t.env, x, out, sizeof out, NULL), GOSSIP_ENONFINITE);
    x[17] = INFINITY;
    assert_int_equal(gossip_ef_encode(&ef, &t.env, x, out, sizeof out, NULL), GOSSIP_ENONFINITE);
    x[17] = 1.0f;
    assert_int_equal(gossip_ef_encode(&ef, &t.env, x, out, gossip_codec_size(N, 8, 16) - 1, NULL),
                     GOSSIP_ESPACE);
    assert_memory_equal(ref0, ef.ref, sizeof ref0);
    gossip_ef_free(&ef, &t.env);
    gossip_ef_free(&ef, &t.env); /* idempotent */
    float bad[N] = {0};
    bad[3] = NAN;
    assert_int_equal(gossip_ef_init(&ef, &t.env, N, 8, 16, bad), GOSSIP_EINVAL);
    assert_int_equal(gossip_ef_init(&ef, &t.env, N, 5, 16, NULL), GOSSIP_EINVAL);
    /* 1-bit error feedback diverges (codec.h), so it is refused */
    assert_int_equal(gossip_ef_init(&ef, &t.env, N, 1, 16, NULL), GOSSIP_EINVAL);
    /* |ref| or |x - ref| at 2^126 is refused before anything changes */
    assert_int_equal(gossip_ef_init(&ef, &t.env, N, 8, 16, NULL), GOSSIP_OK);
    x[5] = 0x1p126f;
    assert_int_equal(gossip_ef_encode(&ef, &t.env, x, out, sizeof out, NULL), GOSSIP_ENONFINITE);
    x[5] = 0x1p125f;
    assert_int_equal(gossip_ef_encode(&ef, &t.env, x, out, sizeof out, NULL), GOSSIP_OK);
    gossip_ef_free(&ef, &t.env);
    assert_int_equal(gossip_ef_init(&ef, &t.env, 0, 8, 16, NULL), GOSSIP_EINVAL);
    assert_int_equal(t.alloc.live, 0);
}

static void ef_init_alloc_failure(void **state)
{
    (void)state;
    for (long k = 1; k <= 4; k++) {
        test_env t;
        test_env_init(&t, 7);
        t.alloc.fail_at = k;
        gossip_ef ef;
        int rc = gossip_ef_init(&ef, &t.env, 1000, 8, 256, NULL);
        if (k <= 3) {
            assert_int_equal(rc, GOSSIP_ENOMEM);
            assert_null(ef.ref);
            assert_null(ef.residual);
            assert_null(ef.scratch);
        } else {
            assert_int_equal(rc, GOSSIP_OK);
            gossip_ef_free(&ef, &t.env);
        }
        assert_int_equal(t.alloc.live, 0);
    }
}

static int all_zero(const float *v, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (bits_of_f32(v[i]) != 0)
            return 0;
    return 1;
}

static void decode_rejects(void **state)
{
    (void)state;
    test_env t;
    test_env_init(&t, test_seed(11));
    enum { N = 50, BLOCK = 16 };
    float x[N], out[N];
    for (int i = 0; i < N; i++)
        x[i] = (float)(i - 25) * 0.5f;
    uint8_t enc[4 * N];
    uint8_t bad[4 * N + 1];
    static const uint32_t bad_scales[] = {0x7fc00000u, 0xffc00000u, 0x7f800000u, 0xff800000u,
                                          0xbf800000u, 0x80000000u, 0x7f7fffffu};
    for (size_t w = 0; w < N_WIDTHS; w++) {
        unsigned bits = widths[w];
        size_t size = gossip_codec_size(N, bits, BLOCK);
        assert_int_equal(gossip_codec_encode(&t.env, x, N, bits, BLOCK, enc, size, NULL),
                         GOSSIP_OK);
        assert_int_equal(gossip_codec_decode(enc, size, N, bits, BLOCK, out), GOSSIP_OK);
        /* wrong lengths */
        for (int d = -2; d <= 1; d++) {
            if (d == 0)
                continue;
            memcpy(bad, enc, size);
            for (int i = 0; i < N; i++)
                out[i] = 7.0f;
            assert_int_equal(gossip_codec_decode(bad, size + (size_t)d, N, bits, BLOCK, out),
                             GOSSIP_EMALFORMED);
            assert_true(all_zero(out, N));
        }
        assert_int_equal(gossip_codec_decode(enc, 0, N, bits, BLOCK, out), GOSSIP_EMALFORMED);
        assert_int_equal(gossip_codec_decode(NULL, size, N, bits, BLOCK, out), GOSSIP_EMALFORMED);
        assert_int_equal(gossip_codec_decode(enc, size, N, 3, BLOCK, out), GOSSIP_EINVAL);
        assert_int_equal(gossip_codec_decode(enc, size, 0, bits, BLOCK, out), GOSSIP_EINVAL);
        assert_int_equal(gossip_codec_decode(enc, size, N, bits, 0, out), GOSSIP_EINVAL);
        if (bits == 32) {
            /* NaN, +Inf, -Inf in any position */
            static const uint32_t nf[] = {0x7fc00001u, 0x7f800000u, 0xff800000u, 0xffffffffu};
            for (size_t k = 0; k < 4; k++) {
                memcpy(bad, enc, size);
                gossip_put_u32(bad + 4 * (7 + 9 * k), nf[k]);
                for (int i = 0; i < N; i++)
                    out[i] = 7.0f;
                assert_int_equal(gossip_codec_decode(bad, size, N, 32, BLOCK, out),
                                 GOSSIP_ENONFINITE);
                assert_true(all_zero(out, N));
            }
            continue;
        }
        /* bad scale in each block (the last one is short) */
        for (uint32_t b = 0; b * BLOCK < N; b++) {
            for (size_t k = 0; k < sizeof bad_scales / sizeof bad_scales[0]; k++) {
                if (bad_scales[k] == 0x7f7fffffu && bits == 1)
                    continue; /* FLT_MAX is a fine 1-bit scale: levels are +-s */
                memcpy(bad, enc, size);
                gossip_put_u32(bad + block_offset(b, bits, BLOCK), bad_scales[k]);
                for (int i = 0; i < N; i++)
                    out[i] = 7.0f;
                int rc = gossip_codec_decode(bad, size, N, bits, BLOCK, out);
                if (bad_scales[k] == 0x7f7fffffu) {
                    /* FLT_MAX: the largest level L * (s / L) overflows for
                     * some widths; decoding must then refuse, else every
                     * value is finite. */
                    float L = (float)((1u << (bits - 1)) - 1u);
                    int overflows = !(L * (FLT_MAX / L) <= FLT_MAX);
                    assert_int_equal(rc, overflows ? GOSSIP_ENONFINITE : GOSSIP_OK);
                    if (!overflows)
                        for (int i = 0; i < N; i++)
                            assert_true(isfinite(out[i]));
                    else
                        assert_true(all_zero(out, N));
                    continue;
                }
                assert_int_equal(rc, GOSSIP_ENONFINITE);
                assert_true(all_zero(out, N));
            }
        }
        if (bits >= 2) {
            /* the code -2^(bits-1) in the last value of the first block */
            memcpy(bad, enc, size);
            uint32_t i = BLOCK - 1, bit = i * bits;
            uint8_t *p = bad + 4;
            for (unsigned k = 0; k < bits; k++, bit++) {
                uint8_t m = (uint8_t)(1u << (bit % 8));
                p[bit / 8] = (uint8_t)(k == bits - 1 ? p[bit / 8] | m : p[bit / 8] & ~m);
            }
            assert_int_equal(gossip_codec_decode(bad, size, N, bits, BLOCK, out),
                             GOSSIP_EMALFORMED);
            assert_true(all_zero(out, N));
        }
    }
    /* the encoder refuses non-finite input */
    uint8_t big[4 * N];
    for (size_t w = 0; w < N_WIDTHS; w++) {
        x[33] = NAN;
        assert_int_equal(gossip_codec_encode(&t.env, x, N, widths[w], BLOCK, big, sizeof big, NULL),
                         GOSSIP_ENONFINITE);
        x[33] = -INFINITY;
        assert_int_equal(gossip_codec_encode(&t.env, x, N, widths[w], BLOCK, big, sizeof big, NULL),
                         GOSSIP_ENONFINITE);
        x[33] = 1.0f;
    }
}

/* Property: random bytes, random parameters, exact and inexact lengths. The
 * decoder never reads outside its input (heap buffers of the exact length,
 * so ASan sees an overrun), and either succeeds with every value finite and
 * at most the block scale in magnitude, or fails with out zeroed. */
static void decode_random_bytes(void **state)
{
    (void)state;
    uint64_t seed = test_seed(0xF022C0DE);
    model_rng r;
    model_rng_seed(&r, seed, 0);
    enum { INPUTS = 120000, NMAX = 300 };
    float out[NMAX];
    long ok = 0;
    for (int it = 0; it < INPUTS; it++) {
        unsigned bits = widths[model_rng_below(&r, N_WIDTHS)];
        uint32_t n = 1 + (uint32_t)model_rng_below(&r, NMAX);
        uint32_t block = 1 + (uint32_t)model_rng_below(&r, 2 * n);
        size_t size = gossip_codec_size(n, bits, block);
        size_t len = model_rng_below(&r, 4) ? size : (size_t)model_rng_below(&r, size + 8);
        uint8_t *in = xmalloc(len);
        for (size_t i = 0; i < len; i++)
            in[i] = (uint8_t)model_rng_u64(&r);
        /* make valid scales likely so value decoding is exercised */
        if (bits != 32 && len == size && model_rng_below(&r, 2))
            for (uint32_t b = 0; b * block < n; b++)
                gossip_put_u32(in + block_offset(b, bits, block),
                               bits_of_f32((float)model_rng_uniform(&r) * 100.0f));
        int rc = gossip_codec_decode(in, len, n, bits, block, out);
        if (len != size && rc != GOSSIP_EMALFORMED)
            fail_msg("seed %llu input %d: length %zu of %zu accepted", (unsigned long long)seed, it,
                     len, size);
        if (rc == GOSSIP_OK) {
            ok++;
            for (uint32_t i = 0; i < n; i++)
                if (!isfinite(out[i]))
                    fail_msg("seed %llu input %d: non-finite value accepted",
                             (unsigned long long)seed, it);
        } else {
            if (rc != GOSSIP_EMALFORMED && rc != GOSSIP_ENONFINITE)
                fail_msg("seed %llu input %d: unexpected error %d", (unsigned long long)seed, it,
                         rc);
            if (!all_zero(out, n))
                fail_msg("seed %llu input %d: out not zeroed on error", (unsigned long long)seed,
                         it);
        }
        free(in);
    }
    assert_true(ok > INPUTS / 10); /* the success path was exercised too */
}

/* Draws in bulk (gossip_random_fill, taken for a model_rng stream) give
 * the very same stream as one call per draw: the same encodings, byte for
 * byte, at every width, with the decoded output, and the generators end
 * in the same state. */
static uint64_t rng_one_by_one(void *ctx)
{
    return model_rng_u64(ctx);
}

static void random_fill_same_stream(void **state)
{
    (void)state;
    uint64_t seed = test_seed(0xF111);
    model_rng r;
    model_rng_seed(&r, seed, 0);
    enum { N = 1000 };
    float x[N], d1[N], d2[N];
    for (uint32_t i = 0; i < N; i++)
        x[i] = rand_value(&r);
    for (unsigned w = 0; w < N_WIDTHS; w++) {
        unsigned bits = widths[w];
        for (uint32_t block = 1; block <= 600; block += 299) {
            model_rng r1, r2;
            model_rng_seed(&r1, seed, w);
            model_rng_seed(&r2, seed, w);
            gossip_env e1 = {.random = rng_one_by_one, .random_ctx = &r1};
            gossip_env e2 = {.random = model_rng_callback, .random_ctx = &r2};
            size_t size = gossip_codec_size(N - 3, bits, block);
            uint8_t *b1 = xmalloc(size), *b2 = xmalloc(size);
            assert_int_equal(gossip_codec_encode(&e1, x, N - 3, bits, block, b1, size, d1), 0);
            assert_int_equal(gossip_codec_encode(&e2, x, N - 3, bits, block, b2, size, d2), 0);
            if (memcmp(b1, b2, size) || memcmp(d1, d2, (N - 3) * sizeof *d1) ||
                model_rng_u64(&r1) != model_rng_u64(&r2))
                fail_msg("seed %llu bits %u block %u: drawing in bulk changed the encoding",
                         (unsigned long long)seed, bits, block);
            free(b1);
            free(b2);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(size_formula),
        cmocka_unit_test(exact_at_32),
        cmocka_unit_test(within_one_quantum),
        cmocka_unit_test(unbiased_every_width),
        cmocka_unit_test(unbiased_pooled),
        cmocka_unit_test(error_feedback_tracks),
        cmocka_unit_test(error_feedback_rejects),
        cmocka_unit_test(ef_init_alloc_failure),
        cmocka_unit_test(decode_rejects),
        cmocka_unit_test(decode_random_bytes),
        cmocka_unit_test(random_fill_same_stream),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
