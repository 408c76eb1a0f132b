/* fuzz_mix — libFuzzer target for gossip/mix's decoders and recv paths
 * (make fuzz): MIX_PUSH, MIX_REPLY, PUSHSUM, AR_CHUNK, AR_ABORT.
 *
 * Input: u8 algorithm selector (% 5; bits 3..5 pick the codec width), then a
 * sequence of frames, each u8 type selector (% 5), u8 sender selector (one of
 * the 3 other members, or a stranger), u8 round offset, u8 flags (bit 0: tick
 * past the deadline afterwards; bit 1: take and restart when done; bit 2:
 * the header names another view), u16 length, then that many payload bytes
 * (clipped at the input's end). A frame's header carries the view id the
 * mixer itself puts on its frames (read from the first one it sends), so
 * the synchronous rules read past their view check. The
 * mixer (dim 11, chunks of 4 values, block 4) is member 2 of the view
 * {1, 2, 3, 4} and starts a round first. Checked after every step: recv
 * returns a documented code; every frame out has a valid header of a mixing
 * type and fits the largest frame; the vector taken out is finite; a frame
 * that does not decode (ETYPE, EMALFORMED, ETRUNC) changes neither the
 * state nor the round and is not answered (frames due at that time anyway
 * are sent before it arrives). Any violation aborts.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/mix.h"
#include "gossip/wire.h"
#include "model/rng.h"
#include "tests/fuzz/fuzz_fixture.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define DIM FUZZ_MIX_DIM

static void check(int ok)
{
    if (!ok)
        abort();
}

static void *f_alloc(void *ctx, size_t n)
{
    (void)ctx;
    return malloc(n ? n : 1);
}

static void f_free(void *ctx, void *p)
{
    (void)ctx;
    free(p);
}

/* The view id on the mixer's own frames (the same on every member of the
 * view), once it has sent one. */
static uint64_t view_id;
static int have_view_id;

/* Drain and check every frame out; returns how many. */
static int drain(gossip_mix *m, gossip_time_us now)
{
    gossip_send o;
    int k = 0;
    for (; k < 10000 && gossip_mix_poll_send(m, &o, now) == 1; k++) {
        gossip_header h;
        check(gossip_header_decode(o.frame, o.len, &h) == GOSSIP_OK);
        if (!have_view_id) {
            view_id = h.epoch;
            have_view_id = 1;
        }
        check(h.type >= GOSSIP_MSG_MIX_PUSH && h.type <= GOSSIP_MSG_AR_ABORT);
        check(h.sender == 2 && o.dest != 2 && o.dest != 0);
        check(o.len <= GOSSIP_HEADER_SIZE + GOSSIP_MIX_HEADER_MAX + 8 * (DIM + 1));
    }
    return k;
}

