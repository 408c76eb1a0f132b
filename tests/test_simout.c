/* sim/output: series.csv header and rows, summary.json (valid JSON, null
 * for undefined values, escaping), sweep.csv, consensus distance against
 * hand-computed values, directory creation errors. */
#include "tests/harness.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim/output.h"

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return buf;
}

static void tmpdir(char *out, size_t len)
{
    snprintf(out, len, "/tmp/murmur_simout_XXXXXX");
    assert_non_null(mkdtemp(out));
}

static void rm_rf(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void series_csv(void **state)
{
    (void)state;
    char dir[64], sub[128];
    tmpdir(dir, sizeof dir);
    snprintf(sub, sizeof sub, "%s/a/b", dir); /* parents are created */
    sim_output o;
    char err[256];
    assert_int_equal(sim_output_open(&o, sub, err, sizeof err), 0);
    sim_series_row all = {.time_s = 0.5,
                          .round = 3,
                          .agent = SIM_AGENT_ALL,
                          .loss = 0.25,
                          .accuracy = NAN,
                          .consensus_distance = 1e-7,
                          .bytes_sent = 1000,
                          .bytes_recv = 999};
    sim_series_row one = {.time_s = 1.0 / 3,
                          .round = 4,
                          .agent = 17,
                          .loss = INFINITY,
                          .accuracy = 0.1,
                          .consensus_distance = 0,
                          .bytes_sent = 0,
                          .bytes_recv = 18446744073709551615ull};
    assert_int_equal(sim_output_row(&o, &all), 0);
    assert_int_equal(sim_output_row(&o, &one), 0);
    assert_int_equal(sim_output_close(&o, err, sizeof err), 0);
    char path[256];
    snprintf(path, sizeof path, "%s/series.csv", sub);
    assert_string_equal(
        slurp(path), "time_s,round,agent,loss,accuracy,consensus_distance,bytes_sent,bytes_recv\n"
                     "0.5,3,all,0.25,,1e-07,1000,999\n"
                     "0.3333333333333333,4,17,,0.1,0,0,18446744073709551615\n");
    /* the shortest form still reads back to the very same double */
    assert_true(strtod("0.3333333333333333", NULL) == 1.0 / 3);
    rm_rf(dir);
}

/* ---- a minimal JSON checker: one object of key -> number|null|string ---- */

static const char *skip_ws(const char *p)
{
    while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')
        p++;
    return p;
}

static const char *json_str(const char *p, char *out, size_t len)
{
    size_t n = 0;
    if (*p++ != '"')
        return NULL;
    while (*p && *p != '"') {
        char c = *p++;
        if ((unsigned char)c < 0x20)
            return NULL; /* raw control characters are not allowed */
        if (c == '\\') {
            c = *p++;
            if (c == 'n')
                c = '\n';
            else if (c == 't')
                c = '\t';
            else if (c == 'r')
                c = '\r';
            else if (c == 'u') {
                unsigned v;
                if (sscanf(p, "%4x", &v) != 1)
                    return NULL;
                p += 4;
                c = (char)v;
            } else if (c != '"' && c != '\\' && c != '/')
                return NULL;
        }
        if (n + 1 < len)
            out[n++] = c;
    }
    out[n] = 0;
    return *p == '"' ? p + 1 : NULL;
}

typedef struct jfield {
    char key[64];
    int is_null, is_str;
    double num;
    char str[256];
} jfield;

static int json_object(const char *p, jfield *f, int max)
{
    int n = 0;
    p = skip_ws(p);
    if (*p++ != '{')
        return -1;
    for (;;) {
        p = skip_ws(p);
        if (n >= max || !(p = json_str(p, f[n].key, sizeof f[n].key)))
            return -1;
        p = skip_ws(p);
        if (*p++ != ':')
            return -1;
        p = skip_ws(p);
        f[n].is_null = f[n].is_str = 0;
        if (!strncmp(p, "null", 4)) {
            f[n].is_null = 1;
            p += 4;
        } else if (!strncmp(p, "true", 4) || !strncmp(p, "false", 5)) {
            f[n].num = *p == 't'; /* a flag: 1 or 0 */
            p += *p == 't' ? 4 : 5;
        } else if (*p == '"') {
            f[n].is_str = 1;
            if (!(p = json_str(p, f[n].str, sizeof f[n].str)))
                return -1;
        } else {
            char *end;
            if (!(*p == '-' || isdigit((unsigned char)*p)))
                return -1;
            f[n].num = strtod(p, &end);
            if (end == p || !isfinite(f[n].num))
                return -1;
            p = end;
        }
        n++;
        p = skip_ws(p);
        if (*p == ',') {
            p++;
            continue;
        }
        if (*p++ != '}')
            return -1;
        return *skip_ws(p) ? -1 : n;
    }
}

static const jfield *get(const jfield *f, int n, const char *key)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(f[i].key, key))
            return &f[i];
    fail_msg("summary.json has no \"%s\"", key);
    return NULL;
}

