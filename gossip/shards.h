/* gossip/shards — replication of content-addressed data shards (sans-IO).
 *
 * Purpose: keep every shard of a catalog on its placement holders
 * (gossip/placement.h) as the membership view changes, copying missing
 * replicas peer to peer in verified chunks, and tell the caller which shards
 * it is primary for (the shards it trains).
 *
 * Protocol (byte layouts in docs/SHARDS_REPLICATION.md):
 *   fetcher -> source  SHARD_WANT  kind MANIFEST: send me the chunk hashes
 *   source  -> fetcher SHARD_CHUNK kind MANIFEST: size, chunk size, hashes
 *   fetcher -> source  SHARD_WANT  kind DATA: chunks [first, first+count)
 *   source  -> fetcher SHARD_CHUNK kind DATA: one chunk per frame
 *   anyone  -> holder  SHARD_WANT  kind PROBE: do you hold it?
 *   full    -> holders SHARD_WANT  kind FULL: my store is full, train my
 *                      primaries for me (see "A full store" below)
 *   holder  -> anyone  SHARD_CHUNK kind HAVE, or SHARD_NACK
 *   source  -> fetcher SHARD_NACK  (not held, busy, bad request)
 * Chunks are accepted strictly in order (a gap is dropped and re-requested),
 * each checked against the manifest's BLAKE2b-256 chunk hash; the whole shard
 * is hashed incrementally and checked against its 32-byte id before commit.
 * A chunk mismatch discards the chunk and continues from another source; a
 * whole mismatch (or more than GOSSIP_SHARDS_BAD_CHUNKS_MAX bad chunks)
 * discards everything, manifest included, and restarts elsewhere. Every
 * mismatch is counted.
 *
 * Sources, in order: holders of the shard in the previous view that are still
 * live, then its holders in the current view, then every other live member
 * (from a per-shard offset). A NACK or timeout moves to the next; when all
 * are exhausted the shard waits backoff_us and starts again.
 *
 * Drop policy: a complete shard this agent no longer holds by placement is
 * kept (and served) until every current holder has answered a PROBE with
 * HAVE; then it is dropped. So a replica leaves only after the new holders
 * have it, and a surplus copy is a source meanwhile.
 *
 * A full store: an agent whose store refused a write for lack of room (and
 * has stored nothing since) while it still misses an assigned shard hands
 * its primaries to others. It sends a FULL notice every
 * GOSSIP_SHARDS_FULL_NOTICE_US to the other holders of the shards it is
 * primary for; a receiver remembers the sender as full for
 * GOSSIP_SHARDS_FULL_TTL_US. Every agent takes as the primary of a shard
 * the first holder of its placement row not known to be full (the
 * placement primary when all are): a deterministic rule, so the holders of
 * a shard that heard the same notices agree on who trains it, and an agent
 * full with no notice lost hands all its primaries to the next holders.
 * The full agent keeps mixing and trains what it holds (REPLICAS).
 *
 * Invariants: at most fetch_max fetches in flight, window chunks requested
 * per fetch, GOSSIP_SHARDS_SERVE_MAX queued answers, GOSSIP_SHARDS_PROBE_MAX
 * queued probes; no allocation after create except on a view change (the new
 * view and placement tables). Units: bytes, microseconds.
 * Ownership: the object copies the catalog; the store must outlive it.
 */
#ifndef GOSSIP_SHARDS_H
#define GOSSIP_SHARDS_H

#include <stddef.h>
#include <stdint.h>

#include "gossip/env.h"
#include "gossip/placement.h"
#include "gossip/store.h"
#include "gossip/types.h"
#include "gossip/wire.h"

/* Chunk size: default 64 KiB (a chunk frame is then ~1 ms on a 500 Mbit/s
 * link, small enough to interleave with mixing frames); max 1 MiB. */
#define GOSSIP_SHARDS_CHUNK_DEFAULT (64u * 1024u)
#define GOSSIP_SHARDS_CHUNK_MAX     (1024u * 1024u)
/* Chunks per shard; a 64 MiB shard at 64 KiB chunks is 1024. The manifest
 * frame is 53 + 32 * chunks bytes <= 128 KiB + 53. */
#define GOSSIP_SHARDS_CHUNKS_MAX          4096u
#define GOSSIP_SHARDS_SHARD_BYTES_DEFAULT (64ull * 1024u * 1024u)
/* Concurrent fetches: default 4 (enough to fill a link with window 8 at
 * 64 KiB while bounding the number of half-written shards), max 16. */
