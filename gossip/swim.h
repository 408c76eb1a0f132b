/* gossip/swim — SWIM membership and failure detection (sans-IO).
 *
 * Purpose: keep a table of members (node id, address, incarnation, state)
 * and turn it into a view (gossip_view: epoch + sorted live ids incl. self)
 * for the mixer and the shard placer. The protocol is SWIM (Das, Gupta,
 * Motivala 2002) with the Lifeguard refinements (Dadgar et al. 2018) as in
 * HashiCorp memberlist: probe one member per period in shuffled round-robin
 * order, indirect probes through k members (PING_REQ) with nacks, suspicion
 * before death with a timeout that scales with log10(N) and shrinks with
 * independent confirmations, refutation by incarnation, piggybacked updates
 * retransmitted lambda*ceil(log10(N+1)) times, a local health multiplier
 * that stretches our own timeouts when we are the slow one, periodic
 * push-pull full state sync, joins through seed addresses, graceful leave.
 * docs/MEMBERSHIP.md has the byte formats, the derivations and the figures.
 *
 * Shape: the sans-IO contract of docs/ARCHITECTURE.md. Time is an argument,
 * memory and randomness come from gossip_env, everything is allocated in
 * gossip_swim_create and bounded by cfg.members_max and the constants below,
 * except three buffers (docs/MEMBERSHIP.md, "Bounds"): the members'
 * addresses, packed, and the suspects' confirmers grow with them, and the
 * frame of a full-state message (SYNC, SYNC_REPLY: a record per member) is
 * allocated when it is polled and freed by the next poll_send. A failed
 * allocation is counted (stats.no_memory) and loses only what a later
 * message repairs: a record not applied, confirmations not counted (a
 * later death, never an earlier one), a full-state message dropped
 * (stats.outq_drops too).
 *
 * Invariants:
 * - self is always in the table; its state is ALIVE until gossip_swim_leave.
 * - live = ALIVE or SUSPECT. The view holds exactly the live ids, ascending;
 *   its epoch grows by one at the end of every call that changed the live
 *   set, never decreases, and starts at 1 (self alone) after create. Epochs
 *   are local to one object: compare a view only with an earlier view of the
 *   same object ("changed" <=> epoch differs).
 * - A member's (incarnation, state) only moves forward: a higher incarnation
 *   wins; at equal incarnation ALIVE < SUSPECT < DEAD/LEFT.
 * - Dead and left members stay as tombstones for dead_retention_periods (or
 *   until their slot is needed), so stale gossip cannot resurrect them and a
 *   healed partition can be noticed (see "reconnect" in docs/MEMBERSHIP.md).
 *
 * Frames from gossip_swim_poll_send always carry dest (the member's id) and,
 * when the address is known, dest_addr too, so a transport needs no table of
 * its own; frames to a seed have dest = 0 and dest_addr = the seed address,
 * and so do the full-state messages meant for whoever listens at one address
 * of an id claimed at two (GOSSIP_SWIM_NOTICES_MAX): dest = 0 means "to the
 * process at dest_addr", not to a connection held for some id.
 */
#ifndef GOSSIP_SWIM_H
#define GOSSIP_SWIM_H

#include <stddef.h>
#include <stdint.h>

#include "gossip/env.h"
#include "gossip/manifest.h"
#include "gossip/types.h"
#include "gossip/wire.h"

/* Updates piggybacked on one PING/ACK/PING_REQ/NACK/LEAVE. */
#define GOSSIP_SWIM_PIGGYBACK_MAX 16u
/* Bytes of piggybacked updates in one such message. With the 32-byte header
 * and the largest fixed part (PING_REQ, 17 bytes + count) a probe message
 * stays under 508 bytes, the IPv4 minimum-safe UDP payload. */
#define GOSSIP_SWIM_PIGGYBACK_BYTES_MAX 400u
/* One encoded member record: state, id, incarnation, address length and the
 * address without its NUL (the largest of the record kinds). */
#define GOSSIP_SWIM_RECORD_MAX (1u + 8u + 4u + 1u + (GOSSIP_ADDR_MAX - 1u))
/* Pending updates (one entry per member: its latest news). When full, the
 * most-retransmitted entry is dropped; push-pull sync repairs the loss. */
