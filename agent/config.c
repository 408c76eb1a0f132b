/* agent/config — see config.h for the sources, the syntax and the errors. */
#include "agent/config.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/keys.h"
#include "agent/log.h"
#include "model/optim.h"

/* Parser types of agent_config_option.type. */
enum {
    T_ADDR,     /* tcp://host:port, host:port, ipc://..., inproc://...; may be "" if def is "" */
    T_SEED,     /* like T_ADDR, never empty, appends to seeds[] */
    T_HOSTPORT, /* host:port (or http://host:port), "" allowed */
    T_PATH,     /* any non-empty path */
    T_PATH_OPT, /* a path or "" */
    T_U32,
    T_U64,
    T_F64,
    T_ENUM,    /* int field; the index of the name in choices */
    T_U32_SET, /* u32 field; the number must be one of choices */
    T_SPEC,
    T_SCHEDULE,
    T_DATASET /* "fashion-mnist" or a non-empty path */
};

#define FIELD(f) offsetof(agent_config, f), sizeof(((agent_config *)0)->f)

static const char *const algorithm_names[] = {"dpsgd", "gossip",    "push-sum",
                                              "choco", "allreduce", NULL};
static const char *const topology_names[] = {
    "random", "ring", "torus", "exponential", "one-peer-exponential", NULL};
static const char *const level_names[] = {"debug", "info", "warn", "error", NULL};
static const char *const bits_names[] = {"1", "2", "4", "8", "16", "32", NULL};

#define BUILTIN_DATASET "fashion-mnist"

/* Defaults, with where they come from:
 * - probe 1000 ms / timeout 500 ms / indirect 3 / suspicion 4: the SWIM
 *   paper and memberlist's LAN profile; a timeout under the interval keeps
 *   at most one probe in flight.
 * - bits 8, block 256: 4x fewer bytes than float32 at a quantization error
 *   (one 8-bit step of the block's range) well below SGD noise; one float
 *   scale per 256 values costs 1.6 % extra.
 * - allreduce deadline 5000 ms: a chunk of a 1 M-parameter model at 8 bits
 *   is well under 1 MB per step; 5 s tolerates a loaded 10 Mbit/s link and a
 *   GC-paused peer while still aborting a dead ring within seconds.
 * - replication 3: survives two simultaneous crashes, the usual choice.
 * - queues: 64 frames per peer link (a few mixing rounds in flight), 256
 *   received frames and 4096 events (both far above one step's traffic for
 *   max_peers fan-in of a few per step), so a queue is full only when the
 *   event loop is stalled; then frames are dropped and counted.
 */
