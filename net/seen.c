#include "net/seen.h"

#include <assert.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#define TAI64_BASE 0x400000000000000aull /* 2^62 + 10: TAI64 label of 1970 */

typedef struct seen_entry {
    uint8_t pk[NET_PUBLIC_KEY_SIZE];
    uint64_t max_ns;               /* greatest accepted, ns since 1970 */
    uint64_t top[NET_SEEN_RECENT]; /* the greatest accepted (unordered) */
    uint32_t n_top;
    int used;
    gossip_time_us updated;
} seen_entry;

/* TAI64N as ns since 1970, clamped to [0, UINT64_MAX]. */
static uint64_t ts_ns(const uint8_t ts[NET_SEEN_TS_SIZE])
{
    uint64_t s = net_seen_unix_s(ts);
    uint32_t ns = (uint32_t)ts[8] << 24 | (uint32_t)ts[9] << 16 | (uint32_t)ts[10] << 8 | ts[11];
    if (s > (UINT64_MAX - 999999999u) / 1000000000u)
        return UINT64_MAX;
    return s * 1000000000u + (ns < 1000000000u ? ns : 999999999u);
}

struct net_seen {
    seen_entry *slots;
    size_t cap; /* power of two, at least 2 * max: probes stay short */
    size_t max, n;
};

int net_seen_create(net_seen **out, size_t max)
{
    if (!out)
        return NET_EINVAL;
    *out = NULL;
    if (max == 0 || max > NET_SEEN_MAX)
        return NET_EINVAL;
    net_seen *s = calloc(1, sizeof *s);
    if (!s)
        return NET_ENOMEM;
    s->cap = 16;
    while (s->cap < 2 * max)
        s->cap *= 2;
    s->max = max;
    s->slots = calloc(s->cap, sizeof *s->slots);
    if (!s->slots) {
        free(s);
        return NET_ENOMEM;
    }
    *out = s;
    return NET_OK;
}

void net_seen_destroy(net_seen *s)
{
    if (!s)
        return;
    free(s->slots);
    free(s);
}

/* The key's first 8 bytes as a probe start: keys are uniformly random
 * points, and only keys that passed a signature check are ever inserted. */
static size_t seen_home(const net_seen *s, const uint8_t pk[NET_PUBLIC_KEY_SIZE])
{
    uint64_t h = 0;
    for (int i = 0; i < 8; i++)
        h = h << 8 | pk[i];
    return (size_t)(h & (s->cap - 1));
}

static seen_entry *seen_find(const net_seen *s, const uint8_t pk[NET_PUBLIC_KEY_SIZE])
{
    for (size_t i = seen_home(s, pk), k = 0; k < s->cap; i = (i + 1) & (s->cap - 1), k++) {
        seen_entry *e = &s->slots[i];
        if (!e->used)
            return NULL;
        if (!memcmp(e->pk, pk, NET_PUBLIC_KEY_SIZE))
            return e;
    }
    return NULL;
}

/* Every accepted timestamp above the floor is in e->top: the top holds
 * the NET_SEEN_RECENT greatest accepted, and the floor is at least the
 * smallest of them once it is full. */
static uint64_t seen_floor(const seen_entry *e)
{
    uint64_t floor = e->max_ns > NET_SEEN_REORDER_NS ? e->max_ns - NET_SEEN_REORDER_NS : 0;
    if (e->n_top == NET_SEEN_RECENT) {
        uint64_t lo = e->top[0];
        for (uint32_t i = 1; i < e->n_top; i++)
            lo = e->top[i] < lo ? e->top[i] : lo;
        floor = lo > floor ? lo : floor;
    }
    return floor;
}

int net_seen_fresh(const net_seen *s, const uint8_t pk[NET_PUBLIC_KEY_SIZE],
                   const uint8_t ts[NET_SEEN_TS_SIZE])
{
    if (!s || !pk || !ts)
        return 0;
    const seen_entry *e = seen_find(s, pk);
    if (!e)
        return 1;
    uint64_t t = ts_ns(ts);
    if (t <= seen_floor(e))
        return 0;
    for (uint32_t i = 0; i < e->n_top; i++)
        if (e->top[i] == t)
            return 0;
    return 1;
}

/* Add t to the greatest accepted timestamps of e. */
static void seen_note(seen_entry *e, uint64_t t)
{
    if (t > e->max_ns)
        e->max_ns = t;
    for (uint32_t i = 0; i < e->n_top; i++)
        if (e->top[i] == t)
            return;
    if (e->n_top < NET_SEEN_RECENT) {
        e->top[e->n_top++] = t;
        return;
    }
    uint32_t lo = 0;
    for (uint32_t i = 1; i < e->n_top; i++)
        if (e->top[i] < e->top[lo])
            lo = i;
    if (t > e->top[lo])
        e->top[lo] = t;
}

/* Remove slot i and re-place the entries of its probe run (linear probing
 * deletion without tombstones). */
static void seen_remove(net_seen *s, size_t i)
{
    s->slots[i].used = 0;
    s->n--;
    for (size_t j = (i + 1) & (s->cap - 1); s->slots[j].used; j = (j + 1) & (s->cap - 1)) {
        seen_entry e = s->slots[j];
        s->slots[j].used = 0;
        size_t k = seen_home(s, e.pk);
        while (s->slots[k].used)
            k = (k + 1) & (s->cap - 1);
        s->slots[k] = e;
    }
}

void net_seen_update(net_seen *s, const uint8_t pk[NET_PUBLIC_KEY_SIZE],
                     const uint8_t ts[NET_SEEN_TS_SIZE], gossip_time_us now)
{
    if (!s || !pk || !ts)
        return;
    seen_entry *e = seen_find(s, pk);
    if (e) {
        seen_note(e, ts_ns(ts));
        e->updated = now;
        return;
    }
    if (s->n >= s->max) {
        /* Full: evict the entry updated longest ago (O(cap), only when a
         * new admitted identity arrives at a full table). */
        size_t oldest = s->cap;
        for (size_t i = 0; i < s->cap; i++)
            if (s->slots[i].used &&
                (oldest == s->cap || s->slots[i].updated < s->slots[oldest].updated))
                oldest = i;
        assert(oldest < s->cap);
        seen_remove(s, oldest);
    }
    size_t i = seen_home(s, pk);
    while (s->slots[i].used)
        i = (i + 1) & (s->cap - 1);
    memset(&s->slots[i], 0, sizeof s->slots[i]);
    memcpy(s->slots[i].pk, pk, NET_PUBLIC_KEY_SIZE);
    seen_note(&s->slots[i], ts_ns(ts));
    s->slots[i].updated = now;
    s->slots[i].used = 1;
    s->n++;
    assert(s->n <= s->max);
}

size_t net_seen_count(const net_seen *s)
{
    return s ? s->n : 0;
}

void net_seen_tai64n(uint8_t out[NET_SEEN_TS_SIZE], uint64_t wall_ns)
{
    uint64_t sec = TAI64_BASE + wall_ns / 1000000000u;
    uint32_t nsec = (uint32_t)(wall_ns % 1000000000u);
    for (int i = 0; i < 8; i++)
        out[i] = (uint8_t)(sec >> (56 - 8 * i));
    for (int i = 0; i < 4; i++)
        out[8 + i] = (uint8_t)(nsec >> (24 - 8 * i));
}

uint64_t net_seen_unix_s(const uint8_t ts[NET_SEEN_TS_SIZE])
{
    uint64_t sec = 0;
    for (int i = 0; i < 8; i++)
        sec = sec << 8 | ts[i];
    return sec > TAI64_BASE ? sec - TAI64_BASE : 0;
}
