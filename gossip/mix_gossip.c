/* gossip/mix_gossip — pairwise push-pull gossip: each round a member pushes
 * its vector to one peer chosen by the topology; the peer answers every
 * chunk with d = Q((x_pusher - x_peer) / 2), adds d, and the pusher
 * subtracts the very same decoded d, so the sum is kept exactly whatever the
 * codec does. See docs/MIXING.md, "gossip". */
#include "gossip/mix_internal.h"

#include <assert.h>
#include <string.h>

/* Routing around slow, paused and unreachable peers (issue 13 item 14).
 * Each link (peer id) keeps an EWMA of its measured exchange time (push to
 * last answer, late answers included) and a time before which it is
 * avoided (its last frame could not be handed to the network, or it still
 * owes the answer to an earlier exchange).
 * - Per-link deadline: LINK_TIMEOUT_MULT x the link's EWMA, at least
 *   LINK_TIMEOUT_MIN_US and at most the configured step timeout; a link
 *   never measured gets min(step timeout, GOSSIP_MIX_STEP_TIMEOUT_DEFAULT_US).
 *   8x: an exchange's time on a healthy link varies by 2-3x with load; an
 *   abort costs nothing but the round (late answers are still applied), so
 *   the factor only has to clear that spread. 500 ms floor: a scheduling
 *   hiccup on a loaded host (tens to hundreds of ms) is not a slow link.
 * - Peer choice (random topology only; the graph topologies name their
 *   peers): the uniform draw is kept unless that peer is to be avoided,
 *   owes an answer, or is slow (EWMA > LINK_SLOW_MULT x the EWMA of all
 *   exchanges); then up to PICK_RETRIES more draws look for a better one,
 *   and the cheapest draw wins. A healthy cluster draws exactly as before
 *   (same random stream, same traces); a slow peer is still drawn now and
 *   then (all draws land on it), so its EWMA is refreshed.
 * - An exchange whose peer leaves the view, or that the host could not
 *   send (gossip_mix_unreachable), ends at once. */
#define LINK_TIMEOUT_MULT   8u
#define LINK_TIMEOUT_MIN_US 500000u
#define LINK_SLOW_MULT      4u
#define LINK_EWMA_SHIFT     2u /* weight 1/4 for a new sample */
#define LINK_AVOID_US       1000000u
#define PICK_RETRIES        3u

typedef struct mix_link {
    uint64_t id;                /* 0: free */
    uint32_t ewma_us;           /* 0: never measured */
    gossip_time_us avoid_until; /* unreachable: not drawn before this */
    gossip_time_us last_used;   /* eviction order */
} mix_link;

typedef struct mix_pending {
    int used;
    uint64_t peer;
    uint64_t round;
    uint32_t got; /* values answered so far */
    gossip_time_us started;
} mix_pending;

typedef struct gossip_state {
    mix_link *links; /* members_max entries, keyed by peer id */
    uint32_t links_cap;
    uint32_t typical_us; /* EWMA over every exchange measured (0: none) */
    mix_pending pend[GOSSIP_MIX_PENDING_MAX];
    uint32_t pend_next, pend_cur;
    uint8_t *pend_bits; /* GOSSIP_MIX_PENDING_MAX bitmaps of answered chunks */
    size_t pend_bytes;  /* bytes per bitmap */
    uint64_t round;     /* round of the running push (pend entry) */
    uint64_t next;      /* next round number */
} gossip_state;

static int gossip_topology_ok(gossip_topology t)
{
    (void)t;
    return 1;
}

static int gossip_create(gossip_mix *m, const gossip_mix_config *cfg, void **st)
{
    (void)cfg;
    gossip_state *g = gossip_calloc(m->env, 1, sizeof *g);
    if (!g)
        return GOSSIP_ENOMEM;
    *st = g;
    g->pend_bytes = ((size_t)m->nchunks + 7) / 8;
    g->pend_bits = gossip_calloc(m->env, GOSSIP_MIX_PENDING_MAX, g->pend_bytes);
    g->links_cap = m->members_max;
    g->links = gossip_calloc(m->env, g->links_cap, sizeof *g->links);
    return g->pend_bits && g->links ? GOSSIP_OK : GOSSIP_ENOMEM;
}

static void gossip_destroy(gossip_mix *m, void *st)
{
    gossip_state *g = st;
    gossip_free(m->env, g->pend_bits);
    gossip_free(m->env, g->links);
    gossip_free(m->env, g);
}

/* ---- links ---------------------------------------------------------------- */

static mix_link *link_find(gossip_state *g, uint64_t id)
{
    for (uint32_t k = 0; k < g->links_cap; k++)
        if (g->links[k].id == id)
            return &g->links[k];
    return NULL;
}

