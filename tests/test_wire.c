/* Wire format: header golden bytes, cursor bounds, hostile input. */
#include "tests/harness.h"

#include <string.h>

#include "gossip/wire.h"

static void header_golden(void **state)
{
    (void)state;
    gossip_header h = {.type = GOSSIP_MSG_PING,
                       .payload_len = 3,
                       .sender = 0x0102030405060708ULL,
                       .epoch = 9,
                       .round = 0xA1B2C3D4E5F60718ULL};
    uint8_t frame[GOSSIP_HEADER_SIZE + 3];
    gossip_header_encode(&h, frame);
    frame[32] = 1, frame[33] = 2, frame[34] = 3;
    static const uint8_t golden[GOSSIP_HEADER_SIZE] = {
        0x4D, 0x52, 0x01, 0x01, 0x00, 0x00, 0x00, 0x03, 0x01, 0x02, 0x03,
        0x04, 0x05, 0x06, 0x07, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x09, 0xA1, 0xB2, 0xC3, 0xD4, 0xE5, 0xF6, 0x07, 0x18};
    assert_memory_equal(frame, golden, GOSSIP_HEADER_SIZE);
    gossip_header d;
    assert_int_equal(gossip_header_decode(frame, sizeof frame, &d), GOSSIP_OK);
    assert_int_equal(d.type, GOSSIP_MSG_PING);
    assert_int_equal(d.payload_len, 3);
    assert_true(d.sender == h.sender && d.epoch == 9 && d.round == h.round);
}

static void header_rejects(void **state)
{
    (void)state;
    gossip_header h = {.type = GOSSIP_MSG_ACK, .payload_len = 0};
    uint8_t f[GOSSIP_HEADER_SIZE + 4];
    gossip_header d;
    gossip_header_encode(&h, f);
    assert_int_equal(gossip_header_decode(f, 10, &d), GOSSIP_ETRUNC);
    assert_int_equal(gossip_header_decode(f, GOSSIP_HEADER_SIZE + 4, &d), GOSSIP_EMALFORMED);
    f[0] ^= 1;
    assert_int_equal(gossip_header_decode(f, GOSSIP_HEADER_SIZE, &d), GOSSIP_EMAGIC);
    f[0] ^= 1;
    f[2] = 2;
    assert_int_equal(gossip_header_decode(f, GOSSIP_HEADER_SIZE, &d), GOSSIP_EVERSION);
    f[2] = 1;
    f[3] = 0xEE;
    assert_int_equal(gossip_header_decode(f, GOSSIP_HEADER_SIZE, &d), GOSSIP_ETYPE);
    f[3] = GOSSIP_MSG_ACK;
    gossip_put_u32(f + 4, GOSSIP_PAYLOAD_MAX + 1);
    assert_int_equal(gossip_header_decode(f, GOSSIP_HEADER_SIZE, &d), GOSSIP_ETOOBIG);
    gossip_put_u32(f + 4, 4);
    assert_int_equal(gossip_header_decode(f, GOSSIP_HEADER_SIZE + 2, &d), GOSSIP_ETRUNC);
}

static void cursors_bounded(void **state)
{
    (void)state;
    uint8_t buf[7];
    gossip_writer w;
    gossip_writer_init(&w, buf, sizeof buf);
    gossip_w_u32(&w, 0xDEADBEEF);
    gossip_w_u16(&w, 0x1234);
    assert_int_equal(w.err, 0);
    gossip_w_u16(&w, 0x5678); /* needs 2, has 1 */
    assert_int_equal(w.err, 1);
    assert_int_equal(w.len, 6);
    gossip_reader r;
    gossip_reader_init(&r, buf, 6);
    assert_int_equal(gossip_r_u32(&r), 0xDEADBEEF);
    assert_int_equal(gossip_r_u16(&r), 0x1234);
    assert_int_equal(r.err, 0);
    assert_int_equal(gossip_r_u64(&r), 0);
    assert_int_equal(r.err, 1);
    gossip_writer_init(&w, buf, sizeof buf);
    gossip_w_f32(&w, -1.5f);
    gossip_reader_init(&r, buf, 4);
    assert_true(gossip_r_f32(&r) == -1.5f);
}

static void random_headers_never_crash(void **state)
{
    (void)state;
    model_rng rng;
    model_rng_seed(&rng, test_seed(1), 0);
    uint8_t f[64];
    int ok = 0;
    for (int i = 0; i < 200000; i++) {
        size_t len = model_rng_below(&rng, sizeof f + 1);
        for (size_t j = 0; j < len; j++)
            f[j] = (uint8_t)model_rng_u64(&rng);
        if (len >= 4 && (i & 1)) { /* half the time, a plausible prefix */
            gossip_put_u16(f, GOSSIP_WIRE_MAGIC);
            f[2] = 1;
        }
        gossip_header d;
        int rc = gossip_header_decode(f, len, &d);
        assert_true(rc >= 0 && rc < GOSSIP_ERR_COUNT);
        if (rc == GOSSIP_OK) {
            ok++;
            assert_true(d.payload_len == len - GOSSIP_HEADER_SIZE);
        }
    }
    (void)ok;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(header_golden),
        cmocka_unit_test(header_rejects),
        cmocka_unit_test(cursors_bounded),
        cmocka_unit_test(random_headers_never_crash),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
