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

/* Default deadline: an agent answers from memory in well under a
 * millisecond; 3 s covers a loaded host and a slow link, and still fails
 * fast enough for a script polling many agents. */
#define STATUS_TIMEOUT_MS_DEFAULT 3000
#define STATUS_TIMEOUT_MS_MAX     600000

static void status_usage(FILE *out)
{
    fprintf(out,
            "usage: murmur status [--json] [--timeout-ms N] HOST:PORT\n\n"
            "Show the state of the agent whose metrics server (metrics.listen) is at\n"
            "HOST:PORT: node id, address, step, samples/s, loss, accuracy, peers,\n"
            "view epoch, mixing algorithm, shards, uptime.\n\n"
            "  --json           print the /status JSON document as received\n"
            "  --timeout-ms N   give up after N ms (default %d)\n",
            STATUS_TIMEOUT_MS_DEFAULT);
}

static const char *skip_ws(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
        p++;
    return p;
}

/* Parse a JSON string at p (after the opening quote) into out; returns the
 * position after the closing quote, or NULL. Non-ASCII \u escapes print as '?'. */
static const char *json_string(const char *p, char *out, size_t cap)
{
    size_t n = 0;
    for (; *p && *p != '"'; p++) {
        char c = *p;
        if (c == '\\') {
            p++;
            switch (*p) {
            case 'n':
                c = '\n';
                break;
            case 't':
                c = '\t';
                break;
            case 'r':
                c = '\r';
                break;
            case 'b':
                c = '\b';
                break;
            case 'f':
                c = '\f';
                break;
            case 'u': {
                unsigned v = 0;
                for (int i = 1; i <= 4; i++) {
                    char h = p[i];
                    unsigned d = h >= '0' && h <= '9'   ? (unsigned)(h - '0')
                                 : h >= 'a' && h <= 'f' ? (unsigned)(h - 'a' + 10)
                                 : h >= 'A' && h <= 'F' ? (unsigned)(h - 'A' + 10)
                                                        : 16u;
                    if (d == 16)
                        return NULL;
                    v = v * 16 + d;
                }
                p += 4;
                c = v >= 0x20 && v < 0x7f ? (char)v : '?';
                break;
            }
            case '"':
            case '\\':
            case '/':
                c = *p;
                break;
            default:
                return NULL;
            }
        }
        if (n + 1 < cap)
            out[n++] = c;
    }
    if (*p != '"')
        return NULL;
    out[n] = '\0';
    return p + 1;
}

/* Print a flat JSON object as "key: value" lines. Returns 0, or -1 if the
 * document is not a flat object. */
static int print_flat(const char *doc, FILE *out)
{
    char key[128], val[512];
    const char *p = skip_ws(doc);
    if (*p++ != '{')
        return -1;
    p = skip_ws(p);
    if (*p == '}')
        return 0;
    for (;;) {
        if (*p++ != '"' || !(p = json_string(p, key, sizeof key)))
            return -1;
        p = skip_ws(p);
        if (*p++ != ':')
            return -1;
        p = skip_ws(p);
        if (*p == '"') {
            if (!(p = json_string(p + 1, val, sizeof val)))
                return -1;
        } else {
            size_t n = strcspn(p, ",} \t\r\n");
            if (n == 0 || n >= sizeof val || *p == '{' || *p == '[')
                return -1;
            memcpy(val, p, n);
            val[n] = '\0';
            p += n;
        }
        fprintf(out, "%s: %s\n", key, val);
        p = skip_ws(p);
        if (*p == '}')
            return 0;
        if (*p++ != ',')
            return -1;
        p = skip_ws(p);
    }
}

int cmd_status(int argc, char **argv)
{
    bool raw = false;
    long timeout_ms = STATUS_TIMEOUT_MS_DEFAULT;
    const char *target = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            status_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) {
            raw = true;
        } else if (!strcmp(a, "--timeout-ms")) {
            char *end;
            if (i + 1 >= argc || (timeout_ms = strtol(argv[++i], &end, 10)) <= 0 || *end ||
                timeout_ms > STATUS_TIMEOUT_MS_MAX) {
                fprintf(stderr, "murmur status: --timeout-ms needs a number of ms in 1..%d\n",
                        STATUS_TIMEOUT_MS_MAX);
                return 2;
            }
        } else if (a[0] == '-') {
            fprintf(stderr, "murmur status: unknown flag '%s'\n", a);
            status_usage(stderr);
            return 2;
        } else if (target) {
            fprintf(stderr, "murmur status: one HOST:PORT only ('%s' and '%s')\n", target, a);
            return 2;
        } else {
            target = a;
        }
    }
    if (!target) {
        status_usage(stderr);
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
