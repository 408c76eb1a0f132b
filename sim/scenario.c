/* sim/scenario — see scenario.h for the format, docs/SIMULATOR.md for keys. */
#include "sim/scenario.h"

#include "gossip/mix.h"
#include "gossip/swim.h"
#include "gossip/topology.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef enum key_type { K_U64, K_U32, K_F64, K_ENUM, K_STR, K_BOOL, K_LIST } key_type;

typedef struct key_def {
    const char *name;
    key_type type;
    size_t off;
    double min, max;
    int min_exclusive;        /* the range is (min, max] */
    const char *const *names; /* K_ENUM: allowed words, in enum order, NULL-terminated */
    const char *def;
    const char *doc;
} key_def;

static const char *const MODES[] = {"rounds", "timed", NULL};
static const char *const MODEL_KINDS[] = {"mlp", "softmax", "consensus", "quadratic", NULL};
static const char *const ALGORITHMS[] = {"dpsgd",     "gossip", "push-sum", "choco",
                                         "allreduce", "ps",     NULL};
static const char *const TOPOLOGIES[] = {
    "random", "ring", "torus", "exponential", "one-peer-exponential", NULL};
static const char *const LATENCY_DISTS[] = {"const",     "uniform", "normal",
                                            "lognormal", "matrix",  NULL};
static const char *const MEMBERSHIP_MODES[] = {"oracle", "swim", NULL};
static const char *const STRAGGLER_MODELS[] = {"none",   "fixed",     "random",
                                               "pareto", "lognormal", NULL};

/* the enums are stored as int; their order is the order of the words */
_Static_assert(SIM_NET_LAT_CONST == 0 && SIM_NET_LAT_UNIFORM == 1 && SIM_NET_LAT_NORMAL == 2 &&
                   SIM_NET_LAT_LOGNORMAL == 3 && SIM_NET_LAT_MATRIX == 4,
               "latency_dist words follow sim_net_latency_kind");
_Static_assert(SIM_COMPUTE_NONE == 0 && SIM_COMPUTE_FIXED == 1 && SIM_COMPUTE_RANDOM == 2 &&
                   SIM_COMPUTE_PARETO == 3 && SIM_COMPUTE_LOGNORMAL == 4,
               "straggler_model words follow sim_compute_model");
/* the mixing words and values are the core's (gossip/mix.h, gossip/topology.h),
 * so the simulator can cast; ps (parameter server) is the simulator's own */
_Static_assert((int)SIM_MIX_DPSGD == (int)GOSSIP_MIX_DPSGD &&
                   (int)SIM_MIX_GOSSIP == (int)GOSSIP_MIX_GOSSIP &&
                   (int)SIM_MIX_PUSH_SUM == (int)GOSSIP_MIX_PUSHSUM &&
                   (int)SIM_MIX_CHOCO == (int)GOSSIP_MIX_CHOCO &&
                   (int)SIM_MIX_ALLREDUCE == (int)GOSSIP_MIX_ALLREDUCE &&
                   (int)SIM_MIX_PS == (int)GOSSIP_MIX_ALGO_COUNT,
               "mixing.algorithm follows gossip_mix_algo");
_Static_assert((int)SIM_TOPO_RANDOM == (int)GOSSIP_TOPO_RANDOM &&
                   (int)SIM_TOPO_RING == (int)GOSSIP_TOPO_RING &&
                   (int)SIM_TOPO_TORUS == (int)GOSSIP_TOPO_TORUS &&
                   (int)SIM_TOPO_EXPONENTIAL == (int)GOSSIP_TOPO_EXPONENTIAL &&
                   (int)SIM_TOPO_ONE_PEER_EXPONENTIAL == (int)GOSSIP_TOPO_ONE_PEER_EXP,
               "mixing.topology follows gossip_topology");
_Static_assert(sizeof(sim_run_mode) == sizeof(int) && sizeof(sim_net_latency_kind) == sizeof(int),
               "enums are stored as int");

#define OFF(field) offsetof(sim_scenario, field)
#define BIG        1e9
#define BW_MAX     1e7 /* Mb/s: 10 Tb/s is above any link */
#define LAT_MAX    SIM_NET_LATENCY_MS_MAX

