/* agent/config: defaults, file syntax, precedence, every error path, the
 * written config reading back, and docs/CONFIG.md naming every option. */
#include "tests/harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/config.h"
#include "gossip/sched.h"
#include "agent/log.h"
#include "model/optim.h"

static char tmpdir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/murmur-test-config-XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd);
}

/* Write text to tmpdir/name; returns the path in a static buffer. */
static const char *write_file(const char *name, const char *text, size_t n)
{
    static char path[2][256];
    static int which;
    char *p = path[which ^= 1];
    snprintf(p, 256, "%s/%s", tmpdir, name);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, n, f), n);
    fclose(f);
    return p;
}

static void defaults_are_sane(void **state)
{
    (void)state;
    agent_config c;
    agent_config_defaults(&c);
    assert_string_equal(c.listen, "tcp://127.0.0.1:7000");
    assert_string_equal(c.advertise, "");
    assert_string_equal(c.data_dir, "murmur-data");
    assert_int_equal(c.seed_count, 0);
    assert_string_equal(c.model_spec, "mlp:256,128");
    assert_string_equal(c.dataset, "fashion-mnist");
    assert_int_equal(c.batch, 64);
    assert_true(c.lr == 0.05 && c.momentum == 0.9 && c.weight_decay == 0.0001);
    assert_string_equal(c.schedule, "cosine:4");
    assert_int_equal(c.schedule_unit, GOSSIP_SCHED_UNIT_EPOCHS);
    assert_int_equal(c.lr_scaling, GOSSIP_SCHED_SCALE_SQRT);
    assert_int_equal(c.algorithm, GOSSIP_MIX_GOSSIP);
    assert_int_equal(c.topology, GOSSIP_TOPO_RANDOM);
    assert_int_equal(c.bits, 8);
    assert_int_equal(c.block, 256);
    assert_int_equal(c.probe_interval_ms, 1000);
    assert_int_equal(c.probe_timeout_ms, 500);
    assert_int_equal(c.replication, 3);
    assert_int_equal(c.checkpoint_every_steps, 1000);
    assert_string_equal(c.metrics_listen, "");
    assert_int_equal(c.log_level, AGENT_LOG_INFO);
    for (size_t i = 0; i < agent_config_option_count; i++)
        assert_string_equal(c.origin[i], "default");
    char err[AGENT_CONFIG_ERR_MAX];
    assert_int_equal(agent_config_finish(&c, err, sizeof err), 0);
    assert_string_equal(c.advertise, "tcp://127.0.0.1:7000");
    assert_string_equal(c.key_file, "murmur-data/murmur.key");
    assert_string_equal(c.network_key_file, "murmur-data/network.key");
    assert_string_equal(c.shards_dir, "murmur-data/shards");
    assert_string_equal(c.checkpoint_path, "murmur-data/checkpoint.bin");
}

static const char full_file[] = "# a complete agent config\r\n"
                                "[node]\r\n"
                                "listen = 0.0.0.0:7100      # every interface\n"
                                "advertise = tcp://10.0.0.5:7100\n"
                                "data_dir = \"/var/lib/murmur #1\"   ; quoted keeps the #\n"
                                "  key_file=/etc/murmur/node.key\n"
                                "\n"
                                "; another comment style\n"
                                "[seeds]\n"
                                "seed = 10.0.0.1:7100\n"
                                "seed = tcp://10.0.0.2:7100\n"
                                "seed = 10.0.0.1:7100\n" /* duplicate: one seed */
                                "[model]\n"
                                "spec = mlp:512,256,100\n"
                                "batch = 128\n"
                                "lr = 0.1\n"
                                "momentum = 0\n"
                                "weight_decay = 5e-4\n"
                                "schedule = step:1000:0.5\n"
                                "init_seed = 18446744073709551615\n"
                                "[mixing]\n"
                                "algorithm = push-sum\n"
                                "topology = one-peer-exponential\n"
                                "bits = 4\n"
                                "block = 1024\n"
                                "interval_steps = 8\n"
                                "allreduce_step_deadline_ms = 750\n"
                                "[membership]\n"
                                "probe_interval_ms = 200\n"
                                "probe_timeout_ms = 100\n"
                                "indirect_k = 0\n"
                                "suspicion_mult = 6\n"
                                "[shards]\n"
                                "replication = 2\n"
                                "[checkpoint]\n"
                                "every_steps = 0\n"
                                "[metrics]\n"
                                "listen = http://127.0.0.1:9100\n"
                                "[log]\n"
                                "level = debug\n"
                                "[limits]\n"
                                "max_peers = 64\n"
                                "send_queue_len = 16\n"
                                "recv_queue_len = 32\n"
                                "event_queue_len = 128\n"
                                "[model]\n"
                                "eval_samples = 100\n"; /* a section may come back */

