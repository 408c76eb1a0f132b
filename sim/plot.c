/* sim/plot — see plot.h. A small raster: canvas, lines, a 5x7 font, axes. */
#include "sim/plot.h"

#include <errno.h>
#include <math.h>
#include <png.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/output.h"

/* ---- font: printable ASCII 32..126, 7 rows of 5 columns, bit 4 = left ---- */

static const uint8_t FONT[95][7] = {
    {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00}, /* ' ' */
    {0x04, 0x04, 0x04, 0x04, 0x04, 0x00, 0x04}, /* '!' */
    {0x0a, 0x0a, 0x00, 0x00, 0x00, 0x00, 0x00}, /* '"' */
    {0x0a, 0x0a, 0x1f, 0x0a, 0x1f, 0x0a, 0x0a}, /* '#' */
    {0x04, 0x0f, 0x14, 0x0e, 0x05, 0x1e, 0x04}, /* '$' */
    {0x18, 0x19, 0x02, 0x04, 0x08, 0x13, 0x03}, /* '%' */
    {0x0c, 0x12, 0x14, 0x08, 0x15, 0x12, 0x0d}, /* '&' */
    {0x04, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00}, /* '\'' */
    {0x02, 0x04, 0x08, 0x08, 0x08, 0x04, 0x02}, /* '(' */
    {0x08, 0x04, 0x02, 0x02, 0x02, 0x04, 0x08}, /* ')' */
    {0x00, 0x04, 0x15, 0x0e, 0x15, 0x04, 0x00}, /* '*' */
    {0x00, 0x04, 0x04, 0x1f, 0x04, 0x04, 0x00}, /* '+' */
    {0x00, 0x00, 0x00, 0x00, 0x0c, 0x04, 0x08}, /* ',' */
    {0x00, 0x00, 0x00, 0x1f, 0x00, 0x00, 0x00}, /* '-' */
    {0x00, 0x00, 0x00, 0x00, 0x00, 0x0c, 0x0c}, /* '.' */
    {0x00, 0x01, 0x02, 0x04, 0x08, 0x10, 0x00}, /* '/' */
    {0x0e, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0e}, /* '0' */
    {0x04, 0x0c, 0x04, 0x04, 0x04, 0x04, 0x0e}, /* '1' */
    {0x0e, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1f}, /* '2' */
    {0x1f, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0e}, /* '3' */
    {0x02, 0x06, 0x0a, 0x12, 0x1f, 0x02, 0x02}, /* '4' */
    {0x1f, 0x10, 0x1e, 0x01, 0x01, 0x11, 0x0e}, /* '5' */
    {0x06, 0x08, 0x10, 0x1e, 0x11, 0x11, 0x0e}, /* '6' */
    {0x1f, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08}, /* '7' */
    {0x0e, 0x11, 0x11, 0x0e, 0x11, 0x11, 0x0e}, /* '8' */
    {0x0e, 0x11, 0x11, 0x0f, 0x01, 0x02, 0x0c}, /* '9' */
    {0x00, 0x0c, 0x0c, 0x00, 0x0c, 0x0c, 0x00}, /* ':' */
    {0x00, 0x0c, 0x0c, 0x00, 0x0c, 0x04, 0x08}, /* ';' */
    {0x02, 0x04, 0x08, 0x10, 0x08, 0x04, 0x02}, /* '<' */
    {0x00, 0x00, 0x1f, 0x00, 0x1f, 0x00, 0x00}, /* '=' */
    {0x08, 0x04, 0x02, 0x01, 0x02, 0x04, 0x08}, /* '>' */
    {0x0e, 0x11, 0x01, 0x02, 0x04, 0x00, 0x04}, /* '?' */
    {0x0e, 0x11, 0x01, 0x0d, 0x15, 0x15, 0x0e}, /* '@' */
    {0x0e, 0x11, 0x11, 0x1f, 0x11, 0x11, 0x11}, /* 'A' */
    {0x1e, 0x11, 0x11, 0x1e, 0x11, 0x11, 0x1e}, /* 'B' */
    {0x0e, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0e}, /* 'C' */
    {0x1c, 0x12, 0x11, 0x11, 0x11, 0x12, 0x1c}, /* 'D' */
    {0x1f, 0x10, 0x10, 0x1e, 0x10, 0x10, 0x1f}, /* 'E' */
    {0x1f, 0x10, 0x10, 0x1e, 0x10, 0x10, 0x10}, /* 'F' */
    {0x0e, 0x11, 0x10, 0x17, 0x11, 0x11, 0x0f}, /* 'G' */
    {0x11, 0x11, 0x11, 0x1f, 0x11, 0x11, 0x11}, /* 'H' */
    {0x0e, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0e}, /* 'I' */
    {0x07, 0x02, 0x02, 0x02, 0x02, 0x12, 0x0c}, /* 'J' */
    {0x11, 0x12, 0x14, 0x18, 0x14, 0x12, 0x11}, /* 'K' */
    {0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1f}, /* 'L' */
    {0x11, 0x1b, 0x15, 0x15, 0x11, 0x11, 0x11}, /* 'M' */
    {0x11, 0x11, 0x19, 0x15, 0x13, 0x11, 0x11}, /* 'N' */
    {0x0e, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0e}, /* 'O' */
    {0x1e, 0x11, 0x11, 0x1e, 0x10, 0x10, 0x10}, /* 'P' */
    {0x0e, 0x11, 0x11, 0x11, 0x15, 0x12, 0x0d}, /* 'Q' */
    {0x1e, 0x11, 0x11, 0x1e, 0x14, 0x12, 0x11}, /* 'R' */
    {0x0f, 0x10, 0x10, 0x0e, 0x01, 0x01, 0x1e}, /* 'S' */
    {0x1f, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04}, /* 'T' */
    {0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0e}, /* 'U' */
    {0x11, 0x11, 0x11, 0x11, 0x11, 0x0a, 0x04}, /* 'V' */
    {0x11, 0x11, 0x11, 0x15, 0x15, 0x15, 0x0a}, /* 'W' */
    {0x11, 0x11, 0x0a, 0x04, 0x0a, 0x11, 0x11}, /* 'X' */
    {0x11, 0x11, 0x0a, 0x04, 0x04, 0x04, 0x04}, /* 'Y' */
    {0x1f, 0x01, 0x02, 0x04, 0x08, 0x10, 0x1f}, /* 'Z' */
    {0x0e, 0x08, 0x08, 0x08, 0x08, 0x08, 0x0e}, /* '[' */
    {0x00, 0x10, 0x08, 0x04, 0x02, 0x01, 0x00}, /* '\\' */
    {0x0e, 0x02, 0x02, 0x02, 0x02, 0x02, 0x0e}, /* ']' */
    {0x04, 0x0a, 0x11, 0x00, 0x00, 0x00, 0x00}, /* '^' */
    {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x1f}, /* '_' */
    {0x08, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00}, /* '`' */
    {0x00, 0x00, 0x0e, 0x01, 0x0f, 0x11, 0x0f}, /* 'a' */
    {0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x1e}, /* 'b' */
    {0x00, 0x00, 0x0e, 0x10, 0x10, 0x11, 0x0e}, /* 'c' */
    {0x01, 0x01, 0x0d, 0x13, 0x11, 0x11, 0x0f}, /* 'd' */
    {0x00, 0x00, 0x0e, 0x11, 0x1f, 0x10, 0x0e}, /* 'e' */
    {0x06, 0x09, 0x08, 0x1c, 0x08, 0x08, 0x08}, /* 'f' */
    {0x00, 0x0f, 0x11, 0x11, 0x0f, 0x01, 0x0e}, /* 'g' */
    {0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x11}, /* 'h' */
    {0x04, 0x00, 0x0c, 0x04, 0x04, 0x04, 0x0e}, /* 'i' */
    {0x02, 0x00, 0x06, 0x02, 0x02, 0x12, 0x0c}, /* 'j' */
    {0x10, 0x10, 0x12, 0x14, 0x18, 0x14, 0x12}, /* 'k' */
    {0x0c, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0e}, /* 'l' */
    {0x00, 0x00, 0x1a, 0x15, 0x15, 0x11, 0x11}, /* 'm' */
    {0x00, 0x00, 0x16, 0x19, 0x11, 0x11, 0x11}, /* 'n' */
    {0x00, 0x00, 0x0e, 0x11, 0x11, 0x11, 0x0e}, /* 'o' */
    {0x00, 0x00, 0x1e, 0x11, 0x1e, 0x10, 0x10}, /* 'p' */
    {0x00, 0x00, 0x0d, 0x13, 0x0f, 0x01, 0x01}, /* 'q' */
    {0x00, 0x00, 0x16, 0x19, 0x10, 0x10, 0x10}, /* 'r' */
    {0x00, 0x00, 0x0e, 0x10, 0x0e, 0x01, 0x1e}, /* 's' */
    {0x08, 0x08, 0x1c, 0x08, 0x08, 0x09, 0x06}, /* 't' */
    {0x00, 0x00, 0x11, 0x11, 0x11, 0x13, 0x0d}, /* 'u' */
    {0x00, 0x00, 0x11, 0x11, 0x11, 0x0a, 0x04}, /* 'v' */
    {0x00, 0x00, 0x11, 0x11, 0x15, 0x15, 0x0a}, /* 'w' */
    {0x00, 0x00, 0x11, 0x0a, 0x04, 0x0a, 0x11}, /* 'x' */
    {0x00, 0x00, 0x11, 0x11, 0x0f, 0x01, 0x0e}, /* 'y' */
    {0x00, 0x00, 0x1f, 0x02, 0x04, 0x08, 0x1f}, /* 'z' */
    {0x02, 0x04, 0x04, 0x08, 0x04, 0x04, 0x02}, /* '{' */
    {0x04, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04}, /* '|' */
    {0x08, 0x04, 0x04, 0x02, 0x04, 0x04, 0x08}, /* '}' */
    {0x00, 0x00, 0x08, 0x15, 0x02, 0x00, 0x00}, /* '~' */
};

