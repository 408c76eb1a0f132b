/* model_sgd and model_schedule: the update rule against a double-precision
 * transcription of PyTorch's SGD, argument checks, schedule shapes. */
#include "tests/harness.h"

#include <math.h>
#include <string.h>

#include "model/optim.h"

static void sgd_matches_reference(void **state)
{
    (void)state;
    enum { N = 33, STEPS = 25 };
    static const model_sgd_config cfgs[] = {
        {.momentum = 0.0f, .weight_decay = 0.0f, .nesterov = 0},
        {.momentum = 0.9f, .weight_decay = 0.0f, .nesterov = 0},
        {.momentum = 0.9f, .weight_decay = 5e-4f, .nesterov = 0},
        {.momentum = 0.8f, .weight_decay = 1e-2f, .nesterov = 1},
    };
    uint64_t seed = test_seed(13);
    for (size_t k = 0; k < sizeof cfgs / sizeof cfgs[0]; k++) {
        model_rng r;
        model_rng_seed(&r, seed, k);
        model_sgd s;
        assert_int_equal(model_sgd_init(&s, N, &cfgs[k]), 0);
        float p[N], g[N];
        double pd[N], vd[N] = {0};
        for (int i = 0; i < N; i++)
            pd[i] = p[i] = (float)model_rng_normal(&r);
        for (int t = 0; t < STEPS; t++) {
            float lr = 0.01f * (float)(t + 1);
            for (int i = 0; i < N; i++)
                g[i] = (float)model_rng_normal(&r);
            model_sgd_step(&s, p, g, lr);
            double mu = cfgs[k].momentum, wd = cfgs[k].weight_decay;
            for (int i = 0; i < N; i++) {
                double gi = g[i] + wd * pd[i];
                vd[i] = mu * vd[i] + gi;
                pd[i] -= lr * (cfgs[k].nesterov ? gi + mu * vd[i] : vd[i]);
            }
        }
        for (int i = 0; i < N; i++)
            if (fabs(p[i] - pd[i]) > 1e-4 * (1 + fabs(pd[i])))
                fail_msg("config %zu seed %llu: p[%d] = %g, reference %g", k,
                         (unsigned long long)seed, i, (double)p[i], pd[i]);
        model_sgd_reset(&s);
        for (int i = 0; i < N; i++)
            assert_true(s.velocity[i] == 0.0f);
        model_sgd_free(&s);
        assert_null(s.velocity);
    }
}

/* The update is vectorised (common/simd.h): at every width it gives the
 * bits of the same formula in scalar float arithmetic, over a count with a
 * vector body and a tail. */
static void sgd_same_bits_as_scalar_float(void **state)
{
    (void)state;
    enum { N = 1003, STEPS = 4 };
    for (int nesterov = 0; nesterov < 2; nesterov++) {
        const model_sgd_config cfg = {
            .momentum = 0.9f, .weight_decay = 5e-4f, .nesterov = nesterov};
        model_sgd s;
        assert_int_equal(model_sgd_init(&s, N, &cfg), 0);
        static float p[N], g[N], pr[N], vr[N];
        model_rng r;
        model_rng_seed(&r, test_seed(21), (uint64_t)nesterov);
        for (int i = 0; i < N; i++) {
            pr[i] = p[i] = (float)model_rng_normal(&r);
            vr[i] = 0.0f;
        }
        for (int t = 0; t < STEPS; t++) {
            const float lr = 0.05f / (float)(t + 1);
            for (int i = 0; i < N; i++)
                g[i] = (float)model_rng_normal(&r);
            model_sgd_step(&s, p, g, lr);
            for (int i = 0; i < N; i++) {
                float gi = g[i] + cfg.weight_decay * pr[i];
                float vi = cfg.momentum * vr[i] + gi;
                vr[i] = vi;
                pr[i] -= nesterov ? lr * (gi + cfg.momentum * vi) : lr * vi;
            }
        }
        for (int i = 0; i < N; i++)
            if (memcmp(&p[i], &pr[i], sizeof p[i]) || memcmp(&s.velocity[i], &vr[i], sizeof vr[i]))
                fail_msg("nesterov %d: p[%d] = %a (want %a), v = %a (want %a)", nesterov, i,
                         (double)p[i], (double)pr[i], (double)s.velocity[i], (double)vr[i]);
        model_sgd_free(&s);
    }
}

