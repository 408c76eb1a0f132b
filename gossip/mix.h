/* gossip/mix — model mixing: D-PSGD averaging, pairwise gossip, push-sum,
 * CHOCO compressed gossip and ring-allreduce behind one sans-IO object.
 *
 * Shape (docs/ARCHITECTURE.md, "The sans-IO core contract"): create/destroy,
 * recv/tick/poll_send/deadline, plus the model hooks start/take and the
 * membership hook set_view. docs/MIXING.md describes every algorithm, its
 * messages and byte formats and its guarantees.
 *
 * Lifecycle of one mixing round:
 *   IDLE --start(x)--> RUNNING --(exchanges complete | deadline | abort)--> DONE
 *   DONE --take(out)--> IDLE
 * start copies the caller's float32 vector in; take copies the mixed vector out
 * and says whether the round completed (GOSSIP_OK) or aborted
 * (GOSSIP_EABORTED; then the vector is the one given to start, plus any
 * passive exchange that happened meanwhile). A round is DONE only when its own
 * frames have all been pulled with poll_send, so the caller drains poll_send
 * after every call, as the contract says.
 *
 * Passive exchanges: a pairwise-gossip peer may average with this object while
 * it is idle (between take and the next start, while the caller trains). The
 * object answers from the vector it last handed out and remembers the change
 * it made; start adds that change to the caller's new vector, so no mass is
 * lost and the caller's local training is kept.
 *
 * Invariants and units:
 * - dim values per vector, 1..GOSSIP_CODEC_DIM_MAX; every buffer is allocated
 *   in create and sized from the config (nothing allocates afterwards).
 * - Time is gossip_time_us, always an argument. Randomness (peer choice,
 *   stochastic rounding) comes from the env.
 * - Membership is a gossip_view copied in by set_view (<= members_max ids).
 *   Synchronous algorithms (dpsgd, choco, allreduce) number their rounds from
 *   0 within a view and accept frames only from members on the same view (the view id: a hash of
 * the member ids, carried in the header epoch field).
 * - Vectors longer than chunk_values travel in several frames (chunks) of at
 *   most chunk_values values; GOSSIP_MIX_CHUNK_VALUES_MAX bounds it so a
 *   chunk at 64-bit push-sum precision still fits GOSSIP_PAYLOAD_MAX. Links
 *   must deliver the frames of one sender in order (TCP, the simulator).
 * - Bad frames are rejected with an error code and counted in stats; never
 *   fatal.
 *
 * Ownership: the object owns its buffers; frames from poll_send stay valid
 * until the next call on the object. The env must outlive the object.
 */
#ifndef GOSSIP_MIX_H
#define GOSSIP_MIX_H

#include <stddef.h>
#include <stdint.h>

#include "gossip/codec.h"
#include "gossip/robust.h"
#include "gossip/env.h"
#include "gossip/topology.h"
#include "gossip/types.h"
#include "gossip/wire.h"

typedef enum gossip_mix_algo {
    GOSSIP_MIX_DPSGD = 0, /* synchronous averaging with all topology neighbours */
    GOSSIP_MIX_GOSSIP,    /* pairwise push-pull with one peer per round */
    GOSSIP_MIX_PUSHSUM,   /* one-way pushes with weights, loss tolerant */
    GOSSIP_MIX_CHOCO,     /* compressed gossip with public copies */
    GOSSIP_MIX_ALLREDUCE, /* ring reduce-scatter + allgather, mean of the view */
    GOSSIP_MIX_ALGO_COUNT
} gossip_mix_algo;

#define GOSSIP_MIX_ALGOS_ALL ((1u << GOSSIP_MIX_ALGO_COUNT) - 1u)

/* Values per frame. 4 Mi values: 16 MiB at 32 bits, 32 MiB for push-sum's
 * float64 running sums, both well under GOSSIP_PAYLOAD_MAX (65 MiB) with
 * room for the 32-byte chunk headers. */
