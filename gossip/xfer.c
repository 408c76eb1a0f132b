#include "gossip/xfer.h"

#include <math.h>
#include <sodium.h>
#include <string.h>

#include "gossip/hashstate.h"
#include "gossip/robust.h"

#define HASH 32u

typedef struct snap {
    int active;
    uint64_t peer;
    uint32_t xfer;
    uint64_t round;
    float *values; /* dim, allocated at START */
    uint8_t hash[HASH];
    gossip_time_us last_used;
    int info_pending;
    uint32_t next, remaining; /* pending run of DATA chunks */
} snap;

typedef struct nack_out {
    uint64_t peer;
    uint32_t xfer;
    uint8_t reason;
} nack_out;
#define NACK_QUEUE 8u

struct gossip_xfer {
    const gossip_env *env;
    gossip_xfer_config cfg;
    gossip_xfer_state state;
    /* fetch */
    uint64_t peers[GOSSIP_XFER_PEERS_MAX];
    uint32_t n_peers;
    uint32_t attempt; /* peers[attempt % n_peers], pass = attempt / n_peers */
    uint32_t busy;    /* attempts of this fetch that ended in a NACK busy */
    int has_ckpt;
    uint64_t ckpt_round;
    uint32_t xfer;
    uint64_t src;
    int have_info;
    uint64_t round;
    uint32_t chunk_values, n_chunks;
    uint8_t hash[HASH];
    uint32_t next, requested;
    int want_pending;   /* START or DATA */
    int done_pending;   /* tell src to release */
    uint64_t done_peer; /* ... which src */
    uint32_t done_xfer;
    gossip_time_us deadline;
    gossip_hash_slot hs; /* gossip_hash_state(&hs) */
    float *values;       /* dim */
    /* serve */
    snap snaps[GOSSIP_XFER_SERVE_MAX];
    uint32_t serve_rr;
    nack_out nacks[NACK_QUEUE];
    uint32_t n_nacks;
    uint32_t next_xfer;
    uint8_t *frame;
    size_t frame_cap;
    uint8_t *scratch; /* chunk_values * 4, for hashing a snapshot */
    gossip_xfer_counters c;
};

void gossip_xfer_config_default(gossip_xfer_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->chunk_values = GOSSIP_XFER_CHUNK_DEFAULT;
    cfg->window = GOSSIP_XFER_WINDOW_DEFAULT;
    cfg->timeout_us = 2000000;
    cfg->serve_idle_us = 10000000;
    cfg->resume_rounds = GOSSIP_XFER_RESUME_DEFAULT;
}

int gossip_xfer_should_resume(uint64_t ckpt_round, uint64_t peer_round, uint64_t k)
{
    if (peer_round <= ckpt_round)
        return 1;
    return peer_round - ckpt_round <= k;
}

/* ---- decoding ------------------------------------------------------------ */

