/* sim/run: the simulator's main loop. Same seed -> same trace hash, another
 * seed -> another; mixing reduces the consensus distance; crashes and
 * restarts are applied and counted; random crashes follow their rate;
 * training lowers the loss (quadratic) and raises the accuracy (MLP on
 * synthetic data); stragglers slow synchronous allreduce but not gossip;
 * files are written with the documented columns; bad scenarios are
 * rejected with a message. */
#include "tests/harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim/output.h"
#include "sim/run.h"
#include "sim/runner.h"
#include "sim/scenario.h"

static sim_scenario *scenario(const char *text)
{
    sim_scenario *sc = malloc(sizeof *sc);
    assert_non_null(sc);
    sim_scenario_defaults(sc);
    char err[512];
    int rc = sim_scenario_parse(sc, text, "test", err, sizeof err);
    if (rc)
        fail_msg("%s", err);
    rc = sim_scenario_check(sc, err, sizeof err);
    if (rc)
        fail_msg("%s", err);
    return sc;
}

static void set(sim_scenario *sc, const char *kv)
{
    char err[512];
    if (sim_scenario_set(sc, kv, err, sizeof err))
        fail_msg("%s", err);
}

static void run_ok(const sim_scenario *sc, sim_summary *s)
{
    char err[512];
    sim_run_opts o = {.quiet = 1};
    int rc = sim_run(sc, &o, s, err, sizeof err);
    if (rc)
        fail_msg("sim_run: %s", err);
}

static double extra(const sim_summary *s, const char *name)
{
    for (uint32_t i = 0; i < s->nextra; i++)
        if (strcmp(s->extra[i].name, name) == 0)
            return s->extra[i].value;
    fail_msg("no extra %s", name);
    return NAN;
}

static const char *GOSSIP16 = "[run]\nagents = 16\nmode = rounds\nrounds = 40\n"
                              "[model]\nkind = consensus\ndim = 64\n"
                              "[mixing]\nalgorithm = gossip\ntopology = random\n";

static void same_seed_same_hash(void **state)
{
    (void)state;
    sim_scenario *sc = scenario(GOSSIP16);
    sim_summary a, b, c;
    run_ok(sc, &a);
    run_ok(sc, &b);
    assert_true(a.trace_hash == b.trace_hash);
    assert_true(a.events == b.events && a.bytes_total == b.bytes_total);
    assert_true(a.consensus_distance_final == b.consensus_distance_final);
    set(sc, "run.seed=2");
    run_ok(sc, &c);
    assert_true(a.trace_hash != c.trace_hash);
    free(sc);
}

/* Timed mode with every model at once: lognormal latency, limited shared
 * bandwidth, loss, stragglers, random crashes with restarts. */
static void timed_same_seed_same_hash(void **state)
{
    (void)state;
    sim_scenario *sc = scenario("[run]\nagents = 12\nmode = timed\nduration_s = 3\n"
                                "[model]\nkind = quadratic\ndim = 32\n"
                                "[network]\nlatency_dist = lognormal\nlatency_ms = 5\n"
                                "bandwidth_mbps = 10\nloss = 0.05\n"
                                "[compute]\nstraggler_model = pareto\n"
                                "[faults]\ncrash_rate_per_s = 2\nrestart_after_s = 0.5\n");
    sim_summary a, b, c;
    run_ok(sc, &a);
    run_ok(sc, &b);
    assert_true(a.trace_hash == b.trace_hash);
    assert_true(a.steps_total == b.steps_total && a.messages_lost == b.messages_lost);
    assert_true(a.messages_lost > 0); /* loss applied */
    assert_true(extra(&a, "crashes") > 0);
    set(sc, "run.seed=99");
    run_ok(sc, &c);
    assert_true(a.trace_hash != c.trace_hash);
    free(sc);
}

