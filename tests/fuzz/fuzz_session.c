/* fuzz_session — libFuzzer target for net/channel's data records past the
 * MAC, across rekeys (docs/FUZZING.md).
 *
 * Setup per input: two channels I (identity A) and R (identity B) complete
 * a real handshake, so both hold genuine session keys. Then the input
 * seals frames on either side and delivers them in any order, replayed,
 * dropped, altered or mixed with garbage and handshake records, while small
 * rekey bounds make the keys move on every few frames. A rekey is a fresh
 * Diffie-Hellman exchange started by I (REKEY_INIT, answered by REKEY_ACK,
 * both sealed like data); the target carries those control records at once
 * and in order, as the transport does, and the model predicts when I
 * starts one. A reference model of both ends (sender counters and epochs;
 * receiver epoch and replay window) predicts every outcome.
 *
 * Input: byte 0 = options: bits 0-1 rekey after 2^20, 2, 4 or 16 frames;
 * bits 2-3 rekey after 600 s, 1 ms, 50 ms or 1 s. Then ops, each one byte
 * (op % 8, direction d = (op >> 3) & 1: 0 is I -> R, 1 is R -> I) and its
 * operands:
 *   0 n ...   seal the next n % 64 input bytes, keep the record (last 32)
 *   1 k       deliver kept record k
 *   2 k p q   deliver kept record k with bit q % 8 of byte p flipped
 *   3 k n     deliver kept record k cut to n bytes (n >= length: one added)
 *   4 n ...   deliver the next n input bytes as a record
 *   5 t       advance the clock by t ms
 *   6 n       seal (n % 64 + 1) * 16 frames that are lost
 *   7 k       k < 128: deliver handshake record k % 3 (HELLO, REPLY, CONFIRM of
 *             setup); k >= 128: forge, as the peer holding the session keys
 *             (net_channel_debug_keys), a record of the next n % 128 input
 *             bytes (operand n follows) sealed under the sender's current key
 *             one counter ahead: a DATA record (k even) must be treated
 *             exactly as a genuine one (which checks the forging itself);
 *             a REKEY record with that content
 *             (k odd: authenticated garbage past the MAC, into the rekey
 *             parser and its signature check) must be refused, counted once
 *             and answered with nothing: dropped (NET_EREJECT, no epoch
 *             moved, still open) or the channel failed for good (NET_EFAILED,
 *             cause rekey, nothing opens after); the input ends there
 * Properties, any violation aborts:
 *   - every sealed record carries the epoch and counter the model predicts
 *     (counter +1 per frame or control record; I starts a rekey exactly
 *     when a bound is reached, and both move to epoch +1, counter 0, once
 *     the ACK is through);
 *   - a genuine record is accepted exactly when the model says so (current
 *     epoch: not seen, not below the 1024-counter window; or the next
 *     epoch), and then yields exactly the sealed bytes; otherwise it is
 *     refused with the model's cause (REPLAY, TOO_OLD, BAD_EPOCH);
 *   - anything altered, cut, extended, random or a handshake record is
 *     refused (NET_EREJECT), counted once, and changes nothing: the model
 *     stays valid and the channel stays open;
 *   - the receive epoch reported is the model's after every op;
 *   - at the end a fresh frame each way gets the model's verdict.
 */
#define _GNU_SOURCE
#include "tests/fuzz/fuzz_util.h"

#include <sodium.h>

#include "net/channel.h"
#include "net/net.h"

#define KEEP_MAX     32
#define PAYLOAD_MAX  64
#define FORGE_MAX    127 /* forged records: up to 127 bytes of content */
#define REC_MAX      (FORGE_MAX + NET_CHANNEL_OVERHEAD)
#define SEAL_BUDGET  20000
#define REKEY_COST   50 /* a rekey (two signatures, two X25519) against one seal */
#define ACCEPTED_MAX 4096

typedef struct kept {
    size_t len;
    uint8_t b[REC_MAX];
    uint8_t plain[FORGE_MAX];
    size_t plain_len;
} kept;