#define GOSSIP_MIX_CHUNK_VALUES_MAX (4u * 1024u * 1024u)
/* Default: 64 Ki values = 256 KiB frames at 32 bits, small enough to pipeline
 * an allreduce of a few million parameters over tens of chunks. */
#define GOSSIP_MIX_CHUNK_VALUES_DEFAULT (64u * 1024u)
/* Payload headers (bytes before the vector data) of each message type. */
#define GOSSIP_MIX_PUSH_HEADER 32u
#define GOSSIP_MIX_PS_HEADER   16u
#define GOSSIP_MIX_AR_HEADER   32u
#define GOSSIP_MIX_ABORT_BYTES 8u
#define GOSSIP_MIX_HEADER_MAX  32u
/* Frames of the synchronous algorithms kept for a view we do not hold yet
 * (a member installed it before us): replayed when we install it. Each
 * entry is one frame buffer (frame_cap bytes), allocated with the first
 * frame kept. */
#define GOSSIP_MIX_STASH_MAX 32u
/* Frames queued for replies (gossip answers) before pushes are refused:
 * one per chunk of a concurrent push; the caller drains poll_send after every
 * recv, so 8 leaves ample slack. */
#define GOSSIP_MIX_TXQ_MAX 8u
/* Outstanding gossip pushes whose replies are still accepted (the current
 * one and late answers to earlier timed-out ones). */
#define GOSSIP_MIX_PENDING_MAX 4u
/* Gossip pushes a member holds (each dim floats) while its own exchange is
 * in flight, answered once it ends: a member receives one push per round on
 * average (Poisson), so 3 holds all but ~8% of rounds' pushes; the rest are
 * answered busy and their pusher retries. */
#define GOSSIP_MIX_HELD_MAX 3u
/* Pushes a gossip round sends again after busy answers (each to a new
 * draw) before it completes with the vector unchanged. */
#define GOSSIP_MIX_RETRY_MAX 4u
/* Push-sum link tables (per direction) default and maximum. */
#define GOSSIP_MIX_LINKS_DEFAULT 16u
#define GOSSIP_MIX_LINKS_MAX     256u
/* Default step timeout: 2 s, far above a LAN round trip plus the transfer of
 * one 256 KiB chunk at 10 Mbit/s (0.2 s). */
#define GOSSIP_MIX_STEP_TIMEOUT_DEFAULT_US 2000000u
#define GOSSIP_MIX_MEMBERS_DEFAULT         1024u
/* dpsgd/choco rounds accepted ahead of the local one (the window counts the
 * current round): 2 suffices for undirected graphs (a neighbour cannot finish
 * round r without our round-r frame); directed graphs (exponential,
 * one-peer-exponential) let a member run further ahead, at one float64
 * vector of memory per extra round. */
#define GOSSIP_MIX_SYNC_WINDOW_DEFAULT 2u
#define GOSSIP_MIX_SYNC_WINDOW_MAX     16u
/* Largest magnitude accepted in a received value. Sums over a whole view
 * (GOSSIP_MEMBERS_MAX = 2^14 terms) of such values stay below FLT_MAX
 * (3.4e38), so no accepted frame can make a vector non-finite. */
#define GOSSIP_MIX_VALUE_MAX 1e30f

_Static_assert(8ull * GOSSIP_MIX_CHUNK_VALUES_MAX + GOSSIP_MIX_HEADER_MAX <= GOSSIP_PAYLOAD_MAX,
               "a float64 chunk fits one frame");
_Static_assert(GOSSIP_MIX_PUSH_HEADER <= GOSSIP_MIX_HEADER_MAX &&
                   GOSSIP_MIX_PS_HEADER <= GOSSIP_MIX_HEADER_MAX &&
                   GOSSIP_MIX_AR_HEADER <= GOSSIP_MIX_HEADER_MAX,
               "GOSSIP_MIX_HEADER_MAX bounds every chunk header");