int gossip_xfer_msg_decode(uint8_t type, const uint8_t *p, size_t len, gossip_xfer_msg *m)
{
    memset(m, 0, sizeof *m);
    m->type = type;
    gossip_reader r;
    gossip_reader_init(&r, p, len);
    switch (type) {
    case GOSSIP_MSG_MODEL_WANT:
        if (len != GOSSIP_XFER_WANT_SIZE)
            return len < GOSSIP_XFER_WANT_SIZE ? GOSSIP_ETRUNC : GOSSIP_EMALFORMED;
        m->xfer = gossip_r_u32(&r);
        m->kind = gossip_r_u8(&r);
        m->first = gossip_r_u32(&r);
        m->count = gossip_r_u16(&r);
        if (m->kind > GOSSIP_XFER_DONE)
            return GOSSIP_EMALFORMED;
        if (m->kind == GOSSIP_XFER_DATA) {
            if (m->count == 0)
                return GOSSIP_EMALFORMED;
            if (m->count > GOSSIP_XFER_WINDOW_MAX || m->first > GOSSIP_XFER_DIM_MAX)
                return GOSSIP_ETOOBIG;
        }
        return GOSSIP_OK;
    case GOSSIP_MSG_MODEL_NACK:
        if (len != GOSSIP_XFER_NACK_SIZE)
            return len < GOSSIP_XFER_NACK_SIZE ? GOSSIP_ETRUNC : GOSSIP_EMALFORMED;
        m->xfer = gossip_r_u32(&r);
        m->reason = gossip_r_u8(&r);
        if (m->reason < GOSSIP_XFER_BUSY || m->reason > GOSSIP_XFER_GONE)
            return GOSSIP_EMALFORMED;
        return GOSSIP_OK;
    case GOSSIP_MSG_MODEL_CHUNK:
        m->xfer = gossip_r_u32(&r);
        m->kind = gossip_r_u8(&r);
        if (r.err)
            return GOSSIP_ETRUNC;
        if (m->kind == GOSSIP_XFER_INFO) {
            if (len != GOSSIP_XFER_INFO_SIZE)
                return len < GOSSIP_XFER_INFO_SIZE ? GOSSIP_ETRUNC : GOSSIP_EMALFORMED;
            m->round = gossip_r_u64(&r);
            m->dim = gossip_r_u32(&r);
            m->chunk_values = gossip_r_u32(&r);
            m->n_chunks = gossip_r_u32(&r);
            m->hash = gossip_r_view(&r, HASH);
            if (m->dim > GOSSIP_XFER_DIM_MAX || m->chunk_values > GOSSIP_XFER_CHUNK_MAX)
                return GOSSIP_ETOOBIG;
            if (m->dim == 0 || m->chunk_values == 0 ||
                m->n_chunks != (m->dim + (uint64_t)m->chunk_values - 1) / m->chunk_values)
                return GOSSIP_EMALFORMED;
            return GOSSIP_OK;
        }
        if (m->kind == GOSSIP_XFER_DATA) {
            m->index = gossip_r_u32(&r);
            m->n_values = gossip_r_u32(&r);
            if (r.err)
                return GOSSIP_ETRUNC;
            if (m->n_values > GOSSIP_XFER_CHUNK_MAX)
                return GOSSIP_ETOOBIG;
            if (gossip_r_left(&r) != (size_t)m->n_values * 4)
                return gossip_r_left(&r) < (size_t)m->n_values * 4 ? GOSSIP_ETRUNC
                                                                   : GOSSIP_EMALFORMED;
            m->values = gossip_r_view(&r, (size_t)m->n_values * 4);
            return GOSSIP_OK;
        }
        return GOSSIP_EMALFORMED;
    default:
        return GOSSIP_ETYPE;
    }
}

/* ---- create / destroy ---------------------------------------------------- */

void gossip_xfer_destroy(gossip_xfer *x)
{
    if (!x)
        return;
    for (uint32_t i = 0; i < GOSSIP_XFER_SERVE_MAX; i++)
        gossip_free(x->env, x->snaps[i].values);
    gossip_free(x->env, x->values);
    gossip_free(x->env, x->frame);
    gossip_free(x->env, x->scratch);
    gossip_free(x->env, x);
}

