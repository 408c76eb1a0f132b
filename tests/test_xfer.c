/* State transfer on the simulator's engine (sim/engine.h): sources keep
 * training (their vector changes every TRAIN_US, a host event) while a
 * joiner pulls a snapshot over the engine's network (10 MB/s upload, 300 us
 * latency), so the tests check that the joiner gets exactly the source's
 * model at the stamped round. Also corruption, timeouts, the resume policy,
 * hostile bytes and allocation failures. */
#include "tests/harness.h"

#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/xfer.h"
#include "sim/engine.h"

enum { EV_TRAIN = SIM_EV_USER };

#define LATENCY_US      300u
#define BW_BYTES_PER_US 10u
#define TRAIN_US        100u
#define NODES_MAX       6u

typedef struct xnode {
    uint64_t id;
    int alive; /* the test clears it to crash the node */
    int training;
    gossip_xfer *x;
    float *model;
    uint64_t round;
    uint32_t dim;
} xnode;

typedef struct xdriver {
    test_env t;
    uint64_t seed;
    sim_engine *e;
    xnode nodes[NODES_MAX];
    uint32_t n;
    uint64_t now;          /* the engine's clock after the last run */
    uint32_t corrupt_data; /* flip a mantissa bit in this many DATA frames */
    uint32_t poison_data;  /* write a NaN into this many DATA frames */
    uint64_t data_frames;
} xdriver;

/* The model of a source at round r: every value changes every round. */
static float model_at(uint64_t r, uint32_t i)
{
    uint64_t z = ((uint64_t)i * 2654435761u + r * 40503u) % 100003u;
    return (float)z / 1000.0f - 50.0f;
}

static void train(xnode *x)
{
    x->round++;
    for (uint32_t i = 0; i < x->dim; i++)
        x->model[i] = model_at(x->round, i);
}

static int snapshot(void *ctx, float *out, uint32_t dim, uint64_t *round)
{
    xnode *x = ctx;
    memcpy(out, x->model, (size_t)dim * sizeof *out);
    *round = x->round;
    return 0;
}

/* DATA frames in flight: count them, corrupt or poison the next ones. */
static int data_filter(void *ctx, uint32_t from, uint32_t to, uint8_t *f, size_t len)
{
    xdriver *d = ctx;
    (void)from;
    (void)to;
    if (len > GOSSIP_HEADER_SIZE + GOSSIP_XFER_DATA_FIXED && f[3] == GOSSIP_MSG_MODEL_CHUNK &&
        f[GOSSIP_HEADER_SIZE + 4] == GOSSIP_XFER_DATA) {
        d->data_frames++;
        uint8_t *v0 = f + GOSSIP_HEADER_SIZE + GOSSIP_XFER_DATA_FIXED;
        if (d->corrupt_data) {
            v0[3] ^= 1; /* lowest mantissa bit of the first value: still finite */
            d->corrupt_data--;
        } else if (d->poison_data) {
            gossip_put_u32(v0, 0x7FC00000u); /* NaN */
            d->poison_data--;
        }
    }
    return 0;
}

static void train_event(void *ctx, const sim_event *ev)
{
    xdriver *d = ctx;
    xnode *x = &d->nodes[ev->agent];
    if (ev->kind == EV_TRAIN && x->alive && x->training) {
        train(x);
        sim_engine_schedule(d->e, sim_engine_now(d->e) + TRAIN_US, EV_TRAIN, ev->agent, 0, 0, NULL);
    }
}

/* A node the test marked dead stops on the engine too. */
static void sync_alive(xdriver *d)
{
    for (uint32_t i = 0; i < d->n; i++)
        if (!d->nodes[i].alive && sim_engine_alive(d->e, i))
            sim_engine_down(d->e, i);
}

static void flush(xdriver *d, uint32_t i)
{
    sync_alive(d);
    sim_engine_drain(d->e, i);
}

static void run_until(xdriver *d, uint64_t until)
{
    sync_alive(d);
    assert_true(sim_engine_run_until(d->e, until, NULL, NULL) >= 0);
    assert_int_equal(sim_engine_failed(d->e), 0);
    d->now = sim_engine_now(d->e);
}

