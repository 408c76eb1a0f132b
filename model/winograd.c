#include "model/winograd.h"

#include <assert.h>
#include <cblas.h>
#include <string.h>

#include "common/simd.h"
#include "model/layers.h"

/* Tiles are transformed and multiplied in chunks of WINO_CHUNK_FLOATS of
 * per-chunk data (the M or dM and dV matrices of the chunk's tiles), so a
 * chunk stays in the L2/L3 cache between its transform and its products;
 * each chunk is alpha^2 sgemm calls, so a chunk too small pays the calls'
 * overhead. 512 K floats (2 MB): of 128 K, 512 K, 2 M and 8 M floats the
 * fastest on the 5x5 convolution of 32 to 64 channels (docs/BENCHMARKS.md,
 * "cnn"; 2 M and 8 M were 25-65% slower). The chunking depends only on the
 * layer's shape, so the summation order of dU is fixed. */
#define WINO_CHUNK_FLOATS (1u << 19)

int model_wino_init(model_wino *w, uint32_t m, uint32_t r)
{
    static const double pts[MODEL_WINO_ALPHA_MAX - 1] = {0, 1, -1, 2, -2, 0.5, -0.5};
    memset(w, 0, sizeof *w);
    if (!m || !r || m + r - 1 < 2 || m + r - 1 > MODEL_WINO_ALPHA_MAX)
        return -1;
    const uint32_t A = m + r - 1, P = A - 1; /* P finite points and infinity */
    w->m = m;
    w->r = r;
    w->alpha = A;
    /* A^T[i][j] = p_j^i; the infinity column picks the top coefficient */
    for (uint32_t j = 0; j < P; j++) {
        double pw = 1;
        for (uint32_t i = 0; i < m; i++, pw *= pts[j])
            w->at[i * A + j] = (float)pw;
    }
    w->at[(m - 1) * A + P] = 1;
    /* G[j][k] = p_j^k / f_j, f_j = prod_{l != j} (p_j - p_l) */
    for (uint32_t j = 0; j < P; j++) {
        double f = 1, pw = 1;
        for (uint32_t l = 0; l < P; l++)
            f *= l == j ? 1 : pts[j] - pts[l];
        for (uint32_t k = 0; k < r; k++, pw *= pts[j])
            w->g[j * r + k] = (float)(pw / f);
    }
    w->g[P * r + r - 1] = 1;
    /* B^T row j: coefficients of prod_{l != j} (x - p_l); row P (infinity):
     * of prod_l (x - p_l) — the Lagrange numerators and the monic
     * polynomial vanishing on every point */
    for (uint32_t j = 0; j <= P; j++) {
        double c[MODEL_WINO_ALPHA_MAX + 1] = {1};
        uint32_t deg = 0;
        for (uint32_t l = 0; l < P; l++) {
            if (l == j)
                continue;
            for (uint32_t n = deg + 1; n > 0; n--)
                c[n] = c[n - 1] - pts[l] * c[n];
            c[0] = -pts[l] * c[0];
            deg++;
        }
        for (uint32_t n = 0; n <= deg; n++)
            w->bt[j * A + n] = (float)c[n];
    }
    return 0;
}

/* ---- sizes ---- */

typedef struct wino_dims {
    uint32_t A, A2, m, r, ci, co, th, tw;
    size_t tiles, chunk; /* tiles in the batch; tiles per chunk */
} wino_dims;

static wino_dims wino_dims_of(const model_conv *cv, uint32_t n)
{
    wino_dims d;
    d.A = cv->wino.alpha;
    d.A2 = d.A * d.A;
    d.m = cv->wino.m;
    d.r = cv->wino.r;
    d.ci = cv->in.c;
    d.co = cv->out.c;
    d.th = (cv->out.h + d.m - 1) / d.m;
    d.tw = (cv->out.w + d.m - 1) / d.m;
    d.tiles = (size_t)n * d.th * d.tw;
    d.chunk = WINO_CHUNK_FLOATS / ((size_t)d.A2 * (d.ci + d.co));
    if (d.chunk < 1)
        d.chunk = 1;
    if (d.chunk > d.tiles)
        d.chunk = d.tiles;
    return d;
}

size_t model_wino_saved_floats(const model_conv *cv, uint32_t batch)
{
    wino_dims d = wino_dims_of(cv, batch);
    return (size_t)d.A2 * d.co * d.ci + d.tiles * d.A2 * d.ci;
}

/* Two per-tile temporaries, then the chunk matrices (dM and dV, or M),
 * then dU. */
