/* agent/chaos_agent — the agent's side of fault injection; see chaos.h.
 *
 * Threads: the event loop calls agent_faults_on_frame and
 * agent_faults_sync_metrics; the trainer calls agent_faults_trainer_gate;
 * the metrics server reads agent_faults_summary_get. The injector has its
 * own lock; pause and slow are atomics; the counters are atomics. Requests
 * run on the event loop only, so two never interleave.
 */
#include "agent/chaos.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/keys.h"
#include "agent/log.h"
#include "agent/runtime_internal.h"
#include "common/text.h"
#include "gossip/wire.h"

/* What a fault is, for the applied/removed counters and the log. */
enum { FK_LINK, FK_PARTITION, FK_PAUSE, FK_SLOW, FK_COUNT };
static const char *const fk_names[FK_COUNT] = {"link", "partition", "pause", "slow"};

/* Refused control frames log at most one line per 10 s per sender. */
#define FAULTS_REFUSE_LOG_MS 10000u

struct agent_faults {
    net_faults *net;
    net_transport *t;
    agent_metrics *reg;
    uint64_t admins[AGENT_FAULT_ADMINS_MAX];
    size_t n_admins;
    _Atomic int paused;
    _Atomic uint64_t slow_milli; /* factor x 1000 */
    uint64_t host_back_us;       /* when murmur_mix last returned (the host's thread only) */
    _Atomic uint64_t applied, removed;
    agent_metric *m_applied[FK_COUNT], *m_removed[FK_COUNT];
    agent_metric *m_frames[NET_FAULT_KIND_COUNT];
    uint64_t frames_seen[NET_FAULT_KIND_COUNT];
    agent_metric *m_requests[3]; /* ok, refused, invalid */
    agent_metric *m_active;
    agent_log_limiter refuse_log;
};

/* ---- control frames ----------------------------------------------------- */

int agent_fault_ctl_is(const uint8_t *frame, size_t len)
{
    return len >= 2 && frame[0] == 'M' && frame[1] == 'F';
}

size_t agent_fault_ctl_encode(uint8_t *out, size_t cap, unsigned kind, uint32_t id,
                              const char *text)
{
    size_t n = strlen(text);
    if (n > AGENT_FAULT_CTL_TEXT_MAX || cap < AGENT_FAULT_CTL_HEADER + n)
        return 0;
    out[0] = 'M';
    out[1] = 'F';
    out[2] = AGENT_FAULT_CTL_VERSION;
    out[3] = (uint8_t)kind;
    gossip_put_u32(out + 4, id);
    memcpy(out + AGENT_FAULT_CTL_HEADER, text, n);
    return AGENT_FAULT_CTL_HEADER + n;
}

int agent_fault_ctl_decode(const uint8_t *frame, size_t len, unsigned *kind, uint32_t *id,
                           char *text, size_t cap)
{
    if (len < AGENT_FAULT_CTL_HEADER || !agent_fault_ctl_is(frame, len) ||
        frame[2] != AGENT_FAULT_CTL_VERSION ||
        (frame[3] != AGENT_FAULT_CTL_REQUEST && frame[3] != AGENT_FAULT_CTL_REPLY))
        return -1;
    size_t n = len - AGENT_FAULT_CTL_HEADER;
    if (n > AGENT_FAULT_CTL_TEXT_MAX || n + 1 > cap || memchr(frame + 8, 0, n))
        return -1;
    *kind = frame[3];
    *id = gossip_get_u32(frame + 4);
    memcpy(text, frame + AGENT_FAULT_CTL_HEADER, n);
    text[n] = 0;
    return 0;
}

/* ---- counting and logging ---------------------------------------------- */

static void count(agent_faults *f, int applied, int kind)
{
    atomic_fetch_add(applied ? &f->applied : &f->removed, 1);
    agent_metric **m = applied ? &f->m_applied[kind] : &f->m_removed[kind];
    if (!*m && f->reg)
        agent_metrics_counter(
            f->reg, applied ? "murmur_faults_applied_total" : "murmur_faults_removed_total",
            applied ? "faults applied (config or murmur fault), by kind"
                    : "faults removed, by kind",
            "kind", fk_names[kind], m);
    if (*m)
        agent_metric_add(*m, 1);
}

