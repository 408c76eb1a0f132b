/* gossip/mix_gossip — pairwise push-pull gossip: each round a member pushes
 * its vector to one peer chosen by the topology; the peer answers every
 * chunk with d = Q((x_pusher - x_peer) / 2), adds d, and the pusher
 * subtracts the very same decoded d, so the sum is kept exactly whatever the
 * codec does. See docs/MIXING.md, "gossip".
 *
 * Atomic exchanges (issue 12 item 4). While a member's own push is in
 * flight (sent, not every chunk answered) its vector must not change, or
 * the answer, computed from the pushed value, no longer averages current
 * values (measured: 0.44 variance factor per round at 10^4 agents instead
 * of 1/(2 sqrt e) = 0.303). So a push that reaches a member mid-exchange is
 * not answered at once: it is held (decoded into one of GOSSIP_MIX_HELD_MAX
 * buffers) and answered when the member's own exchange ends, or refused
 * with a busy answer, after which its pusher draws another peer
 * (GOSSIP_MIX_RETRY_MAX times per round). A member answers a push it holds
 * once the whole push has arrived, oldest first, before it sends a push of
 * its own (a push still arriving from a pusher of higher priority does not
 * wait: held_blocks), and answers one exchange at a time (every chunk of
 * it), so every exchange is atomic at both ends: between reading and
 * changing a vector nothing else reads or changes it.
 *
 * No deadlock (wait-die, Rosenkrantz, Stearns and Lewis 1978): a member
 * mid-exchange holds a push only from a pusher of higher priority than its
 * own exchange (prio below: a hash of the id and round, ties by id), and
 * refuses the others. A waits-for chain therefore has strictly decreasing
 * priorities, so it has no cycle (two members pushing to each other: the
 * one of lower priority refuses, the other holds) and ends at a member that
 * answers at once or refuses. A busy pusher keeps its round number, hence
 * its priority, for its retries. */
#include "gossip/mix_internal.h"

#include <assert.h>
#include <string.h>

#include "common/simd.h"

/* Routing around slow, paused and unreachable peers (issue 13 item 14).
 * Each link (peer id) keeps the best of its last LINK_SAMPLES measured
 * exchange times (push to last answer, late answers included; an exchange
 * that ran out of time counts with the time it ran) and a time before which
 * it is avoided (its last frame could not be handed to the network, or it
 * still owes the answer to an earlier exchange). The best, not an average:
 * an exchange also waits while its peer holds the push behind an exchange
 * of its own, so the samples of a fast link carry the delays of the slow
 * links its peer talks to; their minimum is the link's own time. (With an
 * EWMA, one peer of four behind 10 Mb/s made every link look slow, the
 * slow one was never told apart and the others' rounds/s fell to 0.1x:
 * issue 13 item 14.)
 * - Per-link deadline: LINK_TIMEOUT_MULT x the link's time, at least
 *   LINK_TIMEOUT_MIN_US and at most the configured step timeout; a link
 *   never measured is taken to be typical (LINK_TIMEOUT_MULT x the typical
 *   time, same floor), or, before any link is measured, gets
 *   min(step timeout, GOSSIP_MIX_STEP_TIMEOUT_DEFAULT_US).
 * - A member that leaves the view loses its link entry: its samples are of
 *   a path that failed (a partition: the exchanges that ran out of time
 *   before the death was known made the link look 500 ms slow, so the first
 *   exchange after the heal had a 4 s deadline and, unanswered, stalled
 *   the member's mixing for 4 s: CI's fault_partition) or of an earlier
 *   incarnation. It comes back unmeasured.
 *   8x: an exchange's time on a healthy link varies by 2-3x with load; an
 *   abort costs nothing but the round (late answers are still applied), so
 *   the factor only has to clear that spread. 500 ms floor: a scheduling
 *   hiccup on a loaded host (tens to hundreds of ms) is not a slow link.
 * - Peer choice (random topology only; the graph topologies name their
 *   peers): the uniform draw is kept unless that peer is to be avoided,
 *   owes an answer, or is slow (its time > LINK_SLOW_MULT x the typical
 *   time, link_typical); then up to PICK_RETRIES more draws look for a
 *   better one, and the cheapest draw wins. A healthy cluster draws
 *   exactly as before (same random stream, same traces); a slow peer is
 *   still drawn now and then (all draws land on it), so its time is
 *   refreshed.
 * - An exchange whose peer leaves the view, or that the host could not
 *   send (gossip_mix_unreachable), ends at once. */
#define LINK_TIMEOUT_MULT   8u
#define LINK_TIMEOUT_MIN_US 500000u
#define LINK_SLOW_MULT      4u
#define LINK_SAMPLES        4u /* a link's time: the best of this many */
#define LINK_AVOID_US       1000000u
#define PICK_RETRIES        3u
/* A slow link is drawn at most once per LINK_REPROBE_MULT of its own
 * exchange times (so at most about 1/16 of a member's time goes to it),
 * enough to notice that it is fast again; other draws then take the first
 * good peer among PICK_SCAN members from a random one. With 3 peers the
 * retries alone still landed on the slow one in (1/3)^4 of the rounds, and
 * each such exchange took ~20 fast rounds' time (issue 13 item 14). */
#define LINK_REPROBE_MULT 16u
#define PICK_SCAN         16u
/* Holding a push behind our own exchange: only while that exchange has run
 * at most 4x the typical exchange time (the spread of a healthy link under
 * load is 2-3x, see LINK_TIMEOUT_MULT), else the push is refused. */
#define HOLD_LATE_MULT 4u

typedef struct mix_link {
    uint64_t id;      /* 0: free */
    uint32_t time_us; /* best of samples[] (0: never measured) */
    uint32_t samples[LINK_SAMPLES];
    uint32_t nsamples;          /* samples taken (the ring's next slot: % LINK_SAMPLES) */
    gossip_time_us avoid_until; /* unreachable: not drawn before this */
    gossip_time_us last_used;   /* eviction order */
    gossip_time_us probed;      /* last drawn while slow, or measured */
} mix_link;