size_t model_wino_scratch_floats(const model_conv *cv, uint32_t batch)
{
    wino_dims d = wino_dims_of(cv, batch);
    size_t cmax = d.ci > d.co ? d.ci : d.co;
    return 2 * (size_t)d.A2 * cmax + d.chunk * d.A2 * (d.ci + d.co) + (size_t)d.A2 * d.co * d.ci;
}

/* The transforms are element-wise over channels, so the vector width does
 * not change a single result: they are SIMD_CLONES (common/simd.h). */

/* A linear combination o[e] = sum_k c_k s_k[e] of at most LC_TERMS_MAX
 * vectors with nonzero coefficients: the building block of every
 * transform. Computed in one pass with the sum in a register (a chain of
 * o += c s passes stalls on reloading o), and with the term count a
 * constant in each case so the compiler unrolls the sum and vectorises
 * over e. To add onto o, give (1, o) as the first term. */
#define LC_TERMS_MAX (MODEL_WINO_ALPHA_MAX + 1)

typedef struct wino_lc {
    uint32_t n;
    float c[LC_TERMS_MAX];
    const float *s[LC_TERMS_MAX];
} wino_lc;

static inline void lc_add(wino_lc *l, float c, const float *s)
{
    if (c == 0.0f)
        return;
    assert(l->n < LC_TERMS_MAX);
    l->c[l->n] = c;
    l->s[l->n++] = s;
}

/* One case per term count, written out so that the compiler keeps the sum
 * in registers and vectorises over e (generated; the sum is left to right,
 * c0 s0 + c1 s1 + ..., the same order whatever the vector width). Terms
 * may alias o only element for element (the (1, o) accumulate form). */
static inline __attribute__((always_inline)) void lc_run(const wino_lc *l, float *o, size_t len)
{
    switch (l->n) {
    case 1: {
        const float c0 = l->c[0], *s0 = l->s[0];
        for (size_t e = 0; e < len; e++)
            o[e] = c0 * s0[e];
        return;
    }
    case 2: {
        const float c0 = l->c[0], *s0 = l->s[0];
        const float c1 = l->c[1], *restrict s1 = l->s[1];
        for (size_t e = 0; e < len; e++)
            o[e] = c0 * s0[e] + c1 * s1[e];
        return;
    }
    case 3: {
        const float c0 = l->c[0], *s0 = l->s[0];
        const float c1 = l->c[1], *restrict s1 = l->s[1];
        const float c2 = l->c[2], *restrict s2 = l->s[2];
        for (size_t e = 0; e < len; e++)
            o[e] = c0 * s0[e] + c1 * s1[e] + c2 * s2[e];
        return;
    }
    case 4: {
        const float c0 = l->c[0], *s0 = l->s[0];
        const float c1 = l->c[1], *restrict s1 = l->s[1];
        const float c2 = l->c[2], *restrict s2 = l->s[2];
        const float c3 = l->c[3], *restrict s3 = l->s[3];
        for (size_t e = 0; e < len; e++)
            o[e] = c0 * s0[e] + c1 * s1[e] + c2 * s2[e] + c3 * s3[e];
        return;
    }
    case 5: {
        const float c0 = l->c[0], *s0 = l->s[0];
        const float c1 = l->c[1], *restrict s1 = l->s[1];
        const float c2 = l->c[2], *restrict s2 = l->s[2];
        const float c3 = l->c[3], *restrict s3 = l->s[3];
        const float c4 = l->c[4], *restrict s4 = l->s[4];
        for (size_t e = 0; e < len; e++)
            o[e] = c0 * s0[e] + c1 * s1[e] + c2 * s2[e] + c3 * s3[e] + c4 * s4[e];
        return;
    }
    case 6: {
        const float c0 = l->c[0], *s0 = l->s[0];
        const float c1 = l->c[1], *restrict s1 = l->s[1];
        const float c2 = l->c[2], *restrict s2 = l->s[2];
        const float c3 = l->c[3], *restrict s3 = l->s[3];
        const float c4 = l->c[4], *restrict s4 = l->s[4];
        const float c5 = l->c[5], *restrict s5 = l->s[5];
        for (size_t e = 0; e < len; e++)
            o[e] = c0 * s0[e] + c1 * s1[e] + c2 * s2[e] + c3 * s3[e] + c4 * s4[e] + c5 * s5[e];
        return;
    }
    case 7: {
        const float c0 = l->c[0], *s0 = l->s[0];
        const float c1 = l->c[1], *restrict s1 = l->s[1];
        const float c2 = l->c[2], *restrict s2 = l->s[2];
        const float c3 = l->c[3], *restrict s3 = l->s[3];
        const float c4 = l->c[4], *restrict s4 = l->s[4];
        const float c5 = l->c[5], *restrict s5 = l->s[5];
        const float c6 = l->c[6], *restrict s6 = l->s[6];
        for (size_t e = 0; e < len; e++)
            o[e] = c0 * s0[e] + c1 * s1[e] + c2 * s2[e] + c3 * s3[e] + c4 * s4[e] + c5 * s5[e] +
                   c6 * s6[e];
        return;
    }
    case 8: {
        const float c0 = l->c[0], *s0 = l->s[0];
        const float c1 = l->c[1], *restrict s1 = l->s[1];
        const float c2 = l->c[2], *restrict s2 = l->s[2];
        const float c3 = l->c[3], *restrict s3 = l->s[3];
        const float c4 = l->c[4], *restrict s4 = l->s[4];
        const float c5 = l->c[5], *restrict s5 = l->s[5];
        const float c6 = l->c[6], *restrict s6 = l->s[6];
        const float c7 = l->c[7], *restrict s7 = l->s[7];
        for (size_t e = 0; e < len; e++)
            o[e] = c0 * s0[e] + c1 * s1[e] + c2 * s2[e] + c3 * s3[e] + c4 * s4[e] + c5 * s5[e] +
                   c6 * s6[e] + c7 * s7[e];
        return;
    }
    case 9: {
        const float c0 = l->c[0], *s0 = l->s[0];
        const float c1 = l->c[1], *restrict s1 = l->s[1];
        const float c2 = l->c[2], *restrict s2 = l->s[2];
        const float c3 = l->c[3], *restrict s3 = l->s[3];
        const float c4 = l->c[4], *restrict s4 = l->s[4];
        const float c5 = l->c[5], *restrict s5 = l->s[5];
        const float c6 = l->c[6], *restrict s6 = l->s[6];
        const float c7 = l->c[7], *restrict s7 = l->s[7];
        const float c8 = l->c[8], *restrict s8 = l->s[8];
        for (size_t e = 0; e < len; e++)
            o[e] = c0 * s0[e] + c1 * s1[e] + c2 * s2[e] + c3 * s3[e] + c4 * s4[e] + c5 * s5[e] +
                   c6 * s6[e] + c7 * s7[e] + c8 * s8[e];
        return;
    }
    default:
        memset(o, 0, len * sizeof *o);
    }
}