#define GOSSIP_SWIM_QUEUE_MAX 512u
/* Frames waiting for gossip_swim_poll_send. */
#define GOSSIP_SWIM_OUTQ_MAX 256u
/* Indirect probes we relay for others at once. */
#define GOSSIP_SWIM_RELAY_MAX 32u
/* Members asked to probe indirectly (k). */
#define GOSSIP_SWIM_INDIRECT_MAX 8u
/* Seed addresses remembered by gossip_swim_join. */
#define GOSSIP_SWIM_SEEDS_MAX 8u
/* Independent suspicion confirmations remembered per member. */
#define GOSSIP_SWIM_CONFIRM_MAX 8u
/* Peers refused for a manifest mismatch whose frames we drop (oldest
 * entry replaced when full; each kept dead_retention_periods). */
#define GOSSIP_SWIM_REFUSED_MAX 16u
/* A member is a newcomer for this many probe periods after its view first
 * held another member. A newcomer that meets a live claim of its own id at
 * another address yields (see "Duplicate identity" in MEMBERSHIP.md): the
 * incumbent's counter-refutation reaches it within a few gossip rounds
 * (O(log N) periods), and 30 leaves room for slow links; the cost of a long
 * window is only that two processes started within it with one key both
 * yield. */
#define GOSSIP_SWIM_NEWCOMER_PERIODS 30u
/* Full-state messages queued to an address rather than an id (see
 * "Duplicate identity" in MEMBERSHIP.md): the answer to a member that speaks
 * from another address than the one we hold, and the news for the address a
 * live member just moved away from. A transport routes a frame for an id to
 * one of its connections, which may be a twin's; by address it reaches
 * whoever listens there. At most one per member and period each way, so 8
 * (two members moving at once, each seen from both sides, twice over) is
 * plenty; a notice finding no free slot is dropped and counted. */
#define GOSSIP_SWIM_NOTICES_MAX 8u
/* Local health multiplier: score in [0, awareness_max - 1]; cap. */
#define GOSSIP_SWIM_AWARENESS_MAX 16u

/* A suspect or dead record: state, id, incarnation, suspecter id. */
#define GOSSIP_SWIM_SUSPECT_RECORD_SIZE (1u + 8u + 4u + 8u)
/* Fixed part of the largest probe message (PING_REQ: seq, target, wait, count). */
#define GOSSIP_SWIM_PROBE_FIXED_MAX (4u + 8u + 4u + 1u)

_Static_assert(GOSSIP_SWIM_PIGGYBACK_BYTES_MAX >=
                   GOSSIP_SWIM_PIGGYBACK_MAX * GOSSIP_SWIM_SUSPECT_RECORD_SIZE,
               "the piggyback budget must hold a full set of suspect/dead records");
_Static_assert(GOSSIP_SWIM_PIGGYBACK_BYTES_MAX >= GOSSIP_SWIM_RECORD_MAX,
               "any one record fits the piggyback budget");
_Static_assert(GOSSIP_HEADER_SIZE + GOSSIP_SWIM_PROBE_FIXED_MAX + GOSSIP_SWIM_PIGGYBACK_BYTES_MAX <=
                   508u,
               "a probe message must fit a minimum-safe UDP payload");
_Static_assert(GOSSIP_SWIM_PIGGYBACK_MAX <= 255u, "piggyback count is a u8 on the wire");
_Static_assert(GOSSIP_SWIM_INDIRECT_MAX < GOSSIP_SWIM_OUTQ_MAX,
               "one probe's ping_reqs must fit the send queue");
_Static_assert((uint64_t)GOSSIP_MEMBERS_MAX *GOSSIP_SWIM_RECORD_MAX + 4u +
                       GOSSIP_MANIFEST_WIRE_MAX <
                   0xFFFFFFFFu,
               "a full-state sync must fit a frame");

typedef enum gossip_member_state {
    GOSSIP_MEMBER_NONE = 0, /* not in the table */
    GOSSIP_MEMBER_ALIVE = 1,
    GOSSIP_MEMBER_SUSPECT = 2,
    GOSSIP_MEMBER_DEAD = 3,
    GOSSIP_MEMBER_LEFT = 4,
} gossip_member_state;

typedef struct gossip_swim gossip_swim;

