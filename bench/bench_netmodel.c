/* bench_netmodel — speed of the simulator's models.
 *
 *   build/bench/bench_netmodel
 *
 * 1. Fast path: a consensus-style event loop at 10,000 agents with
 *    unlimited bandwidth. Each agent alternates local steps (sim_compute,
 *    lognormal stragglers) and sends one message per step to a random peer
 *    (sim_net_send with lognormal link latencies, 1% loss); deliveries are
 *    events too. Events go through sim/evq. Figure: events per second of
 *    the whole loop (queue + models), the simulator's budget without the
 *    protocol; target >= 1 million.
 * 2. Max-min flows: every agent keeps K messages of 64 KiB in flight to
 *    random peers over 100 Mb/s links; each completion starts a new flow.
 *    Figures: flow completions per second, and the mean size of the
 *    component recomputed per change (flows visited / recomputations),
 *    for a sparse case (components small) and a dense one (one giant
 *    component, the worst case: O(F log F) per change).
 *
 * Each figure is the median of RUNS runs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "model/rng.h"
#include "sim/compute.h"
#include "sim/evq.h"
#include "sim/netmodel.h"

#define RUNS 5

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return v[n / 2];
}

enum { EV_STEP = 1, EV_DELIVER = 2 };

static double fast_path(uint32_t agents, uint64_t events_target, uint64_t *events_out)
{
    sim_net_config nc = {.agents = agents,
                         .seed = 1,
                         .latency_kind = SIM_NET_LAT_LOGNORMAL,
                         .lat_a = 5,
                         .lat_b = 0.5,
                         .loss = 0.01};
    sim_compute_config cc = {.agents = agents,
                             .seed = 1,
                             .step_ms = 10,
                             .model = SIM_COMPUTE_LOGNORMAL,
                             .lognormal_sigma = 0.3};
    sim_net *net;
    sim_compute *comp;
    sim_evq q;
    if (sim_net_create(&net, &nc) || sim_compute_create(&comp, &cc) ||
        sim_evq_init(&q, 4 * agents, 64 * (size_t)agents)) {
        fprintf(stderr, "bench_netmodel: setup failed\n");
        exit(1);
    }
    model_rng r;
    model_rng_seed(&r, 7, 0);
    for (uint32_t a = 0; a < agents; a++) {
        sim_event e = {.time_ns = sim_compute_step_us(comp, a) * 1000, .kind = EV_STEP, .agent = a};
        sim_evq_push(&q, &e);
    }
    uint64_t events = 0, delivered = 0;
    double t0 = now_s();
    sim_event e;
    while (events < events_target && sim_evq_pop(&q, &e) == 0) {
        events++;
        if (e.kind == EV_DELIVER) {
            delivered++;
            continue;
        }
        uint32_t peer = (uint32_t)model_rng_below(&r, agents - 1);
        peer += peer >= e.agent;
        sim_net_delivery d;
        if (sim_net_send(net, e.agent, peer, 4096, events, e.time_ns, &d) == SIM_NET_DELIVER) {
            sim_event dv = {.time_ns = d.deliver_ns, .kind = EV_DELIVER, .agent = peer};
            sim_evq_push(&q, &dv);
        }
        sim_event nx = {.time_ns = e.time_ns + sim_compute_step_us(comp, e.agent) * 1000,
                        .kind = EV_STEP,
                        .agent = e.agent};
        sim_evq_push(&q, &nx);
    }
    double dt = now_s() - t0;
    if (delivered == 0) {
        fprintf(stderr, "bench_netmodel: nothing delivered\n");
        exit(1);
    }
    *events_out = events;
    sim_evq_free(&q);
    sim_compute_destroy(comp);
    sim_net_destroy(net);
    return (double)events / dt;
}

static double flows(uint32_t agents, uint32_t per_agent, uint64_t completions_target,
                    double *component_out)
{
    sim_net_config nc = {.agents = agents,
                         .seed = 1,
                         .up_bps = 100e6,
                         .down_bps = 100e6,
                         .latency_ms = 5,
                         .flows_max = agents * per_agent + 16};
    sim_net *net;
    if (sim_net_create(&net, &nc)) {
        fprintf(stderr, "bench_netmodel: setup failed\n");
        exit(1);
    }
    model_rng r;
    model_rng_seed(&r, 9, 0);
    uint64_t id;
    for (uint32_t a = 0; a < agents; a++)
        for (uint32_t k = 0; k < per_agent; k++) {
            uint32_t peer = (uint32_t)model_rng_below(&r, agents - 1);
            peer += peer >= a;
            if (sim_net_start_flow(net, a, peer, 65536, a, 0, &id)) {
                fprintf(stderr, "bench_netmodel: start_flow failed\n");
                exit(1);
            }
        }
    sim_net_stats s0;
    sim_net_get_stats(net, &s0);
    uint64_t done = 0;
    double t0 = now_s();
    while (done < completions_target) {
        uint64_t t = sim_net_next_completion(net);
        sim_net_advance(net, t);
        sim_net_delivery d;
        while (sim_net_pop(net, &d)) {
            done++;
            uint32_t a = d.src;
            uint32_t peer = (uint32_t)model_rng_below(&r, agents - 1);
            peer += peer >= a;
            sim_net_start_flow(net, a, peer, 65536, a, t, &id);
        }
    }
    double dt = now_s() - t0;
    sim_net_stats s1;
    sim_net_get_stats(net, &s1);
    *component_out =
        (double)(s1.recompute_flows - s0.recompute_flows) / (double)(s1.recomputes - s0.recomputes);
    sim_net_destroy(net);
    return (double)done / dt;
}

int main(void)
{
    double v[RUNS], comp[RUNS];
    uint64_t events = 0;
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("command: build/bench/bench_netmodel (median of %d runs)\n", RUNS);
    for (int i = 0; i < RUNS; i++)
        v[i] = fast_path(10000, 5000000, &events);
    printf("fast path, 10000 agents, unlimited bandwidth, lognormal latency, 1%% loss: "
           "%.2f M events/s (%llu events per run)\n",
           median(v, RUNS) / 1e6, (unsigned long long)events);
    struct {
        uint32_t agents, per_agent;
        uint64_t completions;
        const char *what;
    } cases[] = {
        {10000, 1, 200000, "sparse: 10000 agents x 1 flow"},
        {1000, 4, 2000, "dense: 1000 agents x 4 flows (one giant component)"},
        {200, 20, 2000, "dense: 200 agents x 20 flows"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (int i = 0; i < RUNS; i++)
            v[i] = flows(cases[c].agents, cases[c].per_agent, cases[c].completions, &comp[i]);
        printf("max-min flows, %s in flight, 64 KiB at 100 Mb/s: %.0f completions/s, "
               "%.0f flows per recomputation\n",
               cases[c].what, median(v, RUNS), median(comp, RUNS));
    }
    return 0;
}
