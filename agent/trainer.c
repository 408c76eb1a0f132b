/* agent/trainer — the built-in trainer of `murmur agent`: one host program
 * of the public API (include/murmur.h), like any other. It owns the model
 * (model/: parameters, momentum, workspace), loads the test set and the
 * shard files the agent assigns, and trains with the schedule's learning
 * rate, calling murmur_mix after every step. See agent.h. */
#include "agent/agent.h"

#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/chaos.h"
#include "agent/log.h"
#include "model/data.h"
#include "model/net.h"
#include "model/optim.h"
#include "model/rng.h"
#include "model/shardfile.h"

/* Moving average weight of the training loss per step. */
#define TRAINER_LOSS_EWMA 0.02
/* How often the trainer looks for a new shard assignment, and how long it
 * sleeps while it has no data (the agent is still fetching its shards). */
#define TRAINER_SHARDS_EVERY_US 200000u
#define TRAINER_IDLE_MS         100
/* tr->gen before any assignment is loaded (generations count up from 0) */
#define TRAINER_GEN_NONE UINT64_MAX

/* The rows [first, first + count) of trainer.data are the shard file path
 * (a store file named by its content hash: the same name, the same bytes). */
typedef struct trainer_seg {
    char *path;
    uint32_t first, count, classes;
} trainer_seg;

typedef struct trainer {
    const agent_config *cfg;
    murmur_agent *a;
    model_net *net;
    model_sgd sgd;
    model_norm norm;
    model_data test;
    uint32_t input_dim, classes;
    model_data data;  /* concatenation of the assigned shards */
    trainer_seg *seg; /* which rows of data came from which shard file */
    uint32_t n_seg;
    uint32_t *order;
    uint32_t order_cap, at;
    model_rng rng;
    uint64_t step;
    uint64_t gen; /* shard assignment loaded; TRAINER_GEN_NONE before the first */
    uint64_t shards_checked_us;
    double loss_avg;
    int loss_init;
    double acc, test_loss;
} trainer;

static uint64_t trainer_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* classes=N of the shard catalog's header (murmur shard writes it), or 0. */
static uint32_t catalog_classes(const agent_config *cfg)
{
    char path[AGENT_CONFIG_PATH_MAX + 16], line[512];
    snprintf(path, sizeof path, "%s/catalog", cfg->shards_dir);
    FILE *f = fopen(path, "r");
    unsigned classes = 0;
    if (f) {
        const char *p;
        if (fgets(line, sizeof line, f) && line[0] == '#' && (p = strstr(line, " classes=")))
            sscanf(p, " classes=%u", &classes);
        fclose(f);
    }
    return classes <= MODEL_CLASSES_MAX ? classes : 0;
}

/* The test set (model.test_dataset, else model.dataset's own test files);
 * fixes the input dimension and the class count of the model: the
 * catalog's classes= (every label of the split), else the test labels. */
static int trainer_load_test_set(trainer *tr, char *err, size_t errlen)
{
    char msg[MODEL_MSG_MAX] = "";
    int rc;
    const char *ds = tr->cfg->test_dataset[0] ? tr->cfg->test_dataset : tr->cfg->dataset;
    if (!strcmp(ds, "fashion-mnist") || is_dir(ds)) {
        const char *dir = strcmp(ds, "fashion-mnist") ? ds : MODEL_FASHION_DIR;
        char img[AGENT_CONFIG_PATH_MAX + 40], lab[AGENT_CONFIG_PATH_MAX + 40];
        snprintf(img, sizeof img, "%s/t10k-images-idx3-ubyte.gz", dir);
        snprintf(lab, sizeof lab, "%s/t10k-labels-idx1-ubyte.gz", dir);
        if (access(img, R_OK)) {
            snprintf(img, sizeof img, "%s/t10k-images-idx3-ubyte", dir);
            snprintf(lab, sizeof lab, "%s/t10k-labels-idx1-ubyte", dir);
        }
        rc = model_idx_load(&tr->test, img, lab, 0, msg, sizeof msg);
    } else {
        rc = model_csv_load(&tr->test, ds, 0, msg, sizeof msg);
    }
    if (rc) {
        snprintf(err, errlen, "test set %s: %s (%s)", ds, msg[0] ? msg : "cannot load",
                 model_strerror(rc));
        return -1;
    }
    if (tr->cfg->eval_samples && tr->cfg->eval_samples < tr->test.count)
        tr->test.count = tr->cfg->eval_samples; /* arrays keep their size */
    tr->input_dim = tr->test.dim;
    uint32_t c = catalog_classes(tr->cfg);
    tr->classes = c > tr->test.classes ? c : tr->test.classes;
    return 0;
}

