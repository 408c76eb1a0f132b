/* agent/runtime — create/start/close and the event loop of the agent
 * runtime; see agent.h. The public API over it is agent/api.c, the built-in
 * trainer agent/trainer.c, start-up data agent/catalog.c, the shared state
 * agent/runtime_internal.h. */

#include "agent/runtime_internal.h"

#include <cblas.h>
#include <dirent.h>
#include <math.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent/chaos.h"
#include "agent/checkpoint.h"
#include "agent/log.h"
#include "agent/store_file.h"

/* Largest shard file the agent imports or fetches (gossip/shards default). */
#define AGENT_SHARD_BYTES_MAX GOSSIP_SHARDS_SHARD_BYTES_DEFAULT

uint64_t agent_mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

void agent_errf(char *err, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
}

static void *env_alloc(void *ctx, size_t size)
{
    (void)ctx;
    return malloc(size);
}

static void env_free(void *ctx, void *p)
{
    (void)ctx;
    free(p);
}

/* ---- the event loop ---- */

/* What the loop is doing now, for agent_runtime_watch. */
static void loop_mark(agent_runtime *a, const char *phase)
{
    atomic_store(&a->loop_phase, phase);
    atomic_store(&a->loop_beat_us, agent_mono_us());
}

/* "S 7 poll_schedule_timeout": the state, syscall number (or "running")
 * and wait channel of thread tid, from /proc; "" where unreadable. */
static void thread_state(int tid, char *out, size_t cap)
{
    char path[64], stat[512] = "", sc[64] = "", wchan[64] = "";
    FILE *f;
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
    if ((f = fopen(path, "r"))) {
        if (!fgets(stat, sizeof stat, f))
            stat[0] = 0;
        fclose(f);
    }
    snprintf(path, sizeof path, "/proc/self/task/%d/syscall", tid);
    if ((f = fopen(path, "r"))) {
        if (fscanf(f, "%63s", sc) != 1)
            sc[0] = 0;
        fclose(f);
    }
    snprintf(path, sizeof path, "/proc/self/task/%d/wchan", tid);
    if ((f = fopen(path, "r"))) {
        if (!fgets(wchan, sizeof wchan, f))
            wchan[0] = 0;
        fclose(f);
    }
    const char *st = strrchr(stat, ')');
    snprintf(out, cap, "%c %s %s", st && st[1] && st[2] ? st[2] : '?', sc, wchan);
}

void agent_runtime_watch(agent_runtime *a, uint64_t now)
{
    if (now - a->watch_at_us < 500000u)
        return;
    a->watch_at_us = now;
    uint64_t beat = atomic_load(&a->loop_beat_us);
    if (!beat || now < beat || now - beat < AGENT_LOOP_STALL_US || a->stop)
        return;
    if (a->watch_logged_us && now - a->watch_logged_us < AGENT_LOOP_STALL_LOG_US)
        return;
    a->watch_logged_us = now;
    char state[160];
    thread_state(atomic_load(&a->loop_tid), state, sizeof state);
    agent_log_line l;
    agent_log_begin(&l, AGENT_LOG_WARN, "loop_stalled");
    agent_log_u64(&l, "ms", (now - beat) / 1000u);
    agent_log_str(&l, "phase", atomic_load(&a->loop_phase));
    agent_log_str(&l, "thread", state);
    agent_log_end(&l);
}

static int snapshot_fn(void *ctx, float *out, uint32_t dim, uint64_t *round)
{
    agent_runtime *a = ctx;
    if (!a->node || gossip_node_model_state(a->node) != GOSSIP_NODE_READY || dim != a->dim)
        return -1;
    pthread_mutex_lock(&a->mu);
    int have = a->host_ready;
    if (have)
        memcpy(out, a->latest, dim * sizeof *out);
    pthread_mutex_unlock(&a->mu);
    if (!have) /* the host has not handed its model over yet */
        return -1;
    *round = atomic_load(&a->round);
    return 0;
}

static void flush_sends(agent_runtime *a, uint64_t now)
{
    gossip_send s;
    while (gossip_node_poll_send(a->node, &s, now) == 1) {
        int rc = net_transport_send(a->t, s.dest, s.dest_addr, s.frame, s.len);
        if (rc == NET_OK) {
            a->bytes_sent += s.len;
            agent_metrics_std_message(&a->ms, true, s.len > 3 ? s.frame[3] : 0, s.len);
        } else if (s.dest) {
            /* Not sent (no route, dials backing off, queue full): the mixer
             * stops waiting for an answer that cannot come. */
            gossip_node_unreachable(a->node, s.dest, now);
        }
    }
}

static void on_view(agent_runtime *a)
{
    gossip_view v;
    gossip_node_view(a->node, &v);
    if (v.epoch == atomic_load(&a->epoch))
        return;
    atomic_store(&a->epoch, v.epoch);
    gossip_swim *sw = gossip_node_swim(a->node);
    /* joined: in v, not in the previous view */
    for (uint32_t i = 0; i < v.n; i++) {
        uint64_t id = v.ids[i];
        if (id == a->id.node_id)
            continue;
        int known = 0;
        for (uint32_t k = 0; k < a->view_n && !known; k++)
            known = a->view_ids[k] == id;
        if (known)
            continue;
        gossip_swim_member m;
        if (gossip_swim_lookup(sw, id, &m) == GOSSIP_OK && m.addr[0])
            net_transport_set_addr(a->t, id, m.addr);
        agent_log_line l;
        agent_log_begin(&l, AGENT_LOG_INFO, "peer_joined");
        agent_log_hex64(&l, "peer", id);
        agent_log_str(&l, "addr", m.addr);
        agent_log_u64(&l, "epoch", v.epoch);
        agent_log_end(&l);
    }
    for (uint32_t k = 0; k < a->view_n; k++) {
        uint64_t id = a->view_ids[k];
        int still = 0;
        for (uint32_t i = 0; i < v.n && !still; i++)
            still = v.ids[i] == id;
        if (still)
            continue;
        net_transport_forget(a->t, id);
        gossip_swim_member m;
        const char *why = "gone";
        if (gossip_swim_lookup(sw, id, &m) == GOSSIP_OK)
            why = m.state == GOSSIP_MEMBER_LEFT ? "left" : "dead";
        agent_log_line l;
        agent_log_begin(&l, AGENT_LOG_INFO, "peer_left");
        agent_log_hex64(&l, "peer", id);
        agent_log_str(&l, "why", why);
        agent_log_u64(&l, "epoch", v.epoch);
        agent_log_end(&l);
    }
    uint32_t n = v.n <= a->cfg.max_peers + 1 ? v.n : a->cfg.max_peers + 1;
    memcpy(a->view_ids, v.ids, n * sizeof *v.ids);
    a->view_n = n;
    atomic_store(&a->live_n, v.n);
    agent_metric_set(a->ms.peers, v.n ? v.n - 1 : 0);
    agent_metric_set(a->ms.view_epoch, (double)v.epoch);
}

/* Quarantine the shards the trainer found damaged; report shards no live
 * member holds (a warn line each, the murmur_shards_missing gauge). */
