/* sim/inject — the fault list (sim/faults.h) applied to a run: crashes,
 * restarts and joins of agents, partitions and loss on the engine's
 * network, slow CPUs in the compute model, paused agents and corrupted
 * frames (through the engine's filter hook, sim_inject_filter); the link
 * faults of the agent's [faults] section (delay with jitter, a bandwidth
 * cap, duplicates, reordering: the engine's delay and duplicate hooks and
 * the network's bandwidth); and the trace files (sim/trace) of a scenario:
 * bandwidth and latency changes as fault events, CPU availability by
 * stretching each step. Every fault is traced. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/runner.h"

/* Stream of the link faults' draws (jitter, reordering, duplicates). */
#define SIM_SALT_LINK 0x5155000000000005ULL

/* Link faults of one agent, on the frames it sends. */
typedef struct link_rule {
    double delay_ms, jitter_ms;
    double dup_p;
    double drop_p;
    double reorder_p, window_ms;
} link_rule;

/* Rules of one sender for single peers (fault lines with peer=K), as the
 * agent's transport holds at most NET_FAULTS_RULES_MAX - 1 of them. */
#define PEER_RULES_MAX 63u

typedef struct peer_rule {
    uint32_t to;
    link_rule r;
} peer_rule;

typedef struct agent_rules {
    link_rule all;
    peer_rule *peers;
    uint32_t npeers;
} agent_rules;

struct sim_inject {
    uint32_t n;
    agent_rules *rule;   /* per agent; NULL until a link fault is applied */
    double *trace_mbps;  /* bandwidth trace value per agent, 0 = none */
    double *cap_mbps;    /* bandwidth fault cap per agent, 0 = none */
    double base_up_mbps; /* the scenario's (0 = unlimited) */
    double base_down_mbps;
    sim_trace avail;   /* compute.availability_trace */
    uint8_t *avail_on; /* agents that follow it; NULL = none */
    model_rng rng;
    uint64_t delayed; /* frames the delay hook held (delay, jitter, reorder) */
};

static void apply_fault_kind(runner *r, const sim_fault *ft);

static int load_trace(runner *r, sim_trace *t, sim_trace_kind kind, const char *path,
                      const char *set_key, const char *set, uint8_t **member)
{
    char msg[512];
    if (sim_trace_load(t, kind, path, msg, sizeof msg))
        return sim_runner_fail(r, SIM_RUN_EIO, "%s", msg);
    *member = malloc(r->n);
    if (!*member)
        return sim_runner_fail(r, SIM_RUN_ENOMEM, "out of memory (traces)");
    if (sim_faults_targets(set, r->n, *member, msg, sizeof msg))
        return sim_runner_fail(r, SIM_RUN_EINVAL, "%s = %s: %s", set_key, set, msg);
    return 0;
}