_Static_assert(GOSSIP_MIX_CHUNK_VALUES_DEFAULT <= GOSSIP_MIX_CHUNK_VALUES_MAX, "default chunk");
_Static_assert(GOSSIP_MIX_LINKS_DEFAULT <= GOSSIP_MIX_LINKS_MAX, "default links");

typedef struct gossip_mix_config {
    uint64_t self;        /* own node id, != 0 */
    uint32_t dim;         /* values per vector, 1..GOSSIP_CODEC_DIM_MAX */
    uint32_t algos;       /* bitmask (1 << algo) that may run; buffers are
                             sized for these; 0 = all */
    gossip_mix_algo algo; /* initial algorithm */
    gossip_topology topology;
    unsigned bits;                  /* codec bits for vector payloads; 0 = 32 (exact) */
    uint32_t block;                 /* codec block; 0 = GOSSIP_CODEC_BLOCK_DEFAULT */
    uint32_t chunk_values;          /* values per frame; 0 = default; same on all members */
    uint32_t members_max;           /* largest view; 0 = GOSSIP_MIX_MEMBERS_DEFAULT */
    uint32_t links_max;             /* push-sum links per direction; 0 = default */
    uint32_t peers_max;             /* pairwise gossip: peers whose exchange times are kept
                                       (least recently used replaced; hash-indexed above 16),
                                       <= GOSSIP_MEMBERS_MAX; 0 = members_max */
    uint32_t sync_window;           /* dpsgd/choco rounds buffered, 2..GOSSIP_MIX_SYNC_WINDOW_MAX;
                                       0 = GOSSIP_MIX_SYNC_WINDOW_DEFAULT */
    float choco_gamma;              /* CHOCO consensus step in (0, 1]; 0 = 0.5 */
    float choco_scale;              /* CHOCO quantizer scale in (0, 1]; 0 = automatic */
    gossip_time_us step_timeout_us; /* per-step deadline; 0 = default */
    int shared_views;               /* 1: views come only from gossip_mix_set_view_shared
                                       (no copy buffer; members_max unused) */
    gossip_robust_config robust;    /* bounds on peers' values (gossip/robust.h);
                                       zero = none (the agent and simulator default to clip) */
} gossip_mix_config;

typedef struct gossip_mix_stats {
    /* The counters most frames touch come first, in one cache line: a
     * simulator delivers to a million mixers, and each line is a miss. */
    uint64_t frames_sent, bytes_sent;
    uint64_t frames_received, bytes_received;
    uint64_t robust_clipped;     /* peers' contributions clipped (gossip/robust.h) */
    uint64_t robust_dropped;     /* ...of them ignored: their peer is quarantined */
    uint64_t exchanges_answered; /* gossip: pushes of others answered in full */
    uint64_t exchanges_held;     /* gossip: pushes held until our own exchange ended */
    uint64_t exchanges_refused;  /* gossip: pushes answered busy (mid-exchange, full, no vector) */
    uint64_t exchanges_retried;  /* gossip: pushes sent again after a busy answer */
    uint64_t rounds_completed, rounds_aborted;
    uint64_t aborts_sent, aborts_received;
    uint64_t choco_resets;    /* public copies restarted (a lost round, here or at a peer) */
    uint64_t round_jumps;     /* dpsgd/choco: caught up with members rounds ahead */
    uint64_t stash_replayed;  /* frames of a view installed late, replayed (GOSSIP_MIX_STASH_MAX) */
    uint64_t stash_no_memory; /* ...not kept: no memory for the stash (allocated on first use) */
    uint64_t exchanges_cancelled; /* gossip: exchanges ended early, their peer left the view */
    uint64_t rejected;            /* frames refused, all causes */
    uint64_t rejected_by[GOSSIP_ERR_COUNT]; /* by error code */
} gossip_mix_stats;

typedef enum gossip_mix_state {
    GOSSIP_MIX_IDLE = 0,
    GOSSIP_MIX_RUNNING,
    GOSSIP_MIX_DONE
} gossip_mix_state;

