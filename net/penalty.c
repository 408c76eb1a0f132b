#include "net/penalty.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "net/net.h"

typedef struct penalty_entry {
    uint64_t key;
    uint32_t failures;
    int used;
    gossip_time_us last_failure;
    gossip_time_us until; /* cut off while now < until */
} penalty_entry;

struct net_penalty {
    net_penalty_config cfg;
    size_t n;
    penalty_entry e[NET_PENALTY_MAX];
};

int net_penalty_create(net_penalty **out, const net_penalty_config *cfg)
{
    if (!out)
        return NET_EINVAL;
    net_penalty *p = calloc(1, sizeof *p);
    if (!p)
        return NET_ENOMEM;
    if (cfg)
        p->cfg = *cfg;
    if (!p->cfg.threshold)
        p->cfg.threshold = NET_PENALTY_THRESHOLD_DEFAULT;
    if (!p->cfg.base_us)
        p->cfg.base_us = NET_PENALTY_BASE_DEFAULT_US;
    if (!p->cfg.max_us)
        p->cfg.max_us = NET_PENALTY_MAX_DEFAULT_US;
    if (!p->cfg.forget_us)
        p->cfg.forget_us = NET_PENALTY_FORGET_DEFAULT_US;
    if (p->cfg.max_us < p->cfg.base_us)
        p->cfg.max_us = p->cfg.base_us;
    *out = p;
    return NET_OK;
}

void net_penalty_destroy(net_penalty *p)
{
    free(p);
}

static penalty_entry *find(const net_penalty *p, uint64_t key)
{
    for (size_t i = 0; i < NET_PENALTY_MAX; i++)
        if (p->e[i].used && p->e[i].key == key)
            return (penalty_entry *)&p->e[i];
    return NULL;
}

/* Drop an entry whose failures are old enough to forget. */
static int expired(const net_penalty *p, const penalty_entry *e, gossip_time_us now)
{
    return now >= e->until && now - e->last_failure >= p->cfg.forget_us;
}

int net_penalty_check(net_penalty *p, uint64_t key, gossip_time_us now)
{
    if (!p)
        return NET_EINVAL;
    penalty_entry *e = find(p, key);
    if (!e)
        return NET_OK;
    if (expired(p, e, now)) {
        e->used = 0;
        p->n--;
        return NET_OK;
    }
    return now < e->until ? NET_EBLOCKED : NET_OK;
}

int net_penalty_fail(net_penalty *p, uint64_t key, gossip_time_us now)
{
    if (!p)
        return NET_EINVAL;
    penalty_entry *e = find(p, key);
    if (e && expired(p, e, now))
        memset(e, 0, sizeof *e), p->n--, e = NULL;
    if (!e) {
        penalty_entry *victim = NULL;
        for (size_t i = 0; i < NET_PENALTY_MAX && !e; i++)
            if (!p->e[i].used)
                e = &p->e[i];
            else if (!victim || p->e[i].last_failure < victim->last_failure)
                victim = &p->e[i];
        if (!e) {
            e = victim;
            p->n--;
        }
        memset(e, 0, sizeof *e);
        e->used = 1;
        e->key = key;
        p->n++;
    }
    if (e->failures < UINT32_MAX)
        e->failures++;
    e->last_failure = now;
    if (e->failures < p->cfg.threshold)
        return NET_OK;
    uint32_t k = e->failures - p->cfg.threshold;
    uint64_t d = p->cfg.base_us;
    while (k-- && d < p->cfg.max_us)
        d <<= 1;
    if (d > p->cfg.max_us)
        d = p->cfg.max_us;
    e->until = now > GOSSIP_TIME_NEVER - d ? GOSSIP_TIME_NEVER : now + d;
    return NET_EBLOCKED;
}

void net_penalty_forgive(net_penalty *p, uint64_t key)
{
    if (!p)
        return;
    penalty_entry *e = find(p, key);
    if (e) {
        memset(e, 0, sizeof *e);
        p->n--;
    }
}

gossip_time_us net_penalty_until(const net_penalty *p, uint64_t key, gossip_time_us now)
{
    const penalty_entry *e = p ? find(p, key) : NULL;
    return e && now < e->until ? e->until : 0;
}

size_t net_penalty_count(const net_penalty *p)
{
    return p ? p->n : 0;
}

uint64_t net_penalty_key(const char *addr)
{
    static const uint8_t k[16] = "murmur-penalty-k";
    uint8_t h[8];
    crypto_generichash(h, sizeof h, (const uint8_t *)addr, addr ? strlen(addr) : 0, k, sizeof k);
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | h[i];
    return v;
}
