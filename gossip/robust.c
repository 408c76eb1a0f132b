/* gossip/robust — bounds on received values and robust aggregation. See
 * robust.h for the rules and the scale they use. */
#include "gossip/robust.h"

#include <assert.h>
#include <math.h>
#include <string.h>

#include "common/simd.h"

const char *const gossip_robust_rule_names[GOSSIP_ROBUST_RULE_COUNT + 1] = {
    "none", "clip", "trimmed-mean", "centered-clip", NULL};

_Static_assert(GOSSIP_ROBUST_WARMUP <= GOSSIP_ROBUST_HISTORY, "warm-up fits the history");
_Static_assert(2 * GOSSIP_ROBUST_TRIM_MAX < GOSSIP_ROBUST_INPUTS_MAX, "a trim leaves a value");

int gossip_robust_config_check(const gossip_robust_config *c, const char **why)
{
    const char *w = NULL;
    if ((unsigned)c->rule >= GOSSIP_ROBUST_RULE_COUNT)
        w = "unknown robust rule";
    else if (!(c->clip_factor >= 0) || c->clip_factor > GOSSIP_ROBUST_CLIP_FACTOR_MAX)
        w = "the clip factor must be in [0, 1e6] (0 = default)";
    else if (c->trim > GOSSIP_ROBUST_TRIM_MAX)
        w = "the trim must be at most 8 values per end";
    if (why)
        *why = w;
    return w ? -1 : 0;
}

void gossip_robust_init(gossip_robust *r, const gossip_robust_config *c, uint32_t dim,
                        gossip_robust_peer *peers)
{
    memset(r, 0, sizeof *r);
    if (c)
        r->cfg = *c;
    assert(peers || r->cfg.rule == GOSSIP_ROBUST_NONE);
    if (peers)
        memset(peers, 0, GOSSIP_ROBUST_PEERS_MAX * sizeof *peers);
    r->peer = peers;
    if (!(r->cfg.clip_factor > 0))
        r->cfg.clip_factor = GOSSIP_ROBUST_CLIP_FACTOR_DEFAULT;
    if (!r->cfg.trim)
        r->cfg.trim = GOSSIP_ROBUST_TRIM_DEFAULT;
    r->dim = dim;
}

/* ---- sums of squares ------------------------------------------------------ */

/* The bounds measure the norm of a whole vector (or chunk) on every round
 * and every received chunk: one of the event loop's largest costs (perf of
 * an agent, docs/BENCHMARKS.md). A double accumulator summed value by value
 * cannot be vectorized (the compiler must keep the order of the adds), so
 * the sums run in SQ_LANES float lanes over blocks of SQ_BLOCK values,
 * each block's lanes added into a double: a fixed order, the same result
 * whatever the vector width (common/simd.h). A block's float sum of squares overflows only for
 * values near 1e19 and above: such a sum is done again in double, the
 * exact rule of before for inputs up to GOSSIP_MIX_VALUE_MAX. */
#define SQ_LANES 16u
#define SQ_BLOCK 1024u

/* sum over i of (a[i] - k b[i] + c[i])^2 in double, b and c optional. */
static double sq_sum_slow(const float *a, const float *b, float k, const float *c, uint32_t n)
{
    double ss = 0;
    for (uint32_t i = 0; i < n; i++) {
        double d = (double)a[i] - (b ? (double)k * b[i] : 0.0) + (c ? (double)c[i] : 0.0);
        ss += d * d;
    }
    return ss;
}

