/* net/channel — see channel.h for the design and docs/SECURITY.md for the
 * byte layouts. Section order: keyed hashes, create/destroy, handshake
 * (HELLO, REPLY, CONFIRM), data records and the replay window, rekey,
 * accessors. */
#include "net/channel.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(NET_CHANNEL_KEY_SIZE == crypto_aead_chacha20poly1305_ietf_KEYBYTES, "aead key");
_Static_assert(NET_CHANNEL_TAG_SIZE == crypto_aead_chacha20poly1305_ietf_ABYTES, "aead tag");
_Static_assert(crypto_aead_chacha20poly1305_ietf_NPUBBYTES == 12, "nonce = 4 prefix + 8 counter");
_Static_assert(NET_CHANNEL_KEY_SIZE == crypto_kx_SESSIONKEYBYTES, "kx session key");
_Static_assert(crypto_kx_PUBLICKEYBYTES == 32 && crypto_kx_SECRETKEYBYTES == 32,
               "ephemeral keys in records");
_Static_assert(NET_CHANNEL_SIG_SIZE == crypto_sign_BYTES, "signature");
_Static_assert(NET_NETWORK_KEY_SIZE >= crypto_generichash_KEYBYTES_MIN &&
                   NET_NETWORK_KEY_SIZE <= crypto_generichash_KEYBYTES_MAX,
               "network key keys BLAKE2b");
_Static_assert(NET_CHANNEL_HELLO_SIZE == 167 && NET_CHANNEL_REPLY_SIZE == 146,
               "record sizes as in docs/SECURITY.md");

#define WINDOW_WORDS (NET_CHANNEL_WINDOW / 64u + 1u) /* one spare word: RFC 6479 */

/* Domain-separation labels of the keyed hashes (docs/SECURITY.md). */
static const char LABEL_HELLO_KEY[] = "murmur/v2/hello-key";
static const char LABEL_HELLO_SIG[] = "murmur/v2/hello-sig";
static const char LABEL_CHAIN[] = "murmur/v2/chain";
static const char LABEL_REPLY_KEY[] = "murmur/v2/reply-key";
static const char LABEL_REPLY_SIG[] = "murmur/v2/reply-sig";
static const char LABEL_TRANSCRIPT[] = "murmur/v2/transcript";
static const char LABEL_I2R[] = "murmur/v2/i2r";
static const char LABEL_R2I[] = "murmur/v2/r2i";
static const char LABEL_REKEY[] = "murmur/v2/rekey";
static const char LABEL_REKEY_I[] = "murmur/v2/rekey-i";
static const char LABEL_REKEY_R[] = "murmur/v2/rekey-r";

enum { REKEY_INIT = 1, REKEY_ACK = 2 };

typedef enum ch_state {
    ST_WAIT_REPLY,   /* initiator sent HELLO */
    ST_WAIT_HELLO,   /* responder, nothing yet */
    ST_WAIT_CONFIRM, /* responder sent REPLY */
    ST_OPEN,
    ST_FAILED,
} ch_state;

struct net_channel {
    ch_state state;
    int initiator;
    int want_auth_only, auth_only;
    net_identity self;
    uint8_t keys[NET_CHANNEL_KEYS_MAX][NET_NETWORK_KEY_SIZE];
    size_t n_keys;
    int key_idx; /* the session's network key; -1 on a responder before HELLO */
    const uint8_t *allow;
    size_t allow_n;
    net_seen *seen;
    uint64_t wall_ns;
    uint64_t expect_peer;
    uint64_t rekey_frames;
    uint64_t rekey_interval_us;
    gossip_time_us hs_deadline;

    /* handshake */
    uint8_t eph_pk[crypto_kx_PUBLICKEYBYTES];
    uint8_t eph_sk[crypto_kx_SECRETKEYBYTES];
    uint8_t hello[NET_CHANNEL_HELLO_SIZE];
    uint8_t out[NET_CHANNEL_CONTROL_MAX]; /* pending handshake or control record */
    size_t out_len;

    /* session */
    uint64_t peer_id;
    uint8_t peer_pk[NET_PUBLIC_KEY_SIZE];
    uint8_t th[32]; /* transcript hash: binds rekeys to this session */
    uint8_t ck[32]; /* chain key: every epoch's keys derive from it */
    uint8_t tx_key[NET_CHANNEL_KEY_SIZE];
    uint32_t tx_epoch;
    uint64_t tx_counter;
    gossip_time_us epoch_start;
    uint8_t rx_key[NET_CHANNEL_KEY_SIZE];
    uint32_t rx_epoch;
    int rx_any;      /* a frame of rx_epoch has been accepted */
    uint64_t rx_top; /* highest counter accepted in rx_epoch */
    uint64_t rx_bits[WINDOW_WORDS];
    uint8_t rx_next[NET_CHANNEL_KEY_SIZE]; /* receive key of epoch rx_epoch + 1 */
    int rx_next_ok;

    /* rekey started by the initiator, waiting for REKEY_ACK */
    int rk_pending;
    gossip_time_us rk_started;
    uint8_t rk_pk[crypto_kx_PUBLICKEYBYTES];
    uint8_t rk_sk[crypto_kx_SECRETKEYBYTES];

    uint64_t rejects[NET_REJECT_COUNT];
    int last_reject;
};

/* ---- keyed hashes ------------------------------------------------------ */

typedef struct part {
    const uint8_t *p;
    size_t n;
} part;

/* BLAKE2b-256 keyed with key over label || parts. */
static void kh(const uint8_t *key, uint8_t out[32], const char *label, const part *parts, size_t n)
{
    crypto_generichash_state st;
    crypto_generichash_init(&st, key, NET_NETWORK_KEY_SIZE, 32);
    crypto_generichash_update(&st, (const uint8_t *)label, strlen(label));
    for (size_t i = 0; i < n; i++)
        if (parts[i].n)
            crypto_generichash_update(&st, parts[i].p, parts[i].n);
    crypto_generichash_final(&st, out, 32);
    sodium_memzero(&st, sizeof st);
}

#define KH(key, out, label, ...)                                                                   \
    kh((key), (out), (label), (const part[]){__VA_ARGS__},                                         \
       sizeof((const part[]){__VA_ARGS__}) / sizeof(part))