static void summary_json(void **state)
{
    (void)state;
    char dir[64], err[256];
    tmpdir(dir, sizeof dir);
    sim_summary s;
    sim_summary_init(&s);
    s.seed = 18446744073709551615ull;
    s.trace_hash = 0x0123456789abcdefull;
    s.events = 12345;
    s.wall_s = 0.5;
    s.sim_time_s = 60;
    s.rounds = 100;
    s.steps_total = 1600;
    s.bytes_total = 1ull << 40;
    s.bytes_per_agent_max = 77;
    s.consensus_distance_final = 1e-9;
    s.final_accuracy = INFINITY; /* not finite: null */
    s.shards_lost = 0;
    s.agents = 16;
    snprintf(s.label, sizeof s.label, "q\"uote\\ nl\n tab\t ctl\x01 end");
    assert_int_equal(sim_summary_add(&s, "peak_flows", 42), 0);
    assert_int_equal(sim_summary_add(&s, "bad-name", 1), SIM_OUTPUT_EINVAL);
    assert_int_equal(sim_summary_add(&s, "9lives", 1), SIM_OUTPUT_EINVAL);
    assert_int_equal(sim_summary_add(&s, "", 1), SIM_OUTPUT_EINVAL);
    assert_int_equal(sim_summary_write_file(&s, dir, err, sizeof err), 0);
    char path[128];
    snprintf(path, sizeof path, "%s/summary.json", dir);
    const char *text = slurp(path);
    jfield f[64];
    int n = json_object(text, f, 64);
    if (n < 0)
        fail_msg("summary.json is not a valid flat JSON object:\n%s", text);
    static const char *required[] = {
        "seed",           "trace_hash",       "events",
        "wall_s",         "sim_time_s",       "rounds",
        "steps_total",    "bytes_total",      "bytes_per_agent_max",
        "final_accuracy", "time_to_target_s", "consensus_distance_final",
        "shards_lost"};
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
        (void)get(f, n, required[i]);
    assert_non_null(strstr(text, "\"seed\": 18446744073709551615,"));
    assert_true(get(f, n, "trace_hash")->is_str);
    assert_string_equal(get(f, n, "trace_hash")->str, "0123456789abcdef");
    assert_true(get(f, n, "time_to_target_s")->is_null);
    assert_true(get(f, n, "final_accuracy")->is_null);
    assert_true(get(f, n, "consensus_distance_final")->num == 1e-9);
    assert_true(get(f, n, "bytes_total")->num == 1099511627776.0);
    assert_true(get(f, n, "events_per_s")->num == 24690);
    assert_true(get(f, n, "peak_flows")->num == 42);
    assert_true(get(f, n, "interrupted")->num == 0 && get(f, n, "diverged")->num == 0);
    assert_true(get(f, n, "diverged_round")->is_null);
    assert_true(get(f, n, "time_to_target_sustained_s")->is_null);
    assert_non_null(strstr(text, "\"interrupted\": false,"));
    /* whole numbers stay whole: "60", not "6e+01" */
    assert_non_null(strstr(text, "\"sim_time_s\": 60,"));
    assert_non_null(strstr(text, "\"wall_s\": 0.5,"));
    assert_string_equal(get(f, n, "label")->str, s.label); /* escapes decode back */
    assert_non_null(strstr(text, "\\u0001"));
    for (uint32_t i = s.nextra; i < SIM_SUMMARY_EXTRA_MAX; i++)
        assert_int_equal(sim_summary_add(&s, "x", 1), 0);
    assert_int_equal(sim_summary_add(&s, "x", 1), SIM_OUTPUT_ETOOMANY);
    rm_rf(dir);
}

