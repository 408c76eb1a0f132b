/* gossip/codec — quantized vector codec with error feedback (format and
 * contract in codec.h; derivations in docs/CODEC.md).
 *
 * Implementation notes.
 * - Values are processed in tiles of CODEC_TILE: a tile's random numbers and
 *   integer codes live in two small stack arrays, so encode and decode never
 *   allocate, and every inner loop is a straight loop over plain arrays with
 *   no calls, which GCC vectorizes (see docs/CODEC.md, "Vectorization").
 * - Stochastic rounding uses CODEC_RND_BITS = 16 random bits per decision, so
 *   one 64-bit draw from env->random gives four decisions. Drawing k uniform
 *   in [0, 2^16) and rounding up iff k + 1/2 < frac * 2^16 rounds up with
 *   probability round(frac * 2^16) / 2^16, within 2^-17 of frac: the
 *   quantizer is unbiased to 2^-17 of a quantum (exactly unbiased whenever
 *   frac is a multiple of 2^-16). At 8 bits that is s * 6e-8, below the
 *   float32 rounding of s itself.
 * - The loops that touch every value are SIMD_CLONES (common/simd.h): the
 *   same integer and float operations at every vector width, so the bytes
 *   and the decoded values do not depend on the CPU.
 * - Encoder and decoder compute a decoded value with the very same float
 *   operations ((float)q * step, step = s / L), so the encoder's `decoded`
 *   output is bit-identical to what the receiver decodes.
 */
#include "gossip/codec.h"

/* No fused multiply-add contraction: the quantizer rounds x * (L / s) to
 * float before taking its floor and fraction, and the golden vectors pin
 * that. GCC in ISO C mode (-std=c11) does not contract; Clang does unless
 * told (GCC warns about this pragma, so it is Clang only). */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#include <float.h>
#include <math.h>
#include <string.h>

#include "common/simd.h"
#include "gossip/wire.h"

/* Values per tile: 256 keeps the two stack arrays at 1.5 KiB, long enough for
 * vector loops to amortise their prologue, and equal to the default block so
 * a default block is one tile. */
#define CODEC_TILE 256u
_Static_assert(CODEC_TILE % 8u == 0, "a tile must end on a byte boundary at every width");
_Static_assert(CODEC_TILE % 4u == 0, "one 64-bit draw gives four 16-bit rounding decisions");

#define CODEC_RND_BITS 16
#define CODEC_RND_ONE  65536.0f /* 2^CODEC_RND_BITS */
_Static_assert(64 % CODEC_RND_BITS == 0, "decisions must tile a 64-bit draw");

/* Blocks whose max |x| is below 2^-100 are sent with scale 0 (all zeros).
 * This keeps step = s / L a normal float for every L <= 32767
 * (2^-100 / 2^15 = 2^-115 > FLT_MIN = 2^-126), so (float)q * step is exact
 * to float precision. The absolute error such a block suffers is < 2^-100;
 * with error feedback it stays in the residual and is sent later. */
#define CODEC_SCALE_MIN 0x1p-100f

#define F32_ABS_MASK 0x7fffffffu
#define F32_INF_BITS 0x7f800000u

static inline uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

int gossip_codec_bits_valid(unsigned bits)
{
    return bits == 32 || bits == 16 || bits == 8 || bits == 4 || bits == 2 || bits == 1;
}

/* Largest code magnitude L = 2^(bits-1) - 1 (bits 2..16). */
static inline int32_t codec_levels(unsigned bits)
{
    return (int32_t)((1u << (bits - 1)) - 1u);
}

static size_t block_bytes(uint32_t nb, unsigned bits)
{
    if (bits == 32)
        return (size_t)nb * 4u;
    return 4u + ((size_t)nb * bits + 7u) / 8u;
}

static int codec_params_valid(uint32_t n, unsigned bits, uint32_t block)
{
    return gossip_codec_bits_valid(bits) && block >= 1 && block <= GOSSIP_CODEC_BLOCK_MAX &&
           n >= 1 && n <= GOSSIP_CODEC_DIM_MAX;
}

size_t gossip_codec_size(uint32_t n, unsigned bits, uint32_t block)
{
    if (!codec_params_valid(n, bits, block))
        return 0;
    uint32_t full = n / block, rem = n % block;
    return (size_t)full * block_bytes(block, bits) + (rem ? block_bytes(rem, bits) : 0);
}

