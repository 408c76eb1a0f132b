/* sim/plot — see plot.h. Three parts: cairo loaded at run time, one
 * figure drawn on any cairo surface, and the run directories read back
 * (series.csv, seed-S/, run-RRRR/, summary.json). */
#include "sim/plot.h"

#include <cairo/cairo-pdf.h>
#include <cairo/cairo-svg.h>
#include <cairo/cairo.h>
#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/errmsg.h"
#include "common/fs.h"
#include "common/json.h"
#include "sim/output.h"
#include "sim/stats.h"

/* ---- cairo, loaded at run time ------------------------------------------
 *
 * The agent and libmurmur share the simulator's objects; linking cairo
 * would pull its X11 and font libraries into every agent. Only the figures
 * need it, so the functions below are looked up when the first figure is
 * drawn. The types and constants come from the headers (libcairo2-dev). */

#define PLOT_CAIRO_FUNCS(X)                                                                        \
    X(cairo_surface_t *, image_surface_create, (cairo_format_t, int, int))                         \
    X(cairo_surface_t *, svg_surface_create, (const char *, double, double))                       \
    X(cairo_surface_t *, pdf_surface_create, (const char *, double, double))                       \
    X(cairo_status_t, surface_write_to_png, (cairo_surface_t *, const char *))                     \
    X(void, surface_finish, (cairo_surface_t *))                                                   \
    X(void, surface_destroy, (cairo_surface_t *))                                                  \
    X(cairo_status_t, surface_status, (cairo_surface_t *))                                         \
    X(cairo_t *, create, (cairo_surface_t *))                                                      \
    X(void, destroy, (cairo_t *))                                                                  \
    X(cairo_status_t, status, (cairo_t *))                                                         \
    X(const char *, status_to_string, (cairo_status_t))                                            \
    X(void, save, (cairo_t *))                                                                     \
    X(void, restore, (cairo_t *))                                                                  \
    X(void, scale, (cairo_t *, double, double))                                                    \
    X(void, translate, (cairo_t *, double, double))                                                \
    X(void, rotate, (cairo_t *, double))                                                           \
    X(void, set_source_rgba, (cairo_t *, double, double, double, double))                          \
    X(void, set_line_width, (cairo_t *, double))                                                   \
    X(void, set_line_join, (cairo_t *, cairo_line_join_t))                                         \
    X(void, set_line_cap, (cairo_t *, cairo_line_cap_t))                                           \
    X(void, set_dash, (cairo_t *, const double *, int, double))                                    \
    X(void, move_to, (cairo_t *, double, double))                                                  \
    X(void, line_to, (cairo_t *, double, double))                                                  \
    X(void, close_path, (cairo_t *))                                                               \
    X(void, new_path, (cairo_t *))                                                                 \
    X(void, rectangle, (cairo_t *, double, double, double, double))                                \
    X(void, stroke, (cairo_t *))                                                                   \
    X(void, fill, (cairo_t *))                                                                     \
    X(void, fill_preserve, (cairo_t *))                                                            \
    X(void, paint, (cairo_t *))                                                                    \
    X(void, clip, (cairo_t *))                                                                     \
    X(void, select_font_face, (cairo_t *, const char *, cairo_font_slant_t, cairo_font_weight_t))  \
    X(void, set_font_size, (cairo_t *, double))                                                    \
    X(void, text_extents, (cairo_t *, const char *, cairo_text_extents_t *))                       \
    X(void, font_extents, (cairo_t *, cairo_font_extents_t *))                                     \
    X(void, show_text, (cairo_t *, const char *))

#define PLOT_CAIRO_MEMBER(ret, name, args) ret(*name) args;
static struct {
    void *lib;
    PLOT_CAIRO_FUNCS(PLOT_CAIRO_MEMBER)
    /* optional (cairo >= 1.16): the PDF's title */
    void (*pdf_surface_set_metadata)(cairo_surface_t *, cairo_pdf_metadata_t, const char *);
    /* optional: release cairo's and fontconfig's caches at exit */
    void (*debug_reset_static_data)(void);
    void (*fc_fini)(void);
    char why[256];
} cz;
#undef PLOT_CAIRO_MEMBER

static pthread_once_t plot_cairo_once = PTHREAD_ONCE_INIT;

/* At exit, with no cairo object left (each figure frees its own). */
static void plot_cairo_release(void)
{
    if (cz.debug_reset_static_data)
        cz.debug_reset_static_data();
    if (cz.fc_fini)
        cz.fc_fini();
}

