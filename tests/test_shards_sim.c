/* The simulator's agents run the real shard replication (shards.mode =
 * protocol, sim/shardsim.c): a crash makes the new holders fetch their
 * copies through the simulated links, and those copies are frames like
 * any other — their bytes are in the run's totals, they share the links
 * with mixing (a mixing frame waits behind a chunk), and the run ends with
 * every shard back to r complete copies without a loss; the same under
 * SWIM, where each agent places from its own view. The oracle
 * (shards.mode = oracle) moves no bytes for the same crash. Runs are
 * deterministic (same scenario, same trace hash). */
#include "tests/harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/wire.h"
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

/* Bytes of the shard-replication frames delivered (types 0x20-0x2f), seen
 * through the trace hook (every delivered frame). */
typedef struct wire_tally {
    uint64_t shard_bytes, shard_frames;
} wire_tally;

static void on_trace(void *ctx, uint64_t now_us, uint32_t from, uint32_t to, const uint8_t *frame,
                     size_t len, uint64_t value)
{
    wire_tally *w = ctx;
    (void)now_us, (void)from, (void)to, (void)value;
    gossip_header h;
    if (frame && gossip_header_decode(frame, len, &h) == GOSSIP_OK && h.type >= 0x20 &&
        h.type < 0x30) {
        w->shard_bytes += len;
        w->shard_frames++;
    }
}

static void run_tallied(const sim_scenario *sc, sim_summary *s, wire_tally *w)
{
    char err[512];
    memset(w, 0, sizeof *w);
    sim_run_opts o = {.quiet = 1, .check = 1, .on_trace = on_trace, .hook_ctx = w};
    if (sim_run(sc, &o, s, err, sizeof err))
        fail_msg("sim_run: %s", err);
    if (s->violations)
        fail_msg("violation: %s", s->violation);
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

/* 8 agents, 16 shards of 256 KiB on 3 holders, 20 Mb/s links, one crash
 * at 1 s without restart: its 6 copies are refetched (256 KiB is 105 ms
 * at 20 Mb/s), while every agent mixes 16 KiB models every 50 ms. */
static const char *CRASH = "[run]\nagents = 8\nmode = timed\nduration_s = 6\n"
                           "[model]\nkind = consensus\ndim = 4096\n"
                           "[network]\nlatency_ms = 1\nbandwidth_mbps = 20\n"
                           "[compute]\nstep_ms = 50\n"
                           "[shards]\ncount = 16\nreplication = 3\nbytes = 262144\n"
                           "[faults]\nevent = 1 crash 5\n";

static void crash_copies_are_frames(void **state)
{
    (void)state;
    sim_scenario *sc = scenario(CRASH);
    sim_summary p, p2, o;
    wire_tally w, w2, wo;
    run_tallied(sc, &p, &w);
    run_tallied(sc, &p2, &w2);
    assert_true(p.trace_hash == p2.trace_hash);
    assert_true(p.bytes_total == p2.bytes_total && w.shard_bytes == w2.shard_bytes);
    set(sc, "shards.mode=oracle");
    run_tallied(sc, &o, &wo);
    /* The crashed agent held about 16 * 3 / 8 = 6 replicas: each is fetched
     * again. */
    double copies = extra(&p, "shard_copies");
    printf("shard copies after one crash: %.0f; shard frames %llu, %llu bytes; bytes total "
           "protocol %llu, oracle %llu\n",
           copies, (unsigned long long)w.shard_frames, (unsigned long long)w.shard_bytes,
           (unsigned long long)p.bytes_total, (unsigned long long)o.bytes_total);
    assert_true(copies >= 1);
    assert_true(p.shards_lost == 0);
    assert_int_equal(extra(&p, "shards_under_replicated_final"), 0);
    /* Every copy's bytes crossed the simulated links and count in the run's
     * total; the oracle sends none. */
    assert_true((double)w.shard_bytes >= copies * 262144.0);
    assert_true(p.bytes_total >= w.shard_bytes);
    assert_true(wo.shard_frames == 0);
    /* Mixing frames waited behind chunks on shared links: the slowest
     * mixing round is slower than with the oracle's frameless copies. */
    assert_true(extra(&p, "mix_time_max_s") > extra(&o, "mix_time_max_s"));
    free(sc);
}

/* Under SWIM each agent's replicator follows its own views (partial while
 * the cluster forms, late after the crash): the copies still end at r per
 * shard, none lost, every agent within its primary bounds. */
static void swim_own_views(void **state)
{
    (void)state;
    sim_scenario *sc = scenario(CRASH);
    set(sc, "membership.mode=swim");
    set(sc, "membership.probe_interval_ms=100");
    set(sc, "membership.probe_timeout_ms=40");
    set(sc, "run.duration_s=8");
    sim_summary s;
    run_checked(sc, &s);
    printf("swim: shard copies %.0f, views wrong %.0f\n", extra(&s, "shard_copies"),
           extra(&s, "views_wrong_final"));
    assert_true(extra(&s, "shard_copies") >= 1);
    assert_true(s.shards_lost == 0);
    assert_int_equal(extra(&s, "shards_under_replicated_final"), 0);
    assert_int_equal(extra(&s, "views_wrong_final"), 0);
    free(sc);
}

/* r = 1 and a crash: the victim's shards are lost, and the loss is the
 * expected one (its only holder failed), not a violation; rounds mode. */
static void r1_loss_is_expected(void **state)
{
    (void)state;
    sim_scenario *sc = scenario("[run]\nagents = 6\nmode = rounds\nrounds = 200\n"
                                "duration_s = 1\n"
                                "[model]\nkind = consensus\ndim = 8\n"
                                "[shards]\ncount = 12\nreplication = 1\nbytes = 4096\n"
                                "[faults]\nevent = 0.5 crash 2\n");
    sim_summary s;
    run_checked(sc, &s);
    assert_true(s.shards_lost >= 1);
    free(sc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(crash_copies_are_frames),
        cmocka_unit_test(swim_own_views),
        cmocka_unit_test(r1_loss_is_expected),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