/* max over i of the bit pattern of |x[i]|. For non-negative floats the
 * integer order is the float order, and any NaN or infinity maps to a value
 * >= F32_INF_BITS, so one integer max (pmaxud) gives both the block scale and
 * the finiteness check. */
SIMD_CLONES static uint32_t max_abs_bits(const float *restrict x, uint32_t n)
{
    uint32_t m = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t u = f32_bits(x[i]) & F32_ABS_MASK;
        m = u > m ? u : m;
    }
    return m;
}

/* Four 16-bit rounding thresholds per 64-bit draw, low bits first. Fills
 * r[0 .. round_up(nt, 4)); r has CODEC_TILE entries and nt <= CODEC_TILE. */
static void fill_random(const gossip_env *env, uint16_t *r, uint32_t nt)
{
    uint64_t draw[CODEC_TILE / 4];
    gossip_random_fill(env, draw, (nt + 3) / 4);
    for (uint32_t i = 0; i < nt; i += 4) {
        uint64_t v = draw[i / 4];
        r[i] = (uint16_t)v;
        r[i + 1] = (uint16_t)(v >> 16);
        r[i + 2] = (uint16_t)(v >> 32);
        r[i + 3] = (uint16_t)(v >> 48);
    }
}

/* Stochastic rounding of y = x * inv to an integer in [-lim, lim]:
 * floor(y) + 1 with probability ~ frac(y) (see the header comment). */
SIMD_CLONES static void quantize_tile(const float *restrict x, const uint16_t *restrict rnd,
                                      uint32_t nt, float inv, int32_t lim, int32_t *restrict q)
{
    for (uint32_t i = 0; i < nt; i++) {
        float y = x[i] * inv;
        int32_t t = (int32_t)y;    /* |y| <= lim * (1 + 2^-23) < 2^31 */
        t -= (float)t > y;         /* truncation -> floor */
        float frac = y - (float)t; /* exact: |y| < 2^24 */
        int32_t v = t + (((float)rnd[i] + 0.5f) < frac * CODEC_RND_ONE);
        v = v > lim ? lim : v;
        v = v < -lim ? -lim : v;
        q[i] = v;
    }
}

/* 1 bit: bit 1 (+s) with probability (1 + x/s) / 2; inv2 = 0.5 / s. */
SIMD_CLONES static void quantize_tile_sign(const float *restrict x, const uint16_t *restrict rnd,
                                           uint32_t nt, float inv2, int32_t *restrict q)
{
    for (uint32_t i = 0; i < nt; i++) {
        float p = x[i] * inv2 + 0.5f;
        q[i] = ((float)rnd[i] + 0.5f) < p * CODEC_RND_ONE;
    }
}

SIMD_CLONES static void decoded_tile(const int32_t *restrict q, uint32_t nt, float step,
                                     float *restrict d)
{
    for (uint32_t i = 0; i < nt; i++)
        d[i] = (float)q[i] * step;
}

/* 1 bit: (2b - 1) * s is exactly +s or -s. */
SIMD_CLONES static void decoded_tile_sign(const int32_t *restrict q, uint32_t nt, float s,
                                          float *restrict d)
{
    for (uint32_t i = 0; i < nt; i++)
        d[i] = (float)(2 * q[i] - 1) * s;
}

/* Pack nt codes of `bits` bits, two's complement (low `bits` bits of q),
 * bit i of the stream = bit i % 8 of byte i / 8. Writes ceil(nt*bits/8)
 * bytes, padding bits zero. */
