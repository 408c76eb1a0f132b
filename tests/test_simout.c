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
#include "sim/plot.h"

#include <png.h>

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

static void font_glyphs(void **state)
{
    (void)state;
    uint8_t rows[7];
    /* '8': two stacked rings */
    static const uint8_t eight[7] = {0x0e, 0x11, 0x11, 0x0e, 0x11, 0x11, 0x0e};
    assert_int_equal(sim_plot_glyph('8', rows), 0);
    assert_memory_equal(rows, eight, 7);
    /* every printable character but space has ink, and glyphs differ */
    static uint8_t seen[95][7];
    for (int ch = 32; ch <= 126; ch++) {
        assert_int_equal(sim_plot_glyph((char)ch, rows), 0);
        int ink = 0;
        for (int r = 0; r < 7; r++) {
            ink |= rows[r];
            assert_true(rows[r] < 32); /* 5 columns */
        }
        if (ch == ' ')
            assert_int_equal(ink, 0);
        else if (!ink)
            fail_msg("glyph '%c' is empty", ch);
        for (int o = 32; o < ch; o++)
            if (!memcmp(seen[o - 32], rows, 7))
                fail_msg("glyphs '%c' and '%c' are the same", o, ch);
        memcpy(seen[ch - 32], rows, 7);
    }
    assert_int_equal(sim_plot_glyph('\n', rows), -1);
    assert_int_equal(sim_plot_glyph((char)200, rows), -1);
    assert_int_equal(sim_plot_text_width("ab", 2), 22); /* (2*6 - 1) * 2 */
    assert_int_equal(sim_plot_text_width("", 2), 0);
}

/* Read a PNG back; count pixels of a colour. */
static uint8_t *read_png(const char *path, uint32_t *w, uint32_t *h)
{
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_file(&img, path))
        fail_msg("%s: not a PNG: %s", path, img.message);
    img.format = PNG_FORMAT_RGB;
    uint8_t *buf = malloc(PNG_IMAGE_SIZE(img));
    assert_non_null(buf);
    if (!png_image_finish_read(&img, NULL, buf, 0, NULL))
        fail_msg("%s: %s", path, img.message);
    *w = img.width;
    *h = img.height;
    return buf;
}

static size_t count_rgb(const uint8_t *px, uint32_t w, uint32_t h, int r, int g, int b)
{
    size_t n = 0;
    for (size_t i = 0; i < (size_t)w * h; i++)
        n += px[3 * i] == r && px[3 * i + 1] == g && px[3 * i + 2] == b;
    return n;
}

static void plot_png(void **state)
{
    (void)state;
    char dir[64], path[128], err[256];
    tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/p.png", dir);
    double x[50], y[50], y2[50];
    for (int i = 0; i < 50; i++) {
        x[i] = i;
        y[i] = exp(-0.1 * i);
        y2[i] = i == 20 ? NAN : exp(-0.05 * i);
    }
    sim_plot_series ser[2] = {{"fast", x, y, 50}, {"slow", x, y2, 50}};
    sim_plot p = {"Decay", "round", "distance", 1, ser, 2, 640, 400};
    assert_int_equal(sim_plot_png(&p, path, err, sizeof err), 0);
    uint32_t w, h;
    uint8_t *px = read_png(path, &w, &h);
    assert_int_equal(w, 640);
    assert_int_equal(h, 400);
    assert_true(px[0] == 255 && px[1] == 255 && px[2] == 255); /* white corner */
    /* both series colours are drawn (lines and legend), black text and axes */
    assert_true(count_rgb(px, w, h, 31, 119, 180) > 200);
    assert_true(count_rgb(px, w, h, 255, 127, 14) > 200);
    assert_true(count_rgb(px, w, h, 0, 0, 0) > 1000);
    free(px);
    /* no data: no series colour, "no data" in grey */
    sim_plot_series none = {"empty", x, y, 0};
    sim_plot q = {"Nothing", "x", "y", 0, &none, 1, 0, 0};
    assert_int_equal(sim_plot_png(&q, path, err, sizeof err), 0);
    px = read_png(path, &w, &h);
    assert_int_equal(w, SIM_PLOT_WIDTH);
    assert_int_equal(count_rgb(px, w, h, 31, 119, 180), 0);
    assert_true(count_rgb(px, w, h, 110, 110, 110) > 50);
    free(px);
    q.width = 10;
    assert_int_equal(sim_plot_png(&q, path, err, sizeof err), SIM_PLOT_EINVAL);
    q.width = 0;
    assert_int_equal(sim_plot_png(&q, "/nonexistent/dir/x.png", err, sizeof err), SIM_PLOT_EIO);
    assert_non_null(strstr(err, "/nonexistent/dir/x.png"));
    rm_rf(dir);
}

