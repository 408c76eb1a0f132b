/* gossip/sched: when rounds start, what is sent, how results are applied,
 * the cluster clock and the learning rate. */
#include "tests/harness.h"

#include <math.h>
#include <string.h>

#include "gossip/sched.h"
#include "gossip/wire.h"

#define DIM 5u

static gossip_sched_config base_cfg(void)
{
    return (gossip_sched_config){.dim = DIM,
                                 .interval_steps = 3,
                                 .batch = 10,
                                 .kind = MODEL_LR_CONSTANT,
                                 .base_lr = 0.1f,
                                 .unit = GOSSIP_SCHED_UNIT_STEPS};
}

static gossip_sched *make(test_env *t, const gossip_sched_config *c)
{
    gossip_sched *s = NULL;
    assert_int_equal(gossip_sched_create(&s, &t->env, c), GOSSIP_OK);
    return s;
}

/* A round becomes due every interval_steps steps; it carries the
 * parameters of the step that made it due; no second round starts while
 * one is outstanding, and the next one starts right after the result was
 * applied once enough steps have passed. */
static void rounds_start_every_interval(void **state)
{
    (void)state;
    test_env t;
    test_env_init(&t, 1);
    gossip_sched_config c = base_cfg();
    gossip_sched *s = make(&t, &c);
    float p[DIM] = {0};
    int due[12] = {0};
    for (int i = 0; i < 3; i++) {
        p[0] = (float)i + 1;
        due[i] = gossip_sched_after_step(s, p, 10, 1);
    }
    assert_int_equal(due[0] + due[1], 0);
    assert_int_equal(due[2], 1);
    assert_int_equal(gossip_sched_get_state(s), GOSSIP_SCHED_OUT);
    const float *out = gossip_sched_outgoing(s);
    assert_non_null(out);
    assert_true(out[0] == 3.0f);           /* the parameters after step 3 */
    assert_null(gossip_sched_outgoing(s)); /* taken once */
    /* 5 more steps while the round runs: nothing new is due */
    for (int i = 0; i < 5; i++)
        assert_int_equal(gossip_sched_after_step(s, p, 10, 1), 0);
    float mixed[DIM] = {3, 0, 0, 0, 0};
    assert_int_equal(gossip_sched_deliver(s, mixed, GOSSIP_OK), GOSSIP_OK);
    assert_int_equal(gossip_sched_before_step(s, p), GOSSIP_SCHED_MIXED);
    /* 5 steps passed since the last due round: the very next one is due */
    assert_int_equal(gossip_sched_after_step(s, p, 10, 1), 1);
    assert_int_equal(gossip_sched_stats_get(s)->rounds_applied, 1);
    assert_int_equal(gossip_sched_stats_get(s)->steps, 9);
    gossip_sched_destroy(s);
    assert_int_equal(t.alloc.live, 0);
}

/* params += mixed - sent: the local progress made while the round ran is
 * kept, and the mixing correction is the change the round made. */
static void result_keeps_local_progress(void **state)
{
    (void)state;
    test_env t;
    test_env_init(&t, 2);
    gossip_sched_config c = base_cfg();
    c.interval_steps = 1;
    gossip_sched *s = make(&t, &c);
    float p[DIM] = {1, 2, 3, 4, 5};
    assert_int_equal(gossip_sched_after_step(s, p, 10, 2), 1);
    const float *sent = gossip_sched_outgoing(s);
    float mixed[DIM];
    for (unsigned k = 0; k < DIM; k++)
        mixed[k] = sent[k] * 0.5f + 10.0f; /* average with a peer at 20 */
    /* two local steps meanwhile: each adds 1 to every parameter */
    for (unsigned k = 0; k < DIM; k++)
        p[k] += 2;
    assert_int_equal(gossip_sched_deliver(s, mixed, GOSSIP_OK), GOSSIP_OK);
    assert_int_equal(gossip_sched_before_step(s, p), GOSSIP_SCHED_MIXED);
    for (unsigned k = 0; k < DIM; k++) {
        float orig = (float)k + 1;
        assert_float_equal(p[k], orig + 2 + (orig * 0.5f + 10 - orig), 1e-6);
    }
    /* nothing left to apply */
    float before[DIM];
    memcpy(before, p, sizeof p);
    assert_int_equal(gossip_sched_before_step(s, p), GOSSIP_SCHED_NONE);
    assert_memory_equal(before, p, sizeof p);
    gossip_sched_destroy(s);
}

