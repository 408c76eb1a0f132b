/* fuzz_hello — libFuzzer target for the responder's handling of HELLO
 * records past the MAC (net/channel, handshake v2; docs/FUZZING.md).
 *
 * A HELLO is sealed under a key derived from the network key, which a
 * fuzzer knows from its fixture: so this target forges HELLOs from the
 * byte layout of docs/SECURITY.md ("HELLO (I -> R)") with fuzzed content —
 * flags, ephemeral key, claimed identity, timestamp, responder id,
 * signature — seals them correctly (or under a key the responder lacks,
 * or with a bit flipped), and hands them one by one to fresh responder
 * channels of one agent (identity B, sharing one seen table), so the
 * checks behind the seal all run: responder id, self, allow-list,
 * freshness of the timestamp, signature, key exchange.
 *
 * Input: byte 0 = options (bit 0: allow-list {A, B}; bit 1: B accepts the
 * key ring {K, K2}; bit 2: B checks timestamps against its wall clock),
 * then HELLOs of 10 bytes each, plus the extra bytes some fields take:
 *   flags, network key (% 3: K, K2, K3 which nobody holds), claimed key
 *   (% 4: A, C, B itself, 32 input bytes), responder id (% 4: 0, B, A, 8
 *   input bytes), timestamp (two bytes: signed seconds from the fixture's
 *   clock, then one byte of nanoseconds), signature (% 4: right, one bit
 *   flipped at the next byte's index, made with another key, 64 input
 *   bytes), ephemeral key (% 2: a fixed valid one, 32 input bytes), tamper
 *   (% 4 == 1: flip a bit of the sealed part).
 * Properties, any violation aborts: each HELLO gets the verdict of the
 * ordered checks of docs/SECURITY.md — bad_record (flags), bad_mac, then
 * wrong_peer, self, not_allowed, stale_hello, bad_signature, bad_key (a
 * weak ephemeral key) — and otherwise a REPLY; a refused HELLO fails its
 * channel, is counted once and gets no byte back. Freshness: a timestamp
 * an earlier HELLO of the same key was accepted with is always refused, a
 * timestamp newer than all of them never is (the 2 s reorder window in
 * between may go either way), and with the clock check on, a timestamp more
 * than NET_CHANNEL_HELLO_AGE_MAX_S old is refused.
 */
#define _GNU_SOURCE
#include "tests/fuzz/fuzz_util.h"

#include <sodium.h>

#include "net/channel.h"
#include "net/net.h"
#include "net/seen.h"

#define HELLOS_MAX 16
#define WALL0      1800000000000000000ull /* ns since 1970: January 2027 */

static net_identity ids[3]; /* A, B (the responder), C */
static uint8_t keys[3][NET_NETWORK_KEY_SIZE];
static uint8_t allow[2 * NET_PUBLIC_KEY_SIZE];
static uint8_t eph_fixed[32];

static void setup_once(void)
{
    static int done;
    if (done)
        return;
    FUZZ_CHECK(net_init() == NET_OK);
    for (int i = 0; i < 3; i++) {
        uint8_t seed[crypto_sign_SEEDBYTES], pk[NET_PUBLIC_KEY_SIZE], sk[NET_SECRET_KEY_SIZE];
        memset(seed, 0x30 + i, sizeof seed);
        FUZZ_CHECK(crypto_sign_seed_keypair(pk, sk, seed) == 0);
        FUZZ_CHECK(net_identity_from_secret(&ids[i], sk) == NET_OK);
        memset(keys[i], 0x50 + i, sizeof keys[i]);
    }
    memcpy(allow, ids[0].pk, NET_PUBLIC_KEY_SIZE);
    memcpy(allow + NET_PUBLIC_KEY_SIZE, ids[1].pk, NET_PUBLIC_KEY_SIZE);
    uint8_t esk[32];
    memset(esk, 0x77, sizeof esk);
    FUZZ_CHECK(crypto_scalarmult_base(eph_fixed, esk) == 0);
    done = 1;
}

/* H_K(label, a, b) of docs/SECURITY.md: BLAKE2b-256 keyed with K. */
static void kh(const uint8_t *K, uint8_t out[32], const char *label, const uint8_t *a, size_t an,
               const uint8_t *b, size_t bn)
{
    crypto_generichash_state st;
    crypto_generichash_init(&st, K, NET_NETWORK_KEY_SIZE, 32);
    crypto_generichash_update(&st, (const uint8_t *)label, strlen(label));
    crypto_generichash_update(&st, a, an);
    if (bn)
        crypto_generichash_update(&st, b, bn);
    crypto_generichash_final(&st, out, 32);
}

/* Timestamps B accepted, per claimed key: one slot per distinct key, and
 * an input holds at most HELLOS_MAX HELLOs, so every key has its own (a
 * shared slot for "other" keys once made a key never seen look like a
 * replay of another's timestamp). */
