/* gossip/mix — the mixer's core: lifecycle, view, rounds, routing of frames
 * to the mixing rules, the shared senders (stream, reply queue) and the
 * stash of frames of a view installed late. The rules themselves are one
 * file each behind mix_ops (mix_internal.h). See mix.h and docs/MIXING.md. */
#include "gossip/mix_internal.h"

#include <math.h>
#include <string.h>

#include "common/simd.h"

/* The mixing rules, indexed by gossip_mix_algo. */
static const mix_ops *const mix_rules[GOSSIP_MIX_ALGO_COUNT] = {
    [GOSSIP_MIX_DPSGD] = &mix_dpsgd_ops,         [GOSSIP_MIX_GOSSIP] = &mix_gossip_ops,
    [GOSSIP_MIX_PUSHSUM] = &mix_pushsum_ops,     [GOSSIP_MIX_CHOCO] = &mix_choco_ops,
    [GOSSIP_MIX_ALLREDUCE] = &mix_allreduce_ops,
};

const char *const gossip_mix_algo_names[GOSSIP_MIX_ALGO_COUNT + 1] = {GOSSIP_MIX_ALGO_NAMES, NULL};
_Static_assert(sizeof((const char *[]){GOSSIP_MIX_ALGO_NAMES}) / sizeof(const char *) ==
                   GOSSIP_MIX_ALGO_COUNT,
               "GOSSIP_MIX_ALGO_NAMES names every gossip_mix_algo");

static const unsigned all_bits[] = {32, 16, 8, 4, 2, 1};

const char *gossip_mix_algo_name(gossip_mix_algo a)
{
    return (unsigned)a < GOSSIP_MIX_ALGO_COUNT ? gossip_mix_algo_names[a] : "unknown";
}

int gossip_mix_algo_parse(const char *name, gossip_mix_algo *out)
{
    for (unsigned a = 0; a < GOSSIP_MIX_ALGO_COUNT; a++) {
        if (name && strcmp(name, gossip_mix_algo_names[a]) == 0) {
            *out = (gossip_mix_algo)a;
            return GOSSIP_OK;
        }
    }
    return GOSSIP_EINVAL;
}

int gossip_mix_combination_valid(gossip_mix_algo a, gossip_topology t)
{
    if ((unsigned)a >= GOSSIP_MIX_ALGO_COUNT || (unsigned)t >= GOSSIP_TOPO_COUNT)
        return 0;
    return mix_rules[a]->topology_ok(t);
}

/* ---- services for the rules --------------------------------------------- */

/* Values are checked in blocks: the inner loop has no early exit, so the
 * compiler vectorizes it (the loop with a return per value ran one value per
 * iteration: 3% of an allreduce's cycles at 16 MiB). */
#define MIX_CHECK_BLOCK 1024u

SIMD_CLONES int mix_values_ok(const float *v, uint32_t n)
{
    for (size_t b = 0; b < n; b += MIX_CHECK_BLOCK) {
        size_t e = n - b < MIX_CHECK_BLOCK ? n - b : MIX_CHECK_BLOCK;
        int bad = 0;
        for (size_t i = 0; i < e; i++)
            bad |= !(fabsf(v[b + i]) <= GOSSIP_MIX_VALUE_MAX);
        if (bad)
            return GOSSIP_ENONFINITE;
    }
    return GOSSIP_OK;
}

/* dst = x (+ add, unless NULL) in one pass that also checks x; nonzero if a
 * value of x fails mix_values_ok (dst is then partly written). */
SIMD_CLONES static int copy_checked(float *restrict dst, const float *restrict x,
                                    const float *restrict add, uint32_t n)
{
    int bad = 0;
    if (add) {
        for (uint32_t i = 0; i < n; i++) {
            float v = x[i];
            bad |= !(fabsf(v) <= GOSSIP_MIX_VALUE_MAX);
            dst[i] = v + add[i];
        }
    } else {
        for (uint32_t i = 0; i < n; i++) {
            float v = x[i];
            bad |= !(fabsf(v) <= GOSSIP_MIX_VALUE_MAX);
            dst[i] = v;
        }
    }
    return bad;
}

int mix_reject(gossip_mix *m, int err)
{
    if (err > 0 && err < GOSSIP_ERR_COUNT) {
        m->stats.rejected++;
        m->stats.rejected_by[err]++;
    }
    return err;
}

void mix_header(const gossip_mix *m, uint8_t *frame, uint8_t type, uint64_t epoch, uint64_t round,
                size_t payload)
{
    gossip_header h = {.version = GOSSIP_WIRE_VERSION,
                       .type = type,
                       .payload_len = (uint32_t)payload,
                       .sender = m->self,
                       .epoch = epoch,
                       .round = round};
    gossip_header_encode(&h, frame);
}