int gossip_xfer_create(gossip_xfer **out, const gossip_env *env, const gossip_xfer_config *cfg)
{
    *out = NULL;
    if (!cfg || cfg->self == 0 || cfg->dim == 0 || cfg->dim > GOSSIP_XFER_DIM_MAX ||
        cfg->chunk_values == 0 || cfg->chunk_values > GOSSIP_XFER_CHUNK_MAX || cfg->window == 0 ||
        cfg->window > GOSSIP_XFER_WINDOW_MAX || cfg->timeout_us == 0 || cfg->serve_idle_us == 0)
        return GOSSIP_EINVAL;
    gossip_xfer *x = gossip_calloc(env, 1, sizeof *x);
    if (!x)
        return GOSSIP_ENOMEM;
    x->env = env;
    x->cfg = *cfg;
    /* A chunk never holds more than the model: with dim below chunk_values
     * the one chunk is the same either way (as are the frames, the INFO's
     * chunk count and the hash), and the buffers shrink to the model (the
     * simulator's dim-16 agents kept 128 KiB each at the default). */
    if (x->cfg.chunk_values > cfg->dim)
        x->cfg.chunk_values = cfg->dim;
    size_t data = GOSSIP_XFER_DATA_FIXED + (size_t)x->cfg.chunk_values * 4;
    x->frame_cap =
        GOSSIP_HEADER_SIZE + (data > GOSSIP_XFER_INFO_SIZE ? data : GOSSIP_XFER_INFO_SIZE);
    x->frame = gossip_alloc(env, x->frame_cap);
    x->scratch = gossip_alloc(env, (size_t)x->cfg.chunk_values * 4);
    x->values = gossip_alloc(env, (size_t)cfg->dim * sizeof(float));
    if (!x->frame || !x->scratch || !x->values) {
        gossip_xfer_destroy(x);
        return GOSSIP_ENOMEM;
    }
    x->next_xfer = (uint32_t)gossip_random(env);
    *out = x;
    return GOSSIP_OK;
}

/* ---- fetching -------------------------------------------------------------- */

static void fetch_attempt(gossip_xfer *x, uint32_t attempt, gossip_time_us now)
{
    if (x->have_info || x->src) {
        /* Release the snapshot at the previous source. */
        x->done_pending = 1;
        x->done_peer = x->src;
        x->done_xfer = x->xfer;
    }
    if (attempt >= x->n_peers * GOSSIP_XFER_PASSES) {
        x->state = GOSSIP_XFER_FAILED;
        x->c.failed++;
        x->src = 0;
        return;
    }
    if (attempt > 0)
        x->c.restarts++;
    x->attempt = attempt;
    x->src = x->peers[attempt % x->n_peers];
    x->xfer = x->next_xfer++;
    x->have_info = 0;
    x->next = x->requested = 0;
    x->want_pending = 1;
    x->deadline = now + x->cfg.timeout_us;
}

int gossip_xfer_start(gossip_xfer *x, const uint64_t *peers, uint32_t n_peers, int has_checkpoint,
                      uint64_t ckpt_round, gossip_time_us now)
{
    if (x->state == GOSSIP_XFER_RUNNING)
        return GOSSIP_EFULL;
    if (!peers || n_peers == 0)
        return GOSSIP_EINVAL;
    if (n_peers > GOSSIP_XFER_PEERS_MAX)
        n_peers = GOSSIP_XFER_PEERS_MAX;
    for (uint32_t i = 0; i < n_peers; i++)
        if (peers[i] == 0 || peers[i] == x->cfg.self)
            return GOSSIP_EINVAL;
    memcpy(x->peers, peers, n_peers * sizeof *peers);
    x->n_peers = n_peers;
    x->has_ckpt = has_checkpoint;
    x->ckpt_round = ckpt_round;
    x->state = GOSSIP_XFER_RUNNING;
    x->src = 0;
    x->have_info = 0;
    x->c.started++;
    x->busy = 0;
    fetch_attempt(x, 0, now);
    return GOSSIP_OK;
}

gossip_xfer_state gossip_xfer_get_state(const gossip_xfer *x)
{
    return x->state;
}

int gossip_xfer_failed_busy(const gossip_xfer *x)
{
    return x->state == GOSSIP_XFER_FAILED && x->n_peers &&
           x->busy == x->n_peers * GOSSIP_XFER_PASSES;
}

int gossip_xfer_result(const gossip_xfer *x, float *out, uint64_t *round)
{
    if (x->state != GOSSIP_XFER_COMPLETE)
        return GOSSIP_ENOTFOUND;
    memcpy(out, x->values, (size_t)x->cfg.dim * sizeof(float));
    *round = x->round;
    return GOSSIP_OK;
}