static void mixing_reduces_consensus_distance(void **state)
{
    (void)state;
    /* 64 values N(0, 1) per agent: the initial RMS distance is about 8. */
    sim_scenario *sc = scenario(GOSSIP16);
    set(sc, "run.rounds=1");
    sim_summary one, many, ring, ring1;
    run_ok(sc, &one);
    assert_true(one.consensus_distance_final > 2 && one.consensus_distance_final < 8);
    set(sc, "run.rounds=40");
    run_ok(sc, &many);
    /* pairwise gossip halves the variance about every round */
    assert_true(many.consensus_distance_final < 1e-3 * one.consensus_distance_final);
    assert_int_equal(many.rounds, 40);
    assert_int_equal(extra(&many, "mix_rounds_completed"), 16 * 40);
    /* dpsgd on a ring of 16 with weights 1/3 is symmetric: the disagreement
     * shrinks by at most lambda2 = (1 + 2 cos(2 pi / 16)) / 3 = 0.949 per
     * round, and a random start has a component along the slowest mode, so
     * after 39 more rounds the distance is within [0.2, 1] x lambda2^39. */
    set(sc, "mixing.algorithm=dpsgd");
    set(sc, "mixing.topology=ring");
    set(sc, "run.rounds=1");
    run_ok(sc, &ring1);
    set(sc, "run.rounds=40");
    run_ok(sc, &ring);
    double lambda2 = (1 + 2 * cos(2 * M_PI / 16)) / 3, bound = pow(lambda2, 39);
    double ratio = ring.consensus_distance_final / ring1.consensus_distance_final;
    assert_true(ratio <= bound * 1.001);
    assert_true(ratio >= 0.2 * bound);
    free(sc);
}

static void crash_faults_counted(void **state)
{
    (void)state;
    sim_scenario *sc = scenario("[run]\nagents = 8\nmode = rounds\nrounds = 50\n"
                                "[model]\nkind = consensus\ndim = 16\n"
                                "[compute]\nstep_ms = 10\n"
                                "[faults]\nevent = 0.1 crash 1,2\n"
                                "event = 0.2 restart 1\n");
    sim_summary s;
    run_ok(sc, &s);
    assert_int_equal(extra(&s, "crashes"), 2);
    assert_int_equal(extra(&s, "restarts"), 1);
    /* agent 2 stays down: 7 agents mix and still agree */
    assert_true(s.consensus_distance_final < 1e-3);
    /* agents down take no steps: fewer than 8 * 50 */
    assert_true(s.steps_total < 8 * 50 && s.steps_total > 7 * 40);
    free(sc);

    /* Random crashes: Poisson with rate 20/s over 5 s, mean 100, sd 10; a
     * crash of an agent already down is not counted. */
    sc = scenario("[run]\nagents = 50\nmode = timed\nduration_s = 5\n"
                  "[model]\nkind = consensus\ndim = 8\n"
                  "[compute]\nstep_ms = 50\n"
                  "[faults]\ncrash_rate_per_s = 20\nrestart_after_s = 0.05\n");
    run_ok(sc, &s);
    double crashes = extra(&s, "crashes");
    assert_true(crashes >= 60 && crashes <= 140);
    assert_true(extra(&s, "restarts") >= crashes - 2 && extra(&s, "restarts") <= crashes);
    free(sc);
}

static void shards_lost_without_replicas(void **state)
{
    (void)state;
    /* r = 1 and half the agents crash for good: about half the shards are
     * lost. r = 3 with one crash at a time and instant copies: none. */
    sim_scenario *sc = scenario("[run]\nagents = 16\nmode = rounds\nrounds = 5\n"
                                "[model]\nkind = consensus\ndim = 4\n"
                                "[shards]\ncount = 64\nreplication = 1\n"
                                "[faults]\nevent = 0 crash 0-7\n");
    sim_summary s;
    run_ok(sc, &s);
    assert_true(s.shards_lost >= 16 && s.shards_lost <= 48);
    set(sc, "shards.replication=3");
    set(sc, "faults.event=");
    set(sc, "faults.event=0 crash 0");
    set(sc, "faults.event=0.01 crash 1");
    set(sc, "faults.event=0.02 crash 2");
    run_ok(sc, &s);
    assert_int_equal(s.shards_lost, 0);
    free(sc);
}

