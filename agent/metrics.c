/* agent/metrics — see metrics.h for the registry and the HTTP contract. */
#include "agent/metrics.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <math.h>
#include <nng/nng.h>
#include <nng/supplemental/http/http.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "agent/version.h"
#include "common/errmsg.h"
#include "common/json.h"
#include "common/text.h"
#include "gossip/swim.h"
#include "gossip/wire.h"
#include "net/net.h"

typedef struct family {
    char name[AGENT_METRICS_NAME_MAX];
    char help[AGENT_METRICS_HELP_MAX];
    agent_metric_kind kind;
} family;

struct agent_metric {
    _Atomic uint64_t bits; /* counter value, or the bits of a double gauge */
    uint32_t family;
    /* the labels as rendered, k1="v1",k2="v2" (values escaped); "" = none */
    char labels[AGENT_METRICS_LABELS_MAX];
};

struct agent_histogram {
    uint32_t family;
    uint32_t n;                                              /* finite upper bounds */
    double bounds[AGENT_METRICS_BUCKETS_MAX];                /* increasing */
    _Atomic uint64_t buckets[AGENT_METRICS_BUCKETS_MAX + 1]; /* last: above every bound */
    _Atomic uint64_t sum_bits;                               /* bits of the double sum */
};

struct agent_metrics {
    pthread_mutex_t lock; /* registration and rendering; not updates */
    uint32_t family_count, series_count, histogram_count;
    bool process; /* render the process_* collectors */
    family families[AGENT_METRICS_FAMILIES_MAX];
    agent_metric series[AGENT_METRICS_SERIES_MAX];
    agent_histogram histograms[AGENT_METRICS_HISTOGRAMS_MAX];
};

static const char *const err_names[AGENT_METRICS_ERR_COUNT] = {
    [AGENT_METRICS_OK] = "ok",
    [AGENT_METRICS_EINVAL] = "invalid argument",
    [AGENT_METRICS_ECONFLICT] = "metric registered with another kind",
    [AGENT_METRICS_EFULL] = "metric table full",
    [AGENT_METRICS_ENOMEM] = "out of memory",
    [AGENT_METRICS_ENET] = "network error",
    [AGENT_METRICS_ETIMEDOUT] = "timed out",
    [AGENT_METRICS_EHTTP] = "unexpected HTTP status",
};

const char *agent_metrics_strerror(int err)
{
    if (err < 0 || err >= AGENT_METRICS_ERR_COUNT)
        return "unknown error";
    return err_names[err];
}

int agent_metrics_create(agent_metrics **out)
{
    agent_metrics *m = calloc(1, sizeof *m);
    if (!m)
        return AGENT_METRICS_ENOMEM;
    if (pthread_mutex_init(&m->lock, NULL)) {
        free(m);
        return AGENT_METRICS_ENOMEM;
    }
    *out = m;
    return 0;
}

void agent_metrics_destroy(agent_metrics *m)
{
    if (!m)
        return;
    pthread_mutex_destroy(&m->lock);
    free(m);
}

static bool valid_name(const char *s, bool colon)
{
    size_t n = strlen(s);
    if (n == 0 || n >= AGENT_METRICS_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                  (colon && c == ':') || (i > 0 && c >= '0' && c <= '9');
        if (!ok)
            return false;
    }
    return true;
}

/* Append key="value" (value escaped for the exposition format) to out. */
static bool add_label(char *out, size_t cap, const char *k, const char *v)
{
    if (!valid_name(k, false) || !strncmp(k, "__", 2) || strlen(v) >= AGENT_METRICS_VALUE_MAX)
        return false;
    size_t at = strlen(out);
    int n = snprintf(out + at, cap - at, "%s%s=\"", at ? "," : "", k);
    if (n < 0 || (size_t)n >= cap - at)
        return false;
    at += (size_t)n;
    for (; *v; v++) {
        const char *e = *v == '\\' ? "\\\\" : *v == '"' ? "\\\"" : *v == '\n' ? "\\n" : NULL;
        size_t k2 = e ? 2 : 1;
        if (at + k2 + 2 > cap)
            return false;
        memcpy(out + at, e ? e : v, k2);
        at += k2;
    }
    out[at++] = '"';
    out[at] = '\0';
    return true;
}

/* The family of name, created with kind and help when new; -1 with rc. */
static int family_of(agent_metrics *m, agent_metric_kind kind, const char *name, const char *help,
                     int *rc)
{
    uint32_t f;
    for (f = 0; f < m->family_count; f++)
        if (!strcmp(m->families[f].name, name))
            break;
    if (f < m->family_count && m->families[f].kind != kind) {
        *rc = AGENT_METRICS_ECONFLICT;
        return -1;
    }
    if (f == m->family_count) {
        if (f == AGENT_METRICS_FAMILIES_MAX) {
            *rc = AGENT_METRICS_EFULL;
            return -1;
        }
        family *fam = &m->families[m->family_count++];
        snprintf(fam->name, sizeof fam->name, "%s", name);
        snprintf(fam->help, sizeof fam->help, "%s", help ? help : "");
        fam->kind = kind;
    }
    return (int)f;
}

