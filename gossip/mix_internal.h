/* gossip/mix_internal — the mixer's core and its plug-in interface for
 * mixing rules. Not part of the public API.
 *
 * The core (mix.c) owns what every rule shares: the view, the round's state
 * machine (IDLE -> RUNNING -> DONE), the caller's vector, the outgoing frame
 * buffer, a bulk sender (`stream`: every chunk of one vector to each of up
 * to GOSSIP_TOPOLOGY_DEGREE_MAX peers), a queue of reply frames sent ahead
 * of everything else, the encoded vector of the round, the stash of frames
 * of a view installed late, and the stats. Each mixing rule is one file
 * (mix_dpsgd.c, mix_gossip.c, mix_pushsum.c, mix_choco.c, allreduce.c) that
 * exports a `mix_ops` table and keeps its own state behind a `void *`, as
 * NNG's protocols do with nni_proto_sock_ops. dpsgd and choco share the
 * synchronous-round machinery in mix_sync.c. A new rule is a new file, a
 * value in gossip_mix_algo and one line in mix.c's rule table.
 *
 * Calls into a rule happen only from the core, never re-entrantly, with the
 * rule's own state:
 *   create/destroy        once, for every rule enabled in config.algos
 *   on_view               a newer view was installed (every enabled rule)
 *   reset                 set_algo changed algorithm or topology (every one)
 *   start/check/expire    the rule in use (m->algo), around its round
 *   recv                  frames of the message types in `types` (MIX_PUSH
 *                         and MIX_REPLY go to the rule named in their algo
 *                         byte, already parsed into mix_frame.push)
 *   poll                  after the reply queue and the stream, each call
 * A rule ends its round with mix_finish; the core calls `check` after every
 * event so that a rule can finish once its frames have all left.
 *
 * Core buffers (all allocated in gossip_mix_create, sized from the config):
 *   work      dim floats: the vector being mixed (and the last result)
 *   orig      dim floats: the vector given to start (what an aborted round
 *             returns); rules with MIX_OPS_NO_ORIG leave it undefined
 *   pending   dim floats: passive changes made while idle, added at start
 *   scratch*  chunk_values floats each
 *   enc       the encoded vector of the round (rules with MIX_OPS_ENC)
 *   frame     one outgoing frame built by poll_send
 *   txq       GOSSIP_MIX_TXQ_MAX reply frames (rules with MIX_OPS_REPLIES)
 *   stash     GOSSIP_MIX_STASH_MAX frames (rules with stash_types), allocated
 *             when the first frame is kept (stash_alloc); none kept without
 *             memory (stats.stash_no_memory)
 */
#ifndef GOSSIP_MIX_INTERNAL_H
#define GOSSIP_MIX_INTERNAL_H

#include "gossip/mix.h"

/* Bulk vector sender: every chunk of one vector to each of ndest peers.
 * MIX_PUSH chunks come from m->enc with a push header built from the fields
 * below; a rule with its own payload (push-sum) sets ops->fill. */
typedef struct mix_stream {
    int active;
    gossip_mix_algo owner; /* the rule that started it */
    uint8_t type;          /* GOSSIP_MSG_MIX_PUSH or the owner's type */
    uint8_t bits;
    uint32_t ndest, di;
    uint32_t chunk, nchunks;
    float scale;      /* push header: quantizer scale */
    uint32_t gen;     /* push header: choco generation */
    uint32_t gen_age; /* push header: choco rounds since the first push in gen */
    uint64_t round;
    uint64_t dest[GOSSIP_TOPOLOGY_DEGREE_MAX];
} mix_stream;

/* A frame kept for a view we do not hold yet (see GOSSIP_MIX_STASH_MAX). */
typedef struct mix_stash {
    int used;
    uint64_t from;
    gossip_header h;
    size_t len;
    uint8_t *payload; /* frame_cap bytes */
} mix_stash;

/* The 32-byte header of MIX_PUSH / MIX_REPLY payloads (docs/MIXING.md),
 * shared by dpsgd, gossip and choco. */
#define MIX_FLAG_BUSY 1u /* MIX_REPLY: the push was refused; no data */

typedef struct mix_push_hdr {
    uint8_t algo, bits;
    uint16_t flags;
    uint32_t offset, count;
    float scale;
    uint32_t gen;     /* choco: generation of the public copies (0 otherwise) */
    uint32_t gen_age; /* choco: rounds since the sender's first push in gen */
    const uint8_t *data;
    size_t data_len;
} mix_push_hdr;

