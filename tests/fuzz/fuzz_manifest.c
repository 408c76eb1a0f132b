/* fuzz_manifest — libFuzzer target for gossip/manifest, the cluster
 * manifest carried by JOIN, SYNC and SYNC_REPLY (docs/FUZZING.md).
 *
 * Input: the bytes a manifest is read from.
 * Properties, any violation aborts:
 *   - gossip_manifest_read returns OK, ETRUNC or EMALFORMED, and on OK has
 *     consumed exactly the 2-byte length and the length it gives;
 *   - the spec read is NUL-terminated, holds no NUL and is shorter than
 *     GOSSIP_MANIFEST_SPEC_MAX;
 *   - round trip: writing what was read takes gossip_manifest_size bytes,
 *     equals the input's fields (the length field aside, which drops the
 *     bytes of later versions), and reads back equal;
 *   - a manifest equals itself, differs from a copy with any field changed,
 *     and gossip_manifest_diff is "" exactly when the two are equal.
 */
#define _GNU_SOURCE
#include "tests/fuzz/fuzz_util.h"

#include "gossip/manifest.h"
#include "gossip/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *b = fuzz_dup(data, size);
    gossip_reader r;
    gossip_reader_init(&r, b, size);
    gossip_manifest m;
    int rc = gossip_manifest_read(&r, &m);
    FUZZ_CHECK(rc == GOSSIP_OK || rc == GOSSIP_ETRUNC || rc == GOSSIP_EMALFORMED);
    if (rc != GOSSIP_OK) {
        free(b);
        return 0;
    }
    size_t len = (size_t)b[0] << 8 | b[1];
    FUZZ_CHECK(r.pos == 2 + len && !r.err);
    size_t sl = strnlen(m.spec, sizeof m.spec);
    FUZZ_CHECK(sl < sizeof m.spec && sl == b[2 + GOSSIP_MANIFEST_FIXED - 1]);
    FUZZ_CHECK(m.protocol == ((uint32_t)b[2] << 8 | b[3]));

    size_t need = gossip_manifest_size(&m);
    FUZZ_CHECK(need == 2 + GOSSIP_MANIFEST_FIXED + sl && need <= GOSSIP_MANIFEST_WIRE_MAX);
    uint8_t out[GOSSIP_MANIFEST_WIRE_MAX + 1];
    gossip_writer w;
    gossip_writer_init(&w, out, sizeof out);
    gossip_manifest_write(&w, &m);
    FUZZ_CHECK(!w.err && w.len == need);
    FUZZ_CHECK(((size_t)out[0] << 8 | out[1]) == need - 2);
    FUZZ_CHECK(memcmp(out + 2, b + 2, need - 2) == 0);
    gossip_reader r2;
    gossip_reader_init(&r2, out, w.len);
    gossip_manifest m2;
    FUZZ_CHECK(gossip_manifest_read(&r2, &m2) == GOSSIP_OK && r2.pos == need);
    FUZZ_CHECK(gossip_manifest_equal(&m, &m2));

    char diff[GOSSIP_MANIFEST_DIFF_MAX];
    FUZZ_CHECK(gossip_manifest_diff(&m, &m2, diff, sizeof diff) == 0 && diff[0] == '\0');
    gossip_manifest variants[7];
    for (int k = 0; k < 7; k++)
        variants[k] = m;
    variants[6].spec[0] = m.spec[0] == 'x' ? 'y' : 'x';
    variants[6].spec[1] = sl > 1 ? m.spec[1] : '\0';
    variants[0].protocol ^= 1;
    variants[1].params ^= 1;
    variants[2].init_seed ^= 1;
    variants[3].algo ^= 1;
    variants[4].bits ^= 1;
    variants[5].block ^= 1;
    for (int k = 0; k < 7; k++) {
        FUZZ_CHECK(!gossip_manifest_equal(&m, &variants[k]));
        FUZZ_CHECK(gossip_manifest_diff(&m, &variants[k], diff, sizeof diff) > 0 && diff[0]);
        FUZZ_CHECK(memchr(diff, '\0', sizeof diff) != NULL);
    }
    free(b);
    return 0;
}
