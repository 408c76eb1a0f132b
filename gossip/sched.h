/* gossip/sched — the training and mixing schedule of one agent (sans-IO).
 *
 * Purpose: one place for the rule that decides, around an agent's local
 * SGD steps,
 *   - the learning rate of the next step (a schedule counted in samples
 *     the whole cluster has seen, so that no agent needs to know the total
 *     number of steps or the cluster size in advance);
 *   - when a mixing round starts (every `interval` local steps, once
 *     the previous round's result has been applied; the interval is
 *     interval_steps, or, with cost_share > 0, chosen from the measured
 *     cost of a round against the cost of a local step: see "Cadence");
 *   - which vector it mixes (a copy of the parameters right after the step
 *     that made the round due);
 *   - what training does meanwhile (it goes on: communication overlaps
 *     computation);
 *   - how the result is applied (at the start of the next local step,
 *     params += mixed - sent, which keeps the local steps taken while the
 *     round ran; an aborted round hands back `sent` plus any passive
 *     change, so the same formula applies).
 * The agent's training thread and event loop, the embedding API and the
 * simulator all call this object, so the simulator cannot run a schedule
 * the agent does not (docs/ARCHITECTURE.md, "The schedule is part of the
 * core").
 *
 * Life of one round (states):
 *   IDLE --after_step (round due; params copied)--> OUT
 *   OUT  --outgoing (the mixer takes the vector)--> MIXING
 *   MIXING --deliver (mixed vector or the handed-back one)--> RESULT
 *   RESULT --before_step (params += mixed - sent)--> IDLE
 * replace() (a model adopted by state transfer) makes the next before_step
 * overwrite the parameters whatever the state.
 *
 * Learning rate (model/optim.h gives the formulas of each kind):
 *   clock: with unit STEPS, the agent's own local steps; with unit EPOCHS
 *     (the default of the agent), the agent's own samples, so one epoch is
 *     dataset_samples / batch local steps: the agent alone would have
 *     passed once over a data set of the catalog's size; with unit
 *     CLUSTER_EPOCHS, the cluster's samples estimated as the integral of
 *     (samples of each local step) x (live agents at that step), so one
 *     cluster epoch is one pass of the whole cluster over the catalog,
 *     whatever its size (exact for agents of equal speed; a slower agent
 *     lags in the schedule). Lengths are converted to "virtual steps" of
 *     `batch` samples of the clock.
 *     Why EPOCHS is the default (docs/BENCHMARKS.md, "schedule"): with
 *     local SGD every agent takes about the same number of local steps to a
 *     given accuracy whether it trains alone or with 2 or 4 peers (the
 *     averaged model behaves like one with an N-times larger batch, which
 *     needs about as many steps below the critical batch size), so a
 *     schedule counted in each agent's own samples holds for any cluster
 *     size; one counted in the cluster's samples anneals N times sooner
 *     per agent and stops short of the accuracy (measured: 4 agents at 8
 *     cluster epochs plateau 1 point below 2 agents at 8).
 *   scaling with N live agents (N agents averaging every H steps train
 *     like one agent with an N-times larger batch): none (x1), sqrt (x
 *     sqrt(N)) or linear (x N), capped at lr_scale_max; it multiplies
 *     both base_lr and min_lr.
 *
 * Cadence (cost_share > 0): a round costs CPU outside the training thread
 * (the event loop's copies, codec and checks, the transport's sealing
 * and copies) that, on a host whose cores are all busy, comes out of
 * training. The caller measures it (gossip_sched_note_cost: CPU time per
 * round, and the training thread's CPU time per local step, in one unit)
 * and the interval becomes the least number of steps whose training time
 * is at least round_cost / cost_share, i.e. mixing costs at most
 * cost_share of the training time, between interval_steps and
 * interval_steps_max. It depends on neither the cluster size nor the total
 * number of steps: a round of pairwise gossip costs the same at any N,
 * and a model whose step is long against its round (a CNN) keeps
 * interval_steps. Without measurements (the simulator, whose agents are
 * simulated) the interval is interval_steps.
 *
 * Outer step (outer_momentum > 0): a slow momentum on the agent's own
 * progress, in the spirit of SlowMo (Wang et al., ICLR 2020) and of
 * DiLoCo's outer optimizer (Douillard et al., 2023). The schedule keeps an
 * anchor a, where the previous result put the model, and a momentum u. A
 * round that sent s and returned m gives
 *     u = beta u + (s - a);  a = m + beta u
 * and a takes the place of m: params += a - sent. s - a is what this
 * agent's own local steps moved the model since the last result; the
 * mixing's correction m - s gets no momentum, so vectors that only mixing
 * changes (no local step: s = a) mix exactly as without an outer step, and
 * a pairwise exchange's corrections keep the pair's sum. (SlowMo's own
 * form, a momentum on the whole m - a, was measured first: it overshoots
 * the mixing's corrections, docs/BENCHMARKS.md, "What the defaults are",
 * item 7.) In steady progress g per round, u tends to g / (1 - beta): the
 * model moves 1 / (1 - beta) times as far per round. The first result
 * (and the first after a model is adopted) only sets a = m and u = 0. An
 * aborted round hands back s, so m - s is 0 and the step is still taken.
 * The step runs in deliver (the mixing side), so the training thread's
 * before_step costs the same. A result whose outer step is not finite is
 * dropped like a non-finite one, and the anchor and momentum start again
 * from the next result.
 *
 * Invariants: dim > 0; 1 <= interval_steps <= interval <=
 * interval_steps_max; buffers are allocated in
 * create (3 x dim floats, 4 x with an outer step) and nothing allocates
 * afterwards.
 * Thread rules: none inside; the caller serialises every call on one
 * object (the agent holds its hand-off mutex around each call; the copies
 * are dim floats).
 */
