/* agent/chaos_sim — the verdict of `murmur sim --schedule FILE` (docs/CHAOS.md,
 * "The same schedule in the simulator"): the checker of `murmur chaos`
 * watching simulated agents instead of live ones.
 *
 * The simulator calls chaos_sim_sample at every sample (sim_run_opts
 * .on_sample, every output.every_s simulated seconds), as murmur chaos polls
 * every member's /status; members are agents by index, as in the schedule.
 * chaos_sim_verdict then prints one evidence line per fault and the five
 * checks through agent/chaos_verdict, in murmur chaos's format, with the
 * same rules: the same excuses for training stalls (a paused or slowed
 * member while its fault lasts + 5 s, a killed or cut-off one + 30 s), the
 * consensus level before the first fault, shards lost only while fewer than
 * r agents were down. What differs, and why, is in the evidence: the
 * simulator's faults are seen in its own counters (frames lost or
 * corrupted, agents down or paused), not in /metrics. Faults without a
 * simulator counterpart (chaos_event_sim_line) are named and not judged.
 */
#ifndef AGENT_CHAOS_SIM_H
#define AGENT_CHAOS_SIM_H

#include <stdint.h>
#include <stdio.h>

#include "agent/chaos_sched.h"
#include "sim/run.h"

typedef struct chaos_sim chaos_sim;

/* A checker of schedule s (copied) over `agents` simulated agents with
 * shards.replication r. Returns NULL when out of memory. */
chaos_sim *chaos_sim_create(const chaos_sched *s, uint32_t agents, uint32_t replication,
                            double stall_bound_s);
void chaos_sim_destroy(chaos_sim *c);
/* The sample hook (sim_run_opts.on_sample; ctx is the chaos_sim). */
void chaos_sim_sample(void *ctx, const sim_observation *o);
/* The evidence lines, the five checks and the verdict, to out. Returns 0
 * PASS, 1 FAIL. */
int chaos_sim_verdict(chaos_sim *c, FILE *out);

#endif