static void shards_health(agent_runtime *a, gossip_shards *sh, uint64_t now)
{
    uint32_t bad[16], nb = 0;
    pthread_mutex_lock(&a->mu);
    while (a->n_bad_shards && nb < 16)
        bad[nb++] = a->bad_shards[--a->n_bad_shards];
    pthread_mutex_unlock(&a->mu);
    for (uint32_t k = 0; k < nb; k++)
        gossip_shards_quarantine(sh, bad[k], now);
    const gossip_shards_counters *c = gossip_shards_counters_get(sh);
    if (c->quarantined != a->quarantined_seen) {
        if (!a->shards_quarantined)
            agent_metrics_counter(a->reg, "murmur_shards_quarantined_total",
                                  "shards whose bytes did not match their id, set aside and "
                                  "fetched again",
                                  NULL, NULL, &a->shards_quarantined);
        agent_metric_add(a->shards_quarantined, c->quarantined - a->quarantined_seen);
        a->quarantined_seen = c->quarantined;
    }
    if (c->store_errors != a->store_errors_seen) {
        if (!a->store_errors)
            agent_metrics_counter(a->reg, "murmur_store_errors_total",
                                  "shard store operations that failed (disk full, I/O)", NULL, NULL,
                                  &a->store_errors);
        agent_metric_add(a->store_errors, c->store_errors - a->store_errors_seen);
        a->store_errors_seen = c->store_errors;
        int full = c->store_full != a->store_full_seen;
        a->store_full_seen = c->store_full;
        if (a->store_warn_us && now - a->store_warn_us < AGENT_STORE_WARN_US) {
            a->store_suppressed++;
        } else {
            a->store_warn_us = now;
            agent_log_line l;
            agent_log_begin(&l, AGENT_LOG_WARN, "shard_store_failed");
            agent_log_str(&l, "dir", a->cfg.shards_dir);
            agent_log_str(&l, "why",
                          full ? "no room left: fetching paused for 30 s (free space in the "
                                 "shards directory)"
                               : "a shard file could not be written or read");
            if (a->store_suppressed)
                agent_log_u64(&l, "suppressed", a->store_suppressed);
            agent_log_end(&l);
            a->store_suppressed = 0;
        }
    }
    uint32_t missing = 0;
    for (uint32_t s = 0; s < a->n_catalog; s++) {
        gossip_shard_status st;
        if (gossip_shards_status(sh, s, &st))
            continue;
        missing += (uint32_t)st.lost;
        if (st.lost == a->lost_seen[s])
            continue;
        a->lost_seen[s] = (uint8_t)st.lost;
        char hex[2 * GOSSIP_SHARD_ID_SIZE + 1];
        for (unsigned i = 0; i < GOSSIP_SHARD_ID_SIZE; i++)
            snprintf(hex + 2 * i, 3, "%02x", a->catalog[s][i]);
        agent_log_line l;
        agent_log_begin(&l, st.lost ? AGENT_LOG_WARN : AGENT_LOG_INFO,
                        st.lost ? "shard_lost" : "shard_found");
        agent_log_u64(&l, "shard", s);
        agent_log_str(&l, "id", hex);
        if (st.lost)
            agent_log_str(&l, "why",
                          "no live agent holds it; its samples are not trained until an agent "
                          "that has it joins (or its file is copied into a shards directory)");
        agent_log_end(&l);
    }
    a->missing_count = missing;
    if (!a->shards_missing)
        agent_metrics_gauge(a->reg, "murmur_shards_missing",
                            "shards assigned to this agent that no live agent holds", NULL, NULL,
                            &a->shards_missing);
    agent_metric_set(a->shards_missing, missing);
}

/* Publish the list of shards to train to the trainer when it changed: the
 * primaries held, or, while there are none, a fallback the core chooses
 * (gossip_shards_train: the replicas held, a guest shard), so the agent
 * trains and mixes instead of idling. */
static void on_shards(agent_runtime *a)
{
    gossip_shards *sh = gossip_node_shards(a->node);
    shards_health(a, sh, agent_mono_us());
    gossip_shards_train_info info;
    uint32_t np = gossip_shards_train(sh, a->primary_scratch, a->n_catalog, &info);
    if (np > a->n_catalog)
        np = a->n_catalog;
    uint32_t held = gossip_shards_held_count(sh);
    uint32_t held_primary = info.primary - info.pending;
    agent_metric_set(a->ms.shards_held, held);
    agent_metric_set(a->ms.shards_primary, held_primary);
    a->held_count = held;
    int source_changed = info.source != a->train.source || info.reason != a->train.reason;
    a->train = info;
    a->train_count = np;
    gossip_shards_full_info full;
    gossip_shards_full_get(sh, &full);
    pthread_mutex_lock(&a->mu);
    a->train_pub = info; /* for murmur_shards_get */
    a->idle_mix = full.full;
    int same = np == a->n_primary &&
               !memcmp(a->primary, a->primary_scratch, np * sizeof *a->primary_scratch);
    if (!same) {
        memcpy(a->primary, a->primary_scratch, np * sizeof *a->primary);
        a->n_primary = np;
        a->primary_gen++;
        pthread_cond_broadcast(&a->cv);
    }
    pthread_mutex_unlock(&a->mu);
    a->primary_count = held_primary;
    if (full.full != a->full.full || full.handed != a->full.handed || full.taken != a->full.taken) {
        agent_log_line l;
        agent_log_begin(&l, AGENT_LOG_INFO, "primaries_moved");
        agent_log_u64(&l, "store_full", (uint64_t)full.full);
        agent_log_u64(&l, "handed", full.handed);
        agent_log_u64(&l, "taken", full.taken);
        agent_log_str(&l, "why",
                      full.full ? "this agent's shards directory is full: the next holders train "
                                  "its primaries; it trains what it holds and keeps mixing"
                      : full.taken ? "training the primaries of an agent whose store is full"
                                   : "every store has room: primaries back to placement");
        agent_log_end(&l);
    }
    a->full = full;
    if (!same || source_changed) {
        agent_log_line l;
        agent_log_begin(&l, AGENT_LOG_INFO, "shards_assigned");
        agent_log_u64(&l, "primary", held_primary);
        agent_log_u64(&l, "held", held);
        agent_log_u64(&l, "pending", info.pending);
        agent_log_str(&l, "train", gossip_shards_train_source_name(info.source));
        agent_log_u64(&l, "train_shards", np);
        agent_log_str(&l, "reason", gossip_shards_train_reason_name(info.reason));
        agent_log_u64(&l, "epoch", atomic_load(&a->epoch));
        agent_log_end(&l);
    }
}

/* The clock (gossip/sched.h) of a model adopted at mixing round `round`:
 * every round follows interval_steps local steps of every live agent, so
 * one agent's samples (unit epochs), or the cluster's (cluster-epochs). */
static double adopted_clock(const agent_runtime *a, uint64_t round)
{
    uint32_t n = atomic_load(&a->live_n);
    if (a->cfg.schedule_unit != GOSSIP_SCHED_UNIT_CLUSTER_EPOCHS)
        n = 1; /* the clock counts one agent's samples */
    /* the interval of our own schedule now: the cadence makes it about
     * the same on every agent of one kind of host */
    return (double)round * gossip_sched_interval(a->sched) * a->cfg.batch * (n ? n : 1);
}

static void on_model_state(agent_runtime *a)
{
    gossip_node_model st = gossip_node_model_state(a->node);
    if (st == GOSSIP_NODE_JOINING || st == GOSSIP_NODE_READY)
        return;
    murmur_source source = MURMUR_SOURCE_OWN;
    uint64_t round = atomic_load(&a->round);
    pthread_mutex_lock(&a->mu);
    if (st == GOSSIP_NODE_FETCHED &&
        gossip_node_model_result(a->node, a->latest, &round) == GOSSIP_OK) {
        atomic_store(&a->round, round);
        if (gossip_sched_replace(a->sched, a->latest, (uint64_t)adopted_clock(a, round)) ==
            GOSSIP_OK)
            source = MURMUR_SOURCE_TRANSFER;
        else
            agent_log(AGENT_LOG_WARN, "model_refused", "why",
                      "the transferred model is not finite; training on the own model", NULL);
    }
    if (source == MURMUR_SOURCE_OWN && a->have_ckpt &&
        gossip_sched_replace(a->sched, a->init_params, 0) == GOSSIP_OK) {
        source = MURMUR_SOURCE_CHECKPOINT;
        memcpy(a->latest, a->init_params, a->dim * sizeof *a->latest);
    }
    /* The clock of the round this model stands for (a restart resumes its
     * schedule; a joiner takes the cluster's). */
    double c = adopted_clock(a, round);
    if (c > gossip_sched_clock_samples(a->sched))
        gossip_sched_resume(a->sched, a->host_steps, c);
    a->source = source;
    a->model_ready = 1;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
    gossip_node_model_adopt(a->node);
    static const char *const how[] = {"own", "checkpoint", "state_transfer"};
    agent_log_line l;
    agent_log_begin(&l, AGENT_LOG_INFO, "model_ready");
    agent_log_str(&l, "source", how[source]);
    agent_log_u64(&l, "round", round);
    agent_log_end(&l);
}

/* A finished round: statistics, then its result to the schedule (the
 * trainer applies it at its next step). */
