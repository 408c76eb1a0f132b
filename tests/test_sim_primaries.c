/* The simulator with checks on (opts.check, as the soak runs it): after
 * every membership change the placement it computes for the live agents
 * gives every agent floor(S/N)..ceil(S/N) primaries (a violation
 * otherwise), with S = 64 / N = 24, S = N and S < N, through crashes,
 * restarts and joins, in rounds and timed mode, with oracle and SWIM
 * membership; every live agent's step counter ends above zero and rises
 * with the run's length. */
#include "tests/harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/run.h"
#include "sim/scenario.h"

static sim_scenario *scenario(const char *text)
{
    sim_scenario *sc = malloc(sizeof *sc);
    assert_non_null(sc);
    sim_scenario_defaults(sc);
    char err[512];
    if (sim_scenario_parse(sc, text, "test", err, sizeof err))
        fail_msg("%s", err);
    if (sim_scenario_check(sc, err, sizeof err))
        fail_msg("%s", err);
    return sc;
}

static void set(sim_scenario *sc, const char *kv)
{
    char err[512];
    if (sim_scenario_set(sc, kv, err, sizeof err))
        fail_msg("%s", err);
}

static double extra(const sim_summary *s, const char *name)
{
    for (uint32_t i = 0; i < s->nextra; i++)
        if (strcmp(s->extra[i].name, name) == 0)
            return s->extra[i].value;
    fail_msg("no extra %s", name);
    return NAN;
}

static void run_checked(const sim_scenario *sc, sim_summary *s)
{
    char err[512];
    sim_run_opts o = {.quiet = 1, .check = 1};
    if (sim_run(sc, &o, s, err, sizeof err))
        fail_msg("sim_run: %s", err);
    if (s->violations)
        fail_msg("violation: %s", s->violation);
}

/* agents, shards, r, membership mode, run mode; faults: two crashes with
 * restart, one crash without, and a join of an agent that starts down. */
static void run_case(uint32_t n, uint32_t s_count, uint32_t r, const char *membership,
                     const char *mode)
{
    char text[1024];
    snprintf(text, sizeof text,
             "[run]\nagents = %u\nmode = %s\n%s\n"
             "[model]\nkind = consensus\ndim = 8\n"
             "[membership]\nmode = %s\n"
             "[compute]\nstep_ms = 10\n"
             "[shards]\ncount = %u\nreplication = %u\n"
             "[faults]\nevent = 0.1 join 5\nevent = 0.5 crash 3 restart_after=1.0\n"
             "event = 1.2 crash 7\nevent = 1.5 crash 11 restart_after=0.5\n",
             n, mode,
             strcmp(mode, "timed") == 0 ? "duration_s = 4" : "rounds = 400\nduration_s = 4",
             membership, s_count, r);
    sim_scenario *sc = scenario(text);
    if (strcmp(membership, "swim") == 0) {
        set(sc, "membership.probe_interval_ms=100");
        set(sc, "membership.probe_timeout_ms=40");
    }
    sim_summary s;
    run_checked(sc, &s);
    uint32_t live = (uint32_t)extra(&s, "agents_live_final");
    assert_int_equal(live, n - 1); /* agent 7 stays down */
    uint32_t lo = s_count / live, hi = (s_count + live - 1) / live;
    double pmin = extra(&s, "primaries_min"), pmax = extra(&s, "primaries_max");
    if (pmin < lo || pmax > hi)
        fail_msg("S %u N %u %s %s: primaries %g..%g, bounds %u..%u", s_count, live, membership,
                 mode, pmin, pmax, lo, hi);
    double steps = extra(&s, "steps_min_live");
    if (!(steps > 0))
        fail_msg("S %u N %u %s %s: a live agent did no step", s_count, n, membership, mode);
    /* Twice as long: every live agent's steps rose (the fewest, at least). */
    set(sc, strcmp(mode, "timed") == 0 ? "run.duration_s=8" : "run.rounds=800");
    sim_summary s2;
    run_checked(sc, &s2);
    if (!(extra(&s2, "steps_min_live") > steps))
        fail_msg("S %u N %u %s %s: fewest steps %g, then %g over a longer run", s_count, n,
                 membership, mode, steps, extra(&s2, "steps_min_live"));
    free(sc);
}

static void s64_n24(void **state)
{
    (void)state;
    run_case(24, 64, 3, "oracle", "rounds");
    run_case(24, 64, 3, "oracle", "timed");
    run_case(24, 64, 3, "swim", "timed");
}

static void s_equals_n(void **state)
{
    (void)state;
    run_case(24, 24, 3, "oracle", "rounds");
    run_case(24, 23, 2, "oracle", "timed"); /* S < N until agent 7 crashes, then S = N */
}

static void more_agents_than_shards(void **state)
{
    (void)state;
    run_case(24, 8, 3, "oracle", "rounds");
    run_case(24, 5, 1, "oracle", "timed");
    run_case(12, 3, 2, "swim", "timed");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(s64_n24),
        cmocka_unit_test(s_equals_n),
        cmocka_unit_test(more_agents_than_shards),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
