/* Placement: determinism, balance, movement on join and leave, primaries. */
#include "tests/harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/placement.h"

typedef struct world {
    uint32_t s_count, n;
    uint8_t (*ids)[32];
    uint64_t *nodes; /* sorted */
} world;

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void world_make(world *w, model_rng *rng, uint32_t n, uint32_t s_count)
{
    w->n = n;
    w->s_count = s_count;
    w->ids = malloc((size_t)s_count * 32);
    w->nodes = malloc(((size_t)n + 1) * sizeof *w->nodes);
    for (uint32_t s = 0; s < s_count; s++)
        for (int b = 0; b < 32; b++)
            w->ids[s][b] = (uint8_t)model_rng_u64(rng);
    for (uint32_t i = 0; i < n; i++)
        w->nodes[i] = model_rng_u64(rng) | 1;
    qsort(w->nodes, n, sizeof *w->nodes, cmp_u64);
}

static void world_free(world *w)
{
    free(w->ids);
    free(w->nodes);
}

static uint64_t *place(test_env *t, const world *w, const uint64_t *nodes, uint32_t n,
                       uint32_t slack, gossip_placement_stats *st)
{
    gossip_placement_config cfg;
    gossip_placement_config_default(&cfg);
    cfg.slack_permille = slack;
    uint64_t *h = malloc((size_t)w->s_count * 3 * sizeof *h);
    gossip_view v = {1, n, nodes};
    assert_int_equal(gossip_placement_compute(&t->env, &cfg, (const uint8_t(*)[32])w->ids,
                                              w->s_count, &v, h, st),
                     GOSSIP_OK);
    assert_int_equal(t->alloc.live, 0);
    return h;
}

static int row_has(const uint64_t *row, uint32_t width, uint64_t x)
{
    for (uint32_t j = 0; j < width; j++)
        if (row[j] == x)
            return 1;
    return 0;
}

/* Replicas in b that are not in a, row by row. */
static uint32_t moved(const uint64_t *a, const uint64_t *b, uint32_t s_count, uint32_t width)
{
    uint32_t m = 0;
    for (uint32_t s = 0; s < s_count; s++)
        for (uint32_t j = 0; j < width; j++)
            m += !row_has(a + (size_t)s * width, width, b[(size_t)s * width + j]);
    return m;
}

static uint32_t load_of(const uint64_t *h, uint32_t s_count, uint32_t width, uint64_t x)
{
    uint32_t l = 0;
    for (size_t i = 0; i < (size_t)s_count * width; i++)
        l += h[i] == x;
    return l;
}

/* Rows: width distinct live holders, the primary first, the others by rank
 * (weight descending). */
static void rows_valid(const world *w, const uint64_t *h, const uint64_t *nodes, uint32_t n,
                       uint32_t width, uint64_t seed)
{
    gossip_view v = {1, n, nodes};
    for (uint32_t s = 0; s < w->s_count; s++) {
        const uint64_t *row = h + (size_t)s * width;
        for (uint32_t j = 0; j < width; j++) {
            if (gossip_placement_view_find(&v, row[j]) < 0)
                fail_msg("seed %llu shard %u: holder not live", (unsigned long long)seed, s);
            for (uint32_t k = 0; k < j; k++)
                assert_true(row[k] != row[j]);
            if (j > 1)
                assert_true(gossip_placement_weight(w->ids[s], row[j - 1]) >=
                            gossip_placement_weight(w->ids[s], row[j]));
        }
    }
}

/* Primaries per member of the view (row[0] of each shard). */
static void primary_counts(const uint64_t *h, uint32_t s_count, uint32_t width,
                           const uint64_t *nodes, uint32_t n, uint32_t *counts)
{
    gossip_view v = {1, n, nodes};
    memset(counts, 0, n * sizeof *counts);
    for (uint32_t s = 0; s < s_count; s++) {
        long m = gossip_placement_view_find(&v, h[(size_t)s * width]);
        assert_true(m >= 0);
        counts[m]++;
    }
}

