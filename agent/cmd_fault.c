/* murmur fault — change the faults of a live agent (agent/chaos.h).
 *
 * Dials HOST:PORT (the agent's node.listen address, not its metrics port)
 * over the secure channel with an admin key pair and the cluster's network
 * key, sends one control request, waits for the reply and prints it. The
 * agent obeys only keys listed in its faults.admin_keys_file. Exit status:
 * 0 the agent applied the request, 1 it refused it or did not answer, 2 a
 * bad command line.
 */
#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/chaos.h"
#include "agent/commands.h"
#include "agent/keys.h"
#include "common/cli.h"
#include "common/text.h"
#include "net/transport.h"

#define FAULT_TIMEOUT_DEFAULT_MS 5000u

enum {
    F_HELP,
    F_DATA_DIR,
    F_KEY,
    F_NETKEY,
    F_TIMEOUT,
    F_CLEAR,
    F_SHOW,
    F_HEAL,
    F_PAUSE,
    F_RESUME,
    F_WORD /* --NAME VALUE -> "word=VALUE" (the table's metavar names the word) */
};

typedef struct word_flag {
    const char *flag, *word;
} word_flag;

static const word_flag words[] = {
    {"peer", "peer"},
    {"drop", "drop"},
    {"delay", "delay_ms"},
    {"jitter", "jitter_ms"},
    {"bandwidth", "bandwidth_bps"},
    {"duplicate", "duplicate"},
    {"reorder", "reorder"},
    {"reorder-window", "reorder_window_ms"},
    {"corrupt", "corrupt"},
    {"partition", "partition"},
    {"slow", "slow"},
};

static const common_flag flags[] = {
    {"help", 'h', false, F_HELP, "", "this text", NULL},
    {"data-dir", 0, true, F_DATA_DIR, "DIR",
     "where the admin's murmur.key and network.key are (default murmur-data)", NULL},
    {"key", 0, true, F_KEY, "FILE", "the admin's secret key (default DIR/murmur.key)", NULL},
    {"network-key", 0, true, F_NETKEY, "FILE",
     "the cluster's network key (default DIR/network.key)", NULL},
    {"timeout", 0, true, F_TIMEOUT, "MS", "wait this long for the answer (default 5000)", NULL},
    {"peer", 0, true, F_WORD, "ID",
     "node id the link faults apply to (repeatable; none = all peers)", NULL},
    {"drop", 0, true, F_WORD, "P", "probability a frame is lost", NULL},
    {"delay", 0, true, F_WORD, "MS", "added to every frame", NULL},
    {"jitter", 0, true, F_WORD, "MS", "plus a uniform random delay up to MS", NULL},
    {"bandwidth", 0, true, F_WORD, "BPS", "cap in bit/s (0 = none, else >= 8000)", NULL},
    {"duplicate", 0, true, F_WORD, "P", "probability a frame is sent twice", NULL},
    {"reorder", 0, true, F_WORD, "P", "probability a frame is held back (with --reorder-window)",
     NULL},
    {"reorder-window", 0, true, F_WORD, "MS", "how far a reordered frame is held back", NULL},
    {"corrupt", 0, true, F_WORD, "P", "probability one byte of a frame flips", NULL},
    {"partition", 0, true, F_WORD, "ID,ID,...", "cut these node ids off both ways (replaces)",
     NULL},
    {"heal", 0, false, F_HEAL, "", "remove the partition", NULL},
    {"pause", 0, false, F_PAUSE, "", "pause the agent's training thread", NULL},
    {"resume", 0, false, F_RESUME, "", "let it train again", NULL},
    {"slow", 0, true, F_WORD, "FACTOR", "training steps take FACTOR times longer (1 = normal)",
     NULL},
    {"clear", 0, false, F_CLEAR, "", "remove every fault (applied before the other flags)", NULL},
    {"show", 0, false, F_SHOW, "", "change nothing, print the faults in force", NULL},
};
#define FLAG_COUNT (sizeof flags / sizeof flags[0])

