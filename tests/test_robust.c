/* gossip/robust: the bounds on peers' values and the robust aggregators,
 * alone and inside the mixer (issue 13, item 6). A member that sends its
 * model scaled by 1e29 or sign-flipped must not drive an honest receiver
 * non-finite or far from where its own training takes it: with
 * mixing.robust = none it does (checked here too, so the test proves it
 * detects the attack), with clip (the default) it does not. */
#include "tests/test_mix_cluster.h"

#include "gossip/robust.h"
#include "gossip/sched.h"

/* Peers' records for the objects a test makes (gossip_robust_init keeps
 * a pointer to them), handed out in turn. */
static gossip_robust_peer *peers_for_test(void)
{
    static gossip_robust_peer pool[8][GOSSIP_ROBUST_PEERS_MAX];
    static unsigned next;
    return pool[next++ % 8];
}

static gossip_robust make_robust(gossip_robust_rule rule, uint32_t dim)
{
    gossip_robust r;
    gossip_robust_config c = {.rule = rule, .clip_factor = 8};
    gossip_robust_init(&r, &c, dim, peers_for_test());
    return r;
}

/* Local deltas of norm `norm` (dim values) fed n times. */
static void feed(gossip_robust *r, uint32_t dim, float norm, unsigned n)
{
    float *a = calloc(dim, sizeof *a), *b = calloc(dim, sizeof *b);
    b[0] = norm;
    for (unsigned k = 0; k < n; k++)
        gossip_robust_note_local(r, b, NULL, a, dim);
    free(a);
    free(b);
}

static void config_and_names(void **state)
{
    (void)state;
    const char *why = NULL;
    gossip_robust_config c = {.rule = GOSSIP_ROBUST_CLIP};
    assert_int_equal(gossip_robust_config_check(&c, &why), 0);
    c.clip_factor = -1;
    assert_int_equal(gossip_robust_config_check(&c, &why), -1);
    assert_non_null(why);
    c.clip_factor = 0;
    c.trim = GOSSIP_ROBUST_TRIM_MAX + 1;
    assert_int_equal(gossip_robust_config_check(&c, &why), -1);
    c.trim = 0;
    c.rule = GOSSIP_ROBUST_RULE_COUNT;
    assert_int_equal(gossip_robust_config_check(&c, &why), -1);
    assert_string_equal(gossip_robust_rule_names[GOSSIP_ROBUST_CLIP], "clip");
    assert_string_equal(gossip_robust_rule_names[GOSSIP_ROBUST_TRIMMED_MEAN], "trimmed-mean");
    assert_null(gossip_robust_rule_names[GOSSIP_ROBUST_RULE_COUNT]);
}

/* No scale before GOSSIP_ROBUST_WARMUP non-zero local deltas; then tau is
 * clip_factor times their median, whatever a single odd delta says. */
static void scale_from_own_deltas(void **state)
{
    (void)state;
    const uint32_t dim = 16;
    gossip_robust r = make_robust(GOSSIP_ROBUST_CLIP, dim);
    assert_true(gossip_robust_bound(&r, dim, 1) == HUGE_VAL);
    feed(&r, dim, 0.0f, 10); /* zero deltas: fixed vectors give no scale */
    assert_true(gossip_robust_bound(&r, dim, 1) == HUGE_VAL);
    feed(&r, dim, 0.5f, GOSSIP_ROBUST_WARMUP);
    assert_float_equal(gossip_robust_bound(&r, dim, 1), 8 * 0.5, 1e-6);
    feed(&r, dim, 1e20f, 1); /* one adopted model, say */
    assert_float_equal(gossip_robust_bound(&r, dim, 1), 8 * 0.5, 1e-6);
    /* a quarter of the values gets half the budget (sqrt(count / dim)),
     * with room for how unevenly an honest difference falls on 4 values */
    assert_float_equal(gossip_robust_bound(&r, dim / 4, 1), 8 * 0.25 * sqrt(1 + 3 * sqrt(0.5)),
                       1e-6);
    gossip_robust none = make_robust(GOSSIP_ROBUST_NONE, dim);
    feed(&none, dim, 0.5f, 8);
    assert_true(gossip_robust_bound(&none, dim, 1) == HUGE_VAL);
}

