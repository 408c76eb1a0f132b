/* SWIM scenarios on the swimnet harness: detection, false positives under
 * slowness and loss, traffic flatness, mass restart, partition heal, leave.
 * Every test is seeded (MURMUR_TEST_SEED overrides) and prints its figures;
 * docs/MEMBERSHIP.md quotes them. */
#include "tests/harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "tests/swimnet.c"

#define PERIOD_US 1000000u /* the default probe interval */

static swimnet *make_net(uint32_t n, uint64_t seed, double loss)
{
    swimnet_config c = {.n = n,
                        .seed = seed,
                        .latency_min_us = 500,
                        .latency_max_us = 5000,
                        .loss = loss,
                        .n_seeds = 3};
    swimnet *net = swimnet_create(&c);
    assert_non_null(net);
    return net;
}

/* Run until every view is complete; returns the periods it took. */
static uint32_t converge(swimnet *net, uint32_t max_periods, uint64_t seed)
{
    gossip_time_us t0 = net->now;
    for (uint32_t p = 1; p <= max_periods; p++) {
        swimnet_run_until(net, t0 + (gossip_time_us)p * PERIOD_US);
        if (swimnet_converged(net))
            return p;
    }
    fail_msg("seed %llu: views not complete after %u periods", (unsigned long long)seed,
             max_periods);
    return 0;
}

/* Crash a fraction of members; measure per crashed member the time to its
 * first suspicion anywhere and to "every live member marks it dead". */
static void crash_case(uint32_t n, uint32_t n_crash, uint64_t seed, double *mean_first,
                       double *mean_all, double *max_all)
{
    swimnet *net = make_net(n, seed, 0.0);
    converge(net, 400, seed);
    swimnet_run_until(net, net->now + 20u * PERIOD_US); /* let joins settle */
    /* crash random non-seed members */
    uint32_t *crashed = calloc(n_crash, sizeof *crashed);
    double *first = calloc(n_crash, sizeof *first), *all = calloc(n_crash, sizeof *all);
    assert_non_null(crashed);
    for (uint32_t k = 0; k < n_crash;) {
        uint32_t i = 3 + (uint32_t)model_rng_below(&net->rng, n - 3);
        if (!net->agents[i].up)
            continue;
        swimnet_crash(net, i);
        crashed[k] = i;
        first[k] = all[k] = -1;
        k++;
    }
    gossip_time_us t0 = net->now;
    const uint32_t steps_per_period = 10, max_periods = 200;
    uint32_t done = 0;
    for (uint32_t s = 1; s <= steps_per_period * max_periods && done < n_crash; s++) {
        swimnet_run_until(net, t0 + (gossip_time_us)s * PERIOD_US / steps_per_period);
        double t = (double)s / steps_per_period;
        for (uint32_t k = 0; k < n_crash; k++) {
            if (all[k] >= 0)
                continue;
            int any = 0, every = 1;
            for (uint32_t i = 0; i < n; i++) {
                if (!net->agents[i].up)
                    continue;
                gossip_member_state st = swimnet_state(net, i, crashed[k]);
                any |= st == GOSSIP_MEMBER_SUSPECT || st == GOSSIP_MEMBER_DEAD;
                every &= st == GOSSIP_MEMBER_DEAD;
            }
            if (any && first[k] < 0)
                first[k] = t;
            if (every) {
                all[k] = t;
                done++;
            }
        }
    }
    if (done < n_crash)
        fail_msg("seed %llu n=%u: only %u of %u crashed members marked dead by all",
                 (unsigned long long)seed, n, done, n_crash);
    *mean_first = *mean_all = *max_all = 0;
    for (uint32_t k = 0; k < n_crash; k++) {
        *mean_first += first[k] / n_crash;
        *mean_all += all[k] / n_crash;
        if (all[k] > *max_all)
            *max_all = all[k];
    }
    /* the survivors' views hold exactly the survivors */
    assert_true(swimnet_converged(net));
    free(crashed);
    free(first);
    free(all);
    swimnet_destroy(net);
}

/* Bounds documented in docs/MEMBERSHIP.md ("Detection"). SWIM's expected
 * first detection is e/(e-1) = 1.58 periods counted as whole synchronous
 * rounds; measured from the crash instant, the suspicion is raised at the
 * end of the period in which the first probe went out, so the expected
 * value is E[wait for the first probe] + 1 period <= e/(e-1) + 1. */
