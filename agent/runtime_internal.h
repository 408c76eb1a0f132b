/* agent/runtime_internal — the state shared by the agent runtime's files
 * (not part of any public API):
 *   agent/runtime.c  create/destroy, the event loop (the only thread that
 *                    touches the gossip_node), status and metrics;
 *   agent/trainer.c  the training thread (owns the model);
 *   agent/catalog.c  start-up data: shard catalog, shard import, test set.
 * Thread rules are in agent/agent.h: fields under "shared with the trainer"
 * are read and written under `mu` only; `st` under `st_mu`.
 */
#ifndef AGENT_RUNTIME_INTERNAL_H
#define AGENT_RUNTIME_INTERNAL_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/agent.h"
#include "agent/keys.h"
#include "agent/metrics.h"
#include "gossip/node.h"
#include "gossip/sched.h"
#include "model/data.h"
#include "model/net.h"
#include "model/optim.h"
#include "model/rng.h"
#include "include/murmur.h"
#include "net/transport.h"

#define AGENT_STATUS_EVERY_US 250000u
/* Frames taken from the inbox per loop pass before timers and sends run. */
#define AGENT_RECV_BATCH 256u
/* ... and at most this long: frames of 64 KiB (shard chunks) cost the loop
 * a hash and a write each, so 256 of them made one pass last seconds on a
 * loaded host (timers, SWIM and the progress line all waited). */
#define AGENT_PASS_BUDGET_US 50000u
/* The host thread reports an event loop that has not passed a mark for
 * this long (event=loop_stalled: what it was doing, its thread's state),
 * at most once per AGENT_LOOP_STALL_LOG_US. */
#define AGENT_LOOP_STALL_US     2000000u
#define AGENT_LOOP_STALL_LOG_US 10000000u
/* Moving average weight of the consensus distance per round, and the
 * stride of the values it is estimated on (67: a prime, so co-prime with
 * the layer widths and every layer is sampled; above the 16 floats of a
 * cache line, so the pass reads a quarter of the lines, where 7 read them
 * all: 0.5% of an agent's CPU at interval 16, perf of the event loop). */
#define AGENT_CONSENSUS_EWMA   0.2
#define AGENT_CONSENSUS_STRIDE 67u
/* The adaptive cadence (gossip/sched.h, "Cadence"): the loop measures the
 * CPU time of its own thread and NNG's threads per round, and the host's
 * CPU time per step, over windows of at least this long that hold at
 * least AGENT_CADENCE_ROUNDS_MIN rounds (1 s: tens of rounds at the
 * default interval, and reading the threads' clocks costs ~0.1 ms). */
#define AGENT_CADENCE_EVERY_US   1000000u
#define AGENT_CADENCE_ROUNDS_MIN 2u
/* A failing checkpoint warns at most once per this interval (it is counted
 * every time). */
#define AGENT_CKPT_WARN_EVERY_US 60000000u

struct murmur_agent {
    agent_config cfg;
    net_identity id;
    uint8_t network_keys[NET_CHANNEL_KEYS_MAX * NET_NETWORK_KEY_SIZE]; /* ring, [0] primary */
    size_t n_network_keys;
    uint8_t *allow;
    size_t allow_n;
    net_transport *t;
    char addr[GOSSIP_ADDR_MAX];
    agent_metrics *reg;
    agent_metrics_std ms;
    agent_metrics_server *srv;
    agent_metric *rejections_net[NET_REJECT_COUNT], *rejections_core[GOSSIP_ERR_COUNT];
    uint64_t last_mix[7]; /* gossip_mix_stats behind ms.exchanges and ms.robust (sync_metrics) */
    uint64_t last_net[NET_REJECT_COUNT], last_core[GOSSIP_ERR_COUNT];
    uint64_t start_us;

    uint8_t (*catalog)[GOSSIP_SHARD_ID_SIZE];
    uint32_t n_catalog;
    uint64_t catalog_samples; /* samples of the whole catalog (0 if a line lacks its count) */
    gossip_store store;

    model_rng env_rng;
    gossip_env env;
    gossip_node *node;
    uint32_t dim;
    float *latest;         /* loop: the model served to joiners */
    const float *mix_sent; /* loop: the schedule's outgoing vector of the running round */
    float *mix_out;        /* loop: vector from gossip_mix_take */
    int mixing;            /* loop: a round is running */
    uint64_t rounds_begun; /* loop: rounds handed to the mixer */
    /* loop: the cadence's window (runtime.c, cadence_measure) */
    uint64_t cad_until_us, cad_t_us, cad_cpu_ns, cad_rounds, cad_answered, cad_run_ns, cad_wait_ns,
        cad_steps;
    int cad_tid;
    /* view epoch: written by the loop (on_view), read by the host thread
     * (agent_runtime_checkpoint); ThreadSanitizer reported the plain field */
    _Atomic uint64_t epoch;
    uint64_t *view_ids;
    uint32_t view_n;
    _Atomic uint32_t live_n; /* members of the view (self included), for the trainer */
    uint64_t mixing_rounds, round_aborts, bytes_sent, bytes_received;
    double consensus;
    int consensus_init;
    uint32_t *primary_scratch;
    uint32_t primary_count, held_count; /* primaries held, shards held */
    gossip_shards_train_info train;     /* what the trainer uses and why */
    uint32_t train_count;
    uint64_t shards_fetched_seen;
    uint64_t shards_epoch_seen; /* the view epoch on_shards last ran for */
    uint64_t next_status_us, next_progress_us;
    _Atomic uint64_t round;
    /* loop liveness: written by the loop (loop_mark), read by the host
     * thread (agent_runtime_watch) */
    _Atomic uint64_t loop_beat_us;
    _Atomic(const char *) loop_phase;
    _Atomic int loop_tid;

