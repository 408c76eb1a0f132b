#include "gossip/placement.h"

#include <string.h>

void gossip_placement_config_default(gossip_placement_config *cfg)
{
    cfg->r = GOSSIP_PLACEMENT_R_DEFAULT;
    cfg->slack_permille = GOSSIP_PLACEMENT_SLACK_DEFAULT;
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
    if (n_shards == 0 || n_shards > GOSSIP_PLACEMENT_SHARDS_MAX)
        return GOSSIP_EINVAL;
    if (!view || view->n == 0 || view->n > GOSSIP_MEMBERS_MAX || !view->ids)
        return GOSSIP_EINVAL;
    for (uint32_t i = 0; i < view->n; i++)
        if (view->ids[i] == 0 || (i > 0 && view->ids[i] <= view->ids[i - 1]))
            return GOSSIP_EINVAL;
    return GOSSIP_OK;
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
    if (!top || !load || !count || !cursor || (bounded && !heap) || !nkey) {
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
    }
    rc = GOSSIP_OK;
out:
    gossip_free(env, top);
    gossip_free(env, load);
    gossip_free(env, count);
    gossip_free(env, cursor);
    gossip_free(env, heap);
    gossip_free(env, nkey);
    return rc;
}