typedef struct model {
    /* sender */
    uint32_t tx_epoch;
    uint64_t tx_counter;
    gossip_time_us tx_start;
    /* receiver */
    uint32_t rx_epoch;
    int any;
    uint64_t top;
    uint64_t accepted[ACCEPTED_MAX];
    size_t n_accepted;
} model;

typedef struct dir {
    net_channel *tx, *rx;
    model m;
    kept keep[KEEP_MAX];
    int n_keep;
} dir;

static net_identity id_a, id_b;
static uint8_t key[NET_NETWORK_KEY_SIZE];
static dir dirs[2];
static uint8_t hs_rec[3][NET_CHANNEL_HS_MAX];
static size_t hs_len[3];
static uint64_t rekey_frames, rekey_interval_us;

static void setup_once(void)
{
    static int done;
    if (done)
        return;
    FUZZ_CHECK(net_init() == NET_OK);
    net_identity *ids[2] = {&id_a, &id_b};
    for (int i = 0; i < 2; i++) {
        uint8_t seed[crypto_sign_SEEDBYTES], pk[NET_PUBLIC_KEY_SIZE], sk[NET_SECRET_KEY_SIZE];
        memset(seed, 0x20 + i, sizeof seed);
        FUZZ_CHECK(crypto_sign_seed_keypair(pk, sk, seed) == 0);
        FUZZ_CHECK(net_identity_from_secret(ids[i], sk) == NET_OK);
    }
    memset(key, 0x5A, sizeof key);
    done = 1;
}

static uint64_t rejects_total(const net_channel *c)
{
    uint64_t n = 0;
    for (int k = 0; k < NET_REJECT_COUNT; k++)
        n += net_channel_rejects(c, k);
    return n;
}

/* Move one handshake record from a to b, keeping a copy. */
static void hop(net_channel *a, net_channel *b, int slot)
{
    const uint8_t *r;
    size_t len;
    FUZZ_CHECK(net_channel_poll_send(a, &r, &len) == 1 && len <= NET_CHANNEL_HS_MAX);
    memcpy(hs_rec[slot], r, len);
    hs_len[slot] = len;
    uint8_t buf[NET_CHANNEL_HS_MAX];
    memcpy(buf, r, len);
    uint8_t *plain;
    size_t pl;
    FUZZ_CHECK(net_channel_recv(b, buf, len, 0, &plain, &pl) == NET_OK && plain == NULL);
}

static uint32_t rec_epoch(const uint8_t *b)
{
    return (uint32_t)b[1] << 24 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 8 | b[4];
}

static uint64_t rec_counter(const uint8_t *b)
{
    uint64_t c = 0;
    for (int i = 0; i < 8; i++)
        c = c << 8 | b[5 + i];
    return c;
}

static void accept(model *m, uint32_t e, uint64_t c);
static int verdict(const model *m, uint32_t e, uint64_t c);
static int rekeys; /* rekeys in this input (they cost budget) */

/* I starts a rekey when its epoch is old, or either direction carried
 * rekey_frames frames in the current epoch (the model of channel.c's
 * rekey_due). dirs[0] is I -> R (I's sender, R's receiver), dirs[1] the
 * reverse. */
static int rekey_wanted(gossip_time_us now)
{
    const model *tx = &dirs[0].m, *rx = &dirs[1].m;
    int old = now > tx->tx_start && now - tx->tx_start >= rekey_interval_us;
    int many = tx->tx_counter >= rekey_frames ||
               (rx->rx_epoch == tx->tx_epoch && rx->any && rx->top >= rekey_frames);
    return old || many;
}

/* Move one control record from channel `from` (sender model ms) to `to`
 * (receiver model mr): header as predicted, accepted, nothing delivered. */
