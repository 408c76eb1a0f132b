#include "gossip/shards.h"

#include <sodium.h>
#include <string.h>

#include "gossip/hashstate.h"
#include "model/shardfile.h"

#define ID GOSSIP_SHARD_ID_SIZE
/* A shard counts as lost when every fetch pass for LOST_BACKOFFS backoff
 * periods (10 s at the default 1 s) found every live member answering
 * NOT_HELD. While a cluster forms, views disagree for a few seconds and a
 * replica can be briefly out of every view's reach (dropped by a holder
 * whose view had others confirm it); 3 s still raised such false alarms in
 * the 4-agent fault test, 10 s did not. */
#define LOST_BACKOFFS 10u
#define HASH          32u

/* Per-shard flags. */
enum {
    F_HELD = 1,
    F_ASSIGNED = 2,
    F_PRIMARY = 4,
    F_FETCHING = 8,
    F_GUEST = 16, /* the guest shard (with F_ASSIGNED): see gossip_shards_train */
    F_LOST = 32,  /* assigned; the last fetch found no live member holding it */
};

typedef struct fetch {
    int active;
    uint32_t shard;
    uint32_t xfer;
    uint64_t src;
    uint32_t attempt; /* index of src in the source order */
    int have_manifest;
    int opened; /* store write open */
    uint64_t size;
    uint32_t chunk_bytes;
    uint32_t n_chunks;
    uint8_t *hashes;    /* chunks_max * 32 */
    uint32_t next;      /* chunks [0, next) verified and written */
    uint32_t requested; /* chunks [0, requested) asked for */
    int want_pending;
    uint32_t bad_chunks;
    uint32_t not_held;   /* sources of this pass that answered NOT_HELD */
    uint32_t other_fail; /* ... that failed otherwise (timeout, bad data, busy) */
    gossip_time_us deadline;
    gossip_hash_slot hs; /* gossip_hash_state(&hs) */
} fetch;

typedef struct serve {
    uint64_t peer;
    uint32_t shard;
    uint32_t xfer;
    uint8_t kind; /* MANIFEST, DATA, HAVE, or 0xFF = NACK */
    uint8_t reason;
    uint32_t next;
    uint32_t remaining;
    uint32_t chunk_bytes;
} serve;
#define SERVE_NACK 0xFFu

typedef struct probe {
    uint64_t dest;
    uint32_t shard;
} probe;

/* A member that said its store is full (a FULL notice), until `until`. */
typedef struct full_member {
    uint64_t id;
    gossip_time_us until;
} full_member;

typedef struct manifest_cache {
    int valid;
    uint32_t shard;
    uint64_t size;
    uint32_t n_chunks;
    uint8_t *hashes;
} manifest_cache;

struct gossip_shards {
    const gossip_env *env;
    gossip_shards_config cfg;
    uint8_t (*ids)[ID];
    uint32_t *order; /* catalog indices sorted by id, for lookups */
    uint32_t n_shards;
    uint32_t chunks_max;
    uint8_t *flags;
    uint8_t *confirmed;         /* probe answers: bit j = current holder j has it */
    gossip_time_us *lost_since; /* first of the all-NOT_HELD fetch passes in a row; 0 = none */
    gossip_time_us *retry_at;

    /* current and previous view with their placement */
    uint64_t epoch;
    uint32_t n, width;
    uint64_t *view_ids, *holders;
    uint32_t prev_n, prev_width;
    uint64_t *prev_ids, *prev_holders;

    fetch fetches[GOSSIP_SHARDS_FETCH_MAX];
    serve serves[GOSSIP_SHARDS_SERVE_MAX];
    uint32_t n_serves, serve_rr;
    probe probes[GOSSIP_SHARDS_PROBE_MAX];
    uint32_t n_probes;
    gossip_time_us probe_at;
    manifest_cache mcache[GOSSIP_SHARDS_MANIFEST_CACHE];
    uint32_t mcache_rr;

    int scan;                  /* look for shards to fetch */
    gossip_time_us full_until; /* store full: no fetch starts before this */
    /* A full store (see the header): full = a write failed for lack of
     * room and nothing was stored since; self_full = full while an assigned
     * shard is missing (then this agent hands its primaries over). */
    int full, self_full;
    gossip_time_us notice_at;    /* next round of FULL notices (while self_full) */
    uint32_t notice_s, notice_j; /* cursor of the round in progress */
    full_member full_members[GOSSIP_SHARDS_FULL_MEMBERS_MAX];
    uint32_t n_full_members;
    uint32_t scan_from;
    uint32_t next_xfer;
    uint8_t *frame;
    size_t frame_cap;
    uint8_t *scratch; /* chunk_bytes, for hashing at a source */
    gossip_shards_counters c;
};

void gossip_shards_config_default(gossip_shards_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    gossip_placement_config_default(&cfg->placement);
    cfg->chunk_bytes = GOSSIP_SHARDS_CHUNK_DEFAULT;
    cfg->shard_bytes_max = GOSSIP_SHARDS_SHARD_BYTES_DEFAULT;
    cfg->fetch_max = GOSSIP_SHARDS_FETCH_DEFAULT;
    cfg->window = GOSSIP_SHARDS_WINDOW_DEFAULT;
    cfg->timeout_us = 2000000;
    cfg->backoff_us = 1000000;
    cfg->probe_us = 1000000;
}

void gossip_shards_config_model_files(gossip_shards_config *cfg)
{
    cfg->n_skip = 2;
    cfg->skip[0] = (gossip_shards_range){0, MODEL_SHARD_DESCRIPTOR_OFFSET};
    cfg->skip[1] = (gossip_shards_range){
        MODEL_SHARD_DESCRIPTOR_OFFSET + MODEL_SHARD_DESCRIPTOR_SIZE,
        MODEL_SHARD_HEADER_SIZE - (MODEL_SHARD_DESCRIPTOR_OFFSET + MODEL_SHARD_DESCRIPTOR_SIZE)};
}

/* Feed bytes [off, off + len) of a shard to the content-address hash,
 * leaving out the configured skip ranges. */
static void hash_covered(const gossip_shards_config *cfg, crypto_generichash_state *hs,
                         uint64_t off, const uint8_t *p, size_t len)
{
    uint64_t pos = off, end = off + len;
    for (uint32_t k = 0; k < cfg->n_skip && pos < end; k++) {
        uint64_t s0 = cfg->skip[k].off, s1 = s0 + cfg->skip[k].len;
        if (s1 <= pos)
            continue;
        if (s0 >= end)
            break;
        if (s0 > pos)
            crypto_generichash_update(hs, p + (pos - off), (size_t)(s0 - pos));
        pos = s1 < end ? s1 : end;
    }
    if (pos < end)
        crypto_generichash_update(hs, p + (pos - off), (size_t)(end - pos));
}

/* ---- decoding ---------------------------------------------------------- */

