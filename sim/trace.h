/* sim/trace — time-varying values read from trace files (issue 18).
 *
 * Purpose. A trace is a step function of simulated time: link bandwidth
 * (Mb/s), link latency (ms) or CPU availability (a fraction) that changes
 * during a run, the platform-profile idea of SimGrid. The scenario names
 * the files (network.bandwidth_trace, network.latency_trace,
 * compute.availability_trace) and which agents follow them; the
 * simulator turns bandwidth and latency changes into timed events
 * (sim/faults, sim/inject) and stretches each local step over the
 * availability (sim_trace_work_end_us).
 *
 * File format, one item a line:
 *
 *   # comment (also after a value, as in scenario files)
 *   PERIODICITY 60        optional, once, before the points: repeat every 60 s
 *   0    100              TIME VALUE: from TIME seconds on, the value is VALUE
 *   10.5 20
 *   30   100
 *
 * - Times are seconds, >= 0, strictly increasing. Before the first time
 *   the scenario's own value holds (the trace has not started).
 * - PERIODICITY P (> the last time): the points repeat every P seconds:
 *   the value at t >= first time is the value of the last point with
 *   TIME + k P <= t for some k >= 0.
 * - VALUE is checked against the trace's kind (sim_trace_kind): a
 *   bandwidth in (0, 10^7] Mb/s, a latency in [0, 3600000] ms, an
 *   availability in [0, 1].
 * - Errors name the file and line: "bw.txt:4: time 3 is not after 5".
 *
 * Limits: SIM_TRACE_POINTS_MAX points, SIM_TRACE_FILE_MAX bytes; lines
 * as scenario files (4096 bytes).
 *
 * Units: time in seconds in the file; microseconds in the API (as the
 * host's events); values as the kind says. Ownership: a trace owns its
 * arrays (sim_trace_free).
 */
#ifndef SIM_TRACE_H
#define SIM_TRACE_H

#include <stddef.h>
#include <stdint.h>

/* Most points in one trace file: a day at one point a second. */
#define SIM_TRACE_POINTS_MAX 100000u
/* Largest trace file, bytes. */
#define SIM_TRACE_FILE_MAX (16u * 1024u * 1024u)
/* Longest line. */
#define SIM_TRACE_LINE_MAX 4096u
/* Most changes a trace may make over a run (its points times its periods
 * over run.duration_s): each becomes an event. */
#define SIM_TRACE_CHANGES_MAX 1000000u

typedef enum sim_trace_kind {
    SIM_TRACE_BANDWIDTH = 0, /* Mb/s, (0, 10^7] */
    SIM_TRACE_LATENCY,       /* ms, [0, 3600000] */
    SIM_TRACE_AVAILABILITY,  /* fraction of the CPU, [0, 1] */
} sim_trace_kind;

typedef enum sim_trace_err {
    SIM_TRACE_OK = 0,
    SIM_TRACE_EIO = -1,      /* cannot read the file */
    SIM_TRACE_EPARSE = -2,   /* a line does not parse, a value out of range, bad order */
    SIM_TRACE_ETOOMANY = -3, /* more than SIM_TRACE_POINTS_MAX points or changes */
    SIM_TRACE_ENOMEM = -4,
} sim_trace_err;

typedef struct sim_trace {
    sim_trace_kind kind;
    size_t n;
    uint64_t *t_us; /* strictly increasing */
    double *v;
    uint64_t period_us; /* 0 = no repeat */
} sim_trace;

/* Parse a trace from text; `name` (the file) prefixes messages. Errors
 * (message "NAME:LINE: why" in err): SIM_TRACE_EPARSE (no point, a bad
 * number, a value outside the kind's range, times not increasing, a
 * period not beyond the last time, PERIODICITY twice or after a point),
 * SIM_TRACE_ETOOMANY, SIM_TRACE_ENOMEM. On error *out is empty. */
int sim_trace_parse(sim_trace *out, sim_trace_kind kind, const char *text, const char *name,
                    char *err, size_t errlen);
/* Read and parse a file. Errors: SIM_TRACE_EIO (cannot open or read, larger
 * than SIM_TRACE_FILE_MAX), and those of sim_trace_parse. */
int sim_trace_load(sim_trace *out, sim_trace_kind kind, const char *path, char *err, size_t errlen);
void sim_trace_free(sim_trace *t);

/* The value at time t_us; `before` when t_us is before the first point. */
double sim_trace_value_at(const sim_trace *t, uint64_t t_us, double before);

/* Calls fn(ctx, time, value) for every change of the trace in [0, horizon_us)
 * in time order (each point of each period); stops at the first non-zero
 * return and returns it. Returns SIM_TRACE_ETOOMANY (before any call) when
 * there would be more than SIM_TRACE_CHANGES_MAX. */
int sim_trace_changes(const sim_trace *t, uint64_t horizon_us,
                      int (*fn)(void *ctx, uint64_t t_us, double value), void *ctx);

/* Availability: the time at which `work_us` of work at full speed, started
 * at start_us, is done when the CPU runs at the trace's fraction (1 before
 * the first point): the first T with integral_{start}^{T} a(u) du =
 * work_us. UINT64_MAX when the availability stays 0 for good. */
uint64_t sim_trace_work_end_us(const sim_trace *t, uint64_t start_us, uint64_t work_us);

#endif
