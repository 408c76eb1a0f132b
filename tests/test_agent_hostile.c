/* Hostile input against a real running agent (processes on 127.0.0.1):
 * two `murmur agent` processes train together while a foreign client sends
 * garbage, an oversized length prefix, a HELLO under the wrong network key,
 * and, after completing a genuine handshake with the right key, a sealed
 * frame twice (replay), a tampered one and a truncated one; then an agent
 * holding the wrong network key tries to join. Every rejection is counted
 * under its cause in agent 1's /metrics, both agents stay up, keep
 * training and keep each other as peers.
 *
 * The client uses the real net/channel handshake and the transport's
 * framing (a 4-byte big-endian length, then the record). Bounded: every
 * socket has a 5 s timeout, every wait a deadline; the agents are killed
 * and the temporary directory removed whatever happens. */
#include "tests/harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/keys.h"
#include "gossip/wire.h"
#include "net/channel.h"
#include "net/net.h"

#define AGENTS_MAX 3

static char g_bin[1024];
static char g_dir[256];
static pid_t g_pid[AGENTS_MAX + 1];
static int g_base;

static void kill_all(void)
{
    for (int i = 0; i <= AGENTS_MAX; i++)
        if (g_pid[i] > 0) {
            kill(g_pid[i], SIGKILL);
            waitpid(g_pid[i], NULL, 0);
            g_pid[i] = 0;
        }
    if (g_dir[0]) {
        char cmd[512];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", g_dir);
        g_dir[0] = '\0';
    }
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...)
{
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    if (system(cmd) != 0)
        fail_msg("command failed: %s", cmd);
}

static int port_free(int port)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0)
        return 0;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int ok = bind(s, (struct sockaddr *)&a, sizeof a) == 0;
    close(s);
    return ok;
}

static int tcp_connect(int port)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(s >= 0);
    struct timeval tv = {.tv_sec = 5};
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(s, (struct sockaddr *)&a, sizeof a) != 0) {
        close(s);
        return -1;
    }
    return s;
}