static void run_checked(const sim_scenario *sc, sim_summary *s)
{
    char err[512];
    sim_run_opts o = {.quiet = 1, .check = 1};
    int rc = sim_run(sc, &o, s, err, sizeof err);
    if (rc)
        fail_msg("sim_run: %s", err);
}

/* The invariant checks behind --soak: a diverging model is reported (with
 * the time and the agent), shard losses after r holder failures are not,
 * and a healthy run with faults has no violation and ends with every
 * agent up and every shard back to r copies. */
static void invariants_checked(void **state)
{
    (void)state;
    sim_scenario *sc = scenario("[run]\nagents = 8\nmode = rounds\nrounds = 200\n"
                                "[model]\nkind = quadratic\ndim = 6\nlr = 100\n");
    sim_summary s;
    run_checked(sc, &s);
    assert_true(s.violations > 0);
    if (!strstr(s.violation, "not finite"))
        fail_msg("violation: %s", s.violation);
    free(sc);

    /* r = 2: two holders of everything crash at once; the losses are
     * allowed (r holders failed), so no violation. */
    sc = scenario("[run]\nagents = 12\nmode = rounds\nrounds = 20\n"
                  "[model]\nkind = consensus\ndim = 4\n"
                  "[shards]\ncount = 48\nreplication = 2\n"
                  "[faults]\nevent = 0.05 crash 0-5\n");
    run_checked(sc, &s);
    assert_true(s.shards_lost > 0);
    assert_int_equal(s.violations, 0);
    assert_true(extra(&s, "invariant_violations") == 0);
    free(sc);

    /* Crashes, restarts, a partition and a loss burst, then quiet: no
     * violation; every agent up and every shard at r copies at the end. */
    sc = scenario("[run]\nagents = 10\nmode = timed\nduration_s = 6\n"
                  "[model]\nkind = consensus\ndim = 8\n"
                  "[mixing]\nalgorithm = choco\ntopology = exponential\nbits = 4\n"
                  "[network]\nlatency_ms = 1\nbandwidth_mbps = 1000\n"
                  "[shards]\ncount = 40\nreplication = 3\n"
                  "[faults]\nevent = 0.2 crash 3 restart_after=0.3\n"
                  "event = 0.4 partition 0-4/5-9 duration=0.3\n"
                  "event = 0.9 loss 0.3 duration=0.2\nevent = 1.0 crash 7 restart_after=0.5\n");
    run_checked(sc, &s);
    if (s.violations)
        fail_msg("violation: %s", s.violation);
    assert_int_equal(s.shards_lost, 0);
    assert_true(extra(&s, "agents_live_final") == 10);
    assert_true(extra(&s, "shards_under_replicated_final") == 0);
    assert_true(extra(&s, "crashes") == 2 && extra(&s, "restarts") == 2);
    double cd0 = extra(&s, "consensus_distance_initial");
    if (!(s.consensus_distance_final < 1e-3 * cd0))
        fail_msg("choco after faults: consensus distance %g of %g", s.consensus_distance_final,
                 cd0);
    free(sc);
}

/* membership.mode = swim: every agent runs gossip/node (SWIM, its own
 * views, state transfer). Gossip converges from a cold start in which every
 * agent knows 3 others; dpsgd survives a crash with restart and a partition:
 * views end complete, the restarted agent got the model by state transfer,
 * consensus is reached, and the rounds completed are within half of the
 * oracle run's (the members catch up with each other's rounds after
 * installing views at different moments). */
