/* agent/log: line format, escaping, levels, truncation, threads, rate limit. */
#include "tests/harness.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent/log.h"

/* 2023-11-14T22:13:20.123Z */
static uint64_t fixed_clock(void)
{
    return 1700000000123ull;
}

static FILE *capture;

static int setup(void **state)
{
    (void)state;
    capture = tmpfile();
    if (!capture)
        return -1;
    agent_log_set_output(capture);
    agent_log_set_clock(fixed_clock);
    agent_log_set_level(AGENT_LOG_DEBUG);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    agent_log_set_output(NULL);
    agent_log_set_clock(NULL);
    agent_log_set_level(AGENT_LOG_INFO);
    fclose(capture);
    return 0;
}

/* Everything written since the last call, NUL-terminated, in buf. */
static size_t take(char *buf, size_t cap)
{
    fflush(capture);
    rewind(capture);
    size_t n = fread(buf, 1, cap - 1, capture);
    buf[n] = '\0';
    rewind(capture);
    if (ftruncate(fileno(capture), 0) != 0)
        fail_msg("ftruncate failed");
    return n;
}

static void line_format(void **state)
{
    (void)state;
    agent_log_line l;
    agent_log_begin(&l, AGENT_LOG_WARN, "bad_frame");
    agent_log_hex64(&l, "peer", 0xff);
    agent_log_str(&l, "addr", "tcp://1.2.3.4:5");
    agent_log_str(&l, "why", "a b");
    agent_log_u64(&l, "len", UINT64_MAX);
    agent_log_i64(&l, "delta", -42);
    agent_log_f64(&l, "loss", 1.5);
    agent_log_f64(&l, "bad", 0.0 / 0.0);
    agent_log_f64(&l, "big", -1.0 / 0.0);
    agent_log_end(&l);
    char buf[2048];
    take(buf, sizeof buf);
    assert_string_equal(buf, "ts=2023-11-14T22:13:20.123Z level=warn event=bad_frame "
                             "peer=00000000000000ff addr=tcp://1.2.3.4:5 why=\"a b\" "
                             "len=18446744073709551615 delta=-42 loss=1.5 bad=nan big=-inf\n");
    /* a second end writes nothing */
    agent_log_end(&l);
    assert_int_equal(take(buf, sizeof buf), 0);
}

static void value_escaping(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        size_t n;
        const char *out;
    } cases[] = {
        {"plain", 5, "plain"},
        {"", 0, "\"\""},
        {"a b", 3, "\"a b\""},
        {"k=v", 3, "\"k=v\""},
        {"say \"hi\"", 8, "\"say \\\"hi\\\"\""},
        {"back\\slash", 10, "\"back\\\\slash\""},
        {"l1\nl2\r\t", 7, "\"l1\\nl2\\r\\t\""},
        {"\x01\x7f\xff", 3, "\"\\x01\\x7f\\xff\""},
        {"nul\0x", 5, "\"nul\\x00x\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[64];
        size_t len = 0;
        assert_true(agent_log_append_value(buf, &len, sizeof buf, cases[i].in, cases[i].n));
        assert_int_equal(len, strlen(cases[i].out));
        assert_string_equal(buf, cases[i].out);
    }
    /* too small: refuses and leaves len alone */
    char small[6];
    size_t len = 0;
    assert_false(agent_log_append_value(small, &len, sizeof small, "a b c d", 7));
    assert_int_equal(len, 0);
    assert_false(agent_log_append_value(small, &len, sizeof small, "abcdef", 6));
    assert_true(agent_log_append_value(small, &len, sizeof small, "abcde", 5));
    assert_int_equal(len, 5);
}

static void keys_sanitised_and_convenience(void **state)
{
    (void)state;
    agent_log(AGENT_LOG_ERROR, "Config Error", "File Name", "/etc/m.conf", "line", "3", NULL);
    char buf[512];
    take(buf, sizeof buf);
    assert_string_equal(buf, "ts=2023-11-14T22:13:20.123Z level=error event=\"Config Error\" "
                             "_ile__ame=/etc/m.conf line=3\n");
}

static void levels_filter(void **state)
{
    (void)state;
    char buf[1024];
    agent_log_set_level(AGENT_LOG_WARN);
    assert_false(agent_log_enabled(AGENT_LOG_INFO));
    assert_true(agent_log_enabled(AGENT_LOG_ERROR));
    agent_log(AGENT_LOG_DEBUG, "d", NULL);
    agent_log(AGENT_LOG_INFO, "i", NULL);
    agent_log(AGENT_LOG_WARN, "w", NULL);
    agent_log(AGENT_LOG_ERROR, "e", NULL);
    take(buf, sizeof buf);
    assert_null(strstr(buf, "event=d"));
    assert_null(strstr(buf, "event=i"));
    assert_non_null(strstr(buf, "level=warn event=w\n"));
    assert_non_null(strstr(buf, "level=error event=e\n"));
    agent_log_set_level(AGENT_LOG_OFF);
    agent_log(AGENT_LOG_ERROR, "e", NULL);
    assert_int_equal(take(buf, sizeof buf), 0);
    agent_log_set_level(AGENT_LOG_DEBUG);

    agent_log_level lv;
    const char *names[] = {"debug", "info", "warn", "error", "off"};
    for (int i = 0; i <= AGENT_LOG_OFF; i++) {
        assert_int_equal(agent_log_level_parse(names[i], &lv), 0);
        assert_int_equal(lv, i);
        assert_string_equal(agent_log_level_name(lv), names[i]);
    }
    assert_int_equal(agent_log_level_parse("INFO", &lv), -1);
    assert_int_equal(agent_log_level_parse("verbose", &lv), -1);
}

