/* net/channel — the secure channel between two agents, sans-IO.
 *
 * Records in, records out, time as an argument: no socket, no clock, no
 * thread inside, so every rule below is unit-tested without a network
 * (tests/test_channel.c). The transport (net/transport) frames records on a
 * stream with a 4-byte length prefix; the channel never sees that prefix.
 * Byte layouts and derivations: docs/SECURITY.md.
 *
 * Handshake (protocol version 2; K is a network key, H_K keyed BLAKE2b):
 *   I -> R  HELLO    flags, ephemeral X25519 key e_I, then sealed under a
 *                    key derived from K and e_I: I's Ed25519 key, a TAI64N
 *                    timestamp, the node id I means to reach (0 = any) and
 *                    I's signature over all of it.
 *   R -> I  REPLY    flags, e_R, then sealed under a key derived from the
 *                    key exchange (e_I, e_R): R's Ed25519 key and R's
 *                    signature over HELLO and REPLY.
 *   I -> R  CONFIRM  a tag under I's session key: I holds e_I's secret.
 * R checks, in this order and before any signature, key exchange or reply:
 * the HELLO opens under one of its network keys (bad_mac), names R or
 * nobody (wrong_peer), I's key is admitted (self, bad_key, not_allowed),
 * and the timestamp is newer than the greatest R accepted from that key
 * (net/seen) and not older than NET_CHANNEL_HELLO_AGE_MAX_S (stale_hello).
 * So a recorded HELLO replayed to anyone costs one small decryption and
 * draws no answer; a HELLO from a non-member, nothing at all. I's identity
 * is hidden from whoever lacks K, R's from whoever lacks e_I's secret.
 * R opens only on CONFIRM (key confirmation: the peer it talks to is the
 * one that signed the HELLO, now); I opens on REPLY.
 * Session keys: one per direction, H_K over a chain key that binds both
 * key exchange outputs, the whole transcript and both identities.
 *
 * Data records: type, epoch (u32), counter (u64), then the frame sealed
 * with ChaCha20-Poly1305-IETF; nonce = 0x00000000 || counter (big-endian),
 * associated data = the 13 header bytes. Auth-only sessions (both ends
 * asked for it in the handshake, see net_channel_config.auth_only) send
 * NET_REC_DATA_CLEAR records instead: the frame in clear, authenticated as
 * associated data of an AEAD over an empty plaintext (Poly1305 speed). A
 * channel never accepts a clear record in an encrypted session, nor the
 * reverse. The receiver keeps a sliding replay window of
 * NET_CHANNEL_WINDOW counters per epoch.
 *
 * Rekey with a fresh Diffie-Hellman exchange (not a hash ratchet): the
 * initiator starts one when an epoch is rekey_interval_us old or either
 * direction has carried rekey_frames frames in it: REKEY_INIT (a fresh
 * ephemeral key, signed with I's identity over the session transcript) and
 * REKEY_ACK (R's fresh key, signed likewise) travel inside the channel,
 * sealed like data. The keys of epoch e+1 are H_K of the previous chain key
 * and both new key exchange outputs; every older secret is wiped. So a key
 * (or the whole channel state) that leaks in epoch e exposes epoch e only:
 * not earlier epochs (one-way chain, wiped keys) and not later ones (fresh
 * ephemeral secrets, and the signatures stop an attacker holding epoch e's
 * keys from substituting its own). R moves its sending side to e+1 right
 * after the ACK; each side keeps the previous receive key until the first
 * record of the new epoch arrives. If no ACK arrives within
 * NET_CHANNEL_REKEY_TIMEOUT_US the initiator fails the channel (the
 * transport reconnects with a full handshake).
 *
 * Control records (CONFIRM, REKEY_INIT, REKEY_ACK) are produced inside
 * net_channel_recv and net_channel_seal: the caller must call
 * net_channel_poll_send after each of them and send what it returns.
 *
 * Failures: a bad handshake record fails the channel for good
 * (NET_EFAILED: close the connection and penalise the address); a bad data
 * record is dropped (NET_EREJECT) and the channel stays usable. Every
 * refusal is counted under one net_reject cause (net_channel_rejects).
 *
 * Ownership: the channel copies its identity and network keys; the
 * allow-list and the seen table are kept by pointer and must outlive the
 * channel (or be replaced with net_channel_set_allow).
 */
