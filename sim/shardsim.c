/* sim/shardsim — the data shards of a run: shards.count shards of
 * shards.bytes (or the model's shard size) each, placed on
 * shards.replication holders.
 *
 * Protocol mode (shards.mode = protocol, or auto up to
 * SIM_SHARDS_PROTOCOL_AGENTS_MAX agents): every agent runs the real
 * gossip/shards replicator, fed its own views (oracle membership: the
 * run's view; swim: its node's), and its frames go through the engine like
 * every other frame (latency, shared bandwidth, loss, partitions, bytes
 * counted). The shard bytes are never kept: shard s is the byte stream
 * word k = mix64(content_key ^ s << 40 ^ k) (little-endian), generated on
 * every read; its id is BLAKE2b-256 of those bytes, computed once. An
 * agent's store (sim_shard_store) keeps one state per shard; the
 * replicator verifies every chunk and the whole against the id before it
 * commits, so a committed copy is the generated content and the written
 * bytes can be dropped. Every commit, drop and crash updates the count of
 * complete copies on live agents, from which a loss is seen the moment it
 * happens and checked: no shard is lost while fewer than r of its holders
 * with a complete copy failed since it last had r copies. At the start the
 * holders of the placement over the agents present hold their copies; a
 * crash takes an agent's copies with it (a restarted agent starts empty).
 *
 * Oracle mode: placement by the real gossip/placement, computed centrally
 * over the live agents at every view change; a new holder has its copy
 * after the transfer time of one shard at the network bandwidth (instant
 * when unlimited), without frames; a shard is lost when no live agent
 * holds a complete copy. */
#include <math.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/shards.h"
#include "sim/runner.h"

enum { SIM_SHARD_ABSENT = 0, SIM_SHARD_WRITING = 1, SIM_SHARD_COMPLETE = 2 };

/* ---- synthetic content and the per-agent store ------------------------- */

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Bytes [off, off + len) of shard s. */
static void content(const sim_shardsim *sh, uint32_t s, uint64_t off, uint8_t *buf, size_t len)
{
    uint64_t base = sh->content_key ^ ((uint64_t)s << 40);
    size_t k = 0;
    while (k < len) {
        uint64_t p = off + k, w = mix64(base ^ (p >> 3));
        unsigned b = (unsigned)(p & 7);
        if (b == 0 && len - k >= 8) {
            for (unsigned j = 0; j < 8; j++)
                buf[k + j] = (uint8_t)(w >> (8 * j));
            k += 8;
            continue;
        }
        buf[k++] = (uint8_t)(w >> (8 * b));
    }
}

static uint64_t be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int k = 0; k < 8; k++)
        v = v << 8 | p[k];
    return v;
}

static int index_cmp(const void *a, const void *b)
{
    const sim_shard_index *x = a, *y = b;
    if (x->k0 != y->k0)
        return x->k0 < y->k0 ? -1 : 1;
    return x->s < y->s ? -1 : x->s > y->s;
}

/* Catalog index of an id, or -1. */
static long shard_of(const sim_shardsim *sh, const uint8_t *id)
{
    uint64_t k0 = be64(id);
    size_t lo = 0, hi = sh->nshards;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (sh->index[mid].k0 < k0)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (; lo < sh->nshards && sh->index[lo].k0 == k0; lo++)
        if (memcmp(sh->shard_ids[sh->index[lo].s], id, GOSSIP_SHARD_ID_SIZE) == 0)
            return (long)sh->index[lo].s;
    return -1;
}

/* A copy of shard s appeared on (or left) a live agent. */
static void copies_add(runner *r, uint32_t s)
{
    sim_shardsim *sh = &r->sh;
    if (++sh->copies[s] >= sh->width)
        sh->hfail[s] = 0;
}

static void copies_remove(runner *r, uint32_t s, int failure)
{
    sim_shardsim *sh = &r->sh;
    if (sh->copies[s] == 0)
        return;
    sh->copies[s]--;
    if (failure && sh->hfail[s] < UINT8_MAX)
        sh->hfail[s]++;
    if (sh->copies[s] || sh->shard_lost[s])
        return;
    sh->shard_lost[s] = 1;
    sh->shards_lost++;
    sim_engine_trace(r->e, 0x5A4D000000000000ULL | s);
    if (sh->hfail[s] < sh->width)
        sim_checks_violate(r,
                           "shard %u lost after %u holder failure(s) with shards.replication = %u",
                           s, (unsigned)sh->hfail[s], sh->width);
}

