/* sim/plot: axis ticks (1-2-5 steps, decades on log axes), figures in PNG,
 * SVG and PDF (non-empty, well-formed heads, PNG read back: size, the
 * series' colours, a confidence band), the figures of a run directory,
 * of several seeds (mean and band) and of a sweep compared on shared axes,
 * and the errors (bad size, unwritable path, malformed series.csv, a
 * directory holding no run). */
#include "tests/harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <png.h>

#include "sim/output.h"
#include "sim/plot.h"

static void tmpdir(char *out, size_t len)
{
    snprintf(out, len, "/tmp/murmur_simplot_XXXXXX");
    assert_non_null(mkdtemp(out));
}

static void rm_rf(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static char *slurp(const char *path, long *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    *len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)*len + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)*len, f), (size_t)*len);
    buf[*len] = 0;
    fclose(f);
    return buf;
}

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

/* Pixels within tol of a colour. */
static size_t count_near(const uint8_t *px, uint32_t w, uint32_t h, int r, int g, int b, int tol)
{
    size_t n = 0;
    for (size_t i = 0; i < (size_t)w * h; i++)
        n += abs(px[3 * i] - r) <= tol && abs(px[3 * i + 1] - g) <= tol &&
             abs(px[3 * i + 2] - b) <= tol;
    return n;
}

/* The first two colours of the palette, and the first one's band (22%
 * over white). */
#define BLUE      0, 114, 178
#define VERMILION 213, 94, 0
#define BAND      199, 224, 238

static void check_files(const char *base)
{
    char path[600];
    long len;
    snprintf(path, sizeof path, "%s.png", base);
    if (file_size(path) <= 1000)
        fail_msg("%s: missing or nearly empty", path);
    snprintf(path, sizeof path, "%s.svg", base);
    char *svg = slurp(path, &len);
    assert_true(len > 1000);
    assert_non_null(strstr(svg, "<svg"));
    assert_non_null(strstr(svg, "</svg>"));
    free(svg);
    snprintf(path, sizeof path, "%s.pdf", base);
    char *pdf = slurp(path, &len);
    assert_true(len > 1000);
    assert_memory_equal(pdf, "%PDF-", 5);
    assert_non_null(strstr(pdf + len - 8, "%%EOF"));
    free(pdf);
}

static void linear_ticks(void **state)
{
    (void)state;
    sim_plot_tick t[SIM_PLOT_TICKS_MAX];
    size_t n = sim_plot_axis_ticks(0, 0.83, 0, t, SIM_PLOT_TICKS_MAX);
    assert_int_equal(n, 5);
    static const char *want[] = {"0.0", "0.2", "0.4", "0.6", "0.8"};
    for (size_t i = 0; i < n; i++) {
        assert_true(fabs(t[i].v - 0.2 * (double)i) < 1e-12);
        assert_true(t[i].major && !t[i].decade);
        assert_string_equal(t[i].label, want[i]);
    }
    /* 1-2-5 steps: 0..180 s by 50 (target about 5 ticks) */
    n = sim_plot_axis_ticks(0, 180, 0, t, SIM_PLOT_TICKS_MAX);
    assert_int_equal(n, 4);
    assert_string_equal(t[3].label, "150");
    /* a span away from zero keeps whole steps */
    n = sim_plot_axis_ticks(-3.7, 12.2, 0, t, SIM_PLOT_TICKS_MAX);
    assert_int_equal(n, 8); /* -2, 0, ..., 12 */
    assert_string_equal(t[0].label, "-2");
    assert_string_equal(t[1].label, "0");
    assert_true(t[0].v == -2 && t[n - 1].v == 12);
    assert_int_equal(sim_plot_axis_ticks(1, 1, 0, t, SIM_PLOT_TICKS_MAX), 0);
    assert_int_equal(sim_plot_axis_ticks(0, NAN, 0, t, SIM_PLOT_TICKS_MAX), 0);
}

/* The ticks of a log axis over [lo, hi]: increasing, inside the range, at
 * least two labelled, the labelled ones major and all labels distinct.
 * Returns the number labelled. */
