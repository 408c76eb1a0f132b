/* model_wino — Winograd minimal filtering F(m x m, r x r) for stride-1
 * convolutions, forward and backward, through cblas_sgemm.
 *
 * A K x K convolution computes each output with K*K multiply-adds per
 * input channel. Winograd's algorithm (Lavin & Gray 2016) computes an m x m
 * tile of outputs from an alpha x alpha tile of inputs (alpha = m + r - 1)
 * as
 *     Y = A^T [ (G g G^T) .* (B^T d B) ] A
 * so the multiplications per output fall from r*r to alpha^2 / m^2: for
 * F(2x2, 5x5) 36/4 = 9 instead of 25 (2.8x fewer), for F(4x4, 3x3)
 * 36/16 = 2.25 instead of 9 (4x fewer). Summed over input channels, the
 * element-wise product becomes alpha^2 independent matrix products
 *     M_xi (tiles x Cout) = V_xi (tiles x Cin) U_xi^T
 * one cblas_sgemm each; the transforms (B^T d B of every input tile, A^T M A
 * of every output tile, G g G^T of every filter) are small loops vectorised
 * over the channels, which NHWC makes contiguous.
 *
 * Backward is the exact adjoint of that computation (so the gradient is
 * that of the function the forward computed):
 *     dM = A dY A^T,  dU_xi = dM_xi^T V_xi,  dg = G^T dU G,
 *     dV_xi = dM_xi U_xi,  dd = B dV B^T  (added onto overlapping tiles).
 *
 * The matrices come from Toom-Cook interpolation at the points
 * 0, 1, -1, 2, -2, 1/2, -1/2 (the first alpha - 1 of them) and infinity,
 * computed in double at plan time. Their conditioning grows with alpha;
 * alpha <= 6 (F(2,5), F(4,3), F(2,3)) keeps float32 results within ~1e-5
 * relative of direct convolution (tests/test_model_cnn.c measures it).
 *
 * Layouts: V (kept from forward to backward) is tiles x alpha^2 x Cin,
 * tile t = (sample, tile row, tile column); U is alpha^2 x Cout x Cin.
 */
#ifndef MODEL_WINOGRAD_H
#define MODEL_WINOGRAD_H

#include <stddef.h>
#include <stdint.h>

#define MODEL_WINO_ALPHA_MAX 8u

typedef struct model_wino {
    uint32_t m, r, alpha;
    float at[MODEL_WINO_ALPHA_MAX * MODEL_WINO_ALPHA_MAX]; /* A^T: m x alpha */
    float g[MODEL_WINO_ALPHA_MAX * MODEL_WINO_ALPHA_MAX];  /* G: alpha x r */
    float bt[MODEL_WINO_ALPHA_MAX * MODEL_WINO_ALPHA_MAX]; /* B^T: alpha x alpha */
} model_wino;

/* The matrices of F(m x m, r x r). 0, or -1 if m + r - 1 is outside
 * [2, MODEL_WINO_ALPHA_MAX] or m, r is 0. */
int model_wino_init(model_wino *w, uint32_t m, uint32_t r);

/* The convolution kernels behind model_conv_forward/backward when a conv
 * is planned as Winograd (model/layers.h has the contracts). saved holds
 * U and V from forward to backward. */
struct model_conv;
size_t model_wino_saved_floats(const struct model_conv *cv, uint32_t batch);
size_t model_wino_scratch_floats(const struct model_conv *cv, uint32_t batch);
void model_wino_forward(const struct model_conv *cv, const float *x, uint32_t n, const float *w,
                        const float *b, int relu, float *y, float *saved, float *scratch);
void model_wino_backward(const struct model_conv *cv, const float *x, uint32_t n, const float *w,
                         const float *dy, float *dw, float *db, float *dx, const float *saved,
                         float *scratch);

#endif
