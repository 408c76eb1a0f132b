#include "model/layers.h"

#include <assert.h>
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "common/simd.h"

/* The pooling and normalisation loops run over the channels of one pixel
 * (NHWC), element-wise or into one accumulator per channel, so the vector
 * width changes no result: they are SIMD_CLONES (common/simd.h), as the
 * Winograd transforms are. */

/* ---- convolution by im2col and sgemm ----
 *
 * Output pixels of the whole batch are the rows of one matrix product:
 * row r = (sample i, oy, ox) of the im2col matrix holds the K*K*Cin inputs
 * under that output's window in (ky, kx, ci) order, the order of a row of
 * W, so y[r] = col[r] W^T + b. The rows are processed in chunks of
 * CONV_CHUNK_FLOATS / (K*K*Cin) so that the chunk of col stays in the L2
 * cache between being written and being read by sgemm (and, in backward,
 * between the dW product and being overwritten by dcol). The chunk size
 * depends only on the layer's shape, so the summation order of dW (one
 * sgemm per chunk, accumulated) is fixed: results are deterministic.
 *
 * 256 K floats = 1 MB, the L2 of one core here: of 64 K, 256 K, 1 M and
 * 4 M floats it was fastest on a stride-2 5x5 convolution over 32
 * channels (docs/BENCHMARKS.md, "cnn"; 64 K..1 M within 10%, 4 M 20%
 * slower). */
#define CONV_CHUNK_FLOATS (1u << 18)

static size_t conv_kkc(const model_conv *cv)
{
    return (size_t)cv->k * cv->k * cv->in.c;
}

/* Is the convolution a plain matrix product over pixels (1x1, stride 1,
 * no padding)? Then col is x itself. */
static int conv_is_pointwise(const model_conv *cv)
{
    return cv->k == 1 && cv->stride == 1 && cv->pad == 0;
}

static size_t conv_chunk_rows(const model_conv *cv, size_t rows)
{
    /* the chunk's rows of col and of the output both count: with a small
     * window (K*Cin = 9 on the first layer) the output dominates */
    size_t r = CONV_CHUNK_FLOATS / (conv_kkc(cv) + cv->out.c);
    if (r < 1)
        r = 1;
    return r < rows ? r : rows;
}

void model_conv_plan(model_conv *cv, model_shape in, uint32_t out_c, uint32_t k, uint32_t stride,
                     uint32_t pad, model_conv_algo algo)
{
    memset(cv, 0, sizeof *cv);
    cv->in = in;
    cv->k = k;
    cv->stride = stride;
    cv->pad = pad;
    cv->out =
        (model_shape){(in.h + 2 * pad - k) / stride + 1, (in.w + 2 * pad - k) / stride + 1, out_c};
    /* F(4x4, 3x3) and F(2x2, 5x5): both alpha = 6, the largest tile whose
     * float32 error stays near direct convolution's */
    uint32_t m = k == 3 ? 4 : k == 5 ? 2 : 0;
    int fits = stride == 1 && m;
    uint32_t cin_min = k == 3 ? MODEL_WINO_CIN_MIN_K3 : MODEL_WINO_CIN_MIN_K5;
    if (algo == MODEL_CONV_IM2COL || !fits || (algo == MODEL_CONV_AUTO && in.c < cin_min))
        return;
    int rc = model_wino_init(&cv->wino, m, k);
    assert(rc == 0);
    (void)rc;
}

size_t model_conv_saved_floats(const model_conv *cv, uint32_t batch)
{
    return cv->wino.m ? model_wino_saved_floats(cv, batch) : 0;
}

size_t model_conv_scratch_floats(const model_conv *cv, uint32_t batch)
{
    if (cv->wino.m)
        return model_wino_scratch_floats(cv, batch);
    if (conv_is_pointwise(cv))
        return 0;
    size_t rows = (size_t)batch * cv->out.h * cv->out.w;
    return conv_chunk_rows(cv, rows) * conv_kkc(cv);
}

/* dst[0..m) = src[0..m): runs are K*Cin floats, often a handful (3 for a
 * 3x3 window on one channel), where a call to memcpy costs more than the
 * copy. */