/* Node 0 is the joiner; 1..n-1 are sources that train from round 100. */
static void xdriver_init(xdriver *d, uint64_t seed, uint32_t n, uint32_t dim, uint32_t chunk)
{
    memset(d, 0, sizeof *d);
    d->seed = seed;
    test_env_init(&d->t, seed);
    sim_net_config nc = {.agents = n,
                         .seed = seed,
                         .up_bps = BW_BYTES_PER_US * 8e6,
                         .latency_ms = LATENCY_US / 1000.0};
    sim_engine_config ec = {.agents = n,
                            .seed = seed,
                            .mode = SIM_MODE_TIMED,
                            .net = &nc,
                            .hooks = {.ctx = d, .event = train_event, .filter = data_filter}};
    assert_int_equal(sim_engine_create(&d->e, &ec), SIM_ENGINE_OK);
    d->n = n;
    for (uint32_t i = 0; i < n; i++) {
        xnode *x = &d->nodes[i];
        x->id = 1000 + 7 * (uint64_t)i;
        x->alive = 1;
        x->training = i > 0;
        x->dim = dim;
        x->model = malloc((size_t)dim * sizeof *x->model);
        x->round = 100 + model_rng_below(&d->t.rng, 50);
        for (uint32_t k = 0; k < dim; k++)
            x->model[k] = model_at(x->round, k);
        gossip_xfer_config c;
        gossip_xfer_config_default(&c);
        c.self = x->id;
        c.dim = dim;
        c.chunk_values = chunk;
        c.timeout_us = 100000;
        c.serve_idle_us = 1000000;
        c.snapshot = snapshot;
        c.snapshot_ctx = x;
        assert_int_equal(gossip_xfer_create(&x->x, &d->t.env, &c), GOSSIP_OK);
        assert_int_equal(sim_engine_set_id(d->e, i, x->id), SIM_ENGINE_OK);
        sim_engine_set_node(d->e, i, &sim_ops_xfer, x->x);
        sim_engine_up(d->e, i);
        if (x->training)
            sim_engine_schedule(d->e, TRAIN_US, EV_TRAIN, i, 0, 0, NULL);
    }
}

static void xdriver_free(xdriver *d)
{
    sim_engine_destroy(d->e);
    for (uint32_t i = 0; i < d->n; i++) {
        gossip_xfer_destroy(d->nodes[i].x);
        free(d->nodes[i].model);
    }
    assert_int_equal(d->t.alloc.live, 0);
}

static void join_from(xdriver *d, const uint32_t *src, uint32_t k, int has_ckpt, uint64_t ckpt)
{
    uint64_t peers[NODES_MAX];
    for (uint32_t i = 0; i < k; i++)
        peers[i] = d->nodes[src[i]].id;
    assert_int_equal(gossip_xfer_start(d->nodes[0].x, peers, k, has_ckpt, ckpt, d->now), GOSSIP_OK);
    flush(d, 0);
}

static gossip_xfer_state run_until_done(xdriver *d, uint64_t limit_us)
{
    uint64_t end = d->now + limit_us;
    while (d->now < end && gossip_xfer_get_state(d->nodes[0].x) == GOSSIP_XFER_RUNNING)
        run_until(d, d->now + 1000);
    return gossip_xfer_get_state(d->nodes[0].x);
}

/* The joiner's model equals model_at(R) for the stamped round R. */
static uint64_t check_result(xdriver *d)
{
    uint32_t dim = d->nodes[0].dim;
    float *got = malloc((size_t)dim * sizeof *got);
    uint64_t round;
    assert_int_equal(gossip_xfer_result(d->nodes[0].x, got, &round), GOSSIP_OK);
    for (uint32_t i = 0; i < dim; i++)
        if (got[i] != model_at(round, i))
            fail_msg("seed %llu: value %u differs from the source's at round %llu",
                     (unsigned long long)d->seed, i, (unsigned long long)round);
    free(got);
    return round;
}

static const gossip_xfer_counters *ctr(xdriver *d, uint32_t i)
{
    return gossip_xfer_counters_get(d->nodes[i].x);
}

