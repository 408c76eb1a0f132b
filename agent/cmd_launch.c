/* murmur launch — start a whole cluster from one command.
 *
 *   murmur launch -n N [--hosts a:2,b:4] [--set k=v]... [OPTIONS]
 *
 * Without --hosts, N agents run on this host; with --hosts, one agent per
 * slot, over ssh (or the remote shell of --rsh), as `horovodrun -H` does.
 * The launcher chooses what a user would otherwise choose by hand
 * (docs/DEPLOY.md, "murmur launch"):
 *
 * - DIR (--dir, default murmur-launch) holds the cluster: DIR/network.key
 *   (made once, reused), DIR/all (the `murmur shard` split, or --shard-dir),
 *   DIR/aI (agent I's data directory: key pair, network key, shards,
 *   checkpoint) and DIR/aI.log (its log). A second launch on the same DIR
 *   reuses the keys and resumes from the checkpoints.
 * - Shards: every shard starts on r agents (r = shards.replication, at
 *   most N): shard s on agents s, s+1, ..., s+r-1 (mod N). Placement then
 *   moves replicas as it wants, peer to peer.
 * - Ports: agent I listens on HOST:PORT+k and serves /metrics and /status
 *   on HOST:PORT+SLOTS+k, k its slot on its host (--port; on this host the
 *   first free block from 7000 by default). Agent 1 (and 2) are the seeds.
 * - Progress: one table every --interval seconds from each agent's /status.
 * - Ctrl-C (SIGINT) or SIGTERM: every agent is asked to leave gracefully
 *   (SIGTERM: LEAVE, final checkpoint); a second Ctrl-C kills them.
 * - --duration S stops the cluster the same way after S seconds; --fault
 *   T:kill|stop|restart:I acts on agent I at T seconds (fault injection;
 *   make demo kills and restarts agent 3).
 * - At the end, a summary (final step, accuracy, bytes, time alive, exit
 *   status); the launcher's exit status is the worst agent's (a signal
 *   counts as 128 + its number; agents killed by --fault and not restarted
 *   are left out), 2 for a usage error, 1 if the cluster could not start.
 *
 * Remote agents: for host H, every remote step is one command of the
 * remote shell (`ssh H 'sh command'`): provisioning (mkdir, the network key
 * on stdin, `murmur keygen`, the slot's shards as a tar stream on stdin),
 * then `echo $$ > DIR/aI/agent.pid; exec murmur agent ...`, whose output
 * becomes DIR/aI.log here; stopping is `kill -TERM $(cat DIR/aI/agent.pid)`.
 * The remote binary and directory default to this binary's absolute path
 * and DIR's (the same layout on every host, as Horovod and MPI assume).
 *
 * Processes: every agent (or its ssh client) runs in its own process group
 * (a terminal's Ctrl-C reaches the launcher only, which forwards it) with
 * PR_SET_PDEATHSIG, so local agents get SIGTERM if the launcher dies.
 */
#include "agent/commands.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sodium.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/config.h"
#include "agent/keys.h"
#include "agent/metrics.h"
#include "common/cli.h"
#include "common/fs.h"
#include "common/json.h"
#include "common/text.h"
#include "model/shardfile.h"
#include "net/net.h"

/* Most agents one launch starts, most hosts, most --set and --fault. */
#define LAUNCH_AGENTS_MAX 256
#define LAUNCH_HOSTS_MAX  64
#define LAUNCH_SETS_MAX   128
#define LAUNCH_FAULTS_MAX 64
#define LAUNCH_PATH_MAX   1024                    /* a directory given by the user */
#define LAUNCH_FILE_MAX   (LAUNCH_PATH_MAX + 160) /* a path derived from one */
#define LAUNCH_ARG_MAX    (LAUNCH_FILE_MAX + 64)  /* one argument of an agent */
#define LAUNCH_CMD_MAX    16384
/* Default first port, and how far the search for a free block goes. */
#define LAUNCH_PORT_DEFAULT 7000
#define LAUNCH_PORT_TRIES   64
/* Deadline of one /status poll: an agent answers from memory in well under
 * a millisecond; 500 ms keeps a table of 64 unreachable agents under a
 * minute. */
#define LAUNCH_POLL_MS 500
/* After asking agents to leave: how long before they are killed. A leave
 * and a final checkpoint take well under a second; 30 s covers a large
 * model's checkpoint on a slow disk. */
#define LAUNCH_STOP_S_DEFAULT 30

typedef enum { FAULT_KILL, FAULT_STOP, FAULT_RESTART } fault_kind;

typedef struct fault {
    double at_s;
    fault_kind kind;
    int agent; /* 0-based */
    bool done;
} fault;

typedef struct slot {
    int index;           /* 1-based agent number */
    const char *host;    /* NULL: this host */
    char addr_host[256]; /* the address peers dial */
    unsigned port, metrics_port;
    char dir[LAUNCH_FILE_MAX]; /* its data directory (on its host) */
    char log[LAUNCH_FILE_MAX];
    pid_t pid;         /* the agent, or its remote-shell client; 0 = not running */
    int status;        /* last exit status (shell style), -1 = never exited */
    bool fault_killed; /* its last run was ended by --fault kill */
    bool stopping;     /* asked to leave */
    double started_s;  /* when the current run started */
    double alive_s;    /* time alive in earlier runs */
    char notes[160];
} slot;

typedef struct launch {
    int n;
    slot slots[LAUNCH_AGENTS_MAX];
    char dir[LAUNCH_PATH_MAX];        /* local, absolute */
    char remote_dir[LAUNCH_PATH_MAX]; /* the same layout on remote hosts */
    char self[LAUNCH_PATH_MAX];       /* this binary */
    const char *remote_bin;
    char *rsh[16]; /* the remote shell, split at blanks */
    int rsh_argc;
    char rsh_buf[256];
    bool remote;
    const char *sets[LAUNCH_SETS_MAX];
    int nsets;
    fault faults[LAUNCH_FAULTS_MAX];
    int nfaults;
    double interval_s, duration_s, stop_s;
    bool quiet, dry_run;
    bool test_csv;                  /* the split holds test.csv: every agent evaluates on it */
    char data_abs[LAUNCH_FILE_MAX]; /* --data, absolute, when it is a CSV file */
    int target_reached; /* an agent that exited on run.target_accuracy (1-based), or 0 */
    struct timespec t0;
} launch;

static volatile sig_atomic_t launch_signals;

static void on_signal(int sig)
{
    (void)sig;
    launch_signals++;
}

