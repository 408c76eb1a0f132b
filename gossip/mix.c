/* gossip/mix — the mixer object: lifecycle, view, dpsgd, gossip, push-sum,
 * choco. Allreduce lives in allreduce.c. See mix.h and docs/MIXING.md. */
#include "gossip/mix_internal.h"

#include <math.h>
#include <string.h>

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
    if (a == GOSSIP_MIX_DPSGD)
        return gossip_topology_has_graph(t);
    if (a == GOSSIP_MIX_CHOCO)
        return gossip_topology_is_static(t);
    return 1;
}

static int is_sync(gossip_mix_algo a)
{
    return a == GOSSIP_MIX_DPSGD || a == GOSSIP_MIX_CHOCO;
}

static uint32_t min_u32(uint32_t a, uint32_t b)
{
    return a < b ? a : b;
}

/* Values in chunk c of a vector of len values (len = dim, or dim + 1 for
 * push-sum). */
static uint32_t chunk_len(const gossip_mix *m, uint32_t len, uint32_t c)
{
    uint64_t off = (uint64_t)c * m->cv;
    return off >= len ? 0 : min_u32(m->cv, len - (uint32_t)off);
}

static size_t codec_bytes(const gossip_mix *m, uint32_t count, unsigned bits)
{
    return count ? gossip_codec_size(count, bits, m->block) : 0;
}

/* Byte offset of chunk c inside enc at `bits` (all chunks but the last are
 * full, so the offset is c times a full chunk). */
static size_t enc_offset(const gossip_mix *m, uint32_t c, unsigned bits)
{
    return (size_t)c * codec_bytes(m, m->cv, bits);
}

/* CHOCO's quantizer scale 1/(1+omega), omega the relative variance of the
 * codec: <= 0.05 for 4 bits or more on Gaussian-like blocks of 256 values (so
 * 1), about 1.4 for 2 bits and 8 for 1 bit at block 256 (see MIXING.md). */
static float choco_scale(const gossip_mix *m)
{
    if (m->scale_cfg > 0)
        return m->scale_cfg;
    if (m->bits >= 4)
        return 1.0f;
    return m->bits == 2 ? 0.4f : 0.1f;
}

/* ---- generic helpers ---------------------------------------------------- */

