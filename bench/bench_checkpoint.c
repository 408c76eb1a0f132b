/* bench_checkpoint — cost of the agent's housekeeping: an atomic checkpoint
 * save (temp file, fsync, rename, dir fsync) and a verified load, a
 * /metrics render of the standard set, and one log line.
 *
 *   build/bench/bench_checkpoint [DIR]   (DIR default $TMPDIR or /tmp)
 *
 * Each figure is the median of RUNS runs. Checkpoint figures include the
 * fsyncs, so they depend on the file system under DIR; they decide how
 * often a checkpoint may be written (checkpoint.every_steps).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/checkpoint.h"
#include "agent/log.h"
#include "agent/metrics.h"

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

static int bench_ckpt(const char *dir, uint32_t dim)
{
    char path[512], err[256];
    snprintf(path, sizeof path, "%s/bench-%d.ckpt", dir, (int)getpid());
    float *p = malloc((size_t)dim * 4), *m = malloc((size_t)dim * 4);
    float *q = malloc((size_t)dim * 4), *qm = malloc((size_t)dim * 4);
    if (!p || !m || !q || !qm)
        return 1;
    for (uint32_t i = 0; i < dim; i++)
        p[i] = (float)i * 1e-6f, m[i] = -(float)i * 1e-7f;
    agent_checkpoint ck = {.spec = "mlp:1024,1024", .dim = dim, .params = p, .momentum = m};
    double save[RUNS], load[RUNS];
    for (int r = 0; r < RUNS; r++) {
        double t0 = now_s();
        if (agent_checkpoint_save(path, &ck, err, sizeof err)) {
            fprintf(stderr, "save: %s\n", err);
            return 1;
        }
        double t1 = now_s();
        if (agent_checkpoint_load(path, "mlp:1024,1024", dim, NULL, q, qm, err, sizeof err)) {
            fprintf(stderr, "load: %s\n", err);
            return 1;
        }
        double t2 = now_s();
        save[r] = t1 - t0;
        load[r] = t2 - t1;
    }
    unlink(path);
    double mb = (double)dim * 8 / 1e6;
    double s = median(save, RUNS), l = median(load, RUNS);
    printf("checkpoint %u params + momentum (%.0f MB): save %.1f ms (%.0f MB/s), "
           "load+verify %.1f ms (%.0f MB/s)\n",
           dim, mb, s * 1e3, mb / s, l * 1e3, mb / l);
    free(p), free(m), free(q), free(qm);
    return 0;
}

static int bench_render(void)
{
    agent_metrics *m;
    static agent_metrics_std s;
    if (agent_metrics_create(&m) || agent_metrics_std_register(m, &s))
        return 1;
    const char *causes[] = {"auth", "replay", "malformed", "too_big", "stale", "queue_full"};
    for (size_t i = 0; i < sizeof causes / sizeof causes[0]; i++)
        agent_metrics_std_reject(&s, causes[i]);
    double t[RUNS];
    size_t len = 0;
    for (int r = 0; r < RUNS; r++) {
        double t0 = now_s();
        for (int k = 0; k < 1000; k++) {
            char *text;
            if (agent_metrics_render(m, &text, &len))
                return 1;
            free(text);
        }
        t[r] = (now_s() - t0) / 1000;
    }
    printf("metrics render, standard set (%zu bytes): %.1f us\n", len, median(t, RUNS) * 1e6);
    double u[RUNS];
    for (int r = 0; r < RUNS; r++) {
        double t0 = now_s();
        for (int k = 0; k < 10000000; k++)
            agent_metric_add(s.bytes_sent[0x10], 100);
        u[r] = (now_s() - t0) / 1e7;
    }
    printf("counter update (one thread): %.1f ns\n", median(u, RUNS) * 1e9);
    agent_metrics_destroy(m);
    return 0;
}

static int bench_log(void)
{
    FILE *null = fopen("/dev/null", "w");
    if (!null)
        return 1;
    agent_log_set_output(null);
    double t[RUNS];
    for (int r = 0; r < RUNS; r++) {
        double t0 = now_s();
        for (int k = 0; k < 100000; k++) {
            agent_log_line l;
            agent_log_begin(&l, AGENT_LOG_INFO, "frame_rejected");
            agent_log_hex64(&l, "peer", 0x1f2e3d4c5b6a7980ull);
            agent_log_str(&l, "addr", "tcp://10.0.0.2:7000");
            agent_log_str(&l, "cause", "replay");
            agent_log_u64(&l, "counter", (uint64_t)k);
            agent_log_end(&l);
        }
        t[r] = (now_s() - t0) / 100000;
    }
    agent_log_set_output(NULL);
    fclose(null);
    printf("log line, 4 fields, to /dev/null: %.2f us\n", median(t, RUNS) * 1e6);
    return 0;
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    printf("command: %s %s (median of %d runs)\n", argv[0], dir, RUNS);
    if (bench_ckpt(dir, 1u << 20) || bench_ckpt(dir, 4u << 20) || bench_render() || bench_log())
        return 1;
    return 0;
}