void mix_sent(gossip_mix *m, gossip_send *out, uint64_t dest, size_t len)
{
    out->dest = dest;
    out->dest_addr = NULL;
    out->len = len;
    m->stats.frames_sent++;
    m->stats.bytes_sent += len;
}

void mix_finish(gossip_mix *m, int outcome)
{
    m->state = GOSSIP_MIX_DONE;
    m->outcome = outcome;
    m->deadline = GOSSIP_TIME_NEVER;
    if (outcome == GOSSIP_OK)
        m->stats.rounds_completed++;
    else
        m->stats.rounds_aborted++;
}

SIMD_CLONES static void add_scaled(float *restrict w, const float *restrict d, float sign,
                                   uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        w[i] += sign * d[i];
}

void mix_apply_delta(gossip_mix *m, uint32_t off, uint32_t n, const float *d, float sign)
{
    add_scaled(m->work + off, d, sign, n);
    if (m->state == GOSSIP_MIX_IDLE) {
        add_scaled(m->pending + off, d, sign, n);
        m->pending_dirty = 1;
    }
}

int mix_encode_vector(gossip_mix *m, const float *src, float *decoded)
{
    for (uint32_t c = 0; c < m->nchunks; c++) {
        uint32_t off = c * m->cv, n = mix_chunk_len(m, m->dim, c);
        size_t at = mix_enc_offset(m, c, m->bits);
        int rc = gossip_codec_encode(m->env, src + off, n, m->bits, m->block, m->enc + at,
                                     m->enc_cap - at, decoded ? decoded + off : NULL);
        if (rc)
            return rc;
    }
    return GOSSIP_OK;
}

void mix_stream_begin(gossip_mix *m, gossip_mix_algo owner, uint8_t type, uint64_t round,
                      float scale, uint32_t nchunks, uint32_t gen, uint32_t gen_age)
{
    mix_stream *s = &m->stream;
    s->active = s->ndest > 0;
    s->owner = owner;
    s->type = type;
    s->bits = (uint8_t)m->bits;
    s->round = round;
    s->scale = scale;
    s->di = 0;
    s->chunk = 0;
    s->nchunks = nchunks;
    s->gen = gen;
    s->gen_age = gen_age;
}

int mix_push_parse(const gossip_mix *m, uint8_t type, const uint8_t *p, size_t len,
                   mix_push_hdr *ph)
{
    if (len < GOSSIP_MIX_PUSH_HEADER)
        return GOSSIP_ETRUNC;
    gossip_reader r;
    gossip_reader_init(&r, p, len);
    ph->algo = gossip_r_u8(&r);
    ph->bits = gossip_r_u8(&r);
    uint16_t flags = ph->flags = gossip_r_u16(&r);
    uint32_t block = gossip_r_u32(&r);
    uint32_t dim = gossip_r_u32(&r);
    ph->offset = gossip_r_u32(&r);
    ph->count = gossip_r_u32(&r);
    ph->scale = gossip_r_f32(&r);
    ph->gen = gossip_r_u32(&r);
    ph->gen_age = gossip_r_u32(&r);
    if (r.err)
        return GOSSIP_ETRUNC;
    if ((flags != 0 && !(flags == MIX_FLAG_BUSY && type == GOSSIP_MSG_MIX_REPLY)) ||
        ((ph->gen != 0 || ph->gen_age != 0) && ph->algo != GOSSIP_MIX_CHOCO) ||
        ph->algo >= GOSSIP_MIX_ALGO_COUNT || !gossip_codec_bits_valid(ph->bits) ||
        block != m->block || dim != m->dim)
        return GOSSIP_EMALFORMED;
    if (ph->offset >= m->dim || ph->offset % m->cv != 0 ||
        ph->count != mix_chunk_len(m, m->dim, ph->offset / m->cv))
        return GOSSIP_EMALFORMED;
    if (!isfinite(ph->scale))
        return GOSSIP_ENONFINITE;
    if (!(ph->scale > 0 && ph->scale <= 1))
        return GOSSIP_EMALFORMED;
    ph->data = p + GOSSIP_MIX_PUSH_HEADER;
    ph->data_len = len - GOSSIP_MIX_PUSH_HEADER;
    if (ph->data_len != (flags ? 0 : mix_codec_bytes(m, ph->count, ph->bits)))
        return GOSSIP_EMALFORMED;
    return GOSSIP_OK;
}

void mix_push_write(const gossip_mix *m, uint8_t *p, uint8_t algo, uint8_t bits, uint16_t flags,
                    uint32_t offset, uint32_t count, float scale, uint32_t gen, uint32_t gen_age)
{
    gossip_writer w;
    gossip_writer_init(&w, p, GOSSIP_MIX_PUSH_HEADER);
    gossip_w_u8(&w, algo);
    gossip_w_u8(&w, bits);
    gossip_w_u16(&w, flags);
    gossip_w_u32(&w, m->block);
    gossip_w_u32(&w, m->dim);
    gossip_w_u32(&w, offset);
    gossip_w_u32(&w, count);
    gossip_w_f32(&w, scale);
    gossip_w_u32(&w, gen);
    gossip_w_u32(&w, gen_age);
}