static void carry_control(net_channel *from, model *ms, net_channel *to, model *mr,
                          gossip_time_us now)
{
    const uint8_t *r;
    size_t len;
    FUZZ_CHECK(net_channel_poll_send(from, &r, &len) == 1);
    FUZZ_CHECK(r[0] == NET_REC_REKEY && len == NET_CHANNEL_REKEY_SIZE);
    FUZZ_CHECK(rec_epoch(r) == ms->tx_epoch && rec_counter(r) == ms->tx_counter);
    ms->tx_counter++;
    uint8_t buf[NET_CHANNEL_REKEY_SIZE];
    memcpy(buf, r, len);
    uint32_t e = rec_epoch(buf);
    uint64_t c = rec_counter(buf);
    FUZZ_CHECK(verdict(mr, e, c) < 0);
    uint8_t *plain = NULL;
    size_t pl = 0;
    FUZZ_CHECK(net_channel_recv(to, buf, len, now, &plain, &pl) == NET_OK && plain == NULL);
    accept(mr, e, c);
}

/* I emitted a REKEY_INIT (its counter already counted by the caller's
 * model): carry it to R, R's ACK back to I; both move to the next epoch. */
static void rekey_exchange(gossip_time_us now)
{
    model *mi = &dirs[0].m, *mr = &dirs[1].m;
    net_channel *i = dirs[0].tx, *r = dirs[0].rx;
    carry_control(i, mi, r, &dirs[0].m, now); /* INIT: I's sender, R's receiver */
    carry_control(r, mr, i, &dirs[1].m, now); /* ACK: R's sender, I's receiver */
    mr->tx_epoch++;
    mr->tx_counter = 0;
    mi->tx_epoch++;
    mi->tx_counter = 0;
    mi->tx_start = now;
    FUZZ_CHECK(net_channel_tx_epoch(i) == mi->tx_epoch && net_channel_tx_epoch(r) == mr->tx_epoch);
    const uint8_t *x;
    size_t xl;
    FUZZ_CHECK(net_channel_poll_send(i, &x, &xl) == 0 && net_channel_poll_send(r, &x, &xl) == 0);
    rekeys++;
}

/* Seal on direction d; check the header against the sender model. */
static void seal(dir *d, const uint8_t *plain, size_t n, gossip_time_us now, kept *out)
{
    model *m = &d->m;
    int from_i = d == &dirs[0];
    int rekey = from_i && rekey_wanted(now);
    /* The REKEY_INIT is sealed first, on the counter before the frame's. */
    uint64_t counter = m->tx_counter + (uint64_t)rekey;
    kept tmp;
    kept *k = out ? out : &tmp;
    FUZZ_CHECK(net_channel_seal(d->tx, plain, n, k->b, sizeof k->b, &k->len, now) == NET_OK);
    FUZZ_CHECK(k->len == n + NET_CHANNEL_OVERHEAD && k->b[0] == NET_REC_DATA);
    FUZZ_CHECK(rec_epoch(k->b) == m->tx_epoch && rec_counter(k->b) == counter);
    FUZZ_CHECK(net_channel_tx_epoch(d->tx) == m->tx_epoch);
    if (n)
        memcpy(k->plain, plain, n);
    k->plain_len = n;
    if (rekey) {
        /* carry_control expects the INIT's counter next: put it back. */
        m->tx_counter = counter - 1;
        rekey_exchange(now);
        /* the frame's own counter was in the old epoch: nothing to redo */
    } else {
        m->tx_counter = counter + 1;
        const uint8_t *x;
        size_t xl;
        FUZZ_CHECK(net_channel_poll_send(d->tx, &x, &xl) == 0);
    }
}

static int seen(const model *m, uint64_t c)
{
    for (size_t i = 0; i < m->n_accepted; i++)
        if (m->accepted[i] == c)
            return 1;
    return 0;
}

/* The model's verdict on a genuine record: -1 accept, else the cause. */
static int verdict(const model *m, uint32_t e, uint64_t c)
{
    if (e == m->rx_epoch) {
        if (m->any && c <= m->top) {
            if (m->top - c >= NET_CHANNEL_WINDOW)
                return NET_REJECT_TOO_OLD;
            if (seen(m, c))
                return NET_REJECT_REPLAY;
        }
        return -1;
    }
    if (m->rx_epoch != UINT32_MAX && e == m->rx_epoch + 1)
        return -1;
    return NET_REJECT_BAD_EPOCH;
}

