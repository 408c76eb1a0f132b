#include "gossip/placement.h"

#include <assert.h>
#include <string.h>

void gossip_placement_config_default(gossip_placement_config *cfg)
{
    cfg->r = GOSSIP_PLACEMENT_R_DEFAULT;
    cfg->slack_permille = GOSSIP_PLACEMENT_SLACK_DEFAULT;
    cfg->primaries = GOSSIP_PLACEMENT_PRIMARY_BALANCED;
}

void gossip_placement_primary_bounds(uint32_t n_shards, uint32_t n, uint32_t *lo, uint32_t *hi)
{
    *lo = n ? n_shards / n : 0;
    *hi = n ? (n_shards + n - 1) / n : 0;
}

static inline uint64_t mix64(uint64_t z)
{
    z ^= z >> 30;
    z *= 0xbf58476d1ce4e5b9ULL;
    z ^= z >> 27;
    z *= 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return z;
}

/* The weight is mix64(shard_key ^ node_key): one finalizer per pair once
 * node keys are computed (pass 1 does that once per view), and, mix64
 * being a bijection, distinct nodes get distinct weights for a shard. */
static inline uint64_t shard_key(const uint8_t id[GOSSIP_SHARD_ID_SIZE])
{
    return gossip_get_u64(id) ^ gossip_get_u64(id + 8);
}

static inline uint64_t node_key(uint64_t node)
{
    return mix64(node ^ 0x9e3779b97f4a7c15ULL);
}

uint64_t gossip_placement_weight(const uint8_t id[GOSSIP_SHARD_ID_SIZE], uint64_t node)
{
    return mix64(shard_key(id) ^ node_key(node));
}

uint32_t gossip_placement_width(uint32_t r, uint32_t n)
{
    return r < n ? r : n;
}

uint32_t gossip_placement_capacity(uint32_t n_shards, uint32_t width, uint32_t n,
                                   uint32_t slack_permille)
{
    if (n == 0)
        return 0;
    uint64_t total = (uint64_t)n_shards * width;
    uint64_t ceil_mean = (total + n - 1) / n;
    if (slack_permille == GOSSIP_PLACEMENT_UNBOUNDED)
        return 0;
    uint64_t bound = total * (1000u + (uint64_t)slack_permille) / (1000u * (uint64_t)n);
    return (uint32_t)(bound > ceil_mean ? bound : ceil_mean);
}

long gossip_placement_view_find(const gossip_view *view, uint64_t node)
{
    long lo = 0, hi = (long)view->n - 1;
    while (lo <= hi) {
        long mid = lo + (hi - lo) / 2;
        uint64_t v = view->ids[mid];
        if (v == node)
            return mid;
        if (v < node)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

/* One (member, weight) candidate. Order: weight descending, then node id
 * ascending (member index ascending, since view ids are sorted). */
typedef struct cand {
    uint64_t w;
    uint32_t m;
} cand;

static inline int cand_before(cand a, cand b)
{
    return a.w > b.w || (a.w == b.w && a.m < b.m);
}

/* Heap entry: a shard and its current candidate. */
typedef struct hent {
    cand c;
    uint32_t s;
} hent;

static inline int hent_before(const hent *a, const hent *b)
{
    if (cand_before(a->c, b->c))
        return 1;
    if (cand_before(b->c, a->c))
        return 0;
    return a->s < b->s;
}

static void heap_push(hent *h, uint32_t *len, hent e)
{
    uint32_t i = (*len)++;
    while (i > 0) {
        uint32_t p = (i - 1) / 2;
        if (!hent_before(&e, &h[p]))
            break;
        h[i] = h[p];
        i = p;
    }
    h[i] = e;
}

static hent heap_pop(hent *h, uint32_t *len)
{
    hent top = h[0];
    hent last = h[--*len];
    uint32_t i = 0, n = *len;
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && hent_before(&h[c + 1], &h[c]))
            c++;
        if (!hent_before(&h[c], &last))
            break;
        h[i] = h[c];
        i = c;
    }
    if (n)
        h[i] = last;
    return top;
}

