/* sim/output — see output.h for the file formats. */
#include "sim/output.h"

#include "common/errmsg.h"
#include "common/fs.h"
#include "common/json.h"
#include "common/text.h"
#include "gossip/wire.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int sim_mkdirs(const char *dir, char *err, size_t errlen)
{
    if (!*dir || strlen(dir) >= SIM_OUTPUT_PATH_MAX)
        return common_errf(err, errlen, SIM_OUTPUT_EINVAL,
                           "output directory '%s': empty or longer than %u characters", dir,
                           SIM_OUTPUT_PATH_MAX - 1);
    return common_mkdirs(dir, 0777, err, errlen) ? SIM_OUTPUT_EIO : SIM_OUTPUT_OK;
}

static int join(char *out, const char *dir, const char *name, char *err, size_t errlen)
{
    int n = snprintf(out, SIM_OUTPUT_PATH_MAX, "%s/%s", dir, name);
    if (n < 0 || n >= (int)SIM_OUTPUT_PATH_MAX) {
        return common_errf(err, errlen, SIM_OUTPUT_EINVAL,
                           "output path %s/%s: longer than %u characters", dir, name,
                           SIM_OUTPUT_PATH_MAX - 1);
    }
    return SIM_OUTPUT_OK;
}

/* the shortest form that reads back to the same double (common/text.h) */
static void put_double(FILE *f, double v)
{
    char buf[40];
    common_fmt_double(v, buf, sizeof buf);
    fputs(buf, f);
}

static void csv_double(FILE *f, double v)
{
    if (isfinite(v))
        put_double(f, v);
}

int sim_output_open(sim_output *o, const char *dir, char *err, size_t errlen)
{
    memset(o, 0, sizeof *o);
    int rc = sim_mkdirs(dir, err, errlen);
    if (rc)
        return rc;
    if ((rc = join(o->path, dir, "series.csv", err, errlen)))
        return rc;
    o->series = fopen(o->path, "w");
    if (!o->series) {
        return common_errf(err, errlen, SIM_OUTPUT_EIO, "cannot create %s: %s", o->path,
                           strerror(errno));
    }
    fputs(SIM_SERIES_HEADER "\n", o->series);
    return SIM_OUTPUT_OK;
}

int sim_output_row(sim_output *o, const sim_series_row *r)
{
    FILE *f = o->series;
    csv_double(f, r->time_s);
    fprintf(f, ",%llu,", (unsigned long long)r->round);
    if (r->agent == SIM_AGENT_ALL)
        fputs("all", f);
    else
        fprintf(f, "%lld", (long long)r->agent);
    fputc(',', f);
    csv_double(f, r->loss);
    fputc(',', f);
    csv_double(f, r->accuracy);
    fputc(',', f);
    csv_double(f, r->consensus_distance);
    fprintf(f, ",%llu,%llu\n", (unsigned long long)r->bytes_sent,
            (unsigned long long)r->bytes_recv);
    o->rows++;
    /* A population row ends a sample: on disk at once, so a run killed
     * outright (SIGKILL, a crash) still leaves every sample so far. */
    if (r->agent == SIM_AGENT_ALL)
        fflush(f);
    return ferror(f) ? SIM_OUTPUT_EIO : SIM_OUTPUT_OK;
}

static int close_file(FILE **fp, const char *path, char *err, size_t errlen)
{
    if (!*fp)
        return SIM_OUTPUT_OK;
    int bad = ferror(*fp);
    bad |= fclose(*fp) != 0;
    *fp = NULL;
    if (bad) {
        return common_errf(err, errlen, SIM_OUTPUT_EIO, "write error on %s", path);
    }
    return SIM_OUTPUT_OK;
}

int sim_output_close(sim_output *o, char *err, size_t errlen)
{
    return close_file(&o->series, o->path, err, errlen);
}

void sim_summary_init(sim_summary *s)
{
    memset(s, 0, sizeof *s);
    s->final_accuracy = NAN;
    s->time_to_target_s = NAN;
    s->consensus_distance_final = NAN;
    s->final_loss = NAN;
    s->memory_per_agent_bytes = NAN;
    s->time_to_target_sustained_s = NAN;
    s->diverged_time_s = NAN;
}

void sim_diverge_init(sim_diverge *d, double factor)
{
    memset(d, 0, sizeof *d);
    d->factor = factor;
    d->cd_ref = d->loss_ref = NAN;
    d->time_s = NAN;
}

