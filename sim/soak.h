/* sim/soak — randomized fault soak of the simulator (`murmur sim --soak N`).
 *
 * Purpose. Run N scenarios, each drawn from its own soak seed, with random
 * faults (crashes with restarts, late joins, partitions, loss bursts, slow
 * CPUs, paused agents, corrupted frames; in one seed in 4 of those mixing
 * with gossip or dpsgd, a byzantine sender: one agent sending
 * scaled, sign-flipped or bit-flipped vectors in every round for the whole
 * run, sim/byzantine.h) confined to a fault phase, followed
 * by a quiet phase with every fault healed. Each run checks:
 *
 *   safety (sim_run with opts.check, see sim/run.h), at every round,
 *     sample and fault: every value finite; every live mixer on the
 *     current view and epochs only grow; no shard lost while fewer than
 *     shards.replication of its holders failed;
 *   liveness, at the end of the quiet phase: every agent up again (and,
 *     under SWIM, every view exactly the live set); every
 *     shard back to min(r, live) complete copies; the consensus distance
 *     of the honest agents at most SIM_SOAK_CD_FACTOR times the initial
 *     one (with a byzantine sender, which never stops: at most the initial
 *     one).
 *
 * A failing seed prints one line with its reason and one line with the
 * command that reproduces it alone (with --verbose: the drawn scenario as
 * --set lines and the summary).
 *
 * Scenario draw (sim_soak_scenario; deterministic in the soak seed):
 * 4-24 agents; rounds mode (70 %) or timed mode; oracle membership or
 * (40 %) SWIM (gossip/node, 100 ms periods); the consensus model
 * (dim 8-64); an algorithm and a topology that mix fast enough for the
 * quiet phase (gossip or push-sum on random / one-peer-exponential peers,
 * dpsgd or choco on the exponential graph, allreduce); bits 32/16/8 (choco
 * 8/4, push-sum 32); r = 1..min(3, N) with 4N shards; 1-6 scheduled faults
 * inside the fault phase, never more than (N-1)/2 agents down at once.
 */
#ifndef SIM_SOAK_H
#define SIM_SOAK_H

#include <stdint.h>
#include <stdio.h>

#include "sim/scenario.h"

/* Liveness bound: final consensus distance / initial one. */
#define SIM_SOAK_CD_FACTOR 1e-3 /* exact mixing; quantized gossip and dpsgd: see soak.c */
/* Most --set lines of one drawn scenario, and their length. */
#define SIM_SOAK_SETS_MAX 48u
#define SIM_SOAK_SET_LEN  128u
/* Fault phase and quiet phase: rounds mode (rounds of at least 10 ms) and
 * timed mode (simulated seconds). */
#define SIM_SOAK_FAULT_S        1.0
#define SIM_SOAK_ROUNDS         500u
#define SIM_SOAK_TIMED_FAULT_S  2.0
#define SIM_SOAK_TIMED_DURATION 12.0
/* Under SWIM the quiet phase is 3 times longer: views re-merge after a
 * partition within a few probe periods, but a synchronous round that
 * started on views that then changed is only given up at its step deadline
 * (2 s), and an allreduce ring realigns its round numbers one deadline at a
 * time; the soak found recoveries of up to 6 s. */
#define SIM_SOAK_SWIM_STRETCH 3u

typedef struct sim_soak_sets {
    uint32_t n;
    char line[SIM_SOAK_SETS_MAX][SIM_SOAK_SET_LEN]; /* "section.key=value" */
} sim_soak_sets;

typedef struct sim_soak_opts {
    uint64_t first_seed; /* soak seeds first_seed .. first_seed + count - 1 */
    uint32_t count;
    int verbose;      /* print every scenario and its figures */
    const char *prog; /* program name in the reproduction line ("murmur") */
    FILE *out;        /* NULL = stdout */
} sim_soak_opts;

/* Draw the scenario of soak seed `seed` as --set lines. */
void sim_soak_draw(uint64_t seed, sim_soak_sets *sets);
/* Defaults + the drawn lines, checked. Returns 0, or -1 with err. */
int sim_soak_scenario(uint64_t seed, sim_scenario *sc, sim_soak_sets *sets, char *err,
                      size_t errlen);
/* Run the soak. Returns the number of failed seeds (0 = all passed), or -1
 * when a run could not start at all (message on stderr). */
int sim_soak_run(const sim_soak_opts *o);

#endif
