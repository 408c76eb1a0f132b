/* agent/chaos_sched — see chaos_sched.h for the text form. */
#include "agent/chaos_sched.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "model/rng.h"

const char *const chaos_action_names[] = {"partition", "drop",    "delay",   "bandwidth",
                                          "duplicate", "reorder", "corrupt", "pause",
                                          "slow",      "kill",    NULL};
_Static_assert(CHAOS_MEMBERS_MAX <= 64, "partition sides are 64-bit masks");

static int errf(char *err, size_t cap, int line, const char *fmt, ...)
{
    int n = snprintf(err, cap, "line %d: ", line);
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < cap)
        vsnprintf(err + n, cap - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

/* "0,1,2" -> bit mask; -1 if malformed or out of range. */
static int parse_side(const char *s, size_t len, int members, uint64_t *mask)
{
    *mask = 0;
    char buf[256];
    if (!len || len >= sizeof buf)
        return -1;
    memcpy(buf, s, len);
    buf[len] = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        uint64_t v;
        if (!common_parse_u64(t, &v) || v >= (uint64_t)members)
            return -1;
        *mask |= 1ull << v;
    }
    return *mask ? 0 : -1;
}

static int parse_kv(chaos_event *e, const char *k, const char *v, int members)
{
    uint64_t u;
    if (!strcmp(k, "for"))
        return common_parse_f64(v, &e->for_s) && e->for_s > 0 && e->for_s <= 3600 ? 0 : -1;
    if (!strcmp(k, "on"))
        return common_parse_u64(v, &u) && u < (uint64_t)members ? (e->on = (int)u, 0) : -1;
    if (!strcmp(k, "p"))
        return common_parse_f64(v, &e->p) && e->p >= 0 && e->p <= 1 ? 0 : -1;
    if (!strcmp(k, "ms") || !strcmp(k, "jitter") || !strcmp(k, "window")) {
        if (!common_parse_u64(v, &u) || u > 60000)
            return -1;
        *(k[0] == 'm' ? &e->ms : k[0] == 'j' ? &e->jitter : &e->window) = (uint32_t)u;
        return 0;
    }
    if (!strcmp(k, "bps"))
        return common_parse_u64(v, &e->bps) && e->bps >= 8000 ? 0 : -1;
    if (!strcmp(k, "factor"))
        return common_parse_f64(v, &e->factor) && e->factor >= 1 && e->factor <= 1000 ? 0 : -1;
    if (!strcmp(k, "sides")) {
        const char *slash = strchr(v, '/');
        if (!slash || parse_side(v, (size_t)(slash - v), members, &e->side_a) ||
            parse_side(slash + 1, strlen(slash + 1), members, &e->side_b) ||
            (e->side_a & e->side_b))
            return -1;
        return 0;
    }
    return -2;
}

/* What each action needs. */
static const char *check_event(const chaos_event *e)
{
    if (e->for_s <= 0)
        return "needs for=SECONDS (when the fault is undone)";
    switch (e->action) {
    case CHAOS_PARTITION:
        return e->side_a && e->side_b ? NULL : "needs sides=A,B/C,D";
    case CHAOS_DROP:
    case CHAOS_DUPLICATE:
    case CHAOS_CORRUPT:
        return e->p > 0 ? NULL : "needs p= (0 < p <= 1)";
    case CHAOS_REORDER:
        return e->p > 0 && e->window ? NULL : "needs p= and window=MS";
    case CHAOS_DELAY:
        return e->ms || e->jitter ? NULL : "needs ms= (and optionally jitter=)";
    case CHAOS_BANDWIDTH:
        return e->bps ? NULL : "needs bps= (>= 8000)";
    case CHAOS_SLOW:
        return e->factor > 1 ? NULL : "needs factor= (> 1)";
    case CHAOS_KILL:
        return e->on >= 0 ? NULL : "needs on=MEMBER";
    default:
        return NULL;
    }
}

static int cmp_event(const void *a, const void *b)
{
    const chaos_event *x = a, *y = b;
    return (x->at_s > y->at_s) - (x->at_s < y->at_s);
}

