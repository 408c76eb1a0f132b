/* What each agent trains on (gossip_shards_train): N in-memory replicators
 * on the simulator's engine (sim/engine.h, timed mode, no network limits):
 * every frame takes one hop of HOP_US, so a step of HOP_US delivers the
 * frames sent in the step before (one message hop) and runs the timers due;
 * one seeder holds every shard at first. Checks, before replication, while
 * it runs and after it settles, that every agent has something to train as
 * soon as it holds any verified copy, that primaries stay within
 * floor(S/N)..ceil(S/N) and partition the catalog, and the fallbacks when
 * S < N (replicas, guest shard). */
#include "tests/harness.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/shards.h"
#include "sim/engine.h"

/* One message hop: a frame sent at t is delivered at t + HOP_US. */
#define HOP_US 10000u

typedef struct cluster {
    test_env t;
    uint32_t n, s_count;
    uint64_t *id; /* node ids, index order */
    uint8_t *member;
    gossip_shards **sh;
    gossip_store *store;
    uint8_t (*ids)[32];
    uint8_t **content;
    uint64_t *sizes;
    gossip_shards_config cfg;
    sim_engine *e;
    uint64_t epoch;
} cluster;

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t hop_delay(void *ctx, uint32_t from, uint32_t to)
{
    (void)ctx, (void)from, (void)to;
    return HOP_US;
}

static gossip_time_us now_of(const cluster *c)
{
    return sim_engine_now(c->e);
}

/* Advance dt_us: frames sent before arrive, timers due run. */
static void step(cluster *c, uint64_t dt_us)
{
    long rc = sim_engine_run_until(c->e, now_of(c) + dt_us, NULL, NULL);
    assert_true(rc >= 0);
    assert_int_equal(sim_engine_failed(c->e), 0);
    assert_int_equal(sim_engine_get_stats(c->e)->unknown, 0); /* every dest is an agent */
}

/* Agent i joins (up, its frames pulled) or leaves (down: it neither sends
 * nor receives; frames to it are lost). */
static void set_member(cluster *c, uint32_t i, int member)
{
    c->member[i] = (uint8_t)member;
    if (member) {
        sim_engine_up(c->e, i);
        sim_engine_drain(c->e, i);
    } else {
        sim_engine_down(c->e, i);
    }
}

static void view_all(cluster *c)
{
    uint64_t *v = malloc(c->n * sizeof *v);
    uint32_t k = 0;
    for (uint32_t i = 0; i < c->n; i++)
        if (c->member[i])
            v[k++] = c->id[i];
    qsort(v, k, sizeof *v, cmp_u64);
    gossip_view view = {++c->epoch, k, v};
    for (uint32_t i = 0; i < c->n; i++)
        if (c->member[i]) {
            assert_int_equal(gossip_shards_set_view(c->sh[i], &view, now_of(c)), GOSSIP_OK);
            sim_engine_drain(c->e, i);
        }
    free(v);
}

