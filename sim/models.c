/* sim/models — what a simulated agent trains, one table of operations per
 * kind (sim_model_ops in sim/runner.h):
 *
 *   consensus  a vector of model.dim values N(0, 1) per agent, no local
 *              step: mixing alone moves it (consensus and mixing studies)
 *   quadratic  f_i(x) = 1/2 ||x - b_i||^2 with b_i = c + N(0, 1) per agent
 *              (c ~ N(0, 9) per coordinate): SGD with gradient noise
 *              QUAD_NOISE; the loss is measured at the global optimum, the
 *              mean of the b_i
 *   network    a model/ network (mlp:hidden, softmax or a cnn spec) trained by SGD on
 *              real data (IDX directory, CSV, or the packaged
 *              Fashion-MNIST) or on synthetic Gaussian clusters; agent i
 *              holds every n-th training sample
 *
 * Every draw comes from the run's generators (the agent's stream for its
 * initial vector and noise, the model stream for shared data). */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/shards.h"
#include "sim/runner.h"

#define QUAD_NOISE     0.1    /* gradient noise of the quadratic model */
#define EVAL_MAX       2000u  /* test samples evaluated per agent per sample */
#define EVAL_CHUNK_CNN 256u   /* a cnn evaluates them in chunks of this */
#define SYNTH_TRAIN    20000u /* synthetic classification data */
#define SYNTH_TEST     2000u
#define SYNTH_CLASS    10u

/* ---- consensus and quadratic: a plain vector ------------------------------ */

static int vector_init(runner *r)
{
    const sim_scenario *sc = r->sc;
    r->dim = sc->model.dim;
    if (sc->model.kind != SIM_MODEL_QUADRATIC)
        return 0;
    /* f_i(x) = 1/2 ||x - b_i||^2, b_i = c + N(0, 1): the global optimum is
     * the mean of the b_i. */
    r->m.quad_b = malloc((size_t)r->n * r->dim * sizeof *r->m.quad_b);
    r->m.quad_mean = calloc(r->dim, sizeof *r->m.quad_mean);
    if (!r->m.quad_b || !r->m.quad_mean)
        return sim_runner_fail(r, SIM_RUN_ENOMEM, "out of memory (quadratic optima)");
    for (uint32_t j = 0; j < r->dim; j++) {
        double c = 3.0 * model_rng_normal(&r->mrng);
        for (uint32_t i = 0; i < r->n; i++) {
            float v = (float)(c + model_rng_normal(&r->mrng));
            r->m.quad_b[(size_t)i * r->dim + j] = v;
            r->m.quad_mean[j] += v;
        }
        r->m.quad_mean[j] /= r->n;
    }
    return 0;
}

static int vector_agent_init(runner *r, uint32_t i)
{
    sim_agent_state *g = &r->a[i];
    g->x = malloc((size_t)r->dim * sizeof *g->x);
    if (!g->x)
        return sim_runner_fail(r, SIM_RUN_ENOMEM, "out of memory (agent vectors)");
    for (uint32_t j = 0; j < r->dim; j++)
        g->x[j] = r->sc->model.kind == SIM_MODEL_CONSENSUS ? (float)model_rng_normal(g->rng) : 0;
    return 0;
}

static void vector_agent_free(runner *r, uint32_t i)
{
    free(r->a[i].x);
    r->a[i].x = NULL;
}

static void vector_free(runner *r)
{
    free(r->m.quad_b);
    free(r->m.quad_mean);
    r->m.quad_b = NULL;
    r->m.quad_mean = NULL;
}

/* consensus and quadratic have no data set: a shard is 1 MiB (16 chunks of
 * the replicator's 64 KiB), small enough that every agent's replicator
 * runs on it in protocol mode at little cost; shards.bytes sets another. */
static double vector_shard_bytes(const runner *r)
{
    (void)r;
    return 16.0 * GOSSIP_SHARDS_CHUNK_DEFAULT;
}

static void quadratic_step(runner *r, uint32_t i)
{
    sim_agent_state *g = &r->a[i];
    const float *b = r->m.quad_b + (size_t)i * r->dim;
    float lr = (float)r->sc->model.lr;
    for (uint32_t j = 0; j < r->dim; j++) {
        float gr = g->x[j] - b[j] + (float)(QUAD_NOISE * model_rng_normal(g->rng));
        g->x[j] -= lr * gr;
    }
}