#define GOSSIP_SHARDS_FETCH_DEFAULT 4u
#define GOSSIP_SHARDS_FETCH_MAX     16u
/* Chunks requested ahead per fetch: default 8 (8 * 64 KiB = 512 KiB in
 * flight covers a 4 ms RTT at 1 Gbit/s), max 64; a WANT asks for at most
 * this many chunks. */
#define GOSSIP_SHARDS_WINDOW_DEFAULT 8u
#define GOSSIP_SHARDS_WINDOW_MAX     64u
/* Queued answers (manifests, chunk runs, probe answers, NACKs) at a source. */
#define GOSSIP_SHARDS_SERVE_MAX 32u
/* Queued outgoing probes (drop policy). */
#define GOSSIP_SHARDS_PROBE_MAX 64u
/* Manifests cached at a source: a failure typically sends the r - 1 new
 * holders of a shard to the same survivor, so 2 saves most rehashing. */
#define GOSSIP_SHARDS_MANIFEST_CACHE 2u
/* Bad chunks tolerated in one fetch before its manifest is distrusted. */
#define GOSSIP_SHARDS_BAD_CHUNKS_MAX 4u
/* After a store write fails for lack of room, no fetch starts for this long:
 * 30 s, so a full disk costs one failed chunk per 30 s instead of a stream of
 * fetched bytes that cannot be stored, and freed space is used within 30 s. */
#define GOSSIP_SHARDS_FULL_BACKOFF_US 30000000u
/* A full agent repeats its FULL notice every 10 s; a receiver forgets it
 * 35 s after the last one: three notices and 5 s of slack, so two lost
 * notices in a row do not take the primaries back. The cost of the TTL: for
 * up to 35 s after the agent stored a shard again, it and the next holder
 * both train its primaries (some samples visited twice, none skipped). */
#define GOSSIP_SHARDS_FULL_NOTICE_US 10000000u
#define GOSSIP_SHARDS_FULL_TTL_US    35000000u
/* Members remembered as full at once. When more are, the entry heard from
 * last longest ago is replaced: that member's shards go back to it as
 * primary (as before notices existed) until it is heard again. */
#define GOSSIP_SHARDS_FULL_MEMBERS_MAX 64u
/* Byte ranges of a shard left out of its content address (see
 * gossip_shards_config.skip): murmur shard files need 2. */
#define GOSSIP_SHARDS_SKIP_MAX 4u
/* Fixed payload sizes (see docs/SHARDS_REPLICATION.md). */
#define GOSSIP_SHARDS_WANT_SIZE      47u
#define GOSSIP_SHARDS_CHUNK_HDR_SIZE 37u
#define GOSSIP_SHARDS_MANIFEST_FIXED (GOSSIP_SHARDS_CHUNK_HDR_SIZE + 16u)
#define GOSSIP_SHARDS_DATA_FIXED     (GOSSIP_SHARDS_CHUNK_HDR_SIZE + 8u)
#define GOSSIP_SHARDS_NACK_SIZE      37u

_Static_assert(GOSSIP_SHARDS_FULL_TTL_US > 3u * GOSSIP_SHARDS_FULL_NOTICE_US,
               "a full member survives two lost notices");
_Static_assert(GOSSIP_SHARDS_WINDOW_MAX <= UINT16_MAX, "WANT count is a u16");
_Static_assert(GOSSIP_SHARDS_MANIFEST_FIXED + 32ull * GOSSIP_SHARDS_CHUNKS_MAX <=
                   GOSSIP_PAYLOAD_MAX,
               "a manifest fits one frame");
_Static_assert(GOSSIP_SHARDS_DATA_FIXED + (uint64_t)GOSSIP_SHARDS_CHUNK_MAX <= GOSSIP_PAYLOAD_MAX,
               "a chunk fits one frame");
_Static_assert(GOSSIP_SHARDS_SERVE_MAX >= GOSSIP_SHARDS_FETCH_MAX,
               "a source can queue one request of every fetch of one peer");

typedef enum gossip_shard_kind {
    GOSSIP_SHARD_MANIFEST = 0,
    GOSSIP_SHARD_DATA = 1,
    GOSSIP_SHARD_PROBE = 2, /* in WANT */
    GOSSIP_SHARD_HAVE = 2,  /* in CHUNK: the answer to PROBE */
    GOSSIP_SHARD_FULL = 3,  /* in WANT: the sender's store is full (id zero) */
} gossip_shard_kind;

