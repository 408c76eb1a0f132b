/* fuzz_spec — libFuzzer target for model/spec, the grammar of model specs
 * (softmax, mlp, cnn) that config files, checkpoints and manifests carry,
 * and for the nets it builds (docs/FUZZING.md).
 *
 * Input: byte 0 picks the data shape (784 = 1x28x28, 3072 = 3x32x32, 10,
 * 1) and the classes (10 or 2), the rest is the spec (NUL-terminated at its
 * first NUL).
 * Properties, any violation aborts:
 *   - model_spec_check returns OK or ESPEC; model_arch_parse OK, ESPEC or
 *     ETOOBIG, with a message on error; a spec the grammar check refuses
 *     never parses, one that parses passes the grammar check;
 *   - model_spec_param_count agrees with the parse (result and count);
 *   - a parsed architecture is consistent: 1..MODEL_OPS_MAX ops ending in a
 *     dense layer to `classes`, each op's input the previous op's output,
 *     every size non-zero and within MODEL_ACT_MAX, the parameters of all
 *     ops tiling [0, param_count) exactly;
 *   - a small parsed net (at most 200,000 parameters and 200,000 values per
 *     layer) is created with that many parameters, and one forward and
 *     backward pass on two samples gives a finite loss, finite gradients
 *     and finite class probabilities that sum to 1.
 */
#define _GNU_SOURCE
#include "tests/fuzz/fuzz_util.h"

#include <math.h>

#include "model/model.h"
#include "model/net.h"
#include "model/rng.h"
#include "model/spec.h"

#define SMALL 200000u

typedef struct span {
    size_t off, n;
} span;

static int by_off(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

static void check_arch(const model_arch *a, uint32_t input_dim, uint32_t classes)
{
    FUZZ_CHECK(a->op_count >= 1 && a->op_count <= MODEL_OPS_MAX);
    const model_op *last = &a->ops[a->op_count - 1];
    FUZZ_CHECK(last->kind == MODEL_OP_DENSE && model_shape_size(last->out) == classes);
    FUZZ_CHECK(model_shape_size(a->input) == input_dim);
    FUZZ_CHECK(a->param_count <= MODEL_PARAMS_MAX);
    static span spans[2 * MODEL_OPS_MAX];
    size_t ns = 0;
    for (uint32_t i = 0; i < a->op_count; i++) {
        const model_op *o = &a->ops[i];
        FUZZ_CHECK(model_shape_size(o->in) > 0 && model_shape_size(o->out) > 0);
        FUZZ_CHECK(model_shape_size(o->out) <= MODEL_ACT_MAX);
        if (i == 0)
            FUZZ_CHECK(model_shape_size(o->in) == input_dim);
        else
            FUZZ_CHECK(model_shape_size(o->in) == model_shape_size(a->ops[i - 1].out));
        if (o->w_count)
            spans[ns++] = (span){o->w_off, o->w_count};
        if (o->b_count)
            spans[ns++] = (span){o->b_off, o->b_count};
    }
    qsort(spans, ns, sizeof spans[0], by_off);
    size_t at = 0;
    for (size_t i = 0; i < ns; i++) {
        FUZZ_CHECK(spans[i].off == at);
        at += spans[i].n;
    }
    FUZZ_CHECK(at == a->param_count);
}

static int small(const model_arch *a)
{
    if (a->param_count > SMALL)
        return 0;
    for (uint32_t i = 0; i < a->op_count; i++)
        if (model_shape_size(a->ops[i].in) > SMALL || model_shape_size(a->ops[i].out) > SMALL)
            return 0;
    return 1;
}

static void run_net(const char *spec, uint32_t input_dim, uint32_t classes, size_t params)
{
    char msg[MODEL_MSG_MAX];
    model_net *net = NULL;
    int rc = model_net_create(&net, spec, input_dim, classes, 2, msg, sizeof msg);
    if (rc != MODEL_OK)
        fprintf(stderr, "create: %s\n", msg);
    FUZZ_CHECK(rc == MODEL_OK);
    FUZZ_CHECK(model_net_param_count(net) == params);
    model_rng rng;
    model_rng_seed(&rng, 3, 0);
    model_net_init(net, &rng);
    float *x = malloc(2 * (size_t)input_dim * sizeof *x);
    FUZZ_CHECK(x != NULL);
    for (size_t i = 0; i < 2 * (size_t)input_dim; i++)
        x[i] = (float)((i * 7919u) % 17u) / 8.0f - 1.0f;
    uint16_t y[2] = {0, (uint16_t)(classes - 1)};
    float loss = NAN;
    FUZZ_CHECK(model_net_loss_grad(net, x, y, 2, &loss) == MODEL_OK);
    FUZZ_CHECK(isfinite(loss) && loss >= 0.0f);
    const float *g = model_net_grads(net);
    for (size_t i = 0; i < params; i++)
        FUZZ_CHECK(isfinite(g[i]));
    const float *p = model_net_forward(net, x, 2);
    FUZZ_CHECK(p != NULL);
    for (int s = 0; s < 2; s++) {
        double sum = 0;
        for (uint32_t c = 0; c < classes; c++) {
            FUZZ_CHECK(isfinite(p[s * classes + c]) && p[s * classes + c] >= 0.0f);
            sum += p[s * classes + c];
        }
        FUZZ_CHECK(fabs(sum - 1.0) < 1e-3);
    }
    free(x);
    model_net_destroy(net);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint32_t dims[] = {784, 3072, 10, 1};
    if (size < 1)
        return 0;
    uint32_t input_dim = dims[data[0] % 4];
    uint32_t classes = (data[0] >> 2) & 1 ? 2 : 10;
    char *spec = fuzz_strdup(data + 1, size - 1);
    char msg[MODEL_MSG_MAX] = "";
    int crc = model_spec_check(spec, msg, sizeof msg);
    FUZZ_CHECK(crc == MODEL_OK || crc == MODEL_ESPEC);
    if (crc)
        FUZZ_CHECK(fuzz_has_message(msg, sizeof msg));
    static model_arch a;
    msg[0] = '\0';
    int rc = model_arch_parse(&a, spec, input_dim, classes, msg, sizeof msg);
    FUZZ_CHECK(rc == MODEL_OK || rc == MODEL_ESPEC || rc == MODEL_ETOOBIG);
    if (crc == MODEL_ESPEC)
        FUZZ_CHECK(rc == MODEL_ESPEC);
    size_t count = 0;
    char msg2[MODEL_MSG_MAX];
    int prc = model_spec_param_count(spec, input_dim, classes, &count, msg2, sizeof msg2);
    FUZZ_CHECK(prc == rc);
    if (rc != MODEL_OK) {
        FUZZ_CHECK(fuzz_has_message(msg, sizeof msg));
    } else {
        FUZZ_CHECK(crc == MODEL_OK);
        FUZZ_CHECK(count == a.param_count);
        check_arch(&a, input_dim, classes);
        if (small(&a))
            run_net(spec, input_dim, classes, a.param_count);
    }
    free(spec);
    return 0;
}