uint8_t *mix_reply_slot(gossip_mix *m)
{
    if (!m->txq || m->txq_count == GOSSIP_MIX_TXQ_MAX)
        return NULL;
    uint32_t slot = (m->txq_head + m->txq_count) % GOSSIP_MIX_TXQ_MAX;
    return m->txq + (size_t)slot * m->frame_cap;
}

void mix_reply_commit(gossip_mix *m, uint64_t dest, size_t len)
{
    uint32_t slot = (m->txq_head + m->txq_count) % GOSSIP_MIX_TXQ_MAX;
    m->txq_ent[slot].len = len;
    m->txq_ent[slot].dest = dest;
    m->txq_count++;
}

/* ---- create / destroy --------------------------------------------------- */

void gossip_mix_destroy(gossip_mix *m)
{
    if (!m)
        return;
    const gossip_env *env = m->env;
    for (unsigned a = 0; a < GOSSIP_MIX_ALGO_COUNT; a++)
        if (m->st[a])
            mix_rules[a]->destroy(m, m->st[a]);
    gossip_free(env, m->ids_buf);
    gossip_free(env, m->work);
    gossip_free(env, m->orig);
    gossip_free(env, m->pending);
    gossip_free(env, m->scratch);
    gossip_free(env, m->scratch2);
    gossip_free(env, m->frame);
    gossip_free(env, m->txq);
    gossip_free(env, m->enc);
    gossip_free(env, m->stash);
    gossip_free(env, m->stash_mem);
    gossip_free(env, m->robust.peer);
    gossip_free(env, m);
}

static int cfg_check(const gossip_mix_config *c, uint32_t algos, unsigned bits, uint32_t block,
                     uint32_t cv)
{
    if (c->self == 0 || c->dim == 0 || c->dim > GOSSIP_CODEC_DIM_MAX)
        return GOSSIP_EINVAL;
    if ((algos & ~GOSSIP_MIX_ALGOS_ALL) || (unsigned)c->algo >= GOSSIP_MIX_ALGO_COUNT ||
        !(algos & (1u << c->algo)))
        return GOSSIP_EINVAL;
    if (!gossip_mix_combination_valid(c->algo, c->topology))
        return GOSSIP_EINVAL;
    if (!gossip_codec_bits_valid(bits) || block == 0 || block > GOSSIP_CODEC_BLOCK_MAX)
        return GOSSIP_EINVAL;
    if (cv == 0 || cv > GOSSIP_MIX_CHUNK_VALUES_MAX)
        return GOSSIP_EINVAL;
    if (c->members_max > GOSSIP_MEMBERS_MAX || c->links_max > GOSSIP_MIX_LINKS_MAX ||
        c->peers_max > GOSSIP_MEMBERS_MAX)
        return GOSSIP_EINVAL;
    if (c->sync_window == 1 || c->sync_window > GOSSIP_MIX_SYNC_WINDOW_MAX)
        return GOSSIP_EINVAL;
    if (!(c->choco_gamma >= 0 && c->choco_gamma <= 1) ||
        !(c->choco_scale >= 0 && c->choco_scale <= 1))
        return GOSSIP_EINVAL;
    if (gossip_robust_config_check(&c->robust, NULL))
        return GOSSIP_EINVAL;
    return GOSSIP_OK;
}

/* Frame and encoded-vector sizes: the largest payload is a vector chunk at
 * the most expensive codec setting or a push-sum chunk of float64 running
 * sums; enc holds a whole vector at any width. */
static void size_buffers(gossip_mix *m)
{
    uint32_t chunk_max = mix_min_u32(m->cv, m->dim + 1);
    size_t data_max = 8 * (size_t)chunk_max;
    size_t enc_cap = 0;
    for (size_t b = 0; b < sizeof all_bits / sizeof all_bits[0]; b++) {
        size_t one = gossip_codec_size(chunk_max, all_bits[b], m->block);
        if (one > data_max)
            data_max = one;
        uint32_t last = mix_chunk_len(m, m->dim, m->nchunks - 1);
        size_t total = (size_t)(m->nchunks - 1) * mix_codec_bytes(m, m->cv, all_bits[b]) +
                       mix_codec_bytes(m, last, all_bits[b]);
        if (total > enc_cap)
            enc_cap = total;
    }
    m->data_max = data_max;
    m->frame_cap = GOSSIP_HEADER_SIZE + GOSSIP_MIX_HEADER_MAX + data_max;
    m->enc_cap = enc_cap;
}