static void log_link(uint64_t from, int applied, uint64_t peer, const net_fault_link *l)
{
    agent_log_line ln;
    agent_log_begin(&ln, AGENT_LOG_INFO, applied ? "fault_applied" : "fault_removed");
    agent_log_str(&ln, "kind", "link");
    if (peer)
        agent_log_hex64(&ln, "peer", peer);
    else
        agent_log_str(&ln, "peer", "all");
    if (applied) {
        agent_log_f64(&ln, "drop", l->drop);
        agent_log_u64(&ln, "delay_ms", l->delay_ms);
        agent_log_u64(&ln, "jitter_ms", l->jitter_ms);
        agent_log_u64(&ln, "bandwidth_bps", l->bandwidth_bps);
        agent_log_f64(&ln, "duplicate", l->duplicate);
        agent_log_f64(&ln, "reorder", l->reorder);
        agent_log_u64(&ln, "reorder_window_ms", l->reorder_window_ms);
        agent_log_f64(&ln, "corrupt", l->corrupt);
    }
    if (from)
        agent_log_hex64(&ln, "by", from);
    else
        agent_log_str(&ln, "by", "config");
    agent_log_end(&ln);
}

static void log_simple(uint64_t from, int applied, int kind, const char *key, const char *value)
{
    agent_log_line ln;
    agent_log_begin(&ln, AGENT_LOG_INFO, applied ? "fault_applied" : "fault_removed");
    agent_log_str(&ln, "kind", fk_names[kind]);
    if (key)
        agent_log_str(&ln, key, value);
    if (from)
        agent_log_hex64(&ln, "by", from);
    else
        agent_log_str(&ln, "by", "config");
    agent_log_end(&ln);
}

/* ---- requests ------------------------------------------------------------ */

typedef struct fault_req {
    uint64_t peers[AGENT_FAULT_REQ_PEERS_MAX];
    size_t n_peers;
    int has_link;
    net_fault_link link;
    int has_partition;
    uint64_t partition[NET_FAULTS_PARTITION_MAX];
    size_t n_partition;
    int has_pause, pause;
    int has_slow;
    double slow;
    int clear;
} fault_req;

static int parse_id(const char *s, size_t n, uint64_t *out)
{
    if (n != 16)
        return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0)
            return -1;
        v = v << 4 | (uint64_t)d;
    }
    *out = v;
    return v ? 0 : -1;
}

static int parse_prob(const char *v, double *out)
{
    return common_parse_f64(v, out) && *out >= 0 && *out <= 1 ? 0 : -1;
}

static int parse_ms(const char *v, uint32_t *out)
{
    uint64_t x;
    if (!common_parse_u64(v, &x) || x > NET_FAULTS_DELAY_MAX_MS)
        return -1;
    *out = (uint32_t)x;
    return 0;
}

