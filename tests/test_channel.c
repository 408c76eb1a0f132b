/* net/channel and net/penalty: handshake, admission, AEAD frames, replay
 * window, rekey, handshake timeout and the cut-off policy. No sockets: the
 * channel is sans-IO, records are passed by hand and time is an argument. */
#include "tests/harness.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/channel.h"
#include "net/penalty.h"
#include "net/seen.h"

#define T0 1000000ull /* an arbitrary start time, microseconds */

typedef struct pair {
    net_identity id_i, id_r;
    uint8_t key_i[NET_NETWORK_KEY_SIZE], key_r[NET_NETWORK_KEY_SIZE];
    net_channel_config cfg_i, cfg_r;
    net_channel *i, *r;
} pair;

static void pair_init(pair *p)
{
    memset(p, 0, sizeof *p);
    assert_int_equal(net_identity_generate(&p->id_i), NET_OK);
    assert_int_equal(net_identity_generate(&p->id_r), NET_OK);
    randombytes_buf(p->key_i, sizeof p->key_i);
    memcpy(p->key_r, p->key_i, sizeof p->key_r);
    p->cfg_i = (net_channel_config){.self = &p->id_i, .network_key = p->key_i, .initiator = 1};
    p->cfg_r = (net_channel_config){.self = &p->id_r, .network_key = p->key_r, .initiator = 0};
}

static void pair_create(pair *p)
{
    assert_int_equal(net_channel_create(&p->i, &p->cfg_i, T0), NET_OK);
    assert_int_equal(net_channel_create(&p->r, &p->cfg_r, T0), NET_OK);
}

static void pair_free(pair *p)
{
    net_channel_destroy(p->i);
    net_channel_destroy(p->r);
    p->i = p->r = NULL;
}

/* Move one pending handshake record from `from` to `to`; returns to's result,
 * or -1 when from had nothing to send. */
static int hop(net_channel *from, net_channel *to, gossip_time_us now)
{
    const uint8_t *rec;
    size_t len;
    if (!net_channel_poll_send(from, &rec, &len))
        return -1;
    uint8_t buf[NET_CHANNEL_HS_MAX];
    assert_true(len <= sizeof buf);
    memcpy(buf, rec, len);
    uint8_t *plain;
    size_t plain_len;
    int rc = net_channel_recv(to, buf, len, now, &plain, &plain_len);
    if (rc == NET_OK)
        assert_null(plain);
    return rc;
}

/* Run the three-record handshake (HELLO, REPLY, CONFIRM); returns the
 * first failure or NET_OK. */
static int handshake(pair *p)
{
    int rc = hop(p->i, p->r, T0 + 1); /* HELLO */
    if (rc)
        return rc;
    rc = hop(p->r, p->i, T0 + 2); /* REPLY */
    if (rc)
        return rc;
    return hop(p->i, p->r, T0 + 3); /* CONFIRM */
}

/* Seal `len` bytes of a pattern into rec (cap bytes). */
static size_t seal(net_channel *ch, uint8_t *rec, size_t cap, size_t len, uint8_t tag,
                   gossip_time_us now)
{
    uint8_t *plain = malloc(len ? len : 1);
    assert_non_null(plain);
    for (size_t k = 0; k < len; k++)
        plain[k] = (uint8_t)(tag + k * 7);
    size_t out_len = 0;
    assert_int_equal(net_channel_seal(ch, plain, len, rec, cap, &out_len, now), NET_OK);
    assert_int_equal(out_len, len + NET_CHANNEL_OVERHEAD);
    free(plain);
    return out_len;
}

/* Open rec (a copy is used, rec is kept) and check the pattern. */
static int open_copy(net_channel *ch, const uint8_t *rec, size_t len, size_t want_len, uint8_t tag,
                     gossip_time_us now)
{
    uint8_t *buf = malloc(len ? len : 1);
    assert_non_null(buf);
    memcpy(buf, rec, len);
    uint8_t *plain = NULL;
    size_t plain_len = 0;
    int rc = net_channel_recv(ch, buf, len, now, &plain, &plain_len);
    if (rc == NET_OK) {
        assert_non_null(plain);
        assert_int_equal(plain_len, want_len);
        for (size_t k = 0; k < plain_len; k++)
            assert_int_equal(plain[k], (uint8_t)(tag + k * 7));
    }
    free(buf);
    return rc;
}

static void handshake_ok(void **state)
{
    (void)state;
    pair p;
    pair_init(&p);
    p.cfg_i.expect_peer = p.id_r.node_id;
    pair_create(&p);
    assert_false(net_channel_established(p.i));
    assert_int_equal(net_channel_peer(p.i), 0);
    assert_int_equal(handshake(&p), NET_OK);
    assert_true(net_channel_established(p.i) && net_channel_established(p.r));
    assert_true(net_channel_peer(p.i) == p.id_r.node_id);
    assert_true(net_channel_peer(p.r) == p.id_i.node_id);
    assert_memory_equal(net_channel_peer_key(p.r), p.id_i.pk, NET_PUBLIC_KEY_SIZE);
    assert_true(net_channel_deadline(p.i) == GOSSIP_TIME_NEVER);
    /* nothing more to send after the handshake */
    assert_int_equal(hop(p.r, p.i, T0), -1);
    assert_int_equal(hop(p.i, p.r, T0), -1);

    uint8_t rec[2048];
    for (size_t len = 0; len < 1000; len += 97) {
        size_t n = seal(p.i, rec, sizeof rec, len, (uint8_t)len, T0 + 10);
        assert_int_equal(open_copy(p.r, rec, n, len, (uint8_t)len, T0 + 10), NET_OK);
        n = seal(p.r, rec, sizeof rec, len, (uint8_t)(len + 1), T0 + 10);
        assert_int_equal(open_copy(p.i, rec, n, len, (uint8_t)(len + 1), T0 + 10), NET_OK);
    }
    /* A frame sealed for one direction does not open in the other. */
    size_t n = seal(p.i, rec, sizeof rec, 10, 3, T0);
    assert_int_equal(open_copy(p.i, rec, n, 10, 3, T0), NET_EREJECT);
    assert_int_equal(net_channel_rejects(p.i, NET_REJECT_AUTH), 1);
    /* In-place sealing: plain already at out + header. */
    uint8_t *c = rec + NET_CHANNEL_HEADER_SIZE;
    for (int k = 0; k < 50; k++)
        c[k] = (uint8_t)(9 + k * 7);
    size_t out_len;
    assert_int_equal(net_channel_seal(p.i, c, 50, rec, sizeof rec, &out_len, T0), NET_OK);
    assert_int_equal(open_copy(p.r, rec, out_len, 50, 9, T0), NET_OK);
    /* Too small an output buffer. */
    assert_int_equal(net_channel_seal(p.i, c, 50, rec, 50 + NET_CHANNEL_OVERHEAD - 1, &out_len, T0),
                     NET_ESPACE);
    for (int k = 0; k < NET_REJECT_COUNT; k++)
        if (k != NET_REJECT_AUTH)
            assert_int_equal(net_channel_rejects(p.i, k) + net_channel_rejects(p.r, k), 0);
    pair_free(&p);
}

static void seal_before_open_refused(void **state)
{
    (void)state;
    pair p;
    pair_init(&p);
    pair_create(&p);
    uint8_t rec[64];
    size_t n;
    assert_int_equal(net_channel_seal(p.i, rec, 4, rec + 20, 40, &n, T0), NET_ESTATE);
    /* Data before the handshake fails the responder. */
    rec[0] = NET_REC_DATA;
    uint8_t *plain;
    size_t pl;
    assert_int_equal(net_channel_recv(p.r, rec, 40, T0, &plain, &pl), NET_EFAILED);
    assert_int_equal(net_channel_rejects(p.r, NET_REJECT_BAD_STATE), 1);
    assert_true(net_channel_failed(p.r));
    /* Unknown record type. */
    rec[0] = 0x7F;
    assert_int_equal(net_channel_recv(p.i, rec, 40, T0, &plain, &pl), NET_EFAILED);
    assert_int_equal(net_channel_rejects(p.i, NET_REJECT_BAD_RECORD), 1);
    pair_free(&p);
}

static void wrong_network_key_responder(void **state)
{
    (void)state;
    pair p;
    pair_init(&p);
    p.key_r[5] ^= 0x40;
    pair_create(&p);
    assert_int_equal(hop(p.i, p.r, T0), NET_EFAILED);
    assert_int_equal(net_channel_rejects(p.r, NET_REJECT_BAD_MAC), 1);
    assert_true(net_channel_failed(p.r));
    /* The responder says nothing: no identity leaks to a non-member. */
    assert_int_equal(hop(p.r, p.i, T0), -1);
    /* The initiator never hears back and times out. */
    assert_int_equal(net_channel_check_timeout(p.i, T0 + 1), NET_OK);
    assert_int_equal(net_channel_check_timeout(p.i, net_channel_deadline(p.i)), NET_EFAILED);
    assert_int_equal(net_channel_rejects(p.i, NET_REJECT_HANDSHAKE_TIMEOUT), 1);
    pair_free(&p);
}

