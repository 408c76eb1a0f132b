/* murmur sim — run a simulation scenario (sim/run.h) from the command line.
 *
 *   murmur sim SCENARIO --out DIR [--set k=v]... [--sweep k=v1,v2,...]...
 *              [--seeds N] [--jobs J] [--plot] [--trace FILE] [--schedule FILE]
 *              [--allow-divergence]
 *   murmur sim plot DIR... [--out OUT]     (the runs compared, sim/plot.h)
 *
 * One run writes DIR/series.csv and DIR/summary.json. A sweep runs every
 * combination of the swept values (docs/SIMULATOR.md, "Sweeps"): run r
 * writes DIR/run-RRRR/{series.csv,summary.json}, and DIR/sweep.csv gets one
 * summary row per run. --seeds N replicates each point under seeds
 * run.seed .. run.seed + N - 1 into POINT/seed-S/, and POINT/summary.json
 * (and the sweep row) holds mean, sd and 95% interval per metric
 * (sim/output.h, sim/stats.h). Every scenario error (file, key, value,
 * cross-key check) is reported with its origin before any run starts.
 *
 * Jobs. The (point, seed) pairs are jobs; with more than one job and
 * --jobs > 1 (the online cores by default) they run in worker processes
 * (fork), each writing its summary into a shared slot; the parent prints
 * each job's SEED=/TRACE_HASH= lines as it ends and the combined progress.
 *
 * Signals. The first SIGINT or SIGTERM stops every run at its next event
 * or round: each writes what it simulated (series so far, a summary with
 * "interrupted": true and the simulated time reached), jobs not started
 * are skipped, and the exit status is 130. A second signal exits at once
 * (workers are killed). Workers ignore SIGINT (the terminal sends it to
 * the whole group) and stop on the parent's SIGTERM.
 *
 * Exit status: 0 ok; 1 a run failed; 2 usage or scenario error; 3 a run
 * diverged (unless --allow-divergence); 130 interrupted.
 */
#include "agent/chaos_sched.h"
#include "agent/chaos_sim.h"
#include "agent/commands.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/cli.h"
#include "common/text.h"
#include "sim/output.h"
#include "sim/plot.h"
#include "sim/run.h"
#include "sim/scenario.h"
#include "sim/soak.h"

#define SIM_CLI_ARGS_MAX 256
/* Most seeds per point, and most worker processes at once. */
#define SIM_SEEDS_MAX 1000u
#define SIM_JOBS_MAX  256u
/* Exit status of an interrupted run (128 + SIGINT, as a shell reports it)
 * and of a run that diverged. */
#define SIM_EXIT_INTERRUPTED 130
#define SIM_EXIT_DIVERGED    3
/* --schedule: the longest training stall the verdict allows (murmur chaos's
 * --stall-bound default). */
#define SIM_CHAOS_STALL_BOUND_S 30.0