static sim_shard_store *store_of(void *ctx)
{
    return ctx;
}

static int st_has(void *ctx, const uint8_t id[GOSSIP_STORE_ID_SIZE])
{
    sim_shard_store *a = store_of(ctx);
    long s = shard_of(&a->r->sh, id);
    return s >= 0 && a->st[s] == SIM_SHARD_COMPLETE;
}

static int st_size(void *ctx, const uint8_t id[GOSSIP_STORE_ID_SIZE], uint64_t *size)
{
    if (!st_has(ctx, id))
        return GOSSIP_ENOTFOUND;
    *size = store_of(ctx)->r->sh.bytes;
    return GOSSIP_OK;
}

static int st_read(void *ctx, const uint8_t id[GOSSIP_STORE_ID_SIZE], uint64_t off, void *buf,
                   size_t len)
{
    sim_shard_store *a = store_of(ctx);
    const sim_shardsim *sh = &a->r->sh;
    long s = shard_of(sh, id);
    if (s < 0 || a->st[s] != SIM_SHARD_COMPLETE)
        return GOSSIP_ENOTFOUND;
    if (off > sh->bytes || len > sh->bytes - off)
        return GOSSIP_EINVAL;
    content(sh, (uint32_t)s, off, buf, len);
    return GOSSIP_OK;
}

static int st_begin(void *ctx, const uint8_t id[GOSSIP_STORE_ID_SIZE], uint64_t size)
{
    sim_shard_store *a = store_of(ctx);
    long s = shard_of(&a->r->sh, id);
    /* Only catalog shards of the catalog's size can ever verify. */
    if (s < 0 || a->st[s] != SIM_SHARD_ABSENT || size != a->r->sh.bytes)
        return GOSSIP_EINVAL;
    a->st[s] = SIM_SHARD_WRITING;
    return GOSSIP_OK;
}

static int st_write(void *ctx, const uint8_t id[GOSSIP_STORE_ID_SIZE], uint64_t off,
                    const void *buf, size_t len)
{
    sim_shard_store *a = store_of(ctx);
    long s = shard_of(&a->r->sh, id);
    (void)buf; /* verified by the replicator before commit; regenerated on read */
    if (s < 0 || a->st[s] != SIM_SHARD_WRITING)
        return GOSSIP_ENOTFOUND;
    if (off > a->r->sh.bytes || len > a->r->sh.bytes - off)
        return GOSSIP_EINVAL;
    return GOSSIP_OK;
}

static int st_commit(void *ctx, const uint8_t id[GOSSIP_STORE_ID_SIZE])
{
    sim_shard_store *a = store_of(ctx);
    long s = shard_of(&a->r->sh, id);
    if (s < 0 || a->st[s] != SIM_SHARD_WRITING)
        return GOSSIP_ENOTFOUND;
    a->st[s] = SIM_SHARD_COMPLETE;
    a->r->sh.commits++;
    copies_add(a->r, (uint32_t)s);
    return GOSSIP_OK;
}

static void st_abort(void *ctx, const uint8_t id[GOSSIP_STORE_ID_SIZE])
{
    sim_shard_store *a = store_of(ctx);
    long s = shard_of(&a->r->sh, id);
    if (s >= 0 && a->st[s] == SIM_SHARD_WRITING)
        a->st[s] = SIM_SHARD_ABSENT;
}

static int st_drop(void *ctx, const uint8_t id[GOSSIP_STORE_ID_SIZE])
{
    sim_shard_store *a = store_of(ctx);
    long s = shard_of(&a->r->sh, id);
    if (s < 0 || a->st[s] != SIM_SHARD_COMPLETE)
        return GOSSIP_ENOTFOUND;
    a->st[s] = SIM_SHARD_ABSENT;
    copies_remove(a->r, (uint32_t)s, 0);
    return GOSSIP_OK;
}