/* Keyed BLAKE2b-256 over label || parts, as docs/SECURITY.md writes H_K. */
static void hk(uint8_t out[32], const uint8_t *key, const char *label, const uint8_t *a, size_t an,
               const uint8_t *b, size_t bn, const uint8_t *c, size_t cn, const uint8_t *d,
               size_t dn)
{
    crypto_generichash_state st;
    crypto_generichash_init(&st, key, NET_NETWORK_KEY_SIZE, 32);
    crypto_generichash_update(&st, (const uint8_t *)label, strlen(label));
    if (an)
        crypto_generichash_update(&st, a, an);
    if (bn)
        crypto_generichash_update(&st, b, bn);
    if (cn)
        crypto_generichash_update(&st, c, cn);
    if (dn)
        crypto_generichash_update(&st, d, dn);
    crypto_generichash_final(&st, out, 32);
}

/* Build a HELLO by hand, exactly as docs/SECURITY.md lays it out: keyed
 * with `key`, claiming pk of `claim` but signed by `signer`, timestamp
 * wall_ns, responder id rid. */
static void forge_hello(uint8_t out[NET_CHANNEL_HELLO_SIZE], const net_identity *claim,
                        const net_identity *signer, const uint8_t *key, uint64_t wall_ns,
                        uint64_t rid)
{
    uint8_t e_pk[32], e_sk[32], pt[NET_CHANNEL_HELLO_SEALED], h1[32], k1[32], nonce[12] = {0};
    crypto_kx_keypair(e_pk, e_sk);
    out[0] = NET_REC_HELLO;
    out[1] = NET_CHANNEL_VERSION;
    out[2] = 0;
    memcpy(out + 3, e_pk, 32);
    memcpy(pt, claim->pk, 32);
    net_seen_tai64n(pt + 32, wall_ns);
    for (int i = 0; i < 8; i++)
        pt[44 + i] = (uint8_t)(rid >> (56 - 8 * i));
    hk(h1, key, "murmur/v2/hello-sig", out, 35, pt, 52, NULL, 0, NULL, 0);
    crypto_sign_detached(pt + 52, NULL, h1, 32, signer->sk);
    hk(k1, key, "murmur/v2/hello-key", out, 35, NULL, 0, NULL, 0, NULL, 0);
    crypto_aead_chacha20poly1305_ietf_encrypt_detached(out + 35, out + 35 + sizeof pt, NULL, pt,
                                                       sizeof pt, out, 35, NULL, nonce, k1);
}

/* Build a REPLY to `hello` by hand, with the chain keyed by `key`. */
static void forge_reply(uint8_t out[NET_CHANNEL_REPLY_SIZE], const uint8_t *hello,
                        const net_identity *id, const uint8_t *key)
{
    uint8_t e_pk[32], e_sk[32], i2r[32], r2i[32], ck[32], h2[32], k2[32], nonce[12] = {0};
    uint8_t pt[NET_CHANNEL_REPLY_SEALED];
    crypto_kx_keypair(e_pk, e_sk);
    assert_int_equal(crypto_kx_server_session_keys(i2r, r2i, e_pk, e_sk, hello + 3), 0);
    out[0] = NET_REC_REPLY;
    out[1] = 0;
    memcpy(out + 2, e_pk, 32);
    hk(ck, key, "murmur/v2/chain", hello, NET_CHANNEL_HELLO_SIZE, out, 34, i2r, 32, r2i, 32);
    hk(h2, key, "murmur/v2/reply-sig", hello, NET_CHANNEL_HELLO_SIZE, out, 34, id->pk, 32, NULL, 0);
    memcpy(pt, id->pk, 32);
    crypto_sign_detached(pt + 32, NULL, h2, 32, id->sk);
    hk(k2, key, "murmur/v2/reply-key", ck, 32, NULL, 0, NULL, 0, NULL, 0);
    crypto_aead_chacha20poly1305_ietf_encrypt_detached(out + 34, out + 34 + sizeof pt, NULL, pt,
                                                       sizeof pt, out, 34, NULL, nonce, k2);
}

static void wrong_network_key_initiator(void **state)
{
    (void)state;
    uint8_t other[NET_NETWORK_KEY_SIZE];
    randombytes_buf(other, sizeof other);
    for (int use_right_key = 0; use_right_key < 2; use_right_key++) {
        pair p;
        pair_init(&p);
        pair_create(&p);
        const uint8_t *hello;
        size_t len;
        assert_int_equal(net_channel_poll_send(p.i, &hello, &len), 1);
        assert_int_equal(len, NET_CHANNEL_HELLO_SIZE);
        uint8_t h[NET_CHANNEL_HELLO_SIZE], reply[NET_CHANNEL_REPLY_SIZE];
        memcpy(h, hello, len);
        /* A responder that skips the HELLO check but lacks our key. */
        forge_reply(reply, h, &p.id_r, use_right_key ? p.key_i : other);
        uint8_t *plain;
        size_t pl;
        int rc = net_channel_recv(p.i, reply, sizeof reply, T0, &plain, &pl);
        if (use_right_key) {
            /* control: the by-hand layout is the real one */
            assert_int_equal(rc, NET_OK);
            assert_true(net_channel_established(p.i));
            assert_true(net_channel_peer(p.i) == p.id_r.node_id);
        } else {
            assert_int_equal(rc, NET_EFAILED);
            assert_int_equal(net_channel_rejects(p.i, NET_REJECT_BAD_MAC), 1);
            assert_int_equal(hop(p.i, p.r, T0), -1); /* no CONFIRM goes out */
        }
        pair_free(&p);
    }
    /* Responder side: HELLOs built by hand. Keyed with the right network
     * key and signed by the key they claim: accepted (control); keyed with
     * another network key: bad_mac; claiming one key but signed by another:
     * bad_signature, and no REPLY in either case. */
    for (int kind = 0; kind < 3; kind++) {
        pair p;
        pair_init(&p);
        pair_create(&p);
        net_identity mallory;
        assert_int_equal(net_identity_generate(&mallory), NET_OK);
        uint8_t h[NET_CHANNEL_HELLO_SIZE];
        forge_hello(h, &p.id_i, kind == 2 ? &mallory : &p.id_i, kind == 1 ? other : p.key_i, 1, 0);
        uint8_t *plain;
        size_t pl;
        int rc = net_channel_recv(p.r, h, sizeof h, T0, &plain, &pl);
        if (kind == 0) {
            assert_int_equal(rc, NET_OK);
            assert_int_equal(hop(p.r, p.i, T0), NET_EFAILED); /* p.i has another e_I */
        } else {
            assert_int_equal(rc, NET_EFAILED);
            assert_int_equal(
                net_channel_rejects(p.r, kind == 1 ? NET_REJECT_BAD_MAC : NET_REJECT_BAD_SIGNATURE),
                1);
            assert_int_equal(hop(p.r, p.i, T0), -1);
        }
        pair_free(&p);
    }
}

