/* sim/output — what a simulation run writes: series.csv, summary.json,
 * and, for sweeps, one row per run in sweep.csv.
 *
 * DIR/series.csv   header exactly
 *                  time_s,round,agent,loss,accuracy,consensus_distance,bytes_sent,bytes_recv
 *                  agent is an index, or `all` for population rows (mean
 *                  loss and accuracy over live agents, consensus distance
 *                  of the population, bytes summed). An undefined value
 *                  (accuracy of a consensus run, a NaN) is an empty field.
 * DIR/summary.json one object: the fields of sim_summary, in declaration
 *                  order, then the extras. Undefined numbers (NaN, e.g.
 *                  time_to_target_s when the target was never reached) are
 *                  null; infinities are null too, so every number is finite.
 *                  trace_hash is a string of 16 hex digits (a JSON number
 *                  would lose bits above 2^53); seed is an exact integer.
 * DIR/sweep.csv    run,<one column per swept key>,seed,trace_hash,events,...
 *                  (the summary's scalar fields), one row per run, in run
 *                  order.
 *
 * Consensus distance: the root-mean-square Euclidean distance of the agents'
 * parameter vectors from their mean,
 *     sqrt( (1/n) * sum_i || x_i - mean ||^2 ),  mean = (1/n) sum_i x_i,
 * computed in double precision in two passes.
 *
 * Numbers are written in the shortest %g form (at most 17 significant
 * digits) that reads back to exactly the same double. Files are opened,
 * written and closed by this module; errors name the file.
 */
#ifndef SIM_OUTPUT_H
#define SIM_OUTPUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sim/scenario.h"
#include "sim/stats.h"

/* agent column value meaning "all agents" */
#define SIM_AGENT_ALL (-1)
/* Most extra summary fields, and the longest extra name (with NUL). */
#define SIM_SUMMARY_EXTRA_MAX 32u
#define SIM_SUMMARY_NAME_MAX  48u
/* Longest invariant-violation message (sim_run with opts.check). */
#define SIM_VIOLATION_MAX 256u
/* Longest divergence reason, including the NUL. */
#define SIM_DIVERGE_REASON_MAX 128u
/* Default growth bound of a divergence (run.diverge_factor). */
#define SIM_DIVERGE_FACTOR_DEFAULT 1e6
/* Longest output path, including the NUL. */
#define SIM_OUTPUT_PATH_MAX 512u
/* The series.csv header, exactly. */
#define SIM_SERIES_HEADER                                                                          \
    "time_s,round,agent,loss,accuracy,consensus_distance,bytes_sent,bytes_recv"

_Static_assert(SIM_OUTPUT_PATH_MAX > SIM_SCENARIO_STR_MAX + 16, "dir plus a file name fits");

typedef enum sim_output_err {
    SIM_OUTPUT_OK = 0,
    SIM_OUTPUT_EIO = -1,      /* cannot create the directory or write a file */
    SIM_OUTPUT_EINVAL = -2,   /* bad argument (path too long, bad name) */
    SIM_OUTPUT_ETOOMANY = -3, /* more than SIM_SUMMARY_EXTRA_MAX extras */
} sim_output_err;

typedef struct sim_series_row {
    double time_s;
    uint64_t round;
    int64_t agent; /* index, or SIM_AGENT_ALL */
    double loss;
    double accuracy;
    double consensus_distance;
    uint64_t bytes_sent;
    uint64_t bytes_recv;
} sim_series_row;

typedef struct sim_output {
    FILE *series;
    char path[SIM_OUTPUT_PATH_MAX];
    uint64_t rows;
} sim_output;

/* Create dir (and its parents) and DIR/series.csv with its header.
 * Errors: SIM_OUTPUT_EINVAL, SIM_OUTPUT_EIO (message names the path). */
int sim_output_open(sim_output *o, const char *dir, char *err, size_t errlen);
/* Append one row; a population row (agent SIM_AGENT_ALL, the last of a
 * sample) is flushed to the file. Errors: SIM_OUTPUT_EIO. */
int sim_output_row(sim_output *o, const sim_series_row *r);
/* Flush and close; reports a write error that happened on any row. */
int sim_output_close(sim_output *o, char *err, size_t errlen);

typedef struct sim_summary_extra {
    char name[SIM_SUMMARY_NAME_MAX];
    double value;
} sim_summary_extra;

typedef struct sim_summary {
    uint64_t seed;
    uint64_t trace_hash;
    uint64_t events;
    double wall_s;
    double sim_time_s;
    uint64_t rounds;
    uint64_t steps_total;
    uint64_t bytes_total;
    uint64_t bytes_per_agent_max;
    double final_accuracy;   /* NaN = undefined (null) */
    double time_to_target_s; /* first sample at or above the target; NaN = never (null) */
    double consensus_distance_final;
    uint64_t shards_lost;
    /* extras every run has */
    uint32_t agents;
    double final_loss;
    uint64_t messages;
    uint64_t messages_lost;
    double memory_per_agent_bytes;
    char label[SIM_SCENARIO_STR_MAX];    /* e.g. the sweep point "mixing.bits=8" */
    char scenario[SIM_SCENARIO_STR_MAX]; /* the scenario file's name ("" = none) */
    /* The first sample from which accuracy stays at or above the target
     * to the end of the run; NaN (null) when the last sample is below. */
    double time_to_target_sustained_s;
    /* The run was stopped by sim_run_opts.stop (a signal): its figures
     * cover the simulated time reached, sim_time_s. */
    int interrupted;
    /* The run diverged (sim_diverge) at this round and simulated time and
     * stopped there; NaN / 0 otherwise. */
    int diverged;
    uint64_t diverged_round;
    double diverged_time_s;
    char diverged_reason[SIM_DIVERGE_REASON_MAX];
    /* invariant checks (sim_run_opts.check): violations and the first one */
    uint64_t violations;
    char violation[SIM_VIOLATION_MAX];
    /* extras a run adds by name (sim_summary_add) */
    uint32_t nextra;
    sim_summary_extra extra[SIM_SUMMARY_EXTRA_MAX];
} sim_summary;