/* The model of model.spec, its optimiser and input normalisation, the
 * initial parameters of model.init_seed (the same on every agent). */
static int trainer_setup_model(trainer *tr, char *err, size_t errlen)
{
    const agent_config *cfg = tr->cfg;
    char msg[MODEL_MSG_MAX] = "";
    int rc = model_net_create(&tr->net, cfg->model_spec, tr->input_dim, tr->classes, cfg->batch,
                              msg, sizeof msg);
    if (rc) {
        snprintf(err, errlen, "model %s: %s (%s)", cfg->model_spec, msg[0] ? msg : "cannot create",
                 model_strerror(rc));
        return -1;
    }
    size_t p = model_net_param_count(tr->net);
    if (p > MURMUR_DIM_MAX) {
        snprintf(err, errlen, "model %s has %zu parameters; mixing carries at most %u",
                 cfg->model_spec, p, MURMUR_DIM_MAX);
        return -1;
    }
    model_sgd_config sc = {.momentum = (float)cfg->momentum,
                           .weight_decay = (float)cfg->weight_decay};
    if (model_sgd_init(&tr->sgd, p, &sc)) {
        snprintf(err, errlen, "cannot set up the optimiser (momentum %g)", cfg->momentum);
        return -1;
    }
    if (model_norm_fit(&tr->norm, &tr->test,
                       tr->test.dtype == MODEL_DTYPE_U8 ? MODEL_NORM_UNIT : MODEL_NORM_NONE)) {
        snprintf(err, errlen, "cannot set up the input normalisation");
        return -1;
    }
    model_rng init;
    model_rng_seed(&init, cfg->init_seed, 0);
    model_net_init(tr->net, &init);
    return 0;
}

static const trainer_seg *seg_find(const trainer *tr, const char *path)
{
    for (uint32_t k = 0; k < tr->n_seg; k++)
        if (!strcmp(tr->seg[k].path, path))
            return &tr->seg[k];
    return NULL;
}

static void segs_free(trainer_seg *seg, uint32_t n)
{
    for (uint32_t k = 0; k < n; k++)
        free(seg[k].path);
    free(seg);
}

/* Load the shard files of the agent's current assignment into tr->data.
 * A shard already in tr->data is copied from there instead of read and
 * decoded again: at start an agent alone is primary for every shard, then
 * for a share of them as its peers appear, and each reassignment on the
 * training thread cost a pause of a decode per shard (100-400 ms in the
 * first seconds of a 4-agent start). */
