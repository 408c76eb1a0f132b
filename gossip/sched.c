/* gossip/sched — see sched.h. */
#include "gossip/sched.h"

#include <assert.h>
#include <math.h>
#include <string.h>

#include "common/simd.h"
#include "gossip/robust.h"
#include "gossip/wire.h"

struct gossip_sched {
    const gossip_env *env;
    gossip_sched_config cfg;
    model_schedule lr; /* lengths in virtual steps (see header) */
    double steps_per_unit;
    gossip_sched_state state;
    int replace_pending; /* in[] holds an adopted model for the next step */
    int drop_result;     /* the outstanding round began before the adoption */
    int result_ok;
    float *adopted;      /* the adopted model (replace) */
    uint64_t since_mix;  /* local steps since the last round was due */
    uint32_t interval;   /* steps between two rounds now (cadence) */
    double want;         /* smoothed round_cost / (cost_share x step_cost) */
    double clock;        /* cluster samples (EPOCHS) or own samples (STEPS) */
    float *sent;         /* the vector handed to the mixer */
    float *in;           /* a copy of the mixer's result (deliver; NULL with an outer step) */
    const float *result; /* the result to apply: in, or the caller's (deliver_ref) */
    /* the outer step (NULL without one): anchor a and momentum u */
    float *anchor, *mom;
    int has_anchor;
    gossip_sched_stats stats;
};

const char *const gossip_sched_scaling_names[GOSSIP_SCHED_SCALE_COUNT + 1] = {"none", "sqrt",
                                                                              "linear", NULL};
const char *const gossip_sched_unit_names[GOSSIP_SCHED_UNIT_CLUSTER_EPOCHS + 2] = {
    "steps", "epochs", "cluster-epochs", NULL};

const char *gossip_sched_scaling_name(gossip_sched_scaling s)
{
    return (unsigned)s < GOSSIP_SCHED_SCALE_COUNT ? gossip_sched_scaling_names[s] : "?";
}

int gossip_sched_scaling_parse(const char *name, gossip_sched_scaling *out)
{
    for (unsigned i = 0; i < GOSSIP_SCHED_SCALE_COUNT; i++)
        if (!strcmp(name, gossip_sched_scaling_names[i])) {
            *out = (gossip_sched_scaling)i;
            return GOSSIP_OK;
        }
    return GOSSIP_EINVAL;
}

const char *gossip_sched_unit_name(gossip_sched_unit u)
{
    return (unsigned)u <= GOSSIP_SCHED_UNIT_CLUSTER_EPOCHS ? gossip_sched_unit_names[u] : "?";
}

int gossip_sched_unit_parse(const char *name, gossip_sched_unit *out)
{
    for (unsigned i = 0; i <= GOSSIP_SCHED_UNIT_CLUSTER_EPOCHS; i++)
        if (!strcmp(name, gossip_sched_unit_names[i])) {
            *out = (gossip_sched_unit)i;
            return GOSSIP_OK;
        }
    return GOSSIP_EINVAL;
}

static int sched_bad(const char **why, const char *reason)
{
    if (why)
        *why = reason;
    return GOSSIP_EINVAL;
}

int gossip_sched_config_check(const gossip_sched_config *c, const char **why)
{
    if (!c->dim)
        return sched_bad(why, "dim is 0");
    if (!c->interval_steps)
        return sched_bad(why, "interval_steps is 0");
    if (!c->batch)
        return sched_bad(why, "batch is 0");
    if (c->kind != MODEL_LR_CONSTANT && c->kind != MODEL_LR_STEP && c->kind != MODEL_LR_COSINE)
        return sched_bad(why, "unknown schedule kind");
    if (!(c->base_lr > 0) || !isfinite(c->base_lr))
        return sched_bad(why, "the learning rate must be a positive number");
    if (!(c->min_lr >= 0) || c->min_lr > c->base_lr)
        return sched_bad(why, "min_lr must be in [0, lr]");
    if (!(c->warmup >= 0) || !isfinite(c->warmup) || !(c->length >= 0) || !isfinite(c->length))
        return sched_bad(why, "warm-up and length must be finite and >= 0");
    if (c->kind == MODEL_LR_COSINE && !(c->length > c->warmup))
        return sched_bad(why, "the cosine length must exceed the warm-up");
    if (c->kind == MODEL_LR_STEP &&
        (!(c->step_every > 0) || !isfinite(c->step_every) || !(c->gamma > 0) || c->gamma > 1))
        return sched_bad(why, "the step schedule needs a period > 0 and 0 < gamma <= 1");
    if (!(c->cost_share >= 0) || !(c->cost_share < 1))
        return sched_bad(why, "cost_share must be in [0, 1)");
    if (c->interval_steps_max && c->interval_steps_max < c->interval_steps)
        return sched_bad(why, "interval_steps_max must be 0 or >= interval_steps");
    if ((unsigned)c->unit > GOSSIP_SCHED_UNIT_CLUSTER_EPOCHS)
        return sched_bad(why, "unknown schedule unit");
    if (c->unit != GOSSIP_SCHED_UNIT_STEPS && !c->dataset_samples)
        return sched_bad(why, "a schedule in epochs needs the data set's sample count");
    if ((unsigned)c->scaling >= GOSSIP_SCHED_SCALE_COUNT)
        return sched_bad(why, "unknown learning-rate scaling");
    if (c->lr_scale_max < 0 || !isfinite(c->lr_scale_max) ||
        (c->lr_scale_max > 0 && c->lr_scale_max < 1))
        return sched_bad(why, "lr_scale_max must be 0 (default) or >= 1");
    if (!(c->outer_momentum >= 0 && c->outer_momentum < 1))
        return sched_bad(why, "outer_momentum must be in [0, 1)");
    return GOSSIP_OK;
}

