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
 * Existing files are never overwritten without --force. --out creates DIR
 * (and its parents, mode 0700) when it is missing.
 */
#include "agent/commands.h"

#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "agent/keys.h"
#include "common/cli.h"
#include "common/fs.h"
#include "net/net.h"

enum { K_OUT, K_NETWORK_KEY, K_SHOW, K_FORCE, K_HELP };
static const common_flag keygen_flags[] = {
    {"out", 0, true, K_OUT, "DIR",
     "write DIR/murmur.key (secret, mode 0600) and DIR/murmur.pub; creates DIR", NULL},
    {"network-key", 0, true, K_NETWORK_KEY, "FILE",
     "write a new random 32-byte cluster network key (mode 0600)", NULL},
    {"show", 0, true, K_SHOW, "FILE", "print the node id and public key of a .key or .pub file",
     NULL},
    {"force", 0, false, K_FORCE, "", "replace existing files", NULL},
    {"help", 'h', false, K_HELP, "", "this text", NULL},
};
#define KEYGEN_FLAGS (sizeof keygen_flags / sizeof keygen_flags[0])

static void keygen_usage(FILE *out)
{
    common_cli cli;
    common_cli_init(&cli, "murmur keygen", keygen_flags, KEYGEN_FLAGS, 0, NULL);
    fprintf(out, "usage: murmur keygen --out DIR [--force]\n"
                 "       murmur keygen --network-key FILE [--force]\n"
                 "       murmur keygen --show FILE\n"
                 "\n");
    common_cli_usage(&cli, out);
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
    common_cli cli;
    common_cli_init(&cli, "murmur keygen", keygen_flags, KEYGEN_FLAGS, argc, argv);
    for (int id; (id = common_cli_next(&cli)) != COMMON_CLI_END;) {
        switch (id) {
        case K_HELP:
            keygen_usage(stdout);
            return 0;
        case K_FORCE:
            force = 1;
            break;
        case K_OUT:
            out_dir = cli.arg;
            break;
        case K_NETWORK_KEY:
            net_path = cli.arg;
            break;
        case K_SHOW:
            show_path = cli.arg;
            break;
        case COMMON_CLI_POSITIONAL:
            fprintf(stderr, "murmur keygen: unexpected argument '%s' (see --help)\n", cli.arg);
            return 2;
        default:
            fprintf(stderr, "murmur keygen: %s\n", cli.err);
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
        if (common_mkdirs(out_dir, 0700, msg, sizeof msg)) {
            fprintf(stderr, "murmur keygen: %s\n", msg);
            return 1;
        }
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
