/* agent/config — the settings of `murmur agent`: file, --set, flags.
 *
 * The engine (parsing, file syntax, origins, printing) is common/settings;
 * this module is the agent's option table and its checks.
 *
 * Sources, lowest precedence first:
 *   1. built-in defaults (the `def` strings of agent_config_options[]),
 *   2. the file given with --config FILE (INI-like, below),
 *   3. the command line, left to right: --set section.key=value and the
 *      short flags (--listen, --seed, --data-dir, --metrics, ...), each of
 *      which is just a name for one section.key.
 * Every value from every source goes through the same parser, so a default,
 * a file line and a flag are checked the same way.
 *
 * File syntax (docs/CONFIG.md has the full list of options):
 *   # comment          ; comment         (whole line, after optional blanks)
 *   [section]
 *   key = value        # trailing comment (a '#' after a blank)
 *   key = "value with # or \"quotes\" or  edge spaces"
 * Keys and sections are lower case [a-z0-9_]. A key given twice in one file
 * is an error (EDUP), except seeds.seed, which appends. The first --seed (or
 * --set seeds.seed=...) on the command line replaces the file's seeds; later
 * ones append.
 *
 * Errors: every function returns 0 or an agent_config_err and writes a
 * one-line message to err[0..errlen) that names the source (FILE:LINE, or the
 * flag), the option (section.key) and what is wrong, e.g.
 *   agent.conf:12: mixing.bits: 3 is not one of 1, 2, 4, 8, 16, 32
 * Nothing here calls exit(); the caller prints the message and exits 2.
 * On error the config may hold the values applied before the failing one;
 * callers discard it.
 *
 * Ownership: agent_config is a plain value (no pointers); copy it freely.
 * Units are in the field names (_ms, _steps) or stated next to the field.
 */
#ifndef AGENT_CONFIG_H
#define AGENT_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/settings.h"
#include "gossip/mix.h"
#include "gossip/topology.h"
#include "gossip/types.h"

/* Longest path, including the NUL. Longer paths are rejected, not cut. */
#define AGENT_CONFIG_PATH_MAX 1024u
/* Longest network address (tcp://host:port), including the NUL. */
#define AGENT_CONFIG_ADDR_MAX GOSSIP_ADDR_MAX
/* Most seeds. A few live seeds suffice to join (SWIM push-pull spreads the
 * rest), 32 leaves room for a whole rack listed by hand. */
#define AGENT_CONFIG_SEEDS_MAX 32u
/* Longest model spec ("mlp:1024,1024,512,..."), including the NUL. */
#define AGENT_CONFIG_SPEC_MAX 128u
/* Most hidden layers in an mlp spec. */
#define AGENT_CONFIG_LAYERS_MAX 16u
/* Widest layer in an mlp spec (a 65536x65536 float32 matrix is 16 GiB:
 * anything wider is a typo). */
#define AGENT_CONFIG_LAYER_WIDTH_MAX 65536u
/* Longest learning-rate schedule string, including the NUL. */
#define AGENT_CONFIG_SCHEDULE_MAX 64u
/* Longest line in a config file, and the largest file. */
#define AGENT_CONFIG_LINE_MAX    COMMON_SETTINGS_LINE_MAX
#define AGENT_CONFIG_FILE_MAX    COMMON_SETTINGS_FILE_MAX
#define AGENT_CONFIG_OPTIONS_MAX COMMON_SETTINGS_OPTIONS_MAX
#define AGENT_CONFIG_ORIGIN_MAX  COMMON_SETTINGS_ORIGIN_MAX
#define AGENT_CONFIG_ERR_MAX     COMMON_SETTINGS_ERR_MAX
/* Upper bounds of the [limits] section. */
#define AGENT_CONFIG_QUEUE_LEN_MAX (1u << 20)
#define AGENT_CONFIG_PEERS_MAX     GOSSIP_MEMBERS_MAX
/* [faults] (issue 20, net/faults.h): node ids are 16 hex digits; a link
 * rule names up to 16 peers, a partition up to 64 (the injector holds more,
 * for the runtime control). */
