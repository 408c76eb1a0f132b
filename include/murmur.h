/* murmur.h — embed a murmur agent in your own training program.
 *
 * murmur trains one model on many hosts with no coordinator. This header is
 * the whole public API of libmurmur: the same runtime as `murmur agent`
 * (SWIM membership, mixing of quantized model deltas by gossip or
 * ring-allreduce over authenticated and encrypted links, replicated data
 * shards, state transfer, checkpoints, /metrics and /status), with the
 * training loop replaced by yours. `murmur agent` itself is one program
 * built on this API (agent/trainer.c).
 *
 * A host program:
 *
 *     murmur_agent *a;
 *     char err[512];
 *     const char *set[] = {"seeds.seed=10.0.0.1:7000", "mixing.bits=8", NULL};
 *     if (murmur_open(&a, "agent.conf", set, dim, err, sizeof err)) { puts(err); exit(1); }
 *     init_my_model(params);                      // the same init on every host
 *     murmur_wait_ready(a, params, NULL, -1);     // joined; params may be replaced
 *     while (training) {
 *         my_sgd_step(params, murmur_lr(a));      // or your own learning rate
 *         int r = murmur_mix(a, params, 1, batch);
 *         if (r == MURMUR_MIX_REPLACED) reset_my_optimizer();
 *         if (r < 0) break;                       // the agent stopped (see murmur_close)
 *     }
 *     return murmur_close(a, params, NULL) ? 1 : 0; // leave, final checkpoint
 *
 * Model: one flat float32 vector of `dim` values (any length up to
 * MURMUR_DIM_MAX), the same layout on every agent of a cluster (agents
 * compare model.spec, dim, init seed and mixing settings when they meet and
 * refuse mismatches). Mixing never changes the layout.
 *
 * Mixing: murmur_mix is non-blocking. Every mixing.interval_steps counted
 * steps it copies params out and a background round averages that copy with
 * peers while you keep training; the next call after the round ends adds
 * (mixed - sent) to params in place, keeping the steps you took meanwhile
 * (with mixing.outer_momentum, 0.3 by default, `mixed` also carries a slow
 * momentum of your own progress: gossip/sched.h, "Outer step").
 * The learning-rate schedule (model.schedule, counted in epochs of this
 * agent's samples, no total step count needed) is available as murmur_lr.
 *
 * Threads: murmur_open starts the runtime's own threads (the event loop
 * and NNG's). Every function of one murmur_agent may be called from any
 * thread, but not concurrently with itself on the same agent except
 * murmur_status_get, murmur_lr and murmur_shards_get, which may be called
 * from any thread at any time (a monitoring thread, say). murmur_close must
 * be the last call on an agent; no call may run concurrently with it.
 *
 * Ownership: the caller owns every buffer it passes; libmurmur copies what
 * it keeps. murmur_shards_get returns a list the caller frees with
 * murmur_shards_free.
 *
 * Errors: functions return 0 (MURMUR_OK) or a negative murmur_err; those
 * that take `err, errlen` also write a one-line message (what went wrong,
 * where, what to do). No function calls exit() or abort() on bad input; a
 * peer's bad frames or values are refused and counted, never fatal.
 *
 * Versions: MURMUR_VERSION_* give the version this header belongs to;
 * murmur_version() the library's. The ABI rule (docs/EMBEDDING.md): within
 * one major version, functions are only added, structs passed by pointer
 * carry their size (murmur_status_get) so fields are only appended, and
 * enums only gain values; the soname is libmurmur.so.MAJOR.
 */
#ifndef MURMUR_H
#define MURMUR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define MURMUR_API __attribute__((visibility("default")))
#else
#define MURMUR_API
#endif

#define MURMUR_VERSION_MAJOR  0
#define MURMUR_VERSION_MINOR  2
#define MURMUR_VERSION_PATCH  0
#define MURMUR_VERSION_STRING "0.2.0"

/* Largest parameter vector mixing carries (values). */
#define MURMUR_DIM_MAX (64u * 1024u * 1024u)
/* Longest path in a shard list, including the NUL. */
#define MURMUR_PATH_MAX 1024u

typedef enum murmur_err {
    MURMUR_OK = 0,
    MURMUR_EINVAL = -1,    /* a bad argument (NULL agent, dim 0 or too large, ...) */
    MURMUR_ECONFIG = -2,   /* the configuration is invalid (message in err) */
    MURMUR_ESTART = -3,    /* start-up failed: keys, catalog, port, ... (message in err) */
    MURMUR_ENOMEM = -4,    /* out of memory */
    MURMUR_ETIMEDOUT = -5, /* murmur_wait_ready: not ready within the timeout */
    MURMUR_ESTOPPED = -6,  /* the agent is stopping (close, a stop it decided itself) */
    MURMUR_EIO = -7,       /* a file could not be written (message logged) */
    MURMUR_ENONFINITE = -8 /* params hold a NaN or an infinity */
} murmur_err;