static int alloc_core(gossip_mix *m)
{
    const gossip_env *env = m->env;
    size_t dim = m->dim;
    uint32_t chunk_max = mix_min_u32(m->cv, m->dim + 1);
    uint32_t flags = 0;
    for (unsigned a = 0; a < GOSSIP_MIX_ALGO_COUNT; a++)
        if (m->algos & (1u << a))
            flags |= mix_rules[a]->flags;
    int ok = (m->shared_views ||
              (m->ids_buf = gossip_calloc(env, m->members_max, sizeof *m->ids_buf))) &&
             (m->work = gossip_calloc(env, dim, sizeof(float))) &&
             (m->orig = gossip_calloc(env, dim, sizeof(float))) &&
             (m->pending = gossip_calloc(env, dim, sizeof(float))) &&
             (m->scratch = gossip_calloc(env, chunk_max, sizeof(float))) &&
             (m->scratch2 = gossip_calloc(env, chunk_max, sizeof(float))) &&
             (m->frame = gossip_alloc(env, m->frame_cap));
    if (ok && (flags & MIX_OPS_REPLIES))
        ok = (m->txq = gossip_alloc(env, GOSSIP_MIX_TXQ_MAX * m->frame_cap)) != NULL;
    if (ok && (flags & MIX_OPS_ENC))
        ok = (m->enc = gossip_alloc(env, m->enc_cap ? m->enc_cap : 1)) != NULL;
    return ok ? GOSSIP_OK : GOSSIP_ENOMEM;
}

int gossip_mix_create(gossip_mix **out, const gossip_env *env, const gossip_mix_config *cfg)
{
    if (!out || !env || !cfg)
        return GOSSIP_EINVAL;
    uint32_t algos = cfg->algos ? cfg->algos : GOSSIP_MIX_ALGOS_ALL;
    unsigned bits = cfg->bits ? cfg->bits : 32;
    uint32_t block = cfg->block ? cfg->block : GOSSIP_CODEC_BLOCK_DEFAULT;
    uint32_t cv = cfg->chunk_values ? cfg->chunk_values : GOSSIP_MIX_CHUNK_VALUES_DEFAULT;
    int rc = cfg_check(cfg, algos, bits, block, cv);
    if (rc)
        return rc;

    gossip_mix *m = gossip_calloc(env, 1, sizeof *m);
    if (!m)
        return GOSSIP_ENOMEM;
    m->env = env;
    m->self = cfg->self;
    m->dim = cfg->dim;
    m->algos = algos;
    m->algo = cfg->algo;
    m->ops = mix_rules[cfg->algo];
    m->topo = cfg->topology;
    m->bits = bits;
    m->block = block;
    m->cv = cv;
    m->nchunks = (uint32_t)(((uint64_t)cfg->dim + cv - 1) / cv);
    m->members_max = cfg->members_max ? cfg->members_max : GOSSIP_MIX_MEMBERS_DEFAULT;
    m->shared_views = cfg->shared_views != 0;
    m->step_timeout =
        cfg->step_timeout_us ? cfg->step_timeout_us : GOSSIP_MIX_STEP_TIMEOUT_DEFAULT_US;
    m->state = GOSSIP_MIX_IDLE;
    m->deadline = GOSSIP_TIME_NEVER;
    m->me = UINT32_MAX;
    size_buffers(m);

    /* the robust peers' records, which the rule none never reads */
    gossip_robust_peer *peers = NULL;
    if (cfg->robust.rule != GOSSIP_ROBUST_NONE &&
        !(peers = gossip_calloc(env, GOSSIP_ROBUST_PEERS_MAX, sizeof *peers))) {
        gossip_free(env, m);
        return GOSSIP_ENOMEM;
    }
    gossip_robust_init(&m->robust, &cfg->robust, cfg->dim, peers);
    rc = alloc_core(m);
    for (unsigned a = 0; !rc && a < GOSSIP_MIX_ALGO_COUNT; a++)
        if (algos & (1u << a))
            rc = mix_rules[a]->create(m, cfg, &m->st[a]);
    if (rc) {
        gossip_mix_destroy(m);
        return GOSSIP_ENOMEM;
    }
    *out = m;
    return GOSSIP_OK;
}

/* ---- view, algorithm, start, take --------------------------------------- */

/* The view's identity on the wire. Mixing frames carry it in the header's
 * epoch field, and the synchronous algorithms (dpsgd, choco, allreduce)
 * accept a frame only from a member on the same view. It must be the same
 * on every member holding the same members: under SWIM each agent numbers
 * its own views (its epoch counts its own view changes), so the epoch
 * itself differs from agent to agent and cannot be compared; a hash of the
 * sorted member ids can. (A view that returns to an earlier member set
 * gets that set's id again; rounds restart at 0 on every view change, and a
 * member still on the older copy is caught by the round checks.) */
