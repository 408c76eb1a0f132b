/* sim/engine — the simulator's one event engine.
 *
 * Purpose. Everything that simulates nodes runs on this core: `murmur sim`
 * (sim/run.c), the sim/driver facade that the mixing tests use, and the
 * test harnesses of membership, shard replication and state transfer. It
 * owns
 *   - the virtual clock and the event queue (sim/evq), ordered by
 *     (time, sequence number);
 *   - one seeded model_rng stream and one gossip_env per agent (agent i
 *     uses stream i of the seed; the env allocates with malloc);
 *   - an ops table per agent saying what the agent is: any object with the
 *     sans-IO shape of docs/ARCHITECTURE.md (recv, tick, poll_send,
 *     deadline) — a mixer, a whole gossip_node, a SWIM member, a shard
 *     replicator, a state-transfer object;
 *   - the frames in flight and their delivery, in one of two modes;
 *   - the trace hash.
 * The caller (the "host") owns what an agent does besides its protocol
 * object (its model, training, faults, outputs) and reacts through hooks.
 *
 * Modes.
 *   SIM_MODE_TIMED   continuous time. Every frame goes through the network
 *                    model (sim/netmodel: latency, max-min shared bandwidth,
 *                    loss, partitions); each directed link is one FIFO
 *                    stream, as a TCP connection: one frame at a time is in
 *                    transfer, the others wait behind it, and deliveries
 *                    keep that order (a latency that falls meanwhile does
 *                    not reorder; only the delay hook can). Timers fire at
 *                    each object's deadline. sim_engine_run_until advances.
 *   SIM_MODE_ROUNDS  synchronous rounds (PeerSim's cycle-driven engine):
 *                    frames are queued, and sim_engine_deliver_pending hands
 *                    them over, and every frame those deliveries cause, one
 *                    at a time in an order drawn from the seed (FIFO per
 *                    link), at the current time. Loss and partitions apply
 *                    when a frame is sent; latency and bandwidth do not. The
 *                    host moves the clock (sim_engine_set_now) and runs due
 *                    timers (sim_engine_tick_now).
 *
 * Addresses. A frame goes to gossip_send.dest (a node id given at attach)
 * or, when dest is 0, to dest_addr "sim://<index>". A frame to an unknown
 * node or to the sender itself is lost (counted).
 *
 * Time. The clock counts nanoseconds (uint64: 584 years), so transfer
 * times stay exact at any bandwidth (a 64 KiB frame takes 1.31 us at 400
 * Gb/s; whole microseconds per hop made a ring allreduce there 6% longer
 * than its alpha-beta cost). The protocol objects, the hooks and the host
 * API speak gossip_time_us, whole microseconds: the engine passes them
 * floor(now / 1000) and converts their deadlines and host events to ns;
 * sim_engine_now_ns and sim_engine_schedule_ns give the exact clock.
 *
 * Event loops (timed mode). With loop_frame_ns or loop_byte_ns set, each
 * agent has one event loop that spends CPU time on every frame it sends
 * (before the frame enters its link) and receives (before recv), one frame
 * at a time: a frame waits while its agent's loop is busy with others.
 * This is what a real agent's event loop does between the trainer and the
 * wire (encode, seal, copy; open, decode, mix); with both 0 a frame costs
 * no CPU time and the engine behaves as before the model existed (same
 * trace hashes).
 *
 * Trace hash. Mixed from every delivered frame (time in whole microseconds,
 * sender, receiver, bytes) and from whatever the host adds (sim_engine_trace: local steps,
 * faults); the same seed gives the same hash, bit for bit.
 *
 * Determinism. Every draw comes from the seed; events are ordered by
 * (time, seq); the host must push its own events in a deterministic order.
 *
 * Limits: SIM_ENGINE_AGENTS_MAX agents; events_max queued events (a push
 * beyond it fails the run with SIM_ENGINE_EFULL, never grows unbounded);
 * the network model's flow bound. Frames are copied into engine-owned
 * memory (the simulator may use malloc; the core may not).
 *
 * Ownership: the engine never owns the protocol objects (the host creates
 * and destroys them, with the engine's env or its own); it owns the frames,
 * the queue and the network model. Not thread-safe.
 */
#ifndef SIM_ENGINE_H
#define SIM_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "gossip/env.h"
#include "gossip/types.h"
#include "gossip/wire.h"
#include "model/rng.h"
#include "sim/evq.h"
#include "sim/netmodel.h"

