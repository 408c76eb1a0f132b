/* gossip/node — one agent's protocol core: membership, mixing, shard
 * replication and state transfer behind one sans-IO object.
 *
 * Purpose: the agent and the tests drive one object instead of four. The
 * node owns a gossip_swim, a gossip_mix, a gossip_xfer and (when a shard
 * catalog is given) a gossip_shards; it
 * - routes every incoming frame by its message type range (0x0_ membership,
 *   0x1_ mixing, 0x2_ shards, 0x3_ state transfer) to its owner;
 * - feeds every new membership view (epoch change) into the mixer and the
 *   shard replicator, so placement and mixing always follow SWIM;
 * - runs the join policy: a node created with fetch_model waits for a view
 *   with other members, then pulls the model from them by state transfer
 *   (or learns that its checkpoint is recent enough), and gives up after
 *   join_wait_us without a peer or GOSSIP_NODE_FETCH_TRIES failed transfers
 *   (it then trains from its own model; every agent starts from the same
 *   init seed, so that model is a valid start);
 * - merges the four send queues (round robin, so a long shard transfer never
 *   starves probes) and fills dest_addr from the membership table;
 * - reports the earliest deadline of the four and its own timers;
 * - carries the end of the job (JOB_END, type 0x40): a node that meets the
 *   job's end condition (a target accuracy) announces it to every member of
 *   its view; a node that hears it first takes it as its own end and
 *   passes it on to GOSSIP_NODE_RELAY_FANOUT(N) random members of its view
 *   (an epidemic: every live member hears it within a few hops even when
 *   some copies are lost), then the caller leaves. Only members of the view
 *   are heard. Payload, 24 bytes, big-endian as every frame: origin node id (u64),
 *   origin's local step (u64), accuracy (f32 bits), reason (u8: 1 = target
 *   accuracy), 3 zero bytes.
 *
 * Shape: the sans-IO contract of docs/ARCHITECTURE.md. Time is an argument;
 * memory and randomness come from the env. The mixer's start/take, the
 * replicator's primary list and the counters are reached through the
 * accessors (gossip_node_mix, ...); after calling into a part directly the
 * caller drains gossip_node_poll_send as usual.
 *
 * Model state (gossip_node_model_state):
 *   JOINING  -> (transfer complete) FETCHED -> adopt -> READY
 *            -> (checkpoint recent) RESUME  -> adopt -> READY
 *            -> (no peer / transfers failed) OWN -> adopt -> READY
 *   created without fetch_model: OWN at once.
 * The caller must not start mixing before READY (it has no agreed model).
 *
 * Ownership: frames returned by poll_send point into the parts (or the
 * node's address buffer) and stay valid until the next call on the node.
 */
#ifndef GOSSIP_NODE_H
#define GOSSIP_NODE_H

#include <stddef.h>
#include <stdint.h>

#include "gossip/env.h"
#include "gossip/mix.h"
#include "gossip/shards.h"
#include "gossip/swim.h"
#include "gossip/types.h"
#include "gossip/wire.h"
#include "gossip/xfer.h"

/* Transfers tried (each over every peer, GOSSIP_XFER_PASSES times) before a
 * joiner gives up and trains from its own model. */
#define GOSSIP_NODE_FETCH_TRIES 3u
/* Default wait for a first peer before a joiner uses its own model: 10 s,
 * five default join retries (2 probe periods each). */
#define GOSSIP_NODE_JOIN_WAIT_DEFAULT_US 10000000u
/* Pause between two transfer attempts. */
#define GOSSIP_NODE_FETCH_RETRY_US 1000000u
/* A transfer every peer refused as busy (gossip_xfer_failed_busy: none had
 * a model yet, as when agents start together) is not counted as a failure:
 * it is retried after this pause, and the joiner uses its own model once
 * such refusals have lasted GOSSIP_NODE_FETCH_BUSY_GIVE_UP_US (the time
 * GOSSIP_NODE_FETCH_TRIES counted failures take). Before, a joiner whose
 * peers were a few milliseconds from ready waited a whole second. */