static const key_def KEYS[] = {
    {"run.seed", K_U64, OFF(run.seed), 0, 18446744073709551615.0, 0, NULL, "1",
     "seed of every random draw; the same seed gives the same trace"},
    {"run.agents", K_U32, OFF(run.agents), 1, SIM_SCENARIO_AGENTS_MAX, 0, NULL, "16",
     "number of simulated agents"},
    {"run.mode", K_ENUM, OFF(run.mode), 0, 0, 0, MODES, "rounds",
     "rounds: synchronous rounds; timed: continuous time"},
    {"run.rounds", K_U32, OFF(run.rounds), 1, BIG, 0, NULL, "100", "rounds to run (mode rounds)"},
    {"run.duration_s", K_F64, OFF(run.duration_s), 0, BIG, 0, NULL, "60",
     "simulated seconds to run (mode timed); horizon of random faults in both modes"},
    {"run.target_accuracy", K_F64, OFF(run.target_accuracy), 0, 1, 0, NULL, "0.9",
     "accuracy whose first crossing gives time_to_target_s"},
    {"model.kind", K_ENUM, OFF(model.kind), 0, 0, 0, MODEL_KINDS, "consensus",
     "model trained: mlp, softmax, consensus (average of vectors), quadratic"},
    {"model.dim", K_U32, OFF(model.dim), 1, 1e8, 0, NULL, "100",
     "parameters of consensus/quadratic; input features of synthetic data"},
    {"model.hidden", K_U32, OFF(model.hidden), 1, 1e6, 0, NULL, "64", "hidden units of mlp"},
    {"model.lr", K_F64, OFF(model.lr), 0, 100, 1, NULL, "0.05", "learning rate"},
    {"model.batch", K_U32, OFF(model.batch), 1, 1e6, 0, NULL, "32", "samples per local step"},
    {"model.data", K_STR, OFF(model.data), 0, 0, 0, NULL, "",
     "data set file (IDX or CSV); empty = synthetic data"},
    {"mixing.algorithm", K_ENUM, OFF(mixing.algorithm), 0, 0, 0, ALGORITHMS, "gossip",
     "how agents mix models"},
    {"mixing.topology", K_ENUM, OFF(mixing.topology), 0, 0, 0, TOPOLOGIES, "random",
     "peer choice for gossip-style algorithms"},
    {"mixing.bits", K_U32, OFF(mixing.bits), 1, 32, 0, NULL, "32",
     "quantization bits per value: 1, 2, 4, 8, 16 or 32"},
    {"mixing.interval_steps", K_U32, OFF(mixing.interval_steps), 1, 1e6, 0, NULL, "1",
     "local steps between two mixing steps"},
    {"membership.mode", K_ENUM, OFF(membership.mode), 0, 0, 0, MEMBERSHIP_MODES, "oracle",
     "oracle: views change on every agent at once; swim: real SWIM membership (gossip/node)"},
    {"membership.probe_interval_ms", K_F64, OFF(membership.probe_interval_ms), 1, 60000, 0, NULL,
     "200", "swim: protocol period (one probe per agent per period)"},
    {"membership.probe_timeout_ms", K_F64, OFF(membership.probe_timeout_ms), 0, 60000, 1, NULL,
     "100", "swim: direct ack wait before indirect probes (< probe_interval_ms)"},
    {"membership.suspicion_mult", K_U32, OFF(membership.suspicion_mult), 1, 64, 0, NULL, "4",
     "swim: suspicion timeout = suspicion_mult * max(1, log10 N) periods"},
    {"membership.indirect_k", K_U32, OFF(membership.indirect_k), 0, GOSSIP_SWIM_INDIRECT_MAX, 0,
     NULL, "3", "swim: members asked to probe indirectly"},
    {"network.latency_ms", K_F64, OFF(network.latency_ms), 0, LAT_MAX, 0, NULL, "1",
     "one-way latency (const); mean (normal); median (lognormal)"},
    {"network.latency_dist", K_ENUM, OFF(network.latency_dist), 0, 0, 0, LATENCY_DISTS, "const",
     "how link latencies are drawn, once per link"},
    {"network.latency_min_ms", K_F64, OFF(network.latency_min_ms), 0, LAT_MAX, 0, NULL, "0",
     "uniform: lower bound"},
    {"network.latency_max_ms", K_F64, OFF(network.latency_max_ms), 0, LAT_MAX, 0, NULL, "2",
     "uniform: upper bound"},
    {"network.latency_sd_ms", K_F64, OFF(network.latency_sd_ms), 0, LAT_MAX, 0, NULL, "0",
     "normal: standard deviation (draws below 0 become 0)"},
    {"network.latency_sigma", K_F64, OFF(network.latency_sigma), 0, 10, 0, NULL, "0.5",
     "lognormal: standard deviation of ln(latency)"},
    {"network.latency_file", K_STR, OFF(network.latency_file), 0, 0, 0, NULL, "",
     "matrix: file of run.agents rows of run.agents latencies in ms"},
    {"network.bandwidth_mbps", K_F64, OFF(network.bandwidth_mbps), 0, BW_MAX, 0, NULL, "0",
     "upload and download of every agent, Mb/s; 0 = unlimited"},
    {"network.upload_mbps", K_F64, OFF(network.upload_mbps), -1, BW_MAX, 0, NULL, "-1",
     "upload, Mb/s; -1 = bandwidth_mbps, 0 = unlimited"},
    {"network.download_mbps", K_F64, OFF(network.download_mbps), -1, BW_MAX, 0, NULL, "-1",
     "download, Mb/s; -1 = bandwidth_mbps, 0 = unlimited"},
    {"network.loss", K_F64, OFF(network.loss), 0, 1, 0, NULL, "0",
     "probability that a message is lost"},
    {"compute.step_ms", K_F64, OFF(compute.step_ms), 0, SIM_COMPUTE_STEP_MS_MAX, 1, NULL, "10",
     "mean time of one local step at speed 1"},
    {"compute.stragglers", K_F64, OFF(compute.stragglers), 0, 1, 0, NULL, "0",
     "fixed model: fraction of agents that are stragglers"},
    {"compute.slowdown", K_F64, OFF(compute.slowdown), 1, SIM_COMPUTE_SLOWDOWN_MAX, 0, NULL, "4",
     "fixed and random models: step time factor of a slow step"},
    {"compute.straggler_model", K_ENUM, OFF(compute.straggler_model), 0, 0, 0, STRAGGLER_MODELS,
     "fixed", "none, fixed, random, pareto, lognormal"},
    {"compute.slow_prob", K_F64, OFF(compute.slow_prob), 0, 1, 0, NULL, "0.05",
     "random model: probability that a step is slow"},
    {"compute.pareto_alpha", K_F64, OFF(compute.pareto_alpha), 1, 1e6, 1, NULL, "2.5",
     "pareto model: tail index (> 1; mean fixed at 1)"},
    {"compute.lognormal_sigma", K_F64, OFF(compute.lognormal_sigma), 0, 10, 0, NULL, "0.5",
     "lognormal model: sigma (mean fixed at 1)"},
    {"compute.speed_sigma", K_F64, OFF(compute.speed_sigma), 0, 10, 0, NULL, "0",
     "per-agent speed spread: speed = exp(speed_sigma * N(0,1))"},
    {"shards.count", K_U32, OFF(shards.count), 1, 1e6, 0, NULL, "16", "data shards"},
    {"shards.replication", K_U32, OFF(shards.replication), 1, 64, 0, NULL, "3",
     "replicas of each shard (<= run.agents)"},
    {"faults.crash_rate_per_s", K_F64, OFF(faults.crash_rate_per_s), 0, 1e6, 0, NULL, "0",
     "random crashes per second over all agents (Poisson)"},
    {"faults.restart_after_s", K_F64, OFF(faults.restart_after_s), 0, BIG, 0, NULL, "0",
     "a crashed agent restarts after this; 0 = stays down"},
    {"faults.loss_burst_rate_per_s", K_F64, OFF(faults.loss_burst_rate_per_s), 0, 1e6, 0, NULL, "0",
     "random loss bursts per second (gaps exponential)"},
    {"faults.loss_burst_prob", K_F64, OFF(faults.loss_burst_prob), 0, 1, 0, NULL, "0.5",
     "loss probability during a random burst"},
    {"faults.loss_burst_s", K_F64, OFF(faults.loss_burst_s), 0, BIG, 0, NULL, "1",
     "length of a random burst"},
    {"faults.event", K_LIST, OFF(faults.events), 0, 0, 0, NULL, "",
     "a scheduled fault: TIME KIND [ARGS] (repeatable; empty value clears)"},
    {"output.dir", K_STR, OFF(output.dir), 0, 0, 0, NULL, "sim-out",
     "directory for series.csv, summary.json, plots"},
    {"output.plot", K_BOOL, OFF(output.plot), 0, 0, 0, NULL, "false",
     "write PNG plots (also --plot)"},
    {"output.every_rounds", K_U32, OFF(output.every_rounds), 1, BIG, 0, NULL, "1",
     "rounds between two series rows (mode rounds)"},
    {"output.every_s", K_F64, OFF(output.every_s), 0, BIG, 1, NULL, "1",
     "simulated seconds between two series rows (mode timed)"},
    {"output.per_agent", K_BOOL, OFF(output.per_agent), 0, 0, 0, NULL, "false",
     "also write one series row per agent"},
};
#define NKEYS (sizeof KEYS / sizeof KEYS[0])
_Static_assert(sizeof KEYS / sizeof KEYS[0] <= SIM_SCENARIO_KEYS_MAX, "key table fits origins");

