#include "model/net.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/layers.h"
#include "model/spec.h"

/* Workspace for one net: the output of every layer for batch_max samples,
 * two gradient buffers, the convolution scratch and the per-layer records
 * (max-pooling choices, dropout masks, group-norm statistics). Checked
 * against this maximum before allocating. */
#define NET_BATCH_MAX     65536u
#define NET_WORKSPACE_MAX (1ull << 30) /* floats: 4 GiB */
/* model_net_evaluate's chunk: the most rows one forward pass takes, and
 * the most it may reserve for them beyond the training batch's workspace */
#define NET_EVAL_CHUNK     256u
#define NET_EVAL_WORKSPACE (8ull << 20) /* floats: 32 MiB */

struct model_net {
    model_arch arch;
    uint32_t input_dim, classes, batch_max;
    uint32_t rows; /* forward workspace: max(batch_max, up to NET_EVAL_CHUNK) */
    float *params;
    float *grads;
    /* workspace, sized at create: the gradients for batch_max rows, the
     * forward buffers for `rows` */
    float *act[MODEL_OPS_MAX];    /* act[l]: output of layer l, batch x out size */
    float *aux[MODEL_OPS_MAX];    /* dropout mask, groupnorm stats, conv saved state */
    uint32_t *arg[MODEL_OPS_MAX]; /* max pooling: the chosen input of each output */
    float *delta[2];              /* batch x largest layer: back-propagated gradient */
    float *scratch;               /* convolution im2col chunk */
    float *ones;                  /* batch_max ones: bias gradients as a gemv */
    float *image;                 /* NHWC copy of a multi-channel input */
    float *input;                 /* gather buffer: batch x input_dim */
    uint16_t *labels;             /* gather buffer: batch */
    model_rng dropout_rng;
};

int model_spec_param_count(const char *spec, uint32_t input_dim, uint32_t classes, size_t *count,
                           char *msg, size_t msg_len)
{
    *count = 0;
    model_arch a;
    int rc = model_arch_parse(&a, spec, input_dim, classes, msg, msg_len);
    if (rc)
        return rc;
    *count = a.param_count;
    return MODEL_OK;
}

/* Floats of workspace layer l needs beyond its output, and whether it
 * records max-pooling choices. */
static size_t net_aux_floats(const model_op *op, uint32_t batch)
{
    if (op->kind == MODEL_OP_DROPOUT)
        return (size_t)batch * model_shape_size(op->out);
    if (op->kind == MODEL_OP_GROUPNORM)
        return model_groupnorm_stats_floats(op->in, op->groups, batch);
    if (op->kind == MODEL_OP_CONV)
        return model_conv_saved_floats(&op->conv, batch);
    return 0;
}

static model_pool net_pool(const model_op *op)
{
    return (model_pool){.in = op->in, .out = op->out, .k = op->k, .stride = op->stride};
}

/* Sizes of the workspace: total floats, the widest layer and the conv
 * scratch. ETOOBIG above NET_WORKSPACE_MAX or when a max-pooling index
 * would not fit 32 bits. */
static int net_workspace(const model_arch *a, uint32_t batch, size_t *widest, size_t *scratch,
                         uint64_t *floats, char *msg, size_t msg_len)
{
    uint64_t total = (uint64_t)batch * model_shape_size(a->input) * 3;
    *widest = model_shape_size(a->input);
    *scratch = 0;
    for (uint32_t l = 0; l < a->op_count; l++) {
        const model_op *op = &a->ops[l];
        size_t out = model_shape_size(op->out);
        total += (uint64_t)batch * out + net_aux_floats(op, batch);
        if (op->kind == MODEL_OP_MAXPOOL) {
            total += (uint64_t)batch * out;
            if ((uint64_t)batch * model_shape_size(op->in) > UINT32_MAX) {
                model_msgf(msg, msg_len, "a batch of %u is too large for max pooling of %zu values",
                           batch, model_shape_size(op->in));
                return MODEL_ETOOBIG;
            }
        }
        if (out > *widest)
            *widest = out;
        if (op->kind == MODEL_OP_CONV) {
            size_t s = model_conv_scratch_floats(&op->conv, batch);
            *scratch = s > *scratch ? s : *scratch;
        }
    }
    total += 2ull * batch * *widest + *scratch;
    *floats = total;
    if (total > NET_WORKSPACE_MAX) {
        model_msgf(msg, msg_len,
                   "%llu floats of workspace for a batch of %u, above the maximum %llu",
                   (unsigned long long)total, batch, (unsigned long long)NET_WORKSPACE_MAX);
        return MODEL_ETOOBIG;
    }
    return MODEL_OK;
}