#ifndef GOSSIP_SCHED_H
#define GOSSIP_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "gossip/env.h"
#include "model/optim.h"

/* Cap of the learning-rate multiplier of sqrt/linear scaling: 8 = sqrt
 * scaling up to 64 agents, linear up to 8; beyond that a larger rate
 * diverges for the built-in models at batch 64 (docs/BENCHMARKS.md). */
#define GOSSIP_SCHED_LR_SCALE_MAX_DEFAULT 8.0

typedef enum gossip_sched_unit {
    GOSSIP_SCHED_UNIT_STEPS = 0,     /* lengths in local steps of this agent */
    GOSSIP_SCHED_UNIT_EPOCHS,        /* this agent's samples / catalog samples */
    GOSSIP_SCHED_UNIT_CLUSTER_EPOCHS /* the cluster's samples / catalog samples */
} gossip_sched_unit;

typedef enum gossip_sched_scaling {
    GOSSIP_SCHED_SCALE_NONE = 0,
    GOSSIP_SCHED_SCALE_SQRT,
    GOSSIP_SCHED_SCALE_LINEAR,
    GOSSIP_SCHED_SCALE_COUNT
} gossip_sched_scaling;

typedef struct gossip_sched_config {
    uint32_t dim;            /* parameters, >= 1 */
    uint32_t interval_steps; /* local steps between two rounds (the least, with cost_share), >= 1 */
    /* The adaptive cadence (see "Cadence"): the largest share of the
     * training time a round may cost; 0 = a fixed interval_steps. */
    double cost_share;
    uint32_t interval_steps_max; /* its longest interval; 0 = interval_steps */
    uint32_t batch;              /* samples per local step, >= 1 */
    /* learning rate: kind, base_lr, min_lr, gamma as in model_schedule;
     * lengths (warmup, decay, step_every) in `unit` */
    model_lr_kind kind;
    float base_lr, min_lr, gamma;
    double warmup, length, step_every;
    gossip_sched_unit unit;
    uint64_t dataset_samples; /* catalog samples; required (> 0) with the epoch units */
    gossip_sched_scaling scaling;
    double lr_scale_max; /* 0 = GOSSIP_SCHED_LR_SCALE_MAX_DEFAULT */
    /* The outer step's momentum (see "Outer step"): 0 = none; < 1. */
    double outer_momentum;
} gossip_sched_config;

typedef enum gossip_sched_state {
    GOSSIP_SCHED_IDLE = 0,
    GOSSIP_SCHED_OUT,
    GOSSIP_SCHED_MIXING,
    GOSSIP_SCHED_RESULT,
} gossip_sched_state;

/* What before_step did to the parameters. */
typedef enum gossip_sched_applied {
    GOSSIP_SCHED_NONE = 0, /* nothing to apply */
    GOSSIP_SCHED_MIXED,    /* params += mixed - sent */
    GOSSIP_SCHED_REPLACED, /* params = the adopted model (reset momentum) */
} gossip_sched_applied;

typedef struct gossip_sched_stats {
    uint64_t steps;          /* local steps counted by after_step */
    uint64_t samples;        /* samples of those steps */
    uint64_t rounds_started; /* vectors handed to the mixer */
    uint64_t rounds_applied; /* results applied (completed or aborted) */
    uint64_t rounds_aborted; /* of which aborted (deliver with an error) */
    uint64_t replaced;       /* models adopted */
    uint64_t outer_steps;    /* outer steps taken (outer_momentum set) */
} gossip_sched_stats;

typedef struct gossip_sched gossip_sched;

/* The name tables of the two enums, in enum order, NULL-terminated (the
 * agent's config uses them: model.lr_scaling, model.schedule_unit). */
extern const char *const gossip_sched_scaling_names[GOSSIP_SCHED_SCALE_COUNT + 1];
extern const char *const gossip_sched_unit_names[GOSSIP_SCHED_UNIT_CLUSTER_EPOCHS + 2];
/* "none", "sqrt", "linear"; parse returns GOSSIP_OK or GOSSIP_EINVAL. */
const char *gossip_sched_scaling_name(gossip_sched_scaling s);
int gossip_sched_scaling_parse(const char *name, gossip_sched_scaling *out);
/* "steps", "epochs"; parse returns GOSSIP_OK or GOSSIP_EINVAL. */
const char *gossip_sched_unit_name(gossip_sched_unit u);
int gossip_sched_unit_parse(const char *name, gossip_sched_unit *out);

