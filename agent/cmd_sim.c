/* murmur sim — run a simulation scenario (sim/run.h) from the command line.
 *
 *   murmur sim SCENARIO --out DIR [--set k=v]... [--sweep k=v1,v2,...]... [--plot]
 *   murmur sim plot DIR... [--out OUT]     (the runs compared, sim/plot.h)
 *
 * One run writes DIR/series.csv and DIR/summary.json. A sweep runs every
 * combination of the swept values (docs/SIMULATOR.md, "Sweeps"): run r
 * writes DIR/run-RRRR/{series.csv,summary.json}, and DIR/sweep.csv gets one
 * summary row per run. Every scenario error (file, key, value, cross-key
 * check) is reported with its origin before any run starts; exit status 2.
 */
#include "agent/commands.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cli.h"
#include "common/text.h"
#include "sim/output.h"
#include "sim/plot.h"
#include "sim/run.h"
#include "sim/scenario.h"
#include "sim/soak.h"

#define SIM_CLI_ARGS_MAX 256

static void sim_usage(FILE *out)
{
    fprintf(out, "usage: murmur sim SCENARIO --out DIR [OPTIONS]\n"
                 "\n"
                 "Run the discrete-event simulator on a scenario file (docs/SIMULATOR.md lists\n"
                 "every key). Prints SEED=<seed> first and TRACE_HASH=<hex> last for each run;\n"
                 "the same scenario and seed give the same trace hash.\n"
                 "\n"
                 "  --out DIR            output directory (default: output.dir of the scenario)\n"
                 "  --set KEY=VALUE      override one key, e.g. --set run.agents=64 (repeatable)\n"
                 "  --sweep KEY=V1,V2,.. run every combination of the swept values; one row per\n"
                 "                       run in DIR/sweep.csv, files in DIR/run-RRRR (repeatable)\n"
                 "  --plot               also draw the figures (accuracy, loss, consensus, bytes)\n"
                 "                       in PNG, SVG and PDF\n"
                 "  --quiet              no progress lines\n"
                 "\n"
                 "       murmur sim --soak N [--soak-seed S] [--verbose]\n"
                 "\n"
                 "Soak: N random-fault scenarios (seeds S..S+N-1, S = 1 by default), each\n"
                 "checking safety as it runs (finite values, epochs only grow, no shard lost\n"
                 "while fewer than r holders fail) and liveness after healing (all agents up,\n"
                 "replication back to r, consensus reached); a failing seed prints the\n"
                 "command that reproduces it. Exit status 1 if any seed failed.\n"
                 "\n"
                 "  --soak N             number of seeds, 1..1000000\n"
                 "  --soak-seed S        first seed [1]\n"
                 "  --verbose            print every drawn scenario and its figures\n"
                 "  --help               this text\n"
                 "\n"
                 "       murmur sim plot DIR... [--out OUT] [--log-x] [--log-y] [--format F,..]\n"
                 "\n"
                 "Draw the runs of run directories (series.csv or seed-S/) and sweep\n"
                 "directories (run-RRRR/) on shared axes: OUT/compare_<metric>_vs_time.*\n"
                 "(OUT: the first DIR). --format: png, svg, pdf (all three by default).\n");
}

enum { PLOT_F_OUT, PLOT_F_LOGX, PLOT_F_LOGY, PLOT_F_FORMAT, PLOT_F_HELP };
static const common_flag plot_flags[] = {
    {"out", 0, true, PLOT_F_OUT, "OUT", "directory for the figures [the first DIR]", NULL},
    {"log-x", 0, false, PLOT_F_LOGX, "", "log time axis", NULL},
    {"log-y", 0, false, PLOT_F_LOGY, "", "log y axes (consensus distance always is)", NULL},
    {"format", 0, true, PLOT_F_FORMAT, "F,..", "png, svg, pdf (comma-separated) [all]", NULL},
    {"help", 'h', false, PLOT_F_HELP, "", "this text", NULL},
};
#define PLOT_FLAGS (sizeof plot_flags / sizeof plot_flags[0])

/* "png,pdf" -> SIM_PLOT_PNG | SIM_PLOT_PDF; 0 on a bad word. */
static unsigned sim_plot_formats(const char *v)
{
    unsigned f = 0;
    char buf[64];
    snprintf(buf, sizeof buf, "%s", v);
    for (char *save = NULL, *w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
        if (!strcmp(w, "png"))
            f |= SIM_PLOT_PNG;
        else if (!strcmp(w, "svg"))
            f |= SIM_PLOT_SVG;
        else if (!strcmp(w, "pdf"))
            f |= SIM_PLOT_PDF;
        else
            return 0;
    }
    return f;
}

