#include "net/channel.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(NET_CHANNEL_KEY_SIZE == crypto_aead_chacha20poly1305_ietf_KEYBYTES, "aead key");
_Static_assert(NET_CHANNEL_TAG_SIZE == crypto_aead_chacha20poly1305_ietf_ABYTES, "aead tag");
_Static_assert(crypto_aead_chacha20poly1305_ietf_NPUBBYTES == 12, "nonce = 4 zero + 8 counter");
_Static_assert(NET_CHANNEL_KEY_SIZE == crypto_kx_SESSIONKEYBYTES, "kx session key");
_Static_assert(NET_CHANNEL_KEY_SIZE == crypto_kdf_KEYBYTES, "kdf key");
_Static_assert(crypto_kx_PUBLICKEYBYTES == 32, "ephemeral key in records");
_Static_assert(NET_CHANNEL_SIG_SIZE == crypto_sign_BYTES, "signature");
_Static_assert(NET_NETWORK_KEY_SIZE >= crypto_generichash_KEYBYTES_MIN &&
                   NET_NETWORK_KEY_SIZE <= crypto_generichash_KEYBYTES_MAX,
               "network key keys BLAKE2b");
_Static_assert(NET_CHANNEL_HS_MAX >= NET_CHANNEL_HELLO_SIZE &&
                   NET_CHANNEL_HS_MAX >= NET_CHANNEL_AUTH_SIZE,
               "HS_MAX bounds every handshake record");

#define WINDOW_WORDS (NET_CHANNEL_WINDOW / 64u + 1u) /* one spare word: RFC 6479 */

/* Domain-separation labels of the keyed hashes (docs/SECURITY.md). */
static const char LABEL_HELLO[] = "murmur/v1/hello";
static const char LABEL_REPLY[] = "murmur/v1/reply";
static const char LABEL_AUTH[] = "murmur/v1/auth";
static const char LABEL_SESSION[] = "murmur/v1/session";
static const char KDF_CONTEXT[crypto_kdf_CONTEXTBYTES] = {'m', 'u', 'r', 'r', 'e', 'k', 'e', 'y'};

typedef enum ch_state {
    ST_WAIT_REPLY, /* initiator sent HELLO */
    ST_WAIT_HELLO, /* responder, nothing yet */
    ST_WAIT_AUTH,  /* responder sent REPLY */
    ST_OPEN,
    ST_FAILED,
} ch_state;

struct net_channel {
    ch_state state;
    int initiator;
    net_identity self;
    uint8_t network_key[NET_NETWORK_KEY_SIZE];
    const uint8_t *allow;
    size_t allow_n;
    uint64_t expect_peer;
    uint64_t rekey_frames;
    uint64_t rekey_interval_us;
    gossip_time_us hs_deadline;

    /* handshake */
    uint8_t eph_pk[crypto_kx_PUBLICKEYBYTES];
    uint8_t eph_sk[crypto_kx_SECRETKEYBYTES];
    uint8_t hello[NET_CHANNEL_HELLO_SIZE];
    uint8_t reply[NET_CHANNEL_REPLY_SIZE];
    uint8_t out[NET_CHANNEL_HS_MAX]; /* pending handshake record */
    size_t out_len;

    /* established */
    uint64_t peer_id;
    uint8_t peer_pk[NET_PUBLIC_KEY_SIZE];
    uint8_t tx_key[NET_CHANNEL_KEY_SIZE];
    uint32_t tx_epoch;
    uint64_t tx_counter;
    gossip_time_us tx_epoch_start;
    uint8_t rx_key[NET_CHANNEL_KEY_SIZE];
    uint32_t rx_epoch;
    int rx_any;      /* a frame of rx_epoch has been accepted */
    uint64_t rx_top; /* highest counter accepted in rx_epoch */
    uint64_t rx_bits[WINDOW_WORDS];

    uint64_t rejects[NET_REJECT_COUNT];
    int last_reject;
};

static void count(net_channel *ch, net_reject cause)
{
    ch->rejects[cause]++;
    ch->last_reject = (int)cause;
}

