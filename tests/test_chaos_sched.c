/* agent/chaos_sched: the schedule text form of murmur chaos (parse, errors
 * that name the line, write/read round trip), random schedules (the same
 * seed gives the same schedule; bounds), the control words of each fault
 * and its undo, and the simulator's fault line of each fault. */
#include "tests/harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/chaos_sched.h"

static const char *const example = "# a comment\n"
                                   "duration 120\n"
                                   "30 drop p=0.3 on=2 for=10\n"
                                   "10 partition sides=0,1/2,3 for=15   # trailing comment\n"
                                   "45 delay ms=200 jitter=50 for=10\n"
                                   "58 reorder p=0.3 window=50 for=5\n"
                                   "70 pause on=3 for=8\n"
                                   "85 slow on=0 factor=4 for=10\n"
                                   "100 kill on=1 for=10\n";

static void parse_and_round_trip(void **state)
{
    (void)state;
    static chaos_sched s, back;
    char err[256] = "";
    assert_int_equal(chaos_sched_parse(&s, example, 4, err, sizeof err), 0);
    assert_int_equal(s.n, 7);
    assert_true(s.duration_s == 120);
    assert_int_equal(s.ev[0].action, CHAOS_PARTITION); /* sorted by time */
    assert_true(s.ev[0].side_a == 0x3 && s.ev[0].side_b == 0xc);
    assert_int_equal(s.ev[1].action, CHAOS_DROP);
    assert_int_equal(s.ev[1].on, 2);
    assert_int_equal(s.ev[6].action, CHAOS_KILL);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    chaos_sched_write(&s, f);
    fclose(f);
    assert_int_equal(chaos_sched_parse(&back, text, 4, err, sizeof err), 0);
    assert_int_equal(back.n, s.n);
    assert_memory_equal(back.ev, s.ev, s.n * sizeof s.ev[0]);
    free(text);
}

