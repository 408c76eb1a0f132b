/* sim/scenario: defaults, file parsing, --set overrides, cross-key checks,
 * every error path (with file, line and key in the message), write/read
 * round trip, sweep enumeration, derived model configs, and that
 * docs/SIMULATOR.md documents every key. */
#include "tests/harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim/scenario.h"
/* the simulator includes both: their names must not clash */
#include "sim/driver.h"

static sim_scenario *new_sc(void)
{
    sim_scenario *sc = malloc(sizeof *sc);
    assert_non_null(sc);
    sim_scenario_defaults(sc);
    return sc;
}

static void defaults_are_valid(void **state)
{
    (void)state;
    sim_scenario *sc = new_sc();
    char err[512];
    assert_int_equal(sim_scenario_check(sc, err, sizeof err), 0);
    assert_int_equal(sc->run.seed, 1);
    assert_int_equal(sc->run.agents, 16);
    assert_int_equal(sc->run.mode, SIM_RUN_ROUNDS);
    assert_int_equal(sc->model.kind, SIM_MODEL_CONSENSUS);
    assert_int_equal(sc->mixing.algorithm, SIM_MIX_GOSSIP);
    assert_int_equal(sc->mixing.bits, 32);
    assert_true(sc->network.bandwidth_mbps == 0);
    assert_true(sc->network.upload_mbps == -1);
    assert_true(sc->compute.step_ms == 10);
    assert_int_equal(sc->compute.straggler_model, SIM_COMPUTE_FIXED);
    assert_true(sc->faults.restart_after_s == 0);
    assert_string_equal(sc->output.dir, "sim-out");
    /* every key reads back as its documented default */
    for (size_t i = 0; i < sim_scenario_key_count(); i++) {
        const sim_scenario_key_info *k = sim_scenario_key_at(i);
        char v[256];
        assert_int_equal(sim_scenario_get(sc, k->name, v, sizeof v), 0);
        if (strcmp(k->type, "list") && strcmp(v, k->def))
            fail_msg("%s: default reads back as '%s', table says '%s'", k->name, v, k->def);
        assert_true(strlen(k->doc) > 5);
    }
    assert_null(sim_scenario_key_at(sim_scenario_key_count()));
    free(sc);
}

static const char *FULL = "# a scenario\n"
                          "[run]\n"
                          "seed = 42\n"
                          "agents=100   # trailing comment\n"
                          "  mode = timed\n"
                          "duration_s = 12.5\n"
                          "\n"
                          "[ model ]\n"
                          "kind = mlp\n"
                          "dim = 784\n"
                          "data = /data/mnist.idx\n"
                          "[mixing]\n"
                          "algorithm = push-sum\n"
                          "topology = one-peer-exponential\n"
                          "bits = 8\n"
                          "[network]\n"
                          "latency_dist = lognormal\n"
                          "latency_ms = 20\n"
                          "latency_sigma = 0.7\n"
                          "bandwidth_mbps = 100\n"
                          "download_mbps = 1000\n"
                          "loss = 0.01\n"
                          "[compute]\n"
                          "straggler_model = pareto\n"
                          "pareto_alpha = 1.5\n"
                          "[shards]\n"
                          "count = 64\n"
                          "replication = 4\n"
                          "[faults]\n"
                          "crash_rate_per_s = 0.1\n"
                          "restart_after_s = 5\n"
                          "event = 3 crash 1-4\n"
                          "event = 9 partition 0-49/50-99 duration=2\n"
                          "[output]\n"
                          "plot = yes\n"
                          "dir = out/run1\n";

