/* sim/invariants — the safety invariants of a checked run (opts->check,
 * the soak): at a quiet point (between rounds, at a sample or a fault)
 * every live model is finite and every live mixer holds the current view
 * with an epoch that never went back; the shard-loss check is in
 * shardsim.c. The first violation (with its time) and the count go to the
 * summary. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "sim/runner.h"

int sim_checks_init(runner *r)
{
    r->chk.seen_epoch = calloc(r->n, sizeof *r->chk.seen_epoch);
    return r->chk.seen_epoch ? 0 : sim_runner_fail(r, SIM_RUN_ENOMEM, "out of memory (checks)");
}

void sim_checks_free(runner *r)
{
    free(r->chk.seen_epoch);
    r->chk.seen_epoch = NULL;
}

void sim_checks_violate(runner *r, const char *fmt, ...)
{
    if (!r->opts->check)
        return;
    if (r->chk.violations++ == 0) {
        int k = snprintf(r->chk.violation, sizeof r->chk.violation,
                         "t=%.6f s: ", (double)sim_runner_now(r) / 1e6);
        if (k < 0 || (size_t)k >= sizeof r->chk.violation)
            k = 0;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->chk.violation + k, sizeof r->chk.violation - (size_t)k, fmt, ap);
        va_end(ap);
    }
}

/* Safety invariants at a quiet point (between rounds, at a sample or a
 * fault): every live model finite; every live mixer holds the current view
 * and its epoch never went back. */
void sim_checks_run(runner *r)
{
    if (!r->opts->check)
        return;
    for (uint32_t i = 0; i < r->n; i++) {
        sim_agent_state *g = &r->a[i];
        if (!sim_runner_alive(r, i) || !g->mix)
            continue;
        for (uint32_t j = 0; j < r->dim; j++)
            if (!isfinite(g->x[j])) {
                sim_checks_violate(r, "agent %u: parameter %u is not finite (%g)", i, j,
                                   (double)g->x[j]);
                break;
            }
        uint64_t e = gossip_mix_view_epoch(g->mix);
        if (e < r->chk.seen_epoch[i])
            sim_checks_violate(r, "agent %u: view epoch went back from %llu to %llu", i,
                               (unsigned long long)r->chk.seen_epoch[i], (unsigned long long)e);
        else if (!r->swim && e != r->epoch)
            sim_checks_violate(r, "agent %u: view epoch %llu, current view is %llu", i,
                               (unsigned long long)e, (unsigned long long)r->epoch);
        if (e > r->chk.seen_epoch[i])
            r->chk.seen_epoch[i] = e;
    }
    /* Protocol shards under SWIM: each agent's primaries in its own view
     * (under the oracle they are checked at every view change). */
    if (r->swim)
        sim_shardsim_primaries(r);
}
