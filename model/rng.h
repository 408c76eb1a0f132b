/* model_rng — a small, fast, caller-owned pseudo-random generator.
 *
 * xoshiro256** (Blackman & Vigna), seeded through splitmix64. There is no
 * global state: every user (an agent, a simulated agent, a test) owns one
 * model_rng and passes it down, so runs are reproducible bit for bit and the
 * protocol core never touches a global RNG (see scripts/lint.sh).
 *
 * Streams: model_rng_seed(rng, seed, stream) gives independent sequences for
 * the same seed and different stream numbers (one per simulated agent).
 */
#ifndef MODEL_RNG_H
#define MODEL_RNG_H

#include <stddef.h>
#include <stdint.h>

typedef struct model_rng {
    uint64_t s[4];
} model_rng;

/* Seed from (seed, stream); any values are fine, including 0. */
void model_rng_seed(model_rng *rng, uint64_t seed, uint64_t stream);
/* Next 64 uniformly random bits. */
uint64_t model_rng_u64(model_rng *rng);
/* Uniform integer in [0, n); n > 0. Unbiased (Lemire's method). */
uint64_t model_rng_below(model_rng *rng, uint64_t n);
/* Uniform float in [0, 1) with 24 random bits. */
float model_rng_uniform(model_rng *rng);
/* Uniform double in [0, 1) with 53 random bits. */
double model_rng_uniform_double(model_rng *rng);
/* Standard normal (Box-Muller; no cached second value, so stateless). */
double model_rng_normal(model_rng *rng);
/* Gamma(shape, 1) for shape > 0 (Marsaglia-Tsang), used for Dirichlet draws. */
double model_rng_gamma(model_rng *rng, double shape);
/* Fisher-Yates shuffle of n uint32 values. */
void model_rng_shuffle_u32(model_rng *rng, uint32_t *v, uint32_t n);
/* Adapter for callback-style envs: ctx is a model_rng *. */
uint64_t model_rng_callback(void *ctx);
/* n values of model_rng_u64 in one call (gossip_random_fill). */
void model_rng_fill(void *ctx, uint64_t *out, size_t n);

#endif