/* One authenticated frame from a member of the view, as a rule sees it. */
typedef struct mix_frame {
    uint64_t from;
    const gossip_header *h;
    const uint8_t *p; /* payload */
    size_t len;
    const mix_push_hdr *push; /* parsed MIX_PUSH / MIX_REPLY header, else NULL */
} mix_frame;

#define MIX_TYPE_BIT(t) (1u << ((t)-GOSSIP_MSG_MIX_PUSH))

/* mix_ops.flags: core facilities a rule needs (allocated only then). */
#define MIX_OPS_ENC     1u /* m->enc: the round's encoded vector */
#define MIX_OPS_REPLIES 2u /* m->txq: reply frames */
/* The rule never reads m->orig (pairwise gossip: an aborted exchange keeps
 * what both ends applied): start then swaps orig and work instead of
 * copying the vector (a copy of the model per round less). */
#define MIX_OPS_NO_ORIG 4u

typedef struct mix_ops {
    uint32_t flags; /* MIX_OPS_* (its name is gossip_mix_algo_names[algo]) */
    uint32_t types; /* MIX_TYPE_BIT of every message type it receives */
    /* MIX_TYPE_BIT of the types whose frames of a view we do not hold yet are
     * kept and replayed when we install it (GOSSIP_MIX_STASH_MAX). */
    uint32_t stash_types;
    /* 1 if the rule can run on topology t. */
    int (*topology_ok)(gossip_topology t);
    /* Allocate the rule's state into *st from the config (m's sizes are set).
     * GOSSIP_OK or GOSSIP_ENOMEM (nothing left allocated). */
    int (*create)(gossip_mix *m, const gossip_mix_config *cfg, void **st);
    void (*destroy)(gossip_mix *m, void *st);
    /* A newer view is installed (m->ids, n, me, view_id are the new ones). A
     * rule whose round is running and cannot survive it ends it. */
    void (*on_view)(gossip_mix *m, void *st);
    /* Start from fresh state (set_algo changed the algorithm or topology). */
    void (*reset)(gossip_mix *m, void *st);
    /* Begin a round: m->work = m->orig = the caller's vector, state RUNNING,
     * deadline now + step_timeout, stream inactive. */
    void (*start)(gossip_mix *m, void *st, gossip_time_us now);
    /* A frame of one of `types`. Returns GOSSIP_OK or why it was refused. */
    int (*recv)(gossip_mix *m, void *st, const mix_frame *f, gossip_time_us now);
    /* Optional: a frame of the rule from a sender outside the view (or before
     * any view), already refused with GOSSIP_ENOTFOUND. */
    void (*stranger)(gossip_mix *m, void *st, const mix_frame *f);
    /* The rule's round is running: finish it if it is complete. */
    void (*check)(gossip_mix *m, void *st);
    /* The rule's round is running and its deadline has passed. */
    void (*expire)(gossip_mix *m, void *st, gossip_time_us now);
    /* Optional: the next frame of the rule's own, after replies and stream. */
    int (*poll)(gossip_mix *m, void *st, gossip_send *out);
    /* Optional: payload of chunk `chunk` of the rule's stream into p (at most
     * frame_cap - GOSSIP_HEADER_SIZE bytes); returns its length. NULL: a
     * push header and the chunk's bytes of m->enc. */
    size_t (*fill)(gossip_mix *m, void *st, uint32_t chunk, uint8_t *p);
    /* Optional: the round is taken; set m->work to the result first. */
    void (*take)(gossip_mix *m, void *st);
    /* Number of the running round (or of the next one when idle). */
    uint64_t (*round)(const gossip_mix *m, const void *st);
} mix_ops;

extern const mix_ops mix_dpsgd_ops, mix_gossip_ops, mix_pushsum_ops, mix_choco_ops,
    mix_allreduce_ops;

struct gossip_mix {
    const gossip_env *env;
    uint64_t self;
    uint32_t dim, algos, block, cv, members_max;
    uint32_t nchunks; /* ceil(dim / cv) */
    gossip_mix_algo algo;
    gossip_topology topo;
    unsigned bits;
    gossip_time_us step_timeout;
    const mix_ops *ops;              /* of algo */
    void *st[GOSSIP_MIX_ALGO_COUNT]; /* each enabled rule's state */

    /* view */
    const uint64_t *ids; /* ids_buf, or a shared view's (gossip_mix_set_view_shared) */
    uint64_t *ids_buf;   /* copied views (members_max); NULL with shared_views */
    int shared_views;
    uint32_t n, me;
    uint64_t epoch;   /* the installed view's epoch (local order of views) */
    uint64_t view_id; /* hash of the view's members: what frames carry */
    int has_view;