static int diverge_now(sim_diverge *d, double time_s, uint64_t round, const char *fmt, double v,
                       double ref)
{
    d->diverged = 1;
    d->round = round;
    d->time_s = time_s;
    snprintf(d->reason, sizeof d->reason, fmt, v, ref);
    return 1;
}

int sim_diverge_sample(sim_diverge *d, double time_s, uint64_t round, uint32_t live, double loss,
                       double cd)
{
    if (d->diverged || live == 0)
        return 0;
    if (!isfinite(cd))
        return diverge_now(d, time_s, round, "consensus distance is %g", cd, 0);
    if (isinf(loss))
        return diverge_now(d, time_s, round, "loss is %g", loss, 0);
    if (isnan(loss) && isfinite(d->loss_ref))
        return diverge_now(d, time_s, round, "loss is %g (it was %g)", loss, d->loss_ref);
    if (isnan(d->cd_ref) && cd > 0)
        d->cd_ref = cd;
    if (isnan(d->loss_ref) && loss > 0)
        d->loss_ref = loss;
    if (d->factor > 0 && cd > d->factor * d->cd_ref)
        return diverge_now(d, time_s, round,
                           "consensus distance %g grew past run.diverge_factor times its first "
                           "value %g",
                           cd, d->cd_ref);
    if (d->factor > 0 && loss > d->factor * d->loss_ref)
        return diverge_now(d, time_s, round,
                           "loss %g grew past run.diverge_factor times its first value %g", loss,
                           d->loss_ref);
    return 0;
}

int sim_summary_add(sim_summary *s, const char *name, double value)
{
    size_t n = strlen(name);
    if (n == 0 || n >= SIM_SUMMARY_NAME_MAX || isdigit((unsigned char)name[0]))
        return SIM_OUTPUT_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)name[i]) && name[i] != '_')
            return SIM_OUTPUT_EINVAL;
    if (s->nextra == SIM_SUMMARY_EXTRA_MAX)
        return SIM_OUTPUT_ETOOMANY;
    memcpy(s->extra[s->nextra].name, name, n + 1);
    s->extra[s->nextra++].value = value;
    return SIM_OUTPUT_OK;
}

/* The scalar fields, in order, shared by summary.json and sweep.csv. */
typedef struct scalar {
    const char *name;
    int is_u64; /* 1: an integer; 2: a flag (true/false in JSON, 1/0 in CSV) */
    uint64_t u;
    double d;
} scalar;

enum { NSCALARS = 22 };

static void scalars(const sim_summary *s, scalar out[NSCALARS])
{
    scalar v[NSCALARS] = {
        {"seed", 1, s->seed, 0},
        {"trace_hash", 1, s->trace_hash, 0},
        {"events", 1, s->events, 0},
        {"wall_s", 0, 0, s->wall_s},
        {"sim_time_s", 0, 0, s->sim_time_s},
        {"rounds", 1, s->rounds, 0},
        {"steps_total", 1, s->steps_total, 0},
        {"bytes_total", 1, s->bytes_total, 0},
        {"bytes_per_agent_max", 1, s->bytes_per_agent_max, 0},
        {"final_accuracy", 0, 0, s->final_accuracy},
        {"time_to_target_s", 0, 0, s->time_to_target_s},
        {"consensus_distance_final", 0, 0, s->consensus_distance_final},
        {"shards_lost", 1, s->shards_lost, 0},
        {"agents", 1, s->agents, 0},
        {"final_loss", 0, 0, s->final_loss},
        {"messages", 1, s->messages, 0},
        {"messages_lost", 1, s->messages_lost, 0},
        {"memory_per_agent_bytes", 0, 0, s->memory_per_agent_bytes},
        {"time_to_target_sustained_s", 0, 0, s->time_to_target_sustained_s},
        {"interrupted", 2, (uint64_t)s->interrupted, 0},
        {"diverged", 2, (uint64_t)s->diverged, 0},
        {"diverged_round", 0, 0, s->diverged ? (double)s->diverged_round : NAN},
    };
    memcpy(out, v, sizeof v);
}