static void parses_a_full_file(void **state)
{
    (void)state;
    sim_scenario *sc = new_sc();
    char err[512] = "";
    assert_int_equal(sim_scenario_parse(sc, FULL, "full.ini", err, sizeof err), 0);
    assert_int_equal(sc->run.seed, 42);
    assert_int_equal(sc->run.agents, 100);
    assert_int_equal(sc->run.mode, SIM_RUN_TIMED);
    assert_true(sc->run.duration_s == 12.5);
    assert_int_equal(sc->model.kind, SIM_MODEL_MLP);
    assert_int_equal(sc->model.dim, 784);
    assert_string_equal(sc->model.data, "/data/mnist.idx");
    assert_int_equal(sc->mixing.algorithm, SIM_MIX_PUSH_SUM);
    assert_int_equal(sc->mixing.topology, GOSSIP_TOPO_ONE_PEER_EXP);
    assert_int_equal(sc->mixing.bits, 8);
    assert_int_equal(sc->network.latency_dist, SIM_NET_LAT_LOGNORMAL);
    assert_true(sc->network.latency_sigma == 0.7);
    assert_true(sc->network.loss == 0.01);
    assert_int_equal(sc->compute.straggler_model, SIM_COMPUTE_PARETO);
    assert_int_equal(sc->shards.replication, 4);
    assert_int_equal(sc->faults.nevents, 2);
    assert_string_equal(sc->faults.events[1], "9 partition 0-49/50-99 duration=2");
    assert_string_equal(sc->faults.event_origin[1], "full.ini:33");
    assert_true(sc->output.plot);
    assert_string_equal(sc->output.dir, "out/run1");
    assert_int_equal(sim_scenario_check(sc, err, sizeof err), 0);

    /* derived model configurations */
    sim_net_config nc;
    sim_scenario_net_config(sc, &nc);
    assert_true(nc.up_bps == 100e6 && nc.down_bps == 1000e6);
    assert_int_equal(nc.latency_kind, SIM_NET_LAT_LOGNORMAL);
    assert_true(nc.lat_a == 20 && nc.lat_b == 0.7);
    assert_int_equal(nc.agents, 100);
    assert_int_equal(nc.seed, 42);
    sim_net *net;
    assert_int_equal(sim_net_create(&net, &nc), 0);
    sim_net_destroy(net);
    sim_compute_config cc;
    sim_scenario_compute_config(sc, &cc);
    assert_true(cc.pareto_alpha == 1.5 && cc.step_ms == 10);
    sim_compute *comp;
    assert_int_equal(sim_compute_create(&comp, &cc), 0);
    sim_compute_destroy(comp);
    const char *lines[SIM_SCENARIO_EVENTS_MAX];
    sim_faults_config fc;
    sim_scenario_faults_config(sc, lines, &fc);
    assert_int_equal(fc.nlines, 2);
    assert_int_equal(fc.horizon_us, 12500000);
    sim_fault_list fl;
    assert_int_equal(sim_faults_build(&fl, &fc, err, sizeof err), 0);
    assert_true(fl.len >= 4); /* crash, restart (default restart_after 5 s), partition, heal */
    sim_fault_list_free(&fl);
    free(sc);
}

static void overrides(void **state)
{
    (void)state;
    sim_scenario *sc = new_sc();
    char err[512];
    assert_int_equal(sim_scenario_parse(sc, FULL, "full.ini", err, sizeof err), 0);
    assert_int_equal(sim_scenario_set(sc, "network.bandwidth_mbps=0", err, sizeof err), 0);
    assert_int_equal(sim_scenario_set(sc, " run.agents = 7 ", err, sizeof err), 0);
    assert_int_equal(sim_scenario_set(sc, "faults.event=1 heal", err, sizeof err), 0);
    assert_true(sc->network.bandwidth_mbps == 0);
    assert_int_equal(sc->run.agents, 7);
    assert_int_equal(sc->faults.nevents, 3);
    assert_int_equal(sim_scenario_set(sc, "faults.event=", err, sizeof err), 0);
    assert_int_equal(sc->faults.nevents, 0);
    /* replication 4 <= 7 still fine; 8 is not, and the message says who set what */
    assert_int_equal(sim_scenario_check(sc, err, sizeof err), 0);
    assert_int_equal(sim_scenario_set(sc, "shards.replication=8", err, sizeof err), 0);
    assert_int_equal(sim_scenario_check(sc, err, sizeof err), SIM_SCENARIO_ERANGE);
    assert_non_null(strstr(err, "shards.replication = 8 (--set shards.replication)"));
    assert_non_null(strstr(err, "run.agents = 7 (--set run.agents)"));
    free(sc);
}