static void file_parses_every_section(void **state)
{
    (void)state;
    agent_config c;
    char err[AGENT_CONFIG_ERR_MAX] = "";
    agent_config_defaults(&c);
    const char *path = write_file("full.conf", full_file, sizeof full_file - 1);
    assert_int_equal(agent_config_load_file(&c, path, err, sizeof err), 0);
    assert_string_equal(c.listen, "tcp://0.0.0.0:7100");
    assert_string_equal(c.advertise, "tcp://10.0.0.5:7100");
    assert_string_equal(c.data_dir, "/var/lib/murmur #1");
    assert_string_equal(c.key_file, "/etc/murmur/node.key");
    assert_int_equal(c.seed_count, 2);
    assert_string_equal(c.seeds[0], "tcp://10.0.0.1:7100");
    assert_string_equal(c.seeds[1], "tcp://10.0.0.2:7100");
    assert_string_equal(c.model_spec, "mlp:512,256,100");
    assert_int_equal(c.batch, 128);
    assert_int_equal(c.eval_samples, 100);
    assert_true(c.lr == 0.1 && c.momentum == 0 && c.weight_decay == 5e-4);
    assert_string_equal(c.schedule, "step:1000:0.5");
    assert_true(c.init_seed == UINT64_MAX);
    assert_int_equal(c.algorithm, GOSSIP_MIX_PUSHSUM);
    assert_int_equal(c.topology, GOSSIP_TOPO_ONE_PEER_EXP);
    assert_int_equal(c.bits, 4);
    assert_int_equal(c.block, 1024);
    assert_int_equal(c.interval_steps, 8);
    assert_int_equal(c.allreduce_step_deadline_ms, 750);
    assert_int_equal(c.probe_interval_ms, 200);
    assert_int_equal(c.probe_timeout_ms, 100);
    assert_int_equal(c.indirect_k, 0);
    assert_int_equal(c.suspicion_mult, 6);
    assert_int_equal(c.replication, 2);
    assert_int_equal(c.checkpoint_every_steps, 0);
    assert_string_equal(c.metrics_listen, "127.0.0.1:9100");
    assert_int_equal(c.log_level, AGENT_LOG_DEBUG);
    assert_int_equal(c.max_peers, 64);
    assert_int_equal(c.send_queue_len, 16);
    assert_int_equal(c.recv_queue_len, 32);
    assert_int_equal(c.event_queue_len, 128);
    /* origins name the file and the line */
    char want[300];
    snprintf(want, sizeof want, "%s:3", path);
    assert_string_equal(c.origin[0], want); /* node.listen */
    assert_int_equal(agent_config_finish(&c, err, sizeof err), 0);
    assert_string_equal(c.network_key_file, "/var/lib/murmur #1/network.key");
    assert_string_equal(c.key_file, "/etc/murmur/node.key"); /* explicit value kept */
}

typedef struct bad_case {
    const char *text;
    int code;
    const char *needle1, *needle2; /* substrings the message must contain */
} bad_case;

