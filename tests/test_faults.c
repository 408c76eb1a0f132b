/* sim/faults: schedule parsing (every kind, every error), ordering,
 * consequences (restart, heal, loss end, slow end), random crash rate
 * against the Poisson mean, loss bursts, determinism. */
#include "tests/harness.h"

#include <math.h>
#include <string.h>

#include "sim/faults.h"

static int build(sim_fault_list *l, uint32_t agents, const char *const *lines, size_t n, char *err)
{
    sim_faults_config c = {
        .agents = agents, .seed = 5, .horizon_us = 100000000ull, .lines = lines, .nlines = n};
    return sim_faults_build(l, &c, err, 256);
}

static void schedule_parsing(void **state)
{
    (void)state;
    const char *lines[] = {
        "30 crash 3,5-7 restart_after=2.5",
        "10 join 8-9",
        "12.5 partition 0-4/5-9 duration=5",
        "40   loss 0.3   duration=1",
        "50 slow 1 factor=3 duration=10",
        "60 restart 3",
        "20 heal",
        "70 crash all",
        "80 slow random:4 factor=2",
    };
    sim_fault_list l;
    char err[256] = "";
    assert_int_equal(build(&l, 10, lines, 9, err), SIM_FAULTS_OK);
    struct {
        uint64_t t;
        sim_fault_kind k;
        uint32_t count;
    } want[] = {
        {10000000, SIM_FAULT_JOIN, 2},
        {12500000, SIM_FAULT_PARTITION, 10},
        {17500000, SIM_FAULT_HEAL, 0},
        {20000000, SIM_FAULT_HEAL, 0},
        {30000000, SIM_FAULT_CRASH, 4},
        {32500000, SIM_FAULT_RESTART, 4},
        {40000000, SIM_FAULT_LOSS_START, 0},
        {41000000, SIM_FAULT_LOSS_END, 0},
        /* at 60 s: line 5's own slow-end comes before line 6's restart */
        {50000000, SIM_FAULT_SLOW, 1},
        {60000000, SIM_FAULT_SLOW_END, 1},
        {60000000, SIM_FAULT_RESTART, 1},
        {70000000, SIM_FAULT_CRASH, 10},
        {80000000, SIM_FAULT_SLOW, 4},
    };
    assert_int_equal(l.len, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < l.len; i++) {
        if (l.events[i].time_us != want[i].t || l.events[i].kind != want[i].k ||
            l.events[i].count != want[i].count)
            fail_msg("event %zu: %llu %s x%u, expected %llu %s x%u", i,
                     (unsigned long long)l.events[i].time_us, sim_fault_kind_name(l.events[i].kind),
                     l.events[i].count, (unsigned long long)want[i].t,
                     sim_fault_kind_name(want[i].k), want[i].count);
    }
    /* crash targets 3,5,6,7 */
    const sim_fault *crash = &l.events[4];
    uint32_t ct[] = {3, 5, 6, 7};
    for (uint32_t i = 0; i < 4; i++)
        assert_int_equal(l.targets[crash->first + i], ct[i]);
    assert_int_equal(l.events[5].first, crash->first); /* restart: same agents */
    assert_int_equal(crash->line, 0);
    /* partition groups: 0-4 in 1, 5-9 in 2 */
    const sim_fault *part = &l.events[1];
    for (uint32_t i = 0; i < 10; i++) {
        assert_int_equal(l.targets[part->first + i], i);
        assert_int_equal(l.groups[part->first + i], i < 5 ? 1 : 2);
    }
    assert_true(l.events[6].value == 0.3);
    assert_true(l.events[8].value == 3.0);
    /* random:4 picks 4 distinct agents */
    const sim_fault *rs = &l.events[12];
    for (uint32_t i = 0; i < 4; i++)
        for (uint32_t j = i + 1; j < 4; j++)
            assert_true(l.targets[rs->first + i] != l.targets[rs->first + j]);
    /* 8 and 9 join later; the crashed ones were present at start */
    assert_true(sim_fault_list_absent_at_start(&l, 8));
    assert_true(sim_fault_list_absent_at_start(&l, 9));
    assert_false(sim_fault_list_absent_at_start(&l, 3));
    assert_false(sim_fault_list_absent_at_start(&l, 0));
    sim_fault_list_free(&l);
}

