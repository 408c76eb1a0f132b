/* model/layers and cnn nets.
 *
 * Layers: every layer's forward against a naive double-precision reference
 * written here from the documented layout (NHWC, weights (co, ky, kx,
 * ci)), and every backward against central differences of that reference.
 * The scalar differentiated is L = sum_j r_j y_j for a random r, so
 * dL/dy = r is what backward receives.
 *
 * Nets: the spec grammar (parameter counts, shapes, rejected specs), the
 * whole net's loss and gradient against the same references chained in
 * double, dropout, learning and determinism. */
#include "tests/harness.h"

#include <cblas.h>
#undef I /* <complex.h>, through OpenBLAS's cblas.h; I is a shape here */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/blas.h"
#include "model/layers.h"
#include "model/net.h"
#include "model/optim.h"
#include "model/spec.h"

/* ---- the layer under test, as a table entry ---- */

typedef enum { K_CONV, K_MAXPOOL, K_AVGPOOL, K_GN, K_RELU, K_DENSE, K_DROPOUT } kind;

typedef struct lcase {
    const char *name;
    kind k;
    uint32_t n;
    model_conv cv; /* conv; pools use cv.in/out/k/stride */
    uint32_t groups, din, dout;
    int bias, relu;
    /* derived */
    size_t nx, nw, nb, ny;
    float *mask; /* dropout: the mask the forward drew */
} lcase;

static void lcase_sizes(lcase *c)
{
    size_t in = model_shape_size(c->cv.in), out = model_shape_size(c->cv.out);
    c->nw = c->nb = 0;
    switch (c->k) {
    case K_CONV:
        c->nw = (size_t)c->cv.out.c * c->cv.k * c->cv.k * c->cv.in.c;
        c->nb = c->bias ? c->cv.out.c : 0;
        break;
    case K_GN:
        out = in;
        c->nw = c->nb = c->cv.in.c;
        break;
    case K_RELU:
    case K_DROPOUT:
        out = in;
        break;
    case K_DENSE:
        in = c->din;
        out = c->dout;
        c->nw = (size_t)c->din * c->dout;
        c->nb = c->dout;
        break;
    default:
        break;
    }
    c->nx = c->n * in;
    c->ny = c->n * out;
}

static size_t at(model_shape s, uint32_t i, uint32_t y, uint32_t x, uint32_t ch)
{
    return (((size_t)i * s.h + y) * s.w + x) * s.c + ch;
}

/* FNV-1a step: the pattern of ReLU signs and pooling choices, so that a
 * perturbation crossing a kink is recognised and skipped. */
static void mix(uint64_t *h, uint64_t v)
{
    *h = (*h ^ v) * 1099511628211ull;
}

static double relu_ref(double v, int on, uint64_t *pat)
{
    if (!on)
        return v;
    mix(pat, v > 0);
    return v > 0 ? v : 0;
}

/* y = layer(x, w, b) in double. */
static void ref(const lcase *c, const double *x, const double *w, const double *b, double *y,
                uint64_t *pat)
{
    const model_conv *cv = &c->cv;
    const model_shape I = cv->in, O = cv->out;
    *pat = 1469598103934665603ull;
    switch (c->k) {
    case K_CONV:
        for (uint32_t i = 0; i < c->n; i++)
            for (uint32_t oy = 0; oy < O.h; oy++)
                for (uint32_t ox = 0; ox < O.w; ox++)
                    for (uint32_t co = 0; co < O.c; co++) {
                        double s = c->bias ? b[co] : 0;
                        for (uint32_t ky = 0; ky < cv->k; ky++)
                            for (uint32_t kx = 0; kx < cv->k; kx++) {
                                long iy = (long)(oy * cv->stride + ky) - cv->pad;
                                long ix = (long)(ox * cv->stride + kx) - cv->pad;
                                if (iy < 0 || ix < 0 || iy >= I.h || ix >= I.w)
                                    continue;
                                for (uint32_t ci = 0; ci < I.c; ci++)
                                    s += w[(((size_t)co * cv->k + ky) * cv->k + kx) * I.c + ci] *
                                         x[at(I, i, (uint32_t)iy, (uint32_t)ix, ci)];
                            }
                        y[at(O, i, oy, ox, co)] = relu_ref(s, c->relu, pat);
                    }
        break;
    case K_MAXPOOL:
    case K_AVGPOOL:
        for (uint32_t i = 0; i < c->n; i++)
            for (uint32_t oy = 0; oy < O.h; oy++)
                for (uint32_t ox = 0; ox < O.w; ox++)
                    for (uint32_t ch = 0; ch < O.c; ch++) {
                        double m = -INFINITY, s = 0;
                        uint32_t arg = 0;
                        for (uint32_t ky = 0; ky < cv->k; ky++)
                            for (uint32_t kx = 0; kx < cv->k; kx++) {
                                double v =
                                    x[at(I, i, oy * cv->stride + ky, ox * cv->stride + kx, ch)];
                                s += v;
                                if (v > m) {
                                    m = v;
                                    arg = ky * cv->k + kx;
                                }
                            }
                        if (c->k == K_MAXPOOL) {
                            mix(pat, arg);
                            y[at(O, i, oy, ox, ch)] = relu_ref(m, c->relu, pat);
                        } else
                            y[at(O, i, oy, ox, ch)] = s / (cv->k * cv->k);
                    }
        break;
    case K_GN: {
        uint32_t cg = I.c / c->groups;
        for (uint32_t i = 0; i < c->n; i++)
            for (uint32_t g = 0; g < c->groups; g++) {
                double s = 0, q = 0, cnt = (double)I.h * I.w * cg;
                for (uint32_t yy = 0; yy < I.h; yy++)
                    for (uint32_t xx = 0; xx < I.w; xx++)
                        for (uint32_t ch = g * cg; ch < (g + 1) * cg; ch++)
                            s += x[at(I, i, yy, xx, ch)];
                double mean = s / cnt;
                for (uint32_t yy = 0; yy < I.h; yy++)
                    for (uint32_t xx = 0; xx < I.w; xx++)
                        for (uint32_t ch = g * cg; ch < (g + 1) * cg; ch++) {
                            double d = x[at(I, i, yy, xx, ch)] - mean;
                            q += d * d;
                        }
                double rstd = 1 / sqrt(q / cnt + MODEL_GN_EPS);
                for (uint32_t yy = 0; yy < I.h; yy++)
                    for (uint32_t xx = 0; xx < I.w; xx++)
                        for (uint32_t ch = g * cg; ch < (g + 1) * cg; ch++) {
                            size_t j = at(I, i, yy, xx, ch);
                            y[j] = relu_ref((x[j] - mean) * rstd * w[ch] + b[ch], c->relu, pat);
                        }
            }
        break;
    }
    case K_RELU:
        for (size_t j = 0; j < c->nx; j++)
            y[j] = relu_ref(x[j], 1, pat);
        break;
    case K_DROPOUT:
        for (size_t j = 0; j < c->nx; j++)
            y[j] = x[j] * c->mask[j];
        break;
    case K_DENSE:
        for (uint32_t i = 0; i < c->n; i++)
            for (uint32_t o = 0; o < c->dout; o++) {
                double s = b[o];
                for (uint32_t j = 0; j < c->din; j++)
                    s += w[(size_t)o * c->din + j] * x[(size_t)i * c->din + j];
                y[(size_t)i * c->dout + o] = relu_ref(s, c->relu, pat);
            }
        break;
    }
}

