/* gossip/robust — bounds on what peers send, and robust aggregation
 * (issue 13, item 6; docs/MIXING.md "Poisoned updates", docs/SECURITY.md).
 *
 * A member that sends finite but huge or wrong values (a model scaled by
 * 1e29, sign-flipped, bits flipped) decodes fine: the codec only refuses
 * non-finite values and |v| > GOSSIP_MIX_VALUE_MAX. Every defence against
 * such values lives here; the mixing rules call it at one point each, where
 * a peer's decoded values enter the receiver's vector.
 *
 * The scale. A receiver cannot tell a poisoned vector from an honest one by
 * its values, but it knows how far its own training moves its model: the
 * L2 norm of its local delta, x(start of round r+1) - x(result of round r),
 * the steps its trainer took in between. The reference `ref` is the median
 * of the last GOSSIP_ROBUST_HISTORY such norms (a median, so one odd step,
 * an adopted model or a restart, does not move it), and the bound on one
 * peer's contribution is tau = clip_factor * ref. A peer cannot move the
 * reference: it is computed from the receiver's own steps only. Until
 * GOSSIP_ROBUST_WARMUP non-zero local deltas have been seen (the first
 * rounds; a poisoned vector must not get in then either, or the receiver's
 * next steps start from a poisoned model and poison the reference), the
 * bound is relative to the receiver's first vector instead (its anchor, the
 * initial model, which peers share): tau = GOSSIP_ROBUST_NOSCALE_FACTOR *
 * ||anchor|| * sqrt(count / dim). The anchor is fixed: a bound relative to
 * the current vector would let an attacker grow it geometrically where no
 * training gives a scale (a consensus run: the soak's byzantine sender).
 *
 * The rules (gossip_robust_rule):
 *   none           no bound beyond the codec's.
 *   clip           (the default) a peer's difference to the receiver's own
 *                  vector, v - x, is clipped to L2 norm tau before it is
 *                  used. For dpsgd this is one step of centered clipping
 *                  around x; for pairwise gossip both the push and the
 *                  answer are clipped; for allreduce a partial sum of k
 *                  contributions is clipped around k times the receiver's
 *                  own values to sqrt(k) tau, an allgather segment around the
 *                  receiver's own to tau. Chunks of a vector are clipped one
 *                  by one with tau * sqrt(count / dim), so a whole vector's
 *                  difference stays within tau.
 *   trimmed-mean   dpsgd: the coordinate-wise mean of the d + 1 vectors of
 *                  the round (own and in-neighbours') after dropping the
 *                  `trim` largest and `trim` smallest values of each
 *                  coordinate (the median when d + 1 <= 2 trim). Elsewhere
 *                  (a single input: gossip; partial sums: allreduce) it
 *                  falls back to clip.
 *   centered-clip  dpsgd: centered clipping (Karimireddy, He and Jaggi,
 *                  2021): v <- v + 1/(d+1) sum_j clip(x_j - v, tau),
 *                  GOSSIP_ROBUST_CC_ITERS times from v = x. Elsewhere clip.
 *
 * Sans-IO, no allocation: a gossip_robust is a plain struct the mixer
 * embeds; the vector helpers work on caller buffers. */
#ifndef GOSSIP_ROBUST_H
#define GOSSIP_ROBUST_H

#include <stddef.h>
#include <stdint.h>

typedef enum gossip_robust_rule {
    GOSSIP_ROBUST_NONE = 0,
    GOSSIP_ROBUST_CLIP,
    GOSSIP_ROBUST_TRIMMED_MEAN,
    GOSSIP_ROBUST_CENTERED_CLIP,
    GOSSIP_ROBUST_RULE_COUNT
} gossip_robust_rule;

/* The one name table, in enum order, NULL-terminated: "none", "clip",
 * "trimmed-mean", "centered-clip" (agent config and scenarios). */
extern const char *const gossip_robust_rule_names[GOSSIP_ROBUST_RULE_COUNT + 1];

/* Local delta norms kept for the reference (the median of them). 16 rounds:
 * long enough that one odd step is outvoted, short enough to follow a
 * learning-rate schedule within a few dozen rounds. */
#define GOSSIP_ROBUST_HISTORY 16u
/* Non-zero local deltas needed before anything is clipped. */
#define GOSSIP_ROBUST_WARMUP 3u
/* tau = clip_factor * ref. Default 1: dpsgd weighs a neighbour 1/(d + 1)
 * <= 1/2 and a gossip answer is half the difference, so one lying peer
 * moves the receiver by at most half a local delta per round. It must stay
 * well below one: the liar pushes the same way every round while SGD steps
 * wander, and a displaced model takes larger steps, which widen tau, so a
 * large factor lets the attack feed on itself (with steps 0.2 (3 - x),
 * factor 8 left honest members far from their optimum on a ring, factors 1
 * and 2 near it: tests/test_robust.c, ROBUST_C=8). An honest neighbour's
 * difference larger than tau is only slowed down, not lost; experiment 9
 * (docs/experiments.md) measures both sides. */