static void im2col_copy(float *restrict dst, const float *restrict src, size_t m)
{
    for (size_t j = 0; j < m; j++)
        dst[j] = src[j];
}

static void im2col_zero(float *dst, size_t m)
{
    for (size_t j = 0; j < m; j++)
        dst[j] = 0.0f;
}

/* col[0 .. count) rows of the im2col matrix from output row r0 on. A
 * window row (fixed ky, kx = 0..K-1) is K*Cin contiguous floats of x
 * (NHWC), so it is copied in one run when it lies inside the image and
 * piecewise at the borders. */
static void im2col(const model_conv *cv, const float *x, size_t r0, size_t count, float *col)
{
    const uint32_t K = cv->k, C = cv->in.c, H = cv->in.h, W = cv->in.w;
    const size_t pix = (size_t)cv->out.h * cv->out.w, kc = (size_t)K * C;
    for (size_t r = r0; r < r0 + count; r++) {
        size_t i = r / pix, p = r % pix;
        long oy = (long)(p / cv->out.w), ox = (long)(p % cv->out.w);
        long y0 = oy * cv->stride - cv->pad, x0 = ox * cv->stride - cv->pad;
        const float *img = x + i * H * W * C;
        float *dst = col + (r - r0) * K * kc;
        /* columns of the window inside the image: [xa, xb) of 0..K-1 */
        long xa = x0 < 0 ? -x0 : 0, xb = x0 + K > W ? (long)W - x0 : (long)K;
        for (uint32_t ky = 0; ky < K; ky++, dst += kc) {
            long iy = y0 + ky;
            if (iy < 0 || iy >= (long)H || xb <= xa) {
                im2col_zero(dst, kc);
                continue;
            }
            im2col_zero(dst, (size_t)xa * C);
            im2col_copy(dst + xa * C, img + ((size_t)iy * W + (size_t)(x0 + xa)) * C,
                        (size_t)(xb - xa) * C);
            if (xb < (long)K)
                im2col_zero(dst + xb * C, (size_t)(K - xb) * C);
        }
    }
}

/* The adjoint of im2col: dx += the rows of dcol, scattered back. */
static void col2im(const model_conv *cv, const float *dcol, size_t r0, size_t count, float *dx)
{
    const uint32_t K = cv->k, C = cv->in.c, H = cv->in.h, W = cv->in.w;
    const size_t pix = (size_t)cv->out.h * cv->out.w, kc = (size_t)K * C;
    for (size_t r = r0; r < r0 + count; r++) {
        size_t i = r / pix, p = r % pix;
        long oy = (long)(p / cv->out.w), ox = (long)(p % cv->out.w);
        long y0 = oy * cv->stride - cv->pad, x0 = ox * cv->stride - cv->pad;
        float *img = dx + i * H * W * C;
        const float *src = dcol + (r - r0) * K * kc;
        long xa = x0 < 0 ? -x0 : 0, xb = x0 + K > W ? (long)W - x0 : (long)K;
        for (uint32_t ky = 0; ky < K; ky++, src += kc) {
            long iy = y0 + ky;
            if (iy < 0 || iy >= (long)H || xb <= xa)
                continue;
            float *d = img + ((size_t)iy * W + (size_t)(x0 + xa)) * C;
            const float *s = src + xa * C;
            size_t m = (size_t)(xb - xa) * C;
            for (size_t j = 0; j < m; j++)
                d[j] += s[j];
        }
    }
}

/* y rows (count x Cout) = b broadcast, or 0 without a bias. */
static void fill_bias(float *y, size_t count, uint32_t out, const float *b)
{
    if (!b) {
        memset(y, 0, count * out * sizeof *y);
        return;
    }
    for (size_t r = 0; r < count; r++)
        memcpy(y + r * out, b, out * sizeof *y);
}