static double ref_l(const lcase *c, const double *x, const double *w, const double *b,
                    const float *r, double *y, uint64_t *pat)
{
    ref(c, x, w, b, y, pat);
    double l = 0;
    for (size_t j = 0; j < c->ny; j++)
        l += r[j] * y[j];
    return l;
}

/* The kernels: forward into y, then backward with dy = r. */
static void run(lcase *c, const float *x, const float *w, const float *b, float *y, float *dy,
                float *dx, float *dw, float *db, model_rng *rng)
{
    const model_pool pl = {.in = c->cv.in, .out = c->cv.out, .k = c->cv.k, .stride = c->cv.stride};
    float *scratch = NULL, *saved = NULL;
    uint32_t *arg = NULL;
    float *stats = NULL;
    float *ones = NULL;
    switch (c->k) {
    case K_CONV:
        scratch = malloc((model_conv_scratch_floats(&c->cv, c->n) + 1) * sizeof *scratch);
        saved = malloc((model_conv_saved_floats(&c->cv, c->n) + 1) * sizeof *saved);
        model_conv_forward(&c->cv, x, c->n, w, c->bias ? b : NULL, c->relu, y, saved, scratch);
        if (c->relu)
            model_relu_backward(y, dy, c->ny, dy);
        model_conv_backward(&c->cv, x, c->n, w, dy, dw, c->bias ? db : NULL, dx, saved, scratch);
        break;
    case K_MAXPOOL:
        arg = malloc(c->ny * sizeof *arg);
        model_maxpool_forward(&pl, x, c->n, c->relu, y, arg);
        if (c->relu)
            model_relu_backward(y, dy, c->ny, dy);
        model_maxpool_backward(&pl, c->n, dy, arg, dx);
        break;
    case K_AVGPOOL:
        model_avgpool_forward(&pl, x, c->n, y);
        model_avgpool_backward(&pl, c->n, dy, dx);
        break;
    case K_GN:
        stats = malloc(model_groupnorm_stats_floats(c->cv.in, c->groups, c->n) * sizeof *stats);
        model_groupnorm_forward(c->cv.in, c->groups, x, c->n, w, b, c->relu, y, stats);
        if (c->relu)
            model_relu_backward(y, dy, c->ny, dy);
        model_groupnorm_backward(c->cv.in, c->groups, x, c->n, w, stats, dy, dw, db, dx);
        break;
    case K_RELU:
        model_relu_forward(x, c->nx, y);
        model_relu_backward(y, dy, c->nx, dx);
        break;
    case K_DROPOUT:
        model_dropout_forward(x, c->nx, 0.3f, rng, y, c->mask);
        model_dropout_backward(dy, c->mask, c->nx, dx);
        break;
    case K_DENSE:
        ones = malloc(c->n * sizeof *ones);
        for (uint32_t i = 0; i < c->n; i++)
            ones[i] = 1;
        model_dense_forward(c->din, c->dout, x, c->n, w, b, c->relu, y);
        if (c->relu)
            model_relu_backward(y, dy, c->ny, dy);
        model_dense_backward(c->din, c->dout, x, c->n, w, dy, ones, dw, db, dx);
        break;
    }
    free(scratch);
    free(saved);
    free(arg);
    free(stats);
    free(ones);
}

static void fill(float *v, size_t n, model_rng *r, double sd)
{
    for (size_t i = 0; i < n; i++)
        v[i] = (float)(sd * model_rng_normal(r));
}

/* Relative error of an analytic float gradient against a numerical one.
 * scale is the largest analytic value of the set: float32 sums (sgemm,
 * and more so Winograd's transforms, whose error is relative to the
 * largest terms) carry an absolute error of ~1e-6 of it. */
static double rel_err(double num, double ana, double scale)
{
    return fabs(num - ana) / (1e-4 + fabs(num) + fabs(ana) + 0.02 * scale);
}

static double max_abs(const float *v, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs(v[i]));
    return m;
}

/* Forward against the reference; every input and parameter gradient
 * against central differences of the reference. */
static void check(lcase *c, uint64_t seed)
{
    lcase_sizes(c);
    model_rng r;
    model_rng_seed(&r, seed, 0);
    size_t np = c->nw + c->nb;
    float *x = malloc(c->nx * sizeof *x), *p = malloc((np + 1) * sizeof *p);
    float *y = malloc(c->ny * sizeof *y), *rr = malloc(c->ny * sizeof *rr);
    float *dy = malloc(c->ny * sizeof *dy), *dx = malloc(c->nx * sizeof *dx);
    float *dp = malloc((np + 1) * sizeof *dp);
    double *xd = malloc(c->nx * sizeof *xd), *pd = malloc((np + 1) * sizeof *pd);
    double *yd = malloc(c->ny * sizeof *yd);
    c->mask = malloc(c->nx * sizeof *c->mask);
    fill(x, c->nx, &r, 1.0);
    fill(p, np, &r, 0.5);
    if (c->k == K_GN)
        for (size_t i = 0; i < c->nw; i++)
            p[i] += 1.0f; /* gamma around 1 */
    fill(rr, c->ny, &r, 1.0);
    memcpy(dy, rr, c->ny * sizeof *dy);
    run(c, x, p, p + c->nw, y, dy, dx, dp, dp + c->nw, &r);
    for (size_t i = 0; i < c->nx; i++)
        xd[i] = x[i];
    for (size_t i = 0; i < np; i++)
        pd[i] = p[i];
    uint64_t pat0, pp, pm;
    ref_l(c, xd, pd, pd + c->nw, rr, yd, &pat0);
    for (size_t j = 0; j < c->ny; j++)
        if (fabs(y[j] - yd[j]) > 1e-4 * (1 + fabs(yd[j])))
            fail_msg("%s seed %llu: y[%zu] = %g, reference %g", c->name, (unsigned long long)seed,
                     j, y[j], yd[j]);
    const double eps = 1e-6;
    const double sx = max_abs(dx, c->nx), sp = max_abs(dp, np);
    size_t bad = 0, kinks = 0, total = c->nx + np;
    double worst = 0;
    for (size_t v = 0; v < total; v++) {
        double *t = v < c->nx ? &xd[v] : &pd[v - c->nx];
        double keep = *t;
        *t = keep + eps;
        double lp = ref_l(c, xd, pd, pd + c->nw, rr, yd, &pp);
        *t = keep - eps;
        double lm = ref_l(c, xd, pd, pd + c->nw, rr, yd, &pm);
        *t = keep;
        if (pp != pat0 || pm != pat0) {
            kinks++;
            continue;
        }
        double num = (lp - lm) / (2 * eps);
        double ana = v < c->nx ? dx[v] : dp[v - c->nx];
        double e = rel_err(num, ana, v < c->nx ? sx : sp);
        worst = e > worst ? e : worst;
        if (e > 1e-3 && bad++ < 3)
            printf("# %s: %s %zu: numerical %g, analytic %g\n", c->name,
                   v < c->nx ? "input" : "param", v < c->nx ? v : v - c->nx, num, ana);
    }
    if (bad || kinks > total / 20)
        fail_msg("%s seed %llu: %zu of %zu gradients off (worst relative error %g), %zu kinks",
                 c->name, (unsigned long long)seed, bad, total, worst, kinks);
    free(x);
    free(p);
    free(y);
    free(rr);
    free(dy);
    free(dx);
    free(dp);
    free(xd);
    free(pd);
    free(yd);
    free(c->mask);
}

