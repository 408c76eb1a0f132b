/* tests/gossip_agents — pairwise gossip's consensus contraction measured on
 * real agents: N agents of the real runtime (include/murmur.h: event loop,
 * NNG transport on 127.0.0.1, secure channel, SWIM membership) in one
 * process, mixing vectors that only mixing changes: the agent's defaults
 * but gossip with random peers at 32 bits and mixing.robust = none. (The
 * default, clip, bounds a peer's difference by a multiple of our own recent
 * local deltas, gossip/robust.h; hosts that do not train have next to none,
 * so it would clip nearly every exchange, and the two ends clip on their
 * own, which does not keep the sum: that measures the clip, not the
 * exchange.) Shared by
 * tests/test_gossip_agents.c (asserts) and bench/bench_gossip_agents.c
 * (prints; bench/gossip_agents.sh records it in docs/BENCHMARKS.md).
 *
 * Method. Agent 0 starts, the others join through it (state transfer gives
 * them its model), and once every agent sees all the others each host sets
 * its vector to a common model (N(0, 1) values) plus its own
 * N(0, GA_SPREAD^2) values. Then every host calls murmur_mix
 * (one counted step, mixing.interval_steps = 1, gossip, random peers, 32
 * bits) in a loop: its vector changes only by the results of its rounds.
 * A "round" of the cluster is N rounds completed, summed over the agents
 * (murmur_mix returning MURMUR_MIX_MIXED: a round's result applied; the
 * hosts are called one at a time in a random order, so the count moves by
 * one between samples), so each agent pushes once per round on average,
 * as in the simulator. The consensus distance cd(k) =
 * sqrt(sum_i |x_i - mean|^2) over the hosts' vectors is sampled when the
 * k-th cluster round completes; the variance factor per round is
 * (cd(k_hi) / cd(k_lo))^(2 / (k_hi - k_lo)). The sequential reference is
 * the same factor for N members averaging with a uniform random peer one
 * at a time in random order (the process Jelasity et al. analyse, whose
 * factor tends to 1 / (2 sqrt e) = 0.303 for large N and is smaller for
 * small N), by Monte Carlo over ga_ref_trials runs.
 *
 * The mean: each exchange keeps the sum exactly, but at any instant some
 * exchanges are half applied (the answer is on the wire) and a host holds
 * its vector without the passive changes pending in its mixer, so the
 * hosts' mean is checked to drift by a small fraction of the initial
 * spread per value, not to be exact (the exact check is test_mix's).
 *
 * Blocking, a few seconds; uses /tmp and ports in 20000..31999. */
#ifndef TESTS_GOSSIP_AGENTS_H
#define TESTS_GOSSIP_AGENTS_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/keys.h"
#include "include/murmur.h"
#include "model/rng.h"
#include "net/net.h"

#define GA_AGENTS_MAX 16u
/* Spread of the hosts' vectors around their common model (of scale 1):
 * agents start from one model and training moves them apart by far less
 * than its norm. */
#define GA_SPREAD     0.1
#define GA_ROUNDS_MAX 64u

typedef struct ga_result {
    uint32_t n, dim;
    unsigned k_lo, k_hi;          /* cluster rounds of the measured window */
    double factor;                /* measured variance factor per round */
    double reference;             /* sequential random pairing, same n and window */
    double cd[GA_ROUNDS_MAX + 1]; /* consensus distance after k cluster rounds */
    double mean_drift;            /* max |mean_end - mean_0| / initial spread per value */
    uint64_t rounds;              /* results applied, summed over the agents */
    uint64_t aborts;              /* aborted rounds (murmur_status), summed */
    double wall_s;                /* of the mixing loop */
} ga_result;

static double ga_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void ga_sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000L};
    nanosleep(&ts, NULL);
}

/* Sequential random pairing: the variance factor per round between rounds
 * k_lo and k_hi, (E var(k_hi) / E var(k_lo))^(1 / (k_hi - k_lo)) over
 * `trials` runs (a ratio of means: small N reach exact consensus now and
 * then, which a mean of logarithms cannot take). */