void model_conv_forward(const model_conv *cv, const float *x, uint32_t n, const float *w,
                        const float *b, int relu, float *y, float *saved, float *scratch)
{
    if (cv->wino.m) {
        model_wino_forward(cv, x, n, w, b, relu, y, saved, scratch);
        return;
    }
    assert(cv->out.h == (cv->in.h + 2 * cv->pad - cv->k) / cv->stride + 1);
    assert(cv->out.w == (cv->in.w + 2 * cv->pad - cv->k) / cv->stride + 1);
    const size_t rows = (size_t)n * cv->out.h * cv->out.w, kkc = conv_kkc(cv);
    const uint32_t Co = cv->out.c;
    const int pointwise = conv_is_pointwise(cv);
    const size_t chunk = pointwise ? rows : conv_chunk_rows(cv, rows);
    for (size_t r0 = 0; r0 < rows; r0 += chunk) {
        size_t m = rows - r0 < chunk ? rows - r0 : chunk;
        const float *col = x + r0 * kkc;
        if (!pointwise) {
            im2col(cv, x, r0, m, scratch);
            col = scratch;
        }
        float *yr = y + r0 * Co;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)Co, (int)kkc, 1.0f, col,
                    (int)kkc, w, (int)kkc, 0.0f, yr, (int)Co);
        /* bias and ReLU in one pass over the chunk while it is in cache */
        for (size_t r = 0; r < m; r++) {
            float *o = yr + r * Co;
            if (b)
                for (uint32_t c = 0; c < Co; c++)
                    o[c] += b[c];
            if (relu)
                for (uint32_t c = 0; c < Co; c++)
                    o[c] = o[c] > 0.0f ? o[c] : 0.0f;
        }
    }
}

void model_conv_backward(const model_conv *cv, const float *x, uint32_t n, const float *w,
                         const float *dy, float *dw, float *db, float *dx, const float *saved,
                         float *scratch)
{
    if (cv->wino.m) {
        model_wino_backward(cv, x, n, w, dy, dw, db, dx, saved, scratch);
        return;
    }
    const size_t rows = (size_t)n * cv->out.h * cv->out.w, kkc = conv_kkc(cv);
    const uint32_t Co = cv->out.c;
    const int pointwise = conv_is_pointwise(cv);
    const size_t chunk = pointwise ? rows : conv_chunk_rows(cv, rows);
    if (db) {
        memset(db, 0, Co * sizeof *db);
        for (size_t r = 0; r < rows; r++)
            for (uint32_t c = 0; c < Co; c++)
                db[c] += dy[r * Co + c];
    }
    if (dx && !pointwise)
        memset(dx, 0, (size_t)n * model_shape_size(cv->in) * sizeof *dx);
    for (size_t r0 = 0; r0 < rows; r0 += chunk) {
        size_t m = rows - r0 < chunk ? rows - r0 : chunk;
        const float *dyr = dy + r0 * Co;
        const float *col = x + r0 * kkc;
        if (!pointwise) {
            im2col(cv, x, r0, m, scratch);
            col = scratch;
        }
        /* dW (Co x kkc) += dy_chunk^T col_chunk */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)Co, (int)kkc, (int)m, 1.0f, dyr,
                    (int)Co, col, (int)kkc, r0 ? 1.0f : 0.0f, dw, (int)kkc);
        if (!dx)
            continue;
        /* dcol (m x kkc) = dy_chunk W, then scattered back onto dx */
        float *dcol = pointwise ? dx + r0 * kkc : scratch;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)kkc, (int)Co, 1.0f, dyr,
                    (int)Co, w, (int)kkc, 0.0f, dcol, (int)kkc);
        if (!pointwise)
            col2im(cv, dcol, r0, m, dx);
    }
}

/* ---- pooling ---- */

/* One output pixel of max pooling: the maximum over the window positions
 * at offsets off[0..nw) (relative to x) of each channel, and its index.
 * restrict and a mask instead of a branch let the compiler vectorise over
 * channels; the branchy loop it made before mispredicted on real data
 * (5.1 -> 1.0 ms on the default CNN's first pooling, bench_conv). */
static inline __attribute__((always_inline)) void
maxpool_pixel(const float *restrict x, const size_t *restrict off, uint32_t nw, uint32_t C,
              uint32_t base, float *restrict y, uint32_t *restrict arg)
{
    for (uint32_t c = 0; c < C; c++) {
        y[c] = x[off[0] + c];
        arg[c] = base + (uint32_t)off[0] + c;
    }
    for (uint32_t k = 1; k < nw; k++) {
        const float *xk = x + off[k];
        const uint32_t ak = base + (uint32_t)off[k];
        for (uint32_t c = 0; c < C; c++) {
            /* a mask, not a branch: GCC vectorises this form */
            float v = xk[c], b = y[c];
            uint32_t m = -(uint32_t)(v > b);
            y[c] = v > b ? v : b;
            arg[c] = (arg[c] & ~m) | ((ak + c) & m);
        }
    }
}

