/* sim/agents — an agent's protocol object on the engine (see sim/runner.h):
 * a gossip_mix under the membership oracle, a whole gossip_node (SWIM, its
 * own views, state transfer) under membership.mode = swim. Start, crash,
 * restart and join; the oracle's views; mixing rounds on the agent's own
 * schedule (gossip/sched, as agent/api.c and agent/runtime.c call it):
 * due every mixing.interval_steps local steps, the vector copied after the
 * step that made it due, training going on while it runs, the result
 * applied at the next step as params += mixed - sent. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sim/runner.h"

static void schedule(runner *r, uint64_t t, uint32_t kind, uint32_t agent, uint64_t a, uint64_t b,
                     void *ptr)
{
    sim_engine_schedule(r->e, t, kind, agent, a, b, ptr);
}

static uint32_t inc(const runner *r, uint32_t i)
{
    return sim_engine_incarnation(r->e, i);
}

static void drain(runner *r, uint32_t i)
{
    sim_engine_drain(r->e, i);
}

/* Oracle membership with protocol shards: the agent is its mixer and its
 * replicator side by side (what gossip_node does for the two under SWIM):
 * frames routed by message type (0x2_ shards, the rest mixing), the two
 * send queues taken in turn so a long shard copy never starves mixing,
 * the earlier deadline. */
static int duo_recv(void *n, uint64_t from, const gossip_header *h, const uint8_t *p, size_t len,
                    gossip_time_us now)
{
    sim_agent_state *g = n;
    if (h->type >= GOSSIP_MSG_SHARD_WANT && h->type < GOSSIP_MSG_SHARD_WANT + 0x10)
        return gossip_shards_recv(g->shards, from, h, p, len, now);
    return gossip_mix_recv(g->mix, from, h, p, len, now);
}

static int duo_tick(void *n, gossip_time_us now)
{
    sim_agent_state *g = n;
    int a = gossip_mix_tick(g->mix, now), b = gossip_shards_tick(g->shards, now);
    return a ? a : b;
}

static int duo_poll(void *n, gossip_send *out, gossip_time_us now)
{
    sim_agent_state *g = n;
    for (int k = 0; k < 2; k++) {
        int part = (g->rr + k) & 1;
        int rc = part ? gossip_shards_poll_send(g->shards, out, now)
                      : gossip_mix_poll_send(g->mix, out, now);
        if (rc == 1) {
            g->rr = (uint8_t)(part ^ 1);
            return 1;
        }
    }
    return 0;
}

static gossip_time_us duo_deadline(const void *n)
{
    const sim_agent_state *g = n;
    gossip_time_us a = gossip_mix_deadline(g->mix), b = gossip_shards_deadline(g->shards);
    return a < b ? a : b;
}

static const sim_node_ops duo_ops = {duo_recv, duo_tick, duo_poll, duo_deadline, NULL};

/* The agent's protocol object: its node (swim), its mixer and replicator
 * (oracle, protocol shards) or its mixer. */
static void agent_attach(runner *r, uint32_t i)
{
    sim_agent_state *g = &r->a[i];
    if (g->node)
        sim_engine_set_node(r->e, i, &sim_ops_node, g->node);
    else if (g->shards)
        sim_engine_set_node(r->e, i, &duo_ops, g);
    else
        sim_engine_set_node(r->e, i, &sim_ops_mix, g->mix);
}

/* Swim: install a transferred (or the agent's own) model once the node has
 * one; until then the agent neither trains nor mixes. */
static void node_model(runner *r, sim_agent_state *g)
{
    if (!g->node || g->ready)
        return;
    gossip_node_model st = gossip_node_model_state(g->node);
    if (st == GOSSIP_NODE_JOINING)
        return;
    if (st == GOSSIP_NODE_FETCHED) {
        uint64_t round;
        if (gossip_node_model_result(g->node, g->x, &round) != GOSSIP_OK)
            return;
        if (g->net)
            model_sgd_reset(&g->sgd);
        r->tally.transfers++;
    }
    if (st != GOSSIP_NODE_READY && gossip_node_model_adopt(g->node) != GOSSIP_OK)
        return;
    g->ready = 1;
}

