/* sim/run — one simulation run: setup, the two main loops, teardown. The
 * parts of a run (models, agents, faults, shards, invariants, report) are
 * in their own files; sim/runner.h lists them. */
#include "sim/run.h"

#include <malloc.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim/arena.h"
#include "sim/plot.h"
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

const char *sim_run_strerror(int err)
{
    switch (err) {
    case SIM_RUN_OK:
        return "ok";
    case SIM_RUN_EINVAL:
        return "scenario cannot run";
    case SIM_RUN_ENOMEM:
        return "out of memory";
    case SIM_RUN_EIO:
        return "i/o error";
    case SIM_RUN_EMODEL:
        return "model or data error";
    case SIM_RUN_EFULL:
        return "event queue or network full";
    case SIM_RUN_EFAULTS:
        return "fault list error";
    default:
        return "unknown error";
    }
}

int sim_runner_fail(runner *r, int code, const char *fmt, ...)
{
    if (!r->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->err, sizeof r->err, fmt, ap);
        va_end(ap);
        r->failed = code;
    }
    return code;
}

int sim_runner_failed(runner *r)
{
    if (!r->failed && sim_engine_failed(r->e))
        sim_runner_fail(
            r, sim_engine_failed(r->e) == SIM_ENGINE_ENOMEM ? SIM_RUN_ENOMEM : SIM_RUN_EFULL, "%s",
            sim_engine_error(r->e));
    return r->failed;
}

static double wall_since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + 1e-9 * (double)(t.tv_nsec - t0->tv_nsec);
}

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

static void progress(runner *r, uint64_t rounds)
{
    uint64_t events = sim_engine_get_stats(r->e)->events;
    /* timed: look at the clock every 4096 events only (a round is long) */
    if ((r->opts->quiet && !r->opts->on_progress) || (r->timed && (events & 4095) != 0))
        return;
    double p = r->opts->progress_s > 0 ? r->opts->progress_s : 5.0;
    if (wall_since(&r->last_print) < p)
        return;
    clock_gettime(CLOCK_MONOTONIC, &r->last_print);
    double w = wall_since(&r->t0);
    if (r->opts->on_progress) {
        double now_s = (double)sim_runner_now(r) / 1e6;
        double frac = r->timed ? (r->sc->run.duration_s > 0 ? now_s / r->sc->run.duration_s : 1)
                               : (double)rounds / r->sc->run.rounds;
        r->opts->on_progress(r->opts->hook_ctx, frac, now_s, events);
        return;
    }
    FILE *f = r->opts->progress ? r->opts->progress : stderr;
    if (r->timed)
        fprintf(f, "sim: t=%.3f/%.3f s  events %llu (%.3g/s)  wall %.1f s\n",
                (double)sim_runner_now(r) / 1e6, r->sc->run.duration_s, (unsigned long long)events,
                events / w, w);
    else
        fprintf(f, "sim: round %llu/%u  events %llu (%.3g/s)  wall %.1f s\n",
                (unsigned long long)rounds, r->sc->run.rounds, (unsigned long long)events,
                events / w, w);
    fflush(f);
}

/* Timed mode: the host's events (steps, faults, samples). */
static void hook_event(void *ctx, const sim_event *ev)
{
    runner *r = ctx;
    sim_agent_state *g = &r->a[ev->agent];
    switch (ev->kind) {
    case SIM_EV_STEP:
        if (!sim_runner_alive(r, ev->agent) || inc(r, ev->agent) != ev->b)
            break;
        if (r->swim && !g->ready) { /* joining: no agreed model yet */
            schedule(r, sim_runner_now(r) + sim_agents_step_us(r, ev->agent), SIM_EV_STEP,
                     ev->agent, 0, ev->b, NULL);
            break;
        }
        sim_models_step(r, ev->agent);
        /* A blocking agent trains on when its round ends (check_done). */
        if (sim_agents_host_step(r, ev->agent) == 0 || r->sc->mixing.overlap)
            schedule(r, sim_runner_now(r) + sim_agents_step_us(r, ev->agent), SIM_EV_STEP,
                     ev->agent, 0, ev->b, NULL);
        break;
    case SIM_EV_ROUND:
        if (sim_runner_alive(r, ev->agent) && inc(r, ev->agent) == ev->b)
            sim_agents_loop_round(r, ev->agent);
        break;
    case SIM_EV_FAULT:
        sim_inject_fault(r, &r->faults.events[ev->a]);
        break;
    case SIM_EV_SAMPLE: {
        uint64_t every = ev->a;
        sim_report_sample(r, 0);
        sim_checks_run(r);
        r->rep.last_sample_us = sim_runner_now(r);
        if (sim_runner_now(r) + every <= r->end_us)
            schedule(r, sim_runner_now(r) + every, SIM_EV_SAMPLE, 0, every, 0, NULL);
        break;
    }
    default:
        break;
    }
}

