/* model_net: spec parsing, layout, initialisation, gradients by finite
 * differences, forward/evaluate agreement, training determinism. */
#include "tests/harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/net.h"
#include "model/optim.h"

static void fill_normal(float *v, size_t n, model_rng *r, double sd)
{
    for (size_t i = 0; i < n; i++)
        v[i] = (float)(sd * model_rng_normal(r));
}

static void spec_parsing_and_layout(void **state)
{
    (void)state;
    model_net *net;
    char msg[MODEL_MSG_MAX];
    assert_int_equal(model_net_create(&net, "mlp:256,128,100", 784, 10, 64, msg, sizeof msg), 0);
    /* 784*256+256 + 256*128+128 + 128*100+100 + 100*10+10 */
    assert_int_equal(model_net_param_count(net), 200960 + 32896 + 12900 + 1010);
    assert_int_equal(model_net_layer_count(net), 4);
    assert_int_equal(model_net_layer_width(net, 0), 256);
    assert_int_equal(model_net_layer_width(net, 3), 10);
    assert_int_equal(model_net_layer_width(net, 4), 0);
    size_t count;
    assert_int_equal(model_spec_param_count("mlp:256,128,100", 784, 10, &count, NULL, 0), 0);
    assert_int_equal(count, model_net_param_count(net));
    assert_int_equal(model_spec_param_count("softmax", 784, 10, &count, NULL, 0), 0);
    assert_int_equal(count, 7850);
    assert_int_equal(model_spec_param_count("mlp:0", 784, 10, &count, NULL, 0), MODEL_ESPEC);
    assert_int_equal(model_spec_param_count("softmax", 0, 10, &count, NULL, 0), MODEL_EINVAL);
    assert_int_equal(model_spec_param_count("mlp:65536,65536,65536", 784, 10, &count, NULL, 0),
                     MODEL_ETOOBIG);
    assert_int_equal(model_net_input_dim(net), 784);
    assert_int_equal(model_net_classes(net), 10);
    model_net_destroy(net);
    assert_int_equal(model_net_create(&net, "softmax", 784, 10, 64, msg, sizeof msg), 0);
    assert_int_equal(model_net_param_count(net), 7850);
    model_net_destroy(net);
    static const char *const bad[] = {"",
                                      "mlp",
                                      "mlp:",
                                      "mlp:0",
                                      "mlp:3,",
                                      "mlp:,3",
                                      "mlp:3;4",
                                      "mlp:-3",
                                      "cnn:3",
                                      "mlp:99999999",
                                      "mlp:1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        msg[0] = 0;
        int rc = model_net_create(&net, bad[i], 10, 3, 4, msg, sizeof msg);
        if (rc != MODEL_ESPEC)
            fail_msg("spec '%s' gave %d, wanted ESPEC", bad[i], rc);
        assert_null(net);
        assert_true(strlen(msg) > 0);
    }
    assert_int_equal(model_net_create(&net, "softmax", 0, 3, 4, NULL, 0), MODEL_EINVAL);
    assert_int_equal(model_net_create(&net, "softmax", 3, 3, 0, NULL, 0), MODEL_EINVAL);
    assert_int_equal(model_net_create(&net, "softmax", 3, MODEL_CLASSES_MAX + 1, 4, NULL, 0),
                     MODEL_ETOOBIG);
}