static void sim_usage(FILE *out)
{
    fprintf(out,
            "usage: murmur sim SCENARIO --out DIR [OPTIONS]\n"
            "\n"
            "Run the discrete-event simulator on a scenario file (docs/SIMULATOR.md lists\n"
            "every key). Prints SEED=<seed> first and TRACE_HASH=<hex> last for each run;\n"
            "the same scenario and seed give the same trace hash.\n"
            "\n"
            "  --out DIR            output directory (default: output.dir of the scenario)\n"
            "  --set KEY=VALUE      override one key, e.g. --set run.agents=64 (repeatable)\n"
            "  --sweep KEY=V1,V2,.. run every combination of the swept values; one row per\n"
            "                       run in DIR/sweep.csv, files in DIR/run-RRRR (repeatable)\n"
            "  --seeds N            N replications per point, seeds run.seed .. run.seed+N-1,\n"
            "                       in DIR/seed-S/; summary.json and sweep.csv get mean, sd\n"
            "                       and 95%% Student t interval per metric\n"
            "  -j, --jobs J         worker processes (default: the online cores)\n"
            "  --plot               also draw the figures (accuracy, loss, consensus, bytes)\n"
            "                       in PNG, SVG and PDF; mean and 95%% band over seeds\n"
            "  --trace FILE         write every event of the trace hash, one per line (one run)\n"
            "  --schedule FILE      add the faults of a murmur chaos schedule (members are\n"
            "                       agents by index) and judge the run as murmur chaos does\n"
            "                       (docs/CHAOS.md)\n"
            "  --allow-divergence   exit 0 when a run diverges (it is still marked)\n"
            "  --quiet              no progress lines\n"
            "\n"
            "Ctrl-C (SIGINT) or SIGTERM writes what was simulated (summary.json marked\n"
            "\"interrupted\": true) and exits 130; a second one exits at once. A run that\n"
            "diverges (non-finite values, or growth past run.diverge_factor) stops, is\n"
            "marked \"diverged\": true with its round, and the exit status is 3.\n"
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
            "  -h, --help           this text\n"
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
    SIM_F_SCHEDULE,
    SIM_F_SWEEP,
    SIM_F_SEEDS,
    SIM_F_JOBS,
    SIM_F_PLOT,
    SIM_F_TRACE,
    SIM_F_ALLOW_DIV,
    SIM_F_QUIET,
    SIM_F_SOAK,
    SIM_F_SOAK_SEED,
    SIM_F_VERBOSE,
    SIM_F_HELP
};
static const common_flag sim_flags[] = {
    {"out", 0, true, SIM_F_OUT, "DIR", "output directory", NULL},
    {"set", 0, true, SIM_F_SET, "KEY=VALUE", "override one key (repeatable)", NULL},
    {"schedule", 0, true, SIM_F_SCHEDULE, "FILE",
     "add the faults of a murmur chaos schedule and judge the run as murmur chaos does "
     "(docs/CHAOS.md)",
     NULL},
    {"sweep", 0, true, SIM_F_SWEEP, "KEY=V1,V2,..", "run every combination (repeatable)", NULL},
    {"seeds", 0, true, SIM_F_SEEDS, "N", "replications per point", NULL},
    {"jobs", 'j', true, SIM_F_JOBS, "J", "worker processes", NULL},
    {"plot", 0, false, SIM_F_PLOT, "", "also draw the figures (PNG, SVG, PDF)", NULL},
    {"trace", 0, true, SIM_F_TRACE, "FILE", "event trace of the run", NULL},
    {"allow-divergence", 0, false, SIM_F_ALLOW_DIV, "", "a diverged run exits 0", NULL},
    {"quiet", 0, false, SIM_F_QUIET, "", "no progress lines", NULL},
    {"soak", 0, true, SIM_F_SOAK, "N", "number of soak seeds", NULL},
    {"soak-seed", 0, true, SIM_F_SOAK_SEED, "S", "first soak seed", NULL},
    {"verbose", 0, false, SIM_F_VERBOSE, "", "print every drawn scenario", NULL},
    {"help", 'h', false, SIM_F_HELP, "", "this text", NULL},
};
#define SIM_FLAGS (sizeof sim_flags / sizeof sim_flags[0])

/* ---- signals ---------------------------------------------------------------- */

static volatile sig_atomic_t sim_stop_flag; /* a first signal: runs stop and write */
static volatile sig_atomic_t sim_signals;
static volatile pid_t sim_workers[SIM_JOBS_MAX]; /* running workers, 0 = free slot */

static void sim_on_signal(int sig)
{
    (void)sig;
    if (sim_signals++ > 0) { /* the second: at once */
        for (unsigned k = 0; k < SIM_JOBS_MAX; k++)
            if (sim_workers[k] > 0)
                kill(sim_workers[k], SIGKILL);
        _exit(SIM_EXIT_INTERRUPTED);
    }
    sim_stop_flag = 1;
    for (unsigned k = 0; k < SIM_JOBS_MAX; k++)
        if (sim_workers[k] > 0)
            kill(sim_workers[k], SIGTERM);
    static const char msg[] = "\nmurmur sim: interrupted: writing what was simulated "
                              "(again to quit at once)\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
}

static void sim_signals_install(int worker)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = sim_on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    if (worker) {
        sa.sa_handler = SIG_IGN; /* the parent forwards SIGTERM */
        sigaction(SIGINT, &sa, NULL);
    } else {
        sigaction(SIGINT, &sa, NULL);
    }
}

