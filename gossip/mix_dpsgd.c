/* gossip/mix_dpsgd — D-PSGD averaging: each round a member sends its vector
 * to its out-neighbours of the topology graph and, once every in-neighbour's
 * vector of the round is in, sets x <- (x + sum x_j) / (d + 1). Rounds,
 * slots and catch-up: mix_sync.c. See docs/MIXING.md, "dpsgd". */
#include "gossip/mix_internal.h"

typedef struct dpsgd_state {
    mix_sync sync; /* first: the hooks get it back as the state */
} dpsgd_state;

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

static void dpsgd_combine(gossip_mix *m, mix_sync *s, const mix_slot *slot)
{
    (void)s;
    double w = 1.0 / (slot->nin + 1);
    for (uint32_t i = 0; i < m->dim; i++)
        m->work[i] = (float)((m->orig[i] + slot->acc[i]) * w);
}

static const mix_sync_rule dpsgd_rule = {
    .encode = dpsgd_encode,
    .check_push = dpsgd_check_push,
    .combine = dpsgd_combine,
};

static int dpsgd_create(gossip_mix *m, const gossip_mix_config *cfg, void **st)
{
    dpsgd_state *d = gossip_calloc(m->env, 1, sizeof *d);
    if (!d)
        return GOSSIP_ENOMEM;
    *st = d;
    return mix_sync_init(m, &d->sync, cfg, &dpsgd_rule, GOSSIP_MIX_DPSGD);
}

static void dpsgd_destroy(gossip_mix *m, void *st)
{
    dpsgd_state *d = st;
    mix_sync_fini(m, &d->sync);
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
