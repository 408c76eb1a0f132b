/* agent/config — see config.h for the sources, the syntax and the errors.
 * The parsing, the file syntax and the printing are common/settings; this
 * file holds the agent's option table, the checks of its own value kinds
 * (addresses, model specs, schedules), the command line and the checks
 * between options. */
#include "agent/config.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/keys.h"
#include "agent/log.h"
#include "common/cli.h"
#include "common/errmsg.h"
#include "common/text.h"
#include "gossip/sched.h"
#include "model/optim.h"

static const char *const bits_names[] = {"1", "2", "4", "8", "16", "32", NULL};
const char *const agent_encryption_names[] = {"encrypt", "auth-only", NULL};

#define BUILTIN_DATASET "fashion-mnist"

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
    if (!common_parse_u64(colon + 1, &port) || port > 65535 || (port == 0 && !zero_port))
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
    double len;
    if (!strcmp(buf, "cosine"))
        return common_parse_f64(a, &len) && len > 0;
    if (strcmp(buf, "step"))
        return false;
    char *g = strchr(a, ':');
    if (!g)
        return false;
    *g++ = '\0';
    double gamma;
    return common_parse_f64(a, &len) && len > 0 && common_parse_f64(g, &gamma) && gamma > 0 &&
           gamma <= 1;
}

/* ---- checks of the agent's value kinds (common_opt_check_fn) ---- */

/* tcp://host:port, host:port, ipc://..., inproc://...; normalised in place. */
static int check_addr(const common_option *o, const char *text, void *value, char *why,
                      size_t whylen)
{
    char tmp[AGENT_CONFIG_ADDR_MAX];
    const char *reason = NULL;
    if (parse_addr(text, tmp, sizeof tmp, &reason))
        return common_errf(why, whylen, COMMON_SETTINGS_EVALUE, "'%s' %s", text, reason);
    snprintf(value, o->size, "%s", tmp);
    return 0;
}

/* host:port or http://host:port; stored without the scheme. */
static int check_hostport(const common_option *o, const char *text, void *value, char *why,
                          size_t whylen)
{
    const char *v = text;
    if (!strncmp(v, "http://", 7))
        v += 7;
    if (*v && !valid_hostport(v, false))
        return common_errf(why, whylen, COMMON_SETTINGS_EVALUE,
                           "'%s' is not HOST:PORT (port 1-65535), or empty for off", text);
    memmove(value, v, strlen(v) + 1);
    return 0;
}

/* "host:NAME": the model of a program embedding libmurmur (docs/EMBEDDING.md),
 * a name of 1-64 characters [a-z0-9._-] that agents compare when they meet;
 * the built-in trainer cannot build it. */
static bool valid_host_spec(const char *s)
{
    if (strncmp(s, "host:", 5))
        return false;
    size_t n = strlen(s + 5);
    if (n < 1 || n > 64)
        return false;
    for (const char *p = s + 5; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || strchr("._-", *p)))
            return false;
    return true;
}

static int check_spec(const common_option *o, const char *text, void *value, char *why,
                      size_t whylen)
{
    if (valid_host_spec(text))
        return 0;
    /* cnn specs: the grammar of model/spec.h (shapes are checked when the
     * model is created, once the data is known) */
    char msg[MODEL_MSG_MAX] = "";
    if (!strncmp(text, "cnn", 3) && model_spec_check(text, msg, sizeof msg))
        return common_errf(why, whylen, COMMON_SETTINGS_EVALUE, "%s", msg);
    if (strncmp(text, "cnn", 3) && agent_config_parse_spec(text, NULL, NULL))
        return common_errf(why, whylen, COMMON_SETTINGS_EVALUE,
                           "'%s' is not softmax, mlp:H1,H2,... (1-%u layers, widths 1-%u) or "
                           "cnn[:LAYERS] (or host:NAME)",
                           text, AGENT_CONFIG_LAYERS_MAX, AGENT_CONFIG_LAYER_WIDTH_MAX);
    return 0;
}

static int check_schedule(const common_option *o, const char *text, void *value, char *why,
                          size_t whylen)
{
    if (!valid_schedule(text))
        return common_errf(why, whylen, COMMON_SETTINGS_EVALUE,
                           "'%s' is not constant, step:LEN:GAMMA (0 < GAMMA <= 1) or "
                           "cosine:LEN (LEN > 0)",
                           text);
    return 0;
}

/* [faults]: a node id as 16 hex digits (murmur status prints them so);
 * stored in lower case. */