static void accept(model *m, uint32_t e, uint64_t c)
{
    if (e != m->rx_epoch) {
        m->rx_epoch = e;
        m->any = 0;
        m->n_accepted = 0;
    }
    if (!m->any || c > m->top)
        m->top = c;
    m->any = 1;
    /* keep only counters still inside the window */
    size_t w = 0;
    for (size_t i = 0; i < m->n_accepted; i++)
        if (m->top - m->accepted[i] < NET_CHANNEL_WINDOW)
            m->accepted[w++] = m->accepted[i];
    m->n_accepted = w;
    FUZZ_CHECK(m->n_accepted < ACCEPTED_MAX);
    m->accepted[m->n_accepted++] = c;
}

/* Deliver a genuine kept record and compare with the model. */
static void deliver_genuine(dir *d, const kept *k, gossip_time_us now)
{
    uint8_t buf[REC_MAX];
    memcpy(buf, k->b, k->len);
    uint32_t e = rec_epoch(k->b);
    uint64_t c = rec_counter(k->b);
    int want = verdict(&d->m, e, c);
    uint64_t before = rejects_total(d->rx);
    uint8_t *plain = NULL;
    size_t pl = 0;
    int rc = net_channel_recv(d->rx, buf, k->len, now, &plain, &pl);
    if (want < 0) {
        FUZZ_CHECK(rc == NET_OK && plain != NULL && pl == k->plain_len);
        FUZZ_CHECK(pl == 0 || memcmp(plain, k->plain, pl) == 0);
        FUZZ_CHECK(rejects_total(d->rx) == before);
        accept(&d->m, e, c);
        /* A frame received by I may start a rekey (epoch age, frames). */
        const uint8_t *x;
        size_t xl;
        if (d == &dirs[1] && rekey_wanted(now))
            rekey_exchange(now);
        else
            FUZZ_CHECK(net_channel_poll_send(d->rx, &x, &xl) == 0);
    } else {
        FUZZ_CHECK(rc == NET_EREJECT && plain == NULL);
        FUZZ_CHECK(net_channel_last_reject(d->rx) == want);
        FUZZ_CHECK(rejects_total(d->rx) == before + 1);
    }
}

/* Deliver something that is not a genuine, fresh record: refused, counted
 * once, nothing changes. */
static void deliver_bad(dir *d, const uint8_t *b, size_t len, gossip_time_us now)
{
    uint8_t buf[REC_MAX + 256];
    FUZZ_CHECK(len <= sizeof buf);
    memcpy(buf, b, len);
    uint64_t before = rejects_total(d->rx);
    uint8_t *plain = NULL;
    size_t pl = 0;
    int rc = net_channel_recv(d->rx, buf, len, now, &plain, &pl);
    FUZZ_CHECK(rc == NET_EREJECT && plain == NULL);
    FUZZ_CHECK(rejects_total(d->rx) == before + 1);
    FUZZ_CHECK(net_channel_established(d->rx));
}

/* Seal a record of `type` holding plain[0..n) as direction d's sender
 * would, with its current send key (net_channel_debug_keys), one counter
 * ahead: what a peer holding the session keys can send. */
static void forge(const dir *d, uint8_t type, const uint8_t *plain, size_t n, kept *out)
{
    FUZZ_CHECK(n <= FORGE_MAX);
    uint8_t tx[NET_CHANNEL_KEY_SIZE], rx[NET_CHANNEL_KEY_SIZE];
    net_channel_debug_keys(d->tx, tx, rx);
    uint8_t *b = out->b;
    uint32_t e = d->m.tx_epoch;
    /* one past the sender's next counter: the one record it may still send
     * before the input ends (a rekey's INIT or ACK, carried at once) keeps
     * its own, fresh, counter */
    uint64_t c = d->m.tx_counter + 1;
    b[0] = type;
    for (int k = 0; k < 4; k++)
        b[1 + k] = (uint8_t)(e >> (24 - 8 * k));
    for (int k = 0; k < 8; k++)
        b[5 + k] = (uint8_t)(c >> (56 - 8 * k));
    uint8_t nonce[12] = {0};
    memcpy(nonce + 4, b + 5, 8);
    if (n)
        memcpy(b + NET_CHANNEL_HEADER_SIZE, plain, n);
    FUZZ_CHECK(crypto_aead_chacha20poly1305_ietf_encrypt_detached(
                   b + NET_CHANNEL_HEADER_SIZE, b + NET_CHANNEL_HEADER_SIZE + n, NULL,
                   b + NET_CHANNEL_HEADER_SIZE, n, b, NET_CHANNEL_HEADER_SIZE, NULL, nonce,
                   tx) == 0);
    sodium_memzero(tx, sizeof tx);
    sodium_memzero(rx, sizeof rx);
    out->len = n + NET_CHANNEL_OVERHEAD;
    out->plain_len = n;
    if (n)
        memcpy(out->plain, plain, n);
}

