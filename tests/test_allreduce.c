/* Ring allreduce: exact mean for N = 2..32 and awkward lengths, identical
 * results on every member, quantized error bound, deadlines and aborts. */
#include "tests/test_mix_cluster.h"

static gossip_mix_config ar_config(uint32_t chunk_values, unsigned bits)
{
    gossip_mix_config cfg = {.algo = GOSSIP_MIX_ALLREDUCE,
                             .topology = GOSSIP_TOPO_RING,
                             .algos = 1u << GOSSIP_MIX_ALLREDUCE,
                             .chunk_values = chunk_values,
                             .bits = bits,
                             .block = 16,
                             .step_timeout_us = 20000};
    return cfg;
}

/* Every live member holds the very same vector, within tol of `mean`. */
static void assert_all_equal_mean(const cluster *c, const double *mean, double tol,
                                  const char *what)
{
    uint32_t first = UINT32_MAX;
    for (uint32_t i = 0; i < c->n; i++) {
        if (!sim_driver_alive(c->d, i))
            continue;
        if (first == UINT32_MAX)
            first = i;
        else if (memcmp(c->x[i], c->x[first], c->dim * sizeof(float)) != 0)
            fail_msg("seed %llu %s n=%u dim=%u: members %u and %u differ",
                     (unsigned long long)c->seed, what, c->n, c->dim, first, i);
        for (uint32_t j = 0; j < c->dim; j++)
            if (fabs(c->x[i][j] - mean[j]) > tol)
                fail_msg("seed %llu %s n=%u dim=%u: member %u value %u = %.9g, mean %.9g "
                         "(tol %.3g)",
                         (unsigned long long)c->seed, what, c->n, c->dim, i, j, c->x[i][j], mean[j],
                         tol);
    }
}

typedef struct waiter {
    cluster *c;
    gossip_time_us *done_at;
} waiter;

/* Stop predicate: records when each live member became DONE; stops when all
 * live members are. */
static int all_done(void *ctx)
{
    waiter *w = ctx;
    int all = 1;
    for (uint32_t i = 0; i < w->c->n; i++) {
        if (!sim_driver_alive(w->c->d, i))
            continue;
        if (gossip_mix_get_state(w->c->m[i]) == GOSSIP_MIX_DONE) {
            if (w->done_at[i] == GOSSIP_TIME_NEVER)
                w->done_at[i] = sim_driver_now(w->c->d);
        } else {
            all = 0;
        }
    }
    return all;
}

static void run_to_done(cluster *c, gossip_time_us horizon, gossip_time_us *done_at)
{
    for (uint32_t i = 0; i < c->n; i++)
        done_at[i] = GOSSIP_TIME_NEVER;
    waiter w = {c, done_at};
    sim_driver_run_until(c->d, horizon, all_done, &w);
    if (!all_done(&w))
        fail_msg("seed %llu n=%u: not every member finished by %llu us (a hang)",
                 (unsigned long long)c->seed, c->n, (unsigned long long)horizon);
}

static void exact_mean_every_size(void **state)
{
    (void)state;
    uint64_t seed0 = test_seed(101);
    for (uint32_t n = 2; n <= 32; n++) {
        model_rng rng;
        model_rng_seed(&rng, seed0 + n, 1);
        const uint32_t dims[] = {1, n - 1 ? n - 1 : 1, n + 1, 97, 1031};
        for (int k = 0; k < 2; k++) {
            uint32_t dim = dims[model_rng_below(&rng, 5)];
            uint32_t cv = 1 + (uint32_t)model_rng_below(&rng, 40);
            int timed = k == 1;
            gossip_mix_config cfg = ar_config(cv, 32);
            sim_driver_config dc = {.seed = seed0 + 100 * n + (uint64_t)k,
                                    .mode = timed ? SIM_MODE_TIMED : SIM_MODE_ROUNDS,
                                    .latency_us = 300};
            cluster c;
            cluster_init(&c, n, dim, &cfg, &dc);
            for (int round = 0; round < 2; round++) {
                cluster_fill(&c, &rng, 5.0 * round);
                double *mean = malloc(dim * sizeof *mean);
                cluster_mean(&c, mean);
                double tol = 2e-7 * (n + 2) * (max_abs(&c) + 1);
                cluster_start_all(&c);
                if (timed) {
                    gossip_time_us done[32];
                    run_to_done(&c, sim_driver_now(c.d) + 10000000, done);
                } else {
                    sim_driver_run_round(c.d);
                }
                if (cluster_take_all(&c) != n)
                    fail_msg("seed %llu n=%u dim=%u cv=%u: a member aborted",
                             (unsigned long long)c.seed, n, dim, cv);
                assert_all_equal_mean(&c, mean, tol, timed ? "timed" : "rounds");
                free(mean);
            }
            cluster_free(&c);
        }
    }
}

/* Members start at different times (within the step timeout): chunks that
 * arrive before a member starts wait in its inbox. */