static int check_node_id(const common_option *o, const char *text, void *value, char *why,
                         size_t whylen)
{
    size_t n = strlen(text);
    char *out = value;
    for (size_t i = 0; i < n && n == 16; i++)
        if (!strchr("0123456789abcdefABCDEF", text[i]))
            n = 0;
    if (n != 16)
        return common_errf(why, whylen, COMMON_SETTINGS_EVALUE,
                           "'%s' is not a node id (16 hex digits, as murmur status prints)", text);
    for (size_t i = 0; i <= n; i++)
        out[i] = (char)(text[i] >= 'A' && text[i] <= 'F' ? text[i] - 'A' + 'a' : text[i]);
    return 0;
}

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
#define F(f)     COMMON_OPT_FIELD(agent_config, f)
#define NONEMPTY COMMON_OPT_NONEMPTY
#define PATH     COMMON_OPT_PATH
#define U32      COMMON_OPT_U32
#define U64      COMMON_OPT_U64
#define F64      COMMON_OPT_F64
#define STR      COMMON_OPT_STR
#define ENUM     COMMON_OPT_ENUM

/* One row per option: section, key, type, field, then what applies of
 * .min/.max (inclusive), .flags, .names, .check, .def, .unit, .help. */
const agent_config_option agent_config_options[] = {
    {"node", "listen", STR, F(listen), .flags = NONEMPTY, .check = check_addr,
     .def = "tcp://127.0.0.1:7000",
     .help = "address the agent listens on for peers (host:port or tcp://, ipc://, inproc://)"},
    {"node", "advertise", STR, F(advertise), .check = check_addr, .def = "",
     .help = "address peers should dial; empty = the listen address (required when listen is a "
             "wildcard such as 0.0.0.0)"},
    {"node", "data_dir", STR, F(data_dir), .flags = NONEMPTY | PATH, .def = "murmur-data",
     .help = "directory for keys, shards and checkpoints"},
    {"node", "key_file", STR, F(key_file), .flags = PATH, .def = "",
     .help = "this agent's Ed25519 key pair; empty = DATA_DIR/murmur.key (murmur keygen --out "
             "DATA_DIR)"},
    {"node", "network_key_file", STR, F(network_key_file), .flags = PATH, .def = "",
     .help = "the cluster's shared network key (admission), or up to 4 keys back to back (the "
             "first used, all accepted: rotation); empty = DATA_DIR/network.key"},
    {"node", "allow_list_file", STR, F(allow_list_file), .flags = PATH, .def = "",
     .help = "file of allowed public keys, one per line (a file with no key admits nobody); unset "
             "= admit any holder of the network key"},
    {"node", "encryption", ENUM, F(encryption), .names = agent_encryption_names, .def = "encrypt",
     .help = "encrypt: frames encrypted and authenticated; auth-only: authenticated, sent in clear "
             "(trusted networks only; used only with peers that ask for it too)"},
    {"seeds", "seed", COMMON_OPT_LIST, COMMON_OPT_LIST_FIELD(agent_config, seeds, seed_count),
     .flags = NONEMPTY | COMMON_OPT_LIST_REPLACE | COMMON_OPT_LIST_UNIQUE, .check = check_addr,
     .def = "", .unit = "seeds",
     .help = "HOST:PORT of an agent to join through; repeat the line for several"},
    {"model", "spec", STR, F(model_spec), .flags = NONEMPTY, .check = check_spec,
     .def = "mlp:256,128",
     .help = "model: softmax (linear) or mlp:H1,H2,... (hidden layer widths)"},
    {"model", "dataset", STR, F(dataset), .flags = NONEMPTY | PATH, .def = BUILTIN_DATASET,
     .help = "fashion-mnist (the Debian package) or the path of a data set"},
    {"model", "test_dataset", STR, F(test_dataset), .flags = PATH, .def = "",
     .help = "the rows the agent evaluates on (IDX directory or CSV); empty = the data set's own "
             "test files; required for a CSV data set (murmur shard writes its held-out rows "
             "to DIR/test.csv)"},
    {"model", "batch", U32, F(batch), .min = 1, .max = 65536, .def = "64", .unit = "samples",
     .help = "mini-batch size of one local step"},
    {"model", "lr", F64, F(lr), .min = 1e-9, .max = 10, .def = "0.05", .help = "learning rate"},
    {"model", "momentum", F64, F(momentum), .min = 0, .max = 0.999, .def = "0.9",
     .help = "heavy-ball momentum coefficient (0 = plain SGD)"},
    {"model", "weight_decay", F64, F(weight_decay), .min = 0, .max = 1, .def = "0.0001",
     .help = "L2 weight decay coefficient"},
    {"model", "schedule", STR, F(schedule), .flags = NONEMPTY, .check = check_schedule,
     .def = "cosine:4",
     .help = "learning-rate schedule: constant, step:LEN:GAMMA (multiply by GAMMA every LEN) or "
             "cosine:LEN (cosine decay to min_lr over LEN, warm-up included); LEN in "
             "schedule_unit"},
    {"model", "schedule_unit", ENUM, F(schedule_unit), .names = gossip_sched_unit_names,
     .def = "epochs",
     .help = "unit of schedule and warmup lengths: epochs (this agent's samples / the catalog's), "
             "cluster-epochs (the whole cluster's samples / the catalog's) or steps (this "
             "agent's local steps)"},
    {"model", "warmup", F64, F(warmup), .min = 0, .max = 1e12, .def = "0.125",
     .unit = "schedule_unit", .help = "linear learning-rate warm-up from ~0 to lr; 0 = none"},
    {"model", "lr_scaling", ENUM, F(lr_scaling), .names = gossip_sched_scaling_names, .def = "sqrt",
     .help = "learning rate for N live agents: none (lr), sqrt (lr*sqrt(N)) or linear (lr*N), "
             "at most 8x"},
    {"model", "min_lr", F64, F(min_lr), .min = 0, .max = 10, .def = "0.0025",
     .help = "floor of the cosine schedule, kept after it ends (<= lr)"},
    {"model", "init_seed", U64, F(init_seed), .min = 0, .max = 18446744073709551615.0, .def = "1",
     .help = "seed of the initial parameters (every agent must use the same)"},
    {"model", "eval_every_steps", U64, F(eval_every_steps), .min = 1, .max = 1e12, .def = "200",
     .unit = "steps", .help = "local steps between two evaluations on the test set"},
    {"model", "eval_samples", U32, F(eval_samples), .min = 0, .max = 1e7, .def = "2000",
     .unit = "samples", .help = "test samples evaluated (the first N of the test set); 0 = all"},
    {"mixing", "algorithm", ENUM, F(algorithm), .names = gossip_mix_algo_names, .def = "gossip",
     .help = "dpsgd, gossip, push-sum, choco or allreduce"},
    {"mixing", "topology", ENUM, F(topology), .names = gossip_topology_names, .def = "random",
     .help = "peer choice for gossip: random, ring, torus, exponential or one-peer-exponential"},
    {"mixing", "bits", U32, F(bits), .min = 1, .max = 32, .names = bits_names, .def = "8",
     .unit = "bits",
     .help = "quantization bits per value: 1, 2, 4, 8, 16 or 32 (32 = no quantization)"},
    {"mixing", "block", U32, F(block), .min = 1, .max = 65536, .def = "256", .unit = "values",
     .help = "values per quantization block (each block carries one scale)"},
    {"mixing", "interval_steps", U32, F(interval_steps), .min = 1, .max = 1000000, .def = "24",
     .unit = "steps",
     .help = "local steps between mixing rounds (H for allreduce); the least with cost_share"},
    {"mixing", "cost_share", F64, F(cost_share), .min = 0, .max = 0.5, .def = "0",
     .help = "largest share of the training thread's CPU time a round may cost (measured): the "
             "interval grows from interval_steps up to interval_steps_max to stay under it; "
             "0 = a fixed interval_steps"},
    {"mixing", "interval_steps_max", U32, F(interval_steps_max), .min = 1, .max = 1000000,
     .def = "64", .unit = "steps", .help = "longest interval the cost_share rule may choose"},
    {"mixing", "outer_momentum", F64, F(outer_momentum), .min = 0, .max = 0.99, .def = "0.3",
     .help = "momentum of the outer step on each round's result, on this agent's own progress "
             "(gossip/sched.h): the model moves up to 1/(1-m) times as far; 0 = none"},
    {"mixing", "allreduce_step_deadline_ms", U32, F(allreduce_step_deadline_ms), .min = 10,
     .max = 600000, .def = "5000", .unit = "ms",
     .help = "longest wait for one allreduce step before the round is aborted"},
    {"mixing", "robust", ENUM, F(robust), .names = gossip_robust_rule_names, .def = "clip",
     .help = "bounds on peers' values: none, clip (a peer's difference to our model clipped to "
             "robust_clip_factor x the median of our own recent local deltas; a peer beyond it two "
             "rounds in a row is ignored from the second until it comes within), trimmed-mean or "
             "centered-clip (dpsgd; clip elsewhere)"},
    {"mixing", "robust_clip_factor", F64, F(robust_clip_factor), .min = 0, .max = 1e6, .def = "3",
     .help = "tau = this x the median of the last 16 local-delta norms (0 = 3)"},
    {"mixing", "robust_trim", U32, F(robust_trim), .min = 0, .max = 8, .def = "1", .unit = "values",
     .help = "trimmed-mean: values dropped at each end of a coordinate (0 = 1)"},
    {"membership", "probe_interval_ms", U32, F(probe_interval_ms), .min = 50, .max = 60000,
     .def = "1000", .unit = "ms", .help = "SWIM protocol period: one member probed per interval"},
    {"membership", "probe_timeout_ms", U32, F(probe_timeout_ms), .min = 10, .max = 60000,
     .def = "500", .unit = "ms",
     .help = "wait for a direct ack before asking indirect_k members; < probe_interval_ms"},
    {"membership", "indirect_k", U32, F(indirect_k), .min = 0, .max = 16, .def = "3",
     .unit = "members", .help = "members asked to probe indirectly"},
    {"membership", "suspicion_mult", U32, F(suspicion_mult), .min = 1, .max = 64, .def = "4",
     .help = "suspicion timeout = suspicion_mult * log10(N+1) * probe_interval_ms"},
    {"shards", "dir", STR, F(shards_dir), .flags = PATH, .def = "",
     .help = "where shard files are kept; empty = DATA_DIR/shards"},
    {"shards", "replication", U32, F(replication), .min = 1, .max = 16, .def = "3",
     .unit = "copies", .help = "live agents holding each shard"},
    {"checkpoint", "every_steps", U64, F(checkpoint_every_steps), .min = 0, .max = 1e12,
     .def = "1000", .unit = "steps", .help = "local steps between checkpoints; 0 = never"},
    {"checkpoint", "path", STR, F(checkpoint_path), .flags = PATH, .def = "",
     .help = "checkpoint file; empty = DATA_DIR/checkpoint.bin"},
    {"metrics", "listen", STR, F(metrics_listen), .check = check_hostport, .def = "",
     .help = "HOST:PORT of the HTTP server for /metrics and /status; empty = off"},
    {"log", "level", ENUM, F(log_level), .names = agent_log_level_names, .def = "info",
     .help = "debug, info, warn, error or off"},
    {"log", "progress_interval_ms", U32, F(progress_interval_ms), .min = 100, .max = 3600000,
     .def = "5000", .unit = "ms", .help = "time between two event=progress lines"},
    {"limits", "max_peers", U32, F(max_peers), .min = 2, .max = AGENT_CONFIG_PEERS_MAX,
     .def = "1024", .unit = "peers", .help = "most members in the view and open links"},
    {"limits", "send_queue_len", U32, F(send_queue_len), .min = 1, .max = 4096, .def = "64",
     .unit = "frames", .help = "frames queued per peer link before new ones are dropped"},
    {"limits", "recv_queue_len", U32, F(recv_queue_len), .min = 1,
     .max = AGENT_CONFIG_QUEUE_LEN_MAX, .def = "256", .unit = "frames",
     .help = "received frames waiting for the event loop"},
    {"limits", "event_queue_len", U32, F(event_queue_len), .min = 16,
     .max = AGENT_CONFIG_QUEUE_LEN_MAX, .def = "4096", .unit = "events",
     .help = "events of every kind waiting for the event loop"},
    {"run", "max_steps", U64, F(run_max_steps), .min = 0, .max = 1e15, .def = "0", .unit = "steps",
     .help = "the job ends after this many local steps (exit status 3); 0 = no limit"},
    {"run", "max_seconds", F64, F(run_max_seconds), .min = 0, .max = 1e9, .def = "0", .unit = "s",
     .help = "the job ends this long after the start (exit status 4); 0 = no limit"},
    {"run", "target_accuracy", F64, F(run_target_accuracy), .min = 0, .max = 1, .def = "0",
     .help = "the job ends when the test accuracy reaches this (exit status 5); 0 = never"},
    {"faults", "enable", COMMON_OPT_BOOL, F(faults_enable), .def = "false",
     .help = "turn fault injection on (docs/CHAOS.md); every other faults option is refused "
             "without it"},
    {"faults", "seed", U64, F(faults_seed), .min = 0, .max = 18446744073709551615.0, .def = "1",
     .help = "seed of every random fault decision (the same seed repeats a run's decisions)"},
    {"faults", "peer", COMMON_OPT_LIST,
     COMMON_OPT_LIST_FIELD(agent_config, faults_peers, faults_peer_count),
     .flags = NONEMPTY | COMMON_OPT_LIST_REPLACE | COMMON_OPT_LIST_UNIQUE, .check = check_node_id,
     .def = "", .unit = "peers",
     .help = "node id (16 hex digits) the link faults below apply to; repeat for several; none = "
             "all peers"},
    {"faults", "drop", F64, F(faults_drop), .min = 0, .max = 1, .def = "0",
     .help = "probability that a frame sent is lost"},
    {"faults", "delay_ms", U32, F(faults_delay_ms), .min = 0, .max = 60000, .def = "0",
     .unit = "ms", .help = "added to every frame sent"},
    {"faults", "jitter_ms", U32, F(faults_jitter_ms), .min = 0, .max = 60000, .def = "0",
     .unit = "ms", .help = "plus a uniform random delay up to this"},
    {"faults", "bandwidth_bps", U64, F(faults_bandwidth_bps), .min = 0, .max = 1e15, .def = "0",
     .unit = "bit/s",
     .help = "frames leave at most at this rate (0 = no cap; at least 8000); for all peers it "
             "caps the agent's total egress"},
    {"faults", "duplicate", F64, F(faults_duplicate), .min = 0, .max = 1, .def = "0",
     .help = "probability that a frame is sent twice"},
    {"faults", "reorder", F64, F(faults_reorder), .min = 0, .max = 1, .def = "0",
     .help = "probability that a frame is held back up to reorder_window_ms (later frames may "
             "overtake it)"},
    {"faults", "reorder_window_ms", U32, F(faults_reorder_window_ms), .min = 0, .max = 60000,
     .def = "0", .unit = "ms", .help = "how far a reordered frame is held back"},
    {"faults", "corrupt", F64, F(faults_corrupt), .min = 0, .max = 1, .def = "0",
     .help = "probability that one byte of a sealed frame flips (the receiver refuses it, cause "
             "auth, and closes the link)"},
    {"faults", "partition", COMMON_OPT_LIST,
     COMMON_OPT_LIST_FIELD(agent_config, faults_partition, faults_partition_count),
     .flags = NONEMPTY | COMMON_OPT_LIST_REPLACE | COMMON_OPT_LIST_UNIQUE, .check = check_node_id,
     .def = "", .unit = "ids",
     .help = "node id cut off both ways (no frame to it, none from it delivered); repeat for "
             "several"},
    {"faults", "pause_training", COMMON_OPT_BOOL, F(faults_pause_training), .def = "false",
     .help = "the host (built-in trainer or libmurmur host) is held in murmur_mix: no step "
             "(membership and mixing go on)"},
    {"faults", "slow_training", F64, F(faults_slow_training), .min = 1, .max = 1000, .def = "1",
     .help = "the host's steps (built-in trainer or libmurmur host) take this many times "
             "longer: murmur_mix holds it"},
    {"faults", "admin_keys_file", STR, F(faults_admin_keys_file), .flags = PATH, .def = "",
     .help = "public keys (one per line) allowed to change faults at run time (murmur fault); "
             "empty or a file with no key = nobody"},
};
#undef F
#undef NONEMPTY
#undef PATH
#undef U32
#undef U64
#undef F64
#undef STR
#undef ENUM
#define OPTION_COUNT (sizeof agent_config_options / sizeof agent_config_options[0])
const size_t agent_config_option_count = OPTION_COUNT;
_Static_assert(sizeof agent_config_options / sizeof agent_config_options[0] <=
                   AGENT_CONFIG_OPTIONS_MAX,
               "agent_config.origin must have a slot per option");
