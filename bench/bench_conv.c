/* bench_conv — where a cnn's training step goes, layer by layer, and what
 * each convolution algorithm costs.
 *
 * Part 1: the layers of a spec (default: the default CNN) at batch 64, one
 * BLAS thread: forward and backward time of each layer (the same kernels
 * and buffers as model_net_loss_grad), the minimum over REPS repetitions
 * of CPU time (CLOCK_PROCESS_CPUTIME_ID), which time-slicing by other
 * processes on a shared machine does not inflate (a busy sibling
 * hyperthread still does). The sum is the step without the optimizer and
 * the batch gather.
 * Part 2: im2col against Winograd on 28x28 images to 32 filters, forward +
 * backward (with the input gradient), over 1..16 input channels: where
 * Winograd starts to pay (model/layers.h, MODEL_WINO_CIN_MIN_K3/K5).
 *
 *   build/bench/bench_conv [reps] [spec]
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/blas.h"
#include "model/layers.h"
#include "model/spec.h"

#define BATCH        64
#define REPS_DEFAULT 7
#define REPS_MAX     1000

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void fill(float *v, size_t n, model_rng *r, float sd)
{
    for (size_t i = 0; i < n; i++)
        v[i] = sd * (float)model_rng_normal(r);
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) {
        fprintf(stderr, "bench_conv: out of memory\n");
        exit(1);
    }
    return p;
}

typedef struct layer_buf {
    float *y, *aux;
    uint32_t *arg;
} layer_buf;

static void layer_forward(const model_op *op, const float *in, layer_buf *b, const float *p,
                          float *scratch, model_rng *r)
{
    switch (op->kind) {
    case MODEL_OP_DENSE:
        model_dense_forward(op->in.c, op->out.c, in, BATCH, p + op->w_off, p + op->b_off, op->relu,
                            b->y);
        break;
    case MODEL_OP_CONV:
        model_conv_forward(&op->conv, in, BATCH, p + op->w_off, op->b_count ? p + op->b_off : NULL,
                           op->relu, b->y, b->aux, scratch);
        break;
    case MODEL_OP_GROUPNORM:
        model_groupnorm_forward(op->in, op->groups, in, BATCH, p + op->w_off, p + op->b_off,
                                op->relu, b->y, b->aux);
        break;
    case MODEL_OP_MAXPOOL: {
        model_pool pl = {.in = op->in, .out = op->out, .k = op->k, .stride = op->stride};
        model_maxpool_forward(&pl, in, BATCH, op->relu, b->y, b->arg);
        break;
    }
    case MODEL_OP_AVGPOOL: {
        model_pool pl = {.in = op->in, .out = op->out, .k = op->k, .stride = op->stride};
        model_avgpool_forward(&pl, in, BATCH, b->y);
        break;
    }
    case MODEL_OP_DROPOUT:
        model_dropout_forward(in, (size_t)BATCH * model_shape_size(op->out), op->rate, r, b->y,
                              b->aux);
        break;
    }
}

static void layer_backward(const model_op *op, const float *in, layer_buf *b, const float *p,
                           float *g, float *dy, float *dx, const float *ones, float *scratch)
{
    if (op->relu)
        model_relu_backward(b->y, dy, (size_t)BATCH * model_shape_size(op->out), dy);
    switch (op->kind) {
    case MODEL_OP_DENSE:
        model_dense_backward(op->in.c, op->out.c, in, BATCH, p + op->w_off, dy, ones, g + op->w_off,
                             g + op->b_off, dx);
        break;
    case MODEL_OP_CONV:
        model_conv_backward(&op->conv, in, BATCH, p + op->w_off, dy, g + op->w_off,
                            op->b_count ? g + op->b_off : NULL, dx, b->aux, scratch);
        break;
    case MODEL_OP_GROUPNORM:
        model_groupnorm_backward(op->in, op->groups, in, BATCH, p + op->w_off, b->aux, dy,
                                 g + op->w_off, g + op->b_off, dx);
        break;
    case MODEL_OP_MAXPOOL:
        if (dx) {
            model_pool pl = {.in = op->in, .out = op->out, .k = op->k, .stride = op->stride};
            model_maxpool_backward(&pl, BATCH, dy, b->arg, dx);
        }
        break;
    case MODEL_OP_AVGPOOL:
        if (dx) {
            model_pool pl = {.in = op->in, .out = op->out, .k = op->k, .stride = op->stride};
            model_avgpool_backward(&pl, BATCH, dy, dx);
        }
        break;
    case MODEL_OP_DROPOUT:
        if (dx)
            model_dropout_backward(dy, b->aux, (size_t)BATCH * model_shape_size(op->out), dx);
        break;
    }
}

static const char *op_name(const model_op *op)
{
    static const char *const names[] = {"dense",   "conv",    "groupnorm",
                                        "maxpool", "avgpool", "dropout"};
    if (op->kind == MODEL_OP_CONV)
        return op->conv.wino.m ? (op->k == 3 ? "conv F(4,3)" : "conv F(2,5)") : "conv im2col";
    return names[op->kind];
}

static int layers(const char *spec, int reps)
{
    model_arch a;
    char msg[MODEL_MSG_MAX] = "";
    if (model_arch_parse(&a, spec, 784, 10, msg, sizeof msg)) {
        fprintf(stderr, "bench_conv: %s\n", msg);
        return 1;
    }
    model_rng r;
    model_rng_seed(&r, 1, 0);
    float *p = xcalloc(a.param_count, sizeof *p), *g = xcalloc(a.param_count, sizeof *g);
    fill(p, a.param_count, &r, 0.05f);
    layer_buf b[MODEL_OPS_MAX];
    size_t widest = 784, scratch_n = 0;
    for (uint32_t l = 0; l < a.op_count; l++) {
        const model_op *op = &a.ops[l];
        size_t out = (size_t)BATCH * model_shape_size(op->out), aux = out;
        if (op->kind == MODEL_OP_CONV) {
            aux = model_conv_saved_floats(&op->conv, BATCH);
            size_t s = model_conv_scratch_floats(&op->conv, BATCH);
            scratch_n = s > scratch_n ? s : scratch_n;
        } else if (op->kind == MODEL_OP_GROUPNORM)
            aux = model_groupnorm_stats_floats(op->in, op->groups, BATCH);
        if (op->kind == MODEL_OP_GROUPNORM)
            for (size_t i = 0; i < op->w_count; i++)
                p[op->w_off + i] = 1.0f;
        b[l] = (layer_buf){xcalloc(out, sizeof(float)), xcalloc(aux, sizeof(float)),
                           xcalloc(out, sizeof(uint32_t))};
        widest = model_shape_size(op->out) > widest ? model_shape_size(op->out) : widest;
    }
    float *x = xcalloc((size_t)BATCH * 784, sizeof *x), *dy = xcalloc(BATCH * widest, sizeof *dy);
    float *dx = xcalloc(BATCH * widest, sizeof *dx), *scratch = xcalloc(scratch_n, sizeof *scratch);
    float ones[BATCH];
    for (int i = 0; i < BATCH; i++)
        ones[i] = 1.0f;
    for (size_t i = 0; i < (size_t)BATCH * 784; i++)
        x[i] = model_rng_uniform(&r);
    double tf[MODEL_OPS_MAX], tb[MODEL_OPS_MAX];
    for (uint32_t l = 0; l < MODEL_OPS_MAX; l++)
        tf[l] = tb[l] = 1e30;
    for (int rep = 0; rep < reps; rep++) {
        const float *in = x;
        for (uint32_t l = 0; l < a.op_count; l++) {
            double t0 = cpu_s();
            layer_forward(&a.ops[l], in, &b[l], p, scratch, &r);
            double t = cpu_s() - t0;
            tf[l] = t < tf[l] ? t : tf[l];
            in = b[l].y;
        }
        for (uint32_t l = a.op_count; l-- > 0;) {
            fill(dy, BATCH * model_shape_size(a.ops[l].out), &r, 0.01f);
            double t0 = cpu_s();
            layer_backward(&a.ops[l], l ? b[l - 1].y : x, &b[l], p, g, dy, l ? dx : NULL, ones,
                           scratch);
            double t = cpu_s() - t0;
            tb[l] = t < tb[l] ? t : tb[l];
        }
    }
    printf("bench_conv layers: spec=%s params=%zu batch=%d blas_threads=1 reps=%d (CPU ms, min)\n",
           spec, a.param_count, BATCH, reps);
    double total = 0;
    for (uint32_t l = 0; l < a.op_count; l++) {
        const model_op *op = &a.ops[l];
        printf("  %2u %-12s %3ux%3ux%4u -> %3ux%3ux%4u  forward %7.3f  backward %7.3f\n", l,
               op_name(op), op->in.h, op->in.w, op->in.c, op->out.h, op->out.w, op->out.c,
               tf[l] * 1e3, tb[l] * 1e3);
        total += tf[l] + tb[l];
    }
    printf("  step_layers_ms=%.2f (forward + backward of every layer)\n", total * 1e3);
    for (uint32_t l = 0; l < a.op_count; l++) {
        free(b[l].y);
        free(b[l].aux);
        free(b[l].arg);
    }
    free(p);
    free(g);
    free(x);
    free(dy);
    free(dx);
    free(scratch);
    return 0;
}

/* forward + backward (with dx) of one convolution, CPU ms, min of reps */
static double conv_ms(const model_conv *cv, int reps, model_rng *r)
{
    size_t in = (size_t)BATCH * model_shape_size(cv->in);
    size_t out = (size_t)BATCH * model_shape_size(cv->out);
    size_t nw = (size_t)cv->out.c * cv->k * cv->k * cv->in.c;
    float *x = xcalloc(in, sizeof *x), *y = xcalloc(out, sizeof *y), *w = xcalloc(nw, sizeof *w);
    float *dw = xcalloc(nw, sizeof *dw), *dx = xcalloc(in, sizeof *dx);
    float *dy = xcalloc(out, sizeof *dy);
    float *saved = xcalloc(model_conv_saved_floats(cv, BATCH), sizeof *saved);
    float *scratch = xcalloc(model_conv_scratch_floats(cv, BATCH), sizeof *scratch);
    fill(x, in, r, 1.0f);
    fill(w, nw, r, 0.1f);
    fill(dy, out, r, 0.01f);
    double best = 1e30;
    for (int rep = 0; rep < reps; rep++) {
        double t0 = cpu_s();
        model_conv_forward(cv, x, BATCH, w, NULL, 1, y, saved, scratch);
        model_conv_backward(cv, x, BATCH, w, dy, dw, NULL, dx, saved, scratch);
        double t = cpu_s() - t0;
        best = t < best ? t : best;
    }
    free(x);
    free(y);
    free(w);
    free(dw);
    free(dx);
    free(dy);
    free(saved);
    free(scratch);
    return best * 1e3;
}