/* An aborted round hands back sent plus passive changes: the same formula
 * adds exactly the passive change. A non-finite result is refused and the
 * parameters keep their own values. */
static void aborted_and_nonfinite_results(void **state)
{
    (void)state;
    test_env t;
    test_env_init(&t, 3);
    gossip_sched_config c = base_cfg();
    c.interval_steps = 1;
    gossip_sched *s = make(&t, &c);
    float p[DIM] = {1, 1, 1, 1, 1};
    assert_int_equal(gossip_sched_after_step(s, p, 10, 2), 1);
    const float *sent = gossip_sched_outgoing(s);
    float back[DIM];
    for (unsigned k = 0; k < DIM; k++)
        back[k] = sent[k] + 0.25f;
    assert_int_equal(gossip_sched_deliver(s, back, GOSSIP_EABORTED), GOSSIP_OK);
    assert_int_equal(gossip_sched_before_step(s, p), GOSSIP_SCHED_MIXED);
    assert_float_equal(p[0], 1.25f, 1e-6);
    assert_int_equal(gossip_sched_stats_get(s)->rounds_aborted, 1);

    assert_int_equal(gossip_sched_after_step(s, p, 10, 2), 1);
    (void)gossip_sched_outgoing(s);
    float bad[DIM] = {1, NAN, 1, 1, 1};
    assert_int_equal(gossip_sched_deliver(s, bad, GOSSIP_OK), GOSSIP_ENONFINITE);
    float before[DIM];
    memcpy(before, p, sizeof p);
    assert_int_equal(gossip_sched_before_step(s, p), GOSSIP_SCHED_MIXED);
    assert_memory_equal(before, p, sizeof p);
    assert_int_equal(gossip_sched_stats_get(s)->rounds_aborted, 2);
    /* a round taken back before it is sent: nothing outstanding */
    assert_int_equal(gossip_sched_after_step(s, p, 10, 2), 1);
    assert_int_equal(gossip_sched_cancel(s), GOSSIP_OK);
    assert_null(gossip_sched_outgoing(s));
    assert_int_equal(gossip_sched_cancel(s), GOSSIP_EINVAL);
    assert_int_equal(gossip_sched_after_step(s, p, 10, 2), 1); /* interval 1: due again */
    (void)gossip_sched_outgoing(s);
    assert_int_equal(gossip_sched_deliver(s, p, GOSSIP_OK), GOSSIP_OK);
    assert_int_equal(gossip_sched_before_step(s, p), GOSSIP_SCHED_MIXED);
    /* deliver without a round outstanding is refused */
    assert_int_equal(gossip_sched_deliver(s, bad, GOSSIP_OK), GOSSIP_EINVAL);
    gossip_sched_destroy(s);
}

/* An adopted model replaces the parameters at the next step; a round that
 * was running then is dropped (its result must not be added on top). */
static void replace_drops_running_round(void **state)
{
    (void)state;
    test_env t;
    test_env_init(&t, 4);
    gossip_sched_config c = base_cfg();
    c.interval_steps = 1;
    gossip_sched *s = make(&t, &c);
    float p[DIM] = {1, 1, 1, 1, 1};
    assert_int_equal(gossip_sched_after_step(s, p, 10, 2), 1);
    (void)gossip_sched_outgoing(s);
    float model[DIM] = {7, 7, 7, 7, 7};
    float nan_model[DIM] = {7, 7, INFINITY, 7, 7};
    assert_int_equal(gossip_sched_replace(s, nan_model, 0), GOSSIP_ENONFINITE);
    assert_int_equal(gossip_sched_replace(s, model, 0), GOSSIP_OK);
    assert_int_equal(gossip_sched_before_step(s, p), GOSSIP_SCHED_REPLACED);
    assert_float_equal(p[2], 7.0f, 0);
    float mixed[DIM] = {100, 100, 100, 100, 100};
    assert_int_equal(gossip_sched_deliver(s, mixed, GOSSIP_OK), GOSSIP_OK);
    assert_int_equal(gossip_sched_before_step(s, p), GOSSIP_SCHED_NONE);
    assert_float_equal(p[2], 7.0f, 0);
    assert_int_equal(gossip_sched_get_state(s), GOSSIP_SCHED_IDLE);
    /* and rounds go on afterwards */
    assert_int_equal(gossip_sched_after_step(s, p, 10, 2), 1);
    gossip_sched_destroy(s);
}

