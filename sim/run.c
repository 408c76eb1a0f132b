#include "sim/run.h"

#include <cblas.h>
#include <malloc.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gossip/mix.h"
#include "gossip/node.h"
#include "gossip/placement.h"
#include "gossip/shards.h"
#include "model/data.h"
#include "model/net.h"
#include "model/optim.h"
#include "model/rng.h"
#include "sim/compute.h"
#include "sim/engine.h"
#include "sim/faults.h"
#include "sim/netmodel.h"
#include "sim/plot.h"

enum { EV_STEP = SIM_EV_USER, EV_FAULT, EV_SAMPLE };

#define NOW(r) sim_engine_now((r)->e)

/* Generator salts (streams) of the runner's own draws; agents use streams
 * 0..agents-1 of the seed. */
#define SALT_ORDER  0x5155000000000001ULL /* rounds-mode delivery order, loss */
#define SALT_MODEL  0x5155000000000002ULL /* initial vectors, data, placement */
#define SALT_STATE  0x5155000000000003ULL /* state-transfer source of a restart */
#define QUAD_NOISE  0.1                   /* gradient noise of the quadratic model */
#define EVAL_MAX    2000u                 /* test samples evaluated per agent per sample */
#define SYNTH_TRAIN 20000u                /* synthetic classification data */
#define SYNTH_TEST  2000u
#define SYNTH_CLASS 10u

typedef struct agent {
    gossip_mix *mix;
    float *x;       /* the model vector (for networks: the net's parameters) */
    model_rng *rng; /* the engine's stream of this agent */
    uint8_t present, mixing;
    gossip_time_us mix_start;
    uint64_t steps, mixes, aborted;
    double loss; /* loss of the last local step */
    model_net *net;
    model_sgd sgd;
    uint32_t *rows, nrows, cursor;
    /* membership.mode = swim: the agent's protocol core; mix is its mixer */
    gossip_node *node;
    uint8_t ready; /* the node has an agreed model (READY): it may mix */
    uint32_t dim;  /* for the state-transfer snapshot */
    char addr[24]; /* "sim://<index>" */
} sim_agent_state;

typedef struct shard_holder {
    uint32_t agent;
    uint64_t ready_us;
} shard_holder;

typedef struct runner {
    const sim_scenario *sc;
    uint32_t n, dim;
    int timed;
    int swim; /* membership.mode = swim */
    sim_agent_state *a;
    sim_engine *e;
    sim_compute *comp;
    sim_fault_list faults;
    size_t next_fault; /* rounds mode */
    gossip_mix_config mcfg;
    model_rng state, mrng;
    gossip_env renv; /* the runner's env (placement scratch) */
    gossip_time_us now, end_us;
    uint64_t epoch;
    uint32_t *group; /* partition groups, NULL = none */
    uint64_t mix_done, mix_aborted, crashes, restarts, transfers;
    double mix_time_sum, mix_time_max;
    uint64_t *ids;
    /* models */
    float *quad_b;     /* agents x dim optima */
    double *quad_mean; /* dim */
    model_data train, test, eval;
    model_norm norm;
    int use_norm;
    /* shards */
    uint32_t nshards, width;
    int shards_placed; /* the initial placement is done */
    uint8_t (*shard_ids)[GOSSIP_SHARD_ID_SIZE];
    shard_holder *holders; /* nshards x 2 width */
    uint8_t *nhold, *shard_lost;
    uint64_t *prow;
    uint64_t copy_us, shards_lost;
    uint8_t *hfail;              /* holders with a complete copy lost since the shard last had r */
    uint32_t prim_min, prim_max; /* primaries per live agent in the last placement */
    /* invariant checks (opts->check) */
    uint64_t *seen_epoch; /* per agent: highest view epoch seen */
    uint64_t violations;
    char violation[SIM_VIOLATION_MAX];
    double first_cd; /* consensus distance of the first sample */
    /* output */
    sim_output out;
    int out_open;
    uint64_t rows;
    double target_time, last_acc, last_loss, last_cd;
    double mem_per_agent;    /* heap bytes allocated by agent setup, per agent */
    uint64_t last_sample_us; /* timed mode: time of the last sample */
    double *matrix;          /* latency matrix until the engine copied it */
    /* progress */
    const sim_run_opts *opts;
    struct timespec t0, last_print;
    char err[512];
    int failed;
} runner;

const char *sim_run_strerror(int err)
{
    switch (err) {
    case SIM_RUN_OK:
        return "ok";
    case SIM_RUN_EINVAL:
        return "scenario cannot run";
    case SIM_RUN_ENOMEM:
        return "out of memory";
    case SIM_RUN_EIO:
        return "i/o error";
    case SIM_RUN_EMODEL:
        return "model or data error";
    case SIM_RUN_EFULL:
        return "event queue or network full";
    case SIM_RUN_EFAULTS:
        return "fault list error";
    default:
        return "unknown error";
    }
}

static int fail(runner *r, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(runner *r, int code, const char *fmt, ...)
{
    if (!r->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->err, sizeof r->err, fmt, ap);
        va_end(ap);
        r->failed = code;
    }
    return code;
}

static double wall_since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + 1e-9 * (double)(t.tv_nsec - t0->tv_nsec);
}

/* ---- env ------------------------------------------------------------------ */

static void *env_alloc(void *ctx, size_t size)
{
    (void)ctx;
    return malloc(size ? size : 1);
}

static void env_free(void *ctx, void *p)
{
    (void)ctx;
    free(p);
}

/* ---- models --------------------------------------------------------------- */

static int is_net(const runner *r)
{
    return r->sc->model.kind == SIM_MODEL_MLP || r->sc->model.kind == SIM_MODEL_SOFTMAX;
}

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
        if ((rc = model_data_alloc(&r->train, SYNTH_TRAIN, d, SYNTH_CLASS, MODEL_DTYPE_F32)) ||
            (rc = model_data_alloc(&r->test, SYNTH_TEST, d, SYNTH_CLASS, MODEL_DTYPE_F32)))
            return fail(r, SIM_RUN_EMODEL, "synthetic data: %s", model_strerror(rc));
        float *means = malloc((size_t)SYNTH_CLASS * d * sizeof *means);
        if (!means)
            return fail(r, SIM_RUN_ENOMEM, "synthetic data: out of memory");
        for (size_t k = 0; k < (size_t)SYNTH_CLASS * d; k++)
            means[k] = (float)model_rng_normal(&r->mrng);
        model_data *sets[2] = {&r->train, &r->test};
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
            return fail(r, SIM_RUN_EMODEL, "model.data = %s: %s", path, msg);
        if (all.count < 20) {
            model_data_free(&all);
            return fail(r, SIM_RUN_EMODEL, "model.data = %s: %u samples, need at least 20", path,
                        all.count);
        }
        /* The last tenth is the test set. */
        uint32_t ntest = all.count / 10, ntrain = all.count - ntest;
        uint32_t *rows = malloc((size_t)all.count * sizeof *rows);
        if (!rows) {
            model_data_free(&all);
            return fail(r, SIM_RUN_ENOMEM, "out of memory");
        }
        for (uint32_t i = 0; i < all.count; i++)
            rows[i] = i;
        rc = model_data_subset(&r->train, &all, rows, ntrain);
        if (!rc)
            rc = model_data_subset(&r->test, &all, rows + ntrain, ntest);
        free(rows);
        model_data_free(&all);
        if (rc)
            return fail(r, SIM_RUN_EMODEL, "model.data = %s: %s", path, model_strerror(rc));
        r->train.classes = r->test.classes =
            r->train.classes > r->test.classes ? r->train.classes : r->test.classes;
        if ((rc = model_norm_fit(&r->norm, &r->train, MODEL_NORM_FEATURE)))
            return fail(r, SIM_RUN_EMODEL, "model.data = %s: %s", path, model_strerror(rc));
        r->use_norm = 1;
        return 0;
    }
    /* A directory holding the four (Fashion-)MNIST IDX files; "fashion-mnist"
     * names the packaged copy. */
    const char *dir = strcmp(path, "fashion-mnist") == 0 ? MODEL_FASHION_DIR : path;
    if ((rc = model_fashion_load(&r->train, &r->test, dir, msg, sizeof msg)))
        return fail(
            r, SIM_RUN_EMODEL,
            "model.data = %s: %s (a directory of IDX files, 'fashion-mnist' or a .csv file)", path,
            msg);
    if ((rc = model_norm_fit(&r->norm, &r->train, MODEL_NORM_UNIT)))
        return fail(r, SIM_RUN_EMODEL, "model.data = %s: %s", path, model_strerror(rc));
    r->use_norm = 1;
    return 0;
}