static double elapsed_s(const launch *L)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - L->t0.tv_sec) + (double)(t.tv_nsec - L->t0.tv_nsec) / 1e9;
}

/* ---- shell quoting and child processes ---- */

/* Append s to buf (cap) in single quotes, safe for any shell. */
static void sh_quote(char *buf, size_t cap, const char *s)
{
    size_t at = strlen(buf);
    if (at + 1 < cap)
        buf[at++] = '\'';
    for (; *s && at + 5 < cap; s++) {
        if (*s == '\'') {
            memcpy(buf + at, "'\\''", 4);
            at += 4;
        } else {
            buf[at++] = *s;
        }
    }
    if (at + 1 < cap)
        buf[at++] = '\'';
    buf[at] = '\0';
}

static void sh_append(char *buf, size_t cap, const char *s)
{
    size_t at = strlen(buf);
    snprintf(buf + at, cap - at, "%s", s);
}

/* In a child: own process group, SIGTERM when the launcher dies, default
 * signal handlers. */
static void child_setup(void)
{
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
}

/* Run argv to completion with stdin from in_fd (-1: /dev/null), stdout to
 * /dev/null when quiet. Returns the exit status (shell style) or -1. */
static int run_wait(char *const argv[], int in_fd, bool quiet)
{
    pid_t p = fork();
    if (p < 0)
        return -1;
    if (p == 0) {
        child_setup();
        int null = open("/dev/null", O_RDWR);
        dup2(in_fd >= 0 ? in_fd : null, 0);
        if (quiet)
            dup2(null, 1);
        execvp(argv[0], argv);
        fprintf(stderr, "murmur launch: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    int st;
    while (waitpid(p, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* argv of the remote shell for host h running the shell command cmd. */
static void rsh_argv(const launch *L, const char *host, const char *cmd, char **argv)
{
    int k = 0;
    for (int i = 0; i < L->rsh_argc; i++)
        argv[k++] = L->rsh[i];
    argv[k++] = (char *)host;
    argv[k++] = (char *)cmd;
    argv[k] = NULL;
}

/* Run the shell command cmd on host (stdin from in_fd). */
static int remote_run(const launch *L, const char *host, const char *cmd, int in_fd)
{
    char *argv[20];
    rsh_argv(L, host, cmd, argv);
    if (L->dry_run) {
        printf("launch: %s:", host);
        for (char **a = argv; *a; a++)
            printf(" %s", *a);
        printf("\n");
        return 0;
    }
    return run_wait(argv, in_fd, true);
}

/* ---- setup: keys, shards, ports ---- */

/* Is TCP port p free on 127.0.0.1? */
static bool port_free(unsigned p)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0)
        return false;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)p)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    bool ok = bind(s, (struct sockaddr *)&a, sizeof a) == 0;
    close(s);
    return ok;
}

static int copy_file(const char *from, const char *to, mode_t mode)
{
    int in = open(from, O_RDONLY);
    if (in < 0)
        return -1;
    char tmp[LAUNCH_PATH_MAX + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", to);
    int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, mode);
    if (out < 0) {
        close(in);
        return -1;
    }
    char buf[65536];
    ssize_t n;
    int rc = 0;
    while ((n = read(in, buf, sizeof buf)) > 0)
        if (write(out, buf, (size_t)n) != n) {
            rc = -1;
            break;
        }
    if (n < 0)
        rc = -1;
    close(in);
    if (close(out) || rc || rename(tmp, to)) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* DIR/network.key: made once, then reused by every launch on DIR. */
static int network_key(const launch *L, char *path, size_t cap)
{
    snprintf(path, cap, "%s/network.key", L->dir);
    if (access(path, R_OK) == 0)
        return 0;
    uint8_t key[NET_NETWORK_KEY_SIZE];
    char msg[512];
    randombytes_buf(key, sizeof key);
    int rc = agent_keys_write_network(path, key, 0, msg, sizeof msg);
    sodium_memzero(key, sizeof key);
    if (rc)
        fprintf(stderr, "murmur launch: %s\n", msg);
    return rc ? -1 : 0;
}

/* The shard names of DIR/all's catalog, in index order. */
static int read_catalog(const char *all, char names[][64], int max, int *count)
{
    char path[LAUNCH_FILE_MAX + 16];
    snprintf(path, sizeof path, "%s/catalog", all);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "murmur launch: %s: %s\n", path, strerror(errno));
        return -1;
    }
    char line[512];
    int n = 0, total = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#')
            sscanf(line, "# murmur catalog v1 shards=%d", &total);
        else if (line[0] && line[0] != '\n')
            n++;
    }
    fclose(f);
    if (n == 0 || n > max || (total && total != n)) {
        fprintf(stderr, "murmur launch: %s: %d shards listed; not a murmur shard catalog?\n", path,
                n);
        return -1;
    }
    for (int s = 0; s < n; s++)
        snprintf(names[s], 64, "shard-%03d-of-%03d.msh", s, n);
    *count = n;
    return 0;
}

/* Run `murmur shard` into DIR/all unless --shard-dir gave a split. */
static int make_shards(const launch *L, const char *data, unsigned shards, const char *shard_dir,
                       char *all, size_t cap)
{
    if (shard_dir) {
        snprintf(all, cap, "%s", shard_dir);
        return 0;
    }
    snprintf(all, cap, "%s/all", L->dir);
    char sh[16];
    snprintf(sh, sizeof sh, "%u", shards);
    char *argv[] = {(char *)L->self, "shard", "--data", (char *)data, "--shards", sh,
                    "--out",         all,     NULL};
    if (!L->quiet)
        printf("launch: murmur shard --data %s --shards %u --out %s\n", data, shards, all);
    int rc = run_wait(argv, -1, true);
    if (rc)
        fprintf(stderr, "murmur launch: murmur shard failed (status %d); see above\n", rc);
    return rc ? -1 : 0;
}

/* Agent i's share of the shards: shard s goes to agents s..s+r-1 mod n. */
static bool holds(int s, int agent0, int n, int r)
{
    return ((agent0 - s % n) + n) % n < r;
}

