/* fuzz_shardfile — libFuzzer target for model/shardfile's loaders
 * (docs/FUZZING.md).
 *
 * Input: byte 0 holds flags, the rest is a shard file.
 *   bit 0: before anything, write the true content hash into the header
 *          (when the header's structure allows one), so that inputs get past
 *          the hash check to the label check and the copy;
 *   bit 1: also load through the path loader (an in-memory file).
 * Properties, any violation aborts:
 *   - model_shard_hash returns OK, ETRUNC, EMAGIC, EVERSION or ECORRUPT;
 *     model_shard_verify that set plus EHASH and ELABEL, with a message; the
 *     two agree (verify fails with hash's code when the structure is bad,
 *     and otherwise only with EHASH or ELABEL);
 *   - EHASH exactly when the stored hash differs from the computed one;
 *   - load_mem returns verify's code; on error the data set is zeroed; on
 *     success it holds the header's shape and exactly the payload's labels
 *     and features, every label below classes;
 *   - round trip: encoding the loaded set again as the same shard index of
 *     the same count gives back the input bytes exactly;
 *   - the path loader returns the same code and the same data.
 */
#define _GNU_SOURCE
#include "tests/fuzz/fuzz_util.h"

#include "model/data.h"
#include "model/model.h"
#include "model/shardfile.h"

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int data_zero(const model_data *d)
{
    static const model_data zero;
    return memcmp(d, &zero, sizeof zero) == 0;
}

static int info_equal(const model_shard_info *a, const model_shard_info *b)
{
    return a->version == b->version && a->dtype == b->dtype && a->sample_count == b->sample_count &&
           a->dim == b->dim && a->classes == b->classes && a->shard_index == b->shard_index &&
           a->shard_count == b->shard_count && a->payload_len == b->payload_len &&
           memcmp(a->hash, b->hash, sizeof a->hash) == 0;
}

static int data_equal(const model_data *a, const model_data *b)
{
    if (a->count != b->count || a->dim != b->dim || a->classes != b->classes ||
        a->dtype != b->dtype)
        return 0;
    size_t m = (size_t)a->count * a->dim;
    if (memcmp(a->labels, b->labels, a->count * sizeof *a->labels))
        return 0;
    if (a->dtype == MODEL_DTYPE_U8)
        return memcmp(a->x_u8, b->x_u8, m) == 0;
    return memcmp(a->x_f32, b->x_f32, m * sizeof(float)) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t flags = data[0];
    size_t len = size - 1;
    uint8_t *b = fuzz_dup(data + 1, len);
    uint8_t h[MODEL_SHARD_HASH_SIZE];
    if ((flags & 1) && model_shard_hash(b, len, h) == MODEL_OK)
        memcpy(b + MODEL_SHARD_HASH_OFFSET, h, sizeof h);

    int hrc = model_shard_hash(b, len, h);
    FUZZ_CHECK(hrc == MODEL_OK || hrc == MODEL_ETRUNC || hrc == MODEL_EMAGIC ||
               hrc == MODEL_EVERSION || hrc == MODEL_ECORRUPT);
    char msg[MODEL_MSG_MAX] = "";
    model_shard_info info;
    int vrc = model_shard_verify(b, len, &info, msg, sizeof msg);
    if (hrc != MODEL_OK) {
        FUZZ_CHECK(vrc == hrc);
    } else {
        int same = memcmp(h, b + MODEL_SHARD_HASH_OFFSET, sizeof h) == 0;
        FUZZ_CHECK(same ? (vrc == MODEL_OK || vrc == MODEL_ELABEL) : vrc == MODEL_EHASH);
    }
    if (vrc != MODEL_OK)
        FUZZ_CHECK(fuzz_has_message(msg, sizeof msg));

    model_data d;
    model_shard_info info2;
    int lrc = model_shard_load_mem(&d, &info2, b, len, "fuzz", msg, sizeof msg);
    FUZZ_CHECK(lrc == vrc);
    if (lrc != MODEL_OK) {
        FUZZ_CHECK(data_zero(&d));
    } else {
        FUZZ_CHECK(info_equal(&info, &info2));
        FUZZ_CHECK(memcmp(info.hash, h, sizeof h) == 0);
        FUZZ_CHECK(d.count == info.sample_count && d.dim == info.dim && d.classes == info.classes &&
                   d.dtype == info.dtype);
        const uint8_t *lab = b + MODEL_SHARD_HEADER_SIZE;
        const uint8_t *feat = lab + (size_t)d.count * 2;
        for (uint32_t i = 0; i < d.count; i++) {
            FUZZ_CHECK(d.labels[i] == (uint16_t)(lab[2 * i] | lab[2 * i + 1] << 8));
            FUZZ_CHECK(d.labels[i] < d.classes);
        }
        size_t m = (size_t)d.count * d.dim;
        if (d.dtype == MODEL_DTYPE_U8) {
            FUZZ_CHECK(memcmp(d.x_u8, feat, m) == 0);
        } else {
            for (size_t k = 0; k < m; k++) {
                uint32_t bits;
                memcpy(&bits, &d.x_f32[k], 4);
                FUZZ_CHECK(bits == le32(feat + 4 * k));
            }
        }
        /* round trip */
        uint64_t need = model_shard_size(&d, d.count);
        FUZZ_CHECK(need == len);
        uint8_t *again = malloc(len);
        FUZZ_CHECK(again != NULL);
        uint8_t h2[MODEL_SHARD_HASH_SIZE];
        FUZZ_CHECK(model_shard_encode(&d, NULL, d.count, info.shard_index, info.shard_count, again,
                                      len, h2) == MODEL_OK);
        FUZZ_CHECK(memcmp(again, b, len) == 0);
        FUZZ_CHECK(memcmp(h2, h, sizeof h) == 0);
        free(again);
    }

    if (flags & 2) {
        char path[64];
        fuzz_memfile(0, b, len, path, sizeof path);
        model_data d2;
        model_shard_info info3;
        int prc = model_shard_load(&d2, &info3, path, msg, sizeof msg);
        FUZZ_CHECK(prc == lrc);
        if (prc == MODEL_OK) {
            FUZZ_CHECK(data_equal(&d, &d2));
            FUZZ_CHECK(info_equal(&info2, &info3));
        } else {
            FUZZ_CHECK(data_zero(&d2));
            FUZZ_CHECK(fuzz_has_message(msg, sizeof msg));
        }
        model_data_free(&d2);
    }
    model_data_free(&d);
    free(b);
    return 0;
}