typedef enum gossip_shard_nack_reason {
    GOSSIP_SHARD_NOT_HELD = 1,
    GOSSIP_SHARD_BUSY = 2,
    GOSSIP_SHARD_BAD_REQUEST = 3,
} gossip_shard_nack_reason;

/* A decoded replication message; pointers borrow the payload. */
typedef struct gossip_shard_msg {
    uint8_t type; /* GOSSIP_MSG_SHARD_* */
    const uint8_t *id;
    uint32_t xfer;
    uint8_t kind;   /* WANT, CHUNK */
    uint8_t reason; /* NACK */
    /* WANT DATA */
    uint32_t first;
    uint16_t count;
    uint32_t chunk_bytes; /* WANT DATA and CHUNK MANIFEST */
    /* CHUNK MANIFEST */
    uint64_t size;
    uint32_t n_chunks;
    const uint8_t *hashes; /* n_chunks * 32 */
    /* CHUNK DATA */
    uint32_t index;
    uint32_t len;
    const uint8_t *data;
} gossip_shard_msg;

/* Decode a replication payload of message type `type`. Checks every length
 * against its maximum and the payload size exactly. Returns GOSSIP_OK,
 * GOSSIP_ETYPE, GOSSIP_ETRUNC, GOSSIP_ETOOBIG or GOSSIP_EMALFORMED. Pure. */
int gossip_shard_msg_decode(uint8_t type, const uint8_t *payload, size_t len, gossip_shard_msg *m);

/* A byte range [off, off + len) of a shard. */
typedef struct gossip_shards_range {
    uint64_t off;
    uint64_t len;
} gossip_shards_range;

typedef struct gossip_shards_config {
    uint64_t self;                              /* this agent's node id, != 0 */
    const uint8_t (*ids)[GOSSIP_SHARD_ID_SIZE]; /* the catalog, copied at create */
    uint32_t n_shards;
    gossip_placement_config placement;
    gossip_store store;
    uint32_t chunk_bytes;      /* largest chunk this agent serves and asks for */
    uint64_t shard_bytes_max;  /* largest shard accepted */
    uint32_t fetch_max;        /* 1..GOSSIP_SHARDS_FETCH_MAX */
    uint32_t window;           /* 1..GOSSIP_SHARDS_WINDOW_MAX */
    gossip_time_us timeout_us; /* no progress for this long: next source */
    gossip_time_us backoff_us; /* every source failed: wait this long */
    gossip_time_us probe_us;   /* drop-policy probe interval */
    /* The content address of a shard is BLAKE2b-256 over its bytes minus
     * these ranges (ascending, disjoint, len > 0), in order. None by
     * default (the id hashes every byte); see
     * gossip_shards_config_model_files for murmur shard files. */
    gossip_shards_range skip[GOSSIP_SHARDS_SKIP_MAX];
    uint32_t n_skip;
} gossip_shards_config;

/* Defaults: chunk 64 KiB, shards up to 64 MiB, 4 fetches, window 8,
 * timeout 2 s (a 64 KiB chunk at 1 Mbit/s is 0.5 s; a source silent for 4
 * times that is gone or overloaded), backoff 1 s, probe every 1 s.
 * self, ids, n_shards and store are left for the caller. */
void gossip_shards_config_default(gossip_shards_config *cfg);

/* Set cfg->skip for murmur shard files (model/shardfile.h): their content
 * address covers the 16-byte descriptor (bytes 8..23) and the payload (from
 * byte 72), not the magic, shard index/count, payload length or the stored
 * hash. The replicator then moves whole shard files, verified against the
 * address `murmur shard` printed. */
void gossip_shards_config_model_files(gossip_shards_config *cfg);

typedef struct gossip_shards gossip_shards;