    /* shared with the host (the trainer, or a program of the public API)
     * under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    gossip_sched *sched;                /* the training/mixing schedule (gossip/sched.h) */
    uint32_t *primary;                  /* the shards to train now (gossip_shards_train) */
    gossip_shards_train_info train_pub; /* their source and reason */
    uint32_t n_primary;
    uint32_t *bad_shards; /* catalog indices the trainer found damaged */
    uint32_t n_bad_shards;
    uint64_t primary_gen;
    int model_ready;       /* the node holds a model (own, checkpoint, transfer) */
    int host_ready;        /* the host has seen it (murmur_wait_ready) */
    murmur_source source;  /* where the model came from */
    uint64_t host_steps;   /* counted by murmur_mix */
    uint64_t host_samples; /* counted by murmur_mix */
    double host_loss, host_test_loss, host_accuracy; /* murmur_report; NaN = unknown */
    uint64_t sps_steps, sps_t_us;                    /* samples/s window (loop) */
    int host_tid; /* the thread of the latest counted murmur_mix (the cadence) */
    uint64_t watch_at_us, watch_logged_us; /* agent_runtime_watch (host thread) */

    float *init_params; /* the checkpoint's model (have_ckpt) */
    float *init_momentum;
    int have_ckpt;
    uint64_t ckpt_step, ckpt_round;
    pthread_t loop_thread;
    int loop_started;
    int exit_code;                /* non-zero: the agent stopped itself for this reason */
    const char *job_end;          /* the [run] condition that ended the job, or NULL */
    uint64_t ckpt_fail_logged_us; /* last checkpoint_failed line */

    pthread_mutex_t st_mu;
    agent_status st;

    /* Atomic, not volatile sig_atomic_t: set by signal handlers and by
     * the host's threads, read by the loop (a data race otherwise, found
     * by ThreadSanitizer); a lock-free atomic_int is async-signal-safe. */
    atomic_int stop;
    atomic_int reload; /* SIGHUP: re-read the key files */

    /* shard health (runtime.c, loop only) */
    uint8_t *lost_seen; /* per catalog shard: reported lost */
    uint32_t missing_count;
    agent_metric *shards_missing, *shards_quarantined;
    uint64_t quarantined_seen;
    agent_metric *store_errors;
    uint64_t store_errors_seen, store_full_seen, store_warn_us, store_suppressed;
    gossip_shards_full_info full; /* who trains what while a store is full */
    /* Under mu: the store is full, so a host without data has none to wait
     * for: murmur_mix(a, params, 0, 0) then counts one schedule step (not a
     * local step), so that the agent keeps mixing, as a relay. */
    int idle_mix;

    /* admission (runtime.c, loop only) */
    uint64_t conflict_seen; /* last gossip_swim_conflict seq logged */
    uint64_t conflict_log_us[3];
    uint64_t conflict_suppressed[3];
    int refused; /* membership gave up: exit non-zero, no leave */
    agent_metric *refusals[3];
    uint64_t refusals_seen[3];
    struct agent_faults *faults; /* [faults] (agent/chaos.h); NULL unless faults.enable */
};

/* One shard_store_failed line per 30 s at most (all are counted). */
#define AGENT_STORE_WARN_US 30000000u

/* runtime.c */
uint64_t agent_mono_us(void);
/* End the job for a [run] condition (reason "max_steps", ...; code an
 * AGENT_EXIT_* status): the first call wins, logs event=job_end and stops
 * the agent as SIGTERM does. Any thread; not with a->mu held. */
void agent_runtime_job_end(agent_runtime *a, const char *reason, int code);
/* What this agent's cluster must agree on (gossip/manifest.h). */
void agent_runtime_manifest(const agent_runtime *a, gossip_manifest *m);
void agent_errf(char *err, size_t len, const char *fmt, ...);

/* catalog.c: start-up data. Each returns 0, or -1 with a message in err. */
int agent_catalog_load(agent_runtime *a, char *err, size_t errlen);
long agent_catalog_find(const agent_runtime *a, const uint8_t id[GOSSIP_SHARD_ID_SIZE]);
void agent_shards_import(agent_runtime *a);

/* runtime.c: the runtime without a trainer (the host drives the model
 * through api.c). create: keys, catalog, store, checkpoint of (model.spec,
 * dim), schedule, transport, node, metrics server; nothing runs yet.
 * start: the event-loop thread (joins the seeds). close: see
 * murmur_close. */
int agent_runtime_create(agent_runtime **out, const agent_config *cfg, uint32_t dim, unsigned flags,
                         char *err, size_t errlen);
int agent_runtime_start(agent_runtime *a, char *err, size_t errlen);
int agent_runtime_close(agent_runtime *a, float *params, const float *momentum);
/* Write a checkpoint of params/momentum (step = the host's steps); logs and
 * counts a failure (at most one warn line per AGENT_CKPT_WARN_EVERY_US).
 * Returns 0 or -1. */
int agent_runtime_checkpoint(agent_runtime *a, const float *params, const float *momentum,
                             const char *why);
/* Host thread, cheap (rate-limited): log event=loop_stalled when the event
 * loop has passed no mark for AGENT_LOOP_STALL_US. Called under a->mu. */
void agent_runtime_watch(agent_runtime *a, uint64_t now);
/* The agent's configuration (for the built-in trainer). */
const agent_config *agent_runtime_config(const agent_runtime *a);

_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "stop and reload are set by signal handlers");

#endif