/* One word key=value (or a bare key) into r. -1 with why on error. */
static int parse_word(fault_req *r, const char *key, const char *v, char *why, size_t cap)
{
    int bad = 0;
    net_fault_link *l = &r->link;
    if (!strcmp(key, "clear") && !v) {
        r->clear = 1;
    } else if (!strcmp(key, "show") && !v) {
    } else if (!v) {
        bad = 1;
    } else if (!strcmp(key, "peer")) {
        if (r->n_peers >= AGENT_FAULT_REQ_PEERS_MAX ||
            parse_id(v, strlen(v), &r->peers[r->n_peers++]))
            bad = 1;
    } else if (!strcmp(key, "partition")) {
        r->has_partition = 1;
        for (const char *p = v; *p && !bad;) {
            size_t n = strcspn(p, ",");
            if (r->n_partition >= NET_FAULTS_PARTITION_MAX ||
                parse_id(p, n, &r->partition[r->n_partition++]))
                bad = 1;
            p += n + (p[n] == ',');
        }
    } else if (!strcmp(key, "pause")) {
        r->has_pause = 1;
        r->pause = !strcmp(v, "1") ? 1 : !strcmp(v, "0") ? 0 : -1;
        bad = r->pause < 0;
    } else if (!strcmp(key, "slow")) {
        r->has_slow = 1;
        bad = !common_parse_f64(v, &r->slow) || !(r->slow >= 1 && r->slow <= 1000);
    } else {
        r->has_link = 1;
        if (!strcmp(key, "drop"))
            bad = parse_prob(v, &l->drop);
        else if (!strcmp(key, "duplicate"))
            bad = parse_prob(v, &l->duplicate);
        else if (!strcmp(key, "reorder"))
            bad = parse_prob(v, &l->reorder);
        else if (!strcmp(key, "corrupt"))
            bad = parse_prob(v, &l->corrupt);
        else if (!strcmp(key, "delay_ms"))
            bad = parse_ms(v, &l->delay_ms);
        else if (!strcmp(key, "jitter_ms"))
            bad = parse_ms(v, &l->jitter_ms);
        else if (!strcmp(key, "reorder_window_ms"))
            bad = parse_ms(v, &l->reorder_window_ms);
        else if (!strcmp(key, "bandwidth_bps"))
            bad = !common_parse_u64(v, &l->bandwidth_bps);
        else
            bad = 2;
    }
    if (!bad)
        return 0;
    snprintf(why, cap, bad == 2 ? "error: unknown word '%s'" : "error: bad value for '%s'", key);
    return -1;
}

static int parse_request(fault_req *r, const char *text, char *why, size_t cap)
{
    memset(r, 0, sizeof *r);
    char word[512];
    for (const char *p = text; *p;) {
        p += strspn(p, " \t\r\n");
        size_t n = strcspn(p, " \t\r\n");
        if (!n)
            break;
        if (n >= sizeof word) {
            snprintf(why, cap, "error: a word longer than %zu bytes", sizeof word - 1);
            return -1;
        }
        memcpy(word, p, n);
        word[n] = 0;
        p += n;
        char *eq = strchr(word, '=');
        if (eq)
            *eq = 0;
        if (parse_word(r, word, eq ? eq + 1 : NULL, why, cap))
            return -1;
    }
    char lwhy[128];
    if (r->has_link && net_fault_link_check(&r->link, lwhy, sizeof lwhy)) {
        snprintf(why, cap, "error: %s", lwhy);
        return -1;
    }
    if (r->n_peers && !r->has_link) {
        snprintf(why, cap,
                 "error: peer= names the peers of a link fault; give one "
                 "(drop=, delay_ms=, ...)");
        return -1;
    }
    return 0;
}

static void set_link(agent_faults *f, uint64_t from, uint64_t peer, const net_fault_link *l)
{
    net_fault_link old;
    int had = net_faults_get_link(f->net, peer, &old);
    int rc = net_faults_set_link(f->net, peer, l);
    if (rc != NET_OK)
        return;
    int has = !net_fault_link_empty(l);
    if (had && (!has || memcmp(&old, l, sizeof old))) {
        count(f, 0, FK_LINK);
        log_link(from, 0, peer, &old);
    }
    if (has && (!had || memcmp(&old, l, sizeof old))) {
        count(f, 1, FK_LINK);
        log_link(from, 1, peer, l);
    }
}