static void algorithms(int reps)
{
    static const uint32_t cins[] = {1, 2, 4, 8, 16, 32};
    model_rng r;
    model_rng_seed(&r, 2, 0);
    printf("bench_conv algorithms: 28x28 images to 32 filters, stride 1, same padding, batch %d, "
           "forward + backward with dx (CPU ms, min of %d)\n",
           BATCH, reps);
    for (uint32_t k = 3; k <= 5; k += 2)
        for (size_t q = 0; q < sizeof cins / sizeof cins[0]; q++) {
            model_conv ci, cw;
            model_shape in = {28, 28, cins[q]};
            model_conv_plan(&ci, in, 32, k, 1, k / 2, MODEL_CONV_IM2COL);
            model_conv_plan(&cw, in, 32, k, 1, k / 2, MODEL_CONV_WINOGRAD);
            double a = conv_ms(&ci, reps, &r), b = conv_ms(&cw, reps, &r);
            model_conv auto_cv;
            model_conv_plan(&auto_cv, in, 32, k, 1, k / 2, MODEL_CONV_AUTO);
            printf("  k=%u cin=%2u  im2col %7.2f  winograd F(%u,%u) %7.2f  ratio %.2f  auto=%s\n",
                   k, cins[q], a, cw.wino.m, k, b, a / b, auto_cv.wino.m ? "winograd" : "im2col");
        }
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : REPS_DEFAULT;
    const char *spec = argc > 2 ? argv[2] : MODEL_CNN_DEFAULT;
    if (reps < 1 || reps > REPS_MAX) {
        fprintf(stderr, "usage: bench_conv [reps 1..%d] [spec]\n", REPS_MAX);
        return 2;
    }
    char note[256];
    if (model_blas_init(note, sizeof note)) /* as murmur does first (model/blas.h) */
        printf("bench_conv: %s\n", note);
    openblas_set_num_threads(1);
    if (layers(spec, reps))
        return 1;
    algorithms(reps);
    printf("  command: build/bench/bench_conv %d %s\n", reps, spec);
    return 0;
}
