/* tests/swimnet — see swimnet.h. Included by the swim suites (the Makefile
 * links only tests/test_NAME.c and tests/harness.c into a suite). */
#include "tests/swimnet.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { EV_TICK = 1, EV_DELIVER = 2 };

typedef struct swimnet_frame {
    size_t len;
    uint8_t data[];
} swimnet_frame;

static void swimnet_flush(swimnet *net, uint32_t i);

static int swimnet_start(swimnet *net, uint32_t i, uint32_t incarnation)
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
    a->tick_at = GOSSIP_TIME_NEVER;
    char seeds[SWIMNET_SEEDS_MAX][GOSSIP_ADDR_MAX];
    const char *sp[SWIMNET_SEEDS_MAX];
    for (uint32_t k = 0; k < net->cfg.n_seeds; k++) {
        snprintf(seeds[k], sizeof seeds[k], "sim://%u", k);
        sp[k] = seeds[k];
    }
    gossip_swim_join(a->swim, sp, net->cfg.n_seeds, net->now);
    swimnet_flush(net, i);
    return 0;
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
    if (!net->agents || sim_evq_init(&net->q, 1024, (size_t)1 << 24) != 0) {
        free(net->agents);
        free(net);
        return NULL;
    }
    for (uint32_t i = 0; i < cfg->n; i++)
        snprintf(net->agents[i].addr, GOSSIP_ADDR_MAX, "sim://%u", i);
    for (uint32_t i = 0; i < cfg->n; i++) {
        /* stagger the joins over the first period */
        net->now = model_rng_below(&net->rng, 1000);
        if (swimnet_start(net, i, 0) != 0) {
            swimnet_destroy(net);
            return NULL;
        }
    }
    net->now = 0;
    return net;
}

void swimnet_destroy(swimnet *net)
{
    if (!net)
        return;
    sim_event ev;
    while (sim_evq_pop(&net->q, &ev) == 0)
        free(ev.ptr);
    sim_evq_free(&net->q);
    for (uint32_t i = 0; i < net->cfg.n; i++) {
        gossip_swim_destroy(net->agents[i].swim);
        assert(net->agents[i].env.alloc.live == 0);
    }
    free(net->agents);
    free(net);
}

static void swimnet_schedule_tick(swimnet *net, uint32_t i)
{
    swimnet_agent *a = &net->agents[i];
    gossip_time_us d = gossip_swim_deadline(a->swim);
    if (d == GOSSIP_TIME_NEVER || d >= a->tick_at)
        return;
    if (d < net->now)
        d = net->now;
    a->tick_at = d;
    sim_event ev = {.time_us = d, .kind = EV_TICK, .agent = i, .a = a->gen};
    int rc = sim_evq_push(&net->q, &ev);
    assert(rc == 0);
    (void)rc;
}

static uint32_t swimnet_resolve(const swimnet *net, const gossip_send *s)
{
    if (s->dest != 0) {
        if (s->dest < SWIMNET_ID_BASE || s->dest - SWIMNET_ID_BASE >= net->cfg.n)
            return UINT32_MAX;
        return (uint32_t)(s->dest - SWIMNET_ID_BASE);
    }
    unsigned idx;
    if (!s->dest_addr || sscanf(s->dest_addr, "sim://%u", &idx) != 1 || idx >= net->cfg.n)
        return UINT32_MAX;
    return idx;
}

static void swimnet_flush(swimnet *net, uint32_t i)
{
    swimnet_agent *a = &net->agents[i];
    gossip_send s;
    while (gossip_swim_poll_send(a->swim, &s, net->now) == 1) {
        net->frames_sent++;
        net->bytes_sent += s.len;
        uint8_t type = s.len > 3 ? s.frame[3] : 0;
        net->sent_msgs[type & 15]++;
        net->sent_bytes[type & 15] += s.len;
        uint32_t dst = swimnet_resolve(net, &s);
        assert(dst != UINT32_MAX);
        if (dst == UINT32_MAX || (net->partitioned && net->agents[dst].side != a->side) ||
            (net->cfg.loss > 0 && model_rng_uniform_double(&net->rng) < net->cfg.loss)) {
            net->frames_dropped++;
            continue;
        }
        gossip_time_us lat = net->cfg.latency_min_us;
        if (net->cfg.latency_max_us > lat)
            lat += model_rng_below(&net->rng, net->cfg.latency_max_us - lat + 1);
        if (net->agents[dst].slow_max_us)
            lat += model_rng_below(&net->rng, net->agents[dst].slow_max_us + 1);
        swimnet_frame *f = malloc(sizeof *f + s.len);
        assert(f);
        f->len = s.len;
        memcpy(f->data, s.frame, s.len);
        sim_event ev = {.time_us = net->now + lat,
                        .kind = EV_DELIVER,
                        .agent = dst,
                        .a = i,
                        .b = net->agents[dst].gen,
                        .ptr = f};
        int rc = sim_evq_push(&net->q, &ev);
        assert(rc == 0);
        (void)rc;
    }
    swimnet_schedule_tick(net, i);
}

void swimnet_run_until(swimnet *net, gossip_time_us t)
{
    sim_event ev;
    while (sim_evq_peek_time(&net->q) <= t) {
        sim_evq_pop(&net->q, &ev);
        net->now = ev.time_us;
        swimnet_agent *a = &net->agents[ev.agent];
        if (ev.kind == EV_TICK) {
            if (!a->up || ev.a != a->gen || ev.time_us != a->tick_at)
                continue;
            a->tick_at = GOSSIP_TIME_NEVER;
            gossip_swim_tick(a->swim, net->now);
            swimnet_flush(net, ev.agent);
            continue;
        }
        swimnet_frame *f = ev.ptr;
        int deliver =
            a->up && ev.b == a->gen && !(net->partitioned && net->agents[ev.a].side != a->side);
        if (deliver) {
            gossip_header h;
            int rc = gossip_header_decode(f->data, f->len, &h);
            assert(rc == GOSSIP_OK);
            rc = gossip_swim_recv(a->swim, h.sender, &h, f->data + GOSSIP_HEADER_SIZE,
                                  f->len - GOSSIP_HEADER_SIZE, net->now);
            net->frames_delivered++;
            swimnet_flush(net, ev.agent);
        } else {
            net->frames_dropped++;
        }
        free(f);
    }
    net->now = t;
}

void swimnet_crash(swimnet *net, uint32_t i)
{
    swimnet_agent *a = &net->agents[i];
    if (!a->up)
        return;
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
    int rc = swimnet_start(net, i, incarnation);
    assert(rc == 0);
    (void)rc;
}

void swimnet_partition(swimnet *net, const int *side)
{
    for (uint32_t i = 0; i < net->cfg.n; i++)
        net->agents[i].side = side[i];
    net->partitioned = 1;
}

void swimnet_heal(swimnet *net)
{
    net->partitioned = 0;
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
