/* bench_sim — speed and memory of the whole simulator (sim/run) driving
 * the real mixers.
 *
 *   build/bench/bench_sim [--quick]
 *
 * 1. Events per second, model.kind = consensus: 1,000 agents, pairwise
 *    gossip (random peer), dim 16, 32-bit values, rounds mode, 200 rounds;
 *    and the same in timed mode (5 ms steps, 1 ms links, unlimited
 *    bandwidth) for 2 simulated seconds. An event is a frame delivered, a
 *    local step, a timer or a fault. Target >= 1 million per second on one
 *    core.
 * 2. Scale: 10,000 agents, 100 gossip rounds (rounds mode, consensus, dim
 *    16): wall time (target <= 60 s) and heap bytes per agent (the mixer
 *    with a view of 10,000 ids, the vector, the runner's state).
 * Each figure of 1 is the median of 3 runs; 2 runs once (--quick: 2,000
 * agents instead, for a smoke test).
 *
 *   build/bench/bench_sim --scale MAX [ROUNDS]
 *
 * 3. Growth: ROUNDS (100) rounds of the consensus model (dim 16, pairwise gossip,
 *    random peers, oracle membership: the mixers share one view; oracle
 *    shards) at
 *    10^3, 10^4, ... agents up to MAX: events, CPU seconds of the process,
 *    wall seconds, events per CPU second, heap bytes per agent (agent
 *    setup) and the peak resident set. One line per size, "scale ..."
 *    (bench/sim_scale.sh records them in docs/BENCHMARKS.md).
 */
#include <sys/resource.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/output.h"
#include "sim/run.h"
#include "sim/scenario.h"

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double cpu_s(void);

/* --scale: CPU seconds at the end of the first round (setup included). */
static void first_round(void *ctx, double fraction, double sim_time_s, uint64_t events)
{
    (void)fraction;
    (void)sim_time_s;
    (void)events;
    double *first = ctx;
    if (*first < 0)
        *first = cpu_s();
}

static int run_opts(sim_scenario *sc, const char *const *sets, const sim_run_opts *o,
                    sim_summary *s);

static int run(sim_scenario *sc, const char *const *sets, sim_summary *s)
{
    sim_run_opts o = {.quiet = 1};
    return run_opts(sc, sets, &o, s);
}

static int run_opts(sim_scenario *sc, const char *const *sets, const sim_run_opts *o,
                    sim_summary *s)
{
    char err[512];
    sim_scenario_defaults(sc);
    for (const char *const *k = sets; *k; k++)
        if (sim_scenario_set(sc, *k, err, sizeof err)) {
            fprintf(stderr, "bench_sim: %s\n", err);
            return -1;
        }
    if (sim_scenario_check(sc, err, sizeof err)) {
        fprintf(stderr, "bench_sim: %s\n", err);
        return -1;
    }
    if (sim_run(sc, o, s, err, sizeof err)) {
        fprintf(stderr, "bench_sim: %s\n", err);
        return -1;
    }
    return 0;
}

static int events_per_s(sim_scenario *sc, const char *name, const char *const *sets)
{
    double eps[3], evs = 0;
    sim_summary s;
    for (int i = 0; i < 3; i++) {
        if (run(sc, sets, &s))
            return -1;
        eps[i] = (double)s.events / s.wall_s;
        evs = (double)s.events;
    }
    qsort(eps, 3, sizeof *eps, cmpd);
    printf("%-44s %10.0f events  %6.2f M events/s (median of 3)\n", name, evs, eps[1] / 1e6);
    return 0;
}