/* kv: NULL-terminated key, value, key, value...; NULL = no labels. */
static int reg(agent_metrics *m, agent_metric_kind kind, const char *name, const char *help,
               const char *const *kv, agent_metric **out)
{
    *out = NULL;
    char labels[AGENT_METRICS_LABELS_MAX] = "";
    if (!m || !name || !valid_name(name, true))
        return AGENT_METRICS_EINVAL;
    for (size_t i = 0; kv && kv[i]; i += 2)
        if (!kv[i + 1] || !add_label(labels, sizeof labels, kv[i], kv[i + 1]))
            return AGENT_METRICS_EINVAL;
    int rc = 0;
    pthread_mutex_lock(&m->lock);
    int f = family_of(m, kind, name, help, &rc);
    if (f < 0)
        goto out;
    for (uint32_t i = 0; i < m->series_count; i++) {
        agent_metric *s = &m->series[i];
        if (s->family == (uint32_t)f && !strcmp(s->labels, labels)) {
            *out = s;
            goto out;
        }
    }
    if (m->series_count == AGENT_METRICS_SERIES_MAX) {
        rc = AGENT_METRICS_EFULL;
        goto out;
    }
    agent_metric *s = &m->series[m->series_count++];
    memset(s, 0, sizeof *s);
    atomic_store(&s->bits, 0);
    s->family = (uint32_t)f;
    memcpy(s->labels, labels, sizeof labels);
    *out = s;
out:
    pthread_mutex_unlock(&m->lock);
    return rc;
}

int agent_metrics_counter(agent_metrics *m, const char *name, const char *help,
                          const char *label_key, const char *label_value, agent_metric **out)
{
    if ((!label_key) != (!label_value)) {
        *out = NULL;
        return AGENT_METRICS_EINVAL;
    }
    const char *kv[] = {label_key, label_value, NULL};
    return reg(m, AGENT_METRIC_COUNTER, name, help, label_key ? kv : NULL, out);
}

int agent_metrics_gauge(agent_metrics *m, const char *name, const char *help, const char *label_key,
                        const char *label_value, agent_metric **out)
{
    if ((!label_key) != (!label_value)) {
        *out = NULL;
        return AGENT_METRICS_EINVAL;
    }
    const char *kv[] = {label_key, label_value, NULL};
    return reg(m, AGENT_METRIC_GAUGE, name, help, label_key ? kv : NULL, out);
}

int agent_metrics_gauge_labels(agent_metrics *m, const char *name, const char *help,
                               const char *const *kv, agent_metric **out)
{
    return reg(m, AGENT_METRIC_GAUGE, name, help, kv, out);
}

int agent_metrics_histogram(agent_metrics *m, const char *name, const char *help,
                            const double *bounds, size_t n, agent_histogram **out)
{
    *out = NULL;
    if (!m || !name || !valid_name(name, true) || n == 0 || n > AGENT_METRICS_BUCKETS_MAX)
        return AGENT_METRICS_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (!isfinite(bounds[i]) || (i && bounds[i] <= bounds[i - 1]))
            return AGENT_METRICS_EINVAL;
    int rc = 0;
    pthread_mutex_lock(&m->lock);
    int f = family_of(m, AGENT_METRIC_HISTOGRAM, name, help, &rc);
    if (f < 0)
        goto out;
    for (uint32_t i = 0; i < m->histogram_count; i++)
        if (m->histograms[i].family == (uint32_t)f) {
            *out = &m->histograms[i];
            goto out;
        }
    if (m->histogram_count == AGENT_METRICS_HISTOGRAMS_MAX) {
        rc = AGENT_METRICS_EFULL;
        goto out;
    }
    agent_histogram *h = &m->histograms[m->histogram_count++];
    memset(h, 0, sizeof *h);
    h->family = (uint32_t)f;
    h->n = (uint32_t)n;
    memcpy(h->bounds, bounds, n * sizeof *bounds);
    *out = h;
out:
    pthread_mutex_unlock(&m->lock);
    return rc;
}

void agent_histogram_observe(agent_histogram *h, double v)
{
    if (!h || isnan(v))
        return;
    uint32_t b = 0;
    while (b < h->n && v > h->bounds[b])
        b++;
    atomic_fetch_add_explicit(&h->buckets[b], 1, memory_order_relaxed);
    uint64_t old = atomic_load_explicit(&h->sum_bits, memory_order_relaxed), next;
    do {
        double sum;
        memcpy(&sum, &old, sizeof sum);
        sum += v;
        memcpy(&next, &sum, sizeof next);
    } while (!atomic_compare_exchange_weak_explicit(&h->sum_bits, &old, next, memory_order_relaxed,
                                                    memory_order_relaxed));
}

uint64_t agent_histogram_count(const agent_histogram *h)
{
    uint64_t n = 0;
    for (uint32_t b = 0; h && b <= h->n; b++)
        n += atomic_load_explicit(&((agent_histogram *)h)->buckets[b], memory_order_relaxed);
    return n;
}

double agent_histogram_sum(const agent_histogram *h)
{
    if (!h)
        return 0;
    uint64_t bits = atomic_load_explicit(&((agent_histogram *)h)->sum_bits, memory_order_relaxed);
    double v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

void agent_metrics_process(agent_metrics *m, bool on)
{
    pthread_mutex_lock(&m->lock);
    m->process = on;
    pthread_mutex_unlock(&m->lock);
}

void agent_metric_inc(agent_metric *c)
{
    if (c)
        atomic_fetch_add_explicit(&c->bits, 1, memory_order_relaxed);
}

void agent_metric_add(agent_metric *c, uint64_t n)
{
    if (c)
        atomic_fetch_add_explicit(&c->bits, n, memory_order_relaxed);
}

void agent_metric_set(agent_metric *g, double v)
{
    if (!g)
        return;
    uint64_t b;
    memcpy(&b, &v, sizeof b);
    atomic_store_explicit(&g->bits, b, memory_order_relaxed);
}

uint64_t agent_metric_count(const agent_metric *c)
{
    return c ? atomic_load_explicit(&((agent_metric *)c)->bits, memory_order_relaxed) : 0;
}

double agent_metric_value(const agent_metric *g)
{
    uint64_t b = agent_metric_count(g);
    double v;
    memcpy(&v, &b, sizeof v);
    return v;
}

/* ---- rendering ---- */

typedef struct sbuf {
    char *p;
    size_t len, cap;
    bool oom;
} sbuf;

static void sb_grow(sbuf *b, size_t need)
{
    if (b->oom || b->len + need + 1 <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + need + 1)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = true;
        return;
    }
    b->p = p;
    b->cap = cap;
}