static void mixing_finish(agent_runtime *a, int outcome)
{
    if (outcome == GOSSIP_OK) {
        a->mixing_rounds++;
        atomic_fetch_add(&a->round, 1);
        agent_metric_inc(a->ms.mixing_rounds);
        /* ||mixed - sent|| / ||sent|| estimated on every
         * AGENT_CONSENSUS_STRIDE-th value (a moving average of an estimate:
         * the full pass cost 1% of an agent's CPU at interval 16). */
        float d2 = 0, n2 = 0;
        for (uint32_t k = 0; k < a->dim; k += AGENT_CONSENSUS_STRIDE) {
            float d = a->mix_out[k] - a->mix_sent[k];
            d2 += d * d;
            n2 += a->mix_sent[k] * a->mix_sent[k];
        }
        double c = n2 > 0 ? sqrt((double)d2 / n2) : 0;
        a->consensus = a->consensus_init
                           ? (1 - AGENT_CONSENSUS_EWMA) * a->consensus + AGENT_CONSENSUS_EWMA * c
                           : c;
        a->consensus_init = 1;
        agent_metrics_std_round_end(&a->ms, agent_mono_us(), true, c);
    } else {
        a->round_aborts++;
        agent_metric_inc(a->ms.round_aborts);
        agent_metrics_std_round_end(&a->ms, agent_mono_us(), false, 0);
    }
    /* The result becomes the model served to joiners by swapping buffers
     * (a copy of the model per round less; both are read and written only
     * under a->mu or by this thread), then goes to the schedule by
     * reference (another copy less): latest stays unchanged until the
     * round after next ends (take writes the other buffer), and this
     * result is applied before the next round can start; the model
     * state's writes to latest happen before mixing ever starts. */
    pthread_mutex_lock(&a->mu);
    float *served = a->mix_out;
    a->mix_out = a->latest;
    a->latest = served;
    if (gossip_sched_deliver_ref(a->sched, a->latest, outcome) == GOSSIP_ENONFINITE)
        agent_log(AGENT_LOG_WARN, "mixing_refused", "why",
                  "the mixed model is not finite; the round is dropped", NULL);
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
    a->mix_sent = NULL;
}

static void on_mixing(agent_runtime *a, uint64_t now)
{
    gossip_mix *m = gossip_node_mix(a->node);
    if (a->mixing && gossip_mix_get_state(m) == GOSSIP_MIX_DONE) {
        int outcome = GOSSIP_EABORTED;
        if (gossip_mix_take(m, a->mix_out, &outcome) == GOSSIP_OK) {
            a->mixing = 0;
            mixing_finish(a, outcome);
        }
    }
    if (a->mixing || gossip_node_model_state(a->node) != GOSSIP_NODE_READY ||
        gossip_mix_get_state(m) != GOSSIP_MIX_IDLE)
        return;
    /* The outgoing vector stays unchanged until deliver (gossip/sched.h),
     * so the mixer may read it outside the lock. */
    /* latest (served to joiners, murmur_latest) stays the last mixed
     * model until this round ends. */
    pthread_mutex_lock(&a->mu);
    const float *x = gossip_sched_outgoing(a->sched);
    pthread_mutex_unlock(&a->mu);
    if (!x)
        return;
    a->mix_sent = x;
    if (gossip_mix_start(m, x, now) == GOSSIP_OK) {
        a->mixing = 1;
        a->rounds_begun++;
        agent_metrics_std_round_begin(&a->ms, now);
        return;
    }
    /* No round possible (alone in the view): the vector goes back as is;
     * not a round, so not counted as an abort. */
    pthread_mutex_lock(&a->mu);
    gossip_sched_deliver(a->sched, x, GOSSIP_EINVAL);
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
    a->mix_sent = NULL;
}

/* ---- the adaptive cadence (gossip/sched.h, "Cadence") ---- */

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts))
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The first two fields of /proc/self/task/TID/schedstat: ns the thread
 * ran on a CPU, and ns it waited on a run queue. 0, or -1 if unreadable. */
static int task_schedstat(const char *tid, uint64_t *run_ns, uint64_t *wait_ns)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%.20s/schedstat", tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    unsigned long long run = 0, wait = 0;
    int n = fscanf(f, "%llu %llu", &run, &wait);
    fclose(f);
    if (n != 2)
        return -1;
    *run_ns = run;
    *wait_ns = wait;
    return 0;
}

/* CPU time of NNG's threads (I/O, sealing and opening frames, timers),
 * the part of a round's cost outside the event loop: the run time of
 * every thread whose name begins with "nng". 0 where /proc is not there. */
static uint64_t nng_cpu_ns(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return 0;
    uint64_t sum = 0;
    struct dirent *e;
    char path[64], buf[64];
    while ((e = readdir(d))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof path, "/proc/self/task/%.20s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        int nng = fgets(buf, sizeof buf, f) && !strncmp(buf, "nng", 3);
        fclose(f);
        uint64_t run, wait;
        if (nng && !task_schedstat(e->d_name, &run, &wait))
            sum += run;
    }
    closedir(d);
    return sum;
}

/* Once per window (at least AGENT_CADENCE_EVERY_US and
 * AGENT_CADENCE_ROUNDS_MIN rounds): the CPU time the loop and NNG spent
 * per round, against the training time per step, to the schedule, which
 * sets the interval of the next rounds (gossip/sched.h, "Cadence").
 * Everything outside the training thread is charged to mixing (membership
 * and metrics cost far less than a round).
 * Per round: pairwise gossip also answers the pushes of others, which
 * cost about as much as its own exchange and come at the rate of the
 * others' rounds, so the CPU time is divided among the exchanges taken
 * part in (own rounds + pushes answered) and a round is charged two of
 * them, its own and, in a cluster of agents that all follow this rule,
 * one answered. (Charging all of it to the own rounds makes the rule
 * unstable: an agent with the longer interval answers more pushes per own
 * round, finds its rounds dearer and lengthens its interval further;
 * measured, two agents settled at 256 and 100 steps.) The other rules
 * take part in each round once.
 * The training time per step: the host thread's CPU time per step when
 * it wanted a CPU (ran or waited on a run queue) at least half the
 * window, a host whose steps compete with mixing for the cores; else
 * (a host that sleeps or waits on a device between steps) its wall time
 * per step, of which mixing on an idle core takes nothing. */
static void cadence_measure(agent_runtime *a, uint64_t now)
{
    if (!(a->cfg.cost_share > 0) || now < a->cad_until_us)
        return;
    a->cad_until_us = now + AGENT_CADENCE_EVERY_US;
    uint64_t rounds = a->rounds_begun;
    uint64_t answered = gossip_mix_get_stats(gossip_node_mix(a->node))->exchanges_answered;
    if (a->cad_tid && rounds - a->cad_rounds < AGENT_CADENCE_ROUNDS_MIN)
        return; /* the window goes on */
    pthread_mutex_lock(&a->mu);
    uint64_t steps = a->host_steps;
    int tid = a->host_tid;
    pthread_mutex_unlock(&a->mu);
    char tid_s[24];
    snprintf(tid_s, sizeof tid_s, "%d", tid);
    uint64_t run = 0, wait = 0;
    if (!tid || task_schedstat(tid_s, &run, &wait)) {
        a->cad_tid = 0; /* no host thread yet, or no /proc: nothing measured */
        return;
    }
    uint64_t cpu = thread_cpu_ns() + nng_cpu_ns();
    if (a->cad_tid == tid && steps > a->cad_steps && now > a->cad_t_us && cpu >= a->cad_cpu_ns &&
        run >= a->cad_run_ns && wait >= a->cad_wait_ns && answered >= a->cad_answered) {
        double wall_ns = (double)(now - a->cad_t_us) * 1000.0;
        double busy_ns = (double)(run - a->cad_run_ns) + (double)(wait - a->cad_wait_ns);
        double train_ns = busy_ns >= 0.5 * wall_ns ? (double)(run - a->cad_run_ns) : wall_ns;
        double taken = (double)(rounds - a->cad_rounds) + (double)(answered - a->cad_answered);
        double per_round = a->cfg.algorithm == GOSSIP_MIX_GOSSIP ? 2.0 : 1.0;
        pthread_mutex_lock(&a->mu);
        gossip_sched_note_cost(a->sched, (double)(cpu - a->cad_cpu_ns) / taken * per_round,
                               train_ns / (double)(steps - a->cad_steps));
        pthread_mutex_unlock(&a->mu);
    }
    a->cad_tid = tid;
    a->cad_t_us = now;
    a->cad_cpu_ns = cpu;
    a->cad_rounds = rounds;
    a->cad_answered = answered;
    a->cad_run_ns = run;
    a->cad_wait_ns = wait;
    a->cad_steps = steps;
}

/* host_ready: a->host_ready read under a->mu (the host sets it). */
static const char *state_name(agent_runtime *a, int host_ready)
{
    if (a->stop)
        return "leaving";
    if (gossip_node_model_state(a->node) != GOSSIP_NODE_READY || !host_ready)
        return "joining";
    if (a->n_catalog && a->train_count == 0)
        return "waiting_shards"; /* train_reason says what it waits for */
    return "training";           /* on what: train_source */
}