static int parse_line(chaos_sched *s, char *line, int members, int ln, char *err, size_t errlen)
{
    char *save = NULL, *t = strtok_r(line, " \t", &save);
    if (!t)
        return 0;
    if (!strcmp(t, "duration")) {
        char *v = strtok_r(NULL, " \t", &save);
        if (!v || !common_parse_f64(v, &s->duration_s) || s->duration_s <= 0 ||
            s->duration_s > 86400)
            return errf(err, errlen, ln, "duration needs seconds (0-86400)");
        return 0;
    }
    if (s->n >= CHAOS_EVENTS_MAX)
        return errf(err, errlen, ln, "more than %u faults", CHAOS_EVENTS_MAX);
    chaos_event *e = &s->ev[s->n];
    memset(e, 0, sizeof *e);
    e->on = -1;
    if (!common_parse_f64(t, &e->at_s) || e->at_s < 0 || e->at_s > 86400)
        return errf(err, errlen, ln, "'%s' is not a time in seconds", t);
    char *a = strtok_r(NULL, " \t", &save);
    int act = -1;
    for (int i = 0; a && chaos_action_names[i]; i++)
        if (!strcmp(a, chaos_action_names[i]))
            act = i;
    if (act < 0)
        return errf(err, errlen, ln,
                    "'%s' is not an action (partition, drop, delay, bandwidth, "
                    "duplicate, reorder, corrupt, pause, slow, kill)",
                    a ? a : "");
    e->action = (chaos_action)act;
    for (char *kv; (kv = strtok_r(NULL, " \t", &save));) {
        char *eq = strchr(kv, '=');
        if (!eq)
            return errf(err, errlen, ln, "'%s' is not key=value", kv);
        *eq = 0;
        int rc = parse_kv(e, kv, eq + 1, members);
        if (rc)
            return errf(err, errlen, ln, rc == -2 ? "unknown key '%s'" : "bad value for '%s'", kv);
    }
    const char *why = check_event(e);
    if (why)
        return errf(err, errlen, ln, "%s %s", chaos_action_names[act], why);
    s->n++;
    return 0;
}

int chaos_sched_parse(chaos_sched *s, const char *text, int members, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    if (members < 1 || members > (int)CHAOS_MEMBERS_MAX)
        return errf(err, errlen, 0, "%d members (1-%u)", members, CHAOS_MEMBERS_MAX);
    char line[1024];
    int ln = 0;
    for (const char *p = text; *p;) {
        size_t n = strcspn(p, "\n");
        ln++;
        if (n >= sizeof line)
            return errf(err, errlen, ln, "longer than %zu bytes", sizeof line - 1);
        memcpy(line, p, n);
        line[n] = 0;
        p += n + (p[n] == '\n');
        char *hash = strchr(line, '#');
        if (hash)
            *hash = 0;
        if (parse_line(s, line, members, ln, err, errlen))
            return -1;
    }
    qsort(s->ev, s->n, sizeof s->ev[0], cmp_event);
    return 0;
}

int chaos_sched_load(chaos_sched *s, const char *path, int members, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    char *buf = malloc(65537);
    size_t n = buf ? fread(buf, 1, 65537, f) : 0;
    fclose(f);
    if (!buf || n > 65536) {
        snprintf(err, errlen, "%s: %s", path, buf ? "larger than 64 KiB" : "out of memory");
        free(buf);
        return -1;
    }
    buf[n] = 0;
    char e2[256];
    int rc = chaos_sched_parse(s, buf, members, e2, sizeof e2);
    if (rc)
        snprintf(err, errlen, "%s: %s", path, e2);
    free(buf);
    return rc;
}

/* The kinds a random schedule must cover, in the order they are dropped
 * from when the run is too short for all of them (the last first): the
 * seven of issue 20's nemesis (kill and restart, pause, slow trainer,
 * partition and heal, loss burst, slow link, corrupt frames), then the
 * other link faults. */
static const chaos_action cover_order[CHAOS_ACTION_COUNT] = {
    CHAOS_KILL,      CHAOS_PAUSE,   CHAOS_SLOW,  CHAOS_PARTITION, CHAOS_DROP,
    CHAOS_BANDWIDTH, CHAOS_CORRUPT, CHAOS_DELAY, CHAOS_DUPLICATE, CHAOS_REORDER};
