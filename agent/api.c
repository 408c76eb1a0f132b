/* agent/api — libmurmur's public API (include/murmur.h) over the agent
 * runtime (agent/runtime.c). Every murmur_ function is here; nothing else
 * is exported from libmurmur.so. */
#include "agent/chaos.h"
#include "agent/runtime_internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent/log.h"
#include "agent/store_file.h"

MURMUR_API const char *murmur_version(void)
{
    return MURMUR_VERSION_STRING;
}

MURMUR_API unsigned murmur_version_number(void)
{
    return MURMUR_VERSION_MAJOR * 10000u + MURMUR_VERSION_MINOR * 100u + MURMUR_VERSION_PATCH;
}

MURMUR_API const char *murmur_strerror(int err)
{
    switch (err) {
    case MURMUR_OK:
        return "ok";
    case MURMUR_EINVAL:
        return "invalid argument";
    case MURMUR_ECONFIG:
        return "invalid configuration";
    case MURMUR_ESTART:
        return "the agent could not start";
    case MURMUR_ENOMEM:
        return "out of memory";
    case MURMUR_ETIMEDOUT:
        return "timed out";
    case MURMUR_ESTOPPED:
        return "the agent is stopping";
    case MURMUR_EIO:
        return "a file could not be written";
    case MURMUR_ENONFINITE:
        return "the parameters hold a NaN or an infinity";
    default:
        return "unknown error";
    }
}

MURMUR_API int murmur_open(murmur_agent **out, const char *config_path, const char *const *settings,
                           uint32_t dim, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    if (!out) {
        agent_errf(err, errlen, "murmur_open: out is NULL");
        return MURMUR_EINVAL;
    }
    *out = NULL;
    if (!dim || dim > MURMUR_DIM_MAX || dim > GOSSIP_CODEC_DIM_MAX) {
        agent_errf(err, errlen, "murmur_open: dim %u is outside 1..%u", dim,
                   GOSSIP_CODEC_DIM_MAX < MURMUR_DIM_MAX ? GOSSIP_CODEC_DIM_MAX : MURMUR_DIM_MAX);
        return MURMUR_EINVAL;
    }
    agent_config *cfg = malloc(sizeof *cfg);
    if (!cfg) {
        agent_errf(err, errlen, "out of memory");
        return MURMUR_ENOMEM;
    }
    char msg[AGENT_CONFIG_ERR_MAX] = "";
    agent_config_defaults(cfg);
    int rc = 0;
    if (config_path)
        rc = agent_config_load_file(cfg, config_path, msg, sizeof msg);
    if (!rc)
        rc = agent_config_load_env(cfg, NULL, msg, sizeof msg);
    for (size_t i = 0; !rc && settings && settings[i]; i++) {
        const char *eq = strchr(settings[i], '=');
        char name[96];
        if (!eq || (size_t)(eq - settings[i]) >= sizeof name) {
            snprintf(msg, sizeof msg, "setting '%s' is not section.key=value", settings[i]);
            rc = -1;
            break;
        }
        memcpy(name, settings[i], (size_t)(eq - settings[i]));
        name[eq - settings[i]] = '\0';
        rc = agent_config_set(cfg, name, eq + 1, "murmur_open", msg, sizeof msg);
    }
    if (!rc)
        rc = agent_config_finish(cfg, msg, sizeof msg);
    if (rc) {
        agent_errf(err, errlen, "%s", msg);
        free(cfg);
        return MURMUR_ECONFIG;
    }
    agent_log_set_level((agent_log_level)cfg->log_level);
    rc = agent_open(out, cfg, dim, AGENT_OPEN_CATALOG_OPTIONAL, err, errlen);
    free(cfg);
    return rc;
}