static void clip_around_bounds_difference(void **state)
{
    (void)state;
    const uint32_t dim = 4;
    gossip_robust r = make_robust(GOSSIP_ROBUST_CLIP, dim); /* factor 8 */
    feed(&r, dim, 0.25f, 5);                                /* tau = 2 */
    float c[4] = {1, 1, 1, 1};
    float v[4] = {1e29f, 1, 1, 1};
    assert_int_equal(gossip_robust_clip_around(&r, 0, v, c, 1.0f, c, dim, 1.0), 1);
    assert_float_equal(v[0], 3.0, 1e-5);
    assert_float_equal(v[1], 1.0, 1e-6);
    float w[4] = {-1, -1, -1, -1}; /* sign-flipped: difference norm 4 */
    assert_int_equal(gossip_robust_clip_around(&r, 0, w, c, 1.0f, c, dim, 1.0), 1);
    for (int i = 0; i < 4; i++)
        assert_float_equal(w[i], 0.0, 1e-6);
    float u[4] = {1.5f, 1, 1, 1}; /* within tau: untouched */
    assert_int_equal(gossip_robust_clip_around(&r, 0, u, c, 1.0f, c, dim, 1.0), 0);
    assert_true(u[0] == 1.5f);
    /* k times the center, k tau: a partial sum of 3 contributions */
    float p[4] = {3 + 100, 3, 3, 3};
    assert_int_equal(gossip_robust_clip_around(&r, 0, p, c, 3.0f, c, dim, 3.0), 1);
    assert_float_equal(p[0], 9.0, 1e-5);
    assert_int_equal((int)r.clipped, 3);
}

/* gossip_robust_half_diff is clip_around(a around b) and then (a - b) / 2,
 * in one pass: the same return values, counters and (to rounding) values,
 * over a vector longer than one block of the sums (with a tail), kept,
 * clipped, and from a quarantined peer. */
static void half_diff_is_clip_then_halve(void **state)
{
    (void)state;
    const uint32_t dim = 2500; /* two 1024-value blocks and a tail */
    model_rng rng;
    model_rng_seed(&rng, 11, 0);
    float *a = malloc(dim * sizeof *a), *b = malloc(dim * sizeof *b);
    float *v = malloc(dim * sizeof *v), *d = malloc(dim * sizeof *d);
    for (uint32_t i = 0; i < dim; i++) {
        b[i] = (float)model_rng_normal(&rng);
        a[i] = b[i] + 0.01f * (float)model_rng_normal(&rng);
    }
    gossip_robust r1 = make_robust(GOSSIP_ROBUST_CLIP, dim),
                  r2 = make_robust(GOSSIP_ROBUST_CLIP, dim);
    feed(&r1, dim, 0.1f, 5); /* tau = 8 x 0.1 = 0.8: ||a - b|| ~ 0.5 is kept */
    feed(&r2, dim, 0.1f, 5);
    for (int round = 0; round < 12; round++) {
        if (round == 2) /* a difference 10x the bound: clipped from here on */
            for (uint32_t i = 0; i < dim; i++)
                a[i] = b[i] + 0.16f * (float)model_rng_normal(&rng);
        memcpy(v, a, dim * sizeof *v);
        int rc1 = gossip_robust_clip_around(&r1, 7, v, b, 1.0f, b, dim, 1.0);
        int rc2 = gossip_robust_half_diff(&r2, 7, d, a, b, dim, 1.0);
        assert_int_equal(rc1, rc2);
        assert_true(round < 2 ? rc2 == 0 : rc2 == 1 || rc2 == 2);
        for (uint32_t i = 0; i < dim; i++) {
            float want = (v[i] - b[i]) * 0.5f;
            if (rc2 == 0)
                assert_true(d[i] == want); /* kept: bit for bit */
            else
                assert_float_equal(d[i], want, 1e-6);
        }
        assert_int_equal(r1.inputs, r2.inputs);
        assert_int_equal(r1.clipped, r2.clipped);
        assert_int_equal(r1.dropped, r2.dropped);
        /* three honest peers send differences within the bound: the vote
         * that quarantines peer 7 then has a majority (robust.h) */
        for (uint64_t peer = 1; peer <= 3; peer++) {
            for (uint32_t i = 0; i < dim; i++)
                v[i] = b[i] + (a[i] - b[i]) * 0.01f;
            memcpy(d, v, dim * sizeof *d);
            assert_int_equal(gossip_robust_clip_around(&r1, peer, v, b, 1.0f, b, dim, 1.0), 0);
            assert_int_equal(gossip_robust_half_diff(&r2, peer, v, d, b, dim, 1.0), 0);
        }
        gossip_robust_note_local(&r1, b, NULL, b, dim); /* the next round */
        gossip_robust_note_local(&r2, b, NULL, b, dim);
    }
    assert_true(r2.dropped > 0);
    free(a);
    free(b);
    free(v);
    free(d);
}