static void hook_trace(void *ctx, gossip_time_us now, uint32_t from, uint32_t to,
                       const uint8_t *frame, size_t len, uint64_t value)
{
    runner *r = ctx;
    r->opts->on_trace(r->opts->hook_ctx, now, from, to, frame, len, value);
}

static int timed_stop(void *ctx)
{
    runner *r = ctx;
    progress(r, 0);
    return sim_runner_halted(r);
}

static void run_timed(runner *r)
{
    for (uint32_t i = 0; i < r->n; i++)
        if (sim_runner_alive(r, i))
            schedule(r, sim_agents_step_us(r, i), SIM_EV_STEP, i, 0, inc(r, i), NULL);
    for (size_t k = 0; k < r->faults.len; k++)
        if (r->faults.events[k].time_us <= r->end_us)
            schedule(r, r->faults.events[k].time_us, SIM_EV_FAULT, 0, k, 0, NULL);
    uint64_t every = (uint64_t)llround(r->sc->output.every_s * 1e6);
    if (every == 0)
        every = 1;
    if (every <= r->end_us)
        schedule(r, every, SIM_EV_SAMPLE, 0, every, 0, NULL);
    sim_report_sample(r, 0);
    r->rep.last_sample_us = 0;
    if (!r->failed)
        sim_engine_run_until(r->e, r->end_us, timed_stop, r);
    if (sim_runner_failed(r))
        return;
    if (r->rep.last_sample_us != sim_runner_now(r)) /* not twice at one time (stopped early) */
        sim_report_sample(r, 0);
}

static void deliver_pending(runner *r)
{
    if (!r->failed)
        sim_engine_deliver_pending(r->e);
}

static void collect_done(runner *r)
{
    for (uint32_t i = 0; i < r->n; i++)
        if (sim_runner_alive(r, i))
            sim_agents_check_done(r, i);
}

