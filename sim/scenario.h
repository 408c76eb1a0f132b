/* sim/scenario — scenario files, --set overrides and --sweep enumeration.
 *
 * Purpose. One sim_scenario holds every setting of one simulation run, with
 * typed fields the simulator reads directly (sc->network.latency_ms). Values
 * come, in this order, from the defaults, a scenario file, `--set
 * section.key=value` overrides and one point of a `--sweep` product.
 *
 * File format: the one syntax of common/settings.h, the same as the
 * agent's config files (docs/SIMULATOR.md, "Scenario files", lists every key):
 *
 *   # comment
 *   [network]
 *   latency_ms = 20
 *   bandwidth_mbps = 100        # 0 = unlimited (a comment needs a blank before '#')
 *   [faults]
 *   event = 30 crash 3,5-7      # list key: one fault per line
 *
 * - A [section] line names one of the table's sections. `key = value`
 *   lines belong to the last section. A key may appear once per file,
 *   except list keys (faults.event), which append; an empty faults.event
 *   clears the list.
 * - Every error names where the value came from (FILE:LINE, `--set KEY`,
 *   `--sweep KEY`), the key, and what is wrong. Cross-key checks
 *   (shards.replication <= run.agents, fault targets < run.agents, ...) run
 *   in sim_scenario_check, after all overrides.
 * - The environment is not read: a run is reproduced from its scenario file
 *   and its command line alone.
 *
 * Sweeps. Each `--sweep key=v1,v2,...` adds an axis; the runs are the
 * Cartesian product, enumerated like nested loops in the order the axes were
 * given: the first axis varies slowest, the last fastest. Run r (0-based)
 * takes value (r / stride_i) % n_i on axis i, stride of the last axis 1.
 *
 * Ownership: sim_scenario and sim_sweep are plain values (no pointers);
 * copy them freely. They are large (about 100 KB and 33 KB: fixed-size
 * fault lines and sweep values), so allocate them rather than putting
 * several on a thread's stack. Units are in the key names (_ms, _s, _mbps, _per_s).
 */
#ifndef SIM_SCENARIO_H
#define SIM_SCENARIO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/settings.h"
#include "gossip/topology.h"
#include "sim/compute.h"
#include "gossip/robust.h"
#include "sim/byzantine.h"
#include "sim/faults.h"
#include "sim/netmodel.h"

/* Longest string value (paths), including the NUL. */
#define SIM_SCENARIO_STR_MAX 256u
/* Longest line of a scenario file (the settings engine's limit). */
#define SIM_SCENARIO_LINE_MAX COMMON_SETTINGS_LINE_MAX
/* Most faults.event lines. */
#define SIM_SCENARIO_EVENTS_MAX 256u
/* Where a value came from ("runs/a.ini:12", "--set"), including the NUL. */
#define SIM_SCENARIO_ORIGIN_MAX COMMON_SETTINGS_ORIGIN_MAX
/* Most keys in the table (checked against the table at compile time). */
#define SIM_SCENARIO_KEYS_MAX COMMON_SETTINGS_OPTIONS_MAX
/* Longest "section.key", including the NUL. */
#define SIM_SCENARIO_KEY_MAX COMMON_SETTINGS_NAME_MAX
/* Sweep limits: axes, values per axis, characters per value, runs. */
#define SIM_SWEEP_AXES_MAX   8u
#define SIM_SWEEP_VALUES_MAX 64u
#define SIM_SWEEP_VALUE_MAX  64u
#define SIM_SWEEP_RUNS_MAX   100000u
/* Most agents in a scenario: 2^24 in rounds mode (the mixers share one
 * view; docs/SIMULATOR.md, "Scale"), the network model's maximum in timed
 * mode. */
#define SIM_SCENARIO_AGENTS_MAX       (1u << 24)
#define SIM_SCENARIO_TIMED_AGENTS_MAX SIM_NET_AGENTS_MAX

_Static_assert(SIM_SCENARIO_LINE_MAX > SIM_FAULT_LINE_MAX + 16, "a fault line fits a file line");
_Static_assert(SIM_SCENARIO_STR_MAX < SIM_SCENARIO_LINE_MAX, "a string fits a line");
_Static_assert(SIM_SWEEP_VALUE_MAX < SIM_SCENARIO_LINE_MAX, "a sweep value fits a line");

