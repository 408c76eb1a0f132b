/* sim/netmodel — see netmodel.h for the model and the contracts. */
#include "sim/netmodel.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/rng.h"

#define NIL UINT32_MAX
/* Salts keep the latency and loss streams independent of every other user of
 * the run seed (compute, faults, agents). Arbitrary odd constants. */
#define SALT_LATENCY 0x6c61746e63795f31ULL
#define SALT_LOSS    0x6c6f73735f73316dULL
/* A finish time within this many nanoseconds above a whole nanosecond is
 * taken as that nanosecond: guards ceil() against rounding noise of a few
 * ulps (rates and remaining bits are doubles). 1e-3 ns = 1 ps. */
#define FINISH_SLACK_NS 1e-3

enum { FLOW_FREE = 0, FLOW_ACTIVE = 1, FLOW_DONE = 2 };

typedef struct flow {
    uint32_t src, dst;
    uint32_t gen;
    uint32_t state;
    uint32_t next[2], prev[2]; /* side 0: src's uplink list, side 1: dst's downlink list */
    uint32_t heap_pos;         /* NIL when not in the completion heap */
    uint32_t stamp;            /* component visit mark */
    uint32_t next_free;        /* free list, or the finished FIFO */
    uint8_t frozen;
    uint64_t seq; /* start order: ties in finish time */
    uint64_t bytes, tag, start_ns;
    uint64_t last_ns;   /* when remaining_bits was last brought up to date */
    uint64_t finish_ns; /* UINT64_MAX while stalled */
    uint64_t done_ns;
    double remaining_bits;
    double rate_bps;
} flow;

typedef struct fill_entry {
    double share;
    uint32_t link;
    uint32_t ver;
} fill_entry;

struct sim_net {
    uint32_t agents;
    uint64_t seed;
    sim_net_latency_kind lat_kind;
    uint64_t lat_const_ns;
    double lat_a, lat_b;
    uint64_t *lat_matrix_ns;
    uint64_t *lat_over_ns; /* per agent, UINT64_MAX = none; NULL until first set */
    double loss;
    model_rng loss_rng;
    uint32_t *group; /* NULL: no partition */
    uint64_t now_ns;

    /* links: 2a = uplink of a, 2a+1 = downlink of a */
    uint32_t nlinks;
    double *cap;
    uint32_t *head, *count, *lstamp, *nunf, *ver;
    double *rem;

    flow *flows;
    uint32_t nslots, slots_cap, flows_max;
    uint32_t free_head;
    uint32_t done_head, done_tail;
    uint32_t active;
    uint64_t seq;
    uint32_t stamp;

    uint32_t *heap; /* completion heap of flow slots */
    uint32_t heap_len;

    /* scratch for recomputation */
    uint32_t *comp_flows, *comp_links, *stack;
    fill_entry *fill;
    uint32_t *seeds;
    uint32_t nseeds;

    sim_net_stats stats;
};

const char *sim_net_strerror(int err)
{
    switch (err) {
    case SIM_NET_OK:
        return "ok";
    case SIM_NET_EINVAL:
        return "invalid argument";
    case SIM_NET_ENOMEM:
        return "out of memory";
    case SIM_NET_EFULL:
        return "too many flows in flight";
    case SIM_NET_ETIME:
        return "time went backwards";
    case SIM_NET_ENOFLOW:
        return "no such flow";
    case SIM_NET_EIO:
        return "cannot read file";
    case SIM_NET_EPARSE:
        return "malformed file";
    default:
        return "unknown error";
    }
}

static uint64_t ms_to_ns(double ms)
{
    if (!(ms > 0))
        return 0;
    if (ms > SIM_NET_LATENCY_MS_MAX)
        ms = SIM_NET_LATENCY_MS_MAX;
    return (uint64_t)llround(ms * 1e6);
}

static int bw_ok(double b)
{
    return isfinite(b) && b >= 0;
}

/* ---- completion heap (indexed binary heap keyed by (finish_ns, seq)) ---- */

static int heap_less(const sim_net *n, uint32_t a, uint32_t b)
{
    const flow *fa = &n->flows[a], *fb = &n->flows[b];
    return fa->finish_ns < fb->finish_ns || (fa->finish_ns == fb->finish_ns && fa->seq < fb->seq);
}

static void heap_set(sim_net *n, uint32_t pos, uint32_t f)
{
    n->heap[pos] = f;
    n->flows[f].heap_pos = pos;
}

static void heap_up(sim_net *n, uint32_t pos)
{
    uint32_t f = n->heap[pos];
    while (pos > 0) {
        uint32_t parent = (pos - 1) / 2;
        if (!heap_less(n, f, n->heap[parent]))
            break;
        heap_set(n, pos, n->heap[parent]);
        pos = parent;
    }
    heap_set(n, pos, f);
}