static void sweep_csv(void **state)
{
    (void)state;
    char dir[64], err[256];
    tmpdir(dir, sizeof dir);
    sim_scenario *base = malloc(sizeof *base);
    sim_scenario_defaults(base);
    sim_sweep sw;
    sim_sweep_init(&sw);
    assert_int_equal(sim_sweep_add(&sw, base, "mixing.bits=4,8", err, sizeof err), 0);
    assert_int_equal(sim_sweep_add(&sw, base, "model.data=a\"b,c", err, sizeof err), 0);
    sim_sweep_csv c;
    assert_int_equal(sim_sweep_csv_open(&c, dir, &sw, err, sizeof err), 0);
    for (uint64_t r = 0; r < sim_sweep_runs(&sw); r++) {
        sim_summary s;
        sim_summary_init(&s);
        s.seed = r + 1;
        s.trace_hash = 0xff;
        s.final_accuracy = 0.5;
        assert_int_equal(sim_sweep_csv_row(&c, &sw, r, &s), 0);
    }
    assert_int_equal(sim_sweep_csv_close(&c, err, sizeof err), 0);
    char path[128];
    snprintf(path, sizeof path, "%s/sweep.csv", dir);
    const char *text = slurp(path);
    const char *want_head =
        "run,mixing.bits,model.data,seed,trace_hash,events,wall_s,sim_time_s,rounds,steps_total,"
        "bytes_total,bytes_per_agent_max,final_accuracy,time_to_target_s,"
        "consensus_distance_final,shards_lost,agents,final_loss,messages,messages_lost,"
        "memory_per_agent_bytes,time_to_target_sustained_s,interrupted,diverged,diverged_round\n";
    assert_memory_equal(text, want_head, strlen(want_head));
    const char *rows = text + strlen(want_head);
    assert_memory_equal(
        rows, "0,4,\"a\"\"b\",1,00000000000000ff,0,0,0,0,0,0,0,0.5,,,0,0,,0,0,,,0,0,\n",
        strlen("0,4,\"a\"\"b\",1,00000000000000ff,0,0,0,0,0,0,0,0.5,,,0,0,,0,0,,,0,0,\n"));
    int lines = 0;
    for (const char *p = text; *p; p++)
        lines += *p == '\n';
    assert_int_equal(lines, 5);
    assert_non_null(strstr(text, "\n3,8,c,4,"));
    free(base);
    rm_rf(dir);
}

/* Divergence: non-finite values at once; growth past factor x the first
 * positive value; nothing without live agents; only the first counts. */
static void diverge(void **state)
{
    (void)state;
    sim_diverge d;
    sim_diverge_init(&d, 1e3);
    assert_int_equal(sim_diverge_sample(&d, 0, 0, 4, NAN, 0), 0); /* consensus at 0: no ref */
    assert_int_equal(sim_diverge_sample(&d, 1, 1, 4, NAN, 2), 0);
    assert_int_equal(sim_diverge_sample(&d, 2, 2, 4, NAN, 1999), 0);
    assert_int_equal(sim_diverge_sample(&d, 3, 3, 0, NAN, NAN), 0); /* nobody live */
    assert_int_equal(sim_diverge_sample(&d, 4, 4, 4, NAN, 2001), 1);
    assert_int_equal(d.diverged, 1);
    assert_int_equal(d.round, 4);
    assert_true(d.time_s == 4);
    assert_non_null(strstr(d.reason, "run.diverge_factor"));
    assert_int_equal(sim_diverge_sample(&d, 5, 5, 4, NAN, NAN), 0); /* once */
    assert_int_equal(d.round, 4);

    sim_diverge_init(&d, 0); /* growth off: only non-finite values */
    assert_int_equal(sim_diverge_sample(&d, 0, 0, 2, 2.3, 1), 0);
    assert_int_equal(sim_diverge_sample(&d, 1, 7, 2, 1e30, 1e30), 0);
    assert_int_equal(sim_diverge_sample(&d, 2, 8, 2, NAN, 1), 1); /* loss was defined */
    assert_int_equal(d.round, 8);
    sim_diverge_init(&d, 0);
    assert_int_equal(sim_diverge_sample(&d, 0, 3, 2, 1, INFINITY), 1);
    assert_non_null(strstr(d.reason, "consensus distance is inf"));
    sim_diverge_init(&d, 10);
    assert_int_equal(sim_diverge_sample(&d, 0, 0, 2, 2, 0), 0);
    assert_int_equal(sim_diverge_sample(&d, 1, 1, 2, 21, 0), 1); /* loss > 10 x 2 */
    assert_non_null(strstr(d.reason, "loss 21"));
}

/* Seeds: summary.json of the replications holds mean, sd and the t
 * interval per metric, computed over the runs where it is defined. */
