/* agent/keys and `murmur keygen`: round trips, refusal to overwrite, clear
 * errors for bad modes, sizes and contents. Files live in a fresh temporary
 * directory removed at the end of each test. */
#include "tests/harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/commands.h"
#include "agent/keys.h"
#include "net/net.h"

typedef struct tmpdir {
    char dir[64];
    char key[128], pub[128], net[128], allow[128];
} tmpdir;

static int setup(void **state)
{
    tmpdir *t = calloc(1, sizeof *t);
    if (!t)
        return -1;
    strcpy(t->dir, "/tmp/murmur-keys-XXXXXX");
    if (!mkdtemp(t->dir))
        return -1;
    snprintf(t->key, sizeof t->key, "%s/%s", t->dir, AGENT_KEYS_SECRET_NAME);
    snprintf(t->pub, sizeof t->pub, "%s/%s", t->dir, AGENT_KEYS_PUBLIC_NAME);
    snprintf(t->net, sizeof t->net, "%s/network.key", t->dir);
    snprintf(t->allow, sizeof t->allow, "%s/allow.txt", t->dir);
    *state = t;
    return 0;
}

static int teardown(void **state)
{
    tmpdir *t = *state;
    unlink(t->key);
    unlink(t->pub);
    unlink(t->net);
    unlink(t->allow);
    rmdir(t->dir);
    free(t);
    return 0;
}

static void write_raw(const char *path, const void *data, size_t len, mode_t mode)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    fclose(f);
    assert_int_equal(chmod(path, mode), 0);
}