static uint64_t view_id(const gossip_view *v)
{
    uint64_t h = 0x6D75726D7572ULL ^ ((uint64_t)v->n * 0x9E3779B97F4A7C15ULL);
    for (uint32_t i = 0; i < v->n; i++) {
        h ^= v->ids[i];
        h *= 0xBF58476D1CE4E5B9ULL;
        h ^= h >> 31;
    }
    return h;
}

static void stash_replay(gossip_mix *m, gossip_time_us now);

static void check_done(gossip_mix *m)
{
    if (m->state == GOSSIP_MIX_RUNNING)
        m->ops->check(m, m->st[m->algo]);
    m->stats.robust_clipped = m->robust.clipped;
    m->stats.robust_dropped = m->robust.dropped;
}

/* Install a checked view whose ids live at `ids` (the mixer's copy or a
 * shared view). */
static int install_view(gossip_mix *m, const uint64_t *ids, uint32_t n, uint64_t epoch,
                        uint64_t vid, gossip_time_us now)
{
    int newer = !m->has_view || epoch > m->epoch;
    m->ids = ids;
    m->n = n;
    m->epoch = epoch;
    m->view_id = vid;
    m->has_view = 1;
    gossip_view v = {epoch, n, ids};
    m->me = gossip_view_index(&v, m->self);
    if (!newer)
        return GOSSIP_OK;
    for (unsigned a = 0; a < GOSSIP_MIX_ALGO_COUNT; a++)
        if (m->st[a])
            mix_rules[a]->on_view(m, m->st[a]);
    stash_replay(m, now);
    check_done(m);
    return GOSSIP_OK;
}

static int view_check(const gossip_view *v)
{
    if (!v || (v->n && !v->ids))
        return GOSSIP_EINVAL;
    for (uint32_t i = 0; i < v->n; i++)
        if (v->ids[i] == 0 || (i && v->ids[i] <= v->ids[i - 1]))
            return GOSSIP_EINVAL;
    return GOSSIP_OK;
}

int gossip_mix_set_view(gossip_mix *m, const gossip_view *v, gossip_time_us now)
{
    if (!m || m->shared_views || view_check(v))
        return GOSSIP_EINVAL;
    if (v->n > m->members_max)
        return GOSSIP_ETOOBIG;
    if (m->has_view && v->epoch < m->epoch)
        return GOSSIP_ESTALE;
    if (v->n)
        memcpy(m->ids_buf, v->ids, (size_t)v->n * sizeof *m->ids_buf);
    return install_view(m, m->ids_buf, v->n, v->epoch, view_id(v), now);
}

int gossip_mix_view_prepare(gossip_mix_shared_view *sv, const gossip_view *v)
{
    if (!sv || view_check(v))
        return GOSSIP_EINVAL;
    if (v->n > GOSSIP_MIX_SHARED_MEMBERS_MAX)
        return GOSSIP_ETOOBIG;
    sv->v = *v;
    sv->view_id = view_id(v);
    return GOSSIP_OK;
}

int gossip_mix_set_view_shared(gossip_mix *m, const gossip_mix_shared_view *sv, gossip_time_us now)
{
    if (!m || !m->shared_views || !sv || (sv->v.n && !sv->v.ids))
        return GOSSIP_EINVAL;
    if (sv->v.n > GOSSIP_MEMBERS_MAX && m->topo != GOSSIP_TOPO_RANDOM)
        return GOSSIP_ETOOBIG;
    if (m->has_view && sv->v.epoch < m->epoch)
        return GOSSIP_ESTALE;
    return install_view(m, sv->v.ids, sv->v.n, sv->v.epoch, sv->view_id, now);
}

int gossip_mix_set_algo(gossip_mix *m, gossip_mix_algo a, gossip_topology t, unsigned bits)
{
    if (!m || m->state != GOSSIP_MIX_IDLE || (unsigned)a >= GOSSIP_MIX_ALGO_COUNT ||
        !(m->algos & (1u << a)) || !gossip_mix_combination_valid(a, t) ||
        (m->n > GOSSIP_MEMBERS_MAX && t != GOSSIP_TOPO_RANDOM))
        return GOSSIP_EINVAL;
    bits = bits ? bits : 32;
    if (!gossip_codec_bits_valid(bits))
        return GOSSIP_EINVAL;
    int changed = a != m->algo || t != m->topo;
    m->algo = a;
    m->ops = mix_rules[a];
    m->topo = t;
    m->bits = bits;
    if (changed)
        for (unsigned k = 0; k < GOSSIP_MIX_ALGO_COUNT; k++)
            if (m->st[k])
                mix_rules[k]->reset(m, m->st[k]);
    return GOSSIP_OK;
}