static void take_and_check(gossip_mix *m, float *x)
{
    int outcome;
    check(gossip_mix_take(m, x, &outcome) == GOSSIP_OK);
    check(outcome == GOSSIP_OK || outcome == GOSSIP_EABORTED);
    for (uint32_t i = 0; i < DIM; i++)
        check(isfinite(x[i]));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    static const unsigned widths[] = {32, 16, 8, 4, 2, 1, 32, 8};
    static const uint8_t types[] = {GOSSIP_MSG_MIX_PUSH, GOSSIP_MSG_MIX_REPLY, GOSSIP_MSG_PUSHSUM,
                                    GOSSIP_MSG_AR_CHUNK, GOSSIP_MSG_AR_ABORT};
    static const uint64_t senders[] = {1, 3, 4, 99};
    gossip_mix_algo algo = (gossip_mix_algo)(data[0] % GOSSIP_MIX_ALGO_COUNT);
    model_rng rng;
    model_rng_seed(&rng, size, 0);
    gossip_env env = {.alloc = f_alloc,
                      .free = f_free,
                      .random = model_rng_callback,
                      .alloc_ctx = NULL,
                      .random_ctx = &rng};
    gossip_mix_config c;
    fuzz_mix_config(&c, 2, algo, widths[(data[0] >> 3) & 7]);
    gossip_mix *m = NULL;
    have_view_id = 0;
    check(gossip_mix_create(&m, &env, &c) == GOSSIP_OK);
    uint64_t ids[] = {1, 2, 3, 4};
    gossip_view v = {.epoch = FUZZ_MIX_EPOCH, .n = 4, .ids = ids};
    check(gossip_mix_set_view(m, &v, 0) == GOSSIP_OK);
    float x[DIM];
    for (uint32_t i = 0; i < DIM; i++)
        x[i] = (float)i - 5.0f;
    gossip_time_us now = 0;
    check(gossip_mix_start(m, x, now) == GOSSIP_OK);
    drain(m, now);
    size_t pos = 1;
    uint8_t payload[1024];
    while (pos + 6 <= size) {
        uint8_t type = types[data[pos] % 5];
        uint64_t from = senders[data[pos + 1] % 4];
        uint64_t round = gossip_mix_round(m) + (data[pos + 2] % 4) - 1;
        uint8_t flags = data[pos + 3];
        size_t len = (size_t)data[pos + 4] << 8 | data[pos + 5];
        pos += 6;
        if (len > size - pos)
            len = size - pos;
        if (len > sizeof payload)
            len = sizeof payload;
        memcpy(payload, data + pos, len);
        pos += len;
        gossip_header h = {.version = GOSSIP_WIRE_VERSION,
                           .type = type,
                           .payload_len = (uint32_t)len,
                           .sender = from,
                           .epoch = have_view_id && !(flags & 4) ? view_id : FUZZ_MIX_EPOCH,
                           .round = round};
        /* Send first what is due at `now` anyway (a push retried once a
         * refusing peer's avoid time has passed), so that what leaves after
         * the frame is what the frame caused. */
        drain(m, now);
        gossip_mix_state state = gossip_mix_get_state(m);
        uint64_t round_before = gossip_mix_round(m);
        int rc = gossip_mix_recv(m, from, &h, payload, len, now);
        /* the documented set (gossip/mix.h) */
        check(rc == GOSSIP_OK || rc == GOSSIP_ETYPE || rc == GOSSIP_EMALFORMED ||
              rc == GOSSIP_ETRUNC || rc == GOSSIP_ENONFINITE || rc == GOSSIP_ESTALE ||
              rc == GOSSIP_ENOTFOUND || rc == GOSSIP_EFULL || rc == GOSSIP_EINVAL);
        int sent = drain(m, now);
        /* a frame that does not decode changes nothing and is not answered */
        if (rc == GOSSIP_ETYPE || rc == GOSSIP_EMALFORMED || rc == GOSSIP_ETRUNC)
            check(sent == 0 && gossip_mix_get_state(m) == state &&
                  gossip_mix_round(m) == round_before);
        now += 100;
        if (flags & 1) {
            gossip_mix_tick(
                m, gossip_mix_deadline(m) == GOSSIP_TIME_NEVER ? now : gossip_mix_deadline(m));
            drain(m, now);
        }
        if ((flags & 2) && gossip_mix_get_state(m) == GOSSIP_MIX_DONE) {
            take_and_check(m, x);
            int rc2 = gossip_mix_start(m, x, now);
            if (rc2 == GOSSIP_ENONFINITE) { /* hostile answers pushed a value past the bound */
                int big = 0;
                for (uint32_t i = 0; i < DIM; i++)
                    big |= !(fabsf(x[i]) <= GOSSIP_MIX_VALUE_MAX);
                check(big);
                for (uint32_t i = 0; i < DIM; i++)
                    x[i] = 1.0f;
                rc2 = gossip_mix_start(m, x, now);
            }
            check(rc2 == GOSSIP_OK);
            drain(m, now);
        }
    }
    if (gossip_mix_get_state(m) == GOSSIP_MIX_RUNNING)
        gossip_mix_tick(m, GOSSIP_TIME_NEVER - 1);
    drain(m, now);
    if (gossip_mix_get_state(m) == GOSSIP_MIX_DONE)
        take_and_check(m, x);
    gossip_mix_destroy(m);
    return 0;
}
