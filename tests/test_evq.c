/* sim_evq: total order by (time, seq), bounded capacity. */
#include "tests/harness.h"

#include "sim/evq.h"

static void orders_by_time_then_push_order(void **state)
{
    (void)state;
    sim_evq q;
    assert_int_equal(sim_evq_init(&q, 4, 1 << 20), 0);
    model_rng r;
    model_rng_seed(&r, test_seed(5), 0);
    enum { N = 50000 };
    for (uint32_t i = 0; i < N; i++) {
        sim_event e = {.time_ns = model_rng_below(&r, 1000), .agent = i};
        assert_int_equal(sim_evq_push(&q, &e), 0);
    }
    sim_event prev = {0}, e;
    for (int i = 0; i < N; i++) {
        assert_int_equal(sim_evq_pop(&q, &e), 0);
        if (i) {
            assert_true(e.time_ns >= prev.time_ns);
            if (e.time_ns == prev.time_ns)
                assert_true(e.seq > prev.seq && e.agent > prev.agent);
        }
        prev = e;
    }
    assert_int_equal(sim_evq_pop(&q, &e), -1);
    assert_true(sim_evq_peek_time(&q) == UINT64_MAX);
    sim_evq_free(&q);
}

static void bounded(void **state)
{
    (void)state;
    sim_evq q;
    assert_int_equal(sim_evq_init(&q, 2, 8), 0);
    sim_event e = {.time_ns = 1};
    for (int i = 0; i < 8; i++)
        assert_int_equal(sim_evq_push(&q, &e), 0);
    assert_int_equal(sim_evq_push(&q, &e), -1);
    assert_int_equal(sim_evq_len(&q), 8);
    sim_evq_free(&q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(orders_by_time_then_push_order),
        cmocka_unit_test(bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
