/* gossip/mix_pushsum — push-sum with running sums per link (loss tolerant):
 * each round a member keeps half of (s, w) and gives the other half to one
 * peer; frames carry the running sum of everything given on the link, so a
 * lost frame's mass arrives with the next one. See docs/MIXING.md,
 * "push-sum". */
#include "gossip/mix_internal.h"

#include <math.h>
#include <string.h>

typedef struct mix_link {
    int used;
    uint64_t peer;
    double *v; /* dim + 1 running sums; index dim is the weight */
    /* out-link: pushes made on it (1 for the first); in-link: the last one
     * seen. base_seq: an in-link adopted mid-stream, whose push base_seq
     * only sets the baseline (push-sum's "link sequence", MIXING.md). */
    uint32_t seq, base_seq;
} mix_link;

typedef struct pushsum_state {
    uint32_t links_max;
    double *ps;    /* numerator (dim values) and weight, float64 */
    float *ztaken; /* the estimate last taken by the caller */
    int init;      /* ps holds the caller's vector */
    mix_link *out_links, *in_links;
    double *link_mem; /* 2 * links_max * (dim + 1) */
    uint32_t *off;    /* random topology beyond links_max peers: circulant offsets */
    uint32_t k;       /* how many (0 = pick uniformly from the whole view) */
    uint64_t *tomb;   /* peers whose in-link we dropped (links_max, a ring) */
    uint32_t ntomb, tomb_next;
    uint32_t link; /* out-link of the running push */
    uint64_t next; /* next round number */
} pushsum_state;

static int pushsum_topology_ok(gossip_topology t)
{
    (void)t;
    return 1;
}

static mix_link *link_find(mix_link *t, uint32_t cap, uint64_t peer)
{
    for (uint32_t k = 0; k < cap; k++)
        if (t[k].used && t[k].peer == peer)
            return &t[k];
    return NULL;
}

static mix_link *link_add(gossip_mix *m, pushsum_state *p, mix_link *t, uint64_t peer)
{
    mix_link *l = link_find(t, p->links_max, peer);
    if (l)
        return l;
    for (uint32_t k = 0; k < p->links_max; k++) {
        if (!t[k].used) {
            t[k].used = 1;
            t[k].peer = peer;
            t[k].seq = t[k].base_seq = 0;
            memset(t[k].v, 0, ((size_t)m->dim + 1) * sizeof(double));
            return &t[k];
        }
    }
    return NULL;
}

/* Push-sum keeps running sums per link, in tables of links_max entries.
 * With the random topology every member would in time push to every other,
 * so beyond links_max + 1 members the in-link tables would overflow, pushes
 * would be refused and their senders' weights would drain into links that
 * never deliver (w -> 0, then s / w meaningless). Instead push-sum picks
 * uniformly among K = links_max out-neighbours of a random circulant graph
 * (i -> i + o_k mod n, the same K distinct offsets o_k on every member,
 * drawn from n): every member has exactly K out- and K in-neighbours, and
 * a random circulant graph of degree K is an expander, so mixing stays
 * fast. Below that size the pick is uniform over the whole view. */
static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static void pushsum_offsets(gossip_mix *m, pushsum_state *p)
{
    p->k = 0;
    if (m->topo != GOSSIP_TOPO_RANDOM || m->n < 2 || m->n - 1 <= p->links_max)
        return;
    uint64_t st = 0x505553480000ULL ^ m->n;
    while (p->k < p->links_max) {
        uint32_t o = 1 + (uint32_t)(splitmix(&st) % (m->n - 1));
        uint32_t k = 0;
        while (k < p->k && p->off[k] != o)
            k++;
        if (k == p->k)
            p->off[p->k++] = o;
    }
}

/* 1 if peer may hold a push-sum link with us: a member of the view and an
 * out- (dir > 0) or in-neighbour (dir < 0) in some round: of the circulant
 * offsets, or of the topology's graph (ring, torus, exponential, and
 * one-peer-exponential over its period of ceil(log2 n) <= 14 rounds, which
 * GOSSIP_TOPOLOGY_DEGREE_MAX rounds cover). Random without offsets: any
 * member. */
