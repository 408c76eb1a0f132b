/* agent/metrics: registry rules, Prometheus text line by line, concurrent
 * updates, the standard set, /status JSON, the HTTP server and client on
 * 127.0.0.1 (free port, bounded time), and `murmur status` against it. */
#include "tests/harness.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <time.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/commands.h"
#include "agent/metrics.h"
#include "agent/version.h"
#include "net/net.h"
#include "gossip/wire.h"

/* Every HTTP call in this suite gives up after this long. */
#define HTTP_TIMEOUT_MS 5000

static void registry_rules(void **state)
{
    (void)state;
    agent_metrics *m;
    assert_int_equal(agent_metrics_create(&m), 0);
    agent_metric *a, *b, *g;
    assert_int_equal(agent_metrics_counter(m, "x_total", "X.", NULL, NULL, &a), 0);
    assert_int_equal(agent_metrics_counter(m, "x_total", "ignored", NULL, NULL, &b), 0);
    assert_ptr_equal(a, b); /* the same series again */
    assert_int_equal(agent_metrics_counter(m, "x_total", "X.", "k", "v", &b), 0);
    assert_ptr_not_equal(a, b); /* a labelled series is another series */
    assert_int_equal(agent_metrics_gauge(m, "x_total", "X.", NULL, NULL, &g),
                     AGENT_METRICS_ECONFLICT);
    assert_null(g);
    static const char *bad_names[] = {"", "1abc", "a-b", "a b", "é"};
    for (size_t i = 0; i < sizeof bad_names / sizeof bad_names[0]; i++)
        assert_int_equal(agent_metrics_counter(m, bad_names[i], "", NULL, NULL, &g),
                         AGENT_METRICS_EINVAL);
    assert_int_equal(agent_metrics_counter(m, "ns:sub_total", "", NULL, NULL, &g), 0);
    assert_int_equal(agent_metrics_counter(m, "y", "", "__reserved", "v", &g),
                     AGENT_METRICS_EINVAL);
    assert_int_equal(agent_metrics_counter(m, "y", "", "a:b", "v", &g), AGENT_METRICS_EINVAL);
    assert_int_equal(agent_metrics_counter(m, "y", "", "k", NULL, &g), AGENT_METRICS_EINVAL);
    assert_int_equal(agent_metrics_counter(m, "y", "", NULL, "v", &g), AGENT_METRICS_EINVAL);
    char longv[AGENT_METRICS_VALUE_MAX + 1];
    memset(longv, 'v', sizeof longv - 1);
    longv[sizeof longv - 1] = '\0';
    assert_int_equal(agent_metrics_counter(m, "y", "", "k", longv, &g), AGENT_METRICS_EINVAL);

    agent_metric_inc(a);
    agent_metric_add(a, 41);
    assert_int_equal(agent_metric_count(a), 42);
    assert_int_equal(agent_metrics_gauge(m, "temp", "T.", NULL, NULL, &g), 0);
    agent_metric_set(g, -3.25);
    assert_true(agent_metric_value(g) == -3.25);
    /* NULL handles are ignored */
    agent_metric_inc(NULL);
    agent_metric_add(NULL, 5);
    agent_metric_set(NULL, 1.0);
    assert_int_equal(agent_metric_count(NULL), 0);
    agent_metrics_destroy(m);
}

static void tables_are_bounded(void **state)
{
    (void)state;
    agent_metrics *m;
    agent_metric *h;
    assert_int_equal(agent_metrics_create(&m), 0);
    char name[32];
    for (unsigned i = 0; i < AGENT_METRICS_FAMILIES_MAX; i++) {
        snprintf(name, sizeof name, "f%u", i);
        assert_int_equal(agent_metrics_gauge(m, name, "", NULL, NULL, &h), 0);
    }
    assert_int_equal(agent_metrics_gauge(m, "one_more", "", NULL, NULL, &h), AGENT_METRICS_EFULL);
    assert_null(h);
    /* existing families still take new series until the series table is full */
    unsigned made = AGENT_METRICS_FAMILIES_MAX;
    for (unsigned i = 0; made < AGENT_METRICS_SERIES_MAX; i++, made++) {
        snprintf(name, sizeof name, "v%u", i);
        assert_int_equal(agent_metrics_gauge(m, "f0", "", "k", name, &h), 0);
    }
    assert_int_equal(agent_metrics_gauge(m, "f0", "", "k", "last", &h), AGENT_METRICS_EFULL);
    /* finding an existing series still works when full */
    assert_int_equal(agent_metrics_gauge(m, "f1", "", NULL, NULL, &h), 0);
    assert_non_null(h);
    agent_metrics_destroy(m);
}

