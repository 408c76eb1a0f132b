/* sim/inject — the fault list (sim/faults.h) applied to a run: crashes,
 * restarts and joins of agents, partitions and loss on the engine's
 * network, slow CPUs in the compute model. Every fault is traced. */
#include <stdlib.h>
#include <string.h>

#include "sim/runner.h"

static void apply_fault_kind(runner *r, const sim_fault *ft);

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
    }
}
