/* net/faults — a seeded fault injector for the transport (issue 20).
 *
 * Purpose: break the network of a real agent the way the simulator breaks
 * its virtual one (sim/faults), without root, tc or iptables: frames are
 * dropped, delayed, throttled, duplicated, reordered, corrupted or
 * partitioned inside net/transport, per peer or for all peers, and every
 * frame a fault touched is counted. Off unless a transport was given a
 * net_faults (the agent only does so with faults.enable = true).
 *
 * Rules: one link rule for all peers (peer 0) and up to
 * NET_FAULTS_RULES_MAX - 1 rules for single peers; a peer's own rule
 * replaces the all-peers rule for it (it does not add to it). A rule whose
 * every field is zero removes itself. A partition is a set of node ids: no
 * frame goes to them and none from them is delivered, whatever the rules.
 *
 * Decisions (net_faults_send), in this order, each from the one seeded
 * generator so that a seed and the same sequence of calls give the same
 * decisions:
 *   partition -> dropped;  drop (probability) -> dropped;
 *   corrupt (probability) -> one byte of the sealed record will be flipped
 *     (the receiver's channel refuses it: cause `auth`, and closes the link
 *     as it would for a tampered frame);
 *   delay_ms + uniform(0, jitter_ms); reorder (probability) adds
 *     uniform(0, reorder_window_ms), so frames less than a window apart may
 *     swap; bandwidth_bps makes the rule's frames leave one after another at
 *     that rate (the all-peers rule caps this agent's total egress);
 *   duplicate (probability) -> a second copy with its own delay.
 * A frame whose peer is not known yet (a seed dialed by address) is peer 0:
 * only the all-peers rule applies to it.
 *
 * Held frames: a delayed frame is copied into a bounded queue
 * (NET_FAULTS_HELD_FRAMES_MAX frames, NET_FAULTS_HELD_BYTES_MAX bytes; a
 * frame that does not fit is dropped and counted) and handed back by
 * net_faults_take_due once its time has come. net_faults_clear makes every
 * held frame due at once, so nothing stays behind after the faults end.
 *
 * Units: times in microseconds on the caller's monotonic clock (an
 * argument: the decisions are testable without a clock), delays in ms,
 * bandwidth in bits per second, probabilities in [0, 1].
 *
 * Threads: every function takes the object's own mutex; it may be called
 * from the event loop, NNG callbacks and a control thread at once.
 */
#ifndef NET_FAULTS_H
#define NET_FAULTS_H

#include <stddef.h>
#include <stdint.h>

#include "gossip/types.h"

/* Rules: the all-peers rule plus 63 single peers (a schedule breaks a few
 * links at a time; 63 covers every link of a 64-agent test cluster). */
#define NET_FAULTS_RULES_MAX 64u
/* Partitioned ids: a side of a partition in a 256-agent cluster. */
#define NET_FAULTS_PARTITION_MAX 256u
/* Longest delay, jitter or reorder window: one minute. Longer is not a slow
 * link but a partition, which has its own fault. */
#define NET_FAULTS_DELAY_MAX_MS 60000u
/* Held (delayed) frames: 4096 frames and 64 MiB, so a slow link to every
 * neighbour holds a few mixing rounds at once. */
#define NET_FAULTS_HELD_FRAMES_MAX 4096u
#define NET_FAULTS_HELD_BYTES_MAX  (64u * 1024u * 1024u)
/* Slowest bandwidth cap: 8 kbit/s (a 1 KiB SWIM frame per second). */
#define NET_FAULTS_BANDWIDTH_MIN_BPS 8000u
/* Exempt ids (operators' keys). */
#define NET_FAULTS_EXEMPT_MAX 64u
_Static_assert(NET_FAULTS_RULES_MAX >= 2, "the all-peers rule and at least one peer");

/* One link rule. Zero everywhere = no fault. */
typedef struct net_fault_link {
    double drop;                /* probability a frame is lost */
    uint32_t delay_ms;          /* added to every frame */
    uint32_t jitter_ms;         /* plus uniform(0, jitter_ms) */
    uint64_t bandwidth_bps;     /* 0 = no cap; else >= NET_FAULTS_BANDWIDTH_MIN_BPS */
    double duplicate;           /* probability a frame is sent twice */
    double reorder;             /* probability a frame is held back ... */
    uint32_t reorder_window_ms; /* ... uniform(0, window) more */
    double corrupt;             /* probability one byte of the sealed record flips */
} net_fault_link;

/* What a fault did to a frame, for the counters. */
typedef enum net_fault_kind {
    NET_FAULT_DROP = 0,
    NET_FAULT_DELAY,
    NET_FAULT_BANDWIDTH,
    NET_FAULT_DUPLICATE,
    NET_FAULT_REORDER,
    NET_FAULT_CORRUPT,
    NET_FAULT_PARTITION, /* sent to or received from a partitioned id */
    NET_FAULT_OVERFLOW,  /* a delayed frame dropped: the held queue was full */
    NET_FAULT_KIND_COUNT
} net_fault_kind;

