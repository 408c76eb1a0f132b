/* gossip/mix_sync — synchronous rounds over a topology graph, shared by the
 * dpsgd and choco rules (mix_dpsgd.c, mix_choco.c): per-round accumulator
 * slots, catch-up with members rounds ahead, skipped-round detection, round
 * deadlines. What a rule sends and how it combines what it received are its
 * mix_sync_rule hooks. See docs/MIXING.md, "dpsgd". */
#include "gossip/mix_internal.h"

#include <string.h>

void mix_slot_clear(mix_slot *slot, uint32_t dim)
{
    if (slot->used && slot->acc)
        memset(slot->acc, 0, (size_t)dim * sizeof *slot->acc);
    slot->used = 0;
}

int mix_sync_init(gossip_mix *m, mix_sync *s, const gossip_mix_config *cfg,
                  const mix_sync_rule *rule, gossip_mix_algo algo)
{
    s->rule = rule;
    s->algo = algo;
    s->window = cfg->sync_window ? cfg->sync_window : GOSSIP_MIX_SYNC_WINDOW_DEFAULT;
    s->slots = gossip_calloc(m->env, s->window, sizeof(mix_slot));
    s->slot_mem = gossip_calloc(m->env, (size_t)s->window * m->dim, sizeof(double));
    if (!s->slots || !s->slot_mem)
        return GOSSIP_ENOMEM;
    for (uint32_t k = 0; k < s->window; k++)
        s->slots[k].acc = s->slot_mem + (size_t)k * m->dim;
    return GOSSIP_OK;
}

void mix_sync_fini(gossip_mix *m, mix_sync *s)
{
    gossip_free(m->env, s->slots);
    gossip_free(m->env, s->slot_mem);
}

void mix_sync_clear(gossip_mix *m, mix_sync *s)
{
    for (uint32_t k = 0; k < s->window; k++) {
        mix_slot_clear(&s->slots[k], m->dim);
        s->slots[k].dirty = 0;
    }
}

/* A newer view: rounds restart at 0 and a running round is given up (no
 * frame of it can complete on the new members). */
void mix_sync_on_view(gossip_mix *m, mix_sync *s)
{
    s->round = 0;
    if (m->state == GOSSIP_MIX_RUNNING && m->algo == s->algo) {
        m->stream.active = 0;
        memcpy(m->work, m->orig, (size_t)m->dim * sizeof *m->work);
        mix_finish(m, GOSSIP_EABORTED);
    }
    mix_sync_clear(m, s);
}

/* The accumulator slot of round r (r .. r + window - 1 relative to the
 * running round), initialised with r's in-neighbours on first use. */
static mix_slot *sync_slot(gossip_mix *m, mix_sync *s, uint64_t r)
{
    mix_slot *slot = &s->slots[r % s->window];
    if (slot->used && slot->round == r)
        return slot;
    mix_slot_clear(slot, m->dim);
    slot->dirty = 0;
    uint32_t idx[GOSSIP_TOPOLOGY_DEGREE_MAX];
    slot->nin = gossip_topology_in(m->topo, m->n, m->me, r, idx);
    for (uint32_t k = 0; k < slot->nin; k++) {
        slot->in_id[k] = m->ids[idx[k]];
        slot->got[k] = 0;
    }
    slot->used = 1;
    slot->round = r;
    return slot;
}

void mix_sync_start(gossip_mix *m, mix_sync *s)
{
    uint64_t r = s->round;
    uint32_t idx[GOSSIP_TOPOLOGY_DEGREE_MAX];
    uint32_t nout = gossip_topology_out(m->topo, m->n, m->me, r, idx);
    mix_slot *slot = sync_slot(m, s, r);
    s->run_nin = slot->nin;
    for (uint32_t k = 0; k < nout; k++)
        m->stream.dest[k] = m->ids[idx[k]];
    m->stream.ndest = nout;
    float scale = 1.0f;
    uint32_t gen = 0, gen_age = 0;
    if (s->rule->encode(m, s, slot, &scale, &gen, &gen_age)) {
        /* cannot happen for finite input; abort rather than send junk */
        mix_finish(m, GOSSIP_EABORTED);
        return;
    }
    mix_stream_begin(m, s->algo, GOSSIP_MSG_MIX_PUSH, r, scale, m->nchunks, gen, gen_age);
}

void mix_sync_abort_round(gossip_mix *m, mix_sync *s, int keep_stream)
{
    if (s->rule->lost)
        s->rule->lost(m, s);
    mix_slot *cur = &s->slots[s->round % s->window];
    mix_slot_clear(cur, m->dim);
    cur->dirty = 0;
    if (!keep_stream)
        m->stream.active = 0;
    memcpy(m->work, m->orig, (size_t)m->dim * sizeof *m->work);
    s->round++;
    mix_finish(m, GOSSIP_EABORTED);
}

/* A member of our view is at round r, beyond our window: it entered this
 * view earlier (under SWIM every member installs a view at its own moment,
 * and rounds restart at 0 in each view), or we fell behind. Waiting would
 * cost a step deadline per round for ever, since neither side accepts the
 * other's rounds; so catch up: give the running round up and continue at r
 * (members only ever move forward, so the group meets at the front). */