/* ---- transforms ---- */

/* U[a][b][co][:] = (G g G^T)[a][b] for every filter co. */
SIMD_CLONES static void wino_weights(const model_conv *cv, const wino_dims *d, const float *w,
                                     float *u, float *tmp)
{
    const model_wino *wn = &cv->wino;
    const uint32_t A = d->A, r = d->r;
    const size_t rc = (size_t)r * d->ci;
    for (uint32_t co = 0; co < d->co; co++) {
        const float *g = w + co * r * rc;
        for (uint32_t a = 0; a < A; a++) { /* tmp[a] = sum_ky G[a][ky] g[ky] */
            wino_lc l = {0};
            for (uint32_t ky = 0; ky < r; ky++)
                lc_add(&l, wn->g[a * r + ky], g + ky * rc);
            lc_run(&l, tmp + a * rc, rc);
        }
        for (uint32_t a = 0; a < A; a++) /* U[a][b] = sum_kx tmp[a][kx] G[b][kx] */
            for (uint32_t b = 0; b < A; b++) {
                wino_lc l = {0};
                for (uint32_t kx = 0; kx < r; kx++)
                    lc_add(&l, wn->g[b * r + kx], tmp + (a * r + kx) * d->ci);
                lc_run(&l, u + (((size_t)a * A + b) * d->co + co) * d->ci, d->ci);
            }
    }
}

