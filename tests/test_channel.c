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

/* Run the three-record handshake; returns the first failure or NET_OK. */
static int handshake(pair *p)
{
    int rc = hop(p->i, p->r, T0 + 1); /* HELLO */
    if (rc)
        return rc;
    rc = hop(p->r, p->i, T0 + 2); /* REPLY */
    if (rc)
        return rc;
    return hop(p->i, p->r, T0 + 3); /* AUTH */
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

/* Build a REPLY by hand, exactly as docs/SECURITY.md lays it out, with the
 * transcript hash keyed by `key`. */
static void forge_reply(uint8_t out[NET_CHANNEL_REPLY_SIZE], const uint8_t *hello,
                        const net_identity *id, const uint8_t *key)
{
    uint8_t e_pk[32], e_sk[32];
    crypto_kx_keypair(e_pk, e_sk);
    out[0] = NET_REC_REPLY;
    memcpy(out + 1, e_pk, 32);
    memcpy(out + 33, id->pk, 32);
    crypto_generichash_state st;
    uint8_t h2[32];
    crypto_generichash_init(&st, key, NET_NETWORK_KEY_SIZE, 32);
    crypto_generichash_update(&st, (const uint8_t *)"murmur/v1/reply", 15);
    crypto_generichash_update(&st, hello, NET_CHANNEL_HELLO_SIZE);
    crypto_generichash_update(&st, out, 65);
    crypto_generichash_final(&st, h2, 32);
    crypto_sign_detached(out + 65, NULL, h2, 32, id->sk);
}

static void forge_auth(uint8_t out[NET_CHANNEL_AUTH_SIZE], const uint8_t *hello,
                       const uint8_t *reply, const net_identity *id, const uint8_t *key)
{
    out[0] = NET_REC_AUTH;
    memcpy(out + 1, id->pk, 32);
    crypto_generichash_state st;
    uint8_t h3[32];
    crypto_generichash_init(&st, key, NET_NETWORK_KEY_SIZE, 32);
    crypto_generichash_update(&st, (const uint8_t *)"murmur/v1/auth", 14);
    crypto_generichash_update(&st, hello, NET_CHANNEL_HELLO_SIZE);
    crypto_generichash_update(&st, reply, NET_CHANNEL_REPLY_SIZE);
    crypto_generichash_update(&st, out, 33);
    crypto_generichash_final(&st, h3, 32);
    crypto_sign_detached(out + 33, NULL, h3, 32, id->sk);
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
        } else {
            assert_int_equal(rc, NET_EFAILED);
            assert_int_equal(net_channel_rejects(p.i, NET_REJECT_BAD_SIGNATURE), 1);
            assert_int_equal(hop(p.i, p.r, T0), -1); /* no AUTH goes out */
        }
        pair_free(&p);
    }
    /* Responder side: a valid HELLO, then an AUTH signed over a transcript
     * keyed with another network key. */
    for (int use_right_key = 0; use_right_key < 2; use_right_key++) {
        pair p;
        pair_init(&p);
        pair_create(&p);
        const uint8_t *rec;
        size_t len;
        uint8_t h[NET_CHANNEL_HELLO_SIZE], reply[NET_CHANNEL_REPLY_SIZE];
        uint8_t auth[NET_CHANNEL_AUTH_SIZE];
        assert_int_equal(net_channel_poll_send(p.i, &rec, &len), 1);
        memcpy(h, rec, len);
        uint8_t buf[NET_CHANNEL_HELLO_SIZE];
        memcpy(buf, h, sizeof buf);
        uint8_t *plain;
        size_t pl;
        assert_int_equal(net_channel_recv(p.r, buf, sizeof buf, T0, &plain, &pl), NET_OK);
        assert_int_equal(net_channel_poll_send(p.r, &rec, &len), 1);
        memcpy(reply, rec, len);
        forge_auth(auth, h, reply, &p.id_i, use_right_key ? p.key_i : other);
        int rc = net_channel_recv(p.r, auth, sizeof auth, T0, &plain, &pl);
        if (use_right_key) {
            assert_int_equal(rc, NET_OK);
            assert_true(net_channel_peer(p.r) == p.id_i.node_id);
        } else {
            assert_int_equal(rc, NET_EFAILED);
            assert_int_equal(net_channel_rejects(p.r, NET_REJECT_BAD_SIGNATURE), 1);
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
    assert_int_equal(net_channel_rejects(p.i, NET_REJECT_WRONG_PEER), 1);
    pair_free(&p);

    pair_init(&p);
    p.cfg_r.self = &p.id_i; /* dialing ourselves */
    pair_create(&p);
    assert_int_equal(handshake(&p), NET_EFAILED);
    assert_int_equal(net_channel_rejects(p.i, NET_REJECT_SELF), 1);
    pair_free(&p);
}

static void handshake_tampering(void **state)
{
    (void)state;
    /* Flip every byte of each handshake record in turn: each flip fails. */
    for (int which = 0; which < 3; which++) {
        size_t size = which == 0   ? NET_CHANNEL_HELLO_SIZE
                      : which == 1 ? NET_CHANNEL_REPLY_SIZE
                                   : NET_CHANNEL_AUTH_SIZE;
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
            continue;
        }
        assert_int_equal(open_copy(p.r, rec, n, 40, (uint8_t)k, T0), NET_OK);
        n = seal(p.r, rec, sizeof rec, 40, (uint8_t)(k + 1), T0);
        assert_int_equal(open_copy(p.i, rec, n, 40, (uint8_t)(k + 1), T0), NET_OK);
    }
    assert_int_equal(net_channel_tx_epoch(p.i), 99 / 8);
    assert_int_equal(net_channel_rx_epoch(p.r), 99 / 8);
    assert_int_equal(net_channel_tx_epoch(p.r), 99 / 8);
    /* The old-epoch frame no longer opens: its key is gone. */
    assert_int_equal(open_copy(p.r, old, old_len, 40, 4, T0), NET_EREJECT);
    assert_int_equal(net_channel_rejects(p.r, NET_REJECT_BAD_EPOCH), 1);
    /* A frame two epochs ahead cannot be opened either. */
    size_t n = seal(p.i, rec, sizeof rec, 40, 1, T0);
    rec[4] = (uint8_t)(rec[4] + 2);
    assert_int_equal(open_copy(p.r, rec, n, 40, 1, T0), NET_EREJECT);
    assert_int_equal(net_channel_rejects(p.r, NET_REJECT_BAD_EPOCH), 2);
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
    uint8_t rec[128];
    gossip_time_us now = T0 + 10;
    for (int k = 0; k < 20; k++) {
        size_t n = seal(p.i, rec, sizeof rec, 10, (uint8_t)k, now);
        assert_int_equal(open_copy(p.r, rec, n, 10, (uint8_t)k, now), NET_OK);
        now += 600;
    }
    /* 20 frames 600 us apart: the epoch turns every other frame. */
    assert_true(net_channel_tx_epoch(p.i) >= 9 && net_channel_tx_epoch(p.i) <= 11);
    assert_int_equal(net_channel_rx_epoch(p.r), net_channel_tx_epoch(p.i));
    pair_free(&p);
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
        cmocka_unit_test(garbage_never_crashes),
        cmocka_unit_test(penalty_backoff),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
