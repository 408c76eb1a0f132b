#include "tests/harness.h"

#include <stdlib.h>

static void *t_alloc(void *ctx, size_t size)
{
    test_alloc *a = ctx;
    a->count++;
    if (a->fail_at && a->count == a->fail_at)
        return NULL;
    void *p = malloc(size ? size : 1);
    if (p)
        a->live++;
    return p;
}

static void t_free(void *ctx, void *p)
{
    test_alloc *a = ctx;
    if (p) {
        a->live--;
        free(p);
    }
}

void test_env_init(test_env *t, uint64_t seed)
{
    t->alloc.live = 0;
    t->alloc.count = 0;
    t->alloc.fail_at = 0;
    model_rng_seed(&t->rng, seed, 0);
    t->env.alloc = t_alloc;
    t->env.free = t_free;
    t->env.random = model_rng_callback;
    t->env.alloc_ctx = &t->alloc;
    t->env.random_ctx = &t->rng;
}

uint64_t test_seed(uint64_t fallback)
{
    const char *s = getenv("MURMUR_TEST_SEED");
    return s ? strtoull(s, NULL, 0) : fallback;
}
