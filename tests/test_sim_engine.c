/* sim/engine: the one event core. Frames arrive at send time + latency +
 * transfer time (timed) and in FIFO order per link; rounds mode delivers
 * every frame and every frame it causes, in a seeded order, FIFO per link;
 * loss, partitions, the filter and the delay hook apply; an event loop's
 * cost per frame delays frames one at a time per agent; a down agent
 * neither receives nor ticks and its stale timer never fires after a
 * restart; frames to unknown ids, to addresses and to oneself are routed
 * or counted; the same seed gives the same trace hash. */
#include "tests/harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/engine.h"
#include "sim/output.h"
#include "sim/run.h"
#include "sim/scenario.h"

#define PROBES  8u
#define OUT_MAX 64u
#define LOG_MAX 4096u

/* A tiny sans-IO object: sends what is queued in its outbox, answers
 * every frame whose round is odd with round - 1 (an echo), logs every
 * delivery, and has an optional timer that queues one frame. */
typedef struct probe {
    uint64_t id;
    uint32_t payload; /* payload bytes per frame */
    struct {
        uint64_t dest;
        uint64_t round;
        const char *addr;
    } out[OUT_MAX];
    uint32_t nout, sent;
    struct {
        uint64_t from, round, at;
    } log[LOG_MAX];
    uint32_t nlog;
    gossip_time_us timer; /* GOSSIP_TIME_NEVER: none */
    uint64_t timer_dest;
    uint32_t ticks;
    uint8_t frame[GOSSIP_HEADER_SIZE + 4096];
} probe;

static void probe_queue(probe *p, uint64_t dest, uint64_t round)
{
    assert_true(p->nout < OUT_MAX);
    p->out[p->nout].dest = dest;
    p->out[p->nout].addr = NULL;
    p->out[p->nout++].round = round;
}

static int probe_recv(void *node, uint64_t from, const gossip_header *h, const uint8_t *payload,
                      size_t len, gossip_time_us now)
{
    probe *p = node;
    (void)payload;
    assert_int_equal(len, p->payload);
    assert_true(p->nlog < LOG_MAX);
    p->log[p->nlog].from = from;
    p->log[p->nlog].round = h->round;
    p->log[p->nlog++].at = now;
    if (h->round & 1)
        probe_queue(p, from, h->round - 1);
    return 0;
}

static int probe_tick(void *node, gossip_time_us now)
{
    probe *p = node;
    if (p->timer != GOSSIP_TIME_NEVER && now >= p->timer) {
        p->timer = GOSSIP_TIME_NEVER;
        p->ticks++;
        probe_queue(p, p->timer_dest, 1000 + p->ticks * 2);
    }
    return 0;
}

static int probe_poll(void *node, gossip_send *s, gossip_time_us now)
{
    probe *p = node;
    (void)now;
    if (p->sent == p->nout) {
        p->sent = p->nout = 0;
        return 0;
    }
    gossip_header h = {.version = GOSSIP_WIRE_VERSION,
                       .type = GOSSIP_MSG_PING,
                       .payload_len = p->payload,
                       .sender = p->id,
                       .round = p->out[p->sent].round};
    gossip_header_encode(&h, p->frame);
    memset(p->frame + GOSSIP_HEADER_SIZE, 0xA5, p->payload);
    s->dest = p->out[p->sent].dest;
    s->dest_addr = p->out[p->sent].addr;
    s->frame = p->frame;
    s->len = GOSSIP_HEADER_SIZE + p->payload;
    p->sent++;
    return 1;
}

static gossip_time_us probe_deadline(const void *node)
{
    return ((const probe *)node)->timer;
}

static const sim_node_ops probe_ops = {probe_recv, probe_tick, probe_poll, probe_deadline, NULL};

typedef struct world {
    sim_engine *e;
    probe p[PROBES];
} world;

static uint64_t pid(uint32_t i)
{
    return 0x7000 + 13 * (uint64_t)i; /* not index + 1: the id table is used */
}