int gossip_mix_start(gossip_mix *m, const float *x, gossip_time_us now)
{
    if (!m || !x || m->state != GOSSIP_MIX_IDLE || !m->has_view)
        return GOSSIP_EINVAL;
    if (m->me == UINT32_MAX)
        return GOSSIP_ENOTFOUND;
    /* One pass checks x and writes orig = x + pending (orig is free while
     * idle: only a running round reads it), then work = orig. The pending
     * changes are added and cleared only when there are any. */
    if (copy_checked(m->orig, x, m->pending_dirty ? m->pending : NULL, m->dim))
        return GOSSIP_ENONFINITE;
    /* The scale of the bounds on peers' values: how far our own training
     * moved the model since the last result (gossip/robust.h); work still
     * holds that result. Only a mixer with bounds keeps the scale. */
    if (m->robust.cfg.rule != GOSSIP_ROBUST_NONE)
        gossip_robust_note_local(&m->robust, x, m->pending, m->has_vector ? m->work : NULL, m->dim);
    if (m->pending_dirty) {
        memset(m->pending, 0, (size_t)m->dim * sizeof *m->pending);
        m->pending_dirty = 0;
    }
    if (m->ops->flags & MIX_OPS_NO_ORIG) {
        float *w = m->work;
        m->work = m->orig;
        m->orig = w;
    } else {
        memcpy(m->work, m->orig, (size_t)m->dim * sizeof *m->work);
    }
    m->has_vector = 1;
    m->state = GOSSIP_MIX_RUNNING;
    m->outcome = GOSSIP_OK;
    m->deadline = now + m->step_timeout;
    m->stream.active = 0;
    m->ops->start(m, m->st[m->algo], now);
    check_done(m);
    return GOSSIP_OK;
}

gossip_mix_state gossip_mix_get_state(const gossip_mix *m)
{
    return m->state;
}

int gossip_mix_take(gossip_mix *m, float *out, int *outcome)
{
    if (!m || !out || m->state != GOSSIP_MIX_DONE)
        return GOSSIP_EINVAL;
    if (m->ops->take)
        m->ops->take(m, m->st[m->algo]);
    memcpy(out, m->work, (size_t)m->dim * sizeof *out);
    if (outcome)
        *outcome = m->outcome;
    m->state = GOSSIP_MIX_IDLE;
    return GOSSIP_OK;
}

uint64_t gossip_mix_view_epoch(const gossip_mix *m)
{
    return m->has_view ? m->epoch : 0;
}

uint64_t gossip_mix_round(const gossip_mix *m)
{
    return m->ops->round(m, m->st[m->algo]);
}

int gossip_mix_pending(const gossip_mix *m, float *out)
{
    if (!m || !out)
        return GOSSIP_EINVAL;
    memcpy(out, m->pending, (size_t)m->dim * sizeof *out);
    return GOSSIP_OK;
}

int gossip_mix_unreachable(gossip_mix *m, uint64_t peer, gossip_time_us now)
{
    if (!m || peer == 0)
        return GOSSIP_EINVAL;
    if (m->st[GOSSIP_MIX_GOSSIP])
        mix_gossip_unreachable(m, peer, now);
    return GOSSIP_OK;
}

const gossip_mix_stats *gossip_mix_get_stats(const gossip_mix *m)
{
    return &m->stats;
}

gossip_time_us gossip_mix_deadline(const gossip_mix *m)
{
    return m->state == GOSSIP_MIX_RUNNING ? m->deadline : GOSSIP_TIME_NEVER;
}

/* ---- recv: routing frames to their rule --------------------------------- */

static int is_mix_type(uint8_t type)
{
    return type >= GOSSIP_MSG_MIX_PUSH && type <= GOSSIP_MSG_AR_ABORT;
}

/* The rule a frame belongs to: MIX_PUSH and MIX_REPLY name it in their algo
 * byte (the header is parsed into *ph), other types belong to the one rule
 * that receives them. Returns GOSSIP_OK with *owner, GOSSIP_ETYPE, a parse
 * error, or GOSSIP_EMALFORMED (a rule that is not enabled, or a type the
 * named rule does not receive). */
static int route(const gossip_mix *m, const gossip_header *h, const uint8_t *p, size_t len,
                 mix_push_hdr *ph, unsigned *owner)
{
    if (!is_mix_type(h->type))
        return GOSSIP_ETYPE;
    uint32_t bit = MIX_TYPE_BIT(h->type);
    unsigned a = 0;
    if (h->type == GOSSIP_MSG_MIX_PUSH || h->type == GOSSIP_MSG_MIX_REPLY) {
        int rc = mix_push_parse(m, h->type, p, len, ph);
        if (rc)
            return rc;
        a = ph->algo;
    } else {
        while (a < GOSSIP_MIX_ALGO_COUNT && !(mix_rules[a]->types & bit))
            a++;
    }
    if (a >= GOSSIP_MIX_ALGO_COUNT || !m->st[a] || !(mix_rules[a]->types & bit))
        return GOSSIP_EMALFORMED;
    *owner = a;
    return GOSSIP_OK;
}

