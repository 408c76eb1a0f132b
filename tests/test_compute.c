/* sim/compute: fixed stragglers and their factor, the means of the random,
 * Pareto and lognormal models, per-agent determinism, slow-CPU faults. */
#include "tests/harness.h"

#include <math.h>
#include <stdlib.h>

#include "sim/compute.h"

static sim_compute *make(const sim_compute_config *cfg)
{
    sim_compute *c;
    assert_int_equal(sim_compute_create(&c, cfg), SIM_COMPUTE_OK);
    return c;
}

static void fixed_stragglers(void **state)
{
    (void)state;
    uint64_t seed = test_seed(21);
    sim_compute_config cfg = {.agents = 200,
                              .seed = seed,
                              .step_ms = 10,
                              .model = SIM_COMPUTE_FIXED,
                              .stragglers = 0.15,
                              .slowdown = 4};
    sim_compute *c = make(&cfg);
    int k = 0;
    for (uint32_t a = 0; a < 200; a++) {
        uint64_t want = sim_compute_is_straggler(c, a) ? 40000 : 10000;
        k += sim_compute_is_straggler(c, a);
        for (int s = 0; s < 5; s++)
            if (sim_compute_step_us(c, a) != want)
                fail_msg("seed %llu: agent %u step not %llu us", (unsigned long long)seed, a,
                         (unsigned long long)want);
    }
    assert_int_equal(k, 30); /* round(0.15 * 200) */
    /* the same seed picks the same set; another seed another set */
    sim_compute *c2 = make(&cfg);
    cfg.seed = seed + 1;
    sim_compute *c3 = make(&cfg);
    int same = 1, diff = 0;
    for (uint32_t a = 0; a < 200; a++) {
        same &= sim_compute_is_straggler(c, a) == sim_compute_is_straggler(c2, a);
        diff |= sim_compute_is_straggler(c, a) != sim_compute_is_straggler(c3, a);
    }
    assert_true(same);
    assert_true(diff);
    sim_compute_destroy(c);
    sim_compute_destroy(c2);
    sim_compute_destroy(c3);
}

/* mean and standard deviation of step_us / (step_ms * 1000) over n steps */
static void draw_stats(sim_compute *c, uint32_t agents, int n, double *mean, double *sd,
                       double *min)
{
    double s = 0, s2 = 0, mn = INFINITY;
    for (int i = 0; i < n; i++) {
        double x = (double)sim_compute_step_us(c, (uint32_t)i % agents) / 10000.0;
        s += x;
        s2 += x * x;
        if (x < mn)
            mn = x;
    }
    *mean = s / n;
    *sd = sqrt(s2 / n - *mean * *mean);
    *min = mn;
}

static void distribution_means(void **state)
{
    (void)state;
    uint64_t seed = test_seed(22);
    enum { N = 200000 };
    double mean, sd, mn;
    /* RANDOM: mean 1 + p (slowdown - 1) = 1 + 0.1 * 3 = 1.3; sd = 3 sqrt(p(1-p)) = 0.9 */
    sim_compute_config cfg = {.agents = 64,
                              .seed = seed,
                              .step_ms = 10,
                              .model = SIM_COMPUTE_RANDOM,
                              .slow_prob = 0.1,
                              .slowdown = 4};
    sim_compute *c = make(&cfg);
    draw_stats(c, 64, N, &mean, &sd, &mn);
    if (fabs(mean - 1.3) > 6 * 0.9 / sqrt(N))
        fail_msg("seed %llu: random mean %g, expected 1.3", (unsigned long long)seed, mean);
    assert_true(mn == 1.0);
    sim_compute_destroy(c);
    /* PARETO alpha 3: mean 1, sd sqrt(1/3), minimum x_m = 2/3 */
    cfg.model = SIM_COMPUTE_PARETO;
    cfg.pareto_alpha = 3;
    c = make(&cfg);
    draw_stats(c, 64, N, &mean, &sd, &mn);
    if (fabs(mean - 1.0) > 0.01)
        fail_msg("seed %llu: pareto mean %g, expected 1", (unsigned long long)seed, mean);
    assert_true(mn >= 2.0 / 3.0 - 1e-4 && mn < 0.67);
    sim_compute_destroy(c);
    /* LOGNORMAL sigma 0.5: mean 1, sd sqrt(e^0.25 - 1) = 0.533 */
    cfg.model = SIM_COMPUTE_LOGNORMAL;
    cfg.lognormal_sigma = 0.5;
    c = make(&cfg);
    draw_stats(c, 64, N, &mean, &sd, &mn);
    if (fabs(mean - 1.0) > 6 * 0.533 / sqrt(N))
        fail_msg("seed %llu: lognormal mean %g, expected 1", (unsigned long long)seed, mean);
    if (fabs(sd - sqrt(exp(0.25) - 1)) > 0.01)
        fail_msg("seed %llu: lognormal sd %g", (unsigned long long)seed, sd);
    sim_compute_destroy(c);
    /* NONE: exactly step_ms */
    cfg.model = SIM_COMPUTE_NONE;
    c = make(&cfg);
    draw_stats(c, 64, 1000, &mean, &sd, &mn);
    assert_true(mean == 1.0 && sd == 0.0);
    sim_compute_destroy(c);
}