static void world_init(world *w, uint32_t n, const sim_engine_config *base, uint32_t payload)
{
    memset(w, 0, sizeof *w);
    sim_engine_config c = *base;
    c.agents = n;
    assert_int_equal(sim_engine_create(&w->e, &c), SIM_ENGINE_OK);
    for (uint32_t i = 0; i < n; i++) {
        w->p[i].id = pid(i);
        w->p[i].payload = payload;
        w->p[i].timer = GOSSIP_TIME_NEVER;
        assert_int_equal(sim_engine_set_id(w->e, i, pid(i)), SIM_ENGINE_OK);
        sim_engine_set_node(w->e, i, &probe_ops, &w->p[i]);
        sim_engine_up(w->e, i);
    }
}

/* Timed mode: a frame of B bytes over a link of U bits/s with latency L
 * arrives at exactly L + 8B/U after it was sent; frames on one link arrive
 * in order and one after another; the echo comes back a round trip later. */
static void timed_latency_bandwidth_fifo(void **state)
{
    (void)state;
    sim_net_config nc = {.agents = 2, .seed = 3, .latency_ms = 2, .up_bps = 8e6};
    sim_engine_config c = {.seed = 3, .mode = SIM_MODE_TIMED, .net = &nc};
    world w;
    world_init(&w, 2, &c, 968); /* 1000-byte frames: 1 ms each at 8 Mb/s */
    for (uint64_t k = 0; k < 3; k++)
        probe_queue(&w.p[0], pid(1), 2 * k + 1);
    sim_engine_drain(w.e, 0);
    assert_true(sim_engine_run_until(w.e, 100000, NULL, NULL) > 0);
    assert_int_equal(w.p[1].nlog, 3);
    for (uint32_t k = 0; k < 3; k++) {
        assert_int_equal(w.p[1].log[k].round, 2 * k + 1);
        assert_int_equal(w.p[1].log[k].from, pid(0));
        assert_int_equal(w.p[1].log[k].at, 2000 + 1000 * (k + 1));
    }
    /* echoes: sent at 3, 4, 5 ms, each 1 ms on the wire plus 2 ms */
    assert_int_equal(w.p[0].nlog, 3);
    for (uint32_t k = 0; k < 3; k++)
        assert_int_equal(w.p[0].log[k].at, 2000 + 1000 * (k + 1) + 3000);
    const sim_engine_stats *st = sim_engine_get_stats(w.e);
    assert_int_equal(st->sent, 6);
    assert_int_equal(st->delivered, 6);
    assert_int_equal(st->lost, 0);
    assert_int_equal(sim_engine_bytes_sent(w.e, 0), 3000);
    assert_int_equal(sim_engine_bytes_recv(w.e, 0), 3000);
    assert_int_equal(sim_engine_now(w.e), 100000);
    sim_engine_destroy(w.e);
}

/* Event loops (engine.h): with a cost per frame, each agent's loop spends
 * it on every frame it sends (before the link) and receives (before recv),
 * one frame at a time, sending and receiving alike: 1000-byte frames at
 * 100 us + 100 ns per byte = 200 us each end, 2 ms links, no bandwidth
 * limit. Agent 0's three frames leave at 0.2, 0.4, 0.6 ms and arrive at
 * 2.2, 2.4, 2.6; agent 1's loop takes them, and the echo of each, in turn:
 * recv at 2.4, 2.6 and 3.0 ms (the first echo took 2.6-2.8), the echoes
 * leave at 2.8, 3.2, 3.4 and agent 0 takes them at 5.0, 5.4 and 5.6. A
 * frame the loop holds when its agent goes down is lost (dead). */
