/* sim/compute — see compute.h for the model. */
#include "sim/compute.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/rng.h"

/* Keeps the compute streams apart from the network's and the agents'. */
#define SALT_COMPUTE 0x636f6d7075746531ULL
#define SALT_CHOICE  0x7374726167676c72ULL

typedef struct agent_compute {
    model_rng rng;
    double speed;      /* heterogeneity draw */
    double slow;       /* slow-CPU factor, 1 = none */
    uint8_t straggler; /* FIXED model member */
} agent_compute;

struct sim_compute {
    sim_compute_config cfg;
    agent_compute *a;
};

int sim_compute_create(sim_compute **out, const sim_compute_config *cfg)
{
    *out = NULL;
    if (!cfg || cfg->agents == 0 || cfg->agents > SIM_COMPUTE_AGENTS_MAX ||
        !(cfg->step_ms > 0 && cfg->step_ms <= SIM_COMPUTE_STEP_MS_MAX) ||
        !(cfg->speed_sigma >= 0 && cfg->speed_sigma <= 10) || cfg->speeds_n > cfg->agents ||
        (cfg->speeds_n && !cfg->speeds))
        return SIM_COMPUTE_EINVAL;
    for (uint32_t i = 0; i < cfg->speeds_n; i++)
        if (!(cfg->speeds[i] > 0 && cfg->speeds[i] <= SIM_COMPUTE_SPEED_MAX))
            return SIM_COMPUTE_EINVAL;
    switch (cfg->model) {
    case SIM_COMPUTE_NONE:
        break;
    case SIM_COMPUTE_FIXED:
    case SIM_COMPUTE_RANDOM:
        if (!(cfg->slowdown >= 1 && cfg->slowdown <= SIM_COMPUTE_SLOWDOWN_MAX))
            return SIM_COMPUTE_EINVAL;
        if (cfg->model == SIM_COMPUTE_FIXED && !(cfg->stragglers >= 0 && cfg->stragglers <= 1))
            return SIM_COMPUTE_EINVAL;
        if (cfg->model == SIM_COMPUTE_RANDOM && !(cfg->slow_prob >= 0 && cfg->slow_prob <= 1))
            return SIM_COMPUTE_EINVAL;
        break;
    case SIM_COMPUTE_PARETO:
        if (!(cfg->pareto_alpha > 1 && cfg->pareto_alpha <= 1e6))
            return SIM_COMPUTE_EINVAL;
        break;
    case SIM_COMPUTE_LOGNORMAL:
        if (!(cfg->lognormal_sigma >= 0 && cfg->lognormal_sigma <= 10))
            return SIM_COMPUTE_EINVAL;
        break;
    default:
        return SIM_COMPUTE_EINVAL;
    }
    sim_compute *c = calloc(1, sizeof *c);
    if (!c)
        return SIM_COMPUTE_ENOMEM;
    c->cfg = *cfg;
    c->cfg.speeds = NULL; /* used in create only */
    c->cfg.speeds_n = 0;
    c->a = calloc(cfg->agents, sizeof *c->a);
    if (!c->a) {
        free(c);
        return SIM_COMPUTE_ENOMEM;
    }
    for (uint32_t i = 0; i < cfg->agents; i++) {
        agent_compute *a = &c->a[i];
        model_rng_seed(&a->rng, cfg->seed ^ SALT_COMPUTE, i);
        /* the speed comes from the agent's own stream, first draw */
        a->speed = cfg->speed_sigma > 0 ? exp(cfg->speed_sigma * model_rng_normal(&a->rng)) : 1.0;
        if (i < cfg->speeds_n)
            a->speed *= cfg->speeds[i];
        a->slow = 1.0;
    }
    if (cfg->model == SIM_COMPUTE_FIXED) {
        /* the first k of a seeded permutation are the stragglers */
        uint32_t k = (uint32_t)llround(cfg->stragglers * cfg->agents);
        uint32_t *perm = malloc(cfg->agents * sizeof *perm);
        if (!perm) {
            sim_compute_destroy(c);
            return SIM_COMPUTE_ENOMEM;
        }
        for (uint32_t i = 0; i < cfg->agents; i++)
            perm[i] = i;
        model_rng r;
        model_rng_seed(&r, cfg->seed ^ SALT_CHOICE, 0);
        model_rng_shuffle_u32(&r, perm, cfg->agents);
        for (uint32_t i = 0; i < k; i++)
            c->a[perm[i]].straggler = 1;
        free(perm);
    }
    *out = c;
    return SIM_COMPUTE_OK;
}