static int send_all(int s, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n) {
        ssize_t k = send(s, b, n, MSG_NOSIGNAL);
        if (k <= 0)
            return -1;
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

static int recv_all(int s, void *p, size_t n)
{
    uint8_t *b = p;
    while (n) {
        ssize_t k = recv(s, b, n, 0);
        if (k <= 0)
            return -1;
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

/* One record with the transport's 4-byte big-endian length prefix. */
static int send_record(int s, const uint8_t *rec, size_t len)
{
    uint8_t pre[4];
    gossip_put_u32(pre, (uint32_t)len);
    return send_all(s, pre, 4) || send_all(s, rec, len) ? -1 : 0;
}

static long recv_record(int s, uint8_t *buf, size_t cap)
{
    uint8_t pre[4];
    if (recv_all(s, pre, 4))
        return -1;
    uint32_t len = gossip_get_u32(pre);
    if (len > cap || recv_all(s, buf, len))
        return -1;
    return (long)len;
}

/* GET path from agent i's metrics server into out (NUL-terminated). */
static int http_get(int i, const char *path, char *out, size_t cap)
{
    int s = tcp_connect(g_base + 100 + i);
    if (s < 0)
        return -1;
    char req[256];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", path);
    size_t got = 0;
    if (send_all(s, req, (size_t)n) == 0) {
        ssize_t k;
        while (got + 1 < cap && (k = recv(s, out + got, cap - 1 - got, 0)) > 0)
            got += (size_t)k;
    }
    out[got] = '\0';
    close(s);
    return got ? 0 : -1;
}

/* A number after `"key":` in agent i's /status, or -1. */
static double status_num(int i, const char *key)
{
    static char buf[8192];
    if (http_get(i, "/status", buf, sizeof buf))
        return -1;
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(buf, pat);
    return p ? strtod(p + strlen(pat), NULL) : -1;
}

/* murmur_rejections_total{cause="c"} of agent i (0 when absent). */
static double rejections(const char *metrics, const char *cause)
{
    char pat[128];
    snprintf(pat, sizeof pat, "murmur_rejections_total{cause=\"%s\"} ", cause);
    const char *p = strstr(metrics, pat);
    return p ? strtod(p + strlen(pat), NULL) : 0;
}

static const char *g_allow; /* --allow-list FILE for the next start_agent, or NULL */

static void start_agent(int i, const char *netkey, int seed)
{
    char dir[512], listen[64], metrics[64], seedaddr[64], key[512], log[512];
    snprintf(dir, sizeof dir, "%s/a%d", g_dir, i);
    snprintf(listen, sizeof listen, "127.0.0.1:%d", g_base + i);
    snprintf(metrics, sizeof metrics, "127.0.0.1:%d", g_base + 100 + i);
    snprintf(seedaddr, sizeof seedaddr, "127.0.0.1:%d", g_base + 1);
    snprintf(key, sizeof key, "%s/%s", g_dir, netkey);
    snprintf(log, sizeof log, "%s/a%d.log", g_dir, i);
    pid_t p = fork();
    assert_true(p >= 0);
    if (p == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd >= 0) {
            dup2(fd, 2);
            dup2(fd, 1);
        }
        const char *argv[40];
        int k = 0;
        argv[k++] = g_bin;
        argv[k++] = "agent";
        argv[k++] = "--data-dir";
        argv[k++] = dir;
        argv[k++] = "--listen";
        argv[k++] = listen;
        argv[k++] = "--metrics";
        argv[k++] = metrics;
        argv[k++] = "--network-key-file";
        argv[k++] = key;
        if (seed) {
            argv[k++] = "--seed";
            argv[k++] = seedaddr;
        }
        if (g_allow) {
            argv[k++] = "--allow-list";
            argv[k++] = g_allow;
        }
        const char *sets[] = {"model.spec=mlp:32",
                              "model.eval_every_steps=200",
                              "model.eval_samples=500",
                              "membership.probe_interval_ms=200",
                              "membership.probe_timeout_ms=100",
                              "shards.replication=2",
                              "log.progress_interval_ms=500"};
        for (size_t s = 0; s < sizeof sets / sizeof sets[0]; s++) {
            argv[k++] = "--set";
            argv[k++] = sets[s];
        }
        argv[k] = NULL;
        execv(g_bin, (char *const *)argv);
        _exit(127);
    }
    g_pid[i] = p;
}

static int alive(int i)
{
    return g_pid[i] > 0 && waitpid(g_pid[i], NULL, WNOHANG) == 0;
}

/* Wait until both agents train with each other as peer (or fail). */
static void wait_training(double limit_s, double min_step)
{
    double end = now_s() + limit_s;
    while (now_s() < end) {
        int ok = 1;
        for (int i = 1; i <= 2 && ok; i++)
            ok = alive(i) && status_num(i, "peers") == 1 && status_num(i, "step") >= min_step;
        if (ok)
            return;
        usleep(200000);
    }
    fail_msg("agents not training together within %.0f s (agent 1 step %g peers %g, agent 2 step "
             "%g peers %g)",
             limit_s, status_num(1, "step"), status_num(1, "peers"), status_num(2, "step"),
             status_num(2, "peers"));
}

/* Wait until agents 1 and 2 see each other as peers (or fail). */
static void wait_peers(double limit_s)
{
    double end = now_s() + limit_s;
    while (now_s() < end) {
        if (alive(1) && alive(2) && status_num(1, "peers") == 1 && status_num(2, "peers") == 1)
            return;
        usleep(200000);
    }
    fail_msg("agents not peers within %.0f s (peers %g and %g)", limit_s, status_num(1, "peers"),
             status_num(2, "peers"));
}

/* A genuine session, one good sealed frame, then a bad record: kind 0
 * the same frame again (replay), 1 a tampered frame, 2 a truncated one. */
static int client_handshake(int s, net_channel *ch);

static uint64_t wall_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static uint8_t g_hello[NET_CHANNEL_HS_MAX]; /* the HELLO of a finished session */
static size_t g_hello_len;

static void bad_session(const uint8_t *netkey, int kind)
{
    static uint8_t rec[NET_CHANNEL_HS_MAX + 4096];
    net_identity id;
    assert_int_equal(net_identity_generate(&id), NET_OK);
    net_channel_config cc = {
        .self = &id, .network_key = netkey, .initiator = 1, .wall_ns = wall_now_ns()};
    net_channel *ch;
    assert_int_equal(net_channel_create(&ch, &cc, 0), NET_OK);
    const uint8_t *hello;
    assert_int_equal(net_channel_poll_send(ch, &hello, &g_hello_len), 1);
    memcpy(g_hello, hello, g_hello_len);
    int s = tcp_connect(g_base + 1);
    assert_true(s >= 0);
    assert_int_equal(send_record(s, g_hello, g_hello_len), 0);
    assert_true(client_handshake(s, ch));
    assert_true(net_channel_established(ch));
    const uint8_t junk[] = "not a gossip frame";
    size_t sealed;
    assert_int_equal(net_channel_seal(ch, junk, sizeof junk, rec, sizeof rec, &sealed, 0), NET_OK);
    assert_int_equal(send_record(s, rec, sealed), 0); /* accepted by the channel */
    if (kind == 0) {
        (void)send_record(s, rec, sealed);
    } else if (kind == 1) {
        assert_int_equal(net_channel_seal(ch, junk, sizeof junk, rec, sizeof rec, &sealed, 0),
                         NET_OK);
        rec[sealed - 1] ^= 0x01;
        (void)send_record(s, rec, sealed);
    } else {
        rec[0] = NET_REC_DATA;
        (void)send_record(s, rec, 20); /* shorter than header + tag */
    }
    usleep(300000);
    close(s);
    net_channel_destroy(ch);
    net_identity_wipe(&id);
}

static void hostile_frames_rejected_and_counted(void **state)
{
    (void)state;
    kill_all(); /* whatever a failed earlier test left running */
    /* Setup: keys, 4 shards held by agent 1, two agents. */
    snprintf(g_dir, sizeof g_dir, "/tmp/murmur-hostile-XXXXXX");
    assert_non_null(mkdtemp(g_dir));
    g_base = 19600 + (int)(getpid() % 50) * 10;
    while (!(port_free(g_base + 1) && port_free(g_base + 2) && port_free(g_base + 3) &&
             port_free(g_base + 101) && port_free(g_base + 102) && port_free(g_base + 103)))
        g_base += 500;
    sh("'%s' keygen --network-key '%s/net.key' >/dev/null", g_bin, g_dir);
    sh("'%s' keygen --network-key '%s/wrong.key' >/dev/null", g_bin, g_dir);
    sh("'%s' shard --shards 4 --out '%s/all' >/dev/null", g_bin, g_dir);
    for (int i = 1; i <= 3; i++)
        sh("mkdir -p '%s/a%d/shards' && '%s' keygen --out '%s/a%d' >/dev/null && cp "
           "'%s/all/catalog' "
           "'%s/a%d/shards/'",
           g_dir, i, g_bin, g_dir, i, g_dir, g_dir, i);
    sh("cp '%s'/all/*.msh '%s/a1/shards/'", g_dir, g_dir);
    start_agent(1, "net.key", 0);
    usleep(300000);
    start_agent(2, "net.key", 1);
    wait_training(40, 200);
    double step1 = status_num(1, "step"), step2 = status_num(2, "step");

    uint8_t netkey[NET_NETWORK_KEY_SIZE], wrongkey[NET_NETWORK_KEY_SIZE];
    char path[512];
    snprintf(path, sizeof path, "%s/net.key", g_dir);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fread(netkey, 1, sizeof netkey, f), sizeof netkey);
    fclose(f);
    memcpy(wrongkey, netkey, sizeof wrongkey);
    wrongkey[0] ^= 0x5a;

    /* 1. Genuine handshakes with the right network key and a fresh
     * identity, then a sealed frame followed by the same frame again
     * (replay), a tampered frame, or a truncated one. The agent drops a
     * connection at its first bad record (over TCP nothing is lost or
     * reordered), so each attack has its own session. */
    for (int kind = 0; kind < 3; kind++)
        bad_session(netkey, kind);

    /* 2. A recorded HELLO replayed: no reply at all (no signature spent,
     * nothing revealed), counted as stale_hello. */
    int s = tcp_connect(g_base + 1);
    if (s >= 0) {
        uint8_t reply[NET_CHANNEL_HS_MAX];
        (void)send_record(s, g_hello, g_hello_len);
        assert_true(recv_record(s, reply, sizeof reply) < 0);
        close(s);
    }

    /* 2b. Garbage instead of a HELLO. */
    s = tcp_connect(g_base + 1);
    if (s >= 0) {
        uint8_t g[64];
        for (size_t k = 0; k < sizeof g; k++)
            g[k] = (uint8_t)(0xEE ^ (k * 37));
        (void)send_record(s, g, sizeof g);
        usleep(200000);
        close(s);
    }
    /* 3. An oversized length prefix. */
    s = tcp_connect(g_base + 1);
    if (s >= 0) {
        uint8_t pre[4];
        gossip_put_u32(pre, 0x7fffffffu);
        (void)send_all(s, pre, 4);
        usleep(200000);
        close(s);
    }
    /* 4. A HELLO keyed with the wrong network key. */
    net_identity id;
    assert_int_equal(net_identity_generate(&id), NET_OK);
    net_channel_config cc = {
        .self = &id, .network_key = wrongkey, .initiator = 1, .wall_ns = wall_now_ns()};
    net_channel *ch;
    assert_int_equal(net_channel_create(&ch, &cc, 0), NET_OK);
    const uint8_t *out;
    size_t outlen;
    s = tcp_connect(g_base + 1);
    if (s >= 0) {
        assert_int_equal(net_channel_poll_send(ch, &out, &outlen), 1);
        (void)send_record(s, out, outlen);
        usleep(200000);
        close(s);
    }
    net_channel_destroy(ch);
    net_identity_wipe(&id);

    /* 5. A whole agent holding the wrong network key tries to join. */
    start_agent(3, "wrong.key", 1);
    usleep(2500000);
    assert_true(alive(3)); /* refused, but it keeps trying and does not crash */
    kill(g_pid[3], SIGKILL);
    waitpid(g_pid[3], NULL, 0);
    g_pid[3] = 0;

    /* Counted by cause on agent 1 (metrics refresh with the progress). */
    static char m[65536];
    const char *causes[] = {"replay",   "auth",    "truncated",  "bad_record",
                            "oversize", "bad_mac", "stale_hello"};
    double end = now_s() + 10;
    int all = 0;
    while (!all && now_s() < end) {
        usleep(500000);
        assert_int_equal(http_get(1, "/metrics", m, sizeof m), 0);
        all = 1;
        for (size_t c = 0; c < sizeof causes / sizeof causes[0]; c++)
            all &= rejections(m, causes[c]) > 0;
    }
    for (size_t c = 0; c < sizeof causes / sizeof causes[0]; c++) {
        print_message("rejections{cause=%s} = %g\n", causes[c], rejections(m, causes[c]));
        if (!(rejections(m, causes[c]) > 0))
            fail_msg("no rejection counted under cause %s", causes[c]);
    }
    /* The junk frame that passed the channel was refused by the core. */
    print_message("cut_off = %g\n", rejections(m, "cut_off"));

    /* The cluster is unaffected: both agents up, training, still peers. */
    wait_training(20, 0);
    usleep(1500000);
    assert_true(alive(1) && alive(2));
    double s1 = status_num(1, "step"), s2 = status_num(2, "step");
    print_message("steps: agent 1 %g -> %g, agent 2 %g -> %g\n", step1, s1, step2, s2);
    assert_true(s1 > step1 && s2 > step2);
    assert_true(status_num(1, "peers") == 1 && status_num(2, "peers") == 1);
    kill_all();
}

/* Drive a genuine client handshake over socket s (whatever the number of
 * records); 1 if the channel opened, 0 if the agent refused or closed. */
static int client_handshake(int s, net_channel *ch)
{
    static uint8_t rec[NET_CHANNEL_HS_MAX];
    for (int round = 0; round < 8; round++) {
        const uint8_t *out;
        size_t outlen;
        while (net_channel_poll_send(ch, &out, &outlen))
            if (send_record(s, out, outlen))
                return 0;
        if (net_channel_established(ch))
            return 1;
        if (net_channel_failed(ch))
            return 0;
        long n = recv_record(s, rec, sizeof rec);
        if (n <= 0)
            return 0;
        uint8_t *plain;
        size_t plen;
        if (net_channel_recv(ch, rec, (size_t)n, 0, &plain, &plen) != NET_OK)
            return 0;
    }
    return 0;
}

/* Issue 13, item 1: an allow-list file whose keys are all commented out
 * admits nobody (it used to admit every holder of the network key), and an
 * allow-list file other users may change is refused at start. */
static void allow_list_fail_closed(void **state)
{
    (void)state;
    kill_all(); /* whatever a failed earlier test left running */
    snprintf(g_dir, sizeof g_dir, "/tmp/murmur-allow-XXXXXX");
    assert_non_null(mkdtemp(g_dir));
    g_base = 21600 + (int)(getpid() % 50) * 10;
    while (!(port_free(g_base + 1) && port_free(g_base + 101)))
        g_base += 500;
    sh("'%s' keygen --network-key '%s/net.key' >/dev/null", g_bin, g_dir);
    sh("'%s' shard --shards 2 --out '%s/all' >/dev/null", g_bin, g_dir);
    sh("mkdir -p '%s/a1/shards' && '%s' keygen --out '%s/a1' >/dev/null && cp '%s'/all/* "
       "'%s/a1/shards/'",
       g_dir, g_bin, g_dir, g_dir, g_dir);
    char allow[512], log[512];
    snprintf(allow, sizeof allow, "%s/allow.txt", g_dir);
    snprintf(log, sizeof log, "%s/a1.log", g_dir);

    /* A group-writable list: the agent refuses to start, saying why. */
    sh("printf '# nobody\n' > '%s' && chmod 0664 '%s'", allow, allow);
    g_allow = allow;
    start_agent(1, "net.key", 0);
    int status = 0;
    double end = now_s() + 20;
    while (waitpid(g_pid[1], &status, WNOHANG) == 0 && now_s() < end)
        usleep(50000);
    assert_true(now_s() < end);
    g_pid[1] = 0;
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) != 0);
    sh("grep -q 'chmod go-w' '%s'", log);
    sh("rm -f '%s'", log);

    /* Comments only, mode 0644: the agent runs and admits nobody. */
    sh("chmod 0644 '%s'", allow);
    start_agent(1, "net.key", 0);
    g_allow = NULL;
    static char m[65536];
    end = now_s() + 20;
    while (http_get(1, "/metrics", m, sizeof m) != 0 && now_s() < end)
        usleep(100000);
    assert_true(alive(1));
    uint8_t netkey[NET_NETWORK_KEY_SIZE];
    char path[512];
    snprintf(path, sizeof path, "%s/net.key", g_dir);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fread(netkey, 1, sizeof netkey, f), sizeof netkey);
    fclose(f);
    int opened = 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        net_identity id;
        assert_int_equal(net_identity_generate(&id), NET_OK);
        net_channel_config cc = {
            .self = &id, .network_key = netkey, .initiator = 1, .wall_ns = wall_now_ns()};
        net_channel *ch;
        assert_int_equal(net_channel_create(&ch, &cc, 0), NET_OK);
        int s = tcp_connect(g_base + 1);
        assert_true(s >= 0);
        if (client_handshake(s, ch)) {
            /* Our side may open before the agent checks us; the agent must
             * then drop the connection without delivering anything. */
            static uint8_t rec[256];
            const uint8_t junk[] = "let me in";
            size_t sealed;
            assert_int_equal(net_channel_seal(ch, junk, sizeof junk, rec, sizeof rec, &sealed, 0),
                             NET_OK);
            (void)send_record(s, rec, sealed);
            opened += recv_record(s, rec, sizeof rec) > 0; /* the agent speaking to us */
        }
        close(s);
        net_channel_destroy(ch);
        net_identity_wipe(&id);
    }
    assert_int_equal(opened, 0);
    end = now_s() + 10;
    double refused = 0;
    while (refused < 2 && now_s() < end) {
        usleep(300000);
        assert_int_equal(http_get(1, "/metrics", m, sizeof m), 0);
        refused = rejections(m, "not_allowed");
    }
    print_message("rejections{cause=not_allowed} = %g\n", refused);
    assert_true(refused >= 2);
    assert_true(alive(1));
    kill_all();
}