/* A REKEY record with forged content from an authenticated peer: refused
 * and counted, nothing sent in answer; dropped with nothing changed, or the
 * channel failed for good. */
static void forged_rekey(dir *d, const kept *f, gossip_time_us now)
{
    uint8_t buf[sizeof f->b];
    memcpy(buf, f->b, f->len);
    uint32_t tx0 = net_channel_tx_epoch(d->rx), rx0 = net_channel_rx_epoch(d->rx);
    uint64_t before = rejects_total(d->rx);
    uint8_t *plain = NULL;
    size_t pl = 0;
    int rc = net_channel_recv(d->rx, buf, f->len, now, &plain, &pl);
    FUZZ_CHECK((rc == NET_EREJECT || rc == NET_EFAILED) && plain == NULL);
    FUZZ_CHECK(rejects_total(d->rx) == before + 1);
    if (rc == NET_EREJECT) {
        /* dropped: the channel goes on exactly as before */
        FUZZ_CHECK(net_channel_established(d->rx));
        FUZZ_CHECK(net_channel_tx_epoch(d->rx) == tx0 && net_channel_rx_epoch(d->rx) == rx0);
    } else {
        /* refused for good (an authenticated peer sent a bad rekey; the
         * record may have been the first of the new epoch, moving rx):
         * nothing opens any more */
        FUZZ_CHECK(net_channel_failed(d->rx) && !net_channel_established(d->rx));
        FUZZ_CHECK(net_channel_last_reject(d->rx) == NET_REJECT_REKEY);
        kept g;
        forge(d, NET_REC_DATA, (const uint8_t *)"after", 5, &g);
        memcpy(buf, g.b, g.len);
        FUZZ_CHECK(net_channel_recv(d->rx, buf, g.len, now, &plain, &pl) == NET_EFAILED &&
                   plain == NULL);
    }
    const uint8_t *x;
    size_t xl;
    FUZZ_CHECK(net_channel_poll_send(d->rx, &x, &xl) == 0);
}

