/* tests/swimnet — see swimnet.h. Included by the swim suites (the Makefile
 * links only tests/test_NAME.c and tests/harness.c into a suite). */
#include "tests/swimnet.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { EV_JOIN = SIM_EV_USER };

static void swimnet_sync(swimnet *net)
{
    const sim_engine_stats *st = sim_engine_get_stats(net->e);
    net->now = sim_engine_now(net->e);
    net->frames_sent = st->sent;
    net->bytes_sent = st->bytes_sent;
    net->frames_dropped = st->lost;
    net->frames_delivered = st->delivered;
}

void swimnet_flush(swimnet *net, uint32_t i)
{
    sim_engine_drain(net->e, i);
    swimnet_sync(net);
}

static void swimnet_join(swimnet *net, uint32_t i)
{
    char seeds[SWIMNET_SEEDS_MAX][GOSSIP_ADDR_MAX];
    const char *sp[SWIMNET_SEEDS_MAX];
    for (uint32_t k = 0; k < net->cfg.n_seeds; k++) {
        snprintf(seeds[k], sizeof seeds[k], "sim://%u", k);
        sp[k] = seeds[k];
    }
    gossip_swim_join(net->agents[i].swim, sp, net->cfg.n_seeds, sim_engine_now(net->e));
    swimnet_flush(net, i);
}

/* A new process for agent i (joins at once when join is set). */
static int swimnet_start(swimnet *net, uint32_t i, uint32_t incarnation, int join)
{
    swimnet_agent *a = &net->agents[i];
    test_env_init(&a->env, net->cfg.seed);
    model_rng_seed(&a->env.rng, net->cfg.seed, 1 + i + (uint64_t)a->gen * net->cfg.n);
    gossip_swim_config c = net->cfg.swim;
    c.self_id = SWIMNET_ID(i);
    c.self_addr = a->addr;
    c.incarnation = incarnation;
    if (gossip_swim_create(&a->swim, &a->env.env, &c) != GOSSIP_OK)
        return -1;
    a->up = 1;
    sim_engine_set_node(net->e, i, &sim_ops_swim, a->swim);
    sim_engine_up(net->e, i);
    if (join)
        swimnet_join(net, i);
    return 0;
}

/* Per-message latency and a slow receiver's extra delay. */
static uint64_t swimnet_delay(void *ctx, uint32_t from, uint32_t to)
{
    swimnet *net = ctx;
    (void)from;
    gossip_time_us lat = net->cfg.latency_min_us;
    if (net->cfg.latency_max_us > lat)
        lat += model_rng_below(&net->rng, net->cfg.latency_max_us - lat + 1);
    if (net->agents[to].slow_max_us)
        lat += model_rng_below(&net->rng, net->agents[to].slow_max_us + 1);
    return lat;
}

static void swimnet_event(void *ctx, const sim_event *ev)
{
    swimnet *net = ctx;
    if (ev->kind == EV_JOIN && net->agents[ev->agent].up && net->agents[ev->agent].gen == ev->a)
        swimnet_join(net, ev->agent);
}

swimnet *swimnet_create(const swimnet_config *cfg)
{
    swimnet *net = calloc(1, sizeof *net);
    if (!net)
        return NULL;
    net->cfg = *cfg;
    if (net->cfg.n_seeds == 0 || net->cfg.n_seeds > SWIMNET_SEEDS_MAX)
        net->cfg.n_seeds = 3;
    if (net->cfg.n_seeds > net->cfg.n)
        net->cfg.n_seeds = net->cfg.n;
    model_rng_seed(&net->rng, cfg->seed, 0);
    net->agents = calloc(cfg->n, sizeof *net->agents);
    sim_net_config nc = {.agents = cfg->n, .seed = cfg->seed, .loss = cfg->loss};
    sim_engine_config ec = {
        .agents = cfg->n,
        .seed = cfg->seed,
        .mode = SIM_MODE_TIMED,
        .net = &nc,
        .events_max = (size_t)1 << 24,
        .hooks = {.ctx = net, .event = swimnet_event, .delay = swimnet_delay},
    };
    if (!net->agents || sim_engine_create(&net->e, &ec) != SIM_ENGINE_OK) {
        free(net->agents);
        free(net);
        return NULL;
    }
    for (uint32_t i = 0; i < cfg->n; i++) {
        snprintf(net->agents[i].addr, GOSSIP_ADDR_MAX, "sim://%u", i);
        if (sim_engine_set_id(net->e, i, SWIMNET_ID(i)) != SIM_ENGINE_OK) {
            swimnet_destroy(net);
            return NULL;
        }
    }
    for (uint32_t i = 0; i < cfg->n; i++) {
        if (swimnet_start(net, i, 0, 0) != 0) {
            swimnet_destroy(net);
            return NULL;
        }
        /* stagger the joins over the first millisecond */
        sim_engine_schedule(net->e, model_rng_below(&net->rng, 1000), EV_JOIN, i, 0, 0, NULL);
    }
    swimnet_sync(net);
    return net;
}