static int recv_frame(gossip_mix *m, uint64_t from, const gossip_header *h, const uint8_t *p,
                      size_t len, gossip_time_us now)
{
    if (!h || (len && !p))
        return GOSSIP_EINVAL;
    if (h->sender != from || h->payload_len != len)
        return GOSSIP_EMALFORMED;
    mix_push_hdr ph;
    mix_frame f = {.from = from, .h = h, .p = p, .len = len, .push = NULL};
    unsigned owner;
    gossip_view v = mix_view(m);
    if (!m->has_view || gossip_view_index(&v, from) == UINT32_MAX || from == m->self) {
        /* Not a member of our view (e.g. a joiner we have not heard of): the
         * rule in use may still answer it (pairwise gossip refuses at once
         * so the pusher does not wait out its deadline). */
        if (from != m->self && from != 0 && m->ops->stranger &&
            route(m, h, p, len, &ph, &owner) == GOSSIP_OK && owner == (unsigned)m->algo) {
            if (h->type == GOSSIP_MSG_MIX_PUSH || h->type == GOSSIP_MSG_MIX_REPLY)
                f.push = &ph;
            m->ops->stranger(m, m->st[owner], &f);
        }
        return GOSSIP_ENOTFOUND;
    }
    int rc = route(m, h, p, len, &ph, &owner);
    if (rc)
        return rc;
    if (h->type == GOSSIP_MSG_MIX_PUSH || h->type == GOSSIP_MSG_MIX_REPLY)
        f.push = &ph;
    return mix_rules[owner]->recv(m, m->st[owner], &f, now);
}

/* Under SWIM every member installs a view at its own moment. A member that
 * installs it before us sends its first rounds with the new view id, which
 * we refuse (or, if it is new to us, we do not know the sender yet); it
 * never sends them again, so without this we would wait a step deadline
 * for each view change. Keep the last GOSSIP_MIX_STASH_MAX such frames of
 * the rules that ask for it (stash_types) and replay them when we install
 * their view. */
/* The stash's buffers, allocated when the first frame is kept (a view
 * installed late is rare, and GOSSIP_MIX_STASH_MAX frames a member would
 * be most of a small model's mixer: 6 KB of 8 at dim 16). */
static int stash_alloc(gossip_mix *m)
{
    mix_stash *st = gossip_calloc(m->env, GOSSIP_MIX_STASH_MAX, sizeof *st);
    uint8_t *mem = st ? gossip_calloc(m->env, GOSSIP_MIX_STASH_MAX, m->frame_cap) : NULL;
    if (!mem) {
        gossip_free(m->env, st);
        return 0;
    }
    for (uint32_t k = 0; k < GOSSIP_MIX_STASH_MAX; k++)
        st[k].payload = mem + (size_t)k * m->frame_cap;
    m->stash = st;
    m->stash_mem = mem;
    return 1;
}

static void stash_put(gossip_mix *m, uint64_t from, const gossip_header *h, const uint8_t *p,
                      size_t len)
{
    if (m->replaying || from == 0 || from == m->self || len > m->frame_cap || !is_mix_type(h->type))
        return;
    uint32_t bit = MIX_TYPE_BIT(h->type);
    unsigned a = 0;
    if (h->type == GOSSIP_MSG_MIX_PUSH || h->type == GOSSIP_MSG_MIX_REPLY) {
        if (len == 0)
            return;
        a = p[0];
    } else {
        while (a < GOSSIP_MIX_ALGO_COUNT && !(mix_rules[a]->stash_types & bit))
            a++;
    }
    if (a >= GOSSIP_MIX_ALGO_COUNT || !m->st[a] || !(mix_rules[a]->stash_types & bit))
        return;
    if (!m->stash && !stash_alloc(m)) {
        m->stats.stash_no_memory++; /* lost: as if the network had dropped it */
        return;
    }
    mix_stash *e = &m->stash[m->stash_next];
    m->stash_next = (m->stash_next + 1) % GOSSIP_MIX_STASH_MAX;
    e->used = 1;
    e->from = from;
    e->h = *h;
    e->len = len;
    if (len)
        memcpy(e->payload, p, len);
}

