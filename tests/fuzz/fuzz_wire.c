/* fuzz_wire — libFuzzer target for the wire header and cursors (make fuzz).
 *
 * 1. gossip_header_decode on the input: on success, re-encoding the decoded
 *    header must give back the first 32 input bytes exactly, and the lengths
 *    must agree; on failure the error is one of the documented ones.
 * 2. The input drives a reader over itself: each byte picks the next read
 *    (u8/u16/u32/u64/f32/f64/bytes/view). The reader must never move past
 *    its end, must set err exactly when a read does not fit, and must yield
 *    zeros once err is set. ASan catches any out-of-bounds access.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
    if (!ok)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *frame = malloc(size ? size : 1); /* exact size for ASan */
    check(frame != NULL);
    memcpy(frame, data, size);

    gossip_header h;
    int rc = gossip_header_decode(frame, size, &h);
    if (rc == GOSSIP_OK) {
        uint8_t out[GOSSIP_HEADER_SIZE];
        gossip_header_encode(&h, out);
        check(memcmp(out, frame, GOSSIP_HEADER_SIZE) == 0);
        check((size_t)h.payload_len + GOSSIP_HEADER_SIZE == size);
        check(gossip_msg_known(h.type));
    } else {
        check(rc == GOSSIP_ETRUNC || rc == GOSSIP_EMAGIC || rc == GOSSIP_EVERSION ||
              rc == GOSSIP_ETYPE || rc == GOSSIP_ETOOBIG || rc == GOSSIP_EMALFORMED);
    }

    gossip_reader r;
    gossip_reader_init(&r, frame, size);
    static const size_t width[] = {1, 2, 4, 8, 4, 8};
    uint8_t tmp[64];
    for (size_t k = 0; k < size && k < 256; k++) {
        size_t before = r.pos, left = gossip_r_left(&r);
        int was_err = r.err;
        unsigned op = data[k] % 8;
        size_t want = op < 6 ? width[op] : (op == 6 ? data[k] % sizeof tmp : data[k] % 97u);
        int got; /* 1 if the read yielded something nonzero / succeeded */
        switch (op) {
        case 0:
            got = gossip_r_u8(&r) != 0;
            break;
        case 1:
            got = gossip_r_u16(&r) != 0;
            break;
        case 2:
            got = gossip_r_u32(&r) != 0;
            break;
        case 3:
            got = gossip_r_u64(&r) != 0;
            break;
        case 4:
            got = gossip_r_f32(&r) != 0.0f;
            break;
        case 5:
            got = gossip_r_f64(&r) != 0.0;
            break;
        case 6:
            got = gossip_r_bytes(&r, tmp, want) == 0;
            break;
        default:
            got = gossip_r_view(&r, want) != NULL;
            break;
        }
        check(r.pos <= r.len);
        if (was_err || want > left) {
            check(r.err && r.pos == before && !got); /* failed reads yield zeros */
        } else {
            check(!r.err && r.pos == before + want);
        }
    }
    free(frame);
    return 0;
}