static void deterministic_and_order_free_at(uint64_t seed, uint32_t n, uint32_t s_count)
{
    test_env t;
    test_env_init(&t, seed);
    world w;
    world_make(&w, &t.rng, n, s_count);
    uint64_t *a = place(&t, &w, w.nodes, w.n, GOSSIP_PLACEMENT_SLACK_DEFAULT, NULL);
    uint64_t *b = place(&t, &w, w.nodes, w.n, GOSSIP_PLACEMENT_SLACK_DEFAULT, NULL);
    assert_memory_equal(a, b, (size_t)w.s_count * 3 * sizeof *a);
    rows_valid(&w, a, w.nodes, w.n, 3, seed);
    /* Reverse the catalog: every shard keeps its holders. */
    world r = w;
    r.ids = malloc((size_t)w.s_count * 32);
    for (uint32_t s = 0; s < w.s_count; s++)
        memcpy(r.ids[s], w.ids[w.s_count - 1 - s], 32);
    uint64_t *c = place(&t, &r, w.nodes, w.n, GOSSIP_PLACEMENT_SLACK_DEFAULT, NULL);
    for (uint32_t s = 0; s < w.s_count; s++)
        assert_memory_equal(a + (size_t)s * 3, c + (size_t)(w.s_count - 1 - s) * 3, 3 * 8);
    free(a), free(b), free(c), free(r.ids);
    world_free(&w);
}

/* The same view and catalog give the same rows (primaries included), in any
 * catalog order; also where holders give way to balance primaries (S = N+1). */
static void deterministic_and_order_free(void **state)
{
    (void)state;
    uint64_t seed = test_seed(11);
    deterministic_and_order_free_at(seed, 40, 320);
    for (uint64_t k = 0; k < 20; k++)
        deterministic_and_order_free_at(seed + 100 + k, 24, 25);
}

static void balance_within_ten_percent(void **state)
{
    (void)state;
    uint64_t seed = test_seed(12);
    const uint32_t ns[] = {16, 17, 33, 64, 100, 256};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        test_env t;
        test_env_init(&t, seed + i);
        world w;
        world_make(&w, &t.rng, ns[i], 8 * ns[i]);
        gossip_placement_stats st;
        uint64_t *h = place(&t, &w, w.nodes, w.n, GOSSIP_PLACEMENT_SLACK_DEFAULT, &st);
        rows_valid(&w, h, w.nodes, w.n, 3, seed);
        double mean = 3.0 * w.s_count / w.n;
        uint32_t maxl = 0;
        for (uint32_t m = 0; m < w.n; m++) {
            uint32_t l = load_of(h, w.s_count, 3, w.nodes[m]);
            maxl = l > maxl ? l : maxl;
        }
        assert_int_equal(maxl, st.max_load);
        if (maxl > 1.10 * mean)
            fail_msg("seed %llu N %u: max load %u > 1.1 * mean %.2f", (unsigned long long)seed, w.n,
                     maxl, mean);
        assert_int_equal(st.overflow, 0);
        free(h);
        world_free(&w);
    }
}

static void plain_rendezvous_moves_minimum(void **state)
{
    (void)state;
    uint64_t seed = test_seed(13);
    test_env t;
    test_env_init(&t, seed);
    world w;
    world_make(&w, &t.rng, 32, 256);
    uint64_t joiner = model_rng_u64(&t.rng) | 1;
    uint64_t plus[33];
    memcpy(plus, w.nodes, 32 * 8);
    plus[32] = joiner;
    qsort(plus, 33, 8, cmp_u64);
    uint64_t *a = place(&t, &w, w.nodes, 32, GOSSIP_PLACEMENT_UNBOUNDED, NULL);
    uint64_t *b = place(&t, &w, plus, 33, GOSSIP_PLACEMENT_UNBOUNDED, NULL);
    /* Every replica that moved went to the joiner; each row changed by at
     * most one entry; the survivors keep their relative rank. */
    for (uint32_t s = 0; s < w.s_count; s++) {
        const uint64_t *ra = a + s * 3, *rb = b + s * 3;
        uint32_t changed = 0;
        for (uint32_t j = 0; j < 3; j++)
            if (!row_has(ra, 3, rb[j])) {
                assert_true(rb[j] == joiner);
                changed++;
            }
        assert_true(changed <= 1);
    }
    assert_int_equal(moved(a, b, w.s_count, 3), load_of(b, w.s_count, 3, joiner));
    free(a), free(b);
    world_free(&w);
}

