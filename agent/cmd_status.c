/* agent/cmd_status — `murmur status HOST:PORT`: show a running agent's state.
 *
 * Fetches GET /status from the agent's metrics server (metrics.listen) with
 * a bounded timeout and prints one "key: value" line per field, or the raw
 * JSON with --json. Exit status: 0 shown, 1 unreachable / bad answer,
 * 2 usage error.
 */
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

enum { S_JSON, S_TIMEOUT, S_HELP };
static const common_flag status_flags[] = {
    {"json", 0, false, S_JSON, "", "print the /status JSON document as received", NULL},
    {"timeout-ms", 0, true, S_TIMEOUT, "N", "give up after N ms (default 3000)", NULL},
    {"help", 'h', false, S_HELP, "", "this text", NULL},
};
#define STATUS_FLAGS (sizeof status_flags / sizeof status_flags[0])

static void status_usage(FILE *out)
{
    common_cli cli;
    common_cli_init(&cli, "murmur status", status_flags, STATUS_FLAGS, 0, NULL);
    fprintf(out, "usage: murmur status [--json] [--timeout-ms N] HOST:PORT\n\n"
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

int cmd_status(int argc, char **argv)
{
    bool raw = false;
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
