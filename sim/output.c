/* sim/output — see output.h for the file formats. */
#include "sim/output.h"

#include "common/errmsg.h"
#include "common/fs.h"
#include "common/json.h"
#include "common/text.h"

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
    int is_u64;
    uint64_t u;
    double d;
} scalar;

enum { NSCALARS = 18 };

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
        } else if (v[i].is_u64) {
            common_json_u64(&j, v[i].name, v[i].u);
        } else {
            common_json_number(&j, v[i].name, v[i].d);
        }
    }
    common_json_number(&j, "events_per_s", s->wall_s > 0 ? (double)s->events / s->wall_s : NAN);
    for (uint32_t i = 0; i < s->nextra; i++)
        common_json_number(&j, s->extra[i].name, s->extra[i].value);
    common_json_string(&j, "label", s->label);
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

int sim_sweep_csv_open(sim_sweep_csv *c, const char *dir, const sim_sweep *sw, char *err,
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