static const gossip_store_ops sim_store_ops = {
    .has = st_has,
    .size = st_size,
    .read = st_read,
    .begin = st_begin,
    .write = st_write,
    .commit = st_commit,
    .abort = st_abort,
    .drop = st_drop,
    .quarantine = st_drop,
};

/* ---- setup --------------------------------------------------------------- */

static int placement_default(runner *r, gossip_placement_config *pc)
{
    gossip_placement_config_default(pc);
    pc->r = r->sh.width;
    return 0;
}

/* Protocol mode: ids of the generated contents, the index, the stores, and
 * the copies of the placement over the agents present at the start. */
static int protocol_init(runner *r)
{
    sim_shardsim *sh = &r->sh;
    sh->content_key = model_rng_u64(&r->mrng);
    sh->index = malloc((size_t)sh->nshards * sizeof *sh->index);
    sh->stores = calloc(r->n, sizeof *sh->stores);
    sh->st = calloc((size_t)r->n * sh->nshards, 1);
    sh->copies = calloc(sh->nshards, sizeof *sh->copies);
    enum { BUF = 64 * 1024 };
    uint8_t *buf = malloc(BUF);
    if (!sh->index || !sh->stores || !sh->st || !sh->copies || !buf) {
        free(buf);
        return sim_runner_fail(r, SIM_RUN_ENOMEM, "out of memory (shard stores)");
    }
    for (uint32_t s = 0; s < sh->nshards; s++) {
        crypto_generichash_state hs;
        crypto_generichash_init(&hs, NULL, 0, GOSSIP_SHARD_ID_SIZE);
        for (uint64_t off = 0; off < sh->bytes; off += BUF) {
            size_t len = sh->bytes - off < BUF ? (size_t)(sh->bytes - off) : BUF;
            content(sh, s, off, buf, len);
            crypto_generichash_update(&hs, buf, len);
        }
        crypto_generichash_final(&hs, sh->shard_ids[s], GOSSIP_SHARD_ID_SIZE);
        sh->index[s] = (sim_shard_index){be64(sh->shard_ids[s]), s};
    }
    free(buf);
    qsort(sh->index, sh->nshards, sizeof *sh->index, index_cmp);
    for (uint32_t i = 0; i < r->n; i++)
        sh->stores[i] = (sim_shard_store){r, i, sh->st + (size_t)i * sh->nshards};
    /* The initial placement over the agents present at the start. */
    uint32_t live = 0;
    for (uint32_t i = 0; i < r->n; i++)
        if (!sim_fault_list_absent_at_start(&r->faults, i))
            r->ids[live++] = (uint64_t)i + 1;
    if (!live)
        return 0;
    gossip_placement_config pc;
    placement_default(r, &pc);
    gossip_view v = {.epoch = 1, .n = live, .ids = r->ids};
    uint32_t width = gossip_placement_width(pc.r, live);
    if (gossip_placement_compute(&r->renv, &pc,
                                 (const uint8_t(*)[GOSSIP_SHARD_ID_SIZE])sh->shard_ids, sh->nshards,
                                 &v, sh->prow, NULL) != GOSSIP_OK)
        return sim_runner_fail(r, SIM_RUN_ENOMEM, "shard placement failed");
    for (uint32_t s = 0; s < sh->nshards; s++)
        for (uint32_t j = 0; j < width; j++) {
            uint32_t ag = (uint32_t)(sh->prow[(size_t)s * width + j] - 1);
            sh->stores[ag].st[s] = SIM_SHARD_COMPLETE;
            copies_add(r, s);
        }
    return 0;
}