static void plot_cairo_load(void)
{
    cz.lib = dlopen("libcairo.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!cz.lib) {
        snprintf(cz.why, sizeof cz.why,
                 "plots need the cairo library (%s); install it: apt-get install libcairo2",
                 dlerror());
        return;
    }
#define PLOT_CAIRO_SYM(ret, name, args)                                                            \
    if (!cz.why[0]) {                                                                              \
        void *sym = dlsym(cz.lib, "cairo_" #name);                                                 \
        if (!sym)                                                                                  \
            snprintf(cz.why, sizeof cz.why, "libcairo.so.2 lacks cairo_" #name " (too old?)");     \
        else                                                                                       \
            memcpy(&cz.name, &sym, sizeof sym);                                                    \
    }
    PLOT_CAIRO_FUNCS(PLOT_CAIRO_SYM)
#undef PLOT_CAIRO_SYM
    void *meta = dlsym(cz.lib, "cairo_pdf_surface_set_metadata");
    if (meta)
        memcpy(&cz.pdf_surface_set_metadata, &meta, sizeof meta);
    /* cairo keeps a font map and fontconfig its configuration for the
     * life of the process; hand them back at exit so a leak checker sees
     * only our own allocations (FcFini comes from cairo's dependencies) */
    void *reset = dlsym(cz.lib, "cairo_debug_reset_static_data");
    void *fini = dlsym(cz.lib, "FcFini");
    if (reset)
        memcpy(&cz.debug_reset_static_data, &reset, sizeof reset);
    if (fini)
        memcpy(&cz.fc_fini, &fini, sizeof fini);
    if (!cz.why[0] && (reset || fini))
        atexit(plot_cairo_release);
}

int sim_plot_available(char *err, size_t errlen)
{
    pthread_once(&plot_cairo_once, plot_cairo_load);
    if (cz.why[0])
        return common_errf(err, errlen, SIM_PLOT_ELIB, "%s", cz.why);
    return SIM_PLOT_OK;
}

/* ---- ticks ---------------------------------------------------------------- */

/* 1, 2 or 5 times a power of ten, about range / target */
static double plot_nice_step(double range, int target)
{
    double raw = range / target, mag = pow(10, floor(log10(raw))), f = raw / mag;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag;
}

/* A linear tick label: as many decimals as the step needs; %g past 1e6. */
static void plot_linear_label(double v, double step, char *buf, size_t len)
{
    if (fabs(v) < step * 1e-9)
        v = 0;
    int dec = (int)ceil(-log10(step) - 1e-9);
    if (dec < 0)
        dec = 0;
    if (fabs(v) >= 1e6 || dec > 6)
        snprintf(buf, len, "%g", v);
    else
        snprintf(buf, len, "%.*f", dec, v);
}

/* Major ticks, unlabelled, at the multiples of a nice step (about five of
 * them) within [lo, hi]; *step_out gets the step. */
static size_t plot_step_ticks(double lo, double hi, sim_plot_tick *out, size_t max,
                              double *step_out)
{
    double step = plot_nice_step(hi - lo, 5);
    size_t n = 0;
    for (double k = ceil(lo / step - 1e-9); n < max; k++) {
        double v = k * step;
        if (v > hi + step * 1e-9)
            break;
        sim_plot_tick *t = &out[n++];
        memset(t, 0, sizeof *t);
        t->v = v;
        t->major = 1;
    }
    *step_out = step;
    return n;
}

static size_t plot_linear_ticks(double lo, double hi, sim_plot_tick *out, size_t max)
{
    double step;
    size_t n = plot_step_ticks(lo, hi, out, max, &step);
    for (size_t i = 0; i < n; i++)
        plot_linear_label(out[i].v, step, out[i].label, sizeof out[i].label);
    return n;
}

/* Whether the labels of the major ticks that are not decades read back as
 * their values (to tol) and all labelled ticks print differently from
 * their labelled neighbours. */
static int plot_labels_good(const sim_plot_tick *t, size_t n, double tol)
{
    const char *prev = NULL;
    for (size_t i = 0; i < n; i++) {
        if (!t[i].label[0])
            continue;
        if (prev && !strcmp(prev, t[i].label))
            return 0;
        if (!t[i].decade && fabs(strtod(t[i].label, NULL) - t[i].v) > tol)
            return 0;
        prev = t[i].label;
    }
    return 1;
}

/* Label the major ticks that are not decades: as linear labels of step
 * (or %g for step 0), then, while a label does not read back as its value
 * or two neighbours print alike (a narrow range far from zero), with more
 * significant digits. */
static void plot_label_majors(sim_plot_tick *t, size_t n, double step)
{
    if (!n)
        return;
    double tol = 1e-6 * (step > 0 ? step : t[n - 1].v * 1e-3);
    for (int prec = 0; prec <= 17; prec = prec ? prec + 1 : 6) {
        for (size_t i = 0; i < n; i++) {
            if (!t[i].major || t[i].decade)
                continue;
            if (prec)
                snprintf(t[i].label, sizeof t[i].label, "%.*g", prec, t[i].v);
            else if (step > 0)
                plot_linear_label(t[i].v, step, t[i].label, sizeof t[i].label);
            else
                snprintf(t[i].label, sizeof t[i].label, "%g", t[i].v);
        }
        if (plot_labels_good(t, n, tol))
            return;
    }
}

static size_t plot_log_ticks(double lo, double hi, sim_plot_tick *out, size_t max)
{
    int k0 = (int)floor(log10(lo) + 1e-9), k1 = (int)ceil(log10(hi) - 1e-9);
    int span = k1 - k0;
    /* past 8 decades, label every 2nd or 3rd (and put no 2..9 minors) */
    int every = span > 16 ? 3 : span > 8 ? 2 : 1;
    size_t n = 0, labelled = 0;
    for (int k = k0; k <= k1 && n < max; k++) {
        for (int m = 1; m <= 9 && n < max; m++) {
            if (m > 1 && every > 1)
                break;
            double v = m * pow(10, k);
            if (v < lo * (1 - 1e-9) || v > hi * (1 + 1e-9))
                continue;
            sim_plot_tick *t = &out[n++];
            memset(t, 0, sizeof *t);
            t->v = v;
            if (m == 1 && (k % every) == 0) {
                t->major = 1;
                t->decade = 1;
                t->exp = k;
                snprintf(t->label, sizeof t->label, "1e%d", k);
                labelled++;
            }
        }
    }
    if (labelled >= 2)
        return n;
    /* A narrow range (fewer than two decades labelled): label 1, 2 and 5 x
     * 10^k; if that labels fewer than two ticks, every m x 10^k (the range
     * is then within about two neighbouring multiples); if still fewer,
     * nice linear steps inside the range. At least two labelled ticks. */
    for (int all = 0; all <= 1; all++) {
        size_t count = 0;
        for (size_t i = 0; i < n; i++) {
            double m = out[i].v / pow(10, floor(log10(out[i].v) + 1e-9));
            count += out[i].decade || all || fabs(m - 2) < 1e-6 || fabs(m - 5) < 1e-6;
        }
        if (count < 2)
            continue;
        for (size_t i = 0; i < n; i++) {
            double m = out[i].v / pow(10, floor(log10(out[i].v) + 1e-9));
            out[i].major |= all || fabs(m - 2) < 1e-6 || fabs(m - 5) < 1e-6;
        }
        plot_label_majors(out, n, 0);
        return n;
    }
    double step;
    n = plot_step_ticks(lo, hi, out, max, &step);
    plot_label_majors(out, n, step);
    return n;
}

size_t sim_plot_axis_ticks(double lo, double hi, int log, sim_plot_tick *out, size_t max)
{
    if (!(lo < hi) || !isfinite(lo) || !isfinite(hi) || (log && !(lo > 0)))
        return 0;
    return log ? plot_log_ticks(lo, hi, out, max) : plot_linear_ticks(lo, hi, out, max);
}

/* ---- one figure ----------------------------------------------------------- */

/* Okabe & Ito's colour-blind-safe palette (without its yellow, too pale
 * on white), then a dash pattern per pass through it. */
static const double PLOT_COLOURS[][3] = {
    {0.000, 0.447, 0.698}, /* blue */
    {0.835, 0.369, 0.000}, /* vermilion */
    {0.000, 0.620, 0.451}, /* bluish green */
    {0.800, 0.475, 0.655}, /* reddish purple */
    {0.902, 0.624, 0.000}, /* orange */
    {0.337, 0.706, 0.914}, /* sky blue */
    {0.000, 0.000, 0.000}, /* black */
};
#define PLOT_NCOLOURS (sizeof PLOT_COLOURS / sizeof PLOT_COLOURS[0])

#define PLOT_FONT       "DejaVu Sans"
#define PLOT_TITLE_PT   10.5
#define PLOT_LABEL_PT   10.0
#define PLOT_TICK_PT    8.5
#define PLOT_LEGEND_PT  8.0
#define PLOT_LINE_PT    1.4
#define PLOT_THIN_PT    0.7
#define PLOT_TICK_LEN   3.5
#define PLOT_MINOR_LEN  2.0
#define PLOT_PAD        6.0
#define PLOT_BAND_ALPHA 0.22

typedef struct plot_axis {
    double lo, hi; /* data range shown (log: the values, not their logs) */
    int log;
    sim_plot_tick ticks[SIM_PLOT_TICKS_MAX];
    size_t nticks;
} plot_axis;

typedef struct plot_frame {
    double left, right, top, bottom; /* the plotting area, points */
    plot_axis x, y;
} plot_frame;

static double plot_map(const plot_axis *a, double v, double p0, double p1)
{
    double t = a->log ? (log10(v) - log10(a->lo)) / (log10(a->hi) - log10(a->lo))
                      : (v - a->lo) / (a->hi - a->lo);
    return p0 + t * (p1 - p0);
}

static double plot_px(const plot_frame *f, double v)
{
    return plot_map(&f->x, v, f->left, f->right);
}

static double plot_py(const plot_frame *f, double v)
{
    return plot_map(&f->y, v, f->bottom, f->top);
}

static int plot_usable(double v, int log)
{
    return isfinite(v) && (!log || v > 0);
}

/* Range of the x values (want_y 0) or of the drawable y values, bands
 * included. */
static int plot_data_range(const sim_plot *p, int want_y, double *lo, double *hi)
{
    int log = want_y ? p->log_y : p->log_x, any = 0;
    *lo = INFINITY;
    *hi = -INFINITY;
    for (size_t s = 0; s < p->nseries; s++) {
        const sim_plot_series *ser = &p->series[s];
        for (size_t i = 0; i < ser->n; i++) {
            /* x: every defined time, so the figures of a run share their
             * x axis; y: the points drawn */
            if (!plot_usable(ser->x[i], p->log_x) || (want_y && !plot_usable(ser->y[i], p->log_y)))
                continue;
            double v[3] = {want_y ? ser->y[i] : ser->x[i], NAN, NAN};
            if (want_y && ser->lo && ser->hi)
                v[1] = ser->lo[i], v[2] = ser->hi[i];
            for (int k = 0; k < 3; k++)
                if (plot_usable(v[k], log)) {
                    *lo = fmin(*lo, v[k]);
                    *hi = fmax(*hi, v[k]);
                    any = 1;
                }
        }
    }
    return any;
}

/* The shown range: y padded by 4% of the span (log: of the decades); x
 * exactly the data; a single value widened so the axis has a span. */
static void plot_make_axis(plot_axis *a, double lo, double hi, int log, int pad)
{
    a->log = log;
    if (log) {
        double l0 = log10(lo), l1 = log10(hi);
        if (l1 - l0 < 1e-9)
            l0 -= 0.5, l1 += 0.5;
        double m = pad ? 0.04 * (l1 - l0) : 0;
        a->lo = pow(10, l0 - m);
        a->hi = pow(10, l1 + m);
    } else {
        if (hi - lo < 1e-12 * fmax(1, fabs(hi))) {
            double w = fabs(hi) > 0 ? fabs(hi) * 0.1 : 1;
            lo -= w, hi += w;
        }
        double m = pad ? 0.04 * (hi - lo) : 0;
        a->lo = lo - m;
        a->hi = hi + m;
    }
    a->nticks = sim_plot_axis_ticks(a->lo, a->hi, log, a->ticks, SIM_PLOT_TICKS_MAX);
}

static void plot_font(cairo_t *cr, double size, int bold)
{
    cz.select_font_face(cr, PLOT_FONT, CAIRO_FONT_SLANT_NORMAL,
                        bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
    cz.set_font_size(cr, size);
}

static double plot_text_w(cairo_t *cr, const char *s)
{
    cairo_text_extents_t e;
    cz.text_extents(cr, s, &e);
    return e.x_advance;
}

/* A tick label: plain, or 10 with a raised exponent (a real minus sign). */
static double plot_tick_label_w(cairo_t *cr, const sim_plot_tick *t, double size)
{
    if (!t->decade)
        return plot_text_w(cr, t->label);
    char ex[16];
    snprintf(ex, sizeof ex, "%s%d", t->exp < 0 ? "\xe2\x88\x92" : "", abs(t->exp));
    double w = plot_text_w(cr, "10");
    cz.set_font_size(cr, size * 0.72);
    w += plot_text_w(cr, ex);
    cz.set_font_size(cr, size);
    return w;
}

/* Draw a tick label with its baseline at y, starting at x. */
static void plot_tick_label(cairo_t *cr, const sim_plot_tick *t, double x, double y, double size)
{
    if (!t->decade) {
        cz.move_to(cr, x, y);
        cz.show_text(cr, t->label);
        return;
    }
    char ex[16];
    snprintf(ex, sizeof ex, "%s%d", t->exp < 0 ? "\xe2\x88\x92" : "", abs(t->exp));
    cz.move_to(cr, x, y);
    cz.show_text(cr, "10");
    double w = plot_text_w(cr, "10");
    cz.set_font_size(cr, size * 0.72);
    cz.move_to(cr, x + w, y - size * 0.42);
    cz.show_text(cr, ex);
    cz.set_font_size(cr, size);
}

static void plot_rgba(cairo_t *cr, const double c[3], double a)
{
    cz.set_source_rgba(cr, c[0], c[1], c[2], a);
}

static void plot_style(cairo_t *cr, size_t s, const sim_plot_series *ser)
{
    static const double dash[][4] = {{0}, {5, 2.5}, {1.2, 2}, {6, 2, 1.2, 2}};
    static const int ndash[] = {0, 2, 2, 4};
    size_t pass = (s / PLOT_NCOLOURS) % 4;
    cz.set_dash(cr, dash[pass], ndash[pass], 0);
    cz.set_line_width(cr, ser->thin ? PLOT_THIN_PT : PLOT_LINE_PT);
    plot_rgba(cr, PLOT_COLOURS[s % PLOT_NCOLOURS], ser->thin ? 0.75 : 1);
}

/* Title, shrunk to fit the width (down to 7 pt), else cut with an ellipsis. */
static void plot_title(cairo_t *cr, const char *title, double w, double *height)
{
    double size = PLOT_TITLE_PT;
    plot_font(cr, size, 0);
    while (plot_text_w(cr, title) > w - 2 * PLOT_PAD && size > 7)
        plot_font(cr, size -= 0.5, 0);
    char buf[512];
    snprintf(buf, sizeof buf, "%s", title);
    size_t n = strlen(buf);
    while (n > 4 && plot_text_w(cr, buf) > w - 2 * PLOT_PAD) {
        n--;
        while (n > 0 && ((unsigned char)buf[n] & 0xC0) == 0x80)
            n--; /* whole UTF-8 characters */
        memcpy(buf + n, "\xe2\x80\xa6", 4);
    }
    cairo_font_extents_t fe;
    cz.font_extents(cr, &fe);
    cz.set_source_rgba(cr, 0, 0, 0, 1);
    cz.move_to(cr, (w - plot_text_w(cr, buf)) / 2, PLOT_PAD + fe.ascent);
    cz.show_text(cr, buf);
    *height = PLOT_PAD + fe.ascent + fe.descent;
}

/* Work out the plotting area from the text sizes. */
static void plot_layout(cairo_t *cr, const sim_plot *p, double w, double h, double title_h,
                        plot_frame *f)
{
    cairo_font_extents_t fe;
    plot_font(cr, PLOT_TICK_PT, 0);
    cz.font_extents(cr, &fe);
    double ytw = 0;
    for (size_t i = 0; i < f->y.nticks; i++)
        if (f->y.ticks[i].label[0])
            ytw = fmax(ytw, plot_tick_label_w(cr, &f->y.ticks[i], PLOT_TICK_PT));
    double tick_h = fe.ascent + fe.descent;
    double last_xw = 0;
    for (size_t i = 0; i < f->x.nticks; i++)
        if (f->x.ticks[i].label[0])
            last_xw = plot_tick_label_w(cr, &f->x.ticks[i], PLOT_TICK_PT);
    plot_font(cr, PLOT_LABEL_PT, 0);
    cz.font_extents(cr, &fe);
    double label_h = fe.ascent + fe.descent;
    f->left =
        PLOT_PAD + (p->ylabel && p->ylabel[0] ? label_h + PLOT_PAD : 0) + ytw + PLOT_TICK_LEN + 3;
    f->right = w - fmax(PLOT_PAD * 2, last_xw / 2 + PLOT_PAD);
    f->top = title_h + PLOT_PAD * 1.5;
    f->bottom = h - (PLOT_PAD + (p->xlabel && p->xlabel[0] ? label_h + PLOT_PAD * 0.5 : 0) +
                     tick_h + PLOT_TICK_LEN + 3);
}

static void plot_axes(cairo_t *cr, const sim_plot *p, const plot_frame *f, double w, double h)
{
    cz.set_dash(cr, NULL, 0, 0);
    /* major grid lines, light */
    cz.set_line_width(cr, 0.5);
    cz.set_source_rgba(cr, 0.86, 0.86, 0.86, 1);
    for (size_t i = 0; i < f->x.nticks; i++)
        if (f->x.ticks[i].major) {
            double x = plot_px(f, f->x.ticks[i].v);
            cz.move_to(cr, x, f->top);
            cz.line_to(cr, x, f->bottom);
        }
    for (size_t i = 0; i < f->y.nticks; i++)
        if (f->y.ticks[i].major) {
            double y = plot_py(f, f->y.ticks[i].v);
            cz.move_to(cr, f->left, y);
            cz.line_to(cr, f->right, y);
        }
    cz.stroke(cr);
    /* the frame and the ticks, outside */
    cz.set_source_rgba(cr, 0.15, 0.15, 0.15, 1);
    cz.set_line_width(cr, 0.8);
    cz.rectangle(cr, f->left, f->top, f->right - f->left, f->bottom - f->top);
    cz.stroke(cr);
    cz.set_line_width(cr, 0.6);
    for (size_t i = 0; i < f->x.nticks; i++) {
        double x = plot_px(f, f->x.ticks[i].v);
        cz.move_to(cr, x, f->bottom);
        cz.line_to(cr, x, f->bottom + (f->x.ticks[i].major ? PLOT_TICK_LEN : PLOT_MINOR_LEN));
    }
    for (size_t i = 0; i < f->y.nticks; i++) {
        double y = plot_py(f, f->y.ticks[i].v);
        cz.move_to(cr, f->left, y);
        cz.line_to(cr, f->left - (f->y.ticks[i].major ? PLOT_TICK_LEN : PLOT_MINOR_LEN), y);
    }
    cz.stroke(cr);
    /* tick labels */
    cairo_font_extents_t fe;
    plot_font(cr, PLOT_TICK_PT, 0);
    cz.font_extents(cr, &fe);
    for (size_t i = 0; i < f->x.nticks; i++) {
        const sim_plot_tick *t = &f->x.ticks[i];
        if (!t->label[0])
            continue;
        double tw = plot_tick_label_w(cr, t, PLOT_TICK_PT);
        plot_tick_label(cr, t, plot_px(f, t->v) - tw / 2, f->bottom + PLOT_TICK_LEN + 2 + fe.ascent,
                        PLOT_TICK_PT);
    }
    for (size_t i = 0; i < f->y.nticks; i++) {
        const sim_plot_tick *t = &f->y.ticks[i];
        if (!t->label[0])
            continue;
        double tw = plot_tick_label_w(cr, t, PLOT_TICK_PT);
        plot_tick_label(cr, t, f->left - PLOT_TICK_LEN - 3 - tw,
                        plot_py(f, t->v) + (fe.ascent - fe.descent) / 2, PLOT_TICK_PT);
    }
    /* axis labels */
    plot_font(cr, PLOT_LABEL_PT, 0);
    cz.font_extents(cr, &fe);
    if (p->xlabel && p->xlabel[0]) {
        double tw = plot_text_w(cr, p->xlabel);
        cz.move_to(cr, (f->left + f->right - tw) / 2, h - PLOT_PAD - fe.descent);
        cz.show_text(cr, p->xlabel);
    }
    if (p->ylabel && p->ylabel[0]) {
        double tw = plot_text_w(cr, p->ylabel);
        cz.save(cr);
        cz.translate(cr, PLOT_PAD + fe.ascent, (f->top + f->bottom + tw) / 2);
        cz.rotate(cr, -M_PI / 2);
        cz.move_to(cr, 0, 0);
        cz.show_text(cr, p->ylabel);
        cz.restore(cr);
    }
    (void)w;
}

/* The band of a series: one closed polygon per run of defined points. */
static void plot_band(cairo_t *cr, const plot_frame *f, const sim_plot *p, size_t s)
{
    const sim_plot_series *ser = &p->series[s];
    if (!ser->lo || !ser->hi)
        return;
    plot_rgba(cr, PLOT_COLOURS[s % PLOT_NCOLOURS], PLOT_BAND_ALPHA);
    size_t i = 0;
    while (i < ser->n) {
#define PLOT_BAND_OK(k)                                                                            \
    (plot_usable(ser->x[k], p->log_x) && plot_usable(ser->lo[k], p->log_y) &&                      \
     plot_usable(ser->hi[k], p->log_y))
        while (i < ser->n && !PLOT_BAND_OK(i))
            i++;
        size_t j = i;
        while (j < ser->n && PLOT_BAND_OK(j))
            j++;
#undef PLOT_BAND_OK
        if (j - i >= 2) {
            cz.move_to(cr, plot_px(f, ser->x[i]), plot_py(f, ser->hi[i]));
            for (size_t k = i + 1; k < j; k++)
                cz.line_to(cr, plot_px(f, ser->x[k]), plot_py(f, ser->hi[k]));
            for (size_t k = j; k-- > i;)
                cz.line_to(cr, plot_px(f, ser->x[k]), plot_py(f, ser->lo[k]));
            cz.close_path(cr);
            cz.fill(cr);
        }
        i = j;
    }
}

static void plot_line(cairo_t *cr, const plot_frame *f, const sim_plot *p, size_t s)
{
    const sim_plot_series *ser = &p->series[s];
    plot_style(cr, s, ser);
    int pen = 0;
    for (size_t i = 0; i < ser->n; i++) {
        if (!plot_usable(ser->x[i], p->log_x) || !plot_usable(ser->y[i], p->log_y)) {
            pen = 0;
            continue;
        }
        double x = plot_px(f, ser->x[i]), y = plot_py(f, ser->y[i]);
        if (pen)
            cz.line_to(cr, x, y);
        else
            cz.move_to(cr, x, y);
        /* a lone point still shows: a zero-length segment with round caps */
        if (!pen && (i + 1 == ser->n || !plot_usable(ser->y[i + 1], p->log_y)))
            cz.line_to(cr, x, y);
        pen = 1;
    }
    cz.stroke(cr);
}

/* Legend in the inside corner that covers the fewest data points. */
static void plot_legend(cairo_t *cr, const plot_frame *f, const sim_plot *p)
{
    if (p->nseries == 0 || (p->nseries == 1 && !p->series[0].name))
        return;
    plot_font(cr, PLOT_LEGEND_PT, 0);
    cairo_font_extents_t fe;
    cz.font_extents(cr, &fe);
    double line_h = fe.ascent + fe.descent + 2, sample = 20, tw = 0;
    size_t rows = 0;
    for (size_t s = 0; s < p->nseries; s++)
        if (p->series[s].name) {
            tw = fmax(tw, plot_text_w(cr, p->series[s].name));
            rows++;
        }
    double bw = 4 + sample + 4 + tw + 5, bh = rows * line_h + 5;
    double inset = 5, best_x = f->right - inset - bw, best_y = f->top + inset;
    size_t best = SIZE_MAX;
    for (int corner = 0; corner < 4; corner++) {
        double x = corner & 1 ? f->left + inset : f->right - inset - bw;
        double y = corner & 2 ? f->bottom - inset - bh : f->top + inset;
        size_t hits = 0;
        for (size_t s = 0; s < p->nseries; s++)
            for (size_t i = 0; i < p->series[s].n; i++) {
                const sim_plot_series *ser = &p->series[s];
                if (!plot_usable(ser->x[i], p->log_x) || !plot_usable(ser->y[i], p->log_y))
                    continue;
                double px = plot_px(f, ser->x[i]), py = plot_py(f, ser->y[i]);
                hits += px >= x && px <= x + bw && py >= y && py <= y + bh;
            }
        if (hits < best) /* ties keep the earlier: top right, top left, ... */
            best = hits, best_x = x, best_y = y;
    }
    cz.set_dash(cr, NULL, 0, 0);
    cz.rectangle(cr, best_x, best_y, bw, bh);
    cz.set_source_rgba(cr, 1, 1, 1, 0.88);
    cz.fill_preserve(cr);
    cz.set_line_width(cr, 0.5);
    cz.set_source_rgba(cr, 0.7, 0.7, 0.7, 1);
    cz.stroke(cr);
    double y = best_y + 2.5;
    for (size_t s = 0; s < p->nseries; s++) {
        const sim_plot_series *ser = &p->series[s];
        if (!ser->name)
            continue;
        double mid = y + line_h / 2;
        if (ser->lo && ser->hi) {
            plot_rgba(cr, PLOT_COLOURS[s % PLOT_NCOLOURS], PLOT_BAND_ALPHA);
            cz.rectangle(cr, best_x + 4, mid - 3.5, sample, 7);
            cz.fill(cr);
        }
        plot_style(cr, s, ser);
        cz.move_to(cr, best_x + 4, mid);
        cz.line_to(cr, best_x + 4 + sample, mid);
        cz.stroke(cr);
        cz.set_source_rgba(cr, 0.1, 0.1, 0.1, 1);
        cz.move_to(cr, best_x + 4 + sample + 4, mid + (fe.ascent - fe.descent) / 2);
        cz.show_text(cr, ser->name);
        y += line_h;
    }
}

/* The whole figure on cr, in points. */
static void plot_draw(cairo_t *cr, const sim_plot *p, double w, double h)
{
    cz.set_source_rgba(cr, 1, 1, 1, 1);
    cz.paint(cr);
    cz.set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
    cz.set_line_cap(cr, CAIRO_LINE_CAP_ROUND);
    double title_h = PLOT_PAD;
    if (p->title && p->title[0])
        plot_title(cr, p->title, w, &title_h);
    plot_frame f;
    memset(&f, 0, sizeof f);
    double xlo, xhi, ylo, yhi;
    int have = plot_data_range(p, 0, &xlo, &xhi) && plot_data_range(p, 1, &ylo, &yhi);
    if (!have)
        xlo = p->log_x ? 1 : 0, xhi = p->log_x ? 10 : 1, ylo = p->log_y ? 1 : 0,
        yhi = p->log_y ? 10 : 1;
    plot_make_axis(&f.x, xlo, xhi, p->log_x, 0);
    plot_make_axis(&f.y, ylo, yhi, p->log_y, 1);
    plot_layout(cr, p, w, h, title_h, &f);
    plot_axes(cr, p, &f, w, h);
    cz.save(cr);
    cz.rectangle(cr, f.left, f.top, f.right - f.left, f.bottom - f.top);
    cz.clip(cr);
    for (size_t s = 0; s < p->nseries; s++)
        plot_band(cr, &f, p, s);
    /* thin lines first, so the population is on top */
    for (int pass = 0; pass < 2; pass++)
        for (size_t s = p->nseries; s-- > 0;)
            if (p->series[s].thin == !pass)
                plot_line(cr, &f, p, s);
    cz.restore(cr);
    plot_legend(cr, &f, p);
}

/* Probe the path first, so a bad directory is reported with its cause
 * (cairo only says "error while writing to output stream"). */
static int plot_probe(const char *path, char *err, size_t errlen)
{
    FILE *fp = fopen(path, "ab");
    if (!fp)
        return common_errf(err, errlen, SIM_PLOT_EIO, "cannot write %s: %s", path, strerror(errno));
    fclose(fp);
    return SIM_PLOT_OK;
}

static int plot_surface_done(cairo_surface_t *s, cairo_t *cr, const char *path, char *err,
                             size_t errlen)
{
    cairo_status_t st = cr ? cz.status(cr) : CAIRO_STATUS_SUCCESS;
    if (cr)
        cz.destroy(cr);
    cz.surface_finish(s);
    if (st == CAIRO_STATUS_SUCCESS)
        st = cz.surface_status(s);
    cz.surface_destroy(s);
    if (st == CAIRO_STATUS_NO_MEMORY)
        return common_errf(err, errlen, SIM_PLOT_ENOMEM, "%s: out of memory", path);
    if (st != CAIRO_STATUS_SUCCESS)
        return common_errf(err, errlen, SIM_PLOT_EIO, "cannot write %s: %s", path,
                           cz.status_to_string(st));
    return SIM_PLOT_OK;
}

static int plot_one(const sim_plot *p, const char *base, unsigned format, double w, double h,
                    char *err, size_t errlen)
{
    static const char *const ext[] = {"png", "svg", "pdf"};
    int which = format == SIM_PLOT_PNG ? 0 : format == SIM_PLOT_SVG ? 1 : 2;
    char path[SIM_OUTPUT_PATH_MAX + 8];
    if (snprintf(path, sizeof path, "%s.%s", base, ext[which]) >= (int)sizeof path)
        return common_errf(err, errlen, SIM_PLOT_EINVAL, "%s: path too long", base);
    int rc = plot_probe(path, err, errlen);
    if (rc)
        return rc;
    cairo_surface_t *s;
    double scale = 1;
    if (which == 0) {
        scale = SIM_PLOT_PNG_DPI / 72.0;
        s = cz.image_surface_create(CAIRO_FORMAT_RGB24, (int)ceil(w * scale), (int)ceil(h * scale));
    } else if (which == 1) {
        s = cz.svg_surface_create(path, w, h);
    } else {
        s = cz.pdf_surface_create(path, w, h);
        if (cz.pdf_surface_set_metadata && p->title)
            cz.pdf_surface_set_metadata(s, CAIRO_PDF_METADATA_TITLE, p->title);
    }
    if (cz.surface_status(s) != CAIRO_STATUS_SUCCESS)
        return plot_surface_done(s, NULL, path, err, errlen);
    cairo_t *cr = cz.create(s);
    cz.scale(cr, scale, scale);
    plot_draw(cr, p, w, h);
    if (which == 0 && cz.status(cr) == CAIRO_STATUS_SUCCESS) {
        cairo_status_t st = cz.surface_write_to_png(s, path);
        if (st != CAIRO_STATUS_SUCCESS) {
            cz.destroy(cr);
            cz.surface_destroy(s);
            return common_errf(err, errlen, SIM_PLOT_EIO, "cannot write %s: %s", path,
                               cz.status_to_string(st));
        }
    }
    return plot_surface_done(s, cr, path, err, errlen);
}

int sim_plot_write(const sim_plot *p, const char *base, unsigned formats, char *err, size_t errlen)
{
    double w = p->width_pt > 0 ? p->width_pt : SIM_PLOT_WIDTH_PT;
    double h = p->height_pt > 0 ? p->height_pt : SIM_PLOT_HEIGHT_PT;
    if (w < SIM_PLOT_SIDE_MIN || w > SIM_PLOT_SIDE_MAX || h < SIM_PLOT_SIDE_MIN ||
        h > SIM_PLOT_SIDE_MAX)
        return common_errf(err, errlen, SIM_PLOT_EINVAL, "%s: size %gx%g pt outside %g..%g", base,
                           w, h, SIM_PLOT_SIDE_MIN, SIM_PLOT_SIDE_MAX);
    if (p->nseries > SIM_PLOT_SERIES_MAX)
        return common_errf(err, errlen, SIM_PLOT_EINVAL, "%s: %zu series (at most %u)", base,
                           p->nseries, SIM_PLOT_SERIES_MAX);
    if (!(formats & SIM_PLOT_FORMATS_ALL) || (formats & ~SIM_PLOT_FORMATS_ALL))
        return common_errf(err, errlen, SIM_PLOT_EINVAL, "%s: no format (png, svg, pdf)", base);
    for (size_t s = 0; s < p->nseries; s++)
        if ((!p->series[s].x || !p->series[s].y) && p->series[s].n)
            return common_errf(err, errlen, SIM_PLOT_EINVAL, "%s: series %zu has no data", base, s);
    int rc = sim_plot_available(err, errlen);
    for (unsigned fmt = SIM_PLOT_PNG; rc == 0 && fmt <= SIM_PLOT_PDF; fmt <<= 1)
        if (formats & fmt)
            rc = plot_one(p, base, fmt, w, h, err, errlen);
    return rc;
}

/* ---- reading runs back ---------------------------------------------------- */

enum { PC_T, PC_ROUND, PC_LOSS, PC_ACC, PC_CD, PC_BYTES, PC_N };

/* The rows of one agent (or of the population) in series.csv order. */
typedef struct plot_track {
    long long agent; /* -1 = all */
    size_t n, cap;
    double *v[PC_N];
} plot_track;

/* One run as drawn: the population (mean over seeds), its band, agents. */
typedef struct plot_run {
    char dir[SIM_OUTPUT_PATH_MAX];
    char scenario[SIM_SCENARIO_STR_MAX], label[SIM_SCENARIO_STR_MAX], seeds[96];
    uint32_t nseeds;
    plot_track pop;
    double *lo[PC_N], *hi[PC_N]; /* NULL for one seed */
    plot_track agents[SIM_PLOT_AGENT_LINES];
    size_t nagents;
} plot_run;

static void plot_track_free(plot_track *t)
{
    for (int c = 0; c < PC_N; c++)
        free(t->v[c]);
    memset(t, 0, sizeof *t);
}

static void plot_run_free(plot_run *r)
{
    plot_track_free(&r->pop);
    for (size_t k = 0; k < SIM_PLOT_AGENT_LINES; k++)
        plot_track_free(&r->agents[k]);
    for (int c = 0; c < PC_N; c++) {
        free(r->lo[c]);
        free(r->hi[c]);
        r->lo[c] = r->hi[c] = NULL;
    }
}

static int plot_track_push(plot_track *t, const double row[PC_N])
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 256;
        for (int k = 0; k < PC_N; k++) {
            double *p = realloc(t->v[k], cap * sizeof *p);
            if (!p)
                return SIM_PLOT_ENOMEM;
            t->v[k] = p;
        }
        t->cap = cap;
    }
    for (int k = 0; k < PC_N; k++)
        t->v[k][t->n] = row[k];
    t->n++;
    return SIM_PLOT_OK;
}

static int plot_field(const char *s, double *out)
{
    if (!*s) {
        *out = NAN;
        return 0;
    }
    char *end;
    errno = 0;
    *out = strtod(s, &end);
    return *end || errno == ERANGE ? -1 : 0;
}

/* Split a series.csv row into its 8 fields (in place). */
static int plot_split8(char *line, char *f[8])
{
    int n = 0;
    f[n++] = line;
    for (char *p = line; *p; p++)
        if (*p == ',') {
            if (n == 8)
                return -1;
            *p = 0;
            f[n++] = p + 1;
        }
    return n == 8 ? 0 : -1;
}

/* Parse one data row. Returns 0, or -1 if it is not a series row. */
static int plot_parse_row(char *line, double row[PC_N], long long *agent)
{
    char *f[8];
    double recv;
    *agent = -1;
    if (plot_split8(line, f) || plot_field(f[0], &row[PC_T]) || plot_field(f[1], &row[PC_ROUND]) ||
        plot_field(f[3], &row[PC_LOSS]) || plot_field(f[4], &row[PC_ACC]) ||
        plot_field(f[5], &row[PC_CD]) || plot_field(f[6], &row[PC_BYTES]) ||
        plot_field(f[7], &recv))
        return -1;
    if (strcmp(f[2], "all")) {
        char *end;
        errno = 0;
        long long a = strtoll(f[2], &end, 10);
        if (*end || !*f[2] || a < 0 || errno)
            return -1;
        *agent = a;
    }
    return 0;
}

/* Read series.csv: the population rows into pop, and the first `nagents`
 * agents' rows into agents (nagents 0: none kept). A last line cut short
 * (a run killed while writing) is ignored. */
static int plot_read_series(const char *path, plot_track *pop, plot_track *agents, size_t *nagents,
                            char *err, size_t errlen)
{
    FILE *fp = fopen(path, "r");
    if (!fp)
        return common_errf(err, errlen, SIM_PLOT_EIO, "cannot open %s: %s", path, strerror(errno));
    size_t keep = *nagents;
    *nagents = 0;
    char line[SIM_PLOT_CSV_LINE_MAX];
    unsigned lineno = 0;
    int rc = SIM_PLOT_OK;
    while (rc == 0 && fgets(line, sizeof line, fp)) {
        lineno++;
        size_t len = strlen(line);
        int whole = len && line[len - 1] == '\n';
        if (whole)
            line[--len] = 0;
        else if (!feof(fp)) {
            rc = common_errf(err, errlen, SIM_PLOT_EPARSE, "%s:%u: line longer than %u characters",
                             path, lineno, SIM_PLOT_CSV_LINE_MAX - 1);
            break;
        }
        if (lineno == 1) {
            if (strcmp(line, SIM_SERIES_HEADER))
                rc = common_errf(err, errlen, SIM_PLOT_EPARSE, "%s:1: header is not '%s'", path,
                                 SIM_SERIES_HEADER);
            continue;
        }
        double row[PC_N];
        long long agent;
        if (plot_parse_row(line, row, &agent)) {
            if (!whole)
                break; /* cut short */
            rc = common_errf(err, errlen, SIM_PLOT_EPARSE, "%s:%u: not a series row (%s)", path,
                             lineno, SIM_SERIES_HEADER);
            break;
        }
        plot_track *t = NULL;
        if (agent < 0) {
            t = pop;
        } else {
            for (size_t k = 0; k < *nagents && !t; k++)
                if (agents[k].agent == agent)
                    t = &agents[k];
            if (!t && *nagents < keep) {
                t = &agents[(*nagents)++];
                t->agent = agent;
            }
        }
        if (t && plot_track_push(t, row))
            rc = common_errf(err, errlen, SIM_PLOT_ENOMEM, "%s: out of memory", path);
    }
    if (rc == 0 && ferror(fp))
        rc = common_errf(err, errlen, SIM_PLOT_EIO, "read error on %s", path);
    if (rc == 0 && lineno == 0)
        rc = common_errf(err, errlen, SIM_PLOT_EPARSE, "%s: empty (no header)", path);
    fclose(fp);
    pop->agent = -1;
    return rc;
}

/* A string member of a flat summary.json ("" when absent or unreadable). */
static void plot_summary_get(const char *dir, const char *key, char *out, size_t len)
{
    out[0] = 0;
    char path[SIM_OUTPUT_PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/summary.json", dir);
    FILE *fp = fopen(path, "r");
    if (!fp)
        return;
    static char doc[1 << 16];
    size_t n = fread(doc, 1, sizeof doc - 1, fp);
    fclose(fp);
    doc[n] = 0;
    if (common_json_get(doc, key, out, len) != 1)
        out[0] = 0;
}

static int plot_is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int plot_is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int plot_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Numbers N of the entries PREFIX-N of dir that are directories, sorted
 * (out NULL: only count them). Returns the count, or SIM_PLOT_EIO /
 * SIM_PLOT_EINVAL (message in err). */
static long plot_numbered(const char *dir, const char *prefix, uint64_t *out, size_t max, char *err,
                          size_t errlen)
{
    DIR *d = opendir(dir);
    if (!d)
        return common_errf(err, errlen, SIM_PLOT_EIO, "cannot open %s: %s", dir, strerror(errno));
    size_t n = 0, plen = strlen(prefix);
    long rc = 0;
    for (struct dirent *e; (e = readdir(d));) {
        const char *s = e->d_name;
        if (strncmp(s, prefix, plen) || !isdigit((unsigned char)s[plen]))
            continue;
        char *end;
        errno = 0;
        unsigned long long v = strtoull(s + plen, &end, 10);
        char sub[SIM_OUTPUT_PATH_MAX + 32];
        snprintf(sub, sizeof sub, "%s/%s", dir, s);
        if (*end || errno || !plot_is_dir(sub))
            continue;
        if (!out) {
            n++;
            continue;
        }
        if (n == max) {
            rc = common_errf(err, errlen, SIM_PLOT_EINVAL, "%s: more than %zu %s* directories", dir,
                             max, prefix);
            break;
        }
        out[n++] = v;
    }
    closedir(d);
    if (rc)
        return rc;
    if (out && n > 1)
        qsort(out, n, sizeof *out, plot_cmp_u64);
    return (long)n;
}

/* "seed 3", "seeds 1–5", "seeds 1, 4, 9", "seeds 1, 2, 3, … (12)" */
static void plot_seeds_text(const uint64_t *s, size_t n, char *buf, size_t len)
{
    if (n == 1) {
        snprintf(buf, len, "seed %llu", (unsigned long long)s[0]);
        return;
    }
    int consecutive = 1;
    for (size_t i = 1; i < n; i++)
        consecutive &= s[i] == s[i - 1] + 1;
    if (consecutive) {
        snprintf(buf, len, "seeds %llu\xe2\x80\x93%llu", (unsigned long long)s[0],
                 (unsigned long long)s[n - 1]);
        return;
    }
    size_t used = (size_t)snprintf(buf, len, "seeds ");
    for (size_t i = 0; i < n && i < 4 && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%llu", i ? ", " : "",
                                 (unsigned long long)s[i]);
    if (n > 4 && used < len)
        snprintf(buf + used, len - used, ", \xe2\x80\xa6 (%zu)", n);
}

/* Mean over seeds and the 95% band, sample by sample (sample k of every
 * seed that has one: a seed interrupted early drops out of later points). */
static int plot_aggregate(plot_run *r, plot_track *seeds, size_t n, char *err, size_t errlen)
{
    size_t m = 0;
    for (size_t s = 0; s < n; s++)
        m = seeds[s].n > m ? seeds[s].n : m;
    double *vals = malloc((n ? n : 1) * sizeof *vals);
    for (int c = 0; c < PC_N && vals; c++) {
        r->lo[c] = malloc((m ? m : 1) * sizeof **r->lo);
        r->hi[c] = malloc((m ? m : 1) * sizeof **r->hi);
        if (!r->lo[c] || !r->hi[c]) {
            free(vals);
            vals = NULL;
        }
    }
    if (!vals)
        return common_errf(err, errlen, SIM_PLOT_ENOMEM, "%s: out of memory", r->dir);
    for (size_t k = 0; k < m; k++) {
        double row[PC_N];
        for (int c = 0; c < PC_N; c++) {
            size_t q = 0;
            for (size_t s = 0; s < n; s++)
                if (k < seeds[s].n)
                    vals[q++] = seeds[s].v[c][k];
            sim_stats st;
            sim_stats_compute(vals, q, SIM_STATS_LEVEL, &st);
            row[c] = st.mean;
            r->lo[c][k] = st.ci_low;
            r->hi[c][k] = st.ci_high;
        }
        if (plot_track_push(&r->pop, row)) {
            free(vals);
            return common_errf(err, errlen, SIM_PLOT_ENOMEM, "%s: out of memory", r->dir);
        }
    }
    free(vals);
    return SIM_PLOT_OK;
}

/* Load a run directory: DIR/series.csv, or DIR/seed-S/series.csv. */
static int plot_load_run(const char *dir, plot_run *r, size_t keep_agents, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    snprintf(r->dir, sizeof r->dir, "%s", dir);
    char path[SIM_OUTPUT_PATH_MAX + 48];
    snprintf(path, sizeof path, "%s/series.csv", dir);
    if (plot_is_file(path)) {
        r->nagents = keep_agents;
        int rc = plot_read_series(path, &r->pop, r->agents, &r->nagents, err, errlen);
        if (rc)
            return rc;
        plot_summary_get(dir, "scenario", r->scenario, sizeof r->scenario);
        plot_summary_get(dir, "label", r->label, sizeof r->label);
        char seed[32];
        plot_summary_get(dir, "seed", seed, sizeof seed);
        if (seed[0])
            snprintf(r->seeds, sizeof r->seeds, "seed %s", seed);
        r->nseeds = 1;
        return SIM_PLOT_OK;
    }
    uint64_t *seeds = malloc(SIM_PLOT_SEEDS_MAX * sizeof *seeds);
    if (!seeds)
        return common_errf(err, errlen, SIM_PLOT_ENOMEM, "out of memory");
    long n = plot_numbered(dir, "seed-", seeds, SIM_PLOT_SEEDS_MAX, err, errlen);
    if (n == 0)
        common_errf(err, errlen, SIM_PLOT_EIO, "%s: no series.csv and no seed-S/ directories", dir);
    if (n <= 0) {
        free(seeds);
        return n == 0 ? SIM_PLOT_EIO : (int)n;
    }
    plot_track *tracks = calloc((size_t)n, sizeof *tracks);
    int rc = tracks ? SIM_PLOT_OK : common_errf(err, errlen, SIM_PLOT_ENOMEM, "out of memory");
    for (long s = 0; s < n && rc == 0; s++) {
        char sub[SIM_OUTPUT_PATH_MAX + 32];
        snprintf(sub, sizeof sub, "%s/seed-%llu", dir, (unsigned long long)seeds[s]);
        snprintf(path, sizeof path, "%s/series.csv", sub);
        size_t none = 0;
        rc = plot_read_series(path, &tracks[s], NULL, &none, err, errlen);
        if (rc == 0 && s == 0) {
            plot_summary_get(sub, "scenario", r->scenario, sizeof r->scenario);
            plot_summary_get(sub, "label", r->label, sizeof r->label);
        }
    }
    if (rc == 0) {
        rc = plot_aggregate(r, tracks, (size_t)n, err, errlen);
        r->nseeds = (uint32_t)n;
        plot_seeds_text(seeds, (size_t)n, r->seeds, sizeof r->seeds);
    }
    for (long s = 0; tracks && s < n; s++)
        plot_track_free(&tracks[s]);
    free(tracks);
    free(seeds);
    return rc;
}

/* ---- the figures ---------------------------------------------------------- */

typedef struct plot_metric {
    const char *name, *ylabel;
    int col, log_y;
} plot_metric;

static const plot_metric PLOT_METRICS[] = {
    {"accuracy", "accuracy", PC_ACC, 0},
    {"loss", "loss", PC_LOSS, 0},
    {"consensus", "consensus distance", PC_CD, 1},
    {"bytes", NULL, PC_BYTES, 0},
};
#define PLOT_NMETRICS (sizeof PLOT_METRICS / sizeof PLOT_METRICS[0])

static int plot_has(const plot_track *t, int col, int log)
{
    for (size_t i = 0; i < t->n; i++)
        if (plot_usable(t->v[col][i], log))
            return 1;
    return 0;
}

/* Bytes in B, kB, MB or GB (powers of 1000) by the largest value. */
static void plot_bytes_unit(plot_run *runs, size_t n, char *label, size_t len)
{
    double bmax = 0;
    for (size_t r = 0; r < n; r++)
        for (size_t i = 0; i < runs[r].pop.n; i++)
            if (isfinite(runs[r].pop.v[PC_BYTES][i]))
                bmax = fmax(bmax, runs[r].pop.v[PC_BYTES][i]);
    const char *unit = "B";
    double div = 1;
    if (bmax >= 1e9)
        unit = "GB", div = 1e9;
    else if (bmax >= 1e6)
        unit = "MB", div = 1e6;
    else if (bmax >= 1e3)
        unit = "kB", div = 1e3;
    for (size_t r = 0; r < n; r++) {
        plot_track *ts[1 + SIM_PLOT_AGENT_LINES] = {&runs[r].pop};
        for (size_t a = 0; a < runs[r].nagents; a++)
            ts[1 + a] = &runs[r].agents[a];
        for (size_t t = 0; t < 1 + runs[r].nagents; t++)
            for (size_t i = 0; i < ts[t]->n; i++)
                ts[t]->v[PC_BYTES][i] /= div;
        if (runs[r].lo[PC_BYTES])
            for (size_t i = 0; i < runs[r].pop.n; i++) {
                runs[r].lo[PC_BYTES][i] /= div;
                runs[r].hi[PC_BYTES][i] /= div;
            }
    }
    snprintf(label, len, "bytes sent, all agents (%s)", unit);
}

/* "scenario, label (seeds 1–5: mean and 95% CI)" */
static void plot_run_title(const plot_run *r, char *buf, size_t len)
{
    const char *name = r->scenario[0] ? r->scenario : r->dir;
    char seeds[160] = "";
    if (r->nseeds > 1)
        snprintf(seeds, sizeof seeds, " (%s: mean and 95%% CI)", r->seeds);
    else if (r->seeds[0])
        snprintf(seeds, sizeof seeds, " (%s)", r->seeds);
    snprintf(buf, len, "%.300s%s%.300s%s", name, r->label[0] ? ", " : "", r->label, seeds);
}

int sim_plot_dir(const char *dir, char *err, size_t errlen)
{
    plot_run *r = malloc(sizeof *r);
    if (!r)
        return common_errf(err, errlen, SIM_PLOT_ENOMEM, "out of memory");
    int rc = plot_load_run(dir, r, SIM_PLOT_AGENT_LINES, err, errlen);
    char title[800], bytes_label[64];
    if (rc == 0) {
        plot_bytes_unit(r, 1, bytes_label, sizeof bytes_label);
        plot_run_title(r, title, sizeof title);
    }
    char names[SIM_PLOT_AGENT_LINES][32];
    for (size_t m = 0; rc == 0 && m < PLOT_NMETRICS; m++) {
        const plot_metric *pm = &PLOT_METRICS[m];
        if (!plot_has(&r->pop, pm->col, pm->log_y))
            continue;
        sim_plot_series ser[1 + SIM_PLOT_AGENT_LINES];
        size_t ns = 0;
        ser[ns++] =
            (sim_plot_series){r->nagents ? "all agents" : (r->nseeds > 1 ? "mean, 95% CI" : NULL),
                              r->pop.v[PC_T],
                              r->pop.v[pm->col],
                              r->lo[pm->col],
                              r->hi[pm->col],
                              r->pop.n,
                              0};
        for (size_t a = 0; a < r->nagents; a++) {
            snprintf(names[a], sizeof names[a], "agent %lld", r->agents[a].agent);
            ser[ns++] = (sim_plot_series){
                names[a], r->agents[a].v[PC_T], r->agents[a].v[pm->col], NULL, NULL, r->agents[a].n,
                1};
        }
        sim_plot p = {title,
                      "simulated time (s)",
                      pm->ylabel ? pm->ylabel : bytes_label,
                      0,
                      pm->log_y,
                      ser,
                      ns,
                      0,
                      0};
        char base[SIM_OUTPUT_PATH_MAX + 32];
        snprintf(base, sizeof base, "%s/%s_vs_time", dir, pm->name);
        rc = sim_plot_write(&p, base, SIM_PLOT_FORMATS_ALL, err, errlen);
    }
    plot_run_free(r);
    free(r);
    return rc;
}

/* The runs of one command-line directory: itself, or its run-RRRR/. */
static int plot_expand(const char *dir, char (*out)[SIM_OUTPUT_PATH_MAX], size_t *n, char *err,
                       size_t errlen)
{
    char path[SIM_OUTPUT_PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/series.csv", dir);
    if (!plot_is_dir(dir))
        return common_errf(err, errlen, SIM_PLOT_EIO, "%s: not a directory", dir);
    uint64_t nums[SIM_PLOT_RUNS_MAX + 1];
    long seeds = plot_is_file(path) ? 0 : plot_numbered(dir, "seed-", NULL, 0, err, errlen);
    if (seeds < 0)
        return (int)seeds;
    if (plot_is_file(path) || seeds > 0) {
        if (*n == SIM_PLOT_RUNS_MAX)
            return common_errf(err, errlen, SIM_PLOT_EINVAL, "more than %u runs to compare",
                               SIM_PLOT_RUNS_MAX);
        snprintf(out[(*n)++], SIM_OUTPUT_PATH_MAX, "%s", dir);
        return SIM_PLOT_OK;
    }
    long k = plot_numbered(dir, "run-", nums, SIM_PLOT_RUNS_MAX + 1, err, errlen);
    if (k < 0)
        return (int)k;
    if (k == 0)
        return common_errf(err, errlen, SIM_PLOT_EIO,
                           "%s: no series.csv, seed-S/ or run-RRRR/ inside (not a murmur sim "
                           "output directory)",
                           dir);
    for (long i = 0; i < k; i++) {
        if (*n == SIM_PLOT_RUNS_MAX)
            return common_errf(err, errlen, SIM_PLOT_EINVAL,
                               "more than %u runs to compare; name the run directories to draw",
                               SIM_PLOT_RUNS_MAX);
        int len = snprintf(out[*n], SIM_OUTPUT_PATH_MAX, "%s/run-%04llu", dir,
                           (unsigned long long)nums[i]);
        if (len < 0 || len >= (int)SIM_OUTPUT_PATH_MAX)
            return common_errf(err, errlen, SIM_PLOT_EINVAL, "%s: path too long", dir);
        (*n)++;
    }
    return SIM_PLOT_OK;
}

/* Names of the runs in the legend: their labels when those differ, else
 * their directories. The title: the common scenario and seeds. */
static void plot_compare_names(plot_run *runs, size_t n, char (*names)[SIM_SCENARIO_STR_MAX],
                               char *title, size_t tlen)
{
    int labels_differ = 1;
    for (size_t i = 0; i < n && labels_differ; i++) {
        labels_differ &= runs[i].label[0] != 0;
        for (size_t j = 0; j < i; j++)
            labels_differ &= strcmp(runs[i].label, runs[j].label) != 0;
    }
    int same_scenario = 1, same_seeds = 1;
    for (size_t i = 1; i < n; i++) {
        same_scenario &= !strcmp(runs[i].scenario, runs[0].scenario);
        same_seeds &= !strcmp(runs[i].seeds, runs[0].seeds);
    }
    for (size_t i = 0; i < n; i++) {
        const char *s = labels_differ ? runs[i].label : runs[i].dir;
        if (!same_seeds && runs[i].seeds[0])
            snprintf(names[i], SIM_SCENARIO_STR_MAX, "%.200s (%s)", s, runs[i].seeds);
        else
            snprintf(names[i], SIM_SCENARIO_STR_MAX, "%s", s);
    }
    const char *scen = same_scenario && runs[0].scenario[0] ? runs[0].scenario : "comparison";
    if (same_seeds && runs[0].seeds[0])
        snprintf(title, tlen, "%s (%s%s)", scen, runs[0].seeds,
                 runs[0].nseeds > 1 ? ": means and 95% CIs" : "");
    else
        snprintf(title, tlen, "%s", scen);
}

static int plot_compare_draw(plot_run *runs, size_t n, const char *out,
                             const sim_plot_compare_opts *o, char *err, size_t errlen)
{
    char(*names)[SIM_SCENARIO_STR_MAX] = malloc(n * sizeof *names);
    sim_plot_series *ser = malloc(n * sizeof *ser);
    int rc =
        names && ser ? SIM_PLOT_OK : common_errf(err, errlen, SIM_PLOT_ENOMEM, "out of memory");
    char title[SIM_SCENARIO_STR_MAX + 128], bytes_label[64];
    if (rc == 0) {
        plot_compare_names(runs, n, names, title, sizeof title);
        plot_bytes_unit(runs, n, bytes_label, sizeof bytes_label);
    }
    for (size_t m = 0; rc == 0 && m < PLOT_NMETRICS; m++) {
        const plot_metric *pm = &PLOT_METRICS[m];
        int log_y = pm->log_y || o->log_y, any = 0;
        for (size_t r = 0; r < n; r++) {
            any |= plot_has(&runs[r].pop, pm->col, log_y);
            ser[r] = (sim_plot_series){names[r],
                                       runs[r].pop.v[PC_T],
                                       runs[r].pop.v[pm->col],
                                       runs[r].lo[pm->col],
                                       runs[r].hi[pm->col],
                                       runs[r].pop.n,
                                       0};
        }
        if (!any)
            continue;
        sim_plot p = {title,
                      "simulated time (s)",
                      pm->ylabel ? pm->ylabel : bytes_label,
                      o->log_x,
                      log_y,
                      ser,
                      n,
                      0,
                      0};
        char base[SIM_OUTPUT_PATH_MAX + 32];
        snprintf(base, sizeof base, "%s/compare_%s_vs_time", out, pm->name);
        rc = sim_plot_write(&p, base, o->formats ? o->formats : SIM_PLOT_FORMATS_ALL, err, errlen);
    }
    free(names);
    free(ser);
    return rc;
}

int sim_plot_compare(const char *const *dirs, size_t ndirs, const char *out,
                     const sim_plot_compare_opts *opts, char *err, size_t errlen)
{
    static const sim_plot_compare_opts defaults = {0};
    const sim_plot_compare_opts *o = opts ? opts : &defaults;
    char(*paths)[SIM_OUTPUT_PATH_MAX] = malloc(SIM_PLOT_RUNS_MAX * sizeof *paths);
    plot_run *runs = calloc(SIM_PLOT_RUNS_MAX, sizeof *runs);
    size_t n = 0, loaded = 0;
    int rc =
        paths && runs ? SIM_PLOT_OK : common_errf(err, errlen, SIM_PLOT_ENOMEM, "out of memory");
    if (rc == 0 && ndirs == 0)
        rc = common_errf(err, errlen, SIM_PLOT_EINVAL, "no directory to plot");
    for (size_t d = 0; rc == 0 && d < ndirs; d++)
        rc = plot_expand(dirs[d], paths, &n, err, errlen);
    for (size_t r = 0; rc == 0 && r < n; r++, loaded++)
        rc = plot_load_run(paths[r], &runs[r], 0, err, errlen);
    if (rc == 0 && common_mkdirs(out, 0777, err, errlen))
        rc = SIM_PLOT_EIO;
    if (rc == 0)
        rc = plot_compare_draw(runs, n, out, o, err, errlen);
    for (size_t r = 0; runs && r <= loaded && r < SIM_PLOT_RUNS_MAX; r++)
        plot_run_free(&runs[r]);
    free(runs);
    free(paths);
    return rc;
}