const agent_config_option agent_config_options[] = {
    {"node", "listen", T_ADDR, FIELD(listen), 0, 0, NULL, "tcp://127.0.0.1:7000", "",
     "address the agent listens on for peers (host:port or tcp://, ipc://, inproc://)"},
    {"node", "advertise", T_ADDR, FIELD(advertise), 0, 0, NULL, "", "",
     "address peers should dial; empty = the listen address (required when listen is a "
     "wildcard such as 0.0.0.0)"},
    {"node", "data_dir", T_PATH, FIELD(data_dir), 0, 0, NULL, "murmur-data", "",
     "directory for keys, shards and checkpoints"},
    {"node", "key_file", T_PATH_OPT, FIELD(key_file), 0, 0, NULL, "", "",
     "this agent's Ed25519 key pair; empty = DATA_DIR/murmur.key (murmur keygen --out DATA_DIR)"},
    {"node", "network_key_file", T_PATH_OPT, FIELD(network_key_file), 0, 0, NULL, "", "",
     "the cluster's shared network key (admission); empty = DATA_DIR/network.key"},
    {"node", "allow_list_file", T_PATH_OPT, FIELD(allow_list_file), 0, 0, NULL, "", "",
     "file of allowed public keys, one per line (a file with no key admits nobody); unset = "
     "admit any holder of the network key"},
    {"seeds", "seed", T_SEED, FIELD(seeds), 0, 0, NULL, "", "",
     "HOST:PORT of an agent to join through; repeat the line for several"},
    {"model", "spec", T_SPEC, FIELD(model_spec), 0, 0, NULL, "mlp:256,128", "",
     "model: softmax (linear) or mlp:H1,H2,... (hidden layer widths)"},
    {"model", "dataset", T_DATASET, FIELD(dataset), 0, 0, NULL, BUILTIN_DATASET, "",
     "fashion-mnist (the Debian package) or the path of a data set"},
    {"model", "batch", T_U32, FIELD(batch), 1, 65536, NULL, "64", "samples",
     "mini-batch size of one local step"},
    {"model", "lr", T_F64, FIELD(lr), 1e-9, 10, NULL, "0.05", "", "learning rate"},
    {"model", "momentum", T_F64, FIELD(momentum), 0, 0.999, NULL, "0.9", "",
     "heavy-ball momentum coefficient (0 = plain SGD)"},
    {"model", "weight_decay", T_F64, FIELD(weight_decay), 0, 1, NULL, "0.0001", "",
     "L2 weight decay coefficient"},
    {"model", "schedule", T_SCHEDULE, FIELD(schedule), 0, 0, NULL, "constant", "",
     "learning-rate schedule: constant, step:STEPS:GAMMA (multiply by GAMMA every STEPS "
     "steps) or cosine:STEPS (cosine decay to 0 over STEPS steps)"},
    {"model", "warmup_steps", T_U64, FIELD(warmup_steps), 0, 1e12, NULL, "0", "steps",
     "linear learning-rate warm-up from lr/warmup_steps to lr; 0 = none"},
    {"model", "min_lr", T_F64, FIELD(min_lr), 0, 10, NULL, "0", "",
     "final learning rate of the cosine schedule (<= lr)"},
    {"model", "init_seed", T_U64, FIELD(init_seed), 0, 18446744073709551615.0, NULL, "1", "",
     "seed of the initial parameters (every agent must use the same)"},
    {"model", "eval_every_steps", T_U64, FIELD(eval_every_steps), 1, 1e12, NULL, "200", "steps",
     "local steps between two evaluations on the test set"},
    {"model", "eval_samples", T_U32, FIELD(eval_samples), 0, 1e7, NULL, "2000", "samples",
     "test samples evaluated (the first N of the test set); 0 = all"},
    {"mixing", "algorithm", T_ENUM, FIELD(algorithm), 0, 0, algorithm_names, "gossip", "",
     "dpsgd, gossip, push-sum, choco or allreduce"},
    {"mixing", "topology", T_ENUM, FIELD(topology), 0, 0, topology_names, "random", "",
     "peer choice for gossip: random, ring, torus, exponential or one-peer-exponential"},
    {"mixing", "bits", T_U32_SET, FIELD(bits), 1, 32, bits_names, "8", "bits",
     "quantization bits per value: 1, 2, 4, 8, 16 or 32 (32 = no quantization)"},
    {"mixing", "block", T_U32, FIELD(block), 1, 65536, NULL, "256", "values",
     "values per quantization block (each block carries one scale)"},
    {"mixing", "interval_steps", T_U32, FIELD(interval_steps), 1, 1000000, NULL, "1", "steps",
     "local steps between mixing rounds (H for allreduce)"},
    {"mixing", "allreduce_step_deadline_ms", T_U32, FIELD(allreduce_step_deadline_ms), 10, 600000,
     NULL, "5000", "ms", "longest wait for one allreduce step before the round is aborted"},
    {"membership", "probe_interval_ms", T_U32, FIELD(probe_interval_ms), 50, 60000, NULL, "1000",
     "ms", "SWIM protocol period: one member probed per interval"},
    {"membership", "probe_timeout_ms", T_U32, FIELD(probe_timeout_ms), 10, 60000, NULL, "500", "ms",
     "wait for a direct ack before asking indirect_k members; < probe_interval_ms"},
    {"membership", "indirect_k", T_U32, FIELD(indirect_k), 0, 16, NULL, "3", "members",
     "members asked to probe indirectly"},
    {"membership", "suspicion_mult", T_U32, FIELD(suspicion_mult), 1, 64, NULL, "4", "",
     "suspicion timeout = suspicion_mult * log10(N+1) * probe_interval_ms"},
    {"shards", "dir", T_PATH_OPT, FIELD(shards_dir), 0, 0, NULL, "", "",
     "where shard files are kept; empty = DATA_DIR/shards"},
    {"shards", "replication", T_U32, FIELD(replication), 1, 16, NULL, "3", "copies",
     "live agents holding each shard"},
    {"checkpoint", "every_steps", T_U64, FIELD(checkpoint_every_steps), 0, 1e12, NULL, "1000",
     "steps", "local steps between checkpoints; 0 = never"},
    {"checkpoint", "path", T_PATH_OPT, FIELD(checkpoint_path), 0, 0, NULL, "", "",
     "checkpoint file; empty = DATA_DIR/checkpoint.bin"},
    {"metrics", "listen", T_HOSTPORT, FIELD(metrics_listen), 0, 0, NULL, "", "",
     "HOST:PORT of the HTTP server for /metrics and /status; empty = off"},
    {"log", "level", T_ENUM, FIELD(log_level), 0, 0, level_names, "info", "",
     "debug, info, warn or error"},
    {"log", "progress_interval_ms", T_U32, FIELD(progress_interval_ms), 100, 3600000, NULL, "5000",
     "ms", "time between two event=progress lines"},
    {"limits", "max_peers", T_U32, FIELD(max_peers), 2, AGENT_CONFIG_PEERS_MAX, NULL, "1024",
     "peers", "most members in the view and open links"},
    {"limits", "send_queue_len", T_U32, FIELD(send_queue_len), 1, 4096, NULL, "64", "frames",
     "frames queued per peer link before new ones are dropped"},
    {"limits", "recv_queue_len", T_U32, FIELD(recv_queue_len), 1, AGENT_CONFIG_QUEUE_LEN_MAX, NULL,
     "256", "frames", "received frames waiting for the event loop"},
    {"limits", "event_queue_len", T_U32, FIELD(event_queue_len), 16, AGENT_CONFIG_QUEUE_LEN_MAX,
     NULL, "4096", "events", "events of every kind waiting for the event loop"},
};
#define OPTION_COUNT (sizeof agent_config_options / sizeof agent_config_options[0])
const size_t agent_config_option_count = OPTION_COUNT;
_Static_assert(sizeof agent_config_options / sizeof agent_config_options[0] <=
                   AGENT_CONFIG_OPTIONS_MAX,
               "agent_config.origin must have a slot per option");
_Static_assert(AGENT_LOG_DEBUG == 0 && AGENT_LOG_ERROR == 3, "level_names follow agent_log_level");

/* Short flags: each names one option. */
typedef struct flag_def {
    const char *flag;
    const char *option;
    const char *metavar;
} flag_def;

static const flag_def flags[] = {
    {"--listen", "node.listen", "ADDR"},
    {"--advertise", "node.advertise", "ADDR"},
    {"--seed", "seeds.seed", "HOST:PORT"},
    {"--data-dir", "node.data_dir", "DIR"},
    {"--key-file", "node.key_file", "FILE"},
    {"--network-key-file", "node.network_key_file", "FILE"},
    {"--allow-list", "node.allow_list_file", "FILE"},
    {"--model", "model.spec", "SPEC"},
    {"--dataset", "model.dataset", "PATH"},
    {"--mixing", "mixing.algorithm", "ALG"},
    {"--checkpoint", "checkpoint.path", "FILE"},
    {"--metrics", "metrics.listen", "HOST:PORT"},
    {"--log-level", "log.level", "LEVEL"},
};
#define FLAG_COUNT (sizeof flags / sizeof flags[0])