#define GOSSIP_NODE_FETCH_BUSY_RETRY_US 100000u
#define GOSSIP_NODE_FETCH_BUSY_GIVE_UP_US                                                          \
    ((GOSSIP_NODE_FETCH_TRIES - 1u) * GOSSIP_NODE_FETCH_RETRY_US)
/* Parts whose send queues are merged in turn: swim, xfer, mix, shards.
 * The node's own JOB_END frames go before all of them. */
#define GOSSIP_NODE_PARTS 4u
/* JOB_END: payload size; most members one node sends it to (the origin
 * sends to its whole view, up to GOSSIP_MEMBERS_MAX); relays go to
 * 3 + ceil(log2 N) random members of a view of N (gossip's usual
 * O(log N) fanout: with 3 extra copies a loss of a few frames does not
 * stop the spread). */
#define GOSSIP_NODE_JOB_END_BYTES 24u
/* Most members a relay sends JOB_END to: 3 + ceil(log2 GOSSIP_MEMBERS_MAX)
 * = 17 fit (and at most GOSSIP_SAMPLE_MAX). */
#define GOSSIP_NODE_RELAY_MAX             32u
#define GOSSIP_NODE_JOB_END_REASON_TARGET 1u

/* The end of the job as this node knows it (gossip_node_job_end). */
typedef struct gossip_node_job_end_info {
    uint64_t origin; /* the node that met the condition (self if this one) */
    uint64_t step;   /* its local step then */
    float accuracy;  /* its accuracy then */
    unsigned reason; /* GOSSIP_NODE_JOB_END_REASON_* */
    uint64_t from;   /* who told this node (0 = it met it itself) */
} gossip_node_job_end_info;

typedef enum gossip_node_model {
    GOSSIP_NODE_JOINING = 0, /* waiting for a peer, or transferring */
    GOSSIP_NODE_FETCHED,     /* a verified model is ready: gossip_node_model_result */
    GOSSIP_NODE_RESUME,      /* the caller's checkpoint is recent enough */
    GOSSIP_NODE_OWN,         /* use the caller's own model (founder or gave up) */
    GOSSIP_NODE_READY,       /* adopted; mixing may run */
} gossip_node_model;

typedef struct gossip_node_config {
    uint64_t self;         /* node id, != 0 */
    const char *self_addr; /* copied by swim */
    /* Parts; self ids and addresses are filled in by the node. */
    gossip_swim_config swim;
    gossip_mix_config mix;   /* dim required */
    gossip_xfer_config xfer; /* dim taken from mix; snapshot callback here */
    /* Shard replication: n_shards == 0 (or ids NULL) runs without. */
    gossip_shards_config shards;
    /* Join policy. */
    int fetch_model;    /* 1: pull the model from peers first */
    int has_checkpoint; /* the caller holds a checkpoint at ckpt_round */
    uint64_t ckpt_round;
    gossip_time_us join_wait_us; /* 0 = GOSSIP_NODE_JOIN_WAIT_DEFAULT_US */
} gossip_node_config;

/* Fill every part with its defaults (swim zeros, mix zeros, xfer and shards
 * defaults). The caller sets self, self_addr, mix.dim and what it needs. */
void gossip_node_config_default(gossip_node_config *cfg);

typedef struct gossip_node_stats {
    uint64_t recv_frames;                /* frames accepted by a part */
    uint64_t rejected[GOSSIP_ERR_COUNT]; /* frames refused, by cause */
    uint64_t views;                      /* views passed to mixer and replicator */
    uint64_t fetch_tries;                /* state transfers started */
    uint64_t job_end_sent;               /* JOB_END frames sent (announced or relayed) */
    uint64_t job_end_no_memory; /* announcements sent to a relay's fanout: no memory for the view */
} gossip_node_stats;

