/* bench_train — training throughput of the model layer, one BLAS thread.
 *
 * The MLP of the acceptance run (mlp:256,128,100 on 784 inputs, 10 classes)
 * at batch 64 with SGD momentum 0.9 and weight decay 5e-4, exactly the
 * per-step work of `murmur train`: gather a shuffled mini-batch of uint8
 * pixels into normalised floats (prefetching the next one's rows), forward,
 * backward, SGD update. Data: Fashion-MNIST when installed, else random
 * pixels (the arithmetic is the same). Each run times STEPS steps after a
 * warm-up; the median of RUNS runs is printed in samples/s with min..max
 * beside it, as "samples_per_s=N" (bench/extra_torch.sh parses that
 * line), and the same from the process's CPU time, "cpu_samples_per_s=N":
 * time-slicing by other processes on a shared machine inflates wall time
 * but not CPU time (a busy sibling hyperthread still slows both).
 *
 * Then the evaluation on the 10,000 test images (random ones without
 * Fashion-MNIST), interleaved RUNS times with the same passes taken one
 * training batch at a time through model_net_forward (how
 * model_net_evaluate took them before it used up to 256 rows a pass):
 * "eval_ms=N" and "batch_chunks_ms=N", medians, and "ratio=R", the
 * median of the runs' ratios.
 *
 * Any spec works (e.g. "cnn", the default CNN); bench/extra_torch_cnn.sh
 * runs it against PyTorch.
 *
 *   make bench  or  build/bench/bench_train [runs] [steps] [spec]
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/blas.h"
#include "model/net.h"
#include "model/optim.h"

#define RUNS_DEFAULT  7
#define RUNS_MAX      101
#define STEPS_DEFAULT 300
#define WARMUP_MAX    100 /* warm-up steps: steps / 3, at most this */
#define BATCH         64

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : RUNS_DEFAULT;
    int steps = argc > 2 ? atoi(argv[2]) : STEPS_DEFAULT;
    const char *spec = argc > 3 ? argv[3] : "mlp:256,128,100";
    if (runs < 1 || runs > RUNS_MAX || steps < 1) {
        fprintf(stderr, "usage: bench_train [runs 1..%d] [steps] [spec]\n", RUNS_MAX);
        return 2;
    }
    char note[256];
    if (model_blas_init(note, sizeof note)) /* as murmur does first (model/blas.h) */
        printf("bench_train: %s\n", note);
    openblas_set_num_threads(1);
    char msg[MODEL_MSG_MAX] = "";
    model_data train, test;
    const char *source = "fashion-mnist";
    if (model_fashion_load(&train, &test, NULL, msg, sizeof msg) != 0) {
        source = "random";
        model_rng r;
        model_rng_seed(&r, 1, 0);
        if (model_data_alloc(&train, 60000, 784, 10, MODEL_DTYPE_U8))
            return 1;
        for (size_t k = 0; k < (size_t)60000 * 784; k++)
            train.x_u8[k] = (uint8_t)model_rng_u64(&r);
        for (uint32_t i = 0; i < 60000; i++)
            train.labels[i] = (uint16_t)model_rng_below(&r, 10);
        if (model_data_alloc(&test, 10000, 784, 10, MODEL_DTYPE_U8))
            return 1;
        memcpy(test.x_u8, train.x_u8, (size_t)10000 * 784);
        memcpy(test.labels, train.labels, 10000 * sizeof *test.labels);
    }
    model_norm norm;
    model_net *net;
    model_sgd sgd;
    model_sgd_config cfg = {.momentum = 0.9f, .weight_decay = 5e-4f};
    if (model_norm_fit(&norm, &train, MODEL_NORM_UNIT) ||
        model_net_create(&net, spec, train.dim, train.classes, BATCH, msg, sizeof msg) ||
        model_sgd_init(&sgd, model_net_param_count(net), &cfg)) {
        fprintf(stderr, "bench_train: setup failed: %s\n", msg);
        return 1;
    }
    model_rng r;
    model_rng_seed(&r, 1, 0);
    model_net_init(net, &r);
    uint32_t *order = malloc(train.count * sizeof *order);
    model_data_shuffle(order, train.count, &r);
    float *x = model_net_input_buffer(net);
    uint16_t *y = model_net_label_buffer(net);
    uint32_t at = 0;
    double t[RUNS_MAX], c[RUNS_MAX];
    const int warmup = steps / 3 < WARMUP_MAX ? steps / 3 : WARMUP_MAX;
    for (int run = 0; run < runs; run++) {
        double t0 = 0, c0 = 0;
        for (int s = 0; s < warmup + steps; s++) {
            if (s == warmup) {
                t0 = now_s();
                c0 = cpu_s();
            }
            if (at + BATCH > train.count)
                at = 0;
            model_data_gather(&train, &norm, order + at, BATCH, x, y);
            at += BATCH;
            if (at + BATCH <= train.count) /* as the training loops do */
                model_data_prefetch(&train, order + at, BATCH);
            if (model_train_step(net, &sgd, x, y, BATCH, 0.01f, NULL))
                return 1;
        }
        t[run] = now_s() - t0;
        c[run] = cpu_s() - c0;
    }
    qsort(t, (size_t)runs, sizeof *t, cmp_d);
    qsort(c, (size_t)runs, sizeof *c, cmp_d);
    double n = (double)steps * BATCH;
    printf("bench_train model=%s params=%zu batch=%d blas_threads=1 blas_core=%s data=%s runs=%d "
           "steps=%d\n",
           spec, model_net_param_count(net), BATCH, model_blas_core(), source, runs, steps);
    printf("  samples_per_s=%.0f  (min %.0f .. max %.0f)  step_us=%.1f\n", n / t[runs / 2],
           n / t[runs - 1], n / t[0], t[runs / 2] / steps * 1e6);
    printf("  cpu_samples_per_s=%.0f  (min %.0f .. max %.0f)  cpu_step_us=%.1f\n", n / c[runs / 2],
           n / c[runs - 1], n / c[0], c[runs / 2] / steps * 1e6);
    double e[RUNS_MAX], b[RUNS_MAX], q[RUNS_MAX];
    for (int run = 0; run < runs; run++) {
        double loss, acc, t0 = now_s();
        if (model_net_evaluate(net, &test, &norm, &loss, &acc))
            return 1;
        e[run] = now_s() - t0;
        t0 = now_s();
        uint32_t rows[BATCH];
        for (uint32_t at2 = 0; at2 < test.count; at2 += BATCH) {
            uint32_t k = test.count - at2 < BATCH ? test.count - at2 : BATCH;
            for (uint32_t i = 0; i < k; i++)
                rows[i] = at2 + i;
            model_data_gather(&test, &norm, rows, k, x, y);
            if (!model_net_forward(net, x, k))
                return 1;
        }
        b[run] = now_s() - t0;
        q[run] = e[run] / b[run];
    }
    qsort(e, (size_t)runs, sizeof *e, cmp_d);
    qsort(b, (size_t)runs, sizeof *b, cmp_d);
    qsort(q, (size_t)runs, sizeof *q, cmp_d);
    printf("  evaluation of %u test images: eval_ms=%.1f  batch_chunks_ms=%.1f  ratio=%.3f\n",
           test.count, e[runs / 2] * 1e3, b[runs / 2] * 1e3, q[runs / 2]);
    printf("  command: build/bench/bench_train %d %d %s\n", runs, steps, spec);
    free(order);
    model_sgd_free(&sgd);
    model_net_destroy(net);
    model_norm_free(&norm);
    model_data_free(&train);
    model_data_free(&test);
    return 0;
}