static void sync_metrics(agent_runtime *a)
{
    net_transport_stats ts;
    net_transport_stats_get(a->t, &ts);
    for (int r = 0; r < NET_REJECT_COUNT; r++) {
        uint64_t d = ts.rejects[r] - a->last_net[r];
        if (!d)
            continue;
        if (!a->rejections_net[r])
            agent_metrics_counter(a->reg, "murmur_rejections_total",
                                  "input rejected and dropped, by cause", "cause",
                                  net_reject_name(r), &a->rejections_net[r]);
        agent_metric_add(a->rejections_net[r], d);
        a->last_net[r] = ts.rejects[r];
    }
    const gossip_node_stats *ns = gossip_node_stats_get(a->node);
    for (int e = 1; e < GOSSIP_ERR_COUNT; e++) {
        uint64_t d = ns->rejected[e] - a->last_core[e];
        if (!d)
            continue;
        if (!a->rejections_core[e])
            agent_metrics_counter(a->reg, "murmur_rejections_total",
                                  "input rejected and dropped, by cause", "cause",
                                  agent_metrics_core_cause(e), &a->rejections_core[e]);
        agent_metric_add(a->rejections_core[e], d);
        a->last_core[e] = ns->rejected[e];
    }
    /* gossip's exchanges and the bounds' actions, in the order of
     * AGENT_METRICS_EXCHANGE_OUTCOMES then AGENT_METRICS_ROBUST_ACTIONS */
    const gossip_mix_stats *xs = gossip_mix_get_stats(gossip_node_mix(a->node));
    const uint64_t mix[7] = {xs->exchanges_held,      xs->exchanges_refused,
                             xs->exchanges_answered,  xs->exchanges_retried,
                             xs->exchanges_cancelled, xs->robust_clipped - xs->robust_dropped,
                             xs->robust_dropped};
    for (int k = 0; k < 7; k++) {
        if (mix[k] > a->last_mix[k])
            agent_metric_add(k < 5 ? a->ms.exchanges[k] : a->ms.robust[k - 5],
                             mix[k] - a->last_mix[k]);
        a->last_mix[k] = mix[k];
    }
    uint64_t now = agent_mono_us();
    agent_metric_set(a->ms.uptime_seconds, (double)(now - a->start_us) / 1e6);
    agent_metrics_server_members_from_swim(a->srv, gossip_node_swim(a->node));
    gossip_view v;
    gossip_node_view(a->node, &v);
    pthread_mutex_lock(&a->mu);
    uint64_t steps = a->host_steps, samples = a->host_samples;
    double loss = a->host_loss, acc = a->host_accuracy, test_loss = a->host_test_loss;
    int host_ready = a->host_ready;
    pthread_mutex_unlock(&a->mu);
    double sps = NAN;
    if (now > a->sps_t_us + 1000000u) {
        if (a->sps_t_us)
            sps = (double)(samples - a->sps_steps) / ((double)(now - a->sps_t_us) / 1e6);
        a->sps_t_us = now;
        a->sps_steps = samples;
    }
    agent_metric_set(a->ms.loss, loss);
    agent_metric_set(a->ms.accuracy, acc);
    if (!isnan(sps))
        agent_metric_set(a->ms.samples_per_second, sps);
    pthread_mutex_lock(&a->st_mu);
    a->st.step = steps;
    a->st.loss = loss;
    a->st.accuracy = acc;
    a->st.test_loss = test_loss;
    if (!isnan(sps))
        a->st.samples_per_second = sps;
    a->st.peers = v.n ? v.n - 1 : 0;
    a->st.view_epoch = v.epoch;
    a->st.shards_held = a->held_count;
    a->st.shards_primary = a->primary_count;
    a->st.shards_missing = a->missing_count;
    a->st.shards_pending = a->train.pending;
    a->st.train_shards = a->train_count;
    a->st.store_full = (uint32_t)a->full.full;
    a->st.shards_handed = a->full.handed;
    a->st.shards_taken = a->full.taken;
    snprintf(a->st.train_source, sizeof a->st.train_source, "%s",
             gossip_shards_train_source_name(a->train.source));
    snprintf(a->st.train_reason, sizeof a->st.train_reason, "%s",
             gossip_shards_train_reason_name(a->train.reason));
    snprintf(a->st.state, sizeof a->st.state, "%s", state_name(a, host_ready));
    a->st.round = atomic_load(&a->round);
    a->st.mixing_rounds = a->mixing_rounds;
    a->st.round_aborts = a->round_aborts;
    a->st.bytes_sent = a->bytes_sent;
    a->st.bytes_received = a->bytes_received;
    a->st.consensus_distance = a->consensus_init ? a->consensus : NAN;
    a->st.uptime_s = (double)(now - a->start_us) / 1e6;
    agent_faults_status(a->faults, &a->st);
    pthread_mutex_unlock(&a->st_mu);
    agent_faults_sync_metrics(a->faults);
}

static void status_fn(void *ctx, agent_status *out)
{
    agent_runtime *a = ctx;
    pthread_mutex_lock(&a->st_mu);
    *out = a->st;
    pthread_mutex_unlock(&a->st_mu);
}

static void log_progress(agent_runtime *a)
{
    agent_status s;
    status_fn(a, &s);
    agent_log_line l;
    agent_log_begin(&l, AGENT_LOG_INFO, "progress");
    agent_log_u64(&l, "step", s.step);
    agent_log_f64(&l, "loss", s.loss);
    agent_log_f64(&l, "accuracy", s.accuracy);
    agent_log_f64(&l, "test_loss", s.test_loss);
    agent_log_u64(&l, "peers", s.peers);
    agent_log_u64(&l, "epoch", s.view_epoch);
    agent_log_u64(&l, "round", s.round);
    agent_log_u64(&l, "mixing_rounds", s.mixing_rounds);
    agent_log_u64(&l, "round_aborts", s.round_aborts);
    agent_log_f64(&l, "consensus", s.consensus_distance);
    agent_log_u64(&l, "bytes_sent", s.bytes_sent);
    agent_log_u64(&l, "bytes_received", s.bytes_received);
    agent_log_u64(&l, "shards_primary", s.shards_primary);
    agent_log_u64(&l, "shards_held", s.shards_held);
    agent_log_u64(&l, "shards_missing", s.shards_missing);
    agent_log_f64(&l, "samples_per_s", s.samples_per_second);
    pthread_mutex_lock(&a->mu);
    uint32_t interval = gossip_sched_interval(a->sched);
    pthread_mutex_unlock(&a->mu);
    agent_log_u64(&l, "interval_steps", interval);
    agent_log_str(&l, "state", s.state);
    agent_log_str(&l, "train", s.train_source);
    agent_log_u64(&l, "train_shards", s.train_shards);
    agent_log_str(&l, "train_reason", s.train_reason);
    agent_log_u64(&l, "shards_pending", s.shards_pending);
    agent_log_u64(&l, "store_full", s.store_full);
    agent_log_u64(&l, "shards_handed", s.shards_handed);
    agent_log_u64(&l, "shards_taken", s.shards_taken);
    agent_log_end(&l);
}

/* ---- admission: refused peers, duplicate keys, our own refusal ---- */

/* Lines about refused peers: at most one per cause per 10 s (the peer
 * retries until it gives up; the counters count every refusal). */
#define AGENT_CONFLICT_LOG_US 10000000u

static const char *refusal_cause(int kind)
{
    return kind == GOSSIP_SWIM_REFUSED_MANIFEST ? "manifest" : "duplicate_id";
}

static void refusal_count(agent_runtime *a, int kind, uint64_t total)
{
    if (total == a->refusals_seen[kind])
        return;
    if (!a->refusals[kind])
        agent_metrics_counter(a->reg, "murmur_refusals_total",
                              "peers refused at admission (another manifest, a duplicate key)",
                              "cause", refusal_cause(kind), &a->refusals[kind]);
    agent_metric_add(a->refusals[kind], total - a->refusals_seen[kind]);
    a->refusals_seen[kind] = total;
}