#ifndef NET_CHANNEL_H
#define NET_CHANNEL_H

#include <stddef.h>
#include <stdint.h>

#include "gossip/env.h"
#include "net/net.h"
#include "net/seen.h"

#define NET_CHANNEL_VERSION 2u

/* Record types (first byte of every record). */
enum {
    NET_REC_HELLO = 0x01,
    NET_REC_REPLY = 0x02,
    NET_REC_CONFIRM = 0x03,
    NET_REC_DATA = 0x04,
    NET_REC_REKEY = 0x05,      /* sealed like DATA; REKEY_INIT or REKEY_ACK inside */
    NET_REC_DATA_CLEAR = 0x06, /* auth-only sessions: frame in clear + tag */
};

/* HELLO and REPLY flags (one byte each). */
#define NET_CHANNEL_FLAG_AUTH_ONLY 0x01u

#define NET_CHANNEL_KEY_SIZE 32u
#define NET_CHANNEL_SIG_SIZE 64u
#define NET_CHANNEL_TAG_SIZE 16u /* Poly1305 */
/* HELLO: type, version, flags, e_I (35), then sealed: pk_I, TAI64N,
 * responder id, signature (116) + tag. */
#define NET_CHANNEL_HELLO_PREFIX 35u
#define NET_CHANNEL_HELLO_SEALED                                                                   \
    (NET_PUBLIC_KEY_SIZE + NET_SEEN_TS_SIZE + 8u + NET_CHANNEL_SIG_SIZE)
#define NET_CHANNEL_HELLO_SIZE                                                                     \
    (NET_CHANNEL_HELLO_PREFIX + NET_CHANNEL_HELLO_SEALED + NET_CHANNEL_TAG_SIZE) /* 167 */
/* REPLY: type, flags, e_R (34), then sealed: pk_R, signature (96) + tag. */
#define NET_CHANNEL_REPLY_PREFIX 34u
#define NET_CHANNEL_REPLY_SEALED (NET_PUBLIC_KEY_SIZE + NET_CHANNEL_SIG_SIZE)
#define NET_CHANNEL_REPLY_SIZE                                                                     \
    (NET_CHANNEL_REPLY_PREFIX + NET_CHANNEL_REPLY_SEALED + NET_CHANNEL_TAG_SIZE) /* 146 */
#define NET_CHANNEL_CONFIRM_SIZE (1u + NET_CHANNEL_TAG_SIZE)                     /* 17 */

#define NET_CHANNEL_HEADER_SIZE 13u /* type(1) epoch(4) counter(8) */
#define NET_CHANNEL_OVERHEAD    (NET_CHANNEL_HEADER_SIZE + NET_CHANNEL_TAG_SIZE)
/* REKEY_INIT / REKEY_ACK payload: kind, new epoch, ephemeral key, signature. */
#define NET_CHANNEL_REKEY_PAYLOAD (1u + 4u + 32u + NET_CHANNEL_SIG_SIZE)
#define NET_CHANNEL_REKEY_SIZE    (NET_CHANNEL_REKEY_PAYLOAD + NET_CHANNEL_OVERHEAD) /* 130 */

/* The largest handshake record: the transport's receive limit until the
 * handshake is done, so an unauthenticated peer can never make us allocate
 * more than this. */
