#include "model/rng.h"

#include <math.h>

__extension__ typedef unsigned __int128 u128;

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void model_rng_seed(model_rng *rng, uint64_t seed, uint64_t stream)
{
    /* Mix the stream number through splitmix first so that consecutive
     * streams start far apart in splitmix's sequence. */
    uint64_t x = seed ^ 0x6a09e667f3bcc909ULL;
    uint64_t st = stream + 0x3c6ef372fe94f82bULL;
    x ^= splitmix64(&st);
    for (int i = 0; i < 4; i++)
        rng->s[i] = splitmix64(&x);
    if ((rng->s[0] | rng->s[1] | rng->s[2] | rng->s[3]) == 0)
        rng->s[0] = 1;
}

static inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t model_rng_u64(model_rng *rng)
{
    uint64_t *s = rng->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint64_t model_rng_below(model_rng *rng, uint64_t n)
{
    /* Lemire's nearly divisionless method, 64-bit via __int128. */
    u128 m = (u128)model_rng_u64(rng) * n;
    uint64_t low = (uint64_t)m;
    if (low < n) {
        uint64_t threshold = -n % n;
        while (low < threshold) {
            m = (u128)model_rng_u64(rng) * n;
            low = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

float model_rng_uniform(model_rng *rng)
{
    return (float)(model_rng_u64(rng) >> 40) * (1.0f / 16777216.0f);
}

double model_rng_uniform_double(model_rng *rng)
{
    return (double)(model_rng_u64(rng) >> 11) * (1.0 / 9007199254740992.0);
}

double model_rng_normal(model_rng *rng)
{
    double u1 = 1.0 - model_rng_uniform_double(rng); /* (0, 1] */
    double u2 = model_rng_uniform_double(rng);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

double model_rng_gamma(model_rng *rng, double shape)
{
    if (shape < 1.0) {
        /* Boost: G(a) = G(a + 1) * U^(1/a). */
        double u = 1.0 - model_rng_uniform_double(rng);
        return model_rng_gamma(rng, shape + 1.0) * pow(u, 1.0 / shape);
    }
    double d = shape - 1.0 / 3.0;
    double c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x, v;
        do {
            x = model_rng_normal(rng);
            v = 1.0 + c * x;
        } while (v <= 0.0);
        v = v * v * v;
        double u = 1.0 - model_rng_uniform_double(rng);
        if (u < 1.0 - 0.0331 * x * x * x * x)
            return d * v;
        if (log(u) < 0.5 * x * x + d * (1.0 - v + log(v)))
            return d * v;
    }
}

void model_rng_shuffle_u32(model_rng *rng, uint32_t *v, uint32_t n)
{
    for (uint32_t i = n; i > 1; i--) {
        uint32_t j = (uint32_t)model_rng_below(rng, i);
        uint32_t t = v[i - 1];
        v[i - 1] = v[j];
        v[j] = t;
    }
}

uint64_t model_rng_callback(void *ctx)
{
    return model_rng_u64((model_rng *)ctx);
}

void model_rng_fill(void *ctx, uint64_t *out, size_t n)
{
    model_rng *rng = ctx;
    for (size_t i = 0; i < n; i++)
        out[i] = model_rng_u64(rng);
}