static void sync_jump(gossip_mix *m, mix_sync *s, uint64_t r)
{
    if (m->state == GOSSIP_MIX_RUNNING)
        mix_sync_abort_round(m, s, 1);
    else if (s->rule->lost)
        s->rule->lost(m, s); /* rounds skipped */
    mix_sync_clear(m, s);
    if (s->rule->jump)
        s->rule->jump(m, s, r);
    s->round = r;
    m->stats.round_jumps++;
}

/* 0 if f would be accepted as the first chunk of round r, which is beyond
 * our window: sent by an in-neighbour of r, at offset 0, with values that
 * decode. Only such a frame is evidence that the others are at r; anything
 * else is refused before it can make us give up our round (otherwise one
 * corrupt frame naming a later round aborts it). Reads nothing but f. */
static int sync_jump_ok(gossip_mix *m, uint64_t r, const mix_frame *f)
{
    const mix_push_hdr *ph = f->push;
    uint32_t idx[GOSSIP_TOPOLOGY_DEGREE_MAX];
    uint32_t nin = gossip_topology_in(m->topo, m->n, m->me, r, idx), k = 0;
    while (k < nin && m->ids[idx[k]] != f->from)
        k++;
    if (k == nin)
        return GOSSIP_ENOTFOUND;
    if (ph->offset != 0)
        return GOSSIP_EMALFORMED;
    int rc = gossip_codec_decode(ph->data, ph->data_len, ph->count, ph->bits, m->block, m->scratch);
    return rc ? rc : mix_values_ok(m->scratch, ph->count);
}

int mix_sync_recv(gossip_mix *m, mix_sync *s, const mix_frame *f)
{
    const mix_push_hdr *ph = f->push;
    const gossip_header *h = f->h;
    if (m->algo != s->algo)
        return GOSSIP_EMALFORMED;
    int rc = s->rule->check_push ? s->rule->check_push(ph) : GOSSIP_OK;
    if (rc)
        return rc;
    if (h->epoch != m->view_id)
        return GOSSIP_ESTALE;
    if (h->round < s->round)
        return GOSSIP_ESTALE;
    if (h->round - s->round >= s->window) {
        rc = sync_jump_ok(m, h->round, f);
        if (rc)
            return rc;
        sync_jump(m, s, h->round);
    }
    mix_slot *slot = sync_slot(m, s, h->round);
    uint32_t k = 0;
    while (k < slot->nin && slot->in_id[k] != f->from)
        k++;
    if (k == slot->nin)
        return GOSSIP_ENOTFOUND;
    if (ph->offset != slot->got[k]) {
        if (s->rule->conflict)
            s->rule->conflict(m, s, ph);
        return GOSSIP_EMALFORMED;
    }
    rc = gossip_codec_decode(ph->data, ph->data_len, ph->count, ph->bits, m->block, m->scratch);
    if (!rc)
        rc = mix_values_ok(m->scratch, ph->count);
    if (rc)
        return rc;
    if (s->rule->accept && !s->rule->accept(m, s, slot, f->from, h->round, ph)) {
        slot->got[k] += ph->count;
        return GOSSIP_OK;
    }
    double *acc = slot->acc + ph->offset;
    for (uint32_t i = 0; i < ph->count; i++)
        acc[i] += (double)ph->scale * m->scratch[i];
    slot->got[k] += ph->count;
    return GOSSIP_OK;
}

/* 1 if an in-neighbour of the running round has sent a later round while
 * its part of this one is missing: links are FIFO, so that part was lost
 * (or never sent, after the neighbour gave the round up) and waiting for
 * the deadline would only stall every member behind us. */
static int sync_skipped(const gossip_mix *m, const mix_sync *s, const mix_slot *slot)
{
    for (uint32_t k = 0; k < slot->nin; k++) {
        if (slot->got[k] == m->dim)
            continue;
        for (uint32_t d = 1; d < s->window; d++) {
            const mix_slot *t = &s->slots[(s->round + d) % s->window];
            if (!t->used || t->round != s->round + d)
                continue;
            for (uint32_t j = 0; j < t->nin; j++)
                if (t->in_id[j] == slot->in_id[k] && t->got[j] > 0)
                    return 1;
        }
    }
    return 0;
}

void mix_sync_check(gossip_mix *m, mix_sync *s)
{
    mix_slot *slot = &s->slots[s->round % s->window];
    if (!slot->used || slot->round != s->round)
        return;
    if (sync_skipped(m, s, slot)) {
        mix_sync_abort_round(m, s, 1);
        return;
    }
    if (m->stream.active)
        return;
    for (uint32_t k = 0; k < slot->nin; k++)
        if (slot->got[k] != m->dim)
            return;
    s->rule->combine(m, s, slot);
    mix_slot_clear(slot, m->dim);
    slot->dirty = 0;
    s->round++;
    mix_finish(m, GOSSIP_OK);
}