typedef struct gossip_shards_counters {
    uint64_t views;         /* views applied */
    uint64_t fetch_started; /* fetches begun */
    uint64_t fetched;       /* shards fetched, verified and committed */
    uint64_t fetch_failed;  /* every source tried; backed off */
    uint64_t cancelled;     /* fetches cancelled: shard no longer assigned */
    uint64_t chunks_ok;     /* chunks verified and written */
    uint64_t chunks_bad;    /* chunks whose hash did not match the manifest */
    uint64_t whole_bad;     /* shards whose hash did not match the id */
    uint64_t manifests_bad; /* manifests inconsistent with the request or bounds */
    uint64_t timeouts;      /* sources that went silent */
    uint64_t nacks;         /* NACKs received for a current fetch */
    uint64_t out_of_order;  /* chunks out of sequence, dropped */
    uint64_t stale;         /* answers for an old xfer or from the wrong peer */
    uint64_t rejected;      /* frames that failed to decode */
    uint64_t served_manifests;
    uint64_t served_chunks;
    uint64_t served_nacks;
    uint64_t serve_dropped; /* requests dropped: answer queue full */
    uint64_t store_errors;  /* store operations that failed */
    uint64_t probes_sent;
    uint64_t dropped;           /* surplus shards dropped after confirmation */
    uint64_t quarantined;       /* held shards whose bytes did not match their id */
    uint64_t lost;              /* times a shard was found held by no live member */
    uint64_t store_full;        /* store writes refused for lack of room (fetching paused) */
    uint64_t full_notices_sent; /* FULL notices sent (our store is full) */
    uint64_t full_notices;      /* FULL notices accepted from live members */
} gossip_shards_counters;

typedef struct gossip_shard_status {
    int assigned;       /* this agent is a holder in the current view (or its guest shard) */
    int primary;        /* ... and trains it: the first holder not known to be full */
    int guest;          /* its guest shard (see gossip_shards_train) */
    int held;           /* complete and verified in the store */
    int lost;           /* assigned, and every live member said it does not hold it */
    int fetching;       /* a fetch is in flight */
    uint32_t width;     /* holders per shard in the current view */
    uint32_t confirmed; /* current holders that answered a probe (surplus only) */
    uint64_t primary_id;
} gossip_shard_status;

/* Create. Reads which shards the store already holds and verifies each
 * against its id (every byte is read once): a shard that does not match is
 * quarantined (gossip_store_ops.quarantine, counted) and fetched again like
 * any missing one. Errors:
 * GOSSIP_EINVAL (a bound out of range, self 0, no catalog or no store),
 * GOSSIP_ENOMEM (nothing left allocated). */
int gossip_shards_create(gossip_shards **out, const gossip_env *env,
                         const gossip_shards_config *cfg);
/* Free everything; aborts open store writes. NULL is fine. */
void gossip_shards_destroy(gossip_shards *sh);

/* Apply a new view: recompute placement, cancel fetches no longer needed,
 * move fetches off dead sources, schedule new fetches. A view whose epoch is
 * not above the current one is ignored (GOSSIP_ESTALE). Errors:
 * GOSSIP_ESTALE, GOSSIP_EINVAL (bad view), GOSSIP_ENOMEM (the previous view
 * stays in force; call again). */
int gossip_shards_set_view(gossip_shards *sh, const gossip_view *view, gossip_time_us now);

/* The sans-IO contract (docs/ARCHITECTURE.md). recv returns GOSSIP_OK,
 * GOSSIP_ETYPE (not a SHARD_* frame) or the decode error (counted in
 * rejected); a well-formed but unexpected answer is counted and returns
 * GOSSIP_OK. */
int gossip_shards_recv(gossip_shards *sh, uint64_t from, const gossip_header *h,
                       const uint8_t *payload, size_t len, gossip_time_us now);
int gossip_shards_tick(gossip_shards *sh, gossip_time_us now);
int gossip_shards_poll_send(gossip_shards *sh, gossip_send *out, gossip_time_us now);
gossip_time_us gossip_shards_deadline(const gossip_shards *sh);

/* Catalog indices of the shards this agent is primary for and holds, in
 * catalog order, at most cap; returns how many there are in total (may
 * exceed cap). */
uint32_t gossip_shards_primary(const gossip_shards *sh, uint32_t *out, uint32_t cap);
/* Shards this agent is primary for but does not hold yet (being fetched). */
uint32_t gossip_shards_primary_pending(const gossip_shards *sh);

/* What an agent trains on now, so that no agent idles while it holds data:
 *   PRIMARY   the primary shards it holds (the rule; each shard has one
 *             primary per view, so no sample is visited twice);
 *   REPLICAS  it holds none of its primaries (they are being fetched, or
 *             it is primary for none: S < N): the verified copies it holds
 *             as a holder, else any verified copy it still holds (a surplus
 *             copy awaiting the drop policy);
 *   GUEST     the view makes it a holder of nothing (S·r < N, or a
 *             bounded-load placement that left it empty): its guest shard,
 *             which the replicator fetches and keeps while this lasts: the
 *             copy it holds with the highest rendezvous weight for it, or,
 *             holding none, the catalog shard with the highest weight (a
 *             uniform sample of the catalog, stable across views);
 *   NONE      nothing verified is held yet.
 * A fallback (REPLICAS, GUEST) trains shards that their primaries also
 * train: some samples are visited more often, rather than an agent idling.
 * The reason says why: NO_VIEW (before the first view), PRIMARY (primary
 * for shards, all held), PENDING (primary for shards not all held yet),
 * NO_PRIMARY (primary for no shard in this view). */