static int pushsum_neighbour(const gossip_mix *m, const pushsum_state *p, uint64_t peer, int dir)
{
    gossip_view v = mix_view(m);
    uint32_t j = gossip_view_index(&v, peer);
    if (j == UINT32_MAX)
        return 0;
    if (m->me == UINT32_MAX)
        return 1;
    if (p->k) {
        for (uint32_t k = 0; k < p->k; k++) {
            uint32_t o = p->off[k];
            uint32_t want = dir > 0 ? (m->me + o) % m->n : (m->me + m->n - o) % m->n;
            if (j == want)
                return 1;
        }
        return 0;
    }
    if (!gossip_topology_has_graph(m->topo))
        return 1;
    uint32_t rounds = gossip_topology_is_static(m->topo) ? 1 : GOSSIP_TOPOLOGY_DEGREE_MAX;
    for (uint32_t r = 0; r < rounds; r++) {
        uint32_t nb[GOSSIP_TOPOLOGY_DEGREE_MAX];
        uint32_t d = dir > 0 ? gossip_topology_out(m->topo, m->n, m->me, r, nb)
                             : gossip_topology_in(m->topo, m->n, m->me, r, nb);
        for (uint32_t k = 0; k < d; k++)
            if (nb[k] == j)
                return 1;
    }
    return 0;
}

/* Drop an in-link and remember its peer (see pushsum_recv). */
static void pushsum_drop_in(pushsum_state *p, mix_link *in)
{
    in->used = 0;
    uint32_t k = 0;
    while (k < p->ntomb && p->tomb[k] != in->peer)
        k++;
    if (k < p->ntomb)
        return;
    if (p->ntomb < p->links_max) {
        p->tomb[p->ntomb++] = in->peer;
    } else {
        p->tomb[p->tomb_next] = in->peer;
        p->tomb_next = (p->tomb_next + 1) % p->links_max;
    }
}

/* 1 if we dropped an in-link from peer (and forget it). */
static int pushsum_dropped(pushsum_state *p, uint64_t peer)
{
    for (uint32_t k = 0; k < p->ntomb; k++)
        if (p->tomb[k] == peer) {
            p->tomb[k] = p->tomb[--p->ntomb];
            if (p->tomb_next >= p->ntomb)
                p->tomb_next = 0;
            return 1;
        }
    return 0;
}

static int pushsum_create(gossip_mix *m, const gossip_mix_config *cfg, void **st)
{
    pushsum_state *p = gossip_calloc(m->env, 1, sizeof *p);
    if (!p)
        return GOSSIP_ENOMEM;
    *st = p;
    p->links_max = cfg->links_max ? cfg->links_max : GOSSIP_MIX_LINKS_DEFAULT;
    size_t per = (size_t)m->dim + 1;
    const gossip_env *env = m->env;
    int ok = (p->ps = gossip_calloc(env, per, sizeof(double))) &&
             (p->ztaken = gossip_calloc(env, m->dim, sizeof(float))) &&
             (p->out_links = gossip_calloc(env, p->links_max, sizeof(mix_link))) &&
             (p->in_links = gossip_calloc(env, p->links_max, sizeof(mix_link))) &&
             (p->link_mem = gossip_calloc(env, 2 * (size_t)p->links_max * per, sizeof(double))) &&
             (p->off = gossip_calloc(env, p->links_max, sizeof(uint32_t))) &&
             (p->tomb = gossip_calloc(env, p->links_max, sizeof(uint64_t)));
    if (!ok)
        return GOSSIP_ENOMEM;
    for (uint32_t k = 0; k < p->links_max; k++) {
        p->out_links[k].v = p->link_mem + (size_t)k * per;
        p->in_links[k].v = p->link_mem + ((size_t)p->links_max + k) * per;
    }
    return GOSSIP_OK;
}

static void pushsum_destroy(gossip_mix *m, void *st)
{
    pushsum_state *p = st;
    const gossip_env *env = m->env;
    gossip_free(env, p->ps);
    gossip_free(env, p->ztaken);
    gossip_free(env, p->out_links);
    gossip_free(env, p->in_links);
    gossip_free(env, p->link_mem);
    gossip_free(env, p->off);
    gossip_free(env, p->tomb);
    gossip_free(env, p);
}