static const char *const SECTIONS[] = {"run",     "model",  "mixing", "membership", "network",
                                       "compute", "shards", "faults", "output"};
#define NSECTIONS (sizeof SECTIONS / sizeof SECTIONS[0])

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

const char *sim_scenario_strerror(int err)
{
    switch (err) {
    case SIM_SCENARIO_OK:
        return "ok";
    case SIM_SCENARIO_EIO:
        return "cannot read the scenario";
    case SIM_SCENARIO_ESYNTAX:
        return "syntax error";
    case SIM_SCENARIO_EKEY:
        return "unknown section or key";
    case SIM_SCENARIO_EVALUE:
        return "bad value";
    case SIM_SCENARIO_ERANGE:
        return "value out of range";
    case SIM_SCENARIO_EDUP:
        return "set twice";
    case SIM_SCENARIO_ETOOMANY:
        return "too many values";
    default:
        return "unknown error";
    }
}

/* ---- key table access ---- */

static sim_scenario_key_info INFO[NKEYS];
static int info_ready;

static const char *type_name(const key_def *k)
{
    static char enum_types[NKEYS][160];
    switch (k->type) {
    case K_U64:
    case K_U32:
        return "integer";
    case K_F64:
        return "number";
    case K_STR:
        return "string";
    case K_BOOL:
        return "bool";
    case K_LIST:
        return "list";
    case K_ENUM: {
        char *b = enum_types[k - KEYS];
        size_t used = 0;
        for (const char *const *w = k->names; *w; w++)
            used += (size_t)snprintf(b + used, sizeof enum_types[0] - used, "%s%s",
                                     w == k->names ? "" : "|", *w);
        return b;
    }
    }
    return "?";
}

size_t sim_scenario_key_count(void)
{
    return NKEYS;
}

const sim_scenario_key_info *sim_scenario_key_at(size_t i)
{
    if (i >= NKEYS)
        return NULL;
    if (!info_ready) {
        for (size_t j = 0; j < NKEYS; j++)
            INFO[j] = (sim_scenario_key_info){KEYS[j].name, type_name(&KEYS[j]), KEYS[j].def,
                                              KEYS[j].min,  KEYS[j].max,         KEYS[j].doc};
        info_ready = 1;
    }
    return &INFO[i];
}

static const key_def *find_key(const char *name)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (!strcmp(KEYS[i].name, name))
            return &KEYS[i];
    return NULL;
}

static int known_section(const char *s, size_t len)
{
    for (size_t i = 0; i < NSECTIONS; i++)
        if (strlen(SECTIONS[i]) == len && !strncmp(SECTIONS[i], s, len))
            return 1;
    return 0;
}

/* "latency_ms, latency_dist, ..." of the key's section, for messages */
static void section_keys(const char *key, char *buf, size_t len)
{
    const char *dot = strchr(key, '.');
    size_t sl = dot ? (size_t)(dot - key) : strlen(key);
    size_t used = 0;
    buf[0] = 0;
    for (size_t i = 0; i < NKEYS && used + 1 < len; i++)
        if (!strncmp(KEYS[i].name, key, sl) && KEYS[i].name[sl] == '.')
            used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? ", " : "",
                                     KEYS[i].name + sl + 1);
}

/* ---- values ---- */

static void *field(sim_scenario *sc, const key_def *k)
{
    return (char *)sc + k->off;
}