/* ------------------------------------------------------------------------- */

static void snapshot_consistent_while_source_trains(void **state)
{
    (void)state;
    xdriver d;
    xdriver_init(&d, test_seed(31), 3, 100003, 1000);
    run_until(&d, 5000);
    uint64_t r_before = d.nodes[1].round;
    uint32_t src[2] = {1, 2};
    join_from(&d, src, 2, 0, 0);
    assert_int_equal(run_until_done(&d, 10000000), GOSSIP_XFER_COMPLETE);
    uint64_t r = check_result(&d);
    /* Stamped at request time (the START frame takes about LATENCY_US to
     * arrive, a few training rounds), and the source trained on meanwhile. */
    assert_true(r >= r_before && r <= r_before + (LATENCY_US + 200) / TRAIN_US + 1);
    assert_true(d.nodes[1].round > r + 100);
    assert_int_equal(ctr(&d, 0)->completed, 1);
    assert_int_equal(ctr(&d, 1)->snapshots, 1);
    /* DONE released the snapshot at the source. */
    run_until(&d, d.now + 10000);
    assert_int_equal(ctr(&d, 1)->expired, 0);
    xdriver_free(&d);
}

static void corrupted_chunk_rejected_and_refetched(void **state)
{
    (void)state;
    xdriver d;
    xdriver_init(&d, test_seed(32), 3, 20000, 512);
    d.corrupt_data = 1;
    uint32_t src[2] = {1, 2};
    join_from(&d, src, 2, 0, 0);
    assert_int_equal(run_until_done(&d, 10000000), GOSSIP_XFER_COMPLETE);
    check_result(&d);
    assert_int_equal(ctr(&d, 0)->hash_bad, 1);
    assert_int_equal(ctr(&d, 0)->restarts, 1);
    assert_int_equal(ctr(&d, 2)->snapshots, 1); /* refetched from the second peer */
    xdriver_free(&d);

    xdriver_init(&d, test_seed(33), 3, 20000, 512);
    d.poison_data = 1;
    join_from(&d, src, 2, 0, 0);
    assert_int_equal(run_until_done(&d, 10000000), GOSSIP_XFER_COMPLETE);
    check_result(&d);
    assert_int_equal(ctr(&d, 0)->nonfinite, 1);
    xdriver_free(&d);
}

static void dead_peer_times_out_then_next(void **state)
{
    (void)state;
    xdriver d;
    xdriver_init(&d, test_seed(34), 4, 5000, 256);
    d.nodes[1].alive = 0;
    uint32_t src[3] = {1, 2, 3};
    join_from(&d, src, 3, 0, 0);
    assert_int_equal(run_until_done(&d, 10000000), GOSSIP_XFER_COMPLETE);
    check_result(&d);
    assert_int_equal(ctr(&d, 0)->timeouts, 1);
    assert_int_equal(ctr(&d, 2)->snapshots, 1);
    assert_int_equal(ctr(&d, 3)->snapshots, 0);
    xdriver_free(&d);

    /* Source dies mid-transfer. */
    xdriver_init(&d, test_seed(35), 3, 50000, 500);
    join_from(&d, src, 2, 0, 0);
    run_until(&d, d.now + 5000);
    assert_int_equal(gossip_xfer_get_state(d.nodes[0].x), GOSSIP_XFER_RUNNING);
    d.nodes[1].alive = 0;
    assert_int_equal(run_until_done(&d, 10000000), GOSSIP_XFER_COMPLETE);
    check_result(&d);
    assert_int_equal(ctr(&d, 0)->timeouts, 1);
    xdriver_free(&d);

    /* Every peer dead: FAILED after GOSSIP_XFER_PASSES passes. */
    xdriver_init(&d, test_seed(36), 3, 1000, 256);
    d.nodes[1].alive = d.nodes[2].alive = 0;
    join_from(&d, src, 2, 0, 0);
    assert_int_equal(run_until_done(&d, 10000000), GOSSIP_XFER_FAILED);
    assert_int_equal(ctr(&d, 0)->timeouts, 2 * GOSSIP_XFER_PASSES);
    assert_int_equal(ctr(&d, 0)->failed, 1);
    assert_int_equal(gossip_xfer_result(d.nodes[0].x, d.nodes[0].model, &(uint64_t){0}),
                     GOSSIP_ENOTFOUND);
    xdriver_free(&d);
}

