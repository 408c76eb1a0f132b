/* bench_gossip_agents — pairwise gossip's consensus contraction per round
 * on real agents (the runtime of include/murmur.h, 127.0.0.1, secure
 * channel), against sequential random pairing for the same N (method:
 * tests/gossip_agents.h). One line per run:
 *
 *   gossip_agents n=8 dim=4096 window=2..10 variance_factor=... sequential=...
 *       mean_drift=... rounds=... aborts=... wall_s=...
 *
 *   build/bench/bench_gossip_agents [N [DIM [K_HI [SEED]]]]   (8 4096 10 1)
 * bench/gossip_agents.sh runs it for several N and records the lines. */
#include "tests/gossip_agents.h"

int main(int argc, char **argv)
{
    uint32_t n = argc > 1 ? (uint32_t)atoi(argv[1]) : 8;
    uint32_t dim = argc > 2 ? (uint32_t)atoi(argv[2]) : 4096;
    unsigned k_hi = argc > 3 ? (unsigned)atoi(argv[3]) : 10;
    uint64_t seed = argc > 4 ? (uint64_t)strtoull(argv[4], NULL, 10) : 1;
    ga_result r;
    char err[512];
    if (ga_run(n, dim, k_hi, seed, &r, err, sizeof err)) {
        fprintf(stderr, "bench_gossip_agents: %s\n", err);
        return 1;
    }
    for (unsigned k = 0; k <= k_hi; k++)
        printf("cd n=%u round=%u consensus_distance=%.6g\n", n, k, r.cd[k]);
    printf("gossip_agents n=%u dim=%u window=%u..%u variance_factor=%.4f sequential=%.4f "
           "mean_drift=%.2e rounds=%llu aborts=%llu wall_s=%.2f\n",
           n, dim, r.k_lo, r.k_hi, r.factor, r.reference, r.mean_drift,
           (unsigned long long)r.rounds, (unsigned long long)r.aborts, r.wall_s);
    return 0;
}
