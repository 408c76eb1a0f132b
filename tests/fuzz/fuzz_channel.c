/* fuzz_channel — libFuzzer target for net/channel's handshake, fed genuine
 * records out of order, across sessions and altered (docs/FUZZING.md).
 *
 * A random record never gets past the HELLO's seal or a signature, so this
 * target mostly delivers genuine ones: six channels handshake at once,
 *   I1  initiator, identity A, network key K (optionally expects B)
 *   I2  initiator, identity C, key K
 *   I3  initiator, identity C, another network key K2
 *   R1  responder, identity B, key K (optionally the ring {K, K2})
 *   R2  responder, identity A, key K
 *   R1b responder, identity B, R1's keys and R1's seen table: a second
 *       connection to the same agent, where a replayed HELLO must die
 * (optionally all with the allow-list {A, B}, optionally all asking for
 * auth-only sessions), and every record any of them emits goes into a pool
 * that the input replays to any channel, intact, with a bit flipped, cut or
 * extended. So R1 sees I2's HELLO after I1's, R1b sees I1's HELLO again,
 * R2 sees A's own key, I1 gets R2's REPLY, I3's HELLO reaches R1, etc.
 *
 * Input: byte 0 = options (bit 0 allow-list, bit 1 I1 expects B, bit 2 R1
 * and R1b accept K2 too, bit 3 auth-only), then ops, each one byte (op % 8)
 * and its operands (channels are taken % 6):
 *   0 x        pump: channel x emits its pending record into the pool
 *   1 k y      deliver pool[k] to channel y
 *   2 k y p q  deliver pool[k] with bit q % 8 of byte p flipped
 *   3 k y n    deliver pool[k] cut to n bytes (n >= its length: one byte added)
 *   4 y n ...  deliver the next n input bytes to channel y
 *   5 t y      advance the clock by t * 100 ms, check y's handshake deadline
 *   6 x n ...  seal the next n input bytes on channel x (if open) into the pool
 *   7          pump every channel
 * Properties, any violation aborts:
 *   - recv returns NET_OK, NET_EREJECT or NET_EFAILED; a failed channel
 *     stays failed; every refusal is counted under exactly one cause;
 *   - no record opens as data on a channel that was not open;
 *   - an open channel's peer is one of A, B, C, not itself, on the
 *     allow-list when there is one, B for I1 when it expects B;
 *   - a responder answers only a HELLO that is byte for byte one an
 *     initiator sent (nothing altered is answered), and never the same
 *     HELLO as another responder of its agent (R1, R1b: replays refused);
 *   - at the end, every open responder has exactly one open counterpart
 *     (the other role, the peer's identity, the session's network key, open
 *     with it; an initiator opens first and has at most one) and a frame sealed
 *     on either side opens on the other with the same bytes: no key
 *     confusion, and refusals left both sides usable.
 */
#define _GNU_SOURCE
#include "tests/fuzz/fuzz_util.h"

#include <sodium.h>

#include "net/channel.h"
#include "net/net.h"
#include "net/seen.h"

#define NCH       6
#define POOL_MAX  32
#define REC_MAX   (NET_CHANNEL_HS_MAX + 64 + NET_CHANNEL_OVERHEAD)
#define FRAME_MAX 64

typedef struct rec {
    size_t len;
    uint8_t b[REC_MAX];
} rec;

static net_identity ids[3]; /* A, B, C */
static uint8_t key_k[NET_NETWORK_KEY_SIZE], key_k2[NET_NETWORK_KEY_SIZE];
static uint8_t allow[2 * NET_PUBLIC_KEY_SIZE];

/* channel -> identity index, key (initiators), role */
static const int ch_id[NCH] = {0, 2, 2, 1, 0, 1};
static const int ch_k2[NCH] = {0, 0, 1, 0, 0, 0};
static const int ch_init[NCH] = {1, 1, 1, 0, 0, 0};
#define WALL0 1800000000000000000ull /* ns since 1970: January 2027 */

static rec pool[POOL_MAX];
static int pool_n;
static rec hellos[NCH]; /* what each responder answered */
static int answered[NCH];

static void setup_once(void)
{
    static int done;
    if (done)
        return;
    FUZZ_CHECK(net_init() == NET_OK);
    for (int i = 0; i < 3; i++) {
        uint8_t seed[crypto_sign_SEEDBYTES], pk[NET_PUBLIC_KEY_SIZE], sk[NET_SECRET_KEY_SIZE];
        memset(seed, 0x10 + i, sizeof seed);
        FUZZ_CHECK(crypto_sign_seed_keypair(pk, sk, seed) == 0);
        FUZZ_CHECK(net_identity_from_secret(&ids[i], sk) == NET_OK);
    }
    memset(key_k, 0x5A, sizeof key_k);
    memset(key_k2, 0x33, sizeof key_k2);
    memcpy(allow, ids[0].pk, NET_PUBLIC_KEY_SIZE);
    memcpy(allow + NET_PUBLIC_KEY_SIZE, ids[1].pk, NET_PUBLIC_KEY_SIZE);
    done = 1;
}