/* dW[co] = G^T dU[.][.][co] G, the adjoint of wino_weights. */
SIMD_CLONES static void wino_weights_adjoint(const model_conv *cv, const wino_dims *d,
                                             const float *du, float *dw, float *tmp)
{
    const model_wino *wn = &cv->wino;
    const uint32_t A = d->A, r = d->r;
    const size_t rc = (size_t)r * d->ci;
    for (uint32_t co = 0; co < d->co; co++) {
        for (uint32_t a = 0; a < A; a++) /* tmp[a][kx] = sum_b dU[a][b] G[b][kx] */
            for (uint32_t kx = 0; kx < r; kx++) {
                wino_lc l = {0};
                for (uint32_t b = 0; b < A; b++)
                    lc_add(&l, wn->g[b * r + kx], du + (((size_t)a * A + b) * d->co + co) * d->ci);
                lc_run(&l, tmp + (a * r + kx) * d->ci, d->ci);
            }
        for (uint32_t ky = 0; ky < r; ky++) { /* dg[ky] = sum_a G[a][ky] tmp[a] */
            wino_lc l = {0};
            for (uint32_t a = 0; a < A; a++)
                lc_add(&l, wn->g[a * r + ky], tmp + a * rc);
            lc_run(&l, dw + (co * r + ky) * rc, rc);
        }
    }
}

/* Where tile t lies: its sample and the input row/column of its corner. */
static void wino_tile(const model_conv *cv, const wino_dims *d, size_t t, size_t *sample, long *y0,
                      long *x0)
{
    size_t per = (size_t)d->th * d->tw, q = t % per;
    *sample = t / per;
    *y0 = (long)(q / d->tw * d->m) - (long)cv->pad;
    *x0 = (long)(q % d->tw * d->m) - (long)cv->pad;
}

/* v[a][b][:] = (B^T dtile B)[a][b] for input tile t (zero outside the
 * image). Rows of the tile that lie inside the image horizontally are read
 * in place; a tile cut by the left or right border is first copied into
 * dt with zeros. dt and tmp: alpha^2 x Cin each. */
SIMD_CLONES static void wino_input(const model_conv *cv, const wino_dims *d, const float *x,
                                   size_t t, float *v, float *dt, float *tmp)
{
    const model_wino *wn = &cv->wino;
    const uint32_t A = d->A, C = d->ci, H = cv->in.h, W = cv->in.w;
    const size_t row = (size_t)A * C;
    size_t i;
    long y0, x0;
    wino_tile(cv, d, t, &i, &y0, &x0);
    const float *img = x + i * H * W * C;
    const float *rows[MODEL_WINO_ALPHA_MAX]; /* NULL: a row of zeros */
    long xa = x0 < 0 ? -x0 : 0, xb = x0 + (long)A > (long)W ? (long)W - x0 : (long)A;
    for (uint32_t k = 0; k < A; k++) {
        long iy = y0 + k;
        rows[k] = NULL;
        if (iy < 0 || iy >= (long)H || xb <= xa)
            continue;
        const float *src = img + ((size_t)iy * W + (size_t)(x0 + xa)) * C;
        if (xa == 0 && xb == (long)A) {
            rows[k] = src;
            continue;
        }
        float *o = dt + k * row;
        memset(o, 0, (size_t)xa * C * sizeof *o);
        memcpy(o + xa * C, src, (size_t)(xb - xa) * C * sizeof *o);
        memset(o + xb * C, 0, (size_t)(A - xb) * C * sizeof *o);
        rows[k] = o;
    }
    for (uint32_t a = 0; a < A; a++) { /* tmp[a] = sum_k B^T[a][k] rows[k] */
        wino_lc l = {0};
        for (uint32_t k = 0; k < A; k++)
            if (rows[k])
                lc_add(&l, wn->bt[a * A + k], rows[k]);
        lc_run(&l, tmp + a * row, row);
    }
    for (uint32_t a = 0; a < A; a++) /* v[a][b] = sum_j tmp[a][j] B^T[b][j] */
        for (uint32_t b = 0; b < A; b++) {
            wino_lc l = {0};
            for (uint32_t j = 0; j < A; j++)
                lc_add(&l, wn->bt[b * A + j], tmp + ((size_t)a * A + j) * C);
            lc_run(&l, v + ((size_t)a * A + b) * C, C);
        }
}

/* dx += B dv B^T of tile t, the adjoint of wino_input (positions outside
 * the image dropped). tmp: alpha^2 x Cin. */