uint64_t gossip_xfer_peer_round(const gossip_xfer *x)
{
    return x->round;
}

static void on_info(gossip_xfer *x, const gossip_xfer_msg *m, gossip_time_us now)
{
    if (x->have_info) {
        x->c.stale++;
        return;
    }
    if (m->dim != x->cfg.dim) {
        x->c.info_bad++;
        fetch_attempt(x, x->attempt + 1, now);
        return;
    }
    x->have_info = 1;
    x->round = m->round;
    x->chunk_values = m->chunk_values;
    x->n_chunks = m->n_chunks;
    memcpy(x->hash, m->hash, HASH);
    if (x->has_ckpt && gossip_xfer_should_resume(x->ckpt_round, m->round, x->cfg.resume_rounds)) {
        x->state = GOSSIP_XFER_RESUME;
        x->c.resumed++;
        x->done_pending = 1;
        x->done_peer = x->src;
        x->done_xfer = x->xfer;
        return;
    }
    uint8_t head[12];
    gossip_put_u64(head, m->round);
    gossip_put_u32(head + 8, m->dim);
    crypto_generichash_init(gossip_hash_state(&x->hs), NULL, 0, HASH);
    crypto_generichash_update(gossip_hash_state(&x->hs), head, sizeof head);
    x->next = x->requested = 0;
    x->want_pending = 1;
    x->deadline = now + x->cfg.timeout_us;
}

static void on_data(gossip_xfer *x, const gossip_xfer_msg *m, gossip_time_us now)
{
    if (!x->have_info || m->index != x->next) {
        x->c.out_of_order++;
        return;
    }
    uint64_t off = (uint64_t)m->index * x->chunk_values;
    uint64_t expect = x->cfg.dim - off < x->chunk_values ? x->cfg.dim - off : x->chunk_values;
    if (m->n_values != expect) {
        x->c.info_bad++;
        fetch_attempt(x, x->attempt + 1, now);
        return;
    }
    float *dst = x->values + off;
    for (uint32_t i = 0; i < m->n_values; i++) {
        uint32_t u = gossip_get_u32(m->values + 4 * (size_t)i);
        float f;
        memcpy(&f, &u, 4);
        /* a model adopted whole from one peer: bounded beyond finiteness
         * (gossip/robust.h); another attempt may pick another source */
        if (!(fabsf(f) <= GOSSIP_ROBUST_ADOPT_VALUE_MAX)) {
            x->c.nonfinite++;
            fetch_attempt(x, x->attempt + 1, now);
            return;
        }
        dst[i] = f;
    }
    crypto_generichash_update(gossip_hash_state(&x->hs), m->values, (size_t)m->n_values * 4);
    x->next++;
    x->deadline = now + x->cfg.timeout_us;
    if (x->next < x->n_chunks) {
        if (x->requested < x->n_chunks && x->requested - x->next <= x->cfg.window / 2)
            x->want_pending = 1;
        return;
    }
    uint8_t digest[HASH];
    crypto_generichash_final(gossip_hash_state(&x->hs), digest, HASH);
    if (memcmp(digest, x->hash, HASH) != 0) {
        x->c.hash_bad++;
        fetch_attempt(x, x->attempt + 1, now);
        return;
    }
    x->state = GOSSIP_XFER_COMPLETE;
    x->c.completed++;
    x->done_pending = 1;
    x->done_peer = x->src;
    x->done_xfer = x->xfer;
}

/* ---- serving ------------------------------------------------------------------ */

static void nack_push(gossip_xfer *x, uint64_t peer, uint32_t xfer, uint8_t reason)
{
    if (x->n_nacks < NACK_QUEUE)
        x->nacks[x->n_nacks++] = (nack_out){peer, xfer, reason};
}