static model_conv conv_algo(uint32_t h, uint32_t w, uint32_t cin, uint32_t cout, uint32_t k,
                            uint32_t stride, uint32_t pad, model_conv_algo algo)
{
    model_conv cv;
    model_conv_plan(&cv, (model_shape){h, w, cin}, cout, k, stride, pad, algo);
    return cv;
}

static model_conv conv(uint32_t h, uint32_t w, uint32_t cin, uint32_t cout, uint32_t k,
                       uint32_t stride, uint32_t pad)
{
    return conv_algo(h, w, cin, cout, k, stride, pad, MODEL_CONV_IM2COL);
}

static model_conv wino(uint32_t h, uint32_t w, uint32_t cin, uint32_t cout, uint32_t k,
                       uint32_t pad)
{
    model_conv cv = conv_algo(h, w, cin, cout, k, 1, pad, MODEL_CONV_WINOGRAD);
    assert_true(cv.wino.m > 0);
    return cv;
}

static model_conv pool(uint32_t h, uint32_t w, uint32_t c, uint32_t k, uint32_t stride)
{
    model_conv cv = {.in = {h, w, c}, .k = k, .stride = stride};
    cv.out = (model_shape){(h - k) / stride + 1, (w - k) / stride + 1, c};
    return cv;
}