/* Best candidate of shard `id` strictly after `after` in rank order; found=0
 * when none is left. O(N). */
static cand next_after(const uint8_t *id, const gossip_view *view, cand after, int *found)
{
    cand best = {0, 0};
    *found = 0;
    for (uint32_t m = 0; m < view->n; m++) {
        cand c = {gossip_placement_weight(id, view->ids[m]), m};
        if (!cand_before(after, c))
            continue;
        if (!*found || cand_before(c, best)) {
            best = c;
            *found = 1;
        }
    }
    return best;
}

static void sort_row(uint64_t *row, const uint8_t *id, uint32_t width)
{
    /* Insertion sort by rank; width <= GOSSIP_PLACEMENT_R_MAX. */
    uint64_t w[GOSSIP_PLACEMENT_R_MAX];
    for (uint32_t i = 0; i < width; i++)
        w[i] = gossip_placement_weight(id, row[i]);
    for (uint32_t i = 1; i < width; i++) {
        uint64_t v = row[i], wv = w[i];
        uint32_t j = i;
        while (j > 0 && (w[j - 1] < wv || (w[j - 1] == wv && row[j - 1] > v))) {
            row[j] = row[j - 1];
            w[j] = w[j - 1];
            j--;
        }
        row[j] = v;
        w[j] = wv;
    }
}

static int check_args(const gossip_placement_config *cfg, uint32_t n_shards,
                      const gossip_view *view)
{
    if (!cfg || cfg->r == 0 || cfg->r > GOSSIP_PLACEMENT_R_MAX)
        return GOSSIP_EINVAL;
    if (cfg->primaries != GOSSIP_PLACEMENT_PRIMARY_BALANCED &&
        cfg->primaries != GOSSIP_PLACEMENT_PRIMARY_RANKED)
        return GOSSIP_EINVAL;
    if (n_shards == 0 || n_shards > GOSSIP_PLACEMENT_SHARDS_MAX)
        return GOSSIP_EINVAL;
    if (!view || view->n == 0 || view->n > GOSSIP_MEMBERS_MAX || !view->ids)
        return GOSSIP_EINVAL;
    for (uint32_t i = 0; i < view->n; i++)
        if (view->ids[i] == 0 || (i > 0 && view->ids[i] <= view->ids[i - 1]))
            return GOSSIP_EINVAL;
    return GOSSIP_OK;
}

/* ---- balanced primaries (see header) ------------------------------------ */

#define PRIM_NONE  0xFFu            /* no primary yet (prim[] slot) */
#define LINK_START UINT32_MAX       /* BFS: reached from the shard being placed */
#define LINK_EXTRA (UINT32_MAX - 1) /* BFS: reached through the L+1 slots */

typedef struct prim_result {
    uint32_t augmented, adopted;
} prim_result;

/* Scratch of one balancing run. Members are view indices; a shard's row of
 * member indices (hidx) mirrors its row of node ids. */
typedef struct prim_ctx {
    const uint8_t (*ids)[GOSSIP_SHARD_ID_SIZE];
    const gossip_view *view;
    uint32_t n_shards, n, width;
    uint64_t *holders;
    uint32_t *load;                       /* replicas per member (changes on adoption) */
    uint32_t *hidx;                       /* n_shards x width member indices */
    uint32_t *order;                      /* shard indices sorted by id */
    uint8_t *prim;                        /* row slot of each shard's primary, or PRIM_NONE */
    uint32_t *pload;                      /* primaries per member */
    uint32_t *off, *adj;                  /* member -> shards it holds, in id order (CSR) */
    uint32_t *stamp, *via, *from, *queue; /* BFS */
    uint8_t *cursor;                      /* (a): the slot each shard tries next, by id order */
    hent *heap;
    uint32_t bfs;
    uint32_t lo, rem, n_up; /* L = floor(S/N), S mod N, members at L + 1 */
} prim_ctx;