/* Bounded-load variant: a join or leave moves at most 3x the minimum (the
 * joiner's fair share S*r/(N+1), the leaver's load); measured figures in the docs. */
static void bounded_movement_near_minimal(void **state)
{
    (void)state;
    uint64_t seed = test_seed(14);
    const uint32_t ns[] = {16, 64, 256};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        test_env t;
        test_env_init(&t, seed + i);
        world w;
        uint32_t n = ns[i];
        world_make(&w, &t.rng, n, 8 * n);
        uint64_t joiner = model_rng_u64(&t.rng) | 1;
        uint64_t *plus = malloc((n + 1) * 8);
        memcpy(plus, w.nodes, n * 8);
        plus[n] = joiner;
        qsort(plus, n + 1, 8, cmp_u64);
        uint64_t *a = place(&t, &w, w.nodes, n, GOSSIP_PLACEMENT_SLACK_DEFAULT, NULL);
        uint64_t *b = place(&t, &w, plus, n + 1, GOSSIP_PLACEMENT_SLACK_DEFAULT, NULL);
        /* Join minimum: the joiner's fair share S*r/(N+1) (a balanced
         * placement must give the joiner about that much). */
        uint32_t mv = moved(a, b, w.s_count, 3), need = 3 * w.s_count / (n + 1);
        if (mv > 3 * need)
            fail_msg("seed %llu N %u join: moved %u, minimum %u", (unsigned long long)seed, n, mv,
                     need);
        /* Leave: the member at index n/2 leaves. */
        uint64_t *minus = malloc(n * 8);
        uint32_t k = 0;
        for (uint32_t m = 0; m < n; m++)
            if (m != n / 2)
                minus[k++] = w.nodes[m];
        uint64_t *c = place(&t, &w, minus, n - 1, GOSSIP_PLACEMENT_SLACK_DEFAULT, NULL);
        mv = moved(a, c, w.s_count, 3);
        need = load_of(a, w.s_count, 3, w.nodes[n / 2]);
        if (mv > 3 * need)
            fail_msg("seed %llu N %u leave: moved %u, minimum %u", (unsigned long long)seed, n, mv,
                     need);
        /* The leaver's shards: the new primary was a holder before for
         * nearly all (exact in plain rendezvous; a chain may displace a few). */
        uint32_t led = 0, kept = 0;
        for (uint32_t s = 0; s < w.s_count; s++)
            if (a[s * 3] == w.nodes[n / 2]) {
                led++;
                kept += row_has(a + s * 3, 3, c[s * 3]);
            }
        if (led - kept > 2 && led - kept > led / 5)
            fail_msg("seed %llu N %u: new primary was a holder for %u of %u",
                     (unsigned long long)seed, n, kept, led);
        free(a), free(b), free(c), free(plus), free(minus);
        world_free(&w);
    }
}

static void small_views_hold_everything(void **state)
{
    (void)state;
    test_env t;
    test_env_init(&t, test_seed(15));
    world w;
    world_make(&w, &t.rng, 2, 10);
    gossip_placement_stats st;
    uint64_t *h = place(&t, &w, w.nodes, 2, GOSSIP_PLACEMENT_SLACK_DEFAULT, &st);
    assert_int_equal(st.width, 2);
    for (uint32_t s = 0; s < 10; s++) {
        assert_true(row_has(h + s * 2, 2, w.nodes[0]));
        assert_true(row_has(h + s * 2, 2, w.nodes[1]));
    }
    free(h);
    world_free(&w);
}

