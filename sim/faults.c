/* sim/faults — see faults.h for the line syntax and the random processes. */
#include "sim/faults.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/rng.h"

#define SALT_CRASH   0x6372617368657321ULL
#define SALT_BURST   0x6c6f73736275727aULL
#define SALT_TARGETS 0x7461726765747321ULL
/* Latest fault time accepted, seconds (about 31 years: a typo above). */
#define FAULT_TIME_S_MAX 1e9
/* Most tokens on a line: TIME KIND ARG and a few key=value. */
#define TOKENS_MAX 8

typedef struct item {
    uint32_t lo, hi; /* inclusive range */
    uint32_t group;  /* partition group (1-based), 0 otherwise */
} item;

typedef enum target_form { TARGETS_NONE, TARGETS_LIST, TARGETS_ALL, TARGETS_RANDOM } target_form;

typedef struct parsed {
    double time_s;
    sim_fault_kind kind;
    target_form form;
    uint32_t random_k;
    item items[SIM_FAULT_ITEMS_MAX];
    uint32_t nitems;
    double value;
    double value2; /* delay: jitter ms; reorder: window ms */
    int64_t peer;  /* link faults: the one receiver, -1 = every peer */
    double duration_s;
    double restart_after_s;
} parsed;

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

const char *sim_fault_kind_name(sim_fault_kind kind)
{
    switch (kind) {
    case SIM_FAULT_CRASH:
        return "crash";
    case SIM_FAULT_RESTART:
        return "restart";
    case SIM_FAULT_JOIN:
        return "join";
    case SIM_FAULT_PARTITION:
        return "partition";
    case SIM_FAULT_HEAL:
        return "heal";
    case SIM_FAULT_LOSS_START:
        return "loss";
    case SIM_FAULT_LOSS_END:
        return "loss-end";
    case SIM_FAULT_SLOW:
        return "slow";
    case SIM_FAULT_SLOW_END:
        return "slow-end";
    case SIM_FAULT_PAUSE:
        return "pause";
    case SIM_FAULT_RESUME:
        return "resume";
    case SIM_FAULT_CORRUPT_START:
        return "corrupt";
    case SIM_FAULT_CORRUPT_END:
        return "corrupt-end";
    case SIM_FAULT_DELAY:
        return "delay";
    case SIM_FAULT_DELAY_END:
        return "delay-end";
    case SIM_FAULT_BANDWIDTH:
        return "bandwidth";
    case SIM_FAULT_BANDWIDTH_END:
        return "bandwidth-end";
    case SIM_FAULT_DUPLICATE:
        return "duplicate";
    case SIM_FAULT_DUPLICATE_END:
        return "duplicate-end";
    case SIM_FAULT_REORDER:
        return "reorder";
    case SIM_FAULT_REORDER_END:
        return "reorder-end";
    case SIM_FAULT_BANDWIDTH_TRACE:
        return "bandwidth-trace";
    case SIM_FAULT_LATENCY_TRACE:
        return "latency-trace";
    case SIM_FAULT_DROP:
        return "drop";
    case SIM_FAULT_DROP_END:
        return "drop-end";
    }
    return "unknown";
}

/* A non-negative finite number filling the whole token. */
static int parse_number(const char *s, double *out)
{
    char *end;
    if (!*s || isspace((unsigned char)*s))
        return -1;
    double v = strtod(s, &end);
    if (*end || !isfinite(v) || v < 0)
        return -1;
    *out = v;
    return 0;
}

static int parse_index(const char *s, const char *end, uint32_t *out)
{
    if (s == end || end - s > 9)
        return -1;
    uint32_t v = 0;
    for (const char *p = s; p < end; p++) {
        if (!isdigit((unsigned char)*p))
            return -1;
        v = v * 10 + (uint32_t)(*p - '0');
    }
    *out = v;
    return 0;
}