/* Member m may take one more primary: below L, or at L while fewer than
 * S mod N members are at L + 1. Taking only while this holds keeps every
 * member <= U and, once all S shards are placed, every member >= L (the
 * loads then sum to S = N*L + rem with at most rem of them at L + 1). */
static int prim_open(const prim_ctx *c, uint32_t m)
{
    return c->pload[m] < c->lo || (c->pload[m] == c->lo && c->n_up < c->rem);
}

static void prim_inc(prim_ctx *c, uint32_t m)
{
    c->pload[m]++;
    c->n_up += c->pload[m] == c->lo + 1;
}

static void prim_dec(prim_ctx *c, uint32_t m)
{
    assert(c->pload[m] > 0);
    c->n_up -= c->pload[m] == c->lo + 1;
    c->pload[m]--;
}

static uint8_t prim_slot(const prim_ctx *c, uint32_t s, uint32_t m)
{
    for (uint32_t j = 0; j < c->width; j++)
        if (c->hidx[(size_t)s * c->width + j] == m)
            return (uint8_t)j;
    assert(0 && "member is not a holder");
    return PRIM_NONE;
}

static int id_before(const prim_ctx *c, uint32_t a, uint32_t b)
{
    int d = memcmp(c->ids[a], c->ids[b], GOSSIP_SHARD_ID_SIZE);
    return d < 0 || (d == 0 && a < b);
}

static void order_sift(prim_ctx *c, uint32_t i, uint32_t len)
{
    uint32_t *v = c->order;
    for (;;) {
        uint32_t k = 2 * i + 1;
        if (k >= len)
            return;
        if (k + 1 < len && id_before(c, v[k], v[k + 1]))
            k++;
        if (!id_before(c, v[i], v[k]))
            return;
        uint32_t t = v[i];
        v[i] = v[k];
        v[k] = t;
        i = k;
    }
}

/* order = shard indices sorted by id (heap sort: no allocation). */
static void order_by_id(prim_ctx *c)
{
    const uint32_t s_count = c->n_shards;
    for (uint32_t s = 0; s < s_count; s++)
        c->order[s] = s;
    for (uint32_t i = s_count / 2; i-- > 0;)
        order_sift(c, i, s_count);
    for (uint32_t end = s_count; end-- > 1;) {
        uint32_t t = c->order[0];
        c->order[0] = c->order[end];
        c->order[end] = t;
        order_sift(c, 0, end);
    }
}

/* Member indices of the rows, and the member -> shards lists. */
static void prim_index(prim_ctx *c)
{
    const size_t cells = (size_t)c->n_shards * c->width;
    for (size_t i = 0; i < cells; i++) {
        long m = gossip_placement_view_find(c->view, c->holders[i]);
        assert(m >= 0);
        c->hidx[i] = (uint32_t)m;
    }
    memset(c->off, 0, ((size_t)c->n + 1) * sizeof *c->off);
    for (size_t i = 0; i < cells; i++)
        c->off[c->hidx[i] + 1]++;
    for (uint32_t m = 0; m < c->n; m++)
        c->off[m + 1] += c->off[m];
    memcpy(c->stamp, c->off, (size_t)c->n * sizeof *c->stamp); /* fill cursors */
    for (uint32_t p = 0; p < c->n_shards; p++) {
        uint32_t s = c->order[p];
        for (uint32_t j = 0; j < c->width; j++)
            c->adj[c->stamp[c->hidx[(size_t)s * c->width + j]]++] = s;
    }
    memset(c->stamp, 0, (size_t)c->n * sizeof *c->stamp);
}

/* (a) Greedy over (shard, holder) pairs in descending weight; heap entries
 * carry the shard's position in id order, so ties are broken by id. The
 * holder rows are ranked here, so slot j is the shard's j-th candidate. */