static void rejects_bad_arguments_and_survives_oom(void **state)
{
    (void)state;
    test_env t;
    test_env_init(&t, test_seed(16));
    world w;
    world_make(&w, &t.rng, 20, 50);
    gossip_placement_config cfg;
    gossip_placement_config_default(&cfg);
    uint64_t h[150];
    gossip_view v = {1, 20, w.nodes};
    const uint8_t(*ids)[32] = (const uint8_t(*)[32])w.ids;
    cfg.r = 0;
    assert_int_equal(gossip_placement_compute(&t.env, &cfg, ids, 50, &v, h, NULL), GOSSIP_EINVAL);
    cfg.r = GOSSIP_PLACEMENT_R_MAX + 1;
    assert_int_equal(gossip_placement_compute(&t.env, &cfg, ids, 50, &v, h, NULL), GOSSIP_EINVAL);
    cfg.r = 3;
    assert_int_equal(gossip_placement_compute(&t.env, &cfg, ids, 0, &v, h, NULL), GOSSIP_EINVAL);
    uint64_t unsorted[3] = {5, 4, 9};
    gossip_view bad = {1, 3, unsorted};
    assert_int_equal(gossip_placement_compute(&t.env, &cfg, ids, 50, &bad, h, NULL), GOSSIP_EINVAL);
    uint64_t zero[2] = {0, 4};
    bad.ids = zero;
    bad.n = 2;
    assert_int_equal(gossip_placement_compute(&t.env, &cfg, ids, 50, &bad, h, NULL), GOSSIP_EINVAL);
    uint64_t want[150];
    assert_int_equal(gossip_placement_compute(&t.env, &cfg, ids, 50, &v, want, NULL), GOSSIP_OK);
    for (long k = 1;; k++) {
        t.alloc.count = 0;
        t.alloc.fail_at = k;
        int rc = gossip_placement_compute(&t.env, &cfg, ids, 50, &v, h, NULL);
        assert_int_equal(t.alloc.live, 0);
        if (rc == GOSSIP_OK) {
            assert_memory_equal(h, want, sizeof want);
            break;
        }
        assert_int_equal(rc, GOSSIP_ENOMEM);
    }
    world_free(&w);
}

/* ---- balanced primaries -------------------------------------------------- */

static uint64_t *place_cfg(test_env *t, const world *w, const uint64_t *nodes, uint32_t n,
                           uint32_t r, uint32_t primaries, gossip_placement_stats *st)
{
    gossip_placement_config cfg;
    gossip_placement_config_default(&cfg);
    cfg.r = r;
    cfg.primaries = primaries;
    uint32_t width = gossip_placement_width(r, n);
    uint64_t *h = malloc((size_t)w->s_count * width * sizeof *h);
    gossip_view v = {1, n, nodes};
    assert_int_equal(gossip_placement_compute(&t->env, &cfg, (const uint8_t(*)[32])w->ids,
                                              w->s_count, &v, h, st),
                     GOSSIP_OK);
    assert_int_equal(t->alloc.live, 0);
    return h;
}

/* Every member is primary for floor(S/N) .. ceil(S/N) shards; the stats
 * agree with a count of the rows. */
static void check_primary_bounds(const world *w, const uint64_t *h, const uint64_t *nodes,
                                 uint32_t n, uint32_t width, const gossip_placement_stats *st,
                                 uint64_t seed, uint32_t step)
{
    uint32_t *counts = malloc(n * sizeof *counts);
    primary_counts(h, w->s_count, width, nodes, n, counts);
    uint32_t lo = w->s_count / n, hi = (w->s_count + n - 1) / n, pmin = UINT32_MAX, pmax = 0;
    for (uint32_t m = 0; m < n; m++) {
        if (counts[m] < lo || counts[m] > hi)
            fail_msg("seed %llu step %u S %u N %u r %u: member %u is primary for %u, bounds %u..%u",
                     (unsigned long long)seed, step, w->s_count, n, width, m, counts[m], lo, hi);
        pmin = counts[m] < pmin ? counts[m] : pmin;
        pmax = counts[m] > pmax ? counts[m] : pmax;
    }
    assert_int_equal(st->primary_min, pmin);
    assert_int_equal(st->primary_max, pmax);
    uint32_t lo2, hi2;
    gossip_placement_primary_bounds(w->s_count, n, &lo2, &hi2);
    assert_int_equal(lo2, lo);
    assert_int_equal(hi2, hi);
    free(counts);
}

