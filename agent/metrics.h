/* agent/metrics — counters, gauges and histograms, served over HTTP with
 * the status.
 *
 * Registry: a fixed table of metric families (a name, a help text, a kind)
 * and series (a family plus labels, e.g.
 * murmur_bytes_sent_total{type="mix_push"}); a histogram family has fixed
 * bucket bounds. Registration takes a mutex and
 * returns a stable handle; updates through a handle are single atomic
 * operations, so the event loop, the training thread and NNG callbacks
 * update without locks. Registering the same name and label again returns
 * the same handle, so callers may register lazily (e.g. a new rejection
 * cause). A NULL handle is accepted by every update and does nothing.
 *
 * Exposition: GET /metrics renders the Prometheus text format 0.0.4 (HELP
 * and TYPE lines per family, then one line per series; help escapes \\ and
 * \n, label values escape \\, \" and \n; gauges print NaN, +Inf, -Inf;
 * histograms print cumulative _bucket{le=...} lines, _sum and _count),
 * then, when enabled, the process_* collectors every Prometheus client
 * library exports (CPU seconds, resident and virtual memory, open and
 * maximum file descriptors, start time), read from /proc on each request.
 * GET /status renders agent_status as one JSON object, filled on each
 * request by the agent's callback. Any other path gets 404. The server is
 * NNG 1.5.2's HTTP server: handlers run on NNG's threads, so the status
 * callback must be thread-safe (read atomics or take a short lock).
 *
 * Limits: AGENT_METRICS_FAMILIES_MAX families, AGENT_METRICS_SERIES_MAX
 * series; registering beyond them fails with AGENT_METRICS_EFULL and the
 * caller goes on without that metric (a NULL handle).
 *
 * Ownership: the registry owns its series; handles stay valid until
 * agent_metrics_destroy, which must come after agent_metrics_server_stop.
 * agent_http_get's *body is malloc'd; the caller frees it.
 */
#ifndef AGENT_METRICS_H
#define AGENT_METRICS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gossip/types.h"

#define AGENT_METRICS_FAMILIES_MAX 64u
/* Series: ~20 message types x 4 directions/units = 80, ~30 rejection
 * causes, ~20 plain metrics; 512 leaves room for the integrator's own. */
#define AGENT_METRICS_SERIES_MAX 512u
#define AGENT_METRICS_NAME_MAX   64u  /* metric or label name, including NUL */
#define AGENT_METRICS_VALUE_MAX  64u  /* label value, including NUL */
#define AGENT_METRICS_HELP_MAX   192u /* help text, including NUL */
/* The labels of one series as rendered (k1="v1",k2="v2"), including NUL. */
#define AGENT_METRICS_LABELS_MAX 192u
/* Histograms: most families, most finite bucket bounds each. */
#define AGENT_METRICS_HISTOGRAMS_MAX 16u
#define AGENT_METRICS_BUCKETS_MAX    16u
/* The one HELP text of murmur_rejections_total (whoever registers it). */
#define AGENT_METRICS_REJECT_HELP                                                                  \
    "Inputs rejected and dropped (frames, handshakes, files), by cause."
/* Largest /status and /metrics response the client accepts. */
#define AGENT_HTTP_BODY_MAX (4u * 1024u * 1024u)
/* Message types are one byte on the wire (gossip/wire.h). */
#define AGENT_METRICS_MSG_TYPES 256u

_Static_assert(AGENT_METRICS_FAMILIES_MAX <= AGENT_METRICS_SERIES_MAX,
               "every family has at least one series");

typedef enum agent_metrics_err {
    AGENT_METRICS_OK = 0,
    AGENT_METRICS_EINVAL,    /* bad name, label or argument */
    AGENT_METRICS_ECONFLICT, /* name registered before with another kind */
    AGENT_METRICS_EFULL,     /* family or series table full */
    AGENT_METRICS_ENOMEM,
    AGENT_METRICS_ENET,      /* HTTP server or client failure (message in err) */
    AGENT_METRICS_ETIMEDOUT, /* HTTP request exceeded its deadline */
    AGENT_METRICS_EHTTP,     /* the server answered with a status other than 200 */
    AGENT_METRICS_ERR_COUNT
} agent_metrics_err;

const char *agent_metrics_strerror(int err);