static void swim_membership(void **state)
{
    (void)state;
    sim_scenario *sc = scenario("[run]\nagents = 16\nmode = timed\nduration_s = 3\n"
                                "[model]\nkind = consensus\ndim = 16\n"
                                "[membership]\nmode = swim\n");
    sim_summary s;
    run_checked(sc, &s);
    if (s.violations)
        fail_msg("violation: %s", s.violation);
    assert_true(extra(&s, "views_wrong_final") == 0);
    assert_true(s.consensus_distance_final < 1e-6 * extra(&s, "consensus_distance_initial"));
    free(sc);

    const char *text = "[run]\nagents = 12\nmode = timed\nduration_s = 12\n"
                       "[model]\nkind = consensus\ndim = 16\n"
                       "[mixing]\nalgorithm = dpsgd\ntopology = exponential\n"
                       "[faults]\nevent = 1 crash 3 restart_after=1\n"
                       "event = 2.5 partition 0-5/6-11 duration=1\n";
    sc = scenario(text);
    sim_summary oracle;
    run_checked(sc, &oracle);
    set(sc, "membership.mode=swim");
    run_checked(sc, &s);
    if (s.violations)
        fail_msg("violation: %s", s.violation);
    assert_true(extra(&s, "views_wrong_final") == 0);
    assert_true(extra(&s, "state_transfers") >= 1);
    assert_true(extra(&s, "crashes") == 1 && extra(&s, "restarts") == 1);
    assert_true(s.consensus_distance_final < 1e-4 * extra(&s, "consensus_distance_initial"));
    double done = extra(&s, "mix_rounds_completed"), ref = extra(&oracle, "mix_rounds_completed");
    print_message("dpsgd rounds completed: swim %.0f, oracle %.0f\n", done, ref);
    assert_true(done > 0.5 * ref);
    /* Same seed, same trace in swim mode too. */
    sim_summary again;
    run_checked(sc, &again);
    assert_true(again.trace_hash == s.trace_hash);
    free(sc);
}

static void training_makes_progress(void **state)
{
    (void)state;
    sim_scenario *sc = scenario("[run]\nagents = 8\nmode = rounds\nrounds = 1\n"
                                "[model]\nkind = quadratic\ndim = 20\nlr = 0.1\n");
    sim_summary first, last;
    run_ok(sc, &first);
    set(sc, "run.rounds=60");
    run_ok(sc, &last);
    assert_true(last.final_loss < 0.1 * first.final_loss);
    free(sc);

    /* MLP on synthetic Gaussian clusters (10 classes, 20 features). */
    sc = scenario("[run]\nagents = 4\nmode = timed\nduration_s = 2\n"
                  "[model]\nkind = mlp\ndim = 20\nhidden = 16\nlr = 0.05\n"
                  "[mixing]\nalgorithm = allreduce\n"
                  "[compute]\nstep_ms = 10\n[output]\nevery_s = 1\n");
    run_ok(sc, &last);
    assert_true(last.final_accuracy > 0.5);
    assert_true(last.final_loss < 2.0);
    /* The agent's schedule: steps go on while the allreduce (2 (N - 1) = 6
     * hops of 1 ms) runs, so each agent takes one step per 10 ms: 200 in 2 s. */
    assert_true(last.steps_total >= 4 * 199 && last.steps_total <= 4 * 200);
    assert_true(extra(&last, "mix_rounds_completed") > 4 * 100);
    /* A blocking trainer: a step (10 ms) then its allreduce: 16 ms per step,
     * 125 steps per agent in 2 s. */
    set(sc, "mixing.overlap=false");
    run_ok(sc, &last);
    assert_true(last.final_accuracy > 0.5);
    assert_true(last.steps_total >= 4 * 120 && last.steps_total <= 4 * 126);
    free(sc);
}

/* model.init_seed: the nets start from the parameters of an agent whose
 * model.init_seed is the same (agent/trainer.c seeds stream 0 of it), not
 * from run.seed; 0 (the default) keeps the run.seed's own model. A run
 * ended before its first step reports its initial model's loss. */