static void sb_put(sbuf *b, const char *s, size_t n)
{
    sb_grow(b, n);
    if (b->oom)
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_str(sbuf *b, const char *s)
{
    sb_put(b, s, strlen(s));
}

static void sb_printf(sbuf *b, const char *fmt, ...)
{
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0)
        sb_put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* Prometheus escaping: help escapes \ and newline; label values also ". */
static void sb_escaped(sbuf *b, const char *s, bool quote)
{
    for (; *s; s++) {
        if (*s == '\\')
            sb_put(b, "\\\\", 2);
        else if (*s == '\n')
            sb_put(b, "\\n", 2);
        else if (quote && *s == '"')
            sb_put(b, "\\\"", 2);
        else
            sb_put(b, s, 1);
    }
}

/* Shortest decimal that reads back as v; Prometheus spellings for the rest. */
/* Prometheus text: NaN, +Inf, -Inf; otherwise the shortest exact form. */
static void format_double(double v, char *out, size_t cap)
{
    if (isnan(v))
        snprintf(out, cap, "NaN");
    else if (isinf(v))
        snprintf(out, cap, "%sInf", v > 0 ? "+" : "-");
    else
        common_fmt_double(v, out, cap);
}

/* The process_* collectors of the Prometheus client libraries, read from
 * /proc at each render (Linux). A value that cannot be read is left out. */
static void render_process(sbuf *b)
{
    struct rusage ru;
    char v[40];
    if (!getrusage(RUSAGE_SELF, &ru)) {
        double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
                     (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
        format_double(cpu, v, sizeof v);
        sb_printf(b,
                  "# HELP process_cpu_seconds_total Total user and system CPU time, in seconds.\n"
                  "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total %s\n",
                  v);
    }
    long page = sysconf(_SC_PAGESIZE);
    unsigned long long vsize = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%llu %llu", &vsize, &rss) == 2 && page > 0) {
            sb_printf(b,
                      "# HELP process_virtual_memory_bytes Virtual memory size, in bytes.\n"
                      "# TYPE process_virtual_memory_bytes gauge\n"
                      "process_virtual_memory_bytes %llu\n",
                      vsize * (unsigned long long)page);
            sb_printf(b,
                      "# HELP process_resident_memory_bytes Resident memory size, in bytes.\n"
                      "# TYPE process_resident_memory_bytes gauge\n"
                      "process_resident_memory_bytes %llu\n",
                      rss * (unsigned long long)page);
        }
        fclose(f);
    }
    DIR *d = opendir("/proc/self/fd");
    if (d) {
        unsigned long n = 0;
        for (struct dirent *e; (e = readdir(d));)
            n += e->d_name[0] != '.';
        closedir(d);
        sb_printf(b,
                  "# HELP process_open_fds Open file descriptors.\n"
                  "# TYPE process_open_fds gauge\nprocess_open_fds %lu\n",
                  n ? n - 1 : 0); /* not the one reading the directory */
    }
    struct rlimit rl;
    if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur != RLIM_INFINITY)
        sb_printf(b,
                  "# HELP process_max_fds Most open file descriptors (the soft limit).\n"
                  "# TYPE process_max_fds gauge\nprocess_max_fds %llu\n",
                  (unsigned long long)rl.rlim_cur);
    /* start time: field 22 of /proc/self/stat (ticks after boot) + btime */
    unsigned long long start_ticks = 0, btime = 0;
    char line[1024];
    if ((f = fopen("/proc/self/stat", "r"))) {
        if (fgets(line, sizeof line, f)) {
            const char *p = strrchr(line, ')'); /* the command may hold blanks */
            int field = 2;
            while (p && *p && field < 22) {
                p = strchr(p + 1, ' ');
                field++;
            }
            if (p)
                start_ticks = strtoull(p + 1, NULL, 10);
        }
        fclose(f);
    }
    if ((f = fopen("/proc/stat", "r"))) {
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "btime %llu", &btime) == 1)
                break;
        fclose(f);
    }
    long hz = sysconf(_SC_CLK_TCK);
    if (btime && hz > 0) {
        format_double((double)btime + (double)start_ticks / (double)hz, v, sizeof v);
        sb_printf(b,
                  "# HELP process_start_time_seconds Start time of the process since the Unix "
                  "epoch, in seconds.\n"
                  "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds %s\n",
                  v);
    }
}

static void render_histogram(sbuf *b, const family *fam, const agent_histogram *h)
{
    uint64_t cum = 0;
    char le[40];
    for (uint32_t k = 0; k <= h->n; k++) {
        cum += atomic_load_explicit(&((agent_histogram *)h)->buckets[k], memory_order_relaxed);
        if (k < h->n)
            format_double(h->bounds[k], le, sizeof le);
        else
            snprintf(le, sizeof le, "+Inf");
        sb_printf(b, "%s_bucket{le=\"%s\"} %" PRIu64 "\n", fam->name, le, cum);
    }
    char v[40];
    format_double(agent_histogram_sum(h), v, sizeof v);
    sb_printf(b, "%s_sum %s\n%s_count %" PRIu64 "\n", fam->name, v, fam->name, cum);
}

