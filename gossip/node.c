/* gossip/node — see node.h. */
#include "gossip/node.h"
#include "gossip/topology.h"

#include <assert.h>
#include <string.h>

struct gossip_node {
    const gossip_env *env;
    uint64_t self;
    gossip_swim *swim;
    gossip_mix *mix;
    gossip_xfer *xfer;
    gossip_shards *shards; /* NULL without a catalog */
    uint64_t epoch;        /* last view epoch passed to the parts */
    /* The mixer's view: swim's own array, by pointer (no copy of N ids per
     * agent: at 8 192 simulated agents that copy was 8 bytes of every
     * member pair). Swim changes the array in place when its view
     * changes, so every call that can change it (recv, tick, join, leave)
     * hands the view over again before the mixer runs (node_sync_view). */
    gossip_mix_shared_view mix_view;
    int view_pending; /* a view the replicator could not take (ENOMEM) */
    /* join policy */
    gossip_node_model model;
    int has_checkpoint;
    uint64_t ckpt_round;
    gossip_time_us join_wait_us;
    gossip_time_us join_deadline;  /* 0 until the first tick */
    gossip_time_us fetch_retry_at; /* next transfer attempt; 0 = now */
    uint32_t fetch_failures;
    gossip_time_us busy_since; /* first fetch refused busy by every peer; 0 = none */
    unsigned poll_next;        /* round robin over the parts */
    char addr[GOSSIP_ADDR_MAX];
    gossip_node_stats stats;
    /* the end of the job: what is known, and the JOB_END frames to send */
    int ended;
    gossip_node_job_end_info end;
    uint64_t *end_dest; /* end_few, or an announcement's whole view (allocated for it) */
    uint32_t end_n, end_at;
    uint64_t end_few[GOSSIP_NODE_RELAY_MAX];
    uint8_t end_frame[GOSSIP_HEADER_SIZE + GOSSIP_NODE_JOB_END_BYTES];
};

void gossip_node_config_default(gossip_node_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->mix.algo = GOSSIP_MIX_GOSSIP; /* dpsgd (0) needs a graph topology */
    gossip_xfer_config_default(&cfg->xfer);
    gossip_shards_config_default(&cfg->shards);
    cfg->shards.n_shards = 0;
}

void gossip_node_destroy(gossip_node *n)
{
    if (!n)
        return;
    gossip_shards_destroy(n->shards);
    gossip_xfer_destroy(n->xfer);
    gossip_mix_destroy(n->mix);
    gossip_swim_destroy(n->swim);
    if (n->end_dest != n->end_few)
        gossip_free(n->env, n->end_dest);
    gossip_free(n->env, n);
}

int gossip_node_create(gossip_node **out, const gossip_env *env, const gossip_node_config *cfg)
{
    if (!out || !env || !cfg || !cfg->self || !cfg->self_addr)
        return GOSSIP_EINVAL;
    gossip_node *n = gossip_calloc(env, 1, sizeof *n);
    if (!n)
        return GOSSIP_ENOMEM;
    n->env = env;
    n->self = cfg->self;
    n->has_checkpoint = cfg->has_checkpoint;
    n->ckpt_round = cfg->ckpt_round;
    n->join_wait_us = cfg->join_wait_us ? cfg->join_wait_us : GOSSIP_NODE_JOIN_WAIT_DEFAULT_US;
    n->model = cfg->fetch_model ? GOSSIP_NODE_JOINING : GOSSIP_NODE_OWN;

    gossip_swim_config sc = cfg->swim;
    sc.self_id = cfg->self;
    sc.self_addr = cfg->self_addr;
    int rc = gossip_swim_create(&n->swim, env, &sc);
    if (!rc) {
        gossip_mix_config mc = cfg->mix;
        mc.self = cfg->self;
        mc.shared_views = 1;
        rc = gossip_mix_create(&n->mix, env, &mc);
    }
    if (!rc) {
        gossip_xfer_config xc = cfg->xfer;
        xc.self = cfg->self;
        xc.dim = cfg->mix.dim;
        rc = gossip_xfer_create(&n->xfer, env, &xc);
    }
    if (!rc && cfg->shards.n_shards && cfg->shards.ids) {
        gossip_shards_config hc = cfg->shards;
        hc.self = cfg->self;
        rc = gossip_shards_create(&n->shards, env, &hc);
    }
    n->end_dest = n->end_few;
    if (rc) {
        gossip_node_destroy(n);
        return rc;
    }
    n->epoch = 0; /* the first view goes to the parts at the first call */
    *out = n;
    return GOSSIP_OK;
}