static void default_restart_after(void **state)
{
    (void)state;
    const char *lines[] = {"1 crash 2", "2 crash 3 restart_after=0"};
    sim_faults_config c = {
        .agents = 4, .horizon_us = 1, .restart_after_s = 4, .lines = lines, .nlines = 2};
    sim_fault_list l;
    char err[256];
    assert_int_equal(sim_faults_build(&l, &c, err, sizeof err), 0);
    assert_int_equal(l.len, 3); /* crash 2, crash 3, restart 2 at 5 s; 3 stays down */
    assert_int_equal(l.events[2].kind, SIM_FAULT_RESTART);
    assert_int_equal(l.events[2].time_us, 5000000);
    assert_int_equal(l.targets[l.events[2].first], 2);
    sim_fault_list_free(&l);
}

static void every_syntax_error(void **state)
{
    (void)state;
    struct {
        const char *line, *needle;
    } bad[] = {
        {"", "expected 'TIME KIND"},
        {"30", "expected 'TIME KIND"},
        {"abc crash 1", "'abc' is not a time"},
        {"-1 crash 1", "'-1' is not a time"},
        {"nan crash 1", "not a time"},
        {"5 explode 1", "unknown fault 'explode'"},
        {"5 crash", "needs targets"},
        {"5 crash restart_after=1", "needs targets"},
        {"5 crash 7-3", "'7-3' is not an agent index"},
        {"5 crash 1,,2", "'' is not an agent index"},
        {"5 crash 1,", "ends with ','"},
        {"5 crash x", "'x' is not an agent"},
        {"5 crash random:0", "random:K needs a count"},
        {"5 crash 1 restart=1", "takes no option 'restart'"},
        {"5 crash 1 restart_after=-2", "not a non-negative number"},
        {"5 crash 1 bogus", "unexpected 'bogus'"},
        {"5 loss 1.5", "not a loss probability"},
        {"5 loss", "needs a probability"},
        {"5 slow 1", "needs factor="},
        {"5 slow 1 factor=0.5", "slowdown factor"},
        {"5 heal duration=3", "takes no option 'duration'"},
        {"5 partition", "needs groups"},
        {"5 partition 0-1//3", "empty partition group"},
        {"5 partition 0-1/", "empty partition group"},
        {"5 restart 1 a=1 b=2 c=3 d=4 e=5 f=6", "too many words"},
        {"5 delay 1", "needs ms="},
        {"5 delay ms=10", "needs targets"},
        {"5 delay 1 ms=70000", "milliseconds in [0, 60000]"},
        {"5 delay 1 ms=5 window=3", "takes no option 'window'"},
        {"5 bandwidth all", "needs mbps="},
        {"5 bandwidth all mbps=0", "a bandwidth in (0, 1e7]"},
        {"5 duplicate 2 p=1.5", "a probability in [0, 1]"},
        {"5 duplicate 2", "needs p="},
        {"5 reorder 2 p=0.5", "needs window="},
        {"5 reorder 2 window=10", "needs p="},
        {"5 delay 1 ms=3 peer=1.5", "peer=1.5: an agent index"},
        {"5 drop 1", "needs p="},
        {"5 drop 1 p=2", "a probability in [0, 1]"},
        {"5 bandwidth 1 mbps=3 peer=2", "takes no option 'peer'"},
    };
    char err[256];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        if (sim_fault_check_line(bad[i].line, err, sizeof err) != SIM_FAULTS_ESYNTAX)
            fail_msg("'%s' accepted", bad[i].line);
        if (!strstr(err, bad[i].needle))
            fail_msg("'%s': message '%s' lacks '%s'", bad[i].line, err, bad[i].needle);
    }
    char longline[SIM_FAULT_LINE_MAX + 10];
    memset(longline, ' ', sizeof longline);
    memcpy(longline, "5 crash 1", 9);
    longline[sizeof longline - 1] = 0;
    assert_int_equal(sim_fault_check_line(longline, err, sizeof err), SIM_FAULTS_ESYNTAX);
    assert_int_equal(sim_fault_check_line("5 crash 1", err, sizeof err), SIM_FAULTS_OK);

    /* range errors need the number of agents: they come from build */
    struct {
        const char *line, *needle;
    } range[] = {
        {"5 crash 10", "agent 10 out of range (0..9)"},
        {"5 partition 0-5/5-9", "agent 5 is in two groups"},
        {"5 join random:11", "random:11 but only 10 agents"},
        {"5 frobnicate", "fault line 1 ('5 frobnicate'): unknown fault"},
    };
    for (size_t i = 0; i < sizeof range / sizeof range[0]; i++) {
        sim_fault_list l;
        const char *one[] = {range[i].line};
        int rc = build(&l, 10, one, 1, err);
        assert_true(rc == SIM_FAULTS_ERANGE || rc == SIM_FAULTS_ESYNTAX);
        if (!strstr(err, range[i].needle))
            fail_msg("'%s': message '%s' lacks '%s'", range[i].line, err, range[i].needle);
        assert_int_equal(l.len, 0);
        assert_null(l.events);
    }
    sim_fault_list l;
    sim_faults_config c = {.agents = 4, .crash_rate_per_s = -1};
    assert_int_equal(sim_faults_build(&l, &c, err, sizeof err), SIM_FAULTS_ERANGE);
    c = (sim_faults_config){.agents = 4, .loss_burst_prob = 2};
    assert_int_equal(sim_faults_build(&l, &c, err, sizeof err), SIM_FAULTS_ERANGE);
}