static void resume_policy(void **state)
{
    (void)state;
    assert_true(gossip_xfer_should_resume(100, 100, 0));
    assert_true(gossip_xfer_should_resume(100, 90, 0)); /* checkpoint ahead */
    assert_true(gossip_xfer_should_resume(100, 120, 20));
    assert_false(gossip_xfer_should_resume(100, 121, 20));
    assert_false(gossip_xfer_should_resume(0, UINT64_MAX, 20));

    /* Recent checkpoint: RESUME, no data chunk served, snapshot released. */
    xdriver d;
    xdriver_init(&d, test_seed(37), 2, 30000, 1000);
    long base = d.t.alloc.live;
    uint32_t src[1] = {1};
    uint64_t ckpt = d.nodes[1].round - 5;
    join_from(&d, src, 1, 1, ckpt);
    assert_int_equal(run_until_done(&d, 10000000), GOSSIP_XFER_RESUME);
    assert_int_equal(ctr(&d, 1)->served_chunks, 0);
    run_until(&d, d.now + 5000);
    assert_int_equal(d.t.alloc.live, base);
    uint64_t pr = gossip_xfer_peer_round(d.nodes[0].x);
    assert_true(pr > ckpt && pr <= ckpt + GOSSIP_XFER_RESUME_DEFAULT && pr <= d.nodes[1].round);
    /* Old checkpoint: a full transfer. */
    join_from(&d, src, 1, 1, d.nodes[1].round - 21 - 10);
    assert_int_equal(run_until_done(&d, 10000000), GOSSIP_XFER_COMPLETE);
    check_result(&d);
    assert_true(ctr(&d, 1)->served_chunks >= 30);
    xdriver_free(&d);
}

static void source_busy_and_oom_nack(void **state)
{
    (void)state;
    xdriver d;
    xdriver_init(&d, test_seed(38), 3, 20000, 1000);
    /* The source's snapshot allocation fails: NACK busy, next peer. */
    uint32_t src[2] = {1, 2};
    join_from(&d, src, 2, 0, 0);
    d.t.alloc.count = 0;
    d.t.alloc.fail_at = 1; /* the next allocation anywhere: node 1's snapshot */
    assert_int_equal(run_until_done(&d, 10000000), GOSSIP_XFER_COMPLETE);
    check_result(&d);
    assert_int_equal(ctr(&d, 1)->serve_busy, 1);
    assert_int_equal(ctr(&d, 0)->nacks, 1);
    xdriver_free(&d);
}

static void random_bytes_never_crash(void **state)
{
    (void)state;
    uint64_t seed = test_seed(39);
    xdriver d;
    xdriver_init(&d, seed, 3, 3000, 256);
    uint32_t src[2] = {1, 2};
    join_from(&d, src, 2, 0, 0);
    model_rng rng;
    model_rng_seed(&rng, seed, 7);
    static uint8_t buf[2048];
    for (int it = 0; it < 100000; it++) {
        size_t len = model_rng_below(&rng, it % 10 == 0 ? sizeof buf : 80);
        for (size_t j = 0; j < len; j++)
            buf[j] = (uint8_t)model_rng_u64(&rng);
        if (len > 5 && (it & 1))
            buf[4] &= 3;
        uint8_t type = (uint8_t)(0x30 + model_rng_below(&rng, 4));
        gossip_xfer_msg m;
        int rc = gossip_xfer_msg_decode(type, buf, len, &m);
        assert_true(rc >= 0 && rc < GOSSIP_ERR_COUNT);
        gossip_header h = {.type = type, .payload_len = (uint32_t)len, .round = it % 3};
        uint32_t i = (uint32_t)model_rng_below(&rng, 3);
        gossip_xfer_recv(d.nodes[i].x, d.nodes[(i + 1) % 3].id, &h, buf, len, d.now);
        flush(&d, i);
        if (it % 1000 == 0)
            run_until(&d, d.now + 1000);
    }
    assert_true(ctr(&d, 0)->rejected + ctr(&d, 1)->rejected + ctr(&d, 2)->rejected > 0);
    /* The real transfer still completes or fails cleanly; if it completed
     * the model is the source's. */
    gossip_xfer_state st = run_until_done(&d, 10000000);
    assert_true(st == GOSSIP_XFER_COMPLETE || st == GOSSIP_XFER_FAILED);
    if (st == GOSSIP_XFER_COMPLETE)
        check_result(&d);
    xdriver_free(&d);
}

