/* gossip/topology: neighbour sets, degrees, symmetry, peer choice. */
#include "tests/harness.h"

#include <stdlib.h>
#include <string.h>

#include "gossip/topology.h"

static int contains(const uint32_t *v, uint32_t n, uint32_t x)
{
    for (uint32_t k = 0; k < n; k++)
        if (v[k] == x)
            return 1;
    return 0;
}

static uint32_t log2_floor(uint32_t x)
{
    uint32_t k = 0;
    while (x >>= 1)
        k++;
    return k;
}

static void names_round_trip(void **state)
{
    (void)state;
    for (unsigned t = 0; t < GOSSIP_TOPO_COUNT; t++) {
        gossip_topology back;
        assert_int_equal(gossip_topology_parse(gossip_topology_name((gossip_topology)t), &back),
                         GOSSIP_OK);
        assert_int_equal(back, t);
    }
    gossip_topology x;
    assert_int_equal(gossip_topology_parse("mesh", &x), GOSSIP_EINVAL);
    assert_int_equal(gossip_topology_parse(NULL, &x), GOSSIP_EINVAL);
    assert_string_equal(gossip_topology_name(GOSSIP_TOPO_COUNT), "unknown");
}

/* Out- and in-lists: no self, no duplicates, in range; j in out(i) iff i in
 * in(j); every member has the same in- and out-degree (so uniform weights
 * are doubly stochastic); degrees as documented. */
static void graphs_are_consistent(void **state)
{
    (void)state;
    const gossip_topology graphs[] = {GOSSIP_TOPO_RING, GOSSIP_TOPO_TORUS, GOSSIP_TOPO_EXPONENTIAL,
                                      GOSSIP_TOPO_ONE_PEER_EXP};
    for (size_t g = 0; g < 4; g++) {
        gossip_topology t = graphs[g];
        for (uint32_t n = 1; n <= 70; n++) {
            for (uint64_t round = 0; round < 8; round++) {
                uint32_t deg = UINT32_MAX;
                for (uint32_t i = 0; i < n; i++) {
                    uint32_t out[GOSSIP_TOPOLOGY_DEGREE_MAX], in[GOSSIP_TOPOLOGY_DEGREE_MAX];
                    uint32_t no = gossip_topology_out(t, n, i, round, out);
                    uint32_t ni = gossip_topology_in(t, n, i, round, in);
                    assert_int_equal(no, ni);
                    if (deg == UINT32_MAX)
                        deg = no;
                    if (no != deg)
                        fail_msg("%s n=%u: member %u has degree %u, member 0 %u",
                                 gossip_topology_name(t), n, i, no, deg);
                    for (uint32_t k = 0; k < no; k++) {
                        assert_true(out[k] < n && out[k] != i);
                        assert_false(contains(out, k, out[k]));
                        uint32_t back[GOSSIP_TOPOLOGY_DEGREE_MAX];
                        uint32_t nb = gossip_topology_in(t, n, out[k], round, back);
                        assert_true(contains(back, nb, i));
                    }
                    for (uint32_t k = 0; k < ni; k++) {
                        assert_true(in[k] < n && in[k] != i);
                        assert_false(contains(in, k, in[k]));
                    }
                }
                uint32_t want;
                switch (t) {
                case GOSSIP_TOPO_RING:
                    want = n >= 3 ? 2 : n - 1;
                    break;
                case GOSSIP_TOPO_EXPONENTIAL:
                    want = n >= 2 ? log2_floor(n - 1) + 1 : 0;
                    break;
                case GOSSIP_TOPO_ONE_PEER_EXP:
                    want = n >= 2;
                    break;
                default:
                    want = deg <= 4 ? deg : 99;
                    break;
                }
                if (deg != want)
                    fail_msg("%s n=%u: degree %u, want %u", gossip_topology_name(t), n, deg, want);
            }
        }
    }
}

static void torus_shape_and_neighbours(void **state)
{
    (void)state;
    for (uint32_t n = 1; n <= 200; n++) {
        uint32_t r, c;
        gossip_topology_torus_shape(n, &r, &c);
        assert_int_equal(r * c, n);
        assert_true(r <= c);
        for (uint32_t d = r + 1; d * d <= n; d++)
            assert_true(n % d != 0); /* r is the largest divisor <= sqrt(n) */
    }
    uint32_t nb[GOSSIP_TOPOLOGY_DEGREE_MAX];
    /* 4 x 4: member 5 = (1, 1) has 1, 9, 4, 6. */
    assert_int_equal(gossip_topology_out(GOSSIP_TOPO_TORUS, 16, 5, 0, nb), 4);
    assert_true(contains(nb, 4, 1) && contains(nb, 4, 9) && contains(nb, 4, 4) &&
                contains(nb, 4, 6));
    /* Wrap-around: member 0 has 12, 4, 3, 1. */
    assert_int_equal(gossip_topology_out(GOSSIP_TOPO_TORUS, 16, 0, 0, nb), 4);
    assert_true(contains(nb, 4, 12) && contains(nb, 4, 4) && contains(nb, 4, 3) &&
                contains(nb, 4, 1));
}