static void timed_event_loop_cost(void **state)
{
    (void)state;
    sim_net_config nc = {.agents = 2, .seed = 3, .latency_ms = 2};
    sim_engine_config c = {.seed = 3,
                           .mode = SIM_MODE_TIMED,
                           .net = &nc,
                           .loop_frame_ns = 100000,
                           .loop_byte_ns = 100};
    world w;
    world_init(&w, 2, &c, 1000 - GOSSIP_HEADER_SIZE);
    for (uint64_t k = 0; k < 3; k++)
        probe_queue(&w.p[0], pid(1), 2 * k + 1);
    sim_engine_drain(w.e, 0);
    assert_true(sim_engine_run_until(w.e, 100000, NULL, NULL) > 0);
    static const gossip_time_us at1[] = {2400, 2600, 3000}, at0[] = {5000, 5400, 5600};
    assert_int_equal(w.p[1].nlog, 3);
    assert_int_equal(w.p[0].nlog, 3);
    for (uint32_t k = 0; k < 3; k++) {
        assert_int_equal(w.p[1].log[k].round, 2 * k + 1);
        assert_int_equal(w.p[1].log[k].at, at1[k]);
        assert_int_equal(w.p[0].log[k].at, at0[k]);
    }
    uint64_t h = sim_engine_trace_hash(w.e);
    /* down while its loop holds the frame: lost */
    probe_queue(&w.p[0], pid(1), 2);
    sim_engine_drain(w.e, 0);
    sim_engine_down(w.e, 0);
    sim_engine_run_until(w.e, 200000, NULL, NULL);
    assert_int_equal(w.p[1].nlog, 3);
    assert_int_equal(sim_engine_get_stats(w.e)->dead, 1);
    sim_engine_destroy(w.e);
    /* the same run again: the same hash; bad costs are refused */
    world_init(&w, 2, &c, 1000 - GOSSIP_HEADER_SIZE);
    for (uint64_t k = 0; k < 3; k++)
        probe_queue(&w.p[0], pid(1), 2 * k + 1);
    sim_engine_drain(w.e, 0);
    sim_engine_run_until(w.e, 100000, NULL, NULL);
    assert_int_equal(sim_engine_trace_hash(w.e), h);
    sim_engine_destroy(w.e);
    sim_engine *bad = NULL;
    sim_engine_config b = c;
    b.agents = 2;
    b.loop_byte_ns = -1;
    assert_int_equal(sim_engine_create(&bad, &b), SIM_ENGINE_EINVAL);
    b.loop_byte_ns = 0;
    b.loop_frame_ns = SIM_ENGINE_LOOP_FRAME_NS_MAX + 1;
    assert_int_equal(sim_engine_create(&bad, &b), SIM_ENGINE_EINVAL);
}

/* Rounds mode: every frame and every echo it causes is delivered in one
 * deliver_pending call, FIFO per link, in an order drawn from the seed. */
static void rounds_deliver_cascade_fifo(void **state)
{
    (void)state;
    sim_engine_config c = {.seed = test_seed(4), .mode = SIM_MODE_ROUNDS, .order_stream = 99};
    world w;
    world_init(&w, PROBES, &c, 8);
    for (uint32_t i = 0; i < PROBES; i++)
        for (uint32_t k = 0; k < 5; k++)
            probe_queue(&w.p[i], pid((i + 1 + k) % PROBES), 2 * (10 * i + k) + 1);
    for (uint32_t i = 0; i < PROBES; i++)
        sim_engine_drain(w.e, i);
    assert_int_equal(sim_engine_pending(w.e), PROBES * 5);
    long n = sim_engine_deliver_pending(w.e);
    assert_int_equal(n, 2 * PROBES * 5); /* the frames and their echoes */
    assert_int_equal(sim_engine_pending(w.e), 0);
    for (uint32_t i = 0; i < PROBES; i++) {
        assert_int_equal(w.p[i].nlog, 10);
        /* per sender, rounds arrive increasing (FIFO per link) */
        for (uint32_t a = 0; a < w.p[i].nlog; a++)
            for (uint32_t b = a + 1; b < w.p[i].nlog; b++)
                if (w.p[i].log[a].from == w.p[i].log[b].from && (w.p[i].log[a].round & 1) &&
                    (w.p[i].log[b].round & 1))
                    assert_true(w.p[i].log[a].round < w.p[i].log[b].round);
    }
    sim_engine_destroy(w.e);
}

/* Rounds mode, several frames per link: every sender sends 3 frames to
 * each of 7 peers, the peers taken in turn (more links than a sender keeps
 * in its agent, so some live in its table), small frames from the slabs
 * and large ones malloc'd one by one; each link's frames arrive in the
 * order they were sent, in two epochs of the pending set one after the
 * other (the second finds every link of the first emptied), then an epoch
 * of echoes. */