static void long_lines_truncated_at_field(void **state)
{
    (void)state;
    char big[3000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    agent_log_line l;
    agent_log_begin(&l, AGENT_LOG_INFO, "huge");
    agent_log_str(&l, "small", "ok");
    agent_log_str(&l, "big", big);
    agent_log_str(&l, "after", "lost"); /* nothing after a cut */
    agent_log_end(&l);
    char buf[4096];
    size_t n = take(buf, sizeof buf);
    assert_true(n <= AGENT_LOG_LINE_MAX);
    assert_string_equal(buf,
                        "ts=2023-11-14T22:13:20.123Z level=info event=huge small=ok truncated=1\n");

    /* many small fields: cut exactly at a field boundary, never mid-value */
    agent_log_begin(&l, AGENT_LOG_INFO, "many");
    for (int i = 0; i < 300; i++)
        agent_log_u64(&l, "field", 123456789);
    agent_log_end(&l);
    n = take(buf, sizeof buf);
    assert_true(n <= AGENT_LOG_LINE_MAX);
    const char *tail = " field=123456789 truncated=1\n";
    assert_string_equal(buf + n - strlen(tail), tail);
}

#define THREADS 4
#define LINES   400

static void *writer(void *arg)
{
    uintptr_t id = (uintptr_t)arg;
    for (int i = 0; i < LINES; i++) {
        agent_log_line l;
        agent_log_begin(&l, AGENT_LOG_INFO, "tick");
        agent_log_u64(&l, "thread", id);
        agent_log_u64(&l, "i", (uint64_t)i);
        agent_log_str(&l, "pad", "the quick brown fox jumps over the lazy dog");
        agent_log_end(&l);
    }
    return NULL;
}

static void threads_never_interleave(void **state)
{
    (void)state;
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, writer, (void *)i), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    fflush(capture);
    rewind(capture);
    char line[256];
    int count[THREADS] = {0};
    int next[THREADS] = {0};
    while (fgets(line, sizeof line, capture)) {
        unsigned th, i;
        int n = 0;
        assert_int_equal(sscanf(line,
                                "ts=2023-11-14T22:13:20.123Z level=info event=tick thread=%u i=%u "
                                "pad=\"the quick brown fox jumps over the lazy dog\"\n%n",
                                &th, &i, &n),
                         2);
        assert_int_equal((size_t)n, strlen(line));
        assert_true(th < THREADS);
        assert_int_equal(i, next[th]); /* each thread's lines in its own order */
        next[th]++;
        count[th]++;
    }
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(count[i], LINES);
    rewind(capture);
    assert_int_equal(ftruncate(fileno(capture), 0), 0);
}

static void limiter_bursts_and_reports(void **state)
{
    (void)state;
    agent_log_limiter lim;
    assert_int_equal(agent_log_limiter_init(&lim, 0, 1), -1);
    assert_int_equal(agent_log_limiter_init(&lim, 1000, 0), -1);
    assert_int_equal(agent_log_limiter_init(&lim, 1000, 2), 0);
    uint64_t sup = 99;
    assert_true(agent_log_limit(&lim, 7, 0, &sup));
    assert_int_equal(sup, 0);
    assert_true(agent_log_limit(&lim, 7, 10, &sup));
    assert_false(agent_log_limit(&lim, 7, 20, &sup));
    assert_false(agent_log_limit(&lim, 7, 999, &sup));
    /* another key is independent */
    assert_true(agent_log_limit(&lim, 8, 30, &sup));
    assert_int_equal(sup, 0);
    /* a new window: allowed again, and told how many were held back */
    assert_true(agent_log_limit(&lim, 7, 1000, &sup));
    assert_int_equal(sup, 2);
    assert_true(agent_log_limit(&lim, 7, 1001, &sup));
    assert_int_equal(sup, 0);
    assert_false(agent_log_limit(&lim, 7, 1002, NULL));
    /* a clock that goes backwards restarts the window instead of wedging */
    assert_true(agent_log_limit(&lim, 7, 5, &sup));
    assert_int_equal(sup, 1);
    agent_log_limiter_destroy(&lim);
}

static void limiter_evicts_least_recent(void **state)
{
    (void)state;
    agent_log_limiter lim;
    assert_int_equal(agent_log_limiter_init(&lim, 1000000, 1), 0);
    /* key 0 is used at t=0 and then stays quiet; keys 1..64 fill the table */
    assert_true(agent_log_limit(&lim, 0, 0, NULL));
    assert_false(agent_log_limit(&lim, 0, 1, NULL));
    for (uint64_t k = 1; k < AGENT_LOG_LIMIT_SLOTS; k++)
        assert_true(agent_log_limit(&lim, k, 10 + k, NULL));
    /* table full: key 1000 evicts key 0 (least recently seen) */
    assert_true(agent_log_limit(&lim, 1000, 500, NULL));
    /* key 1 is still limited (not evicted) */
    assert_false(agent_log_limit(&lim, 1, 600, NULL));
    /* key 0 was forgotten: it logs again (the documented harmless extra line) */
    uint64_t sup = 9;
    assert_true(agent_log_limit(&lim, 0, 700, &sup));
    assert_int_equal(sup, 0);
    agent_log_limiter_destroy(&lim);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(line_format),
        cmocka_unit_test(value_escaping),
        cmocka_unit_test(keys_sanitised_and_convenience),
        cmocka_unit_test(levels_filter),
        cmocka_unit_test(long_lines_truncated_at_field),
        cmocka_unit_test(threads_never_interleave),
        cmocka_unit_test(limiter_bursts_and_reports),
        cmocka_unit_test(limiter_evicts_least_recent),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
