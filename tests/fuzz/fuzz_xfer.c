/* fuzz_xfer — libFuzzer target for model state transfer (gossip/xfer): its
 * decoder, and two agents fetching each other's model through a hostile
 * network (docs/FUZZING.md).
 *
 * Fixture: nodes 1 and 2 each serve a model of 10 values (node 1: i / 2 at
 * round 7; node 2: -i at round 30) and each fetches the other's, in chunks
 * of 1..4 values. Either node may have a checkpoint at round 5 (resume
 * rounds K = 20): node 2's round 30 is too far, so node 1 must pull anyway;
 * node 1's round 7 is close enough, so node 2 must resume, pulling nothing.
 * Input: byte 0 = options (bits 0-1: chunk values 1 + b % 4; bits 2-3:
 * window 1 + (b >> 2) % 4; bit 4: node 1 has the checkpoint; bit 5: node 2
 * has it), then ops,
 * each one byte (op % 8; x = (b >> 3) & 1 picks the link from node x+1 to
 * the other) and its operands:
 *   0       deliver the frame at the head of link x
 *   1       drop it
 *   2 p q   deliver it with bit q % 8 of payload byte p flipped
 *   3 t r n deliver the next n input bytes as a payload of type 0x30 + t % 4
 *           (WANT, CHUNK, NACK, unknown) with header round r, from node x+1
 *   4 t     advance the clock by t * 50 ms and tick both nodes
 *   5       deliver the head frame and keep it (a duplicate)
 *   6       swap the first two frames of link x (reordering)
 *   7 p     deliver the head frame cut to p payload bytes
 * Then the network heals: frames are delivered faithfully, the clock moves
 * 100 ms a step, and a fetch that FAILED is started again, for at most 300
 * simulated seconds.
 * Properties, any violation aborts:
 *   - gossip_xfer_msg_decode returns one of its documented errors; on
 *     success borrowed pointers lie inside the payload;
 *   - recv returns OK or a decode error (ETYPE, ETRUNC, ETOOBIG,
 *     EMALFORMED); a refused frame is counted once in `rejected`, changes
 *     no other counter and makes the node send nothing;
 *   - a COMPLETE fetch holds exactly the source's model, bit for bit, and
 *     its round; node 1 never resumes (node 2 is 25 rounds ahead of its
 *     checkpoint) and node 2 with a checkpoint never completes a pull (its
 *     peer's verified model is recent enough: a peer may lie about its
 *     round to make it resume, but no INFO it can forge gets a pull past
 *     the hash check);
 *   - every frame out fits GOSSIP_FRAME_MAX and goes to the other node;
 *   - at most GOSSIP_XFER_SERVE_MAX snapshots are taken per START burst;
 *   - after healing, both fetches are COMPLETE (node 2: RESUME when it has
 *     a checkpoint).
 */
#define _GNU_SOURCE
#include "tests/fuzz/fuzz_util.h"

#include "gossip/wire.h"
#include "gossip/xfer.h"

#define DIM      10u
#define QMAX     64
#define HEAL_MAX 3000

typedef struct flink {
    uint8_t *f[QMAX];
    size_t len[QMAX];
    int n;
} flink;

static gossip_xfer *xf[2];
static flink links[2]; /* links[x]: frames from node x+1 to the other */
static const uint64_t rounds[2] = {7, 30};

static float model_of(int x, uint32_t i)
{
    return x == 0 ? (float)i * 0.5f : -(float)i;
}

static int f_snapshot(void *ctx, float *out, uint32_t dim, uint64_t *round)
{
    int x = (int)(intptr_t)ctx;
    FUZZ_CHECK(dim == DIM);
    for (uint32_t i = 0; i < dim; i++)
        out[i] = model_of(x, i);
    *round = rounds[x];
    return 0;
}

static uint64_t f_random(void *ctx)
{
    uint64_t *s = ctx;
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 11;
}

static void check_decode(uint8_t type, const uint8_t *payload, size_t len)
{
    gossip_xfer_msg m;
    int rc = gossip_xfer_msg_decode(type, payload, len, &m);
    FUZZ_CHECK(rc == GOSSIP_OK || rc == GOSSIP_ETYPE || rc == GOSSIP_ETRUNC ||
               rc == GOSSIP_ETOOBIG || rc == GOSSIP_EMALFORMED);
    if (rc != GOSSIP_OK)
        return;
    const uint8_t *end = payload + len;
    if (m.hash)
        FUZZ_CHECK(m.hash >= payload && m.hash + 32 <= end);
    if (m.values)
        FUZZ_CHECK(m.values >= payload && m.values + 4 * (size_t)m.n_values <= end);
}

