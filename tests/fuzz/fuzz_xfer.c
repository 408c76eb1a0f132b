/* fuzz_xfer — libFuzzer target for the state-transfer messages (make fuzz).
 *
 * The first input byte picks a message type (0x30..0x33, 0x33 unknown) and
 * the header round, the rest is the payload. 1. gossip_xfer_msg_decode
 * returns one of its documented errors; on success borrowed pointers lie
 * inside the payload. 2. The payload goes to the recv of an agent that is
 * both serving (it has a model) and fetching from the sender, then poll_send
 * is drained. ASan catches any out-of-bounds access; nothing may abort.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/xfer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
    if (!ok)
        abort();
}

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
static uint64_t f_random(void *ctx)
{
    (void)ctx;
    return 0; /* xfer numbers start at 0: fuzzed payloads can match them */
}
static int f_snapshot(void *ctx, float *out, uint32_t dim, uint64_t *round)
{
    (void)ctx;
    for (uint32_t i = 0; i < dim; i++)
        out[i] = (float)i;
    *round = 7;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t type = (uint8_t)(0x30 + data[0] % 4);
    size_t len = size - 1;
    uint8_t *payload = malloc(len ? len : 1);
    check(payload != NULL);
    memcpy(payload, data + 1, len);

    gossip_xfer_msg m;
    int rc = gossip_xfer_msg_decode(type, payload, len, &m);
    check(rc >= 0 && rc < GOSSIP_ERR_COUNT);
    if (rc == GOSSIP_OK) {
        const uint8_t *end = payload + len;
        if (m.hash)
            check(m.hash >= payload && m.hash + 32 <= end);
        if (m.values)
            check(m.values >= payload && m.values + 4 * (size_t)m.n_values <= end);
    }

    gossip_env env = {f_alloc, f_free, f_random, NULL, NULL};
    gossip_xfer_config cfg;
    gossip_xfer_config_default(&cfg);
    cfg.self = 1;
    cfg.dim = 10;
    cfg.chunk_values = 3;
    cfg.snapshot = f_snapshot;
    gossip_xfer *x;
    check(gossip_xfer_create(&x, &env, &cfg) == GOSSIP_OK);
    uint64_t peer = 2;
    check(gossip_xfer_start(x, &peer, 1, data[0] & 0x80, 5, 0) == GOSSIP_OK);
    gossip_send out;
    while (gossip_xfer_poll_send(x, &out, 0) == 1)
        check(out.len <= GOSSIP_FRAME_MAX);
    gossip_header h = {.type = type, .payload_len = (uint32_t)len, .round = data[0] >> 4};
    (void)gossip_xfer_recv(x, 2, &h, payload, len, 1);
    while (gossip_xfer_poll_send(x, &out, 1) == 1)
        check(out.len <= GOSSIP_FRAME_MAX);
    (void)gossip_xfer_tick(x, 100000000);
    while (gossip_xfer_poll_send(x, &out, 100000000) == 1)
        check(out.len <= GOSSIP_FRAME_MAX);
    gossip_xfer_destroy(x);
    free(payload);
    return 0;
}