/* 1 if b[0..len) is byte for byte a record the other side sealed. */
static int is_kept(const dir *d, const uint8_t *b, size_t len)
{
    for (int i = 0; i < d->n_keep; i++)
        if (d->keep[i].len == len && !memcmp(d->keep[i].b, b, len))
            return 1;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup_once();
    if (size < 1)
        return 0;
    static const uint64_t frames_opt[] = {0, 2, 4, 16};
    static const uint64_t interval_opt[] = {0, 1000, 50000, 1000000};
    uint64_t cfg_frames = frames_opt[data[0] & 3], cfg_interval = interval_opt[(data[0] >> 2) & 3];
    rekey_frames = cfg_frames ? cfg_frames : NET_CHANNEL_REKEY_FRAMES_DEFAULT;
    rekey_interval_us = cfg_interval ? cfg_interval : NET_CHANNEL_REKEY_INTERVAL_DEFAULT_US;
    net_channel_config ci = {.self = &id_a,
                             .network_key = key,
                             .initiator = 1,
                             .rekey_frames = cfg_frames,
                             .rekey_interval_us = cfg_interval};
    net_channel_config cr = ci;
    cr.self = &id_b;
    cr.initiator = 0;
    net_channel *i = NULL, *r = NULL;
    FUZZ_CHECK(net_channel_create(&i, &ci, 0) == NET_OK &&
               net_channel_create(&r, &cr, 0) == NET_OK);
    hop(i, r, 0);
    hop(r, i, 1);
    hop(i, r, 2);
    FUZZ_CHECK(net_channel_established(i) && net_channel_established(r));
    memset(dirs, 0, sizeof dirs);
    dirs[0].tx = i, dirs[0].rx = r;
    dirs[1].tx = r, dirs[1].rx = i;

    gossip_time_us now = 0;
    size_t at = 1;
    int budget = SEAL_BUDGET;
    rekeys = 0;
#define NEXT() (at < size ? data[at++] : 0)
    for (int steps = 0; at < size && steps < 256; steps++) {
        int op = data[at] % 8;
        dir *d = &dirs[(data[at] >> 3) & 1];
        at++;
        switch (op) {
        case 0: {
            size_t n = NEXT() % PAYLOAD_MAX;
            if (n > size - at)
                n = size - at;
            kept *k = d->n_keep < KEEP_MAX ? &d->keep[d->n_keep++] : &d->keep[steps % KEEP_MAX];
            int before = rekeys;
            seal(d, data + at, n, now, k);
            at += n;
            budget -= 1 + REKEY_COST * (rekeys - before);
            break;
        }
        case 1: {
            int k = NEXT();
            if (d->n_keep)
                deliver_genuine(d, &d->keep[k % d->n_keep], now);
            break;
        }
        case 2:
        case 3: {
            int k = NEXT(), p = NEXT(), q = op == 2 ? NEXT() : 0;
            if (!d->n_keep)
                break;
            uint8_t buf[REC_MAX + 1];
            const kept *src = &d->keep[k % d->n_keep];
            size_t len = src->len;
            memcpy(buf, src->b, len);
            if (op == 2)
                buf[p % len] ^= (uint8_t)(1u << (q % 8));
            else if ((size_t)p < len)
                len = (size_t)p;
            else
                buf[len++] = (uint8_t)q;
            if (!is_kept(d, buf, len))
                deliver_bad(d, buf, len, now);
            break;
        }
        case 4: {
            size_t n = NEXT();
            if (n > size - at)
                n = size - at;
            if (!is_kept(d, data + at, n))
                deliver_bad(d, data + at, n, now);
            at += n;
            break;
        }
        case 5:
            now += (gossip_time_us)NEXT() * 1000u;
            break;
        case 6: {
            int n = (NEXT() % 64 + 1) * 16;
            for (int k = 0; k < n && budget > 0; k++) {
                int before = rekeys;
                seal(d, NULL, 0, now, NULL);
                budget -= 1 + REKEY_COST * (rekeys - before);
            }
            break;
        }
        default: {
            int k = NEXT();
            if (k < 128) {
                deliver_bad(d, hs_rec[k % 3], hs_len[k % 3], now);
                break;
            }
            size_t n = NEXT() % (FORGE_MAX + 1);
            if (n > size - at)
                n = size - at;
            int rekey_rec = k & 1;
            kept f;
            forge(d, rekey_rec ? NET_REC_REKEY : NET_REC_DATA, data + at, n, &f);
            at += n;
            if (!rekey_rec)
                deliver_genuine(d, &f, now); /* as if genuine */
            else
                forged_rekey(d, &f, now);
            /* The sender's own next record would now reuse the forged
             * counter (and a REKEY may have failed the channel): stop. */
            goto out;
        }
        }
        for (int x = 0; x < 2; x++)
            FUZZ_CHECK(net_channel_rx_epoch(dirs[x].rx) == dirs[x].m.rx_epoch);
    }
#undef NEXT
    for (int x = 0; x < 2; x++) {
        static const uint8_t last[] = "fresh";
        kept k;
        seal(&dirs[x], last, sizeof last, now, &k);
        deliver_genuine(&dirs[x], &k, now);
    }
out:
    net_channel_destroy(i);
    net_channel_destroy(r);
    return 0;
}