#define GLYPH_W 5
#define GLYPH_H 7
/* advance = glyph + 1 column of spacing */
#define GLYPH_ADV  6
#define TEXT_SCALE 2

int sim_plot_glyph(char c, uint8_t rows[7])
{
    if (c < 32 || c > 126)
        return -1;
    memcpy(rows, FONT[c - 32], 7);
    return 0;
}

uint32_t sim_plot_text_width(const char *s, uint32_t scale)
{
    size_t n = strlen(s);
    return n ? (uint32_t)(n * GLYPH_ADV - 1) * scale : 0;
}

/* ---- canvas ---- */

typedef struct rgb {
    uint8_t r, g, b;
} rgb;

typedef struct canvas {
    int w, h;
    uint8_t *px;
} canvas;

static const rgb WHITE = {255, 255, 255}, BLACK = {0, 0, 0}, GRID = {225, 225, 225},
                 GREY = {110, 110, 110};
/* population first, then agents; colour-blind-friendly where possible */
static const rgb PALETTE[SIM_PLOT_SERIES_MAX] = {
    {31, 119, 180},  {255, 127, 14}, {44, 160, 44},   {214, 39, 40},
    {148, 103, 189}, {140, 86, 75},  {227, 119, 194}, {127, 127, 127},
    {188, 189, 34},  {23, 190, 207}, {0, 0, 128},     {128, 0, 0},
};

