/* gossip/codec — quantized vector codec with error feedback.
 *
 * A vector of n float32 values is cut into blocks of `block` values (the last
 * block may be shorter). Each block is sent as one float32 scale followed by
 * n_block values of `bits` bits each, packed little-endian-first within bytes
 * (bit i of the packed stream is bit (i % 8) of byte i / 8), the whole block's
 * packed bits padded to a whole byte.
 *
 *   bits = 32: the raw float32 values (big-endian), no scale.
 *   bits = 16, 8, 4, 2: scale s = max |x| over the block; a value is sent as a
 *       signed integer q in [-(2^(bits-1) - 1), 2^(bits-1) - 1] with x ~ q * s / L,
 *       L = 2^(bits-1) - 1, rounded stochastically (unbiased: E[decoded] = x).
 *   bits = 1: scale s = max |x|; the bit chooses +s or -s with probability
 *       (1 + x/s) / 2, so E[decoded] = x (unbiased sign quantization).
 *
 * Encoded size is a pure function of (n, bits, block):
 *   gossip_codec_size(n, bits, block). Bytes on the wire are counted exactly
 *   from it.
 *
 * Decoding validates: the size must equal gossip_codec_size for the expected
 * n, every scale and every 32-bit value must be finite, scales >= 0.
 *
 * Codes are two's complement in `bits` bits (16-bit codes are therefore
 * little-endian int16; the scale is a big-endian float32). The code
 * -2^(bits-1) is never produced and is rejected by the decoder. A decoded
 * value is (float)q * (s / L) in float32 arithmetic (1 bit: +s or -s), so the
 * encoder's `decoded` output is bit-identical to what a receiver decodes.
 *
 * Error feedback (gossip_ef): the sender keeps `ref`, the receiver-visible
 * reference (what the peers have reconstructed so far), and `residual`, the
 * quantization error not yet sent. To send x:
 *   delta = x - ref;  q = Q(delta);  ref += q;  residual = delta - q
 * delta already holds the previous residual (x - ref is the new motion plus
 * the error not yet sent), so the residual is not added a second time. The
 * running sum of what was sent (ref) never strays from the true value x by
 * more than one quantum (of that step's block scale) per value.
 *
 * Randomness for stochastic rounding comes from the env (gossip_env.random);
 * no allocation happens in encode/decode: the caller owns every buffer.
 */
#ifndef GOSSIP_CODEC_H
#define GOSSIP_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "gossip/env.h"

#define GOSSIP_CODEC_BLOCK_DEFAULT 256u
#define GOSSIP_CODEC_BLOCK_MAX     65536u
#define GOSSIP_CODEC_DIM_MAX       (16u * 1024u * 1024u) /* values per vector */

/* 1 if bits is one of 32, 16, 8, 4, 2, 1. */
int gossip_codec_bits_valid(unsigned bits);

/* Exact encoded size in bytes of n values; 0 if bits/block are invalid or n is
 * 0 or above GOSSIP_CODEC_DIM_MAX (every call below needs 1 <= n <= max). */
size_t gossip_codec_size(uint32_t n, unsigned bits, uint32_t block);

/* Quantize x[0..n) into out (cap bytes). Returns GOSSIP_OK, GOSSIP_EINVAL
 * (bad bits/block/n), GOSSIP_ESPACE (cap < gossip_codec_size) or
 * GOSSIP_ENONFINITE (x holds a NaN or infinity). If `decoded` is not NULL it
 * receives exactly what the receiver will decode (used for error feedback and
 * public copies without a second pass). On error the contents of out and
 * decoded are unspecified. */
int gossip_codec_encode(const gossip_env *env, const float *x, uint32_t n, unsigned bits,
                        uint32_t block, uint8_t *out, size_t cap, float *decoded);

/* Decode len bytes holding n values into out[0..n). Returns GOSSIP_OK,
 * GOSSIP_EINVAL (bad bits/block/n), GOSSIP_EMALFORMED (len differs from
 * gossip_codec_size, or a code -2^(bits-1)) or GOSSIP_ENONFINITE (a
 * non-finite scale or value, a negative scale including -0, or a scale whose
 * largest level L * (s / L) overflows). On error out is left zeroed. n >= 1. */
int gossip_codec_decode(const uint8_t *in, size_t len, uint32_t n, unsigned bits, uint32_t block,
                        float *out);

/* Error-feedback sender state for one vector stream (one per link or one per
 * agent, as the algorithm needs). */
typedef struct gossip_ef {
    uint32_t n;
    unsigned bits;
    uint32_t block;
    float *ref;      /* receiver-visible reference, n values */
    float *residual; /* error not yet transmitted, n values */
    float *scratch;  /* n values */
} gossip_ef;

/* Allocate through env; ref starts at `initial` (or zero if NULL). Returns
 * GOSSIP_OK, GOSSIP_EINVAL (bad parameters, bits == 1, or `initial` not
 * finite) or GOSSIP_ENOMEM (nothing left allocated).
 * bits == 1 is refused: with unbiased sign quantization the residual can be
 * 2s (both levels are s away from 0), the next block scale grows with it and
 * the error grows geometrically (measured: |ref - x| reaches 1e29 after 128
 * steps of a random walk; see docs/CODEC.md). Every other width is stable. */
int gossip_ef_init(gossip_ef *ef, const gossip_env *env, uint32_t n, unsigned bits, uint32_t block,
                   const float *initial);
void gossip_ef_free(gossip_ef *ef, const gossip_env *env);
/* Encode x as a delta against ef->ref with error feedback; afterwards ef->ref
 * equals what the receiver holds. If q_out is not NULL it receives the decoded
 * delta. Errors as gossip_codec_encode; GOSSIP_ENONFINITE if x - ref is not
 * finite or |x - ref| or |ref| reaches 2^126 (so ref can never overflow). On
 * error ef is unchanged and out must not be sent. */
int gossip_ef_encode(gossip_ef *ef, const gossip_env *env, const float *x, uint8_t *out, size_t cap,
                     float *q_out);

#endif