static snap *snap_find(gossip_xfer *x, uint64_t peer, uint32_t xfer)
{
    for (uint32_t i = 0; i < GOSSIP_XFER_SERVE_MAX; i++)
        if (x->snaps[i].active && x->snaps[i].peer == peer && x->snaps[i].xfer == xfer)
            return &x->snaps[i];
    return NULL;
}

static void snap_release(gossip_xfer *x, snap *s)
{
    gossip_free(x->env, s->values);
    s->values = NULL;
    s->active = 0;
}

static void on_start(gossip_xfer *x, uint64_t from, const gossip_xfer_msg *m, gossip_time_us now)
{
    snap *s = snap_find(x, from, m->xfer);
    if (s) { /* a repeated START: send the INFO again */
        s->info_pending = 1;
        s->last_used = now;
        return;
    }
    /* A fetcher runs one transfer at a time: a START from a peer that
     * already holds a slot replaces its old snapshot, so one peer never
     * holds more than one slot. */
    for (uint32_t i = 0; i < GOSSIP_XFER_SERVE_MAX && !s; i++)
        if (x->snaps[i].active && x->snaps[i].peer == from) {
            snap_release(x, &x->snaps[i]);
            s = &x->snaps[i];
        }
    for (uint32_t i = 0; i < GOSSIP_XFER_SERVE_MAX && !s; i++)
        if (!x->snaps[i].active)
            s = &x->snaps[i];
    if (!s || !x->cfg.snapshot) {
        x->c.serve_busy++;
        nack_push(x, from, m->xfer, GOSSIP_XFER_BUSY);
        return;
    }
    const uint32_t dim = x->cfg.dim;
    s->values = gossip_alloc(x->env, (size_t)dim * sizeof(float));
    uint64_t round = 0;
    if (!s->values || x->cfg.snapshot(x->cfg.snapshot_ctx, s->values, dim, &round) != 0) {
        gossip_free(x->env, s->values);
        s->values = NULL;
        x->c.serve_busy++;
        nack_push(x, from, m->xfer, GOSSIP_XFER_BUSY);
        return;
    }
    /* Hash exactly the bytes the chunks will carry. */
    crypto_generichash_state hs;
    uint8_t head[12];
    gossip_put_u64(head, round);
    gossip_put_u32(head + 8, dim);
    crypto_generichash_init(&hs, NULL, 0, HASH);
    crypto_generichash_update(&hs, head, sizeof head);
    for (uint32_t off = 0; off < dim; off += x->cfg.chunk_values) {
        uint32_t n = dim - off < x->cfg.chunk_values ? dim - off : x->cfg.chunk_values;
        for (uint32_t i = 0; i < n; i++) {
            uint32_t u;
            memcpy(&u, &s->values[off + i], 4);
            gossip_put_u32(x->scratch + 4 * (size_t)i, u);
        }
        crypto_generichash_update(&hs, x->scratch, (size_t)n * 4);
    }
    crypto_generichash_final(&hs, s->hash, HASH);
    s->active = 1;
    s->peer = from;
    s->xfer = m->xfer;
    s->round = round;
    s->last_used = now;
    s->info_pending = 1;
    s->next = s->remaining = 0;
    x->c.snapshots++;
}

static void on_want(gossip_xfer *x, uint64_t from, const gossip_xfer_msg *m, gossip_time_us now)
{
    if (m->kind == GOSSIP_XFER_START) {
        on_start(x, from, m, now);
        return;
    }
    snap *s = snap_find(x, from, m->xfer);
    if (m->kind == GOSSIP_XFER_DONE) {
        if (s)
            snap_release(x, s);
        return;
    }
    if (!s) {
        nack_push(x, from, m->xfer, GOSSIP_XFER_GONE);
        return;
    }
    uint32_t n_chunks = (x->cfg.dim + x->cfg.chunk_values - 1) / x->cfg.chunk_values;
    if (m->first >= n_chunks) {
        nack_push(x, from, m->xfer, GOSSIP_XFER_BAD_REQUEST);
        return;
    }
    /* One pending run per snapshot: a request that continues the run
     * extends it (the fetcher refills its window before the run drains);
     * any other request (a re-request after a gap) replaces it. */
    if (s->remaining && m->first == s->next + s->remaining) {
        s->remaining += m->count;
    } else {
        s->next = m->first;
        s->remaining = m->count;
    }
    if (s->next + s->remaining > n_chunks)
        s->remaining = n_chunks - s->next;
    s->last_used = now;
}

