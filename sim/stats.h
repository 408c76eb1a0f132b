/* sim/stats — summary statistics over replications (seeds) of a run.
 *
 * Purpose. `murmur sim --seeds N` runs the same scenario under N seeds and
 * reports, per metric, the sample mean, the sample standard deviation and a
 * two-sided confidence interval for the mean from Student's t distribution
 * (the replications are independent; their mean is approximately normal and
 * the variance is estimated, so t with n - 1 degrees of freedom):
 *
 *     mean = (1/n) sum x_i
 *     sd   = sqrt( sum (x_i - mean)^2 / (n - 1) )          (n >= 2)
 *     half = t_{1 - (1 - level)/2, n - 1} * sd / sqrt(n)
 *     CI   = [mean - half, mean + half]
 *
 * Values that are not finite (a metric the run left undefined: the time to
 * a target never reached, NaN) are left out; n counts the others. With
 * n = 1 the sd and the interval are undefined (NaN), with n = 0 the mean too.
 *
 * The t quantile is computed, not tabulated: the t CDF through the
 * regularized incomplete beta function (continued fraction, Lentz's method),
 * inverted by bisection to full double precision.
 *
 * Pure functions of their arguments; no allocation.
 */
#ifndef SIM_STATS_H
#define SIM_STATS_H

#include <stddef.h>
#include <stdint.h>

/* The confidence level of every interval murmur sim reports. */
#define SIM_STATS_LEVEL 0.95

typedef struct sim_stats {
    uint32_t n;     /* finite values used */
    double mean;    /* NaN when n == 0 */
    double sd;      /* sample standard deviation; NaN when n < 2 */
    double half;    /* half width of the interval; NaN when n < 2 */
    double ci_low;  /* mean - half */
    double ci_high; /* mean + half */
} sim_stats;

/* Cumulative distribution of Student's t with df > 0 degrees of freedom. */
double sim_stats_t_cdf(double t, double df);
/* The p-quantile of Student's t (0 < p < 1, df > 0); NaN outside. */
double sim_stats_t_quantile(double p, double df);
/* Mean, sd and the two-sided interval at `level` (0 < level < 1) of the
 * finite values among x[0..n). */
void sim_stats_compute(const double *x, size_t n, double level, sim_stats *out);
/* Same over x[k * stride] for k < n (a column of a row-major table). */
void sim_stats_compute_strided(const double *x, size_t n, size_t stride, double level,
                               sim_stats *out);

#endif