static void on_admission(agent_runtime *a, uint64_t now)
{
    gossip_swim *sw = gossip_node_swim(a->node);
    const gossip_swim_stats *ss = gossip_swim_stats_get(sw);
    refusal_count(a, GOSSIP_SWIM_REFUSED_MANIFEST, ss->refused_manifest);
    refusal_count(a, GOSSIP_SWIM_REFUSED_DUPLICATE, ss->duplicates);
    const gossip_swim_conflict *c = gossip_swim_conflict_get(sw);
    if (c->seq == a->conflict_seen)
        return;
    a->conflict_seen = c->seq;
    int k = c->kind == GOSSIP_SWIM_REFUSED_MANIFEST ? 1 : 2;
    char why[GOSSIP_MANIFEST_DIFF_MAX + 160] = "";
    if (c->kind == GOSSIP_SWIM_REFUSED_MANIFEST) {
        gossip_manifest here;
        agent_runtime_manifest(a, &here);
        gossip_manifest_diff(&here, &c->theirs, why, sizeof why);
    }
    agent_log_line l;
    if (c->fatal) {
        a->refused = 1;
        a->stop = 1;
        agent_log_begin(&l, AGENT_LOG_ERROR, "refused");
        agent_log_str(&l, "cause", refusal_cause(c->kind));
        if (c->kind == GOSSIP_SWIM_REFUSED_MANIFEST) {
            agent_log_hex64(&l, "peer", c->peer);
            size_t n = strlen(why);
            snprintf(why + n, sizeof why - n,
                     ": the cluster runs another configuration; this agent cannot join it "
                     "(fix its model, data or mixing settings)");
        } else {
            agent_log_str(&l, "addr", c->addr);
            snprintf(why, sizeof why,
                     "another live agent uses this agent's key (node %016llx) at %s; give each "
                     "agent its own key (murmur keygen)",
                     (unsigned long long)a->id.node_id, c->addr);
        }
        agent_log_str(&l, "why", why);
        agent_log_end(&l);
        return;
    }
    if (a->conflict_log_us[k] && now - a->conflict_log_us[k] < AGENT_CONFLICT_LOG_US) {
        a->conflict_suppressed[k]++;
        return;
    }
    a->conflict_log_us[k] = now;
    if (c->kind == GOSSIP_SWIM_REFUSED_MANIFEST) {
        agent_log_begin(&l, AGENT_LOG_ERROR, "peer_refused");
        agent_log_hex64(&l, "peer", c->peer);
        agent_log_str(&l, "cause", "manifest");
        agent_log_str(&l, "why", why);
    } else {
        agent_log_begin(&l, AGENT_LOG_ERROR, "duplicate_identity");
        agent_log_str(&l, "addr", c->addr);
        agent_log_str(&l, "why",
                      "another agent started with this agent's key; it is refused and this "
                      "one stays (give each agent its own key)");
    }
    if (a->conflict_suppressed[k])
        agent_log_u64(&l, "suppressed", a->conflict_suppressed[k]);
    a->conflict_suppressed[k] = 0;
    agent_log_end(&l);
}

/* One pass: inbox, timers, model state, mixing, sends. */
/* The job's own ends ([run]): the first condition met stops the agent as
 * SIGTERM does (leave, final checkpoint) with its exit status. Any thread:
 * the host's (steps, accuracy) or the loop's (time). */
void agent_runtime_job_end(agent_runtime *a, const char *reason, int code)
{
    pthread_mutex_lock(&a->mu);
    int first = !a->job_end && !a->stop;
    if (first) {
        a->job_end = reason;
        a->exit_code = code;
    }
    uint64_t steps = a->host_steps;
    double acc = a->host_accuracy;
    pthread_mutex_unlock(&a->mu);
    if (!first)
        return;
    agent_log_line l;
    agent_log_begin(&l, AGENT_LOG_INFO, "job_end");
    agent_log_str(&l, "reason", reason);
    agent_log_u64(&l, "step", steps);
    agent_log_f64(&l, "accuracy", acc);
    agent_log_end(&l);
    a->stop = 1;
    net_transport_wake(a->t);
}

static void check_job_end(agent_runtime *a, uint64_t now)
{
    const agent_config *c = &a->cfg;
    if (c->run_max_seconds > 0 && (double)(now - a->start_us) >= c->run_max_seconds * 1e6)
        agent_runtime_job_end(a, "max_seconds", AGENT_EXIT_MAX_SECONDS);
    /* run.target_accuracy is cluster-wide: a member that reached it told
     * us (JOB_END, gossip/node.h); the node has queued the relays, which go
     * out with our LEAVE. Only a job with a target of its own obeys (a
     * stray announcement never ends an agent configured without one). */
    gossip_node_job_end_info info;
    if (!a->job_end && c->run_target_accuracy > 0 && gossip_node_job_end(a->node, &info) &&
        info.from) {
        agent_log_line l;
        agent_log_begin(&l, AGENT_LOG_INFO, "job_end_heard");
        agent_log_hex64(&l, "origin", info.origin);
        agent_log_hex64(&l, "from", info.from);
        agent_log_f64(&l, "origin_accuracy", info.accuracy);
        agent_log_u64(&l, "origin_step", info.step);
        agent_log_end(&l);
        agent_runtime_job_end(a, "target_accuracy", AGENT_EXIT_TARGET_ACCURACY);
    }
}

static void loop_pass(agent_runtime *a)
{
    uint64_t now = agent_mono_us(), start = now;
    net_message msg;
    loop_mark(a, "recv");
    for (uint32_t k = 0; k < AGENT_RECV_BATCH && now - start < AGENT_PASS_BUDGET_US &&
                         net_transport_recv(a->t, &msg) == NET_OK;
         k++) {
        loop_mark(a, "frame");
        if (agent_fault_ctl_is(msg.data, msg.len)) { /* murmur fault (agent/chaos.h) */
            agent_faults_on_frame(a->faults, a, msg.from, msg.data, msg.len);
            net_message_release(&msg);
            continue;
        }
        int rc = gossip_node_recv_frame(a->node, msg.from, msg.data, msg.len, now);
        if (rc == GOSSIP_OK) {
            a->bytes_received += msg.len;
            agent_metrics_std_message(&a->ms, false, msg.len > 3 ? msg.data[3] : 0, msg.len);
        }
        net_message_release(&msg);
        loop_mark(a, "flush");
        flush_sends(a, now);
        now = agent_mono_us(); /* the next frame's time, and the budget's */
    }
    loop_mark(a, "tick");
    if (gossip_node_deadline(a->node) <= now)
        gossip_node_tick(a->node, now);
    loop_mark(a, "view");
    on_view(a);
    on_model_state(a);
    loop_mark(a, "mixing");
    on_mixing(a, now);
    flush_sends(a, now);
    on_mixing(a, now); /* a round may have completed by draining its frames */
    flush_sends(a, now);
    loop_mark(a, "status");
    gossip_shards *sh = gossip_node_shards(a->node);
    const gossip_shards_counters *sc = sh ? gossip_shards_counters_get(sh) : NULL;
    uint64_t moved = sc ? sc->fetched + sc->dropped : 0;
    /* A new view moves primaries at once: the trainer loads its share as
     * soon as it changes (a joiner's first view is the seed's table; the
     * 250 ms status tick alone made it load every shard first). */
    uint64_t epoch = atomic_load(&a->epoch);
    if (now >= a->next_status_us || moved != a->shards_fetched_seen ||
        epoch != a->shards_epoch_seen) {
        a->shards_fetched_seen = moved;
        a->shards_epoch_seen = epoch;
        if (sh)
            on_shards(a);
        sync_metrics(a);
        a->next_status_us = now + AGENT_STATUS_EVERY_US;
    }
    on_admission(a, now);
    loop_mark(a, "cadence");
    cadence_measure(a, now);
    loop_mark(a, "progress");
    if (now >= a->next_progress_us) {
        /* the line reports now, not the last status tick (up to 250 ms
         * old: a line every 100 ms repeated one step count 2-3 times, and
         * an accuracy reached was reported that much later) */
        sync_metrics(a);
        log_progress(a);
        a->next_progress_us = now + (uint64_t)a->cfg.progress_interval_ms * 1000u;
    }
    check_job_end(a, now);
}

static int loop_wait_ms(agent_runtime *a)
{
    uint64_t now = agent_mono_us();
    gossip_time_us d = gossip_node_deadline(a->node);
    int ms = AGENT_LOOP_WAIT_MAX_MS;
    if (d <= now)
        return 0;
    if (d - now < (uint64_t)ms * 1000u)
        ms = (int)((d - now + 999) / 1000);
    return ms;
}

static void reload_keys(agent_runtime *a);
static void agent_runtime_destroy(agent_runtime *a);