int mix_values_ok(const float *v, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (!(fabsf(v[i]) <= GOSSIP_MIX_VALUE_MAX))
            return GOSSIP_ENONFINITE;
    return GOSSIP_OK;
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

/* Apply a change to the vector; while idle the change is also remembered in
 * `pending` so the next start adds it to the caller's (trained) vector. */
static void apply_delta(gossip_mix *m, uint32_t off, uint32_t n, const float *d, float sign)
{
    float *w = m->work + off;
    for (uint32_t i = 0; i < n; i++)
        w[i] += sign * d[i];
    if (m->state == GOSSIP_MIX_IDLE) {
        float *p = m->pending + off;
        for (uint32_t i = 0; i < n; i++)
            p[i] += sign * d[i];
    }
}

static void clear_slot(mix_slot *s, uint32_t dim)
{
    if (s->used && s->acc)
        memset(s->acc, 0, (size_t)dim * sizeof *s->acc);
    s->used = 0;
}

static uint32_t choco_warmup(const gossip_mix *m);

static void reset_sync(gossip_mix *m)
{
    for (uint32_t k = 0; m->slots && k < m->sync_window; k++) {
        clear_slot(&m->slots[k], m->dim);
        m->slots[k].dirty = 0;
    }
    if (m->hat) {
        memset(m->hat, 0, (size_t)m->dim * sizeof *m->hat);
        memset(m->sacc, 0, (size_t)m->dim * sizeof *m->sacc);
    }
    m->choco_gen = 0;
    m->choco_gen_start = 0;
    m->choco_nin = 0;
    /* Copies restart on a new view too; refine them first once the
     * members hold anything but their initial vectors. */
    m->choco_warm = m->has_vector && m->algo == GOSSIP_MIX_CHOCO ? choco_warmup(m) : 0;
}

/* Rounds after a restart of the copies in which choco only refines them.
 * A restarted copy starts from 0, so its first q quantizes the whole vector
 * (error ~ |x| 2^-(b-1) per block) rather than the small x - x^; a
 * consensus step on it would throw the members apart by that much. Each
 * refining round divides the copy's error by about 2^(b-1); after
 * ceil(24 / (b - 1)) rounds it is at float precision (24 rounds at most,
 * one at 32 bits). */
static uint32_t choco_warmup(const gossip_mix *m)
{
    unsigned b = m->bits > 1 ? m->bits - 1 : 1;
    uint32_t k = (24u + b - 1) / b;
    return k > 24 ? 24 : k;
}

/* Choco: restart the public copies at generation gen (MIXING.md, "choco
 * under loss"). hat and sacc start again from 0, as every member does when
 * it enters gen; contributions of the old generation already received are
 * dropped, and the rounds they belong to (and the running one, whose own
 * contribution is gone) skip their consensus step. */
static void choco_reset(gossip_mix *m, uint32_t gen)
{
    memset(m->hat, 0, (size_t)m->dim * sizeof *m->hat);
    memset(m->sacc, 0, (size_t)m->dim * sizeof *m->sacc);
    for (uint32_t k = 0; k < m->sync_window; k++) {
        mix_slot *s = &m->slots[k];
        if (!s->used)
            continue;
        int any = s->round == m->sync_round && m->state == GOSSIP_MIX_RUNNING;
        for (uint32_t j = 0; j < s->nin; j++)
            any |= s->got[j] != 0;
        if (any) {
            memset(s->acc, 0, (size_t)m->dim * sizeof *s->acc);
            s->dirty = 1;
        }
    }
    m->choco_gen = gen;
    /* Our own pushes in gen start with the next round we start (this
     * round's, if one runs, went out in the old generation). */
    m->choco_gen_start = m->sync_round + (m->state == GOSSIP_MIX_RUNNING);
    m->choco_nin = 0;
    m->choco_warm = choco_warmup(m);
    m->stats.choco_resets++;
}

/* Serial-number order of generations (RFC 1982): >0 when a is newer. */
static int gen_cmp(uint32_t a, uint32_t b)
{
    return (int32_t)(a - b);
}

/* The generation a member starts when it gives a round up: the next count
 * (high 16 bits) stamped with 16 bits of its own id. Two members that give
 * up concurrently, each having missed what the other saw, thus start
 * different generations, and the newer one restarts everybody; with a bare
 * counter both could sit in "the same" generation with copies that differ
 * (a lost q), and choco would never reach consensus. */
static uint32_t choco_next_gen(const gossip_mix *m)
{
    uint64_t h = m->self * 0x9E3779B97F4A7C15ULL;
    uint32_t count = (m->choco_gen >> 16) + 1u;
    return (count << 16) | (uint32_t)(h >> 48);
}

static void reset_pushsum(gossip_mix *m)
{
    if (!m->ps)
        return;
    memset(m->ps, 0, ((size_t)m->dim + 1) * sizeof *m->ps);
    memset(m->link_mem, 0, 2 * (size_t)m->links_max * ((size_t)m->dim + 1) * sizeof *m->link_mem);
    for (uint32_t k = 0; k < m->links_max; k++)
        m->out_links[k].used = m->in_links[k].used = 0;
    m->ps_init = 0;
}

/* ---- create / destroy --------------------------------------------------- */

void gossip_mix_destroy(gossip_mix *m)
{
    if (!m)
        return;
    const gossip_env *env = m->env;
    gossip_free(env, m->ids);
    gossip_free(env, m->work);
    gossip_free(env, m->orig);
    gossip_free(env, m->pending);
    gossip_free(env, m->scratch);
    gossip_free(env, m->scratch2);
    gossip_free(env, m->frame);
    gossip_free(env, m->txq);
    gossip_free(env, m->enc);
    gossip_free(env, m->slots);
    gossip_free(env, m->slot_mem);
    gossip_free(env, m->hat);
    gossip_free(env, m->sacc);
    gossip_free(env, m->pend_bits);
    gossip_free(env, m->ps);
    gossip_free(env, m->ztaken);
    gossip_free(env, m->out_links);
    gossip_free(env, m->in_links);
    gossip_free(env, m->link_mem);
    gossip_free(env, m->ps_off);
    gossip_free(env, m->ps_tomb);
    gossip_free(env, m->stash);
    gossip_free(env, m->stash_mem);
    gossip_free(env, m->inbox);
    gossip_free(env, m->ar_recv);
    gossip_free(env, m->ar_sent);
    gossip_free(env, m->ar_pre);
    gossip_free(env, m->ar_relay);
    gossip_free(env, m->ar_relay_len);
    gossip_free(env, m->ar_relay_bits);
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
    if (c->members_max > GOSSIP_MEMBERS_MAX || c->links_max > GOSSIP_MIX_LINKS_MAX)
        return GOSSIP_EINVAL;
    if (c->sync_window == 1 || c->sync_window > GOSSIP_MIX_SYNC_WINDOW_MAX)
        return GOSSIP_EINVAL;
    if (!(c->choco_gamma >= 0 && c->choco_gamma <= 1) ||
        !(c->choco_scale >= 0 && c->choco_scale <= 1))
        return GOSSIP_EINVAL;
    return GOSSIP_OK;
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
    m->topo = cfg->topology;
    m->bits = bits;
    m->block = block;
    m->cv = cv;
    m->nchunks = (uint32_t)(((uint64_t)cfg->dim + cv - 1) / cv);
    m->members_max = cfg->members_max ? cfg->members_max : GOSSIP_MIX_MEMBERS_DEFAULT;
    m->links_max = cfg->links_max ? cfg->links_max : GOSSIP_MIX_LINKS_DEFAULT;
    m->sync_window = cfg->sync_window ? cfg->sync_window : GOSSIP_MIX_SYNC_WINDOW_DEFAULT;
    m->gamma = cfg->choco_gamma > 0 ? cfg->choco_gamma : 0.5f;
    m->scale_cfg = cfg->choco_scale;
    m->step_timeout =
        cfg->step_timeout_us ? cfg->step_timeout_us : GOSSIP_MIX_STEP_TIMEOUT_DEFAULT_US;
    m->state = GOSSIP_MIX_IDLE;
    m->deadline = GOSSIP_TIME_NEVER;
    m->me = UINT32_MAX;

    size_t dim = m->dim;
    uint32_t chunk_max = min_u32(cv, m->dim + 1);
    /* Largest payload: a vector chunk at the most expensive codec setting, or
     * a push-sum chunk of float64 running sums. */
    size_t data_max = 8 * (size_t)chunk_max;
    size_t enc_cap = 0;
    for (size_t b = 0; b < sizeof all_bits / sizeof all_bits[0]; b++) {
        size_t one = gossip_codec_size(chunk_max, all_bits[b], block);
        if (one > data_max)
            data_max = one;
        uint32_t last = chunk_len(m, m->dim, m->nchunks - 1);
        size_t total = (size_t)(m->nchunks - 1) * codec_bytes(m, cv, all_bits[b]) +
                       codec_bytes(m, last, all_bits[b]);
        if (total > enc_cap)
            enc_cap = total;
    }
    m->frame_cap = GOSSIP_HEADER_SIZE + GOSSIP_MIX_HEADER_MAX + data_max;
    m->enc_cap = enc_cap;

    uint32_t a = algos;
    int ok = (m->ids = gossip_calloc(env, m->members_max, sizeof *m->ids)) &&
             (m->work = gossip_calloc(env, dim, sizeof(float))) &&
             (m->orig = gossip_calloc(env, dim, sizeof(float))) &&
             (m->pending = gossip_calloc(env, dim, sizeof(float))) &&
             (m->scratch = gossip_calloc(env, chunk_max, sizeof(float))) &&
             (m->scratch2 = gossip_calloc(env, chunk_max, sizeof(float))) &&
             (m->frame = gossip_alloc(env, m->frame_cap));
    if (ok && (a & (1u << GOSSIP_MIX_GOSSIP))) {
        m->pend_bytes = ((size_t)m->nchunks + 7) / 8;
        ok = (m->txq = gossip_alloc(env, GOSSIP_MIX_TXQ_MAX * m->frame_cap)) &&
             (m->pend_bits = gossip_calloc(env, GOSSIP_MIX_PENDING_MAX, m->pend_bytes));
    }
    if (ok &&
        (a & ((1u << GOSSIP_MIX_GOSSIP) | (1u << GOSSIP_MIX_DPSGD) | (1u << GOSSIP_MIX_CHOCO))))
        ok = (m->enc = gossip_alloc(env, enc_cap ? enc_cap : 1)) != NULL;
    if (ok && (a & ((1u << GOSSIP_MIX_DPSGD) | (1u << GOSSIP_MIX_CHOCO) |
                    (1u << GOSSIP_MIX_ALLREDUCE)))) {
        ok = (m->stash = gossip_calloc(env, GOSSIP_MIX_STASH_MAX, sizeof *m->stash)) &&
             (m->stash_mem = gossip_calloc(env, GOSSIP_MIX_STASH_MAX, m->frame_cap));
        for (uint32_t k = 0; ok && k < GOSSIP_MIX_STASH_MAX; k++)
            m->stash[k].payload = m->stash_mem + (size_t)k * m->frame_cap;
    }
    if (ok && (a & ((1u << GOSSIP_MIX_DPSGD) | (1u << GOSSIP_MIX_CHOCO)))) {
        ok = (m->slots = gossip_calloc(env, m->sync_window, sizeof(mix_slot))) &&
             (m->slot_mem = gossip_calloc(env, (size_t)m->sync_window * dim, sizeof(double)));
        for (uint32_t k = 0; ok && k < m->sync_window; k++)
            m->slots[k].acc = m->slot_mem + (size_t)k * dim;
    }
    if (ok && (a & (1u << GOSSIP_MIX_CHOCO)))
        ok = (m->hat = gossip_calloc(env, dim, sizeof(double))) &&
             (m->sacc = gossip_calloc(env, dim, sizeof(double)));
    if (ok && (a & (1u << GOSSIP_MIX_PUSHSUM))) {
        size_t per = dim + 1;
        ok = (m->ps = gossip_calloc(env, per, sizeof(double))) &&
             (m->ztaken = gossip_calloc(env, dim, sizeof(float))) &&
             (m->out_links = gossip_calloc(env, m->links_max, sizeof(mix_link))) &&
             (m->in_links = gossip_calloc(env, m->links_max, sizeof(mix_link))) &&
             (m->link_mem = gossip_calloc(env, 2 * (size_t)m->links_max * per, sizeof(double))) &&
             (m->ps_off = gossip_calloc(env, m->links_max, sizeof(uint32_t))) &&
             (m->ps_tomb = gossip_calloc(env, m->links_max, sizeof(uint64_t)));
        if (ok) {
            for (uint32_t k = 0; k < m->links_max; k++) {
                m->out_links[k].v = m->link_mem + (size_t)k * per;
                m->in_links[k].v = m->link_mem + ((size_t)m->links_max + k) * per;
            }
        }
    }
    if (ok && (a & (1u << GOSSIP_MIX_ALLREDUCE))) {
        m->ar_kmax = m->nchunks;
        ok = (m->inbox = gossip_calloc(env, dim, sizeof(float))) &&
             (m->ar_recv = gossip_calloc(env, m->ar_kmax, sizeof(uint32_t))) &&
             (m->ar_sent = gossip_calloc(env, m->ar_kmax, sizeof(uint32_t))) &&
             (m->ar_pre = gossip_calloc(env, m->ar_kmax, sizeof(uint32_t))) &&
             (m->ar_relay = gossip_calloc(env, m->ar_kmax, data_max)) &&
             (m->ar_relay_len = gossip_calloc(env, m->ar_kmax, sizeof(uint32_t))) &&
             (m->ar_relay_bits = gossip_calloc(env, m->ar_kmax, 1));
        m->ar_relay_stride = data_max;
    }
    if (!ok) {
        gossip_mix_destroy(m);
        return GOSSIP_ENOMEM;
    }
    *out = m;
    return GOSSIP_OK;
}

/* ---- view, algorithm, start, take --------------------------------------- */

static mix_link *link_find(mix_link *t, uint32_t cap, uint64_t peer)
{
    for (uint32_t k = 0; k < cap; k++)
        if (t[k].used && t[k].peer == peer)
            return &t[k];
    return NULL;
}

static mix_link *link_add(gossip_mix *m, mix_link *t, uint64_t peer)
{
    mix_link *l = link_find(t, m->links_max, peer);
    if (l)
        return l;
    for (uint32_t k = 0; k < m->links_max; k++) {
        if (!t[k].used) {
            t[k].used = 1;
            t[k].peer = peer;
            t[k].seq = t[k].base_seq = 0;
            memset(t[k].v, 0, ((size_t)m->dim + 1) * sizeof(double));
            return &t[k];
        }
    }
    return NULL;
}

static void check_done(gossip_mix *m);

/* Push-sum keeps running sums per link, in tables of links_max entries.
 * With the random topology every member would in time push to every other,
 * so beyond links_max + 1 members the in-link tables would overflow, pushes
 * would be refused and their senders' weights would drain into links that
 * never deliver (w -> 0, then s / w meaningless). Instead push-sum picks
 * uniformly among K = links_max out-neighbours of a random circulant graph
 * (i -> i + o_k mod n, the same K distinct offsets o_k on every member,
 * drawn from n): every member has exactly K out- and K in-neighbours, and
 * a random circulant graph of degree K is an expander, so mixing stays
 * fast. Below that size the pick is uniform over the whole view. */
static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static void pushsum_offsets(gossip_mix *m)
{
    m->ps_k = 0;
    if (m->topo != GOSSIP_TOPO_RANDOM || m->n < 2 || m->n - 1 <= m->links_max)
        return;
    uint64_t st = 0x505553480000ULL ^ m->n;
    while (m->ps_k < m->links_max) {
        uint32_t o = 1 + (uint32_t)(splitmix(&st) % (m->n - 1));
        uint32_t k = 0;
        while (k < m->ps_k && m->ps_off[k] != o)
            k++;
        if (k == m->ps_k)
            m->ps_off[m->ps_k++] = o;
    }
}

/* 1 if peer may hold a push-sum link with us: a member of the view and,
 * with circulant offsets, an out- (dir > 0) or in-neighbour (dir < 0). */
static int pushsum_neighbour(const gossip_mix *m, uint64_t peer, int dir)
{
    uint32_t j = gossip_view_index(&(gossip_view){m->epoch, m->n, m->ids}, peer);
    if (j == UINT32_MAX)
        return 0;
    if (!m->ps_k || m->me == UINT32_MAX)
        return 1;
    for (uint32_t k = 0; k < m->ps_k; k++) {
        uint32_t o = m->ps_off[k];
        uint32_t want = dir > 0 ? (m->me + o) % m->n : (m->me + m->n - o) % m->n;
        if (j == want)
            return 1;
    }
    return 0;
}

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

/* Push-sum: drop an in-link and remember its peer (see pushsum_recv). */
static void pushsum_drop_in(gossip_mix *m, mix_link *in)
{
    in->used = 0;
    uint32_t k = 0;
    while (k < m->ps_ntomb && m->ps_tomb[k] != in->peer)
        k++;
    if (k < m->ps_ntomb)
        return;
    if (m->ps_ntomb < m->links_max) {
        m->ps_tomb[m->ps_ntomb++] = in->peer;
    } else {
        m->ps_tomb[m->ps_tomb_next] = in->peer;
        m->ps_tomb_next = (m->ps_tomb_next + 1) % m->links_max;
    }
}

/* 1 if we dropped an in-link from peer (and forget it). */
static int pushsum_dropped(gossip_mix *m, uint64_t peer)
{
    for (uint32_t k = 0; k < m->ps_ntomb; k++)
        if (m->ps_tomb[k] == peer) {
            m->ps_tomb[k] = m->ps_tomb[--m->ps_ntomb];
            if (m->ps_tomb_next >= m->ps_ntomb)
                m->ps_tomb_next = 0;
            return 1;
        }
    return 0;
}

int gossip_mix_set_view(gossip_mix *m, const gossip_view *v, gossip_time_us now)
{
    if (!m || !v || (v->n && !v->ids))
        return GOSSIP_EINVAL;
    if (v->n > m->members_max)
        return GOSSIP_ETOOBIG;
    for (uint32_t i = 0; i < v->n; i++)
        if (v->ids[i] == 0 || (i && v->ids[i] <= v->ids[i - 1]))
            return GOSSIP_EINVAL;
    if (m->has_view && v->epoch < m->epoch)
        return GOSSIP_ESTALE;
    int newer = !m->has_view || v->epoch > m->epoch;
    if (v->n)
        memcpy(m->ids, v->ids, (size_t)v->n * sizeof *m->ids);
    m->n = v->n;
    m->epoch = v->epoch;
    m->view_id = view_id(v);
    m->has_view = 1;
    m->me = gossip_view_index(v, m->self);
    if (!newer)
        return GOSSIP_OK;

    int running = m->state == GOSSIP_MIX_RUNNING;
    m->sync_round = 0;
    if (running && is_sync(m->algo)) {
        m->stream.active = 0;
        memcpy(m->work, m->orig, (size_t)m->dim * sizeof *m->work);
        mix_finish(m, GOSSIP_EABORTED);
    }
    reset_sync(m);
    if (m->ar_recv)
        mix_ar_on_view(m);
    if (m->ps) {
        pushsum_offsets(m);
        for (uint32_t k = 0; k < m->links_max; k++) {
            mix_link *o = &m->out_links[k], *in = &m->in_links[k];
            if (o->used && !pushsum_neighbour(m, o->peer, 1)) {
                o->used = 0;
                if (m->stream.active && m->stream.type == GOSSIP_MSG_PUSHSUM && m->stream.link == k)
                    m->stream.active = 0;
            }
            if (in->used && !pushsum_neighbour(m, in->peer, -1))
                pushsum_drop_in(m, in);
        }
    }
    stash_replay(m, now);
    check_done(m);
    return GOSSIP_OK;
}

int gossip_mix_set_algo(gossip_mix *m, gossip_mix_algo a, gossip_topology t, unsigned bits)
{
    if (!m || m->state != GOSSIP_MIX_IDLE || (unsigned)a >= GOSSIP_MIX_ALGO_COUNT ||
        !(m->algos & (1u << a)) || !gossip_mix_combination_valid(a, t))
        return GOSSIP_EINVAL;
    bits = bits ? bits : 32;
    if (!gossip_codec_bits_valid(bits))
        return GOSSIP_EINVAL;
    int changed = a != m->algo || t != m->topo;
    m->algo = a;
    m->topo = t;
    m->bits = bits;
    if (changed) {
        reset_sync(m);
        reset_pushsum(m);
        if (m->ps)
            pushsum_offsets(m);
        for (uint32_t k = 0; k < GOSSIP_MIX_PENDING_MAX; k++)
            m->pend[k].used = 0;
    }
    return GOSSIP_OK;
}

static void sync_start(gossip_mix *m);
static void gossip_start(gossip_mix *m, gossip_time_us now);
static void pushsum_start(gossip_mix *m);

int gossip_mix_start(gossip_mix *m, const float *x, gossip_time_us now)
{
    if (!m || !x || m->state != GOSSIP_MIX_IDLE || !m->has_view)
        return GOSSIP_EINVAL;
    if (m->me == UINT32_MAX)
        return GOSSIP_ENOTFOUND;
    if (mix_values_ok(x, m->dim))
        return GOSSIP_ENONFINITE;
    for (uint32_t i = 0; i < m->dim; i++)
        m->work[i] = x[i] + m->pending[i];
    memset(m->pending, 0, (size_t)m->dim * sizeof *m->pending);
    memcpy(m->orig, m->work, (size_t)m->dim * sizeof *m->orig);
    m->has_vector = 1;
    m->state = GOSSIP_MIX_RUNNING;
    m->outcome = GOSSIP_OK;
    m->deadline = now + m->step_timeout;
    m->stream.active = 0;
    switch (m->algo) {
    case GOSSIP_MIX_DPSGD:
    case GOSSIP_MIX_CHOCO:
        sync_start(m);
        break;
    case GOSSIP_MIX_GOSSIP:
        gossip_start(m, now);
        break;
    case GOSSIP_MIX_PUSHSUM:
        pushsum_start(m);
        break;
    case GOSSIP_MIX_ALLREDUCE:
        mix_ar_start(m, now);
        break;
    default:
        break;
    }
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
    if (m->algo == GOSSIP_MIX_PUSHSUM && m->ps_init && m->ps[m->dim] > 0) {
        double w = m->ps[m->dim];
        for (uint32_t i = 0; i < m->dim; i++)
            m->work[i] = (float)(m->ps[i] / w);
        memcpy(m->ztaken, m->work, (size_t)m->dim * sizeof *m->ztaken);
    }
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
    switch (m->algo) {
    case GOSSIP_MIX_DPSGD:
    case GOSSIP_MIX_CHOCO:
        return m->sync_round;
    case GOSSIP_MIX_ALLREDUCE:
        return m->ar_round;
    default:
        return m->local_round;
    }
}

int gossip_mix_pending(const gossip_mix *m, float *out)
{
    if (!m || !out)
        return GOSSIP_EINVAL;
    memcpy(out, m->pending, (size_t)m->dim * sizeof *out);
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

/* ---- MIX_PUSH / MIX_REPLY payload ---------------------------------------- */

/* MIX_REPLY flag: the push was refused (crossing pushes, see gossip_recv_push);
 * no data, the pusher counts the chunk as answered with no change. */
#define MIX_FLAG_BUSY 1u

typedef struct push_hdr {
    uint8_t algo, bits;
    uint16_t flags;
    uint32_t offset, count;
    float scale;
    uint32_t gen;     /* choco: generation of the public copies (0 otherwise) */
    uint32_t gen_age; /* choco: rounds since the sender's first push in gen */
    const uint8_t *data;
    size_t data_len;
} push_hdr;

static int parse_push(const gossip_mix *m, uint8_t type, const uint8_t *p, size_t len, push_hdr *ph)
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
        ph->count != chunk_len(m, m->dim, ph->offset / m->cv))
        return GOSSIP_EMALFORMED;
    if (!isfinite(ph->scale))
        return GOSSIP_ENONFINITE;
    if (!(ph->scale > 0 && ph->scale <= 1))
        return GOSSIP_EMALFORMED;
    ph->data = p + GOSSIP_MIX_PUSH_HEADER;
    ph->data_len = len - GOSSIP_MIX_PUSH_HEADER;
    if (ph->data_len != (flags ? 0 : codec_bytes(m, ph->count, ph->bits)))
        return GOSSIP_EMALFORMED;
    return GOSSIP_OK;
}

