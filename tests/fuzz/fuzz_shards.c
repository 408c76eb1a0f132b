/* fuzz_shards — libFuzzer target for the shard replication messages
 * (make fuzz).
 *
 * The first input byte picks a message type (0x20..0x23, 0x23 unknown), the
 * rest is the payload. 1. gossip_shard_msg_decode: returns one of its
 * documented errors; on success every borrowed pointer and length lies
 * inside the payload. 2. The payload goes to the recv of a replicator that
 * holds one shard and is fetching another, so answers reach a live fetch
 * (the fixture's xfer numbers are fixed by a fixed seed); then poll_send is
 * drained. ASan catches any out-of-bounds access; nothing may abort.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/shards.h"

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
    uint64_t *s = ctx;
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t type = (uint8_t)(0x20 + data[0] % 4);
    size_t len = size - 1;
    uint8_t *payload = malloc(len ? len : 1); /* exact size for ASan */
    check(payload != NULL);
    memcpy(payload, data + 1, len);

    gossip_shard_msg m;
    int rc = gossip_shard_msg_decode(type, payload, len, &m);
    check(rc >= 0 && rc < GOSSIP_ERR_COUNT);
    if (rc == GOSSIP_OK) {
        const uint8_t *end = payload + len;
        check(m.id >= payload && m.id + 32 <= end);
        if (m.hashes)
            check(m.hashes >= payload && m.hashes + (size_t)m.n_chunks * 32 <= end);
        if (m.data)
            check(m.data >= payload && m.data + m.len <= end);
    }

    /* Fixture: shard 0 held, shard 1 wanted; ids that fuzzed payloads can
     * hit (all 0x00 and all 0x01). */
    uint64_t seed = 1;
    gossip_env env = {f_alloc, f_free, f_random, NULL, &seed};
    gossip_store st;
    check(gossip_store_mem_create(&st, &env, 8, 256) == GOSSIP_OK);
    static const uint8_t bytes[5] = {1, 2, 3, 4, 5};
    uint8_t ids[2][32];
    memset(ids, 0, sizeof ids);
    memset(ids[1], 1, 32);
    check(st.ops->begin(st.ctx, ids[0], 5) == GOSSIP_OK);
    check(st.ops->write(st.ctx, ids[0], 0, bytes, 5) == GOSSIP_OK);
    check(st.ops->commit(st.ctx, ids[0]) == GOSSIP_OK);
    gossip_shards_config cfg;
    gossip_shards_config_default(&cfg);
    cfg.self = 1;
    cfg.ids = (const uint8_t(*)[32])ids;
    cfg.n_shards = 2;
    cfg.store = st;
    cfg.chunk_bytes = 4;
    cfg.shard_bytes_max = 256;
    gossip_shards *sh;
    check(gossip_shards_create(&sh, &env, &cfg) == GOSSIP_OK);
    uint64_t members[2] = {1, 2};
    gossip_view v = {1, 2, members};
    check(gossip_shards_set_view(sh, &v, 0) == GOSSIP_OK);
    gossip_send out;
    while (gossip_shards_poll_send(sh, &out, 0) == 1)
        check(out.len <= GOSSIP_FRAME_MAX);
    gossip_header h = {.type = type, .payload_len = (uint32_t)len};
    (void)gossip_shards_recv(sh, 2, &h, payload, len, 1);
    (void)gossip_shards_tick(sh, 3000000);
    while (gossip_shards_poll_send(sh, &out, 3000000) == 1)
        check(out.len <= GOSSIP_FRAME_MAX);
    gossip_shards_destroy(sh);
    gossip_store_mem_destroy(&st);
    free(payload);
    return 0;
}