/* The cluster clock integrates samples x live agents; one cluster epoch is
 * dataset_samples whatever the cluster size; a cosine in cluster epochs
 * reaches its floor after `length` epochs for 1, 2 or 4 agents alike. */
static void epochs_clock_and_cosine(void **state)
{
    (void)state;
    test_env t;
    test_env_init(&t, 5);
    gossip_sched_config c = base_cfg();
    c.unit = GOSSIP_SCHED_UNIT_CLUSTER_EPOCHS;
    c.kind = MODEL_LR_COSINE;
    c.base_lr = 0.1f;
    c.min_lr = 0.01f;
    c.warmup = 0.5;
    c.length = 4;
    c.dataset_samples = 1600;
    c.interval_steps = 1000000;
    for (uint32_t n = 1; n <= 4; n *= 2) {
        gossip_sched *s = make(&t, &c);
        float p[DIM] = {0};
        /* warm-up: the rate rises */
        float lr0 = gossip_sched_lr(s, n);
        assert_true(lr0 < 0.1f * 0.2f);
        uint32_t steps_per_epoch = 1600 / (10 * n);
        for (uint32_t i = 0; i < steps_per_epoch / 2; i++)
            (void)gossip_sched_after_step(s, p, 10, n);
        assert_float_equal(gossip_sched_clock_epochs(s), 0.5, 1e-9);
        assert_float_equal(gossip_sched_lr(s, n), 0.1f, 1e-6); /* warm-up done, peak */
        for (uint32_t i = 0; i < steps_per_epoch * 2; i++)
            (void)gossip_sched_after_step(s, p, 10, n);
        /* 2.5 epochs: 2/3.5 of the way through the cosine after warm-up */
        double f = 2.0 / 3.5;
        assert_float_equal(gossip_sched_lr(s, n), 0.01 + 0.09 * (1 + cos(M_PI * f)) / 2, 1e-4);
        for (uint32_t i = 0; i < steps_per_epoch * 2; i++)
            (void)gossip_sched_after_step(s, p, 10, n);
        assert_float_equal(gossip_sched_lr(s, n), 0.01f, 1e-6); /* floor, and it stays */
        gossip_sched_destroy(s);
    }
    /* a join doubles the rate of the clock, it does not make it jump */
    gossip_sched *s = make(&t, &c);
    float p[DIM] = {0};
    for (int i = 0; i < 10; i++)
        (void)gossip_sched_after_step(s, p, 10, 2);
    assert_float_equal(gossip_sched_clock_samples(s), 200, 0);
    (void)gossip_sched_after_step(s, p, 10, 3);
    assert_float_equal(gossip_sched_clock_samples(s), 230, 0);
    gossip_sched_destroy(s);
    assert_int_equal(t.alloc.live, 0);
}

/* Unit epochs counts this agent's own samples: the live agent count does
 * not move the clock, and one epoch is dataset_samples of this agent. */