static void text_format_line_by_line(void **state)
{
    (void)state;
    agent_metrics *m;
    assert_int_equal(agent_metrics_create(&m), 0);
    agent_metric *plain, *lab, *weird, *g[6];
    assert_int_equal(agent_metrics_counter(m, "murmur_test_total",
                                           "Line one\nline \\two\\ with \"quotes\".", NULL, NULL,
                                           &plain),
                     0);
    assert_int_equal(agent_metrics_gauge(m, "murmur_level", "A gauge.", "which", "nan", &g[0]), 0);
    assert_int_equal(agent_metrics_counter(m, "murmur_test_total", "", "cause", "replay", &lab), 0);
    assert_int_equal(agent_metrics_counter(m, "murmur_test_total", "", "cause",
                                           "say \"hi\" \\ and\nbye", &weird),
                     0);
    const char *which[] = {"pinf", "minf", "tenth", "huge", "neg"};
    for (int i = 0; i < 5; i++)
        assert_int_equal(agent_metrics_gauge(m, "murmur_level", "", "which", which[i], &g[i + 1]),
                         0);
    agent_metric_add(plain, 18446744073709551615ull);
    agent_metric_add(lab, 3);
    agent_metric_set(g[0], NAN);
    agent_metric_set(g[1], INFINITY);
    agent_metric_set(g[2], -INFINITY);
    agent_metric_set(g[3], 0.1);
    agent_metric_set(g[4], 1e300);
    agent_metric_set(g[5], -2.5);
    char *text;
    size_t len;
    assert_int_equal(agent_metrics_render(m, &text, &len), 0);
    assert_int_equal(len, strlen(text));
    const char *want[] = {
        "# HELP murmur_test_total Line one\\nline \\\\two\\\\ with \"quotes\".",
        "# TYPE murmur_test_total counter",
        "murmur_test_total 18446744073709551615",
        "murmur_test_total{cause=\"replay\"} 3",
        "murmur_test_total{cause=\"say \\\"hi\\\" \\\\ and\\nbye\"} 0",
        "# HELP murmur_level A gauge.",
        "# TYPE murmur_level gauge",
        "murmur_level{which=\"nan\"} NaN",
        "murmur_level{which=\"pinf\"} +Inf",
        "murmur_level{which=\"minf\"} -Inf",
        "murmur_level{which=\"tenth\"} 0.1",
        "murmur_level{which=\"huge\"} 1e+300",
        "murmur_level{which=\"neg\"} -2.5",
    };
    const char *p = text;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const char *nl = strchr(p, '\n');
        assert_non_null(nl);
        if ((size_t)(nl - p) != strlen(want[i]) || strncmp(p, want[i], strlen(want[i])))
            fail_msg("line %zu is '%.*s', want '%s'", i + 1, (int)(nl - p), p, want[i]);
        p = nl + 1;
    }
    assert_string_equal(p, ""); /* nothing more, and the text ends with a newline */
    free(text);
    agent_metrics_destroy(m);
}

#define THREADS 4
#define INCS    100000

static void *bump(void *arg)
{
    agent_metric *c = arg;
    for (int i = 0; i < INCS; i++)
        agent_metric_inc(c);
    return NULL;
}

static void concurrent_updates_are_exact(void **state)
{
    (void)state;
    agent_metrics *m;
    agent_metric *c;
    assert_int_equal(agent_metrics_create(&m), 0);
    assert_int_equal(agent_metrics_counter(m, "hits_total", "", NULL, NULL, &c), 0);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, bump, c), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(agent_metric_count(c), (uint64_t)THREADS * INCS);
    agent_metrics_destroy(m);
}

