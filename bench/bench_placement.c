/* bench_placement — balance, movement and cost of shard placement.
 *
 * Part 1, replicas: for N agents, S = 8N shards, r = 3: the busiest agent's
 * load over the mean for plain rendezvous and for the bounded-load variant,
 * and the replicas that move when one agent joins or leaves, against the
 * minimum (the joiner's fair share S*r/(N+1) / the leaver's own load),
 * medians over 21 seeds, with the worst seed in brackets.
 *
 * Part 2, primaries: for several (S, N), r = 3 and bounded loads, the
 * primaries per agent (fewest and most over all seeds) with the first-ranked
 * holder as primary (ranked, the rule before balancing) and with balanced
 * primaries (the default); the shards whose primary changes when one agent
 * joins or leaves (a crash is the same view change as a leave) against the
 * minimum (a joiner must become primary for at least floor(S/(N+1)) shards,
 * a leaver's primaries must all move); of those, how many went to an agent
 * that did not hold the shard in the previous view (it fetches before it
 * trains them; the other changes only switch the training to a copy already
 * held); the replicas moved (equal in both modes unless a holder gave way,
 * "adopted"), medians over 41 seeds.
 *
 * Part 3: the CPU time (process clock, robust on a shared machine) of one
 * placement, ranked and balanced, at N = 256 and N = 4096.
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

static int row_has(const uint64_t *row, uint32_t w, uint64_t x)
{
    for (uint32_t i = 0; i < w; i++)
        if (row[i] == x)
            return 1;
    return 0;
}

/* Replicas in `after` that were not in `before` (same shard row). */
static uint32_t moved(const uint64_t *before, uint32_t wb, const uint64_t *after, uint32_t wa,
                      uint32_t s_count)
{
    uint32_t m = 0;
    for (uint32_t s = 0; s < s_count; s++)
        for (uint32_t j = 0; j < wa; j++)
            m += !row_has(before + (size_t)s * wb, wb, after[(size_t)s * wa + j]);
    return m;
}

static uint32_t load_of(const uint64_t *h, uint32_t w, uint32_t s_count, uint64_t node)
{
    uint32_t l = 0;
    for (size_t i = 0; i < (size_t)s_count * w; i++)
        l += h[i] == node;
    return l;
}

/* A random catalog of s_count shards and n + 1 node ids: `nodes` (n, sorted)
 * is the view, `plus` (n + 1, sorted) the view after one more joins. */
typedef struct world {
    uint32_t n, s_count;
    uint8_t (*ids)[32];
    uint64_t *nodes, *plus;
} world;

static void world_make(world *w, uint64_t seed, uint32_t n, uint32_t s_count)
{
    model_rng rng;
    model_rng_seed(&rng, seed, n);
    w->n = n;
    w->s_count = s_count;
    w->ids = malloc((size_t)s_count * 32);
    for (uint32_t s = 0; s < s_count; s++)
        for (int b = 0; b < 32; b++)
            w->ids[s][b] = (uint8_t)model_rng_u64(&rng);
    w->nodes = malloc(((size_t)n + 1) * sizeof *w->nodes);
    w->plus = malloc(((size_t)n + 1) * sizeof *w->plus);
    for (uint32_t i = 0; i <= n; i++)
        w->nodes[i] = model_rng_u64(&rng) | 1;
    memcpy(w->plus, w->nodes, ((size_t)n + 1) * sizeof *w->plus);
    qsort(w->nodes, n, sizeof *w->nodes, cmp_u64);
    qsort(w->plus, n + 1, sizeof *w->plus, cmp_u64);
}

static void world_free(world *w)
{
    free(w->ids), free(w->nodes), free(w->plus);
}

static gossip_env env = {b_alloc, b_free, model_rng_callback, NULL, NULL};

static uint64_t *place(const world *w, const uint64_t *nodes, uint32_t n, uint32_t slack,
                       uint32_t primaries, gossip_placement_stats *st)
{
    gossip_placement_config cfg;
    gossip_placement_config_default(&cfg);
    cfg.slack_permille = slack;
    cfg.primaries = primaries;
    uint64_t *h = malloc((size_t)w->s_count * 3 * sizeof *h);
    gossip_view v = {1, n, nodes};
    if (gossip_placement_compute(&env, &cfg, (const uint8_t(*)[32])w->ids, w->s_count, &v, h, st)) {
        fprintf(stderr, "placement failed\n");
        exit(1);
    }
    return h;
}

#define SEEDS 21