static const uint8_t *session_key(const net_channel *ch)
{
    return ch->keys[ch->key_idx < 0 ? 0 : ch->key_idx];
}

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (24 - 8 * i));
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (56 - 8 * i));
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

/* Nonces: data and rekey records use 0x00000000 || counter; the single
 * CONFIRM of a session uses 0xffffffff || 0, outside the data space. */
static void make_nonce(uint8_t nonce[12], uint32_t prefix, uint64_t counter)
{
    put_u32(nonce, prefix);
    put_u64(nonce + 4, counter);
}

static void count(net_channel *ch, net_reject cause)
{
    ch->rejects[cause]++;
    ch->last_reject = (int)cause;
}

/* Fail the channel for good: count, wipe every secret. */
static int fail(net_channel *ch, net_reject cause)
{
    count(ch, cause);
    ch->state = ST_FAILED;
    sodium_memzero(ch->eph_sk, sizeof ch->eph_sk);
    sodium_memzero(ch->rk_sk, sizeof ch->rk_sk);
    sodium_memzero(ch->ck, sizeof ch->ck);
    sodium_memzero(ch->tx_key, sizeof ch->tx_key);
    sodium_memzero(ch->rx_key, sizeof ch->rx_key);
    sodium_memzero(ch->rx_next, sizeof ch->rx_next);
    ch->rx_next_ok = 0;
    ch->rk_pending = 0;
    ch->out_len = 0;
    return NET_EFAILED;
}

/* ---- create / destroy -------------------------------------------------- */

static void build_hello(net_channel *ch);

int net_channel_create(net_channel **out, const net_channel_config *cfg, gossip_time_us now)
{
    if (!out || !cfg || !cfg->self || cfg->self->node_id == 0)
        return NET_EINVAL;
    *out = NULL;
    if ((!cfg->network_key && !cfg->network_keys_n) || cfg->network_keys_n > NET_CHANNEL_KEYS_MAX ||
        (cfg->network_keys_n && !cfg->network_keys))
        return NET_EINVAL;
    if (cfg->allow_n > NET_CHANNEL_ALLOW_MAX || (cfg->allow_n && !cfg->allow))
        return NET_EINVAL;
    if (net_init() != NET_OK)
        return NET_EIO;
    net_channel *ch = calloc(1, sizeof *ch);
    if (!ch)
        return NET_ENOMEM;
    ch->initiator = cfg->initiator ? 1 : 0;
    ch->want_auth_only = cfg->auth_only ? 1 : 0;
    ch->self = *cfg->self;
    if (cfg->network_keys_n) {
        memcpy(ch->keys, cfg->network_keys, cfg->network_keys_n * NET_NETWORK_KEY_SIZE);
        ch->n_keys = cfg->network_keys_n;
    } else {
        memcpy(ch->keys[0], cfg->network_key, NET_NETWORK_KEY_SIZE);
        ch->n_keys = 1;
    }
    ch->key_idx = ch->initiator ? 0 : -1;
    ch->allow = cfg->allow;
    ch->allow_n = cfg->allow_n;
    ch->seen = cfg->seen;
    ch->wall_ns = cfg->wall_ns;
    ch->expect_peer = cfg->expect_peer;
    ch->rekey_frames = cfg->rekey_frames ? cfg->rekey_frames : NET_CHANNEL_REKEY_FRAMES_DEFAULT;
    ch->rekey_interval_us =
        cfg->rekey_interval_us ? cfg->rekey_interval_us : NET_CHANNEL_REKEY_INTERVAL_DEFAULT_US;
    uint64_t hs = cfg->handshake_timeout_us ? cfg->handshake_timeout_us
                                            : NET_CHANNEL_HANDSHAKE_TIMEOUT_DEFAULT_US;
    ch->hs_deadline = now > GOSSIP_TIME_NEVER - hs ? GOSSIP_TIME_NEVER - 1 : now + hs;
    ch->last_reject = -1;
    if (ch->initiator) {
        build_hello(ch);
        ch->state = ST_WAIT_REPLY;
    } else {
        ch->state = ST_WAIT_HELLO;
    }
    *out = ch;
    return NET_OK;
}

void net_channel_destroy(net_channel *ch)
{
    if (!ch)
        return;
    sodium_memzero(ch, sizeof *ch);
    free(ch);
}

int net_channel_poll_send(net_channel *ch, const uint8_t **rec, size_t *len)
{
    if (!ch || !rec || !len || ch->out_len == 0)
        return 0;
    *rec = ch->out;
    *len = ch->out_len;
    ch->out_len = 0;
    return 1;
}

int net_channel_set_allow(net_channel *ch, const uint8_t *allow, size_t allow_n)
{
    if (!ch || allow_n > NET_CHANNEL_ALLOW_MAX || (allow_n && !allow))
        return NET_EINVAL;
    ch->allow = allow;
    ch->allow_n = allow_n;
    return NET_OK;
}

int net_channel_allowed(const net_channel *ch, const uint8_t pk[NET_PUBLIC_KEY_SIZE])
{
    if (!ch || !pk)
        return 0;
    /* The list is "configured" when the pointer is set, whatever its length:
     * an empty list admits nobody (fail closed). */
    if (!ch->allow)
        return 1;
    int found = 0;
    for (size_t i = 0; i < ch->allow_n; i++)
        found |= sodium_memcmp(ch->allow + i * NET_PUBLIC_KEY_SIZE, pk, NET_PUBLIC_KEY_SIZE) == 0;
    return found;
}

/* ---- handshake --------------------------------------------------------- */

/* Checks of a peer key shared by both sides; 0 or the refusal cause. */
static int check_peer_key(const net_channel *ch, const uint8_t *pk)
{
    if (sodium_memcmp(pk, ch->self.pk, NET_PUBLIC_KEY_SIZE) == 0)
        return NET_REJECT_SELF;
    if (net_node_id(pk) == 0)
        return NET_REJECT_BAD_KEY;
    if (!net_channel_allowed(ch, pk))
        return NET_REJECT_NOT_ALLOWED;
    return 0;
}