SIMD_CLONES static void pack_tile(const int32_t *restrict q, uint32_t nt, unsigned bits,
                                  uint8_t *restrict p)
{
    uint32_t i, j;
    switch (bits) {
    case 16:
        for (i = 0; i < nt; i++) {
            uint32_t v = (uint32_t)q[i];
            p[2 * i] = (uint8_t)v;
            p[2 * i + 1] = (uint8_t)(v >> 8);
        }
        return;
    case 8:
        for (i = 0; i < nt; i++)
            p[i] = (uint8_t)(uint32_t)q[i];
        return;
    case 4:
        for (j = 0; j < nt / 2; j++)
            p[j] = (uint8_t)(((uint32_t)q[2 * j] & 15u) | (((uint32_t)q[2 * j + 1] & 15u) << 4));
        i = nt / 2 * 2;
        break;
    case 2:
        for (j = 0; j < nt / 4; j++)
            p[j] = (uint8_t)(((uint32_t)q[4 * j] & 3u) | (((uint32_t)q[4 * j + 1] & 3u) << 2) |
                             (((uint32_t)q[4 * j + 2] & 3u) << 4) |
                             (((uint32_t)q[4 * j + 3] & 3u) << 6));
        i = nt / 4 * 4;
        break;
    default: /* 1 */
        /* spelled out (not a k loop) so that GCC's SLP groups the 8 loads */
        for (j = 0; j < nt / 8; j++) {
            const int32_t *g = q + 8 * j;
            p[j] = (uint8_t)(((uint32_t)g[0] & 1u) | (((uint32_t)g[1] & 1u) << 1) |
                             (((uint32_t)g[2] & 1u) << 2) | (((uint32_t)g[3] & 1u) << 3) |
                             (((uint32_t)g[4] & 1u) << 4) | (((uint32_t)g[5] & 1u) << 5) |
                             (((uint32_t)g[6] & 1u) << 6) | (((uint32_t)g[7] & 1u) << 7));
        }
        i = nt / 8 * 8;
        break;
    }
    /* Partial last byte (4, 2 and 1 bits only). */
    if (i < nt) {
        uint32_t b = 0, mask = (1u << bits) - 1u;
        for (uint32_t k = 0; i + k < nt; k++)
            b |= ((uint32_t)q[i + k] & mask) << (k * bits);
        p[i * bits / 8] = (uint8_t)b;
    }
}

/* Byte swap for the big-endian float32 values. On a little-endian host
 * with GCC or Clang the loops below are a bswap per value, which vectorizes
 * to pshufb; elsewhere the portable byte-wise form is used. */
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define CODEC_LE_BSWAP 1
#else
#define CODEC_LE_BSWAP 0
#endif

SIMD_CLONES static void put_be32(uint8_t *restrict p, const float *restrict x, uint32_t n)
{
#if CODEC_LE_BSWAP
    for (uint32_t i = 0; i < n; i++) {
        uint32_t u = __builtin_bswap32(f32_bits(x[i]));
        memcpy(p + 4 * (size_t)i, &u, sizeof u);
    }
#else
    for (uint32_t i = 0; i < n; i++)
        gossip_put_u32(p + 4 * (size_t)i, f32_bits(x[i]));
#endif
}

/* put_be32 that also returns max_abs_bits(x, n): one pass instead of two
 * (a 32-bit chunk is checked and stored at once; out is unspecified when
 * the result is >= F32_INF_BITS). */
SIMD_CLONES static uint32_t put_be32_max(uint8_t *restrict p, const float *restrict x, uint32_t n)
{
    uint32_t m = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t u = f32_bits(x[i]);
        uint32_t a = u & F32_ABS_MASK;
        m = a > m ? a : m;
#if CODEC_LE_BSWAP
        u = __builtin_bswap32(u);
        memcpy(p + 4 * (size_t)i, &u, sizeof u);
#else
        gossip_put_u32(p + 4 * (size_t)i, u);
#endif
    }
    return m;
}

/* Encode one quantized block of nb values (bits 1..16) at p. */
SIMD_CLONES static void encode_block(const gossip_env *env, const float *x, uint32_t nb,
                                     unsigned bits, float s, uint8_t *p, float *decoded)
{
    uint16_t rnd[CODEC_TILE];
    int32_t q[CODEC_TILE];
    const int32_t lim = bits == 1 ? 1 : codec_levels(bits);
    const float limf = (float)lim;
    const float step = s / limf;
    const float inv = s > 0.0f ? (bits == 1 ? 0.5f / s : limf / s) : 0.0f;

    gossip_put_u32(p, f32_bits(s));
    p += 4;
    for (uint32_t off = 0; off < nb; off += CODEC_TILE) {
        uint32_t nt = nb - off < CODEC_TILE ? nb - off : CODEC_TILE;
        fill_random(env, rnd, nt);
        if (bits == 1)
            quantize_tile_sign(x + off, rnd, nt, inv, q);
        else
            quantize_tile(x + off, rnd, nt, inv, lim, q);
        pack_tile(q, nt, bits, p + (size_t)off * bits / 8u);
        if (decoded) {
            if (bits == 1)
                decoded_tile_sign(q, nt, s, decoded + off);
            else
                decoded_tile(q, nt, step, decoded + off);
        }
    }
}