typedef struct gossip_mix gossip_mix;

/* The one name table of gossip_mix_algo, in enum order, NULL-terminated
 * (common/text.h): config files, scenarios and every printed name use it.
 * GOSSIP_MIX_ALGO_NAMES is the list itself, for a superset table (the
 * simulator adds its own "ps"). */
#define GOSSIP_MIX_ALGO_NAMES "dpsgd", "gossip", "push-sum", "choco", "allreduce"
extern const char *const gossip_mix_algo_names[GOSSIP_MIX_ALGO_COUNT + 1];
/* gossip_mix_algo_names[a]; "unknown" outside the enum. */
const char *gossip_mix_algo_name(gossip_mix_algo a);
/* Parse a name above. Returns GOSSIP_OK or GOSSIP_EINVAL. */
int gossip_mix_algo_parse(const char *name, gossip_mix_algo *out);
/* 1 if (algo, topology) can run: dpsgd needs a graph (not random), choco a
 * static graph (ring, torus, exponential); allreduce ignores the topology. */
int gossip_mix_combination_valid(gossip_mix_algo a, gossip_topology t);

/* Create a mixer. Returns GOSSIP_OK, GOSSIP_EINVAL (self 0, dim out of
 * range, bad bits/block/chunk/gamma/scale, algo not in algos, invalid
 * combination) or GOSSIP_ENOMEM (nothing left allocated, *out untouched). */
int gossip_mix_create(gossip_mix **out, const gossip_env *env, const gossip_mix_config *cfg);
void gossip_mix_destroy(gossip_mix *m);

/* Install a membership view (copied). A newer epoch resets the synchronous
 * algorithms (round numbers restart at 0, CHOCO public copies at 0) and
 * aborts a running dpsgd/choco/allreduce round; push-sum drops links to
 * members that left. Returns GOSSIP_OK, GOSSIP_ESTALE (older epoch; ignored),
 * GOSSIP_ETOOBIG (n > members_max) or GOSSIP_EINVAL (ids not strictly
 * ascending, or an id 0). */
int gossip_mix_set_view(gossip_mix *m, const gossip_view *v, gossip_time_us now);

/* Views shared by many mixers of one process (the simulator at 10^6
 * agents, where a copy per mixer would be N^2): a view is checked and
 * hashed once by gossip_mix_view_prepare, then installed on each mixer
 * created with shared_views = 1 by pointer (gossip_mix_set_view_shared:
 * no copy, O(log n)). The caller keeps the gossip_mix_shared_view and its
 * ids alive and unchanged until every mixer holding it has another view or
 * is destroyed. Up to GOSSIP_MIX_SHARED_MEMBERS_MAX members; beyond
 * GOSSIP_MEMBERS_MAX only the random topology (the static graphs' degree
 * bound). prepare returns GOSSIP_OK, GOSSIP_EINVAL (ids not strictly
 * ascending, an id 0) or GOSSIP_ETOOBIG; set_view_shared returns
 * GOSSIP_OK, GOSSIP_EINVAL (the mixer copies views), GOSSIP_ESTALE (older
 * epoch; ignored) or GOSSIP_ETOOBIG (more than GOSSIP_MEMBERS_MAX members
 * with a static topology). set_view on a shared-view mixer is EINVAL. */
#define GOSSIP_MIX_SHARED_MEMBERS_MAX (1u << 24)
typedef struct gossip_mix_shared_view {
    gossip_view v;
    uint64_t view_id; /* hash of the members (what frames carry) */
} gossip_mix_shared_view;
int gossip_mix_view_prepare(gossip_mix_shared_view *sv, const gossip_view *v);
int gossip_mix_set_view_shared(gossip_mix *m, const gossip_mix_shared_view *sv, gossip_time_us now);

/* Switch algorithm, topology and codec bits between rounds (state IDLE).
 * The new algorithm starts from fresh state (push-sum weights, CHOCO copies).
 * Returns GOSSIP_OK or GOSSIP_EINVAL (not idle, algo not enabled at create,
 * invalid combination or bits). */