/* Replay the kept frames of the view just installed (oldest first). */
static void stash_replay(gossip_mix *m, gossip_time_us now)
{
    if (!m->stash)
        return;
    m->replaying = 1;
    for (uint32_t k = 0; k < GOSSIP_MIX_STASH_MAX; k++) {
        mix_stash *e = &m->stash[(m->stash_next + k) % GOSSIP_MIX_STASH_MAX];
        if (!e->used || e->h.epoch != m->view_id)
            continue;
        e->used = 0;
        if (recv_frame(m, e->from, &e->h, e->payload, e->len, now) == GOSSIP_OK)
            m->stats.stash_replayed++;
    }
    m->replaying = 0;
}

/* A cache hint for the first n 64-byte lines from p. */
static void prefetch_lines(const void *p, size_t n)
{
    for (size_t l = 0; l < n; l++)
        __builtin_prefetch((const char *)p + 64 * l);
}

void gossip_mix_prefetch(const gossip_mix *m)
{
    /* The head (the view, the round's state and buffers, the rules'
     * states) and the stats' first line, then the reply queue with the
     * stream, and the robust counters: the lines a receipt touches first
     * (struct gossip_mix lays them out so). */
    prefetch_lines(m, 4);
    __builtin_prefetch(&m->stats.frames_sent);
    __builtin_prefetch(&m->txq);
    __builtin_prefetch(&m->stream.round);
    __builtin_prefetch(&m->robust.clipped);
}

int gossip_mix_recv(gossip_mix *m, uint64_t from, const gossip_header *h, const uint8_t *payload,
                    size_t len, gossip_time_us now)
{
    /* the rule's state, which the frame reaches after the checks below
     * (cache misses of their own when a host delivers to many mixers):
     * its first lines, where the rules keep what a frame reads */
    prefetch_lines(m->st[m->algo], 4);
    m->stats.frames_received++;
    m->stats.bytes_received += GOSSIP_HEADER_SIZE + len;
    int rc = recv_frame(m, from, h, payload, len, now);
    m->stats.robust_clipped = m->robust.clipped;
    m->stats.robust_dropped = m->robust.dropped;
    if ((rc == GOSSIP_ESTALE || rc == GOSSIP_ENOTFOUND) && h && h->epoch != m->view_id)
        stash_put(m, from, h, payload, len);
    if (rc)
        return mix_reject(m, rc);
    check_done(m);
    return GOSSIP_OK;
}

/* ---- tick / poll_send --------------------------------------------------- */

int gossip_mix_tick(gossip_mix *m, gossip_time_us now)
{
    if (m->state != GOSSIP_MIX_RUNNING || now < m->deadline)
        return GOSSIP_OK;
    m->ops->expire(m, m->st[m->algo], now);
    return GOSSIP_OK;
}

/* Build the next frame of the stream into m->frame. */
static int stream_poll(gossip_mix *m, gossip_send *out)
{
    mix_stream *s = &m->stream;
    uint32_t c = s->chunk;
    uint64_t dest = s->dest[s->di];
    uint8_t *f = m->frame;
    const mix_ops *o = mix_rules[s->owner];
    size_t payload;
    if (o->fill) {
        payload = o->fill(m, m->st[s->owner], c, f + GOSSIP_HEADER_SIZE);
    } else {
        uint32_t n = mix_chunk_len(m, m->dim, c);
        size_t data = mix_codec_bytes(m, n, s->bits);
        memcpy(f + GOSSIP_HEADER_SIZE + GOSSIP_MIX_PUSH_HEADER,
               m->enc + mix_enc_offset(m, c, s->bits), data);
        mix_push_write(m, f + GOSSIP_HEADER_SIZE, (uint8_t)s->owner, s->bits, 0, c * m->cv, n,
                       s->scale, s->gen, s->gen_age);
        payload = GOSSIP_MIX_PUSH_HEADER + data;
    }
    mix_header(m, f, s->type, m->view_id, s->round, payload);
    out->frame = f;
    mix_sent(m, out, dest, GOSSIP_HEADER_SIZE + payload);
    if (++s->chunk == s->nchunks) {
        s->chunk = 0;
        if (++s->di == s->ndest)
            s->active = 0;
    }
    return 1;
}

int gossip_mix_poll_send(gossip_mix *m, gossip_send *out, gossip_time_us now)
{
    (void)now;
    int got = 0;
    if (m->txq_count) {
        uint32_t k = m->txq_head;
        out->frame = m->txq + (size_t)k * m->frame_cap;
        mix_sent(m, out, m->txq_ent[k].dest, m->txq_ent[k].len);
        m->txq_head = (k + 1) % GOSSIP_MIX_TXQ_MAX;
        m->txq_count--;
        got = 1;
    } else if (m->stream.active) {
        got = stream_poll(m, out);
    } else {
        for (unsigned a = 0; a < GOSSIP_MIX_ALGO_COUNT && !got; a++)
            if (m->st[a] && mix_rules[a]->poll)
                got = mix_rules[a]->poll(m, m->st[a], out);
    }
    check_done(m);
    return got;
}