/* Lengths in the config's unit -> virtual steps (rounded up: a length that
 * is not 0 never becomes 0). */
static uint64_t sched_virtual(const gossip_sched *s, double len)
{
    double v = ceil(len * s->steps_per_unit);
    return v <= 0 ? 0 : v >= 1.8e19 ? UINT64_MAX : (uint64_t)v;
}

int gossip_sched_create(gossip_sched **out, const gossip_env *env, const gossip_sched_config *cfg)
{
    if (gossip_sched_config_check(cfg, NULL))
        return GOSSIP_EINVAL;
    gossip_sched *s = gossip_calloc(env, 1, sizeof *s);
    if (!s)
        return GOSSIP_ENOMEM;
    s->env = env;
    s->cfg = *cfg;
    if (!s->cfg.lr_scale_max)
        s->cfg.lr_scale_max = GOSSIP_SCHED_LR_SCALE_MAX_DEFAULT;
    if (!s->cfg.interval_steps_max || !(s->cfg.cost_share > 0))
        s->cfg.interval_steps_max = s->cfg.interval_steps;
    s->interval = s->cfg.interval_steps;
    s->sent = gossip_alloc(env, (size_t)cfg->dim * sizeof *s->sent);
    s->adopted = gossip_alloc(env, (size_t)cfg->dim * sizeof *s->adopted);
    /* With an outer step the anchor is the result applied, so no copy of
     * the mixer's result is kept (in) */
    if (s->cfg.outer_momentum > 0) {
        s->anchor = gossip_alloc(env, (size_t)cfg->dim * sizeof *s->anchor);
        s->mom = gossip_alloc(env, (size_t)cfg->dim * sizeof *s->mom);
    } else {
        s->in = gossip_alloc(env, (size_t)cfg->dim * sizeof *s->in);
    }
    if (!s->sent || !s->adopted || !(s->in || (s->anchor && s->mom))) {
        gossip_sched_destroy(s);
        return GOSSIP_ENOMEM;
    }
    s->steps_per_unit =
        cfg->unit != GOSSIP_SCHED_UNIT_STEPS ? (double)cfg->dataset_samples / cfg->batch : 1.0;
    s->lr = (model_schedule){.kind = cfg->kind,
                             .base_lr = cfg->base_lr,
                             .min_lr = cfg->min_lr,
                             .gamma = cfg->gamma,
                             .step_every = sched_virtual(s, cfg->step_every),
                             .warmup_steps = sched_virtual(s, cfg->warmup),
                             .total_steps = sched_virtual(s, cfg->length)};
    if (s->lr.kind == MODEL_LR_STEP && !s->lr.step_every)
        s->lr.step_every = 1;
    if (s->lr.kind == MODEL_LR_COSINE && s->lr.total_steps <= s->lr.warmup_steps)
        s->lr.total_steps = s->lr.warmup_steps + 1;
    *out = s;
    return GOSSIP_OK;
}

void gossip_sched_destroy(gossip_sched *s)
{
    if (!s)
        return;
    gossip_free(s->env, s->sent);
    gossip_free(s->env, s->in);
    gossip_free(s->env, s->adopted);
    gossip_free(s->env, s->anchor);
    gossip_free(s->env, s->mom);
    gossip_free(s->env, s);
}

