/* agent/agent — the runtime behind `murmur agent` and libmurmur
 * (include/murmur.h): one event-loop thread that alone drives the protocol
 * core (gossip/node) over net/transport, and a host that owns the model and
 * trains it: the built-in trainer of `murmur agent` (agent/trainer.c) or any
 * program of the public API. There is one runtime; the built-in trainer is
 * one host program among others and reaches the runtime only through
 * murmur.h (plus the parsed config).
 *
 * Threads and hand-offs:
 * - The event loop (started by agent_open / murmur_open) owns the
 *   gossip_node, the transport's receive side and the shard store. It
 *   sleeps in net_transport_wait until a frame arrives, a timer of the core
 *   is due, or the host wakes it.
 * - The host's thread owns the model. murmur_mix runs the schedule
 *   (gossip/sched.h) under the hand-off mutex: every mixing.interval_steps
 *   counted steps it copies the parameters out; the loop mixes that copy
 *   with peers (gossip_mix_start .. take) while the host keeps training, and
 *   delivers the result to the schedule; at the host's next murmur_mix the
 *   mixing correction (mixed - sent, mixed plus the schedule's slow
 *   momentum of the agent's own progress) is added to its current parameters, so
 *   the local steps taken meanwhile are kept: communication overlaps
 *   computation and no agent waits for a slow peer (except inside an
 *   allreduce round, which is bounded by its step deadline).
 * - Both share one mutex (short copies only) and a condition variable.
 * - NNG's HTTP threads read a status snapshot under a second short lock.
 *
 * Start-up: keys, shard catalog (SHARDS_DIR/catalog as written by `murmur
 * shard`; shard files of the catalog found in SHARDS_DIR under any other
 * name are linked in under their content address), checkpoint (used when it
 * was written for the same model.spec and dim), listener, metrics server.
 * Any failure is one error message and a non-zero status; nothing is left
 * running.
 *
 * Shutdown (murmur_close): graceful leave (SWIM LEAVE sent and flushed),
 * the loop stops, passive mixing changes are added to the host's model, a
 * final checkpoint is written, everything is freed.
 */
#ifndef AGENT_AGENT_H
#define AGENT_AGENT_H

#include <signal.h>
#include <stddef.h>

#include "agent/config.h"
#include "include/murmur.h"

/* Longest error message of create. */
#define AGENT_RUNTIME_ERR_MAX 512u
/* Most shards in a catalog (one catalog line each). */
#define AGENT_CATALOG_MAX 65536u
/* Longest wait of the event loop between two looks at the stop flag. */
#define AGENT_LOOP_WAIT_MAX_MS 50
/* Time given to the LEAVE frames to go out on shutdown. */
#define AGENT_LEAVE_FLUSH_MS 300

typedef struct murmur_agent agent_runtime;

/* Open an agent from a parsed config for a host model of dim values
 * (flags: AGENT_OPEN_*, below):
 * create the runtime and start its threads. Returns 0, or MURMUR_ESTART /
 * MURMUR_ENOMEM with a one-line message in err (what failed, where, what
 * to do); nothing is left running then. murmur_open is this after parsing
 * its settings. */
int agent_open(murmur_agent **out, const agent_config *cfg, uint32_t dim, unsigned flags, char *err,
               size_t errlen);
/* agent_open flag: a missing SHARDS_DIR/catalog is not an error (the host
 * brings its own data; the agent replicates none). The built-in trainer
 * needs the catalog; murmur_open sets this. */
#define AGENT_OPEN_CATALOG_OPTIONAL 1u
/* Ask the loop to re-read the network key ring and the allow-list file
 * (SIGHUP). Async-signal-safe (sets a flag; the loop acts within
 * AGENT_LOOP_WAIT_MAX_MS). A key removed from either has its links closed
 * at once; a file that cannot be read or parsed keeps what is in force and
 * logs why. */
void agent_runtime_reload(murmur_agent *a);

/* Exit statuses of `murmur agent` (and of agent_runtime_close): 0 stopped
 * on request (SIGTERM, SIGINT, murmur_stop), 1 a failure, 2 a bad command
 * line or config, and the job's own ends (docs/CONFIG.md, [run]): */
#define AGENT_EXIT_MAX_STEPS       3 /* run.max_steps local steps done */
#define AGENT_EXIT_MAX_SECONDS     4 /* run.max_seconds elapsed */
#define AGENT_EXIT_TARGET_ACCURACY 5 /* run.target_accuracy reached */

/* The built-in trainer (agent/trainer.c), the host program of `murmur
 * agent`: loads the test set, builds the model of model.spec, opens the
 * agent (its pointer is stored in *running while it is open, for signal
 * handlers: murmur_stop, agent_runtime_reload; a *stop_flag set before it
 * was stored stops it at once), trains on the assigned
 * shards until murmur_stop, then closes it. Returns the exit status: 0, 1
 * (start-up failed, message on stderr) or the agent's own exit status. */
int agent_trainer_run(const agent_config *cfg, murmur_agent *volatile *running,
                      volatile sig_atomic_t *stop_flag);

#endif