typedef enum sim_scenario_err {
    SIM_SCENARIO_OK = 0,
    SIM_SCENARIO_EIO = -1,      /* file cannot be read */
    SIM_SCENARIO_ESYNTAX = -2,  /* line is not [section] or key = value; line too long */
    SIM_SCENARIO_EKEY = -3,     /* unknown section or key */
    SIM_SCENARIO_EVALUE = -4,   /* value does not parse for the key's type */
    SIM_SCENARIO_ERANGE = -5,   /* out of range, too many event lines; cross-key check */
    SIM_SCENARIO_EDUP = -6,     /* key set twice in one file; sweep axis twice */
    SIM_SCENARIO_ETOOMANY = -7, /* too many sweep axes, values or runs */
} sim_scenario_err;

/* run.mode (named apart from sim/driver.h's sim_mode, which the main loop
 * also includes) */
typedef enum sim_run_mode { SIM_RUN_ROUNDS = 0, SIM_RUN_TIMED } sim_run_mode;
typedef enum sim_model_kind {
    SIM_MODEL_MLP = 0,
    SIM_MODEL_SOFTMAX,
    SIM_MODEL_CONSENSUS,
    SIM_MODEL_QUADRATIC,
    SIM_MODEL_CNN, /* model.spec: a cnn spec (model/spec.h) */
} sim_model_kind;
typedef enum sim_mix_algorithm {
    SIM_MIX_DPSGD = 0,
    SIM_MIX_GOSSIP,
    SIM_MIX_PUSH_SUM,
    SIM_MIX_CHOCO,
    SIM_MIX_ALLREDUCE,
    SIM_MIX_PS,
} sim_mix_algorithm;

/* membership.mode: oracle (every crash, restart or join installs the new
 * view on every live agent at once) or swim (each agent runs the real
 * protocol core, gossip/node: SWIM membership and failure detection, state
 * transfer; views differ and lag as in a real cluster). */
typedef enum sim_membership_mode {
    SIM_MEMBERSHIP_ORACLE = 0,
    SIM_MEMBERSHIP_SWIM,
} sim_membership_mode;
/* Most agents in membership.mode = swim: each holds a table of the whole
 * cluster (N^2 memory, about 60 bytes a member pair: docs/SIMULATOR.md,
 * "Scale"); GOSSIP_MEMBERS_MAX, the most members a table holds. */
#define SIM_SWIM_AGENTS_MAX GOSSIP_MEMBERS_MAX

/* shards.mode: protocol = every agent runs gossip/shards over the simulated
 * network; oracle = placement computed centrally, copies timed without
 * frames (for scale); auto = protocol up to SIM_SHARDS_PROTOCOL_AGENTS_MAX
 * agents, oracle beyond. */
typedef enum sim_shards_mode {
    SIM_SHARDS_AUTO = 0,
    SIM_SHARDS_PROTOCOL,
    SIM_SHARDS_ORACLE,
} sim_shards_mode;

/* Above this many agents the protocol's placement (every agent computes it
 * over its whole view, O(N * S) per agent and view change) costs O(N^2 * S)
 * per membership change: auto picks the oracle. */
#define SIM_SHARDS_PROTOCOL_AGENTS_MAX 2048u
/* shards.bytes bound: the replicator's (gossip/shards.h, 4096 chunks of at
 * most 1 MiB would be 4 GiB; 64 MiB is its default bound). */
#define SIM_SHARDS_BYTES_MAX (1ull << 32)