/* "3,5-9" into items with the given group; appends to p->items */
static int parse_items(const char *s, uint32_t group, parsed *p, char *err, size_t errlen)
{
    const char *q = s;
    if (!*q) {
        set_err(err, errlen, "empty target list");
        return -1;
    }
    while (*q) {
        const char *comma = strchr(q, ',');
        const char *end = comma ? comma : q + strlen(q);
        const char *dash = memchr(q, '-', (size_t)(end - q));
        item it = {.group = group};
        int bad = dash ? parse_index(q, dash, &it.lo) || parse_index(dash + 1, end, &it.hi)
                       : parse_index(q, end, &it.lo);
        if (!dash)
            it.hi = it.lo;
        if (bad || it.hi < it.lo) {
            set_err(err, errlen, "'%.*s' is not an agent index or range a-b (a <= b)",
                    (int)(end - q), q);
            return -1;
        }
        if (p->nitems == SIM_FAULT_ITEMS_MAX) {
            set_err(err, errlen, "more than %u targets or ranges on one line", SIM_FAULT_ITEMS_MAX);
            return -1;
        }
        p->items[p->nitems++] = it;
        if (!comma)
            break;
        q = comma + 1;
        if (!*q) {
            set_err(err, errlen, "target list ends with ','");
            return -1;
        }
    }
    return 0;
}

static int parse_targets(const char *s, parsed *p, char *err, size_t errlen)
{
    if (!strcmp(s, "all")) {
        p->form = TARGETS_ALL;
        return 0;
    }
    if (!strncmp(s, "random:", 7)) {
        p->form = TARGETS_RANDOM;
        if (parse_index(s + 7, s + strlen(s), &p->random_k) || p->random_k == 0) {
            set_err(err, errlen, "'%s': random:K needs a count K >= 1", s);
            return -1;
        }
        return 0;
    }
    p->form = TARGETS_LIST;
    return parse_items(s, 0, p, err, errlen);
}