/* murmur sim plot DIR... : the comparison figures (sim_plot_compare). */
static int cmd_sim_plot(int argc, char **argv)
{
    const char *dirs[SIM_PLOT_RUNS_MAX], *out = NULL;
    size_t n = 0;
    sim_plot_compare_opts o = {0};
    common_cli cli;
    common_cli_init(&cli, "murmur sim plot", plot_flags, PLOT_FLAGS, argc, argv);
    for (int id; (id = common_cli_next(&cli)) != COMMON_CLI_END;) {
        switch (id) {
        case PLOT_F_HELP:
            printf("usage: murmur sim plot DIR... [OPTIONS]\n\n"
                   "Draw the runs of run and sweep directories on shared axes\n"
                   "(docs/SIMULATOR.md, \"Figures\").\n\n");
            common_cli_usage(&cli, stdout);
            return 0;
        case PLOT_F_OUT:
            out = cli.arg;
            break;
        case PLOT_F_LOGX:
            o.log_x = 1;
            break;
        case PLOT_F_LOGY:
            o.log_y = 1;
            break;
        case PLOT_F_FORMAT:
            if (!(o.formats = sim_plot_formats(cli.arg))) {
                fprintf(stderr, "murmur sim plot: --format %s: png, svg or pdf, comma-separated\n",
                        cli.arg);
                return 2;
            }
            break;
        case COMMON_CLI_POSITIONAL:
            if (n == SIM_PLOT_RUNS_MAX) {
                fprintf(stderr, "murmur sim plot: more than %u directories\n", SIM_PLOT_RUNS_MAX);
                return 2;
            }
            dirs[n++] = cli.arg;
            break;
        default:
            fprintf(stderr, "murmur sim plot: %s\n", cli.err);
            return 2;
        }
    }
    if (n == 0) {
        fprintf(stderr, "usage: murmur sim plot DIR... [--out OUT] [--log-x] [--log-y] "
                        "[--format png,svg,pdf]\n");
        return 2;
    }
    char err[1024];
    if (sim_plot_compare(dirs, n, out ? out : dirs[0], &o, err, sizeof err)) {
        fprintf(stderr, "murmur sim plot: %s\n", err);
        return 1;
    }
    return 0;
}

enum {
    SIM_F_OUT,
    SIM_F_SET,
    SIM_F_SWEEP,
    SIM_F_PLOT,
    SIM_F_QUIET,
    SIM_F_SOAK,
    SIM_F_SOAK_SEED,
    SIM_F_VERBOSE,
    SIM_F_HELP
};
static const common_flag sim_flags[] = {
    {"out", 0, true, SIM_F_OUT, "DIR", "output directory", NULL},
    {"set", 0, true, SIM_F_SET, "KEY=VALUE", "override one key (repeatable)", NULL},
    {"sweep", 0, true, SIM_F_SWEEP, "KEY=V1,V2,..", "run every combination (repeatable)", NULL},
    {"plot", 0, false, SIM_F_PLOT, "", "also draw the figures (PNG, SVG, PDF)", NULL},
    {"quiet", 0, false, SIM_F_QUIET, "", "no progress lines", NULL},
    {"soak", 0, true, SIM_F_SOAK, "N", "number of soak seeds", NULL},
    {"soak-seed", 0, true, SIM_F_SOAK_SEED, "S", "first soak seed", NULL},
    {"verbose", 0, false, SIM_F_VERBOSE, "", "print every drawn scenario", NULL},
    {"help", 'h', false, SIM_F_HELP, "", "this text", NULL},
};
#define SIM_FLAGS (sizeof sim_flags / sizeof sim_flags[0])

