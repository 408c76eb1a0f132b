/* net/transport — authenticated frames between agents over NNG streams.
 *
 * Each link is one NNG byte stream (tcp://, or ipc:// in tests) carrying
 * records of net/channel, each behind a 4-byte big-endian length prefix.
 * Owning the framing lets the transport enforce its receive limit itself:
 * NET_CHANNEL_HS_MAX bytes until the handshake is done (an unauthenticated
 * peer can never make us allocate more), frame_max + NET_CHANNEL_OVERHEAD
 * after. A longer prefix closes that connection only and is counted.
 *
 * Threads: every NNG operation is asynchronous (aio); callbacks run on NNG's
 * threads, take the transport's one mutex, and never block. A small
 * housekeeping thread frees closed connections (NNG forbids freeing an aio
 * from its own callback). Received frames go into a bounded inbox that one
 * event-loop thread drains with net_transport_recv; net_transport_wait (or
 * poll() on net_transport_fd) sleeps until a frame arrives, a timeout
 * passes or net_transport_wake is called from any thread.
 *
 * Sending: net_transport_send copies the frame into the per-connection queue
 * (bounded in frames and bytes; a full queue drops and counts) and returns at
 * once (net_transport_send_frame queues a buffer the caller filled, without
 * the copy). Records are sealed in place on NNG's threads, outside the
 * transport's mutex, and opened there likewise. Without a connection to the peer, one is dialed on
 * demand; frames wait in its queue during connect and handshake. A dial that fails, or a connection
 * closed before its handshake completes, puts the address into exponential backoff
 * (dial_backoff_min_ms doubling to dial_backoff_max_ms): frames sent to it meanwhile are dropped
 * and counted as unreachable, so nothing ever waits on a dead peer. Both peers may dial each other;
 * the frames to one peer stay on the link that carried the first ones while it lives, so they
 * arrive in the order sent (a ring allreduce needs it). Large frames (64 KiB and more) are sealed
 * on NNG's threads, small ones at once; up to 8 records go out in one write; every link runs with
 * TCP_NODELAY.
 *
 * Admission: the secure channel (network key, signatures, allow-list). A
 * host whose connections keep failing authentication is cut off (net/
 * penalty, keyed by the remote host address): its new connections are
 * closed on accept and counted as cut_off until the cut-off expires.
 * Connection slots: accepted connections still in their handshake have a
 * pool of their own (handshakes_max, at most handshakes_per_host_max per
 * host address, a shorter deadline and eviction of the oldest when it
 * fills: handshake_limit); authenticated links and our own dials share
 * conns_max (conn_limit). Idle sockets from anyone therefore never keep
 * peers out nor stop our dials.
 *
 * Thread safety: every function may be called from any thread, except
 * net_transport_destroy, which must not race with other calls on the same
 * transport and must not be called from an NNG callback.
 *
 * Ownership: the caller's identity, network key and allow-list are copied
 * at create; net_transport_set_allow replaces the allow-list at run time
 * (revocation: links of keys no longer listed close at once). Messages returned by
 * net_transport_recv own their buffer until net_message_release.
 */
#ifndef NET_TRANSPORT_H
#define NET_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "gossip/types.h"
#include "gossip/wire.h"
#include "net/channel.h"
#include "net/faults.h"
#include "net/net.h"
#include "net/penalty.h"

/* The largest record on the wire: a full frame plus the channel overhead. */
#define NET_TRANSPORT_RECORD_MAX (GOSSIP_FRAME_MAX + NET_CHANNEL_OVERHEAD)
_Static_assert(NET_TRANSPORT_RECORD_MAX < UINT32_MAX, "record length fits the 4-byte prefix");

/* Connections held at once. An agent talks to its gossip neighbours (a few,
 * O(log N) for exponential graphs), its two ring neighbours, the SWIM probe
 * targets (1 + k indirect) and whoever dialed it; 256 is an order of
 * magnitude above that and well inside the default 1024-descriptor limit. */