static const char *const err_names[AGENT_CONFIG_ERR_COUNT] = {
    [AGENT_CONFIG_OK] = "ok",
    [AGENT_CONFIG_EIO] = "cannot read a file",
    [AGENT_CONFIG_ESYNTAX] = "syntax error",
    [AGENT_CONFIG_EUNKNOWN] = "unknown option",
    [AGENT_CONFIG_EVALUE] = "bad value",
    [AGENT_CONFIG_ERANGE] = "value out of range",
    [AGENT_CONFIG_ECONFLICT] = "conflicting options",
    [AGENT_CONFIG_EUSAGE] = "bad command line",
};

const char *agent_config_strerror(int err)
{
    if (err < 0 || err >= AGENT_CONFIG_ERR_COUNT)
        return "unknown error";
    return err_names[err];
}

const char *agent_mixing_algorithm_name(agent_mixing_algorithm a)
{
    return (unsigned)a < 5 ? algorithm_names[a] : "unknown";
}

const char *agent_topology_name(agent_topology t)
{
    return (unsigned)t < 5 ? topology_names[t] : "unknown";
}

static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

static char *field_ptr(agent_config *c, const agent_config_option *o)
{
    return (char *)c + o->offset;
}

static const char *cfield_ptr(const agent_config *c, const agent_config_option *o)
{
    return (const char *)c + o->offset;
}

static int find_option(const char *section, size_t section_len, const char *key)
{
    for (size_t i = 0; i < OPTION_COUNT; i++) {
        const agent_config_option *o = &agent_config_options[i];
        if (strlen(o->section) == section_len && !strncmp(o->section, section, section_len) &&
            !strcmp(o->key, key))
            return (int)i;
    }
    return -1;
}

static bool known_section(const char *s)
{
    for (size_t i = 0; i < OPTION_COUNT; i++)
        if (!strcmp(agent_config_options[i].section, s))
            return true;
    return false;
}

/* Strict unsigned decimal: digits only, no sign, no blanks, no overflow. */
static bool parse_u64(const char *s, uint64_t *out)
{
    if (!*s)
        return false;
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return false;
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

static bool parse_f64(const char *s, double *out)
{
    if (!*s)
        return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*end || errno == ERANGE || !isfinite(v))
        return false;
    *out = v;
    return true;
}

/* host:port where host is a name, an IPv4 address or [IPv6]; the port is
 * checked to be 1..65535 (or 0..65535 when zero_port). */
static bool valid_hostport(const char *s, bool zero_port)
{
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s)
        return false;
    size_t hl = (size_t)(colon - s);
    if (s[0] == '[') {
        if (s[hl - 1] != ']' || hl < 3)
            return false;
        for (size_t i = 1; i + 1 < hl; i++)
            if (!strchr("0123456789abcdefABCDEF:.", s[i]))
                return false;
    } else {
        for (size_t i = 0; i < hl; i++) {
            char ch = s[i];
            bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                      (ch >= '0' && ch <= '9') || ch == '.' || ch == '-' || ch == '*';
            if (!ok)
                return false;
        }
    }
    uint64_t port;
    if (!parse_u64(colon + 1, &port) || port > 65535 || (port == 0 && !zero_port))
        return false;
    return true;
}

/* Normalise an address to scheme://rest; bare host:port becomes tcp://. */
static int parse_addr(const char *v, char *out, size_t cap, const char **why)
{
    const char *rest = v;
    const char *scheme = "tcp://";
    if (!strncmp(v, "tcp://", 6)) {
        rest = v + 6;
    } else if (!strncmp(v, "ipc://", 6) || !strncmp(v, "inproc://", 9)) {
        size_t skip = v[0] == 'i' && v[1] == 'p' ? 6 : 9;
        if (!v[skip]) {
            *why = "has no path or name after the scheme";
            return -1;
        }
        if (strlen(v) >= cap) {
            *why = "is too long";
            return -1;
        }
        memcpy(out, v, strlen(v) + 1);
        return 0;
    } else if (strstr(v, "://")) {
        *why = "has an unknown scheme (use tcp://, ipc:// or inproc://)";
        return -1;
    }
    if (!valid_hostport(rest, false)) {
        *why = "is not HOST:PORT (port 1-65535)";
        return -1;
    }
    int n = snprintf(out, cap, "%s%s", scheme, rest);
    if (n < 0 || (size_t)n >= cap) {
        *why = "is too long";
        return -1;
    }
    return 0;
}

/* Is this tcp address a wildcard (0.0.0.0, [::], *)? */
static bool wildcard_addr(const char *addr)
{
    if (strncmp(addr, "tcp://", 6))
        return false;
    const char *h = addr + 6;
    return !strncmp(h, "0.0.0.0:", 8) || !strncmp(h, "[::]:", 5) || !strncmp(h, "*:", 2);
}

int agent_config_parse_spec(const char *spec, uint32_t *widths, uint32_t *count)
{
    if (!strcmp(spec, "softmax")) {
        if (count)
            *count = 0;
        return 0;
    }
    if (strncmp(spec, "mlp:", 4))
        return -1;
    const char *p = spec + 4;
    uint32_t n = 0;
    for (;;) {
        const char *start = p;
        uint64_t v = 0;
        while (*p >= '0' && *p <= '9') {
            v = v * 10 + (uint64_t)(*p - '0');
            if (v > AGENT_CONFIG_LAYER_WIDTH_MAX)
                return -1;
            p++;
        }
        if (p == start || v == 0 || n == AGENT_CONFIG_LAYERS_MAX)
            return -1;
        if (widths)
            widths[n] = (uint32_t)v;
        n++;
        if (*p == '\0')
            break;
        if (*p != ',')
            return -1;
        p++;
    }
    if (count)
        *count = n;
    return 0;
}