void sim_agents_hook_prepare(void *ctx, uint32_t i)
{
    runner *r = ctx;
    if (r->swim) /* under the oracle: no node (and no cache miss on the agent) */
        node_model(r, &r->a[i]);
}

void sim_agents_hook_prefetch(void *ctx, uint32_t i)
{
    const runner *r = ctx;
    __builtin_prefetch(&r->a[i]);
}

void sim_agents_hook_after(void *ctx, uint32_t i)
{
    sim_agents_check_done(ctx, i);
}

uint64_t sim_agents_step_us(runner *r, uint32_t i)
{
    return sim_inject_step_us(r, i, sim_compute_step_us(r->comp, i));
}

/* Agent i's mixing round ended: its result goes to the schedule, which
 * applies it at the agent's next step (agent/runtime.c mixing_finish). A
 * blocking agent (mixing.overlap = false) applies it now and trains on. */
void sim_agents_check_done(runner *r, uint32_t i)
{
    sim_agent_state *g = &r->a[i];
    if (!g->mixing || !g->mix || gossip_mix_get_state(g->mix) != GOSSIP_MIX_DONE)
        return;
    int outcome = GOSSIP_OK;
    if (gossip_mix_take(g->mix, r->mix_out, &outcome) != GOSSIP_OK)
        return;
    g->mixing = 0;
    double dt = (double)(sim_engine_now_ns(r->e) - g->mix_start_ns) / 1e9;
    if (outcome == GOSSIP_OK) {
        g->mixes++;
        r->tally.mix_done++;
        r->tally.mix_time_sum += dt;
        if (dt > r->tally.mix_time_max)
            r->tally.mix_time_max = dt;
    } else {
        g->aborted++;
        r->tally.mix_aborted++;
    }
    /* a byzantine sender keeps its own model (sim/byzantine.h) */
    (void)gossip_sched_deliver(g->sched, sim_byzantine_result(r->byz, i, r->mix_out), outcome);
    if (r->sc->mixing.overlap)
        return;
    gossip_sched_before_step(g->sched, g->x);
    if (r->timed)
        schedule(r, sim_runner_now(r) + sim_agents_step_us(r, i), SIM_EV_STEP, i, 0, inc(r, i),
                 NULL);
}

/* The schedule's outgoing vector to the mixer (agent/runtime.c on_mixing):
 * a round starts, or, when none can run (alone, or no agreed model yet
 * under SWIM), the vector goes back as it is. Returns 1 if a round started. */
static int round_start(runner *r, uint32_t i)
{
    sim_agent_state *g = &r->a[i];
    const float *x = gossip_sched_outgoing(g->sched);
    if (!x)
        return 0;
    if (r->n >= 2 && (!r->swim || g->ready) && !g->mixing &&
        gossip_mix_start(g->mix, sim_byzantine_outgoing(r->byz, i, x), sim_runner_now(r)) ==
            GOSSIP_OK) {
        g->mixing = 1;
        g->mix_start_ns = sim_engine_now_ns(r->e);
        drain(r, i);
        sim_agents_check_done(r, i);
        return 1;
    }
    (void)gossip_sched_deliver(g->sched, x, GOSSIP_EINVAL);
    return 0;
}

int sim_agents_host_step(runner *r, uint32_t i)
{
    sim_agent_state *g = &r->a[i];
    gossip_sched_before_step(g->sched, g->x);
    if (!gossip_sched_after_step(g->sched, g->x, r->scfg.batch, 0))
        return 0;
    if (r->timed && sim_engine_loop_cost(r->e)) {
        /* The trainer wakes the event loop, which takes the round when it
         * is done with the frames before it (agent/api.c murmur_mix, then
         * on_mixing); a blocking agent waits meanwhile. */
        sim_engine_schedule_ns(r->e, sim_engine_loop_take(r->e, i, 0), SIM_EV_ROUND, i, 0,
                               inc(r, i), NULL);
        return 1;
    }
    return round_start(r, i);
}

