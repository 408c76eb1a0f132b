/* bench_codec — encode and decode throughput of the quantized codec.
 *
 * One vector of 4 Mi float32 values (16 MiB, larger than the caches, so the
 * figures include memory traffic), block 256, values uniform in [-1, 1) with
 * a few larger outliers. For each width: encode (with the env's xoshiro256**
 * RNG through the gossip_env callback, as in the agent) and decode, each
 * timed over RUNS runs; the median is printed in GB/s of float32 input
 * (4 * n bytes / time), with the min and max run beside it, then the median
 * by process CPU time (steadier on a shared machine), and the encoded size. Then error-feedback
 * encode (ef_encode = delta, encode, update) at 8 bits. Single thread.
 *
 *   make bench  or  build/bench/bench_codec [n_values] [runs]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gossip/codec.h"
#include "gossip/wire.h"
#include "model/rng.h"

#define RUNS_DEFAULT 9
#define RUNS_MAX     101

static void *b_alloc(void *ctx, size_t n)
{
    (void)ctx;
    return malloc(n ? n : 1);
}

static void b_free(void *ctx, void *p)
{
    (void)ctx;
    free(p);
}

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Wall time and this process's CPU time: on a shared machine the CPU-time
 * figure is the steadier one (it excludes time the core was lent out). */
typedef struct stamp {
    double wall, cpu;
} stamp;

static stamp now(void)
{
    return (stamp){clock_s(CLOCK_MONOTONIC), clock_s(CLOCK_PROCESS_CPUTIME_ID)};
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Sorts t and c [0..runs) and prints the median wall-clock GB/s of `bytes`
 * (min .. max), then the median by CPU time. */
static double report(const char *what, unsigned bits, double *t, double *c, int runs, double bytes)
{
    qsort(t, (size_t)runs, sizeof *t, cmp_d);
    qsort(c, (size_t)runs, sizeof *c, cmp_d);
    double med = bytes / t[runs / 2] * 1e-9;
    printf("  %-9s %2u bits  %6.2f GB/s  (%5.2f .. %5.2f)  cpu %6.2f GB/s\n", what, bits, med,
           bytes / t[runs - 1] * 1e-9, bytes / t[0] * 1e-9, bytes / c[runs / 2] * 1e-9);
    return med;
}

static volatile float sink;

/* Error-feedback drift (not a speed figure; the evidence behind codec.h's
 * refusal of 1-bit error feedback): 4096 values start at 0 and take uniform
 * steps in [-0.01, 0.01] each round; the EF update of codec.h
 * (delta = x - ref, q = Q(delta), ref += q) is run by hand so that 1 bit
 * can be shown too. Prints max |ref - x| after 1, 4, 16, ... rounds. */
#define DRIFT_N      4096u
#define DRIFT_ROUNDS 1024
static int ef_drift(const gossip_env *env)
{
    static float x[DRIFT_N], ref[DRIFT_N], delta[DRIFT_N], q[DRIFT_N];
    static uint8_t out[DRIFT_N * 4];
    static const unsigned widths[] = {16, 8, 4, 2, 1};
    model_rng walk;
    printf("ef drift: max |ref - x|, %u values, block 256, steps U(-0.01, 0.01)\n", DRIFT_N);
    printf("  %4s", "bits");
    for (int t = 1; t <= DRIFT_ROUNDS; t *= 4)
        printf(" %9d", t);
    printf("  rounds\n");
    for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
        unsigned bits = widths[w];
        model_rng_seed(&walk, 3, 0);
        memset(x, 0, sizeof x), memset(ref, 0, sizeof ref);
        printf("  %4u", bits);
        int next_print = 1;
        for (int t = 1; t <= DRIFT_ROUNDS; t++) {
            for (uint32_t i = 0; i < DRIFT_N; i++) {
                x[i] += (model_rng_uniform(&walk) * 2.0f - 1.0f) * 0.01f;
                delta[i] = x[i] - ref[i];
            }
            int rc = gossip_codec_encode(env, delta, DRIFT_N, bits, 256, out, sizeof out, q);
            if (rc != GOSSIP_OK) {
                printf(" diverged: %s at round %d", gossip_strerror(rc), t);
                break;
            }
            double m = 0.0;
            for (uint32_t i = 0; i < DRIFT_N; i++) {
                ref[i] += q[i];
                double e = (double)ref[i] - (double)x[i];
                m = e > m ? e : (-e > m ? -e : m);
            }
            if (t == next_print) {
                printf(" %9.3g", m);
                next_print *= 4;
            }
        }
        printf("\n");
    }
    return 0;
}