static double sched_scale(const gossip_sched *s, uint32_t n_live)
{
    double n = n_live ? n_live : 1;
    double f = 1;
    if (s->cfg.scaling == GOSSIP_SCHED_SCALE_SQRT)
        f = sqrt(n);
    else if (s->cfg.scaling == GOSSIP_SCHED_SCALE_LINEAR)
        f = n;
    return f < s->cfg.lr_scale_max ? f : s->cfg.lr_scale_max;
}

float gossip_sched_lr(const gossip_sched *s, uint32_t n_live)
{
    double vstep =
        s->cfg.unit != GOSSIP_SCHED_UNIT_STEPS ? s->clock / s->cfg.batch : (double)s->stats.steps;
    uint64_t step = vstep >= 1.8e19 ? UINT64_MAX : (uint64_t)vstep;
    return (float)(model_schedule_lr(&s->lr, step) * sched_scale(s, n_live));
}

gossip_sched_applied gossip_sched_before_step(gossip_sched *s, float *params)
{
    const uint32_t dim = s->cfg.dim;
    if (s->replace_pending) {
        memcpy(params, s->adopted, dim * sizeof *params);
        s->replace_pending = 0;
        s->since_mix = 0;
        return GOSSIP_SCHED_REPLACED;
    }
    if (s->state != GOSSIP_SCHED_RESULT)
        return GOSSIP_SCHED_NONE;
    if (s->result_ok) {
        const float *in = s->result, *sent = s->sent;
        for (uint32_t k = 0; k < dim; k++)
            params[k] += in[k] - sent[k];
    }
    s->state = GOSSIP_SCHED_IDLE;
    s->stats.rounds_applied++;
    return GOSSIP_SCHED_MIXED;
}

int gossip_sched_after_step(gossip_sched *s, const float *params, uint32_t samples, uint32_t n_live)
{
    s->stats.steps++;
    s->stats.samples += samples;
    s->clock +=
        (double)samples * (s->cfg.unit == GOSSIP_SCHED_UNIT_CLUSTER_EPOCHS && n_live ? n_live : 1);
    s->since_mix++;
    if (s->since_mix < s->interval || s->state != GOSSIP_SCHED_IDLE || s->replace_pending)
        return 0;
    memcpy(s->sent, params, (size_t)s->cfg.dim * sizeof *params);
    s->since_mix = 0;
    s->state = GOSSIP_SCHED_OUT;
    return 1;
}

int gossip_sched_cancel(gossip_sched *s)
{
    if (s->state != GOSSIP_SCHED_OUT)
        return GOSSIP_EINVAL;
    s->state = GOSSIP_SCHED_IDLE;
    return GOSSIP_OK;
}

const float *gossip_sched_outgoing(gossip_sched *s)
{
    if (s->state != GOSSIP_SCHED_OUT)
        return NULL;
    s->state = GOSSIP_SCHED_MIXING;
    s->stats.rounds_started++;
    return s->sent;
}

/* 1 when x is a NaN or an infinity (all exponent bits set): a test without
 * a branch, so the loops below vectorise. */
static inline uint32_t nonfinite(float x)
{
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    return (b & 0x7f800000u) == 0x7f800000u;
}

/* 1 when every value of x is finite: one pass without an early exit. */
SIMD_CLONES static int all_finite(const float *restrict x, uint32_t n)
{
    uint32_t bad = 0;
    for (uint32_t k = 0; k < n; k++)
        bad |= nonfinite(x[k]);
    return !bad;
}

/* The outer step's pass (header, "Outer step"): u = beta u + (s - a),
 * a = m + beta u. Element-wise, so every width rounds the same. Returns 1
 * when every new a is finite. */
SIMD_CLONES static int outer_pass(float *restrict a, float *restrict u, const float *restrict m,
                                  const float *restrict sent, uint32_t n, float beta)
{
    uint32_t bad = 0;
    for (uint32_t k = 0; k < n; k++) {
        float v = beta * u[k] + (sent[k] - a[k]);
        u[k] = v;
        a[k] = m[k] + beta * v;
        bad |= nonfinite(a[k]);
    }
    return !bad;
}

/* The outer step (header, "Outer step") on a finite result; the result to
 * apply is the new anchor (it stays unchanged until applied: only deliver
 * and replace touch it, and replace drops the result). 0, or -1 when a
 * value of it is not finite (anchor and momentum then start again from
 * the next result). */
