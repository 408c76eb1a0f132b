/* sim/faults — the fault injector: a time-ordered list of fault events.
 *
 * Purpose. Turn the scenario's fault settings into the list of faults the
 * simulator applies, in order, before it starts: scheduled lines from the
 * scenario file ("faults.event = 30 crash 3,5-7") plus faults drawn at
 * random from the seed at a given rate (a Poisson process). The list is a
 * pure function of (config, seed): the same seed gives the same faults.
 *
 * Line syntax (docs/SIMULATOR.md, "Faults", has the full reference):
 *
 *   TIME KIND [ARGS] [key=value ...]          TIME in seconds, >= 0
 *
 *   T crash TARGETS [restart_after=S]   agents stop; restart S later (0 = stay
 *                                       down; default faults.restart_after_s)
 *   T restart TARGETS                   crashed agents come back (state lost)
 *   T join TARGETS                      agents absent from time 0 join at T
 *   T partition G1/G2[/G3...] [duration=S]  groups of TARGETS cut apart;
 *                                       unlisted agents form group 0;
 *                                       heals after S (0 = until `heal`)
 *   T heal                              end any partition
 *   T loss P [duration=S]               loss probability P for all messages;
 *                                       back to network.loss after S
 *                                       (0 = until the next `loss` line)
 *   T slow TARGETS factor=F [duration=S]  CPU F times slower (0 = for good)
 *   T pause TARGETS [duration=S]        agents frozen (SIGSTOP): no frame in or
 *                                       out, no training step; state kept;
 *                                       resumed after S (0 = until the end)
 *   T corrupt P [duration=S]            each frame has one bit of its payload
 *                                       flipped with probability P, and the
 *                                       receiver's channel MAC refuses it;
 *                                       back to none after S (0 = for good)
 *
 *   Link faults of the agent's [faults] section (net/faults.h), on the
 *   frames the targets send (their egress, as a rule on their transport);
 *   each ends after S (0 = for good):
 *   T delay TARGETS ms=M [jitter=J] [peer=K] [duration=S]  every frame
 *                                       M + U(0, J) ms later
 *   T bandwidth TARGETS mbps=X [duration=S]  uplink capped at X Mb/s
 *   T duplicate TARGETS p=P [peer=K] [duration=S]  a frame sent twice with
 *                                       probability P
 *   T drop TARGETS p=P [peer=K] [duration=S]  a frame lost with probability
 *                                       P when it is sent
 *   T reorder TARGETS p=P window=W [peer=K] [duration=S]  a frame held
 *                                       U(0, W) ms more with probability P
 *                                       (so it may pass frames sent after it)
 *   peer=K: only the frames to agent K: the sender's rule for that peer,
 *   which replaces its all-peers rule for K while any of its faults is on
 *   (as a peer's rule does in net/faults)
 *
 *   TARGETS: comma-separated agent indices and ranges (3,5-9), `all`, or
 *   `random:K` (K distinct agents drawn from the seed).
 *
 * Event kinds, and what the simulator does with them:
 *   CRASH      stop the targets (drop their flows, timers, state)
 *   RESTART    start them again from scratch (state transfer from peers)
 *   JOIN       start targets that were absent from time 0; the simulator
 *              finds them with sim_fault_list_absent_at_start
 *   PARTITION  sim_net_set_partition with the event's groups
 *   HEAL       sim_net_set_partition(NULL)
 *   LOSS_START sim_net_set_loss(max(value, network.loss))
 *   LOSS_END   sim_net_set_loss(network.loss)
 *   SLOW       sim_compute_set_slow(target, value)
 *   SLOW_END   sim_compute_set_slow(target, 1)
 *   PAUSE      frames from and to the targets dropped, their CPU stopped
 *   RESUME     undo PAUSE (their state was kept: no state transfer)
 *   CORRUPT_START / CORRUPT_END  frame corruption probability (sim/inject)
 *   DELAY, BANDWIDTH, DUPLICATE, REORDER, DROP and their _END: the link
 *              faults above (sim/inject: the engine's delay, duplicate and drop hooks,
 *              sim_net_set_bandwidth)
 *   BANDWIDTH_TRACE, LATENCY_TRACE: one change of a trace file (sim/trace)
 *              for the targets: sim_net_set_bandwidth, sim_net_set_latency
 *
 * Random faults (in [0, horizon)):
 * - crashes at crash_rate_per_s for the whole population (exponential gaps
 *   of mean 1/rate); the victim is uniform among agents up at that time
 *   according to the random crashes and restarts so far (scheduled events
 *   are not consulted; the simulator ignores a crash of a down agent); a
 *   restart follows restart_after_s later when that is > 0;
 * - loss bursts: gaps between the end of one burst and the start of the
 *   next are exponential with mean 1/loss_burst_rate_per_s; each lasts
 *   loss_burst_s with loss probability loss_burst_prob. Bursts never overlap.
 *
 * Order: by time; at equal times, in order of generation: scheduled lines
 * in file order (each followed by its own consequences: the restart of a
 * crash with restart_after, the heal of a partition with a duration, ...),
 * then random faults.
 * Units: time in microseconds (as sim/evq), rates per second.
 * Ownership: the list owns its arrays; free with sim_fault_list_free.
 */