int sim_summary_write(const sim_summary *s, FILE *f)
{
    scalar v[NSCALARS];
    scalars(s, v);
    common_json j;
    common_json_init_file(&j, f, 2);
    common_json_object_begin(&j, NULL);
    for (int i = 0; i < NSCALARS; i++) {
        if (!strcmp(v[i].name, "trace_hash")) {
            char hex[17];
            snprintf(hex, sizeof hex, "%016llx", (unsigned long long)v[i].u);
            common_json_string(&j, v[i].name, hex);
        } else if (v[i].is_u64 == 2) {
            common_json_bool(&j, v[i].name, v[i].u != 0);
        } else if (v[i].is_u64) {
            common_json_u64(&j, v[i].name, v[i].u);
        } else {
            common_json_number(&j, v[i].name, v[i].d);
        }
    }
    common_json_number(&j, "events_per_s", s->wall_s > 0 ? (double)s->events / s->wall_s : NAN);
    common_json_number(&j, "diverged_time_s", s->diverged_time_s);
    if (s->diverged)
        common_json_string(&j, "diverged_reason", s->diverged_reason);
    for (uint32_t i = 0; i < s->nextra; i++)
        common_json_number(&j, s->extra[i].name, s->extra[i].value);
    common_json_string(&j, "label", s->label);
    if (s->scenario[0])
        common_json_string(&j, "scenario", s->scenario);
    common_json_end(&j);
    return common_json_finish(&j, NULL) ? SIM_OUTPUT_EIO : SIM_OUTPUT_OK;
}

int sim_summary_write_file(const sim_summary *s, const char *dir, char *err, size_t errlen)
{
    char path[SIM_OUTPUT_PATH_MAX];
    int rc = sim_mkdirs(dir, err, errlen);
    if (rc || (rc = join(path, dir, "summary.json", err, errlen)))
        return rc;
    FILE *f = fopen(path, "w");
    if (!f) {
        return common_errf(err, errlen, SIM_OUTPUT_EIO, "cannot create %s: %s", path,
                           strerror(errno));
    }
    sim_summary_write(s, f);
    return close_file(&f, path, err, errlen);
}

/* ---- sweep.csv ---- */