/* Rounds mode; timed mode also stops at the network's SIM_NET_AGENTS_MAX. */
#define SIM_ENGINE_AGENTS_MAX (1u << 24)
/* Default bound of queued events (host events, deliveries, ticks). */
#define SIM_ENGINE_EVENTS_DEFAULT ((size_t)1 << 26)
/* Bounds of the event loops' cost per frame (sim_engine_config): 1 s per
 * frame, 1 ms per byte; anything near them is a typo, not a computer. */
#define SIM_ENGINE_LOOP_FRAME_NS_MAX 1000000000ull
#define SIM_ENGINE_LOOP_BYTE_NS_MAX  1e6
/* Event kinds below this are the engine's; the host uses the others. */
#define SIM_EV_USER 16u

/* The sans-IO shape; node is the object, passed back unchanged. */
typedef struct sim_node_ops {
    int (*recv)(void *node, uint64_t from, const gossip_header *h, const uint8_t *payload,
                size_t len, gossip_time_us now);
    int (*tick)(void *node, gossip_time_us now);
    int (*poll_send)(void *node, gossip_send *out, gossip_time_us now);
    gossip_time_us (*deadline)(const void *node);
    /* Optional (NULL: none): warm the cache for a delivery to node, called
     * just before it in rounds mode; must not change the node. */
    void (*prefetch)(const void *node);
} sim_node_ops;

/* Ready-made tables (sim/ops.c) for the core's objects. */
extern const sim_node_ops sim_ops_mix;    /* gossip_mix */
extern const sim_node_ops sim_ops_node;   /* gossip_node */
extern const sim_node_ops sim_ops_swim;   /* gossip_swim */
extern const sim_node_ops sim_ops_shards; /* gossip_shards */
extern const sim_node_ops sim_ops_xfer;   /* gossip_xfer */

typedef enum sim_mode { SIM_MODE_TIMED = 0, SIM_MODE_ROUNDS } sim_mode;

typedef enum sim_engine_err {
    SIM_ENGINE_OK = 0,
    SIM_ENGINE_EINVAL = -1, /* bad config or argument */
    SIM_ENGINE_ENOMEM = -2,
    SIM_ENGINE_EFULL = -3, /* the event queue or the network hit its bound */
} sim_engine_err;

typedef struct sim_engine sim_engine;

/* What the host does around the nodes; every hook may be NULL. */
typedef struct sim_engine_hooks {
    void *ctx;
    /* Before the frames of a live agent are pulled (the host may first
     * react to its object's state: a model transfer that completed). */
    void (*prepare)(void *ctx, uint32_t agent);
    /* After a frame was delivered to a live agent, or a timed-mode tick
     * ran on it, and its frames were pulled (a mixing round that ended). */
    void (*after)(void *ctx, uint32_t agent);
    /* A host event (kind >= SIM_EV_USER) popped in timed mode; the clock is
     * at its time. */
    void (*event)(void *ctx, const sim_event *ev);
    /* Just before a frame is handed to its receiver (after the header
     * decoded): return 1 to drop it (counted in dropped). The frame may be
     * changed in place (corruption tests). */
    int (*filter)(void *ctx, uint32_t from, uint32_t to, uint8_t *frame, size_t len);
    /* Extra one-way delay of a frame, added to its delivery time when it is
     * sent (timed mode): per-message jitter, a slow receiver. */
    uint64_t (*delay)(void *ctx, uint32_t from, uint32_t to);
    /* Return 1 to send a second copy of a frame about to be routed (a
     * duplicate fault); each copy then goes its own way (its own loss
     * draw, delay, bandwidth) and is delivered or lost on its own. */
    int (*duplicate)(void *ctx, uint32_t from, uint32_t to);
    /* Return 1 to lose a frame as it is sent (a drop fault on one agent or
     * link; counted in dropped; it takes no bandwidth). */
    int (*drop)(void *ctx, uint32_t from, uint32_t to);
    /* Rounds mode: a frame to this agent is likely among the next
     * deliveries; the host may prefetch the agent's state into the cache
     * (a hint: it must change nothing). */
    void (*prefetch)(void *ctx, uint32_t agent);
    /* Every input of the trace hash as it is mixed in, in order: a
     * delivered frame (frame != NULL: sender, receiver, its bytes) or a
     * host value of sim_engine_trace (frame == NULL, value). For an event
     * trace export (murmur sim --trace). */
    void (*trace)(void *ctx, gossip_time_us now, uint32_t from, uint32_t to, const uint8_t *frame,
                  size_t len, uint64_t value);
} sim_engine_hooks;