#define AGENT_CONFIG_NODE_ID_SIZE    17u
#define AGENT_CONFIG_FAULT_PEERS_MAX 16u
#define AGENT_CONFIG_FAULT_CUT_MAX   64u

_Static_assert(AGENT_CONFIG_PATH_MAX < AGENT_CONFIG_LINE_MAX, "a path must fit on one line");
_Static_assert(AGENT_CONFIG_LINE_MAX <= AGENT_CONFIG_FILE_MAX, "a line must fit in a file");
_Static_assert(AGENT_CONFIG_ADDR_MAX >= sizeof "tcp://255.255.255.255:65535",
               "an IPv4 address with port must fit");

/* The engine's codes (common/settings.h). */
typedef enum agent_config_err {
    AGENT_CONFIG_OK = COMMON_SETTINGS_OK,
    AGENT_CONFIG_EIO = COMMON_SETTINGS_EIO,             /* a file cannot be opened or read */
    AGENT_CONFIG_ESYNTAX = COMMON_SETTINGS_ESYNTAX,     /* not a section, key = value or comment */
    AGENT_CONFIG_EUNKNOWN = COMMON_SETTINGS_EUNKNOWN,   /* unknown section, key or flag */
    AGENT_CONFIG_EVALUE = COMMON_SETTINGS_EVALUE,       /* a value that does not parse */
    AGENT_CONFIG_ERANGE = COMMON_SETTINGS_ERANGE,       /* out of range, or a list too long */
    AGENT_CONFIG_ECONFLICT = COMMON_SETTINGS_ECONFLICT, /* options that contradict each other */
    AGENT_CONFIG_EUSAGE = COMMON_SETTINGS_EUSAGE,       /* malformed command line */
    AGENT_CONFIG_EDUP = COMMON_SETTINGS_EDUP,           /* a key set twice in one file */
    AGENT_CONFIG_ERR_COUNT = COMMON_SETTINGS_ERR_COUNT
} agent_config_err;

const char *agent_config_strerror(int err);

/* node.encryption: frames encrypted and authenticated (the default), or
 * only authenticated (trusted networks; used only when both ends ask). */
typedef enum agent_encryption { AGENT_ENCRYPT = 0, AGENT_AUTH_ONLY = 1 } agent_encryption;
extern const char *const agent_encryption_names[];

