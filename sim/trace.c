/* sim/trace — see trace.h for the file format and the semantics. */
#include "sim/trace.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Latest time in a trace, seconds (about 31 years, as fault lines). */
#define TRACE_TIME_S_MAX 1e9

static void set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static const char *kind_what(sim_trace_kind k)
{
    switch (k) {
    case SIM_TRACE_BANDWIDTH:
        return "a bandwidth in Mb/s, in (0, 1e7]";
    case SIM_TRACE_LATENCY:
        return "a latency in ms, in [0, 3600000]";
    default:
        return "an availability in [0, 1]";
    }
}

static int value_ok(sim_trace_kind k, double v)
{
    switch (k) {
    case SIM_TRACE_BANDWIDTH:
        return v > 0 && v <= 1e7;
    case SIM_TRACE_LATENCY:
        return v >= 0 && v <= 3600000.0;
    default:
        return v >= 0 && v <= 1;
    }
}

/* A finite number filling the whole token. */
static int number(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || !isfinite(v) || errno == ERANGE)
        return -1;
    *out = v;
    return 0;
}

void sim_trace_free(sim_trace *t)
{
    free(t->t_us);
    free(t->v);
    memset(t, 0, sizeof *t);
}

int sim_trace_parse(sim_trace *out, sim_trace_kind kind, const char *text, const char *name,
                    char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->kind = kind;
    size_t cap = 0;
    unsigned line = 0;
    double period_s = 0;
    int rc = SIM_TRACE_OK;
    for (const char *p = text; *p && rc == 0;) {
        line++;
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (len >= SIM_TRACE_LINE_MAX) {
            set_err(err, errlen, "%s:%u: line longer than %u characters", name, line,
                    SIM_TRACE_LINE_MAX - 1);
            rc = SIM_TRACE_EPARSE;
            break;
        }
        char buf[SIM_TRACE_LINE_MAX];
        memcpy(buf, p, len);
        buf[len] = 0;
        p = nl ? nl + 1 : p + len;
        /* a comment starts a line or follows a blank */
        for (size_t i = 0; i < len; i++)
            if (buf[i] == '#' && (i == 0 || isspace((unsigned char)buf[i - 1]))) {
                buf[i] = 0;
                break;
            }
        char *tok[3];
        int nt = 0;
        for (char *save = NULL, *w = strtok_r(buf, " \t\r", &save); w;
             w = strtok_r(NULL, " \t\r", &save)) {
            if (nt == 3) {
                nt++;
                break;
            }
            tok[nt++] = w;
        }
        if (nt == 0)
            continue;
        if (nt != 2) {
            set_err(err, errlen, "%s:%u: expected 'TIME VALUE' or 'PERIODICITY SECONDS'", name,
                    line);
            rc = SIM_TRACE_EPARSE;
            break;
        }
        if (!strcasecmp(tok[0], "PERIODICITY")) {
            if (period_s > 0 || out->n) {
                set_err(err, errlen, "%s:%u: PERIODICITY must come once, before the points", name,
                        line);
                rc = SIM_TRACE_EPARSE;
            } else if (number(tok[1], &period_s) || !(period_s > 0) ||
                       period_s > TRACE_TIME_S_MAX) {
                set_err(err, errlen, "%s:%u: '%s' is not a period in seconds (> 0)", name, line,
                        tok[1]);
                rc = SIM_TRACE_EPARSE;
            }
            continue;
        }
        double t, v;
        if (number(tok[0], &t) || t < 0 || t > TRACE_TIME_S_MAX) {
            set_err(err, errlen, "%s:%u: '%s' is not a time in seconds (a number in [0, 1e9])",
                    name, line, tok[0]);
            rc = SIM_TRACE_EPARSE;
            break;
        }
        if (number(tok[1], &v) || !value_ok(kind, v)) {
            set_err(err, errlen, "%s:%u: '%s' is not %s", name, line, tok[1], kind_what(kind));
            rc = SIM_TRACE_EPARSE;
            break;
        }
        uint64_t t_us = (uint64_t)llround(t * 1e6);
        if (out->n && t_us <= out->t_us[out->n - 1]) {
            set_err(err, errlen, "%s:%u: time %g is not after the previous point's (%g)", name,
                    line, t, (double)out->t_us[out->n - 1] / 1e6);
            rc = SIM_TRACE_EPARSE;
            break;
        }
        if (out->n == SIM_TRACE_POINTS_MAX) {
            set_err(err, errlen, "%s:%u: more than %u points", name, line, SIM_TRACE_POINTS_MAX);
            rc = SIM_TRACE_ETOOMANY;
            break;
        }
        if (out->n == cap) {
            size_t nc = cap ? 2 * cap : 64;
            uint64_t *nt_us = realloc(out->t_us, nc * sizeof *nt_us);
            if (nt_us)
                out->t_us = nt_us;
            double *nv = nt_us ? realloc(out->v, nc * sizeof *nv) : NULL;
            if (!nv) {
                set_err(err, errlen, "%s: out of memory", name);
                rc = SIM_TRACE_ENOMEM;
                break;
            }
            out->v = nv;
            cap = nc;
        }
        out->t_us[out->n] = t_us;
        out->v[out->n++] = v;
    }
    if (rc == 0 && out->n == 0) {
        set_err(err, errlen, "%s: no 'TIME VALUE' line", name);
        rc = SIM_TRACE_EPARSE;
    }
    if (rc == 0 && period_s > 0) {
        out->period_us = (uint64_t)llround(period_s * 1e6);
        if (out->period_us <= out->t_us[out->n - 1]) {
            set_err(err, errlen, "%s: PERIODICITY %g is not after the last point's time (%g)", name,
                    period_s, (double)out->t_us[out->n - 1] / 1e6);
            rc = SIM_TRACE_EPARSE;
        }
    }
    if (rc)
        sim_trace_free(out);
    return rc;
}

