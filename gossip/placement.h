/* gossip/placement — which agents hold which data shards (pure functions).
 *
 * Purpose: every agent computes, from the same membership view and the same
 * shard catalog, the same holder list for every shard. No messages are
 * needed to agree on placement; only on the view.
 *
 * Weights: w(shard, node) = mix(first 16 bytes of the shard id, node id), a
 * 64-bit integer hash (rendezvous / highest-random-weight hashing). A shard's
 * ranking of the live members is by (w descending, node id ascending); the
 * order is total, so ties cannot split agents.
 *
 * Two modes:
 * - plain rendezvous (slack_permille = GOSSIP_PLACEMENT_UNBOUNDED): the
 *   holders of a shard are its top `width` members. Minimal movement; but with
 *   S = 8N shards and r = 3 the busiest agent holds 33-54% more than the
 *   mean (balls in bins), so it fails the 10% balance target.
 * - bounded load (the default): every member may hold at most
 *   cap = max(ceil(S*width/N), floor(S*width*(1000+slack)/(1000*N)))
 *   replicas. The assignment is the greedy matching over all (shard, member)
 *   pairs in descending weight order: a pair is taken when the shard still
 *   needs holders and the member has room. Because shards and members rank
 *   pairs by the same weight, this is the unique stable assignment: it does
 *   not depend on processing order (so it is deterministic), and a join or
 *   leave changes only the pairs displaced along short chains (measured in
 *   docs/SHARDS_REPLICATION.md). A shard left short after the greedy pass
 *   (possible only when every member with room already holds it) takes its
 *   best-ranked non-holders regardless of capacity; stats.overflow counts them.
 *
 * Primaries (the one holder of each shard that trains it in this view).
 * - balanced (the default): with L = floor(S/N), U = ceil(S/N), every member
 *   is primary for at least L and at most U shards (so for exactly L or L+1,
 *   and for at most 1 when S < N). The primaries are a second bounded
 *   matching, over the holders only: (a) greedy over all (shard, holder)
 *   pairs in descending weight, a pair taken when the member is below L, or
 *   at L while fewer than S mod N members are at L+1; (b) each shard left
 *   without a primary gets one along an augmenting path (BFS: a holder takes
 *   it and passes one of its own primaries to another of that shard's
 *   holders, and so on, to a member with room); this is exact (max-flow),
 *   so (c) only when no assignment within the bounds exists among the
 *   holders does a shard take the best-ranked member with room as primary,
 *   which replaces the shard's lowest-ranked holder (stats.adopted). The
 *   bounds therefore hold for every view, r, S and N.
 * - ranked (GOSSIP_PLACEMENT_PRIMARY_RANKED): the first-ranked holder, as
 *   before the balanced mode; 0-5 primaries per agent at S = 64, N = 24.
 * Shards are visited in the order of their ids in (b) and (c), so the
 * result does not depend on the catalog's order either. With r = 1 a shard's
 * only holder is its primary, so (c) makes the replicas balanced as well.
 *
 * Invariants of the output: each shard has exactly width = min(r, N) distinct
 * live holders; the first is the primary, the rest follow by rank (weight
 * descending).
 *
 * Units: shard ids are 32-byte BLAKE2b-256 content addresses; node ids are
 * uint64 (never 0). Ownership: the caller owns every array; scratch memory
 * comes from the env and is freed before return.
 */
#ifndef GOSSIP_PLACEMENT_H
#define GOSSIP_PLACEMENT_H

#include <stddef.h>
#include <stdint.h>

#include "gossip/env.h"
#include "gossip/types.h"

#define GOSSIP_SHARD_ID_SIZE 32u
/* Replication factor: default and maximum. 3 survives any 2 failures; 8 is
 * far above what a data set needs and keeps per-shard masks in a byte. */
#define GOSSIP_PLACEMENT_R_DEFAULT 3u
#define GOSSIP_PLACEMENT_R_MAX     8u
/* Shards per catalog. 2^20 shards * r 8 * 8 bytes = 64 MiB of holder table
 * at the extreme; a data set of 8 shards per agent at 16384 agents is 2^17. */
#define GOSSIP_PLACEMENT_SHARDS_MAX (1u << 20)
/* Default load slack: 10% above the mean, floored, so that the busiest
 * member is never more than 10% above the mean (the balance target). */