/* n agents, s_count shards of 1..600 bytes, r; agent 0 holds every shard. */
static void cluster_init(cluster *c, uint64_t seed, uint32_t n, uint32_t s_count, uint32_t r)
{
    memset(c, 0, sizeof *c);
    test_env_init(&c->t, seed);
    c->n = n;
    c->s_count = s_count;
    c->id = malloc(n * sizeof *c->id);
    c->member = malloc(n);
    c->sh = calloc(n, sizeof *c->sh);
    c->store = calloc(n, sizeof *c->store);
    c->ids = malloc((size_t)s_count * 32);
    c->content = malloc(s_count * sizeof *c->content);
    c->sizes = malloc(s_count * sizeof *c->sizes);
    for (uint32_t s = 0; s < s_count; s++) {
        c->sizes[s] = 1 + model_rng_below(&c->t.rng, 600);
        c->content[s] = malloc(c->sizes[s]);
        for (uint64_t b = 0; b < c->sizes[s]; b++)
            c->content[s][b] = (uint8_t)model_rng_u64(&c->t.rng);
        crypto_generichash(c->ids[s], 32, c->content[s], c->sizes[s], NULL, 0);
    }
    gossip_shards_config_default(&c->cfg);
    c->cfg.ids = (const uint8_t(*)[32])c->ids;
    c->cfg.n_shards = s_count;
    c->cfg.placement.r = r;
    c->cfg.chunk_bytes = 128;
    c->cfg.shard_bytes_max = 1024;
    c->cfg.probe_us = 100000;
    sim_engine_config ec = {
        .agents = n,
        .seed = seed,
        .mode = SIM_MODE_TIMED,
        .hooks = {.delay = hop_delay},
    };
    assert_int_equal(sim_engine_create(&c->e, &ec), SIM_ENGINE_OK);
    for (uint32_t i = 0; i < n; i++) {
        c->id[i] = (model_rng_u64(&c->t.rng) | 1);
        c->member[i] = 1;
        assert_int_equal(gossip_store_mem_create(&c->store[i], &c->t.env, s_count + 4, 1024),
                         GOSSIP_OK);
        if (i == 0)
            for (uint32_t s = 0; s < s_count; s++) {
                const gossip_store *st = &c->store[0];
                assert_int_equal(st->ops->begin(st->ctx, c->ids[s], c->sizes[s]), GOSSIP_OK);
                assert_int_equal(st->ops->write(st->ctx, c->ids[s], 0, c->content[s], c->sizes[s]),
                                 GOSSIP_OK);
                assert_int_equal(st->ops->commit(st->ctx, c->ids[s]), GOSSIP_OK);
            }
        gossip_shards_config k = c->cfg;
        k.self = c->id[i];
        k.store = c->store[i];
        assert_int_equal(gossip_shards_create(&c->sh[i], &c->t.env, &k), GOSSIP_OK);
        assert_int_equal(sim_engine_set_id(c->e, i, c->id[i]), SIM_ENGINE_OK);
        sim_engine_set_node(c->e, i, &sim_ops_shards, c->sh[i]);
        sim_engine_up(c->e, i);
    }
}

static void cluster_free(cluster *c)
{
    sim_engine_destroy(c->e);
    for (uint32_t i = 0; i < c->n; i++) {
        gossip_shards_destroy(c->sh[i]);
        gossip_store_mem_destroy(&c->store[i]);
    }
    assert_int_equal(c->t.alloc.live, 0);
    for (uint32_t s = 0; s < c->s_count; s++)
        free(c->content[s]);
    free(c->content), free(c->sizes), free(c->ids), free(c->id), free(c->member), free(c->sh),
        free(c->store);
}

typedef struct train_census {
    uint32_t by_source[4];
    uint32_t idle_holding; /* agents with NONE although they hold a verified copy */
} train_census;

/* Every member's train set: a listed shard is held, and a PRIMARY list is
 * exactly the shards it is primary for and holds; primaries within bounds
 * once every member has its view; each shard on at most one PRIMARY list. */