static void part_replicas(void)
{
    const uint32_t ns[] = {16, 64, 256};
    printf("replicas: S = 8N shards, r = 3, medians over %d seeds\n", SEEDS);
    printf("%5s %-8s %9s %8s %15s %15s %14s\n", "N", "mode", "max/mean", "overflow",
           "join_moved/min", "leave_moved/min", "prim_kept_min");
    printf("%5s %-8s %9s %8s %15s %15s %14s\n", "", "", "median", "total", "median (max)",
           "median (max)", "(worst seed)");
    for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
        uint32_t n = ns[t], s_count = 8 * n;
        for (int mode = 0; mode < 2; mode++) {
            double ratio[SEEDS], join[SEEDS], leave[SEEDS], kept_min = 1.0;
            uint32_t ovf = 0;
            uint32_t slack = mode ? GOSSIP_PLACEMENT_SLACK_DEFAULT : GOSSIP_PLACEMENT_UNBOUNDED;
            for (int seed = 0; seed < SEEDS; seed++) {
                world w;
                world_make(&w, 1000 + (uint64_t)seed, n, s_count);
                gossip_placement_stats st;
                uint64_t *h0 = place(&w, w.nodes, n, slack, GOSSIP_PLACEMENT_PRIMARY_RANKED, &st);
                uint64_t *h1 =
                    place(&w, w.plus, n + 1, slack, GOSSIP_PLACEMENT_PRIMARY_RANKED, NULL);
                uint64_t *h2 =
                    place(&w, w.nodes + 1, n - 1, slack, GOSSIP_PLACEMENT_PRIMARY_RANKED, NULL);
                ratio[seed] = st.max_load / (3.0 * s_count / n);
                ovf += st.overflow;
                join[seed] = (double)moved(h0, 3, h1, 3, s_count) / (3.0 * s_count / (n + 1));
                /* leave: nodes[0] leaves */
                leave[seed] =
                    (double)moved(h0, 3, h2, 3, s_count) / load_of(h0, 3, s_count, w.nodes[0]);
                uint32_t led = 0, kept = 0;
                for (uint32_t sh = 0; sh < s_count; sh++)
                    if (h0[sh * 3] == w.nodes[0]) {
                        led++;
                        kept += row_has(h0 + sh * 3, 3, h2[sh * 3]);
                    }
                if (led && (double)kept / led < kept_min)
                    kept_min = (double)kept / led;
                free(h0), free(h1), free(h2);
                world_free(&w);
            }
            qsort(ratio, SEEDS, sizeof(double), cmp_d);
            qsort(join, SEEDS, sizeof(double), cmp_d);
            qsort(leave, SEEDS, sizeof(double), cmp_d);
            printf("%5u %-8s %9.3f %8u %8.2f (%4.2f) %8.2f (%4.2f) %14.2f\n", n,
                   mode ? "bounded" : "plain", ratio[SEEDS / 2], ovf, join[SEEDS / 2],
                   join[SEEDS - 1], leave[SEEDS / 2], leave[SEEDS - 1], kept_min);
        }
    }
}

#define PSEEDS 41

/* Primary changes from h0 to h1 (shards whose first holder differs), and of
 * those the ones whose new primary was not a holder in h0. */
static void prim_changes(const uint64_t *h0, const uint64_t *h1, uint32_t s_count,
                         uint32_t *changed, uint32_t *no_copy)
{
    *changed = *no_copy = 0;
    for (uint32_t s = 0; s < s_count; s++)
        if (h0[s * 3] != h1[s * 3]) {
            (*changed)++;
            *no_copy += !row_has(h0 + s * 3, 3, h1[s * 3]);
        }
}

typedef struct prim_fig {
    uint32_t pmin, pmax, adopted;
    double join[PSEEDS], leave[PSEEDS], join_nc[PSEEDS], leave_nc[PSEEDS], rep[PSEEDS];
} prim_fig;

static void prim_seed(prim_fig *f, int seed, uint32_t n, uint32_t s_count, uint32_t mode)
{
    world w;
    world_make(&w, 5000 + (uint64_t)seed, n, s_count);
    const uint32_t slack = GOSSIP_PLACEMENT_SLACK_DEFAULT;
    gossip_placement_stats st, st1, st2;
    uint64_t *h0 = place(&w, w.nodes, n, slack, mode, &st);
    uint64_t *h1 = place(&w, w.plus, n + 1, slack, mode, &st1);
    uint64_t *leaver = w.nodes + n / 2;
    uint64_t *minus = malloc(n * sizeof *minus);
    for (uint32_t i = 0, k = 0; i < n; i++)
        if (w.nodes + i != leaver)
            minus[k++] = w.nodes[i];
    uint64_t *h2 = place(&w, minus, n - 1, slack, mode, &st2);
    f->pmin = st.primary_min < f->pmin ? st.primary_min : f->pmin;
    f->pmax = st.primary_max > f->pmax ? st.primary_max : f->pmax;
    f->adopted += st.adopted + st1.adopted + st2.adopted;
    uint32_t ch, nc, led = 0;
    prim_changes(h0, h1, s_count, &ch, &nc);
    uint32_t need = s_count / (n + 1) ? s_count / (n + 1) : 1;
    f->join[seed] = (double)ch / need;
    f->join_nc[seed] = nc;
    for (uint32_t s = 0; s < s_count; s++)
        led += h0[s * 3] == *leaver;
    prim_changes(h0, h2, s_count, &ch, &nc);
    f->leave[seed] = led ? (double)ch / led : (double)ch;
    f->leave_nc[seed] = nc;
    f->rep[seed] = moved(h0, 3, h1, 3, s_count) + moved(h0, 3, h2, 3, s_count);
    free(h0), free(h1), free(h2), free(minus);
    world_free(&w);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return v[n / 2];
}