static void standard_set(void **state)
{
    (void)state;
    agent_metrics *m;
    static agent_metrics_std s;
    assert_int_equal(agent_metrics_create(&m), 0);
    assert_int_equal(agent_metrics_std_register(m, &s), 0);
    agent_metric_add(s.steps, 10);
    agent_metric_set(s.loss, 0.5);
    agent_metric_set(s.peers, 3);
    agent_metrics_std_message(&s, true, GOSSIP_MSG_MIX_PUSH, 100);
    agent_metrics_std_message(&s, true, GOSSIP_MSG_MIX_PUSH, 50);
    agent_metrics_std_message(&s, false, GOSSIP_MSG_PING, 32);
    agent_metrics_std_message(&s, false, 0xEE, 7); /* unknown type */
    agent_metrics_std_message(&s, false, 999, 7);  /* out of range: ignored */
    assert_int_equal(agent_metrics_std_reject(&s, "replay"), 0);
    assert_int_equal(agent_metrics_std_reject(&s, "replay"), 0);
    assert_int_equal(agent_metrics_std_reject(&s, "auth"), 0);
    assert_int_equal(agent_metrics_std_reject(&s, "bad cause!"), 0); /* values may be anything */
    assert_int_equal(agent_metric_count(s.bytes_sent[GOSSIP_MSG_MIX_PUSH]), 150);
    assert_int_equal(agent_metric_count(s.messages_sent[GOSSIP_MSG_MIX_PUSH]), 2);
    assert_ptr_equal(s.bytes_received[0xEE], s.bytes_received[0x00]); /* "other" */
    char *text;
    size_t len;
    assert_int_equal(agent_metrics_render(m, &text, &len), 0);
    const char *must[] = {
        "\nmurmur_steps_total 10\n",
        "\nmurmur_loss 0.5\n",
        "\nmurmur_peers 3\n",
        "\nmurmur_view_epoch 0\n",
        "\nmurmur_round_aborts_total 0\n",
        "\n# TYPE murmur_samples_per_second gauge\n",
        "\nmurmur_bytes_sent_total{type=\"mix_push\"} 150\n",
        "\nmurmur_messages_sent_total{type=\"mix_push\"} 2\n",
        "\nmurmur_bytes_received_total{type=\"ping\"} 32\n",
        "\nmurmur_bytes_received_total{type=\"other\"} 7\n",
        "\nmurmur_messages_received_total{type=\"ar_abort\"} 0\n",
        "\nmurmur_rejections_total{cause=\"replay\"} 2\n",
        "\nmurmur_rejections_total{cause=\"auth\"} 1\n",
        "\nmurmur_rejections_total{cause=\"bad cause!\"} 1\n",
        "\n# TYPE murmur_rejections_total counter\n",
    };
    for (size_t i = 0; i < sizeof must / sizeof must[0]; i++)
        if (!strstr(text, must[i]))
            fail_msg("rendered metrics lack '%s'", must[i] + 1);
    /* each family has exactly one HELP and one TYPE line */
    const char *fam = "# TYPE murmur_bytes_sent_total counter\n";
    const char *first = strstr(text, fam);
    assert_non_null(first);
    assert_null(strstr(first + 1, fam));
    free(text);
    agent_metrics_destroy(m);
}

/* Every family of the standard set is there from the start, at zero: the
 * build info, every rejection cause, the histograms, the process_*
 * collectors; histograms count and sum what they observe. */