static void every_set_error(void **state)
{
    (void)state;
    struct {
        const char *set;
        int rc;
        const char *needle;
    } bad[] = {
        {"run.agents", SIM_SCENARIO_ESYNTAX, "expected section.key=value"},
        {"run.agent=5", SIM_SCENARIO_EKEY,
         "unknown option 'run.agent'; did you mean 'run.agents'?"},
        {"walk.agents=5", SIM_SCENARIO_EKEY, "unknown option 'walk.agents'"},
        {"agents=5", SIM_SCENARIO_EKEY, "expected section.key"},
        {"run.agents=many", SIM_SCENARIO_EVALUE, "run.agents: 'many' is not a whole number"},
        {"run.agents=-3", SIM_SCENARIO_EVALUE, "not a whole number"},
        {"run.agents=0", SIM_SCENARIO_ERANGE, "run.agents: 0 is out of range [1, 16777216]"},
        {"run.agents=99999999999999999999999", SIM_SCENARIO_EVALUE, "not a whole number"},
        {"run.agents=", SIM_SCENARIO_EVALUE, "run.agents: must not be empty"},
        {"network.loss=1.5", SIM_SCENARIO_ERANGE, "network.loss: 1.5 is out of range [0, 1]"},
        {"network.loss=0.1x", SIM_SCENARIO_EVALUE, "not a finite number"},
        {"network.loss=nan", SIM_SCENARIO_EVALUE, "not a finite number"},
        {"network.loss=inf", SIM_SCENARIO_EVALUE, "not a finite number"},
        {"compute.step_ms=0", SIM_SCENARIO_ERANGE, "out of range (0, 3600000]"},
        {"compute.pareto_alpha=1", SIM_SCENARIO_ERANGE, "out of range (1,"},
        {"network.upload_mbps=-0.5", SIM_SCENARIO_ERANGE, "-1 (same as bandwidth_mbps) or >= 0"},
        {"run.mode=fast", SIM_SCENARIO_EVALUE, "'fast' is not one of rounds, timed"},
        {"mixing.algorithm=sgd", SIM_SCENARIO_EVALUE,
         "is not one of dpsgd, gossip, push-sum, choco, allreduce, ps"},
        {"mixing.bits=3", SIM_SCENARIO_EVALUE, "'3' is not one of 1, 2, 4, 8, 16, 32"},
        {"mixing.bits=64", SIM_SCENARIO_EVALUE, "'64' is not one of 1, 2, 4, 8, 16, 32"},
        {"output.plot=maybe", SIM_SCENARIO_EVALUE, "'maybe' is not true or false"},
        {"faults.event=5 explode 3", SIM_SCENARIO_EVALUE, "unknown fault 'explode'"},
    };
    sim_scenario *sc = new_sc();
    char err[512];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        int rc = sim_scenario_set(sc, bad[i].set, err, sizeof err);
        if (rc != bad[i].rc)
            fail_msg("--set %s: returned %d, expected %d (%s)", bad[i].set, rc, bad[i].rc, err);
        if (!strstr(err, bad[i].needle))
            fail_msg("--set %s: message '%s' lacks '%s'", bad[i].set, err, bad[i].needle);
        if (!strstr(err, "--set"))
            fail_msg("--set %s: message '%s' does not name --set", bad[i].set, err);
    }
    char longval[SIM_SCENARIO_STR_MAX + 20] = "model.data=";
    memset(longval + 11, 'x', SIM_SCENARIO_STR_MAX);
    longval[sizeof longval - 1] = 0;
    assert_int_equal(sim_scenario_set(sc, longval, err, sizeof err), SIM_SCENARIO_EVALUE);
    assert_non_null(strstr(err, "model.data: longer than 255 bytes"));
    /* nothing above changed the scenario */
    sim_scenario *d = new_sc();
    for (size_t i = 0; i < sim_scenario_key_count(); i++) {
        char a[256], b[256];
        const char *k = sim_scenario_key_at(i)->name;
        sim_scenario_get(sc, k, a, sizeof a);
        sim_scenario_get(d, k, b, sizeof b);
        if (strcmp(a, b))
            fail_msg("%s changed to '%s' by a failed --set", k, a);
    }
    free(d);
    free(sc);
}