static void crash_rate_is_poisson(void **state)
{
    (void)state;
    uint64_t seed = test_seed(31);
    /* rate 2/s for 1000 s: count ~ Poisson(2000), sd 44.7; allow 5 sd */
    sim_faults_config c = {.agents = 1000,
                           .seed = seed,
                           .horizon_us = 1000000000ull,
                           .crash_rate_per_s = 2,
                           .restart_after_s = 30};
    sim_fault_list l;
    char err[256];
    assert_int_equal(sim_faults_build(&l, &c, err, sizeof err), 0);
    size_t crashes = 0, restarts = 0;
    double gaps = 0, gaps2 = 0;
    uint64_t prev = 0;
    uint8_t down[1000] = {0};
    for (size_t i = 0; i < l.len; i++) {
        const sim_fault *e = &l.events[i];
        assert_true(i == 0 || e->time_us >= l.events[i - 1].time_us);
        assert_true(e->time_us < c.horizon_us);
        assert_int_equal(e->count, 1);
        assert_int_equal(e->line, -1);
        uint32_t a = l.targets[e->first];
        if (e->kind == SIM_FAULT_CRASH) {
            if (down[a])
                fail_msg("seed %llu: agent %u crashed while down", (unsigned long long)seed, a);
            down[a] = 1;
            double g = (double)(e->time_us - prev) / 1e6;
            gaps += g, gaps2 += g * g;
            prev = e->time_us;
            crashes++;
        } else {
            assert_int_equal(e->kind, SIM_FAULT_RESTART);
            assert_true(down[a]);
            down[a] = 0;
            restarts++;
        }
    }
    if (fabs((double)crashes - 2000) > 5 * sqrt(2000))
        fail_msg("seed %llu: %zu crashes in 1000 s at 2/s", (unsigned long long)seed, crashes);
    /* exponential gaps: mean 1/rate = 0.5 s, sd 0.5 s */
    double mean = gaps / (double)crashes, sd = sqrt(gaps2 / (double)crashes - mean * mean);
    if (fabs(mean - 0.5) > 0.05 || fabs(sd - 0.5) > 0.05)
        fail_msg("seed %llu: gaps mean %g sd %g, expected 0.5 0.5", (unsigned long long)seed, mean,
                 sd);
    /* every crash before 970 s has its restart within the horizon */
    assert_true(restarts <= crashes && restarts + 100 >= crashes);
    sim_fault_list_free(&l);

    /* without restarts, no more crashes than agents */
    c.agents = 20;
    c.restart_after_s = 0;
    assert_int_equal(sim_faults_build(&l, &c, err, sizeof err), 0);
    assert_int_equal(l.len, 20);
    sim_fault_list_free(&l);
}