/* Initiator: HELLO = type, version, flags, e_I || seal_k1(pk_I, ts, rid, sig_I). */
static void build_hello(net_channel *ch)
{
    const uint8_t *K = session_key(ch);
    crypto_kx_keypair(ch->eph_pk, ch->eph_sk);
    uint8_t *h = ch->hello;
    h[0] = NET_REC_HELLO;
    h[1] = NET_CHANNEL_VERSION;
    h[2] = ch->want_auth_only ? NET_CHANNEL_FLAG_AUTH_ONLY : 0;
    memcpy(h + 3, ch->eph_pk, 32);
    uint8_t pt[NET_CHANNEL_HELLO_SEALED];
    memcpy(pt, ch->self.pk, NET_PUBLIC_KEY_SIZE);
    net_seen_tai64n(pt + 32, ch->wall_ns);
    put_u64(pt + 44, ch->expect_peer);
    uint8_t h1[32], k1[32], nonce[12] = {0};
    KH(K, h1, LABEL_HELLO_SIG, {h, NET_CHANNEL_HELLO_PREFIX}, {pt, 52});
    crypto_sign_detached(pt + 52, NULL, h1, sizeof h1, ch->self.sk);
    KH(K, k1, LABEL_HELLO_KEY, {h, NET_CHANNEL_HELLO_PREFIX});
    crypto_aead_chacha20poly1305_ietf_encrypt_detached(
        h + NET_CHANNEL_HELLO_PREFIX, h + NET_CHANNEL_HELLO_PREFIX + NET_CHANNEL_HELLO_SEALED, NULL,
        pt, sizeof pt, h, NET_CHANNEL_HELLO_PREFIX, NULL, nonce, k1);
    sodium_memzero(k1, sizeof k1);
    memcpy(ch->out, h, NET_CHANNEL_HELLO_SIZE);
    ch->out_len = NET_CHANNEL_HELLO_SIZE;
}

/* Responder: open the HELLO under one of our network keys; -1 if none. */
static int hello_open(net_channel *ch, const uint8_t *rec, uint8_t pt[NET_CHANNEL_HELLO_SEALED])
{
    uint8_t nonce[12] = {0};
    for (size_t j = 0; j < ch->n_keys; j++) {
        uint8_t k1[32];
        KH(ch->keys[j], k1, LABEL_HELLO_KEY, {rec, NET_CHANNEL_HELLO_PREFIX});
        int bad = crypto_aead_chacha20poly1305_ietf_decrypt_detached(
            pt, NULL, rec + NET_CHANNEL_HELLO_PREFIX, NET_CHANNEL_HELLO_SEALED,
            rec + NET_CHANNEL_HELLO_PREFIX + NET_CHANNEL_HELLO_SEALED, rec,
            NET_CHANNEL_HELLO_PREFIX, nonce, k1);
        sodium_memzero(k1, sizeof k1);
        if (!bad)
            return (int)j;
    }
    return -1;
}

/* Session keys of epoch 0 (or of a rekey) from the chain key. */
static void derive_keys(net_channel *ch, const uint8_t ck[32], uint8_t tx[32], uint8_t rx[32])
{
    const uint8_t *K = session_key(ch);
    KH(K, ch->initiator ? tx : rx, LABEL_I2R, {ck, 32}, {ch->th, 32});
    KH(K, ch->initiator ? rx : tx, LABEL_R2I, {ck, 32}, {ch->th, 32});
}

static void session_start(net_channel *ch, gossip_time_us now)
{
    derive_keys(ch, ch->ck, ch->tx_key, ch->rx_key);
    sodium_memzero(ch->eph_sk, sizeof ch->eph_sk);
    ch->tx_epoch = 0;
    ch->tx_counter = 0;
    ch->epoch_start = now;
    ch->rx_epoch = 0;
    ch->rx_any = 0;
    ch->rx_top = 0;
    memset(ch->rx_bits, 0, sizeof ch->rx_bits);
}

/* Responder: HELLO -> REPLY. Every check that needs no public-key
 * operation comes first, so a replayed or foreign HELLO costs one BLAKE2b
 * and one 116-byte decryption per network key, and draws no reply. */
