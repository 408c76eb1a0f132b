/* net/seen — the greatest HELLO timestamp seen per initiator, for replay
 * protection of the handshake (as WireGuard keeps per peer).
 *
 * A HELLO carries the initiator's wall-clock time (TAI64N, 12 bytes,
 * big-endian, so byte order is time order) and is signed by the initiator.
 * A responder accepts a HELLO from a key only if its timestamp is newer
 * than the greatest it accepted from that key, or, to let two connections
 * that one initiator opens at once arrive in either order, at most
 * NET_SEEN_REORDER_NS older, above the smallest of the NET_SEEN_RECENT
 * greatest timestamps accepted, and not one of them. The responder records a timestamp only after
 * the signature verified, so nobody but the key's owner can move the mark. A recorded HELLO
 * replayed later is therefore refused before the responder spends a signature, a key exchange or a
 * byte of reply.
 *
 * Bounded: at most `max` keys (open addressing on the node id, which is a
 * hash of the key; the full key is compared). When full, the entry updated
 * longest ago is evicted: only holders of a signing key that passed the
 * network key and the allow-list can insert, so eviction needs many
 * admitted identities. After an eviction (or a restart) the responder only
 * has the coarse age bound of net/channel (NET_CHANNEL_HELLO_AGE_MAX_S).
 * Sans-IO: time is an argument. Not thread-safe: the transport calls it
 * under its mutex.
 */
#ifndef NET_SEEN_H
#define NET_SEEN_H

#include <stddef.h>
#include <stdint.h>

#include "gossip/env.h"
#include "net/net.h"

#define NET_SEEN_TS_SIZE 12u /* TAI64N */
/* Default capacity: every member of the largest view (GOSSIP_MEMBERS_MAX)
 * four times over would be 16 Ki; 4096 keys cost 256 KiB and cover every
 * cluster the transport's connection limits allow to talk to one agent. */
#define NET_SEEN_DEFAULT 4096u
#define NET_SEEN_MAX     65536u
/* Reordering tolerated between HELLOs of one key: two dials started within
 * the same millisecond may be handled in either order; 2 s covers any
 * scheduling delay between them. Replays inside that span are caught
 * exactly by the last NET_SEEN_RECENT timestamps (an initiator that opens
 * more than 8 connections to one peer within 2 s sees the oldest refused
 * as stale, and retries). */
#define NET_SEEN_REORDER_NS 2000000000ull
#define NET_SEEN_RECENT     8u

typedef struct net_seen net_seen;

/* Errors: NET_EINVAL (max 0 or above NET_SEEN_MAX), NET_ENOMEM. */
int net_seen_create(net_seen **out, size_t max);
void net_seen_destroy(net_seen *s);

/* 1 if a HELLO of pk stamped ts is fresh (see above; always 1 for a key
 * with no entry), 0 if it is a replay or too old. */
int net_seen_fresh(const net_seen *s, const uint8_t pk[NET_PUBLIC_KEY_SIZE],
                   const uint8_t ts[NET_SEEN_TS_SIZE]);
/* Record ts as accepted for pk. */
void net_seen_update(net_seen *s, const uint8_t pk[NET_PUBLIC_KEY_SIZE],
                     const uint8_t ts[NET_SEEN_TS_SIZE], gossip_time_us now);
/* Keys held. */
size_t net_seen_count(const net_seen *s);

/* TAI64N of a wall-clock time in nanoseconds since 1970 (external TAI64
 * label 2^62 + 10 + seconds, as WireGuard writes it, then nanoseconds). */
void net_seen_tai64n(uint8_t out[NET_SEEN_TS_SIZE], uint64_t wall_ns);
/* Seconds field of a TAI64N label back to Unix seconds (0 if earlier). */
uint64_t net_seen_unix_s(const uint8_t ts[NET_SEEN_TS_SIZE]);

#endif