static void agent_epochs_ignore_cluster_size(void **state)
{
    (void)state;
    test_env t;
    test_env_init(&t, 8);
    gossip_sched_config c = base_cfg();
    c.unit = GOSSIP_SCHED_UNIT_EPOCHS;
    c.kind = MODEL_LR_COSINE;
    c.min_lr = 0.01f;
    c.length = 2;
    c.dataset_samples = 1000;
    c.interval_steps = 1000000;
    gossip_sched *s = make(&t, &c);
    float p[DIM] = {0};
    for (int i = 0; i < 100; i++)
        (void)gossip_sched_after_step(s, p, 10, 1 + (uint32_t)(i % 7)); /* any cluster size */
    assert_float_equal(gossip_sched_clock_samples(s), 1000, 0);
    assert_float_equal(gossip_sched_clock_epochs(s), 1.0, 1e-12);
    assert_float_equal(gossip_sched_lr(s, 1), 0.01 + 0.09 * 0.5, 1e-6); /* half way */
    for (int i = 0; i < 100; i++)
        (void)gossip_sched_after_step(s, p, 10, 5);
    assert_float_equal(gossip_sched_lr(s, 1), 0.01f, 1e-7);
    gossip_sched_destroy(s);
    gossip_sched_unit u;
    assert_int_equal(gossip_sched_unit_parse("cluster-epochs", &u), GOSSIP_OK);
    assert_int_equal(u, GOSSIP_SCHED_UNIT_CLUSTER_EPOCHS);
}

static void lr_scaling_rules(void **state)
{
    (void)state;
    test_env t;
    test_env_init(&t, 6);
    gossip_sched_config c = base_cfg();
    const struct {
        gossip_sched_scaling k;
        uint32_t n;
        double want;
    } cases[] = {{GOSSIP_SCHED_SCALE_NONE, 16, 0.1},    {GOSSIP_SCHED_SCALE_SQRT, 4, 0.2},
                 {GOSSIP_SCHED_SCALE_SQRT, 0, 0.1},     {GOSSIP_SCHED_SCALE_LINEAR, 3, 0.3},
                 {GOSSIP_SCHED_SCALE_LINEAR, 100, 0.8}, {GOSSIP_SCHED_SCALE_SQRT, 1000, 0.8}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        c.scaling = cases[i].k;
        gossip_sched *s = make(&t, &c);
        assert_float_equal(gossip_sched_lr(s, cases[i].n), cases[i].want, 1e-6);
        gossip_sched_destroy(s);
    }
    c.lr_scale_max = 2;
    c.scaling = GOSSIP_SCHED_SCALE_LINEAR;
    gossip_sched *s = make(&t, &c);
    assert_float_equal(gossip_sched_lr(s, 9), 0.2, 1e-6);
    gossip_sched_destroy(s);
    for (int k = 0; k < GOSSIP_SCHED_SCALE_COUNT; k++) {
        gossip_sched_scaling back;
        assert_int_equal(
            gossip_sched_scaling_parse(gossip_sched_scaling_name((gossip_sched_scaling)k), &back),
            GOSSIP_OK);
        assert_int_equal(back, k);
    }
    gossip_sched_unit u;
    assert_int_equal(gossip_sched_unit_parse("epochs", &u), GOSSIP_OK);
    assert_int_equal(u, GOSSIP_SCHED_UNIT_EPOCHS);
    assert_int_equal(gossip_sched_unit_parse("hours", &u), GOSSIP_EINVAL);
}

/* Steps until the next round is due, with no round outstanding. */
static int steps_to_due(gossip_sched *s)
{
    float p[DIM] = {0};
    int k = 1;
    while (!gossip_sched_after_step(s, p, 10, 1))
        k++;
    const float *out = gossip_sched_outgoing(s);
    assert_non_null(out);
    assert_int_equal(gossip_sched_deliver(s, out, GOSSIP_OK), GOSSIP_OK);
    assert_int_equal(gossip_sched_before_step(s, p), GOSSIP_SCHED_MIXED);
    return k;
}

/* The cadence: the interval keeps a round's measured cost under
 * cost_share of the training time between two rounds, smoothed, within
 * [interval_steps, interval_steps_max]; without cost_share, or with bad
 * measurements, it stays put. */