static void replications(void **state)
{
    (void)state;
    char dir[64], err[256];
    tmpdir(dir, sizeof dir);
    sim_summary runs[3];
    const double acc[3] = {0.70, 0.80, 0.90}, ttt[3] = {5, NAN, 7};
    for (int k = 0; k < 3; k++) {
        sim_summary_init(&runs[k]);
        runs[k].seed = 10 + k;
        runs[k].final_accuracy = acc[k];
        runs[k].time_to_target_s = ttt[k];
        runs[k].rounds = 100;
        snprintf(runs[k].scenario, sizeof runs[k].scenario, "x.ini");
        snprintf(runs[k].label, sizeof runs[k].label, "mixing.bits=8");
        assert_int_equal(sim_summary_add(&runs[k], "crashes", k), 0);
    }
    runs[2].diverged = 1;
    assert_int_equal(sim_summary_write_stats_file(runs, 3, dir, err, sizeof err), 0);
    char path[128];
    snprintf(path, sizeof path, "%s/summary.json", dir);
    const char *text = slurp(path);
    assert_non_null(strstr(text, "\"seeds\": [\n    10,\n    11,\n    12\n  ]"));
    assert_non_null(strstr(text, "\"runs\": 3,"));
    assert_non_null(strstr(text, "\"runs_diverged\": 1,"));
    assert_non_null(strstr(text, "\"diverged\": true,"));
    assert_non_null(strstr(text, "\"interrupted\": false,"));
    assert_non_null(strstr(text, "\"scenario\": \"x.ini\""));
    /* accuracy: mean 0.8, sd 0.1, half = t(0.975, 2) 0.1 / sqrt(3) */
    const char *a = strstr(text, "\"final_accuracy\": {");
    assert_non_null(a);
    double mean, sd, lo, hi;
    assert_int_equal(sscanf(strstr(a, "\"mean\":"), "\"mean\": %lf", &mean), 1);
    assert_int_equal(sscanf(strstr(a, "\"sd\":"), "\"sd\": %lf", &sd), 1);
    assert_int_equal(sscanf(strstr(a, "\"ci_low\":"), "\"ci_low\": %lf", &lo), 1);
    assert_int_equal(sscanf(strstr(a, "\"ci_high\":"), "\"ci_high\": %lf", &hi), 1);
    double half = 4.302652729749464 * 0.1 / sqrt(3);
    assert_true(fabs(mean - 0.8) < 1e-12 && fabs(sd - 0.1) < 1e-12);
    assert_true(fabs(lo - (0.8 - half)) < 1e-9 && fabs(hi - (0.8 + half)) < 1e-9);
    /* time to target: defined in 2 of 3 runs */
    const char *t = strstr(text, "\"time_to_target_s\": {");
    assert_non_null(t);
    assert_non_null(strstr(t, "\"n\": 2,"));
    assert_non_null(strstr(t, "\"mean\": 6,"));
    assert_non_null(strstr(text, "\"crashes\": {"));
    assert_null(strstr(text, "\"trace_hash\""));

    /* the sweep row: mean, sd, interval and n per metric */
    sim_scenario *base = malloc(sizeof *base);
    sim_scenario_defaults(base);
    sim_sweep sw;
    sim_sweep_init(&sw);
    assert_int_equal(sim_sweep_add(&sw, base, "mixing.bits=8", err, sizeof err), 0);
    sim_sweep_csv c;
    assert_int_equal(sim_sweep_csv_open_stats(&c, dir, &sw, err, sizeof err), 0);
    assert_int_equal(sim_sweep_csv_row_stats(&c, &sw, 0, runs, 3), 0);
    assert_int_equal(sim_sweep_csv_close(&c, err, sizeof err), 0);
    snprintf(path, sizeof path, "%s/sweep.csv", dir);
    text = slurp(path);
    assert_non_null(strstr(text, "run,mixing.bits,seeds,runs_interrupted,runs_diverged,events,"
                                 "events_sd,events_ci_low,events_ci_high,events_n,"));
    assert_non_null(strstr(text, ",final_accuracy,final_accuracy_sd,"));
    assert_non_null(strstr(text, "\n0,8,3,0,1,"));
    assert_non_null(strstr(text, ",rounds,rounds_sd,"));
    assert_non_null(strstr(text, ",100,0,100,100,3,")); /* rounds: all equal */
    free(base);
    rm_rf(dir);
}