static int parse_line(const char *line, parsed *p, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    size_t len = strlen(line);
    if (len >= SIM_FAULT_LINE_MAX) {
        set_err(err, errlen, "fault line longer than %u characters", SIM_FAULT_LINE_MAX - 1);
        return SIM_FAULTS_ESYNTAX;
    }
    char buf[SIM_FAULT_LINE_MAX];
    memcpy(buf, line, len + 1);
    char *tok[TOKENS_MAX + 1];
    int nt = 0;
    for (char *save = NULL, *t = strtok_r(buf, " \t", &save); t; t = strtok_r(NULL, " \t", &save)) {
        if (nt == TOKENS_MAX) {
            set_err(err, errlen, "too many words (at most %d)", TOKENS_MAX);
            return SIM_FAULTS_ESYNTAX;
        }
        tok[nt++] = t;
    }
    if (nt < 2) {
        set_err(err, errlen, "expected 'TIME KIND [ARGS]', e.g. '30 crash 3'");
        return SIM_FAULTS_ESYNTAX;
    }
    if (parse_number(tok[0], &p->time_s) || p->time_s > FAULT_TIME_S_MAX) {
        set_err(err, errlen, "'%s' is not a time in seconds (a number in [0, %.0g])", tok[0],
                FAULT_TIME_S_MAX);
        return SIM_FAULTS_ESYNTAX;
    }
    static const struct {
        const char *name;
        sim_fault_kind kind;
        int arg;          /* 1 TARGETS, 2 groups, 3 probability, 0 none */
        const char *keys; /* allowed key=value keys, space separated */
        const char *need; /* required keys, space separated */
    } kinds[] = {
        {"crash", SIM_FAULT_CRASH, 1, "restart_after", NULL},
        {"restart", SIM_FAULT_RESTART, 1, "", NULL},
        {"join", SIM_FAULT_JOIN, 1, "", NULL},
        {"partition", SIM_FAULT_PARTITION, 2, "duration", NULL},
        {"heal", SIM_FAULT_HEAL, 0, "", NULL},
        {"loss", SIM_FAULT_LOSS_START, 3, "duration", NULL},
        {"slow", SIM_FAULT_SLOW, 1, "factor duration", "factor"},
        {"pause", SIM_FAULT_PAUSE, 1, "duration", NULL},
        {"corrupt", SIM_FAULT_CORRUPT_START, 3, "duration", NULL},
        {"delay", SIM_FAULT_DELAY, 1, "ms jitter peer duration", "ms"},
        {"bandwidth", SIM_FAULT_BANDWIDTH, 1, "mbps duration", "mbps"},
        {"duplicate", SIM_FAULT_DUPLICATE, 1, "p peer duration", "p"},
        {"reorder", SIM_FAULT_REORDER, 1, "p window peer duration", "p window"},
        {"drop", SIM_FAULT_DROP, 1, "p peer duration", "p"},
    };
    size_t k = 0, nk = sizeof kinds / sizeof kinds[0];
    while (k < nk && strcmp(tok[1], kinds[k].name))
        k++;
    if (k == nk) {
        set_err(err, errlen,
                "unknown fault '%s' (crash, restart, join, partition, heal, loss, slow, pause, "
                "corrupt, delay, bandwidth, duplicate, reorder, drop)",
                tok[1]);
        return SIM_FAULTS_ESYNTAX;
    }
    p->kind = kinds[k].kind;
    p->restart_after_s = -1; /* not given: faults.restart_after_s applies */
    p->peer = -1;
    int ti = 2;
    if (kinds[k].arg) {
        if (nt < 3 || strchr(tok[2], '=')) {
            set_err(err, errlen, "'%s' needs %s", tok[1],
                    kinds[k].arg == 1   ? "targets (e.g. 3,5-7, all, random:2)"
                    : kinds[k].arg == 2 ? "groups (e.g. 0-4/5-9)"
                                        : "a probability (e.g. 0.3)");
            return SIM_FAULTS_ESYNTAX;
        }
        if (kinds[k].arg == 1) {
            if (parse_targets(tok[2], p, err, errlen))
                return SIM_FAULTS_ESYNTAX;
        } else if (kinds[k].arg == 2) {
            p->form = TARGETS_LIST;
            uint32_t g = 0;
            for (char *grp = tok[2]; grp;) {
                char *slash = strchr(grp, '/');
                if (slash)
                    *slash = 0;
                if (!*grp) {
                    set_err(err, errlen, "empty partition group (groups are 0-4/5-9)");
                    return SIM_FAULTS_ESYNTAX;
                }
                if (++g > SIM_FAULT_GROUPS_MAX) {
                    set_err(err, errlen, "more than %u partition groups", SIM_FAULT_GROUPS_MAX);
                    return SIM_FAULTS_ESYNTAX;
                }
                if (parse_items(grp, g, p, err, errlen))
                    return SIM_FAULTS_ESYNTAX;
                grp = slash ? slash + 1 : NULL;
            }
            if (g < 1) {
                set_err(err, errlen, "partition needs groups separated by '/' (e.g. 0-4/5-9)");
                return SIM_FAULTS_ESYNTAX;
            }
        } else {
            if (parse_number(tok[2], &p->value) || p->value > 1) {
                set_err(err, errlen, "'%s' is not a loss probability in [0, 1]", tok[2]);
                return SIM_FAULTS_ESYNTAX;
            }
        }
        ti = 3;
    }
    char given[64] = " "; /* the keys seen, space separated */
    for (; ti < nt; ti++) {
        char *eq = strchr(tok[ti], '=');
        if (!eq) {
            set_err(err, errlen, "unexpected '%s' (options are key=value)", tok[ti]);
            return SIM_FAULTS_ESYNTAX;
        }
        *eq = 0;
        const char *key = tok[ti], *val = eq + 1;
        /* the key must be a whole word of the allowed list */
        const char *allowed = kinds[k].keys;
        size_t kl = strlen(key);
        const char *hit = kl ? strstr(allowed, key) : NULL;
        while (hit && ((hit != allowed && hit[-1] != ' ') || (hit[kl] && hit[kl] != ' ')))
            hit = strstr(hit + 1, key);
        if (!hit) {
            set_err(err, errlen, "'%s' takes no option '%s'%s%s", tok[1], key,
                    *allowed ? " (allowed: " : "", *allowed ? allowed : "");
            if (*allowed && err && errlen > strlen(err) + 1)
                strncat(err, ")", errlen - strlen(err) - 1);
            return SIM_FAULTS_ESYNTAX;
        }
        double v;
        if (parse_number(val, &v) || v > FAULT_TIME_S_MAX) {
            set_err(err, errlen, "%s=%s: not a non-negative number", key, val);
            return SIM_FAULTS_ESYNTAX;
        }
        if (strlen(given) + kl + 2 < sizeof given) {
            strcat(given, key);
            strcat(given, " ");
        }
        if (!strcmp(key, "factor")) {
            if (v < 1 || v > 1e6) {
                set_err(err, errlen, "factor=%s: a slowdown factor in [1, 1e6]", val);
                return SIM_FAULTS_ESYNTAX;
            }
            p->value = v;
        } else if (!strcmp(key, "ms") || !strcmp(key, "jitter") || !strcmp(key, "window")) {
            if (v > SIM_FAULT_DELAY_MS_MAX) {
                set_err(err, errlen, "%s=%s: milliseconds in [0, %u]", key, val,
                        SIM_FAULT_DELAY_MS_MAX);
                return SIM_FAULTS_ESYNTAX;
            }
            if (!strcmp(key, "ms"))
                p->value = v;
            else
                p->value2 = v;
        } else if (!strcmp(key, "mbps")) {
            if (!(v > 0) || v > 1e7) {
                set_err(err, errlen, "mbps=%s: a bandwidth in (0, 1e7] Mb/s", val);
                return SIM_FAULTS_ESYNTAX;
            }
            p->value = v;
        } else if (!strcmp(key, "peer")) {
            if (v != floor(v) || v >= SIM_FAULTS_AGENTS_MAX) {
                set_err(err, errlen, "peer=%s: an agent index", val);
                return SIM_FAULTS_ESYNTAX;
            }
            p->peer = (int64_t)v;
        } else if (!strcmp(key, "p")) {
            if (v > 1) {
                set_err(err, errlen, "p=%s: a probability in [0, 1]", val);
                return SIM_FAULTS_ESYNTAX;
            }
            p->value = v;
        } else if (!strcmp(key, "duration")) {
            p->duration_s = v;
        } else {
            p->restart_after_s = v;
        }
    }
    /* every required key given */
    for (const char *q = kinds[k].need; q && *q;) {
        const char *sp = strchr(q, ' ');
        size_t ql = sp ? (size_t)(sp - q) : strlen(q);
        char want[24];
        snprintf(want, sizeof want, " %.*s ", (int)ql, q);
        if (!strstr(given, want)) {
            set_err(err, errlen, "'%s' needs %.*s=...", tok[1], (int)ql, q);
            return SIM_FAULTS_ESYNTAX;
        }
        q = sp ? sp + 1 : NULL;
    }
    return SIM_FAULTS_OK;
}