static void exponential_and_one_peer(void **state)
{
    (void)state;
    uint32_t nb[GOSSIP_TOPOLOGY_DEGREE_MAX];
    /* n = 12: out-neighbours of 3 are 4, 5, 7, 11 (k = 0..3). */
    assert_int_equal(gossip_topology_out(GOSSIP_TOPO_EXPONENTIAL, 12, 3, 0, nb), 4);
    assert_true(nb[0] == 4 && nb[1] == 5 && nb[2] == 7 && nb[3] == 11);
    assert_int_equal(gossip_topology_in(GOSSIP_TOPO_EXPONENTIAL, 12, 3, 0, nb), 4);
    assert_true(nb[0] == 2 && nb[1] == 1 && nb[2] == 11 && nb[3] == 7);
    /* One-peer exponential, n = 16: round t pairs i with i + 2^(t mod 4). */
    for (uint64_t t = 0; t < 12; t++) {
        assert_int_equal(gossip_topology_out(GOSSIP_TOPO_ONE_PEER_EXP, 16, 5, t, nb), 1);
        assert_int_equal(nb[0], (5 + (1u << (t % 4))) % 16);
    }
    assert_true(gossip_topology_is_static(GOSSIP_TOPO_EXPONENTIAL));
    assert_false(gossip_topology_is_static(GOSSIP_TOPO_ONE_PEER_EXP));
    assert_false(gossip_topology_has_graph(GOSSIP_TOPO_RANDOM));
}

static void pick_is_a_neighbour_and_random_is_uniform(void **state)
{
    (void)state;
    test_env t;
    test_env_init(&t, test_seed(3));
    uint32_t counts[7] = {0};
    enum { DRAWS = 70000 };
    for (int k = 0; k < DRAWS; k++) {
        uint32_t j = gossip_topology_pick(GOSSIP_TOPO_RANDOM, &t.env, 8, 3, (uint64_t)k);
        assert_true(j < 8 && j != 3);
        counts[j > 3 ? j - 1 : j]++;
    }
    for (int j = 0; j < 7; j++)
        assert_true(counts[j] > DRAWS / 7 * 0.95 && counts[j] < DRAWS / 7 * 1.05);
    for (int k = 0; k < 1000; k++) {
        uint32_t j = gossip_topology_pick(GOSSIP_TOPO_RING, &t.env, 10, 0, (uint64_t)k);
        assert_true(j == 1 || j == 9);
        j = gossip_topology_pick(GOSSIP_TOPO_ONE_PEER_EXP, &t.env, 8, 6, (uint64_t)k);
        assert_int_equal(j, (6 + (1u << (k % 3))) % 8);
    }
    assert_int_equal(gossip_topology_pick(GOSSIP_TOPO_RANDOM, &t.env, 1, 0, 0), UINT32_MAX);
}

static void view_index_finds_ids(void **state)
{
    (void)state;
    uint64_t ids[] = {4, 9, 15, 100, 1ull << 60};
    gossip_view v = {.epoch = 1, .n = 5, .ids = ids};
    for (uint32_t i = 0; i < 5; i++)
        assert_int_equal(gossip_view_index(&v, ids[i]), i);
    assert_int_equal(gossip_view_index(&v, 5), UINT32_MAX);
    assert_int_equal(gossip_view_index(&v, 1), UINT32_MAX);
    v.n = 0;
    assert_int_equal(gossip_view_index(&v, 4), UINT32_MAX);

    /* Larger views (the interpolation step): dense ids 1..n, random 64-bit
     * ids, and clustered ids (a skewed spread); every member found at its
     * index, every absent id (between, below, above) not found. */
    enum { N = 3000 };
    static uint64_t big[N];
    uint64_t st = 12345;
    for (int kind = 0; kind < 3; kind++) {
        uint64_t x = 0;
        for (uint32_t i = 0; i < N; i++) {
            st = st * 6364136223846793005ULL + 1442695040888963407ULL;
            uint64_t step = kind == 0 ? 1 : kind == 1 ? (st >> 16) + 2 : (i % 100 ? 2 : st >> 20);
            x += step;
            big[i] = x;
        }
        gossip_view w = {.epoch = 1, .n = N, .ids = big};
        for (uint32_t i = 0; i < N; i++) {
            if (gossip_view_index(&w, big[i]) != i)
                fail_msg("kind %d: id %u not at its index", kind, i);
            if (big[i] + 1 < (i + 1 < N ? big[i + 1] : UINT64_MAX) &&
                gossip_view_index(&w, big[i] + 1) != UINT32_MAX)
                fail_msg("kind %d: absent id after %u found", kind, i);
        }
        assert_int_equal(gossip_view_index(&w, 0), UINT32_MAX);
        assert_int_equal(gossip_view_index(&w, big[N - 1] + 1), UINT32_MAX);
    }
}