static void sim_signals_restore(void)
{
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
}

/* ---- progress --------------------------------------------------------------- */

/* On a terminal one line rewritten in place (a few times a second); else
 * a plain line every 5 wall seconds. Rate: simulated seconds per wall
 * second; ETA: wall time left at the rate so far over the fraction done. */
typedef struct sim_eta {
    FILE *f;
    int tty;
    int shown; /* a terminal line is on screen */
    struct timespec t0;
    double last;
} sim_eta;

static double sim_wall(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + 1e-9 * (double)(t.tv_nsec - t0->tv_nsec);
}

static void sim_eta_init(sim_eta *e)
{
    memset(e, 0, sizeof *e);
    e->f = stderr;
    e->tty = isatty(fileno(stderr));
    clock_gettime(CLOCK_MONOTONIC, &e->t0);
}

static void sim_eta_duration(double s, char *buf, size_t len)
{
    if (!isfinite(s) || s < 0)
        snprintf(buf, len, "?");
    else if (s < 60)
        snprintf(buf, len, "%.0fs", s);
    else if (s < 3600)
        snprintf(buf, len, "%.0fm%02.0fs", floor(s / 60), fmod(s, 60));
    else
        snprintf(buf, len, "%.0fh%02.0fm", floor(s / 3600), floor(fmod(s, 3600) / 60));
}

/* fraction of the work done; sim_s: simulated seconds so far (summed over
 * jobs); what: "" or " (3/10 runs)" */
static void sim_eta_show(sim_eta *e, double fraction, double sim_s, const char *what)
{
    double w = sim_wall(&e->t0);
    if (w - e->last < (e->tty ? 0.25 : 5.0))
        return;
    e->last = w;
    if (fraction < 0)
        fraction = 0;
    if (fraction > 1)
        fraction = 1;
    char left[32], wall[32];
    sim_eta_duration(fraction > 0 ? w * (1 - fraction) / fraction : NAN, left, sizeof left);
    sim_eta_duration(w, wall, sizeof wall);
    fprintf(e->f, "%ssim: %5.1f%%%s  simulated %.3g s (%.3g sim s per wall s)  wall %s  ETA %s%s",
            e->tty ? "\r" : "", 100 * fraction, what, sim_s, w > 0 ? sim_s / w : 0, wall, left,
            e->tty ? "\033[K" : "\n");
    fflush(e->f);
    e->shown = e->tty;
}

static void sim_eta_end(sim_eta *e)
{
    if (e->shown)
        fputs("\r\033[K", e->f);
    e->shown = 0;
    fflush(e->f);
}

static void sim_progress_cb(void *ctx, double fraction, double sim_time_s, uint64_t events)
{
    (void)events;
    sim_eta_show(ctx, fraction, sim_time_s, "");
}

/* ---- jobs ------------------------------------------------------------------- */

enum { SIM_JOB_PENDING = 0, SIM_JOB_RUNNING, SIM_JOB_DONE, SIM_JOB_FAILED };

/* One (point, seed) run; in memory shared with the workers. */
typedef struct sim_slot {
    volatile int state;
    int verdict_fail;                /* --schedule: the checker's verdict was FAIL */
    volatile double fraction, sim_s; /* progress of a running job */
    int rc;
    char err[1024];
    sim_summary sum;
} sim_slot;

typedef struct sim_plan {
    const sim_scenario *base;
    const sim_sweep *sw;
    const char *dir, *scenario_name;
    uint64_t points, seeds, jobs;
    int quiet, plot;
    FILE *trace;
    const chaos_sched *chaos; /* --schedule: judge each run as murmur chaos does */
} sim_plan;