/* Provision a local slot: directories, network key, key pair, shards. */
static int provision_local(const launch *L, slot *sl, const char *netkey, const char *all,
                           char names[][64], int nshards, int r)
{
    char path[LAUNCH_FILE_MAX + 64], msg[512];
    snprintf(path, sizeof path, "%s/shards", sl->dir);
    if (common_mkdirs(path, 0700, msg, sizeof msg)) {
        fprintf(stderr, "murmur launch: %s\n", msg);
        return -1;
    }
    snprintf(path, sizeof path, "%s/network.key", sl->dir);
    if (copy_file(netkey, path, 0600)) {
        fprintf(stderr, "murmur launch: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    snprintf(path, sizeof path, "%s/%s", sl->dir, AGENT_KEYS_SECRET_NAME);
    if (access(path, F_OK) != 0) {
        net_identity id;
        if (net_identity_generate(&id) != NET_OK ||
            agent_keys_write_identity(sl->dir, &id, 0, msg, sizeof msg)) {
            net_identity_wipe(&id);
            fprintf(stderr, "murmur launch: %s\n", msg);
            return -1;
        }
        net_identity_wipe(&id);
    }
    char from[LAUNCH_FILE_MAX + 64];
    snprintf(from, sizeof from, "%s/catalog", all);
    snprintf(path, sizeof path, "%s/shards/catalog", sl->dir);
    if (copy_file(from, path, 0644)) {
        fprintf(stderr, "murmur launch: cannot copy %s to %s: %s\n", from, path, strerror(errno));
        return -1;
    }
    if (L->test_csv) {
        snprintf(from, sizeof from, "%s/test.csv", all);
        snprintf(path, sizeof path, "%s/test.csv", sl->dir);
        if (copy_file(from, path, 0644)) {
            fprintf(stderr, "murmur launch: cannot copy %s to %s: %s\n", from, path,
                    strerror(errno));
            return -1;
        }
    }
    for (int s = 0; s < nshards; s++) {
        if (!holds(s, sl->index - 1, L->n, r))
            continue;
        snprintf(from, sizeof from, "%s/%s", all, names[s]);
        snprintf(path, sizeof path, "%s/shards/%s", sl->dir, names[s]);
        if (access(path, F_OK) == 0)
            continue;
        if (link(from, path) && copy_file(from, path, 0644)) {
            fprintf(stderr, "murmur launch: cannot copy %s to %s: %s\n", from, path,
                    strerror(errno));
            return -1;
        }
    }
    return 0;
}

/* Provision a remote slot with three commands of the remote shell. */
static int provision_remote(const launch *L, slot *sl, const char *netkey, const char *all,
                            char names[][64], int nshards, int r)
{
    char cmd[LAUNCH_CMD_MAX] = "umask 077 && mkdir -p ";
    char shards[LAUNCH_FILE_MAX + 64];
    snprintf(shards, sizeof shards, "%s/shards", sl->dir);
    sh_quote(cmd, sizeof cmd, shards);
    sh_append(cmd, sizeof cmd, " && cat > ");
    char nk[LAUNCH_FILE_MAX + 64];
    snprintf(nk, sizeof nk, "%s/network.key", sl->dir);
    sh_quote(cmd, sizeof cmd, nk);
    int fd = L->dry_run ? -1 : open(netkey, O_RDONLY);
    int rc = fd < 0 && !L->dry_run ? -1 : remote_run(L, sl->host, cmd, fd);
    if (fd >= 0)
        close(fd);
    if (rc) {
        fprintf(stderr, "murmur launch: %s: cannot write the network key (status %d)\n", sl->host,
                rc);
        return -1;
    }
    snprintf(cmd, sizeof cmd, "test -f ");
    char key[LAUNCH_FILE_MAX + 64];
    snprintf(key, sizeof key, "%s/%s", sl->dir, AGENT_KEYS_SECRET_NAME);
    sh_quote(cmd, sizeof cmd, key);
    sh_append(cmd, sizeof cmd, " || ");
    sh_quote(cmd, sizeof cmd, L->remote_bin);
    sh_append(cmd, sizeof cmd, " keygen --out ");
    sh_quote(cmd, sizeof cmd, sl->dir);
    if ((rc = remote_run(L, sl->host, cmd, -1))) {
        fprintf(stderr, "murmur launch: %s: murmur keygen failed (status %d); is %s there?\n",
                sl->host, rc, L->remote_bin);
        return -1;
    }
    /* the catalog and the slot's shards as one tar stream */
    char *tar[LAUNCH_AGENTS_MAX + 8];
    int k = 0;
    tar[k++] = "tar";
    tar[k++] = "-cf";
    tar[k++] = "-";
    tar[k++] = "-C";
    tar[k++] = (char *)all;
    tar[k++] = "catalog";
    if (L->test_csv)
        tar[k++] = "test.csv";
    for (int s = 0; s < nshards && k < LAUNCH_AGENTS_MAX + 6; s++)
        if (holds(s, sl->index - 1, L->n, r))
            tar[k++] = names[s];
    tar[k] = NULL;
    snprintf(cmd, sizeof cmd, "tar -xf - -C ");
    sh_quote(cmd, sizeof cmd, shards);
    if (L->dry_run) {
        printf("launch: tar -cf - -C %s catalog ... |", all);
        return remote_run(L, sl->host, cmd, -1);
    }
    int pfd[2];
    if (pipe(pfd))
        return -1;
    pid_t t = fork();
    if (t == 0) {
        child_setup();
        dup2(pfd[1], 1);
        close(pfd[0]);
        close(pfd[1]);
        execvp("tar", tar);
        _exit(127);
    }
    close(pfd[1]);
    rc = remote_run(L, sl->host, cmd, pfd[0]);
    close(pfd[0]);
    int st = 0;
    if (t > 0)
        waitpid(t, &st, 0);
    if (rc || t < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) {
        fprintf(stderr, "murmur launch: %s: cannot copy the shards (status %d)\n", sl->host, rc);
        return -1;
    }
    return 0;
}

/* ---- agents ---- */

/* The `murmur agent` arguments of slot sl. Seeds: agents 1 and 2 when they
 * are running (agent 1's first start has none: it founds the cluster; a
 * restarted agent 1 joins through agent 2). */
static int agent_args(const launch *L, const slot *sl, char **argv, char bufs[][LAUNCH_ARG_MAX])
{
    int k = 0, b = 0;
    argv[k++] = "agent";
    argv[k++] = "--data-dir";
    argv[k++] = (char *)sl->dir;
    snprintf(bufs[b], LAUNCH_ARG_MAX, "%s:%u", sl->addr_host, sl->port);
    argv[k++] = "--listen";
    argv[k++] = bufs[b++];
    snprintf(bufs[b], LAUNCH_ARG_MAX, "%s:%u", sl->addr_host, sl->metrics_port);
    argv[k++] = "--metrics";
    argv[k++] = bufs[b++];
    for (int s = 0; s < 2 && s < L->n; s++) {
        const slot *seed = &L->slots[s];
        if (seed == sl || (!seed->pid && !L->dry_run) || (L->dry_run && seed->index > sl->index))
            continue;
        snprintf(bufs[b], LAUNCH_ARG_MAX, "%s:%u", seed->addr_host, seed->port);
        argv[k++] = "--seed";
        argv[k++] = bufs[b++];
    }
    if (L->test_csv) { /* the split's held-out rows; the user's --set comes later and wins */
        snprintf(bufs[b], LAUNCH_ARG_MAX, "model.test_dataset=%s/%s", sl->dir,
                 sl->host ? "shards/test.csv" : "test.csv");
        argv[k++] = "--set";
        argv[k++] = bufs[b++];
        if (L->data_abs[0]) {
            snprintf(bufs[b], LAUNCH_ARG_MAX, "model.dataset=%s", L->data_abs);
            argv[k++] = "--set";
            argv[k++] = bufs[b++];
        }
    }
    for (int i = 0; i < L->nsets; i++) {
        argv[k++] = "--set";
        argv[k++] = (char *)L->sets[i];
    }
    argv[k] = NULL;
    return k;
}

static int start_agent(launch *L, slot *sl)
{
    char *args[2 * LAUNCH_SETS_MAX + 24];
    char bufs[6][LAUNCH_ARG_MAX];
    agent_args(L, sl, args, bufs);
    char cmd[LAUNCH_CMD_MAX] = "";
    char *argv[2 * LAUNCH_SETS_MAX + 32];
    if (sl->host) {
        snprintf(cmd, sizeof cmd, "echo $$ > ");
        char pidfile[LAUNCH_FILE_MAX + 64];
        snprintf(pidfile, sizeof pidfile, "%s/agent.pid", sl->dir);
        sh_quote(cmd, sizeof cmd, pidfile);
        sh_append(cmd, sizeof cmd, " && exec ");
        sh_quote(cmd, sizeof cmd, L->remote_bin);
        for (char **a = args; *a; a++) {
            sh_append(cmd, sizeof cmd, " ");
            sh_quote(cmd, sizeof cmd, *a);
        }
        rsh_argv(L, sl->host, cmd, argv);
    } else {
        argv[0] = "murmur";
        int k = 1;
        for (char **a = args; *a; a++)
            argv[k++] = *a;
        argv[k] = NULL;
    }
    if (L->dry_run) {
        printf("launch: a%d:", sl->index);
        for (char **a = argv; *a; a++)
            printf(" %s", *a);
        printf("\n");
        return 0;
    }
    int log = open(sl->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (log < 0) {
        fprintf(stderr, "murmur launch: cannot open %s: %s\n", sl->log, strerror(errno));
        return -1;
    }
    pid_t p = fork();
    if (p < 0) {
        close(log);
        return -1;
    }
    if (p == 0) {
        child_setup();
        int null = open("/dev/null", O_RDONLY);
        dup2(null, 0);
        dup2(log, 1);
        dup2(log, 2);
        if (sl->host)
            execvp(argv[0], argv);
        else
            execv(L->self, argv);
        fprintf(stderr, "murmur launch: cannot run %s: %s\n", sl->host ? argv[0] : L->self,
                strerror(errno));
        _exit(127);
    }
    close(log);
    sl->pid = p;
    sl->stopping = false;
    sl->fault_killed = false;
    sl->started_s = elapsed_s(L);
    return 0;
}

/* Send sig to slot sl's agent (remote: through the remote shell). */
static void signal_agent(launch *L, slot *sl, int sig)
{
    if (!sl->pid)
        return;
    if (!sl->host) {
        kill(sl->pid, sig);
        return;
    }
    char cmd[LAUNCH_CMD_MAX];
    snprintf(cmd, sizeof cmd, "kill -%s \"$(cat ", sig == SIGKILL ? "KILL" : "TERM");
    char pidfile[LAUNCH_FILE_MAX + 64];
    snprintf(pidfile, sizeof pidfile, "%s/agent.pid", sl->dir);
    sh_quote(cmd, sizeof cmd, pidfile);
    sh_append(cmd, sizeof cmd, ")\" 2>/dev/null");
    remote_run(L, sl->host, cmd, -1);
    if (sig == SIGKILL)
        kill(sl->pid, SIGKILL); /* the remote-shell client too */
}

/* How bad an exit status is, for the launcher's own: a failure (1, 2, a
 * signal) is worse than a job that ended by itself ([run]: 3, 4, 5), which
 * is worse than a stop on request (0). */
static int status_rank(int st)
{
    if (st <= 0)
        return 0;
    if (st >= AGENT_EXIT_MAX_STEPS && st <= AGENT_EXIT_TARGET_ACCURACY)
        return 1;
    return 2;
}

/* Collect exited agents. An agent that reached run.target_accuracy ends
 * the job for all: the others are asked to leave. */
static void reap(launch *L)
{
    for (int i = 0; i < L->n; i++) {
        slot *sl = &L->slots[i];
        int st;
        if (!sl->pid || waitpid(sl->pid, &st, WNOHANG) != sl->pid)
            continue;
        sl->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        sl->pid = 0;
        sl->alive_s += elapsed_s(L) - sl->started_s;
        if (!sl->stopping && !sl->fault_killed && !L->quiet)
            printf("launch: t=%.0fs agent %d exited with status %d (log %s)\n", elapsed_s(L),
                   sl->index, sl->status, sl->log);
        if (sl->status == AGENT_EXIT_TARGET_ACCURACY && !sl->stopping)
            L->target_reached = sl->index;
    }
}

static int running(const launch *L)
{
    int n = 0;
    for (int i = 0; i < L->n; i++)
        n += L->slots[i].pid != 0;
    return n;
}

/* Ask every agent to leave; kill those still there after stop_s. */
static void stop_all(launch *L, bool force)
{
    for (int i = 0; i < L->n; i++)
        if (L->slots[i].pid) {
            L->slots[i].stopping = true;
            signal_agent(L, &L->slots[i], force ? SIGKILL : SIGTERM);
        }
    double until = elapsed_s(L) + (force ? 5 : L->stop_s);
    int seen = launch_signals;
    while (running(L) && elapsed_s(L) < until) {
        usleep(100000);
        reap(L);
        if (launch_signals != seen && !force) { /* a second Ctrl-C */
            printf("launch: killing every agent\n");
            stop_all(L, true);
            return;
        }
    }
    if (running(L) && !force) {
        printf("launch: agents still running after %.0f s: killing them\n", L->stop_s);
        stop_all(L, true);
    }
}

static void do_fault(launch *L, fault *f)
{
    slot *sl = &L->slots[f->agent];
    f->done = true;
    const char *what = f->kind == FAULT_KILL   ? "SIGKILL"
                       : f->kind == FAULT_STOP ? "stop"
                                               : "restart";
    if (!L->quiet)
        printf("launch: t=%.0fs --fault %s agent %d\n", elapsed_s(L), what, sl->index);
    size_t at = strlen(sl->notes);
    snprintf(sl->notes + at, sizeof sl->notes - at, "%s%s at %.0fs", at ? ", " : "", what,
             elapsed_s(L));
    if (f->kind == FAULT_RESTART) {
        if (!sl->pid)
            start_agent(L, sl);
        return;
    }
    if (!sl->pid)
        return;
    sl->fault_killed = f->kind == FAULT_KILL;
    sl->stopping = f->kind == FAULT_STOP;
    signal_agent(L, sl, f->kind == FAULT_KILL ? SIGKILL : SIGTERM);
}

/* ---- the table and the summary ---- */

static void print_table(launch *L)
{
    printf("%-8s %-5s %-21s %-8s %8s %8s %9s %6s %9s\n", "", "agent", "address", "state", "step",
           "loss", "accuracy", "peers", "MB sent");
    for (int i = 0; i < L->n; i++) {
        slot *sl = &L->slots[i];
        char addr[300];
        snprintf(addr, sizeof addr, "%s:%u", sl->addr_host, sl->port);
        if (!sl->pid) {
            printf("%-8s a%-4d %-21s %-8s\n", "", sl->index, addr, "(down)");
            continue;
        }
        char mp[300], *body = NULL, err[256];
        size_t len;
        snprintf(mp, sizeof mp, "%s:%u", sl->addr_host, sl->metrics_port);
        if (agent_http_get(mp, "/status", LAUNCH_POLL_MS, &body, &len, NULL, err, sizeof err)) {
            printf("%-8s a%-4d %-21s %-8s\n", "", sl->index, addr, "(starting)");
            continue;
        }
        char state[32], step[32], loss[32], acc[32], peers[32], bytes[32];
        common_json_get(body, "state", state, sizeof state);
        common_json_get(body, "step", step, sizeof step);
        common_json_get(body, "loss", loss, sizeof loss);
        common_json_get(body, "accuracy", acc, sizeof acc);
        common_json_get(body, "peers", peers, sizeof peers);
        common_json_get(body, "bytes_sent", bytes, sizeof bytes);
        free(body);
        char l[24] = "-", a[24] = "-";
        double x;
        if (common_parse_f64(loss, &x))
            snprintf(l, sizeof l, "%.4f", x);
        if (common_parse_f64(acc, &x))
            snprintf(a, sizeof a, "%.4f", x);
        printf("%-8s a%-4d %-21s %-8s %8s %8s %9s %6s %9.1f\n", "", sl->index, addr,
               state[0] ? state : "-", step, l, a, peers, strtod(bytes, NULL) / 1e6);
    }
    fflush(stdout);
}

/* Field key of the last event=progress line of a log ("" if none). */
static void last_progress(const char *log, const char *key, char *out, size_t cap)
{
    out[0] = '\0';
    FILE *f = fopen(log, "r");
    if (!f)
        return;
    char line[2048], last[2048] = "";
    while (fgets(line, sizeof line, f))
        if (strstr(line, " event=progress "))
            memcpy(last, line, sizeof last);
    fclose(f);
    char pat[64];
    snprintf(pat, sizeof pat, " %s=", key);
    const char *p = strstr(last, pat);
    if (!p)
        return;
    p += strlen(pat);
    size_t n = strcspn(p, " \n");
    snprintf(out, cap, "%.*s", (int)n, p);
}

static int summary(launch *L)
{
    double total = elapsed_s(L);
    printf("\nlaunch: summary after %.0f s (logs in %s/aI.log)\n", total, L->dir);
    printf("%-6s %8s %9s %9s %8s %6s  %s\n", "agent", "step", "accuracy", "MB sent", "alive s",
           "status", "notes");
    int worst = 0;
    for (int i = 0; i < L->n; i++) {
        slot *sl = &L->slots[i];
        char step[32], acc[32], bytes[32];
        last_progress(sl->log, "step", step, sizeof step);
        last_progress(sl->log, "accuracy", acc, sizeof acc);
        last_progress(sl->log, "bytes_sent", bytes, sizeof bytes);
        char st[16] = "-";
        if (sl->status >= 0)
            snprintf(st, sizeof st, "%d", sl->status);
        printf("a%-5d %8s %9s %9.1f %8.0f %6s  %s\n", sl->index, step[0] ? step : "-",
               acc[0] ? acc : "-", strtod(bytes, NULL) / 1e6, sl->alive_s, st,
               sl->fault_killed ? "killed by --fault (not counted)" : sl->notes);
        if (!sl->fault_killed && status_rank(sl->status) > status_rank(worst))
            worst = sl->status;
        else if (!sl->fault_killed && status_rank(sl->status) == status_rank(worst) &&
                 sl->status > worst)
            worst = sl->status;
    }
    printf("launch: exit status %d (the worst agent's)\n", worst);
    return worst;
}

/* ---- the command line ---- */

enum {
    LA_N,
    LA_HOSTS,
    LA_SET,
    LA_DIR,
    LA_DATA,
    LA_SHARDS,
    LA_SHARD_DIR,
    LA_PORT,
    LA_INTERVAL,
    LA_DURATION,
    LA_FAULT,
    LA_STOP_TIMEOUT,
    LA_RSH,
    LA_REMOTE_BIN,
    LA_REMOTE_DIR,
    LA_QUIET,
    LA_DRY_RUN,
    LA_HELP
};
static const common_flag launch_flags[] = {
    {"agents", 'n', true, LA_N, "N", "number of agents (default: every slot of --hosts)", NULL},
    {"hosts", 'H', true, LA_HOSTS, "H:S,...", "hosts and their slots (agents), over ssh", NULL},
    {"set", 0, true, LA_SET, "SECTION.KEY=VALUE", "a setting of every agent (repeatable)", NULL},
    {"dir", 0, true, LA_DIR, "DIR", "the cluster's directory (default murmur-launch)", NULL},
    {"data", 0, true, LA_DATA, "D", "data set to shard (default fashion-mnist)", NULL},
    {"shards", 0, true, LA_SHARDS, "S", "number of shards (default 8 per agent)", NULL},
    {"shard-dir", 0, true, LA_SHARD_DIR, "DIR", "use the split of `murmur shard --out DIR`", NULL},
    {"port", 0, true, LA_PORT, "P", "first port (default: the first free block from 7000)", NULL},
    {"interval", 0, true, LA_INTERVAL, "S", "seconds between two progress tables (0 = none)", NULL},
    {"duration", 0, true, LA_DURATION, "S", "stop the cluster after S seconds (0 = never)", NULL},
    {"fault", 0, true, LA_FAULT, "T:ACTION:I", "at T s, kill, stop or restart agent I", NULL},
    {"stop-timeout", 0, true, LA_STOP_TIMEOUT, "S", "seconds to leave before a kill (30)", NULL},
    {"rsh", 0, true, LA_RSH, "CMD", "remote shell for --hosts (default: ssh -o BatchMode=yes)",
     NULL},
    {"remote-bin", 0, true, LA_REMOTE_BIN, "PATH", "murmur on the hosts (default: this binary)",
     NULL},
    {"remote-dir", 0, true, LA_REMOTE_DIR, "DIR", "the cluster's directory on the hosts", NULL},
    {"quiet", 'q', false, LA_QUIET, "", "no tables or progress lines", NULL},
    {"dry-run", 0, false, LA_DRY_RUN, "", "print what would run, run nothing", NULL},
    {"help", 'h', false, LA_HELP, "", "this text", NULL},
};
#define LAUNCH_FLAGS (sizeof launch_flags / sizeof launch_flags[0])

static void launch_usage(FILE *out)
{
    common_cli cli;
    common_cli_init(&cli, "murmur launch", launch_flags, LAUNCH_FLAGS, 0, NULL);
    fprintf(out,
            "usage: murmur launch -n N [--hosts a:2,b:4] [--set SECTION.KEY=VALUE]... [OPTIONS]\n"
            "\n"
            "Start a cluster of N agents: keys, network key, ports, data directories, seeds\n"
            "and the initial shards are chosen here (docs/DEPLOY.md). Without --hosts every\n"
            "agent runs on this host; with --hosts one agent per slot, over ssh. Shows a\n"
            "progress table, forwards Ctrl-C as a graceful leave, prints a summary, and exits\n"
            "with the worst agent's status.\n\n");
    common_cli_usage(&cli, out);
}

static bool parse_seconds(const char *v, double *out)
{
    return common_parse_f64(v, out) && *out >= 0 && *out <= 1e7;
}

static int parse_fault(const char *v, fault *f, int n_max)
{
    char kind[16];
    int agent, used = 0;
    double at;
    if (sscanf(v, "%lf:%15[a-z]:%d%n", &at, kind, &agent, &used) != 3 || v[used] || at < 0)
        return -1;
    if (!strcmp(kind, "kill"))
        f->kind = FAULT_KILL;
    else if (!strcmp(kind, "stop"))
        f->kind = FAULT_STOP;
    else if (!strcmp(kind, "restart"))
        f->kind = FAULT_RESTART;
    else
        return -1;
    if (agent < 1 || agent > n_max)
        return -1;
    f->at_s = at;
    f->agent = agent - 1;
    f->done = false;
    return 0;
}

/* Settings the launcher chooses itself. */
static const char *const launch_owned[] = {
    "node.listen",           "node.advertise", "node.data_dir",
    "node.key_file",         "seeds.seed",     "metrics.listen",
    "node.network_key_file", "shards.dir",     NULL};

/* Check every --set against the agent's option table now, not N times
 * later; returns the effective shards.replication, or 0 after a message. */
static unsigned check_sets(const launch *L)
{
    static agent_config cfg;
    char err[AGENT_CONFIG_ERR_MAX];
    agent_config_defaults(&cfg);
    for (int i = 0; i < L->nsets; i++) {
        const char *eq = strchr(L->sets[i], '=');
        if (!eq) {
            fprintf(stderr, "murmur launch: --set '%s': expected section.key=value\n", L->sets[i]);
            return 0;
        }
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)(eq - L->sets[i]), L->sets[i]);
        if (common_name_index(launch_owned, name) >= 0) {
            fprintf(stderr,
                    "murmur launch: --set %s: the launcher chooses %s itself (see --port, --dir, "
                    "--hosts)\n",
                    name, name);
            return 0;
        }
        if (agent_config_set(&cfg, name, eq + 1, "--set", err, sizeof err)) {
            fprintf(stderr, "murmur launch: %s\n", err);
            return 0;
        }
    }
    return cfg.replication;
}

typedef struct host_slots {
    char name[256];
    int slots;
} host_slots;

static int parse_hosts(const char *v, host_slots *h, int *nh, int *total)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", v);
    *nh = 0;
    *total = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (*nh == LAUNCH_HOSTS_MAX)
            return -1;
        char *colon = strrchr(tok, ':');
        uint64_t s = 1;
        if (colon && colon[1] && strspn(colon + 1, "0123456789") == strlen(colon + 1)) {
            if (!common_parse_u64(colon + 1, &s) || s < 1 || s > LAUNCH_AGENTS_MAX)
                return -1;
            *colon = '\0';
        }
        if (!*tok || strlen(tok) >= sizeof h->name || strchr(tok, '\''))
            return -1;
        snprintf(h[*nh].name, sizeof h[*nh].name, "%s", tok);
        h[*nh].slots = (int)s;
        *total += (int)s;
        (*nh)++;
    }
    return *nh ? 0 : -1;
}