static double worst(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return v[n - 1];
}

static void part_primaries(void)
{
    const uint32_t cases[][2] = {{64, 24},  {24, 24},  {25, 24},   {16, 24},
                                 {128, 16}, {512, 64}, {2048, 256}};
    printf("\nprimaries: r = 3, bounded loads, %d seeds; join/leave: shards whose primary "
           "changed / minimum, median (worst)\n",
           PSEEDS);
    printf("%5s %5s %-8s %7s %7s %13s %7s %13s %7s %8s\n", "S", "N", "mode", "prim", "adopted",
           "join", "no_copy", "leave", "no_copy", "replicas");
    printf("%5s %5s %-8s %7s %7s %13s %7s %13s %7s %8s\n", "", "", "", "min-max", "total",
           "median (max)", "median", "median (max)", "median", "ratio");
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        uint32_t s_count = cases[t][0], n = cases[t][1];
        prim_fig f[2];
        for (int mode = 0; mode < 2; mode++) {
            memset(&f[mode], 0, sizeof f[mode]);
            f[mode].pmin = UINT32_MAX;
            for (int seed = 0; seed < PSEEDS; seed++)
                prim_seed(&f[mode], seed, n, s_count,
                          mode ? GOSSIP_PLACEMENT_PRIMARY_BALANCED
                               : GOSSIP_PLACEMENT_PRIMARY_RANKED);
        }
        double rep_ranked = 0, rep_bal = 0;
        for (int seed = 0; seed < PSEEDS; seed++)
            rep_ranked += f[0].rep[seed], rep_bal += f[1].rep[seed];
        for (int mode = 0; mode < 2; mode++) {
            prim_fig *p = &f[mode];
            double jm = median(p->join, PSEEDS), jw = worst(p->join, PSEEDS);
            double lm = median(p->leave, PSEEDS), lw = worst(p->leave, PSEEDS);
            char range[16];
            snprintf(range, sizeof range, "%u-%u", p->pmin, p->pmax);
            printf("%5u %5u %-8s %7s %7u %6.2f (%5.2f) %7.0f %6.2f (%5.2f) %7.0f %8.3f\n", s_count,
                   n, mode ? "balanced" : "ranked", range, p->adopted, jm, jw,
                   median(p->join_nc, PSEEDS), lm, lw, median(p->leave_nc, PSEEDS),
                   mode ? rep_bal / rep_ranked : 1.0);
        }
    }
}

static double cpu_ms(const world *w, uint32_t primaries)
{
    gossip_placement_config cfg;
    gossip_placement_config_default(&cfg);
    cfg.primaries = primaries;
    uint64_t *h = malloc((size_t)w->s_count * 3 * 8);
    gossip_view v = {1, w->n, w->nodes};
    double ms[9];
    for (int i = 0; i < 9; i++) {
        struct timespec a, b;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
        gossip_placement_compute(&env, &cfg, (const uint8_t(*)[32])w->ids, w->s_count, &v, h, NULL);
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
        ms[i] = (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6;
    }
    free(h);
    return median(ms, 9);
}

int main(void)
{
    part_replicas();
    part_primaries();
    printf("\n");
    const uint32_t ns[] = {256, 4096};
    for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
        world w;
        world_make(&w, 7, ns[t], 8 * ns[t]);
        double ranked = cpu_ms(&w, GOSSIP_PLACEMENT_PRIMARY_RANKED);
        double balanced = cpu_ms(&w, GOSSIP_PLACEMENT_PRIMARY_BALANCED);
        printf("one bounded placement, N = %u, S = %u, r = 3: ranked %.2f ms, balanced %.2f ms "
               "CPU (median of 9)\n",
               ns[t], 8 * ns[t], ranked, balanced);
        world_free(&w);
    }
    printf("command: build/bench/bench_placement\n");
    return 0;
}