static uint64_t rejects_total(const net_channel *c)
{
    uint64_t n = 0;
    for (int k = 0; k < NET_REJECT_COUNT; k++)
        n += net_channel_rejects(c, k);
    return n;
}

static void pool_add(const uint8_t *b, size_t len)
{
    FUZZ_CHECK(len <= REC_MAX);
    rec *r = &pool[pool_n < POOL_MAX ? pool_n++ : POOL_MAX - 1];
    memcpy(r->b, b, len);
    r->len = len;
}

static void pump(net_channel *c)
{
    const uint8_t *r;
    size_t len;
    if (net_channel_poll_send(c, &r, &len) == 1)
        pool_add(r, len);
}

/* Deliver bytes to channel y and check the per-record properties. */
static void deliver(net_channel **ch, int y, const uint8_t *b, size_t len, gossip_time_us now)
{
    net_channel *c = ch[y];
    uint8_t buf[REC_MAX + 256];
    FUZZ_CHECK(len <= sizeof buf);
    memcpy(buf, b, len);
    int was_open = net_channel_established(c), was_failed = net_channel_failed(c);
    uint64_t before = rejects_total(c);
    uint8_t *plain = NULL;
    size_t pl = 0;
    int rc = net_channel_recv(c, buf, len, now, &plain, &pl);
    FUZZ_CHECK(rc == NET_OK || rc == NET_EREJECT || rc == NET_EFAILED);
    if (rc == NET_OK && !ch_init[y] && len && b[0] == NET_REC_HELLO) {
        /* answered: a genuine HELLO, never one its agent answered before */
        FUZZ_CHECK(!answered[y]);
        int genuine = 0;
        for (int k = 0; k < pool_n; k++)
            genuine |= pool[k].len == len && !memcmp(pool[k].b, b, len) && b[0] == NET_REC_HELLO;
        FUZZ_CHECK(genuine);
        for (int z = 0; z < NCH; z++)
            if (z != y && answered[z] && ch_id[z] == ch_id[y])
                FUZZ_CHECK(hellos[z].len != len || memcmp(hellos[z].b, b, len));
        memcpy(hellos[y].b, b, len);
        hellos[y].len = len;
        answered[y] = 1;
    }
    if (was_failed)
        FUZZ_CHECK(rc == NET_EFAILED && rejects_total(c) == before);
    else if (rc == NET_OK)
        FUZZ_CHECK(rejects_total(c) == before);
    else
        FUZZ_CHECK(rejects_total(c) == before + 1 && net_channel_last_reject(c) >= 0);
    if (rc == NET_EFAILED)
        FUZZ_CHECK(net_channel_failed(c) && !net_channel_established(c));
    if (rc == NET_EREJECT)
        FUZZ_CHECK(was_open && net_channel_established(c));
    if (plain)
        FUZZ_CHECK(rc == NET_OK && was_open && pl + NET_CHANNEL_OVERHEAD == len);
    if (was_open)
        FUZZ_CHECK(net_channel_established(c)); /* an open channel never fails */
}

static void check_peer(net_channel **ch, int x, int opt)
{
    if (!net_channel_established(ch[x]))
        return;
    const uint8_t *pk = net_channel_peer_key(ch[x]);
    FUZZ_CHECK(pk != NULL);
    int who = -1;
    for (int i = 0; i < 3; i++)
        if (!memcmp(pk, ids[i].pk, NET_PUBLIC_KEY_SIZE))
            who = i;
    FUZZ_CHECK(who >= 0 && who != ch_id[x]);
    FUZZ_CHECK(net_channel_peer(ch[x]) == ids[who].node_id);
    if (opt & 1)
        FUZZ_CHECK(who != 2);
    if ((opt & 2) && x == 0)
        FUZZ_CHECK(who == 1);
}

