#include "net/net.h"

#include <sodium.h>
#include <string.h>

_Static_assert(NET_PUBLIC_KEY_SIZE == crypto_sign_PUBLICKEYBYTES, "Ed25519 public key size");
_Static_assert(NET_SECRET_KEY_SIZE == crypto_sign_SECRETKEYBYTES, "Ed25519 secret key size");

const char *net_strerror(int err)
{
    static const char *const names[NET_ERR_COUNT] = {
        [NET_OK] = "success",
        [NET_EINVAL] = "invalid argument",
        [NET_ENOMEM] = "out of memory",
        [NET_ESPACE] = "output buffer too small",
        [NET_ESTATE] = "not valid in the current state",
        [NET_EREJECT] = "input rejected",
        [NET_EFAILED] = "channel failed (handshake refused)",
        [NET_ETOOBIG] = "frame exceeds the maximum size",
        [NET_EFULL] = "queue or table full",
        [NET_EBLOCKED] = "peer cut off after repeated failures",
        [NET_ENOTFOUND] = "no address known for that node",
        [NET_EAGAIN] = "nothing available",
        [NET_EIO] = "network or system call failed",
        [NET_ECLOSED] = "transport closed",
    };
    if (err < 0 || err >= NET_ERR_COUNT)
        return "unknown error";
    return names[err];
}

const char *net_reject_name(int cause)
{
    static const char *const names[NET_REJECT_COUNT] = {
        [NET_REJECT_BAD_RECORD] = "bad_record",
        [NET_REJECT_BAD_STATE] = "bad_state",
        [NET_REJECT_BAD_MAC] = "bad_mac",
        [NET_REJECT_BAD_SIGNATURE] = "bad_signature",
        [NET_REJECT_NOT_ALLOWED] = "not_allowed",
        [NET_REJECT_WRONG_PEER] = "wrong_peer",
        [NET_REJECT_SELF] = "self",
        [NET_REJECT_BAD_KEY] = "bad_key",
        [NET_REJECT_HANDSHAKE_TIMEOUT] = "handshake_timeout",
        [NET_REJECT_STALE_HELLO] = "stale_hello",
        [NET_REJECT_TRUNCATED] = "truncated",
        [NET_REJECT_AUTH] = "auth",
        [NET_REJECT_REPLAY] = "replay",
        [NET_REJECT_TOO_OLD] = "too_old",
        [NET_REJECT_BAD_EPOCH] = "bad_epoch",
        [NET_REJECT_REKEY] = "rekey",
        [NET_REJECT_OVERSIZE] = "oversize",
        [NET_REJECT_CUT_OFF] = "cut_off",
        [NET_REJECT_CONN_LIMIT] = "conn_limit",
        [NET_REJECT_QUEUE_FULL] = "queue_full",
        [NET_REJECT_UNREACHABLE] = "unreachable",
        [NET_REJECT_HANDSHAKE_LIMIT] = "handshake_limit",
        [NET_REJECT_KEY_RETIRED] = "key_retired",
    };
    if (cause < 0 || cause >= NET_REJECT_COUNT)
        return "unknown";
    return names[cause];
}

int net_init(void)
{
    /* sodium_init is thread-safe and returns 1 when already initialised. */
    return sodium_init() < 0 ? NET_EIO : NET_OK;
}

uint64_t net_node_id(const uint8_t pk[NET_PUBLIC_KEY_SIZE])
{
    uint8_t h[32];
    crypto_generichash(h, sizeof h, pk, NET_PUBLIC_KEY_SIZE, NULL, 0);
    uint64_t id = 0;
    for (int i = 0; i < 8; i++)
        id = (id << 8) | h[i];
    return id;
}

int net_identity_generate(net_identity *id)
{
    if (!id)
        return NET_EINVAL;
    if (net_init() != NET_OK)
        return NET_EIO;
    /* Retry the 2^-64 case of a zero node id rather than hand out an
     * identity nobody can address. */
    for (int tries = 0; tries < 4; tries++) {
        crypto_sign_keypair(id->pk, id->sk);
        id->node_id = net_node_id(id->pk);
        if (id->node_id != 0)
            return NET_OK;
    }
    net_identity_wipe(id);
    return NET_EIO;
}

int net_identity_from_secret(net_identity *id, const uint8_t sk[NET_SECRET_KEY_SIZE])
{
    if (!id || !sk)
        return NET_EINVAL;
    if (net_init() != NET_OK)
        return NET_EIO;
    uint8_t seed[crypto_sign_SEEDBYTES];
    uint8_t pk[crypto_sign_PUBLICKEYBYTES];
    uint8_t check[crypto_sign_SECRETKEYBYTES];
    memcpy(seed, sk, sizeof seed);
    crypto_sign_seed_keypair(pk, check, seed);
    int ok = sodium_memcmp(check, sk, sizeof check) == 0;
    sodium_memzero(seed, sizeof seed);
    sodium_memzero(check, sizeof check);
    if (!ok) {
        net_identity_wipe(id);
        return NET_EINVAL;
    }
    memcpy(id->sk, sk, NET_SECRET_KEY_SIZE);
    memcpy(id->pk, pk, NET_PUBLIC_KEY_SIZE);
    id->node_id = net_node_id(pk);
    if (id->node_id == 0) {
        net_identity_wipe(id);
        return NET_EINVAL;
    }
    return NET_OK;
}

void net_identity_wipe(net_identity *id)
{
    if (id)
        sodium_memzero(id, sizeof *id);
}