int sim_inject_init(runner *r)
{
    const sim_scenario *sc = r->sc;
    sim_inject *in = calloc(1, sizeof *in);
    if (!in)
        return sim_runner_fail(r, SIM_RUN_ENOMEM, "out of memory (faults)");
    r->inj = in;
    in->n = r->n;
    in->base_up_mbps =
        sc->network.upload_mbps >= 0 ? sc->network.upload_mbps : sc->network.bandwidth_mbps;
    in->base_down_mbps =
        sc->network.download_mbps >= 0 ? sc->network.download_mbps : sc->network.bandwidth_mbps;
    model_rng_seed(&in->rng, sc->run.seed, SIM_SALT_LINK);
    if (!r->timed)
        return 0; /* traces and delays are timed-mode keys (sim_scenario_check) */
    struct {
        const char *path, *set_key, *set;
        sim_trace_kind tk;
        sim_fault_kind fk;
    } traces[] = {
        {sc->network.bandwidth_trace, "network.bandwidth_trace_agents",
         sc->network.bandwidth_trace_agents, SIM_TRACE_BANDWIDTH, SIM_FAULT_BANDWIDTH_TRACE},
        {sc->network.latency_trace, "network.latency_trace_agents",
         sc->network.latency_trace_agents, SIM_TRACE_LATENCY, SIM_FAULT_LATENCY_TRACE},
    };
    for (size_t k = 0; k < sizeof traces / sizeof traces[0]; k++) {
        if (!traces[k].path[0])
            continue;
        sim_trace t;
        uint8_t *member = NULL;
        char msg[512];
        int rc = load_trace(r, &t, traces[k].tk, traces[k].path, traces[k].set_key, traces[k].set,
                            &member);
        if (!rc && sim_faults_add_trace(&r->faults, traces[k].fk, &t, member, r->end_us + 1, msg,
                                        sizeof msg))
            rc = sim_runner_fail(r, SIM_RUN_EFAULTS, "%s: %s", traces[k].path, msg);
        sim_trace_free(&t);
        free(member);
        if (rc)
            return rc;
    }
    if (sc->compute.availability_trace[0] &&
        load_trace(r, &in->avail, SIM_TRACE_AVAILABILITY, sc->compute.availability_trace,
                   "compute.availability_trace_agents", sc->compute.availability_trace_agents,
                   &in->avail_on))
        return r->failed;
    return 0;
}

void sim_inject_free(runner *r)
{
    sim_inject *in = r->inj;
    if (!in)
        return;
    if (in->rule)
        for (uint32_t i = 0; i < in->n; i++)
            free(in->rule[i].peers);
    free(in->rule);
    free(in->trace_mbps);
    free(in->cap_mbps);
    sim_trace_free(&in->avail);
    free(in->avail_on);
    free(in);
    r->inj = NULL;
}

uint64_t sim_inject_step_us(runner *r, uint32_t i, uint64_t work_us)
{
    sim_inject *in = r->inj;
    if (!in || !in->avail_on || !in->avail_on[i])
        return work_us;
    uint64_t now = sim_runner_now(r);
    uint64_t end = sim_trace_work_end_us(&in->avail, now, work_us);
    /* availability 0 for good: the agent computes nothing more this run */
    if (end == UINT64_MAX || end - now > UINT64_MAX / 4)
        return UINT64_MAX / 4;
    return end - now;
}

/* The agent's uplink and downlink from its trace, its cap and the
 * scenario's: a cap lowers the uplink (an unlimited one to the cap). */
static void apply_bandwidth(runner *r, uint32_t a)
{
    sim_inject *in = r->inj;
    sim_net *net = sim_engine_net(r->e);
    if (!net)
        return;
    double tr = in->trace_mbps ? in->trace_mbps[a] : 0;
    double up = tr > 0 ? tr : in->base_up_mbps, down = tr > 0 ? tr : in->base_down_mbps;
    double cap = in->cap_mbps ? in->cap_mbps[a] : 0;
    if (cap > 0 && (up <= 0 || cap < up))
        up = cap;
    if (sim_net_set_bandwidth(net, a, up * 1e6, down * 1e6, sim_engine_now_ns(r->e)) != SIM_NET_OK)
        sim_runner_fail(r, SIM_RUN_EINVAL, "network: bandwidth of agent %u", a);
}

static int ensure(runner *r, void **arr, size_t size)
{
    if (*arr)
        return 0;
    *arr = calloc(r->n, size);
    if (!*arr)
        return sim_runner_fail(r, SIM_RUN_ENOMEM, "out of memory (faults)");
    return 0;
}

/* The rule a fault line changes: the all-peers rule, or the one for
 * `peer` (created empty when missing; NULL when the run failed). */