static void errors_name_the_line(void **state)
{
    (void)state;
    static chaos_sched s;
    char err[256];
    struct {
        const char *text, *want;
    } bad[] = {
        {"5 drop p=0.1\n", "line 1: drop needs for="},
        {"\n5 explode for=1\n", "line 2: 'explode' is not an action"},
        {"5 kill for=3\n", "needs on=MEMBER"},
        {"5 drop p=2 for=3\n", "bad value for 'p'"},
        {"5 pause on=4 for=3\n", "bad value for 'on'"},
        {"5 partition sides=0,1/1,2 for=3\n", "bad value for 'sides'"},
        {"5 drop p=0.1 for=3 color=red\n", "unknown key 'color'"},
        {"x drop p=0.1 for=3\n", "not a time"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        assert_int_equal(chaos_sched_parse(&s, bad[i].text, 4, err, sizeof err), -1);
        if (!strstr(err, bad[i].want))
            fail_msg("'%s': got '%s', want '%s'", bad[i].text, err, bad[i].want);
    }
}

static void random_is_seeded_and_bounded(void **state)
{
    (void)state;
    uint64_t seed = test_seed(7);
    printf("TEST_SEED=%llu\n", (unsigned long long)seed);
    static chaos_sched a, b, c;
    chaos_sched_random(&a, seed, 4, 120, 4, 1);
    chaos_sched_random(&b, seed, 4, 120, 4, 1);
    chaos_sched_random(&c, seed + 1, 4, 120, 4, 1);
    assert_true(a.n > 0);
    assert_int_equal(a.n, b.n);
    assert_memory_equal(a.ev, b.ev, a.n * sizeof a.ev[0]);
    assert_true(c.n != a.n || memcmp(a.ev, c.ev, a.n * sizeof a.ev[0]));
    double end = 0;
    for (size_t i = 0; i < a.n; i++) {
        const chaos_event *e = &a.ev[i];
        assert_true(e->at_s >= 20 && e->at_s >= end); /* one fault at a time */
        assert_true(e->for_s >= 5 && e->for_s <= 15);
        end = e->at_s + e->for_s;
        assert_true(end <= 120 - 30);
        assert_true(e->on < 4);
        if (e->action == CHAOS_PARTITION)
            assert_true(e->side_a && e->side_b && !(e->side_a & e->side_b) &&
                        (e->side_a | e->side_b) == 0xf);
    }
    chaos_sched_random(&a, seed, 4, 600, 10, 0); /* no kill when not allowed */
    for (size_t i = 0; i < a.n; i++)
        assert_int_not_equal(a.ev[i].action, CHAOS_KILL);
}

/* The coverage rule of chaos_sched_random (chaos_sched.h): distinct kinds
 * first, the nemesis's seven before the others, over many seeds and run
 * lengths; faults never overlap and stay in the window. */
static void random_covers_every_kind(void **state)
{
    (void)state;
    uint64_t seed = test_seed(7);
    printf("TEST_SEED=%llu\n", (unsigned long long)seed);
    static const chaos_action core[] = {CHAOS_KILL, CHAOS_PAUSE,     CHAOS_SLOW,   CHAOS_PARTITION,
                                        CHAOS_DROP, CHAOS_BANDWIDTH, CHAOS_CORRUPT};
    /* the test suite's run: 4 members, 2 minutes, 4 a minute */
    assert_int_equal(chaos_sched_random_count(120, 4), 8);
    assert_int_equal(chaos_sched_random_count(600, 10), 78); /* 550 s / 7 s */
    assert_int_equal(chaos_sched_random_count(40, 4), 0);    /* no room after warm-up + settle */
    static const struct {
        int n;
        double duration, rate;
        int kill;
    } runs[] = {{4, 120, 4, 1}, {4, 600, 10, 1}, {2, 90, 4, 1}, {4, 120, 4, 0},
                {1, 120, 4, 1}, {8, 300, 2, 1},  {4, 57, 60, 1}};
    static chaos_sched a;
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++)
        for (uint64_t s = seed; s < seed + 200; s++) {
            chaos_sched_random(&a, s, runs[r].n, runs[r].duration, runs[r].rate, runs[r].kill);
            size_t k = chaos_sched_random_count(runs[r].duration, runs[r].rate);
            assert_int_equal(a.n, k);
            int count[CHAOS_ACTION_COUNT] = {0}, allowed = 0, core_allowed = 0;
            double end = 0;
            for (size_t i = 0; i < a.n; i++) {
                const chaos_event *e = &a.ev[i];
                count[e->action]++;
                assert_true(e->at_s >= CHAOS_RANDOM_WARMUP_S && e->at_s >= end + (i ? 2 : 0));
                assert_true(e->for_s >= 5 && e->for_s <= 15);
                end = e->at_s + e->for_s;
                assert_true(end <= runs[r].duration - CHAOS_RANDOM_SETTLE_S);
                assert_true(e->on < runs[r].n);
                char why[256];
                static chaos_sched one;
                char line[512];
                FILE *f = fmemopen(line, sizeof line, "w");
                chaos_sched one_src = {.n = 1};
                one_src.ev[0] = *e;
                chaos_sched_write(&one_src, f);
                fclose(f);
                if (chaos_sched_parse(&one, line, runs[r].n, why, sizeof why))
                    fail_msg("seed %llu: '%s' does not parse: %s", (unsigned long long)s, line,
                             why);
            }
            for (int kind = 0; kind < CHAOS_ACTION_COUNT; kind++) {
                int ok = !((kind == CHAOS_KILL && (!runs[r].kill || runs[r].n < 2)) ||
                           (kind == CHAOS_PARTITION && runs[r].n < 2));
                allowed += ok;
                if (!ok)
                    assert_int_equal(count[kind], 0);
            }
            for (size_t c = 0; c < sizeof core / sizeof core[0]; c++)
                core_allowed += !((core[c] == CHAOS_KILL && (!runs[r].kill || runs[r].n < 2)) ||
                                  (core[c] == CHAOS_PARTITION && runs[r].n < 2));
            int distinct = 0, core_seen = 0;
            for (int kind = 0; kind < CHAOS_ACTION_COUNT; kind++)
                distinct += count[kind] > 0;
            for (size_t c = 0; c < sizeof core / sizeof core[0]; c++)
                core_seen += count[core[c]] > 0;
            /* min(k, kinds) distinct kinds, and the core ones first */
            size_t want = k < (size_t)allowed ? k : (size_t)allowed;
            if ((size_t)distinct != want ||
                core_seen != (k < (size_t)core_allowed ? (int)k : core_allowed))
                fail_msg("seed %llu, %d members, %g s at %g/min: %d kinds (%d of the nemesis's), "
                         "want %zu (%d)",
                         (unsigned long long)s, runs[r].n, runs[r].duration, runs[r].rate, distinct,
                         core_seen, want, k < (size_t)core_allowed ? (int)k : core_allowed);
        }
    /* the suite's schedule: all seven of the nemesis for every seed */
    for (uint64_t s = 0; s < 1000; s++) {
        chaos_sched_random(&a, s, 4, 120, 4, 1);
        int count[CHAOS_ACTION_COUNT] = {0};
        for (size_t i = 0; i < a.n; i++)
            count[a.ev[i].action]++;
        for (size_t c = 0; c < sizeof core / sizeof core[0]; c++)
            assert_true(count[core[c]] > 0);
    }
}