/* Deadline for pthread_cond_timedwait, ms from now (CLOCK_REALTIME). */
static struct timespec api_deadline(int ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

static int api_finite(const float *x, uint32_t n)
{
    int ok = 1;
    for (uint32_t k = 0; k < n; k++)
        ok &= isfinite(x[k]);
    return ok;
}

MURMUR_API int murmur_wait_ready(murmur_agent *a, float *params, float *momentum, int timeout_ms,
                                 murmur_source *source)
{
    if (!a || !params)
        return MURMUR_EINVAL;
    if (!api_finite(params, a->dim))
        return MURMUR_ENONFINITE;
    struct timespec until = api_deadline(timeout_ms < 0 ? 0 : timeout_ms);
    pthread_mutex_lock(&a->mu);
    while (!a->model_ready && !a->stop) {
        if (timeout_ms < 0) {
            pthread_cond_wait(&a->cv, &a->mu);
        } else if (pthread_cond_timedwait(&a->cv, &a->mu, &until) == ETIMEDOUT) {
            pthread_mutex_unlock(&a->mu);
            return MURMUR_ETIMEDOUT;
        }
    }
    if (a->stop && !a->model_ready) {
        pthread_mutex_unlock(&a->mu);
        return MURMUR_ESTOPPED;
    }
    gossip_sched_applied applied = gossip_sched_before_step(a->sched, params);
    if (applied != GOSSIP_SCHED_REPLACED)
        memcpy(a->latest, params, a->dim * sizeof *params); /* the model served to joiners */
    if (momentum) {
        if (a->source == MURMUR_SOURCE_CHECKPOINT)
            memcpy(momentum, a->init_momentum, a->dim * sizeof *momentum);
        else
            memset(momentum, 0, a->dim * sizeof *momentum);
    }
    if (source)
        *source = applied == GOSSIP_SCHED_REPLACED ? a->source : MURMUR_SOURCE_OWN;
    a->host_ready = 1;
    pthread_mutex_unlock(&a->mu);
    return MURMUR_OK;
}

/* The calling thread's id, cached per thread. */
static int api_tid(void)
{
    static _Thread_local int tid;
    if (!tid)
        tid = (int)syscall(SYS_gettid);
    return tid;
}

MURMUR_API int murmur_mix(murmur_agent *a, float *params, uint32_t steps, uint64_t samples)
{
    if (!a || !params)
        return MURMUR_EINVAL;
    if (a->stop) {
        /* The steps are in params, which murmur_close checkpoints: counted,
         * so the checkpoint's step is the step its parameters stand at. */
        pthread_mutex_lock(&a->mu);
        a->host_steps += steps;
        a->host_samples += samples;
        pthread_mutex_unlock(&a->mu);
        return MURMUR_ESTOPPED;
    }
    pthread_mutex_lock(&a->mu);
    /* A host with no data (0 steps, 0 samples) on an agent whose store is
     * full will get none: one schedule step, not counted as a local step,
     * keeps its mixing rounds coming (issue 13 item 11). */
    uint32_t sched_steps = steps == 0 && samples == 0 && a->idle_mix ? 1u : steps;
    gossip_sched_applied applied = gossip_sched_before_step(a->sched, params);
    int due = 0, rc = MURMUR_MIX_NONE;
    if (applied == GOSSIP_SCHED_REPLACED)
        rc = MURMUR_MIX_REPLACED;
    else if (applied == GOSSIP_SCHED_MIXED)
        rc = MURMUR_MIX_MIXED;
    uint32_t live = atomic_load(&a->live_n);
    a->host_steps += steps;
    a->host_samples += samples;
    if (steps && a->cfg.cost_share > 0)
        a->host_tid = api_tid(); /* whose CPU time the cadence measures */
    agent_runtime_watch(a, agent_mono_us());
    int max_steps = a->cfg.run_max_steps && a->host_steps >= a->cfg.run_max_steps;
    /* one schedule step per counted step; the samples go with the last */
    for (uint32_t s = 0; s < sched_steps; s++) {
        uint64_t n = s + 1 == sched_steps ? samples - (samples / sched_steps) * (sched_steps - 1)
                                          : samples / sched_steps;
        due |= gossip_sched_after_step(a->sched, params, (uint32_t)n, live);
    }
    /* Checked only when a round takes a copy (a pass over params per step
     * cost 2% of the host's time): a non-finite model is never sent. */
    if (due && !api_finite(params, a->dim)) {
        gossip_sched_cancel(a->sched);
        due = 0;
        rc = MURMUR_ENONFINITE;
    }
    pthread_mutex_unlock(&a->mu);
    agent_metric_add(a->ms.steps, steps);
    agent_metric_add(a->ms.samples, samples);
    if (due)
        net_transport_wake(a->t);
    if (max_steps) { /* run.max_steps: the host stops at exactly that step */
        agent_runtime_job_end(a, "max_steps", AGENT_EXIT_MAX_STEPS);
        return MURMUR_ESTOPPED;
    }
    /* the pause and slow faults ([faults], murmur fault): the host's loop
     * is held here, whoever the host is (agent/chaos.h) */
    if (a->faults && agent_faults_host_gate(a))
        return MURMUR_ESTOPPED;
    return rc;
}

MURMUR_API float murmur_lr(murmur_agent *a)
{
    if (!a)
        return NAN;
    pthread_mutex_lock(&a->mu);
    float lr = gossip_sched_lr(a->sched, atomic_load(&a->live_n));
    pthread_mutex_unlock(&a->mu);
    return lr;
}

MURMUR_API int murmur_latest(murmur_agent *a, float *out)
{
    if (!a || !out)
        return MURMUR_EINVAL;
    pthread_mutex_lock(&a->mu);
    int ready = a->host_ready;
    if (ready)
        memcpy(out, a->latest, a->dim * sizeof *out);
    pthread_mutex_unlock(&a->mu);
    return ready ? MURMUR_OK : MURMUR_ESTOPPED;
}

MURMUR_API void murmur_report(murmur_agent *a, double train_loss, double test_loss,
                              double test_accuracy)
{
    if (!a)
        return;
    pthread_mutex_lock(&a->mu);
    a->host_loss = train_loss;
    a->host_test_loss = test_loss;
    a->host_accuracy = test_accuracy;
    pthread_mutex_unlock(&a->mu);
    if (a->cfg.run_target_accuracy > 0 && test_accuracy >= a->cfg.run_target_accuracy)
        agent_runtime_job_end(a, "target_accuracy", AGENT_EXIT_TARGET_ACCURACY);
}

MURMUR_API int murmur_checkpoint(murmur_agent *a, const float *params, const float *momentum)
{
    if (!a || !params)
        return MURMUR_EINVAL;
    return agent_runtime_checkpoint(a, params, momentum, "periodic") ? MURMUR_EIO : MURMUR_OK;
}

MURMUR_API int murmur_status_get(murmur_agent *a, murmur_status *out)
{
    if (!a || !out || out->size < sizeof(size_t))
        return MURMUR_EINVAL;
    murmur_status s;
    memset(&s, 0, sizeof s);
    s.size = out->size < sizeof s ? out->size : sizeof s;
    agent_status st;
    pthread_mutex_lock(&a->st_mu);
    st = a->st;
    pthread_mutex_unlock(&a->st_mu);
    s.node_id = st.node_id;
    snprintf(s.address, sizeof s.address, "%s", st.address);
    snprintf(s.state, sizeof s.state, "%s", st.state);
    s.peers = st.peers;
    s.view_epoch = st.view_epoch;
    s.round = atomic_load(&a->round);
    s.mixing_rounds = st.mixing_rounds;
    s.round_aborts = st.round_aborts;
    s.consensus = st.consensus_distance;
    s.bytes_sent = st.bytes_sent;
    s.bytes_received = st.bytes_received;
    s.shards_held = st.shards_held;
    s.shards_primary = st.shards_primary;
    pthread_mutex_lock(&a->mu);
    s.steps = a->host_steps;
    s.samples = a->host_samples;
    s.cluster_epochs = gossip_sched_clock_epochs(a->sched);
    s.lr = gossip_sched_lr(a->sched, atomic_load(&a->live_n));
    s.shards_generation = a->primary_gen;
    pthread_mutex_unlock(&a->mu);
    memcpy(out, &s, s.size);
    return MURMUR_OK;
}

/* One allocation: the list, the path pointers, then the paths. */
MURMUR_API int murmur_shards_get(murmur_agent *a, murmur_shard_list **out)
{
    if (!a || !out)
        return MURMUR_EINVAL;
    *out = NULL;
    pthread_mutex_lock(&a->mu);
    uint32_t n = a->n_primary;
    size_t bytes = sizeof(murmur_shard_list) + (size_t)n * (sizeof(char *) + MURMUR_PATH_MAX);
    murmur_shard_list *l = malloc(bytes);
    if (!l) {
        pthread_mutex_unlock(&a->mu);
        return MURMUR_ENOMEM;
    }
    const char **paths = (const char **)(l + 1);
    char *text = (char *)(paths + n);
    size_t count = 0;
    for (uint32_t i = 0; i < n; i++) {
        char *p = text + (size_t)count * MURMUR_PATH_MAX;
        if (agent_store_file_path(a->cfg.shards_dir, a->catalog[a->primary[i]], p, MURMUR_PATH_MAX))
            continue;
        paths[count++] = p;
    }
    l->generation = a->primary_gen;
    l->count = count;
    l->paths = paths;
    snprintf(l->why, sizeof l->why, "%s: %s", gossip_shards_train_source_name(a->train_pub.source),
             gossip_shards_train_reason_name(a->train_pub.reason));
    l->reason = l->why;
    pthread_mutex_unlock(&a->mu);
    *out = l;
    return MURMUR_OK;
}

MURMUR_API void murmur_shards_free(murmur_shard_list *list)
{
    free(list);
}

MURMUR_API int murmur_shard_damaged(murmur_agent *a, const char *path)
{
    if (!a || !path)
        return MURMUR_EINVAL;
    char p[MURMUR_PATH_MAX];
    int found = 0;
    pthread_mutex_lock(&a->mu);
    for (uint32_t i = 0; i < a->n_primary && !found; i++) {
        uint32_t s = a->primary[i];
        if (agent_store_file_path(a->cfg.shards_dir, a->catalog[s], p, sizeof p) || strcmp(p, path))
            continue;
        found = 1;
        if (a->n_bad_shards < a->n_catalog)
            a->bad_shards[a->n_bad_shards++] = s;
    }
    pthread_mutex_unlock(&a->mu);
    if (found)
        net_transport_wake(a->t);
    return found ? MURMUR_OK : MURMUR_EINVAL;
}

MURMUR_API void murmur_stop(murmur_agent *a)
{
    if (a)
        a->stop = 1;
}

MURMUR_API int murmur_close(murmur_agent *a, float *params, const float *momentum)
{
    if (!a)
        return MURMUR_EINVAL;
    return agent_runtime_close(a, params, momentum);
}