static link_rule *rule_for(runner *r, agent_rules *a, int32_t peer)
{
    if (peer < 0)
        return &a->all;
    for (uint32_t k = 0; k < a->npeers; k++)
        if (a->peers[k].to == (uint32_t)peer)
            return &a->peers[k].r;
    if (a->npeers == PEER_RULES_MAX) {
        sim_runner_fail(r, SIM_RUN_EFAULTS,
                        "faults: more than %u link faults for single peers on one agent at once",
                        PEER_RULES_MAX);
        return NULL;
    }
    peer_rule *np = realloc(a->peers, (a->npeers + 1) * sizeof *np);
    if (!np) {
        sim_runner_fail(r, SIM_RUN_ENOMEM, "out of memory (faults)");
        return NULL;
    }
    a->peers = np;
    a->peers[a->npeers] = (peer_rule){.to = (uint32_t)peer};
    return &a->peers[a->npeers++].r;
}

/* A peer's rule with no fault left is removed: the all-peers rule holds
 * for that peer again. */
static void prune(agent_rules *a)
{
    for (uint32_t k = 0; k < a->npeers;) {
        const link_rule *l = &a->peers[k].r;
        if (l->delay_ms == 0 && l->jitter_ms == 0 && l->dup_p == 0 && l->reorder_p == 0 &&
            l->drop_p == 0)
            a->peers[k] = a->peers[--a->npeers];
        else
            k++;
    }
}

static void apply_link_fault(runner *r, const sim_fault *ft)
{
    sim_inject *in = r->inj;
    const uint32_t *t = r->faults.targets + ft->first;
    if (ft->kind == SIM_FAULT_BANDWIDTH || ft->kind == SIM_FAULT_BANDWIDTH_END ||
        ft->kind == SIM_FAULT_BANDWIDTH_TRACE) {
        int trace = ft->kind == SIM_FAULT_BANDWIDTH_TRACE;
        if (ensure(r, trace ? (void **)&in->trace_mbps : (void **)&in->cap_mbps, sizeof(double)))
            return;
        for (uint32_t k = 0; k < ft->count && !r->failed; k++) {
            if (trace)
                in->trace_mbps[t[k]] = ft->value;
            else
                in->cap_mbps[t[k]] = ft->kind == SIM_FAULT_BANDWIDTH ? ft->value : 0;
            apply_bandwidth(r, t[k]);
        }
        return;
    }
    if (ft->kind == SIM_FAULT_LATENCY_TRACE) {
        sim_net *net = sim_engine_net(r->e);
        for (uint32_t k = 0; k < ft->count && net; k++)
            if (sim_net_set_latency(net, t[k], ft->value) != SIM_NET_OK)
                sim_runner_fail(r, SIM_RUN_ENOMEM, "network: latency of agent %u", t[k]);
        return;
    }
    if (ensure(r, (void **)&in->rule, sizeof *in->rule))
        return;
    for (uint32_t k = 0; k < ft->count && !r->failed; k++) {
        link_rule *l = rule_for(r, &in->rule[t[k]], ft->peer);
        if (!l)
            return;
        switch (ft->kind) {
        case SIM_FAULT_DELAY:
        case SIM_FAULT_DELAY_END:
            l->delay_ms = ft->kind == SIM_FAULT_DELAY ? ft->value : 0;
            l->jitter_ms = ft->kind == SIM_FAULT_DELAY ? ft->value2 : 0;
            break;
        case SIM_FAULT_DUPLICATE:
        case SIM_FAULT_DUPLICATE_END:
            l->dup_p = ft->kind == SIM_FAULT_DUPLICATE ? ft->value : 0;
            break;
        case SIM_FAULT_DROP:
        case SIM_FAULT_DROP_END:
            l->drop_p = ft->kind == SIM_FAULT_DROP ? ft->value : 0;
            break;
        case SIM_FAULT_REORDER:
        case SIM_FAULT_REORDER_END:
            l->reorder_p = ft->kind == SIM_FAULT_REORDER ? ft->value : 0;
            l->window_ms = ft->kind == SIM_FAULT_REORDER ? ft->value2 : 0;
            break;
        default:
            break;
        }
        if (ft->peer >= 0)
            prune(&in->rule[t[k]]);
    }
}

/* The rule a frame from -> to follows: the sender's rule for that peer
 * while it has one, else its all-peers rule. */