/* Zero fields take the default in brackets. Times in microseconds. */
typedef struct gossip_swim_config {
    uint64_t self_id;      /* nonzero */
    const char *self_addr; /* 1..GOSSIP_ADDR_MAX-1 chars; copied */
    uint32_t members_max;  /* table size incl. tombstones, 2..GOSSIP_MEMBERS_MAX [1024] */
    uint32_t incarnation;  /* starting incarnation [0]; see "restarts" in MEMBERSHIP.md */
    gossip_time_us probe_interval_us; /* one probe period [1 s] */
    gossip_time_us probe_timeout_us;  /* direct ack wait, < interval [500 ms] */
    uint32_t indirect_k;              /* PING_REQ fan-out, <= GOSSIP_SWIM_INDIRECT_MAX [3] */
    uint32_t suspicion_mult;          /* alpha: min timeout = alpha*max(1,log10 N) periods [4] */
    uint32_t suspicion_max_mult;      /* max timeout = this * min timeout [6] */
    uint32_t retransmit_mult;         /* lambda: sends per update = lambda*ceil(log10(N+1)) [4] */
    uint32_t awareness_max;           /* LHM scale cap, <= GOSSIP_SWIM_AWARENESS_MAX [8] */
    uint32_t sync_mult;               /* push-pull every max(16, sync_mult*N) periods [2] */
    uint32_t reconnect_periods;       /* ping a random tombstone every this many periods [4] */
    uint32_t dead_retention_periods;  /* keep dead/left tombstones this long [120] */
    /* What this cluster agrees on (copied); NULL = all zero. Carried by
     * JOIN, SYNC and SYNC_REPLY; a sender with another one is refused. */
    const gossip_manifest *manifest;
    /* Optional: the address a member has unless its records say otherwise
     * (a simulator's "sim://I" of member I + 1). It writes the address of
     * `id` and a NUL into buf (GOSSIP_ADDR_MAX bytes) and returns its
     * length, or 0 when there is none. A member whose address is this one
     * costs no byte of the address table (at 16 384 simulated members,
     * 11 bytes each of 16 383 others, for each of them). A pure function
     * of the id: no clock, no state, no I/O. NULL: every address stored. */
    size_t (*addr_of)(void *ctx, uint64_t id, char *buf);
    void *addr_ctx;
} gossip_swim_config;

/* A member as seen by this object. addr is a copy. */
typedef struct gossip_swim_member {
    uint64_t id;
    uint32_t incarnation;
    gossip_member_state state;
    char addr[GOSSIP_ADDR_MAX];
} gossip_swim_member;

/* Counters; read with gossip_swim_stats. Indexed by message type (0..15)
 * and by gossip_err for rejections. */
typedef struct gossip_swim_stats {
    uint64_t sent_msgs[16];
    uint64_t sent_bytes[16];
    uint64_t recv_msgs[16];
    uint64_t rejected[GOSSIP_ERR_COUNT]; /* bad frames from peers, by cause */
    uint64_t probes;                     /* probe periods started */
    uint64_t probe_failures;             /* periods that ended without any ack */
    uint64_t suspicions;                 /* members we started suspecting */
    uint64_t deaths;                     /* members we declared dead (our timer) */
    uint64_t refutations;                /* times we refuted our own suspicion/death */
    uint64_t queue_drops;                /* piggyback entries dropped (queue full) */
    uint64_t outq_drops;                 /* frames dropped (send queue full) */
    uint64_t table_full;                 /* new members not added (table full) */
    uint64_t refused_manifest;           /* full-state messages refused: manifest mismatch */
    uint64_t refused_frames;             /* frames dropped: sender refused before */
    uint64_t strangers;         /* frames from unknown senders: records not applied, SYNC sent */
    uint64_t id_claims;         /* live claims of our id at another address */
    uint64_t duplicates;        /* ... heard as the incumbent (the newcomer must yield) */
    uint64_t addr_notices;      /* full-state messages sent by address: a member's two addresses */
    uint64_t addr_notice_drops; /* ... not sent: every notice slot was waiting */
    uint64_t no_memory;         /* allocations after create that failed (a member or an address
                                   not taken in, suspecters not kept, a full-state frame not sent) */
} gossip_swim_stats;

/* Why this object refused to go on (gossip_swim_refused), or the kind of
 * the last conflict (gossip_swim_conflict). */
typedef enum gossip_swim_refusal {
    GOSSIP_SWIM_ADMITTED = 0,
    GOSSIP_SWIM_REFUSED_MANIFEST = 1,  /* the cluster runs another manifest */
    GOSSIP_SWIM_REFUSED_DUPLICATE = 2, /* another live process holds our id */
} gossip_swim_refusal;

/* The latest admission conflict, for the caller's log line: seq grows by
 * one per conflict (0 = none yet), so a caller polls it. */
typedef struct gossip_swim_conflict {
    uint64_t seq;
    gossip_swim_refusal kind;
    int fatal;                  /* 1: this object is now refused */
    uint64_t peer;              /* the peer refused (MANIFEST) or our own id (DUPLICATE) */
    char addr[GOSSIP_ADDR_MAX]; /* DUPLICATE: the other claimant's address */
    gossip_manifest theirs;     /* MANIFEST: the peer's manifest */
} gossip_swim_conflict;

