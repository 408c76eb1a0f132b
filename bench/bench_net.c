/* bench_net — cost of the secure channel and of the transport on loopback.
 *
 *   build/bench/bench_net
 *
 * Prints, as medians of 5 runs: seal+open throughput of the channel (one
 * core, no I/O) at 1 KiB, 64 KiB, 256 KiB (an allreduce chunk) and 1 MiB
 * frames, encrypted and auth-only (node.encryption = auth-only: Poly1305
 * over the frame in clear); full handshakes per second (both sides, one
 * core); and transport throughput from one agent to another over
 * tcp://127.0.0.1 at 64 KiB, 256 KiB and 1 MiB frames (encrypted and
 * auth-only), and the rate of 256-byte frames (send, receive, decrypt,
 * deliver to the inbox). Last, libsodium's AEADs alone on 256 KiB (one
 * thread, CPU time): the channel's ChaCha20-Poly1305 and, where the CPU has
 * AES-NI, AES-256-GCM, each sealing the frame and over associated data
 * only (what an auth-only record costs: Poly1305, or GHASH): the figures
 * behind docs/BENCHMARKS.md's note on a faster cipher.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sodium.h>

#include "net/channel.h"
#include "net/transport.h"

#define RUNS 5

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

static net_identity id_a, id_b;
static uint8_t key[NET_NETWORK_KEY_SIZE];

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

static int open_pair(net_channel **i, net_channel **r, int auth_only)
{
    net_channel_config ci = {
        .self = &id_a, .network_key = key, .initiator = 1, .auth_only = auth_only};
    net_channel_config cr = {
        .self = &id_b, .network_key = key, .initiator = 0, .auth_only = auth_only};
    if (net_channel_create(i, &ci, 0) || net_channel_create(r, &cr, 0))
        return -1;
    return hop(*i, *r) || hop(*r, *i) || hop(*i, *r) ? -1 : 0;
}

static void bench_seal_open(size_t len, int auth_only)
{
    net_channel *i, *r;
    if (open_pair(&i, &r, auth_only) || net_channel_auth_only(i) != auth_only) {
        fprintf(stderr, "bench_net: handshake failed\n");
        exit(1);
    }
    uint8_t *rec = malloc(len + NET_CHANNEL_OVERHEAD), *plain = malloc(len);
    memset(plain, 7, len);
    size_t total = 64u * 1024u * 1024u, n = total / len;
    double mbps[RUNS];
    for (int run = 0; run < RUNS; run++) {
        double t0 = now_s();
        for (size_t k = 0; k < n; k++) {
            size_t out;
            uint8_t *p;
            size_t pl;
            if (net_channel_seal(i, plain, len, rec, len + NET_CHANNEL_OVERHEAD, &out, 1) ||
                net_channel_recv(r, rec, out, 1, &p, &pl)) {
                fprintf(stderr, "bench_net: seal/open failed\n");
                exit(1);
            }
        }
        mbps[run] = (double)(n * len) / (now_s() - t0) / 1e6;
    }
    printf("channel seal+open %7zu B frames%s: %8.0f MB/s (median of %d)\n", len,
           auth_only ? ", auth-only" : "", median(mbps, RUNS), RUNS);
    free(rec);
    free(plain);
    net_channel_destroy(i);
    net_channel_destroy(r);
}

static void bench_handshake(void)
{
    double rate[RUNS];
    for (int run = 0; run < RUNS; run++) {
        int n = 300;
        double t0 = now_s();
        for (int k = 0; k < n; k++) {
            net_channel *i, *r;
            if (open_pair(&i, &r, 0)) {
                fprintf(stderr, "bench_net: handshake failed\n");
                exit(1);
            }
            net_channel_destroy(i);
            net_channel_destroy(r);
        }
        rate[run] = n / (now_s() - t0);
    }
    printf("channel handshakes (both sides, one core): %8.0f /s (median of %d)\n",
           median(rate, RUNS), RUNS);
}

static void bench_transport(size_t len, size_t frames, int auth_only)
{
    net_transport *a, *b;
    net_transport_config ca = {.self = &id_a, .network_key = key, .auth_only = auth_only};
    net_transport_config cb = {.self = &id_b, .network_key = key, .auth_only = auth_only};
    ca.queue_frames_max = cb.queue_frames_max = 4096;
    char addr[GOSSIP_ADDR_MAX];
    if (net_transport_create(&a, &ca) || net_transport_create(&b, &cb) ||
        net_transport_listen(b, "tcp://127.0.0.1:0", addr, sizeof addr)) {
        fprintf(stderr, "bench_net: transport setup failed\n");
        exit(1);
    }
    uint8_t *f = calloc(1, len);
    double result[RUNS];
    for (int run = 0; run < RUNS; run++) {
        double t0 = now_s();
        size_t sent = 0, got = 0;
        while (got < frames) {
            /* keep at most 64 frames in flight so the queue never overflows */
            while (sent < frames && sent - got < 64) {
                int rc = net_transport_send(a, id_b.node_id, addr, f, len);
                if (rc == NET_OK)
                    sent++;
                else
                    break;
            }
            net_transport_wait(b, 1000);
            net_message m;
            while (net_transport_recv(b, &m) == NET_OK) {
                got++;
                net_message_release(&m);
            }
            if (now_s() - t0 > 60) {
                fprintf(stderr, "bench_net: transport stalled at %zu/%zu\n", got, frames);
                exit(1);
            }
        }
        double dt = now_s() - t0;
        result[run] = len >= 65536 ? (double)(frames * len) / dt / 1e6 : (double)frames / dt;
    }
    if (len >= 65536)
        printf("transport tcp loopback %7zu B frames%s: %8.0f MB/s (median of %d)\n", len,
               auth_only ? ", auth-only" : "", median(result, RUNS), RUNS);
    else
        printf("transport tcp loopback %7zu B frames: %8.0f frames/s (median of %d)\n", len,
               median(result, RUNS), RUNS);
    free(f);
    net_transport_destroy(a);
    net_transport_destroy(b);
}