/* Write text to path atomically (temp file, rename) with mode 0644. */
static void write_list(const char *path, const char *text)
{
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    assert_int_equal(chmod(tmp, 0644), 0);
    assert_int_equal(rename(tmp, path), 0);
}

/* Issue 13, item 1: revoking a key at run time. Agent 1 allows agent 2;
 * they train together; agent 2's key is commented out and agent 1 gets
 * SIGHUP: agent 2 is refused from then on (its links closed, its redials
 * counted as not_allowed) and drops out of agent 1's view, while agent 1
 * keeps running; restoring the key and SIGHUP again brings it back. */
static void allow_list_revoked_on_sighup(void **state)
{
    (void)state;
    kill_all(); /* whatever a failed earlier test left running */
    snprintf(g_dir, sizeof g_dir, "/tmp/murmur-revoke-XXXXXX");
    assert_non_null(mkdtemp(g_dir));
    g_base = 22600 + (int)(getpid() % 50) * 10;
    while (!(port_free(g_base + 1) && port_free(g_base + 2) && port_free(g_base + 101) &&
             port_free(g_base + 102)))
        g_base += 500;
    sh("'%s' keygen --network-key '%s/net.key' >/dev/null", g_bin, g_dir);
    sh("'%s' shard --shards 4 --out '%s/all' >/dev/null", g_bin, g_dir);
    for (int i = 1; i <= 2; i++)
        sh("mkdir -p '%s/a%d/shards' && '%s' keygen --out '%s/a%d' >/dev/null && cp "
           "'%s/all/catalog' '%s/a%d/shards/'",
           g_dir, i, g_bin, g_dir, i, g_dir, g_dir, i);
    sh("cp '%s'/all/*.msh '%s/a1/shards/'", g_dir, g_dir);
    char allow[512], pub[512], hex[AGENT_KEYS_HEX_SIZE + 8], text[256];
    snprintf(allow, sizeof allow, "%s/allow.txt", g_dir);
    snprintf(pub, sizeof pub, "%s/a2/murmur.pub", g_dir);
    FILE *f = fopen(pub, "r");
    assert_non_null(f);
    assert_non_null(fgets(hex, sizeof hex, f));
    fclose(f);
    hex[strcspn(hex, "\n")] = '\0';
    snprintf(text, sizeof text, "# agent 2\n%s\n", hex);
    write_list(allow, text);
    g_allow = allow;
    start_agent(1, "net.key", 0);
    g_allow = NULL;
    usleep(300000);
    start_agent(2, "net.key", 1);
    wait_peers(40);

    static char m[65536];
    assert_int_equal(http_get(1, "/metrics", m, sizeof m), 0);
    double before = rejections(m, "not_allowed");
    snprintf(text, sizeof text, "# agent 2 (revoked)\n# %s\n", hex);
    write_list(allow, text);
    double t0 = now_s();
    assert_int_equal(kill(g_pid[1], SIGHUP), 0);
    double refused = before, t_refused = -1, end = t0 + 15;
    while (now_s() < end && (refused <= before || status_num(1, "peers") != 0)) {
        usleep(100000);
        if (http_get(1, "/metrics", m, sizeof m) == 0)
            refused = rejections(m, "not_allowed");
        if (t_refused < 0 && refused > before)
            t_refused = now_s() - t0;
    }
    print_message("revoked: first refusal seen after %.2f s, not_allowed %g -> %g\n", t_refused,
                  before, refused);
    assert_true(refused > before);
    assert_true(status_num(1, "peers") == 0);
    assert_true(alive(1) && alive(2));
    sh("grep -q 'allow_list_reloaded' '%s/a1.log'", g_dir);

    /* Restored: agent 2 is admitted again and they train together. */
    snprintf(text, sizeof text, "%s\n", hex);
    write_list(allow, text);
    assert_int_equal(kill(g_pid[1], SIGHUP), 0);
    wait_peers(30);
    kill_all();
}

