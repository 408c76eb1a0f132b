/* gossip/topology — who mixes with whom.
 *
 * A topology maps (view size n, member index i, round t) to the members i
 * sends to (out-neighbours) and receives from (in-neighbours). Indices are
 * positions in the view's sorted id list, so every member that holds the same
 * view computes the same graph with no communication.
 *
 *   random       no fixed graph: one peer drawn uniformly from the others
 *                (pairwise gossip and push-sum only).
 *   ring         i-1 and i+1 (undirected; 1 neighbour when n = 2).
 *   torus        an r x c grid with wrap-around, r the largest divisor of n
 *                with r <= sqrt(n), c = n / r; up, down, left, right with
 *                duplicates removed (undirected, regular).
 *   exponential  out-neighbours i + 2^k mod n, k = 0..floor(log2(n-1));
 *                in-neighbours i - 2^k (directed, every member has the same
 *                in- and out-degree, so uniform weights are doubly stochastic).
 *   one-peer-exponential  round t: out-neighbour i + 2^(t mod tau), in-neighbour
 *                i - 2^(t mod tau), tau = ceil(log2 n) (= log2 n for n a power of
 *                two). Time-varying; after tau rounds of pairwise averaging every
 *                member holds the exact average when n is a power of two.
 *
 * With uniform weights 1/(d+1) over self and the d in-neighbours every static
 * topology above is a circulant or torus graph, hence doubly stochastic: the
 * average is preserved and mixing contracts at the second-largest eigenvalue
 * modulus of that matrix.
 *
 * Pure functions: no state, no allocation. Neighbour lists are written into a
 * caller array of GOSSIP_TOPOLOGY_DEGREE_MAX entries, in a fixed order, with
 * no duplicates and never i itself.
 */
#ifndef GOSSIP_TOPOLOGY_H
#define GOSSIP_TOPOLOGY_H

#include <stdint.h>

#include "gossip/env.h"
#include "gossip/types.h"

typedef enum gossip_topology {
    GOSSIP_TOPO_RANDOM = 0,
    GOSSIP_TOPO_RING,
    GOSSIP_TOPO_TORUS,
    GOSSIP_TOPO_EXPONENTIAL,
    GOSSIP_TOPO_ONE_PEER_EXP,
    GOSSIP_TOPO_COUNT
} gossip_topology;

/* Most neighbours in any direction: exponential has floor(log2(n-1)) + 1 <=
 * 14 out-neighbours for n <= GOSSIP_MEMBERS_MAX = 2^14; torus 4, ring 2. */
#define GOSSIP_TOPOLOGY_DEGREE_MAX 16u
_Static_assert(GOSSIP_MEMBERS_MAX <= (1u << (GOSSIP_TOPOLOGY_DEGREE_MAX - 2)),
               "exponential degree fits GOSSIP_TOPOLOGY_DEGREE_MAX");

/* The one name table of gossip_topology, in enum order, NULL-terminated:
 * "random", "ring", "torus", "exponential", "one-peer-exponential". */
extern const char *const gossip_topology_names[GOSSIP_TOPO_COUNT + 1];
/* gossip_topology_names[t]; "unknown" outside the enum. */
const char *gossip_topology_name(gossip_topology t);
/* Parse a name above into *out. Returns GOSSIP_OK or GOSSIP_EINVAL. */
int gossip_topology_parse(const char *name, gossip_topology *out);
/* 1 for topologies whose graph does not change with the round (ring, torus,
 * exponential); 0 for random and one-peer-exponential. */
int gossip_topology_is_static(gossip_topology t);
/* 1 if the topology has a deterministic graph (everything but random). */
int gossip_topology_has_graph(gossip_topology t);

/* Out-neighbours (whom i sends to) of member i in a view of n at round t,
 * written to out[GOSSIP_TOPOLOGY_DEGREE_MAX]. Returns their count (0 when n <= 1,
 * i >= n, or for random). */
uint32_t gossip_topology_out(gossip_topology t, uint32_t n, uint32_t i, uint64_t round,
                             uint32_t *out);
/* In-neighbours (whom i receives from); same rules. */
uint32_t gossip_topology_in(gossip_topology t, uint32_t n, uint32_t i, uint64_t round,
                            uint32_t *out);
/* Torus shape for n members: rows r (largest divisor <= sqrt n) and cols n / r. */
void gossip_topology_torus_shape(uint32_t n, uint32_t *rows, uint32_t *cols);

/* One peer for a pairwise exchange by i at round t: uniform among the others
 * for random, uniform among the out-neighbours for ring/torus/exponential, the
 * round's peer for one-peer-exponential. Returns the index, or UINT32_MAX when
 * n <= 1. Uses env for randomness. */
uint32_t gossip_topology_pick(gossip_topology t, const gossip_env *env, uint32_t n, uint32_t i,
                              uint64_t round);

/* Index of id in a view (binary search over the sorted ids), or UINT32_MAX. */
uint32_t gossip_view_index(const gossip_view *v, uint64_t id);

/* The first index in [lo, hi) of ascending ids whose id is >= id (hi if
 * none): where id is, or would be inserted. */
uint32_t gossip_ids_lower_bound(const uint64_t *ids, uint32_t lo, uint32_t hi, uint64_t id);

/* Sort ids ascending in place: introsort (median-of-three quicksort into
 * the smaller side first, heapsort past 2 log2 n levels, so that no order
 * a peer can bring costs more than O(n log n); insertion sort below 16),
 * without qsort's comparison callback. */
void gossip_ids_sort(uint64_t *ids, uint32_t n);
/* The same with the quicksort levels before heapsort given (the tests'
 * way to reach the heapsort: 0 = heapsort above 16 ids). */
void gossip_ids_sort_depth(uint64_t *ids, uint32_t n, unsigned depth);

/* Most draws of gossip_sample_distinct. */
#define GOSSIP_SAMPLE_MAX 64u

/* k distinct indices of [0, m) at random into out[k] (k <= m, k <=
 * GOSSIP_SAMPLE_MAX): the first k positions of a partial Fisher-Yates
 * shuffle of 0 .. m-1 (draw i: j = i + random_below(m - i), swap i and j),
 * the same draws and the same result as shuffling an array of m, without
 * the array: only the positions a swap moved are kept (at most k). */
void gossip_sample_distinct(const gossip_env *env, uint32_t m, uint32_t k, uint32_t *out);

#endif