int gossip_mix_set_algo(gossip_mix *m, gossip_mix_algo a, gossip_topology t, unsigned bits);

/* Begin a round with the caller's vector x[dim] (copied). Returns GOSSIP_OK,
 * GOSSIP_EINVAL (not idle, or no view yet), GOSSIP_ENOTFOUND (self not in
 * the view) or GOSSIP_ENONFINITE (x holds a NaN or infinity). */
int gossip_mix_start(gossip_mix *m, const float *x, gossip_time_us now);
/* Current state. */
gossip_mix_state gossip_mix_get_state(const gossip_mix *m);
/* Take the result of a DONE round into out[dim]; *outcome = GOSSIP_OK
 * (completed) or GOSSIP_EABORTED. Returns GOSSIP_OK or GOSSIP_EINVAL (no round
 * done). */
int gossip_mix_take(gossip_mix *m, float *out, int *outcome);

/* A hint for a host that delivers frames to many mixers in turn (the
 * simulator at 10^5 agents and more, where each receiver's memory is a
 * cache miss): prefetch the lines of m that receiving a frame reads first,
 * a little before gossip_mix_recv. Reads nothing, changes nothing. */
void gossip_mix_prefetch(const gossip_mix *m);

/* Sans-IO core (docs/ARCHITECTURE.md). recv returns GOSSIP_OK or the reason
 * the frame was rejected (counted in stats; never fatal): GOSSIP_ETYPE,
 * GOSSIP_EMALFORMED, GOSSIP_ETRUNC, GOSSIP_ENONFINITE, GOSSIP_ESTALE,
 * GOSSIP_ENOTFOUND (sender not in the view), GOSSIP_EFULL, GOSSIP_EINVAL. */
int gossip_mix_recv(gossip_mix *m, uint64_t from, const gossip_header *h, const uint8_t *payload,
                    size_t len, gossip_time_us now);
int gossip_mix_tick(gossip_mix *m, gossip_time_us now);
int gossip_mix_poll_send(gossip_mix *m, gossip_send *out, gossip_time_us now);
gossip_time_us gossip_mix_deadline(const gossip_mix *m);

/* The host could not hand a frame for `peer` to the network (no route to
 * it, its link backing off after failed dials, its queue full). Pairwise
 * gossip ends a running exchange with that peer at once (outcome
 * GOSSIP_EABORTED; answers that still arrive are applied) and avoids it in
 * its peer choice for a second; the other rules ignore it (their deadlines
 * and aborts cover a lost member). Returns GOSSIP_OK or GOSSIP_EINVAL. */
int gossip_mix_unreachable(gossip_mix *m, uint64_t peer, gossip_time_us now);

/* Passive changes (pairwise-gossip answers given while idle) not yet handed to
 * the caller, into out[dim]; the next start adds them. A caller that stops
 * mixing (shutdown, checkpoint) adds them to its vector itself. Returns
 * GOSSIP_OK or GOSSIP_EINVAL. */
int gossip_mix_pending(const gossip_mix *m, float *out);

const gossip_mix_stats *gossip_mix_get_stats(const gossip_mix *m);
/* Round number of the running round (or of the next one when idle). */
uint64_t gossip_mix_round(const gossip_mix *m);
/* Epoch of the installed view (0 before the first). Never decreases. */
uint64_t gossip_mix_view_epoch(const gossip_mix *m);

/* Push-sum bookkeeping for tests and the simulator: this member's share of
 * the total mass, s + sum(out-link running sums) - sum(in-link running sums),
 * into vec[dim] and *weight. Summed over all members it equals the initial
 * total (sum of the vectors, and n) however many messages were lost.
 * Returns GOSSIP_OK or GOSSIP_EINVAL (push-sum not enabled). */
int gossip_mix_pushsum_mass(const gossip_mix *m, double *vec, double *weight);

#endif