int agent_metrics_render(agent_metrics *m, char **out, size_t *len)
{
    static const char *const kinds[] = {"counter", "gauge", "histogram"};
    sbuf b = {0};
    sb_grow(&b, 0);
    pthread_mutex_lock(&m->lock);
    for (uint32_t f = 0; f < m->family_count; f++) {
        const family *fam = &m->families[f];
        sb_printf(&b, "# HELP %s ", fam->name);
        sb_escaped(&b, fam->help, false);
        sb_printf(&b, "\n# TYPE %s %s\n", fam->name, kinds[fam->kind]);
        for (uint32_t i = 0; i < m->histogram_count; i++)
            if (m->histograms[i].family == f)
                render_histogram(&b, fam, &m->histograms[i]);
        for (uint32_t i = 0; i < m->series_count; i++) {
            const agent_metric *s = &m->series[i];
            if (s->family != f)
                continue;
            sb_str(&b, fam->name);
            if (s->labels[0]) {
                sb_str(&b, "{");
                sb_str(&b, s->labels);
                sb_str(&b, "}");
            }
            char v[40];
            if (fam->kind == AGENT_METRIC_COUNTER)
                snprintf(v, sizeof v, "%" PRIu64, agent_metric_count(s));
            else
                format_double(agent_metric_value(s), v, sizeof v);
            sb_printf(&b, " %s\n", v);
        }
    }
    if (m->process)
        render_process(&b);
    pthread_mutex_unlock(&m->lock);
    if (b.oom) {
        free(b.p);
        return AGENT_METRICS_ENOMEM;
    }
    *out = b.p;
    *len = b.len;
    return 0;
}

/* ---- the standard set ---- */

const char *agent_metrics_core_cause(int err)
{
    switch (err) {
    case GOSSIP_ENOMEM:
        return "no_memory";
    case GOSSIP_EINVAL:
        return "invalid";
    case GOSSIP_ETRUNC:
        return "truncated";
    case GOSSIP_EMAGIC:
        return "bad_magic";
    case GOSSIP_EVERSION:
        return "bad_version";
    case GOSSIP_ETYPE:
        return "bad_type";
    case GOSSIP_ETOOBIG:
        return "too_big";
    case GOSSIP_EMALFORMED:
        return "malformed";
    case GOSSIP_ENONFINITE:
        return "nonfinite";
    case GOSSIP_ESTALE:
        return "stale";
    case GOSSIP_EFULL:
        return "queue_full";
    case GOSSIP_ENOTFOUND:
        return "unknown_peer";
    case GOSSIP_ESPACE:
        return "no_space";
    case GOSSIP_EABORTED:
        return "aborted";
    default:
        return "other";
    }
}

/* Buckets. Round duration: one round is a few RTTs plus encoding, from
 * ~1 ms on a LAN to seconds for a large model on a slow link; the bounds
 * cover 1 ms .. 10 s in steps of about 2.5x. Consensus distance
 * ||mixed - sent|| / ||sent|| of one round: ~1e-4 when converged, ~1 when
 * the models disagree completely; about 3x per bucket. */
static const double round_bounds[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                      0.25,  0.5,    1,     2.5,  5,     10};
static const double consensus_bounds[] = {0.0001, 0.0003, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1, 3};