static void loss_bursts(void **state)
{
    (void)state;
    uint64_t seed = test_seed(32);
    /* renewal process: a burst of 1 s, then an exponential gap of mean 4 s;
     * over 10000 s expect 10000 / 5 = 2000 bursts (sd of the count ~ 36) */
    sim_faults_config c = {.agents = 3,
                           .seed = seed,
                           .horizon_us = 10000000000ull,
                           .loss_burst_rate_per_s = 0.25,
                           .loss_burst_prob = 0.4,
                           .loss_burst_s = 1};
    sim_fault_list l;
    char err[256];
    assert_int_equal(sim_faults_build(&l, &c, err, sizeof err), 0);
    size_t bursts = 0;
    int on = 0;
    for (size_t i = 0; i < l.len; i++) {
        const sim_fault *e = &l.events[i];
        if (e->kind == SIM_FAULT_LOSS_START) {
            assert_false(on); /* never overlapping */
            assert_true(e->value == 0.4);
            on = 1;
            bursts++;
        } else {
            assert_int_equal(e->kind, SIM_FAULT_LOSS_END);
            assert_true(on);
            assert_int_equal(e->time_us - l.events[i - 1].time_us, 1000000);
            on = 0;
        }
    }
    if (fabs((double)bursts - 2000) > 200)
        fail_msg("seed %llu: %zu bursts, expected ~2000", (unsigned long long)seed, bursts);
    sim_fault_list_free(&l);
}

static uint64_t list_hash(uint64_t seed)
{
    const char *lines[] = {"3 crash random:5", "4 slow random:2 factor=2"};
    sim_faults_config c = {.agents = 100,
                           .seed = seed,
                           .horizon_us = 600000000ull,
                           .crash_rate_per_s = 0.5,
                           .restart_after_s = 7,
                           .loss_burst_rate_per_s = 0.1,
                           .loss_burst_prob = 0.2,
                           .loss_burst_s = 2,
                           .lines = lines,
                           .nlines = 2};
    sim_fault_list l;
    char err[256];
    assert_int_equal(sim_faults_build(&l, &c, err, sizeof err), 0);
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < l.len; i++) {
        h = (h ^ l.events[i].time_us) * 1099511628211ull;
        h = (h ^ (uint64_t)l.events[i].kind) * 1099511628211ull;
        for (uint32_t j = 0; j < l.events[i].count; j++)
            h = (h ^ l.targets[l.events[i].first + j]) * 1099511628211ull;
    }
    sim_fault_list_free(&l);
    return h;
}

/* The link faults of the agent's [faults] section: each kind with its
 * values and its end after duration=. */
static void link_fault_lines(void **state)
{
    (void)state;
    const char *lines[] = {
        "1 delay 0,2 ms=20 jitter=5 duration=2",
        "2 bandwidth all mbps=0.064",
        "3 duplicate 1 p=0.2 duration=1",
        "4 reorder 3 p=0.3 window=50 duration=0.5 peer=1",
    };
    sim_fault_list l;
    char err[256] = "";
    if (build(&l, 4, lines, 4, err))
        fail_msg("%s", err);
    struct {
        uint64_t t;
        sim_fault_kind k;
        uint32_t count;
        double v, v2;
    } want[] = {
        {1000000, SIM_FAULT_DELAY, 2, 20, 5},        {2000000, SIM_FAULT_BANDWIDTH, 4, 0.064, 0},
        {3000000, SIM_FAULT_DELAY_END, 2, 0, 0},     {3000000, SIM_FAULT_DUPLICATE, 1, 0.2, 0},
        {4000000, SIM_FAULT_DUPLICATE_END, 1, 0, 0}, {4000000, SIM_FAULT_REORDER, 1, 0.3, 50},
        {4500000, SIM_FAULT_REORDER_END, 1, 0, 0},
    };
    assert_int_equal(l.len, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < l.len; i++) {
        const sim_fault *e = &l.events[i];
        if (e->time_us != want[i].t || e->kind != want[i].k || e->count != want[i].count ||
            e->value != want[i].v || e->value2 != want[i].v2)
            fail_msg("event %zu: %llu %s x%u %g %g", i, (unsigned long long)e->time_us,
                     sim_fault_kind_name(e->kind), e->count, e->value, e->value2);
    }
    assert_int_equal(l.targets[l.events[0].first + 1], 2);
    assert_int_equal(l.targets[l.events[5].first], 3);
    assert_int_equal(l.events[0].peer, -1);
    assert_int_equal(l.events[5].peer, 1);
    assert_int_equal(l.events[6].peer, 1); /* its end names the peer too */
    const char *far[] = {"1 delay 0 ms=1 peer=4"};
    sim_fault_list l2;
    assert_int_equal(build(&l2, 4, far, 1, err), SIM_FAULTS_ERANGE);
    assert_non_null(strstr(err, "peer 4 out of range (0..3)"));
    assert_string_equal(sim_fault_kind_name(SIM_FAULT_REORDER_END), "reorder-end");
    sim_fault_list_free(&l);
}