SIMD_CLONES static void maxpool_forward(const model_pool *p, const float *x, uint32_t n, int relu,
                                        float *y, uint32_t *arg)
{
    const uint32_t C = p->in.c, K = p->k;
    const size_t in_size = model_shape_size(p->in);
    size_t off[MODEL_POOL_WINDOW_MAX];
    assert((size_t)K * K <= MODEL_POOL_WINDOW_MAX);
    for (uint32_t ky = 0; ky < K; ky++)
        for (uint32_t kx = 0; kx < K; kx++)
            off[ky * K + kx] = ((size_t)ky * p->in.w + kx) * C;
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t oy = 0; oy < p->out.h; oy++)
            for (uint32_t ox = 0; ox < p->out.w; ox++) {
                size_t o = (((size_t)i * p->out.h + oy) * p->out.w + ox) * C;
                size_t at =
                    i * in_size + ((size_t)oy * p->stride * p->in.w + (size_t)ox * p->stride) * C;
                maxpool_pixel(x + at, off, K * K, C, (uint32_t)at, y + o, arg + o);
                if (relu)
                    for (uint32_t c = 0; c < C; c++)
                        y[o + c] = y[o + c] > 0.0f ? y[o + c] : 0.0f;
            }
}

void model_maxpool_forward(const model_pool *p, const float *x, uint32_t n, int relu, float *y,
                           uint32_t *arg)
{
    maxpool_forward(p, x, n, relu, y, arg);
}

/* Windows that tile the input (stride K, H and W multiples of K, as every
 * 2x2 pooling of an even image): each input is in exactly one window, so
 * dx is written once, dy where the window's maximum was and 0 elsewhere,
 * instead of clearing all of dx and scattering dy onto it (the same
 * values: one term per input either way). */
SIMD_CLONES static void maxpool_backward_tiled(const model_pool *p, uint32_t n,
                                               const float *restrict dy,
                                               const uint32_t *restrict arg, float *restrict dx)
{
    const uint32_t C = p->in.c, K = p->k;
    const size_t in_size = model_shape_size(p->in);
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t oy = 0; oy < p->out.h; oy++)
            for (uint32_t ox = 0; ox < p->out.w; ox++) {
                size_t o = (((size_t)i * p->out.h + oy) * p->out.w + ox) * C;
                for (uint32_t ky = 0; ky < K; ky++)
                    for (uint32_t kx = 0; kx < K; kx++) {
                        size_t at = i * in_size +
                                    (((size_t)oy * K + ky) * p->in.w + (size_t)ox * K + kx) * C;
                        const uint32_t base = (uint32_t)at;
                        for (uint32_t c = 0; c < C; c++)
                            dx[at + c] = arg[o + c] == base + c ? dy[o + c] : 0.0f;
                    }
            }
}

void model_maxpool_backward(const model_pool *p, uint32_t n, const float *dy, const uint32_t *arg,
                            float *dx)
{
    if (p->stride == p->k && p->in.h == p->out.h * p->k && p->in.w == p->out.w * p->k) {
        maxpool_backward_tiled(p, n, dy, arg, dx);
        return;
    }
    memset(dx, 0, (size_t)n * model_shape_size(p->in) * sizeof *dx);
    size_t m = (size_t)n * model_shape_size(p->out);
    for (size_t j = 0; j < m; j++)
        dx[arg[j]] += dy[j];
}

