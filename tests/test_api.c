/* include/murmur.h: two agents in one process on 127.0.0.1 through the
 * public API only (plus key files written with agent/keys): state transfer
 * at join, mixing that pulls two diverging hosts together, status, errors,
 * and a restart that resumes from the final checkpoint. */
#include "tests/harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/keys.h"
#include "include/murmur.h"
#include "net/net.h"

#define DIM 4096u

static char dir[256];

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void make_keys(const char *sub)
{
    char d[300], msg[256];
    snprintf(d, sizeof d, "%s/%s", dir, sub);
    mkdir(d, 0700);
    net_identity id;
    assert_int_equal(net_identity_generate(&id), NET_OK);
    assert_int_equal(agent_keys_write_identity(d, &id, 1, msg, sizeof msg), 0);
    net_identity_wipe(&id);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/murmur-test-api-XXXXXX");
    assert_non_null(mkdtemp(dir));
    assert_int_equal(net_init(), NET_OK);
    uint8_t key[NET_NETWORK_KEY_SIZE];
    for (unsigned i = 0; i < sizeof key; i++)
        key[i] = (uint8_t)(i * 7 + 1);
    char path[300], msg[256];
    snprintf(path, sizeof path, "%s/net.key", dir);
    assert_int_equal(agent_keys_write_network(path, key, 1, msg, sizeof msg), 0);
    make_keys("a");
    make_keys("b");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd);
}

/* Settings of agent `sub` on `port`, joining through `seed_port` (0 = none). */
static const char **settings(const char *sub, int port, int seed_port)
{
    static char buf[10][320];
    static const char *set[11];
    int n = 0;
    snprintf(buf[n], sizeof buf[n], "node.data_dir=%s/%s", dir, sub), set[n] = buf[n], n++;
    snprintf(buf[n], sizeof buf[n], "node.network_key_file=%s/net.key", dir), set[n] = buf[n], n++;
    snprintf(buf[n], sizeof buf[n], "node.listen=127.0.0.1:%d", port), set[n] = buf[n], n++;
    snprintf(buf[n], sizeof buf[n], "model.schedule_unit=steps"), set[n] = buf[n], n++;
    snprintf(buf[n], sizeof buf[n], "model.spec=host:test-api"), set[n] = buf[n], n++;
    snprintf(buf[n], sizeof buf[n], "mixing.interval_steps=4"), set[n] = buf[n], n++;
    snprintf(buf[n], sizeof buf[n], "membership.probe_interval_ms=200"), set[n] = buf[n], n++;
    snprintf(buf[n], sizeof buf[n], "membership.probe_timeout_ms=100"), set[n] = buf[n], n++;
    if (seed_port)
        snprintf(buf[n], sizeof buf[n], "seeds.seed=127.0.0.1:%d", seed_port), set[n] = buf[n], n++;
    set[n] = NULL;
    return set;
}

static double mean(const float *x)
{
    double s = 0;
    for (unsigned k = 0; k < DIM; k++)
        s += x[k];
    return s / DIM;
}

static void version_and_errors(void **state)
{
    (void)state;
    assert_string_equal(murmur_version(), MURMUR_VERSION_STRING);
    assert_int_equal(murmur_version_number(), MURMUR_VERSION_MAJOR * 10000u +
                                                  MURMUR_VERSION_MINOR * 100u +
                                                  MURMUR_VERSION_PATCH);
    assert_string_equal(murmur_strerror(MURMUR_ETIMEDOUT), "timed out");
    murmur_agent *a = (murmur_agent *)1;
    char err[512];
    assert_int_equal(murmur_open(&a, NULL, NULL, 0, err, sizeof err), MURMUR_EINVAL);
    assert_null(a);
    assert_non_null(strstr(err, "dim 0"));
    const char *bad[] = {"mixing.bits=3", NULL};
    assert_int_equal(murmur_open(&a, NULL, bad, 10, err, sizeof err), MURMUR_ECONFIG);
    assert_non_null(strstr(err, "mixing.bits"));
    /* the environment sits between the file and the settings */
    setenv("MURMUR_MIXING_BITS", "3", 1);
    assert_int_equal(murmur_open(&a, NULL, NULL, 10, err, sizeof err), MURMUR_ECONFIG);
    assert_non_null(strstr(err, "MURMUR_MIXING_BITS"));
    unsetenv("MURMUR_MIXING_BITS");
    const char *noeq[] = {"mixing.bits", NULL};
    assert_int_equal(murmur_open(&a, NULL, noeq, 10, err, sizeof err), MURMUR_ECONFIG);
    assert_non_null(strstr(err, "section.key=value"));
    char set0[300];
    snprintf(set0, sizeof set0, "node.data_dir=%s/nokeys", dir);
    const char *nokeys[] = {set0, "node.listen=127.0.0.1:9", NULL};
    char netkey[300];
    snprintf(netkey, sizeof netkey, "node.network_key_file=%s/net.key", dir);
    const char *nokeys2[] = {set0, netkey, "node.listen=127.0.0.1:9", NULL};
    assert_true(murmur_open(&a, NULL, nokeys, 10, err, sizeof err) < 0);
    int rc = murmur_open(&a, NULL, nokeys2, 10, err, sizeof err);
    assert_int_equal(rc, MURMUR_ESTART);
    assert_non_null(strstr(err, "murmur keygen"));
    assert_null(a);
    assert_int_equal(murmur_mix(NULL, NULL, 1, 1), MURMUR_EINVAL);
}

