/* gossip_env — what the sans-IO protocol core gets from its caller.
 *
 * The core (gossip/) never reads a clock, opens a socket, starts a thread,
 * sleeps or calls a global RNG. Time is an argument of every entry point
 * (`now_us`, microseconds on the caller's monotonic clock; the simulator's
 * virtual clock or CLOCK_MONOTONIC in the agent). Memory and randomness come
 * through this env, so tests can fail the Nth allocation and the simulator
 * can give every agent its own seeded stream.
 *
 * Contract:
 * - alloc(ctx, size) returns memory aligned for any type, or NULL; the core
 *   treats NULL as "out of memory", fails the operation with GOSSIP_ENOMEM and
 *   stays valid.
 * - free(ctx, p) releases memory from alloc; p may be NULL.
 * - random(ctx) returns 64 uniformly random bits.
 * The env must outlive every object created with it.
 */
#ifndef GOSSIP_ENV_H
#define GOSSIP_ENV_H

#include <stddef.h>
#include <stdint.h>

typedef struct gossip_env {
    void *(*alloc)(void *ctx, size_t size);
    void (*free)(void *ctx, void *p);
    uint64_t (*random)(void *ctx);
    void *alloc_ctx;
    void *random_ctx;
} gossip_env;

/* Helpers used inside the core. */
void *gossip_alloc(const gossip_env *env, size_t size);
void *gossip_calloc(const gossip_env *env, size_t count, size_t size);
void gossip_free(const gossip_env *env, void *p);
uint64_t gossip_random(const gossip_env *env);
/* n values of gossip_random's stream at once (the codec's stochastic
 * rounding takes a tile's draws in one call): for a model_rng stream
 * (model/rng.h) drawn directly, else n calls of random. */
void gossip_random_fill(const gossip_env *env, uint64_t *out, size_t n);
/* Uniform integer in [0, n); n > 0. */
uint64_t gossip_random_below(const gossip_env *env, uint64_t n);
/* Uniform float in [0, 1) with 24 random bits. */
float gossip_random_unit(const gossip_env *env);

/* Time in microseconds; GOSSIP_TIME_NEVER means "no deadline". */
typedef uint64_t gossip_time_us;
#define GOSSIP_TIME_NEVER UINT64_MAX

#endif
