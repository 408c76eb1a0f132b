/* fuzz_codec — libFuzzer target for gossip/codec (make fuzz).
 *
 * Input layout: byte 0 picks the width (one of 32/16/8/4/2/1), bytes 1-2 the
 * block (1 + v % 1024), bytes 3-4 the count (1 + v % 4096), byte 5 the mode;
 * the rest is the payload.
 *   mode even: the payload is an encoding to decode. The decoder must either
 *     fail with out all zero, or succeed with every value finite; then the
 *     decoded vector is re-encoded and decoded again, and every value must
 *     come back within one quantum (bit-identical at 32 bits).
 *   mode odd: the payload is float32 input to encode (padded with zeros).
 *     Encoding fails only for non-finite input; otherwise the decoded copy
 *     must equal the decoding of the bytes, within one quantum of the input.
 * Any violation aborts, which libFuzzer reports with the input.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/codec.h"
#include "gossip/wire.h"
#include "model/rng.h"

#define FUZZ_N_MAX     4096u
#define FUZZ_BLOCK_MAX 1024u

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void *f_alloc(void *ctx, size_t n)
{
    (void)ctx;
    return malloc(n ? n : 1);
}

static void f_free(void *ctx, void *p)
{
    (void)ctx;
    free(p);
}

static float x[FUZZ_N_MAX], a[FUZZ_N_MAX], b[FUZZ_N_MAX];

static void check(int ok)
{
    if (!ok)
        abort();
}

/* Every value of got within one quantum of want, block by block. */
static void check_close(const float *want, const float *got, uint32_t n, unsigned bits,
                        uint32_t block)
{
    for (uint32_t off = 0; off < n; off += block) {
        uint32_t nb = n - off < block ? n - off : block;
        double s = 0.0;
        for (uint32_t i = off; i < off + nb; i++)
            s = fmax(s, fabs((double)want[i]));
        double L = bits == 1 ? 0.5 : (double)((1u << (bits - 1)) - 1u);
        double tol = s / L + 4.0 * s * 1.2e-7 + 0x1p-100;
        for (uint32_t i = off; i < off + nb; i++) {
            if (bits == 32)
                check(memcmp(&want[i], &got[i], sizeof(float)) == 0);
            else
                check(fabs((double)got[i] - (double)want[i]) <= tol);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const unsigned widths[] = {32, 16, 8, 4, 2, 1};
    if (size < 6)
        return 0;
    unsigned bits = widths[data[0] % 6];
    uint32_t block = 1 + (uint32_t)((data[1] << 8 | data[2]) % FUZZ_BLOCK_MAX);
    uint32_t n = 1 + (uint32_t)((data[3] << 8 | data[4]) % FUZZ_N_MAX);
    int encode_mode = data[5] & 1;
    const uint8_t *payload = data + 6;
    size_t plen = size - 6;

    model_rng rng;
    model_rng_seed(&rng, 7, 0);
    gossip_env env = {f_alloc, f_free, model_rng_callback, NULL, &rng};
    size_t need = gossip_codec_size(n, bits, block);
    check(need > 0);
    uint8_t *enc = malloc(need);
    check(enc != NULL);

    if (!encode_mode) {
        /* exact-size copy so that ASan sees any read past the end */
        uint8_t *in = malloc(plen ? plen : 1);
        check(in != NULL);
        memcpy(in, payload, plen);
        int rc = gossip_codec_decode(in, plen, n, bits, block, a);
        free(in);
        if (rc != GOSSIP_OK) {
            check(rc == GOSSIP_EMALFORMED || rc == GOSSIP_ENONFINITE);
            for (uint32_t i = 0; i < n; i++)
                check(a[i] == 0.0f && !signbit(a[i]));
        } else {
            for (uint32_t i = 0; i < n; i++)
                check(isfinite(a[i]));
            check(gossip_codec_encode(&env, a, n, bits, block, enc, need, NULL) == GOSSIP_OK);
            check(gossip_codec_decode(enc, need, n, bits, block, b) == GOSSIP_OK);
            check_close(a, b, n, bits, block);
        }
    } else {
        memset(x, 0, n * sizeof(float));
        memcpy(x, payload, plen < n * sizeof(float) ? plen : n * sizeof(float));
        int finite = 1;
        for (uint32_t i = 0; i < n; i++)
            finite &= isfinite(x[i]) != 0;
        int rc = gossip_codec_encode(&env, x, n, bits, block, enc, need, a);
        check(finite ? rc == GOSSIP_OK : rc == GOSSIP_ENONFINITE);
        if (rc == GOSSIP_OK) {
            check(gossip_codec_decode(enc, need, n, bits, block, b) == GOSSIP_OK);
            check(memcmp(a, b, n * sizeof(float)) == 0);
            check_close(x, b, n, bits, block);
        }
    }
    free(enc);
    return 0;
}