static uint64_t run_rounds(runner *r)
{
    uint64_t rounds = 0;
    uint32_t every = r->sc->output.every_rounds;
    sim_report_sample(r, 0);
    uint64_t last_sample = 0;
    for (uint32_t round = 0; round < r->sc->run.rounds && !sim_runner_halted(r); round++) {
        while (r->next_fault < r->faults.len &&
               r->faults.events[r->next_fault].time_us <= sim_runner_now(r) && !r->failed) {
            sim_engine_count(r->e, 1);
            sim_inject_fault(r, &r->faults.events[r->next_fault++]);
        }
        deliver_pending(r); /* frames caused by view changes */
        collect_done(r);
        /* Every live agent takes interval_steps local steps (a blocking
         * one only when its last round has ended); its schedule starts a
         * round after the step that makes one due. */
        uint64_t longest = 0;
        for (uint32_t i = 0; i < r->n && !r->failed; i++) {
            sim_agent_state *g = &r->a[i];
            if (!sim_runner_alive(r, i) || (g->mixing && !r->sc->mixing.overlap) ||
                (r->swim && !g->ready))
                continue;
            uint64_t t = 0;
            for (uint32_t k = 0; k < r->sc->mixing.interval_steps && !r->failed; k++) {
                t += sim_agents_step_us(r, i);
                sim_models_step(r, i);
                sim_engine_count(r->e, 1);
                sim_agents_host_step(r, i);
            }
            if (t > longest)
                longest = t;
        }
        deliver_pending(r);
        if (longest) {
            sim_engine_set_now(r->e, sim_runner_now(r) + longest);
        } else {
            /* Nobody computed (every live agent waits in a mixing round, or
             * nobody is up): jump to the next deadline or fault instead of
             * spinning rounds at one microsecond each. */
            uint64_t next = UINT64_MAX;
            for (uint32_t i = 0; i < r->n; i++)
                if (sim_runner_alive(r, i) && r->a[i].mix) {
                    gossip_time_us d = sim_engine_deadline(r->e, i);
                    if (d != GOSSIP_TIME_NEVER && d < next)
                        next = d;
                }
            if (r->next_fault < r->faults.len && r->faults.events[r->next_fault].time_us < next)
                next = r->faults.events[r->next_fault].time_us;
            sim_engine_set_now(r->e, next != UINT64_MAX && next > sim_runner_now(r)
                                         ? next
                                         : sim_runner_now(r) + 1);
        }
        collect_done(r);
        /* Timers due by the end of the round (timeouts of lost exchanges). */
        for (uint32_t i = 0; i < r->n && !r->failed; i++) {
            if (sim_runner_alive(r, i) && r->a[i].mix &&
                sim_engine_deadline(r->e, i) <= sim_runner_now(r)) {
                sim_engine_count(r->e, 1);
                sim_engine_tick_now(r->e, i);
            }
        }
        deliver_pending(r);
        collect_done(r);
        sim_runner_failed(r);
        sim_checks_run(r);
        rounds++;
        if (rounds % every == 0) {
            sim_report_sample(r, rounds);
            last_sample = rounds;
        }
        progress(r, rounds);
    }
    if (!sim_runner_failed(r) && last_sample != rounds)
        sim_report_sample(r, rounds);
    return rounds;
}

/* Gossip's table of measured links above 1024 agents: with random peers
 * among thousands an agent meets a peer again only by chance, so the table
 * holds its last few exchanges (each lookup scans it: 64 entries were a
 * tenth of a 10^5-agent run's time). */
#define SIM_MIX_LINKS_BIG 8u

/* malloc's bytes in use and the simulator's own (sim/arena: the agents'
 * envs and per-agent arrays, on huge pages). */
static size_t heap_in_use(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd + sim_mem_in_use();
}