static void allow_list(void **state)
{
    (void)state;
    net_identity stranger;
    assert_int_equal(net_identity_generate(&stranger), NET_OK);
    /* Responder pins only the stranger: the initiator is refused. */
    {
        pair p;
        pair_init(&p);
        p.cfg_r.allow = stranger.pk;
        p.cfg_r.allow_n = 1;
        pair_create(&p);
        assert_int_equal(handshake(&p), NET_EFAILED);
        assert_int_equal(net_channel_rejects(p.r, NET_REJECT_NOT_ALLOWED), 1);
        assert_false(net_channel_established(p.r));
        pair_free(&p);
    }
    /* Initiator pins only the stranger: the responder is refused. */
    {
        pair p;
        pair_init(&p);
        p.cfg_i.allow = stranger.pk;
        p.cfg_i.allow_n = 1;
        pair_create(&p);
        assert_int_equal(handshake(&p), NET_EFAILED);
        assert_int_equal(net_channel_rejects(p.i, NET_REJECT_NOT_ALLOWED), 1);
        pair_free(&p);
    }
    /* Both pinned in a list of three: admitted. */
    {
        pair p;
        pair_init(&p);
        uint8_t list[3 * NET_PUBLIC_KEY_SIZE];
        memcpy(list, stranger.pk, 32);
        memcpy(list + 32, p.id_i.pk, 32);
        memcpy(list + 64, p.id_r.pk, 32);
        p.cfg_i.allow = p.cfg_r.allow = list;
        p.cfg_i.allow_n = p.cfg_r.allow_n = 3;
        pair_create(&p);
        assert_int_equal(handshake(&p), NET_OK);
        pair_free(&p);
    }
    /* A configured list with no key (every line commented out) admits
     * nobody, on either side: it never means "no list". */
    for (int side = 0; side < 2; side++) {
        pair p;
        pair_init(&p);
        static const uint8_t none[1];
        if (side == 0)
            p.cfg_r.allow = none;
        else
            p.cfg_i.allow = none;
        pair_create(&p);
        assert_int_equal(handshake(&p), NET_EFAILED);
        net_channel *refuser = side == 0 ? p.r : p.i;
        assert_int_equal(net_channel_rejects(refuser, NET_REJECT_NOT_ALLOWED), 1);
        assert_false(net_channel_established(refuser));
        pair_free(&p);
    }
    /* Replacing the list: a responder whose list loses the initiator's key
     * before AUTH refuses it; net_channel_allowed follows the new list. */
    {
        pair p;
        pair_init(&p);
        uint8_t list[2 * NET_PUBLIC_KEY_SIZE];
        memcpy(list, p.id_i.pk, 32);
        memcpy(list + 32, stranger.pk, 32);
        p.cfg_r.allow = list;
        p.cfg_r.allow_n = 2;
        pair_create(&p);
        assert_true(net_channel_allowed(p.r, p.id_i.pk));
        assert_int_equal(hop(p.i, p.r, T0 + 1), NET_OK);
        assert_int_equal(net_channel_set_allow(p.r, list + 32, 1), NET_OK);
        assert_false(net_channel_allowed(p.r, p.id_i.pk));
        assert_true(net_channel_allowed(p.r, stranger.pk));
        assert_int_equal(net_channel_set_allow(p.r, NULL, 1), NET_EINVAL);
        assert_int_equal(hop(p.r, p.i, T0 + 2), NET_OK);
        assert_int_equal(hop(p.i, p.r, T0 + 3), NET_EFAILED);
        assert_int_equal(net_channel_rejects(p.r, NET_REJECT_NOT_ALLOWED), 1);
        pair_free(&p);
    }
}

static void wrong_peer_and_self(void **state)
{
    (void)state;
    pair p;
    pair_init(&p);
    p.cfg_i.expect_peer = p.id_r.node_id ^ 1;
    pair_create(&p);
    assert_int_equal(handshake(&p), NET_EFAILED);
    /* The HELLO names the node it is for: the responder refuses it. */
    assert_int_equal(net_channel_rejects(p.r, NET_REJECT_WRONG_PEER), 1);
    pair_free(&p);

    pair_init(&p);
    p.cfg_r.self = &p.id_i; /* dialing ourselves */
    pair_create(&p);
    assert_int_equal(handshake(&p), NET_EFAILED);
    assert_int_equal(net_channel_rejects(p.r, NET_REJECT_SELF), 1); /* seen in the HELLO */
    pair_free(&p);
}

static void handshake_tampering(void **state)
{
    (void)state;
    /* Flip every byte of each handshake record in turn: each flip fails. */
    for (int which = 0; which < 3; which++) {
        size_t size = which == 0   ? NET_CHANNEL_HELLO_SIZE
                      : which == 1 ? NET_CHANNEL_REPLY_SIZE
                                   : NET_CHANNEL_CONFIRM_SIZE;
        for (size_t b = 0; b < size; b++) {
            pair p;
            pair_init(&p);
            pair_create(&p);
            net_channel *from = p.i, *to = p.r;
            for (int step = 0; step < which; step++) {
                assert_int_equal(hop(from, to, T0), NET_OK);
                net_channel *t = from;
                from = to;
                to = t;
            }
            const uint8_t *rec;
            size_t len;
            assert_int_equal(net_channel_poll_send(from, &rec, &len), 1);
            uint8_t buf[NET_CHANNEL_HS_MAX];
            memcpy(buf, rec, len);
            buf[b] ^= 0x01;
            uint8_t *plain;
            size_t pl;
            assert_int_equal(net_channel_recv(to, buf, len, T0, &plain, &pl), NET_EFAILED);
            assert_true(net_channel_failed(to));
            pair_free(&p);
        }
    }
    /* A truncated HELLO. */
    pair p;
    pair_init(&p);
    pair_create(&p);
    const uint8_t *rec;
    size_t len;
    assert_int_equal(net_channel_poll_send(p.i, &rec, &len), 1);
    uint8_t buf[NET_CHANNEL_HS_MAX];
    memcpy(buf, rec, len);
    uint8_t *plain;
    size_t pl;
    assert_int_equal(net_channel_recv(p.r, buf, len - 1, T0, &plain, &pl), NET_EFAILED);
    assert_int_equal(net_channel_rejects(p.r, NET_REJECT_BAD_RECORD), 1);
    pair_free(&p);
}

static void data_rejects(void **state)
{
    (void)state;
    pair p;
    pair_init(&p);
    pair_create(&p);
    assert_int_equal(handshake(&p), NET_OK);
    uint8_t rec[256], bad[256];
    size_t n = seal(p.i, rec, sizeof rec, 100, 5, T0);

    /* tampered: header, ciphertext and tag bytes */
    size_t spots[] = {0 + 1, 4, 12, 13, 60, n - 17, n - 1};
    uint64_t auth = 0;
    for (size_t k = 0; k < sizeof spots / sizeof spots[0]; k++) {
        memcpy(bad, rec, n);
        bad[spots[k]] ^= 0x20;
        assert_int_equal(open_copy(p.r, bad, n, 100, 5, T0), NET_EREJECT);
        auth = net_channel_rejects(p.r, NET_REJECT_AUTH) +
               net_channel_rejects(p.r, NET_REJECT_BAD_EPOCH);
        assert_int_equal(auth, k + 1);
    }
    /* truncated: shorter than header + tag, and one byte short */
    assert_int_equal(open_copy(p.r, rec, NET_CHANNEL_OVERHEAD - 1, 0, 0, T0), NET_EREJECT);
    assert_int_equal(net_channel_rejects(p.r, NET_REJECT_TRUNCATED), 1);
    assert_int_equal(open_copy(p.r, rec, 0, 0, 0, T0), NET_EREJECT);
    assert_int_equal(net_channel_rejects(p.r, NET_REJECT_TRUNCATED), 2);
    uint64_t before = net_channel_rejects(p.r, NET_REJECT_AUTH);
    assert_int_equal(open_copy(p.r, rec, n - 1, 99, 5, T0), NET_EREJECT);
    assert_int_equal(net_channel_rejects(p.r, NET_REJECT_AUTH), before + 1);
    /* the untouched frame still opens: rejections left no trace */
    assert_int_equal(open_copy(p.r, rec, n, 100, 5, T0), NET_OK);
    /* replayed */
    assert_int_equal(open_copy(p.r, rec, n, 100, 5, T0), NET_EREJECT);
    assert_int_equal(net_channel_rejects(p.r, NET_REJECT_REPLAY), 1);
    /* a stray handshake record after open is refused but not fatal */
    bad[0] = NET_REC_HELLO;
    assert_int_equal(open_copy(p.r, bad, NET_CHANNEL_HELLO_SIZE, 0, 0, T0), NET_EREJECT);
    assert_int_equal(net_channel_rejects(p.r, NET_REJECT_BAD_STATE), 1);
    assert_true(net_channel_established(p.r));
    pair_free(&p);
}