typedef enum agent_metric_kind {
    AGENT_METRIC_COUNTER = 0,
    AGENT_METRIC_GAUGE = 1,
    AGENT_METRIC_HISTOGRAM = 2
} agent_metric_kind;

typedef struct agent_metrics agent_metrics;
typedef struct agent_metric agent_metric;
typedef struct agent_histogram agent_histogram;

int agent_metrics_create(agent_metrics **out);
void agent_metrics_destroy(agent_metrics *m);

/* Register (or find) a series. name: [a-zA-Z_:][a-zA-Z0-9_:]*, counters
 * should end in _total. label_key/label_value: both NULL for no label, or a
 * key [a-zA-Z_][a-zA-Z0-9_]* (not starting "__") and any value.
 * help is used on first registration of the family.
 * Errors: EINVAL, ECONFLICT (same name, other kind), EFULL. */
int agent_metrics_counter(agent_metrics *m, const char *name, const char *help,
                          const char *label_key, const char *label_value, agent_metric **out);
int agent_metrics_gauge(agent_metrics *m, const char *name, const char *help, const char *label_key,
                        const char *label_value, agent_metric **out);

/* A gauge series with several labels: kv is NULL-terminated key, value,
 * key, value... (murmur_build_info). Errors: as agent_metrics_gauge. */
int agent_metrics_gauge_labels(agent_metrics *m, const char *name, const char *help,
                               const char *const *kv, agent_metric **out);
/* Register (or find) a histogram with n increasing finite upper bounds
 * (n <= AGENT_METRICS_BUCKETS_MAX; +Inf is implicit). Errors: EINVAL,
 * ECONFLICT, EFULL. */
int agent_metrics_histogram(agent_metrics *m, const char *name, const char *help,
                            const double *bounds, size_t n, agent_histogram **out);
/* Count one observation (lock-free, any thread; NaN and a NULL handle are
 * ignored). */
void agent_histogram_observe(agent_histogram *h, double v);
uint64_t agent_histogram_count(const agent_histogram *h);
double agent_histogram_sum(const agent_histogram *h);
/* Render the process_* collectors after the registry's families. */
void agent_metrics_process(agent_metrics *m, bool on);

/* Updates: lock-free, any thread, NULL handle ignored. */
void agent_metric_inc(agent_metric *c);
void agent_metric_add(agent_metric *c, uint64_t n);
void agent_metric_set(agent_metric *g, double v);
/* Reads (tests, /status callbacks). */
uint64_t agent_metric_count(const agent_metric *c);
double agent_metric_value(const agent_metric *g);

/* Prometheus text exposition of every series, in registration order, in a
 * malloc'd NUL-terminated buffer. Errors: ENOMEM. */
int agent_metrics_render(agent_metrics *m, char **out, size_t *len);

/* The metrics every agent exports. Registered in one call, every family
 * (and every cause and message type) present from the start at zero; the
 * integrator only updates them. Names (docs/OPERATIONS.md explains each):
 *   murmur_build_info{version,commit} (always 1),
 *   murmur_steps_total, murmur_samples_total, murmur_samples_per_second,
 *   murmur_loss, murmur_accuracy, murmur_peers, murmur_view_epoch,
 *   murmur_mixing_rounds_total, murmur_round_aborts_total,
 *   murmur_round_duration_seconds (histogram), murmur_consensus_distance
 *   (histogram), murmur_checkpoints_total, murmur_checkpoint_failures_total,
 *   murmur_training_recoveries_total, murmur_shards_held,
 *   murmur_shards_primary, murmur_shards_missing,
 *   murmur_shards_quarantined_total, murmur_uptime_seconds,
 *   murmur_{bytes,messages}_{sent,received}_total{type=<gossip_msg_name>},
 *   murmur_rejections_total{cause=<net_reject_name | core cause>},
 *   murmur_refusals_total{cause=manifest|duplicate_id}, and process_*. */