static void init_is_seeded_he_and_xavier(void **state)
{
    (void)state;
    uint64_t seed = test_seed(11);
    model_net *a, *b;
    assert_int_equal(model_net_create(&a, "mlp:400", 500, 300, 2, NULL, 0), 0);
    assert_int_equal(model_net_create(&b, "mlp:400", 500, 300, 2, NULL, 0), 0);
    model_rng r1, r2;
    model_rng_seed(&r1, seed, 0);
    model_rng_seed(&r2, seed, 0);
    model_net_init(a, &r1);
    model_net_init(b, &r2);
    size_t n = model_net_param_count(a);
    assert_memory_equal(model_net_params(a), model_net_params(b), n * sizeof(float));
    const float *p = model_net_params(a);
    /* layer 0: 400x500 He, std sqrt(2/500); bias 400 zeros */
    double s2 = 0;
    for (size_t i = 0; i < 400 * 500; i++)
        s2 += (double)p[i] * p[i];
    double sd0 = sqrt(s2 / (400 * 500));
    if (fabs(sd0 / sqrt(2.0 / 500) - 1) > 0.02)
        fail_msg("seed %llu: He std %g, want %g", (unsigned long long)seed, sd0, sqrt(2.0 / 500));
    for (size_t i = 400 * 500; i < 400 * 501; i++)
        assert_true(p[i] == 0.0f);
    /* layer 1: 300x400 Xavier, std sqrt(2/700) */
    const float *w1 = p + 400 * 501;
    s2 = 0;
    for (size_t i = 0; i < 300 * 400; i++)
        s2 += (double)w1[i] * w1[i];
    double sd1 = sqrt(s2 / (300 * 400));
    if (fabs(sd1 / sqrt(2.0 / 700) - 1) > 0.02)
        fail_msg("seed %llu: Xavier std %g, want %g", (unsigned long long)seed, sd1,
                 sqrt(2.0 / 700));
    model_rng_seed(&r2, seed + 1, 0);
    model_net_init(b, &r2);
    assert_true(memcmp(model_net_params(a), model_net_params(b), n * sizeof(float)) != 0);
    model_net_destroy(a);
    model_net_destroy(b);
}

/* Loss of the current parameters on (x, y), in double from the forward
 * probabilities. */
static double batch_loss(model_net *net, const float *x, const uint16_t *y, uint32_t n)
{
    const float *p = model_net_forward(net, x, n);
    uint32_t c = model_net_classes(net);
    double l = 0;
    for (uint32_t i = 0; i < n; i++)
        l -= log((double)p[(size_t)i * c + y[i]]);
    return l / n;
}

/* Reference forward in double precision over the documented layout (per
 * layer W out x in row-major, then b), independent of the net's code.
 * Returns the mean cross-entropy; *pattern gets a hash of the ReLU on/off
 * pattern so that a perturbation that crosses a kink can be recognised. */
static double ref_loss(const model_net *net, const double *p, const float *x, const uint16_t *y,
                       uint32_t n, uint64_t *pattern)
{
    uint32_t L = model_net_layer_count(net), in0 = model_net_input_dim(net);
    double a[64], z[64];
    double total = 0;
    uint64_t h = 1469598103934665603ull;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t in = in0;
        for (uint32_t j = 0; j < in; j++)
            a[j] = x[(size_t)i * in0 + j];
        size_t off = 0;
        for (uint32_t l = 0; l < L; l++) {
            uint32_t out = model_net_layer_width(net, l);
            assert_true(in <= 64 && out <= 64);
            for (uint32_t o = 0; o < out; o++) {
                double s = p[off + (size_t)in * out + o];
                for (uint32_t j = 0; j < in; j++)
                    s += p[off + (size_t)o * in + j] * a[j];
                z[o] = s;
            }
            off += (size_t)in * out + out;
            if (l + 1 < L)
                for (uint32_t o = 0; o < out; o++) {
                    h = (h ^ (z[o] > 0)) * 1099511628211ull;
                    z[o] = z[o] > 0 ? z[o] : 0;
                }
            memcpy(a, z, out * sizeof *a);
            in = out;
        }
        double mx = a[0], se = 0;
        for (uint32_t c = 1; c < in; c++)
            mx = a[c] > mx ? a[c] : mx;
        for (uint32_t c = 0; c < in; c++)
            se += exp(a[c] - mx);
        total += log(se) + mx - a[y[i]];
    }
    *pattern = h;
    return total / n;
}

/* Central differences (in double, on the reference) on every parameter
 * against the net's analytic float32 gradient. */
