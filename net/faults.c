/* net/faults — see faults.h for the rules and the order of decisions.
 *
 * State: a small array of rules (peer 0 = all peers), a sorted array of
 * partitioned ids, one seeded model_rng, and the held frames as a list
 * sorted by due time (inserted from the tail: delays of one rule are alike,
 * so a new frame usually goes last). Everything under one mutex.
 */
#include "net/faults.h"

#include <assert.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/rng.h"
#include "net/net.h"

typedef struct fault_rule {
    uint64_t peer; /* 0 = all peers */
    int used;
    net_fault_link link;
    gossip_time_us free_us; /* bandwidth: when the rule's link is idle again */
} fault_rule;

struct net_faults {
    pthread_mutex_t mu;
    model_rng rng;
    fault_rule rules[NET_FAULTS_RULES_MAX];
    uint64_t partition[NET_FAULTS_PARTITION_MAX]; /* sorted */
    size_t partition_n;
    uint64_t exempt[NET_FAULTS_EXEMPT_MAX]; /* sorted */
    size_t exempt_n;
    net_fault_held *held_head, *held_tail;
    uint32_t held_frames;
    size_t held_bytes;
    uint64_t frames[NET_FAULT_KIND_COUNT];
};

static const char *const kind_names[NET_FAULT_KIND_COUNT] = {
    "drop", "delay", "bandwidth", "duplicate", "reorder", "corrupt", "partition", "overflow"};

const char *net_fault_kind_name(int kind)
{
    return kind >= 0 && kind < NET_FAULT_KIND_COUNT ? kind_names[kind] : "unknown";
}

int net_faults_create(net_faults **out, uint64_t seed)
{
    if (!out)
        return NET_EINVAL;
    net_faults *f = calloc(1, sizeof *f);
    if (!f)
        return NET_ENOMEM;
    pthread_mutex_init(&f->mu, NULL);
    model_rng_seed(&f->rng, seed, 0x66617531u); /* stream "fau1": not the trainer's */
    *out = f;
    return NET_OK;
}

void net_faults_destroy(net_faults *f)
{
    if (!f)
        return;
    for (net_fault_held *h = f->held_head; h;) {
        net_fault_held *n = h->next;
        free(h);
        h = n;
    }
    pthread_mutex_destroy(&f->mu);
    free(f);
}

/* ---- rules ------------------------------------------------------------ */

static int prob_ok(double p)
{
    return isfinite(p) && p >= 0 && p <= 1;
}

int net_fault_link_check(const net_fault_link *l, char *why, size_t cap)
{
    const char *bad = NULL;
    if (!prob_ok(l->drop))
        bad = "drop must be a probability in [0, 1]";
    else if (!prob_ok(l->duplicate))
        bad = "duplicate must be a probability in [0, 1]";
    else if (!prob_ok(l->reorder))
        bad = "reorder must be a probability in [0, 1]";
    else if (!prob_ok(l->corrupt))
        bad = "corrupt must be a probability in [0, 1]";
    else if (l->delay_ms > NET_FAULTS_DELAY_MAX_MS || l->jitter_ms > NET_FAULTS_DELAY_MAX_MS ||
             l->reorder_window_ms > NET_FAULTS_DELAY_MAX_MS)
        bad = "delay_ms, jitter_ms and reorder_window_ms must be at most 60000";
    else if (l->bandwidth_bps && l->bandwidth_bps < NET_FAULTS_BANDWIDTH_MIN_BPS)
        bad = "bandwidth_bps must be 0 (no cap) or at least 8000";
    else if (l->reorder > 0 && l->reorder_window_ms == 0)
        bad = "reorder needs a reorder_window_ms";
    if (!bad)
        return 0;
    if (why && cap)
        snprintf(why, cap, "%s", bad);
    return -1;
}

int net_fault_link_empty(const net_fault_link *l)
{
    return l->drop == 0 && l->delay_ms == 0 && l->jitter_ms == 0 && l->bandwidth_bps == 0 &&
           l->duplicate == 0 && l->reorder == 0 && l->reorder_window_ms == 0 && l->corrupt == 0;
}

static fault_rule *rule_of(net_faults *f, uint64_t peer)
{
    for (size_t i = 0; i < NET_FAULTS_RULES_MAX; i++)
        if (f->rules[i].used && f->rules[i].peer == peer)
            return &f->rules[i];
    return NULL;
}

int net_faults_set_link(net_faults *f, uint64_t peer, const net_fault_link *l)
{
    if (!f || !l || net_fault_link_check(l, NULL, 0))
        return NET_EINVAL;
    pthread_mutex_lock(&f->mu);
    fault_rule *r = rule_of(f, peer);
    int rc = NET_OK;
    if (net_fault_link_empty(l)) {
        if (r)
            memset(r, 0, sizeof *r);
    } else {
        for (size_t i = 0; !r && i < NET_FAULTS_RULES_MAX; i++)
            if (!f->rules[i].used)
                r = &f->rules[i];
        if (r) {
            r->used = 1;
            r->peer = peer;
            r->link = *l;
            r->free_us = 0;
        } else {
            rc = NET_EFULL;
        }
    }
    pthread_mutex_unlock(&f->mu);
    return rc;
}