static void replay_window(void **state)
{
    (void)state;
    pair p;
    pair_init(&p);
    pair_create(&p);
    assert_int_equal(handshake(&p), NET_OK);
    enum { N = NET_CHANNEL_WINDOW + 400, LEN = 16 };
    size_t rec_size = LEN + NET_CHANNEL_OVERHEAD;
    uint8_t *recs = malloc(N * rec_size);
    assert_non_null(recs);
    for (size_t k = 0; k < N; k++)
        seal(p.i, recs + k * rec_size, rec_size, LEN, (uint8_t)k, T0);
    uint64_t seed = test_seed(7);
    model_rng rng;
    model_rng_seed(&rng, seed, 0);
    /* Deliver the first 300 in a random order: all inside the window. */
    uint32_t order[300];
    for (uint32_t k = 0; k < 300; k++)
        order[k] = k;
    model_rng_shuffle_u32(&rng, order, 300);
    for (uint32_t k = 0; k < 300; k++) {
        int rc = open_copy(p.r, recs + order[k] * rec_size, rec_size, LEN, (uint8_t)order[k], T0);
        if (rc != NET_OK)
            fail_msg("seed %llu: reordered frame %u refused (%d)", (unsigned long long)seed,
                     order[k], rc);
    }
    /* Each of them again: replays. */
    for (uint32_t k = 0; k < 300; k++)
        assert_int_equal(open_copy(p.r, recs + k * rec_size, rec_size, LEN, (uint8_t)k, T0),
                         NET_EREJECT);
    assert_int_equal(net_channel_rejects(p.r, NET_REJECT_REPLAY), 300);
    /* Jump to the newest: everything before newest - window is too old. */
    size_t top = N - 1;
    assert_int_equal(open_copy(p.r, recs + top * rec_size, rec_size, LEN, (uint8_t)top, T0),
                     NET_OK);
    size_t oldest_ok = top - (NET_CHANNEL_WINDOW - 1);
    assert_int_equal(open_copy(p.r, recs + (oldest_ok - 1) * rec_size, rec_size, LEN,
                               (uint8_t)(oldest_ok - 1), T0),
                     NET_EREJECT);
    assert_int_equal(net_channel_rejects(p.r, NET_REJECT_TOO_OLD), 1);
    assert_int_equal(open_copy(p.r, recs + 320 * rec_size, rec_size, LEN, (uint8_t)320, T0),
                     NET_EREJECT);
    assert_int_equal(net_channel_rejects(p.r, NET_REJECT_TOO_OLD), 2);
    /* The oldest counter still inside the window, never seen: accepted once. */
    assert_int_equal(
        open_copy(p.r, recs + oldest_ok * rec_size, rec_size, LEN, (uint8_t)oldest_ok, T0), NET_OK);
    assert_int_equal(
        open_copy(p.r, recs + oldest_ok * rec_size, rec_size, LEN, (uint8_t)oldest_ok, T0),
        NET_EREJECT);
    assert_int_equal(net_channel_rejects(p.r, NET_REJECT_REPLAY), 301);
    /* Everything in between in reverse order is accepted. */
    for (size_t k = top - 1; k > oldest_ok; k--)
        assert_int_equal(open_copy(p.r, recs + k * rec_size, rec_size, LEN, (uint8_t)k, T0),
                         NET_OK);
    free(recs);
    pair_free(&p);
}

/* Deliver every pending control record (CONFIRM, REKEY_INIT, REKEY_ACK)
 * between a and b until neither has one, as the transport does after every
 * seal and recv. Returns the number of records moved. */
static int flush(net_channel *a, net_channel *b, gossip_time_us now)
{
    int moved = 0;
    for (int again = 1; again;) {
        again = 0;
        net_channel *from = a, *to = b;
        for (int side = 0; side < 2; side++) {
            const uint8_t *rec;
            size_t len;
            while (net_channel_poll_send(from, &rec, &len)) {
                uint8_t buf[NET_CHANNEL_CONTROL_MAX];
                memcpy(buf, rec, len);
                uint8_t *plain;
                size_t pl;
                assert_int_equal(net_channel_recv(to, buf, len, now, &plain, &pl), NET_OK);
                assert_null(plain);
                moved++;
                again = 1;
            }
            from = b;
            to = a;
        }
    }
    return moved;
}

/* Seal on from, open on to (checking the bytes), then move control records. */
static void send_one(net_channel *from, net_channel *to, size_t len, uint8_t tag,
                     gossip_time_us now)
{
    uint8_t rec[512];
    size_t n = seal(from, rec, sizeof rec, len, tag, now);
    assert_int_equal(open_copy(to, rec, n, len, tag, now), NET_OK);
    flush(from, to, now);
}

static void rekey_by_frames(void **state)
{
    (void)state;
    pair p;
    pair_init(&p);
    p.cfg_i.rekey_frames = p.cfg_r.rekey_frames = 8;
    pair_create(&p);
    assert_int_equal(handshake(&p), NET_OK);
    uint8_t rec[128], old[128];
    size_t old_len = 0;
    /* Keep the 5th frame of epoch 0 back, undelivered. */
    for (int k = 0; k < 100; k++) {
        size_t n = seal(p.i, rec, sizeof rec, 40, (uint8_t)k, T0);
        if (k == 4) {
            memcpy(old, rec, n);
            old_len = n;
            flush(p.i, p.r, T0);
            continue;
        }
        assert_int_equal(open_copy(p.r, rec, n, 40, (uint8_t)k, T0), NET_OK);
        flush(p.i, p.r, T0);
        send_one(p.r, p.i, 40, (uint8_t)(k + 1), T0);
    }
    send_one(p.i, p.r, 40, 7, T0);
    send_one(p.r, p.i, 40, 8, T0);
    /* The initiator starts a rekey once a direction carried 8 frames of an
     * epoch; each takes one REKEY_INIT and one REKEY_ACK. */
    uint32_t e = net_channel_tx_epoch(p.i);
    assert_true(e >= 10);
    assert_int_equal(net_channel_tx_epoch(p.r), e);
    assert_int_equal(net_channel_rx_epoch(p.r), e);
    assert_int_equal(net_channel_rx_epoch(p.i), e);
    /* The old-epoch frame no longer opens: its key is gone. */
    assert_int_equal(open_copy(p.r, old, old_len, 40, 4, T0), NET_EREJECT);
    assert_int_equal(net_channel_rejects(p.r, NET_REJECT_BAD_EPOCH), 1);
    /* A frame two epochs ahead cannot be opened either. */
    size_t n = seal(p.i, rec, sizeof rec, 40, 1, T0);
    rec[4] = (uint8_t)(rec[4] + 2);
    assert_int_equal(open_copy(p.r, rec, n, 40, 1, T0), NET_EREJECT);
    assert_int_equal(net_channel_rejects(p.r, NET_REJECT_BAD_EPOCH), 2);
    for (int k = 0; k < NET_REJECT_COUNT; k++)
        if (k != NET_REJECT_BAD_EPOCH)
            assert_int_equal(net_channel_rejects(p.i, k) + net_channel_rejects(p.r, k), 0);
    pair_free(&p);
}

static void rekey_by_time(void **state)
{
    (void)state;
    pair p;
    pair_init(&p);
    p.cfg_i.rekey_interval_us = 1000;
    pair_create(&p);
    assert_int_equal(handshake(&p), NET_OK);
    gossip_time_us now = T0 + 10;
    /* Only the responder sends: the initiator sees the epoch age on what it
     * receives and rekeys all the same. */
    for (int k = 0; k < 20; k++) {
        send_one(p.r, p.i, 10, (uint8_t)k, now);
        now += 600;
    }
    /* 20 frames 600 us apart: the epoch turns every other frame. */
    assert_true(net_channel_tx_epoch(p.i) >= 8 && net_channel_tx_epoch(p.i) <= 11);
    assert_int_equal(net_channel_tx_epoch(p.r), net_channel_tx_epoch(p.i));
    send_one(p.i, p.r, 10, 1, now); /* may start one more rekey */
    send_one(p.i, p.r, 10, 1, now);
    assert_int_equal(net_channel_rx_epoch(p.r), net_channel_tx_epoch(p.i));
    /* An INIT that never gets its ACK: the initiator gives up after
     * NET_CHANNEL_REKEY_TIMEOUT_US and fails the channel. */
    uint8_t rec[128];
    now += 2000;
    seal(p.i, rec, sizeof rec, 10, 2, now); /* starts a rekey */
    const uint8_t *init;
    size_t len;
    assert_int_equal(net_channel_poll_send(p.i, &init, &len), 1); /* lost */
    size_t out_len;
    assert_int_equal(net_channel_seal(p.i, rec + 13, 10, rec, sizeof rec, &out_len, now + 1000),
                     NET_OK);
    assert_int_equal(net_channel_seal(p.i, rec + 13, 10, rec, sizeof rec, &out_len,
                                      now + NET_CHANNEL_REKEY_TIMEOUT_US),
                     NET_EFAILED);
    assert_int_equal(net_channel_rejects(p.i, NET_REJECT_REKEY), 1);
    assert_true(net_channel_failed(p.i));
    pair_free(&p);
}

/* Issue 13, item 3: a key that leaks in epoch e opens nothing of epoch
 * e+1. With the old hash ratchet, k(e+1) = KDF(k(e)); now k(e+1) needs the
 * secrets of a fresh X25519 exchange, and the rekey records are signed so
 * that whoever holds k(e) cannot substitute its own ephemeral key. */
