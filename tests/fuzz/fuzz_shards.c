/* fuzz_shards — libFuzzer target for shard replication (gossip/shards):
 * its decoder, and two replicators talking through a hostile network
 * (docs/FUZZING.md).
 *
 * Fixture: a catalog of three small shards (10, 7 and 9 bytes; ids are
 * their BLAKE2b-256); node 1 holds shard 0, node 2 holds shard 1, nobody
 * holds shard 2. The view is {1, 2}; with the default replication each node
 * fetches the shard it lacks from the other, in chunks of 1..8 bytes; with
 * r = 1 each shard has one holder, and a surplus copy may go only once the
 * holder has confirmed it holds the shard.
 * Input: byte 0 = options (chunk bytes 1 + b % 8, window 1 + (b >> 3) % 4,
 * bit 5: r = 1),
 * then ops, each one byte (op % 8; x = (b >> 3) & 1 picks the link from
 * node x+1 to the other) and its operands:
 *   0       deliver the frame at the head of link x
 *   1       drop it
 *   2 p q   deliver it with bit q % 8 of payload byte p flipped
 *   3 t n   deliver the next n input bytes as a payload of type 0x20 + t % 4
 *           (WANT, CHUNK, NACK, unknown) from node x+1
 *   4 t     t < 128: advance the clock by t * 20 ms and tick both nodes;
 *           t >= 128: a new view for node x+1: itself alone (t odd: a
 *           partition) or {1, 2}
 *   5       deliver the head frame and keep it (a duplicate)
 *   6       swap the first two frames of link x (reordering)
 *   7 p     deliver the head frame cut to p payload bytes
 * Then the network heals: both nodes get the view {1, 2}, every frame is
 * delivered, the clock moves 50 ms a step, for at most 150 simulated
 * seconds. Flipped, cut and injected frames (ops 2, 3, 7) stand for a
 * lying peer; drops, duplicates, reordering, delays and partitions for an
 * unreliable network.
 * Properties, any violation aborts:
 *   - gossip_shard_msg_decode returns one of its documented errors; on
 *     success every borrowed pointer and length lies inside the payload;
 *   - recv returns OK or a decode error (ETYPE, ETRUNC, ETOOBIG,
 *     EMALFORMED); a refused frame is counted once in `rejected`, changes
 *     no other counter and makes the node send nothing;
 *   - at every step, every shard a store holds complete is byte for byte
 *     the catalog's (nothing unverified is ever committed), shard 2 is held
 *     by nobody, and a node says `held` only for what its store holds;
 *   - every frame out fits GOSSIP_FRAME_MAX and goes to the other node;
 *   - with an honest peer (no op 2, 3 or 7), shards 0 and 1 are never
 *     lost: at every step some store holds each of them;
 *   - after healing (when no shard was lost), each node holds exactly the
 *     shards 0 and 1 it is a holder of in the view {1, 2}: no input leaves
 *     a replicator stuck or a surplus copy behind.
 */
#define _GNU_SOURCE
#include "tests/fuzz/fuzz_util.h"

#include <sodium.h>

#include "gossip/shards.h"
#include "gossip/store.h"
#include "gossip/wire.h"

#define SHARDS   3
#define QMAX     64
#define HEAL_MAX 3000

typedef struct flink {
    uint8_t *f[QMAX];
    size_t len[QMAX];
    int n;
} flink;

static uint8_t ids[SHARDS][32];
static uint8_t content[SHARDS][16];
static const size_t sizes[SHARDS] = {10, 7, 9};
static uint64_t rng_state;

static gossip_shards *sh[2];
static gossip_store st[2];
static flink links[2]; /* links[x]: frames from node x+1 to the other */

static uint64_t f_random(void *ctx)
{
    uint64_t *s = ctx;
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 11;
}

static void setup_once(void)
{
    static int done;
    if (done)
        return;
    FUZZ_CHECK(sodium_init() >= 0);
    for (int s = 0; s < SHARDS; s++) {
        for (size_t k = 0; k < sizes[s]; k++)
            content[s][k] = (uint8_t)(s * 50 + k * 7 + 1);
        crypto_generichash(ids[s], 32, content[s], sizes[s], NULL, 0);
    }
    done = 1;
}

static void check_decode(uint8_t type, const uint8_t *payload, size_t len)
{
    gossip_shard_msg m;
    int rc = gossip_shard_msg_decode(type, payload, len, &m);
    FUZZ_CHECK(rc == GOSSIP_OK || rc == GOSSIP_ETYPE || rc == GOSSIP_ETRUNC ||
               rc == GOSSIP_ETOOBIG || rc == GOSSIP_EMALFORMED);
    if (rc != GOSSIP_OK)
        return;
    const uint8_t *end = payload + len;
    FUZZ_CHECK(m.id >= payload && m.id + 32 <= end);
    if (m.hashes)
        FUZZ_CHECK(m.hashes >= payload && m.hashes + (size_t)m.n_chunks * 32 <= end);
    if (m.data)
        FUZZ_CHECK(m.data >= payload && m.data + m.len <= end);
}

