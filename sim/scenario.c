/* sim/scenario — see scenario.h for the format, docs/SIMULATOR.md for keys. */
#include "sim/scenario.h"

#include "gossip/mix.h"
#include "gossip/swim.h"
#include "gossip/topology.h"

#include "common/errmsg.h"
#include "common/settings.h"
#include "common/text.h"
#include "model/net.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static const char *const MODES[] = {"rounds", "timed", NULL};
static const char *const MODEL_KINDS[] = {"mlp", "softmax", "consensus", "quadratic", "cnn", NULL};
/* mixing.algorithm: the core's names (gossip/mix.h), then the simulator's own */
static const char *const ALGORITHMS[] = {GOSSIP_MIX_ALGO_NAMES, "ps", NULL};
static const char *const BITS[] = {"1", "2", "4", "8", "16", "32", NULL};
static const char *const LATENCY_DISTS[] = {"const",     "uniform", "normal",
                                            "lognormal", "matrix",  NULL};
static const char *const MEMBERSHIP_MODES[] = {"oracle", "swim", NULL};
static const char *const SHARDS_MODES[] = {"auto", "protocol", "oracle", NULL};
static const char *const STRAGGLER_MODELS[] = {"none",   "fixed",     "random",
                                               "pareto", "lognormal", NULL};

/* the enums are stored as int; their order is the order of the words */
_Static_assert(SIM_NET_LAT_CONST == 0 && SIM_NET_LAT_UNIFORM == 1 && SIM_NET_LAT_NORMAL == 2 &&
                   SIM_NET_LAT_LOGNORMAL == 3 && SIM_NET_LAT_MATRIX == 4,
               "latency_dist words follow sim_net_latency_kind");
_Static_assert(SIM_COMPUTE_NONE == 0 && SIM_COMPUTE_FIXED == 1 && SIM_COMPUTE_RANDOM == 2 &&
                   SIM_COMPUTE_PARETO == 3 && SIM_COMPUTE_LOGNORMAL == 4,
               "straggler_model words follow sim_compute_model");
/* the mixing values are the core's (gossip/mix.h), so the simulator can
 * cast; ps (parameter server) is the simulator's own, after the core's */
_Static_assert((int)SIM_MIX_DPSGD == (int)GOSSIP_MIX_DPSGD &&
                   (int)SIM_MIX_GOSSIP == (int)GOSSIP_MIX_GOSSIP &&
                   (int)SIM_MIX_PUSH_SUM == (int)GOSSIP_MIX_PUSHSUM &&
                   (int)SIM_MIX_CHOCO == (int)GOSSIP_MIX_CHOCO &&
                   (int)SIM_MIX_ALLREDUCE == (int)GOSSIP_MIX_ALLREDUCE &&
                   (int)SIM_MIX_PS == (int)GOSSIP_MIX_ALGO_COUNT,
               "mixing.algorithm follows gossip_mix_algo");
_Static_assert(sizeof(sim_run_mode) == sizeof(int) && sizeof(sim_net_latency_kind) == sizeof(int) &&
                   sizeof(gossip_robust_rule) == sizeof(int) &&
                   sizeof(sim_byz_attack) == sizeof(int),
               "enums are stored as int");

#define OFF(field) offsetof(sim_scenario, field)
#define BIG        1e9
#define BW_MAX     1e7 /* Mb/s: 10 Tb/s is above any link */
#define LAT_MAX    SIM_NET_LATENCY_MS_MAX

/* network.upload_mbps / download_mbps: -1 (same as bandwidth_mbps) or >= 0 */
static int check_minus_one_or_more(const common_option *o, const char *text, void *value, char *why,
                                   size_t whylen)
{
    double x;
    memcpy(&x, value, sizeof x);
    if (x < 0 && x != -1)
        return common_errf(why, whylen, COMMON_SETTINGS_ERANGE,
                           "%s: -1 (same as bandwidth_mbps) or >= 0", text);
    return 0;
}

/* model.spec: the grammar of a cnn spec (model/spec.h); the shapes are
 * checked when the nets are made, once the data is known */
static int check_cnn_spec(const common_option *o, const char *text, void *value, char *why,
                          size_t whylen)
{
    char msg[MODEL_MSG_MAX] = "";
    if (strncmp(text, "cnn", 3) != 0)
        return common_errf(why, whylen, COMMON_SETTINGS_EVALUE,
                           "'%s': cnn (the default CNN) or cnn:LAYERS", text);
    if (model_spec_check(text, msg, sizeof msg))
        return common_errf(why, whylen, COMMON_SETTINGS_EVALUE, "%s", msg);
    return 0;
}

/* *_trace_agents: all, or agent indices and ranges (the range against
 * run.agents is checked in sim_scenario_check) */
static int check_agent_set(const common_option *o, const char *text, void *value, char *why,
                           size_t whylen)
{
    char msg[192];
    if (sim_faults_targets(text, SIM_FAULTS_AGENTS_MAX, NULL, msg, sizeof msg))
        return common_errf(why, whylen, COMMON_SETTINGS_EVALUE, "%s", msg);
    return 0;
}

/* faults.event: a fault line (sim/faults.h) */
static int check_fault_line(const common_option *o, const char *text, void *value, char *why,
                            size_t whylen)
{
    char msg[192];
    if (sim_fault_check_line(text, msg, sizeof msg))
        return common_errf(why, whylen, COMMON_SETTINGS_EVALUE, "'%s': %s", text, msg);
    return 0;
}

#define F(f)         COMMON_OPT_FIELD(sim_scenario, f)
#define EVENTS_FIELD COMMON_OPT_LIST_FIELD(sim_scenario, faults.events, faults.nevents)
#define U32          COMMON_OPT_U32
#define U64          COMMON_OPT_U64
#define F64          COMMON_OPT_F64
#define ENUM         COMMON_OPT_ENUM
#define STR          COMMON_OPT_STR
#define BOOL         COMMON_OPT_BOOL
#define LIST         COMMON_OPT_LIST