static double ga_reference(uint32_t n, unsigned k_lo, unsigned k_hi, unsigned trials, uint64_t seed)
{
    model_rng rng;
    model_rng_seed(&rng, seed, 77);
    double *x = malloc(n * sizeof *x), sum_lo = 0, sum_hi = 0;
    uint32_t *order = malloc(n * sizeof *order);
    for (unsigned t = 0; t < trials; t++) {
        for (uint32_t i = 0; i < n; i++)
            x[i] = model_rng_normal(&rng);
        double v_lo = 0, v = 0;
        for (unsigned k = 1; k <= k_hi; k++) {
            for (uint32_t i = 0; i < n; i++)
                order[i] = i;
            for (uint32_t i = n - 1; i > 0; i--) { /* Fisher-Yates */
                uint32_t j = (uint32_t)model_rng_below(&rng, i + 1), s = order[i];
                order[i] = order[j];
                order[j] = s;
            }
            for (uint32_t s = 0; s < n; s++) {
                uint32_t i = order[s], j = (uint32_t)model_rng_below(&rng, n - 1);
                j += j >= i;
                x[i] = x[j] = (x[i] + x[j]) / 2;
            }
            double m = 0;
            for (uint32_t i = 0; i < n; i++)
                m += x[i] / n;
            v = 0;
            for (uint32_t i = 0; i < n; i++)
                v += (x[i] - m) * (x[i] - m);
            if (k == k_lo)
                v_lo = v;
        }
        sum_lo += v_lo;
        sum_hi += v;
    }
    free(x);
    free(order);
    return pow(sum_hi / sum_lo, 1.0 / (k_hi - k_lo));
}

static double ga_distance(float *const *x, uint32_t n, uint32_t dim, double *mean)
{
    double s = 0;
    for (uint32_t j = 0; j < dim; j++) {
        double m = 0;
        for (uint32_t i = 0; i < n; i++)
            m += x[i][j];
        m /= n;
        if (mean)
            mean[j] = m;
        for (uint32_t i = 0; i < n; i++)
            s += (x[i][j] - m) * (x[i][j] - m);
    }
    return sqrt(s);
}