static bool valid_schedule(const char *s)
{
    if (!strcmp(s, "constant"))
        return true;
    char buf[AGENT_CONFIG_SCHEDULE_MAX];
    if (strlen(s) >= sizeof buf)
        return false;
    strcpy(buf, s);
    char *a = strchr(buf, ':');
    if (!a)
        return false;
    *a++ = '\0';
    uint64_t steps;
    if (!strcmp(buf, "cosine"))
        return parse_u64(a, &steps) && steps > 0;
    if (strcmp(buf, "step"))
        return false;
    char *g = strchr(a, ':');
    if (!g)
        return false;
    *g++ = '\0';
    double gamma;
    return parse_u64(a, &steps) && steps > 0 && parse_f64(g, &gamma) && gamma > 0 && gamma <= 1;
}

static void join_choices(const char *const *choices, char *out, size_t cap)
{
    size_t at = 0;
    out[0] = '\0';
    for (size_t i = 0; choices[i]; i++) {
        int n = snprintf(out + at, cap - at, "%s%s", i ? ", " : "", choices[i]);
        if (n < 0 || (size_t)n >= cap - at)
            break;
        at += (size_t)n;
    }
}

static void set_origin(agent_config *c, size_t idx, const char *origin)
{
    snprintf(c->origin[idx], sizeof c->origin[idx], "%s", origin);
}

/* Apply `value` to option idx. cli: command-line semantics for seeds. */
static int apply(agent_config *c, size_t idx, const char *value, const char *origin, bool cli,
                 char *err, size_t errlen)
{
    const agent_config_option *o = &agent_config_options[idx];
    char *f = field_ptr(c, o);
    const char *why = NULL;
    char choices[128];
#define BAD(code, ...)                                                                             \
    do {                                                                                           \
        char m_[AGENT_CONFIG_ERR_MAX];                                                             \
        snprintf(m_, sizeof m_, __VA_ARGS__);                                                      \
        return fail(err, errlen, code, "%s: %s.%s: %s", origin, o->section, o->key, m_);           \
    } while (0)

    switch (o->type) {
    case T_ADDR: {
        if (!*value) {
            if (*o->def)
                BAD(AGENT_CONFIG_EVALUE, "must not be empty");
            f[0] = '\0';
            break;
        }
        char tmp[AGENT_CONFIG_ADDR_MAX];
        if (parse_addr(value, tmp, sizeof tmp, &why))
            BAD(AGENT_CONFIG_EVALUE, "'%s' %s", value, why);
        memcpy(f, tmp, sizeof tmp);
        break;
    }
    case T_SEED: {
        if (!*value) {
            if (origin && !strcmp(origin, "default"))
                break; /* the default is "no seeds" */
            BAD(AGENT_CONFIG_EVALUE, "must not be empty");
        }
        char tmp[AGENT_CONFIG_ADDR_MAX];
        if (parse_addr(value, tmp, sizeof tmp, &why))
            BAD(AGENT_CONFIG_EVALUE, "'%s' %s", value, why);
        if (cli && !c->seeds_from_cli) {
            c->seed_count = 0;
            c->seeds_from_cli = true;
        }
        for (uint32_t i = 0; i < c->seed_count; i++)
            if (!strcmp(c->seeds[i], tmp))
                goto done; /* a seed listed twice is one seed */
        if (c->seed_count == AGENT_CONFIG_SEEDS_MAX)
            BAD(AGENT_CONFIG_ERANGE, "more than %u seeds", AGENT_CONFIG_SEEDS_MAX);
        memcpy(c->seeds[c->seed_count++], tmp, sizeof tmp);
        break;
    }
    case T_HOSTPORT: {
        const char *v = value;
        if (!strncmp(v, "http://", 7))
            v += 7;
        if (*v && !valid_hostport(v, false))
            BAD(AGENT_CONFIG_EVALUE, "'%s' is not HOST:PORT (port 1-65535), or empty for off",
                value);
        if (strlen(v) >= o->size)
            BAD(AGENT_CONFIG_EVALUE, "'%s' is too long", value);
        strcpy(f, v);
        break;
    }
    case T_PATH:
    case T_PATH_OPT:
    case T_DATASET:
        if (!*value && o->type != T_PATH_OPT)
            BAD(AGENT_CONFIG_EVALUE, "must not be empty");
        if (strlen(value) >= o->size)
            BAD(AGENT_CONFIG_EVALUE, "path longer than %zu bytes", o->size - 1);
        strcpy(f, value);
        break;
    case T_U32:
    case T_U64: {
        uint64_t v;
        if (!parse_u64(value, &v))
            BAD(AGENT_CONFIG_EVALUE, "'%s' is not a whole number", value);
        if ((double)v < o->min || (double)v > o->max)
            BAD(AGENT_CONFIG_ERANGE, "%s is out of range [%.0f, %.0f]%s%s", value, o->min, o->max,
                *o->unit ? " " : "", o->unit);
        if (o->type == T_U32) {
            uint32_t v32 = (uint32_t)v;
            memcpy(f, &v32, sizeof v32);
        } else {
            memcpy(f, &v, sizeof v);
        }
        break;
    }
    case T_F64: {
        double v;
        if (!parse_f64(value, &v))
            BAD(AGENT_CONFIG_EVALUE, "'%s' is not a finite number", value);
        if (v < o->min || v > o->max)
            BAD(AGENT_CONFIG_ERANGE, "%s is out of range [%g, %g]", value, o->min, o->max);
        memcpy(f, &v, sizeof v);
        break;
    }
    case T_ENUM:
    case T_U32_SET: {
        size_t i;
        for (i = 0; o->choices[i]; i++)
            if (!strcmp(o->choices[i], value))
                break;
        if (!o->choices[i]) {
            join_choices(o->choices, choices, sizeof choices);
            BAD(AGENT_CONFIG_EVALUE, "'%s' is not one of %s", value, choices);
        }
        if (o->type == T_ENUM) {
            int e = (int)i;
            memcpy(f, &e, sizeof e);
        } else {
            uint32_t v = (uint32_t)strtoul(value, NULL, 10);
            memcpy(f, &v, sizeof v);
        }
        break;
    }
    case T_SPEC:
        if (strlen(value) >= o->size || agent_config_parse_spec(value, NULL, NULL))
            BAD(AGENT_CONFIG_EVALUE,
                "'%s' is not softmax or mlp:H1,H2,... (1-%u layers, widths 1-%u)", value,
                AGENT_CONFIG_LAYERS_MAX, AGENT_CONFIG_LAYER_WIDTH_MAX);
        strcpy(f, value);
        break;
    case T_SCHEDULE:
        if (!valid_schedule(value))
            BAD(AGENT_CONFIG_EVALUE,
                "'%s' is not constant, step:STEPS:GAMMA (0 < GAMMA <= 1) or cosine:STEPS", value);
        strcpy(f, value);
        break;
    default:
        BAD(AGENT_CONFIG_EVALUE, "internal: unknown option type %d", o->type);
    }
#undef BAD
done:
    set_origin(c, idx, origin);
    return 0;
}