static size_t check_log_labels(double lo, double hi, sim_plot_tick *t, size_t *n)
{
    *n = sim_plot_axis_ticks(lo, hi, 1, t, SIM_PLOT_TICKS_MAX);
    size_t labelled = 0;
    for (size_t i = 0; i < *n; i++) {
        if (i)
            assert_true(t[i].v > t[i - 1].v);
        assert_true(t[i].v >= lo * (1 - 1e-9) && t[i].v <= hi * (1 + 1e-9));
        if (!t[i].label[0])
            continue;
        labelled++;
        assert_true(t[i].major);
        for (size_t j = 0; j < i; j++)
            if (t[j].label[0] && !strcmp(t[j].label, t[i].label))
                fail_msg("[%g, %g]: ticks %g and %g both labelled %s", lo, hi, t[j].v, t[i].v,
                         t[i].label);
    }
    if (labelled < 2)
        fail_msg("[%g, %g]: %zu labelled ticks", lo, hi, labelled);
    return labelled;
}

static void log_ticks(void **state)
{
    (void)state;
    sim_plot_tick t[SIM_PLOT_TICKS_MAX];
    /* 1e-3 .. 1e2: a labelled major at every decade, minors 2..9 between */
    size_t n = sim_plot_axis_ticks(1e-3, 1e2, 1, t, SIM_PLOT_TICKS_MAX);
    assert_int_equal(n, 6 + 5 * 8);
    int majors = 0;
    for (size_t i = 0; i < n; i++) {
        if (i)
            assert_true(t[i].v > t[i - 1].v);
        if (t[i].major) {
            assert_true(t[i].decade);
            assert_int_equal(t[i].exp, majors - 3);
            assert_true(fabs(t[i].v / pow(10, t[i].exp) - 1) < 1e-12);
            majors++;
        } else {
            assert_string_equal(t[i].label, ""); /* minors unlabelled */
        }
    }
    assert_int_equal(majors, 6);
    assert_true(fabs(t[1].v - 2e-3) < 1e-15 && fabs(t[8].v - 9e-3) < 1e-15);
    /* inside one decade: 2 and 5 labelled as numbers */
    n = sim_plot_axis_ticks(1.5e-3, 8e-3, 1, t, SIM_PLOT_TICKS_MAX);
    assert_int_equal(n, 7); /* 2..8 x 1e-3 */
    int labelled = 0;
    for (size_t i = 0; i < n; i++)
        if (t[i].label[0]) {
            labelled++;
            assert_true(!strcmp(t[i].label, "0.002") || !strcmp(t[i].label, "0.005"));
        }
    assert_int_equal(labelled, 2);
    /* within one decade and between its multiples (consensus distance
     * 0.144..0.178): nice linear steps, 0.145 to 0.175 by 0.005 */
    n = 0;
    assert_int_equal(check_log_labels(0.144, 0.178, t, &n), 7);
    assert_int_equal(n, 7);
    assert_string_equal(t[0].label, "0.145");
    assert_string_equal(t[1].label, "0.150");
    assert_string_equal(t[6].label, "0.175");
    assert_true(!t[0].decade && fabs(t[1].v - 0.15) < 1e-12);
    /* across a decade with 1 x 10^0 the only 1-2-5 tick: every multiple,
     * 0.8, 0.9 and the decade 10^0 */
    assert_int_equal(check_log_labels(0.75, 1.3, t, &n), 3);
    assert_int_equal(n, 3);
    assert_string_equal(t[0].label, "0.8");
    assert_string_equal(t[1].label, "0.9");
    assert_true(t[2].decade && t[2].exp == 0);
    /* across a decade with no other multiple inside: linear steps by 0.02 */
    assert_int_equal(check_log_labels(0.95, 1.08, t, &n), 7);
    assert_string_equal(t[0].label, "0.96");
    assert_string_equal(t[2].label, "1.00");
    assert_true(!t[2].decade);
    /* far from zero: labels get the digits that tell them apart */
    check_log_labels(1234561, 1234579, t, &n);
    assert_string_equal(t[0].label, "1234565");
    /* a range that spans decades keeps its decade ticks only */
    assert_int_equal(check_log_labels(0.05, 20, t, &n), 3);
    /* 25 decades: every third labelled, no minors */
    n = sim_plot_axis_ticks(1e-20, 1e5, 1, t, SIM_PLOT_TICKS_MAX);
    assert_int_equal(n, 26);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(t[i].major, t[i].exp % 3 == 0 && t[i].decade);
    /* a log axis needs positive bounds */
    assert_int_equal(sim_plot_axis_ticks(0, 10, 1, t, SIM_PLOT_TICKS_MAX), 0);
}

