/* gossip/mix_choco — CHOCO compressed gossip with public copies (Koloskova,
 * Stich and Jaggi, 2019) on the static graphs, with copy generations that
 * restart the copies after a lost round. Rounds, slots and catch-up:
 * mix_sync.c. See docs/MIXING.md, "choco" and "choco under loss". */
#include "gossip/mix_internal.h"

#include <string.h>

typedef struct choco_state {
    mix_sync sync;      /* first: the hooks get it back as the state */
    float gamma;        /* consensus step */
    float scale_cfg;    /* quantizer scale, 0 = automatic */
    double *hat, *sacc; /* x^_i and s_i = sum_j w_ij x^_j, float64 (MIXING.md) */
    uint64_t gen_start; /* first round we push in gen */
    /* per in-neighbour: last round accumulated in gen (UINT64_MAX = none) */
    uint64_t in_id[GOSSIP_TOPOLOGY_DEGREE_MAX], in_last[GOSSIP_TOPOLOGY_DEGREE_MAX];
    uint32_t nin;
    uint32_t gen;  /* generation of hat / sacc (MIXING.md, "choco under loss") */
    uint32_t warm; /* rounds left that refine the restarted copies without a step */
} choco_state;

static int choco_topology_ok(gossip_topology t)
{
    return gossip_topology_is_static(t);
}

/* CHOCO's quantizer scale 1/(1+omega), omega the relative variance of the
 * codec: <= 0.05 for 4 bits or more on Gaussian-like blocks of 256 values (so
 * 1), about 1.4 for 2 bits and 8 for 1 bit at block 256 (see MIXING.md). */
static float choco_scale(const gossip_mix *m, const choco_state *c)
{
    if (c->scale_cfg > 0)
        return c->scale_cfg;
    if (m->bits >= 4)
        return 1.0f;
    return m->bits == 2 ? 0.4f : 0.1f;
}

/* Rounds after a restart of the copies in which choco only refines them.
 * A restarted copy starts from 0, so its first q quantizes the whole vector
 * (error ~ |x| 2^-(b-1) per block) rather than the small x - x^; a
 * consensus step on it would throw the members apart by that much. Each
 * refining round divides the copy's error by about 2^(b-1); after
 * ceil(24 / (b - 1)) rounds it is at float precision (24 rounds at most,
 * one at 32 bits). */
static uint32_t choco_warmup(const gossip_mix *m)
{
    unsigned b = m->bits > 1 ? m->bits - 1 : 1;
    uint32_t k = (24u + b - 1) / b;
    return k > 24 ? 24 : k;
}

/* Copies restart at generation 0 (new view, new algorithm); refine them
 * first once the members hold anything but their initial vectors. */
static void choco_clear_copies(gossip_mix *m, choco_state *c)
{
    memset(c->hat, 0, (size_t)m->dim * sizeof *c->hat);
    memset(c->sacc, 0, (size_t)m->dim * sizeof *c->sacc);
    c->gen = 0;
    c->gen_start = 0;
    c->nin = 0;
    c->warm = m->has_vector && m->algo == GOSSIP_MIX_CHOCO ? choco_warmup(m) : 0;
}

/* Restart the public copies at generation gen (MIXING.md, "choco under
 * loss"). hat and sacc start again from 0, as every member does when it
 * enters gen; contributions of the old generation already received are
 * dropped, and the rounds they belong to (and the running one, whose own
 * contribution is gone) skip their consensus step. */
static void choco_restart(gossip_mix *m, choco_state *c, uint32_t gen)
{
    mix_sync *s = &c->sync;
    memset(c->hat, 0, (size_t)m->dim * sizeof *c->hat);
    memset(c->sacc, 0, (size_t)m->dim * sizeof *c->sacc);
    for (uint32_t k = 0; k < s->window; k++) {
        mix_slot *slot = &s->slots[k];
        if (!slot->used)
            continue;
        int any = slot->round == s->round && m->state == GOSSIP_MIX_RUNNING;
        for (uint32_t j = 0; j < slot->nin; j++)
            any |= slot->got[j] != 0;
        if (any) {
            memset(slot->acc, 0, (size_t)m->dim * sizeof *slot->acc);
            slot->dirty = 1;
        }
    }
    c->gen = gen;
    /* Our own pushes in gen start with the next round we start (this
     * round's, if one runs, went out in the old generation). */
    c->gen_start = s->round + (m->state == GOSSIP_MIX_RUNNING);
    c->nin = 0;
    c->warm = choco_warmup(m);
    m->stats.choco_resets++;
}