void sim_agents_loop_round(runner *r, uint32_t i)
{
    if (!round_start(r, i) && !r->sc->mixing.overlap)
        schedule(r, sim_runner_now(r) + sim_agents_step_us(r, i), SIM_EV_STEP, i, 0, inc(r, i),
                 NULL);
}

/* Agent i's schedule (a new process starts a new one). */
static int agent_sched_create(runner *r, uint32_t i)
{
    sim_agent_state *g = &r->a[i];
    gossip_sched_destroy(g->sched);
    g->sched = NULL;
    int rc = gossip_sched_create(&g->sched, sim_engine_env(r->e, i), &r->scfg);
    if (rc)
        return sim_runner_fail(r, rc == GOSSIP_ENOMEM ? SIM_RUN_ENOMEM : SIM_RUN_EINVAL,
                               "schedule: %s", gossip_strerror(rc));
    return 0;
}

void sim_agents_view_change(runner *r)
{
    r->epoch++;
    if (!r->swim) {
        /* One shared view for every mixer; the other buffer held the last. */
        r->vcur ^= 1;
        uint64_t *ids = r->vids[r->vcur];
        uint32_t live = 0;
        for (uint32_t i = 0; i < r->n; i++)
            if (sim_runner_alive(r, i))
                ids[live++] = (uint64_t)i + 1;
        gossip_view v = {.epoch = r->epoch, .n = live, .ids = ids};
        gossip_mix_shared_view *sv = &r->views[r->vcur];
        if (gossip_mix_view_prepare(sv, &v) != GOSSIP_OK) {
            sim_runner_fail(r, SIM_RUN_EINVAL, "view of %u agents refused", live);
            return;
        }
        for (uint32_t i = 0; i < r->n; i++)
            if (sim_runner_alive(r, i) && r->a[i].mix)
                (void)gossip_mix_set_view_shared(r->a[i].mix, sv, sim_runner_now(r));
        sim_shardsim_view(r, &v);
    }
    for (uint32_t i = 0; i < r->n && !r->failed; i++)
        if (sim_runner_alive(r, i) && r->a[i].mix) {
            drain(r, i);
            if (r->timed)
                sim_agents_check_done(r, i);
        }
    sim_shardsim_update(r);
}

static int snapshot_model(void *ctx, float *out, uint32_t dim, uint64_t *round)
{
    const sim_agent_state *g = ctx;
    if (!g->node || !g->ready || dim != g->dim) /* a down agent has no node */
        return -1;
    memcpy(out, g->x, (size_t)dim * sizeof *out);
    *round = g->mixes;
    return 0;
}

/* Agent i's address is "sim://i" and its id i + 1 (agent_node_create): a
 * member's address follows from its id, and no simulated agent stores
 * the others' (gossip_swim_config.addr_of). */
static size_t sim_addr_of(void *ctx, uint64_t id, char *buf)
{
    (void)ctx;
    if (id == 0 || id > UINT32_MAX)
        return 0;
    /* by hand: called for every record of every full state (snprintf was
     * 9% of a 2 048-agent run) */
    char d[10];
    int k = 0;
    for (uint32_t v = (uint32_t)(id - 1);; v /= 10) {
        d[k++] = (char)('0' + v % 10);
        if (v < 10)
            break;
    }
    memcpy(buf, "sim://", 6);
    for (int j = 0; j < k; j++)
        buf[6 + j] = d[k - 1 - j];
    buf[6 + k] = 0;
    return 6u + (size_t)k;
}

