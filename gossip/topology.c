#include "gossip/topology.h"

#include <string.h>

const char *const gossip_topology_names[GOSSIP_TOPO_COUNT + 1] = {
    [GOSSIP_TOPO_RANDOM] = "random",
    [GOSSIP_TOPO_RING] = "ring",
    [GOSSIP_TOPO_TORUS] = "torus",
    [GOSSIP_TOPO_EXPONENTIAL] = "exponential",
    [GOSSIP_TOPO_ONE_PEER_EXP] = "one-peer-exponential",
    [GOSSIP_TOPO_COUNT] = NULL,
};

const char *gossip_topology_name(gossip_topology t)
{
    return (unsigned)t < GOSSIP_TOPO_COUNT ? gossip_topology_names[t] : "unknown";
}

int gossip_topology_parse(const char *name, gossip_topology *out)
{
    for (unsigned t = 0; t < GOSSIP_TOPO_COUNT; t++) {
        if (name && strcmp(name, gossip_topology_names[t]) == 0) {
            *out = (gossip_topology)t;
            return GOSSIP_OK;
        }
    }
    return GOSSIP_EINVAL;
}

int gossip_topology_is_static(gossip_topology t)
{
    return t == GOSSIP_TOPO_RING || t == GOSSIP_TOPO_TORUS || t == GOSSIP_TOPO_EXPONENTIAL;
}

int gossip_topology_has_graph(gossip_topology t)
{
    return t != GOSSIP_TOPO_RANDOM && (unsigned)t < GOSSIP_TOPO_COUNT;
}

void gossip_topology_torus_shape(uint32_t n, uint32_t *rows, uint32_t *cols)
{
    uint32_t r = 1;
    for (uint32_t d = 1; (uint64_t)d * d <= n; d++)
        if (n % d == 0)
            r = d;
    *rows = r;
    *cols = n ? n / r : 0;
}

/* Append v to out unless it is self or already there. */
static uint32_t add_unique(uint32_t *out, uint32_t k, uint32_t v, uint32_t self)
{
    if (v == self)
        return k;
    for (uint32_t j = 0; j < k; j++)
        if (out[j] == v)
            return k;
    out[k] = v;
    return k + 1;
}

/* floor(log2(x)) for x >= 1. */
static uint32_t log2_floor(uint32_t x)
{
    uint32_t k = 0;
    while (x >>= 1)
        k++;
    return k;
}

/* Number of exponents for one-peer-exponential: ceil(log2 n), n >= 2. */
static uint32_t one_peer_period(uint32_t n)
{
    return log2_floor(n - 1) + 1;
}

/* sign = +1 for out-neighbours, -1 for in-neighbours (they differ only for
 * the directed topologies). */
static uint32_t neighbours(gossip_topology t, uint32_t n, uint32_t i, uint64_t round, int sign,
                           uint32_t *out)
{
    if (n <= 1 || i >= n)
        return 0;
    uint32_t k = 0;
    switch (t) {
    case GOSSIP_TOPO_RING:
        k = add_unique(out, k, (i + n - 1) % n, i);
        k = add_unique(out, k, (i + 1) % n, i);
        break;
    case GOSSIP_TOPO_TORUS: {
        uint32_t r, c;
        gossip_topology_torus_shape(n, &r, &c);
        uint32_t row = i / c, col = i % c;
        k = add_unique(out, k, ((row + r - 1) % r) * c + col, i);
        k = add_unique(out, k, ((row + 1) % r) * c + col, i);
        k = add_unique(out, k, row * c + (col + c - 1) % c, i);
        k = add_unique(out, k, row * c + (col + 1) % c, i);
        break;
    }
    case GOSSIP_TOPO_EXPONENTIAL: {
        uint32_t kmax = log2_floor(n - 1);
        for (uint32_t e = 0; e <= kmax; e++) {
            uint32_t step = (1u << e) % n;
            uint32_t v = sign > 0 ? (i + step) % n : (i + n - step) % n;
            k = add_unique(out, k, v, i);
        }
        break;
    }
    case GOSSIP_TOPO_ONE_PEER_EXP: {
        uint32_t e = (uint32_t)(round % one_peer_period(n));
        uint32_t step = (1u << e) % n;
        uint32_t v = sign > 0 ? (i + step) % n : (i + n - step) % n;
        k = add_unique(out, k, v, i);
        break;
    }
    default:
        return 0;
    }
    return k;
}

uint32_t gossip_topology_out(gossip_topology t, uint32_t n, uint32_t i, uint64_t round,
                             uint32_t *out)
{
    return neighbours(t, n, i, round, +1, out);
}

uint32_t gossip_topology_in(gossip_topology t, uint32_t n, uint32_t i, uint64_t round,
                            uint32_t *out)
{
    return neighbours(t, n, i, round, -1, out);
}

