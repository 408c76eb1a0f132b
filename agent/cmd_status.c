/* agent/cmd_status — `murmur status HOST:PORT`: show a running agent's state.
 *
 * `murmur status --cluster HOST:PORT`: one table of every member that agent
 * knows (GET /members), each row from the member's own /status where it
 * answers. A member's metrics address is not part of the protocol; it is
 * found by the convention that every agent's metrics port sits at the same
 * offset from its peer port as the queried agent's (9100 - 7000 on hosts
 * that all use 7000 and 9100; +K in a `murmur launch` cluster), or given
 * with --metrics-port P (every agent on P).
 *
 * Fetches GET /status from the agent's metrics server (metrics.listen) with
 * a bounded timeout and prints one "key: value" line per field, or the raw
 * JSON with --json. Exit status: 0 shown, 1 unreachable / bad answer,
 * 2 usage error.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/commands.h"
#include "agent/metrics.h"
#include "common/cli.h"
#include "common/json.h"
#include "common/text.h"

/* Default deadline: an agent answers from memory in well under a
 * millisecond; 3 s covers a loaded host and a slow link, and still fails
 * fast enough for a script polling many agents. */
#define STATUS_TIMEOUT_MS_DEFAULT 3000
#define STATUS_TIMEOUT_MS_MAX     600000

enum { S_JSON, S_TIMEOUT, S_CLUSTER, S_METRICS_PORT, S_HELP };
static const common_flag status_flags[] = {
    {"json", 0, false, S_JSON, "", "print the /status JSON document as received", NULL},
    {"timeout-ms", 0, true, S_TIMEOUT, "N", "give up after N ms (default 3000)", NULL},
    {"cluster", 0, false, S_CLUSTER, "",
     "one table of every member the agent knows, from their own /status", NULL},
    {"metrics-port", 0, true, S_METRICS_PORT, "P",
     "with --cluster: every member's metrics port (default: the same offset from its peer "
     "port as HOST:PORT's)",
     NULL},
    {"help", 'h', false, S_HELP, "", "this text", NULL},
};
#define STATUS_FLAGS (sizeof status_flags / sizeof status_flags[0])

static void status_usage(FILE *out)
{
    common_cli cli;
    common_cli_init(&cli, "murmur status", status_flags, STATUS_FLAGS, 0, NULL);
    fprintf(out, "usage: murmur status [--json] [--timeout-ms N] HOST:PORT\n"
                 "       murmur status --cluster [--metrics-port P] HOST:PORT\n\n"
                 "Show the state of the agent whose metrics server (metrics.listen) is at\n"
                 "HOST:PORT: node id, address, step, samples/s, loss, accuracy, peers,\n"
                 "view epoch, mixing algorithm, shards, uptime.\n\n");
    common_cli_usage(&cli, out);
}

/* HOST:PORT or http://HOST:PORT, PORT 1-65535 (HOST a name, IPv4 or [IPv6]). */
static bool valid_target(const char *t)
{
    if (!strncmp(t, "http://", 7))
        t += 7;
    const char *colon = strrchr(t, ':');
    if (!colon || colon == t || (t[0] == '[' && colon[-1] != ']'))
        return false;
    uint64_t port;
    return common_parse_u64(colon + 1, &port) && port >= 1 && port <= 65535;
}

/* Print a flat JSON object as "key: value" lines. Returns 0, or -1 if the
 * document is not a flat object. */
static int print_flat(const char *doc, FILE *out)
{
    char key[128], val[512];
    common_json_reader r;
    common_json_reader_init(&r, doc);
    int rc;
    while ((rc = common_json_next(&r, key, sizeof key, val, sizeof val)) == 1)
        fprintf(out, "%s: %s\n", key, val);
    return rc;
}

/* Split tcp://HOST:PORT (or HOST:PORT) into host and port. */
static bool split_addr(const char *addr, char *host, size_t cap, long *port)
{
    if (!strncmp(addr, "tcp://", 6))
        addr += 6;
    else if (!strncmp(addr, "http://", 7))
        addr += 7;
    const char *colon = strrchr(addr, ':');
    uint64_t p;
    if (!colon || colon == addr || !common_parse_u64(colon + 1, &p) || p > 65535 ||
        (size_t)(colon - addr) >= cap)
        return false;
    snprintf(host, cap, "%.*s", (int)(colon - addr), addr);
    *port = (long)p;
    return true;
}

/* Print one member's row from its own /status (or "unreachable"). */
static void member_row(const char *id, const char *addr, const char *state, long offset,
                       long fixed_port, int timeout_ms)
{
    char host[256], metrics[300], shown[300];
    long port;
    snprintf(shown, sizeof shown, "%s", strncmp(addr, "tcp://", 6) ? addr : addr + 6);
    if (!split_addr(addr, host, sizeof host, &port)) {
        printf("%-16s %-22s %-8s %s\n", id, shown, state, "(address not host:port)");
        return;
    }
    long mp = fixed_port ? fixed_port : port + offset;
    snprintf(metrics, sizeof metrics, "%s:%ld", host, mp);
    char *body = NULL, err[256];
    size_t len;
    if (mp < 1 || mp > 65535 ||
        agent_http_get(metrics, "/status", timeout_ms, &body, &len, NULL, err, sizeof err)) {
        printf("%-16s %-22s %-8s %-9s (no /status at %s)\n", id, shown, state, "-", metrics);
        return;
    }
    char st[32], step[32], acc[32], round[32], sent[32], recv[32];
    common_json_get(body, "state", st, sizeof st);
    common_json_get(body, "step", step, sizeof step);
    common_json_get(body, "accuracy", acc, sizeof acc);
    common_json_get(body, "round", round, sizeof round);
    common_json_get(body, "bytes_sent", sent, sizeof sent);
    common_json_get(body, "bytes_received", recv, sizeof recv);
    free(body);
    double a;
    char accs[24] = "-";
    if (common_parse_f64(acc, &a))
        snprintf(accs, sizeof accs, "%.4f", a);
    printf("%-16s %-22s %-8s %-9s %9s %9s %8s %10.1f %10.1f\n", id, shown, state, st[0] ? st : "-",
           step[0] ? step : "-", accs, round[0] ? round : "-", strtod(sent, NULL) / 1e6,
           strtod(recv, NULL) / 1e6);
}

