/* net/faults: the injector's decisions (seeded, with time as an argument)
 * and the transport with faults on, over real sockets on 127.0.0.1: lost,
 * delayed, duplicated and corrupted frames (the receiver's channel refuses
 * the corrupted one), a partition both ways, and a clear that releases
 * every held frame. (tests/test_faults.c is the simulator's.) */
#include "tests/harness.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "net/faults.h"
#include "net/transport.h"

#define WAIT_MS 10000

/* ---- decisions ---------------------------------------------------------- */

static void link_check_refuses(void **state)
{
    (void)state;
    char why[128];
    net_fault_link l = {.drop = 1.5};
    assert_int_equal(net_fault_link_check(&l, why, sizeof why), -1);
    assert_non_null(strstr(why, "drop"));
    l = (net_fault_link){.delay_ms = NET_FAULTS_DELAY_MAX_MS + 1};
    assert_int_equal(net_fault_link_check(&l, why, sizeof why), -1);
    l = (net_fault_link){.bandwidth_bps = 100};
    assert_int_equal(net_fault_link_check(&l, why, sizeof why), -1);
    l = (net_fault_link){.reorder = 0.5};
    assert_int_equal(net_fault_link_check(&l, why, sizeof why), -1);
    l = (net_fault_link){.reorder = 0.5, .reorder_window_ms = 10, .corrupt = 0.1};
    assert_int_equal(net_fault_link_check(&l, why, sizeof why), 0);
    net_faults *f;
    assert_int_equal(net_faults_create(&f, 1), NET_OK);
    l.drop = -0.1;
    assert_int_equal(net_faults_set_link(f, 0, &l), NET_EINVAL);
    assert_int_equal(net_faults_active(f), 0);
    uint64_t zero = 0;
    assert_int_equal(net_faults_set_partition(f, &zero, 1), NET_EINVAL);
    net_faults_destroy(f);
}

static void rules_and_precedence(void **state)
{
    (void)state;
    net_faults *f;
    assert_int_equal(net_faults_create(&f, 7), NET_OK);
    net_fault_link all = {.drop = 1}, one = {.delay_ms = 100};
    assert_int_equal(net_faults_set_link(f, 0, &all), NET_OK);
    assert_int_equal(net_faults_set_link(f, 42, &one), NET_OK);
    net_fault_verdict v;
    net_faults_send(f, 5, 100, 1000, &v); /* the all-peers rule */
    assert_int_equal(v.copies, 0);
    net_faults_send(f, 0, 100, 1000, &v); /* unknown peer: all-peers rule */
    assert_int_equal(v.copies, 0);
    net_faults_send(f, 42, 100, 1000, &v); /* its own rule replaces the all-peers one */
    assert_int_equal(v.copies, 1);
    assert_int_equal(v.due_us[0], 1000 + 100000);
    net_faults_stats st;
    net_faults_stats_get(f, &st);
    assert_int_equal(st.rules, 2);
    assert_int_equal(st.frames[NET_FAULT_DROP], 2);
    assert_int_equal(st.frames[NET_FAULT_DELAY], 1);
    /* an empty rule removes itself */
    net_fault_link none = {0};
    assert_int_equal(net_faults_set_link(f, 0, &none), NET_OK);
    net_faults_send(f, 5, 100, 1000, &v);
    assert_int_equal(v.copies, 1);
    assert_int_equal(v.due_us[0], 1000);
    /* rule slots are bounded */
    for (uint64_t p = 100; p < 100 + NET_FAULTS_RULES_MAX - 1; p++)
        assert_int_equal(net_faults_set_link(f, p, &one), NET_OK);
    assert_int_equal(net_faults_set_link(f, 9999, &one), NET_EFULL);
    net_faults_clear(f);
    assert_int_equal(net_faults_active(f), 0);
    net_faults_destroy(f);
}