static void trimmed_mean_drops_extremes(void **state)
{
    (void)state;
    float a[2] = {1, 10}, b[2] = {2, 20}, c[2] = {3, 30}, d[2] = {1e29f, -1e29f}, e[2] = {4, 40};
    const float *in[5] = {a, b, c, d, e};
    float out[2];
    gossip_robust_trimmed_mean(in, 5, 1, 2, out); /* drops 1 and 1e29; 10 and -1e29 */
    assert_float_equal(out[0], 3.0, 1e-6);
    assert_float_equal(out[1], 20.0, 1e-5);
    gossip_robust_trimmed_mean(in, 3, 1, 2, out); /* the median of a, b, c */
    assert_float_equal(out[0], 2.0, 1e-6);
    gossip_robust_trimmed_mean(in, 2, 1, 2, out); /* two inputs: their mean */
    assert_float_equal(out[0], 1.5, 1e-6);
    gossip_robust_trimmed_mean(in, 4, 2, 2, out); /* 1 2 3 1e29: middle two */
    assert_float_equal(out[0], 2.5, 1e-6);
}

static void centered_clip_resists_outlier(void **state)
{
    (void)state;
    const uint32_t dim = 3;
    gossip_robust r = make_robust(GOSSIP_ROBUST_CENTERED_CLIP, dim); /* factor 8 */
    feed(&r, dim, 0.125f, 5);                                        /* tau = 1 */
    float x[3] = {1, 1, 1}, y[3] = {1.2f, 1, 1}, z[3] = {0.8f, 1, 1}, bad[3] = {1e29f, 1e29f, 1};
    const float *in[4] = {x, y, z, bad};
    float out[3];
    double scratch[3];
    gossip_robust_centered_clip(&r, in, 4, x, dim, out, scratch);
    for (uint32_t i = 0; i < dim; i++)
        assert_true(fabsf(out[i] - 1.0f) < 3 * 0.25f + 1e-6f); /* 3 steps of at most tau / 4 */
    /* without a scale it is the plain mean */
    gossip_robust r0 = make_robust(GOSSIP_ROBUST_CENTERED_CLIP, dim);
    const float *in3[3] = {x, y, z};
    gossip_robust_centered_clip(&r0, in3, 3, x, dim, out, scratch);
    assert_float_equal(out[0], 1.0, 1e-6);
}

static void adopt_bounds(void **state)
{
    (void)state;
    float ok[3] = {0.5f, -3, 100}, big[3] = {0.5f, 1e29f, 0}, nan_[3] = {0, NAN, 0};
    assert_int_equal(gossip_robust_adopt_ok(ok, 3), 1);
    assert_int_equal(gossip_robust_adopt_ok(big, 3), 0);
    assert_int_equal(gossip_robust_adopt_ok(nan_, 3), 0);
    /* the schedule refuses such a model (state transfer, checkpoint) */
    test_env t;
    test_env_init(&t, 3);
    gossip_sched_config c = {.dim = 3,
                             .interval_steps = 1,
                             .batch = 1,
                             .kind = MODEL_LR_CONSTANT,
                             .base_lr = 0.1f,
                             .unit = GOSSIP_SCHED_UNIT_STEPS};
    gossip_sched *s = NULL;
    assert_int_equal(gossip_sched_create(&s, &t.env, &c), GOSSIP_OK);
    assert_int_equal(gossip_sched_replace(s, big, 0), GOSSIP_ENONFINITE);
    float params[3] = {1, 2, 3};
    assert_int_equal(gossip_sched_before_step(s, params), GOSSIP_SCHED_NONE);
    assert_true(params[1] == 2.0f);
    assert_int_equal(gossip_sched_replace(s, ok, 0), GOSSIP_OK);
    assert_int_equal(gossip_sched_before_step(s, params), GOSSIP_SCHED_REPLACED);
    assert_true(params[2] == 100.0f);
    gossip_sched_destroy(s);
}

