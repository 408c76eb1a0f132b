/* murmur bench — measure this host's network path as murmur uses it.
 *
 *   murmur bench allreduce --agents N --size BYTES [--bits B] [--auth-only]
 *                          [--iters K] [--warmup W] [--chunk VALUES]
 *
 * Starts N agents as processes on 127.0.0.1, each with its own identity,
 * the real transport (net/transport: NNG TCP streams) and secure channel
 * (net/channel: encrypted, or authenticated only with --auth-only), and the
 * real ring allreduce (gossip/allreduce through gossip_mix). After W warm-up
 * rounds (connections and handshakes happen there) it times K rounds of an
 * allreduce of BYTES of float32 and prints one line per round:
 *
 *   allreduce agents=4 size=67108864 bits=32 mode=encrypt run=1 cpu_ms=150.2
 *       algbw_gbps=0.412 time_ms=162.871 busbw_gbps=0.618
 *
 * (one line; cpu_ms= is the CPU time the busiest agent's process spent in
 * the round, its event loop and NNG's threads: close to time_ms or above,
 * the agent computed the whole round; well below, it waited for the
 * network or for a core). time_ms is the slowest agent's time from its
 * start of the round to holding the mean; every round starts together
 * (a barrier through the launcher's pipes, outside the timed region).
 * Bandwidths are
 * those of nccl-tests: algbw = BYTES / time, busbw = algbw x 2(N-1)/N (the
 * share of the data each link carries in a ring), in 10^9 bytes per second
 * of float32 payload, whatever --bits puts on the wire. A last line starting
 * with '#' gives the medians and the largest error of the mean against the
 * exact one (quantised rounds: --bits 8 or 4 trade accuracy for bytes).
 *
 * Processes: the launcher forks the agents before it starts any thread
 * (NNG starts its own in each agent) and talks to each over two pipes:
 * the agent's address up, the table of peers down, then per round "ready"
 * up, "go" down, and "done SECONDS CPU_SECONDS" up. Agents get SIGKILL if
 * the launcher dies (PR_SET_PDEATHSIG). Exit status: 0, 1 (an agent failed
 * or a round timed out), 2 (usage).
 */
#include "agent/commands.h"

#include <math.h>
#include <signal.h>
#include <sodium.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/cli.h"
#include "common/text.h"
#include "gossip/mix.h"
#include "gossip/wire.h"
#include "model/rng.h"
#include "net/net.h"
#include "net/transport.h"

/* Bounds. 64 agents on one host is already far past a useful measurement
 * on a few cores; rounds are bounded so a typo cannot run for hours; a
 * round that takes more than 120 s has stalled (64 MiB over a 10 Mbit/s
 * link takes 54 s). */
#define BENCH_AGENTS_MAX   64u
#define BENCH_ITERS_MAX    1000u
#define BENCH_ROUND_MAX_US (120ull * 1000000ull)
/* The largest vector gossip_mix takes: GOSSIP_CODEC_DIM_MAX float32. */
#define BENCH_SIZE_MAX ((uint64_t)GOSSIP_CODEC_DIM_MAX * 4u)
/* A line of the launcher protocol: "peer ID ADDR". */
#define BENCH_LINE_MAX (GOSSIP_ADDR_MAX + 64u)
_Static_assert(GOSSIP_ADDR_MAX == 64u, "the peer table reads addresses with %63s");

typedef struct bench_opts {
    uint32_t agents;
    uint64_t size;
    unsigned bits;
    int auth_only;
    uint32_t iters, warmup;
    uint32_t chunk;
} bench_opts;

enum { B_AGENTS, B_SIZE, B_BITS, B_AUTH_ONLY, B_ITERS, B_WARMUP, B_CHUNK, B_HELP };
static const common_flag bench_flags[] = {
    {"agents", 'n', true, B_AGENTS, "N", "agents (processes) on 127.0.0.1, 2..64", NULL},
    {"size", 0, true, B_SIZE, "BYTES",
     "bytes of float32 to allreduce (a multiple of 4; suffixes K, M: KiB, MiB), up to 64M", NULL},
    {"bits", 0, true, B_BITS, "B", "codec bits on the wire: 32 (exact, default), 16, 8 or 4", NULL},
    {"auth-only", 0, false, B_AUTH_ONLY, "",
     "authenticate frames without encrypting them (node.encryption = auth-only)", NULL},
    {"iters", 0, true, B_ITERS, "K", "timed rounds (default 5)", NULL},
    {"warmup", 0, true, B_WARMUP, "W", "untimed rounds first (default 2)", NULL},
    {"chunk", 0, true, B_CHUNK, "VALUES",
     "values per frame (mixing.chunk_values; default that of the agent)", NULL},
    {"help", 'h', false, B_HELP, "", "this text", NULL},
};
#define BENCH_FLAGS (sizeof bench_flags / sizeof bench_flags[0])