/* Byte layouts of the state-transfer messages (docs/SHARDS_REPLICATION.md):
 * A (0x0A) pulls a 3-value model at round 77 from B (0x0B) in chunks of 2. */
static int fixed_model(void *ctx, float *out, uint32_t dim, uint64_t *round)
{
    (void)ctx;
    static const float v[3] = {1.0f, -2.0f, 0.5f};
    memcpy(out, v, dim * sizeof *out);
    *round = 77;
    return 0;
}

static void wire_layout_golden(void **state)
{
    (void)state;
    test_env t;
    test_env_init(&t, test_seed(30));
    gossip_xfer_config c;
    gossip_xfer_config_default(&c);
    c.dim = 3;
    c.chunk_values = 2;
    c.snapshot = fixed_model;
    gossip_xfer *a, *b;
    c.self = 0x0A;
    assert_int_equal(gossip_xfer_create(&a, &t.env, &c), GOSSIP_OK);
    c.self = 0x0B;
    assert_int_equal(gossip_xfer_create(&b, &t.env, &c), GOSSIP_OK);
    uint64_t peer = 0x0B;
    assert_int_equal(gossip_xfer_start(a, &peer, 1, 0, 0, 0), GOSSIP_OK);
    gossip_send out;
    gossip_header h;
    uint8_t f[128], want[128];
    /* 1. WANT START */
    assert_int_equal(gossip_xfer_poll_send(a, &out, 0), 1);
    assert_true(out.dest == 0x0B && out.len == 32 + 11);
    static const uint8_t hdr[32] = {0x4D, 0x52, 0x01, 0x30, 0, 0, 0, 11, 0, 0, 0, 0, 0, 0, 0, 0x0A,
                                    0,    0,    0,    0,    0, 0, 0, 0,  0, 0, 0, 0, 0, 0, 0, 0};
    assert_memory_equal(out.frame, hdr, 32);
    uint32_t xfer = gossip_get_u32(out.frame + 32);
    static const uint8_t start_tail[7] = {0, 0, 0, 0, 0, 0, 0};
    assert_memory_equal(out.frame + 36, start_tail, 7);
    memcpy(f, out.frame, out.len);
    assert_int_equal(gossip_header_decode(f, out.len, &h), GOSSIP_OK);
    assert_int_equal(gossip_xfer_recv(b, 0x0A, &h, f + 32, h.payload_len, 0), GOSSIP_OK);
    /* 2. CHUNK INFO: round 77 (also in the header), dim 3, 2 per chunk, 2
     * chunks, BLAKE2b-256(round || dim || values, big-endian). */
    assert_int_equal(gossip_xfer_poll_send(b, &out, 0), 1);
    assert_true(out.len == 32 + 57 && out.frame[3] == 0x31);
    assert_true(gossip_get_u64(out.frame + 24) == 77);
    static const uint8_t body[24] = {0, 0, 0, 0, 0, 0, 0, 77, 0,    0,    0, 3,
                                     0, 0, 0, 2, 0, 0, 0, 2,  0x3F, 0x80, 0, 0};
    uint8_t *p = want;
    gossip_put_u32(p, xfer), p += 4;
    *p++ = 0;
    memcpy(p, body, 20), p += 20;
    uint8_t hashed[24];
    memcpy(hashed, body, 8);         /* round */
    memcpy(hashed + 8, body + 8, 4); /* dim */
    static const uint8_t values[12] = {0x3F, 0x80, 0, 0, 0xC0, 0, 0, 0, 0x3F, 0, 0, 0};
    memcpy(hashed + 12, values, 12);
    crypto_generichash(p, 32, hashed, 24, NULL, 0);
    assert_memory_equal(out.frame + 32, want, 57);
    memcpy(f, out.frame, out.len);
    assert_int_equal(gossip_header_decode(f, out.len, &h), GOSSIP_OK);
    assert_int_equal(gossip_xfer_recv(a, 0x0B, &h, f + 32, h.payload_len, 0), GOSSIP_OK);
    /* 3. WANT DATA first 0 count 2 */
    assert_int_equal(gossip_xfer_poll_send(a, &out, 0), 1);
    static const uint8_t data_tail[7] = {1, 0, 0, 0, 0, 0, 2};
    assert_memory_equal(out.frame + 36, data_tail, 7);
    memcpy(f, out.frame, out.len);
    assert_int_equal(gossip_header_decode(f, out.len, &h), GOSSIP_OK);
    assert_int_equal(gossip_xfer_recv(b, 0x0A, &h, f + 32, h.payload_len, 0), GOSSIP_OK);
    /* 4. CHUNK DATA 0: {1, -2}; 1: {0.5} */
    for (uint32_t k = 0; k < 2; k++) {
        assert_int_equal(gossip_xfer_poll_send(b, &out, 0), 1);
        uint32_t n = k ? 1 : 2;
        assert_true(out.len == 32 + 13 + 4 * n);
        p = want;
        gossip_put_u32(p, xfer), p += 4;
        *p++ = 1;
        gossip_put_u32(p, k), p += 4;
        gossip_put_u32(p, n), p += 4;
        memcpy(p, values + 8 * k, 4 * n);
        assert_memory_equal(out.frame + 32, want, 13 + 4 * n);
        memcpy(f, out.frame, out.len);
        assert_int_equal(gossip_header_decode(f, out.len, &h), GOSSIP_OK);
        assert_int_equal(gossip_xfer_recv(a, 0x0B, &h, f + 32, h.payload_len, 0), GOSSIP_OK);
    }
    assert_int_equal(gossip_xfer_get_state(a), GOSSIP_XFER_COMPLETE);
    float got[3];
    uint64_t round;
    assert_int_equal(gossip_xfer_result(a, got, &round), GOSSIP_OK);
    assert_true(round == 77 && got[0] == 1.0f && got[1] == -2.0f && got[2] == 0.5f);
    /* 5. WANT DONE releases the snapshot; a later DATA gets NACK GONE. */
    assert_int_equal(gossip_xfer_poll_send(a, &out, 0), 1);
    assert_int_equal(out.frame[36], GOSSIP_XFER_DONE);
    memcpy(f, out.frame, out.len);
    assert_int_equal(gossip_header_decode(f, out.len, &h), GOSSIP_OK);
    assert_int_equal(gossip_xfer_recv(b, 0x0A, &h, f + 32, h.payload_len, 0), GOSSIP_OK);
    f[36] = GOSSIP_XFER_DATA;
    f[42] = 1;
    assert_int_equal(gossip_xfer_recv(b, 0x0A, &h, f + 32, h.payload_len, 0), GOSSIP_OK);
    assert_int_equal(gossip_xfer_poll_send(b, &out, 0), 1);
    assert_true(out.len == 32 + 5 && out.frame[3] == 0x32);
    assert_int_equal(gossip_get_u32(out.frame + 32), xfer);
    assert_int_equal(out.frame[36], GOSSIP_XFER_GONE);
    gossip_xfer_destroy(a);
    gossip_xfer_destroy(b);
    assert_int_equal(t.alloc.live, 0);
}