void sim_compute_destroy(sim_compute *c)
{
    if (!c)
        return;
    free(c->a);
    free(c);
}

uint64_t sim_compute_step_us(sim_compute *c, uint32_t agent)
{
    assert(agent < c->cfg.agents);
    agent_compute *a = &c->a[agent];
    const sim_compute_config *g = &c->cfg;
    double draw = 1.0;
    switch (g->model) {
    case SIM_COMPUTE_NONE:
        break;
    case SIM_COMPUTE_FIXED:
        if (a->straggler)
            draw = g->slowdown;
        break;
    case SIM_COMPUTE_RANDOM:
        if (model_rng_uniform_double(&a->rng) < g->slow_prob)
            draw = g->slowdown;
        break;
    case SIM_COMPUTE_PARETO: {
        /* inverse CDF: x_m * U^(-1/alpha), U in (0, 1]; mean alpha x_m/(alpha-1) = 1 */
        double u = 1.0 - model_rng_uniform_double(&a->rng);
        double xm = (g->pareto_alpha - 1.0) / g->pareto_alpha;
        draw = xm * pow(u, -1.0 / g->pareto_alpha);
        break;
    }
    case SIM_COMPUTE_LOGNORMAL: {
        double s = g->lognormal_sigma;
        draw = exp(s * model_rng_normal(&a->rng) - 0.5 * s * s);
        break;
    }
    }
    double us = g->step_ms * 1000.0 / (a->speed / a->slow) * draw;
    /* a Pareto tail can exceed any bound: cap at 1000 maximal steps */
    double cap = SIM_COMPUTE_STEP_MS_MAX * 1000.0 * 1000.0;
    if (!(us < cap))
        us = cap;
    uint64_t r = (uint64_t)llround(us);
    return r ? r : 1;
}

int sim_compute_set_slow(sim_compute *c, uint32_t agent, double factor)
{
    if (agent >= c->cfg.agents || !(factor >= 1 && factor <= SIM_COMPUTE_SLOWDOWN_MAX))
        return SIM_COMPUTE_EINVAL;
    c->a[agent].slow = factor;
    return SIM_COMPUTE_OK;
}

double sim_compute_speed(const sim_compute *c, uint32_t agent)
{
    assert(agent < c->cfg.agents);
    return c->a[agent].speed / c->a[agent].slow;
}

int sim_compute_is_straggler(const sim_compute *c, uint32_t agent)
{
    assert(agent < c->cfg.agents);
    return c->a[agent].straggler;
}

int sim_compute_parse_speeds(const char *text, double *out, uint32_t max, uint32_t *n, char *why,
                             size_t why_len)
{
    *n = 0;
    const char *p = text;
    while (*p == ' ' || *p == '\t')
        p++;
    if (!*p)
        return SIM_COMPUTE_OK;
    for (;;) {
        char *end = NULL;
        errno = 0;
        double v = strtod(p, &end);
        if (end == p || errno || !(v > 0 && v <= SIM_COMPUTE_SPEED_MAX)) {
            snprintf(why, why_len, "item %u ('%.*s'): a speed factor is a number in (0, %g]",
                     *n + 1, (int)strcspn(p, ","), p, SIM_COMPUTE_SPEED_MAX);
            return SIM_COMPUTE_EINVAL;
        }
        if (*n == max) {
            snprintf(why, why_len, "more than %u factors (one per agent)", max);
            return SIM_COMPUTE_EINVAL;
        }
        out[(*n)++] = v;
        while (*end == ' ' || *end == '\t')
            end++;
        if (!*end)
            return SIM_COMPUTE_OK;
        if (*end != ',') {
            snprintf(why, why_len, "item %u: '%c' after a number (separate factors with commas)",
                     *n, *end);
            return SIM_COMPUTE_EINVAL;
        }
        p = end + 1;
    }
}
