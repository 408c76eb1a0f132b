/* tests/harness — shared by every cmocka suite.
 *
 * test_env: a gossip_env whose allocator counts live allocations and can be
 * told to fail the Nth one (fail-the-Nth-allocation tests), and whose RNG is
 * a seeded model_rng. A seeded test prints its seed with TEST_SEED so a
 * failure is reproducible.
 */
#ifndef TESTS_HARNESS_H
#define TESTS_HARNESS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "gossip/env.h"
#include "model/rng.h"

typedef struct test_alloc {
    long live;    /* allocations not yet freed */
    long count;   /* allocations attempted */
    long fail_at; /* fail the allocation whose 1-based index is this; 0 = never */
} test_alloc;

typedef struct test_env {
    gossip_env env;
    test_alloc alloc;
    model_rng rng;
} test_env;

/* Initialise with a seed; allocations never fail until fail_at is set. */
void test_env_init(test_env *t, uint64_t seed);

/* Seed for seeded tests: $MURMUR_TEST_SEED if set, else `fallback`. */
uint64_t test_seed(uint64_t fallback);

#endif