/* What murmur_mix did to params. */
typedef enum murmur_mix_result {
    MURMUR_MIX_NONE = 0,    /* nothing (a round may have been started) */
    MURMUR_MIX_MIXED = 1,   /* params += mixed - sent */
    MURMUR_MIX_REPLACED = 2 /* params replaced by an adopted model: reset optimizer state */
} murmur_mix_result;

/* Where the model came from when the agent became ready. */
typedef enum murmur_source {
    MURMUR_SOURCE_OWN = 0,        /* the host's own initial params */
    MURMUR_SOURCE_CHECKPOINT = 1, /* this agent's checkpoint */
    MURMUR_SOURCE_TRANSFER = 2    /* a peer's model (state transfer) */
} murmur_source;

typedef struct murmur_agent murmur_agent;

/* "0.2.0" (the library's version) and MAJOR*10000 + MINOR*100 + PATCH. */
MURMUR_API const char *murmur_version(void);
MURMUR_API unsigned murmur_version_number(void);
/* A short text for a murmur_err. */
MURMUR_API const char *murmur_strerror(int err);

/* Open an agent: settings from config_path (NULL = none), then the
 * environment (MURMUR_SECTION_KEY=value), then `settings` (a NULL-terminated
 * array of "section.key=value", NULL = none), exactly as `murmur agent
 * --config FILE --set ...` (docs/CONFIG.md); dim is the length of the
 * host's parameter vector. Loads keys, the shard catalog and a checkpoint
 * (used only if it was written for the same model.spec and dim), listens,
 * starts the runtime's threads and joins the seeds. Returns MURMUR_OK,
 * MURMUR_EINVAL, MURMUR_ECONFIG, MURMUR_ESTART or MURMUR_ENOMEM with a
 * message in err; on error nothing is left running. */
MURMUR_API int murmur_open(murmur_agent **out, const char *config_path, const char *const *settings,
                           uint32_t dim, char *err, size_t errlen);

/* Wait until the agent holds a model: its checkpoint, a peer's model
 * (state transfer) or, for the first agent of a cluster, the host's own
 * params. params[dim] holds the host's initial model on entry and the
 * agent's on return; momentum (NULL = not wanted) receives the checkpoint's
 * momentum buffer when the model came from a checkpoint, zeros otherwise.
 * *source (NULL = not wanted) says where the model came from. timeout_ms < 0
 * waits forever. Returns MURMUR_OK, MURMUR_ETIMEDOUT, MURMUR_ESTOPPED or
 * MURMUR_EINVAL. */
MURMUR_API int murmur_wait_ready(murmur_agent *a, float *params, float *momentum, int timeout_ms,
                                 murmur_source *source);

/* Call after local training steps: counts `steps` steps of `samples`
 * samples in total (e.g. 1 and the batch size), applies a finished round to
 * params in place and starts a round when one is due (a copy of params).
 * Never blocks on the network. Returns a murmur_mix_result (>= 0), or
 * MURMUR_ESTOPPED (the agent is stopping: call murmur_close),
 * MURMUR_ENONFINITE (a round was due and params hold a NaN or an
 * infinity: nothing was sent; restore your model, e.g. from
 * murmur_latest) or MURMUR_EINVAL. The steps are counted either way, also
 * on a stopping agent, so the step murmur_close checkpoints is the step
 * params stand at. The call that counts the run.max_steps-th step returns
 * MURMUR_ESTOPPED.
 * A host with no data calls it with 0 steps and 0 samples; while the
 * agent's shards directory is full (it has handed its primaries to other
 * agents and gets no data), such a call counts one schedule step, not a
 * local step, so that the agent keeps mixing.
 * Fault injection (docs/CHAOS.md): while the agent's `pause` fault is on,
 * murmur_mix does not return (until it is lifted, or the agent stops:
 * MURMUR_ESTOPPED); under `slow` by F it sleeps F - 1 times the time since
 * it last returned, so the host's loop runs F times slower. Both are off
 * unless faults.enable = true. */
MURMUR_API int murmur_mix(murmur_agent *a, float *params, uint32_t steps, uint64_t samples);

/* The learning rate of the schedule for the next step (model.lr,
 * model.schedule, model.lr_scaling with the current cluster size). */
MURMUR_API float murmur_lr(murmur_agent *a);