typedef struct sim_engine_config {
    uint32_t agents; /* 1..SIM_ENGINE_AGENTS_MAX */
    uint64_t seed;   /* agent i: stream i of the seed */
    sim_mode mode;
    uint64_t order_stream; /* rounds mode: stream of the delivery order and loss draws */
    double loss;           /* rounds mode: probability a frame is lost, [0, 1] */
    /* Timed mode: the network (copied; agents must equal cfg.agents).
     * NULL = zero latency, unlimited bandwidth, loss from `loss`. */
    const sim_net_config *net;
    size_t events_max; /* 0 = SIM_ENGINE_EVENTS_DEFAULT */
    /* Timed mode: the CPU time an agent's event loop spends on each frame,
     * loop_frame_ns + len x loop_byte_ns, once at the sender before the
     * frame enters its link (encode, seal, copy) and once at the receiver
     * before recv (copy, open, decode, mix). An agent's loop is one
     * thread: it handles one frame at a time, in the order they come, so
     * a burst of frames queues behind it. 0 and 0 (the default): frames
     * cost no time. Fitted to real agents by `make calibrate`
     * (docs/SIMULATOR.md). */
    uint64_t loop_frame_ns;
    double loop_byte_ns; /* >= 0 */
    /* 1: the agents' envs allocate from one arena on huge pages, agent
     * after agent (sim/arena.h; for 10^5 agents and more, where a round is
     * cache and TLB misses). The host must then destroy every object made
     * with an agent's env before the engine, which frees the arena. */
    int arena;
    sim_engine_hooks hooks;
} sim_engine_config;

/* Counters since creation. lost = unknown + dropped_loss + partitioned +
 * dead (every frame pulled from an object, or copied by the duplicate hook,
 * and not delivered): sent + duplicated = delivered + lost + in flight. */
typedef struct sim_engine_stats {
    uint64_t sent;            /* frames pulled from the objects */
    uint64_t delivered;       /* frames handed to recv */
    uint64_t lost;            /* not delivered, every cause below */
    uint64_t unknown;         /* addressed to no agent, or to the sender itself */
    uint64_t dropped;         /* lost by the loss model, a partition or the filter */
    uint64_t dead;            /* receiver (or, queued on a link, sender) down */
    uint64_t duplicated;      /* second copies made by the duplicate hook */
    uint64_t rejected;        /* recv returned an error */
    uint64_t bad_header;      /* did not decode as a frame */
    uint64_t bytes_sent;      /* bytes of every frame pulled */
    uint64_t bytes_delivered; /* bytes handed to recv */
    uint64_t ticks;           /* timer runs */
    uint64_t events;          /* events processed (host events counted with sim_engine_count) */
} sim_engine_stats;

/* Errors: SIM_ENGINE_EINVAL (agents out of range, loss outside [0, 1], a
 * network config whose agents differ, a bad network config),
 * SIM_ENGINE_ENOMEM. */
int sim_engine_create(sim_engine **out, const sim_engine_config *cfg);
/* Frees the frames in flight and the queue; never the protocol objects. */
void sim_engine_destroy(sim_engine *e);

/* Give agent i (< agents) its node id (unique, != 0). Errors:
 * SIM_ENGINE_EINVAL (bad index, id 0, id already used by another agent). */
int sim_engine_set_id(sim_engine *e, uint32_t i, uint64_t id);
/* Agent i's protocol object (NULL: none; frames to it are lost). The agent
 * must also be up (sim_engine_up) to send and receive. */
void sim_engine_set_node(sim_engine *e, uint32_t i, const sim_node_ops *ops, void *node);
void *sim_engine_node(const sim_engine *e, uint32_t i);
/* Start agent i: up, no tick scheduled, a new incarnation (events the host
 * stamped with an older one are stale). */
void sim_engine_up(sim_engine *e, uint32_t i);
/* Stop agent i: it neither sends, receives nor ticks; a new incarnation. */
void sim_engine_down(sim_engine *e, uint32_t i);
int sim_engine_alive(const sim_engine *e, uint32_t i);
/* Incarnation of agent i (bumped by every up and down). */
uint32_t sim_engine_incarnation(const sim_engine *e, uint32_t i);
uint64_t sim_engine_id(const sim_engine *e, uint32_t i);
uint32_t sim_engine_agents(const sim_engine *e);

