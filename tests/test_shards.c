/* Shard replication on the simulator's engine (sim/engine.h): N in-memory
 * replicators exchange frames over its network model (10 MB/s upload per
 * agent, shared max-min by the links of a sender, each link a FIFO stream,
 * 500 us latency); tests kill holders, join agents, corrupt chunks in
 * flight and data at rest, and check that no shard is lost, replication
 * returns to r within a bound, and primaries are unique. */
#include "tests/harness.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/shards.h"
#include "model/shardfile.h"
#include "sim/engine.h"

enum { EV_VIEW = SIM_EV_USER };

#define LATENCY_US      500u
#define BW_BYTES_PER_US 10u /* 10 MB/s upload per agent */

typedef struct dnode {
    uint64_t id;
    int alive;  /* the test clears it to crash the agent */
    int member; /* in the views we hand out */
    gossip_shards *sh;
    gossip_store store;
} dnode;

typedef struct driver {
    test_env t;
    uint64_t seed;
    sim_engine *e;
    dnode *nodes;
    uint32_t n, cap;
    uint64_t now; /* the engine's clock after the last run */
    uint64_t epoch;
    uint8_t (*ids)[32];
    uint8_t **content;
    uint64_t *sizes;
    uint32_t s_count;
    gossip_shards_config cfg;
    uint32_t store_max;    /* shards per agent's store */
    uint32_t corrupt_data; /* corrupt this many DATA chunks in flight */
    uint32_t corrupted;
    uint64_t **views; /* id lists of views in flight (EV_VIEW), freed at the end */
    uint32_t nviews;
} driver;

static uint64_t node_id(uint32_t i)
{
    uint64_t z = (uint64_t)i * 0x9e3779b97f4a7c15ULL + 12345;
    z = (z ^ (z >> 31)) * 0xbf58476d1ce4e5b9ULL;
    return (z ^ (z >> 29)) | 1;
}

static long index_of(const driver *d, uint64_t id)
{
    for (uint32_t i = 0; i < d->n; i++)
        if (d->nodes[i].id == id)
            return i;
    return -1;
}

static int is_data_chunk(const uint8_t *f, size_t len)
{
    return len > GOSSIP_HEADER_SIZE + GOSSIP_SHARDS_DATA_FIXED && f[3] == GOSSIP_MSG_SHARD_CHUNK &&
           f[GOSSIP_HEADER_SIZE + 36] == GOSSIP_SHARD_DATA;
}

/* Frames in flight: corrupt the next corrupt_data DATA chunks. */
static int corrupt_filter(void *ctx, uint32_t from, uint32_t to, uint8_t *f, size_t len)
{
    driver *d = ctx;
    (void)from;
    (void)to;
    if (d->corrupt_data && is_data_chunk(f, len)) {
        f[len - 1] ^= 0x5A;
        d->corrupt_data--;
        d->corrupted++;
    }
    return 0;
}

/* An agent the test marked dead stops on the engine too. */
static void sync_alive(driver *d)
{
    for (uint32_t i = 0; i < d->n; i++)
        if (!d->nodes[i].alive && sim_engine_alive(d->e, i))
            sim_engine_down(d->e, i);
}

static void flush(driver *d, uint32_t i)
{
    sync_alive(d);
    sim_engine_drain(d->e, i);
}

/* EV_VIEW: a = epoch, b = index of the id list, ptr = its length. */
static void driver_event(void *ctx, const sim_event *ev)
{
    driver *d = ctx;
    dnode *x = &d->nodes[ev->agent];
    if (ev->kind != EV_VIEW || !x->alive)
        return;
    gossip_view v = {ev->a, (uint32_t)(uintptr_t)ev->ptr, d->views[ev->b]};
    int rc = gossip_shards_set_view(x->sh, &v, sim_engine_now(d->e));
    assert_true(rc == GOSSIP_OK || rc == GOSSIP_ESTALE);
    sim_engine_drain(d->e, ev->agent);
}

/* The view (epoch, ids[0..k)) reaches agent i at time t. */
static void view_at(driver *d, uint32_t i, uint64_t t, uint64_t epoch, const uint64_t *ids,
                    uint32_t k)
{
    uint64_t **nv = realloc(d->views, (d->nviews + 1) * sizeof *nv);
    assert_non_null(nv);
    d->views = nv;
    d->views[d->nviews] = malloc((k ? k : 1) * sizeof *ids);
    memcpy(d->views[d->nviews], ids, k * sizeof *ids);
    sim_engine_schedule(d->e, t, EV_VIEW, i, epoch, d->nviews++, (void *)(uintptr_t)k);
    assert_int_equal(sim_engine_failed(d->e), 0);
}