/* Trace changes join the list in time order, after the events already
 * there at the same time, for the agents of the set. */
static void trace_events(void **state)
{
    (void)state;
    const char *lines[] = {"2 crash 1"};
    sim_fault_list l;
    char err[256] = "";
    assert_int_equal(build(&l, 6, lines, 1, err), 0);
    sim_trace t;
    assert_int_equal(sim_trace_parse(&t, SIM_TRACE_BANDWIDTH, "PERIODICITY 4\n0 10\n2 1\n", "bw",
                                     err, sizeof err),
                     0);
    uint8_t member[6];
    assert_int_equal(sim_faults_targets("1,3-4", 6, member, err, sizeof err), 0);
    uint8_t want_m[6] = {0, 1, 0, 1, 1, 0};
    assert_memory_equal(member, want_m, 6);
    assert_int_equal(
        sim_faults_add_trace(&l, SIM_FAULT_BANDWIDTH_TRACE, &t, member, 7000000, err, sizeof err),
        0);
    /* 0 (10), 2 crash, 2 (1), 4 (10), 6 (1) */
    assert_int_equal(l.len, 5);
    assert_int_equal(l.events[0].kind, SIM_FAULT_BANDWIDTH_TRACE);
    assert_true(l.events[0].value == 10);
    assert_int_equal(l.events[1].kind, SIM_FAULT_CRASH);
    assert_int_equal(l.events[2].kind, SIM_FAULT_BANDWIDTH_TRACE);
    assert_int_equal(l.events[2].time_us, 2000000);
    assert_true(l.events[2].value == 1);
    assert_int_equal(l.events[4].time_us, 6000000);
    assert_int_equal(l.events[4].count, 3);
    assert_int_equal(l.targets[l.events[4].first + 2], 4);
    assert_int_equal(l.targets[l.events[1].first], 1); /* the crash kept its target */
    assert_int_equal(sim_faults_add_trace(&l, SIM_FAULT_CRASH, &t, member, 1, err, sizeof err),
                     SIM_FAULTS_ERANGE);
    sim_trace_free(&t);
    sim_fault_list_free(&l);
    assert_int_equal(sim_faults_targets("all", 3, member, err, sizeof err), 0);
    assert_true(member[0] && member[1] && member[2]);
    assert_int_equal(sim_faults_targets("2,7", 6, NULL, err, sizeof err), SIM_FAULTS_ERANGE);
    assert_non_null(strstr(err, "agent 7 out of range"));
    assert_int_equal(sim_faults_targets("random:2", 6, NULL, err, sizeof err), SIM_FAULTS_ESYNTAX);
}

static void deterministic(void **state)
{
    (void)state;
    uint64_t seed = test_seed(33);
    uint64_t a = list_hash(seed), b = list_hash(seed);
    if (a != b)
        fail_msg("seed %llu: two builds differ", (unsigned long long)seed);
    assert_true(list_hash(seed + 1) != a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(schedule_parsing),   cmocka_unit_test(default_restart_after),
        cmocka_unit_test(every_syntax_error), cmocka_unit_test(crash_rate_is_poisson),
        cmocka_unit_test(loss_bursts),        cmocka_unit_test(deterministic),
        cmocka_unit_test(link_fault_lines),   cmocka_unit_test(trace_events),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