int agent_metrics_std_register(agent_metrics *m, agent_metrics_std *s)
{
    memset(s, 0, sizeof *s);
    s->registry = m;
    int rc;
    /* HELP texts: one sentence, capitalised, ending with a period; the
     * unit named when there is one (test_metrics checks the style). */
#define C(field, name, help)                                                                       \
    if ((rc = agent_metrics_counter(m, name, help, NULL, NULL, &s->field)))                        \
        return rc;
#define G(field, name, help)                                                                       \
    if ((rc = agent_metrics_gauge(m, name, help, NULL, NULL, &s->field)))                          \
        return rc;
    const char *build[] = {"version", agent_version(), "commit", agent_version_commit(), NULL};
    if ((rc = agent_metrics_gauge_labels(m, "murmur_build_info",
                                         "Always 1; the labels name the version and the commit "
                                         "of this agent.",
                                         build, &s->build_info)))
        return rc;
    agent_metric_set(s->build_info, 1);
    C(steps, "murmur_steps_total", "Local SGD steps done.")
    C(samples, "murmur_samples_total", "Training samples processed.")
    G(samples_per_second, "murmur_samples_per_second",
      "Recent training throughput, in samples per second.")
    G(loss, "murmur_loss", "Recent mean training loss.")
    G(accuracy, "murmur_accuracy", "Latest test accuracy, from 0 to 1.")
    G(peers, "murmur_peers", "Live members in the view, self excluded.")
    G(view_epoch, "murmur_view_epoch", "Epoch of the current membership view.")
    C(mixing_rounds, "murmur_mixing_rounds_total", "Mixing rounds completed.")
    C(round_aborts, "murmur_round_aborts_total", "Mixing rounds aborted.")
    C(checkpoints, "murmur_checkpoints_total", "Checkpoints written.")
    C(checkpoint_failures, "murmur_checkpoint_failures_total", "Checkpoint writes that failed.")
    C(training_recoveries, "murmur_training_recoveries_total",
      "Local steps with a non-finite loss, undone by going back to the last mixed model.")
    G(shards_held, "murmur_shards_held", "Data shards stored on this agent.")
    G(shards_primary, "murmur_shards_primary", "Data shards this agent trains (as primary).")
    G(shards_missing, "murmur_shards_missing",
      "Data shards assigned to this agent that no live agent holds.")
    C(shards_quarantined, "murmur_shards_quarantined_total",
      "Shard files whose bytes did not match their id, set aside and fetched again.")
    G(uptime_seconds, "murmur_uptime_seconds", "Time since the agent started, in seconds.")
#undef C
#undef G
    if ((rc = agent_metrics_histogram(m, "murmur_round_duration_seconds",
                                      "Duration of one mixing round, from its start to its "
                                      "result, in seconds.",
                                      round_bounds, sizeof round_bounds / sizeof round_bounds[0],
                                      &s->round_duration)) ||
        (rc = agent_metrics_histogram(m, "murmur_consensus_distance",
                                      "Relative distance ||mixed - sent|| / ||sent|| of one "
                                      "mixing round's result from the vector sent.",
                                      consensus_bounds,
                                      sizeof consensus_bounds / sizeof consensus_bounds[0],
                                      &s->consensus_distance)))
        return rc;
    static const struct {
        const char *name, *help;
        bool bytes, sent;
    } fams[] = {
        {"murmur_bytes_sent_total", "Bytes sent, frame header included, by message type.", true,
         true},
        {"murmur_bytes_received_total", "Bytes received and accepted, by message type.", true,
         false},
        {"murmur_messages_sent_total", "Frames sent, by message type.", false, true},
        {"murmur_messages_received_total", "Frames received and accepted, by message type.", false,
         false},
    };
    for (size_t f = 0; f < sizeof fams / sizeof fams[0]; f++) {
        agent_metric **tab = fams[f].bytes
                                 ? (fams[f].sent ? s->bytes_sent : s->bytes_received)
                                 : (fams[f].sent ? s->messages_sent : s->messages_received);
        agent_metric *other;
        if ((rc = agent_metrics_counter(m, fams[f].name, fams[f].help, "type", "other", &other)))
            return rc;
        for (unsigned t = 0; t < AGENT_METRICS_MSG_TYPES; t++) {
            tab[t] = other;
            const char *tn = gossip_msg_name(t);
            if (!strcmp(tn, "unknown"))
                continue;
            if ((rc = agent_metrics_counter(m, fams[f].name, fams[f].help, "type", tn, &tab[t])))
                return rc;
        }
    }
    /* every cause from the start, at zero: the transport's, then the core's */
    agent_metric *c;
    for (int r = 0; r < NET_REJECT_COUNT; r++)
        if ((rc = agent_metrics_counter(m, "murmur_rejections_total", AGENT_METRICS_REJECT_HELP,
                                        "cause", net_reject_name(r), &c)))
            return rc;
    for (int e = 1; e < GOSSIP_ERR_COUNT; e++)
        if ((rc = agent_metrics_counter(m, "murmur_rejections_total", AGENT_METRICS_REJECT_HELP,
                                        "cause", agent_metrics_core_cause(e), &c)))
            return rc;
    static const char *const refusals[] = {"manifest", "duplicate_id"};
    for (size_t i = 0; i < sizeof refusals / sizeof refusals[0]; i++)
        if ((rc = agent_metrics_counter(m, "murmur_refusals_total",
                                        "Peers refused at admission (another manifest, a "
                                        "duplicate key), by cause.",
                                        "cause", refusals[i], &c)))
            return rc;
    static const char *const outcomes[] = {AGENT_METRICS_EXCHANGE_OUTCOMES};
    _Static_assert(sizeof outcomes / sizeof outcomes[0] ==
                       sizeof s->exchanges / sizeof s->exchanges[0],
                   "one series per outcome");
    for (size_t i = 0; i < sizeof outcomes / sizeof outcomes[0]; i++)
        if ((rc = agent_metrics_counter(
                 m, "murmur_gossip_exchanges_total",
                 "Pairwise gossip exchanges by outcome: peers' pushes held, refused or "
                 "answered; our pushes retried or cancelled.",
                 "outcome", outcomes[i], &s->exchanges[i])))
            return rc;
    static const char *const actions[] = {AGENT_METRICS_ROBUST_ACTIONS};
    _Static_assert(sizeof actions / sizeof actions[0] == sizeof s->robust / sizeof s->robust[0],
                   "one series per action");
    for (size_t i = 0; i < sizeof actions / sizeof actions[0]; i++)
        if ((rc = agent_metrics_counter(m, "murmur_robust_total",
                                        "Peers' contributions beyond the bound of mixing.robust, "
                                        "clipped to it or ignored.",
                                        "action", actions[i], &s->robust[i])))
            return rc;
    agent_metrics_process(m, true);
    return 0;
}

void agent_metrics_std_round_begin(agent_metrics_std *s, uint64_t now_us)
{
    if (s)
        s->round_start_us = now_us;
}

void agent_metrics_std_round_end(agent_metrics_std *s, uint64_t now_us, bool completed,
                                 double consensus)
{
    if (!s || !s->round_start_us)
        return;
    if (now_us >= s->round_start_us)
        agent_histogram_observe(s->round_duration, (double)(now_us - s->round_start_us) / 1e6);
    s->round_start_us = 0;
    if (completed)
        agent_histogram_observe(s->consensus_distance, consensus);
}

