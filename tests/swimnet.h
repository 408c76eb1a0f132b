/* tests/swimnet — N in-memory SWIM agents on the simulator's engine.
 *
 * Test harness over sim/engine.h (timed mode): N gossip_swim objects
 * exchange frames through the engine with per-message latency (uniform in
 * [min, max], drawn per frame by the engine's delay hook), loss (the
 * engine's network), partitions, crashes/restarts and "slow" agents that
 * handle each inbound message up to slow_max_us late. Every random choice
 * comes from the seed (agents get their own streams), so a seed reproduces
 * a run bit for bit.
 *
 * Agent i has id SWIMNET_ID(i) and address "sim://i". Agents 0..n_seeds-1
 * are the seeds everybody joins through. Crashed agents drop every frame and
 * timer; a restart creates a fresh gossip_swim (same id and address) and
 * joins again. Frames in flight are copied (the swim's buffer is reused).
 */
#ifndef TESTS_SWIMNET_H
#define TESTS_SWIMNET_H

#include <stdint.h>

#include "gossip/swim.h"
#include "sim/engine.h"
#include "tests/harness.h"

#define SWIMNET_ID_BASE   0x5000u
#define SWIMNET_ID(i)     ((uint64_t)SWIMNET_ID_BASE + (uint64_t)(i))
#define SWIMNET_SEEDS_MAX 4u

typedef struct swimnet_config {
    uint32_t n;
    uint64_t seed;
    gossip_time_us latency_min_us; /* one-way, uniform in [min, max] */
    gossip_time_us latency_max_us;
    double loss;             /* drop probability per frame */
    uint32_t n_seeds;        /* 1..SWIMNET_SEEDS_MAX */
    gossip_swim_config swim; /* base config; id, addr set per agent */
} swimnet_config;

typedef struct swimnet_agent {
    gossip_swim *swim;
    test_env env;
    uint32_t gen; /* bumped on crash/restart: seeds a new process's stream */
    int up;
    int side; /* partition side */
    gossip_time_us slow_max_us;
    char addr[GOSSIP_ADDR_MAX];
} swimnet_agent;

typedef struct swimnet {
    swimnet_config cfg;
    swimnet_agent *agents;
    sim_engine *e;
    model_rng rng;
    gossip_time_us now; /* the engine's clock after the last call */
    /* the engine's counters after the last call */
    uint64_t frames_sent, frames_dropped, frames_delivered, bytes_sent;
} swimnet;

/* Create n agents; each joins through the seeds at a random time within
 * the first millisecond. Returns NULL on out of memory. */
swimnet *swimnet_create(const swimnet_config *cfg);
void swimnet_destroy(swimnet *net);
/* Run every event up to and including time t. */
void swimnet_run_until(swimnet *net, gossip_time_us t);
/* Pull agent i's frames (after poking its swim object directly). */
void swimnet_flush(swimnet *net, uint32_t i);
void swimnet_crash(swimnet *net, uint32_t i);
/* Restart a crashed agent with a new process (fresh state, given incarnation). */
void swimnet_restart(swimnet *net, uint32_t i, uint32_t incarnation);
/* Partition: side[i] in {0, 1}; frames across sides are dropped. */
void swimnet_partition(swimnet *net, const int *side);
void swimnet_heal(swimnet *net);
void swimnet_set_slow(swimnet *net, uint32_t i, gossip_time_us slow_max_us);
/* Member i's state as agent `at` sees it (GOSSIP_MEMBER_NONE if unknown). */
gossip_member_state swimnet_state(const swimnet *net, uint32_t at, uint32_t i);
/* 1 if every up agent's view is exactly the set of up agents. */
int swimnet_converged(const swimnet *net);

#endif