#define NET_TRANSPORT_CONNS_DEFAULT 256u
#define NET_TRANSPORT_CONNS_MAX     4096u
/* Accepted connections that have not finished their handshake have a pool
 * of their own, so that sockets held open by anyone who can reach the port
 * never take the slots of authenticated peers or of our own dials: 128 in
 * all (a handshake takes one round trip and ~0.5 ms of CPU, so 128 covers
 * every peer of a large view reconnecting at once), at most 16 from one
 * host address (agents behind one NAT or on one test host share it), and
 * once the pool is more than half full, handshakes get 1 s instead of the
 * 5 s default and the oldest is dropped to admit a new one. With these
 * defaults an agent holds at most conns_max links + 128 handshakes
 * descriptors, well inside the default limit of 1024. */
#define NET_TRANSPORT_HANDSHAKES_DEFAULT            128u
#define NET_TRANSPORT_HANDSHAKES_PER_HOST_DEFAULT   16u
#define NET_TRANSPORT_HANDSHAKE_PRESSURE_DEFAULT_MS 1000u
/* Per-connection send queue: 256 frames (a full allreduce round of 2(n-1)
 * chunks for n <= 128 queued at once) and 160 MiB, which holds two full-size
 * frames so that a large model push never starves behind another. */
#define NET_TRANSPORT_QUEUE_FRAMES_DEFAULT 256u
#define NET_TRANSPORT_QUEUE_BYTES_DEFAULT  (160u * 1024u * 1024u)
/* Inbox: 4096 frames (SWIM traffic of a 4096-member view in one tick) and
 * 320 MiB (four full-size frames). When it is full, a connection with a
 * frame to deliver stops reading (its frame waits, parked) until the event
 * loop drains the inbox: nothing authenticated is dropped, TCP flow control
 * slows the sender, and the sender's bounded queue drops and counts. */
#define NET_TRANSPORT_INBOX_FRAMES_DEFAULT 4096u
#define NET_TRANSPORT_INBOX_BYTES_DEFAULT  (320u * 1024u * 1024u)
/* Address book: one entry per member of the largest view. */
#define NET_TRANSPORT_BOOK_MAX GOSSIP_MEMBERS_MAX
/* Dial backoff: 100 ms (a restarting agent is back within a few of these)
 * doubling to 10 s (a dead peer costs one connect attempt per 10 s). */
#define NET_TRANSPORT_BACKOFF_MIN_DEFAULT_MS 100u
#define NET_TRANSPORT_BACKOFF_MAX_DEFAULT_MS 10000u
/* Idle links close after 5 minutes without a byte either way: SWIM probes
 * and mixing keep live neighbours busy far more often, and re-dialing costs
 * one handshake (~0.5 ms of CPU), so idle links to departed or rarely used
 * peers do not pile up. */
#define NET_TRANSPORT_IDLE_DEFAULT_MS 300000u
/* Connect timeout: a SYN to a black-holed host gives up after 5 s. */
#define NET_TRANSPORT_DIAL_TIMEOUT_MS 5000u

_Static_assert(2u * (GOSSIP_FRAME_MAX + NET_CHANNEL_OVERHEAD + 4u) <=
                   NET_TRANSPORT_QUEUE_BYTES_DEFAULT,
               "a send queue holds two full-size frames");
_Static_assert(4u * GOSSIP_FRAME_MAX <= NET_TRANSPORT_INBOX_BYTES_DEFAULT,
               "the inbox holds four full-size frames");

typedef struct net_transport net_transport;

