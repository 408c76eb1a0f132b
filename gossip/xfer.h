/* gossip/xfer — model state transfer for a joining or restarting agent
 * (sans-IO).
 *
 * Purpose: a new agent pulls the current model, a float32 vector of `dim`
 * values, from a peer before it starts mixing; or, when it has a recent
 * checkpoint of its own, it resumes from that instead.
 *
 * Protocol (byte layouts in docs/SHARDS_REPLICATION.md):
 *   fetcher -> source  MODEL_WANT  kind START: snapshot your model for me
 *   source  -> fetcher MODEL_CHUNK kind INFO: round, dim, chunking, hash
 *   fetcher -> source  MODEL_WANT  kind DATA: chunks [first, first+count)
 *   source  -> fetcher MODEL_CHUNK kind DATA: one chunk per frame
 *   fetcher -> source  MODEL_WANT  kind DONE: release the snapshot
 *   source  -> fetcher MODEL_NACK  (busy, bad request, snapshot gone)
 * At START the source copies its vector once (through the snapshot
 * callback) and stamps it with the round it was taken at; every chunk of the
 * transfer comes from that copy, so the fetcher gets one consistent model
 * even while the source keeps training. The hash is BLAKE2b-256 over
 * round (u64 BE) || dim (u32 BE) || the values as big-endian float32; the
 * fetcher hashes the chunks in order as they arrive and compares at the end.
 * A mismatch, a non-finite value, a NACK or a timeout restarts the transfer
 * from the next peer (a new snapshot); after GOSSIP_XFER_PASSES passes over
 * the peer list the transfer fails and the caller decides (retry later).
 *
 * Resume policy: when the caller has a checkpoint taken at round c and the
 * source's snapshot is at round R, the fetcher resumes from the checkpoint
 * (no chunks pulled) if R <= c + K, K = cfg.resume_rounds; otherwise it
 * pulls the model. gossip_xfer_should_resume is that rule.
 *
 * Invariants: at most GOSSIP_XFER_SERVE_MAX snapshots held at a source (each
 * dim floats, allocated at START, freed at DONE or after serve_idle_us
 * without a request); one fetch at a time; window chunks requested ahead.
 * Units: values, microseconds. Ownership: the snapshot callback's ctx
 * belongs to the caller.
 */
#ifndef GOSSIP_XFER_H
#define GOSSIP_XFER_H

#include <stddef.h>
#include <stdint.h>

#include "gossip/codec.h"
#include "gossip/env.h"
#include "gossip/types.h"
#include "gossip/wire.h"

/* Values per chunk: default 16384 (64 KiB frames, as for shards), max 256 Ki
 * (1 MiB). */
#define GOSSIP_XFER_CHUNK_DEFAULT  16384u
#define GOSSIP_XFER_CHUNK_MAX      (256u * 1024u)
#define GOSSIP_XFER_DIM_MAX        GOSSIP_CODEC_DIM_MAX
#define GOSSIP_XFER_WINDOW_DEFAULT 8u
#define GOSSIP_XFER_WINDOW_MAX     64u
/* Snapshots a source holds at once: a join wave asks several sources, and
 * each snapshot costs dim * 4 bytes, so 2 per source. */
#define GOSSIP_XFER_SERVE_MAX 2u
/* Peers a fetch may try, and passes over them before giving up. */
#define GOSSIP_XFER_PEERS_MAX 16u
#define GOSSIP_XFER_PASSES    2u
/* Default K: 20 rounds behind is still "recent" (a mixing round costs far
 * less than a full transfer, and gossip closes a small gap in a few rounds). */
#define GOSSIP_XFER_RESUME_DEFAULT 20u

#define GOSSIP_XFER_WANT_SIZE  11u
#define GOSSIP_XFER_INFO_SIZE  57u
#define GOSSIP_XFER_DATA_FIXED 13u
#define GOSSIP_XFER_NACK_SIZE  5u

