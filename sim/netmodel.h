/* sim/netmodel — the simulator's network: latency, bandwidth sharing, loss.
 *
 * Purpose. Decide when a message sent from agent `src` to agent `dst` at
 * virtual time `now` is delivered, or that it is lost. The simulator asks;
 * this module never schedules anything itself (event-driven API):
 *
 *   sim_net_send(...)            -> DELIVER at a known time (fast path),
 *                                   LOST, or QUEUED as a flow
 *   sim_net_next_completion(n)   -> earliest time a queued flow finishes
 *   sim_net_advance(n, now)      -> finish every flow due at or before now
 *   sim_net_pop(n, &d)           -> take one finished flow (FIFO)
 *
 * Model (docs/SIMULATOR.md, "Network model", has the formulas).
 * - Every agent has an uplink of up_bps and a downlink of down_bps bits/s;
 *   0 means unlimited. A message of B bytes is one flow over the sender's
 *   uplink and the receiver's downlink.
 * - Concurrent flows share links max-min fairly (progressive filling /
 *   water-filling). Rates are recomputed whenever a flow starts or ends, but
 *   only inside the connected component of the flow-link graph that the
 *   change touches: max-min allocations of different components are
 *   independent. Cost of one recomputation: O((F + L) log L) for a component
 *   of F flows and L limited links (a lazy heap over links). Changes at one
 *   instant are batched: rates are recomputed once, lazily, before time
 *   moves on or when sim_net_next_completion / sim_net_flow_rate is asked.
 * - Delivery time = completion of the transfer + latency(src, dst). A flow
 *   whose both links are unlimited (or of 0 bytes) takes no transfer time and
 *   costs no bookkeeping: sim_net_send answers DELIVER at now + latency.
 * - Latency is constant, read from a per-pair matrix, or drawn once per
 *   unordered pair {src, dst} from a distribution (uniform, normal,
 *   lognormal) with a generator seeded by (seed, pair): the same seed gives
 *   the same latency for a link however often and in whatever order it is
 *   asked. src == dst has latency 0.
 * - Loss: every message sent is dropped with probability loss (base loss,
 *   or the loss of a burst while one is active), drawn from the model's own
 *   generator; messages across a partition are dropped always. Loss is
 *   decided when the message is sent.
 *
 * Units: time in nanoseconds of virtual time (uint64, as sim/evq and the
 * engine's clock: 2^64 ns is 584 years); bandwidth in bits/s; sizes in
 * bytes; latency given in milliseconds and rounded to the nearest
 * nanosecond. Flow completion times are rounded up to the next whole
 * nanosecond (a flow never completes early); capacity freed by a completing
 * flow is reassigned at that rounded time, so each completion may delay
 * others by < 1 ns. Whole microseconds per hop (the model before) made a
 * ring allreduce at 40 Gb/s and 10 us latency 3.9% longer than its
 * alpha-beta cost; at nanoseconds the error is below 1e-4 of a hop even at
 * 400 Gb/s (a 64 KiB frame takes 1310.72 ns there).
 *
 * Ownership: sim_net_create copies everything from its config (including the
 * latency matrix). A flow id stays valid until the flow is popped or
 * cancelled; ids are never reused within a run (slot + generation).
 * Not thread-safe; one model per simulation.
 */
#ifndef SIM_NETMODEL_H
#define SIM_NETMODEL_H

#include <stddef.h>
#include <stdint.h>

/* Most agents a network can hold (matches GOSSIP_MEMBERS_MAX rounded up). */
#define SIM_NET_AGENTS_MAX 65536u
/* Most flows in flight at once. 4 per agent at 65536 agents is 2^18; a run
 * that needs more is reported (SIM_NET_EFULL) rather than grown unbounded. */
#define SIM_NET_FLOWS_MAX (1u << 20)
/* Most agents with a latency matrix: N^2 doubles, 2048 -> 32 MiB. */
#define SIM_NET_MATRIX_AGENTS_MAX 2048u
/* Longest latency accepted, ms (one hour; anything above is a typo). */
#define SIM_NET_LATENCY_MS_MAX 3600000.0

_Static_assert(SIM_NET_MATRIX_AGENTS_MAX <= SIM_NET_AGENTS_MAX, "matrix within agents");

typedef struct sim_net sim_net;