void agent_metrics_std_message(const agent_metrics_std *s, bool sent, unsigned type, size_t bytes)
{
    if (!s || type >= AGENT_METRICS_MSG_TYPES)
        return;
    agent_metric_inc(sent ? s->messages_sent[type] : s->messages_received[type]);
    agent_metric_add(sent ? s->bytes_sent[type] : s->bytes_received[type], bytes);
}

int agent_metrics_std_reject(const agent_metrics_std *s, const char *cause)
{
    agent_metric *c;
    int rc = agent_metrics_counter(s->registry, "murmur_rejections_total",
                                   AGENT_METRICS_REJECT_HELP, "cause", cause, &c);
    agent_metric_inc(c);
    return rc;
}

/* ---- /status JSON ---- */

size_t agent_status_json(const agent_status *st, char *buf, size_t cap)
{
    common_json j;
    char id[17];
    snprintf(id, sizeof id, "%016" PRIx64, st->node_id);
    common_json_init_buf(&j, buf, cap, 0);
    common_json_object_begin(&j, NULL);
    common_json_string(&j, "node_id", id);
    common_json_string(&j, "address", st->address);
    common_json_u64(&j, "step", st->step);
    common_json_number(&j, "samples_per_second", st->samples_per_second);
    common_json_number(&j, "loss", st->loss);
    common_json_number(&j, "accuracy", st->accuracy);
    common_json_u64(&j, "peers", st->peers);
    common_json_u64(&j, "view_epoch", st->view_epoch);
    common_json_string(&j, "mixing", st->mixing);
    common_json_u64(&j, "shards_held", st->shards_held);
    common_json_u64(&j, "shards_primary", st->shards_primary);
    common_json_number(&j, "uptime_s", st->uptime_s);
    if (st->state[0]) { /* the agent's fields; absent from a bare server's answer */
        common_json_string(&j, "state", st->state);
        common_json_u64(&j, "round", st->round);
        common_json_u64(&j, "mixing_rounds", st->mixing_rounds);
        common_json_u64(&j, "round_aborts", st->round_aborts);
        common_json_u64(&j, "bytes_sent", st->bytes_sent);
        common_json_u64(&j, "bytes_received", st->bytes_received);
        common_json_number(&j, "consensus_distance", st->consensus_distance);
        common_json_number(&j, "test_loss", st->test_loss);
        common_json_u64(&j, "shards_missing", st->shards_missing);
        common_json_string(&j, "train_source", st->train_source);
        common_json_string(&j, "train_reason", st->train_reason);
        common_json_u64(&j, "train_shards", st->train_shards);
        common_json_u64(&j, "shards_pending", st->shards_pending);
        common_json_bool(&j, "store_full", st->store_full != 0);
        common_json_u64(&j, "shards_handed", st->shards_handed);
        common_json_u64(&j, "shards_taken", st->shards_taken);
    }
    if (st->faults_enabled) { /* [faults]: what murmur chaos checks */
        common_json_u64(&j, "faults_active", st->faults_active);
        common_json_u64(&j, "faults_applied", st->faults_applied);
        common_json_u64(&j, "faults_removed", st->faults_removed);
        common_json_u64(&j, "fault_frames", st->fault_frames);
        common_json_u64(&j, "training_paused", st->training_paused);
        common_json_number(&j, "training_slow", st->training_slow);
        common_json_u64(&j, "pid", st->pid);
    }
    common_json_end(&j);
    size_t len = 0;
    return common_json_finish(&j, &len) ? 0 : len;
}

/* ---- HTTP server ---- */

struct agent_metrics_server {
    nng_http_server *srv;
    nng_url *url;
    agent_metrics *metrics;
    agent_status_fn status_fn;
    void *status_ctx;
    struct timespec started;
    uint16_t port;
    pthread_mutex_t lock;
    pthread_cond_t idle;
    int running;           /* handlers in progress */
    bool stopping;         /* no new handler may start */
    agent_member *members; /* the published member list, under lock */
    size_t n_members, members_cap;
};

static bool enter(agent_metrics_server *s)
{
    pthread_mutex_lock(&s->lock);
    bool ok = !s->stopping;
    if (ok)
        s->running++;
    pthread_mutex_unlock(&s->lock);
    return ok;
}

static void leave(agent_metrics_server *s)
{
    pthread_mutex_lock(&s->lock);
    if (--s->running == 0)
        pthread_cond_broadcast(&s->idle);
    pthread_mutex_unlock(&s->lock);
}

/* Answer the request of aio with status and body (copied). */
static void reply(nng_aio *aio, uint16_t status, const char *type, const char *body, size_t len)
{
    nng_http_res *res;
    int rv = status == 200 ? nng_http_res_alloc(&res) : nng_http_res_alloc_error(&res, status);
    if (rv) {
        nng_aio_finish(aio, rv);
        return;
    }
    if (status == 200 && ((rv = nng_http_res_set_header(res, "Content-Type", type)) ||
                          (rv = nng_http_res_set_header(res, "Cache-Control", "no-store")) ||
                          (rv = nng_http_res_copy_data(res, body, len)))) {
        nng_http_res_free(res);
        nng_aio_finish(aio, rv);
        return;
    }
    nng_aio_set_output(aio, 0, res);
    nng_aio_finish(aio, 0);
}

static agent_metrics_server *server_of(nng_aio *aio)
{
    nng_http_handler *h = nng_aio_get_input(aio, 1);
    return nng_http_handler_get_data(h);
}