int sim_fault_check_line(const char *line, char *err, size_t errlen)
{
    parsed p;
    return parse_line(line, &p, err, errlen);
}

/* ---- building ---- */

typedef struct builder {
    sim_fault_list *l;
    size_t ev_cap, tg_cap;
} builder;

static int push_targets(builder *b, uint32_t agent, uint32_t group)
{
    sim_fault_list *l = b->l;
    if (l->targets_len == b->tg_cap) {
        size_t cap = b->tg_cap ? b->tg_cap * 2 : 256;
        uint32_t *t = realloc(l->targets, cap * sizeof *t);
        if (!t)
            return SIM_FAULTS_ENOMEM;
        l->targets = t;
        uint32_t *g = realloc(l->groups, cap * sizeof *g);
        if (!g)
            return SIM_FAULTS_ENOMEM;
        l->groups = g;
        b->tg_cap = cap;
    }
    l->targets[l->targets_len] = agent;
    l->groups[l->targets_len++] = group;
    return SIM_FAULTS_OK;
}

static int push_event2(builder *b, uint64_t t_us, sim_fault_kind kind, uint32_t first,
                       uint32_t count, double value, double value2, int32_t line)
{
    sim_fault_list *l = b->l;
    if (l->len == SIM_FAULTS_EVENTS_MAX)
        return SIM_FAULTS_ETOOMANY;
    if (l->len == b->ev_cap) {
        size_t cap = b->ev_cap ? b->ev_cap * 2 : 64;
        sim_fault *e = realloc(l->events, cap * sizeof *e);
        if (!e)
            return SIM_FAULTS_ENOMEM;
        l->events = e;
        b->ev_cap = cap;
    }
    l->events[l->len++] = (sim_fault){.time_us = t_us,
                                      .kind = kind,
                                      .first = first,
                                      .count = count,
                                      .value = value,
                                      .value2 = value2,
                                      .peer = -1,
                                      .line = line};
    return SIM_FAULTS_OK;
}

static int push_event(builder *b, uint64_t t_us, sim_fault_kind kind, uint32_t first,
                      uint32_t count, double value, int32_t line)
{
    return push_event2(b, t_us, kind, first, count, value, 0, line);
}