void model_avgpool_forward(const model_pool *p, const float *x, uint32_t n, float *y)
{
    const uint32_t C = p->in.c, K = p->k;
    const size_t in_size = model_shape_size(p->in);
    const float inv = 1.0f / (float)(K * K);
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t oy = 0; oy < p->out.h; oy++)
            for (uint32_t ox = 0; ox < p->out.w; ox++) {
                float *yo = y + (((size_t)i * p->out.h + oy) * p->out.w + ox) * C;
                memset(yo, 0, C * sizeof *yo);
                for (uint32_t ky = 0; ky < K; ky++)
                    for (uint32_t kx = 0; kx < K; kx++) {
                        const float *xi =
                            x + i * in_size +
                            ((size_t)(oy * p->stride + ky) * p->in.w + ox * p->stride + kx) * C;
                        for (uint32_t c = 0; c < C; c++)
                            yo[c] += xi[c];
                    }
                for (uint32_t c = 0; c < C; c++)
                    yo[c] *= inv;
            }
}

void model_avgpool_backward(const model_pool *p, uint32_t n, const float *dy, float *dx)
{
    const uint32_t C = p->in.c, K = p->k;
    const size_t in_size = model_shape_size(p->in);
    const float inv = 1.0f / (float)(K * K);
    memset(dx, 0, (size_t)n * in_size * sizeof *dx);
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t oy = 0; oy < p->out.h; oy++)
            for (uint32_t ox = 0; ox < p->out.w; ox++) {
                const float *dyo = dy + (((size_t)i * p->out.h + oy) * p->out.w + ox) * C;
                for (uint32_t ky = 0; ky < K; ky++)
                    for (uint32_t kx = 0; kx < K; kx++) {
                        float *dxi =
                            dx + i * in_size +
                            ((size_t)(oy * p->stride + ky) * p->in.w + ox * p->stride + kx) * C;
                        for (uint32_t c = 0; c < C; c++)
                            dxi[c] += dyo[c] * inv;
                    }
            }
}

/* ---- group normalisation ----
 *
 * NHWC keeps one pixel's channels together, so the statistics are taken
 * per channel first (sums over the H*W pixels, vectorised over channels,
 * float accumulators) and combined per group in double; the output is
 * then x * scale[c] + shift[c], and the input gradient a[c] dy + b[c] x +
 * k[c], again one vectorised pass. Two passes for the variance (mean, then
 * squared deviations), so that it keeps its precision for inputs far from
 * zero. */

size_t model_groupnorm_stats_floats(model_shape s, uint32_t groups, uint32_t batch)
{
    return (size_t)batch * groups * 2 + 4 * (size_t)s.c;
}

/* s1[c] = sum over the pixels of x[p][c] (and s2[c] of (x - mean[c])^2
 * when mean is not NULL). */
SIMD_CLONES static void gn_channel_sums(const float *restrict x, size_t hw, uint32_t C,
                                        const float *restrict mean, float *restrict s1)
{
    memset(s1, 0, C * sizeof *s1);
    for (size_t p = 0; p < hw; p++) {
        const float *xp = x + p * C;
        if (mean)
            for (uint32_t c = 0; c < C; c++) {
                float d = xp[c] - mean[c];
                s1[c] += d * d;
            }
        else
            for (uint32_t c = 0; c < C; c++)
                s1[c] += xp[c];
    }
}

/* y = x * scale[c] + shift[c] (then ReLU) over hw pixels of C channels */
SIMD_CLONES static void gn_affine(const float *restrict x, size_t hw, uint32_t C,
                                  const float *restrict scale, const float *restrict shift,
                                  int relu, float *restrict y)
{
    for (size_t p = 0; p < hw; p++) {
        const float *xp = x + p * C;
        float *yp = y + p * C;
        for (uint32_t c = 0; c < C; c++)
            yp[c] = xp[c] * scale[c] + shift[c];
        if (relu)
            for (uint32_t c = 0; c < C; c++)
                yp[c] = yp[c] > 0.0f ? yp[c] : 0.0f;
    }
}

/* sdy[c] = sum over pixels of dy, sdyx[c] of dy x */
SIMD_CLONES static void gn_grad_sums(const float *restrict x, const float *restrict dy, size_t hw,
                                     uint32_t C, float *restrict sdy, float *restrict sdyx)
{
    memset(sdy, 0, C * sizeof *sdy);
    memset(sdyx, 0, C * sizeof *sdyx);
    for (size_t p = 0; p < hw; p++)
        for (uint32_t c = 0; c < C; c++) {
            sdy[c] += dy[p * C + c];
            sdyx[c] += dy[p * C + c] * x[p * C + c];
        }
}