static void quadratic_eval(runner *r, uint32_t i, double *loss, double *acc)
{
    const sim_agent_state *g = &r->a[i];
    double s = 0;
    for (uint32_t j = 0; j < r->dim; j++) {
        double d = g->x[j] - r->m.quad_mean[j];
        s += d * d;
    }
    *loss = 0.5 * s / r->dim;
    *acc = NAN;
}

static const sim_model_ops consensus_ops = {
    .init = vector_init,
    .agent_init = vector_agent_init,
    .agent_free = vector_agent_free,
    .free = vector_free,
    .shard_bytes = vector_shard_bytes,
};

static const sim_model_ops quadratic_ops = {
    .init = vector_init,
    .agent_init = vector_agent_init,
    .step = quadratic_step,
    .eval = quadratic_eval,
    .agent_free = vector_agent_free,
    .free = vector_free,
    .shard_bytes = vector_shard_bytes,
};

/* ---- networks on data ----------------------------------------------------- */

static int load_data(runner *r)
{
    const sim_scenario *sc = r->sc;
    char msg[MODEL_MSG_MAX];
    int rc;
    const char *path = sc->model.data;
    if (path[0] == '\0') {
        /* Synthetic: SYNTH_CLASS Gaussian clusters in model.dim features,
         * class means N(0, 1), unit noise. */
        uint32_t d = sc->model.dim;
        if ((rc = model_data_alloc(&r->m.train, SYNTH_TRAIN, d, SYNTH_CLASS, MODEL_DTYPE_F32)) ||
            (rc = model_data_alloc(&r->m.test, SYNTH_TEST, d, SYNTH_CLASS, MODEL_DTYPE_F32)))
            return sim_runner_fail(r, SIM_RUN_EMODEL, "synthetic data: %s", model_strerror(rc));
        float *means = malloc((size_t)SYNTH_CLASS * d * sizeof *means);
        if (!means)
            return sim_runner_fail(r, SIM_RUN_ENOMEM, "synthetic data: out of memory");
        for (size_t k = 0; k < (size_t)SYNTH_CLASS * d; k++)
            means[k] = (float)model_rng_normal(&r->mrng);
        model_data *sets[2] = {&r->m.train, &r->m.test};
        for (int s = 0; s < 2; s++)
            for (uint32_t i = 0; i < sets[s]->count; i++) {
                uint16_t c = (uint16_t)model_rng_below(&r->mrng, SYNTH_CLASS);
                sets[s]->labels[i] = c;
                for (uint32_t j = 0; j < d; j++)
                    sets[s]->x_f32[(size_t)i * d + j] =
                        means[(size_t)c * d + j] + (float)(2.0 * model_rng_normal(&r->mrng));
            }
        free(means);
        return 0;
    }
    size_t plen = strlen(path);
    if (plen > 4 && strcmp(path + plen - 4, ".csv") == 0) {
        model_data all = {0};
        if ((rc = model_csv_load(&all, path, 0, msg, sizeof msg)))
            return sim_runner_fail(r, SIM_RUN_EMODEL, "model.data = %s: %s", path, msg);
        if (all.count < 20) {
            model_data_free(&all);
            return sim_runner_fail(r, SIM_RUN_EMODEL,
                                   "model.data = %s: %u samples, need at least 20", path,
                                   all.count);
        }
        /* The last tenth is the test set. */
        uint32_t ntest = all.count / 10, ntrain = all.count - ntest;
        uint32_t *rows = malloc((size_t)all.count * sizeof *rows);
        if (!rows) {
            model_data_free(&all);
            return sim_runner_fail(r, SIM_RUN_ENOMEM, "out of memory");
        }
        for (uint32_t i = 0; i < all.count; i++)
            rows[i] = i;
        rc = model_data_subset(&r->m.train, &all, rows, ntrain);
        if (!rc)
            rc = model_data_subset(&r->m.test, &all, rows + ntrain, ntest);
        free(rows);
        model_data_free(&all);
        if (rc)
            return sim_runner_fail(r, SIM_RUN_EMODEL, "model.data = %s: %s", path,
                                   model_strerror(rc));
        r->m.train.classes = r->m.test.classes =
            r->m.train.classes > r->m.test.classes ? r->m.train.classes : r->m.test.classes;
        if ((rc = model_norm_fit(&r->m.norm, &r->m.train, MODEL_NORM_FEATURE)))
            return sim_runner_fail(r, SIM_RUN_EMODEL, "model.data = %s: %s", path,
                                   model_strerror(rc));
        r->m.use_norm = 1;
        return 0;
    }
    /* A directory holding the four (Fashion-)MNIST IDX files; "fashion-mnist"
     * names the packaged copy. */
    const char *dir = strcmp(path, "fashion-mnist") == 0 ? MODEL_FASHION_DIR : path;
    if ((rc = model_fashion_load(&r->m.train, &r->m.test, dir, msg, sizeof msg)))
        return sim_runner_fail(
            r, SIM_RUN_EMODEL,
            "model.data = %s: %s (a directory of IDX files, 'fashion-mnist' or a .csv file)", path,
            msg);
    if ((rc = model_norm_fit(&r->m.norm, &r->m.train, MODEL_NORM_UNIT)))
        return sim_runner_fail(r, SIM_RUN_EMODEL, "model.data = %s: %s", path, model_strerror(rc));
    r->m.use_norm = 1;
    return 0;
}