int sim_shardsim_init(runner *r, const sim_net_config *nc)
{
    const sim_scenario *sc = r->sc;
    sim_shardsim *sh = &r->sh;
    sh->nshards = sc->shards.count;
    sh->width = sc->shards.replication;
    /* gossip/placement places over views of at most GOSSIP_MEMBERS_MAX
     * members: a larger run places no shards (docs/SIMULATOR.md, scale). */
    if (r->n > GOSSIP_MEMBERS_MAX)
        sh->nshards = 0;
    sh->protocol = sh->nshards &&
                   (sc->shards.mode == SIM_SHARDS_PROTOCOL ||
                    (sc->shards.mode == SIM_SHARDS_AUTO && r->n <= SIM_SHARDS_PROTOCOL_AGENTS_MAX));
    double model_bytes = sim_models_shard_bytes(r);
    sh->bytes = sc->shards.bytes ? sc->shards.bytes : (uint64_t)llround(model_bytes);
    if (sh->bytes == 0)
        sh->bytes = 1;
    size_t nalloc = sh->nshards ? sh->nshards : 1;
    sh->shard_ids = malloc(nalloc * sizeof *sh->shard_ids);
    sh->holders = calloc(nalloc * 2 * sh->width, sizeof *sh->holders);
    sh->nhold = calloc(nalloc, 1);
    sh->shard_lost = calloc(nalloc, 1);
    sh->hfail = calloc(nalloc, 1);
    sh->prow = calloc(nalloc * sh->width, sizeof *sh->prow);
    if (!sh->shard_ids || !sh->holders || !sh->nhold || !sh->shard_lost || !sh->prow || !sh->hfail)
        return sim_runner_fail(r, SIM_RUN_ENOMEM, "out of memory (shards)");
    if (sh->protocol)
        return protocol_init(r);
    for (uint32_t s = 0; s < sh->nshards; s++)
        for (uint32_t k = 0; k < GOSSIP_SHARD_ID_SIZE; k += 8) {
            uint64_t v = model_rng_u64(&r->mrng);
            memcpy(sh->shard_ids[s] + k, &v, 8);
        }
    double bw = nc->up_bps > 0 && (nc->down_bps <= 0 || nc->up_bps < nc->down_bps) ? nc->up_bps
                                                                                   : nc->down_bps;
    sh->copy_us = bw > 0 ? (uint64_t)llround((double)sh->bytes * 8.0 / bw * 1e6) : 0;
    return 0;
}

int sim_shardsim_config(runner *r, uint32_t i, gossip_shards_config *c)
{
    sim_shardsim *sh = &r->sh;
    if (!sh->protocol)
        return -1;
    gossip_shards_config_default(c);
    c->self = (uint64_t)i + 1;
    c->ids = (const uint8_t(*)[GOSSIP_SHARD_ID_SIZE])sh->shard_ids;
    c->n_shards = sh->nshards;
    placement_default(r, &c->placement);
    c->store = (gossip_store){&sim_store_ops, &sh->stores[i]};
    /* Chunks of 64 KiB, larger only where a shard would pass the
     * replicator's 4096 chunks. */
    uint64_t chunk = (sh->bytes + GOSSIP_SHARDS_CHUNKS_MAX - 1) / GOSSIP_SHARDS_CHUNKS_MAX;
    c->chunk_bytes = chunk > c->chunk_bytes ? (uint32_t)chunk : c->chunk_bytes;
    c->shard_bytes_max = sh->bytes;
    return 0;
}

void sim_shardsim_free(runner *r)
{
    sim_shardsim *sh = &r->sh;
    free(sh->shard_ids);
    free(sh->holders);
    free(sh->nhold);
    free(sh->shard_lost);
    free(sh->hfail);
    free(sh->prow);
    free(sh->index);
    free(sh->stores);
    free(sh->st);
    free(sh->copies);
}

/* ---- protocol mode --------------------------------------------------------- */

void sim_shardsim_view(runner *r, const gossip_view *v)
{
    if (!r->sh.protocol)
        return;
    for (uint32_t i = 0; i < r->n; i++) {
        sim_agent_state *g = &r->a[i];
        if (!sim_runner_alive(r, i) || !g->shards)
            continue;
        int rc = gossip_shards_set_view(g->shards, v, sim_runner_now(r));
        if (rc == GOSSIP_ENOMEM)
            sim_runner_fail(r, SIM_RUN_ENOMEM, "agent %u: out of memory (shard view)", i);
    }
}

void sim_shardsim_crash(runner *r, uint32_t i)
{
    sim_shardsim *sh = &r->sh;
    if (!sh->protocol)
        return;
    uint8_t *st = sh->stores[i].st;
    for (uint32_t s = 0; s < sh->nshards; s++) {
        if (st[s] == SIM_SHARD_COMPLETE)
            copies_remove(r, s, 1);
        st[s] = SIM_SHARD_ABSENT;
    }
}