/* Quarantine (robust.h): a peer clipped in GOSSIP_ROBUST_QUARANTINE_ROUNDS
 * of its rounds in a row counts for nothing while it stays beyond the
 * bound, and is taken again as soon as it sends a difference within it;
 * the vote keeps a member from cutting off most of its peers. */
static int lie_rounds(gossip_robust *r, const uint64_t *peers, uint32_t npeers, uint32_t nliars,
                      unsigned rounds, int *last)
{
    const uint32_t dim = 4;
    float c[4] = {5, 5, 5, 5};
    int worst = 0;
    for (unsigned k = 0; k < rounds; k++) {
        feed(r, dim, 1.0f, 1); /* one round of ours: tau stays 3 */
        for (uint32_t p = 0; p < npeers; p++) {
            float v[4] = {5.5f, 5, 5, 5}; /* honest: within tau */
            if (p < nliars)
                for (int i = 0; i < 4; i++)
                    v[i] = -c[i]; /* sign-flipped: difference 20 */
            int rc = gossip_robust_clip_around(r, peers[p], v, c, 1.0f, c, dim, 1.0);
            if (p < nliars) {
                *last = rc;
                worst = rc > worst ? rc : worst;
                if (rc == 2)
                    for (int i = 0; i < 4; i++)
                        assert_true(v[i] == c[i]); /* no pull at all */
            } else {
                assert_int_equal(rc, 0);
            }
        }
    }
    return worst;
}

static void quarantine_cuts_persistent_liar(void **state)
{
    (void)state;
    const uint32_t dim = 4;
    const uint64_t peers[4] = {99, 11, 12, 13};              /* the liars first */
    gossip_robust_config cfg = {.rule = GOSSIP_ROBUST_CLIP}; /* the default factor */
    gossip_robust r;
    gossip_robust_init(&r, &cfg, dim, peers_for_test());
    feed(&r, dim, 1.0f, GOSSIP_ROBUST_WARMUP);
    assert_float_equal(gossip_robust_bound(&r, dim, 1), GOSSIP_ROBUST_CLIP_FACTOR_DEFAULT, 1e-6);
    int last = -1;
    /* one liar among three honest peers: clipped K rounds, then ignored */
    assert_int_equal(lie_rounds(&r, peers, 4, 1, GOSSIP_ROBUST_QUARANTINE_ROUNDS, &last), 1);
    assert_false(gossip_robust_quarantined(&r, 99));
    assert_int_equal(lie_rounds(&r, peers, 4, 1, 1, &last), 2);
    assert_true(gossip_robust_quarantined(&r, 99));
    assert_false(gossip_robust_quarantined(&r, 11));
    assert_int_equal(lie_rounds(&r, peers, 4, 1, 20, &last), 2);
    assert_int_equal((int)r.dropped, 21);
    /* an honest round releases it: taken as it is, then clipped again */
    assert_int_equal(lie_rounds(&r, peers, 4, 0, 1, &last), 0);
    assert_int_equal(lie_rounds(&r, peers, 4, 1, 1, &last), 1);
    assert_false(gossip_robust_quarantined(&r, 99));

    /* the vote: never the only peer, nor two of three */
    gossip_robust one, two;
    gossip_robust_init(&one, &cfg, dim, peers_for_test());
    feed(&one, dim, 1.0f, GOSSIP_ROBUST_WARMUP);
    assert_int_equal(lie_rounds(&one, peers, 1, 1, 30, &last), 1);
    assert_int_equal((int)one.dropped, 0);
    gossip_robust_init(&two, &cfg, dim, peers_for_test());
    feed(&two, dim, 1.0f, GOSSIP_ROBUST_WARMUP);
    const uint64_t three[3] = {98, 99, 11};
    assert_int_equal(lie_rounds(&two, three, 3, 2, 30, &last), 1);
    /* ...but one of two: with ourselves, two of three agree */
    gossip_robust ring;
    gossip_robust_init(&ring, &cfg, dim, peers_for_test());
    feed(&ring, dim, 1.0f, GOSSIP_ROBUST_WARMUP);
    assert_int_equal(lie_rounds(&ring, three + 1, 2, 1, 30, &last), 2);
    /* peer 0 (a sum of several senders') is only ever clipped */
    gossip_robust anon;
    gossip_robust_init(&anon, &cfg, dim, peers_for_test());
    feed(&anon, dim, 1.0f, GOSSIP_ROBUST_WARMUP);
    const uint64_t zero[2] = {0, 11};
    assert_int_equal(lie_rounds(&anon, zero, 2, 1, 30, &last), 1);
}