/* `--cluster`: the members of target's view, each from its own /status. */
static int cluster_table(const char *target, long fixed_port, int timeout_ms)
{
    char *status = NULL, *members = NULL, err[512];
    size_t len;
    int rc = agent_http_get(target, "/status", timeout_ms, &status, &len, NULL, err, sizeof err);
    if (!rc)
        rc = agent_http_get(target, "/members", timeout_ms, &members, &len, NULL, err, sizeof err);
    if (rc) {
        fprintf(stderr, "murmur status: %s\n", err);
        free(status);
        return 1;
    }
    /* the offset of the metrics port from the peer port, from target itself */
    char self_addr[256], host[256];
    long peer_port = 0, metrics_port = 0;
    if (common_json_get(status, "address", self_addr, sizeof self_addr) != 1 ||
        !split_addr(self_addr, host, sizeof host, &peer_port) ||
        !split_addr(target, host, sizeof host, &metrics_port)) {
        fprintf(stderr, "murmur status: %s did not answer with a status document\n", target);
        free(status);
        free(members);
        return 1;
    }
    free(status);
    printf("%-16s %-22s %-8s %-9s %9s %9s %8s %10s %10s\n", "node", "address", "member", "state",
           "step", "accuracy", "round", "MB sent", "MB recv");
    int rows = 0;
    for (char *save = NULL, *line = strtok_r(members, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        if (line[0] != '{')
            continue;
        size_t n = strlen(line);
        if (n && line[n - 1] == ',')
            line[n - 1] = '\0';
        char id[32], addr[256], state[32];
        if (common_json_get(line, "node_id", id, sizeof id) != 1 ||
            common_json_get(line, "address", addr, sizeof addr) != 1 ||
            common_json_get(line, "state", state, sizeof state) != 1)
            continue;
        member_row(id, addr, state, metrics_port - peer_port, fixed_port,
                   timeout_ms < 1000 ? timeout_ms : 1000);
        rows++;
    }
    free(members);
    if (!rows) {
        fprintf(stderr, "murmur status: %s lists no member\n", target);
        return 1;
    }
    return 0;
}

int cmd_status(int argc, char **argv)
{
    bool raw = false, cluster = false;
    long fixed_port = 0;
    long timeout_ms = STATUS_TIMEOUT_MS_DEFAULT;
    const char *target = NULL;
    common_cli cli;
    common_cli_init(&cli, "murmur status", status_flags, STATUS_FLAGS, argc, argv);
    for (int id; (id = common_cli_next(&cli)) != COMMON_CLI_END;) {
        uint64_t ms;
        switch (id) {
        case S_HELP:
            status_usage(stdout);
            return 0;
        case S_JSON:
            raw = true;
            break;
        case S_CLUSTER:
            cluster = true;
            break;
        case S_METRICS_PORT:
            if (!common_parse_u64(cli.arg, &ms) || ms < 1 || ms > 65535) {
                fprintf(stderr, "murmur status: --metrics-port needs a port 1..65535\n");
                return 2;
            }
            fixed_port = (long)ms;
            break;
        case S_TIMEOUT:
            if (!common_parse_u64(cli.arg, &ms) || ms < 1 || ms > STATUS_TIMEOUT_MS_MAX) {
                fprintf(stderr, "murmur status: --timeout-ms needs a number of ms in 1..%d\n",
                        STATUS_TIMEOUT_MS_MAX);
                return 2;
            }
            timeout_ms = (long)ms;
            break;
        case COMMON_CLI_POSITIONAL:
            if (target) {
                fprintf(stderr, "murmur status: one HOST:PORT only ('%s' and '%s')\n", target,
                        cli.arg);
                return 2;
            }
            target = cli.arg;
            break;
        default:
            fprintf(stderr, "murmur status: %s\n", cli.err);
            return 2;
        }
    }
    if (!target) {
        status_usage(stderr);
        return 2;
    }
    if (!valid_target(target)) {
        fprintf(stderr,
                "murmur status: '%s' is not HOST:PORT (the agent's metrics.listen, e.g. "
                "127.0.0.1:9100)\n",
                target);
        return 2;
    }
    if (cluster && raw) {
        fprintf(stderr, "murmur status: --cluster prints a table; --json is for one agent\n");
        return 2;
    }
    if (cluster)
        return cluster_table(target, fixed_port, (int)timeout_ms);
    char *body = NULL;
    size_t len = 0;
    char err[512];
    int rc = agent_http_get(target, "/status", (int)timeout_ms, &body, &len, NULL, err, sizeof err);
    if (rc) {
        fprintf(stderr, "murmur status: %s\n", err);
        if (rc == AGENT_METRICS_ENET || rc == AGENT_METRICS_ETIMEDOUT)
            fprintf(stderr, "  is an agent running there with metrics.listen = %s?\n", target);
        return 1;
    }
    if (raw) {
        fwrite(body, 1, len, stdout);
        if (len == 0 || body[len - 1] != '\n')
            fputc('\n', stdout);
    } else if (print_flat(body, stdout)) {
        fprintf(stderr, "murmur status: %s did not answer with a status document\n", target);
        free(body);
        return 1;
    }
    free(body);
    return 0;
}