static int net_init(runner *r)
{
    if (load_data(r))
        return r->failed;
    if (r->m.train.count / r->n == 0)
        return sim_runner_fail(r, SIM_RUN_EINVAL,
                               "run.agents = %u: more agents than training samples (%u)", r->n,
                               r->m.train.count);
    uint32_t ne = r->m.test.count < EVAL_MAX ? r->m.test.count : EVAL_MAX;
    uint32_t *rows = malloc((size_t)ne * sizeof *rows);
    if (!rows)
        return sim_runner_fail(r, SIM_RUN_ENOMEM, "out of memory");
    for (uint32_t i = 0; i < ne; i++)
        rows[i] = i;
    int rc = model_data_subset(&r->m.eval, &r->m.test, rows, ne);
    free(rows);
    if (rc)
        return sim_runner_fail(r, SIM_RUN_EMODEL, "evaluation set: %s", model_strerror(rc));
    r->m.eval.classes = r->m.train.classes;
    openblas_set_num_threads(1);
    return 0;
}

void sim_models_init_rng(const sim_scenario *sc, model_rng *init)
{
    /* model.init_seed: the agent's trainer seeds stream 0 of it
     * (agent/trainer.c), so a simulated net of the same spec starts from
     * the agents' very parameters */
    if (sc->model.init_seed)
        model_rng_seed(init, sc->model.init_seed, 0);
    else
        model_rng_seed(init, sc->run.seed, SIM_SALT_MODEL + 1);
}

/* Agent i's network; its vector x is the net's parameters. */
static int net_agent_init(runner *r, uint32_t i)
{
    sim_agent_state *g = &r->a[i];
    const sim_scenario *sc = r->sc;
    char spec[SIM_SCENARIO_STR_MAX], msg[MODEL_MSG_MAX];
    if (sc->model.kind == SIM_MODEL_MLP)
        snprintf(spec, sizeof spec, "mlp:%u", sc->model.hidden);
    else if (sc->model.kind == SIM_MODEL_CNN)
        snprintf(spec, sizeof spec, "%s", sc->model.spec);
    else
        snprintf(spec, sizeof spec, "softmax");
    g->nrows = r->m.train.count / r->n;
    uint32_t batch = sc->model.batch < g->nrows ? sc->model.batch : g->nrows;
    /* a cnn's workspace is ~100x an mlp's per sample: it evaluates in
     * chunks of EVAL_CHUNK_CNN (~60 MB for the default CNN) */
    uint32_t eval = sc->model.kind == SIM_MODEL_CNN ? EVAL_CHUNK_CNN : EVAL_MAX;
    int rc = model_net_create(&g->net, spec, r->m.train.dim, r->m.train.classes,
                              batch > eval ? batch : eval, msg, sizeof msg);
    if (rc)
        return sim_runner_fail(r, SIM_RUN_EMODEL, "model %s: %s", spec, msg);
    model_sgd_config scfg = {0};
    if ((rc = model_sgd_init(&g->sgd, model_net_param_count(g->net), &scfg)))
        return sim_runner_fail(r, SIM_RUN_EMODEL, "optimizer: %s", model_strerror(rc));
    /* Every agent starts from the same initial parameters (as agents that
     * agree on an init seed); its data is every n-th training sample. */
    model_rng init;
    sim_models_init_rng(sc, &init);
    model_net_init(g->net, &init);
    g->x = model_net_params(g->net);
    g->rows = malloc((size_t)g->nrows * sizeof *g->rows);
    if (!g->rows)
        return sim_runner_fail(r, SIM_RUN_ENOMEM, "out of memory (agent data)");
    for (uint32_t k = 0; k < g->nrows; k++)
        g->rows[k] = i + k * r->n;
    model_data_shuffle(g->rows, g->nrows, g->rng);
    if (r->dim == 0)
        r->dim = (uint32_t)model_net_param_count(g->net);
    return 0;
}