SIMD_CLONES static float sq_block(const float *restrict a, const float *restrict b, float k,
                                  const float *restrict c, uint32_t n)
{
    float acc[SQ_LANES] = {0};
    size_t i = 0; /* size_t: the lanes' loads are then contiguous (no wrap) */
    assert(b || !c);
    if (b && c) {
        for (; i + SQ_LANES <= n; i += SQ_LANES)
            for (size_t j = 0; j < SQ_LANES; j++) {
                float d = a[i + j] - k * b[i + j] + c[i + j];
                acc[j] += d * d;
            }
    } else if (b) {
        for (; i + SQ_LANES <= n; i += SQ_LANES)
            for (size_t j = 0; j < SQ_LANES; j++) {
                float d = a[i + j] - k * b[i + j];
                acc[j] += d * d;
            }
    } else {
        for (; i + SQ_LANES <= n; i += SQ_LANES)
            for (size_t j = 0; j < SQ_LANES; j++)
                acc[j] += a[i + j] * a[i + j];
    }
    for (; i < n; i++) {
        float d = a[i] - (b ? k * b[i] : 0.0f) + (c ? c[i] : 0.0f);
        acc[i % SQ_LANES] += d * d;
    }
    float t = 0;
    for (size_t j = 0; j < SQ_LANES; j++)
        t += acc[j];
    return t;
}

static double sq_sum(const float *a, const float *b, float k, const float *c, uint32_t n)
{
    double ss = 0;
    for (uint32_t o = 0; o < n; o += SQ_BLOCK) {
        uint32_t e = n - o < SQ_BLOCK ? n - o : SQ_BLOCK;
        float t = sq_block(a + o, b ? b + o : NULL, k, c ? c + o : NULL, e);
        ss +=
            isfinite(t) ? (double)t : sq_sum_slow(a + o, b ? b + o : NULL, k, c ? c + o : NULL, e);
    }
    return ss;
}

static float median_of(const float *v, uint32_t n)
{
    float s[GOSSIP_ROBUST_HISTORY];
    memcpy(s, v, n * sizeof *s);
    for (uint32_t i = 1; i < n; i++) /* insertion sort: n <= 16 */
        for (uint32_t j = i; j > 0 && s[j - 1] > s[j]; j--) {
            float t = s[j];
            s[j] = s[j - 1];
            s[j - 1] = t;
        }
    return n % 2 ? s[n / 2] : 0.5f * (s[n / 2 - 1] + s[n / 2]);
}

void gossip_robust_note_local(gossip_robust *r, const float *x_now, const float *pending,
                              const float *last_result, uint32_t dim)
{
    double ss = 0;
    r->round++; /* one call per round of ours: the peers' rounds are counted in it */
    if (!last_result) {
        ss = sq_sum(x_now, NULL, 0.0f, NULL, dim);
        if (!(r->anchor > 0) && isfinite(ss))
            r->anchor = sqrt(ss);
        return;
    }
    ss = sq_sum(x_now, last_result, 1.0f, pending, dim);
    double norm = sqrt(ss);
    if (!(norm > 0) || !isfinite(norm) || norm > 3e38)
        return;
    r->hist[r->next] = (float)norm;
    r->next = (r->next + 1) % GOSSIP_ROBUST_HISTORY;
    if (r->nhist < GOSSIP_ROBUST_HISTORY)
        r->nhist++;
    r->ref = r->nhist >= GOSSIP_ROBUST_WARMUP ? median_of(r->hist, r->nhist) : 0;
}

/* The part of a whole vector's bound that `count` of its values get: their
 * share sqrt(count / dim) of an honest difference spread evenly, with room
 * for the spread of that share. Over count values the squared norm of an
 * even spread is dim/count times a chi-square of count degrees of freedom
 * over count, whose standard deviation is sqrt(2 / count): three of them
 * (an allreduce segment of 4 values: 1.8 x; of 2,000: 1.05 x). A whole
 * vector is what the reference measures: no room added. */
static double robust_share(const gossip_robust *r, uint32_t count)
{
    double share = sqrt((double)count / r->dim);
    if (count && count < r->dim)
        share *= sqrt(1 + 3 * sqrt(2.0 / count));
    return share;
}

double gossip_robust_bound(const gossip_robust *r, uint32_t count, double mult)
{
    if (r->cfg.rule == GOSSIP_ROBUST_NONE || !(r->ref > 0) || !r->dim)
        return HUGE_VAL;
    return r->cfg.clip_factor * r->ref * mult * robust_share(r, count);
}