static void families_from_the_start(void **state)
{
    (void)state;
    agent_metrics *m;
    static agent_metrics_std s;
    assert_int_equal(agent_metrics_create(&m), 0);
    assert_int_equal(agent_metrics_std_register(m, &s), 0);
    char *text;
    size_t len;
    assert_int_equal(agent_metrics_render(m, &text, &len), 0);
    char build[160];
    snprintf(build, sizeof build, "\nmurmur_build_info{version=\"%s\",commit=\"%s\"} 1\n",
             agent_version(), agent_version_commit());
    const char *must[] = {
        build,
        "\nmurmur_rejections_total{cause=\"replay\"} 0\n",
        "\nmurmur_rejections_total{cause=\"truncated\"} 0\n",
        "\nmurmur_refusals_total{cause=\"manifest\"} 0\n",
        "\nmurmur_refusals_total{cause=\"duplicate_id\"} 0\n",
        "\nmurmur_shards_missing 0\n",
        "\nmurmur_shards_quarantined_total 0\n",
        "\n# TYPE murmur_round_duration_seconds histogram\n",
        "\nmurmur_round_duration_seconds_bucket{le=\"0.001\"} 0\n",
        "\nmurmur_round_duration_seconds_bucket{le=\"+Inf\"} 0\n",
        "\nmurmur_round_duration_seconds_count 0\n",
        "\nmurmur_consensus_distance_sum 0\n",
        "\n# TYPE process_cpu_seconds_total counter\n",
        "\nprocess_resident_memory_bytes ",
        "\nprocess_virtual_memory_bytes ",
        "\nprocess_open_fds ",
        "\nprocess_max_fds ",
        "\nprocess_start_time_seconds ",
    };
    for (size_t i = 0; i < sizeof must / sizeof must[0]; i++)
        if (!strstr(text, must[i]))
            fail_msg("rendered metrics lack '%s'", must[i] + 1);
    for (int r = 0; r < NET_REJECT_COUNT; r++) {
        char line[128];
        snprintf(line, sizeof line, "murmur_rejections_total{cause=\"%s\"} 0\n",
                 net_reject_name(r));
        if (!strstr(text, line))
            fail_msg("no zero series for rejection cause %s", net_reject_name(r));
    }
    /* the process figures are plausible: started in the last day, some memory */
    const char *st = strstr(text, "\nprocess_start_time_seconds ");
    double start = strtod(st + 28, NULL);
    time_t now = time(NULL);
    assert_true(start > (double)now - 86400 && start <= (double)now + 1);
    assert_true(strtod(strstr(text, "\nprocess_resident_memory_bytes ") + 31, NULL) > 1e5);
    assert_true(strtod(strstr(text, "\nprocess_open_fds ") + 18, NULL) >= 3);
    free(text);

    /* a round of 30 ms, one of 2 ms aborted: durations both, consensus one */
    agent_metrics_std_round_begin(&s, 1000000);
    agent_metrics_std_round_end(&s, 1030000, true, 0.02);
    agent_metrics_std_round_begin(&s, 2000000);
    agent_metrics_std_round_end(&s, 2002000, false, 0);
    agent_metrics_std_round_end(&s, 3000000, true, 0.5); /* no begin: ignored */
    agent_histogram_observe(s.consensus_distance, NAN);  /* ignored */
    assert_int_equal(agent_histogram_count(s.round_duration), 2);
    assert_true(fabs(agent_histogram_sum(s.round_duration) - 0.032) < 1e-12);
    assert_int_equal(agent_histogram_count(s.consensus_distance), 1);
    assert_int_equal(agent_metrics_render(m, &text, &len), 0);
    const char *after[] = {
        "\nmurmur_round_duration_seconds_bucket{le=\"0.001\"} 0\n",
        "\nmurmur_round_duration_seconds_bucket{le=\"0.0025\"} 1\n",
        "\nmurmur_round_duration_seconds_bucket{le=\"0.025\"} 1\n",
        "\nmurmur_round_duration_seconds_bucket{le=\"0.05\"} 2\n",
        "\nmurmur_round_duration_seconds_bucket{le=\"+Inf\"} 2\n",
        "\nmurmur_round_duration_seconds_count 2\n",
        "\nmurmur_consensus_distance_bucket{le=\"0.01\"} 0\n",
        "\nmurmur_consensus_distance_bucket{le=\"0.03\"} 1\n",
        "\nmurmur_consensus_distance_sum 0.02\n",
    };
    for (size_t i = 0; i < sizeof after / sizeof after[0]; i++)
        if (!strstr(text, after[i]))
            fail_msg("rendered metrics lack '%s'", after[i] + 1);
    free(text);
    /* bad histograms */
    agent_histogram *h;
    const double up_down[] = {1, 0.5};
    const double nan_bound[] = {NAN};
    assert_int_equal(agent_metrics_histogram(m, "x_seconds", "X.", up_down, 2, &h),
                     AGENT_METRICS_EINVAL);
    assert_int_equal(agent_metrics_histogram(m, "x_seconds", "X.", nan_bound, 1, &h),
                     AGENT_METRICS_EINVAL);
    assert_int_equal(agent_metrics_histogram(m, "murmur_loss", "X.", up_down, 1, &h),
                     AGENT_METRICS_ECONFLICT);
    agent_metrics_destroy(m);
}