/* Pass a new membership view to the mixer and the replicator. */
static void node_sync_view(gossip_node *n, gossip_time_us now)
{
    gossip_view v;
    gossip_swim_view(n->swim, &v);
    if (v.epoch == n->epoch && !n->view_pending)
        return;
    if (v.epoch != n->epoch) {
        n->epoch = v.epoch;
        n->stats.views++;
        /* Cannot fail: swim's view is sorted and unique, of at most
         * GOSSIP_MEMBERS_MAX members (swim's members_max), and its epochs
         * only grow. */
        if (gossip_mix_view_prepare(&n->mix_view, &v) == GOSSIP_OK)
            (void)gossip_mix_set_view_shared(n->mix, &n->mix_view, now);
    }
    n->view_pending = 0;
    if (n->shards) {
        int rc = gossip_shards_set_view(n->shards, &v, now);
        if (rc == GOSSIP_ENOMEM)
            n->view_pending = 1; /* retried at the next call */
    }
}

/* Start a state transfer from the live peers (random first peer). */
static void node_fetch_start(gossip_node *n, gossip_time_us now)
{
    gossip_view v;
    gossip_swim_view(n->swim, &v);
    if (v.n < 2)
        return;
    uint64_t peers[GOSSIP_XFER_PEERS_MAX];
    uint32_t np = 0;
    uint32_t off = (uint32_t)gossip_random_below(n->env, v.n);
    for (uint32_t k = 0; k < v.n && np < GOSSIP_XFER_PEERS_MAX; k++) {
        uint64_t id = v.ids[(off + k) % v.n];
        if (id != n->self)
            peers[np++] = id;
    }
    if (gossip_xfer_start(n->xfer, peers, np, n->has_checkpoint, n->ckpt_round, now) == GOSSIP_OK)
        n->stats.fetch_tries++;
}

/* The join policy; runs after every call. */
static void node_join_step(gossip_node *n, gossip_time_us now)
{
    if (n->model != GOSSIP_NODE_JOINING)
        return;
    if (!n->join_deadline)
        n->join_deadline = now + n->join_wait_us;
    switch (gossip_xfer_get_state(n->xfer)) {
    case GOSSIP_XFER_COMPLETE:
        n->model = GOSSIP_NODE_FETCHED;
        return;
    case GOSSIP_XFER_RESUME:
        n->model = GOSSIP_NODE_RESUME;
        return;
    case GOSSIP_XFER_RUNNING:
        return;
    case GOSSIP_XFER_FAILED:
        if (!n->fetch_retry_at && gossip_xfer_failed_busy(n->xfer)) {
            /* No peer had a model yet (agents started together): ask
             * again soon; give up as the counted failures would have. */
            if (!n->busy_since)
                n->busy_since = now;
            n->fetch_retry_at = now + GOSSIP_NODE_FETCH_BUSY_RETRY_US;
            if (now - n->busy_since >= GOSSIP_NODE_FETCH_BUSY_GIVE_UP_US) {
                n->model = GOSSIP_NODE_OWN;
                return;
            }
        } else if (!n->fetch_retry_at) {
            n->fetch_failures++;
            n->fetch_retry_at = now + GOSSIP_NODE_FETCH_RETRY_US;
        }
        if (n->fetch_failures >= GOSSIP_NODE_FETCH_TRIES) {
            n->model = GOSSIP_NODE_OWN;
            return;
        }
        if (now < n->fetch_retry_at)
            return;
        break;
    case GOSSIP_XFER_IDLE:
        break;
    }
    gossip_view v;
    gossip_swim_view(n->swim, &v);
    if (v.n < 2) {
        if (now >= n->join_deadline && !n->stats.fetch_tries)
            n->model = GOSSIP_NODE_OWN; /* nobody answered the join */
        return;
    }
    n->fetch_retry_at = 0;
    node_fetch_start(n, now);
}

static void node_after(gossip_node *n, gossip_time_us now)
{
    node_sync_view(n, now);
    node_join_step(n, now);
}

int gossip_node_join(gossip_node *n, const char *const *seeds, size_t count, gossip_time_us now)
{
    int rc = gossip_swim_join(n->swim, seeds, count, now);
    node_after(n, now);
    return rc;
}

/* ---- the end of the job (JOB_END) ---- */