    /* round */
    gossip_mix_state state;
    int outcome;
    int has_vector;
    gossip_time_us deadline;
    float *work, *orig, *pending, *scratch, *scratch2;
    int pending_dirty; /* pending may hold a nonzero value */

    /* sending */
    uint8_t *frame;
    size_t frame_cap;
    size_t data_max; /* largest payload data after a chunk header */

    /* From here on the fields are laid out by how often a frame touches
     * them (gossip_mix_prefetch): the stats' first line, the reply queue
     * and the stream, the robust counters. */
    gossip_mix_stats stats;

    uint8_t *txq;
    uint32_t txq_head, txq_count;
    mix_stream stream;
    struct {
        size_t len;
        uint64_t dest;
    } txq_ent[GOSSIP_MIX_TXQ_MAX];
    uint8_t *enc;
    size_t enc_cap;

    /* frames of a view installed late */
    mix_stash *stash; /* NULL until the first frame is kept */
    uint8_t *stash_mem;
    uint32_t stash_next;
    int replaying;

    /* bounds on peers' values (gossip/robust.h): every rule calls it where
     * a peer's decoded values enter our vector */
    gossip_robust robust;
};

/* ---- core services for the rules (mix.c) -------------------------------- */

static inline uint32_t mix_min_u32(uint32_t a, uint32_t b)
{
    return a < b ? a : b;
}

/* Values in chunk c of a vector of len values (len = dim, or dim + 1 for
 * push-sum). */
static inline uint32_t mix_chunk_len(const gossip_mix *m, uint32_t len, uint32_t c)
{
    uint64_t off = (uint64_t)c * m->cv;
    return off >= len ? 0 : mix_min_u32(m->cv, len - (uint32_t)off);
}

static inline size_t mix_codec_bytes(const gossip_mix *m, uint32_t count, unsigned bits)
{
    return count ? gossip_codec_size(count, bits, m->block) : 0;
}

/* Byte offset of chunk c inside enc at `bits` (all chunks but the last are
 * full, so the offset is c times a full chunk). */
static inline size_t mix_enc_offset(const gossip_mix *m, uint32_t c, unsigned bits)
{
    return (size_t)c * mix_codec_bytes(m, m->cv, bits);
}

static inline gossip_view mix_view(const gossip_mix *m)
{
    return (gossip_view){m->epoch, m->n, m->ids};
}

/* GOSSIP_OK if every |v[i]| <= GOSSIP_MIX_VALUE_MAX, else GOSSIP_ENONFINITE. */
int mix_values_ok(const float *v, uint32_t n);
/* End the running round with outcome GOSSIP_OK or GOSSIP_EABORTED. */
void mix_finish(gossip_mix *m, int outcome);
/* Count a refused frame; returns err. */
int mix_reject(gossip_mix *m, int err);
void mix_header(const gossip_mix *m, uint8_t *frame, uint8_t type, uint64_t epoch, uint64_t round,
                size_t payload);
/* Account a frame handed out by poll_send. */
void mix_sent(gossip_mix *m, gossip_send *out, uint64_t dest, size_t len);
/* Add sign * d to work[off .. off + n); while idle also to `pending`, so the
 * next start adds the change to the caller's (trained) vector. */
void mix_apply_delta(gossip_mix *m, uint32_t off, uint32_t n, const float *d, float sign);
/* Encode every chunk of src (dim values) into enc at m->bits. If `decoded`
 * is given it receives what receivers will decode. */
int mix_encode_vector(gossip_mix *m, const float *src, float *decoded);
/* Begin the stream of the rule `owner`: nchunks chunks to the
 * m->stream.ndest peers in m->stream.dest (set by the caller). */
void mix_stream_begin(gossip_mix *m, gossip_mix_algo owner, uint8_t type, uint64_t round,
                      float scale, uint32_t nchunks, uint32_t gen, uint32_t gen_age);
/* MIX_PUSH / MIX_REPLY header (docs/MIXING.md). */
int mix_push_parse(const gossip_mix *m, uint8_t type, const uint8_t *p, size_t len,
                   mix_push_hdr *ph);
void mix_push_write(const gossip_mix *m, uint8_t *p, uint8_t algo, uint8_t bits, uint16_t flags,
                    uint32_t offset, uint32_t count, float scale, uint32_t gen, uint32_t gen_age);
/* A free reply-queue frame buffer (frame_cap bytes), or NULL when full; a
 * frame written there is queued by mix_reply_commit. */