static void partition_both_ways(void **state)
{
    (void)state;
    net_faults *f;
    assert_int_equal(net_faults_create(&f, 3), NET_OK);
    uint64_t ids[] = {9, 3};
    assert_int_equal(net_faults_set_partition(f, ids, 2), NET_OK);
    net_fault_verdict v;
    net_faults_send(f, 3, 10, 0, &v);
    assert_int_equal(v.copies, 0);
    net_faults_send(f, 4, 10, 0, &v);
    assert_int_equal(v.copies, 1);
    assert_int_equal(net_faults_recv(f, 9), 1);
    assert_int_equal(net_faults_recv(f, 4), 0);
    uint64_t got[4];
    assert_int_equal(net_faults_get_partition(f, got, 4), 2);
    assert_true(got[0] == 3 && got[1] == 9);
    assert_int_equal(net_faults_set_partition(f, NULL, 0), NET_OK); /* heal */
    assert_int_equal(net_faults_recv(f, 9), 0);
    net_faults_stats st;
    net_faults_stats_get(f, &st);
    assert_int_equal(st.frames[NET_FAULT_PARTITION], 2);
    net_faults_destroy(f);
}

/* The same seed and calls give the same decisions; the rates are close to
 * the probabilities asked for. */
static void seeded_and_rates(void **state)
{
    (void)state;
    uint64_t seed = test_seed(20);
    printf("TEST_SEED=%llu\n", (unsigned long long)seed);
    net_fault_link l = {.drop = 0.3,
                        .duplicate = 0.2,
                        .corrupt = 0.1,
                        .jitter_ms = 50,
                        .reorder = 0.5,
                        .reorder_window_ms = 20};
    uint64_t hash[2] = {0, 0};
    uint64_t counts[NET_FAULT_KIND_COUNT] = {0};
    const int n = 20000;
    for (int run = 0; run < 2; run++) {
        net_faults *f;
        assert_int_equal(net_faults_create(&f, seed), NET_OK);
        assert_int_equal(net_faults_set_link(f, 0, &l), NET_OK);
        for (int i = 0; i < n; i++) {
            net_fault_verdict v;
            net_faults_send(f, 1, 100, 1000000, &v);
            hash[run] = hash[run] * 1099511628211ull + (uint64_t)v.copies * 31u + v.due_us[0] +
                        v.corrupt[0] + v.due_us[1];
            for (int c = 0; c < v.copies; c++)
                assert_true(v.due_us[c] >= 1000000 && v.due_us[c] <= 1000000 + 70000);
        }
        net_faults_stats st;
        net_faults_stats_get(f, &st);
        memcpy(counts, st.frames, sizeof counts);
        net_faults_destroy(f);
    }
    assert_true(hash[0] == hash[1]);
    double drop = (double)counts[NET_FAULT_DROP] / n;
    double dup = (double)counts[NET_FAULT_DUPLICATE] / (n - (double)counts[NET_FAULT_DROP]);
    assert_true(drop > 0.27 && drop < 0.33);
    assert_true(dup > 0.17 && dup < 0.23);
    assert_true(counts[NET_FAULT_CORRUPT] > 0 && counts[NET_FAULT_REORDER] > 0);
}

static void bandwidth_spaces_frames(void **state)
{
    (void)state;
    net_faults *f;
    assert_int_equal(net_faults_create(&f, 1), NET_OK);
    net_fault_link l = {.bandwidth_bps = 80000}; /* 10 kB/s: 1000 bytes take 100 ms */
    assert_int_equal(net_faults_set_link(f, 0, &l), NET_OK);
    net_fault_verdict v;
    gossip_time_us prev = 0;
    for (int i = 0; i < 5; i++) {
        net_faults_send(f, 2, 1000, 0, &v);
        assert_int_equal(v.copies, 1);
        assert_int_equal(v.due_us[0], prev + 100000);
        prev = v.due_us[0];
    }
    net_faults_destroy(f);
}