/* The table is bounded: more peers than GOSSIP_ROBUST_PEERS_MAX evict the
 * least recently heard calm ones, never a liar in its streak. */
static void quarantine_table_keeps_liar(void **state)
{
    (void)state;
    const uint32_t dim = 4;
    gossip_robust_config cfg = {.rule = GOSSIP_ROBUST_CLIP};
    gossip_robust r;
    gossip_robust_init(&r, &cfg, dim, peers_for_test());
    feed(&r, dim, 1.0f, GOSSIP_ROBUST_WARMUP);
    float c[4] = {5, 5, 5, 5};
    int dropped = 0;
    for (unsigned k = 0; k < 40; k++) {
        feed(&r, dim, 1.0f, 1);
        float v[4] = {-5, -5, -5, -5};
        dropped += gossip_robust_clip_around(&r, 7, v, c, 1.0f, c, dim, 1.0) == 2;
        for (uint64_t p = 0; p < 8; p++) { /* 320 honest peers in all */
            float h[4] = {5.5f, 5, 5, 5};
            assert_int_equal(
                gossip_robust_clip_around(&r, 1000 + 8 * k + p, h, c, 1.0f, c, dim, 1.0), 0);
        }
    }
    assert_int_equal(dropped, 40 - (int)GOSSIP_ROBUST_QUARANTINE_ROUNDS);
    assert_true(gossip_robust_quarantined(&r, 7));
}

/* ---- in the mixer --------------------------------------------------------- */

typedef enum attack { ATTACK_SCALE, ATTACK_SIGN_FLIP } attack;

/* n members mix for `rounds` rounds; between rounds every honest member
 * "trains": a step toward the optimum t (all 3.0) plus noise, as SGD does.
 * Member `byz` trains the same way but sends attack(x) and keeps its own
 * model (it ignores what it gets back). Returns the largest distance of an
 * honest member's value to t, or HUGE_VAL when one went non-finite. */
/* One round of every member, delivered until each is done (a round that
 * poisoned frames broke, refused as non-finite, ends at its deadline), then
 * every result taken. */
static void cluster_round_until_done(cluster *c)
{
    cluster_start_all(c);
    sim_driver_run_round(c->d);
    int all = 0;
    for (int tries = 0; !all && tries < 100; tries++) {
        all = 1;
        for (uint32_t i = 0; i < c->n; i++)
            all &= gossip_mix_get_state(c->m[i]) == GOSSIP_MIX_DONE;
        if (!all)
            sim_driver_run_round(c->d);
    }
    cluster_take_all(c);
}

/* n mixers of dim values with `algo` on `topo` and robust rule `rule` at
 * clip factor `factor` (0: the default), rounds mode. */
static void robust_cluster(cluster *c, uint32_t n, uint32_t dim, gossip_mix_algo algo,
                           gossip_topology topo, gossip_robust_rule rule, double factor,
                           uint64_t seed)
{
    gossip_mix_config cfg = {
        .algo = algo, .topology = topo, .algos = 1u << algo, .step_timeout_us = 5000};
    cfg.robust.rule = rule;
    cfg.robust.clip_factor = factor;
    cluster_init(c, n, dim, &cfg,
                 &(sim_driver_config){.seed = seed, .mode = SIM_MODE_ROUNDS, .round_us = 1000});
}