static int parse_args(launch *L, int argc, char **argv, host_slots *hosts, int *nhosts,
                      const char **data, unsigned *shards, const char **shard_dir, long *port)
{
    common_cli cli;
    common_cli_init(&cli, "murmur launch", launch_flags, LAUNCH_FLAGS, argc, argv);
    uint64_t u;
    int total = 0;
    const char *rsh = "ssh -o BatchMode=yes";
    const char *faults[LAUNCH_FAULTS_MAX];
    int nf = 0;
    for (int id; (id = common_cli_next(&cli)) != COMMON_CLI_END;) {
        const char *v = cli.arg;
        switch (id) {
        case LA_HELP:
            launch_usage(stdout);
            return 0;
        case LA_N:
            if (!common_parse_u64(v, &u) || u < 1 || u > LAUNCH_AGENTS_MAX) {
                fprintf(stderr, "murmur launch: -n wants 1..%d agents, not '%s'\n",
                        LAUNCH_AGENTS_MAX, v);
                return 2;
            }
            L->n = (int)u;
            break;
        case LA_HOSTS:
            if (parse_hosts(v, hosts, nhosts, &total)) {
                fprintf(stderr,
                        "murmur launch: --hosts '%s': expected HOST[:SLOTS],... (at most %d "
                        "hosts, %d slots each)\n",
                        v, LAUNCH_HOSTS_MAX, LAUNCH_AGENTS_MAX);
                return 2;
            }
            break;
        case LA_SET:
            if (L->nsets == LAUNCH_SETS_MAX) {
                fprintf(stderr, "murmur launch: more than %d --set\n", LAUNCH_SETS_MAX);
                return 2;
            }
            L->sets[L->nsets++] = v;
            break;
        case LA_DIR:
            snprintf(L->dir, sizeof L->dir, "%s", v);
            break;
        case LA_DATA:
            *data = v;
            break;
        case LA_SHARDS:
            if (!common_parse_u64(v, &u) || u < 1 || u > MODEL_SHARDS_MAX) {
                fprintf(stderr, "murmur launch: --shards wants 1..%u, not '%s'\n", MODEL_SHARDS_MAX,
                        v);
                return 2;
            }
            *shards = (unsigned)u;
            break;
        case LA_SHARD_DIR:
            *shard_dir = v;
            break;
        case LA_PORT:
            if (!common_parse_u64(v, &u) || u < 1 || u > 65000) {
                fprintf(stderr, "murmur launch: --port wants 1..65000, not '%s'\n", v);
                return 2;
            }
            *port = (long)u;
            break;
        case LA_INTERVAL:
        case LA_DURATION:
        case LA_STOP_TIMEOUT: {
            double *d = id == LA_INTERVAL   ? &L->interval_s
                        : id == LA_DURATION ? &L->duration_s
                                            : &L->stop_s;
            if (!parse_seconds(v, d)) {
                fprintf(stderr, "murmur launch: %s wants seconds, not '%s'\n", cli.given, v);
                return 2;
            }
            break;
        }
        case LA_FAULT:
            if (nf == LAUNCH_FAULTS_MAX) {
                fprintf(stderr, "murmur launch: more than %d --fault\n", LAUNCH_FAULTS_MAX);
                return 2;
            }
            faults[nf++] = v;
            break;
        case LA_RSH:
            rsh = v;
            break;
        case LA_REMOTE_BIN:
            L->remote_bin = v;
            break;
        case LA_REMOTE_DIR:
            snprintf(L->remote_dir, sizeof L->remote_dir, "%s", v);
            break;
        case LA_QUIET:
            L->quiet = true;
            break;
        case LA_DRY_RUN:
            L->dry_run = true;
            break;
        case COMMON_CLI_POSITIONAL:
            fprintf(stderr, "murmur launch: unexpected argument '%s' (see --help)\n", v);
            return 2;
        default:
            fprintf(stderr, "murmur launch: %s\n", cli.err);
            return 2;
        }
    }
    if (*nhosts) {
        if (!L->n)
            L->n = total;
        if (L->n > total) {
            fprintf(stderr, "murmur launch: -n %d but --hosts has %d slots\n", L->n, total);
            return 2;
        }
    }
    if (!L->n) {
        fprintf(stderr, "murmur launch: how many agents? (-n N, or --hosts)\n");
        launch_usage(stderr);
        return 2;
    }
    for (int i = 0; i < nf; i++)
        if (parse_fault(faults[i], &L->faults[L->nfaults++], L->n)) {
            fprintf(stderr,
                    "murmur launch: --fault '%s': expected SECONDS:kill|stop|restart:AGENT "
                    "(AGENT 1..%d)\n",
                    faults[i], L->n);
            return 2;
        }
    snprintf(L->rsh_buf, sizeof L->rsh_buf, "%s", rsh);
    for (char *save = NULL, *w = strtok_r(L->rsh_buf, " \t", &save); w && L->rsh_argc < 15;
         w = strtok_r(NULL, " \t", &save))
        L->rsh[L->rsh_argc++] = w;
    if (!L->rsh_argc) {
        fprintf(stderr, "murmur launch: --rsh is empty\n");
        return 2;
    }
    return -1;
}