/* Issue 13, item 5: rotate the network key of a running cluster without
 * stopping it. Both agents read one key file; it becomes K1+K2 (K2
 * accepted), then K2+K1 (K2 used), then K2 (K1 retired), with a SIGHUP to
 * both agents after each change. Through all of it they stay peers and
 * keep mixing; the links made under K1 are closed and re-made under K2;
 * an agent holding only K1 cannot join afterwards. */
static void network_key_rotation_on_sighup(void **state)
{
    (void)state;
    kill_all();
    snprintf(g_dir, sizeof g_dir, "/tmp/murmur-rotate-XXXXXX");
    assert_non_null(mkdtemp(g_dir));
    g_base = 23600 + (int)(getpid() % 50) * 10;
    while (!(port_free(g_base + 1) && port_free(g_base + 2) && port_free(g_base + 3) &&
             port_free(g_base + 101) && port_free(g_base + 102) && port_free(g_base + 103)))
        g_base += 500;
    sh("'%s' keygen --network-key '%s/net.key' >/dev/null", g_bin, g_dir);
    sh("cp '%s/net.key' '%s/k1.key' && '%s' keygen --network-key '%s/k2.key' >/dev/null", g_dir,
       g_dir, g_bin, g_dir);
    sh("'%s' shard --shards 4 --out '%s/all' >/dev/null", g_bin, g_dir);
    for (int i = 1; i <= 3; i++)
        sh("mkdir -p '%s/a%d/shards' && '%s' keygen --out '%s/a%d' >/dev/null && cp "
           "'%s/all/catalog' '%s/a%d/shards/'",
           g_dir, i, g_bin, g_dir, i, g_dir, g_dir, i);
    sh("cp '%s'/all/*.msh '%s/a1/shards/'", g_dir, g_dir);
    start_agent(1, "net.key", 0);
    usleep(300000);
    start_agent(2, "net.key", 1);
    wait_peers(40);
    static const char *const rings[] = {"k1.key k2.key", "k2.key k1.key", "k2.key"};
    double rounds = status_num(1, "mixing_rounds") + status_num(2, "mixing_rounds");
    for (int step = 0; step < 3; step++) {
        sh("cd '%s' && cat %s > ring.tmp && chmod 600 ring.tmp && mv ring.tmp net.key", g_dir,
           rings[step]);
        for (int i = 1; i <= 2; i++)
            assert_int_equal(kill(g_pid[i], SIGHUP), 0);
        /* Still peers, still mixing, a few seconds later. */
        double end = now_s() + 20, now_rounds = rounds;
        while (now_s() < end && now_rounds < rounds + 5) {
            usleep(300000);
            now_rounds = status_num(1, "mixing_rounds") + status_num(2, "mixing_rounds");
        }
        print_message("rotation step %d: mixing rounds %g -> %g\n", step, rounds, now_rounds);
        assert_true(now_rounds >= rounds + 5);
        wait_peers(20);
        rounds = now_rounds;
    }
    static char m[65536];
    double retired = 0;
    for (int i = 1; i <= 2; i++) {
        assert_int_equal(http_get(i, "/metrics", m, sizeof m), 0);
        retired += rejections(m, "key_retired");
    }
    print_message("key_retired = %g\n", retired);
    assert_true(retired >= 1);
    sh("grep -q 'network_keys_reloaded' '%s/a1.log'", g_dir);
    /* An agent that still holds only K1 is refused. */
    start_agent(3, "k1.key", 1);
    double end = now_s() + 10, bad = 0;
    while (now_s() < end && bad < 1) {
        usleep(300000);
        if (http_get(1, "/metrics", m, sizeof m) == 0)
            bad = rejections(m, "bad_mac");
    }
    assert_true(bad >= 1);
    assert_true(status_num(1, "peers") == 1);
    kill_all();
}

int main(int argc, char **argv)
{
    (void)argc;
    const char *b = getenv("BUILD");
    if (b && b[0]) {
        snprintf(g_bin, sizeof g_bin, "%s/murmur", b);
    } else {
        char tmp[1024];
        snprintf(tmp, sizeof tmp, "%s", argv[0]);
        snprintf(g_bin, sizeof g_bin, "%s/../murmur", dirname(tmp));
    }
    if (access(g_bin, X_OK) != 0) {
        fprintf(stderr, "test_agent_hostile: %s not built\n", g_bin);
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    atexit(kill_all);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(allow_list_fail_closed),
        cmocka_unit_test(allow_list_revoked_on_sighup),
        cmocka_unit_test(network_key_rotation_on_sighup),
        cmocka_unit_test(hostile_frames_rejected_and_counted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
