/* model_layers — the kernels of model_net's layers, forward and backward,
 * on caller-owned buffers.
 *
 * model_net (model/net.h) strings these together; they are public inside
 * model/ (and to the tests, which check each one against finite
 * differences) but not part of any other folder's contract.
 *
 * Layout: a mini-batch of n images is NHWC, row-major: sample i, row y,
 * column x, channel c is x[((i*H + y)*W + x)*C + c]. Channels are the
 * fastest axis, so the K*C values under one row of a convolution window
 * are contiguous (im2col copies runs, not single floats), the channels of
 * one pixel are one vector for pooling, and a convolution over the whole
 * batch is one matrix product with rows = output pixels. Flattening an
 * image for a dense layer is therefore free: the dense layer reads the
 * H*W*C values of a sample as they lie (index (y*W + x)*C + c).
 *
 * Parameters (each a slice of the net's flat vector):
 * - convolution: W as Cout x (K*K*Cin) row-major, index
 *   W[co*(K*K*Cin) + (ky*K + kx)*Cin + ci], then the bias b[Cout] (absent
 *   when a group normalisation follows: its shift makes a bias redundant).
 * - group normalisation: gamma[C] then beta[C].
 * - dense: W as out x in row-major, then b[out].
 *
 * Gradients: each backward function ADDS nothing; it overwrites its
 * parameter gradients and (when dx is not NULL) the gradient with respect
 * to its input. `relu` fuses a ReLU onto a layer's output: forward writes
 * max(0, z), and backward expects dy already multiplied by the ReLU's
 * derivative (model_relu_backward, which needs only the output y, because
 * y > 0 exactly where z > 0).
 *
 * Compute: convolutions and dense layers are cblas_sgemm calls (one BLAS
 * thread per agent, set by the caller); the other layers are loops written
 * for the compiler to vectorise. Nothing here allocates; the scratch that
 * convolution needs (model_conv_scratch_floats) is the caller's. Results
 * are deterministic for a given BLAS thread count: chunking depends only
 * on the layer's shape.
 */
#ifndef MODEL_LAYERS_H
#define MODEL_LAYERS_H

#include <stddef.h>
#include <stdint.h>

#include "model/rng.h"
#include "model/winograd.h"

/* One image shape, per sample (NHWC). */
typedef struct model_shape {
    uint32_t h, w, c;
} model_shape;

static inline size_t model_shape_size(model_shape s)
{
    return (size_t)s.h * s.w * s.c;
}

/* ---- convolution (2-D, square kernel, zero padding) ----
 *
 * Two algorithms, the same function: im2col (every output pixel's window
 * as a row of a matrix, then one sgemm with the filters) for any stride
 * and kernel, and Winograd (model/winograd.h: 2.8x fewer multiplications
 * for 5x5, 4x fewer for 3x3) for stride-1 3x3 and 5x5 convolutions. */

typedef enum model_conv_algo {
    MODEL_CONV_AUTO = 0, /* Winograd where it applies and pays, else im2col */
    MODEL_CONV_IM2COL,
    MODEL_CONV_WINOGRAD, /* where it applies (stride 1, K 3 or 5), else im2col */
} model_conv_algo;

/* Winograd pays once its sgemms have some depth: over few input channels
 * its transforms cost more than the products they save. Measured on 28x28
 * images to 32 channels, forward + backward (docs/BENCHMARKS.md, "cnn"):
 * 3x3 breaks even at 8 input channels, 5x5 (whose F(2x2) tiles save less)
 * at about 12; above that Winograd wins, 1.5x at 16 channels for 3x3. */
#define MODEL_WINO_CIN_MIN_K3 8u
#define MODEL_WINO_CIN_MIN_K5 16u

typedef struct model_conv {
    model_shape in, out; /* out.h = (in.h + 2 pad - k) / stride + 1, likewise w */
    uint32_t k, stride, pad;
    model_wino wino; /* wino.m > 0: Winograd F(m x m, k x k); 0: im2col */
} model_conv;

/* Fill cv for `in` images, out_c filters of k x k, stride and zero
 * padding (the caller checked that the kernel fits), choosing the
 * algorithm as algo says. */
void model_conv_plan(model_conv *cv, model_shape in, uint32_t out_c, uint32_t k, uint32_t stride,
                     uint32_t pad, model_conv_algo algo);

/* Floats that forward must hand to backward (Winograd's transformed
 * filters and input tiles; 0 for im2col), and floats of scratch that each
 * call needs, for n <= batch samples. */
size_t model_conv_saved_floats(const model_conv *cv, uint32_t batch);
size_t model_conv_scratch_floats(const model_conv *cv, uint32_t batch);

/* y (n x out) = conv(x (n x in), w) + b; b may be NULL (no bias); relu
 * fuses a ReLU. saved: model_conv_saved_floats, read by the backward of
 * the same batch; scratch: model_conv_scratch_floats. */
