/* agent/trainer — the training thread of the runtime. See agent.h for the
 * hand-offs with the event loop and runtime_internal.h for the shared state. */

#include "agent/runtime_internal.h"

#include <math.h>
#include <sodium.h>
#include <string.h>

#include "agent/checkpoint.h"
#include "agent/log.h"
#include "agent/store_file.h"
#include "model/shardfile.h"

/* Largest shard file the agent imports or fetches (gossip/shards default). */
#define AGENT_SHARD_BYTES_MAX GOSSIP_SHARDS_SHARD_BYTES_DEFAULT

/* ---- the training thread ---- */

void agent_trainer_publish(agent_runtime *a)
{
    trainer *tr = &a->tr;
    uint64_t now = agent_mono_us();
    pthread_mutex_lock(&a->st_mu);
    a->st.step = tr->step;
    a->st.loss = tr->loss_init ? tr->loss_avg : NAN;
    a->st.accuracy = tr->acc;
    a->st.test_loss = tr->test_loss;
    if (now > tr->sps_t_us + 1000000u) {
        double s = (double)(now - tr->sps_t_us) / 1e6;
        if (tr->sps_t_us)
            a->st.samples_per_second = (double)(tr->step - tr->sps_step) * a->cfg.batch / s;
        tr->sps_t_us = now;
        tr->sps_step = tr->step;
    }
    pthread_mutex_unlock(&a->st_mu);
    agent_metric_set(a->ms.loss, a->st.loss);
    agent_metric_set(a->ms.accuracy, tr->acc);
    agent_metric_set(a->ms.samples_per_second, a->st.samples_per_second);
}

/* Load the primary shards listed in ids[0..n) into tr->data. */
static void trainer_load(agent_runtime *a, const uint32_t *ids, uint32_t n)
{
    trainer *tr = &a->tr;
    model_data_free(&tr->data);
    memset(&tr->data, 0, sizeof tr->data);
    if (!n)
        return;
    model_data *parts = calloc(n, sizeof *parts);
    if (!parts)
        return;
    uint32_t ok = 0;
    for (uint32_t i = 0; i < n; i++) {
        char path[AGENT_STORE_FILE_PATH_MAX], msg[MODEL_MSG_MAX] = "";
        if (agent_store_file_path(a->cfg.shards_dir, a->catalog[ids[i]], path, sizeof path))
            continue;
        int rc = model_shard_load(&parts[ok], NULL, path, msg, sizeof msg);
        if (!rc && (parts[ok].dim != a->input_dim || parts[ok].classes > a->classes ||
                    parts[ok].dtype != a->test.dtype)) {
            snprintf(msg, sizeof msg, "%u features (%u classes), the test set %u (%u)",
                     parts[ok].dim, parts[ok].classes, a->input_dim, a->classes);
            model_data_free(&parts[ok]);
            rc = MODEL_EDIM;
        }
        if (rc) {
            /* Damaged bytes (not another data set, not a passing read
             * error): the loop quarantines the file and fetches a good copy. */
            int damaged =
                rc != MODEL_EIO && rc != MODEL_ENOMEM && rc != MODEL_EDIM && rc != MODEL_EVERSION;
            agent_log(AGENT_LOG_WARN, "shard_unusable", "file", path, "why", msg, "action",
                      damaged ? "quarantined; fetching a good copy" : "skipped", NULL);
            if (damaged) {
                pthread_mutex_lock(&a->mu);
                if (a->n_bad_shards < a->n_catalog)
                    a->bad_shards[a->n_bad_shards++] = ids[i];
                pthread_mutex_unlock(&a->mu);
                net_transport_wake(a->t);
            }
            continue;
        }
        ok++;
    }
    char msg[MODEL_MSG_MAX];
    if (ok && model_data_concat(&tr->data, parts, ok, msg, sizeof msg))
        memset(&tr->data, 0, sizeof tr->data);
    for (uint32_t i = 0; i < ok; i++)
        model_data_free(&parts[i]);
    free(parts);
    if (tr->data.count > tr->order_cap) {
        free(tr->order);
        tr->order = malloc((size_t)tr->data.count * sizeof *tr->order);
        tr->order_cap = tr->order ? tr->data.count : 0;
        if (!tr->order) {
            model_data_free(&tr->data);
            memset(&tr->data, 0, sizeof tr->data);
        }
    }
    tr->at = tr->data.count; /* reshuffle at the next step */
    agent_log_line l;
    agent_log_begin(&l, AGENT_LOG_INFO, "training_data");
    agent_log_u64(&l, "shards", ok);
    agent_log_u64(&l, "samples", tr->data.count);
    agent_log_end(&l);
}