static void rekey_fresh_dh(void **state)
{
    (void)state;
    pair p;
    pair_init(&p);
    p.cfg_i.rekey_interval_us = 1000;
    pair_create(&p);
    assert_int_equal(handshake(&p), NET_OK);
    gossip_time_us now = T0 + 10;
    send_one(p.i, p.r, 32, 1, now);
    uint8_t k0[32], k0_rx[32];
    net_channel_debug_keys(p.i, k0, k0_rx); /* leaked: everything of epoch 0 */
    /* The rekey: the initiator's next seal starts it. */
    now += 2000;
    uint8_t rec[256];
    size_t n = seal(p.i, rec, sizeof rec, 32, 2, now);
    assert_int_equal(open_copy(p.r, rec, n, 32, 2, now), NET_OK);
    const uint8_t *r;
    size_t len;
    uint8_t init[NET_CHANNEL_REKEY_SIZE];
    assert_int_equal(net_channel_poll_send(p.i, &r, &len), 1);
    assert_int_equal(len, NET_CHANNEL_REKEY_SIZE);
    assert_int_equal(r[0], NET_REC_REKEY);
    memcpy(init, r, len);
    /* The attacker holding k0 can read the INIT (it is sealed in epoch 0)... */
    {
        uint8_t copy[NET_CHANNEL_REKEY_SIZE], nonce[12] = {0};
        memcpy(copy, init, sizeof copy);
        memcpy(nonce + 4, copy + 5, 8);
        assert_int_equal(crypto_aead_chacha20poly1305_ietf_decrypt_detached(
                             copy + 13, NULL, copy + 13, NET_CHANNEL_REKEY_PAYLOAD,
                             copy + 13 + NET_CHANNEL_REKEY_PAYLOAD, copy, 13, nonce, k0),
                         0);
        assert_int_equal(copy[13], 1); /* REKEY_INIT */
    }
    /* ...and can forge a sealed INIT with its own ephemeral key, but not
     * I's signature: a second responder in the same state refuses it. */
    {
        pair q;
        pair_init(&q);
        q.cfg_i.rekey_interval_us = 1000;
        pair_create(&q);
        assert_int_equal(handshake(&q), NET_OK);
        uint8_t qk[32], qrx[32];
        net_channel_debug_keys(q.i, qk, qrx);
        net_identity mallory;
        assert_int_equal(net_identity_generate(&mallory), NET_OK);
        uint8_t f[NET_CHANNEL_REKEY_SIZE], nonce[12] = {0}, e_pk[32], e_sk[32];
        crypto_kx_keypair(e_pk, e_sk);
        memset(f, 0, sizeof f);
        f[0] = NET_REC_REKEY; /* epoch 0, counter 0 */
        f[13] = 1;
        f[13 + 4] = 1; /* new epoch 1 */
        memcpy(f + 13 + 5, e_pk, 32);
        crypto_sign_detached(f + 13 + 37, NULL, e_pk, 32, mallory.sk); /* any signature */
        crypto_aead_chacha20poly1305_ietf_encrypt_detached(
            f + 13, f + 13 + NET_CHANNEL_REKEY_PAYLOAD, NULL, f + 13, NET_CHANNEL_REKEY_PAYLOAD, f,
            13, NULL, nonce, qk);
        uint8_t *plain;
        size_t pl;
        assert_int_equal(net_channel_recv(q.r, f, sizeof f, now, &plain, &pl), NET_EFAILED);
        assert_int_equal(net_channel_rejects(q.r, NET_REJECT_REKEY), 1);
        assert_int_equal(net_channel_poll_send(q.r, &r, &len), 0); /* no ACK */
        pair_free(&q);
    }
    /* The genuine rekey completes. */
    {
        uint8_t *plain;
        size_t pl;
        assert_int_equal(net_channel_recv(p.r, init, sizeof init, now, &plain, &pl), NET_OK);
        flush(p.i, p.r, now);
    }
    assert_int_equal(net_channel_tx_epoch(p.i), 1);
    assert_int_equal(net_channel_tx_epoch(p.r), 1);
    send_one(p.r, p.i, 8, 9, now); /* the first epoch-1 frame retires I's old receive key */
    n = seal(p.i, rec, sizeof rec, 32, 3, now);
    assert_int_equal(rec[4], 1); /* epoch 1 */
    uint8_t k1[32], k1_rx[32];
    net_channel_debug_keys(p.i, k1, k1_rx);
    assert_true(memcmp(k1, k0, 32) != 0 && memcmp(k1_rx, k0_rx, 32) != 0);
    /* What the old ratchet would have given from the leaked key opens
     * nothing; the real epoch-1 key does (control). */
    uint8_t guess[32];
    static const char ctx[crypto_kdf_CONTEXTBYTES] = {'m', 'u', 'r', 'r', 'e', 'k', 'e', 'y'};
    crypto_kdf_derive_from_key(guess, 32, 1, ctx, k0);
    for (int attempt = 0; attempt < 3; attempt++) {
        const uint8_t *key = attempt == 0 ? guess : attempt == 1 ? k0 : k1;
        uint8_t copy[256], nonce[12] = {0};
        memcpy(copy, rec, n);
        memcpy(nonce + 4, copy + 5, 8);
        int bad = crypto_aead_chacha20poly1305_ietf_decrypt_detached(
            copy + 13, NULL, copy + 13, n - NET_CHANNEL_OVERHEAD, copy + n - 16, copy, 13, nonce,
            key);
        assert_int_equal(bad != 0, attempt < 2);
    }
    assert_int_equal(open_copy(p.r, rec, n, 32, 3, now), NET_OK);
    /* A second rekey gives yet another key. */
    now += 2000;
    send_one(p.i, p.r, 8, 4, now);
    send_one(p.i, p.r, 8, 5, now);
    uint8_t k2[32];
    net_channel_debug_keys(p.i, k2, NULL);
    assert_int_equal(net_channel_tx_epoch(p.i), 2);
    assert_true(memcmp(k2, k1, 32) != 0 && memcmp(k2, k0, 32) != 0);
    pair_free(&p);
}

/* Issue 13, item 2: a recorded HELLO replayed to the responder draws no
 * reply and costs no public-key operation. */
static void hello_replay_refused(void **state)
{
    (void)state;
    net_seen *seen;
    assert_int_equal(net_seen_create(&seen, 64), NET_OK);
    uint64_t wall = 1700000000ull * 1000000000ull;
    pair p;
    pair_init(&p);
    p.cfg_i.wall_ns = wall;
    p.cfg_r.wall_ns = wall + 1000000000ull;
    p.cfg_r.seen = seen;
    pair_create(&p);
    const uint8_t *r;
    size_t len;
    assert_int_equal(net_channel_poll_send(p.i, &r, &len), 1);
    uint8_t hello[NET_CHANNEL_HELLO_SIZE];
    memcpy(hello, r, len);
    uint8_t buf[NET_CHANNEL_HELLO_SIZE];
    memcpy(buf, hello, sizeof buf);
    uint8_t *plain;
    size_t pl;
    assert_int_equal(net_channel_recv(p.r, buf, sizeof buf, T0, &plain, &pl), NET_OK);
    assert_int_equal(hop(p.r, p.i, T0), NET_OK);
    assert_int_equal(hop(p.i, p.r, T0), NET_OK);
    assert_true(net_channel_established(p.r));
    assert_int_equal(net_seen_count(seen), 1);
    /* The same HELLO, replayed to a fresh responder of the same agent. */
    for (int again = 0; again < 2; again++) {
        net_channel *r2;
        assert_int_equal(net_channel_create(&r2, &p.cfg_r, T0), NET_OK);
        memcpy(buf, hello, sizeof buf);
        assert_int_equal(net_channel_recv(r2, buf, sizeof buf, T0, &plain, &pl), NET_EFAILED);
        assert_int_equal(net_channel_rejects(r2, NET_REJECT_STALE_HELLO), 1);
        assert_int_equal(net_channel_poll_send(r2, &r, &len), 0); /* nothing revealed */
        net_channel_destroy(r2);
    }
    /* A replay with a bad signature is refused as stale, not as a bad
     * signature: the timestamp is checked before any signature. */
    net_identity mallory;
    assert_int_equal(net_identity_generate(&mallory), NET_OK);
    forge_hello(buf, &p.id_i, &mallory, p.key_i, wall, 0);
    net_channel *r3;
    assert_int_equal(net_channel_create(&r3, &p.cfg_r, T0), NET_OK);
    assert_int_equal(net_channel_recv(r3, buf, sizeof buf, T0, &plain, &pl), NET_EFAILED);
    assert_int_equal(net_channel_rejects(r3, NET_REJECT_STALE_HELLO), 1);
    assert_int_equal(net_channel_rejects(r3, NET_REJECT_BAD_SIGNATURE), 0);
    net_channel_destroy(r3);
    /* A fresh HELLO (later timestamp) from the same initiator is welcome. */
    forge_hello(buf, &p.id_i, &p.id_i, p.key_i, wall + 1, 0);
    assert_int_equal(net_channel_create(&r3, &p.cfg_r, T0), NET_OK);
    assert_int_equal(net_channel_recv(r3, buf, sizeof buf, T0, &plain, &pl), NET_OK);
    assert_int_equal(net_channel_poll_send(r3, &r, &len), 1);
    net_channel_destroy(r3);
    /* Without a mark for the key (restart, eviction): a HELLO older than
     * NET_CHANNEL_HELLO_AGE_MAX_S by our clock is refused, a recent one is
     * not. */
    net_seen *empty;
    assert_int_equal(net_seen_create(&empty, 4), NET_OK);
    p.cfg_r.seen = empty;
    for (int old = 0; old < 2; old++) {
        uint64_t age_s = old ? NET_CHANNEL_HELLO_AGE_MAX_S + 5 : NET_CHANNEL_HELLO_AGE_MAX_S - 5;
        forge_hello(buf, &p.id_i, &p.id_i, p.key_i, wall - age_s * 1000000000ull, 0);
        p.cfg_r.wall_ns = wall;
        assert_int_equal(net_channel_create(&r3, &p.cfg_r, T0), NET_OK);
        int rc = net_channel_recv(r3, buf, sizeof buf, T0, &plain, &pl);
        assert_int_equal(rc, old ? NET_EFAILED : NET_OK);
        assert_int_equal(net_channel_rejects(r3, NET_REJECT_STALE_HELLO), old ? 1 : 0);
        net_channel_destroy(r3);
    }
    net_seen_destroy(empty);
    pair_free(&p);
    net_seen_destroy(seen);
}