/* Absolute form of path into out. */
static int absolute(const char *path, char *out, size_t cap)
{
    char cwd[LAUNCH_PATH_MAX];
    if (path[0] != '/' && !getcwd(cwd, sizeof cwd))
        return -1;
    int n = path[0] == '/' ? snprintf(out, cap, "%s", path)
                           : snprintf(out, cap, "%.*s/%.*s", LAUNCH_PATH_MAX / 2, cwd,
                                      LAUNCH_PATH_MAX / 2 - 2, path);
    return n < 0 || (size_t)n >= cap || strlen(path) >= LAUNCH_PATH_MAX / 2 - 2 ? -1 : 0;
}

/* Hosts, addresses, ports and directories of every slot. */
static int place_slots(launch *L, const host_slots *hosts, int nhosts, long port)
{
    int per_host[LAUNCH_HOSTS_MAX] = {0};
    int slots_on[LAUNCH_HOSTS_MAX] = {0};
    int h = 0;
    for (int i = 0; i < L->n; i++) {
        slot *sl = &L->slots[i];
        memset(sl, 0, sizeof *sl);
        sl->index = i + 1;
        sl->status = -1;
        if (nhosts) {
            while (per_host[h] == hosts[h].slots)
                h++;
            sl->host = hosts[h].name;
            snprintf(sl->addr_host, sizeof sl->addr_host, "%s", hosts[h].name);
            sl->port = (unsigned)per_host[h]++; /* the slot on its host, for now */
            slots_on[h]++;
            snprintf(sl->dir, sizeof sl->dir, "%s/a%d", L->remote_dir, sl->index);
        } else {
            snprintf(sl->addr_host, sizeof sl->addr_host, "127.0.0.1");
            sl->port = (unsigned)i;
            snprintf(sl->dir, sizeof sl->dir, "%s/a%d", L->dir, sl->index);
        }
        snprintf(sl->log, sizeof sl->log, "%s/a%d.log", L->dir, sl->index);
    }
    /* the block: PORT+k for peers, PORT+SLOTS+k for metrics, SLOTS the
     * most agents on one host */
    int slots = nhosts ? 0 : L->n;
    for (int k = 0; k < nhosts; k++)
        if (slots_on[k] > slots)
            slots = slots_on[k];
    long base = port ? port : LAUNCH_PORT_DEFAULT;
    for (int tries = 0; !nhosts && !L->dry_run; tries++) {
        bool ok = base + 2 * slots < 65536;
        for (int k = 0; ok && k < 2 * slots; k++)
            ok = port_free((unsigned)(base + k));
        if (ok)
            break;
        if (port || tries == LAUNCH_PORT_TRIES) {
            fprintf(stderr,
                    "murmur launch: ports %ld-%ld are not all free on 127.0.0.1; choose another "
                    "--port\n",
                    base, base + 2 * slots - 1);
            return -1;
        }
        base += 2 * slots;
    }
    for (int i = 0; i < L->n; i++) {
        slot *sl = &L->slots[i];
        unsigned k = sl->port;
        sl->port = (unsigned)base + k;
        sl->metrics_port = (unsigned)(base + slots) + k;
    }
    return 0;
}