static void net_step(runner *r, uint32_t i)
{
    sim_agent_state *g = &r->a[i];
    const sim_scenario *sc = r->sc;
    uint32_t batch = sc->model.batch < g->nrows ? sc->model.batch : g->nrows;
    if (g->cursor + batch > g->nrows) {
        model_data_shuffle(g->rows, g->nrows, g->rng);
        g->cursor = 0;
    }
    float *xb = model_net_input_buffer(g->net);
    uint16_t *yb = model_net_label_buffer(g->net);
    model_data_gather(&r->m.train, r->m.use_norm ? &r->m.norm : NULL, g->rows + g->cursor, batch,
                      xb, yb);
    g->cursor += batch;
    float loss = NAN;
    if (model_train_step(g->net, &g->sgd, xb, yb, batch, (float)sc->model.lr, &loss) == 0)
        g->loss = loss;
    /* A diverged model would poison every peer: the mixer refuses
     * non-finite vectors, so the agent restarts from zero instead. */
    for (uint32_t j = 0; j < r->dim; j++)
        if (!isfinite(g->x[j])) {
            memset(g->x, 0, (size_t)r->dim * sizeof *g->x);
            break;
        }
}

static void net_eval(runner *r, uint32_t i, double *loss, double *acc)
{
    if (model_net_evaluate(r->a[i].net, &r->m.eval, r->m.use_norm ? &r->m.norm : NULL, loss, acc) !=
        0)
        *loss = *acc = NAN;
}

static void net_agent_free(runner *r, uint32_t i)
{
    sim_agent_state *g = &r->a[i];
    if (g->net) {
        model_net_destroy(g->net);
        model_sgd_free(&g->sgd);
    }
    g->net = NULL;
    g->x = NULL;
    free(g->rows);
    g->rows = NULL;
}

static void net_free(runner *r)
{
    model_data_free(&r->m.train);
    model_data_free(&r->m.test);
    model_data_free(&r->m.eval);
    model_norm_free(&r->m.norm);
}

static double net_shard_bytes(const runner *r)
{
    return (double)r->m.train.count / r->sh.nshards * (double)r->m.train.dim *
           (double)model_dtype_size(r->m.train.dtype);
}

static const sim_model_ops net_ops = {
    .init = net_init,
    .agent_init = net_agent_init,
    .step = net_step,
    .eval = net_eval,
    .agent_free = net_agent_free,
    .free = net_free,
    .shard_bytes = net_shard_bytes,
};

/* ---- the run's side ------------------------------------------------------- */

int sim_models_init(runner *r)
{
    switch (r->sc->model.kind) {
    case SIM_MODEL_CONSENSUS:
        r->m.ops = &consensus_ops;
        break;
    case SIM_MODEL_QUADRATIC:
        r->m.ops = &quadratic_ops;
        break;
    default:
        r->m.ops = &net_ops;
        break;
    }
    return r->m.ops->init(r);
}

int sim_models_agent_init(runner *r, uint32_t i)
{
    return r->m.ops->agent_init(r, i);
}

void sim_models_step(runner *r, uint32_t i)
{
    r->a[i].steps++;
    sim_engine_trace(r->e, sim_runner_now(r));
    sim_engine_trace(r->e, 0x57E9000000000000ULL | i);
    if (r->m.ops->step)
        r->m.ops->step(r, i);
}

void sim_models_eval(runner *r, uint32_t i, double *loss, double *acc)
{
    *loss = NAN;
    *acc = NAN;
    if (r->m.ops->eval)
        r->m.ops->eval(r, i, loss, acc);
}

void sim_models_free(runner *r)
{
    if (!r->m.ops)
        return;
    if (r->a)
        for (uint32_t i = 0; i < r->n; i++)
            r->m.ops->agent_free(r, i);
    r->m.ops->free(r);
}

double sim_models_shard_bytes(const runner *r)
{
    return r->m.ops->shard_bytes(r);
}
