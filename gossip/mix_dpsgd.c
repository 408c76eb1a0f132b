/* gossip/mix_dpsgd — D-PSGD averaging: each round a member sends its vector
 * to its out-neighbours of the topology graph and, once every in-neighbour's
 * vector of the round is in, sets x <- (x + sum x_j) / (d + 1). Rounds,
 * slots and catch-up: mix_sync.c. See docs/MIXING.md, "dpsgd".
 *
 * Poisoned vectors (gossip/robust.h): with `clip` each received chunk is
 * clipped around our own vector before it is summed; with trimmed-mean or
 * centered-clip the in-neighbours' vectors are kept whole (`vec`: one per
 * in-neighbour per slot, allocated only for those rules) and combined at
 * the end of the round instead of summed. */
#include "gossip/mix_internal.h"

#include <string.h>

typedef struct dpsgd_state {
    mix_sync sync; /* first: the hooks get it back as the state */
    float *vec;    /* trimmed-mean / centered-clip: window x DEGREE_MAX x dim */
    double *cc;    /* centered-clip: dim */
} dpsgd_state;

static int dpsgd_keeps_vectors(const gossip_mix *m)
{
    return m->robust.cfg.rule == GOSSIP_ROBUST_TRIMMED_MEAN ||
           m->robust.cfg.rule == GOSSIP_ROBUST_CENTERED_CLIP;
}

static float *dpsgd_vec(const gossip_mix *m, dpsgd_state *d, const mix_slot *slot, uint32_t k)
{
    size_t si = (size_t)(slot - d->sync.slots);
    return d->vec + (si * GOSSIP_TOPOLOGY_DEGREE_MAX + k) * m->dim;
}

static int dpsgd_topology_ok(gossip_topology t)
{
    return gossip_topology_has_graph(t);
}

static int dpsgd_encode(gossip_mix *m, mix_sync *s, const mix_slot *slot, float *scale,
                        uint32_t *gen, uint32_t *gen_age)
{
    (void)s;
    (void)slot;
    *scale = 1.0f;
    *gen = *gen_age = 0;
    return mix_encode_vector(m, m->orig, NULL);
}

static int dpsgd_check_push(const mix_push_hdr *ph)
{
    return ph->scale != 1.0f ? GOSSIP_EMALFORMED : GOSSIP_OK;
}

/* A decoded chunk of in-neighbour `from` (m->scratch): bounded around our
 * own vector (this round's, or the last result while idle), or kept whole. */
static int dpsgd_accept(gossip_mix *m, mix_sync *s, mix_slot *slot, uint64_t from, uint64_t round,
                        const mix_push_hdr *ph)
{
    (void)round;
    dpsgd_state *d = (dpsgd_state *)s;
    if (d->vec) {
        uint32_t k = 0;
        while (k < slot->nin && slot->in_id[k] != from)
            k++;
        if (k < slot->nin) {
            memcpy(dpsgd_vec(m, d, slot, k) + ph->offset, m->scratch,
                   (size_t)ph->count * sizeof *m->scratch);
            return 0; /* combined at the end of the round */
        }
    }
    const float *own = m->state == GOSSIP_MIX_RUNNING ? m->orig : m->work;
    gossip_robust_clip_around(&m->robust, from, m->scratch, own + ph->offset, 1.0f,
                              own + ph->offset, ph->count, 1.0);
    return 1;
}

static void dpsgd_combine(gossip_mix *m, mix_sync *s, const mix_slot *slot)
{
    dpsgd_state *d = (dpsgd_state *)s;
    if (d->vec && slot->nin) {
        const float *in[GOSSIP_ROBUST_INPUTS_MAX];
        uint32_t nin = 0;
        in[nin++] = m->orig;
        for (uint32_t k = 0; k < slot->nin && nin < GOSSIP_ROBUST_INPUTS_MAX; k++)
            in[nin++] = dpsgd_vec(m, d, slot, k);
        if (m->robust.cfg.rule == GOSSIP_ROBUST_TRIMMED_MEAN)
            gossip_robust_trimmed_mean(in, nin, m->robust.cfg.trim, m->dim, m->work);
        else
            gossip_robust_centered_clip(&m->robust, in, nin, m->orig, m->dim, m->work, d->cc);
        m->robust.trimmed++;
        return;
    }
    double w = 1.0 / (slot->nin + 1);
    for (uint32_t i = 0; i < m->dim; i++)
        m->work[i] = (float)((m->orig[i] + slot->acc[i]) * w);
}

static const mix_sync_rule dpsgd_rule = {
    .encode = dpsgd_encode,
    .check_push = dpsgd_check_push,
    .accept = dpsgd_accept,
    .combine = dpsgd_combine,
};

static int dpsgd_create(gossip_mix *m, const gossip_mix_config *cfg, void **st)
{
    dpsgd_state *d = gossip_calloc(m->env, 1, sizeof *d);
    if (!d)
        return GOSSIP_ENOMEM;
    *st = d;
    int rc = mix_sync_init(m, &d->sync, cfg, &dpsgd_rule, GOSSIP_MIX_DPSGD);
    if (!rc && dpsgd_keeps_vectors(m)) {
        d->vec = gossip_calloc(m->env, (size_t)d->sync.window * GOSSIP_TOPOLOGY_DEGREE_MAX * m->dim,
                               sizeof *d->vec);
        d->cc = gossip_calloc(m->env, m->dim, sizeof *d->cc);
        if (!d->vec || !d->cc)
            rc = GOSSIP_ENOMEM;
    }
    return rc;
}

static void dpsgd_destroy(gossip_mix *m, void *st)
{
    dpsgd_state *d = st;
    mix_sync_fini(m, &d->sync);
    gossip_free(m->env, d->vec);
    gossip_free(m->env, d->cc);
    gossip_free(m->env, d);
}

static void dpsgd_on_view(gossip_mix *m, void *st)
{
    mix_sync_on_view(m, &((dpsgd_state *)st)->sync);
}

static void dpsgd_reset(gossip_mix *m, void *st)
{
    mix_sync_clear(m, &((dpsgd_state *)st)->sync);
}

static void dpsgd_start(gossip_mix *m, void *st, gossip_time_us now)
{
    (void)now;
    mix_sync_start(m, &((dpsgd_state *)st)->sync);
}

static int dpsgd_recv(gossip_mix *m, void *st, const mix_frame *f, gossip_time_us now)
{
    (void)now;
    return mix_sync_recv(m, &((dpsgd_state *)st)->sync, f);
}

static void dpsgd_check(gossip_mix *m, void *st)
{
    mix_sync_check(m, &((dpsgd_state *)st)->sync);
}

static void dpsgd_expire(gossip_mix *m, void *st, gossip_time_us now)
{
    (void)now;
    mix_sync_abort_round(m, &((dpsgd_state *)st)->sync, 0);
}

static uint64_t dpsgd_round(const gossip_mix *m, const void *st)
{
    (void)m;
    return ((const dpsgd_state *)st)->sync.round;
}

const mix_ops mix_dpsgd_ops = {
    .flags = MIX_OPS_ENC,
    .types = MIX_TYPE_BIT(GOSSIP_MSG_MIX_PUSH),
    .stash_types = MIX_TYPE_BIT(GOSSIP_MSG_MIX_PUSH),
    .topology_ok = dpsgd_topology_ok,
    .create = dpsgd_create,
    .destroy = dpsgd_destroy,
    .on_view = dpsgd_on_view,
    .reset = dpsgd_reset,
    .start = dpsgd_start,
    .recv = dpsgd_recv,
    .check = dpsgd_check,
    .expire = dpsgd_expire,
    .round = dpsgd_round,
};