static void heap_down(sim_net *n, uint32_t pos)
{
    uint32_t f = n->heap[pos];
    for (;;) {
        uint32_t c = 2 * pos + 1;
        if (c >= n->heap_len)
            break;
        if (c + 1 < n->heap_len && heap_less(n, n->heap[c + 1], n->heap[c]))
            c++;
        if (!heap_less(n, n->heap[c], f))
            break;
        heap_set(n, pos, n->heap[c]);
        pos = c;
    }
    heap_set(n, pos, f);
}

static void heap_insert(sim_net *n, uint32_t f)
{
    n->heap[n->heap_len] = f;
    n->flows[f].heap_pos = n->heap_len++;
    heap_up(n, n->heap_len - 1);
}

static void heap_remove(sim_net *n, uint32_t f)
{
    uint32_t pos = n->flows[f].heap_pos;
    assert(pos != NIL && pos < n->heap_len);
    n->flows[f].heap_pos = NIL;
    uint32_t last = n->heap[--n->heap_len];
    if (pos == n->heap_len)
        return;
    heap_set(n, pos, last);
    heap_up(n, pos);
    heap_down(n, n->flows[last].heap_pos);
}

static void heap_update(sim_net *n, uint32_t f)
{
    uint32_t pos = n->flows[f].heap_pos;
    heap_up(n, pos);
    heap_down(n, n->flows[f].heap_pos);
}

/* ---- link lists ---- */

static uint32_t flow_link(const flow *f, int side)
{
    return side == 0 ? 2 * f->src : 2 * f->dst + 1;
}

static void link_add(sim_net *n, uint32_t fi)
{
    flow *f = &n->flows[fi];
    for (int s = 0; s < 2; s++) {
        uint32_t l = flow_link(f, s);
        f->prev[s] = NIL;
        f->next[s] = n->head[l];
        if (n->head[l] != NIL)
            n->flows[n->head[l]].prev[s] = fi;
        n->head[l] = fi;
        n->count[l]++;
    }
}

static void link_remove(sim_net *n, uint32_t fi)
{
    flow *f = &n->flows[fi];
    for (int s = 0; s < 2; s++) {
        uint32_t l = flow_link(f, s);
        if (f->prev[s] != NIL)
            n->flows[f->prev[s]].next[s] = f->next[s];
        else
            n->head[l] = f->next[s];
        if (f->next[s] != NIL)
            n->flows[f->next[s]].prev[s] = f->prev[s];
        n->count[l]--;
    }
}

/* ---- slots ---- */

static int grow_slots(sim_net *n)
{
    if (n->slots_cap >= n->flows_max)
        return SIM_NET_EFULL;
    uint32_t cap = n->slots_cap ? n->slots_cap * 2 : 1024;
    if (cap > n->flows_max)
        cap = n->flows_max;
    flow *fl = realloc(n->flows, (size_t)cap * sizeof *fl);
    if (!fl)
        return SIM_NET_ENOMEM;
    n->flows = fl;
    uint32_t *h = realloc(n->heap, (size_t)cap * sizeof *h);
    if (!h)
        return SIM_NET_ENOMEM;
    n->heap = h;
    uint32_t *cf = realloc(n->comp_flows, (size_t)cap * sizeof *cf);
    if (!cf)
        return SIM_NET_ENOMEM;
    n->comp_flows = cf;
    uint32_t *sd = realloc(n->seeds, ((size_t)cap * 2 + 2) * sizeof *sd);
    if (!sd)
        return SIM_NET_ENOMEM;
    n->seeds = sd;
    fill_entry *fe = realloc(n->fill, ((size_t)cap + n->nlinks) * sizeof *fe);
    if (!fe)
        return SIM_NET_ENOMEM;
    n->fill = fe;
    n->slots_cap = cap;
    return SIM_NET_OK;
}

static int slot_alloc(sim_net *n, uint32_t *out)
{
    if (n->free_head != NIL) {
        *out = n->free_head;
        n->free_head = n->flows[*out].next_free;
        return SIM_NET_OK;
    }
    if (n->nslots == n->slots_cap) {
        int rc = grow_slots(n);
        if (rc)
            return rc;
    }
    uint32_t i = n->nslots++;
    memset(&n->flows[i], 0, sizeof n->flows[i]);
    *out = i;
    return SIM_NET_OK;
}

static void slot_free(sim_net *n, uint32_t i)
{
    flow *f = &n->flows[i];
    f->state = FLOW_FREE;
    f->gen++;
    f->next_free = n->free_head;
    n->free_head = i;
}