static void bench_usage(FILE *out)
{
    common_cli cli;
    common_cli_init(&cli, "murmur bench allreduce", bench_flags, BENCH_FLAGS, 0, NULL);
    fprintf(out, "usage: murmur bench allreduce --agents N --size BYTES [--bits B] [--auth-only]\n"
                 "                              [--iters K] [--warmup W] [--chunk VALUES]\n"
                 "\n"
                 "Ring allreduce of BYTES of float32 between N agents on 127.0.0.1 over the real\n"
                 "transport and secure channel; one line per timed round, ending in time_ms= and\n"
                 "busbw_gbps= (bus bandwidth as nccl-tests: BYTES / time x 2(N-1)/N).\n\n");
    common_cli_usage(&cli, out);
}

/* "1048576", "1024K", "64M" (binary units). */
static int parse_size(const char *s, uint64_t *out)
{
    char num[32];
    size_t n = strlen(s);
    uint64_t mul = 1;
    if (n && (s[n - 1] == 'K' || s[n - 1] == 'k' || s[n - 1] == 'M' || s[n - 1] == 'm')) {
        mul = (s[n - 1] == 'K' || s[n - 1] == 'k') ? 1024u : 1024u * 1024u;
        n--;
    }
    if (n == 0 || n >= sizeof num)
        return -1;
    memcpy(num, s, n);
    num[n] = 0;
    uint64_t v;
    if (!common_parse_u64(num, &v) || v > UINT64_MAX / mul)
        return -1;
    *out = v * mul;
    return 0;
}