static int on_hello(net_channel *ch, const uint8_t *rec, size_t len, gossip_time_us now)
{
    if (len != NET_CHANNEL_HELLO_SIZE || rec[1] != NET_CHANNEL_VERSION ||
        (rec[2] & ~NET_CHANNEL_FLAG_AUTH_ONLY))
        return fail(ch, NET_REJECT_BAD_RECORD);
    uint8_t pt[NET_CHANNEL_HELLO_SEALED];
    int j = hello_open(ch, rec, pt);
    if (j < 0)
        return fail(ch, NET_REJECT_BAD_MAC);
    ch->key_idx = j;
    const uint8_t *K = session_key(ch);
    const uint8_t *pk_i = pt, *ts = pt + 32, *sig_i = pt + 52;
    uint64_t rid = get_u64(pt + 44);
    if (rid && rid != ch->self.node_id)
        return fail(
            ch, NET_REJECT_WRONG_PEER); /* meant for someone else: a replay or a stale address */
    int why = check_peer_key(ch, pk_i);
    if (why)
        return fail(ch, (net_reject)why);
    if (ch->seen && !net_seen_fresh(ch->seen, pk_i, ts))
        return fail(ch, NET_REJECT_STALE_HELLO);
    if (ch->wall_ns &&
        net_seen_unix_s(ts) + NET_CHANNEL_HELLO_AGE_MAX_S < ch->wall_ns / 1000000000u)
        return fail(ch, NET_REJECT_STALE_HELLO);
    uint8_t h1[32];
    KH(K, h1, LABEL_HELLO_SIG, {rec, NET_CHANNEL_HELLO_PREFIX}, {pt, 52});
    if (crypto_sign_verify_detached(sig_i, h1, sizeof h1, pk_i) != 0)
        return fail(ch, NET_REJECT_BAD_SIGNATURE);
    /* Only the key's owner could sign this timestamp: record it. */
    if (ch->seen)
        net_seen_update(ch->seen, pk_i, ts, now);
    memcpy(ch->hello, rec, NET_CHANNEL_HELLO_SIZE);
    memcpy(ch->peer_pk, pk_i, NET_PUBLIC_KEY_SIZE);
    ch->peer_id = net_node_id(pk_i);
    ch->auth_only = ch->want_auth_only && (rec[2] & NET_CHANNEL_FLAG_AUTH_ONLY);

    crypto_kx_keypair(ch->eph_pk, ch->eph_sk);
    uint8_t i2r[32], r2i[32];
    /* server keys: rx = I -> R, tx = R -> I */
    if (crypto_kx_server_session_keys(i2r, r2i, ch->eph_pk, ch->eph_sk, rec + 3) != 0) {
        sodium_memzero(i2r, 32);
        sodium_memzero(r2i, 32);
        return fail(ch, NET_REJECT_BAD_KEY);
    }
    uint8_t *r = ch->out;
    r[0] = NET_REC_REPLY;
    r[1] = ch->auth_only ? NET_CHANNEL_FLAG_AUTH_ONLY : 0;
    memcpy(r + 2, ch->eph_pk, 32);
    KH(K, ch->ck, LABEL_CHAIN, {ch->hello, NET_CHANNEL_HELLO_SIZE}, {r, NET_CHANNEL_REPLY_PREFIX},
       {i2r, 32}, {r2i, 32});
    sodium_memzero(i2r, 32);
    sodium_memzero(r2i, 32);
    uint8_t pt2[NET_CHANNEL_REPLY_SEALED], h2[32], k2[32], nonce[12] = {0};
    memcpy(pt2, ch->self.pk, NET_PUBLIC_KEY_SIZE);
    KH(K, h2, LABEL_REPLY_SIG, {ch->hello, NET_CHANNEL_HELLO_SIZE}, {r, NET_CHANNEL_REPLY_PREFIX},
       {ch->self.pk, NET_PUBLIC_KEY_SIZE});
    crypto_sign_detached(pt2 + 32, NULL, h2, sizeof h2, ch->self.sk);
    KH(K, k2, LABEL_REPLY_KEY, {ch->ck, 32});
    crypto_aead_chacha20poly1305_ietf_encrypt_detached(
        r + NET_CHANNEL_REPLY_PREFIX, r + NET_CHANNEL_REPLY_PREFIX + NET_CHANNEL_REPLY_SEALED, NULL,
        pt2, sizeof pt2, r, NET_CHANNEL_REPLY_PREFIX, NULL, nonce, k2);
    sodium_memzero(k2, sizeof k2);
    ch->out_len = NET_CHANNEL_REPLY_SIZE;
    KH(K, ch->th, LABEL_TRANSCRIPT, {ch->hello, NET_CHANNEL_HELLO_SIZE},
       {r, NET_CHANNEL_REPLY_SIZE});
    session_start(ch, now);
    ch->state = ST_WAIT_CONFIRM;
    return NET_OK;
}

/* Initiator: REPLY -> CONFIRM, open. */
static int on_reply(net_channel *ch, const uint8_t *rec, size_t len, gossip_time_us now)
{
    if (len != NET_CHANNEL_REPLY_SIZE || (rec[1] & ~NET_CHANNEL_FLAG_AUTH_ONLY) ||
        ((rec[1] & NET_CHANNEL_FLAG_AUTH_ONLY) && !ch->want_auth_only))
        return fail(ch, NET_REJECT_BAD_RECORD);
    const uint8_t *K = session_key(ch);
    uint8_t i2r[32], r2i[32];
    /* client keys: rx = R -> I, tx = I -> R */
    if (crypto_kx_client_session_keys(r2i, i2r, ch->eph_pk, ch->eph_sk, rec + 2) != 0) {
        sodium_memzero(i2r, 32);
        sodium_memzero(r2i, 32);
        return fail(ch, NET_REJECT_BAD_KEY);
    }
    KH(K, ch->ck, LABEL_CHAIN, {ch->hello, NET_CHANNEL_HELLO_SIZE}, {rec, NET_CHANNEL_REPLY_PREFIX},
       {i2r, 32}, {r2i, 32});
    sodium_memzero(i2r, 32);
    sodium_memzero(r2i, 32);
    uint8_t pt2[NET_CHANNEL_REPLY_SEALED], k2[32], h2[32], nonce[12] = {0};
    KH(K, k2, LABEL_REPLY_KEY, {ch->ck, 32});
    int bad = crypto_aead_chacha20poly1305_ietf_decrypt_detached(
        pt2, NULL, rec + NET_CHANNEL_REPLY_PREFIX, NET_CHANNEL_REPLY_SEALED,
        rec + NET_CHANNEL_REPLY_PREFIX + NET_CHANNEL_REPLY_SEALED, rec, NET_CHANNEL_REPLY_PREFIX,
        nonce, k2);
    sodium_memzero(k2, sizeof k2);
    if (bad) /* a responder without our network key, or a tampered REPLY */
        return fail(ch, NET_REJECT_BAD_MAC);
    const uint8_t *pk_r = pt2, *sig_r = pt2 + 32;
    KH(K, h2, LABEL_REPLY_SIG, {ch->hello, NET_CHANNEL_HELLO_SIZE}, {rec, NET_CHANNEL_REPLY_PREFIX},
       {pk_r, NET_PUBLIC_KEY_SIZE});
    if (crypto_sign_verify_detached(sig_r, h2, sizeof h2, pk_r) != 0)
        return fail(ch, NET_REJECT_BAD_SIGNATURE);
    int why = check_peer_key(ch, pk_r);
    if (why)
        return fail(ch, (net_reject)why);
    uint64_t id = net_node_id(pk_r);
    if (ch->expect_peer && ch->expect_peer != id)
        return fail(ch, NET_REJECT_WRONG_PEER);
    ch->peer_id = id;
    memcpy(ch->peer_pk, pk_r, NET_PUBLIC_KEY_SIZE);
    ch->auth_only = (rec[1] & NET_CHANNEL_FLAG_AUTH_ONLY) != 0;
    KH(K, ch->th, LABEL_TRANSCRIPT, {ch->hello, NET_CHANNEL_HELLO_SIZE},
       {rec, NET_CHANNEL_REPLY_SIZE});
    session_start(ch, now);
    /* CONFIRM: a tag under our sending key proves we hold e_I's secret. */
    uint8_t *c = ch->out;
    c[0] = NET_REC_CONFIRM;
    make_nonce(nonce, 0xffffffffu, 0);
    crypto_aead_chacha20poly1305_ietf_encrypt_detached(c + 1, c + 1, NULL, NULL, 0, c, 1, NULL,
                                                       nonce, ch->tx_key);
    ch->out_len = NET_CHANNEL_CONFIRM_SIZE;
    ch->state = ST_OPEN;
    return NET_OK;
}