int cmd_sim(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "plot"))
        return cmd_sim_plot(argc - 1, argv + 1);
    const char *path = NULL, *out = NULL;
    const char *sets[SIM_CLI_ARGS_MAX], *sweeps[SIM_CLI_ARGS_MAX];
    int nsets = 0, nsweeps = 0, plot = 0, quiet = 0, verbose = 0;
    unsigned long long soak = 0, soak_seed = 1;
    int soak_given = 0;
    common_cli cli;
    common_cli_init(&cli, "murmur sim", sim_flags, SIM_FLAGS, argc, argv);
    for (int id; (id = common_cli_next(&cli)) != COMMON_CLI_END;) {
        const char *v = cli.arg;
        uint64_t x;
        switch (id) {
        case SIM_F_HELP:
            sim_usage(stdout);
            return 0;
        case SIM_F_PLOT:
            plot = 1;
            break;
        case SIM_F_QUIET:
            quiet = 1;
            break;
        case SIM_F_VERBOSE:
            verbose = 1;
            break;
        case SIM_F_SOAK:
            if (!common_parse_u64(v, &x) || x < 1 || x > 1000000) {
                fprintf(stderr, "murmur sim: --soak: '%s' is not a number of seeds 1..1000000\n",
                        v);
                return 2;
            }
            soak = x;
            soak_given = 1;
            break;
        case SIM_F_SOAK_SEED:
            if (!common_parse_u64(v, &x)) {
                fprintf(stderr, "murmur sim: --soak-seed: '%s' is not a seed (0..2^64-1)\n", v);
                return 2;
            }
            soak_seed = x;
            break;
        case SIM_F_OUT:
            out = v;
            break;
        case SIM_F_SET:
        case SIM_F_SWEEP: {
            int *n = id == SIM_F_SET ? &nsets : &nsweeps;
            if (*n == SIM_CLI_ARGS_MAX) {
                fprintf(stderr, "murmur sim: more than %d %s\n", SIM_CLI_ARGS_MAX, cli.given);
                return 2;
            }
            (id == SIM_F_SET ? sets : sweeps)[(*n)++] = v;
            break;
        }
        case COMMON_CLI_POSITIONAL:
            if (path) {
                fprintf(stderr, "murmur sim: one scenario file only (got %s and %s)\n", path, v);
                return 2;
            }
            path = v;
            break;
        default:
            fprintf(stderr, "murmur sim: %s\n", cli.err);
            return 2;
        }
    }
    if (soak_given) {
        if (path || nsets || nsweeps || out || plot) {
            fprintf(stderr, "murmur sim: --soak draws its own scenarios: no scenario file, "
                            "--out, --set, --sweep or --plot\n");
            return 2;
        }
        sim_soak_opts so = {
            .first_seed = soak_seed, .count = (uint32_t)soak, .verbose = verbose, .prog = "murmur"};
        int f = sim_soak_run(&so);
        return f == 0 ? 0 : 1;
    }
    if (!path) {
        sim_usage(stderr);
        return 2;
    }
    sim_scenario *base = malloc(sizeof *base), *sc = malloc(sizeof *sc);
    sim_sweep *sw = malloc(sizeof *sw);
    sim_summary *sum = malloc(sizeof *sum);
    char err[1024];
    int status = 2;
    if (!base || !sc || !sw || !sum) {
        fprintf(stderr, "murmur sim: out of memory\n");
        status = 1;
        goto done;
    }
    sim_scenario_defaults(base);
    sim_sweep_init(sw);
    if (sim_scenario_load(base, path, err, sizeof err) != 0) {
        fprintf(stderr, "murmur sim: %s\n", err);
        goto done;
    }
    for (int k = 0; k < nsets; k++)
        if (sim_scenario_set(base, sets[k], err, sizeof err) != 0) {
            fprintf(stderr, "murmur sim: %s\n", err);
            goto done;
        }
    if (plot)
        base->output.plot = 1;
    for (int k = 0; k < nsweeps; k++)
        if (sim_sweep_add(sw, base, sweeps[k], err, sizeof err) != 0) {
            fprintf(stderr, "murmur sim: %s\n", err);
            goto done;
        }
    const char *dir = out ? out : base->output.dir;
    uint64_t runs = sim_sweep_runs(sw);
    /* Check every point before the first run starts. */
    for (uint64_t r = 0; r < runs; r++) {
        *sc = *base;
        if (sim_sweep_apply(sw, r, sc, err, sizeof err) != 0 ||
            sim_scenario_check(sc, err, sizeof err) != 0) {
            char label[256];
            sim_sweep_label(sw, r, label, sizeof label);
            fprintf(stderr, "murmur sim: %s%s%s%s\n", err, label[0] ? " (sweep point " : "", label,
                    label[0] ? ")" : "");
            goto done;
        }
    }
    status = 1;
    sim_sweep_csv csv;
    int csv_open = 0;
    if (sw->naxes) {
        if (sim_sweep_csv_open(&csv, dir, sw, err, sizeof err) != 0) {
            fprintf(stderr, "murmur sim: %s\n", err);
            goto done;
        }
        csv_open = 1;
    }
    int ok = 1;
    for (uint64_t r = 0; r < runs && ok; r++) {
        *sc = *base;
        (void)sim_sweep_apply(sw, r, sc, err, sizeof err);
        char label[SIM_SCENARIO_STR_MAX], rundir[SIM_OUTPUT_PATH_MAX];
        sim_sweep_label(sw, r, label, sizeof label);
        if (sw->naxes) {
            int n = snprintf(rundir, sizeof rundir, "%s/run-%04llu", dir, (unsigned long long)r);
            if (n < 0 || (size_t)n >= sizeof rundir) {
                fprintf(stderr, "murmur sim: output path too long: %s\n", dir);
                ok = 0;
                break;
            }
            printf("RUN=%llu %s\n", (unsigned long long)r, label);
        } else {
            snprintf(rundir, sizeof rundir, "%s", dir);
        }
        sim_run_opts o = {
            .write_files = 1, .dir = rundir, .label = label, .progress_s = quiet ? 1e300 : 5};
        int rc = sim_run(sc, &o, sum, err, sizeof err);
        if (rc) {
            fprintf(stderr, "murmur sim: %s%s%s\n", err, label[0] ? " at " : "", label);
            ok = 0;
            break;
        }
        if (csv_open && sim_sweep_csv_row(&csv, sw, r, sum) != 0) {
            fprintf(stderr, "murmur sim: %s: write error\n", csv.path);
            ok = 0;
        }
    }
    if (csv_open && sim_sweep_csv_close(&csv, err, sizeof err) != 0) {
        fprintf(stderr, "murmur sim: %s\n", err);
        ok = 0;
    }
    status = ok ? 0 : 1;
done:
    free(base);
    free(sc);
    free(sw);
    free(sum);
    return status;
}