SIMD_CLONES static void wino_input_adjoint(const model_conv *cv, const wino_dims *d,
                                           const float *dv, size_t t, float *dx, float *tmp)
{
    const model_wino *wn = &cv->wino;
    const uint32_t A = d->A, C = d->ci, H = cv->in.h, W = cv->in.w;
    const size_t row = (size_t)A * C;
    size_t i;
    long y0, x0;
    wino_tile(cv, d, t, &i, &y0, &x0);
    float *img = dx + i * H * W * C;
    for (uint32_t k = 0; k < A; k++) {
        long iy = y0 + k;
        if (iy < 0 || iy >= (long)H)
            continue;
        wino_lc l = {0}; /* tmp[k] = sum_a B^T[a][k] dv[a] */
        for (uint32_t a = 0; a < A; a++)
            lc_add(&l, wn->bt[a * A + k], dv + a * row);
        lc_run(&l, tmp + k * row, row);
        for (uint32_t j = 0; j < A; j++) { /* dx[k][j] += sum_b tmp[k][b] B^T[b][j] */
            long ix = x0 + j;
            if (ix < 0 || ix >= (long)W)
                continue;
            float *o = img + ((size_t)iy * W + (size_t)ix) * C;
            wino_lc lj = {0};
            lc_add(&lj, 1.0f, o);
            for (uint32_t b = 0; b < A; b++)
                lc_add(&lj, wn->bt[b * A + j], tmp + ((size_t)k * A + b) * C);
            lc_run(&lj, o, C);
        }
    }
}

/* y tile t = A^T M A (+ b, ReLU), cropped to the output. M: alpha^2 x
 * Cout; tmp: m x alpha x Cout. */
SIMD_CLONES static void wino_output(const model_conv *cv, const wino_dims *d, const float *mt,
                                    size_t t, const float *bias, int relu, float *y, float *tmp)
{
    const model_wino *wn = &cv->wino;
    const uint32_t A = d->A, C = d->co, OH = cv->out.h, OW = cv->out.w;
    const size_t row = (size_t)A * C;
    size_t per = (size_t)d->th * d->tw, q = t % per, i = t / per;
    size_t oy0 = q / d->tw * d->m, ox0 = q % d->tw * d->m;
    for (uint32_t r = 0; r < d->m && oy0 + r < OH; r++) {
        wino_lc l = {0}; /* tmp[r] = sum_a A^T[r][a] M[a] */
        for (uint32_t a = 0; a < A; a++)
            lc_add(&l, wn->at[r * A + a], mt + a * row);
        lc_run(&l, tmp + r * row, row);
        for (uint32_t c = 0; c < d->m && ox0 + c < OW; c++) {
            float *o = y + ((i * OH + oy0 + r) * OW + ox0 + c) * C;
            wino_lc lc = {0}; /* y[r][c] = b + sum_b tmp[r][b] A^T[c][b] */
            if (bias)
                lc_add(&lc, 1.0f, bias);
            for (uint32_t b = 0; b < A; b++)
                lc_add(&lc, wn->at[c * A + b], tmp + ((size_t)r * A + b) * C);
            lc_run(&lc, o, C);
            if (relu)
                for (uint32_t e = 0; e < C; e++)
                    o[e] = o[e] > 0.0f ? o[e] : 0.0f;
        }
    }
}

/* dM of tile t = A dY A^T, the adjoint of wino_output (outputs beyond the
 * image count as 0). tmp: alpha x m x Cout. */
SIMD_CLONES static void wino_output_adjoint(const model_conv *cv, const wino_dims *d,
                                            const float *dy, size_t t, float *dm, float *tmp)
{
    const model_wino *wn = &cv->wino;
    const uint32_t A = d->A, C = d->co, OH = cv->out.h, OW = cv->out.w;
    size_t per = (size_t)d->th * d->tw, q = t % per, i = t / per;
    size_t oy0 = q / d->tw * d->m, ox0 = q % d->tw * d->m;
    for (uint32_t a = 0; a < A; a++)
        for (uint32_t c = 0; c < d->m; c++) { /* tmp[a][c] = sum_r A^T[r][a] dY[r][c] */
            wino_lc l = {0};
            for (uint32_t r = 0; r < d->m && oy0 + r < OH && ox0 + c < OW; r++)
                lc_add(&l, wn->at[r * A + a], dy + ((i * OH + oy0 + r) * OW + ox0 + c) * C);
            lc_run(&l, tmp + ((size_t)a * d->m + c) * C, C);
        }
    for (uint32_t a = 0; a < A; a++) /* dM[a][b] = sum_c tmp[a][c] A^T[c][b] */
        for (uint32_t b = 0; b < A; b++) {
            wino_lc l = {0};
            for (uint32_t c = 0; c < d->m; c++)
                lc_add(&l, wn->at[c * A + b], tmp + ((size_t)a * d->m + c) * C);
            lc_run(&l, dm + ((size_t)a * A + b) * C, C);
        }
}

/* ---- the convolution ---- */