/* HELP texts in one style: a sentence, capitalised, ending with a period;
 * every family documented in docs/OPERATIONS.md (run from the repository
 * root, as make test does). */
static void help_style_and_docs(void **state)
{
    (void)state;
    agent_metrics *m;
    static agent_metrics_std s;
    assert_int_equal(agent_metrics_create(&m), 0);
    assert_int_equal(agent_metrics_std_register(m, &s), 0);
    char *text;
    size_t len;
    assert_int_equal(agent_metrics_render(m, &text, &len), 0);
    FILE *f = fopen("docs/OPERATIONS.md", "r");
    if (!f)
        fail_msg("docs/OPERATIONS.md not found (run from the repository root)");
    static char doc[1 << 17];
    size_t n = fread(doc, 1, sizeof doc - 1, f);
    doc[n] = '\0';
    fclose(f);
    int families = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "# HELP ", 7))
            continue;
        families++;
        char name[96];
        const char *help = strchr(line + 7, ' ');
        assert_non_null(help);
        snprintf(name, sizeof name, "`%.*s", (int)(help - line - 7), line + 7);
        help++;
        size_t hl = strlen(help);
        if (!(help[0] >= 'A' && help[0] <= 'Z') || help[hl - 1] != '.')
            fail_msg("HELP of %s is not a capitalised sentence with a period: '%s'", name + 1,
                     help);
        if (!strstr(doc, name))
            fail_msg("docs/OPERATIONS.md does not document %s`", name);
    }
    assert_true(families >= 30);
    free(text);
    agent_metrics_destroy(m);
}

/* Every metric name in the Grafana dashboard exists on /metrics. */
static void dashboard_names_exist(void **state)
{
    (void)state;
    FILE *f = fopen("deploy/grafana/murmur.json", "r");
    if (!f)
        fail_msg("deploy/grafana/murmur.json not found (run from the repository root)");
    static char dash[1 << 17];
    size_t n = fread(dash, 1, sizeof dash - 1, f);
    dash[n] = '\0';
    fclose(f);
    agent_metrics *m;
    static agent_metrics_std s;
    assert_int_equal(agent_metrics_create(&m), 0);
    assert_int_equal(agent_metrics_std_register(m, &s), 0);
    char *text;
    size_t len;
    assert_int_equal(agent_metrics_render(m, &text, &len), 0);
    int names = 0, depth = 0;
    bool in_string = false;
    for (const char *p = dash; *p; p++) {
        /* the structure is balanced (outside strings) */
        if (*p == '"' && p[-1] != '\\')
            in_string = !in_string;
        if (!in_string && (*p == '{' || *p == '['))
            depth++;
        if (!in_string && (*p == '}' || *p == ']'))
            depth--;
        assert_true(depth >= 0);
        bool start = (!strncmp(p, "murmur_", 7) || !strncmp(p, "process_", 8)) &&
                     (p == dash || !(isalnum((unsigned char)p[-1]) || p[-1] == '_'));
        if (!start)
            continue;
        char name[96];
        size_t k = 0;
        while (k + 1 < sizeof name && (isalnum((unsigned char)p[k]) || p[k] == '_'))
            name[k] = p[k], k++;
        name[k] = '\0';
        /* a sample line: NAME{... or NAME value */
        char a[112], b[112];
        snprintf(a, sizeof a, "\n%s{", name);
        snprintf(b, sizeof b, "\n%s ", name);
        if (!strstr(text, a) && !strstr(text, b))
            fail_msg("the dashboard uses %s, which /metrics does not export", name);
        names++;
    }
    assert_int_equal(depth, 0);
    assert_true(names >= 30);
    assert_non_null(strstr(dash, "\"panels\""));
    free(text);
    agent_metrics_destroy(m);
}

