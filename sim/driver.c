#include "sim/driver.h"

#include <stdlib.h>
#include <string.h>

#include "gossip/mix.h"
#include "sim/evq.h"

enum { EV_DELIVER = 1, EV_TICK, EV_CRASH };

typedef struct sim_frame {
    uint32_t from, to;
    uint64_t seq; /* send order, for FIFO per link in rounds mode */
    size_t len;
    uint8_t bytes[]; /* header + payload */
} sim_frame;

typedef struct sim_agent {
    uint64_t id;
    const sim_node_ops *ops;
    void *node;
    int alive;
    gossip_time_us tick_at; /* scheduled tick, GOSSIP_TIME_NEVER if none */
    model_rng rng;
    gossip_env env;
} sim_agent;

typedef struct id_entry {
    uint64_t id;
    uint32_t index;
} id_entry;

struct sim_driver {
    sim_driver_config cfg;
    sim_agent *agents;
    id_entry *by_id; /* sorted by id, n_ids entries */
    uint32_t n_ids;
    sim_evq q;
    model_rng net;
    gossip_time_us now;
    size_t inflight;
    uint64_t send_seq;
    sim_frame **pending; /* rounds mode */
    size_t n_pending;
    sim_drop_fn filter;
    void *filter_ctx;
    uint64_t hash;
    sim_driver_stats stats;
};

/* ---- mixer adapter ------------------------------------------------------ */

static int mix_recv(void *n, uint64_t from, const gossip_header *h, const uint8_t *p, size_t len,
                    gossip_time_us now)
{
    return gossip_mix_recv(n, from, h, p, len, now);
}
static int mix_tick(void *n, gossip_time_us now)
{
    return gossip_mix_tick(n, now);
}
static int mix_poll(void *n, gossip_send *out, gossip_time_us now)
{
    return gossip_mix_poll_send(n, out, now);
}
static gossip_time_us mix_deadline(const void *n)
{
    return gossip_mix_deadline(n);
}

const sim_node_ops sim_ops_mix = {mix_recv, mix_tick, mix_poll, mix_deadline};

/* ---- env ---------------------------------------------------------------- */

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

/* ---- helpers ------------------------------------------------------------ */

static const uint64_t FNV_OFFSET = 0xcbf29ce484222325ULL, FNV_PRIME = 0x100000001b3ULL;

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= FNV_PRIME;
    }
    return h;
}

static uint64_t fnv_u64(uint64_t h, uint64_t v)
{
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    return fnv(h, b, 8);
}

static int cmp_id(const void *a, const void *b)
{
    uint64_t x = ((const id_entry *)a)->id, y = ((const id_entry *)b)->id;
    return x < y ? -1 : x > y;
}

static uint32_t index_of(const sim_driver *d, const gossip_send *s)
{
    if (s->dest == 0) {
        /* Address-only frames: "sim://<index>". */
        if (s->dest_addr && strncmp(s->dest_addr, "sim://", 6) == 0) {
            char *end;
            unsigned long v = strtoul(s->dest_addr + 6, &end, 10);
            if (*end == '\0' && v < d->cfg.agents)
                return (uint32_t)v;
        }
        return UINT32_MAX;
    }
    uint32_t lo = 0, hi = d->n_ids;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (d->by_id[mid].id < s->dest)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < d->n_ids && d->by_id[lo].id == s->dest ? d->by_id[lo].index : UINT32_MAX;
}

int sim_driver_create(sim_driver **out, const sim_driver_config *cfg)
{
    if (!out || !cfg || cfg->agents == 0 || cfg->agents > SIM_DRIVER_AGENTS_MAX ||
        !(cfg->loss >= 0 && cfg->loss <= 1))
        return -1;
    sim_driver *d = calloc(1, sizeof *d);
    if (!d)
        return -1;
    d->cfg = *cfg;
    if (!d->cfg.inflight_max)
        d->cfg.inflight_max = SIM_DRIVER_INFLIGHT_DEFAULT;
    d->agents = calloc(cfg->agents, sizeof *d->agents);
    d->by_id = calloc(cfg->agents, sizeof *d->by_id);
    d->pending = calloc(d->cfg.inflight_max, sizeof *d->pending);
    if (!d->agents || !d->by_id || !d->pending ||
        sim_evq_init(&d->q, 1024, 4 * d->cfg.inflight_max + 4 * cfg->agents) != 0) {
        free(d->agents);
        free(d->by_id);
        free(d->pending);
        free(d);
        return -1;
    }
    for (uint32_t i = 0; i < cfg->agents; i++) {
        sim_agent *a = &d->agents[i];
        model_rng_seed(&a->rng, cfg->seed, i);
        a->env = (gossip_env){.alloc = env_alloc,
                              .free = env_free,
                              .random = model_rng_callback,
                              .alloc_ctx = NULL,
                              .random_ctx = &a->rng};
        a->tick_at = GOSSIP_TIME_NEVER;
    }
    model_rng_seed(&d->net, cfg->seed, cfg->agents);
    d->hash = FNV_OFFSET;
    *out = d;
    return 0;
}