void sim_shardsim_primaries(runner *r)
{
    sim_shardsim *sh = &r->sh;
    if (!sh->protocol)
        return;
    uint32_t live = 0;
    for (uint32_t i = 0; i < r->n; i++)
        live += sim_runner_alive(r, i);
    sh->prim_min = UINT32_MAX;
    sh->prim_max = 0;
    for (uint32_t i = 0; i < r->n; i++) {
        sim_agent_state *g = &r->a[i];
        if (!sim_runner_alive(r, i) || !g->shards)
            continue;
        gossip_shards_train_info info;
        (void)gossip_shards_train(g->shards, NULL, 0, &info);
        if (info.reason == GOSSIP_TRAIN_NO_VIEW)
            continue;
        /* The agent's own view: the run's (oracle) or its node's (swim). */
        uint32_t n = live;
        if (g->node) {
            gossip_view v;
            gossip_node_view(g->node, &v);
            n = v.n;
        }
        uint32_t lo, hi;
        gossip_placement_primary_bounds(sh->nshards, n, &lo, &hi);
        sh->prim_min = info.primary < sh->prim_min ? info.primary : sh->prim_min;
        sh->prim_max = info.primary > sh->prim_max ? info.primary : sh->prim_max;
        if (info.primary < lo || info.primary > hi)
            sim_checks_violate(r,
                               "agent %u is primary for %u shards; with %u shards over the %u "
                               "agents of its view the bounds are %u..%u",
                               i, info.primary, sh->nshards, n, lo, hi);
    }
    if (sh->prim_min == UINT32_MAX)
        sh->prim_min = 0;
}

/* ---- oracle mode ------------------------------------------------------------ */

/* Primaries per live agent of the placement just computed (row[0] of each
 * shard; agent i has id i + 1); invariant: floor(S/N)..ceil(S/N). */
static void primaries_check(runner *r, uint32_t width, uint32_t live)
{
    uint32_t *count = calloc(r->n, sizeof *count);
    if (!count) {
        sim_runner_fail(r, SIM_RUN_ENOMEM, "out of memory (primary counts)");
        return;
    }
    for (uint32_t s = 0; s < r->sh.nshards; s++)
        count[r->sh.prow[(size_t)s * width] - 1]++;
    uint32_t lo, hi;
    gossip_placement_primary_bounds(r->sh.nshards, live, &lo, &hi);
    r->sh.prim_min = UINT32_MAX;
    r->sh.prim_max = 0;
    for (uint32_t i = 0; i < r->n; i++) {
        if (!sim_runner_alive(r, i))
            continue;
        r->sh.prim_min = count[i] < r->sh.prim_min ? count[i] : r->sh.prim_min;
        r->sh.prim_max = count[i] > r->sh.prim_max ? count[i] : r->sh.prim_max;
        if (count[i] < lo || count[i] > hi)
            sim_checks_violate(r,
                               "agent %u is primary for %u shards; with %u shards over %u agents "
                               "the bounds are %u..%u",
                               i, count[i], r->sh.nshards, live, lo, hi);
    }
    free(count);
}

/* Shards without min(r, live) complete live copies. */
uint32_t sim_shardsim_under_replicated(const runner *r)
{
    uint32_t live = 0, bad = 0;
    for (uint32_t i = 0; i < r->n; i++)
        live += sim_runner_alive(r, i);
    uint32_t want = r->sh.width < live ? r->sh.width : live;
    for (uint32_t s = 0; s < r->sh.nshards; s++) {
        if (r->sh.shard_lost[s])
            continue;
        if (r->sh.protocol) {
            bad += r->sh.copies[s] < want;
            continue;
        }
        const shard_holder *h = r->sh.holders + (size_t)s * 2 * r->sh.width;
        uint32_t ready = 0;
        for (uint32_t j = 0; j < r->sh.nhold[s]; j++)
            ready += sim_runner_alive(r, h[j].agent) && h[j].ready_us <= sim_runner_now(r);
        bad += ready < want;
    }
    return bad;
}