static train_census check_train(cluster *c)
{
    train_census tc = {{0}, 0};
    uint32_t *list = malloc(c->s_count * sizeof *list);
    uint32_t *owner = calloc(c->s_count, sizeof *owner);
    uint32_t n = 0;
    for (uint32_t i = 0; i < c->n; i++)
        n += c->member[i];
    uint32_t lo, hi;
    gossip_placement_primary_bounds(c->s_count, n, &lo, &hi);
    for (uint32_t i = 0; i < c->n; i++) {
        if (!c->member[i])
            continue;
        gossip_shards_train_info info;
        uint32_t k = gossip_shards_train(c->sh[i], list, c->s_count, &info);
        assert_true(k <= c->s_count);
        tc.by_source[info.source]++;
        assert_true(info.primary >= lo && info.primary <= hi);
        assert_true(info.pending <= info.primary);
        assert_int_equal(info.reason, !info.primary  ? GOSSIP_TRAIN_NO_PRIMARY
                                      : info.pending ? GOSSIP_TRAIN_PENDING
                                                     : GOSSIP_TRAIN_ALL_HELD);
        if (info.source == GOSSIP_TRAIN_NONE) {
            assert_int_equal(k, 0);
            tc.idle_holding += gossip_shards_held_count(c->sh[i]) > 0;
        }
        if (info.source == GOSSIP_TRAIN_PRIMARY)
            assert_int_equal(k, info.primary - info.pending);
        for (uint32_t j = 0; j < k; j++) {
            gossip_shard_status st;
            assert_int_equal(gossip_shards_status(c->sh[i], list[j], &st), GOSSIP_OK);
            assert_true(st.held);
            assert_true(j == 0 || list[j] > list[j - 1]);
            if (info.source == GOSSIP_TRAIN_PRIMARY) {
                assert_true(st.primary);
                assert_int_equal(owner[list[j]], 0);
                owner[list[j]] = i + 1;
            }
            if (info.source == GOSSIP_TRAIN_GUEST)
                assert_true(st.guest && k == 1);
        }
    }
    free(list), free(owner);
    return tc;
}

/* Run until every member holds its assignment (guest included). */
static void settle(cluster *c, uint64_t seed)
{
    for (int k = 0; k < 2000; k++) {
        uint32_t missing = 0;
        for (uint32_t i = 0; i < c->n; i++)
            missing += c->member[i] ? gossip_shards_missing_count(c->sh[i]) : 0;
        if (!missing)
            return;
        step(c, HOP_US);
        train_census tc = check_train(c);
        if (tc.idle_holding)
            fail_msg("seed %llu: %u agents hold a verified copy and train nothing",
                     (unsigned long long)seed, tc.idle_holding);
    }
    fail_msg("seed %llu: replication did not settle", (unsigned long long)seed);
}

/* S = 64, N = 24, r = 3: before any copy, the seeder trains its primaries
 * and the others wait (NONE, primaries pending); as copies arrive, an agent
 * whose primaries are still on the way trains the replicas it has; at the
 * end every agent trains 2 or 3 primaries and each shard is on exactly one
 * list. */
static void every_agent_trains_s64_n24(void **state)
{
    (void)state;
    uint64_t seed = test_seed(31);
    cluster c;
    cluster_init(&c, seed, 24, 64, 3);
    gossip_shards_train_info info;
    uint32_t list[64];
    assert_int_equal(gossip_shards_train(c.sh[1], list, 64, &info), 0);
    assert_int_equal(info.source, GOSSIP_TRAIN_NONE);
    assert_int_equal(info.reason, GOSSIP_TRAIN_NO_VIEW);
    view_all(&c);
    train_census tc = check_train(&c);
    assert_int_equal(tc.by_source[GOSSIP_TRAIN_PRIMARY], 1);
    assert_int_equal(tc.by_source[GOSSIP_TRAIN_NONE], 23);
    uint32_t replicas_seen = 0;
    for (int k = 0; k < 2000; k++) {
        tc = check_train(&c);
        assert_int_equal(tc.idle_holding, 0);
        replicas_seen += tc.by_source[GOSSIP_TRAIN_REPLICAS];
        if (tc.by_source[GOSSIP_TRAIN_PRIMARY] == 24) {
            uint32_t missing = 0;
            for (uint32_t i = 0; i < c.n; i++)
                missing += gossip_shards_missing_count(c.sh[i]);
            if (!missing)
                break;
        }
        step(&c, HOP_US);
    }
    tc = check_train(&c);
    assert_int_equal(tc.by_source[GOSSIP_TRAIN_PRIMARY], 24);
    /* Each agent fetches up to 4 shards at a time from the seeder, so
     * some hold a replica before their primaries: they trained on it. */
    assert_true(replicas_seen > 0);
    /* Every shard is on exactly one primary list. */
    uint32_t total = 0;
    for (uint32_t i = 0; i < c.n; i++)
        total += gossip_shards_train(c.sh[i], list, 64, &info);
    assert_int_equal(total, 64);
    /* A leave and a join: bounds and partition again after settling. */
    set_member(&c, 5, 0);
    view_all(&c);
    settle(&c, seed);
    tc = check_train(&c);
    assert_int_equal(tc.by_source[GOSSIP_TRAIN_PRIMARY], 23);
    set_member(&c, 5, 1);
    view_all(&c);
    settle(&c, seed);
    tc = check_train(&c);
    assert_int_equal(tc.by_source[GOSSIP_TRAIN_PRIMARY], 24);
    cluster_free(&c);
}