static void every_file_error_is_named(void **state)
{
    (void)state;
    static const bad_case cases[] = {
        {"[nodes]\n", AGENT_CONFIG_EUNKNOWN,
         "t.conf:1:", "unknown section [nodes]; did you mean [node]? (sections: node, seeds,"},
        {"[node]\nlisten = 1.2.3.4:5\ncolour = red\n", AGENT_CONFIG_EUNKNOWN,
         "t.conf:3:", "unknown key 'colour' in section [node]"},
        {"[node]\nlistn = 1.2.3.4:5\n", AGENT_CONFIG_EUNKNOWN,
         "t.conf:2:", "unknown key 'listn' in section [node]; did you mean 'listen'?"},
        {"[model]\nbatch = 8\n[mixing]\nbits = 4\n[model]\nbatch = 16\n", AGENT_CONFIG_EDUP,
         "t.conf:6:", "model.batch set twice (first at line 2)"},
        {"listen = 1.2.3.4:5\n", AGENT_CONFIG_ESYNTAX, "t.conf:1:", "outside any [section]"},
        {"[node]\nlisten 1.2.3.4:5\n", AGENT_CONFIG_ESYNTAX, "t.conf:2:", "expected 'key = value'"},
        {"[node\n", AGENT_CONFIG_ESYNTAX, "t.conf:1:", "without ']'"},
        {"[node] x\n", AGENT_CONFIG_ESYNTAX, "t.conf:1:", "text after [node]"},
        {"[node]\nList-en = x\n", AGENT_CONFIG_ESYNTAX, "t.conf:2:", "bad key 'List-en'"},
        {"[node]\n= x\n", AGENT_CONFIG_ESYNTAX, "t.conf:2:", "empty key"},
        {"[node]\ndata_dir = \"abc\n", AGENT_CONFIG_ESYNTAX, "node.data_dir", "unterminated"},
        {"[node]\ndata_dir = \"abc\" def\n", AGENT_CONFIG_ESYNTAX, "node.data_dir",
         "text after the quoted value"},
        {"[node]\nlisten = nope\n", AGENT_CONFIG_EVALUE, "t.conf:2: node.listen", "HOST:PORT"},
        {"[node]\nlisten = 1.2.3.4:70000\n", AGENT_CONFIG_EVALUE, "node.listen", "1-65535"},
        {"[node]\nlisten = 1.2.3.4:0\n", AGENT_CONFIG_EVALUE, "node.listen", "1-65535"},
        {"[node]\nlisten = udp://1.2.3.4:5\n", AGENT_CONFIG_EVALUE, "node.listen", "scheme"},
        {"[node]\nlisten = ipc://\n", AGENT_CONFIG_EVALUE, "node.listen", "no path"},
        {"[node]\nlisten =\n", AGENT_CONFIG_EVALUE, "node.listen", "must not be empty"},
        {"[node]\ndata_dir = \"\"\n", AGENT_CONFIG_EVALUE, "node.data_dir", "must not be empty"},
        {"[seeds]\nseed = \n", AGENT_CONFIG_EVALUE, "seeds.seed", "must not be empty"},
        {"[seeds]\nseed = host-without-port\n", AGENT_CONFIG_EVALUE, "seeds.seed", "HOST:PORT"},
        {"[mixing]\nbits = 3\n", AGENT_CONFIG_EVALUE, "t.conf:2: mixing.bits",
         "'3' is not one of 1, 2, 4, 8, 16, 32"},
        {"[mixing]\nalgorithm = paxos\n", AGENT_CONFIG_EVALUE, "mixing.algorithm",
         "dpsgd, gossip, push-sum, choco, allreduce"},
        {"[mixing]\ntopology = star\n", AGENT_CONFIG_EVALUE, "mixing.topology", "ring"},
        {"[mixing]\nblock = 0\n", AGENT_CONFIG_ERANGE, "mixing.block", "out of range [1, 65536]"},
        {"[mixing]\nblock = 65537\n", AGENT_CONFIG_ERANGE, "mixing.block", "out of range"},
        {"[model]\nbatch = 12abc\n", AGENT_CONFIG_EVALUE, "model.batch", "not a whole number"},
        {"[model]\nbatch = -5\n", AGENT_CONFIG_EVALUE, "model.batch", "not a whole number"},
        {"[model]\nbatch = +5\n", AGENT_CONFIG_EVALUE, "model.batch", "not a whole number"},
        {"[model]\ninit_seed = 18446744073709551616\n", AGENT_CONFIG_EVALUE, "model.init_seed",
         "not a whole number"},
        {"[model]\nlr = -0.1\n", AGENT_CONFIG_ERANGE, "model.lr", "out of range"},
        {"[model]\nlr = nan\n", AGENT_CONFIG_EVALUE, "model.lr", "not a finite number"},
        {"[model]\nlr = 1e999\n", AGENT_CONFIG_EVALUE, "model.lr", "not a finite number"},
        {"[model]\nlr = 0.1x\n", AGENT_CONFIG_EVALUE, "model.lr", "not a finite number"},
        {"[model]\nmomentum = 1\n", AGENT_CONFIG_ERANGE, "model.momentum", "out of range"},
        {"[model]\nspec = mlp:\n", AGENT_CONFIG_EVALUE, "model.spec", "softmax, mlp"},
        {"[model]\nspec = mlp:0\n", AGENT_CONFIG_EVALUE, "model.spec", "softmax, mlp"},
        {"[model]\nspec = mlp:10,,20\n", AGENT_CONFIG_EVALUE, "model.spec", "softmax, mlp"},
        {"[model]\nspec = mlp:70000\n", AGENT_CONFIG_EVALUE, "model.spec", "softmax, mlp"},
        {"[model]\nspec = mlp:1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17\n", AGENT_CONFIG_EVALUE,
         "model.spec", "1-16 layers"},
        {"[model]\nspec = cnnx\n", AGENT_CONFIG_EVALUE, "model.spec", "not understood"},
        {"[model]\nspec = cnn:c8k3,f\n", AGENT_CONFIG_EVALUE, "model.spec",
         "dense layer is f<units>"},
        {"[model]\nschedule = step:0:0.5\n", AGENT_CONFIG_EVALUE, "model.schedule", "GAMMA"},
        {"[model]\nschedule = step:10:2\n", AGENT_CONFIG_EVALUE, "model.schedule", "GAMMA"},
        {"[model]\nschedule = cosine:\n", AGENT_CONFIG_EVALUE, "model.schedule", "cosine:LEN"},
        {"[model]\nschedule = cosine:-2\n", AGENT_CONFIG_EVALUE, "model.schedule", "LEN > 0"},
        {"[model]\nschedule_unit = hours\n", AGENT_CONFIG_EVALUE, "model.schedule_unit",
         "steps, epochs"},
        {"[model]\nlr_scaling = cubic\n", AGENT_CONFIG_EVALUE, "model.lr_scaling",
         "none, sqrt, linear"},
        {"[model]\nschedule = linear\n", AGENT_CONFIG_EVALUE, "model.schedule", "constant"},
        {"[model]\ndataset =\n", AGENT_CONFIG_EVALUE, "model.dataset", "must not be empty"},
        {"[membership]\nprobe_interval_ms = 10\n", AGENT_CONFIG_ERANGE,
         "membership.probe_interval_ms", "[50, 60000] ms"},
        {"[shards]\nreplication = 17\n", AGENT_CONFIG_ERANGE, "shards.replication", "[1, 16]"},
        {"[metrics]\nlisten = localhost\n", AGENT_CONFIG_EVALUE, "metrics.listen", "HOST:PORT"},
        {"[log]\nlevel = loud\n", AGENT_CONFIG_EVALUE, "log.level",
         "debug, info, warn, error, off"},
        {"[limits]\nmax_peers = 1\n", AGENT_CONFIG_ERANGE, "limits.max_peers", "out of range"},
        {"[limits]\nevent_queue_len = 99999999999\n", AGENT_CONFIG_ERANGE, "limits.event_queue_len",
         "out of range"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        agent_config c;
        char err[AGENT_CONFIG_ERR_MAX] = "";
        agent_config_defaults(&c);
        int rc = agent_config_load_string(&c, "t.conf", cases[i].text, err, sizeof err);
        if (rc != cases[i].code || !strstr(err, cases[i].needle1) || !strstr(err, cases[i].needle2))
            fail_msg("case %zu (%s): rc %d (want %d), message '%s' lacks '%s' or '%s'", i,
                     cases[i].text, rc, cases[i].code, err, cases[i].needle1, cases[i].needle2);
    }
}

static void long_lines_and_seed_limit(void **state)
{
    (void)state;
    agent_config c;
    char err[AGENT_CONFIG_ERR_MAX];
    size_t n = AGENT_CONFIG_LINE_MAX + 100;
    char *text = malloc(n + 1);
    assert_non_null(text);
    memcpy(text, "[node]\ndata_dir = ", 18);
    memset(text + 18, 'a', n - 18);
    text[n] = '\0';
    agent_config_defaults(&c);
    assert_int_equal(agent_config_load_string(&c, "long.conf", text, err, sizeof err),
                     AGENT_CONFIG_ESYNTAX);
    assert_non_null(strstr(err, "long.conf:2: line longer than 4096"));
    /* a path that fits a line but not the field */
    text[18 + AGENT_CONFIG_PATH_MAX + 5] = '\0';
    agent_config_defaults(&c);
    assert_int_equal(agent_config_load_string(&c, "long.conf", text, err, sizeof err),
                     AGENT_CONFIG_EVALUE);
    assert_non_null(strstr(err, "node.data_dir: path longer than 1023 bytes"));
    free(text);

    char seeds[4096] = "[seeds]\n";
    for (unsigned i = 0; i <= AGENT_CONFIG_SEEDS_MAX; i++) {
        char line[64];
        snprintf(line, sizeof line, "seed = 10.0.0.%u:7000\n", i + 1);
        strcat(seeds, line);
    }
    agent_config_defaults(&c);
    assert_int_equal(agent_config_load_string(&c, "s.conf", seeds, err, sizeof err),
                     AGENT_CONFIG_ERANGE);
    assert_non_null(strstr(err, "s.conf:34: seeds.seed: more than 32 seeds"));
}

static void missing_and_binary_files(void **state)
{
    (void)state;
    agent_config c;
    char err[AGENT_CONFIG_ERR_MAX];
    char path[256];
    snprintf(path, sizeof path, "%s/does-not-exist.conf", tmpdir);
    agent_config_defaults(&c);
    assert_int_equal(agent_config_load_file(&c, path, err, sizeof err), AGENT_CONFIG_EIO);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "No such file or directory"));

    const char *bin = write_file("bin.conf", "[node]\0junk", 11);
    assert_int_equal(agent_config_load_file(&c, bin, err, sizeof err), AGENT_CONFIG_ESYNTAX);
    assert_non_null(strstr(err, "NUL byte"));

    size_t big = AGENT_CONFIG_FILE_MAX + 1;
    char *huge = malloc(big);
    assert_non_null(huge);
    memset(huge, '#', big);
    const char *hp = write_file("huge.conf", huge, big);
    free(huge);
    assert_int_equal(agent_config_load_file(&c, hp, err, sizeof err), AGENT_CONFIG_EIO);
    assert_non_null(strstr(err, "larger than"));

    /* a directory cannot be read as a file */
    assert_int_equal(agent_config_load_file(&c, tmpdir, err, sizeof err), AGENT_CONFIG_EIO);
    assert_non_null(strstr(err, tmpdir));
}