typedef enum sim_net_err {
    SIM_NET_OK = 0,
    SIM_NET_EINVAL = -1,  /* bad argument: agent out of range, bad config */
    SIM_NET_ENOMEM = -2,  /* allocation failed */
    SIM_NET_EFULL = -3,   /* flows_max flows already in flight */
    SIM_NET_ETIME = -4,   /* time went backwards */
    SIM_NET_ENOFLOW = -5, /* unknown or finished flow id */
    SIM_NET_EIO = -6,     /* matrix file unreadable */
    SIM_NET_EPARSE = -7,  /* matrix file malformed */
} sim_net_err;

const char *sim_net_strerror(int err);

/* What sim_net_send did with a message. */
typedef enum sim_net_fate {
    SIM_NET_DELIVER = 1, /* delivered at out->deliver_ns (no flow created) */
    SIM_NET_QUEUED = 2,  /* a flow was started, out->id; it comes out of sim_net_pop */
    SIM_NET_LOST = 3,    /* dropped (loss draw or partition); out->lost_partition says which */
} sim_net_fate;

typedef enum sim_net_latency_kind {
    SIM_NET_LAT_CONST = 0, /* every link: latency_ms */
    SIM_NET_LAT_UNIFORM,   /* U(lat_a, lat_b) ms */
    SIM_NET_LAT_NORMAL,    /* N(mean lat_a, sd lat_b) ms, clamped at 0 */
    SIM_NET_LAT_LOGNORMAL, /* exp(N(ln lat_a, lat_b)) ms: median lat_a, log-sd lat_b */
    SIM_NET_LAT_MATRIX,    /* matrix_ms[src * agents + dst] */
} sim_net_latency_kind;

typedef struct sim_net_config {
    uint32_t agents; /* 1..SIM_NET_AGENTS_MAX */
    uint64_t seed;   /* latency draws and loss */
    double up_bps;   /* default uplink for every agent; 0 = unlimited */
    double down_bps; /* default downlink; 0 = unlimited */
    sim_net_latency_kind latency_kind;
    double latency_ms;       /* CONST */
    double lat_a, lat_b;     /* distribution parameters, see sim_net_latency_kind */
    const double *matrix_ms; /* MATRIX: agents*agents values, copied */
    double loss;             /* base loss probability, [0, 1] */
    uint32_t flows_max;      /* 0 = SIM_NET_FLOWS_MAX */
} sim_net_config;

/* One finished (or immediately delivered) message. */
typedef struct sim_net_delivery {
    uint64_t id; /* flow id (0 for fast-path deliveries) */
    uint32_t src, dst;
    uint64_t bytes;
    uint64_t tag;        /* the caller's tag from sim_net_send */
    uint64_t start_ns;   /* when it was sent */
    uint64_t done_ns;    /* when its last bit left the links */
    uint64_t deliver_ns; /* done_ns + latency: when dst receives it */
    int lost_partition;  /* SIM_NET_LOST only: 1 partition, 0 random loss */
} sim_net_delivery;

/* Counters since creation. */
typedef struct sim_net_stats {
    uint64_t sent;            /* sim_net_send calls that were accepted */
    uint64_t fast;            /* delivered without a flow */
    uint64_t flows;           /* flows started */
    uint64_t completed;       /* flows finished */
    uint64_t cancelled;       /* flows cancelled */
    uint64_t lost;            /* dropped by a loss draw */
    uint64_t partitioned;     /* dropped by a partition */
    uint64_t recomputes;      /* max-min recomputations */
    uint64_t recompute_flows; /* flows visited by them (cost measure) */
    uint64_t bytes_sent;      /* bytes of accepted messages, lost ones included */
} sim_net_stats;

/* Create a network. Errors: SIM_NET_EINVAL (agents 0 or above the maximum,
 * negative bandwidth, loss outside [0, 1], bad latency parameters, MATRIX
 * without a matrix or with more than SIM_NET_MATRIX_AGENTS_MAX agents, a
 * negative or non-finite matrix entry), SIM_NET_ENOMEM. */
int sim_net_create(sim_net **out, const sim_net_config *cfg);
void sim_net_destroy(sim_net *n);

/* Read a latency matrix: `agents` lines of `agents` numbers (ms), separated
 * by spaces, tabs or commas; blank lines and # comments are skipped. On
 * success *out_ms is a malloc'd agents*agents array the caller frees. On
 * error a message naming the file and line is written to err.
 * Errors: SIM_NET_EINVAL (agents above SIM_NET_MATRIX_AGENTS_MAX),
 * SIM_NET_EIO, SIM_NET_EPARSE (wrong count, not a number, negative, above
 * SIM_NET_LATENCY_MS_MAX), SIM_NET_ENOMEM. */