static void handle_metrics(nng_aio *aio)
{
    agent_metrics_server *s = server_of(aio);
    if (!enter(s)) {
        reply(aio, 503, NULL, NULL, 0);
        return;
    }
    char *text = NULL;
    size_t len = 0;
    if (agent_metrics_render(s->metrics, &text, &len))
        reply(aio, 500, NULL, NULL, 0);
    else
        reply(aio, 200, "text/plain; version=0.0.4; charset=utf-8", text, len);
    free(text);
    leave(s);
}

static void handle_status(nng_aio *aio)
{
    agent_metrics_server *s = server_of(aio);
    if (!enter(s)) {
        reply(aio, 503, NULL, NULL, 0);
        return;
    }
    agent_status st;
    memset(&st, 0, sizeof st);
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    st.uptime_s =
        (double)(now.tv_sec - s->started.tv_sec) + (double)(now.tv_nsec - s->started.tv_nsec) / 1e9;
    if (s->status_fn)
        s->status_fn(s->status_ctx, &st);
    st.address[sizeof st.address - 1] = '\0';
    st.mixing[sizeof st.mixing - 1] = '\0';
    char json[AGENT_STATUS_JSON_MAX];
    size_t n = agent_status_json(&st, json, sizeof json);
    if (n)
        reply(aio, 200, "application/json", json, n);
    else
        reply(aio, 500, NULL, NULL, 0);
    leave(s);
}

static void handle_members(nng_aio *aio)
{
    agent_metrics_server *s = server_of(aio);
    if (!enter(s)) {
        reply(aio, 503, NULL, NULL, 0);
        return;
    }
    pthread_mutex_lock(&s->lock);
    size_t n = s->n_members, cap = 8 + n * (AGENT_STATUS_ADDR_MAX + 128);
    char *text = malloc(cap);
    size_t at = 0;
    if (text) {
        at += (size_t)snprintf(text, cap, "[\n");
        for (size_t i = 0; i < n; i++) {
            const agent_member *m = &s->members[i];
            char id[17];
            snprintf(id, sizeof id, "%016" PRIx64, m->node_id);
            common_json j;
            common_json_init_buf(&j, text + at, cap - at - 3, 0);
            common_json_object_begin(&j, NULL);
            common_json_string(&j, "node_id", id);
            common_json_string(&j, "address", m->address);
            common_json_string(&j, "state", m->state);
            common_json_u64(&j, "incarnation", m->incarnation);
            common_json_end(&j);
            size_t len = 0;
            if (common_json_finish(&j, &len))
                break;
            at += len;       /* the object and its newline */
            if (i + 1 < n) { /* "...}\n" -> "...},\n" */
                text[at - 1] = ',';
                text[at++] = '\n';
            }
        }
        at += (size_t)snprintf(text + at, cap - at, "]\n");
    }
    pthread_mutex_unlock(&s->lock);
    if (text)
        reply(aio, 200, "application/json", text, at);
    else
        reply(aio, 500, NULL, NULL, 0);
    free(text);
    leave(s);
}

int agent_metrics_server_set_members(agent_metrics_server *s, const agent_member *m, size_t n)
{
    if (!s)
        return 0;
    pthread_mutex_lock(&s->lock);
    if (n > s->members_cap) {
        agent_member *p = realloc(s->members, n * sizeof *p);
        if (!p) {
            pthread_mutex_unlock(&s->lock);
            return AGENT_METRICS_ENOMEM;
        }
        s->members = p;
        s->members_cap = n;
    }
    if (n)
        memcpy(s->members, m, n * sizeof *m);
    s->n_members = n;
    pthread_mutex_unlock(&s->lock);
    return 0;
}

int agent_metrics_server_members_from_swim(agent_metrics_server *s, const gossip_swim *sw)
{
    static const char *const states[] = {"none", "alive", "suspect", "dead", "left"};
    if (!s || !sw)
        return 0;
    gossip_view v;
    gossip_swim_view(sw, &v);
    agent_member *list = malloc((v.n ? v.n : 1) * sizeof *list);
    if (!list)
        return AGENT_METRICS_ENOMEM;
    size_t n = 0;
    for (uint32_t i = 0; i < v.n; i++) {
        gossip_swim_member mb;
        if (gossip_swim_lookup(sw, v.ids[i], &mb))
            continue;
        list[n].node_id = mb.id;
        snprintf(list[n].address, sizeof list[n].address, "%s", mb.addr);
        list[n].state = (unsigned)mb.state < 5 ? states[mb.state] : "none";
        list[n].incarnation = mb.incarnation;
        n++;
    }
    int rc = agent_metrics_server_set_members(s, list, n);
    free(list);
    return rc;
}

static void free_server(agent_metrics_server *s)
{
    if (s->srv)
        nng_http_server_release(s->srv);
    if (s->url)
        nng_url_free(s->url);
    pthread_cond_destroy(&s->idle);
    pthread_mutex_destroy(&s->lock);
    free(s->members);
    free(s);
}

