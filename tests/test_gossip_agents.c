/* Pairwise gossip on real agents (issue 12 item 4): 16 agents of the real
 * runtime (include/murmur.h, NNG on 127.0.0.1, secure channel, SWIM) in
 * this process mix vectors that only mixing changes (method:
 * tests/gossip_agents.h). Over 4 seeds the variance of the hosts' vectors
 * shrinks by at most 0.38 per cluster round (geometric mean of the seeds'
 * factors; with atomic exchanges; the exchange that answered pushes
 * mid-flight measured 0.36-0.52 per seed at 16 agents, about 0.44 as a
 * mean), and the mean stays
 * where it started. 16 agents, not fewer: at 8 the per-seed spread on a
 * loaded 2-core machine overlaps that of the old exchange. The bound is
 * the behaviour (atomic against the old exchange), not issue 12's target
 * of 0.33, which bench/gossip_agents.sh measures and records for 4, 8 and
 * 16 agents in docs/BENCHMARKS.md: on this machine at load 5-8 the atomic
 * exchange measured 0.3247 and 0.3519 over 4 seeds (0.2769 quiet), so 0.33
 * failed a loaded make test without any change to mixing. */
#include "tests/harness.h"

#include "tests/gossip_agents.h"

static void agents_contract_like_atomic_pushpull(void **state)
{
    (void)state;
    double logsum = 0, drift = 0;
    const unsigned seeds = 4;
    for (uint64_t seed = 1; seed <= seeds; seed++) {
        ga_result r;
        char err[512];
        if (ga_run(16, 1024, 10, seed, &r, err, sizeof err))
            fail_msg("seed %llu: %s", (unsigned long long)seed, err);
        print_message("seed %llu: variance factor %.4f (sequential %.4f), mean drift %.2e, %llu "
                      "rounds in %.2f s\n",
                      (unsigned long long)seed, r.factor, r.reference, r.mean_drift,
                      (unsigned long long)r.rounds, r.wall_s);
        /* every round's result was applied: the vectors mixed */
        assert_true(r.factor > 0 && r.cd[r.k_hi] < r.cd[0]);
        logsum += log(r.factor);
        drift = fmax(drift, r.mean_drift);
    }
    double factor = exp(logsum / seeds);
    print_message("16 agents, %u seeds: variance factor per round %.4f, largest mean drift %.2e "
                  "of the initial spread\n",
                  seeds, factor, drift);
    if (!(factor <= 0.38))
        fail_msg("variance factor %.4f per round > 0.38", factor);
    /* Each exchange keeps the sum exactly, but when the hosts' vectors are
     * read some exchanges of the last rounds are visible at one end only
     * (the other host applies its side with its next result): a drift of
     * the order of the last rounds' spread (a small fraction of the initial
     * one per value, 3 to 4 times that for the largest of 1024 values). */
    if (!(drift < 5e-2))
        fail_msg("the mean moved by %.2e of the initial spread", drift);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(agents_contract_like_atomic_pushpull),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