#ifndef SIM_FAULTS_H
#define SIM_FAULTS_H

#include <stddef.h>
#include <stdint.h>

#include "sim/trace.h"

/* Longest fault line, including the NUL. */
#define SIM_FAULT_LINE_MAX 256u
/* Most target items (agents or ranges) on one line. */
#define SIM_FAULT_ITEMS_MAX 64u
/* Most partition groups on one line. */
#define SIM_FAULT_GROUPS_MAX 16u
/* Most fault events in one list: at 10^4 agents, one crash-restart per
 * agent every 10 s for an hour is 7.2 * 10^6; bound at 2^23. */
#define SIM_FAULTS_EVENTS_MAX (1u << 23)
/* Most agents (as SIM_ENGINE_AGENTS_MAX). */
#define SIM_FAULTS_AGENTS_MAX (1u << 24)
/* Longest delay, jitter or reorder window, ms (net/faults.h's bound: one
 * minute; longer is a partition). */
#define SIM_FAULT_DELAY_MS_MAX 60000u

_Static_assert(SIM_FAULT_GROUPS_MAX <= SIM_FAULT_ITEMS_MAX, "a group needs an item");

typedef enum sim_fault_kind {
    SIM_FAULT_CRASH = 1,
    SIM_FAULT_RESTART,
    SIM_FAULT_JOIN,
    SIM_FAULT_PARTITION,
    SIM_FAULT_HEAL,
    SIM_FAULT_LOSS_START,
    SIM_FAULT_LOSS_END,
    SIM_FAULT_SLOW,
    SIM_FAULT_SLOW_END,
    SIM_FAULT_PAUSE,
    SIM_FAULT_RESUME,
    SIM_FAULT_CORRUPT_START,
    SIM_FAULT_CORRUPT_END,
    /* each link fault is followed by its end (sim/faults.c relies on it) */
    SIM_FAULT_DELAY,
    SIM_FAULT_DELAY_END,
    SIM_FAULT_BANDWIDTH,
    SIM_FAULT_BANDWIDTH_END,
    SIM_FAULT_DUPLICATE,
    SIM_FAULT_DUPLICATE_END,
    SIM_FAULT_REORDER,
    SIM_FAULT_REORDER_END,
    SIM_FAULT_BANDWIDTH_TRACE,
    SIM_FAULT_LATENCY_TRACE,
    SIM_FAULT_DROP,
    SIM_FAULT_DROP_END,
} sim_fault_kind;

typedef enum sim_faults_err {
    SIM_FAULTS_OK = 0,
    SIM_FAULTS_ESYNTAX = -1,  /* a line does not parse */
    SIM_FAULTS_ERANGE = -2,   /* a target beyond the agents, a bad rate */
    SIM_FAULTS_ETOOMANY = -3, /* more than SIM_FAULTS_EVENTS_MAX events */
    SIM_FAULTS_ENOMEM = -4,
} sim_faults_err;