/* ---- quarantine ----------------------------------------------------------- */

/* Close the peer's last round if ours has moved on since: half of its
 * values or more clipped extends its streak, else the streak ends. (Half:
 * an allreduce predecessor's round is its own contribution and its own
 * segment, one chunk each.) */
static void robust_peer_roll(const gossip_robust *r, gossip_robust_peer *p)
{
    assert(p->clipped <= p->seen);
    assert(p->round <= r->round);
    if (p->round == r->round)
        return;
    if (p->seen)
        p->streak = 2 * p->clipped >= p->seen ? p->streak + (p->streak < UINT32_MAX) : 0;
    p->clipped = p->seen = 0;
    p->round = r->round;
}

static int robust_peer_recent(const gossip_robust *r, const gossip_robust_peer *p)
{
    return p->id && p->round + GOSSIP_ROBUST_RECENT_ROUNDS >= r->round;
}

/* The record of `id`, made (evicting the least recently heard peer that
 * is not in a clipped streak, else the least recently heard) if new; NULL
 * without records. */
static gossip_robust_peer *robust_peer_get(gossip_robust *r, uint64_t id)
{
    if (!r->peer)
        return NULL;
    gossip_robust_peer *free_slot = NULL, *calm = NULL, *oldest = NULL;
    for (uint32_t i = 0; i < GOSSIP_ROBUST_PEERS_MAX; i++) {
        gossip_robust_peer *p = &r->peer[i];
        if (p->id == id) {
            robust_peer_roll(r, p);
            return p;
        }
        if (!p->id) {
            free_slot = free_slot ? free_slot : p;
            continue;
        }
        if (!oldest || p->round < oldest->round)
            oldest = p;
        if (!p->streak && (!calm || p->round < calm->round))
            calm = p;
    }
    gossip_robust_peer *p = free_slot ? free_slot : calm ? calm : oldest;
    assert(p && id);
    *p = (gossip_robust_peer){.id = id, .round = r->round};
    return p;
}

/* Quarantined: a streak long enough, and the vote (robust.h): fewer than
 * half of the recent peers, with ourselves as one that agrees, clipped. */
static int robust_peer_cut(const gossip_robust *r, const gossip_robust_peer *q)
{
    if (q->streak < GOSSIP_ROBUST_QUARANTINE_ROUNDS)
        return 0;
    uint32_t voters = 1, suspects = 0;
    for (uint32_t i = 0; i < GOSSIP_ROBUST_PEERS_MAX; i++) {
        const gossip_robust_peer *p = &r->peer[i];
        if (!robust_peer_recent(r, p))
            continue;
        voters++;
        /* its latest round (records are rolled only when the peer sends
         * again, so this one may be unclosed) */
        suspects += p->seen ? 2 * p->clipped >= p->seen : p->streak > 0;
    }
    return 2 * suspects < voters;
}

int gossip_robust_quarantined(const gossip_robust *r, uint64_t peer)
{
    for (uint32_t i = 0; peer && r->peer && i < GOSSIP_ROBUST_PEERS_MAX; i++)
        if (r->peer[i].id == peer)
            return robust_peer_cut(r, &r->peer[i]);
    return 0;
}

/* ---- clipping ------------------------------------------------------------- */

double gossip_robust_limit(const gossip_robust *r, uint32_t count, double mult, const float *own)
{
    if (r->cfg.rule == GOSSIP_ROBUST_NONE)
        return HUGE_VAL;
    double bound = gossip_robust_bound(r, count, mult);
    /* Before the scale: a whole model's norm is already far above any
     * honest difference (robust.h), so a partial sum's allowance (mult > 1)
     * is not added to it: 2 ||x|| (sign-flip) must not get through. */
    mult = mult < 1 ? mult : 1;
    if (bound == HUGE_VAL && r->anchor > 0 && r->dim) {
        bound = GOSSIP_ROBUST_NOSCALE_FACTOR * mult * r->anchor * robust_share(r, count);
    } else if (bound == HUGE_VAL && own) {
        double ss = sq_sum(own, NULL, 0.0f, NULL, count);
        bound = GOSSIP_ROBUST_NOSCALE_FACTOR * mult * sqrt(ss);
    }
    return bound;
}