static void sgd_rejects_bad_config(void **state)
{
    (void)state;
    model_sgd s;
    model_sgd_config c = {.momentum = 1.0f};
    assert_int_equal(model_sgd_init(&s, 4, &c), MODEL_EINVAL);
    c = (model_sgd_config){.momentum = -0.1f};
    assert_int_equal(model_sgd_init(&s, 4, &c), MODEL_EINVAL);
    c = (model_sgd_config){.weight_decay = -1.0f};
    assert_int_equal(model_sgd_init(&s, 4, &c), MODEL_EINVAL);
    c = (model_sgd_config){.weight_decay = NAN};
    assert_int_equal(model_sgd_init(&s, 4, &c), MODEL_EINVAL);
    c = (model_sgd_config){.nesterov = 1};
    assert_int_equal(model_sgd_init(&s, 4, &c), MODEL_EINVAL);
    c = (model_sgd_config){.momentum = 0.5f};
    assert_int_equal(model_sgd_init(&s, 0, &c), MODEL_EINVAL);
    /* a net of another size */
    model_net *net;
    assert_int_equal(model_net_create(&net, "softmax", 3, 2, 1, NULL, 0), 0);
    assert_int_equal(model_sgd_init(&s, 4, &c), 0);
    float x[3] = {0};
    uint16_t y[1] = {0};
    assert_int_equal(model_train_step(net, &s, x, y, 1, 0.1f, NULL), MODEL_EINVAL);
    model_sgd_free(&s);
    model_net_destroy(net);
}

static void schedules(void **state)
{
    (void)state;
    model_schedule s = {
        .kind = MODEL_LR_CONSTANT, .base_lr = 0.1f, .warmup_steps = 10, .total_steps = 110};
    /* linear warm-up reaching base_lr at the last warm-up step */
    assert_true(fabsf(model_schedule_lr(&s, 0) - 0.01f) < 1e-7f);
    assert_true(fabsf(model_schedule_lr(&s, 4) - 0.05f) < 1e-7f);
    assert_true(fabsf(model_schedule_lr(&s, 9) - 0.1f) < 1e-7f);
    assert_true(model_schedule_lr(&s, 1000) == 0.1f);
    s.kind = MODEL_LR_COSINE;
    s.min_lr = 0.001f;
    assert_true(fabsf(model_schedule_lr(&s, 10) - 0.1f) < 1e-7f);
    assert_true(fabsf(model_schedule_lr(&s, 60) - (0.001f + 0.099f / 2)) < 1e-6f);
    assert_true(fabsf(model_schedule_lr(&s, 110) - 0.001f) < 1e-7f);
    assert_true(fabsf(model_schedule_lr(&s, 500) - 0.001f) < 1e-7f);
    for (uint64_t t = 11; t <= 110; t++)
        assert_true(model_schedule_lr(&s, t) <= model_schedule_lr(&s, t - 1));
    s.kind = MODEL_LR_STEP;
    s.warmup_steps = 0;
    s.step_every = 30;
    s.gamma = 0.5f;
    assert_true(model_schedule_lr(&s, 29) == 0.1f);
    assert_true(fabsf(model_schedule_lr(&s, 30) - 0.05f) < 1e-7f);
    assert_true(fabsf(model_schedule_lr(&s, 95) - 0.0125f) < 1e-7f);
    model_lr_kind k;
    assert_int_equal(model_schedule_parse("cosine", &k), 0);
    assert_int_equal(k, MODEL_LR_COSINE);
    assert_string_equal(model_schedule_name(MODEL_LR_STEP), "step");
    assert_int_equal(model_schedule_parse("linear", &k), MODEL_EINVAL);
}

static void strerror_covers_every_code(void **state)
{
    (void)state;
    for (int e = 0; e < MODEL_ERR_COUNT; e++)
        assert_string_not_equal(model_strerror(e), "unknown error");
    assert_string_equal(model_strerror(MODEL_ERR_COUNT), "unknown error");
    assert_string_equal(model_strerror(-1), "unknown error");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sgd_matches_reference),
        cmocka_unit_test(sgd_same_bits_as_scalar_float),
        cmocka_unit_test(sgd_rejects_bad_config),
        cmocka_unit_test(schedules),
        cmocka_unit_test(strerror_covers_every_code),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