#define CHAOS_CORE_KINDS 7

size_t chaos_sched_random_count(double duration_s, double rate_per_min)
{
    double window = duration_s - CHAOS_RANDOM_WARMUP_S - CHAOS_RANDOM_SETTLE_S;
    if (window < CHAOS_RANDOM_SLOT_MIN_S)
        return 0;
    double want = rate_per_min * duration_s / 60.0;
    double fit = floor(window / CHAOS_RANDOM_SLOT_MIN_S);
    double k = want < fit ? want : fit;
    if (k < 1)
        k = 1;
    return k > CHAOS_EVENTS_MAX ? CHAOS_EVENTS_MAX : (size_t)k;
}

static void draw_params(chaos_event *e, model_rng *rng, int n)
{
    int on = (int)model_rng_below(rng, (uint64_t)n);
    switch (e->action) {
    case CHAOS_PARTITION: /* one member cut off from the rest, or halves */
        e->side_a = model_rng_below(rng, 2) && n >= 4 ? (1ull << (n / 2)) - 1 : 1ull << on;
        e->side_b = ((n >= 64 ? ~0ull : (1ull << n) - 1)) & ~e->side_a;
        break;
    case CHAOS_DROP:
        e->p = 0.1 + 0.1 * (double)model_rng_below(rng, 5);
        break;
    case CHAOS_DELAY:
        e->ms = 20 + 20 * (uint32_t)model_rng_below(rng, 10);
        e->jitter = e->ms / 2;
        break;
    case CHAOS_BANDWIDTH:
        e->bps = 1000000;
        break;
    case CHAOS_DUPLICATE:
        e->p = 0.2;
        break;
    case CHAOS_REORDER:
        e->p = 0.3;
        e->window = 50;
        break;
    case CHAOS_CORRUPT:
        e->p = 0.02;
        break;
    case CHAOS_SLOW:
        e->factor = 2 + (double)model_rng_below(rng, 4);
        break;
    default:
        break;
    }
    /* kill, pause, slow and bandwidth (a slow link) name one member; the
     * other link faults one member or every member */
    if (e->action != CHAOS_PARTITION &&
        (e->action == CHAOS_KILL || e->action == CHAOS_PAUSE || e->action == CHAOS_SLOW ||
         e->action == CHAOS_BANDWIDTH || model_rng_below(rng, 2)))
        e->on = on;
}