static void put(canvas *c, int x, int y, rgb col)
{
    if (x < 0 || y < 0 || x >= c->w || y >= c->h)
        return;
    uint8_t *p = c->px + ((size_t)y * (size_t)c->w + (size_t)x) * 3;
    p[0] = col.r, p[1] = col.g, p[2] = col.b;
}

static void fill(canvas *c, int x0, int y0, int x1, int y1, rgb col)
{
    for (int y = y0; y <= y1; y++)
        for (int x = x0; x <= x1; x++)
            put(c, x, y, col);
}

/* Bresenham; thick = side of the square pen */
static void line(canvas *c, int x0, int y0, int x1, int y1, rgb col, int thick)
{
    int dx = abs(x1 - x0), sx = x0 < x1 ? 1 : -1;
    int dy = -abs(y1 - y0), sy = y0 < y1 ? 1 : -1;
    int e = dx + dy;
    for (;;) {
        fill(c, x0, y0, x0 + thick - 1, y0 + thick - 1, col);
        if (x0 == x1 && y0 == y1)
            break;
        int e2 = 2 * e;
        if (e2 >= dy)
            e += dy, x0 += sx;
        if (e2 <= dx)
            e += dx, y0 += sy;
    }
}

/* text with its top-left corner at (x, y) */
static void text(canvas *c, int x, int y, const char *s, int scale, rgb col)
{
    for (; *s; s++, x += GLYPH_ADV * scale) {
        uint8_t rows[7];
        if (sim_plot_glyph(*s, rows))
            sim_plot_glyph('?', rows);
        for (int r = 0; r < GLYPH_H; r++)
            for (int k = 0; k < GLYPH_W; k++)
                if (rows[r] & (1u << (GLYPH_W - 1 - k)))
                    fill(c, x + k * scale, y + r * scale, x + (k + 1) * scale - 1,
                         y + (r + 1) * scale - 1, col);
    }
}