static uint64_t flow_id(const sim_net *n, uint32_t i)
{
    return ((uint64_t)n->flows[i].gen << 32) | i;
}

static int flow_lookup(const sim_net *n, uint64_t id, uint32_t *out)
{
    uint32_t i = (uint32_t)id;
    if (i >= n->nslots || n->flows[i].gen != (uint32_t)(id >> 32) || n->flows[i].state == FLOW_FREE)
        return SIM_NET_ENOFLOW;
    *out = i;
    return SIM_NET_OK;
}

/* ---- creation ---- */

int sim_net_create(sim_net **out, const sim_net_config *cfg)
{
    *out = NULL;
    if (!cfg || cfg->agents == 0 || cfg->agents > SIM_NET_AGENTS_MAX || !bw_ok(cfg->up_bps) ||
        !bw_ok(cfg->down_bps) || !(cfg->loss >= 0 && cfg->loss <= 1))
        return SIM_NET_EINVAL;
    switch (cfg->latency_kind) {
    case SIM_NET_LAT_CONST:
        if (!(cfg->latency_ms >= 0 && cfg->latency_ms <= SIM_NET_LATENCY_MS_MAX))
            return SIM_NET_EINVAL;
        break;
    case SIM_NET_LAT_UNIFORM:
        if (!(cfg->lat_a >= 0 && cfg->lat_b >= cfg->lat_a && cfg->lat_b <= SIM_NET_LATENCY_MS_MAX))
            return SIM_NET_EINVAL;
        break;
    case SIM_NET_LAT_NORMAL:
    case SIM_NET_LAT_LOGNORMAL:
        if (!(cfg->lat_a >= 0 && cfg->lat_a <= SIM_NET_LATENCY_MS_MAX && cfg->lat_b >= 0 &&
              isfinite(cfg->lat_b)))
            return SIM_NET_EINVAL;
        if (cfg->latency_kind == SIM_NET_LAT_LOGNORMAL && !(cfg->lat_a > 0))
            return SIM_NET_EINVAL;
        break;
    case SIM_NET_LAT_MATRIX:
        if (!cfg->matrix_ms || cfg->agents > SIM_NET_MATRIX_AGENTS_MAX)
            return SIM_NET_EINVAL;
        for (size_t i = 0; i < (size_t)cfg->agents * cfg->agents; i++)
            if (!(cfg->matrix_ms[i] >= 0 && cfg->matrix_ms[i] <= SIM_NET_LATENCY_MS_MAX))
                return SIM_NET_EINVAL;
        break;
    default:
        return SIM_NET_EINVAL;
    }
    uint32_t flows_max = cfg->flows_max ? cfg->flows_max : SIM_NET_FLOWS_MAX;
    if (flows_max > SIM_NET_FLOWS_MAX)
        flows_max = SIM_NET_FLOWS_MAX;

    sim_net *n = calloc(1, sizeof *n);
    if (!n)
        return SIM_NET_ENOMEM;
    n->agents = cfg->agents;
    n->seed = cfg->seed;
    n->lat_kind = cfg->latency_kind;
    n->lat_const_ns = ms_to_ns(cfg->latency_ms);
    n->lat_a = cfg->lat_a;
    n->lat_b = cfg->lat_b;
    n->loss = cfg->loss;
    model_rng_seed(&n->loss_rng, cfg->seed ^ SALT_LOSS, 0);
    n->flows_max = flows_max;
    n->free_head = n->done_head = n->done_tail = NIL;
    n->nlinks = 2 * cfg->agents;
    size_t L = n->nlinks;
    n->cap = calloc(L, sizeof *n->cap);
    n->rem = calloc(L, sizeof *n->rem);
    n->head = malloc(L * sizeof *n->head);
    n->count = calloc(L, sizeof *n->count);
    n->lstamp = calloc(L, sizeof *n->lstamp);
    n->nunf = calloc(L, sizeof *n->nunf);
    n->ver = calloc(L, sizeof *n->ver);
    n->comp_links = malloc(L * sizeof *n->comp_links);
    n->stack = malloc(L * sizeof *n->stack);
    if (!n->cap || !n->rem || !n->head || !n->count || !n->lstamp || !n->nunf || !n->ver ||
        !n->comp_links || !n->stack)
        goto nomem;
    for (size_t l = 0; l < L; l++) {
        n->head[l] = NIL;
        n->cap[l] = (l & 1) ? cfg->down_bps : cfg->up_bps;
    }
    if (cfg->latency_kind == SIM_NET_LAT_MATRIX) {
        size_t nn = (size_t)cfg->agents * cfg->agents;
        n->lat_matrix_ns = malloc(nn * sizeof *n->lat_matrix_ns);
        if (!n->lat_matrix_ns)
            goto nomem;
        for (size_t i = 0; i < nn; i++)
            n->lat_matrix_ns[i] = ms_to_ns(cfg->matrix_ms[i]);
    }
    if (grow_slots(n))
        goto nomem;
    *out = n;
    return SIM_NET_OK;
nomem:
    sim_net_destroy(n);
    return SIM_NET_ENOMEM;
}

