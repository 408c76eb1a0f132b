/* sim/engine — see engine.h for the model and the contracts. */
#include "sim/engine.h"

#include "sim/arena.h"

#include <assert.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* EV_DELIVER: a frame reached its receiver (a = 0) or, with an event-loop
 * cost, its receiver's loop is done with it (a = 1). EV_SEND: the sender's
 * loop is done with a frame (b = the sender's incarnation): it enters its
 * link. */
enum { EV_DELIVER = 1, EV_TICK = 2, EV_SEND = 3 };

_Static_assert(EV_TICK < SIM_EV_USER, "engine events below the host's");

/* The clock is in nanoseconds; the protocol objects and the host see whole
 * microseconds (gossip_time_us, floor). A time in microseconds at or above
 * this converts to "never" (UINT64_MAX ns) instead of overflowing. */
#define US_NEVER_FROM (UINT64_MAX / 1000u)

static inline uint64_t ns_of_us(gossip_time_us us)
{
    return us >= US_NEVER_FROM ? UINT64_MAX : us * 1000u;
}

static inline gossip_time_us us_of_ns(uint64_t ns)
{
    return ns / 1000u;
}

typedef struct frame {
    /* A large frame: every live one, freed at the end. A pooled one: the
     * next free frame of its class while free. */
    struct frame *gprev, *gnext;
    struct frame *lprev, *lnext; /* rounds mode: older/newer pending frame on the same link */
    uint32_t from, to;
    uint32_t pidx; /* rounds mode: index in the pending array */
    uint32_t len;
    uint32_t cls;     /* pool class (size FRAME_ALIGN x cls), 0 = malloc'd alone */
    uint64_t extra;   /* timed mode: host delay added at delivery, ns */
    uint64_t from_id; /* the sender's node id (its agent is not touched at delivery) */
    uint8_t bytes[];
} frame;

/* Frames up to FRAME_POOL_BYTES come from slabs, one free list per size
 * class, and go back to it when delivered or lost: a round of 10^6 agents
 * sends 2 x 10^6 small frames, and malloc, free and a list of every live
 * frame (two random neighbours touched per free) were a sixth of its time.
 * Larger frames (a model's chunks in timed mode) are malloc'd one by one. */
#define FRAME_ALIGN      64u
#define FRAME_POOL_BYTES 2048u
#define FRAME_CLASSES    (FRAME_POOL_BYTES / FRAME_ALIGN)
#define FRAME_SLAB_BYTES ((size_t)2 << 20) /* one huge page (sim/arena) */

typedef struct frame_slab {
    struct frame_slab *next;
    size_t used;
    _Alignas(FRAME_ALIGN) uint8_t mem[];
} frame_slab;

/* One directed link of a sender. Rounds mode: f is the newest pending
 * frame. Timed mode: a link is one FIFO stream (as a TCP connection): one
 * frame at a time is in transfer (busy), the others wait in head..f (linked
 * by lnext) and start when the one before has left the links. */
typedef struct link_tail {
    uint32_t to;
    uint32_t busy;
    frame *f;
    uint64_t last_ns; /* timed mode: latest network delivery on the link (FIFO) */
    frame *head;
} link_tail;

/* Rounds mode: a sender's first links of a pending set's epoch keep their
 * newest frame in the agent itself (line 1), the others in its `tails`
 * table. A pending frame's sender is usually the agent just delivered to,
 * whose lines 0 and 1 are in the cache already (an aligned 128-byte
 * pair), while its table was a cache miss of its own: 7% of a profile at
 * 10^5 agents in that lookup (docs/SIMULATOR.md, "Scale"). */
#define NEAR_TAILS 4u

/* One agent, 64-byte aligned, four cache lines: what a delivery and a send
 * touch first (lines 0 and 1), the env and the generator the protocol
 * object draws from (lines 2 and 3). At 10^5 agents and more every
 * delivery lands on a random agent and each line is a cache miss
 * (docs/SIMULATOR.md, "Scale"). */
typedef struct agent {
    /* line 0: delivery and send */
    uint64_t id;
    const sim_node_ops *ops;
    void *node;
    uint64_t tails_epoch; /* rounds mode: the pending set's epoch of the tails */
    uint64_t bytes_sent, bytes_recv;
    uint32_t nnear;  /* rounds mode: near tails in use (the first links) */
    uint32_t ntails; /* tails in use (rounds mode: the links after the near ones) */
    uint8_t alive;
    /* line 1: rounds mode, the near tails: link near_to[k]'s newest frame */
    _Alignas(64) frame *near_f[NEAR_TAILS];
    uint32_t near_to[NEAR_TAILS];
    link_tail *tails;
    uint32_t captails;
    uint32_t tixcap;
    /* line 2 */
    _Alignas(64) gossip_env env;
    uint32_t inc;  /* incarnation: stale tick (and host) events are ignored */
    uint32_t *tix; /* hash index of tails by `to` (slot = tail index + 1), or NULL */
    /* line 3 */
    _Alignas(64) model_rng rng;
    gossip_time_us tick_at;
    uint64_t loop_free_ns; /* timed mode: when its event loop is done with the frames it has */
} agent;

_Static_assert(sizeof(agent) == 256, "an agent is four cache lines");

typedef struct id_entry {
    uint64_t id;
    uint32_t index;
} id_entry;

struct sim_engine {
    sim_engine_config cfg;
    uint32_t n;
    int timed;
    agent *a;
    id_entry *by_id; /* sorted by id when ids_sorted, nids entries */
    uint32_t nids;
    uint32_t nidentity; /* agents whose id is index + 1 */
    int ids_sorted;
    sim_evq q;
    sim_net *net;
    model_rng order;
    uint64_t now; /* ns */
    uint64_t hash;
    frame *live;                           /* large frames */
    uint64_t pend_epoch;                   /* rounds mode: times the pending set emptied */
    frame *free_frames[FRAME_CLASSES + 1]; /* per class (1..FRAME_CLASSES) */
    frame_slab *slabs;
    sim_arena *arena; /* the agents' env memory (cfg.arena), or NULL: malloc */
    frame **pending;
    size_t npending, cappending;
    uint32_t *group; /* rounds mode partition groups, NULL = none */
    double loss_p;
    sim_engine_stats stats;
    int loop_cost; /* timed mode: frames cost their agents' loops time (see engine.h) */
    int failed;
    char err[256];
};

/* ---- errors and hash ------------------------------------------------------ */

const char *sim_engine_strerror(int err)
{
    switch (err) {
    case SIM_ENGINE_OK:
        return "ok";
    case SIM_ENGINE_EINVAL:
        return "invalid argument";
    case SIM_ENGINE_ENOMEM:
        return "out of memory";
    case SIM_ENGINE_EFULL:
        return "event queue or network full";
    default:
        return "unknown error";
    }
}

static void fail(sim_engine *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(sim_engine *e, int code, const char *fmt, ...)
{
    if (e->failed)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->err, sizeof e->err, fmt, ap);
    va_end(ap);
    e->failed = code;
}

int sim_engine_failed(const sim_engine *e)
{
    return e->failed;
}

const char *sim_engine_error(const sim_engine *e)
{
    return e->err;
}

static inline uint64_t hmix(uint64_t h, uint64_t v)
{
    h ^= v;
    h *= 0x9E3779B97F4A7C15ULL;
    return h ^ (h >> 29);
}

/* The little-endian word at p (a plain load on a little-endian host: the
 * byte loop cost a sixth of a delivery in the 10^5-agent profile). */
static inline uint64_t le64(const uint8_t *p)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t w;
    memcpy(&w, p, sizeof w);
    return w;
#else
    uint64_t w = 0;
    for (int k = 0; k < 8; k++)
        w |= (uint64_t)p[k] << (8 * k);
    return w;
#endif
}