/* One row per key (common/settings.h): section, key, type, field, then what
 * applies of .min/.max, .flags, .names, .check, .def, .unit, .help. */
static const common_option scenario_options[] = {
    {"run", "seed", U64, F(run.seed), .min = 0, .max = 18446744073709551615.0, .def = "1",
     .help = "seed of every random draw; the same seed gives the same trace"},
    {"run", "agents", U32, F(run.agents), .min = 1, .max = SIM_SCENARIO_AGENTS_MAX, .def = "16",
     .help = "number of simulated agents"},
    {"run", "mode", ENUM, F(run.mode), .names = MODES, .def = "rounds",
     .help = "rounds: synchronous rounds; timed: continuous time"},
    {"run", "rounds", U32, F(run.rounds), .min = 1, .max = BIG, .def = "100",
     .help = "rounds to run (mode rounds)"},
    {"run", "duration_s", F64, F(run.duration_s), .min = 0, .max = BIG, .def = "60",
     .help = "simulated seconds to run (mode timed); horizon of random faults in both modes"},
    {"run", "target_accuracy", F64, F(run.target_accuracy), .min = 0, .max = 1, .def = "0.9",
     .help = "accuracy whose first crossing gives time_to_target_s"},
    {"run", "diverge_factor", F64, F(run.diverge_factor), .min = 0, .max = 1e300, .def = "1000000",
     .help = "a run diverges when consensus distance or loss exceeds this times its first "
             "value (0 = only non-finite values)"},
    {"model", "kind", ENUM, F(model.kind), .names = MODEL_KINDS, .def = "consensus",
     .help = "model trained: mlp, softmax, cnn, consensus (average of vectors), quadratic"},
    {"model", "dim", U32, F(model.dim), .min = 1, .max = 1e8, .def = "100",
     .help = "parameters of consensus/quadratic; input features of synthetic data"},
    {"model", "hidden", U32, F(model.hidden), .min = 1, .max = 1e6, .def = "64",
     .help = "hidden units of mlp"},
    {"model", "init_seed", U64, F(model.init_seed), .min = 0, .max = 18446744073709551615.0,
     .def = "0",
     .help = "initial parameters of mlp and cnn: 0 = drawn from run.seed (each seed its own); N "
             "= those of a murmur agent with model.init_seed = N (make calibrate)"},
    {"model", "spec", STR, F(model.spec), .check = check_cnn_spec, .def = "cnn",
     .help = "layers of cnn: cnn (the default CNN) or cnn:LAYERS (model/spec.h)"},
    {"model", "lr", F64, F(model.lr), .min = 0, .max = 100, .flags = COMMON_OPT_MIN_EXCLUSIVE,
     .def = "0.05", .help = "learning rate"},
    {"model", "batch", U32, F(model.batch), .min = 1, .max = 1e6, .def = "32",
     .help = "samples per local step"},
    {"model", "data", STR, F(model.data), .def = "",
     .help = "data set file (IDX or CSV); empty = synthetic data"},
    {"mixing", "algorithm", ENUM, F(mixing.algorithm), .names = ALGORITHMS, .def = "gossip",
     .help = "how agents mix models"},
    {"mixing", "topology", ENUM, F(mixing.topology), .names = gossip_topology_names,
     .def = "random", .help = "peer choice for gossip-style algorithms"},
    {"mixing", "bits", U32, F(mixing.bits), .min = 1, .max = 32, .names = BITS, .def = "32",
     .help = "quantization bits per value: 1, 2, 4, 8, 16 or 32"},
    {"mixing", "interval_steps", U32, F(mixing.interval_steps), .min = 1, .max = 1e6, .def = "1",
     .help = "local steps between two mixing steps"},
    {"mixing", "overlap", BOOL, F(mixing.overlap), .def = "true",
     .help = "true: local steps go on while a round is in flight and its result is applied as "
             "mixed - sent (what murmur agent does, gossip/sched); false: the agent waits for "
             "its round (a blocking trainer, for comparison)"},
    {"mixing", "outer_momentum", F64, F(mixing.outer_momentum), .min = 0, .max = 0.99, .def = "0",
     .help = "momentum of the outer step on each round's result, as murmur agent's "
             "(gossip/sched.h): 0 = none"},
    {"mixing", "robust", ENUM, F(mixing.robust), .names = gossip_robust_rule_names, .def = "clip",
     .help = "bounds on peers' values (gossip/robust.h): none, clip (a peer's difference to our "
             "vector clipped to clip_factor x the median of our own recent local deltas; a peer "
             "beyond it two rounds in a row is ignored from the second until it comes within), "
             "trimmed-mean or centered-clip (dpsgd; clip elsewhere); consensus runs (no training, "
             "no scale) use none"},
    {"mixing", "robust_clip_factor", F64, F(mixing.robust_clip_factor), .min = 0, .max = 1e6,
     .def = "3", .help = "tau = this x the median of the last 16 local-delta norms (0 = 3)"},
    {"mixing", "robust_trim", U32, F(mixing.robust_trim), .min = 0, .max = 8, .def = "1",
     .help = "trimmed-mean: values dropped at each end of a coordinate (0 = 1)"},
    {"membership", "mode", ENUM, F(membership.mode), .names = MEMBERSHIP_MODES, .def = "oracle",
     .help =
         "oracle: views change on every agent at once; swim: real SWIM membership (gossip/node)"},
    {"membership", "probe_interval_ms", F64, F(membership.probe_interval_ms), .min = 1,
     .max = 60000, .def = "200", .help = "swim: protocol period (one probe per agent per period)"},
    {"membership", "probe_timeout_ms", F64, F(membership.probe_timeout_ms), .min = 0, .max = 60000,
     .flags = COMMON_OPT_MIN_EXCLUSIVE, .def = "100",
     .help = "swim: direct ack wait before indirect probes (< probe_interval_ms)"},
    {"membership", "suspicion_mult", U32, F(membership.suspicion_mult), .min = 1, .max = 64,
     .def = "4", .help = "swim: suspicion timeout = suspicion_mult * max(1, log10 N) periods"},
    {"membership", "indirect_k", U32, F(membership.indirect_k), .min = 0,
     .max = GOSSIP_SWIM_INDIRECT_MAX, .def = "3",
     .help = "swim: members asked to probe indirectly"},
    {"network", "latency_ms", F64, F(network.latency_ms), .min = 0, .max = LAT_MAX, .def = "1",
     .help = "one-way latency (const); mean (normal); median (lognormal)"},
    {"network", "latency_dist", ENUM, F(network.latency_dist), .names = LATENCY_DISTS,
     .def = "const", .help = "how link latencies are drawn, once per link"},
    {"network", "latency_min_ms", F64, F(network.latency_min_ms), .min = 0, .max = LAT_MAX,
     .def = "0", .help = "uniform: lower bound"},
    {"network", "latency_max_ms", F64, F(network.latency_max_ms), .min = 0, .max = LAT_MAX,
     .def = "2", .help = "uniform: upper bound"},
    {"network", "latency_sd_ms", F64, F(network.latency_sd_ms), .min = 0, .max = LAT_MAX,
     .def = "0", .help = "normal: standard deviation (draws below 0 become 0)"},
    {"network", "latency_sigma", F64, F(network.latency_sigma), .min = 0, .max = 10, .def = "0.5",
     .help = "lognormal: standard deviation of ln(latency)"},
    {"network", "latency_file", STR, F(network.latency_file), .def = "",
     .help = "matrix: file of run.agents rows of run.agents latencies in ms"},
    {"network", "bandwidth_mbps", F64, F(network.bandwidth_mbps), .min = 0, .max = BW_MAX,
     .def = "0", .help = "upload and download of every agent, Mb/s; 0 = unlimited"},
    {"network", "upload_mbps", F64, F(network.upload_mbps), .min = -1, .max = BW_MAX,
     .check = check_minus_one_or_more, .def = "-1",
     .help = "upload, Mb/s; -1 = bandwidth_mbps, 0 = unlimited"},
    {"network", "download_mbps", F64, F(network.download_mbps), .min = -1, .max = BW_MAX,
     .check = check_minus_one_or_more, .def = "-1",
     .help = "download, Mb/s; -1 = bandwidth_mbps, 0 = unlimited"},
    {"network", "loss", F64, F(network.loss), .min = 0, .max = 1, .def = "0",
     .help = "probability that a message is lost"},
    {"network", "bandwidth_trace", STR, F(network.bandwidth_trace), .def = "",
     .help = "trace file of 'TIME_S MBPS' lines: upload and download of the agents in "
             "bandwidth_trace_agents over time (timed mode)"},
    {"network", "bandwidth_trace_agents", STR, F(network.bandwidth_trace_agents),
     .check = check_agent_set, .def = "all",
     .help = "agents that follow bandwidth_trace: all, or indices and ranges (3,5-9)"},
    {"network", "latency_trace", STR, F(network.latency_trace), .def = "",
     .help = "trace file of 'TIME_S MS' lines: latency of every link from or to the agents in "
             "latency_trace_agents over time (timed mode)"},
    {"network", "latency_trace_agents", STR, F(network.latency_trace_agents),
     .check = check_agent_set, .def = "all",
     .help = "agents that follow latency_trace: all, or indices and ranges (3,5-9)"},
    {"compute", "step_ms", F64, F(compute.step_ms), .min = 0, .max = SIM_COMPUTE_STEP_MS_MAX,
     .flags = COMMON_OPT_MIN_EXCLUSIVE, .def = "10",
     .help = "mean time of one local step at speed 1"},
    {"compute", "stragglers", F64, F(compute.stragglers), .min = 0, .max = 1, .def = "0",
     .help = "fixed model: fraction of agents that are stragglers"},
    {"compute", "slowdown", F64, F(compute.slowdown), .min = 1, .max = SIM_COMPUTE_SLOWDOWN_MAX,
     .def = "4", .help = "fixed and random models: step time factor of a slow step"},
    {"compute", "straggler_model", ENUM, F(compute.straggler_model), .names = STRAGGLER_MODELS,
     .def = "fixed", .help = "none, fixed, random, pareto, lognormal"},
    {"compute", "slow_prob", F64, F(compute.slow_prob), .min = 0, .max = 1, .def = "0.05",
     .help = "random model: probability that a step is slow"},
    {"compute", "pareto_alpha", F64, F(compute.pareto_alpha), .min = 1, .max = 1e6,
     .flags = COMMON_OPT_MIN_EXCLUSIVE, .def = "2.5",
     .help = "pareto model: tail index (> 1; mean fixed at 1)"},
    {"compute", "lognormal_sigma", F64, F(compute.lognormal_sigma), .min = 0, .max = 10,
     .def = "0.5", .help = "lognormal model: sigma (mean fixed at 1)"},
    {"compute", "speed_sigma", F64, F(compute.speed_sigma), .min = 0, .max = 10, .def = "0",
     .help = "per-agent speed spread: speed = exp(speed_sigma * N(0,1))"},
    {"compute", "agent_speeds", STR, F(compute.agent_speeds), .def = "",
     .help = "speed factors of agents 0, 1, ... (commas; the others 1), times the speed_sigma "
             "draw: a measured host's relative speeds (make calibrate)"},
    {"compute", "loop_frame_us", F64, F(compute.loop_frame_us), .min = 0,
     .max = 1e6 /* SIM_ENGINE_LOOP_FRAME_NS_MAX */, .def = "0",
     .help = "timed mode: event-loop CPU time per frame, at the sender and at the receiver, one "
             "frame at a time per agent (encode, seal; open, decode, mix)"},
    {"compute", "loop_byte_ns", F64, F(compute.loop_byte_ns), .min = 0,
     .max = 1e6 /* SIM_ENGINE_LOOP_BYTE_NS_MAX */, .def = "0",
     .help = "timed mode: event-loop CPU time per byte of a frame, at each end"},
    {"compute", "availability_trace", STR, F(compute.availability_trace), .def = "",
     .help = "trace file of 'TIME_S FRACTION' lines: share of the CPU the agents in "
             "availability_trace_agents have over time, 0 = stopped (timed mode)"},
    {"compute", "availability_trace_agents", STR, F(compute.availability_trace_agents),
     .check = check_agent_set, .def = "all",
     .help = "agents that follow availability_trace: all, or indices and ranges (3,5-9)"},
    {"shards", "count", U32, F(shards.count), .min = 1, .max = 1e6, .def = "16",
     .help = "data shards"},
    {"shards", "replication", U32, F(shards.replication), .min = 1, .max = 64, .def = "3",
     .help = "replicas of each shard (<= run.agents)"},
    {"shards", "mode", ENUM, F(shards.mode), .names = SHARDS_MODES, .def = "auto",
     .help = "protocol: agents run gossip/shards over the network; oracle: central placement, "
             "timed copies; auto: protocol up to 2048 agents"},
    {"shards", "bytes", U64, F(shards.bytes), .min = 0, .max = (double)SIM_SHARDS_BYTES_MAX,
     .def = "0", .unit = "bytes", .help = "bytes of one shard; 0 = the model's"},
    {"faults", "crash_rate_per_s", F64, F(faults.crash_rate_per_s), .min = 0, .max = 1e6,
     .def = "0", .help = "random crashes per second over all agents (Poisson)"},
    {"faults", "restart_after_s", F64, F(faults.restart_after_s), .min = 0, .max = BIG, .def = "0",
     .help = "a crashed agent restarts after this; 0 = stays down"},
    {"faults", "loss_burst_rate_per_s", F64, F(faults.loss_burst_rate_per_s), .min = 0, .max = 1e6,
     .def = "0", .help = "random loss bursts per second (gaps exponential)"},
    {"faults", "loss_burst_prob", F64, F(faults.loss_burst_prob), .min = 0, .max = 1, .def = "0.5",
     .help = "loss probability during a random burst"},
    {"faults", "loss_burst_s", F64, F(faults.loss_burst_s), .min = 0, .max = BIG, .def = "1",
     .help = "length of a random burst"},
    {"faults", "byzantine_agents", U32, F(faults.byzantine_agents), .min = 0, .max = 1e6,
     .def = "0",
     .help = "agents that send attacked vectors in every mixing round (sim/byzantine.h; spread "
             "evenly over the indices; < run.agents)"},
    {"faults", "byzantine_attack", ENUM, F(faults.byzantine_attack), .names = sim_byz_attack_names,
     .def = "scale",
     .help = "scale (s x), sign-flip (-x) or bit-flip (1% of values, one bit each)"},
    {"faults", "byzantine_scale", F64, F(faults.byzantine_scale), .min = -1e30, .max = 1e30,
     .def = "1e+29", .help = "the factor s of the scale attack"},
    {"faults", "event", LIST, EVENTS_FIELD,
     .flags = COMMON_OPT_LIST_CLEAR | COMMON_OPT_ITEM_ORIGINS,
     .origins_offset = offsetof(sim_scenario, faults.event_origin), .check = check_fault_line,
     .def = "", .unit = "fault lines",
     .help = "a scheduled fault: TIME KIND [ARGS] (repeatable; empty value clears)"},
    {"output", "dir", STR, F(output.dir), .def = "sim-out",
     .help = "directory for series.csv, summary.json, plots"},
    {"output", "plot", BOOL, F(output.plot), .def = "false",
     .help = "write PNG plots (also --plot)"},
    {"output", "every_rounds", U32, F(output.every_rounds), .min = 1, .max = BIG, .def = "1",
     .help = "rounds between two series rows (mode rounds)"},
    {"output", "every_s", F64, F(output.every_s), .min = 0, .max = BIG,
     .flags = COMMON_OPT_MIN_EXCLUSIVE, .def = "1",
     .help = "simulated seconds between two series rows (mode timed)"},
    {"output", "per_agent", BOOL, F(output.per_agent), .def = "false",
     .help = "also write one series row per agent"},
};
#undef F
#undef EVENTS_FIELD
#undef U32
#undef U64
#undef F64
#undef ENUM
#undef STR
#undef BOOL
#undef LIST
#define NKEYS (sizeof scenario_options / sizeof scenario_options[0])
_Static_assert(sizeof scenario_options / sizeof scenario_options[0] <= SIM_SCENARIO_KEYS_MAX,
               "key table fits origins");