typedef enum gossip_shards_train_source {
    GOSSIP_TRAIN_NONE = 0,
    GOSSIP_TRAIN_PRIMARY = 1,
    GOSSIP_TRAIN_REPLICAS = 2,
    GOSSIP_TRAIN_GUEST = 3,
} gossip_shards_train_source;

typedef enum gossip_shards_train_reason {
    GOSSIP_TRAIN_NO_VIEW = 0,
    GOSSIP_TRAIN_ALL_HELD = 1,
    GOSSIP_TRAIN_PENDING = 2,
    GOSSIP_TRAIN_NO_PRIMARY = 3,
} gossip_shards_train_reason;

typedef struct gossip_shards_train_info {
    gossip_shards_train_source source;
    gossip_shards_train_reason reason;
    uint32_t primary; /* shards it is primary for in this view */
    uint32_t pending; /* ... of which not held yet */
} gossip_shards_train_info;

/* Fill out (catalog indices, catalog order, at most cap) with the shards to
 * train now and *info with what they are and why; returns how many there
 * are in total (may exceed cap). Pure query. */
uint32_t gossip_shards_train(const gossip_shards *sh, uint32_t *out, uint32_t cap,
                             gossip_shards_train_info *info);
/* "none", "primary", "replicas", "guest"; "no_view", "primary",
 * "primaries_pending", "no_primary" ("?" when out of range). */
const char *gossip_shards_train_source_name(gossip_shards_train_source source);
const char *gossip_shards_train_reason_name(gossip_shards_train_reason reason);
/* Status of catalog shard s (GOSSIP_ENOTFOUND if s is out of range). */
int gossip_shards_status(const gossip_shards *sh, uint32_t s, gossip_shard_status *st);
/* Current holders of shard s (width entries, primary first), or NULL before
 * the first view or if s is out of range. */
const uint64_t *gossip_shards_holders(const gossip_shards *sh, uint32_t s, uint32_t *width);
/* A held shard turned out not to match its id (the caller failed to load
 * it): quarantine it in the store, count it (quarantined), and fetch it
 * again if this agent is a holder. Errors: GOSSIP_ENOTFOUND (s out of range
 * or not held). */
int gossip_shards_quarantine(gossip_shards *sh, uint32_t s, gossip_time_us now);
/* 1 while fetching is paused because the store ran out of room. */
int gossip_shards_store_full(const gossip_shards *sh, gossip_time_us now);

/* Who trains what while some store is full (see "A full store" above). */
typedef struct gossip_shards_full_info {
    int full;         /* this agent's store is full: it hands its primaries over */
    uint32_t handed;  /* shards whose placement primary is this agent, trained by another */
    uint32_t taken;   /* shards this agent trains for a full placement primary */
    uint32_t members; /* other members known to be full */
} gossip_shards_full_info;
/* Fill *out. Pure query. */
void gossip_shards_full_get(const gossip_shards *sh, gossip_shards_full_info *out);
/* Shards assigned to this agent that no live member holds: the last fetch
 * asked every live member and each answered NOT_HELD (data lost with its
 * holders). Cleared when the shard is fetched or no longer assigned. */
uint32_t gossip_shards_lost_count(const gossip_shards *sh);

/* Shards this agent holds; shards assigned to it but not held. */
uint32_t gossip_shards_held_count(const gossip_shards *sh);
uint32_t gossip_shards_missing_count(const gossip_shards *sh);
uint64_t gossip_shards_epoch(const gossip_shards *sh);
const gossip_shards_counters *gossip_shards_counters_get(const gossip_shards *sh);

/* Census over the stores of the live agents (the simulator's and the tests'
 * global view): counts[s] = stores holding shard s complete; returns the
 * number of shards held by none (lost). Pure. */
uint32_t gossip_shards_census(const uint8_t (*ids)[GOSSIP_SHARD_ID_SIZE], uint32_t n_shards,
                              const gossip_store *stores, uint32_t n_stores, uint32_t *counts);

#endif