static void two_hosts_mix_and_resume(void **state)
{
    (void)state;
    int pa = 20000 + (int)(getpid() % 5000) * 2, pb = pa + 1;
    static float xa[DIM], xb[DIM];
    char err[512];
    murmur_agent *a, *b;
    if (murmur_open(&a, NULL, settings("a", pa, 0), DIM, err, sizeof err))
        fail_msg("open a: %s", err);
    for (unsigned k = 0; k < DIM; k++)
        xa[k] = 3.0f;
    murmur_source src;
    assert_int_equal(murmur_wait_ready(a, xa, NULL, 10000, &src), MURMUR_OK);
    assert_int_equal(src, MURMUR_SOURCE_OWN);
    assert_float_equal(xa[0], 3.0f, 0);

    if (murmur_open(&b, NULL, settings("b", pb, pa), DIM, err, sizeof err))
        fail_msg("open b: %s", err);
    for (unsigned k = 0; k < DIM; k++)
        xb[k] = 7.0f;
    /* b joins through a and takes a's model by state transfer */
    assert_int_equal(murmur_wait_ready(b, xb, NULL, 20000, &src), MURMUR_OK);
    assert_int_equal(src, MURMUR_SOURCE_TRANSFER);
    assert_float_equal(xb[0], 3.0f, 0);

    /* the two hosts drift apart, +0.01 and -0.01 per step; mixing every 4
     * steps holds them together (without it they would end 8 apart) */
    int replaced = 0;
    for (int step = 0; step < 400; step++) {
        for (unsigned k = 0; k < DIM; k++) {
            xa[k] += 0.01f;
            xb[k] -= 0.01f;
        }
        int ra = murmur_mix(a, xa, 1, 64), rb = murmur_mix(b, xb, 1, 64);
        assert_true(ra >= 0 && rb >= 0);
        replaced += ra == MURMUR_MIX_REPLACED || rb == MURMUR_MIX_REPLACED;
        sleep_ms(2);
    }
    assert_int_equal(replaced, 0);
    double gap = fabs(mean(xa) - mean(xb));
    murmur_status sa = {.size = sizeof sa}, sb = {.size = sizeof sb};
    assert_int_equal(murmur_status_get(a, &sa), MURMUR_OK);
    assert_int_equal(murmur_status_get(b, &sb), MURMUR_OK);
    print_message("gap after 400 steps: %.3f (8.0 without mixing); rounds a=%llu b=%llu\n", gap,
                  (unsigned long long)sa.mixing_rounds, (unsigned long long)sb.mixing_rounds);
    assert_true(gap < 1.0);
    assert_true(sa.mixing_rounds >= 10 && sb.mixing_rounds >= 10);
    assert_int_equal(sa.steps, 400);
    assert_int_equal(sa.samples, 400 * 64);
    assert_int_equal(sa.peers, 1);
    assert_string_equal(sa.state, "training");
    assert_true(sa.lr > 0);
    assert_true(sa.consensus >= 0 && sa.consensus < 1);
    /* no catalog: no shards to train on */
    murmur_shard_list *l;
    assert_int_equal(murmur_shards_get(a, &l), MURMUR_OK);
    assert_int_equal(l->count, 0);
    murmur_shards_free(l);
    /* a smaller status struct is filled up to its size only */
    struct {
        size_t size;
        uint64_t node_id;
        uint64_t guard;
    } small = {.size = offsetof(murmur_status, address), .guard = 42};
    assert_int_equal(murmur_status_get(a, (murmur_status *)&small), MURMUR_OK);
    assert_int_equal(small.node_id, sa.node_id);
    assert_int_equal(small.guard, 42);
    /* a non-finite model is never sent: the call that makes a round due
     * (one of the next interval_steps = 4) refuses it */
    float keep = xa[5];
    xa[5] = NAN;
    int refused = 0, calls = 0;
    while (!refused && calls < 2000) { /* a round may still be running */
        int r = murmur_mix(a, xa, 1, 64);
        assert_true(r == MURMUR_ENONFINITE || r == MURMUR_MIX_NONE || r == MURMUR_MIX_MIXED);
        refused = r == MURMUR_ENONFINITE;
        calls++;
        sleep_ms(1);
    }
    assert_true(refused);
    xa[5] = keep;
    float seen[DIM];
    assert_int_equal(murmur_latest(a, seen), MURMUR_OK);
    for (unsigned k = 0; k < DIM; k++)
        assert_true(isfinite(seen[k]));

    assert_int_equal(murmur_close(b, xb, NULL), 0);
    float final_a[DIM];
    assert_int_equal(murmur_close(a, xa, NULL), 0);
    memcpy(final_a, xa, sizeof final_a);

    /* restart a on its data directory: it resumes from its final checkpoint */
    if (murmur_open(&a, NULL, settings("a", pa, 0), DIM, err, sizeof err))
        fail_msg("reopen a: %s", err);
    for (unsigned k = 0; k < DIM; k++)
        xa[k] = 0;
    assert_int_equal(murmur_wait_ready(a, xa, NULL, 10000, &src), MURMUR_OK);
    assert_int_equal(src, MURMUR_SOURCE_CHECKPOINT);
    assert_memory_equal(xa, final_a, sizeof final_a);
    assert_int_equal(murmur_status_get(a, &sa), MURMUR_OK);
    assert_int_equal(sa.steps, 400 + (uint64_t)calls);
    murmur_stop(a);
    assert_int_equal(murmur_mix(a, xa, 1, 64), MURMUR_ESTOPPED);
    /* a step taken while the agent stops is in params: still counted, so
     * the final checkpoint's step is the step its parameters stand at */
    assert_int_equal(murmur_status_get(a, &sa), MURMUR_OK);
    assert_int_equal(sa.steps, 401 + (uint64_t)calls);
    assert_int_equal(murmur_close(a, NULL, NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(version_and_errors),
        cmocka_unit_test(two_hosts_mix_and_resume),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