static void init_seed_is_the_agents(void **state)
{
    (void)state;
    sim_scenario *sc = scenario("[run]\nagents = 4\nmode = timed\nduration_s = 0.001\n"
                                "[model]\nkind = mlp\ndim = 20\nhidden = 16\n"
                                "[compute]\nstep_ms = 10\n");
    model_rng a, b;
    sim_models_init_rng(sc, &a);
    model_rng_seed(&b, sc->run.seed, 0);
    assert_true(model_rng_u64(&a) != model_rng_u64(&b));
    sim_summary own, seven, seven2;
    run_ok(sc, &own);
    assert_int_equal(own.steps_total, 0);
    set(sc, "model.init_seed=7");
    sim_models_init_rng(sc, &a);
    model_rng_seed(&b, 7, 0);
    for (int k = 0; k < 4; k++)
        assert_int_equal(model_rng_u64(&a), model_rng_u64(&b));
    run_ok(sc, &seven);
    assert_true(seven.final_loss != own.final_loss);
    set(sc, "run.seed=2");
    sim_models_init_rng(sc, &a);
    model_rng_seed(&b, 7, 0);
    assert_int_equal(model_rng_u64(&a), model_rng_u64(&b));
    set(sc, "run.seed=1");
    run_ok(sc, &seven2);
    assert_true(seven2.final_loss == seven.final_loss);
    free(sc);
}

/* The outer step's key reaches the agents' schedule (gossip/sched): its
 * default, written out, changes nothing (same trace hash); a momentum
 * changes the run's result, reproducibly. Quadratic model, 8 agents, a
 * round every 4 steps with 23 ms links. */
static void outer_step_reaches_the_schedule(void **state)
{
    (void)state;
    sim_scenario *sc = scenario("[run]\nagents = 8\nmode = timed\nduration_s = 1\n"
                                "[model]\nkind = quadratic\ndim = 16\nlr = 0.05\n"
                                "[mixing]\ninterval_steps = 4\n"
                                "[network]\nlatency_ms = 23\n"
                                "[compute]\nstep_ms = 10\nstraggler_model = none\n");
    sim_summary plain, same, mom, mom2;
    run_ok(sc, &plain);
    set(sc, "mixing.outer_momentum=0");
    run_ok(sc, &same);
    assert_true(same.trace_hash == plain.trace_hash);
    assert_true(same.final_loss == plain.final_loss);
    set(sc, "mixing.outer_momentum=0.5");
    run_ok(sc, &mom);
    run_ok(sc, &mom2);
    print_message("final loss: %.6g without an outer step, %.6g with momentum 0.5\n",
                  plain.final_loss, mom.final_loss);
    assert_true(mom.final_loss != plain.final_loss);
    assert_true(mom.final_loss == mom2.final_loss && mom.trace_hash == mom2.trace_hash);
    assert_true(mom.steps_total == plain.steps_total); /* compute is unchanged */
    free(sc);
}

/* One agent 10 times slower among 8, no communication cost. A blocking
 * trainer (mixing.overlap = false): synchronous allreduce runs at the
 * straggler's pace, asynchronous gossip does not; throughput ratio
 * (s (N - 1) + 1) / N = 8.875. The agent's schedule: every agent trains at
 * its own pace under both, 7 / 10 ms + 1 / 100 ms = 710 steps/s; the
 * allreduce rounds follow the straggler (one per 100 ms). */
static void stragglers_ratio(void **state)
{
    (void)state;
    sim_scenario *sc = scenario("[run]\nagents = 8\nmode = timed\nduration_s = 20\n"
                                "[model]\nkind = consensus\ndim = 8\n"
                                "[network]\nlatency_ms = 0\n"
                                "[compute]\nstep_ms = 10\nstragglers = 0.125\nslowdown = 10\n");
    set(sc, "mixing.overlap=false");
    set(sc, "mixing.algorithm=allreduce");
    sim_summary ar, go;
    run_ok(sc, &ar);
    set(sc, "mixing.algorithm=gossip");
    run_ok(sc, &go);
    double ratio = (double)go.steps_total / (double)ar.steps_total;
    assert_true(fabs(ratio / 8.875 - 1) < 0.02);
    set(sc, "mixing.overlap=true");
    run_ok(sc, &go);
    set(sc, "mixing.algorithm=allreduce");
    run_ok(sc, &ar);
    double want = 20 * (7 / 0.01 + 1 / 0.1);
    assert_true(fabs(go.steps_total / want - 1) < 0.01);
    assert_true(fabs(ar.steps_total / want - 1) < 0.01);
    double rounds = extra(&ar, "mix_rounds_completed") / 8;
    assert_true(rounds > 190 && rounds <= 200);
    free(sc);
}

