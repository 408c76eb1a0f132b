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

/* agent column value meaning "all agents" */
#define SIM_AGENT_ALL (-1)
/* Most extra summary fields, and the longest extra name (with NUL). */
#define SIM_SUMMARY_EXTRA_MAX 32u
#define SIM_SUMMARY_NAME_MAX  48u
/* Longest invariant-violation message (sim_run with opts.check). */
#define SIM_VIOLATION_MAX 256u
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
/* Append one row. Errors: SIM_OUTPUT_EIO. */
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
    double time_to_target_s; /* NaN = never reached (null) */
    double consensus_distance_final;
    uint64_t shards_lost;
    /* extras every run has */
    uint32_t agents;
    double final_loss;
    uint64_t messages;
    uint64_t messages_lost;
    double memory_per_agent_bytes;
    char label[SIM_SCENARIO_STR_MAX]; /* e.g. the sweep point "mixing.bits=8" */
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

/* RMS distance from the mean of n vectors of dim floats; vector i starts at
 * x + i * stride. NaN when n == 0 or out of memory. */
double sim_consensus_distance(const float *x, size_t n, size_t dim, size_t stride);
/* Same over an array of pointers; NULL entries (agents down) are skipped. */
double sim_consensus_distance_ptrs(const float *const *vecs, size_t n, size_t dim);

/* mkdir -p. Errors: SIM_OUTPUT_EINVAL (too long), SIM_OUTPUT_EIO. */
int sim_mkdirs(const char *dir, char *err, size_t errlen);

#endif