/* A view change drops the links of members that left, and of members that
 * are no longer circulant neighbours (their mass leaves with them). */
static void pushsum_on_view(gossip_mix *m, void *st)
{
    pushsum_state *p = st;
    pushsum_offsets(m, p);
    for (uint32_t k = 0; k < p->links_max; k++) {
        mix_link *o = &p->out_links[k], *in = &p->in_links[k];
        if (o->used && !pushsum_neighbour(m, p, o->peer, 1)) {
            o->used = 0;
            if (m->stream.active && m->stream.owner == GOSSIP_MIX_PUSHSUM && p->link == k)
                m->stream.active = 0;
        }
        if (in->used && !pushsum_neighbour(m, p, in->peer, -1))
            pushsum_drop_in(p, in);
    }
}

static void pushsum_reset(gossip_mix *m, void *st)
{
    pushsum_state *p = st;
    memset(p->ps, 0, ((size_t)m->dim + 1) * sizeof *p->ps);
    memset(p->link_mem, 0, 2 * (size_t)p->links_max * ((size_t)m->dim + 1) * sizeof *p->link_mem);
    for (uint32_t k = 0; k < p->links_max; k++)
        p->out_links[k].used = p->in_links[k].used = 0;
    p->init = 0;
    pushsum_offsets(m, p);
}

static void pushsum_start(gossip_mix *m, void *st, gossip_time_us now)
{
    (void)now;
    pushsum_state *p = st;
    uint32_t dim = m->dim;
    if (!p->init) {
        for (uint32_t i = 0; i < dim; i++)
            p->ps[i] += m->work[i];
        p->ps[dim] += 1.0;
        p->init = 1;
    } else {
        /* The caller's local update since take, scaled by the weight, so the
         * estimate s/w moves by exactly that update. */
        double w = p->ps[dim];
        for (uint32_t i = 0; i < dim; i++)
            p->ps[i] += w * (double)(m->work[i] - p->ztaken[i]);
    }
    uint64_t r = p->next++;
    m->stream.ndest = 0;
    uint32_t j = p->k ? (m->me + p->off[gossip_random_below(m->env, p->k)]) % m->n
                      : gossip_topology_pick(m->topo, m->env, m->n, m->me, r);
    if (j == UINT32_MAX)
        return; /* alone: check finishes the round */
    mix_link *l = link_add(m, p, p->out_links, m->ids[j]);
    if (!l) /* table full: reuse a link we already have (bounded out-degree) */
        l = &p->out_links[gossip_random_below(m->env, p->links_max)];
    if (l->seq < UINT32_MAX)
        l->seq++;
    /* Keep half, give half: the given half joins the link's running sum, so a
     * lost frame's mass is carried by the next frame on the same link. */
    for (uint32_t i = 0; i <= dim; i++) {
        double half = p->ps[i] * 0.5;
        p->ps[i] = half;
        l->v[i] += half;
    }
    m->stream.dest[0] = l->peer;
    m->stream.ndest = 1;
    p->link = (uint32_t)(l - p->out_links);
    uint32_t nch = (uint32_t)(((uint64_t)dim + 1 + m->cv - 1) / m->cv);
    mix_stream_begin(m, GOSSIP_MIX_PUSHSUM, GOSSIP_MSG_PUSHSUM, r, 1.0f, nch, 0, 0);
}

/* Chunk c of the running push: the out-link's running sums, float64. */
static size_t pushsum_fill(gossip_mix *m, void *st, uint32_t c, uint8_t *p)
{
    pushsum_state *ps = st;
    uint32_t total = m->dim + 1, off = c * m->cv, n = mix_chunk_len(m, total, c);
    gossip_put_u32(p, m->dim);
    gossip_put_u32(p + 4, off);
    gossip_put_u32(p + 8, n);
    gossip_put_u32(p + 12, ps->out_links[ps->link].seq);
    const double *v = ps->out_links[ps->link].v + off;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t u;
        memcpy(&u, &v[i], 8);
        gossip_put_u64(p + GOSSIP_MIX_PS_HEADER + 8 * (size_t)i, u);
    }
    return GOSSIP_MIX_PS_HEADER + 8 * (size_t)n;
}