static const void *cfield(const sim_scenario *sc, const key_def *k)
{
    return (const char *)sc + k->off;
}

static void fmt_double(double v, char *buf, size_t len)
{
    /* integers as integers; else the shortest form that reads back the same */
    if (v == floor(v) && fabs(v) < 1e15) {
        snprintf(buf, len, "%.0f", v);
        return;
    }
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(buf, len, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            return;
    }
}

static int parse_bool(const char *v, int *out)
{
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};
    for (size_t i = 0; i < 4; i++) {
        if (!strcmp(v, yes[i]))
            return *out = 1, 0;
        if (!strcmp(v, no[i]))
            return *out = 0, 0;
    }
    return -1;
}

static void range_text(const key_def *k, char *buf, size_t len)
{
    char a[40], b[40];
    fmt_double(k->min, a, sizeof a);
    fmt_double(k->max, b, sizeof b);
    snprintf(buf, len, "%s%s, %s]", k->min_exclusive ? "(" : "[", a, b);
}

static int set_value(sim_scenario *sc, const key_def *k, const char *v, const char *origin,
                     char *err, size_t errlen)
{
    char rt[96];
    switch (k->type) {
    case K_U64:
    case K_U32: {
        const char *p = v;
        while (*p && isdigit((unsigned char)*p))
            p++;
        if (!*v || *p) {
            set_err(err, errlen, "%s: %s = %s: not a non-negative integer", origin, k->name, v);
            return SIM_SCENARIO_EVALUE;
        }
        errno = 0;
        unsigned long long x = strtoull(v, NULL, 10);
        range_text(k, rt, sizeof rt);
        if (errno == ERANGE || (double)x < k->min || (double)x > k->max ||
            (k->type == K_U32 && x > UINT32_MAX)) {
            set_err(err, errlen, "%s: %s = %s: out of range %s", origin, k->name, v, rt);
            return SIM_SCENARIO_ERANGE;
        }
        if (!strcmp(k->name, "mixing.bits") && (x & (x - 1))) {
            set_err(err, errlen, "%s: %s = %s: must be 1, 2, 4, 8, 16 or 32", origin, k->name, v);
            return SIM_SCENARIO_EVALUE;
        }
        if (k->type == K_U64)
            *(uint64_t *)field(sc, k) = x;
        else
            *(uint32_t *)field(sc, k) = (uint32_t)x;
        return SIM_SCENARIO_OK;
    }
    case K_F64: {
        char *end;
        double x = strtod(v, &end);
        if (!*v || *end || !isfinite(x)) {
            set_err(err, errlen, "%s: %s = %s: not a number", origin, k->name, v);
            return SIM_SCENARIO_EVALUE;
        }
        range_text(k, rt, sizeof rt);
        if (x < k->min || x > k->max || (k->min_exclusive && x <= k->min)) {
            set_err(err, errlen, "%s: %s = %s: out of range %s", origin, k->name, v, rt);
            return SIM_SCENARIO_ERANGE;
        }
        if (k->min == -1 && x < 0 && x != -1) {
            set_err(err, errlen, "%s: %s = %s: -1 (same as bandwidth_mbps) or >= 0", origin,
                    k->name, v);
            return SIM_SCENARIO_ERANGE;
        }
        *(double *)field(sc, k) = x;
        return SIM_SCENARIO_OK;
    }
    case K_ENUM:
        for (int i = 0; k->names[i]; i++)
            if (!strcmp(v, k->names[i])) {
                *(int *)field(sc, k) = i;
                return SIM_SCENARIO_OK;
            }
        set_err(err, errlen, "%s: %s = %s: must be one of %s", origin, k->name, v, type_name(k));
        return SIM_SCENARIO_EVALUE;
    case K_BOOL:
        if (parse_bool(v, (int *)field(sc, k))) {
            set_err(err, errlen, "%s: %s = %s: must be true or false", origin, k->name, v);
            return SIM_SCENARIO_EVALUE;
        }
        return SIM_SCENARIO_OK;
    case K_STR:
        if (strlen(v) >= SIM_SCENARIO_STR_MAX) {
            set_err(err, errlen, "%s: %s: longer than %u characters", origin, k->name,
                    SIM_SCENARIO_STR_MAX - 1);
            return SIM_SCENARIO_ERANGE;
        }
        strcpy((char *)field(sc, k), v);
        return SIM_SCENARIO_OK;
    case K_LIST: {
        if (!*v) { /* an empty value clears the list */
            sc->faults.nevents = 0;
            return SIM_SCENARIO_OK;
        }
        char msg[192];
        if (sim_fault_check_line(v, msg, sizeof msg)) {
            set_err(err, errlen, "%s: %s = %s: %s", origin, k->name, v, msg);
            return SIM_SCENARIO_EVALUE;
        }
        if (sc->faults.nevents == SIM_SCENARIO_EVENTS_MAX) {
            set_err(err, errlen, "%s: %s: more than %u fault lines", origin, k->name,
                    SIM_SCENARIO_EVENTS_MAX);
            return SIM_SCENARIO_ETOOMANY;
        }
        uint32_t i = sc->faults.nevents++;
        snprintf(sc->faults.events[i], SIM_FAULT_LINE_MAX, "%s", v);
        snprintf(sc->faults.event_origin[i], SIM_SCENARIO_ORIGIN_MAX, "%s", origin);
        return SIM_SCENARIO_OK;
    }
    }
    return SIM_SCENARIO_EVALUE;
}

void sim_scenario_defaults(sim_scenario *sc)
{
    memset(sc, 0, sizeof *sc);
    for (size_t i = 0; i < NKEYS; i++) {
        int rc = set_value(sc, &KEYS[i], KEYS[i].def, "default", NULL, 0);
        assert(rc == 0);
        (void)rc;
    }
}