/* The scale sent for a block whose largest |x| has bit pattern m (finite). */
static float block_scale(uint32_t m, unsigned bits, float limf)
{
    float s = f32_from_bits(m);
    if (s < CODEC_SCALE_MIN)
        return 0.0f;
    /* The decoder rejects a scale whose largest level L * (s / L) overflows;
     * only s within a few ulps of FLT_MAX can. Stepping s down by ulps costs
     * at most a clamp of the largest value by those ulps. */
    while (bits > 1 && !(limf * (s / limf) <= FLT_MAX))
        s = nextafterf(s, 0.0f);
    return s;
}

int gossip_codec_encode(const gossip_env *env, const float *x, uint32_t n, unsigned bits,
                        uint32_t block, uint8_t *out, size_t cap, float *decoded)
{
    if (!env || !x || !out || !codec_params_valid(n, bits, block))
        return GOSSIP_EINVAL;
    if (cap < gossip_codec_size(n, bits, block))
        return GOSSIP_ESPACE;

    if (bits == 32) {
        if (put_be32_max(out, x, n) >= F32_INF_BITS)
            return GOSSIP_ENONFINITE;
        if (decoded && decoded != x)
            memcpy(decoded, x, (size_t)n * sizeof *x);
        return GOSSIP_OK;
    }

    const float limf = bits == 1 ? 1.0f : (float)codec_levels(bits);
    uint8_t *p = out;
    for (uint32_t off = 0; off < n; off += block) {
        uint32_t nb = n - off < block ? n - off : block;
        uint32_t m = max_abs_bits(x + off, nb);
        if (m >= F32_INF_BITS)
            return GOSSIP_ENONFINITE;
        encode_block(env, x + off, nb, bits, block_scale(m, bits, limf), p,
                     decoded ? decoded + off : NULL);
        p += block_bytes(nb, bits);
    }
    return GOSSIP_OK;
}

/* Decode nb codes of `bits` bits (2..16) at p with step; returns nonzero if
 * a code equals -2^(bits-1), which the encoder never produces. */
SIMD_CLONES static uint32_t decode_codes(const uint8_t *restrict p, uint32_t nb, unsigned bits,
                                         float step, float *restrict out)
{
    uint32_t bad = 0, i, j;
    switch (bits) {
    case 16:
        for (i = 0; i < nb; i++) {
#if CODEC_LE_BSWAP
            uint16_t h;
            memcpy(&h, p + 2 * (size_t)i, sizeof h);
            uint32_t v = h;
#else
            uint32_t v = (uint32_t)p[2 * i] | ((uint32_t)p[2 * i + 1] << 8);
#endif
            bad |= v == 0x8000u;
            out[i] = (float)((int32_t)(v ^ 0x8000u) - 0x8000) * step;
        }
        return bad;
    case 8:
        for (i = 0; i < nb; i++) {
            uint32_t v = p[i];
            bad |= v == 0x80u;
            out[i] = (float)((int32_t)(v ^ 0x80u) - 0x80) * step;
        }
        return bad;
    case 4:
        for (j = 0; j < nb / 2; j++) {
            uint32_t lo = p[j] & 15u, hi = (uint32_t)p[j] >> 4;
            bad |= (lo == 8u) | (hi == 8u);
            out[2 * j] = (float)((int32_t)(lo ^ 8u) - 8) * step;
            out[2 * j + 1] = (float)((int32_t)(hi ^ 8u) - 8) * step;
        }
        i = nb / 2 * 2;
        break;
    default: /* 2 */
        /* spelled out (not a k loop) so that GCC's SLP groups the 4 stores */
        for (j = 0; j < nb / 4; j++) {
            uint32_t b = p[j];
            uint32_t v0 = b & 3u, v1 = (b >> 2) & 3u, v2 = (b >> 4) & 3u, v3 = b >> 6;
            bad |= (v0 == 2u) | (v1 == 2u) | (v2 == 2u) | (v3 == 2u);
            out[4 * j] = (float)((int32_t)(v0 ^ 2u) - 2) * step;
            out[4 * j + 1] = (float)((int32_t)(v1 ^ 2u) - 2) * step;
            out[4 * j + 2] = (float)((int32_t)(v2 ^ 2u) - 2) * step;
            out[4 * j + 3] = (float)((int32_t)(v3 ^ 2u) - 2) * step;
        }
        i = nb / 4 * 4;
        break;
    }
    /* Partial last byte. */
    const uint32_t mask = (1u << bits) - 1u, sign = 1u << (bits - 1);
    for (; i < nb; i++) {
        uint32_t v = ((uint32_t)p[i * bits / 8] >> (i * bits % 8)) & mask;
        bad |= v == sign;
        out[i] = (float)((int32_t)(v ^ sign) - (int32_t)sign) * step;
    }
    return bad;
}