void swimnet_destroy(swimnet *net)
{
    if (!net)
        return;
    sim_engine_destroy(net->e);
    for (uint32_t i = 0; i < net->cfg.n; i++) {
        gossip_swim_destroy(net->agents[i].swim);
        assert(net->agents[i].env.alloc.live == 0);
    }
    free(net->agents);
    free(net);
}

void swimnet_run_until(swimnet *net, gossip_time_us t)
{
    long rc = sim_engine_run_until(net->e, t, NULL, NULL);
    assert(rc >= 0 && !sim_engine_failed(net->e));
    (void)rc;
    swimnet_sync(net);
}

void swimnet_crash(swimnet *net, uint32_t i)
{
    swimnet_agent *a = &net->agents[i];
    if (!a->up)
        return;
    sim_engine_down(net->e, i);
    sim_engine_set_node(net->e, i, NULL, NULL);
    gossip_swim_destroy(a->swim);
    assert(a->env.alloc.live == 0);
    a->swim = NULL;
    a->up = 0;
    a->gen++;
}

void swimnet_restart(swimnet *net, uint32_t i, uint32_t incarnation)
{
    swimnet_agent *a = &net->agents[i];
    swimnet_crash(net, i);
    a->gen++;
    int rc = swimnet_start(net, i, incarnation, 1);
    assert(rc == 0);
    (void)rc;
}

void swimnet_partition(swimnet *net, const int *side)
{
    uint32_t *group = malloc(net->cfg.n * sizeof *group);
    assert(group);
    for (uint32_t i = 0; i < net->cfg.n; i++) {
        net->agents[i].side = side[i];
        group[i] = (uint32_t)side[i];
    }
    int rc = sim_engine_set_partition(net->e, group);
    assert(rc == SIM_ENGINE_OK);
    (void)rc;
    free(group);
}

void swimnet_heal(swimnet *net)
{
    sim_engine_set_partition(net->e, NULL);
}

void swimnet_set_slow(swimnet *net, uint32_t i, gossip_time_us slow_max_us)
{
    net->agents[i].slow_max_us = slow_max_us;
}

gossip_member_state swimnet_state(const swimnet *net, uint32_t at, uint32_t i)
{
    gossip_swim_member m;
    if (!net->agents[at].up || gossip_swim_lookup(net->agents[at].swim, SWIMNET_ID(i), &m) != 0)
        return GOSSIP_MEMBER_NONE;
    return m.state;
}

int swimnet_converged(const swimnet *net)
{
    uint32_t up = 0;
    for (uint32_t i = 0; i < net->cfg.n; i++)
        up += net->agents[i].up;
    for (uint32_t i = 0; i < net->cfg.n; i++) {
        const swimnet_agent *a = &net->agents[i];
        if (!a->up)
            continue;
        gossip_view v;
        gossip_swim_view(a->swim, &v);
        if (v.n != up)
            return 0;
        for (uint32_t k = 0; k < v.n; k++) {
            uint64_t id = v.ids[k];
            if (id < SWIMNET_ID_BASE || id - SWIMNET_ID_BASE >= net->cfg.n ||
                !net->agents[id - SWIMNET_ID_BASE].up)
                return 0;
        }
    }
    return 1;
}