int sim_scenario_set_key(sim_scenario *sc, const char *key, const char *value, const char *origin,
                         char *err, size_t errlen)
{
    const key_def *k = find_key(key);
    if (!k) {
        char keys[512];
        const char *dot = strchr(key, '.');
        if (!dot || !known_section(key, (size_t)(dot - key))) {
            set_err(err, errlen,
                    "%s: unknown key '%s' (keys are section.key; sections: run, model, mixing, "
                    "network, compute, shards, faults, output)",
                    origin, key);
        } else {
            section_keys(key, keys, sizeof keys);
            set_err(err, errlen, "%s: unknown key '%s' (keys of [%.*s]: %s)", origin, key,
                    (int)(dot - key), key, keys);
        }
        return SIM_SCENARIO_EKEY;
    }
    if (strchr(value, '#')) {
        set_err(err, errlen, "%s: %s: '#' starts a comment and cannot be part of a value", origin,
                key);
        return SIM_SCENARIO_EVALUE;
    }
    int rc = set_value(sc, k, value, origin, err, errlen);
    if (rc == 0)
        snprintf(sc->origin[k - KEYS], SIM_SCENARIO_ORIGIN_MAX, "%s", origin);
    return rc;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        s[--n] = 0;
    return s;
}

int sim_scenario_set(sim_scenario *sc, const char *assignment, char *err, size_t errlen)
{
    char buf[SIM_SCENARIO_LINE_MAX];
    if (strlen(assignment) >= sizeof buf) {
        set_err(err, errlen, "--set: longer than %u characters", SIM_SCENARIO_LINE_MAX - 1);
        return SIM_SCENARIO_ESYNTAX;
    }
    strcpy(buf, assignment);
    char *eq = strchr(buf, '=');
    if (!eq) {
        set_err(err, errlen, "--set %s: expected section.key=value", assignment);
        return SIM_SCENARIO_ESYNTAX;
    }
    *eq = 0;
    char origin[SIM_SCENARIO_ORIGIN_MAX];
    snprintf(origin, sizeof origin, "--set %.80s", assignment);
    return sim_scenario_set_key(sc, trim(buf), trim(eq + 1), origin, err, errlen);
}

int sim_scenario_parse(sim_scenario *sc, const char *text, const char *name, char *err,
                       size_t errlen)
{
    char section[32] = "";
    uint32_t seen[NKEYS] = {0}; /* line where each key was set in this text */
    uint32_t lineno = 0;
    const char *p = text;
    while (*p) {
        lineno++;
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char line[SIM_SCENARIO_LINE_MAX];
        char origin[SIM_SCENARIO_ORIGIN_MAX];
        snprintf(origin, sizeof origin, "%.80s:%u", name, lineno);
        if (len >= sizeof line) {
            set_err(err, errlen, "%s: line longer than %u characters", origin,
                    SIM_SCENARIO_LINE_MAX - 1);
            return SIM_SCENARIO_ESYNTAX;
        }
        memcpy(line, p, len);
        line[len] = 0;
        p = nl ? nl + 1 : p + len;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = 0;
        char *s = trim(line);
        if (!*s)
            continue;
        if (*s == '[') {
            size_t n = strlen(s);
            if (s[n - 1] != ']') {
                set_err(err, errlen, "%s: '%s': a section line is [name]", origin, s);
                return SIM_SCENARIO_ESYNTAX;
            }
            s[n - 1] = 0;
            char *name_s = trim(s + 1);
            if (!known_section(name_s, strlen(name_s))) {
                set_err(err, errlen,
                        "%s: unknown section [%s] (sections: run, model, mixing, network, "
                        "compute, shards, faults, output)",
                        origin, name_s);
                return SIM_SCENARIO_EKEY;
            }
            snprintf(section, sizeof section, "%s", name_s);
            continue;
        }
        char *eq = strchr(s, '=');
        if (!eq) {
            set_err(err, errlen, "%s: '%s': expected key = value or [section]", origin, s);
            return SIM_SCENARIO_ESYNTAX;
        }
        *eq = 0;
        char *key = trim(s), *value = trim(eq + 1);
        if (!*key) {
            set_err(err, errlen, "%s: a value without a key", origin);
            return SIM_SCENARIO_ESYNTAX;
        }
        if (!*section) {
            set_err(err, errlen, "%s: key '%s' before any [section]", origin, key);
            return SIM_SCENARIO_ESYNTAX;
        }
        char full[SIM_SCENARIO_KEY_MAX + 32];
        snprintf(full, sizeof full, "%s.%s", section, key);
        const key_def *k = find_key(full);
        if (k && k->type != K_LIST && seen[k - KEYS]) {
            set_err(err, errlen, "%s: %s set twice (first at line %u)", origin, full,
                    seen[k - KEYS]);
            return SIM_SCENARIO_EDUP;
        }
        if (k && k->type != K_LIST && k->type != K_STR && !*value) {
            set_err(err, errlen, "%s: %s has no value", origin, full);
            return SIM_SCENARIO_EVALUE;
        }
        int rc = sim_scenario_set_key(sc, full, value, origin, err, errlen);
        if (rc)
            return rc;
        seen[k - KEYS] = lineno;
    }
    return SIM_SCENARIO_OK;
}