/* Swim: agent i's protocol core; fetch: pull the model from peers first. */
static int agent_node_create(runner *r, uint32_t i, int fetch)
{
    const sim_scenario *sc = r->sc;
    sim_agent_state *g = &r->a[i];
    _Static_assert(sizeof g->addr >= 6 + 10 + 1, "sim://, 10 digits, NUL");
    sim_addr_of(NULL, (uint64_t)i + 1, g->addr); /* the one format of the address */
    gossip_node_config c;
    gossip_node_config_default(&c);
    c.self = (uint64_t)i + 1;
    c.self_addr = g->addr;
    /* The cluster's ids are 1..N (a restart keeps its id and its slot):
     * N slots hold every member, tombstones included; 8 spare. */
    uint32_t mm = r->n + 8;
    c.swim.members_max = mm < GOSSIP_MEMBERS_MAX ? mm : GOSSIP_MEMBERS_MAX;
    c.swim.probe_interval_us = (gossip_time_us)llround(sc->membership.probe_interval_ms * 1e3);
    c.swim.probe_timeout_us = (gossip_time_us)llround(sc->membership.probe_timeout_ms * 1e3);
    c.swim.suspicion_mult = sc->membership.suspicion_mult;
    c.swim.indirect_k = sc->membership.indirect_k;
    c.swim.addr_of = sim_addr_of;
    c.mix = r->mcfg;
    c.xfer.snapshot = snapshot_model;
    c.xfer.snapshot_ctx = g;
    c.fetch_model = fetch;
    (void)sim_shardsim_config(r, i, &c.shards); /* none: the node runs without */
    g->dim = r->dim;
    g->ready = 0;
    int rc = gossip_node_create(&g->node, sim_engine_env(r->e, i), &c);
    if (rc)
        return sim_runner_fail(r, rc == GOSSIP_ENOMEM ? SIM_RUN_ENOMEM : SIM_RUN_EINVAL, "node: %s",
                               gossip_strerror(rc));
    g->mix = gossip_node_mix(g->node);
    g->shards = gossip_node_shards(g->node);
    g->shards_own = 0;
    return 0;
}

/* Swim: join through up to 3 live agents drawn from the seed (none: found
 * the cluster). */
void sim_agents_join(runner *r, uint32_t i)
{
    const char *seeds[3];
    size_t ns = 0;
    uint32_t live = 0;
    for (uint32_t k = 0; k < r->n; k++)
        live += sim_runner_alive(r, k) && r->a[k].node && k != i;
    for (size_t t = 0; t < 3 && live; t++) {
        uint64_t pick = model_rng_below(&r->state, live);
        for (uint32_t k = 0; k < r->n; k++)
            if (sim_runner_alive(r, k) && r->a[k].node && k != i && pick-- == 0) {
                seeds[ns++] = r->a[k].addr;
                break;
            }
    }
    if (ns)
        (void)gossip_node_join(r->a[i].node, seeds, ns, sim_runner_now(r));
}

void sim_agents_destroy(runner *r, uint32_t i)
{
    sim_agent_state *g = &r->a[i];
    sim_engine_set_node(r->e, i, NULL, NULL);
    if (g->node)
        gossip_node_destroy(g->node);
    else if (g->mix)
        gossip_mix_destroy(g->mix);
    if (g->shards_own)
        gossip_shards_destroy(g->shards);
    gossip_sched_destroy(g->sched);
    g->node = NULL;
    g->mix = NULL;
    g->shards = NULL;
    g->shards_own = 0;
    g->sched = NULL;
    g->ready = 0;
}