static const common_settings scenario_settings = {
    .options = scenario_options,
    .count = NKEYS,
    .origin_offset = offsetof(sim_scenario, origin),
    .level_offset = offsetof(sim_scenario, origin_level),
    .what = "scenario",
    .docs = "docs/SIMULATOR.md",
    /* no environment: a run is reproduced from its scenario file and
     * command line alone */
    .env_prefix = NULL,
};

/* The engine's codes as this module's. */
static int scenario_err(int rc)
{
    switch (rc) {
    case COMMON_SETTINGS_OK:
        return SIM_SCENARIO_OK;
    case COMMON_SETTINGS_EIO:
        return SIM_SCENARIO_EIO;
    case COMMON_SETTINGS_ESYNTAX:
    case COMMON_SETTINGS_EUSAGE:
        return SIM_SCENARIO_ESYNTAX;
    case COMMON_SETTINGS_EUNKNOWN:
        return SIM_SCENARIO_EKEY;
    case COMMON_SETTINGS_EVALUE:
        return SIM_SCENARIO_EVALUE;
    case COMMON_SETTINGS_EDUP:
        return SIM_SCENARIO_EDUP;
    default:
        return SIM_SCENARIO_ERANGE;
    }
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
static char INFO_NAMES[NKEYS][SIM_SCENARIO_KEY_MAX];
static char INFO_TYPES[NKEYS][160];
static pthread_once_t info_once = PTHREAD_ONCE_INIT;

static void info_init(void)
{
    for (size_t j = 0; j < NKEYS; j++) {
        const common_option *o = &scenario_options[j];
        common_settings_name(&scenario_settings, j, INFO_NAMES[j], sizeof INFO_NAMES[j]);
        common_settings_type_text(&scenario_settings, j, INFO_TYPES[j], sizeof INFO_TYPES[j]);
        INFO[j] =
            (sim_scenario_key_info){INFO_NAMES[j], INFO_TYPES[j], o->def, o->min, o->max, o->help};
    }
}

size_t sim_scenario_key_count(void)
{
    return NKEYS;
}

const sim_scenario_key_info *sim_scenario_key_at(size_t i)
{
    if (i >= NKEYS)
        return NULL;
    pthread_once(&info_once, info_init);
    return &INFO[i];
}

/* ---- values ---- */

void sim_scenario_defaults(sim_scenario *sc)
{
    memset(sc, 0, sizeof *sc);
    common_settings_defaults(&scenario_settings, sc);
}

int sim_scenario_set_key(sim_scenario *sc, const char *key, const char *value, const char *origin,
                         char *err, size_t errlen)
{
    return scenario_err(common_settings_set(&scenario_settings, sc, key, value, origin,
                                            COMMON_LEVEL_CLI, err, errlen));
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
    return scenario_err(common_settings_assign(&scenario_settings, sc, assignment, "--set",
                                               COMMON_LEVEL_CLI, err, errlen));
}

int sim_scenario_parse(sim_scenario *sc, const char *text, const char *name, char *err,
                       size_t errlen)
{
    return scenario_err(
        common_settings_load_string(&scenario_settings, sc, name, text, err, errlen));
}

static const char *origin_of(const sim_scenario *sc, const char *key);

/* A path value set in the scenario file at `path` names a file relative to
 * that file's directory: prefix the directory. model.data may instead name
 * a catalog data set (no '/' and no '.'): left as it is. */
static int scenario_resolve(sim_scenario *sc, const char *path, const char *key, char *val,
                            int maybe_name, char *err, size_t errlen)
{
    const char *slash = strrchr(path, '/');
    const char *origin = origin_of(sc, key);
    size_t plen = strlen(path);
    if (!slash || !val[0] || val[0] == '/' || strncmp(origin, path, plen) != 0 ||
        origin[plen] != ':' || (maybe_name && !strpbrk(val, "/.")))
        return SIM_SCENARIO_OK;
    char buf[SIM_SCENARIO_STR_MAX];
    int n = snprintf(buf, sizeof buf, "%.*s/%s", (int)(slash - path), path, val);
    if (n < 0 || (size_t)n >= sizeof buf) {
        common_errf(err, errlen, 0,
                    "%s: %s = %s: the path from the scenario's directory is "
                    "longer than %u characters",
                    origin, key, val, SIM_SCENARIO_STR_MAX - 1);
        return SIM_SCENARIO_ERANGE;
    }
    memcpy(val, buf, (size_t)n + 1);
    return SIM_SCENARIO_OK;
}

int sim_scenario_load(sim_scenario *sc, const char *path, char *err, size_t errlen)
{
    int rc = scenario_err(common_settings_load_file(&scenario_settings, sc, path, err, errlen));
    if (rc == SIM_SCENARIO_OK)
        rc = scenario_resolve(sc, path, "network.latency_file", sc->network.latency_file, 0, err,
                              errlen);
    if (rc == SIM_SCENARIO_OK)
        rc = scenario_resolve(sc, path, "model.data", sc->model.data, 1, err, errlen);
    if (rc == SIM_SCENARIO_OK)
        rc = scenario_resolve(sc, path, "network.bandwidth_trace", sc->network.bandwidth_trace, 0,
                              err, errlen);
    if (rc == SIM_SCENARIO_OK)
        rc = scenario_resolve(sc, path, "network.latency_trace", sc->network.latency_trace, 0, err,
                              errlen);
    if (rc == SIM_SCENARIO_OK)
        rc = scenario_resolve(sc, path, "compute.availability_trace",
                              sc->compute.availability_trace, 0, err, errlen);
    return rc;
}

static const char *origin_of(const sim_scenario *sc, const char *key)
{
    int i = common_settings_lookup(&scenario_settings, key);
    assert(i >= 0);
    return common_settings_origin(&scenario_settings, sc, (size_t)i);
}

/* Set to something else than its default (from a file, --set, --sweep). */
static int scenario_changed(const sim_scenario *sc, const char *key)
{
    int i = common_settings_lookup(&scenario_settings, key);
    assert(i >= 0);
    char now[SIM_SCENARIO_STR_MAX];
    if (sim_scenario_get(sc, key, now, sizeof now) != 0)
        return 0;
    return strcmp(now, sim_scenario_key_at((size_t)i)->def) != 0;
}

/* A key set away from its default where the chosen settings ignore it is
 * an error (a silent no-op hides a mistake): the keys of one latency
 * distribution or straggler model under another, SWIM's under the
 * oracle, latency in rounds mode (bandwidth still times shard copies). */
static int scenario_no_effect(const sim_scenario *sc, char *err, size_t errlen)
{
    static const struct {
        const char *key, *needs;
    } rules[] = {
        {"network.latency_file", "network.latency_dist = matrix"},
        {"network.latency_min_ms", "network.latency_dist = uniform"},
        {"network.latency_max_ms", "network.latency_dist = uniform"},
        {"network.latency_sd_ms", "network.latency_dist = normal"},
        {"network.latency_sigma", "network.latency_dist = lognormal"},
        {"compute.stragglers", "compute.straggler_model = fixed"},
        {"compute.slow_prob", "compute.straggler_model = random"},
        {"compute.slowdown", "compute.straggler_model = fixed or random"},
        {"compute.pareto_alpha", "compute.straggler_model = pareto"},
        {"compute.lognormal_sigma", "compute.straggler_model = lognormal"},
        {"membership.probe_interval_ms", "membership.mode = swim"},
        {"membership.probe_timeout_ms", "membership.mode = swim"},
        {"membership.suspicion_mult", "membership.mode = swim"},
        {"membership.indirect_k", "membership.mode = swim"},
        {"network.latency_ms", "run.mode = timed"},
        {"network.latency_dist", "run.mode = timed"},
        {"network.bandwidth_trace", "run.mode = timed"},
        {"network.latency_trace", "run.mode = timed"},
        {"compute.availability_trace", "run.mode = timed"},
        {"network.bandwidth_trace_agents", "network.bandwidth_trace"},
        {"network.latency_trace_agents", "network.latency_trace"},
        {"compute.availability_trace_agents", "compute.availability_trace"},
    };
    const sim_net_latency_kind d = sc->network.latency_dist;
    const int sm = (int)sc->compute.straggler_model;
    const int timed = sc->run.mode == SIM_RUN_TIMED;
    const int ok[] = {
        d == SIM_NET_LAT_MATRIX,
        d == SIM_NET_LAT_UNIFORM,
        d == SIM_NET_LAT_UNIFORM,
        d == SIM_NET_LAT_NORMAL,
        d == SIM_NET_LAT_LOGNORMAL,
        sm == SIM_COMPUTE_FIXED,
        sm == SIM_COMPUTE_RANDOM,
        sm == SIM_COMPUTE_FIXED || sm == SIM_COMPUTE_RANDOM,
        sm == SIM_COMPUTE_PARETO,
        sm == SIM_COMPUTE_LOGNORMAL,
        sc->membership.mode == SIM_MEMBERSHIP_SWIM,
        sc->membership.mode == SIM_MEMBERSHIP_SWIM,
        sc->membership.mode == SIM_MEMBERSHIP_SWIM,
        sc->membership.mode == SIM_MEMBERSHIP_SWIM,
        timed, /* rounds: latency is not simulated (bandwidth is: shard copies) */
        timed,
        timed, /* traces change the timed network and compute */
        timed,
        timed,
        sc->network.bandwidth_trace[0] != 0,
        sc->network.latency_trace[0] != 0,
        sc->compute.availability_trace[0] != 0,
    };
    _Static_assert(sizeof ok / sizeof ok[0] == sizeof rules / sizeof rules[0], "a rule each");
    for (size_t k = 0; k < sizeof rules / sizeof rules[0]; k++) {
        if (ok[k] || !scenario_changed(sc, rules[k].key))
            continue;
        char v[SIM_SCENARIO_STR_MAX];
        sim_scenario_get(sc, rules[k].key, v, sizeof v);
        common_errf(err, errlen, 0,
                    "%s = %s (%s) has no effect: it needs %s; remove it or change that setting",
                    rules[k].key, v, origin_of(sc, rules[k].key), rules[k].needs);
        return SIM_SCENARIO_EVALUE;
    }
    return SIM_SCENARIO_OK;
}

/* Rounds mode delivers every frame at once (no latency, no bandwidth): the
 * bandwidth keys act there only through the shard oracle, which times one
 * shard's copy at the bandwidth. Protocol shards (shards.mode = protocol, or
 * auto up to SIM_SHARDS_PROTOCOL_AGENTS_MAX agents) move as frames, and
 * beyond GOSSIP_MEMBERS_MAX agents no shard is placed: a bandwidth set
 * there would silently change nothing. */
static int scenario_rounds_bandwidth(const sim_scenario *sc, char *err, size_t errlen)
{
    static const char *const keys[] = {"network.bandwidth_mbps", "network.upload_mbps",
                                       "network.download_mbps"};
    if (sc->run.mode != SIM_RUN_ROUNDS)
        return SIM_SCENARIO_OK;
    const int protocol =
        sc->shards.mode == SIM_SHARDS_PROTOCOL ||
        (sc->shards.mode == SIM_SHARDS_AUTO && sc->run.agents <= SIM_SHARDS_PROTOCOL_AGENTS_MAX);
    const int no_shards = sc->run.agents > GOSSIP_MEMBERS_MAX;
    if (!protocol && !no_shards)
        return SIM_SCENARIO_OK;
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        if (!scenario_changed(sc, keys[k]))
            continue;
        char v[SIM_SCENARIO_STR_MAX], mode[SIM_SCENARIO_STR_MAX];
        sim_scenario_get(sc, keys[k], v, sizeof v);
        sim_scenario_get(sc, "shards.mode", mode, sizeof mode);
        if (no_shards)
            common_errf(err, errlen, 0,
                        "%s = %s (%s) has no effect: run.mode = rounds (%s) simulates no "
                        "bandwidth for frames, and run.agents = %u places no shards (more than "
                        "%u) whose copies it could time; remove it",
                        keys[k], v, origin_of(sc, keys[k]), origin_of(sc, "run.mode"),
                        sc->run.agents, GOSSIP_MEMBERS_MAX);
        else
            common_errf(err, errlen, 0,
                        "%s = %s (%s) has no effect: run.mode = rounds (%s) simulates no "
                        "bandwidth for frames, and shards.mode = %s (%s) moves shards as frames "
                        "(protocol); use run.mode = timed, or shards.mode = oracle (shard copies "
                        "timed at the bandwidth), or remove it",
                        keys[k], v, origin_of(sc, keys[k]), origin_of(sc, "run.mode"), mode,
                        origin_of(sc, "shards.mode"));
        return SIM_SCENARIO_EVALUE;
    }
    return SIM_SCENARIO_OK;
}