static void rounds_fifo_per_link_beyond_near_tails(void **state)
{
    (void)state;
    const uint32_t payloads[] = {8, 3000};
    for (uint32_t pl = 0; pl < 2; pl++) {
        sim_engine_config c = {
            .seed = test_seed(5 + pl), .mode = SIM_MODE_ROUNDS, .order_stream = 3};
        world w;
        world_init(&w, PROBES, &c, payloads[pl]);
        for (uint32_t epoch = 0; epoch < 2; epoch++) {
            for (uint32_t i = 0; i < PROBES; i++)
                for (uint32_t k = 0; k < 3; k++)
                    for (uint32_t d = 1; d < PROBES; d++)
                        probe_queue(&w.p[i], pid((i + d) % PROBES),
                                    2 * (1000 * epoch + 100 * k + d)); /* even: no echo */
            for (uint32_t i = 0; i < PROBES; i++)
                sim_engine_drain(w.e, i);
            assert_int_equal(sim_engine_pending(w.e), PROBES * 3 * (PROBES - 1));
            assert_int_equal(sim_engine_deliver_pending(w.e), PROBES * 3 * (PROBES - 1));
            for (uint32_t i = 0; i < PROBES; i++) {
                assert_int_equal(w.p[i].nlog, (epoch + 1) * 3 * (PROBES - 1));
                for (uint32_t a = 0; a < w.p[i].nlog; a++)
                    for (uint32_t b = a + 1; b < w.p[i].nlog; b++)
                        if (w.p[i].log[a].from == w.p[i].log[b].from)
                            assert_true(w.p[i].log[a].round < w.p[i].log[b].round);
            }
        }
        /* A third epoch of echoes: a sender's echo on a link whose earlier
         * frame may have been delivered (and a large one freed) already. */
        for (uint32_t i = 0; i < PROBES; i++)
            for (uint32_t d = 1; d < PROBES; d++)
                probe_queue(&w.p[i], pid((i + d) % PROBES), 2 * (3000 + d) + 1);
        for (uint32_t i = 0; i < PROBES; i++)
            sim_engine_drain(w.e, i);
        assert_int_equal(sim_engine_deliver_pending(w.e), 2 * PROBES * (PROBES - 1));
        for (uint32_t i = 0; i < PROBES; i++)
            assert_int_equal(w.p[i].nlog, 2 * 3 * (PROBES - 1) + 2 * (PROBES - 1));
        sim_engine_destroy(w.e);
    }
}

/* Same seed, same hash; the order depends on the seed. */
static uint64_t rounds_hash(uint64_t seed, uint64_t *first_from)
{
    sim_engine_config c = {.seed = seed, .mode = SIM_MODE_ROUNDS, .order_stream = 7};
    world w;
    world_init(&w, PROBES, &c, 16);
    for (uint32_t i = 1; i < PROBES; i++)
        probe_queue(&w.p[i], pid(0), 2 * i);
    for (uint32_t i = 0; i < PROBES; i++)
        sim_engine_drain(w.e, i);
    sim_engine_deliver_pending(w.e);
    sim_engine_trace(w.e, 42);
    *first_from = w.p[0].log[0].from;
    uint64_t h = sim_engine_trace_hash(w.e);
    sim_engine_destroy(w.e);
    return h;
}

static void same_seed_same_hash(void **state)
{
    (void)state;
    uint64_t f1, f2, f3;
    uint64_t a = rounds_hash(1, &f1), b = rounds_hash(1, &f2);
    assert_true(a == b && f1 == f2);
    int differs = 0;
    for (uint64_t s = 2; s < 12; s++)
        differs |= rounds_hash(s, &f3) != a;
    assert_true(differs);
}

/* Loss draws, partitions and the filter drop frames and count them; the
 * delay hook adds to the delivery time; frames to an unknown id or to the
 * sender are lost; an address "sim://i" reaches agent i. */