static void figure_formats(void **state)
{
    (void)state;
    char err[256];
    if (sim_plot_available(err, sizeof err))
        fail_msg("%s", err);
    char dir[64], base[128];
    tmpdir(dir, sizeof dir);
    snprintf(base, sizeof base, "%s/fig", dir);
    double x[50], y[50], lo[50], hi[50], y2[50];
    for (int i = 0; i < 50; i++) {
        x[i] = i;
        y[i] = exp(-0.1 * i);
        lo[i] = y[i] / 1.5;
        hi[i] = y[i] * 1.5;
        y2[i] = i == 20 ? NAN : exp(-0.05 * i);
    }
    sim_plot_series ser[2] = {{"fast", x, y, lo, hi, 50, 0}, {"slow", x, y2, NULL, NULL, 50, 0}};
    sim_plot p = {"decay (seeds 1\xe2\x80\x93"
                  "5)",
                  "simulated time (s)",
                  "distance",
                  0,
                  1,
                  ser,
                  2,
                  0,
                  0};
    if (sim_plot_write(&p, base, SIM_PLOT_FORMATS_ALL, err, sizeof err))
        fail_msg("sim_plot_write: %s", err);
    check_files(base);
    char path[160];
    snprintf(path, sizeof path, "%s.png", base);
    uint32_t w, h;
    uint8_t *px = read_png(path, &w, &h);
    /* 6.4 x 4.4 in at 200 dpi */
    assert_int_equal(w, 1280);
    assert_int_equal(h, 880);
    assert_true(px[0] == 255 && px[1] == 255 && px[2] == 255); /* white corner */
    assert_true(count_near(px, w, h, BLUE, 3) > 500);
    assert_true(count_near(px, w, h, VERMILION, 3) > 500);
    assert_true(count_near(px, w, h, BAND, 4) > 2000);
    assert_true(count_near(px, w, h, 0, 0, 0, 60) > 2000); /* text and axes */
    free(px);
    /* one format only */
    snprintf(base, sizeof base, "%s/svgonly", dir);
    assert_int_equal(sim_plot_write(&p, base, SIM_PLOT_SVG, err, sizeof err), 0);
    snprintf(path, sizeof path, "%s.svg", base);
    assert_true(file_size(path) > 0);
    snprintf(path, sizeof path, "%s.png", base);
    assert_true(file_size(path) < 0);
    /* errors */
    p.width_pt = 10;
    assert_int_equal(sim_plot_write(&p, base, SIM_PLOT_PNG, err, sizeof err), SIM_PLOT_EINVAL);
    p.width_pt = 0;
    assert_int_equal(sim_plot_write(&p, base, 0, err, sizeof err), SIM_PLOT_EINVAL);
    assert_int_equal(sim_plot_write(&p, "/nonexistent/dir/x", SIM_PLOT_PDF, err, sizeof err),
                     SIM_PLOT_EIO);
    assert_non_null(strstr(err, "/nonexistent/dir/x.pdf"));
    assert_non_null(strstr(err, "No such file or directory"));
    rm_rf(dir);
}

/* A run directory: series.csv (population and, with agents > 0, per-agent
 * rows of loss and bytes) and a summary.json; shift moves the curves (a
 * different seed or sweep point). */