static void trainer_load(trainer *tr, const murmur_shard_list *l)
{
    tr->gen = l->generation;
    model_data *parts = l->count ? calloc(l->count, sizeof *parts) : NULL;
    uint8_t *view = l->count ? calloc(l->count, 1) : NULL; /* parts[k] borrows tr->data */
    trainer_seg *seg = l->count ? calloc(l->count, sizeof *seg) : NULL;
    uint32_t ok = 0, reused = 0;
    for (size_t i = 0; parts && view && seg && i < l->count; i++) {
        const trainer_seg *old = seg_find(tr, l->paths[i]);
        char *path = strdup(l->paths[i]);
        if (!path)
            continue;
        if (old) {
            size_t rb = (size_t)tr->data.dim * model_dtype_size(tr->data.dtype);
            model_data *v = &parts[ok];
            *v = tr->data;
            v->count = old->count;
            v->classes = old->classes;
            if (v->x_u8)
                v->x_u8 += (size_t)old->first * rb;
            if (v->x_f32)
                v->x_f32 += (size_t)old->first * tr->data.dim;
            v->labels += old->first;
            view[ok] = 1;
            seg[ok] = (trainer_seg){.path = path, .count = old->count, .classes = old->classes};
            ok++;
            reused++;
            continue;
        }
        char msg[MODEL_MSG_MAX] = "";
        int rc = model_shard_load(&parts[ok], NULL, l->paths[i], msg, sizeof msg);
        if (!rc && (parts[ok].dim != tr->input_dim || parts[ok].classes > tr->classes ||
                    parts[ok].dtype != tr->test.dtype)) {
            snprintf(msg, sizeof msg, "%u features (%u classes), the test set %u (%u)",
                     parts[ok].dim, parts[ok].classes, tr->input_dim, tr->classes);
            model_data_free(&parts[ok]);
            rc = MODEL_EDIM;
        }
        if (rc) {
            free(path);
            /* Damaged bytes (not another data set, not a passing read
             * error): the agent quarantines the file and fetches a good copy. */
            int damaged =
                rc != MODEL_EIO && rc != MODEL_ENOMEM && rc != MODEL_EDIM && rc != MODEL_EVERSION;
            agent_log(AGENT_LOG_WARN, "shard_unusable", "file", l->paths[i], "why", msg, "action",
                      damaged ? "quarantined; fetching a good copy" : "skipped", NULL);
            if (damaged)
                murmur_shard_damaged(tr->a, l->paths[i]);
            continue;
        }
        seg[ok] =
            (trainer_seg){.path = path, .count = parts[ok].count, .classes = parts[ok].classes};
        ok++;
    }
    model_data data;
    memset(&data, 0, sizeof data);
    char msg[MODEL_MSG_MAX];
    if (ok && model_data_concat(&data, parts, ok, msg, sizeof msg)) {
        memset(&data, 0, sizeof data);
        segs_free(seg, ok);
        seg = NULL;
        ok = 0;
    }
    uint32_t at = 0;
    for (uint32_t k = 0; k < ok; k++) {
        seg[k].first = at;
        at += seg[k].count;
    }
    for (uint32_t k = 0; parts && k < l->count; k++)
        if (!view[k])
            model_data_free(&parts[k]);
    free(parts);
    free(view);
    /* the views are copied: the old set can go */
    model_data_free(&tr->data);
    segs_free(tr->seg, tr->n_seg);
    tr->data = data;
    tr->seg = seg;
    tr->n_seg = ok;
    if (tr->data.count > tr->order_cap) {
        free(tr->order);
        tr->order = malloc((size_t)tr->data.count * sizeof *tr->order);
        tr->order_cap = tr->order ? tr->data.count : 0;
        if (!tr->order) {
            model_data_free(&tr->data);
            memset(&tr->data, 0, sizeof tr->data);
            segs_free(tr->seg, tr->n_seg);
            tr->seg = NULL;
            tr->n_seg = 0;
        }
    }
    tr->at = tr->data.count; /* reshuffle at the next step */
    agent_log_line line;
    agent_log_begin(&line, AGENT_LOG_INFO, "training_data");
    agent_log_u64(&line, "shards", ok);
    agent_log_u64(&line, "samples", tr->data.count);
    agent_log_u64(&line, "reused", reused);
    agent_log_str(&line, "source", l->reason);
    agent_log_end(&line);
}

/* Follow the agent's shard assignment (re-replication, joins, leaves). */
static void trainer_follow_shards(trainer *tr)
{
    uint64_t now = trainer_now_us();
    if (now - tr->shards_checked_us < TRAINER_SHARDS_EVERY_US && tr->shards_checked_us)
        return;
    tr->shards_checked_us = now;
    murmur_status st = {.size = sizeof st};
    /* generation 0 (no view yet) is loaded once, not every check: it was
     * logged as training_data five times a second until the first view */
    if (murmur_status_get(tr->a, &st) || st.shards_generation == tr->gen)
        return;
    murmur_shard_list *l;
    if (murmur_shards_get(tr->a, &l) == MURMUR_OK) {
        if (l->generation != tr->gen)
            trainer_load(tr, l);
        murmur_shards_free(l);
    }
}

/* Evaluate the parameters on the test set into tr->acc and tr->test_loss
 * (kept as they were if it fails); 0 on success. */