static double cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int scale(sim_scenario *sc, uint32_t max, uint32_t rounds)
{
    for (uint32_t n = 1000; n <= max && n >= 1000; n *= 10) {
        char agents[48], nrounds[48];
        snprintf(agents, sizeof agents, "run.agents=%u", n);
        snprintf(nrounds, sizeof nrounds, "run.rounds=%u", rounds);
        const char *const sets[] = {agents, "run.mode=rounds", nrounds, "model.kind=consensus",
                                    "model.dim=16", "mixing.algorithm=gossip",
                                    "mixing.topology=random", "output.every_rounds=1000",
                                    /* the oracle's shards at every size (auto
                                     * runs the replicators up to 2048 agents:
                                     * 4 CPU s and 190 KB per agent at 1000,
                                     * which is not the mixing this measures) */
                                    "shards.mode=oracle", NULL};
        sim_summary s;
        double first = -1;
        /* progress every round: the first call gives the CPU time of setup
         * and the first round, the rest is the rounds' own */
        sim_run_opts o = {
            .quiet = 1, .progress_s = 1e-9, .on_progress = first_round, .hook_ctx = &first};
        double c0 = cpu_s();
        if (run_opts(sc, sets, &o, &s))
            return -1;
        double c = cpu_s() - c0;
        first = first < 0 ? c : first - c0;
        double per_round = rounds > 1 ? (c - first) / (rounds - 1) : c;
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        printf("scale agents=%u rounds=%llu events=%.0f cpu_s=%.2f wall_s=%.2f "
               "events_per_cpu_s=%.0f heap_per_agent=%.0f maxrss_kb=%ld cd_final=%.3g "
               "first_round_cpu_s=%.2f round_cpu_s=%.3f\n",
               n, (unsigned long long)s.rounds, (double)s.events, c, s.wall_s, (double)s.events / c,
               s.memory_per_agent_bytes, ru.ru_maxrss, s.consensus_distance_final, first,
               per_round);
        fflush(stdout);
    }
    return 0;
}

int main(int argc, char **argv)
{
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    if (argc > 2 && strcmp(argv[1], "--scale") == 0) {
        sim_scenario *sc = malloc(sizeof *sc);
        uint32_t rounds = argc > 3 ? (uint32_t)strtoul(argv[3], NULL, 10) : 100;
        int rc = sc && rounds ? scale(sc, (uint32_t)strtoul(argv[2], NULL, 10), rounds) : -1;
        free(sc);
        return rc ? 1 : 0;
    }
    sim_scenario *sc = malloc(sizeof *sc);
    if (!sc)
        return 1;
    printf("bench_sim: whole simulator with real mixers (build/bench/bench_sim%s)\n",
           quick ? " --quick" : "");
    static const char *const rounds1k[] = {"run.agents=1000",
                                           "run.mode=rounds",
                                           "run.rounds=200",
                                           "model.kind=consensus",
                                           "model.dim=16",
                                           "mixing.algorithm=gossip",
                                           "mixing.topology=random",
                                           "output.every_rounds=1000",
                                           NULL};
    static const char *const timed1k[] = {
        "run.agents=1000",        "run.mode=timed",    "run.duration_s=2",
        "model.kind=consensus",   "model.dim=16",      "mixing.algorithm=gossip",
        "mixing.topology=random", "compute.step_ms=5", "compute.straggler_model=none",
        "network.latency_ms=1",   "output.every_s=10", NULL};
    if (events_per_s(sc, "consensus, 1000 agents, rounds, gossip dim 16", rounds1k) ||
        events_per_s(sc, "consensus, 1000 agents, timed, gossip dim 16", timed1k)) {
        free(sc);
        return 1;
    }
    const char *agents = quick ? "run.agents=2000" : "run.agents=10000";
    const char *const big[] = {agents,
                               "run.mode=rounds",
                               "run.rounds=100",
                               "model.kind=consensus",
                               "model.dim=16",
                               "mixing.algorithm=gossip",
                               "mixing.topology=random",
                               "output.every_rounds=1000",
                               NULL};
    sim_summary s;
    if (run(sc, big, &s)) {
        free(sc);
        return 1;
    }
    printf("scale: %u agents x %llu gossip rounds: wall %.2f s (%.2f M events/s), "
           "consensus distance %.3g, heap %.0f bytes per agent\n",
           s.agents, (unsigned long long)s.rounds, s.wall_s, (double)s.events / s.wall_s / 1e6,
           s.consensus_distance_final, s.memory_per_agent_bytes);
    free(sc);
    return 0;
}