/* text rotated 90 degrees counter-clockwise, read bottom to top; (x, y) is
 * the bottom-left corner of the rotated run */
static void text_up(canvas *c, int x, int y, const char *s, int scale, rgb col)
{
    for (; *s; s++, y -= GLYPH_ADV * scale) {
        uint8_t rows[7];
        if (sim_plot_glyph(*s, rows))
            sim_plot_glyph('?', rows);
        for (int r = 0; r < GLYPH_H; r++)
            for (int k = 0; k < GLYPH_W; k++)
                if (rows[r] & (1u << (GLYPH_W - 1 - k)))
                    /* glyph column k goes up, row r goes right */
                    fill(c, x + r * scale, y - (k + 1) * scale + 1, x + (r + 1) * scale - 1,
                         y - k * scale, col);
    }
}

static int text_w(const char *s)
{
    return (int)sim_plot_text_width(s, TEXT_SCALE);
}

/* ---- axes ---- */

/* 1, 2 or 5 times a power of ten, near range/target */
static double nice_step(double range, int target)
{
    double raw = range / target;
    double mag = pow(10, floor(log10(raw)));
    double f = raw / mag;
    return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
}

static void tick_label(double v, double step, double span_max, char *buf, size_t len)
{
    if (fabs(v) < step * 1e-9)
        v = 0;
    if (span_max >= 1e6 || step < 1e-4) {
        snprintf(buf, len, "%.3g", v);
    } else {
        int dec = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
        snprintf(buf, len, "%.*f", dec, v);
    }
}

static void decade_label(int k, char *buf, size_t len)
{
    if (k >= -2 && k <= 3)
        snprintf(buf, len, "%g", pow(10, k));
    else
        snprintf(buf, len, "1e%d", k);
}

typedef struct axis {
    double lo, hi; /* in plotted units (log10 for a log axis) */
    int log;
    double step; /* linear: tick step */
} axis;

static int data_range(const sim_plot *p, int want_y, int log, double *lo, double *hi)
{
    *lo = INFINITY, *hi = -INFINITY;
    for (size_t s = 0; s < p->nseries; s++)
        for (size_t i = 0; i < p->series[s].n; i++) {
            double x = p->series[s].x[i], y = p->series[s].y[i];
            if (!isfinite(x) || !isfinite(y) || (p->log_y && y <= 0))
                continue;
            double v = want_y ? y : x;
            if (log)
                v = log10(v);
            *lo = fmin(*lo, v), *hi = fmax(*hi, v);
        }
    return *lo <= *hi;
}

static void make_axis(axis *a, double lo, double hi, int log, int pad)
{
    a->log = log;
    if (log) {
        a->lo = floor(lo);
        a->hi = ceil(hi);
        if (a->hi <= a->lo)
            a->hi = a->lo + 1;
        a->step = 1;
        return;
    }
    if (hi <= lo) {
        double d = fabs(lo) > 0 ? fabs(lo) * 0.1 : 1;
        lo -= d, hi += d;
    }
    if (pad) {
        /* 5% air above and below, but never below 0 for data that is not */
        double d = (hi - lo) * 0.05;
        lo = lo >= 0 && lo - d < 0 ? 0 : lo - d;
        hi += d;
    }
    a->step = nice_step(hi - lo, 6);
    a->lo = floor(lo / a->step + 1e-9) * a->step;
    a->hi = ceil(hi / a->step - 1e-9) * a->step;
}

/* ---- the plot ---- */

typedef struct frame {
    int left, right, top, bottom;
    axis x, y;
} frame;

static int px_x(const frame *f, double v)
{
    return f->left + (int)lround((v - f->x.lo) / (f->x.hi - f->x.lo) * (f->right - f->left));
}

static int px_y(const frame *f, double v)
{
    if (f->y.log)
        v = log10(v);
    return f->bottom - (int)lround((v - f->y.lo) / (f->y.hi - f->y.lo) * (f->bottom - f->top));
}

