/* agent/agent — the runtime of `murmur agent`: one event-loop thread that
 * alone drives the protocol core (gossip/node) over net/transport, and one
 * training thread that runs local SGD steps on the shards this agent is
 * primary for.
 *
 * Threads and hand-offs:
 * - The event loop (the thread that calls agent_runtime_run) owns the
 *   gossip_node, the transport's receive side and the shard store. It
 *   sleeps in net_transport_wait until a frame arrives, a timer of the core
 *   is due, or the trainer wakes it.
 * - The training thread owns the model (parameters, momentum, net
 *   workspace). The schedule (gossip/sched.h, called under the hand-off
 *   mutex) gives each step its learning rate and, every
 *   mixing.interval_steps steps, copies the parameters out for mixing; the
 *   trainer goes on training while the loop mixes that copy with peers
 *   (gossip_mix_start .. take) and delivers the result to the schedule. At
 *   its next step the trainer adds the mixing correction (mixed - sent) to
 *   its current parameters, so the local steps taken meanwhile are kept:
 *   communication overlaps computation and no agent waits for a slow peer
 *   (except inside an allreduce round, which is bounded by its step
 *   deadline). A step with a non-finite loss never stops the agent: the
 *   parameters go back to the last mixed model (murmur_training_recoveries_total).
 * - Both share one mutex (short copies only) and a condition variable.
 * - NNG's HTTP threads read a status snapshot under a second short lock.
 *
 * Start-up: keys, test set, shard catalog (SHARDS_DIR/catalog as written
 * by `murmur shard`; shard files of the catalog found in SHARDS_DIR under
 * any other name are linked in under their content address), checkpoint,
 * listener, metrics server. Any failure is one error message and a
 * non-zero status; nothing is left running.
 *
 * Shutdown (agent_runtime_stop, e.g. from SIGINT/SIGTERM): graceful leave
 * (SWIM LEAVE sent and flushed), the trainer stops, a final checkpoint is
 * written, everything is freed.
 */
#ifndef AGENT_AGENT_H
#define AGENT_AGENT_H

#include <stddef.h>

#include "agent/config.h"

/* Longest error message of create. */
#define AGENT_RUNTIME_ERR_MAX 512u
/* Most shards in a catalog (one catalog line each). */
#define AGENT_CATALOG_MAX 65536u
/* Longest wait of the event loop between two looks at the stop flag. */
#define AGENT_LOOP_WAIT_MAX_MS 50
/* Time given to the LEAVE frames to go out on shutdown. */
#define AGENT_LEAVE_FLUSH_MS 300

typedef struct agent_runtime agent_runtime;

/* Set everything up (no thread started yet). Returns 0, or 1 with a one-line
 * message in err (what failed, where, what to do). */
int agent_runtime_create(agent_runtime **out, const agent_config *cfg, char *err, size_t errlen);
/* Run the event loop until agent_runtime_stop; then leave, stop the trainer,
 * write the final checkpoint. Returns 0, or 1 after a runtime failure. */
int agent_runtime_run(agent_runtime *a);
/* Ask the loop to stop. Async-signal-safe (sets a flag). */
void agent_runtime_stop(agent_runtime *a);
/* Ask the loop to re-read the network key ring and the allow-list file
 * (SIGHUP). Async-signal-safe (sets a flag; the loop acts within
 * AGENT_LOOP_WAIT_MAX_MS). A key removed from either has its links closed
 * at once; a file that cannot be read or parsed keeps what is in force and
 * logs why. */
void agent_runtime_reload(agent_runtime *a);
void agent_runtime_destroy(agent_runtime *a);

#endif