static void prim_greedy(prim_ctx *c)
{
    uint8_t *cursor = c->cursor;
    uint32_t hlen = 0;
    for (uint32_t p = 0; p < c->n_shards; p++) {
        uint32_t s = c->order[p];
        cursor[p] = 0;
        c->prim[s] = PRIM_NONE;
        cand first = {gossip_placement_weight(c->ids[s], c->holders[(size_t)s * c->width]),
                      c->hidx[(size_t)s * c->width]};
        heap_push(c->heap, &hlen, (hent){first, p});
    }
    while (hlen) {
        hent e = heap_pop(c->heap, &hlen);
        uint32_t s = c->order[e.s];
        if (prim_open(c, e.c.m)) {
            c->prim[s] = cursor[e.s];
            prim_inc(c, e.c.m);
            continue;
        }
        uint32_t j = ++cursor[e.s];
        if (j == c->width)
            continue; /* every holder is full: (b) or (c) */
        size_t at = (size_t)s * c->width + j;
        cand next = {gossip_placement_weight(c->ids[s], c->holders[at]), c->hidx[at]};
        heap_push(c->heap, &hlen, (hent){next, e.s});
    }
}

/* Apply the augmenting path that ends at member e (which has room): each
 * member on it takes the shard it was reached through; a hop through the
 * L+1 slots moves one such slot from the member reached to the one before. */
static void prim_apply(prim_ctx *c, uint32_t e)
{
    prim_inc(c, e);
    uint32_t cur = e;
    for (;;) {
        uint32_t v = c->via[cur];
        if (v == LINK_EXTRA) {
            uint32_t a = c->from[cur];
            prim_dec(c, cur);
            prim_inc(c, a);
            cur = a;
            continue;
        }
        c->prim[v] = prim_slot(c, v, cur);
        if (c->from[cur] == LINK_START)
            return;
        cur = c->from[cur];
    }
}

/* Visit member b reached from a through shard s (or LINK_EXTRA); 1 when b
 * has room and the path was applied. */
static int prim_visit(prim_ctx *c, uint32_t b, uint32_t s, uint32_t a, uint32_t *qt)
{
    if (c->stamp[b] == c->bfs)
        return 0;
    c->stamp[b] = c->bfs;
    c->via[b] = s;
    c->from[b] = a;
    if (prim_open(c, b)) {
        prim_apply(c, b);
        return 1;
    }
    c->queue[(*qt)++] = b;
    return 0;
}

/* (b) Breadth-first search for an augmenting path for shard s0, which has
 * no primary: a holder of s0 takes it and gives one of its own primaries to
 * another holder of that shard, and so on, to a member with room. A member
 * at L while all L+1 slots are taken may take one from a member at L+1,
 * which then gives a shard away (the LINK_EXTRA hop, at most once per
 * search). This is an augmenting path of the flow network shard -> holder
 * -> (L per member, plus 1 per member limited to S mod N in all), so a
 * search that fails proves no assignment within the bounds places s0. */
static int prim_augment(prim_ctx *c, uint32_t s0)
{
    uint32_t qh = 0, qt = 0;
    int extra = 0;
    c->bfs++;
    for (uint32_t j = 0; j < c->width; j++)
        if (prim_visit(c, c->hidx[(size_t)s0 * c->width + j], s0, LINK_START, &qt))
            return 1;
    while (qh < qt) {
        uint32_t a = c->queue[qh++];
        for (uint32_t k = c->off[a]; k < c->off[a + 1]; k++) {
            uint32_t s = c->adj[k];
            if (c->prim[s] == PRIM_NONE || c->hidx[(size_t)s * c->width + c->prim[s]] != a)
                continue;
            for (uint32_t j = 0; j < c->width; j++)
                if (prim_visit(c, c->hidx[(size_t)s * c->width + j], s, a, &qt))
                    return 1;
        }
        if (!extra && c->pload[a] == c->lo && c->n_up == c->rem && c->rem > 0) {
            extra = 1;
            for (uint32_t m = 0; m < c->n; m++)
                if (c->pload[m] == c->lo + 1 && prim_visit(c, m, LINK_EXTRA, a, &qt))
                    return 1;
        }
    }
    return 0;
}