/* Random membership walks (joins, leaves, crashes of up to three at once:
 * to placement a crash is the same view change as a leave) over a pool of
 * 2N ids; after every change the primaries are within the bounds, for
 * S = 64 / N = 24, S = N, S < N, S = N + 1 (where some members hold
 * nothing) and S = 8N, with r = 1, 2, 3. */
static void primaries_within_bounds_through_churn(void **state)
{
    (void)state;
    uint64_t seed = test_seed(17);
    const uint32_t cases[][2] = {{64, 24}, {24, 24}, {10, 24}, {25, 24}, {192, 24}, {7, 3}};
    uint32_t adopted = 0, augmented = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (uint32_t r = 1; r <= 3; r++) {
            test_env t;
            test_env_init(&t, seed + c * 10 + r);
            uint32_t n0 = cases[c][1];
            world w;
            world_make(&w, &t.rng, 2 * n0, cases[c][0]); /* w.nodes: the pool */
            uint8_t *live = calloc(2 * n0, 1);
            for (uint32_t i = 0; i < n0; i++)
                live[i] = 1;
            uint64_t *view = malloc(2 * n0 * sizeof *view);
            for (uint32_t step = 0; step < 60; step++) {
                uint32_t n = 0;
                for (uint32_t i = 0; i < 2 * n0; i++)
                    if (live[i])
                        view[n++] = w.nodes[i];
                gossip_placement_stats st;
                uint64_t *h = place_cfg(&t, &w, view, n, r, GOSSIP_PLACEMENT_PRIMARY_BALANCED, &st);
                uint32_t width = gossip_placement_width(r, n);
                rows_valid(&w, h, view, n, width, seed);
                check_primary_bounds(&w, h, view, n, width, &st, seed, step);
                adopted += st.adopted;
                augmented += st.augmented;
                free(h);
                /* next view: 1-3 members join or leave/crash (never empty) */
                uint32_t k = 1 + (uint32_t)model_rng_below(&t.rng, 3);
                int join = n <= 3 || model_rng_below(&t.rng, 2);
                for (uint32_t q = 0; q < k; q++)
                    live[model_rng_below(&t.rng, 2 * n0)] = (uint8_t)join;
            }
            free(view), free(live);
            world_free(&w);
        }
    /* The walks reached both repair steps: augmenting paths and holders
     * giving way (S = N + 1, r = 1). */
    assert_true(augmented > 0);
    assert_true(adopted > 0);
}

/* Maximum flow of the bound network (source -> shard 1 -> holder 1 ->
 * sink L, holder -> extra 1, extra -> sink S mod N): the most shards any
 * assignment within the bounds can give a primary among their holders.
 * Plain augmenting paths by DFS on a capacity matrix: an independent check
 * of the placement's own search. */
#define MF_MAX 64
static int mf_dfs(int (*cap)[MF_MAX], int nv, int u, int sink, uint8_t *seen)
{
    if (u == sink)
        return 1;
    seen[u] = 1;
    for (int v = 0; v < nv; v++)
        if (cap[u][v] > 0 && !seen[v] && mf_dfs(cap, nv, v, sink, seen)) {
            cap[u][v]--;
            cap[v][u]++;
            return 1;
        }
    return 0;
}