static void draw_axes(canvas *c, const frame *f, const sim_plot *p)
{
    const int S = TEXT_SCALE, th = GLYPH_H * S;
    char buf[48];
    double xmax = fmax(fabs(f->x.lo), fabs(f->x.hi));
    for (double v = f->x.lo; v <= f->x.hi + f->x.step * 1e-6; v += f->x.step) {
        int x = px_x(f, v);
        line(c, x, f->top, x, f->bottom, GRID, 1);
        line(c, x, f->bottom, x, f->bottom + 6, BLACK, 1);
        tick_label(v, f->x.step, xmax, buf, sizeof buf);
        text(c, x - text_w(buf) / 2, f->bottom + 10, buf, S, BLACK);
    }
    if (f->y.log) {
        int decades = (int)(f->y.hi - f->y.lo);
        int every = decades > 8 ? (decades + 7) / 8 : 1;
        for (int k = (int)f->y.lo; k <= (int)f->y.hi; k++) {
            int y = px_y(f, pow(10, k));
            line(c, f->left, y, f->right, y, GRID, 1);
            line(c, f->left - 6, y, f->left, y, BLACK, 1);
            if ((k - (int)f->y.lo) % every == 0) {
                decade_label(k, buf, sizeof buf);
                text(c, f->left - 10 - text_w(buf), y - th / 2, buf, S, BLACK);
            }
            if (decades <= 6 && k < (int)f->y.hi)
                for (int m = 2; m <= 9; m++) {
                    int ym = px_y(f, m * pow(10, k));
                    line(c, f->left - 3, ym, f->left, ym, BLACK, 1);
                }
        }
    } else {
        double ymax = fmax(fabs(f->y.lo), fabs(f->y.hi));
        for (double v = f->y.lo; v <= f->y.hi + f->y.step * 1e-6; v += f->y.step) {
            int y = px_y(f, v);
            line(c, f->left, y, f->right, y, GRID, 1);
            line(c, f->left - 6, y, f->left, y, BLACK, 1);
            tick_label(v, f->y.step, ymax, buf, sizeof buf);
            text(c, f->left - 10 - text_w(buf), y - th / 2, buf, S, BLACK);
        }
    }
    /* frame on top of the grid */
    line(c, f->left, f->top, f->right, f->top, BLACK, 1);
    line(c, f->left, f->bottom, f->right, f->bottom, BLACK, 1);
    line(c, f->left, f->top, f->left, f->bottom, BLACK, 1);
    line(c, f->right, f->top, f->right, f->bottom, BLACK, 1);
    if (p->xlabel)
        text(c, (f->left + f->right - text_w(p->xlabel)) / 2, f->bottom + 14 + th, p->xlabel, S,
             BLACK);
    if (p->ylabel)
        text_up(c, 10, (f->top + f->bottom + text_w(p->ylabel)) / 2, p->ylabel, S, BLACK);
    if (p->title)
        text(c, (c->w - text_w(p->title)) / 2, 12, p->title, S, BLACK);
}

static void draw_series(canvas *c, const frame *f, const sim_plot *p)
{
    /* in reverse, so the first series (the population) ends up on top */
    for (size_t s = p->nseries; s-- > 0;) {
        const sim_plot_series *ser = &p->series[s];
        int have = 0, lx = 0, ly = 0;
        for (size_t i = 0; i < ser->n; i++) {
            double x = ser->x[i], y = ser->y[i];
            if (!isfinite(x) || !isfinite(y) || (f->y.log && y <= 0)) {
                have = 0;
                continue;
            }
            int X = px_x(f, x), Y = px_y(f, y);
            if (have)
                line(c, lx, ly, X, Y, PALETTE[s], 2);
            else
                fill(c, X, Y, X + 1, Y + 1, PALETTE[s]);
            have = 1, lx = X, ly = Y;
        }
    }
}

static int drawable(const frame *f, const sim_plot_series *ser)
{
    for (size_t i = 0; i < ser->n; i++)
        if (isfinite(ser->x[i]) && isfinite(ser->y[i]) && (!f->y.log || ser->y[i] > 0))
            return 1;
    return 0;
}