static int setup(runner *r)
{
    const sim_scenario *sc = r->sc;
    char msg[512];
    r->n = sc->run.agents;
    r->timed = sc->run.mode == SIM_RUN_TIMED;
    r->swim = sc->membership.mode == SIM_MEMBERSHIP_SWIM;
    r->end_us = (uint64_t)llround(sc->run.duration_s * 1e6);
    r->rep.target_time = r->rep.target_since = NAN;
    sim_diverge_init(&r->rep.div, sc->run.diverge_factor);
    r->rep.last_acc = r->rep.last_loss = r->rep.last_cd = NAN;
    model_rng_seed(&r->state, sc->run.seed, SIM_SALT_STATE);
    model_rng_seed(&r->corrupt_rng, sc->run.seed, SIM_SALT_CORRUPT);
    model_rng_seed(&r->mrng, sc->run.seed, SIM_SALT_MODEL);
    r->renv = (gossip_env){env_alloc, env_free, model_rng_callback, NULL, &r->mrng};
    if (sc->mixing.algorithm == SIM_MIX_PS)
        return sim_runner_fail(r, SIM_RUN_EINVAL,
                               "mixing.algorithm = ps: the parameter server is not simulated yet "
                               "(use allreduce, gossip, push-sum, dpsgd or choco)");
    /* Under the oracle the mixers share one view (any size with random
     * peers); a static graph or a node's own views stop at the core's bound. */
    if (r->n > GOSSIP_MEMBERS_MAX && (r->swim || sc->mixing.topology != GOSSIP_TOPO_RANDOM ||
                                      sc->mixing.algorithm == SIM_MIX_ALLREDUCE))
        return sim_runner_fail(r, SIM_RUN_EINVAL,
                               "run.agents = %u: above %u agents the simulator runs only "
                               "mixing.topology = random without allreduce, under "
                               "membership.mode = oracle",
                               r->n, GOSSIP_MEMBERS_MAX);
    if (sc->shards.replication > GOSSIP_PLACEMENT_R_MAX)
        return sim_runner_fail(r, SIM_RUN_EINVAL,
                               "shards.replication = %u: placement supports at most %u",
                               sc->shards.replication, GOSSIP_PLACEMENT_R_MAX);
    if (sc->shards.count > GOSSIP_PLACEMENT_SHARDS_MAX)
        return sim_runner_fail(r, SIM_RUN_EINVAL,
                               "shards.count = %u: placement supports at most %u", sc->shards.count,
                               GOSSIP_PLACEMENT_SHARDS_MAX);
    /* Models of the network, compute and faults. */
    sim_net_config nc;
    sim_scenario_net_config(sc, &nc);
    if (nc.latency_kind == SIM_NET_LAT_MATRIX) {
        int rc = sim_net_load_matrix(sc->network.latency_file, r->n, &r->matrix, msg, sizeof msg);
        if (rc)
            return sim_runner_fail(r, SIM_RUN_EIO, "%s", msg);
        nc.matrix_ms = r->matrix;
    }
    int rc;
    sim_compute_config cc;
    sim_scenario_compute_config(sc, &cc);
    /* compute.agent_speeds: at most one factor per two characters */
    double speeds[SIM_SCENARIO_STR_MAX / 2];
    if (sim_compute_parse_speeds(sc->compute.agent_speeds, speeds,
                                 r->n < SIM_SCENARIO_STR_MAX / 2 ? r->n : SIM_SCENARIO_STR_MAX / 2,
                                 &cc.speeds_n, msg, sizeof msg))
        return sim_runner_fail(r, SIM_RUN_EINVAL, "compute.agent_speeds: %s", msg);
    cc.speeds = speeds;
    if ((rc = sim_compute_create(&r->comp, &cc)))
        return sim_runner_fail(r, SIM_RUN_EINVAL, "compute model: error %d", rc);
    const char **lines = malloc((SIM_SCENARIO_EVENTS_MAX + 1) * sizeof *lines);
    if (!lines)
        return sim_runner_fail(r, SIM_RUN_ENOMEM, "out of memory");
    sim_faults_config fc;
    sim_scenario_faults_config(sc, lines, &fc);
    rc = sim_faults_build(&r->faults, &fc, msg, sizeof msg);
    free(lines);
    if (rc)
        return sim_runner_fail(r, SIM_RUN_EFAULTS, "faults: %s", msg);
    if (sim_inject_init(r))
        return r->failed;
    if (sim_models_init(r))
        return r->failed;

    /* The engine: agent i is node id i + 1 with stream i of the seed. */
    size_t heap0 = heap_in_use();
    sim_engine_config ec = {
        .agents = r->n,
        .seed = sc->run.seed,
        .mode = r->timed ? SIM_MODE_TIMED : SIM_MODE_ROUNDS,
        .order_stream = SIM_SALT_ORDER,
        .loss = sc->network.loss,
        .net = &nc,
        .loop_frame_ns = (uint64_t)llround(sc->compute.loop_frame_us * 1000.0),
        .loop_byte_ns = sc->compute.loop_byte_ns,
        .arena = 1, /* teardown destroys the agents' objects first */
        .hooks = {.ctx = r,
                  .prepare = sim_agents_hook_prepare,
                  .after = sim_agents_hook_after,
                  .prefetch = sim_agents_hook_prefetch,
                  .event = hook_event,
                  .trace = r->opts->on_trace ? hook_trace : NULL,
                  .filter = sim_inject_filter,
                  .delay = sim_inject_delay,
                  .duplicate = sim_inject_duplicate,
                  .drop = sim_inject_drop},
    };
    rc = sim_engine_create(&r->e, &ec);
    free(r->matrix);
    r->matrix = NULL;
    if (rc == SIM_ENGINE_ENOMEM)
        return sim_runner_fail(r, SIM_RUN_ENOMEM, "out of memory (engine)");
    if (rc) /* run.agents is checked above: the network's parameters */
        return sim_runner_fail(r, SIM_RUN_EINVAL, "network model: %s",
                               sim_net_strerror(SIM_NET_EINVAL));
    r->a = sim_big_alloc((size_t)r->n * sizeof *r->a); /* zeroed */
    r->ids = calloc(r->n, sizeof *r->ids);
    r->vids[0] = calloc(r->n, sizeof *r->vids[0]);
    r->vids[1] = calloc(r->n, sizeof *r->vids[1]);
    if (!r->a || !r->ids || !r->vids[0] || !r->vids[1])
        return sim_runner_fail(r, SIM_RUN_ENOMEM, "out of memory (agents)");
    for (uint32_t i = 0; i < r->n; i++) {
        sim_agent_state *g = &r->a[i];
        g->rng = sim_engine_rng(r->e, i);
        if (sim_engine_set_id(r->e, i, (uint64_t)i + 1) != SIM_ENGINE_OK)
            return sim_runner_fail(r, SIM_RUN_EINVAL, "engine: agent ids");
        if (sim_models_agent_init(r, i))
            return r->failed;
    }
    r->mcfg = (gossip_mix_config){
        .dim = r->dim,
        .algos = 1u << (unsigned)sc->mixing.algorithm,
        .algo = (gossip_mix_algo)sc->mixing.algorithm,
        .topology = (gossip_topology)sc->mixing.topology,
        .bits = sc->mixing.bits,
        /* members_max: the mixer's copy of its node's view under swim (N
         * ids; unused with shared views). peers_max: gossip's table of
         * measured links (least recently used replaced, hash-indexed
         * above 16), one per member up to 1024 agents as in the agent,
         * SIM_MIX_LINKS_BIG beyond (1024 would cost 70 KB a mixer, 70 GB
         * at 10^6 agents). */
        .members_max = r->n <= GOSSIP_MEMBERS_MAX ? r->n : 0,
        .peers_max = r->n > GOSSIP_MIX_MEMBERS_DEFAULT ? SIM_MIX_LINKS_BIG : 0,
        .shared_views = !r->swim,
        .sync_window = gossip_topology_is_static((gossip_topology)sc->mixing.topology) &&
                               sc->mixing.topology != GOSSIP_TOPO_EXPONENTIAL
                           ? 0
                           : 4,
        /* Bounds on peers' values (gossip/robust.h). Their scale is the
         * agent's own training steps: a consensus run has none, and
         * measures the mixing rule alone, unless it has byzantine senders
         * (the soak's): then the bound relative to the first vector. */
        .robust = {.rule = sc->model.kind == SIM_MODEL_CONSENSUS && !sc->faults.byzantine_agents
                               ? GOSSIP_ROBUST_NONE
                               : sc->mixing.robust,
                   .clip_factor = sc->mixing.robust_clip_factor,
                   .trim = sc->mixing.robust_trim},
    };
    if (sc->faults.byzantine_agents &&
        !(r->byz = sim_byzantine_create(r->n, sc->faults.byzantine_agents, r->dim,
                                        sc->faults.byzantine_attack, sc->faults.byzantine_scale,
                                        sc->run.seed)))
        return sim_runner_fail(r, SIM_RUN_ENOMEM, "out of memory (byzantine agents)");
    r->scfg = (gossip_sched_config){
        .dim = r->dim,
        .interval_steps = sc->mixing.interval_steps,
        .batch = sc->model.batch,
        .kind = MODEL_LR_CONSTANT,
        .base_lr = (float)sc->model.lr,
        .unit = GOSSIP_SCHED_UNIT_STEPS,
        .outer_momentum = sc->mixing.outer_momentum,
    };
    r->mix_out = malloc((size_t)r->dim * sizeof *r->mix_out);
    if (!r->mix_out)
        return sim_runner_fail(r, SIM_RUN_ENOMEM, "out of memory (agents)");
    if (r->dim > GOSSIP_CODEC_DIM_MAX)
        return sim_runner_fail(r, SIM_RUN_EINVAL,
                               "model has %u parameters; the mixer supports at most %u", r->dim,
                               (unsigned)GOSSIP_CODEC_DIM_MAX);
    /* Shards (before the agents: their replicators read the stores): the
     * catalog, and the copies of the initial placement (protocol mode);
     * the copy time of one shard at the bandwidth (oracle mode). */
    if (sim_checks_init(r) || sim_shardsim_init(r, &nc))
        return r->failed;
    for (uint32_t i = 0; i < r->n; i++) {
        if (sim_fault_list_absent_at_start(&r->faults, i))
            continue;
        if (sim_agents_start(r, i))
            return r->failed;
    }
    /* Initial placement: every holder has its copy from the start. */
    uint64_t copy = r->sh.copy_us;
    r->sh.copy_us = 0;
    sim_agents_view_change(r);
    r->sh.copy_us = copy;
    if (sim_runner_failed(r))
        return r->failed;
    /* Swim: every agent joins through up to 3 others; membership spreads
     * from there (the first views are partial, as in a real start). */
    for (uint32_t i = 0; i < r->n && r->swim && !r->failed; i++)
        if (sim_runner_alive(r, i)) {
            sim_agents_join(r, i);
            sim_engine_drain(r->e, i);
        }
    if (sim_runner_failed(r))
        return r->failed;
    size_t heap1 = heap_in_use();
    r->rep.mem_per_agent = heap1 > heap0 ? (double)(heap1 - heap0) / r->n : 0;
    return 0;
}

