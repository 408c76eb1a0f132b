/* sim/stats: Student's t distribution against closed forms (df = 1 is the
 * Cauchy distribution, df = 2 has an explicit CDF and quantile) and against
 * published table values; mean, sd and the 95% interval of small samples
 * computed by hand; undefined values left out. */
#include "tests/harness.h"

#include <math.h>

#include "sim/stats.h"

static void t_cdf_closed_forms(void **state)
{
    (void)state;
    const double pi = 3.14159265358979323846;
    for (double t = -30; t <= 30; t += 0.37) {
        /* df = 1: F(t) = 1/2 + atan(t) / pi */
        assert_true(fabs(sim_stats_t_cdf(t, 1) - (0.5 + atan(t) / pi)) < 1e-13);
        /* df = 2: F(t) = 1/2 + t / (2 sqrt(2 + t^2)) */
        assert_true(fabs(sim_stats_t_cdf(t, 2) - (0.5 + t / (2 * sqrt(2 + t * t)))) < 1e-13);
    }
    assert_true(sim_stats_t_cdf(0, 7) == 0.5);
    assert_true(sim_stats_t_cdf(INFINITY, 3) == 1 && sim_stats_t_cdf(-INFINITY, 3) == 0);
    assert_true(isnan(sim_stats_t_cdf(1, 0)) && isnan(sim_stats_t_cdf(NAN, 3)));
    /* large df tends to the normal distribution, Phi(1.959963984540054) =
     * 0.975; t_{0.975, 1000} = 1.96233908 (table) */
    assert_true(fabs(sim_stats_t_cdf(1.959963984540054, 1e6) - 0.975) < 1e-6);
    assert_true(fabs(sim_stats_t_quantile(0.975, 1000) - 1.96233908) < 1e-7);
}

static void t_quantiles(void **state)
{
    (void)state;
    /* df = 2: t_p = (2p - 1) / sqrt(2 p (1 - p)) */
    for (double p = 0.01; p < 1; p += 0.049) {
        double want = (2 * p - 1) / sqrt(2 * p * (1 - p));
        assert_true(fabs(sim_stats_t_quantile(p, 2) - want) < 1e-11 * (1 + fabs(want)));
    }
    /* df = 1: t_p = tan(pi (p - 1/2)) */
    assert_true(fabs(sim_stats_t_quantile(0.975, 1) - tan(3.14159265358979323846 * 0.475)) < 1e-10);
    /* table values of t_{0.975, df} (two-sided 95%), 9 significant digits */
    static const struct {
        double df, t;
    } tab[] = {{1, 12.7062047},  {2, 4.30265273},  {3, 3.18244631},
               {4, 2.77644511},  {5, 2.57058184},  {9, 2.26215716},
               {19, 2.09302405}, {30, 2.04227246}, {100, 1.98397152}};
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++) {
        double q = sim_stats_t_quantile(0.975, tab[i].df);
        if (fabs(q - tab[i].t) > 1e-7 * tab[i].t)
            fail_msg("t_0.975,%g = %.10f, table %.9f", tab[i].df, q, tab[i].t);
    }
    /* t_{0.995, 4} = 4.60409487 (two-sided 99%) */
    assert_true(fabs(sim_stats_t_quantile(0.995, 4) - 4.60409487) < 1e-7);
    /* symmetric, and the CDF inverts it */
    assert_true(sim_stats_t_quantile(0.025, 4) == -sim_stats_t_quantile(0.975, 4));
    assert_true(sim_stats_t_quantile(0.5, 4) == 0);
    assert_true(fabs(sim_stats_t_cdf(sim_stats_t_quantile(0.9, 6.5), 6.5) - 0.9) < 1e-14);
    assert_true(isnan(sim_stats_t_quantile(0, 4)) && isnan(sim_stats_t_quantile(1, 4)) &&
                isnan(sim_stats_t_quantile(0.9, 0)));
}

static void interval_by_hand(void **state)
{
    (void)state;
    /* 1..5: mean 3, sd sqrt(10 / 4) = 1.5811388300841898, half-width
     * t_{0.975,4} sd / sqrt(5) = 2.7764451051977987 * 0.7071067811865476
     * = 1.9632431614775607 */
    const double x[] = {1, 2, 3, 4, 5};
    sim_stats s;
    sim_stats_compute(x, 5, 0.95, &s);
    assert_int_equal(s.n, 5);
    assert_true(s.mean == 3);
    assert_true(fabs(s.sd - 1.5811388300841898) < 1e-15);
    assert_true(fabs(s.half - 1.9632431614775607) < 1e-12);
    assert_true(fabs(s.ci_low - (3 - 1.9632431614775607)) < 1e-12);
    assert_true(fabs(s.ci_high - (3 + 1.9632431614775607)) < 1e-12);
    /* two values 0.79 and 0.83: mean 0.81, sd 0.02 sqrt(2) = 0.0282842712,
     * half 12.7062047362 * 0.02 = 0.254124094724 */
    const double y[] = {0.79, 0.83};
    sim_stats_compute(y, 2, 0.95, &s);
    assert_true(fabs(s.mean - 0.81) < 1e-15);
    assert_true(fabs(s.sd - 0.0282842712474619) < 1e-15);
    assert_true(fabs(s.half - 0.254124094724) < 1e-10);
    /* nearly equal large values: the two-pass variance keeps its digits */
    const double z[] = {1e9 + 1, 1e9 + 2, 1e9 + 3};
    sim_stats_compute(z, 3, 0.95, &s);
    assert_true(s.sd == 1);
}

static void undefined_values(void **state)
{
    (void)state;
    /* a target never reached (NaN) is left out: n counts the others */
    const double x[] = {NAN, 10, INFINITY, 14, NAN};
    sim_stats s;
    sim_stats_compute(x, 5, 0.95, &s);
    assert_int_equal(s.n, 2);
    assert_true(s.mean == 12);
    assert_true(fabs(s.sd - sqrt(8)) < 1e-14);
    /* one value: a mean, no spread */
    sim_stats_compute(x + 1, 1, 0.95, &s);
    assert_int_equal(s.n, 1);
    assert_true(s.mean == 10 && isnan(s.sd) && isnan(s.half) && isnan(s.ci_low));
    /* none */
    sim_stats_compute(x, 1, 0.95, &s);
    assert_int_equal(s.n, 0);
    assert_true(isnan(s.mean) && isnan(s.sd));
    sim_stats_compute(NULL, 0, 0.95, &s);
    assert_int_equal(s.n, 0);
    /* strided: the column of a row-major table */
    const double tab[] = {1, 100, 2, 200, 3, 300};
    sim_stats_compute_strided(tab + 1, 3, 2, 0.95, &s);
    assert_true(s.mean == 200 && s.sd == 100);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_cdf_closed_forms),
        cmocka_unit_test(t_quantiles),
        cmocka_unit_test(interval_by_hand),
        cmocka_unit_test(undefined_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