static void write_push_hdr(const gossip_mix *m, uint8_t *p, uint8_t algo, uint8_t bits,
                           uint16_t flags, uint32_t offset, uint32_t count, float scale,
                           uint32_t gen, uint32_t gen_age)
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

/* Encode every chunk of src (dim values) into enc at m->bits. If `decoded`
 * is given it receives what receivers will decode. */
static int encode_vector(gossip_mix *m, const float *src, float *decoded)
{
    for (uint32_t c = 0; c < m->nchunks; c++) {
        uint32_t off = c * m->cv, n = chunk_len(m, m->dim, c);
        size_t at = enc_offset(m, c, m->bits);
        int rc = gossip_codec_encode(m->env, src + off, n, m->bits, m->block, m->enc + at,
                                     m->enc_cap - at, decoded ? decoded + off : NULL);
        if (rc)
            return rc;
    }
    return GOSSIP_OK;
}

static void stream_begin(gossip_mix *m, uint8_t type, uint8_t algo, uint64_t round, float scale,
                         uint32_t nchunks)
{
    m->stream.active = m->stream.ndest > 0;
    m->stream.type = type;
    m->stream.algo = algo;
    m->stream.bits = (uint8_t)m->bits;
    m->stream.round = round;
    m->stream.scale = scale;
    m->stream.di = 0;
    m->stream.chunk = 0;
    m->stream.nchunks = nchunks;
    m->stream.gen = algo == GOSSIP_MIX_CHOCO ? m->choco_gen : 0;
    uint64_t age = round - m->choco_gen_start;
    m->stream.gen_age =
        algo == GOSSIP_MIX_CHOCO ? (uint32_t)(age < UINT32_MAX ? age : UINT32_MAX) : 0;
}