static int trainer_measure(trainer *tr)
{
    double loss, acc;
    if (model_net_evaluate(tr->net, &tr->test, &tr->norm, &loss, &acc) != MODEL_OK)
        return -1;
    tr->acc = acc;
    tr->test_loss = loss;
    return 0;
}

static void trainer_evaluate(trainer *tr)
{
    trainer_measure(tr);
    murmur_report(tr->a, tr->loss_init ? tr->loss_avg : NAN, tr->test_loss, tr->acc);
}

/* One evaluation of the parameters as they are, logged as model_evaluated
 * with `when` (final at a stop, or where a restored model came from): the
 * shutdown's last accuracy and the restart's first are of the same bytes,
 * so an operator (and tests/integration/agent_checkpoint.sh) sees that a
 * restart lost nothing. */
static void trainer_evaluate_logged(trainer *tr, const char *when)
{
    if (trainer_measure(tr))
        return;
    agent_log_line l;
    agent_log_begin(&l, AGENT_LOG_INFO, "model_evaluated");
    agent_log_str(&l, "when", when);
    agent_log_u64(&l, "step", tr->step);
    agent_log_f64(&l, "accuracy", tr->acc);
    agent_log_f64(&l, "test_loss", tr->test_loss);
    agent_log_end(&l);
}

/* A step whose loss is not finite (a learning rate too high for the
 * model, or values from a peer that slipped through mixing's bounds):
 * the agent never stops for it. The parameters go back to the agent's
 * latest mixed model (finite: the schedule refuses non-finite results),
 * or to the initial model when there is none; the momentum is cleared and
 * the next batch is taken. Logged once per streak; a long streak means the
 * learning rate itself diverges. */
static void trainer_recover(trainer *tr, float *params, uint32_t streak)
{
    const char *to = "the last mixed model";
    if (murmur_latest(tr->a, params) != MURMUR_OK) {
        model_rng init;
        model_rng_seed(&init, tr->cfg->init_seed, 0);
        model_net_init(tr->net, &init);
        to = "the initial model";
    }
    model_sgd_reset(&tr->sgd);
    if (streak == 1 || streak % 1000 == 0) {
        agent_log_line l;
        agent_log_begin(&l, AGENT_LOG_WARN, "training_recovered");
        agent_log_str(&l, "why", "non-finite loss");
        agent_log_str(&l, "reset_to", to);
        agent_log_u64(&l, "step", tr->step);
        agent_log_u64(&l, "streak", streak);
        agent_log_str(&l, "hint", streak > 1 ? "lower model.lr" : "");
        agent_log_end(&l);
    }
}

static void trainer_free(trainer *tr)
{
    model_net_destroy(tr->net);
    model_sgd_free(&tr->sgd);
    model_norm_free(&tr->norm);
    model_data_free(&tr->data);
    segs_free(tr->seg, tr->n_seg);
    model_data_free(&tr->test);
    free(tr->order);
}