/* (c) No assignment within the bounds places s0 among its holders: the
 * best-ranked member with room becomes its primary and replaces its
 * lowest-ranked holder. Such a member exists while a shard has no primary
 * (the loads sum to less than S; see prim_open). */
static void prim_adopt(prim_ctx *c, uint32_t s0)
{
    uint32_t best = UINT32_MAX;
    uint64_t best_w = 0;
    for (uint32_t m = 0; m < c->n; m++) {
        if (!prim_open(c, m))
            continue;
        uint64_t w = gossip_placement_weight(c->ids[s0], c->view->ids[m]);
        if (best == UINT32_MAX || w > best_w) {
            best = m;
            best_w = w;
        }
    }
    assert(best != UINT32_MAX);
    size_t row = (size_t)s0 * c->width;
    uint32_t j = c->width - 1; /* the holders of s0 have no room (b failed) */
    for (uint32_t k = 0; k < c->width; k++)
        assert(c->hidx[row + k] != best);
    c->load[c->hidx[row + j]]--;
    c->load[best]++;
    c->hidx[row + j] = best;
    c->holders[row + j] = c->view->ids[best];
    c->prim[s0] = (uint8_t)j;
    prim_inc(c, best);
}

/* Rows: primary first, the other holders by rank. */
static void prim_rows(prim_ctx *c)
{
    for (uint32_t s = 0; s < c->n_shards; s++) {
        uint64_t *row = c->holders + (size_t)s * c->width;
        uint64_t pid = row[c->prim[s]];
        sort_row(row, c->ids[s], c->width);
        uint32_t j = 0;
        while (row[j] != pid)
            j++;
        for (; j > 0; j--)
            row[j] = row[j - 1];
        row[0] = pid;
    }
}

static void prim_free(const gossip_env *env, prim_ctx *c)
{
    gossip_free(env, c->hidx);
    gossip_free(env, c->order);
    gossip_free(env, c->prim);
    gossip_free(env, c->off);
    gossip_free(env, c->adj);
    gossip_free(env, c->stamp);
    gossip_free(env, c->via);
    gossip_free(env, c->from);
    gossip_free(env, c->queue);
    gossip_free(env, c->cursor);
    gossip_free(env, c->heap);
}

static int prim_alloc(const gossip_env *env, prim_ctx *c)
{
    const size_t cells = (size_t)c->n_shards * c->width;
    c->hidx = gossip_alloc(env, cells * sizeof *c->hidx);
    c->order = gossip_alloc(env, (size_t)c->n_shards * sizeof *c->order);
    c->prim = gossip_alloc(env, c->n_shards);
    c->off = gossip_alloc(env, ((size_t)c->n + 1) * sizeof *c->off);
    c->adj = gossip_alloc(env, cells * sizeof *c->adj);
    c->stamp = gossip_alloc(env, (size_t)c->n * sizeof *c->stamp);
    c->via = gossip_alloc(env, (size_t)c->n * sizeof *c->via);
    c->from = gossip_alloc(env, (size_t)c->n * sizeof *c->from);
    c->queue = gossip_alloc(env, (size_t)c->n * sizeof *c->queue);
    c->cursor = gossip_alloc(env, c->n_shards);
    c->heap = gossip_alloc(env, (size_t)c->n_shards * sizeof *c->heap);
    if (!c->hidx || !c->order || !c->prim || !c->off || !c->adj || !c->stamp || !c->via ||
        !c->from || !c->queue || !c->cursor || !c->heap)
        return GOSSIP_ENOMEM;
    return GOSSIP_OK;
}