typedef struct mix_pending {
    uint64_t peer;
    uint64_t round;
    gossip_time_us started;
    uint32_t got; /* values answered so far */
    int used;
} mix_pending;

/* A push being received and answered, or held until our own exchange ends.
 * Chunks arrive in order (FIFO links); `x` keeps what the pusher sent. */
typedef struct mix_held {
    int used;
    uint64_t seq; /* acceptance order: the oldest is answered first */
    uint64_t peer, round;
    uint8_t bits;
    uint32_t got;        /* values received */
    uint32_t sent;       /* values answered */
    int crossing;        /* its pusher is the peer of our push and will refuse it */
    gossip_time_us last; /* last chunk received */
    float *x;            /* dim values */
} mix_held;

/* Past this many entries the link table is found through a hash index and
 * its free entries through a bitmap: a scan of 1 000 entries per pick and
 * per answer was half the CPU time of a 1 000-agent simulation. Entries
 * stay where the scan would have put them (the first free one, else the
 * least recently used), so every choice is the same. */
#define LINK_INDEX_MIN 16u

/* The pending pushes' bitmaps live inside the state up to this many bytes
 * (GOSSIP_MIX_PENDING_MAX bitmaps of up to 32 chunks), else allocated. */
#define PEND_INLINE_BYTES 16u

/* Laid out by what a frame touches (a simulator delivers to a million of
 * these, and every line is a cache miss): the round's own exchange first,
 * then the pending pushes with their bitmaps, then the held pushes. */
typedef struct gossip_state {
    /* the running round's own exchange */
    gossip_time_us now; /* latest time seen (check has none) */
    uint64_t round;     /* round of the running push (pend entry) */
    uint64_t next;      /* next round number */
    int want_push;      /* a push is to be sent once no held push is left */
    int pushing;        /* our push is in flight: our vector is locked */
    int refused;        /* the push in flight got a busy answer */
    int crossed;        /* we answered the crossing push of its peer meanwhile */
    uint32_t retries;   /* pushes sent again in this round */
    uint32_t pend_next, pend_cur;
    uint32_t typical_us; /* lower median of the links' times (0: none measured) */
    mix_link *links;     /* peers_max (or members_max) entries, keyed by peer id */
    mix_pending pend[GOSSIP_MIX_PENDING_MAX];
    uint8_t *pend_bits;                     /* GOSSIP_MIX_PENDING_MAX bitmaps of answered chunks */
    size_t pend_bytes;                      /* bytes per bitmap */
    uint8_t pend_inline[PEND_INLINE_BYTES]; /* pend_bits when they fit */
    /* pushes of others */
    uint64_t held_seq;
    mix_held held[GOSSIP_MIX_HELD_MAX];
    float *held_mem; /* GOSSIP_MIX_HELD_MAX * dim */
    uint32_t links_cap;
    uint32_t ntimes;  /* entries of times: the links whose time_us is set */
    uint32_t *times;  /* the measured links' times, sorted (links_cap entries) */
    uint32_t lix_cap; /* a power of two >= 2 x links_cap */
    uint32_t *lix;    /* above LINK_INDEX_MIN: lix_cap entries, entry + 1 or 0 (open
                         addressing, linear probing); NULL: scanned */
    uint64_t *lfree;  /* with lix: bit k set while links[k] is free */
} gossip_state;

static int gossip_topology_ok(gossip_topology t)
{
    (void)t;
    return 1;
}

static int gossip_create(gossip_mix *m, const gossip_mix_config *cfg, void **st)
{
    gossip_state *g = gossip_calloc(m->env, 1, sizeof *g);
    if (!g)
        return GOSSIP_ENOMEM;
    *st = g;
    g->pend_bytes = ((size_t)m->nchunks + 7) / 8;
    g->pend_bits = g->pend_bytes * GOSSIP_MIX_PENDING_MAX <= PEND_INLINE_BYTES
                       ? g->pend_inline
                       : gossip_calloc(m->env, GOSSIP_MIX_PENDING_MAX, g->pend_bytes);
    g->links_cap = cfg->peers_max ? cfg->peers_max : m->members_max;
    g->links = gossip_calloc(m->env, g->links_cap, sizeof *g->links);
    g->times = gossip_calloc(m->env, g->links_cap, sizeof *g->times);
    g->held_mem = gossip_calloc(m->env, (size_t)GOSSIP_MIX_HELD_MAX * m->dim, sizeof(float));
    if (!g->pend_bits || !g->links || !g->times || !g->held_mem)
        return GOSSIP_ENOMEM;
    if (g->links_cap > LINK_INDEX_MIN) {
        uint32_t words = (g->links_cap + 63) / 64;
        g->lix_cap = 64;
        while (g->lix_cap < 2 * g->links_cap)
            g->lix_cap *= 2;
        g->lix = gossip_calloc(m->env, g->lix_cap, sizeof *g->lix);
        g->lfree = gossip_calloc(m->env, words, sizeof *g->lfree);
        if (!g->lix || !g->lfree)
            return GOSSIP_ENOMEM;
        for (uint32_t k = 0; k < g->links_cap; k++)
            g->lfree[k / 64] |= 1ull << (k % 64);
    }
    for (uint32_t k = 0; k < GOSSIP_MIX_HELD_MAX; k++)
        g->held[k].x = g->held_mem + (size_t)k * m->dim;
    return GOSSIP_OK;
}

static void gossip_destroy(gossip_mix *m, void *st)
{
    gossip_state *g = st;
    if (g->pend_bits != g->pend_inline)
        gossip_free(m->env, g->pend_bits);
    gossip_free(m->env, g->links);
    gossip_free(m->env, g->lix);
    gossip_free(m->env, g->lfree);
    gossip_free(m->env, g->times);
    gossip_free(m->env, g->held_mem);
    gossip_free(m->env, g);
}