static uint64_t hbytes(uint64_t h, const uint8_t *p, size_t n)
{
    h = hmix(h, n);
    while (n >= 8) {
        uint64_t w = le64(p);
        h = hmix(h, w);
        p += 8;
        n -= 8;
    }
    uint64_t w = 0;
    for (size_t k = 0; k < n; k++)
        w |= (uint64_t)p[k] << (8 * k);
    return hmix(h, w);
}

void sim_engine_trace(sim_engine *e, uint64_t v)
{
    if (e->cfg.hooks.trace)
        e->cfg.hooks.trace(e->cfg.hooks.ctx, us_of_ns(e->now), 0, 0, NULL, 0, v);
    e->hash = hmix(e->hash, v);
}

uint64_t sim_engine_trace_hash(const sim_engine *e)
{
    return e->hash;
}

void sim_engine_count(sim_engine *e, uint64_t n)
{
    e->stats.events += n;
}

/* ---- env ------------------------------------------------------------------ */

static void *env_alloc(void *ctx, size_t size)
{
    (void)ctx;
    return malloc(size ? size : 1);
}

static void env_free(void *ctx, void *p)
{
    (void)ctx;
    free(p);
}

static void *env_arena_alloc(void *ctx, size_t size)
{
    return sim_arena_alloc(ctx, size);
}

static void env_arena_free(void *ctx, void *p)
{
    sim_arena_free(ctx, p);
}

/* ---- create and destroy ----------------------------------------------------- */

int sim_engine_create(sim_engine **out, const sim_engine_config *cfg)
{
    *out = NULL;
    if (!cfg || cfg->agents == 0 || cfg->agents > SIM_ENGINE_AGENTS_MAX ||
        !(cfg->loss >= 0 && cfg->loss <= 1) || (cfg->net && cfg->net->agents != cfg->agents) ||
        !(cfg->loop_byte_ns >= 0 && cfg->loop_byte_ns <= SIM_ENGINE_LOOP_BYTE_NS_MAX) ||
        cfg->loop_frame_ns > SIM_ENGINE_LOOP_FRAME_NS_MAX)
        return SIM_ENGINE_EINVAL;
    sim_engine *e = calloc(1, sizeof *e);
    if (!e)
        return SIM_ENGINE_ENOMEM;
    e->cfg = *cfg;
    e->cfg.net = NULL;
    e->n = cfg->agents;
    e->timed = cfg->mode == SIM_MODE_TIMED;
    e->loop_cost = e->timed && (cfg->loop_frame_ns > 0 || cfg->loop_byte_ns > 0);
    e->loss_p = cfg->loss;
    e->hash = 0xcbf29ce484222325ULL ^ cfg->seed;
    model_rng_seed(&e->order, cfg->seed, cfg->order_stream);
    size_t emax = cfg->events_max ? cfg->events_max : SIM_ENGINE_EVENTS_DEFAULT;
    e->a = sim_big_alloc(e->n * sizeof *e->a); /* zeroed, 64-byte aligned */
    e->by_id = calloc(e->n, sizeof *e->by_id);
    int rc = SIM_ENGINE_ENOMEM;
    if (!e->a || !e->by_id || sim_evq_init(&e->q, emax < 1024 ? emax : 1024, emax) != 0)
        goto fail;
    if (cfg->arena && !(e->arena = sim_arena_create()))
        goto fail;
    if (e->timed) {
        sim_net_config nc;
        if (cfg->net) {
            nc = *cfg->net;
        } else {
            nc = (sim_net_config){.agents = e->n, .seed = cfg->seed, .loss = cfg->loss};
        }
        int nrc = sim_net_create(&e->net, &nc);
        if (nrc) {
            rc = nrc == SIM_NET_ENOMEM ? SIM_ENGINE_ENOMEM : SIM_ENGINE_EINVAL;
            goto fail;
        }
    }
    for (uint32_t i = 0; i < e->n; i++) {
        agent *g = &e->a[i];
        model_rng_seed(&g->rng, cfg->seed, i);
        g->env = e->arena ? (gossip_env){env_arena_alloc, env_arena_free, model_rng_callback,
                                         e->arena, &g->rng}
                          : (gossip_env){env_alloc, env_free, model_rng_callback, NULL, &g->rng};
        g->tick_at = GOSSIP_TIME_NEVER;
    }
    e->ids_sorted = 1;
    *out = e;
    return SIM_ENGINE_OK;
fail:
    sim_engine_destroy(e);
    return rc;
}