/* Process events up to time `until`. */
static void run_until(driver *d, uint64_t until)
{
    sync_alive(d);
    assert_true(sim_engine_run_until(d->e, until, NULL, NULL) >= 0);
    assert_int_equal(sim_engine_failed(d->e), 0);
    d->now = sim_engine_now(d->e);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Hand every live agent the view of the current members. */
static void view_all(driver *d)
{
    uint64_t *ids = malloc(d->n * sizeof *ids);
    uint32_t k = 0;
    for (uint32_t i = 0; i < d->n; i++)
        if (d->nodes[i].member)
            ids[k++] = d->nodes[i].id;
    qsort(ids, k, sizeof *ids, cmp_u64);
    gossip_view v = {++d->epoch, k, ids};
    for (uint32_t i = 0; i < d->n; i++)
        if (d->nodes[i].alive) {
            assert_int_equal(gossip_shards_set_view(d->nodes[i].sh, &v, d->now), GOSSIP_OK);
            flush(d, i);
        }
    free(ids);
}

static void node_add(driver *d)
{
    assert_true(d->n < d->cap);
    uint32_t i = d->n++;
    dnode *x = &d->nodes[i];
    memset(x, 0, sizeof *x);
    x->id = node_id(i);
    x->alive = x->member = 1;
    assert_int_equal(
        gossip_store_mem_create(&x->store, &d->t.env, d->store_max, d->cfg.shard_bytes_max),
        GOSSIP_OK);
    gossip_shards_config c = d->cfg;
    c.self = x->id;
    c.store = x->store;
    assert_int_equal(gossip_shards_create(&x->sh, &d->t.env, &c), GOSSIP_OK);
    assert_int_equal(sim_engine_set_id(d->e, i, x->id), SIM_ENGINE_OK);
    sim_engine_set_node(d->e, i, &sim_ops_shards, x->sh);
    sim_engine_up(d->e, i);
}

static void store_put(driver *d, uint32_t i, uint32_t s)
{
    const gossip_store *st = &d->nodes[i].store;
    assert_int_equal(st->ops->begin(st->ctx, d->ids[s], d->sizes[s]), GOSSIP_OK);
    assert_int_equal(st->ops->write(st->ctx, d->ids[s], 0, d->content[s], d->sizes[s]), GOSSIP_OK);
    assert_int_equal(st->ops->commit(st->ctx, d->ids[s]), GOSSIP_OK);
}

/* placed = 1: put each shard on its placement holders of the first view
 * (an already replicated cluster); placed = 0: everything on agent 0. */
static void driver_init(driver *d, uint64_t seed, uint32_t n, uint32_t cap, uint32_t s_count,
                        uint64_t shard_max, uint32_t chunk, int placed)
{
    memset(d, 0, sizeof *d);
    d->seed = seed;
    test_env_init(&d->t, seed);
    sim_net_config nc = {.agents = cap,
                         .seed = seed,
                         .up_bps = BW_BYTES_PER_US * 8e6,
                         .latency_ms = LATENCY_US / 1000.0};
    sim_engine_config ec = {.agents = cap,
                            .seed = seed,
                            .mode = SIM_MODE_TIMED,
                            .net = &nc,
                            .hooks = {.ctx = d, .event = driver_event, .filter = corrupt_filter}};
    assert_int_equal(sim_engine_create(&d->e, &ec), SIM_ENGINE_OK);
    d->s_count = s_count;
    d->ids = malloc((size_t)s_count * 32);
    d->content = malloc(s_count * sizeof *d->content);
    d->sizes = malloc(s_count * sizeof *d->sizes);
    for (uint32_t s = 0; s < s_count; s++) {
        d->sizes[s] = 1 + model_rng_below(&d->t.rng, shard_max);
        d->content[s] = malloc(d->sizes[s]);
        for (uint64_t b = 0; b < d->sizes[s]; b++)
            d->content[s][b] = (uint8_t)model_rng_u64(&d->t.rng);
        crypto_generichash(d->ids[s], 32, d->content[s], d->sizes[s], NULL, 0);
    }
    gossip_shards_config_default(&d->cfg);
    d->cfg.ids = (const uint8_t(*)[32])d->ids;
    d->cfg.n_shards = s_count;
    d->cfg.chunk_bytes = chunk;
    d->cfg.shard_bytes_max = shard_max;
    d->cfg.timeout_us = 200000;
    d->cfg.backoff_us = 100000;
    d->cfg.probe_us = 100000;
    d->cap = cap;
    /* Room for an agent's share (at most 1.1x the mean) plus surplus
     * replicas awaiting their drop: 4x the mean; the seeder holds all. */
    d->store_max = placed ? 4 * (3 * s_count / n + 8) : s_count + 8;
    if (d->store_max > s_count + 8)
        d->store_max = s_count + 8;
    d->nodes = calloc(cap, sizeof *d->nodes);
    d->n = 0;
    for (uint32_t i = 0; i < n; i++)
        node_add(d);
    if (placed) {
        uint64_t *ids = malloc(n * sizeof *ids);
        for (uint32_t i = 0; i < n; i++)
            ids[i] = d->nodes[i].id;
        qsort(ids, n, sizeof *ids, cmp_u64);
        gossip_view v = {1, n, ids};
        uint32_t w = gossip_placement_width(d->cfg.placement.r, n);
        uint64_t *h = malloc((size_t)s_count * w * sizeof *h);
        assert_int_equal(gossip_placement_compute(&d->t.env, &d->cfg.placement,
                                                  (const uint8_t(*)[32])d->ids, s_count, &v, h,
                                                  NULL),
                         GOSSIP_OK);
        for (uint32_t s = 0; s < s_count; s++)
            for (uint32_t j = 0; j < w; j++)
                store_put(d, (uint32_t)index_of(d, h[(size_t)s * w + j]), s);
        free(h);
        free(ids);
        /* Recreate the replicators so they see their stores' content. */
        for (uint32_t i = 0; i < n; i++) {
            gossip_shards_destroy(d->nodes[i].sh);
            gossip_shards_config c = d->cfg;
            c.self = d->nodes[i].id;
            c.store = d->nodes[i].store;
            assert_int_equal(gossip_shards_create(&d->nodes[i].sh, &d->t.env, &c), GOSSIP_OK);
            sim_engine_set_node(d->e, i, &sim_ops_shards, d->nodes[i].sh);
        }
    } else {
        for (uint32_t s = 0; s < s_count; s++)
            store_put(d, 0, s);
        gossip_shards_destroy(d->nodes[0].sh);
        gossip_shards_config c = d->cfg;
        c.self = d->nodes[0].id;
        c.store = d->nodes[0].store;
        assert_int_equal(gossip_shards_create(&d->nodes[0].sh, &d->t.env, &c), GOSSIP_OK);
        sim_engine_set_node(d->e, 0, &sim_ops_shards, d->nodes[0].sh);
    }
    view_all(d);
}

static void driver_free(driver *d)
{
    sim_engine_destroy(d->e);
    for (uint32_t k = 0; k < d->nviews; k++)
        free(d->views[k]);
    free(d->views);
    for (uint32_t i = 0; i < d->n; i++) {
        gossip_shards_destroy(d->nodes[i].sh);
        gossip_store_mem_destroy(&d->nodes[i].store);
    }
    assert_int_equal(d->t.alloc.live, 0);
    for (uint32_t s = 0; s < d->s_count; s++)
        free(d->content[s]);
    free(d->content);
    free(d->sizes);
    free(d->ids);
    free(d->nodes);
}

/* Live stores, for the census. */
static uint32_t census(driver *d, uint32_t *counts)
{
    gossip_store *stores = malloc(d->n * sizeof *stores);
    uint32_t k = 0;
    for (uint32_t i = 0; i < d->n; i++)
        if (d->nodes[i].alive)
            stores[k++] = d->nodes[i].store;
    uint32_t lost =
        gossip_shards_census((const uint8_t(*)[32])d->ids, d->s_count, stores, k, counts);
    free(stores);
    return lost;
}

/* 1 when every live agent holds every shard placement assigns it. */
static int converged(const driver *d)
{
    for (uint32_t i = 0; i < d->n; i++)
        if (d->nodes[i].alive && gossip_shards_missing_count(d->nodes[i].sh))
            return 0;
    return 1;
}

/* Run in steps of step_us until converged; returns the time it took, or
 * fails the test after limit_us. Checks that no shard is lost meanwhile. */
static uint64_t run_to_convergence(driver *d, uint64_t step_us, uint64_t limit_us)
{
    uint64_t start = d->now;
    uint32_t *counts = malloc(d->s_count * sizeof *counts);
    while (!converged(d)) {
        if (d->now - start > limit_us)
            fail_msg("seed %llu: not converged after %llu us", (unsigned long long)d->seed,
                     (unsigned long long)limit_us);
        run_until(d, d->now + step_us);
        if (census(d, counts))
            fail_msg("seed %llu: a shard was lost at t=%llu", (unsigned long long)d->seed,
                     (unsigned long long)d->now);
    }
    free(counts);
    return d->now - start;
}

/* Every shard has exactly one live primary, it holds the shard, and the
 * primaries agree with the holders table. */
static void check_primaries(driver *d, int must_hold)
{
    uint32_t *prim = calloc(d->s_count, sizeof *prim);
    for (uint32_t i = 0; i < d->n; i++) {
        if (!d->nodes[i].alive)
            continue;
        for (uint32_t s = 0; s < d->s_count; s++) {
            gossip_shard_status st;
            assert_int_equal(gossip_shards_status(d->nodes[i].sh, s, &st), GOSSIP_OK);
            if (st.primary) {
                prim[s]++;
                assert_true(st.primary_id == d->nodes[i].id);
                if (must_hold)
                    assert_true(st.held);
            }
        }
    }
    for (uint32_t s = 0; s < d->s_count; s++)
        if (prim[s] != 1)
            fail_msg("seed %llu: shard %u has %u primaries", (unsigned long long)d->seed, s,
                     prim[s]);
    free(prim);
}

/* Content of every complete replica equals the original bytes. */
static void check_content(driver *d)
{
    for (uint32_t i = 0; i < d->n; i++)
        for (uint32_t s = 0; s < d->s_count; s++) {
            uint64_t size;
            uint8_t *b = gossip_store_mem_bytes(&d->nodes[i].store, d->ids[s], &size);
            if (b) {
                assert_true(size == d->sizes[s]);
                assert_memory_equal(b, d->content[s], size);
            }
        }
}

static uint64_t counter_sum(driver *d, size_t offset)
{
    uint64_t k = 0;
    for (uint32_t i = 0; i < d->n; i++)
        if (d->nodes[i].sh)
            k += *(const uint64_t *)((const char *)gossip_shards_counters_get(d->nodes[i].sh) +
                                     offset);
    return k;
}
#define SUM(d, field) counter_sum(d, offsetof(gossip_shards_counters, field))

/* Run until every surplus replica has been dropped (counts == width). */
static void run_until_exact(driver *d, uint64_t limit_us)
{
    uint32_t *counts = malloc(d->s_count * sizeof *counts);
    uint64_t start = d->now;
    uint32_t live = 0;
    for (uint32_t i = 0; i < d->n; i++)
        live += d->nodes[i].member;
    uint32_t w = gossip_placement_width(d->cfg.placement.r, live);
    for (;;) {
        assert_int_equal(census(d, counts), 0);
        uint32_t off = 0;
        for (uint32_t s = 0; s < d->s_count; s++)
            off += counts[s] != w;
        if (!off)
            break;
        if (d->now - start > limit_us)
            fail_msg("seed %llu: %u shards not at exactly %u replicas", (unsigned long long)d->seed,
                     off, w);
        run_until(d, d->now + 50000);
    }
    free(counts);
}

/* ------------------------------------------------------------------------ */

/* Views that arrive at different agents at different times (up to 30 ms
 * apart) while agents die and join: no shard is ever lost, and once every
 * agent has the last view the cluster converges to exactly r replicas. */
static void churn_with_staggered_views(void **state)
{
    (void)state;
    uint64_t seed = test_seed(18);
    driver d;
    driver_init(&d, seed, 24, 40, 192, 3000, 1024, 1);
    uint32_t *counts = malloc(d.s_count * sizeof *counts);
    for (uint32_t step = 0; step < 12; step++) {
        uint32_t what = (uint32_t)model_rng_below(&d.t.rng, 3);
        if (what == 0 && d.n < d.cap) {
            node_add(&d);
        } else {
            /* kill one or (what == 2) two random members */
            for (uint32_t k = 0; k < (what == 2 ? 2u : 1u); k++) {
                uint32_t live = 0;
                for (uint32_t i = 0; i < d.n; i++)
                    live += d.nodes[i].member;
                uint32_t pick = (uint32_t)model_rng_below(&d.t.rng, live);
                for (uint32_t i = 0; i < d.n; i++)
                    if (d.nodes[i].member && pick-- == 0) {
                        d.nodes[i].alive = d.nodes[i].member = 0;
                        break;
                    }
            }
        }
        /* The new view reaches each live agent after 0..30 ms. */
        uint32_t k = 0;
        uint64_t *ids = malloc(d.n * sizeof *ids);
        for (uint32_t i = 0; i < d.n; i++)
            if (d.nodes[i].member)
                ids[k++] = d.nodes[i].id;
        qsort(ids, k, sizeof *ids, cmp_u64);
        d.epoch++;
        for (uint32_t i = 0; i < d.n; i++) {
            if (!d.nodes[i].alive)
                continue;
            view_at(&d, i, d.now + model_rng_below(&d.t.rng, 30000), d.epoch, ids, k);
        }
        free(ids);
        /* 300 ms between changes, checking every millisecond. */
        for (uint32_t ms = 0; ms < 300; ms++) {
            run_until(&d, d.now + 1000);
            if (census(&d, counts))
                fail_msg("seed %llu step %u: a shard was lost at t=%llu", (unsigned long long)seed,
                         step, (unsigned long long)d.now);
        }
    }
    free(counts);
    run_to_convergence(&d, 1000, 30000000);
    run_until_exact(&d, 30000000);
    check_primaries(&d, 1);
    check_content(&d);
    driver_free(&d);
}

static void bootstrap_from_one_seeder(void **state)
{
    (void)state;
    driver d;
    driver_init(&d, test_seed(21), 16, 16, 128, 3000, 1024, 0);
    run_to_convergence(&d, 10000, 60000000);
    run_until_exact(&d, 30000000);
    check_primaries(&d, 1);
    check_content(&d);
    assert_int_equal(SUM(&d, chunks_bad), 0);
    assert_int_equal(SUM(&d, whole_bad), 0);
    /* The seeder kept only its own share after the others confirmed. */
    assert_true(SUM(&d, dropped) > 0);
    uint32_t assigned = 0;
    for (uint32_t s = 0; s < 128; s++) {
        gossip_shard_status st;
        assert_int_equal(gossip_shards_status(d.nodes[0].sh, s, &st), GOSSIP_OK);
        assigned += st.assigned;
        assert_int_equal(st.held, st.assigned);
    }
    assert_int_equal(gossip_shards_held_count(d.nodes[0].sh), assigned);
    assert_int_equal(SUM(&d, dropped), 128 - assigned);
    driver_free(&d);
}

/* Kill 2 holders of a shard (r = 3), repeatedly: no shard is lost, and
 * replication is back to r within the bound documented in
 * docs/SHARDS_REPLICATION.md. */
static void kill_two_holders(uint32_t n, uint32_t rounds, uint64_t seed, uint64_t shard_max)
{
    driver d;
    driver_init(&d, seed, n, n, 8 * n, shard_max, 1024, 1);
    check_primaries(&d, 1);
    for (uint32_t k = 0; k < rounds; k++) {
        uint32_t s = (uint32_t)model_rng_below(&d.t.rng, d.s_count);
        uint32_t w;
        uint32_t holder0 = 0;
        for (uint32_t i = 0; i < d.n; i++)
            if (d.nodes[i].alive) {
                holder0 = i;
                break;
            }
        const uint64_t *h = gossip_shards_holders(d.nodes[holder0].sh, s, &w);
        assert_true(h && w == 3);
        uint32_t pick = (uint32_t)model_rng_below(&d.t.rng, 3);
        uint64_t victims[2] = {h[pick], h[(pick + 1) % 3]};
        for (int v = 0; v < 2; v++) {
            long j = index_of(&d, victims[v]);
            d.nodes[j].alive = d.nodes[j].member = 0;
        }
        view_all(&d);
        /* The bound: the most replicas any agent must fetch, M, at
         * fetch_max at a time; each fetch needs one manifest round trip plus
         * its bytes through the source's upload, shared by at most
         * fetch_max fetches from one source: per batch RTT + fetch_max *
         * (shard_max + overhead) / bw, with chunk requests pipelined. */
        uint32_t m = 0;
        for (uint32_t i = 0; i < d.n; i++)
            if (d.nodes[i].alive && gossip_shards_missing_count(d.nodes[i].sh) > m)
                m = gossip_shards_missing_count(d.nodes[i].sh);
        uint64_t rtt = 2 * LATENCY_US + 200;
        uint64_t per_batch =
            3 * rtt + (uint64_t)d.cfg.fetch_max * (shard_max + 1024) / BW_BYTES_PER_US * 2;
        uint64_t bound = ((m + d.cfg.fetch_max - 1) / d.cfg.fetch_max) * per_batch + rtt;
        uint64_t took = run_to_convergence(&d, 1000, 10 * bound + 1000000);
        print_message("N=%u round %u: %u missing at worst, back to r=3 in %llu us (bound %llu)\n",
                      n, k, m, (unsigned long long)took, (unsigned long long)bound);
        if (took > bound)
            fail_msg("seed %llu N %u: recovery took %llu us > bound %llu us",
                     (unsigned long long)seed, n, (unsigned long long)took,
                     (unsigned long long)bound);
        check_primaries(&d, 1);
    }
    run_until_exact(&d, 30000000);
    check_content(&d);
    assert_int_equal(SUM(&d, chunks_bad), 0);
    driver_free(&d);
}

static void kill_two_holders_n64(void **state)
{
    (void)state;
    kill_two_holders(64, 4, test_seed(22), 16384); /* 16 chunks: windowed */
}

static void kill_two_holders_n256(void **state)
{
    (void)state;
    kill_two_holders(256, 2, test_seed(23), 4096);
}

/* A join fetches exactly the replicas placement moves, and the old holders
 * drop exactly the replicas placement removes. */
static void join_moves_only_what_placement_moves(void **state)
{
    (void)state;
    driver d;
    uint32_t n = 32;
    driver_init(&d, test_seed(24), n, n + 1, 8 * n, 2000, 1024, 1);
    /* Placement before and after. */
    uint64_t ids[64];
    for (uint32_t i = 0; i < n + 1; i++)
        ids[i] = node_id(i);
    qsort(ids, n, sizeof *ids, cmp_u64);
    uint64_t *before = malloc((size_t)d.s_count * 3 * 8),
             *after = malloc((size_t)d.s_count * 3 * 8);
    gossip_view v0 = {1, n, ids};
    assert_int_equal(gossip_placement_compute(&d.t.env, &d.cfg.placement,
                                              (const uint8_t(*)[32])d.ids, d.s_count, &v0, before,
                                              NULL),
                     GOSSIP_OK);
    qsort(ids, n + 1, sizeof *ids, cmp_u64);
    gossip_view v1 = {2, n + 1, ids};
    assert_int_equal(gossip_placement_compute(&d.t.env, &d.cfg.placement,
                                              (const uint8_t(*)[32])d.ids, d.s_count, &v1, after,
                                              NULL),
                     GOSSIP_OK);
    uint32_t added = 0;
    for (uint32_t s = 0; s < d.s_count; s++)
        for (uint32_t j = 0; j < 3; j++) {
            int found = 0;
            for (uint32_t k = 0; k < 3; k++)
                found |= before[s * 3 + k] == after[s * 3 + j];
            added += !found;
        }
    uint64_t fetched0 = SUM(&d, fetched);
    node_add(&d);
    view_all(&d);
    run_to_convergence(&d, 1000, 30000000);
    run_until_exact(&d, 30000000);
    assert_int_equal(SUM(&d, fetched) - fetched0, added);
    assert_int_equal(SUM(&d, dropped), added); /* every added replica displaced one */
    assert_int_equal(SUM(&d, fetch_started), added);
    /* Every store now holds exactly its placement. */
    for (uint32_t s = 0; s < d.s_count; s++)
        for (uint32_t j = 0; j < 3; j++) {
            long i = index_of(&d, after[s * 3 + j]);
            assert_true(d.nodes[i].store.ops->has(d.nodes[i].store.ctx, d.ids[s]));
        }
    check_primaries(&d, 1);
    print_message("join N=%u -> %u: %u replicas moved\n", n, n + 1, added);
    free(before);
    free(after);
    driver_free(&d);
}

static void corrupted_chunk_rejected_and_refetched(void **state)
{
    (void)state;
    driver d;
    driver_init(&d, test_seed(25), 12, 12, 96, 5000, 1024, 1);
    /* Kill one agent; its replicas are refetched, 5 chunks corrupted. */
    d.corrupt_data = 5;
    d.nodes[3].alive = d.nodes[3].member = 0;
    view_all(&d);
    run_to_convergence(&d, 1000, 30000000);
    assert_int_equal(d.corrupted, 5);
    /* Every corrupted chunk that reached a current fetch was rejected (a
     * corrupted chunk still in flight after its fetch moved on is stale). */
    assert_true(SUM(&d, chunks_bad) >= 1 && SUM(&d, chunks_bad) <= 5);
    check_content(&d);
    check_primaries(&d, 1);
    driver_free(&d);
}

/* Lost shards are reported (issue 13 item 13): all three holders of some
 * shards die; the new holders ask every live member, each answers NOT_HELD,
 * and the shards are counted lost on them; shards still held somewhere are
 * not. Before, only a pending fetch showed it. */
static void lost_shards_reported(void **state)
{
    (void)state;
    driver d;
    driver_init(&d, test_seed(27), 8, 8, 32, 2000, 1024, 1);
    uint32_t w;
    const uint64_t *h = gossip_shards_holders(d.nodes[0].sh, 0, &w);
    assert_true(h && w == 3);
    uint64_t victims[3] = {h[0], h[1], h[2]};
    for (int v = 0; v < 3; v++) {
        long j = index_of(&d, victims[v]);
        d.nodes[j].alive = d.nodes[j].member = 0;
    }
    view_all(&d);
    run_until(&d, d.now + 15000000);
    uint32_t *counts = malloc(d.s_count * sizeof *counts);
    uint32_t lost = census(&d, counts);
    assert_true(lost >= 1 && counts[0] == 0);
    for (uint32_t s = 0; s < d.s_count; s++) {
        for (uint32_t i = 0; i < d.n; i++) {
            if (!d.nodes[i].alive)
                continue;
            gossip_shard_status st;
            assert_int_equal(gossip_shards_status(d.nodes[i].sh, s, &st), GOSSIP_OK);
            /* lost exactly where a holder has no copy anywhere to fetch */
            assert_int_equal(st.lost, st.assigned && counts[s] == 0);
        }
    }
    uint32_t reported = 0;
    for (uint32_t i = 0; i < d.n; i++)
        if (d.nodes[i].alive)
            reported += gossip_shards_lost_count(d.nodes[i].sh);
    assert_int_equal(reported, lost * 3); /* each lost shard has r = 3 live holders */
    free(counts);
    driver_free(&d);
}

/* A held shard damaged at rest (issue 13 item 12) is not counted as held:
 * at create it is verified and quarantined, and a shard the caller finds
 * bad later (gossip_shards_quarantine) leaves the held count; both are
 * fetched again from a good copy and counted only once verified. */
static void corrupt_shard_quarantined_and_refetched(void **state)
{
    (void)state;
    driver d;
    driver_init(&d, test_seed(28), 6, 6, 12, 2000, 1024, 1);
    uint32_t held0 = gossip_shards_held_count(d.nodes[1].sh);
    assert_true(held0 > 1);
    /* The caller found shard a unusable. */
    uint32_t a = UINT32_MAX, b = UINT32_MAX;
    for (uint32_t s = 0; s < d.s_count; s++) {
        gossip_shard_status st;
        gossip_shards_status(d.nodes[1].sh, s, &st);
        if (st.held && st.assigned)
            a == UINT32_MAX ? (void)(a = s) : (void)(b == UINT32_MAX ? b = s : 0);
    }
    assert_true(a != UINT32_MAX && b != UINT32_MAX);
    assert_int_equal(gossip_shards_quarantine(d.nodes[1].sh, a, d.now), GOSSIP_OK);
    assert_int_equal(gossip_shards_quarantine(d.nodes[1].sh, a, d.now), GOSSIP_ENOTFOUND);
    assert_int_equal(gossip_shards_held_count(d.nodes[1].sh), held0 - 1);
    assert_null(gossip_store_mem_bytes(&d.nodes[1].store, d.ids[a], NULL));
    /* Shard b damaged at rest, and the agent restarts on that store. */
    uint64_t size;
    uint8_t *bytes = gossip_store_mem_bytes(&d.nodes[1].store, d.ids[b], &size);
    bytes[size / 3] ^= 0x40;
    gossip_shards_destroy(d.nodes[1].sh);
    gossip_shards_config cfg = d.cfg;
    cfg.self = d.nodes[1].id;
    cfg.store = d.nodes[1].store;
    assert_int_equal(gossip_shards_create(&d.nodes[1].sh, &d.t.env, &cfg), GOSSIP_OK);
    sim_engine_set_node(d.e, 1, &sim_ops_shards, d.nodes[1].sh); /* the engine held the old one */
    const gossip_shards_counters *c = gossip_shards_counters_get(d.nodes[1].sh);
    assert_int_equal(c->quarantined, 1);
    gossip_shard_status st;
    gossip_shards_status(d.nodes[1].sh, b, &st);
    assert_false(st.held);
    view_all(&d);
    run_to_convergence(&d, 1000, 20000000);
    check_content(&d);
    assert_true(c->fetched >= 2);
    gossip_shards_status(d.nodes[1].sh, a, &st);
    assert_true(st.held);
    gossip_shards_status(d.nodes[1].sh, b, &st);
    assert_true(st.held);
    driver_free(&d);
}

/* A holder whose copy is corrupted at rest is caught by the holder itself
 * when asked to serve it (its content address is checked while hashing the
 * manifest): quarantined, never served, fetched again. */
static void corrupt_holder_quarantines(void **state)
{
    (void)state;
    driver d;
    driver_init(&d, test_seed(26), 10, 10, 40, 3000, 1024, 1);
    /* Agent 2 leaves. For every shard it held, corrupt at rest the copy of
     * the first surviving holder in rank order: the first source a fetcher
     * tries serves chunks that match its own (corrupt) manifest. */
    uint32_t bad_holder[40], refetch = 0;
    for (uint32_t s = 0; s < d.s_count; s++) {
        uint32_t w;
        const uint64_t *h = gossip_shards_holders(d.nodes[0].sh, s, &w);
        bad_holder[s] = UINT32_MAX;
        if (!(h[0] == d.nodes[2].id || h[1] == d.nodes[2].id || h[2] == d.nodes[2].id))
            continue;
        refetch++;
        uint64_t first = h[0] == d.nodes[2].id ? h[1] : h[0];
        bad_holder[s] = (uint32_t)index_of(&d, first);
        uint64_t size;
        uint8_t *b = gossip_store_mem_bytes(&d.nodes[bad_holder[s]].store, d.ids[s], &size);
        b[size / 2] ^= 1;
    }
    assert_true(refetch > 0);
    d.nodes[2].alive = d.nodes[2].member = 0;
    view_all(&d);
    run_to_convergence(&d, 1000, 30000000);
    /* Every replica is intact but the ones corrupted at rest. */
    for (uint32_t i = 0; i < d.n; i++) {
        for (uint32_t s = 0; s < d.s_count; s++) {
            if (bad_holder[s] == i)
                continue;
            uint64_t size;
            uint8_t *b = gossip_store_mem_bytes(&d.nodes[i].store, d.ids[s], &size);
            if (b)
                assert_memory_equal(b, d.content[s], size);
        }
    }
    /* The corrupt copies were caught by their holders when asked to serve
     * them (the whole content address is checked while hashing the
     * manifest): quarantined, answered NOT_HELD, never served, so no
     * fetcher saw a bad chunk or a bad whole. */
    assert_true(SUM(&d, quarantined) > 0);
    assert_true(SUM(&d, quarantined) <= refetch);
    assert_int_equal(SUM(&d, whole_bad), 0);
    assert_int_equal(SUM(&d, chunks_bad), 0);
    driver_free(&d);
}

/* A source that dies without a view change: the fetcher times out and
 * moves on. */
static void silent_source_times_out(void **state)
{
    (void)state;
    driver d;
    driver_init(&d, test_seed(27), 8, 8, 32, 3000, 1024, 1);
    /* Shard 0's first holder leaves the view (its replicas must move)
     * while its second is dead but still listed: the fetchers ask the
     * second first (previous holders come first) and time out. */
    uint32_t w;
    const uint64_t *h = gossip_shards_holders(d.nodes[0].sh, 0, &w);
    long gone = index_of(&d, h[0]), silent = index_of(&d, h[1]);
    d.nodes[gone].alive = d.nodes[gone].member = 0;
    d.nodes[silent].alive = 0;
    view_all(&d);
    run_until(&d, d.now + 5000000);
    assert_true(SUM(&d, timeouts) > 0);
    /* Then the view catches up; everything converges. */
    d.nodes[silent].member = 0;
    view_all(&d);
    run_to_convergence(&d, 1000, 30000000);
    uint32_t *counts = malloc(d.s_count * sizeof *counts);
    assert_int_equal(census(&d, counts), 0);
    free(counts);
    check_content(&d);
    driver_free(&d);
}

static void random_bytes_never_crash(void **state)
{
    (void)state;
    uint64_t seed = test_seed(28);
    driver d;
    driver_init(&d, seed, 4, 4, 8, 3000, 1024, 1);
    model_rng rng;
    model_rng_seed(&rng, seed, 99);
    static uint8_t buf[8192];
    uint64_t rejected0 = SUM(&d, rejected);
    for (int it = 0; it < 100000; it++) {
        size_t len = model_rng_below(&rng, it % 10 == 0 ? sizeof buf : 160);
        for (size_t j = 0; j < len; j++)
            buf[j] = (uint8_t)model_rng_u64(&rng);
        uint8_t type = (uint8_t)(0x20 + model_rng_below(&rng, 4));
        if (len > 36 && (it & 1)) /* plausible: a real id and kind */
            memcpy(buf, d.ids[model_rng_below(&rng, d.s_count)], 32), buf[36] &= 3;
        gossip_shard_msg m;
        int rc = gossip_shard_msg_decode(type, buf, len, &m);
        assert_true(rc >= 0 && rc < GOSSIP_ERR_COUNT);
        gossip_header h = {.type = type, .payload_len = (uint32_t)len};
        uint32_t i = (uint32_t)model_rng_below(&rng, 4);
        gossip_shards_recv(d.nodes[i].sh, d.nodes[(i + 1) % 4].id, &h, buf, len, d.now);
        flush(&d, i);
        if (it % 1000 == 0)
            run_until(&d, d.now + 1000);
    }
    run_until(&d, d.now + 1000000);
    assert_true(SUM(&d, rejected) > rejected0);
    check_content(&d);
    driver_free(&d);
}

/* Byte layouts of the replication messages (docs/SHARDS_REPLICATION.md):
 * A (0x0A) fetches a 5-byte shard from B (0x0B) in 4-byte chunks. The xfer
 * field comes from A's env RNG, so it is read from A's WANT and must be
 * echoed in every answer. */
static void wire_layout_golden(void **state)
{
    (void)state;
    test_env t;
    test_env_init(&t, test_seed(20));
    const uint8_t content[5] = {'h', 'e', 'l', 'l', 'o'};
    uint8_t id[1][32];
    crypto_generichash(id[0], 32, content, 5, NULL, 0);
    gossip_store sa, sb;
    assert_int_equal(gossip_store_mem_create(&sa, &t.env, 4, 64), GOSSIP_OK);
    assert_int_equal(gossip_store_mem_create(&sb, &t.env, 4, 64), GOSSIP_OK);
    assert_int_equal(sb.ops->begin(sb.ctx, id[0], 5), GOSSIP_OK);
    assert_int_equal(sb.ops->write(sb.ctx, id[0], 0, content, 5), GOSSIP_OK);
    assert_int_equal(sb.ops->commit(sb.ctx, id[0]), GOSSIP_OK);
    gossip_shards_config cfg;
    gossip_shards_config_default(&cfg);
    cfg.ids = (const uint8_t(*)[32])id;
    cfg.n_shards = 1;
    cfg.chunk_bytes = 4;
    cfg.shard_bytes_max = 64;
    gossip_shards *a, *b;
    cfg.self = 0x0A;
    cfg.store = sa;
    assert_int_equal(gossip_shards_create(&a, &t.env, &cfg), GOSSIP_OK);
    cfg.self = 0x0B;
    cfg.store = sb;
    assert_int_equal(gossip_shards_create(&b, &t.env, &cfg), GOSSIP_OK);
    uint64_t members[2] = {0x0A, 0x0B};
    gossip_view v = {5, 2, members};
    assert_int_equal(gossip_shards_set_view(a, &v, 0), GOSSIP_OK);
    assert_int_equal(gossip_shards_set_view(b, &v, 0), GOSSIP_OK);

    gossip_send out;
    uint8_t f[256], want[256];
    gossip_header h;
    /* 1. A -> B: WANT kind 0 (manifest). */
    assert_int_equal(gossip_shards_poll_send(a, &out, 0), 1);
    assert_true(out.dest == 0x0B && out.len == 32 + 47);
    static const uint8_t hdr_want[32] = {0x4D, 0x52, 0x01, 0x20, 0,    0, 0, 47, 0, 0, 0,
                                         0,    0,    0,    0,    0x0A, 0, 0, 0,  0, 0, 0,
                                         0,    5,    0,    0,    0,    0, 0, 0,  0, 0};
    assert_memory_equal(out.frame, hdr_want, 32);
    assert_memory_equal(out.frame + 32, id[0], 32);
    uint32_t xfer = gossip_get_u32(out.frame + 64);
    static const uint8_t want_tail[11] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    assert_memory_equal(out.frame + 68, want_tail, 11);
    memcpy(f, out.frame, out.len);
    assert_int_equal(gossip_header_decode(f, 32 + 47, &h), GOSSIP_OK);
    assert_int_equal(gossip_shards_recv(b, 0x0A, &h, f + 32, 47, 0), GOSSIP_OK);
    /* 2. B -> A: CHUNK kind 0: size 5, chunk 4, 2 chunks, their hashes. */
    assert_int_equal(gossip_shards_poll_send(b, &out, 0), 1);
    assert_true(out.dest == 0x0A && out.len == 32 + 53 + 64);
    assert_int_equal(out.frame[3], 0x21);
    assert_int_equal(gossip_get_u32(out.frame + 4), 53 + 64);
    uint8_t *p = want;
    memcpy(p, id[0], 32), p += 32;
    gossip_put_u32(p, xfer), p += 4;
    *p++ = 0;
    gossip_put_u64(p, 5), p += 8;
    gossip_put_u32(p, 4), p += 4;
    gossip_put_u32(p, 2), p += 4;
    crypto_generichash(p, 32, content, 4, NULL, 0), p += 32;
    crypto_generichash(p, 32, content + 4, 1, NULL, 0), p += 32;
    assert_memory_equal(out.frame + 32, want, 53 + 64);
    memcpy(f, out.frame, out.len);
    assert_int_equal(gossip_header_decode(f, out.len, &h), GOSSIP_OK);
    assert_int_equal(gossip_shards_recv(a, 0x0B, &h, f + 32, h.payload_len, 0), GOSSIP_OK);
    /* 3. A -> B: WANT kind 1, first 0, count 2, chunk_bytes 4. */
    assert_int_equal(gossip_shards_poll_send(a, &out, 0), 1);
    static const uint8_t want_data[11] = {1, 0, 0, 0, 0, 0, 2, 0, 0, 0, 4};
    assert_memory_equal(out.frame + 68, want_data, 11);
    assert_int_equal(gossip_get_u32(out.frame + 64), xfer);
    memcpy(f, out.frame, out.len);
    assert_int_equal(gossip_header_decode(f, out.len, &h), GOSSIP_OK);
    assert_int_equal(gossip_shards_recv(b, 0x0A, &h, f + 32, 47, 0), GOSSIP_OK);
    /* 4. B -> A: CHUNK kind 1 for chunks 0 ("hell") and 1 ("o"). */
    for (uint32_t c = 0; c < 2; c++) {
        assert_int_equal(gossip_shards_poll_send(b, &out, 0), 1);
        uint32_t l = c ? 1 : 4;
        assert_true(out.len == 32 + 45 + l);
        p = want;
        memcpy(p, id[0], 32), p += 32;
        gossip_put_u32(p, xfer), p += 4;
        *p++ = 1;
        gossip_put_u32(p, c), p += 4;
        gossip_put_u32(p, l), p += 4;
        memcpy(p, content + 4 * c, l);
        assert_memory_equal(out.frame + 32, want, 45 + l);
        memcpy(f, out.frame, out.len);
        assert_int_equal(gossip_header_decode(f, out.len, &h), GOSSIP_OK);
        assert_int_equal(gossip_shards_recv(a, 0x0B, &h, f + 32, h.payload_len, 0), GOSSIP_OK);
    }
    assert_int_equal(sa.ops->has(sa.ctx, id[0]), 1);
    assert_int_equal(gossip_shards_counters_get(a)->fetched, 1);
    /* 5. One peer cannot fill B's answer queue: 40 manifest WANTs from A
     * queue GOSSIP_SHARDS_FETCH_MAX answers; another peer is still served. */
    memcpy(f, hdr_want, 32);
    memcpy(f + 32, id[0], 32);
    memcpy(f + 68, want_tail, 11);
    assert_int_equal(gossip_header_decode(f, 32 + 47, &h), GOSSIP_OK);
    for (uint32_t k = 0; k < 40; k++) {
        gossip_put_u32(f + 64, k);
        assert_int_equal(gossip_shards_recv(b, 0x0A, &h, f + 32, 47, 0), GOSSIP_OK);
    }
    assert_int_equal(gossip_shards_counters_get(b)->serve_dropped, 40 - GOSSIP_SHARDS_FETCH_MAX);
    assert_int_equal(gossip_shards_recv(b, 0x0C, &h, f + 32, 47, 0), GOSSIP_OK);
    assert_int_equal(gossip_shards_counters_get(b)->serve_dropped, 40 - GOSSIP_SHARDS_FETCH_MAX);
    uint32_t answers = 0;
    while (gossip_shards_poll_send(b, &out, 0) == 1)
        answers++;
    assert_int_equal(answers, GOSSIP_SHARDS_FETCH_MAX + 1);
    /* 6. NACK: a WANT to a member that does not hold the shard. */
    assert_int_equal(sb.ops->drop(sb.ctx, id[0]), GOSSIP_OK);
    gossip_shards_destroy(b);
    assert_int_equal(gossip_shards_create(&b, &t.env, &cfg), GOSSIP_OK);
    memcpy(f, hdr_want, 32);
    memcpy(f + 32, id[0], 32);
    gossip_put_u32(f + 64, 0xC0FFEE01u);
    memcpy(f + 68, want_tail, 11);
    assert_int_equal(gossip_header_decode(f, 32 + 47, &h), GOSSIP_OK);
    assert_int_equal(gossip_shards_recv(b, 0x0A, &h, f + 32, 47, 0), GOSSIP_OK);
    assert_int_equal(gossip_shards_poll_send(b, &out, 0), 1);
    assert_true(out.len == 32 + 37 && out.frame[3] == 0x22);
    assert_memory_equal(out.frame + 32, id[0], 32);
    static const uint8_t nack_tail[5] = {0xC0, 0xFF, 0xEE, 0x01, GOSSIP_SHARD_NOT_HELD};
    assert_memory_equal(out.frame + 64, nack_tail, 5);
    gossip_shards_destroy(a);
    gossip_shards_destroy(b);
    gossip_store_mem_destroy(&sa);
    gossip_store_mem_destroy(&sb);
    assert_int_equal(t.alloc.live, 0);
}

/* Deliver frames between replicators at time 0 (the engine's rounds mode)
 * until none is left (at most `rounds` passes). */
static void exchange(gossip_shards **sh, const uint64_t *ids, uint32_t n, int rounds)
{
    sim_engine *e;
    sim_engine_config ec = {.agents = n, .seed = 1, .mode = SIM_MODE_ROUNDS};
    assert_int_equal(sim_engine_create(&e, &ec), SIM_ENGINE_OK);
    for (uint32_t i = 0; i < n; i++) {
        assert_int_equal(sim_engine_set_id(e, i, ids[i]), SIM_ENGINE_OK);
        sim_engine_set_node(e, i, &sim_ops_shards, sh[i]);
        sim_engine_up(e, i);
    }
    for (int r = 0; r < rounds; r++) {
        for (uint32_t i = 0; i < n; i++)
            sim_engine_drain(e, i);
        if (sim_engine_deliver_pending(e) == 0)
            break;
    }
    assert_int_equal(sim_engine_failed(e), 0);
    sim_engine_destroy(e);
}

/* Whole murmur shard files (model/shardfile.h) replicate and verify against
 * the address `murmur shard` gives them, once the replicator is told which
 * header bytes the address leaves out; without that they are refused. */
static void model_shard_files_replicate(void **state)
{
    (void)state;
    test_env t;
    test_env_init(&t, test_seed(19));
    model_data d;
    assert_int_equal(model_data_alloc(&d, 30, 10, 3, MODEL_DTYPE_U8), 0);
    for (uint32_t i = 0; i < 30 * 10; i++)
        d.x_u8[i] = (uint8_t)model_rng_u64(&t.rng);
    for (uint32_t i = 0; i < 30; i++)
        d.labels[i] = (uint16_t)model_rng_below(&t.rng, 3);
    uint8_t ids[3][32], *files[3];
    uint64_t sizes[3];
    for (uint32_t k = 0; k < 3; k++) {
        uint32_t rows[10];
        for (uint32_t i = 0; i < 10; i++)
            rows[i] = 10 * k + i;
        sizes[k] = model_shard_size(&d, 10);
        files[k] = malloc(sizes[k]);
        assert_int_equal(model_shard_encode(&d, rows, 10, k, 3, files[k], sizes[k], ids[k]), 0);
    }
    for (int with_layout = 0; with_layout < 2; with_layout++) {
        gossip_store st[2];
        gossip_shards *sh[2];
        uint64_t node[2] = {0x0A, 0x0B};
        for (int i = 0; i < 2; i++)
            assert_int_equal(gossip_store_mem_create(&st[i], &t.env, 8, 4096), GOSSIP_OK);
        for (uint32_t k = 0; k < 3; k++) {
            assert_int_equal(st[0].ops->begin(st[0].ctx, ids[k], sizes[k]), GOSSIP_OK);
            assert_int_equal(st[0].ops->write(st[0].ctx, ids[k], 0, files[k], sizes[k]), GOSSIP_OK);
            assert_int_equal(st[0].ops->commit(st[0].ctx, ids[k]), GOSSIP_OK);
        }
        gossip_shards_config cfg;
        gossip_shards_config_default(&cfg);
        if (with_layout)
            gossip_shards_config_model_files(&cfg);
        cfg.ids = (const uint8_t(*)[32])ids;
        cfg.n_shards = 3;
        cfg.chunk_bytes = 64; /* the header straddles chunks */
        cfg.shard_bytes_max = 4096;
        for (int i = 0; i < 2; i++) {
            cfg.self = node[i];
            cfg.store = st[i];
            assert_int_equal(gossip_shards_create(&sh[i], &t.env, &cfg), GOSSIP_OK);
            gossip_view v = {1, 2, node};
            assert_int_equal(gossip_shards_set_view(sh[i], &v, 0), GOSSIP_OK);
        }
        exchange(sh, node, 2, 1000);
        const gossip_shards_counters *c = gossip_shards_counters_get(sh[1]);
        if (with_layout) {
            assert_int_equal(c->fetched, 3);
            assert_int_equal(c->whole_bad, 0);
            for (uint32_t k = 0; k < 3; k++) {
                uint64_t size;
                uint8_t *b = gossip_store_mem_bytes(&st[1], ids[k], &size);
                assert_non_null(b);
                assert_int_equal(model_shard_verify(b, size, NULL, NULL, 0), 0);
                assert_memory_equal(b, files[k], size);
            }
        } else {
            /* Without the layout the files do not hash to their ids: the
             * source finds that at create and quarantines them, so nobody
             * holds them and the fetcher reports them lost. */
            assert_int_equal(gossip_shards_counters_get(sh[0])->quarantined, 3);
            assert_int_equal(gossip_store_mem_count(&st[0]), 0);
            assert_int_equal(c->fetched, 0);
            assert_int_equal(gossip_store_mem_count(&st[1]), 0);
            assert_int_equal(gossip_shards_lost_count(sh[1]), 3);
            assert_int_equal(c->lost, 3);
        }
        for (int i = 0; i < 2; i++) {
            gossip_shards_destroy(sh[i]);
            gossip_store_mem_destroy(&st[i]);
        }
    }
    for (uint32_t k = 0; k < 3; k++)
        free(files[k]);
    model_data_free(&d);
    assert_int_equal(t.alloc.live, 0);
}

static void create_and_view_survive_oom(void **state)
{
    (void)state;
    test_env t;
    test_env_init(&t, test_seed(29));
    uint8_t ids[20][32];
    for (int s = 0; s < 20; s++)
        for (int b = 0; b < 32; b++)
            ids[s][b] = (uint8_t)model_rng_u64(&t.rng);
    gossip_store st;
    assert_int_equal(gossip_store_mem_create(&st, &t.env, 64, 4096), GOSSIP_OK);
    long base = t.alloc.live;
    gossip_shards_config cfg;
    gossip_shards_config_default(&cfg);
    cfg.self = 7;
    cfg.ids = (const uint8_t(*)[32])ids;
    cfg.n_shards = 20;
    cfg.store = st;
    cfg.shard_bytes_max = 4096;
    cfg.chunk_bytes = 1024;
    uint64_t members[5] = {3, 7, 9, 11, 20};
    gossip_view v = {1, 5, members};
    for (long k = 1;; k++) {
        t.alloc.count = 0;
        t.alloc.fail_at = k;
        gossip_shards *sh = NULL;
        int rc = gossip_shards_create(&sh, &t.env, &cfg);
        if (rc == GOSSIP_OK) {
            rc = gossip_shards_set_view(sh, &v, 0);
            if (rc == GOSSIP_ENOMEM) {
                /* The object stays valid: the same view applies later. */
                assert_int_equal(gossip_shards_epoch(sh), 0);
                t.alloc.fail_at = 0;
                assert_int_equal(gossip_shards_set_view(sh, &v, 0), GOSSIP_OK);
                assert_int_equal(gossip_shards_epoch(sh), 1);
                gossip_shards_destroy(sh);
                assert_int_equal(t.alloc.live, base);
                continue;
            }
            assert_int_equal(rc, GOSSIP_OK);
            t.alloc.fail_at = 0;
            assert_int_equal(gossip_shards_epoch(sh), 1);
            gossip_shards_destroy(sh);
            assert_int_equal(t.alloc.live, base);
            break;
        }
        assert_int_equal(rc, GOSSIP_ENOMEM);
        assert_null(sh);
        assert_int_equal(t.alloc.live, base);
    }
    /* Bad configs. */
    gossip_shards *sh;
    gossip_shards_config bad = cfg;
    bad.self = 0;
    assert_int_equal(gossip_shards_create(&sh, &t.env, &bad), GOSSIP_EINVAL);
    bad = cfg;
    bad.window = GOSSIP_SHARDS_WINDOW_MAX + 1;
    assert_int_equal(gossip_shards_create(&sh, &t.env, &bad), GOSSIP_EINVAL);
    bad = cfg;
    bad.shard_bytes_max = (uint64_t)GOSSIP_SHARDS_CHUNKS_MAX * 1024 + 1;
    assert_int_equal(gossip_shards_create(&sh, &t.env, &bad), GOSSIP_EINVAL);
    gossip_store_mem_destroy(&st);
    assert_int_equal(t.alloc.live, 0);
}

static void store_mem_contract(void **state)
{
    (void)state;
    test_env t;
    test_env_init(&t, test_seed(30));
    gossip_store st;
    assert_int_equal(gossip_store_mem_create(&st, &t.env, 2, 100), GOSSIP_OK);
    uint8_t a[32] = {1}, b[32] = {2}, c[32] = {3}, buf[10];
    const gossip_store_ops *o = st.ops;
    assert_int_equal(o->has(st.ctx, a), 0);
    assert_int_equal(o->begin(st.ctx, a, 101), GOSSIP_EINVAL);
    assert_int_equal(o->begin(st.ctx, a, 10), GOSSIP_OK);
    assert_int_equal(o->begin(st.ctx, a, 10), GOSSIP_EINVAL);
    assert_int_equal(o->has(st.ctx, a), 0); /* writing is not visible */
    assert_int_equal(o->write(st.ctx, a, 5, "hello", 5), GOSSIP_OK);
    assert_int_equal(o->write(st.ctx, a, 6, "hello", 5), GOSSIP_EINVAL);
    assert_int_equal(o->write(st.ctx, a, 0, "01234", 5), GOSSIP_OK);
    assert_int_equal(o->read(st.ctx, a, 0, buf, 1), GOSSIP_ENOTFOUND);
    assert_int_equal(o->commit(st.ctx, a), GOSSIP_OK);
    assert_int_equal(o->has(st.ctx, a), 1);
    uint64_t size;
    assert_int_equal(o->size(st.ctx, a, &size), GOSSIP_OK);
    assert_true(size == 10);
    assert_int_equal(o->read(st.ctx, a, 0, buf, 10), GOSSIP_OK);
    assert_memory_equal(buf, "01234hello", 10);
    assert_int_equal(o->read(st.ctx, a, 5, buf, 6), GOSSIP_EINVAL);
    assert_int_equal(o->begin(st.ctx, b, 3), GOSSIP_OK);
    assert_int_equal(o->begin(st.ctx, c, 3), GOSSIP_EFULL);
    o->abort(st.ctx, b);
    assert_int_equal(o->has(st.ctx, b), 0);
    assert_int_equal(o->begin(st.ctx, c, 0), GOSSIP_OK);
    assert_int_equal(o->commit(st.ctx, c), GOSSIP_OK);
    assert_int_equal(gossip_store_mem_count(&st), 2);
    assert_int_equal(o->drop(st.ctx, a), GOSSIP_OK);
    assert_int_equal(o->drop(st.ctx, a), GOSSIP_ENOTFOUND);
    assert_int_equal(o->has(st.ctx, c), 1);
    assert_int_equal(gossip_store_mem_count(&st), 1);
    gossip_store_mem_destroy(&st);
    assert_int_equal(t.alloc.live, 0);
    /* The in-memory store's create and begin fail cleanly too. */
    for (long k = 1;; k++) {
        t.alloc.count = 0;
        t.alloc.fail_at = k;
        gossip_store s2;
        int rc = gossip_store_mem_create(&s2, &t.env, 8, 64);
        if (rc == GOSSIP_OK) {
            uint8_t id[32] = {9};
            t.alloc.count = 0;
            t.alloc.fail_at = 1;
            assert_int_equal(s2.ops->begin(s2.ctx, id, 10), GOSSIP_ENOMEM);
            assert_int_equal(s2.ops->has(s2.ctx, id), 0);
            t.alloc.fail_at = 0;
            assert_int_equal(s2.ops->begin(s2.ctx, id, 10), GOSSIP_OK);
            gossip_store_mem_destroy(&s2);
            break;
        }
        assert_int_equal(rc, GOSSIP_ENOMEM);
        assert_int_equal(t.alloc.live, 0);
    }
    assert_int_equal(t.alloc.live, 0);
}

/* ---- a full store (issue 13 item 11) ---- */

static gossip_store full_inner;
static int full_on;
static uint64_t full_writes;
static int full_has(void *c, const uint8_t *id)
{
    return full_inner.ops->has(full_inner.ctx, id);
}
static int full_size(void *c, const uint8_t *id, uint64_t *z)
{
    return full_inner.ops->size(full_inner.ctx, id, z);
}
static int full_read(void *c, const uint8_t *id, uint64_t off, void *b, size_t l)
{
    return full_inner.ops->read(full_inner.ctx, id, off, b, l);
}
static int full_begin(void *c, const uint8_t *id, uint64_t z)
{
    return full_inner.ops->begin(full_inner.ctx, id, z);
}
static int full_write(void *c, const uint8_t *id, uint64_t off, const void *b, size_t l)
{
    full_writes++;
    return full_on ? GOSSIP_EFULL : full_inner.ops->write(full_inner.ctx, id, off, b, l);
}
static int full_commit(void *c, const uint8_t *id)
{
    return full_inner.ops->commit(full_inner.ctx, id);
}
static void full_abort(void *c, const uint8_t *id)
{
    full_inner.ops->abort(full_inner.ctx, id);
}
static int full_drop(void *c, const uint8_t *id)
{
    return full_inner.ops->drop(full_inner.ctx, id);
}
static const gossip_store_ops full_ops = {full_has,   full_size,  full_read,
                                          full_begin, full_write, full_commit,
                                          full_abort, full_drop,  NULL};

/* A store out of room: the first write refused stops every fetch, none
 * starts for GOSSIP_SHARDS_FULL_BACKOFF_US (no bytes fetched that cannot
 * be stored: one refused write, not one per chunk), then fetching resumes
 * and completes once there is room. Before, each shard was retried every
 * backoff (1 s) and every chunk fetched was thrown away. */
/* The full-store tests' network: the engine's rounds mode. Each
 * full_step (every 100 ms of their clock) runs every agent's timers and
 * delivers every frame, and every frame those cause, at that time. */
static sim_engine *full_net(gossip_shards **sh, const uint64_t *node, int n)
{
    sim_engine *e;
    sim_engine_config ec = {.agents = (uint32_t)n, .seed = 1, .mode = SIM_MODE_ROUNDS};
    assert_int_equal(sim_engine_create(&e, &ec), SIM_ENGINE_OK);
    for (int i = 0; i < n; i++) {
        assert_int_equal(sim_engine_set_id(e, (uint32_t)i, node[i]), SIM_ENGINE_OK);
        sim_engine_set_node(e, (uint32_t)i, &sim_ops_shards, sh[i]);
        sim_engine_up(e, (uint32_t)i);
    }
    return e;
}

static void full_step(sim_engine *e, int n, gossip_time_us now)
{
    sim_engine_set_now(e, now);
    for (int i = 0; i < n; i++)
        sim_engine_tick_now(e, (uint32_t)i);
    sim_engine_deliver_pending(e);
    assert_int_equal(sim_engine_failed(e), 0);
    assert_int_equal(sim_engine_get_stats(e)->unknown, 0);
}

static void full_store_pauses_fetching(void **state)
{
    (void)state;
    test_env t;
    test_env_init(&t, test_seed(29));
    enum { S = 6, SIZE = 3000 };
    uint8_t ids[S][32];
    static uint8_t data[S][SIZE];
    gossip_store st0;
    assert_int_equal(gossip_store_mem_create(&st0, &t.env, 16, 4096), GOSSIP_OK);
    assert_int_equal(gossip_store_mem_create(&full_inner, &t.env, 16, 4096), GOSSIP_OK);
    for (int k = 0; k < S; k++) {
        for (int i = 0; i < SIZE; i++)
            data[k][i] = (uint8_t)(k * 31 + i * 7);
        crypto_generichash(ids[k], 32, data[k], SIZE, NULL, 0);
        assert_int_equal(st0.ops->begin(st0.ctx, ids[k], SIZE), GOSSIP_OK);
        assert_int_equal(st0.ops->write(st0.ctx, ids[k], 0, data[k], SIZE), GOSSIP_OK);
        assert_int_equal(st0.ops->commit(st0.ctx, ids[k]), GOSSIP_OK);
    }
    gossip_store st1 = {&full_ops, NULL};
    gossip_shards_config cfg;
    gossip_shards_config_default(&cfg);
    cfg.ids = (const uint8_t(*)[32])ids;
    cfg.n_shards = S;
    cfg.chunk_bytes = 512;
    cfg.shard_bytes_max = 4096;
    uint64_t node[2] = {0x0A, 0x0B};
    gossip_shards *sh[2];
    for (int i = 0; i < 2; i++) {
        cfg.self = node[i];
        cfg.store = i ? st1 : st0;
        assert_int_equal(gossip_shards_create(&sh[i], &t.env, &cfg), GOSSIP_OK);
        gossip_view v = {1, 2, node};
        assert_int_equal(gossip_shards_set_view(sh[i], &v, 0), GOSSIP_OK);
    }
    sim_engine *e = full_net(sh, node, 2);
    full_on = 1;
    full_writes = 0;
    gossip_time_us now = 0;
    const gossip_shards_counters *c = gossip_shards_counters_get(sh[1]);
    for (; now < GOSSIP_SHARDS_FULL_BACKOFF_US - 1000000; now += 100000) {
        full_step(e, 2, now);
    }
    assert_int_equal(full_writes, 1);
    assert_int_equal(c->store_full, 1);
    assert_true(gossip_shards_store_full(sh[1], now));
    assert_int_equal(c->fetched, 0);
    full_on = 0; /* room again */
    for (; now < 2 * GOSSIP_SHARDS_FULL_BACKOFF_US; now += 100000) {
        full_step(e, 2, now);
    }
    assert_false(gossip_shards_store_full(sh[1], now));
    assert_int_equal(c->fetched, S);
    assert_int_equal(gossip_shards_held_count(sh[1]), S);
    sim_engine_destroy(e);
    for (int i = 0; i < 2; i++)
        gossip_shards_destroy(sh[i]);
    gossip_store_mem_destroy(&st0);
    gossip_store_mem_destroy(&full_inner);
}

/* Every shard has exactly one agent that trains it (status.primary), all
 * agents name the same one, and it is not `avoid`. Returns how many shards
 * have a primary other than their placement primary (row[0]). */
static uint32_t full_check_primaries(gossip_shards **sh, const uint64_t *node, int n,
                                     uint32_t n_shards, uint64_t avoid)
{
    uint32_t moved = 0;
    for (uint32_t s = 0; s < n_shards; s++) {
        int trainers = 0;
        uint64_t named = 0;
        for (int i = 0; i < n; i++) {
            gossip_shard_status st;
            assert_int_equal(gossip_shards_status(sh[i], s, &st), GOSSIP_OK);
            if (st.primary) {
                trainers++;
                assert_int_equal(st.primary_id, node[i]);
            }
            if (i == 0)
                named = st.primary_id;
            assert_int_equal(st.primary_id, named);
        }
        assert_int_equal(trainers, 1);
        assert_true(named != avoid);
        uint32_t w;
        const uint64_t *row = gossip_shards_holders(sh[0], s, &w);
        moved += row[0] != named;
    }
    return moved;
}

/* Issue 13 item 11: an agent whose store is full hands its primaries to
 * the next holders (FULL notices), which train them; once it stores a
 * shard again it takes them back, and the others give them back when its
 * notices stop (TTL). Before, its primaries were trained by nobody. */
static void full_store_hands_primaries_over(void **state)
{
    (void)state;
    test_env t;
    test_env_init(&t, test_seed(31));
    enum { S = 6, SIZE = 3000, N = 3 };
    uint8_t ids[S][32];
    static uint8_t data[S][SIZE];
    gossip_store st[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(gossip_store_mem_create(&st[i], &t.env, 16, 4096), GOSSIP_OK);
    assert_int_equal(gossip_store_mem_create(&full_inner, &t.env, 16, 4096), GOSSIP_OK);
    for (int k = 0; k < S; k++) {
        for (int i = 0; i < SIZE; i++)
            data[k][i] = (uint8_t)(k * 37 + i * 5);
        crypto_generichash(ids[k], 32, data[k], SIZE, NULL, 0);
        for (int i = 0; i < 2; i++) {
            assert_int_equal(st[i].ops->begin(st[i].ctx, ids[k], SIZE), GOSSIP_OK);
            assert_int_equal(st[i].ops->write(st[i].ctx, ids[k], 0, data[k], SIZE), GOSSIP_OK);
            assert_int_equal(st[i].ops->commit(st[i].ctx, ids[k]), GOSSIP_OK);
        }
    }
    gossip_store full_store = {&full_ops, NULL};
    gossip_shards_config cfg;
    gossip_shards_config_default(&cfg);
    cfg.ids = (const uint8_t(*)[32])ids;
    cfg.n_shards = S;
    cfg.chunk_bytes = 512;
    cfg.shard_bytes_max = 4096;
    cfg.placement.r = 2;
    uint64_t node[N] = {0x0A, 0x0B, 0x0C};
    gossip_shards *sh[N];
    for (int i = 0; i < N; i++) {
        cfg.self = node[i];
        cfg.store = i == 2 ? full_store : st[i];
        assert_int_equal(gossip_shards_create(&sh[i], &t.env, &cfg), GOSSIP_OK);
        gossip_view v = {1, N, node};
        assert_int_equal(gossip_shards_set_view(sh[i], &v, 0), GOSSIP_OK);
    }
    /* Balanced primaries: 2 each, so the full agent has some to hand over. */
    uint32_t own = 0;
    for (uint32_t s = 0; s < S; s++) {
        uint32_t w;
        own += gossip_shards_holders(sh[2], s, &w)[0] == node[2];
    }
    assert_int_equal(own, S / N);
    sim_engine *e = full_net(sh, node, N);
    full_on = 1;
    gossip_time_us now = 0;
    for (; now < 15000000; now += 100000)
        full_step(e, N, now);
    gossip_shards_full_info fi;
    gossip_shards_full_get(sh[2], &fi);
    assert_true(fi.full);
    assert_int_equal(fi.handed, own);
    assert_int_equal(fi.taken, 0);
    assert_int_equal(full_check_primaries(sh, node, N, S, node[2]), own);
    uint32_t taken = 0;
    for (int i = 0; i < 2; i++) {
        gossip_shards_full_get(sh[i], &fi);
        assert_false(fi.full);
        assert_int_equal(fi.members, 1);
        taken += fi.taken;
    }
    assert_int_equal(taken, own);
    /* The full agent trains nothing it does not hold; the others train
     * every shard between them. */
    uint32_t out[S];
    gossip_shards_train_info info;
    assert_int_equal(gossip_shards_primary(sh[2], out, S), 0);
    assert_int_equal(gossip_shards_primary(sh[0], out, S) + gossip_shards_primary(sh[1], out, S),
                     S);
    assert_int_equal(gossip_shards_train(sh[2], out, S, &info), 0);
    /* Room again: the full agent fetches, stores and takes its primaries
     * back; the others forget it within the TTL. */
    full_on = 0;
    gossip_time_us end = now + GOSSIP_SHARDS_FULL_BACKOFF_US + GOSSIP_SHARDS_FULL_TTL_US + 2000000;
    for (; now < end; now += 100000)
        full_step(e, N, now);
    gossip_shards_full_get(sh[2], &fi);
    assert_false(fi.full);
    assert_int_equal(fi.handed, 0);
    assert_true(gossip_shards_counters_get(sh[2])->fetched > 0);
    for (int i = 0; i < 2; i++) {
        gossip_shards_full_get(sh[i], &fi);
        assert_int_equal(fi.members, 0);
        assert_int_equal(fi.taken, 0);
    }
    assert_int_equal(full_check_primaries(sh, node, N, S, 0), 0);
    sim_engine_destroy(e);
    for (int i = 0; i < N; i++)
        gossip_shards_destroy(sh[i]);
    for (int i = 0; i < 2; i++)
        gossip_store_mem_destroy(&st[i]);
    gossip_store_mem_destroy(&full_inner);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(store_mem_contract),
        cmocka_unit_test(wire_layout_golden),
        cmocka_unit_test(model_shard_files_replicate),
        cmocka_unit_test(create_and_view_survive_oom),
        cmocka_unit_test(bootstrap_from_one_seeder),
        cmocka_unit_test(kill_two_holders_n64),
        cmocka_unit_test(kill_two_holders_n256),
        cmocka_unit_test(join_moves_only_what_placement_moves),
        cmocka_unit_test(churn_with_staggered_views),
        cmocka_unit_test(corrupted_chunk_rejected_and_refetched),
        cmocka_unit_test(corrupt_holder_quarantines),
        cmocka_unit_test(lost_shards_reported),
        cmocka_unit_test(full_store_pauses_fetching),
        cmocka_unit_test(full_store_hands_primaries_over),
        cmocka_unit_test(corrupt_shard_quarantined_and_refetched),
        cmocka_unit_test(silent_source_times_out),
        cmocka_unit_test(random_bytes_never_crash),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