static int models_init(runner *r)
{
    const sim_scenario *sc = r->sc;
    if (sc->model.kind == SIM_MODEL_CONSENSUS || sc->model.kind == SIM_MODEL_QUADRATIC) {
        r->dim = sc->model.dim;
        if (sc->model.kind == SIM_MODEL_QUADRATIC) {
            /* f_i(x) = 1/2 ||x - b_i||^2, b_i = c + N(0, 1): the global
             * optimum is the mean of the b_i. */
            r->quad_b = malloc((size_t)r->n * r->dim * sizeof *r->quad_b);
            r->quad_mean = calloc(r->dim, sizeof *r->quad_mean);
            if (!r->quad_b || !r->quad_mean)
                return fail(r, SIM_RUN_ENOMEM, "out of memory (quadratic optima)");
            for (uint32_t j = 0; j < r->dim; j++) {
                double c = 3.0 * model_rng_normal(&r->mrng);
                for (uint32_t i = 0; i < r->n; i++) {
                    float v = (float)(c + model_rng_normal(&r->mrng));
                    r->quad_b[(size_t)i * r->dim + j] = v;
                    r->quad_mean[j] += v;
                }
                r->quad_mean[j] /= r->n;
            }
        }
        return 0;
    }
    if (load_data(r))
        return r->failed;
    if (r->train.count / r->n == 0)
        return fail(r, SIM_RUN_EINVAL, "run.agents = %u: more agents than training samples (%u)",
                    r->n, r->train.count);
    uint32_t ne = r->test.count < EVAL_MAX ? r->test.count : EVAL_MAX;
    uint32_t *rows = malloc((size_t)ne * sizeof *rows);
    if (!rows)
        return fail(r, SIM_RUN_ENOMEM, "out of memory");
    for (uint32_t i = 0; i < ne; i++)
        rows[i] = i;
    int rc = model_data_subset(&r->eval, &r->test, rows, ne);
    free(rows);
    if (rc)
        return fail(r, SIM_RUN_EMODEL, "evaluation set: %s", model_strerror(rc));
    r->eval.classes = r->train.classes;
    openblas_set_num_threads(1);
    return 0;
}

/* Create agent i's model; its vector is x. */
static int agent_model_init(runner *r, uint32_t i)
{
    sim_agent_state *g = &r->a[i];
    const sim_scenario *sc = r->sc;
    if (!is_net(r)) {
        g->x = malloc((size_t)r->dim * sizeof *g->x);
        if (!g->x)
            return fail(r, SIM_RUN_ENOMEM, "out of memory (agent vectors)");
        for (uint32_t j = 0; j < r->dim; j++)
            g->x[j] = sc->model.kind == SIM_MODEL_CONSENSUS ? (float)model_rng_normal(g->rng) : 0;
        return 0;
    }
    char spec[64], msg[MODEL_MSG_MAX];
    if (sc->model.kind == SIM_MODEL_MLP)
        snprintf(spec, sizeof spec, "mlp:%u", sc->model.hidden);
    else
        snprintf(spec, sizeof spec, "softmax");
    g->nrows = r->train.count / r->n;
    uint32_t batch = sc->model.batch < g->nrows ? sc->model.batch : g->nrows;
    int rc = model_net_create(&g->net, spec, r->train.dim, r->train.classes,
                              batch > EVAL_MAX ? batch : EVAL_MAX, msg, sizeof msg);
    if (rc)
        return fail(r, SIM_RUN_EMODEL, "model %s: %s", spec, msg);
    model_sgd_config scfg = {0};
    if ((rc = model_sgd_init(&g->sgd, model_net_param_count(g->net), &scfg)))
        return fail(r, SIM_RUN_EMODEL, "optimizer: %s", model_strerror(rc));
    /* Every agent starts from the same initial parameters (as agents that
     * agree on an init seed); its data is every n-th training sample. */
    model_rng init;
    model_rng_seed(&init, sc->run.seed, SALT_MODEL + 1);
    model_net_init(g->net, &init);
    g->x = model_net_params(g->net);
    g->rows = malloc((size_t)g->nrows * sizeof *g->rows);
    if (!g->rows)
        return fail(r, SIM_RUN_ENOMEM, "out of memory (agent data)");
    for (uint32_t k = 0; k < g->nrows; k++)
        g->rows[k] = i + k * r->n;
    model_data_shuffle(g->rows, g->nrows, g->rng);
    if (r->dim == 0)
        r->dim = (uint32_t)model_net_param_count(g->net);
    return 0;
}