void agent_config_defaults(agent_config *c)
{
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < OPTION_COUNT; i++) {
        int rc = apply(c, i, agent_config_options[i].def, "default", false, NULL, 0);
        (void)rc;
        /* a default that does not parse is a bug in the table above */
        if (rc)
            abort();
    }
}

static int set_named(agent_config *c, const char *name, const char *value, const char *origin,
                     bool cli, char *err, size_t errlen)
{
    const char *dot = strchr(name, '.');
    int idx = dot ? find_option(name, (size_t)(dot - name), dot + 1) : -1;
    if (idx < 0)
        return fail(err, errlen, AGENT_CONFIG_EUNKNOWN,
                    "%s: unknown option '%s' (expected section.key, see docs/CONFIG.md)", origin,
                    name);
    return apply(c, (size_t)idx, value, origin, cli, err, errlen);
}

int agent_config_set(agent_config *c, const char *name, const char *value, const char *origin,
                     char *err, size_t errlen)
{
    return set_named(c, name, value, origin ? origin : "--set", true, err, errlen);
}

static bool name_byte(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_';
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        s[--n] = '\0';
    return s;
}

/* Parse one line (modified in place). section holds the current section. */
static int parse_line(agent_config *c, char *line, const char *where, char *section,
                      size_t section_cap, char *err, size_t errlen)
{
    char *s = trim(line);
    if (!*s || *s == '#' || *s == ';')
        return 0;
    if (*s == '[') {
        char *end = strchr(s, ']');
        if (!end)
            return fail(err, errlen, AGENT_CONFIG_ESYNTAX, "%s: section header without ']'", where);
        *end = '\0';
        char *rest = trim(end + 1);
        if (*rest && *rest != '#' && *rest != ';')
            return fail(err, errlen, AGENT_CONFIG_ESYNTAX, "%s: text after [%s]", where, s + 1);
        char *name = trim(s + 1);
        if (!known_section(name) || strlen(name) >= section_cap)
            return fail(err, errlen, AGENT_CONFIG_EUNKNOWN,
                        "%s: unknown section [%s] (sections: node, seeds, model, mixing, "
                        "membership, shards, checkpoint, metrics, log, limits)",
                        where, name);
        strcpy(section, name);
        return 0;
    }
    char *eq = strchr(s, '=');
    if (!eq)
        return fail(err, errlen, AGENT_CONFIG_ESYNTAX,
                    "%s: expected 'key = value', '[section]' or a # comment", where);
    *eq = '\0';
    char *key = trim(s);
    for (char *k = key; *k; k++)
        if (!name_byte(*k))
            return fail(err, errlen, AGENT_CONFIG_ESYNTAX,
                        "%s: bad key '%s' (keys are lower case a-z, 0-9, _)", where, key);
    if (!*key)
        return fail(err, errlen, AGENT_CONFIG_ESYNTAX, "%s: empty key before '='", where);
    if (!*section)
        return fail(err, errlen, AGENT_CONFIG_ESYNTAX, "%s: '%s' is outside any [section]", where,
                    key);
    char *v = trim(eq + 1);
    if (*v == '"') {
        /* quoted: \" and \\ escapes; only a comment may follow */
        char *r = v + 1, *w = v;
        for (;;) {
            if (*r == '\0')
                return fail(err, errlen, AGENT_CONFIG_ESYNTAX, "%s: %s.%s: unterminated quote",
                            where, section, key);
            if (*r == '"')
                break;
            if (*r == '\\' && (r[1] == '"' || r[1] == '\\'))
                r++;
            *w++ = *r++;
        }
        char *rest = trim(r + 1);
        *w = '\0';
        if (*rest && *rest != '#' && *rest != ';')
            return fail(err, errlen, AGENT_CONFIG_ESYNTAX, "%s: %s.%s: text after the quoted value",
                        where, section, key);
    } else {
        for (char *p = v; *p; p++)
            if (*p == '#' && (p == v || p[-1] == ' ' || p[-1] == '\t')) {
                *p = '\0';
                break;
            }
        v = trim(v);
    }
    int idx = find_option(section, strlen(section), key);
    if (idx < 0)
        return fail(err, errlen, AGENT_CONFIG_EUNKNOWN, "%s: unknown key '%s' in section [%s]",
                    where, key, section);
    return apply(c, (size_t)idx, v, where, false, err, errlen);
}

