/* bench_codec — encode and decode throughput of the quantized codec.
 *
 * One vector of 4 Mi float32 values (16 MiB, larger than the caches, so the
 * figures include memory traffic), block 256, values uniform in [-1, 1) with
 * a few larger outliers. For each width: encode (with the env's xoshiro256**
 * RNG through the gossip_env callback, as in the agent) and decode, each
 * timed over RUNS runs; the median is printed in GB/s of float32 input
 * (4 * n bytes / time), with the min and max run beside it, and the encoded
 * size. Then error-feedback encode (ef_encode = delta, encode, update) at 8
 * bits. Single thread.
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

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Sorts t[0..runs) and prints median (min..max) as GB/s of `bytes`. */
static double report(const char *what, unsigned bits, double *t, int runs, double bytes)
{
    qsort(t, (size_t)runs, sizeof *t, cmp_d);
    double med = bytes / t[runs / 2] * 1e-9;
    printf("  %-9s %2u bits  %6.2f GB/s  (%.2f .. %.2f)\n", what, bits, med,
           bytes / t[runs - 1] * 1e-9, bytes / t[0] * 1e-9);
    return med;
}

static volatile float sink;

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
    double t[RUNS_MAX];
    static const unsigned widths[] = {32, 16, 8, 4, 2, 1};
    printf("codec: %u float32 values (%.0f MiB), block %u, median of %d runs, GB/s of float32 "
           "input (min .. max)\n",
           n, bytes / 1048576.0, block, runs);
    int status = 0;
    for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
        unsigned bits = widths[w];
        size_t size = gossip_codec_size(n, bits, block);
        for (int r = 0; r < runs; r++) {
            double t0 = now_s();
            int rc = gossip_codec_encode(&env, x, n, bits, block, buf, size, NULL);
            t[r] = now_s() - t0;
            status |= rc;
        }
        report("encode", bits, t, runs, bytes);
        for (int r = 0; r < runs; r++) {
            double t0 = now_s();
            int rc = gossip_codec_decode(buf, size, n, bits, block, y);
            t[r] = now_s() - t0;
            status |= rc;
            sink = y[n / 2];
        }
        report("decode", bits, t, runs, bytes);
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
        double t0 = now_s();
        status |= gossip_ef_encode(&ef, &env, x, buf, size8, NULL);
        t[r] = now_s() - t0;
    }
    report("ef_encode", 8, t, runs, bytes);
    gossip_ef_free(&ef, &env);
    printf("command: build/bench/bench_codec %u %d\n", n, runs);
    free(x), free(y), free(buf);
    if (status)
        fprintf(stderr, "bench_codec: a codec call failed (%s)\n", gossip_strerror(status));
    return status ? 1 : 0;
}