static void *loop_main(void *arg)
{
    agent_runtime *a = arg;
    /* Named so that top -H, perf and make calibrate (which reads its
     * scheduler statistics) can tell it from the trainer and BLAS threads. */
    prctl(PR_SET_NAME, "murmur-loop", 0, 0, 0);
    atomic_store(&a->loop_tid, (int)syscall(SYS_gettid));
    uint64_t now = agent_mono_us();
    if (a->cfg.seed_count) {
        const char *seeds[AGENT_CONFIG_SEEDS_MAX];
        size_t n = a->cfg.seed_count;
        if (n > GOSSIP_SWIM_SEEDS_MAX)
            n = GOSSIP_SWIM_SEEDS_MAX;
        for (size_t i = 0; i < n; i++)
            seeds[i] = a->cfg.seeds[i];
        gossip_node_join(a->node, seeds, n, now);
    }
    gossip_node_tick(a->node, now);
    flush_sends(a, now);
    while (!a->stop) {
        if (a->reload) {
            a->reload = 0;
            reload_keys(a);
        }
        loop_pass(a);
        loop_mark(a, "wait");
        net_transport_wait(a->t, loop_wait_ms(a));
    }
    pthread_mutex_lock(&a->mu);
    pthread_cond_broadcast(&a->cv); /* a host waiting in murmur_wait_ready */
    pthread_mutex_unlock(&a->mu);
    if (a->refused) {
        /* No LEAVE (our id may be a live incumbent's); close writes no
         * checkpoint (this configuration was refused: keep whatever is on
         * disk) and returns 1. */
        a->exit_code = 1;
        return NULL;
    }
    /* This agent reached run.target_accuracy: tell every member (the
     * frames go out with the LEAVE below). */
    if (a->job_end && !strcmp(a->job_end, "target_accuracy")) {
        pthread_mutex_lock(&a->mu);
        uint64_t steps = a->host_steps;
        double acc = a->host_accuracy;
        pthread_mutex_unlock(&a->mu);
        if (gossip_node_announce_end(a->node, GOSSIP_NODE_JOB_END_REASON_TARGET, steps, (float)acc,
                                     agent_mono_us()) == GOSSIP_OK)
            agent_log(AGENT_LOG_INFO, "job_end_announced", "reason", "target_accuracy", NULL);
    }
    /* graceful leave */
    agent_log(AGENT_LOG_INFO, "leaving", NULL);
    now = agent_mono_us();
    gossip_node_leave(a->node, now);
    flush_sends(a, now);
    uint64_t until = now + AGENT_LEAVE_FLUSH_MS * 1000u;
    while ((now = agent_mono_us()) < until) {
        net_message msg;
        while (net_transport_recv(a->t, &msg) == NET_OK)
            net_message_release(&msg);
        gossip_node_tick(a->node, now);
        flush_sends(a, now);
        net_transport_wait(a->t, 20);
    }
    return NULL;
}

int agent_runtime_start(agent_runtime *a, char *err, size_t errlen)
{
    if (pthread_create(&a->loop_thread, NULL, loop_main, a)) {
        agent_errf(err, errlen, "cannot start the event-loop thread");
        return -1;
    }
    a->loop_started = 1;
    return 0;
}

int agent_runtime_checkpoint(agent_runtime *a, const float *params, const float *momentum,
                             const char *why)
{
    pthread_mutex_lock(&a->mu);
    uint64_t step = a->host_steps;
    pthread_mutex_unlock(&a->mu);
    agent_checkpoint ck = {.spec = a->cfg.model_spec,
                           .dim = a->dim,
                           .step = step,
                           .round = atomic_load(&a->round),
                           .epoch = atomic_load(&a->epoch),
                           .params = params,
                           .momentum = momentum};
    char err[256] = "";
    if (agent_checkpoint_save(a->cfg.checkpoint_path, &ck, err, sizeof err)) {
        agent_metric_inc(a->ms.checkpoint_failures);
        uint64_t now = agent_mono_us();
        if (!a->ckpt_fail_logged_us || now - a->ckpt_fail_logged_us >= AGENT_CKPT_WARN_EVERY_US) {
            a->ckpt_fail_logged_us = now;
            agent_log(AGENT_LOG_WARN, "checkpoint_failed", "why", err, "note",
                      "counted in murmur_checkpoint_failures_total; the previous checkpoint is "
                      "kept; next warning in 60 s at the earliest",
                      NULL);
        }
        return -1;
    }
    agent_metric_inc(a->ms.checkpoints);
    agent_log_line l;
    agent_log_begin(&l, AGENT_LOG_INFO, "checkpoint_written");
    agent_log_str(&l, "path", a->cfg.checkpoint_path);
    agent_log_u64(&l, "step", step);
    agent_log_u64(&l, "round", ck.round);
    agent_log_str(&l, "reason", why);
    agent_log_end(&l);
    return 0;
}

int agent_runtime_close(agent_runtime *a, float *params, const float *momentum)
{
    a->stop = 1;
    if (a->loop_started) {
        net_transport_wake(a->t);
        pthread_join(a->loop_thread, NULL);
        a->loop_started = 0;
    }
    if (a->refused) {
        agent_log(AGENT_LOG_INFO, "agent_stopped", "why", "refused", NULL);
        int code = a->exit_code;
        agent_runtime_destroy(a);
        return code;
    }
    /* Passive gossip changes not yet handed back belong to the model. */
    if (params && gossip_mix_pending(gossip_node_mix(a->node), a->mix_out) == GOSSIP_OK)
        for (uint32_t k = 0; k < a->dim; k++)
            params[k] += a->mix_out[k];
    /* the final model: always at a job end, else as checkpoints go */
    int saved =
        params && a->host_steps && (a->cfg.checkpoint_every_steps || a->job_end) &&
        agent_runtime_checkpoint(a, params, momentum, a->job_end ? a->job_end : "shutdown") == 0;
    sync_metrics(a);
    log_progress(a);
    agent_status st;
    status_fn(a, &st);
    agent_log_line l;
    agent_log_begin(&l, AGENT_LOG_INFO, "final_report");
    agent_log_str(&l, "reason", a->job_end ? a->job_end : "stopped");
    agent_log_u64(&l, "exit_status", (uint64_t)a->exit_code);
    agent_log_u64(&l, "step", st.step);
    agent_log_f64(&l, "accuracy", st.accuracy);
    agent_log_f64(&l, "test_loss", st.test_loss);
    agent_log_f64(&l, "loss", st.loss);
    agent_log_f64(&l, "seconds", (double)(agent_mono_us() - a->start_us) / 1e6);
    agent_log_u64(&l, "mixing_rounds", st.mixing_rounds);
    agent_log_u64(&l, "bytes_sent", st.bytes_sent);
    agent_log_u64(&l, "bytes_received", st.bytes_received);
    agent_log_str(&l, "model", saved ? a->cfg.checkpoint_path : "not saved");
    agent_log_end(&l);
    agent_log_begin(&l, AGENT_LOG_INFO, "agent_stopped");
    agent_log_u64(&l, "step", a->host_steps);
    agent_log_end(&l);
    int code = a->exit_code;
    agent_runtime_destroy(a);
    return code;
}

const agent_config *agent_runtime_config(const agent_runtime *a)
{
    return &a->cfg;
}

void agent_runtime_reload(agent_runtime *a)
{
    a->reload = 1;
}

/* SIGHUP: re-read the network key ring, then the allow-list. A file that
 * cannot be used leaves what is in force (an unreadable file must not open
 * the door, and a typo must not shut the cluster out); an empty allow-list
 * admits nobody. */
static void reload_ring(agent_runtime *a)
{
    char msg[512] = "";
    uint8_t ring[NET_CHANNEL_KEYS_MAX * NET_NETWORK_KEY_SIZE];
    size_t n = 0;
    int rc = agent_keys_read_network_ring(a->cfg.network_key_file, ring, NET_CHANNEL_KEYS_MAX, &n,
                                          msg, sizeof msg);
    if (!rc && (rc = net_transport_set_network_keys(a->t, ring, n)) != NET_OK)
        snprintf(msg, sizeof msg, "%s", net_strerror(rc));
    if (rc) {
        agent_log(AGENT_LOG_ERROR, "reload_failed", "why", msg, "kept", "the network keys in force",
                  NULL);
    } else if (n != a->n_network_keys ||
               sodium_memcmp(ring, a->network_keys, n * NET_NETWORK_KEY_SIZE) != 0) {
        memcpy(a->network_keys, ring, n * NET_NETWORK_KEY_SIZE);
        a->n_network_keys = n;
        agent_log_line l;
        agent_log_begin(&l, AGENT_LOG_INFO, "network_keys_reloaded");
        agent_log_u64(&l, "keys", n);
        agent_log_end(&l);
    }
    sodium_memzero(ring, sizeof ring);
}

static void reload_keys(agent_runtime *a)
{
    reload_ring(a);
    if (!a->cfg.allow_list_file[0] || !a->allow)
        return;
    char msg[512] = "";
    size_t n = 0;
    uint8_t *keys = malloc((size_t)NET_CHANNEL_ALLOW_MAX * NET_PUBLIC_KEY_SIZE);
    if (!keys || agent_keys_read_allow(a->cfg.allow_list_file, keys, NET_CHANNEL_ALLOW_MAX, &n, msg,
                                       sizeof msg)) {
        agent_log(AGENT_LOG_ERROR, "reload_failed", "why", keys ? msg : "out of memory", "kept",
                  "the allow-list in force", NULL);
        free(keys);
        return;
    }
    int rc = net_transport_set_allow(a->t, keys, n);
    if (rc) {
        agent_log(AGENT_LOG_ERROR, "reload_failed", "why", net_strerror(rc), NULL);
        free(keys);
        return;
    }
    free(a->allow);
    a->allow = keys;
    a->allow_n = n;
    agent_log_line l;
    agent_log_begin(&l, n ? AGENT_LOG_INFO : AGENT_LOG_WARN, "allow_list_reloaded");
    agent_log_u64(&l, "keys", n);
    if (!n)
        agent_log_str(&l, "note", "no key listed: every peer is refused");
    agent_log_end(&l);
}