/* Responder: CONFIRM -> open. */
static int on_confirm(net_channel *ch, const uint8_t *rec, size_t len, gossip_time_us now)
{
    if (len != NET_CHANNEL_CONFIRM_SIZE)
        return fail(ch, NET_REJECT_BAD_RECORD);
    uint8_t nonce[12];
    make_nonce(nonce, 0xffffffffu, 0);
    /* An empty ciphertext: libsodium wants non-NULL pointers all the same. */
    if (crypto_aead_chacha20poly1305_ietf_decrypt_detached(NULL, NULL, rec + 1, 0, rec + 1, rec, 1,
                                                           nonce, ch->rx_key) != 0)
        return fail(ch, NET_REJECT_AUTH);
    /* The allow-list may have changed since the HELLO (a revocation). */
    if (!net_channel_allowed(ch, ch->peer_pk))
        return fail(ch, NET_REJECT_NOT_ALLOWED);
    ch->epoch_start = now;
    ch->state = ST_OPEN;
    return NET_OK;
}

/* ---- data records ------------------------------------------------------ */

/* Replay window (RFC 6479 style ring of words): 0 fresh, else the cause. */
static int window_check(const net_channel *ch, uint64_t counter)
{
    if (!ch->rx_any || counter > ch->rx_top)
        return 0;
    if (ch->rx_top - counter >= NET_CHANNEL_WINDOW)
        return NET_REJECT_TOO_OLD;
    uint64_t word = ch->rx_bits[(counter / 64) % WINDOW_WORDS];
    return (word >> (counter % 64)) & 1 ? NET_REJECT_REPLAY : 0;
}

static void window_mark(net_channel *ch, uint64_t counter)
{
    if (!ch->rx_any) {
        memset(ch->rx_bits, 0, sizeof ch->rx_bits);
        ch->rx_top = counter;
        ch->rx_any = 1;
    } else if (counter > ch->rx_top) {
        uint64_t cur = ch->rx_top / 64, next = counter / 64;
        uint64_t diff = next - cur;
        if (diff > WINDOW_WORDS)
            diff = WINDOW_WORDS;
        for (uint64_t i = 1; i <= diff; i++)
            ch->rx_bits[(cur + i) % WINDOW_WORDS] = 0;
        ch->rx_top = counter;
    }
    ch->rx_bits[(counter / 64) % WINDOW_WORDS] |= 1ull << (counter % 64);
}

/* The AEAD of one data-like record under op's key: seal (op->open = 0) or
 * verify and open in place (op->ok says whether the tag was good; on a bad
 * tag nothing is decrypted, and libsodium zeroes the frame of an encrypted
 * record). Touches only op and rec. */
static void op_crypt(net_channel_op *op, uint8_t *rec)
{
    size_t len = op->len; /* frame bytes between header and tag */
    uint8_t *c = rec + NET_CHANNEL_HEADER_SIZE;
    if (!op->open && op->type == NET_REC_DATA_CLEAR)
        /* Auth-only: AEAD over an empty plaintext with header || frame as
         * associated data; the frame stays in clear. */
        crypto_aead_chacha20poly1305_ietf_encrypt_detached(c + len, c + len, NULL, NULL, 0, rec,
                                                           NET_CHANNEL_HEADER_SIZE + len, NULL,
                                                           op->nonce, op->key);
    else if (!op->open)
        crypto_aead_chacha20poly1305_ietf_encrypt_detached(
            c, c + len, NULL, c, len, rec, NET_CHANNEL_HEADER_SIZE, NULL, op->nonce, op->key);
    else if (op->type == NET_REC_DATA_CLEAR)
        op->ok = crypto_aead_chacha20poly1305_ietf_decrypt_detached(
                     NULL, NULL, c + len, 0, c + len, rec, NET_CHANNEL_HEADER_SIZE + len, op->nonce,
                     op->key) == 0;
    else
        op->ok = crypto_aead_chacha20poly1305_ietf_decrypt_detached(c, NULL, c, len, c + len, rec,
                                                                    NET_CHANNEL_HEADER_SIZE,
                                                                    op->nonce, op->key) == 0;
    sodium_memzero(op->key, sizeof op->key);
}

/* Write the header of a record of the given type with len frame bytes at
 * out + header (already there) under the current send key, and take the
 * next counter; op receives what the AEAD needs. */
static void seal_prepare(net_channel *ch, uint8_t type, uint8_t *out, size_t len,
                         net_channel_op *op)
{
    uint64_t counter = ch->tx_counter++;
    out[0] = type;
    put_u32(out + 1, ch->tx_epoch);
    put_u64(out + 5, counter);
    op->open = 0;
    op->ok = 0;
    op->type = type;
    op->advance = 0;
    op->epoch = ch->tx_epoch;
    op->counter = counter;
    op->len = len;
    make_nonce(op->nonce, 0, counter);
    memcpy(op->key, ch->tx_key, sizeof op->key);
}

/* Write the header and seal len bytes at out + header (already there) as a
 * record of the given type under the current send key. */
static void seal_record(net_channel *ch, uint8_t type, uint8_t *out, size_t len)
{
    net_channel_op op;
    seal_prepare(ch, type, out, len, &op);
    op_crypt(&op, out);
}

static int rekey_start(net_channel *ch, gossip_time_us now);
static int on_rekey(net_channel *ch, const uint8_t *p, size_t len, gossip_time_us now);