#define FIRST_DETECTION_BOUND (exp(1.0) / (exp(1.0) - 1.0) + 1.0)
static void crash_detection(void **state)
{
    (void)state;
    uint64_t seed = test_seed(11);
    printf("seed %llu\n", (unsigned long long)seed);
    static const uint32_t sizes[][2] = {{32, 1}, {64, 3}, {64, 6}, {128, 13}, {256, 26}};
    double sum_first = 0;
    uint32_t cases = 0, crashed = 0;
    for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++) {
        double mf, ma, mx;
        uint32_t n = sizes[c][0], k = sizes[c][1];
        crash_case(n, k, seed + c, &mf, &ma, &mx);
        /* dead after the suspicion timeout: alpha*log10(N) periods at least,
         * at most beta times that; dissemination adds a few periods */
        double nf = log10((double)n) < 1 ? 1 : log10((double)n);
        double bound = 6.0 * 4.0 * nf + 10.0;
        printf("n=%3u crashed=%2u first suspicion %.2f periods (mean), all-dead %.2f mean %.2f max "
               "(bound %.1f)\n",
               n, k, mf, ma, mx, bound);
        if (mx > bound)
            fail_msg("seed %llu n=%u: dissemination took %.1f periods > %.1f",
                     (unsigned long long)seed, n, mx, bound);
        sum_first += mf * k;
        crashed += k;
        cases++;
    }
    double mean_first = sum_first / crashed;
    printf("mean first suspicion over %u crashes: %.2f periods (SWIM e/(e-1) = %.2f)\n", crashed,
           mean_first, exp(1.0) / (exp(1.0) - 1.0));
    if (mean_first > FIRST_DETECTION_BOUND)
        fail_msg("seed %llu: mean first detection %.2f > %.2f periods", (unsigned long long)seed,
                 mean_first, FIRST_DETECTION_BOUND);
}

/* 10% slow members (handling messages up to 3 probe timeouts late), 2% loss,
 * N = 64, 10,000 probe periods: nobody may be declared dead. */
static void no_false_positives(void **state)
{
    (void)state;
    uint64_t seed = test_seed(12);
    printf("seed %llu\n", (unsigned long long)seed);
    const uint32_t n = 64, periods = 10000;
    swimnet *net = make_net(n, seed, 0.02);
    converge(net, 400, seed);
    uint32_t n_slow = n / 10;
    for (uint32_t k = 0; k < n_slow; k++)
        swimnet_set_slow(net, n - 1 - k, 3u * 500000u);
    uint64_t deaths0 = 0, susp0 = 0;
    for (uint32_t i = 0; i < n; i++) {
        deaths0 += gossip_swim_stats_get(net->agents[i].swim)->deaths;
        susp0 += gossip_swim_stats_get(net->agents[i].swim)->suspicions;
    }
    gossip_time_us t0 = net->now;
    uint32_t dead_seen = 0, slow_dead_seen = 0;
    /* stats.deaths counts every declaration; the sightings (every 5
     * periods) also catch a death learnt from gossip */
    for (uint32_t p = 5; p <= periods; p += 5) {
        swimnet_run_until(net, t0 + (gossip_time_us)p * PERIOD_US);
        for (uint32_t i = 0; i < n; i++)
            for (uint32_t j = 0; j < n; j++) {
                gossip_member_state st = swimnet_state(net, i, j);
                if (st == GOSSIP_MEMBER_DEAD || st == GOSSIP_MEMBER_NONE) {
                    if (j >= n - n_slow)
                        slow_dead_seen++;
                    else
                        dead_seen++;
                }
            }
    }

    uint64_t deaths = 0, susp = 0, refute = 0, health_max = 0;
    for (uint32_t i = 0; i < n; i++) {
        const gossip_swim_stats *st = gossip_swim_stats_get(net->agents[i].swim);
        deaths += st->deaths;
        susp += st->suspicions;
        refute += st->refutations;
        uint32_t h = gossip_swim_health(net->agents[i].swim);
        if (h > health_max)
            health_max = h;
    }
    printf("n=%u slow=%u loss=2%% periods=%u: suspicions %llu, refutations %llu, deaths %llu, "
           "max LHM %llu\n",
           n, n_slow, periods, (unsigned long long)(susp - susp0), (unsigned long long)refute,
           (unsigned long long)(deaths - deaths0), (unsigned long long)health_max);
    if (deaths != deaths0 || dead_seen || slow_dead_seen)
        fail_msg("seed %llu: %llu false death declarations (seen dead: %u healthy, %u slow)",
                 (unsigned long long)seed, (unsigned long long)(deaths - deaths0), dead_seen,
                 slow_dead_seen);
    assert_true(swimnet_converged(net));
    swimnet_destroy(net);
}