/* ---- create / destroy ---- */

static void agent_runtime_destroy(agent_runtime *a)
{
    if (!a)
        return;
    if (a->loop_started) {
        a->stop = 1;
        net_transport_wake(a->t);
        pthread_join(a->loop_thread, NULL);
    }
    agent_metrics_server_stop(a->srv);
    net_transport_destroy(a->t);
    agent_faults_destroy(a->faults);
    gossip_node_destroy(a->node);
    if (a->store.ctx)
        agent_store_file_close(&a->store);
    agent_metrics_destroy(a->reg);
    free(a->catalog);
    free(a->allow);
    free(a->latest);
    free(a->mix_out);
    gossip_sched_destroy(a->sched);
    free(a->primary);
    free(a->bad_shards);
    free(a->lost_seen);
    free(a->primary_scratch);
    free(a->view_ids);
    free(a->init_params);
    free(a->init_momentum);
    net_identity_wipe(&a->id);
    sodium_memzero(a->network_keys, sizeof a->network_keys);
    pthread_mutex_destroy(&a->mu);
    pthread_cond_destroy(&a->cv);
    pthread_mutex_destroy(&a->st_mu);
    free(a);
}

/* The model side of the runtime: buffers for dim values, the schedule, and
 * the checkpoint (kept to be handed to the host when the node adopts it). */
static int setup_state(agent_runtime *a, uint32_t dim, char *err, size_t errlen)
{
    if (!dim || dim > GOSSIP_CODEC_DIM_MAX) {
        agent_errf(err, errlen, "a model of %u parameters: mixing carries 1 to %u", dim,
                   GOSSIP_CODEC_DIM_MAX);
        return -1;
    }
    a->dim = dim;
    size_t bytes = (size_t)dim * sizeof(float);
    a->latest = calloc(dim, sizeof(float));
    a->mix_out = malloc(bytes);
    a->init_params = malloc(bytes);
    a->init_momentum = malloc(bytes);
    if (!a->latest || !a->mix_out || !a->init_params || !a->init_momentum) {
        agent_errf(err, errlen, "out of memory for %u parameters", dim);
        return -1;
    }
    gossip_sched_config gc;
    agent_config_sched(&a->cfg, &gc);
    gc.dim = a->dim;
    gc.dataset_samples = a->catalog_samples;
    const char *why = NULL;
    if (gossip_sched_config_check(&gc, &why)) {
        agent_errf(err, errlen, "model.schedule: %s%s", why,
                   gc.unit == GOSSIP_SCHED_UNIT_EPOCHS && !gc.dataset_samples
                       ? " (a schedule in epochs needs the data set's size: give the agent a "
                         "shard catalog written by 'murmur shard', or set "
                         "model.schedule_unit = steps)"
                       : "");
        return -1;
    }
    a->env = (gossip_env){.alloc = env_alloc,
                          .free = env_free,
                          .random = model_rng_callback,
                          .random_ctx = &a->env_rng};
    if (gossip_sched_create(&a->sched, &a->env, &gc)) {
        agent_errf(err, errlen, "out of memory for the training schedule");
        return -1;
    }
    /* checkpoint */
    unsigned stale = 0;
    agent_checkpoint_remove_stale(a->cfg.checkpoint_path, &stale);
    agent_checkpoint_meta meta;
    char cerr[256] = "";
    memset(a->init_momentum, 0, bytes);
    int rc = agent_checkpoint_load(a->cfg.checkpoint_path, a->cfg.model_spec, a->dim, &meta,
                                   a->init_params, a->init_momentum, cerr, sizeof cerr);
    if (rc == AGENT_CHECKPOINT_OK) {
        a->have_ckpt = 1;
        a->ckpt_step = meta.step;
        a->ckpt_round = meta.round;
        a->host_steps = meta.step;
        gossip_sched_resume(a->sched, meta.step, 0);
        atomic_store(&a->round, meta.round);
        agent_log_line l;
        agent_log_begin(&l, AGENT_LOG_INFO, "checkpoint_loaded");
        agent_log_str(&l, "path", a->cfg.checkpoint_path);
        agent_log_u64(&l, "step", meta.step);
        agent_log_u64(&l, "round", meta.round);
        agent_log_end(&l);
    } else if (rc != AGENT_CHECKPOINT_ENOENT) {
        /* The model comes from the network or from scratch; the file may
         * still be wanted (another model, a typo in --model): move it
         * aside so the next save cannot overwrite it, or refuse to start. */
        char moved[AGENT_CHECKPOINT_PATH_MAX + AGENT_CHECKPOINT_ASIDE_SUFFIX_MAX];
        char merr[AGENT_CHECKPOINT_PATH_MAX * 2 + 64] = "";
        int mrc = agent_checkpoint_move_aside(a->cfg.checkpoint_path, (int64_t)time(NULL), moved,
                                              sizeof moved, merr, sizeof merr);
        if (mrc && mrc != AGENT_CHECKPOINT_ENOENT) {
            agent_errf(err, errlen,
                       "checkpoint %s is unusable (%s) and cannot be moved aside (%s); move or "
                       "remove it yourself, this agent would overwrite it",
                       a->cfg.checkpoint_path, cerr[0] ? cerr : agent_checkpoint_strerror(rc),
                       merr);
            return -1;
        }
        agent_log(AGENT_LOG_WARN, "checkpoint_unusable", "path", a->cfg.checkpoint_path, "why",
                  cerr[0] ? cerr : agent_checkpoint_strerror(rc), "moved_to", mrc ? "" : moved,
                  NULL);
    }
    return 0;
}

void agent_runtime_manifest(const agent_runtime *a, gossip_manifest *m)
{
    memset(m, 0, sizeof *m);
    m->protocol = GOSSIP_MANIFEST_PROTOCOL;
    snprintf(m->spec, sizeof m->spec, "%s", a->cfg.model_spec);
    m->params = a->dim;
    m->init_seed = a->cfg.init_seed;
    m->algo = (uint8_t)a->cfg.algorithm;
    m->bits = (uint8_t)a->cfg.bits;
    m->block = a->cfg.block;
}

static int setup_node(agent_runtime *a, char *err, size_t errlen)
{
    model_rng_seed(&a->env_rng, a->id.node_id ^ agent_mono_us(), 7);
    a->env = (gossip_env){.alloc = env_alloc,
                          .free = env_free,
                          .random = model_rng_callback,
                          .random_ctx = &a->env_rng};
    gossip_node_config nc;
    gossip_node_config_default(&nc);
    nc.self = a->id.node_id;
    nc.self_addr = a->addr;
    nc.swim.members_max =
        a->cfg.max_peers + 1 < GOSSIP_MEMBERS_MAX ? a->cfg.max_peers + 1 : GOSSIP_MEMBERS_MAX;
    nc.swim.probe_interval_us = (gossip_time_us)a->cfg.probe_interval_ms * 1000u;
    nc.swim.probe_timeout_us = (gossip_time_us)a->cfg.probe_timeout_ms * 1000u;
    nc.swim.indirect_k = a->cfg.indirect_k;
    nc.swim.suspicion_mult = a->cfg.suspicion_mult;
    nc.mix.dim = a->dim;
    nc.mix.algo = a->cfg.algorithm;
    nc.mix.algos = 1u << nc.mix.algo;
    nc.mix.topology = a->cfg.topology;
    nc.mix.bits = a->cfg.bits;
    nc.mix.block = a->cfg.block;
    nc.mix.members_max = nc.swim.members_max;
    nc.mix.step_timeout_us = (gossip_time_us)a->cfg.allreduce_step_deadline_ms * 1000u;
    nc.mix.robust = (gossip_robust_config){.rule = a->cfg.robust,
                                           .clip_factor = a->cfg.robust_clip_factor,
                                           .trim = a->cfg.robust_trim};
    if (!gossip_mix_combination_valid(nc.mix.algo, nc.mix.topology)) {
        agent_errf(err, errlen,
                   "mixing.algorithm %s cannot run on mixing.topology %s (dpsgd needs a graph "
                   "topology, choco ring, torus or exponential)",
                   gossip_mix_algo_name(a->cfg.algorithm), gossip_topology_name(a->cfg.topology));
        return -1;
    }
    gossip_manifest man;
    agent_runtime_manifest(a, &man);
    nc.swim.manifest = &man;
    nc.xfer.snapshot = snapshot_fn;
    nc.xfer.snapshot_ctx = a;
    nc.shards.ids = (const uint8_t(*)[GOSSIP_SHARD_ID_SIZE])a->catalog;
    nc.shards.n_shards = a->n_catalog;
    nc.shards.placement.r =
        a->cfg.replication < GOSSIP_PLACEMENT_R_MAX ? a->cfg.replication : GOSSIP_PLACEMENT_R_MAX;
    nc.shards.store = a->store;
    gossip_shards_config_model_files(&nc.shards);
    nc.fetch_model = a->cfg.seed_count > 0;
    nc.has_checkpoint = a->have_ckpt;
    nc.ckpt_round = a->ckpt_round;
    int rc = gossip_node_create(&a->node, &a->env, &nc);
    if (rc) {
        agent_errf(err, errlen, "cannot create the protocol core: %s", gossip_strerror(rc));
        return -1;
    }
    return 0;
}