#define NET_CHANNEL_HS_MAX NET_CHANNEL_HELLO_SIZE
_Static_assert(NET_CHANNEL_HS_MAX >= NET_CHANNEL_REPLY_SIZE &&
                   NET_CHANNEL_HS_MAX >= NET_CHANNEL_CONFIRM_SIZE,
               "HS_MAX bounds every handshake record");
/* The largest record net_channel_poll_send returns. */
#define NET_CHANNEL_CONTROL_MAX NET_CHANNEL_HS_MAX
_Static_assert(NET_CHANNEL_CONTROL_MAX >= NET_CHANNEL_REKEY_SIZE, "rekey records fit");

/* Replay window in counters. 1024: over TCP nothing reorders, so the window
 * only matters for a datagram carrier, where 1024 frames in flight covers a
 * 1 GB/s link with 1 ms of jitter at 1 KiB frames; it costs 136 bytes. */
#define NET_CHANNEL_WINDOW 1024u
_Static_assert(NET_CHANNEL_WINDOW % 64u == 0, "window is whole 64-bit words");

/* Rekey bounds. Every 2 minutes, as WireGuard: a key that leaks exposes at
 * most 2 minutes (or 2^20 frames, 16 GiB at the 16 KiB typical frame) of one
 * session. A rekey costs each side one signature, one verification and one
 * X25519 (~0.3 ms of CPU), nothing against 2 minutes of traffic. */
#define NET_CHANNEL_REKEY_FRAMES_DEFAULT      (1ull << 20)
#define NET_CHANNEL_REKEY_INTERVAL_DEFAULT_US (120ull * 1000000ull)
/* An initiator that sent REKEY_INIT and got no REKEY_ACK within 30 s fails
 * the channel: over TCP the ACK is lost only with the connection, and a
 * fresh handshake then gives fresh keys anyway. */
#define NET_CHANNEL_REKEY_TIMEOUT_US (30ull * 1000000ull)
/* A handshake is 1.5 round trips; 5 s covers a slow WAN link and a loaded
 * host many times over while bounding how long a silent peer holds a slot. */
#define NET_CHANNEL_HANDSHAKE_TIMEOUT_DEFAULT_US (5ull * 1000000ull)
/* Most keys one allow-list may hold (a cluster of GOSSIP_MEMBERS_MAX). */
#define NET_CHANNEL_ALLOW_MAX 16384u
/* Network keys accepted at once (rotation: old, new, and one spare). */
#define NET_CHANNEL_KEYS_MAX 4u
/* A HELLO whose timestamp is older than this (by the responder's wall
 * clock) is refused when the responder has no mark for its key (after a
 * restart or an eviction from net/seen). 10 minutes: hosts are expected to
 * run NTP; a host whose clock is more than 10 minutes behind its peers
 * cannot connect (and the responder counts stale_hello). */
#define NET_CHANNEL_HELLO_AGE_MAX_S 600u

typedef struct net_channel net_channel;