/* The training loop; returns when the agent stops. */
static void trainer_loop(trainer *tr)
{
    const agent_config *cfg = tr->cfg;
    float *params = model_net_params(tr->net);
    float *xb = model_net_input_buffer(tr->net);
    uint16_t *yb = model_net_label_buffer(tr->net);
    uint32_t bad_steps = 0;
    for (;;) {
        trainer_follow_shards(tr);
        if (tr->data.count == 0) {
            /* no data yet: keep the mixing results coming, then wait */
            int r = murmur_mix(tr->a, params, 0, 0);
            if (r == MURMUR_ESTOPPED)
                return;
            if (r == MURMUR_MIX_REPLACED)
                model_sgd_reset(&tr->sgd);
            struct timespec ts = {0, TRAINER_IDLE_MS * 1000000L};
            nanosleep(&ts, NULL);
            continue;
        }
        uint32_t n = cfg->batch;
        if (tr->at + n > tr->data.count) {
            model_data_shuffle(tr->order, tr->data.count, &tr->rng);
            tr->at = 0;
            if (n > tr->data.count)
                n = tr->data.count;
        }
        model_data_gather(&tr->data, &tr->norm, tr->order + tr->at, n, xb, yb);
        tr->at += n;
        if (tr->at < tr->data.count) /* the next batch loads while this one trains */
            model_data_prefetch(&tr->data, tr->order + tr->at,
                                tr->data.count - tr->at < cfg->batch ? tr->data.count - tr->at
                                                                     : cfg->batch);
        float loss;
        if (model_train_step(tr->net, &tr->sgd, xb, yb, n, murmur_lr(tr->a), &loss) != MODEL_OK ||
            !isfinite(loss)) {
            trainer_recover(tr, params, ++bad_steps);
            continue;
        }
        bad_steps = 0;
        tr->step++;
        tr->loss_avg = tr->loss_init
                           ? (1 - TRAINER_LOSS_EWMA) * tr->loss_avg + TRAINER_LOSS_EWMA * loss
                           : loss;
        tr->loss_init = 1;
        int r = murmur_mix(tr->a, params, 1, n);
        if (r == MURMUR_ESTOPPED) /* pause and slow hold murmur_mix (agent/chaos.h) */
            return;
        if (r == MURMUR_MIX_REPLACED)
            model_sgd_reset(&tr->sgd);
        /* the first step gives the progress lines an accuracy, unless the
         * model restored from a peer or a checkpoint was just evaluated */
        if (tr->step % cfg->eval_every_steps == 0 || (tr->step == 1 && isnan(tr->acc)))
            trainer_evaluate(tr);
        else if (tr->step % 64 == 0)
            murmur_report(tr->a, tr->loss_avg, tr->test_loss, tr->acc);
        if (cfg->checkpoint_every_steps && tr->step % cfg->checkpoint_every_steps == 0)
            murmur_checkpoint(tr->a, params, tr->sgd.velocity);
    }
}

int agent_trainer_run(const agent_config *cfg, murmur_agent *volatile *running,
                      volatile sig_atomic_t *stop_flag)
{
    trainer *tr = calloc(1, sizeof *tr);
    if (!tr) {
        fprintf(stderr, "murmur agent: out of memory\n");
        return 1;
    }
    tr->cfg = cfg;
    tr->gen = TRAINER_GEN_NONE;
    tr->acc = tr->test_loss = NAN;
    char err[AGENT_RUNTIME_ERR_MAX + AGENT_CONFIG_PATH_MAX] = "";
    if (trainer_load_test_set(tr, err, sizeof err) || trainer_setup_model(tr, err, sizeof err)) {
        fprintf(stderr, "murmur agent: %s\n", err);
        trainer_free(tr);
        free(tr);
        return 1;
    }
    uint32_t dim = (uint32_t)model_net_param_count(tr->net);
    if (agent_open(&tr->a, cfg, dim, 0, err, sizeof err)) {
        fprintf(stderr, "murmur agent: %s\n", err);
        trainer_free(tr);
        free(tr);
        return 1;
    }
    *running = tr->a;
    if (stop_flag && *stop_flag) /* a signal came before the agent was open */
        murmur_stop(tr->a);
    float *params = model_net_params(tr->net);
    murmur_source source;
    int rc = murmur_wait_ready(tr->a, params, tr->sgd.velocity, -1, &source);
    if (rc == MURMUR_OK) {
        murmur_status st = {.size = sizeof st};
        murmur_status_get(tr->a, &st);
        tr->step = st.steps; /* a restart resumes its step count */
        /* Each agent shuffles its data with its own stream. */
        model_rng_seed(&tr->rng, st.node_id, 1);
        if (source == MURMUR_SOURCE_CHECKPOINT || source == MURMUR_SOURCE_TRANSFER) {
            trainer_evaluate_logged(tr, source == MURMUR_SOURCE_CHECKPOINT ? "checkpoint"
                                                                           : "state_transfer");
            murmur_report(tr->a, NAN, tr->test_loss, tr->acc);
        }
        trainer_loop(tr);
    }
    *running = NULL;
    int code = murmur_close(tr->a, params, tr->sgd.velocity);
    /* close folded the peers' pending changes into params: this is the
     * model the final checkpoint holds */
    if (rc == MURMUR_OK && tr->step)
        trainer_evaluate_logged(tr, "final");
    trainer_free(tr);
    free(tr);
    return code;
}