static void set_partition(agent_faults *f, uint64_t from, const uint64_t *ids, size_t n)
{
    uint64_t old[NET_FAULTS_PARTITION_MAX];
    size_t had = net_faults_get_partition(f->net, old, NET_FAULTS_PARTITION_MAX);
    if (net_faults_set_partition(f->net, ids, n) != NET_OK)
        return;
    uint64_t now_ids[NET_FAULTS_PARTITION_MAX];
    size_t now_n = net_faults_get_partition(f->net, now_ids, NET_FAULTS_PARTITION_MAX);
    if (now_n == had && !memcmp(now_ids, old, had * sizeof *old))
        return; /* the same partition again (a repeated request): no change */
    char list[NET_FAULTS_PARTITION_MAX * 17 + 1] = "";
    size_t len = 0;
    for (size_t i = 0; i < n; i++)
        len +=
            (size_t)snprintf(list + len, sizeof list - len, "%s%016" PRIx64, i ? "," : "", ids[i]);
    if (had) {
        count(f, 0, FK_PARTITION);
        log_simple(from, 0, FK_PARTITION, NULL, NULL);
    }
    if (n) {
        count(f, 1, FK_PARTITION);
        log_simple(from, 1, FK_PARTITION, "ids", list);
    }
}

static void set_pause(agent_faults *f, uint64_t from, int pause)
{
    if (atomic_exchange(&f->paused, pause) == pause)
        return;
    count(f, pause, FK_PAUSE);
    log_simple(from, pause, FK_PAUSE, NULL, NULL);
}

static void set_slow(agent_faults *f, uint64_t from, double slow)
{
    uint64_t milli = (uint64_t)llround(slow * 1000.0);
    uint64_t old = atomic_exchange(&f->slow_milli, milli);
    if (old == milli)
        return;
    char v[32];
    snprintf(v, sizeof v, "%g", slow);
    if (old != 1000) {
        count(f, 0, FK_SLOW);
        log_simple(from, 0, FK_SLOW, NULL, NULL);
    }
    if (milli != 1000) {
        count(f, 1, FK_SLOW);
        log_simple(from, 1, FK_SLOW, "factor", v);
    }
}

static void clear_all(agent_faults *f, uint64_t from)
{
    uint64_t peers[NET_FAULTS_RULES_MAX];
    net_fault_link links[NET_FAULTS_RULES_MAX];
    size_t n = net_faults_list_links(f->net, peers, links, NET_FAULTS_RULES_MAX);
    net_fault_link none = {0};
    for (size_t i = 0; i < n && i < NET_FAULTS_RULES_MAX; i++)
        set_link(f, from, peers[i], &none);
    set_partition(f, from, NULL, 0);
    set_pause(f, from, 0);
    set_slow(f, from, 1.0);
    net_faults_clear(f->net); /* held frames go now */
}

/* The faults in force, one per line, after the first line. */
static void describe(agent_faults *f, char *out, size_t cap, size_t len)
{
    uint64_t peers[NET_FAULTS_RULES_MAX];
    net_fault_link l[NET_FAULTS_RULES_MAX];
    size_t n = net_faults_list_links(f->net, peers, l, NET_FAULTS_RULES_MAX);
    for (size_t i = 0; i < n && i < NET_FAULTS_RULES_MAX && len < cap; i++) {
        char who[20];
        snprintf(who, sizeof who, peers[i] ? "%016" PRIx64 : "all", peers[i]);
        len += (size_t)snprintf(out + len, cap - len,
                                "link peer=%s drop=%g delay_ms=%u jitter_ms=%u "
                                "bandwidth_bps=%" PRIu64
                                " duplicate=%g reorder=%g reorder_window_ms=%u corrupt=%g\n",
                                who, l[i].drop, l[i].delay_ms, l[i].jitter_ms, l[i].bandwidth_bps,
                                l[i].duplicate, l[i].reorder, l[i].reorder_window_ms, l[i].corrupt);
    }
    uint64_t ids[NET_FAULTS_PARTITION_MAX];
    size_t np = net_faults_get_partition(f->net, ids, NET_FAULTS_PARTITION_MAX);
    if (np && len < cap) {
        len += (size_t)snprintf(out + len, cap - len, "partition");
        for (size_t i = 0; i < np && len < cap; i++)
            len +=
                (size_t)snprintf(out + len, cap - len, "%s%016" PRIx64, i ? "," : " ids=", ids[i]);
        if (len < cap)
            len += (size_t)snprintf(out + len, cap - len, "\n");
    }
    if (atomic_load(&f->paused) && len < cap)
        len += (size_t)snprintf(out + len, cap - len, "pause\n");
    uint64_t slow = atomic_load(&f->slow_milli);
    if (slow != 1000 && len < cap)
        snprintf(out + len, cap - len, "slow factor=%g\n", (double)slow / 1000.0);
}

