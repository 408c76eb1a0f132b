/* murmur sim with traces and link faults, end to end (sim_run on scenario
 * files): a bandwidth trace's drop lengthens a ring allreduce to the
 * alpha-beta cost at the lower bandwidth; an availability of 0 stops an
 * agent's steps for that interval; the delay and bandwidth faults lengthen
 * the ring by what they add; duplicates arrive twice; reordering and
 * jitter let a later frame pass an earlier one; trace and link-fault keys
 * are errors where they have no effect; the same scenario gives the same
 * trace hash; a chaos schedule's link faults map to fault lines. */
#include "tests/harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/chaos_sched.h"
#include "gossip/wire.h"
#include "sim/output.h"
#include "sim/run.h"
#include "sim/scenario.h"

static char dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/murmur_simlink_XXXXXX");
    assert_non_null(mkdtemp(dir));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void write_file(const char *name, const char *text)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* Load DIR/NAME (relative trace paths resolve from DIR) and apply sets. */
static sim_scenario *load(const char *name, const char *text, const char *const *sets)
{
    write_file(name, text);
    char path[128], err[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    sim_scenario *sc = malloc(sizeof *sc);
    assert_non_null(sc);
    sim_scenario_defaults(sc);
    if (sim_scenario_load(sc, path, err, sizeof err))
        fail_msg("%s", err);
    for (; sets && *sets; sets++)
        if (sim_scenario_set(sc, *sets, err, sizeof err))
            fail_msg("%s", err);
    if (sim_scenario_check(sc, err, sizeof err))
        fail_msg("%s", err);
    return sc;
}

/* What the trace hook saw. */
typedef struct seen {
    uint64_t steps_in[2]; /* agent 0, 1: steps ending inside (lo, hi) */
    uint64_t steps[2];
    uint64_t lo_us, hi_us;
    uint64_t frames, dup_pairs;
    uint64_t dup_by[3][3]; /* pairs by sender and receiver */
    uint64_t frames_by[3][3];
    uint64_t in_window[3][3]; /* frames delivered inside (lo, hi) */
    uint8_t last[4096];
    size_t last_len;
    uint32_t last_from, last_to;
    uint64_t last_at;
    uint64_t last_round[2]; /* last mixing round seen from agent 0 to 1 and 1 to 0 */
    uint64_t inversions;
} seen;

static void on_trace(void *ctx, uint64_t now_us, uint32_t from, uint32_t to, const uint8_t *frame,
                     size_t len, uint64_t value)
{
    seen *s = ctx;
    if (!frame) {
        if (value >> 48 == 0x57E9 && (value & 0xFFFF) < 2) {
            uint32_t a = (uint32_t)(value & 0xFFFF);
            s->steps[a]++;
            if (now_us > s->lo_us && now_us < s->hi_us)
                s->steps_in[a]++;
        }
        return;
    }
    s->frames++;
    if (from < 3 && to < 3) {
        s->frames_by[from][to]++;
        if (now_us > s->lo_us && now_us < s->hi_us)
            s->in_window[from][to]++;
    }
    if (len == s->last_len && from == s->last_from && to == s->last_to && now_us == s->last_at &&
        len <= sizeof s->last && memcmp(frame, s->last, len) == 0) {
        s->dup_pairs++;
        if (from < 3 && to < 3)
            s->dup_by[from][to]++;
        s->last_len = 0; /* a pair counts once */
    } else if (len <= sizeof s->last) {
        memcpy(s->last, frame, len);
        s->last_len = len;
        s->last_from = from;
        s->last_to = to;
        s->last_at = now_us;
    }
    gossip_header h;
    if (from < 2 && to < 2 && gossip_header_decode(frame, len, &h) == GOSSIP_OK &&
        h.type == GOSSIP_MSG_PUSHSUM) {
        if (h.round < s->last_round[from])
            s->inversions++;
        else
            s->last_round[from] = h.round;
    }
}

static double extra(const sim_summary *s, const char *name)
{
    for (uint32_t i = 0; i < s->nextra; i++)
        if (strcmp(s->extra[i].name, name) == 0)
            return s->extra[i].value;
    fail_msg("no extra %s", name);
    return NAN;
}

static void run(const sim_scenario *sc, sim_summary *out, seen *s)
{
    char err[512];
    sim_run_opts o = {.quiet = 1, .on_trace = s ? on_trace : NULL, .hook_ctx = s};
    if (sim_run(sc, &o, out, err, sizeof err))
        fail_msg("sim_run: %s", err);
}

/* One ring allreduce at t = 100 s (every agent's one long step). */
static const char *RING = "[run]\nseed = 1\nagents = 4\nmode = timed\nduration_s = 130\n"
                          "[model]\nkind = consensus\ndim = 262144\n"
                          "[mixing]\nalgorithm = allreduce\n"
                          "[network]\nlatency_ms = 0.01\nbandwidth_mbps = 1000\n"
                          "bandwidth_trace = bw.txt\n"
                          "[compute]\nstraggler_model = none\nstep_ms = 100000\n"
                          "[shards]\nreplication = 1\n[output]\nevery_s = 1000\n";

static double alpha_beta(double n, double a_s, double m_bytes, double mbps)
{
    return 2 * (n - 1) * a_s + 2 * (n - 1) / n * m_bytes * 8 / (mbps * 1e6);
}

static void within(double got, double want, double tol, const char *what)
{
    if (!(fabs(got - want) <= tol * want))
        fail_msg("%s: %.9f s, expected %.9f s (%+.3f%%)", what, got, want,
                 (got - want) / want * 100);
}

static void bandwidth_trace_drop(void **state)
{
    (void)state;
    /* the bandwidth drops from 1000 to 100 Mb/s at 50 s: the ring at 100 s
     * takes the alpha-beta cost at 100 Mb/s (10 times the transfer) */
    write_file("bw.txt", "# Mb/s\n0 1000\n50 100\n");
    sim_scenario *sc = load("ring.ini", RING, NULL);
    sim_summary a, b;
    run(sc, &a, NULL);
    within(extra(&a, "mix_time_max_s"), alpha_beta(4, 1e-5, 1048576, 100), 0.01, "100 Mb/s");
    run(sc, &b, NULL);
    assert_true(a.trace_hash == b.trace_hash);
    free(sc);
    /* periodic: 1000 Mb/s again from 100 s (period 100 s: 0 -> 1000, 50 -> 100) */
    write_file("bw.txt", "PERIODICITY 100\n0 1000\n50 100\n");
    sc = load("ring.ini", RING, NULL);
    run(sc, &b, NULL);
    within(extra(&b, "mix_time_max_s"), alpha_beta(4, 1e-5, 1048576, 1000), 0.01, "1000 Mb/s");
    assert_true(a.trace_hash != b.trace_hash);
    free(sc);
}

static void latency_trace_lengthens(void **state)
{
    (void)state;
    write_file("bw.txt", "0 1000\n");
    write_file("lat.txt", "0 0.01\n99 2\n");
    const char *sets[] = {"network.latency_trace=lat.txt", NULL};
    /* --set paths are relative to the working directory: give it whole */
    char set[160];
    snprintf(set, sizeof set, "network.latency_trace=%s/lat.txt", dir);
    sets[0] = set;
    sim_scenario *sc = load("ring.ini", RING, sets);
    sim_summary a;
    run(sc, &a, NULL);
    within(extra(&a, "mix_time_max_s"), alpha_beta(4, 2e-3, 1048576, 1000), 0.01, "2 ms");
    free(sc);
}

static void availability_stops_steps(void **state)
{
    (void)state;
    /* agent 0's CPU is stopped from 1 s to 2 s; agent 1 is not in the set */
    write_file("cpu.txt", "1 0\n2 1\n");
    sim_scenario *sc = load("cpu.ini",
                            "[run]\nagents = 2\nmode = timed\nduration_s = 3\n"
                            "[compute]\nstraggler_model = none\nstep_ms = 10\n"
                            "availability_trace = cpu.txt\navailability_trace_agents = 0\n"
                            "[shards]\nreplication = 1\n",
                            NULL);
    seen s = {.lo_us = 1000000, .hi_us = 2000000};
    sim_summary a, b;
    run(sc, &a, &s);
    assert_int_equal(s.steps_in[0], 0);
    assert_true(s.steps_in[1] >= 99 && s.steps_in[1] <= 100);
    /* 3 s of 10 ms steps, one second of them lost */
    assert_true(s.steps[0] >= 199 && s.steps[0] <= 201);
    assert_true(s.steps[1] >= 299 && s.steps[1] <= 300);
    run(sc, &b, NULL);
    assert_true(a.trace_hash == b.trace_hash);
    free(sc);
}

/* delay ms=5 on every agent adds 5 ms to each of the 2(N - 1) steps of a
 * ring; a bandwidth cap of 10 Mb/s on unlimited links gives the alpha-beta
 * cost at 10 Mb/s. */
static void delay_and_bandwidth_faults(void **state)
{
    (void)state;
    static const char *RING2 = "[run]\nagents = 2\nmode = timed\nduration_s = 103\n"
                               "[model]\nkind = consensus\ndim = DIM\n"
                               "[mixing]\nalgorithm = allreduce\n[network]\nlatency_ms = 1\n"
                               "[compute]\nstraggler_model = none\nstep_ms = 100000\n"
                               "[shards]\nreplication = 1\n[output]\nevery_s = 1000\n";
    char text[1024];
    const char *p = strstr(RING2, "DIM");
    snprintf(text, sizeof text, "%.*s256%s", (int)(p - RING2), RING2, p + 3);
    const char *delay[] = {"faults.event=50 delay all ms=5", NULL};
    sim_scenario *sc = load("d.ini", text, delay);
    sim_summary a, b;
    run(sc, &a, NULL);
    within(extra(&a, "mix_time_max_s"), 2 * (1e-3 + 5e-3), 0.01, "delay 5 ms");
    free(sc);
    snprintf(text, sizeof text, "%.*s262144%s", (int)(p - RING2), RING2, p + 3);
    const char *cap[] = {"faults.event=50 bandwidth all mbps=10 duration=60", NULL};
    sc = load("b.ini", text, cap);
    run(sc, &b, NULL);
    within(extra(&b, "mix_time_max_s"), alpha_beta(2, 1e-3, 1048576, 10), 0.01, "10 Mb/s cap");
    free(sc);
    /* the cap ended at 110 s: the same ring at 101 s... is not run; a cap
     * that ended before the ring leaves it unlimited */
    const char *ended[] = {"faults.event=50 bandwidth all mbps=10 duration=10", NULL};
    sc = load("b.ini", text, ended);
    run(sc, &b, NULL);
    within(extra(&b, "mix_time_max_s"), 2 * 1e-3, 0.01, "cap ended");
    free(sc);
}

/* Push-sum between two agents: one push each way every 10 ms step, none
 * waiting for an answer, so pushes on a link may overtake each other. */
static const char *PAIR = "[run]\nagents = 2\nmode = timed\nduration_s = 2\n"
                          "[mixing]\nalgorithm = push-sum\n[network]\nlatency_ms = 1\n"
                          "[compute]\nstraggler_model = none\nstep_ms = 10\n"
                          "[shards]\nreplication = 1\n";

static void duplicates_and_reordering(void **state)
{
    (void)state;
    sim_scenario *sc = load("pair.ini", PAIR, NULL);
    seen plain = {0}, dup = {0}, reo = {0}, jit = {0};
    sim_summary a, b, c;
    run(sc, &a, &plain);
    assert_true(plain.frames > 100);
    assert_int_equal(plain.dup_pairs, 0);
    assert_int_equal(plain.inversions, 0);
    free(sc);
    /* every frame agent 0 sends arrives twice, the second copy right after */
    const char *d[] = {"faults.event=0 duplicate 0 p=1", NULL};
    sc = load("pair.ini", PAIR, d);
    run(sc, &b, &dup);
    assert_true(dup.dup_pairs > 50);
    free(sc);
    /* frames held back up to 50 ms (five steps): some pass later ones */
    const char *r[] = {"faults.event=0 reorder all p=0.5 window=50", NULL};
    sc = load("pair.ini", PAIR, r);
    run(sc, &c, &reo);
    assert_true(reo.inversions > 0);
    sim_summary c2;
    seen reo2 = {0};
    run(sc, &c2, &reo2);
    assert_true(c.trace_hash == c2.trace_hash);
    assert_int_equal(reo.inversions, reo2.inversions);
    free(sc);
    const char *j[] = {"faults.event=0 delay all ms=1 jitter=40", NULL};
    sc = load("pair.ini", PAIR, j);
    run(sc, &c, &jit);
    assert_true(jit.inversions > 0);
    assert_true(a.trace_hash != b.trace_hash && a.trace_hash != c.trace_hash);
    free(sc);
}

/* peer=K: the sender's rule for one receiver only. */
static void per_peer_link_faults(void **state)
{
    (void)state;
    static const char *TRIO = "[run]\nagents = 3\nmode = timed\nduration_s = 2\n"
                              "[mixing]\nalgorithm = push-sum\n[network]\nlatency_ms = 1\n"
                              "[compute]\nstraggler_model = none\nstep_ms = 10\n"
                              "[shards]\nreplication = 1\n";
    const char *d[] = {"faults.event=0 duplicate 0 p=1 peer=1", NULL};
    sim_scenario *sc = load("trio.ini", TRIO, d);
    seen s = {0};
    sim_summary a;
    run(sc, &a, &s);
    assert_true(s.frames_by[0][1] > 20 && s.frames_by[0][2] > 20);
    assert_true(s.dup_by[0][1] > 10);
    assert_true(2 * s.dup_by[0][1] == s.frames_by[0][1]); /* every frame 0 -> 1 twice */
    assert_int_equal(s.dup_by[0][2], 0);
    assert_int_equal(s.dup_by[1][0] + s.dup_by[2][0] + s.dup_by[1][2] + s.dup_by[2][1], 0);
    free(sc);
    /* the peer's rule replaces the all-peers rule for it: no duplicate to 1
     * while its own (delay) rule is on, every frame to 2 doubled */
    const char *both[] = {"faults.event=0 duplicate 0 p=1", "faults.event=0 delay 0 ms=2 peer=1",
                          NULL};
    sc = load("trio.ini", TRIO, both);
    seen s2 = {0};
    run(sc, &a, &s2);
    assert_int_equal(s2.dup_by[0][1], 0);
    assert_true(2 * s2.dup_by[0][2] == s2.frames_by[0][2] && s2.dup_by[0][2] > 10);
    free(sc);
    /* drop: agent 0's frames to 1 lost from 0.5 s to 1.5 s, none else */
    const char *drop[] = {"faults.event=0.5 drop 0 p=1 peer=1 duration=1", NULL};
    sc = load("trio.ini", TRIO, drop);
    seen s3 = {.lo_us = 510000, .hi_us = 1500000};
    run(sc, &a, &s3);
    assert_int_equal(s3.in_window[0][1], 0);
    assert_true(s3.in_window[0][2] > 10 && s3.in_window[1][0] > 10);
    assert_true(s3.frames_by[0][1] > 10); /* before and after */
    free(sc);
}

static void no_effect_and_bad_files(void **state)
{
    (void)state;
    char err[512];
    struct {
        const char *text, *needle;
    } bad[] = {
        {"[run]\nmode = rounds\n[network]\nbandwidth_trace = bw.txt\n",
         "network.bandwidth_trace = " /* ... has no effect: it needs run.mode = timed */},
        {"[run]\nmode = timed\n[network]\nlatency_trace_agents = 1\n",
         "it needs network.latency_trace"},
        {"[run]\nmode = timed\n[compute]\navailability_trace = c.txt\n"
         "availability_trace_agents = 3,40\n",
         "agent 40 out of range"},
        {"[run]\nmode = rounds\n[faults]\nevent = 1 delay all ms=3\n", "needs run.mode = timed"},
        {"[compute]\navailability_trace_agents = x\n", "'x' is not an agent index"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_file("bad.ini", bad[i].text);
        char path[128];
        snprintf(path, sizeof path, "%s/bad.ini", dir);
        sim_scenario *sc = malloc(sizeof *sc);
        sim_scenario_defaults(sc);
        int rc = sim_scenario_load(sc, path, err, sizeof err);
        if (rc == 0)
            rc = sim_scenario_check(sc, err, sizeof err);
        if (rc == 0)
            fail_msg("case %zu accepted", i);
        if (!strstr(err, bad[i].needle))
            fail_msg("case %zu: '%s' lacks '%s'", i, err, bad[i].needle);
        free(sc);
    }
    /* a bad trace file fails the run with its file and line */
    write_file("bw.txt", "0 1000\n5 -3\n");
    sim_scenario *sc = load("ring.ini", RING, NULL);
    sim_summary s;
    sim_run_opts o = {.quiet = 1};
    assert_int_not_equal(sim_run(sc, &o, &s, err, sizeof err), 0);
    if (!strstr(err, "bw.txt:2: '-3' is not a bandwidth"))
        fail_msg("message: %s", err);
    free(sc);
}

static void chaos_link_faults_map(void **state)
{
    (void)state;
    static chaos_sched s;
    char err[256], out[512];
    assert_int_equal(chaos_sched_parse(&s,
                                       "45 delay ms=200 jitter=50 for=10\n"
                                       "50 bandwidth bps=64000 on=1 for=10\n"
                                       "55 duplicate p=0.2 for=5\n"
                                       "58 reorder p=0.3 window=50 on=2 for=5\n",
                                       4, err, sizeof err),
                     0);
    const char *want[] = {"45 delay all ms=200 jitter=50 duration=10",
                          "50 bandwidth 1 mbps=0.064000000000000001 duration=10",
                          "55 duplicate all p=0.2 duration=5",
                          "58 reorder 2 p=0.3 window=50 duration=5"};
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(chaos_event_sim_line(&s.ev[i], out, sizeof out), 1);
        assert_string_equal(out, want[i]);
        if (sim_fault_check_line(out, err, sizeof err))
            fail_msg("'%s': %s", out, err);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bandwidth_trace_drop),      cmocka_unit_test(latency_trace_lengthens),
        cmocka_unit_test(availability_stops_steps),  cmocka_unit_test(delay_and_bandwidth_faults),
        cmocka_unit_test(duplicates_and_reordering), cmocka_unit_test(no_effect_and_bad_files),
        cmocka_unit_test(chaos_link_faults_map),     cmocka_unit_test(per_peer_link_faults),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