_Static_assert(GOSSIP_XFER_WINDOW_MAX <= UINT16_MAX, "WANT count is a u16");
_Static_assert(GOSSIP_XFER_DATA_FIXED + 4ull * GOSSIP_XFER_CHUNK_MAX <= GOSSIP_PAYLOAD_MAX,
               "a chunk fits one frame");
_Static_assert((uint64_t)GOSSIP_XFER_DIM_MAX + GOSSIP_XFER_CHUNK_MAX <= UINT32_MAX,
               "value offsets (chunk index * chunk values) fit in uint32");

typedef enum gossip_xfer_kind {
    GOSSIP_XFER_START = 0, /* WANT */
    GOSSIP_XFER_INFO = 0,  /* CHUNK */
    GOSSIP_XFER_DATA = 1,
    GOSSIP_XFER_DONE = 2, /* WANT */
} gossip_xfer_kind;

typedef enum gossip_xfer_nack_reason {
    GOSSIP_XFER_BUSY = 1,
    GOSSIP_XFER_BAD_REQUEST = 2,
    GOSSIP_XFER_GONE = 3, /* no such snapshot (expired or never taken) */
} gossip_xfer_nack_reason;

typedef enum gossip_xfer_state {
    GOSSIP_XFER_IDLE = 0,
    GOSSIP_XFER_RUNNING,
    GOSSIP_XFER_COMPLETE, /* a verified model is ready: gossip_xfer_result */
    GOSSIP_XFER_RESUME,   /* the checkpoint is recent enough: use it */
    GOSSIP_XFER_FAILED,   /* every peer failed; call start again later */
} gossip_xfer_state;

/* A decoded state-transfer message; pointers borrow the payload. */
typedef struct gossip_xfer_msg {
    uint8_t type;
    uint32_t xfer;
    uint8_t kind;
    uint8_t reason;
    uint32_t first; /* WANT DATA */
    uint16_t count;
    uint64_t round; /* INFO */
    uint32_t dim;
    uint32_t chunk_values;
    uint32_t n_chunks;
    const uint8_t *hash;
    uint32_t index; /* DATA */
    uint32_t n_values;
    const uint8_t *values; /* n_values big-endian float32 */
} gossip_xfer_msg;

/* Decode a MODEL_* payload. Returns GOSSIP_OK, GOSSIP_ETYPE, GOSSIP_ETRUNC,
 * GOSSIP_ETOOBIG or GOSSIP_EMALFORMED. Pure. */
int gossip_xfer_msg_decode(uint8_t type, const uint8_t *payload, size_t len, gossip_xfer_msg *m);

/* The caller's model, copied out when a peer asks for a snapshot: write dim
 * values into out and the current round into *round; return 0, or non-zero
 * when no model is available (the peer gets a NACK busy). Called from inside
 * gossip_xfer_recv; it must not call back into the xfer object. */
typedef int (*gossip_xfer_snapshot_fn)(void *ctx, float *out, uint32_t dim, uint64_t *round);

typedef struct gossip_xfer_config {
    uint64_t self;
    uint32_t dim;                     /* model size in values, 1..GOSSIP_XFER_DIM_MAX */
    uint32_t chunk_values;            /* 1..GOSSIP_XFER_CHUNK_MAX */
    uint32_t window;                  /* 1..GOSSIP_XFER_WINDOW_MAX */
    gossip_time_us timeout_us;        /* no progress for this long: next peer */
    gossip_time_us serve_idle_us;     /* snapshot freed after this long unused */
    uint64_t resume_rounds;           /* K of the resume policy */
    gossip_xfer_snapshot_fn snapshot; /* NULL: this agent never serves */
    void *snapshot_ctx;
} gossip_xfer_config;

/* Defaults: chunk 16384 values, window 8, timeout 2 s, idle 10 s, K 20. */
void gossip_xfer_config_default(gossip_xfer_config *cfg);