void gossip_robust_accepted(gossip_robust *r, uint64_t peer, uint32_t count)
{
    if (r->cfg.rule == GOSSIP_ROBUST_NONE)
        return;
    r->inputs++;
    gossip_robust_peer *p = peer ? robust_peer_get(r, peer) : NULL;
    if (p)
        p->seen += count;
}

void gossip_robust_ignore(gossip_robust *r, float *v, const float *c, float k, uint32_t count)
{
    for (uint32_t i = 0; i < count; i++)
        v[i] = c ? k * c[i] : 0.0f;
    r->inputs++;
    r->clipped++;
    r->dropped++;
}

/* The decision of gossip_robust_clip_around for a difference of norm
 * `norm` against `bound`, counted: 1 (kept) or the factor in [0, 1) the
 * difference is to be multiplied by. */
static double clip_scale(gossip_robust *r, uint64_t peer, double norm, double bound, uint32_t count)
{
    r->inputs++;
    assert(!(bound < 0));
    gossip_robust_peer *p = peer ? robust_peer_get(r, peer) : NULL;
    if (p)
        p->seen += count;
    if (norm <= bound)
        return 1.0;
    if (p)
        p->clipped += count;
    r->clipped++;
    /* norm > bound > 0 and finite inputs (|v| <= 1e30, so ss <= dim * 4e60
     * fits a double): the scale is in (0, 1); 0 for a quarantined peer. */
    double s = p && robust_peer_cut(r, p) ? 0.0 : bound / norm;
    if (!(s > 0))
        r->dropped++;
    return s;
}

/* d = (a - b) / 2 over one SQ_BLOCK, and the sum of squares of a - b in
 * sq_block's lanes and order (the same float result). */
SIMD_CLONES static float half_diff_block(float *restrict d, const float *restrict a,
                                         const float *restrict b, uint32_t n)
{
    float acc[SQ_LANES] = {0};
    size_t i = 0;
    for (; i + SQ_LANES <= n; i += SQ_LANES)
        for (size_t j = 0; j < SQ_LANES; j++) {
            float t = a[i + j] - b[i + j];
            d[i + j] = t * 0.5f;
            acc[j] += t * t;
        }
    for (; i < n; i++) {
        float t = a[i] - b[i];
        d[i] = t * 0.5f;
        acc[i % SQ_LANES] += t * t;
    }
    float t = 0;
    for (size_t j = 0; j < SQ_LANES; j++)
        t += acc[j];
    return t;
}

SIMD_CLONES static void scale_values(float *v, uint32_t n, float s)
{
    for (uint32_t i = 0; i < n; i++)
        v[i] *= s;
}

int gossip_robust_half_diff(gossip_robust *r, uint64_t peer, float *d, const float *a,
                            const float *b, uint32_t count, double mult)
{
    double ss = 0;
    for (uint32_t o = 0; o < count; o += SQ_BLOCK) {
        uint32_t e = count - o < SQ_BLOCK ? count - o : SQ_BLOCK;
        float t = half_diff_block(d + o, a + o, b + o, e);
        ss += isfinite(t) ? (double)t : sq_sum_slow(a + o, b + o, 1.0f, NULL, e);
    }
    double bound = gossip_robust_limit(r, count, mult, b);
    if (bound == HUGE_VAL)
        return 0;
    double s = clip_scale(r, peer, sqrt(ss), bound, count);
    if (s == 1.0)
        return 0;
    scale_values(d, count, (float)s);
    return s > 0 ? 1 : 2;
}