typedef struct gossip_node gossip_node;

/* Errors: GOSSIP_EINVAL (bad config of the node or a part), GOSSIP_ENOMEM
 * (nothing left allocated). */
int gossip_node_create(gossip_node **out, const gossip_env *env, const gossip_node_config *cfg);
void gossip_node_destroy(gossip_node *n);

/* Join through seed addresses (gossip_swim_join). */
int gossip_node_join(gossip_node *n, const char *const *seeds, size_t count, gossip_time_us now);
/* Leave gracefully (gossip_swim_leave); drain poll_send afterwards. */
int gossip_node_leave(gossip_node *n, gossip_time_us now);

/* One frame (header + payload) from an authenticated peer `from` (0 when
 * unknown). Decodes the header and routes; returns GOSSIP_OK or the reason
 * the frame was refused (counted in stats.rejected): a header error,
 * GOSSIP_EMALFORMED (sender differs from `from`), GOSSIP_ETYPE (no part for
 * that type), or the part's own error. */
int gossip_node_recv_frame(gossip_node *n, uint64_t from, const uint8_t *frame, size_t len,
                           gossip_time_us now);
/* The core shape with a decoded header (the simulator driver's entry). */
int gossip_node_recv(gossip_node *n, uint64_t from, const gossip_header *h, const uint8_t *payload,
                     size_t len, gossip_time_us now);
int gossip_node_tick(gossip_node *n, gossip_time_us now);
int gossip_node_poll_send(gossip_node *n, gossip_send *out, gossip_time_us now);
gossip_time_us gossip_node_deadline(const gossip_node *n);
/* The host could not hand a frame from poll_send to the network (`dest`:
 * its destination id; no route, dials backing off, queue full). The mixer
 * ends an exchange with that peer at once and avoids it for a while
 * (gossip_mix_unreachable); membership relies on its own probes. Returns
 * GOSSIP_OK or GOSSIP_EINVAL (dest 0). */
int gossip_node_unreachable(gossip_node *n, uint64_t dest, gossip_time_us now);

/* The current membership view (owned by the node, valid until the next
 * call that changes it). */
void gossip_node_view(const gossip_node *n, gossip_view *out);

gossip_node_model gossip_node_model_state(const gossip_node *n);
/* The transferred model (FETCHED only): dim values and the source's round.
 * Errors: GOSSIP_ENOTFOUND. */
int gossip_node_model_result(const gossip_node *n, float *out, uint64_t *round);
/* The caller has installed its model (FETCHED, RESUME or OWN) -> READY.
 * Errors: GOSSIP_EINVAL (still JOINING). */
int gossip_node_model_adopt(gossip_node *n);

/* GOSSIP_SWIM_ADMITTED, or why membership gave up for good (another
 * manifest at the seeds, or another live process with our id): the caller
 * should stop without a graceful leave. Details: gossip_swim_conflict_get. */
gossip_swim_refusal gossip_node_refused(const gossip_node *n);

gossip_swim *gossip_node_swim(gossip_node *n);
gossip_mix *gossip_node_mix(gossip_node *n);
gossip_xfer *gossip_node_xfer(gossip_node *n);
/* NULL when created without a catalog. */
gossip_shards *gossip_node_shards(gossip_node *n);
const gossip_node_stats *gossip_node_stats_get(const gossip_node *n);

/* This node met the job's end condition: announce it to every member of
 * the view (frames through poll_send). Returns GOSSIP_OK, or GOSSIP_ESTALE
 * when the job had already ended here (nothing is sent again). */
int gossip_node_announce_end(gossip_node *n, unsigned reason, uint64_t step, float accuracy,
                             gossip_time_us now);
/* 1 and *out filled when the job has ended (announced here or heard from a
 * member), else 0. */
int gossip_node_job_end(const gossip_node *n, gossip_node_job_end_info *out);

#endif