/* Serial-number order of generations (RFC 1982): >0 when a is newer. */
static int gen_cmp(uint32_t a, uint32_t b)
{
    return (int32_t)(a - b);
}

/* The generation a member starts when it gives a round up: the next count
 * (high 16 bits) stamped with 16 bits of its own id. Two members that give
 * up concurrently, each having missed what the other saw, thus start
 * different generations, and the newer one restarts everybody; with a bare
 * counter both could sit in "the same" generation with copies that differ
 * (a lost q), and choco would never reach consensus. */
static uint32_t choco_next_gen(const gossip_mix *m, const choco_state *c)
{
    uint64_t h = m->self * 0x9E3779B97F4A7C15ULL;
    uint32_t count = (c->gen >> 16) + 1u;
    return (count << 16) | (uint32_t)(h >> 48);
}

/* q = Q(x - x^); x^ += scale q; s += w scale q (w = 1/(d+1)). */
static int choco_encode(gossip_mix *m, mix_sync *s, const mix_slot *slot, float *scale,
                        uint32_t *gen, uint32_t *gen_age)
{
    choco_state *c = (choco_state *)s;
    *scale = choco_scale(m, c);
    double w = 1.0 / (slot->nin + 1);
    int rc = GOSSIP_OK;
    for (uint32_t ch = 0; ch < m->nchunks && !rc; ch++) {
        uint32_t off = ch * m->cv, n = mix_chunk_len(m, m->dim, ch);
        for (uint32_t i = 0; i < n; i++)
            m->scratch[i] = (float)(m->work[off + i] - c->hat[off + i]);
        size_t at = mix_enc_offset(m, ch, m->bits);
        rc = gossip_codec_encode(m->env, m->scratch, n, m->bits, m->block, m->enc + at,
                                 m->enc_cap - at, m->scratch2);
        for (uint32_t i = 0; i < n && !rc; i++) {
            double d = (double)*scale * m->scratch2[i];
            c->hat[off + i] += d;
            c->sacc[off + i] += w * d;
        }
    }
    *gen = c->gen;
    uint64_t age = s->round - c->gen_start;
    *gen_age = (uint32_t)(age < UINT32_MAX ? age : UINT32_MAX);
    return rc;
}

/* Our copy of a sender's public vector is exact only if we added every q it
 * pushed in the current generation. Links are FIFO and a member pushes to
 * its (static) out-neighbours every round, so the pushes of one generation
 * arrive for consecutive rounds from the sender's first (age 0). A gap (a
 * push lost, or refused as stale) means our copy differs from the sender's
 * for good: returns 0, and the caller restarts the copies. */
static int choco_continuous(choco_state *c, uint64_t from, uint64_t round, uint32_t age)
{
    uint32_t k = 0;
    while (k < c->nin && c->in_id[k] != from)
        k++;
    if (k == c->nin) {
        if (age != 0 || k == GOSSIP_TOPOLOGY_DEGREE_MAX)
            return 0;
        c->in_id[k] = from;
        c->nin++;
    } else if (round != c->in_last[k] + 1) {
        return 0;
    }
    c->in_last[k] = round;
    return 1;
}

static int choco_accept(gossip_mix *m, mix_sync *s, mix_slot *slot, uint64_t from, uint64_t round,
                        const mix_push_hdr *ph)
{
    choco_state *c = (choco_state *)s;
    if (ph->gen != c->gen && gen_cmp(ph->gen, c->gen) > 0)
        choco_restart(m, c, ph->gen); /* a member lost a round: restart with it */
    if (ph->gen == c->gen && ph->offset == 0 && !choco_continuous(c, from, round, ph->gen_age))
        choco_restart(m, c, choco_next_gen(m, c)); /* we missed part of its copy: restart all */
    if (ph->gen != c->gen) {
        slot->dirty = 1; /* the sender restarts soon; its old-generation q is dropped */
        return 0;
    }
    return 1;
}

/* The copies stay exact whatever happens; the consensus step only in a
 * clean round (every contribution of the current generation). */
static void choco_combine(gossip_mix *m, mix_sync *s, const mix_slot *slot)
{
    choco_state *c = (choco_state *)s;
    double w = 1.0 / (slot->nin + 1);
    for (uint32_t i = 0; i < m->dim; i++)
        c->sacc[i] += w * slot->acc[i];
    if (c->warm > 0)
        c->warm--;
    else if (!slot->dirty)
        for (uint32_t i = 0; i < m->dim; i++)
            m->work[i] = (float)(m->work[i] + c->gamma * (c->sacc[i] - c->hat[i]));
}