void model_wino_forward(const model_conv *cv, const float *x, uint32_t n, const float *w,
                        const float *b, int relu, float *y, float *saved, float *scratch)
{
    const wino_dims d = wino_dims_of(cv, n);
    assert(cv->stride == 1 && d.r == cv->k);
    const size_t cmax = d.ci > d.co ? d.ci : d.co;
    float *t1 = scratch, *t2 = scratch + (size_t)d.A2 * cmax;
    float *mc = t2 + (size_t)d.A2 * cmax; /* chunk x alpha^2 x Cout */
    float *u = saved, *v = saved + (size_t)d.A2 * d.co * d.ci;
    const int vs = (int)(d.A2 * d.ci), ms = (int)(d.A2 * d.co); /* row strides of V and M */
    wino_weights(cv, &d, w, u, t1);
    for (size_t t0 = 0; t0 < d.tiles; t0 += d.chunk) {
        size_t tc = d.tiles - t0 < d.chunk ? d.tiles - t0 : d.chunk;
        for (size_t t = t0; t < t0 + tc; t++)
            wino_input(cv, &d, x, t, v + t * d.A2 * d.ci, t1, t2);
        for (uint32_t xi = 0; xi < d.A2; xi++) /* M_xi = V_xi U_xi^T */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)tc, (int)d.co, (int)d.ci,
                        1.0f, v + t0 * d.A2 * d.ci + xi * d.ci, vs, u + (size_t)xi * d.co * d.ci,
                        (int)d.ci, 0.0f, mc + xi * d.co, ms);
        for (size_t t = t0; t < t0 + tc; t++)
            wino_output(cv, &d, mc + (t - t0) * d.A2 * d.co, t, b, relu, y, t1);
    }
}

void model_wino_backward(const model_conv *cv, const float *x, uint32_t n, const float *w,
                         const float *dy, float *dw, float *db, float *dx, const float *saved,
                         float *scratch)
{
    const wino_dims d = wino_dims_of(cv, n);
    const size_t cmax = d.ci > d.co ? d.ci : d.co;
    float *t1 = scratch, *t2 = scratch + (size_t)d.A2 * cmax;
    float *dmc = t2 + (size_t)d.A2 * cmax;    /* chunk x alpha^2 x Cout */
    float *dvc = dmc + d.chunk * d.A2 * d.co; /* chunk x alpha^2 x Cin */
    float *du = dvc + d.chunk * d.A2 * d.ci;  /* alpha^2 x Cout x Cin */
    const float *u = saved, *v = saved + (size_t)d.A2 * d.co * d.ci;
    const int vs = (int)(d.A2 * d.ci), ms = (int)(d.A2 * d.co);
    (void)x;
    (void)w;
    if (db) {
        const size_t rows = (size_t)n * cv->out.h * cv->out.w;
        memset(db, 0, d.co * sizeof *db);
        for (size_t r = 0; r < rows; r++)
            for (uint32_t c = 0; c < d.co; c++)
                db[c] += dy[r * d.co + c];
    }
    if (dx)
        memset(dx, 0, (size_t)n * model_shape_size(cv->in) * sizeof *dx);
    for (size_t t0 = 0; t0 < d.tiles; t0 += d.chunk) {
        size_t tc = d.tiles - t0 < d.chunk ? d.tiles - t0 : d.chunk;
        for (size_t t = t0; t < t0 + tc; t++)
            wino_output_adjoint(cv, &d, dy, t, dmc + (t - t0) * d.A2 * d.co, t1);
        for (uint32_t xi = 0; xi < d.A2; xi++) /* dU_xi += dM_xi^T V_xi */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)d.co, (int)d.ci, (int)tc,
                        1.0f, dmc + xi * d.co, ms, v + t0 * d.A2 * d.ci + xi * d.ci, vs,
                        t0 ? 1.0f : 0.0f, du + (size_t)xi * d.co * d.ci, (int)d.ci);
        if (!dx)
            continue;
        for (uint32_t xi = 0; xi < d.A2; xi++) /* dV_xi = dM_xi U_xi */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)tc, (int)d.ci, (int)d.co,
                        1.0f, dmc + xi * d.co, ms, u + (size_t)xi * d.co * d.ci, (int)d.ci, 0.0f,
                        dvc + xi * d.ci, vs);
        for (size_t t = t0; t < t0 + tc; t++)
            wino_input_adjoint(cv, &d, dvc + (t - t0) * d.A2 * d.ci, t, dx, t1);
    }
    wino_weights_adjoint(cv, &d, du, dw, t1);
}