void sim_shardsim_update(runner *r)
{
    if (!r->sh.nshards)
        return;
    if (r->sh.protocol) {
        /* Oracle membership: every replicator has just been given the view;
         * under SWIM each changes view on its own (checked at quiet points). */
        if (!r->swim)
            sim_shardsim_primaries(r);
        return;
    }
    uint32_t live = 0;
    for (uint32_t i = 0; i < r->n; i++)
        if (sim_runner_alive(r, i))
            r->ids[live++] = (uint64_t)i + 1;
    uint32_t w2 = 2 * r->sh.width;
    /* Drop holders that are down; a shard with no complete live copy is lost. */
    for (uint32_t s = 0; s < r->sh.nshards; s++) {
        if (r->sh.shard_lost[s] || !r->sh.placed)
            continue;
        shard_holder *h = r->sh.holders + (size_t)s * w2;
        uint32_t k = 0, ready = 0, had = 0;
        /* Every listed holder was up until this event (each crash updates). */
        for (uint32_t j = 0; j < r->sh.nhold[s]; j++)
            had += h[j].ready_us <= sim_runner_now(r);
        if (had >= r->sh.width)
            r->sh.hfail[s] = 0;
        for (uint32_t j = 0; j < r->sh.nhold[s]; j++)
            if (sim_runner_alive(r, h[j].agent)) {
                h[k++] = h[j];
                ready += h[j].ready_us <= sim_runner_now(r);
            } else if (h[j].ready_us <= sim_runner_now(r) && r->sh.hfail[s] < UINT8_MAX) {
                r->sh.hfail[s]++;
            }
        r->sh.nhold[s] = (uint8_t)k;
        if (!ready) {
            r->sh.shard_lost[s] = 1;
            r->sh.shards_lost++;
            sim_engine_trace(r->e, 0x5A4D000000000000ULL | s);
            if (r->sh.hfail[s] < r->sh.width)
                sim_checks_violate(
                    r, "shard %u lost after %u holder failure(s) with shards.replication = %u", s,
                    (unsigned)r->sh.hfail[s], r->sh.width);
        }
    }
    if (!live)
        return;
    gossip_placement_config pc;
    gossip_placement_config_default(&pc);
    pc.r = r->sh.width;
    gossip_view v = {.epoch = r->epoch, .n = live, .ids = r->ids};
    uint32_t width = gossip_placement_width(pc.r, live);
    if (gossip_placement_compute(&r->renv, &pc,
                                 (const uint8_t(*)[GOSSIP_SHARD_ID_SIZE])r->sh.shard_ids,
                                 r->sh.nshards, &v, r->sh.prow, NULL) != GOSSIP_OK) {
        sim_runner_fail(r, SIM_RUN_ENOMEM, "shard placement failed");
        return;
    }
    primaries_check(r, width, live);
    for (uint32_t s = 0; s < r->sh.nshards; s++) {
        if (r->sh.shard_lost[s])
            continue;
        shard_holder *h = r->sh.holders + (size_t)s * w2;
        shard_holder nh[2 * GOSSIP_PLACEMENT_R_MAX];
        uint32_t k = 0, all_ready = 1;
        for (uint32_t j = 0; j < width; j++) {
            uint32_t ag = (uint32_t)(r->sh.prow[(size_t)s * width + j] - 1);
            uint64_t ready = sim_runner_now(r) + r->sh.copy_us;
            for (uint32_t m = 0; m < r->sh.nhold[s]; m++)
                if (h[m].agent == ag && h[m].ready_us < ready)
                    ready = h[m].ready_us;
            nh[k++] = (shard_holder){ag, ready};
            all_ready &= ready <= sim_runner_now(r);
        }
        /* Former holders keep (and serve) their copy until the new ones have it. */
        if (!all_ready)
            for (uint32_t m = 0; m < r->sh.nhold[s] && k < w2; m++) {
                int in = 0;
                for (uint32_t j = 0; j < width; j++)
                    in |= nh[j].agent == h[m].agent;
                if (!in && h[m].ready_us <= sim_runner_now(r))
                    nh[k++] = h[m];
            }
        memcpy(h, nh, k * sizeof *h);
        r->sh.nhold[s] = (uint8_t)k;
    }
    r->sh.placed = 1;
}