/* Check a config without creating anything. Returns GOSSIP_OK or
 * GOSSIP_EINVAL, with a reason (static string) in *why when why != NULL. */
int gossip_sched_config_check(const gossip_sched_config *cfg, const char **why);

/* Returns GOSSIP_OK, GOSSIP_EINVAL (config_check fails) or GOSSIP_ENOMEM
 * (nothing allocated). */
int gossip_sched_create(gossip_sched **out, const gossip_env *env, const gossip_sched_config *cfg);
void gossip_sched_destroy(gossip_sched *s);

/* ---- training side ---- */

/* Learning rate of the next local step with n_live agents in the view
 * (self included; 0 counts as 1). */
float gossip_sched_lr(const gossip_sched *s, uint32_t n_live);
/* Before a local step: apply a finished round or an adopted model to
 * params[dim]. Returns what was done. */
gossip_sched_applied gossip_sched_before_step(gossip_sched *s, float *params);
/* After a local step of `samples` samples taken with n_live agents in the
 * view: advance the clock; if a round is due (interval_steps steps since
 * the last one and no round outstanding), copy params into the outgoing
 * buffer and return 1 (state OUT), else 0. */
int gossip_sched_after_step(gossip_sched *s, const float *params, uint32_t samples,
                            uint32_t n_live);

/* Take back the round after_step just made due (state OUT -> IDLE), e.g.
 * because the parameters it copied are not finite: nothing is sent; the
 * next round is due interval_steps steps later. Returns GOSSIP_OK or
 * GOSSIP_EINVAL (no round waiting to be sent). */
int gossip_sched_cancel(gossip_sched *s);

/* ---- mixing side ---- */

/* The vector waiting to be mixed (state OUT -> MIXING), or NULL when none.
 * The pointer stays valid and unchanged until deliver. */
const float *gossip_sched_outgoing(gossip_sched *s);
/* The mixer's result for the outstanding round (state MIXING -> RESULT):
 * the mixed vector (outcome GOSSIP_OK), or the vector the mixer handed
 * back (GOSSIP_EABORTED, or any error when no round could run: pass the
 * outgoing vector itself). Returns GOSSIP_OK, GOSSIP_EINVAL (no round
 * outstanding) or GOSSIP_ENONFINITE (mixed holds a NaN or an infinity:
 * the round counts as aborted and params keep their own values). */
int gossip_sched_deliver(gossip_sched *s, const float *mixed, int outcome);
/* As deliver, without copying: the schedule keeps the pointer, and the
 * caller keeps mixed[dim] unchanged until the result is applied
 * (before_step returns MIXED), a model is adopted (replace), or the next
 * deliver, whichever comes first (the agent hands over the buffer it
 * serves to joiners, which only the next round's end rewrites: a copy of
 * the model per round less). Same returns. */
int gossip_sched_deliver_ref(gossip_sched *s, const float *mixed, int outcome);
/* A model adopted from a peer (state transfer) or a checkpoint after
 * training began: the next before_step overwrites params with model[dim];
 * an outstanding round is forgotten (its result is ignored). The cluster
 * clock is set to `clock_samples` (the cluster's samples the adopted model
 * stands for; 0 keeps the local clock). Returns GOSSIP_OK or
 * GOSSIP_ENONFINITE (a value not finite or beyond GOSSIP_ROBUST_ADOPT_VALUE_MAX,
 * gossip/robust.h: nothing changes). */
int gossip_sched_replace(gossip_sched *s, const float *model, uint64_t clock_samples);

/* Measured costs (see "Cadence"): round_cost the CPU time one round took
 * outside the training thread, step_cost the training thread's CPU time
 * per local step, in the same unit (averages over a window of the
 * caller's choice). Sets the interval of the next rounds; without
 * cost_share, or with a value not finite or step_cost <= 0, nothing
 * changes. */
void gossip_sched_note_cost(gossip_sched *s, double round_cost, double step_cost);
/* Local steps between two rounds now. */
uint32_t gossip_sched_interval(const gossip_sched *s);

/* ---- queries ---- */
gossip_sched_state gossip_sched_get_state(const gossip_sched *s);
/* Samples of the clock: the cluster's (the integral above) with unit
 * CLUSTER_EPOCHS, this agent's otherwise. */
double gossip_sched_clock_samples(const gossip_sched *s);
/* Epochs of the clock, clock samples / dataset_samples (0 when
 * dataset_samples is 0). */
double gossip_sched_clock_epochs(const gossip_sched *s);
const gossip_sched_stats *gossip_sched_stats_get(const gossip_sched *s);
/* Set the step counters after a restart from a checkpoint (steps already
 * taken and the cluster samples they stand for). */
void gossip_sched_resume(gossip_sched *s, uint64_t steps, double clock_samples);

#endif