static uint64_t s_to_us(double s)
{
    return (uint64_t)llround(s * 1e6);
}

static int cmp_event(const void *a, const void *b)
{
    const sim_fault *x = a, *y = b;
    if (x->time_us != y->time_us)
        return x->time_us < y->time_us ? -1 : 1;
    /* value of first is the insertion index while sorting (see below) */
    return x->first < y->first ? -1 : x->first > y->first;
}

static int add_line(builder *b, const sim_faults_config *cfg, size_t li, char *err, size_t errlen)
{
    parsed p;
    char msg[192];
    int rc = parse_line(cfg->lines[li], &p, msg, sizeof msg);
    if (rc) {
        set_err(err, errlen, "fault line %zu ('%s'): %s", li + 1, cfg->lines[li], msg);
        return rc;
    }
    sim_fault_list *l = b->l;
    uint32_t first = (uint32_t)l->targets_len;
    if (p.form == TARGETS_ALL) {
        for (uint32_t a = 0; a < cfg->agents; a++)
            if ((rc = push_targets(b, a, 0)))
                return rc;
    } else if (p.form == TARGETS_RANDOM) {
        if (p.random_k > cfg->agents) {
            set_err(err, errlen, "fault line %zu ('%s'): random:%u but only %u agents", li + 1,
                    cfg->lines[li], p.random_k, cfg->agents);
            return SIM_FAULTS_ERANGE;
        }
        /* partial Fisher-Yates over a seeded permutation, one stream per line */
        uint32_t *perm = malloc(cfg->agents * sizeof *perm);
        if (!perm)
            return SIM_FAULTS_ENOMEM;
        for (uint32_t a = 0; a < cfg->agents; a++)
            perm[a] = a;
        model_rng r;
        model_rng_seed(&r, cfg->seed ^ SALT_TARGETS, li);
        for (uint32_t i = 0; i < p.random_k && rc == 0; i++) {
            uint32_t j = i + (uint32_t)model_rng_below(&r, cfg->agents - i);
            uint32_t t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
            rc = push_targets(b, perm[i], 0);
        }
        free(perm);
        if (rc)
            return rc;
    } else if (p.form == TARGETS_LIST) {
        for (uint32_t i = 0; i < p.nitems; i++) {
            if (p.items[i].hi >= cfg->agents) {
                set_err(err, errlen, "fault line %zu ('%s'): agent %u out of range (0..%u)", li + 1,
                        cfg->lines[li], p.items[i].hi, cfg->agents - 1);
                return SIM_FAULTS_ERANGE;
            }
            for (uint32_t a = p.items[i].lo; a <= p.items[i].hi; a++)
                if ((rc = push_targets(b, a, p.items[i].group)))
                    return rc;
        }
    }
    uint32_t count = (uint32_t)(l->targets_len - first);
    if (p.kind == SIM_FAULT_PARTITION) {
        /* an agent in two groups is a mistake in the scenario */
        uint8_t *seen = calloc(cfg->agents, 1);
        if (!seen)
            return SIM_FAULTS_ENOMEM;
        for (uint32_t i = first; i < first + count && rc == 0; i++) {
            if (seen[l->targets[i]]) {
                set_err(err, errlen, "fault line %zu ('%s'): agent %u is in two groups", li + 1,
                        cfg->lines[li], l->targets[i]);
                rc = SIM_FAULTS_ERANGE;
            }
            seen[l->targets[i]] = 1;
        }
        free(seen);
        if (rc)
            return rc;
    }
    if (p.peer >= (int64_t)cfg->agents) {
        set_err(err, errlen, "fault line %zu ('%s'): peer %lld out of range (0..%u)", li + 1,
                cfg->lines[li], (long long)p.peer, cfg->agents - 1);
        return SIM_FAULTS_ERANGE;
    }
    uint64_t t = s_to_us(p.time_s);
    int32_t line = (int32_t)li;
    switch (p.kind) {
    case SIM_FAULT_CRASH:
        rc = push_event(b, t, SIM_FAULT_CRASH, first, count, 0, line);
        double ra = p.restart_after_s >= 0 ? p.restart_after_s : cfg->restart_after_s;
        if (!rc && ra > 0)
            rc = push_event(b, t + s_to_us(ra), SIM_FAULT_RESTART, first, count, 0, line);
        break;
    case SIM_FAULT_PARTITION:
        rc = push_event(b, t, SIM_FAULT_PARTITION, first, count, 0, line);
        if (!rc && p.duration_s > 0)
            rc = push_event(b, t + s_to_us(p.duration_s), SIM_FAULT_HEAL, first, 0, 0, line);
        break;
    case SIM_FAULT_LOSS_START:
        rc = push_event(b, t, SIM_FAULT_LOSS_START, first, 0, p.value, line);
        if (!rc && p.duration_s > 0)
            rc = push_event(b, t + s_to_us(p.duration_s), SIM_FAULT_LOSS_END, first, 0, 0, line);
        break;
    case SIM_FAULT_SLOW:
        rc = push_event(b, t, SIM_FAULT_SLOW, first, count, p.value, line);
        if (!rc && p.duration_s > 0)
            rc =
                push_event(b, t + s_to_us(p.duration_s), SIM_FAULT_SLOW_END, first, count, 1, line);
        break;
    case SIM_FAULT_PAUSE:
        rc = push_event(b, t, SIM_FAULT_PAUSE, first, count, p.duration_s, line);
        if (!rc && p.duration_s > 0)
            rc = push_event(b, t + s_to_us(p.duration_s), SIM_FAULT_RESUME, first, count, 0, line);
        break;
    case SIM_FAULT_CORRUPT_START:
        rc = push_event(b, t, SIM_FAULT_CORRUPT_START, first, 0, p.value, line);
        if (!rc && p.duration_s > 0)
            rc = push_event(b, t + s_to_us(p.duration_s), SIM_FAULT_CORRUPT_END, first, 0, 0, line);
        break;
    case SIM_FAULT_DELAY:
    case SIM_FAULT_BANDWIDTH:
    case SIM_FAULT_DUPLICATE:
    case SIM_FAULT_REORDER:
    case SIM_FAULT_DROP:
        /* each of these kinds is followed by its END in the enum */
        rc = push_event2(b, t, p.kind, first, count, p.value, p.value2, line);
        if (!rc && p.duration_s > 0)
            rc = push_event(b, t + s_to_us(p.duration_s), (sim_fault_kind)(p.kind + 1), first,
                            count, 0, line);
        /* both events name the receiver (-1: every peer) */
        for (size_t e = l->len - (p.duration_s > 0 ? 2 : 1); !rc && e < l->len; e++)
            l->events[e].peer = (int32_t)p.peer;
        break;
    default:
        rc = push_event(b, t, p.kind, first, count, 0, line);
        break;
    }
    return rc;
}