typedef struct agent_metrics_std {
    agent_metrics *registry;
    agent_metric *build_info;
    agent_metric *steps, *samples, *samples_per_second, *loss, *accuracy;
    agent_metric *peers, *view_epoch, *mixing_rounds, *round_aborts;
    agent_metric *checkpoints, *checkpoint_failures, *training_recoveries;
    agent_metric *shards_held, *shards_primary, *shards_missing, *shards_quarantined;
    agent_metric *uptime_seconds;
    agent_histogram *round_duration, *consensus_distance;
    uint64_t round_start_us; /* the round in progress (event loop only), 0 = none */
    /* indexed by message type; unknown types share the type="other" series */
    agent_metric *bytes_sent[AGENT_METRICS_MSG_TYPES], *bytes_received[AGENT_METRICS_MSG_TYPES];
    agent_metric *messages_sent[AGENT_METRICS_MSG_TYPES];
    agent_metric *messages_received[AGENT_METRICS_MSG_TYPES];
    /* murmur_gossip_exchanges_total by AGENT_METRICS_EXCHANGE_OUTCOMES,
     * murmur_robust_total by AGENT_METRICS_ROBUST_ACTIONS (gossip_mix_stats) */
    agent_metric *exchanges[5], *robust[2];
} agent_metrics_std;

/* The outcome labels of murmur_gossip_exchanges_total and the action labels
 * of murmur_robust_total, in the order of agent_metrics_std's arrays. */
#define AGENT_METRICS_EXCHANGE_OUTCOMES "held", "refused", "answered", "retried", "cancelled"
#define AGENT_METRICS_ROBUST_ACTIONS    "clipped", "ignored"

/* Register the standard set (and turn the process_* collectors on).
 * Errors: as agent_metrics_counter. */
int agent_metrics_std_register(agent_metrics *m, agent_metrics_std *s);
/* A mixing round started / ended (monotonic microseconds; one thread, the
 * event loop): the duration goes to murmur_round_duration_seconds and, for
 * a completed round, consensus (||mixed - sent|| / ||sent||) to
 * murmur_consensus_distance. An end without a begin is ignored. */
void agent_metrics_std_round_begin(agent_metrics_std *s, uint64_t now_us);
void agent_metrics_std_round_end(agent_metrics_std *s, uint64_t now_us, bool completed,
                                 double consensus);
/* The cause label of a core rejection (a gossip_err): "truncated",
 * "malformed", "stale", ...; "other" for an unknown code. */
const char *agent_metrics_core_cause(int err);
/* Count one frame of `type` and `bytes` (header included) sent or received. */
void agent_metrics_std_message(const agent_metrics_std *s, bool sent, unsigned type, size_t bytes);
/* Count one rejected input; cause is a short snake_case word ("replay",
 * "auth", "malformed", "stale", "queue_full", ...). Registers the series on
 * first use. Errors: as agent_metrics_counter (the count is then lost). */
int agent_metrics_std_reject(const agent_metrics_std *s, const char *cause);

/* ---- /status ---- */

#define AGENT_STATUS_ADDR_MAX   GOSSIP_ADDR_MAX
#define AGENT_STATUS_MIXING_MAX 24u
#define AGENT_STATUS_STATE_MAX  24u
#define AGENT_STATUS_TRAIN_MAX  24u
/* Longest /status document: about 35 fields of bounded size (keys ~650
 * bytes, numbers at most 25 characters each, the address escaped). */
#define AGENT_STATUS_JSON_MAX 2048u