/* Create. Allocates everything it will ever need through env.
 * Errors: GOSSIP_EINVAL (bad config), GOSSIP_ENOMEM (nothing leaks). */
int gossip_swim_create(gossip_swim **out, const gossip_env *env, const gossip_swim_config *cfg);
/* Free everything; s may be NULL. */
void gossip_swim_destroy(gossip_swim *s);

/* Join through seed addresses (known by address only): sends JOIN to each
 * (dest = 0, dest_addr = seed) and retries every 2 probe periods while we
 * know no other live member. Seeds equal to our own address are skipped. The
 * seeds are kept (up to GOSSIP_SWIM_SEEDS_MAX) for partition repair.
 * Errors: GOSSIP_EINVAL (NULL/overlong seed, n > GOSSIP_SWIM_SEEDS_MAX). */
int gossip_swim_join(gossip_swim *s, const char *const *seeds, size_t n, gossip_time_us now);

/* Leave gracefully: mark self LEFT with a new incarnation, send LEAVE to a
 * few live members and stop probing. Afterwards recv ignores frames, tick
 * does nothing, poll_send drains what is queued. Errors: none (returns 0). */
int gossip_swim_leave(gossip_swim *s, gossip_time_us now);

/* One decoded frame (header h, payload of len bytes) from peer `from`
 * (0 if the transport does not know the peer's id yet; otherwise it must
 * equal h->sender). Bad frames are counted in stats.rejected[err] and
 * return that error; the object stays valid.
 * Errors: GOSSIP_ETYPE (not a membership type), GOSSIP_ETRUNC,
 * GOSSIP_EMALFORMED (bad field, trailing bytes, sender 0 or spoofed),
 * GOSSIP_ETOOBIG (a count above its maximum), GOSSIP_ENOTFOUND (a ping
 * for another id at our address, or a frame from a peer refused for its
 * manifest), GOSSIP_EFULL (relay table full). A full-state message with
 * another manifest is refused (stats.refused_manifest, a conflict) and
 * returns GOSSIP_OK: the frame was fine, the peer is not admitted. Records
 * piggybacked by a sender we do not know are not applied (stats.strangers):
 * we push-pull with it first, which checks its manifest. */
int gossip_swim_recv(gossip_swim *s, uint64_t from, const gossip_header *h, const uint8_t *payload,
                     size_t len, gossip_time_us now);

/* Run the timers due at now. Errors: none (returns 0). */
int gossip_swim_tick(gossip_swim *s, gossip_time_us now);

/* Next frame to send: 1 and *out filled, or 0 when there is nothing.
 * out->frame points into s and stays valid until the next call on s (a
 * full-state frame is freed by the next poll_send: poll until it returns 0
 * and nothing large stays allocated). */
int gossip_swim_poll_send(gossip_swim *s, gossip_send *out, gossip_time_us now);

/* When gossip_swim_tick must next be called; 0 before the first tick. */
gossip_time_us gossip_swim_deadline(const gossip_swim *s);

/* The current view; out->ids is owned by s and valid until the next call
 * that changes the view (compare epochs to detect a change). */
void gossip_swim_view(const gossip_swim *s, gossip_view *out);

/* Look up a member (self included). Errors: GOSSIP_ENOTFOUND. */
int gossip_swim_lookup(const gossip_swim *s, uint64_t id, gossip_swim_member *out);

/* GOSSIP_SWIM_ADMITTED, or why this object refused to go on: a joiner
 * whose seeds answered with another manifest while it knew nobody else
 * (MANIFEST), or a newcomer that met a live process with its own id at
 * another address (DUPLICATE). A refused object is quiet for good: recv
 * ignores frames, tick does nothing, poll_send sends nothing (no LEAVE: the
 * id may belong to a live incumbent). The caller should stop. */
gossip_swim_refusal gossip_swim_refused(const gossip_swim *s);
/* The latest conflict (seq 0 = none). */
const gossip_swim_conflict *gossip_swim_conflict_get(const gossip_swim *s);

/* Local health score (0 = healthy; timeouts are scaled by score + 1). */
uint32_t gossip_swim_health(const gossip_swim *s);
/* Our current incarnation. */
uint32_t gossip_swim_incarnation(const gossip_swim *s);
const gossip_swim_stats *gossip_swim_stats_get(const gossip_swim *s);

#endif