void sim_driver_destroy(sim_driver *d)
{
    if (!d)
        return;
    sim_event ev;
    while (sim_evq_pop(&d->q, &ev) == 0)
        if (ev.kind == EV_DELIVER)
            free(ev.ptr);
    for (size_t k = 0; k < d->n_pending; k++)
        free(d->pending[k]);
    sim_evq_free(&d->q);
    free(d->pending);
    free(d->agents);
    free(d->by_id);
    free(d);
}

int sim_driver_attach(sim_driver *d, uint32_t i, uint64_t id, const sim_node_ops *ops, void *node)
{
    if (i >= d->cfg.agents || id == 0 || !ops || d->agents[i].ops)
        return -1;
    for (uint32_t k = 0; k < d->n_ids; k++)
        if (d->by_id[k].id == id)
            return -1;
    sim_agent *a = &d->agents[i];
    a->id = id;
    a->ops = ops;
    a->node = node;
    a->alive = 1;
    d->by_id[d->n_ids++] = (id_entry){id, i};
    qsort(d->by_id, d->n_ids, sizeof *d->by_id, cmp_id);
    return 0;
}

const gossip_env *sim_driver_env(sim_driver *d, uint32_t i)
{
    return i < d->cfg.agents ? &d->agents[i].env : NULL;
}

model_rng *sim_driver_rng(sim_driver *d, uint32_t i)
{
    return i < d->cfg.agents ? &d->agents[i].rng : NULL;
}

gossip_time_us sim_driver_now(const sim_driver *d)
{
    return d->now;
}

void sim_driver_set_loss(sim_driver *d, double loss)
{
    d->cfg.loss = loss < 0 ? 0 : loss > 1 ? 1 : loss;
}

void sim_driver_set_filter(sim_driver *d, sim_drop_fn fn, void *ctx)
{
    d->filter = fn;
    d->filter_ctx = ctx;
}

int sim_driver_alive(const sim_driver *d, uint32_t i)
{
    return i < d->cfg.agents && d->agents[i].alive;
}

/* Pull every frame agent i has to send, then (re)schedule its tick. */
static void drain(sim_driver *d, uint32_t i)
{
    sim_agent *a = &d->agents[i];
    if (!a->alive)
        return;
    gossip_send s;
    while (a->ops->poll_send(a->node, &s, d->now) == 1) {
        d->stats.sent++;
        uint32_t to = index_of(d, &s);
        /* Loss is drawn for every frame, so the network stream advances the
         * same way whatever the destination. */
        int lost = d->cfg.loss > 0 && model_rng_uniform_double(&d->net) < d->cfg.loss;
        if (to == UINT32_MAX) {
            d->stats.dead++;
            continue;
        }
        if (lost) {
            d->stats.dropped++;
            continue;
        }
        if (d->inflight >= d->cfg.inflight_max) {
            d->stats.overflow++;
            continue;
        }
        sim_frame *f = malloc(sizeof *f + s.len);
        if (!f) {
            d->stats.overflow++;
            continue;
        }
        f->from = i;
        f->to = to;
        f->seq = d->send_seq++;
        f->len = s.len;
        memcpy(f->bytes, s.frame, s.len);
        if (d->cfg.mode == SIM_MODE_ROUNDS) {
            d->pending[d->n_pending++] = f;
        } else {
            sim_event ev = {
                .time_us = d->now + d->cfg.latency_us, .kind = EV_DELIVER, .agent = to, .ptr = f};
            if (sim_evq_push(&d->q, &ev) != 0) {
                free(f);
                d->stats.overflow++;
                continue;
            }
        }
        d->inflight++;
    }
    /* One tick event per agent at the earliest deadline seen: a deadline
     * that moves later is picked up when that event fires (tick is then a
     * no-op and drain reschedules), so the queue holds at most one live tick
     * per agent plus the stale ones of deadlines that moved earlier. */
    gossip_time_us dl = a->ops->deadline(a->node);
    if (dl != GOSSIP_TIME_NEVER && dl < a->tick_at) {
        a->tick_at = dl;
        if (d->cfg.mode == SIM_MODE_TIMED) {
            sim_event ev = {
                .time_us = dl > d->now ? dl : d->now, .kind = EV_TICK, .agent = i, .a = dl};
            (void)sim_evq_push(&d->q, &ev); /* the queue holds 4 per agent beyond frames */
        }
    }
}