static void usage(const common_cli *cli, FILE *out)
{
    fprintf(out, "usage: murmur fault HOST:PORT [--peer ID]... [FAULTS] [--data-dir DIR]\n\n"
                 "Change the faults of a running agent (faults.enable = true) over the secure\n"
                 "channel. HOST:PORT is the agent's node.listen address; the key used must be in\n"
                 "the agent's faults.admin_keys_file. Link faults given together replace the\n"
                 "named peers' rule (or the all-peers rule); --drop 0 alone removes it.\n"
                 "docs/CHAOS.md has examples.\n\n");
    common_cli_usage(cli, out);
}

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Append " word=value" (or " word") to text; -1 when it does not fit. */
static int add_word(char *text, size_t cap, const char *word, const char *value)
{
    size_t len = strlen(text);
    int n = value ? snprintf(text + len, cap - len, "%s%s=%s", len ? " " : "", word, value)
                  : snprintf(text + len, cap - len, "%s%s", len ? " " : "", word);
    return n < 0 || (size_t)n >= cap - len ? -1 : 0;
}

/* The flag as written ("--drop") -> its request word. */
static const char *word_of(const char *given)
{
    while (*given == '-')
        given++;
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        size_t n = strlen(words[i].flag);
        if (!strncmp(given, words[i].flag, n) && (given[n] == 0 || given[n] == '='))
            return words[i].word;
    }
    return NULL;
}

int agent_fault_send(const char *addr, const char *key_file, const char *netkey_file,
                     const char *text, uint32_t timeout_ms, char *reply, size_t cap)
{
    net_identity id;
    uint8_t ring[NET_CHANNEL_KEYS_MAX * NET_NETWORK_KEY_SIZE];
    size_t n_keys = 0;
    char msg[512] = "";
    if (agent_keys_read_identity(key_file, &id, msg, sizeof msg) ||
        agent_keys_read_network_ring(netkey_file, ring, NET_CHANNEL_KEYS_MAX, &n_keys, msg,
                                     sizeof msg)) {
        snprintf(reply, cap, "%s", msg);
        return -1;
    }
    char url[GOSSIP_ADDR_MAX];
    snprintf(url, sizeof url, "%s%s", strstr(addr, "://") ? "" : "tcp://", addr);
    net_transport_config tc = {.self = &id, .network_keys = ring, .network_keys_n = n_keys};
    net_transport *t = NULL;
    int rc = net_transport_create(&t, &tc);
    if (rc) {
        snprintf(reply, cap, "cannot create a transport: %s", net_strerror(rc));
        net_identity_wipe(&id);
        return -1;
    }
    uint32_t req_id;
    randombytes_buf(&req_id, sizeof req_id);
    uint8_t *frame = malloc(AGENT_FAULT_CTL_FRAME_MAX);
    char *got = malloc(AGENT_FAULT_CTL_TEXT_MAX + 1);
    size_t len = frame && got ? agent_fault_ctl_encode(frame, AGENT_FAULT_CTL_FRAME_MAX,
                                                       AGENT_FAULT_CTL_REQUEST, req_id, text)
                              : 0;
    int result = -1;
    snprintf(reply, cap,
             "no answer from %s within %u ms (is it an agent's node.listen "
             "address, with faults.enable = true?)",
             addr, timeout_ms);
    if (!len) {
        snprintf(reply, cap, "request too long or out of memory");
    } else if ((rc = net_transport_send(t, 0, url, frame, len)) != NET_OK) {
        snprintf(reply, cap, "cannot send to %s: %s", url, net_strerror(rc));
    } else {
        uint64_t until = mono_ms() + timeout_ms;
        while (result < 0 && mono_ms() < until) {
            net_message m;
            if (net_transport_recv(t, &m) != NET_OK) {
                net_transport_wait(t, 20);
                continue;
            }
            unsigned kind;
            uint32_t rid;
            if (!agent_fault_ctl_decode(m.data, m.len, &kind, &rid, got,
                                        AGENT_FAULT_CTL_TEXT_MAX + 1) &&
                kind == AGENT_FAULT_CTL_REPLY && rid == req_id) {
                snprintf(reply, cap, "%s", got);
                result = strncmp(got, "ok", 2) ? 1 : 0;
            }
            net_message_release(&m);
        }
    }
    free(frame);
    free(got);
    net_transport_destroy(t);
    net_identity_wipe(&id);
    sodium_memzero(ring, sizeof ring);
    return result;
}