int main(int argc, char **argv)
{
    uint32_t n = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 0) : 4u * 1024u * 1024u;
    int runs = argc > 2 ? atoi(argv[2]) : RUNS_DEFAULT;
    if (n < 1 || n > GOSSIP_CODEC_DIM_MAX || runs < 1 || runs > RUNS_MAX) {
        fprintf(stderr, "usage: bench_codec [n_values 1..%u] [runs 1..%d]\n", GOSSIP_CODEC_DIM_MAX,
                RUNS_MAX);
        return 2;
    }
    model_rng rng;
    model_rng_seed(&rng, 42, 0);
    gossip_env env = {b_alloc, b_free, model_rng_callback, NULL, &rng};
    const uint32_t block = GOSSIP_CODEC_BLOCK_DEFAULT;
    float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    uint8_t *buf = malloc(gossip_codec_size(n, 32, block));
    if (!x || !y || !buf) {
        fprintf(stderr, "bench_codec: out of memory for %u values\n", n);
        return 1;
    }
    for (uint32_t i = 0; i < n; i++)
        x[i] = model_rng_uniform(&rng) * 2.0f - 1.0f;
    for (uint32_t i = 0; i < n; i += 977)
        x[i] *= 8.0f;
    const double bytes = 4.0 * n;
    double t[RUNS_MAX], c[RUNS_MAX];
    static const unsigned widths[] = {32, 16, 8, 4, 2, 1};
    printf("codec: %u float32 values (%.0f MiB), block %u, median of %d runs, GB/s of float32 "
           "input, wall (min .. max), cpu\n",
           n, bytes / 1048576.0, block, runs);
    int status = 0;
    for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
        unsigned bits = widths[w];
        size_t size = gossip_codec_size(n, bits, block);
        for (int r = 0; r < runs; r++) {
            stamp t0 = now();
            int rc = gossip_codec_encode(&env, x, n, bits, block, buf, size, NULL);
            stamp t1 = now();
            t[r] = t1.wall - t0.wall, c[r] = t1.cpu - t0.cpu;
            status |= rc;
        }
        report("encode", bits, t, c, runs, bytes);
        for (int r = 0; r < runs; r++) {
            stamp t0 = now();
            int rc = gossip_codec_decode(buf, size, n, bits, block, y);
            stamp t1 = now();
            t[r] = t1.wall - t0.wall, c[r] = t1.cpu - t0.cpu;
            status |= rc;
            sink = y[n / 2];
        }
        report("decode", bits, t, c, runs, bytes);
        printf("  %-9s %2u bits  %zu bytes (%.2f bits/value)\n", "size", bits, size,
               8.0 * (double)size / n);
    }
    gossip_ef ef;
    if (gossip_ef_init(&ef, &env, n, 8, block, NULL) != GOSSIP_OK) {
        fprintf(stderr, "bench_codec: ef_init failed\n");
        return 1;
    }
    size_t size8 = gossip_codec_size(n, 8, block);
    for (int r = 0; r < runs; r++) {
        for (uint32_t i = 0; i < n; i += 4096)
            x[i] += 1e-3f; /* the vector moves between sends */
        stamp t0 = now();
        status |= gossip_ef_encode(&ef, &env, x, buf, size8, NULL);
        stamp t1 = now();
        t[r] = t1.wall - t0.wall, c[r] = t1.cpu - t0.cpu;
    }
    report("ef_encode", 8, t, c, runs, bytes);
    gossip_ef_free(&ef, &env);
    status |= ef_drift(&env);
    printf("command: build/bench/bench_codec %u %d\n", n, runs);
    free(x), free(y), free(buf);
    if (status)
        fprintf(stderr, "bench_codec: a codec call failed (%s)\n", gossip_strerror(status));
    return status ? 1 : 0;
}
