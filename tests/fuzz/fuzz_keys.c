/* fuzz_keys — libFuzzer target for agent/keys' readers: allow-lists,
 * public key files, network keys and secret keys (docs/FUZZING.md).
 *
 * Input: byte 0 picks the reader (b % 4: allow-list of at most 4 keys,
 * public key, secret key, network key) and the file's permission bits
 * ((b >> 2) % 4: 0600, 0644, 0620, 0400); the rest is the file, read
 * through an in-memory file.
 * Properties, any violation aborts: each reader returns OK or an error of
 * its documented set, with a message naming the file, and agrees with an
 * independent reading of the format (agent/keys.h):
 *   - allow-list: lines (split at '\n') with blanks and a trailing '\r'
 *     cut; empty lines and lines starting with '#' skipped; every other
 *     line exactly 64 hex digits; a line of 255 bytes or more, or one
 *     holding a NUL byte, is refused (EFORMAT, naming the line); more than
 *     4 keys is ETOOMANY; group- or other-writable is EMODE; on success the
 *     keys are those lines, in order, and on error none;
 *   - public key: 64 hex digits, then only '\n', '\r' or ' ', at most 67
 *     bytes in all (ESIZE above);
 *   - network key: exactly 32 bytes, private to the owner (else EMODE);
 *     as a key ring (at most 3 here): 1 to 3 whole keys, in file order;
 *   - secret key: exactly 64 bytes whose second half is the Ed25519
 *     public key of the first, private to the owner.
 */
#define _GNU_SOURCE
#include "tests/fuzz/fuzz_util.h"

#include <ctype.h>
#include <sodium.h>

#include "agent/keys.h"
#include "net/net.h"

#define ALLOW_MAX 4