/* One peer holds at most one snapshot slot: its repeated STARTs replace its
 * snapshot, so a second peer is still served. */
static void one_snapshot_slot_per_peer(void **state)
{
    (void)state;
    test_env t;
    test_env_init(&t, test_seed(41));
    gossip_xfer_config c;
    gossip_xfer_config_default(&c);
    c.self = 0x0B;
    c.dim = 3;
    c.snapshot = fixed_model;
    gossip_xfer *b;
    assert_int_equal(gossip_xfer_create(&b, &t.env, &c), GOSSIP_OK);
    long base = t.alloc.live;
    uint8_t p[GOSSIP_XFER_WANT_SIZE] = {0};
    gossip_header h = {.type = GOSSIP_MSG_MODEL_WANT, .payload_len = sizeof p};
    for (uint32_t k = 0; k < 10; k++) {
        gossip_put_u32(p, k);
        assert_int_equal(gossip_xfer_recv(b, 0x0A, &h, p, sizeof p, 0), GOSSIP_OK);
    }
    assert_int_equal(t.alloc.live, base + 1); /* one snapshot for 0x0A */
    gossip_put_u32(p, 99);
    assert_int_equal(gossip_xfer_recv(b, 0x0C, &h, p, sizeof p, 0), GOSSIP_OK);
    assert_int_equal(gossip_xfer_counters_get(b)->snapshots, 11);
    assert_int_equal(gossip_xfer_counters_get(b)->serve_busy, 0);
    /* Only the latest START of 0x0A and the one of 0x0C get an INFO. */
    gossip_send out;
    uint32_t infos = 0;
    while (gossip_xfer_poll_send(b, &out, 0) == 1) {
        assert_int_equal(out.frame[3], GOSSIP_MSG_MODEL_CHUNK);
        uint32_t xfer = gossip_get_u32(out.frame + 32);
        assert_true((out.dest == 0x0A && xfer == 9) || (out.dest == 0x0C && xfer == 99));
        infos++;
    }
    assert_int_equal(infos, 2);
    gossip_xfer_destroy(b);
    assert_int_equal(t.alloc.live, 0);
}