/* "drop", "delay", ...; "unknown" out of range. */
const char *net_fault_kind_name(int kind);

typedef struct net_faults_stats {
    uint64_t frames[NET_FAULT_KIND_COUNT]; /* frames each kind of fault touched */
    uint32_t held_frames;                  /* delayed frames waiting now */
    size_t held_bytes;
    uint32_t rules;     /* link rules in force (the all-peers rule included) */
    uint32_t partition; /* partitioned ids */
} net_faults_stats;

/* The decision for one outgoing frame: copies 0 (lost), 1 or 2; each copy
 * leaves at due_us[i] (<= now: at once) with corrupt[i] = 0 or a random
 * non-zero value choosing the byte to flip. */
typedef struct net_fault_verdict {
    int copies;
    gossip_time_us due_us[2];
    uint32_t corrupt[2];
} net_fault_verdict;

/* A delayed frame handed back (net_faults_take_due): send it as it is, then
 * net_faults_held_free it. */
typedef struct net_fault_held {
    struct net_fault_held *next;
    gossip_time_us due_us;
    uint64_t to;                /* node id, 0 when only addr is known */
    char addr[GOSSIP_ADDR_MAX]; /* "" when to is known */
    uint32_t corrupt;
    size_t len;
    uint8_t frame[];
} net_fault_held;

typedef struct net_faults net_faults;

/* Create an injector with no fault in force; every random decision comes
 * from seed. Errors: NET_ENOMEM. */
int net_faults_create(net_faults **out, uint64_t seed);
/* Free it and every held frame. NULL is fine. */
void net_faults_destroy(net_faults *f);

/* Check a rule: 0, or -1 with why[] naming the field and its range. */
int net_fault_link_check(const net_fault_link *l, char *why, size_t cap);
/* 1 if every field of l is zero. */
int net_fault_link_empty(const net_fault_link *l);

/* Install (replace) the rule of peer (0 = all peers); an empty rule removes
 * it. Errors: NET_EINVAL (a field out of range), NET_EFULL (no rule slot). */
int net_faults_set_link(net_faults *f, uint64_t peer, const net_fault_link *l);
/* The rule of peer: 1 and *out filled, 0 (and *out zeroed) when none. */
int net_faults_get_link(net_faults *f, uint64_t peer, net_fault_link *out);
/* Replace the partition by these ids (n = 0 heals). Errors: NET_EINVAL
 * (n > NET_FAULTS_PARTITION_MAX, an id 0). */
int net_faults_set_partition(net_faults *f, const uint64_t *ids, size_t n);
/* The partition: up to cap ids into ids, returns how many there are. */
size_t net_faults_get_partition(net_faults *f, uint64_t *ids, size_t cap);
/* The rules in force: up to cap (peer, rule) pairs, returns how many. */
size_t net_faults_list_links(net_faults *f, uint64_t *peers, net_fault_link *links, size_t cap);
/* Ids no fault ever touches (an operator's control connection, so that a
 * fault can always be lifted). Replaces the set. Errors: NET_EINVAL. */
int net_faults_set_exempt(net_faults *f, const uint64_t *ids, size_t n);
/* Remove every rule and the partition; held frames become due at once. */
void net_faults_clear(net_faults *f);
/* 1 if any rule or partition is in force. */
int net_faults_active(net_faults *f);

/* Decide the fate of a frame of len bytes to peer (0 = unknown) at now. */
void net_faults_send(net_faults *f, uint64_t peer, size_t len, gossip_time_us now,
                     net_fault_verdict *v);
/* 1 if a frame received from peer must be dropped (partition), else 0. */
int net_faults_recv(net_faults *f, uint64_t peer);

/* Hold a copy of a frame until due_us. Errors: NET_EFULL (the held queue
 * is full: dropped and counted as overflow), NET_ENOMEM, NET_EINVAL. */
int net_faults_hold(net_faults *f, uint64_t to, const char *addr, const uint8_t *frame, size_t len,
                    gossip_time_us due_us, uint32_t corrupt);
/* The earliest held frame due at or before now: 1 and *out (the caller
 * frees it with net_faults_held_free), or 0 when none is due. */
int net_faults_take_due(net_faults *f, gossip_time_us now, net_fault_held **out);
void net_faults_held_free(net_fault_held *h);
/* When the next held frame is due (GOSSIP_TIME_NEVER when none). */
gossip_time_us net_faults_next_due(net_faults *f);

void net_faults_stats_get(net_faults *f, net_faults_stats *out);

#endif