uint32_t gossip_topology_pick(gossip_topology t, const gossip_env *env, uint32_t n, uint32_t i,
                              uint64_t round)
{
    if (n <= 1 || i >= n)
        return UINT32_MAX;
    if (t == GOSSIP_TOPO_RANDOM) {
        uint32_t j = (uint32_t)gossip_random_below(env, n - 1);
        return j >= i ? j + 1 : j;
    }
    uint32_t nb[GOSSIP_TOPOLOGY_DEGREE_MAX];
    uint32_t d = gossip_topology_out(t, n, i, round, nb);
    if (d == 0)
        return UINT32_MAX;
    return d == 1 ? nb[0] : nb[gossip_random_below(env, d)];
}

uint32_t gossip_view_index(const gossip_view *v, uint64_t id)
{
    uint32_t lo = 0, hi = v->n;
    /* Views are sorted and ids spread evenly (hashes of keys in the agent,
     * 1..n in the simulator): one interpolation step lands on or next to
     * the id and halves the search (exact for dense ids), which matters
     * when a frame's sender is looked up in a view of thousands. */
    if (hi > 8 && id > v->ids[0] && id < v->ids[hi - 1]) {
        double f = (double)(id - v->ids[0]) / (double)(v->ids[hi - 1] - v->ids[0]);
        uint32_t g = (uint32_t)(f * (hi - 1));
        if (g >= hi)
            g = hi - 1;
        if (v->ids[g] == id)
            return g;
        if (v->ids[g] < id)
            lo = g + 1;
        else
            hi = g;
    }
    lo = gossip_ids_lower_bound(v->ids, lo, hi, id);
    return lo < v->n && v->ids[lo] == id ? lo : UINT32_MAX;
}

uint32_t gossip_ids_lower_bound(const uint64_t *ids, uint32_t lo, uint32_t hi, uint64_t id)
{
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (ids[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void gossip_sample_distinct(const gossip_env *env, uint32_t m, uint32_t k, uint32_t *out)
{
    /* positions after i that a swap filled, and what they hold; position i
     * itself is never drawn again (every later j >= i + 1) */
    uint32_t pos[GOSSIP_SAMPLE_MAX], val[GOSSIP_SAMPLE_MAX];
    uint32_t moved = 0;
    for (uint32_t i = 0; i < k; i++) {
        uint32_t j = i + (uint32_t)gossip_random_below(env, m - i);
        uint32_t qi = moved, qj = moved; /* moved: not found */
        for (uint32_t q = 0; q < moved; q++) {
            if (pos[q] == i)
                qi = q;
            if (pos[q] == j)
                qj = q;
        }
        uint32_t vi = qi < moved ? val[qi] : i;
        out[i] = qj < moved ? val[qj] : j;
        if (j != i) {
            if (qj == moved)
                pos[moved++] = j;
            val[qj] = vi;
        }
    }
}

static void sift_down_u64(uint64_t *a, size_t n, size_t i)
{
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            return;
        if (c + 1 < n && a[c + 1] > a[c])
            c++;
        if (a[i] >= a[c])
            return;
        uint64_t t = a[i];
        a[i] = a[c];
        a[c] = t;
        i = c;
    }
}

static void sort_u64(uint64_t *a, size_t n, unsigned depth)
{
    while (n > 16) {
        if (depth-- == 0) { /* heapsort */
            for (size_t i = n / 2; i-- > 0;)
                sift_down_u64(a, n, i);
            for (size_t e = n - 1; e > 0; e--) {
                uint64_t t = a[0];
                a[0] = a[e];
                a[e] = t;
                sift_down_u64(a, e, 0);
            }
            return;
        }
        uint64_t x = a[0], y = a[n / 2], z = a[n - 1];
        uint64_t pivot = x < y ? (y < z ? y : (x < z ? z : x)) : (x < z ? x : (y < z ? z : y));
        size_t i = 0, j = n - 1;
        for (;;) { /* Hoare partition: [0, j] <= pivot <= [j + 1, n) */
            while (a[i] < pivot)
                i++;
            while (a[j] > pivot)
                j--;
            if (i >= j)
                break;
            uint64_t t = a[i];
            a[i++] = a[j];
            a[j--] = t;
        }
        size_t left = j + 1;
        if (left < n - left) {
            sort_u64(a, left, depth);
            a += left;
            n -= left;
        } else {
            sort_u64(a + left, n - left, depth);
            n = left;
        }
    }
    for (size_t i = 1; i < n; i++) {
        uint64_t v = a[i];
        size_t k = i;
        while (k > 0 && a[k - 1] > v) {
            a[k] = a[k - 1];
            k--;
        }
        a[k] = v;
    }
}

static unsigned sort_depth(size_t n)
{
    unsigned d = 0;
    while (n > 1) {
        n >>= 1;
        d += 2;
    }
    return d;
}

void gossip_ids_sort(uint64_t *ids, uint32_t n)
{
    sort_u64(ids, n, sort_depth(n));
}

void gossip_ids_sort_depth(uint64_t *ids, uint32_t n, unsigned depth)
{
    sort_u64(ids, n, depth);
}