static void gradcheck(const char *spec, uint32_t in, uint32_t classes, uint32_t n, uint64_t seed)
{
    model_net *net;
    assert_int_equal(model_net_create(&net, spec, in, classes, n, NULL, 0), 0);
    model_rng r;
    model_rng_seed(&r, seed, 0);
    model_net_init(net, &r);
    float *p = model_net_params(net);
    size_t np = model_net_param_count(net);
    /* nonzero biases so that their gradients and the ReLU gating are exercised */
    for (size_t i = 0; i < np; i++)
        p[i] += (float)(0.1 * model_rng_normal(&r));
    float *x = malloc((size_t)n * in * sizeof *x);
    uint16_t *y = malloc(n * sizeof *y);
    fill_normal(x, (size_t)n * in, &r, 1.0);
    for (uint32_t i = 0; i < n; i++)
        y[i] = (uint16_t)model_rng_below(&r, classes);
    float loss;
    assert_int_equal(model_net_loss_grad(net, x, y, n, &loss), 0);
    double *pd = malloc(np * sizeof *pd);
    for (size_t i = 0; i < np; i++)
        pd[i] = p[i];
    uint64_t pat0, patp, patm;
    double l0 = ref_loss(net, pd, x, y, n, &pat0);
    /* the reported loss and the forward probabilities agree with the reference */
    if (fabs(loss - l0) > 1e-5 * (1 + l0) || fabs(batch_loss(net, x, y, n) - l0) > 1e-5 * (1 + l0))
        fail_msg("%s seed %llu: loss %g, reference %g", spec, (unsigned long long)seed, loss, l0);
    const float *g = model_net_grads(net);
    const double eps = 1e-6;
    size_t bad = 0, kinks = 0;
    double worst = 0;
    for (size_t i = 0; i < np; i++) {
        double keep = pd[i];
        pd[i] = keep + eps;
        double lp = ref_loss(net, pd, x, y, n, &patp);
        pd[i] = keep - eps;
        double lm = ref_loss(net, pd, x, y, n, &patm);
        pd[i] = keep;
        if (patp != pat0 || patm != pat0) {
            kinks++; /* the perturbation crossed a ReLU kink: not differentiable here */
            continue;
        }
        double num = (lp - lm) / (2 * eps);
        /* analytic side is float32: ~1e-6 relative, plus sgemm rounding */
        double err = fabs(num - g[i]) / (1e-4 + fabs(num) + fabs(g[i]));
        if (err > worst)
            worst = err;
        bad += err > 1e-3;
    }
    if (bad || kinks > np / 20)
        fail_msg("%s seed %llu: %zu of %zu gradients off (worst relative error %g), %zu kinks",
                 spec, (unsigned long long)seed, bad, np, worst, kinks);
    free(pd);
    free(x);
    free(y);
    model_net_destroy(net);
}

static void gradients_match_finite_differences(void **state)
{
    (void)state;
    uint64_t seed = test_seed(5);
    gradcheck("softmax", 7, 4, 5, seed);
    gradcheck("mlp:6", 7, 4, 5, seed);
    gradcheck("mlp:9,5,6", 8, 3, 6, seed);
    gradcheck("mlp:5", 3, 2, 1, seed); /* batch of one, two classes */
}

static void forward_is_softmax_of_affine(void **state)
{
    (void)state;
    enum { IN = 5, C = 4, N = 3 };
    model_net *net;
    assert_int_equal(model_net_create(&net, "softmax", IN, C, N, NULL, 0), 0);
    model_rng r;
    model_rng_seed(&r, test_seed(9), 0);
    model_net_init(net, &r);
    float *p = model_net_params(net);
    for (int c = 0; c < C; c++)
        p[C * IN + c] = (float)c * 0.25f; /* biases */
    float x[N * IN];
    fill_normal(x, N * IN, &r, 2.0);
    const float *prob = model_net_forward(net, x, N);
    for (int i = 0; i < N; i++) {
        double z[C], mx = -1e300, s = 0, sum_p = 0;
        for (int c = 0; c < C; c++) {
            z[c] = p[C * IN + c];
            for (int j = 0; j < IN; j++)
                z[c] += (double)p[c * IN + j] * x[i * IN + j];
            mx = z[c] > mx ? z[c] : mx;
        }
        for (int c = 0; c < C; c++)
            s += exp(z[c] - mx);
        for (int c = 0; c < C; c++) {
            assert_true(fabs(prob[i * C + c] - exp(z[c] - mx) / s) < 1e-5);
            sum_p += prob[i * C + c];
        }
        assert_true(fabs(sum_p - 1) < 1e-5);
    }
    assert_null(model_net_forward(net, x, 0));
    assert_null(model_net_forward(net, x, N + 1));
    uint16_t y[N] = {0, 1, C};
    assert_int_equal(model_net_loss_grad(net, x, y, N, NULL), MODEL_ELABEL);
    assert_int_equal(model_net_loss_grad(net, x, y, 0, NULL), MODEL_EINVAL);
    assert_int_equal(model_net_loss_grad(net, x, y, N + 1, NULL), MODEL_EINVAL);
    /* huge logits: probabilities stay finite and the loss finite */
    for (int i = 0; i < N * IN; i++)
        x[i] *= 1e6f;
    y[2] = 1;
    float loss;
    assert_int_equal(model_net_loss_grad(net, x, y, N, &loss), 0);
    assert_true(isfinite(loss));
    model_net_destroy(net);
}

