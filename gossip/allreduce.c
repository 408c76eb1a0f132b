/* gossip/allreduce — ring reduce-scatter then allgather over the view.
 *
 * N members ordered by id (the view), member p at position p. The vector is
 * cut into N segments (segment k has dim/N values, plus one for k < dim % N)
 * and every segment into ar_k chunks of at most chunk_values values (chunks of
 * shorter segments may be empty). Steps s = 0 .. 2N-3 per chunk:
 *
 *   reduce-scatter, s <= N-2: p sends segment (p - s) mod N to p+1 and adds
 *       the segment (p - s - 1) mod N it receives from p-1. At s = N-2 the
 *       received segment (p + 1) mod N holds every member's contribution:
 *       p owns it and divides it by N (the result is the mean).
 *   allgather, a = s - (N-1): p sends segment (p + 1 - a) mod N (its own at
 *       a = 0) and stores the segment (p - a) mod N it receives.
 *
 * The segment a member sends at step s is the one it received at step s-1,
 * so chunk c of step s can leave as soon as chunk c of step s-1 has arrived:
 * chunks pipeline around the ring. Every accepted chunk moves the deadline to
 * now + step_timeout; a deadline that passes aborts the round and sends
 * AR_ABORT to every member, which aborts them too (each also has its own
 * timer). Rounds are numbered per epoch; a chunk of a later round from the
 * predecessor is kept in `inbox` until the local start (only reduce-scatter
 * steps can arrive early: the allgather needs our own contribution).
 */
#include "gossip/mix_internal.h"

#include <math.h>
#include <string.h>

#define AR_REASON_TIMEOUT 1u
#define AR_REASON_MAX     3u

typedef struct ar_abort_bcast {
    int active;
    uint64_t epoch, round;
    uint32_t cursor;
} ar_abort_bcast;

typedef struct ar_state {
    float *inbox;          /* dim: chunks received before the local start */
    uint32_t *recv, *sent; /* per chunk: steps received / sent */
    uint32_t *pre;         /* per chunk: steps received early (inbox) */
    uint8_t *relay;        /* per chunk: encoded allgather bytes to forward */
    size_t relay_stride;   /* bytes per relay entry (m->data_max) */
    uint32_t *relay_len;
    uint8_t *relay_bits;
    uint64_t pre_round; /* round the early chunks belong to */
    int pre_valid;
    uint32_t kmax;  /* capacity of recv / sent */
    uint32_t k;     /* chunks per segment in this view */
    uint64_t round; /* running round, or the next one */
    uint32_t cursor;
    ar_abort_bcast abort_bcast;
} ar_state;

static uint32_t seg_len(const gossip_mix *m, uint32_t k)
{
    return m->dim / m->n + (k < m->dim % m->n);
}

static uint32_t seg_off(const gossip_mix *m, uint32_t k)
{
    uint32_t base = m->dim / m->n, rem = m->dim % m->n;
    return k * base + (k < rem ? k : rem);
}

/* Segment sent / received by this member at step s. */
static uint32_t seg_send(const gossip_mix *m, uint32_t s)
{
    uint32_t n = m->n, p = m->me;
    if (s < n - 1)
        return (p + n - s % n) % n;
    uint32_t a = s - (n - 1);
    return (p + 1 + n - a % n) % n;
}

static uint32_t seg_recv(const gossip_mix *m, uint32_t s)
{
    uint32_t n = m->n, p = m->me;
    if (s < n - 1)
        return (p + 2 * n - s - 1) % n;
    uint32_t a = s - (n - 1);
    return (p + n - a) % n;
}

/* Value range of chunk c of segment k. */
static void chunk_range(const gossip_mix *m, uint32_t k, uint32_t c, uint32_t *off, uint32_t *cnt)
{
    uint32_t len = seg_len(m, k);
    uint64_t start = (uint64_t)c * m->cv;
    if (start >= len) {
        *off = seg_off(m, k) + len;
        *cnt = 0;
    } else {
        *off = seg_off(m, k) + (uint32_t)start;
        *cnt = len - (uint32_t)start < m->cv ? len - (uint32_t)start : m->cv;
    }
}