/* Every member's values 3 + N(0, 0.1^2). */
static void fill_near_three(cluster *c, model_rng *rng)
{
    for (uint32_t i = 0; i < c->n; i++)
        for (uint32_t j = 0; j < c->dim; j++)
            c->x[i][j] = (float)(3.0 + 0.1 * model_rng_normal(rng));
}

static double run_attack(gossip_mix_algo algo, gossip_topology topo, gossip_robust_rule rule,
                         attack at, uint64_t seed, uint64_t *dropped)
{
    const uint32_t n = 8, dim = 32, byz = 3, rounds = 80;
    cluster c;
    robust_cluster(&c, n, dim, algo, topo, rule, getenv("ROBUST_C") ? atof(getenv("ROBUST_C")) : 0,
                   seed);
    model_rng rng;
    model_rng_seed(&rng, seed, 7);
    fill_near_three(&c, &rng);
    float *own = calloc(dim, sizeof *own);
    for (uint32_t r = 0; r < rounds; r++) {
        for (uint32_t i = 0; i < n; i++)
            for (uint32_t j = 0; j < dim; j++)
                c.x[i][j] += (float)(0.2 * (3.0 - c.x[i][j]) + 0.02 * model_rng_normal(&rng));
        memcpy(own, c.x[byz], dim * sizeof *own);
        for (uint32_t j = 0; j < dim; j++)
            c.x[byz][j] = at == ATTACK_SCALE ? c.x[byz][j] * 1e29f : -c.x[byz][j];
        cluster_round_until_done(&c);
        memcpy(c.x[byz], own, dim * sizeof *own);
    }
    double worst = 0;
    *dropped = 0;
    for (uint32_t i = 0; i < n; i++)
        *dropped += gossip_mix_get_stats(c.m[i])->robust_dropped;
    if (getenv("ROBUST_DEBUG") && rule != GOSSIP_ROBUST_NONE)
        for (uint32_t i = 0; i < n; i++)
            printf("    member %u clipped %llu x0 %.4g\n", i,
                   (unsigned long long)gossip_mix_get_stats(c.m[i])->robust_clipped, c.x[i][0]);
    for (uint32_t i = 0; i < n; i++) {
        if (i == byz)
            continue;
        for (uint32_t j = 0; j < dim; j++) {
            double e = fabs((double)c.x[i][j] - 3.0);
            if (!isfinite(c.x[i][j]))
                e = HUGE_VAL;
            if (e > worst)
                worst = e;
        }
    }
    free(own);
    cluster_free(&c);
    return worst;
}

/* Non-IID members (issue 13 item 6): n members pull toward optima 3 + N(0, 1)
 * of their own, a step 0.2 (b_i - x) plus noise a round, and mix. Returns
 * the consensus distance averaged over the last 40 of 160 rounds, with
 * robust rule `rule` and clip factor `factor` (0: the default). */
static double run_noniid(gossip_mix_algo algo, gossip_topology topo, gossip_robust_rule rule,
                         double factor, uint64_t seed)
{
    const uint32_t n = 8, dim = 32, rounds = 160;
    cluster c;
    robust_cluster(&c, n, dim, algo, topo, rule, factor, seed);
    model_rng rng;
    model_rng_seed(&rng, seed, 9);
    float *b = calloc((size_t)n * dim, sizeof *b);
    for (uint32_t i = 0; i < n * dim; i++)
        b[i] = (float)(3.0 + model_rng_normal(&rng));
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t j = 0; j < dim; j++)
            c.x[i][j] = 3.0f; /* one initial model */
    double sum = 0;
    for (uint32_t r = 0; r < rounds; r++) {
        for (uint32_t i = 0; i < n; i++)
            for (uint32_t j = 0; j < dim; j++)
                c.x[i][j] +=
                    (float)(0.2 * (b[i * dim + j] - c.x[i][j]) + 0.02 * model_rng_normal(&rng));
        cluster_round_until_done(&c);
        if (r >= rounds - 40)
            sum += cluster_distance(&c);
    }
    uint64_t dropped = 0;
    for (uint32_t i = 0; i < n; i++)
        dropped += gossip_mix_get_stats(c.m[i])->robust_dropped;
    if (rule != GOSSIP_ROBUST_NONE && factor == 0 && dropped)
        fail_msg("seed %llu %s: %llu contributions of honest members ignored",
                 (unsigned long long)seed, gossip_mix_algo_name(algo), (unsigned long long)dropped);
    free(b);
    cluster_free(&c);
    return sum / 40;
}

