/* sim/report — what a run reports: a sample of the population (mean loss
 * and accuracy of the live agents, consensus distance, bytes; series.csv
 * rows, per agent when output.per_agent) and the figures of summary.json. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "sim/runner.h"

uint64_t sim_report_round(const runner *r, uint64_t rounds)
{
    if (!r->timed)
        return rounds;
    uint64_t m = 0;
    for (uint32_t i = 0; i < r->n; i++)
        m += r->a[i].mixes;
    return m / r->n;
}

void sim_report_sample(runner *r, uint64_t rounds)
{
    double ls = 0, as = 0;
    uint32_t nl = 0, na = 0, live = 0;
    uint64_t sent = 0, recv = 0;
    const float **vecs = malloc((size_t)r->n * sizeof *vecs);
    if (!vecs) {
        sim_runner_fail(r, SIM_RUN_ENOMEM, "out of memory (sample)");
        return;
    }
    int per = r->sc->output.per_agent && r->rep.out_open;
    for (uint32_t i = 0; i < r->n; i++) {
        sim_agent_state *g = &r->a[i];
        uint64_t gs = sim_engine_bytes_sent(r->e, i), gr = sim_engine_bytes_recv(r->e, i);
        sent += gs;
        recv += gr;
        /* byzantine senders (sim/byzantine.h) are not the population */
        int counted = sim_runner_alive(r, i) && !sim_byzantine_agent(r->byz, i);
        vecs[i] = counted ? g->x : NULL;
        if (!counted)
            continue;
        live++;
        double l, a;
        sim_models_eval(r, i, &l, &a);
        if (isfinite(l))
            ls += l, nl++;
        if (isfinite(a))
            as += a, na++;
        if (per) {
            sim_series_row row = {
                (double)sim_runner_now(r) / 1e6, sim_report_round(r, rounds), i, l, a, NAN, gs, gr};
            if (sim_output_row(&r->rep.out, &row) != 0)
                sim_runner_fail(r, SIM_RUN_EIO, "%s: write error", r->rep.out.path);
        }
    }
    double cd = live ? sim_consensus_distance_ptrs(vecs, r->n, r->dim) : NAN;
    free(vecs);
    r->rep.last_loss = nl ? ls / nl : NAN;
    r->rep.last_acc = na ? as / na : NAN;
    r->rep.last_cd = cd;
    if (r->rep.rows == 0)
        r->rep.first_cd = cd;
    double now_s = (double)sim_runner_now(r) / 1e6;
    int at_target = isfinite(r->rep.last_acc) && r->rep.last_acc >= r->sc->run.target_accuracy;
    if (isnan(r->rep.target_time) && at_target)
        r->rep.target_time = now_s;
    if (!at_target)
        r->rep.target_since = NAN;
    else if (isnan(r->rep.target_since))
        r->rep.target_since = now_s;
    (void)sim_diverge_sample(&r->rep.div, now_s, sim_report_round(r, rounds), live,
                             r->rep.last_loss, cd);
    if (r->rep.out_open) {
        sim_series_row row = {(double)sim_runner_now(r) / 1e6,
                              sim_report_round(r, rounds),
                              SIM_AGENT_ALL,
                              r->rep.last_loss,
                              r->rep.last_acc,
                              cd,
                              sent,
                              recv};
        if (sim_output_row(&r->rep.out, &row) != 0)
            sim_runner_fail(r, SIM_RUN_EIO, "%s: write error", r->rep.out.path);
    }
    r->rep.rows++;
    if (r->opts->on_sample) {
        const sim_engine_stats *es = sim_engine_get_stats(r->e);
        sim_observation o = {.time_s = now_s,
                             .agents = r->n,
                             .consensus_distance = cd,
                             .shards_lost = r->sh.shards_lost,
                             .shards_under_replicated = sim_shardsim_under_replicated(r),
                             .frames_lost = es->dropped,
                             .frames_corrupted = r->corrupted,
                             .frames_delayed = sim_inject_frames_delayed(r),
                             .frames_duplicated = es->duplicated,
                             .fault_events = r->faults.len,
                             .fault_events_applied = r->tally.faults,
                             .run = r};
        while (o.fault_events_due < r->faults.len &&
               r->faults.events[o.fault_events_due].time_us < sim_runner_now(r))
            o.fault_events_due++;
        r->opts->on_sample(r->opts->sample_ctx, &o);
    }
}

void sim_observation_agent(const sim_observation *o, uint32_t i, sim_agent_observation *out)
{
    const runner *r = o->run;
    const sim_agent_state *g = &r->a[i];
    out->live = sim_runner_alive(r, i);
    out->paused = g->paused;
    out->steps = g->steps;
    out->peers = 0;
    out->bytes_sent = sim_engine_bytes_sent(r->e, i);
    if (!out->live)
        return;
    if (r->swim && g->node) {
        gossip_view v;
        gossip_swim_view(gossip_node_swim(g->node), &v);
        out->peers = v.n ? v.n - 1 : 0;
    } else {
        for (uint32_t k = 0; k < r->n; k++)
            out->peers += k != i && sim_runner_alive(r, k);
    }
}