/* ---- dpsgd and choco ---------------------------------------------------- */

/* The accumulator slot of round r (r or r + 1 relative to sync_round),
 * initialised with r's in-neighbours on first use. */
static mix_slot *sync_slot(gossip_mix *m, uint64_t r)
{
    mix_slot *s = &m->slots[r % m->sync_window];
    if (s->used && s->round == r)
        return s;
    clear_slot(s, m->dim);
    s->dirty = 0;
    uint32_t idx[GOSSIP_TOPOLOGY_DEGREE_MAX];
    s->nin = gossip_topology_in(m->topo, m->n, m->me, r, idx);
    for (uint32_t k = 0; k < s->nin; k++) {
        s->in_id[k] = m->ids[idx[k]];
        s->got[k] = 0;
    }
    s->used = 1;
    s->round = r;
    return s;
}

static void sync_start(gossip_mix *m)
{
    uint64_t r = m->sync_round;
    uint32_t idx[GOSSIP_TOPOLOGY_DEGREE_MAX];
    uint32_t nout = gossip_topology_out(m->topo, m->n, m->me, r, idx);
    mix_slot *s = sync_slot(m, r);
    m->run_nin = s->nin;
    for (uint32_t k = 0; k < nout; k++)
        m->stream.dest[k] = m->ids[idx[k]];
    m->stream.ndest = nout;
    float scale = 1.0f;
    int rc;
    if (m->algo == GOSSIP_MIX_CHOCO) {
        /* q = Q(x - x^); x^ += scale q; s += w scale q (w = 1/(d+1)). */
        scale = choco_scale(m);
        double w = 1.0 / (s->nin + 1);
        rc = GOSSIP_OK;
        for (uint32_t c = 0; c < m->nchunks && !rc; c++) {
            uint32_t off = c * m->cv, n = chunk_len(m, m->dim, c);
            for (uint32_t i = 0; i < n; i++)
                m->scratch[i] = (float)(m->work[off + i] - m->hat[off + i]);
            size_t at = enc_offset(m, c, m->bits);
            rc = gossip_codec_encode(m->env, m->scratch, n, m->bits, m->block, m->enc + at,
                                     m->enc_cap - at, m->scratch2);
            for (uint32_t i = 0; i < n && !rc; i++) {
                double d = (double)scale * m->scratch2[i];
                m->hat[off + i] += d;
                m->sacc[off + i] += w * d;
            }
        }
    } else {
        rc = encode_vector(m, m->orig, NULL);
    }
    if (rc) { /* cannot happen for finite input; abort rather than send junk */
        mix_finish(m, GOSSIP_EABORTED);
        return;
    }
    stream_begin(m, GOSSIP_MSG_MIX_PUSH, (uint8_t)m->algo, r, scale, m->nchunks);
}