void model_conv_forward(const model_conv *cv, const float *x, uint32_t n, const float *w,
                        const float *b, int relu, float *y, float *saved, float *scratch);

/* Given dy (n x out, through the ReLU already) and the saved state of the
 * forward on the same x and w: dw (Cout x K*K*Cin), db (Cout; NULL when
 * there is no bias) and, if dx is not NULL, dx (n x in). */
void model_conv_backward(const model_conv *cv, const float *x, uint32_t n, const float *w,
                         const float *dy, float *dw, float *db, float *dx, const float *saved,
                         float *scratch);

/* ---- pooling (square window, no padding) ---- */

typedef struct model_pool {
    model_shape in, out; /* out.h = (in.h - k) / stride + 1, likewise w; out.c = in.c */
    uint32_t k, stride;
} model_pool;

#define MODEL_POOL_WINDOW_MAX 4096u /* K*K of a pooling window (K <= 64) */

/* Max pooling; arg (n x out) records, for each output, the index of the
 * chosen input within the batch (the first maximum in window order); relu
 * fuses a ReLU (max pooling and ReLU commute, so the ReLU runs on the
 * smaller output). */
void model_maxpool_forward(const model_pool *p, const float *x, uint32_t n, int relu, float *y,
                           uint32_t *arg);
/* dx (n x in) from dy (n x out) and the arg of the forward. */
void model_maxpool_backward(const model_pool *p, uint32_t n, const float *dy, const uint32_t *arg,
                            float *dx);
/* Average pooling: y = mean over each window. */
void model_avgpool_forward(const model_pool *p, const float *x, uint32_t n, float *y);
void model_avgpool_backward(const model_pool *p, uint32_t n, const float *dy, float *dx);

/* ---- group normalisation ---- */

/* Per sample and per group of C/groups consecutive channels: mean and
 * variance over the group's H*W*(C/groups) values, then
 * y = (x - mean) / sqrt(var + MODEL_GN_EPS) * gamma[c] + beta[c].
 * stats (model_groupnorm_stats_floats) keeps mean and 1/sqrt(var + eps)
 * per sample and group (n x groups x 2) for backward, then per-channel
 * work space. */
#define MODEL_GN_EPS 1e-5f /* PyTorch's default */
size_t model_groupnorm_stats_floats(model_shape s, uint32_t groups, uint32_t batch);
void model_groupnorm_forward(model_shape s, uint32_t groups, const float *x, uint32_t n,
                             const float *gamma, const float *beta, int relu, float *y,
                             float *stats);
/* dgamma, dbeta (C each) and dx (n x shape; may be NULL); stats as the
 * forward left them (its work space is reused). */
void model_groupnorm_backward(model_shape s, uint32_t groups, const float *x, uint32_t n,
                              const float *gamma, const float *stats, const float *dy,
                              float *dgamma, float *dbeta, float *dx);

/* ---- element-wise ---- */

void model_relu_forward(const float *x, size_t count, float *y);
/* dx = dy where y > 0, else 0 (dx may be dy). */
void model_relu_backward(const float *y, const float *dy, size_t count, float *dx);

/* Inverted dropout: each value is kept with probability 1 - rate and then
 * scaled by 1 / (1 - rate), so the expectation is unchanged and inference
 * needs no dropout at all. mask (count) records the factor (0 or the
 * scale); one model_rng_uniform draw per value, in order. 0 <= rate < 1. */
void model_dropout_forward(const float *x, size_t count, float rate, model_rng *rng, float *y,
                           float *mask);
/* dx = dy * mask (dx may be dy). */
void model_dropout_backward(const float *dy, const float *mask, size_t count, float *dx);

/* ---- dense ---- */

/* y (n x out) = x (n x in) W^T + b, with W out x in; relu fuses a ReLU. */
void model_dense_forward(uint32_t in, uint32_t out, const float *x, uint32_t n, const float *w,
                         const float *b, int relu, float *y);
/* dw (out x in), db (out) and, if dx is not NULL, dx (n x in) = dy W.
 * ones: n floats equal to 1 (db is dy^T 1 as a gemv). */
void model_dense_backward(uint32_t in, uint32_t out, const float *x, uint32_t n, const float *w,
                          const float *dy, const float *ones, float *dw, float *db, float *dx);

/* ---- loss ---- */

/* Smallest probability used in log(): keeps the loss finite when a class
 * probability underflows to 0 (its gradient p - 1 is exact regardless). */
#define MODEL_PROB_FLOOR 1e-30f

/* Row-wise softmax of z (n x classes), in place. */
void model_softmax(float *z, uint32_t n, uint32_t classes);
/* Given probabilities p (n x classes) and labels (< classes, checked by the
 * caller): the mean cross-entropy, and dz = (p - onehot) / n (n x classes). */
double model_xent_backward(const float *p, const uint16_t *labels, uint32_t n, uint32_t classes,
                           float *dz);

#endif