static int parse(agent_config *c, agent_config_args *a, char *err, size_t errlen, int argc,
                 const char *const *argv)
{
    return agent_config_parse_args(c, a, argc, (char **)argv, err, errlen);
}

#define ARGC(v) ((int)(sizeof v / sizeof v[0]))

static void flags_override_file_left_to_right(void **state)
{
    (void)state;
    static const char body[] = "[node]\nlisten = 127.0.0.1:7001\n"
                               "[seeds]\nseed = 10.0.0.1:7000\nseed = 10.0.0.2:7000\n"
                               "[mixing]\nbits = 16\n[metrics]\nlisten = 127.0.0.1:9000\n";
    const char *conf = write_file("o.conf", body, sizeof body - 1);
    agent_config c;
    agent_config_args a;
    char err[AGENT_CONFIG_ERR_MAX] = "";

    /* the file alone */
    const char *v1[] = {"agent", "--config", conf};
    assert_int_equal(parse(&c, &a, err, sizeof err, ARGC(v1), v1), 0);
    assert_string_equal(a.config_file, conf);
    assert_string_equal(c.listen, "tcp://127.0.0.1:7001");
    assert_int_equal(c.seed_count, 2);
    assert_int_equal(c.bits, 16);

    /* flags beat the file wherever --config appears; later beats earlier;
     * the first --seed replaces the file's seeds, later ones append */
    const char *v2[] = {"agent",
                        "--set",
                        "mixing.bits=4",
                        "--listen=127.0.0.1:7002",
                        "--seed",
                        "10.0.0.9:7000",
                        "--config",
                        conf,
                        "--set=mixing.bits=2",
                        "--seed",
                        "tcp://10.0.0.8:7000",
                        "--metrics",
                        "",
                        "--data-dir",
                        "/srv/m",
                        "--log-level",
                        "warn",
                        "--mixing",
                        "allreduce",
                        "--set",
                        "model.lr=0.01"};
    assert_int_equal(parse(&c, &a, err, sizeof err, ARGC(v2), v2), 0);
    assert_string_equal(c.listen, "tcp://127.0.0.1:7002");
    assert_string_equal(c.origin[0], "--listen");
    assert_int_equal(c.bits, 2);
    assert_int_equal(c.seed_count, 2);
    assert_string_equal(c.seeds[0], "tcp://10.0.0.9:7000");
    assert_string_equal(c.seeds[1], "tcp://10.0.0.8:7000");
    assert_string_equal(c.metrics_listen, "");
    assert_string_equal(c.data_dir, "/srv/m");
    assert_string_equal(c.checkpoint_path, "/srv/m/checkpoint.bin"); /* finish ran */
    assert_int_equal(c.log_level, AGENT_LOG_WARN);
    assert_int_equal(c.algorithm, GOSSIP_MIX_ALLREDUCE);
    assert_true(c.lr == 0.01);
    assert_false(a.help || a.print_config);

    const char *v3[] = {"agent", "--print-config", "--set", "log.level=error"};
    assert_int_equal(parse(&c, &a, err, sizeof err, ARGC(v3), v3), 0);
    assert_true(a.print_config);
    assert_null(a.config_file);
    assert_int_equal(c.log_level, AGENT_LOG_ERROR);

    /* --help stops before any setting is checked */
    const char *v4[] = {"agent", "--set", "mixing.bits=3", "--help"};
    assert_int_equal(parse(&c, &a, err, sizeof err, ARGC(v4), v4), 0);
    assert_true(a.help);
}