int agent_config_load_string(agent_config *c, const char *name, const char *text, char *err,
                             size_t errlen)
{
    char section[32] = "";
    char line[AGENT_CONFIG_LINE_MAX + 1];
    char where[AGENT_CONFIG_ORIGIN_MAX];
    unsigned lineno = 0;
    const char *p = text;
    while (*p) {
        lineno++;
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        /* keep the tail of a long file name: it is the informative part */
        size_t nlen = strlen(name);
        const char *shown = nlen > 60 ? name + nlen - 60 : name;
        snprintf(where, sizeof where, "%s:%u", shown, lineno);
        if (n > AGENT_CONFIG_LINE_MAX)
            return fail(err, errlen, AGENT_CONFIG_ESYNTAX, "%s: line longer than %u bytes", where,
                        AGENT_CONFIG_LINE_MAX);
        memcpy(line, p, n);
        line[n] = '\0';
        int rc = parse_line(c, line, where, section, sizeof section, err, errlen);
        if (rc)
            return rc;
        p = nl ? nl + 1 : p + n;
    }
    return 0;
}

int agent_config_load_file(agent_config *c, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return fail(err, errlen, AGENT_CONFIG_EIO, "%s: cannot open config file: %s", path,
                    strerror(errno));
    char *buf = malloc(AGENT_CONFIG_FILE_MAX + 1);
    if (!buf) {
        fclose(f);
        return fail(err, errlen, AGENT_CONFIG_EIO, "%s: out of memory reading it", path);
    }
    size_t n = fread(buf, 1, AGENT_CONFIG_FILE_MAX + 1, f);
    int rd_err = ferror(f);
    int saved = errno;
    fclose(f);
    int rc = 0;
    if (rd_err)
        rc = fail(err, errlen, AGENT_CONFIG_EIO, "%s: read error: %s", path, strerror(saved));
    else if (n > AGENT_CONFIG_FILE_MAX)
        rc = fail(err, errlen, AGENT_CONFIG_EIO, "%s: larger than %u bytes; not a config file?",
                  path, AGENT_CONFIG_FILE_MAX);
    else if (memchr(buf, '\0', n))
        rc = fail(err, errlen, AGENT_CONFIG_ESYNTAX, "%s: contains a NUL byte; not a text file",
                  path);
    if (!rc) {
        buf[n] = '\0';
        rc = agent_config_load_string(c, path, buf, err, errlen);
    }
    free(buf);
    return rc;
}

static int option_index(const char *section, const char *key)
{
    return find_option(section, strlen(section), key);
}

/* Origin of a value agent_config_finish filled in from another option. It
 * is written back as empty, so that a printed config derives it again. */
#define DERIVED "derived from"

static bool is_derived(const char *origin)
{
    return !strncmp(origin, DERIVED, sizeof DERIVED - 1);
}

static int derive_path(agent_config *c, char *field, size_t cap, const char *section,
                       const char *key, const char *leaf, char *err, size_t errlen)
{
    if (*field)
        return 0;
    int n = snprintf(field, cap, "%s/%s", c->data_dir, leaf);
    set_origin(c, (size_t)option_index(section, key), DERIVED " node.data_dir");
    if (n < 0 || (size_t)n >= cap) {
        field[0] = '\0';
        return fail(err, errlen, AGENT_CONFIG_ERANGE,
                    "%s: node.data_dir is too long to derive %s.%s",
                    c->origin[option_index("node", "data_dir")], section, key);
    }
    return 0;
}

/* A file the agent must read: present and readable, when configured. */
static int must_read(const agent_config *c, const char *section, const char *key, const char *path,
                     char *err, size_t errlen)
{
    int idx = option_index(section, key);
    if (!*path || !strcmp(c->origin[idx], "default") || is_derived(c->origin[idx]))
        return 0; /* a default path may legitimately not exist yet */
    if (access(path, R_OK) != 0)
        return fail(err, errlen, AGENT_CONFIG_EIO, "%s: %s.%s: cannot read '%s': %s",
                    c->origin[idx], section, key, path, strerror(errno));
    return 0;
}