int agent_faults_request(agent_faults *f, uint64_t from, const char *text, char *reply, size_t cap)
{
    fault_req *r = malloc(sizeof *r);
    if (!r) {
        snprintf(reply, cap, "error: out of memory");
        return -1;
    }
    if (parse_request(r, text, reply, cap)) {
        free(r);
        return -1;
    }
    if (r->clear)
        clear_all(f, from);
    if (r->has_link) {
        if (!r->n_peers)
            set_link(f, from, 0, &r->link);
        for (size_t i = 0; i < r->n_peers; i++)
            set_link(f, from, r->peers[i], &r->link);
    }
    if (r->has_partition)
        set_partition(f, from, r->partition, r->n_partition);
    if (r->has_pause)
        set_pause(f, from, r->pause);
    if (r->has_slow)
        set_slow(f, from, r->slow);
    free(r);
    size_t len = (size_t)snprintf(reply, cap, "ok\n");
    describe(f, reply, cap, len < cap ? len : cap);
    return 0;
}

/* ---- the loop's side ------------------------------------------------------ */

static int is_admin(const agent_faults *f, uint64_t id)
{
    for (size_t i = 0; i < f->n_admins; i++)
        if (f->admins[i] == id)
            return 1;
    return 0;
}

static void request_count(agent_faults *f, int which)
{
    static const char *const results[3] = {"ok", "refused", "invalid"};
    if (f && f->reg && !f->m_requests[which])
        agent_metrics_counter(f->reg, "murmur_fault_requests_total",
                              "murmur fault requests received, by result", "result", results[which],
                              &f->m_requests[which]);
    if (f && f->m_requests[which])
        agent_metric_add(f->m_requests[which], 1);
}

void agent_faults_on_frame(agent_faults *f, murmur_agent *a, uint64_t from, const uint8_t *frame,
                           size_t len)
{
    char *text = malloc(AGENT_FAULT_CTL_TEXT_MAX + 1);
    char *reply = malloc(AGENT_FAULT_CTL_TEXT_MAX + 1);
    uint8_t *out = malloc(AGENT_FAULT_CTL_FRAME_MAX);
    unsigned kind = 0;
    uint32_t id = 0;
    if (!text || !reply || !out)
        goto done;
    if (agent_fault_ctl_decode(frame, len, &kind, &id, text, AGENT_FAULT_CTL_TEXT_MAX + 1) ||
        kind != AGENT_FAULT_CTL_REQUEST) {
        request_count(f, 2);
        goto done; /* a malformed or stray reply: nothing to answer */
    }
    const char *why = !f                   ? "faults.enable is false on this agent"
                      : !is_admin(f, from) ? "not an admin key (faults.admin_keys_file)"
                                           : NULL;
    if (why) {
        request_count(f, 1);
        uint64_t suppressed = 0;
        if (!f || agent_log_limit(&f->refuse_log, from, agent_log_monotonic_ms(), &suppressed)) {
            agent_log_line ln;
            agent_log_begin(&ln, AGENT_LOG_WARN, "fault_request_refused");
            agent_log_hex64(&ln, "from", from);
            agent_log_str(&ln, "why", why);
            if (suppressed)
                agent_log_u64(&ln, "suppressed", suppressed);
            agent_log_end(&ln);
        }
        snprintf(reply, AGENT_FAULT_CTL_TEXT_MAX + 1, "error: refused: %s", why);
    } else {
        request_count(
            f, agent_faults_request(f, from, text, reply, AGENT_FAULT_CTL_TEXT_MAX + 1) ? 2 : 0);
    }
    size_t n =
        agent_fault_ctl_encode(out, AGENT_FAULT_CTL_FRAME_MAX, AGENT_FAULT_CTL_REPLY, id, reply);
    if (n)
        net_transport_send(a->t, from, NULL, out, n);
done:
    free(text);
    free(reply);
    free(out);
}