static void write_run(const char *dir, const char *label, int seed, double shift, int agents,
                      int with_acc)
{
    char err[256], path[600];
    sim_output o;
    assert_int_equal(sim_output_open(&o, dir, err, sizeof err), 0);
    for (int r = 0; r <= 40; r++) {
        sim_series_row all = {r * 0.25,
                              (uint64_t)r,
                              SIM_AGENT_ALL,
                              2 * exp(-0.05 * r) + shift,
                              with_acc ? 1 - exp(-0.1 * r) - shift : NAN,
                              exp(-0.2 * r) * (1 + shift),
                              (uint64_t)r * 300000,
                              0};
        assert_int_equal(sim_output_row(&o, &all), 0);
        for (int a = 0; a < agents; a++) {
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
    snprintf(path, sizeof path, "%s/summary.json", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "{\n  \"seed\": %d,\n  \"scenario\": \"demo\",\n  \"label\": \"%s\"\n}\n", seed,
            label);
    fclose(f);
}

static void run_directory(void **state)
{
    (void)state;
    char dir[64], err[256], path[600];
    tmpdir(dir, sizeof dir);
    write_run(dir, "", 7, 0, 3, 1);
    if (sim_plot_dir(dir, err, sizeof err))
        fail_msg("sim_plot_dir: %s", err);
    static const char *names[] = {"accuracy_vs_time", "loss_vs_time", "consensus_vs_time",
                                  "bytes_vs_time"};
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        check_files(path);
        snprintf(path, sizeof path, "%s/%s.png", dir, names[i]);
        uint32_t w, h;
        uint8_t *px = read_png(path, &w, &h);
        assert_true(count_near(px, w, h, BLUE, 3) > 300); /* the population */
        /* agents drawn thin (75% opacity) where they have data: loss, bytes */
        size_t agent = count_near(px, w, h, 223, 134, 64, 6);
        if ((i == 1 || i == 3) != (agent > 100))
            fail_msg("%s: agent line drawn %zu px", names[i], agent);
        assert_true(count_near(px, w, h, BAND, 4) < 300); /* one seed: no band (line edges only) */
        free(px);
    }
    /* a metric undefined in every row gets no figure */
    char dir2[64];
    tmpdir(dir2, sizeof dir2);
    write_run(dir2, "", 1, 0, 0, 0);
    assert_int_equal(sim_plot_dir(dir2, err, sizeof err), 0);
    snprintf(path, sizeof path, "%s/accuracy_vs_time.png", dir2);
    assert_true(file_size(path) < 0);
    snprintf(path, sizeof path, "%s/loss_vs_time.png", dir2);
    assert_true(file_size(path) > 0);
    rm_rf(dir2);
    /* malformed files are named with their line */
    snprintf(path, sizeof path, "%s/series.csv", dir);
    FILE *f = fopen(path, "w");
    fputs(SIM_SERIES_HEADER "\n0,0,all,1,1,1,0,0\n0,1,all,x,1,1,0,0\n", f);
    fclose(f);
    assert_int_equal(sim_plot_dir(dir, err, sizeof err), SIM_PLOT_EPARSE);
    assert_non_null(strstr(err, "series.csv:3: not a series row"));
    /* a last line cut short (a killed run) is left out, not an error */
    f = fopen(path, "w");
    fputs(SIM_SERIES_HEADER "\n0,0,all,1,1,1,0,0\n1,1,all,0.5,1,0.5,10,0\n2,2,al", f);
    fclose(f);
    assert_int_equal(sim_plot_dir(dir, err, sizeof err), 0);
    f = fopen(path, "w");
    fputs("time,loss\n", f);
    fclose(f);
    assert_int_equal(sim_plot_dir(dir, err, sizeof err), SIM_PLOT_EPARSE);
    assert_non_null(strstr(err, "series.csv:1: header is not"));
    rm_rf(dir);
    assert_int_equal(sim_plot_dir(dir, err, sizeof err), SIM_PLOT_EIO);
}

static void seeds_band(void **state)
{
    (void)state;
    char dir[64], err[256], sub[128], path[600];
    tmpdir(dir, sizeof dir);
    for (int s = 1; s <= 3; s++) {
        snprintf(sub, sizeof sub, "%s/seed-%d", dir, s);
        write_run(sub, "", s, 0.05 * s, 0, 1);
    }
    if (sim_plot_dir(dir, err, sizeof err))
        fail_msg("sim_plot_dir: %s", err);
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, i ? "loss_vs_time" : "accuracy_vs_time");
        check_files(path);
        strcat(path, ".png");
        uint32_t w, h;
        uint8_t *px = read_png(path, &w, &h);
        assert_true(count_near(px, w, h, BLUE, 3) > 300);  /* the mean */
        assert_true(count_near(px, w, h, BAND, 4) > 1000); /* its 95% band */
        free(px);
    }
    /* a directory with neither series.csv nor seed-S/ */
    char empty[64];
    tmpdir(empty, sizeof empty);
    assert_int_equal(sim_plot_dir(empty, err, sizeof err), SIM_PLOT_EIO);
    assert_non_null(strstr(err, "no series.csv and no seed-S/"));
    rm_rf(empty);
    rm_rf(dir);
}