/* The agent's schedule (gossip/sched): with rounds four times longer than
 * a step, an agent takes every step the compute model allows, a round
 * starts at the first step after the last result was applied (so about one
 * per 40 ms round trip plus a step), and the results still bring the
 * agents together: the local steps taken meanwhile are kept (mixed - sent). */
static void steps_overlap_rounds(void **state)
{
    (void)state;
    sim_scenario *sc = scenario("[run]\nagents = 8\nmode = timed\nduration_s = 0.02\n"
                                "[model]\nkind = quadratic\ndim = 16\nlr = 0.05\n"
                                "[network]\nlatency_ms = 23\n"
                                "[compute]\nstep_ms = 10\nstraggler_model = none\n");
    sim_summary first, s;
    run_ok(sc, &first);
    set(sc, "run.duration_s=4");
    run_ok(sc, &s);
    assert_true(s.steps_total >= 8 * 399 && s.steps_total <= 8 * 400);
    /* A round trip of 46 ms, then the next step at a multiple of 10 ms.
     * Exchanges are atomic (docs/MIXING.md): with 8 agents mixing back to
     * back a push usually finds its peer mid-exchange and waits for it
     * (held) or is refused and retried, so a round takes 1 to 3 round
     * trips; with 2 agents the only conflict is two crossing pushes, which
     * costs no round trip, so every round is one. */
    double rounds = extra(&s, "mix_rounds_completed") / 8;
    print_message("rounds per agent in 4 s: %.1f (steps 400), loss %.4g -> %.4g\n", rounds,
                  first.final_loss, s.final_loss);
    assert_true(rounds > 4 / (3 * 0.06) && rounds <= 4 / 0.05);
    assert_true(s.final_loss < 0.1 * first.final_loss);
    set(sc, "run.agents=2");
    sim_summary two;
    run_ok(sc, &two);
    double rounds2 = extra(&two, "mix_rounds_completed") / 2;
    print_message("2 agents: rounds per agent in 4 s: %.1f\n", rounds2);
    assert_true(rounds2 > 4 / 0.06 && rounds2 <= 4 / 0.05);
    set(sc, "run.agents=8");
    /* blocking: one round per step and 50 ms per step */
    set(sc, "mixing.overlap=false");
    sim_summary b;
    run_ok(sc, &b);
    assert_true(b.steps_total <= 8 * 81);
    free(sc);
}