int sim_scenario_load(sim_scenario *sc, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        set_err(err, errlen, "%s: cannot open scenario: %s", path, strerror(errno));
        return SIM_SCENARIO_EIO;
    }
    /* a scenario is small: at most 256 event lines and ~50 keys; cap at 1 MiB */
    enum { FILE_MAX = 1 << 20 };
    char *text = malloc(FILE_MAX + 1);
    if (!text) {
        fclose(f);
        set_err(err, errlen, "%s: out of memory", path);
        return SIM_SCENARIO_EIO;
    }
    size_t n = fread(text, 1, FILE_MAX + 1, f);
    int bad = ferror(f);
    fclose(f);
    if (bad || n > FILE_MAX) {
        free(text);
        set_err(err, errlen, "%s: %s", path, bad ? "read error" : "larger than 1 MiB");
        return SIM_SCENARIO_EIO;
    }
    text[n] = 0;
    if (memchr(text, 0, n)) {
        free(text);
        set_err(err, errlen, "%s: contains a NUL byte; not a text file", path);
        return SIM_SCENARIO_ESYNTAX;
    }
    int rc = sim_scenario_parse(sc, text, path, err, errlen);
    free(text);
    return rc;
}

static const char *origin_of(const sim_scenario *sc, const char *key)
{
    const key_def *k = find_key(key);
    assert(k);
    return sc->origin[k - KEYS][0] ? sc->origin[k - KEYS] : "default";
}

int sim_scenario_check(const sim_scenario *sc, char *err, size_t errlen)
{
    if (sc->membership.mode == SIM_MEMBERSHIP_SWIM) {
        if (!(sc->membership.probe_timeout_ms < sc->membership.probe_interval_ms)) {
            set_err(err, errlen,
                    "membership.probe_timeout_ms = %g (%s) must be less than "
                    "membership.probe_interval_ms = %g (%s)",
                    sc->membership.probe_timeout_ms, origin_of(sc, "membership.probe_timeout_ms"),
                    sc->membership.probe_interval_ms,
                    origin_of(sc, "membership.probe_interval_ms"));
            return SIM_SCENARIO_ERANGE;
        }
        if (sc->run.agents > SIM_SWIM_AGENTS_MAX) {
            set_err(err, errlen,
                    "run.agents = %u (%s): membership.mode = swim runs at most %u agents (each "
                    "holds a member table); use membership.mode = oracle beyond",
                    sc->run.agents, origin_of(sc, "run.agents"), SIM_SWIM_AGENTS_MAX);
            return SIM_SCENARIO_ERANGE;
        }
    }
    if (sc->shards.replication > sc->run.agents) {
        set_err(err, errlen, "shards.replication = %u (%s) exceeds run.agents = %u (%s)",
                sc->shards.replication, origin_of(sc, "shards.replication"), sc->run.agents,
                origin_of(sc, "run.agents"));
        return SIM_SCENARIO_ERANGE;
    }
    if (sc->network.latency_dist == SIM_NET_LAT_UNIFORM &&
        sc->network.latency_min_ms > sc->network.latency_max_ms) {
        set_err(err, errlen,
                "network.latency_min_ms = %g (%s) exceeds network.latency_max_ms = %g (%s)",
                sc->network.latency_min_ms, origin_of(sc, "network.latency_min_ms"),
                sc->network.latency_max_ms, origin_of(sc, "network.latency_max_ms"));
        return SIM_SCENARIO_ERANGE;
    }
    if (sc->network.latency_dist == SIM_NET_LAT_LOGNORMAL && !(sc->network.latency_ms > 0)) {
        set_err(err, errlen, "network.latency_ms = 0 (%s): lognormal latency needs a median > 0",
                origin_of(sc, "network.latency_ms"));
        return SIM_SCENARIO_ERANGE;
    }
    if (sc->network.latency_dist == SIM_NET_LAT_MATRIX) {
        if (!sc->network.latency_file[0]) {
            set_err(err, errlen, "network.latency_dist = matrix (%s) needs network.latency_file",
                    origin_of(sc, "network.latency_dist"));
            return SIM_SCENARIO_EVALUE;
        }
        if (sc->run.agents > SIM_NET_MATRIX_AGENTS_MAX) {
            set_err(err, errlen, "run.agents = %u (%s): a latency matrix supports at most %u",
                    sc->run.agents, origin_of(sc, "run.agents"), SIM_NET_MATRIX_AGENTS_MAX);
            return SIM_SCENARIO_ERANGE;
        }
    }
    if (sc->mixing.algorithm != SIM_MIX_PS &&
        !gossip_mix_combination_valid((gossip_mix_algo)sc->mixing.algorithm,
                                      (gossip_topology)sc->mixing.topology)) {
        char a[32], t[32];
        sim_scenario_get(sc, "mixing.algorithm", a, sizeof a);
        sim_scenario_get(sc, "mixing.topology", t, sizeof t);
        set_err(err, errlen,
                "mixing.algorithm = %s (%s) cannot run on mixing.topology = %s (%s): dpsgd "
                "needs a graph (not random), choco a static one (ring, torus, exponential)",
                a, origin_of(sc, "mixing.algorithm"), t, origin_of(sc, "mixing.topology"));
        return SIM_SCENARIO_EVALUE;
    }
    if (sc->run.mode == SIM_RUN_TIMED && !(sc->run.duration_s > 0)) {
        set_err(err, errlen, "run.duration_s = 0 (%s): mode timed needs a duration",
                origin_of(sc, "run.duration_s"));
        return SIM_SCENARIO_ERANGE;
    }
    /* fault lines against the number of agents, one at a time so the error
     * names the line's origin */
    for (uint32_t i = 0; i < sc->faults.nevents; i++) {
        const char *one[1] = {sc->faults.events[i]};
        sim_faults_config fc = {
            .agents = sc->run.agents, .seed = sc->run.seed, .lines = one, .nlines = 1};
        sim_fault_list l;
        char msg[256];
        int rc = sim_faults_build(&l, &fc, msg, sizeof msg);
        if (rc) {
            /* drop the "fault line 1 (...): " prefix; the origin says where */
            const char *m = strstr(msg, "): ");
            set_err(err, errlen, "%s: faults.event = %s: %s", sc->faults.event_origin[i],
                    sc->faults.events[i], m ? m + 3 : msg);
            return rc == SIM_FAULTS_ENOMEM ? SIM_SCENARIO_EIO : SIM_SCENARIO_ERANGE;
        }
        sim_fault_list_free(&l);
    }
    return SIM_SCENARIO_OK;
}