static void create_survives_oom(void **state)
{
    (void)state;
    test_env t;
    test_env_init(&t, test_seed(40));
    gossip_xfer_config c;
    gossip_xfer_config_default(&c);
    c.self = 5;
    c.dim = 1000;
    for (long k = 1;; k++) {
        t.alloc.count = 0;
        t.alloc.fail_at = k;
        gossip_xfer *x = NULL;
        int rc = gossip_xfer_create(&x, &t.env, &c);
        if (rc == GOSSIP_OK) {
            uint64_t peers[2] = {6, 7};
            assert_int_equal(gossip_xfer_start(x, peers, 2, 0, 0, 0), GOSSIP_OK);
            assert_int_equal(gossip_xfer_start(x, peers, 2, 0, 0, 0), GOSSIP_EFULL);
            gossip_xfer_destroy(x);
            assert_int_equal(t.alloc.live, 0);
            break;
        }
        assert_int_equal(rc, GOSSIP_ENOMEM);
        assert_null(x);
        assert_int_equal(t.alloc.live, 0);
    }
    t.alloc.fail_at = 0;
    gossip_xfer *x;
    c.dim = 0;
    assert_int_equal(gossip_xfer_create(&x, &t.env, &c), GOSSIP_EINVAL);
    c.dim = 10;
    c.chunk_values = GOSSIP_XFER_CHUNK_MAX + 1;
    assert_int_equal(gossip_xfer_create(&x, &t.env, &c), GOSSIP_EINVAL);
    c.chunk_values = 4;
    assert_int_equal(gossip_xfer_create(&x, &t.env, &c), GOSSIP_OK);
    uint64_t self_peer[1] = {5};
    assert_int_equal(gossip_xfer_start(x, self_peer, 1, 0, 0, 0), GOSSIP_EINVAL);
    assert_int_equal(gossip_xfer_start(x, self_peer, 0, 0, 0, 0), GOSSIP_EINVAL);
    gossip_xfer_destroy(x);
    assert_int_equal(t.alloc.live, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(wire_layout_golden),
        cmocka_unit_test(snapshot_consistent_while_source_trains),
        cmocka_unit_test(corrupted_chunk_rejected_and_refetched),
        cmocka_unit_test(dead_peer_times_out_then_next),
        cmocka_unit_test(resume_policy),
        cmocka_unit_test(source_busy_and_oom_nack),
        cmocka_unit_test(random_bytes_never_crash),
        cmocka_unit_test(one_snapshot_slot_per_peer),
        cmocka_unit_test(create_survives_oom),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