/* Choco: our copy of a sender's public vector is exact only if we added
 * every q it pushed in the current generation. Links are FIFO and a member
 * pushes to its (static) out-neighbours every round, so the pushes of one
 * generation arrive for consecutive rounds from the sender's first (age 0).
 * A gap (a push lost, or refused as stale) means our copy differs from the
 * sender's for good: returns 0, and the caller restarts the copies. */
static int choco_continuous(gossip_mix *m, uint64_t from, uint64_t round, uint32_t age)
{
    uint32_t k = 0;
    while (k < m->choco_nin && m->choco_in_id[k] != from)
        k++;
    if (k == m->choco_nin) {
        if (age != 0 || k == GOSSIP_TOPOLOGY_DEGREE_MAX)
            return 0;
        m->choco_in_id[k] = from;
        m->choco_nin++;
    } else if (round != m->choco_in_last[k] + 1) {
        return 0;
    }
    m->choco_in_last[k] = round;
    return 1;
}

static void sync_abort_round(gossip_mix *m, int keep_stream);

/* A member of our view is at round r, beyond our window: it entered this
 * view earlier (under SWIM every member installs a view at its own moment,
 * and rounds restart at 0 in each view), or we fell behind. Waiting would
 * cost a step deadline per round for ever, since neither side accepts the
 * other's rounds; so catch up: give the running round up and continue at r
 * (members only ever move forward, so the group meets at the front). */
static void sync_jump(gossip_mix *m, uint64_t r)
{
    if (m->state == GOSSIP_MIX_RUNNING)
        sync_abort_round(m, 1); /* sync_round + 1; copies restart (choco) */
    else if (m->algo == GOSSIP_MIX_CHOCO)
        choco_reset(m, choco_next_gen(m)); /* rounds skipped: copies differ */
    for (uint32_t k = 0; k < m->sync_window; k++) {
        clear_slot(&m->slots[k], m->dim);
        m->slots[k].dirty = 0;
    }
    if (m->choco_gen_start == m->sync_round)
        m->choco_gen_start = r;
    m->sync_round = r;
    m->stats.round_jumps++;
}

static int sync_recv(gossip_mix *m, uint64_t from, const gossip_header *h, const push_hdr *ph)
{
    if (ph->algo != m->algo)
        return GOSSIP_EMALFORMED;
    if (ph->algo == GOSSIP_MIX_DPSGD && ph->scale != 1.0f)
        return GOSSIP_EMALFORMED;
    if (h->epoch != m->view_id)
        return GOSSIP_ESTALE;
    if (h->round < m->sync_round)
        return GOSSIP_ESTALE;
    if (h->round - m->sync_round >= m->sync_window)
        sync_jump(m, h->round);
    mix_slot *s = sync_slot(m, h->round);
    uint32_t k = 0;
    while (k < s->nin && s->in_id[k] != from)
        k++;
    if (k == s->nin)
        return GOSSIP_ENOTFOUND;
    if (ph->offset != s->got[k])
        return GOSSIP_EMALFORMED;
    int rc = gossip_codec_decode(ph->data, ph->data_len, ph->count, ph->bits, m->block, m->scratch);
    if (!rc)
        rc = mix_values_ok(m->scratch, ph->count);
    if (rc)
        return rc;
    if (ph->algo == GOSSIP_MIX_CHOCO && ph->gen != m->choco_gen &&
        gen_cmp(ph->gen, m->choco_gen) > 0)
        choco_reset(m, ph->gen); /* a member lost a round: restart with it */
    if (ph->algo == GOSSIP_MIX_CHOCO && ph->gen == m->choco_gen && ph->offset == 0 &&
        !choco_continuous(m, from, h->round, ph->gen_age))
        choco_reset(m, choco_next_gen(m)); /* we missed part of its copy: restart all */
    if (ph->algo == GOSSIP_MIX_CHOCO && ph->gen != m->choco_gen) {
        s->dirty = 1; /* the sender restarts soon; its old-generation q is dropped */
        s->got[k] += ph->count;
        return GOSSIP_OK;
    }
    double *acc = s->acc + ph->offset;
    for (uint32_t i = 0; i < ph->count; i++)
        acc[i] += (double)ph->scale * m->scratch[i];
    s->got[k] += ph->count;
    return GOSSIP_OK;
}

/* 1 if an in-neighbour of the running round has sent a later round while
 * its part of this one is missing: links are FIFO, so that part was lost
 * (or never sent, after the neighbour gave the round up) and waiting for
 * the deadline would only stall every member behind us. */
static int sync_skipped(const gossip_mix *m, const mix_slot *s)
{
    for (uint32_t k = 0; k < s->nin; k++) {
        if (s->got[k] == m->dim)
            continue;
        for (uint32_t d = 1; d < m->sync_window; d++) {
            const mix_slot *t = &m->slots[(m->sync_round + d) % m->sync_window];
            if (!t->used || t->round != m->sync_round + d)
                continue;
            for (uint32_t j = 0; j < t->nin; j++)
                if (t->in_id[j] == s->in_id[k] && t->got[j] > 0)
                    return 1;
        }
    }
    return 0;
}

static void sync_check(gossip_mix *m)
{
    mix_slot *s = &m->slots[m->sync_round % m->sync_window];
    if (!s->used || s->round != m->sync_round)
        return;
    if (sync_skipped(m, s)) {
        sync_abort_round(m, 1);
        return;
    }
    if (m->stream.active)
        return;
    for (uint32_t k = 0; k < s->nin; k++)
        if (s->got[k] != m->dim)
            return;
    double w = 1.0 / (s->nin + 1);
    if (m->algo == GOSSIP_MIX_DPSGD) {
        for (uint32_t i = 0; i < m->dim; i++)
            m->work[i] = (float)((m->orig[i] + s->acc[i]) * w);
    } else {
        /* The copies stay exact whatever happens; the consensus step only
         * in a clean round (every contribution of the current generation). */
        for (uint32_t i = 0; i < m->dim; i++)
            m->sacc[i] += w * s->acc[i];
        if (m->choco_warm > 0)
            m->choco_warm--;
        else if (!s->dirty)
            for (uint32_t i = 0; i < m->dim; i++)
                m->work[i] = (float)(m->work[i] + m->gamma * (m->sacc[i] - m->hat[i]));
    }
    clear_slot(s, m->dim);
    s->dirty = 0;
    m->sync_round++;
    mix_finish(m, GOSSIP_OK);
}