int gossip_xfer_recv(gossip_xfer *x, uint64_t from, const gossip_header *h, const uint8_t *payload,
                     size_t len, gossip_time_us now)
{
    gossip_xfer_msg m;
    int rc = gossip_xfer_msg_decode(h->type, payload, len, &m);
    if (rc) {
        x->c.rejected++;
        return rc;
    }
    if (from == 0 || from == x->cfg.self) {
        x->c.rejected++;
        return GOSSIP_EMALFORMED;
    }
    if (m.type == GOSSIP_MSG_MODEL_WANT) {
        on_want(x, from, &m, now);
        return GOSSIP_OK;
    }
    if (x->state != GOSSIP_XFER_RUNNING || from != x->src || m.xfer != x->xfer) {
        x->c.stale++;
        return GOSSIP_OK;
    }
    if (m.type == GOSSIP_MSG_MODEL_NACK) {
        x->c.nacks++;
        if (m.reason == GOSSIP_XFER_BUSY && !x->have_info)
            x->busy++;
        fetch_attempt(x, x->attempt + 1, now);
    } else if (m.kind == GOSSIP_XFER_INFO) {
        if (h->round != m.round) {
            x->c.info_bad++;
            return GOSSIP_OK;
        }
        on_info(x, &m, now);
    } else {
        if (h->round != x->round) {
            x->c.stale++;
            return GOSSIP_OK;
        }
        on_data(x, &m, now);
    }
    return GOSSIP_OK;
}

int gossip_xfer_tick(gossip_xfer *x, gossip_time_us now)
{
    if (x->state == GOSSIP_XFER_RUNNING && x->deadline <= now) {
        x->c.timeouts++;
        fetch_attempt(x, x->attempt + 1, now);
    }
    for (uint32_t i = 0; i < GOSSIP_XFER_SERVE_MAX; i++) {
        snap *s = &x->snaps[i];
        if (s->active && s->last_used + x->cfg.serve_idle_us <= now) {
            x->c.expired++;
            snap_release(x, s);
        }
    }
    return GOSSIP_OK;
}

gossip_time_us gossip_xfer_deadline(const gossip_xfer *x)
{
    gossip_time_us d = GOSSIP_TIME_NEVER;
    if (x->state == GOSSIP_XFER_RUNNING)
        d = x->deadline;
    for (uint32_t i = 0; i < GOSSIP_XFER_SERVE_MAX; i++)
        if (x->snaps[i].active && x->snaps[i].last_used + x->cfg.serve_idle_us < d)
            d = x->snaps[i].last_used + x->cfg.serve_idle_us;
    return d;
}

/* ---- sending ------------------------------------------------------------------ */

static size_t finish_frame(gossip_xfer *x, uint8_t type, const gossip_writer *w, uint64_t round)
{
    gossip_header h = {.type = type,
                       .payload_len = (uint32_t)w->len,
                       .sender = x->cfg.self,
                       .epoch = 0,
                       .round = round};
    gossip_header_encode(&h, x->frame);
    return GOSSIP_HEADER_SIZE + w->len;
}