typedef struct agent_status {
    uint64_t node_id;
    char address[AGENT_STATUS_ADDR_MAX]; /* advertised address */
    uint64_t step;                       /* local SGD steps done */
    double samples_per_second;           /* recent training throughput */
    double loss, accuracy;               /* recent training loss, test accuracy in [0, 1] */
    uint32_t peers;                      /* live members in the view, self excluded */
    uint64_t view_epoch;
    char mixing[AGENT_STATUS_MIXING_MAX]; /* "gossip", "allreduce", ... */
    uint32_t shards_held, shards_primary;
    double uptime_s;
    /* Written after uptime_s, in this order. */
    char state[AGENT_STATUS_STATE_MAX];  /* "joining", "waiting_shards", "training", "leaving" */
    uint64_t round;                      /* mixing rounds (carried over by state transfer) */
    uint64_t mixing_rounds;              /* rounds completed by this process */
    uint64_t round_aborts;               /* rounds aborted */
    uint64_t bytes_sent, bytes_received; /* frames, header included, all types */
    double consensus_distance; /* ||mixed - own|| / ||own|| of recent rounds (moving average) */
    double test_loss;          /* latest test-set loss */
    uint32_t shards_missing;   /* shards assigned here that no live agent holds */
    /* What the trainer uses and why (gossip_shards_train): source "primary",
     * "replicas", "guest" or "none"; reason "no_view", "primary",
     * "primaries_pending" or "no_primary". */
    char train_source[AGENT_STATUS_TRAIN_MAX];
    char train_reason[AGENT_STATUS_TRAIN_MAX];
    uint32_t train_shards;   /* shards the trainer uses now */
    uint32_t shards_pending; /* shards it is primary for and does not hold yet */
    /* [faults] (agent/chaos.h); in the JSON only when faults_enabled */
    uint32_t faults_enabled, faults_active, training_paused;
    uint64_t faults_applied, faults_removed, fault_frames;
    double training_slow;
    /* A full shards directory (gossip_shards_full_get): this agent hands
     * its primaries to the next holders (store_full, shards_handed), or
     * trains shards of a full agent (shards_taken). */
    uint32_t store_full, shards_handed, shards_taken;
    uint32_t pid; /* the agent's process (murmur chaos kills and restarts local agents) */
} agent_status;

/* Called on an NNG thread for every GET /status; fills *out, which arrives
 * zeroed except uptime_s (pre-filled with the server's uptime; the agent may
 * overwrite it). Must be thread-safe and quick: no blocking on the event
 * loop (read atomics, or copy a snapshot under a short lock). */
typedef void (*agent_status_fn)(void *ctx, agent_status *out);

/* Write st as JSON ({"node_id":"<16 hex>","address":...}); non-finite
 * numbers become null. Returns the length, or 0 if cap is too small. */
size_t agent_status_json(const agent_status *st, char *buf, size_t cap);

typedef struct agent_metrics_server agent_metrics_server;

/* Start an HTTP server on listen ("HOST:PORT"; port 0 picks a free port,
 * see agent_metrics_server_port). status_fn may be NULL (then /status is a
 * JSON object with only uptime_s). Errors: EINVAL, ENOMEM, ENET (bind
 * failed: the message names the address and NNG's reason). */
int agent_metrics_serve(agent_metrics *m, const char *listen, agent_status_fn status_fn,
                        void *status_ctx, agent_metrics_server **out, char *err, size_t errlen);
/* The bound TCP port. */
uint16_t agent_metrics_server_port(const agent_metrics_server *s);
/* Stop serving, wait for running handlers, free. NULL is a no-op. */
void agent_metrics_server_stop(agent_metrics_server *s);

/* ---- /members ----
 *
 * GET /members answers the members of the agent's view as a JSON array with
 * one flat object per line (so `murmur status --cluster` reads each line
 * with the flat reader):
 *   [
 *   {"node_id":"<16 hex>","address":"tcp://10.0.0.2:7000","state":"alive","incarnation":3},
 *   ...
 *   ]
 * The runtime publishes the list from its event loop; handlers copy it
 * under the server's lock. */
typedef struct agent_member {
    uint64_t node_id;
    char address[AGENT_STATUS_ADDR_MAX];
    const char *state; /* "alive", "suspect", "dead", "left" (static strings) */
    uint32_t incarnation;
} agent_member;

/* Publish the list (copied). NULL server: nothing. Errors: ENOMEM (the old
 * list stays). */
int agent_metrics_server_set_members(agent_metrics_server *s, const agent_member *m, size_t n);
struct gossip_swim;
/* Publish the members of a SWIM view (self included): their addresses,
 * states and incarnations. Call it from the thread that owns the swim. */
int agent_metrics_server_members_from_swim(agent_metrics_server *s, const struct gossip_swim *sw);

/* GET http://HOST:PORT/path with a deadline of timeout_ms for connecting and
 * the whole exchange. On success (status 200) *body is a malloc'd
 * NUL-terminated copy of the body. *status (may be NULL) gets the HTTP status
 * whenever there was an answer. Errors: EINVAL, ENET (refused, reset, bad
 * answer), ETIMEDOUT, EHTTP (non-200; *body NULL), ENOMEM. */
int agent_http_get(const char *hostport, const char *path, int timeout_ms, char **body, size_t *len,
                   uint16_t *status, char *err, size_t errlen);

#endif
