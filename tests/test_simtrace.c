/* sim/trace: trace files (time, value lines, PERIODICITY), errors with the
 * file and line, the value at a time, the changes over a horizon, and the
 * end of a step of work under a CPU availability trace. */
#include "tests/harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim/trace.h"

static void parse_ok(sim_trace *t, sim_trace_kind k, const char *text)
{
    char err[256];
    if (sim_trace_parse(t, k, text, "t.txt", err, sizeof err))
        fail_msg("%s", err);
}

static void values_and_periods(void **state)
{
    (void)state;
    sim_trace t;
    parse_ok(&t, SIM_TRACE_BANDWIDTH, "# bw\n\n1 100   # first\n2.5 10\n4 100\n");
    assert_int_equal(t.n, 3);
    assert_int_equal(t.period_us, 0);
    assert_true(sim_trace_value_at(&t, 0, 7) == 7); /* before the first point */
    assert_true(sim_trace_value_at(&t, 999999, 7) == 7);
    assert_true(sim_trace_value_at(&t, 1000000, 7) == 100);
    assert_true(sim_trace_value_at(&t, 2499999, 7) == 100);
    assert_true(sim_trace_value_at(&t, 2500000, 7) == 10);
    assert_true(sim_trace_value_at(&t, 99000000, 7) == 100);
    sim_trace_free(&t);

    /* period 10 s from points at 2 and 6: before 2 in later periods, the
     * value of 6 holds */
    parse_ok(&t, SIM_TRACE_LATENCY, "PERIODICITY 10\n2 5\n6 50\n");
    assert_int_equal(t.period_us, 10000000);
    assert_true(sim_trace_value_at(&t, 1000000, -1) == -1);
    assert_true(sim_trace_value_at(&t, 3000000, -1) == 5);
    assert_true(sim_trace_value_at(&t, 7000000, -1) == 50);
    assert_true(sim_trace_value_at(&t, 11000000, -1) == 50);
    assert_true(sim_trace_value_at(&t, 12000000, -1) == 5);
    assert_true(sim_trace_value_at(&t, 36000000, -1) == 50);
    sim_trace_free(&t);
}

typedef struct seen {
    uint64_t t[16];
    double v[16];
    int n;
} seen;

static int record(void *ctx, uint64_t t_us, double v)
{
    seen *s = ctx;
    assert_true(s->n < 16);
    s->t[s->n] = t_us;
    s->v[s->n++] = v;
    return 0;
}

static void changes_over_a_horizon(void **state)
{
    (void)state;
    sim_trace t;
    parse_ok(&t, SIM_TRACE_LATENCY, "periodicity 10\n2 5\n6 50\n");
    seen s = {0};
    assert_int_equal(sim_trace_changes(&t, 25000000, record, &s), 0);
    /* 2, 6, 12, 16, 22 (26 is beyond) */
    assert_int_equal(s.n, 5);
    uint64_t want[] = {2000000, 6000000, 12000000, 16000000, 22000000};
    for (int i = 0; i < 5; i++) {
        assert_int_equal(s.t[i], want[i]);
        assert_true(s.v[i] == (i % 2 ? 50 : 5));
    }
    /* too many changes: refused before any */
    s.n = 0;
    assert_int_equal(sim_trace_changes(&t, (uint64_t)1e13, record, &s), SIM_TRACE_ETOOMANY);
    assert_int_equal(s.n, 0);
    sim_trace_free(&t);
}

