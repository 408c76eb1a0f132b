/* bench_swim — cost of SWIM membership (gossip/swim) on the swimnet harness.
 *
 * For N = 64 and N = 256 in-memory agents (latency 0.5-5 ms, no loss) that
 * have converged, runs 1000 probe periods of virtual time and reports the
 * wall time, the CPU cost per member and period (protocol core plus the
 * harness: event queue, copies), and the frames and bytes each member sends
 * per period. Median of 5 runs. The harness files are test-only code,
 * included here as in the swim suites.
 *
 *   make bench && build/bench/bench_swim
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tests/harness.c"
#include "tests/swimnet.c"

#define RUNS    5
#define PERIODS 1000u
#define PERIOD  1000000u

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(void)
{
    static const uint32_t sizes[] = {64, 256};
    printf("bench_swim: %u probe periods after convergence, median of %d runs\n", PERIODS, RUNS);
    printf("%5s %10s %16s %12s %12s\n", "N", "wall s", "us/member/period", "msgs/m/p", "bytes/m/p");
    for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++) {
        uint32_t n = sizes[c];
        double wall[RUNS], msgs = 0, bytes = 0;
        for (int r = 0; r < RUNS; r++) {
            swimnet_config cfg = {.n = n,
                                  .seed = 100 + (uint64_t)r,
                                  .latency_min_us = 500,
                                  .latency_max_us = 5000,
                                  .n_seeds = 3};
            swimnet *net = swimnet_create(&cfg);
            if (!net) {
                fprintf(stderr, "bench_swim: out of memory creating %u agents\n", n);
                return 1;
            }
            swimnet_run_until(net, 200u * (gossip_time_us)PERIOD);
            if (!swimnet_converged(net)) {
                fprintf(stderr, "bench_swim: N=%u did not converge in 200 periods\n", n);
                return 1;
            }
            uint64_t f0 = net->frames_sent, b0 = net->bytes_sent;
            double t0 = now_s();
            swimnet_run_until(net, (200u + PERIODS) * (gossip_time_us)PERIOD);
            wall[r] = now_s() - t0;
            msgs = (double)(net->frames_sent - f0) / n / PERIODS;
            bytes = (double)(net->bytes_sent - b0) / n / PERIODS;
            swimnet_destroy(net);
        }
        qsort(wall, RUNS, sizeof wall[0], cmp_double);
        double med = wall[RUNS / 2];
        printf("%5u %10.3f %16.2f %12.3f %12.1f\n", n, med, med * 1e6 / n / PERIODS, msgs, bytes);
    }
    printf("command: make bench && build/bench/bench_swim\n");
    return 0;
}
