/* net/channel — the secure channel between two agents, sans-IO.
 *
 * Records in, records out, time as an argument: no socket, no clock, no
 * thread inside, so every rule below is unit-tested without a network
 * (tests/test_channel.c). The transport (net/transport) frames records on a
 * stream with a 4-byte length prefix; the channel never sees that prefix.
 *
 * Handshake (three records; byte layout in docs/SECURITY.md):
 *   I -> R  HELLO  version, ephemeral X25519 key e_I, MAC keyed with the
 *                  network key K (a peer without K is refused at once,
 *                  before R spends a signature or reveals its identity)
 *   R -> I  REPLY  e_R, R's Ed25519 key, R's signature over
 *                  H2 = BLAKE2b-256_K(label || HELLO || REPLY-prefix)
 *   I -> R  AUTH   I's Ed25519 key, I's signature over
 *                  H3 = BLAKE2b-256_K(label || HELLO || REPLY || AUTH-prefix)
 * The transcript hashes are keyed with K, so a peer without K can neither
 * produce nor verify a signature. The session keys are crypto_kx's per
 * direction keys from (e_I, e_R), each passed through BLAKE2b-256_K together
 * with H3, so they are bound to both identities, both ephemeral keys and K.
 * Ephemeral secrets and kx outputs are wiped as soon as they are used.
 *
 * Data records: type, key epoch (u32), counter (u64), then the frame sealed
 * with ChaCha20-Poly1305-IETF; nonce = 0x00000000 || counter (big-endian),
 * associated data = the 13 header bytes. Each direction has its own key,
 * epoch and counter. The receiver keeps a sliding replay window of
 * NET_CHANNEL_WINDOW counters: a counter already seen, or older than the
 * window, is refused. Reordering inside the window is accepted.
 *
 * Rekey: the sender moves to epoch e+1 after rekey_frames frames or
 * rekey_interval_us, with k(e+1) = crypto_kdf(k(e), subkey e+1) and the old
 * key wiped; the receiver follows when a frame of epoch e+1 authenticates
 * under the derived key (both sides switch in step, no extra message). The
 * counter restarts at 0 in each epoch. Frames of an older epoch are refused
 * (their key no longer exists), so reordering across a rekey is not
 * tolerated; over TCP, the only transport used, nothing is reordered.
 *
 * Failures: a bad handshake record fails the channel for good
 * (NET_EFAILED: close the connection and penalise the address); a bad data
 * record is dropped (NET_EREJECT) and the channel stays usable, so the
 * channel also suits an unordered datagram carrier. Every refusal is counted
 * under one net_reject cause (net_channel_rejects).
 *
 * Ownership: the channel copies nothing from its config except the keys and
 * the allow-list pointer, which must outlive the channel.
 */
#ifndef NET_CHANNEL_H
#define NET_CHANNEL_H

#include <stddef.h>
#include <stdint.h>

#include "gossip/env.h"
#include "net/net.h"

#define NET_CHANNEL_VERSION 1u

/* Record types (first byte of every record). */
enum {
    NET_REC_HELLO = 0x01,
    NET_REC_REPLY = 0x02,
    NET_REC_AUTH = 0x03,
    NET_REC_DATA = 0x04,
};

#define NET_CHANNEL_KEY_SIZE   32u
#define NET_CHANNEL_MAC_SIZE   32u
#define NET_CHANNEL_SIG_SIZE   64u
#define NET_CHANNEL_HELLO_SIZE (1u + 1u + 32u + NET_CHANNEL_MAC_SIZE)                  /* 66 */
#define NET_CHANNEL_REPLY_SIZE (1u + 32u + NET_PUBLIC_KEY_SIZE + NET_CHANNEL_SIG_SIZE) /* 129 */
#define NET_CHANNEL_AUTH_SIZE  (1u + NET_PUBLIC_KEY_SIZE + NET_CHANNEL_SIG_SIZE)       /* 97 */
/* The largest handshake record: the transport's receive limit until the
 * handshake is done, so an unauthenticated peer can never make us allocate
 * more than this. */
#define NET_CHANNEL_HS_MAX NET_CHANNEL_REPLY_SIZE

#define NET_CHANNEL_HEADER_SIZE 13u /* type(1) epoch(4) counter(8) */
#define NET_CHANNEL_TAG_SIZE    16u /* Poly1305 */
#define NET_CHANNEL_OVERHEAD    (NET_CHANNEL_HEADER_SIZE + NET_CHANNEL_TAG_SIZE)

/* Replay window in counters. 1024: over TCP nothing reorders, so the window
 * only matters for a datagram carrier, where 1024 frames in flight covers a
 * 1 GB/s link with 1 ms of jitter at 1 KiB frames; it costs 136 bytes. */
#define NET_CHANNEL_WINDOW 1024u
_Static_assert(NET_CHANNEL_WINDOW % 64u == 0, "window is whole 64-bit words");

/* Rekey bounds. ChaCha20-Poly1305 with a 64-bit counter nonce never runs out
 * of nonces within an epoch; rekeying is for forward secrecy inside a long
 * session: a key that leaks exposes at most 2^20 frames (1 Mi frames, 16 GiB
 * at the 16 KiB typical frame) or 10 minutes of one direction. */