int agent_config_finish(agent_config *c, char *err, size_t errlen)
{
    int rc;
    const char *lo = c->origin[option_index("node", "listen")];
    if (!*c->advertise) {
        if (wildcard_addr(c->listen))
            return fail(err, errlen, AGENT_CONFIG_ECONFLICT,
                        "%s: node.listen %s binds every interface; set node.advertise "
                        "(--advertise HOST:PORT) to the address peers should dial",
                        lo, c->listen);
        memcpy(c->advertise, c->listen, sizeof c->advertise);
        set_origin(c, (size_t)option_index("node", "advertise"), DERIVED " node.listen");
    } else if (wildcard_addr(c->advertise)) {
        return fail(err, errlen, AGENT_CONFIG_ECONFLICT,
                    "%s: node.advertise %s is a wildcard; peers cannot dial it",
                    c->origin[option_index("node", "advertise")], c->advertise);
    }
    if ((rc = derive_path(c, c->key_file, sizeof c->key_file, "node", "key_file",
                          AGENT_KEYS_SECRET_NAME, err, errlen)) ||
        (rc = derive_path(c, c->network_key_file, sizeof c->network_key_file, "node",
                          "network_key_file", "network.key", err, errlen)) ||
        (rc = derive_path(c, c->shards_dir, sizeof c->shards_dir, "shards", "dir", "shards", err,
                          errlen)) ||
        (rc = derive_path(c, c->checkpoint_path, sizeof c->checkpoint_path, "checkpoint", "path",
                          "checkpoint.bin", err, errlen)))
        return rc;
    if (c->probe_timeout_ms >= c->probe_interval_ms)
        return fail(err, errlen, AGENT_CONFIG_ECONFLICT,
                    "%s: membership.probe_timeout_ms (%u) must be less than "
                    "membership.probe_interval_ms (%u, from %s)",
                    c->origin[option_index("membership", "probe_timeout_ms")], c->probe_timeout_ms,
                    c->probe_interval_ms,
                    c->origin[option_index("membership", "probe_interval_ms")]);
    model_schedule sched;
    agent_config_schedule(c, &sched);
    if (sched.kind == MODEL_LR_COSINE && sched.total_steps <= c->warmup_steps)
        return fail(err, errlen, AGENT_CONFIG_ECONFLICT,
                    "%s: model.schedule %s must last longer than model.warmup_steps (%llu, from "
                    "%s)",
                    c->origin[option_index("model", "schedule")], c->schedule,
                    (unsigned long long)c->warmup_steps,
                    c->origin[option_index("model", "warmup_steps")]);
    if (c->min_lr > c->lr)
        return fail(err, errlen, AGENT_CONFIG_ECONFLICT,
                    "%s: model.min_lr (%g) must not exceed model.lr (%g, from %s)",
                    c->origin[option_index("model", "min_lr")], c->min_lr, c->lr,
                    c->origin[option_index("model", "lr")]);
    if (c->recv_queue_len > c->event_queue_len)
        return fail(err, errlen, AGENT_CONFIG_ECONFLICT,
                    "%s: limits.recv_queue_len (%u) must not exceed limits.event_queue_len (%u, "
                    "from %s)",
                    c->origin[option_index("limits", "recv_queue_len")], c->recv_queue_len,
                    c->event_queue_len, c->origin[option_index("limits", "event_queue_len")]);
    if (c->replication > c->max_peers)
        return fail(err, errlen, AGENT_CONFIG_ECONFLICT,
                    "%s: shards.replication (%u) exceeds limits.max_peers (%u)",
                    c->origin[option_index("shards", "replication")], c->replication, c->max_peers);
    if (c->seed_count > c->max_peers)
        return fail(err, errlen, AGENT_CONFIG_ECONFLICT,
                    "%s: %u seeds exceed limits.max_peers (%u)",
                    c->origin[option_index("seeds", "seed")], c->seed_count, c->max_peers);
    if ((rc = must_read(c, "node", "network_key_file", c->network_key_file, err, errlen)) ||
        (rc = must_read(c, "node", "allow_list_file", c->allow_list_file, err, errlen)))
        return rc;
    if (strcmp(c->dataset, BUILTIN_DATASET) &&
        (rc = must_read(c, "model", "dataset", c->dataset, err, errlen)))
        return rc;
    return 0;
}

static const flag_def *find_flag(const char *arg, size_t len)
{
    for (size_t i = 0; i < FLAG_COUNT; i++)
        if (strlen(flags[i].flag) == len && !strncmp(flags[i].flag, arg, len))
            return &flags[i];
    return NULL;
}

/* Split "--flag=value" or take the next argument. */
static int flag_value(int argc, char **argv, int *i, size_t name_len, const char **value, char *err,
                      size_t errlen)
{
    const char *arg = argv[*i];
    if (arg[name_len] == '=') {
        *value = arg + name_len + 1;
        return 0;
    }
    if (*i + 1 >= argc)
        return fail(err, errlen, AGENT_CONFIG_EUSAGE, "%.*s needs a value", (int)name_len, arg);
    *value = argv[++*i];
    return 0;
}

int agent_config_parse_args(agent_config *c, agent_config_args *args, int argc, char **argv,
                            char *err, size_t errlen)
{
    memset(args, 0, sizeof *args);
    agent_config_defaults(c);
    /* first pass: --config, --help, --print-config, and the shape of the line */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        size_t len = strcspn(a, "=");
        const char *v;
        int rc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            args->help = true;
            return 0;
        } else if (!strcmp(a, "--print-config")) {
            args->print_config = true;
        } else if (len == 8 && !strncmp(a, "--config", 8)) {
            if ((rc = flag_value(argc, argv, &i, len, &v, err, errlen)))
                return rc;
            if (args->config_file)
                return fail(err, errlen, AGENT_CONFIG_EUSAGE,
                            "--config given twice ('%s' and '%s')", args->config_file, v);
            args->config_file = v;
        } else if ((len == 5 && !strncmp(a, "--set", 5)) || find_flag(a, len)) {
            if ((rc = flag_value(argc, argv, &i, len, &v, err, errlen)))
                return rc;
        } else if (a[0] == '-') {
            return fail(err, errlen, AGENT_CONFIG_EUNKNOWN,
                        "unknown flag '%.*s' (murmur agent --help lists them)", (int)len, a);
        } else {
            return fail(err, errlen, AGENT_CONFIG_EUSAGE,
                        "unexpected argument '%s' (murmur agent takes only flags)", a);
        }
    }
    int rc;
    if (args->config_file && (rc = agent_config_load_file(c, args->config_file, err, errlen)))
        return rc;
    /* second pass: settings, left to right */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        size_t len = strcspn(a, "=");
        const char *v;
        if (!strcmp(a, "--print-config"))
            continue;
        if (len == 8 && !strncmp(a, "--config", 8)) {
            flag_value(argc, argv, &i, len, &v, err, errlen);
            continue;
        }
        if (len == 5 && !strncmp(a, "--set", 5)) {
            flag_value(argc, argv, &i, len, &v, err, errlen);
            const char *eq = strchr(v, '=');
            if (!eq)
                return fail(err, errlen, AGENT_CONFIG_EUSAGE,
                            "--set '%s': expected section.key=value", v);
            char name[AGENT_CONFIG_ORIGIN_MAX - 8];
            size_t nl = (size_t)(eq - v);
            if (nl >= sizeof name)
                return fail(err, errlen, AGENT_CONFIG_EUNKNOWN, "--set: unknown option '%.*s'",
                            (int)nl, v);
            memcpy(name, v, nl);
            name[nl] = '\0';
            char origin[AGENT_CONFIG_ORIGIN_MAX];
            snprintf(origin, sizeof origin, "--set %s", name);
            if ((rc = set_named(c, name, eq + 1, origin, true, err, errlen)))
                return rc;
            continue;
        }
        const flag_def *fd = find_flag(a, len);
        flag_value(argc, argv, &i, len, &v, err, errlen);
        if ((rc = set_named(c, fd->option, v, fd->flag, true, err, errlen)))
            return rc;
    }
    return agent_config_finish(c, err, errlen);
}