static double exp_gap_s(model_rng *r, double rate)
{
    return -log(1.0 - model_rng_uniform_double(r)) / rate;
}

static int add_random(builder *b, const sim_faults_config *cfg)
{
    int rc = SIM_FAULTS_OK;
    double horizon_s = (double)cfg->horizon_us / 1e6;
    if (cfg->crash_rate_per_s > 0) {
        model_rng r;
        model_rng_seed(&r, cfg->seed ^ SALT_CRASH, 0);
        /* up[0..nup) are the agents up; crashed ones wait in a FIFO for their
         * restart (restart_after is the same for all, so FIFO is time order) */
        uint32_t *up = malloc(cfg->agents * sizeof *up);
        uint32_t *down = malloc(cfg->agents * sizeof *down);
        double *down_at = malloc(cfg->agents * sizeof *down_at);
        if (!up || !down || !down_at) {
            free(up), free(down), free(down_at);
            return SIM_FAULTS_ENOMEM;
        }
        uint32_t nup = cfg->agents, dh = 0, dn = 0; /* FIFO head index, length */
        for (uint32_t a = 0; a < cfg->agents; a++)
            up[a] = a;
        for (double t = exp_gap_s(&r, cfg->crash_rate_per_s); t < horizon_s && rc == 0;
             t += exp_gap_s(&r, cfg->crash_rate_per_s)) {
            while (dn && cfg->restart_after_s > 0 && down_at[dh] + cfg->restart_after_s <= t) {
                up[nup++] = down[dh];
                dh = (dh + 1) % cfg->agents;
                dn--;
            }
            if (nup == 0)
                continue;
            uint32_t i = (uint32_t)model_rng_below(&r, nup);
            uint32_t victim = up[i];
            up[i] = up[--nup];
            down[(dh + dn) % cfg->agents] = victim;
            down_at[(dh + dn) % cfg->agents] = t;
            dn++;
            uint32_t first = (uint32_t)b->l->targets_len;
            rc = push_targets(b, victim, 0);
            if (!rc)
                rc = push_event(b, s_to_us(t), SIM_FAULT_CRASH, first, 1, 0, -1);
            double back = t + cfg->restart_after_s;
            if (!rc && cfg->restart_after_s > 0 && back < horizon_s)
                rc = push_event(b, s_to_us(back), SIM_FAULT_RESTART, first, 1, 0, -1);
        }
        free(up), free(down), free(down_at);
    }
    if (rc == 0 && cfg->loss_burst_rate_per_s > 0 && cfg->loss_burst_s > 0) {
        model_rng r;
        model_rng_seed(&r, cfg->seed ^ SALT_BURST, 0);
        for (double t = exp_gap_s(&r, cfg->loss_burst_rate_per_s); t < horizon_s && rc == 0;
             t += cfg->loss_burst_s + exp_gap_s(&r, cfg->loss_burst_rate_per_s)) {
            rc = push_event(b, s_to_us(t), SIM_FAULT_LOSS_START, 0, 0, cfg->loss_burst_prob, -1);
            if (!rc)
                rc = push_event(b, s_to_us(t + cfg->loss_burst_s), SIM_FAULT_LOSS_END, 0, 0, 0, -1);
        }
    }
    return rc;
}

