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
        "memory_per_agent_bytes\n";
    assert_memory_equal(text, want_head, strlen(want_head));
    const char *rows = text + strlen(want_head);
    assert_memory_equal(
        rows, "0,4,\"a\"\"b\",1,00000000000000ff,0,0,0,0,0,0,0,0.5,,,0,0,,0,0,\n",
        strlen("0,4,\"a\"\"b\",1,00000000000000ff,0,0,0,0,0,0,0,0.5,,,0,0,,0,0,\n"));
    int lines = 0;
    for (const char *p = text; *p; p++)
        lines += *p == '\n';
    assert_int_equal(lines, 5);
    assert_non_null(strstr(text, "\n3,8,c,4,"));
    free(base);
    rm_rf(dir);
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
        cmocka_unit_test(directory_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