static void cadence_follows_costs(void **state)
{
    (void)state;
    test_env t;
    test_env_init(&t, 8);
    gossip_sched_config c = base_cfg();
    c.cost_share = 0.1;
    c.interval_steps_max = 20;
    gossip_sched *s = make(&t, &c);
    assert_int_equal(gossip_sched_interval(s), 3); /* nothing measured yet */
    assert_int_equal(steps_to_due(s), 3);
    /* a round costs 0.5 step: 5 steps keep it at 10% */
    gossip_sched_note_cost(s, 0.5, 1.0);
    assert_int_equal(gossip_sched_interval(s), 5);
    assert_int_equal(steps_to_due(s), 5);
    /* the same in microseconds of a slower step: the ratio counts */
    gossip_sched_note_cost(s, 1000.0, 2000.0);
    assert_int_equal(gossip_sched_interval(s), 5);
    /* cheaper rounds: half-way there (smoothed), then the floor */
    gossip_sched_note_cost(s, 0.1, 1.0);
    assert_int_equal(gossip_sched_interval(s), 3);
    gossip_sched_note_cost(s, 0.0, 1.0);
    assert_int_equal(gossip_sched_interval(s), 3);
    /* dear rounds: the ceiling */
    for (int i = 0; i < 8; i++)
        gossip_sched_note_cost(s, 100.0, 1.0);
    assert_int_equal(gossip_sched_interval(s), 20);
    assert_int_equal(steps_to_due(s), 20);
    /* measurements that say nothing change nothing */
    gossip_sched_note_cost(s, NAN, 1.0);
    gossip_sched_note_cost(s, 0.1, 0.0);
    gossip_sched_note_cost(s, -1.0, 1.0);
    gossip_sched_note_cost(s, 0.1, INFINITY);
    assert_int_equal(gossip_sched_interval(s), 20);
    gossip_sched_destroy(s);
    /* a fixed interval without cost_share */
    c = base_cfg();
    c.interval_steps_max = 20;
    s = make(&t, &c);
    gossip_sched_note_cost(s, 100.0, 1.0);
    assert_int_equal(gossip_sched_interval(s), 3);
    assert_int_equal(steps_to_due(s), 3);
    gossip_sched_destroy(s);
    /* cost_share without a maximum: the interval cannot grow */
    c = base_cfg();
    c.cost_share = 0.1;
    s = make(&t, &c);
    gossip_sched_note_cost(s, 100.0, 1.0);
    assert_int_equal(gossip_sched_interval(s), 3);
    gossip_sched_destroy(s);
    assert_int_equal(t.alloc.live, 0);
}

/* deliver_ref applies the caller's vector itself (no copy), with the same
 * states and checks as deliver. */
static void deliver_ref_applies_callers_vector(void **state)
{
    (void)state;
    test_env t;
    test_env_init(&t, 9);
    gossip_sched_config c = base_cfg();
    gossip_sched *s = make(&t, &c);
    float p[DIM] = {1, 1, 1, 1, 1};
    for (int i = 0; i < 3; i++)
        gossip_sched_after_step(s, p, 10, 1);
    const float *out = gossip_sched_outgoing(s);
    assert_non_null(out);
    float mixed[DIM] = {2, 2, 2, 2, 2};
    assert_int_equal(gossip_sched_deliver_ref(s, mixed, GOSSIP_OK), GOSSIP_OK);
    mixed[0] = 5; /* still the caller's until applied */
    p[1] = 3;     /* a local step meanwhile */
    assert_int_equal(gossip_sched_before_step(s, p), GOSSIP_SCHED_MIXED);
    assert_true(p[0] == 5.0f && p[1] == 4.0f && p[2] == 2.0f);
    /* a non-finite result is refused as with deliver */
    for (int i = 0; i < 3; i++)
        gossip_sched_after_step(s, p, 10, 1);
    assert_non_null(gossip_sched_outgoing(s));
    mixed[3] = NAN;
    assert_int_equal(gossip_sched_deliver_ref(s, mixed, GOSSIP_OK), GOSSIP_ENONFINITE);
    float before[DIM];
    memcpy(before, p, sizeof p);
    assert_int_equal(gossip_sched_before_step(s, p), GOSSIP_SCHED_MIXED);
    assert_memory_equal(before, p, sizeof p);
    assert_int_equal(gossip_sched_deliver_ref(s, mixed, GOSSIP_OK), GOSSIP_EINVAL);
    gossip_sched_destroy(s);
}