/* 3 + ceil(log2 N) */
static uint32_t node_relay_fanout(uint32_t members)
{
    uint32_t f = 3, k = 1;
    while (k < members) {
        k <<= 1;
        f++;
    }
    return f;
}

/* Member k of the view without self and `skip` (their indices in v, or
 * v->n when absent, given in ascending order as ex[0] <= ex[1]). */
static uint64_t end_candidate(const gossip_view *v, const uint32_t ex[2], uint32_t k)
{
    for (int e = 0; e < 2; e++)
        if (k >= ex[e])
            k++;
    return v->ids[k];
}

/* Queue JOB_END to the members of the view but self and `skip`: all of them
 * (fanout 0), or `fanout` of them chosen at random (a relay:
 * gossip_sample_distinct, a partial Fisher-Yates that needs no copy of the
 * view); an announcement to the whole view allocates its list, and without
 * memory for it goes to a relay's fanout instead (an epidemic all the
 * same: each of them relays). */
static void node_end_spread(gossip_node *n, uint32_t fanout, uint64_t skip)
{
    if (fanout > GOSSIP_NODE_RELAY_MAX)
        fanout = GOSSIP_NODE_RELAY_MAX;
    gossip_view v;
    gossip_swim_view(n->swim, &v);
    uint32_t ex[2] = {v.n, v.n};
    for (uint32_t i = 0, e = 0; i < v.n && e < 2; i++)
        if (v.ids[i] == n->self || v.ids[i] == skip)
            ex[e++] = i;
    uint32_t m = v.n - (ex[0] < v.n) - (ex[1] < v.n);
    if (n->end_dest != n->end_few)
        gossip_free(n->env, n->end_dest);
    n->end_dest = n->end_few;
    if (!fanout && m > GOSSIP_NODE_RELAY_MAX) {
        uint64_t *all = gossip_alloc(n->env, (size_t)m * sizeof *all);
        if (all) {
            for (uint32_t k = 0; k < m; k++)
                all[k] = end_candidate(&v, ex, k);
            n->end_dest = all;
        } else {
            n->stats.job_end_no_memory++;
            fanout = node_relay_fanout(v.n);
        }
    }
    if (n->end_dest == n->end_few) {
        if (fanout && fanout < m) {
            uint32_t pick[GOSSIP_NODE_RELAY_MAX];
            gossip_sample_distinct(n->env, m, fanout, pick);
            for (uint32_t i = 0; i < fanout; i++)
                n->end_few[i] = end_candidate(&v, ex, pick[i]);
            m = fanout;
        } else {
            for (uint32_t k = 0; k < m; k++) /* m <= GOSSIP_NODE_RELAY_MAX here */
                n->end_few[k] = end_candidate(&v, ex, k);
        }
    }
    n->end_n = m;
    n->end_at = 0;
    uint8_t *p = n->end_frame + GOSSIP_HEADER_SIZE;
    memset(p, 0, GOSSIP_NODE_JOB_END_BYTES);
    gossip_put_u64(p, n->end.origin);
    gossip_put_u64(p + 8, n->end.step);
    uint32_t bits;
    memcpy(&bits, &n->end.accuracy, sizeof bits);
    gossip_put_u32(p + 16, bits);
    p[20] = (uint8_t)n->end.reason;
    gossip_header h = {
        .type = GOSSIP_MSG_JOB_END, .payload_len = GOSSIP_NODE_JOB_END_BYTES, .sender = n->self};
    gossip_header_encode(&h, n->end_frame);
}