static void speeds_and_slow_cpu(void **state)
{
    (void)state;
    uint64_t seed = test_seed(23);
    enum { A = 4001 };
    sim_compute_config cfg = {.agents = A, .seed = seed, .step_ms = 10, .speed_sigma = 0.4};
    sim_compute *c = make(&cfg);
    int faster = 0;
    for (uint32_t a = 0; a < A; a++) {
        double sp = sim_compute_speed(c, a);
        faster += sp > 1.0;
        uint64_t us = sim_compute_step_us(c, a);
        assert_true(llabs((long long)us - llround(10000.0 / sp)) <= 1);
    }
    /* median speed 1: about half faster; binomial sd 31.6, allow 5 */
    if (abs(faster - A / 2) > 160)
        fail_msg("seed %llu: %d of %d agents faster than 1", (unsigned long long)seed, faster, A);
    sim_compute_destroy(c);
    cfg.speed_sigma = 0;
    c = make(&cfg);
    assert_int_equal(sim_compute_set_slow(c, 7, 2.5), 0);
    assert_int_equal(sim_compute_step_us(c, 7), 25000);
    assert_int_equal(sim_compute_step_us(c, 8), 10000);
    assert_int_equal(sim_compute_set_slow(c, 7, 1), 0);
    assert_int_equal(sim_compute_step_us(c, 7), 10000);
    assert_int_equal(sim_compute_set_slow(c, 7, 0.5), SIM_COMPUTE_EINVAL);
    assert_int_equal(sim_compute_set_slow(c, A, 2), SIM_COMPUTE_EINVAL);
    sim_compute_destroy(c);
}

/* An agent's sequence does not depend on the order agents are asked in. */
static void per_agent_determinism(void **state)
{
    (void)state;
    uint64_t seed = test_seed(24);
    sim_compute_config cfg = {.agents = 10,
                              .seed = seed,
                              .step_ms = 3,
                              .model = SIM_COMPUTE_LOGNORMAL,
                              .lognormal_sigma = 1};
    sim_compute *a = make(&cfg), *b = make(&cfg);
    uint64_t seq[50];
    for (int i = 0; i < 50; i++)
        seq[i] = sim_compute_step_us(a, 3);
    for (int i = 0; i < 50; i++) {
        for (uint32_t other = 0; other < 10; other++)
            if (other != 3)
                (void)sim_compute_step_us(b, other);
        if (sim_compute_step_us(b, 3) != seq[i])
            fail_msg("seed %llu: agent 3 step %d depends on other agents", (unsigned long long)seed,
                     i);
    }
    assert_true(sim_compute_step_us(a, 4) != sim_compute_step_us(a, 5));
    sim_compute_destroy(a);
    sim_compute_destroy(b);
}

static void rejects_bad_config(void **state)
{
    (void)state;
    sim_compute *c;
    sim_compute_config ok = {.agents = 4, .step_ms = 1};
    sim_compute_config bad[] = {
        {.agents = 0, .step_ms = 1},
        {.agents = 4, .step_ms = 0},
        {.agents = 4, .step_ms = 1, .model = SIM_COMPUTE_FIXED, .stragglers = 1.5, .slowdown = 2},
        {.agents = 4, .step_ms = 1, .model = SIM_COMPUTE_FIXED, .stragglers = 0.5, .slowdown = 0.5},
        {.agents = 4, .step_ms = 1, .model = SIM_COMPUTE_RANDOM, .slow_prob = -0.1, .slowdown = 2},
        {.agents = 4, .step_ms = 1, .model = SIM_COMPUTE_PARETO, .pareto_alpha = 1},
        {.agents = 4, .step_ms = 1, .model = SIM_COMPUTE_LOGNORMAL, .lognormal_sigma = -1},
        {.agents = 4, .step_ms = 1, .speed_sigma = -1},
    };
    assert_int_equal(sim_compute_create(&c, &ok), 0);
    sim_compute_destroy(c);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (sim_compute_create(&c, &bad[i]) != SIM_COMPUTE_EINVAL)
            fail_msg("bad config %zu accepted", i);
        assert_null(c);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fixed_stragglers),    cmocka_unit_test(distribution_means),
        cmocka_unit_test(speeds_and_slow_cpu), cmocka_unit_test(per_agent_determinism),
        cmocka_unit_test(rejects_bad_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