static void every_file_error(void **state)
{
    (void)state;
    struct {
        const char *text;
        int rc;
        const char *needle;
    } bad[] = {
        {"[run]\nagents = 5\n[bogus]\n", SIM_SCENARIO_EKEY, "f.ini:3: unknown section [bogus]"},
        {"[rnu]\n", SIM_SCENARIO_EKEY, "f.ini:1: unknown section [rnu]; did you mean [run]?"},
        {"[run\n", SIM_SCENARIO_ESYNTAX, "f.ini:1: section header without ']'"},
        {"agents = 5\n", SIM_SCENARIO_ESYNTAX, "f.ini:1: 'agents' is outside any [section]"},
        {"[run]\n\nagents 5\n", SIM_SCENARIO_ESYNTAX, "f.ini:3: expected 'key = value'"},
        {"[run]\n= 5\n", SIM_SCENARIO_ESYNTAX, "f.ini:2: empty key before '='"},
        {"[run]\nagents = 5\nseed = 1\nagents = 6\n", SIM_SCENARIO_EDUP,
         "f.ini:4: run.agents set twice (first at line 2)"},
        {"[run]\nagents =\n", SIM_SCENARIO_EVALUE, "f.ini:2: run.agents: must not be empty"},
        {"[run]\nagnets = 5\n", SIM_SCENARIO_EKEY,
         "f.ini:2: unknown key 'agnets' in section [run]; did you mean 'agents'?"},
        {"[network]\nloss = 2 # too much\n", SIM_SCENARIO_ERANGE,
         "f.ini:2: network.loss: 2 is out of range [0, 1]"},
        {"[mixing]\ntopology = star\n", SIM_SCENARIO_EVALUE,
         "f.ini:2: mixing.topology: 'star' is not one of random, ring"},
        {"[faults]\nevent = 5 crash\n", SIM_SCENARIO_EVALUE,
         "f.ini:2: faults.event: '5 crash': 'crash' needs targets"},
        {"[output]\ndir = \"unterminated\n", SIM_SCENARIO_ESYNTAX, "unterminated quote"},
    };
    char err[512];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sim_scenario *sc = new_sc();
        err[0] = 0;
        int rc = sim_scenario_parse(sc, bad[i].text, "f.ini", err, sizeof err);
        if (rc != bad[i].rc)
            fail_msg("case %zu: returned %d, expected %d (%s)", i, rc, bad[i].rc, err);
        if (!strstr(err, bad[i].needle))
            fail_msg("case %zu: message '%s' lacks '%s'", i, err, bad[i].needle);
        free(sc);
    }
    /* a line too long, a file that does not exist, a file with a NUL */
    sim_scenario *sc = new_sc();
    char *big = malloc(SIM_SCENARIO_LINE_MAX + 64);
    strcpy(big, "[run]\n# ");
    memset(big + 8, 'x', SIM_SCENARIO_LINE_MAX);
    big[8 + SIM_SCENARIO_LINE_MAX] = 0;
    assert_int_equal(sim_scenario_parse(sc, big, "f.ini", err, sizeof err), SIM_SCENARIO_ESYNTAX);
    assert_non_null(strstr(err, "f.ini:2: line longer than"));
    free(big);
    assert_int_equal(sim_scenario_load(sc, "/nonexistent/x.ini", err, sizeof err),
                     SIM_SCENARIO_EIO);
    assert_non_null(strstr(err, "/nonexistent/x.ini: cannot open scenario"));
    char path[] = "/tmp/murmur_scenario_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "[run]\0x", 7), 7);
    close(fd);
    assert_int_equal(sim_scenario_load(sc, path, err, sizeof err), SIM_SCENARIO_ESYNTAX);
    assert_non_null(strstr(err, "NUL"));
    /* and a good file through load */
    FILE *f = fopen(path, "w");
    fputs(FULL, f);
    fclose(f);
    assert_int_equal(sim_scenario_load(sc, path, err, sizeof err), 0);
    assert_int_equal(sc->run.agents, 100);
    char want[128];
    snprintf(want, sizeof want, "%s:4", path);
    assert_string_equal(sc->origin[1], want); /* run.agents is key 1 */
    unlink(path);
    free(sc);
}