static void conv_gradients(void **state)
{
    (void)state;
    uint64_t seed = test_seed(31);
    lcase cases[] = {
        {"conv 3x3 same, bias, relu", K_CONV, 2, .cv = conv(5, 6, 3, 4, 3, 1, 1), .bias = 1,
         .relu = 1},
        {"conv 3x3 stride 2 valid, no bias", K_CONV, 2, .cv = conv(7, 7, 2, 3, 3, 2, 0)},
        {"conv 5x5 same on 1 channel", K_CONV, 3, .cv = conv(4, 5, 1, 2, 5, 1, 2), .bias = 1},
        {"conv 4x4 stride 3 pad 2", K_CONV, 1, .cv = conv(8, 6, 2, 3, 4, 3, 2), .bias = 1,
         .relu = 1},
        {"conv 1x1 (pointwise)", K_CONV, 2, .cv = conv(3, 4, 5, 3, 1, 1, 0), .bias = 1},
        {"conv 1x1 stride 2", K_CONV, 1, .cv = conv(5, 5, 2, 3, 1, 2, 0), .bias = 1},
        /* Winograd: tiles cropped at the right and bottom edges (7 is not
         * a multiple of 4 or 2), padding 0, 1, 2, more than one tile row */
        {"winograd F(4,3) same, bias, relu", K_CONV, 2, .cv = wino(7, 6, 3, 4, 3, 1), .bias = 1,
         .relu = 1},
        {"winograd F(4,3) valid", K_CONV, 1, .cv = wino(9, 7, 2, 3, 3, 0)},
        {"winograd F(2,5) same", K_CONV, 2, .cv = wino(7, 5, 3, 2, 5, 2), .bias = 1},
        {"winograd F(2,5) pad 1", K_CONV, 1, .cv = wino(6, 8, 2, 3, 5, 1), .relu = 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check(&cases[i], seed + i);
}

static void pool_gradients(void **state)
{
    (void)state;
    uint64_t seed = test_seed(32);
    lcase cases[] = {
        {"maxpool 2 (odd width: a column outside every window)", K_MAXPOOL, 2,
         .cv = pool(6, 5, 3, 2, 2)},
        {"maxpool 2 tiling the input (dx written window by window)", K_MAXPOOL, 2,
         .cv = pool(6, 4, 5, 2, 2)},
        {"maxpool 3 stride 2 (overlapping), relu", K_MAXPOOL, 2, .cv = pool(7, 7, 2, 3, 2),
         .relu = 1},
        {"avgpool 2", K_AVGPOOL, 2, .cv = pool(4, 6, 3, 2, 2)},
        {"avgpool 3 stride 1", K_AVGPOOL, 1, .cv = pool(5, 4, 2, 3, 1)},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check(&cases[i], seed + i);
}

static void groupnorm_gradients(void **state)
{
    (void)state;
    uint64_t seed = test_seed(33);
    lcase cases[] = {
        {"groupnorm 2 groups", K_GN, 2, .cv = pool(3, 4, 6, 1, 1), .groups = 2},
        {"groupnorm 1 group (layer norm), relu", K_GN, 2, .cv = pool(3, 3, 4, 1, 1), .groups = 1,
         .relu = 1},
        {"groupnorm C groups (instance norm)", K_GN, 1, .cv = pool(4, 3, 3, 1, 1), .groups = 3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check(&cases[i], seed + i);
}

static void elementwise_and_dense_gradients(void **state)
{
    (void)state;
    uint64_t seed = test_seed(34);
    lcase cases[] = {
        {"relu", K_RELU, 3, .cv = pool(2, 3, 4, 1, 1)},
        {"dropout", K_DROPOUT, 3, .cv = pool(2, 3, 4, 1, 1)},
        {"dense", K_DENSE, 3, .din = 7, .dout = 4},
        {"dense relu", K_DENSE, 2, .din = 5, .dout = 6, .relu = 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check(&cases[i], seed + i);
}

/* Softmax cross-entropy: the loss against the double formula, dz against
 * central differences of it. */
static void softmax_xent_gradient(void **state)
{
    (void)state;
    enum { N = 4, C = 5 };
    model_rng r;
    model_rng_seed(&r, test_seed(35), 0);
    float z[N * C], p[N * C], dz[N * C];
    uint16_t y[N];
    fill(z, N * C, &r, 2.0);
    for (int i = 0; i < N; i++)
        y[i] = (uint16_t)model_rng_below(&r, C);
    memcpy(p, z, sizeof z);
    model_softmax(p, N, C);
    double loss = model_xent_backward(p, y, N, C, dz);
    double zd[N * C];
    for (int j = 0; j < N * C; j++)
        zd[j] = z[j];
    double want = 0;
    for (int v = -1; v < N * C; v++) {
        double l[2];
        for (int side = 0; side < 2; side++) {
            double keep = v >= 0 ? zd[v] : 0;
            if (v >= 0)
                zd[v] = keep + (side ? -1e-6 : 1e-6);
            l[side] = 0;
            for (int i = 0; i < N; i++) {
                double mx = -INFINITY, s = 0;
                for (int c = 0; c < C; c++)
                    mx = zd[i * C + c] > mx ? zd[i * C + c] : mx;
                for (int c = 0; c < C; c++)
                    s += exp(zd[i * C + c] - mx);
                l[side] += (log(s) + mx - zd[i * C + y[i]]) / N;
            }
            if (v >= 0)
                zd[v] = keep;
        }
        if (v < 0) {
            want = l[0];
            continue;
        }
        double num = (l[0] - l[1]) / 2e-6;
        if (rel_err(num, dz[v], 0) > 1e-3)
            fail_msg("dz[%d] = %g, numerical %g", v, dz[v], num);
    }
    if (fabs(loss - want) > 1e-5 * (1 + want))
        fail_msg("loss %g, reference %g", loss, want);
}

/* Dropout: the kept fraction is 1 - rate, kept values are scaled by
 * 1 / (1 - rate) (the expectation is kept), and the same rng state gives
 * the same mask. */
static void dropout_statistics_and_determinism(void **state)
{
    (void)state;
    enum { M = 100000 };
    uint64_t seed = test_seed(36);
    float *x = malloc(M * sizeof *x), *y = malloc(M * sizeof *y), *m1 = malloc(M * sizeof *m1);
    float *m2 = malloc(M * sizeof *m2);
    for (int i = 0; i < M; i++)
        x[i] = 1.0f;
    model_rng a, b;
    model_rng_seed(&a, seed, 0);
    model_rng_seed(&b, seed, 0);
    model_dropout_forward(x, M, 0.25f, &a, y, m1);
    model_dropout_forward(x, M, 0.25f, &b, y, m2);
    assert_memory_equal(m1, m2, M * sizeof *m1);
    double kept = 0, sum = 0;
    for (int i = 0; i < M; i++) {
        assert_true(m1[i] == 0.0f || fabsf(m1[i] - 1.0f / 0.75f) < 1e-6f);
        kept += m1[i] != 0.0f;
        sum += y[i];
    }
    /* binomial: sd of the kept fraction sqrt(.25 * .75 / M) ~ 0.0014 */
    if (fabs(kept / M - 0.75) > 0.01 || fabs(sum / M - 1.0) > 0.015)
        fail_msg("seed %llu: kept %g, mean %g", (unsigned long long)seed, kept / M, sum / M);
    model_dropout_forward(x, M, 0.25f, &a, y, m2); /* the stream moves on */
    assert_true(memcmp(m1, m2, M * sizeof *m1) != 0);
    free(x);
    free(y);
    free(m1);
    free(m2);
}

/* Convolution of a batch larger than one chunk (im2col rows or Winograd
 * tiles; chunk borders fall inside an image) equals the convolution of
 * each image alone; the weight gradient of the batch is the sum of the
 * per-image ones. */
static void conv_chunks_case(model_conv_algo algo, uint32_t k, uint64_t seed)
{
    enum { N = 24 };
    model_conv cv = conv_algo(14, 14, 64, 8, k, 1, k / 2, algo);
    size_t in = model_shape_size(cv.in), out = model_shape_size(cv.out);
    size_t nw = (size_t)8 * k * k * 64;
    /* im2col: K*K*Cin = 576, ~1820 rows a chunk; Winograd: 36 * 72 floats
     * a tile, ~200 tiles a chunk, 49 or 16 tiles an image */
    assert_true(model_conv_scratch_floats(&cv, N) < model_conv_scratch_floats(&cv, 2) * N / 2);
    float *saved = malloc((model_conv_saved_floats(&cv, N) + 1) * sizeof *saved);
    model_rng r;
    model_rng_seed(&r, seed, 0);
    float *x = malloc(N * in * sizeof *x), *w = malloc(nw * sizeof *w), b[8];
    float *y = malloc(N * out * sizeof *y), *y1 = malloc(out * sizeof *y1);
    float *dy = malloc(N * out * sizeof *dy), *dx = malloc(N * in * sizeof *dx);
    float *dx1 = malloc(in * sizeof *dx1), *dw = malloc(nw * sizeof *dw);
    float *dw1 = malloc(nw * sizeof *dw1), db[8], db1[8];
    double *dws = calloc(nw, sizeof *dws);
    float *scratch = malloc(model_conv_scratch_floats(&cv, N) * sizeof *scratch);
    fill(x, N * in, &r, 1.0);
    fill(w, nw, &r, 0.1);
    fill(b, 8, &r, 0.1);
    fill(dy, N * out, &r, 1.0);
    model_conv_forward(&cv, x, N, w, b, 0, y, saved, scratch);
    model_conv_backward(&cv, x, N, w, dy, dw, db, dx, saved, scratch);
    for (uint32_t i = 0; i < N; i++) {
        model_conv_forward(&cv, x + i * in, 1, w, b, 0, y1, saved, scratch);
        model_conv_backward(&cv, x + i * in, 1, w, dy + i * out, dw1, db1, dx1, saved, scratch);
        /* the same arithmetic in another chunking (and sgemm on other
         * shapes): equal to rounding, which Winograd's transforms make
         * relative to the largest value */
        const float ys = (float)max_abs(y1, out), xs = (float)max_abs(dx1, in);
        for (size_t j = 0; j < out; j++)
            if (fabsf(y1[j] - y[i * out + j]) > 1e-5f * ys)
                fail_msg("algo %d k %u image %u: y[%zu] %g alone, %g in the batch", (int)algo, k, i,
                         j, y1[j], y[i * out + j]);
        for (size_t j = 0; j < in; j++)
            if (fabsf(dx1[j] - dx[i * in + j]) > 1e-5f * xs)
                fail_msg("algo %d k %u image %u: dx[%zu] %g alone, %g in the batch", (int)algo, k,
                         i, j, dx1[j], dx[i * in + j]);
        for (size_t j = 0; j < nw; j++)
            dws[j] += dw1[j];
    }
    for (size_t j = 0; j < nw; j++)
        if (fabs(dws[j] - dw[j]) > 1e-3 * (1 + fabs(dws[j])))
            fail_msg("dW[%zu] = %g, sum over images %g", j, dw[j], dws[j]);
    free(x);
    free(w);
    free(y);
    free(y1);
    free(dy);
    free(dx);
    free(dx1);
    free(dw);
    free(dw1);
    free(dws);
    free(scratch);
    free(saved);
}

static void conv_chunks_equal_per_image(void **state)
{
    (void)state;
    uint64_t seed = test_seed(37);
    conv_chunks_case(MODEL_CONV_IM2COL, 3, seed);
    conv_chunks_case(MODEL_CONV_WINOGRAD, 3, seed + 1);
    conv_chunks_case(MODEL_CONV_WINOGRAD, 5, seed + 2);
}

/* Winograd and im2col compute the same function and gradients on the
 * default CNN's second convolution (float32 rounding apart: the relative
 * error is printed; it must stay below 1e-4 of the values' scale). */
static void winograd_matches_im2col(void **state)
{
    (void)state;
    enum { N = 3 };
    static const uint32_t ks[] = {3, 5};
    model_rng r;
    uint64_t seed = test_seed(38);
    model_rng_seed(&r, seed, 0);
    for (int q = 0; q < 2; q++) {
        uint32_t k = ks[q];
        model_conv ci = conv_algo(14, 14, 32, 64, k, 1, k / 2, MODEL_CONV_IM2COL);
        model_conv cw = conv_algo(14, 14, 32, 64, k, 1, k / 2, MODEL_CONV_AUTO);
        assert_true(cw.wino.m > 0 && ci.wino.m == 0);
        size_t in = N * model_shape_size(ci.in), out = N * model_shape_size(ci.out);
        size_t nw = (size_t)64 * k * k * 32;
        float *x = malloc(in * sizeof *x), *w = malloc(nw * sizeof *w), b[64];
        float *y[2], *dx[2], *dw[2], db[2][64], *dy = malloc(out * sizeof *dy);
        fill(x, in, &r, 1.0);
        fill(w, nw, &r, sqrt(2.0 / (k * k * 32)));
        fill(b, 64, &r, 0.1);
        fill(dy, out, &r, 1.0);
        for (int a = 0; a < 2; a++) {
            const model_conv *cv = a ? &cw : &ci;
            float *scratch = malloc((model_conv_scratch_floats(cv, N) + 1) * sizeof(float));
            float *saved = malloc((model_conv_saved_floats(cv, N) + 1) * sizeof(float));
            y[a] = malloc(out * sizeof(float));
            dx[a] = malloc(in * sizeof(float));
            dw[a] = malloc(nw * sizeof(float));
            model_conv_forward(cv, x, N, w, b, 0, y[a], saved, scratch);
            model_conv_backward(cv, x, N, w, dy, dw[a], db[a], dx[a], saved, scratch);
            free(scratch);
            free(saved);
        }
        const float *va[] = {y[0], dx[0], dw[0], db[0]}, *vb[] = {y[1], dx[1], dw[1], db[1]};
        const size_t len[] = {out, in, nw, 64};
        static const char *const what[] = {"y", "dx", "dw", "db"};
        for (int v = 0; v < 4; v++) {
            double scale = 0, worst = 0;
            for (size_t j = 0; j < len[v]; j++)
                scale = fmax(scale, fabs(va[v][j]));
            for (size_t j = 0; j < len[v]; j++)
                worst = fmax(worst, fabs(va[v][j] - vb[v][j]) / scale);
            printf("# winograd F(%u,%u) %s: max error %.2g of the largest value\n", cw.wino.m, k,
                   what[v], worst);
            if (worst > 1e-4)
                fail_msg("seed %llu k %u: %s differs by %g", (unsigned long long)seed, k, what[v],
                         worst);
        }
        for (int a = 0; a < 2; a++) {
            free(y[a]);
            free(dx[a]);
            free(dw[a]);
        }
        free(x);
        free(w);
        free(dy);
    }
}

/* ---- nets ---- */

static size_t param_count(const char *spec, uint32_t dim, uint32_t classes)
{
    size_t count = 0;
    char msg[MODEL_MSG_MAX] = "";
    int rc = model_spec_param_count(spec, dim, classes, &count, msg, sizeof msg);
    if (rc)
        fail_msg("spec '%s': %s", spec, msg);
    return count;
}

static void spec_grammar(void **state)
{
    (void)state;
    /* the default: 784 = 28x28x1; c32k3g8 (no bias) 32*9 + gamma, beta
     * 2*32; p2 -> 14x14; c64k3g8 64*288 + 2*64; p2 -> 7x7x64 = 3136;
     * f256 3136*256 + 256; d0.5; output 256*10 + 10 */
    size_t want = 32 * 9 + 64 + 64 * 288 + 128 + 3136 * 256 + 256 + 2570;
    assert_int_equal(param_count("cnn", 784, 10), want);
    assert_int_equal(param_count(MODEL_CNN_DEFAULT, 784, 10), want);
    /* the example: biases, no group norm */
    assert_int_equal(param_count("cnn:c32k5,p2,c64k5,p2,f512", 784, 10),
                     32 * 25 + 32 + 64 * 800 + 64 + 3136 * 512 + 512 + 5130);
    /* valid padding, stride, average pooling: 28 -> c k5 p0 24 -> s2 k3
     * (24-3)/2+1 = 11 -> a3s2 (11-3)/2+1 = 5: 5*5*6 = 150 features */
    assert_int_equal(param_count("cnn:c4k5p0,c6k3s2,a3s2", 784, 10),
                     4 * 25 + 4 + 6 * 36 + 6 + 150 * 10 + 10);
    /* an explicit 3-channel input */
    assert_int_equal(param_count("cnn:i3x8x8,c5k3,p2", 192, 4), 5 * 27 + 5 + 80 * 4 + 4);
    assert_int_equal(param_count("cnn:i3x8x8", 192, 4), 192 * 4 + 4);
    model_net *net;
    assert_int_equal(model_net_create(&net, "cnn:c8k3g4,p2,f16,d0.25", 100, 3, 4, NULL, 0), 0);
    /* layers: conv 10x10x8, groupnorm, pool 5x5x8, dense 16, dropout, output */
    static const uint32_t widths[] = {800, 800, 200, 16, 16, 3};
    assert_int_equal(model_net_layer_count(net), 6);
    for (uint32_t l = 0; l < 6; l++)
        assert_int_equal(model_net_layer_width(net, l), widths[l]);
    model_net_destroy(net);

    static const char *const bad[] = {
        "cnn:",        "cnn:,",        "cnn:c",       "cnn:c8",
        "cnn:c8k",     "cnn:c8k0",     "cnn:c0k3",    "cnn:c08k3",
        "cnn:c8k3g3",  "cnn:c8k3g0",   "cnn:c8k3s0",  "cnn:c8k3p3",
        "cnn:c8k3x",   "cnn:c8k3,,p2", "cnn:c8k3,",   "cnn:f10,c8k3",
        "cnn:f10,p2",  "cnn:p11",      "cnn:c8k13p0", "cnn:d1.5",
        "cnn:d0",      "cnn:d0.0",     "cnn:d.5",     "cnn:d0.1234567",
        "cnn:x3",      "cnn:i3x10x10", "cnn:i1x10",   "cnn:c8k3,i1x10x10",
        "cnn:f-3",     "cnn3",         "cnn:c8k3;p2", "CNN",
        "cnn:c8k3s99", "cnn:p2s0",     "cnn:f0",
    };
    char msg[MODEL_MSG_MAX];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        msg[0] = 0;
        int rc = model_net_create(&net, bad[i], 100, 3, 4, msg, sizeof msg);
        if (rc != MODEL_ESPEC)
            fail_msg("spec '%s' gave %d, wanted ESPEC (%s)", bad[i], rc, msg);
        assert_null(net);
        if (!strstr(msg, bad[i]))
            fail_msg("spec '%s': the message does not name it: %s", bad[i], msg);
    }
    /* the grammar alone (a config file, before the data is known): every
     * spec above except those that only fail against a 10x10 image */
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int shape_only = !strcmp(bad[i], "cnn:p11") || !strcmp(bad[i], "cnn:c8k13p0") ||
                         !strcmp(bad[i], "cnn:i3x10x10");
        msg[0] = 0;
        int rc = model_spec_check(bad[i], msg, sizeof msg);
        if (shape_only ? rc != 0 : rc != MODEL_ESPEC || !strstr(msg, bad[i]))
            fail_msg("model_spec_check('%s') = %d (%s)", bad[i], rc, msg);
    }
    static const char *const good[] = {
        "cnn",     MODEL_CNN_DEFAULT, "cnn:c512k7s2p3g32,p3s2,f4096",         "cnn:i3x32x32",
        "softmax", "mlp:256,128,100", "cnn:c65536k64,a64s64,f65536,d0.999999"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        if (model_spec_check(good[i], msg, sizeof msg))
            fail_msg("model_spec_check('%s'): %s", good[i], msg);
    assert_int_equal(model_spec_check("mlp:0", msg, sizeof msg), MODEL_ESPEC);
    /* a message says what to do */
    model_net_create(&net, "cnn:c8k3g3", 100, 3, 4, msg, sizeof msg);
    assert_non_null(strstr(msg, "3 groups do not divide 8 filters"));
    model_net_create(&net, "cnn", 100 * 3, 3, 4, msg, sizeof msg);
    assert_non_null(strstr(msg, "not a square image"));
    /* sizes above their maxima */
    assert_int_equal(model_net_create(&net, "cnn:c65536k3", 784, 10, 4, msg, sizeof msg),
                     MODEL_ETOOBIG);
    assert_int_equal(model_net_create(&net, "cnn:f65536,f65536", 784, 10, 4, msg, sizeof msg),
                     MODEL_ETOOBIG);
    assert_int_equal(model_net_create(&net, "cnn:c512k3", 784, 10, 65536, msg, sizeof msg),
                     MODEL_ETOOBIG);
    assert_int_equal(model_net_create(&net, "cnn", 784, 10, 0, msg, sizeof msg), MODEL_EINVAL);
    /* a syntax error is ESPEC even behind a layer too large for its input
     * (fuzz_spec, regress-size-before-syntax) */
    static model_arch a;
    assert_int_equal(model_arch_parse(&a,
                                      "cnn:c42222k3,p2s1,\x9a\x9a"
                                      "c8k2s2p0,f8",
                                      784, 2, msg, sizeof msg),
                     MODEL_ESPEC);
    assert_int_equal(model_arch_parse(&a, "cnn:c42222k3,p2s1,c8k2s2p0,f8", 784, 2, msg, sizeof msg),
                     MODEL_ETOOBIG);
}

/* The net's layer list as test cases for ref(). */
static lcase op_case(const model_op *op, uint32_t n)
{
    lcase c = {.name = "net", .n = n, .relu = op->relu};
    c.cv = (model_conv){
        .in = op->in, .out = op->out, .k = op->k, .stride = op->stride, .pad = op->pad};
    switch (op->kind) {
    case MODEL_OP_CONV:
        c.k = K_CONV;
        c.bias = op->b_count > 0;
        break;
    case MODEL_OP_GROUPNORM:
        c.k = K_GN;
        c.groups = op->groups;
        break;
    case MODEL_OP_MAXPOOL:
        c.k = K_MAXPOOL;
        break;
    case MODEL_OP_AVGPOOL:
        c.k = K_AVGPOOL;
        break;
    case MODEL_OP_DENSE:
        c.k = K_DENSE;
        c.din = op->in.c;
        c.dout = op->out.c;
        break;
    case MODEL_OP_DROPOUT:
        c.k = K_RELU; /* not used: the reference nets have no dropout */
        fail_msg("reference nets have no dropout");
    }
    lcase_sizes(&c);
    return c;
}

/* Mean cross-entropy of the net (arch a, parameters p) in double on x
 * (n samples, channel-major as the data), through ref() layer by layer. */
static double net_ref_loss(const model_arch *a, const double *p, const float *x, const uint16_t *y,
                           uint32_t n, uint64_t *pattern, double *probs)
{
    const model_shape s = a->input;
    size_t hw = (size_t)s.h * s.w, dim = hw * s.c;
    double *cur = malloc(n * dim * sizeof *cur);
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t c = 0; c < s.c; c++)
            for (size_t q = 0; q < hw; q++)
                cur[i * dim + q * s.c + c] = x[i * dim + c * hw + q];
    *pattern = 1;
    for (uint32_t l = 0; l < a->op_count; l++) {
        lcase c = op_case(&a->ops[l], n);
        double *next = malloc(c.ny * sizeof *next);
        uint64_t pat;
        ref(&c, cur, p + a->ops[l].w_off, p + a->ops[l].b_off, next, &pat);
        mix(pattern, pat);
        free(cur);
        cur = next;
    }
    uint32_t C = a->ops[a->op_count - 1].out.c;
    double total = 0;
    for (uint32_t i = 0; i < n; i++) {
        double *z = cur + (size_t)i * C, mx = z[0], se = 0;
        for (uint32_t c = 1; c < C; c++)
            mx = z[c] > mx ? z[c] : mx;
        for (uint32_t c = 0; c < C; c++)
            se += exp(z[c] - mx);
        total += log(se) + mx - z[y[i]];
        for (uint32_t c = 0; probs && c < C; c++)
            probs[(size_t)i * C + c] = exp(z[c] - mx) / se;
    }
    free(cur);
    return total / n;
}

/* The net's loss, probabilities and analytic gradient against the
 * reference and its central differences, on every parameter. */
static void net_gradcheck(const char *spec, uint32_t dim, uint32_t classes, uint32_t n,
                          uint64_t seed)
{
    model_net *net;
    char msg[MODEL_MSG_MAX] = "";
    if (model_net_create(&net, spec, dim, classes, n, msg, sizeof msg))
        fail_msg("%s: %s", spec, msg);
    model_arch a;
    assert_int_equal(model_arch_parse(&a, spec, dim, classes, NULL, 0), 0);
    model_rng r;
    model_rng_seed(&r, seed, 0);
    model_net_init(net, &r);
    float *p = model_net_params(net);
    size_t np = model_net_param_count(net);
    for (size_t i = 0; i < np; i++)
        p[i] += (float)(0.1 * model_rng_normal(&r));
    float *x = malloc((size_t)n * dim * sizeof *x);
    uint16_t *y = malloc(n * sizeof *y);
    fill(x, (size_t)n * dim, &r, 1.0);
    for (uint32_t i = 0; i < n; i++)
        y[i] = (uint16_t)model_rng_below(&r, classes);
    float loss;
    assert_int_equal(model_net_loss_grad(net, x, y, n, &loss), 0);
    double *pd = malloc(np * sizeof *pd), *probs = malloc((size_t)n * classes * sizeof *probs);
    for (size_t i = 0; i < np; i++)
        pd[i] = p[i];
    uint64_t pat0, pp, pm;
    double l0 = net_ref_loss(&a, pd, x, y, n, &pat0, probs);
    if (fabs(loss - l0) > 1e-4 * (1 + l0))
        fail_msg("%s seed %llu: loss %g, reference %g", spec, (unsigned long long)seed, loss, l0);
    const float *fp = model_net_forward(net, x, n);
    for (size_t j = 0; j < (size_t)n * classes; j++)
        if (fabs(fp[j] - probs[j]) > 1e-5)
            fail_msg("%s: probability %zu = %g, reference %g", spec, j, fp[j], probs[j]);
    const float *g = model_net_grads(net);
    const double eps = 1e-6, gscale = max_abs(g, np);
    size_t bad = 0, kinks = 0;
    double worst = 0;
    for (size_t i = 0; i < np; i++) {
        double keep = pd[i];
        pd[i] = keep + eps;
        double lp = net_ref_loss(&a, pd, x, y, n, &pp, NULL);
        pd[i] = keep - eps;
        double lm = net_ref_loss(&a, pd, x, y, n, &pm, NULL);
        pd[i] = keep;
        if (pp != pat0 || pm != pat0) {
            kinks++;
            continue;
        }
        double e = rel_err((lp - lm) / (2 * eps), g[i], gscale);
        worst = e > worst ? e : worst;
        bad += e > 1e-3;
    }
    if (bad || kinks > np / 20)
        fail_msg("%s seed %llu: %zu of %zu gradients off (worst relative error %g), %zu kinks",
                 spec, (unsigned long long)seed, bad, np, worst, kinks);
    free(pd);
    free(probs);
    free(x);
    free(y);
    model_net_destroy(net);
}

static void net_gradients_match_finite_differences(void **state)
{
    (void)state;
    uint64_t seed = test_seed(41);
    /* conv + group norm + ReLU moved onto max pooling, padded conv,
     * average pooling, dense, on a 2-channel channel-major input */
    net_gradcheck("cnn:i2x6x6,c4k3g2,p2,c3k2p1,a2,f5", 72, 3, 3, seed);
    /* square input, biased conv with ReLU then pooling */
    net_gradcheck("cnn:c3k3,p2,f4", 36, 4, 2, seed + 1);
    /* strided conv, pointwise conv straight into the output layer */
    net_gradcheck("cnn:c2k3s2,c3k1", 49, 3, 2, seed + 2);
}

/* Dropout is active in loss_grad only, draws a stream seeded by init (or
 * model_net_seed_dropout), and is reproducible. */
static void dropout_in_training_only(void **state)
{
    (void)state;
    uint64_t seed = test_seed(42);
    const char *spec = "cnn:c4k3,p2,f32,d0.5";
    enum { N = 4, DIM = 64 };
    model_net *a, *b;
    assert_int_equal(model_net_create(&a, spec, DIM, 3, N, NULL, 0), 0);
    assert_int_equal(model_net_create(&b, spec, DIM, 3, N, NULL, 0), 0);
    model_rng ra, rb;
    model_rng_seed(&ra, seed, 0);
    model_rng_seed(&rb, seed, 0);
    model_net_init(a, &ra);
    model_net_init(b, &rb);
    size_t np = model_net_param_count(a);
    float x[N * DIM];
    uint16_t y[N] = {0, 1, 2, 0};
    fill(x, N * DIM, &ra, 1.0);
    /* inference: no dropout, so the forward is repeatable */
    float p1[N * 3];
    memcpy(p1, model_net_forward(a, x, N), sizeof p1);
    assert_memory_equal(p1, model_net_forward(a, x, N), sizeof p1);
    /* training: two nets with the same init draw the same masks ... */
    float la, lb, la2;
    float *ga = malloc(np * sizeof *ga);
    assert_int_equal(model_net_loss_grad(a, x, y, N, &la), 0);
    assert_int_equal(model_net_loss_grad(b, x, y, N, &lb), 0);
    assert_true(la == lb);
    assert_memory_equal(model_net_grads(a), model_net_grads(b), np * sizeof(float));
    memcpy(ga, model_net_grads(a), np * sizeof *ga);
    /* ... the next step draws new ones ... */
    assert_int_equal(model_net_loss_grad(a, x, y, N, &la2), 0);
    assert_true(memcmp(ga, model_net_grads(a), np * sizeof *ga) != 0);
    /* ... and a reseeded stream differs */
    model_net_seed_dropout(b, seed + 99);
    assert_int_equal(model_net_loss_grad(b, x, y, N, &lb), 0);
    assert_true(memcmp(ga, model_net_grads(b), np * sizeof *ga) != 0);
    /* the training loss with dropout differs from the inference loss */
    double inf_loss = 0;
    for (int i = 0; i < N; i++)
        inf_loss -= log(p1[i * 3 + y[i]]) / N;
    assert_true(fabs(inf_loss - la) > 1e-6);
    free(ga);
    model_net_destroy(a);
    model_net_destroy(b);
}

/* Images 8x8 of one bright 3x3 square on noise; the class is the quadrant
 * of the square. A convolution finds it anywhere in its quadrant. */
static void make_squares(model_data *d, uint32_t n, model_rng *r)
{
    assert_int_equal(model_data_alloc(d, n, 64, 4, MODEL_DTYPE_F32), 0);
    for (uint32_t i = 0; i < n; i++) {
        uint16_t q = (uint16_t)model_rng_below(r, 4);
        uint32_t y0 = (q / 2) * 4 + (uint32_t)model_rng_below(r, 2);
        uint32_t x0 = (q % 2) * 4 + (uint32_t)model_rng_below(r, 2);
        float *img = d->x_f32 + (size_t)i * 64;
        for (int j = 0; j < 64; j++)
            img[j] = (float)(0.3 * model_rng_normal(r));
        for (uint32_t dy = 0; dy < 3; dy++)
            for (uint32_t dx = 0; dx < 3; dx++)
                img[(y0 + dy) * 8 + x0 + dx] += 1.0f;
        d->labels[i] = q;
    }
}

static double train_squares(uint64_t seed, const char *spec, float **out, size_t *count)
{
    model_rng r;
    model_rng_seed(&r, seed, 1);
    model_data d;
    make_squares(&d, 512, &r);
    model_net *net;
    assert_int_equal(model_net_create(&net, spec, 64, 4, 32, NULL, 0), 0);
    model_rng_seed(&r, seed, 2);
    model_net_init(net, &r);
    model_sgd sgd;
    model_sgd_config cfg = {.momentum = 0.9f, .weight_decay = 1e-4f};
    assert_int_equal(model_sgd_init(&sgd, model_net_param_count(net), &cfg), 0);
    uint32_t order[512];
    double loss0, loss, acc;
    assert_int_equal(model_net_evaluate(net, &d, NULL, &loss0, &acc), 0);
    for (int epoch = 0; epoch < 6; epoch++) {
        model_data_shuffle(order, d.count, &r);
        for (uint32_t at = 0; at < d.count; at += 32) {
            model_data_gather(&d, NULL, order + at, 32, model_net_input_buffer(net),
                              model_net_label_buffer(net));
            assert_int_equal(model_train_step(net, &sgd, model_net_input_buffer(net),
                                              model_net_label_buffer(net), 32, 0.02f, NULL),
                             0);
        }
    }
    assert_int_equal(model_net_evaluate(net, &d, NULL, &loss, &acc), 0);
    if (!(loss < loss0 / 4 && acc > 0.95))
        fail_msg("seed %llu %s: loss %g -> %g, accuracy %g", (unsigned long long)seed, spec, loss0,
                 loss, acc);
    *count = model_net_param_count(net);
    *out = malloc(*count * sizeof **out);
    memcpy(*out, model_net_params(net), *count * sizeof **out);
    model_sgd_free(&sgd);
    model_net_destroy(net);
    model_data_free(&d);
    return acc;
}

static void cnn_learns_and_is_deterministic(void **state)
{
    (void)state;
    uint64_t seed = test_seed(43);
    const char *spec = "cnn:c8k3g4,p2,c8k3,p2,f16,d0.25";
    float *a, *b, *c;
    size_t na, nb, nc;
    train_squares(seed, spec, &a, &na);
    train_squares(seed, spec, &b, &nb);
    train_squares(seed + 1, spec, &c, &nc);
    assert_int_equal(na, nb);
    if (memcmp(a, b, na * sizeof *a))
        fail_msg("seed %llu: two runs gave different parameters", (unsigned long long)seed);
    assert_true(memcmp(a, c, na * sizeof *a) != 0);
    free(a);
    free(b);
    free(c);
    train_squares(seed, "cnn:c4k3,a2,f8", &a, &na);
    free(a);
}

/* ---- model_blas: OpenBLAS's core ---- */

extern void gotoblas_dynamic_init(void) __attribute__((weak));

/* model_blas_init leaves OpenBLAS on kernels for this CPU: never its SSE3
 * fallback (Prescott) on a CPU with AVX, unless the user forced a core or
 * this OpenBLAS cannot choose at run time; a second call changes nothing;
 * sgemm still computes the product (against a double-precision one). */
static void blas_core_fits_the_cpu(void **state)
{
    (void)state;
    char note[256];
    if (model_blas_init(note, sizeof note))
        print_message("%s\n", note);
    assert_int_equal(model_blas_init(note, sizeof note), 0);
    assert_string_equal(note, "");
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (gotoblas_dynamic_init && !getenv("OPENBLAS_CORETYPE") && __builtin_cpu_supports("avx"))
        assert_string_not_equal(model_blas_core(), "Prescott");
#endif
    enum { M = 37, K = 29, N = 41 };
    static float a[M * K], b[K * N], c[M * N];
    model_rng r;
    model_rng_seed(&r, 5, 0);
    for (int i = 0; i < M * K; i++)
        a[i] = (float)model_rng_normal(&r);
    for (int i = 0; i < K * N; i++)
        b[i] = (float)model_rng_normal(&r);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, a, K, b, N, 0.0f, c, N);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double want = 0;
            for (int k = 0; k < K; k++)
                want += (double)a[i * K + k] * b[k * N + j];
            if (fabs(c[i * N + j] - want) > 1e-4 * (1 + fabs(want)))
                fail_msg("sgemm on core %s: c[%d][%d] = %g, want %g", model_blas_core(), i, j,
                         c[i * N + j], want);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(blas_core_fits_the_cpu), /* first: before any other BLAS call */
        cmocka_unit_test(conv_gradients),
        cmocka_unit_test(pool_gradients),
        cmocka_unit_test(groupnorm_gradients),
        cmocka_unit_test(elementwise_and_dense_gradients),
        cmocka_unit_test(softmax_xent_gradient),
        cmocka_unit_test(dropout_statistics_and_determinism),
        cmocka_unit_test(conv_chunks_equal_per_image),
        cmocka_unit_test(winograd_matches_im2col),
        cmocka_unit_test(spec_grammar),
        cmocka_unit_test(net_gradients_match_finite_differences),
        cmocka_unit_test(dropout_in_training_only),
        cmocka_unit_test(cnn_learns_and_is_deterministic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