typedef struct net_channel_config {
    const net_identity *self; /* our identity (copied) */
    /* Network keys (copied): either one key in network_key, or a ring of
     * network_keys_n keys (NET_NETWORK_KEY_SIZE bytes each) in network_keys,
     * the first being the primary. An initiator uses the primary; a
     * responder accepts a HELLO under any key of the ring and the session
     * then runs under that key (net_channel_network_key). */
    const uint8_t *network_key;
    const uint8_t *network_keys;
    size_t network_keys_n;
    /* Allow-list of Ed25519 public keys (allow_n * 32 bytes, kept by
     * pointer, must outlive the channel or be replaced first with
     * net_channel_set_allow). NULL: no allow-list, any holder of the network
     * key is admitted. Non-NULL: only the allow_n listed keys are admitted;
     * allow_n = 0 admits nobody (an allow-list whose every key was removed
     * shuts everyone out, it never opens the door). */
    const uint8_t *allow;
    size_t allow_n;
    /* Responder: greatest HELLO timestamp per key (shared by every channel
     * of one endpoint, kept by pointer). NULL: no per-key check (tests). */
    net_seen *seen;
    /* Wall-clock time in ns since 1970: the initiator's HELLO timestamp
     * (TAI64N), the responder's reference for NET_CHANNEL_HELLO_AGE_MAX_S.
     * 0 on a responder: no age check. */
    uint64_t wall_ns;
    /* Ask for an auth-only session (frames authenticated, not encrypted).
     * The session is auth-only only if both ends ask; otherwise frames are
     * encrypted. */
    int auth_only;
    int initiator;                 /* 1: we dialed and send HELLO; 0: we accepted */
    uint64_t expect_peer;          /* initiator: the node id we meant to reach; 0 = any */
    uint64_t rekey_frames;         /* 0 = NET_CHANNEL_REKEY_FRAMES_DEFAULT */
    uint64_t rekey_interval_us;    /* 0 = NET_CHANNEL_REKEY_INTERVAL_DEFAULT_US */
    uint64_t handshake_timeout_us; /* 0 = NET_CHANNEL_HANDSHAKE_TIMEOUT_DEFAULT_US */
} net_channel_config;

/* Create a channel at time now. An initiator has its HELLO ready for
 * net_channel_poll_send. Errors: NET_EINVAL (missing key/identity,
 * network_keys_n > NET_CHANNEL_KEYS_MAX, allow_n > NET_CHANNEL_ALLOW_MAX),
 * NET_ENOMEM, NET_EIO (libsodium). */
int net_channel_create(net_channel **out, const net_channel_config *cfg, gossip_time_us now);
/* Wipe every secret and free. NULL is fine. */
void net_channel_destroy(net_channel *ch);

/* Pull the next record to send (handshake or control): 1 and (*rec, *len)
 * valid until the next call on ch, or 0 when there is nothing to send. */
int net_channel_poll_send(net_channel *ch, const uint8_t **rec, size_t *len);

/* Feed one whole received record. rec is decrypted in place. On NET_OK
 * either a handshake or control record was consumed (*plain = NULL,
 * *plain_len = 0; check net_channel_poll_send) or a data frame was opened
 * (*plain points into rec, *plain_len bytes, possibly 0). Errors:
 * NET_EREJECT (data record dropped and counted; channel usable), NET_EFAILED
 * (handshake or rekey refused and counted, or the channel had failed
 * before; close it), NET_EINVAL. */
int net_channel_recv(net_channel *ch, uint8_t *rec, size_t len, gossip_time_us now, uint8_t **plain,
                     size_t *plain_len);

/* Seal len bytes of plain into out (cap >= len + NET_CHANNEL_OVERHEAD);
 * plain may be exactly out + NET_CHANNEL_HEADER_SIZE (in place). May start
 * a rekey (check net_channel_poll_send). Errors: NET_ESTATE (not
 * established), NET_ESPACE, NET_EINVAL, NET_EFAILED (rekey timed out, or
 * epoch space exhausted; close the connection). */
int net_channel_seal(net_channel *ch, const uint8_t *plain, size_t len, uint8_t *out, size_t cap,
                     size_t *out_len, gossip_time_us now);

/* Sealing and opening in three steps, so that the AEAD, the only costly
 * part (~1 ms per MiB sealed), can run outside the caller's lock while
 * other records of the same channel are prepared or finished:
 *
 *   net_channel_seal_begin / net_channel_open_begin   (the channel; serialised)
 *   net_channel_crypt                                 (op and record only)
 *   net_channel_open_end                              (the channel; serialised)
 *
 * The same records, counters, checks and counted causes as
 * net_channel_seal and net_channel_recv, which are these steps run back to
 * back. A sealed record is complete once net_channel_crypt returns; records
 * must go on the wire in the order of their seal_begin (counter order, as
 * one sender does). A receiver must finish (open_end) each record before it
 * begins the next one: the replay window and the key epoch move in
 * open_end. The op holds a copy of a session key until net_channel_crypt
 * wipes it: keep it off shared memory, and wipe one that is dropped before
 * its crypt (sodium_memzero). */