uint8_t *mix_reply_slot(gossip_mix *m);
void mix_reply_commit(gossip_mix *m, uint64_t dest, size_t len);

/* Pairwise gossip (mix_gossip.c): see gossip_mix_unreachable. */
void mix_gossip_unreachable(gossip_mix *m, uint64_t peer, gossip_time_us now);
/* Tests: 0 if pairwise gossip's table of links agrees with its sorted
 * times (the same multiset) and, when indexed, with its index and free
 * bitmap (every entry found under its id at its own place, every free
 * entry marked free, nothing else indexed), else -1. */
int mix_gossip_links_check(const gossip_mix *m);

/* ---- synchronous rounds over a graph: dpsgd and choco (mix_sync.c) ------ */

typedef struct mix_slot {
    int used;
    uint64_t round;
    uint32_t nin;
    uint64_t in_id[GOSSIP_TOPOLOGY_DEGREE_MAX];
    uint32_t got[GOSSIP_TOPOLOGY_DEGREE_MAX]; /* next expected offset per in-neighbour */
    double *acc;                              /* sum of the round's received vectors */
    int dirty; /* choco: a contribution of another generation was dropped */
} mix_slot;

typedef struct mix_sync mix_sync;

/* What differs between the synchronous rules. */
typedef struct mix_sync_rule {
    /* Fill m->enc with what the out-neighbours receive in the round being
     * started (slot: its accumulator, nin in-neighbours); set the push
     * header's scale, gen and gen_age. Returns GOSSIP_OK or a codec error. */
    int (*encode)(gossip_mix *m, mix_sync *s, const mix_slot *slot, float *scale, uint32_t *gen,
                  uint32_t *gen_age);
    /* Optional: a frame of the rule, before anything is decoded. */
    int (*check_push)(const mix_push_hdr *ph);
    /* Optional: a decoded chunk of round `round` from `from` (in-neighbour k
     * of slot). 1: add it to the slot; 0: drop it (it still counts as
     * received). */
    int (*accept)(gossip_mix *m, mix_sync *s, mix_slot *slot, uint64_t from, uint64_t round,
                  const mix_push_hdr *ph);
    /* Every contribution of the running round is in: set m->work. */
    void (*combine)(gossip_mix *m, mix_sync *s, const mix_slot *slot);
    /* Optional: the running round is given up (or skipped while idle). */
    void (*lost)(gossip_mix *m, mix_sync *s);
    /* Optional: the rule jumps from s->round to round r (before the move). */
    void (*jump)(gossip_mix *m, mix_sync *s, uint64_t r);
    /* Optional: a chunk from in-neighbour `from` that does not follow on
     * from what the slot already holds of it (a chunk again, or one out of
     * order; the frame itself is refused). What the slot holds is then not
     * what that neighbour sends now: it began this view again (a view with
     * the same members has the same id, and rounds restart at 0), and the
     * slot holds a frame of its earlier stay, kept in the stash while we
     * were on another view and replayed when we installed this one (soak
     * seed 3303 under a lone joiner's faster JOIN retries, a regression
     * seed of tests/integration/sim_soak.sh). */
    void (*conflict)(gossip_mix *m, mix_sync *s, const mix_push_hdr *ph);
} mix_sync_rule;

struct mix_sync {
    const mix_sync_rule *rule;
    gossip_mix_algo algo;
    uint32_t window;  /* slots: rounds round .. round + window - 1 */
    mix_slot *slots;  /* window entries */
    double *slot_mem; /* window * dim */
    uint64_t round;   /* the running round within the view, or the next */
    uint32_t run_nin; /* in-degree of the running round */
};

int mix_sync_init(gossip_mix *m, mix_sync *s, const gossip_mix_config *cfg,
                  const mix_sync_rule *rule, gossip_mix_algo algo);
void mix_sync_fini(gossip_mix *m, mix_sync *s);
void mix_sync_clear(gossip_mix *m, mix_sync *s);
void mix_sync_on_view(gossip_mix *m, mix_sync *s);
void mix_sync_start(gossip_mix *m, mix_sync *s);
int mix_sync_recv(gossip_mix *m, mix_sync *s, const mix_frame *f);
void mix_sync_check(gossip_mix *m, mix_sync *s);
/* Give the running round up. keep_stream: our own part still goes out to
 * the out-neighbours that have not had it (they may complete the round). */
void mix_sync_abort_round(gossip_mix *m, mix_sync *s, int keep_stream);
void mix_slot_clear(mix_slot *slot, uint32_t dim);

#endif