static int node_recv_job_end(gossip_node *n, uint64_t from, const gossip_header *h,
                             const uint8_t *p, size_t len)
{
    if (h->type != GOSSIP_MSG_JOB_END)
        return GOSSIP_ETYPE;
    if (len != GOSSIP_NODE_JOB_END_BYTES)
        return len < GOSSIP_NODE_JOB_END_BYTES ? GOSSIP_ETRUNC : GOSSIP_EMALFORMED;
    if (p[20] != GOSSIP_NODE_JOB_END_REASON_TARGET || p[21] || p[22] || p[23])
        return GOSSIP_EMALFORMED;
    uint32_t bits = gossip_get_u32(p + 16);
    float acc;
    memcpy(&acc, &bits, sizeof acc);
    uint64_t origin = gossip_get_u64(p);
    if (!(acc >= 0.0f && acc <= 1.0f) || !origin)
        return GOSSIP_EMALFORMED;
    gossip_swim_member m;
    /* Only members are heard: of the view, or one that just left it (the
     * origin announces and leaves at once, and its LEAVE may be processed
     * first). One declared dead or never seen is not. */
    if (gossip_swim_lookup(n->swim, h->sender, &m) != GOSSIP_OK ||
        (m.state != GOSSIP_MEMBER_ALIVE && m.state != GOSSIP_MEMBER_SUSPECT &&
         m.state != GOSSIP_MEMBER_LEFT))
        return GOSSIP_ENOTFOUND;
    if (n->ended)
        return GOSSIP_OK; /* heard already: an epidemic ends here */
    n->ended = 1;
    n->end = (gossip_node_job_end_info){.origin = origin,
                                        .step = gossip_get_u64(p + 8),
                                        .accuracy = acc,
                                        .reason = p[20],
                                        .from = from ? from : h->sender};
    gossip_view v;
    gossip_swim_view(n->swim, &v);
    node_end_spread(n, node_relay_fanout(v.n), h->sender);
    return GOSSIP_OK;
}

static int node_poll_job_end(gossip_node *n, gossip_send *out)
{
    if (n->end_at >= n->end_n)
        return 0;
    *out = (gossip_send){
        .dest = n->end_dest[n->end_at++], .frame = n->end_frame, .len = sizeof n->end_frame};
    n->stats.job_end_sent++;
    return 1;
}

int gossip_node_announce_end(gossip_node *n, unsigned reason, uint64_t step, float accuracy,
                             gossip_time_us now)
{
    (void)now;
    if (n->ended)
        return GOSSIP_ESTALE;
    if (reason != GOSSIP_NODE_JOB_END_REASON_TARGET || !(accuracy >= 0.0f && accuracy <= 1.0f))
        return GOSSIP_EINVAL;
    n->ended = 1;
    n->end = (gossip_node_job_end_info){
        .origin = n->self, .step = step, .accuracy = accuracy, .reason = reason, .from = 0};
    node_end_spread(n, 0, 0);
    return GOSSIP_OK;
}

int gossip_node_job_end(const gossip_node *n, gossip_node_job_end_info *out)
{
    if (!n->ended)
        return 0;
    if (out)
        *out = n->end;
    return 1;
}

int gossip_node_leave(gossip_node *n, gossip_time_us now)
{
    int rc = gossip_swim_leave(n->swim, now);
    node_sync_view(n, now); /* the view changed in place: the mixer's too */
    return rc;
}

int gossip_node_recv(gossip_node *n, uint64_t from, const gossip_header *h, const uint8_t *payload,
                     size_t len, gossip_time_us now)
{
    int rc;
    if (from && h->sender != from)
        rc = GOSSIP_EMALFORMED; /* a peer speaking for another id */
    else {
        switch (h->type >> 4) {
        case 0:
            rc = gossip_swim_recv(n->swim, from, h, payload, len, now);
            break;
        case 1:
            rc = gossip_mix_recv(n->mix, from, h, payload, len, now);
            break;
        case 2:
            rc = n->shards ? gossip_shards_recv(n->shards, from, h, payload, len, now)
                           : GOSSIP_ETYPE;
            break;
        case 3:
            rc = gossip_xfer_recv(n->xfer, from, h, payload, len, now);
            break;
        case 4:
            rc = node_recv_job_end(n, from, h, payload, len);
            break;
        default:
            rc = GOSSIP_ETYPE;
            break;
        }
    }
    if (rc == GOSSIP_OK)
        n->stats.recv_frames++;
    else if (rc > 0 && rc < GOSSIP_ERR_COUNT)
        n->stats.rejected[rc]++;
    node_after(n, now);
    return rc;
}

int gossip_node_recv_frame(gossip_node *n, uint64_t from, const uint8_t *frame, size_t len,
                           gossip_time_us now)
{
    gossip_header h;
    int rc = gossip_header_decode(frame, len, &h);
    if (rc) {
        if (rc > 0 && rc < GOSSIP_ERR_COUNT)
            n->stats.rejected[rc]++;
        return rc;
    }
    return gossip_node_recv(n, from, &h, frame + GOSSIP_HEADER_SIZE, len - GOSSIP_HEADER_SIZE, now);
}