/* 1 when a checkpoint at ckpt_round should be used instead of a transfer
 * from a peer at peer_round (peer_round <= ckpt_round + k). Pure. */
int gossip_xfer_should_resume(uint64_t ckpt_round, uint64_t peer_round, uint64_t k);

typedef struct gossip_xfer gossip_xfer;

typedef struct gossip_xfer_counters {
    uint64_t started;   /* fetches started */
    uint64_t completed; /* models received and verified */
    uint64_t resumed;   /* fetches ended by the resume policy */
    uint64_t failed;    /* fetches that exhausted every peer */
    uint64_t restarts;  /* moves to another peer */
    uint64_t timeouts;  /* peers that went silent */
    uint64_t nacks;     /* NACKs received */
    uint64_t hash_bad;  /* complete models whose hash did not match */
    uint64_t info_bad;  /* INFO inconsistent with our dim or bounds */
    uint64_t nonfinite; /* chunks holding a NaN, an infinity or a value beyond
                           GOSSIP_ROBUST_ADOPT_VALUE_MAX (gossip/robust.h) */
    uint64_t out_of_order;
    uint64_t stale;     /* frames for another transfer or from another peer */
    uint64_t rejected;  /* frames that failed to decode */
    uint64_t snapshots; /* snapshots taken as a source */
    uint64_t served_chunks;
    uint64_t serve_busy; /* START refused: every slot in use or no memory */
    uint64_t expired;    /* snapshots freed after serve_idle_us */
} gossip_xfer_counters;

/* Errors: GOSSIP_EINVAL (bad config), GOSSIP_ENOMEM (nothing left). The
 * fetch buffer (dim floats) is allocated here so that a joiner does not
 * fail later for memory. */
int gossip_xfer_create(gossip_xfer **out, const gossip_env *env, const gossip_xfer_config *cfg);
void gossip_xfer_destroy(gossip_xfer *x);

/* Begin a fetch from peers (tried in order, at most GOSSIP_XFER_PEERS_MAX).
 * has_checkpoint/ckpt_round select the resume policy. Errors: GOSSIP_EINVAL
 * (no peer, a peer id 0 or self), GOSSIP_EFULL (a fetch is running). */
int gossip_xfer_start(gossip_xfer *x, const uint64_t *peers, uint32_t n_peers, int has_checkpoint,
                      uint64_t ckpt_round, gossip_time_us now);
gossip_xfer_state gossip_xfer_get_state(const gossip_xfer *x);
/* 1 when the last fetch FAILED only because every peer, at every pass,
 * answered its request with a NACK busy before sending anything: no peer
 * had a model to serve yet (they are joining too, or their host has not
 * handed its model over). A timeout, a bad frame or any other NACK makes
 * it 0. The node retries such a fetch sooner (gossip/node.h). */
int gossip_xfer_failed_busy(const gossip_xfer *x);
/* Copy the received model (dim values) and its round. GOSSIP_ENOTFOUND
 * unless the state is GOSSIP_XFER_COMPLETE. */
int gossip_xfer_result(const gossip_xfer *x, float *out, uint64_t *round);
/* The peer's round seen in its INFO (valid in COMPLETE and RESUME). */
uint64_t gossip_xfer_peer_round(const gossip_xfer *x);

/* The sans-IO contract (docs/ARCHITECTURE.md). */
int gossip_xfer_recv(gossip_xfer *x, uint64_t from, const gossip_header *h, const uint8_t *payload,
                     size_t len, gossip_time_us now);
int gossip_xfer_tick(gossip_xfer *x, gossip_time_us now);
int gossip_xfer_poll_send(gossip_xfer *x, gossip_send *out, gossip_time_us now);
gossip_time_us gossip_xfer_deadline(const gossip_xfer *x);
const gossip_xfer_counters *gossip_xfer_counters_get(const gossip_xfer *x);

#endif