static int drop_round_5(void *ctx, uint32_t from, uint32_t to, uint8_t *f, size_t len)
{
    (void)ctx;
    (void)from;
    (void)to;
    gossip_header h;
    assert_int_equal(gossip_header_decode(f, len, &h), GOSSIP_OK);
    return h.round == 6;
}

static uint64_t delay_700(void *ctx, uint32_t from, uint32_t to)
{
    (void)ctx;
    return from == 2 && to == 3 ? 700 : 0;
}

static void faults_and_routing(void **state)
{
    (void)state;
    sim_net_config nc = {.agents = 4, .seed = 5, .latency_ms = 1};
    sim_engine_config c = {.seed = 5,
                           .mode = SIM_MODE_TIMED,
                           .net = &nc,
                           .hooks = {.filter = drop_round_5, .delay = delay_700}};
    world w;
    world_init(&w, 4, &c, 8);
    probe_queue(&w.p[0], pid(1), 2); /* delivered */
    probe_queue(&w.p[0], pid(1), 6); /* dropped by the filter */
    probe_queue(&w.p[0], 0xDEAD, 2); /* unknown */
    probe_queue(&w.p[0], pid(0), 2); /* itself */
    probe_queue(&w.p[0], 0, 4);      /* by address, below */
    w.p[0].out[4].addr = "sim://3";
    probe_queue(&w.p[2], pid(3), 8); /* delayed */
    sim_engine_drain(w.e, 0);
    sim_engine_drain(w.e, 2);
    uint32_t group[4] = {0, 0, 1, 1};
    assert_int_equal(sim_engine_set_partition(w.e, group), SIM_ENGINE_OK);
    probe_queue(&w.p[0], pid(2), 2); /* across the partition: lost */
    sim_engine_drain(w.e, 0);
    assert_int_equal(sim_engine_set_partition(w.e, NULL), SIM_ENGINE_OK);
    sim_engine_run_until(w.e, 10000, NULL, NULL);
    assert_int_equal(w.p[1].nlog, 1);
    assert_int_equal(w.p[1].log[0].round, 2);
    assert_int_equal(w.p[3].nlog, 2);
    assert_int_equal(w.p[3].log[0].at, 1000);
    assert_int_equal(w.p[3].log[0].from, pid(0));
    assert_int_equal(w.p[3].log[1].at, 1700);
    assert_int_equal(w.p[2].nlog, 0);
    const sim_engine_stats *st = sim_engine_get_stats(w.e);
    assert_int_equal(st->sent, 7);
    assert_int_equal(st->unknown, 2);
    assert_int_equal(st->dropped, 2);
    assert_int_equal(st->lost, 4);
    /* loss 1: everything sent from now on is lost */
    assert_int_equal(sim_engine_set_loss(w.e, 1), SIM_ENGINE_OK);
    probe_queue(&w.p[0], pid(1), 2);
    sim_engine_drain(w.e, 0);
    sim_engine_run_until(w.e, 20000, NULL, NULL);
    assert_int_equal(w.p[1].nlog, 1);
    assert_int_equal(sim_engine_get_stats(w.e)->dropped, 3);
    sim_engine_destroy(w.e);
}

/* Timers fire at the deadline; a down agent neither receives nor ticks,
 * and the timer it had before going down does not fire after it is up
 * again (its incarnation changed). */
