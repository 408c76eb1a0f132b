/* sim/inject — the fault list (sim/faults.h) applied to a run: crashes,
 * restarts and joins of agents, partitions and loss on the engine's
 * network, slow CPUs in the compute model, paused agents and corrupted
 * frames (through the engine's filter hook, sim_inject_filter). Every
 * fault is traced. */
#include <stdlib.h>
#include <string.h>

#include "sim/runner.h"

static void apply_fault_kind(runner *r, const sim_fault *ft);

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
