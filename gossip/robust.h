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
 *                  own values to sqrt(k (k + 1)) tau, an allgather segment
 *                  around the receiver's own to tau / 2. Chunks of a vector
 *                  are clipped one by one with tau * sqrt(count / dim)
 *                  (plus room for how unevenly an honest difference falls
 *                  on a few values), so a whole vector's difference stays
 *                  within about tau. A peer clipped in a round is
 *                  quarantined (GOSSIP_ROBUST_QUARANTINE_ROUNDS): its next
 *                  differences beyond tau are ignored, not clipped, until
 *                  it sends one within tau. The caller names the peer;
 *                  values that mix several peers' (allreduce's partial
 *                  sums) are only clipped.
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
/* tau = clip_factor * ref. Default 3. Honest members whose data differ
 * (non-IID) disagree in steady state by about delta / (1 - rho) (delta a
 * local delta, rho the contraction of one mixing round): two members
 * averaging pairwise sit about two local deltas apart, each training away
 * from the other by one delta per round. A bound below that holds them
 * apart: at factor 1 mixing moved a member by at most half a delta per
 * round while its own training moved it a full one (the chaos suite's
 * simulated run, quadratic members with different optima, stayed at mean
 * consensus distance 6.9; factors 2 to 8 and none gave ~0.9). 3 leaves a
 * margin over 2 and lets a member that fell behind (a partition healed)
 * pull itself back at up to 1.5 deltas per gossip round, faster than its
 * own training moves it away. What a larger factor costs against a liar
 * (who pushes the same way every round, where SGD steps wander) the
 * quarantine below takes back: a liar is clipped every round, an honest
 * peer is not. */
#define GOSSIP_ROBUST_CLIP_FACTOR_DEFAULT 3.0
#define GOSSIP_ROBUST_CLIP_FACTOR_MAX     1e6
/* Before the scale is known a peer's difference may be as large as a
 * quarter of our first vector's norm: peers start from the same initial
 * model (cluster manifest), so an honest difference in the first rounds is
 * a few steps, far below it (the Fashion-MNIST MLP: ||x0|| ~ 11, a round
 * of 8 steps ~ 0.5), while a scaled or sign-flipped model (difference
 * 2 ||x||) is cut to an eighth of its pull. A quarter, not the whole norm
 * (the bound before the quarantine): those first rounds are the ones in
 * which a liar is not yet cut off, and at 1 x ||x0|| two sign-flipping
 * in-neighbours took a third of a dpsgd member's model each round
 * (experiment 9: gap 1.6 points instead of 0.1). */
#define GOSSIP_ROBUST_NOSCALE_FACTOR 0.25
/* Values trimmed at each end of a coordinate (trimmed-mean). */
#define GOSSIP_ROBUST_TRIM_DEFAULT 1u
#define GOSSIP_ROBUST_TRIM_MAX     8u
/* Centered-clipping iterations (Karimireddy et al. use 1 to 3). */
#define GOSSIP_ROBUST_CC_ITERS 3u
/* Inputs of one aggregation: own vector and the in-neighbours'. */
#define GOSSIP_ROBUST_INPUTS_MAX 17u

/* Quarantine (robust.c). A peer half or more of whose values were clipped
 * in GOSSIP_ROBUST_QUARANTINE_ROUNDS of its rounds in a row is quarantined:
 * while its contributions stay beyond the bound they count for nothing
 * (v := the centre: no pull at all), and the first one within the bound is
 * taken as it is, which releases it. One round: an honest peer is beyond
 * 3 local deltas in two rounds in a row only when the whole population
 * moved (then most peers are, see the vote) or when it was cut off and is
 * coming back (then it pulls itself in: its own bound is not a
 * quarantine), while a liar gets one clipped pull per receiver. In gossip
 * a receiver meets a given peer every ~n/2 rounds, so each strike costs
 * many rounds: at 3 (a peer cut off at its fourth clipped round) the 5
 * sign-flipping liars of experiment 9 run with gossip cost 2.2 accuracy
 * points, at 1 0.7, at 0 (anything beyond the bound ignored at once)
 * nothing (one seed: `murmur sim sim/experiments/exp9_byzantine.ini --set
 * mixing.algorithm=gossip --set mixing.topology=random --set
 * faults.byzantine_attack=sign-flip`, final accuracy 0.768, 0.783, 0.790
 * against 0.790 clean without a bound); but at 0 the chaos suite's
 * simulated non-IID members agreed 3 times less well (consensus distance
 * before the faults 3.97 against 1.38 at 1, the command in
 * tests/integration/chaos.sh). The vote: a peer is quarantined
 * only while fewer than half of the recently heard peers, counting
 * ourselves as one that agrees, are clipped too; when most are, we are the
 * odd one out (a partition healed, a restart) and bounding, not cutting,
 * is right. So a member with one peer never quarantines it, and one with
 * two quarantines at most one. */