static int sched_outer(gossip_sched *s, const float *mixed)
{
    const uint32_t dim = s->cfg.dim;
    if (!s->has_anchor) {
        memcpy(s->anchor, mixed, dim * sizeof *mixed);
        memset(s->mom, 0, dim * sizeof *s->mom);
        s->has_anchor = 1;
        return 0;
    }
    int finite = outer_pass(s->anchor, s->mom, mixed, s->sent, dim, (float)s->cfg.outer_momentum);
    s->stats.outer_steps++;
    if (!finite) {
        s->has_anchor = 0;
        return -1;
    }
    return 0;
}

static int sched_deliver(gossip_sched *s, const float *mixed, int outcome, int copy)
{
    if (s->state != GOSSIP_SCHED_MIXING)
        return GOSSIP_EINVAL;
    const uint32_t dim = s->cfg.dim;
    if (s->drop_result) { /* began before a model was adopted: worthless */
        s->drop_result = 0;
        s->state = GOSSIP_SCHED_IDLE;
        s->stats.rounds_aborted++;
        s->stats.rounds_applied++;
        return GOSSIP_OK;
    }
    int finite = all_finite(mixed, dim);
    s->state = GOSSIP_SCHED_RESULT;
    if (s->anchor) { /* the outer step: its result is the anchor */
        finite = finite && sched_outer(s, mixed) == 0;
        s->result = s->anchor;
    } else {
        if (finite && copy && mixed != s->in)
            memcpy(s->in, mixed, dim * sizeof *mixed);
        s->result = copy ? s->in : mixed;
    }
    if (outcome != GOSSIP_OK || !finite)
        s->stats.rounds_aborted++;
    s->result_ok = finite;
    return finite ? GOSSIP_OK : GOSSIP_ENONFINITE;
}

int gossip_sched_deliver(gossip_sched *s, const float *mixed, int outcome)
{
    return sched_deliver(s, mixed, outcome, 1);
}

int gossip_sched_deliver_ref(gossip_sched *s, const float *mixed, int outcome)
{
    return sched_deliver(s, mixed, outcome, 0);
}

int gossip_sched_replace(gossip_sched *s, const float *model, uint64_t clock_samples)
{
    const uint32_t dim = s->cfg.dim;
    if (!gossip_robust_adopt_ok(model, dim)) /* bounded, not only finite: gossip/robust.h */
        return GOSSIP_ENONFINITE;
    memcpy(s->adopted, model, dim * sizeof *model);
    s->replace_pending = 1;
    s->has_anchor = 0; /* the outer step starts again from the next result */
    if (s->state == GOSSIP_SCHED_OUT || s->state == GOSSIP_SCHED_RESULT)
        s->state = GOSSIP_SCHED_IDLE;
    /* MIXING stays: the mixer still owns `sent` until deliver, whose result
     * is then dropped. */
    if (s->state == GOSSIP_SCHED_MIXING)
        s->drop_result = 1;
    if (clock_samples && (double)clock_samples > s->clock)
        s->clock = (double)clock_samples;
    s->stats.replaced++;
    assert(s->replace_pending);
    return GOSSIP_OK;
}

/* Weight of a new measurement in the smoothed interval: a window's
 * measurement on a loaded host varies by tens of percent, and half a
 * weight follows a lasting change within a few windows. */
#define SCHED_COST_EWMA 0.5

void gossip_sched_note_cost(gossip_sched *s, double round_cost, double step_cost)
{
    if (!(s->cfg.cost_share > 0) || !isfinite(round_cost) || !(round_cost >= 0) ||
        !isfinite(step_cost) || !(step_cost > 0))
        return;
    double want = round_cost / (s->cfg.cost_share * step_cost);
    s->want = s->want > 0 ? (1 - SCHED_COST_EWMA) * s->want + SCHED_COST_EWMA * want : want;
    double lo = s->cfg.interval_steps, hi = s->cfg.interval_steps_max;
    double h = ceil(s->want);
    s->interval = (uint32_t)(h < lo ? lo : h > hi ? hi : h);
}

uint32_t gossip_sched_interval(const gossip_sched *s)
{
    return s->interval;
}

gossip_sched_state gossip_sched_get_state(const gossip_sched *s)
{
    return s->state;
}

double gossip_sched_clock_samples(const gossip_sched *s)
{
    return s->clock;
}

double gossip_sched_clock_epochs(const gossip_sched *s)
{
    return s->cfg.dataset_samples ? s->clock / (double)s->cfg.dataset_samples : 0;
}

const gossip_sched_stats *gossip_sched_stats_get(const gossip_sched *s)
{
    return &s->stats;
}

void gossip_sched_resume(gossip_sched *s, uint64_t steps, double clock_samples)
{
    s->stats.steps = steps;
    s->clock = clock_samples > 0 ? clock_samples : (double)steps * s->cfg.batch;
}