static int agent_mix_create(runner *r, uint32_t i)
{
    if (r->swim)
        return agent_node_create(r, i, 0);
    gossip_mix_config c = r->mcfg;
    c.self = (uint64_t)i + 1;
    int rc = gossip_mix_create(&r->a[i].mix, sim_engine_env(r->e, i), &c);
    if (rc)
        return sim_runner_fail(r, rc == GOSSIP_ENOMEM ? SIM_RUN_ENOMEM : SIM_RUN_EINVAL,
                               "mixer: %s", gossip_strerror(rc));
    /* Protocol shards: a replicator on the agent's store (its view comes
     * with the next view change). */
    gossip_shards_config sc;
    if (sim_shardsim_config(r, i, &sc) == 0) {
        sim_agent_state *g = &r->a[i];
        model_rng_seed(&g->shards_rng, r->sc->run.seed, SIM_SALT_SHARDS + i);
        g->shards_env = r->renv;
        g->shards_env.random_ctx = &g->shards_rng;
        rc = gossip_shards_create(&g->shards, &g->shards_env, &sc);
        if (rc)
            return sim_runner_fail(r, rc == GOSSIP_ENOMEM ? SIM_RUN_ENOMEM : SIM_RUN_EINVAL,
                                   "shards: %s", gossip_strerror(rc));
        r->a[i].shards_own = 1;
    }
    return 0;
}

/* Create agent i's protocol object and put it on the engine, up (setup). */
int sim_agents_start(runner *r, uint32_t i)
{
    if (agent_mix_create(r, i) || agent_sched_create(r, i))
        return r->failed;
    agent_attach(r, i);
    sim_engine_up(r->e, i);
    r->a[i].present = 1;
    return 0;
}

/* Start (or restart) agent i at sim_runner_now(r). */
void sim_agents_up(runner *r, uint32_t i, int restart)
{
    sim_agent_state *g = &r->a[i];
    if (sim_runner_alive(r, i))
        return;
    sim_agents_destroy(r, i);
    if ((r->swim ? agent_node_create(r, i, 1) : agent_mix_create(r, i)) || agent_sched_create(r, i))
        return;
    agent_attach(r, i);
    if (r->swim && r->chk.seen_epoch) /* a new process numbers its views from 1 */
        r->chk.seen_epoch[i] = 0;
    sim_engine_up(r->e, i);
    g->present = 1;
    g->mixing = 0;
    /* State transfer: copy the model of a live agent drawn from the seed
     * (swim: the node pulls it from its peers, gossip/xfer, and the agent
     * keeps its last vector as its checkpoint until then). */
    uint32_t live = 0;
    for (uint32_t k = 0; k < r->n; k++)
        live += sim_runner_alive(r, k) && k != i;
    if (r->swim) {
        sim_agents_join(r, i);
        live = 0;
    }
    if (live) {
        uint64_t pick = model_rng_below(&r->state, live);
        for (uint32_t k = 0; k < r->n; k++)
            if (sim_runner_alive(r, k) && k != i && pick-- == 0) {
                memcpy(g->x, r->a[k].x, (size_t)r->dim * sizeof *g->x);
                break;
            }
    }
    if (g->net && !r->swim)
        model_sgd_reset(&g->sgd);
    r->tally.restarts += restart;
    sim_engine_trace(r->e, sim_runner_now(r));
    sim_engine_trace(r->e, 0x0F00000000000000ULL | i);
    sim_agents_view_change(r);
    if (r->timed)
        schedule(r, sim_runner_now(r) + sim_agents_step_us(r, i), SIM_EV_STEP, i, 0, inc(r, i),
                 NULL);
}

void sim_agents_down(runner *r, uint32_t i)
{
    sim_agent_state *g = &r->a[i];
    if (!sim_runner_alive(r, i))
        return;
    sim_shardsim_crash(r, i); /* its copies go with it */
    sim_engine_down(r->e, i);
    g->mixing = 0;
    r->tally.crashes++;
    if (r->swim) /* the process is gone, with its protocol state */
        sim_agents_destroy(r, i);
    sim_engine_trace(r->e, sim_runner_now(r));
    sim_engine_trace(r->e, 0xC000000000000000ULL | i);
    sim_agents_view_change(r);
}