static void flush(int x, gossip_time_us now)
{
    gossip_send out;
    while (gossip_shards_poll_send(sh[x], &out, now) == 1) {
        FUZZ_CHECK(out.len <= GOSSIP_FRAME_MAX && out.len >= GOSSIP_HEADER_SIZE);
        FUZZ_CHECK(out.dest == (uint64_t)(2 - x)); /* the other node */
        flink *l = &links[x];
        if (l->n == QMAX)
            continue; /* the link is full: lost */
        l->f[l->n] = fuzz_dup(out.frame, out.len);
        l->len[l->n++] = out.len;
    }
}

static void pop(flink *l)
{
    free(l->f[0]);
    memmove(l->f, l->f + 1, (size_t)(l->n - 1) * sizeof *l->f);
    memmove(l->len, l->len + 1, (size_t)(l->n - 1) * sizeof *l->len);
    l->n--;
}

/* Deliver a payload with header h from node x+1 to the other node. */
static void deliver(int x, gossip_header h, const uint8_t *payload, size_t len, gossip_time_us now)
{
    int y = 1 - x;
    uint8_t *p = fuzz_dup(payload, len);
    check_decode(h.type, p, len);
    gossip_shards_counters before = *gossip_shards_counters_get(sh[y]);
    h.payload_len = (uint32_t)len;
    h.sender = (uint64_t)x + 1;
    int rc = gossip_shards_recv(sh[y], (uint64_t)x + 1, &h, p, len, now);
    free(p);
    FUZZ_CHECK(rc == GOSSIP_OK || rc == GOSSIP_ETYPE || rc == GOSSIP_ETRUNC ||
               rc == GOSSIP_ETOOBIG || rc == GOSSIP_EMALFORMED);
    if (rc != GOSSIP_OK) {
        gossip_shards_counters after = *gossip_shards_counters_get(sh[y]);
        FUZZ_CHECK(after.rejected == before.rejected + 1);
        after.rejected = before.rejected;
        FUZZ_CHECK(memcmp(&after, &before, sizeof after) == 0);
        gossip_send out;
        FUZZ_CHECK(gossip_shards_poll_send(sh[y], &out, now) == 0);
    }
    flush(y, now);
}

static void deliver_frame(int x, const uint8_t *f, size_t len, gossip_time_us now)
{
    gossip_header h;
    FUZZ_CHECK(gossip_header_decode(f, len, &h) == GOSSIP_OK);
    deliver(x, h, f + GOSSIP_HEADER_SIZE, len - GOSSIP_HEADER_SIZE, now);
}

static void check_stores(void)
{
    for (int x = 0; x < 2; x++) {
        for (int s = 0; s < SHARDS; s++) {
            int has = st[x].ops->has(st[x].ctx, ids[s]);
            gossip_shard_status ss;
            FUZZ_CHECK(gossip_shards_status(sh[x], (uint32_t)s, &ss) == GOSSIP_OK);
            if (ss.held)
                FUZZ_CHECK(has);
            if (!has)
                continue;
            FUZZ_CHECK(s != 2);
            uint64_t size;
            uint8_t buf[16];
            FUZZ_CHECK(st[x].ops->size(st[x].ctx, ids[s], &size) == GOSSIP_OK);
            FUZZ_CHECK(size == sizes[s]);
            FUZZ_CHECK(st[x].ops->read(st[x].ctx, ids[s], 0, buf, sizes[s]) == GOSSIP_OK);
            FUZZ_CHECK(memcmp(buf, content[s], sizes[s]) == 0);
        }
    }
}

/* Shards 0 and 1 each held by some store. */
static int none_lost(void)
{
    for (int s = 0; s < 2; s++)
        if (!st[0].ops->has(st[0].ctx, ids[s]) && !st[1].ops->has(st[1].ctx, ids[s]))
            return 0;
    return 1;
}

/* Every node holds exactly the shards 0 and 1 it is a holder of. */
static int settled(void)
{
    for (int x = 0; x < 2; x++)
        for (int s = 0; s < 2; s++) {
            gossip_shard_status ss;
            FUZZ_CHECK(gossip_shards_status(sh[x], (uint32_t)s, &ss) == GOSSIP_OK);
            if (ss.assigned != st[x].ops->has(st[x].ctx, ids[s]))
                return 0;
        }
    return 1;
}

static uint64_t epoch;