#define GOSSIP_ROBUST_QUARANTINE_ROUNDS 1u
/* Peers remembered. Enough for dpsgd's in-neighbours (<= 16), an
 * allreduce ring up to 64 and the recent partners of random gossip; when
 * full the least recently heard peer not in a clipped streak makes room
 * (so a quarantined liar is the last one forgotten). */
#define GOSSIP_ROBUST_PEERS_MAX 64u
/* A peer votes while heard within this many of our rounds (twice the
 * history of local deltas). */
#define GOSSIP_ROBUST_RECENT_ROUNDS 32u

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

/* One peer's record (robust.c): values clipped and seen in its current
 * round (our round counter), and its finished rounds clipped in a row. */
typedef struct gossip_robust_peer {
    uint64_t id;    /* 0: free */
    uint64_t round; /* our round its counts belong to */
    uint64_t clipped, seen;
    uint32_t streak; /* its rounds, in a row, most of whose values were clipped */
} gossip_robust_peer;

typedef struct gossip_robust {
    /* What every contribution reads first (the rule, the counters), then
     * the scale, then the history and the peers' records. */
    gossip_robust_config cfg;
    uint64_t clipped; /* contributions (chunks) clipped */
    uint64_t dropped; /* contributions (chunks) of quarantined peers ignored */
    uint64_t inputs;  /* contributions (chunks) checked */
    uint64_t trimmed; /* rounds combined by trimmed-mean or centered-clip */
    uint64_t round;   /* our rounds (gossip_robust_note_local calls) */
    double ref;       /* median of hist; 0 = no scale yet */
    double anchor;    /* norm of the first vector seen; 0 = none yet */
    uint32_t dim;
    uint32_t nhist, next;
    float hist[GOSSIP_ROBUST_HISTORY]; /* last local delta norms (non-zero only) */
    /* GOSSIP_ROBUST_PEERS_MAX records in the owner's memory, or NULL with
     * the rule none, which never reads them (2.5 KB a mixer: 2.5 GB over
     * a million simulated ones) */
    gossip_robust_peer *peer;
} gossip_robust;

/* Check a config: 0, or -1 with a reason in *why (static text). */
int gossip_robust_config_check(const gossip_robust_config *c, const char **why);
/* Start from no history; dim = the vector length (for per-chunk bounds).
 * peers: GOSSIP_ROBUST_PEERS_MAX records, zeroed here and used until r is
 * dropped; required unless the rule is none (NULL: no quarantine). */
void gossip_robust_init(gossip_robust *r, const gossip_robust_config *c, uint32_t dim,
                        gossip_robust_peer *peers);
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
 * c may be NULL (the difference is v itself). `peer` is the sender the
 * values come from (its node id), 0 when they cannot be laid at one
 * sender's door: with a peer, a difference beyond the bound from a
 * quarantined peer (GOSSIP_ROBUST_QUARANTINE_ROUNDS) sets v := k * c
 * instead. Returns 0 (v untouched), 1 (clipped) or 2 (ignored). */
int gossip_robust_clip_around(gossip_robust *r, uint64_t peer, float *v, const float *c, float k,
                              const float *own, uint32_t count, double mult);
/* d := (a - b) / 2 (count values), clipped as gossip_robust_clip_around(r,
 * peer, a, b, 1, b, count, mult) followed by the halving would leave it,
 * in one pass over a and b instead of two (pairwise gossip's answer,
 * gossip/mix_gossip.c): the same norm, bound, counters and quarantine;
 * a clipped d is the unclipped one times bound / norm (0 when ignored).
 * Returns 0, 1 or 2 as gossip_robust_clip_around. */
int gossip_robust_half_diff(gossip_robust *r, uint64_t peer, float *d, const float *a,
                            const float *b, uint32_t count, double mult);
/* The bound gossip_robust_clip_around applies to `count` values (HUGE_VAL:
 * none), for a caller that measures the difference itself (allreduce's
 * fast path)... */
double gossip_robust_limit(const gossip_robust *r, uint32_t count, double mult, const float *own);
/* ...and then records a contribution found within it, as
 * gossip_robust_clip_around would have. */
void gossip_robust_accepted(gossip_robust *r, uint64_t peer, uint32_t count);
/* v := k * c (0 when c is NULL), counted as ignored: values that hold a
 * quarantined peer's mixed with others' (allreduce's partial sums). */
void gossip_robust_ignore(gossip_robust *r, float *v, const float *c, float k, uint32_t count);
/* 1 if `peer` is quarantined now. */
int gossip_robust_quarantined(const gossip_robust *r, uint64_t peer);

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