/* Directory of point p (the run directory without seeds). */
static int sim_point_dir(const sim_plan *pl, uint64_t p, char *out, size_t len)
{
    int n = pl->sw->naxes ? snprintf(out, len, "%s/run-%04llu", pl->dir, (unsigned long long)p)
                          : snprintf(out, len, "%s", pl->dir);
    return n < 0 || (size_t)n >= len;
}

static void sim_trace_cb(void *ctx, uint64_t now_us, uint32_t from, uint32_t to,
                         const uint8_t *frame, size_t len, uint64_t value)
{
    sim_trace_line(ctx, now_us, from, to, frame, len, value);
}

typedef struct sim_worker_ctx {
    sim_slot *slot;
} sim_worker_ctx;

static void sim_worker_progress(void *ctx, double fraction, double sim_time_s, uint64_t events)
{
    (void)events;
    sim_slot *s = ctx;
    s->fraction = fraction;
    s->sim_s = sim_time_s;
}

/* Run job j (point j / seeds, seed index j % seeds) into slot. in_worker:
 * quiet, progress into the slot; else the SEED=/TRACE_HASH= lines and the
 * progress line here. */
static void sim_job_run(const sim_plan *pl, uint64_t j, sim_slot *slot, int in_worker, sim_eta *eta)
{
    uint64_t p = j / pl->seeds, k = j % pl->seeds;
    sim_scenario *sc = malloc(sizeof *sc);
    char label[SIM_SCENARIO_STR_MAX], rundir[SIM_OUTPUT_PATH_MAX];
    slot->rc = 1;
    if (!sc) {
        snprintf(slot->err, sizeof slot->err, "out of memory");
        slot->state = SIM_JOB_FAILED;
        return;
    }
    *sc = *pl->base;
    (void)sim_sweep_apply(pl->sw, p, sc, slot->err, sizeof slot->err); /* checked before */
    sim_sweep_label(pl->sw, p, label, sizeof label);
    int bad = sim_point_dir(pl, p, rundir, sizeof rundir);
    if (pl->seeds > 1) {
        sc->run.seed += k;
        sc->output.plot = 0; /* the point's figure: mean and band, drawn after */
        size_t n = strlen(rundir);
        int m =
            snprintf(rundir + n, sizeof rundir - n, "/seed-%llu", (unsigned long long)sc->run.seed);
        bad |= m < 0 || (size_t)m >= sizeof rundir - n;
    }
    if (bad) {
        snprintf(slot->err, sizeof slot->err, "output path too long: %s", pl->dir);
        slot->state = SIM_JOB_FAILED;
        free(sc);
        return;
    }
    sim_run_opts o = {.write_files = 1,
                      .dir = rundir,
                      .label = label,
                      .scenario = pl->scenario_name,
                      .quiet = in_worker,
                      .stop = &sim_stop_flag,
                      .progress_s = in_worker   ? 0.5
                                    : pl->quiet ? 1e300
                                    : eta->tty  ? 0.25
                                                : 5,
                      .on_progress = in_worker   ? sim_worker_progress
                                     : pl->quiet ? NULL
                                                 : sim_progress_cb,
                      .on_trace = pl->trace ? sim_trace_cb : NULL,
                      .hook_ctx = in_worker ? (void *)slot : (void *)eta};
    if (pl->trace) {
        o.hook_ctx = pl->trace; /* one run only (checked): no progress callback then */
        o.on_progress = NULL;
        o.quiet = 0;
        o.progress_s = 1e300;
    }
    chaos_sim *judge = NULL;
    if (pl->chaos) {
        judge = chaos_sim_create(pl->chaos, sc->run.agents, sc->shards.replication,
                                 SIM_CHAOS_STALL_BOUND_S);
        if (!judge) {
            snprintf(slot->err, sizeof slot->err, "out of memory");
            slot->state = SIM_JOB_FAILED;
            free(sc);
            return;
        }
        o.on_sample = chaos_sim_sample;
        o.sample_ctx = judge;
    }
    sim_summary_init(&slot->sum);
    slot->state = SIM_JOB_RUNNING;
    int rc = sim_run(sc, &o, &slot->sum, slot->err, sizeof slot->err);
    if (judge && rc == 0) { /* the verdict, in murmur chaos's format (docs/CHAOS.md) */
        if (label[0])
            printf("# verdict of %s\n", label);
        slot->verdict_fail = chaos_sim_verdict(judge, stdout);
        fflush(stdout);
    }
    chaos_sim_destroy(judge);
    slot->rc = rc;
    slot->state = rc ? SIM_JOB_FAILED : SIM_JOB_DONE;
    free(sc);
}