static void command_line_errors(void **state)
{
    (void)state;
    static const struct {
        const char *argv[4];
        int argc;
        int code;
        const char *needle;
    } cases[] = {
        {{"agent", "--listen"}, 2, AGENT_CONFIG_EUSAGE, "--listen needs a value"},
        {{"agent", "--frobnicate", "1"}, 3, AGENT_CONFIG_EUNKNOWN, "unknown flag '--frobnicate'"},
        {{"agent", "extra"}, 2, AGENT_CONFIG_EUSAGE, "unexpected argument 'extra'"},
        {{"agent", "--set", "mixing.bits"}, 3, AGENT_CONFIG_EUSAGE, "expected section.key=value"},
        {{"agent", "--set", "mixing.colour=1"},
         3,
         AGENT_CONFIG_EUNKNOWN,
         "unknown option 'mixing.colour'"},
        {{"agent", "--set", "nodot=1"}, 3, AGENT_CONFIG_EUNKNOWN, "unknown option 'nodot'"},
        {{"agent", "--set", "mixing.bits=5"},
         3,
         AGENT_CONFIG_EVALUE,
         "--set mixing.bits: mixing.bits: '5' is not one of"},
        {{"agent", "--seed", "nowhere"}, 3, AGENT_CONFIG_EVALUE, "--seed: seeds.seed: 'nowhere'"},
        {{"agent", "--config", "/nonexistent/m.conf"},
         3,
         AGENT_CONFIG_EIO,
         "/nonexistent/m.conf: cannot open config file"},
        {{"agent", "--config=a", "--config=b"}, 3, AGENT_CONFIG_EUSAGE, "--config given twice"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        agent_config c;
        agent_config_args a;
        char err[AGENT_CONFIG_ERR_MAX] = "";
        int rc = parse(&c, &a, err, sizeof err, cases[i].argc, cases[i].argv);
        if (rc != cases[i].code || !strstr(err, cases[i].needle))
            fail_msg("case %zu: rc %d (want %d), message '%s' lacks '%s'", i, rc, cases[i].code,
                     err, cases[i].needle);
    }
}

static void finish_checks_relations_and_files(void **state)
{
    (void)state;
    char nk[256];
    snprintf(nk, sizeof nk, "%s/network.key", tmpdir);
    static const struct {
        const char *text;
        int code;
        const char *needle;
    } cases[] = {
        {"[node]\nlisten = 0.0.0.0:7000\n", AGENT_CONFIG_ECONFLICT,
         "c.conf:2: node.listen tcp://0.0.0.0:7000 binds every interface; set node.advertise"},
        {"[node]\nadvertise = 0.0.0.0:7000\n", AGENT_CONFIG_ECONFLICT, "is a wildcard"},
        {"[membership]\nprobe_interval_ms = 500\nprobe_timeout_ms = 500\n", AGENT_CONFIG_ECONFLICT,
         "c.conf:3: membership.probe_timeout_ms (500) must be less than "
         "membership.probe_interval_ms (500, from c.conf:2)"},
        {"[limits]\nrecv_queue_len = 5000\n", AGENT_CONFIG_ECONFLICT,
         "limits.recv_queue_len (5000) must not exceed limits.event_queue_len (4096, from "
         "default)"},
        {"[limits]\nmax_peers = 2\n", AGENT_CONFIG_ECONFLICT, "shards.replication (3) exceeds"},
        {"[node]\nnetwork_key_file = /nonexistent/net.key\n", AGENT_CONFIG_EIO,
         "c.conf:2: node.network_key_file: cannot read '/nonexistent/net.key': No such file"},
        {"[node]\nallow_list_file = /nonexistent/allow\n", AGENT_CONFIG_EIO,
         "node.allow_list_file: cannot read"},
        {"[model]\ndataset = /nonexistent/data.csv\n", AGENT_CONFIG_EIO,
         "model.dataset: cannot read '/nonexistent/data.csv'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        agent_config c;
        char err[AGENT_CONFIG_ERR_MAX] = "";
        agent_config_defaults(&c);
        assert_int_equal(agent_config_load_string(&c, "c.conf", cases[i].text, err, sizeof err), 0);
        int rc = agent_config_finish(&c, err, sizeof err);
        if (rc != cases[i].code || !strstr(err, cases[i].needle))
            fail_msg("case %zu: rc %d (want %d), message '%s' lacks '%s'", i, rc, cases[i].code,
                     err, cases[i].needle);
    }
    /* the same options pass when the files exist and the relations hold */
    write_file("network.key", "k", 1);
    agent_config c;
    char err[AGENT_CONFIG_ERR_MAX] = "";
    agent_config_defaults(&c);
    assert_int_equal(agent_config_set(&c, "node.network_key_file", nk, NULL, err, sizeof err), 0);
    assert_int_equal(agent_config_set(&c, "node.listen", "0.0.0.0:7000", NULL, err, sizeof err), 0);
    assert_int_equal(
        agent_config_set(&c, "node.advertise", "192.168.1.4:7000", NULL, err, sizeof err), 0);
    assert_int_equal(agent_config_finish(&c, err, sizeof err), 0);
    assert_string_equal(c.network_key_file, nk);
}

/* The written config with the "# origin" comments removed, one option a line. */
static void written_values(const agent_config *c, char *out, size_t cap)
{
    FILE *f = tmpfile();
    assert_non_null(f);
    agent_config_write(c, f);
    rewind(f);
    char line[2048];
    size_t at = 0;
    out[0] = '\0';
    while (fgets(line, sizeof line, f)) {
        char *cut = strstr(line, "   # ");
        if (cut)
            strcpy(cut, "\n");
        size_t n = strlen(line);
        assert_true(at + n < cap);
        memcpy(out + at, line, n + 1);
        at += n;
    }
    fclose(f);
}

static void written_config_reads_back(void **state)
{
    (void)state;
    agent_config a, b;
    char err[AGENT_CONFIG_ERR_MAX] = "";
    agent_config_defaults(&a);
    const char *path = write_file("full2.conf", full_file, sizeof full_file - 1);
    assert_int_equal(agent_config_load_file(&a, path, err, sizeof err), 0);
    assert_int_equal(agent_config_set(&a, "node.allow_list_file", "has \"quotes\" # and \\", NULL,
                                      err, sizeof err),
                     0);
    assert_int_equal(agent_config_set(&a, "model.lr", "0.1234567890123", NULL, err, sizeof err), 0);
    /* a cnn spec is a model.spec like any other (grammar: model/spec.h) */
    assert_int_equal(agent_config_set(&a, "model.spec", "cnn:c32k5g8,p2,c64k5,p2,f512,d0.5", NULL,
                                      err, sizeof err),
                     0);
    assert_int_equal(agent_config_set(&a, "model.spec", "cnn", NULL, err, sizeof err), 0);
    static char text_a[16384], text_b[16384];
    written_values(&a, text_a, sizeof text_a);
    const char *again = write_file("written.conf", text_a, strlen(text_a));
    agent_config_defaults(&b);
    int rc = agent_config_load_file(&b, again, err, sizeof err);
    if (rc)
        fail_msg("re-reading the written config failed: %s\n%s", err, text_a);
    written_values(&b, text_b, sizeof text_b);
    assert_string_equal(text_a, text_b);
    assert_string_equal(b.allow_list_file, "has \"quotes\" # and \\");
    assert_true(b.lr == 0.1234567890123);
    assert_int_equal(b.seed_count, 2);
    assert_non_null(strstr(text_a, "[mixing]\nalgorithm = push-sum\n"));
}

static void spec_parser(void **state)
{
    (void)state;
    uint32_t w[AGENT_CONFIG_LAYERS_MAX], n = 99;
    assert_int_equal(agent_config_parse_spec("softmax", w, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(agent_config_parse_spec("mlp:256,128,100", w, &n), 0);
    assert_int_equal(n, 3);
    assert_true(w[0] == 256 && w[1] == 128 && w[2] == 100);
    assert_int_equal(agent_config_parse_spec("mlp:65536", NULL, NULL), 0);
    assert_int_equal(agent_config_parse_spec("mlp:65537", NULL, NULL), -1);
    assert_int_equal(agent_config_parse_spec("mlp:1,", NULL, NULL), -1);
    assert_int_equal(agent_config_parse_spec("mlp:,1", NULL, NULL), -1);
    assert_int_equal(agent_config_parse_spec("mlp: 1", NULL, NULL), -1);
    assert_int_equal(agent_config_parse_spec("softmax:1", NULL, NULL), -1);
    assert_string_equal(agent_config_strerror(AGENT_CONFIG_ERANGE), "value out of range");
}

/* docs/CONFIG.md must document every option (run from the repository root,
 * as `make test` does). */
static void docs_name_every_option(void **state)
{
    (void)state;
    FILE *f = fopen("docs/CONFIG.md", "r");
    if (!f)
        fail_msg("docs/CONFIG.md not found (run the suite from the repository root)");
    static char doc[65536];
    size_t n = fread(doc, 1, sizeof doc - 1, f);
    doc[n] = '\0';
    fclose(f);
    for (size_t i = 0; i < agent_config_option_count; i++) {
        const agent_config_option *o = &agent_config_options[i];
        char name[96];
        snprintf(name, sizeof name, "`%s.%s`", o->section, o->key);
        if (!strstr(doc, name))
            fail_msg("docs/CONFIG.md does not document %s", name);
        if (*o->def) {
            snprintf(name, sizeof name, "`%s`", o->def);
            if (!strstr(doc, name))
                fail_msg("docs/CONFIG.md does not show the default %s of %s.%s", name, o->section,
                         o->key);
        }
    }
}

/* Run agent_config_main with stdout and stderr captured. */
static int run_main(agent_config *c, int argc, const char *const *argv, char *out, size_t cap,
                    char *errout, size_t errcap)
{
    FILE *o = tmpfile(), *e = tmpfile();
    assert_true(o && e);
    fflush(stdout);
    fflush(stderr);
    int so = dup(1), se = dup(2);
    dup2(fileno(o), 1);
    dup2(fileno(e), 2);
    int rc = agent_config_main(c, argc, (char **)argv);
    fflush(stdout);
    fflush(stderr);
    dup2(so, 1);
    dup2(se, 2);
    close(so);
    close(se);
    rewind(o);
    rewind(e);
    size_t n = fread(out, 1, cap - 1, o);
    out[n] = '\0';
    n = fread(errout, 1, errcap - 1, e);
    errout[n] = '\0';
    fclose(o);
    fclose(e);
    return rc;
}

static void front_end(void **state)
{
    (void)state;
    agent_config c;
    static char out[16384];
    char errout[1024];
    const char *run[] = {"agent", "--log-level", "error", "--seed", "10.1.1.1:7000"};
    assert_int_equal(run_main(&c, ARGC(run), run, out, sizeof out, errout, sizeof errout), -1);
    assert_string_equal(out, "");
    assert_string_equal(errout, "");
    assert_int_equal(agent_log_get_level(), AGENT_LOG_ERROR);
    agent_log_set_level(AGENT_LOG_INFO);

    const char *help[] = {"agent", "--help"};
    assert_int_equal(run_main(&c, ARGC(help), help, out, sizeof out, errout, sizeof errout), 0);
    assert_non_null(strstr(out, "usage: murmur agent"));
    assert_non_null(strstr(out, "--seed HOST:PORT"));

    const char *bad[] = {"agent", "--set", "mixing.bits=3"};
    assert_int_equal(run_main(&c, ARGC(bad), bad, out, sizeof out, errout, sizeof errout), 2);
    assert_string_equal(out, "");
    assert_non_null(strstr(errout, "murmur agent: --set mixing.bits: mixing.bits: '3'"));

    /* --print-config prints a file that reads back to the same settings */
    const char *print[] = {"agent",         "--print-config", "--seed",
                           "10.1.1.1:7000", "--metrics",      "127.0.0.1:9100"};
    assert_int_equal(run_main(&c, ARGC(print), print, out, sizeof out, errout, sizeof errout), 0);
    assert_non_null(strstr(out, "seed = tcp://10.1.1.1:7000   # --seed\n"));
    assert_non_null(strstr(out, "[metrics]\nlisten = 127.0.0.1:9100   # --metrics\n"));
    agent_config back;
    char err[AGENT_CONFIG_ERR_MAX] = "";
    agent_config_defaults(&back);
    if (agent_config_load_string(&back, "printed", out, err, sizeof err))
        fail_msg("printed config does not read back: %s", err);
    assert_int_equal(agent_config_finish(&back, err, sizeof err), 0);
    assert_string_equal(back.seeds[0], "tcp://10.1.1.1:7000");
    assert_string_equal(back.metrics_listen, "127.0.0.1:9100");
    assert_string_equal(back.checkpoint_path, c.checkpoint_path);
}

/* MURMUR_SECTION_KEY variables sit between the file and the flags, and
 * --print-config names them as the source. */
static void environment_between_file_and_flags(void **state)
{
    (void)state;
    static const char body[] = "[mixing]\nbits = 16\nblock = 512\n[seeds]\nseed = 10.0.0.1:7000\n";
    const char *conf = write_file("env.conf", body, sizeof body - 1);
    agent_config c;
    agent_config_args a;
    char err[AGENT_CONFIG_ERR_MAX] = "";
    setenv("MURMUR_MIXING_BITS", "4", 1);
    setenv("MURMUR_SEEDS_SEED", "10.0.0.2:7000, 10.0.0.3:7000", 1);
    setenv("MURMUR_LOG_LEVEL", "warn", 1);
    const char *v1[] = {"agent", "--config", conf, "--log-level", "error"};
    assert_int_equal(parse(&c, &a, err, sizeof err, ARGC(v1), v1), 0);
    assert_int_equal(c.bits, 4);                    /* the environment beats the file */
    assert_int_equal(c.block, 512);                 /* the file still counts */
    assert_int_equal(c.log_level, AGENT_LOG_ERROR); /* a flag beats the environment */
    assert_int_equal(c.seed_count, 2);              /* the environment's seeds replace the file's */
    assert_string_equal(c.seeds[1], "tcp://10.0.0.3:7000");
    int bits = agent_config_option_index("mixing", "bits");
    assert_string_equal(c.origin[bits], "env MURMUR_MIXING_BITS");
    const char *v2[] = {"agent",         "--config", conf,           "--set",
                        "mixing.bits=2", "--seed",   "10.0.0.9:7000"};
    assert_int_equal(parse(&c, &a, err, sizeof err, ARGC(v2), v2), 0);
    assert_int_equal(c.bits, 2);
    assert_int_equal(c.seed_count, 1);
    /* --print-config shows the source */
    static char out[16384];
    char errout[1024];
    const char *print[] = {"agent", "--print-config"};
    assert_int_equal(run_main(&c, ARGC(print), print, out, sizeof out, errout, sizeof errout), 0);
    assert_non_null(strstr(out, "bits = 4   # env MURMUR_MIXING_BITS\n"));
    assert_non_null(strstr(out, "seed = tcp://10.0.0.2:7000   # env MURMUR_SEEDS_SEED\n"));
    /* a bad value or an unknown option of a known section is an error */
    setenv("MURMUR_MIXING_BITS", "3", 1);
    assert_int_equal(parse(&c, &a, err, sizeof err, ARGC(v1), v1), AGENT_CONFIG_EVALUE);
    assert_non_null(strstr(err, "env MURMUR_MIXING_BITS: mixing.bits: '3' is not one of"));
    unsetenv("MURMUR_MIXING_BITS");
    setenv("MURMUR_MIXING_BTIS", "4", 1);
    assert_int_equal(parse(&c, &a, err, sizeof err, ARGC(v1), v1), AGENT_CONFIG_EUNKNOWN);
    assert_non_null(strstr(err, "unknown option 'mixing.btis'; did you mean MURMUR_MIXING_BITS?"));
    unsetenv("MURMUR_MIXING_BTIS");
    unsetenv("MURMUR_SEEDS_SEED");
    unsetenv("MURMUR_LOG_LEVEL");
    agent_log_set_level(AGENT_LOG_INFO);
}

static void flags_suggest_the_nearest(void **state)
{
    (void)state;
    static const struct {
        const char *argv[4];
        int argc;
        int code;
        const char *needle;
    } cases[] = {
        {{"agent", "--listn", "1.2.3.4:5"},
         3,
         AGENT_CONFIG_EUNKNOWN,
         "unknown flag '--listn'; did you mean --listen?"},
        {{"agent", "--seeed=1.2.3.4:5"}, 2, AGENT_CONFIG_EUNKNOWN, "did you mean --seed?"},
        {{"agent", "--se", "x"}, 3, AGENT_CONFIG_EUNKNOWN, "ambiguous flag '--se' (--set, --seed)"},
        {{"agent", "--print-config=yes"}, 2, AGENT_CONFIG_EUSAGE, "--print-config takes no value"},
        {{"agent", "--set", "mixing.bist=4"},
         3,
         AGENT_CONFIG_EUNKNOWN,
         "unknown option 'mixing.bist'; did you mean 'mixing.bits'?"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        agent_config c;
        agent_config_args a;
        char err[AGENT_CONFIG_ERR_MAX] = "";
        int rc = parse(&c, &a, err, sizeof err, cases[i].argc, cases[i].argv);
        if (rc != cases[i].code || !strstr(err, cases[i].needle))
            fail_msg("case %zu: rc %d (want %d), message '%s' lacks '%s'", i, rc, cases[i].code,
                     err, cases[i].needle);
    }
    /* a unique prefix is the flag (getopt_long) */
    agent_config c;
    agent_config_args a;
    char err[AGENT_CONFIG_ERR_MAX] = "";
    const char *v[] = {"agent", "--data-d", "/srv/m", "--log", "warn"};
    assert_int_equal(parse(&c, &a, err, sizeof err, ARGC(v), v), 0);
    assert_string_equal(c.data_dir, "/srv/m");
    assert_int_equal(c.log_level, AGENT_LOG_WARN);
    /* after "--" nothing is a flag */
    const char *w[] = {"agent", "--", "--listen"};
    assert_int_equal(parse(&c, &a, err, sizeof err, ARGC(w), w), AGENT_CONFIG_EUSAGE);
    assert_non_null(strstr(err, "unexpected argument '--listen'"));
    agent_log_set_level(AGENT_LOG_INFO);
}

static void schedule_maps_to_model(void **state)
{
    (void)state;
    agent_config c;
    char err[AGENT_CONFIG_ERR_MAX] = "";
    gossip_sched_config s;
    agent_config_defaults(&c);
    agent_config_sched(&c, &s);
    assert_int_equal(s.kind, MODEL_LR_COSINE);
    assert_int_equal(s.unit, GOSSIP_SCHED_UNIT_EPOCHS);
    assert_true(s.base_lr == 0.05f && s.length == 4 && s.warmup == 0.125);
    assert_int_equal(s.interval_steps, c.interval_steps);
    assert_int_equal(s.batch, 64);
    assert_int_equal(agent_config_load_string(&c, "s.conf",
                                              "[model]\nlr = 0.2\nschedule = step:300:0.25\n"
                                              "warmup = 50\nschedule_unit = steps\n"
                                              "lr_scaling = none\n",
                                              err, sizeof err),
                     0);
    assert_int_equal(agent_config_finish(&c, err, sizeof err), 0);
    agent_config_sched(&c, &s);
    assert_int_equal(s.kind, MODEL_LR_STEP);
    assert_true(s.base_lr == 0.2f && s.gamma == 0.25f && s.step_every == 300 && s.warmup == 50);
    /* the schedule object sees the same rates: warm-up, then decay */
    s.dim = 1;
    test_env t;
    test_env_init(&t, 1);
    gossip_sched *gs = NULL;
    assert_int_equal(gossip_sched_create(&gs, &t.env, &s), GOSSIP_OK);
    assert_true(gossip_sched_lr(gs, 4) == 0.2f / 50);
    float p = 0;
    for (int i = 0; i < 50 + 300; i++)
        (void)gossip_sched_after_step(gs, &p, 64, 4);
    assert_float_equal(gossip_sched_lr(gs, 4), 0.2f * 0.25f, 1e-7);
    gossip_sched_destroy(gs);
    agent_config_defaults(&c);
    assert_int_equal(agent_config_load_string(&c, "s.conf",
                                              "[model]\nschedule = cosine:2.5\nmin_lr = 0.001\n",
                                              err, sizeof err),
                     0);
    assert_int_equal(agent_config_finish(&c, err, sizeof err), 0);
    agent_config_sched(&c, &s);
    assert_int_equal(s.kind, MODEL_LR_COSINE);
    assert_true(s.length == 2.5 && s.min_lr == 0.001f);

    /* contradictions are named */
    agent_config_defaults(&c);
    assert_int_equal(agent_config_load_string(&c, "s.conf",
                                              "[model]\nschedule = cosine:100\n"
                                              "warmup = 100\n",
                                              err, sizeof err),
                     0);
    assert_int_equal(agent_config_finish(&c, err, sizeof err), AGENT_CONFIG_ECONFLICT);
    assert_non_null(strstr(err, "s.conf:2: model.schedule cosine:100 must last longer than "
                                "model.warmup (100, from s.conf:3)"));
    agent_config_defaults(&c);
    assert_int_equal(
        agent_config_load_string(&c, "s.conf", "[model]\nmin_lr = 0.5\n", err, sizeof err), 0);
    assert_int_equal(agent_config_finish(&c, err, sizeof err), AGENT_CONFIG_ECONFLICT);
    assert_non_null(strstr(err, "s.conf:2: model.min_lr (0.5) must not exceed model.lr (0.05"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults_are_sane),
        cmocka_unit_test(file_parses_every_section),
        cmocka_unit_test(every_file_error_is_named),
        cmocka_unit_test(long_lines_and_seed_limit),
        cmocka_unit_test(missing_and_binary_files),
        cmocka_unit_test(flags_override_file_left_to_right),
        cmocka_unit_test(command_line_errors),
        cmocka_unit_test(finish_checks_relations_and_files),
        cmocka_unit_test(written_config_reads_back),
        cmocka_unit_test(spec_parser),
        cmocka_unit_test(front_end),
        cmocka_unit_test(schedule_maps_to_model),
        cmocka_unit_test(docs_name_every_option),
        cmocka_unit_test(environment_between_file_and_flags),
        cmocka_unit_test(flags_suggest_the_nearest),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
