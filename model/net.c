#include "model/net.h"

#include <cblas.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* One dense layer: out = in W^T + b, W out x in row-major. */
typedef struct net_layer {
    uint32_t in, out;
    size_t w_offset; /* into params/grads */
    size_t b_offset;
} net_layer;

struct model_net {
    uint32_t layer_count;
    net_layer layers[MODEL_LAYERS_MAX];
    uint32_t input_dim, classes, batch_max;
    size_t param_count;
    float *params;
    float *grads;
    /* workspace, sized for batch_max at create */
    float *act[MODEL_LAYERS_MAX]; /* act[l]: output of layer l, batch x layers[l].out */
    float *delta[2];              /* batch x max width: back-propagated gradient */
    float *ones;                  /* batch_max ones: bias gradients as a gemv */
    float *input;                 /* gather buffer: batch x input_dim */
    uint16_t *labels;             /* gather buffer: batch */
};

#define NET_BATCH_MAX  65536u
#define NET_PARAMS_MAX (1ull << 31) /* floats: 8 GiB, far above any model here */

static int parse_spec(const char *spec, uint32_t *widths, uint32_t *hidden, char *msg,
                      size_t msg_len)
{
    *hidden = 0;
    if (!spec || strlen(spec) > MODEL_SPEC_MAX) {
        model_msgf(msg, msg_len, "model spec missing or longer than %u characters", MODEL_SPEC_MAX);
        return MODEL_ESPEC;
    }
    if (!strcmp(spec, "softmax"))
        return MODEL_OK;
    if (strncmp(spec, "mlp:", 4)) {
        model_msgf(msg, msg_len,
                   "model spec '%s' not understood: use 'softmax' or 'mlp:W1,W2,...' (hidden "
                   "widths, e.g. mlp:256,128,100)",
                   spec);
        return MODEL_ESPEC;
    }
    const char *p = spec + 4;
    for (;;) {
        char *end;
        if (*p < '0' || *p > '9') {
            model_msgf(msg, msg_len, "model spec '%s': expected a width at '%s'", spec, p);
            return MODEL_ESPEC;
        }
        unsigned long w = strtoul(p, &end, 10);
        if (w == 0 || w > MODEL_WIDTH_MAX) {
            model_msgf(msg, msg_len, "model spec '%s': width %lu not in [1, %u]", spec, w,
                       MODEL_WIDTH_MAX);
            return MODEL_ESPEC;
        }
        if (*hidden + 1 >= MODEL_LAYERS_MAX) {
            model_msgf(msg, msg_len, "model spec '%s': more than %u hidden layers", spec,
                       MODEL_LAYERS_MAX - 1);
            return MODEL_ESPEC;
        }
        widths[(*hidden)++] = (uint32_t)w;
        if (*end == 0)
            return MODEL_OK;
        if (*end != ',') {
            model_msgf(msg, msg_len, "model spec '%s': unexpected '%c'", spec, *end);
            return MODEL_ESPEC;
        }
        p = end + 1;
    }
}

#define NET_BATCH_MAX  65536u
#define NET_PARAMS_MAX (1ull << 31) /* floats: 8 GiB, far above any model here */

int model_spec_param_count(const char *spec, uint32_t input_dim, uint32_t classes, size_t *count,
                           char *msg, size_t msg_len)
{
    *count = 0;
    uint32_t widths[MODEL_LAYERS_MAX], hidden;
    int rc = parse_spec(spec, widths, &hidden, msg, msg_len);
    if (rc)
        return rc;
    if (!input_dim || !classes) {
        model_msgf(msg, msg_len, "input_dim and classes must be positive");
        return MODEL_EINVAL;
    }
    if (input_dim > MODEL_DIM_MAX || classes > MODEL_CLASSES_MAX) {
        model_msgf(msg, msg_len, "input %u or classes %u above its maximum", input_dim, classes);
        return MODEL_ETOOBIG;
    }
    uint64_t n = 0, in = input_dim;
    for (uint32_t l = 0; l <= hidden; l++) {
        uint64_t o = l < hidden ? widths[l] : classes;
        n += in * o + o;
        in = o;
    }
    if (n > NET_PARAMS_MAX) {
        model_msgf(msg, msg_len, "model spec '%s': %llu parameters, above the maximum", spec,
                   (unsigned long long)n);
        return MODEL_ETOOBIG;
    }
    *count = (size_t)n;
    return MODEL_OK;
}

