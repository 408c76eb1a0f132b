/* net/net — what every part of net/ shares: error codes, rejection causes,
 * the agent identity and the node id derived from it.
 *
 * Identity: an Ed25519 key pair (libsodium crypto_sign). The node id is the
 * first 8 bytes, read big-endian, of BLAKE2b-256 of the 32-byte public key
 * (docs/ARCHITECTURE.md). A node id is never 0; the one key in 2^64 whose
 * hash starts with eight zero bytes is unusable and net_node_id returns 0
 * for it so that callers can refuse it.
 *
 * Rejections: every frame, record or connection that net/ refuses is counted
 * under exactly one net_reject cause; net_reject_name gives the stable
 * snake_case name used as the `cause` label on /metrics.
 */
#ifndef NET_NET_H
#define NET_NET_H

#include <stddef.h>
#include <stdint.h>

#define NET_PUBLIC_KEY_SIZE  32u /* crypto_sign_PUBLICKEYBYTES */
#define NET_SECRET_KEY_SIZE  64u /* crypto_sign_SECRETKEYBYTES (seed || public key) */
#define NET_NETWORK_KEY_SIZE 32u /* the cluster admission key */

/* Error codes of net/; 0 is success. */
typedef enum net_err {
    NET_OK = 0,
    NET_EINVAL,    /* bad argument from the caller */
    NET_ENOMEM,    /* an allocation failed */
    NET_ESPACE,    /* an output buffer is too small */
    NET_ESTATE,    /* the call is not valid in the object's current state */
    NET_EREJECT,   /* input refused and counted; the object stays usable */
    NET_EFAILED,   /* the channel failed for good (handshake refused); close it */
    NET_ETOOBIG,   /* a frame exceeds the configured maximum */
    NET_EFULL,     /* a bounded queue or table is full; the item was dropped */
    NET_EBLOCKED,  /* the peer is cut off for now after repeated failures */
    NET_ENOTFOUND, /* no address is known for that node id */
    NET_EAGAIN,    /* nothing available right now */
    NET_EIO,       /* an NNG or operating-system call failed */
    NET_ECLOSED,   /* the transport is shutting down */
    NET_ERR_COUNT
} net_err;

const char *net_strerror(int err);

/* Why something from the network was refused (one counter per cause). */
typedef enum net_reject {
    /* handshake (net/channel) */
    NET_REJECT_BAD_RECORD = 0, /* unknown record type, wrong length or version */
    NET_REJECT_BAD_STATE,      /* a record that is not valid in this state */
    NET_REJECT_BAD_MAC,        /* hello not keyed with our network key */
    NET_REJECT_BAD_SIGNATURE,  /* transcript signature invalid (wrong key/network) */
    NET_REJECT_NOT_ALLOWED,    /* public key not on the allow-list */
    NET_REJECT_WRONG_PEER,     /* dialed node id does not match the key presented */
    NET_REJECT_SELF,           /* the peer presented our own public key */
    NET_REJECT_BAD_KEY,        /* degenerate public key (node id 0, weak kx point) */
    NET_REJECT_HANDSHAKE_TIMEOUT,
    NET_REJECT_STALE_HELLO, /* HELLO not newer than the last from that key, or too old: a replay */
    /* data frames (net/channel) */
    NET_REJECT_TRUNCATED, /* shorter than header + tag */
    NET_REJECT_AUTH,      /* AEAD tag did not verify: tampered or wrong key */
    NET_REJECT_REPLAY,    /* counter already seen */
    NET_REJECT_TOO_OLD,   /* counter below the replay window */
    NET_REJECT_BAD_EPOCH, /* key epoch neither current nor next (old keys are gone) */
    NET_REJECT_REKEY,     /* rekey record invalid (signature, epoch, state) or ACK too late */
    /* transport (net/transport) */
    NET_REJECT_OVERSIZE,        /* length prefix above the receive limit */
    NET_REJECT_CUT_OFF,         /* connection refused: peer address is cut off */
    NET_REJECT_CONN_LIMIT,      /* connection refused: connection table full */
    NET_REJECT_QUEUE_FULL,      /* outgoing frame dropped: peer send queue full */
    NET_REJECT_UNREACHABLE,     /* outgoing frame dropped: dial failed or backing off */
    NET_REJECT_HANDSHAKE_LIMIT, /* unauthenticated connection refused or evicted (per-host cap,
                                   pool full, or too slow under pressure) */
    NET_REJECT_KEY_RETIRED,     /* link closed: its network key was removed from the ring */
    NET_REJECT_COUNT
} net_reject;

/* Stable snake_case name of a cause ("bad_mac", "replay", ...); "unknown"
 * outside the enum. */
const char *net_reject_name(int cause);

/* An agent identity. sk is libsodium's 64-byte Ed25519 secret key (it embeds
 * pk); wipe it with net_identity_wipe when done. */
typedef struct net_identity {
    uint8_t pk[NET_PUBLIC_KEY_SIZE];
    uint8_t sk[NET_SECRET_KEY_SIZE];
    uint64_t node_id;
} net_identity;

/* Node id of a public key (see the header comment); 0 for the unusable key. */
uint64_t net_node_id(const uint8_t pk[NET_PUBLIC_KEY_SIZE]);

/* Fresh random identity. Returns NET_OK or NET_EIO (libsodium not usable). */
int net_identity_generate(net_identity *id);
/* Fill pk and node_id from sk and check that sk is a well-formed Ed25519 key
 * whose embedded public key matches its seed. Returns NET_OK or NET_EINVAL
 * (id is wiped). */
int net_identity_from_secret(net_identity *id, const uint8_t sk[NET_SECRET_KEY_SIZE]);
void net_identity_wipe(net_identity *id);

/* Initialise libsodium once (thread-safe, idempotent). NET_OK or NET_EIO. */
int net_init(void);

#endif
