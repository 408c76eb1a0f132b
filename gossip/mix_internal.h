/* gossip/mix_internal — the mixer's state, shared by mix.c (dpsgd, gossip,
 * push-sum, choco) and allreduce.c. Not part of the public API.
 *
 * Buffers (all allocated in gossip_mix_create, sized from the config):
 *   work      dim floats: the vector being mixed (and the last result)
 *   orig      dim floats: the vector given to start (what an aborted round
 *             returns; the source of dpsgd/gossip pushes)
 *   pending   dim floats: passive changes made while idle, added at start
 *   scratch*  chunk_values floats each
 *   enc       the encoded vector of the round (dpsgd, gossip push, choco q)
 *   frame     one outgoing frame built by poll_send
 *   txq       GOSSIP_MIX_TXQ_MAX encoded reply frames
 *   slots     dpsgd/choco accumulators for rounds sync_round .. + window - 1
 *   hat, sacc choco public copy x^_i and s_i = sum_j w_ij x^_j
 *   ps        push-sum numerator (dim values) and weight, float64
 *   links     push-sum running sums per out- and in-link, (dim + 1) float64
 *   inbox     allreduce chunks received before the local start
 */
#ifndef GOSSIP_MIX_INTERNAL_H
#define GOSSIP_MIX_INTERNAL_H

#include "gossip/mix.h"

typedef struct mix_slot {
    int used;
    uint64_t round;
    uint32_t nin;
    uint64_t in_id[GOSSIP_TOPOLOGY_DEGREE_MAX];
    uint32_t got[GOSSIP_TOPOLOGY_DEGREE_MAX]; /* next expected offset per in-neighbour */
    double *acc;                              /* sum of the round's received vectors */
    int dirty; /* choco: a contribution of another generation was dropped */
} mix_slot;

typedef struct mix_pending {
    int used;
    uint64_t peer;
    uint64_t round;
    uint32_t got; /* values answered so far */
} mix_pending;

typedef struct mix_link {
    int used;
    uint64_t peer;
    double *v; /* dim + 1 running sums; index dim is the weight */
    /* out-link: pushes made on it (1 for the first); in-link: the last one
     * seen. base_seq: an in-link adopted mid-stream, whose push base_seq
     * only sets the baseline (push-sum's "link sequence", MIXING.md). */
    uint32_t seq, base_seq;
} mix_link;

/* Bulk vector sender: every chunk of one vector to each of ndest peers. */
typedef struct mix_stream {
    int active;
    uint8_t type; /* GOSSIP_MSG_MIX_PUSH or GOSSIP_MSG_PUSHSUM */
    uint8_t algo;
    uint8_t bits;
    uint64_t round;
    uint32_t ndest, di;
    uint64_t dest[GOSSIP_TOPOLOGY_DEGREE_MAX];
    uint32_t chunk, nchunks;
    uint32_t link; /* push-sum out-link */
    float scale;
    uint32_t gen;     /* choco: generation the pushed q belongs to */
    uint32_t gen_age; /* choco: rounds since the sender's first push in gen */
} mix_stream;

/* A frame kept for a view we do not hold yet (see GOSSIP_MIX_STASH_MAX). */
typedef struct mix_stash {
    int used;
    uint64_t from;
    gossip_header h;
    size_t len;
    uint8_t *payload; /* frame_cap bytes */
} mix_stash;

typedef struct mix_abort_bcast {
    int active;
    uint64_t epoch, round;
    uint32_t cursor;
} mix_abort_bcast;

struct gossip_mix {
    const gossip_env *env;
    uint64_t self;
    uint32_t dim, algos, block, cv, members_max, links_max;
    uint32_t nchunks; /* ceil(dim / cv) */
    gossip_mix_algo algo;
    gossip_topology topo;
    unsigned bits;
    float gamma, scale_cfg;
    gossip_time_us step_timeout;

    /* view */
    uint64_t *ids;
    uint32_t n, me;
    uint64_t epoch;   /* the installed view's epoch (local order of views) */
    uint64_t view_id; /* hash of the view's members: what frames carry (below) */
    int has_view;

    /* round */
    gossip_mix_state state;
    int outcome;
    int has_vector;
    gossip_time_us deadline;
    uint64_t sync_round;  /* dpsgd / choco round within the epoch */
    uint64_t local_round; /* gossip / push-sum counter */
    float *work, *orig, *pending, *scratch, *scratch2;