/* Zero counts; NaN (null) for the values that may stay undefined. */
void sim_summary_init(sim_summary *s);
/* Add a named number (a JSON key of letters, digits and '_'). Errors:
 * SIM_OUTPUT_EINVAL (bad name), SIM_OUTPUT_ETOOMANY. */
int sim_summary_add(sim_summary *s, const char *name, double value);
/* Write the summary as one JSON object to f / to DIR/summary.json. */
int sim_summary_write(const sim_summary *s, FILE *f);
int sim_summary_write_file(const sim_summary *s, const char *dir, char *err, size_t errlen);

/* Divergence. A run diverges at the first sample where, with live agents,
 *   - the consensus distance or the population loss is not finite (a NaN
 *     or an infinity in some agent's values), or
 *   - factor > 0 and the consensus distance exceeds factor times its first
 *     positive value, or the loss factor times its first positive value.
 * (factor: run.diverge_factor, SIM_DIVERGE_FACTOR_DEFAULT by default; a
 * converging run shrinks both, so a growth by 10^6 is no longer noise.) */
typedef struct sim_diverge {
    double factor;
    double cd_ref, loss_ref; /* first positive values; NaN until seen */
    int diverged;
    uint64_t round;
    double time_s;
    char reason[SIM_DIVERGE_REASON_MAX];
} sim_diverge;

void sim_diverge_init(sim_diverge *d, double factor);
/* One sample; returns 1 when the run diverged at this sample (only once:
 * later samples return 0 and change nothing). */
int sim_diverge_sample(sim_diverge *d, double time_s, uint64_t round, uint32_t live, double loss,
                       double cd);

/* sweep.csv: header from the sweep's axes, then one row per run. */
typedef struct sim_sweep_csv {
    FILE *f;
    char path[SIM_OUTPUT_PATH_MAX];
} sim_sweep_csv;

int sim_sweep_csv_open(sim_sweep_csv *c, const char *dir, const sim_sweep *sw, char *err,
                       size_t errlen);
/* Errors: SIM_OUTPUT_EIO. */
int sim_sweep_csv_row(sim_sweep_csv *c, const sim_sweep *sw, uint64_t run, const sim_summary *s);
int sim_sweep_csv_close(sim_sweep_csv *c, char *err, size_t errlen);

/* ---- replications (murmur sim --seeds N) ----
 *
 * The runs of one scenario point under N seeds, summarised per metric by
 * sim/stats (mean, sample sd, 95% Student t interval of the mean, over the
 * runs where the metric is defined):
 *
 * DIR/summary.json  {"scenario", "label", "seeds": [...], "runs",
 *                    "runs_interrupted", "runs_diverged", "interrupted",
 *                    "diverged", "confidence_level",
 *                    "metrics": {NAME: {"n", "mean", "sd", "ci_low",
 *                    "ci_high", "half_width"}, ...}}
 *                    NAME: every number of a run's summary (the scalar
 *                    fields but seed, trace_hash and the flags, then the
 *                    extras of the first run).
 * sweep.csv rows     run,<axes>,seeds,runs_interrupted,runs_diverged, then
 *                    per scalar NAME: NAME (the mean), NAME_sd,
 *                    NAME_ci_low, NAME_ci_high, NAME_n.
 */
int sim_summary_write_stats(const sim_summary *runs, size_t n, FILE *f);
int sim_summary_write_stats_file(const sim_summary *runs, size_t n, const char *dir, char *err,
                                 size_t errlen);
int sim_sweep_csv_open_stats(sim_sweep_csv *c, const char *dir, const sim_sweep *sw, char *err,
                             size_t errlen);
int sim_sweep_csv_row_stats(sim_sweep_csv *c, const sim_sweep *sw, uint64_t run,
                            const sim_summary *runs, size_t n);

/* ---- event trace (murmur sim --trace FILE) ----
 *
 * One line per input of the trace hash, in the order it is mixed in
 * (sim_engine_hooks.trace):
 *   TIME_US frame FROM TO BYTES TYPE DIGEST    a delivered frame: agent
 *                    indices, its length, the header's type (0x..) and the
 *                    FNV-1a 64 digest of its bytes (16 hex digits)
 *   TIME_US mark VALUE                         a value the host mixed in
 *                    (local steps, faults, crashes, shard losses; 16 hex)
 * after a '#' header line; the run's TRACE_HASH ends the file
 * ("# trace_hash HEX"). Two runs that differ first differ on a line. */
#define SIM_TRACE_HEADER                                                                           \
    "# murmur sim event trace: time_us frame from to bytes type digest | time_us mark value"
void sim_trace_line(FILE *f, uint64_t now_us, uint32_t from, uint32_t to, const uint8_t *frame,
                    size_t len, uint64_t value);

/* RMS distance from the mean of n vectors of dim floats; vector i starts at
 * x + i * stride. NaN when n == 0 or out of memory. */
double sim_consensus_distance(const float *x, size_t n, size_t dim, size_t stride);
/* Same over an array of pointers; NULL entries (agents down) are skipped. */
double sim_consensus_distance_ptrs(const float *const *vecs, size_t n, size_t dim);

/* mkdir -p. Errors: SIM_OUTPUT_EINVAL (too long), SIM_OUTPUT_EIO. */
int sim_mkdirs(const char *dir, char *err, size_t errlen);

#endif