int gossip_node_tick(gossip_node *n, gossip_time_us now)
{
    gossip_swim_tick(n->swim, now);
    node_sync_view(n, now); /* deaths found by this tick reach the others now */
    gossip_mix_tick(n->mix, now);
    gossip_xfer_tick(n->xfer, now);
    if (n->shards)
        gossip_shards_tick(n->shards, now);
    node_after(n, now);
    return GOSSIP_OK;
}

static int part_poll(gossip_node *n, unsigned part, gossip_send *out, gossip_time_us now)
{
    switch (part) {
    case 0:
        return gossip_swim_poll_send(n->swim, out, now);
    case 1:
        return gossip_xfer_poll_send(n->xfer, out, now);
    case 2:
        return gossip_mix_poll_send(n->mix, out, now);
    default:
        return n->shards ? gossip_shards_poll_send(n->shards, out, now) : 0;
    }
}

/* A frame to a member goes to the address its membership entry holds. */
static void node_fill_addr(gossip_node *n, gossip_send *out)
{
    if (out->dest && !out->dest_addr) {
        gossip_swim_member m;
        if (gossip_swim_lookup(n->swim, out->dest, &m) == GOSSIP_OK && m.addr[0]) {
            memcpy(n->addr, m.addr, sizeof n->addr);
            out->dest_addr = n->addr;
        }
    }
}

int gossip_node_poll_send(gossip_node *n, gossip_send *out, gossip_time_us now)
{
    /* JOB_END before anything else: the announcer leaves right after, and a
     * member that reads the LEAVE first forgets the sender and closes its
     * link (agent/runtime.c), dropping what the link still carried. */
    if (node_poll_job_end(n, out) == 1) {
        node_fill_addr(n, out);
        return 1;
    }
    for (unsigned k = 0; k < GOSSIP_NODE_PARTS; k++) {
        unsigned part = (n->poll_next + k) % GOSSIP_NODE_PARTS;
        if (part_poll(n, part, out, now) == 1) {
            n->poll_next = (part + 1) % GOSSIP_NODE_PARTS;
            node_fill_addr(n, out);
            return 1;
        }
    }
    /* A round ends only once its frames are pulled: the mixer may be DONE now. */
    node_after(n, now);
    return 0;
}

int gossip_node_unreachable(gossip_node *n, uint64_t dest, gossip_time_us now)
{
    if (!n || dest == 0)
        return GOSSIP_EINVAL;
    return gossip_mix_unreachable(n->mix, dest, now);
}

static gossip_time_us tmin(gossip_time_us a, gossip_time_us b)
{
    return a < b ? a : b;
}

gossip_time_us gossip_node_deadline(const gossip_node *n)
{
    gossip_time_us d = gossip_swim_deadline(n->swim);
    d = tmin(d, gossip_mix_deadline(n->mix));
    d = tmin(d, gossip_xfer_deadline(n->xfer));
    if (n->shards)
        d = tmin(d, gossip_shards_deadline(n->shards));
    if (n->model == GOSSIP_NODE_JOINING) {
        if (n->join_deadline)
            d = tmin(d, n->join_deadline);
        if (n->fetch_retry_at)
            d = tmin(d, n->fetch_retry_at);
    }
    return d;
}

void gossip_node_view(const gossip_node *n, gossip_view *out)
{
    gossip_swim_view(n->swim, out);
}

gossip_node_model gossip_node_model_state(const gossip_node *n)
{
    return n->model;
}

int gossip_node_model_result(const gossip_node *n, float *out, uint64_t *round)
{
    if (n->model != GOSSIP_NODE_FETCHED)
        return GOSSIP_ENOTFOUND;
    return gossip_xfer_result(n->xfer, out, round);
}

int gossip_node_model_adopt(gossip_node *n)
{
    if (n->model == GOSSIP_NODE_JOINING)
        return GOSSIP_EINVAL;
    n->model = GOSSIP_NODE_READY;
    return GOSSIP_OK;
}

gossip_swim_refusal gossip_node_refused(const gossip_node *n)
{
    return gossip_swim_refused(n->swim);
}

gossip_swim *gossip_node_swim(gossip_node *n)
{
    return n->swim;
}

gossip_mix *gossip_node_mix(gossip_node *n)
{
    return n->mix;
}

gossip_xfer *gossip_node_xfer(gossip_node *n)
{
    return n->xfer;
}

gossip_shards *gossip_node_shards(gossip_node *n)
{
    return n->shards;
}

const gossip_node_stats *gossip_node_stats_get(const gossip_node *n)
{
    return &n->stats;
}