static void flush(int x, gossip_time_us now)
{
    gossip_send out;
    while (gossip_xfer_poll_send(xf[x], &out, now) == 1) {
        FUZZ_CHECK(out.len <= GOSSIP_FRAME_MAX && out.len >= GOSSIP_HEADER_SIZE);
        FUZZ_CHECK(out.dest == (uint64_t)(2 - x));
        flink *l = &links[x];
        if (l->n == QMAX)
            continue;
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

static int has_ckpt[2];

static void check_state(int x)
{
    gossip_xfer_state s = gossip_xfer_get_state(xf[x]);
    if (s == GOSSIP_XFER_RESUME)
        FUZZ_CHECK(x == 1 && has_ckpt[1]); /* only node 2 is close enough */
    if (s != GOSSIP_XFER_COMPLETE)
        return;
    FUZZ_CHECK(!(x == 1 && has_ckpt[1])); /* node 2 must resume, not pull */
    float got[DIM];
    uint64_t round;
    FUZZ_CHECK(gossip_xfer_result(xf[x], got, &round) == GOSSIP_OK);
    FUZZ_CHECK(round == rounds[1 - x]);
    for (uint32_t i = 0; i < DIM; i++) {
        float want = model_of(1 - x, i);
        FUZZ_CHECK(memcmp(&got[i], &want, sizeof want) == 0);
    }
}

/* Deliver a payload with header h from node x+1 to the other node. */
static void deliver(int x, gossip_header h, const uint8_t *payload, size_t len, gossip_time_us now)
{
    int y = 1 - x;
    uint8_t *p = fuzz_dup(payload, len);
    check_decode(h.type, p, len);
    gossip_xfer_counters before = *gossip_xfer_counters_get(xf[y]);
    h.payload_len = (uint32_t)len;
    h.sender = (uint64_t)x + 1;
    int rc = gossip_xfer_recv(xf[y], (uint64_t)x + 1, &h, p, len, now);
    free(p);
    FUZZ_CHECK(rc == GOSSIP_OK || rc == GOSSIP_ETYPE || rc == GOSSIP_ETRUNC ||
               rc == GOSSIP_ETOOBIG || rc == GOSSIP_EMALFORMED);
    if (rc != GOSSIP_OK) {
        gossip_xfer_counters after = *gossip_xfer_counters_get(xf[y]);
        FUZZ_CHECK(after.rejected == before.rejected + 1);
        after.rejected = before.rejected;
        FUZZ_CHECK(memcmp(&after, &before, sizeof after) == 0);
        gossip_send out;
        FUZZ_CHECK(gossip_xfer_poll_send(xf[y], &out, now) == 0);
    }
    FUZZ_CHECK(gossip_xfer_counters_get(xf[y])->snapshots <= before.snapshots + 1);
    flush(y, now);
    check_state(y);
}

static void deliver_frame(int x, const uint8_t *f, size_t len, gossip_time_us now)
{
    gossip_header h;
    FUZZ_CHECK(gossip_header_decode(f, len, &h) == GOSSIP_OK);
    deliver(x, h, f + GOSSIP_HEADER_SIZE, len - GOSSIP_HEADER_SIZE, now);
}

static int both_complete(void)
{
    return gossip_xfer_get_state(xf[0]) == GOSSIP_XFER_COMPLETE &&
           gossip_xfer_get_state(xf[1]) ==
               (has_ckpt[1] ? GOSSIP_XFER_RESUME : GOSSIP_XFER_COMPLETE);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint64_t rng_state = 1;
    gossip_env env = {fuzz_alloc, fuzz_free, f_random, NULL, &rng_state};
    has_ckpt[0] = (data[0] >> 4) & 1;
    has_ckpt[1] = (data[0] >> 5) & 1;
    for (int x = 0; x < 2; x++) {
        gossip_xfer_config cfg;
        gossip_xfer_config_default(&cfg);
        cfg.self = (uint64_t)x + 1;
        cfg.dim = DIM;
        cfg.chunk_values = 1 + data[0] % 4;
        cfg.window = 1 + (data[0] >> 2) % 4;
        cfg.resume_rounds = 20;
        cfg.snapshot = f_snapshot;
        cfg.snapshot_ctx = (void *)(intptr_t)x;
        FUZZ_CHECK(gossip_xfer_create(&xf[x], &env, &cfg) == GOSSIP_OK);
        links[x].n = 0;
    }
    gossip_time_us now = 0;
    for (int x = 0; x < 2; x++) {
        uint64_t peer = (uint64_t)(2 - x);
        FUZZ_CHECK(gossip_xfer_start(xf[x], &peer, 1, has_ckpt[x], 5, now) == GOSSIP_OK);
        flush(x, now);
    }
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
            gossip_header h = {.version = GOSSIP_WIRE_VERSION};
            h.type = (uint8_t)(0x30 + NEXT() % 4);
            h.round = NEXT();
            size_t n = NEXT();
            if (n > size - at)
                n = size - at;
            deliver(x, h, data + at, n, now);
            at += n;
            break;
        }
        case 4:
            now += (gossip_time_us)NEXT() * 50000u;
            for (int k = 0; k < 2; k++) {
                gossip_xfer_tick(xf[k], now);
                flush(k, now);
                check_state(k);
            }
            break;
        default:
            if (l->n >= 2) {
                uint8_t *f = l->f[0];
                size_t len = l->len[0];
                l->f[0] = l->f[1], l->len[0] = l->len[1];
                l->f[1] = f, l->len[1] = len;
            }
            break;
        }
    }
#undef NEXT
    /* heal: a faithful network; a failed fetch is started again */
    for (int k = 0; k < HEAL_MAX && !both_complete(); k++) {
        for (int x = 0; x < 2; x++)
            while (links[x].n) {
                deliver_frame(x, links[x].f[0], links[x].len[0], now);
                pop(&links[x]);
            }
        now += 100000;
        for (int x = 0; x < 2; x++) {
            gossip_xfer_tick(xf[x], now);
            if (gossip_xfer_get_state(xf[x]) == GOSSIP_XFER_FAILED) {
                uint64_t peer = (uint64_t)(2 - x);
                FUZZ_CHECK(gossip_xfer_start(xf[x], &peer, 1, has_ckpt[x], 5, now) == GOSSIP_OK);
            }
            flush(x, now);
            check_state(x);
        }
    }
    FUZZ_CHECK(both_complete());
    for (int x = 0; x < 2; x++) {
        while (links[x].n)
            pop(&links[x]);
        gossip_xfer_destroy(xf[x]);
    }
    return 0;
}