/* Stable sort by time: sort on (time, insertion index) with the index
 * parked in `first`, then put `first` back. */
static int sort_stable(sim_fault_list *out)
{
    uint32_t *firsts = malloc((out->len ? out->len : 1) * sizeof *firsts);
    if (!firsts)
        return SIM_FAULTS_ENOMEM;
    for (size_t i = 0; i < out->len; i++) {
        firsts[i] = out->events[i].first;
        out->events[i].first = (uint32_t)i;
    }
    if (out->len > 1) /* qsort(NULL, 0, ...) is undefined */
        qsort(out->events, out->len, sizeof *out->events, cmp_event);
    for (size_t i = 0; i < out->len; i++)
        out->events[i].first = firsts[out->events[i].first];
    free(firsts);
    return SIM_FAULTS_OK;
}

int sim_faults_build(sim_fault_list *out, const sim_faults_config *cfg, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (cfg->agents == 0 || cfg->agents > SIM_FAULTS_AGENTS_MAX) {
        set_err(err, errlen, "faults: %u agents (1..%u)", cfg->agents, SIM_FAULTS_AGENTS_MAX);
        return SIM_FAULTS_ERANGE;
    }
    if (!(cfg->crash_rate_per_s >= 0 && isfinite(cfg->crash_rate_per_s)) ||
        !(cfg->restart_after_s >= 0 && isfinite(cfg->restart_after_s)) ||
        !(cfg->loss_burst_rate_per_s >= 0 && isfinite(cfg->loss_burst_rate_per_s)) ||
        !(cfg->loss_burst_prob >= 0 && cfg->loss_burst_prob <= 1) ||
        !(cfg->loss_burst_s >= 0 && isfinite(cfg->loss_burst_s))) {
        set_err(err, errlen, "faults: a rate, duration or probability is out of range");
        return SIM_FAULTS_ERANGE;
    }
    out->agents = cfg->agents;
    builder b = {.l = out};
    int rc = SIM_FAULTS_OK;
    for (size_t i = 0; i < cfg->nlines && rc == 0; i++)
        rc = add_line(&b, cfg, i, err, errlen);
    if (rc == 0)
        rc = add_random(&b, cfg);
    if (rc == 0)
        rc = sort_stable(out);
    if (rc == 0) {
        out->absent = calloc(cfg->agents, 1);
        uint8_t *seen = calloc(cfg->agents, 1);
        if (!out->absent || !seen) {
            rc = SIM_FAULTS_ENOMEM;
        } else {
            for (size_t i = 0; i < out->len; i++) {
                const sim_fault *e = &out->events[i];
                if (e->kind != SIM_FAULT_CRASH && e->kind != SIM_FAULT_RESTART &&
                    e->kind != SIM_FAULT_JOIN)
                    continue;
                for (uint32_t j = e->first; j < e->first + e->count; j++) {
                    uint32_t a = out->targets[j];
                    if (!seen[a])
                        out->absent[a] = e->kind == SIM_FAULT_JOIN;
                    seen[a] = 1;
                }
            }
        }
        free(seen);
    }
    if (rc) {
        if (rc == SIM_FAULTS_ENOMEM)
            set_err(err, errlen, "faults: out of memory");
        else if (rc == SIM_FAULTS_ETOOMANY)
            set_err(err, errlen, "faults: more than %u fault events; lower the rates",
                    SIM_FAULTS_EVENTS_MAX);
        sim_fault_list_free(out);
    }
    return rc;
}

