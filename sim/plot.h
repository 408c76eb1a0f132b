/* sim/plot — figures of simulation runs in PNG, SVG and PDF (cairo).
 *
 * Purpose. `murmur sim --plot` draws, from a run directory:
 *   accuracy_vs_time   accuracy of the population (agent `all`)
 *   loss_vs_time       mean loss of the live agents
 *   consensus_vs_time  consensus distance, log y axis
 *   bytes_vs_time      cumulative bytes sent by all agents (B, kB, MB, GB)
 * each as NAME.png, NAME.svg and NAME.pdf, x = simulated time (s). A
 * metric the run leaves undefined in every row (the accuracy of a
 * consensus run) gets no figure. A run directory holds series.csv (one
 * run; with per-agent rows the first SIM_PLOT_AGENT_LINES agents are drawn
 * thin beside the population) or seed-S/series.csv for several seeds
 * (`--seeds`): then the figure is the mean over the seeds with its 95%
 * Student t confidence band (sim/stats.h), sample by sample.
 * `murmur sim plot DIR...` (sim_plot_compare) draws the runs of one or
 * more run or sweep directories on shared axes: compare_<metric>.*.
 *
 * Titles name the scenario (summary.json "scenario"), the sweep point
 * ("label") and the seed or seeds. Axes: ticks at 1-2-5 steps on linear
 * axes; on log axes a major tick at every decade labelled 10^k (every
 * second or third decade past 8 decades) with minor ticks at 2..9 x 10^k;
 * when fewer than two decades are labelled (a narrow range), 2 and 5 x
 * 10^k labelled too, or if that still labels fewer than two ticks every
 * m x 10^k, or else nice linear steps inside the range: a log axis always
 * has at least two labelled ticks, labels printed with the digits that
 * tell them apart.
 * Lines break at undefined points (NaN, or <= 0 on a log axis).
 *
 * Drawing: cairo's vector surfaces in points (1/72 in); the PNG is the
 * same drawing at SIM_PLOT_PNG_DPI. Text in DejaVu Sans (fontconfig picks
 * a substitute when it is missing). cairo is loaded at run time
 * (dlopen "libcairo.so.2"), so the agent and libmurmur never link it; a
 * system without it gets SIM_PLOT_ELIB and a message naming the package.
 *
 * Ownership: the functions read the caller's arrays and files and write
 * the figure files; nothing is kept between calls but the loaded library.
 */
#ifndef SIM_PLOT_H
#define SIM_PLOT_H

#include <stddef.h>
#include <stdint.h>

/* Figure size, points: 6.4 x 4.4 in (a one-column figure at full width). */
#define SIM_PLOT_WIDTH_PT  460.8
#define SIM_PLOT_HEIGHT_PT 316.8
#define SIM_PLOT_SIDE_MIN  144.0 /* 2 in */
#define SIM_PLOT_SIDE_MAX  2880.0
/* PNG resolution: 200 dpi gives 1280 x 880 pixels. */
#define SIM_PLOT_PNG_DPI 200.0
/* Most series in one figure, and individual agents drawn per run. */
#define SIM_PLOT_SERIES_MAX  64u
#define SIM_PLOT_AGENT_LINES 6u
/* Most runs in one comparison, and seeds read from one directory. */
#define SIM_PLOT_RUNS_MAX  SIM_PLOT_SERIES_MAX
#define SIM_PLOT_SEEDS_MAX 10000u
/* Longest series.csv line read back. */
#define SIM_PLOT_CSV_LINE_MAX 512u
/* Most ticks on one axis (majors and minors). */
#define SIM_PLOT_TICKS_MAX 128u

_Static_assert(SIM_PLOT_AGENT_LINES + 1 <= SIM_PLOT_SERIES_MAX, "agents and population fit");

typedef enum sim_plot_err {
    SIM_PLOT_OK = 0,
    SIM_PLOT_EINVAL = -1, /* bad spec: size, too many series, no format */
    SIM_PLOT_EIO = -2,    /* cannot read series.csv or write a figure */
    SIM_PLOT_EPARSE = -3, /* series.csv malformed */
    SIM_PLOT_ENOMEM = -4,
    SIM_PLOT_ELIB = -5, /* cairo (libcairo.so.2) cannot be loaded */
} sim_plot_err;

/* Formats to write (a bit set). */
enum { SIM_PLOT_PNG = 1u, SIM_PLOT_SVG = 2u, SIM_PLOT_PDF = 4u, SIM_PLOT_FORMATS_ALL = 7u };

/* One line. lo/hi (both or neither) give a band drawn under it (a
 * confidence interval); a point of the band is skipped where either is
 * undefined. thin: drawn thin and lighter (an individual agent). */
typedef struct sim_plot_series {
    const char *name;
    const double *x, *y;
    const double *lo, *hi;
    size_t n;
    int thin;
} sim_plot_series;

typedef struct sim_plot {
    const char *title, *xlabel, *ylabel;
    int log_x, log_y;
    const sim_plot_series *series;
    size_t nseries;
    double width_pt, height_pt; /* 0 = the defaults */
} sim_plot;

/* Draw one figure and write BASE.png / BASE.svg / BASE.pdf for each
 * format in `formats`. Errors: SIM_PLOT_EINVAL, SIM_PLOT_EIO (the path and
 * the cause in err), SIM_PLOT_ENOMEM, SIM_PLOT_ELIB. */
int sim_plot_write(const sim_plot *p, const char *base, unsigned formats, char *err, size_t errlen);

/* The figures of a run directory (above) into that directory, in every
 * format. Errors: SIM_PLOT_EIO, SIM_PLOT_EPARSE (file and line in err),
 * SIM_PLOT_ENOMEM, SIM_PLOT_ELIB. */
int sim_plot_dir(const char *dir, char *err, size_t errlen);

typedef struct sim_plot_compare_opts {
    int log_x, log_y; /* force log axes (consensus is always log y) */
    unsigned formats; /* 0 = all */
} sim_plot_compare_opts;

/* One figure per metric with every run of dirs on shared axes, into out
 * (created). Each dir is a run directory (series.csv or seed-S/) or a
 * sweep directory (its run-RRRR/ directories, in order). A run is named by
 * its summary.json label, else by its directory. Errors as sim_plot_dir,
 * and SIM_PLOT_EINVAL for more than SIM_PLOT_RUNS_MAX runs or a directory
 * holding no run. */
int sim_plot_compare(const char *const *dirs, size_t ndirs, const char *out,
                     const sim_plot_compare_opts *opts, char *err, size_t errlen);

/* An axis tick: its value, whether it is major (longer, gridded), and its
 * label ("" for none). A decade label 10^k has decade = 1 and exp = k. */
typedef struct sim_plot_tick {
    double v;
    int major;
    int decade, exp;
    char label[24];
} sim_plot_tick;

/* The ticks of an axis over [lo, hi] (lo < hi; lo > 0 on a log axis), in
 * increasing order. Returns the count (<= max). For layout and tests. */
size_t sim_plot_axis_ticks(double lo, double hi, int log, sim_plot_tick *out, size_t max);

/* 0 if cairo can be loaded; else SIM_PLOT_ELIB with the reason in err. */
int sim_plot_available(char *err, size_t errlen);

#endif