int gossip_shard_msg_decode(uint8_t type, const uint8_t *p, size_t len, gossip_shard_msg *m)
{
    memset(m, 0, sizeof *m);
    m->type = type;
    gossip_reader r;
    gossip_reader_init(&r, p, len);
    switch (type) {
    case GOSSIP_MSG_SHARD_WANT:
        if (len != GOSSIP_SHARDS_WANT_SIZE)
            return len < GOSSIP_SHARDS_WANT_SIZE ? GOSSIP_ETRUNC : GOSSIP_EMALFORMED;
        m->id = gossip_r_view(&r, ID);
        m->xfer = gossip_r_u32(&r);
        m->kind = gossip_r_u8(&r);
        m->first = gossip_r_u32(&r);
        m->count = gossip_r_u16(&r);
        m->chunk_bytes = gossip_r_u32(&r);
        if (m->kind > GOSSIP_SHARD_FULL)
            return GOSSIP_EMALFORMED;
        if (m->kind == GOSSIP_SHARD_DATA) {
            if (m->count == 0 || m->chunk_bytes == 0)
                return GOSSIP_EMALFORMED;
            if (m->count > GOSSIP_SHARDS_WINDOW_MAX || m->chunk_bytes > GOSSIP_SHARDS_CHUNK_MAX ||
                m->first >= GOSSIP_SHARDS_CHUNKS_MAX)
                return GOSSIP_ETOOBIG;
        }
        return GOSSIP_OK;
    case GOSSIP_MSG_SHARD_NACK:
        if (len != GOSSIP_SHARDS_NACK_SIZE)
            return len < GOSSIP_SHARDS_NACK_SIZE ? GOSSIP_ETRUNC : GOSSIP_EMALFORMED;
        m->id = gossip_r_view(&r, ID);
        m->xfer = gossip_r_u32(&r);
        m->reason = gossip_r_u8(&r);
        if (m->reason < GOSSIP_SHARD_NOT_HELD || m->reason > GOSSIP_SHARD_BAD_REQUEST)
            return GOSSIP_EMALFORMED;
        return GOSSIP_OK;
    case GOSSIP_MSG_SHARD_CHUNK:
        if (len < GOSSIP_SHARDS_CHUNK_HDR_SIZE)
            return GOSSIP_ETRUNC;
        m->id = gossip_r_view(&r, ID);
        m->xfer = gossip_r_u32(&r);
        m->kind = gossip_r_u8(&r);
        if (m->kind == GOSSIP_SHARD_MANIFEST) {
            m->size = gossip_r_u64(&r);
            m->chunk_bytes = gossip_r_u32(&r);
            m->n_chunks = gossip_r_u32(&r);
            if (r.err)
                return GOSSIP_ETRUNC;
            if (m->n_chunks > GOSSIP_SHARDS_CHUNKS_MAX || m->chunk_bytes > GOSSIP_SHARDS_CHUNK_MAX)
                return GOSSIP_ETOOBIG;
            if (m->chunk_bytes == 0 ||
                m->n_chunks != (m->size + m->chunk_bytes - 1) / m->chunk_bytes)
                return GOSSIP_EMALFORMED;
            if (gossip_r_left(&r) != (size_t)m->n_chunks * HASH)
                return gossip_r_left(&r) < (size_t)m->n_chunks * HASH ? GOSSIP_ETRUNC
                                                                      : GOSSIP_EMALFORMED;
            m->hashes = gossip_r_view(&r, (size_t)m->n_chunks * HASH);
            return GOSSIP_OK;
        }
        if (m->kind == GOSSIP_SHARD_DATA) {
            m->index = gossip_r_u32(&r);
            m->len = gossip_r_u32(&r);
            if (r.err)
                return GOSSIP_ETRUNC;
            if (m->len > GOSSIP_SHARDS_CHUNK_MAX || m->index >= GOSSIP_SHARDS_CHUNKS_MAX)
                return GOSSIP_ETOOBIG;
            if (gossip_r_left(&r) != m->len)
                return gossip_r_left(&r) < m->len ? GOSSIP_ETRUNC : GOSSIP_EMALFORMED;
            m->data = gossip_r_view(&r, m->len);
            return GOSSIP_OK;
        }
        if (m->kind == GOSSIP_SHARD_HAVE)
            return gossip_r_left(&r) == 0 ? GOSSIP_OK : GOSSIP_EMALFORMED;
        return GOSSIP_EMALFORMED;
    default:
        return GOSSIP_ETYPE;
    }
}

/* ---- catalog index ------------------------------------------------------- */

static int id_less(const gossip_shards *sh, uint32_t a, uint32_t b)
{
    return memcmp(sh->ids[a], sh->ids[b], ID) < 0;
}

static void sift_down(gossip_shards *sh, uint32_t *v, uint32_t i, uint32_t n)
{
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= n)
            return;
        if (c + 1 < n && id_less(sh, v[c], v[c + 1]))
            c++;
        if (!id_less(sh, v[i], v[c]))
            return;
        uint32_t t = v[i];
        v[i] = v[c];
        v[c] = t;
        i = c;
    }
}

/* Heapsort of the catalog indices by id: in place, O(S log S), no
 * allocation. */
static void sort_order(gossip_shards *sh)
{
    uint32_t n = sh->n_shards, *v = sh->order;
    for (uint32_t i = 0; i < n; i++)
        v[i] = i;
    for (uint32_t i = n / 2; i-- > 0;)
        sift_down(sh, v, i, n);
    for (uint32_t end = n; end-- > 1;) {
        uint32_t t = v[0];
        v[0] = v[end];
        v[end] = t;
        sift_down(sh, v, 0, end);
    }
}