/* Messages and bytes per member per probe period, measured over a window
 * that spans several push-pull syncs, stay within 10% from N=16 to N=256. */
static void traffic_flat(void **state)
{
    (void)state;
    uint64_t seed = test_seed(13);
    printf("seed %llu\n", (unsigned long long)seed);
    static const uint32_t sizes[] = {16, 64, 256};
    const uint32_t window = 512; /* one sync interval at N = 256, 16 at N = 16 */
    double m0 = 0, b0 = 0;
    for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++) {
        uint32_t n = sizes[c];
        swimnet *net = make_net(n, seed + c, 0.0);
        converge(net, 400, seed);
        swimnet_run_until(net, net->now + 100u * PERIOD_US);
        uint64_t f = net->frames_sent, b = net->bytes_sent;
        swimnet_run_until(net, net->now + (gossip_time_us)window * PERIOD_US);
        double mpp = (double)(net->frames_sent - f) / n / window;
        double bpp = (double)(net->bytes_sent - b) / n / window;
        printf("n=%3u: %.3f msgs and %.1f bytes per member per period\n", n, mpp, bpp);
        if (c == 0) {
            m0 = mpp, b0 = bpp;
        } else if (fabs(mpp - m0) > 0.1 * m0 || fabs(bpp - b0) > 0.1 * b0) {
            fail_msg("seed %llu n=%u: %.3f msgs / %.1f bytes vs %.3f / %.1f at n=16",
                     (unsigned long long)seed, n, mpp, bpp, m0, b0);
        }
        swimnet_destroy(net);
    }
}

/* Crash half the members, let the rest declare them dead, restart them all
 * at once (fresh process, same id and address, incarnation 0): they refute
 * their death and every view is complete again. */
#define RESTART_BOUND_PERIODS 60u
static void restart_half(void **state)
{
    (void)state;
    uint64_t seed = test_seed(14);
    printf("seed %llu\n", (unsigned long long)seed);
    static const uint32_t sizes[] = {64, 256};
    for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++) {
        uint32_t n = sizes[c];
        swimnet *net = make_net(n, seed + c, 0.0);
        converge(net, 400, seed);
        uint32_t *idx = malloc(n * sizeof *idx);
        for (uint32_t i = 0; i < n; i++)
            idx[i] = i;
        model_rng_shuffle_u32(&net->rng, idx, n);
        for (uint32_t k = 0; k < n / 2; k++)
            swimnet_crash(net, idx[k]);
        converge(net, 200, seed); /* the survivors agree they are dead */
        for (uint32_t k = 0; k < n / 2; k++)
            swimnet_restart(net, idx[k], 0);
        uint32_t p = converge(net, RESTART_BOUND_PERIODS, seed);
        uint32_t stuck = 0;
        for (uint32_t i = 0; i < n; i++)
            for (uint32_t j = 0; j < n; j++)
                stuck += !(swimnet_state(net, i, j) == GOSSIP_MEMBER_ALIVE ||
                           swimnet_state(net, i, j) == GOSSIP_MEMBER_SUSPECT);
        printf("n=%u: restarted %u at once; every view complete after %u periods\n", n, n / 2, p);
        assert_int_equal(stuck, 0);
        free(idx);
        swimnet_destroy(net);
    }
    /* restarted before anyone noticed: same incarnation, nothing to refute */
    swimnet *net = make_net(64, seed + 7, 0.0);
    converge(net, 400, seed);
    for (uint32_t i = 0; i < 64; i += 2)
        swimnet_restart(net, i, 0);
    uint32_t p = converge(net, RESTART_BOUND_PERIODS, seed);
    swimnet_run_until(net, net->now + 30u * PERIOD_US);
    assert_true(swimnet_converged(net));
    uint64_t deaths = 0;
    for (uint32_t i = 0; i < 64; i++)
        deaths += gossip_swim_stats_get(net->agents[i].swim)->deaths;
    printf("n=64: restarted 32 at once without a crash period; views complete after %u "
           "periods, %llu deaths\n",
           p, (unsigned long long)deaths);
    swimnet_destroy(net);
}

/* Partition into two halves long enough for each side to declare the other
 * dead, then heal: views merge again. */
