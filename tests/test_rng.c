/* model_rng: determinism, stream independence, distribution sanity. */
#include "tests/harness.h"

#include <math.h>

static void deterministic_and_streams_differ(void **state)
{
    (void)state;
    model_rng a, b, c;
    model_rng_seed(&a, 42, 0);
    model_rng_seed(&b, 42, 0);
    model_rng_seed(&c, 42, 1);
    int same_c = 0;
    for (int i = 0; i < 1000; i++) {
        uint64_t x = model_rng_u64(&a);
        assert_true(x == model_rng_u64(&b));
        same_c += x == model_rng_u64(&c);
    }
    assert_int_equal(same_c, 0);
}

static void below_is_uniform(void **state)
{
    (void)state;
    model_rng r;
    model_rng_seed(&r, test_seed(7), 0);
    enum { K = 10, N = 200000 };
    long counts[K] = {0};
    for (int i = 0; i < N; i++) {
        uint64_t x = model_rng_below(&r, K);
        assert_true(x < K);
        counts[x]++;
    }
    /* chi-square with 9 dof: 99.99% quantile is about 33.7 */
    double chi = 0;
    for (int k = 0; k < K; k++) {
        double e = (double)N / K;
        chi += (counts[k] - e) * (counts[k] - e) / e;
    }
    assert_true(chi < 33.7);
}

static void normal_and_gamma_moments(void **state)
{
    (void)state;
    model_rng r;
    model_rng_seed(&r, test_seed(3), 0);
    enum { N = 200000 };
    double s = 0, s2 = 0, g = 0;
    for (int i = 0; i < N; i++) {
        double x = model_rng_normal(&r);
        s += x;
        s2 += x * x;
        g += model_rng_gamma(&r, 0.5);
    }
    assert_true(fabs(s / N) < 0.02);
    assert_true(fabs(s2 / N - 1.0) < 0.02);
    assert_true(fabs(g / N - 0.5) < 0.02); /* mean of Gamma(k,1) is k */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(deterministic_and_streams_differ),
        cmocka_unit_test(below_is_uniform),
        cmocka_unit_test(normal_and_gamma_moments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