static const link_rule *rule_of(const sim_inject *in, uint32_t from, uint32_t to)
{
    const agent_rules *a = &in->rule[from];
    for (uint32_t k = 0; k < a->npeers; k++)
        if (a->peers[k].to == to)
            return &a->peers[k].r;
    return &a->all;
}

uint64_t sim_inject_delay(void *ctx, uint32_t from, uint32_t to)
{
    runner *r = ctx;
    sim_inject *in = r->inj;
    if (!in || !in->rule)
        return 0;
    const link_rule *l = rule_of(in, from, to);
    double ms = l->delay_ms;
    if (l->jitter_ms > 0)
        ms += l->jitter_ms * model_rng_uniform_double(&in->rng);
    if (l->reorder_p > 0 && model_rng_uniform_double(&in->rng) < l->reorder_p)
        ms += l->window_ms * model_rng_uniform_double(&in->rng);
    in->delayed += ms > 0;
    return (uint64_t)llround(ms * 1000.0);
}

uint64_t sim_inject_frames_delayed(const runner *r)
{
    return r->inj ? r->inj->delayed : 0;
}

int sim_inject_duplicate(void *ctx, uint32_t from, uint32_t to)
{
    runner *r = ctx;
    sim_inject *in = r->inj;
    if (!in || !in->rule)
        return 0;
    double p = rule_of(in, from, to)->dup_p;
    return p > 0 && model_rng_uniform_double(&in->rng) < p;
}

int sim_inject_drop(void *ctx, uint32_t from, uint32_t to)
{
    runner *r = ctx;
    sim_inject *in = r->inj;
    if (!in || !in->rule)
        return 0;
    double p = rule_of(in, from, to)->drop_p;
    return p > 0 && model_rng_uniform_double(&in->rng) < p;
}

/* The CPU of a paused agent: a step begun in a pause of d seconds takes
 * about d (the step time is drawn when it starts, so a stopped CPU is a
 * step as long as the pause; a pause until the end, the slowest CPU). */
static double pause_slow(const runner *r, double pause_s)
{
    double step_ms = r->sc->compute.step_ms > 0 ? r->sc->compute.step_ms : 1;
    double f = pause_s > 0 ? pause_s * 1000.0 / step_ms : SIM_COMPUTE_SLOWDOWN_MAX;
    return f < 1 ? 1 : f > SIM_COMPUTE_SLOWDOWN_MAX ? SIM_COMPUTE_SLOWDOWN_MAX : f;
}

void sim_inject_fault(runner *r, const sim_fault *ft)
{
    r->tally.faults++;
    apply_fault_kind(r, ft);
    sim_checks_run(r);
}