/* Honest members within the bound are not touched at all: the default
 * gives the very vectors no bound gives, bit for bit (allreduce: the fast
 * path for 32-bit chunks within the bound adds the same sums), so the
 * mixing rules keep their exact mean. Members train toward one optimum,
 * 0.2 (3 - x) plus noise a round, from models 0.1 apart. */
static float *run_honest(gossip_mix_algo algo, gossip_topology topo, gossip_robust_rule rule,
                         uint64_t seed, uint64_t *clipped)
{
    const uint32_t n = 8, dim = 64, rounds = 40;
    cluster c;
    robust_cluster(&c, n, dim, algo, topo, rule, 0, seed);
    model_rng rng;
    model_rng_seed(&rng, seed, 11);
    fill_near_three(&c, &rng);
    for (uint32_t r = 0; r < rounds; r++) {
        for (uint32_t i = 0; i < n; i++)
            for (uint32_t j = 0; j < dim; j++)
                c.x[i][j] += (float)(0.2 * (3.0 - c.x[i][j]) + 0.02 * model_rng_normal(&rng));
        assert_int_equal(cluster_round(&c), n);
    }
    float *out = calloc((size_t)n * dim, sizeof *out);
    *clipped = 0;
    for (uint32_t i = 0; i < n; i++) {
        memcpy(out + (size_t)i * dim, c.x[i], dim * sizeof *out);
        *clipped += gossip_mix_get_stats(c.m[i])->robust_clipped;
    }
    cluster_free(&c);
    return out;
}

/* One mixing rule on one topology, for the tests that loop over them. */
typedef struct mix_case {
    gossip_mix_algo algo;
    gossip_topology topo;
} mix_case;

static void honest_rounds_untouched(void **state)
{
    (void)state;
    uint64_t seed = test_seed(71);
    const mix_case cases[] = {
        {GOSSIP_MIX_GOSSIP, GOSSIP_TOPO_RANDOM},
        {GOSSIP_MIX_DPSGD, GOSSIP_TOPO_EXPONENTIAL},
        {GOSSIP_MIX_ALLREDUCE, GOSSIP_TOPO_RING},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        uint64_t c0, c1;
        float *none = run_honest(cases[k].algo, cases[k].topo, GOSSIP_ROBUST_NONE, seed + k, &c0);
        float *def = run_honest(cases[k].algo, cases[k].topo, GOSSIP_ROBUST_CLIP, seed + k, &c1);
        if (c1 || memcmp(none, def, 8 * 64 * sizeof *none))
            fail_msg("seed %llu %s: honest rounds changed by the default bound (%llu clipped)",
                     (unsigned long long)seed + k, gossip_mix_algo_name(cases[k].algo),
                     (unsigned long long)c1);
        free(none);
        free(def);
    }
}

/* The default bound lets members whose data differ agree about as well as
 * no bound does (at factor 1 they stayed apart: the chaos suite's run). */
static void noniid_members_converge(void **state)
{
    (void)state;
    uint64_t seed = test_seed(67);
    const mix_case cases[] = {
        {GOSSIP_MIX_GOSSIP, GOSSIP_TOPO_RANDOM},
        {GOSSIP_MIX_DPSGD, GOSSIP_TOPO_EXPONENTIAL},
        {GOSSIP_MIX_DPSGD, GOSSIP_TOPO_RING},
        {GOSSIP_MIX_ALLREDUCE, GOSSIP_TOPO_RING},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        double none = run_noniid(cases[k].algo, cases[k].topo, GOSSIP_ROBUST_NONE, 0, seed + k);
        double one = run_noniid(cases[k].algo, cases[k].topo, GOSSIP_ROBUST_CLIP, 1, seed + k);
        double def = run_noniid(cases[k].algo, cases[k].topo, GOSSIP_ROBUST_CLIP, 0, seed + k);
        printf("  %s/%s: consensus distance %.3f without a bound, %.3f at factor 1, %.3f with "
               "the default\n",
               gossip_mix_algo_name(cases[k].algo), gossip_topology_name(cases[k].topo), none, one,
               def);
        /* allreduce agrees exactly without a bound: 0.01 of room */
        if (!(def <= 1.25 * none + 0.01))
            fail_msg("seed %llu %s/%s: consensus distance %.3f with the default bound, %.3f "
                     "without",
                     (unsigned long long)seed + k, gossip_mix_algo_name(cases[k].algo),
                     gossip_topology_name(cases[k].topo), def, none);
    }
}