void agent_faults_sync_metrics(agent_faults *f)
{
    if (!f)
        return;
    net_faults_stats st;
    net_faults_stats_get(f->net, &st);
    for (int k = 0; k < NET_FAULT_KIND_COUNT; k++) {
        uint64_t d = st.frames[k] - f->frames_seen[k];
        if (!d)
            continue;
        if (!f->m_frames[k])
            agent_metrics_counter(f->reg, "murmur_fault_frames_total",
                                  "frames a fault touched, by kind (net/faults)", "kind",
                                  net_fault_kind_name(k), &f->m_frames[k]);
        if (f->m_frames[k])
            agent_metric_add(f->m_frames[k], d);
        f->frames_seen[k] = st.frames[k];
    }
    agent_faults_summary s;
    agent_faults_summary_get(f, &s);
    agent_metric_set(f->m_active, (double)s.active);
}

void agent_faults_summary_get(agent_faults *f, agent_faults_summary *out)
{
    memset(out, 0, sizeof *out);
    out->training_slow = 1;
    if (!f)
        return;
    net_faults_stats st;
    net_faults_stats_get(f->net, &st);
    for (int k = 0; k < NET_FAULT_KIND_COUNT; k++)
        out->frames += st.frames[k];
    out->training_paused = (uint32_t)atomic_load(&f->paused);
    out->training_slow = (double)atomic_load(&f->slow_milli) / 1000.0;
    out->active = st.rules + (st.partition ? 1u : 0u) + out->training_paused +
                  (out->training_slow != 1 ? 1u : 0u);
    out->applied = atomic_load(&f->applied);
    out->removed = atomic_load(&f->removed);
}

void agent_faults_status(agent_faults *f, agent_status *st)
{
    if (!f)
        return;
    agent_faults_summary s;
    agent_faults_summary_get(f, &s);
    st->faults_enabled = 1;
    st->faults_active = s.active;
    st->faults_applied = s.applied;
    st->faults_removed = s.removed;
    st->fault_frames = s.frames;
    st->training_paused = s.training_paused;
    st->training_slow = s.training_slow;
    st->pid = (uint32_t)getpid();
}

/* ---- set-up --------------------------------------------------------------- */

static int read_admins(agent_faults *f, const char *path, char *err, size_t errlen)
{
    if (!path[0])
        return 0; /* nobody */
    uint8_t *keys = malloc((size_t)AGENT_FAULT_ADMINS_MAX * NET_PUBLIC_KEY_SIZE);
    if (!keys) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    size_t n = 0;
    char msg[256] = "";
    int rc = agent_keys_read_allow(path, keys, AGENT_FAULT_ADMINS_MAX, &n, msg, sizeof msg);
    if (rc) {
        snprintf(err, errlen, "faults.admin_keys_file: %s", msg);
        free(keys);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t id = net_node_id(keys + i * NET_PUBLIC_KEY_SIZE);
        if (id)
            f->admins[f->n_admins++] = id;
    }
    free(keys);
    net_faults_set_exempt(f->net, f->admins, f->n_admins);
    return 0;
}