static void csv_text(FILE *f, const char *s)
{
    if (!strpbrk(s, ",\"\n\r")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* sweep.csv created in dir, its header begun with "run" and the axes. */
static int sweep_csv_begin(sim_sweep_csv *c, const char *dir, const sim_sweep *sw, char *err,
                           size_t errlen)
{
    memset(c, 0, sizeof *c);
    int rc = sim_mkdirs(dir, err, errlen);
    if (rc || (rc = join(c->path, dir, "sweep.csv", err, errlen)))
        return rc;
    c->f = fopen(c->path, "w");
    if (!c->f) {
        return common_errf(err, errlen, SIM_OUTPUT_EIO, "cannot create %s: %s", c->path,
                           strerror(errno));
    }
    fputs("run", c->f);
    for (uint32_t a = 0; a < sw->naxes; a++) {
        fputc(',', c->f);
        csv_text(c->f, sw->axes[a].key);
    }
    return 0;
}

int sim_sweep_csv_open(sim_sweep_csv *c, const char *dir, const sim_sweep *sw, char *err,
                       size_t errlen)
{
    int rc = sweep_csv_begin(c, dir, sw, err, errlen);
    if (rc)
        return rc;
    sim_summary dummy;
    sim_summary_init(&dummy);
    scalar v[NSCALARS];
    scalars(&dummy, v);
    for (int i = 0; i < NSCALARS; i++)
        fprintf(c->f, ",%s", v[i].name);
    fputc('\n', c->f);
    return ferror(c->f) ? SIM_OUTPUT_EIO : SIM_OUTPUT_OK;
}

int sim_sweep_csv_row(sim_sweep_csv *c, const sim_sweep *sw, uint64_t run, const sim_summary *s)
{
    FILE *f = c->f;
    fprintf(f, "%llu", (unsigned long long)run);
    for (uint32_t a = 0; a < sw->naxes; a++) {
        fputc(',', f);
        csv_text(f, sw->axes[a].values[sim_sweep_value_index(sw, run, a)]);
    }
    scalar v[NSCALARS];
    scalars(s, v);
    for (int i = 0; i < NSCALARS; i++) {
        fputc(',', f);
        if (!strcmp(v[i].name, "trace_hash"))
            fprintf(f, "%016llx", (unsigned long long)v[i].u);
        else if (v[i].is_u64)
            fprintf(f, "%llu", (unsigned long long)v[i].u);
        else
            csv_double(f, v[i].d);
    }
    fputc('\n', f);
    return ferror(f) ? SIM_OUTPUT_EIO : SIM_OUTPUT_OK;
}

int sim_sweep_csv_close(sim_sweep_csv *c, char *err, size_t errlen)
{
    return close_file(&c->f, c->path, err, errlen);
}

/* ---- replications ---- */

/* The numbers summarised over seeds: scalars but identity and flags. */
static int stat_scalar(const char *name)
{
    return strcmp(name, "seed") && strcmp(name, "trace_hash") && strcmp(name, "interrupted") &&
           strcmp(name, "diverged") && strcmp(name, "diverged_round");
}

static double scalar_value(const scalar *v)
{
    return v->is_u64 ? (double)v->u : v->d;
}

/* Stats of scalar i (or of extra `name` when name != NULL) over the runs. */
static void runs_stats(const sim_summary *runs, size_t n, int i, const char *name, sim_stats *st)
{
    double *x = malloc((n ? n : 1) * sizeof *x);
    if (!x) {
        sim_stats_compute(NULL, 0, SIM_STATS_LEVEL, st);
        return;
    }
    for (size_t k = 0; k < n; k++) {
        x[k] = NAN;
        if (name) {
            for (uint32_t e = 0; e < runs[k].nextra; e++)
                if (!strcmp(runs[k].extra[e].name, name))
                    x[k] = runs[k].extra[e].value;
        } else {
            scalar v[NSCALARS];
            scalars(&runs[k], v);
            x[k] = scalar_value(&v[i]);
        }
    }
    sim_stats_compute(x, n, SIM_STATS_LEVEL, st);
    free(x);
}

static void json_stats(common_json *j, const char *name, const sim_stats *st)
{
    common_json_object_begin(j, name);
    common_json_u64(j, "n", st->n);
    common_json_number(j, "mean", st->mean);
    common_json_number(j, "sd", st->sd);
    common_json_number(j, "ci_low", st->ci_low);
    common_json_number(j, "ci_high", st->ci_high);
    common_json_number(j, "half_width", st->half);
    common_json_end(j);
}

int sim_summary_write_stats(const sim_summary *runs, size_t n, FILE *f)
{
    common_json j;
    common_json_init_file(&j, f, 2);
    common_json_object_begin(&j, NULL);
    uint64_t nint = 0, ndiv = 0;
    for (size_t k = 0; k < n; k++)
        nint += runs[k].interrupted != 0, ndiv += runs[k].diverged != 0;
    if (n && runs[0].scenario[0])
        common_json_string(&j, "scenario", runs[0].scenario);
    common_json_string(&j, "label", n ? runs[0].label : "");
    common_json_array_begin(&j, "seeds");
    for (size_t k = 0; k < n; k++)
        common_json_u64(&j, NULL, runs[k].seed);
    common_json_end(&j);
    common_json_u64(&j, "runs", n);
    common_json_u64(&j, "runs_interrupted", nint);
    common_json_u64(&j, "runs_diverged", ndiv);
    common_json_bool(&j, "interrupted", nint > 0);
    common_json_bool(&j, "diverged", ndiv > 0);
    common_json_number(&j, "confidence_level", SIM_STATS_LEVEL);
    common_json_object_begin(&j, "metrics");
    scalar v[NSCALARS];
    sim_summary dummy;
    sim_summary_init(&dummy);
    scalars(&dummy, v);
    sim_stats st;
    for (int i = 0; i < NSCALARS; i++) {
        if (!stat_scalar(v[i].name))
            continue;
        runs_stats(runs, n, i, NULL, &st);
        json_stats(&j, v[i].name, &st);
    }
    for (uint32_t e = 0; n && e < runs[0].nextra; e++) {
        runs_stats(runs, n, 0, runs[0].extra[e].name, &st);
        json_stats(&j, runs[0].extra[e].name, &st);
    }
    common_json_end(&j);
    common_json_end(&j);
    return common_json_finish(&j, NULL) ? SIM_OUTPUT_EIO : SIM_OUTPUT_OK;
}

int sim_summary_write_stats_file(const sim_summary *runs, size_t n, const char *dir, char *err,
                                 size_t errlen)
{
    char path[SIM_OUTPUT_PATH_MAX];
    int rc = sim_mkdirs(dir, err, errlen);
    if (rc || (rc = join(path, dir, "summary.json", err, errlen)))
        return rc;
    FILE *f = fopen(path, "w");
    if (!f) {
        return common_errf(err, errlen, SIM_OUTPUT_EIO, "cannot create %s: %s", path,
                           strerror(errno));
    }
    sim_summary_write_stats(runs, n, f);
    return close_file(&f, path, err, errlen);
}

int sim_sweep_csv_open_stats(sim_sweep_csv *c, const char *dir, const sim_sweep *sw, char *err,
                             size_t errlen)
{
    int rc = sweep_csv_begin(c, dir, sw, err, errlen);
    if (rc)
        return rc;
    fputs(",seeds,runs_interrupted,runs_diverged", c->f);
    sim_summary dummy;
    sim_summary_init(&dummy);
    scalar v[NSCALARS];
    scalars(&dummy, v);
    for (int i = 0; i < NSCALARS; i++)
        if (stat_scalar(v[i].name))
            fprintf(c->f, ",%s,%s_sd,%s_ci_low,%s_ci_high,%s_n", v[i].name, v[i].name, v[i].name,
                    v[i].name, v[i].name);
    fputc('\n', c->f);
    return ferror(c->f) ? SIM_OUTPUT_EIO : SIM_OUTPUT_OK;
}

int sim_sweep_csv_row_stats(sim_sweep_csv *c, const sim_sweep *sw, uint64_t run,
                            const sim_summary *runs, size_t n)
{
    FILE *f = c->f;
    fprintf(f, "%llu", (unsigned long long)run);
    for (uint32_t a = 0; a < sw->naxes; a++) {
        fputc(',', f);
        csv_text(f, sw->axes[a].values[sim_sweep_value_index(sw, run, a)]);
    }
    uint64_t nint = 0, ndiv = 0;
    for (size_t k = 0; k < n; k++)
        nint += runs[k].interrupted != 0, ndiv += runs[k].diverged != 0;
    fprintf(f, ",%zu,%llu,%llu", n, (unsigned long long)nint, (unsigned long long)ndiv);
    sim_summary dummy;
    sim_summary_init(&dummy);
    scalar v[NSCALARS];
    scalars(&dummy, v);
    for (int i = 0; i < NSCALARS; i++) {
        if (!stat_scalar(v[i].name))
            continue;
        sim_stats st;
        runs_stats(runs, n, i, NULL, &st);
        fputc(',', f);
        csv_double(f, st.mean);
        fputc(',', f);
        csv_double(f, st.sd);
        fputc(',', f);
        csv_double(f, st.ci_low);
        fputc(',', f);
        csv_double(f, st.ci_high);
        fprintf(f, ",%u", st.n);
    }
    fputc('\n', f);
    return ferror(f) ? SIM_OUTPUT_EIO : SIM_OUTPUT_OK;
}

/* ---- event trace ---- */

void sim_trace_line(FILE *f, uint64_t now_us, uint32_t from, uint32_t to, const uint8_t *frame,
                    size_t len, uint64_t value)
{
    if (!frame) {
        fprintf(f, "%llu mark %016llx\n", (unsigned long long)now_us, (unsigned long long)value);
        return;
    }
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a 64 */
    for (size_t k = 0; k < len; k++)
        h = (h ^ frame[k]) * 0x100000001b3ULL;
    gossip_header hd;
    int typed = gossip_header_decode(frame, len, &hd) == GOSSIP_OK;
    fprintf(f, "%llu frame %u %u %zu ", (unsigned long long)now_us, from, to, len);
    if (typed)
        fprintf(f, "0x%02x", hd.type);
    else
        fputc('-', f);
    fprintf(f, " %016llx\n", (unsigned long long)h);
}

/* ---- consensus distance ---- */

double sim_consensus_distance_ptrs(const float *const *vecs, size_t n, size_t dim)
{
    size_t live = 0;
    for (size_t i = 0; i < n; i++)
        live += vecs[i] != NULL;
    if (live == 0)
        return NAN;
    if (dim == 0)
        return 0;
    double *mean = calloc(dim, sizeof *mean);
    if (!mean)
        return NAN;
    for (size_t i = 0; i < n; i++)
        if (vecs[i])
            for (size_t j = 0; j < dim; j++)
                mean[j] += vecs[i][j];
    for (size_t j = 0; j < dim; j++)
        mean[j] /= (double)live;
    double ss = 0;
    for (size_t i = 0; i < n; i++)
        if (vecs[i])
            for (size_t j = 0; j < dim; j++) {
                double d = (double)vecs[i][j] - mean[j];
                ss += d * d;
            }
    free(mean);
    return sqrt(ss / (double)live);
}

double sim_consensus_distance(const float *x, size_t n, size_t dim, size_t stride)
{
    if (n == 0)
        return NAN;
    const float **p = malloc(n * sizeof *p);
    if (!p)
        return NAN;
    for (size_t i = 0; i < n; i++)
        p[i] = x + i * stride;
    double d = sim_consensus_distance_ptrs(p, n, dim);
    free(p);
    return d;
}