void sim_net_destroy(sim_net *n)
{
    if (!n)
        return;
    free(n->cap);
    free(n->rem);
    free(n->head);
    free(n->count);
    free(n->lstamp);
    free(n->nunf);
    free(n->ver);
    free(n->comp_links);
    free(n->stack);
    free(n->lat_matrix_ns);
    free(n->lat_over_ns);
    free(n->group);
    free(n->flows);
    free(n->heap);
    free(n->comp_flows);
    free(n->seeds);
    free(n->fill);
    free(n);
}

/* ---- latency ---- */

uint64_t sim_net_latency_ns(const sim_net *n, uint32_t src, uint32_t dst)
{
    assert(src < n->agents && dst < n->agents);
    if (src == dst)
        return 0;
    if (n->lat_over_ns) {
        uint64_t a = n->lat_over_ns[src], b = n->lat_over_ns[dst];
        if (a != UINT64_MAX || b != UINT64_MAX)
            return a == UINT64_MAX ? b : b == UINT64_MAX ? a : a > b ? a : b;
    }
    switch (n->lat_kind) {
    case SIM_NET_LAT_CONST:
        return n->lat_const_ns;
    case SIM_NET_LAT_MATRIX:
        return n->lat_matrix_ns[(size_t)src * n->agents + dst];
    default:
        break;
    }
    uint32_t lo = src < dst ? src : dst, hi = src < dst ? dst : src;
    model_rng r;
    model_rng_seed(&r, n->seed ^ SALT_LATENCY, (uint64_t)lo * n->agents + hi);
    double ms;
    if (n->lat_kind == SIM_NET_LAT_UNIFORM)
        ms = n->lat_a + (n->lat_b - n->lat_a) * model_rng_uniform_double(&r);
    else if (n->lat_kind == SIM_NET_LAT_NORMAL)
        ms = n->lat_a + n->lat_b * model_rng_normal(&r);
    else
        ms = n->lat_a * exp(n->lat_b * model_rng_normal(&r));
    return ms_to_ns(ms);
}

/* ---- max-min fair rates ---- */

static int fill_less(const fill_entry *a, const fill_entry *b)
{
    return a->share < b->share || (a->share == b->share && a->link < b->link);
}

static void fill_push(sim_net *n, uint32_t *len, fill_entry e)
{
    uint32_t pos = (*len)++;
    while (pos > 0) {
        uint32_t parent = (pos - 1) / 2;
        if (!fill_less(&e, &n->fill[parent]))
            break;
        n->fill[pos] = n->fill[parent];
        pos = parent;
    }
    n->fill[pos] = e;
}

static fill_entry fill_pop(sim_net *n, uint32_t *len)
{
    fill_entry top = n->fill[0], last = n->fill[--*len];
    uint32_t pos = 0;
    for (;;) {
        uint32_t c = 2 * pos + 1;
        if (c >= *len)
            break;
        if (c + 1 < *len && fill_less(&n->fill[c + 1], &n->fill[c]))
            c++;
        if (!fill_less(&n->fill[c], &last))
            break;
        n->fill[pos] = n->fill[c];
        pos = c;
    }
    if (*len)
        n->fill[pos] = last;
    return top;
}

static void set_finish(sim_net *n, uint32_t fi, uint64_t now)
{
    flow *f = &n->flows[fi];
    if (f->remaining_bits <= 0 || isinf(f->rate_bps)) {
        f->finish_ns = now;
    } else if (!(f->rate_bps > 0)) {
        f->finish_ns = UINT64_MAX;
    } else {
        double dt = f->remaining_bits * 1e9 / f->rate_bps;
        double c = ceil(dt - FINISH_SLACK_NS);
        if (c < 0)
            c = 0;
        f->finish_ns = c >= 1.8e19 ? UINT64_MAX : now + (uint64_t)c;
    }
}

/* Recompute rates in the components touching the seed links (n->seeds).
 * force: expand a seed link's flows even when the link is unlimited (its
 * capacity just changed). Flows with no limited link get an infinite rate. */