static void down_agents_and_stale_timers(void **state)
{
    (void)state;
    sim_net_config nc = {.agents = 2, .seed = 6, .latency_ms = 1};
    sim_engine_config c = {.seed = 6, .mode = SIM_MODE_TIMED, .net = &nc};
    world w;
    world_init(&w, 2, &c, 8);
    w.p[0].timer = 5000;
    w.p[0].timer_dest = pid(1);
    sim_engine_drain(w.e, 0); /* schedules the tick */
    sim_engine_run_until(w.e, 10000, NULL, NULL);
    assert_int_equal(w.p[0].ticks, 1);
    assert_int_equal(w.p[1].nlog, 1);
    assert_int_equal(w.p[1].log[0].at, 6000);
    /* a timer at 15 ms, then down at 10 ms and up again at 12 ms */
    w.p[0].timer = 15000;
    sim_engine_drain(w.e, 0);
    uint32_t inc = sim_engine_incarnation(w.e, 0);
    sim_engine_down(w.e, 0);
    assert_false(sim_engine_alive(w.e, 0));
    probe_queue(&w.p[1], pid(0), 2); /* to a down agent: lost */
    sim_engine_drain(w.e, 1);
    sim_engine_run_until(w.e, 12000, NULL, NULL);
    sim_engine_up(w.e, 0);
    assert_true(sim_engine_incarnation(w.e, 0) == inc + 2);
    sim_engine_run_until(w.e, 30000, NULL, NULL);
    assert_int_equal(w.p[0].ticks, 1); /* the old tick event is stale */
    assert_int_equal(w.p[0].nlog, 0);
    assert_int_equal(sim_engine_get_stats(w.e)->dead, 1);
    /* draining again schedules it at its deadline (already past: now) */
    sim_engine_drain(w.e, 0);
    sim_engine_run_until(w.e, 40000, NULL, NULL);
    assert_int_equal(w.p[0].ticks, 2);
    sim_engine_destroy(w.e);
}

/* Host events come back in time order through the event hook; the stop
 * callback ends a run early; a full queue fails the engine. */
typedef struct host {
    sim_engine *e;
    uint64_t seen[8];
    uint32_t n;
} host;

static void host_event(void *ctx, const sim_event *ev)
{
    host *h = ctx;
    assert_int_equal(ev->kind, SIM_EV_USER + 1);
    assert_true(h->n < 8);
    h->seen[h->n++] = ev->a;
}

static int host_stop(void *ctx)
{
    return ((host *)ctx)->n == 3;
}

static void host_events_and_bounds(void **state)
{
    (void)state;
    host h = {0};
    sim_engine_config c = {.agents = 1,
                           .seed = 1,
                           .mode = SIM_MODE_TIMED,
                           .events_max = 4,
                           .hooks = {.ctx = &h, .event = host_event}};
    assert_int_equal(sim_engine_create(&h.e, &c), SIM_ENGINE_OK);
    uint64_t at[4] = {30, 10, 20, 10};
    for (uint32_t k = 0; k < 4; k++)
        sim_engine_schedule(h.e, at[k], SIM_EV_USER + 1, 0, k, 0, NULL);
    assert_int_equal(sim_engine_failed(h.e), 0);
    sim_engine_run_until(h.e, 100, host_stop, &h);
    assert_int_equal(h.n, 3);
    assert_int_equal(h.seen[0], 1); /* time 10, pushed first */
    assert_int_equal(h.seen[1], 3);
    assert_int_equal(h.seen[2], 2);
    assert_int_equal(sim_engine_now(h.e), 20);
    for (uint32_t k = 0; k < 4; k++)
        sim_engine_schedule(h.e, 50, SIM_EV_USER + 1, 0, k, 0, NULL);
    assert_int_equal(sim_engine_failed(h.e), SIM_ENGINE_EFULL);
    assert_true(strstr(sim_engine_error(h.e), "event queue full") != NULL);
    sim_engine_destroy(h.e);
    sim_engine_config bad = {.agents = 0};
    sim_engine *e;
    assert_int_equal(sim_engine_create(&e, &bad), SIM_ENGINE_EINVAL);
    bad.agents = 2;
    bad.loss = 1.5;
    assert_int_equal(sim_engine_create(&e, &bad), SIM_ENGINE_EINVAL);
}

/* The duplicate hook sends a second copy that goes its own way; a link
 * delivers in order even when its latency falls in between (a latency
 * trace), as one TCP connection. */
static int dup_from_0(void *ctx, uint32_t from, uint32_t to)
{
    (void)ctx;
    (void)to;
    return from == 0;
}