int sim_driver_kick(sim_driver *d, uint32_t i)
{
    if (i >= d->cfg.agents || !d->agents[i].ops)
        return -1;
    drain(d, i);
    return 0;
}

static void deliver(sim_driver *d, sim_frame *f)
{
    d->inflight--;
    sim_agent *to = &d->agents[f->to];
    gossip_header h;
    if (!to->alive || !to->ops) {
        d->stats.dead++;
    } else if (gossip_header_decode(f->bytes, f->len, &h) != GOSSIP_OK) {
        d->stats.bad_header++;
    } else if (d->filter && d->filter(d->filter_ctx, f->from, f->to, &h, d->now)) {
        d->stats.dropped++;
    } else {
        d->hash = fnv_u64(d->hash, d->now);
        d->hash = fnv_u64(d->hash, f->from);
        d->hash = fnv_u64(d->hash, f->to);
        d->hash = fnv(d->hash, f->bytes, f->len);
        d->stats.delivered++;
        d->stats.bytes_delivered += f->len;
        uint64_t from_id = d->agents[f->from].id;
        if (to->ops->recv(to->node, from_id, &h, f->bytes + GOSSIP_HEADER_SIZE,
                          f->len - GOSSIP_HEADER_SIZE, d->now) != 0)
            d->stats.rejected++;
        drain(d, f->to);
    }
    free(f);
}

static void do_tick(sim_driver *d, uint32_t i)
{
    sim_agent *a = &d->agents[i];
    a->tick_at = GOSSIP_TIME_NEVER;
    d->stats.ticks++;
    a->ops->tick(a->node, d->now);
    drain(d, i);
}

int sim_driver_crash(sim_driver *d, uint32_t i, gossip_time_us at)
{
    if (i >= d->cfg.agents)
        return -1;
    if (at <= d->now || d->cfg.mode == SIM_MODE_ROUNDS) {
        d->agents[i].alive = 0;
        return 0;
    }
    sim_event ev = {.time_us = at, .kind = EV_CRASH, .agent = i};
    return sim_evq_push(&d->q, &ev) == 0 ? 0 : -1;
}

long sim_driver_run_until(sim_driver *d, gossip_time_us until, int (*stop)(void *ctx), void *ctx)
{
    if (d->cfg.mode != SIM_MODE_TIMED)
        return -1;
    long n = 0;
    sim_event ev;
    while (sim_evq_peek_time(&d->q) <= until) {
        if (stop && stop(ctx))
            return n;
        sim_evq_pop(&d->q, &ev);
        d->now = ev.time_us;
        n++;
        switch (ev.kind) {
        case EV_DELIVER:
            deliver(d, ev.ptr);
            break;
        case EV_TICK: {
            sim_agent *a = &d->agents[ev.agent];
            if (a->alive && a->tick_at == ev.a)
                do_tick(d, ev.agent);
            break;
        }
        case EV_CRASH:
            d->agents[ev.agent].alive = 0;
            break;
        default:
            break;
        }
    }
    if (stop && stop(ctx))
        return n;
    if (until > d->now)
        d->now = until;
    return n;
}

long sim_driver_run_round(sim_driver *d)
{
    if (d->cfg.mode != SIM_MODE_ROUNDS)
        return -1;
    for (uint32_t i = 0; i < d->cfg.agents; i++)
        if (d->agents[i].ops)
            drain(d, i);
    long n = 0;
    while (d->n_pending) {
        /* A random frame picks a link; the link's oldest frame goes first. */
        size_t r = (size_t)model_rng_below(&d->net, d->n_pending);
        size_t best = r;
        for (size_t k = 0; k < d->n_pending; k++) {
            sim_frame *f = d->pending[k];
            if (f->from == d->pending[r]->from && f->to == d->pending[r]->to &&
                f->seq < d->pending[best]->seq)
                best = k;
        }
        sim_frame *f = d->pending[best];
        d->pending[best] = d->pending[--d->n_pending];
        deliver(d, f);
        n++;
    }
    d->now += d->cfg.round_us;
    for (uint32_t i = 0; i < d->cfg.agents; i++) {
        sim_agent *a = &d->agents[i];
        if (a->ops && a->alive && a->ops->deadline(a->node) <= d->now)
            do_tick(d, i);
    }
    return n;
}

uint64_t sim_driver_trace_hash(const sim_driver *d)
{
    return d->hash;
}

const sim_driver_stats *sim_driver_get_stats(const sim_driver *d)
{
    return &d->stats;
}