int model_net_create(model_net **out, const char *spec, uint32_t input_dim, uint32_t classes,
                     uint32_t batch_max, char *msg, size_t msg_len)
{
    *out = NULL;
    uint32_t widths[MODEL_LAYERS_MAX], hidden;
    int rc = parse_spec(spec, widths, &hidden, msg, msg_len);
    if (rc)
        return rc;
    if (!input_dim || !classes || !batch_max) {
        model_msgf(msg, msg_len, "input_dim, classes and batch_max must be positive");
        return MODEL_EINVAL;
    }
    if (input_dim > MODEL_DIM_MAX || classes > MODEL_CLASSES_MAX || batch_max > NET_BATCH_MAX) {
        model_msgf(msg, msg_len, "input %u, classes %u or batch %u above its maximum", input_dim,
                   classes, batch_max);
        return MODEL_ETOOBIG;
    }
    model_net *net = calloc(1, sizeof *net);
    if (!net)
        return MODEL_ENOMEM;
    net->layer_count = hidden + 1;
    net->input_dim = input_dim;
    net->classes = classes;
    net->batch_max = batch_max;
    uint32_t in = input_dim, max_width = input_dim;
    size_t off = 0;
    for (uint32_t l = 0; l < net->layer_count; l++) {
        uint32_t o = l < hidden ? widths[l] : classes;
        net->layers[l] =
            (net_layer){.in = in, .out = o, .w_offset = off, .b_offset = off + (size_t)in * o};
        off += (size_t)in * o + o;
        if (o > max_width)
            max_width = o;
        in = o;
    }
    if (off > NET_PARAMS_MAX) {
        free(net);
        model_msgf(msg, msg_len, "model spec '%s': %zu parameters, above the maximum", spec, off);
        return MODEL_ETOOBIG;
    }
    net->param_count = off;
    net->params = calloc(off, sizeof(float));
    net->grads = calloc(off, sizeof(float));
    int ok = net->params && net->grads;
    for (uint32_t l = 0; ok && l < net->layer_count; l++)
        ok = (net->act[l] = malloc((size_t)batch_max * net->layers[l].out * sizeof(float))) != NULL;
    for (int k = 0; ok && k < 2; k++)
        ok = (net->delta[k] = malloc((size_t)batch_max * max_width * sizeof(float))) != NULL;
    if (ok)
        ok = (net->ones = malloc(batch_max * sizeof(float))) &&
             (net->input = malloc((size_t)batch_max * input_dim * sizeof(float))) &&
             (net->labels = malloc(batch_max * sizeof(uint16_t)));
    if (!ok) {
        model_net_destroy(net);
        return MODEL_ENOMEM;
    }
    for (uint32_t i = 0; i < batch_max; i++)
        net->ones[i] = 1.0f;
    *out = net;
    return MODEL_OK;
}

void model_net_destroy(model_net *net)
{
    if (!net)
        return;
    for (uint32_t l = 0; l < MODEL_LAYERS_MAX; l++)
        free(net->act[l]);
    free(net->delta[0]);
    free(net->delta[1]);
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
    return net->param_count;
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
    return net->layer_count;
}
uint32_t model_net_layer_width(const model_net *net, uint32_t l)
{
    return l < net->layer_count ? net->layers[l].out : 0;
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
    for (uint32_t l = 0; l < net->layer_count; l++) {
        const net_layer *L = &net->layers[l];
        int last = l + 1 == net->layer_count;
        /* He for layers followed by ReLU keeps the activation variance
         * constant through depth; Xavier for the linear output layer. */
        double sd = last ? sqrt(2.0 / ((double)L->in + L->out)) : sqrt(2.0 / L->in);
        float *w = net->params + L->w_offset;
        size_t n = (size_t)L->in * L->out;
        for (size_t i = 0; i < n; i++)
            w[i] = (float)(sd * model_rng_normal(rng));
        memset(net->params + L->b_offset, 0, L->out * sizeof(float));
    }
}

/* Forward through every layer into act[]; the last holds probabilities. */
static void forward(model_net *net, const float *x, uint32_t n)
{
    const float *in = x;
    for (uint32_t l = 0; l < net->layer_count; l++) {
        const net_layer *L = &net->layers[l];
        float *z = net->act[l];
        const float *b = net->params + L->b_offset;
        /* z = 1 * b^T (broadcast) then z += in W^T: the bias costs one
         * rank-1 update instead of a separate pass. */
        for (uint32_t i = 0; i < n; i++)
            memcpy(z + (size_t)i * L->out, b, L->out * sizeof(float));
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)L->out, (int)L->in, 1.0f,
                    in, (int)L->in, net->params + L->w_offset, (int)L->in, 1.0f, z, (int)L->out);
        size_t m = (size_t)n * L->out;
        if (l + 1 < net->layer_count) {
            for (size_t i = 0; i < m; i++)
                z[i] = z[i] > 0.0f ? z[i] : 0.0f;
        } else {
            for (uint32_t i = 0; i < n; i++) {
                float *r = z + (size_t)i * L->out;
                float mx = r[0];
                for (uint32_t c = 1; c < L->out; c++)
                    mx = r[c] > mx ? r[c] : mx;
                float s = 0.0f;
                for (uint32_t c = 0; c < L->out; c++) {
                    r[c] = expf(r[c] - mx);
                    s += r[c];
                }
                float inv = 1.0f / s;
                for (uint32_t c = 0; c < L->out; c++)
                    r[c] *= inv;
            }
        }
        in = z;
    }
}