static size_t build_want(gossip_xfer *x, uint32_t xfer, uint8_t kind, uint32_t first,
                         uint16_t count)
{
    gossip_writer w;
    gossip_writer_init(&w, x->frame + GOSSIP_HEADER_SIZE, x->frame_cap - GOSSIP_HEADER_SIZE);
    gossip_w_u32(&w, xfer);
    gossip_w_u8(&w, kind);
    gossip_w_u32(&w, first);
    gossip_w_u16(&w, count);
    return finish_frame(x, GOSSIP_MSG_MODEL_WANT, &w, 0);
}

static size_t build_snap(gossip_xfer *x, snap *s)
{
    gossip_writer w;
    gossip_writer_init(&w, x->frame + GOSSIP_HEADER_SIZE, x->frame_cap - GOSSIP_HEADER_SIZE);
    gossip_w_u32(&w, s->xfer);
    const uint32_t dim = x->cfg.dim, cv = x->cfg.chunk_values;
    if (s->info_pending) {
        s->info_pending = 0;
        gossip_w_u8(&w, GOSSIP_XFER_INFO);
        gossip_w_u64(&w, s->round);
        gossip_w_u32(&w, dim);
        gossip_w_u32(&w, cv);
        gossip_w_u32(&w, (dim + cv - 1) / cv);
        gossip_w_bytes(&w, s->hash, HASH);
    } else {
        uint32_t off = s->next * cv;
        uint32_t n = dim - off < cv ? dim - off : cv;
        gossip_w_u8(&w, GOSSIP_XFER_DATA);
        gossip_w_u32(&w, s->next);
        gossip_w_u32(&w, n);
        for (uint32_t i = 0; i < n; i++)
            gossip_w_f32(&w, s->values[off + i]);
        s->next++;
        s->remaining--;
        x->c.served_chunks++;
    }
    return finish_frame(x, GOSSIP_MSG_MODEL_CHUNK, &w, s->round);
}

int gossip_xfer_poll_send(gossip_xfer *x, gossip_send *out, gossip_time_us now)
{
    out->dest_addr = NULL;
    out->frame = x->frame;
    if (x->done_pending) {
        x->done_pending = 0;
        out->dest = x->done_peer;
        out->len = build_want(x, x->done_xfer, GOSSIP_XFER_DONE, 0, 0);
        return 1;
    }
    if (x->state == GOSSIP_XFER_RUNNING && x->want_pending) {
        x->want_pending = 0;
        out->dest = x->src;
        if (!x->have_info) {
            out->len = build_want(x, x->xfer, GOSSIP_XFER_START, 0, 0);
        } else {
            uint32_t count = x->next + x->cfg.window - x->requested;
            if (x->requested + count > x->n_chunks)
                count = x->n_chunks - x->requested;
            out->len = build_want(x, x->xfer, GOSSIP_XFER_DATA, x->requested, (uint16_t)count);
            x->requested += count;
        }
        return 1;
    }
    if (x->n_nacks) {
        nack_out n = x->nacks[--x->n_nacks];
        gossip_writer w;
        gossip_writer_init(&w, x->frame + GOSSIP_HEADER_SIZE, x->frame_cap - GOSSIP_HEADER_SIZE);
        gossip_w_u32(&w, n.xfer);
        gossip_w_u8(&w, n.reason);
        out->dest = n.peer;
        out->len = finish_frame(x, GOSSIP_MSG_MODEL_NACK, &w, 0);
        return 1;
    }
    for (uint32_t k = 0; k < GOSSIP_XFER_SERVE_MAX; k++) {
        snap *s = &x->snaps[(x->serve_rr + k) % GOSSIP_XFER_SERVE_MAX];
        if (s->active && (s->info_pending || s->remaining)) {
            x->serve_rr = (x->serve_rr + k + 1) % GOSSIP_XFER_SERVE_MAX;
            out->dest = s->peer;
            out->len = build_snap(x, s);
            return 1;
        }
    }
    return 0;
}

const gossip_xfer_counters *gossip_xfer_counters_get(const gossip_xfer *x)
{
    return &x->c;
}