/* Choose the primaries (header, balanced mode) and put each first in its
 * row. holders rows are ranked on entry; load is updated by (c); pload
 * (n zeros on entry) receives the primaries per member. */
static int primaries_balance(const gossip_env *env, const uint8_t (*ids)[GOSSIP_SHARD_ID_SIZE],
                             uint32_t n_shards, const gossip_view *view, uint32_t width,
                             uint64_t *holders, uint32_t *load, uint32_t *pload, prim_result *out)
{
    prim_ctx c = {.ids = ids,
                  .view = view,
                  .n_shards = n_shards,
                  .n = view->n,
                  .width = width,
                  .holders = holders,
                  .load = load,
                  .pload = pload};
    c.lo = n_shards / view->n;
    c.rem = n_shards % view->n;
    int rc = prim_alloc(env, &c);
    if (rc == GOSSIP_OK) {
        order_by_id(&c);
        prim_index(&c);
        prim_greedy(&c);
        for (uint32_t p = 0; p < n_shards && width > 1; p++)
            if (c.prim[c.order[p]] == PRIM_NONE)
                out->augmented += (uint32_t)prim_augment(&c, c.order[p]);
        for (uint32_t p = 0; p < n_shards; p++)
            if (c.prim[c.order[p]] == PRIM_NONE) {
                prim_adopt(&c, c.order[p]);
                out->adopted++;
            }
        prim_rows(&c);
        for (uint32_t m = 0; m < c.n; m++)
            assert(pload[m] >= c.lo && pload[m] <= (n_shards + c.n - 1) / c.n);
    }
    prim_free(env, &c);
    return rc;
}