int sim_net_load_matrix(const char *path, uint32_t agents, double **out_ms, char *err,
                        size_t errlen);

/* Set one agent's links (bits/s, 0 = unlimited). Flows in flight keep their
 * progress; rates are recomputed at `now`. Errors: SIM_NET_EINVAL,
 * SIM_NET_ETIME. */
int sim_net_set_bandwidth(sim_net *n, uint32_t agent, double up_bps, double down_bps,
                          uint64_t now_ns);

/* Latency of the link src -> dst in nanoseconds (0 when src == dst).
 * src and dst must be < agents (asserted). */
uint64_t sim_net_latency_ns(const sim_net *n, uint32_t src, uint32_t dst);

/* Latency override of one agent (a latency trace): every link from or to
 * the agent has latency_ms (rounded to the nearest ns) instead of the
 * configured one; with overrides at both ends the larger holds; a negative
 * value removes the override. It applies to messages delivered from now
 * on (a flow in transfer gets the latency in force when it finishes).
 * Errors: SIM_NET_EINVAL (agent out of range, above the maximum, NaN),
 * SIM_NET_ENOMEM. */
int sim_net_set_latency(sim_net *n, uint32_t agent, double latency_ms);

/* Loss probability for messages sent from now on: base loss, or a burst's
 * (the larger wins) until sim_net_set_loss is called again. Errors:
 * SIM_NET_EINVAL (p outside [0, 1]). */
int sim_net_set_loss(sim_net *n, double p);
double sim_net_loss(const sim_net *n);

/* Partition: group[a] for each agent (copied); a message between agents of
 * different groups is lost. group == NULL heals (everyone in group 0).
 * Flows already in flight are not affected. Errors: SIM_NET_ENOMEM. */
int sim_net_set_partition(sim_net *n, const uint32_t *group);

/* Send `bytes` from src to dst at `now`. Returns a sim_net_fate (> 0) and
 * fills *out, or an error (< 0): SIM_NET_EINVAL (agent out of range),
 * SIM_NET_ETIME (now before the last time seen), SIM_NET_EFULL. `tag` is
 * returned with the delivery (the caller's message handle). */
int sim_net_send(sim_net *n, uint32_t src, uint32_t dst, uint64_t bytes, uint64_t tag,
                 uint64_t now_ns, sim_net_delivery *out);

/* Start a flow without loss or partition checks (sim_net_send uses it).
 * A flow whose both links are unlimited, or of 0 bytes, finishes at now and
 * is put straight on the finished list. Errors as sim_net_send. */
int sim_net_start_flow(sim_net *n, uint32_t src, uint32_t dst, uint64_t bytes, uint64_t tag,
                       uint64_t now_ns, uint64_t *id_out);

/* Earliest time (ns) at which a flow in flight finishes; UINT64_MAX if none.
 * Flows already finished and waiting in the pop list do not count. */
uint64_t sim_net_next_completion(sim_net *n);

/* Move time to now: every flow finishing at or before now is moved, in
 * order of (finish time, id), to the finished list, and rates of the
 * remaining flows are recomputed. Errors: SIM_NET_ETIME. */
int sim_net_advance(sim_net *n, uint64_t now_ns);

/* Take the oldest finished flow. Returns 1 and fills *out, 0 if none. */
int sim_net_pop(sim_net *n, sim_net_delivery *out);

/* Cancel one flow (e.g. its sender crashed). Errors: SIM_NET_ENOFLOW,
 * SIM_NET_ETIME. */
int sim_net_cancel(sim_net *n, uint64_t id, uint64_t now_ns);
/* Cancel every flow in flight to or from agent; returns how many (>= 0) or
 * an error (SIM_NET_EINVAL, SIM_NET_ETIME). */
int sim_net_cancel_agent(sim_net *n, uint32_t agent, uint64_t now_ns);

/* Current rate of a flow in bits/s (for tests and traces); < 0 if unknown. */
double sim_net_flow_rate(sim_net *n, uint64_t id);
/* Flows in flight. */
size_t sim_net_flows_active(const sim_net *n);
void sim_net_get_stats(const sim_net *n, sim_net_stats *out);

#endif