/* ---- links ---------------------------------------------------------------- */

static uint32_t lix_home(const gossip_state *g, uint64_t id)
{
    return (uint32_t)((id * 0x9E3779B97F4A7C15ull) >> 32) & (g->lix_cap - 1);
}

/* Position in lix of the entry of id (id != 0), or UINT32_MAX. */
static uint32_t lix_find(const gossip_state *g, uint64_t id)
{
    for (uint32_t h = lix_home(g, id); g->lix[h]; h = (h + 1) & (g->lix_cap - 1))
        if (g->links[g->lix[h] - 1].id == id)
            return h;
    return UINT32_MAX;
}

/* links[k] now holds an id (it was free). */
static void lix_add(gossip_state *g, uint32_t k)
{
    uint32_t h = lix_home(g, g->links[k].id);
    while (g->lix[h])
        h = (h + 1) & (g->lix_cap - 1);
    g->lix[h] = k + 1;
    g->lfree[k / 64] &= ~(1ull << (k % 64));
}

/* links[k] is about to be freed or reused: out of the index (backward
 * shift, so that no probe chain is cut: an entry moves into the gap
 * unless its home lies cyclically in (gap, its position]). */
static void lix_drop(gossip_state *g, uint32_t k)
{
    uint32_t mask = g->lix_cap - 1, i = lix_find(g, g->links[k].id);
    assert(i != UINT32_MAX && g->lix[i] == k + 1);
    g->lfree[k / 64] |= 1ull << (k % 64);
    for (uint32_t j = i;;) {
        g->lix[i] = 0;
        for (;;) {
            j = (j + 1) & mask;
            if (!g->lix[j])
                return;
            uint32_t home = lix_home(g, g->links[g->lix[j] - 1].id);
            if (((j - home) & mask) >= ((j - i) & mask))
                break; /* its home is at or before the gap: move it there */
        }
        g->lix[i] = g->lix[j];
        i = j;
    }
}

static mix_link *link_find(gossip_state *g, uint64_t id)
{
    if (g->lix) {
        uint32_t h = id ? lix_find(g, id) : UINT32_MAX;
        return h == UINT32_MAX ? NULL : &g->links[g->lix[h] - 1];
    }
    for (uint32_t k = 0; k < g->links_cap; k++)
        if (g->links[k].id == id)
            return &g->links[k];
    return NULL;
}

/* The entry a new link takes: the first free one, else the least recently
 * used (the first of equals). */
static mix_link *link_victim(gossip_state *g)
{
    if (g->lix)
        for (uint32_t w = 0; w < (g->links_cap + 63) / 64; w++)
            if (g->lfree[w])
                return &g->links[w * 64 + (uint32_t)__builtin_ctzll(g->lfree[w])];
    mix_link *l = &g->links[0];
    for (uint32_t k = 0; k < g->links_cap && l->id; k++)
        if (!g->links[k].id || g->links[k].last_used < l->last_used)
            l = &g->links[k];
    return l;
}

/* The sorted multiset of the links' times (link_typical's median): time t
 * (!= 0) in or out. Entries move by one, a few KB at most. */