static void apply_fault_kind(runner *r, const sim_fault *ft)
{
    const uint32_t *t = r->faults.targets + ft->first;
    sim_engine_trace(r->e, ft->time_us);
    sim_engine_trace(r->e, ft->kind);
    switch (ft->kind) {
    case SIM_FAULT_CRASH:
        for (uint32_t k = 0; k < ft->count; k++)
            sim_agents_down(r, t[k]);
        break;
    case SIM_FAULT_RESTART:
        for (uint32_t k = 0; k < ft->count; k++)
            if (r->a[t[k]].present)
                sim_agents_up(r, t[k], 1);
        break;
    case SIM_FAULT_JOIN:
        for (uint32_t k = 0; k < ft->count; k++)
            if (!r->a[t[k]].present)
                sim_agents_up(r, t[k], 0);
        break;
    case SIM_FAULT_PARTITION: {
        if (!r->group && !(r->group = calloc(r->n, sizeof *r->group))) {
            sim_runner_fail(r, SIM_RUN_ENOMEM, "out of memory (partition)");
            return;
        }
        memset(r->group, 0, r->n * sizeof *r->group);
        for (uint32_t k = 0; k < ft->count; k++)
            r->group[t[k]] = r->faults.groups[ft->first + k];
        if (sim_engine_set_partition(r->e, r->group) != SIM_ENGINE_OK)
            sim_runner_fail(r, SIM_RUN_ENOMEM, "out of memory (partition)");
        break;
    }
    case SIM_FAULT_HEAL:
        free(r->group);
        r->group = NULL;
        sim_engine_set_partition(r->e, NULL);
        break;
    case SIM_FAULT_LOSS_START:
    case SIM_FAULT_LOSS_END: {
        double p = r->sc->network.loss;
        if (ft->kind == SIM_FAULT_LOSS_START && ft->value > p)
            p = ft->value;
        sim_engine_set_loss(r->e, p);
        break;
    }
    case SIM_FAULT_SLOW:
    case SIM_FAULT_SLOW_END:
        for (uint32_t k = 0; k < ft->count; k++)
            sim_compute_set_slow(r->comp, t[k], ft->kind == SIM_FAULT_SLOW ? ft->value : 1.0);
        break;
    case SIM_FAULT_PAUSE:
    case SIM_FAULT_RESUME: {
        /* SIGSTOP as the peers see it: the agent answers nothing and
         * computes nothing, and keeps its state. Its timers still run, so
         * on resume it finds every peer silent for the pause, as a
         * SIGCONT'd process does. */
        uint8_t on = ft->kind == SIM_FAULT_PAUSE;
        for (uint32_t k = 0; k < ft->count; k++) {
            sim_agent_state *g = &r->a[t[k]];
            if (g->paused == on)
                continue;
            g->paused = on;
            r->n_paused += on ? 1u : (uint32_t)-1;
            sim_compute_set_slow(r->comp, t[k], on ? pause_slow(r, ft->value) : 1.0);
        }
        break;
    }
    case SIM_FAULT_CORRUPT_START:
    case SIM_FAULT_CORRUPT_END:
        r->corrupt_p = ft->kind == SIM_FAULT_CORRUPT_START ? ft->value : 0;
        break;
    case SIM_FAULT_DELAY:
    case SIM_FAULT_DELAY_END:
    case SIM_FAULT_BANDWIDTH:
    case SIM_FAULT_BANDWIDTH_END:
    case SIM_FAULT_DUPLICATE:
    case SIM_FAULT_DUPLICATE_END:
    case SIM_FAULT_REORDER:
    case SIM_FAULT_REORDER_END:
    case SIM_FAULT_BANDWIDTH_TRACE:
    case SIM_FAULT_LATENCY_TRACE:
    case SIM_FAULT_DROP:
    case SIM_FAULT_DROP_END:
        apply_link_fault(r, ft);
        break;
    }
}

int sim_inject_filter(void *ctx, uint32_t from, uint32_t to, uint8_t *frame, size_t len)
{
    runner *r = ctx;
    if (r->n_paused && (r->a[from].paused || r->a[to].paused))
        return 1;
    if (r->corrupt_p > 0 && len > GOSSIP_HEADER_SIZE &&
        model_rng_uniform_double(&r->corrupt_rng) < r->corrupt_p) {
        /* One bit of the payload flipped on the wire. Every frame of a
         * real agent is sealed by net/channel (ChaCha20-Poly1305), whose
         * tag check refuses it (a forgery passes with probability 2^-128):
         * the receiver loses the frame, as here. Without that check the
         * core would see the damaged bytes: the soak's seed 33 showed
         * SWIM taking a damaged member record into its view (phantom and
         * wrongly dead members), so the channel's MAC is what protects
         * the membership, and the decoders' robustness to arbitrary bytes
         * is the fuzzers' job (tests/fuzz). */
        uint64_t bit = model_rng_below(&r->corrupt_rng, (uint64_t)(len - GOSSIP_HEADER_SIZE) * 8u);
        frame[GOSSIP_HEADER_SIZE + bit / 8] ^= (uint8_t)(1u << (bit % 8));
        r->corrupted++;
        return 1;
    }
    return 0;
}