static double get_f64(const uint8_t *d, uint32_t i)
{
    uint64_t u = gossip_get_u64(d + 8 * (size_t)i);
    double v;
    memcpy(&v, &u, 8);
    return v;
}

/* The in-link of a push from `from` with link sequence seq, set up as the
 * MIXING.md section "push-sum" says; *baseline = 1 if this push only sets
 * the link's baseline. NULL when the table is full. */
static mix_link *pushsum_in_link(gossip_mix *m, pushsum_state *p, uint64_t from, uint32_t seq,
                                 int *baseline)
{
    mix_link *l = link_find(p->in_links, p->links_max, from);
    int known = l != NULL;
    if (!known && !(l = link_add(m, p, p->in_links, from))) {
        /* Table full: the views of the members differ (SWIM, a join), and
         * members pushed to us while their views made us their neighbour
         * (circulant offsets or the topology's graph). A link from a member
         * that is not our in-neighbour in our view gives way: kept, it would
         * refuse a real in-neighbour's pushes for good, whose weight then
         * drains into a link that never delivers (soak seed 5681 under
         * one-peer-exponential: every weight down 2.4x per second). */
        for (uint32_t k = 0; k < p->links_max && !l; k++)
            if (p->in_links[k].used && !pushsum_neighbour(m, p, p->in_links[k].peer, -1)) {
                pushsum_drop_in(p, &p->in_links[k]);
                l = link_add(m, p, p->in_links, from);
            }
    }
    if (!l)
        return NULL;
    /* Views differ between members under SWIM, so the two ends of a link
     * are not always dropped together. A push on a link we dropped (the
     * sender did not) carries running sums whose start we absorbed: adding
     * them again would count that history twice and blow the estimates up;
     * it only sets the baseline (the mass in flight on it is lost, the
     * estimates stay exact averages). A link we never had, or one the
     * sender re-created (its push numbers start again at 1, below the last
     * we saw), starts from 0: everything in its sums is new to us, lost
     * pushes included. Links are FIFO. */
    if (!known) {
        memset(l->v, 0, ((size_t)m->dim + 1) * sizeof *l->v);
        l->base_seq = pushsum_dropped(p, from) && seq != 1 ? seq : 0;
        l->seq = seq;
    } else if (seq < l->seq) {
        memset(l->v, 0, ((size_t)m->dim + 1) * sizeof *l->v);
        l->base_seq = 0;
        l->seq = seq;
    } else if (seq > l->seq) {
        l->seq = seq;
        l->base_seq = 0;
    }
    *baseline = l->base_seq != 0 && seq == l->base_seq;
    return l;
}