static void sync_abort(gossip_mix *m)
{
    sync_abort_round(m, 0);
}

/* Give the running round up. keep_stream: our own part still goes out to
 * the out-neighbours that have not had it (they may complete the round). */
static void sync_abort_round(gossip_mix *m, int keep_stream)
{
    /* Choco: a lost round leaves the public copies inconsistent between
     * members; restart them in a new generation, which spreads with the
     * next pushes (MIXING.md, "choco under loss"). */
    if (m->algo == GOSSIP_MIX_CHOCO)
        choco_reset(m, choco_next_gen(m));
    mix_slot *cur = &m->slots[m->sync_round % m->sync_window];
    clear_slot(cur, m->dim);
    cur->dirty = 0;
    if (!keep_stream)
        m->stream.active = 0;
    memcpy(m->work, m->orig, (size_t)m->dim * sizeof *m->work);
    m->sync_round++;
    mix_finish(m, GOSSIP_EABORTED);
}

/* ---- pairwise gossip ---------------------------------------------------- */

static void gossip_start(gossip_mix *m, gossip_time_us now)
{
    uint64_t r = m->local_round++;
    uint32_t j = gossip_topology_pick(m->topo, m->env, m->n, m->me, r);
    m->stream.ndest = 0;
    if (j == UINT32_MAX) {
        mix_finish(m, GOSSIP_OK);
        return;
    }
    if (encode_vector(m, m->orig, NULL)) {
        mix_finish(m, GOSSIP_EABORTED);
        return;
    }
    uint32_t e = m->pend_next;
    m->pend_next = (m->pend_next + 1) % GOSSIP_MIX_PENDING_MAX;
    m->pend[e] = (mix_pending){.used = 1, .peer = m->ids[j], .round = r, .got = 0};
    memset(m->pend_bits + (size_t)e * m->pend_bytes, 0, m->pend_bytes);
    m->pend_cur = e;
    m->gossip_round = r;
    m->stream.dest[0] = m->ids[j];
    m->stream.ndest = 1;
    stream_begin(m, GOSSIP_MSG_MIX_PUSH, GOSSIP_MIX_GOSSIP, r, 1.0f, m->nchunks);
    (void)now;
}

/* A push from a peer: answer with d = Q((x_peer - x_self) / 2) and add d to
 * our vector; the pusher subtracts the very same decoded d, so the sum is kept
 * exactly whatever the codec does. */
/* Queue a BUSY answer to a gossip push: the pusher counts the chunk as
 * answered with no change. Returns GOSSIP_OK or GOSSIP_EFULL. */
static int gossip_busy_reply(gossip_mix *m, uint64_t from, const gossip_header *h,
                             const push_hdr *ph)
{
    if (m->txq_count == GOSSIP_MIX_TXQ_MAX)
        return GOSSIP_EFULL;
    uint32_t slot = (m->txq_head + m->txq_count) % GOSSIP_MIX_TXQ_MAX;
    uint8_t *f = m->txq + (size_t)slot * m->frame_cap;
    mix_header(m, f, GOSSIP_MSG_MIX_REPLY, m->view_id, h->round, GOSSIP_MIX_PUSH_HEADER);
    write_push_hdr(m, f + GOSSIP_HEADER_SIZE, GOSSIP_MIX_GOSSIP, ph->bits, MIX_FLAG_BUSY,
                   ph->offset, ph->count, 1.0f, 0, 0);
    m->txq_len[slot] = GOSSIP_HEADER_SIZE + GOSSIP_MIX_PUSH_HEADER;
    m->txq_dest[slot] = from;
    m->txq_count++;
    return GOSSIP_OK;
}

static int gossip_recv_push(gossip_mix *m, uint64_t from, const gossip_header *h,
                            const push_hdr *ph)
{
    if (m->algo != GOSSIP_MIX_GOSSIP || ph->scale != 1.0f)
        return GOSSIP_EMALFORMED;
    if (m->txq_count == GOSSIP_MIX_TXQ_MAX)
        return GOSSIP_EFULL;
    uint32_t slot = (m->txq_head + m->txq_count) % GOSSIP_MIX_TXQ_MAX;
    uint8_t *f = m->txq + (size_t)slot * m->frame_cap;
    /* Crossing pushes (we push to `from` while it pushes to us): the two
     * exchanges would each use the other's stale value and swap rather than
     * average. The member with the smaller id refuses; the other answers. */
    /* A member that has no vector yet (never started) refuses the same way. */
    const mix_pending *own = &m->pend[m->pend_cur];
    if (!m->has_vector || (m->state == GOSSIP_MIX_RUNNING && m->algo == GOSSIP_MIX_GOSSIP &&
                           own->used && own->peer == from && own->got < m->dim && m->self < from))
        return gossip_busy_reply(m, from, h, ph);
    int rc = gossip_codec_decode(ph->data, ph->data_len, ph->count, ph->bits, m->block, m->scratch);
    if (!rc)
        rc = mix_values_ok(m->scratch, ph->count);
    if (rc)
        return rc;
    const float *w = m->work + ph->offset;
    for (uint32_t i = 0; i < ph->count; i++)
        m->scratch[i] = (m->scratch[i] - w[i]) * 0.5f;
    size_t data = codec_bytes(m, ph->count, ph->bits);
    size_t payload = GOSSIP_MIX_PUSH_HEADER + data;
    rc = gossip_codec_encode(m->env, m->scratch, ph->count, ph->bits, m->block,
                             f + GOSSIP_HEADER_SIZE + GOSSIP_MIX_PUSH_HEADER, data, m->scratch2);
    if (rc)
        return rc;
    mix_header(m, f, GOSSIP_MSG_MIX_REPLY, m->view_id, h->round, payload);
    write_push_hdr(m, f + GOSSIP_HEADER_SIZE, GOSSIP_MIX_GOSSIP, ph->bits, 0, ph->offset, ph->count,
                   1.0f, 0, 0);
    m->txq_len[slot] = GOSSIP_HEADER_SIZE + payload;
    m->txq_dest[slot] = from;
    m->txq_count++;
    apply_delta(m, ph->offset, ph->count, m->scratch2, 1.0f);
    return GOSSIP_OK;
}

static int gossip_recv_reply(gossip_mix *m, uint64_t from, const gossip_header *h,
                             const push_hdr *ph)
{
    if (!m->pend_bits || ph->algo != GOSSIP_MIX_GOSSIP || ph->scale != 1.0f)
        return GOSSIP_EMALFORMED;
    uint32_t e = 0;
    while (e < GOSSIP_MIX_PENDING_MAX &&
           !(m->pend[e].used && m->pend[e].peer == from && m->pend[e].round == h->round))
        e++;
    if (e == GOSSIP_MIX_PENDING_MAX)
        return GOSSIP_ESTALE;
    uint32_t c = ph->offset / m->cv;
    uint8_t *bits = m->pend_bits + (size_t)e * m->pend_bytes;
    if (bits[c / 8] & (1u << (c % 8)))
        return GOSSIP_EMALFORMED; /* duplicate answer */
    if (!(ph->flags & MIX_FLAG_BUSY)) {
        int rc =
            gossip_codec_decode(ph->data, ph->data_len, ph->count, ph->bits, m->block, m->scratch);
        if (!rc)
            rc = mix_values_ok(m->scratch, ph->count);
        if (rc)
            return rc;
        apply_delta(m, ph->offset, ph->count, m->scratch, -1.0f);
    }
    bits[c / 8] |= (uint8_t)(1u << (c % 8));
    m->pend[e].got += ph->count;
    if (m->pend[e].got == m->dim && e != m->pend_cur)
        m->pend[e].used = 0;
    return GOSSIP_OK;
}