void chaos_sched_random(chaos_sched *s, uint64_t seed, int n, double duration_s,
                        double rate_per_min, int allow_kill)
{
    memset(s, 0, sizeof *s);
    s->duration_s = duration_s;
    model_rng rng;
    model_rng_seed(&rng, seed, 0x63686173u); /* "chas" */
    size_t k = chaos_sched_random_count(duration_s, rate_per_min);
    if (!k)
        return;
    /* the kinds this schedule may draw, in cover order */
    chaos_action kinds[CHAOS_ACTION_COUNT];
    size_t nk = 0, core = 0;
    for (size_t i = 0; i < CHAOS_ACTION_COUNT; i++) {
        chaos_action a = cover_order[i];
        if ((a == CHAOS_KILL && (!allow_kill || n < 2)) || (a == CHAOS_PARTITION && n < 2))
            continue;
        kinds[nk++] = a;
        core += i < CHAOS_CORE_KINDS;
    }
    /* slot j gets kind[j]: the first min(k, nk) slots take distinct kinds
     * (the core ones first, a random subset of them when k < core; then
     * a random subset of the others), the rest are uniform draws */
    chaos_action slot[CHAOS_EVENTS_MAX];
    for (size_t i = core; i > 1; i--) { /* shuffle the core kinds, then the others */
        size_t j = (size_t)model_rng_below(&rng, i);
        chaos_action t = kinds[i - 1];
        kinds[i - 1] = kinds[j];
        kinds[j] = t;
    }
    for (size_t i = nk - core; i > 1; i--) {
        size_t j = (size_t)model_rng_below(&rng, i);
        chaos_action t = kinds[core + i - 1];
        kinds[core + i - 1] = kinds[core + j];
        kinds[core + j] = t;
    }
    for (size_t j = 0; j < k; j++)
        slot[j] = j < nk ? kinds[j] : kinds[model_rng_below(&rng, nk)];
    for (size_t j = k; j > 1; j--) { /* then the order in time */
        size_t i = (size_t)model_rng_below(&rng, j);
        chaos_action t = slot[j - 1];
        slot[j - 1] = slot[i];
        slot[i] = t;
    }
    /* k equal slots over [warm-up, duration - settle]; a fault lasts 5 s
     * up to 15 s or its slot less 2 s, and starts anywhere that leaves 2 s
     * before the next slot (one fault at a time) */
    double len =
        floor((duration_s - CHAOS_RANDOM_WARMUP_S - CHAOS_RANDOM_SETTLE_S) / (double)k * 10) /
        10; /* tenths of a second: schedules print short */
    double longest = len - CHAOS_RANDOM_GAP_S < 15 ? len - CHAOS_RANDOM_GAP_S : 15;
    for (size_t j = 0; j < k; j++) {
        chaos_event e = {.on = -1, .action = slot[j]};
        e.for_s = 5 + (double)model_rng_below(&rng, (uint64_t)floor(longest - 5) + 1);
        double slack = len - CHAOS_RANDOM_GAP_S - e.for_s;
        e.at_s = round((CHAOS_RANDOM_WARMUP_S + len * (double)j) * 10 +
                       floor(model_rng_uniform_double(&rng) * slack * 10)) /
                 10;
        draw_params(&e, &rng, n);
        s->ev[s->n++] = e;
    }
}

static void write_side(FILE *out, uint64_t mask)
{
    int first = 1;
    for (int i = 0; i < 64; i++)
        if (mask >> i & 1) {
            fprintf(out, "%s%d", first ? "" : ",", i);
            first = 0;
        }
}

void chaos_sched_write(const chaos_sched *s, FILE *out)
{
    if (s->duration_s > 0)
        fprintf(out, "duration %g\n", s->duration_s);
    for (size_t i = 0; i < s->n; i++) {
        const chaos_event *e = &s->ev[i];
        fprintf(out, "%g %s", e->at_s, chaos_action_names[e->action]);
        if (e->action == CHAOS_PARTITION) {
            fprintf(out, " sides=");
            write_side(out, e->side_a);
            fprintf(out, "/");
            write_side(out, e->side_b);
        }
        if (e->p > 0)
            fprintf(out, " p=%g", e->p);
        if (e->ms)
            fprintf(out, " ms=%u", e->ms);
        if (e->jitter)
            fprintf(out, " jitter=%u", e->jitter);
        if (e->window)
            fprintf(out, " window=%u", e->window);
        if (e->bps)
            fprintf(out, " bps=%" PRIu64, e->bps);
        if (e->factor > 0)
            fprintf(out, " factor=%g", e->factor);
        if (e->on >= 0)
            fprintf(out, " on=%d", e->on);
        fprintf(out, " for=%g\n", e->for_s);
    }
}

static size_t side_text(uint64_t mask, char *out, size_t cap)
{
    size_t len = 0;
    out[0] = 0;
    for (int i = 0; i < 64 && len < cap; i++)
        if (mask >> i & 1)
            len += (size_t)snprintf(out + len, cap - len, "%s%d", len ? "," : "", i);
    return len;
}