int gossip_robust_clip_around(gossip_robust *r, uint64_t peer, float *v, const float *c, float k,
                              const float *own, uint32_t count, double mult)
{
    double bound = gossip_robust_limit(r, count, mult, own);
    if (bound == HUGE_VAL)
        return 0;
    double s = clip_scale(r, peer, sqrt(sq_sum(v, c, k, NULL, count)), bound, count);
    if (s == 1.0)
        return 0;
    if (c)
        for (uint32_t i = 0; i < count; i++) {
            double base = (double)k * c[i];
            v[i] = (float)(base + ((double)v[i] - base) * s);
        }
    else
        for (uint32_t i = 0; i < count; i++)
            v[i] = (float)((double)v[i] * s);
    return s > 0 ? 1 : 2;
}

void gossip_robust_trimmed_mean(const float *const *in, uint32_t nin, uint32_t trim, uint32_t n,
                                float *out)
{
    float s[GOSSIP_ROBUST_INPUTS_MAX];
    if (nin == 0)
        return;
    if (nin > GOSSIP_ROBUST_INPUTS_MAX)
        nin = GOSSIP_ROBUST_INPUTS_MAX;
    /* Keep at least one value: nin = 2 trim leaves the middle two. */
    while (trim && nin <= 2 * trim)
        trim--;
    for (uint32_t i = 0; i < n; i++) {
        for (uint32_t j = 0; j < nin; j++) {
            float x = in[j][i];
            uint32_t p = j;
            for (; p > 0 && s[p - 1] > x; p--)
                s[p] = s[p - 1];
            s[p] = x;
        }
        double sum = 0;
        for (uint32_t j = trim; j < nin - trim; j++)
            sum += s[j];
        out[i] = (float)(sum / (nin - 2 * trim));
    }
}

void gossip_robust_centered_clip(gossip_robust *r, const float *const *in, uint32_t nin,
                                 const float *center, uint32_t n, float *out, double *scratch)
{
    double tau = gossip_robust_bound(r, n, 1.0);
    if (tau == HUGE_VAL && r->cfg.rule != GOSSIP_ROBUST_NONE) { /* no scale yet: robust.h */
        double ss = 0;
        for (uint32_t i = 0; i < n; i++)
            ss += (double)center[i] * center[i];
        tau = GOSSIP_ROBUST_NOSCALE_FACTOR * (r->anchor > 0 ? r->anchor : sqrt(ss));
    }
    for (uint32_t i = 0; i < n; i++)
        scratch[i] = center[i];
    for (unsigned it = 0; it < GOSSIP_ROBUST_CC_ITERS && nin; it++) {
        double step_w = 1.0 / nin;
        /* scale of each input's difference to the current center */
        double sc[GOSSIP_ROBUST_INPUTS_MAX];
        for (uint32_t j = 0; j < nin && j < GOSSIP_ROBUST_INPUTS_MAX; j++) {
            double ss = 0;
            for (uint32_t i = 0; i < n; i++) {
                double d = in[j][i] - scratch[i];
                ss += d * d;
            }
            double norm = sqrt(ss);
            sc[j] = tau != HUGE_VAL && norm > tau ? tau / norm : 1.0;
            if (sc[j] < 1.0)
                r->clipped++;
            r->inputs++;
        }
        for (uint32_t i = 0; i < n; i++) {
            double v = scratch[i], add = 0;
            for (uint32_t j = 0; j < nin && j < GOSSIP_ROBUST_INPUTS_MAX; j++)
                add += (in[j][i] - v) * sc[j];
            scratch[i] = v + add * step_w;
        }
    }
    for (uint32_t i = 0; i < n; i++)
        out[i] = (float)scratch[i];
}

int gossip_robust_adopt_ok(const float *model, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!(fabsf(model[i]) <= GOSSIP_ROBUST_ADOPT_VALUE_MAX))
            return 0;
    return 1;
}