/* 1 bit: (2b - 1) * s. Whole bytes first, spelled out for SLP. */
SIMD_CLONES static void decode_signs(const uint8_t *restrict p, uint32_t nb, float s,
                                     float *restrict out)
{
    uint32_t j;
    for (j = 0; j < nb / 8; j++) {
        int32_t b = p[j];
        float *o = out + 8 * j;
        o[0] = (float)(2 * (b & 1) - 1) * s;
        o[1] = (float)(2 * ((b >> 1) & 1) - 1) * s;
        o[2] = (float)(2 * ((b >> 2) & 1) - 1) * s;
        o[3] = (float)(2 * ((b >> 3) & 1) - 1) * s;
        o[4] = (float)(2 * ((b >> 4) & 1) - 1) * s;
        o[5] = (float)(2 * ((b >> 5) & 1) - 1) * s;
        o[6] = (float)(2 * ((b >> 6) & 1) - 1) * s;
        o[7] = (float)(2 * (b >> 7) - 1) * s;
    }
    for (uint32_t i = j * 8; i < nb; i++) {
        int32_t b = (p[i / 8] >> (i % 8)) & 1;
        out[i] = (float)(2 * b - 1) * s;
    }
}

/* Returns the max over i of |bits of out[i]| after a big-endian load. */
SIMD_CLONES static uint32_t get_be32(const uint8_t *restrict p, uint32_t n, float *restrict out)
{
    uint32_t m = 0;
    for (uint32_t i = 0; i < n; i++) {
#if CODEC_LE_BSWAP
        uint32_t u;
        memcpy(&u, p + 4 * (size_t)i, sizeof u);
        u = __builtin_bswap32(u);
#else
        uint32_t u = gossip_get_u32(p + 4 * (size_t)i);
#endif
        uint32_t a = u & F32_ABS_MASK;
        m = a > m ? a : m;
        out[i] = f32_from_bits(u);
    }
    return m;
}

static int decode_blocks(const uint8_t *in, uint32_t n, unsigned bits, uint32_t block, float *out)
{
    if (bits == 32)
        return get_be32(in, n, out) >= F32_INF_BITS ? GOSSIP_ENONFINITE : GOSSIP_OK;

    const float limf = bits == 1 ? 1.0f : (float)codec_levels(bits);
    const uint8_t *p = in;
    for (uint32_t off = 0; off < n; off += block) {
        uint32_t nb = n - off < block ? n - off : block;
        uint32_t sb = gossip_get_u32(p);
        /* Negative (including -0), infinite or NaN scales are rejected. */
        if (sb >= F32_INF_BITS)
            return GOSSIP_ENONFINITE;
        float s = f32_from_bits(sb);
        if (bits == 1) {
            decode_signs(p + 4, nb, s, out + off);
        } else {
            float step = s / limf;
            if (!(limf * step <= FLT_MAX)) /* the largest level would overflow */
                return GOSSIP_ENONFINITE;
            if (decode_codes(p + 4, nb, bits, step, out + off))
                return GOSSIP_EMALFORMED;
        }
        p += block_bytes(nb, bits);
    }
    return GOSSIP_OK;
}

int gossip_codec_decode(const uint8_t *in, size_t len, uint32_t n, unsigned bits, uint32_t block,
                        float *out)
{
    if (!out || !codec_params_valid(n, bits, block))
        return GOSSIP_EINVAL;
    int rc = GOSSIP_EMALFORMED;
    if (in && len == gossip_codec_size(n, bits, block))
        rc = decode_blocks(in, n, bits, block, out);
    if (rc != GOSSIP_OK)
        memset(out, 0, (size_t)n * sizeof *out);
    return rc;
}