static void teardown(runner *r)
{
    if (r->a)
        for (uint32_t i = 0; i < r->n; i++)
            sim_agents_destroy(r, i);
    sim_models_free(r);
    sim_engine_destroy(r->e);
    sim_big_free(r->a);
    free(r->ids);
    free(r->vids[0]);
    free(r->vids[1]);
    free(r->mix_out);
    sim_byzantine_destroy(r->byz);
    free(r->group);
    sim_shardsim_free(r);
    sim_checks_free(r);
    sim_fault_list_free(&r->faults);
    sim_inject_free(r);
    sim_compute_destroy(r->comp);
    free(r->matrix);
}

int sim_run(const sim_scenario *sc, const sim_run_opts *opts, sim_summary *out, char *err,
            size_t errlen)
{
    static const sim_run_opts defaults = {0};
    if (!opts)
        opts = &defaults;
    runner *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, errlen, "out of memory");
        return SIM_RUN_ENOMEM;
    }
    r->sc = sc;
    r->opts = opts;
    FILE *log = opts->log ? opts->log : stdout;
    if (!opts->quiet) {
        fprintf(log, "SEED=%llu\n", (unsigned long long)sc->run.seed);
        fflush(log);
    }
    clock_gettime(CLOCK_MONOTONIC, &r->t0);
    r->last_print = r->t0;
    const char *dir = opts->dir ? opts->dir : sc->output.dir;
    sim_summary_init(out);
    if (setup(r) == 0) {
        if (opts->write_files) {
            char m[512];
            if (sim_output_open(&r->rep.out, dir, m, sizeof m) != 0)
                sim_runner_fail(r, SIM_RUN_EIO, "%s", m);
            else
                r->rep.out_open = 1;
        }
    }
    uint64_t rounds = 0;
    if (!r->failed) {
        if (r->timed)
            run_timed(r);
        else
            rounds = run_rounds(r);
    }
    if (r->rep.out_open) {
        char m[512];
        if (sim_output_close(&r->rep.out, m, sizeof m) != 0)
            sim_runner_fail(r, SIM_RUN_EIO, "%s", m);
    }
    if (!r->failed) {
        sim_report_summary(r, rounds, out);
        out->wall_s = wall_since(&r->t0);
        if (opts->write_files) {
            char m[512];
            if (sim_summary_write_file(out, dir, m, sizeof m) != 0)
                sim_runner_fail(r, SIM_RUN_EIO, "%s", m);
            else if (sc->output.plot && sim_plot_dir(dir, m, sizeof m) != 0)
                sim_runner_fail(r, SIM_RUN_EIO, "plots: %s", m);
        }
    }
    int rc = r->failed;
    if (rc)
        snprintf(err, errlen, "%s", r->err);
    else if (!opts->quiet) {
        fprintf(log, "TRACE_HASH=%016llx\n", (unsigned long long)sim_engine_trace_hash(r->e));
        fflush(log);
    }
    teardown(r);
    free(r);
    return rc;
}