/* Catalog index of a shard id, or -1. */
static long shard_index(const gossip_shards *sh, const uint8_t *id)
{
    long lo = 0, hi = (long)sh->n_shards - 1;
    while (lo <= hi) {
        long mid = lo + (hi - lo) / 2;
        int c = memcmp(sh->ids[sh->order[mid]], id, ID);
        if (c == 0)
            return sh->order[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

/* ---- create / destroy --------------------------------------------------- */

static void quarantine_held(gossip_shards *sh, uint32_t s);
static void manifest_forget(gossip_shards *sh, uint32_t s);

/* 1 if stored shard s is within our bound and its bytes hash to its id. A
 * store that cannot read it is not a verdict on the bytes: kept (the serve
 * path counts the store error). */
static int stored_shard_ok(gossip_shards *sh, uint32_t s)
{
    const gossip_store *st = &sh->cfg.store;
    uint64_t size;
    if (st->ops->size(st->ctx, sh->ids[s], &size))
        return 1;
    if (size > sh->cfg.shard_bytes_max)
        return 0;
    crypto_generichash_state hs;
    crypto_generichash_init(&hs, NULL, 0, HASH);
    uint32_t cb = sh->cfg.chunk_bytes;
    for (uint64_t off = 0; off < size; off += cb) {
        uint32_t l = size - off < cb ? (uint32_t)(size - off) : cb;
        if (st->ops->read(st->ctx, sh->ids[s], off, sh->scratch, l))
            return 1;
        hash_covered(&sh->cfg, &hs, off, sh->scratch, l);
    }
    uint8_t digest[HASH];
    crypto_generichash_final(&hs, digest, HASH);
    return memcmp(digest, sh->ids[s], ID) == 0;
}

static int config_valid(const gossip_shards_config *cfg)
{
    if (!cfg || cfg->self == 0 || !cfg->ids || cfg->n_shards == 0 ||
        cfg->n_shards > GOSSIP_PLACEMENT_SHARDS_MAX || !cfg->store.ops)
        return 0;
    if (cfg->placement.r == 0 || cfg->placement.r > GOSSIP_PLACEMENT_R_MAX)
        return 0;
    if (cfg->chunk_bytes == 0 || cfg->chunk_bytes > GOSSIP_SHARDS_CHUNK_MAX)
        return 0;
    if (cfg->shard_bytes_max == 0 ||
        (cfg->shard_bytes_max + cfg->chunk_bytes - 1) / cfg->chunk_bytes > GOSSIP_SHARDS_CHUNKS_MAX)
        return 0;
    if (cfg->fetch_max == 0 || cfg->fetch_max > GOSSIP_SHARDS_FETCH_MAX)
        return 0;
    if (cfg->window == 0 || cfg->window > GOSSIP_SHARDS_WINDOW_MAX)
        return 0;
    if (cfg->timeout_us == 0 || cfg->backoff_us == 0 || cfg->probe_us == 0)
        return 0;
    if (cfg->n_skip > GOSSIP_SHARDS_SKIP_MAX)
        return 0;
    for (uint32_t k = 0; k < cfg->n_skip; k++) {
        const gossip_shards_range *r = &cfg->skip[k];
        if (r->len == 0 || r->off > UINT64_MAX - r->len)
            return 0;
        if (k > 0 && r->off < cfg->skip[k - 1].off + cfg->skip[k - 1].len)
            return 0;
    }
    return 1;
}

void gossip_shards_destroy(gossip_shards *sh)
{
    if (!sh)
        return;
    const gossip_env *env = sh->env;
    for (uint32_t i = 0; i < GOSSIP_SHARDS_FETCH_MAX; i++) {
        fetch *f = &sh->fetches[i];
        if (f->active && f->opened)
            sh->cfg.store.ops->abort(sh->cfg.store.ctx, sh->ids[f->shard]);
        gossip_free(env, f->hashes);
    }
    for (uint32_t i = 0; i < GOSSIP_SHARDS_MANIFEST_CACHE; i++)
        gossip_free(env, sh->mcache[i].hashes);
    gossip_free(env, sh->ids);
    gossip_free(env, sh->order);
    gossip_free(env, sh->flags);
    gossip_free(env, sh->confirmed);
    gossip_free(env, sh->lost_since);
    gossip_free(env, sh->retry_at);
    gossip_free(env, sh->view_ids);
    gossip_free(env, sh->holders);
    gossip_free(env, sh->prev_ids);
    gossip_free(env, sh->prev_holders);
    gossip_free(env, sh->frame);
    gossip_free(env, sh->scratch);
    gossip_free(env, sh);
}

int gossip_shards_create(gossip_shards **out, const gossip_env *env,
                         const gossip_shards_config *cfg)
{
    *out = NULL;
    if (!config_valid(cfg))
        return GOSSIP_EINVAL;
    gossip_shards *sh = gossip_calloc(env, 1, sizeof *sh);
    if (!sh)
        return GOSSIP_ENOMEM;
    sh->env = env;
    sh->cfg = *cfg;
    sh->n_shards = cfg->n_shards;
    sh->chunks_max = (uint32_t)((cfg->shard_bytes_max + cfg->chunk_bytes - 1) / cfg->chunk_bytes);
    size_t manifest = GOSSIP_SHARDS_MANIFEST_FIXED + (size_t)sh->chunks_max * HASH;
    size_t data = GOSSIP_SHARDS_DATA_FIXED + (size_t)cfg->chunk_bytes;
    sh->frame_cap = GOSSIP_HEADER_SIZE + (manifest > data ? manifest : data);
    sh->ids = gossip_alloc(env, (size_t)cfg->n_shards * ID);
    sh->order = gossip_alloc(env, (size_t)cfg->n_shards * sizeof *sh->order);
    sh->flags = gossip_calloc(env, cfg->n_shards, 1);
    sh->confirmed = gossip_calloc(env, cfg->n_shards, 1);
    sh->lost_since = gossip_calloc(env, cfg->n_shards, sizeof *sh->lost_since);
    sh->retry_at = gossip_calloc(env, cfg->n_shards, sizeof *sh->retry_at);
    sh->frame = gossip_alloc(env, sh->frame_cap);
    sh->scratch = gossip_alloc(env, cfg->chunk_bytes);
    if (!sh->ids || !sh->order || !sh->flags || !sh->confirmed || !sh->lost_since ||
        !sh->retry_at || !sh->frame || !sh->scratch)
        goto nomem;
    for (uint32_t i = 0; i < cfg->fetch_max; i++) {
        sh->fetches[i].hashes = gossip_alloc(env, (size_t)sh->chunks_max * HASH);
        if (!sh->fetches[i].hashes)
            goto nomem;
    }
    for (uint32_t i = 0; i < GOSSIP_SHARDS_MANIFEST_CACHE; i++) {
        sh->mcache[i].hashes = gossip_alloc(env, (size_t)sh->chunks_max * HASH);
        if (!sh->mcache[i].hashes)
            goto nomem;
    }
    memcpy(sh->ids, cfg->ids, (size_t)cfg->n_shards * ID);
    sh->cfg.ids = NULL; /* the copy is sh->ids */
    sort_order(sh);
    for (uint32_t i = 1; i < sh->n_shards; i++)
        if (memcmp(sh->ids[sh->order[i - 1]], sh->ids[sh->order[i]], ID) == 0) {
            gossip_shards_destroy(sh);
            return GOSSIP_EINVAL; /* a shard listed twice */
        }
    for (uint32_t s = 0; s < sh->n_shards; s++)
        if (cfg->store.ops->has(cfg->store.ctx, sh->ids[s]) == 1) {
            sh->flags[s] |= F_HELD;
            if (!stored_shard_ok(sh, s))
                quarantine_held(sh, s);
        }
    sh->next_xfer = (uint32_t)gossip_random(env);
    *out = sh;
    return GOSSIP_OK;
nomem:
    gossip_shards_destroy(sh);
    return GOSSIP_ENOMEM;
}

/* ---- helpers ------------------------------------------------------------- */

static int in_list(const uint64_t *v, uint32_t n, uint64_t x)
{
    for (uint32_t i = 0; i < n; i++)
        if (v[i] == x)
            return 1;
    return 0;
}

static int is_live(const gossip_shards *sh, uint64_t node)
{
    gossip_view v = {sh->epoch, sh->n, sh->view_ids};
    return sh->view_ids && gossip_placement_view_find(&v, node) >= 0;
}

/* The a-th source for shard s (see header), or 0 when the order is exhausted.
 * Group 1: previous holders still live; group 2: current holders; group 3:
 * every other live member from a per-shard offset. Never self. */
static uint64_t source_at(const gossip_shards *sh, uint32_t s, uint32_t a)
{
    const uint64_t self = sh->cfg.self;
    uint64_t listed[2 * GOSSIP_PLACEMENT_R_MAX];
    uint32_t nl = 0;
    if (sh->prev_holders)
        for (uint32_t j = 0; j < sh->prev_width; j++) {
            uint64_t x = sh->prev_holders[(size_t)s * sh->prev_width + j];
            if (x != self && is_live(sh, x) && !in_list(listed, nl, x))
                listed[nl++] = x;
        }
    if (sh->holders)
        for (uint32_t j = 0; j < sh->width; j++) {
            uint64_t x = sh->holders[(size_t)s * sh->width + j];
            if (x != self && !in_list(listed, nl, x))
                listed[nl++] = x;
        }
    if (a < nl)
        return listed[a];
    a -= nl;
    if (!sh->n)
        return 0;
    uint32_t off = gossip_get_u32(sh->ids[s] + 16) % sh->n;
    for (uint32_t i = 0; i < sh->n; i++) {
        uint64_t x = sh->view_ids[(off + i) % sh->n];
        if (x == self || in_list(listed, nl, x))
            continue;
        if (a-- == 0)
            return x;
    }
    return 0;
}

static uint32_t chunk_len(uint64_t size, uint32_t cb, uint32_t i)
{
    uint64_t off = (uint64_t)i * cb;
    uint64_t left = size - off;
    return left < cb ? (uint32_t)left : cb;
}

static void fetch_release(gossip_shards *sh, fetch *f, int abort_write)
{
    if (f->opened && abort_write)
        sh->cfg.store.ops->abort(sh->cfg.store.ctx, sh->ids[f->shard]);
    sh->flags[f->shard] &= (uint8_t)~F_FETCHING;
    f->active = 0;
    f->opened = 0;
    sh->scan = 1;
}

/* Discard the manifest and any written bytes; the next source starts over. */
static void fetch_reset(gossip_shards *sh, fetch *f)
{
    if (f->opened)
        sh->cfg.store.ops->abort(sh->cfg.store.ctx, sh->ids[f->shard]);
    f->opened = 0;
    f->have_manifest = 0;
    f->next = f->requested = 0;
    f->bad_chunks = 0;
}

/* Move fetch f to source number `attempt`; fail the fetch (back off) when
 * the source order is exhausted. */
static void fetch_source(gossip_shards *sh, fetch *f, uint32_t attempt, gossip_time_us now)
{
    uint64_t src = source_at(sh, f->shard, attempt);
    if (!src) {
        /* Every live member asked and each said NOT_HELD: nobody has it,
         * as far as this view goes (see LOST_BACKOFFS). */
        uint32_t s = f->shard;
        if (f->not_held && !f->other_fail) {
            if (!sh->lost_since[s])
                sh->lost_since[s] = now ? now : 1;
            if (now - sh->lost_since[s] >= LOST_BACKOFFS * sh->cfg.backoff_us &&
                !(sh->flags[s] & F_LOST)) {
                sh->flags[s] |= F_LOST;
                sh->c.lost++;
            }
        } else {
            sh->lost_since[s] = 0;
        }
        sh->c.fetch_failed++;
        sh->retry_at[f->shard] = now + sh->cfg.backoff_us;
        fetch_release(sh, f, 1);
        return;
    }
    f->attempt = attempt;
    f->src = src;
    f->xfer = sh->next_xfer++;
    f->requested = f->next;
    f->want_pending = 1;
    f->deadline = now + sh->cfg.timeout_us;
}

static void fetch_start(gossip_shards *sh, uint32_t s, gossip_time_us now)
{
    for (uint32_t i = 0; i < sh->cfg.fetch_max; i++) {
        fetch *f = &sh->fetches[i];
        if (f->active)
            continue;
        f->active = 1;
        f->shard = s;
        f->opened = 0;
        fetch_reset(sh, f);
        f->not_held = f->other_fail = 0;
        sh->flags[s] |= F_FETCHING;
        sh->c.fetch_started++;
        fetch_source(sh, f, 0, now);
        return;
    }
}

static uint32_t fetches_active(const gossip_shards *sh)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < sh->cfg.fetch_max; i++)
        k += sh->fetches[i].active != 0;
    return k;
}

/* ---- a full store: who trains what (see the header) ---------------------- */

static int member_full(const gossip_shards *sh, uint64_t id)
{
    if (id == sh->cfg.self)
        return sh->self_full;
    for (uint32_t i = 0; i < sh->n_full_members; i++)
        if (sh->full_members[i].id == id)
            return 1;
    return 0;
}

/* The slot of shard s's primary in its placement row: the first holder not
 * known to be full, or the placement primary (slot 0) when all are. */
static uint32_t primary_slot(const gossip_shards *sh, uint32_t s)
{
    const uint64_t *row = sh->holders + (size_t)s * sh->width;
    for (uint32_t j = 0; j < sh->width; j++)
        if (!member_full(sh, row[j]))
            return j;
    return 0;
}

/* Recompute F_PRIMARY (after a view, a notice, an expiry, or a change of
 * our own store's state). */
static void primaries_update(gossip_shards *sh)
{
    int missing = 0;
    for (uint32_t s = 0; s < sh->n_shards; s++) {
        missing |= (sh->flags[s] & (F_ASSIGNED | F_HELD)) == F_ASSIGNED;
        sh->flags[s] &= (uint8_t)~F_PRIMARY;
    }
    sh->self_full = sh->full && missing;
    if (!sh->holders)
        return;
    for (uint32_t s = 0; s < sh->n_shards; s++)
        if (sh->holders[(size_t)s * sh->width + primary_slot(sh, s)] == sh->cfg.self)
            sh->flags[s] |= F_PRIMARY;
}

/* A FULL notice from `from`: remember it as full for the TTL. */
static void on_full_notice(gossip_shards *sh, uint64_t from, gossip_time_us now)
{
    if (!is_live(sh, from)) {
        sh->c.stale++;
        return;
    }
    sh->c.full_notices++;
    gossip_time_us until = now + GOSSIP_SHARDS_FULL_TTL_US;
    uint32_t oldest = 0;
    for (uint32_t i = 0; i < sh->n_full_members; i++) {
        if (sh->full_members[i].id == from) {
            sh->full_members[i].until = until;
            return; /* already known: nothing changes */
        }
        if (sh->full_members[i].until < sh->full_members[oldest].until)
            oldest = i;
    }
    uint32_t at =
        sh->n_full_members < GOSSIP_SHARDS_FULL_MEMBERS_MAX ? sh->n_full_members++ : oldest;
    sh->full_members[at] = (full_member){from, until};
    primaries_update(sh);
}

/* Forget the full members not heard from for the TTL. */
static void full_expire(gossip_shards *sh, gossip_time_us now)
{
    int changed = 0;
    for (uint32_t i = 0; i < sh->n_full_members;)
        if (sh->full_members[i].until <= now) {
            sh->full_members[i] = sh->full_members[--sh->n_full_members];
            changed = 1;
        } else {
            i++;
        }
    if (changed)
        primaries_update(sh);
}

/* A store operation of a fetch failed with rc. No room (GOSSIP_EFULL):
 * every fetch in flight would fail the same way, so all are aborted (their
 * partial writes freed) and none starts for GOSSIP_SHARDS_FULL_BACKOFF_US;
 * bytes that cannot be stored are not fetched. */
static void store_failed(gossip_shards *sh, int rc, gossip_time_us now)
{
    if (rc != GOSSIP_EFULL)
        return;
    sh->c.store_full++;
    sh->full_until = now + GOSSIP_SHARDS_FULL_BACKOFF_US;
    if (!sh->full) {
        sh->full = 1;
        sh->notice_at = now;
        sh->notice_s = 0;
        sh->notice_j = 1;
    }
    for (uint32_t i = 0; i < sh->cfg.fetch_max; i++)
        if (sh->fetches[i].active) {
            sh->c.cancelled++;
            fetch_release(sh, &sh->fetches[i], 1);
        }
    primaries_update(sh); /* hand our primaries over */
}

static void pump(gossip_shards *sh, gossip_time_us now)
{
    if (!sh->scan || !sh->holders)
        return;
    if (now < sh->full_until)
        return; /* the store is full: tick rescans when the pause ends */
    uint32_t active = fetches_active(sh);
    uint32_t s = sh->scan_from;
    int waiting = 0;
    for (uint32_t i = 0; i < sh->n_shards && active < sh->cfg.fetch_max; i++) {
        uint8_t fl = sh->flags[s];
        if ((fl & F_ASSIGNED) && !(fl & (F_HELD | F_FETCHING))) {
            if (sh->retry_at[s] <= now) {
                fetch_start(sh, s, now);
                active = fetches_active(sh);
                sh->scan_from = (s + 1) % sh->n_shards;
            } else {
                waiting = 1;
            }
        }
        s = (s + 1) % sh->n_shards;
    }
    /* Scan again only when a shard waits for its backoff (tick sets scan
     * when one expires) and a slot is free; a completion sets scan too. */
    sh->scan = waiting && active < sh->cfg.fetch_max;
}

/* ---- views ------------------------------------------------------------------ */

/* The view makes this agent a holder of nothing: take a guest shard to
 * train on (see gossip_shards_train), the held copy with the highest
 * rendezvous weight for self, else the catalog shard with the highest
 * weight. Flagged ASSIGNED, so the replicator fetches it and the drop policy
 * keeps it; the next view recomputes it. */
static void guest_choose(gossip_shards *sh)
{
    uint32_t best = UINT32_MAX;
    uint64_t best_w = 0;
    int best_held = 0;
    for (uint32_t s = 0; s < sh->n_shards; s++) {
        int held = (sh->flags[s] & F_HELD) != 0;
        uint64_t w = gossip_placement_weight(sh->ids[s], sh->cfg.self);
        if (best == UINT32_MAX || held > best_held || (held == best_held && w > best_w)) {
            best = s;
            best_w = w;
            best_held = held;
        }
    }
    sh->flags[best] |= (uint8_t)(F_ASSIGNED | F_GUEST);
}

int gossip_shards_set_view(gossip_shards *sh, const gossip_view *view, gossip_time_us now)
{
    if (!view || view->n == 0)
        return GOSSIP_EINVAL;
    if (sh->view_ids && view->epoch <= sh->epoch)
        return GOSSIP_ESTALE;
    uint32_t width = gossip_placement_width(sh->cfg.placement.r, view->n);
    uint64_t *ids = gossip_alloc(sh->env, (size_t)view->n * sizeof *ids);
    uint64_t *holders = gossip_alloc(sh->env, (size_t)sh->n_shards * width * sizeof *holders);
    if (!ids || !holders) {
        gossip_free(sh->env, ids);
        gossip_free(sh->env, holders);
        return GOSSIP_ENOMEM;
    }
    int rc = gossip_placement_compute(sh->env, &sh->cfg.placement, (const uint8_t(*)[ID])sh->ids,
                                      sh->n_shards, view, holders, NULL);
    if (rc) {
        gossip_free(sh->env, ids);
        gossip_free(sh->env, holders);
        return rc;
    }
    memcpy(ids, view->ids, (size_t)view->n * sizeof *ids);
    gossip_free(sh->env, sh->prev_ids);
    gossip_free(sh->env, sh->prev_holders);
    sh->prev_ids = sh->view_ids;
    sh->prev_holders = sh->holders;
    sh->prev_n = sh->n;
    sh->prev_width = sh->width;
    sh->view_ids = ids;
    sh->holders = holders;
    sh->n = view->n;
    sh->width = width;
    sh->epoch = view->epoch;
    sh->c.views++;

    int assigned = 0;
    for (uint32_t s = 0; s < sh->n_shards; s++) {
        uint8_t fl = sh->flags[s] & (uint8_t) ~(F_ASSIGNED | F_PRIMARY | F_GUEST);
        const uint64_t *row = holders + (size_t)s * width;
        for (uint32_t j = 0; j < width; j++)
            if (row[j] == sh->cfg.self)
                fl |= F_ASSIGNED;
        assigned |= (fl & F_ASSIGNED) != 0;
        if (!(fl & F_ASSIGNED)) {
            fl &= (uint8_t)~F_LOST; /* not ours to report any more */
            sh->lost_since[s] = 0;
        }
        sh->flags[s] = fl;
        sh->confirmed[s] = 0;
        sh->retry_at[s] = 0; /* a new view is a new chance for every shard */
    }
    if (!assigned)
        guest_choose(sh);
    primaries_update(sh);
    sh->notice_at = now; /* tell the holders of the new rows at once */
    sh->notice_s = 0;
    sh->notice_j = 1;
    for (uint32_t i = 0; i < sh->cfg.fetch_max; i++) {
        fetch *f = &sh->fetches[i];
        if (!f->active)
            continue;
        if (!(sh->flags[f->shard] & F_ASSIGNED)) {
            sh->c.cancelled++;
            fetch_release(sh, f, 1);
        } else if (!is_live(sh, f->src)) {
            fetch_source(sh, f, 0, now);
        } else {
            f->attempt = 0; /* the source order restarts in the new view */
            f->not_held = f->other_fail = 0;
        }
    }
    sh->n_probes = 0;
    sh->probe_at = now + sh->cfg.probe_us;
    sh->scan = 1;
    pump(sh, now);
    return GOSSIP_OK;
}

/* ---- serving ------------------------------------------------------------ */

static int serve_push(gossip_shards *sh, const serve *e)
{
    /* One peer may hold at most GOSSIP_SHARDS_FETCH_MAX entries (one per
     * fetch it can run), so a single peer cannot fill the queue. */
    uint32_t mine = 0;
    for (uint32_t i = 0; i < sh->n_serves; i++)
        mine += sh->serves[i].peer == e->peer;
    if (sh->n_serves >= GOSSIP_SHARDS_SERVE_MAX || mine >= GOSSIP_SHARDS_FETCH_MAX) {
        sh->c.serve_dropped++;
        return GOSSIP_EFULL;
    }
    sh->serves[sh->n_serves++] = *e;
    return GOSSIP_OK;
}

static void on_want(gossip_shards *sh, uint64_t from, const gossip_shard_msg *m, gossip_time_us now)
{
    if (m->kind == GOSSIP_SHARD_FULL) {
        on_full_notice(sh, from, now);
        return;
    }
    long s = shard_index(sh, m->id);
    serve e = {.peer = from, .xfer = m->xfer, .kind = m->kind};
    if (s < 0) {
        /* Not in our catalog (another data set, or garbage): no answer. */
        sh->c.stale++;
        return;
    }
    e.shard = (uint32_t)s;
    int held = (sh->flags[s] & F_HELD) != 0;
    if (!held) {
        e.kind = SERVE_NACK;
        e.reason = GOSSIP_SHARD_NOT_HELD;
    } else if (m->kind == GOSSIP_SHARD_DATA) {
        if (m->chunk_bytes > sh->cfg.chunk_bytes) {
            e.kind = SERVE_NACK;
            e.reason = GOSSIP_SHARD_BAD_REQUEST;
        } else {
            e.next = m->first;
            e.remaining = m->count;
            e.chunk_bytes = m->chunk_bytes;
        }
    }
    /* When the queue is full the request is dropped (counted); the fetcher
     * times out and moves to another source. */
    (void)serve_push(sh, &e);
}

/* Take held shard s out of the store (its bytes do not match its id) and
 * make it wanted again. */
static void quarantine_held(gossip_shards *sh, uint32_t s)
{
    const gossip_store *st = &sh->cfg.store;
    int rc = st->ops->quarantine ? st->ops->quarantine(st->ctx, sh->ids[s])
                                 : st->ops->drop(st->ctx, sh->ids[s]);
    if (rc)
        sh->c.store_errors++;
    sh->flags[s] &= (uint8_t)~F_HELD;
    manifest_forget(sh, s);
    sh->retry_at[s] = 0;
    sh->scan = 1;
    sh->c.quarantined++;
}

/* Manifest of shard s into the cache; returns the entry or NULL (store
 * error or shard above our bound; *bad = 1 when the bytes did not match the
 * id: the shard was quarantined). Reading every byte anyway, it checks the
 * content address, so a shard damaged at rest is never served. */
static manifest_cache *manifest_get(gossip_shards *sh, uint32_t s, int *bad)
{
    *bad = 0;
    for (uint32_t i = 0; i < GOSSIP_SHARDS_MANIFEST_CACHE; i++)
        if (sh->mcache[i].valid && sh->mcache[i].shard == s)
            return &sh->mcache[i];
    const gossip_store *st = &sh->cfg.store;
    uint64_t size;
    if (st->ops->size(st->ctx, sh->ids[s], &size)) {
        sh->c.store_errors++;
        return NULL;
    }
    uint32_t cb = sh->cfg.chunk_bytes;
    uint64_t n_chunks = (size + cb - 1) / cb;
    if (n_chunks > sh->chunks_max)
        return NULL;
    manifest_cache *mc = &sh->mcache[sh->mcache_rr++ % GOSSIP_SHARDS_MANIFEST_CACHE];
    mc->valid = 0;
    crypto_generichash_state hs;
    crypto_generichash_init(&hs, NULL, 0, HASH);
    for (uint32_t i = 0; i < n_chunks; i++) {
        uint32_t l = chunk_len(size, cb, i);
        if (st->ops->read(st->ctx, sh->ids[s], (uint64_t)i * cb, sh->scratch, l)) {
            sh->c.store_errors++;
            return NULL;
        }
        crypto_generichash(mc->hashes + (size_t)i * HASH, HASH, sh->scratch, l, NULL, 0);
        hash_covered(&sh->cfg, &hs, (uint64_t)i * cb, sh->scratch, l);
    }
    uint8_t digest[HASH];
    crypto_generichash_final(&hs, digest, HASH);
    if (memcmp(digest, sh->ids[s], ID) != 0) {
        quarantine_held(sh, s);
        *bad = 1;
        return NULL;
    }
    mc->valid = 1;
    mc->shard = s;
    mc->size = size;
    mc->n_chunks = (uint32_t)n_chunks;
    return mc;
}

static void manifest_forget(gossip_shards *sh, uint32_t s)
{
    for (uint32_t i = 0; i < GOSSIP_SHARDS_MANIFEST_CACHE; i++)
        if (sh->mcache[i].shard == s)
            sh->mcache[i].valid = 0;
}

static void frame_header(gossip_shards *sh, uint8_t type, size_t payload_len)
{
    gossip_header h = {.type = type,
                       .payload_len = (uint32_t)payload_len,
                       .sender = sh->cfg.self,
                       .epoch = sh->epoch,
                       .round = 0};
    gossip_header_encode(&h, sh->frame);
}

static size_t build_nack(gossip_shards *sh, uint32_t s, uint32_t xfer, uint8_t reason)
{
    gossip_writer w;
    gossip_writer_init(&w, sh->frame + GOSSIP_HEADER_SIZE, sh->frame_cap - GOSSIP_HEADER_SIZE);
    gossip_w_bytes(&w, sh->ids[s], ID);
    gossip_w_u32(&w, xfer);
    gossip_w_u8(&w, reason);
    frame_header(sh, GOSSIP_MSG_SHARD_NACK, w.len);
    sh->c.served_nacks++;
    return GOSSIP_HEADER_SIZE + w.len;
}

/* Build the next frame of serve entry e; returns its length and whether the
 * entry is finished. */
static size_t build_serve(gossip_shards *sh, serve *e, int *done)
{
    *done = 1;
    uint32_t s = e->shard;
    if (e->kind == SERVE_NACK)
        return build_nack(sh, s, e->xfer, e->reason);
    if (!(sh->flags[s] & F_HELD))
        return build_nack(sh, s, e->xfer, GOSSIP_SHARD_NOT_HELD);
    gossip_writer w;
    gossip_writer_init(&w, sh->frame + GOSSIP_HEADER_SIZE, sh->frame_cap - GOSSIP_HEADER_SIZE);
    gossip_w_bytes(&w, sh->ids[s], ID);
    gossip_w_u32(&w, e->xfer);
    if (e->kind == GOSSIP_SHARD_PROBE) {
        gossip_w_u8(&w, GOSSIP_SHARD_HAVE);
    } else if (e->kind == GOSSIP_SHARD_MANIFEST) {
        int bad;
        manifest_cache *mc = manifest_get(sh, s, &bad);
        if (!mc)
            return build_nack(sh, s, e->xfer,
                              bad ? GOSSIP_SHARD_NOT_HELD : GOSSIP_SHARD_BAD_REQUEST);
        gossip_w_u8(&w, GOSSIP_SHARD_MANIFEST);
        gossip_w_u64(&w, mc->size);
        gossip_w_u32(&w, sh->cfg.chunk_bytes);
        gossip_w_u32(&w, mc->n_chunks);
        gossip_w_bytes(&w, mc->hashes, (size_t)mc->n_chunks * HASH);
        sh->c.served_manifests++;
    } else {
        const gossip_store *st = &sh->cfg.store;
        uint64_t size;
        if (st->ops->size(st->ctx, sh->ids[s], &size)) {
            sh->c.store_errors++;
            return build_nack(sh, s, e->xfer, GOSSIP_SHARD_NOT_HELD);
        }
        uint64_t off = (uint64_t)e->next * e->chunk_bytes;
        if (off >= size)
            return build_nack(sh, s, e->xfer, GOSSIP_SHARD_BAD_REQUEST);
        uint32_t l = chunk_len(size, e->chunk_bytes, e->next);
        gossip_w_u8(&w, GOSSIP_SHARD_DATA);
        gossip_w_u32(&w, e->next);
        gossip_w_u32(&w, l);
        uint8_t *dst = gossip_w_reserve(&w, l);
        if (!dst || st->ops->read(st->ctx, sh->ids[s], off, dst, l)) {
            sh->c.store_errors++;
            return build_nack(sh, s, e->xfer, GOSSIP_SHARD_NOT_HELD);
        }
        sh->c.served_chunks++;
        e->next++;
        e->remaining--;
        *done = e->remaining == 0 || (uint64_t)e->next * e->chunk_bytes >= size;
    }
    frame_header(sh, GOSSIP_MSG_SHARD_CHUNK, w.len);
    return GOSSIP_HEADER_SIZE + w.len;
}

/* ---- fetching ------------------------------------------------------------ */

static fetch *fetch_for(gossip_shards *sh, const gossip_shard_msg *m, uint64_t from)
{
    for (uint32_t i = 0; i < sh->cfg.fetch_max; i++) {
        fetch *f = &sh->fetches[i];
        if (f->active && f->xfer == m->xfer && f->src == from &&
            memcmp(sh->ids[f->shard], m->id, ID) == 0)
            return f;
    }
    return NULL;
}

static void fetch_next_source(gossip_shards *sh, fetch *f, gossip_time_us now)
{
    fetch_source(sh, f, f->attempt + 1, now);
}

static void fetch_finish(gossip_shards *sh, fetch *f, gossip_time_us now)
{
    uint8_t digest[HASH];
    crypto_generichash_final(gossip_hash_state(&f->hs), digest, HASH);
    const gossip_store *st = &sh->cfg.store;
    if (memcmp(digest, sh->ids[f->shard], ID) != 0) {
        sh->c.whole_bad++;
        f->other_fail++;
        fetch_reset(sh, f);
        fetch_next_source(sh, f, now);
        return;
    }
    int crc = st->ops->commit(st->ctx, sh->ids[f->shard]);
    if (crc) {
        sh->c.store_errors++;
        sh->retry_at[f->shard] = now + sh->cfg.backoff_us;
        fetch_release(sh, f, 1);
        store_failed(sh, crc, now);
        return;
    }
    f->opened = 0;
    sh->flags[f->shard] |= F_HELD;
    sh->flags[f->shard] &= (uint8_t)~F_LOST;
    sh->lost_since[f->shard] = 0;
    sh->c.fetched++;
    fetch_release(sh, f, 0);
    if (sh->full) {
        sh->full = 0; /* there was room after all: take our primaries back */
        primaries_update(sh);
    }
}

static void on_manifest(gossip_shards *sh, fetch *f, const gossip_shard_msg *m, gossip_time_us now)
{
    if (f->have_manifest) {
        sh->c.stale++;
        return;
    }
    if (m->size > sh->cfg.shard_bytes_max || m->n_chunks > sh->chunks_max ||
        m->chunk_bytes > GOSSIP_SHARDS_CHUNK_MAX) {
        sh->c.manifests_bad++;
        fetch_next_source(sh, f, now);
        return;
    }
    const gossip_store *st = &sh->cfg.store;
    int rc = st->ops->begin(st->ctx, sh->ids[f->shard], m->size);
    if (rc) {
        sh->c.store_errors++;
        sh->retry_at[f->shard] = now + sh->cfg.backoff_us;
        fetch_release(sh, f, 0);
        store_failed(sh, rc, now);
        return;
    }
    f->opened = 1;
    f->have_manifest = 1;
    f->size = m->size;
    f->chunk_bytes = m->chunk_bytes;
    f->n_chunks = m->n_chunks;
    memcpy(f->hashes, m->hashes, (size_t)m->n_chunks * HASH);
    f->next = f->requested = 0;
    crypto_generichash_init(gossip_hash_state(&f->hs), NULL, 0, HASH);
    f->deadline = now + sh->cfg.timeout_us;
    if (f->n_chunks == 0)
        fetch_finish(sh, f, now);
    else
        f->want_pending = 1;
}

static void on_data(gossip_shards *sh, fetch *f, const gossip_shard_msg *m, gossip_time_us now)
{
    if (!f->have_manifest || m->index != f->next) {
        sh->c.out_of_order++;
        return;
    }
    uint32_t expect = chunk_len(f->size, f->chunk_bytes, m->index);
    uint8_t h[HASH];
    crypto_generichash(h, HASH, m->data, m->len, NULL, 0);
    if (m->len != expect || memcmp(h, f->hashes + (size_t)m->index * HASH, HASH) != 0) {
        sh->c.chunks_bad++;
        f->other_fail++;
        if (++f->bad_chunks > GOSSIP_SHARDS_BAD_CHUNKS_MAX)
            fetch_reset(sh, f);
        fetch_next_source(sh, f, now);
        return;
    }
    const gossip_store *st = &sh->cfg.store;
    int wrc = st->ops->write(st->ctx, sh->ids[f->shard], (uint64_t)m->index * f->chunk_bytes,
                             m->data, m->len);
    if (wrc) {
        sh->c.store_errors++;
        sh->retry_at[f->shard] = now + sh->cfg.backoff_us;
        fetch_release(sh, f, 1);
        store_failed(sh, wrc, now);
        return;
    }
    hash_covered(&sh->cfg, gossip_hash_state(&f->hs), (uint64_t)m->index * f->chunk_bytes, m->data,
                 m->len);
    sh->c.chunks_ok++;
    f->next++;
    f->deadline = now + sh->cfg.timeout_us;
    if (f->next == f->n_chunks) {
        fetch_finish(sh, f, now);
        return;
    }
    /* Refill the window when half of it has drained. */
    if (f->requested < f->n_chunks && f->requested - f->next <= sh->cfg.window / 2)
        f->want_pending = 1;
}

static void on_have(gossip_shards *sh, uint64_t from, const gossip_shard_msg *m)
{
    long s = shard_index(sh, m->id);
    if (s < 0 || !sh->holders) {
        sh->c.stale++;
        return;
    }
    const uint64_t *row = sh->holders + (size_t)s * sh->width;
    for (uint32_t j = 0; j < sh->width; j++)
        if (row[j] == from)
            sh->confirmed[s] |= (uint8_t)(1u << j);
}

int gossip_shards_recv(gossip_shards *sh, uint64_t from, const gossip_header *h,
                       const uint8_t *payload, size_t len, gossip_time_us now)
{
    gossip_shard_msg m;
    int rc = gossip_shard_msg_decode(h->type, payload, len, &m);
    if (rc) {
        sh->c.rejected++;
        return rc;
    }
    if (from == 0 || from == sh->cfg.self) {
        sh->c.rejected++;
        return GOSSIP_EMALFORMED;
    }
    if (m.type == GOSSIP_MSG_SHARD_WANT) {
        on_want(sh, from, &m, now);
        return GOSSIP_OK;
    }
    if (m.type == GOSSIP_MSG_SHARD_CHUNK && m.kind == GOSSIP_SHARD_HAVE) {
        on_have(sh, from, &m);
        return GOSSIP_OK;
    }
    fetch *f = fetch_for(sh, &m, from);
    if (!f) {
        /* A NACK to a probe, or an answer for an older request. */
        sh->c.stale++;
        return GOSSIP_OK;
    }
    if (m.type == GOSSIP_MSG_SHARD_NACK) {
        sh->c.nacks++;
        if (m.reason == GOSSIP_SHARD_NOT_HELD)
            f->not_held++;
        else
            f->other_fail++;
        fetch_next_source(sh, f, now);
    } else if (m.kind == GOSSIP_SHARD_MANIFEST) {
        on_manifest(sh, f, &m, now);
    } else {
        on_data(sh, f, &m, now);
    }
    pump(sh, now);
    return GOSSIP_OK;
}

/* ---- timers --------------------------------------------------------------- */

/* Queue probes for surplus shards: held, not assigned, not all confirmed. */
static void probes_fill(gossip_shards *sh)
{
    for (uint32_t s = 0; s < sh->n_shards && sh->n_probes < GOSSIP_SHARDS_PROBE_MAX; s++) {
        uint8_t fl = sh->flags[s];
        if (!(fl & F_HELD) || (fl & F_ASSIGNED))
            continue;
        const uint64_t *row = sh->holders + (size_t)s * sh->width;
        for (uint32_t j = 0; j < sh->width && sh->n_probes < GOSSIP_SHARDS_PROBE_MAX; j++)
            if (!(sh->confirmed[s] & (1u << j)))
                sh->probes[sh->n_probes++] = (probe){row[j], s};
    }
}

/* Drop surplus shards every current holder has confirmed. */
static void drop_confirmed(gossip_shards *sh)
{
    const gossip_store *st = &sh->cfg.store;
    uint8_t all = (uint8_t)((1u << sh->width) - 1u);
    for (uint32_t s = 0; s < sh->n_shards; s++) {
        uint8_t fl = sh->flags[s];
        if (!(fl & F_HELD) || (fl & F_ASSIGNED) || sh->confirmed[s] != all)
            continue;
        if (st->ops->drop(st->ctx, sh->ids[s]))
            sh->c.store_errors++;
        sh->flags[s] &= (uint8_t)~F_HELD;
        manifest_forget(sh, s);
        sh->c.dropped++;
    }
}

int gossip_shards_tick(gossip_shards *sh, gossip_time_us now)
{
    for (uint32_t i = 0; i < sh->cfg.fetch_max; i++) {
        fetch *f = &sh->fetches[i];
        if (f->active && f->deadline <= now) {
            sh->c.timeouts++;
            f->other_fail++;
            fetch_next_source(sh, f, now);
        }
    }
    for (uint32_t s = 0; s < sh->n_shards; s++)
        if (sh->retry_at[s] && sh->retry_at[s] <= now) {
            sh->retry_at[s] = 0;
            sh->scan = 1;
        }
    if (sh->full_until && sh->full_until <= now) {
        sh->full_until = 0;
        sh->scan = 1;
    }
    full_expire(sh, now);
    if (sh->holders && sh->probe_at <= now) {
        drop_confirmed(sh);
        if (sh->n_probes == 0)
            probes_fill(sh);
        sh->probe_at = now + sh->cfg.probe_us;
    }
    pump(sh, now);
    return GOSSIP_OK;
}

gossip_time_us gossip_shards_deadline(const gossip_shards *sh)
{
    gossip_time_us d = GOSSIP_TIME_NEVER;
    for (uint32_t i = 0; i < sh->cfg.fetch_max; i++)
        if (sh->fetches[i].active && sh->fetches[i].deadline < d)
            d = sh->fetches[i].deadline;
    for (uint32_t s = 0; s < sh->n_shards; s++)
        if (sh->retry_at[s] && sh->retry_at[s] < d)
            d = sh->retry_at[s];
    if (sh->full_until && sh->full_until < d)
        d = sh->full_until;
    for (uint32_t i = 0; i < sh->n_full_members; i++)
        if (sh->full_members[i].until < d)
            d = sh->full_members[i].until;
    if (sh->self_full && sh->holders && sh->notice_at < d)
        d = sh->notice_at;
    if (sh->holders) {
        /* Probe only while some surplus shard exists. */
        for (uint32_t s = 0; s < sh->n_shards; s++)
            if ((sh->flags[s] & F_HELD) && !(sh->flags[s] & F_ASSIGNED)) {
                if (sh->probe_at < d)
                    d = sh->probe_at;
                break;
            }
    }
    return d;
}

/* ---- sending ------------------------------------------------------------------ */

static size_t build_want(gossip_shards *sh, fetch *f)
{
    gossip_writer w;
    gossip_writer_init(&w, sh->frame + GOSSIP_HEADER_SIZE, sh->frame_cap - GOSSIP_HEADER_SIZE);
    gossip_w_bytes(&w, sh->ids[f->shard], ID);
    gossip_w_u32(&w, f->xfer);
    if (!f->have_manifest) {
        gossip_w_u8(&w, GOSSIP_SHARD_MANIFEST);
        gossip_w_u32(&w, 0);
        gossip_w_u16(&w, 0);
        gossip_w_u32(&w, 0);
    } else {
        uint32_t count = f->next + sh->cfg.window - f->requested;
        if (f->requested + count > f->n_chunks)
            count = f->n_chunks - f->requested;
        gossip_w_u8(&w, GOSSIP_SHARD_DATA);
        gossip_w_u32(&w, f->requested);
        gossip_w_u16(&w, (uint16_t)count);
        gossip_w_u32(&w, f->chunk_bytes);
        f->requested += count;
    }
    frame_header(sh, GOSSIP_MSG_SHARD_WANT, w.len);
    return GOSSIP_HEADER_SIZE + w.len;
}

static size_t build_probe(gossip_shards *sh, const probe *p)
{
    gossip_writer w;
    gossip_writer_init(&w, sh->frame + GOSSIP_HEADER_SIZE, sh->frame_cap - GOSSIP_HEADER_SIZE);
    gossip_w_bytes(&w, sh->ids[p->shard], ID);
    gossip_w_u32(&w, 0);
    gossip_w_u8(&w, GOSSIP_SHARD_PROBE);
    gossip_w_u32(&w, 0);
    gossip_w_u16(&w, 0);
    gossip_w_u32(&w, 0);
    frame_header(sh, GOSSIP_MSG_SHARD_WANT, w.len);
    sh->c.probes_sent++;
    return GOSSIP_HEADER_SIZE + w.len;
}

static size_t build_full_notice(gossip_shards *sh)
{
    gossip_writer w;
    gossip_writer_init(&w, sh->frame + GOSSIP_HEADER_SIZE, sh->frame_cap - GOSSIP_HEADER_SIZE);
    static const uint8_t zero[ID];
    gossip_w_bytes(&w, zero, ID);
    gossip_w_u32(&w, 0);
    gossip_w_u8(&w, GOSSIP_SHARD_FULL);
    gossip_w_u32(&w, 0);
    gossip_w_u16(&w, 0);
    gossip_w_u32(&w, 0);
    frame_header(sh, GOSSIP_MSG_SHARD_WANT, w.len);
    sh->c.full_notices_sent++;
    return GOSSIP_HEADER_SIZE + w.len;
}

/* The next destination of the FULL notice round in progress: the other
 * holders of each shard whose placement primary is this agent (duplicates
 * are harmless: a notice is idempotent). 0 when the round is over. */
static uint64_t notice_next(gossip_shards *sh)
{
    for (; sh->notice_s < sh->n_shards; sh->notice_s++, sh->notice_j = 1) {
        const uint64_t *row = sh->holders + (size_t)sh->notice_s * sh->width;
        if (row[0] != sh->cfg.self)
            continue;
        while (sh->notice_j < sh->width) {
            uint64_t dest = row[sh->notice_j++];
            if (dest != sh->cfg.self)
                return dest;
        }
    }
    return 0;
}

int gossip_shards_poll_send(gossip_shards *sh, gossip_send *out, gossip_time_us now)
{
    pump(sh, now);
    out->dest_addr = NULL;
    out->frame = sh->frame;
    /* Requests first: they are small and keep the pipes full. */
    for (uint32_t i = 0; i < sh->cfg.fetch_max; i++) {
        fetch *f = &sh->fetches[i];
        if (f->active && f->want_pending) {
            f->want_pending = 0;
            out->dest = f->src;
            out->len = build_want(sh, f);
            return 1;
        }
    }
    if (sh->n_probes) {
        probe p = sh->probes[--sh->n_probes];
        if (p.shard < sh->n_shards && is_live(sh, p.dest)) {
            out->dest = p.dest;
            out->len = build_probe(sh, &p);
            return 1;
        }
    }
    if (sh->self_full && sh->holders && sh->notice_at <= now) {
        uint64_t dest = notice_next(sh);
        if (dest) {
            out->dest = dest;
            out->len = build_full_notice(sh);
            return 1;
        }
        sh->notice_s = 0;
        sh->notice_j = 1;
        sh->notice_at = now + GOSSIP_SHARDS_FULL_NOTICE_US;
    }
    while (sh->n_serves) {
        uint32_t i = sh->serve_rr % sh->n_serves;
        serve *e = &sh->serves[i];
        int done;
        out->dest = e->peer;
        out->len = build_serve(sh, e, &done);
        if (done) {
            sh->serves[i] = sh->serves[--sh->n_serves];
        } else {
            sh->serve_rr = i + 1;
        }
        return 1;
    }
    return 0;
}

/* ---- queries ---------------------------------------------------------------- */

uint32_t gossip_shards_primary(const gossip_shards *sh, uint32_t *out, uint32_t cap)
{
    uint32_t k = 0;
    for (uint32_t s = 0; s < sh->n_shards; s++)
        if ((sh->flags[s] & (F_PRIMARY | F_HELD)) == (F_PRIMARY | F_HELD)) {
            if (k < cap)
                out[k] = s;
            k++;
        }
    return k;
}

uint32_t gossip_shards_primary_pending(const gossip_shards *sh)
{
    uint32_t k = 0;
    for (uint32_t s = 0; s < sh->n_shards; s++)
        k += (sh->flags[s] & (F_PRIMARY | F_HELD)) == F_PRIMARY;
    return k;
}

/* Catalog indices of the shards whose flags masked by `mask` equal `want`. */
static uint32_t list_flags(const gossip_shards *sh, uint8_t mask, uint8_t want, uint32_t *out,
                           uint32_t cap)
{
    uint32_t k = 0;
    for (uint32_t s = 0; s < sh->n_shards; s++)
        if ((sh->flags[s] & mask) == want) {
            if (k < cap)
                out[k] = s;
            k++;
        }
    return k;
}

uint32_t gossip_shards_train(const gossip_shards *sh, uint32_t *out, uint32_t cap,
                             gossip_shards_train_info *info)
{
    const uint8_t ph = F_PRIMARY | F_HELD, ah = F_ASSIGNED | F_HELD;
    uint32_t held_primary = list_flags(sh, ph, ph, NULL, 0);
    info->primary = held_primary + gossip_shards_primary_pending(sh);
    info->pending = info->primary - held_primary;
    if (!sh->holders)
        info->reason = GOSSIP_TRAIN_NO_VIEW;
    else if (!info->primary)
        info->reason = GOSSIP_TRAIN_NO_PRIMARY;
    else
        info->reason = info->pending ? GOSSIP_TRAIN_PENDING : GOSSIP_TRAIN_ALL_HELD;
    uint32_t k;
    if (held_primary) {
        info->source = GOSSIP_TRAIN_PRIMARY;
        return list_flags(sh, ph, ph, out, cap);
    }
    if ((k = list_flags(sh, ah, ah, out, cap)) != 0) {
        /* The guest shard is its only assignment when it has one. */
        int guest = 0;
        for (uint32_t s = 0; s < sh->n_shards && !guest; s++)
            guest = (sh->flags[s] & (F_GUEST | F_HELD)) == (F_GUEST | F_HELD);
        info->source = guest ? GOSSIP_TRAIN_GUEST : GOSSIP_TRAIN_REPLICAS;
        return k;
    }
    if ((k = list_flags(sh, F_HELD, F_HELD, out, cap)) != 0) {
        info->source = GOSSIP_TRAIN_REPLICAS;
        return k;
    }
    info->source = GOSSIP_TRAIN_NONE;
    return 0;
}

const char *gossip_shards_train_source_name(gossip_shards_train_source source)
{
    static const char *const names[] = {"none", "primary", "replicas", "guest"};
    return (unsigned)source < sizeof names / sizeof names[0] ? names[source] : "?";
}

const char *gossip_shards_train_reason_name(gossip_shards_train_reason reason)
{
    static const char *const names[] = {"no_view", "primary", "primaries_pending", "no_primary"};
    return (unsigned)reason < sizeof names / sizeof names[0] ? names[reason] : "?";
}

int gossip_shards_status(const gossip_shards *sh, uint32_t s, gossip_shard_status *st)
{
    if (s >= sh->n_shards)
        return GOSSIP_ENOTFOUND;
    uint8_t fl = sh->flags[s];
    st->assigned = (fl & F_ASSIGNED) != 0;
    st->primary = (fl & F_PRIMARY) != 0;
    st->guest = (fl & F_GUEST) != 0;
    st->held = (fl & F_HELD) != 0;
    st->lost = (fl & (F_LOST | F_ASSIGNED | F_HELD)) == (F_LOST | F_ASSIGNED);
    st->fetching = (fl & F_FETCHING) != 0;
    st->width = sh->width;
    st->confirmed = 0;
    for (uint32_t j = 0; j < 8; j++)
        st->confirmed += (sh->confirmed[s] >> j) & 1u;
    st->primary_id = sh->holders ? sh->holders[(size_t)s * sh->width + primary_slot(sh, s)] : 0;
    return GOSSIP_OK;
}

const uint64_t *gossip_shards_holders(const gossip_shards *sh, uint32_t s, uint32_t *width)
{
    if (!sh->holders || s >= sh->n_shards)
        return NULL;
    *width = sh->width;
    return sh->holders + (size_t)s * sh->width;
}

int gossip_shards_quarantine(gossip_shards *sh, uint32_t s, gossip_time_us now)
{
    if (s >= sh->n_shards || !(sh->flags[s] & F_HELD))
        return GOSSIP_ENOTFOUND;
    quarantine_held(sh, s);
    pump(sh, now);
    return GOSSIP_OK;
}

int gossip_shards_store_full(const gossip_shards *sh, gossip_time_us now)
{
    return sh->full_until && now < sh->full_until;
}

void gossip_shards_full_get(const gossip_shards *sh, gossip_shards_full_info *out)
{
    out->full = sh->self_full;
    out->members = sh->n_full_members;
    out->handed = out->taken = 0;
    if (!sh->holders)
        return;
    for (uint32_t s = 0; s < sh->n_shards; s++) {
        const uint64_t *row = sh->holders + (size_t)s * sh->width;
        uint32_t j = primary_slot(sh, s);
        if (j == 0)
            continue;
        out->handed += row[0] == sh->cfg.self;
        out->taken += row[j] == sh->cfg.self;
    }
}

uint32_t gossip_shards_lost_count(const gossip_shards *sh)
{
    uint32_t k = 0;
    for (uint32_t s = 0; s < sh->n_shards; s++)
        k += (sh->flags[s] & (F_LOST | F_ASSIGNED | F_HELD)) == (F_LOST | F_ASSIGNED);
    return k;
}

uint32_t gossip_shards_held_count(const gossip_shards *sh)
{
    uint32_t k = 0;
    for (uint32_t s = 0; s < sh->n_shards; s++)
        k += (sh->flags[s] & F_HELD) != 0;
    return k;
}

uint32_t gossip_shards_missing_count(const gossip_shards *sh)
{
    uint32_t k = 0;
    for (uint32_t s = 0; s < sh->n_shards; s++)
        k += (sh->flags[s] & (F_ASSIGNED | F_HELD)) == F_ASSIGNED;
    return k;
}

uint64_t gossip_shards_epoch(const gossip_shards *sh)
{
    return sh->epoch;
}

const gossip_shards_counters *gossip_shards_counters_get(const gossip_shards *sh)
{
    return &sh->c;
}

uint32_t gossip_shards_census(const uint8_t (*ids)[GOSSIP_SHARD_ID_SIZE], uint32_t n_shards,
                              const gossip_store *stores, uint32_t n_stores, uint32_t *counts)
{
    uint32_t lost = 0;
    for (uint32_t s = 0; s < n_shards; s++) {
        uint32_t k = 0;
        for (uint32_t i = 0; i < n_stores; i++)
            k += stores[i].ops->has(stores[i].ctx, ids[s]) == 1;
        if (counts)
            counts[s] = k;
        lost += k == 0;
    }
    return lost;
}