/* Fill *out with the run's figures (the run did not fail). */
void sim_report_summary(runner *r, uint64_t rounds, sim_summary *out)
{
    const sim_scenario *sc = r->sc;
    const sim_run_opts *opts = r->opts;
    out->seed = sc->run.seed;
    out->trace_hash = sim_engine_trace_hash(r->e);
    out->events = sim_engine_get_stats(r->e)->events;
    out->sim_time_s = (double)sim_runner_now(r) / 1e6;
    out->rounds = r->timed ? sim_report_round(r, 0) : rounds;
    uint64_t steps = 0, total = 0, maxb = 0;
    for (uint32_t i = 0; i < r->n; i++) {
        uint64_t b = sim_engine_bytes_sent(r->e, i);
        steps += r->a[i].steps;
        total += b;
        if (b > maxb)
            maxb = b;
    }
    out->steps_total = steps;
    out->bytes_total = total;
    out->bytes_per_agent_max = maxb;
    out->final_accuracy = r->rep.last_acc;
    out->time_to_target_s = r->rep.target_time;
    out->time_to_target_sustained_s = r->rep.target_since;
    out->interrupted = r->interrupted;
    out->diverged = r->rep.div.diverged;
    out->diverged_round = r->rep.div.round;
    out->diverged_time_s = r->rep.div.time_s;
    snprintf(out->diverged_reason, sizeof out->diverged_reason, "%s", r->rep.div.reason);
    out->consensus_distance_final = r->rep.last_cd;
    out->shards_lost = r->sh.shards_lost;
    out->agents = r->n;
    out->final_loss = r->rep.last_loss;
    out->messages = sim_engine_get_stats(r->e)->sent;
    out->messages_lost = sim_engine_get_stats(r->e)->lost;
    out->memory_per_agent_bytes = r->rep.mem_per_agent;
    if (opts->label)
        snprintf(out->label, sizeof out->label, "%s", opts->label);
    if (opts->scenario)
        snprintf(out->scenario, sizeof out->scenario, "%s", opts->scenario);
    (void)sim_summary_add(out, "params", r->dim);
    (void)sim_summary_add(out, "mix_rounds_completed", (double)r->tally.mix_done);
    (void)sim_summary_add(out, "mix_rounds_aborted", (double)r->tally.mix_aborted);
    (void)sim_summary_add(out, "mix_time_mean_s",
                          r->tally.mix_done ? r->tally.mix_time_sum / (double)r->tally.mix_done
                                            : NAN);
    (void)sim_summary_add(out, "mix_time_max_s", r->tally.mix_done ? r->tally.mix_time_max : NAN);
    (void)sim_summary_add(out, "steps_per_s",
                          out->sim_time_s > 0 ? (double)steps / out->sim_time_s : NAN);
    (void)sim_summary_add(out, "crashes", (double)r->tally.crashes);
    (void)sim_summary_add(out, "restarts", (double)r->tally.restarts);
    if (r->sh.protocol) /* copies the replicators made (gossip/shards) */
        (void)sim_summary_add(out, "shard_copies", (double)r->sh.commits);
    else if (r->sh.nshards) /* the oracle's fixed copy time */
        (void)sim_summary_add(out, "shard_copy_s", (double)r->sh.copy_us / 1e6);
    uint32_t live = 0;
    for (uint32_t i = 0; i < r->n; i++)
        live += sim_runner_alive(r, i);
    (void)sim_summary_add(out, "agents_live_final", live);
    (void)sim_summary_add(out, "shards_under_replicated_final", sim_shardsim_under_replicated(r));
    (void)sim_summary_add(out, "consensus_distance_initial", r->rep.first_cd);
    if (r->sh.nshards && live) {
        sim_shardsim_primaries(r); /* protocol: the agents' own placements now */
        uint64_t steps_min = UINT64_MAX;
        for (uint32_t i = 0; i < r->n; i++)
            if (sim_runner_alive(r, i) && r->a[i].steps < steps_min)
                steps_min = r->a[i].steps;
        (void)sim_summary_add(out, "primaries_min", r->sh.prim_min);
        (void)sim_summary_add(out, "primaries_max", r->sh.prim_max);
        (void)sim_summary_add(out, "steps_min_live", (double)steps_min);
    }
    if (r->swim) {
        /* Live agents whose SWIM view is not exactly the live set. */
        uint32_t off = 0;
        for (uint32_t i = 0; i < r->n; i++) {
            if (!sim_runner_alive(r, i) || !r->a[i].node)
                continue;
            gossip_view v;
            gossip_node_view(r->a[i].node, &v);
            int same = v.n == live;
            for (uint32_t k = 0; k < v.n && same; k++)
                same = v.ids[k] >= 1 && v.ids[k] <= r->n &&
                       sim_runner_alive(r, (uint32_t)(v.ids[k] - 1));
            off += !same;
        }
        (void)sim_summary_add(out, "views_wrong_final", off);
        (void)sim_summary_add(out, "state_transfers", (double)r->tally.transfers);
    }
    out->violations = r->chk.violations;
    snprintf(out->violation, sizeof out->violation, "%s", r->chk.violation);
    if (opts->check)
        (void)sim_summary_add(out, "invariant_violations", (double)r->chk.violations);
}