static void draw_legend(canvas *c, const frame *f, const sim_plot *p)
{
    const int S = TEXT_SCALE, th = GLYPH_H * S, row = th + 8;
    int wmax = 0, n = 0;
    for (size_t s = 0; s < p->nseries; s++)
        if (p->series[s].name && drawable(f, &p->series[s])) {
            int w = text_w(p->series[s].name);
            wmax = w > wmax ? w : wmax;
            n++;
        }
    if (!n)
        return;
    int bw = wmax + 46, bh = n * row + 8;
    /* the corner that hides the fewest drawn data pixels (series are
     * drawn first); ties go to top right, top left, bottom right, bottom left */
    int cx[4] = {f->right - bw - 10, f->left + 10, f->right - bw - 10, f->left + 10};
    int cy[4] = {f->top + 10, f->top + 10, f->bottom - bh - 10, f->bottom - bh - 10};
    size_t best = SIZE_MAX;
    int x0 = cx[0], y0 = cy[0];
    for (int k = 0; k < 4; k++) {
        size_t ink = 0;
        for (int y = cy[k]; y <= cy[k] + bh; y++)
            for (int x = cx[k]; x <= cx[k] + bw; x++) {
                if (x < 0 || y < 0 || x >= c->w || y >= c->h)
                    continue;
                const uint8_t *q = c->px + ((size_t)y * (size_t)c->w + (size_t)x) * 3;
                int bg = (q[0] == WHITE.r && q[1] == WHITE.g && q[2] == WHITE.b) ||
                         (q[0] == GRID.r && q[1] == GRID.g && q[2] == GRID.b);
                ink += !bg;
            }
        if (ink < best)
            best = ink, x0 = cx[k], y0 = cy[k];
    }
    fill(c, x0, y0, x0 + bw, y0 + bh, WHITE);
    line(c, x0, y0, x0 + bw, y0, GREY, 1);
    line(c, x0, y0 + bh, x0 + bw, y0 + bh, GREY, 1);
    line(c, x0, y0, x0, y0 + bh, GREY, 1);
    line(c, x0 + bw, y0, x0 + bw, y0 + bh, GREY, 1);
    int y = y0 + 6;
    for (size_t s = 0; s < p->nseries; s++) {
        if (!p->series[s].name || !drawable(f, &p->series[s]))
            continue;
        line(c, x0 + 8, y + th / 2, x0 + 34, y + th / 2, PALETTE[s], 3);
        text(c, x0 + 40, y, p->series[s].name, S, BLACK);
        y += row;
    }
}

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static int write_png(const canvas *c, const char *path, char *err, size_t errlen)
{
    FILE *fp = fopen(path, "wb");
    if (!fp) {
        set_err(err, errlen, "cannot create %s: %s", path, strerror(errno));
        return SIM_PLOT_EIO;
    }
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!png || !info) {
        png_destroy_write_struct(&png, &info);
        fclose(fp);
        set_err(err, errlen, "%s: out of memory", path);
        return SIM_PLOT_ENOMEM;
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        fclose(fp);
        set_err(err, errlen, "write error on %s", path);
        return SIM_PLOT_EIO;
    }
    png_init_io(png, fp);
    png_set_IHDR(png, info, (png_uint_32)c->w, (png_uint_32)c->h, 8, PNG_COLOR_TYPE_RGB,
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int y = 0; y < c->h; y++)
        png_write_row(png, c->px + (size_t)y * (size_t)c->w * 3);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    if (fclose(fp)) {
        set_err(err, errlen, "write error on %s", path);
        return SIM_PLOT_EIO;
    }
    return SIM_PLOT_OK;
}