int net_faults_get_link(net_faults *f, uint64_t peer, net_fault_link *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&f->mu);
    fault_rule *r = rule_of(f, peer);
    if (r)
        *out = r->link;
    pthread_mutex_unlock(&f->mu);
    return r != NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

int net_faults_set_partition(net_faults *f, const uint64_t *ids, size_t n)
{
    if (!f || n > NET_FAULTS_PARTITION_MAX || (n && !ids))
        return NET_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (!ids[i])
            return NET_EINVAL;
    pthread_mutex_lock(&f->mu);
    if (n)
        memcpy(f->partition, ids, n * sizeof *ids);
    qsort(f->partition, n, sizeof *ids, cmp_u64);
    f->partition_n = n;
    pthread_mutex_unlock(&f->mu);
    return NET_OK;
}

size_t net_faults_get_partition(net_faults *f, uint64_t *ids, size_t cap)
{
    pthread_mutex_lock(&f->mu);
    size_t n = f->partition_n;
    for (size_t i = 0; i < n && i < cap; i++)
        ids[i] = f->partition[i];
    pthread_mutex_unlock(&f->mu);
    return n;
}

size_t net_faults_list_links(net_faults *f, uint64_t *peers, net_fault_link *links, size_t cap)
{
    size_t n = 0;
    pthread_mutex_lock(&f->mu);
    for (size_t i = 0; i < NET_FAULTS_RULES_MAX; i++) {
        if (!f->rules[i].used)
            continue;
        if (n < cap) {
            peers[n] = f->rules[i].peer;
            links[n] = f->rules[i].link;
        }
        n++;
    }
    pthread_mutex_unlock(&f->mu);
    return n;
}

int net_faults_set_exempt(net_faults *f, const uint64_t *ids, size_t n)
{
    if (!f || n > NET_FAULTS_EXEMPT_MAX || (n && !ids))
        return NET_EINVAL;
    pthread_mutex_lock(&f->mu);
    if (n)
        memcpy(f->exempt, ids, n * sizeof *ids);
    qsort(f->exempt, n, sizeof *ids, cmp_u64);
    f->exempt_n = n;
    pthread_mutex_unlock(&f->mu);
    return NET_OK;
}

void net_faults_clear(net_faults *f)
{
    pthread_mutex_lock(&f->mu);
    memset(f->rules, 0, sizeof f->rules);
    f->partition_n = 0;
    for (net_fault_held *h = f->held_head; h; h = h->next)
        h->due_us = 0; /* the order stays sorted */
    pthread_mutex_unlock(&f->mu);
}

int net_faults_active(net_faults *f)
{
    pthread_mutex_lock(&f->mu);
    int on = f->partition_n > 0;
    for (size_t i = 0; !on && i < NET_FAULTS_RULES_MAX; i++)
        on = f->rules[i].used;
    pthread_mutex_unlock(&f->mu);
    return on;
}

/* ---- decisions -------------------------------------------------------- */

static int partitioned(const net_faults *f, uint64_t peer)
{
    return peer && f->partition_n &&
           bsearch(&peer, f->partition, f->partition_n, sizeof peer, cmp_u64) != NULL;
}

static int exempt(const net_faults *f, uint64_t peer)
{
    return peer && f->exempt_n &&
           bsearch(&peer, f->exempt, f->exempt_n, sizeof peer, cmp_u64) != NULL;
}

static int chance(net_faults *f, double p)
{
    return p > 0 && (p >= 1 || model_rng_uniform_double(&f->rng) < p);
}

static gossip_time_us uniform_ms(net_faults *f, uint32_t ms)
{
    return ms ? model_rng_below(&f->rng, (uint64_t)ms * 1000u + 1u) : 0;
}

/* One copy's departure time and corruption under rule r. */
static void one_copy(net_faults *f, fault_rule *r, size_t len, gossip_time_us now,
                     gossip_time_us *due, uint32_t *corrupt)
{
    const net_fault_link *l = &r->link;
    *corrupt = 0;
    if (chance(f, l->corrupt)) {
        *corrupt = (uint32_t)(model_rng_u64(&f->rng) | 1u);
        f->frames[NET_FAULT_CORRUPT]++;
    }
    gossip_time_us t = now;
    if (l->delay_ms || l->jitter_ms) {
        t += (gossip_time_us)l->delay_ms * 1000u + uniform_ms(f, l->jitter_ms);
        f->frames[NET_FAULT_DELAY]++;
    }
    if (chance(f, l->reorder)) {
        t += uniform_ms(f, l->reorder_window_ms);
        f->frames[NET_FAULT_REORDER]++;
    }
    if (l->bandwidth_bps) {
        /* The rule's frames leave one after another: this one starts when
         * the previous one is through, and takes len * 8 / bps seconds. */
        gossip_time_us start = r->free_us > now ? r->free_us : now;
        r->free_us = start + (gossip_time_us)((double)len * 8e6 / (double)l->bandwidth_bps);
        if (r->free_us > t) {
            t = r->free_us;
            f->frames[NET_FAULT_BANDWIDTH]++;
        }
    }
    *due = t;
}