static int hexval(int c)
{
    return isdigit(c)             ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* 64 hex digits -> 32 bytes; 0 on success. */
static int unhex64(const uint8_t *s, size_t len, uint8_t out[32])
{
    if (len != 64)
        return -1;
    for (size_t i = 0; i < 32; i++) {
        int a = hexval(s[2 * i]), b = hexval(s[2 * i + 1]);
        if (a < 0 || b < 0)
            return -1;
        out[i] = (uint8_t)(a << 4 | b);
    }
    return 0;
}

/* The allow-list as agent/keys.h describes it: the expected result, and
 * the keys or the line an error is on. */
static int allow_oracle(const uint8_t *d, size_t size, uint8_t keys[ALLOW_MAX][32], size_t *n,
                        unsigned *bad_line)
{
    *n = 0;
    unsigned lineno = 0;
    for (size_t at = 0; at < size;) {
        const uint8_t *nl = memchr(d + at, '\n', size - at);
        size_t len = nl ? (size_t)(nl - (d + at)) : size - at;
        const uint8_t *s = d + at;
        at += len + (nl != NULL);
        lineno++;
        *bad_line = lineno;
        if (len >= 255 || memchr(s, 0, len))
            return AGENT_KEYS_EFORMAT;
        while (len && (*s == ' ' || *s == '\t'))
            s++, len--;
        while (len && (s[len - 1] == '\r' || s[len - 1] == ' ' || s[len - 1] == '\t'))
            len--;
        if (len == 0 || s[0] == '#')
            continue;
        if (*n == ALLOW_MAX)
            return AGENT_KEYS_ETOOMANY;
        if (unhex64(s, len, keys[*n]))
            return AGENT_KEYS_EFORMAT;
        (*n)++;
    }
    return AGENT_KEYS_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const unsigned modes[] = {0600, 0644, 0620, 0400};
    if (size < 1)
        return 0;
    int which = data[0] % 4;
    unsigned mode = modes[(data[0] >> 2) % 4];
    data++, size--;
    FUZZ_CHECK(sodium_init() >= 0);
    char path[64], msg[512] = "";
    fuzz_memfile_mode(0, mode);
    fuzz_memfile(0, data, size, path, sizeof path);
    int rc;
    if (which == 0) {
        uint8_t keys[ALLOW_MAX][32], want[ALLOW_MAX][32];
        size_t n = 99, wn;
        unsigned bad_line = 0;
        rc = agent_keys_read_allow(path, &keys[0][0], ALLOW_MAX, &n, msg, sizeof msg);
        int expect =
            (mode & 022) ? AGENT_KEYS_EMODE : allow_oracle(data, size, want, &wn, &bad_line);
        if (rc != expect)
            fprintf(stderr, "allow-list: got %d, expected %d (line %u): %s\n", rc, expect, bad_line,
                    msg);
        FUZZ_CHECK(rc == expect);
        if (rc == AGENT_KEYS_OK) {
            FUZZ_CHECK(n == wn && (n == 0 || memcmp(keys, want, n * 32) == 0));
        } else {
            FUZZ_CHECK(n == 0);
            if (rc != AGENT_KEYS_EMODE) {
                char where[96];
                snprintf(where, sizeof where, "%s:%u:", path, bad_line);
                FUZZ_CHECK(strncmp(msg, where, strlen(where)) == 0);
            }
        }
    } else if (which == 1) {
        uint8_t pk[32], want[32];
        rc = agent_keys_read_public(path, pk, msg, sizeof msg);
        size_t len = size;
        while (len && (data[len - 1] == '\n' || data[len - 1] == '\r' || data[len - 1] == ' '))
            len--;
        int expect = size > AGENT_KEYS_HEX_SIZE + 2 ? AGENT_KEYS_ESIZE
                     : unhex64(data, len, want)     ? AGENT_KEYS_EFORMAT
                                                    : AGENT_KEYS_OK;
        FUZZ_CHECK(rc == expect);
        if (rc == AGENT_KEYS_OK)
            FUZZ_CHECK(memcmp(pk, want, 32) == 0);
    } else if (which == 2) {
        net_identity id;
        rc = agent_keys_read_identity(path, &id, msg, sizeof msg);
        int expect = (mode & 077) ? AGENT_KEYS_EMODE : size != 64 ? AGENT_KEYS_ESIZE : -1;
        if (expect < 0) {
            uint8_t pk[32], sk[64];
            FUZZ_CHECK(crypto_sign_seed_keypair(pk, sk, data) == 0);
            expect = memcmp(pk, data + 32, 32) || net_node_id(pk) == 0 ? AGENT_KEYS_EFORMAT
                                                                       : AGENT_KEYS_OK;
        }
        FUZZ_CHECK(rc == expect);
        if (rc == AGENT_KEYS_OK)
            FUZZ_CHECK(memcmp(id.pk, data + 32, 32) == 0 && id.node_id == net_node_id(id.pk));
    } else {
        uint8_t key[NET_NETWORK_KEY_SIZE];
        rc = agent_keys_read_network(path, key, msg, sizeof msg);
        int expect = (mode & 077)                   ? AGENT_KEYS_EMODE
                     : size != NET_NETWORK_KEY_SIZE ? AGENT_KEYS_ESIZE
                                                    : AGENT_KEYS_OK;
        FUZZ_CHECK(rc == expect);
        if (rc == AGENT_KEYS_OK)
            FUZZ_CHECK(memcmp(key, data, sizeof key) == 0);
        /* the same file as a key ring of at most 3 keys */
        uint8_t ring[3 * NET_NETWORK_KEY_SIZE];
        size_t n = 99;
        int rrc = agent_keys_read_network_ring(path, ring, 3, &n, msg, sizeof msg);
        int rexpect = (mode & 077) ? AGENT_KEYS_EMODE
                      : size == 0 || size % NET_NETWORK_KEY_SIZE || size > sizeof ring
                          ? AGENT_KEYS_ESIZE
                          : AGENT_KEYS_OK;
        FUZZ_CHECK(rrc == rexpect);
        if (rrc == AGENT_KEYS_OK)
            FUZZ_CHECK(n == size / NET_NETWORK_KEY_SIZE && memcmp(ring, data, size) == 0);
        else
            FUZZ_CHECK(n == 0 && fuzz_has_message(msg, sizeof msg) &&
                       strncmp(msg, path, strlen(path)) == 0);
    }
    if (rc != AGENT_KEYS_OK)
        FUZZ_CHECK(fuzz_has_message(msg, sizeof msg) && strncmp(msg, path, strlen(path)) == 0);
    return 0;
}