#define GOSSIP_PLACEMENT_SLACK_DEFAULT 100u
/* slack_permille value that selects plain rendezvous (no load bound). */
#define GOSSIP_PLACEMENT_UNBOUNDED UINT32_MAX
/* Candidates per shard kept from the first pass; deeper ranks are found by a
 * rescan (rare: a shard passes over a full member at most a few times). */
#define GOSSIP_PLACEMENT_TOPK 12u

_Static_assert(GOSSIP_PLACEMENT_R_MAX <= 8, "per-shard holder masks are one byte");
_Static_assert(GOSSIP_PLACEMENT_TOPK > GOSSIP_PLACEMENT_R_MAX, "top-K must exceed r");
_Static_assert((uint64_t)GOSSIP_PLACEMENT_SHARDS_MAX *GOSSIP_PLACEMENT_R_MAX <= UINT32_MAX,
               "replica counts fit in uint32");

/* How the primary of a shard is chosen (see header). */
typedef enum gossip_placement_primaries {
    GOSSIP_PLACEMENT_PRIMARY_BALANCED = 0, /* L..U primaries per member (default) */
    GOSSIP_PLACEMENT_PRIMARY_RANKED = 1,   /* the first-ranked holder */
} gossip_placement_primaries;

typedef struct gossip_placement_config {
    uint32_t r;              /* replication factor, 1..GOSSIP_PLACEMENT_R_MAX */
    uint32_t slack_permille; /* load bound above the mean, or GOSSIP_PLACEMENT_UNBOUNDED */
    uint32_t primaries;      /* gossip_placement_primaries */
} gossip_placement_config;

typedef struct gossip_placement_stats {
    uint32_t width;       /* holders per shard: min(r, N) */
    uint32_t cap;         /* per-member bound (0 in plain mode) */
    uint32_t max_load;    /* most replicas any member holds */
    uint32_t min_load;    /* fewest replicas any member holds */
    uint32_t overflow;    /* replicas placed above cap (see header) */
    uint32_t primary_max; /* most shards any member is primary for */
    uint32_t primary_min; /* fewest shards any member is primary for */
    uint32_t augmented;   /* primaries found along an augmenting path (b) */
    uint32_t adopted;     /* shards whose lowest-ranked holder gave way (c) */
} gossip_placement_stats;

/* The bounds of the balanced mode for S shards over N members: every member
 * is primary for at least *lo = floor(S/N) and at most *hi = ceil(S/N). */
void gossip_placement_primary_bounds(uint32_t n_shards, uint32_t n, uint32_t *lo, uint32_t *hi);

/* Defaults: r = 3, slack 10%, balanced primaries. */
void gossip_placement_config_default(gossip_placement_config *cfg);

/* The rendezvous weight of (shard, node). Pure. */
uint64_t gossip_placement_weight(const uint8_t id[GOSSIP_SHARD_ID_SIZE], uint64_t node);

/* Holders per shard for a view of n members: min(r, n). */
uint32_t gossip_placement_width(uint32_t r, uint32_t n);

/* The per-member bound of the bounded mode (see header), 0 if n == 0. */
uint32_t gossip_placement_capacity(uint32_t n_shards, uint32_t width, uint32_t n,
                                   uint32_t slack_permille);

/* Compute the placement of n_shards shards (ids[s], 32 bytes each) over the
 * live members of view. holders must hold n_shards * width entries, width =
 * gossip_placement_width(cfg->r, view->n); row s receives the node ids of
 * shard s's holders, primary first. stats may be NULL.
 * Errors: GOSSIP_EINVAL (r out of range, primaries not a
 * gossip_placement_primaries, empty view, n_shards == 0 or above
 * GOSSIP_PLACEMENT_SHARDS_MAX, view ids not strictly ascending or 0),
 * GOSSIP_ENOMEM (scratch allocation failed; holders left unspecified). */
int gossip_placement_compute(const gossip_env *env, const gossip_placement_config *cfg,
                             const uint8_t (*ids)[GOSSIP_SHARD_ID_SIZE], uint32_t n_shards,
                             const gossip_view *view, uint64_t *holders,
                             gossip_placement_stats *stats);

/* Index of node in view (binary search), or -1. */
long gossip_placement_view_find(const gossip_view *view, uint64_t node);

#endif