/* Run the measurement; 0 on success, else -1 with a message in err. */
static int ga_run(uint32_t n, uint32_t dim, unsigned k_hi, uint64_t seed, ga_result *r, char *err,
                  size_t errlen)
{
    memset(r, 0, sizeof *r);
    r->n = n;
    r->dim = dim;
    r->k_lo = 2;
    r->k_hi = k_hi;
    if (n < 2 || n > GA_AGENTS_MAX || k_hi <= r->k_lo || k_hi > GA_ROUNDS_MAX) {
        snprintf(err, errlen, "bad arguments");
        return -1;
    }
    char dir[64], path[300], msg[256];
    snprintf(dir, sizeof dir, "/tmp/murmur-gossip-agents-XXXXXX");
    if (!mkdtemp(dir) || net_init() != NET_OK) {
        snprintf(err, errlen, "mkdtemp or net_init failed");
        return -1;
    }
    uint8_t key[NET_NETWORK_KEY_SIZE];
    for (unsigned i = 0; i < sizeof key; i++)
        key[i] = (uint8_t)(i * 13 + 5);
    snprintf(path, sizeof path, "%s/net.key", dir);
    int rc = agent_keys_write_network(path, key, 1, msg, sizeof msg);
    murmur_agent *a[GA_AGENTS_MAX] = {0};
    float *x[GA_AGENTS_MAX] = {0};
    double *mean0 = calloc(dim, sizeof *mean0), *mean1 = calloc(dim, sizeof *mean1);
    /* below Linux's ephemeral ports (32768..), away from test_api's */
    int base = 20000 + (int)(getpid() % 700) * 17, port0 = 0;
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        char sub[300];
        snprintf(sub, sizeof sub, "%s/a%u", dir, i);
        mkdir(sub, 0700);
        net_identity id;
        rc = net_identity_generate(&id) != NET_OK ||
             agent_keys_write_identity(sub, &id, 1, msg, sizeof msg) != 0;
        net_identity_wipe(&id);
        char set_dir[340], set_key[340], set_listen[64], set_seed[64];
        snprintf(set_dir, sizeof set_dir, "node.data_dir=%s", sub);
        snprintf(set_key, sizeof set_key, "node.network_key_file=%s", path);
        snprintf(set_seed, sizeof set_seed, "seeds.seed=127.0.0.1:%d", port0);
        const char *set[] = {set_dir,
                             set_key,
                             set_listen,
                             "model.spec=host:gossip-agents",
                             "model.schedule_unit=steps",
                             "mixing.algorithm=gossip",
                             "mixing.topology=random",
                             "mixing.bits=32",
                             "mixing.robust=none",
                             "mixing.interval_steps=1",
                             "membership.probe_interval_ms=200",
                             "membership.probe_timeout_ms=100",
                             i ? set_seed : NULL,
                             NULL};
        x[i] = calloc(dim, sizeof(float));
        int orc = -1;
        for (int attempt = 0; rc == 0 && orc && attempt < 8; attempt++) { /* port taken */
            int port = 20000 + (base - 20000 + (int)i + attempt * 1213) % 12000;
            snprintf(set_listen, sizeof set_listen, "node.listen=127.0.0.1:%d", port);
            orc = murmur_open(&a[i], NULL, set, dim, msg, sizeof msg);
            if (orc == 0 && i == 0)
                port0 = port;
        }
        if (rc || orc) {
            snprintf(err, errlen, "agent %u: %s", i, rc ? "keys" : msg);
            rc = -1;
            break;
        }
        if (murmur_wait_ready(a[i], x[i], NULL, 30000, NULL)) {
            snprintf(err, errlen, "agent %u not ready in 30 s", i);
            rc = -1;
        }
    }
    /* every agent sees all the others */
    double t_end = ga_now_s() + 30;
    for (int all = 0; rc == 0 && !all;) {
        all = 1;
        for (uint32_t i = 0; i < n; i++) {
            murmur_status st = {.size = sizeof st};
            murmur_status_get(a[i], &st);
            all &= st.peers == n - 1;
        }
        if (!all && ga_now_s() > t_end) {
            snprintf(err, errlen, "the agents did not all see each other in 30 s");
            rc = -1;
        }
        ga_sleep_us(20000);
    }
    if (rc == 0) {
        model_rng rng;
        model_rng_seed(&rng, seed, 1);
        float *common = malloc(dim * sizeof *common);
        for (uint32_t j = 0; j < dim; j++)
            common[j] = (float)model_rng_normal(&rng);
        for (uint32_t i = 0; i < n; i++)
            for (uint32_t j = 0; j < dim; j++)
                x[i][j] = common[j] + (float)(GA_SPREAD * model_rng_normal(&rng));
        free(common);
        r->cd[0] = ga_distance(x, n, dim, mean0);
        unsigned k = 1;
        uint32_t order[GA_AGENTS_MAX];
        for (uint32_t i = 0; i < n; i++)
            order[i] = i;
        double t0 = ga_now_s();
        while (k <= k_hi && rc == 0) {
            for (uint32_t s = n - 1; s > 0; s--) { /* a new random order each pass */
                uint32_t j = (uint32_t)model_rng_below(&rng, s + 1), t = order[s];
                order[s] = order[j];
                order[j] = t;
            }
            for (uint32_t s = 0; s < n && rc == 0 && k <= k_hi; s++) {
                uint32_t i = order[s];
                int mr = murmur_mix(a[i], x[i], 1, 1);
                if (mr < 0) {
                    snprintf(err, errlen, "agent %u stopped", i);
                    rc = -1;
                }
                /* a round's result is applied: sample once the cluster
                 * has completed k rounds per agent on average */
                if (mr == MURMUR_MIX_MIXED && ++r->rounds >= (uint64_t)k * n)
                    r->cd[k++] = ga_distance(x, n, dim, NULL);
            }
            if (rc == 0 && ga_now_s() - t0 > 120) {
                snprintf(err, errlen, "only %llu rounds in 120 s", (unsigned long long)r->rounds);
                rc = -1;
            }
            ga_sleep_us(200);
        }
        r->wall_s = ga_now_s() - t0;
        if (rc == 0) {
            r->factor = pow(r->cd[k_hi] / r->cd[r->k_lo], 2.0 / (k_hi - r->k_lo));
            ga_distance(x, n, dim, mean1);
            double spread = r->cd[0] / sqrt((double)n * dim);
            for (uint32_t j = 0; j < dim; j++)
                r->mean_drift = fmax(r->mean_drift, fabs(mean1[j] - mean0[j]) / spread);
            r->reference = ga_reference(n, r->k_lo, k_hi, 4000, seed);
            ga_sleep_us(300000); /* /status is refreshed every 250 ms */
            for (uint32_t i = 0; i < n; i++) {
                murmur_status st = {.size = sizeof st};
                murmur_status_get(a[i], &st);
                r->aborts += st.round_aborts;
            }
        }
    }
    for (uint32_t i = 0; i < n; i++) {
        if (a[i])
            murmur_close(a[i], x[i], NULL);
        free(x[i]);
    }
    free(mean0);
    free(mean1);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0 && rc == 0) {
        snprintf(err, errlen, "could not remove %s", dir);
        rc = -1;
    }
    return rc;
}

#endif