static void gossip_check(gossip_mix *m)
{
    mix_pending *p = &m->pend[m->pend_cur];
    if (!m->stream.active && p->used && p->round == m->gossip_round && p->got == m->dim) {
        p->used = 0;
        mix_finish(m, GOSSIP_OK);
    }
}

/* ---- push-sum ----------------------------------------------------------- */

static void pushsum_start(gossip_mix *m)
{
    uint32_t dim = m->dim;
    if (!m->ps_init) {
        for (uint32_t i = 0; i < dim; i++)
            m->ps[i] += m->work[i];
        m->ps[dim] += 1.0;
        m->ps_init = 1;
    } else {
        /* The caller's local update since take, scaled by the weight, so the
         * estimate s/w moves by exactly that update. */
        double w = m->ps[dim];
        for (uint32_t i = 0; i < dim; i++)
            m->ps[i] += w * (double)(m->work[i] - m->ztaken[i]);
    }
    uint64_t r = m->local_round++;
    m->stream.ndest = 0;
    uint32_t j = m->ps_k ? (m->me + m->ps_off[gossip_random_below(m->env, m->ps_k)]) % m->n
                         : gossip_topology_pick(m->topo, m->env, m->n, m->me, r);
    if (j == UINT32_MAX)
        return; /* alone: check_done finishes the round */
    mix_link *l = link_add(m, m->out_links, m->ids[j]);
    if (!l) { /* table full: reuse a link we already have (bounded out-degree) */
        l = &m->out_links[gossip_random_below(m->env, m->links_max)];
    }
    if (l->seq < UINT32_MAX)
        l->seq++;
    /* Keep half, give half: the given half joins the link's running sum, so a
     * lost frame's mass is carried by the next frame on the same link. */
    for (uint32_t i = 0; i <= dim; i++) {
        double half = m->ps[i] * 0.5;
        m->ps[i] = half;
        l->v[i] += half;
    }
    m->stream.dest[0] = l->peer;
    m->stream.ndest = 1;
    m->stream.link = (uint32_t)(l - m->out_links);
    uint32_t nch = (uint32_t)(((uint64_t)dim + 1 + m->cv - 1) / m->cv);
    stream_begin(m, GOSSIP_MSG_PUSHSUM, GOSSIP_MIX_PUSHSUM, r, 1.0f, nch);
}

static int pushsum_recv(gossip_mix *m, uint64_t from, const uint8_t *p, size_t len)
{
    if (!m->ps)
        return GOSSIP_EMALFORMED;
    if (len < GOSSIP_MIX_PS_HEADER)
        return GOSSIP_ETRUNC;
    uint32_t dim = gossip_get_u32(p), off = gossip_get_u32(p + 4), cnt = gossip_get_u32(p + 8);
    uint32_t seq = gossip_get_u32(p + 12);
    uint32_t total = m->dim + 1;
    if (dim != m->dim || seq == 0 || off >= total || off % m->cv != 0 ||
        cnt != chunk_len(m, total, off / m->cv))
        return GOSSIP_EMALFORMED;
    if (len != GOSSIP_MIX_PS_HEADER + 8 * (size_t)cnt)
        return GOSSIP_EMALFORMED;
    const uint8_t *d = p + GOSSIP_MIX_PS_HEADER;
    for (uint32_t i = 0; i < cnt; i++) {
        uint64_t u = gossip_get_u64(d + 8 * (size_t)i);
        double v;
        memcpy(&v, &u, 8);
        if (!(fabs(v) <= GOSSIP_MIX_VALUE_MAX))
            return GOSSIP_ENONFINITE;
    }
    mix_link *l = link_find(m->in_links, m->links_max, from);
    int known = l != NULL;
    if (!known && !(l = link_add(m, m->in_links, from)) && m->ps_k) {
        /* Table full: the views of the members differ (SWIM), and a member
         * pushed to us while we were not its circulant neighbour. A link
         * from a member that is not our in-neighbour any more gives way. */
        for (uint32_t k = 0; k < m->links_max && !l; k++)
            if (m->in_links[k].used && !pushsum_neighbour(m, m->in_links[k].peer, -1)) {
                pushsum_drop_in(m, &m->in_links[k]);
                l = link_add(m, m->in_links, from);
            }
    }
    if (!l)
        return GOSSIP_EFULL;
    /* Views differ between members under SWIM, so the two ends of a link
     * are not always dropped together. A push on a link we dropped (the
     * sender did not) carries running sums whose start we absorbed: adding
     * them again would count that history twice and blow the estimates up;
     * it only sets the baseline (the mass in flight on it is lost, the
     * estimates stay exact averages). A link we never had, or one the
     * sender re-created (its push numbers start again at 1, below the last
     * we saw), starts from 0: everything in its sums is new to us, lost
     * pushes included. Links are FIFO. */
    if (!known) {
        memset(l->v, 0, ((size_t)m->dim + 1) * sizeof *l->v);
        l->base_seq = pushsum_dropped(m, from) && seq != 1 ? seq : 0;
        l->seq = seq;
    } else if (seq < l->seq) {
        memset(l->v, 0, ((size_t)m->dim + 1) * sizeof *l->v);
        l->base_seq = 0;
        l->seq = seq;
    } else if (seq > l->seq) {
        l->seq = seq;
        l->base_seq = 0;
    }
    int baseline = l->base_seq != 0 && seq == l->base_seq;
    /* The weight's running sum only grows (the sender adds halves), so the
     * weight never shrinks on receipt; and no value may leave the estimate
     * s / w above GOSSIP_MIX_VALUE_MAX. Either would be a bogus frame. */
    double w = m->ps[m->dim];
    for (uint32_t i = 0; i < cnt && !baseline; i++) {
        uint64_t u = gossip_get_u64(d + 8 * (size_t)i);
        double sigma, next;
        memcpy(&sigma, &u, 8);
        next = m->ps[off + i] + (sigma - l->v[off + i]);
        if (off + i == m->dim) {
            if (sigma < l->v[off + i])
                return GOSSIP_EMALFORMED;
        } else if (!(fabs(next) <= (double)GOSSIP_MIX_VALUE_MAX * w) && w > 0) {
            return GOSSIP_ENONFINITE;
        }
    }
    for (uint32_t i = 0; i < cnt; i++) {
        uint64_t u = gossip_get_u64(d + 8 * (size_t)i);
        double sigma;
        memcpy(&sigma, &u, 8);
        if (!baseline)
            m->ps[off + i] += sigma - l->v[off + i];
        l->v[off + i] = sigma;
    }
    return GOSSIP_OK;
}

int gossip_mix_pushsum_mass(const gossip_mix *m, double *vec, double *weight)
{
    if (!m || !m->ps || !vec || !weight)
        return GOSSIP_EINVAL;
    uint32_t dim = m->dim;
    for (uint32_t i = 0; i <= dim; i++) {
        double s = m->ps[i];
        for (uint32_t k = 0; k < m->links_max; k++) {
            if (m->out_links[k].used)
                s += m->out_links[k].v[i];
            if (m->in_links[k].used)
                s -= m->in_links[k].v[i];
        }
        if (i < dim)
            vec[i] = s;
        else
            *weight = s;
    }
    return GOSSIP_OK;
}

/* ---- recv / tick / poll_send -------------------------------------------- */

