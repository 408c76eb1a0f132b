/* sim/stats — see stats.h. */
#include "sim/stats.h"

#include <assert.h>
#include <float.h>
#include <math.h>

/* Continued fraction of the incomplete beta function (modified Lentz):
 * converges fast for x < (a + 1) / (a + b + 2); 300 terms are far more
 * than the a, b of t distributions with df <= 10^6 need. */
#define STATS_CF_TERMS 300
#define STATS_CF_EPS   1e-16
#define STATS_TINY     1e-300

static double stats_beta_cf(double a, double b, double x)
{
    double qab = a + b, qap = a + 1, qam = a - 1;
    double c = 1, d = 1 - qab * x / qap;
    if (fabs(d) < STATS_TINY)
        d = STATS_TINY;
    d = 1 / d;
    double h = d;
    for (int m = 1; m <= STATS_CF_TERMS; m++) {
        int m2 = 2 * m;
        double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1 + aa * d;
        if (fabs(d) < STATS_TINY)
            d = STATS_TINY;
        c = 1 + aa / c;
        if (fabs(c) < STATS_TINY)
            c = STATS_TINY;
        d = 1 / d;
        h *= d * c;
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1 + aa * d;
        if (fabs(d) < STATS_TINY)
            d = STATS_TINY;
        c = 1 + aa / c;
        if (fabs(c) < STATS_TINY)
            c = STATS_TINY;
        d = 1 / d;
        double del = d * c;
        h *= del;
        if (fabs(del - 1) < STATS_CF_EPS)
            break;
    }
    return h;
}

/* Regularized incomplete beta I_x(a, b), 0 <= x <= 1. */
static double stats_beta_inc(double a, double b, double x)
{
    assert(a > 0 && b > 0);
    if (x <= 0)
        return 0;
    if (x >= 1)
        return 1;
    double lfront = lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x);
    double front = exp(lfront);
    if (x < (a + 1) / (a + b + 2))
        return front * stats_beta_cf(a, b, x) / a;
    return 1 - front * stats_beta_cf(b, a, 1 - x) / b;
}

double sim_stats_t_cdf(double t, double df)
{
    if (!(df > 0) || isnan(t))
        return NAN;
    if (isinf(t))
        return t > 0 ? 1 : 0;
    /* P(|T| > |t|) = I_{df / (df + t^2)}(df / 2, 1 / 2) */
    double tail = 0.5 * stats_beta_inc(df / 2, 0.5, df / (df + t * t));
    return t > 0 ? 1 - tail : tail;
}

double sim_stats_t_quantile(double p, double df)
{
    if (!(p > 0 && p < 1) || !(df > 0))
        return NAN;
    if (p == 0.5)
        return 0;
    if (p < 0.5)
        return -sim_stats_t_quantile(1 - p, df);
    /* The CDF is increasing: bisect on [0, hi] with hi doubled until it
     * brackets p; 2000 halvings stop long before, when the bracket no
     * longer shrinks in double precision. */
    double lo = 0, hi = 1;
    while (sim_stats_t_cdf(hi, df) < p && hi < 1e300)
        hi *= 2;
    for (int k = 0; k < 2000; k++) {
        double mid = lo + (hi - lo) / 2;
        if (mid <= lo || mid >= hi)
            break;
        if (sim_stats_t_cdf(mid, df) < p)
            lo = mid;
        else
            hi = mid;
    }
    return lo + (hi - lo) / 2;
}

void sim_stats_compute_strided(const double *x, size_t n, size_t stride, double level,
                               sim_stats *out)
{
    assert(out && (n == 0 || x) && stride >= 1);
    assert(level > 0 && level < 1);
    double sum = 0;
    uint32_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(x[i * stride]))
            sum += x[i * stride], k++;
    out->n = k;
    out->mean = k ? sum / k : NAN;
    out->sd = out->half = out->ci_low = out->ci_high = NAN;
    if (k < 2)
        return;
    /* Two passes: the sum of squared deviations from the mean, not
     * sum(x^2) - n mean^2, which cancels badly for nearly equal values. */
    double ss = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(x[i * stride])) {
            double d = x[i * stride] - out->mean;
            ss += d * d;
        }
    out->sd = sqrt(ss / (k - 1));
    double t = sim_stats_t_quantile(1 - (1 - level) / 2, k - 1);
    out->half = t * out->sd / sqrt((double)k);
    out->ci_low = out->mean - out->half;
    out->ci_high = out->mean + out->half;
}

void sim_stats_compute(const double *x, size_t n, double level, sim_stats *out)
{
    sim_stats_compute_strided(x, n, 1, level, out);
}
