/* murmur chaos — run a fault schedule against a live cluster and judge it
 * (docs/CHAOS.md), after Jepsen's nemesis and checker.
 *
 * 1. Find the members: GET /members of the first seed (a metrics address)
 *    that answers; each member's /status at the same port offset as the
 *    seed's (or --metrics-port). Members are sorted by node id: index i
 *    names the same agent in every run. Every member must run with
 *    faults.enable = true and list the admin key of --key.
 * 2. Run the schedule (agent/chaos_sched.h: a file, or random from --seed
 *    and --rate): each fault is applied with a control request (the same as
 *    murmur fault) and undone for= seconds later; kill sends SIGKILL to a
 *    local agent's pid (from its /status) and restarts it with the same
 *    command line, directory and stderr, or runs --kill-cmd/--restart-cmd.
 * 3. The checker polls every member's /status every 500 ms throughout, then
 *    gives the cluster --settle seconds after the last fault, and reports
 *    one line per property with its evidence, then VERDICT: PASS or FAIL.
 * Interrupted (SIGINT, SIGTERM) or not, every fault still in force is
 * undone and every agent it killed is restarted before it exits.
 * Exit status: 0 PASS, 1 FAIL, 2 bad command line or cluster, 130
 * interrupted.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/chaos.h"
#include "agent/chaos_sched.h"
#include "agent/chaos_verdict.h"
#include "agent/commands.h"
#include "agent/keys.h"
#include "agent/metrics.h"
#include "net/faults.h"
#include "common/cli.h"
#include "common/json.h"
#include "common/text.h"

#define CHAOS_POLL_MS 500u
#define CHAOS_HTTP_MS 1000
#define CHAOS_REQ_MS  5000u
/* A request without an answer is sent again (requests are idempotent: the
 * same fault twice changes and counts nothing). */
#define CHAOS_REQ_TRIES 3
/* ... or, to a member restarted less than CHAOS_RESTART_GRACE_S ago,
 * until it listens: 20 tries a second apart. */
#define CHAOS_REQ_TRIES_RESTARTED 20
#define CHAOS_REQ_NAP_MS          1000u
#define CHAOS_ARGV_MAX            128u
#define CHAOS_CMDLINE_MAX         8192u
/* After a restart an agent rejoins, fetches a model and its shards: its
 * steps are not judged for this long. */
#define CHAOS_RESTART_GRACE_S 30.0
/* Polls kept per member for the step rate before a fault: 10 s of them. */
#define CHAOS_HIST 20u

typedef struct member {
    uint64_t id;
    char addr[256];    /* gossip address host:port */
    char metrics[300]; /* host:port */
    uint32_t pid;
    /* a local agent's command line, captured before a kill */
    char cmdline[CHAOS_CMDLINE_MAX];
    size_t cmdline_len;
    char cwd[1024], errpath[1024];
    int killed;
    /* the checker */
    int up;
    uint64_t step;
    double step_since; /* when step last changed (s) */
    double worst_stall, worst_stall_at;
    uint32_t peers;
    double consensus;
    uint64_t shards_missing, faults_applied, faults_removed;
    uint64_t want_applied, want_removed; /* since its last (re)start */
    double excused_until;                /* paused, killed or restarted */
    int paused;
    /* evidence: the events in force on this member (-1 none) */
    int pause_ev, slow_ev, restart_ev;
    double restarted_at;
    uint32_t pid_before;                   /* the pid that was killed */
    uint64_t frames[NET_FAULT_KIND_COUNT]; /* murmur_fault_frames_total by kind */
    /* the last polls' steps, for a step rate before a fault */
    double hist_t[CHAOS_HIST];
    uint64_t hist_step[CHAOS_HIST];
    unsigned hist_n;
} member;

/* What the checker saw a fault do (the evidence lines of the verdict). */
typedef struct evidence {
    int applied, undone, closed;
    uint64_t frames0[CHAOS_MEMBERS_MAX][NET_FAULT_KIND_COUNT]; /* at apply */
    uint64_t frames;                                           /* of its kind, apply..after */
    int seen;              /* pause/slow: in /status; kill: down */
    uint64_t step0, step1; /* pause/slow: target's steps when first and last seen */
    double seen0, seen1;   /* ... and when */
    double back_s;         /* kill: answering again, s after the restart; < 0 not yet */
    double rate_before;    /* slow: the target's steps/s over the polls before; < 0 unknown */
    uint32_t new_pid;      /* kill: the restarted process */
    uint32_t min_peers;    /* partition: fewest peers a member saw while it lasted */
} evidence;

typedef struct chaos {
    member m[CHAOS_MEMBERS_MAX];
    int n;
    uint64_t ids[CHAOS_MEMBERS_MAX];
    const char *key, *netkey;
    const char *kill_cmd, *restart_cmd;
    double stall_bound_s, settle_s;
    uint32_t replication;
    double t0;
    int down_now, down_max;
    double pre_level;
    int pre_samples;
    uint64_t requests_failed;
    const chaos_sched *s;
    evidence ev[CHAOS_EVENTS_MAX];
} chaos;