void sim_fault_list_free(sim_fault_list *l)
{
    free(l->events);
    free(l->targets);
    free(l->groups);
    free(l->absent);
    memset(l, 0, sizeof *l);
}

int sim_fault_list_absent_at_start(const sim_fault_list *l, uint32_t agent)
{
    return l->absent && agent < l->agents && l->absent[agent];
}

/* ---- targets and traces ---- */

int sim_faults_targets(const char *spec, uint32_t agents, uint8_t *member, char *err, size_t errlen)
{
    parsed p;
    memset(&p, 0, sizeof p);
    if (strlen(spec) >= SIM_FAULT_LINE_MAX) {
        set_err(err, errlen, "longer than %u characters", SIM_FAULT_LINE_MAX - 1);
        return SIM_FAULTS_ESYNTAX;
    }
    if (!strncmp(spec, "random:", 7)) {
        set_err(err, errlen, "'%s': a list of agents and ranges (3,5-9) or all", spec);
        return SIM_FAULTS_ESYNTAX;
    }
    if (parse_targets(spec, &p, err, errlen))
        return SIM_FAULTS_ESYNTAX;
    if (member)
        memset(member, p.form == TARGETS_ALL, agents);
    for (uint32_t i = 0; i < p.nitems; i++) {
        if (p.items[i].hi >= agents) {
            set_err(err, errlen, "agent %u out of range (0..%u)", p.items[i].hi, agents - 1);
            return SIM_FAULTS_ERANGE;
        }
        if (member)
            for (uint32_t a = p.items[i].lo; a <= p.items[i].hi; a++)
                member[a] = 1;
    }
    return SIM_FAULTS_OK;
}

typedef struct trace_ctx {
    builder b;
    sim_fault_kind kind;
    uint32_t first, count;
} trace_ctx;

static int trace_change(void *ctx, uint64_t t_us, double value)
{
    trace_ctx *c = ctx;
    return push_event(&c->b, t_us, c->kind, c->first, c->count, value, -1);
}

int sim_faults_add_trace(sim_fault_list *l, sim_fault_kind kind, const sim_trace *t,
                         const uint8_t *member, uint64_t horizon_us, char *err, size_t errlen)
{
    if (kind != SIM_FAULT_BANDWIDTH_TRACE && kind != SIM_FAULT_LATENCY_TRACE) {
        set_err(err, errlen, "faults: %s is not a trace kind", sim_fault_kind_name(kind));
        return SIM_FAULTS_ERANGE;
    }
    /* the builder's capacities are the current lengths: it grows from there */
    trace_ctx c = {.b = {.l = l, .ev_cap = l->len, .tg_cap = l->targets_len}, .kind = kind};
    c.first = (uint32_t)l->targets_len;
    int rc = SIM_FAULTS_OK;
    for (uint32_t a = 0; a < l->agents && rc == 0; a++)
        if (member[a])
            rc = push_targets(&c.b, a, 0);
    c.count = (uint32_t)(l->targets_len - c.first);
    if (rc == 0) {
        rc = sim_trace_changes(t, horizon_us, trace_change, &c);
        if (rc == SIM_TRACE_ETOOMANY)
            rc = SIM_FAULTS_ETOOMANY;
    }
    if (rc == 0)
        rc = sort_stable(l);
    if (rc == SIM_FAULTS_ETOOMANY)
        set_err(err, errlen,
                "the trace makes more than %u changes over the run (or the fault list more than "
                "%u events); use a longer period or a shorter run",
                SIM_TRACE_CHANGES_MAX, SIM_FAULTS_EVENTS_MAX);
    else if (rc)
        set_err(err, errlen, "faults: out of memory");
    return rc;
}
