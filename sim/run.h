/* sim/run — run one simulation scenario: the simulator's main loop.
 *
 * Purpose. Tie the simulator's models together around the real protocol
 * code: N agents, each with its own gossip_mix (gossip/mix.h), its own
 * seeded generator and its own model (consensus vector, quadratic objective
 * or a real model/ network trained on real data), driven by the event queue
 * (sim/evq) through the network model (sim/netmodel), the compute model
 * (sim/compute) and the fault list (sim/faults); the run writes
 * series.csv and summary.json (sim/output) and optionally the plots.
 *
 * Modes (run.mode):
 *   rounds  synchronous rounds. Each round every live agent runs
 *           mixing.interval_steps local steps, and its schedule starts a
 *           mixing round when one is due (see "Schedule" below); the
 *           frames of the round, and every frame they cause, are delivered
 *           one at a time in an order drawn from the seed (FIFO per link),
 *           as in PeerSim's cycle-driven engine. A round lasts as long as
 *           the slowest live agent's steps (compute model); latency and
 *           bandwidth do not apply, loss and partitions do.
 *   timed   continuous time. An agent takes local steps back to back
 *           (duration from the compute model) while its mixing rounds run
 *           (see "Schedule"); every frame travels
 *           through the network model (latency, max-min shared bandwidth,
 *           loss, partitions); timers fire at the mixers' deadlines.
 *
 * Schedule: every agent runs gossip/sched exactly as murmur agent does
 * (agent/api.c murmur_mix after each local step, agent/runtime.c
 * on_mixing and mixing_finish): a round is due mixing.interval_steps steps
 * after the last one once the last result was applied; it mixes a copy of
 * the parameters taken right after the step that made it due; training
 * goes on meanwhile; at the first step after the round ends the parameters
 * get += mixed - sent. mixing.overlap = false makes the agent wait for its
 * round instead (a blocking trainer; murmur agent never does).
 *
 * Membership (membership.mode):
 *   oracle  every crash, restart or join installs a new view (epoch + 1,
 *           the ids of the live agents) on every live mixer at once. A
 *           restarted agent gets a fresh mixer and copies the model of a
 *           live agent chosen from the seed.
 *   swim    every agent runs the real protocol core, gossip/node: SWIM
 *           membership and failure detection (frames through the same
 *           network model), the mixer on the agent's own view, and state
 *           transfer (gossip/xfer) of the model to a restarted agent, which
 *           neither trains nor mixes until it has it. Agents join through
 *           up to 3 others drawn from the seed; a crashed agent's node is
 *           destroyed (its state is lost) and a restart creates a new one.
 *
 * Shards: shards.count shards placed on shards.replication holders by
 * gossip/placement over the live agents; a new holder has its copy after the transfer time of one
 * shard at the network bandwidth (instant when unlimited); a shard is lost when no live agent holds
 * a complete copy.
 *
 * Determinism: every draw comes from generators seeded by run.seed; events
 * are ordered by (time, sequence). The trace hash covers every delivered
 * frame (time, sender, receiver, bytes), every local step and every fault
 * applied; the same scenario and seed give the same hash.
 *
 * Invariants (opts->check; the soak of sim/soak.h). Checked after every
 * round (rounds mode), every sample and every fault: every live agent's
 * parameters are finite; every live mixer holds the current view and its
 * epoch never decreases; and, at each loss of a shard, at least
 * shards.replication holders that had a complete copy failed since the
 * shard last had that many complete copies (no shard is lost while fewer
 * than r holders fail). The first violation (with its simulated time) and
 * the count go to out->violation / out->violations. Every run also reports
 * agents_live_final, shards_under_replicated_final (shards with fewer than
 * min(r, live) complete live copies at the end) and
 * consensus_distance_initial, for liveness checks after healing.
 *
 * A run stops early, and still writes its files and returns SIM_RUN_OK,
 * when opts->stop is set (interrupted) or when it diverges (sim_diverge in
 * sim/output.h: non-finite values, or growth past run.diverge_factor;
 * with opts->check a divergence is marked and the run goes on).
 *
 * Output on opts->log (stdout by default): "SEED=<seed>" first, then
 * "TRACE_HASH=<16 hex digits>" last; a progress line on opts->progress
 * (stderr by default) every few wall seconds on long runs.
 */
#ifndef SIM_RUN_H
#define SIM_RUN_H