/* The event trace lines: frames with type and digest, host marks. */
static void trace_lines(void **state)
{
    (void)state;
    char buf[512];
    FILE *f = fmemopen(buf, sizeof buf, "w");
    assert_non_null(f);
    sim_trace_line(f, 1500, 0, 0, NULL, 0, 0x57E9000000000003ULL);
    const uint8_t junk[3] = {1, 2, 3};
    sim_trace_line(f, 2000, 4, 5, junk, 3, 0);
    fclose(f);
    /* FNV-1a 64 of 01 02 03 */
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int k = 0; k < 3; k++)
        h = (h ^ junk[k]) * 0x100000001b3ULL;
    char want[256];
    snprintf(want, sizeof want, "1500 mark 57e9000000000003\n2000 frame 4 5 3 - %016llx\n",
             (unsigned long long)h);
    assert_string_equal(buf, want);
}

static void consensus_distance(void **state)
{
    (void)state;
    /* (0,0) and (2,0): mean (1,0), each 1 away: RMS 1 */
    float a[4] = {0, 0, 2, 0};
    assert_true(sim_consensus_distance(a, 2, 2, 2) == 1.0);
    /* 1, 2, 3: mean 2, squared distances 1, 0, 1: sqrt(2/3) */
    float b[3] = {1, 2, 3};
    assert_true(fabs(sim_consensus_distance(b, 3, 1, 1) - sqrt(2.0 / 3.0)) < 1e-12);
    /* stride: every other float of the buffer is ignored */
    float c[6] = {1, 99, 2, -99, 3, 7};
    assert_true(fabs(sim_consensus_distance(c, 3, 1, 2) - sqrt(2.0 / 3.0)) < 1e-12);
    /* equal vectors: 0; large offsets keep precision (double accumulation) */
    float d[2] = {1e6f, 1e6f + 1};
    assert_true(sim_consensus_distance(d, 2, 1, 1) == 0.5);
    float e[3] = {5, 5, 5};
    assert_true(sim_consensus_distance(e, 3, 1, 1) == 0.0);
    /* pointers with agents down (NULL) skipped: (0,0),(2,0) of three */
    const float *p[3] = {a, NULL, a + 2};
    assert_true(sim_consensus_distance_ptrs(p, 3, 2) == 1.0);
    const float *none[2] = {NULL, NULL};
    assert_true(isnan(sim_consensus_distance_ptrs(none, 2, 2)));
    assert_true(isnan(sim_consensus_distance(a, 0, 2, 2)));
    /* against a direct evaluation on random vectors */
    uint64_t seed = test_seed(41);
    model_rng r;
    model_rng_seed(&r, seed, 0);
    enum { N = 37, D = 53 };
    static float x[N * D];
    double mean[D] = {0}, ss = 0;
    for (int i = 0; i < N * D; i++)
        x[i] = (float)model_rng_normal(&r);
    for (int i = 0; i < N; i++)
        for (int j = 0; j < D; j++)
            mean[j] += x[i * D + j] / (double)N;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < D; j++)
            ss += (x[i * D + j] - mean[j]) * (x[i * D + j] - mean[j]);
    if (fabs(sim_consensus_distance(x, N, D, D) - sqrt(ss / N)) > 1e-9)
        fail_msg("seed %llu: consensus distance differs from the definition",
                 (unsigned long long)seed);
}

static void directory_errors(void **state)
{
    (void)state;
    char dir[64], err[256], file[128], under[160];
    tmpdir(dir, sizeof dir);
    snprintf(file, sizeof file, "%s/plain", dir);
    FILE *f = fopen(file, "w");
    fclose(f);
    snprintf(under, sizeof under, "%s/sub", file);
    sim_output o;
    assert_int_equal(sim_output_open(&o, under, err, sizeof err), SIM_OUTPUT_EIO);
    assert_non_null(strstr(err, "cannot create directory"));
    assert_int_equal(sim_output_open(&o, file, err, sizeof err), SIM_OUTPUT_EIO);
    assert_non_null(strstr(err, "not a directory"));
    assert_int_equal(sim_output_open(&o, "", err, sizeof err), SIM_OUTPUT_EINVAL);
    char longdir[SIM_OUTPUT_PATH_MAX + 8];
    memset(longdir, 'd', sizeof longdir - 1);
    longdir[sizeof longdir - 1] = 0;
    assert_int_equal(sim_output_open(&o, longdir, err, sizeof err), SIM_OUTPUT_EINVAL);
    rm_rf(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(series_csv),       cmocka_unit_test(summary_json),
        cmocka_unit_test(sweep_csv),        cmocka_unit_test(consensus_distance),
        cmocka_unit_test(directory_errors), cmocka_unit_test(diverge),
        cmocka_unit_test(replications),     cmocka_unit_test(trace_lines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
