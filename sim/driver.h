/* sim/driver — a small facade over the simulator's engine (sim/engine.h)
 * for tests that drive sans-IO objects with a constant latency.
 *
 * It is the engine (same event queue, delivery, rounds and timed modes,
 * trace hash), configured from a few numbers: every frame sent at t arrives
 * at t + latency_us in timed mode (links are FIFO); rounds mode delivers the
 * frames of a round one at a time in a seeded order (FIFO per link), then
 * advances the clock by round_us and runs due timers (their frames wait for
 * the next round). Agent i uses stream i of the seed; delivery order and
 * the rounds-mode loss draws use stream `agents`; the network's loss its
 * own stream.
 *
 * Faults: loss (each frame dropped with probability `loss` when it is
 * sent), a drop filter callback (at delivery), and crash of an agent at a
 * time (it stops receiving, ticking and sending for good).
 *
 * Limits: at most SIM_DRIVER_AGENTS_MAX agents; the event queue holds at
 * most 4 inflight_max + 4 agents events (a run beyond it stops and counts
 * the overflow).
 */
#ifndef SIM_DRIVER_H
#define SIM_DRIVER_H

#include <stddef.h>
#include <stdint.h>

#include "gossip/env.h"
#include "gossip/types.h"
#include "gossip/wire.h"
#include "model/rng.h"
#include "sim/engine.h"

#define SIM_DRIVER_AGENTS_MAX       GOSSIP_MEMBERS_MAX
#define SIM_DRIVER_INFLIGHT_DEFAULT 65536u

/* sim_node_ops, sim_ops_mix and sim_mode come from sim/engine.h. */

typedef struct sim_driver_config {
    uint32_t agents; /* 1..SIM_DRIVER_AGENTS_MAX */
    uint64_t seed;
    sim_mode mode;
    gossip_time_us latency_us; /* timed mode: one-way delay of every frame */
    double loss;               /* probability a frame is dropped, [0, 1] */
    gossip_time_us round_us;   /* rounds mode: virtual time per round */
    size_t inflight_max;       /* bounds the queue; 0 = SIM_DRIVER_INFLIGHT_DEFAULT */
} sim_driver_config;

typedef struct sim_driver_stats {
    uint64_t sent;       /* frames pulled from the objects */
    uint64_t delivered;  /* frames handed to recv */
    uint64_t dropped;    /* lost by the loss model or the filter */
    uint64_t dead;       /* addressed to a crashed or unknown agent */
    uint64_t overflow;   /* 1 once the event queue was full (the run stopped) */
    uint64_t rejected;   /* recv returned an error */
    uint64_t bad_header; /* did not decode as a frame */
    uint64_t bytes_delivered;
    uint64_t ticks;
} sim_driver_stats;

typedef struct sim_driver sim_driver;

/* Drop filter: return 1 to drop the frame (counted in dropped). */
typedef int (*sim_drop_fn)(void *ctx, uint32_t from, uint32_t to, const gossip_header *h,
                           gossip_time_us now);

/* Returns 0, -1 on a bad config or out of memory. */
int sim_driver_create(sim_driver **out, const sim_driver_config *cfg);
void sim_driver_destroy(sim_driver *d);

/* Attach agent i (< agents) with its node id (unique, != 0), ops and object.
 * Returns 0, or -1 on a bad index, a duplicate id or an id 0. */
int sim_driver_attach(sim_driver *d, uint32_t i, uint64_t id, const sim_node_ops *ops, void *node);
/* The env for agent i's objects: malloc/free and agent i's rng stream. */
const gossip_env *sim_driver_env(sim_driver *d, uint32_t i);
model_rng *sim_driver_rng(sim_driver *d, uint32_t i);

gossip_time_us sim_driver_now(const sim_driver *d);
void sim_driver_set_loss(sim_driver *d, double loss);
void sim_driver_set_filter(sim_driver *d, sim_drop_fn fn, void *ctx);

/* Crash agent i at virtual time at (now if at <= now, and always now in
 * rounds mode). Returns 0 or -1. */
int sim_driver_crash(sim_driver *d, uint32_t i, gossip_time_us at);
int sim_driver_alive(const sim_driver *d, uint32_t i);

/* Call after poking agent i's object directly (start a round, set a view):
 * pulls its frames and reschedules its tick. Returns 0 or -1 (bad index). */
int sim_driver_kick(sim_driver *d, uint32_t i);

/* Timed mode: process events in (time, seq) order up to virtual time
 * `until`, stopping early when stop(ctx) returns nonzero (checked after
 * every event; stop may be NULL). The clock ends at `until` unless stopped
 * early. Returns the number of events processed, or -1 in rounds mode. */
long sim_driver_run_until(sim_driver *d, gossip_time_us until, int (*stop)(void *ctx), void *ctx);

/* Rounds mode: see the header comment. Returns the number of frames
 * delivered, or -1 in timed mode. */
long sim_driver_run_round(sim_driver *d);

uint64_t sim_driver_trace_hash(const sim_driver *d);
const sim_driver_stats *sim_driver_get_stats(const sim_driver *d);

#endif