/* Copy the agent's latest model into out[dim]: the last vector it mixed
 * (or handed to a round), i.e. what it serves to joining peers. Always
 * finite. Useful to evaluate the mixed model, or to recover from a step
 * that made params non-finite. Returns MURMUR_OK, MURMUR_ESTOPPED (no model
 * yet: before murmur_wait_ready) or MURMUR_EINVAL. */
MURMUR_API int murmur_latest(murmur_agent *a, float *out);

/* Tell the agent how training goes, for /status, /metrics and the progress
 * log: the recent training loss, the latest test loss and test accuracy in
 * [0, 1] (NaN = unknown). */
MURMUR_API void murmur_report(murmur_agent *a, double train_loss, double test_loss,
                              double test_accuracy);

/* Write a checkpoint (temp file, fsync, rename) of params and, when not
 * NULL, momentum[dim] (another optimizer buffer of the same length), at
 * checkpoint.path (logged as reason=periodic; murmur_close's final one as
 * reason=shutdown). Returns MURMUR_OK or MURMUR_EIO (the failure is logged
 * and counted; the previous checkpoint is kept). */
MURMUR_API int murmur_checkpoint(murmur_agent *a, const float *params, const float *momentum);

typedef struct murmur_status {
    size_t size; /* sizeof(murmur_status) of the caller: set before the call */
    uint64_t node_id;
    char address[64];
    char state[24];         /* "joining", "waiting_shards", "training", "leaving" */
    uint32_t peers;         /* live members in the view, self excluded */
    uint64_t view_epoch;    /* membership view epoch */
    uint64_t round;         /* mixing rounds (carried over by state transfer) */
    uint64_t mixing_rounds; /* rounds completed by this process */
    uint64_t round_aborts;  /* rounds aborted */
    double consensus;       /* ||mixed - sent|| / ||sent||, moving average; NaN before a round */
    uint64_t bytes_sent, bytes_received;
    uint64_t steps, samples; /* counted by murmur_mix */
    double cluster_epochs;   /* the schedule's clock (docs/CONFIG.md, model.schedule_unit) */
    float lr;                /* murmur_lr */
    uint32_t shards_held, shards_primary;
    uint64_t shards_generation; /* changes when the training assignment changes */
} murmur_status;

/* Fill *out (set out->size = sizeof *out first; fields beyond a smaller
 * size are not written). Returns MURMUR_OK or MURMUR_EINVAL. */
MURMUR_API int murmur_status_get(murmur_agent *a, murmur_status *out);

typedef struct murmur_shard_list {
    uint64_t generation; /* the assignment this list belongs to */
    size_t count;
    const char *const *paths; /* count shard files (murmur shard format, docs/SHARDS.md) */
    /* what they are and why, "SOURCE: REASON": SOURCE is primary (this
     * agent's primary shards), replicas (no primary held yet: the replicas
     * it holds) or guest (it holds nothing: one shard to train meanwhile);
     * docs/SHARDS_REPLICATION.md */
    const char *reason;
    char why[96]; /* storage of reason */
} murmur_shard_list;

/* The shard files this agent should train on now (its primary shards; see
 * docs/SHARDS_REPLICATION.md; while it holds none, the replicas it holds
 * or a guest shard, so it never idles). Poll it, or compare generation with
 * murmur_status_get's shards_generation, so the data loader follows
 * re-replication. *out is NULL-free: an empty assignment has count 0.
 * Returns MURMUR_OK, MURMUR_ENOMEM or MURMUR_EINVAL. */
MURMUR_API int murmur_shards_get(murmur_agent *a, murmur_shard_list **out);
MURMUR_API void murmur_shards_free(murmur_shard_list *list);
/* Tell the agent that a shard file of its assignment holds damaged bytes
 * (it did not load): the agent quarantines it (renamed to ID.msh.bad),
 * fetches a good copy and lists the shard again only once verified.
 * Returns MURMUR_OK or MURMUR_EINVAL (not a shard of this agent). */
MURMUR_API int murmur_shard_damaged(murmur_agent *a, const char *path);

/* Ask the agent to stop (async-signal-safe): murmur_mix then returns
 * MURMUR_ESTOPPED. */
MURMUR_API void murmur_stop(murmur_agent *a);

/* Leave the cluster gracefully (peers are told), stop the runtime's
 * threads, add to params (when not NULL) the passive mixing changes not yet
 * applied, write the final checkpoint of params and momentum (NULL = none;
 * only when params is not NULL, checkpoint.every_steps is not 0 and a step
 * was counted) and free everything. Returns 0 for a normal stop, or the
 * non-zero exit status of a stop the agent decided itself (e.g. it was
 * refused by the cluster: docs/OPERATIONS.md). */
MURMUR_API int murmur_close(murmur_agent *a, float *params, const float *momentum);

#ifdef __cplusplus
}
#endif

#endif