_Static_assert(sizeof(gossip_robust_rule) == sizeof(int), "enums are stored as int");
_Static_assert(sizeof(gossip_mix_algo) == sizeof(int) && sizeof(gossip_topology) == sizeof(int),
               "enum options are stored as int");

static const common_settings agent_settings = {
    .options = agent_config_options,
    .count = OPTION_COUNT,
    .origin_offset = offsetof(agent_config, origin),
    .level_offset = offsetof(agent_config, origin_level),
    .what = "config file",
    .docs = "docs/CONFIG.md",
    .env_prefix = "MURMUR_",
};

/* The command line (common/cli): the front-end flags, then one short flag
 * per common option, each just a name for one section.key. */
enum { FLAG_CONFIG, FLAG_SET, FLAG_PRINT, FLAG_HELP, FLAG_OPTION };
static const common_flag flags[] = {
    {"config", 0, true, FLAG_CONFIG, "FILE", "read settings from FILE (docs/CONFIG.md)", NULL},
    {"set", 0, true, FLAG_SET, "SECTION.KEY=VALUE", "override one setting (repeatable)", NULL},
    {"print-config", 0, false, FLAG_PRINT, "",
     "print the effective settings, each with its source, and exit", NULL},
    {"help", 'h', false, FLAG_HELP, "", "this text", NULL},
    {"listen", 0, true, FLAG_OPTION, "ADDR", NULL, "node.listen"},
    {"advertise", 0, true, FLAG_OPTION, "ADDR", NULL, "node.advertise"},
    {"seed", 0, true, FLAG_OPTION, "HOST:PORT", NULL, "seeds.seed"},
    {"data-dir", 0, true, FLAG_OPTION, "DIR", NULL, "node.data_dir"},
    {"key-file", 0, true, FLAG_OPTION, "FILE", NULL, "node.key_file"},
    {"network-key-file", 0, true, FLAG_OPTION, "FILE", NULL, "node.network_key_file"},
    {"allow-list", 0, true, FLAG_OPTION, "FILE", NULL, "node.allow_list_file"},
    {"model", 0, true, FLAG_OPTION, "SPEC", NULL, "model.spec"},
    {"dataset", 0, true, FLAG_OPTION, "PATH", NULL, "model.dataset"},
    {"mixing", 0, true, FLAG_OPTION, "ALG", NULL, "mixing.algorithm"},
    {"checkpoint", 0, true, FLAG_OPTION, "FILE", NULL, "checkpoint.path"},
    {"metrics", 0, true, FLAG_OPTION, "HOST:PORT", NULL, "metrics.listen"},
    {"log-level", 0, true, FLAG_OPTION, "LEVEL", NULL, "log.level"},
};
#define FLAG_COUNT (sizeof flags / sizeof flags[0])