int cmd_launch(int argc, char **argv)
{
    static launch L;
    memset(&L, 0, sizeof L);
    L.interval_s = 5;
    L.stop_s = LAUNCH_STOP_S_DEFAULT;
    snprintf(L.dir, sizeof L.dir, "murmur-launch");
    static host_slots hosts[LAUNCH_HOSTS_MAX];
    int nhosts = 0;
    const char *data = "fashion-mnist", *shard_dir = NULL;
    unsigned shards = 0;
    long port = 0;
    /* from the start: a Ctrl-C during the set-up is not lost */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    int rc = parse_args(&L, argc, argv, hosts, &nhosts, &data, &shards, &shard_dir, &port);
    if (rc >= 0)
        return rc;
    unsigned replication = check_sets(&L);
    if (!replication)
        return 2;
    int r = (int)replication < L.n ? (int)replication : L.n;
    if (!shards)
        shards = 8u * (unsigned)L.n > MODEL_SHARDS_MAX ? MODEL_SHARDS_MAX : 8u * (unsigned)L.n;
    char dir[LAUNCH_PATH_MAX];
    if (absolute(L.dir, dir, sizeof dir)) {
        fprintf(stderr, "murmur launch: --dir %s: path too long\n", L.dir);
        return 2;
    }
    memcpy(L.dir, dir, sizeof L.dir);
    if (!L.remote_dir[0])
        snprintf(L.remote_dir, sizeof L.remote_dir, "%s", L.dir);
    L.remote = nhosts > 0;
    ssize_t sn = readlink("/proc/self/exe", L.self, sizeof L.self - 1);
    if (sn <= 0) {
        fprintf(stderr, "murmur launch: cannot find this binary: %s\n", strerror(errno));
        return 1;
    }
    L.self[sn] = '\0';
    if (!L.remote_bin)
        L.remote_bin = L.self;
    char msg[512];
    if (!L.dry_run && common_mkdirs(L.dir, 0700, msg, sizeof msg)) {
        fprintf(stderr, "murmur launch: %s\n", msg);
        return 1;
    }
    if (net_init() != NET_OK) {
        fprintf(stderr, "murmur launch: libsodium failed to initialise\n");
        return 1;
    }
    if (place_slots(&L, hosts, nhosts, port))
        return 1;
    char netkey[LAUNCH_FILE_MAX], all[LAUNCH_FILE_MAX];
    static char names[MODEL_SHARDS_MAX][64];
    int nshards = 0;
    if (L.dry_run) { /* the plan only: nothing is written or run */
        nshards = shard_dir ? 0 : (int)shards;
        snprintf(netkey, sizeof netkey, "%s/network.key", L.dir);
        snprintf(all, sizeof all, "%s", shard_dir ? shard_dir : "DIR/all");
    } else if (network_key(&L, netkey, sizeof netkey) ||
               make_shards(&L, data, shards, shard_dir, all, sizeof all) ||
               read_catalog(all, names, MODEL_SHARDS_MAX, &nshards)) {
        return 1;
    } else {
        char test[LAUNCH_FILE_MAX + 16];
        snprintf(test, sizeof test, "%s/test.csv", all);
        L.test_csv = access(test, R_OK) == 0;
        struct stat st;
        if (L.test_csv && !shard_dir && strcmp(data, "fashion-mnist") && stat(data, &st) == 0 &&
            !S_ISDIR(st.st_mode) && absolute(data, L.data_abs, sizeof L.data_abs))
            L.data_abs[0] = '\0';
    }
    if (!L.quiet)
        printf("launch: %d agents%s%s, %d shards (each on %d agents), directory %s\n", L.n,
               L.remote ? " over " : " on this host", L.remote ? L.rsh[0] : "", nshards, r, L.dir);
    for (int i = 0; i < L.n; i++) {
        slot *sl = &L.slots[i];
        if (L.dry_run && !sl->host)
            continue;
        rc = sl->host ? provision_remote(&L, sl, netkey, all, names, nshards, r)
                      : provision_local(&L, sl, netkey, all, names, nshards, r);
        if (rc)
            return 1;
    }
    if (launch_signals) {
        fprintf(stderr, "murmur launch: interrupted before any agent started\n");
        return 130;
    }
    clock_gettime(CLOCK_MONOTONIC, &L.t0);
    for (int i = 0; i < L.n; i++) {
        if (start_agent(&L, &L.slots[i])) {
            stop_all(&L, true);
            return 1;
        }
        if (i == 0 && !L.dry_run)
            usleep(500000); /* the first seed listens before the others dial it */
    }
    if (L.dry_run)
        return 0;
    if (!L.quiet) {
        printf("launch: started; Ctrl-C asks every agent to leave\n");
        fflush(stdout);
    }
    double next_table = L.interval_s;
    int seen = 0;
    for (;;) {
        usleep(100000);
        reap(&L);
        double t = elapsed_s(&L);
        if (launch_signals != seen) {
            seen = launch_signals;
            printf("\nlaunch: stopping: every agent leaves (Ctrl-C again to kill)\n");
            stop_all(&L, false);
            break;
        }
        if (L.target_reached) {
            if (!L.quiet)
                printf("launch: t=%.0fs agent %d reached run.target_accuracy: every agent leaves\n",
                       t, L.target_reached);
            stop_all(&L, false);
            break;
        }
        if (L.duration_s > 0 && t >= L.duration_s) {
            if (!L.quiet)
                printf("launch: t=%.0fs --duration reached: every agent leaves\n", t);
            stop_all(&L, false);
            break;
        }
        for (int f = 0; f < L.nfaults; f++)
            if (!L.faults[f].done && t >= L.faults[f].at_s)
                do_fault(&L, &L.faults[f]);
        bool pending = false;
        for (int f = 0; f < L.nfaults; f++)
            pending |= !L.faults[f].done;
        if (!running(&L) && !pending)
            break;
        if (!L.quiet && L.interval_s > 0 && t >= next_table) {
            printf("t=%.0fs\n", t);
            print_table(&L);
            next_table = t + L.interval_s;
        }
    }
    reap(&L);
    return summary(&L);
}