/* The entry of `id`, taking a free one or the least recently used. */
static mix_link *link_get(gossip_state *g, uint64_t id, gossip_time_us now)
{
    mix_link *l = link_find(g, id);
    if (!l) {
        l = &g->links[0];
        for (uint32_t k = 0; k < g->links_cap && l->id; k++)
            if (!g->links[k].id || g->links[k].last_used < l->last_used)
                l = &g->links[k];
        *l = (mix_link){.id = id};
    }
    assert(l->id == id);
    l->last_used = now;
    return l;
}

static uint32_t ewma_add(uint32_t ewma, gossip_time_us sample)
{
    uint32_t x = sample > UINT32_MAX ? UINT32_MAX : (sample ? (uint32_t)sample : 1u);
    if (!ewma)
        return x;
    int64_t d = (int64_t)x - (int64_t)ewma;
    return (uint32_t)((int64_t)ewma + d / (1 << LINK_EWMA_SHIFT));
}

/* Exchange e completed at now: one sample of its link's time. */
static void link_measured(gossip_state *g, const mix_pending *e, gossip_time_us now)
{
    if (now < e->started)
        return;
    mix_link *l = link_get(g, e->peer, now);
    l->ewma_us = ewma_add(l->ewma_us, now - e->started);
    g->typical_us = ewma_add(g->typical_us, now - e->started);
}

static gossip_time_us link_timeout(const gossip_mix *m, const mix_link *l)
{
    gossip_time_us t = GOSSIP_MIX_STEP_TIMEOUT_DEFAULT_US;
    if (l && l->ewma_us) {
        t = (gossip_time_us)l->ewma_us * LINK_TIMEOUT_MULT;
        if (t < LINK_TIMEOUT_MIN_US)
            t = LINK_TIMEOUT_MIN_US;
    }
    return t < m->step_timeout ? t : m->step_timeout;
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
    if (l && l->ewma_us && g->typical_us &&
        (uint64_t)l->ewma_us > (uint64_t)LINK_SLOW_MULT * g->typical_us)
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
    assert(j < m->n && j != m->me);
    return j;
}

/* A newer view: an exchange with a peer that left it (declared dead, left,
 * or cut off by a partition) cannot complete, so the round ends now rather
 * than at its deadline (issue 13 item 14: mixing stalled a whole step
 * timeout after the death was known). Its pending entry stays: answers that
 * still arrive are applied, as after an expiry. */
static void gossip_on_view(gossip_mix *m, void *st)
{
    gossip_state *g = st;
    if (m->algo != GOSSIP_MIX_GOSSIP || m->state != GOSSIP_MIX_RUNNING || m->stream.ndest == 0)
        return;
    const mix_pending *p = &g->pend[g->pend_cur];
    gossip_view v = mix_view(m);
    if (!p->used || p->round != g->round || gossip_view_index(&v, p->peer) != UINT32_MAX)
        return;
    m->stream.active = 0;
    m->stats.exchanges_cancelled++;
    mix_finish(m, GOSSIP_EABORTED);
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
    if (m->algo != GOSSIP_MIX_GOSSIP || m->state != GOSSIP_MIX_RUNNING || m->stream.ndest == 0 ||
        !p->used || p->round != g->round || p->peer != peer || p->got == m->dim)
        return;
    m->stream.active = 0;
    m->stats.exchanges_cancelled++;
    mix_finish(m, GOSSIP_EABORTED);
}

static void gossip_reset(gossip_mix *m, void *st)
{
    (void)m;
    gossip_state *g = st;
    for (uint32_t k = 0; k < GOSSIP_MIX_PENDING_MAX; k++)
        g->pend[k].used = 0;
}

static void gossip_start(gossip_mix *m, void *st, gossip_time_us now)
{
    gossip_state *g = st;
    uint64_t r = g->next++;
    uint32_t j = gossip_pick(m, g, r, now);
    m->stream.ndest = 0;
    if (j == UINT32_MAX) {
        mix_finish(m, GOSSIP_OK);
        return;
    }
    if (mix_encode_vector(m, m->orig, NULL)) {
        mix_finish(m, GOSSIP_EABORTED);
        return;
    }
    uint32_t e = g->pend_next;
    g->pend_next = (g->pend_next + 1) % GOSSIP_MIX_PENDING_MAX;
    g->pend[e] = (mix_pending){.used = 1, .peer = m->ids[j], .round = r, .got = 0, .started = now};
    m->deadline = now + link_timeout(m, link_find(g, m->ids[j]));
    memset(g->pend_bits + (size_t)e * g->pend_bytes, 0, g->pend_bytes);
    g->pend_cur = e;
    g->round = r;
    m->stream.dest[0] = m->ids[j];
    m->stream.ndest = 1;
    mix_stream_begin(m, GOSSIP_MIX_GOSSIP, GOSSIP_MSG_MIX_PUSH, r, 1.0f, m->nchunks, 0, 0);
}

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
    return GOSSIP_OK;
}