/* One round of a test of the outer step: 3 local steps from p (the last
 * sets p[0] += 1), the round's vector, then deliver `mixed` with
 * `outcome`; returns deliver's code and leaves the result unapplied. */
static int outer_round(gossip_sched *s, float *p, const float *mixed, int outcome, float *sent)
{
    for (int i = 0; i < 3; i++) {
        if (i == 2)
            p[0] += 1;
        gossip_sched_after_step(s, p, 10, 1);
    }
    const float *out = gossip_sched_outgoing(s);
    assert_non_null(out);
    memcpy(sent, out, DIM * sizeof *sent);
    return gossip_sched_deliver(s, mixed ? mixed : out, outcome);
}

/* The outer step (sched.h, "Outer step"): the first result only sets the
 * anchor; each later one sets u = beta u + (sent - anchor) and anchor =
 * result + beta u, and the parameters move by anchor - sent (local steps
 * taken meanwhile kept). Values are multiples of 1/8 so that every float
 * operation below is exact. */
static void outer_step_follows_the_formula(void **state)
{
    (void)state;
    test_env t;
    test_env_init(&t, 11);
    gossip_sched_config c = base_cfg();
    c.outer_momentum = 0.5;
    gossip_sched *s = make(&t, &c);
    float p[DIM] = {1, 1, 1, 1, 1}, sent[DIM];
    /* round 1: the anchor is the result, applied as without an outer step */
    float m1[DIM] = {2, 2, 2, 2, 2};
    assert_int_equal(outer_round(s, p, m1, GOSSIP_OK, sent), GOSSIP_OK);
    p[1] += 1; /* a local step while the round ran */
    assert_int_equal(gossip_sched_before_step(s, p), GOSSIP_SCHED_MIXED);
    float want1[DIM] = {2, 3, 2, 2, 2};
    assert_memory_equal(p, want1, sizeof p);
    assert_int_equal(gossip_sched_stats_get(s)->outer_steps, 0);
    /* round 2: sent {3, 3, 2, 2, 2}, anchor 2: u = {1, 1, 0, 0, 0},
     * anchor = m2 + u / 2 */
    float m2[DIM] = {6, 6, 6, 6, 6};
    assert_int_equal(outer_round(s, p, m2, GOSSIP_OK, sent), GOSSIP_OK);
    p[2] += 1; /* a local step while the round ran: kept */
    assert_int_equal(gossip_sched_before_step(s, p), GOSSIP_SCHED_MIXED);
    float want2[DIM] = {6.5f, 6.5f, 7, 6, 6};
    assert_memory_equal(p, want2, sizeof p);
    assert_int_equal(gossip_sched_stats_get(s)->outer_steps, 1);
    /* round 3, aborted (the sent vector handed back): sent {7.5, 6.5, 7,
     * 6, 6} against the anchor {6.5, 6.5, 6, 6, 6}: u = u / 2 + {1, 0, 1,
     * 0, 0} = {1.5, 0.5, 1, 0, 0}, anchor = sent + u / 2 */
    assert_int_equal(outer_round(s, p, NULL, GOSSIP_EABORTED, sent), GOSSIP_OK);
    assert_int_equal(gossip_sched_before_step(s, p), GOSSIP_SCHED_MIXED);
    float want3[DIM] = {8.25f, 6.75f, 7.5f, 6, 6};
    assert_memory_equal(p, want3, sizeof p);
    assert_int_equal(gossip_sched_stats_get(s)->outer_steps, 2);
    assert_int_equal(gossip_sched_stats_get(s)->rounds_aborted, 1);
    /* an adopted model: the next result only sets the anchor again */
    float model[DIM] = {9, 9, 9, 9, 9};
    assert_int_equal(gossip_sched_replace(s, model, 0), GOSSIP_OK);
    assert_int_equal(gossip_sched_before_step(s, p), GOSSIP_SCHED_REPLACED);
    float m4[DIM] = {8, 8, 8, 8, 8};
    assert_int_equal(outer_round(s, p, m4, GOSSIP_OK, sent), GOSSIP_OK);
    assert_int_equal(gossip_sched_before_step(s, p), GOSSIP_SCHED_MIXED);
    assert_memory_equal(p, m4, sizeof p);
    assert_int_equal(gossip_sched_stats_get(s)->outer_steps, 2);
    /* a step that overflows (a local move of 3e38, then 3e38 + 1.5e38) is
     * refused like a non-finite result: the parameters keep their values,
     * and the next result only sets the anchor */
    p[0] = 3e38f - 1;
    float big[DIM] = {3e38f, 8, 8, 8, 8};
    assert_int_equal(outer_round(s, p, big, GOSSIP_OK, sent), GOSSIP_ENONFINITE);
    float keep[DIM];
    memcpy(keep, p, sizeof p);
    assert_int_equal(gossip_sched_before_step(s, p), GOSSIP_SCHED_MIXED);
    assert_memory_equal(p, keep, sizeof p);
    for (unsigned k = 0; k < DIM; k++)
        p[k] = 8;
    float m6[DIM] = {1, 2, 3, 4, 5};
    assert_int_equal(outer_round(s, p, m6, GOSSIP_OK, sent), GOSSIP_OK);
    assert_int_equal(gossip_sched_before_step(s, p), GOSSIP_SCHED_MIXED);
    assert_memory_equal(p, m6, sizeof p);
    assert_int_equal(gossip_sched_stats_get(s)->outer_steps, 3);
    gossip_sched_destroy(s);
}