#define NET_CHANNEL_REKEY_FRAMES_DEFAULT      (1ull << 20)
#define NET_CHANNEL_REKEY_INTERVAL_DEFAULT_US (600ull * 1000000ull)
/* A handshake is 1.5 round trips; 5 s covers a slow WAN link and a loaded
 * host many times over while bounding how long a silent peer holds a slot. */
#define NET_CHANNEL_HANDSHAKE_TIMEOUT_DEFAULT_US (5ull * 1000000ull)
/* Most keys one allow-list may hold (a cluster of GOSSIP_MEMBERS_MAX). */
#define NET_CHANNEL_ALLOW_MAX 16384u

typedef struct net_channel net_channel;

typedef struct net_channel_config {
    const net_identity *self;   /* our identity (copied) */
    const uint8_t *network_key; /* NET_NETWORK_KEY_SIZE bytes (copied) */
    /* Allow-list of Ed25519 public keys (allow_n * 32 bytes, kept by
     * pointer, must outlive the channel or be replaced first with
     * net_channel_set_allow). NULL: no allow-list, any holder of the network
     * key is admitted. Non-NULL: only the allow_n listed keys are admitted;
     * allow_n = 0 admits nobody (an allow-list whose every key was removed
     * shuts everyone out, it never opens the door). */
    const uint8_t *allow;
    size_t allow_n;
    int initiator;                 /* 1: we dialed and send HELLO; 0: we accepted */
    uint64_t expect_peer;          /* initiator: the node id we meant to reach; 0 = any */
    uint64_t rekey_frames;         /* 0 = NET_CHANNEL_REKEY_FRAMES_DEFAULT */
    uint64_t rekey_interval_us;    /* 0 = NET_CHANNEL_REKEY_INTERVAL_DEFAULT_US */
    uint64_t handshake_timeout_us; /* 0 = NET_CHANNEL_HANDSHAKE_TIMEOUT_DEFAULT_US */
} net_channel_config;

/* Create a channel at time now. An initiator has its HELLO ready for
 * net_channel_poll_send. Errors: NET_EINVAL (missing key/identity,
 * allow_n > NET_CHANNEL_ALLOW_MAX), NET_ENOMEM, NET_EIO (libsodium). */
int net_channel_create(net_channel **out, const net_channel_config *cfg, gossip_time_us now);
/* Wipe every secret and free. NULL is fine. */
void net_channel_destroy(net_channel *ch);

/* Pull the next handshake record to send: 1 and (*rec, *len) valid until the
 * next call on ch, or 0 when there is nothing to send. */
int net_channel_poll_send(net_channel *ch, const uint8_t **rec, size_t *len);

/* Feed one whole received record. rec is decrypted in place. On NET_OK
 * either a handshake record was consumed (*plain = NULL, *plain_len = 0;
 * check net_channel_poll_send) or a data frame was opened (*plain points into
 * rec, *plain_len bytes, possibly 0). Errors: NET_EREJECT (data record
 * dropped and counted; channel usable), NET_EFAILED (handshake refused and
 * counted, or the channel had failed before; close it), NET_EINVAL. */
int net_channel_recv(net_channel *ch, uint8_t *rec, size_t len, gossip_time_us now, uint8_t **plain,
                     size_t *plain_len);

/* Seal len bytes of plain into out (cap >= len + NET_CHANNEL_OVERHEAD);
 * plain may be exactly out + NET_CHANNEL_HEADER_SIZE (in place). Rekeys
 * first when a bound is reached. Errors: NET_ESTATE (not established),
 * NET_ESPACE, NET_EINVAL, NET_EFAILED (epoch space exhausted). */
int net_channel_seal(net_channel *ch, const uint8_t *plain, size_t len, uint8_t *out, size_t cap,
                     size_t *out_len, gossip_time_us now);

/* Fail the handshake if its deadline has passed (counted as
 * handshake_timeout). NET_OK if established or still in time, NET_EFAILED. */
int net_channel_check_timeout(net_channel *ch, gossip_time_us now);
/* Handshake deadline, or GOSSIP_TIME_NEVER once established/failed. */
gossip_time_us net_channel_deadline(const net_channel *ch);

/* Replace the allow-list (same meaning as in net_channel_config; the old
 * pointer is no longer used after this returns). An established channel is
 * not re-checked here: net_channel_allowed tells the caller whether its
 * peer still is. Errors: NET_EINVAL (allow_n > NET_CHANNEL_ALLOW_MAX, or
 * allow_n without allow). */
int net_channel_set_allow(net_channel *ch, const uint8_t *allow, size_t allow_n);
/* 1 if pk is admitted by ch's current allow-list (always 1 without one). */
int net_channel_allowed(const net_channel *ch, const uint8_t pk[NET_PUBLIC_KEY_SIZE]);

int net_channel_established(const net_channel *ch);
int net_channel_failed(const net_channel *ch);
/* Peer's node id and public key once established (0 / NULL before). */
uint64_t net_channel_peer(const net_channel *ch);
const uint8_t *net_channel_peer_key(const net_channel *ch);
/* Key epochs (for tests and /status). */
uint32_t net_channel_tx_epoch(const net_channel *ch);
uint32_t net_channel_rx_epoch(const net_channel *ch);
/* Refusals counted under cause, and the cause of the most recent one. */
uint64_t net_channel_rejects(const net_channel *ch, int cause);
int net_channel_last_reject(const net_channel *ch);

#endif