/* Quote a string value when it would not read back as itself. */
static void write_string(FILE *out, const char *v)
{
    bool plain = *v && v[0] != '"' && v[0] != ' ' && v[strlen(v) - 1] != ' ';
    for (const char *p = v; *p && plain; p++)
        if (*p == '#' || *p == '\\' || *p == '\t')
            plain = false;
    if (plain) {
        fputs(v, out);
        return;
    }
    fputc('"', out);
    for (const char *p = v; *p; p++) {
        if (*p == '"' || *p == '\\')
            fputc('\\', out);
        fputc(*p, out);
    }
    fputc('"', out);
}

void agent_config_write(const agent_config *c, FILE *out)
{
    const char *section = "";
    for (size_t i = 0; i < OPTION_COUNT; i++) {
        const agent_config_option *o = &agent_config_options[i];
        const char *f = cfield_ptr(c, o);
        if (strcmp(section, o->section)) {
            fprintf(out, "%s[%s]\n", i ? "\n" : "", o->section);
            section = o->section;
        }
        if (o->type == T_SEED) {
            if (!c->seed_count)
                fprintf(out, "# %s = HOST:PORT   (no seeds: this agent starts a new cluster)\n",
                        o->key);
            for (uint32_t s = 0; s < c->seed_count; s++)
                fprintf(out, "%s = %s   # %s\n", o->key, c->seeds[s], c->origin[i]);
            continue;
        }
        if (is_derived(c->origin[i])) {
            fprintf(out, "%s = \"\"   # %s: ", o->key, c->origin[i]);
            write_string(out, f);
            fputc('\n', out);
            continue;
        }
        fprintf(out, "%s = ", o->key);
        switch (o->type) {
        case T_U32:
        case T_U32_SET: {
            uint32_t v;
            memcpy(&v, f, sizeof v);
            fprintf(out, "%u", v);
            break;
        }
        case T_U64: {
            uint64_t v;
            memcpy(&v, f, sizeof v);
            fprintf(out, "%llu", (unsigned long long)v);
            break;
        }
        case T_F64: {
            double v;
            memcpy(&v, f, sizeof v);
            char b[40];
            snprintf(b, sizeof b, "%.15g", v);
            if (strtod(b, NULL) != v)
                snprintf(b, sizeof b, "%.17g", v);
            fputs(b, out);
            break;
        }
        case T_ENUM: {
            int v;
            memcpy(&v, f, sizeof v);
            fputs(o->choices[v], out);
            break;
        }
        default:
            write_string(out, f);
        }
        fprintf(out, "   # %s\n", c->origin[i]);
    }
}

void agent_config_usage(FILE *out)
{
    fprintf(out, "usage: murmur agent [--config FILE] [--set SECTION.KEY=VALUE]... [FLAGS]\n\n"
                 "  --config FILE              read settings from FILE (docs/CONFIG.md)\n"
                 "  --set SECTION.KEY=VALUE    override one setting (repeatable)\n"
                 "  --print-config             print the effective settings and exit\n");
    for (size_t i = 0; i < FLAG_COUNT; i++) {
        char left[64];
        snprintf(left, sizeof left, "%s %s", flags[i].flag, flags[i].metavar);
        fprintf(out, "  %-26s same as --set %s=%s%s\n", left, flags[i].option, flags[i].metavar,
                !strcmp(flags[i].flag, "--seed") ? " (repeatable)" : "");
    }
    fprintf(out, "\nLater settings override earlier ones; flags override the file.\n");
}

int agent_config_main(agent_config *c, int argc, char **argv)
{
    agent_config_args args;
    char err[AGENT_CONFIG_ERR_MAX];
    int rc = agent_config_parse_args(c, &args, argc, argv, err, sizeof err);
    if (rc) {
        fprintf(stderr, "murmur agent: %s\n", err);
        fprintf(stderr, "(murmur agent --help lists the flags; docs/CONFIG.md the options)\n");
        return 2;
    }
    if (args.help) {
        agent_config_usage(stdout);
        return 0;
    }
    if (args.print_config) {
        agent_config_write(c, stdout);
        return 0;
    }
    agent_log_set_level((agent_log_level)c->log_level);
    return -1;
}

void agent_config_schedule(const agent_config *c, model_schedule *out)
{
    memset(out, 0, sizeof *out);
    out->kind = MODEL_LR_CONSTANT;
    out->base_lr = (float)c->lr;
    out->min_lr = (float)c->min_lr;
    out->gamma = 1.0f;
    out->warmup_steps = c->warmup_steps;
    char buf[AGENT_CONFIG_SCHEDULE_MAX];
    snprintf(buf, sizeof buf, "%s", c->schedule);
    char *a = strchr(buf, ':');
    if (!a)
        return; /* constant (the only form without ':', as parsing checked) */
    *a++ = '\0';
    char *g = strchr(a, ':');
    if (g)
        *g++ = '\0';
    uint64_t steps = 0;
    parse_u64(a, &steps);
    if (!strcmp(buf, "cosine")) {
        out->kind = MODEL_LR_COSINE;
        out->total_steps = steps;
    } else if (!strcmp(buf, "step") && g) {
        double gamma = 1.0;
        parse_f64(g, &gamma);
        out->kind = MODEL_LR_STEP;
        out->step_every = steps;
        out->gamma = (float)gamma;
    }
}
