/* bench_mix — CPU cost and exact bytes of one mixing round per algorithm.
 *
 * N = 8 members of gossip_mix in one process on the sim driver (rounds mode:
 * frames are copied in memory, no network), a vector of `dim` float32 values
 * (default 256 Ki = 1 MiB), chunks of 64 Ki values. For each algorithm the
 * median over `runs` rounds of the wall and process-CPU time of the whole
 * round (all 8 members, one thread, driver copies included) is printed per
 * member, with the exact bytes each member sent per round (frames with
 * headers, from the mixer's own counters) against the vector's 4 * dim.
 *
 *   make bench  or  build/bench/bench_mix [dim] [runs] [only]
 *
 * only: run just the cases whose name contains it (for a profile of one).
 *
 * The last case runs each member's rounds through gossip/sched as the
 * agent does, with the agent's outer step (mixing.outer_momentum 0.3):
 * the schedule's copy of the parameters into its outgoing vector, the
 * mixer, the outer step of gossip_sched_deliver_ref and the apply of
 * before_step are all in the timed round, so the row beside the mixer's
 * own defaults row shows what the schedule adds per round.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gossip/mix.h"
#include "gossip/sched.h"
#include "model/rng.h"
#include "sim/driver.h"

#define N        8u
#define RUNS_MAX 101

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return v[n / 2];
}

typedef struct bench_case {
    const char *name;
    gossip_mix_algo algo;
    gossip_topology topo;
    unsigned bits;
    gossip_robust_rule robust; /* the agent's default is clip */
    double outer;              /* > 0: rounds through gossip/sched with this outer momentum */
} bench_case;

static int run_case(const bench_case *bc, uint32_t dim, int runs)
{
    sim_driver *d;
    sim_driver_config dc = {.agents = N, .seed = 1, .mode = SIM_MODE_ROUNDS, .round_us = 1000};
    if (sim_driver_create(&d, &dc) != 0)
        return -1;
    gossip_mix *m[N];
    gossip_sched *sc[N] = {0};
    float *x[N], *mixed[N];
    uint64_t ids[N];
    model_rng rng;
    model_rng_seed(&rng, 7, 0);
    for (uint32_t i = 0; i < N; i++) {
        ids[i] = 100 + i;
        gossip_mix_config cfg = {.self = ids[i],
                                 .dim = dim,
                                 .algos = 1u << bc->algo,
                                 .algo = bc->algo,
                                 .topology = bc->topo,
                                 .bits = bc->bits,
                                 .robust = {.rule = bc->robust},
                                 .links_max = 4};
        if (gossip_mix_create(&m[i], sim_driver_env(d, i), &cfg) != GOSSIP_OK)
            return -1;
        sim_driver_attach(d, i, ids[i], &sim_ops_mix, m[i]);
        if (bc->outer > 0) {
            gossip_sched_config sco = {.dim = dim,
                                       .interval_steps = 1,
                                       .batch = 64,
                                       .kind = MODEL_LR_CONSTANT,
                                       .base_lr = 0.1f,
                                       .unit = GOSSIP_SCHED_UNIT_STEPS,
                                       .outer_momentum = bc->outer};
            if (gossip_sched_create(&sc[i], sim_driver_env(d, i), &sco) != GOSSIP_OK)
                return -1;
        }
        x[i] = malloc(dim * sizeof(float));
        mixed[i] = sc[i] ? malloc(dim * sizeof(float)) : NULL;
        if (!x[i] || (sc[i] && !mixed[i]))
            return -1;
        for (uint32_t j = 0; j < dim; j++)
            x[i][j] = (float)model_rng_normal(&rng);
    }
    gossip_view v = {.epoch = 1, .n = N, .ids = ids};
    for (uint32_t i = 0; i < N; i++)
        gossip_mix_set_view(m[i], &v, 0);
    double wall[RUNS_MAX], cpu[RUNS_MAX];
    uint64_t bytes0 = 0, bytes1 = 0;
    int completed = 0;
    for (int r = 0; r < runs + 1; r++) { /* run 0 warms up */
        /* a local step's drift between rounds (untimed): the bounds of
         * robust = clip are measured against it, as in the agent */
        for (uint32_t i = 0; i < N; i++)
            for (uint32_t j = 0; j < dim; j++)
                x[i][j] += 1e-3f * (float)model_rng_normal(&rng);
        if (r == 1)
            for (uint32_t i = 0; i < N; i++)
                bytes0 += gossip_mix_get_stats(m[i])->bytes_sent;
        double w0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
        for (uint32_t i = 0; i < N; i++) {
            const float *out = x[i];
            if (sc[i]) { /* the local step that makes a round due */
                gossip_sched_after_step(sc[i], x[i], 64, N);
                out = gossip_sched_outgoing(sc[i]);
            }
            gossip_mix_start(m[i], out, sim_driver_now(d));
            sim_driver_kick(d, i);
        }
        sim_driver_run_round(d);
        for (uint32_t i = 0; i < N; i++) {
            int outcome = GOSSIP_EABORTED;
            /* with a schedule the result goes to a buffer of its own (the
             * agent's served model), then by reference to the schedule,
             * which applies it before the next local step */
            gossip_mix_take(m[i], sc[i] ? mixed[i] : x[i], &outcome);
            completed += r > 0 && outcome == GOSSIP_OK;
            if (sc[i]) {
                gossip_sched_deliver_ref(sc[i], mixed[i], outcome);
                gossip_sched_before_step(sc[i], x[i]);
            }
        }
        if (r > 0) {
            wall[r - 1] = (clock_s(CLOCK_MONOTONIC) - w0) / N;
            cpu[r - 1] = (clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0) / N;
        }
    }
    for (uint32_t i = 0; i < N; i++) {
        bytes1 += gossip_mix_get_stats(m[i])->bytes_sent;
        /* every timed round after the first result took an outer step */
        if (sc[i] && gossip_sched_stats_get(sc[i])->outer_steps < (uint64_t)runs) {
            fprintf(stderr, "bench_mix: %s: member %u took %llu outer steps in %d rounds\n",
                    bc->name, i, (unsigned long long)gossip_sched_stats_get(sc[i])->outer_steps,
                    runs);
            return -1;
        }
    }
    double per_member = (double)(bytes1 - bytes0) / runs / N;
    printf("| %-34s | %8.2f | %8.2f | %12.0f | %5.2f | %d/%d |\n", bc->name,
           median(wall, runs) * 1e3, median(cpu, runs) * 1e3, per_member, per_member / (4.0 * dim),
           completed, runs * (int)N);
    for (uint32_t i = 0; i < N; i++) {
        gossip_mix_destroy(m[i]);
        gossip_sched_destroy(sc[i]);
        free(x[i]);
        free(mixed[i]);
    }
    sim_driver_destroy(d);
    return 0;
}