void sim_engine_destroy(sim_engine *e)
{
    if (!e)
        return;
    while (e->live) {
        frame *f = e->live;
        e->live = f->gnext;
        free(f);
    }
    while (e->slabs) {
        frame_slab *sl = e->slabs;
        e->slabs = sl->next;
        sim_big_free(sl);
    }
    sim_evq_free(&e->q);
    if (e->a)
        for (uint32_t i = 0; i < e->n; i++) {
            free(e->a[i].tails);
            free(e->a[i].tix);
        }
    sim_big_free(e->a);
    free(e->by_id);
    sim_big_free(e->pending);
    sim_arena_destroy(e->arena);
    free(e->group);
    sim_net_destroy(e->net);
    free(e);
}

/* ---- agents ----------------------------------------------------------------- */

static int cmp_id(const void *a, const void *b)
{
    uint64_t x = ((const id_entry *)a)->id, y = ((const id_entry *)b)->id;
    return x < y ? -1 : x > y;
}

int sim_engine_set_id(sim_engine *e, uint32_t i, uint64_t id)
{
    if (i >= e->n || id == 0)
        return SIM_ENGINE_EINVAL;
    if (e->a[i].id == id)
        return SIM_ENGINE_OK;
    if (e->a[i].id != 0)
        return SIM_ENGINE_EINVAL; /* an agent keeps its id */
    /* The common case, id = index + 1, needs no table entry search. */
    if (!e->ids_sorted)
        qsort(e->by_id, e->nids, sizeof *e->by_id, cmp_id);
    e->ids_sorted = 1;
    uint32_t lo = 0, hi = e->nids;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (e->by_id[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < e->nids && e->by_id[lo].id == id)
        return SIM_ENGINE_EINVAL;
    e->a[i].id = id;
    if (id == (uint64_t)i + 1)
        e->nidentity++;
    e->by_id[e->nids++] = (id_entry){id, i};
    e->ids_sorted = e->nids == 1 || e->by_id[e->nids - 2].id < id;
    return SIM_ENGINE_OK;
}

void sim_engine_set_node(sim_engine *e, uint32_t i, const sim_node_ops *ops, void *node)
{
    assert(i < e->n);
    e->a[i].ops = node ? ops : NULL;
    e->a[i].node = ops ? node : NULL;
}

void *sim_engine_node(const sim_engine *e, uint32_t i)
{
    return i < e->n ? e->a[i].node : NULL;
}

void sim_engine_up(sim_engine *e, uint32_t i)
{
    assert(i < e->n);
    e->a[i].alive = 1;
    e->a[i].tick_at = GOSSIP_TIME_NEVER;
    e->a[i].inc++;
}

void sim_engine_down(sim_engine *e, uint32_t i)
{
    assert(i < e->n);
    e->a[i].alive = 0;
    e->a[i].inc++;
}

int sim_engine_alive(const sim_engine *e, uint32_t i)
{
    return i < e->n && e->a[i].alive;
}

uint32_t sim_engine_incarnation(const sim_engine *e, uint32_t i)
{
    return i < e->n ? e->a[i].inc : 0;
}

uint64_t sim_engine_id(const sim_engine *e, uint32_t i)
{
    return i < e->n ? e->a[i].id : 0;
}

uint32_t sim_engine_agents(const sim_engine *e)
{
    return e->n;
}

const gossip_env *sim_engine_env(sim_engine *e, uint32_t i)
{
    return i < e->n ? &e->a[i].env : NULL;
}

model_rng *sim_engine_rng(sim_engine *e, uint32_t i)
{
    return i < e->n ? &e->a[i].rng : NULL;
}

gossip_time_us sim_engine_now(const sim_engine *e)
{
    return us_of_ns(e->now);
}

uint64_t sim_engine_now_ns(const sim_engine *e)
{
    return e->now;
}

void sim_engine_set_now(sim_engine *e, gossip_time_us now)
{
    assert(ns_of_us(now) >= e->now);
    e->now = ns_of_us(now);
}

sim_mode sim_engine_mode(const sim_engine *e)
{
    return e->cfg.mode;
}

sim_net *sim_engine_net(sim_engine *e)
{
    return e->net;
}

uint64_t sim_engine_bytes_sent(const sim_engine *e, uint32_t i)
{
    return i < e->n ? e->a[i].bytes_sent : 0;
}

uint64_t sim_engine_bytes_recv(const sim_engine *e, uint32_t i)
{
    return i < e->n ? e->a[i].bytes_recv : 0;
}

const sim_engine_stats *sim_engine_get_stats(const sim_engine *e)
{
    return &e->stats;
}

gossip_time_us sim_engine_deadline(const sim_engine *e, uint32_t i)
{
    const agent *g = &e->a[i];
    return g->ops ? g->ops->deadline(g->node) : GOSSIP_TIME_NEVER;
}

size_t sim_engine_pending(const sim_engine *e)
{
    return e->npending;
}

/* Index of the agent a frame goes to, or UINT32_MAX. */
static uint32_t resolve(const sim_engine *e, const gossip_send *s)
{
    if (s->dest == 0) {
        if (s->dest_addr && strncmp(s->dest_addr, "sim://", 6) == 0) {
            char *end = NULL;
            unsigned long v = strtoul(s->dest_addr + 6, &end, 10);
            if (end && end != s->dest_addr + 6 && *end == '\0' && v < e->n)
                return (uint32_t)v;
        }
        return UINT32_MAX;
    }
    /* Every agent's id is its index + 1 (ids are never changed): the answer
     * needs no look at the receiver, whose agent is a cache miss at scale. */
    if (e->nidentity == e->n)
        return s->dest - 1 < e->n ? (uint32_t)(s->dest - 1) : UINT32_MAX;
    if (s->dest - 1 < e->n && e->a[s->dest - 1].id == s->dest) /* id = index + 1 */
        return (uint32_t)(s->dest - 1);
    if (!e->ids_sorted) {
        qsort(((sim_engine *)e)->by_id, e->nids, sizeof *e->by_id, cmp_id);
        ((sim_engine *)e)->ids_sorted = 1;
    }
    uint32_t lo = 0, hi = e->nids;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (e->by_id[mid].id < s->dest)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < e->nids && e->by_id[lo].id == s->dest ? e->by_id[lo].index : UINT32_MAX;
}

/* ---- frames and links ------------------------------------------------------- */

/* A frame for len bytes (its fields other than cls, gprev and gnext unset),
 * or NULL when out of memory. */
static frame *frame_alloc(sim_engine *e, size_t len)
{
    size_t need = sizeof(frame) + len;
    if (need <= FRAME_POOL_BYTES) {
        uint32_t cls = (uint32_t)((need + FRAME_ALIGN - 1) / FRAME_ALIGN);
        frame *f = e->free_frames[cls];
        if (f) {
            e->free_frames[cls] = f->gnext;
            return f;
        }
        size_t bytes = (size_t)cls * FRAME_ALIGN;
        if (!e->slabs || e->slabs->used + bytes > FRAME_SLAB_BYTES) {
            frame_slab *sl = sim_big_alloc(sizeof *sl + FRAME_SLAB_BYTES);
            if (!sl)
                return NULL;
            sl->next = e->slabs;
            sl->used = 0;
            e->slabs = sl;
        }
        f = (frame *)(e->slabs->mem + e->slabs->used);
        e->slabs->used += bytes;
        f->cls = cls;
        return f;
    }
    frame *f = malloc(need);
    if (!f)
        return NULL;
    f->cls = 0;
    f->gprev = NULL;
    f->gnext = e->live;
    if (e->live)
        e->live->gprev = f;
    e->live = f;
    return f;
}

static void frame_free(sim_engine *e, frame *f)
{
    if (f->cls) {
        f->gnext = e->free_frames[f->cls];
        e->free_frames[f->cls] = f;
        return;
    }
    if (f->gprev)
        f->gprev->gnext = f->gnext;
    else
        e->live = f->gnext;
    if (f->gnext)
        f->gnext->gprev = f->gprev;
    free(f);
}

static void lose(sim_engine *e, uint64_t *cause)
{
    e->stats.lost++;
    (*cause)++;
}

/* Past this many links a sender finds its link tails through a hash index
 * (timed mode with random peers: every agent ends up with a link to most
 * others, and a linear scan per frame was a quarter of the run time). */
#define TAILS_INDEX_MIN 16u

static uint32_t tail_hash(uint32_t to, uint32_t cap)
{
    return (uint32_t)(((uint64_t)to * 0x9E3779B97F4A7C15ULL) >> 32) & (cap - 1);
}

/* (Re)build the index for the current tails; 0 or -1 (out of memory). */
static int tails_index(agent *s)
{
    uint32_t cap = 64;
    while (cap < 2 * s->captails)
        cap *= 2;
    uint32_t *ix = calloc(cap, sizeof *ix);
    if (!ix)
        return -1;
    for (uint32_t k = 0; k < s->ntails; k++) {
        uint32_t h = tail_hash(s->tails[k].to, cap);
        while (ix[h])
            h = (h + 1) & (cap - 1);
        ix[h] = k + 1;
    }
    free(s->tix);
    s->tix = ix;
    s->tixcap = cap;
    return 0;
}

/* The link from -> to of the sender's table, created when missing (NULL
 * when out of memory). */
static link_tail *link_get(sim_engine *e, uint32_t from, uint32_t to)
{
    agent *s = &e->a[from];
    if (s->tix) {
        for (uint32_t h = tail_hash(to, s->tixcap); s->tix[h]; h = (h + 1) & (s->tixcap - 1))
            if (s->tails[s->tix[h] - 1].to == to)
                return &s->tails[s->tix[h] - 1];
    } else {
        for (uint32_t k = 0; k < s->ntails; k++)
            if (s->tails[k].to == to)
                return &s->tails[k];
    }
    if (s->ntails == s->captails) {
        uint32_t nc = s->captails ? 2 * s->captails : 4;
        link_tail *nt = realloc(s->tails, nc * sizeof *nt);
        if (!nt)
            return NULL;
        s->tails = nt;
        s->captails = nc;
    }
    link_tail *t = &s->tails[s->ntails++];
    *t = (link_tail){.to = to};
    if (s->ntails >= TAILS_INDEX_MIN) {
        if (!s->tix || 2 * s->captails > s->tixcap) {
            if (tails_index(s) != 0)
                return NULL;
        } else {
            uint32_t h = tail_hash(to, s->tixcap);
            while (s->tix[h])
                h = (h + 1) & (s->tixcap - 1);
            s->tix[h] = s->ntails;
        }
    }
    return t;
}

/* Rounds mode: the tails of a sender whose tails were written in an
 * earlier epoch of the pending set (every link emptied since) start again. */
static void tails_fresh(sim_engine *e, agent *s)
{
    if (s->tails_epoch == e->pend_epoch)
        return;
    s->nnear = 0;
    s->ntails = 0;
    free(s->tix);
    s->tix = NULL;
    s->tails_epoch = e->pend_epoch;
}

/* Rounds mode: where link from -> to keeps its newest pending frame (a
 * near tail, else the sender's table), created when missing; NULL when out
 * of memory. */
static frame **newest_slot(sim_engine *e, uint32_t from, uint32_t to)
{
    agent *s = &e->a[from];
    tails_fresh(e, s);
    for (uint32_t k = 0; k < s->nnear; k++)
        if (s->near_to[k] == to)
            return &s->near_f[k];
    if (s->nnear < NEAR_TAILS) {
        s->near_to[s->nnear] = to;
        s->near_f[s->nnear] = NULL;
        return &s->near_f[s->nnear++];
    }
    link_tail *t = link_get(e, from, to);
    return t ? &t->f : NULL;
}

static int pending_push(sim_engine *e, frame *f)
{
    if (e->npending == e->cappending) {
        size_t nc = e->cappending ? 2 * e->cappending : 1024;
        frame **p = sim_big_alloc(nc * sizeof *p);
        if (!p)
            return -1;
        if (e->npending)
            memcpy(p, e->pending, e->npending * sizeof *p);
        sim_big_free(e->pending);
        e->pending = p;
        e->cappending = nc;
    }
    frame **slot = newest_slot(e, f->from, f->to);
    if (!slot)
        return -1;
    /* The link's newest frame, unless it was delivered since (then, FIFO,
     * so were the older ones): tails are not updated at delivery, which
     * would touch the sender's agent once more per frame. A slot always
     * names the last frame pushed on its link (or NULL), so memory there
     * that holds a pending frame of the same link holds that frame; a
     * delivered frame's slab memory stays mapped (tail_forget clears the
     * slots of the malloc'd ones). */
    frame *newest = *slot;
    if (newest && !(newest->pidx < e->npending && e->pending[newest->pidx] == newest &&
                    newest->from == f->from && newest->to == f->to))
        newest = NULL;
    f->lprev = newest;
    f->lnext = NULL;
    if (newest)
        newest->lnext = f;
    *slot = f;
    f->pidx = (uint32_t)e->npending;
    e->pending[e->npending++] = f;
    return 0;
}

/* A malloc'd frame (above FRAME_POOL_BYTES: shard chunks, models) is freed
 * once delivered, so its link's tail must not go on pointing at it:
 * pending_push reads the newest frame to tell whether it is stale, which
 * slab frames survive (their memory stays, a reuse is a pending frame of
 * another link or the link's newest) and freed ones do not. Only these large frames pay the lookup.
 */
static void tail_forget(sim_engine *e, const frame *f)
{
    agent *s = &e->a[f->from];
    if (s->tails_epoch != e->pend_epoch)
        return;
    for (uint32_t k = 0; k < s->nnear; k++)
        if (s->near_to[k] == f->to) {
            if (s->near_f[k] == f)
                s->near_f[k] = NULL;
            return;
        }
    for (uint32_t k = 0; k < s->ntails; k++)
        if (s->tails[k].to == f->to) {
            if (s->tails[k].f == f)
                s->tails[k].f = NULL;
            return;
        }
}

/* Remove f (the oldest frame of its link) from the pending set. */
static void pending_remove(sim_engine *e, frame *f)
{
    if (!f->cls)
        tail_forget(e, f);
    frame *last = e->pending[--e->npending];
    e->pending[f->pidx] = last;
    last->pidx = f->pidx;
    if (f->lnext) /* else the link's tail goes stale (see tail_forget) */
        f->lnext->lprev = NULL;
}

/* Queue an event at t_ns (never before now: the clock never goes back). */
static void push(sim_engine *e, uint64_t t_ns, uint32_t kind, uint32_t agent_i, uint64_t a,
                 uint64_t b, void *ptr)
{
    sim_event ev = {.time_ns = t_ns > e->now ? t_ns : e->now,
                    .kind = kind,
                    .agent = agent_i,
                    .a = a,
                    .b = b,
                    .ptr = ptr};
    if (sim_evq_push(&e->q, &ev) != 0)
        fail(e, SIM_ENGINE_EFULL, "event queue full at %zu events (t = %.9f s)", sim_evq_len(&e->q),
             (double)e->now / 1e9);
}

void sim_engine_schedule(sim_engine *e, gossip_time_us t, uint32_t kind, uint32_t agent_i,
                         uint64_t a, uint64_t b, void *ptr)
{
    assert(kind >= SIM_EV_USER);
    push(e, ns_of_us(t), kind, agent_i, a, b, ptr);
}

void sim_engine_schedule_ns(sim_engine *e, uint64_t t_ns, uint32_t kind, uint32_t agent_i,
                            uint64_t a, uint64_t b, void *ptr)
{
    assert(kind >= SIM_EV_USER);
    push(e, t_ns, kind, agent_i, a, b, ptr);
}

/* A link delivers in order (one TCP connection): a frame is not handed
 * over before the one sent ahead of it on the link, even when the latency
 * fell in between (a latency trace). The host's extra delay (jitter,
 * reordering faults) is added after, so it may still reorder. */
static uint64_t fifo(link_tail *t, uint64_t deliver_ns)
{
    if (deliver_ns < t->last_ns)
        deliver_ns = t->last_ns;
    t->last_ns = deliver_ns;
    return deliver_ns;
}

/* Timed mode: put frame f on the network at time `at` (ns); the link is
 * busy while a flow carries it. */
static void link_send(sim_engine *e, link_tail *t, frame *f, uint64_t at)
{
    sim_net_delivery d;
    int fate = sim_net_send(e->net, f->from, f->to, f->len, (uint64_t)(uintptr_t)f, at, &d);
    if (fate == SIM_NET_DELIVER) {
        push(e, fifo(t, d.deliver_ns) + f->extra, EV_DELIVER, f->to, 0, 0, f);
    } else if (fate == SIM_NET_QUEUED) {
        t->busy = 1;
    } else if (fate == SIM_NET_LOST) {
        lose(e, &e->stats.dropped);
        frame_free(e, f);
    } else {
        frame_free(e, f);
        fail(e, SIM_ENGINE_EFULL, "network: %s", sim_net_strerror(fate));
    }
}

/* Timed mode: the flow of a frame from -> to left the links at `at` (ns): start
 * the next frame waiting on that link (frames of a crashed sender are
 * dropped). */
static void link_done(sim_engine *e, uint32_t from, uint32_t to, uint64_t at)
{
    link_tail *t = link_get(e, from, to);
    if (!t) {
        fail(e, SIM_ENGINE_ENOMEM, "out of memory (links)");
        return;
    }
    t->busy = 0;
    while (t->head && !t->busy && !e->failed) {
        frame *f = t->head;
        t->head = f->lnext;
        if (!t->head)
            t->f = NULL;
        if (!e->a[from].alive) {
            lose(e, &e->stats.dead);
            frame_free(e, f);
            continue;
        }
        link_send(e, t, f, at);
    }
}

/* Timed mode: frame f (its sender's loop done with it) enters its link
 * now, or waits behind the frame in transfer on it. Returns 0, or -1 when
 * the engine failed. */
static int link_enqueue(sim_engine *e, frame *f)
{
    link_tail *t = link_get(e, f->from, f->to);
    if (!t) {
        frame_free(e, f);
        fail(e, SIM_ENGINE_ENOMEM, "out of memory (links)");
        return -1;
    }
    f->lnext = NULL;
    if (t->busy) {
        if (t->head)
            t->f->lnext = f;
        else
            t->head = f;
        t->f = f;
        return 0;
    }
    link_send(e, t, f, e->now);
    return e->failed ? -1 : 0;
}

/* Agent i's event loop takes a frame of len bytes now: it starts once the
 * loop is done with the frames before it. Returns when the loop is done
 * with this one (ns). */
uint64_t sim_engine_loop_take(sim_engine *e, uint32_t i, uint32_t len)
{
    agent *g = &e->a[i];
    double cost = (double)e->cfg.loop_frame_ns + e->cfg.loop_byte_ns * (double)len;
    if (!e->loop_cost)
        return e->now;
    uint64_t start = g->loop_free_ns > e->now ? g->loop_free_ns : e->now;
    g->loop_free_ns = start + (uint64_t)llround(cost);
    assert(g->loop_free_ns >= e->now);
    return g->loop_free_ns;
}

int sim_engine_loop_cost(const sim_engine *e)
{
    return e->loop_cost;
}

/* ---- drain, deliver, tick ----------------------------------------------------- */

/* Copy one frame i -> to into the engine and route it: pending (rounds),
 * or onto its link (timed). Returns 0, or -1 when the engine failed. */
static int route(sim_engine *e, uint32_t i, uint32_t to, const gossip_send *s)
{
    frame *f = frame_alloc(e, s->len);
    if (!f) {
        fail(e, SIM_ENGINE_ENOMEM, "out of memory (frames)");
        return -1;
    }
    f->from = i;
    f->to = to;
    f->len = (uint32_t)s->len;
    f->extra = 0;
    f->from_id = e->a[i].id;
    memcpy(f->bytes, s->frame, s->len);
    if (!e->timed) {
        if (pending_push(e, f) != 0) {
            frame_free(e, f);
            fail(e, SIM_ENGINE_ENOMEM, "out of memory (pending frames)");
            return -1;
        }
        return 0;
    }
    if (e->cfg.hooks.delay)
        f->extra = ns_of_us(e->cfg.hooks.delay(e->cfg.hooks.ctx, i, to));
    if (e->loop_cost) { /* the sender's loop first (engine.h, "Event loops") */
        push(e, sim_engine_loop_take(e, i, f->len), EV_SEND, i, 0, e->a[i].inc, f);
        return e->failed ? -1 : 0;
    }
    return link_enqueue(e, f);
}

void sim_engine_drain(sim_engine *e, uint32_t i)
{
    agent *g = &e->a[i];
    if (!g->alive || !g->ops || e->failed)
        return;
    if (e->cfg.hooks.prepare)
        e->cfg.hooks.prepare(e->cfg.hooks.ctx, i);
    if (!g->ops) /* the host took the object away */
        return;
    gossip_send s;
    while (g->ops->poll_send(g->node, &s, us_of_ns(e->now)) == 1) {
        e->stats.sent++;
        e->stats.bytes_sent += s.len;
        g->bytes_sent += s.len;
        uint32_t to = resolve(e, &s);
        if (to == UINT32_MAX || to == i) {
            lose(e, &e->stats.unknown);
            continue;
        }
        if (!e->timed) {
            /* Loss is drawn for every frame so the stream advances alike. */
            int lost = e->loss_p > 0 && model_rng_uniform_double(&e->order) < e->loss_p;
            if (lost || (e->group && e->group[i] != e->group[to])) {
                lose(e, &e->stats.dropped);
                continue;
            }
        }
        if (e->cfg.hooks.drop && e->cfg.hooks.drop(e->cfg.hooks.ctx, i, to)) {
            lose(e, &e->stats.dropped);
            continue;
        }
        int copies = 1;
        if (e->cfg.hooks.duplicate && e->cfg.hooks.duplicate(e->cfg.hooks.ctx, i, to)) {
            copies = 2;
            e->stats.duplicated++;
        }
        for (int c = 0; c < copies; c++)
            if (route(e, i, to, &s) != 0)
                return;
    }
    if (e->timed) {
        gossip_time_us dl = g->ops->deadline(g->node);
        if (dl != GOSSIP_TIME_NEVER && dl < g->tick_at) {
            g->tick_at = dl;
            push(e, ns_of_us(dl), EV_TICK, i, dl, g->inc, NULL);
        }
    }
}

static void deliver(sim_engine *e, frame *f)
{
    agent *to = &e->a[f->to];
    if (to->alive && to->ops) {
        gossip_header h;
        if (e->cfg.hooks.trace)
            e->cfg.hooks.trace(e->cfg.hooks.ctx, us_of_ns(e->now), f->from, f->to, f->bytes, f->len,
                               0);
        /* The hash mixes the time in whole microseconds, as the trace export
         * prints it: runs whose events all fall on whole microseconds (no
         * bandwidth limit) keep the hashes they had before the clock moved
         * to nanoseconds; sub-microsecond order still shows in the order of
         * the frames mixed. */
        e->hash = hmix(hmix(hmix(e->hash, us_of_ns(e->now)), f->from), f->to);
        e->hash = hbytes(e->hash, f->bytes, f->len);
        to->bytes_recv += f->len;
        if (gossip_header_decode(f->bytes, f->len, &h) != GOSSIP_OK) {
            e->stats.bad_header++;
        } else if (e->cfg.hooks.filter &&
                   e->cfg.hooks.filter(e->cfg.hooks.ctx, f->from, f->to, f->bytes, f->len)) {
            lose(e, &e->stats.dropped);
        } else {
            e->stats.delivered++;
            e->stats.bytes_delivered += f->len;
            if (to->ops->recv(to->node, f->from_id, &h, f->bytes + GOSSIP_HEADER_SIZE,
                              f->len - GOSSIP_HEADER_SIZE, us_of_ns(e->now)) != 0)
                e->stats.rejected++;
        }
        sim_engine_drain(e, f->to);
        if (e->cfg.hooks.after)
            e->cfg.hooks.after(e->cfg.hooks.ctx, f->to);
    } else {
        lose(e, &e->stats.dead);
    }
    frame_free(e, f);
}

void sim_engine_tick_now(sim_engine *e, uint32_t i)
{
    agent *g = &e->a[i];
    if (!g->alive || !g->ops)
        return;
    g->tick_at = GOSSIP_TIME_NEVER;
    e->stats.ticks++;
    (void)g->ops->tick(g->node, us_of_ns(e->now));
    sim_engine_drain(e, i);
}

__extension__ typedef unsigned __int128 u128;

/* How many frames a delivery is taken to add to the pending set, at most,
 * when the next picks are guessed (a push is answered, a held push may be
 * refused as well). */
#define AHEAD_SPREAD 2u

static inline size_t slot_of(uint64_t x, size_t n)
{
    return (size_t)(((u128)x * n) >> 64);
}

/* Rounds mode, before a delivery: warm the cache for the next ones, whose
 * cost at 10^5 agents is a chain of misses (pending slot, frame, receiver).
 * The next picks are pending[(x * n') >> 64] for the next words x of the
 * order stream (model_rng_below; unless a loss draw comes between) and a
 * pending count n' from n (now) to n + AHEAD_SPREAD per delivery between.
 * One pick ahead, the frames of the candidate slots (prefetched one
 * delivery ago) name their receivers: prefetch those agents and let the
 * host prefetch its state; two picks ahead, prefetch the frames. A hint
 * only: the picks themselves are drawn as before. */
static void prefetch_ahead(sim_engine *e)
{
    size_t n = e->npending;
    if (n == 0)
        return;
    model_rng peek = e->order;
    uint64_t x1 = model_rng_u64(&peek), x2 = model_rng_u64(&peek);
    size_t hi = slot_of(x1, n + AHEAD_SPREAD);
    for (size_t k = slot_of(x1, n); k <= hi && k < n; k++) {
        const frame *f = e->pending[k];
        const char *a = (const char *)&e->a[f->to];
        for (size_t l = 0; l < sizeof(agent); l += 64)
            __builtin_prefetch(a + l);
        if (e->cfg.hooks.prefetch)
            e->cfg.hooks.prefetch(e->cfg.hooks.ctx, f->to);
    }
    hi = slot_of(x2, n + 2 * AHEAD_SPREAD);
    for (size_t k = slot_of(x2, n - 1); k <= hi && k < n; k++)
        __builtin_prefetch(e->pending[k]);
}

long sim_engine_deliver_pending(sim_engine *e)
{
    long n = 0;
    while (e->npending && !e->failed) {
        frame *f = e->pending[model_rng_below(&e->order, e->npending)];
        while (f->lprev)
            f = f->lprev;
        pending_remove(e, f);
        /* The receiver's slot came in one delivery ago (prefetch_ahead):
         * its node's first lines can be asked for now, with no wait. */
        const agent *to = &e->a[f->to];
        if (to->ops && to->ops->prefetch)
            to->ops->prefetch(to->node);
        prefetch_ahead(e);
        e->stats.events++;
        deliver(e, f);
        n++;
    }
    if (!e->npending)
        e->pend_epoch++; /* every link tail is stale */
    return n;
}

long sim_engine_run_until(sim_engine *e, gossip_time_us until_us, int (*stop)(void *ctx), void *ctx)
{
    if (!e->timed)
        return -1;
    uint64_t until = ns_of_us(until_us);
    long n = 0;
    sim_net_delivery d;
    while (!e->failed) {
        uint64_t tq = sim_evq_peek_time(&e->q);
        uint64_t tn = sim_net_next_completion(e->net);
        if (tn <= tq && tn <= until) {
            if (sim_net_advance(e->net, tn) != SIM_NET_OK) {
                fail(e, SIM_ENGINE_EFULL, "network: time error");
                break;
            }
            while (sim_net_pop(e->net, &d) && !e->failed) {
                frame *f = (frame *)(uintptr_t)d.tag;
                link_tail *t = link_get(e, d.src, d.dst);
                if (!t) {
                    fail(e, SIM_ENGINE_ENOMEM, "out of memory (links)");
                    break;
                }
                push(e, fifo(t, d.deliver_ns) + f->extra, EV_DELIVER, d.dst, 0, 0, f);
                link_done(e, d.src, d.dst, tn);
            }
            continue;
        }
        if (tq > until)
            break;
        sim_event ev;
        sim_evq_pop(&e->q, &ev);
        e->now = ev.time_ns;
        e->stats.events++;
        n++;
        agent *g = &e->a[ev.agent];
        switch (ev.kind) {
        case EV_DELIVER: {
            frame *f = ev.ptr;
            /* the receiver's loop first (engine.h, "Event loops"); a frame
             * for a dead agent is lost at once */
            if (e->loop_cost && ev.a == 0 && e->a[f->to].alive)
                push(e, sim_engine_loop_take(e, f->to, f->len), EV_DELIVER, f->to, 1, 0, f);
            else
                deliver(e, f);
            break;
        }
        case EV_SEND: {
            frame *f = ev.ptr;
            if (!g->alive || g->inc != ev.b) { /* crashed while its loop held the frame */
                lose(e, &e->stats.dead);
                frame_free(e, f);
            } else {
                (void)link_enqueue(e, f);
            }
            break;
        }
        case EV_TICK:
            if (g->alive && g->ops && g->inc == ev.b && g->tick_at == ev.a) {
                g->tick_at = GOSSIP_TIME_NEVER;
                e->stats.ticks++;
                (void)g->ops->tick(g->node, us_of_ns(e->now));
                sim_engine_drain(e, ev.agent);
                if (e->cfg.hooks.after)
                    e->cfg.hooks.after(e->cfg.hooks.ctx, ev.agent);
            }
            break;
        default:
            if (e->cfg.hooks.event)
                e->cfg.hooks.event(e->cfg.hooks.ctx, &ev);
            break;
        }
        if (stop && stop(ctx))
            return n;
    }
    if (!e->failed && until > e->now)
        e->now = until;
    return n;
}

/* ---- faults ------------------------------------------------------------------- */

int sim_engine_set_loss(sim_engine *e, double p)
{
    p = p < 0 ? 0 : p > 1 ? 1 : p;
    e->loss_p = p;
    if (e->net)
        sim_net_set_loss(e->net, p);
    return SIM_ENGINE_OK;
}

int sim_engine_set_partition(sim_engine *e, const uint32_t *group)
{
    if (!group) {
        free(e->group);
        e->group = NULL;
        if (e->net)
            sim_net_set_partition(e->net, NULL);
        return SIM_ENGINE_OK;
    }
    if (!e->group && !(e->group = malloc(e->n * sizeof *e->group)))
        return SIM_ENGINE_ENOMEM;
    memcpy(e->group, group, e->n * sizeof *e->group);
    if (e->net && sim_net_set_partition(e->net, group) != SIM_NET_OK)
        return SIM_ENGINE_ENOMEM;
    return SIM_ENGINE_OK;
}