/* One fault. Targets are targets[first .. first + count) of the list; for
 * PARTITION, groups[i] is the group of targets[i] (agents not listed are in
 * group 0). value: LOSS_START and CORRUPT_START probability, SLOW factor,
 * PAUSE duration in seconds (0 = until the end), DELAY ms, BANDWIDTH Mb/s,
 * DUPLICATE, REORDER and DROP probability, a trace's value (Mb/s, ms), else 0.
 * value2: DELAY jitter ms, REORDER window ms, else 0. */
typedef struct sim_fault {
    uint64_t time_us;
    sim_fault_kind kind;
    uint32_t first, count;
    double value;
    double value2;
    int32_t peer; /* DELAY, DUPLICATE, REORDER, DROP and ends: the receiver, -1 = all */
    int32_t line; /* index of the scheduled line it came from, -1 if random */
} sim_fault;

typedef struct sim_fault_list {
    sim_fault *events;
    size_t len;
    uint32_t *targets;
    uint32_t *groups;
    size_t targets_len;
    uint32_t agents;
    uint8_t *absent; /* absent[a]: a joins later (see sim_fault_list_absent_at_start) */
} sim_fault_list;

typedef struct sim_faults_config {
    uint32_t agents;
    uint64_t seed;
    uint64_t horizon_us; /* random faults are drawn in [0, horizon) */
    double crash_rate_per_s;
    double restart_after_s; /* 0 = a crashed agent stays down */
    double loss_burst_rate_per_s;
    double loss_burst_prob;
    double loss_burst_s;
    const char *const *lines; /* scheduled lines, nlines of them */
    size_t nlines;
} sim_faults_config;

/* Check one line's syntax without knowing the number of agents (the
 * scenario parser calls it to report errors with file and line). Errors:
 * SIM_FAULTS_ESYNTAX with a message in err. */
int sim_fault_check_line(const char *line, char *err, size_t errlen);

/* Build the list. Errors (message in err, naming the line index for
 * scheduled lines): SIM_FAULTS_ESYNTAX, SIM_FAULTS_ERANGE, SIM_FAULTS_ETOOMANY,
 * SIM_FAULTS_ENOMEM. On error *out is empty. */
int sim_faults_build(sim_fault_list *out, const sim_faults_config *cfg, char *err, size_t errlen);
void sim_fault_list_free(sim_fault_list *l);

/* 1 if agent is absent at time 0 because a JOIN event brings it in later
 * (its first event among CRASH/RESTART/JOIN is a JOIN). */
int sim_fault_list_absent_at_start(const sim_fault_list *l, uint32_t agent);

/* "crash", "restart", ... */
const char *sim_fault_kind_name(sim_fault_kind kind);

/* A set of agents as a fault line writes it ("3,5-9" or "all"; not
 * random:K): member[a] = 1 for the agents in it (member may be NULL to
 * check only). Errors (message in err): SIM_FAULTS_ESYNTAX, SIM_FAULTS_ERANGE
 * (an agent >= agents). */
int sim_faults_targets(const char *spec, uint32_t agents, uint8_t *member, char *err,
                       size_t errlen);

/* Append the changes of trace t in [0, horizon_us) as events of `kind`
 * (BANDWIDTH_TRACE or LATENCY_TRACE) for the agents with member[a] set,
 * and keep the list in order (at equal times, after the events already
 * there). Errors: SIM_FAULTS_ETOOMANY (more than SIM_TRACE_CHANGES_MAX
 * changes, or the list's bound), SIM_FAULTS_ERANGE (another kind),
 * SIM_FAULTS_ENOMEM; message in err. */
int sim_faults_add_trace(sim_fault_list *l, sim_fault_kind kind, const sim_trace *t,
                         const uint8_t *member, uint64_t horizon_us, char *err, size_t errlen);

#endif