static void recompute(sim_net *n, uint64_t now, int force)
{
    if (++n->stamp == 0) { /* wrapped: clear marks */
        memset(n->lstamp, 0, n->nlinks * sizeof *n->lstamp);
        for (uint32_t i = 0; i < n->nslots; i++)
            n->flows[i].stamp = 0;
        n->stamp = 1;
    }
    uint32_t st = n->stamp, nf = 0, nl = 0, sp = 0;
    for (uint32_t i = 0; i < n->nseeds; i++) {
        uint32_t l = n->seeds[i];
        if (n->lstamp[l] == st || (!force && n->cap[l] <= 0))
            continue;
        n->lstamp[l] = st;
        n->stack[sp++] = l;
    }
    n->nseeds = 0;
    while (sp) {
        uint32_t l = n->stack[--sp];
        if (n->cap[l] > 0)
            n->comp_links[nl++] = l;
        int side = (l & 1u) ? 1 : 0;
        for (uint32_t fi = n->head[l]; fi != NIL; fi = n->flows[fi].next[side]) {
            flow *f = &n->flows[fi];
            if (f->stamp == st)
                continue;
            f->stamp = st;
            n->comp_flows[nf++] = fi;
            uint32_t other = flow_link(f, !side);
            if (n->cap[other] > 0 && n->lstamp[other] != st) {
                n->lstamp[other] = st;
                n->stack[sp++] = other;
            }
        }
    }
    if (nf == 0)
        return;
    n->stats.recomputes++;
    n->stats.recompute_flows += nf;

    /* progress at the old rates up to now */
    for (uint32_t i = 0; i < nf; i++) {
        flow *f = &n->flows[n->comp_flows[i]];
        if (now > f->last_ns && f->rate_bps > 0) {
            if (isinf(f->rate_bps))
                f->remaining_bits = 0;
            else
                f->remaining_bits -= f->rate_bps * (double)(now - f->last_ns) / 1e9;
            if (f->remaining_bits < 0)
                f->remaining_bits = 0;
        }
        f->last_ns = now;
        f->frozen = 0;
        f->rate_bps = INFINITY;
    }

    /* water-filling: repeatedly saturate the link with the smallest fair
     * share; freezing a flow at share s on its other link raises that link's
     * share (s <= rem/n there), so heap keys only grow and stale entries
     * (older ver) are skipped when popped. */
    uint32_t hl = 0;
    for (uint32_t i = 0; i < nl; i++) {
        uint32_t l = n->comp_links[i];
        n->rem[l] = n->cap[l];
        n->nunf[l] = n->count[l];
        n->ver[l]++;
        if (n->nunf[l])
            fill_push(n, &hl, (fill_entry){n->rem[l] / n->nunf[l], l, n->ver[l]});
    }
    while (hl) {
        fill_entry e = fill_pop(n, &hl);
        uint32_t l = e.link;
        if (e.ver != n->ver[l] || n->nunf[l] == 0)
            continue;
        double share = e.share > 0 ? e.share : 0;
        int side = (l & 1u) ? 1 : 0;
        for (uint32_t fi = n->head[l]; fi != NIL; fi = n->flows[fi].next[side]) {
            flow *f = &n->flows[fi];
            if (f->frozen)
                continue;
            f->frozen = 1;
            f->rate_bps = share;
            uint32_t o = flow_link(f, !side);
            if (n->cap[o] > 0 && n->nunf[o] > 0) {
                n->rem[o] -= share;
                n->nunf[o]--;
                n->ver[o]++;
                if (n->nunf[o])
                    fill_push(n, &hl, (fill_entry){n->rem[o] / n->nunf[o], o, n->ver[o]});
            }
        }
        n->nunf[l] = 0;
        n->ver[l]++;
    }
    if (nf > n->heap_len / 4) {
        /* most of the heap changed: rebuilding it (Floyd, O(heap)) beats
         * nf sift operations of O(log heap) each */
        for (uint32_t i = 0; i < nf; i++)
            set_finish(n, n->comp_flows[i], now);
        for (uint32_t i = n->heap_len / 2; i-- > 0;)
            heap_down(n, i);
    } else {
        for (uint32_t i = 0; i < nf; i++) {
            uint32_t fi = n->comp_flows[i];
            set_finish(n, fi, now);
            heap_update(n, fi);
        }
    }
}

/* Changes made at the current instant (flows started, finished, cancelled)
 * leave their links in n->seeds; the rates are recomputed once, lazily, when
 * they are needed: before time moves on, or when a rate or the next
 * completion is asked. Many flows started at one instant (a gossip round)
 * cost one recomputation, not one each. */
static void flush(sim_net *n)
{
    if (n->nseeds)
        recompute(n, n->now_ns, 0);
}