int agent_metrics_serve(agent_metrics *m, const char *listen, agent_status_fn status_fn,
                        void *status_ctx, agent_metrics_server **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!m || !listen || !*listen || strlen(listen) > 200)
        return common_errf(err, errlen, AGENT_METRICS_EINVAL, "metrics: bad listen address");
    agent_metrics_server *s = calloc(1, sizeof *s);
    if (!s)
        return common_errf(err, errlen, AGENT_METRICS_ENOMEM, "metrics: out of memory");
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->idle, NULL);
    s->metrics = m;
    s->status_fn = status_fn;
    s->status_ctx = status_ctx;
    clock_gettime(CLOCK_MONOTONIC, &s->started);
    char url[256];
    snprintf(url, sizeof url, "%s%s", strncmp(listen, "http://", 7) ? "http://" : "", listen);
    int rv;
    const char *what = "parse the address";
    if ((rv = nng_url_parse(&s->url, url)))
        goto fail;
    what = "create the server";
    if ((rv = nng_http_server_hold(&s->srv, s->url)))
        goto fail;
    static const struct {
        const char *path;
        void (*fn)(nng_aio *);
    } routes[] = {
        {"/metrics", handle_metrics}, {"/status", handle_status}, {"/members", handle_members}};
    what = "add a handler";
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        nng_http_handler *h;
        if ((rv = nng_http_handler_alloc(&h, routes[i].path, routes[i].fn)))
            goto fail;
        if ((rv = nng_http_handler_set_method(h, "GET")) ||
            (rv = nng_http_handler_set_data(h, s, NULL)) ||
            (rv = nng_http_server_add_handler(s->srv, h))) {
            nng_http_handler_free(h);
            goto fail;
        }
    }
    what = "listen";
    if ((rv = nng_http_server_start(s->srv)))
        goto fail;
    nng_sockaddr sa;
    if (nng_http_server_get_addr(s->srv, &sa) == 0) {
        if (sa.s_family == NNG_AF_INET)
            s->port = ntohs(sa.s_in.sa_port);
        else if (sa.s_family == NNG_AF_INET6)
            s->port = ntohs(sa.s_in6.sa_port);
    }
    *out = s;
    return 0;
fail:
    free_server(s);
    return common_errf(err, errlen, AGENT_METRICS_ENET, "metrics: cannot %s on %s: %s", what, url,
                       nng_strerror(rv));
}

uint16_t agent_metrics_server_port(const agent_metrics_server *s)
{
    return s ? s->port : 0;
}

void agent_metrics_server_stop(agent_metrics_server *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    s->stopping = true;
    pthread_mutex_unlock(&s->lock);
    nng_http_server_stop(s->srv);
    pthread_mutex_lock(&s->lock);
    while (s->running > 0)
        pthread_cond_wait(&s->idle, &s->lock);
    pthread_mutex_unlock(&s->lock);
    free_server(s);
}

/* ---- HTTP client ---- */

int agent_http_get(const char *hostport, const char *path, int timeout_ms, char **body, size_t *len,
                   uint16_t *status, char *err, size_t errlen)
{
    *body = NULL;
    if (len)
        *len = 0;
    if (!hostport || !path || path[0] != '/' || timeout_ms <= 0 ||
        strlen(hostport) + strlen(path) > 200)
        return common_errf(err, errlen, AGENT_METRICS_EINVAL, "bad address or path");
    char url_s[512];
    snprintf(url_s, sizeof url_s, "%s%s%s", strncmp(hostport, "http://", 7) ? "http://" : "",
             hostport, path);
    nng_url *url = NULL;
    nng_http_client *cli = NULL;
    nng_http_req *req = NULL;
    nng_http_res *res = NULL;
    nng_aio *aio = NULL;
    int rc = 0, rv;
    if ((rv = nng_url_parse(&url, url_s))) {
        rc = common_errf(err, errlen, AGENT_METRICS_EINVAL, "%s: not a valid address: %s", url_s,
                         nng_strerror(rv));
        goto out;
    }
    if ((rv = nng_http_client_alloc(&cli, url)) || (rv = nng_http_req_alloc(&req, url)) ||
        (rv = nng_http_res_alloc(&res)) || (rv = nng_aio_alloc(&aio, NULL, NULL))) {
        rc = common_errf(err, errlen, AGENT_METRICS_ENOMEM, "%s: %s", url_s, nng_strerror(rv));
        goto out;
    }
    nng_aio_set_timeout(aio, (nng_duration)timeout_ms);
    nng_http_client_transact(cli, req, res, aio);
    nng_aio_wait(aio);
    rv = nng_aio_result(aio);
    if (rv) {
        rc = common_errf(err, errlen,
                         rv == NNG_ETIMEDOUT ? AGENT_METRICS_ETIMEDOUT : AGENT_METRICS_ENET,
                         "cannot fetch %s: %s", url_s,
                         rv == NNG_ETIMEDOUT ? "no answer in time" : nng_strerror(rv));
        goto out;
    }
    uint16_t code = nng_http_res_get_status(res);
    if (status)
        *status = code;
    if (code != 200) {
        rc = common_errf(err, errlen, AGENT_METRICS_EHTTP, "%s answered %u %s", url_s, code,
                         nng_http_res_get_reason(res));
        goto out;
    }
    void *data;
    size_t n;
    nng_http_res_get_data(res, &data, &n);
    if (n > AGENT_HTTP_BODY_MAX) {
        rc = common_errf(err, errlen, AGENT_METRICS_ENET, "%s: answer of %zu bytes exceeds %u",
                         url_s, n, AGENT_HTTP_BODY_MAX);
        goto out;
    }
    char *copy = malloc(n + 1);
    if (!copy) {
        rc = common_errf(err, errlen, AGENT_METRICS_ENOMEM, "out of memory");
        goto out;
    }
    if (n)
        memcpy(copy, data, n);
    copy[n] = '\0';
    *body = copy;
    if (len)
        *len = n;
out:
    if (aio)
        nng_aio_free(aio);
    if (res)
        nng_http_res_free(res);
    if (req)
        nng_http_req_free(req);
    if (cli)
        nng_http_client_free(cli);
    if (url)
        nng_url_free(url);
    return rc;
}