/* A lost round leaves the public copies inconsistent between members;
 * restart them in a new generation, which spreads with the next pushes. */
static void choco_lost(gossip_mix *m, mix_sync *s)
{
    choco_state *c = (choco_state *)s;
    choco_restart(m, c, choco_next_gen(m, c));
}

/* A neighbour's chunk that does not follow on from what we hold of it in
 * this round: our copy of its public vector may hold a q it never sent in
 * its present stay (mix_sync_rule.conflict), and no later check would see
 * it (its rounds and ages follow on from there), so the copies are
 * restarted in a new generation, once per generation: the chunks that
 * follow carry the old one and are dropped. */
static void choco_conflict(gossip_mix *m, mix_sync *s, const mix_push_hdr *ph)
{
    choco_state *c = (choco_state *)s;
    if (ph->gen == c->gen)
        choco_restart(m, c, choco_next_gen(m, c));
}

static void choco_jump(gossip_mix *m, mix_sync *s, uint64_t r)
{
    (void)m;
    choco_state *c = (choco_state *)s;
    if (c->gen_start == s->round)
        c->gen_start = r;
}

static const mix_sync_rule choco_rule = {
    .encode = choco_encode,
    .accept = choco_accept,
    .combine = choco_combine,
    .lost = choco_lost,
    .jump = choco_jump,
    .conflict = choco_conflict,
};

static int choco_create(gossip_mix *m, const gossip_mix_config *cfg, void **st)
{
    choco_state *c = gossip_calloc(m->env, 1, sizeof *c);
    if (!c)
        return GOSSIP_ENOMEM;
    *st = c;
    c->gamma = cfg->choco_gamma > 0 ? cfg->choco_gamma : 0.5f;
    c->scale_cfg = cfg->choco_scale;
    int rc = mix_sync_init(m, &c->sync, cfg, &choco_rule, GOSSIP_MIX_CHOCO);
    if (rc)
        return rc;
    c->hat = gossip_calloc(m->env, m->dim, sizeof(double));
    c->sacc = gossip_calloc(m->env, m->dim, sizeof(double));
    return c->hat && c->sacc ? GOSSIP_OK : GOSSIP_ENOMEM;
}

static void choco_destroy(gossip_mix *m, void *st)
{
    choco_state *c = st;
    mix_sync_fini(m, &c->sync);
    gossip_free(m->env, c->hat);
    gossip_free(m->env, c->sacc);
    gossip_free(m->env, c);
}

static void choco_on_view(gossip_mix *m, void *st)
{
    choco_state *c = st;
    mix_sync_on_view(m, &c->sync);
    choco_clear_copies(m, c);
}

static void choco_reset(gossip_mix *m, void *st)
{
    choco_state *c = st;
    mix_sync_clear(m, &c->sync);
    choco_clear_copies(m, c);
}

static void choco_start(gossip_mix *m, void *st, gossip_time_us now)
{
    (void)now;
    mix_sync_start(m, &((choco_state *)st)->sync);
}

static int choco_recv(gossip_mix *m, void *st, const mix_frame *f, gossip_time_us now)
{
    (void)now;
    return mix_sync_recv(m, &((choco_state *)st)->sync, f);
}

static void choco_check(gossip_mix *m, void *st)
{
    mix_sync_check(m, &((choco_state *)st)->sync);
}

static void choco_expire(gossip_mix *m, void *st, gossip_time_us now)
{
    (void)now;
    mix_sync_abort_round(m, &((choco_state *)st)->sync, 0);
}

static uint64_t choco_round(const gossip_mix *m, const void *st)
{
    (void)m;
    return ((const choco_state *)st)->sync.round;
}

const mix_ops mix_choco_ops = {
    .flags = MIX_OPS_ENC,
    .types = MIX_TYPE_BIT(GOSSIP_MSG_MIX_PUSH),
    .stash_types = MIX_TYPE_BIT(GOSSIP_MSG_MIX_PUSH),
    .topology_ok = choco_topology_ok,
    .create = choco_create,
    .destroy = choco_destroy,
    .on_view = choco_on_view,
    .reset = choco_reset,
    .start = choco_start,
    .recv = choco_recv,
    .check = choco_check,
    .expire = choco_expire,
    .round = choco_round,
};
