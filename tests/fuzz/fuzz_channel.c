/* fuzz_channel — libFuzzer target for net/channel, the first code to read
 * bytes from the network (make fuzz).
 *
 * Input layout: byte 0 picks the victim, the rest is a sequence of records,
 * each a 2-byte big-endian length then that many bytes (a short tail is
 * one last record).
 *   victim 0: a fresh responder (expects HELLO);
 *   victim 1: an initiator that has sent its HELLO (expects REPLY);
 *   victim 2: a responder after a real handshake (expects data records).
 * Invariants, any violation aborts:
 *   - every call returns NET_OK, NET_EREJECT or NET_EFAILED;
 *   - a failed channel stays failed and says so;
 *   - no random record opens as data (the tag cannot be forged);
 *   - for victim 2, a genuine frame sealed after the garbage still opens
 *     with its exact content: refusals leave the channel state intact.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/channel.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static net_identity id_i, id_r;
static uint8_t key[NET_NETWORK_KEY_SIZE];
static int ready;

static int hop(net_channel *from, net_channel *to)
{
    const uint8_t *rec;
    size_t len;
    uint8_t buf[NET_CHANNEL_HS_MAX];
    if (!net_channel_poll_send(from, &rec, &len))
        return -1;
    memcpy(buf, rec, len);
    uint8_t *plain;
    size_t pl;
    return net_channel_recv(to, buf, len, 1, &plain, &pl);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!ready) {
        if (net_init() || net_identity_generate(&id_i) || net_identity_generate(&id_r))
            abort();
        memset(key, 0x5A, sizeof key);
        ready = 1;
    }
    if (size < 1)
        return 0;
    int victim = data[0] % 3;
    data++, size--;
    net_channel_config ci = {.self = &id_i, .network_key = key, .initiator = 1};
    net_channel_config cr = {.self = &id_r, .network_key = key, .initiator = 0};
    net_channel *i = NULL, *r = NULL;
    if (net_channel_create(&i, &ci, 0) || net_channel_create(&r, &cr, 0))
        abort();
    net_channel *v = r;
    if (victim == 1) {
        const uint8_t *rec;
        size_t len;
        if (!net_channel_poll_send(i, &rec, &len))
            abort();
        v = i;
    } else if (victim == 2) {
        if (hop(i, r) || hop(r, i) || hop(i, r) || !net_channel_established(r))
            abort();
    }
    uint8_t *buf = malloc(size + 1);
    if (!buf)
        abort();
    int failed = 0;
    while (size) {
        size_t len = size;
        if (size >= 2) {
            len = ((size_t)data[0] << 8) | data[1];
            data += 2, size -= 2;
            if (len > size)
                len = size;
        }
        memcpy(buf, data, len);
        data += len, size -= len;
        uint8_t *plain = NULL;
        size_t pl = 0;
        int rc = net_channel_recv(v, buf, len, 1, &plain, &pl);
        if (rc != NET_OK && rc != NET_EREJECT && rc != NET_EFAILED)
            abort();
        if (failed && rc != NET_EFAILED)
            abort(); /* a failed channel never comes back */
        if (rc == NET_EFAILED) {
            failed = 1;
            if (!net_channel_failed(v))
                abort();
        }
        if (rc == NET_OK && plain)
            abort(); /* forged a Poly1305 tag */
    }
    if (victim == 2) {
        uint8_t msg[40], rec[40 + NET_CHANNEL_OVERHEAD];
        for (size_t k = 0; k < sizeof msg; k++)
            msg[k] = (uint8_t)(k * 3 + 1);
        size_t n;
        uint8_t *plain = NULL;
        size_t pl = 0;
        if (net_channel_seal(i, msg, sizeof msg, rec, sizeof rec, &n, 1) ||
            net_channel_recv(r, rec, n, 1, &plain, &pl) || pl != sizeof msg ||
            memcmp(plain, msg, pl))
            abort();
    }
    free(buf);
    net_channel_destroy(i);
    net_channel_destroy(r);
    return 0;
}