static void identity_round_trip(void **state)
{
    tmpdir *t = *state;
    net_identity id, back;
    char msg[512];
    assert_int_equal(net_identity_generate(&id), NET_OK);
    assert_true(id.node_id != 0);
    assert_true(id.node_id == net_node_id(id.pk));
    assert_int_equal(agent_keys_write_identity(t->dir, &id, 0, msg, sizeof msg), AGENT_KEYS_OK);
    struct stat st;
    assert_int_equal(stat(t->key, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(st.st_size, NET_SECRET_KEY_SIZE);
    assert_int_equal(agent_keys_read_identity(t->key, &back, msg, sizeof msg), AGENT_KEYS_OK);
    assert_memory_equal(back.sk, id.sk, NET_SECRET_KEY_SIZE);
    assert_memory_equal(back.pk, id.pk, NET_PUBLIC_KEY_SIZE);
    assert_true(back.node_id == id.node_id);
    uint8_t pk[NET_PUBLIC_KEY_SIZE];
    assert_int_equal(agent_keys_read_public(t->pub, pk, msg, sizeof msg), AGENT_KEYS_OK);
    assert_memory_equal(pk, id.pk, NET_PUBLIC_KEY_SIZE);

    /* no overwrite without force; with force the key changes */
    net_identity other;
    assert_int_equal(net_identity_generate(&other), NET_OK);
    assert_int_equal(agent_keys_write_identity(t->dir, &other, 0, msg, sizeof msg),
                     AGENT_KEYS_EEXIST);
    assert_non_null(strstr(msg, "--force"));
    assert_int_equal(agent_keys_read_identity(t->key, &back, msg, sizeof msg), AGENT_KEYS_OK);
    assert_memory_equal(back.pk, id.pk, NET_PUBLIC_KEY_SIZE);
    assert_int_equal(agent_keys_write_identity(t->dir, &other, 1, msg, sizeof msg), AGENT_KEYS_OK);
    assert_int_equal(agent_keys_read_identity(t->key, &back, msg, sizeof msg), AGENT_KEYS_OK);
    assert_memory_equal(back.pk, other.pk, NET_PUBLIC_KEY_SIZE);
}

static void node_id_is_blake2b_prefix(void **state)
{
    (void)state;
    /* BLAKE2b-256 of 32 zero bytes starts 0x89 0xeb 0x0d 0x6a 0x8a 0x69 0x1d 0xae
     * (python3: hashlib.blake2b(bytes(32), digest_size=32).hexdigest()). */
    uint8_t zero[NET_PUBLIC_KEY_SIZE] = {0};
    assert_true(net_node_id(zero) == 0x89eb0d6a8a691daeull);
}

static void secret_file_errors(void **state)
{
    tmpdir *t = *state;
    net_identity id, back;
    char msg[512];
    assert_int_equal(net_identity_generate(&id), NET_OK);
    assert_int_equal(agent_keys_write_identity(t->dir, &id, 0, msg, sizeof msg), AGENT_KEYS_OK);

    /* readable by others */
    assert_int_equal(chmod(t->key, 0644), 0);
    assert_int_equal(agent_keys_read_identity(t->key, &back, msg, sizeof msg), AGENT_KEYS_EMODE);
    assert_non_null(strstr(msg, "chmod 600"));
    assert_non_null(strstr(msg, t->key));
    assert_int_equal(chmod(t->key, 0640), 0);
    assert_int_equal(agent_keys_read_identity(t->key, &back, msg, sizeof msg), AGENT_KEYS_EMODE);
    assert_int_equal(chmod(t->key, 0400), 0); /* stricter is fine */
    assert_int_equal(agent_keys_read_identity(t->key, &back, msg, sizeof msg), AGENT_KEYS_OK);

    /* wrong sizes */
    write_raw(t->key, id.sk, NET_SECRET_KEY_SIZE - 1, 0600);
    assert_int_equal(agent_keys_read_identity(t->key, &back, msg, sizeof msg), AGENT_KEYS_ESIZE);
    assert_non_null(strstr(msg, "63 bytes"));
    write_raw(t->key, "", 0, 0600);
    assert_int_equal(agent_keys_read_identity(t->key, &back, msg, sizeof msg), AGENT_KEYS_ESIZE);

    /* right size, inconsistent content: public half does not match the seed */
    uint8_t bad[NET_SECRET_KEY_SIZE];
    memcpy(bad, id.sk, sizeof bad);
    bad[40] ^= 1;
    write_raw(t->key, bad, sizeof bad, 0600);
    assert_int_equal(agent_keys_read_identity(t->key, &back, msg, sizeof msg), AGENT_KEYS_EFORMAT);
    for (size_t k = 0; k < sizeof back; k++)
        assert_int_equal(((uint8_t *)&back)[k], 0); /* output wiped on failure */

    /* missing file, directory instead of a file */
    assert_int_equal(agent_keys_read_identity("/nonexistent/murmur.key", &back, msg, sizeof msg),
                     AGENT_KEYS_EIO);
    assert_non_null(strstr(msg, "/nonexistent/murmur.key"));
    assert_int_equal(agent_keys_read_identity(t->dir, &back, msg, sizeof msg), AGENT_KEYS_EMODE);

    /* a public file that is not 64 hex digits */
    write_raw(t->pub, "abcd\n", 5, 0644);
    uint8_t pk[NET_PUBLIC_KEY_SIZE];
    assert_int_equal(agent_keys_read_public(t->pub, pk, msg, sizeof msg), AGENT_KEYS_EFORMAT);
}

static void network_key(void **state)
{
    tmpdir *t = *state;
    uint8_t key[NET_NETWORK_KEY_SIZE], back[NET_NETWORK_KEY_SIZE];
    char msg[512];
    for (size_t k = 0; k < sizeof key; k++)
        key[k] = (uint8_t)(k * 13 + 1);
    assert_int_equal(agent_keys_write_network(t->net, key, 0, msg, sizeof msg), AGENT_KEYS_OK);
    assert_int_equal(agent_keys_read_network(t->net, back, msg, sizeof msg), AGENT_KEYS_OK);
    assert_memory_equal(key, back, sizeof key);
    assert_int_equal(agent_keys_write_network(t->net, key, 0, msg, sizeof msg), AGENT_KEYS_EEXIST);
    assert_int_equal(chmod(t->net, 0604), 0);
    assert_int_equal(agent_keys_read_network(t->net, back, msg, sizeof msg), AGENT_KEYS_EMODE);
    write_raw(t->net, key, 31, 0600);
    assert_int_equal(agent_keys_read_network(t->net, back, msg, sizeof msg), AGENT_KEYS_ESIZE);
    assert_non_null(strstr(msg, "32 bytes"));
}

static void network_key_ring_file(void **state)
{
    tmpdir *t = *state;
    uint8_t ring[5 * 32], back[4 * 32];
    for (size_t k = 0; k < sizeof ring; k++)
        ring[k] = (uint8_t)(k * 13 + 1);
    char msg[512];
    size_t n = 99;
    for (size_t keys = 1; keys <= 4; keys++) {
        write_raw(t->net, ring, keys * 32, 0600);
        assert_int_equal(agent_keys_read_network_ring(t->net, back, 4, &n, msg, sizeof msg),
                         AGENT_KEYS_OK);
        assert_int_equal(n, keys);
        assert_memory_equal(back, ring, keys * 32);
    }
    /* five keys, a partial key, an empty file, a readable file: refused */
    write_raw(t->net, ring, 5 * 32, 0600);
    assert_int_equal(agent_keys_read_network_ring(t->net, back, 4, &n, msg, sizeof msg),
                     AGENT_KEYS_ESIZE);
    write_raw(t->net, ring, 48, 0600);
    assert_int_equal(agent_keys_read_network_ring(t->net, back, 4, &n, msg, sizeof msg),
                     AGENT_KEYS_ESIZE);
    assert_non_null(strstr(msg, "1 to 4 keys"));
    write_raw(t->net, ring, 0, 0600);
    assert_int_equal(agent_keys_read_network_ring(t->net, back, 4, &n, msg, sizeof msg),
                     AGENT_KEYS_ESIZE);
    write_raw(t->net, ring, 64, 0640);
    assert_int_equal(agent_keys_read_network_ring(t->net, back, 4, &n, msg, sizeof msg),
                     AGENT_KEYS_EMODE);
    assert_int_equal(n, 0);
}

static void allow_list_file(void **state)
{
    tmpdir *t = *state;
    net_identity a, b;
    assert_int_equal(net_identity_generate(&a), NET_OK);
    assert_int_equal(net_identity_generate(&b), NET_OK);
    char ha[AGENT_KEYS_HEX_SIZE], hb[AGENT_KEYS_HEX_SIZE], text[512];
    agent_keys_hex(a.pk, ha);
    agent_keys_hex(b.pk, hb);
    snprintf(text, sizeof text, "# cluster members\n\n%s\n  %s  \r\n", ha, hb);
    write_raw(t->allow, text, strlen(text), 0644);
    uint8_t keys[4 * NET_PUBLIC_KEY_SIZE];
    size_t n = 99;
    char msg[512];
    assert_int_equal(agent_keys_read_allow(t->allow, keys, 4, &n, msg, sizeof msg), AGENT_KEYS_OK);
    assert_int_equal(n, 2);
    assert_memory_equal(keys, a.pk, 32);
    assert_memory_equal(keys + 32, b.pk, 32);
    assert_int_equal(agent_keys_read_allow(t->allow, keys, 1, &n, msg, sizeof msg),
                     AGENT_KEYS_ETOOMANY);
    snprintf(text, sizeof text, "%s\nnot-a-key\n", ha);
    write_raw(t->allow, text, strlen(text), 0644);
    assert_int_equal(agent_keys_read_allow(t->allow, keys, 4, &n, msg, sizeof msg),
                     AGENT_KEYS_EFORMAT);
    assert_non_null(strstr(msg, ":2:"));
    assert_int_equal(n, 0);
    /* Only comments: 0 keys and success; the caller admits nobody. */
    snprintf(text, sizeof text, "# %s\n\n# everyone removed\n", ha);
    write_raw(t->allow, text, strlen(text), 0600);
    n = 99;
    assert_int_equal(agent_keys_read_allow(t->allow, keys, 4, &n, msg, sizeof msg), AGENT_KEYS_OK);
    assert_int_equal(n, 0);
    /* Writable by group or others: refused, like a secret key file. */
    snprintf(text, sizeof text, "%s\n", ha);
    write_raw(t->allow, text, strlen(text), 0664);
    assert_int_equal(agent_keys_read_allow(t->allow, keys, 4, &n, msg, sizeof msg),
                     AGENT_KEYS_EMODE);
    assert_non_null(strstr(msg, "chmod go-w"));
    assert_int_equal(n, 0);
    assert_int_equal(chmod(t->allow, 0646), 0);
    assert_int_equal(agent_keys_read_allow(t->allow, keys, 4, &n, msg, sizeof msg),
                     AGENT_KEYS_EMODE);
    /* Readable by all is fine: public keys are not secret. */
    assert_int_equal(chmod(t->allow, 0444), 0);
    assert_int_equal(agent_keys_read_allow(t->allow, keys, 4, &n, msg, sizeof msg), AGENT_KEYS_OK);
    assert_int_equal(n, 1);
    /* Owned by another (non-root) user: refused. Needs root to chown. */
    if (geteuid() == 0) {
        assert_int_equal(chown(t->allow, 12345, 12345), 0);
        assert_int_equal(agent_keys_read_allow(t->allow, keys, 4, &n, msg, sizeof msg),
                         AGENT_KEYS_EMODE);
        assert_non_null(strstr(msg, "owned by uid 12345"));
    }
    /* A directory is not a list. */
    assert_int_equal(agent_keys_read_allow(t->dir, keys, 4, &n, msg, sizeof msg), AGENT_KEYS_EMODE);
}

/* Found by fuzz_keys: a NUL byte ended a line early, so "#\0..." was a
 * comment whatever followed, and a key after a NUL past the first 255 bytes
 * of a commented-out line was read as a line of its own and admitted. A
 * line holding a NUL is now refused, naming the line. */
static void allow_list_nul_byte(void **state)
{
    tmpdir *t = *state;
    net_identity a;
    assert_int_equal(net_identity_generate(&a), NET_OK);
    char ha[AGENT_KEYS_HEX_SIZE];
    agent_keys_hex(a.pk, ha);
    char text[512];
    size_t n = 0;
    text[n++] = '#';
    text[n++] = '\0';
    while (n < 255)
        text[n++] = ' ';
    memcpy(text + n, ha, 64);
    n += 64;
    text[n++] = '\n';
    write_raw(t->allow, text, n, 0644);
    uint8_t keys[4 * NET_PUBLIC_KEY_SIZE];
    size_t count = 99;
    char msg[512];
    assert_int_equal(agent_keys_read_allow(t->allow, keys, 4, &count, msg, sizeof msg),
                     AGENT_KEYS_EFORMAT);
    assert_int_equal(count, 0);
    assert_non_null(strstr(msg, ":1:"));
    /* a short line with a NUL, after a good one */
    n = 0;
    memcpy(text, ha, 64), n = 64;
    text[n++] = '\n';
    text[n++] = '\0';
    text[n++] = '\n';
    write_raw(t->allow, text, n, 0644);
    assert_int_equal(agent_keys_read_allow(t->allow, keys, 4, &count, msg, sizeof msg),
                     AGENT_KEYS_EFORMAT);
    assert_non_null(strstr(msg, ":2: NUL byte"));
}

static void keygen_command(void **state)
{
    tmpdir *t = *state;
    char *argv1[] = {"keygen", "--out", t->dir, "--network-key", t->net, NULL};
    assert_int_equal(cmd_keygen(5, argv1), 0);
    net_identity id;
    uint8_t key[NET_NETWORK_KEY_SIZE], pk[NET_PUBLIC_KEY_SIZE];
    char msg[512];
    assert_int_equal(agent_keys_read_identity(t->key, &id, msg, sizeof msg), AGENT_KEYS_OK);
    assert_int_equal(agent_keys_read_public(t->pub, pk, msg, sizeof msg), AGENT_KEYS_OK);
    assert_memory_equal(pk, id.pk, sizeof pk);
    assert_int_equal(agent_keys_read_network(t->net, key, msg, sizeof msg), AGENT_KEYS_OK);
    /* refuses to overwrite, then --force replaces */
    assert_int_equal(cmd_keygen(5, argv1), 1);
    net_identity again;
    assert_int_equal(agent_keys_read_identity(t->key, &again, msg, sizeof msg), AGENT_KEYS_OK);
    assert_memory_equal(again.pk, id.pk, sizeof pk);
    char *argv2[] = {"keygen", "--out", t->dir, "--force", NULL};
    assert_int_equal(cmd_keygen(4, argv2), 0);
    assert_int_equal(agent_keys_read_identity(t->key, &again, msg, sizeof msg), AGENT_KEYS_OK);
    assert_memory_not_equal(again.pk, id.pk, sizeof pk);
    char *argv3[] = {"keygen", "--bogus", NULL};
    assert_int_equal(cmd_keygen(2, argv3), 2);
    char *argv4[] = {"keygen", NULL};
    assert_int_equal(cmd_keygen(1, argv4), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(identity_round_trip, setup, teardown),
        cmocka_unit_test(node_id_is_blake2b_prefix),
        cmocka_unit_test_setup_teardown(secret_file_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(network_key, setup, teardown),
        cmocka_unit_test_setup_teardown(network_key_ring_file, setup, teardown),
        cmocka_unit_test_setup_teardown(allow_list_file, setup, teardown),
        cmocka_unit_test_setup_teardown(allow_list_nul_byte, setup, teardown),
        cmocka_unit_test_setup_teardown(keygen_command, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