/* Vectors that only mixing changes (no local step between rounds) follow
 * the same results with and without an outer step: the momentum is of
 * the agent's own progress only. */
static void outer_step_leaves_pure_mixing_alone(void **state)
{
    (void)state;
    test_env t;
    test_env_init(&t, 13);
    gossip_sched_config c = base_cfg();
    gossip_sched *plain = make(&t, &c);
    c.outer_momentum = 0.9;
    gossip_sched *mom = make(&t, &c);
    float a[DIM] = {1, 2, 3, 4, 5}, b[DIM] = {1, 2, 3, 4, 5};
    for (int r = 0; r < 6; r++) {
        for (int i = 0; i < 3; i++) {
            gossip_sched_after_step(plain, a, 10, 1);
            gossip_sched_after_step(mom, b, 10, 1);
        }
        const float *oa = gossip_sched_outgoing(plain), *ob = gossip_sched_outgoing(mom);
        assert_non_null(oa);
        assert_non_null(ob);
        float m[DIM];
        for (unsigned k = 0; k < DIM; k++) /* a peer's pull towards 2 */
            m[k] = (oa[k] + 2) / 2;
        assert_int_equal(gossip_sched_deliver(plain, m, GOSSIP_OK), GOSSIP_OK);
        assert_int_equal(gossip_sched_deliver(mom, m, GOSSIP_OK), GOSSIP_OK);
        assert_int_equal(gossip_sched_before_step(plain, a), GOSSIP_SCHED_MIXED);
        assert_int_equal(gossip_sched_before_step(mom, b), GOSSIP_SCHED_MIXED);
        assert_memory_equal(a, b, sizeof a);
    }
    assert_int_equal(gossip_sched_stats_get(mom)->outer_steps, 5);
    gossip_sched_destroy(plain);
    gossip_sched_destroy(mom);
}

/* deliver_ref with an outer step: the step's result is the schedule's own
 * copy, so the caller's buffer may change before it is applied. */