/* Agent i's env (malloc, its rng stream) and generator. */
const gossip_env *sim_engine_env(sim_engine *e, uint32_t i);
model_rng *sim_engine_rng(sim_engine *e, uint32_t i);

/* The clock: in whole microseconds (floor), and exact in nanoseconds. */
gossip_time_us sim_engine_now(const sim_engine *e);
uint64_t sim_engine_now_ns(const sim_engine *e);
/* Rounds mode: move the clock (never backwards). */
void sim_engine_set_now(sim_engine *e, gossip_time_us now);
sim_mode sim_engine_mode(const sim_engine *e);

/* Pull every frame agent i has to send and route it; in timed mode
 * (re)schedule its tick at its deadline. No-op for a down agent or one
 * without an object. Call after poking its object directly. */
void sim_engine_drain(sim_engine *e, uint32_t i);
/* Run agent i's timers now and pull its frames (rounds mode, or a host
 * that runs timers itself). */
void sim_engine_tick_now(sim_engine *e, uint32_t i);
/* Agent i's deadline (GOSSIP_TIME_NEVER without an object). */
gossip_time_us sim_engine_deadline(const sim_engine *e, uint32_t i);

/* Rounds mode: deliver every queued frame and every frame the deliveries
 * cause (see the header). Returns the number delivered or lost. */
long sim_engine_deliver_pending(sim_engine *e);
size_t sim_engine_pending(const sim_engine *e);

/* Timed mode: process events in (time, seq) order up to time `until` (us,
 * inclusive: events up to until * 1000 ns);
 * after every event, stop(ctx) (may be NULL) may end the run early. The
 * clock ends at `until` unless stopped early or failed. Returns the number
 * of events processed, or -1 in rounds mode. */
long sim_engine_run_until(sim_engine *e, gossip_time_us until, int (*stop)(void *ctx), void *ctx);

/* Queue a host event (kind >= SIM_EV_USER) at time t (microseconds; the
 * _ns form: nanoseconds). A time before the clock is taken as now (the
 * clock may be inside the current microsecond). On a full queue the engine
 * fails (sim_engine_failed). */
void sim_engine_schedule(sim_engine *e, gossip_time_us t, uint32_t kind, uint32_t agent, uint64_t a,
                         uint64_t b, void *ptr);
void sim_engine_schedule_ns(sim_engine *e, uint64_t t_ns, uint32_t kind, uint32_t agent, uint64_t a,
                            uint64_t b, void *ptr);

/* Faults. Loss probability of frames sent from now on (timed mode: the
 * network's). Partition: group[i] per agent (copied); frames between
 * groups are lost; NULL heals. Returns 0, or SIM_ENGINE_ENOMEM. */
int sim_engine_set_loss(sim_engine *e, double p);
int sim_engine_set_partition(sim_engine *e, const uint32_t *group);
/* The timed-mode network model (NULL in rounds mode). */
sim_net *sim_engine_net(sim_engine *e);

/* Timed mode, with an event-loop cost (sim_engine_config): agent i's loop
 * takes a job of len bytes now (len 0: a hand-off from the host, such as a
 * round the trainer made due, costing loop_frame_ns); it starts once the
 * loop is done with the frames and jobs before it. Returns when the loop
 * is done with it (ns); without a loop cost (or in rounds mode), now. */
uint64_t sim_engine_loop_take(sim_engine *e, uint32_t i, uint32_t len);
/* 1 if frames cost their agents' loops time (timed mode, a cost set). */
int sim_engine_loop_cost(const sim_engine *e);

/* Mix v into the trace hash (the host's own events: steps, faults). */
void sim_engine_trace(sim_engine *e, uint64_t v);
uint64_t sim_engine_trace_hash(const sim_engine *e);
/* Count a host event in stats.events (rounds mode). */
void sim_engine_count(sim_engine *e, uint64_t n);

/* Bytes agent i sent (frames pulled) and received (frames delivered). */
uint64_t sim_engine_bytes_sent(const sim_engine *e, uint32_t i);
uint64_t sim_engine_bytes_recv(const sim_engine *e, uint32_t i);
const sim_engine_stats *sim_engine_get_stats(const sim_engine *e);

/* The first error (0 if none) and its message; a failed engine stops
 * running events. */
int sim_engine_failed(const sim_engine *e);
const char *sim_engine_error(const sim_engine *e);
const char *sim_engine_strerror(int err);

#endif
