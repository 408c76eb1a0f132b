/* net/penalty — cut off peers that keep failing authentication.
 *
 * A bounded table keyed by a 64-bit key (the transport uses a hash of the
 * peer's host address: ports are free to an attacker, addresses are not).
 * Every authentication failure of a key counts; from the threshold-th
 * failure on, the key is cut off for base_us << (failures - threshold),
 * capped at max_us: exponential backoff. A successful handshake forgives the
 * key; a key with no failure for forget_us is forgotten. Sans-IO: time is an
 * argument, nothing sleeps.
 *
 * Bounded: at most NET_PENALTY_MAX keys. When full, the entry whose last
 * failure is oldest is evicted (an attacker who owns more addresses than the
 * table holds can shorten the memory of the table, never grow it).
 */
#ifndef NET_PENALTY_H
#define NET_PENALTY_H

#include <stddef.h>
#include <stdint.h>

#include "gossip/env.h"

/* 1024 hosts failing at once is far beyond a misconfigured cluster and costs
 * 32 KiB; a larger swarm only evicts its own oldest entries. */
#define NET_PENALTY_MAX 1024u
/* Three failures in a row: one retry after a transient error plus one more
 * before we decide the peer is misconfigured or hostile. */
#define NET_PENALTY_THRESHOLD_DEFAULT 3u
/* First cut-off 1 s, doubling to at most 10 min: a legitimate peer that was
 * restarted with a fixed key waits at most 10 min; an attacker gets about
 * one attempt per 10 min per address once saturated. */
#define NET_PENALTY_BASE_DEFAULT_US (1000000ull)
#define NET_PENALTY_MAX_DEFAULT_US  (600ull * 1000000ull)
/* Failures older than one hour are forgotten. */
#define NET_PENALTY_FORGET_DEFAULT_US (3600ull * 1000000ull)

typedef struct net_penalty_config {
    uint32_t threshold; /* 0 = default */
    uint64_t base_us;   /* 0 = default */
    uint64_t max_us;    /* 0 = default */
    uint64_t forget_us; /* 0 = default */
} net_penalty_config;

typedef struct net_penalty net_penalty;

/* Errors: NET_EINVAL, NET_ENOMEM. cfg may be NULL (defaults). */
int net_penalty_create(net_penalty **out, const net_penalty_config *cfg);
void net_penalty_destroy(net_penalty *p);

/* NET_OK if key may connect at time now, NET_EBLOCKED while it is cut off. */
int net_penalty_check(net_penalty *p, uint64_t key, gossip_time_us now);
/* Count one failure of key at now. Returns NET_EBLOCKED if key is now cut
 * off, NET_OK otherwise. */
int net_penalty_fail(net_penalty *p, uint64_t key, gossip_time_us now);
/* A successful handshake: forget key. */
void net_penalty_forgive(net_penalty *p, uint64_t key);
/* End of the current cut-off of key (0 if not cut off at now). */
gossip_time_us net_penalty_until(const net_penalty *p, uint64_t key, gossip_time_us now);
/* Keys currently held. */
size_t net_penalty_count(const net_penalty *p);

/* Key of an address string (keyed BLAKE2b, 64 bits). */
uint64_t net_penalty_key(const char *addr);

#endif