const char *agent_config_strerror(int err)
{
    return common_settings_strerror(err);
}

int agent_config_option_index(const char *section, const char *key)
{
    return common_settings_find(&agent_settings, section, key);
}

void agent_config_defaults(agent_config *c)
{
    memset(c, 0, sizeof *c);
    common_settings_defaults(&agent_settings, c);
}

int agent_config_set(agent_config *c, const char *name, const char *value, const char *origin,
                     char *err, size_t errlen)
{
    return common_settings_set(&agent_settings, c, name, value, origin ? origin : "--set",
                               COMMON_LEVEL_CLI, err, errlen);
}

int agent_config_load_string(agent_config *c, const char *name, const char *text, char *err,
                             size_t errlen)
{
    return common_settings_load_string(&agent_settings, c, name, text, err, errlen);
}

int agent_config_load_file(agent_config *c, const char *path, char *err, size_t errlen)
{
    return common_settings_load_file(&agent_settings, c, path, err, errlen);
}

void agent_config_write(const agent_config *c, FILE *out)
{
    common_settings_write(&agent_settings, c, out, COMMON_WRITE_ORIGINS);
}

static int option_index(const char *section, const char *key)
{
    int i = common_settings_find(&agent_settings, section, key);
    if (i < 0)
        abort(); /* the names below are the table's */
    return i;
}