static void duplicates_and_link_order(void **state)
{
    (void)state;
    sim_net_config nc = {.agents = 3, .seed = 5, .latency_ms = 10};
    sim_engine_config c = {
        .seed = 5, .mode = SIM_MODE_TIMED, .net = &nc, .hooks = {.duplicate = dup_from_0}};
    world w;
    world_init(&w, 3, &c, 8);
    probe_queue(&w.p[0], pid(1), 2);
    sim_engine_drain(w.e, 0);
    assert_true(sim_engine_run_until(w.e, 1000, NULL, NULL) >= 0);
    /* latency of agent 2's links falls from 10 ms to 1 ms after its first frame */
    probe_queue(&w.p[2], pid(1), 4);
    sim_engine_drain(w.e, 2);
    assert_int_equal(sim_net_set_latency(sim_engine_net(w.e), 2, 1.0), SIM_NET_OK);
    sim_engine_run_until(w.e, 2000, NULL, NULL);
    probe_queue(&w.p[2], pid(1), 6);
    sim_engine_drain(w.e, 2);
    sim_engine_run_until(w.e, 30000, NULL, NULL);
    assert_int_equal(w.p[1].nlog, 4);
    /* two copies of round 2 at 10 ms (sent at 0) */
    assert_int_equal(w.p[1].log[0].round, 2);
    assert_int_equal(w.p[1].log[1].round, 2);
    assert_int_equal(w.p[1].log[0].at, 10000);
    assert_int_equal(w.p[1].log[1].at, 10000);
    /* round 6 (sent at 2 ms, 1 ms latency) waits for round 4 (sent at 1 ms,
     * due at 11 ms) */
    assert_int_equal(w.p[1].log[2].round, 4);
    assert_int_equal(w.p[1].log[2].at, 11000);
    assert_int_equal(w.p[1].log[3].round, 6);
    assert_int_equal(w.p[1].log[3].at, 11000);
    const sim_engine_stats *st = sim_engine_get_stats(w.e);
    assert_int_equal(st->sent, 3);
    assert_int_equal(st->duplicated, 1);
    assert_int_equal(st->delivered, 4);
    sim_engine_destroy(w.e);
}

/* Time resolution (issue 14, item 6): the clock counts nanoseconds, so a
 * frame's transfer time is not rounded up to a whole microsecond per hop.
 * A 1000-byte frame at 40 Gb/s takes 200 ns: ten frames queued on one
 * link leave it one after another and all arrive by 2 us + latency, where
 * whole microseconds made each take 1 us. The host sees whole microseconds
 * (floor) and the exact clock through sim_engine_now_ns. */
static void timed_nanosecond_clock(void **state)
{
    (void)state;
    sim_net_config nc = {.agents = 2, .seed = 3, .latency_ms = 0.01, .up_bps = 40e9};
    sim_engine_config c = {.seed = 3, .mode = SIM_MODE_TIMED, .net = &nc};
    world w;
    world_init(&w, 2, &c, 968); /* 1000-byte frames */
    for (uint64_t k = 0; k < 10; k++)
        probe_queue(&w.p[0], pid(1), 2 * k);
    sim_engine_drain(w.e, 0);
    assert_true(sim_engine_run_until(w.e, 1000, NULL, NULL) > 0);
    assert_int_equal(w.p[1].nlog, 10);
    for (uint32_t k = 0; k < 10; k++) /* arrives at 10 us + 200 (k + 1) ns */
        assert_int_equal(w.p[1].log[k].at, (10000 + 200 * (k + 1)) / 1000);
    assert_int_equal(sim_engine_now(w.e), 1000);
    assert_int_equal(sim_engine_now_ns(w.e), 1000000);
    sim_engine_destroy(w.e);
}

/* The same, end to end: one ring allreduce of 16 agents over 1 MiB each
 * (one 64 KiB segment per step), 10 us latency, takes the alpha-beta cost
 * 2 (N - 1) a + 2 (N - 1) / N M / B within 1% at 1 Mb/s and at 400 Gb/s
 * (whole microseconds per hop were +6.09% at 400 Gb/s). What remains is
 * the frame headers (+0.1%). */