/* gossip_sample_distinct gives the first k of a partial Fisher-Yates over
 * an array of m: the same draws from the same RNG give the same indices as
 * shuffling the array itself, distinct and in range, for small and large
 * m and every k up to GOSSIP_SAMPLE_MAX. */
static void sample_distinct_is_a_partial_shuffle(void **state)
{
    (void)state;
    const uint32_t ms[] = {1, 2, 3, 5, 17, 64, 100, 1000, 16384};
    uint32_t *arr = malloc(16384 * sizeof *arr);
    assert_non_null(arr);
    for (size_t a = 0; a < sizeof ms / sizeof ms[0]; a++)
        for (uint32_t k = 0; k <= GOSSIP_SAMPLE_MAX && k <= ms[a]; k++)
            for (uint64_t seed = 1; seed <= 4; seed++) {
                uint32_t m = ms[a];
                test_env t1, t2;
                test_env_init(&t1, seed);
                test_env_init(&t2, seed);
                uint32_t got[GOSSIP_SAMPLE_MAX];
                gossip_sample_distinct(&t1.env, m, k, got);
                for (uint32_t i = 0; i < m; i++)
                    arr[i] = i;
                for (uint32_t i = 0; i < k; i++) {
                    uint32_t j = i + (uint32_t)gossip_random_below(&t2.env, m - i);
                    uint32_t x = arr[i];
                    arr[i] = arr[j];
                    arr[j] = x;
                }
                for (uint32_t i = 0; i < k; i++) {
                    if (got[i] != arr[i])
                        fail_msg("m %u k %u seed %llu: index %u is %u, the shuffle's %u", m, k,
                                 (unsigned long long)seed, i, got[i], arr[i]);
                    for (uint32_t q = 0; q < i; q++)
                        assert_int_not_equal(got[q], got[i]);
                }
                /* the same number of draws: the next one agrees */
                assert_int_equal(gossip_random_below(&t1.env, 1u << 30),
                                 gossip_random_below(&t2.env, 1u << 30));
            }
    free(arr);
}

static int cmp_id(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* gossip_ids_sort gives qsort's order for every shape of input: random,
 * already sorted, reversed, organ pipe, all equal, few distinct values,
 * sizes around the insertion-sort cutoff and large; so does its heapsort
 * (what an order that defeats the quicksort's pivots falls back to). */
static void ids_sort_matches_qsort(void **state)
{
    (void)state;
    const uint32_t sizes[] = {0, 1, 2, 3, 15, 16, 17, 33, 100, 1000, 40000};
    uint64_t *a = malloc(40000 * sizeof *a), *b = malloc(40000 * sizeof *b);
    assert_non_null(a);
    assert_non_null(b);
    model_rng rng;
    model_rng_seed(&rng, test_seed(5), 1);
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
        for (int shape = 0; shape < 6; shape++) {
            uint32_t n = sizes[si];
            for (uint32_t i = 0; i < n; i++) {
                uint64_t r = model_rng_u64(&rng);
                a[i] = shape == 0   ? r
                       : shape == 1 ? (uint64_t)i * 7 + 1
                       : shape == 2 ? (uint64_t)(n - i) * 7
                       : shape == 3 ? (uint64_t)(i < n / 2 ? i : n - i)
                       : shape == 4 ? 42
                                    : r % 5;
            }
            memcpy(b, a, (size_t)n * sizeof *a);
            qsort(b, n, sizeof *b, cmp_id);
            /* the default depth (-1), then the heapsort at once (0) or after
             * one or two quicksort levels */
            uint64_t *orig = malloc((size_t)(n ? n : 1) * sizeof *orig);
            assert_non_null(orig);
            memcpy(orig, a, (size_t)n * sizeof *a);
            for (int d = -1; d < 3; d++) {
                memcpy(a, orig, (size_t)n * sizeof *a);
                if (d < 0)
                    gossip_ids_sort(a, n);
                else
                    gossip_ids_sort_depth(a, n, (unsigned)d);
                if (n && memcmp(a, b, (size_t)n * sizeof *a) != 0)
                    fail_msg("n %u shape %d depth %d: not qsort's order", n, shape, d);
            }
            free(orig);
        }
    free(a);
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(names_round_trip),
        cmocka_unit_test(graphs_are_consistent),
        cmocka_unit_test(torus_shape_and_neighbours),
        cmocka_unit_test(exponential_and_one_peer),
        cmocka_unit_test(pick_is_a_neighbour_and_random_is_uniform),
        cmocka_unit_test(view_index_finds_ids),
        cmocka_unit_test(sample_distinct_is_a_partial_shuffle),
        cmocka_unit_test(ids_sort_matches_qsort),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
