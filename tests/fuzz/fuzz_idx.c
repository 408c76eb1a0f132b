/* fuzz_idx — libFuzzer target for model/data's IDX loader (docs/FUZZING.md).
 *
 * Input: byte 0 holds flags, bytes 1-2 (big-endian) the length of the image
 * file, then the image file, then the label file (the rest), each read
 * through an in-memory file (the loader takes paths).
 *   bit 0: gzip the image file first; bit 1: gzip the label file first (the
 *          loader detects gzip by itself, so fuzzed gzip streams also reach
 *          it unwrapped);
 *   bits 2-3: classes asked for: 0 (infer), 10, 3, 256.
 * Properties, any violation aborts:
 *   - the result is one of ETRUNC, ECORRUPT, EMAGIC, EMISMATCH, ELABEL,
 *     ETOOBIG, EEMPTY (with a message) or OK;
 *   - on error the data set is zeroed;
 *   - on success (plain files) the set has the header's count and
 *     rows * cols features, exactly the files' pixels and labels, every
 *     label below classes, and classes as asked for or the largest label + 1.
 */
#define _GNU_SOURCE
#include "tests/fuzz/fuzz_util.h"

#include <zlib.h>

#include "model/data.h"
#include "model/model.h"

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* gzip data[0..len) into a new buffer. */
static uint8_t *gzip(const uint8_t *data, size_t len, size_t *out_len)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    FUZZ_CHECK(deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK);
    size_t cap = deflateBound(&z, (uLong)len) + 32;
    uint8_t *out = malloc(cap);
    FUZZ_CHECK(out != NULL);
    z.next_in = (Bytef *)(uintptr_t)data;
    z.avail_in = (uInt)len;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    FUZZ_CHECK(deflate(&z, Z_FINISH) == Z_STREAM_END);
    *out_len = cap - z.avail_out;
    deflateEnd(&z);
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3)
        return 0;
    uint8_t flags = data[0];
    size_t ilen = (size_t)data[1] << 8 | data[2];
    data += 3, size -= 3;
    if (ilen > size)
        ilen = size;
    const uint8_t *img = data, *lab = data + ilen;
    size_t llen = size - ilen;
    static const uint32_t classes_opt[] = {0, 10, 3, 256};
    uint32_t classes = classes_opt[(flags >> 2) & 3];

    char pi[64], pl[64];
    if (flags & 1) {
        size_t n;
        uint8_t *z = gzip(img, ilen, &n);
        fuzz_memfile(0, z, n, pi, sizeof pi);
        free(z);
    } else {
        fuzz_memfile(0, img, ilen, pi, sizeof pi);
    }
    if (flags & 2) {
        size_t n;
        uint8_t *z = gzip(lab, llen, &n);
        fuzz_memfile(1, z, n, pl, sizeof pl);
        free(z);
    } else {
        fuzz_memfile(1, lab, llen, pl, sizeof pl);
    }

    model_data d;
    memset(&d, 0xA5, sizeof d);
    char msg[MODEL_MSG_MAX] = "";
    int rc = model_idx_load(&d, pi, pl, classes, msg, sizeof msg);
    FUZZ_CHECK(rc == MODEL_OK || rc == MODEL_ETRUNC || rc == MODEL_ECORRUPT || rc == MODEL_EMAGIC ||
               rc == MODEL_EMISMATCH || rc == MODEL_ELABEL || rc == MODEL_ETOOBIG ||
               rc == MODEL_EEMPTY);
    if (rc != MODEL_OK) {
        static const model_data zero;
        FUZZ_CHECK(memcmp(&d, &zero, sizeof d) == 0);
        FUZZ_CHECK(fuzz_has_message(msg, sizeof msg));
        return 0;
    }
    FUZZ_CHECK(d.dtype == MODEL_DTYPE_U8 && d.x_u8 && d.labels && d.count && d.dim);
    FUZZ_CHECK(classes ? d.classes == classes : d.classes >= 1);
    uint32_t max_label = 0;
    for (uint32_t i = 0; i < d.count; i++) {
        FUZZ_CHECK(d.labels[i] < d.classes);
        max_label = d.labels[i] > max_label ? d.labels[i] : max_label;
    }
    FUZZ_CHECK(classes || d.classes == max_label + 1);
    if (!(flags & 1) && ilen >= 16 && be32(img) == 0x803u) {
        FUZZ_CHECK(be32(img + 4) == d.count);
        FUZZ_CHECK((uint64_t)be32(img + 8) * be32(img + 12) == d.dim);
        FUZZ_CHECK(ilen == 16 + (size_t)d.count * d.dim);
        FUZZ_CHECK(memcmp(d.x_u8, img + 16, (size_t)d.count * d.dim) == 0);
    }
    if (!(flags & 2) && llen >= 8 && be32(lab) == 0x801u) {
        FUZZ_CHECK(be32(lab + 4) == d.count && llen == 8 + (size_t)d.count);
        for (uint32_t i = 0; i < d.count; i++)
            FUZZ_CHECK(d.labels[i] == lab[8 + i]);
    }
    model_data_free(&d);
    return 0;
}