static void every_check_error(void **state)
{
    (void)state;
    struct {
        const char *text;
        const char *needle;
    } bad[] = {
        {"[run]\nagents = 2\n",
         "shards.replication = 3 (default) exceeds run.agents = 2 (c.ini:2)"},
        {"[network]\nlatency_dist = uniform\nlatency_min_ms = 5\nlatency_max_ms = 4\n",
         "network.latency_min_ms = 5 (c.ini:3) exceeds network.latency_max_ms = 4 (c.ini:4)"},
        {"[network]\nlatency_dist = lognormal\nlatency_ms = 0\n",
         "lognormal latency needs a median > 0"},
        {"[network]\nlatency_dist = matrix\n", "matrix (c.ini:2) needs network.latency_file"},
        {"[run]\nagents = 3000\n[network]\nlatency_dist = matrix\nlatency_file = m.txt\n",
         "a latency matrix supports at most 2048"},
        {"[run]\nmode = timed\nduration_s = 0\n", "mode timed needs a duration"},
        {"[run]\nagents = 70000\nmode = timed\n", "mode timed runs at most 65536 agents"},
        {"[run]\nagents = 16385\n[membership]\nmode = swim\n",
         "run.agents = 16385 (c.ini:2): membership.mode = swim runs at most 16384 agents"},
        {"[mixing]\nalgorithm = dpsgd\n",
         "mixing.algorithm = dpsgd (c.ini:2) cannot run on mixing.topology = random (default)"},
        {"[faults]\nevent = 1 heal\nevent = 5 crash 3,40\n",
         "c.ini:3: faults.event = 5 crash 3,40: agent 40 out of range (0..15)"},
        /* a key set where the chosen settings ignore it */
        {"[run]\nmode = timed\n[network]\nlatency_file = m.txt\n",
         "network.latency_file = m.txt (c.ini:4) has no effect: it needs network.latency_dist = "
         "matrix"},
        {"[run]\nmode = timed\n[network]\nlatency_sd_ms = 3\n",
         "network.latency_sd_ms = 3 (c.ini:4) has no effect: it needs network.latency_dist = "
         "normal"},
        {"[membership]\nindirect_k = 2\n", "it needs membership.mode = swim"},
        {"[network]\nlatency_ms = 20\n",
         "network.latency_ms = 20 (c.ini:2) has no effect: it needs run.mode = timed"},
        {"[compute]\nstraggler_model = pareto\nslowdown = 3\n",
         "compute.slowdown = 3 (c.ini:3) has no effect"},
        /* rounds mode: bandwidth times oracle shard copies only */
        {"[network]\nbandwidth_mbps = 100\n",
         "network.bandwidth_mbps = 100 (c.ini:2) has no effect: run.mode = rounds (default) "
         "simulates no bandwidth for frames, and shards.mode = auto (default) moves shards as "
         "frames (protocol); use run.mode = timed, or shards.mode = oracle"},
        {"[run]\nmode = rounds\n[network]\nupload_mbps = 10\n[shards]\nmode = protocol\n",
         "network.upload_mbps = 10 (c.ini:4) has no effect: run.mode = rounds (c.ini:2) "
         "simulates no bandwidth for frames, and shards.mode = protocol (c.ini:6)"},
        {"[run]\nagents = 20000\n[network]\ndownload_mbps = 10\n[shards]\nmode = oracle\n",
         "network.download_mbps = 10 (c.ini:4) has no effect: run.mode = rounds (default) "
         "simulates no bandwidth for frames, and run.agents = 20000 places no shards"},
    };
    char err[512];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sim_scenario *sc = new_sc();
        assert_int_equal(sim_scenario_parse(sc, bad[i].text, "c.ini", err, sizeof err), 0);
        err[0] = 0;
        int rc = sim_scenario_check(sc, err, sizeof err);
        if (rc == 0 || !strstr(err, bad[i].needle))
            fail_msg("case %zu: rc %d, message '%s' lacks '%s'", i, rc, err, bad[i].needle);
        free(sc);
    }
}