/* Seal on a, open on b: the same bytes come out. */
static void check_pair(net_channel *a, net_channel *b, gossip_time_us now)
{
    uint8_t msg[24], out[24 + NET_CHANNEL_OVERHEAD];
    for (size_t k = 0; k < sizeof msg; k++)
        msg[k] = (uint8_t)(k * 7 + 3);
    size_t n;
    FUZZ_CHECK(net_channel_seal(a, msg, sizeof msg, out, sizeof out, &n, now) == NET_OK);
    uint8_t *plain = NULL;
    size_t pl = 0;
    FUZZ_CHECK(net_channel_recv(b, out, n, now, &plain, &pl) == NET_OK);
    FUZZ_CHECK(pl == sizeof msg && memcmp(plain, msg, pl) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup_once();
    if (size < 1)
        return 0;
    int opt = data[0];
    size_t at = 1;
    net_channel *ch[NCH];
    net_seen *seen_a = NULL, *seen_b = NULL;
    FUZZ_CHECK(net_seen_create(&seen_a, 16) == 0 && net_seen_create(&seen_b, 16) == 0);
    uint8_t ring[2 * NET_NETWORK_KEY_SIZE];
    memcpy(ring, key_k, NET_NETWORK_KEY_SIZE);
    memcpy(ring + NET_NETWORK_KEY_SIZE, key_k2, NET_NETWORK_KEY_SIZE);
    memset(answered, 0, sizeof answered);
    for (int x = 0; x < NCH; x++) {
        int r1 = x == 3 || x == 5;
        net_channel_config c = {.self = &ids[ch_id[x]],
                                .network_key = ch_k2[x] ? key_k2 : key_k,
                                .network_keys = r1 && (opt & 4) ? ring : NULL,
                                .network_keys_n = r1 && (opt & 4) ? 2 : 0,
                                .allow = (opt & 1) ? allow : NULL,
                                .allow_n = (opt & 1) ? 2 : 0,
                                .seen = ch_init[x] ? NULL
                                        : r1       ? seen_b
                                                   : seen_a,
                                .wall_ns = ch_init[x] ? WALL0 + (uint64_t)x : WALL0,
                                .auth_only = (opt & 8) != 0,
                                .initiator = ch_init[x],
                                .expect_peer = (x == 0 && (opt & 2)) ? ids[1].node_id : 0,
                                /* no rekey within the clock's reach (64 ops of at
                                 * most 25.5 s): rekeys are fuzz_session's */
                                .rekey_interval_us = 86400ull * 1000000ull};
        FUZZ_CHECK(net_channel_create(&ch[x], &c, 0) == NET_OK);
    }
    pool_n = 0;
    gossip_time_us now = 0;
#define NEXT() (at < size ? data[at++] : 0)
    for (int steps = 0; at < size && steps < 64; steps++) {
        int op = data[at++] % 8;
        switch (op) {
        case 0:
            pump(ch[NEXT() % NCH]);
            break;
        case 1:
        case 2:
        case 3: {
            int k = NEXT(), y = NEXT() % NCH;
            int p = NEXT(), q = op == 2 ? NEXT() : 0;
            if (!pool_n)
                break;
            rec r = pool[k % pool_n];
            if (op == 2)
                r.b[p % r.len] ^= (uint8_t)(1u << (q % 8));
            if (op == 3)
                r.len = (size_t)p < r.len ? (size_t)p : r.len + 1;
            deliver(ch, y, r.b, r.len, now);
            break;
        }
        case 4: {
            int y = NEXT() % NCH;
            size_t n = NEXT();
            if (n > size - at)
                n = size - at;
            deliver(ch, y, data + at, n, now);
            at += n;
            break;
        }
        case 5: {
            now += (gossip_time_us)NEXT() * 100000u;
            net_channel *c = ch[NEXT() % NCH];
            int was_open = net_channel_established(c), was_failed = net_channel_failed(c);
            int rc = net_channel_check_timeout(c, now);
            FUZZ_CHECK(rc == NET_OK || rc == NET_EFAILED);
            if (was_open)
                FUZZ_CHECK(rc == NET_OK);
            if (!was_open && !was_failed)
                FUZZ_CHECK((rc == NET_EFAILED) ==
                           (now >= NET_CHANNEL_HANDSHAKE_TIMEOUT_DEFAULT_US));
            break;
        }
        case 6: {
            net_channel *c = ch[NEXT() % NCH];
            size_t n = NEXT() % FRAME_MAX;
            if (n > size - at)
                n = size - at;
            uint8_t out[FRAME_MAX + NET_CHANNEL_OVERHEAD];
            size_t ol;
            int rc = net_channel_seal(c, data + at, n, out, sizeof out, &ol, now);
            at += n;
            FUZZ_CHECK(net_channel_established(c) ? rc == NET_OK : rc == NET_ESTATE);
            if (rc == NET_OK)
                pool_add(out, ol);
            break;
        }
        default:
            for (int x = 0; x < NCH; x++)
                pump(ch[x]);
            break;
        }
        for (int x = 0; x < NCH; x++)
            check_peer(ch, x, opt);
    }
#undef NEXT
    /* An open responder has exactly one open counterpart (it opens only on
     * a CONFIRM, which its initiator sends as it opens), and the two share
     * their keys; an open initiator has at most one (its CONFIRM may not
     * have been delivered). */
    for (int y = 0; y < NCH; y++) {
        int found = 0;
        for (int x = 0; x < NCH; x++) {
            if (ch_init[x] == ch_init[y] || !net_channel_established(ch[x]) ||
                !net_channel_established(ch[y]) ||
                memcmp(net_channel_network_key(ch[x]), net_channel_network_key(ch[y]),
                       NET_NETWORK_KEY_SIZE) ||
                net_channel_peer(ch[x]) != ids[ch_id[y]].node_id ||
                net_channel_peer(ch[y]) != ids[ch_id[x]].node_id)
                continue;
            found++;
            if (!ch_init[y]) {
                check_pair(ch[x], ch[y], now);
                check_pair(ch[y], ch[x], now);
            }
        }
        FUZZ_CHECK(found <= 1);
        if (!ch_init[y] && net_channel_established(ch[y]))
            FUZZ_CHECK(found == 1);
    }
    for (int x = 0; x < NCH; x++)
        net_channel_destroy(ch[x]);
    net_seen_destroy(seen_a);
    net_seen_destroy(seen_b);
    return 0;
}
