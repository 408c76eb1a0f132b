/* murmur keygen — create an agent identity and/or a cluster network key.
 *
 *   murmur keygen --out DIR [--force]
 *       write DIR/murmur.key (Ed25519 secret key, mode 0600) and
 *       DIR/murmur.pub (public key, hex); print the node id and public key.
 *   murmur keygen --network-key FILE [--force]
 *       write 32 random bytes (mode 0600): the admission key every agent of
 *       the cluster must hold.
 *   murmur keygen --show FILE
 *       print the node id and public key of a murmur.key or murmur.pub file.
 * Existing files are never overwritten without --force.
 */
#include "agent/commands.h"

#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "agent/keys.h"
#include "net/net.h"

static void keygen_usage(FILE *out)
{
    fprintf(out,
            "usage: murmur keygen --out DIR [--force]\n"
            "       murmur keygen --network-key FILE [--force]\n"
            "       murmur keygen --show FILE\n"
            "\n"
            "  --out DIR           write DIR/murmur.key (secret, mode 0600) and DIR/murmur.pub\n"
            "  --network-key FILE  write a new random 32-byte cluster network key (mode 0600)\n"
            "  --show FILE         print the node id and public key of a .key or .pub file\n"
            "  --force             replace existing files\n");
}

static void print_identity(const uint8_t pk[NET_PUBLIC_KEY_SIZE])
{
    char hex[AGENT_KEYS_HEX_SIZE];
    agent_keys_hex(pk, hex);
    printf("node_id=%016llx public_key=%s\n", (unsigned long long)net_node_id(pk), hex);
}

static int show(const char *path)
{
    char msg[512];
    net_identity id;
    uint8_t pk[NET_PUBLIC_KEY_SIZE];
    if (agent_keys_read_public(path, pk, msg, sizeof msg) == AGENT_KEYS_OK) {
        print_identity(pk);
        return 0;
    }
    int rc = agent_keys_read_identity(path, &id, msg, sizeof msg);
    if (rc) {
        fprintf(stderr, "murmur keygen: %s\n", msg);
        return 1;
    }
    print_identity(id.pk);
    net_identity_wipe(&id);
    return 0;
}

int cmd_keygen(int argc, char **argv)
{
    const char *out_dir = NULL, *net_path = NULL, *show_path = NULL;
    int force = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            keygen_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--force")) {
            force = 1;
        } else if ((!strcmp(a, "--out") || !strcmp(a, "--network-key") || !strcmp(a, "--show")) &&
                   i + 1 < argc) {
            const char **slot = !strcmp(a, "--out")           ? &out_dir
                                : !strcmp(a, "--network-key") ? &net_path
                                                              : &show_path;
            *slot = argv[++i];
        } else {
            fprintf(stderr, "murmur keygen: unknown or incomplete option '%s'\n\n", a);
            keygen_usage(stderr);
            return 2;
        }
    }
    if (!out_dir && !net_path && !show_path) {
        keygen_usage(stderr);
        return 2;
    }
    if (net_init() != NET_OK) {
        fprintf(stderr, "murmur keygen: libsodium failed to initialise\n");
        return 1;
    }
    char msg[512];
    if (out_dir) {
        net_identity id;
        if (net_identity_generate(&id) != NET_OK) {
            fprintf(stderr, "murmur keygen: cannot generate a key pair\n");
            return 1;
        }
        int rc = agent_keys_write_identity(out_dir, &id, force, msg, sizeof msg);
        if (rc) {
            net_identity_wipe(&id);
            fprintf(stderr, "murmur keygen: %s\n", msg);
            return 1;
        }
        printf("wrote %s/%s and %s/%s\n", out_dir, AGENT_KEYS_SECRET_NAME, out_dir,
               AGENT_KEYS_PUBLIC_NAME);
        print_identity(id.pk);
        net_identity_wipe(&id);
    }
    if (net_path) {
        uint8_t key[NET_NETWORK_KEY_SIZE];
        randombytes_buf(key, sizeof key);
        int rc = agent_keys_write_network(net_path, key, force, msg, sizeof msg);
        sodium_memzero(key, sizeof key);
        if (rc) {
            fprintf(stderr, "murmur keygen: %s\n", msg);
            return 1;
        }
        printf("wrote network key %s (give the same file to every agent of the cluster)\n",
               net_path);
    }
    if (show_path)
        return show(show_path);
    return 0;
}