/* A HELLO names the node it is meant for: another agent refuses it
 * silently (a replay to a third party, or a stale address). */
static void hello_bound_to_responder(void **state)
{
    (void)state;
    net_identity other;
    assert_int_equal(net_identity_generate(&other), NET_OK);
    pair p;
    pair_init(&p);
    p.cfg_i.expect_peer = other.node_id;
    pair_create(&p);
    assert_int_equal(hop(p.i, p.r, T0), NET_EFAILED);
    assert_int_equal(net_channel_rejects(p.r, NET_REJECT_WRONG_PEER), 1);
    assert_int_equal(hop(p.r, p.i, T0), -1);
    pair_free(&p);
    /* Named correctly, or not named (dialing a seed by address): accepted. */
    for (int named = 0; named < 2; named++) {
        pair_init(&p);
        p.cfg_i.expect_peer = named ? p.id_r.node_id : 0;
        pair_create(&p);
        assert_int_equal(handshake(&p), NET_OK);
        pair_free(&p);
    }
}

static int contains(const uint8_t *hay, size_t n, const uint8_t *needle, size_t m)
{
    for (size_t i = 0; i + m <= n; i++)
        if (!memcmp(hay + i, needle, m))
            return 1;
    return 0;
}

/* No public key crosses the wire in clear: the initiator's is sealed under
 * the network key, the responder's under the key exchange. */
static void identities_not_in_clear(void **state)
{
    (void)state;
    pair p;
    pair_init(&p);
    pair_create(&p);
    const uint8_t *r;
    size_t len;
    uint8_t buf[NET_CHANNEL_HS_MAX];
    uint8_t *plain;
    size_t pl;
    for (int k = 0; k < 3; k++) {
        net_channel *from = k == 1 ? p.r : p.i, *to = k == 1 ? p.i : p.r;
        assert_int_equal(net_channel_poll_send(from, &r, &len), 1);
        assert_false(contains(r, len, p.id_i.pk, 32));
        assert_false(contains(r, len, p.id_r.pk, 32));
        memcpy(buf, r, len);
        assert_int_equal(net_channel_recv(to, buf, len, T0, &plain, &pl), NET_OK);
    }
    assert_true(net_channel_established(p.r));
    pair_free(&p);
}

/* node.encryption = auth-only: frames travel in clear but authenticated;
 * only when both ends ask. */
static void auth_only_sessions(void **state)
{
    (void)state;
    for (int who = 0; who < 4; who++) {
        pair p;
        pair_init(&p);
        p.cfg_i.auth_only = who & 1;
        p.cfg_r.auth_only = (who >> 1) & 1;
        pair_create(&p);
        assert_int_equal(handshake(&p), NET_OK);
        int clear = who == 3;
        assert_int_equal(net_channel_auth_only(p.i), clear);
        assert_int_equal(net_channel_auth_only(p.r), clear);
        uint8_t rec[256], bad[256];
        for (int dir = 0; dir < 2; dir++) {
            net_channel *from = dir ? p.r : p.i, *to = dir ? p.i : p.r;
            size_t n = seal(from, rec, sizeof rec, 100, 9, T0);
            assert_int_equal(rec[0], clear ? NET_REC_DATA_CLEAR : NET_REC_DATA);
            int same = 1;
            for (size_t k = 0; k < 100; k++)
                same &= rec[13 + k] == (uint8_t)(9 + k * 7);
            assert_int_equal(same, clear);
            /* tampered payload, tag or header: refused */
            size_t spots[] = {5, 13, 60, n - 1};
            for (size_t k = 0; k < 4; k++) {
                memcpy(bad, rec, n);
                bad[spots[k]] ^= 0x04;
                assert_int_equal(open_copy(to, bad, n, 100, 9, T0), NET_EREJECT);
            }
            /* the other record type: refused, whatever the tag */
            memcpy(bad, rec, n);
            bad[0] = clear ? NET_REC_DATA : NET_REC_DATA_CLEAR;
            uint64_t before = net_channel_rejects(to, NET_REJECT_BAD_RECORD);
            assert_int_equal(open_copy(to, bad, n, 100, 9, T0), NET_EREJECT);
            assert_int_equal(net_channel_rejects(to, NET_REJECT_BAD_RECORD), before + 1);
            assert_int_equal(open_copy(to, rec, n, 100, 9, T0), NET_OK);
            assert_int_equal(open_copy(to, rec, n, 100, 9, T0), NET_EREJECT); /* replay */
        }
        pair_free(&p);
    }
    /* A responder cannot push an initiator that did not ask into clear. */
    pair p;
    pair_init(&p);
    p.cfg_r.auth_only = 1;
    pair_create(&p);
    assert_int_equal(hop(p.i, p.r, T0), NET_OK);
    const uint8_t *r;
    size_t len;
    assert_int_equal(net_channel_poll_send(p.r, &r, &len), 1);
    uint8_t buf[NET_CHANNEL_HS_MAX];
    memcpy(buf, r, len);
    buf[1] |= NET_CHANNEL_FLAG_AUTH_ONLY;
    uint8_t *plain;
    size_t pl;
    assert_int_equal(net_channel_recv(p.i, buf, len, T0, &plain, &pl), NET_EFAILED);
    assert_int_equal(net_channel_rejects(p.i, NET_REJECT_BAD_RECORD), 1);
    pair_free(&p);
}

/* Issue 13, item 5: a ring of network keys; initiators use the primary,
 * responders accept any key of the ring. */
static uint64_t all_rejects(const net_channel *ch)
{
    uint64_t n = 0;
    for (int c = 0; c < NET_REJECT_COUNT; c++)
        n += net_channel_rejects(ch, c);
    return n;
}

/* Auth-only records of every size, small and spanning many 16 KiB blocks:
 * the frame travels in clear, yet one flipped bit anywhere (type, epoch,
 * counter, frame, tag) or a missing byte is refused and counted, the
 * refused copy is left as it came, and the untouched record still opens. */