static int net_alloc(model_net *net, size_t widest, size_t scratch)
{
    const model_arch *a = &net->arch;
    const size_t B = net->rows;
    net->params = calloc(a->param_count, sizeof(float));
    net->grads = calloc(a->param_count, sizeof(float));
    int ok = net->params && net->grads;
    for (uint32_t l = 0; ok && l < a->op_count; l++) {
        const model_op *op = &a->ops[l];
        size_t out = B * model_shape_size(op->out), aux = net_aux_floats(op, net->rows);
        ok = (net->act[l] = malloc(out * sizeof(float))) != NULL;
        if (ok && aux)
            ok = (net->aux[l] = malloc(aux * sizeof(float))) != NULL;
        if (ok && op->kind == MODEL_OP_MAXPOOL)
            ok = (net->arg[l] = malloc(out * sizeof(uint32_t))) != NULL;
    }
    for (int k = 0; ok && k < 2; k++)
        ok = (net->delta[k] = malloc(net->batch_max * widest * sizeof(float))) != NULL;
    if (ok && scratch)
        ok = (net->scratch = malloc(scratch * sizeof(float))) != NULL;
    if (ok && a->input.c > 1 && a->is_cnn)
        ok = (net->image = malloc(B * net->input_dim * sizeof(float))) != NULL;
    if (ok)
        ok = (net->ones = malloc(B * sizeof(float))) &&
             (net->input = malloc(B * net->input_dim * sizeof(float))) &&
             (net->labels = malloc(B * sizeof(uint16_t)));
    if (!ok)
        return MODEL_ENOMEM;
    for (size_t i = 0; i < B; i++)
        net->ones[i] = 1.0f;
    return MODEL_OK;
}

int model_net_create(model_net **out, const char *spec, uint32_t input_dim, uint32_t classes,
                     uint32_t batch_max, char *msg, size_t msg_len)
{
    *out = NULL;
    model_net *net = calloc(1, sizeof *net);
    if (!net)
        return MODEL_ENOMEM;
    int rc = model_arch_parse(&net->arch, spec, input_dim, classes, msg, msg_len);
    if (!rc && !batch_max) {
        model_msgf(msg, msg_len, "batch_max must be positive");
        rc = MODEL_EINVAL;
    }
    if (!rc && batch_max > NET_BATCH_MAX) {
        model_msgf(msg, msg_len, "batch %u above the maximum %u", batch_max, NET_BATCH_MAX);
        rc = MODEL_ETOOBIG;
    }
    size_t widest = 0, scratch = 0;
    uint64_t floats = 0;
    if (!rc)
        rc = net_workspace(&net->arch, batch_max, &widest, &scratch, &floats, msg, msg_len);
    if (rc) {
        free(net);
        return rc;
    }
    /* An evaluation's forward passes take NET_EVAL_CHUNK rows where the
     * workspace for them stays within NET_EVAL_WORKSPACE floats (or the
     * batch's own): a 784-256-128-100 mlp evaluates 13-20% faster in
     * passes of 256 rows than of 64 (docs/BENCHMARKS.md).
     * A large cnn keeps its batch. */
    uint32_t rows = batch_max;
    for (uint32_t r = NET_EVAL_CHUNK; r > batch_max; r /= 2) {
        size_t w = 0, s = 0;
        uint64_t f = 0;
        if (!net_workspace(&net->arch, r, &w, &s, &f, NULL, 0) &&
            f <= (floats > NET_EVAL_WORKSPACE ? floats : NET_EVAL_WORKSPACE)) {
            rows = r;
            widest = w;
            scratch = s;
            break;
        }
    }
    net->input_dim = input_dim;
    net->classes = classes;
    net->batch_max = batch_max;
    net->rows = rows;
    model_rng_seed(&net->dropout_rng, 0, 0);
    rc = net_alloc(net, widest, scratch);
    if (rc) {
        model_net_destroy(net);
        return rc;
    }
    *out = net;
    return MODEL_OK;
}

void model_net_destroy(model_net *net)
{
    if (!net)
        return;
    for (uint32_t l = 0; l < MODEL_OPS_MAX; l++) {
        free(net->act[l]);
        free(net->aux[l]);
        free(net->arg[l]);
    }
    free(net->delta[0]);
    free(net->delta[1]);
    free(net->scratch);
    free(net->image);
    free(net->ones);
    free(net->input);
    free(net->labels);
    free(net->params);
    free(net->grads);
    free(net);
}

float *model_net_params(model_net *net)
{
    return net->params;
}
float *model_net_grads(model_net *net)
{
    return net->grads;
}
size_t model_net_param_count(const model_net *net)
{
    return net->arch.param_count;
}
uint32_t model_net_input_dim(const model_net *net)
{
    return net->input_dim;
}
uint32_t model_net_classes(const model_net *net)
{
    return net->classes;
}
uint32_t model_net_batch_max(const model_net *net)
{
    return net->batch_max;
}
uint32_t model_net_layer_count(const model_net *net)
{
    return net->arch.op_count;
}
uint32_t model_net_layer_width(const model_net *net, uint32_t l)
{
    return l < net->arch.op_count ? (uint32_t)model_shape_size(net->arch.ops[l].out) : 0;
}
float *model_net_input_buffer(model_net *net)
{
    return net->input;
}
uint16_t *model_net_label_buffer(model_net *net)
{
    return net->labels;
}