static int pushsum_recv(gossip_mix *m, void *st, const mix_frame *f, gossip_time_us now)
{
    (void)now;
    pushsum_state *ps = st;
    const uint8_t *p = f->p;
    size_t len = f->len;
    if (len < GOSSIP_MIX_PS_HEADER)
        return GOSSIP_ETRUNC;
    uint32_t dim = gossip_get_u32(p), off = gossip_get_u32(p + 4), cnt = gossip_get_u32(p + 8);
    uint32_t seq = gossip_get_u32(p + 12);
    uint32_t total = m->dim + 1;
    if (dim != m->dim || seq == 0 || off >= total || off % m->cv != 0 ||
        cnt != mix_chunk_len(m, total, off / m->cv))
        return GOSSIP_EMALFORMED;
    if (len != GOSSIP_MIX_PS_HEADER + 8 * (size_t)cnt)
        return GOSSIP_EMALFORMED;
    const uint8_t *d = p + GOSSIP_MIX_PS_HEADER;
    for (uint32_t i = 0; i < cnt; i++)
        if (!(fabs(get_f64(d, i)) <= GOSSIP_MIX_VALUE_MAX))
            return GOSSIP_ENONFINITE;
    int baseline = 0;
    mix_link *l = pushsum_in_link(m, ps, f->from, seq, &baseline);
    if (!l)
        return GOSSIP_EFULL;
    /* The weight's running sum only grows (the sender adds halves), so the
     * weight never shrinks on receipt; and no value may leave the estimate
     * s / w above GOSSIP_MIX_VALUE_MAX. Either would be a bogus frame. The
     * estimate is judged with the weight after this frame when it carries
     * the weight (the last chunk): judged with the weight before it, a
     * member whose weight had drained (its pushes lost in a loss burst, to
     * a crashed peer) refused every push for good, since any incoming mass
     * over a weight near 0 looks huge, and halved its weight every round
     * while its estimate stood still (soak seeds 5514 and 7004: the
     * consensus distance flat for 700 rounds, every weight down to 1e-250). */
    double w = ps->ps[m->dim];
    if (!baseline && off + cnt > m->dim) {
        double dw = get_f64(d, m->dim - off) - l->v[m->dim];
        if (dw > 0)
            w += dw;
    }
    for (uint32_t i = 0; i < cnt && !baseline; i++) {
        double sigma = get_f64(d, i);
        double next = ps->ps[off + i] + (sigma - l->v[off + i]);
        if (off + i == m->dim) {
            if (sigma < l->v[off + i])
                return GOSSIP_EMALFORMED;
        } else if (!(fabs(next) <= (double)GOSSIP_MIX_VALUE_MAX * w) && w > 0) {
            return GOSSIP_ENONFINITE;
        }
    }
    for (uint32_t i = 0; i < cnt; i++) {
        double sigma = get_f64(d, i);
        if (!baseline)
            ps->ps[off + i] += sigma - l->v[off + i];
        l->v[off + i] = sigma;
    }
    return GOSSIP_OK;
}

static void pushsum_check(gossip_mix *m, void *st)
{
    (void)st;
    if (!m->stream.active)
        mix_finish(m, GOSSIP_OK);
}

static void pushsum_expire(gossip_mix *m, void *st, gossip_time_us now)
{
    (void)st;
    (void)now;
    m->stream.active = 0;
    mix_finish(m, GOSSIP_EABORTED);
}

/* The result is the estimate s / w. */
static void pushsum_take(gossip_mix *m, void *st)
{
    pushsum_state *p = st;
    if (!p->init || !(p->ps[m->dim] > 0))
        return;
    double w = p->ps[m->dim];
    for (uint32_t i = 0; i < m->dim; i++)
        m->work[i] = (float)(p->ps[i] / w);
    memcpy(p->ztaken, m->work, (size_t)m->dim * sizeof *p->ztaken);
}

static uint64_t pushsum_round(const gossip_mix *m, const void *st)
{
    (void)m;
    return ((const pushsum_state *)st)->next;
}

int gossip_mix_pushsum_mass(const gossip_mix *m, double *vec, double *weight)
{
    if (!m || !m->st[GOSSIP_MIX_PUSHSUM] || !vec || !weight)
        return GOSSIP_EINVAL;
    const pushsum_state *p = m->st[GOSSIP_MIX_PUSHSUM];
    uint32_t dim = m->dim;
    for (uint32_t i = 0; i <= dim; i++) {
        double s = p->ps[i];
        for (uint32_t k = 0; k < p->links_max; k++) {
            if (p->out_links[k].used)
                s += p->out_links[k].v[i];
            if (p->in_links[k].used)
                s -= p->in_links[k].v[i];
        }
        if (i < dim)
            vec[i] = s;
        else
            *weight = s;
    }
    return GOSSIP_OK;
}

const mix_ops mix_pushsum_ops = {
    .flags = 0,
    .types = MIX_TYPE_BIT(GOSSIP_MSG_PUSHSUM),
    .topology_ok = pushsum_topology_ok,
    .create = pushsum_create,
    .destroy = pushsum_destroy,
    .on_view = pushsum_on_view,
    .reset = pushsum_reset,
    .start = pushsum_start,
    .recv = pushsum_recv,
    .check = pushsum_check,
    .expire = pushsum_expire,
    .fill = pushsum_fill,
    .take = pushsum_take,
    .round = pushsum_round,
};