static void check_done(gossip_mix *m)
{
    if (m->state != GOSSIP_MIX_RUNNING)
        return;
    switch (m->algo) {
    case GOSSIP_MIX_DPSGD:
    case GOSSIP_MIX_CHOCO:
        sync_check(m);
        break;
    case GOSSIP_MIX_GOSSIP:
        if (m->stream.ndest == 0 && !m->stream.active)
            mix_finish(m, GOSSIP_OK);
        else
            gossip_check(m);
        break;
    case GOSSIP_MIX_PUSHSUM:
        if (!m->stream.active)
            mix_finish(m, GOSSIP_OK);
        break;
    case GOSSIP_MIX_ALLREDUCE:
        mix_ar_check(m);
        break;
    default:
        break;
    }
}

static int recv_frame(gossip_mix *m, uint64_t from, const gossip_header *h, const uint8_t *p,
                      size_t len, gossip_time_us now)
{
    if (!h || (len && !p))
        return GOSSIP_EINVAL;
    if (h->sender != from || h->payload_len != len)
        return GOSSIP_EMALFORMED;
    push_hdr ph;
    if (!m->has_view ||
        gossip_view_index(&(gossip_view){m->epoch, m->n, m->ids}, from) == UINT32_MAX ||
        from == m->self) {
        /* A pairwise push from a member not (yet) in our view, e.g. one that
         * just joined and we have not heard of: refuse it, but answer BUSY at
         * once so the pusher does not wait out its deadline (with SWIM every
         * joiner would otherwise lose a full step timeout per early push). */
        if (from != m->self && from != 0 && h->type == GOSSIP_MSG_MIX_PUSH &&
            m->algo == GOSSIP_MIX_GOSSIP && parse_push(m, h->type, p, len, &ph) == GOSSIP_OK &&
            ph.algo == GOSSIP_MIX_GOSSIP)
            (void)gossip_busy_reply(m, from, h, &ph);
        return GOSSIP_ENOTFOUND;
    }
    int rc;
    switch (h->type) {
    case GOSSIP_MSG_MIX_PUSH:
        if ((rc = parse_push(m, GOSSIP_MSG_MIX_PUSH, p, len, &ph)))
            return rc;
        if (ph.algo == GOSSIP_MIX_GOSSIP)
            return m->txq ? gossip_recv_push(m, from, h, &ph) : GOSSIP_EMALFORMED;
        if (is_sync((gossip_mix_algo)ph.algo) && m->slots)
            return sync_recv(m, from, h, &ph);
        return GOSSIP_EMALFORMED;
    case GOSSIP_MSG_MIX_REPLY:
        if ((rc = parse_push(m, GOSSIP_MSG_MIX_REPLY, p, len, &ph)))
            return rc;
        return gossip_recv_reply(m, from, h, &ph);
    case GOSSIP_MSG_PUSHSUM:
        return pushsum_recv(m, from, p, len);
    case GOSSIP_MSG_AR_CHUNK:
        return m->ar_recv ? mix_ar_recv_chunk(m, from, h, p, len, now) : GOSSIP_EMALFORMED;
    case GOSSIP_MSG_AR_ABORT:
        return m->ar_recv ? mix_ar_recv_abort(m, from, h, p, len, now) : GOSSIP_EMALFORMED;
    default:
        return GOSSIP_ETYPE;
    }
}

/* Under SWIM every member installs a view at its own moment. A member that
 * installs it before us sends its first rounds with the new view id, which
 * we refuse (or, if it is new to us, we do not know the sender yet); it
 * never sends them again, so without this we would wait a step deadline
 * for each view change. Keep the last GOSSIP_MIX_STASH_MAX such frames of
 * the synchronous algorithms and replay them when we install their view. */
static void stash_put(gossip_mix *m, uint64_t from, const gossip_header *h, const uint8_t *p,
                      size_t len)
{
    if (!m->stash || m->replaying || from == 0 || from == m->self || len > m->frame_cap)
        return;
    int sync_push = h->type == GOSSIP_MSG_MIX_PUSH && len > 0 &&
                    (p[0] == GOSSIP_MIX_DPSGD || p[0] == GOSSIP_MIX_CHOCO);
    if (!sync_push && h->type != GOSSIP_MSG_AR_CHUNK)
        return;
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

int gossip_mix_recv(gossip_mix *m, uint64_t from, const gossip_header *h, const uint8_t *payload,
                    size_t len, gossip_time_us now)
{
    m->stats.frames_received++;
    m->stats.bytes_received += GOSSIP_HEADER_SIZE + len;
    int rc = recv_frame(m, from, h, payload, len, now);
    if ((rc == GOSSIP_ESTALE || rc == GOSSIP_ENOTFOUND) && h && h->epoch != m->view_id)
        stash_put(m, from, h, payload, len);
    if (rc)
        return mix_reject(m, rc);
    check_done(m);
    return GOSSIP_OK;
}

int gossip_mix_tick(gossip_mix *m, gossip_time_us now)
{
    if (m->state != GOSSIP_MIX_RUNNING || now < m->deadline)
        return GOSSIP_OK;
    switch (m->algo) {
    case GOSSIP_MIX_DPSGD:
    case GOSSIP_MIX_CHOCO:
        sync_abort(m);
        break;
    case GOSSIP_MIX_GOSSIP:
        /* No (complete) answer in time: give up on this exchange. Answers that
         * still arrive are applied (the peer has applied its side). */
        m->stream.active = 0;
        mix_finish(m, GOSSIP_EABORTED);
        break;
    case GOSSIP_MIX_ALLREDUCE:
        mix_ar_tick(m, now);
        break;
    default:
        m->stream.active = 0;
        mix_finish(m, GOSSIP_EABORTED);
        break;
    }
    return GOSSIP_OK;
}

/* Build the next frame of the bulk stream into m->frame. */
static int stream_poll(gossip_mix *m, gossip_send *out)
{
    mix_stream *s = &m->stream;
    uint32_t c = s->chunk;
    uint64_t dest = s->dest[s->di];
    uint8_t *f = m->frame;
    size_t payload;
    if (s->type == GOSSIP_MSG_MIX_PUSH) {
        uint32_t n = chunk_len(m, m->dim, c);
        size_t data = codec_bytes(m, n, s->bits);
        memcpy(f + GOSSIP_HEADER_SIZE + GOSSIP_MIX_PUSH_HEADER, m->enc + enc_offset(m, c, s->bits),
               data);
        write_push_hdr(m, f + GOSSIP_HEADER_SIZE, s->algo, s->bits, 0, c * m->cv, n, s->scale,
                       s->gen, s->gen_age);
        payload = GOSSIP_MIX_PUSH_HEADER + data;
    } else {
        uint32_t total = m->dim + 1, off = c * m->cv, n = chunk_len(m, total, c);
        uint8_t *p = f + GOSSIP_HEADER_SIZE;
        gossip_put_u32(p, m->dim);
        gossip_put_u32(p + 4, off);
        gossip_put_u32(p + 8, n);
        gossip_put_u32(p + 12, m->out_links[s->link].seq);
        const double *v = m->out_links[s->link].v + off;
        for (uint32_t i = 0; i < n; i++) {
            uint64_t u;
            memcpy(&u, &v[i], 8);
            gossip_put_u64(p + GOSSIP_MIX_PS_HEADER + 8 * (size_t)i, u);
        }
        payload = GOSSIP_MIX_PS_HEADER + 8 * (size_t)n;
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
        mix_sent(m, out, m->txq_dest[k], m->txq_len[k]);
        m->txq_head = (k + 1) % GOSSIP_MIX_TXQ_MAX;
        m->txq_count--;
        got = 1;
    } else if (m->stream.active) {
        got = stream_poll(m, out);
    } else if (m->ar_recv) {
        got = mix_ar_poll(m, out);
    }
    check_done(m);
    return got;
}