int sim_scenario_check(const sim_scenario *sc, char *err, size_t errlen)
{
    if (sc->membership.mode == SIM_MEMBERSHIP_SWIM) {
        if (!(sc->membership.probe_timeout_ms < sc->membership.probe_interval_ms)) {
            common_errf(
                err, errlen, 0,
                "membership.probe_timeout_ms = %g (%s) must be less than "
                "membership.probe_interval_ms = %g (%s)",
                sc->membership.probe_timeout_ms, origin_of(sc, "membership.probe_timeout_ms"),
                sc->membership.probe_interval_ms, origin_of(sc, "membership.probe_interval_ms"));
            return SIM_SCENARIO_ERANGE;
        }
        if (sc->run.agents > SIM_SWIM_AGENTS_MAX) {
            common_errf(err, errlen, 0,
                        "run.agents = %u (%s): membership.mode = swim runs at most %u agents (each "
                        "holds a member table); use membership.mode = oracle beyond",
                        sc->run.agents, origin_of(sc, "run.agents"), SIM_SWIM_AGENTS_MAX);
            return SIM_SCENARIO_ERANGE;
        }
    }
    if (sc->shards.mode == SIM_SHARDS_PROTOCOL && sc->run.agents > SIM_SHARDS_PROTOCOL_AGENTS_MAX) {
        common_errf(err, errlen, 0,
                    "run.agents = %u (%s): shards.mode = protocol runs at most %u agents (every "
                    "agent places over its whole view); use shards.mode = oracle or auto beyond",
                    sc->run.agents, origin_of(sc, "run.agents"), SIM_SHARDS_PROTOCOL_AGENTS_MAX);
        return SIM_SCENARIO_ERANGE;
    }
    if (sc->shards.replication > sc->run.agents) {
        common_errf(err, errlen, 0, "shards.replication = %u (%s) exceeds run.agents = %u (%s)",
                    sc->shards.replication, origin_of(sc, "shards.replication"), sc->run.agents,
                    origin_of(sc, "run.agents"));
        return SIM_SCENARIO_ERANGE;
    }
    if (sc->network.latency_dist == SIM_NET_LAT_UNIFORM &&
        sc->network.latency_min_ms > sc->network.latency_max_ms) {
        common_errf(err, errlen, 0,
                    "network.latency_min_ms = %g (%s) exceeds network.latency_max_ms = %g (%s)",
                    sc->network.latency_min_ms, origin_of(sc, "network.latency_min_ms"),
                    sc->network.latency_max_ms, origin_of(sc, "network.latency_max_ms"));
        return SIM_SCENARIO_ERANGE;
    }
    if (sc->network.latency_dist == SIM_NET_LAT_LOGNORMAL && !(sc->network.latency_ms > 0)) {
        common_errf(err, errlen, 0,
                    "network.latency_ms = 0 (%s): lognormal latency needs a median > 0",
                    origin_of(sc, "network.latency_ms"));
        return SIM_SCENARIO_ERANGE;
    }
    if (sc->network.latency_dist == SIM_NET_LAT_MATRIX) {
        if (!sc->network.latency_file[0]) {
            common_errf(err, errlen, 0,
                        "network.latency_dist = matrix (%s) needs network.latency_file",
                        origin_of(sc, "network.latency_dist"));
            return SIM_SCENARIO_EVALUE;
        }
        if (sc->run.agents > SIM_NET_MATRIX_AGENTS_MAX) {
            common_errf(err, errlen, 0,
                        "run.agents = %u (%s): a latency matrix supports at most %u",
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
        common_errf(err, errlen, 0,
                    "mixing.algorithm = %s (%s) cannot run on mixing.topology = %s (%s): dpsgd "
                    "needs a graph (not random), choco a static one (ring, torus, exponential)",
                    a, origin_of(sc, "mixing.algorithm"), t, origin_of(sc, "mixing.topology"));
        return SIM_SCENARIO_EVALUE;
    }
    if (sc->run.mode == SIM_RUN_TIMED && sc->run.agents > SIM_SCENARIO_TIMED_AGENTS_MAX) {
        common_errf(err, errlen, 0,
                    "run.agents = %u (%s): mode timed runs at most %u agents (the network "
                    "model); mode rounds runs up to %u",
                    sc->run.agents, origin_of(sc, "run.agents"), SIM_SCENARIO_TIMED_AGENTS_MAX,
                    SIM_SCENARIO_AGENTS_MAX);
        return SIM_SCENARIO_ERANGE;
    }
    if (sc->faults.byzantine_agents >= sc->run.agents) {
        common_errf(err, errlen, 0,
                    "faults.byzantine_agents = %u (%s): at least one of run.agents = %u must be "
                    "honest",
                    sc->faults.byzantine_agents, origin_of(sc, "faults.byzantine_agents"),
                    sc->run.agents);
        return SIM_SCENARIO_ERANGE;
    }
    if (sc->run.mode == SIM_RUN_TIMED && !(sc->run.duration_s > 0)) {
        common_errf(err, errlen, 0, "run.duration_s = 0 (%s): mode timed needs a duration",
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
            common_errf(err, errlen, 0, "%s: faults.event = %s: %s", sc->faults.event_origin[i],
                        sc->faults.events[i], m ? m + 3 : msg);
            return rc == SIM_FAULTS_ENOMEM ? SIM_SCENARIO_EIO : SIM_SCENARIO_ERANGE;
        }
        sim_fault_kind k0 = l.len ? l.events[0].kind : SIM_FAULT_CRASH;
        sim_fault_list_free(&l);
        /* delays and bandwidth act on the timed network only */
        if (sc->run.mode != SIM_RUN_TIMED &&
            (k0 == SIM_FAULT_DELAY || k0 == SIM_FAULT_BANDWIDTH || k0 == SIM_FAULT_REORDER)) {
            common_errf(err, errlen, 0,
                        "%s: faults.event = %s has no effect: it needs run.mode = timed (rounds "
                        "mode simulates no latency or bandwidth for mixing)",
                        sc->faults.event_origin[i], sc->faults.events[i]);
            return SIM_SCENARIO_EVALUE;
        }
    }
    /* the agent sets of the traces against run.agents */
    static const char *const sets[] = {"network.bandwidth_trace_agents",
                                       "network.latency_trace_agents",
                                       "compute.availability_trace_agents"};
    const char *setv[] = {sc->network.bandwidth_trace_agents, sc->network.latency_trace_agents,
                          sc->compute.availability_trace_agents};
    for (size_t k = 0; k < sizeof sets / sizeof sets[0]; k++) {
        char msg[192];
        if (sim_faults_targets(setv[k], sc->run.agents, NULL, msg, sizeof msg)) {
            common_errf(err, errlen, 0, "%s = %s (%s): %s", sets[k], setv[k],
                        origin_of(sc, sets[k]), msg);
            return SIM_SCENARIO_ERANGE;
        }
    }
    int rc = scenario_no_effect(sc, err, errlen);
    if (rc)
        return rc;
    return scenario_rounds_bandwidth(sc, err, errlen);
}

int sim_scenario_get(const sim_scenario *sc, const char *key, char *buf, size_t len)
{
    int i = common_settings_lookup(&scenario_settings, key);
    if (i < 0)
        return SIM_SCENARIO_EKEY;
    common_settings_format(&scenario_settings, sc, (size_t)i, buf, len);
    return SIM_SCENARIO_OK;
}

int sim_scenario_write(const sim_scenario *sc, FILE *f)
{
    return common_settings_write(&scenario_settings, sc, f, 0) ? SIM_SCENARIO_EIO : SIM_SCENARIO_OK;
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
        common_errf(err, errlen, 0, "--sweep: longer than %u characters",
                    SIM_SCENARIO_LINE_MAX - 1);
        return SIM_SCENARIO_ESYNTAX;
    }
    strcpy(buf, spec);
    char *eq = strchr(buf, '=');
    if (!eq) {
        common_errf(err, errlen, 0, "--sweep %s: expected section.key=v1,v2,...", spec);
        return SIM_SCENARIO_ESYNTAX;
    }
    *eq = 0;
    const char *key = trim(buf);
    if (strlen(key) >= SIM_SCENARIO_KEY_MAX) {
        common_errf(err, errlen, 0, "--sweep %.60s: unknown key", key);
        return SIM_SCENARIO_EKEY;
    }
    char origin[SIM_SCENARIO_ORIGIN_MAX];
    snprintf(origin, sizeof origin, "--sweep %.60s", key);
    int k = common_settings_lookup(&scenario_settings, key);
    if (k < 0 || scenario_options[k].type == COMMON_OPT_LIST) {
        char near[COMMON_SETTINGS_NAME_MAX];
        if (k >= 0)
            common_errf(err, errlen, 0, "%s: list keys cannot be swept", origin);
        else if (common_settings_suggest(&scenario_settings, key, near, sizeof near))
            common_errf(err, errlen, 0, "%s: unknown key; did you mean '%s'?", origin, near);
        else
            common_errf(err, errlen, 0, "%s: unknown key (see docs/SIMULATOR.md)", origin);
        return SIM_SCENARIO_EKEY;
    }
    for (uint32_t a = 0; a < sw->naxes; a++)
        if (!strcmp(sw->axes[a].key, key)) {
            common_errf(err, errlen, 0, "%s: key swept twice", origin);
            return SIM_SCENARIO_EDUP;
        }
    if (sw->naxes == SIM_SWEEP_AXES_MAX) {
        common_errf(err, errlen, 0, "%s: more than %u swept keys", origin, SIM_SWEEP_AXES_MAX);
        return SIM_SCENARIO_ETOOMANY;
    }
    sim_sweep_axis *ax = &sw->axes[sw->naxes];
    memset(ax, 0, sizeof *ax);
    snprintf(ax->key, sizeof ax->key, "%s", key);
    sim_scenario *tmp = malloc(sizeof *tmp);
    if (!tmp) {
        common_errf(err, errlen, 0, "%s: out of memory", origin);
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
            common_errf(err, errlen, 0, "%s: empty value in the list", origin);
            rc = SIM_SCENARIO_ESYNTAX;
        } else if (ax->n == SIM_SWEEP_VALUES_MAX) {
            common_errf(err, errlen, 0, "%s: more than %u values", origin, SIM_SWEEP_VALUES_MAX);
            rc = SIM_SCENARIO_ETOOMANY;
        } else if (strlen(val) >= SIM_SWEEP_VALUE_MAX) {
            common_errf(err, errlen, 0, "%s: value longer than %u characters", origin,
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
        common_errf(err, errlen, 0, "%s: the sweep would make %llu runs (at most %u)", origin,
                    (unsigned long long)runs, SIM_SWEEP_RUNS_MAX);
        return SIM_SCENARIO_ETOOMANY;
    }
    sw->naxes++;
    return SIM_SCENARIO_OK;
}

int sim_sweep_apply(const sim_sweep *sw, uint64_t r, sim_scenario *sc, char *err, size_t errlen)
{
    if (r >= sim_sweep_runs(sw)) {
        common_errf(err, errlen, 0, "sweep run %llu: only %llu runs", (unsigned long long)r,
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
