/* model_arch — a model spec string parsed into the list of layers that
 * model_net runs, with every shape and parameter offset resolved.
 *
 * Grammar (docs/ARCHITECTURE.md, "model specs", and README.md):
 *
 *   spec    = "softmax" | "mlp:" width {"," width} | "cnn" | "cnn:" item {"," item}
 *   item    = input | conv | maxpool | avgpool | dense | dropout
 *   input   = "i" C "x" H "x" W          image shape; first item only
 *   conv    = "c" N "k" K ["s" S] ["p" P] ["g" G]
 *             N filters of K x K, stride S [1], zero padding P [(K-1)/2,
 *             "same" for odd K at stride 1], group normalisation with G
 *             groups [none; G divides N; the convolution then has no
 *             bias], then ReLU
 *   maxpool = "p" K ["s" S]              K x K max pooling, stride S [K]
 *   avgpool = "a" K ["s" S]              K x K average pooling, stride S [K]
 *   dense   = "f" N                      N units (flattening any image), ReLU
 *   dropout = "d" RATE                   inverted dropout, RATE a decimal
 *                                        fraction in (0, 1), e.g. d0.5
 *   every number is a decimal integer without sign or leading zero.
 *
 * Every model ends with a dense layer to `classes` outputs and softmax
 * cross-entropy. "cnn" alone is MODEL_CNN_DEFAULT. Without an input item,
 * a cnn's input_dim must be a square number: the image is 1 x S x S (as
 * Fashion-MNIST's 784 = 28 x 28); otherwise say its shape, whose features
 * are in channel-major (C, H, W) order as in CIFAR's files and PyTorch.
 *
 * The parameter vector is the layers' parameters in spec order
 * (model/layers.h gives each layer's layout), then the output layer's.
 */
#ifndef MODEL_SPEC_H
#define MODEL_SPEC_H

#include <stddef.h>
#include <stdint.h>

#include "model/layers.h"
#include "model/model.h"

/* The documented default CNN: two 3x3 convolutions (32 and 64 filters,
 * "same" padding), each with group normalisation (8 groups) and ReLU and
 * followed by 2x2 max pooling, a dense layer of 256, dropout 0.5 — the
 * two-layer CNN of the Fashion-MNIST benchmark table (0.91-0.93) with
 * group normalisation. 3x3 rather than 5x5: as accurate here, and
 * Winograd F(4x4, 3x3) needs 4x fewer multiplications where F(2x2, 5x5)
 * saves 2.8x (docs/BENCHMARKS.md, "cnn"). */
#define MODEL_CNN_DEFAULT "cnn:c32k3g8,p2,c64k3g8,p2,f256,d0.5"

typedef enum model_op_kind {
    MODEL_OP_DENSE = 0,
    MODEL_OP_CONV,
    MODEL_OP_GROUPNORM,
    MODEL_OP_MAXPOOL,
    MODEL_OP_AVGPOOL,
    MODEL_OP_DROPOUT,
} model_op_kind;

#define MODEL_OPS_MAX    (2u * MODEL_LAYERS_MAX) /* a conv with "g" is two ops */
#define MODEL_KERNEL_MAX 64u                     /* K of a convolution or pooling window */
#define MODEL_STRIDE_MAX 64u
#define MODEL_ACT_MAX    (1u << 24) /* values per sample out of one layer (64 MB) */

typedef struct model_op {
    model_op_kind kind;
    model_shape in, out; /* dense: in/out as 1 x 1 x width */
    uint32_t k, stride, pad, groups;
    float rate;      /* dropout */
    int relu;        /* a ReLU fused onto the output */
    model_conv conv; /* convolution: shapes and the chosen algorithm */
    size_t w_off;    /* weights (conv, dense) or gamma (groupnorm) */
    size_t w_count;  /* 0 when the op has no parameters */
    size_t b_off;    /* bias or beta */
    size_t b_count;  /* 0 when there is none */
} model_op;

typedef struct model_arch {
    int is_cnn;        /* parsed from "cnn...": images, NHWC */
    model_shape input; /* cnn: the image; else 1 x 1 x input_dim */
    uint32_t op_count; /* the last op is the dense output layer */
    model_op ops[MODEL_OPS_MAX];
    size_t param_count;
    int syntax_only; /* parsed by model_spec_check: shapes are nominal */
} model_arch;

/* Parse spec for input_dim features and `classes` outputs. A ReLU that is
 * directly followed by max pooling is moved onto the pooling (the two
 * commute: one pass over the smaller tensor). Errors: ESPEC (msg says what
 * and where; whatever model_spec_check refuses, before any size is
 * checked), EINVAL (input_dim or classes 0), ETOOBIG (a size above its
 * maximum or more than MODEL_PARAMS_MAX parameters). */
int model_arch_parse(model_arch *a, const char *spec, uint32_t input_dim, uint32_t classes,
                     char *msg, size_t msg_len);

#define MODEL_PARAMS_MAX (1ull << 31) /* floats: 8 GiB, far above any model here */

#endif
