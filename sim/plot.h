/* sim/plot — PNG line plots with a built-in bitmap font (libpng only).
 *
 * Purpose. `murmur sim --plot` draws, from DIR/series.csv:
 *   accuracy_vs_time.png     accuracy of the population (agent `all`) vs time
 *   loss_vs_time.png         mean loss vs time
 *   consensus_vs_round.png   consensus distance vs round, log y axis
 *   bytes_vs_time.png        cumulative bytes sent vs time (B, KB, MB or GB)
 * each with the population line and up to SIM_PLOT_AGENT_LINES individual
 * agents when series.csv has per-agent rows. A plot whose column is empty
 * (accuracy of a consensus run) says "no data".
 *
 * Drawing: an RGB canvas; axes with ticks at 1-2-5 steps (decades on a
 * log axis) labelled with numbers; light grid lines; a title; axis labels
 * (the y label is drawn rotated); a legend box with one colour per series;
 * lines 2 px wide, broken at undefined points (NaN, or <= 0 on a log axis).
 * Text uses a 5x7 pixel font (printable ASCII) scaled by 2.
 *
 * Ownership: sim_plot_png reads the caller's arrays and writes one file.
 */
#ifndef SIM_PLOT_H
#define SIM_PLOT_H

#include <stddef.h>
#include <stdint.h>

/* Canvas limits and defaults, pixels. */
#define SIM_PLOT_WIDTH    960u
#define SIM_PLOT_HEIGHT   600u
#define SIM_PLOT_SIDE_MAX 8192u
#define SIM_PLOT_SIDE_MIN 200u
/* Most series in one plot (legend entries), and individual agents drawn. */
#define SIM_PLOT_SERIES_MAX  12u
#define SIM_PLOT_AGENT_LINES 6u
/* Longest series.csv line read back. */
#define SIM_PLOT_CSV_LINE_MAX 512u

_Static_assert(SIM_PLOT_AGENT_LINES + 1 <= SIM_PLOT_SERIES_MAX, "agents and population fit");
_Static_assert(SIM_PLOT_SIDE_MIN <= SIM_PLOT_WIDTH && SIM_PLOT_WIDTH <= SIM_PLOT_SIDE_MAX,
               "default width in range");

typedef enum sim_plot_err {
    SIM_PLOT_OK = 0,
    SIM_PLOT_EINVAL = -1, /* bad spec: size, too many series */
    SIM_PLOT_EIO = -2,    /* cannot read series.csv or write the PNG */
    SIM_PLOT_EPARSE = -3, /* series.csv malformed */
    SIM_PLOT_ENOMEM = -4,
} sim_plot_err;

typedef struct sim_plot_series {
    const char *name;
    const double *x, *y;
    size_t n;
} sim_plot_series;

typedef struct sim_plot {
    const char *title, *xlabel, *ylabel;
    int log_y;
    const sim_plot_series *series;
    size_t nseries;
    uint32_t width, height; /* 0 = defaults */
} sim_plot;

/* Draw and write one PNG. Errors: SIM_PLOT_EINVAL, SIM_PLOT_EIO,
 * SIM_PLOT_ENOMEM (message in err). */
int sim_plot_png(const sim_plot *p, const char *path, char *err, size_t errlen);

/* Read DIR/series.csv and write the four plots above into DIR. Errors:
 * SIM_PLOT_EIO, SIM_PLOT_EPARSE (file and line in err), SIM_PLOT_ENOMEM. */
int sim_plot_dir(const char *dir, char *err, size_t errlen);

/* Pixel width of text at a scale (for layout and tests). */
uint32_t sim_plot_text_width(const char *s, uint32_t scale);

/* Rasterise one character of the font: rows[0..6], bit 4 = leftmost
 * column. Returns 0, or -1 for a character outside printable ASCII. */
int sim_plot_glyph(char c, uint8_t rows[7]);

#endif