static double allreduce_time_s(uint32_t agents, uint32_t dim, double latency_ms, double mbps,
                               uint64_t *hash)
{
    sim_scenario *sc = malloc(sizeof *sc);
    assert_non_null(sc);
    sim_scenario_defaults(sc);
    char text[1024], err[512];
    snprintf(text, sizeof text,
             "[run]\nseed = 1\nagents = %u\nmode = timed\nduration_s = 130\n"
             "[model]\nkind = consensus\ndim = %u\n"
             "[mixing]\nalgorithm = allreduce\nbits = 32\n"
             "[network]\nlatency_ms = %.17g\nbandwidth_mbps = %.17g\n"
             "[compute]\nstraggler_model = none\nstep_ms = 100000\n"
             "[shards]\nreplication = 1\n[output]\nevery_s = 1000\n",
             agents, dim, latency_ms, mbps);
    if (sim_scenario_parse(sc, text, "alpha-beta", err, sizeof err) ||
        sim_scenario_check(sc, err, sizeof err))
        fail_msg("%s", err);
    sim_run_opts o = {.quiet = 1};
    sim_summary s;
    if (sim_run(sc, &o, &s, err, sizeof err))
        fail_msg("sim_run: %s", err);
    free(sc);
    *hash = s.trace_hash;
    for (uint32_t i = 0; i < s.nextra; i++)
        if (strcmp(s.extra[i].name, "mix_time_max_s") == 0)
            return s.extra[i].value;
    fail_msg("no mix_time_max_s");
    return NAN;
}

static void allreduce_matches_alpha_beta(void **state)
{
    (void)state;
    const double mbps[] = {1, 400000};
    for (size_t k = 0; k < 2; k++) {
        uint64_t h1, h2;
        double n = 16, a = 1e-5, m_bits = 4.0 * 262144 * 8, b = mbps[k] * 1e6;
        double want = 2 * (n - 1) * a + 2 * (n - 1) / n * m_bits / b;
        double got = allreduce_time_s(16, 262144, 0.01, mbps[k], &h1);
        if (!(fabs(got - want) / want < 0.01))
            fail_msg("%g Mb/s: ring allreduce took %.9f s, alpha-beta %.9f s (%+.3f%%)", mbps[k],
                     got, want, (got - want) / want * 100);
        assert_true(allreduce_time_s(16, 262144, 0.01, mbps[k], &h2) == got);
        assert_true(h1 == h2); /* deterministic */
    }
}

/* mix_time_*_s are read on the engine's nanosecond clock: 2 agents, 256
 * values, 10.4 us latency, 400 Gb/s: 2 a = 20.8 us dominates (the bytes
 * take 0.02 us), so the measured time is within 0.1% of the alpha-beta
 * cost. Measured in whole microseconds it read 20 us (-3.9%), which hid
 * what experiment 1 checks. */
static void mix_time_in_nanoseconds(void **state)
{
    (void)state;
    double n = 2, a = 1.04e-5, m_bits = 4.0 * 256 * 8, b = 400000 * 1e6;
    double want = 2 * (n - 1) * a + 2 * (n - 1) / n * m_bits / b;
    uint64_t h1, h2;
    double got = allreduce_time_s(2, 256, 0.0104, 400000, &h1);
    if (!(fabs(got - want) / want < 0.001))
        fail_msg("2 agents: allreduce took %.9f s, alpha-beta %.9f s (%+.3f%%)", got, want,
                 (got - want) / want * 100);
    assert_true(allreduce_time_s(2, 256, 0.0104, 400000, &h2) == got);
    assert_true(h1 == h2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(timed_latency_bandwidth_fifo),
        cmocka_unit_test(timed_event_loop_cost),
        cmocka_unit_test(rounds_deliver_cascade_fifo),
        cmocka_unit_test(rounds_fifo_per_link_beyond_near_tails),
        cmocka_unit_test(same_seed_same_hash),
        cmocka_unit_test(faults_and_routing),
        cmocka_unit_test(down_agents_and_stale_timers),
        cmocka_unit_test(host_events_and_bounds),
        cmocka_unit_test(timed_nanosecond_clock),
        cmocka_unit_test(duplicates_and_link_order),
        cmocka_unit_test(allreduce_matches_alpha_beta),
        cmocka_unit_test(mix_time_in_nanoseconds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
