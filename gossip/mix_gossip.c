/* gossip/mix_gossip — pairwise push-pull gossip: each round a member pushes
 * its vector to one peer chosen by the topology; the peer answers every
 * chunk with d = Q((x_pusher - x_peer) / 2), adds d, and the pusher
 * subtracts the very same decoded d, so the sum is kept exactly whatever the
 * codec does. See docs/MIXING.md, "gossip". */
#include "gossip/mix_internal.h"

#include <string.h>

typedef struct mix_pending {
    int used;
    uint64_t peer;
    uint64_t round;
    uint32_t got; /* values answered so far */
} mix_pending;

typedef struct gossip_state {
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
    return g->pend_bits ? GOSSIP_OK : GOSSIP_ENOMEM;
}

static void gossip_destroy(gossip_mix *m, void *st)
{
    gossip_state *g = st;
    gossip_free(m->env, g->pend_bits);
    gossip_free(m->env, g);
}

static void gossip_on_view(gossip_mix *m, void *st)
{
    (void)m;
    (void)st;
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
    (void)now;
    gossip_state *g = st;
    uint64_t r = g->next++;
    uint32_t j = gossip_topology_pick(m->topo, m->env, m->n, m->me, r);
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
    g->pend[e] = (mix_pending){.used = 1, .peer = m->ids[j], .round = r, .got = 0};
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

static int gossip_recv_reply(gossip_mix *m, gossip_state *g, const mix_frame *f)
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
        mix_apply_delta(m, ph->offset, ph->count, m->scratch, -1.0f);
    }
    bits[c / 8] |= (uint8_t)(1u << (c % 8));
    g->pend[e].got += ph->count;
    if (g->pend[e].got == m->dim && e != g->pend_cur)
        g->pend[e].used = 0;
    return GOSSIP_OK;
}

static int gossip_recv(gossip_mix *m, void *st, const mix_frame *f, gossip_time_us now)
{
    (void)now;
    if (f->h->type == GOSSIP_MSG_MIX_PUSH)
        return gossip_recv_push(m, st, f);
    return gossip_recv_reply(m, st, f);
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
