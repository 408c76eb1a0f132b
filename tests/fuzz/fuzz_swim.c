/* fuzz_swim — libFuzzer target for gossip/swim's decoder and recv paths
 * (make fuzz).
 *
 * The input is a sequence of frames for one membership object (a table of
 * 16): each is u8 type selector (1..8 after % 8 + 1), u8 sender selector
 * (one of 12 ids, never ours), u16 length, then that many payload bytes
 * (clipped at the input's end). Between frames the clock advances and the
 * object is ticked and drained. Checked after every step: recv returns a
 * documented code; the view is sorted, holds self, has at most 16 ids and
 * its epoch never decreases; every frame out decodes with a valid header of
 * a membership type and stays within the sync bound; a probe frame stays
 * within 508 bytes. Any violation aborts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/swim.h"
#include "gossip/wire.h"
#include "model/rng.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_MEMBERS 16u

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

static void drain(gossip_swim *s, gossip_time_us now, uint64_t *epoch)
{
    gossip_send o;
    while (gossip_swim_poll_send(s, &o, now) == 1) {
        gossip_header h;
        check(gossip_header_decode(o.frame, o.len, &h) == GOSSIP_OK);
        check(h.type >= GOSSIP_MSG_PING && h.type <= GOSSIP_MSG_LEAVE);
        check(o.len <= GOSSIP_HEADER_SIZE + 4 + (size_t)FUZZ_MEMBERS * GOSSIP_SWIM_RECORD_MAX);
        if (h.type == GOSSIP_MSG_PING || h.type == GOSSIP_MSG_PING_REQ || h.type == GOSSIP_MSG_ACK)
            check(o.len <= 508);
        check(o.dest != 0 || o.dest_addr != NULL);
    }
    gossip_view v;
    gossip_swim_view(s, &v);
    check(v.epoch >= *epoch);
    *epoch = v.epoch;
    check(v.n <= FUZZ_MEMBERS);
    int self = 0;
    for (uint32_t i = 0; i < v.n; i++) {
        check(i == 0 || v.ids[i - 1] < v.ids[i]);
        self |= v.ids[i] == 1;
    }
    check(self);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    model_rng rng;
    model_rng_seed(&rng, size, 0);
    gossip_env env = {.alloc = f_alloc,
                      .free = f_free,
                      .random = model_rng_callback,
                      .alloc_ctx = NULL,
                      .random_ctx = &rng};
    gossip_swim_config c = {.self_id = 1, .self_addr = "self", .members_max = FUZZ_MEMBERS};
    gossip_swim *s = NULL;
    check(gossip_swim_create(&s, &env, &c) == GOSSIP_OK);
    gossip_time_us now = 0;
    uint64_t epoch = 0;
    size_t at = 0;
    while (at + 4 <= size) {
        uint8_t type = (uint8_t)(data[at] % 8u + 1u);
        uint64_t sender = 2u + data[at + 1] % 12u;
        size_t len = ((size_t)data[at + 2] << 8) | data[at + 3];
        at += 4;
        if (len > size - at)
            len = size - at;
        uint8_t *payload = malloc(len ? len : 1); /* exact size for ASan */
        check(payload != NULL);
        memcpy(payload, data + at, len);
        at += len;
        gossip_header h = {.type = type, .payload_len = (uint32_t)len, .sender = sender};
        int rc = gossip_swim_recv(s, sender, &h, payload, len, now);
        free(payload);
        check(rc == GOSSIP_OK || rc == GOSSIP_ETRUNC || rc == GOSSIP_EMALFORMED ||
              rc == GOSSIP_ETOOBIG || rc == GOSSIP_ENOTFOUND || rc == GOSSIP_EFULL);
        drain(s, now, &epoch);
        now += 250000; /* a quarter period */
        gossip_swim_tick(s, now);
        drain(s, now, &epoch);
    }
    gossip_swim_destroy(s);
    return 0;
}