/* Keys at their defaults have no effect to complain about; the same keys
 * where they apply are fine. */
static void no_effect_allowed(void **state)
{
    (void)state;
    const char *good[] = {
        "[network]\nbandwidth_mbps = 0\nlatency_sigma = 0.5\n",       /* defaults */
        "[network]\nbandwidth_mbps = 100\n[shards]\nmode = oracle\n", /* times shard copies */
        "[run]\nagents = 3000\n[network]\nupload_mbps = 100\n",       /* auto: oracle here */
        "[run]\nmode = timed\nduration_s = 1\n[network]\nbandwidth_mbps = 100\n",
        "[run]\nmode = timed\n[network]\nlatency_dist = normal\nlatency_sd_ms = 3\n",
        "[membership]\nmode = swim\nindirect_k = 2\n",
        "[compute]\nstraggler_model = random\nslowdown = 3\nslow_prob = 0.1\n",
    };
    char err[512];
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        sim_scenario *sc = new_sc();
        assert_int_equal(sim_scenario_parse(sc, good[i], "g.ini", err, sizeof err), 0);
        if (sim_scenario_check(sc, err, sizeof err) != 0)
            fail_msg("case %zu: %s", i, err);
        free(sc);
    }
}

/* Relative paths in a scenario file resolve from the file's directory;
 * catalog names, absolute paths and --set values stay as written. */
