#include "gossip/env.h"

#include <string.h>

#include "model/rng.h"

void *gossip_alloc(const gossip_env *env, size_t size)
{
    return env->alloc(env->alloc_ctx, size);
}

void *gossip_calloc(const gossip_env *env, size_t count, size_t size)
{
    if (size != 0 && count > SIZE_MAX / size)
        return NULL;
    void *p = env->alloc(env->alloc_ctx, count * size);
    if (p)
        memset(p, 0, count * size);
    return p;
}

void gossip_free(const gossip_env *env, void *p)
{
    if (p)
        env->free(env->alloc_ctx, p);
}

uint64_t gossip_random(const gossip_env *env)
{
    return env->random(env->random_ctx);
}

void gossip_random_fill(const gossip_env *env, uint64_t *out, size_t n)
{
    /* The stream of a model_rng (the agent's, the simulator's, the
     * tests'): drawn in one call, the very values n calls would return. */
    if (env->random == model_rng_callback) {
        model_rng_fill(env->random_ctx, out, n);
        return;
    }
    for (size_t i = 0; i < n; i++)
        out[i] = env->random(env->random_ctx);
}

uint64_t gossip_random_below(const gossip_env *env, uint64_t n)
{
    /* Rejection sampling keeps the draw unbiased for any n. */
    uint64_t limit = UINT64_MAX - (UINT64_MAX % n);
    uint64_t x;
    do {
        x = gossip_random(env);
    } while (x >= limit);
    return x % n;
}

float gossip_random_unit(const gossip_env *env)
{
    return (float)(gossip_random(env) >> 40) * (1.0f / 16777216.0f);
}