static void writes_files(void **state)
{
    (void)state;
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/murmur_simrun_XXXXXX");
    assert_non_null(mkdtemp(dir));
    sim_scenario *sc = scenario(GOSSIP16);
    set(sc, "output.every_rounds=10");
    set(sc, "output.per_agent=true");
    sim_summary s;
    char err[512], path[128], line[512];
    FILE *log = tmpfile();
    assert_non_null(log);
    sim_run_opts o = {.write_files = 1, .dir = dir, .log = log, .progress_s = 1e9};
    assert_int_equal(sim_run(sc, &o, &s, err, sizeof err), 0);
    rewind(log);
    assert_non_null(fgets(line, sizeof line, log));
    assert_string_equal(line, "SEED=1\n");
    char last[512] = "";
    while (fgets(line, sizeof line, log))
        snprintf(last, sizeof last, "%s", line);
    char want[64];
    snprintf(want, sizeof want, "TRACE_HASH=%016llx\n", (unsigned long long)s.trace_hash);
    assert_string_equal(last, want);
    fclose(log);
    snprintf(path, sizeof path, "%s/series.csv", dir);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    assert_non_null(fgets(line, sizeof line, f));
    assert_string_equal(line, SIM_SERIES_HEADER "\n");
    int all = 0, per = 0;
    while (fgets(line, sizeof line, f)) {
        all += strstr(line, ",all,") != NULL;
        per += strstr(line, ",all,") == NULL;
    }
    fclose(f);
    assert_int_equal(all, 5); /* rounds 0, 10, 20, 30, 40 */
    assert_int_equal(per, 5 * 16);
    snprintf(path, sizeof path, "%s/summary.json", dir);
    f = fopen(path, "r");
    assert_non_null(f);
    static char json[8192];
    size_t n = fread(json, 1, sizeof json - 1, f);
    json[n] = 0;
    fclose(f);
    const char *fields[] = {"seed",           "trace_hash",       "events",
                            "wall_s",         "sim_time_s",       "rounds",
                            "steps_total",    "bytes_total",      "bytes_per_agent_max",
                            "final_accuracy", "time_to_target_s", "consensus_distance_final",
                            "shards_lost"};
    for (size_t k = 0; k < sizeof fields / sizeof *fields; k++) {
        char key[64];
        snprintf(key, sizeof key, "\"%s\":", fields[k]);
        if (!strstr(json, key))
            fail_msg("summary.json lacks %s", fields[k]);
    }
    snprintf(path, sizeof path, "rm -rf '%s'", dir);
    assert_int_equal(system(path), 0);
    free(sc);
}

static void bad_scenarios_rejected(void **state)
{
    (void)state;
    sim_scenario *sc = malloc(sizeof *sc);
    assert_non_null(sc);
    char err[512];
    sim_scenario_defaults(sc);
    assert_int_equal(sim_scenario_parse(sc, "[run]\nagnets = 3\n", "t.ini", err, sizeof err),
                     SIM_SCENARIO_EKEY);
    assert_non_null(strstr(err, "unknown key 'agnets' in section [run]"));
    sim_scenario_defaults(sc);
    assert_int_equal(sim_scenario_parse(sc, "[network]\nloss = 2\n", "t.ini", err, sizeof err),
                     SIM_SCENARIO_ERANGE);
    /* valid for the file format, refused by the runner with a reason */
    sim_summary s;
    sim_run_opts o = {.quiet = 1};
    sim_scenario_defaults(sc);
    set(sc, "mixing.algorithm=ps");
    assert_int_equal(sim_run(sc, &o, &s, err, sizeof err), SIM_RUN_EINVAL);
    assert_non_null(strstr(err, "ps"));
    sim_scenario_defaults(sc);
    set(sc, "run.agents=20000");
    set(sc, "mixing.algorithm=dpsgd");
    set(sc, "mixing.topology=ring");
    assert_int_equal(sim_run(sc, &o, &s, err, sizeof err), SIM_RUN_EINVAL);
    assert_non_null(strstr(err, "run.agents"));
    sim_scenario_defaults(sc);
    set(sc, "model.kind=mlp");
    set(sc, "model.data=/nonexistent/dir");
    assert_int_equal(sim_run(sc, &o, &s, err, sizeof err), SIM_RUN_EMODEL);
    assert_non_null(strstr(err, "/nonexistent/dir"));
    free(sc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(same_seed_same_hash),
        cmocka_unit_test(timed_same_seed_same_hash),
        cmocka_unit_test(mixing_reduces_consensus_distance),
        cmocka_unit_test(crash_faults_counted),
        cmocka_unit_test(shards_lost_without_replicas),
        cmocka_unit_test(invariants_checked),
        cmocka_unit_test(swim_membership),
        cmocka_unit_test(training_makes_progress),
        cmocka_unit_test(init_seed_is_the_agents),
        cmocka_unit_test(outer_step_reaches_the_schedule),
        cmocka_unit_test(stragglers_ratio),
        cmocka_unit_test(steps_overlap_rounds),
        cmocka_unit_test(writes_files),
        cmocka_unit_test(bad_scenarios_rejected),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