static void status_json_exact(void **state)
{
    (void)state;
    agent_status st = {.node_id = 0xff,
                       .step = 12,
                       .samples_per_second = 2500.5,
                       .loss = NAN,
                       .accuracy = 0.875,
                       .peers = 3,
                       .view_epoch = 7,
                       .shards_held = 4,
                       .shards_primary = 2,
                       .uptime_s = 1.5};
    snprintf(st.address, sizeof st.address, "tcp://h\"x\\:1\n");
    snprintf(st.mixing, sizeof st.mixing, "push-sum");
    char buf[AGENT_STATUS_JSON_MAX];
    size_t n = agent_status_json(&st, buf, sizeof buf);
    const char *want =
        "{\"node_id\":\"00000000000000ff\",\"address\":\"tcp://h\\\"x\\\\:1\\n\",\"step\":12,"
        "\"samples_per_second\":2500.5,\"loss\":null,\"accuracy\":0.875,\"peers\":3,"
        "\"view_epoch\":7,\"mixing\":\"push-sum\",\"shards_held\":4,\"shards_primary\":2,"
        "\"uptime_s\":1.5}\n";
    assert_string_equal(buf, want);
    assert_int_equal(n, strlen(want));
    assert_int_equal(agent_status_json(&st, buf, 40), 0); /* too small: refused */
}

/* ---- HTTP ---- */

typedef struct fake_agent {
    pthread_mutex_t lock;
    int calls;
} fake_agent;

static void fill_status(void *ctx, agent_status *out)
{
    fake_agent *a = ctx;
    pthread_mutex_lock(&a->lock);
    a->calls++;
    pthread_mutex_unlock(&a->lock);
    out->node_id = 0x0123456789abcdefull;
    snprintf(out->address, sizeof out->address, "tcp://127.0.0.1:7000");
    out->step = 4242;
    out->samples_per_second = 1234.5;
    out->loss = 0.25;
    out->accuracy = 0.9;
    out->peers = 5;
    out->view_epoch = 11;
    snprintf(out->mixing, sizeof out->mixing, "allreduce");
    out->shards_held = 6;
    out->shards_primary = 3;
    /* uptime_s is pre-filled by the server; keep it */
}

typedef struct served {
    agent_metrics *m;
    agent_metrics_std std;
    agent_metrics_server *srv;
    fake_agent agent;
    char hostport[32];
} served;

static served *serve_fixture(void)
{
    served *s = calloc(1, sizeof *s);
    assert_non_null(s);
    pthread_mutex_init(&s->agent.lock, NULL);
    assert_int_equal(agent_metrics_create(&s->m), 0);
    assert_int_equal(agent_metrics_std_register(s->m, &s->std), 0);
    agent_metric_add(s->std.steps, 4242);
    char err[256] = "";
    int rc =
        agent_metrics_serve(s->m, "127.0.0.1:0", fill_status, &s->agent, &s->srv, err, sizeof err);
    if (rc)
        fail_msg("serve failed: %s", err);
    uint16_t port = agent_metrics_server_port(s->srv);
    assert_true(port > 0);
    snprintf(s->hostport, sizeof s->hostport, "127.0.0.1:%u", port);
    return s;
}

static void serve_free(served *s)
{
    agent_metrics_server_stop(s->srv);
    agent_metrics_destroy(s->m);
    pthread_mutex_destroy(&s->agent.lock);
    free(s);
}