#define GOSSIP_ROBUST_CLIP_FACTOR_DEFAULT 1.0
#define GOSSIP_ROBUST_CLIP_FACTOR_MAX     1e6
/* Before the scale is known a peer's difference may be as large as our own
 * values: peers start from the same initial model (cluster manifest), so
 * an honest difference in the first rounds is a few steps, far below it,
 * while a scaled or sign-flipped model (difference 2 ||x||) is cut. */
#define GOSSIP_ROBUST_NOSCALE_FACTOR 1.0
/* Values trimmed at each end of a coordinate (trimmed-mean). */
#define GOSSIP_ROBUST_TRIM_DEFAULT 1u
#define GOSSIP_ROBUST_TRIM_MAX     8u
/* Centered-clipping iterations (Karimireddy et al. use 1 to 3). */
#define GOSSIP_ROBUST_CC_ITERS 3u
/* Inputs of one aggregation: own vector and the in-neighbours'. */
#define GOSSIP_ROBUST_INPUTS_MAX 17u

/* A model adopted whole from one peer (state transfer) must have every
 * value within this magnitude. The networks murmur trains keep weights
 * of order 1 (Glorot/He init, weight decay, lr <= 1); 1e4 leaves four
 * orders of margin, and a value beyond it overflows float32 activations
 * after a few layers. */
#define GOSSIP_ROBUST_ADOPT_VALUE_MAX 1e4f

typedef struct gossip_robust_config {
    gossip_robust_rule rule;
    double clip_factor; /* tau = clip_factor * ref; 0 = GOSSIP_ROBUST_CLIP_FACTOR_DEFAULT */
    uint32_t trim;      /* trimmed-mean: values dropped at each end; 0 = default */
} gossip_robust_config;

typedef struct gossip_robust {
    gossip_robust_config cfg;
    float hist[GOSSIP_ROBUST_HISTORY]; /* last local delta norms (non-zero only) */
    uint32_t nhist, next;
    double ref;    /* median of hist; 0 = no scale yet */
    double anchor; /* norm of the first vector seen; 0 = none yet */
    uint32_t dim;
    uint64_t clipped; /* contributions (chunks) clipped */
    uint64_t inputs;  /* contributions (chunks) checked */
    uint64_t trimmed; /* rounds combined by trimmed-mean or centered-clip */
} gossip_robust;

/* Check a config: 0, or -1 with a reason in *why (static text). */
int gossip_robust_config_check(const gossip_robust_config *c, const char **why);
/* Start from no history; dim = the vector length (for per-chunk bounds). */
void gossip_robust_init(gossip_robust *r, const gossip_robust_config *c, uint32_t dim);
/* Record one local delta: the L2 norm of x_now + pending - last_result over
 * dim values (pending may be NULL). Non-finite or zero norms are ignored.
 * last_result NULL (the first round): only the anchor, ||x_now||. */
void gossip_robust_note_local(gossip_robust *r, const float *x_now, const float *pending,
                              const float *last_result, uint32_t dim);
/* The bound tau for `count` values of a dim-value vector, times `mult`;
 * HUGE_VAL when the rule is none or there is no scale yet. */
double gossip_robust_bound(const gossip_robust *r, uint32_t count, double mult);
/* v (count values) := k * c + clip(v - k * c, bound), bound =
 * gossip_robust_bound(r, count, mult), or before the scale is known
 * GOSSIP_ROBUST_NOSCALE_FACTOR * mult * ||anchor|| * sqrt(count / dim), or
 * without an anchor the same with ||own|| (no bound when own is NULL too).
 * c may be NULL (the difference is v itself). Returns 1 if v was changed. */
int gossip_robust_clip_around(gossip_robust *r, float *v, const float *c, float k, const float *own,
                              uint32_t count, double mult);

/* Coordinate-wise trimmed mean of nin vectors in[0..nin) (n values each)
 * into out, dropping `trim` values at each end (fewer when nin <= 2 trim:
 * the median then). nin <= GOSSIP_ROBUST_INPUTS_MAX. */
void gossip_robust_trimmed_mean(const float *const *in, uint32_t nin, uint32_t trim, uint32_t n,
                                float *out);
/* Centered clipping of nin vectors around `center` (n values) into out:
 * GOSSIP_ROBUST_CC_ITERS times v <- v + 1/nin sum clip(in_j - v, tau),
 * tau = gossip_robust_bound(r, n, 1) (no clipping without a scale).
 * scratch: n doubles. */
void gossip_robust_centered_clip(gossip_robust *r, const float *const *in, uint32_t nin,
                                 const float *center, uint32_t n, float *out, double *scratch);

/* A whole model taken from one peer: 1 if every value is finite and within
 * GOSSIP_ROBUST_ADOPT_VALUE_MAX. */
int gossip_robust_adopt_ok(const float *model, size_t n);

#endif
