/* sim/driver — the engine (sim/engine.h) behind the driver's small API. */
#include "sim/driver.h"

#include <stdlib.h>

enum { EV_CRASH = SIM_EV_USER };

struct sim_driver {
    sim_driver_config cfg;
    sim_engine *e;
    sim_drop_fn filter;
    void *filter_ctx;
    sim_driver_stats stats;
};

static int driver_filter(void *ctx, uint32_t from, uint32_t to, uint8_t *frame, size_t len)
{
    sim_driver *d = ctx;
    gossip_header h;
    if (!d->filter || gossip_header_decode(frame, len, &h) != GOSSIP_OK)
        return 0;
    return d->filter(d->filter_ctx, from, to, &h, sim_engine_now(d->e));
}

static void driver_event(void *ctx, const sim_event *ev)
{
    sim_driver *d = ctx;
    if (ev->kind == EV_CRASH)
        sim_engine_down(d->e, ev->agent);
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
    sim_net_config nc = {
        .agents = cfg->agents,
        .seed = cfg->seed,
        .latency_kind = SIM_NET_LAT_CONST,
        .latency_ms = (double)cfg->latency_us / 1000.0,
        .loss = cfg->loss,
    };
    sim_engine_config ec = {
        .agents = cfg->agents,
        .seed = cfg->seed,
        .mode = cfg->mode,
        .order_stream = cfg->agents,
        .loss = cfg->loss,
        .net = &nc,
        .events_max = 4 * d->cfg.inflight_max + 4 * (size_t)cfg->agents,
        .hooks = {.ctx = d, .filter = driver_filter, .event = driver_event},
    };
    if (sim_engine_create(&d->e, &ec) != SIM_ENGINE_OK) {
        free(d);
        return -1;
    }
    *out = d;
    return 0;
}

void sim_driver_destroy(sim_driver *d)
{
    if (!d)
        return;
    sim_engine_destroy(d->e);
    free(d);
}

int sim_driver_attach(sim_driver *d, uint32_t i, uint64_t id, const sim_node_ops *ops, void *node)
{
    if (i >= d->cfg.agents || id == 0 || !ops || sim_engine_node(d->e, i))
        return -1;
    if (sim_engine_set_id(d->e, i, id) != SIM_ENGINE_OK)
        return -1;
    sim_engine_set_node(d->e, i, ops, node);
    sim_engine_up(d->e, i);
    return 0;
}

const gossip_env *sim_driver_env(sim_driver *d, uint32_t i)
{
    return sim_engine_env(d->e, i);
}

model_rng *sim_driver_rng(sim_driver *d, uint32_t i)
{
    return sim_engine_rng(d->e, i);
}

gossip_time_us sim_driver_now(const sim_driver *d)
{
    return sim_engine_now(d->e);
}

void sim_driver_set_loss(sim_driver *d, double loss)
{
    sim_engine_set_loss(d->e, loss);
}

void sim_driver_set_filter(sim_driver *d, sim_drop_fn fn, void *ctx)
{
    d->filter = fn;
    d->filter_ctx = ctx;
}

int sim_driver_alive(const sim_driver *d, uint32_t i)
{
    return sim_engine_alive(d->e, i);
}

int sim_driver_crash(sim_driver *d, uint32_t i, gossip_time_us at)
{
    if (i >= d->cfg.agents)
        return -1;
    if (at <= sim_engine_now(d->e) || d->cfg.mode == SIM_MODE_ROUNDS) {
        sim_engine_down(d->e, i);
        return 0;
    }
    sim_engine_schedule(d->e, at, EV_CRASH, i, 0, 0, NULL);
    return sim_engine_failed(d->e) ? -1 : 0;
}

int sim_driver_kick(sim_driver *d, uint32_t i)
{
    if (i >= d->cfg.agents || !sim_engine_node(d->e, i))
        return -1;
    sim_engine_drain(d->e, i);
    return 0;
}

long sim_driver_run_until(sim_driver *d, gossip_time_us until, int (*stop)(void *ctx), void *ctx)
{
    if (d->cfg.mode != SIM_MODE_TIMED)
        return -1;
    if (stop && stop(ctx))
        return 0;
    return sim_engine_run_until(d->e, until, stop, ctx);
}

long sim_driver_run_round(sim_driver *d)
{
    if (d->cfg.mode != SIM_MODE_ROUNDS)
        return -1;
    for (uint32_t i = 0; i < d->cfg.agents; i++)
        sim_engine_drain(d->e, i);
    long n = sim_engine_deliver_pending(d->e);
    sim_engine_set_now(d->e, sim_engine_now(d->e) + d->cfg.round_us);
    for (uint32_t i = 0; i < d->cfg.agents; i++)
        if (sim_engine_alive(d->e, i) && sim_engine_deadline(d->e, i) <= sim_engine_now(d->e))
            sim_engine_tick_now(d->e, i);
    return n;
}

uint64_t sim_driver_trace_hash(const sim_driver *d)
{
    return sim_engine_trace_hash(d->e);
}

const sim_driver_stats *sim_driver_get_stats(const sim_driver *d)
{
    const sim_engine_stats *s = sim_engine_get_stats(d->e);
    sim_driver_stats *o = &((sim_driver *)d)->stats;
    o->sent = s->sent;
    o->delivered = s->delivered;
    o->dropped = s->dropped;
    o->dead = s->dead + s->unknown;
    o->overflow = sim_engine_failed(d->e) == SIM_ENGINE_EFULL;
    o->rejected = s->rejected;
    o->bad_header = s->bad_header;
    o->bytes_delivered = s->bytes_delivered;
    o->ticks = s->ticks;
    return o;
}