static void compare_sweep(void **state)
{
    (void)state;
    char dir[64], out[128], err[256], sub[128], path[600];
    tmpdir(dir, sizeof dir);
    for (int r = 0; r < 2; r++) {
        snprintf(sub, sizeof sub, "%s/run-%04d", dir, r);
        write_run(sub, r ? "mixing.bits=8" : "mixing.bits=32", 1, 0.2 * r, 0, 1);
    }
    snprintf(out, sizeof out, "%s/cmp", dir);
    const char *dirs[] = {dir};
    if (sim_plot_compare(dirs, 1, out, NULL, err, sizeof err))
        fail_msg("sim_plot_compare: %s", err);
    static const char *names[] = {"accuracy", "loss", "consensus", "bytes"};
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/compare_%s_vs_time", out, names[i]);
        check_files(path);
    }
    snprintf(path, sizeof path, "%s/compare_loss_vs_time.png", out);
    uint32_t w, h;
    uint8_t *px = read_png(path, &w, &h);
    assert_true(count_near(px, w, h, BLUE, 3) > 300);      /* run 0 */
    assert_true(count_near(px, w, h, VERMILION, 3) > 300); /* run 1 */
    free(px);
    /* the same runs named one by one, log x, PNG only */
    char r0[128], r1[128];
    snprintf(r0, sizeof r0, "%s/run-0000", dir);
    snprintf(r1, sizeof r1, "%s/run-0001", dir);
    const char *two[] = {r0, r1};
    sim_plot_compare_opts o = {.log_x = 1, .formats = SIM_PLOT_PNG};
    snprintf(out, sizeof out, "%s/cmp2", dir);
    assert_int_equal(sim_plot_compare(two, 2, out, &o, err, sizeof err), 0);
    snprintf(path, sizeof path, "%s/compare_loss_vs_time.png", out);
    assert_true(file_size(path) > 1000);
    snprintf(path, sizeof path, "%s/compare_loss_vs_time.pdf", out);
    assert_true(file_size(path) < 0);
    /* errors: nothing to compare, not a run */
    assert_int_equal(sim_plot_compare(dirs, 0, out, NULL, err, sizeof err), SIM_PLOT_EINVAL);
    const char *bad[] = {out};
    assert_int_equal(sim_plot_compare(bad, 1, out, NULL, err, sizeof err), SIM_PLOT_EIO);
    assert_non_null(strstr(err, "no series.csv, seed-S/ or run-RRRR/"));
    const char *missing[] = {"/nonexistent/run"};
    assert_int_equal(sim_plot_compare(missing, 1, out, NULL, err, sizeof err), SIM_PLOT_EIO);
    assert_non_null(strstr(err, "not a directory"));
    rm_rf(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(linear_ticks),   cmocka_unit_test(log_ticks),
        cmocka_unit_test(figure_formats), cmocka_unit_test(run_directory),
        cmocka_unit_test(seeds_band),     cmocka_unit_test(compare_sweep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