int sim_trace_load(sim_trace *out, sim_trace_kind kind, const char *path, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f) {
        set_err(err, errlen, "%s: cannot open the trace: %s", path, strerror(errno));
        return SIM_TRACE_EIO;
    }
    char *text = malloc(SIM_TRACE_FILE_MAX + 1);
    if (!text) {
        fclose(f);
        set_err(err, errlen, "%s: out of memory", path);
        return SIM_TRACE_ENOMEM;
    }
    size_t n = fread(text, 1, SIM_TRACE_FILE_MAX + 1, f);
    int bad = ferror(f);
    fclose(f);
    if (bad || n > SIM_TRACE_FILE_MAX) {
        free(text);
        if (bad)
            set_err(err, errlen, "%s: read error", path);
        else
            set_err(err, errlen, "%s: larger than %u bytes", path, SIM_TRACE_FILE_MAX);
        return SIM_TRACE_EIO;
    }
    text[n] = 0;
    if (memchr(text, 0, n)) {
        free(text);
        set_err(err, errlen, "%s: not a text file (a NUL byte)", path);
        return SIM_TRACE_EPARSE;
    }
    int rc = sim_trace_parse(out, kind, text, path, err, errlen);
    free(text);
    return rc;
}

/* Index of the last point with t_us[i] <= x (x >= t_us[0]). */
static size_t last_at_or_before(const sim_trace *t, uint64_t x)
{
    size_t lo = 0, hi = t->n; /* t_us[lo] <= x < t_us[hi] */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->t_us[mid] <= x)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

double sim_trace_value_at(const sim_trace *t, uint64_t t_us, double before)
{
    if (!t->n || t_us < t->t_us[0])
        return before;
    if (!t->period_us)
        return t->v[last_at_or_before(t, t_us)];
    uint64_t r = t_us % t->period_us;
    if (r < t->t_us[0]) /* before the first point of this period: the last of the one before */
        return t->v[t->n - 1];
    return t->v[last_at_or_before(t, r)];
}

/* The first change strictly after x; UINT64_MAX if none. */
static uint64_t next_change(const sim_trace *t, uint64_t x)
{
    if (x < t->t_us[0])
        return t->t_us[0];
    if (!t->period_us) {
        size_t i = last_at_or_before(t, x);
        return i + 1 < t->n ? t->t_us[i + 1] : UINT64_MAX;
    }
    uint64_t k = x / t->period_us, r = x % t->period_us;
    uint64_t base = k * t->period_us;
    if (r < t->t_us[0])
        return base + t->t_us[0];
    size_t i = last_at_or_before(t, r);
    if (i + 1 < t->n)
        return base + t->t_us[i + 1];
    if (base > UINT64_MAX - t->period_us - t->t_us[0])
        return UINT64_MAX;
    return base + t->period_us + t->t_us[0];
}

int sim_trace_changes(const sim_trace *t, uint64_t horizon_us,
                      int (*fn)(void *ctx, uint64_t t_us, double value), void *ctx)
{
    if (!t->n)
        return 0;
    uint64_t count = 0;
    if (!t->period_us) {
        while (count < t->n && t->t_us[count] < horizon_us)
            count++;
    } else {
        uint64_t k = horizon_us / t->period_us, r = horizon_us % t->period_us;
        count = k * t->n;
        for (size_t i = 0; i < t->n && t->t_us[i] < r; i++)
            count++;
    }
    if (count > SIM_TRACE_CHANGES_MAX)
        return SIM_TRACE_ETOOMANY;
    uint64_t base = 0;
    for (uint64_t c = 0; c < count;) {
        for (size_t i = 0; i < t->n && c < count; i++, c++) {
            int rc = fn(ctx, base + t->t_us[i], t->v[i]);
            if (rc)
                return rc;
        }
        base += t->period_us;
    }
    return 0;
}

uint64_t sim_trace_work_end_us(const sim_trace *t, uint64_t start_us, uint64_t work_us)
{
    if (work_us == 0)
        return start_us;
    /* work done over one period (the trace is periodic from its first point) */
    double period_work = 0;
    if (t->period_us) {
        for (size_t i = 0; i < t->n; i++) {
            uint64_t end = i + 1 < t->n ? t->t_us[i + 1] : t->period_us + t->t_us[0];
            period_work += t->v[i] * (double)(end - t->t_us[i]);
        }
    }
    double left = (double)work_us;
    uint64_t cur = start_us;
    for (;;) {
        if (t->period_us && cur >= t->t_us[0]) {
            if (period_work <= 0)
                return UINT64_MAX;        /* stopped for good */
            if (left > 2 * period_work) { /* skip whole periods at the same phase */
                double m = floor(left / period_work) - 1;
                double jump = m * (double)t->period_us;
                if ((double)cur + jump >= 1.8e19)
                    return UINT64_MAX;
                cur += (uint64_t)jump;
                left -= m * period_work;
            }
        }
        double a = sim_trace_value_at(t, cur, 1.0);
        uint64_t next = next_change(t, cur);
        if (a > 0) {
            double need = ceil(left / a - 1e-9);
            if (need < 1)
                need = 1;
            if (next == UINT64_MAX || (double)cur + need <= (double)next) {
                if ((double)cur + need >= 1.8e19)
                    return UINT64_MAX;
                return cur + (uint64_t)need;
            }
            left -= a * (double)(next - cur);
        } else if (next == UINT64_MAX) {
            return UINT64_MAX;
        }
        cur = next;
    }
}