static void auth_only_tampering(void **state)
{
    (void)state;
    pair p;
    pair_init(&p);
    p.cfg_i.auth_only = p.cfg_r.auth_only = 1;
    pair_create(&p);
    assert_int_equal(handshake(&p), NET_OK);
    assert_true(net_channel_auth_only(p.i) && net_channel_auth_only(p.r));
    size_t sizes[] = {0, 1, 100, 3 * 16384 + 5, 256 * 1024};
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
        size_t len = sizes[z], cap = len + NET_CHANNEL_OVERHEAD;
        uint8_t *rec = malloc(cap), *bad = malloc(cap);
        assert_non_null(rec);
        assert_non_null(bad);
        uint8_t tag = (uint8_t)(3 + z);
        size_t n = seal(p.i, rec, cap, len, tag, T0);
        assert_int_equal(rec[0], NET_REC_DATA_CLEAR);
        for (size_t k = 0; k < len; k++) /* in clear */
            assert_int_equal(rec[NET_CHANNEL_HEADER_SIZE + k], (uint8_t)(tag + k * 7));
        size_t spots[] = {0,
                          1,
                          4,
                          5,
                          12,
                          NET_CHANNEL_HEADER_SIZE,
                          NET_CHANNEL_HEADER_SIZE + len / 2,
                          NET_CHANNEL_HEADER_SIZE + (len ? len - 1 : 0),
                          n - NET_CHANNEL_TAG_SIZE,
                          n - 1};
        for (size_t k = 0; k < sizeof spots / sizeof spots[0]; k++) {
            if (spots[k] >= NET_CHANNEL_HEADER_SIZE && spots[k] < n - NET_CHANNEL_TAG_SIZE &&
                len == 0)
                continue; /* no frame bytes to flip */
            for (unsigned bit = 0; bit < 8; bit += 7) {
                memcpy(bad, rec, n);
                bad[spots[k]] ^= (uint8_t)(1u << bit);
                uint64_t before = all_rejects(p.r);
                uint8_t *plain = NULL;
                size_t pl = 0;
                uint8_t *keep = malloc(n);
                assert_non_null(keep);
                memcpy(keep, bad, n);
                assert_int_equal(net_channel_recv(p.r, bad, n, T0, &plain, &pl), NET_EREJECT);
                assert_null(plain);
                assert_memory_equal(bad, keep, n); /* refused copy left as it came */
                free(keep);
                assert_int_equal(all_rejects(p.r), before + 1); /* counted once */
            }
        }
        /* one byte short */
        uint64_t auth = net_channel_rejects(p.r, NET_REJECT_AUTH);
        if (n > NET_CHANNEL_OVERHEAD) {
            assert_int_equal(open_copy(p.r, rec, n - 1, 0, 0, T0), NET_EREJECT);
            assert_int_equal(net_channel_rejects(p.r, NET_REJECT_AUTH), auth + 1);
        }
        assert_true(net_channel_established(p.r));
        assert_int_equal(open_copy(p.r, rec, n, len, tag, T0), NET_OK);
        assert_int_equal(open_copy(p.r, rec, n, len, tag, T0), NET_EREJECT); /* replay */
        free(rec);
        free(bad);
    }
    pair_free(&p);
}

static void network_key_ring(void **state)
{
    (void)state;
    uint8_t k1[32], k2[32], k3[32], ring[2 * 32];
    randombytes_buf(k1, 32);
    randombytes_buf(k2, 32);
    randombytes_buf(k3, 32);
    memcpy(ring, k2, 32);
    memcpy(ring + 32, k1, 32);
    const uint8_t *keys[] = {k1, k2, k3};
    for (int which = 0; which < 3; which++) {
        pair p;
        pair_init(&p);
        memcpy(p.key_i, keys[which], 32);
        p.cfg_r.network_key = NULL;
        p.cfg_r.network_keys = ring;
        p.cfg_r.network_keys_n = 2;
        pair_create(&p);
        assert_null(net_channel_network_key(p.r));
        int rc = handshake(&p);
        if (which < 2) {
            assert_int_equal(rc, NET_OK);
            assert_memory_equal(net_channel_network_key(p.r), keys[which], 32);
            assert_memory_equal(net_channel_network_key(p.i), keys[which], 32);
            send_one(p.i, p.r, 20, 1, T0);
            send_one(p.r, p.i, 20, 2, T0);
        } else {
            assert_int_equal(rc, NET_EFAILED);
            assert_int_equal(net_channel_rejects(p.r, NET_REJECT_BAD_MAC), 1);
        }
        pair_free(&p);
    }
    /* An initiator with a ring uses its first key. */
    pair p;
    pair_init(&p);
    p.cfg_i.network_key = NULL;
    p.cfg_i.network_keys = ring;
    p.cfg_i.network_keys_n = 2;
    memcpy(p.key_r, k2, 32);
    pair_create(&p);
    assert_int_equal(handshake(&p), NET_OK);
    pair_free(&p);
    net_channel_config bad = p.cfg_i;
    bad.network_keys_n = NET_CHANNEL_KEYS_MAX + 1;
    net_channel *ch;
    assert_int_equal(net_channel_create(&ch, &bad, T0), NET_EINVAL);
}

static void seen_table(void **state)
{
    (void)state;
    net_seen *s;
    assert_int_equal(net_seen_create(&s, 0), NET_EINVAL);
    assert_int_equal(net_seen_create(&s, 8), NET_OK);
    uint8_t ts_a[12], ts_b[12];
    net_seen_tai64n(ts_a, 1700000000ull * 1000000000ull + 5);
    net_seen_tai64n(ts_b, 1700000000ull * 1000000000ull + 6);
    assert_true(memcmp(ts_a, ts_b, 12) < 0);
    assert_true(net_seen_unix_s(ts_a) == 1700000000ull);
    uint8_t pk[20][32];
    for (int k = 0; k < 20; k++)
        randombytes_buf(pk[k], 32);
    assert_true(net_seen_fresh(s, pk[0], ts_a));
    net_seen_update(s, pk[0], ts_b, 1);
    assert_false(net_seen_fresh(s, pk[0], ts_b)); /* the same HELLO again */
    /* A slightly older one never seen (a second connection opened at the
     * same time, handled second) is fresh; one older than the reorder
     * span is not. */
    assert_true(net_seen_fresh(s, pk[0], ts_a));
    uint8_t ts_old[12];
    net_seen_tai64n(ts_old, 1700000000ull * 1000000000ull + 6 - NET_SEEN_REORDER_NS);
    assert_false(net_seen_fresh(s, pk[0], ts_old));
    net_seen_update(s, pk[0], ts_a, 2);
    assert_false(net_seen_fresh(s, pk[0], ts_a));
    assert_false(net_seen_fresh(s, pk[0], ts_b));
    /* Once NET_SEEN_RECENT are held, nothing below the smallest of them
     * passes (it may have been accepted and forgotten). */
    uint8_t ts_k[12];
    for (uint64_t k = 0; k < NET_SEEN_RECENT; k++) {
        net_seen_tai64n(ts_k, 1700000000ull * 1000000000ull + 100 + k);
        assert_true(net_seen_fresh(s, pk[0], ts_k));
        net_seen_update(s, pk[0], ts_k, 3);
    }
    net_seen_tai64n(ts_k, 1700000000ull * 1000000000ull + 50);
    assert_false(net_seen_fresh(s, pk[0], ts_k));
    assert_false(net_seen_fresh(s, pk[0], ts_a));
    net_seen_tai64n(ts_k, 1700000000ull * 1000000000ull + 200);
    assert_true(net_seen_fresh(s, pk[0], ts_k));
    assert_true(net_seen_fresh(s, pk[1], ts_a));
    /* Bounded: the entry updated longest ago goes first. */
    for (int k = 1; k < 20; k++)
        net_seen_update(s, pk[k], ts_a, 10 + (gossip_time_us)k);
    assert_int_equal(net_seen_count(s), 8);
    assert_true(net_seen_fresh(s, pk[0], ts_a)); /* evicted */
    for (int k = 12; k < 20; k++)
        assert_false(net_seen_fresh(s, pk[k], ts_a));
    net_seen_destroy(s);
}

/* The three-step seal and open (the transport runs the AEAD without its
 * lock): the same records and refusals as net_channel_seal / recv, in
 * both modes; a record finished out of turn is refused, not marked. */