static uint32_t steps(const gossip_mix *m)
{
    return 2 * m->n - 2;
}

static int running(const gossip_mix *m)
{
    return m->state == GOSSIP_MIX_RUNNING && m->algo == GOSSIP_MIX_ALLREDUCE;
}

static void reset_counts(ar_state *ar)
{
    memset(ar->recv, 0, (size_t)ar->kmax * sizeof *ar->recv);
    memset(ar->sent, 0, (size_t)ar->kmax * sizeof *ar->sent);
    ar->cursor = 0;
}

static void reset_pre(ar_state *ar, uint64_t round)
{
    memset(ar->pre, 0, (size_t)ar->kmax * sizeof *ar->pre);
    ar->pre_round = round;
    ar->pre_valid = 1;
}

static void ar_on_view(gossip_mix *m, void *st)
{
    ar_state *ar = st;
    if (running(m)) {
        memcpy(m->work, m->orig, (size_t)m->dim * sizeof *m->work);
        mix_finish(m, GOSSIP_EABORTED);
    }
    reset_counts(ar);
    ar->pre_valid = 0;
    ar->round = 0;
    ar->k = 1;
    if (m->n >= 2) {
        uint32_t maxseg = m->dim / m->n + (m->dim % m->n != 0);
        ar->k = (maxseg + m->cv - 1) / m->cv;
        if (ar->k == 0)
            ar->k = 1;
    }
}

/* The bound on a chunk of step s (apply() says why): the centre is k times
 * our own values, the bound mult x tau. Returns the sender the chunk is laid
 * to for the quarantine (gossip/robust.h): the predecessor for its own
 * contribution (step 0: the only partial sum that is one member's alone),
 * the owner for an allgather segment (its votes), 0 for a partial sum of
 * several. *cut: a partial sum of several from a
 * quarantined predecessor, ignored whole (it holds the liar's values, and
 * the loose bound of a sum of k would let them through). */
static uint64_t ar_bound_of(const gossip_mix *m, uint32_t s, float *k, double *mult, int *cut)
{
    uint32_t n = m->n;
    uint64_t pred = m->ids[(m->me + n - 1) % n];
    int rs = s < n - 1;
    *k = rs ? (float)(s + 1) : 1.0f;
    *mult = rs ? sqrt((double)*k * (*k + 1)) : 0.5;
    *cut = rs && s > 0 && gossip_robust_quarantined(&m->robust, pred);
    if (rs)
        return s == 0 ? pred : 0;
    return m->ids[(seg_recv(m, s) + n - 1) % n];
}

/* Add (reduce-scatter) or store (allgather) chunk c received at step s. */
static void apply(gossip_mix *m, uint32_t s, uint32_t c, float *data)
{
    uint32_t off, cnt;
    chunk_range(m, seg_recv(m, s), c, &off, &cnt);
    float *w = m->work + off;
    /* Poisoned values (gossip/robust.h): a reduce-scatter partial sum of
     * k = s + 1 contributions stays within sqrt(k (k + 1)) tau of k times
     * our own values (the members' differences to us since the last round
     * are their steps d_j minus ours: sum_j d_j - k d_self, of norm
     * sqrt(k + k^2) delta for independent steps; sqrt(k), the bound before,
     * clipped honest sums of non-IID members beyond ~10 of them); an
     * allgather segment within tau / 2 of ours (1.5 local deltas at the
     * default factor; the mean differs from our values by about our own
     * delta): it comes from its owner alone and nothing outvotes it. The
     * relayed bytes are the received ones: each member bounds them itself.
     * Who is answerable for what (the quarantine, ar_bound_of): the
     * predecessor for its own contribution, an owner for its segment. */
    float k;
    double mult;
    int cut;
    uint64_t from = ar_bound_of(m, s, &k, &mult, &cut);
    if (cut)
        gossip_robust_ignore(&m->robust, data, m->orig + off, k, cnt);
    else
        gossip_robust_clip_around(&m->robust, from, data, m->orig + off, k, m->orig + off, cnt,
                                  mult);
    if (s < m->n - 1) {
        for (uint32_t i = 0; i < cnt; i++)
            w[i] += data[i];
        if (s == m->n - 2) {
            float n = (float)m->n;
            for (uint32_t i = 0; i < cnt; i++)
                w[i] /= n;
        }
    } else {
        memcpy(w, data, (size_t)cnt * sizeof *w);
    }
}