static void add_seeds(sim_net *n, const flow *f)
{
    if (n->nseeds + 2 > 2 * n->slots_cap + 2) /* the seed array is full */
        recompute(n, n->now_ns, 0);
    n->seeds[n->nseeds++] = flow_link(f, 0);
    n->seeds[n->nseeds++] = flow_link(f, 1);
}

/* ---- public operations ---- */

int sim_net_set_bandwidth(sim_net *n, uint32_t agent, double up_bps, double down_bps,
                          uint64_t now_ns)
{
    if (agent >= n->agents || !bw_ok(up_bps) || !bw_ok(down_bps))
        return SIM_NET_EINVAL;
    int rc = sim_net_advance(n, now_ns);
    if (rc)
        return rc;
    flush(n);
    /* bring the old component up to date at the old rates first: recompute
     * with the old capacities is exact for progress, then again with new. */
    n->seeds[n->nseeds++] = 2 * agent;
    n->seeds[n->nseeds++] = 2 * agent + 1;
    recompute(n, now_ns, 1);
    n->cap[2 * agent] = up_bps;
    n->cap[2 * agent + 1] = down_bps;
    n->seeds[n->nseeds++] = 2 * agent;
    n->seeds[n->nseeds++] = 2 * agent + 1;
    recompute(n, now_ns, 1);
    return SIM_NET_OK;
}

int sim_net_set_latency(sim_net *n, uint32_t agent, double latency_ms)
{
    if (agent >= n->agents || !(latency_ms <= SIM_NET_LATENCY_MS_MAX) || isnan(latency_ms))
        return SIM_NET_EINVAL;
    if (!n->lat_over_ns) {
        if (latency_ms < 0)
            return SIM_NET_OK;
        n->lat_over_ns = malloc(n->agents * sizeof *n->lat_over_ns);
        if (!n->lat_over_ns)
            return SIM_NET_ENOMEM;
        for (uint32_t a = 0; a < n->agents; a++)
            n->lat_over_ns[a] = UINT64_MAX;
    }
    n->lat_over_ns[agent] = latency_ms < 0 ? UINT64_MAX : ms_to_ns(latency_ms);
    return SIM_NET_OK;
}

int sim_net_set_loss(sim_net *n, double p)
{
    if (!(p >= 0 && p <= 1))
        return SIM_NET_EINVAL;
    n->loss = p;
    return SIM_NET_OK;
}

double sim_net_loss(const sim_net *n)
{
    return n->loss;
}

int sim_net_set_partition(sim_net *n, const uint32_t *group)
{
    if (!group) {
        free(n->group);
        n->group = NULL;
        return SIM_NET_OK;
    }
    if (!n->group) {
        n->group = malloc(n->agents * sizeof *n->group);
        if (!n->group)
            return SIM_NET_ENOMEM;
    }
    memcpy(n->group, group, n->agents * sizeof *n->group);
    return SIM_NET_OK;
}

int sim_net_start_flow(sim_net *n, uint32_t src, uint32_t dst, uint64_t bytes, uint64_t tag,
                       uint64_t now_ns, uint64_t *id_out)
{
    if (src >= n->agents || dst >= n->agents)
        return SIM_NET_EINVAL;
    /* finish what is due first, so a late caller cannot stretch a flow */
    int rc = sim_net_advance(n, now_ns);
    if (rc)
        return rc;
    uint32_t fi;
    rc = slot_alloc(n, &fi);
    if (rc)
        return rc;
    flow *f = &n->flows[fi];
    f->src = src;
    f->dst = dst;
    if (f->gen == 0)
        f->gen = 1;
    f->seq = n->seq++;
    f->bytes = bytes;
    f->tag = tag;
    f->start_ns = now_ns;
    f->last_ns = now_ns;
    f->remaining_bits = (double)bytes * 8.0;
    f->rate_bps = 0;
    f->heap_pos = NIL;
    f->stamp = 0;
    f->next_free = NIL;
    n->stats.flows++;
    *id_out = flow_id(n, fi);
    int limited = n->cap[2 * src] > 0 || n->cap[2 * dst + 1] > 0;
    if (bytes == 0 || !limited) {
        f->state = FLOW_DONE;
        f->done_ns = now_ns;
        f->prev[0] = f->prev[1] = f->next[0] = f->next[1] = NIL;
        if (n->done_tail != NIL)
            n->flows[n->done_tail].next_free = fi;
        else
            n->done_head = fi;
        n->done_tail = fi;
        n->stats.completed++;
        return SIM_NET_OK;
    }
    f->state = FLOW_ACTIVE;
    f->finish_ns = UINT64_MAX;
    link_add(n, fi);
    heap_insert(n, fi);
    n->active++;
    add_seeds(n, f); /* rates recomputed lazily, see flush() */
    return SIM_NET_OK;
}