void agent_trainer_checkpoint(agent_runtime *a, const char *why)
{
    trainer *tr = &a->tr;
    agent_checkpoint ck = {.spec = a->cfg.model_spec,
                           .dim = a->dim,
                           .step = tr->step,
                           .round = atomic_load(&a->round),
                           .epoch = a->epoch,
                           .params = model_net_params(tr->net),
                           .momentum = tr->sgd.velocity};
    char err[256] = "";
    if (agent_checkpoint_save(a->cfg.checkpoint_path, &ck, err, sizeof err)) {
        agent_metric_inc(a->ms.checkpoint_failures);
        agent_log(AGENT_LOG_WARN, "checkpoint_failed", "why", err, NULL);
        return;
    }
    agent_metric_inc(a->ms.checkpoints);
    agent_log_line l;
    agent_log_begin(&l, AGENT_LOG_INFO, "checkpoint_written");
    agent_log_str(&l, "path", a->cfg.checkpoint_path);
    agent_log_u64(&l, "step", tr->step);
    agent_log_u64(&l, "round", ck.round);
    agent_log_str(&l, "reason", why);
    agent_log_end(&l);
}

static void trainer_evaluate(agent_runtime *a)
{
    trainer *tr = &a->tr;
    double loss, acc;
    if (model_net_evaluate(tr->net, &a->test, &tr->norm, &loss, &acc) == MODEL_OK) {
        tr->acc = acc;
        tr->test_loss = loss;
    }
}

/* A step whose loss is not finite (a learning rate too high for the
 * model, or values from a peer that slipped through mixing's bounds):
 * the agent never stops for it. The parameters go back to the last mixed
 * model (finite: gossip/sched refuses non-finite results), the momentum is
 * cleared, and the step is taken again on the next batch. Logged once per
 * streak; a long streak means the learning rate itself diverges. */
static void trainer_recover(agent_runtime *a, uint32_t streak)
{
    trainer *tr = &a->tr;
    float *params = model_net_params(tr->net);
    pthread_mutex_lock(&a->mu);
    int ok = gossip_sched_replace(a->sched, a->latest, 0) == GOSSIP_OK;
    if (ok)
        (void)gossip_sched_before_step(a->sched, params);
    pthread_mutex_unlock(&a->mu);
    if (!ok) { /* not even the last mixed model is usable: start again */
        model_rng init;
        model_rng_seed(&init, a->cfg.init_seed, 0);
        model_net_init(tr->net, &init);
    }
    model_sgd_reset(&tr->sgd);
    agent_metric_inc(a->ms.training_recoveries);
    if (streak == 1 || streak % 1000 == 0) {
        agent_log_line l;
        agent_log_begin(&l, AGENT_LOG_WARN, "training_recovered");
        agent_log_str(&l, "why", "non-finite loss; parameters reset to the last mixed model");
        agent_log_u64(&l, "step", tr->step);
        agent_log_u64(&l, "streak", streak);
        agent_log_str(&l, "hint", streak > 1 ? "lower model.lr" : "");
        agent_log_end(&l);
    }
}