static int parse_u32(const char *s, uint32_t lo, uint32_t hi, uint32_t *out)
{
    uint64_t v;
    if (!common_parse_u64(s, &v) || v < lo || v > hi)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU time of the whole process (event loop and NNG's threads). */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static gossip_time_us now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (gossip_time_us)ts.tv_sec * 1000000u + (gossip_time_us)ts.tv_nsec / 1000u;
}

/* Agent r's value j: a spread of values in [-1, 1] that differs per agent,
 * so that the mean is a real reduction and errors show. */
static float value_of(uint32_t r, uint32_t j)
{
    uint32_t h = j * 2654435761u + (r + 1u) * 40503u;
    h ^= h >> 15;
    return (float)(h % 2001u) / 1000.0f - 1.0f;
}

/* ---- one agent (a child process) ------------------------------------- */

static void *env_alloc(void *ctx, size_t size)
{
    (void)ctx;
    return malloc(size);
}

static void env_free(void *ctx, void *p)
{
    (void)ctx;
    free(p);
}

typedef struct bench_agent {
    const bench_opts *o;
    uint32_t rank;
    FILE *up, *down;
    net_identity id;
    net_transport *t;
    gossip_mix *mix;
    gossip_env env;
    model_rng rng; /* the agent's generator (agent/runtime.c), seeded from libsodium */
    uint64_t ids[BENCH_AGENTS_MAX];
    uint32_t dim;
    float *x, *out;
} bench_agent;

static int agent_fail(bench_agent *a, const char *fmt, const char *detail)
{
    fprintf(a->up, "fail ");
    fprintf(a->up, fmt, detail);
    fprintf(a->up, "\n");
    fflush(a->up);
    return 1;
}

static int flush_sends(bench_agent *a, gossip_time_us now)
{
    gossip_send s;
    while (gossip_mix_poll_send(a->mix, &s, now) == 1) {
        int rc = net_transport_send(a->t, s.dest, s.dest_addr, s.frame, s.len);
        if (rc != NET_OK)
            return rc;
    }
    return NET_OK;
}

/* One allreduce round: start, pump frames until the mixer is DONE. */
static int agent_round(bench_agent *a, double *seconds, double *cpu)
{
    double t0 = now_s(), c0 = cpu_s();
    gossip_time_us now = now_us(), limit = now + BENCH_ROUND_MAX_US;
    if (gossip_mix_start(a->mix, a->x, now) != GOSSIP_OK)
        return agent_fail(a, "%s", "the mixer refused to start a round");
    for (;;) {
        int rc = flush_sends(a, now);
        if (rc != NET_OK)
            return agent_fail(a, "sending a frame: %s", net_strerror(rc));
        if (gossip_mix_get_state(a->mix) == GOSSIP_MIX_DONE)
            break;
        if (now >= limit)
            return agent_fail(a, "%s", "a round took more than 120 s");
        gossip_time_us dl = gossip_mix_deadline(a->mix);
        int wait_ms = 100;
        if (dl != GOSSIP_TIME_NEVER && dl <= now)
            wait_ms = 0;
        else if (dl != GOSSIP_TIME_NEVER && (dl - now) / 1000u < 100u)
            wait_ms = (int)((dl - now) / 1000u) + 1;
        if (wait_ms)
            net_transport_wait(a->t, wait_ms);
        now = now_us();
        net_message msg;
        while (net_transport_recv(a->t, &msg) == NET_OK) {
            gossip_header h;
            if (gossip_header_decode(msg.data, msg.len, &h) == GOSSIP_OK && h.sender == msg.from)
                gossip_mix_recv(a->mix, msg.from, &h, msg.data + GOSSIP_HEADER_SIZE,
                                msg.len - GOSSIP_HEADER_SIZE, now);
            net_message_release(&msg);
            if ((rc = flush_sends(a, now)) != NET_OK)
                return agent_fail(a, "sending a frame: %s", net_strerror(rc));
        }
        gossip_mix_tick(a->mix, now);
    }
    int outcome = GOSSIP_EABORTED;
    gossip_mix_take(a->mix, a->out, &outcome);
    *seconds = now_s() - t0;
    *cpu = cpu_s() - c0;
    if (outcome != GOSSIP_OK) {
        const gossip_mix_stats *ms = gossip_mix_get_stats(a->mix);
        char why[256];
        int n =
            snprintf(why, sizeof why, "aborts_sent=%llu aborts_received=%llu rejected:",
                     (unsigned long long)ms->aborts_sent, (unsigned long long)ms->aborts_received);
        for (int e = 0; e < GOSSIP_ERR_COUNT && n > 0 && (size_t)n < sizeof why; e++)
            if (ms->rejected_by[e])
                n += snprintf(why + n, sizeof why - (size_t)n, " %s=%llu", gossip_strerror(e),
                              (unsigned long long)ms->rejected_by[e]);
        return agent_fail(a, "the round was aborted (%s)", why);
    }
    return 0;
}

static int run_agent(bench_agent *a, const uint8_t *network_key)
{
    const bench_opts *o = a->o;
    net_transport_config tc = {
        .self = &a->id,
        .network_key = network_key,
        .auth_only = o->auth_only,
        /* every chunk of a round may be queued at once */
        .queue_frames_max = 65536,
        .queue_bytes_max = (size_t)1 << 30,
    };
    char addr[GOSSIP_ADDR_MAX];
    int rc = net_transport_create(&a->t, &tc);
    if (rc == NET_OK)
        rc = net_transport_listen(a->t, "tcp://127.0.0.1:0", addr, sizeof addr);
    if (rc != NET_OK)
        return agent_fail(a, "transport: %s", net_strerror(rc));
    fprintf(a->up, "addr %s\n", addr);
    fflush(a->up);
    /* The peer table: N lines "peer INDEX ID ADDR". */
    char line[BENCH_LINE_MAX];
    for (uint32_t i = 0; i < o->agents; i++) {
        char paddr[GOSSIP_ADDR_MAX];
        unsigned long long pid;
        unsigned idx;
        if (!fgets(line, sizeof line, a->down) ||
            sscanf(line, "peer %u %llx %63s", &idx, &pid, paddr) != 3 || idx != i)
            return agent_fail(a, "%s", "bad peer table from the launcher");
        a->ids[i] = pid;
        if (i != a->rank && net_transport_set_addr(a->t, pid, paddr) != NET_OK)
            return agent_fail(a, "%s", "bad peer address");
    }
    uint64_t sorted[BENCH_AGENTS_MAX];
    memcpy(sorted, a->ids, o->agents * sizeof *sorted);
    for (uint32_t i = 1; i < o->agents; i++) /* insertion sort: N <= 64 */
        for (uint32_t j = i; j > 0 && sorted[j - 1] > sorted[j]; j--) {
            uint64_t tmp = sorted[j];
            sorted[j] = sorted[j - 1];
            sorted[j - 1] = tmp;
        }
    uint64_t seed[2];
    randombytes_buf(seed, sizeof seed);
    model_rng_seed(&a->rng, seed[0], seed[1]);
    a->env = (gossip_env){
        .alloc = env_alloc, .free = env_free, .random = model_rng_callback, .random_ctx = &a->rng};
    gossip_mix_config mc = {
        .self = a->id.node_id,
        .dim = a->dim,
        .algos = 1u << GOSSIP_MIX_ALLREDUCE,
        .algo = GOSSIP_MIX_ALLREDUCE,
        .bits = o->bits == 32 ? 0 : o->bits,
        .chunk_values = o->chunk,
        .members_max = o->agents,
        .step_timeout_us = 30ull * 1000000ull,
    };
    if (gossip_mix_create(&a->mix, &a->env, &mc) != GOSSIP_OK)
        return agent_fail(a, "%s", "cannot create the mixer (out of memory?)");
    gossip_view v = {.epoch = 1, .n = o->agents, .ids = sorted};
    if (gossip_mix_set_view(a->mix, &v, now_us()) != GOSSIP_OK)
        return agent_fail(a, "%s", "the mixer refused the view");
    a->x = malloc((size_t)a->dim * sizeof *a->x);
    a->out = malloc((size_t)a->dim * sizeof *a->out);
    if (!a->x || !a->out)
        return agent_fail(a, "%s", "out of memory for the vectors");
    for (uint32_t j = 0; j < a->dim; j++)
        a->x[j] = value_of(a->rank, j);
    for (uint32_t r = 0; r < o->warmup + o->iters; r++) {
        fprintf(a->up, "ready\n");
        fflush(a->up);
        if (!fgets(line, sizeof line, a->down) || strcmp(line, "go\n"))
            return 1; /* the launcher gave up */
        double secs, cpu;
        if (agent_round(a, &secs, &cpu))
            return 1;
        fprintf(a->up, "done %.9f %.9f\n", secs, cpu);
        fflush(a->up);
    }
    /* Largest error of the last result against the exact mean. */
    double err = 0;
    for (uint32_t j = 0; j < a->dim; j++) {
        double mean = 0;
        for (uint32_t r = 0; r < o->agents; r++)
            mean += value_of(r, j);
        mean /= o->agents;
        double e = fabs(a->out[j] - mean);
        if (e > err)
            err = e;
    }
    fprintf(a->up, "error %.9g\n", err);
    fflush(a->up);
    return 0;
}

static int agent_main(const bench_opts *o, uint32_t rank, int up_fd, int down_fd,
                      const net_identity *id, const uint8_t *network_key)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    bench_agent a = {.o = o, .rank = rank, .id = *id, .dim = (uint32_t)(o->size / 4u)};
    a.up = fdopen(up_fd, "w");
    a.down = fdopen(down_fd, "r");
    if (!a.up || !a.down)
        return 1;
    int rc = run_agent(&a, network_key);
    /* Linger until the launcher has every result: a peer may still be
     * pulling our last frames. */
    char line[16];
    while (fgets(line, sizeof line, a.down))
        ;
    gossip_mix_destroy(a.mix);
    net_transport_destroy(a.t);
    free(a.x);
    free(a.out);
    net_identity_wipe(&a.id);
    fclose(a.up);
    fclose(a.down);
    return rc;
}