int sim_net_send(sim_net *n, uint32_t src, uint32_t dst, uint64_t bytes, uint64_t tag,
                 uint64_t now_ns, sim_net_delivery *out)
{
    if (src >= n->agents || dst >= n->agents)
        return SIM_NET_EINVAL;
    int rc = sim_net_advance(n, now_ns);
    if (rc)
        return rc;
    memset(out, 0, sizeof *out);
    out->src = src;
    out->dst = dst;
    out->bytes = bytes;
    out->tag = tag;
    out->start_ns = now_ns;
    n->stats.sent++;
    n->stats.bytes_sent += bytes;
    if (n->group && n->group[src] != n->group[dst]) {
        n->stats.partitioned++;
        out->lost_partition = 1;
        return SIM_NET_LOST;
    }
    if (n->loss > 0 && model_rng_uniform_double(&n->loss_rng) < n->loss) {
        n->stats.lost++;
        return SIM_NET_LOST;
    }
    if (bytes == 0 || (n->cap[2 * src] <= 0 && n->cap[2 * dst + 1] <= 0)) {
        n->stats.fast++;
        out->done_ns = now_ns;
        out->deliver_ns = now_ns + sim_net_latency_ns(n, src, dst);
        return SIM_NET_DELIVER;
    }
    rc = sim_net_start_flow(n, src, dst, bytes, tag, now_ns, &out->id);
    if (rc) {
        n->stats.sent--;
        n->stats.bytes_sent -= bytes;
        return rc;
    }
    return SIM_NET_QUEUED;
}

uint64_t sim_net_next_completion(sim_net *n)
{
    flush(n);
    return n->heap_len ? n->flows[n->heap[0]].finish_ns : UINT64_MAX;
}

int sim_net_advance(sim_net *n, uint64_t now_ns)
{
    if (now_ns < n->now_ns)
        return SIM_NET_ETIME;
    /* changes pending at this very instant stay pending (batched) */
    if (now_ns == n->now_ns && n->nseeds)
        return SIM_NET_OK;
    flush(n);
    /* complete flows one finish time at a time, recomputing at that time, so
     * the result does not depend on how coarsely the caller steps; the last
     * recomputation, at now, is left pending for the caller's next changes */
    while (n->heap_len && n->flows[n->heap[0]].finish_ns <= now_ns) {
        uint64_t t = n->flows[n->heap[0]].finish_ns;
        n->now_ns = t;
        while (n->heap_len && n->flows[n->heap[0]].finish_ns == t) {
            uint32_t fi = n->heap[0];
            flow *f = &n->flows[fi];
            heap_remove(n, fi);
            link_remove(n, fi);
            add_seeds(n, f);
            f->state = FLOW_DONE;
            f->done_ns = t;
            f->next_free = NIL;
            if (n->done_tail != NIL)
                n->flows[n->done_tail].next_free = fi;
            else
                n->done_head = fi;
            n->done_tail = fi;
            n->active--;
            n->stats.completed++;
        }
        if (t == now_ns)
            break;
        recompute(n, t, 0);
    }
    n->now_ns = now_ns;
    return SIM_NET_OK;
}

int sim_net_pop(sim_net *n, sim_net_delivery *out)
{
    uint32_t fi = n->done_head;
    if (fi == NIL)
        return 0;
    flow *f = &n->flows[fi];
    n->done_head = f->next_free;
    if (n->done_head == NIL)
        n->done_tail = NIL;
    memset(out, 0, sizeof *out);
    out->id = flow_id(n, fi);
    out->src = f->src;
    out->dst = f->dst;
    out->bytes = f->bytes;
    out->tag = f->tag;
    out->start_ns = f->start_ns;
    out->done_ns = f->done_ns;
    out->deliver_ns = f->done_ns + sim_net_latency_ns(n, f->src, f->dst);
    slot_free(n, fi);
    return 1;
}

static void cancel_slot(sim_net *n, uint32_t fi)
{
    flow *f = &n->flows[fi];
    heap_remove(n, fi);
    link_remove(n, fi);
    add_seeds(n, f);
    n->active--;
    n->stats.cancelled++;
    slot_free(n, fi);
}

int sim_net_cancel(sim_net *n, uint64_t id, uint64_t now_ns)
{
    uint32_t fi;
    if (flow_lookup(n, id, &fi) || n->flows[fi].state != FLOW_ACTIVE)
        return SIM_NET_ENOFLOW;
    if (now_ns < n->now_ns)
        return SIM_NET_ETIME;
    int rc = sim_net_advance(n, now_ns);
    if (rc)
        return rc;
    if (n->flows[fi].state != FLOW_ACTIVE) /* it finished by now */
        return SIM_NET_ENOFLOW;
    cancel_slot(n, fi);
    return SIM_NET_OK;
}