/* Fail the handshake for good: count, wipe every handshake secret. */
static int fail(net_channel *ch, net_reject cause)
{
    count(ch, cause);
    ch->state = ST_FAILED;
    sodium_memzero(ch->eph_sk, sizeof ch->eph_sk);
    sodium_memzero(ch->tx_key, sizeof ch->tx_key);
    sodium_memzero(ch->rx_key, sizeof ch->rx_key);
    ch->out_len = 0;
    return NET_EFAILED;
}

/* BLAKE2b-256 keyed with the network key over label || parts. */
static void keyed_hash(const net_channel *ch, uint8_t out[32], const char *label, const uint8_t *a,
                       size_t alen, const uint8_t *b, size_t blen, const uint8_t *c, size_t clen)
{
    crypto_generichash_state st;
    crypto_generichash_init(&st, ch->network_key, NET_NETWORK_KEY_SIZE, 32);
    crypto_generichash_update(&st, (const uint8_t *)label, strlen(label));
    if (alen)
        crypto_generichash_update(&st, a, alen);
    if (blen)
        crypto_generichash_update(&st, b, blen);
    if (clen)
        crypto_generichash_update(&st, c, clen);
    crypto_generichash_final(&st, out, 32);
    sodium_memzero(&st, sizeof st);
}