static void plot_run_directory(void **state)
{
    (void)state;
    char dir[64], err[256], path[160];
    tmpdir(dir, sizeof dir);
    sim_output o;
    assert_int_equal(sim_output_open(&o, dir, err, sizeof err), 0);
    for (int r = 0; r <= 40; r++) {
        sim_series_row all = {
            r * 0.25,          (uint64_t)r,   SIM_AGENT_ALL,        2 * exp(-0.05 * r),
            1 - exp(-0.1 * r), exp(-0.2 * r), (uint64_t)r * 300000, 0};
        assert_int_equal(sim_output_row(&o, &all), 0);
        for (int a = 0; a < 3; a++) {
            sim_series_row one = {r * 0.25,
                                  (uint64_t)r,
                                  a,
                                  2 * exp(-0.04 * r * (a + 1)),
                                  NAN,
                                  NAN,
                                  (uint64_t)r * 100000 * (uint64_t)(a + 1),
                                  0};
            assert_int_equal(sim_output_row(&o, &one), 0);
        }
    }
    assert_int_equal(sim_output_close(&o, err, sizeof err), 0);
    if (sim_plot_dir(dir, err, sizeof err))
        fail_msg("sim_plot_dir: %s", err);
    const char *files[] = {"accuracy_vs_time.png", "loss_vs_time.png", "consensus_vs_round.png",
                           "bytes_vs_time.png"};
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        uint32_t w, h;
        uint8_t *px = read_png(path, &w, &h);
        assert_int_equal(w, SIM_PLOT_WIDTH);
        assert_true(count_rgb(px, w, h, 31, 119, 180) > 100); /* the population line */
        /* agent lines where agents have data: loss and bytes */
        size_t agent1 = count_rgb(px, w, h, 255, 127, 14);
        if ((i == 1 || i == 3) != (agent1 > 100))
            fail_msg("%s: agent line drawn %zu px", files[i], agent1);
        free(px);
    }
    /* a malformed file is named with its line */
    snprintf(path, sizeof path, "%s/series.csv", dir);
    FILE *f = fopen(path, "w");
    fputs(SIM_SERIES_HEADER "\n0,0,all,1,1,1,0,0\n0,1,all,x,1,1,0,0\n", f);
    fclose(f);
    assert_int_equal(sim_plot_dir(dir, err, sizeof err), SIM_PLOT_EPARSE);
    assert_non_null(strstr(err, "series.csv:3: not a series row"));
    f = fopen(path, "w");
    fputs("time,loss\n", f);
    fclose(f);
    assert_int_equal(sim_plot_dir(dir, err, sizeof err), SIM_PLOT_EPARSE);
    assert_non_null(strstr(err, "series.csv:1: header is not"));
    rm_rf(dir);
    assert_int_equal(sim_plot_dir(dir, err, sizeof err), SIM_PLOT_EIO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(series_csv),       cmocka_unit_test(summary_json),
        cmocka_unit_test(sweep_csv),        cmocka_unit_test(consensus_distance),
        cmocka_unit_test(directory_errors), cmocka_unit_test(font_glyphs),
        cmocka_unit_test(plot_png),         cmocka_unit_test(plot_run_directory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
