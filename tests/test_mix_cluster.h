/* tests/test_mix_cluster — a population of gossip_mix objects on the
 * sim/driver, shared by tests/test_mix.c and tests/test_allreduce.c.
 *
 * Agent i has node id 1000 + 17 i, so view order equals agent order. Every
 * agent keeps its "caller" vector x[i] (what a trainer would hold): rounds
 * start from it and take writes the result back into it. */
#ifndef TESTS_TEST_MIX_CLUSTER_H
#define TESTS_TEST_MIX_CLUSTER_H

#include "tests/harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/mix.h"
#include "sim/driver.h"

typedef struct cluster {
    uint32_t n, dim;
    sim_driver *d;
    gossip_mix **m;
    uint64_t *ids;
    float **x;
    int *outcome;
    uint64_t epoch;
    uint64_t seed;
} cluster;

static inline uint64_t cluster_id(uint32_t i)
{
    return 1000 + 17 * (uint64_t)i;
}

/* Install a view of the agents with alive[i] != 0 (all when alive is NULL). */
static inline void cluster_view(cluster *c, const int *alive)
{
    uint64_t *ids = malloc(c->n * sizeof *ids);
    uint32_t k = 0;
    for (uint32_t i = 0; i < c->n; i++)
        if (!alive || alive[i])
            ids[k++] = cluster_id(i);
    c->epoch++;
    gossip_view v = {.epoch = c->epoch, .n = k, .ids = ids};
    for (uint32_t i = 0; i < c->n; i++) {
        if (!sim_driver_alive(c->d, i))
            continue;
        assert_int_equal(gossip_mix_set_view(c->m[i], &v, sim_driver_now(c->d)), GOSSIP_OK);
        sim_driver_kick(c->d, i);
    }
    free(ids);
}

/* cluster_init with the mixers attached through `ops` (NULL: sim_ops_mix),
 * each as the node node_of(ctx, i, mixer) returns (NULL: the mixer itself),
 * e.g. a wrapper that records every frame. */
static inline void cluster_init_ops(cluster *c, uint32_t n, uint32_t dim,
                                    const gossip_mix_config *base, const sim_driver_config *dcfg,
                                    const sim_node_ops *ops,
                                    void *(*node_of)(void *ctx, uint32_t i, gossip_mix *m),
                                    void *ctx);

static inline void cluster_init(cluster *c, uint32_t n, uint32_t dim, const gossip_mix_config *base,
                                const sim_driver_config *dcfg)
{
    cluster_init_ops(c, n, dim, base, dcfg, NULL, NULL, NULL);
}

static inline void cluster_init_ops(cluster *c, uint32_t n, uint32_t dim,
                                    const gossip_mix_config *base, const sim_driver_config *dcfg,
                                    const sim_node_ops *ops,
                                    void *(*node_of)(void *ctx, uint32_t i, gossip_mix *m),
                                    void *ctx)
{
    memset(c, 0, sizeof *c);
    c->n = n;
    c->dim = dim;
    c->seed = dcfg->seed;
    sim_driver_config dc = *dcfg;
    dc.agents = n;
    assert_int_equal(sim_driver_create(&c->d, &dc), 0);
    c->m = calloc(n, sizeof *c->m);
    c->x = calloc(n, sizeof *c->x);
    c->outcome = calloc(n, sizeof *c->outcome);
    for (uint32_t i = 0; i < n; i++) {
        gossip_mix_config cfg = *base;
        cfg.self = cluster_id(i);
        cfg.dim = dim;
        int rc = gossip_mix_create(&c->m[i], sim_driver_env(c->d, i), &cfg);
        if (rc)
            fail_msg("gossip_mix_create: %s", gossip_strerror(rc));
        void *node = node_of ? node_of(ctx, i, c->m[i]) : c->m[i];
        assert_int_equal(sim_driver_attach(c->d, i, cfg.self, ops ? ops : &sim_ops_mix, node), 0);
        c->x[i] = calloc(dim, sizeof(float));
    }
    cluster_view(c, NULL);
}

static inline void cluster_free(cluster *c)
{
    for (uint32_t i = 0; i < c->n; i++) {
        gossip_mix_destroy(c->m[i]);
        free(c->x[i]);
    }
    sim_driver_destroy(c->d);
    free(c->m);
    free(c->x);
    free(c->outcome);
}

/* Fill every x[i] with N(mean, 1) values from rng. */
static inline void cluster_fill(cluster *c, model_rng *rng, double mean)
{
    for (uint32_t i = 0; i < c->n; i++)
        for (uint32_t j = 0; j < c->dim; j++)
            c->x[i][j] = (float)(mean + model_rng_normal(rng));
}

static inline void cluster_start(cluster *c, uint32_t i)
{
    int rc = gossip_mix_start(c->m[i], c->x[i], sim_driver_now(c->d));
    if (rc)
        fail_msg("seed %llu: start agent %u: %s", (unsigned long long)c->seed, i,
                 gossip_strerror(rc));
    sim_driver_kick(c->d, i);
}

static inline void cluster_start_all(cluster *c)
{
    for (uint32_t i = 0; i < c->n; i++)
        if (sim_driver_alive(c->d, i))
            cluster_start(c, i);
}

/* Take every live agent's result (all must be DONE); returns how many
 * completed (the others aborted). */
static inline uint32_t cluster_take_all(cluster *c)
{
    uint32_t ok = 0;
    for (uint32_t i = 0; i < c->n; i++) {
        if (!sim_driver_alive(c->d, i))
            continue;
        if (gossip_mix_get_state(c->m[i]) != GOSSIP_MIX_DONE)
            fail_msg("seed %llu: agent %u not done (state %d)", (unsigned long long)c->seed, i,
                     (int)gossip_mix_get_state(c->m[i]));
        assert_int_equal(gossip_mix_take(c->m[i], c->x[i], &c->outcome[i]), GOSSIP_OK);
        ok += c->outcome[i] == GOSSIP_OK;
    }
    return ok;
}

/* One synchronous round in rounds mode: start all, deliver, take all. */
static inline uint32_t cluster_round(cluster *c)
{
    cluster_start_all(c);
    sim_driver_run_round(c->d);
    return cluster_take_all(c);
}

/* Per-coordinate mean over live agents, in double. */
static inline void cluster_mean(const cluster *c, double *mean)
{
    uint32_t live = 0;
    memset(mean, 0, c->dim * sizeof *mean);
    for (uint32_t i = 0; i < c->n; i++) {
        if (!sim_driver_alive(c->d, i))
            continue;
        live++;
        for (uint32_t j = 0; j < c->dim; j++)
            mean[j] += c->x[i][j];
    }
    for (uint32_t j = 0; j < c->dim; j++)
        mean[j] /= live;
}

/* Consensus distance sqrt(sum_i |x_i - mean|^2) over live agents. */
static inline double cluster_distance(const cluster *c)
{
    double *mean = malloc(c->dim * sizeof *mean), s = 0;
    cluster_mean(c, mean);
    for (uint32_t i = 0; i < c->n; i++) {
        if (!sim_driver_alive(c->d, i))
            continue;
        for (uint32_t j = 0; j < c->dim; j++) {
            double e = c->x[i][j] - mean[j];
            s += e * e;
        }
    }
    free(mean);
    return sqrt(s);
}

static inline double max_abs(const cluster *c)
{
    double m = 0;
    for (uint32_t i = 0; i < c->n; i++)
        for (uint32_t j = 0; j < c->dim; j++)
            m = fmax(m, fabs(c->x[i][j]));
    return m;
}

#endif