static void get_value(const sim_scenario *sc, const key_def *k, char *buf, size_t len)
{
    const void *f = cfield(sc, k);
    switch (k->type) {
    case K_U64:
        snprintf(buf, len, "%llu", (unsigned long long)*(const uint64_t *)f);
        break;
    case K_U32:
        snprintf(buf, len, "%u", *(const uint32_t *)f);
        break;
    case K_F64:
        fmt_double(*(const double *)f, buf, len);
        break;
    case K_ENUM:
        snprintf(buf, len, "%s", k->names[*(const int *)f]);
        break;
    case K_BOOL:
        snprintf(buf, len, "%s", *(const int *)f ? "true" : "false");
        break;
    case K_STR:
        snprintf(buf, len, "%s", (const char *)f);
        break;
    case K_LIST:
        snprintf(buf, len, "%u", sc->faults.nevents);
        break;
    }
}

int sim_scenario_get(const sim_scenario *sc, const char *key, char *buf, size_t len)
{
    const key_def *k = find_key(key);
    if (!k)
        return SIM_SCENARIO_EKEY;
    get_value(sc, k, buf, len);
    return SIM_SCENARIO_OK;
}

int sim_scenario_write(const sim_scenario *sc, FILE *f)
{
    for (size_t s = 0; s < NSECTIONS; s++) {
        size_t sl = strlen(SECTIONS[s]);
        fprintf(f, "%s[%s]\n", s ? "\n" : "", SECTIONS[s]);
        for (size_t i = 0; i < NKEYS; i++) {
            const key_def *k = &KEYS[i];
            if (strncmp(k->name, SECTIONS[s], sl) || k->name[sl] != '.')
                continue;
            if (k->type == K_LIST) {
                for (uint32_t j = 0; j < sc->faults.nevents; j++)
                    fprintf(f, "%s = %s\n", k->name + sl + 1, sc->faults.events[j]);
                continue;
            }
            char v[SIM_SCENARIO_STR_MAX];
            get_value(sc, k, v, sizeof v);
            fprintf(f, "%s = %s\n", k->name + sl + 1, v);
        }
    }
    return ferror(f) ? SIM_SCENARIO_EIO : SIM_SCENARIO_OK;
}

void sim_scenario_net_config(const sim_scenario *sc, sim_net_config *out)
{
    const double up =
        sc->network.upload_mbps >= 0 ? sc->network.upload_mbps : sc->network.bandwidth_mbps;
    const double down =
        sc->network.download_mbps >= 0 ? sc->network.download_mbps : sc->network.bandwidth_mbps;
    *out = (sim_net_config){.agents = sc->run.agents,
                            .seed = sc->run.seed,
                            .up_bps = up * 1e6,
                            .down_bps = down * 1e6,
                            .latency_kind = sc->network.latency_dist,
                            .latency_ms = sc->network.latency_ms,
                            .loss = sc->network.loss};
    switch (sc->network.latency_dist) {
    case SIM_NET_LAT_UNIFORM:
        out->lat_a = sc->network.latency_min_ms;
        out->lat_b = sc->network.latency_max_ms;
        break;
    case SIM_NET_LAT_NORMAL:
        out->lat_a = sc->network.latency_ms;
        out->lat_b = sc->network.latency_sd_ms;
        break;
    case SIM_NET_LAT_LOGNORMAL:
        out->lat_a = sc->network.latency_ms;
        out->lat_b = sc->network.latency_sigma;
        break;
    default:
        break;
    }
}

void sim_scenario_compute_config(const sim_scenario *sc, sim_compute_config *out)
{
    *out = (sim_compute_config){.agents = sc->run.agents,
                                .seed = sc->run.seed,
                                .step_ms = sc->compute.step_ms,
                                .model = sc->compute.straggler_model,
                                .stragglers = sc->compute.stragglers,
                                .slowdown = sc->compute.slowdown,
                                .slow_prob = sc->compute.slow_prob,
                                .pareto_alpha = sc->compute.pareto_alpha,
                                .lognormal_sigma = sc->compute.lognormal_sigma,
                                .speed_sigma = sc->compute.speed_sigma};
}

void sim_scenario_faults_config(const sim_scenario *sc, const char **lines_buf,
                                sim_faults_config *out)
{
    for (uint32_t i = 0; i < sc->faults.nevents; i++)
        lines_buf[i] = sc->faults.events[i];
    *out = (sim_faults_config){.agents = sc->run.agents,
                               .seed = sc->run.seed,
                               .horizon_us = (uint64_t)llround(sc->run.duration_s * 1e6),
                               .crash_rate_per_s = sc->faults.crash_rate_per_s,
                               .restart_after_s = sc->faults.restart_after_s,
                               .loss_burst_rate_per_s = sc->faults.loss_burst_rate_per_s,
                               .loss_burst_prob = sc->faults.loss_burst_prob,
                               .loss_burst_s = sc->faults.loss_burst_s,
                               .lines = lines_buf,
                               .nlines = sc->faults.nevents};
}

/* ---- sweeps ---- */

void sim_sweep_init(sim_sweep *sw)
{
    memset(sw, 0, sizeof *sw);
}

uint64_t sim_sweep_runs(const sim_sweep *sw)
{
    uint64_t r = 1;
    for (uint32_t a = 0; a < sw->naxes; a++)
        r *= sw->axes[a].n;
    return r;
}