/* S = 4, N = 12, r = 2: 4 agents are primaries, 4 more hold a replica and
 * are primary for nothing (they train it: REPLICAS, no_primary), and at
 * least 4 hold nothing by placement: each fetches a guest shard and trains
 * it. The guest copy survives the drop policy, and is dropped once the
 * agent becomes a holder. */
static void more_agents_than_shards(void **state)
{
    (void)state;
    uint64_t seed = test_seed(32);
    cluster c;
    cluster_init(&c, seed, 12, 4, 2);
    view_all(&c);
    settle(&c, seed);
    for (int k = 0; k < 20; k++) /* 2 s: the drop policy runs 20 times */
        step(&c, 100000);
    train_census tc = check_train(&c);
    assert_int_equal(tc.by_source[GOSSIP_TRAIN_NONE], 0);
    assert_int_equal(tc.by_source[GOSSIP_TRAIN_PRIMARY], 4);
    uint32_t guests = tc.by_source[GOSSIP_TRAIN_GUEST];
    assert_true(guests >= 4);
    assert_int_equal(tc.by_source[GOSSIP_TRAIN_REPLICAS] + guests, 8);
    uint32_t guest_agent = UINT32_MAX, list[4];
    for (uint32_t i = 0; i < c.n && guest_agent == UINT32_MAX; i++) {
        gossip_shards_train_info info;
        gossip_shards_train(c.sh[i], list, 4, &info);
        if (info.source == GOSSIP_TRAIN_GUEST) {
            assert_int_equal(info.reason, GOSSIP_TRAIN_NO_PRIMARY);
            assert_int_equal(gossip_shards_held_count(c.sh[i]), 1);
            guest_agent = i;
        }
    }
    /* Eight agents leave one after the other (r = 2: no shard is lost);
     * the guest agent stays. Four agents, four shards, r = 2: each is a
     * holder of two and primary for one, so the guest agent trains its
     * primary and its guest copy goes (unless placement gave it that
     * shard). */
    for (uint32_t i = 0, left = 0; i < c.n && left < 8; i++)
        if (i != guest_agent) {
            set_member(&c, i, 0);
            left++;
            view_all(&c);
            settle(&c, seed);
        }
    for (int k = 0; k < 20; k++)
        step(&c, 100000);
    tc = check_train(&c);
    assert_int_equal(tc.by_source[GOSSIP_TRAIN_PRIMARY], 4);
    for (uint32_t s = 0; s < 4; s++) {
        gossip_shard_status st;
        gossip_shards_status(c.sh[guest_agent], s, &st);
        assert_false(st.guest);
        assert_true(st.held == st.assigned); /* a surplus guest copy was dropped */
    }
    assert_string_equal(gossip_shards_train_source_name(GOSSIP_TRAIN_GUEST), "guest");
    assert_string_equal(gossip_shards_train_reason_name(GOSSIP_TRAIN_PENDING), "primaries_pending");
    assert_string_equal(gossip_shards_train_source_name((gossip_shards_train_source)9), "?");
    cluster_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_agent_trains_s64_n24),
        cmocka_unit_test(more_agents_than_shards),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