/* Worker process of job j: its own signals, dies with the parent. */
static pid_t sim_job_fork(const sim_plan *pl, uint64_t j, sim_slot *slot)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    for (unsigned k = 0; k < SIM_JOBS_MAX; k++)
        sim_workers[k] = 0;
    sim_signals = 0;
    sim_signals_install(1);
    if (getppid() == 1)
        _exit(1);
    sim_job_run(pl, j, slot, 1, NULL);
    _exit(0);
}

/* What a finished job prints: its point, seed and trace hash. */
static void sim_job_report(const sim_plan *pl, uint64_t j, const sim_slot *s, int print_ids)
{
    char label[SIM_SCENARIO_STR_MAX];
    uint64_t p = j / pl->seeds;
    sim_sweep_label(pl->sw, p, label, sizeof label);
    if (s->state != SIM_JOB_DONE) {
        fprintf(stderr, "murmur sim: %s%s%s\n", s->err, label[0] ? " at " : "", label);
        return;
    }
    if (print_ids) {
        if (pl->sw->naxes)
            printf("RUN=%llu %s\n", (unsigned long long)p, label);
        printf("SEED=%llu\n", (unsigned long long)s->sum.seed);
        printf("TRACE_HASH=%016llx\n", (unsigned long long)s->sum.trace_hash);
        fflush(stdout);
    }
    if (s->sum.interrupted)
        fprintf(stderr,
                "murmur sim: seed %llu interrupted at t = %g s%s%s (its files are written)\n",
                (unsigned long long)s->sum.seed, s->sum.sim_time_s, label[0] ? " at " : "", label);
    if (s->sum.diverged)
        fprintf(stderr, "murmur sim: run diverged at round %llu (t = %g s)%s%s: %s\n",
                (unsigned long long)s->sum.diverged_round, s->sum.diverged_time_s,
                label[0] ? " at " : "", label, s->sum.diverged_reason);
}