void net_faults_send(net_faults *f, uint64_t peer, size_t len, gossip_time_us now,
                     net_fault_verdict *v)
{
    memset(v, 0, sizeof *v);
    v->copies = 1;
    v->due_us[0] = v->due_us[1] = now;
    pthread_mutex_lock(&f->mu);
    fault_rule *r = peer ? rule_of(f, peer) : NULL;
    if (!r)
        r = rule_of(f, 0);
    if (exempt(f, peer)) {
        r = NULL;
    } else if (partitioned(f, peer)) {
        f->frames[NET_FAULT_PARTITION]++;
        v->copies = 0;
    } else if (r && chance(f, r->link.drop)) {
        f->frames[NET_FAULT_DROP]++;
        v->copies = 0;
    } else if (r) {
        one_copy(f, r, len, now, &v->due_us[0], &v->corrupt[0]);
        if (chance(f, r->link.duplicate)) {
            f->frames[NET_FAULT_DUPLICATE]++;
            v->copies = 2;
            one_copy(f, r, len, now, &v->due_us[1], &v->corrupt[1]);
        }
    }
    pthread_mutex_unlock(&f->mu);
    assert(v->copies >= 0 && v->copies <= 2);
}

int net_faults_recv(net_faults *f, uint64_t peer)
{
    pthread_mutex_lock(&f->mu);
    int drop = partitioned(f, peer) && !exempt(f, peer);
    if (drop)
        f->frames[NET_FAULT_PARTITION]++;
    pthread_mutex_unlock(&f->mu);
    return drop;
}

/* ---- held frames ------------------------------------------------------ */

int net_faults_hold(net_faults *f, uint64_t to, const char *addr, const uint8_t *frame, size_t len,
                    gossip_time_us due_us, uint32_t corrupt)
{
    if (!f || (!frame && len) || (!to && !addr) || (addr && strlen(addr) >= GOSSIP_ADDR_MAX) ||
        len > NET_FAULTS_HELD_BYTES_MAX)
        return NET_EINVAL;
    net_fault_held *h = malloc(sizeof *h + len);
    if (!h)
        return NET_ENOMEM;
    h->next = NULL;
    h->due_us = due_us;
    h->to = to;
    snprintf(h->addr, sizeof h->addr, "%s", addr && !to ? addr : "");
    h->corrupt = corrupt;
    h->len = len;
    if (len)
        memcpy(h->frame, frame, len);
    pthread_mutex_lock(&f->mu);
    if (f->held_frames >= NET_FAULTS_HELD_FRAMES_MAX ||
        f->held_bytes + len > NET_FAULTS_HELD_BYTES_MAX) {
        f->frames[NET_FAULT_OVERFLOW]++;
        pthread_mutex_unlock(&f->mu);
        free(h);
        return NET_EFULL;
    }
    /* After the last frame due no later than this one (FIFO among equals). */
    net_fault_held **at = &f->held_head;
    if (f->held_tail && f->held_tail->due_us <= due_us)
        at = &f->held_tail->next;
    else
        while (*at && (*at)->due_us <= due_us)
            at = &(*at)->next;
    h->next = *at;
    *at = h;
    if (!h->next)
        f->held_tail = h;
    f->held_frames++;
    f->held_bytes += len;
    assert(f->held_head && f->held_tail && !f->held_tail->next);
    pthread_mutex_unlock(&f->mu);
    return NET_OK;
}

int net_faults_take_due(net_faults *f, gossip_time_us now, net_fault_held **out)
{
    pthread_mutex_lock(&f->mu);
    net_fault_held *h = f->held_head;
    if (!h || h->due_us > now) {
        pthread_mutex_unlock(&f->mu);
        return 0;
    }
    f->held_head = h->next;
    if (!f->held_head)
        f->held_tail = NULL;
    assert(f->held_frames > 0 && f->held_bytes >= h->len);
    f->held_frames--;
    f->held_bytes -= h->len;
    pthread_mutex_unlock(&f->mu);
    h->next = NULL;
    *out = h;
    return 1;
}

void net_faults_held_free(net_fault_held *h)
{
    free(h);
}

gossip_time_us net_faults_next_due(net_faults *f)
{
    pthread_mutex_lock(&f->mu);
    gossip_time_us d = f->held_head ? f->held_head->due_us : GOSSIP_TIME_NEVER;
    pthread_mutex_unlock(&f->mu);
    return d;
}

void net_faults_stats_get(net_faults *f, net_faults_stats *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&f->mu);
    memcpy(out->frames, f->frames, sizeof out->frames);
    out->held_frames = f->held_frames;
    out->held_bytes = f->held_bytes;
    for (size_t i = 0; i < NET_FAULTS_RULES_MAX; i++)
        out->rules += f->rules[i].used ? 1u : 0u;
    out->partition = (uint32_t)f->partition_n;
    pthread_mutex_unlock(&f->mu);
}
