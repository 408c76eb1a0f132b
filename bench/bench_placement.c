/* bench_placement — balance, movement and cost of shard placement.
 *
 * For N agents, S = 8N shards, r = 3: the busiest agent's load over the mean
 * for plain rendezvous and for the bounded-load variant, and the replicas
 * that move when one agent joins or leaves, against the minimum (the
 * joiner's fair share S*r/(N+1) / the leaver's own load), medians over 21 seeds,
 * with the worst seed in brackets. Then the CPU time (process clock, robust on
 * a shared machine) of one placement at N = 256.
 *
 *   make bench  or  build/bench/bench_placement
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gossip/placement.h"
#include "model/rng.h"

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

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}
static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Replicas in `after` that were not in `before` (same shard row). */
static uint32_t moved(const uint64_t *before, uint32_t wb, const uint64_t *after, uint32_t wa,
                      uint32_t s_count)
{
    uint32_t m = 0;
    for (uint32_t s = 0; s < s_count; s++)
        for (uint32_t j = 0; j < wa; j++) {
            int found = 0;
            for (uint32_t i = 0; i < wb; i++)
                found |= before[(size_t)s * wb + i] == after[(size_t)s * wa + j];
            m += !found;
        }
    return m;
}

static uint32_t load_of(const uint64_t *h, uint32_t w, uint32_t s_count, uint64_t node)
{
    uint32_t l = 0;
    for (size_t i = 0; i < (size_t)s_count * w; i++)
        l += h[i] == node;
    return l;
}

#define SEEDS 21

int main(void)
{
    gossip_env env = {b_alloc, b_free, model_rng_callback, NULL, NULL};
    const uint32_t ns[] = {16, 64, 256};
    printf("placement: S = 8N shards, r = 3, medians over %d seeds\n", SEEDS);
    printf("%5s %-8s %9s %8s %15s %15s %14s\n", "N", "mode", "max/mean", "overflow",
           "join_moved/min", "leave_moved/min", "prim_kept_min");
    printf("%5s %-8s %9s %8s %15s %15s %14s\n", "", "", "median", "total", "median (max)",
           "median (max)", "(worst seed)");
    for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
        uint32_t n = ns[t], s_count = 8 * n;
        for (int mode = 0; mode < 2; mode++) {
            double ratio[SEEDS], join[SEEDS], leave[SEEDS], kept_min = 1.0;
            uint32_t ovf = 0;
            for (int seed = 0; seed < SEEDS; seed++) {
                model_rng rng;
                model_rng_seed(&rng, 1000 + (uint64_t)seed, n);
                uint8_t(*ids)[32] = malloc((size_t)s_count * 32);
                for (uint32_t s = 0; s < s_count; s++)
                    for (int b = 0; b < 32; b++)
                        ids[s][b] = (uint8_t)model_rng_u64(&rng);
                uint64_t *nodes = malloc((n + 1) * sizeof *nodes);
                for (uint32_t i = 0; i <= n; i++)
                    nodes[i] = model_rng_u64(&rng) | 1;
                uint64_t joiner = nodes[n];
                qsort(nodes, n, sizeof *nodes, cmp_u64);
                uint64_t *plus = malloc((n + 1) * sizeof *plus);
                memcpy(plus, nodes, n * sizeof *plus);
                plus[n] = joiner;
                qsort(plus, n + 1, sizeof *plus, cmp_u64);
                gossip_placement_config cfg;
                gossip_placement_config_default(&cfg);
                if (mode == 0)
                    cfg.slack_permille = GOSSIP_PLACEMENT_UNBOUNDED;
                uint64_t *h0 = malloc((size_t)s_count * 3 * 8),
                         *h1 = malloc((size_t)s_count * 3 * 8),
                         *h2 = malloc((size_t)s_count * 3 * 8);
                gossip_view v0 = {1, n, nodes}, v1 = {2, n + 1, plus}, v2 = {3, n - 1, nodes + 1};
                gossip_placement_stats st;
                if (gossip_placement_compute(&env, &cfg, (const uint8_t(*)[32])ids, s_count, &v0,
                                             h0, &st) ||
                    gossip_placement_compute(&env, &cfg, (const uint8_t(*)[32])ids, s_count, &v1,
                                             h1, NULL) ||
                    gossip_placement_compute(&env, &cfg, (const uint8_t(*)[32])ids, s_count, &v2,
                                             h2, NULL)) {
                    fprintf(stderr, "placement failed\n");
                    return 1;
                }
                ratio[seed] = st.max_load / (3.0 * s_count / n);
                ovf += st.overflow;
                /* join minimum: the joiner's fair share S*r/(N+1) */
                join[seed] = (double)moved(h0, 3, h1, 3, s_count) / (3.0 * s_count / (n + 1));
                (void)joiner;
                /* leave: nodes[0] leaves */
                leave[seed] =
                    (double)moved(h0, 3, h2, 3, s_count) / load_of(h0, 3, s_count, nodes[0]);
                uint32_t led = 0, kept = 0;
                for (uint32_t sh = 0; sh < s_count; sh++)
                    if (h0[sh * 3] == nodes[0]) {
                        led++;
                        kept += h2[sh * 3] == h0[sh * 3 + 1] || h2[sh * 3] == h0[sh * 3 + 2];
                    }
                if (led && (double)kept / led < kept_min)
                    kept_min = (double)kept / led;
                free(ids), free(nodes), free(plus), free(h0), free(h1), free(h2);
            }
            qsort(ratio, SEEDS, sizeof(double), cmp_d);
            qsort(join, SEEDS, sizeof(double), cmp_d);
            qsort(leave, SEEDS, sizeof(double), cmp_d);
            printf("%5u %-8s %9.3f %8u %8.2f (%4.2f) %8.2f (%4.2f) %14.2f\n", n,
                   mode ? "bounded" : "plain", ratio[SEEDS / 2], ovf, join[SEEDS / 2],
                   join[SEEDS - 1], leave[SEEDS / 2], leave[SEEDS - 1], kept_min);
        }
    }
    /* Cost of one placement at N = 256, S = 2048 (median of 9). */
    {
        uint32_t n = 256, s_count = 2048;
        model_rng rng;
        model_rng_seed(&rng, 7, 0);
        uint8_t(*ids)[32] = malloc((size_t)s_count * 32);
        for (uint32_t s = 0; s < s_count; s++)
            for (int b = 0; b < 32; b++)
                ids[s][b] = (uint8_t)model_rng_u64(&rng);
        uint64_t *nodes = malloc(n * sizeof *nodes);
        for (uint32_t i = 0; i < n; i++)
            nodes[i] = model_rng_u64(&rng) | 1;
        qsort(nodes, n, sizeof *nodes, cmp_u64);
        uint64_t *h = malloc((size_t)s_count * 3 * 8);
        gossip_placement_config cfg;
        gossip_placement_config_default(&cfg);
        gossip_view v = {1, n, nodes};
        double ms[9];
        for (int i = 0; i < 9; i++) {
            struct timespec a, b;
            clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
            gossip_placement_compute(&env, &cfg, (const uint8_t(*)[32])ids, s_count, &v, h, NULL);
            clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
            ms[i] = (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6;
        }
        qsort(ms, 9, sizeof(double), cmp_d);
        printf("one bounded placement, N = 256, S = 2048, r = 3: %.2f ms CPU (median of 9)\n",
               ms[4]);
        free(ids), free(nodes), free(h);
    }
    printf("command: build/bench/bench_placement\n");
    return 0;
}