/* One local step of agent i. */
static void local_step(runner *r, uint32_t i)
{
    sim_agent_state *g = &r->a[i];
    const sim_scenario *sc = r->sc;
    g->steps++;
    sim_engine_trace(r->e, NOW(r));
    sim_engine_trace(r->e, 0x57E9000000000000ULL | i);
    if (sc->model.kind == SIM_MODEL_QUADRATIC) {
        const float *b = r->quad_b + (size_t)i * r->dim;
        float lr = (float)sc->model.lr;
        for (uint32_t j = 0; j < r->dim; j++) {
            float gr = g->x[j] - b[j] + (float)(QUAD_NOISE * model_rng_normal(g->rng));
            g->x[j] -= lr * gr;
        }
    } else if (is_net(r)) {
        uint32_t batch = sc->model.batch < g->nrows ? sc->model.batch : g->nrows;
        if (g->cursor + batch > g->nrows) {
            model_data_shuffle(g->rows, g->nrows, g->rng);
            g->cursor = 0;
        }
        float *xb = model_net_input_buffer(g->net);
        uint16_t *yb = model_net_label_buffer(g->net);
        model_data_gather(&r->train, r->use_norm ? &r->norm : NULL, g->rows + g->cursor, batch, xb,
                          yb);
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
}

static void agent_eval(runner *r, uint32_t i, double *loss, double *acc)
{
    sim_agent_state *g = &r->a[i];
    *loss = NAN;
    *acc = NAN;
    if (r->sc->model.kind == SIM_MODEL_QUADRATIC) {
        double s = 0;
        for (uint32_t j = 0; j < r->dim; j++) {
            double d = g->x[j] - r->quad_mean[j];
            s += d * d;
        }
        *loss = 0.5 * s / r->dim;
    } else if (is_net(r)) {
        if (model_net_evaluate(g->net, &r->eval, r->use_norm ? &r->norm : NULL, loss, acc) != 0)
            *loss = *acc = NAN;
    }
}

/* ---- the agents on the engine --------------------------------------------- */

static void schedule(runner *r, uint64_t t, uint32_t kind, uint32_t agent, uint64_t a, uint64_t b,
                     void *ptr)
{
    sim_engine_schedule(r->e, t, kind, agent, a, b, ptr);
}

static int alive(const runner *r, uint32_t i)
{
    return sim_engine_alive(r->e, i);
}

static uint32_t inc(const runner *r, uint32_t i)
{
    return sim_engine_incarnation(r->e, i);
}

static int failed(runner *r)
{
    if (!r->failed && sim_engine_failed(r->e))
        fail(r, sim_engine_failed(r->e) == SIM_ENGINE_ENOMEM ? SIM_RUN_ENOMEM : SIM_RUN_EFULL, "%s",
             sim_engine_error(r->e));
    return r->failed;
}

static void check_done(runner *r, uint32_t i);

/* The agent's protocol object: its node (swim) or its mixer (oracle). */
static void agent_attach(runner *r, uint32_t i)
{
    sim_agent_state *g = &r->a[i];
    if (g->node)
        sim_engine_set_node(r->e, i, &sim_ops_node, g->node);
    else
        sim_engine_set_node(r->e, i, &sim_ops_mix, g->mix);
}

/* Swim: install a transferred (or the agent's own) model once the node has
 * one; until then the agent neither trains nor mixes. */
static void node_model(runner *r, sim_agent_state *g)
{
    if (!g->node || g->ready)
        return;
    gossip_node_model st = gossip_node_model_state(g->node);
    if (st == GOSSIP_NODE_JOINING)
        return;
    if (st == GOSSIP_NODE_FETCHED) {
        uint64_t round;
        if (gossip_node_model_result(g->node, g->x, &round) != GOSSIP_OK)
            return;
        if (g->net)
            model_sgd_reset(&g->sgd);
        r->transfers++;
    }
    if (st != GOSSIP_NODE_READY && gossip_node_model_adopt(g->node) != GOSSIP_OK)
        return;
    g->ready = 1;
}

static void hook_prepare(void *ctx, uint32_t i)
{
    runner *r = ctx;
    node_model(r, &r->a[i]);
}

static void hook_after(void *ctx, uint32_t i)
{
    check_done(ctx, i);
}

static void drain(runner *r, uint32_t i)
{
    sim_engine_drain(r->e, i);
}

static uint64_t step_us(runner *r, uint32_t i)
{
    return sim_compute_step_us(r->comp, i);
}

/* Agent i's mixing round ended: take the result, go back to training. */
static void check_done(runner *r, uint32_t i)
{
    sim_agent_state *g = &r->a[i];
    if (!g->mixing || !g->mix || gossip_mix_get_state(g->mix) != GOSSIP_MIX_DONE)
        return;
    int outcome = GOSSIP_OK;
    if (gossip_mix_take(g->mix, g->x, &outcome) != GOSSIP_OK)
        return;
    g->mixing = 0;
    double dt = (double)(NOW(r) - g->mix_start) / 1e6;
    if (outcome == GOSSIP_OK) {
        g->mixes++;
        r->mix_done++;
        r->mix_time_sum += dt;
        if (dt > r->mix_time_max)
            r->mix_time_max = dt;
    } else {
        g->aborted++;
        r->mix_aborted++;
    }
    if (r->timed)
        schedule(r, NOW(r) + step_us(r, i), EV_STEP, i, 0, inc(r, i), NULL);
}

/* Begin a mixing round on agent i. Returns 1 if it started. */
static int mix_begin(runner *r, uint32_t i)
{
    sim_agent_state *g = &r->a[i];
    if (r->n < 2 || (r->swim && !g->ready) || gossip_mix_start(g->mix, g->x, NOW(r)) != GOSSIP_OK)
        return 0;
    g->mixing = 1;
    g->mix_start = NOW(r);
    drain(r, i);
    check_done(r, i);
    return 1;
}

/* ---- invariants (opts->check) -------------------------------------------- */

static void violate(runner *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void violate(runner *r, const char *fmt, ...)
{
    if (!r->opts->check)
        return;
    if (r->violations++ == 0) {
        int k = snprintf(r->violation, sizeof r->violation, "t=%.6f s: ", (double)NOW(r) / 1e6);
        if (k < 0 || (size_t)k >= sizeof r->violation)
            k = 0;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->violation + k, sizeof r->violation - (size_t)k, fmt, ap);
        va_end(ap);
    }
}

/* Safety invariants at a quiet point (between rounds, at a sample or a
 * fault): every live model finite; every live mixer holds the current view
 * and its epoch never went back. */
static void check_invariants(runner *r)
{
    if (!r->opts->check)
        return;
    for (uint32_t i = 0; i < r->n; i++) {
        sim_agent_state *g = &r->a[i];
        if (!alive(r, i) || !g->mix)
            continue;
        for (uint32_t j = 0; j < r->dim; j++)
            if (!isfinite(g->x[j])) {
                violate(r, "agent %u: parameter %u is not finite (%g)", i, j, (double)g->x[j]);
                break;
            }
        uint64_t e = gossip_mix_view_epoch(g->mix);
        if (e < r->seen_epoch[i])
            violate(r, "agent %u: view epoch went back from %llu to %llu", i,
                    (unsigned long long)r->seen_epoch[i], (unsigned long long)e);
        else if (!r->swim && e != r->epoch)
            violate(r, "agent %u: view epoch %llu, current view is %llu", i, (unsigned long long)e,
                    (unsigned long long)r->epoch);
        if (e > r->seen_epoch[i])
            r->seen_epoch[i] = e;
    }
}

/* Shards without min(r, live) complete live copies. */
static uint32_t shards_under_replicated(const runner *r)
{
    uint32_t live = 0, bad = 0;
    for (uint32_t i = 0; i < r->n; i++)
        live += alive(r, i);
    uint32_t want = r->width < live ? r->width : live;
    for (uint32_t s = 0; s < r->nshards; s++) {
        if (r->shard_lost[s])
            continue;
        const shard_holder *h = r->holders + (size_t)s * 2 * r->width;
        uint32_t ready = 0;
        for (uint32_t j = 0; j < r->nhold[s]; j++)
            ready += alive(r, h[j].agent) && h[j].ready_us <= NOW(r);
        bad += ready < want;
    }
    return bad;
}

/* ---- membership and shards ----------------------------------------------- */

/* Primaries per live agent of the placement just computed (row[0] of each
 * shard; agent i has id i + 1); invariant: floor(S/N)..ceil(S/N). */
static void primaries_check(runner *r, uint32_t width, uint32_t live)
{
    uint32_t *count = calloc(r->n, sizeof *count);
    if (!count) {
        fail(r, SIM_RUN_ENOMEM, "out of memory (primary counts)");
        return;
    }
    for (uint32_t s = 0; s < r->nshards; s++)
        count[r->prow[(size_t)s * width] - 1]++;
    uint32_t lo, hi;
    gossip_placement_primary_bounds(r->nshards, live, &lo, &hi);
    r->prim_min = UINT32_MAX;
    r->prim_max = 0;
    for (uint32_t i = 0; i < r->n; i++) {
        if (!r->a[i].alive)
            continue;
        r->prim_min = count[i] < r->prim_min ? count[i] : r->prim_min;
        r->prim_max = count[i] > r->prim_max ? count[i] : r->prim_max;
        if (count[i] < lo || count[i] > hi)
            violate(r,
                    "agent %u is primary for %u shards; with %u shards over %u agents the "
                    "bounds are %u..%u",
                    i, count[i], r->nshards, live, lo, hi);
    }
    free(count);
}

static void shards_update(runner *r)
{
    if (!r->nshards)
        return;
    uint32_t live = 0;
    for (uint32_t i = 0; i < r->n; i++)
        if (alive(r, i))
            r->ids[live++] = (uint64_t)i + 1;
    uint32_t w2 = 2 * r->width;
    /* Drop holders that are down; a shard with no complete live copy is lost. */
    for (uint32_t s = 0; s < r->nshards; s++) {
        if (r->shard_lost[s] || !r->shards_placed)
            continue;
        shard_holder *h = r->holders + (size_t)s * w2;
        uint32_t k = 0, ready = 0, had = 0;
        /* Every listed holder was up until this event (each crash updates). */
        for (uint32_t j = 0; j < r->nhold[s]; j++)
            had += h[j].ready_us <= NOW(r);
        if (had >= r->width)
            r->hfail[s] = 0;
        for (uint32_t j = 0; j < r->nhold[s]; j++)
            if (alive(r, h[j].agent)) {
                h[k++] = h[j];
                ready += h[j].ready_us <= NOW(r);
            } else if (h[j].ready_us <= NOW(r) && r->hfail[s] < UINT8_MAX) {
                r->hfail[s]++;
            }
        r->nhold[s] = (uint8_t)k;
        if (!ready) {
            r->shard_lost[s] = 1;
            r->shards_lost++;
            sim_engine_trace(r->e, 0x5A4D000000000000ULL | s);
            if (r->hfail[s] < r->width)
                violate(r, "shard %u lost after %u holder failure(s) with shards.replication = %u",
                        s, (unsigned)r->hfail[s], r->width);
        }
    }
    if (!live)
        return;
    gossip_placement_config pc;
    gossip_placement_config_default(&pc);
    pc.r = r->width;
    gossip_view v = {.epoch = r->epoch, .n = live, .ids = r->ids};
    uint32_t width = gossip_placement_width(pc.r, live);
    if (gossip_placement_compute(&r->renv, &pc,
                                 (const uint8_t(*)[GOSSIP_SHARD_ID_SIZE])r->shard_ids, r->nshards,
                                 &v, r->prow, NULL) != GOSSIP_OK) {
        fail(r, SIM_RUN_ENOMEM, "shard placement failed");
        return;
    }
    primaries_check(r, width, live);
    for (uint32_t s = 0; s < r->nshards; s++) {
        if (r->shard_lost[s])
            continue;
        shard_holder *h = r->holders + (size_t)s * w2;
        shard_holder nh[2 * GOSSIP_PLACEMENT_R_MAX];
        uint32_t k = 0, all_ready = 1;
        for (uint32_t j = 0; j < width; j++) {
            uint32_t ag = (uint32_t)(r->prow[(size_t)s * width + j] - 1);
            uint64_t ready = NOW(r) + r->copy_us;
            for (uint32_t m = 0; m < r->nhold[s]; m++)
                if (h[m].agent == ag && h[m].ready_us < ready)
                    ready = h[m].ready_us;
            nh[k++] = (shard_holder){ag, ready};
            all_ready &= ready <= NOW(r);
        }
        /* Former holders keep (and serve) their copy until the new ones have it. */
        if (!all_ready)
            for (uint32_t m = 0; m < r->nhold[s] && k < w2; m++) {
                int in = 0;
                for (uint32_t j = 0; j < width; j++)
                    in |= nh[j].agent == h[m].agent;
                if (!in && h[m].ready_us <= NOW(r))
                    nh[k++] = h[m];
            }
        memcpy(h, nh, k * sizeof *h);
        r->nhold[s] = (uint8_t)k;
    }
    r->shards_placed = 1;
}

static void view_change(runner *r)
{
    r->epoch++;
    uint32_t live = 0;
    for (uint32_t i = 0; i < r->n; i++)
        if (alive(r, i))
            r->ids[live++] = (uint64_t)i + 1;
    gossip_view v = {.epoch = r->epoch, .n = live, .ids = r->ids};
    for (uint32_t i = 0; i < r->n && !r->swim; i++)
        if (alive(r, i) && r->a[i].mix)
            (void)gossip_mix_set_view(r->a[i].mix, &v, NOW(r));
    for (uint32_t i = 0; i < r->n && !r->failed; i++)
        if (alive(r, i) && r->a[i].mix) {
            drain(r, i);
            if (r->timed)
                check_done(r, i);
        }
    shards_update(r);
}

static int snapshot_model(void *ctx, float *out, uint32_t dim, uint64_t *round)
{
    const sim_agent_state *g = ctx;
    if (!g->node || !g->ready || dim != g->dim) /* a down agent has no node */
        return -1;
    memcpy(out, g->x, (size_t)dim * sizeof *out);
    *round = g->mixes;
    return 0;
}

/* Swim: agent i's protocol core; fetch: pull the model from peers first. */
static int agent_node_create(runner *r, uint32_t i, int fetch)
{
    const sim_scenario *sc = r->sc;
    sim_agent_state *g = &r->a[i];
    snprintf(g->addr, sizeof g->addr, "sim://%u", i);
    gossip_node_config c;
    gossip_node_config_default(&c);
    c.self = (uint64_t)i + 1;
    c.self_addr = g->addr;
    uint32_t mm = 2 * r->n + 8;
    c.swim.members_max = mm < GOSSIP_MEMBERS_MAX ? mm : GOSSIP_MEMBERS_MAX;
    c.swim.probe_interval_us = (gossip_time_us)llround(sc->membership.probe_interval_ms * 1e3);
    c.swim.probe_timeout_us = (gossip_time_us)llround(sc->membership.probe_timeout_ms * 1e3);
    c.swim.suspicion_mult = sc->membership.suspicion_mult;
    c.swim.indirect_k = sc->membership.indirect_k;
    c.mix = r->mcfg;
    c.xfer.snapshot = snapshot_model;
    c.xfer.snapshot_ctx = g;
    c.fetch_model = fetch;
    g->dim = r->dim;
    g->ready = 0;
    int rc = gossip_node_create(&g->node, sim_engine_env(r->e, i), &c);
    if (rc)
        return fail(r, rc == GOSSIP_ENOMEM ? SIM_RUN_ENOMEM : SIM_RUN_EINVAL, "node: %s",
                    gossip_strerror(rc));
    g->mix = gossip_node_mix(g->node);
    return 0;
}

/* Swim: join through up to 3 live agents drawn from the seed (none: found
 * the cluster). */
static void agent_node_join(runner *r, uint32_t i)
{
    const char *seeds[3];
    size_t ns = 0;
    uint32_t live = 0;
    for (uint32_t k = 0; k < r->n; k++)
        live += alive(r, k) && r->a[k].node && k != i;
    for (size_t t = 0; t < 3 && live; t++) {
        uint64_t pick = model_rng_below(&r->state, live);
        for (uint32_t k = 0; k < r->n; k++)
            if (alive(r, k) && r->a[k].node && k != i && pick-- == 0) {
                seeds[ns++] = r->a[k].addr;
                break;
            }
    }
    if (ns)
        (void)gossip_node_join(r->a[i].node, seeds, ns, NOW(r));
}

static void agent_core_destroy(runner *r, uint32_t i)
{
    sim_agent_state *g = &r->a[i];
    sim_engine_set_node(r->e, i, NULL, NULL);
    if (g->node)
        gossip_node_destroy(g->node);
    else if (g->mix)
        gossip_mix_destroy(g->mix);
    g->node = NULL;
    g->mix = NULL;
    g->ready = 0;
}

static int agent_mix_create(runner *r, uint32_t i)
{
    if (r->swim)
        return agent_node_create(r, i, 0);
    gossip_mix_config c = r->mcfg;
    c.self = (uint64_t)i + 1;
    int rc = gossip_mix_create(&r->a[i].mix, sim_engine_env(r->e, i), &c);
    if (rc)
        return fail(r, rc == GOSSIP_ENOMEM ? SIM_RUN_ENOMEM : SIM_RUN_EINVAL, "mixer: %s",
                    gossip_strerror(rc));
    return 0;
}

/* Start (or restart) agent i at NOW(r). */
static void agent_up(runner *r, uint32_t i, int restart)
{
    sim_agent_state *g = &r->a[i];
    if (alive(r, i))
        return;
    agent_core_destroy(r, i);
    if (r->swim ? agent_node_create(r, i, 1) : agent_mix_create(r, i))
        return;
    agent_attach(r, i);
    if (r->swim && r->seen_epoch) /* a new process numbers its views from 1 */
        r->seen_epoch[i] = 0;
    sim_engine_up(r->e, i);
    g->present = 1;
    g->mixing = 0;
    /* State transfer: copy the model of a live agent drawn from the seed
     * (swim: the node pulls it from its peers, gossip/xfer, and the agent
     * keeps its last vector as its checkpoint until then). */
    uint32_t live = 0;
    for (uint32_t k = 0; k < r->n; k++)
        live += alive(r, k) && k != i;
    if (r->swim) {
        agent_node_join(r, i);
        live = 0;
    }
    if (live) {
        uint64_t pick = model_rng_below(&r->state, live);
        for (uint32_t k = 0; k < r->n; k++)
            if (alive(r, k) && k != i && pick-- == 0) {
                memcpy(g->x, r->a[k].x, (size_t)r->dim * sizeof *g->x);
                break;
            }
    }
    if (g->net && !r->swim)
        model_sgd_reset(&g->sgd);
    r->restarts += restart;
    sim_engine_trace(r->e, NOW(r));
    sim_engine_trace(r->e, 0x0F00000000000000ULL | i);
    view_change(r);
    if (r->timed)
        schedule(r, NOW(r) + step_us(r, i), EV_STEP, i, 0, inc(r, i), NULL);
}

static void agent_down(runner *r, uint32_t i)
{
    sim_agent_state *g = &r->a[i];
    if (!alive(r, i))
        return;
    sim_engine_down(r->e, i);
    g->mixing = 0;
    r->crashes++;
    if (r->swim) /* the process is gone, with its protocol state */
        agent_core_destroy(r, i);
    sim_engine_trace(r->e, NOW(r));
    sim_engine_trace(r->e, 0xC000000000000000ULL | i);
    view_change(r);
}

static void apply_fault_kind(runner *r, const sim_fault *ft);

static void apply_fault(runner *r, const sim_fault *ft)
{
    apply_fault_kind(r, ft);
    check_invariants(r);
}

static void apply_fault_kind(runner *r, const sim_fault *ft)
{
    const uint32_t *t = r->faults.targets + ft->first;
    sim_engine_trace(r->e, ft->time_us);
    sim_engine_trace(r->e, ft->kind);
    switch (ft->kind) {
    case SIM_FAULT_CRASH:
        for (uint32_t k = 0; k < ft->count; k++)
            agent_down(r, t[k]);
        break;
    case SIM_FAULT_RESTART:
        for (uint32_t k = 0; k < ft->count; k++)
            if (r->a[t[k]].present)
                agent_up(r, t[k], 1);
        break;
    case SIM_FAULT_JOIN:
        for (uint32_t k = 0; k < ft->count; k++)
            if (!r->a[t[k]].present)
                agent_up(r, t[k], 0);
        break;
    case SIM_FAULT_PARTITION: {
        if (!r->group && !(r->group = calloc(r->n, sizeof *r->group))) {
            fail(r, SIM_RUN_ENOMEM, "out of memory (partition)");
            return;
        }
        memset(r->group, 0, r->n * sizeof *r->group);
        for (uint32_t k = 0; k < ft->count; k++)
            r->group[t[k]] = r->faults.groups[ft->first + k];
        if (sim_engine_set_partition(r->e, r->group) != SIM_ENGINE_OK)
            fail(r, SIM_RUN_ENOMEM, "out of memory (partition)");
        break;
    }
    case SIM_FAULT_HEAL:
        free(r->group);
        r->group = NULL;
        sim_engine_set_partition(r->e, NULL);
        break;
    case SIM_FAULT_LOSS_START:
    case SIM_FAULT_LOSS_END: {
        double p = r->sc->network.loss;
        if (ft->kind == SIM_FAULT_LOSS_START && ft->value > p)
            p = ft->value;
        sim_engine_set_loss(r->e, p);
        break;
    }
    case SIM_FAULT_SLOW:
    case SIM_FAULT_SLOW_END:
        for (uint32_t k = 0; k < ft->count; k++)
            sim_compute_set_slow(r->comp, t[k], ft->kind == SIM_FAULT_SLOW ? ft->value : 1.0);
        break;
    }
}

/* ---- samples ----------------------------------------------------------- */

static uint64_t round_now(const runner *r, uint64_t rounds)
{
    if (!r->timed)
        return rounds;
    uint64_t m = 0;
    for (uint32_t i = 0; i < r->n; i++)
        m += r->a[i].mixes;
    return m / r->n;
}

static void sample(runner *r, uint64_t rounds)
{
    double ls = 0, as = 0;
    uint32_t nl = 0, na = 0, live = 0;
    uint64_t sent = 0, recv = 0;
    const float **vecs = malloc((size_t)r->n * sizeof *vecs);
    if (!vecs) {
        fail(r, SIM_RUN_ENOMEM, "out of memory (sample)");
        return;
    }
    int per = r->sc->output.per_agent && r->out_open;
    for (uint32_t i = 0; i < r->n; i++) {
        sim_agent_state *g = &r->a[i];
        uint64_t gs = sim_engine_bytes_sent(r->e, i), gr = sim_engine_bytes_recv(r->e, i);
        sent += gs;
        recv += gr;
        vecs[i] = alive(r, i) ? g->x : NULL;
        if (!alive(r, i))
            continue;
        live++;
        double l, a;
        agent_eval(r, i, &l, &a);
        if (isfinite(l))
            ls += l, nl++;
        if (isfinite(a))
            as += a, na++;
        if (per) {
            sim_series_row row = {(double)NOW(r) / 1e6, round_now(r, rounds), i, l, a, NAN, gs, gr};
            if (sim_output_row(&r->out, &row) != 0)
                fail(r, SIM_RUN_EIO, "%s: write error", r->out.path);
        }
    }
    double cd = live ? sim_consensus_distance_ptrs(vecs, r->n, r->dim) : NAN;
    free(vecs);
    r->last_loss = nl ? ls / nl : NAN;
    r->last_acc = na ? as / na : NAN;
    r->last_cd = cd;
    if (r->rows == 0)
        r->first_cd = cd;
    if (isnan(r->target_time) && isfinite(r->last_acc) && r->last_acc >= r->sc->run.target_accuracy)
        r->target_time = (double)NOW(r) / 1e6;
    if (r->out_open) {
        sim_series_row row = {(double)NOW(r) / 1e6,
                              round_now(r, rounds),
                              SIM_AGENT_ALL,
                              r->last_loss,
                              r->last_acc,
                              cd,
                              sent,
                              recv};
        if (sim_output_row(&r->out, &row) != 0)
            fail(r, SIM_RUN_EIO, "%s: write error", r->out.path);
    }
    r->rows++;
}

static void progress(runner *r, uint64_t rounds)
{
    uint64_t events = sim_engine_get_stats(r->e)->events;
    if (r->opts->quiet || (events & 4095) != 0)
        return;
    double p = r->opts->progress_s > 0 ? r->opts->progress_s : 5.0;
    if (wall_since(&r->last_print) < p)
        return;
    clock_gettime(CLOCK_MONOTONIC, &r->last_print);
    double w = wall_since(&r->t0);
    FILE *f = r->opts->progress ? r->opts->progress : stderr;
    if (r->timed)
        fprintf(f, "sim: t=%.3f/%.3f s  events %llu (%.3g/s)  wall %.1f s\n", (double)NOW(r) / 1e6,
                r->sc->run.duration_s, (unsigned long long)events, events / w, w);
    else
        fprintf(f, "sim: round %llu/%u  events %llu (%.3g/s)  wall %.1f s\n",
                (unsigned long long)rounds, r->sc->run.rounds, (unsigned long long)events,
                events / w, w);
    fflush(f);
}

/* ---- main loops ---------------------------------------------------------- */

/* Timed mode: the host's events (steps, faults, samples). */
static void hook_event(void *ctx, const sim_event *ev)
{
    runner *r = ctx;
    sim_agent_state *g = &r->a[ev->agent];
    switch (ev->kind) {
    case EV_STEP:
        if (!alive(r, ev->agent) || inc(r, ev->agent) != ev->b)
            break;
        if (r->swim && !g->ready) { /* joining: no agreed model yet */
            schedule(r, NOW(r) + step_us(r, ev->agent), EV_STEP, ev->agent, 0, ev->b, NULL);
            break;
        }
        local_step(r, ev->agent);
        if (g->steps % r->sc->mixing.interval_steps != 0 || !mix_begin(r, ev->agent))
            schedule(r, NOW(r) + step_us(r, ev->agent), EV_STEP, ev->agent, 0, ev->b, NULL);
        break;
    case EV_FAULT:
        apply_fault(r, &r->faults.events[ev->a]);
        break;
    case EV_SAMPLE: {
        uint64_t every = ev->a;
        sample(r, 0);
        check_invariants(r);
        r->last_sample_us = NOW(r);
        if (NOW(r) + every <= r->end_us)
            schedule(r, NOW(r) + every, EV_SAMPLE, 0, every, 0, NULL);
        break;
    }
    default:
        break;
    }
}

static int timed_stop(void *ctx)
{
    runner *r = ctx;
    progress(r, 0);
    return r->failed;
}

static void run_timed(runner *r)
{
    for (uint32_t i = 0; i < r->n; i++)
        if (alive(r, i))
            schedule(r, step_us(r, i), EV_STEP, i, 0, inc(r, i), NULL);
    for (size_t k = 0; k < r->faults.len; k++)
        if (r->faults.events[k].time_us <= r->end_us)
            schedule(r, r->faults.events[k].time_us, EV_FAULT, 0, k, 0, NULL);
    uint64_t every = (uint64_t)llround(r->sc->output.every_s * 1e6);
    if (every == 0)
        every = 1;
    if (every <= r->end_us)
        schedule(r, every, EV_SAMPLE, 0, every, 0, NULL);
    sample(r, 0);
    r->last_sample_us = 0;
    if (!r->failed)
        sim_engine_run_until(r->e, r->end_us, timed_stop, r);
    if (failed(r))
        return;
    if (r->last_sample_us != r->end_us)
        sample(r, 0);
}

static void deliver_pending(runner *r)
{
    if (!r->failed)
        sim_engine_deliver_pending(r->e);
}

static void collect_done(runner *r)
{
    for (uint32_t i = 0; i < r->n; i++)
        if (alive(r, i))
            check_done(r, i);
}

static uint64_t run_rounds(runner *r)
{
    uint64_t rounds = 0;
    uint32_t every = r->sc->output.every_rounds;
    sample(r, 0);
    uint64_t last_sample = 0;
    for (uint32_t round = 0; round < r->sc->run.rounds && !r->failed; round++) {
        while (r->next_fault < r->faults.len && r->faults.events[r->next_fault].time_us <= NOW(r) &&
               !r->failed) {
            sim_engine_count(r->e, 1);
            apply_fault(r, &r->faults.events[r->next_fault++]);
        }
        deliver_pending(r); /* frames caused by view changes */
        collect_done(r);
        uint64_t longest = 0;
        for (uint32_t i = 0; i < r->n && !r->failed; i++) {
            sim_agent_state *g = &r->a[i];
            if (!alive(r, i) || g->mixing || (r->swim && !g->ready))
                continue;
            uint64_t t = 0;
            for (uint32_t k = 0; k < r->sc->mixing.interval_steps; k++) {
                t += step_us(r, i);
                local_step(r, i);
                sim_engine_count(r->e, 1);
            }
            if (t > longest)
                longest = t;
        }
        for (uint32_t i = 0; i < r->n && !r->failed; i++)
            if (alive(r, i) && !r->a[i].mixing)
                mix_begin(r, i);
        deliver_pending(r);
        if (longest) {
            sim_engine_set_now(r->e, NOW(r) + longest);
        } else {
            /* Nobody computed (every live agent waits in a mixing round, or
             * nobody is up): jump to the next deadline or fault instead of
             * spinning rounds at one microsecond each. */
            uint64_t next = UINT64_MAX;
            for (uint32_t i = 0; i < r->n; i++)
                if (alive(r, i) && r->a[i].mix) {
                    gossip_time_us d = sim_engine_deadline(r->e, i);
                    if (d != GOSSIP_TIME_NEVER && d < next)
                        next = d;
                }
            if (r->next_fault < r->faults.len && r->faults.events[r->next_fault].time_us < next)
                next = r->faults.events[r->next_fault].time_us;
            sim_engine_set_now(r->e, next != UINT64_MAX && next > NOW(r) ? next : NOW(r) + 1);
        }
        collect_done(r);
        /* Timers due by the end of the round (timeouts of lost exchanges). */
        for (uint32_t i = 0; i < r->n && !r->failed; i++) {
            if (alive(r, i) && r->a[i].mix && sim_engine_deadline(r->e, i) <= NOW(r)) {
                sim_engine_count(r->e, 1);
                sim_engine_tick_now(r->e, i);
            }
        }
        deliver_pending(r);
        collect_done(r);
        failed(r);
        check_invariants(r);
        rounds++;
        if (rounds % every == 0) {
            sample(r, rounds);
            last_sample = rounds;
        }
        progress(r, rounds);
    }
    if (!failed(r) && last_sample != rounds)
        sample(r, rounds);
    return rounds;
}

/* ---- setup and teardown ---------------------------------------------------- */

static size_t heap_in_use(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

static int setup(runner *r)
{
    const sim_scenario *sc = r->sc;
    char msg[512];
    r->n = sc->run.agents;
    r->timed = sc->run.mode == SIM_RUN_TIMED;
    r->swim = sc->membership.mode == SIM_MEMBERSHIP_SWIM;
    r->end_us = (uint64_t)llround(sc->run.duration_s * 1e6);
    r->target_time = NAN;
    r->last_acc = r->last_loss = r->last_cd = NAN;
    model_rng_seed(&r->state, sc->run.seed, SALT_STATE);
    model_rng_seed(&r->mrng, sc->run.seed, SALT_MODEL);
    r->renv = (gossip_env){env_alloc, env_free, model_rng_callback, NULL, &r->mrng};
    if (sc->mixing.algorithm == SIM_MIX_PS)
        return fail(r, SIM_RUN_EINVAL,
                    "mixing.algorithm = ps: the parameter server is not simulated yet "
                    "(use allreduce, gossip, push-sum, dpsgd or choco)");
    if (r->n > GOSSIP_MEMBERS_MAX)
        return fail(r, SIM_RUN_EINVAL, "run.agents = %u: the mixer supports at most %u members",
                    r->n, GOSSIP_MEMBERS_MAX);
    if (sc->shards.replication > GOSSIP_PLACEMENT_R_MAX)
        return fail(r, SIM_RUN_EINVAL, "shards.replication = %u: placement supports at most %u",
                    sc->shards.replication, GOSSIP_PLACEMENT_R_MAX);
    if (sc->shards.count > GOSSIP_PLACEMENT_SHARDS_MAX)
        return fail(r, SIM_RUN_EINVAL, "shards.count = %u: placement supports at most %u",
                    sc->shards.count, GOSSIP_PLACEMENT_SHARDS_MAX);
    /* Models of the network, compute and faults. */
    sim_net_config nc;
    sim_scenario_net_config(sc, &nc);
    if (nc.latency_kind == SIM_NET_LAT_MATRIX) {
        int rc = sim_net_load_matrix(sc->network.latency_file, r->n, &r->matrix, msg, sizeof msg);
        if (rc)
            return fail(r, SIM_RUN_EIO, "%s", msg);
        nc.matrix_ms = r->matrix;
    }
    int rc;
    sim_compute_config cc;
    sim_scenario_compute_config(sc, &cc);
    if ((rc = sim_compute_create(&r->comp, &cc)))
        return fail(r, SIM_RUN_EINVAL, "compute model: error %d", rc);
    const char **lines = malloc((SIM_SCENARIO_EVENTS_MAX + 1) * sizeof *lines);
    if (!lines)
        return fail(r, SIM_RUN_ENOMEM, "out of memory");
    sim_faults_config fc;
    sim_scenario_faults_config(sc, lines, &fc);
    rc = sim_faults_build(&r->faults, &fc, msg, sizeof msg);
    free(lines);
    if (rc)
        return fail(r, SIM_RUN_EFAULTS, "faults: %s", msg);
    if (models_init(r))
        return r->failed;

    /* The engine: agent i is node id i + 1 with stream i of the seed. */
    size_t heap0 = heap_in_use();
    sim_engine_config ec = {
        .agents = r->n,
        .seed = sc->run.seed,
        .mode = r->timed ? SIM_MODE_TIMED : SIM_MODE_ROUNDS,
        .order_stream = SALT_ORDER,
        .loss = sc->network.loss,
        .net = &nc,
        .hooks = {.ctx = r, .prepare = hook_prepare, .after = hook_after, .event = hook_event},
    };
    rc = sim_engine_create(&r->e, &ec);
    free(r->matrix);
    r->matrix = NULL;
    if (rc == SIM_ENGINE_ENOMEM)
        return fail(r, SIM_RUN_ENOMEM, "out of memory (engine)");
    if (rc) /* run.agents is checked above: the network's parameters */
        return fail(r, SIM_RUN_EINVAL, "network model: %s", sim_net_strerror(SIM_NET_EINVAL));
    r->a = calloc(r->n, sizeof *r->a);
    r->ids = calloc(r->n, sizeof *r->ids);
    if (!r->a || !r->ids)
        return fail(r, SIM_RUN_ENOMEM, "out of memory (agents)");
    for (uint32_t i = 0; i < r->n; i++) {
        sim_agent_state *g = &r->a[i];
        g->rng = sim_engine_rng(r->e, i);
        if (sim_engine_set_id(r->e, i, (uint64_t)i + 1) != SIM_ENGINE_OK)
            return fail(r, SIM_RUN_EINVAL, "engine: agent ids");
        if (agent_model_init(r, i))
            return r->failed;
    }
    r->mcfg = (gossip_mix_config){
        .dim = r->dim,
        .algos = 1u << (unsigned)sc->mixing.algorithm,
        .algo = (gossip_mix_algo)sc->mixing.algorithm,
        .topology = (gossip_topology)sc->mixing.topology,
        .bits = sc->mixing.bits,
        .members_max = r->n,
        .sync_window = gossip_topology_is_static((gossip_topology)sc->mixing.topology) &&
                               sc->mixing.topology != GOSSIP_TOPO_EXPONENTIAL
                           ? 0
                           : 4,
    };
    if (r->dim > GOSSIP_CODEC_DIM_MAX)
        return fail(r, SIM_RUN_EINVAL, "model has %u parameters; the mixer supports at most %u",
                    r->dim, (unsigned)GOSSIP_CODEC_DIM_MAX);
    for (uint32_t i = 0; i < r->n; i++) {
        if (sim_fault_list_absent_at_start(&r->faults, i))
            continue;
        if (agent_mix_create(r, i))
            return r->failed;
        agent_attach(r, i);
        sim_engine_up(r->e, i);
        r->a[i].present = 1;
    }

    /* Shards: ids from the seed; copy time of one shard at the bandwidth. */
    r->nshards = sc->shards.count;
    r->width = sc->shards.replication;
    r->shard_ids = malloc((size_t)r->nshards * sizeof *r->shard_ids);
    r->holders = calloc((size_t)r->nshards * 2 * r->width, sizeof *r->holders);
    r->nhold = calloc(r->nshards, 1);
    r->shard_lost = calloc(r->nshards, 1);
    r->hfail = calloc(r->nshards ? r->nshards : 1, 1);
    r->seen_epoch = calloc(r->n, sizeof *r->seen_epoch);
    r->prow = calloc((size_t)r->nshards * r->width, sizeof *r->prow);
    if (!r->shard_ids || !r->holders || !r->nhold || !r->shard_lost || !r->prow || !r->hfail ||
        !r->seen_epoch)
        return fail(r, SIM_RUN_ENOMEM, "out of memory (shards)");
    for (uint32_t s = 0; s < r->nshards; s++)
        for (uint32_t k = 0; k < GOSSIP_SHARD_ID_SIZE; k += 8) {
            uint64_t v = model_rng_u64(&r->mrng);
            memcpy(r->shard_ids[s] + k, &v, 8);
        }
    double shard_bytes = is_net(r) ? (double)r->train.count / r->nshards * (double)r->train.dim *
                                         (double)model_dtype_size(r->train.dtype)
                                   : (double)GOSSIP_SHARDS_SHARD_BYTES_DEFAULT;
    double bw =
        nc.up_bps > 0 && (nc.down_bps <= 0 || nc.up_bps < nc.down_bps) ? nc.up_bps : nc.down_bps;
    r->copy_us = bw > 0 ? (uint64_t)llround(shard_bytes * 8.0 / bw * 1e6) : 0;
    /* Initial placement: every holder has its copy from the start. */
    uint64_t copy = r->copy_us;
    r->copy_us = 0;
    view_change(r);
    r->copy_us = copy;
    if (failed(r))
        return r->failed;
    /* Swim: every agent joins through up to 3 others; membership spreads
     * from there (the first views are partial, as in a real start). */
    for (uint32_t i = 0; i < r->n && r->swim && !r->failed; i++)
        if (alive(r, i)) {
            agent_node_join(r, i);
            drain(r, i);
        }
    if (failed(r))
        return r->failed;
    size_t heap1 = heap_in_use();
    r->mem_per_agent = heap1 > heap0 ? (double)(heap1 - heap0) / r->n : 0;
    return 0;
}

static void teardown(runner *r)
{
    if (r->a)
        for (uint32_t i = 0; i < r->n; i++) {
            sim_agent_state *g = &r->a[i];
            agent_core_destroy(r, i);
            if (g->net) {
                model_net_destroy(g->net);
                model_sgd_free(&g->sgd);
            } else {
                free(g->x);
            }
            free(g->rows);
        }
    sim_engine_destroy(r->e);
    free(r->a);
    free(r->ids);
    free(r->group);
    free(r->quad_b);
    free(r->quad_mean);
    model_data_free(&r->train);
    model_data_free(&r->test);
    model_data_free(&r->eval);
    model_norm_free(&r->norm);
    free(r->shard_ids);
    free(r->holders);
    free(r->nhold);
    free(r->shard_lost);
    free(r->hfail);
    free(r->seen_epoch);
    free(r->prow);
    sim_fault_list_free(&r->faults);
    sim_compute_destroy(r->comp);
    free(r->matrix);
}

int sim_run(const sim_scenario *sc, const sim_run_opts *opts, sim_summary *out, char *err,
            size_t errlen)
{
    static const sim_run_opts defaults = {0};
    if (!opts)
        opts = &defaults;
    runner *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, errlen, "out of memory");
        return SIM_RUN_ENOMEM;
    }
    r->sc = sc;
    r->opts = opts;
    FILE *log = opts->log ? opts->log : stdout;
    if (!opts->quiet) {
        fprintf(log, "SEED=%llu\n", (unsigned long long)sc->run.seed);
        fflush(log);
    }
    clock_gettime(CLOCK_MONOTONIC, &r->t0);
    r->last_print = r->t0;
    const char *dir = opts->dir ? opts->dir : sc->output.dir;
    sim_summary_init(out);
    if (setup(r) == 0) {
        if (opts->write_files) {
            char m[512];
            if (sim_output_open(&r->out, dir, m, sizeof m) != 0)
                fail(r, SIM_RUN_EIO, "%s", m);
            else
                r->out_open = 1;
        }
    }
    uint64_t rounds = 0;
    if (!r->failed) {
        if (r->timed)
            run_timed(r);
        else
            rounds = run_rounds(r);
    }
    if (r->out_open) {
        char m[512];
        if (sim_output_close(&r->out, m, sizeof m) != 0)
            fail(r, SIM_RUN_EIO, "%s", m);
    }
    if (!r->failed) {
        out->seed = sc->run.seed;
        out->trace_hash = sim_engine_trace_hash(r->e);
        out->events = sim_engine_get_stats(r->e)->events;
        out->wall_s = wall_since(&r->t0);
        out->sim_time_s = (double)NOW(r) / 1e6;
        out->rounds = r->timed ? round_now(r, 0) : rounds;
        uint64_t steps = 0, total = 0, maxb = 0;
        for (uint32_t i = 0; i < r->n; i++) {
            uint64_t b = sim_engine_bytes_sent(r->e, i);
            steps += r->a[i].steps;
            total += b;
            if (b > maxb)
                maxb = b;
        }
        out->steps_total = steps;
        out->bytes_total = total;
        out->bytes_per_agent_max = maxb;
        out->final_accuracy = r->last_acc;
        out->time_to_target_s = r->target_time;
        out->consensus_distance_final = r->last_cd;
        out->shards_lost = r->shards_lost;
        out->agents = r->n;
        out->final_loss = r->last_loss;
        out->messages = sim_engine_get_stats(r->e)->sent;
        out->messages_lost = sim_engine_get_stats(r->e)->lost;
        out->memory_per_agent_bytes = r->mem_per_agent;
        if (opts->label)
            snprintf(out->label, sizeof out->label, "%s", opts->label);
        (void)sim_summary_add(out, "params", r->dim);
        (void)sim_summary_add(out, "mix_rounds_completed", (double)r->mix_done);
        (void)sim_summary_add(out, "mix_rounds_aborted", (double)r->mix_aborted);
        (void)sim_summary_add(out, "mix_time_mean_s",
                              r->mix_done ? r->mix_time_sum / (double)r->mix_done : NAN);
        (void)sim_summary_add(out, "mix_time_max_s", r->mix_done ? r->mix_time_max : NAN);
        (void)sim_summary_add(out, "steps_per_s",
                              out->sim_time_s > 0 ? (double)steps / out->sim_time_s : NAN);
        (void)sim_summary_add(out, "crashes", (double)r->crashes);
        (void)sim_summary_add(out, "restarts", (double)r->restarts);
        (void)sim_summary_add(out, "shard_copy_s", (double)r->copy_us / 1e6);
        uint32_t live = 0;
        for (uint32_t i = 0; i < r->n; i++)
            live += alive(r, i);
        (void)sim_summary_add(out, "agents_live_final", live);
        (void)sim_summary_add(out, "shards_under_replicated_final", shards_under_replicated(r));
        (void)sim_summary_add(out, "consensus_distance_initial", r->first_cd);
        if (r->nshards && live) {
            uint64_t steps_min = UINT64_MAX;
            for (uint32_t i = 0; i < r->n; i++)
                if (r->a[i].alive && r->a[i].steps < steps_min)
                    steps_min = r->a[i].steps;
            (void)sim_summary_add(out, "primaries_min", r->prim_min);
            (void)sim_summary_add(out, "primaries_max", r->prim_max);
            (void)sim_summary_add(out, "steps_min_live", (double)steps_min);
        }
        if (r->swim) {
            /* Live agents whose SWIM view is not exactly the live set. */
            uint32_t off = 0;
            for (uint32_t i = 0; i < r->n; i++) {
                if (!alive(r, i) || !r->a[i].node)
                    continue;
                gossip_view v;
                gossip_node_view(r->a[i].node, &v);
                int same = v.n == live;
                for (uint32_t k = 0; k < v.n && same; k++)
                    same = v.ids[k] >= 1 && v.ids[k] <= r->n && alive(r, (uint32_t)(v.ids[k] - 1));
                off += !same;
            }
            (void)sim_summary_add(out, "views_wrong_final", off);
            (void)sim_summary_add(out, "state_transfers", (double)r->transfers);
        }
        out->violations = r->violations;
        snprintf(out->violation, sizeof out->violation, "%s", r->violation);
        if (opts->check)
            (void)sim_summary_add(out, "invariant_violations", (double)r->violations);
        if (opts->write_files) {
            char m[512];
            if (sim_summary_write_file(out, dir, m, sizeof m) != 0)
                fail(r, SIM_RUN_EIO, "%s", m);
            else if (sc->output.plot && sim_plot_dir(dir, m, sizeof m) != 0)
                fail(r, SIM_RUN_EIO, "plots: %s", m);
        }
    }
    int rc = r->failed;
    if (rc)
        snprintf(err, errlen, "%s", r->err);
    else if (!opts->quiet) {
        fprintf(log, "TRACE_HASH=%016llx\n", (unsigned long long)sim_engine_trace_hash(r->e));
        fflush(log);
    }
    teardown(r);
    free(r);
    return rc;
}