static void staggered_starts_complete(void **state)
{
    (void)state;
    uint64_t seed0 = test_seed(111);
    for (uint64_t s = 0; s < 20; s++) {
        model_rng rng;
        model_rng_seed(&rng, seed0 + s, 1);
        uint32_t n = 2 + (uint32_t)model_rng_below(&rng, 12);
        uint32_t dim = 1 + (uint32_t)model_rng_below(&rng, 300);
        gossip_mix_config cfg = ar_config(1 + (uint32_t)model_rng_below(&rng, 30), 32);
        sim_driver_config dc = {.seed = seed0 + s, .mode = SIM_MODE_TIMED, .latency_us = 200};
        cluster c;
        cluster_init(&c, n, dim, &cfg, &dc);
        cluster_fill(&c, &rng, 1.0);
        double *mean = malloc(dim * sizeof *mean);
        cluster_mean(&c, mean);
        /* Start in a random order, 0..3 ms apart (timeout 20 ms). */
        uint32_t order[16];
        for (uint32_t i = 0; i < n; i++)
            order[i] = i;
        model_rng_shuffle_u32(&rng, order, n);
        for (uint32_t k = 0; k < n; k++) {
            cluster_start(&c, order[k]);
            sim_driver_run_until(c.d, sim_driver_now(c.d) + model_rng_below(&rng, 3000), NULL,
                                 NULL);
        }
        gossip_time_us done[16];
        run_to_done(&c, sim_driver_now(c.d) + 1000000, done);
        assert_int_equal(cluster_take_all(&c), n);
        assert_all_equal_mean(&c, mean, 2e-7 * (n + 2) * (max_abs(&c) + 1), "staggered");
        free(mean);
        cluster_free(&c);
    }
}

/* Quantized transport: all members still agree bit for bit (the owner keeps
 * what it sends), and the error stays within the bound of docs/MIXING.md:
 * |err| <= (N + 1) M / (2 L), M = max |x|, L = 2^(bits-1) - 1. */
static void quantized_within_bound(void **state)
{
    (void)state;
    uint64_t seed0 = test_seed(121);
    const unsigned bits[] = {16, 8, 4};
    for (size_t b = 0; b < 3; b++) {
        for (uint32_t n = 2; n <= 12; n += 5) {
            uint64_t seed = seed0 + 100 * b + n;
            model_rng rng;
            model_rng_seed(&rng, seed, 1);
            uint32_t dim = 50 + (uint32_t)model_rng_below(&rng, 400);
            gossip_mix_config cfg = ar_config(32, bits[b]);
            cluster c;
            cluster_init(&c, n, dim, &cfg,
                         &(sim_driver_config){.seed = seed, .mode = SIM_MODE_ROUNDS});
            cluster_fill(&c, &rng, 2.0);
            double *mean = malloc(dim * sizeof *mean);
            cluster_mean(&c, mean);
            double M = max_abs(&c), L = (double)((1u << (bits[b] - 1)) - 1);
            double bound = (n + 1) * M / (2 * L) + 2e-7 * (n + 2) * (M + 1);
            assert_int_equal(cluster_round(&c), n);
            assert_all_equal_mean(&c, mean, bound, "quantized");
            free(mean);
            cluster_free(&c);
        }
    }
}

/* A member killed mid-round: every survivor aborts within its deadline
 * (no hang), and the next round, on a view without it, succeeds. */