typedef struct seen_model {
    uint8_t pk[HELLOS_MAX][32];
    uint64_t ts[HELLOS_MAX][HELLOS_MAX];
    int n[HELLOS_MAX];
    int used;
} seen_model;

static int slot_of(seen_model *m, const uint8_t pk[32])
{
    for (int i = 0; i < m->used; i++)
        if (!memcmp(m->pk[i], pk, 32))
            return i;
    FUZZ_CHECK(m->used < HELLOS_MAX);
    memcpy(m->pk[m->used], pk, 32);
    return m->used++;
}

static uint64_t ts_value(const uint8_t ts[12])
{
    uint64_t label = 0;
    for (int i = 0; i < 8; i++)
        label = label << 8 | ts[i];
    uint32_t ns = (uint32_t)ts[8] << 24 | (uint32_t)ts[9] << 16 | (uint32_t)ts[10] << 8 | ts[11];
    return label * 1000000000ull + ns; /* order is all that matters here */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup_once();
    if (size < 1)
        return 0;
    int opt = data[0];
    size_t at = 1;
    net_seen *seen = NULL;
    FUZZ_CHECK(net_seen_create(&seen, 16) == 0);
    uint8_t ring[2 * NET_NETWORK_KEY_SIZE];
    memcpy(ring, keys[0], NET_NETWORK_KEY_SIZE);
    memcpy(ring + NET_NETWORK_KEY_SIZE, keys[1], NET_NETWORK_KEY_SIZE);
    static seen_model model;
    memset(&model, 0, sizeof model);
#define NEXT() (at < size ? data[at++] : 0)
    for (int k = 0; k < HELLOS_MAX && at + 10 <= size; k++) {
        uint8_t flags = NEXT();
        int key = NEXT() % 3, who = NEXT() % 4, rid_sel = NEXT() % 4;
        int hi = NEXT();
        int16_t dsec = (int16_t)(hi << 8 | NEXT());
        uint32_t ns = NEXT() * 3906250u;
        int sig_mode = NEXT() % 4;
        /* the fields that take input bytes */
        uint8_t pk[32], rid8[8] = {0}, sig_raw[64], eph[32];
        if (who == 3) {
            for (int i = 0; i < 32; i++)
                pk[i] = NEXT();
        } else {
            memcpy(pk, ids[who == 0 ? 0 : who == 1 ? 2 : 1].pk, 32);
        }
        uint64_t rid = rid_sel == 0 ? 0 : rid_sel == 1 ? ids[1].node_id : ids[0].node_id;
        if (rid_sel == 3) {
            rid = 0;
            for (int i = 0; i < 8; i++)
                rid = rid << 8 | NEXT();
        }
        int flip_at = sig_mode == 1 ? NEXT() : 0;
        if (sig_mode == 3)
            for (int i = 0; i < 64; i++)
                sig_raw[i] = NEXT();
        int eph_fuzz = NEXT() % 2;
        if (eph_fuzz)
            for (int i = 0; i < 32; i++)
                eph[i] = NEXT();
        else
            memcpy(eph, eph_fixed, 32);
        int tamper = NEXT() % 4 == 1;

        /* forge the HELLO */
        uint8_t h[NET_CHANNEL_HELLO_SIZE], pt[NET_CHANNEL_HELLO_SEALED];
        h[0] = NET_REC_HELLO;
        h[1] = NET_CHANNEL_VERSION;
        h[2] = flags;
        memcpy(h + 3, eph, 32);
        memcpy(pt, pk, 32);
        uint64_t wall = WALL0 + (uint64_t)((int64_t)dsec * 1000000000ll) + ns;
        net_seen_tai64n(pt + 32, wall);
        for (int i = 0; i < 8; i++)
            pt[44 + i] = (uint8_t)(rid >> (56 - 8 * i));
        const uint8_t *K = keys[key];
        uint8_t h1[32], k1[32], nonce[12] = {0};
        kh(K, h1, "murmur/v2/hello-sig", h, NET_CHANNEL_HELLO_PREFIX, pt, 52);
        int signer = who == 0 ? 0 : who == 1 ? 2 : who == 2 ? 1 : -1;
        int sig_ok = 0;
        if (sig_mode == 3) {
            memcpy(pt + 52, sig_raw, 64);
        } else if (sig_mode == 2 || signer < 0) {
            /* made with a key other than the claimed one */
            int other = signer == 0 ? 2 : 0;
            crypto_sign_detached(pt + 52, NULL, h1, 32, ids[other].sk);
        } else {
            crypto_sign_detached(pt + 52, NULL, h1, 32, ids[signer].sk);
            sig_ok = sig_mode == 0;
            if (sig_mode == 1)
                pt[52 + flip_at % 64] ^= (uint8_t)(1u << (flip_at / 64 % 4));
        }
        if (!sig_ok) /* a random or altered signature can still verify: ask */
            sig_ok = crypto_sign_verify_detached(pt + 52, h1, 32, pk) == 0;
        kh(K, k1, "murmur/v2/hello-key", h, NET_CHANNEL_HELLO_PREFIX, NULL, 0);
        FUZZ_CHECK(crypto_aead_chacha20poly1305_ietf_encrypt_detached(
                       h + NET_CHANNEL_HELLO_PREFIX,
                       h + NET_CHANNEL_HELLO_PREFIX + NET_CHANNEL_HELLO_SEALED, NULL, pt, sizeof pt,
                       h, NET_CHANNEL_HELLO_PREFIX, NULL, nonce, k1) == 0);
        if (tamper)
            h[NET_CHANNEL_HELLO_PREFIX +
              flip_at % (NET_CHANNEL_HELLO_SIZE - NET_CHANNEL_HELLO_PREFIX)] ^= 0x10;

        /* the verdict of docs/SECURITY.md, in order; -1 = accepted */
        int holds_key = key == 0 || (key == 1 && (opt & 2));
        int slot = slot_of(&model, pk);
        uint64_t t = ts_value(pt + 32);
        int replay = 0, newest = 1;
        for (int i = 0; i < model.n[slot]; i++) {
            replay |= model.ts[slot][i] == t;
            newest &= t > model.ts[slot][i];
        }
        int too_old =
            (opt & 4) && wall / 1000000000ull + NET_CHANNEL_HELLO_AGE_MAX_S < WALL0 / 1000000000ull;
        uint8_t shared[32];
        int weak = crypto_scalarmult(shared, eph_fixed, eph) != 0; /* low-order e_I */
        int allowed = !(opt & 1) || !memcmp(pk, ids[0].pk, 32) || !memcmp(pk, ids[1].pk, 32);
        int want = -1, maybe_stale = 0, signed_stage = 0;
        if (flags & ~NET_CHANNEL_FLAG_AUTH_ONLY)
            want = NET_REJECT_BAD_RECORD;
        else if (!holds_key || tamper)
            want = NET_REJECT_BAD_MAC;
        else if (rid && rid != ids[1].node_id)
            want = NET_REJECT_WRONG_PEER;
        else if (!memcmp(pk, ids[1].pk, 32))
            want = NET_REJECT_SELF;
        else if (net_node_id(pk) == 0)
            want = NET_REJECT_BAD_KEY;
        else if (!allowed)
            want = NET_REJECT_NOT_ALLOWED;
        else if (replay || too_old)
            want = NET_REJECT_STALE_HELLO;
        else {
            maybe_stale = !newest; /* inside the reorder window: either way */
            want = !sig_ok ? NET_REJECT_BAD_SIGNATURE : weak ? NET_REJECT_BAD_KEY : -1;
            signed_stage = sig_ok;
        }

        net_channel_config c = {.self = &ids[1],
                                .network_key = keys[0],
                                .network_keys = (opt & 2) ? ring : NULL,
                                .network_keys_n = (opt & 2) ? 2 : 0,
                                .allow = (opt & 1) ? allow : NULL,
                                .allow_n = (opt & 1) ? 2 : 0,
                                .seen = seen,
                                .wall_ns = (opt & 4) ? WALL0 : 0,
                                .initiator = 0};
        net_channel *r = NULL;
        FUZZ_CHECK(net_channel_create(&r, &c, 0) == NET_OK);
        uint8_t *plain = NULL;
        size_t pl = 0;
        int rc = net_channel_recv(r, h, sizeof h, 0, &plain, &pl);
        int got = rc == NET_OK ? -1 : net_channel_last_reject(r);
        if (got != want && !(maybe_stale && got == NET_REJECT_STALE_HELLO))
            fprintf(stderr, "HELLO %d: verdict %d, expected %d%s\n", k, got, want,
                    maybe_stale ? " (or stale_hello)" : "");
        FUZZ_CHECK(got == want || (maybe_stale && got == NET_REJECT_STALE_HELLO));
        FUZZ_CHECK(plain == NULL);
        const uint8_t *out;
        size_t ol;
        if (rc == NET_OK) {
            FUZZ_CHECK(net_channel_poll_send(r, &out, &ol) == 1 && ol == NET_CHANNEL_REPLY_SIZE &&
                       out[0] == NET_REC_REPLY);
        } else {
            FUZZ_CHECK(rc == NET_EFAILED && net_channel_failed(r));
            FUZZ_CHECK(net_channel_poll_send(r, &out, &ol) == 0);
            uint64_t total = 0;
            for (int cause = 0; cause < NET_REJECT_COUNT; cause++)
                total += net_channel_rejects(r, cause);
            FUZZ_CHECK(total == 1);
        }
        /* B records the timestamp once the signature verified */
        if (signed_stage && got == want && model.n[slot] < HELLOS_MAX)
            model.ts[slot][model.n[slot]++] = t;
        net_channel_destroy(r);
    }
#undef NEXT
    net_seen_destroy(seen);
    return 0;
}