/* Availability: work at full speed stretched over the trace. */
static void availability_stretches_work(void **state)
{
    (void)state;
    sim_trace t;
    parse_ok(&t, SIM_TRACE_AVAILABILITY, "1 0\n2 0.5\n3 1\n");
    /* before 1 s at full speed */
    assert_int_equal(sim_trace_work_end_us(&t, 0, 500000), 500000);
    /* 0.8 s of work from 0.5 s: 0.5 s done by 1 s, nothing in [1, 2),
     * 0.3 s at half speed takes 0.6 s: ends at 2.6 s */
    assert_int_equal(sim_trace_work_end_us(&t, 500000, 800000), 2600000);
    /* started inside the stop */
    assert_int_equal(sim_trace_work_end_us(&t, 1500000, 100000), 2200000);
    /* half speed to 3 s (0.25 s of work), then full speed again */
    assert_int_equal(sim_trace_work_end_us(&t, 2500000, 1000000), 3750000);
    sim_trace_free(&t);

    /* a CPU that stops for good */
    parse_ok(&t, SIM_TRACE_AVAILABILITY, "1 0\n");
    assert_int_equal(sim_trace_work_end_us(&t, 0, 2000000), UINT64_MAX);
    sim_trace_free(&t);

    /* periodic: on for 1 s, off for 1 s; 10.5 s of work from 0 ends
     * at 20.5 s (and skipping whole periods gives the same) */
    parse_ok(&t, SIM_TRACE_AVAILABILITY, "PERIODICITY 2\n0 1\n1 0\n");
    assert_int_equal(sim_trace_work_end_us(&t, 0, 10500000), 20500000);
    assert_int_equal(sim_trace_work_end_us(&t, 1000000, 1000000), 3000000);
    sim_trace_free(&t);
    parse_ok(&t, SIM_TRACE_AVAILABILITY, "PERIODICITY 2\n0 0\n");
    assert_int_equal(sim_trace_work_end_us(&t, 0, 10), UINT64_MAX);
    sim_trace_free(&t);
}

static void errors_name_the_line(void **state)
{
    (void)state;
    struct {
        sim_trace_kind k;
        const char *text, *needle;
    } bad[] = {
        {SIM_TRACE_BANDWIDTH, "0 10\n1 0\n", "t.txt:2: '0' is not a bandwidth in Mb/s"},
        {SIM_TRACE_BANDWIDTH, "0 10\n1 x\n", "t.txt:2: 'x' is not a bandwidth"},
        {SIM_TRACE_AVAILABILITY, "0 1.5\n", "t.txt:1: '1.5' is not an availability in [0, 1]"},
        {SIM_TRACE_LATENCY, "# c\n0 1\n\n5 2\n5 3\n", "t.txt:5: time 5 is not after"},
        {SIM_TRACE_LATENCY, "-1 2\n", "t.txt:1: '-1' is not a time in seconds"},
        {SIM_TRACE_LATENCY, "0 1 2\n", "t.txt:1: expected 'TIME VALUE'"},
        {SIM_TRACE_LATENCY, "1\n", "t.txt:1: expected 'TIME VALUE'"},
        {SIM_TRACE_LATENCY, "0 1\nPERIODICITY 5\n", "t.txt:2: PERIODICITY must come once"},
        {SIM_TRACE_LATENCY, "PERIODICITY 0\n0 1\n", "t.txt:1: '0' is not a period"},
        {SIM_TRACE_LATENCY, "PERIODICITY 5\n0 1\n5 2\n", "PERIODICITY 5 is not after"},
        {SIM_TRACE_LATENCY, "# nothing\n", "t.txt: no 'TIME VALUE' line"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sim_trace t;
        char err[256] = "";
        int rc = sim_trace_parse(&t, bad[i].k, bad[i].text, "t.txt", err, sizeof err);
        assert_int_equal(rc, SIM_TRACE_EPARSE);
        if (!strstr(err, bad[i].needle))
            fail_msg("case %zu: '%s' lacks '%s'", i, err, bad[i].needle);
        assert_int_equal(t.n, 0);
        assert_null(t.t_us);
    }
    /* files: missing, and one that loads */
    char path[] = "/tmp/murmur_trace_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "0 5\n10 1\n", 9), 9);
    close(fd);
    sim_trace t;
    char err[256];
    assert_int_equal(sim_trace_load(&t, SIM_TRACE_BANDWIDTH, path, err, sizeof err), 0);
    assert_int_equal(t.n, 2);
    sim_trace_free(&t);
    unlink(path);
    assert_int_equal(sim_trace_load(&t, SIM_TRACE_BANDWIDTH, path, err, sizeof err), SIM_TRACE_EIO);
    assert_non_null(strstr(err, path));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(values_and_periods),
        cmocka_unit_test(changes_over_a_horizon),
        cmocka_unit_test(availability_stretches_work),
        cmocka_unit_test(errors_name_the_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