int sim_plot_png(const sim_plot *p, const char *path, char *err, size_t errlen)
{
    uint32_t w = p->width ? p->width : SIM_PLOT_WIDTH, h = p->height ? p->height : SIM_PLOT_HEIGHT;
    if (w < SIM_PLOT_SIDE_MIN || h < SIM_PLOT_SIDE_MIN || w > SIM_PLOT_SIDE_MAX ||
        h > SIM_PLOT_SIDE_MAX || p->nseries > SIM_PLOT_SERIES_MAX) {
        set_err(err, errlen, "%s: plot of %ux%u with %zu series (sides %u..%u, at most %u series)",
                path, w, h, p->nseries, SIM_PLOT_SIDE_MIN, SIM_PLOT_SIDE_MAX, SIM_PLOT_SERIES_MAX);
        return SIM_PLOT_EINVAL;
    }
    canvas c = {(int)w, (int)h, malloc((size_t)w * h * 3)};
    if (!c.px) {
        set_err(err, errlen, "%s: out of memory", path);
        return SIM_PLOT_ENOMEM;
    }
    memset(c.px, 255, (size_t)w * h * 3);
    double xlo, xhi, ylo, yhi;
    int have = data_range(p, 0, 0, &xlo, &xhi) && data_range(p, 1, p->log_y, &ylo, &yhi);
    if (!have) {
        xlo = 0, xhi = 1;
        ylo = p->log_y ? -1 : 0;
        yhi = p->log_y ? 0 : 1;
    }
    frame f;
    make_axis(&f.x, xlo, xhi, 0, 0);
    make_axis(&f.y, ylo, yhi, p->log_y, 1);
    /* left margin: rotated y label, the widest tick label, tick marks */
    int th = GLYPH_H * TEXT_SCALE, lw = 0;
    char buf[48];
    if (f.y.log) {
        for (int k = (int)f.y.lo; k <= (int)f.y.hi; k++) {
            decade_label(k, buf, sizeof buf);
            lw = text_w(buf) > lw ? text_w(buf) : lw;
        }
    } else {
        double ymax = fmax(fabs(f.y.lo), fabs(f.y.hi));
        for (double v = f.y.lo; v <= f.y.hi + f.y.step * 1e-6; v += f.y.step) {
            tick_label(v, f.y.step, ymax, buf, sizeof buf);
            lw = text_w(buf) > lw ? text_w(buf) : lw;
        }
    }
    f.left = 10 + th + 14 + lw + 12;
    f.right = (int)w - 30;
    f.top = 12 + th + 18;
    f.bottom = (int)h - (10 + th + 14 + th + 12);
    draw_axes(&c, &f, p);
    if (have) {
        draw_series(&c, &f, p);
        draw_legend(&c, &f, p);
    } else {
        const char *msg = "no data";
        text(&c, (f.left + f.right - text_w(msg)) / 2, (f.top + f.bottom - th) / 2, msg, TEXT_SCALE,
             GREY);
    }
    int rc = write_png(&c, path, err, errlen);
    free(c.px);
    return rc;
}

/* ---- plots of a run directory ---- */

enum { COL_T, COL_ROUND, COL_LOSS, COL_ACC, COL_CD, COL_BYTES, NCOLS };

typedef struct colset {
    long long agent; /* -1 = all */
    size_t n, cap;
    double *v[NCOLS];
} colset;

static int colset_push(colset *s, const double row[NCOLS])
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        for (int k = 0; k < NCOLS; k++) {
            double *p = realloc(s->v[k], cap * sizeof *p);
            if (!p)
                return SIM_PLOT_ENOMEM;
            s->v[k] = p;
        }
        s->cap = cap;
    }
    for (int k = 0; k < NCOLS; k++)
        s->v[k][s->n] = row[k];
    s->n++;
    return SIM_PLOT_OK;
}

static int field_double(const char *s, double *out)
{
    if (!*s) {
        *out = NAN;
        return 0;
    }
    char *end;
    *out = strtod(s, &end);
    return *end ? -1 : 0;
}

/* split a series.csv row into its 8 fields (in place) */
static int split8(char *line, char *f[8])
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