/* Initiator: start a rekey when a bound is reached; fail a late one. */
static int rekey_due(net_channel *ch, gossip_time_us now)
{
    if (!ch->initiator || ch->state != ST_OPEN)
        return NET_OK;
    if (ch->rk_pending) {
        if (now > ch->rk_started && now - ch->rk_started >= NET_CHANNEL_REKEY_TIMEOUT_US)
            return fail(ch, NET_REJECT_REKEY);
        return NET_OK;
    }
    /* A clock that went backwards never triggers a rekey by time. */
    int old = now > ch->epoch_start && now - ch->epoch_start >= ch->rekey_interval_us;
    /* Frames received count only in the current epoch: right after a
     * rekey the receive side still holds the old one until the peer's
     * first new record. */
    int many = ch->tx_counter >= ch->rekey_frames ||
               (ch->rx_epoch == ch->tx_epoch && ch->rx_any && ch->rx_top >= ch->rekey_frames);
    if (!old && !many)
        return NET_OK;
    if (ch->out_len) /* the caller has not collected the last control record yet */
        return NET_OK;
    return rekey_start(ch, now);
}

/* Checks of a data-like record before its AEAD (in this order, each
 * counted): length, the session's mode, epoch and replay window. NET_OK
 * with op ready, or NET_EREJECT. */
static int data_prepare(net_channel *ch, const uint8_t *rec, size_t len, net_channel_op *op)
{
    uint8_t type = rec[0];
    if (len < NET_CHANNEL_OVERHEAD) {
        count(ch, NET_REJECT_TRUNCATED);
        return NET_EREJECT;
    }
    /* The session's mode decides the data type; a clear record never
     * opens in an encrypted session (fail closed), nor the reverse. */
    if ((type == NET_REC_DATA && ch->auth_only) || (type == NET_REC_DATA_CLEAR && !ch->auth_only)) {
        count(ch, NET_REJECT_BAD_RECORD);
        return NET_EREJECT;
    }
    uint32_t epoch = get_u32(rec + 1);
    uint64_t counter = get_u64(rec + 5);
    const uint8_t *key;
    int advance = 0;
    if (epoch == ch->rx_epoch) {
        int why = window_check(ch, counter);
        if (why) {
            count(ch, (net_reject)why);
            return NET_EREJECT;
        }
        key = ch->rx_key;
    } else if (ch->rx_next_ok && epoch == ch->rx_epoch + 1) {
        key = ch->rx_next;
        advance = 1;
    } else {
        count(ch, NET_REJECT_BAD_EPOCH);
        return NET_EREJECT;
    }
    op->open = 1;
    op->ok = 0;
    op->type = type;
    op->advance = (uint8_t)advance;
    op->epoch = epoch;
    op->counter = counter;
    op->len = len - NET_CHANNEL_OVERHEAD;
    make_nonce(op->nonce, 0, counter);
    memcpy(op->key, key, sizeof op->key);
    return NET_OK;
}

/* After the AEAD of a record prepared by data_prepare: count a bad tag,
 * else move the window (and the epoch) and hand out the frame or run the
 * rekey record. */
static int data_finish(net_channel *ch, net_channel_op *op, uint8_t *rec, gossip_time_us now,
                       uint8_t **plain, size_t *plain_len)
{
    if (!op->ok) {
        count(ch, NET_REJECT_AUTH);
        return NET_EREJECT;
    }
    if (op->advance) {
        memcpy(ch->rx_key, ch->rx_next, sizeof ch->rx_key);
        sodium_memzero(ch->rx_next, sizeof ch->rx_next);
        ch->rx_next_ok = 0;
        ch->rx_epoch = op->epoch;
        ch->rx_any = 0;
    }
    window_mark(ch, op->counter);
    uint8_t *c = rec + NET_CHANNEL_HEADER_SIZE;
    if (op->type == NET_REC_REKEY)
        return on_rekey(ch, c, op->len, now);
    int rc = rekey_due(ch, now);
    if (rc)
        return rc;
    *plain = c;
    *plain_len = op->len;
    return NET_OK;
}

static int on_data(net_channel *ch, uint8_t *rec, size_t len, gossip_time_us now, uint8_t **plain,
                   size_t *plain_len)
{
    net_channel_op op;
    int rc = data_prepare(ch, rec, len, &op);
    if (rc)
        return rc;
    op_crypt(&op, rec);
    return data_finish(ch, &op, rec, now, plain, plain_len);
}

int net_channel_recv(net_channel *ch, uint8_t *rec, size_t len, gossip_time_us now, uint8_t **plain,
                     size_t *plain_len)
{
    if (!ch || (!rec && len) || !plain || !plain_len)
        return NET_EINVAL;
    *plain = NULL;
    *plain_len = 0;
    if (ch->state == ST_FAILED)
        return NET_EFAILED;
    if (len == 0)
        return ch->state == ST_OPEN ? (count(ch, NET_REJECT_TRUNCATED), NET_EREJECT)
                                    : fail(ch, NET_REJECT_BAD_RECORD);
    uint8_t type = rec[0];
    int known = type >= NET_REC_HELLO && type <= NET_REC_DATA_CLEAR;
    switch (ch->state) {
    case ST_WAIT_HELLO:
        if (type != NET_REC_HELLO)
            return fail(ch, known ? NET_REJECT_BAD_STATE : NET_REJECT_BAD_RECORD);
        return on_hello(ch, rec, len, now);
    case ST_WAIT_REPLY:
        if (type != NET_REC_REPLY)
            return fail(ch, known ? NET_REJECT_BAD_STATE : NET_REJECT_BAD_RECORD);
        return on_reply(ch, rec, len, now);
    case ST_WAIT_CONFIRM:
        if (type != NET_REC_CONFIRM)
            return fail(ch, known ? NET_REJECT_BAD_STATE : NET_REJECT_BAD_RECORD);
        return on_confirm(ch, rec, len, now);
    case ST_OPEN:
        if (type != NET_REC_DATA && type != NET_REC_DATA_CLEAR && type != NET_REC_REKEY) {
            count(ch, known ? NET_REJECT_BAD_STATE : NET_REJECT_BAD_RECORD);
            return NET_EREJECT;
        }
        return on_data(ch, rec, len, now, plain, plain_len);
    case ST_FAILED:
        break;
    }
    return NET_EFAILED;
}