/* dx = a[c] dy + b[c] x + k[c] */
SIMD_CLONES static void gn_grad_input(const float *restrict x, const float *restrict dy, size_t hw,
                                      uint32_t C, const float *restrict a, const float *restrict b,
                                      const float *restrict k, float *restrict dx)
{
    for (size_t p = 0; p < hw; p++)
        for (uint32_t c = 0; c < C; c++)
            dx[p * C + c] = a[c] * dy[p * C + c] + b[c] * x[p * C + c] + k[c];
}

void model_groupnorm_forward(model_shape s, uint32_t groups, const float *x, uint32_t n,
                             const float *gamma, const float *beta, int relu, float *y,
                             float *stats)
{
    assert(groups > 0 && s.c % groups == 0);
    const uint32_t C = s.c, cg = C / groups;
    const size_t hw = (size_t)s.h * s.w, size = hw * C;
    const double count = (double)hw * cg;
    float *sum = stats + (size_t)n * groups * 2, *mean = sum + C, *scale = mean + C,
          *shift = scale + C;
    for (uint32_t i = 0; i < n; i++) {
        const float *xi = x + i * size;
        float *yi = y + i * size, *st = stats + (size_t)i * groups * 2;
        gn_channel_sums(xi, hw, C, NULL, sum);
        for (uint32_t g = 0; g < groups; g++) {
            double t = 0;
            for (uint32_t c = g * cg; c < (g + 1) * cg; c++)
                t += sum[c];
            st[2 * g] = (float)(t / count);
            for (uint32_t c = g * cg; c < (g + 1) * cg; c++)
                mean[c] = st[2 * g];
        }
        gn_channel_sums(xi, hw, C, mean, sum);
        for (uint32_t g = 0; g < groups; g++) {
            double q = 0;
            for (uint32_t c = g * cg; c < (g + 1) * cg; c++)
                q += sum[c];
            float rstd = (float)(1.0 / sqrt(q / count + MODEL_GN_EPS));
            st[2 * g + 1] = rstd;
            for (uint32_t c = g * cg; c < (g + 1) * cg; c++) {
                scale[c] = rstd * gamma[c];
                shift[c] = beta[c] - st[2 * g] * scale[c];
            }
        }
        gn_affine(xi, hw, C, scale, shift, relu, yi);
    }
}

void model_groupnorm_backward(model_shape s, uint32_t groups, const float *x, uint32_t n,
                              const float *gamma, const float *stats, const float *dy,
                              float *dgamma, float *dbeta, float *dx)
{
    const uint32_t C = s.c, cg = C / groups;
    const size_t hw = (size_t)s.h * s.w, size = hw * C;
    const double count = (double)hw * cg;
    /* the work area behind the statistics (const: the caller's buffer) */
    float *sdy = (float *)stats + (size_t)n * groups * 2, *sdyx = sdy + C, *ca = sdyx + C,
          *cb = ca + C;
    memset(dgamma, 0, C * sizeof *dgamma);
    memset(dbeta, 0, C * sizeof *dbeta);
    for (uint32_t i = 0; i < n; i++) {
        const float *xi = x + i * size, *dyi = dy + i * size, *st = stats + (size_t)i * groups * 2;
        gn_grad_sums(xi, dyi, hw, C, sdy, sdyx);
        for (uint32_t g = 0; g < groups; g++) {
            const float m = st[2 * g], rstd = st[2 * g + 1];
            /* with xhat = (x - m) rstd: sum dy xhat = rstd (sum dy x - m sum dy) */
            double sg = 0, sgx = 0;
            for (uint32_t c = g * cg; c < (g + 1) * cg; c++) {
                double dyxhat = rstd * ((double)sdyx[c] - (double)m * sdy[c]);
                dgamma[c] += (float)dyxhat;
                dbeta[c] += sdy[c];
                sg += (double)gamma[c] * sdy[c];
                sgx += (double)gamma[c] * dyxhat;
            }
            /* dx = rstd (dy gamma - sg/count - xhat sgx/count)
             *    = (rstd gamma) dy + (-rstd^2 sgx/count) x + rstd (m rstd sgx - sg)/count */
            const double mg = sg / count, mgx = sgx / count;
            const float b = (float)(-(double)rstd * rstd * mgx);
            const float k = (float)(rstd * ((double)m * rstd * mgx - mg));
            for (uint32_t c = g * cg; c < (g + 1) * cg; c++) {
                ca[c] = rstd * gamma[c];
                cb[c] = b;
                sdy[c] = k; /* reused: the constant term per channel */
            }
        }
        if (!dx)
            continue;
        gn_grad_input(xi, dyi, hw, C, ca, cb, sdy, dx + i * size);
    }
}