/* Every job, in worker processes, at most `workers` at once. */
static void sim_jobs_parallel(const sim_plan *pl, sim_slot *slots, unsigned workers)
{
    sim_eta eta;
    sim_eta_init(&eta);
    uint64_t next = 0, done = 0, running = 0;
    uint64_t *job_of = calloc(SIM_JOBS_MAX, sizeof *job_of);
    if (!job_of) {
        fprintf(stderr, "murmur sim: out of memory\n");
        return;
    }
    while (done < pl->jobs) {
        while (running < workers && next < pl->jobs && !sim_stop_flag) {
            unsigned w = 0;
            while (sim_workers[w] != 0)
                w++;
            pid_t pid = sim_job_fork(pl, next, &slots[next]);
            if (pid < 0) {
                snprintf(slots[next].err, sizeof slots[next].err, "fork: %s", strerror(errno));
                slots[next].state = SIM_JOB_FAILED;
                sim_job_report(pl, next, &slots[next], 1);
                next++, done++;
                continue;
            }
            slots[next].state = SIM_JOB_RUNNING;
            job_of[w] = next++;
            sim_workers[w] = pid;
            running++;
        }
        if (sim_stop_flag && running == 0) {
            done += pl->jobs - next; /* never started */
            next = pl->jobs;
            break;
        }
        int st;
        pid_t pid = waitpid(-1, &st, WNOHANG);
        if (pid > 0) {
            for (unsigned w = 0; w < SIM_JOBS_MAX; w++) {
                if (sim_workers[w] != pid)
                    continue;
                sim_workers[w] = 0;
                sim_slot *s = &slots[job_of[w]];
                if (s->state == SIM_JOB_RUNNING) {
                    snprintf(s->err, sizeof s->err, "worker %d %s %d", (int)pid,
                             WIFSIGNALED(st) ? "killed by signal" : "exited with status",
                             WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
                    s->state = SIM_JOB_FAILED;
                }
                sim_eta_end(&eta);
                sim_job_report(pl, job_of[w], s, 1);
                running--, done++;
            }
            continue;
        }
        if (pid < 0 && errno != EINTR && errno != ECHILD)
            break;
        if (!pl->quiet) {
            double frac = 0, sim_s = 0;
            for (uint64_t j = 0; j < next; j++) {
                frac += slots[j].state == SIM_JOB_RUNNING ? slots[j].fraction : 1;
                sim_s +=
                    slots[j].state == SIM_JOB_RUNNING ? slots[j].sim_s : slots[j].sum.sim_time_s;
            }
            char what[64];
            snprintf(what, sizeof what, " (%llu/%llu runs done, %llu running)",
                     (unsigned long long)done, (unsigned long long)pl->jobs,
                     (unsigned long long)running);
            sim_eta_show(&eta, frac / (double)pl->jobs, sim_s, what);
        }
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    sim_eta_end(&eta);
    free(job_of);
}

/* Every job here, one after the other. */
static void sim_jobs_serial(const sim_plan *pl, sim_slot *slots)
{
    sim_eta eta;
    sim_eta_init(&eta);
    for (uint64_t j = 0; j < pl->jobs && !sim_stop_flag; j++) {
        uint64_t p = j / pl->seeds;
        if (pl->sw->naxes && j % pl->seeds == 0) {
            char label[SIM_SCENARIO_STR_MAX];
            sim_sweep_label(pl->sw, p, label, sizeof label);
            printf("RUN=%llu %s\n", (unsigned long long)p, label);
            fflush(stdout);
        }
        sim_job_run(pl, j, &slots[j], 0, &eta);
        sim_eta_end(&eta);
        sim_job_report(pl, j, &slots[j], 0);
        if (slots[j].state != SIM_JOB_DONE)
            break;
    }
}

/* After the jobs: a point's combined summary and figures (seeds), the
 * sweep rows. Returns 0, or 1 on an output error. */
static int sim_points_write(const sim_plan *pl, const sim_slot *slots)
{
    char err[1024];
    int bad = 0;
    sim_sweep_csv csv;
    int csv_open = 0;
    if (pl->sw->naxes) {
        int rc = pl->seeds > 1 ? sim_sweep_csv_open_stats(&csv, pl->dir, pl->sw, err, sizeof err)
                               : sim_sweep_csv_open(&csv, pl->dir, pl->sw, err, sizeof err);
        if (rc) {
            fprintf(stderr, "murmur sim: %s\n", err);
            return 1;
        }
        csv_open = 1;
    }
    sim_summary *runs = malloc(pl->seeds * sizeof *runs);
    if (!runs) {
        fprintf(stderr, "murmur sim: out of memory\n");
        bad = 1;
    }
    for (uint64_t p = 0; runs && p < pl->points; p++) {
        size_t n = 0;
        for (uint64_t k = 0; k < pl->seeds; k++)
            if (slots[p * pl->seeds + k].state == SIM_JOB_DONE)
                runs[n++] = slots[p * pl->seeds + k].sum;
        if (n == 0)
            continue; /* not run (interrupted before it) or failed */
        if (pl->seeds > 1) {
            char pdir[SIM_OUTPUT_PATH_MAX];
            (void)sim_point_dir(pl, p, pdir, sizeof pdir);
            if (sim_summary_write_stats_file(runs, n, pdir, err, sizeof err) != 0) {
                fprintf(stderr, "murmur sim: %s\n", err);
                bad = 1;
            } else if (pl->plot && sim_plot_dir(pdir, err, sizeof err) != 0) {
                fprintf(stderr, "murmur sim: plots: %s\n", err);
                bad = 1;
            }
        }
        if (csv_open && (pl->seeds > 1 ? sim_sweep_csv_row_stats(&csv, pl->sw, p, runs, n)
                                       : sim_sweep_csv_row(&csv, pl->sw, p, &runs[0])) != 0) {
            fprintf(stderr, "murmur sim: %s: write error\n", csv.path);
            bad = 1;
        }
    }
    free(runs);
    if (csv_open && sim_sweep_csv_close(&csv, err, sizeof err) != 0) {
        fprintf(stderr, "murmur sim: %s\n", err);
        bad = 1;
    }
    return bad;
}

static unsigned sim_default_jobs(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > (long)SIM_JOBS_MAX ? SIM_JOBS_MAX : (unsigned)n;
}

/* --schedule: a murmur chaos schedule as faults.event lines (members are
 * agents by index); faults without a simulator counterpart are named. */
static chaos_sched sim_chaos;
static int sim_add_chaos_schedule(sim_scenario *sc, const char *file, char *err, size_t errlen)
{
    chaos_sched *s = &sim_chaos;
    if (chaos_sched_load(s, file, (int)sc->run.agents, err, errlen))
        return -1;
    size_t mapped = 0;
    for (size_t i = 0; i < s->n; i++) {
        char line[300], set[320];
        if (!chaos_event_sim_line(&s->ev[i], line, sizeof line)) {
            fprintf(stderr,
                    "murmur sim: --schedule: %s at %g s has no simulator counterpart; "
                    "skipped\n",
                    chaos_action_names[s->ev[i].action], s->ev[i].at_s);
            continue;
        }
        snprintf(set, sizeof set, "faults.event=%s", line);
        if (sim_scenario_set(sc, set, err, errlen) != 0)
            return -1;
        mapped++;
    }
    fprintf(stderr, "murmur sim: --schedule %s: %zu of %zu faults\n", file, mapped, s->n);
    return 0;
}

int cmd_sim(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "plot"))
        return cmd_sim_plot(argc - 1, argv + 1);
    const char *path = NULL, *out = NULL, *trace_path = NULL, *chaos_file = NULL;
    const char *sets[SIM_CLI_ARGS_MAX], *sweeps[SIM_CLI_ARGS_MAX];
    int nsets = 0, nsweeps = 0, plot = 0, quiet = 0, verbose = 0, allow_div = 0;
    unsigned long long soak = 0, soak_seed = 1;
    uint64_t seeds = 1;
    unsigned jobs = 0;
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
        case SIM_F_ALLOW_DIV:
            allow_div = 1;
            break;
        case SIM_F_TRACE:
            trace_path = v;
            break;
        case SIM_F_SEEDS:
            if (!common_parse_u64(v, &x) || x < 1 || x > SIM_SEEDS_MAX) {
                fprintf(stderr, "murmur sim: --seeds: '%s' is not a number of seeds 1..%u\n", v,
                        SIM_SEEDS_MAX);
                return 2;
            }
            seeds = x;
            break;
        case SIM_F_JOBS:
            if (!common_parse_u64(v, &x) || x < 1 || x > SIM_JOBS_MAX) {
                fprintf(stderr, "murmur sim: --jobs: '%s' is not a number of processes 1..%u\n", v,
                        SIM_JOBS_MAX);
                return 2;
            }
            jobs = (unsigned)x;
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
        case SIM_F_SCHEDULE:
            chaos_file = v;
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
        if (path || nsets || nsweeps || out || plot || seeds > 1 || trace_path) {
            fprintf(stderr, "murmur sim: --soak draws its own scenarios: no scenario file, "
                            "--out, --set, --sweep, --seeds, --trace or --plot\n");
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
    sim_slot *slots = NULL;
    size_t slots_len = 0;
    FILE *trace = NULL;
    char err[1024];
    int status = 2;
    if (!base || !sc || !sw) {
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
    if (chaos_file && sim_add_chaos_schedule(base, chaos_file, err, sizeof err) != 0) {
        fprintf(stderr, "murmur sim: --schedule %s\n", err);
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
    if (runs * seeds > SIM_SWEEP_RUNS_MAX) {
        fprintf(stderr, "murmur sim: %llu points x %llu seeds: more than %u runs\n",
                (unsigned long long)runs, (unsigned long long)seeds, SIM_SWEEP_RUNS_MAX);
        goto done;
    }
    if (trace_path && runs * seeds != 1) {
        fprintf(stderr, "murmur sim: --trace exports one run: not with --sweep or --seeds "
                        "(--set the point and run.seed to trace one of them)\n");
        goto done;
    }
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
    if (trace_path && !(trace = fopen(trace_path, "w"))) {
        fprintf(stderr, "murmur sim: --trace: cannot create %s: %s\n", trace_path, strerror(errno));
        goto done;
    }
    if (trace)
        fputs(SIM_TRACE_HEADER "\n", trace);
    const char *name = strrchr(path, '/');
    sim_plan pl = {.base = base,
                   .sw = sw,
                   .dir = dir,
                   .scenario_name = name ? name + 1 : path,
                   .points = runs,
                   .seeds = seeds,
                   .jobs = runs * seeds,
                   .quiet = quiet,
                   .plot = base->output.plot,
                   .trace = trace,
                   .chaos = chaos_file ? &sim_chaos : NULL};
    if (!jobs)
        jobs = sim_default_jobs();
    if (jobs > pl.jobs)
        jobs = (unsigned)pl.jobs;
    slots_len = pl.jobs * sizeof *slots;
    slots = mmap(NULL, slots_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (slots == MAP_FAILED) {
        slots = NULL;
        fprintf(stderr, "murmur sim: cannot map %zu bytes for the runs' summaries\n", slots_len);
        goto done;
    }
    if (pl.seeds > 1 || pl.sw->naxes) {
        /* the directory exists even when every run is interrupted early */
        if (sim_mkdirs(dir, err, sizeof err) != 0) {
            fprintf(stderr, "murmur sim: %s\n", err);
            goto done;
        }
    }
    sim_stop_flag = 0;
    sim_signals = 0;
    sim_signals_install(0);
    if (jobs > 1)
        sim_jobs_parallel(&pl, slots, jobs);
    else
        sim_jobs_serial(&pl, slots);
    int bad = sim_points_write(&pl, slots);
    int failed = 0, diverged = 0, interrupted = sim_stop_flag != 0;
    int verdict_fail = 0;
    for (uint64_t j = 0; j < pl.jobs; j++) {
        verdict_fail |= slots[j].state == SIM_JOB_DONE && slots[j].verdict_fail;
        failed |= slots[j].state == SIM_JOB_FAILED;
        diverged |= slots[j].state == SIM_JOB_DONE && slots[j].sum.diverged;
        interrupted |= slots[j].state == SIM_JOB_DONE && slots[j].sum.interrupted;
    }
    if (trace) {
        if (slots[0].state == SIM_JOB_DONE)
            fprintf(trace, "# trace_hash %016llx\n", (unsigned long long)slots[0].sum.trace_hash);
        int werr = ferror(trace);
        werr |= fclose(trace) != 0;
        trace = NULL;
        if (werr) {
            fprintf(stderr, "murmur sim: --trace: write error on %s\n", trace_path);
            bad = 1;
        }
    }
    sim_signals_restore();
    if (interrupted)
        status = SIM_EXIT_INTERRUPTED;
    else if (failed || bad || verdict_fail)
        status = 1;
    else if (diverged && !allow_div)
        status = SIM_EXIT_DIVERGED;
    else
        status = 0;
done:
    if (trace)
        fclose(trace);
    if (slots)
        munmap(slots, slots_len);
    free(base);
    free(sc);
    free(sw);
    return status;
}
