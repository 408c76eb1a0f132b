/* agent/keys — the key files of an agent: identity, network key, allow-list.
 *
 * Files (docs/SECURITY.md):
 *   DIR/murmur.key   Ed25519 secret key, 64 raw bytes (libsodium layout:
 *                    seed || public key), mode 0600 or stricter.
 *   DIR/murmur.pub   the public key as 64 lowercase hex digits and "\n";
 *                    safe to share, it is what goes into an allow-list.
 *   network key      32 raw random bytes, mode 0600 or stricter; every agent
 *                    of a cluster holds the same one (admission).
 *   allow-list       text: one public key (64 hex digits) per line; blank
 *                    lines and lines starting with '#' are ignored; at most
 *                    NET_CHANNEL_ALLOW_MAX keys; not writable by group or
 *                    others. A list with no key admits nobody.
 * A secret file readable by group or others is refused, not silently used:
 * a leaked key is a leaked identity. Files are written to a temporary name,
 * fsynced and renamed, so a crash never leaves half a key.
 *
 * Every function returns 0 or an agent_keys_err and, on error, writes into
 * msg (msg_cap bytes, may be NULL) a sentence naming the file, what is wrong
 * and what to do. Secrets read into memory are wiped on failure.
 */
#ifndef AGENT_KEYS_H
#define AGENT_KEYS_H

#include <stddef.h>
#include <stdint.h>

#include "net/net.h"

#define AGENT_KEYS_SECRET_NAME "murmur.key"
#define AGENT_KEYS_PUBLIC_NAME "murmur.pub"
#define AGENT_KEYS_PATH_MAX    4096u
#define AGENT_KEYS_HEX_SIZE    (2u * NET_PUBLIC_KEY_SIZE + 1u) /* with NUL */

typedef enum agent_keys_err {
    AGENT_KEYS_OK = 0,
    AGENT_KEYS_EINVAL,   /* bad argument */
    AGENT_KEYS_EIO,      /* cannot open, read, write or rename */
    AGENT_KEYS_EEXIST,   /* would overwrite a key without force */
    AGENT_KEYS_EMODE,    /* secret file readable or writable by group/others, or not a file */
    AGENT_KEYS_ESIZE,    /* file has the wrong size */
    AGENT_KEYS_EFORMAT,  /* content is not a key of the expected kind */
    AGENT_KEYS_ETOOMANY, /* allow-list longer than the caller's maximum */
    AGENT_KEYS_ERR_COUNT
} agent_keys_err;

const char *agent_keys_strerror(int err);

/* Write DIR/murmur.key (0600) and DIR/murmur.pub (0644). Refuses with
 * AGENT_KEYS_EEXIST if either exists and force is 0. Errors: EINVAL, EIO,
 * EEXIST. */
int agent_keys_write_identity(const char *dir, const net_identity *id, int force, char *msg,
                              size_t msg_cap);
/* Read a secret key file (mode, size and key consistency checked). Errors:
 * EIO, EMODE, ESIZE, EFORMAT. */
int agent_keys_read_identity(const char *path, net_identity *id, char *msg, size_t msg_cap);
/* Read a public key file (hex). Errors: EIO, ESIZE, EFORMAT. */
int agent_keys_read_public(const char *path, uint8_t pk[NET_PUBLIC_KEY_SIZE], char *msg,
                           size_t msg_cap);

/* Write / read a network key file (32 raw bytes, 0600). Errors as above. */
int agent_keys_write_network(const char *path, const uint8_t key[NET_NETWORK_KEY_SIZE], int force,
                             char *msg, size_t msg_cap);
int agent_keys_read_network(const char *path, uint8_t key[NET_NETWORK_KEY_SIZE], char *msg,
                            size_t msg_cap);
/* Read a network key ring: 1..max keys of 32 raw bytes back to back (a
 * plain network key file is a ring of one), mode 0600 or stricter; the
 * first key is the primary. keys holds max * 32 bytes; *n = count.
 * Errors: EIO, EMODE, ESIZE (not a whole number of keys, or more than
 * max). */
int agent_keys_read_network_ring(const char *path, uint8_t *keys, size_t max, size_t *n, char *msg,
                                 size_t msg_cap);

/* Read an allow-list into keys (max entries of 32 bytes); *n = count, which
 * may be 0 (a list of comments only): the caller must then admit nobody,
 * never everybody. The file must be a regular file that no other user can
 * change: not writable by group or others, owned by this user or root.
 * Errors: EIO, EMODE, EFORMAT (names the line), ETOOMANY. */
int agent_keys_read_allow(const char *path, uint8_t *keys, size_t max, size_t *n, char *msg,
                          size_t msg_cap);

/* Lowercase hex of a public key into out[AGENT_KEYS_HEX_SIZE]. */
void agent_keys_hex(const uint8_t pk[NET_PUBLIC_KEY_SIZE], char out[AGENT_KEYS_HEX_SIZE]);
/* Parse exactly 64 hex digits; 0 or AGENT_KEYS_EFORMAT. */
int agent_keys_unhex(const char *hex, size_t len, uint8_t pk[NET_PUBLIC_KEY_SIZE]);

#endif
