/* The pause and slow faults on a libmurmur host program (issue 20,
 * agent/chaos.h agent_faults_host_gate): a host that only calls the public
 * API is held by murmur_mix while it is paused, runs its loop `factor`
 * times slower while it is slowed, and a stop during a pause returns
 * MURMUR_ESTOPPED. Faults are set as murmur fault sets them (the control
 * request's words, agent_faults_request) from another thread. The
 * assertions are lower bounds on time (a sleep is never shorter) and the
 * order of events, so a loaded machine cannot fail them. */
#include "tests/harness.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/chaos.h"
#include "agent/keys.h"
#include "agent/runtime_internal.h"
#include "include/murmur.h"
#include "net/net.h"

#define DIM     64u
#define WORK_MS 20

static char dir[256];

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/murmur-test-chaos-host-XXXXXX");
    assert_non_null(mkdtemp(dir));
    assert_int_equal(net_init(), NET_OK);
    uint8_t key[NET_NETWORK_KEY_SIZE];
    for (unsigned i = 0; i < sizeof key; i++)
        key[i] = (uint8_t)(i * 5 + 3);
    char path[300], d[300], msg[256];
    snprintf(path, sizeof path, "%s/net.key", dir);
    assert_int_equal(agent_keys_write_network(path, key, 1, msg, sizeof msg), 0);
    snprintf(d, sizeof d, "%s/a", dir);
    mkdir(d, 0700);
    net_identity id;
    assert_int_equal(net_identity_generate(&id), NET_OK);
    assert_int_equal(agent_keys_write_identity(d, &id, 1, msg, sizeof msg), 0);
    net_identity_wipe(&id);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd);
}

/* A host agent with faults enabled and `extra` set (NULL: nothing). */
static murmur_agent *open_host(const char *extra)
{
    static char buf[8][320];
    const char *set[9];
    int n = 0, port = 21000 + (int)(getpid() % 4000) * 2 + (extra ? 1 : 0);
    snprintf(buf[n], sizeof buf[n], "node.data_dir=%s/a", dir), set[n] = buf[n], n++;
    snprintf(buf[n], sizeof buf[n], "node.network_key_file=%s/net.key", dir), set[n] = buf[n], n++;
    snprintf(buf[n], sizeof buf[n], "node.listen=127.0.0.1:%d", port), set[n] = buf[n], n++;
    snprintf(buf[n], sizeof buf[n], "model.spec=host:test-chaos-host"), set[n] = buf[n], n++;
    snprintf(buf[n], sizeof buf[n], "model.schedule_unit=steps"), set[n] = buf[n], n++;
    snprintf(buf[n], sizeof buf[n], "faults.enable=true"), set[n] = buf[n], n++;
    if (extra)
        snprintf(buf[n], sizeof buf[n], "%s", extra), set[n] = buf[n], n++;
    set[n] = NULL;
    murmur_agent *a = NULL;
    char err[512];
    if (murmur_open(&a, NULL, set, DIM, err, sizeof err))
        fail_msg("murmur_open: %s", err);
    static float x[DIM];
    murmur_source src;
    assert_int_equal(murmur_wait_ready(a, x, NULL, 10000, &src), MURMUR_OK);
    return a;
}

static void request(murmur_agent *a, const char *words)
{
    char reply[AGENT_FAULT_CTL_TEXT_MAX + 1];
    if (agent_faults_request(a->faults, 0, words, reply, sizeof reply))
        fail_msg("'%s': %s", words, reply);
}

/* A slowed host: each murmur_mix holds it (factor - 1) x its own step. */
static void slow_host(void **state)
{
    (void)state;
    murmur_agent *a = open_host(NULL);
    static float x[DIM];
    /* not slowed: murmur_mix returns at once (no lower bound to check) */
    for (int k = 0; k < 3; k++) {
        sleep_ms(WORK_MS);
        assert_true(murmur_mix(a, x, 1, 1) >= 0);
    }
    request(a, "slow=4");
    double held = 1e9;
    for (int k = 0; k < 5; k++) {
        sleep_ms(WORK_MS); /* the host's step */
        double t0 = now_ms();
        assert_true(murmur_mix(a, x, 1, 1) >= 0);
        double d = now_ms() - t0;
        if (d < held)
            held = d;
    }
    /* the shortest hold >= 3 x the 20 ms step (less a millisecond of rounding) */
    printf("slow=4: murmur_mix held the host at least %.1f ms per %d ms step\n", held, WORK_MS);
    assert_true(held >= 3 * WORK_MS - 1);
    request(a, "slow=1");
    assert_int_equal(murmur_close(a, NULL, NULL), 0);
}

typedef struct resumer {
    murmur_agent *a;
    atomic_int resumed, stop;
} resumer;

static void *resume_later(void *arg)
{
    resumer *r = arg;
    sleep_ms(300);
    if (r->stop) {
        atomic_store(&r->resumed, 1);
        murmur_stop(r->a);
    } else {
        atomic_store(&r->resumed, 1); /* before the request: murmur_mix cannot return earlier */
        request(r->a, "pause=0");
    }
    return NULL;
}

/* A paused host: murmur_mix returns only once the pause is lifted; a stop
 * during a pause returns MURMUR_ESTOPPED. [faults] pause_training = true
 * pauses the host from its first call. */
static void paused_host(void **state)
{
    (void)state;
    murmur_agent *a = open_host("faults.pause_training=true");
    static float x[DIM];
    resumer r = {.a = a};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, resume_later, &r), 0);
    double t0 = now_ms();
    assert_true(murmur_mix(a, x, 1, 1) >= 0);
    assert_int_equal(atomic_load(&r.resumed), 1);
    printf("paused: murmur_mix returned %.0f ms later, after the resume\n", now_ms() - t0);
    pthread_join(th, NULL);
    murmur_status st = {.size = sizeof st};
    assert_int_equal(murmur_status_get(a, &st), MURMUR_OK);
    assert_int_equal(st.steps, 1);
    /* paused again, then stopped: murmur_mix gives up with ESTOPPED */
    request(a, "pause=1");
    r.resumed = 0;
    r.stop = 1;
    assert_int_equal(pthread_create(&th, NULL, resume_later, &r), 0);
    assert_int_equal(murmur_mix(a, x, 1, 1), MURMUR_ESTOPPED);
    assert_int_equal(atomic_load(&r.resumed), 1);
    pthread_join(th, NULL);
    assert_int_equal(murmur_close(a, NULL, NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(slow_host),
        cmocka_unit_test(paused_host),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