static void held_queue_order_and_bound(void **state)
{
    (void)state;
    net_faults *f;
    assert_int_equal(net_faults_create(&f, 1), NET_OK);
    uint8_t b[4] = {1, 2, 3, 4};
    assert_int_equal(net_faults_hold(f, 1, NULL, b, 4, 300, 0), NET_OK);
    assert_int_equal(net_faults_hold(f, 2, NULL, b, 4, 100, 0), NET_OK);
    assert_int_equal(net_faults_hold(f, 0, "tcp://127.0.0.1:1", b, 4, 200, 7), NET_OK);
    assert_int_equal(net_faults_next_due(f), 100);
    net_fault_held *h;
    assert_int_equal(net_faults_take_due(f, 50, &h), 0);
    assert_int_equal(net_faults_take_due(f, 250, &h), 1);
    assert_int_equal(h->to, 2);
    net_faults_held_free(h);
    assert_int_equal(net_faults_take_due(f, 250, &h), 1);
    assert_string_equal(h->addr, "tcp://127.0.0.1:1");
    assert_int_equal(h->corrupt, 7);
    net_faults_held_free(h);
    assert_int_equal(net_faults_take_due(f, 250, &h), 0);
    net_faults_clear(f); /* everything held is due now */
    assert_int_equal(net_faults_take_due(f, 0, &h), 1);
    net_faults_held_free(h);
    for (uint32_t i = 0; i < NET_FAULTS_HELD_FRAMES_MAX; i++)
        assert_int_equal(net_faults_hold(f, 1, NULL, b, 4, i, 0), NET_OK);
    assert_int_equal(net_faults_hold(f, 1, NULL, b, 4, 1, 0), NET_EFULL);
    net_faults_stats st;
    net_faults_stats_get(f, &st);
    assert_int_equal(st.frames[NET_FAULT_OVERFLOW], 1);
    assert_int_equal(st.held_frames, NET_FAULTS_HELD_FRAMES_MAX);
    net_faults_destroy(f); /* frees what is still held */
}

/* ---- through the transport ---------------------------------------------- */

typedef struct tnode {
    net_identity id;
    net_transport *t;
    char addr[GOSSIP_ADDR_MAX];
} tnode;

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void tnode_start(tnode *n, const uint8_t *key)
{
    memset(n, 0, sizeof *n);
    assert_int_equal(net_identity_generate(&n->id), NET_OK);
    net_transport_config cfg = {.self = &n->id, .network_key = key};
    cfg.penalty.threshold = 1000; /* test peers share 127.0.0.1 */
    cfg.dial_backoff_min_ms = 20;
    cfg.dial_backoff_max_ms = 200;
    assert_int_equal(net_transport_create(&n->t, &cfg), NET_OK);
    assert_int_equal(net_transport_listen(n->t, "tcp://127.0.0.1:0", n->addr, sizeof n->addr),
                     NET_OK);
}

/* Frames received by n within ms (each must be `want` bytes of value tag). */
static int drain(tnode *n, int ms, uint8_t tag, uint64_t *first_ms)
{
    int got = 0;
    uint64_t until = mono_ms() + (uint64_t)ms;
    while (mono_ms() < until) {
        net_message m;
        if (net_transport_recv(n->t, &m) == NET_OK) {
            assert_true(m.len == 64 && m.data[0] == tag);
            if (!got && first_ms)
                *first_ms = mono_ms();
            got++;
            net_message_release(&m);
            continue;
        }
        net_transport_wait(n->t, 10);
    }
    return got;
}

static void send64(tnode *from, tnode *to, uint8_t tag)
{
    uint8_t fr[64];
    memset(fr, tag, sizeof fr);
    assert_int_equal(net_transport_send(from->t, to->id.node_id, to->addr, fr, sizeof fr), NET_OK);
}