static int apply_config(agent_faults *f, const agent_config *c, char *err, size_t errlen)
{
    net_fault_link l = {.drop = c->faults_drop,
                        .delay_ms = c->faults_delay_ms,
                        .jitter_ms = c->faults_jitter_ms,
                        .bandwidth_bps = c->faults_bandwidth_bps,
                        .duplicate = c->faults_duplicate,
                        .reorder = c->faults_reorder,
                        .reorder_window_ms = c->faults_reorder_window_ms,
                        .corrupt = c->faults_corrupt};
    char why[128];
    if (net_fault_link_check(&l, why, sizeof why)) {
        snprintf(err, errlen, "[faults]: %s", why);
        return -1;
    }
    uint64_t ids[AGENT_CONFIG_FAULT_CUT_MAX];
    for (uint32_t i = 0; i < c->faults_partition_count; i++)
        if (parse_id(c->faults_partition[i], 16, &ids[i])) {
            snprintf(err, errlen, "faults.partition: bad id %s", c->faults_partition[i]);
            return -1;
        }
    if (!net_fault_link_empty(&l)) {
        if (!c->faults_peer_count)
            set_link(f, 0, 0, &l);
        for (uint32_t i = 0; i < c->faults_peer_count; i++) {
            uint64_t p;
            if (parse_id(c->faults_peers[i], 16, &p)) {
                snprintf(err, errlen, "faults.peer: bad id %s", c->faults_peers[i]);
                return -1;
            }
            set_link(f, 0, p, &l);
        }
    }
    if (c->faults_partition_count)
        set_partition(f, 0, ids, c->faults_partition_count);
    if (c->faults_pause_training)
        set_pause(f, 0, 1);
    if (c->faults_slow_training != 1)
        set_slow(f, 0, c->faults_slow_training);
    return 0;
}

int agent_faults_create(agent_faults **out, murmur_agent *a, char *err, size_t errlen)
{
    *out = NULL;
    const agent_config *c = &a->cfg;
    if (!c->faults_enable)
        return 0;
    agent_faults *f = calloc(1, sizeof *f);
    if (!f) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    atomic_init(&f->slow_milli, 1000);
    agent_log_limiter_init(&f->refuse_log, FAULTS_REFUSE_LOG_MS, 1);
    f->t = a->t;
    f->reg = a->reg;
    if (net_transport_faults_enable(a->t, c->faults_seed, &f->net) != NET_OK) {
        snprintf(err, errlen, "cannot enable fault injection: out of memory");
        agent_faults_destroy(f);
        return -1;
    }
    agent_metrics_gauge(f->reg, "murmur_faults_active",
                        "faults in force (link rules, partition, pause, slow)", NULL, NULL,
                        &f->m_active);
    if (read_admins(f, c->faults_admin_keys_file, err, errlen) || apply_config(f, c, err, errlen)) {
        agent_faults_destroy(f);
        return -1;
    }
    agent_log_line ln;
    agent_log_begin(&ln, AGENT_LOG_WARN, "faults_enabled");
    agent_log_u64(&ln, "seed", c->faults_seed);
    agent_log_u64(&ln, "admins", f->n_admins);
    agent_log_end(&ln);
    *out = f;
    return 0;
}

void agent_faults_destroy(agent_faults *f)
{
    if (!f)
        return;
    agent_log_limiter_destroy(&f->refuse_log);
    free(f); /* the injector belongs to the transport */
}

/* ---- the host's side (murmur_mix) ------------------------------------------ */

static void nap_us(uint64_t us)
{
    struct timespec ts = {.tv_sec = (time_t)(us / 1000000u),
                          .tv_nsec = (long)(us % 1000000u) * 1000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static uint64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

int agent_faults_host_gate(murmur_agent *a)
{
    agent_faults *f = a->faults;
    if (!f)
        return a->stop != 0;
    /* the host's step: its time since murmur_mix last returned */
    uint64_t now = mono_us();
    uint64_t step_us = f->host_back_us && now > f->host_back_us ? now - f->host_back_us : 0;
    uint64_t slow = atomic_load(&f->slow_milli);
    if (slow > 1000) {
        /* (factor - 1) x the step, in naps of at most 50 ms */
        uint64_t extra = step_us * (slow - 1000) / 1000u;
        while (extra && !a->stop) {
            uint64_t d = extra < 50000u ? extra : 50000u;
            nap_us(d);
            extra -= d;
        }
    }
    while (atomic_load(&f->paused) && !a->stop)
        nap_us(50000u);
    f->host_back_us = mono_us();
    return a->stop != 0;
}