typedef struct sim_scenario {
    struct {
        uint64_t seed;
        uint32_t agents;
        sim_run_mode mode;
        uint32_t rounds;
        double duration_s;
        double target_accuracy;
        double diverge_factor; /* sim_diverge (sim/output.h); 0 = growth not checked */
    } run;
    struct {
        sim_model_kind kind;
        uint32_t dim;
        uint32_t hidden;
        /* initial parameters: 0 = drawn from run.seed (each seed its own);
         * N = those of an agent whose model.init_seed is N */
        uint64_t init_seed;
        double lr;
        uint32_t batch;
        char data[SIM_SCENARIO_STR_MAX];
        char spec[SIM_SCENARIO_STR_MAX]; /* kind cnn: "cnn" or "cnn:LAYERS" */
    } model;
    struct {
        sim_mix_algorithm algorithm;
        gossip_topology topology; /* names: gossip_topology_names */
        uint32_t bits;
        uint32_t interval_steps;
        int overlap;               /* steps go on during a round (the agent's schedule) */
        double outer_momentum;     /* the outer step's momentum (gossip/sched.h), 0 = none */
        gossip_robust_rule robust; /* names: gossip_robust_rule_names */
        double robust_clip_factor;
        uint32_t robust_trim;
    } mixing;
    struct {
        sim_membership_mode mode;
        double probe_interval_ms;
        double probe_timeout_ms;
        uint32_t suspicion_mult;
        uint32_t indirect_k;
    } membership;
    struct {
        double latency_ms;
        sim_net_latency_kind latency_dist;
        double latency_min_ms, latency_max_ms;
        double latency_sd_ms;
        double latency_sigma;
        char latency_file[SIM_SCENARIO_STR_MAX];
        double bandwidth_mbps;
        double upload_mbps;   /* -1 = bandwidth_mbps */
        double download_mbps; /* -1 = bandwidth_mbps */
        double loss;
        /* trace files (sim/trace.h) and the agents that follow them */
        char bandwidth_trace[SIM_SCENARIO_STR_MAX];
        char bandwidth_trace_agents[SIM_SCENARIO_STR_MAX];
        char latency_trace[SIM_SCENARIO_STR_MAX];
        char latency_trace_agents[SIM_SCENARIO_STR_MAX];
    } network;
    struct {
        double step_ms;
        double stragglers;
        double slowdown;
        sim_compute_model straggler_model;
        double slow_prob;
        double pareto_alpha;
        double lognormal_sigma;
        double speed_sigma;
        double loop_frame_us; /* event-loop CPU per frame, each end (sim/engine.h) */
        double loop_byte_ns;  /* and per byte */
        char agent_speeds[SIM_SCENARIO_STR_MAX]; /* "1.1,0.9,..." (sim/compute.h) */
        char availability_trace[SIM_SCENARIO_STR_MAX];
        char availability_trace_agents[SIM_SCENARIO_STR_MAX];
    } compute;
    struct {
        uint32_t count;
        uint32_t replication;
        sim_shards_mode mode;
        uint64_t bytes; /* 0 = the model's shard size */
    } shards;
    struct {
        double crash_rate_per_s;
        double restart_after_s;
        double loss_burst_rate_per_s;
        double loss_burst_prob;
        double loss_burst_s;
        uint32_t byzantine_agents;       /* sim/byzantine.h */
        sim_byz_attack byzantine_attack; /* names: sim_byz_attack_names */
        double byzantine_scale;
        uint32_t nevents;
        char events[SIM_SCENARIO_EVENTS_MAX][SIM_FAULT_LINE_MAX];
        char event_origin[SIM_SCENARIO_EVENTS_MAX][SIM_SCENARIO_ORIGIN_MAX];
    } faults;
    struct {
        char dir[SIM_SCENARIO_STR_MAX];
        int plot;
        uint32_t every_rounds;
        double every_s;
        int per_agent;
    } output;
    /* where each key's value came from, by key index ("default",
     * "FILE:LINE", "--set KEY"), and its common_level */
    char origin[SIM_SCENARIO_KEYS_MAX][SIM_SCENARIO_ORIGIN_MAX];
    uint8_t origin_level[SIM_SCENARIO_KEYS_MAX];
} sim_scenario;

/* One key of the table, for help texts, docs and tests. */
typedef struct sim_scenario_key_info {
    const char *name; /* "network.latency_ms" */
    const char *type; /* "integer", "number", "string", "bool", "one of a|b|c", "list" */
    const char *def;  /* default, as written in a file */
    double min, max;  /* numeric range (integers and numbers) */
    const char *doc;  /* one line: meaning and unit */
} sim_scenario_key_info;

size_t sim_scenario_key_count(void);
const sim_scenario_key_info *sim_scenario_key_at(size_t i);

const char *sim_scenario_strerror(int err);

/* Fill sc with the defaults of every key. */
void sim_scenario_defaults(sim_scenario *sc);