static void poisoned_peer_bounded(void **state)
{
    (void)state;
    uint64_t seed = test_seed(61);
    const struct {
        gossip_mix_algo algo;
        gossip_topology topo;
        gossip_robust_rule rule;
    } cases[] = {
        {GOSSIP_MIX_DPSGD, GOSSIP_TOPO_RING, GOSSIP_ROBUST_CLIP},
        {GOSSIP_MIX_DPSGD, GOSSIP_TOPO_EXPONENTIAL, GOSSIP_ROBUST_CLIP},
        {GOSSIP_MIX_DPSGD, GOSSIP_TOPO_EXPONENTIAL, GOSSIP_ROBUST_TRIMMED_MEAN},
        {GOSSIP_MIX_DPSGD, GOSSIP_TOPO_EXPONENTIAL, GOSSIP_ROBUST_CENTERED_CLIP},
        {GOSSIP_MIX_GOSSIP, GOSSIP_TOPO_RANDOM, GOSSIP_ROBUST_CLIP},
        {GOSSIP_MIX_ALLREDUCE, GOSSIP_TOPO_RING, GOSSIP_ROBUST_CLIP},
    };
    const char *attacks[] = {"scale 1e29", "sign-flip"};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        for (int a = 0; a < 2; a++) {
            const char *name = gossip_mix_algo_name(cases[k].algo);
            const char *rname = gossip_robust_rule_names[cases[k].rule];
            uint64_t dropped0, dropped;
            double undefended = run_attack(cases[k].algo, cases[k].topo, GOSSIP_ROBUST_NONE,
                                           (attack)a, seed + k, &dropped0);
            double defended = run_attack(cases[k].algo, cases[k].topo, cases[k].rule, (attack)a,
                                         seed + k, &dropped);
            printf("  %s/%s %s: worst honest error %.3g undefended, %.3g with %s (%llu "
                   "contributions of the liar ignored)\n",
                   name, gossip_topology_name(cases[k].topo), attacks[a], undefended, defended,
                   rname, (unsigned long long)dropped);
            /* the attack does harm without the defence... */
            if (!(undefended > 1.0))
                fail_msg("seed %llu %s %s: the attack did no harm undefended (%.3g)",
                         (unsigned long long)seed + k, name, attacks[a], undefended);
            /* ...and not with it: honest members stay finite and near their
             * optimum (their noise alone keeps them within ~0.1) */
            /* with clip the liar, clipped round after round, is cut off */
            if (cases[k].rule == GOSSIP_ROBUST_CLIP && !dropped)
                fail_msg("seed %llu %s/%s %s: the liar was never quarantined",
                         (unsigned long long)seed + k, name, gossip_topology_name(cases[k].topo),
                         attacks[a]);
            if (!(defended < 0.6))
                fail_msg("seed %llu %s/%s %s with %s: an honest member is %.3g from its optimum",
                         (unsigned long long)seed + k, name, gossip_topology_name(cases[k].topo),
                         attacks[a], rname, defended);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(config_and_names),
        cmocka_unit_test(scale_from_own_deltas),
        cmocka_unit_test(clip_around_bounds_difference),
        cmocka_unit_test(half_diff_is_clip_then_halve),
        cmocka_unit_test(trimmed_mean_drops_extremes),
        cmocka_unit_test(centered_clip_resists_outlier),
        cmocka_unit_test(adopt_bounds),
        cmocka_unit_test(quarantine_cuts_persistent_liar),
        cmocka_unit_test(quarantine_table_keeps_liar),
        cmocka_unit_test(honest_rounds_untouched),
        cmocka_unit_test(noniid_members_converge),
        cmocka_unit_test(poisoned_peer_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