static void view(int x, int alone, gossip_time_us now)
{
    uint64_t both[2] = {1, 2}, self = (uint64_t)x + 1;
    gossip_view v = {++epoch, alone ? 1u : 2u, alone ? &self : both};
    FUZZ_CHECK(gossip_shards_set_view(sh[x], &v, now) == GOSSIP_OK);
    flush(x, now);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup_once();
    if (size < 1)
        return 0;
    rng_state = 1;
    gossip_env env = {fuzz_alloc, fuzz_free, f_random, NULL, &rng_state};
    gossip_shards_config cfg;
    gossip_shards_config_default(&cfg);
    cfg.ids = (const uint8_t(*)[32])ids;
    cfg.n_shards = SHARDS;
    cfg.chunk_bytes = 1 + data[0] % 8;
    cfg.window = 1 + (data[0] >> 3) % 4;
    cfg.shard_bytes_max = 64;
    if (data[0] & 0x20)
        cfg.placement.r = 1;
    for (int x = 0; x < 2; x++) {
        FUZZ_CHECK(gossip_store_mem_create(&st[x], &env, 8, 64) == GOSSIP_OK);
        const uint8_t *id = ids[x];
        FUZZ_CHECK(st[x].ops->begin(st[x].ctx, id, sizes[x]) == GOSSIP_OK);
        FUZZ_CHECK(st[x].ops->write(st[x].ctx, id, 0, content[x], sizes[x]) == GOSSIP_OK);
        FUZZ_CHECK(st[x].ops->commit(st[x].ctx, id) == GOSSIP_OK);
        cfg.self = (uint64_t)x + 1;
        cfg.store = st[x];
        FUZZ_CHECK(gossip_shards_create(&sh[x], &env, &cfg) == GOSSIP_OK);
        links[x].n = 0;
    }
    gossip_time_us now = 0;
    epoch = 0;
    for (int x = 0; x < 2; x++)
        view(x, 0, now);
    int lying = 0;
    size_t at = 1;
#define NEXT() (at < size ? data[at++] : 0)
    for (int steps = 0; at < size && steps < 256; steps++) {
        int op = data[at] % 8, x = (data[at] >> 3) & 1;
        at++;
        flink *l = &links[x];
        switch (op) {
        case 0:
        case 1:
        case 5:
            if (!l->n)
                break;
            if (op != 1)
                deliver_frame(x, l->f[0], l->len[0], now);
            if (op != 5)
                pop(l);
            break;
        case 2:
        case 7: {
            int p = NEXT(), q = op == 2 ? NEXT() : 0;
            if (!l->n)
                break;
            lying = 1;
            uint8_t *f = l->f[0];
            size_t len = l->len[0];
            l->f[0] = NULL;
            pop(l);
            gossip_header h;
            FUZZ_CHECK(gossip_header_decode(f, len, &h) == GOSSIP_OK);
            size_t pl = len - GOSSIP_HEADER_SIZE;
            if (op == 2 && pl)
                f[GOSSIP_HEADER_SIZE + (size_t)p % pl] ^= (uint8_t)(1u << (q % 8));
            if (op == 7 && (size_t)p < pl)
                pl = (size_t)p;
            deliver(x, h, f + GOSSIP_HEADER_SIZE, pl, now);
            free(f);
            break;
        }
        case 3: {
            lying = 1;
            gossip_header h = {.version = GOSSIP_WIRE_VERSION,
                               .type = (uint8_t)(0x20 + NEXT() % 4)};
            size_t n = NEXT();
            if (n > size - at)
                n = size - at;
            deliver(x, h, data + at, n, now);
            at += n;
            break;
        }
        case 4: {
            int t = NEXT();
            if (t >= 128) {
                view(x, t & 1, now);
                break;
            }
            now += (gossip_time_us)t * 20000u;
            for (int k = 0; k < 2; k++) {
                gossip_shards_tick(sh[k], now);
                flush(k, now);
            }
            break;
        }
        default:
            if (l->n >= 2) {
                uint8_t *f = l->f[0];
                size_t len = l->len[0];
                l->f[0] = l->f[1], l->len[0] = l->len[1];
                l->f[1] = f, l->len[1] = len;
            }
            break;
        }
        check_stores();
        if (!lying)
            FUZZ_CHECK(none_lost());
    }
#undef NEXT
    /* heal: one view, a faithful network from now on */
    int intact = none_lost();
    for (int x = 0; x < 2; x++)
        view(x, 0, now);
    for (int k = 0; k < HEAL_MAX && intact && !settled(); k++) {
        for (int x = 0; x < 2; x++)
            while (links[x].n) {
                deliver_frame(x, links[x].f[0], links[x].len[0], now);
                pop(&links[x]);
            }
        now += 50000;
        for (int x = 0; x < 2; x++) {
            gossip_shards_tick(sh[x], now);
            flush(x, now);
        }
        check_stores();
        FUZZ_CHECK(none_lost());
    }
    FUZZ_CHECK(!intact || settled());
    for (int x = 0; x < 2; x++) {
        while (links[x].n)
            pop(&links[x]);
        gossip_shards_destroy(sh[x]);
        gossip_store_mem_destroy(&st[x]);
    }
    return 0;
}