int agent_runtime_create(agent_runtime **out, const agent_config *cfg, uint32_t dim, unsigned flags,
                         char *err, size_t errlen)
{
    *out = NULL;
    agent_runtime *a = calloc(1, sizeof *a);
    if (!a) {
        agent_errf(err, errlen, "out of memory");
        return MURMUR_ENOMEM;
    }
    a->cfg = *cfg;
    a->start_us = agent_mono_us();
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv, NULL);
    pthread_mutex_init(&a->st_mu, NULL);
    a->st.loss = a->st.accuracy = a->st.test_loss = a->st.consensus_distance = NAN;
    a->host_loss = a->host_test_loss = a->host_accuracy = NAN;
    char msg[512] = "";
    openblas_set_num_threads(1);
    if (net_init()) {
        agent_errf(err, errlen, "libsodium cannot be initialised");
        goto fail;
    }
    if (agent_keys_read_identity(cfg->key_file, &a->id, msg, sizeof msg)) {
        agent_errf(err, errlen, "%s (create keys with: murmur keygen --out %s)", msg,
                   cfg->data_dir);
        goto fail;
    }
    if (agent_keys_read_network_ring(cfg->network_key_file, a->network_keys, NET_CHANNEL_KEYS_MAX,
                                     &a->n_network_keys, msg, sizeof msg)) {
        agent_errf(err, errlen, "%s (every agent of a cluster needs the same network key)", msg);
        goto fail;
    }
    if (cfg->allow_list_file[0]) {
        a->allow = malloc((size_t)NET_CHANNEL_ALLOW_MAX * NET_PUBLIC_KEY_SIZE);
        if (!a->allow ||
            agent_keys_read_allow(cfg->allow_list_file, a->allow, NET_CHANNEL_ALLOW_MAX,
                                  &a->allow_n, msg, sizeof msg)) {
            agent_errf(err, errlen, "%s", a->allow ? msg : "out of memory");
            goto fail;
        }
        if (!a->allow_n)
            agent_log(AGENT_LOG_WARN, "allow_list_empty", "file", cfg->allow_list_file, "note",
                      "no key listed: every peer is refused", NULL);
    }
    char catalog[AGENT_CONFIG_PATH_MAX + 16];
    snprintf(catalog, sizeof catalog, "%s/catalog", cfg->shards_dir);
    if ((flags & AGENT_OPEN_CATALOG_OPTIONAL) && access(catalog, F_OK)) {
        agent_log(AGENT_LOG_INFO, "no_catalog", "path", catalog, "note",
                  "no shard catalog: this agent mixes models but replicates no data", NULL);
    } else if (agent_catalog_load(a, err, errlen)) {
        goto fail;
    }
    if (a->n_catalog) {
        char serr[512] = "";
        if (agent_store_file_open(&a->store, cfg->shards_dir, AGENT_SHARD_BYTES_MAX, serr,
                                  sizeof serr)) {
            agent_errf(err, errlen, "%s", serr);
            goto fail;
        }
        agent_shards_import(a);
    }
    a->primary = calloc(a->n_catalog + 1u, sizeof *a->primary);
    a->bad_shards = calloc(a->n_catalog + 1u, sizeof *a->bad_shards);
    a->lost_seen = calloc(a->n_catalog + 1u, 1);
    a->primary_scratch = calloc(a->n_catalog + 1u, sizeof *a->primary_scratch);
    a->view_ids = calloc((size_t)cfg->max_peers + 1, sizeof *a->view_ids);
    if (!a->primary || !a->primary_scratch || !a->view_ids || !a->bad_shards || !a->lost_seen) {
        agent_errf(err, errlen, "out of memory");
        goto fail;
    }
    if (setup_state(a, dim, err, errlen))
        goto fail;
    /* metrics */
    if (agent_metrics_create(&a->reg) || agent_metrics_std_register(a->reg, &a->ms)) {
        agent_errf(err, errlen, "cannot set up the metrics registry");
        goto fail;
    }
    /* transport */
    net_transport_config tc = {.self = &a->id,
                               .network_keys = a->network_keys,
                               .network_keys_n = a->n_network_keys,
                               .auth_only = cfg->encryption == AGENT_AUTH_ONLY,
                               .allow = a->allow,
                               .allow_n = a->allow_n,
                               .conns_max = cfg->max_peers < NET_TRANSPORT_CONNS_MAX
                                                ? cfg->max_peers
                                                : NET_TRANSPORT_CONNS_MAX,
                               .queue_frames_max = cfg->send_queue_len,
                               .inbox_frames_max = cfg->recv_queue_len};
    int rc = net_transport_create(&a->t, &tc);
    if (rc) {
        agent_errf(err, errlen, "cannot create the transport: %s", net_strerror(rc));
        goto fail;
    }
    char bound[GOSSIP_ADDR_MAX];
    rc = net_transport_listen(a->t, cfg->listen, bound, sizeof bound);
    if (rc) {
        agent_errf(err, errlen,
                   "cannot listen on %s: %s (is the port taken by another agent? set node.listen)",
                   cfg->listen, net_strerror(rc));
        goto fail;
    }
    snprintf(a->addr, sizeof a->addr, "%s",
             strcmp(cfg->advertise, cfg->listen) ? cfg->advertise : bound);
    if (setup_node(a, err, errlen) || agent_faults_create(&a->faults, a, err, errlen))
        goto fail;
    if (cfg->metrics_listen[0]) {
        char merr[256] = "";
        if (agent_metrics_serve(a->reg, cfg->metrics_listen, status_fn, a, &a->srv, merr,
                                sizeof merr)) {
            agent_errf(err, errlen, "metrics server: %s (set metrics.listen)", merr);
            goto fail;
        }
    }
    a->st.node_id = a->id.node_id;
    snprintf(a->st.address, sizeof a->st.address, "%s", a->addr);
    snprintf(a->st.mixing, sizeof a->st.mixing, "%s", gossip_mix_algo_name(cfg->algorithm));
    snprintf(a->st.state, sizeof a->st.state, "joining");
    a->st.step = a->host_steps;
    agent_log_line l;
    agent_log_begin(&l, AGENT_LOG_INFO, "agent_started");
    agent_log_hex64(&l, "node", a->id.node_id);
    agent_log_str(&l, "addr", a->addr);
    agent_log_str(&l, "metrics", cfg->metrics_listen);
    agent_log_str(&l, "model", cfg->model_spec);
    agent_log_u64(&l, "params", a->dim);
    agent_log_u64(&l, "catalog", a->n_catalog);
    agent_log_u64(&l, "shards_here", a->n_catalog ? agent_store_file_count(&a->store) : 0);
    agent_log_str(&l, "mixing", gossip_mix_algo_name(cfg->algorithm));
    agent_log_u64(&l, "bits", cfg->bits);
    agent_log_u64(&l, "seeds", cfg->seed_count);
    agent_log_u64(&l, "step", a->host_steps);
    agent_log_end(&l);
    *out = a;
    return 0;
fail:
    agent_runtime_destroy(a);
    return MURMUR_ESTART;
}

int agent_open(murmur_agent **out, const agent_config *cfg, uint32_t dim, unsigned flags, char *err,
               size_t errlen)
{
    agent_runtime *a;
    int rc = agent_runtime_create(&a, cfg, dim, flags, err, errlen);
    if (rc)
        return rc;
    if (agent_runtime_start(a, err, errlen)) {
        agent_runtime_destroy(a);
        return MURMUR_ESTART;
    }
    *out = a;
    return 0;
}