const float *model_net_forward(model_net *net, const float *x, uint32_t n)
{
    if (n == 0 || n > net->batch_max)
        return NULL;
    forward(net, x, n);
    return net->act[net->layer_count - 1];
}

/* Smallest probability used in log(): keeps the loss finite when a class
 * probability underflows to 0 (its gradient p - 1 is exact regardless). */
#define NET_PROB_FLOOR 1e-30f

int model_net_loss_grad(model_net *net, const float *x, const uint16_t *labels, uint32_t n,
                        float *loss)
{
    if (n == 0 || n > net->batch_max)
        return MODEL_EINVAL;
    for (uint32_t i = 0; i < n; i++)
        if (labels[i] >= net->classes)
            return MODEL_ELABEL;
    forward(net, x, n);
    const uint32_t last = net->layer_count - 1;
    const uint32_t C = net->classes;
    /* dL/dz for softmax cross-entropy, mean over the batch: (p - onehot)/n */
    float *d = net->delta[0];
    const float *p = net->act[last];
    double total = 0.0;
    const float inv_n = 1.0f / (float)n;
    for (uint32_t i = 0; i < n; i++) {
        const float *pr = p + (size_t)i * C;
        float *dr = d + (size_t)i * C;
        float py = pr[labels[i]];
        total -= log((double)(py > NET_PROB_FLOOR ? py : NET_PROB_FLOOR));
        for (uint32_t c = 0; c < C; c++)
            dr[c] = pr[c] * inv_n;
        dr[labels[i]] -= inv_n;
    }
    if (loss)
        *loss = (float)(total / n);
    int cur = 0;
    for (uint32_t l = net->layer_count; l-- > 0;) {
        const net_layer *L = &net->layers[l];
        const float *in = l ? net->act[l - 1] : x;
        float *dz = net->delta[cur];
        /* dW = dz^T in  (out x in) */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)L->out, (int)L->in, (int)n, 1.0f,
                    dz, (int)L->out, in, (int)L->in, 0.0f, net->grads + L->w_offset, (int)L->in);
        /* db = dz^T 1 */
        cblas_sgemv(CblasRowMajor, CblasTrans, (int)n, (int)L->out, 1.0f, dz, (int)L->out,
                    net->ones, 1, 0.0f, net->grads + L->b_offset, 1);
        if (l == 0)
            break; /* no gradient with respect to the data */
        /* d_in = dz W (n x in), then through the ReLU of layer l-1 */
        float *di = net->delta[cur ^ 1];
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)L->in, (int)L->out,
                    1.0f, dz, (int)L->out, net->params + L->w_offset, (int)L->in, 0.0f, di,
                    (int)L->in);
        size_t m = (size_t)n * L->in;
        for (size_t i = 0; i < m; i++)
            di[i] = in[i] > 0.0f ? di[i] : 0.0f;
        cur ^= 1;
    }
    return MODEL_OK;
}

#define NET_EVAL_CHUNK 256u

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
    /* Rows are consecutive: gather them in chunks of at most batch_max (and
     * NET_EVAL_CHUNK, the size of the index window on the stack) into the
     * net's own input buffer. */
    uint32_t rows[NET_EVAL_CHUNK];
    for (uint32_t start = 0; start < d->count;) {
        uint32_t n = d->count - start;
        if (n > net->batch_max)
            n = net->batch_max;
        if (n > NET_EVAL_CHUNK)
            n = NET_EVAL_CHUNK;
        for (uint32_t k = 0; k < n; k++)
            rows[k] = start + k;
        model_data_gather(d, norm, rows, n, net->input, net->labels);
        forward(net, net->input, n);
        const float *p = net->act[net->layer_count - 1];
        for (uint32_t i = 0; i < n; i++) {
            const float *pr = p + (size_t)i * C;
            uint32_t best = 0;
            for (uint32_t c = 1; c < C; c++)
                if (pr[c] > pr[best])
                    best = c;
            uint16_t y = net->labels[i];
            correct += best == y;
            float py = pr[y];
            total -= log((double)(py > NET_PROB_FLOOR ? py : NET_PROB_FLOOR));
        }
        start += n;
    }
    if (loss)
        *loss = total / d->count;
    if (accuracy)
        *accuracy = (double)correct / d->count;
    return MODEL_OK;
}