static void requests_and_sim_lines(void **state)
{
    (void)state;
    static chaos_sched s;
    char err[256], out[512];
    assert_int_equal(chaos_sched_parse(&s, example, 4, err, sizeof err), 0);
    uint64_t ids[4] = {0x11, 0x22, 0x33, 0x44};
    /* partition 0,1 / 2,3: member 0 cuts 2 and 3 off, member 3 cuts 0 and 1 */
    chaos_event_request(&s.ev[0], 0, ids, 4, 0, out, sizeof out);
    assert_string_equal(out, "partition=0000000000000033,0000000000000044");
    chaos_event_request(&s.ev[0], 3, ids, 4, 0, out, sizeof out);
    assert_string_equal(out, "partition=0000000000000011,0000000000000022");
    chaos_event_request(&s.ev[0], 3, ids, 4, 1, out, sizeof out);
    assert_string_equal(out, "partition=");
    /* drop on=2: only member 2 */
    chaos_event_request(&s.ev[1], 1, ids, 4, 0, out, sizeof out);
    assert_string_equal(out, "");
    chaos_event_request(&s.ev[1], 2, ids, 4, 0, out, sizeof out);
    assert_string_equal(out, "drop=0.3");
    chaos_event_request(&s.ev[1], 2, ids, 4, 1, out, sizeof out);
    assert_string_equal(out, "drop=0");
    /* delay on every member; slow and its undo; kill has no request */
    chaos_event_request(&s.ev[2], 1, ids, 4, 0, out, sizeof out);
    assert_string_equal(out, "delay_ms=200 jitter_ms=50");
    chaos_event_request(&s.ev[5], 0, ids, 4, 1, out, sizeof out);
    assert_string_equal(out, "slow=1");
    chaos_event_request(&s.ev[6], 1, ids, 4, 0, out, sizeof out);
    assert_string_equal(out, "");
    /* the simulator's lines */
    assert_int_equal(chaos_event_sim_line(&s.ev[0], out, sizeof out), 1);
    assert_string_equal(out, "10 partition 0,1/2,3 duration=15");
    assert_int_equal(chaos_event_sim_line(&s.ev[1], out, sizeof out), 1);
    assert_string_equal(out, "30 drop 2 p=0.3 duration=10"); /* on=2: member 2's frames */
    /* the link faults have counterparts too (sim/faults.h) */
    assert_int_equal(chaos_event_sim_line(&s.ev[2], out, sizeof out), 1);
    assert_string_equal(out, "45 delay all ms=200 jitter=50 duration=10");
    assert_int_equal(chaos_event_sim_line(&s.ev[3], out, sizeof out), 1);
    assert_string_equal(out, "58 reorder all p=0.3 window=50 duration=5");
    assert_int_equal(chaos_event_sim_line(&s.ev[4], out, sizeof out), 1);
    assert_string_equal(out, "70 pause 3 duration=8");
    assert_int_equal(chaos_event_sim_line(&s.ev[6], out, sizeof out), 1);
    assert_string_equal(out, "100 crash 1 restart_after=10");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parse_and_round_trip),         cmocka_unit_test(errors_name_the_line),
        cmocka_unit_test(random_is_seeded_and_bounded), cmocka_unit_test(random_covers_every_kind),
        cmocka_unit_test(requests_and_sim_lines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