static void transport_faults(void **state)
{
    (void)state;
    uint8_t key[NET_NETWORK_KEY_SIZE];
    randombytes_buf(key, sizeof key);
    tnode a, b;
    tnode_start(&a, key);
    tnode_start(&b, key);
    assert_int_equal(net_transport_set_addr(a.t, b.id.node_id, b.addr), NET_OK);
    assert_int_equal(net_transport_set_addr(b.t, a.id.node_id, a.addr), NET_OK);
    net_faults *fa;
    assert_int_equal(net_transport_faults_enable(a.t, 11, &fa), NET_OK);
    net_faults *again;
    assert_int_equal(net_transport_faults_enable(a.t, 12, &again), NET_OK);
    assert_ptr_equal(fa, again);
    /* no rule: frames pass */
    send64(&a, &b, 1);
    assert_int_equal(drain(&b, 500, 1, NULL), 1);
    /* drop everything to b */
    net_fault_link l = {.drop = 1};
    assert_int_equal(net_faults_set_link(fa, b.id.node_id, &l), NET_OK);
    for (int i = 0; i < 5; i++)
        send64(&a, &b, 2);
    assert_int_equal(drain(&b, 300, 2, NULL), 0);
    /* duplicate everything */
    l = (net_fault_link){.duplicate = 1};
    assert_int_equal(net_faults_set_link(fa, b.id.node_id, &l), NET_OK);
    send64(&a, &b, 3);
    assert_int_equal(drain(&b, 500, 3, NULL), 2);
    /* delay: nothing before 300 ms, then the frame */
    l = (net_fault_link){.delay_ms = 300};
    assert_int_equal(net_faults_set_link(fa, b.id.node_id, &l), NET_OK);
    uint64_t t0 = mono_ms(), first = 0;
    send64(&a, &b, 4);
    assert_int_equal(drain(&b, 1500, 4, &first), 1);
    assert_true(first >= t0 + 300);
    /* corrupt: b's channel refuses the record (cause auth) and counts it */
    net_transport_stats sb;
    net_transport_stats_get(b.t, &sb);
    uint64_t auth0 = sb.rejects[NET_REJECT_AUTH];
    l = (net_fault_link){.corrupt = 1};
    assert_int_equal(net_faults_set_link(fa, b.id.node_id, &l), NET_OK);
    send64(&a, &b, 5);
    assert_int_equal(drain(&b, 500, 5, NULL), 0);
    net_transport_stats_get(b.t, &sb);
    assert_int_equal(sb.rejects[NET_REJECT_AUTH], auth0 + 1);
    /* partition: nothing from b is delivered to a, nothing goes to b */
    net_faults_clear(fa);
    uint64_t pb = b.id.node_id;
    assert_int_equal(net_faults_set_partition(fa, &pb, 1), NET_OK);
    send64(&a, &b, 6);
    send64(&b, &a, 6);
    assert_int_equal(drain(&b, 300, 6, NULL), 0);
    assert_int_equal(drain(&a, 300, 6, NULL), 0);
    /* heal: both ways again (b re-dials after the corrupted link closed) */
    net_faults_clear(fa);
    send64(&b, &a, 7);
    send64(&a, &b, 7);
    assert_int_equal(drain(&a, 2000, 7, NULL), 1);
    assert_int_equal(drain(&b, 2000, 7, NULL), 1);
    /* a clear releases held frames at once */
    l = (net_fault_link){.delay_ms = 30000};
    assert_int_equal(net_faults_set_link(fa, b.id.node_id, &l), NET_OK);
    send64(&a, &b, 8);
    assert_int_equal(drain(&b, 200, 8, NULL), 0);
    net_faults_clear(fa);
    assert_int_equal(drain(&b, 2000, 8, NULL), 1);
    net_faults_stats st;
    net_faults_stats_get(fa, &st);
    assert_int_equal(st.frames[NET_FAULT_DROP], 5);
    assert_int_equal(st.frames[NET_FAULT_DUPLICATE], 1);
    assert_int_equal(st.frames[NET_FAULT_CORRUPT], 1);
    assert_int_equal(st.frames[NET_FAULT_PARTITION], 2);
    assert_int_equal(st.held_frames, 0);
    /* destroy with frames still held frees them */
    assert_int_equal(net_faults_set_link(fa, b.id.node_id, &l), NET_OK);
    send64(&a, &b, 9);
    net_transport_destroy(a.t);
    net_transport_destroy(b.t);
}

int main(void)
{
    if (net_init() != NET_OK)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(link_check_refuses),      cmocka_unit_test(rules_and_precedence),
        cmocka_unit_test(partition_both_ways),     cmocka_unit_test(seeded_and_rates),
        cmocka_unit_test(bandwidth_spaces_frames), cmocka_unit_test(held_queue_order_and_bound),
        cmocka_unit_test(transport_faults),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