static uint32_t times_at(const gossip_state *g, uint32_t t)
{
    uint32_t lo = 0, hi = g->ntimes;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (g->times[mid] < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void times_add(gossip_state *g, uint32_t t)
{
    uint32_t k = times_at(g, t);
    assert(g->ntimes < g->links_cap);
    memmove(g->times + k + 1, g->times + k, (g->ntimes - k) * sizeof *g->times);
    g->times[k] = t;
    g->ntimes++;
}

static void times_del(gossip_state *g, uint32_t t)
{
    uint32_t k = times_at(g, t);
    assert(k < g->ntimes && g->times[k] == t);
    memmove(g->times + k, g->times + k + 1, (g->ntimes - k - 1) * sizeof *g->times);
    g->ntimes--;
}

/* Free entry l (no-op when free). */
static void link_clear(gossip_state *g, mix_link *l)
{
    if (l->time_us)
        times_del(g, l->time_us);
    if (l->id && g->lix)
        lix_drop(g, (uint32_t)(l - g->links));
    *l = (mix_link){0};
}

/* The entry of `id`, taking a free one or the least recently used. */
static mix_link *link_get(gossip_state *g, uint64_t id, gossip_time_us now)
{
    mix_link *l = link_find(g, id);
    if (!l) {
        l = link_victim(g);
        link_clear(g, l);
        l->id = id;
        if (g->lix)
            lix_add(g, (uint32_t)(l - g->links));
    }
    assert(l->id == id);
    l->last_used = now;
    return l;
}

/* The typical exchange time, against which a link is called slow: the
 * lower median of the measured links' times. Not an average over every
 * exchange: with one slow peer of three, a third of the samples are slow,
 * such an average rose towards the slow link's time and the slow link was
 * never "4x typical", so it was drawn as often as the others (issue 13
 * item 14). The median follows a change of the whole network (every link
 * slower) but not a minority of slow links. Kept sorted as the times
 * change (times_add, times_del), so this is a lookup. */
static uint32_t link_typical(const gossip_state *g)
{
    return g->ntimes ? g->times[(g->ntimes - 1) / 2] : 0;
}

/* Exchange e completed at now: one sample of its link's time. */
static void link_measured(gossip_state *g, const mix_pending *e, gossip_time_us now)
{
    if (now < e->started)
        return;
    mix_link *l = link_get(g, e->peer, now);
    if (e->started > l->probed)
        l->probed = e->started; /* drawn then: a slow link's next turn counts from it */
    gossip_time_us dt = now - e->started;
    l->samples[l->nsamples++ % LINK_SAMPLES] =
        dt > UINT32_MAX ? UINT32_MAX : (dt ? (uint32_t)dt : 1u);
    uint32_t n = l->nsamples < LINK_SAMPLES ? l->nsamples : LINK_SAMPLES;
    if (l->time_us)
        times_del(g, l->time_us);
    l->time_us = l->samples[0];
    for (uint32_t k = 1; k < n; k++)
        if (l->samples[k] < l->time_us)
            l->time_us = l->samples[k];
    times_add(g, l->time_us); /* samples are >= 1 */
    g->typical_us = link_typical(g);
}

static gossip_time_us link_timeout(const gossip_mix *m, const gossip_state *g, const mix_link *l)
{
    gossip_time_us t = GOSSIP_MIX_STEP_TIMEOUT_DEFAULT_US;
    uint32_t time_us = l && l->time_us ? l->time_us : g->typical_us;
    if (time_us) {
        t = (gossip_time_us)time_us * LINK_TIMEOUT_MULT;
        if (t < LINK_TIMEOUT_MIN_US)
            t = LINK_TIMEOUT_MIN_US;
    }
    return t < m->step_timeout ? t : m->step_timeout;
}

/* Forget the links of members no longer in the view (see the top). */
static void link_forget_absent(gossip_mix *m, gossip_state *g)
{
    gossip_view v = mix_view(m);
    int changed = 0;
    for (uint32_t k = 0; k < g->links_cap; k++) {
        mix_link *l = &g->links[k];
        if (l->id && gossip_view_index(&v, l->id) == UINT32_MAX) {
            changed |= l->time_us != 0;
            link_clear(g, l);
        }
    }
    /* the typical time describes the network and the model's size, not
     * one peer: a member cut off from every peer keeps it */
    uint32_t t = changed ? link_typical(g) : 0;
    if (t)
        g->typical_us = t;
}

/* 1 if peer still owes the answer to an earlier exchange. */
static int link_owes(const gossip_mix *m, const gossip_state *g, uint64_t peer, gossip_time_us now)
{
    for (uint32_t k = 0; k < GOSSIP_MIX_PENDING_MAX; k++) {
        const mix_pending *p = &g->pend[k];
        if (p->used && p->peer == peer && p->got < m->dim && now - p->started < 4 * m->step_timeout)
            return 1;
    }
    return 0;
}

/* Cost class of drawing view member j: 0 good, 1 slow, 2 owes an answer,
 * 3 unreachable. */
static unsigned pick_cost(const gossip_mix *m, gossip_state *g, uint32_t j, gossip_time_us now)
{
    const mix_link *l = link_find(g, m->ids[j]);
    if (l && now < l->avoid_until)
        return 3;
    if (link_owes(m, g, m->ids[j], now))
        return 2;
    if (l && l->time_us && g->typical_us &&
        (uint64_t)l->time_us > (uint64_t)LINK_SLOW_MULT * g->typical_us)
        return 1;
    return 0;
}

static uint32_t gossip_pick(gossip_mix *m, gossip_state *g, uint64_t r, gossip_time_us now)
{
    uint32_t j = gossip_topology_pick(m->topo, m->env, m->n, m->me, r);
    if (j == UINT32_MAX || m->topo != GOSSIP_TOPO_RANDOM)
        return j;
    unsigned cost = pick_cost(m, g, j, now);
    for (uint32_t t = 0; t < PICK_RETRIES && cost > 0; t++) {
        uint32_t k = gossip_topology_pick(m->topo, m->env, m->n, m->me, r);
        unsigned c = pick_cost(m, g, k, now);
        if (c < cost) {
            j = k;
            cost = c;
        }
    }
    mix_link *l = cost == 1 ? link_find(g, m->ids[j]) : NULL;
    if (l &&
        (now < l->probed || now - l->probed >= (gossip_time_us)LINK_REPROBE_MULT * l->time_us)) {
        l->probed = now; /* its turn: measure it again */
        return j;
    }
    if (cost > 0) {
        uint32_t k = gossip_topology_pick(m->topo, m->env, m->n, m->me, r);
        for (uint32_t t = 0; t < PICK_SCAN && t + 1 < m->n; t++, k = (k + 1) % m->n) {
            if (k == m->me)
                k = (k + 1) % m->n;
            if (pick_cost(m, g, k, now) == 0)
                return k;
        }
    }
    assert(j < m->n && j != m->me);
    return j;
}

/* ---- priorities and locks ------------------------------------------------- */

/* Priority of the exchange that member `id` started in round `round`: a
 * hash, so that no member is always the one that yields (ties by id). */
static uint64_t prio_hash(uint64_t id, uint64_t round)
{
    uint64_t z = id + round * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* 1 if the exchange (a, ra) has a higher priority than (b, rb). */
static int prio_above(uint64_t a, uint64_t ra, uint64_t b, uint64_t rb)
{
    uint64_t pa = prio_hash(a, ra), pb = prio_hash(b, rb);
    return pa != pb ? pa > pb : a > b;
}

/* Our own exchange is in flight or waiting to be sent: pushes of others
 * are then held only by the wait-die rule. */
static int gossip_busy_self(const gossip_mix *m, const gossip_state *g)
{
    return m->algo == GOSSIP_MIX_GOSSIP && m->state == GOSSIP_MIX_RUNNING &&
           (g->pushing || g->want_push);
}

static mix_held *held_find(gossip_state *g, uint64_t peer, uint64_t round)
{
    for (uint32_t k = 0; k < GOSSIP_MIX_HELD_MAX; k++)
        if (g->held[k].used && g->held[k].peer == peer && g->held[k].round == round)
            return &g->held[k];
    return NULL;
}

/* A held push is answered only once every chunk of it has arrived: from
 * then on answering it takes no time of the network, so our vector is
 * locked to it for one pass only. Answering a push chunk by chunk as it
 * arrives would lock us to the pusher's link: one slow pusher (10 Mb/s)
 * then held every member it pushed to, and the pushes queued behind it,
 * for the whole transfer (issue 13 item 14: the other members' rounds/s
 * fell to 0.1x). An exchange already begun (sent > 0) is finished first. */
static int held_ready(const gossip_mix *m, const mix_held *h)
{
    return h->used && (h->sent > 0 || h->got == m->dim);
}

/* The held push answered next: the one begun, else the oldest ready one,
 * or NULL. */
static mix_held *held_next(gossip_mix *m, gossip_state *g)
{
    mix_held *o = NULL;
    for (uint32_t k = 0; k < GOSSIP_MIX_HELD_MAX; k++) {
        mix_held *h = &g->held[k];
        if (!held_ready(m, h))
            continue;
        if (h->sent > 0)
            return h;
        if (!o || h->seq < o->seq)
            o = h;
    }
    return o;
}

/* 1 if held push h must be answered before our push of round g->round
 * goes out: it is ready, or it is still arriving from a pusher whose
 * priority is not above our exchange's (wait-die: while our exchange runs
 * we may keep waiting only pushers of higher priority, see gossip_round_for). */
static int held_blocks(const gossip_mix *m, const gossip_state *g, const mix_held *h)
{
    return h->used && (held_ready(m, h) || !prio_above(h->peer, h->round, m->self, g->round));
}

static uint32_t held_blocking(const gossip_mix *m, const gossip_state *g)
{
    uint32_t n = 0;
    for (uint32_t k = 0; k < GOSSIP_MIX_HELD_MAX; k++)
        n += held_blocks(m, g, &g->held[k]);
    return n;
}

/* Round number for our next exchange. A push still arriving does not delay
 * our own push when our exchange's priority is below its pusher's: the
 * waits-for edges then still run from higher to lower priority (no
 * deadlock). The priority is a hash of (id, round), so the first of the
 * next ROUND_TRIES round numbers whose priority is below every such
 * pusher's is taken (the chance that none is: 1/(ROUND_TRIES + 1) on
 * average); if none, the next number, and we wait for those pushes.
 * Round numbers only have to grow: skipping some is harmless. */
#define ROUND_TRIES 64u
static uint64_t gossip_round_for(const gossip_mix *m, const gossip_state *g)
{
    uint64_t r = g->next;
    int arriving = 0;
    for (uint32_t k = 0; k < GOSSIP_MIX_HELD_MAX; k++)
        arriving |= g->held[k].used && !held_ready(m, &g->held[k]);
    if (!arriving)
        return r;
    for (uint64_t t = 0; t < ROUND_TRIES; t++) {
        int below = 1;
        for (uint32_t k = 0; k < GOSSIP_MIX_HELD_MAX && below; k++) {
            const mix_held *h = &g->held[k];
            if (h->used && !held_ready(m, h))
                below = prio_above(h->peer, h->round, m->self, r + t);
        }
        if (below)
            return r + t;
    }
    return r;
}

/* Drop held pushes that cannot be completed: their pusher left the view
 * (view), or their chunks stopped arriving for a step timeout (a pusher
 * that gave its exchange up, or lost frames). Answers already sent stay
 * applied on both sides. */
static void held_prune(gossip_mix *m, gossip_state *g, gossip_time_us now, int view)
{
    gossip_view v = mix_view(m);
    for (uint32_t k = 0; k < GOSSIP_MIX_HELD_MAX; k++) {
        mix_held *h = &g->held[k];
        if (!h->used)
            continue;
        if ((view && gossip_view_index(&v, h->peer) == UINT32_MAX) ||
            (h->got < m->dim && now >= h->last && now - h->last >= m->step_timeout))
            h->used = 0;
    }
}

/* ---- our own exchange ----------------------------------------------------- */

/* Send our push: to a peer drawn by the topology, with our current vector
 * (it includes the pushes we answered since start). */
static void gossip_push(gossip_mix *m, gossip_state *g)
{
    assert(!g->pushing && held_blocking(m, g) == 0);
    gossip_time_us now = g->now;
    uint64_t r = g->round;
    g->want_push = 0;
    g->refused = 0;
    g->crossed = 0;
    uint32_t j = gossip_pick(m, g, r, now);
    m->stream.ndest = 0;
    if (j == UINT32_MAX) {
        mix_finish(m, GOSSIP_OK);
        return;
    }
    if (mix_encode_vector(m, m->work, NULL)) {
        mix_finish(m, GOSSIP_EABORTED);
        return;
    }
    uint32_t e = g->pend_next;
    g->pend_next = (g->pend_next + 1) % GOSSIP_MIX_PENDING_MAX;
    g->pend[e] = (mix_pending){.used = 1, .peer = m->ids[j], .round = r, .got = 0, .started = now};
    m->deadline = now + link_timeout(m, g, link_find(g, m->ids[j]));
    memset(g->pend_bits + (size_t)e * g->pend_bytes, 0, g->pend_bytes);
    g->pend_cur = e;
    g->pushing = 1;
    m->stream.dest[0] = m->ids[j];
    m->stream.ndest = 1;
    mix_stream_begin(m, GOSSIP_MIX_GOSSIP, GOSSIP_MSG_MIX_PUSH, r, 1.0f, m->nchunks, 0, 0);
}

/* End the running round's exchange early (outcome GOSSIP_EABORTED). Its
 * pending entry stays: answers that still arrive are applied. */
static void gossip_abort(gossip_mix *m, gossip_state *g)
{
    m->stream.active = 0;
    g->pushing = 0;
    g->want_push = 0;
    mix_finish(m, GOSSIP_EABORTED);
}

/* A newer view: an exchange with a peer that left it (declared dead, left,
 * or cut off by a partition) cannot complete, so the round ends now rather
 * than at its deadline (issue 13 item 14: mixing stalled a whole step
 * timeout after the death was known). Pushes held from members that left
 * are dropped. */
static void gossip_on_view(gossip_mix *m, void *st)
{
    gossip_state *g = st;
    held_prune(m, g, g->now, 1);
    link_forget_absent(m, g);
    if (m->algo != GOSSIP_MIX_GOSSIP || m->state != GOSSIP_MIX_RUNNING || !g->pushing)
        return;
    const mix_pending *p = &g->pend[g->pend_cur];
    gossip_view v = mix_view(m);
    if (!p->used || p->round != g->round || gossip_view_index(&v, p->peer) != UINT32_MAX)
        return;
    m->stats.exchanges_cancelled++;
    gossip_abort(m, g);
}

/* Tests: the table of links against its sorted times, index and free
 * bitmap (mix_internal.h). */
int mix_gossip_links_check(const gossip_mix *m)
{
    const gossip_state *g = m->st[GOSSIP_MIX_GOSSIP];
    if (!g)
        return -1;
    uint64_t sum = 0;
    uint32_t timed = 0;
    for (uint32_t k = 0; k < g->ntimes; k++)
        if (!g->times[k] || (k && g->times[k] < g->times[k - 1]))
            return -1;
    for (uint32_t k = 0; k < g->links_cap; k++) {
        uint32_t t = g->links[k].time_us;
        if (!t)
            continue;
        uint32_t at = times_at(g, t);
        if (!g->links[k].id || at == g->ntimes || g->times[at] != t)
            return -1;
        timed++;
        sum += t;
    }
    for (uint32_t k = 0; k < g->ntimes; k++)
        sum -= g->times[k];
    if (timed != g->ntimes || sum)
        return -1;
    if (!g->lix)
        return 0;
    uint32_t used = 0, indexed = 0;
    for (uint32_t k = 0; k < g->links_cap; k++) {
        int free_bit = (g->lfree[k / 64] >> (k % 64)) & 1;
        if (!g->links[k].id) {
            if (!free_bit)
                return -1;
            continue;
        }
        used++;
        uint32_t h = lix_find(g, g->links[k].id);
        if (free_bit || h == UINT32_MAX || g->lix[h] != k + 1)
            return -1;
    }
    for (uint32_t h = 0; h < g->lix_cap; h++)
        indexed += g->lix[h] != 0;
    return indexed == used ? 0 : -1;
}

/* The host could not hand a frame for `peer` to the network (no route, the
 * link backing off, its queue full): avoid the peer for LINK_AVOID_US and
 * end a running exchange with it now. */
void mix_gossip_unreachable(gossip_mix *m, uint64_t peer, gossip_time_us now)
{
    gossip_state *g = m->st[GOSSIP_MIX_GOSSIP];
    if (!g || peer == 0 || peer == m->self)
        return;
    link_get(g, peer, now)->avoid_until = now + LINK_AVOID_US;
    const mix_pending *p = &g->pend[g->pend_cur];
    if (m->algo != GOSSIP_MIX_GOSSIP || m->state != GOSSIP_MIX_RUNNING || !g->pushing || !p->used ||
        p->round != g->round || p->peer != peer || p->got == m->dim)
        return;
    m->stats.exchanges_cancelled++;
    gossip_abort(m, g);
}

static void gossip_reset(gossip_mix *m, void *st)
{
    (void)m;
    gossip_state *g = st;
    for (uint32_t k = 0; k < GOSSIP_MIX_PENDING_MAX; k++)
        g->pend[k].used = 0;
    for (uint32_t k = 0; k < GOSSIP_MIX_HELD_MAX; k++)
        g->held[k].used = 0;
    g->pushing = g->want_push = 0;
}

/* Begin a round: the push goes out at once, or once the pushes that block
 * it (held_blocks) are answered (gossip_check). */
static void gossip_start(gossip_mix *m, void *st, gossip_time_us now)
{
    gossip_state *g = st;
    g->now = now;
    held_prune(m, g, now, 0);
    g->round = gossip_round_for(m, g);
    g->next = g->round + 1;
    g->retries = 0;
    g->pushing = 0;
    g->want_push = 1;
    m->stream.ndest = 0;
    if (held_blocking(m, g) == 0)
        gossip_push(m, g);
}

/* ---- pushes of others ----------------------------------------------------- */

/* Queue a BUSY answer to a push: the pusher counts the chunk as answered
 * with no change. Returns GOSSIP_OK or GOSSIP_EFULL. */
static int gossip_busy_reply(gossip_mix *m, const mix_frame *f)
{
    uint8_t *fr = mix_reply_slot(m);
    if (!fr)
        return GOSSIP_EFULL;
    const mix_push_hdr *ph = f->push;
    mix_header(m, fr, GOSSIP_MSG_MIX_REPLY, m->view_id, f->h->round, GOSSIP_MIX_PUSH_HEADER);
    mix_push_write(m, fr + GOSSIP_HEADER_SIZE, GOSSIP_MIX_GOSSIP, ph->bits, MIX_FLAG_BUSY,
                   ph->offset, ph->count, 1.0f, 0, 0);
    mix_reply_commit(m, f->from, GOSSIP_HEADER_SIZE + GOSSIP_MIX_PUSH_HEADER);
    if (ph->offset == 0)
        m->stats.exchanges_refused++;
    return GOSSIP_OK;
}

/* 1 if a push from `from` in round `round` crosses our push in flight (we
 * push to it while it pushes to us) and has the higher priority: its
 * pusher then refuses ours (it is mid-exchange with us, and ours has the
 * lower priority), so answering it at once is the serial order "our push
 * refused, then its push answered", with no wait (docs/MIXING.md). */
static int gossip_crossing(const gossip_mix *m, const gossip_state *g, uint64_t from,
                           uint64_t round)
{
    const mix_pending *p = &g->pend[g->pend_cur];
    return m->algo == GOSSIP_MIX_GOSSIP && m->state == GOSSIP_MIX_RUNNING && g->pushing &&
           p->used && p->round == g->round && p->peer == from && p->got < m->dim &&
           prio_above(from, round, m->self, g->round);
}

/* 1 if our push in flight should end soon, so that a push held behind it
 * waits about one exchange: its link is not slow and it has not run beyond
 * HOLD_LATE_MULT x the typical exchange time. Otherwise pushes are refused
 * rather than held, and their pushers try another peer at once instead of
 * waiting for an exchange with a slow, paused or dead peer (issue 13 item
 * 14: one slow peer must not hold up everyone's mixing). */
static int gossip_ends_soon(const gossip_mix *m, gossip_state *g, gossip_time_us now)
{
    if (!g->pushing || !g->typical_us)
        return 1;
    const mix_pending *p = &g->pend[g->pend_cur];
    const mix_link *l = link_find(g, p->peer);
    if (l && l->time_us && (uint64_t)l->time_us > (uint64_t)LINK_SLOW_MULT * g->typical_us)
        return 0;
    assert(p->used && p->peer != m->self);
    return now < p->started || now - p->started <= (uint64_t)HOLD_LATE_MULT * g->typical_us;
}

/* A free held slot for a new exchange from `from`, or NULL to refuse it. */
static mix_held *gossip_admit(gossip_mix *m, gossip_state *g, const mix_frame *f)
{
    if (!m->has_vector)
        return NULL;
    if (gossip_busy_self(m, g) && !prio_above(f->from, f->h->round, m->self, g->round))
        return NULL; /* wait-die: the lower priority yields */
    if (gossip_busy_self(m, g) && !gossip_crossing(m, g, f->from, f->h->round) &&
        !gossip_ends_soon(m, g, g->now))
        return NULL; /* our exchange is late: do not make it wait too */
    mix_held *h = NULL;
    for (uint32_t k = 0; k < GOSSIP_MIX_HELD_MAX && !h; k++)
        if (!g->held[k].used)
            h = &g->held[k];
    if (h && gossip_busy_self(m, g))
        m->stats.exchanges_held++;
    return h;
}

/* A push chunk from a peer: kept (decoded) in its held entry, answered by
 * gossip_poll when we are free. Chunk 0 decides for the whole exchange:
 * held, or refused with a busy answer (as are the later chunks of an
 * exchange we do not hold). */
static int gossip_recv_push(gossip_mix *m, gossip_state *g, const mix_frame *f, gossip_time_us now)
{
    const mix_push_hdr *ph = f->push;
    if (m->algo != GOSSIP_MIX_GOSSIP || ph->scale != 1.0f)
        return GOSSIP_EMALFORMED;
    held_prune(m, g, now, 0);
    mix_held *h = held_find(g, f->from, f->h->round);
    if (h && (ph->offset != h->got || ph->bits != h->bits)) {
        h->used = 0; /* a chunk lost or out of order: this exchange ends here */
        h = NULL;
    } else if (!h && ph->offset == 0) {
        h = gossip_admit(m, g, f);
        if (h)
            *h = (mix_held){.used = 1,
                            .seq = ++g->held_seq,
                            .peer = f->from,
                            .round = f->h->round,
                            .bits = ph->bits,
                            .crossing = gossip_crossing(m, g, f->from, f->h->round),
                            .x = h->x};
    }
    if (!h)
        return gossip_busy_reply(m, f);
    int rc = gossip_codec_decode(ph->data, ph->data_len, ph->count, ph->bits, m->block,
                                 h->x + ph->offset);
    if (!rc)
        rc = mix_values_ok(h->x + ph->offset, ph->count);
    if (rc) {
        if (h->got == 0)
            h->used = 0;
        return rc;
    }
    h->got += ph->count;
    h->last = now;
    assert(h->got <= m->dim);
    return GOSSIP_OK;
}

/* Answer the next chunk of the oldest held push, if we are free: d =
 * Q((x_pusher - x_self) / 2) is added to our vector and sent; the pusher
 * subtracts the very same decoded d. */
static int gossip_poll(gossip_mix *m, void *st, gossip_send *out)
{
    gossip_state *g = st;
    if (m->algo != GOSSIP_MIX_GOSSIP)
        return 0;
    mix_held *h = NULL;
    if (m->state == GOSSIP_MIX_RUNNING && g->pushing) {
        /* our vector is locked until our push is answered, except for the
         * crossing push of the peer that will refuse ours */
        for (uint32_t k = 0; k < GOSSIP_MIX_HELD_MAX && !h; k++)
            if (g->held[k].used && g->held[k].crossing &&
                gossip_crossing(m, g, g->held[k].peer, g->held[k].round))
                h = &g->held[k];
        if (h)
            g->crossed = 1;
    } else {
        h = held_next(m, g);
    }
    if (!h || h->sent == h->got)
        return 0;
    uint32_t off = h->sent, c = off / m->cv, n = mix_chunk_len(m, m->dim, c);
    assert(off % m->cv == 0 && off + n <= h->got);
    const float *w = m->work + off;
    /* the held chunk is read once, here: d = (x - w) / 2, clipped (robust.h) */
    gossip_robust_half_diff(&m->robust, h->peer, m->scratch, h->x + off, w, n, 1.0);
    uint8_t *fr = m->frame;
    size_t data = mix_codec_bytes(m, n, h->bits);
    size_t payload = GOSSIP_MIX_PUSH_HEADER + data;
    if (gossip_codec_encode(m->env, m->scratch, n, h->bits, m->block,
                            fr + GOSSIP_HEADER_SIZE + GOSSIP_MIX_PUSH_HEADER, data, m->scratch2)) {
        h->used = 0; /* cannot happen with checked values; the pusher times out */
        return 0;
    }
    mix_header(m, fr, GOSSIP_MSG_MIX_REPLY, m->view_id, h->round, payload);
    mix_push_write(m, fr + GOSSIP_HEADER_SIZE, GOSSIP_MIX_GOSSIP, h->bits, 0, off, n, 1.0f, 0, 0);
    mix_apply_delta(m, off, n, m->scratch2, 1.0f);
    out->frame = fr;
    mix_sent(m, out, h->peer, GOSSIP_HEADER_SIZE + payload);
    h->sent += n;
    if (h->sent == m->dim) {
        h->used = 0;
        m->stats.exchanges_answered++;
    }
    return 1;
}

/* ---- answers to our pushes ------------------------------------------------ */

static int gossip_recv_reply(gossip_mix *m, gossip_state *g, const mix_frame *f, gossip_time_us now)
{
    const mix_push_hdr *ph = f->push;
    if (ph->scale != 1.0f)
        return GOSSIP_EMALFORMED;
    uint32_t e = 0;
    while (e < GOSSIP_MIX_PENDING_MAX &&
           !(g->pend[e].used && g->pend[e].peer == f->from && g->pend[e].round == f->h->round))
        e++;
    if (e == GOSSIP_MIX_PENDING_MAX)
        return GOSSIP_ESTALE;
    uint32_t c = ph->offset / m->cv;
    uint8_t *bits = g->pend_bits + (size_t)e * g->pend_bytes;
    if (bits[c / 8] & (1u << (c % 8)))
        return GOSSIP_EMALFORMED; /* duplicate answer */
    int busy = (ph->flags & MIX_FLAG_BUSY) != 0;
    if (!busy) {
        int rc =
            gossip_codec_decode(ph->data, ph->data_len, ph->count, ph->bits, m->block, m->scratch);
        if (!rc)
            rc = mix_values_ok(m->scratch, ph->count);
        if (rc)
            return rc;
        gossip_robust_clip_around(&m->robust, f->from, m->scratch, NULL, 0.0f, m->work + ph->offset,
                                  ph->count, 1.0);
        mix_apply_delta(m, ph->offset, ph->count, m->scratch, -1.0f);
    }
    bits[c / 8] |= (uint8_t)(1u << (c % 8));
    mix_pending *p = &g->pend[e];
    p->got += ph->count;
    int current = g->pushing && e == g->pend_cur && p->round == g->round;
    if (current && busy)
        g->refused = 1;
    if (p->got == m->dim && !busy)
        link_measured(g, p, now);
    if (p->got == m->dim) {
        p->used = 0;
        if (current)
            g->pushing = 0; /* unlocked: gossip_check retries or finishes */
    }
    return GOSSIP_OK;
}

static int gossip_recv(gossip_mix *m, void *st, const mix_frame *f, gossip_time_us now)
{
    gossip_state *g = st;
    if (now > g->now)
        g->now = now;
    if (f->h->type == GOSSIP_MSG_MIX_PUSH)
        return gossip_recv_push(m, g, f, now);
    return gossip_recv_reply(m, g, f, now);
}

/* A push from a member not (yet) in our view, e.g. one that just joined and
 * we have not heard of: refused, but answered BUSY at once so the pusher
 * does not wait out its deadline (with SWIM every joiner would otherwise
 * lose a full step timeout per early push). */
static void gossip_stranger(gossip_mix *m, void *st, const mix_frame *f)
{
    (void)st;
    if (f->h->type == GOSSIP_MSG_MIX_PUSH)
        (void)gossip_busy_reply(m, f);
}

/* After every event: once our push is answered, retry after a busy answer
 * or finish; once the pushes we hold are answered, send the push we owe. */
static void gossip_check(gossip_mix *m, void *st)
{
    gossip_state *g = st;
    if (g->pushing || m->stream.active)
        return;
    if (!g->want_push) {
        /* refused: try another peer, unless the refusing peer's crossing
         * push was answered (we did exchange with it) */
        if (g->refused && !g->crossed && g->retries < GOSSIP_MIX_RETRY_MAX) {
            g->retries++;
            m->stats.exchanges_retried++;
            g->want_push = 1;
        } else {
            mix_finish(m, GOSSIP_OK);
            return;
        }
    }
    if (held_blocking(m, g) == 0)
        gossip_push(m, g);
}

/* No (complete) answer in time: give up on this exchange. Answers that
 * still arrive are applied (the peer has applied its side). */
static void gossip_expire(gossip_mix *m, void *st, gossip_time_us now)
{
    gossip_state *g = st;
    if (now > g->now)
        g->now = now;
    held_prune(m, g, now, 0);
    /* the exchange took at least this long: a sample of its link, or a
     * link whose exchanges all run out of time would never be measured,
     * never called slow, and be drawn as often as a fast one (issue 13
     * item 14: a 10 Mb/s peer cost each of the others an aborted round in
     * three) */
    const mix_pending *p = &g->pend[g->pend_cur];
    if (g->pushing && p->used && p->round == g->round && p->got < m->dim)
        link_measured(g, p, now);
    gossip_abort(m, g);
}

static uint64_t gossip_round(const gossip_mix *m, const void *st)
{
    (void)m;
    return ((const gossip_state *)st)->next;
}

const mix_ops mix_gossip_ops = {
    .flags = MIX_OPS_ENC | MIX_OPS_REPLIES | MIX_OPS_NO_ORIG,
    .types = MIX_TYPE_BIT(GOSSIP_MSG_MIX_PUSH) | MIX_TYPE_BIT(GOSSIP_MSG_MIX_REPLY),
    .topology_ok = gossip_topology_ok,
    .create = gossip_create,
    .destroy = gossip_destroy,
    .on_view = gossip_on_view,
    .reset = gossip_reset,
    .start = gossip_start,
    .recv = gossip_recv,
    .stranger = gossip_stranger,
    .check = gossip_check,
    .expire = gossip_expire,
    .poll = gossip_poll,
    .round = gossip_round,
};