static void http_round_trip(void **state)
{
    (void)state;
    served *s = serve_fixture();
    char err[256] = "";
    char *body = NULL;
    size_t len = 0;
    uint16_t status = 0;
    int rc = agent_http_get(s->hostport, "/metrics", HTTP_TIMEOUT_MS, &body, &len, &status, err,
                            sizeof err);
    if (rc)
        fail_msg("GET /metrics: %s", err);
    assert_int_equal(status, 200);
    char *local;
    size_t local_len;
    assert_int_equal(agent_metrics_render(s->m, &local, &local_len), 0);
    /* nothing of the registry changed in between (the process_* figures,
     * read at each request, may: CPU time, the client's socket) */
    char *pb = strstr(body, "# HELP process_"), *pl = strstr(local, "# HELP process_");
    assert_true(pb && pl);
    *pb = *pl = '\0';
    assert_string_equal(body, local);
    assert_non_null(strstr(body, "\nmurmur_steps_total 4242\n"));
    free(local);
    free(body);

    rc = agent_http_get(s->hostport, "/status", HTTP_TIMEOUT_MS, &body, &len, &status, err,
                        sizeof err);
    if (rc)
        fail_msg("GET /status: %s", err);
    assert_int_equal(status, 200);
    assert_non_null(strstr(body, "{\"node_id\":\"0123456789abcdef\",\"address\":"
                                 "\"tcp://127.0.0.1:7000\",\"step\":4242,"));
    assert_non_null(strstr(body, "\"mixing\":\"allreduce\",\"shards_held\":6,"
                                 "\"shards_primary\":3,\"uptime_s\":"));
    assert_int_equal(s->agent.calls, 1);
    free(body);

    /* /members: an empty list until the runtime publishes one */
    rc = agent_http_get(s->hostport, "/members", HTTP_TIMEOUT_MS, &body, &len, &status, err,
                        sizeof err);
    assert_int_equal(rc, 0);
    assert_string_equal(body, "[\n]\n");
    free(body);
    agent_member mb[2] = {{.node_id = 1, .state = "alive", .incarnation = 3},
                          {.node_id = 0xabcdef, .state = "suspect", .incarnation = 0}};
    snprintf(mb[0].address, sizeof mb[0].address, "tcp://10.0.0.1:7000");
    snprintf(mb[1].address, sizeof mb[1].address, "tcp://h\"x:7000");
    assert_int_equal(agent_metrics_server_set_members(s->srv, mb, 2), 0);
    rc = agent_http_get(s->hostport, "/members", HTTP_TIMEOUT_MS, &body, &len, &status, err,
                        sizeof err);
    assert_int_equal(rc, 0);
    assert_string_equal(body,
                        "[\n"
                        "{\"node_id\":\"0000000000000001\",\"address\":\"tcp://10.0.0.1:7000\","
                        "\"state\":\"alive\",\"incarnation\":3},\n"
                        "{\"node_id\":\"0000000000abcdef\",\"address\":\"tcp://h\\\"x:7000\","
                        "\"state\":\"suspect\",\"incarnation\":0}\n"
                        "]\n");
    free(body);

    const char *missing[] = {"/", "/metric", "/status/x", "/favicon.ico"};
    for (size_t i = 0; i < sizeof missing / sizeof missing[0]; i++) {
        status = 0;
        rc = agent_http_get(s->hostport, missing[i], HTTP_TIMEOUT_MS, &body, &len, &status, err,
                            sizeof err);
        assert_int_equal(rc, AGENT_METRICS_EHTTP);
        assert_int_equal(status, 404);
        assert_null(body);
        assert_non_null(strstr(err, "404"));
    }
    serve_free(s);
}

/* Run cmd_status in-process with stdout and stderr captured. */
static int run_status(int argc, const char **argv, char *out, size_t cap, char *errout,
                      size_t errcap)
{
    FILE *o = tmpfile(), *e = tmpfile();
    assert_true(o && e);
    fflush(stdout);
    fflush(stderr);
    int so = dup(1), se = dup(2);
    dup2(fileno(o), 1);
    dup2(fileno(e), 2);
    int rc = cmd_status(argc, (char **)argv);
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

static void status_command(void **state)
{
    (void)state;
    served *s = serve_fixture();
    char out[4096], errout[1024];
    const char *v1[] = {"status", s->hostport};
    assert_int_equal(run_status(2, v1, out, sizeof out, errout, sizeof errout), 0);
    const char *lines[] = {"node_id: 0123456789abcdef\n",
                           "address: tcp://127.0.0.1:7000\n",
                           "step: 4242\n",
                           "samples_per_second: 1234.5\n",
                           "loss: 0.25\n",
                           "accuracy: 0.9\n",
                           "peers: 5\n",
                           "view_epoch: 11\n",
                           "mixing: allreduce\n",
                           "shards_held: 6\n",
                           "shards_primary: 3\n",
                           "uptime_s: "};
    const char *p = out;
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        if (strncmp(p, lines[i], strlen(lines[i])))
            fail_msg("status output line %zu is not '%s':\n%s", i + 1, lines[i], out);
        p = strchr(p, '\n') + 1;
    }
    assert_string_equal(p, "");

    const char *v2[] = {"status", "--json", "--timeout-ms", "2000", s->hostport};
    assert_int_equal(run_status(5, v2, out, sizeof out, errout, sizeof errout), 0);
    assert_int_equal(strncmp(out, "{\"node_id\":\"0123456789abcdef\",", 30), 0);
    assert_string_equal(out + strlen(out) - 2, "}\n");

    /* usage errors exit 2 */
    const char *v3[] = {"status"};
    assert_int_equal(run_status(1, v3, out, sizeof out, errout, sizeof errout), 2);
    const char *v4[] = {"status", "--timeout-ms", "0", s->hostport};
    assert_int_equal(run_status(4, v4, out, sizeof out, errout, sizeof errout), 2);
    const char *v5[] = {"status", "--bogus", s->hostport};
    assert_int_equal(run_status(3, v5, out, sizeof out, errout, sizeof errout), 2);
    assert_non_null(strstr(errout, "unknown flag '--bogus'"));

    /* once the agent is gone: a clear message and exit 1 */
    char gone[32];
    snprintf(gone, sizeof gone, "%s", s->hostport);
    serve_free(s);
    const char *v6[] = {"status", "--timeout-ms", "2000", gone};
    assert_int_equal(run_status(4, v6, out, sizeof out, errout, sizeof errout), 1);
    assert_string_equal(out, "");
    assert_non_null(strstr(errout, "murmur status: cannot fetch http://"));
    assert_non_null(strstr(errout, gone));
}