static void outer_step_with_deliver_ref(void **state)
{
    (void)state;
    test_env t;
    test_env_init(&t, 12);
    gossip_sched_config c = base_cfg();
    c.outer_momentum = 0.5;
    gossip_sched *s = make(&t, &c);
    float p[DIM] = {1, 1, 1, 1, 1};
    for (int r = 0; r < 2; r++) {
        for (int i = 0; i < 3; i++)
            gossip_sched_after_step(s, p, 10, 1);
        assert_non_null(gossip_sched_outgoing(s));
        float mixed[DIM] = {2, 2, 2, 2, 2};
        assert_int_equal(gossip_sched_deliver_ref(s, mixed, GOSSIP_OK), GOSSIP_OK);
        mixed[0] = 100;
        assert_int_equal(gossip_sched_before_step(s, p), GOSSIP_SCHED_MIXED);
        /* round 1: anchor 2; round 2: d = 0, u = 0: still 2 */
        assert_true(p[0] == 2.0f && p[4] == 2.0f);
    }
    assert_int_equal(gossip_sched_stats_get(s)->outer_steps, 1);
    gossip_sched_destroy(s);
}

static void bad_configs_refused(void **state)
{
    (void)state;
    test_env t;
    test_env_init(&t, 7);
    gossip_sched *s = NULL;
    const char *why = NULL;
    gossip_sched_config c = base_cfg();
    c.interval_steps = 0;
    assert_int_equal(gossip_sched_config_check(&c, &why), GOSSIP_EINVAL);
    assert_non_null(why);
    c = base_cfg();
    c.kind = MODEL_LR_COSINE;
    c.length = 1;
    c.warmup = 2;
    assert_int_equal(gossip_sched_create(&s, &t.env, &c), GOSSIP_EINVAL);
    c = base_cfg();
    c.unit = GOSSIP_SCHED_UNIT_EPOCHS; /* without dataset_samples */
    assert_int_equal(gossip_sched_create(&s, &t.env, &c), GOSSIP_EINVAL);
    c = base_cfg();
    c.min_lr = 1;
    assert_int_equal(gossip_sched_create(&s, &t.env, &c), GOSSIP_EINVAL);
    c = base_cfg();
    c.base_lr = NAN;
    assert_int_equal(gossip_sched_create(&s, &t.env, &c), GOSSIP_EINVAL);
    c = base_cfg();
    c.cost_share = 1.0;
    assert_int_equal(gossip_sched_create(&s, &t.env, &c), GOSSIP_EINVAL);
    c = base_cfg();
    c.cost_share = NAN;
    assert_int_equal(gossip_sched_create(&s, &t.env, &c), GOSSIP_EINVAL);
    c = base_cfg();
    c.interval_steps_max = 2; /* below interval_steps */
    assert_int_equal(gossip_sched_create(&s, &t.env, &c), GOSSIP_EINVAL);
    const double bad_outer[] = {1, -0.5, NAN, 2};
    for (size_t k = 0; k < sizeof bad_outer / sizeof *bad_outer; k++) {
        c = base_cfg();
        c.outer_momentum = bad_outer[k];
        assert_int_equal(gossip_sched_create(&s, &t.env, &c), GOSSIP_EINVAL);
    }
    assert_null(s);
    /* every allocation failure leaves nothing allocated */
    c = base_cfg();
    for (long n = 1; n <= 12; n++) {
        if (n == 7) /* the same with an outer step (two more buffers) */
            c.outer_momentum = 0.5;
        test_env_init(&t, 7);
        t.alloc.fail_at = n;
        int rc = gossip_sched_create(&s, &t.env, &c);
        if (rc == GOSSIP_OK)
            gossip_sched_destroy(s);
        else
            assert_int_equal(rc, GOSSIP_ENOMEM);
        assert_int_equal(t.alloc.live, 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rounds_start_every_interval),
        cmocka_unit_test(result_keeps_local_progress),
        cmocka_unit_test(aborted_and_nonfinite_results),
        cmocka_unit_test(replace_drops_running_round),
        cmocka_unit_test(epochs_clock_and_cosine),
        cmocka_unit_test(agent_epochs_ignore_cluster_size),
        cmocka_unit_test(lr_scaling_rules),
        cmocka_unit_test(cadence_follows_costs),
        cmocka_unit_test(deliver_ref_applies_callers_vector),
        cmocka_unit_test(outer_step_follows_the_formula),
        cmocka_unit_test(outer_step_leaves_pure_mixing_alone),
        cmocka_unit_test(outer_step_with_deliver_ref),
        cmocka_unit_test(bad_configs_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