void model_net_init(model_net *net, model_rng *rng)
{
    const model_arch *a = &net->arch;
    int dropout = 0;
    for (uint32_t l = 0; l < a->op_count; l++) {
        const model_op *op = &a->ops[l];
        float *w = net->params + op->w_off, *b = net->params + op->b_off;
        dropout |= op->kind == MODEL_OP_DROPOUT;
        if (op->kind == MODEL_OP_GROUPNORM) {
            for (size_t i = 0; i < op->w_count; i++)
                w[i] = 1.0f;
            memset(b, 0, op->b_count * sizeof *b);
            continue;
        }
        if (!op->w_count)
            continue;
        /* He (std sqrt(2 / fan_in)) for layers followed by ReLU keeps the
         * activation variance constant through depth; Xavier (std
         * sqrt(2 / (fan_in + fan_out))) for the linear output layer. */
        double fan_in = (double)op->w_count / op->out.c;
        double sd = l + 1 == a->op_count ? sqrt(2.0 / (fan_in + op->out.c)) : sqrt(2.0 / fan_in);
        for (size_t i = 0; i < op->w_count; i++)
            w[i] = (float)(sd * model_rng_normal(rng));
        memset(b, 0, op->b_count * sizeof *b);
    }
    /* Only a net with dropout draws its stream's seed, so a net without
     * one leaves rng where the parameters left it (as before dropout
     * existed). */
    if (dropout)
        model_net_seed_dropout(net, model_rng_u64(rng));
}

void model_net_seed_dropout(model_net *net, uint64_t seed)
{
    model_rng_seed(&net->dropout_rng, seed, 0x64726f70ull /* "drop" */);
}

/* A multi-channel input arrives channel-major (C, H, W per sample, as in
 * the data files); the layers want NHWC. */
static const float *net_image(model_net *net, const float *x, uint32_t n)
{
    const model_shape s = net->arch.input;
    if (!net->image)
        return x;
    const size_t hw = (size_t)s.h * s.w;
    for (uint32_t i = 0; i < n; i++) {
        const float *src = x + (size_t)i * hw * s.c;
        float *dst = net->image + (size_t)i * hw * s.c;
        for (uint32_t c = 0; c < s.c; c++)
            for (size_t p = 0; p < hw; p++)
                dst[p * s.c + c] = src[c * hw + p];
    }
    return net->image;
}

/* Forward through every layer into act[]; the last holds probabilities.
 * train: dropout draws masks (else it is the identity). */
static void forward(model_net *net, const float *x, uint32_t n, int train)
{
    const model_arch *a = &net->arch;
    const float *in = x;
    const float *p = net->params;
    for (uint32_t l = 0; l < a->op_count; l++) {
        const model_op *op = &a->ops[l];
        float *y = net->act[l];
        switch (op->kind) {
        case MODEL_OP_DENSE:
            model_dense_forward(op->in.c, op->out.c, in, n, p + op->w_off, p + op->b_off, op->relu,
                                y);
            break;
        case MODEL_OP_CONV:
            model_conv_forward(&op->conv, in, n, p + op->w_off, op->b_count ? p + op->b_off : NULL,
                               op->relu, y, net->aux[l], net->scratch);
            break;
        case MODEL_OP_GROUPNORM:
            model_groupnorm_forward(op->in, op->groups, in, n, p + op->w_off, p + op->b_off,
                                    op->relu, y, net->aux[l]);
            break;
        case MODEL_OP_MAXPOOL: {
            model_pool pl = net_pool(op);
            model_maxpool_forward(&pl, in, n, op->relu, y, net->arg[l]);
            break;
        }
        case MODEL_OP_AVGPOOL: {
            model_pool pl = net_pool(op);
            model_avgpool_forward(&pl, in, n, y);
            break;
        }
        case MODEL_OP_DROPOUT: {
            size_t m = (size_t)n * model_shape_size(op->out);
            if (train)
                model_dropout_forward(in, m, op->rate, &net->dropout_rng, y, net->aux[l]);
            else
                memcpy(y, in, m * sizeof *y);
            break;
        }
        }
        in = y;
    }
    model_softmax(net->act[a->op_count - 1], n, net->classes);
}

const float *model_net_forward(model_net *net, const float *x, uint32_t n)
{
    if (n == 0 || n > net->batch_max)
        return NULL;
    forward(net, net_image(net, x, n), n, 0);
    return net->act[net->arch.op_count - 1];
}