#define HEAL_BOUND_PERIODS 60u
static void partition_heal(void **state)
{
    (void)state;
    uint64_t seed = test_seed(15);
    printf("seed %llu\n", (unsigned long long)seed);
    static const uint32_t sizes[] = {64, 256};
    for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++) {
        uint32_t n = sizes[c];
        swimnet *net = make_net(n, seed + c, 0.0);
        converge(net, 400, seed);
        int *side = calloc(n, sizeof *side);
        for (uint32_t i = 0; i < n; i++)
            side[i] = i % 2;
        swimnet_partition(net, side);
        /* each side sees only itself */
        gossip_time_us t0 = net->now;
        uint32_t split = 0;
        for (uint32_t p = 1; p <= 200 && !split; p++) {
            swimnet_run_until(net, t0 + (gossip_time_us)p * PERIOD_US);
            gossip_view v0, v1;
            gossip_swim_view(net->agents[0].swim, &v0);
            gossip_swim_view(net->agents[1].swim, &v1);
            if (v0.n == n / 2 && v1.n == n / 2)
                split = p;
        }
        assert_true(split > 0);
        swimnet_run_until(net, net->now + 30u * PERIOD_US);
        swimnet_heal(net);
        uint32_t p = converge(net, HEAL_BOUND_PERIODS, seed);
        printf("n=%u: split after %u periods; healed views complete %u periods after heal\n", n,
               split, p);
        free(side);
        swimnet_destroy(net);
    }
    /* a partition that outlives the tombstones (120 periods): each side has
     * forgotten the other, and only the syncs with seed addresses bring the
     * halves together (seeds 0 and 2 are on one side, 1 on the other) */
    const uint32_t n = 64;
    swimnet *net = make_net(n, seed + 9, 0.0);
    converge(net, 400, seed);
    int side[64];
    for (uint32_t i = 0; i < n; i++)
        side[i] = i % 2;
    swimnet_partition(net, side);
    swimnet_run_until(net, net->now + 250u * PERIOD_US);
    uint32_t forgotten = 0;
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t j = 0; j < n; j++)
            forgotten += side[i] != side[j] && swimnet_state(net, i, j) == GOSSIP_MEMBER_NONE;
    assert_true(forgotten > 0);
    swimnet_heal(net);
    uint32_t p = converge(net, 3u * HEAL_BOUND_PERIODS, seed);
    printf("n=%u: partition of 250 periods (%u cross-side entries forgotten); views complete "
           "%u periods after heal\n",
           n, forgotten, p);
    swimnet_destroy(net);
}

/* A graceful leave is seen as LEFT everywhere, and nobody declares a death. */
static void leave_graceful(void **state)
{
    (void)state;
    uint64_t seed = test_seed(16);
    const uint32_t n = 32;
    swimnet *net = make_net(n, seed, 0.0);
    converge(net, 200, seed);
    gossip_view before;
    gossip_swim_view(net->agents[0].swim, &before);
    uint64_t e0 = before.epoch;
    gossip_swim_leave(net->agents[7].swim, net->now);
    swimnet_flush(net, 7);
    swimnet_run_until(net, net->now + 20u * PERIOD_US);
    uint64_t deaths = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (i == 7)
            continue;
        assert_int_equal(swimnet_state(net, i, 7), GOSSIP_MEMBER_LEFT);
        deaths += gossip_swim_stats_get(net->agents[i].swim)->deaths;
        gossip_view v;
        gossip_swim_view(net->agents[i].swim, &v);
        assert_int_equal(v.n, n - 1);
    }
    gossip_view after;
    gossip_swim_view(net->agents[0].swim, &after);
    assert_true(after.epoch > e0);
    assert_int_equal(deaths, 0);
    swimnet_destroy(net);
}

/* The same seed gives the same run. */
static void deterministic(void **state)
{
    (void)state;
    uint64_t seed = test_seed(17);
    uint64_t sent[2], bytes[2];
    for (int r = 0; r < 2; r++) {
        swimnet *net = make_net(48, seed, 0.05);
        swimnet_run_until(net, 50u * PERIOD_US);
        swimnet_crash(net, 20);
        swimnet_run_until(net, 100u * PERIOD_US);
        sent[r] = net->frames_sent;
        bytes[r] = net->bytes_sent;
        swimnet_destroy(net);
    }
    assert_true(sent[0] == sent[1] && bytes[0] == bytes[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(crash_detection), cmocka_unit_test(no_false_positives),
        cmocka_unit_test(traffic_flat),    cmocka_unit_test(restart_half),
        cmocka_unit_test(partition_heal),  cmocka_unit_test(leave_graceful),
        cmocka_unit_test(deterministic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