int sim_net_cancel_agent(sim_net *n, uint32_t agent, uint64_t now_ns)
{
    if (agent >= n->agents)
        return SIM_NET_EINVAL;
    int rc = sim_net_advance(n, now_ns);
    if (rc)
        return rc;
    int cancelled = 0;
    for (int side = 0; side < 2; side++) {
        uint32_t l = 2 * agent + (uint32_t)side;
        while (n->head[l] != NIL) {
            cancel_slot(n, n->head[l]);
            cancelled++;
        }
    }
    return cancelled;
}

double sim_net_flow_rate(sim_net *n, uint64_t id)
{
    flush(n);
    uint32_t fi;
    if (flow_lookup(n, id, &fi) || n->flows[fi].state != FLOW_ACTIVE)
        return -1;
    return n->flows[fi].rate_bps;
}

size_t sim_net_flows_active(const sim_net *n)
{
    return n->active;
}

void sim_net_get_stats(const sim_net *n, sim_net_stats *out)
{
    *out = n->stats;
}

/* ---- matrix file ---- */

int sim_net_load_matrix(const char *path, uint32_t agents, double **out_ms, char *err,
                        size_t errlen)
{
    *out_ms = NULL;
    if (agents == 0 || agents > SIM_NET_MATRIX_AGENTS_MAX) {
        snprintf(err, errlen, "%s: a latency matrix supports 1..%u agents, not %u", path,
                 SIM_NET_MATRIX_AGENTS_MAX, agents);
        return SIM_NET_EINVAL;
    }
    FILE *fp = fopen(path, "r");
    if (!fp) {
        snprintf(err, errlen, "%s: cannot open latency matrix: %s", path, strerror(errno));
        return SIM_NET_EIO;
    }
    double *m = malloc((size_t)agents * agents * sizeof *m);
    if (!m) {
        fclose(fp);
        snprintf(err, errlen, "%s: out of memory for a %u x %u matrix", path, agents, agents);
        return SIM_NET_ENOMEM;
    }
    /* a row is at most agents numbers of ~24 characters; read by character
     * so no line-length limit applies */
    uint32_t row = 0, col = 0, line = 1;
    int rc = SIM_NET_OK;
    char tok[64];
    size_t tl = 0;
    int comment = 0;
    for (;;) {
        int c = fgetc(fp);
        int sep = c == EOF || c == '\n' || c == ' ' || c == '\t' || c == ',' || c == '\r';
        if (!comment && c == '#') {
            comment = 1;
            sep = 1;
        }
        if (comment && !(c == '\n' || c == EOF))
            sep = 1, c = ' ';
        if (!sep && !comment) {
            if (tl + 1 >= sizeof tok) {
                snprintf(err, errlen, "%s:%u: number too long", path, line);
                rc = SIM_NET_EPARSE;
                break;
            }
            tok[tl++] = (char)c;
            continue;
        }
        if (tl) {
            tok[tl] = 0;
            tl = 0;
            char *end;
            double v = strtod(tok, &end);
            if (*end || !(v >= 0 && v <= SIM_NET_LATENCY_MS_MAX)) {
                snprintf(err, errlen, "%s:%u: '%s' is not a latency in ms (a number in [0, %.0f])",
                         path, line, tok, SIM_NET_LATENCY_MS_MAX);
                rc = SIM_NET_EPARSE;
                break;
            }
            if (row >= agents || col >= agents) {
                snprintf(err, errlen, "%s:%u: more than %u %s", path, line, agents,
                         row >= agents ? "rows" : "values in a row");
                rc = SIM_NET_EPARSE;
                break;
            }
            m[(size_t)row * agents + col++] = v;
        }
        if (c == '\n' || c == EOF) {
            comment = 0;
            if (col != 0) {
                if (col != agents) {
                    snprintf(err, errlen, "%s:%u: row %u has %u values, expected %u", path, line,
                             row + 1, col, agents);
                    rc = SIM_NET_EPARSE;
                    break;
                }
                row++;
                col = 0;
            }
            line++;
        }
        if (c == EOF)
            break;
    }
    if (ferror(fp) && rc == SIM_NET_OK) {
        snprintf(err, errlen, "%s: read error", path);
        rc = SIM_NET_EIO;
    }
    fclose(fp);
    if (rc == SIM_NET_OK && row != agents) {
        snprintf(err, errlen, "%s: %u rows, expected %u (one per agent)", path, row, agents);
        rc = SIM_NET_EPARSE;
    }
    if (rc) {
        free(m);
        return rc;
    }
    *out_ms = m;
    return SIM_NET_OK;
}