/* ---- the launcher ------------------------------------------------------ */

typedef struct bench_child {
    pid_t pid;
    FILE *up, *down;
} bench_child;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Read one line from agent i into line; on "fail" or EOF print why. */
static int child_line(bench_child *c, uint32_t i, char *line, size_t cap, const char *want)
{
    if (!fgets(line, (int)cap, c[i].up)) {
        fprintf(stderr, "murmur bench: agent %u exited\n", i + 1);
        return -1;
    }
    if (!strncmp(line, "fail ", 5)) {
        fprintf(stderr, "murmur bench: agent %u: %s", i + 1, line + 5);
        return -1;
    }
    if (strncmp(line, want, strlen(want))) {
        fprintf(stderr, "murmur bench: agent %u said '%s'\n", i + 1, line);
        return -1;
    }
    return 0;
}

static int launch(const bench_opts *o)
{
    if (net_init() != NET_OK) {
        fprintf(stderr, "murmur bench: libsodium failed to initialise\n");
        return 1;
    }
    uint8_t key[NET_NETWORK_KEY_SIZE];
    randombytes_buf(key, sizeof key);
    net_identity ids[BENCH_AGENTS_MAX];
    bench_child kids[BENCH_AGENTS_MAX];
    memset(kids, 0, sizeof kids);
    for (uint32_t i = 0; i < o->agents; i++)
        if (net_identity_generate(&ids[i]) != NET_OK) {
            fprintf(stderr, "murmur bench: cannot generate keys\n");
            return 1;
        }
    fflush(stdout);
    fflush(stderr);
    int status = 1;
    uint32_t started = 0;
    for (; started < o->agents; started++) {
        int up[2], down[2];
        if (pipe(up))
            break;
        if (pipe(down)) {
            close(up[0]);
            close(up[1]);
            break;
        }
        pid_t p = fork();
        if (p < 0) {
            close(up[0]);
            close(up[1]);
            close(down[0]);
            close(down[1]);
            break;
        }
        if (p == 0) {
            close(up[0]);
            close(down[1]);
            for (uint32_t k = 0; k < started; k++) { /* the other agents' pipes */
                fclose(kids[k].up);
                fclose(kids[k].down);
            }
            _exit(agent_main(o, started, up[1], down[0], &ids[started], key));
        }
        close(up[1]);
        close(down[0]);
        kids[started].pid = p;
        kids[started].up = fdopen(up[0], "r");
        kids[started].down = fdopen(down[1], "w");
        if (!kids[started].up || !kids[started].down) {
            started++;
            goto out;
        }
    }
    if (started < o->agents) {
        fprintf(stderr, "murmur bench: cannot start agent %u\n", started + 1);
        goto out;
    }
    char line[BENCH_LINE_MAX];
    char addrs[BENCH_AGENTS_MAX][GOSSIP_ADDR_MAX];
    for (uint32_t i = 0; i < o->agents; i++) {
        if (child_line(kids, i, line, sizeof line, "addr "))
            goto out;
        line[strcspn(line, "\n")] = 0;
        size_t n = strlen(line + 5);
        if (n >= sizeof addrs[i]) {
            fprintf(stderr, "murmur bench: agent %u: address too long\n", i + 1);
            goto out;
        }
        memcpy(addrs[i], line + 5, n + 1);
    }
    for (uint32_t i = 0; i < o->agents; i++) {
        for (uint32_t k = 0; k < o->agents; k++)
            fprintf(kids[i].down, "peer %u %016llx %s\n", k, (unsigned long long)ids[k].node_id,
                    addrs[k]);
        fflush(kids[i].down);
    }
    const char *mode = o->auth_only ? "auth-only" : "encrypt";
    double times[BENCH_ITERS_MAX], busbws[BENCH_ITERS_MAX];
    double ring = 2.0 * (o->agents - 1) / o->agents;
    for (uint32_t r = 0; r < o->warmup + o->iters; r++) {
        for (uint32_t i = 0; i < o->agents; i++)
            if (child_line(kids, i, line, sizeof line, "ready"))
                goto out;
        for (uint32_t i = 0; i < o->agents; i++) {
            fputs("go\n", kids[i].down);
            fflush(kids[i].down);
        }
        double slowest = 0, busiest = 0;
        for (uint32_t i = 0; i < o->agents; i++) {
            if (child_line(kids, i, line, sizeof line, "done "))
                goto out;
            char *end;
            double s = strtod(line + 5, &end), c = strtod(end, NULL);
            if (s > slowest)
                slowest = s;
            if (c > busiest)
                busiest = c;
        }
        if (r < o->warmup)
            continue;
        uint32_t k = r - o->warmup;
        double algbw = (double)o->size / slowest / 1e9;
        times[k] = slowest * 1e3;
        busbws[k] = algbw * ring;
        printf("allreduce agents=%u size=%llu bits=%u mode=%s run=%u cpu_ms=%.3f algbw_gbps=%.6f "
               "time_ms=%.3f busbw_gbps=%.6f\n",
               o->agents, (unsigned long long)o->size, o->bits, mode, k + 1, busiest * 1e3, algbw,
               times[k], busbws[k]);
        fflush(stdout);
    }
    double err = 0;
    for (uint32_t i = 0; i < o->agents; i++) {
        if (child_line(kids, i, line, sizeof line, "error "))
            goto out;
        double e = strtod(line + 6, NULL);
        if (e > err)
            err = e;
    }
    printf("# allreduce agents=%u size=%llu bits=%u mode=%s runs=%u median time_ms=%.3f "
           "busbw_gbps=%.4f max_error=%.3g\n",
           o->agents, (unsigned long long)o->size, o->bits, mode, o->iters, median(times, o->iters),
           median(busbws, o->iters), err);
    /* Exact rounds must give the mean to float32 rounding (N terms). */
    status = o->bits == 32 && err > 1e-5 ? 1 : 0;
    if (status)
        fprintf(stderr, "murmur bench: the 32-bit mean is off by %g\n", err);
out:
    for (uint32_t i = 0; i < started; i++) {
        if (kids[i].down)
            fclose(kids[i].down); /* EOF: the agent leaves */
        kids[i].down = NULL;
    }
    for (uint32_t i = 0; i < started; i++) {
        int st = 0;
        if (status)
            kill(kids[i].pid, SIGKILL);
        waitpid(kids[i].pid, &st, 0);
        if (kids[i].up)
            fclose(kids[i].up);
    }
    for (uint32_t i = 0; i < o->agents; i++)
        net_identity_wipe(&ids[i]);
    sodium_memzero(key, sizeof key);
    return status;
}

