/* embed_average — a host program of libmurmur (include/murmur.h): several
 * processes fit one linear model to their own data and mix it through
 * murmur, with no coordinator.
 *
 *   cc -std=c11 embed_average.c $(pkg-config --cflags --libs murmur) -lm
 *   ./embed_average DATA_DIR LISTEN [SEED] STEPS INDEX
 *
 * Each process I draws its own 512 samples (x in R^64, y = w*.x + noise,
 * with the feature scales of process I) from one true w*, trains
 * w with SGD for STEPS steps, calling murmur_mix after every step, and
 * prints its loss on its own data and its distance to w* before and after.
 * DATA_DIR holds its keys (murmur keygen --out DATA_DIR) and the cluster's
 * network key (DATA_DIR/network.key); LISTEN is host:port; SEED the
 * host:port of another process (none for the first). No shard catalog:
 * this host brings its own data, the agent mixes models only.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <murmur.h>

#define DIM   64
#define N     512
#define BATCH 16

static uint64_t rng_state;

static double unit(void) /* xorshift64*, in [0, 1) */
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)((rng_state * 2685821657736338717ULL) >> 11) / 9007199254740992.0;
}

static double gauss(void)
{
    double u = unit() + 1e-12, v = unit();
    return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: %s DATA_DIR LISTEN [SEED] STEPS INDEX\n", argv[0]);
        return 2;
    }
    int has_seed = argc >= 6;
    const char *data_dir = argv[1], *listen = argv[2], *seed = has_seed ? argv[3] : NULL;
    long steps = atol(argv[has_seed ? 4 : 3]);
    int index = atoi(argv[has_seed ? 5 : 4]);
    static float x[N][DIM], y[N], w[DIM], w_true[DIM];
    rng_state = 0x9e3779b97f4a7c15ULL;
    for (int k = 0; k < DIM; k++)
        w_true[k] = (float)gauss();
    rng_state = 0x1234567ULL + (uint64_t)index * 7919;
    for (int i = 0; i < N; i++) {
        double dot = 0;
        for (int k = 0; k < DIM; k++) {
            x[i][k] = (float)(gauss() * (1.0 + 0.5 * index * (k % 2)));
            dot += x[i][k] * w_true[k];
        }
        y[i] = (float)(dot + 0.1 * gauss());
    }
    char s_dir[1100], s_net[1100], s_listen[300], s_seed[300];
    snprintf(s_dir, sizeof s_dir, "node.data_dir=%s", data_dir);
    snprintf(s_net, sizeof s_net, "node.network_key_file=%s/network.key", data_dir);
    snprintf(s_listen, sizeof s_listen, "node.listen=%s", listen);
    snprintf(s_seed, sizeof s_seed, "seeds.seed=%s", seed ? seed : "");
    const char *settings[] = {s_dir,
                              s_net,
                              s_listen,
                              "model.spec=host:embed-average",
                              "model.schedule_unit=steps",
                              "model.schedule=constant",
                              "model.lr=0.01",
                              "model.warmup=0",
                              "model.lr_scaling=none",
                              "mixing.interval_steps=4",
                              "membership.probe_interval_ms=200",
                              "membership.probe_timeout_ms=100",
                              seed ? s_seed : NULL,
                              NULL};
    murmur_agent *a;
    char err[512];
    int rc = murmur_open(&a, NULL, settings, DIM, err, sizeof err);
    if (rc) {
        fprintf(stderr, "embed_average: %s (%s)\n", err, murmur_strerror(rc));
        return 1;
    }
    memset(w, 0, sizeof w); /* the same initial model everywhere */
    murmur_source src;
    if (murmur_wait_ready(a, w, NULL, 30000, &src)) {
        fprintf(stderr, "embed_average: not ready in 30 s\n");
        murmur_close(a, NULL, NULL);
        return 1;
    }
    double dist0 = 0;
    for (int k = 0; k < DIM; k++)
        dist0 += (w[k] - w_true[k]) * (w[k] - w_true[k]);
    for (long t = 0; t < steps; t++) {
        float g[DIM] = {0};
        for (int b = 0; b < BATCH; b++) {
            int i = (int)(unit() * N);
            double e = -y[i];
            for (int k = 0; k < DIM; k++)
                e += w[k] * x[i][k];
            for (int k = 0; k < DIM; k++)
                g[k] += (float)(e * x[i][k] / BATCH);
        }
        float lr = murmur_lr(a);
        for (int k = 0; k < DIM; k++)
            w[k] -= lr * g[k];
        rc = murmur_mix(a, w, 1, BATCH);
        if (rc < 0)
            break;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL); /* a 1 ms "step" */
    }
    double loss = 0, dist = 0;
    for (int i = 0; i < N; i++) {
        double e = -y[i];
        for (int k = 0; k < DIM; k++)
            e += w[k] * x[i][k];
        loss += e * e / N;
    }
    for (int k = 0; k < DIM; k++)
        dist += (w[k] - w_true[k]) * (w[k] - w_true[k]);
    murmur_status st = {.size = sizeof st};
    murmur_status_get(a, &st);
    printf("embed_average index=%d version=%s source=%d steps=%llu rounds=%llu peers=%u "
           "loss=%.5f dist0=%.4f dist=%.4f consensus=%.5f\n",
           index, murmur_version(), (int)src, (unsigned long long)st.steps,
           (unsigned long long)st.mixing_rounds, st.peers, loss, sqrt(dist0), sqrt(dist),
           st.consensus);
    return murmur_close(a, w, NULL) ? 1 : 0;
}