/* Back through layer l: dy (its output's gradient, overwritten when the
 * layer's ReLU masks it) to dx (NULL for the first layer) and the layer's
 * parameter gradients. */
static void backward_op(model_net *net, uint32_t l, const float *in, uint32_t n, float *dy,
                        float *dx)
{
    const model_op *op = &net->arch.ops[l];
    const float *p = net->params;
    float *g = net->grads;
    if (op->relu)
        model_relu_backward(net->act[l], dy, (size_t)n * model_shape_size(op->out), dy);
    switch (op->kind) {
    case MODEL_OP_DENSE:
        model_dense_backward(op->in.c, op->out.c, in, n, p + op->w_off, dy, net->ones,
                             g + op->w_off, g + op->b_off, dx);
        break;
    case MODEL_OP_CONV:
        model_conv_backward(&op->conv, in, n, p + op->w_off, dy, g + op->w_off,
                            op->b_count ? g + op->b_off : NULL, dx, net->aux[l], net->scratch);
        break;
    case MODEL_OP_GROUPNORM:
        model_groupnorm_backward(op->in, op->groups, in, n, p + op->w_off, net->aux[l], dy,
                                 g + op->w_off, g + op->b_off, dx);
        break;
    case MODEL_OP_MAXPOOL:
        if (dx) {
            model_pool pl = net_pool(op);
            model_maxpool_backward(&pl, n, dy, net->arg[l], dx);
        }
        break;
    case MODEL_OP_AVGPOOL:
        if (dx) {
            model_pool pl = net_pool(op);
            model_avgpool_backward(&pl, n, dy, dx);
        }
        break;
    case MODEL_OP_DROPOUT:
        if (dx)
            model_dropout_backward(dy, net->aux[l], (size_t)n * model_shape_size(op->out), dx);
        break;
    }
}

int model_net_loss_grad(model_net *net, const float *x, const uint16_t *labels, uint32_t n,
                        float *loss)
{
    if (n == 0 || n > net->batch_max)
        return MODEL_EINVAL;
    for (uint32_t i = 0; i < n; i++)
        if (labels[i] >= net->classes)
            return MODEL_ELABEL;
    const float *image = net_image(net, x, n);
    forward(net, image, n, 1);
    const uint32_t last = net->arch.op_count - 1;
    /* dL/dz for softmax cross-entropy, mean over the batch: (p - onehot)/n */
    double mean = model_xent_backward(net->act[last], labels, n, net->classes, net->delta[0]);
    if (loss)
        *loss = (float)mean;
    int cur = 0;
    for (uint32_t l = last + 1; l-- > 0;) {
        /* the data needs no gradient: the first layer stops here */
        backward_op(net, l, l ? net->act[l - 1] : image, n, net->delta[cur],
                    l ? net->delta[cur ^ 1] : NULL);
        cur ^= 1;
    }
    return MODEL_OK;
}

int model_net_evaluate(model_net *net, const model_data *d, const model_norm *norm, double *loss,
                       double *accuracy)
{
    if (d->dim != net->input_dim)
        return MODEL_EDIM;
    if (d->classes > net->classes)
        return MODEL_ELABEL;
    if (d->count == 0)
        return MODEL_EEMPTY;
    double total = 0.0;
    uint64_t correct = 0;
    const uint32_t C = net->classes;
    /* Rows are consecutive: gather them in chunks of at most net->rows and
     * NET_EVAL_CHUNK (the size of the index window on the stack; a net made
     * for larger batches has rows = batch_max above it) into the net's own
     * input buffer. */
    uint32_t rows[NET_EVAL_CHUNK];
    for (uint32_t start = 0; start < d->count;) {
        uint32_t n = d->count - start;
        if (n > net->rows)
            n = net->rows;
        if (n > NET_EVAL_CHUNK)
            n = NET_EVAL_CHUNK;
        for (uint32_t k = 0; k < n; k++)
            rows[k] = start + k;
        model_data_gather(d, norm, rows, n, net->input, net->labels);
        forward(net, net_image(net, net->input, n), n, 0);
        const float *p = net->act[net->arch.op_count - 1];
        for (uint32_t i = 0; i < n; i++) {
            const float *pr = p + (size_t)i * C;
            uint32_t best = 0;
            for (uint32_t c = 1; c < C; c++)
                if (pr[c] > pr[best])
                    best = c;
            uint16_t y = net->labels[i];
            correct += best == y;
            float py = pr[y];
            total -= log((double)(py > MODEL_PROB_FLOOR ? py : MODEL_PROB_FLOOR));
        }
        start += n;
    }
    if (loss)
        *loss = total / d->count;
    if (accuracy)
        *accuracy = (double)correct / d->count;
    return MODEL_OK;
}