/* A synthetic data set: class = argmax of a fixed random projection. */
static void make_blobs(model_data *d, uint32_t n, uint32_t dim, uint32_t classes, model_rng *r)
{
    assert_int_equal(model_data_alloc(d, n, dim, classes, MODEL_DTYPE_F32), 0);
    float centers[8][16];
    assert_true(classes <= 8 && dim <= 16);
    model_rng c;
    model_rng_seed(&c, 77, 0);
    for (uint32_t k = 0; k < classes; k++)
        fill_normal(centers[k], dim, &c, 2.0);
    for (uint32_t i = 0; i < n; i++) {
        uint16_t y = (uint16_t)model_rng_below(r, classes);
        d->labels[i] = y;
        for (uint32_t j = 0; j < dim; j++)
            d->x_f32[(size_t)i * dim + j] = centers[y][j] + (float)(0.5 * model_rng_normal(r));
    }
}

/* Train on blobs; returns the final evaluation; params copied into out. */
static double train_blobs(uint64_t seed, const char *spec, float **out, size_t *count)
{
    model_rng r;
    model_rng_seed(&r, seed, 1);
    model_data d;
    make_blobs(&d, 600, 10, 5, &r);
    model_net *net;
    assert_int_equal(model_net_create(&net, spec, 10, 5, 32, NULL, 0), 0);
    model_rng_seed(&r, seed, 2);
    model_net_init(net, &r);
    model_sgd sgd;
    model_sgd_config cfg = {.momentum = 0.9f, .weight_decay = 1e-4f, .nesterov = 1};
    assert_int_equal(model_sgd_init(&sgd, model_net_param_count(net), &cfg), 0);
    uint32_t order[600];
    double loss0, acc;
    assert_int_equal(model_net_evaluate(net, &d, NULL, &loss0, &acc), 0);
    for (int epoch = 0; epoch < 5; epoch++) {
        model_data_shuffle(order, d.count, &r);
        for (uint32_t at = 0; at < d.count; at += 32) {
            uint32_t n = d.count - at < 32 ? d.count - at : 32;
            model_data_gather(&d, NULL, order + at, n, model_net_input_buffer(net),
                              model_net_label_buffer(net));
            assert_int_equal(model_train_step(net, &sgd, model_net_input_buffer(net),
                                              model_net_label_buffer(net), n, 0.02f, NULL),
                             0);
        }
    }
    double loss;
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

static void training_learns_and_is_deterministic(void **state)
{
    (void)state;
    uint64_t seed = test_seed(21);
    float *a, *b, *c;
    size_t na, nb, nc;
    train_blobs(seed, "mlp:16,8", &a, &na);
    train_blobs(seed, "mlp:16,8", &b, &nb);
    train_blobs(seed + 1, "mlp:16,8", &c, &nc);
    assert_int_equal(na, nb);
    if (memcmp(a, b, na * sizeof *a))
        fail_msg("seed %llu: two runs gave different parameters", (unsigned long long)seed);
    assert_true(memcmp(a, c, na * sizeof *a) != 0);
    free(a);
    free(b);
    free(c);
    train_blobs(seed, "softmax", &a, &na);
    free(a);
}

static void evaluate_counts_argmax(void **state)
{
    (void)state;
    /* softmax net with identity weights on 3 features: predicted class =
     * argmax of the features */
    model_net *net;
    assert_int_equal(model_net_create(&net, "softmax", 3, 3, 2, NULL, 0), 0);
    float *p = model_net_params(net);
    memset(p, 0, model_net_param_count(net) * sizeof *p);
    for (int c = 0; c < 3; c++)
        p[c * 3 + c] = 1.0f;
    model_data d;
    assert_int_equal(model_data_alloc(&d, 5, 3, 3, MODEL_DTYPE_U8), 0);
    static const uint8_t x[15] = {9, 0, 0, 0, 9, 0, 0, 0, 9, 9, 0, 0, 0, 9, 0};
    static const uint16_t y[5] = {0, 1, 2, 1, 0}; /* last two wrong */
    memcpy(d.x_u8, x, sizeof x);
    memcpy(d.labels, y, sizeof y);
    double loss, acc;
    assert_int_equal(model_net_evaluate(net, &d, NULL, &loss, &acc), 0);
    assert_true(fabs(acc - 0.6) < 1e-12);
    /* loss: 3 right with p = e^9/(e^9+2), 2 wrong with p = 1/(e^9+2) */
    double e9 = exp(9.0);
    double want = (3 * -log(e9 / (e9 + 2)) + 2 * -log(1 / (e9 + 2))) / 5;
    assert_true(fabs(loss - want) < 1e-4);
    d.dim = 4;
    assert_int_equal(model_net_evaluate(net, &d, NULL, &loss, &acc), MODEL_EDIM);
    d.dim = 3;
    d.classes = 4;
    assert_int_equal(model_net_evaluate(net, &d, NULL, &loss, &acc), MODEL_ELABEL);
    model_data_free(&d);
    model_net_destroy(net);
}

/* model_net_evaluate takes up to 256 rows per forward pass, more than the
 * training batch the net was made for: its figures are those of forward
 * passes of one batch at a time, and a forward pass still takes at most
 * the batch. */
static void evaluate_in_chunks_matches_forward(void **state)
{
    (void)state;
    model_rng r;
    model_rng_seed(&r, test_seed(31), 1);
    model_data d;
    make_blobs(&d, 1000, 10, 5, &r); /* three chunks of 256 and a remainder */
    model_net *net;
    assert_int_equal(model_net_create(&net, "mlp:16,8", 10, 5, 3, NULL, 0), 0);
    model_net_init(net, &r);
    double loss, acc;
    assert_int_equal(model_net_evaluate(net, &d, NULL, &loss, &acc), 0);
    double want_loss = 0;
    uint32_t right = 0;
    for (uint32_t at = 0; at < d.count; at += 3) {
        uint32_t n = d.count - at < 3 ? d.count - at : 3, rows[3];
        for (uint32_t k = 0; k < n; k++)
            rows[k] = at + k;
        model_data_gather(&d, NULL, rows, n, model_net_input_buffer(net),
                          model_net_label_buffer(net));
        const float *p = model_net_forward(net, model_net_input_buffer(net), n);
        assert_non_null(p);
        for (uint32_t i = 0; i < n; i++) {
            uint32_t best = 0, y = d.labels[at + i];
            for (uint32_t c = 1; c < 5; c++)
                best = p[i * 5 + c] > p[i * 5 + best] ? c : best;
            right += best == y;
            want_loss -= log((double)p[i * 5 + y]);
        }
    }
    want_loss /= d.count;
    if (fabs(acc - (double)right / d.count) > 1e-12 || fabs(loss - want_loss) > 1e-5 * want_loss)
        fail_msg("evaluate %.6f / %.9f, batch by batch %.6f / %.9f", acc, loss,
                 (double)right / d.count, want_loss);
    assert_null(model_net_forward(net, model_net_input_buffer(net), 4));
    /* a net made for batches above the chunk (the simulator's evaluates
     * 2000 rows at once) evaluates in chunks of at most 256 all the same */
    model_net *big;
    assert_int_equal(model_net_create(&big, "mlp:16,8", 10, 5, 600, NULL, 0), 0);
    memcpy(model_net_params(big), model_net_params(net),
           model_net_param_count(net) * sizeof(float));
    double loss2, acc2;
    assert_int_equal(model_net_evaluate(big, &d, NULL, &loss2, &acc2), 0);
    if (acc2 != acc || fabs(loss2 - loss) > 1e-5 * loss)
        fail_msg("batch_max 600: %.6f / %.9f, batch_max 3: %.6f / %.9f", acc2, loss2, acc, loss);
    model_net_destroy(big);
    model_net_destroy(net);
    model_data_free(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(spec_parsing_and_layout),
        cmocka_unit_test(init_is_seeded_he_and_xavier),
        cmocka_unit_test(gradients_match_finite_differences),
        cmocka_unit_test(forward_is_softmax_of_affine),
        cmocka_unit_test(training_learns_and_is_deterministic),
        cmocka_unit_test(evaluate_counts_argmax),
        cmocka_unit_test(evaluate_in_chunks_matches_forward),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