int main(int argc, char **argv)
{
    uint32_t dim = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 0) : 256u * 1024u;
    int runs = argc > 2 ? atoi(argv[2]) : 9;
    const char *only = argc > 3 ? argv[3] : NULL;
    if (dim == 0 || dim > GOSSIP_CODEC_DIM_MAX || runs < 1 || runs > RUNS_MAX) {
        fprintf(stderr, "usage: bench_mix [dim 1..%u] [runs 1..%d] [only]\n", GOSSIP_CODEC_DIM_MAX,
                RUNS_MAX);
        return 2;
    }
    printf("bench_mix: %u members, dim %u (%.1f MiB), %d rounds, medians per member\n", N, dim,
           dim * 4.0 / 1048576, runs);
    printf("command: build/bench/bench_mix %u %d\n\n", dim, runs);
    printf("| algorithm | wall ms | cpu ms | bytes sent | x vector | rounds ok |\n");
    printf("|---|---:|---:|---:|---:|---:|\n");
    const bench_case cases[] = {
        {"allreduce, 32 bits", GOSSIP_MIX_ALLREDUCE, GOSSIP_TOPO_RING, 32, GOSSIP_ROBUST_NONE, 0},
        {"allreduce, 8 bits", GOSSIP_MIX_ALLREDUCE, GOSSIP_TOPO_RING, 8, GOSSIP_ROBUST_NONE, 0},
        {"dpsgd, ring, 32 bits", GOSSIP_MIX_DPSGD, GOSSIP_TOPO_RING, 32, GOSSIP_ROBUST_NONE, 0},
        {"dpsgd, exponential, 32 bits", GOSSIP_MIX_DPSGD, GOSSIP_TOPO_EXPONENTIAL, 32,
         GOSSIP_ROBUST_NONE, 0},
        {"gossip, random, 32 bits", GOSSIP_MIX_GOSSIP, GOSSIP_TOPO_RANDOM, 32, GOSSIP_ROBUST_NONE,
         0},
        {"gossip, random, 8 bits", GOSSIP_MIX_GOSSIP, GOSSIP_TOPO_RANDOM, 8, GOSSIP_ROBUST_NONE, 0},
        {"gossip, random, 8 bits, clip (defaults)", GOSSIP_MIX_GOSSIP, GOSSIP_TOPO_RANDOM, 8,
         GOSSIP_ROBUST_CLIP, 0},
        {"the defaults through gossip/sched, outer step 0.3", GOSSIP_MIX_GOSSIP, GOSSIP_TOPO_RANDOM,
         8, GOSSIP_ROBUST_CLIP, 0.3},
        {"push-sum, ring (float64 sums)", GOSSIP_MIX_PUSHSUM, GOSSIP_TOPO_RING, 32,
         GOSSIP_ROBUST_NONE, 0},
        {"choco, ring, 4 bits", GOSSIP_MIX_CHOCO, GOSSIP_TOPO_RING, 4, GOSSIP_ROBUST_NONE, 0},
        {"choco, ring, 1 bit", GOSSIP_MIX_CHOCO, GOSSIP_TOPO_RING, 1, GOSSIP_ROBUST_NONE, 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        if ((!only || strstr(cases[k].name, only)) && run_case(&cases[k], dim, runs) != 0) {
            fprintf(stderr, "bench_mix: %s: setup failed\n", cases[k].name);
            return 1;
        }
    return 0;
}