typedef struct net_transport_config {
    const net_identity *self; /* copied */
    /* Network key (NET_NETWORK_KEY_SIZE bytes), or a ring of network_keys_n
     * keys, the first the primary (copied); see net_channel_config. */
    const uint8_t *network_key;
    const uint8_t *network_keys;
    size_t network_keys_n;
    /* Allow-list, copied: NULL = none (any holder of the network key);
     * non-NULL = only these allow_n keys, and allow_n = 0 admits nobody. */
    const uint8_t *allow;
    size_t allow_n;
    size_t frame_max; /* largest frame sent or received; 0 = GOSSIP_FRAME_MAX */
    /* Authenticated links plus our own dials in progress;
     * 0 = NET_TRANSPORT_CONNS_DEFAULT. */
    uint32_t conns_max;
    uint32_t handshakes_max;          /* accepted, unauthenticated; 0 = default (128) */
    uint32_t handshakes_per_host_max; /* of those, from one host address; 0 = default (16) */
    uint32_t handshake_pressure_ms;   /* deadline when the pool is over half full; 0 = 1000 */
    uint32_t queue_frames_max;        /* per connection; 0 = default */
    size_t queue_bytes_max;           /* per connection; 0 = default */
    uint32_t inbox_frames_max;        /* 0 = default */
    size_t inbox_bytes_max;           /* 0 = default */
    uint32_t handshake_timeout_ms;    /* 0 = channel default (5 s) */
    int auth_only;                    /* ask peers for auth-only sessions (net_channel_config) */
    uint64_t rekey_frames;            /* 0 = channel default */
    uint32_t rekey_interval_ms;       /* 0 = channel default */
    uint32_t dial_backoff_min_ms;     /* 0 = default */
    uint32_t dial_backoff_max_ms;     /* 0 = default */
    uint32_t idle_timeout_ms;         /* 0 = NET_TRANSPORT_IDLE_DEFAULT_MS */
    net_penalty_config penalty;       /* zeros = defaults */
} net_transport_config;

/* One received, authenticated frame. */
typedef struct net_message {
    uint64_t from;       /* the peer's node id, proven by the handshake */
    const uint8_t *data; /* the frame */
    size_t len;
    void *owned; /* private: the buffer data points into */
} net_message;

typedef struct net_transport_stats {
    uint64_t rejects[NET_REJECT_COUNT]; /* by cause; see net_reject_name */
    uint64_t frames_sent, bytes_sent;   /* frames handed to the network, plaintext bytes */
    uint64_t frames_received, bytes_received;
    uint64_t conns_accepted, conns_dialed, dial_failures, handshakes_ok, conns_closed;
    uint64_t inbox_stalls; /* times a connection paused on a full inbox */
    uint32_t conns_open;
    uint32_t conns_auth_only; /* open links whose frames are authenticated, not encrypted */
} net_transport_stats;

/* Create a transport (not yet listening). Errors: NET_EINVAL (no identity or
 * key, frame_max > GOSSIP_FRAME_MAX, allow_n > NET_CHANNEL_ALLOW_MAX,
 * conns_max or handshakes_max > NET_TRANSPORT_CONNS_MAX), NET_ENOMEM,
 * NET_EIO. */
int net_transport_create(net_transport **out, const net_transport_config *cfg);
/* Close every connection, wait for NNG's callbacks to finish, free all.
 * Messages already received and not released stay valid. NULL is fine. */
void net_transport_destroy(net_transport *t);

/* Listen on url ("tcp://127.0.0.1:0" picks a free port; "ipc:///path").
 * The address peers should dial is written to bound (cap bytes). Errors:
 * NET_EINVAL (bad url), NET_ESTATE (already listening), NET_ESPACE, NET_EIO
 * (bind failed: address in use, permission). */
int net_transport_listen(net_transport *t, const char *url, char *bound, size_t cap);

/* Remember that node `id` listens at addr (from membership). Errors:
 * NET_EINVAL (id 0, addr longer than GOSSIP_ADDR_MAX), NET_EFULL. */
int net_transport_set_addr(net_transport *t, uint64_t id, const char *addr);

/* Queue a copy of frame for node `to` (0 when only addr is known, e.g. a
 * seed); addr may be NULL when the address book knows `to`. Returns at once.
 * Errors: NET_EINVAL (also for `to` = our own id), NET_ETOOBIG (len > frame_max), NET_ENOTFOUND (no
 * address), NET_EFULL (queue or connection table full; dropped and counted),
 * NET_EAGAIN (address backing off after failures; dropped and counted as
 * unreachable), NET_EBLOCKED (address cut off), NET_ENOMEM, NET_ECLOSED.
 * A frame that was queued can still be lost if its connection fails; it is
 * then counted as unreachable. */