uint32_t sim_sweep_value_index(const sim_sweep *sw, uint64_t r, uint32_t a)
{
    uint64_t stride = 1;
    for (uint32_t b = sw->naxes; b-- > a + 1;)
        stride *= sw->axes[b].n;
    return (uint32_t)((r / stride) % sw->axes[a].n);
}

int sim_sweep_add(sim_sweep *sw, const sim_scenario *base, const char *spec, char *err,
                  size_t errlen)
{
    char buf[SIM_SCENARIO_LINE_MAX];
    if (strlen(spec) >= sizeof buf) {
        set_err(err, errlen, "--sweep: longer than %u characters", SIM_SCENARIO_LINE_MAX - 1);
        return SIM_SCENARIO_ESYNTAX;
    }
    strcpy(buf, spec);
    char *eq = strchr(buf, '=');
    if (!eq) {
        set_err(err, errlen, "--sweep %s: expected section.key=v1,v2,...", spec);
        return SIM_SCENARIO_ESYNTAX;
    }
    *eq = 0;
    const char *key = trim(buf);
    char origin[SIM_SCENARIO_ORIGIN_MAX];
    snprintf(origin, sizeof origin, "--sweep %.60s", key);
    const key_def *k = find_key(key);
    if (!k || k->type == K_LIST) {
        set_err(err, errlen, "%s: %s", origin,
                k ? "list keys cannot be swept" : "unknown key (see docs/SIMULATOR.md)");
        return SIM_SCENARIO_EKEY;
    }
    for (uint32_t a = 0; a < sw->naxes; a++)
        if (!strcmp(sw->axes[a].key, key)) {
            set_err(err, errlen, "%s: key swept twice", origin);
            return SIM_SCENARIO_EDUP;
        }
    if (sw->naxes == SIM_SWEEP_AXES_MAX) {
        set_err(err, errlen, "%s: more than %u swept keys", origin, SIM_SWEEP_AXES_MAX);
        return SIM_SCENARIO_ETOOMANY;
    }
    sim_sweep_axis *ax = &sw->axes[sw->naxes];
    memset(ax, 0, sizeof *ax);
    snprintf(ax->key, sizeof ax->key, "%s", key);
    sim_scenario *tmp = malloc(sizeof *tmp);
    if (!tmp) {
        set_err(err, errlen, "%s: out of memory", origin);
        return SIM_SCENARIO_EIO;
    }
    int rc = SIM_SCENARIO_OK;
    for (char *v = eq + 1; v && rc == 0;) {
        char *comma = strchr(v, ',');
        if (comma)
            *comma = 0;
        char *val = trim(v);
        v = comma ? comma + 1 : NULL;
        if (!*val) {
            set_err(err, errlen, "%s: empty value in the list", origin);
            rc = SIM_SCENARIO_ESYNTAX;
        } else if (ax->n == SIM_SWEEP_VALUES_MAX) {
            set_err(err, errlen, "%s: more than %u values", origin, SIM_SWEEP_VALUES_MAX);
            rc = SIM_SCENARIO_ETOOMANY;
        } else if (strlen(val) >= SIM_SWEEP_VALUE_MAX) {
            set_err(err, errlen, "%s: value longer than %u characters", origin,
                    SIM_SWEEP_VALUE_MAX - 1);
            rc = SIM_SCENARIO_ETOOMANY;
        } else {
            memcpy(tmp, base, sizeof *tmp);
            rc = sim_scenario_set_key(tmp, key, val, origin, err, errlen);
            if (rc == 0)
                snprintf(ax->values[ax->n++], SIM_SWEEP_VALUE_MAX, "%s", val);
        }
    }
    free(tmp);
    if (rc)
        return rc;
    uint64_t runs = sim_sweep_runs(sw) * ax->n;
    if (runs > SIM_SWEEP_RUNS_MAX) {
        set_err(err, errlen, "%s: the sweep would make %llu runs (at most %u)", origin,
                (unsigned long long)runs, SIM_SWEEP_RUNS_MAX);
        return SIM_SCENARIO_ETOOMANY;
    }
    sw->naxes++;
    return SIM_SCENARIO_OK;
}

int sim_sweep_apply(const sim_sweep *sw, uint64_t r, sim_scenario *sc, char *err, size_t errlen)
{
    if (r >= sim_sweep_runs(sw)) {
        set_err(err, errlen, "sweep run %llu: only %llu runs", (unsigned long long)r,
                (unsigned long long)sim_sweep_runs(sw));
        return SIM_SCENARIO_ERANGE;
    }
    for (uint32_t a = 0; a < sw->naxes; a++) {
        char origin[SIM_SCENARIO_ORIGIN_MAX];
        snprintf(origin, sizeof origin, "--sweep %.60s", sw->axes[a].key);
        int rc = sim_scenario_set_key(sc, sw->axes[a].key,
                                      sw->axes[a].values[sim_sweep_value_index(sw, r, a)], origin,
                                      err, errlen);
        if (rc)
            return rc;
    }
    return SIM_SCENARIO_OK;
}

void sim_sweep_label(const sim_sweep *sw, uint64_t r, char *buf, size_t len)
{
    size_t used = 0;
    if (!len)
        return;
    buf[0] = 0;
    for (uint32_t a = 0; a < sw->naxes && used + 1 < len; a++) {
        int n = snprintf(buf + used, len - used, "%s%s=%s", a ? " " : "", sw->axes[a].key,
                         sw->axes[a].values[sim_sweep_value_index(sw, r, a)]);
        if (n < 0)
            break;
        used += (size_t)n < len - used ? (size_t)n : len - used - 1;
    }
}