typedef struct agent_config {
    /* [node] */
    char listen[AGENT_CONFIG_ADDR_MAX];    /* normalised: tcp://host:port, ipc://, inproc:// */
    char advertise[AGENT_CONFIG_ADDR_MAX]; /* "" until agent_config_finish: then listen */
    char data_dir[AGENT_CONFIG_PATH_MAX];
    char key_file[AGENT_CONFIG_PATH_MAX];         /* finish: "" -> DATA_DIR/murmur.key */
    char network_key_file[AGENT_CONFIG_PATH_MAX]; /* finish: "" -> DATA_DIR/network.key */
    char allow_list_file[AGENT_CONFIG_PATH_MAX];  /* "" = no allow-list */
    int encryption; /* agent_encryption: encrypt | auth-only (agent_encryption_names) */
    /* [seeds] */
    char seeds[AGENT_CONFIG_SEEDS_MAX][AGENT_CONFIG_ADDR_MAX]; /* normalised tcp://host:port */
    uint32_t seed_count;
    /* [model] */
    char model_spec[AGENT_CONFIG_SPEC_MAX];   /* "softmax" or "mlp:H1,H2,..." */
    char dataset[AGENT_CONFIG_PATH_MAX];      /* "fashion-mnist" or a path */
    char test_dataset[AGENT_CONFIG_PATH_MAX]; /* the rows evaluated on; "" = dataset's own */
    uint32_t batch;                           /* samples per local step */
    double lr;                                /* learning rate at step 0 */
    double momentum;                          /* heavy-ball coefficient, [0, 1) */
    double weight_decay;                      /* L2 coefficient */
    char schedule[AGENT_CONFIG_SCHEDULE_MAX]; /* constant | step:LEN:GAMMA | cosine:LEN */
    int schedule_unit;                        /* gossip_sched_unit: steps | epochs */
    double warmup;                            /* linear warm-up length (schedule_unit), 0 = none */
    int lr_scaling;                           /* gossip_sched_scaling: none | sqrt | linear */
    double min_lr;                            /* cosine floor */
    uint64_t init_seed;                       /* seed of the initial parameters */
    uint64_t eval_every_steps;                /* local steps between test evaluations */
    uint32_t eval_samples;                    /* test samples evaluated, 0 = all */
    /* [mixing] */
    gossip_mix_algo algorithm;   /* names: gossip_mix_algo_names */
    gossip_topology topology;    /* names: gossip_topology_names */
    uint32_t bits;               /* quantization bits per value: 1, 2, 4, 8, 16 or 32 */
    uint32_t block;              /* values per quantization block (one scale each) */
    uint32_t interval_steps;     /* the least, with cost_share */
    double cost_share;           /* adaptive cadence (gossip/sched.h), 0 = fixed interval */
    uint32_t interval_steps_max; /* the longest interval cost_share may choose */
    double outer_momentum;       /* the outer step's momentum (gossip/sched.h), 0 = none */
    uint32_t allreduce_step_deadline_ms;
    gossip_robust_rule robust; /* names: gossip_robust_rule_names (gossip/robust.h) */
    double robust_clip_factor;
    uint32_t robust_trim;
    /* [membership] */
    uint32_t probe_interval_ms;
    uint32_t probe_timeout_ms;
    uint32_t indirect_k;
    uint32_t suspicion_mult;
    /* [shards] */
    char shards_dir[AGENT_CONFIG_PATH_MAX]; /* finish: "" -> DATA_DIR/shards */
    uint32_t replication;
    /* [checkpoint] */
    uint64_t checkpoint_every_steps;             /* 0 = never */
    char checkpoint_path[AGENT_CONFIG_PATH_MAX]; /* finish: "" -> DATA_DIR/checkpoint.bin */
    /* [metrics] */
    char metrics_listen[AGENT_CONFIG_ADDR_MAX]; /* "host:port", "" = no HTTP server */
    /* [log] */
    int log_level;                 /* agent_log_level */
    uint32_t progress_interval_ms; /* between two event=progress lines */
    /* [limits] */
    uint32_t max_peers;
    uint32_t send_queue_len;  /* frames queued per peer link */
    uint32_t recv_queue_len;  /* received frames waiting for the event loop */
    uint32_t event_queue_len; /* all events waiting for the event loop */
    /* [run]: when the job ends by itself (0 = never); agent.h has the
     * exit statuses */
    uint64_t run_max_steps;     /* local steps */
    double run_max_seconds;     /* seconds since the agent started */
    double run_target_accuracy; /* test accuracy, 0..1 */
    /* [faults]: fault injection (net/faults.h, docs/CHAOS.md); every other
     * faults option is refused unless faults_enable */
    int faults_enable;
    uint64_t faults_seed;
    char faults_peers[AGENT_CONFIG_FAULT_PEERS_MAX][AGENT_CONFIG_NODE_ID_SIZE]; /* "" = all */
    uint32_t faults_peer_count;
    double faults_drop, faults_duplicate, faults_reorder, faults_corrupt; /* probabilities */
    uint32_t faults_delay_ms, faults_jitter_ms, faults_reorder_window_ms;
    uint64_t faults_bandwidth_bps;
    char faults_partition[AGENT_CONFIG_FAULT_CUT_MAX][AGENT_CONFIG_NODE_ID_SIZE];
    uint32_t faults_partition_count;
    int faults_pause_training;
    double faults_slow_training;                        /* factor >= 1 */
    char faults_admin_keys_file[AGENT_CONFIG_PATH_MAX]; /* "" = no runtime control */

    /* Where each option's value came from ("default", "FILE:LINE", "--set",
     * "--listen"), indexed like agent_config_options[], and its
     * common_level. */
    char origin[AGENT_CONFIG_OPTIONS_MAX][AGENT_CONFIG_ORIGIN_MAX];
    uint8_t origin_level[AGENT_CONFIG_OPTIONS_MAX];
} agent_config;

