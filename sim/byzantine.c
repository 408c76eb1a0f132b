/* sim/byzantine — byzantine senders in the simulator. See byzantine.h. */
#include "sim/byzantine.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/mix.h"

const char *const sim_byz_attack_names[SIM_BYZ_ATTACK_COUNT + 1] = {"scale", "sign-flip",
                                                                    "bit-flip", NULL};

struct sim_byzantine {
    uint32_t n, k, dim;
    sim_byz_attack attack;
    double scale;
    model_rng rng;
    float *buf;         /* dim: the attacked vector of the round being started */
    const float **sent; /* n: each agent's clean outgoing vector (the schedule's copy) */
};

int sim_byzantine_is(uint32_t n, uint32_t k, uint32_t i)
{
    if (k == 0 || n == 0 || i >= n)
        return 0;
    /* i is byzantine when (i + 1) k / n steps up: exactly k of 0..n-1,
     * evenly spread, the last one being n - 1. */
    uint64_t a = (uint64_t)(i + 1) * k / n, b = (uint64_t)i * k / n;
    return a != b;
}

sim_byzantine *sim_byzantine_create(uint32_t n, uint32_t k, uint32_t dim, sim_byz_attack attack,
                                    double scale, uint64_t seed)
{
    if (k == 0)
        return NULL;
    sim_byzantine *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->n = n;
    b->k = k;
    b->dim = dim;
    b->attack = attack;
    b->scale = scale;
    model_rng_seed(&b->rng, seed, 0x62797a616e74ULL); /* "byzant" */
    b->buf = malloc((size_t)dim * sizeof *b->buf);
    b->sent = calloc(n, sizeof *b->sent);
    if (!b->buf || !b->sent) {
        sim_byzantine_destroy(b);
        return NULL;
    }
    return b;
}

void sim_byzantine_destroy(sim_byzantine *b)
{
    if (!b)
        return;
    free(b->buf);
    free(b->sent);
    free(b);
}

int sim_byzantine_agent(const sim_byzantine *b, uint32_t i)
{
    return b && sim_byzantine_is(b->n, b->k, i);
}

const float *sim_byzantine_outgoing(sim_byzantine *b, uint32_t i, const float *x)
{
    if (!sim_byzantine_agent(b, i))
        return x;
    b->sent[i] = x;
    memcpy(b->buf, x, (size_t)b->dim * sizeof *b->buf);
    sim_byzantine_attack(b->attack, b->scale, &b->rng, b->buf, b->dim);
    return b->buf;
}

const float *sim_byzantine_result(const sim_byzantine *b, uint32_t i, const float *mixed)
{
    if (!sim_byzantine_agent(b, i) || !b->sent[i])
        return mixed;
    return b->sent[i];
}

static float clamp_value(double v)
{
    const double lim = GOSSIP_MIX_VALUE_MAX;
    return (float)(v > lim ? lim : v < -lim ? -lim : v);
}

void sim_byzantine_attack(sim_byz_attack a, double scale, model_rng *rng, float *v, uint32_t n)
{
    switch (a) {
    case SIM_BYZ_SCALE:
        for (uint32_t i = 0; i < n; i++)
            v[i] = clamp_value((double)v[i] * scale);
        break;
    case SIM_BYZ_SIGN_FLIP:
        for (uint32_t i = 0; i < n; i++)
            v[i] = -v[i];
        break;
    case SIM_BYZ_BIT_FLIP:
        for (uint32_t i = 0; i < n; i++) {
            if (!(model_rng_uniform_double(rng) < SIM_BYZ_BITFLIP_P))
                continue;
            uint32_t u;
            memcpy(&u, &v[i], 4);
            u ^= 1u << model_rng_below(rng, 32);
            float f;
            memcpy(&f, &u, 4);
            if (fabsf(f) <= GOSSIP_MIX_VALUE_MAX)
                v[i] = f;
        }
        break;
    case SIM_BYZ_ATTACK_COUNT:
        break;
    }
}