static uint32_t max_flow(const uint64_t *h, uint32_t s_count, uint32_t width, const uint64_t *nodes,
                         uint32_t n)
{
    static int cap[MF_MAX][MF_MAX];
    int nv = (int)(s_count + n + 3), src = 0, extra = (int)(s_count + n + 1), sink = extra + 1;
    assert_true(nv <= MF_MAX);
    memset(cap, 0, sizeof cap);
    gossip_view v = {1, n, nodes};
    for (uint32_t s = 0; s < s_count; s++) {
        cap[src][1 + s] = 1;
        for (uint32_t j = 0; j < width; j++)
            cap[1 + s][1 + s_count + gossip_placement_view_find(&v, h[s * width + j])] = 1;
    }
    for (uint32_t m = 0; m < n; m++) {
        cap[1 + s_count + m][sink] = (int)(s_count / n);
        cap[1 + s_count + m][extra] = 1;
    }
    cap[extra][sink] = (int)(s_count % n);
    uint32_t flow = 0;
    uint8_t seen[MF_MAX];
    for (;;) {
        memset(seen, 0, sizeof seen);
        if (!mf_dfs(cap, nv, src, sink, seen))
            return flow;
        flow++;
    }
}

/* The search is exact: holders give way (adopted) exactly as often as no
 * assignment within the bounds exists among the bounded-load holders, and
 * otherwise the holder sets are those of the ranked mode. */
static void primaries_exact_against_max_flow(void **state)
{
    (void)state;
    uint64_t seed = test_seed(18);
    uint32_t infeasible = 0;
    for (uint32_t k = 0; k < 400; k++) {
        test_env t;
        test_env_init(&t, seed + k);
        uint32_t n = 2 + (uint32_t)model_rng_below(&t.rng, 12);
        uint32_t s_count = 1 + (uint32_t)model_rng_below(&t.rng, 3 * n);
        uint32_t r = 1 + (uint32_t)model_rng_below(&t.rng, 3);
        if (s_count + n + 3 > MF_MAX)
            continue;
        world w;
        world_make(&w, &t.rng, n, s_count);
        uint32_t width = gossip_placement_width(r, n);
        gossip_placement_stats sr, sb;
        uint64_t *hr = place_cfg(&t, &w, w.nodes, n, r, GOSSIP_PLACEMENT_PRIMARY_RANKED, &sr);
        uint64_t *hb = place_cfg(&t, &w, w.nodes, n, r, GOSSIP_PLACEMENT_PRIMARY_BALANCED, &sb);
        uint32_t flow = max_flow(hr, s_count, width, w.nodes, n);
        if (sb.adopted != s_count - flow)
            fail_msg("seed %llu S %u N %u r %u: %u adopted, max flow %u",
                     (unsigned long long)(seed + k), s_count, n, r, sb.adopted, flow);
        infeasible += flow < s_count;
        check_primary_bounds(&w, hb, w.nodes, n, width, &sb, seed + k, 0);
        uint32_t differ = 0;
        for (uint32_t s = 0; s < s_count; s++) {
            uint32_t miss = 0;
            for (uint32_t j = 0; j < width; j++)
                miss += !row_has(hr + s * width, width, hb[s * width + j]);
            assert_true(miss <= 1); /* at most one holder gives way per shard */
            differ += miss;
        }
        assert_int_equal(differ, sb.adopted);
        /* ranked mode: rows by rank, the primary is the first-ranked holder */
        rows_valid(&w, hr, w.nodes, n, width, seed + k);
        for (uint32_t s = 0; s < s_count && width > 1; s++)
            assert_true(gossip_placement_weight(w.ids[s], hr[s * width]) >
                        gossip_placement_weight(w.ids[s], hr[s * width + 1]));
        free(hr), free(hb);
        world_free(&w);
    }
    assert_true(infeasible > 0); /* the fallback was exercised */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(deterministic_and_order_free),
        cmocka_unit_test(balance_within_ten_percent),
        cmocka_unit_test(plain_rendezvous_moves_minimum),
        cmocka_unit_test(bounded_movement_near_minimal),
        cmocka_unit_test(small_views_hold_everything),
        cmocka_unit_test(rejects_bad_arguments_and_survives_oom),
        cmocka_unit_test(primaries_within_bounds_through_churn),
        cmocka_unit_test(primaries_exact_against_max_flow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