int cmd_fault(int argc, char **argv)
{
    common_cli cli;
    common_cli_init(&cli, "murmur fault", flags, FLAG_COUNT, argc, argv);
    const char *addr = NULL, *dir = "murmur-data", *key = NULL, *netkey = NULL;
    uint64_t timeout = FAULT_TIMEOUT_DEFAULT_MS;
    char text[AGENT_FAULT_CTL_TEXT_MAX + 1] = "";
    int clear = 0, show = 0, bad = 0;
    char words_buf[AGENT_FAULT_CTL_TEXT_MAX + 1] = "";
    for (int id; (id = common_cli_next(&cli)) != COMMON_CLI_END;) {
        switch (id) {
        case COMMON_CLI_ERROR:
            fprintf(stderr, "murmur fault: %s\n", cli.err);
            return 2;
        case COMMON_CLI_POSITIONAL:
            if (addr) {
                fprintf(stderr, "murmur fault: one agent address only ('%s')\n", cli.arg);
                return 2;
            }
            addr = cli.arg;
            break;
        case F_HELP:
            usage(&cli, stdout);
            return 0;
        case F_DATA_DIR:
            dir = cli.arg;
            break;
        case F_KEY:
            key = cli.arg;
            break;
        case F_NETKEY:
            netkey = cli.arg;
            break;
        case F_TIMEOUT:
            if (!common_parse_u64(cli.arg, &timeout) || timeout < 1 || timeout > 600000) {
                fprintf(stderr, "murmur fault: --timeout %s: not a time in ms (1-600000)\n",
                        cli.arg);
                return 2;
            }
            break;
        case F_CLEAR:
            clear = 1;
            break;
        case F_SHOW:
            show = 1;
            break;
        case F_HEAL:
            bad |= add_word(words_buf, sizeof words_buf, "partition", "");
            break;
        case F_PAUSE:
            bad |= add_word(words_buf, sizeof words_buf, "pause", "1");
            break;
        case F_RESUME:
            bad |= add_word(words_buf, sizeof words_buf, "pause", "0");
            break;
        case F_WORD: {
            const char *w = word_of(cli.given ? cli.given : "");
            if (!w || strpbrk(cli.arg, " \t\r\n")) {
                fprintf(stderr, "murmur fault: %s %s: bad value\n", cli.given, cli.arg);
                return 2;
            }
            bad |= add_word(words_buf, sizeof words_buf, w, cli.arg);
            break;
        }
        default:
            break;
        }
    }
    if (!addr) {
        fprintf(stderr, "murmur fault: which agent? (murmur fault HOST:PORT ..., see --help)\n");
        return 2;
    }
    if (clear)
        bad |= add_word(text, sizeof text, "clear", NULL);
    if (show || (!clear && !words_buf[0]))
        bad |= add_word(text, sizeof text, "show", NULL);
    if (words_buf[0])
        bad |= add_word(text, sizeof text, words_buf, NULL);
    if (bad) {
        fprintf(stderr, "murmur fault: the request is longer than %u bytes\n",
                AGENT_FAULT_CTL_TEXT_MAX);
        return 2;
    }
    char key_path[4096], netkey_path[4096];
    snprintf(key_path, sizeof key_path, "%s", key ? key : "");
    snprintf(netkey_path, sizeof netkey_path, "%s", netkey ? netkey : "");
    if (!key)
        snprintf(key_path, sizeof key_path, "%s/%s", dir, AGENT_KEYS_SECRET_NAME);
    if (!netkey)
        snprintf(netkey_path, sizeof netkey_path, "%s/network.key", dir);
    char reply[AGENT_FAULT_CTL_TEXT_MAX + 256];
    int rc =
        agent_fault_send(addr, key_path, netkey_path, text, (uint32_t)timeout, reply, sizeof reply);
    if (rc == 0) {
        fputs(reply, stdout);
        return 0;
    }
    fprintf(stderr, "murmur fault: %s: %s%s", addr, reply,
            reply[0] && reply[strlen(reply) - 1] == '\n' ? "" : "\n");
    return 1;
}