int net_channel_seal_begin(net_channel *ch, size_t len, uint8_t *out, size_t cap, size_t *out_len,
                           gossip_time_us now, net_channel_op *op)
{
    if (!ch || !out || !out_len || !op)
        return NET_EINVAL;
    if (ch->state != ST_OPEN)
        return NET_ESTATE;
    if (len > SIZE_MAX - NET_CHANNEL_OVERHEAD || cap < len + NET_CHANNEL_OVERHEAD)
        return NET_ESPACE;
    int rc = rekey_due(ch, now);
    if (rc)
        return rc;
    if (ch->tx_counter == UINT64_MAX)
        return fail(ch, NET_REJECT_BAD_EPOCH);
    seal_prepare(ch, ch->auth_only ? NET_REC_DATA_CLEAR : NET_REC_DATA, out, len, op);
    *out_len = len + NET_CHANNEL_OVERHEAD;
    return NET_OK;
}

int net_channel_seal(net_channel *ch, const uint8_t *plain, size_t len, uint8_t *out, size_t cap,
                     size_t *out_len, gossip_time_us now)
{
    if (!ch || !out || !out_len || (!plain && len))
        return NET_EINVAL;
    if (ch->state != ST_OPEN)
        return NET_ESTATE;
    if (len > SIZE_MAX - NET_CHANNEL_OVERHEAD || cap < len + NET_CHANNEL_OVERHEAD)
        return NET_ESPACE;
    /* plain must not overlap the header except in the exact in-place layout. */
    uint8_t *c = out + NET_CHANNEL_HEADER_SIZE;
    if (plain && plain != c && plain < out + len + NET_CHANNEL_OVERHEAD && plain + len > out)
        return NET_EINVAL;
    net_channel_op op;
    /* The checks above first: a refused seal leaves out untouched. */
    int rc = rekey_due(ch, now);
    if (rc)
        return rc;
    if (ch->tx_counter == UINT64_MAX)
        return fail(ch, NET_REJECT_BAD_EPOCH);
    if (len && plain != c)
        memmove(c, plain, len);
    seal_prepare(ch, ch->auth_only ? NET_REC_DATA_CLEAR : NET_REC_DATA, out, len, &op);
    op_crypt(&op, out);
    *out_len = len + NET_CHANNEL_OVERHEAD;
    return NET_OK;
}

int net_channel_open_begin(net_channel *ch, const uint8_t *rec, size_t len, net_channel_op *op)
{
    if (!ch || !rec || !len || !op)
        return NET_EINVAL;
    if (ch->state != ST_OPEN || (rec[0] != NET_REC_DATA && rec[0] != NET_REC_DATA_CLEAR))
        return NET_ESTATE;
    return data_prepare(ch, rec, len, op);
}

void net_channel_crypt(net_channel_op *op, uint8_t *rec)
{
    op_crypt(op, rec);
}

int net_channel_open_end(net_channel *ch, net_channel_op *op, uint8_t *rec, gossip_time_us now,
                         uint8_t **plain, size_t *plain_len)
{
    if (!ch || !op || !op->open || !rec || !plain || !plain_len)
        return NET_EINVAL;
    *plain = NULL;
    *plain_len = 0;
    if (ch->state != ST_OPEN)
        return NET_EFAILED;
    /* Another record of this channel was taken in between (the caller did
     * not serialise its receive side), or the keys moved: refuse rather
     * than mark a window or an epoch that no longer match. */
    int moved = op->advance ? !ch->rx_next_ok || op->epoch != ch->rx_epoch + 1
                            : op->epoch != ch->rx_epoch || window_check(ch, op->counter);
    if (moved) {
        count(ch, NET_REJECT_BAD_EPOCH);
        return NET_EREJECT;
    }
    return data_finish(ch, op, rec, now, plain, plain_len);
}

/* ---- rekey (fresh ephemeral Diffie-Hellman) ---------------------------- */

/* Queue a sealed REKEY record with payload p (under the current send key). */
static void queue_rekey(net_channel *ch, const uint8_t p[NET_CHANNEL_REKEY_PAYLOAD])
{
    memcpy(ch->out + NET_CHANNEL_HEADER_SIZE, p, NET_CHANNEL_REKEY_PAYLOAD);
    seal_record(ch, NET_REC_REKEY, ch->out, NET_CHANNEL_REKEY_PAYLOAD);
    ch->out_len = NET_CHANNEL_REKEY_SIZE;
}

/* Move to epoch `epoch`: chain key from the old one and both new key
 * exchange outputs; new send key now, new receive key kept until the first
 * record of the new epoch arrives. */
static void rekey_install(net_channel *ch, uint32_t epoch, uint8_t i2r[32], uint8_t r2i[32],
                          gossip_time_us now)
{
    uint8_t e4[4], ck[32];
    put_u32(e4, epoch);
    KH(session_key(ch), ck, LABEL_REKEY, {ch->ck, 32}, {e4, 4}, {i2r, 32}, {r2i, 32});
    sodium_memzero(i2r, 32);
    sodium_memzero(r2i, 32);
    memcpy(ch->ck, ck, sizeof ck);
    sodium_memzero(ck, sizeof ck);
    derive_keys(ch, ch->ck, ch->tx_key, ch->rx_next);
    ch->rx_next_ok = 1;
    ch->tx_epoch = epoch;
    ch->tx_counter = 0;
    ch->epoch_start = now;
}

static int rekey_start(net_channel *ch, gossip_time_us now)
{
    if (ch->tx_epoch == UINT32_MAX)
        return fail(ch, NET_REJECT_BAD_EPOCH);
    crypto_kx_keypair(ch->rk_pk, ch->rk_sk);
    uint8_t p[NET_CHANNEL_REKEY_PAYLOAD], h[32];
    p[0] = REKEY_INIT;
    put_u32(p + 1, ch->tx_epoch + 1);
    memcpy(p + 5, ch->rk_pk, 32);
    KH(session_key(ch), h, LABEL_REKEY_I, {ch->th, 32}, {p + 1, 4}, {ch->rk_pk, 32});
    crypto_sign_detached(p + 37, NULL, h, sizeof h, ch->self.sk);
    queue_rekey(ch, p);
    ch->rk_pending = 1;
    ch->rk_started = now;
    return NET_OK;
}