int chaos_event_sim_line(const chaos_event *e, char *out, size_t cap)
{
    char who[16], a[256], b[256];
    snprintf(who, sizeof who, e->on >= 0 ? "%d" : "all", e->on);
    switch (e->action) {
    case CHAOS_PARTITION:
        side_text(e->side_a, a, sizeof a);
        side_text(e->side_b, b, sizeof b);
        snprintf(out, cap, "%g partition %s/%s duration=%g", e->at_s, a, b, e->for_s);
        return 1;
    case CHAOS_DROP: /* every member: the network's loss; one member: its own frames */
        if (e->on < 0)
            snprintf(out, cap, "%g loss %g duration=%g", e->at_s, e->p, e->for_s);
        else
            snprintf(out, cap, "%g drop %d p=%g duration=%g", e->at_s, e->on, e->p, e->for_s);
        return 1;
    case CHAOS_CORRUPT:
        snprintf(out, cap, "%g corrupt %g duration=%g", e->at_s, e->p, e->for_s);
        return 1;
    case CHAOS_PAUSE:
        snprintf(out, cap, "%g pause %s duration=%g", e->at_s, who, e->for_s);
        return 1;
    case CHAOS_SLOW:
        snprintf(out, cap, "%g slow %s factor=%g duration=%g", e->at_s, who, e->factor, e->for_s);
        return 1;
    case CHAOS_KILL:
        snprintf(out, cap, "%g crash %d restart_after=%g", e->at_s, e->on, e->for_s);
        return 1;
    /* the link faults: on the frames the member sends, as its rule */
    case CHAOS_DELAY:
        snprintf(out, cap, "%g delay %s ms=%u jitter=%u duration=%g", e->at_s, who, e->ms,
                 e->jitter, e->for_s);
        return 1;
    case CHAOS_BANDWIDTH:
        snprintf(out, cap, "%g bandwidth %s mbps=%.17g duration=%g", e->at_s, who,
                 (double)e->bps / 1e6, e->for_s);
        return 1;
    case CHAOS_DUPLICATE:
        snprintf(out, cap, "%g duplicate %s p=%g duration=%g", e->at_s, who, e->p, e->for_s);
        return 1;
    case CHAOS_REORDER:
        snprintf(out, cap, "%g reorder %s p=%g window=%u duration=%g", e->at_s, who, e->p,
                 e->window, e->for_s);
        return 1;
    default:
        return 0;
    }
}

static void ids_of(uint64_t mask, const uint64_t *ids, int n, char *out, size_t cap)
{
    size_t len = 0;
    out[0] = 0;
    for (int i = 0; i < n && len < cap; i++)
        if (mask >> i & 1)
            len += (size_t)snprintf(out + len, cap - len, "%s%016" PRIx64, len ? "," : "", ids[i]);
}

void chaos_event_request(const chaos_event *e, int member, const uint64_t *ids, int n, int undo,
                         char *out, size_t cap)
{
    out[0] = 0;
    if (e->action == CHAOS_KILL)
        return;
    if (e->action == CHAOS_PARTITION) {
        uint64_t other = e->side_a >> member & 1   ? e->side_b
                         : e->side_b >> member & 1 ? e->side_a
                                                   : 0;
        if (!other)
            return;
        char list[CHAOS_MEMBERS_MAX * 17 + 1];
        ids_of(other, ids, n, list, sizeof list);
        snprintf(out, cap, "partition=%s", undo ? "" : list);
        return;
    }
    if (e->on >= 0 && e->on != member)
        return;
    switch (e->action) {
    case CHAOS_DROP:
        snprintf(out, cap, "drop=%g", undo ? 0 : e->p);
        break;
    case CHAOS_DUPLICATE:
        snprintf(out, cap, "duplicate=%g", undo ? 0 : e->p);
        break;
    case CHAOS_CORRUPT:
        snprintf(out, cap, "corrupt=%g", undo ? 0 : e->p);
        break;
    case CHAOS_REORDER:
        snprintf(out, cap, "reorder=%g reorder_window_ms=%u", undo ? 0 : e->p,
                 undo ? 0 : e->window);
        break;
    case CHAOS_DELAY:
        snprintf(out, cap, "delay_ms=%u jitter_ms=%u", undo ? 0 : e->ms, undo ? 0 : e->jitter);
        break;
    case CHAOS_BANDWIDTH:
        snprintf(out, cap, "bandwidth_bps=%" PRIu64, undo ? (uint64_t)0 : e->bps);
        break;
    case CHAOS_PAUSE:
        snprintf(out, cap, "pause=%d", undo ? 0 : 1);
        break;
    case CHAOS_SLOW:
        snprintf(out, cap, "slow=%g", undo ? 1.0 : e->factor);
        break;
    default:
        break;
    }
}