/* One AEAD on 256 KiB frames: sealed (encrypt) or associated data only. */
static void bench_primitive(int gcm, int ad_only)
{
    enum { LEN = 256 * 1024, FRAMES = 1024 };
    uint8_t *buf = calloc(1, LEN), k[32], nonce[12] = {0}, tag[16], hdr[13] = {0};
    crypto_aead_aes256gcm_state st;
    randombytes_buf(k, sizeof k);
    if (gcm)
        crypto_aead_aes256gcm_beforenm(&st, k);
    double mbps[RUNS];
    for (int run = 0; run < RUNS; run++) {
        double t0 = cpu_s();
        for (int i = 0; i < FRAMES; i++) {
            nonce[11] = (uint8_t)i;
            if (gcm && ad_only)
                crypto_aead_aes256gcm_encrypt_detached_afternm(tag, tag, NULL, NULL, 0, buf, LEN,
                                                               NULL, nonce, &st);
            else if (gcm)
                crypto_aead_aes256gcm_encrypt_detached_afternm(buf, tag, NULL, buf, LEN, hdr,
                                                               sizeof hdr, NULL, nonce, &st);
            else if (ad_only)
                crypto_aead_chacha20poly1305_ietf_encrypt_detached(tag, tag, NULL, NULL, 0, buf,
                                                                   LEN, NULL, nonce, k);
            else
                crypto_aead_chacha20poly1305_ietf_encrypt_detached(buf, tag, NULL, buf, LEN, hdr,
                                                                   sizeof hdr, NULL, nonce, k);
        }
        mbps[run] = (double)LEN * FRAMES / (cpu_s() - t0) / 1e6;
    }
    printf("libsodium %s, 262144 B frames, %s: %8.0f MB/s of CPU time (median of %d)\n",
           gcm ? "aes256gcm" : "chacha20poly1305_ietf",
           ad_only ? "associated data only (auth-only)" : "sealed", median(mbps, RUNS), RUNS);
    sodium_memzero(k, sizeof k);
    free(buf);
}

int main(void)
{
    if (net_init() || net_identity_generate(&id_a) || net_identity_generate(&id_b))
        return 1;
    randombytes_buf(key, sizeof key);
    printf("command: build/bench/bench_net\n");
    for (int auth_only = 0; auth_only < 2; auth_only++) {
        bench_seal_open(1024, auth_only);
        bench_seal_open(64 * 1024, auth_only);
        bench_seal_open(256 * 1024, auth_only);
        bench_seal_open(1024 * 1024, auth_only);
    }
    bench_handshake();
    bench_transport(256, 20000, 0);
    for (int auth_only = 0; auth_only < 2; auth_only++) {
        bench_transport(64 * 1024, 2000, auth_only);
        bench_transport(256 * 1024, 800, auth_only);
        bench_transport(1024 * 1024, 200, auth_only);
    }
    for (int gcm = 0; gcm < 1 + (crypto_aead_aes256gcm_is_available() != 0); gcm++)
        for (int ad_only = 0; ad_only < 2; ad_only++)
            bench_primitive(gcm, ad_only);
    return 0;
}