static int bench_allreduce(int argc, char **argv)
{
    bench_opts o = {.bits = 32, .iters = 5, .warmup = 2};
    int have_agents = 0, have_size = 0;
    common_cli cli;
    common_cli_init(&cli, "murmur bench allreduce", bench_flags, BENCH_FLAGS, argc, argv);
    for (int id; (id = common_cli_next(&cli)) != COMMON_CLI_END;) {
        int bad = 0;
        switch (id) {
        case B_HELP:
            bench_usage(stdout);
            return 0;
        case B_AGENTS:
            bad = parse_u32(cli.arg, 2, BENCH_AGENTS_MAX, &o.agents);
            have_agents = 1;
            break;
        case B_SIZE:
            bad = parse_size(cli.arg, &o.size) || o.size == 0 || o.size % 4 ||
                  o.size > BENCH_SIZE_MAX;
            have_size = 1;
            break;
        case B_BITS:
            bad = parse_u32(cli.arg, 4, 32, &o.bits) ||
                  (o.bits != 32 && o.bits != 16 && o.bits != 8 && o.bits != 4);
            break;
        case B_AUTH_ONLY:
            o.auth_only = 1;
            break;
        case B_ITERS:
            bad = parse_u32(cli.arg, 1, BENCH_ITERS_MAX, &o.iters);
            break;
        case B_WARMUP:
            bad = parse_u32(cli.arg, 0, BENCH_ITERS_MAX, &o.warmup);
            break;
        case B_CHUNK:
            bad = parse_u32(cli.arg, 1, GOSSIP_MIX_CHUNK_VALUES_MAX, &o.chunk);
            break;
        case COMMON_CLI_POSITIONAL:
            fprintf(stderr, "murmur bench allreduce: unexpected argument '%s' (see --help)\n",
                    cli.arg);
            return 2;
        default:
            fprintf(stderr, "murmur bench allreduce: %s\n", cli.err);
            return 2;
        }
        if (bad) {
            fprintf(stderr, "murmur bench allreduce: bad value '%s' for %s (see --help)\n", cli.arg,
                    cli.given);
            return 2;
        }
    }
    if (!have_agents || !have_size) {
        fprintf(stderr, "murmur bench allreduce: --agents and --size are required\n\n");
        bench_usage(stderr);
        return 2;
    }
    return launch(&o);
}

int cmd_bench(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "allreduce"))
        return bench_allreduce(argc - 1, argv + 1);
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: murmur bench allreduce --agents N --size BYTES [OPTIONS]\n"
               "       (murmur bench allreduce --help for the options)\n");
        return 0;
    }
    if (argc >= 2)
        fprintf(stderr, "murmur bench: unknown benchmark '%s' (there is: allreduce)\n", argv[1]);
    else
        fprintf(stderr, "murmur bench: which benchmark? (there is: allreduce)\n");
    fprintf(stderr, "usage: murmur bench allreduce --agents N --size BYTES [OPTIONS]\n");
    return 2;
}