/* A TCP listener that accepts connections (the kernel does, via the
 * backlog) but never answers; returns the socket and its port. */
static int silent_listener(uint16_t *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(fd, 4), 0);
    socklen_t al = sizeof a;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

static void client_deadline_and_bind_errors(void **state)
{
    (void)state;
    uint16_t port;
    int fd = silent_listener(&port);
    char hp[32], err[256] = "";
    snprintf(hp, sizeof hp, "127.0.0.1:%u", port);
    char *body = NULL;
    int rc = agent_http_get(hp, "/status", 300, &body, NULL, NULL, err, sizeof err);
    assert_int_equal(rc, AGENT_METRICS_ETIMEDOUT);
    assert_null(body);
    assert_non_null(strstr(err, "no answer in time"));

    /* the port is taken: serving there fails with a message naming it */
    agent_metrics *m;
    agent_metrics_server *srv = NULL;
    assert_int_equal(agent_metrics_create(&m), 0);
    rc = agent_metrics_serve(m, hp, NULL, NULL, &srv, err, sizeof err);
    assert_int_equal(rc, AGENT_METRICS_ENET);
    assert_null(srv);
    assert_non_null(strstr(err, hp));
    close(fd);

    assert_int_equal(agent_http_get(hp, "no-slash", 100, &body, NULL, NULL, err, sizeof err),
                     AGENT_METRICS_EINVAL);
    assert_int_equal(agent_metrics_serve(m, "", NULL, NULL, &srv, err, sizeof err),
                     AGENT_METRICS_EINVAL);
    /* no status callback: /status still answers, with the uptime */
    assert_int_equal(agent_metrics_serve(m, "127.0.0.1:0", NULL, NULL, &srv, err, sizeof err), 0);
    snprintf(hp, sizeof hp, "127.0.0.1:%u", agent_metrics_server_port(srv));
    assert_int_equal(
        agent_http_get(hp, "/status", HTTP_TIMEOUT_MS, &body, NULL, NULL, err, sizeof err), 0);
    assert_non_null(strstr(body, "\"node_id\":\"0000000000000000\""));
    assert_non_null(strstr(body, "\"uptime_s\":"));
    free(body);
    agent_metrics_server_stop(srv);
    agent_metrics_server_stop(NULL);
    agent_metrics_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(registry_rules),
        cmocka_unit_test(tables_are_bounded),
        cmocka_unit_test(text_format_line_by_line),
        cmocka_unit_test(concurrent_updates_are_exact),
        cmocka_unit_test(standard_set),
        cmocka_unit_test(families_from_the_start),
        cmocka_unit_test(help_style_and_docs),
        cmocka_unit_test(dashboard_names_exist),
        cmocka_unit_test(status_json_exact),
        cmocka_unit_test(http_round_trip),
        cmocka_unit_test(status_command),
        cmocka_unit_test(client_deadline_and_bind_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