static void killed_member_aborts_then_recovers(void **state)
{
    (void)state;
    uint64_t seed0 = test_seed(131);
    const gossip_time_us latency = 1000, timeout = 20000;
    for (uint64_t s = 0; s < 12; s++) {
        model_rng rng;
        model_rng_seed(&rng, seed0 + s, 1);
        uint32_t n = 3 + (uint32_t)model_rng_below(&rng, 14);
        uint32_t dim = 500 + (uint32_t)model_rng_below(&rng, 1500);
        gossip_mix_config cfg = ar_config(16, 32);
        cfg.step_timeout_us = timeout;
        cluster c;
        cluster_init(
            &c, n, dim, &cfg,
            &(sim_driver_config){.seed = seed0 + s, .mode = SIM_MODE_TIMED, .latency_us = latency});
        cluster_fill(&c, &rng, 1.0);
        float **start = malloc(n * sizeof *start);
        for (uint32_t i = 0; i < n; i++) {
            start[i] = malloc(dim * sizeof(float));
            memcpy(start[i], c.x[i], dim * sizeof(float));
        }
        uint32_t victim = (uint32_t)model_rng_below(&rng, n);
        gossip_time_us t0 = sim_driver_now(c.d);
        /* The round needs 2(N-1) hops of 1 ms; kill after 1..N-1 of them. */
        gossip_time_us crash = t0 + latency * (1 + model_rng_below(&rng, n - 1)) + latency / 2;
        cluster_start_all(&c);
        sim_driver_crash(c.d, victim, crash);
        sim_driver_run_until(c.d, crash, NULL, NULL);
        for (uint32_t i = 0; i < n; i++)
            assert_int_equal(gossip_mix_get_state(c.m[i]), GOSSIP_MIX_RUNNING); /* mid-round */
        gossip_time_us done[16];
        run_to_done(&c, crash + 10 * timeout, done);
        for (uint32_t i = 0; i < n; i++) {
            if (i == victim)
                continue;
            /* In-flight chunks drain within N - 1 hops; then one timeout; the
             * first abort reaches the others one hop later. */
            gossip_time_us bound = crash + n * latency + timeout;
            if (done[i] > bound)
                fail_msg("seed %llu n=%u victim %u: member %u finished at %llu, bound %llu",
                         (unsigned long long)c.seed, n, victim, i,
                         (unsigned long long)(done[i] - t0), (unsigned long long)(bound - t0));
        }
        /* A survivor whose part of the round was over before the crash (the
         * victim's predecessor near the end) may complete: then it holds the
         * exact mean of all start vectors. Every other survivor aborts and
         * gets its start vector back unchanged. */
        double *full = calloc(dim, sizeof *full);
        for (uint32_t i = 0; i < n; i++) /* every member contributed, the victim too */
            for (uint32_t j = 0; j < dim; j++)
                full[j] += start[i][j] / (double)n;
        cluster_take_all(&c);
        uint32_t aborted = 0;
        for (uint32_t i = 0; i < n; i++) {
            if (i == victim)
                continue;
            if (c.outcome[i] == GOSSIP_EABORTED) {
                aborted++;
                assert_memory_equal(c.x[i], start[i], dim * sizeof(float));
                continue;
            }
            assert_int_equal(c.outcome[i], GOSSIP_OK);
            for (uint32_t j = 0; j < dim; j++)
                if (fabs(c.x[i][j] - full[j]) > 2e-7 * (n + 2) * 8)
                    fail_msg("seed %llu: member %u completed with a wrong value %u",
                             (unsigned long long)c.seed, i, j);
        }
        free(full);
        /* The victim's successor needed the victim's later chunks. */
        assert_int_equal(c.outcome[(victim + 1) % n], GOSSIP_EABORTED);
        assert_true(aborted >= 1);
        /* Next round on the survivors. */
        int *alive = calloc(n, sizeof *alive);
        for (uint32_t i = 0; i < n; i++)
            alive[i] = i != victim;
        cluster_view(&c, alive);
        double *mean = malloc(dim * sizeof *mean);
        cluster_mean(&c, mean);
        cluster_start_all(&c);
        run_to_done(&c, sim_driver_now(c.d) + 10 * timeout, done);
        assert_int_equal(cluster_take_all(&c), n - 1);
        assert_all_equal_mean(&c, mean, 2e-7 * (n + 2) * (max_abs(&c) + 1), "after kill");
        free(mean);
        free(alive);
        for (uint32_t i = 0; i < n; i++)
            free(start[i]);
        free(start);
        cluster_free(&c);
    }
}

/* A member that stalls (never starts the round): the others abort by their
 * deadline and tell it; the next round, with everyone, succeeds. */
static void stalled_member_aborts_round(void **state)
{
    (void)state;
    uint64_t seed0 = test_seed(141);
    for (uint64_t s = 0; s < 10; s++) {
        model_rng rng;
        model_rng_seed(&rng, seed0 + s, 1);
        uint32_t n = 2 + (uint32_t)model_rng_below(&rng, 10), dim = 64;
        gossip_mix_config cfg = ar_config(8, 32);
        cluster c;
        cluster_init(
            &c, n, dim, &cfg,
            &(sim_driver_config){.seed = seed0 + s, .mode = SIM_MODE_TIMED, .latency_us = 500});
        cluster_fill(&c, &rng, 0);
        uint32_t slow = (uint32_t)model_rng_below(&rng, n);
        for (uint32_t i = 0; i < n; i++)
            if (i != slow)
                cluster_start(&c, i);
        gossip_time_us t0 = sim_driver_now(c.d);
        sim_driver_run_until(c.d, t0 + 20000 + 2 * n * 500 + 1, NULL, NULL);
        for (uint32_t i = 0; i < n; i++) {
            if (i == slow) {
                assert_int_equal(gossip_mix_get_state(c.m[i]), GOSSIP_MIX_IDLE);
                continue;
            }
            assert_int_equal(gossip_mix_get_state(c.m[i]), GOSSIP_MIX_DONE);
            int outcome;
            assert_int_equal(gossip_mix_take(c.m[i], c.x[i], &outcome), GOSSIP_OK);
            assert_int_equal(outcome, GOSSIP_EABORTED);
        }
        assert_true(gossip_mix_get_stats(c.m[slow])->aborts_received > 0);
        double mean[64];
        cluster_mean(&c, mean);
        cluster_start_all(&c);
        gossip_time_us done[16];
        run_to_done(&c, sim_driver_now(c.d) + 200000, done);
        assert_int_equal(cluster_take_all(&c), n);
        assert_all_equal_mean(&c, mean, 2e-7 * (n + 2) * (max_abs(&c) + 1), "after stall");
        cluster_free(&c);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(exact_mean_every_size),
        cmocka_unit_test(staggered_starts_complete),
        cmocka_unit_test(quantized_within_bound),
        cmocka_unit_test(killed_member_aborts_then_recovers),
        cmocka_unit_test(stalled_member_aborts_round),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