#include <signal.h>
#include <stddef.h>
#include <stdio.h>

#include "sim/output.h"
#include "sim/scenario.h"

typedef enum sim_run_err {
    SIM_RUN_OK = 0,
    SIM_RUN_EINVAL = -1,  /* the scenario cannot run (message says why) */
    SIM_RUN_ENOMEM = -2,  /* out of memory */
    SIM_RUN_EIO = -3,     /* output or data file error */
    SIM_RUN_EMODEL = -4,  /* model or data set could not be built */
    SIM_RUN_EFULL = -5,   /* the event queue or network hit its bound */
    SIM_RUN_EFAULTS = -6, /* fault list could not be built */
} sim_run_err;

/* What a sample sees (sim_run_opts.on_sample): the run as a checker
 * outside it would, e.g. murmur sim --schedule's verdict (agent/cmd_sim.c),
 * which polls it as murmur chaos polls every member's /status. Valid only
 * during the callback. */
typedef struct sim_observation {
    double time_s; /* simulated */
    uint32_t agents;
    double consensus_distance; /* of the live agents (NaN: none) */
    uint64_t shards_lost;      /* shards with no complete live copy, so far */
    uint32_t shards_under_replicated;
    uint64_t frames_lost;       /* by the loss model, a partition or the filter, so far */
    uint64_t frames_corrupted;  /* corrupt fault, so far */
    uint64_t frames_delayed;    /* held by a delay, jitter or reorder fault, so far */
    uint64_t frames_duplicated; /* second copies of a duplicate fault, so far */
    uint64_t fault_events;      /* events of the fault list (each fault and its undo) */
    uint64_t fault_events_due;  /* ... whose time is reached */
    uint64_t fault_events_applied;
    const void *run; /* for sim_observation_agent */
} sim_observation;

typedef struct sim_agent_observation {
    int live;            /* up (not crashed, not absent) */
    int paused;          /* a pause fault */
    uint64_t steps;      /* local steps since its last start */
    uint32_t peers;      /* the others in its view (membership.mode = oracle: live - 1) */
    uint64_t bytes_sent; /* since the run began */
} sim_agent_observation;

/* Agent i (< o->agents) at the sample o. */
void sim_observation_agent(const sim_observation *o, uint32_t i, sim_agent_observation *out);

typedef struct sim_run_opts {
    FILE *log;            /* SEED= and TRACE_HASH= lines; NULL = stdout */
    FILE *progress;       /* progress lines; NULL = stderr */
    int quiet;            /* nonzero: no SEED/TRACE_HASH/progress lines */
    double progress_s;    /* wall seconds between progress lines; 0 = 5 */
    int write_files;      /* nonzero: series.csv, summary.json (and plots) in dir */
    const char *dir;      /* output directory; NULL = sc->output.dir */
    const char *label;    /* summary label (sweep point); may be NULL */
    const char *scenario; /* summary "scenario" (the file's name); may be NULL */
    int check;            /* nonzero: check the safety invariants (below) as it runs */
    /* Nonzero *stop (a signal handler sets it) ends the run at the next
     * event (timed) or round (rounds): the run samples the time reached,
     * writes its files with interrupted = 1 and returns SIM_RUN_OK.
     * NULL = never. */
    volatile sig_atomic_t *stop;
    /* When set, called every progress_s wall seconds instead of printing
     * a progress line: the fraction of the run done (simulated time or
     * rounds, 0..1), the simulated time and the events so far. */
    void (*on_progress)(void *ctx, double fraction, double sim_time_s, uint64_t events);
    /* When set, every input of the trace hash as it is mixed in
     * (sim_engine_hooks.trace): murmur sim --trace. */
    void (*on_trace)(void *ctx, uint64_t now_us, uint32_t from, uint32_t to, const uint8_t *frame,
                     size_t len, uint64_t value);
    void *hook_ctx; /* passed to on_progress and on_trace */
    /* When set, called at every sample (output.every_s / every_rounds),
     * after its figures are computed, with sample_ctx. */
    void (*on_sample)(void *ctx, const sim_observation *o);
    void *sample_ctx;
} sim_run_opts;

const char *sim_run_strerror(int err);

/* Run sc (already checked with sim_scenario_check). Fills *out. Returns
 * SIM_RUN_OK or an error with a message in err. */
int sim_run(const sim_scenario *sc, const sim_run_opts *opts, sim_summary *out, char *err,
            size_t errlen);

#endif