/* Apply a scenario file on top of sc. Errors (message "PATH:LINE: ..." in
 * err): SIM_SCENARIO_EIO, _ESYNTAX, _EKEY, _EVALUE, _ERANGE, _EDUP. On
 * error sc may hold the values of the lines before the bad one. */
int sim_scenario_load(sim_scenario *sc, const char *path, char *err, size_t errlen);

/* Same, from a string (origin names it in messages). */
int sim_scenario_parse(sim_scenario *sc, const char *text, const char *origin, char *err,
                       size_t errlen);

/* Set one key: key "section.key", value as in a file. origin (e.g. "--set")
 * is recorded and used in messages. Errors: _EKEY, _EVALUE, _ERANGE (also
 * too many event lines). */
int sim_scenario_set_key(sim_scenario *sc, const char *key, const char *value, const char *origin,
                         char *err, size_t errlen);

/* `--set section.key=value`. Errors: _ESYNTAX (no '='), and those of
 * sim_scenario_set_key. */
int sim_scenario_set(sim_scenario *sc, const char *assignment, char *err, size_t errlen);

/* Cross-key checks after all overrides: shards.replication <= run.agents,
 * shards.count >= 1, mixing.bits in {1,2,4,8,16,32}, latency_min_ms <=
 * latency_max_ms, a matrix file for latency_dist = matrix (and run.agents
 * within its limit), up/download -1 or >= 0, a mixing algorithm that can
 * run on the topology (gossip_mix_combination_valid), fault lines valid for
 * run.agents. Errors: _ERANGE, _EVALUE, with the key(s) and their origin. */
int sim_scenario_check(const sim_scenario *sc, char *err, size_t errlen);

/* Format one key's value as a file would hold it (list keys: the count of
 * lines). Returns 0, or _EKEY. */
int sim_scenario_get(const sim_scenario *sc, const char *key, char *buf, size_t len);

/* Write every key, section by section, in the file format; reading it back
 * gives the same scenario. Returns 0 or _EIO. */
int sim_scenario_write(const sim_scenario *sc, FILE *f);

/* Model configurations derived from the scenario (no allocation; the
 * network's matrix, if any, is read by the caller with
 * sim_net_load_matrix from sc->network.latency_file). Event line pointers
 * point into sc. */
void sim_scenario_net_config(const sim_scenario *sc, sim_net_config *out);
void sim_scenario_compute_config(const sim_scenario *sc, sim_compute_config *out);
void sim_scenario_faults_config(const sim_scenario *sc, const char **lines_buf,
                                sim_faults_config *out);

/* ---- sweeps ---- */

typedef struct sim_sweep_axis {
    char key[SIM_SCENARIO_KEY_MAX];
    uint32_t n;
    char values[SIM_SWEEP_VALUES_MAX][SIM_SWEEP_VALUE_MAX];
} sim_sweep_axis;

typedef struct sim_sweep {
    uint32_t naxes;
    sim_sweep_axis axes[SIM_SWEEP_AXES_MAX];
} sim_sweep;

void sim_sweep_init(sim_sweep *sw);

/* Add an axis "key=v1,v2,..." (as `--sweep`). Each value is checked by
 * applying it to a copy of base. Errors: _ESYNTAX (no '=', empty value),
 * _EKEY (unknown key, or a list key), _EDUP (axis already swept),
 * _EVALUE/_ERANGE (a bad value), _ETOOMANY (axes, values, or more than
 * SIM_SWEEP_RUNS_MAX runs in all). */
int sim_sweep_add(sim_sweep *sw, const sim_scenario *base, const char *spec, char *err,
                  size_t errlen);

/* Number of runs: the product of the axes' sizes (1 without axes). */
uint64_t sim_sweep_runs(const sim_sweep *sw);

/* Apply run r's values onto sc (a copy of the base). Errors: _ERANGE (r
 * beyond the runs), and those of sim_scenario_set_key. */
int sim_sweep_apply(const sim_sweep *sw, uint64_t r, sim_scenario *sc, char *err, size_t errlen);

/* Index of run r's value on axis a. */
uint32_t sim_sweep_value_index(const sim_sweep *sw, uint64_t r, uint32_t a);

/* Run r's point as "key=value key=value" (empty without axes), truncated
 * to len - 1 characters; for summary labels and log lines. */
void sim_sweep_label(const sim_sweep *sw, uint64_t r, char *buf, size_t len);

#endif