    /* sending */
    uint8_t *frame;
    size_t frame_cap;
    uint8_t *txq;
    size_t txq_len[GOSSIP_MIX_TXQ_MAX];
    uint64_t txq_dest[GOSSIP_MIX_TXQ_MAX];
    uint32_t txq_head, txq_count;
    mix_stream stream;
    mix_abort_bcast abort_bcast;
    uint8_t *enc;
    size_t enc_cap;

    /* dpsgd / choco */
    mix_slot *slots; /* sync_window entries */
    uint32_t sync_window;
    double *slot_mem;
    uint32_t run_nin;         /* in-degree of the running round */
    double *hat, *sacc;       /* float64: see MIXING.md, "choco" */
    uint64_t choco_gen_start; /* first round we push in choco_gen */
    /* per in-neighbour: last round accumulated in choco_gen (UINT64_MAX = none) */
    uint64_t choco_in_id[GOSSIP_TOPOLOGY_DEGREE_MAX], choco_in_last[GOSSIP_TOPOLOGY_DEGREE_MAX];
    uint32_t choco_nin;
    uint32_t choco_gen;  /* generation of hat / sacc (MIXING.md, "choco under loss") */
    uint32_t choco_warm; /* rounds left that refine the restarted copies without a step */

    /* gossip */
    mix_pending pend[GOSSIP_MIX_PENDING_MAX];
    uint32_t pend_next, pend_cur;
    uint8_t *pend_bits;    /* GOSSIP_MIX_PENDING_MAX bitmaps of answered chunks */
    size_t pend_bytes;     /* bytes per bitmap */
    uint64_t gossip_round; /* round of the running push (pend entry) */

    /* push-sum */
    double *ps; /* dim + 1 */
    float *ztaken;
    int ps_init;
    mix_link *out_links, *in_links;
    double *link_mem; /* 2 * links_max * (dim + 1) */
    uint32_t *ps_off; /* random topology beyond links_max peers: circulant offsets */
    uint32_t ps_k;    /* how many (0 = pick uniformly from the whole view) */
    mix_stash *stash; /* synchronous algorithms: GOSSIP_MIX_STASH_MAX entries */
    uint8_t *stash_mem;
    uint32_t stash_next;
    int replaying;
    uint64_t *ps_tomb; /* peers whose in-link we dropped (links_max, a ring) */
    uint32_t ps_ntomb, ps_tomb_next;

    /* allreduce */
    float *inbox;
    uint32_t *ar_recv, *ar_sent; /* per chunk: steps received / sent */
    uint32_t *ar_pre;            /* per chunk: steps received early (inbox) */
    uint8_t *ar_relay;           /* per chunk: encoded allgather bytes to forward */
    size_t ar_relay_stride;
    uint32_t *ar_relay_len;
    uint8_t *ar_relay_bits;
    uint64_t ar_pre_round; /* round the early chunks belong to */
    int ar_pre_valid;
    uint32_t ar_kmax;  /* capacity of ar_recv / ar_sent */
    uint32_t ar_k;     /* chunks per segment in this view */
    uint64_t ar_round; /* running round, or the next one */
    uint32_t ar_cursor;

    gossip_mix_stats stats;
};

/* Shared helpers (mix.c). */
/* GOSSIP_OK if every |v[i]| <= GOSSIP_MIX_VALUE_MAX, else GOSSIP_ENONFINITE. */
int mix_values_ok(const float *v, uint32_t n);
void mix_finish(gossip_mix *m, int outcome);
int mix_reject(gossip_mix *m, int err);
void mix_header(const gossip_mix *m, uint8_t *frame, uint8_t type, uint64_t epoch, uint64_t round,
                size_t payload);
void mix_sent(gossip_mix *m, gossip_send *out, uint64_t dest, size_t len);

/* Allreduce (allreduce.c). */
void mix_ar_on_view(gossip_mix *m);
int mix_ar_start(gossip_mix *m, gossip_time_us now);
int mix_ar_recv_chunk(gossip_mix *m, uint64_t from, const gossip_header *h, const uint8_t *p,
                      size_t len, gossip_time_us now);
int mix_ar_recv_abort(gossip_mix *m, uint64_t from, const gossip_header *h, const uint8_t *p,
                      size_t len, gossip_time_us now);
void mix_ar_tick(gossip_mix *m, gossip_time_us now);
int mix_ar_poll(gossip_mix *m, gossip_send *out);
void mix_ar_abort(gossip_mix *m, int broadcast);
void mix_ar_check(gossip_mix *m);

#endif
