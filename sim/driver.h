/* sim/driver — a deterministic driver for sans-IO protocol objects.
 *
 * The first piece of the simulator: it owns a virtual clock, the event queue
 * (sim/evq), one seeded model_rng stream per agent (agent i uses stream i of
 * the seed; the network uses stream `agents`), and in-memory delivery of the
 * frames the objects produce. Any object with the sans-IO shape of
 * docs/ARCHITECTURE.md plugs in through a table of function pointers
 * (sim_node_ops), so the mixer, membership and later the whole gossip node can
 * be driven by the same code.
 *
 * Two modes:
 *   SIM_MODE_TIMED   continuous time: a frame sent at t arrives at
 *                    t + latency_us (so links are FIFO); ticks run at each
 *                    object's deadline; sim_driver_run_until advances time.
 *   SIM_MODE_ROUNDS  synchronous rounds: sim_driver_run_round delivers every
 *                    queued frame, and every frame those deliveries cause, one
 *                    at a time in a seeded random order (but FIFO per link),
 *                    at the current time; then time advances by round_us and
 *                    due ticks run (their frames wait for the next round).
 *
 * Faults: loss (each frame dropped with probability `loss`, drawn from the
 * network stream when it is sent), a drop filter callback, and crash of an
 * agent at a time (it stops receiving, ticking and sending for good).
 *
 * Determinism: every choice comes from the seed and events are ordered by
 * (time, seq); the trace hash (FNV-1a 64 over time, sender, receiver and bytes
 * of every delivered frame) is the same for the same seed, bit for bit.
 *
 * Limits: at most agents_max agents (SIM_DRIVER_AGENTS_MAX) and
 * inflight_max frames queued at once (a send beyond it is dropped and
 * counted as overflow). Frames are copied into driver-owned memory (the sim
 * may use malloc; the core may not).
 */
#ifndef SIM_DRIVER_H
#define SIM_DRIVER_H

#include <stddef.h>
#include <stdint.h>

#include "gossip/env.h"
#include "gossip/types.h"
#include "gossip/wire.h"
#include "model/rng.h"

#define SIM_DRIVER_AGENTS_MAX       GOSSIP_MEMBERS_MAX
#define SIM_DRIVER_INFLIGHT_DEFAULT 65536u

/* The sans-IO shape; node is the object, passed back unchanged. */
typedef struct sim_node_ops {
    int (*recv)(void *node, uint64_t from, const gossip_header *h, const uint8_t *payload,
                size_t len, gossip_time_us now);
    int (*tick)(void *node, gossip_time_us now);
    int (*poll_send)(void *node, gossip_send *out, gossip_time_us now);
    gossip_time_us (*deadline)(const void *node);
} sim_node_ops;

/* Ready-made table for gossip_mix (gossip/mix.h). */
extern const sim_node_ops sim_ops_mix;

typedef enum sim_mode { SIM_MODE_TIMED = 0, SIM_MODE_ROUNDS } sim_mode;

typedef struct sim_driver_config {
    uint32_t agents; /* 1..SIM_DRIVER_AGENTS_MAX */
    uint64_t seed;
    sim_mode mode;
    gossip_time_us latency_us; /* timed mode: one-way delay of every frame */
    double loss;               /* probability a frame is dropped, [0, 1] */
    gossip_time_us round_us;   /* rounds mode: virtual time per round */
    size_t inflight_max;       /* 0 = SIM_DRIVER_INFLIGHT_DEFAULT */
} sim_driver_config;

typedef struct sim_driver_stats {
    uint64_t sent;       /* frames pulled from the objects */
    uint64_t delivered;  /* frames handed to recv */
    uint64_t dropped;    /* lost by the loss model or the filter */
    uint64_t dead;       /* addressed to a crashed or unknown agent */
    uint64_t overflow;   /* refused because inflight_max frames were queued */
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