static void relative_paths(void **state)
{
    (void)state;
    char dir[64], path[128], err[512];
    snprintf(dir, sizeof dir, "/tmp/murmur_scen_XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/s.ini", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("[model]\ndata = sets/d.csv\n[network]\nlatency_file = m.txt\n", f);
    fclose(f);
    sim_scenario *sc = new_sc();
    assert_int_equal(sim_scenario_load(sc, path, err, sizeof err), 0);
    char want[160];
    snprintf(want, sizeof want, "%s/m.txt", dir);
    assert_string_equal(sc->network.latency_file, want);
    snprintf(want, sizeof want, "%s/sets/d.csv", dir);
    assert_string_equal(sc->model.data, want);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("[model]\ndata = fashion-mnist\n[network]\nlatency_file = /abs/m.txt\n", f);
    fclose(f);
    sim_scenario_defaults(sc);
    assert_int_equal(sim_scenario_load(sc, path, err, sizeof err), 0);
    assert_string_equal(sc->model.data, "fashion-mnist");
    assert_string_equal(sc->network.latency_file, "/abs/m.txt");
    assert_int_equal(sim_scenario_set(sc, "network.latency_file=rel.txt", err, sizeof err), 0);
    assert_string_equal(sc->network.latency_file, "rel.txt"); /* from the working directory */
    free(sc);
    unlink(path);
    rmdir(dir);
}

/* The one syntax (common/settings.h): a '#' is a comment only after a blank
 * or at the start of a value; a quoted value keeps '#', '"' and edge
 * blanks; the same holds on --set. */
static void hash_and_quotes(void **state)
{
    (void)state;
    sim_scenario *sc = new_sc(), *back = new_sc();
    char err[512];
    assert_int_equal(sim_scenario_parse(sc,
                                        "[output]\ndir = runs/#3   # a comment\n"
                                        "[model]\ndata = \" /data/x #1.csv\"  ; quoted\n",
                                        "h.ini", err, sizeof err),
                     0);
    assert_string_equal(sc->output.dir, "runs/#3");
    assert_string_equal(sc->model.data, " /data/x #1.csv");
    assert_int_equal(sim_scenario_set(sc, "output.dir=a #b", err, sizeof err), 0);
    assert_string_equal(sc->output.dir, "a #b");
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_int_equal(sim_scenario_write(sc, f), 0);
    fclose(f);
    assert_non_null(strstr(text, "dir = \"a #b\"\n"));
    if (sim_scenario_parse(back, text, "written", err, sizeof err))
        fail_msg("written scenario does not parse: %s\n%s", err, text);
    assert_string_equal(back->output.dir, "a #b");
    assert_string_equal(back->model.data, " /data/x #1.csv");
    free(text);
    free(sc);
    free(back);
}

static void write_then_read_back(void **state)
{
    (void)state;
    sim_scenario *sc = new_sc(), *back = new_sc();
    char err[512];
    assert_int_equal(sim_scenario_parse(sc, FULL, "full.ini", err, sizeof err), 0);
    assert_int_equal(sim_scenario_set(sc, "network.latency_sd_ms=0.1", err, sizeof err), 0);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_int_equal(sim_scenario_write(sc, f), 0);
    fclose(f);
    if (sim_scenario_parse(back, text, "written", err, sizeof err))
        fail_msg("written scenario does not parse: %s\n%s", err, text);
    for (size_t i = 0; i < sim_scenario_key_count(); i++) {
        char a[256], b[256];
        const char *k = sim_scenario_key_at(i)->name;
        sim_scenario_get(sc, k, a, sizeof a);
        sim_scenario_get(back, k, b, sizeof b);
        if (strcmp(a, b))
            fail_msg("%s: wrote '%s', read back '%s'", k, a, b);
    }
    assert_true(back->network.latency_sd_ms == 0.1);
    assert_int_equal(back->faults.nevents, 2);
    assert_string_equal(back->faults.events[0], sc->faults.events[0]);
    free(text);
    free(sc);
    free(back);
}

static void sweep_enumeration(void **state)
{
    (void)state;
    sim_scenario *base = new_sc(), *sc = new_sc();
    sim_sweep sw;
    sim_sweep_init(&sw);
    char err[512];
    assert_int_equal(sim_sweep_runs(&sw), 1);
    assert_int_equal(sim_sweep_apply(&sw, 0, sc, err, sizeof err), 0);
    char none[8] = "x";
    sim_sweep_label(&sw, 0, none, sizeof none);
    assert_string_equal(none, "");
    assert_int_equal(sim_sweep_add(&sw, base, "network.latency_ms=1, 10,100", err, sizeof err), 0);
    assert_int_equal(sim_sweep_add(&sw, base, "mixing.bits=8,32", err, sizeof err), 0);
    assert_int_equal(sim_sweep_add(&sw, base, "run.mode=timed", err, sizeof err), 0);
    assert_int_equal(sim_sweep_runs(&sw), 6);
    /* nested loops in the order given: the last axis varies fastest */
    const double lat[6] = {1, 1, 10, 10, 100, 100};
    const uint32_t bits[6] = {8, 32, 8, 32, 8, 32};
    for (uint64_t r = 0; r < 6; r++) {
        sim_scenario_defaults(sc);
        assert_int_equal(sim_sweep_apply(&sw, r, sc, err, sizeof err), 0);
        assert_true(sc->network.latency_ms == lat[r]);
        assert_int_equal(sc->mixing.bits, bits[r]);
        assert_int_equal(sc->run.mode, SIM_RUN_TIMED);
        assert_int_equal(sim_sweep_value_index(&sw, r, 0), r / 2);
        size_t bits_key = 0;
        while (strcmp(sim_scenario_key_at(bits_key)->name, "mixing.bits") != 0)
            bits_key++;
        assert_string_equal(sc->origin[bits_key], "--sweep mixing.bits");
    }
    assert_int_equal(sim_sweep_apply(&sw, 6, sc, err, sizeof err), SIM_SCENARIO_ERANGE);
    char label[128];
    sim_sweep_label(&sw, 3, label, sizeof label);
    assert_string_equal(label, "network.latency_ms=10 mixing.bits=32 run.mode=timed");
    sim_sweep_label(&sw, 3, label, 12); /* truncated, still terminated */
    assert_string_equal(label, "network.lat");

    struct {
        const char *spec;
        int rc;
        const char *needle;
    } bad[] = {
        {"network.latency_ms", SIM_SCENARIO_ESYNTAX, "expected section.key=v1,v2"},
        {"network.latency=1,2", SIM_SCENARIO_EKEY, "unknown key"},
        {"faults.event=1 heal,2 heal", SIM_SCENARIO_EKEY, "list keys cannot be swept"},
        {"mixing.bits=4,16", SIM_SCENARIO_EDUP, "key swept twice"},
        {"network.loss=0.1,,0.2", SIM_SCENARIO_ESYNTAX, "empty value"},
        {"network.loss=0.1,2", SIM_SCENARIO_ERANGE,
         "--sweep network.loss: network.loss: 2 is out of range"},
        {"model.kind=mlp,linear", SIM_SCENARIO_EVALUE,
         "'linear' is not one of mlp, softmax, consensus, quadratic, cnn"},
        {"model.spec=cnn,cnn:c8k3,cnn:zz", SIM_SCENARIO_EVALUE, "unknown layer 'z'"},
        {"model.spec=mlp:8", SIM_SCENARIO_EVALUE, "'mlp:8': cnn (the default CNN) or cnn:LAYERS"},
        {"network.latecy_ms=1", SIM_SCENARIO_EKEY, "did you mean 'network.latency_ms'?"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        int rc = sim_sweep_add(&sw, base, bad[i].spec, err, sizeof err);
        if (rc != bad[i].rc || !strstr(err, bad[i].needle))
            fail_msg("--sweep %s: rc %d, message '%s' lacks '%s'", bad[i].spec, rc, err,
                     bad[i].needle);
    }
    assert_int_equal(sim_sweep_runs(&sw), 6); /* failed adds left the sweep alone */
    /* too many runs: 6 * 64 * 64 * 64 > 100000 */
    char spec[1024];
    for (int a = 0; a < 3; a++) {
        const char *keys[] = {"run.seed", "run.rounds", "shards.count"};
        int n = snprintf(spec, sizeof spec, "%s=", keys[a]);
        for (int v = 1; v <= 64; v++)
            n += snprintf(spec + n, sizeof spec - (size_t)n, "%s%d", v > 1 ? "," : "", v);
        int rc = sim_sweep_add(&sw, base, spec, err, sizeof err);
        if (a < 2)
            assert_int_equal(rc, 0);
        else {
            assert_int_equal(rc, SIM_SCENARIO_ETOOMANY);
            assert_non_null(strstr(err, "would make 1572864 runs"));
        }
    }
    free(base);
    free(sc);
}

/* docs/SIMULATOR.md documents every key (tests run from the repository root) */
static void docs_list_every_key(void **state)
{
    (void)state;
    FILE *f = fopen("docs/SIMULATOR.md", "r");
    if (!f)
        fail_msg("docs/SIMULATOR.md not found (run the suite from the repository root)");
    static char doc[1 << 17];
    size_t n = fread(doc, 1, sizeof doc - 1, f);
    fclose(f);
    doc[n] = 0;
    for (size_t i = 0; i < sim_scenario_key_count(); i++) {
        const sim_scenario_key_info *k = sim_scenario_key_at(i);
        char needle[80];
        snprintf(needle, sizeof needle, "`%s`", k->name);
        if (!strstr(doc, needle))
            fail_msg("docs/SIMULATOR.md does not document %s", k->name);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults_are_valid), cmocka_unit_test(parses_a_full_file),
        cmocka_unit_test(overrides),          cmocka_unit_test(every_set_error),
        cmocka_unit_test(every_file_error),   cmocka_unit_test(every_check_error),
        cmocka_unit_test(hash_and_quotes),    cmocka_unit_test(write_then_read_back),
        cmocka_unit_test(sweep_enumeration),  cmocka_unit_test(docs_list_every_key),
        cmocka_unit_test(no_effect_allowed),  cmocka_unit_test(relative_paths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