/* ---- element-wise ---- */

void model_relu_forward(const float *x, size_t count, float *y)
{
    for (size_t i = 0; i < count; i++)
        y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void model_relu_backward(const float *y, const float *dy, size_t count, float *dx)
{
    /* both loads unconditional: GCC vectorises this form, not a
     * conditional load of dy */
    for (size_t i = 0; i < count; i++) {
        float d = dy[i], v = y[i];
        dx[i] = v > 0.0f ? d : 0.0f;
    }
}

void model_dropout_forward(const float *x, size_t count, float rate, model_rng *rng, float *y,
                           float *mask)
{
    assert(rate >= 0.0f && rate < 1.0f);
    const float scale = 1.0f / (1.0f - rate);
    for (size_t i = 0; i < count; i++) {
        mask[i] = model_rng_uniform(rng) < rate ? 0.0f : scale;
        y[i] = x[i] * mask[i];
    }
}

void model_dropout_backward(const float *dy, const float *mask, size_t count, float *dx)
{
    for (size_t i = 0; i < count; i++)
        dx[i] = dy[i] * mask[i];
}

/* ---- dense ---- */

void model_dense_forward(uint32_t in, uint32_t out, const float *x, uint32_t n, const float *w,
                         const float *b, int relu, float *y)
{
    /* y = 1 b^T (broadcast) then y += x W^T: the bias costs one copy per
     * row instead of a separate pass. */
    fill_bias(y, n, out, b);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)out, (int)in, 1.0f, x,
                (int)in, w, (int)in, 1.0f, y, (int)out);
    if (relu)
        model_relu_forward(y, (size_t)n * out, y);
}

void model_dense_backward(uint32_t in, uint32_t out, const float *x, uint32_t n, const float *w,
                          const float *dy, const float *ones, float *dw, float *db, float *dx)
{
    /* dW = dy^T x (out x in) */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)out, (int)in, (int)n, 1.0f, dy,
                (int)out, x, (int)in, 0.0f, dw, (int)in);
    /* db = dy^T 1 */
    cblas_sgemv(CblasRowMajor, CblasTrans, (int)n, (int)out, 1.0f, dy, (int)out, ones, 1, 0.0f, db,
                1);
    if (dx)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)in, (int)out, 1.0f, dy,
                    (int)out, w, (int)in, 0.0f, dx, (int)in);
}

/* ---- loss ---- */

void model_softmax(float *z, uint32_t n, uint32_t classes)
{
    for (uint32_t i = 0; i < n; i++) {
        float *r = z + (size_t)i * classes;
        float mx = r[0];
        for (uint32_t c = 1; c < classes; c++)
            mx = r[c] > mx ? r[c] : mx;
        float s = 0.0f;
        for (uint32_t c = 0; c < classes; c++) {
            r[c] = expf(r[c] - mx);
            s += r[c];
        }
        float inv = 1.0f / s;
        for (uint32_t c = 0; c < classes; c++)
            r[c] *= inv;
    }
}

double model_xent_backward(const float *p, const uint16_t *labels, uint32_t n, uint32_t classes,
                           float *dz)
{
    double total = 0.0;
    const float inv_n = 1.0f / (float)n;
    for (uint32_t i = 0; i < n; i++) {
        const float *pr = p + (size_t)i * classes;
        float *dr = dz + (size_t)i * classes;
        float py = pr[labels[i]];
        total -= log((double)(py > MODEL_PROB_FLOOR ? py : MODEL_PROB_FLOOR));
        for (uint32_t c = 0; c < classes; c++)
            dr[c] = pr[c] * inv_n;
        dr[labels[i]] -= inv_n;
    }
    return total / n;
}