/* A push from a peer: answer with d = Q((x_peer - x_self) / 2) and add d to
 * our vector; the pusher subtracts the very same decoded d. */
static int gossip_recv_push(gossip_mix *m, gossip_state *g, const mix_frame *f)
{
    const mix_push_hdr *ph = f->push;
    if (m->algo != GOSSIP_MIX_GOSSIP || ph->scale != 1.0f)
        return GOSSIP_EMALFORMED;
    uint8_t *fr = mix_reply_slot(m);
    if (!fr)
        return GOSSIP_EFULL;
    /* Crossing pushes (we push to `from` while it pushes to us): the two
     * exchanges would each use the other's stale value and swap rather than
     * average. The member with the smaller id refuses; the other answers.
     * A member that has no vector yet (never started) refuses the same way. */
    const mix_pending *own = &g->pend[g->pend_cur];
    if (!m->has_vector || (m->state == GOSSIP_MIX_RUNNING && own->used && own->peer == f->from &&
                           own->got < m->dim && m->self < f->from))
        return gossip_busy_reply(m, f);
    int rc = gossip_codec_decode(ph->data, ph->data_len, ph->count, ph->bits, m->block, m->scratch);
    if (!rc)
        rc = mix_values_ok(m->scratch, ph->count);
    if (rc)
        return rc;
    const float *w = m->work + ph->offset;
    gossip_robust_clip_around(&m->robust, m->scratch, w, 1.0f, w, ph->count, 1.0); /* robust.h */
    for (uint32_t i = 0; i < ph->count; i++)
        m->scratch[i] = (m->scratch[i] - w[i]) * 0.5f;
    size_t data = mix_codec_bytes(m, ph->count, ph->bits);
    size_t payload = GOSSIP_MIX_PUSH_HEADER + data;
    rc = gossip_codec_encode(m->env, m->scratch, ph->count, ph->bits, m->block,
                             fr + GOSSIP_HEADER_SIZE + GOSSIP_MIX_PUSH_HEADER, data, m->scratch2);
    if (rc)
        return rc;
    mix_header(m, fr, GOSSIP_MSG_MIX_REPLY, m->view_id, f->h->round, payload);
    mix_push_write(m, fr + GOSSIP_HEADER_SIZE, GOSSIP_MIX_GOSSIP, ph->bits, 0, ph->offset,
                   ph->count, 1.0f, 0, 0);
    mix_reply_commit(m, f->from, GOSSIP_HEADER_SIZE + payload);
    mix_apply_delta(m, ph->offset, ph->count, m->scratch2, 1.0f);
    return GOSSIP_OK;
}

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
    if (!(ph->flags & MIX_FLAG_BUSY)) {
        int rc =
            gossip_codec_decode(ph->data, ph->data_len, ph->count, ph->bits, m->block, m->scratch);
        if (!rc)
            rc = mix_values_ok(m->scratch, ph->count);
        if (rc)
            return rc;
        gossip_robust_clip_around(&m->robust, m->scratch, NULL, 0.0f, m->work + ph->offset,
                                  ph->count, 1.0);
        mix_apply_delta(m, ph->offset, ph->count, m->scratch, -1.0f);
    }
    bits[c / 8] |= (uint8_t)(1u << (c % 8));
    g->pend[e].got += ph->count;
    if (g->pend[e].got == m->dim && !(ph->flags & MIX_FLAG_BUSY))
        link_measured(g, &g->pend[e], now);
    if (g->pend[e].got == m->dim && e != g->pend_cur)
        g->pend[e].used = 0;
    return GOSSIP_OK;
}

static int gossip_recv(gossip_mix *m, void *st, const mix_frame *f, gossip_time_us now)
{
    gossip_state *g = st;
    if (f->h->type == GOSSIP_MSG_MIX_PUSH)
        return gossip_recv_push(m, g, f);
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

static void gossip_check(gossip_mix *m, void *st)
{
    gossip_state *g = st;
    if (m->stream.ndest == 0 && !m->stream.active) {
        mix_finish(m, GOSSIP_OK);
        return;
    }
    mix_pending *p = &g->pend[g->pend_cur];
    if (!m->stream.active && p->used && p->round == g->round && p->got == m->dim) {
        p->used = 0;
        mix_finish(m, GOSSIP_OK);
    }
}

/* No (complete) answer in time: give up on this exchange. Answers that
 * still arrive are applied (the peer has applied its side). */
static void gossip_expire(gossip_mix *m, void *st, gossip_time_us now)
{
    (void)st;
    (void)now;
    m->stream.active = 0;
    mix_finish(m, GOSSIP_EABORTED);
}

static uint64_t gossip_round(const gossip_mix *m, const void *st)
{
    (void)m;
    return ((const gossip_state *)st)->next;
}

const mix_ops mix_gossip_ops = {
    .flags = MIX_OPS_ENC | MIX_OPS_REPLIES,
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
    .round = gossip_round,
};