void *agent_trainer_main(void *arg)
{
    agent_runtime *a = arg;
    trainer *tr = &a->tr;
    float *params = model_net_params(tr->net);
    float *xb = model_net_input_buffer(tr->net);
    uint16_t *yb = model_net_label_buffer(tr->net);
    uint32_t *ids = malloc((size_t)a->n_catalog * sizeof *ids);
    if (!ids) {
        agent_log(AGENT_LOG_ERROR, "trainer_failed", "why", "out of memory", NULL);
        return NULL;
    }
    uint64_t last_publish = 0;
    uint32_t bad_steps = 0;
    for (;;) {
        int ready = 0, reload = 0;
        uint32_t n_ids = 0;
        pthread_mutex_lock(&a->mu);
        if (a->trainer_stop) {
            pthread_mutex_unlock(&a->mu);
            break;
        }
        /* a finished round (params += mixed - sent) or an adopted model */
        gossip_sched_applied applied = gossip_sched_before_step(a->sched, params);
        if (a->primary_gen != tr->gen) {
            tr->gen = a->primary_gen;
            n_ids = a->n_primary;
            memcpy(ids, a->primary, n_ids * sizeof *ids);
            reload = 1;
        }
        ready = a->model_ready;
        uint32_t live = atomic_load(&a->live_n);
        float lr = gossip_sched_lr(a->sched, live);
        pthread_mutex_unlock(&a->mu);
        if (applied == GOSSIP_SCHED_REPLACED)
            model_sgd_reset(&tr->sgd);
        if (reload)
            trainer_load(a, ids, n_ids);
        if (!ready || tr->data.count == 0) {
            pthread_mutex_lock(&a->mu);
            if (!a->trainer_stop && gossip_sched_get_state(a->sched) != GOSSIP_SCHED_RESULT &&
                a->primary_gen == tr->gen) {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_nsec += 100000000;
                if (ts.tv_nsec >= 1000000000) {
                    ts.tv_sec++;
                    ts.tv_nsec -= 1000000000;
                }
                pthread_cond_timedwait(&a->cv, &a->mu, &ts);
            }
            pthread_mutex_unlock(&a->mu);
            continue;
        }
        /* one local step */
        uint32_t n = a->cfg.batch;
        if (tr->at + n > tr->data.count) {
            model_data_shuffle(tr->order, tr->data.count, &tr->rng);
            tr->at = 0;
            if (n > tr->data.count)
                n = tr->data.count;
        }
        model_data_gather(&tr->data, &tr->norm, tr->order + tr->at, n, xb, yb);
        tr->at += n;
        float loss;
        if (model_train_step(tr->net, &tr->sgd, xb, yb, n, lr, &loss) != MODEL_OK ||
            !isfinite(loss)) {
            trainer_recover(a, ++bad_steps);
            continue;
        }
        bad_steps = 0;
        tr->step++;
        tr->loss_avg =
            tr->loss_init ? (1 - AGENT_LOSS_EWMA) * tr->loss_avg + AGENT_LOSS_EWMA * loss : loss;
        tr->loss_init = 1;
        agent_metric_inc(a->ms.steps);
        agent_metric_add(a->ms.samples, n);
        pthread_mutex_lock(&a->mu);
        int due = gossip_sched_after_step(a->sched, params, n, live);
        pthread_mutex_unlock(&a->mu);
        if (due)
            net_transport_wake(a->t);
        if (tr->step % a->cfg.eval_every_steps == 0 || tr->step == 1)
            trainer_evaluate(a);
        if (a->cfg.checkpoint_every_steps && tr->step % a->cfg.checkpoint_every_steps == 0)
            agent_trainer_checkpoint(a, "periodic");
        uint64_t now = agent_mono_us();
        if (now - last_publish > 100000u) {
            agent_trainer_publish(a);
            last_publish = now;
        }
    }
    agent_trainer_publish(a);
    free(ids);
    return NULL;
}