int gossip_placement_compute(const gossip_env *env, const gossip_placement_config *cfg,
                             const uint8_t (*ids)[GOSSIP_SHARD_ID_SIZE], uint32_t n_shards,
                             const gossip_view *view, uint64_t *holders,
                             gossip_placement_stats *stats)
{
    int rc = check_args(cfg, n_shards, view);
    if (rc)
        return rc;
    const uint32_t n = view->n;
    const uint32_t width = gossip_placement_width(cfg->r, n);
    const uint32_t k = n < GOSSIP_PLACEMENT_TOPK ? n : GOSSIP_PLACEMENT_TOPK;
    const int bounded = cfg->slack_permille != GOSSIP_PLACEMENT_UNBOUNDED;
    const uint32_t cap = gossip_placement_capacity(n_shards, width, n, cfg->slack_permille);

    cand *top = gossip_calloc(env, (size_t)n_shards * k, sizeof *top);
    uint32_t *load = gossip_calloc(env, n, sizeof *load);
    uint8_t *count = gossip_calloc(env, n_shards, 1);
    uint8_t *cursor = gossip_calloc(env, n_shards, 1);
    hent *heap = bounded ? gossip_calloc(env, n_shards, sizeof *heap) : NULL;
    uint64_t *nkey = gossip_calloc(env, n, sizeof *nkey);
    uint32_t *pload = gossip_calloc(env, n, sizeof *pload);
    if (!top || !load || !count || !cursor || (bounded && !heap) || !nkey || !pload) {
        rc = GOSSIP_ENOMEM;
        goto out;
    }

    /* Pass 1: each shard's top-k members by rank (insertion into k slots). */
    for (uint32_t m = 0; m < n; m++)
        nkey[m] = node_key(view->ids[m]);
    for (uint32_t s = 0; s < n_shards; s++) {
        cand *t = top + (size_t)s * k;
        uint32_t len = 0;
        const uint64_t skey = shard_key(ids[s]);
        for (uint32_t m = 0; m < n; m++) {
            cand c = {mix64(skey ^ nkey[m]), m};
            if (len == k && !cand_before(c, t[k - 1]))
                continue;
            uint32_t j = len < k ? len++ : k - 1;
            while (j > 0 && cand_before(c, t[j - 1])) {
                t[j] = t[j - 1];
                j--;
            }
            t[j] = c;
        }
    }

    uint32_t overflow = 0;
    if (!bounded) {
        for (uint32_t s = 0; s < n_shards; s++)
            for (uint32_t j = 0; j < width; j++) {
                holders[(size_t)s * width + j] = view->ids[top[(size_t)s * k + j].m];
                load[top[(size_t)s * k + j].m]++;
            }
    } else {
        /* Pass 2: greedy over all pairs in global rank order, lazily: a heap
         * holds each unfinished shard with its best untried candidate. */
        uint32_t hlen = 0;
        for (uint32_t s = 0; s < n_shards; s++)
            heap_push(heap, &hlen, (hent){top[(size_t)s * k], s});
        while (hlen) {
            hent e = heap_pop(heap, &hlen);
            uint32_t s = e.s;
            if (load[e.c.m] < cap) {
                holders[(size_t)s * width + count[s]++] = view->ids[e.c.m];
                load[e.c.m]++;
            }
            if (count[s] == width)
                continue;
            cand next;
            int found = 1;
            if (cursor[s] + 1u < k) {
                next = top[(size_t)s * k + ++cursor[s]];
            } else {
                next = next_after(ids[s], view, e.c, &found);
            }
            if (found)
                heap_push(heap, &hlen, (hent){next, s});
        }
        /* Pass 3: shards left short take their best non-holders over cap. */
        for (uint32_t s = 0; s < n_shards; s++) {
            cand after = {UINT64_MAX, 0};
            int first = 1;
            while (count[s] < width) {
                int found;
                cand c;
                if (first) {
                    c = top[(size_t)s * k];
                    found = 1;
                    first = 0;
                } else {
                    c = next_after(ids[s], view, after, &found);
                }
                if (!found)
                    break; /* cannot happen: width <= n */
                after = c;
                uint64_t node = view->ids[c.m];
                int dup = 0;
                for (uint32_t j = 0; j < count[s]; j++)
                    dup |= holders[(size_t)s * width + j] == node;
                if (dup)
                    continue;
                holders[(size_t)s * width + count[s]++] = node;
                load[c.m]++;
                overflow++;
            }
            sort_row(holders + (size_t)s * width, ids[s], width);
        }
    }

    /* Plain mode fills rows by rank; bounded mode sorted them in pass 3. */
    prim_result pr = {0};
    if (cfg->primaries == GOSSIP_PLACEMENT_PRIMARY_BALANCED) {
        rc = primaries_balance(env, ids, n_shards, view, width, holders, load, pload, &pr);
        if (rc)
            goto out;
    } else {
        for (uint32_t s = 0; s < n_shards; s++)
            pload[gossip_placement_view_find(view, holders[(size_t)s * width])]++;
    }
    if (stats) {
        stats->width = width;
        stats->cap = bounded ? cap : 0;
        stats->overflow = overflow;
        stats->max_load = 0;
        stats->min_load = UINT32_MAX;
        for (uint32_t m = 0; m < n; m++) {
            if (load[m] > stats->max_load)
                stats->max_load = load[m];
            if (load[m] < stats->min_load)
                stats->min_load = load[m];
        }
        stats->primary_max = 0;
        stats->primary_min = UINT32_MAX;
        for (uint32_t m = 0; m < n; m++) {
            if (pload[m] > stats->primary_max)
                stats->primary_max = pload[m];
            if (pload[m] < stats->primary_min)
                stats->primary_min = pload[m];
        }
        stats->augmented = pr.augmented;
        stats->adopted = pr.adopted;
    }
    rc = GOSSIP_OK;
out:
    gossip_free(env, top);
    gossip_free(env, load);
    gossip_free(env, count);
    gossip_free(env, cursor);
    gossip_free(env, heap);
    gossip_free(env, nkey);
    gossip_free(env, pload);
    return rc;
}