/* 32-bit chunks, when no bounds apply to peers' values (robust rule none),
 * are applied straight from the frame's bytes (big-endian float32,
 * gossip/codec): one pass checks them, a second adds or stores them while
 * they are still in cache, where the codec path decoded into scratch,
 * checked scratch and then added it (three passes and a copy). */
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
static inline float be32_at(const uint8_t *p, size_t i)
{
    uint32_t u;
    memcpy(&u, p + 4 * i, sizeof u);
    u = __builtin_bswap32(u);
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
#else
static inline float be32_at(const uint8_t *p, size_t i)
{
    uint32_t u = gossip_get_u32(p + 4 * i);
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
#endif

/* Kept out of line: inlined into ar_recv_chunk, GCC 12 left these loops
 * scalar (callgrind: 20 instructions per value, vectorized about 3). */
#if defined(__GNUC__)
#define AR_NOINLINE __attribute__((noinline))
#else
#define AR_NOINLINE
#endif

/* GOSSIP_OK if every value passes mix_values_ok, else GOSSIP_ENONFINITE. */
static AR_NOINLINE int be32_check(const uint8_t *restrict d, uint32_t n)
{
    int bad = 0;
    for (uint32_t i = 0; i < n; i++)
        bad |= !(fabsf(be32_at(d, i)) <= GOSSIP_MIX_VALUE_MAX);
    return bad ? GOSSIP_ENONFINITE : GOSSIP_OK;
}

/* be32_check, and the squared distance of the values to k c in the same
 * pass (as gossip_robust_clip_around measures it). */
static AR_NOINLINE int be32_check_dist(const uint8_t *restrict d, uint32_t n,
                                       const float *restrict c, float k, double *dist2)
{
    int bad = 0;
    double ss = 0;
    for (uint32_t i = 0; i < n; i++) {
        float v = be32_at(d, i);
        bad |= !(fabsf(v) <= GOSSIP_MIX_VALUE_MAX);
        double e = (double)v - (double)k * c[i];
        ss += e * e;
    }
    *dist2 = ss;
    return bad ? GOSSIP_ENONFINITE : GOSSIP_OK;
}

/* apply() for checked 32-bit wire bytes, the same sums bit for bit. */
static AR_NOINLINE void apply_be32(gossip_mix *m, uint32_t s, uint32_t c, const uint8_t *be)
{
    uint32_t off, cnt;
    chunk_range(m, seg_recv(m, s), c, &off, &cnt);
    float *restrict w = m->work + off;
    if (s + 2 < m->n) {
        for (uint32_t i = 0; i < cnt; i++)
            w[i] += be32_at(be, i);
    } else if (s + 2 == m->n) { /* the last addition, then the mean */
        float n = (float)m->n;
        for (uint32_t i = 0; i < cnt; i++)
            w[i] = (w[i] + be32_at(be, i)) / n;
    } else {
        for (uint32_t i = 0; i < cnt; i++)
            w[i] = be32_at(be, i);
    }
}

static void ar_abort(gossip_mix *m, ar_state *ar, int broadcast)
{
    if (!running(m))
        return;
    if (broadcast) {
        ar->abort_bcast =
            (ar_abort_bcast){.active = 1, .epoch = m->view_id, .round = ar->round, .cursor = 0};
    }
    memcpy(m->work, m->orig, (size_t)m->dim * sizeof *m->work);
    reset_counts(ar);
    ar->round++;
    mix_finish(m, GOSSIP_EABORTED);
}

static void ar_start(gossip_mix *m, void *st, gossip_time_us now)
{
    ar_state *ar = st;
    reset_counts(ar);
    if (m->n < 2) {
        ar->round++;
        mix_finish(m, GOSSIP_OK);
        return;
    }
    if (ar->pre_valid && ar->pre_round > ar->round)
        ar->round = ar->pre_round; /* the others are ahead: join their round */
    if (ar->pre_valid && ar->pre_round == ar->round) {
        /* Replay the chunks that arrived before we started, in step order. */
        for (uint32_t c = 0; c < ar->k; c++) {
            for (uint32_t s = 0; s < ar->pre[c]; s++) {
                uint32_t off, cnt;
                chunk_range(m, seg_recv(m, s), c, &off, &cnt);
                apply(m, s, c, ar->inbox + off);
            }
            ar->recv[c] = ar->pre[c];
        }
    }
    ar->pre_valid = 0;
    m->deadline = now + m->step_timeout;
}

static int ar_recv_chunk(gossip_mix *m, ar_state *ar, uint64_t from, const gossip_header *h,
                         const uint8_t *p, size_t len, gossip_time_us now)
{
    if (m->algo != GOSSIP_MIX_ALLREDUCE)
        return GOSSIP_ESTALE;
    if (m->n < 2 || m->me == UINT32_MAX)
        return GOSSIP_ENOTFOUND;
    if (len < GOSSIP_MIX_AR_HEADER)
        return GOSSIP_ETRUNC;
    unsigned bits = p[0];
    uint32_t reserved = ((uint32_t)p[1] << 16) | gossip_get_u16(p + 2);
    uint32_t block = gossip_get_u32(p + 4), members = gossip_get_u32(p + 8);
    uint32_t s = gossip_get_u32(p + 12), c = gossip_get_u32(p + 16);
    uint32_t dim = gossip_get_u32(p + 20), off = gossip_get_u32(p + 24);
    uint32_t cnt = gossip_get_u32(p + 28);
    if (!gossip_codec_bits_valid(bits) || reserved || block != m->block || dim != m->dim)
        return GOSSIP_EMALFORMED;
    /* The rest is read against our view, so a chunk of a view we do not
     * hold yet (a member count, step or sender that differs from ours) is
     * stale, not malformed: the stash keeps it until we install that view
     * (gossip/mix.c), instead of the round waiting out its deadline. */
    if (h->epoch != m->view_id)
        return GOSSIP_ESTALE;
    if (members != m->n || s >= steps(m) || c >= ar->k)
        return GOSSIP_EMALFORMED;
    if (from != m->ids[(m->me + m->n - 1) % m->n])
        return GOSSIP_EMALFORMED; /* only the ring predecessor sends us chunks */
    uint32_t want_off, want_cnt;
    chunk_range(m, seg_recv(m, s), c, &want_off, &want_cnt);
    size_t data = want_cnt ? gossip_codec_size(want_cnt, bits, m->block) : 0;
    if (off != want_off || cnt != want_cnt || len != GOSSIP_MIX_AR_HEADER + data)
        return GOSSIP_EMALFORMED;
    const uint8_t *d = p + GOSSIP_MIX_AR_HEADER;

    if (running(m) && h->round == ar->round) {
        if (s != ar->recv[c])
            return GOSSIP_EMALFORMED; /* out of order or duplicate */
        /* An allgather chunk we forward (s < 2N-3) is relayed byte for byte,
         * so every member decodes the owner's very bytes. Its slot is free
         * once our send of step s has left (the caller drains poll_send
         * after every call, so it always is). */
        int relay = s >= m->n - 1 && s + 1 < steps(m);
        if (relay && ar->sent[c] < s)
            return GOSSIP_EFULL;
        /* 32-bit chunks within the bound on peers' values (all of them
         * with robust rule none) take the fast path: their distance to our
         * values is measured in the check's pass (gossip/robust.h). */
        int fast = bits == 32, rc = GOSSIP_OK;
        if (fast && m->robust.cfg.rule == GOSSIP_ROBUST_NONE) {
            rc = be32_check(d, cnt);
        } else if (fast) {
            float k;
            double mult, dist2 = HUGE_VAL;
            int cut;
            uint64_t peer = ar_bound_of(m, s, &k, &mult, &cut);
            rc = cut ? GOSSIP_OK : be32_check_dist(d, cnt, m->orig + off, k, &dist2);
            fast = !rc && sqrt(dist2) <= gossip_robust_limit(&m->robust, cnt, mult, m->orig + off);
            if (fast)
                gossip_robust_accepted(&m->robust, peer, cnt);
        }
        if (!fast && !rc) {
            rc = cnt ? gossip_codec_decode(d, data, cnt, bits, m->block, m->scratch) : 0;
            if (!rc)
                rc = mix_values_ok(m->scratch, cnt);
        }
        if (rc)
            return rc;
        if (relay) {
            memcpy(ar->relay + (size_t)c * ar->relay_stride, d, data);
            ar->relay_len[c] = (uint32_t)data;
            ar->relay_bits[c] = (uint8_t)bits;
        }
        if (fast)
            apply_be32(m, s, c, d);
        else
            apply(m, s, c, m->scratch);
        ar->recv[c]++;
        m->deadline = now + m->step_timeout;
        return GOSSIP_OK;
    }
    if (h->round < ar->round)
        return GOSSIP_ESTALE;
    /* A chunk of a later round, kept until we start it (only reduce-scatter
     * steps, each chunk's in order). It is checked in full before it may
     * end our round: a frame we then refuse must change nothing. */
    int fresh = !ar->pre_valid || ar->pre_round != h->round;
    if (fresh && ar->pre_valid && h->round < ar->pre_round)
        return GOSSIP_ESTALE;
    if (s > m->n - 2 || s != (fresh ? 0 : ar->pre[c]))
        return GOSSIP_EMALFORMED;
    int rc = cnt ? gossip_codec_decode(d, data, cnt, bits, m->block, m->scratch) : 0;
    if (!rc)
        rc = mix_values_ok(m->scratch, cnt);
    if (rc)
        return rc;
    if (running(m)) {
        /* A later round while ours is not finished: the others gave up on
         * ours. (If all our chunks are in, we only wait for our own sends.) */
        int complete = 1;
        for (uint32_t k = 0; k < ar->k && complete; k++)
            complete = ar->recv[k] == steps(m);
        if (!complete)
            ar_abort(m, ar, 0);
    }
    if (fresh)
        reset_pre(ar, h->round);
    memcpy(ar->inbox + off, m->scratch, (size_t)cnt * sizeof(float));
    ar->pre[c]++;
    return GOSSIP_OK;
}

static int ar_recv_abort(gossip_mix *m, ar_state *ar, const gossip_header *h, const uint8_t *p,
                         size_t len)
{
    if (len < GOSSIP_MIX_ABORT_BYTES)
        return GOSSIP_ETRUNC;
    if (len != GOSSIP_MIX_ABORT_BYTES)
        return GOSSIP_EMALFORMED;
    uint32_t reason = gossip_get_u32(p), reserved = gossip_get_u32(p + 4);
    if (reason == 0 || reason > AR_REASON_MAX || reserved)
        return GOSSIP_EMALFORMED;
    if (h->epoch != m->view_id || h->round < ar->round)
        return GOSSIP_ESTALE;
    m->stats.aborts_received++;
    ar_abort(m, ar, 0);
    if (h->round + 1 > ar->round)
        ar->round = h->round + 1;
    if (ar->pre_valid && ar->pre_round <= h->round)
        ar->pre_valid = 0;
    return GOSSIP_OK;
}

static int ar_recv(gossip_mix *m, void *st, const mix_frame *f, gossip_time_us now)
{
    if (f->h->type == GOSSIP_MSG_AR_CHUNK)
        return ar_recv_chunk(m, st, f->from, f->h, f->p, f->len, now);
    return ar_recv_abort(m, st, f->h, f->p, f->len);
}

/* The deadline passed: abort here and tell every member. */
static void ar_expire(gossip_mix *m, void *st, gossip_time_us now)
{
    (void)now;
    ar_abort(m, st, 1);
}

static void ar_check(gossip_mix *m, void *st)
{
    ar_state *ar = st;
    if (!running(m))
        return;
    uint32_t S = steps(m);
    for (uint32_t c = 0; c < ar->k; c++)
        if (ar->recv[c] != S || ar->sent[c] != S)
            return;
    reset_counts(ar);
    ar->round++;
    mix_finish(m, GOSSIP_OK);
}

static int abort_poll(gossip_mix *m, ar_state *ar, gossip_send *out)
{
    ar_abort_bcast *b = &ar->abort_bcast;
    while (b->cursor < m->n && m->ids[b->cursor] == m->self)
        b->cursor++;
    if (b->cursor >= m->n) {
        b->active = 0;
        return 0;
    }
    uint8_t *f = m->frame;
    mix_header(m, f, GOSSIP_MSG_AR_ABORT, b->epoch, b->round, GOSSIP_MIX_ABORT_BYTES);
    gossip_put_u32(f + GOSSIP_HEADER_SIZE, AR_REASON_TIMEOUT);
    gossip_put_u32(f + GOSSIP_HEADER_SIZE + 4, 0);
    out->frame = f;
    mix_sent(m, out, m->ids[b->cursor++], GOSSIP_HEADER_SIZE + GOSSIP_MIX_ABORT_BYTES);
    m->stats.aborts_sent++;
    return 1;
}

static int ar_poll(gossip_mix *m, void *st, gossip_send *out)
{
    ar_state *ar = st;
    if (ar->abort_bcast.active && abort_poll(m, ar, out))
        return 1;
    if (!running(m) || m->n < 2)
        return 0;
    uint32_t S = steps(m), K = ar->k;
    for (uint32_t i = 0; i < K; i++) {
        uint32_t c = (ar->cursor + i) % K;
        uint32_t s = ar->sent[c];
        if (s >= S || s > ar->recv[c])
            continue;
        uint32_t k = seg_send(m, s), off, cnt;
        chunk_range(m, k, c, &off, &cnt);
        uint8_t *f = m->frame, *p = f + GOSSIP_HEADER_SIZE;
        size_t data = cnt ? gossip_codec_size(cnt, m->bits, m->block) : 0;
        /* The owner's first allgather send fixes the segment's final value:
         * it keeps exactly what the others decode, so all end up equal. */
        int owner = s == m->n - 1;
        unsigned bits = m->bits;
        if (s >= m->n) { /* forward the bytes received at step s - 1 */
            bits = ar->relay_bits[c];
            data = ar->relay_len[c];
            memcpy(p + GOSSIP_MIX_AR_HEADER, ar->relay + (size_t)c * ar->relay_stride, data);
        } else if (cnt) {
            /* (at 32 bits what the others decode is the segment itself) */
            int keep = owner && m->bits != 32;
            int rc = gossip_codec_encode(m->env, m->work + off, cnt, m->bits, m->block,
                                         p + GOSSIP_MIX_AR_HEADER, data, keep ? m->scratch : NULL);
            if (rc) { /* a non-finite sum: give up on the round everywhere */
                ar_abort(m, ar, 1);
                return abort_poll(m, ar, out);
            }
            if (keep)
                memcpy(m->work + off, m->scratch, (size_t)cnt * sizeof(float));
        }
        p[0] = (uint8_t)bits;
        p[1] = p[2] = p[3] = 0;
        gossip_put_u32(p + 4, m->block);
        gossip_put_u32(p + 8, m->n);
        gossip_put_u32(p + 12, s);
        gossip_put_u32(p + 16, c);
        gossip_put_u32(p + 20, m->dim);
        gossip_put_u32(p + 24, off);
        gossip_put_u32(p + 28, cnt);
        mix_header(m, f, GOSSIP_MSG_AR_CHUNK, m->view_id, ar->round, GOSSIP_MIX_AR_HEADER + data);
        out->frame = f;
        mix_sent(m, out, m->ids[(m->me + 1) % m->n],
                 GOSSIP_HEADER_SIZE + GOSSIP_MIX_AR_HEADER + data);
        ar->sent[c]++;
        ar->cursor = (c + 1) % K;
        return 1;
    }
    return 0;
}

static int ar_topology_ok(gossip_topology t)
{
    (void)t;
    return 1;
}

static int ar_create(gossip_mix *m, const gossip_mix_config *cfg, void **st)
{
    (void)cfg;
    ar_state *ar = gossip_calloc(m->env, 1, sizeof *ar);
    if (!ar)
        return GOSSIP_ENOMEM;
    *st = ar;
    const gossip_env *env = m->env;
    ar->kmax = m->nchunks;
    ar->relay_stride = m->data_max;
    int ok = (ar->inbox = gossip_calloc(env, m->dim, sizeof(float))) &&
             (ar->recv = gossip_calloc(env, ar->kmax, sizeof(uint32_t))) &&
             (ar->sent = gossip_calloc(env, ar->kmax, sizeof(uint32_t))) &&
             (ar->pre = gossip_calloc(env, ar->kmax, sizeof(uint32_t))) &&
             (ar->relay = gossip_calloc(env, ar->kmax, ar->relay_stride)) &&
             (ar->relay_len = gossip_calloc(env, ar->kmax, sizeof(uint32_t))) &&
             (ar->relay_bits = gossip_calloc(env, ar->kmax, 1));
    return ok ? GOSSIP_OK : GOSSIP_ENOMEM;
}

static void ar_destroy(gossip_mix *m, void *st)
{
    ar_state *ar = st;
    const gossip_env *env = m->env;
    gossip_free(env, ar->inbox);
    gossip_free(env, ar->recv);
    gossip_free(env, ar->sent);
    gossip_free(env, ar->pre);
    gossip_free(env, ar->relay);
    gossip_free(env, ar->relay_len);
    gossip_free(env, ar->relay_bits);
    gossip_free(env, ar);
}

static void ar_reset(gossip_mix *m, void *st)
{
    (void)m;
    (void)st;
}

static uint64_t ar_round(const gossip_mix *m, const void *st)
{
    (void)m;
    return ((const ar_state *)st)->round;
}

const mix_ops mix_allreduce_ops = {
    .flags = 0,
    .types = MIX_TYPE_BIT(GOSSIP_MSG_AR_CHUNK) | MIX_TYPE_BIT(GOSSIP_MSG_AR_ABORT),
    .stash_types = MIX_TYPE_BIT(GOSSIP_MSG_AR_CHUNK),
    .topology_ok = ar_topology_ok,
    .create = ar_create,
    .destroy = ar_destroy,
    .on_view = ar_on_view,
    .reset = ar_reset,
    .start = ar_start,
    .recv = ar_recv,
    .check = ar_check,
    .expire = ar_expire,
    .poll = ar_poll,
    .round = ar_round,
};