/* A value agent_config_finish filled in from another option is DERIVED: it
 * is written back as empty, so that a printed config derives it again. */

static int derive_path(agent_config *c, char *field, size_t cap, const char *section,
                       const char *key, const char *leaf, char *err, size_t errlen)
{
    if (*field)
        return 0;
    int n = snprintf(field, cap, "%s/%s", c->data_dir, leaf);
    common_settings_set_origin(&agent_settings, c, (size_t)option_index(section, key),
                               "derived from node.data_dir", COMMON_LEVEL_DERIVED);
    if (n < 0 || (size_t)n >= cap) {
        field[0] = '\0';
        return common_errf(err, errlen, AGENT_CONFIG_ERANGE,
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
    common_level level = common_settings_level(&agent_settings, c, (size_t)idx);
    if (!*path || level == COMMON_LEVEL_DEFAULT || level == COMMON_LEVEL_DERIVED)
        return 0; /* a default path may legitimately not exist yet */
    if (access(path, R_OK) != 0)
        return common_errf(err, errlen, AGENT_CONFIG_EIO, "%s: %s.%s: cannot read '%s': %s",
                           c->origin[idx], section, key, path, strerror(errno));
    return 0;
}

int agent_config_finish(agent_config *c, char *err, size_t errlen)
{
    int rc;
    const char *lo = c->origin[option_index("node", "listen")];
    if (!*c->advertise) {
        if (wildcard_addr(c->listen))
            return common_errf(err, errlen, AGENT_CONFIG_ECONFLICT,
                               "%s: node.listen %s binds every interface; set node.advertise "
                               "(--advertise HOST:PORT) to the address peers should dial",
                               lo, c->listen);
        memcpy(c->advertise, c->listen, sizeof c->advertise);
        common_settings_set_origin(&agent_settings, c, (size_t)option_index("node", "advertise"),
                                   "derived from node.listen", COMMON_LEVEL_DERIVED);
    } else if (wildcard_addr(c->advertise)) {
        return common_errf(err, errlen, AGENT_CONFIG_ECONFLICT,
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
        return common_errf(err, errlen, AGENT_CONFIG_ECONFLICT,
                           "%s: membership.probe_timeout_ms (%u) must be less than "
                           "membership.probe_interval_ms (%u, from %s)",
                           c->origin[option_index("membership", "probe_timeout_ms")],
                           c->probe_timeout_ms, c->probe_interval_ms,
                           c->origin[option_index("membership", "probe_interval_ms")]);
    gossip_sched_config sched;
    agent_config_sched(c, &sched);
    if (sched.kind == MODEL_LR_COSINE && sched.length <= c->warmup)
        return common_errf(err, errlen, AGENT_CONFIG_ECONFLICT,
                           "%s: model.schedule %s must last longer than model.warmup (%g, from %s)",
                           c->origin[option_index("model", "schedule")], c->schedule, c->warmup,
                           c->origin[option_index("model", "warmup")]);
    if (c->cost_share > 0 && c->interval_steps_max < c->interval_steps)
        return common_errf(err, errlen, AGENT_CONFIG_ECONFLICT,
                           "%s: mixing.interval_steps_max (%u) must not be below "
                           "mixing.interval_steps (%u, from %s)",
                           c->origin[option_index("mixing", "interval_steps_max")],
                           c->interval_steps_max, c->interval_steps,
                           c->origin[option_index("mixing", "interval_steps")]);
    if (c->min_lr > c->lr)
        return common_errf(err, errlen, AGENT_CONFIG_ECONFLICT,
                           "%s: model.min_lr (%g) must not exceed model.lr (%g, from %s)",
                           c->origin[option_index("model", "min_lr")], c->min_lr, c->lr,
                           c->origin[option_index("model", "lr")]);
    if (c->recv_queue_len > c->event_queue_len)
        return common_errf(
            err, errlen, AGENT_CONFIG_ECONFLICT,
            "%s: limits.recv_queue_len (%u) must not exceed limits.event_queue_len (%u, "
            "from %s)",
            c->origin[option_index("limits", "recv_queue_len")], c->recv_queue_len,
            c->event_queue_len, c->origin[option_index("limits", "event_queue_len")]);
    if (c->replication > c->max_peers)
        return common_errf(err, errlen, AGENT_CONFIG_ECONFLICT,
                           "%s: shards.replication (%u) exceeds limits.max_peers (%u)",
                           c->origin[option_index("shards", "replication")], c->replication,
                           c->max_peers);
    if (c->seed_count > c->max_peers)
        return common_errf(err, errlen, AGENT_CONFIG_ECONFLICT,
                           "%s: %u seeds exceed limits.max_peers (%u)",
                           c->origin[option_index("seeds", "seed")], c->seed_count, c->max_peers);
    const char *fault_set = c->faults_drop > 0             ? "drop"
                            : c->faults_delay_ms           ? "delay_ms"
                            : c->faults_jitter_ms          ? "jitter_ms"
                            : c->faults_bandwidth_bps      ? "bandwidth_bps"
                            : c->faults_duplicate > 0      ? "duplicate"
                            : c->faults_reorder > 0        ? "reorder"
                            : c->faults_reorder_window_ms  ? "reorder_window_ms"
                            : c->faults_corrupt > 0        ? "corrupt"
                            : c->faults_peer_count         ? "peer"
                            : c->faults_partition_count    ? "partition"
                            : c->faults_pause_training     ? "pause_training"
                            : c->faults_slow_training != 1 ? "slow_training"
                            : c->faults_admin_keys_file[0] ? "admin_keys_file"
                                                           : NULL;
    if (!c->faults_enable && fault_set) /* a fault, not just an option written with its default */
        return common_errf(err, errlen, AGENT_CONFIG_ECONFLICT,
                           "%s: faults.%s is set but faults.enable is false: fault injection "
                           "must be turned on explicitly (faults.enable = true)",
                           c->origin[option_index("faults", fault_set)], fault_set);
    if (c->faults_bandwidth_bps && c->faults_bandwidth_bps < 8000)
        return common_errf(err, errlen, AGENT_CONFIG_ERANGE,
                           "%s: faults.bandwidth_bps %llu is below 8000 (0 = no cap)",
                           c->origin[option_index("faults", "bandwidth_bps")],
                           (unsigned long long)c->faults_bandwidth_bps);
    if (c->faults_reorder > 0 && !c->faults_reorder_window_ms)
        return common_errf(err, errlen, AGENT_CONFIG_ECONFLICT,
                           "%s: faults.reorder needs faults.reorder_window_ms",
                           c->origin[option_index("faults", "reorder")]);
    if ((rc = must_read(c, "faults", "admin_keys_file", c->faults_admin_keys_file, err, errlen)) ||
        (rc = must_read(c, "node", "network_key_file", c->network_key_file, err, errlen)) ||
        (rc = must_read(c, "node", "allow_list_file", c->allow_list_file, err, errlen)))
        return rc;
    if (strcmp(c->dataset, BUILTIN_DATASET) &&
        (rc = must_read(c, "model", "dataset", c->dataset, err, errlen)))
        return rc;
    if ((rc = must_read(c, "model", "test_dataset", c->test_dataset, err, errlen)))
        return rc;
    /* a CSV file has no test rows of its own: evaluating on it would score
     * the agent on the rows it trains on */
    struct stat st;
    if (strcmp(c->dataset, BUILTIN_DATASET) && !c->test_dataset[0] &&
        !(stat(c->dataset, &st) == 0 && S_ISDIR(st.st_mode)))
        return common_errf(err, errlen, AGENT_CONFIG_ECONFLICT,
                           "%s: model.dataset %s is a single file (CSV): set model.test_dataset "
                           "to rows the agent does not train on (murmur shard --data %s writes "
                           "its held-out rows to OUT/test.csv), so that accuracy is not measured "
                           "on training rows",
                           c->origin[option_index("model", "dataset")], c->dataset, c->dataset);
    return 0;
}

extern char **environ;

int agent_config_load_env(agent_config *c, char *const *envp, char *err, size_t errlen)
{
    return common_settings_load_env(&agent_settings, c, envp ? envp : environ, err, errlen);
}

/* The flag the command-line parser just returned (its row). */
static const common_flag *current_flag(const common_cli *cli)
{
    for (size_t i = 0; i < FLAG_COUNT; i++)
        if (cli->given && !strcmp(cli->given + 2, flags[i].name))
            return &flags[i];
    return NULL;
}

int agent_config_parse_args(agent_config *c, agent_config_args *args, int argc, char **argv,
                            char *err, size_t errlen)
{
    memset(args, 0, sizeof *args);
    agent_config_defaults(c);
    common_cli cli;
    /* first pass: --config, --help, --print-config, and the shape of the line */
    common_cli_init(&cli, "murmur agent", flags, FLAG_COUNT, argc, argv);
    for (int id; (id = common_cli_next(&cli)) != COMMON_CLI_END;) {
        if (id == COMMON_CLI_ERROR)
            return common_errf(err, errlen,
                               cli.err_unknown ? AGENT_CONFIG_EUNKNOWN : AGENT_CONFIG_EUSAGE, "%s",
                               cli.err);
        if (id == COMMON_CLI_POSITIONAL)
            return common_errf(err, errlen, AGENT_CONFIG_EUSAGE,
                               "unexpected argument '%s' (murmur agent takes only flags)", cli.arg);
        if (id == FLAG_HELP) {
            args->help = true;
            return 0;
        }
        if (id == FLAG_PRINT)
            args->print_config = true;
        if (id == FLAG_CONFIG) {
            if (args->config_file)
                return common_errf(err, errlen, AGENT_CONFIG_EUSAGE,
                                   "--config given twice ('%s' and '%s')", args->config_file,
                                   cli.arg);
            args->config_file = cli.arg;
        }
    }
    int rc;
    if (args->config_file &&
        (rc = common_settings_load_file(&agent_settings, c, args->config_file, err, errlen)))
        return rc;
    if ((rc = common_settings_load_env(&agent_settings, c, environ, err, errlen)))
        return rc;
    /* second pass: settings, left to right */
    common_cli_init(&cli, "murmur agent", flags, FLAG_COUNT, argc, argv);
    for (int id; (id = common_cli_next(&cli)) != COMMON_CLI_END;) {
        if (id == FLAG_SET)
            rc = common_settings_assign(&agent_settings, c, cli.arg, "--set", COMMON_LEVEL_CLI, err,
                                        errlen);
        else if (id == FLAG_OPTION)
            rc = common_settings_set(&agent_settings, c, current_flag(&cli)->sets, cli.arg,
                                     cli.given, COMMON_LEVEL_CLI, err, errlen);
        if (rc)
            return rc;
    }
    return agent_config_finish(c, err, errlen);
}

void agent_config_usage(FILE *out)
{
    common_cli cli;
    common_cli_init(&cli, "murmur agent", flags, FLAG_COUNT, 0, NULL);
    fprintf(out, "usage: murmur agent [--config FILE] [--set SECTION.KEY=VALUE]... [FLAGS]\n\n");
    common_cli_usage(&cli, out);
    fprintf(out, "\nSources, lowest first: defaults, the --config file, the environment\n"
                 "(MURMUR_SECTION_KEY=VALUE, e.g. MURMUR_NODE_DATA_DIR=/srv/murmur), then the\n"
                 "flags left to right (--seed repeats). --print-config shows where each value\n"
                 "came from. Every option: docs/CONFIG.md.\n");
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

void agent_config_sched(const agent_config *c, gossip_sched_config *out)
{
    memset(out, 0, sizeof *out);
    out->interval_steps = c->interval_steps;
    out->cost_share = c->cost_share;
    out->interval_steps_max = c->cost_share > 0 ? c->interval_steps_max : 0;
    out->outer_momentum = c->outer_momentum;
    out->batch = c->batch;
    out->kind = MODEL_LR_CONSTANT;
    out->base_lr = (float)c->lr;
    out->min_lr = (float)c->min_lr;
    out->gamma = 1.0f;
    out->warmup = c->warmup;
    out->unit = (gossip_sched_unit)c->schedule_unit;
    out->scaling = (gossip_sched_scaling)c->lr_scaling;
    char buf[AGENT_CONFIG_SCHEDULE_MAX];
    snprintf(buf, sizeof buf, "%s", c->schedule);
    char *a = strchr(buf, ':');
    if (!a)
        return; /* constant (the only form without ':', as parsing checked) */
    *a++ = '\0';
    char *g = strchr(a, ':');
    if (g)
        *g++ = '\0';
    double len = 0;
    common_parse_f64(a, &len);
    if (!strcmp(buf, "cosine")) {
        out->kind = MODEL_LR_COSINE;
        out->length = len;
    } else if (!strcmp(buf, "step") && g) {
        double gamma = 1.0;
        common_parse_f64(g, &gamma);
        out->kind = MODEL_LR_STEP;
        out->step_every = len;
        out->gamma = (float)gamma;
    }
}