int net_channel_create(net_channel **out, const net_channel_config *cfg, gossip_time_us now)
{
    if (!out || !cfg || !cfg->self || !cfg->network_key || cfg->self->node_id == 0)
        return NET_EINVAL;
    *out = NULL;
    if (cfg->allow_n > NET_CHANNEL_ALLOW_MAX || (cfg->allow_n && !cfg->allow))
        return NET_EINVAL;
    if (net_init() != NET_OK)
        return NET_EIO;
    net_channel *ch = calloc(1, sizeof *ch);
    if (!ch)
        return NET_ENOMEM;
    ch->initiator = cfg->initiator ? 1 : 0;
    ch->self = *cfg->self;
    memcpy(ch->network_key, cfg->network_key, NET_NETWORK_KEY_SIZE);
    ch->allow = cfg->allow;
    ch->allow_n = cfg->allow_n;
    ch->expect_peer = cfg->expect_peer;
    ch->rekey_frames = cfg->rekey_frames ? cfg->rekey_frames : NET_CHANNEL_REKEY_FRAMES_DEFAULT;
    ch->rekey_interval_us =
        cfg->rekey_interval_us ? cfg->rekey_interval_us : NET_CHANNEL_REKEY_INTERVAL_DEFAULT_US;
    uint64_t hs = cfg->handshake_timeout_us ? cfg->handshake_timeout_us
                                            : NET_CHANNEL_HANDSHAKE_TIMEOUT_DEFAULT_US;
    ch->hs_deadline = now > GOSSIP_TIME_NEVER - hs ? GOSSIP_TIME_NEVER - 1 : now + hs;
    ch->last_reject = -1;
    if (ch->initiator) {
        crypto_kx_keypair(ch->eph_pk, ch->eph_sk);
        uint8_t *h = ch->hello;
        h[0] = NET_REC_HELLO;
        h[1] = NET_CHANNEL_VERSION;
        memcpy(h + 2, ch->eph_pk, 32);
        keyed_hash(ch, h + 34, LABEL_HELLO, h, 34, NULL, 0, NULL, 0);
        memcpy(ch->out, h, NET_CHANNEL_HELLO_SIZE);
        ch->out_len = NET_CHANNEL_HELLO_SIZE;
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

/* Checks shared by both sides once the peer's key is known and signed. */
static int admit_peer(net_channel *ch, const uint8_t *pk)
{
    if (sodium_memcmp(pk, ch->self.pk, NET_PUBLIC_KEY_SIZE) == 0)
        return fail(ch, NET_REJECT_SELF);
    uint64_t id = net_node_id(pk);
    if (id == 0)
        return fail(ch, NET_REJECT_BAD_KEY);
    if (!net_channel_allowed(ch, pk))
        return fail(ch, NET_REJECT_NOT_ALLOWED);
    if (ch->initiator && ch->expect_peer && ch->expect_peer != id)
        return fail(ch, NET_REJECT_WRONG_PEER);
    ch->peer_id = id;
    memcpy(ch->peer_pk, pk, NET_PUBLIC_KEY_SIZE);
    return NET_OK;
}

/* Session keys from the kx outputs, bound to H3 and the network key. */
static void open_session(net_channel *ch, uint8_t kx_rx[32], uint8_t kx_tx[32],
                         const uint8_t h3[32], gossip_time_us now)
{
    keyed_hash(ch, ch->rx_key, LABEL_SESSION, kx_rx, 32, h3, 32, NULL, 0);
    keyed_hash(ch, ch->tx_key, LABEL_SESSION, kx_tx, 32, h3, 32, NULL, 0);
    sodium_memzero(kx_rx, 32);
    sodium_memzero(kx_tx, 32);
    sodium_memzero(ch->eph_sk, sizeof ch->eph_sk);
    ch->tx_epoch = 0;
    ch->tx_counter = 0;
    ch->tx_epoch_start = now;
    ch->rx_epoch = 0;
    ch->rx_any = 0;
    ch->rx_top = 0;
    memset(ch->rx_bits, 0, sizeof ch->rx_bits);
    ch->state = ST_OPEN;
}

/* Responder: HELLO -> REPLY. */
static int on_hello(net_channel *ch, const uint8_t *rec, size_t len)
{
    if (len != NET_CHANNEL_HELLO_SIZE || rec[1] != NET_CHANNEL_VERSION)
        return fail(ch, NET_REJECT_BAD_RECORD);
    uint8_t mac[NET_CHANNEL_MAC_SIZE];
    keyed_hash(ch, mac, LABEL_HELLO, rec, 34, NULL, 0, NULL, 0);
    if (sodium_memcmp(mac, rec + 34, sizeof mac) != 0)
        return fail(ch, NET_REJECT_BAD_MAC);
    memcpy(ch->hello, rec, NET_CHANNEL_HELLO_SIZE);
    crypto_kx_keypair(ch->eph_pk, ch->eph_sk);
    uint8_t *r = ch->reply;
    r[0] = NET_REC_REPLY;
    memcpy(r + 1, ch->eph_pk, 32);
    memcpy(r + 33, ch->self.pk, NET_PUBLIC_KEY_SIZE);
    uint8_t h2[32];
    keyed_hash(ch, h2, LABEL_REPLY, ch->hello, NET_CHANNEL_HELLO_SIZE, r, 65, NULL, 0);
    crypto_sign_detached(r + 65, NULL, h2, sizeof h2, ch->self.sk);
    memcpy(ch->out, r, NET_CHANNEL_REPLY_SIZE);
    ch->out_len = NET_CHANNEL_REPLY_SIZE;
    ch->state = ST_WAIT_AUTH;
    return NET_OK;
}

/* Initiator: REPLY -> AUTH, open. */
static int on_reply(net_channel *ch, const uint8_t *rec, size_t len, gossip_time_us now)
{
    if (len != NET_CHANNEL_REPLY_SIZE)
        return fail(ch, NET_REJECT_BAD_RECORD);
    const uint8_t *e_r = rec + 1, *pk_r = rec + 33, *sig_r = rec + 65;
    uint8_t h2[32];
    keyed_hash(ch, h2, LABEL_REPLY, ch->hello, NET_CHANNEL_HELLO_SIZE, rec, 65, NULL, 0);
    if (crypto_sign_verify_detached(sig_r, h2, sizeof h2, pk_r) != 0)
        return fail(ch, NET_REJECT_BAD_SIGNATURE);
    int rc = admit_peer(ch, pk_r);
    if (rc)
        return rc;
    uint8_t kx_rx[32], kx_tx[32];
    if (crypto_kx_client_session_keys(kx_rx, kx_tx, ch->eph_pk, ch->eph_sk, e_r) != 0) {
        sodium_memzero(kx_rx, 32);
        sodium_memzero(kx_tx, 32);
        return fail(ch, NET_REJECT_BAD_KEY);
    }
    memcpy(ch->reply, rec, NET_CHANNEL_REPLY_SIZE);
    uint8_t *a = ch->out;
    a[0] = NET_REC_AUTH;
    memcpy(a + 1, ch->self.pk, NET_PUBLIC_KEY_SIZE);
    uint8_t h3[32];
    keyed_hash(ch, h3, LABEL_AUTH, ch->hello, NET_CHANNEL_HELLO_SIZE, ch->reply,
               NET_CHANNEL_REPLY_SIZE, a, 33);
    crypto_sign_detached(a + 33, NULL, h3, sizeof h3, ch->self.sk);
    ch->out_len = NET_CHANNEL_AUTH_SIZE;
    open_session(ch, kx_rx, kx_tx, h3, now);
    return NET_OK;
}

/* Responder: AUTH -> open. */
static int on_auth(net_channel *ch, const uint8_t *rec, size_t len, gossip_time_us now)
{
    if (len != NET_CHANNEL_AUTH_SIZE)
        return fail(ch, NET_REJECT_BAD_RECORD);
    const uint8_t *pk_i = rec + 1, *sig_i = rec + 33;
    uint8_t h3[32];
    keyed_hash(ch, h3, LABEL_AUTH, ch->hello, NET_CHANNEL_HELLO_SIZE, ch->reply,
               NET_CHANNEL_REPLY_SIZE, rec, 33);
    if (crypto_sign_verify_detached(sig_i, h3, sizeof h3, pk_i) != 0)
        return fail(ch, NET_REJECT_BAD_SIGNATURE);
    int rc = admit_peer(ch, pk_i);
    if (rc)
        return rc;
    uint8_t kx_rx[32], kx_tx[32];
    if (crypto_kx_server_session_keys(kx_rx, kx_tx, ch->eph_pk, ch->eph_sk, ch->hello + 2) != 0) {
        sodium_memzero(kx_rx, 32);
        sodium_memzero(kx_tx, 32);
        return fail(ch, NET_REJECT_BAD_KEY);
    }
    open_session(ch, kx_rx, kx_tx, h3, now);
    return NET_OK;
}

static void make_nonce(uint8_t nonce[12], uint64_t counter)
{
    memset(nonce, 0, 4);
    for (int i = 0; i < 8; i++)
        nonce[4 + i] = (uint8_t)(counter >> (56 - 8 * i));
}

/* k(e+1) = KDF(k(e), subkey id e+1). */
static void ratchet(uint8_t next[NET_CHANNEL_KEY_SIZE], const uint8_t key[NET_CHANNEL_KEY_SIZE],
                    uint32_t next_epoch)
{
    crypto_kdf_derive_from_key(next, NET_CHANNEL_KEY_SIZE, next_epoch, KDF_CONTEXT, key);
}

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

static int on_data(net_channel *ch, uint8_t *rec, size_t len, uint8_t **plain, size_t *plain_len)
{
    if (len < NET_CHANNEL_OVERHEAD) {
        count(ch, NET_REJECT_TRUNCATED);
        return NET_EREJECT;
    }
    uint32_t epoch =
        ((uint32_t)rec[1] << 24) | ((uint32_t)rec[2] << 16) | ((uint32_t)rec[3] << 8) | rec[4];
    uint64_t counter = 0;
    for (int i = 0; i < 8; i++)
        counter = (counter << 8) | rec[5 + i];
    uint8_t next[NET_CHANNEL_KEY_SIZE];
    const uint8_t *key;
    int advance = 0;
    if (epoch == ch->rx_epoch) {
        int why = window_check(ch, counter);
        if (why) {
            count(ch, (net_reject)why);
            return NET_EREJECT;
        }
        key = ch->rx_key;
    } else if (ch->rx_epoch != UINT32_MAX && epoch == ch->rx_epoch + 1) {
        ratchet(next, ch->rx_key, epoch);
        key = next;
        advance = 1;
    } else {
        count(ch, NET_REJECT_BAD_EPOCH);
        return NET_EREJECT;
    }
    uint8_t nonce[12];
    make_nonce(nonce, counter);
    size_t clen = len - NET_CHANNEL_OVERHEAD;
    uint8_t *c = rec + NET_CHANNEL_HEADER_SIZE;
    /* Verifies the tag before writing anything: on failure rec is intact. */
    int bad = crypto_aead_chacha20poly1305_ietf_decrypt_detached(
        c, NULL, c, clen, c + clen, rec, NET_CHANNEL_HEADER_SIZE, nonce, key);
    if (bad) {
        sodium_memzero(next, sizeof next);
        count(ch, NET_REJECT_AUTH);
        return NET_EREJECT;
    }
    if (advance) {
        memcpy(ch->rx_key, next, sizeof next);
        sodium_memzero(next, sizeof next);
        ch->rx_epoch = epoch;
        ch->rx_any = 0;
    }
    window_mark(ch, counter);
    *plain = c;
    *plain_len = clen;
    return NET_OK;
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
    switch (ch->state) {
    case ST_WAIT_HELLO:
        if (rec[0] != NET_REC_HELLO)
            return fail(ch, rec[0] >= NET_REC_HELLO && rec[0] <= NET_REC_DATA
                                ? NET_REJECT_BAD_STATE
                                : NET_REJECT_BAD_RECORD);
        return on_hello(ch, rec, len);
    case ST_WAIT_REPLY:
        if (rec[0] != NET_REC_REPLY)
            return fail(ch, rec[0] >= NET_REC_HELLO && rec[0] <= NET_REC_DATA
                                ? NET_REJECT_BAD_STATE
                                : NET_REJECT_BAD_RECORD);
        return on_reply(ch, rec, len, now);
    case ST_WAIT_AUTH:
        if (rec[0] != NET_REC_AUTH)
            return fail(ch, rec[0] >= NET_REC_HELLO && rec[0] <= NET_REC_DATA
                                ? NET_REJECT_BAD_STATE
                                : NET_REJECT_BAD_RECORD);
        return on_auth(ch, rec, len, now);
    case ST_OPEN:
        if (rec[0] != NET_REC_DATA) {
            count(ch, rec[0] >= NET_REC_HELLO && rec[0] < NET_REC_DATA ? NET_REJECT_BAD_STATE
                                                                       : NET_REJECT_BAD_RECORD);
            return NET_EREJECT;
        }
        return on_data(ch, rec, len, plain, plain_len);
    case ST_FAILED:
        break;
    }
    return NET_EFAILED;
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
    /* A clock that went backwards never triggers a rekey by time. */
    int old = now > ch->tx_epoch_start && now - ch->tx_epoch_start >= ch->rekey_interval_us;
    if (ch->tx_counter >= ch->rekey_frames || old) {
        if (ch->tx_epoch == UINT32_MAX)
            return fail(ch, NET_REJECT_BAD_EPOCH);
        uint8_t next[NET_CHANNEL_KEY_SIZE];
        ratchet(next, ch->tx_key, ch->tx_epoch + 1);
        memcpy(ch->tx_key, next, sizeof next);
        sodium_memzero(next, sizeof next);
        ch->tx_epoch++;
        ch->tx_counter = 0;
        ch->tx_epoch_start = now;
    }
    uint64_t counter = ch->tx_counter++;
    out[0] = NET_REC_DATA;
    out[1] = (uint8_t)(ch->tx_epoch >> 24);
    out[2] = (uint8_t)(ch->tx_epoch >> 16);
    out[3] = (uint8_t)(ch->tx_epoch >> 8);
    out[4] = (uint8_t)ch->tx_epoch;
    for (int i = 0; i < 8; i++)
        out[5 + i] = (uint8_t)(counter >> (56 - 8 * i));
    uint8_t nonce[12];
    make_nonce(nonce, counter);
    if (len && plain != c)
        memmove(c, plain, len);
    crypto_aead_chacha20poly1305_ietf_encrypt_detached(
        c, c + len, NULL, c, len, out, NET_CHANNEL_HEADER_SIZE, NULL, nonce, ch->tx_key);
    *out_len = len + NET_CHANNEL_OVERHEAD;
    return NET_OK;
}

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

int net_channel_established(const net_channel *ch)
{
    return ch && ch->state == ST_OPEN;
}

int net_channel_failed(const net_channel *ch)
{
    return ch && ch->state == ST_FAILED;
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