static volatile sig_atomic_t chaos_stop;
static void on_signal(int sig)
{
    (void)sig;
    chaos_stop = 1;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void nap_ms(unsigned ms)
{
    struct timespec ts = {.tv_sec = ms / 1000u, .tv_nsec = (long)(ms % 1000u) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- discovery --------------------------------------------------------- */

static int split_hostport(const char *addr, char *host, size_t cap, long *port)
{
    if (!strncmp(addr, "tcp://", 6))
        addr += 6;
    const char *colon = strrchr(addr, ':');
    uint64_t p;
    if (!colon || colon == addr || !common_parse_u64(colon + 1, &p) || p > 65535 ||
        (size_t)(colon - addr) >= cap)
        return -1;
    snprintf(host, cap, "%.*s", (int)(colon - addr), addr);
    *port = (long)p;
    return 0;
}

static int cmp_member(const void *a, const void *b)
{
    const member *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

static int discover(chaos *c, const char *seed, long fixed_port, char *err, size_t errlen)
{
    char *status = NULL, *members = NULL;
    size_t len;
    if (agent_http_get(seed, "/status", CHAOS_HTTP_MS * 3, &status, &len, NULL, err, errlen) ||
        agent_http_get(seed, "/members", CHAOS_HTTP_MS * 3, &members, &len, NULL, err, errlen)) {
        free(status);
        return -1;
    }
    char self[256], host[256];
    long peer_port = 0, metrics_port = 0;
    int ok = common_json_get(status, "address", self, sizeof self) == 1 &&
             !split_hostport(self, host, sizeof host, &peer_port) &&
             !split_hostport(seed, host, sizeof host, &metrics_port);
    free(status);
    if (!ok) {
        snprintf(err, errlen, "%s did not answer with a status document", seed);
        free(members);
        return -1;
    }
    c->n = 0;
    for (char *save = NULL, *line = strtok_r(members, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        char id[32], addr[256], state[32];
        size_t l = strlen(line);
        if (l && line[l - 1] == ',')
            line[l - 1] = 0;
        if (line[0] != '{' || common_json_get(line, "node_id", id, sizeof id) != 1 ||
            common_json_get(line, "address", addr, sizeof addr) != 1 ||
            common_json_get(line, "state", state, sizeof state) != 1 || strcmp(state, "alive"))
            continue;
        if (c->n >= (int)CHAOS_MEMBERS_MAX)
            break;
        member *m = &c->m[c->n];
        memset(m, 0, sizeof *m);
        m->id = strtoull(id, NULL, 16);
        snprintf(m->addr, sizeof m->addr, "%s", strncmp(addr, "tcp://", 6) ? addr : addr + 6);
        long port;
        if (split_hostport(m->addr, host, sizeof host, &port))
            continue;
        snprintf(m->metrics, sizeof m->metrics, "%s:%ld", host,
                 fixed_port ? fixed_port : port + metrics_port - peer_port);
        c->n++;
    }
    free(members);
    if (c->n < 1) {
        snprintf(err, errlen, "%s lists no live member", seed);
        return -1;
    }
    qsort(c->m, (size_t)c->n, sizeof c->m[0], cmp_member);
    for (int i = 0; i < c->n; i++) {
        c->ids[i] = c->m[i].id;
        c->m[i].pause_ev = c->m[i].slow_ev = c->m[i].restart_ev = -1;
    }
    return 0;
}

/* ---- the checker ------------------------------------------------------- */

static uint64_t json_u64(const char *doc, const char *key)
{
    char v[64];
    return common_json_get(doc, key, v, sizeof v) == 1 ? strtoull(v, NULL, 10) : 0;
}

static double json_f64(const char *doc, const char *key)
{
    char v[64];
    double d;
    return common_json_get(doc, key, v, sizeof v) == 1 && common_parse_f64(v, &d) ? d : NAN;
}

static void see(evidence *v, uint64_t step, double t)
{
    if (!v->seen) {
        v->step0 = step;
        v->seen0 = t;
    }
    v->seen = 1;
    v->step1 = step;
    v->seen1 = t;
}

static void poll_member(chaos *c, member *m, double t)
{
    char *body = NULL, err[256];
    size_t len;
    if (agent_http_get(m->metrics, "/status", CHAOS_HTTP_MS, &body, &len, NULL, err, sizeof err)) {
        m->up = 0;
        return;
    }
    m->up = 1;
    uint64_t step = json_u64(body, "step");
    m->hist_t[m->hist_n % CHAOS_HIST] = t;
    m->hist_step[m->hist_n % CHAOS_HIST] = step;
    m->hist_n++;
    if (step != m->step || t < m->excused_until) {
        m->step = step;
        m->step_since = t;
    } else if (t - m->step_since > m->worst_stall) {
        m->worst_stall = t - m->step_since;
        m->worst_stall_at = m->step_since;
    }
    m->peers = (uint32_t)json_u64(body, "peers");
    m->consensus = json_f64(body, "consensus_distance");
    m->shards_missing = json_u64(body, "shards_missing");
    m->faults_applied = json_u64(body, "faults_applied");
    m->faults_removed = json_u64(body, "faults_removed");
    uint32_t pid = (uint32_t)json_u64(body, "pid");
    if (pid)
        m->pid = pid;
    /* evidence of the faults in force on it */
    if (m->pause_ev >= 0 && json_u64(body, "training_paused") == 1)
        see(&c->ev[m->pause_ev], step, t);
    if (m->slow_ev >= 0 && json_f64(body, "training_slow") == c->s->ev[m->slow_ev].factor)
        see(&c->ev[m->slow_ev], step, t);
    if (m->restart_ev >= 0 && pid && pid != m->pid_before) {
        evidence *v = &c->ev[m->restart_ev];
        v->back_s = t - m->restarted_at;
        v->new_pid = pid;
        m->restart_ev = -1;
    }
    for (size_t i = 0; i < c->s->n; i++) {
        evidence *v = &c->ev[i];
        if (c->s->ev[i].action == CHAOS_PARTITION && v->applied && !v->undone &&
            m->peers < v->min_peers)
            v->min_peers = m->peers;
    }
    free(body);
}

static void poll_all(chaos *c)
{
    while (waitpid(-1, NULL, WNOHANG) > 0) /* restarted agents that died */
        ;
    double t = now_s() - c->t0;
    for (int i = 0; i < c->n; i++)
        if (!c->m[i].killed)
            poll_member(c, &c->m[i], t);
}

/* Every member's murmur_fault_frames_total by kind, from /metrics (a
 * member that does not answer keeps its last counts). */
static void frames_all(chaos *c)
{
    static const char prefix[] = "murmur_fault_frames_total{kind=\"";
    for (int i = 0; i < c->n; i++) {
        member *m = &c->m[i];
        char *body = NULL, err[256];
        size_t len;
        if (m->killed || agent_http_get(m->metrics, "/metrics", CHAOS_HTTP_MS, &body, &len, NULL,
                                        err, sizeof err))
            continue;
        memset(m->frames, 0, sizeof m->frames);
        for (char *save = NULL, *line = strtok_r(body, "\n", &save); line;
             line = strtok_r(NULL, "\n", &save)) {
            if (strncmp(line, prefix, sizeof prefix - 1))
                continue;
            char *kind = line + sizeof prefix - 1, *q = strchr(kind, '"');
            if (!q || q[1] != '}')
                continue;
            *q = 0;
            for (int k = 0; k < NET_FAULT_KIND_COUNT; k++)
                if (!strcmp(kind, net_fault_kind_name(k)))
                    m->frames[k] = strtoull(q + 2, NULL, 10);
        }
        free(body);
    }
}

/* The transport's frame count kind of each link fault (-1: not a link fault). */
static int frame_kind(chaos_action a)
{
    switch (a) {
    case CHAOS_PARTITION:
        return NET_FAULT_PARTITION;
    case CHAOS_DROP:
        return NET_FAULT_DROP;
    case CHAOS_DELAY:
        return NET_FAULT_DELAY;
    case CHAOS_BANDWIDTH:
        return NET_FAULT_BANDWIDTH;
    case CHAOS_DUPLICATE:
        return NET_FAULT_DUPLICATE;
    case CHAOS_REORDER:
        return NET_FAULT_REORDER;
    case CHAOS_CORRUPT:
        return NET_FAULT_CORRUPT;
    default:
        return -1;
    }
}

/* Close the evidence of faults undone before now: the frames their kind
 * counted from their apply to this snapshot (counts reach /metrics within
 * a status pass, well inside the gap before the next fault). */
static void evidence_close(chaos *c, int all)
{
    for (size_t i = 0; i < c->s->n; i++) {
        evidence *v = &c->ev[i];
        int k = frame_kind(c->s->ev[i].action);
        if (!v->applied || v->closed || (!v->undone && !all))
            continue;
        v->closed = 1;
        if (k < 0)
            continue;
        for (int j = 0; j < c->n; j++)
            if (c->m[j].frames[k] > v->frames0[j][k]) /* a restart counts from zero */
                v->frames += c->m[j].frames[k] - v->frames0[j][k];
    }
}

/* One line of evidence per fault; returns 1 if the fault showed its effect. */
static int evidence_line(const chaos *c, size_t i)
{
    const chaos_event *e = &c->s->ev[i];
    const evidence *v = &c->ev[i];
    char who[32] = "";
    if (e->on >= 0)
        snprintf(who, sizeof who, " on=%d", e->on);
    printf("fault %zu %s%s at %g s for %g s: ", i, chaos_action_names[e->action], who, e->at_s,
           e->for_s);
    int ok = 0;
    switch (e->action) {
    case CHAOS_KILL:
        ok = v->seen && v->back_s >= 0 && v->new_pid;
        if (ok)
            printf("down (status unanswered), back as pid %u %.1f s after the restart\n",
                   v->new_pid, v->back_s);
        else
            printf("%s, %s\n", v->seen ? "down" : "still answering after the kill",
                   v->new_pid ? "back" : "not back with a new pid");
        break;
    case CHAOS_PAUSE:
        ok = v->seen && v->step1 - v->step0 <= 1;
        printf("training_paused seen for %.1f s, %" PRIu64 " steps meanwhile\n",
               v->seen ? v->seen1 - v->seen0 : 0.0, v->step1 - v->step0);
        break;
    case CHAOS_SLOW:
        ok = v->seen;
        printf("training_slow=%g %s, %.1f steps/s meanwhile", e->factor,
               v->seen ? "seen" : "never seen",
               v->seen && v->seen1 > v->seen0
                   ? (double)(v->step1 - v->step0) / (v->seen1 - v->seen0)
                   : 0.0);
        if (v->rate_before >= 0)
            printf(" (%.1f in the 10 s before)", v->rate_before);
        printf("\n");
        break;
    default:
        ok = v->frames > 0;
        printf("%" PRIu64 " frames counted as %s", v->frames,
               net_fault_kind_name(frame_kind(e->action)));
        if (e->action == CHAOS_PARTITION)
            printf(", fewest peers seen %u of %d", v->min_peers, c->n - 1);
        printf("\n");
        break;
    }
    return ok;
}

/* Member m's steps per second over its last polls (< 0: unknown). */
static double step_rate(const member *m)
{
    if (m->hist_n < 2)
        return -1;
    unsigned last = (m->hist_n - 1) % CHAOS_HIST;
    unsigned first = m->hist_n > CHAOS_HIST ? m->hist_n % CHAOS_HIST : 0;
    double dt = m->hist_t[last] - m->hist_t[first];
    if (dt <= 0 || m->hist_step[last] < m->hist_step[first])
        return -1;
    return (double)(m->hist_step[last] - m->hist_step[first]) / dt;
}

/* Mean consensus distance over the members that report one. */
static double consensus_mean(const chaos *c)
{
    double sum = 0;
    int k = 0;
    for (int i = 0; i < c->n; i++)
        if (c->m[i].up && isfinite(c->m[i].consensus)) {
            sum += c->m[i].consensus;
            k++;
        }
    return k ? sum / k : NAN;
}

/* ---- faults -------------------------------------------------------------- */

static int request(chaos *c, member *m, const char *text)
{
    char reply[AGENT_FAULT_CTL_TEXT_MAX + 256];
    int rc = -1;
    /* a member restarted within the grace time may not listen yet: wait
     * for it (a refused dial fails at once, hence the naps) */
    double t = now_s() - c->t0;
    int tries = m->restarted_at > 0 && t - m->restarted_at < CHAOS_RESTART_GRACE_S
                    ? CHAOS_REQ_TRIES_RESTARTED
                    : CHAOS_REQ_TRIES;
    for (int k = 0; k < tries && rc < 0; k++) {
        if (k)
            nap_ms(CHAOS_REQ_NAP_MS);
        rc = agent_fault_send(m->addr, c->key, c->netkey, text, CHAOS_REQ_MS, reply, sizeof reply);
    }
    if (rc) {
        c->requests_failed++;
        fprintf(stderr, "murmur chaos: %016" PRIx64 " (%s): %s: %s", m->id, m->addr, text, reply);
        if (!reply[0] || reply[strlen(reply) - 1] != '\n')
            fputc('\n', stderr);
    }
    return rc;
}

static void run_template(const char *tmpl, const member *m, int index)
{
    char cmd[4096], host[256];
    long port = 0;
    split_hostport(m->addr, host, sizeof host, &port);
    size_t len = 0;
    for (const char *p = tmpl; *p && len + 1 < sizeof cmd;) {
        char val[300] = "";
        size_t skip = 0;
        if (!strncmp(p, "{i}", 3))
            snprintf(val, sizeof val, "%d", index), skip = 3;
        else if (!strncmp(p, "{node}", 6))
            snprintf(val, sizeof val, "%016" PRIx64, m->id), skip = 6;
        else if (!strncmp(p, "{host}", 6))
            snprintf(val, sizeof val, "%s", host), skip = 6;
        else if (!strncmp(p, "{port}", 6))
            snprintf(val, sizeof val, "%ld", port), skip = 6;
        else if (!strncmp(p, "{pid}", 5))
            snprintf(val, sizeof val, "%u", m->pid), skip = 5;
        if (skip) {
            len += (size_t)snprintf(cmd + len, sizeof cmd - len, "%s", val);
            p += skip;
        } else {
            cmd[len++] = *p++;
            cmd[len] = 0;
        }
    }
    int rc = system(cmd);
    if (rc != 0)
        fprintf(stderr, "murmur chaos: '%s' exited with %d\n", cmd, rc);
}

/* Remember how to start a local agent again: /proc/PID/{cmdline,cwd,fd/2}. */
static int capture(member *m)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%u/cmdline", m->pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    m->cmdline_len = fread(m->cmdline, 1, sizeof m->cmdline - 1, f);
    fclose(f);
    snprintf(path, sizeof path, "/proc/%u/cwd", m->pid);
    ssize_t n = readlink(path, m->cwd, sizeof m->cwd - 1);
    m->cwd[n > 0 ? n : 0] = 0;
    snprintf(path, sizeof path, "/proc/%u/fd/2", m->pid);
    n = readlink(path, m->errpath, sizeof m->errpath - 1);
    m->errpath[n > 0 ? n : 0] = 0;
    return m->cmdline_len ? 0 : -1;
}

static void restart_local(member *m)
{
    char *argv[CHAOS_ARGV_MAX + 1];
    size_t argc = 0;
    for (size_t i = 0; i < m->cmdline_len && argc < CHAOS_ARGV_MAX; i += strlen(m->cmdline + i) + 1)
        argv[argc++] = m->cmdline + i;
    argv[argc] = NULL;
    if (!argc)
        return;
    pid_t pid = fork();
    if (pid == 0) {
        setsid();
        if (m->cwd[0] && chdir(m->cwd) != 0)
            _exit(127);
        int fd = m->errpath[0] == '/' ? open(m->errpath, O_WRONLY | O_APPEND) : -1;
        if (fd < 0)
            fd = open("/dev/null", O_WRONLY);
        int nul = open("/dev/null", O_RDWR);
        dup2(nul, 0);
        dup2(fd, 1);
        dup2(fd, 2);
        execv(argv[0], argv);
        _exit(127);
    }
    if (pid > 0)
        m->pid = (uint32_t)pid;
}

static void kill_member(chaos *c, int i)
{
    member *m = &c->m[i];
    if (m->killed)
        return;
    if (c->kill_cmd) {
        run_template(c->kill_cmd, m, i);
    } else {
        if (!m->pid || capture(m)) {
            fprintf(stderr,
                    "murmur chaos: cannot kill member %d: no local process %u "
                    "(use --kill-cmd and --restart-cmd for remote agents)\n",
                    i, m->pid);
            return;
        }
        kill((pid_t)m->pid, SIGKILL);
    }
    m->pid_before = m->pid;
    m->killed = 1;
    m->up = 0;
    c->down_now++;
    if (c->down_now > c->down_max)
        c->down_max = c->down_now;
}

static void restart_member(chaos *c, int i, double t)
{
    member *m = &c->m[i];
    if (!m->killed)
        return;
    char *body = NULL, err[256];
    size_t len;
    if (m->restart_ev >= 0 && /* evidence: the killed member does not answer */
        agent_http_get(m->metrics, "/status", CHAOS_HTTP_MS, &body, &len, NULL, err, sizeof err))
        c->ev[m->restart_ev].seen = 1;
    free(body);
    m->restarted_at = t;
    m->hist_n = 0; /* a new process counts its steps from zero */
    if (c->restart_cmd)
        run_template(c->restart_cmd, m, i);
    else
        restart_local(m);
    m->killed = 0;
    c->down_now--;
    m->want_applied = m->want_removed = 0; /* a new process counts from zero */
    m->excused_until = t + CHAOS_RESTART_GRACE_S;
}

/* Apply (undo = 0) or undo an event on every member it touches. */
static void do_event(chaos *c, size_t index, int undo, double t)
{
    const chaos_event *e = &c->s->ev[index];
    evidence *v = &c->ev[index];
    if (!undo) {
        frames_all(c);
        evidence_close(c, 0);
        v->applied = 1;
        v->back_s = -1;
        v->rate_before = e->on >= 0 ? step_rate(&c->m[e->on]) : -1;
        v->min_peers = (uint32_t)c->n;
        for (int i = 0; i < c->n; i++)
            memcpy(v->frames0[i], c->m[i].frames, sizeof v->frames0[i]);
    } else {
        v->undone = 1;
    }
    if (e->action == CHAOS_KILL) {
        if (undo) {
            c->m[e->on].restart_ev = (int)index;
            restart_member(c, e->on, t);
        } else {
            kill_member(c, e->on);
        }
        return;
    }
    for (int i = 0; i < c->n; i++) {
        member *m = &c->m[i];
        char text[CHAOS_MEMBERS_MAX * 17 + 64];
        chaos_event_request(e, i, c->ids, c->n, undo, text, sizeof text);
        if (!text[0] || m->killed)
            continue;
        if (request(c, m, text) == 0)
            (*(undo ? &m->want_removed : &m->want_applied))++;
        if (e->action == CHAOS_PAUSE || e->action == CHAOS_SLOW)
            m->excused_until = t + (undo ? 5.0 : e->for_s + 5.0);
        if (e->action == CHAOS_PAUSE)
            m->pause_ev = undo ? -1 : (int)index;
        if (e->action == CHAOS_SLOW)
            m->slow_ev = undo ? -1 : (int)index;
        if (e->action == CHAOS_PARTITION) /* a cut-off agent may wait for its shards */
            m->excused_until =
                t + (undo ? CHAOS_RESTART_GRACE_S : e->for_s + CHAOS_RESTART_GRACE_S);
    }
}

/* Nothing left broken: every fault off, every killed agent back. */
static void clean_up(chaos *c)
{
    double t = now_s() - c->t0;
    for (int i = 0; i < c->n; i++)
        restart_member(c, i, t);
    for (int i = 0; i < c->n; i++)
        request(c, &c->m[i], "clear");
}

/* ---- verdict ------------------------------------------------------------- */

static int verdict(chaos *c, double converged_at, double consensus_end)
{
    size_t acted = 0, quiet = 0;
    for (size_t i = 0; i < c->s->n; i++)
        if (c->ev[i].applied)
            (*(evidence_line(c, i) ? &acted : &quiet))++;
    chaos_verdict_member vm[CHAOS_MEMBERS_MAX];
    chaos_verdict v = {.n = c->n,
                       .m = vm,
                       .converged_at = converged_at,
                       .settle_s = c->settle_s,
                       .down_max = c->down_max,
                       .replication = c->replication,
                       .stall_member = 0,
                       .stall_bound_s = c->stall_bound_s,
                       .pre_samples = c->pre_samples,
                       .pre_level = c->pre_level,
                       .end_level = consensus_end,
                       .bad_member = -1,
                       .requests_failed = c->requests_failed,
                       .acted = acted,
                       .quiet = quiet,
                       .faults = c->s->n};
    for (int i = 0; i < c->n; i++) {
        const member *m = &c->m[i];
        vm[i] = (chaos_verdict_member){m->up, m->peers, m->id, m->shards_missing};
        if (m->worst_stall > c->m[v.stall_member].worst_stall)
            v.stall_member = i;
        if (v.bad_member < 0 &&
            (m->faults_applied != m->want_applied || m->faults_removed != m->want_removed)) {
            v.bad_member = i;
            v.bad_applied = m->faults_applied;
            v.bad_removed = m->faults_removed;
            v.bad_want_applied = m->want_applied;
            v.bad_want_removed = m->want_removed;
        }
        v.applied_all += m->want_applied;
    }
    v.stall_s = c->m[v.stall_member].worst_stall;
    v.stall_at = c->m[v.stall_member].worst_stall_at;
    return chaos_verdict_print(&v, stdout);
}

/* ---- the run -------------------------------------------------------------- */

static int converged(const chaos *c)
{
    for (int i = 0; i < c->n; i++)
        if (!c->m[i].up || c->m[i].peers != (uint32_t)(c->n - 1))
            return 0;
    return 1;
}

static int run(chaos *c, const chaos_sched *s)
{
    typedef struct step {
        double at;
        int ev, undo;
    } step;
    step *steps = calloc(2 * s->n + 1, sizeof *steps);
    if (!steps)
        return 2;
    size_t n = 0;
    double last = 0;
    for (size_t i = 0; i < s->n; i++) {
        steps[n++] = (step){s->ev[i].at_s, (int)i, 0};
        steps[n++] = (step){s->ev[i].at_s + s->ev[i].for_s, (int)i, 1};
        if (s->ev[i].at_s + s->ev[i].for_s > last)
            last = s->ev[i].at_s + s->ev[i].for_s;
    }
    for (size_t i = 1; i < n; i++) /* by time; an undo before an apply at the same time */
        for (size_t j = i;
             j > 0 && (steps[j].at < steps[j - 1].at ||
                       (steps[j].at == steps[j - 1].at && steps[j].undo && !steps[j - 1].undo));
             j--) {
            step tmp = steps[j];
            steps[j] = steps[j - 1];
            steps[j - 1] = tmp;
        }
    double first = n ? steps[0].at : 0;
    double end = s->duration_s > last ? s->duration_s : last;
    c->s = s;
    c->t0 = now_s();
    size_t k = 0;
    double converged_at = -1, consensus_end = NAN, settle_until = end + c->settle_s;
    for (;;) {
        double t = now_s() - c->t0;
        if (chaos_stop)
            break;
        while (k < n && steps[k].at <= t) {
            const chaos_event *e = &s->ev[steps[k].ev];
            printf("t=%.1f %s %s", t, steps[k].undo ? "undo" : "apply",
                   chaos_action_names[e->action]);
            if (e->on >= 0)
                printf(" on=%d", e->on);
            printf("\n");
            fflush(stdout);
            do_event(c, (size_t)steps[k].ev, steps[k].undo, t);
            k++;
        }
        poll_all(c);
        double cm = consensus_mean(c);
        if (t < first && isfinite(cm)) {
            c->pre_level = c->pre_samples ? fmax(c->pre_level, cm) : cm;
            c->pre_samples++;
        }
        if (k == n && t >= last) {
            if (isfinite(cm) && (!isfinite(consensus_end) || cm < consensus_end))
                consensus_end = cm;
            if (converged_at < 0 && converged(c))
                converged_at = t - last;
            if (t >= end && converged_at >= 0 && isfinite(consensus_end) &&
                consensus_end <= c->pre_level)
                break; /* settled */
            if (t >= settle_until)
                break;
        }
        nap_ms(CHAOS_POLL_MS);
    }
    free(steps);
    int interrupted = chaos_stop != 0;
    frames_all(c);
    evidence_close(c, 1);
    clean_up(c);
    if (interrupted) {
        printf("VERDICT: INTERRUPTED (every fault undone, every killed agent restarted)\n");
        return 130;
    }
    nap_ms(1000); /* the clear above is a fault removal too: count it */
    for (int i = 0; i < c->n; i++) {
        member *m = &c->m[i];
        poll_member(c, m, now_s() - c->t0);
        /* the final clear removes nothing that is not already gone */
    }
    return verdict(c, converged_at, consensus_end);
}

/* ---- command line ---------------------------------------------------------- */

enum {
    C_HELP,
    C_SEED,
    C_SCHEDULE,
    C_RANDOM,
    C_DURATION,
    C_RATE,
    C_PRINT,
    C_DATA_DIR,
    C_KEY,
    C_NETKEY,
    C_METRICS_PORT,
    C_KILL,
    C_RESTART,
    C_NO_KILL,
    C_STALL,
    C_SETTLE,
    C_REPLICATION,
    C_MEMBERS
};

static const common_flag flags[] = {
    {"help", 'h', false, C_HELP, "", "this text", NULL},
    {"seed", 0, true, C_SEED, "HOST:PORT",
     "metrics address of a member (repeatable; the first that answers lists the others)", NULL},
    {"schedule", 0, true, C_SCHEDULE, "FILE", "run this schedule (docs/CHAOS.md)", NULL},
    {"random", 0, true, C_RANDOM, "SEED", "run a random schedule drawn from SEED", NULL},
    {"duration", 0, true, C_DURATION, "S", "random schedule length (default 120)", NULL},
    {"rate", 0, true, C_RATE, "N", "random faults per minute (default 4)", NULL},
    {"no-kill", 0, false, C_NO_KILL, "", "random schedule without kills", NULL},
    {"print-schedule", 0, false, C_PRINT, "", "print the schedule and exit", NULL},
    {"members", 0, true, C_MEMBERS, "N",
     "with --print-schedule and no --seed: the member count to draw or check it for", NULL},
    {"data-dir", 0, true, C_DATA_DIR, "DIR", "the admin's murmur.key and network.key", NULL},
    {"key", 0, true, C_KEY, "FILE", "admin secret key (default DIR/murmur.key)", NULL},
    {"network-key", 0, true, C_NETKEY, "FILE", "network key (default DIR/network.key)", NULL},
    {"metrics-port", 0, true, C_METRICS_PORT, "P", "every member's metrics port", NULL},
    {"kill-cmd", 0, true, C_KILL, "CMD",
     "kill a member ({i} {node} {host} {port} {pid}); default SIGKILL to a local pid", NULL},
    {"restart-cmd", 0, true, C_RESTART, "CMD",
     "restart it; default: the same local command line, directory and stderr", NULL},
    {"stall-bound", 0, true, C_STALL, "S", "longest allowed pause of training (default 30)", NULL},
    {"settle", 0, true, C_SETTLE, "S", "time given to heal after the last fault (default 60)",
     NULL},
    {"replication", 0, true, C_REPLICATION, "R", "the cluster's shards.replication (default 3)",
     NULL},
};
#define FLAG_COUNT (sizeof flags / sizeof flags[0])

static int num_arg(const char *flag, const char *v, double lo, double hi, double *out)
{
    if (common_parse_f64(v, out) && *out >= lo && *out <= hi)
        return 0;
    fprintf(stderr, "murmur chaos: --%s %s: not a number in %g..%g\n", flag, v, lo, hi);
    return -1;
}

int cmd_chaos(int argc, char **argv)
{
    static chaos c;
    static chaos_sched s;
    memset(&c, 0, sizeof c);
    c.stall_bound_s = 30;
    c.settle_s = 60;
    c.replication = 3;
    const char *seeds[16], *sched_file = NULL, *dir = "murmur-data";
    const char *key = NULL, *netkey = NULL;
    int n_seeds = 0, print = 0, random = 0, no_kill = 0, members = 0;
    uint64_t rseed = 0;
    double duration = 120, rate = 4, port = 0, tmp;
    common_cli cli;
    common_cli_init(&cli, "murmur chaos", flags, FLAG_COUNT, argc, argv);
    for (int id; (id = common_cli_next(&cli)) != COMMON_CLI_END;) {
        switch (id) {
        case COMMON_CLI_ERROR:
            fprintf(stderr, "murmur chaos: %s\n", cli.err);
            return 2;
        case COMMON_CLI_POSITIONAL:
            fprintf(stderr, "murmur chaos: unexpected '%s' (--seed HOST:PORT)\n", cli.arg);
            return 2;
        case C_HELP:
            printf("usage: murmur chaos --seed HOST:PORT [--schedule FILE | --random SEED]\n\n"
                   "Run a fault schedule against a live cluster (every agent with faults.enable\n"
                   "= true and this admin key in faults.admin_keys_file) and judge it.\n\n");
            common_cli_usage(&cli, stdout);
            return 0;
        case C_SEED:
            if (n_seeds < 16)
                seeds[n_seeds++] = cli.arg;
            break;
        case C_SCHEDULE:
            sched_file = cli.arg;
            break;
        case C_RANDOM:
            if (!common_parse_u64(cli.arg, &rseed)) {
                fprintf(stderr, "murmur chaos: --random %s: not a seed\n", cli.arg);
                return 2;
            }
            random = 1;
            break;
        case C_DURATION:
            if (num_arg("duration", cli.arg, 30, 86400, &duration))
                return 2;
            break;
        case C_RATE:
            if (num_arg("rate", cli.arg, 0.1, 60, &rate))
                return 2;
            break;
        case C_NO_KILL:
            no_kill = 1;
            break;
        case C_PRINT:
            print = 1;
            break;
        case C_DATA_DIR:
            dir = cli.arg;
            break;
        case C_KEY:
            key = cli.arg;
            break;
        case C_NETKEY:
            netkey = cli.arg;
            break;
        case C_METRICS_PORT:
            if (num_arg("metrics-port", cli.arg, 1, 65535, &port))
                return 2;
            break;
        case C_KILL:
            c.kill_cmd = cli.arg;
            break;
        case C_RESTART:
            c.restart_cmd = cli.arg;
            break;
        case C_STALL:
            if (num_arg("stall-bound", cli.arg, 1, 3600, &c.stall_bound_s))
                return 2;
            break;
        case C_SETTLE:
            if (num_arg("settle", cli.arg, 1, 3600, &c.settle_s))
                return 2;
            break;
        case C_MEMBERS:
            if (num_arg("members", cli.arg, 1, CHAOS_MEMBERS_MAX, &tmp))
                return 2;
            members = (int)tmp;
            break;
        case C_REPLICATION:
            if (num_arg("replication", cli.arg, 1, 16, &tmp))
                return 2;
            c.replication = (uint32_t)tmp;
            break;
        default:
            break;
        }
    }
    if (!sched_file == !random) {
        fprintf(stderr, "murmur chaos: give one of --schedule FILE and --random SEED\n");
        return 2;
    }
    if (!c.kill_cmd != !c.restart_cmd) {
        fprintf(stderr, "murmur chaos: --kill-cmd and --restart-cmd go together\n");
        return 2;
    }
    char err[512] = "";
    if (members && (!print || n_seeds)) {
        fprintf(stderr, "murmur chaos: --members is for --print-schedule without --seed (a live "
                        "cluster is counted)\n");
        return 2;
    }
    if (!n_seeds && !(print && members)) {
        if (print) /* a schedule is drawn, or checked, for a member count */
            fprintf(stderr,
                    "murmur chaos: --print-schedule needs --seed HOST:PORT or --members N\n");
        else
            fprintf(stderr, "murmur chaos: which cluster? (--seed HOST:PORT, a metrics address)\n");
        return 2;
    }
    int found = members > 0;
    if (members)
        c.n = members;
    for (int i = 0; i < n_seeds && !found; i++)
        found = !discover(&c, seeds[i], (long)port, err, sizeof err);
    if (!found) {
        fprintf(stderr, "murmur chaos: %s\n", err);
        return 2;
    }
    if (random)
        chaos_sched_random(&s, rseed, c.n, duration, rate, !no_kill);
    else if (chaos_sched_load(&s, sched_file, c.n, err, sizeof err)) {
        fprintf(stderr, "murmur chaos: %s\n", err);
        return 2;
    }
    if (random)
        printf("SEED=%" PRIu64 "\n", rseed);
    printf("members=%d", c.n);
    for (int i = 0; i < c.n && !members; i++)
        printf(" m%d=%016" PRIx64 "@%s", i, c.m[i].id, c.m[i].addr);
    printf("\n# schedule\n");
    chaos_sched_write(&s, stdout);
    fflush(stdout);
    if (print)
        return 0;
    char key_path[4096], netkey_path[4096];
    snprintf(key_path, sizeof key_path, "%s/%s", dir, AGENT_KEYS_SECRET_NAME);
    snprintf(netkey_path, sizeof netkey_path, "%s/network.key", dir);
    c.key = key ? key : key_path;
    c.netkey = netkey ? netkey : netkey_path;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    /* every member must accept our key before anything is broken */
    for (int i = 0; i < c.n; i++)
        if (request(&c, &c.m[i], "show")) {
            fprintf(stderr, "murmur chaos: member %d refuses the admin key or has faults off\n", i);
            return 2;
        }
    int rc = run(&c, &s);
    fflush(stdout);
    return rc;
}