/* A REKEY record that authenticated under the session key: the responder
 * answers an INIT, the initiator completes on the ACK. Anything else fails
 * the channel (only the peer, or someone holding this session's keys,
 * could have sealed it). */
static int on_rekey(net_channel *ch, const uint8_t *p, size_t len, gossip_time_us now)
{
    if (len != NET_CHANNEL_REKEY_PAYLOAD)
        return fail(ch, NET_REJECT_REKEY);
    const uint8_t *K = session_key(ch);
    uint32_t epoch = get_u32(p + 1);
    const uint8_t *e = p + 5, *sig = p + 37;
    uint8_t h[32], i2r[32], r2i[32];
    if (!ch->initiator && p[0] == REKEY_INIT) {
        /* One rekey at a time: the previous epoch must be fully installed. */
        if (ch->tx_epoch == UINT32_MAX || epoch != ch->tx_epoch + 1 || ch->rx_next_ok ||
            ch->rx_epoch != ch->tx_epoch || ch->out_len)
            return fail(ch, NET_REJECT_REKEY);
        KH(K, h, LABEL_REKEY_I, {ch->th, 32}, {p + 1, 4}, {e, 32});
        if (crypto_sign_verify_detached(sig, h, sizeof h, ch->peer_pk) != 0)
            return fail(ch, NET_REJECT_REKEY);
        uint8_t pk[32], sk[32], ack[NET_CHANNEL_REKEY_PAYLOAD];
        crypto_kx_keypair(pk, sk);
        int bad = crypto_kx_server_session_keys(i2r, r2i, pk, sk, e) != 0;
        sodium_memzero(sk, sizeof sk);
        if (bad)
            return fail(ch, NET_REJECT_REKEY);
        ack[0] = REKEY_ACK;
        put_u32(ack + 1, epoch);
        memcpy(ack + 5, pk, 32);
        KH(K, h, LABEL_REKEY_R, {ch->th, 32}, {p + 1, 4}, {e, 32}, {pk, 32});
        crypto_sign_detached(ack + 37, NULL, h, sizeof h, ch->self.sk);
        queue_rekey(ch, ack); /* the last record of the old epoch */
        rekey_install(ch, epoch, i2r, r2i, now);
        return NET_OK;
    }
    if (ch->initiator && p[0] == REKEY_ACK && ch->rk_pending && epoch == ch->tx_epoch + 1) {
        KH(K, h, LABEL_REKEY_R, {ch->th, 32}, {p + 1, 4}, {ch->rk_pk, 32}, {e, 32});
        if (crypto_sign_verify_detached(sig, h, sizeof h, ch->peer_pk) != 0)
            return fail(ch, NET_REJECT_REKEY);
        int bad = crypto_kx_client_session_keys(r2i, i2r, ch->rk_pk, ch->rk_sk, e) != 0;
        sodium_memzero(ch->rk_sk, sizeof ch->rk_sk);
        ch->rk_pending = 0;
        if (bad)
            return fail(ch, NET_REJECT_REKEY);
        rekey_install(ch, epoch, i2r, r2i, now);
        return NET_OK;
    }
    return fail(ch, NET_REJECT_REKEY);
}

/* ---- timeouts and accessors -------------------------------------------- */

int net_channel_check_timeout(net_channel *ch, gossip_time_us now)
{
    if (!ch)
        return NET_EINVAL;
    if (ch->state == ST_FAILED)
        return NET_EFAILED;
    if (ch->state != ST_OPEN && now >= ch->hs_deadline)
        return fail(ch, NET_REJECT_HANDSHAKE_TIMEOUT);
    return NET_OK;
}

gossip_time_us net_channel_deadline(const net_channel *ch)
{
    return ch && ch->state != ST_OPEN && ch->state != ST_FAILED ? ch->hs_deadline
                                                                : GOSSIP_TIME_NEVER;
}

void net_channel_limit_deadline(net_channel *ch, gossip_time_us deadline)
{
    if (ch && ch->state != ST_OPEN && ch->state != ST_FAILED && deadline < ch->hs_deadline)
        ch->hs_deadline = deadline;
}

int net_channel_established(const net_channel *ch)
{
    return ch && ch->state == ST_OPEN;
}

int net_channel_failed(const net_channel *ch)
{
    return ch && ch->state == ST_FAILED;
}

int net_channel_auth_only(const net_channel *ch)
{
    return ch && ch->state == ST_OPEN && ch->auth_only;
}

const uint8_t *net_channel_network_key(const net_channel *ch)
{
    return ch && ch->key_idx >= 0 ? ch->keys[ch->key_idx] : NULL;
}

uint64_t net_channel_peer(const net_channel *ch)
{
    return ch && ch->state == ST_OPEN ? ch->peer_id : 0;
}

const uint8_t *net_channel_peer_key(const net_channel *ch)
{
    return ch && ch->state == ST_OPEN ? ch->peer_pk : NULL;
}

uint32_t net_channel_tx_epoch(const net_channel *ch)
{
    return ch ? ch->tx_epoch : 0;
}

uint32_t net_channel_rx_epoch(const net_channel *ch)
{
    return ch ? ch->rx_epoch : 0;
}

uint64_t net_channel_rejects(const net_channel *ch, int cause)
{
    if (!ch || cause < 0 || cause >= NET_REJECT_COUNT)
        return 0;
    return ch->rejects[cause];
}

int net_channel_last_reject(const net_channel *ch)
{
    return ch ? ch->last_reject : -1;
}

void net_channel_debug_keys(const net_channel *ch, uint8_t tx[NET_CHANNEL_KEY_SIZE],
                            uint8_t rx[NET_CHANNEL_KEY_SIZE])
{
    if (!ch)
        return;
    if (tx)
        memcpy(tx, ch->tx_key, NET_CHANNEL_KEY_SIZE);
    if (rx)
        memcpy(rx, ch->rx_key, NET_CHANNEL_KEY_SIZE);
}