typedef struct net_channel_op {
    uint8_t key[NET_CHANNEL_KEY_SIZE];
    uint8_t nonce[12];
    uint64_t counter;
    uint32_t epoch;
    size_t len; /* frame bytes (record minus NET_CHANNEL_OVERHEAD) */
    uint8_t type, open, advance, ok;
} net_channel_op;

/* Take the next counter and write the record header for len frame bytes
 * already at out + NET_CHANNEL_HEADER_SIZE (cap >= len +
 * NET_CHANNEL_OVERHEAD); *out_len is the record's length once
 * net_channel_crypt(op, out) has sealed it. May start a rekey (check
 * net_channel_poll_send). Errors: as net_channel_seal. */
int net_channel_seal_begin(net_channel *ch, size_t len, uint8_t *out, size_t cap, size_t *out_len,
                           gossip_time_us now, net_channel_op *op);
/* Check a received data record (DATA or DATA_CLEAR of an open channel)
 * before its AEAD. NET_OK: run net_channel_crypt(op, rec), then
 * net_channel_open_end. NET_EREJECT: dropped and counted. NET_ESTATE: not
 * such a record (a handshake or rekey record, or the channel is not open):
 * feed it to net_channel_recv instead. NET_EINVAL. */
int net_channel_open_begin(net_channel *ch, const uint8_t *rec, size_t len, net_channel_op *op);
/* The AEAD of a begun record, in place; wipes op's key. Touches nothing
 * but op and rec, so it may run on any thread without the channel. */
void net_channel_crypt(net_channel_op *op, uint8_t *rec);
/* Finish an opened record: as net_channel_recv for a data record (on NET_OK
 * *plain points into rec). A bad tag is NET_EREJECT (counted as auth);
 * so is a record whose epoch or counter no longer fits the channel. */
int net_channel_open_end(net_channel *ch, net_channel_op *op, uint8_t *rec, gossip_time_us now,
                         uint8_t **plain, size_t *plain_len);

/* Fail the handshake if its deadline has passed (counted as
 * handshake_timeout). NET_OK if established or still in time, NET_EFAILED. */
int net_channel_check_timeout(net_channel *ch, gossip_time_us now);
/* Handshake deadline, or GOSSIP_TIME_NEVER once established/failed. */
gossip_time_us net_channel_deadline(const net_channel *ch);
/* Shorten the handshake deadline to at most `deadline` (the transport does
 * so under pressure of unauthenticated connections). */
void net_channel_limit_deadline(net_channel *ch, gossip_time_us deadline);

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
/* 1 if the session is auth-only (both ends asked for it). */
int net_channel_auth_only(const net_channel *ch);
/* The network key the session runs under (NULL before the HELLO is
 * accepted on a responder). */
const uint8_t *net_channel_network_key(const net_channel *ch);
/* Peer's node id and public key once established (0 / NULL before). */
uint64_t net_channel_peer(const net_channel *ch);
const uint8_t *net_channel_peer_key(const net_channel *ch);
/* Key epochs (for tests and /status); both directions move together. */
uint32_t net_channel_tx_epoch(const net_channel *ch);
uint32_t net_channel_rx_epoch(const net_channel *ch);
/* Refusals counted under cause, and the cause of the most recent one. */
uint64_t net_channel_rejects(const net_channel *ch, int cause);
int net_channel_last_reject(const net_channel *ch);

/* Tests only: copy the current send and receive keys (to show that what
 * leaks in one epoch opens nothing of the next). */
void net_channel_debug_keys(const net_channel *ch, uint8_t tx[NET_CHANNEL_KEY_SIZE],
                            uint8_t rx[NET_CHANNEL_KEY_SIZE]);

#endif