int net_transport_send(net_transport *t, uint64_t to, const char *addr, const uint8_t *frame,
                       size_t len);

/* Zero-copy sends. net_transport_send copies each frame into a record
 * buffer (one pass over every byte sent, on the caller's thread: for the
 * allreduce that is the event loop, the ring's critical path). Instead a
 * caller may take a frame buffer of up to cap bytes from the transport,
 * write the frame into it, and hand it over with net_transport_send_frame,
 * which seals it in place. The buffer is the caller's until then (free it
 * with net_transport_frame_free if it is not sent); net_transport_send_frame
 * takes it on every return, success or error. Buffers are not tied to a
 * transport. net_transport_frame_alloc returns NULL when cap >
 * GOSSIP_FRAME_MAX or memory is short. */
uint8_t *net_transport_frame_alloc(size_t cap);
void net_transport_frame_free(uint8_t *frame);
/* net_transport_send of the len first bytes of a buffer from
 * net_transport_frame_alloc, without the copy. Errors: those of
 * net_transport_send, and NET_EINVAL for len above the buffer's cap. */
int net_transport_send_frame(net_transport *t, uint64_t to, const char *addr, uint8_t *frame,
                             size_t len);

/* Take the oldest received frame: NET_OK and *msg filled (release it with
 * net_message_release), or NET_EAGAIN when the inbox is empty. */
int net_transport_recv(net_transport *t, net_message *msg);
void net_message_release(net_message *msg);
/* Sleep until the inbox is non-empty, net_transport_wake was called, or
 * timeout_ms passes (negative: no timeout). NET_OK (something to do) or
 * NET_EAGAIN (timed out). */
int net_transport_wait(net_transport *t, int timeout_ms);
/* Wake a waiter; callable from any thread. */
void net_transport_wake(net_transport *t);
/* A descriptor that polls readable while net_transport_wait would return
 * NET_OK; for event loops built on poll(). Drained by net_transport_recv
 * returning NET_EAGAIN. */
int net_transport_fd(const net_transport *t);

/* Membership declared id dead or gone: close its connections (queued
 * frames are dropped and counted as unreachable) and forget its address.
 * Errors: NET_EINVAL. */
int net_transport_forget(net_transport *t, uint64_t id);

/* Replace the allow-list (copied; NULL = none, non-NULL with allow_n = 0
 * admits nobody). Open connections whose peer key is no longer admitted are
 * closed at once and counted as not_allowed; handshakes in progress are
 * checked against the new list. Errors: NET_EINVAL, NET_ENOMEM (the old
 * list stays in force). */
int net_transport_set_allow(net_transport *t, const uint8_t *allow, size_t allow_n);

/* Replace the network key ring (n keys, the first the primary; copied).
 * Links whose session runs under a key that left the ring close at once
 * (counted as key_retired) and are re-dialed under the primary on the next
 * send; handshakes in progress close too. Rotation without a stop: install
 * the new key as a second key everywhere, then make it the primary
 * everywhere, then remove the old one (docs/SECURITY.md). Errors:
 * NET_EINVAL (n = 0 or above NET_CHANNEL_KEYS_MAX). */
int net_transport_set_network_keys(net_transport *t, const uint8_t *keys, size_t n);

/* Turn on fault injection (net/faults.h): create the transport's injector,
 * seeded with seed, once; later calls return the same one. Every frame
 * sent afterwards passes its rules; frames received from a partitioned id
 * are dropped by net_transport_recv. The injector belongs to the transport
 * (freed by net_transport_destroy); *out stays valid until then. Errors:
 * NET_EINVAL, NET_ENOMEM. */
int net_transport_faults_enable(net_transport *t, uint64_t seed, net_faults **out);

/* 1 if an authenticated connection to id is open. */
int net_transport_connected(net_transport *t, uint64_t id);
/* Snapshot of the counters. */
void net_transport_stats_get(net_transport *t, net_transport_stats *out);

#endif