int gossip_ef_init(gossip_ef *ef, const gossip_env *env, uint32_t n, unsigned bits, uint32_t block,
                   const float *initial)
{
    if (!ef || !env)
        return GOSSIP_EINVAL;
    memset(ef, 0, sizeof *ef);
    if (!codec_params_valid(n, bits, block) || bits == 1)
        return GOSSIP_EINVAL;
    if (initial && max_abs_bits(initial, n) >= F32_INF_BITS)
        return GOSSIP_EINVAL;
    ef->ref = gossip_calloc(env, n, sizeof(float));
    ef->residual = gossip_calloc(env, n, sizeof(float));
    ef->scratch = gossip_calloc(env, n, sizeof(float));
    if (!ef->ref || !ef->residual || !ef->scratch) {
        gossip_ef_free(ef, env);
        return GOSSIP_ENOMEM;
    }
    if (initial)
        memcpy(ef->ref, initial, (size_t)n * sizeof(float));
    ef->n = n;
    ef->bits = bits;
    ef->block = block;
    return GOSSIP_OK;
}

void gossip_ef_free(gossip_ef *ef, const gossip_env *env)
{
    if (!ef || !env)
        return;
    gossip_free(env, ef->ref);
    gossip_free(env, ef->residual);
    gossip_free(env, ef->scratch);
    memset(ef, 0, sizeof *ef);
}

/* |ref| and |x - ref| must stay below 2^126 for ef_encode to proceed. Then
 * |ref + q| <= 2^126 + 2^126 * (1 + 2^-22) < FLT_MAX, so the reference never
 * overflows; values that large are garbage in any model anyway. */
#define CODEC_EF_ABS_BITS 0x7e800000u /* bits of 2^126 */

/* max |bits| over x - ref and ref, without storing (a NaN or infinity gives
 * >= F32_INF_BITS > CODEC_EF_ABS_BITS). */
static uint32_t ef_check(const float *restrict x, const float *restrict ref, uint32_t n)
{
    uint32_t m = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t u = f32_bits(x[i] - ref[i]) & F32_ABS_MASK;
        uint32_t v = f32_bits(ref[i]) & F32_ABS_MASK;
        u = u > v ? u : v;
        m = u > m ? u : m;
    }
    return m;
}

/* delta = x - ref; returns max |bits| of delta. */
static uint32_t ef_delta(const float *restrict x, const float *restrict ref, uint32_t n,
                         float *restrict delta)
{
    uint32_t m = 0;
    for (uint32_t i = 0; i < n; i++) {
        float d = x[i] - ref[i];
        uint32_t u = f32_bits(d) & F32_ABS_MASK;
        m = u > m ? u : m;
        delta[i] = d;
    }
    return m;
}

static void ef_update(const float *restrict delta, const float *q, uint32_t n, float *restrict ref,
                      float *residual)
{
    for (uint32_t i = 0; i < n; i++) {
        float qi = q[i]; /* q may alias residual */
        ref[i] += qi;
        residual[i] = delta[i] - qi;
    }
}

int gossip_ef_encode(gossip_ef *ef, const gossip_env *env, const float *x, uint8_t *out, size_t cap,
                     float *q_out)
{
    if (!ef || !env || !x || !out || !ef->ref)
        return GOSSIP_EINVAL;
    const uint32_t n = ef->n, block = ef->block;
    const unsigned bits = ef->bits;
    if (cap < gossip_codec_size(n, bits, block))
        return GOSSIP_ESPACE;
    /* Checked before anything changes, so a failed call leaves ef untouched
     * and every block below succeeds. */
    if (ef_check(x, ef->ref, n) >= CODEC_EF_ABS_BITS)
        return GOSSIP_ENONFINITE;
    /* delta = x - ref: the new motion plus the error not yet sent (which is
     * exactly the previous x - ref). One block at a time, so delta, q, ref
     * and residual of a block are still in cache for the update. residual is
     * rewritten from delta and q, so it can receive q. */
    float *q = q_out ? q_out : ef->residual;
    float *delta = ef->scratch;
    const float limf = bits == 1 ? 1.0f : (float)codec_levels(bits);
    uint8_t *p = out;
    for (uint32_t off = 0; off < n; off += block) {
        uint32_t nb = n - off < block ? n - off : block;
        uint32_t m = ef_delta(x + off, ef->ref + off, nb, delta + off);
        if (bits == 32) {
            put_be32(p, delta + off, nb);
            memcpy(q + off, delta + off, (size_t)nb * sizeof *q);
        } else {
            encode_block(env, delta + off, nb, bits, block_scale(m, bits, limf), p, q + off);
        }
        ef_update(delta + off, q + off, nb, ef->ref + off, ef->residual + off);
        p += block_bytes(nb, bits);
    }
    return GOSSIP_OK;
}