static int read_series(const char *path, colset *sets, size_t *nsets, char *err, size_t errlen)
{
    FILE *fp = fopen(path, "r");
    if (!fp) {
        set_err(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return SIM_PLOT_EIO;
    }
    char line[SIM_PLOT_CSV_LINE_MAX];
    unsigned lineno = 0;
    int rc = SIM_PLOT_OK;
    while (rc == 0 && fgets(line, sizeof line, fp)) {
        lineno++;
        size_t len = strlen(line);
        if (len && line[len - 1] == '\n')
            line[--len] = 0;
        else if (!feof(fp)) {
            set_err(err, errlen, "%s:%u: line longer than %u characters", path, lineno,
                    SIM_PLOT_CSV_LINE_MAX - 1);
            rc = SIM_PLOT_EPARSE;
            break;
        }
        if (lineno == 1) {
            if (strcmp(line, SIM_SERIES_HEADER)) {
                set_err(err, errlen, "%s:1: header is not '%s'", path, SIM_SERIES_HEADER);
                rc = SIM_PLOT_EPARSE;
            }
            continue;
        }
        char *f[8];
        double row[NCOLS], dummy;
        long long agent = -1;
        if (split8(line, f) || field_double(f[0], &row[COL_T]) ||
            field_double(f[1], &row[COL_ROUND]) || field_double(f[3], &row[COL_LOSS]) ||
            field_double(f[4], &row[COL_ACC]) || field_double(f[5], &row[COL_CD]) ||
            field_double(f[6], &row[COL_BYTES]) || field_double(f[7], &dummy) ||
            (strcmp(f[2], "all") && sscanf(f[2], "%lld", &agent) != 1) ||
            (strcmp(f[2], "all") && agent < 0)) {
            set_err(err, errlen, "%s:%u: not a series row (%s)", path, lineno, SIM_SERIES_HEADER);
            rc = SIM_PLOT_EPARSE;
            break;
        }
        size_t k = 0;
        while (k < *nsets && sets[k].agent != agent)
            k++;
        if (k == *nsets) {
            if (*nsets == SIM_PLOT_AGENT_LINES + 1)
                continue; /* only the first few agents are drawn */
            sets[k].agent = agent;
            (*nsets)++;
        }
        rc = colset_push(&sets[k], row);
        if (rc)
            set_err(err, errlen, "%s: out of memory", path);
    }
    if (rc == 0 && lineno == 0) {
        set_err(err, errlen, "%s: empty (no header)", path);
        rc = SIM_PLOT_EPARSE;
    }
    fclose(fp);
    return rc;
}

int sim_plot_dir(const char *dir, char *err, size_t errlen)
{
    char path[SIM_OUTPUT_PATH_MAX];
    if (snprintf(path, sizeof path, "%s/series.csv", dir) >= (int)sizeof path) {
        set_err(err, errlen, "%s: path too long", dir);
        return SIM_PLOT_EIO;
    }
    colset sets[SIM_PLOT_AGENT_LINES + 1];
    memset(sets, 0, sizeof sets);
    size_t nsets = 0;
    int rc = read_series(path, sets, &nsets, err, errlen);
    /* the population first: it gets the first colour and legend line */
    for (size_t k = 1; rc == 0 && k < nsets; k++)
        if (sets[k].agent == -1) {
            colset t = sets[0];
            sets[0] = sets[k];
            sets[k] = t;
        }
    double bmax = 0;
    for (size_t k = 0; k < nsets; k++)
        for (size_t i = 0; i < sets[k].n; i++)
            if (isfinite(sets[k].v[COL_BYTES][i]))
                bmax = fmax(bmax, sets[k].v[COL_BYTES][i]);
    const char *unit = "B";
    double div = 1;
    if (bmax >= 1e9)
        unit = "GB", div = 1e9;
    else if (bmax >= 1e6)
        unit = "MB", div = 1e6;
    else if (bmax >= 1e3)
        unit = "KB", div = 1e3;
    for (size_t k = 0; k < nsets; k++)
        for (size_t i = 0; i < sets[k].n; i++)
            sets[k].v[COL_BYTES][i] /= div;
    char bytes_label[32];
    snprintf(bytes_label, sizeof bytes_label, "bytes sent (%s)", unit);
    static const struct {
        const char *file, *title, *xlabel, *ylabel;
        int x, y, log_y;
    } plots[] = {
        {"accuracy_vs_time.png", "Accuracy vs time", "time (s)", "accuracy", COL_T, COL_ACC, 0},
        {"loss_vs_time.png", "Loss vs time", "time (s)", "loss", COL_T, COL_LOSS, 0},
        {"consensus_vs_round.png", "Consensus distance vs round", "round", "consensus distance",
         COL_ROUND, COL_CD, 1},
        {"bytes_vs_time.png", "Bytes sent vs time", "time (s)", NULL, COL_T, COL_BYTES, 0},
    };
    char names[SIM_PLOT_AGENT_LINES + 1][32];
    for (size_t pi = 0; rc == 0 && pi < sizeof plots / sizeof plots[0]; pi++) {
        sim_plot_series ser[SIM_PLOT_AGENT_LINES + 1];
        for (size_t k = 0; k < nsets; k++) {
            if (sets[k].agent == -1)
                snprintf(names[k], sizeof names[k], "all agents");
            else
                snprintf(names[k], sizeof names[k], "agent %lld", sets[k].agent);
            ser[k] = (sim_plot_series){names[k], sets[k].v[plots[pi].x], sets[k].v[plots[pi].y],
                                       sets[k].n};
        }
        sim_plot p = {plots[pi].title,
                      plots[pi].xlabel,
                      plots[pi].ylabel ? plots[pi].ylabel : bytes_label,
                      plots[pi].log_y,
                      ser,
                      nsets,
                      0,
                      0};
        snprintf(path, sizeof path, "%s/%s", dir, plots[pi].file);
        rc = sim_plot_png(&p, path, err, errlen);
    }
    for (size_t k = 0; k < SIM_PLOT_AGENT_LINES + 1; k++)
        for (int c = 0; c < NCOLS; c++)
            free(sets[k].v[c]);
    return rc;
}