static void split_seal_open(void **state)
{
    (void)state;
    for (int auth_only = 0; auth_only <= 1; auth_only++) {
        pair p;
        pair_init(&p);
        p.cfg_i.auth_only = p.cfg_r.auth_only = auth_only;
        pair_create(&p);
        uint8_t hs[NET_CHANNEL_HS_MAX] = {NET_REC_HELLO};
        net_channel_op op;
        /* not open yet: handshake records go through net_channel_recv */
        assert_int_equal(net_channel_open_begin(p.r, hs, sizeof hs, &op), NET_ESTATE);
        size_t out_len = 0;
        uint8_t rec[3][600];
        assert_int_equal(net_channel_seal_begin(p.i, 10, rec[0], sizeof rec[0], &out_len, T0, &op),
                         NET_ESTATE);
        assert_int_equal(handshake(&p), NET_OK);
        assert_int_equal(net_channel_auth_only(p.i), auth_only);
        /* seal three records, then run their AEADs in another order */
        net_channel_op ops[3];
        for (int k = 0; k < 3; k++) {
            for (size_t j = 0; j < 500; j++)
                rec[k][NET_CHANNEL_HEADER_SIZE + j] = (uint8_t)(k + j * 7);
            assert_int_equal(
                net_channel_seal_begin(p.i, 500, rec[k], sizeof rec[k], &out_len, T0 + 10, &ops[k]),
                NET_OK);
            assert_int_equal(out_len, 500 + NET_CHANNEL_OVERHEAD);
        }
        for (int k = 2; k >= 0; k--)
            net_channel_crypt(&ops[k], rec[k]);
        uint8_t zero[NET_CHANNEL_KEY_SIZE] = {0};
        assert_memory_equal(ops[0].key, zero, sizeof zero); /* the key copy is wiped */
        /* record 0 opens with net_channel_recv, like any sealed record */
        assert_int_equal(open_copy(p.r, rec[0], out_len, 500, 0, T0 + 11), NET_OK);
        /* record 1 in three steps */
        uint8_t buf[600], *plain = NULL;
        size_t plain_len = 0;
        memcpy(buf, rec[1], out_len);
        assert_int_equal(net_channel_open_begin(p.r, buf, out_len, &op), NET_OK);
        net_channel_crypt(&op, buf);
        assert_int_equal(net_channel_open_end(p.r, &op, buf, T0 + 11, &plain, &plain_len), NET_OK);
        assert_int_equal(plain_len, 500);
        for (size_t j = 0; j < 500; j++)
            assert_int_equal(plain[j], (uint8_t)(1 + j * 7));
        /* a replay of it is refused at the first step */
        memcpy(buf, rec[1], out_len);
        assert_int_equal(net_channel_open_begin(p.r, buf, out_len, &op), NET_EREJECT);
        assert_int_equal(net_channel_rejects(p.r, NET_REJECT_REPLAY), 1);
        /* a tampered record: refused at the end, counted as auth */
        memcpy(buf, rec[2], out_len);
        buf[NET_CHANNEL_HEADER_SIZE + 3] ^= 1;
        assert_int_equal(net_channel_open_begin(p.r, buf, out_len, &op), NET_OK);
        net_channel_crypt(&op, buf);
        assert_int_equal(net_channel_open_end(p.r, &op, buf, T0 + 11, &plain, &plain_len),
                         NET_EREJECT);
        assert_null(plain);
        assert_int_equal(net_channel_rejects(p.r, NET_REJECT_AUTH), 1);
        /* begun twice, finished twice: the second finish is refused */
        net_channel_op op2;
        uint8_t buf2[600];
        memcpy(buf, rec[2], out_len);
        memcpy(buf2, rec[2], out_len);
        assert_int_equal(net_channel_open_begin(p.r, buf, out_len, &op), NET_OK);
        assert_int_equal(net_channel_open_begin(p.r, buf2, out_len, &op2), NET_OK);
        net_channel_crypt(&op, buf);
        net_channel_crypt(&op2, buf2);
        assert_int_equal(net_channel_open_end(p.r, &op, buf, T0 + 11, &plain, &plain_len), NET_OK);
        assert_int_equal(net_channel_open_end(p.r, &op2, buf2, T0 + 11, &plain, &plain_len),
                         NET_EREJECT);
        assert_int_equal(net_channel_rejects(p.r, NET_REJECT_BAD_EPOCH), 1);
        /* a record of the other mode never opens: flip the type byte */
        uint8_t rec4[600];
        for (size_t j = 0; j < 64; j++)
            rec4[NET_CHANNEL_HEADER_SIZE + j] = (uint8_t)j;
        assert_int_equal(net_channel_seal_begin(p.i, 64, rec4, sizeof rec4, &out_len, T0 + 12, &op),
                         NET_OK);
        net_channel_crypt(&op, rec4);
        rec4[0] = auth_only ? NET_REC_DATA : NET_REC_DATA_CLEAR;
        assert_int_equal(net_channel_open_begin(p.r, rec4, out_len, &op), NET_EREJECT);
        assert_int_equal(net_channel_rejects(p.r, NET_REJECT_BAD_RECORD), 1);
        pair_free(&p);
    }
}

static void garbage_never_crashes(void **state)
{
    (void)state;
    uint64_t seed = test_seed(11);
    model_rng rng;
    model_rng_seed(&rng, seed, 1);
    pair p;
    pair_init(&p);
    pair_create(&p);
    assert_int_equal(handshake(&p), NET_OK);
    uint8_t buf[300];
    for (int k = 0; k < 20000; k++) {
        size_t len = model_rng_below(&rng, sizeof buf + 1);
        for (size_t j = 0; j < len; j++)
            buf[j] = (uint8_t)model_rng_u64(&rng);
        if (len && (k & 1))
            buf[0] = NET_REC_DATA;
        uint8_t *plain;
        size_t pl;
        int rc = net_channel_recv(p.r, buf, len, T0, &plain, &pl);
        if (rc != NET_EREJECT)
            fail_msg("seed %llu: garbage record %d accepted (%d)", (unsigned long long)seed, k, rc);
    }
    assert_true(net_channel_established(p.r));
    uint8_t rec[64];
    size_t n = seal(p.i, rec, sizeof rec, 8, 1, T0);
    assert_int_equal(open_copy(p.r, rec, n, 8, 1, T0), NET_OK);
    pair_free(&p);
}

static void penalty_backoff(void **state)
{
    (void)state;
    net_penalty *pen;
    net_penalty_config cfg = {
        .threshold = 3, .base_us = 1000, .max_us = 16000, .forget_us = 1000000};
    assert_int_equal(net_penalty_create(&pen, &cfg), NET_OK);
    uint64_t a = net_penalty_key("127.0.0.1"), b = net_penalty_key("127.0.0.2");
    assert_true(a != b);
    gossip_time_us now = T0;
    assert_int_equal(net_penalty_fail(pen, a, now), NET_OK);
    assert_int_equal(net_penalty_fail(pen, a, now), NET_OK);
    assert_int_equal(net_penalty_check(pen, a, now), NET_OK);
    assert_int_equal(net_penalty_fail(pen, a, now), NET_EBLOCKED); /* 3rd */
    assert_int_equal(net_penalty_check(pen, a, now + 999), NET_EBLOCKED);
    assert_int_equal(net_penalty_check(pen, b, now), NET_OK);        /* others unaffected */
    assert_int_equal(net_penalty_check(pen, a, now + 1000), NET_OK); /* expired */
    /* each further failure doubles the cut-off, up to max */
    gossip_time_us want[] = {2000, 4000, 8000, 16000, 16000};
    for (int k = 0; k < 5; k++) {
        now += 100000;
        assert_int_equal(net_penalty_fail(pen, a, now), NET_EBLOCKED);
        assert_true(net_penalty_until(pen, a, now) == now + want[k]);
        assert_int_equal(net_penalty_check(pen, a, now + want[k] - 1), NET_EBLOCKED);
        assert_int_equal(net_penalty_check(pen, a, now + want[k]), NET_OK);
    }
    /* a success forgives */
    net_penalty_forgive(pen, a);
    assert_int_equal(net_penalty_fail(pen, a, now), NET_OK);
    assert_int_equal(net_penalty_count(pen), 1);
    /* failures older than forget_us are forgotten */
    assert_int_equal(net_penalty_fail(pen, a, now), NET_OK);
    now += 1000000;
    assert_int_equal(net_penalty_fail(pen, a, now), NET_OK);
    /* the table stays bounded; the oldest entry is evicted */
    now += 1000000;
    net_penalty_fail(pen, a, now);
    net_penalty_fail(pen, a, now);
    assert_int_equal(net_penalty_fail(pen, a, now), NET_EBLOCKED);
    assert_true(net_penalty_until(pen, a, now) == now + 1000);
    for (uint64_t k = 0; k < NET_PENALTY_MAX + 50; k++)
        net_penalty_fail(pen, 1000 + k, now + 1 + k);
    assert_int_equal(net_penalty_count(pen), NET_PENALTY_MAX);
    assert_int_equal(net_penalty_until(pen, a, now), 0);
    net_penalty_destroy(pen);
}

int main(void)
{
    if (net_init() != NET_OK)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(handshake_ok),
        cmocka_unit_test(seal_before_open_refused),
        cmocka_unit_test(wrong_network_key_responder),
        cmocka_unit_test(wrong_network_key_initiator),
        cmocka_unit_test(allow_list),
        cmocka_unit_test(wrong_peer_and_self),
        cmocka_unit_test(handshake_tampering),
        cmocka_unit_test(data_rejects),
        cmocka_unit_test(replay_window),
        cmocka_unit_test(rekey_by_frames),
        cmocka_unit_test(rekey_by_time),
        cmocka_unit_test(rekey_fresh_dh),
        cmocka_unit_test(hello_replay_refused),
        cmocka_unit_test(hello_bound_to_responder),
        cmocka_unit_test(identities_not_in_clear),
        cmocka_unit_test(auth_only_sessions),
        cmocka_unit_test(auth_only_tampering),
        cmocka_unit_test(network_key_ring),
        cmocka_unit_test(seen_table),
        cmocka_unit_test(split_seal_open),
        cmocka_unit_test(garbage_never_crashes),
        cmocka_unit_test(penalty_backoff),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