/* One option, for the parser, `--print-config` and the documentation test
 * (the row format of common/settings.h). */
typedef common_option agent_config_option;

extern const agent_config_option agent_config_options[];
extern const size_t agent_config_option_count;

/* Index of section.key in agent_config_options[] (and origin[]), or -1. */
int agent_config_option_index(const char *section, const char *key);

/* Fill every field with its default. Never fails. */
void agent_config_defaults(agent_config *c);

/* Apply the file at `path` on top of c. Errors: EIO (missing, unreadable,
 * larger than AGENT_CONFIG_FILE_MAX), ESYNTAX, EUNKNOWN, EVALUE, ERANGE. */
int agent_config_load_file(agent_config *c, const char *path, char *err, size_t errlen);

/* Apply the text of a file (NUL-terminated); `name` is used in messages. */
int agent_config_load_string(agent_config *c, const char *name, const char *text, char *err,
                             size_t errlen);

/* Apply the MURMUR_SECTION_KEY=value variables of envp (NULL = the
 * process's environment) on top of c, as `murmur agent` does between the
 * config file and the flags. Errors: EUNKNOWN, EVALUE, ERANGE. */
int agent_config_load_env(agent_config *c, char *const *envp, char *err, size_t errlen);

/* Set one option with command-line semantics: `name` is "section.key";
 * `origin` (NULL = "--set") says where the value came from, for messages.
 * For seeds.seed the first call replaces the seeds read from a file and
 * later calls append. Errors: EUNKNOWN, EVALUE, ERANGE. */
int agent_config_set(agent_config *c, const char *name, const char *value, const char *origin,
                     char *err, size_t errlen);

/* What the command line asked for besides settings. */
typedef struct agent_config_args {
    bool help;               /* --help / -h */
    bool print_config;       /* --print-config: print the effective config and exit */
    const char *config_file; /* --config FILE, or NULL */
} agent_config_args;

/* Parse the arguments of `murmur agent` (argv[0] is "agent"): defaults, then
 * --config FILE (wherever it appears), then the other flags left to right.
 * Flags take "--flag VALUE" or "--flag=VALUE". Finishes with
 * agent_config_finish unless --help was given.
 * Errors: EUSAGE, EUNKNOWN, and everything from load_file, set and finish. */
int agent_config_parse_args(agent_config *c, agent_config_args *args, int argc, char **argv,
                            char *err, size_t errlen);

/* Fill the derived defaults (advertise, key files, shards dir, checkpoint
 * path from data_dir) and check the options against each other and the
 * files that must exist (network key, allow-list, a data set path).
 * Errors: ECONFLICT, EIO, ERANGE. */
int agent_config_finish(agent_config *c, char *err, size_t errlen);

/* Write c as a config file that agent_config_load_file reads back to the
 * same values (every option, with its origin as a comment). */
void agent_config_write(const agent_config *c, FILE *out);

/* The front end of `murmur agent` in one call: parse argv (as
 * agent_config_parse_args), set the log threshold to log.level, and handle
 * what ends the command early. Returns -1 when the agent should run with
 * *c; otherwise the exit status to return: 0 after printing the usage
 * (--help) or the effective config (--print-config) to stdout, 2 after
 * printing "murmur agent: <message>" to stderr. */
int agent_config_main(agent_config *c, int argc, char **argv);

/* The training/mixing schedule of model.schedule, model.schedule_unit,
 * model.warmup, model.lr, model.min_lr, model.lr_scaling, model.batch and
 * mixing.interval_steps as gossip/sched.h's config (dim and
 * dataset_samples are left 0 for the runtime to fill). c must have parsed. */
struct gossip_sched_config;
void agent_config_sched(const agent_config *c, struct gossip_sched_config *out);

/* Usage text of the flags, for `murmur agent --help`. */
void agent_config_usage(FILE *out);

/* Parse "softmax" or "mlp:H1,H2,..." into layer widths (hidden layers).
 * Returns 0 and the count (0 for softmax), or -1 if malformed or out of
 * range. widths may be NULL to only check. */
int agent_config_parse_spec(const char *spec, uint32_t *widths, uint32_t *count);

#endif
