/* fuzz_swim — libFuzzer target for gossip/swim's decoders and recv paths
 * (docs/FUZZING.md).
 *
 * The object under test is member 1 of a table of 16, running the
 * fixture's manifest (tests/fuzz/fuzz_fixture.h). Input: byte 0 = options
 * (bit 0: join through the seed "a2" first), then frames, each u8 type
 * selector (1..8 after % 8 + 1), u8 sender selector (one of the 12 ids
 * 2..13, never ours), u16 length, then that many payload bytes (clipped at
 * the input's end). Between frames the clock advances a quarter period and
 * the object is ticked; everything it sends is drained.
 * Properties, any violation aborts:
 *   - recv returns OK or one of its documented errors (ETRUNC, EMALFORMED,
 *     ETOOBIG, ENOTFOUND, EFULL), each counted once in stats.rejected;
 *   - a frame refused as undecodable or not for us (ETRUNC, EMALFORMED,
 *     ETOOBIG, ENOTFOUND) changes nothing: the same view, every member's
 *     state, incarnation and address, and nothing to send;
 *   - the view is sorted, holds self, has at most 16 ids and its epoch
 *     never decreases;
 *   - every frame out has a valid header of a membership type, our id as
 *     sender, a destination, and fits its bound (probes within 508 bytes);
 *   - an object refused (manifest or duplicate id) stays quiet: recv
 *     returns OK and nothing is sent.
 */
#define _GNU_SOURCE
#include "tests/fuzz/fuzz_util.h"

#include "gossip/manifest.h"
#include "gossip/swim.h"
#include "gossip/wire.h"
#include "model/rng.h"
#include "tests/fuzz/fuzz_fixture.h"

#define IDS (FUZZ_SWIM_SENDERS + 2u) /* 0 unused, 1 = self, 2..13 senders */

typedef struct snapshot {
    uint64_t epoch;
    uint32_t n;
    uint64_t ids[FUZZ_SWIM_MEMBERS];
    gossip_swim_member m[IDS];
    int found[IDS];
    uint32_t incarnation;
} snapshot;

static void take(const gossip_swim *s, snapshot *out)
{
    memset(out, 0, sizeof *out);
    gossip_view v;
    gossip_swim_view(s, &v);
    FUZZ_CHECK(v.n <= FUZZ_SWIM_MEMBERS);
    out->epoch = v.epoch;
    out->n = v.n;
    memcpy(out->ids, v.ids, v.n * sizeof *v.ids);
    for (uint64_t id = 1; id < IDS; id++)
        out->found[id] = gossip_swim_lookup(s, id, &out->m[id]) == GOSSIP_OK;
    out->incarnation = gossip_swim_incarnation(s);
}

static int same(const snapshot *a, const snapshot *b)
{
    if (a->epoch != b->epoch || a->n != b->n || memcmp(a->ids, b->ids, a->n * sizeof *a->ids) ||
        a->incarnation != b->incarnation)
        return 0;
    for (uint64_t id = 1; id < IDS; id++) {
        if (a->found[id] != b->found[id])
            return 0;
        if (a->found[id] &&
            (a->m[id].state != b->m[id].state || a->m[id].incarnation != b->m[id].incarnation ||
             strcmp(a->m[id].addr, b->m[id].addr)))
            return 0;
    }
    return 1;
}

/* Drain and check everything s sends; returns how many frames. */
static int drain(gossip_swim *s, gossip_time_us now, uint64_t *epoch)
{
    gossip_send o;
    int n = 0;
    while (gossip_swim_poll_send(s, &o, now) == 1) {
        n++;
        gossip_header h;
        FUZZ_CHECK(gossip_header_decode(o.frame, o.len, &h) == GOSSIP_OK);
        FUZZ_CHECK(h.type >= GOSSIP_MSG_PING && h.type <= GOSSIP_MSG_LEAVE);
        FUZZ_CHECK(h.sender == FUZZ_SWIM_SELF);
        FUZZ_CHECK(o.len <= GOSSIP_HEADER_SIZE + 4 + GOSSIP_MANIFEST_WIRE_MAX +
                                (size_t)FUZZ_SWIM_MEMBERS * GOSSIP_SWIM_RECORD_MAX);
        if (h.type == GOSSIP_MSG_PING || h.type == GOSSIP_MSG_PING_REQ || h.type == GOSSIP_MSG_ACK)
            FUZZ_CHECK(o.len <= 508);
        FUZZ_CHECK(o.dest != 0 || o.dest_addr != NULL);
        FUZZ_CHECK(o.dest != FUZZ_SWIM_SELF);
    }
    gossip_view v;
    gossip_swim_view(s, &v);
    FUZZ_CHECK(v.epoch >= *epoch);
    *epoch = v.epoch;
    FUZZ_CHECK(v.n <= FUZZ_SWIM_MEMBERS);
    int self = 0;
    for (uint32_t i = 0; i < v.n; i++) {
        FUZZ_CHECK(i == 0 || v.ids[i - 1] < v.ids[i]);
        self |= v.ids[i] == FUZZ_SWIM_SELF;
    }
    FUZZ_CHECK(self || gossip_swim_refused(s) != GOSSIP_SWIM_ADMITTED);
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    model_rng rng;
    model_rng_seed(&rng, size, 0);
    gossip_env env = {.alloc = fuzz_alloc,
                      .free = fuzz_free,
                      .random = model_rng_callback,
                      .alloc_ctx = NULL,
                      .random_ctx = &rng};
    gossip_manifest man;
    fuzz_swim_manifest(&man);
    gossip_swim_config c = {.self_id = FUZZ_SWIM_SELF,
                            .self_addr = "self",
                            .members_max = FUZZ_SWIM_MEMBERS,
                            .manifest = &man};
    gossip_swim *s = NULL;
    FUZZ_CHECK(gossip_swim_create(&s, &env, &c) == GOSSIP_OK);
    gossip_time_us now = 0;
    uint64_t epoch = 0;
    if (data[0] & 1) {
        const char *seed = "a2";
        FUZZ_CHECK(gossip_swim_join(s, &seed, 1, now) == GOSSIP_OK);
        drain(s, now, &epoch);
    }
    size_t at = 1;
    while (at + 4 <= size) {
        uint8_t type = (uint8_t)(data[at] % 8u + 1u);
        uint64_t sender = 2u + data[at + 1] % FUZZ_SWIM_SENDERS;
        size_t len = ((size_t)data[at + 2] << 8) | data[at + 3];
        at += 4;
        if (len > size - at)
            len = size - at;
        uint8_t *payload = fuzz_dup(data + at, len);
        at += len;
        gossip_header h = {.version = GOSSIP_WIRE_VERSION,
                           .type = type,
                           .payload_len = (uint32_t)len,
                           .sender = sender};
        snapshot before, after;
        take(s, &before);
        gossip_swim_stats st = *gossip_swim_stats_get(s);
        int refused = gossip_swim_refused(s) != GOSSIP_SWIM_ADMITTED;
        int rc = gossip_swim_recv(s, sender, &h, payload, len, now);
        free(payload);
        FUZZ_CHECK(rc == GOSSIP_OK || rc == GOSSIP_ETRUNC || rc == GOSSIP_EMALFORMED ||
                   rc == GOSSIP_ETOOBIG || rc == GOSSIP_ENOTFOUND || rc == GOSSIP_EFULL);
        const gossip_swim_stats *st2 = gossip_swim_stats_get(s);
        if (rc != GOSSIP_OK)
            FUZZ_CHECK(st2->rejected[rc] == st.rejected[rc] + 1);
        take(s, &after);
        int sent = drain(s, now, &epoch);
        if (rc != GOSSIP_OK && rc != GOSSIP_EFULL)
            FUZZ_CHECK(same(&before, &after) && sent == 0);
        if (refused)
            FUZZ_CHECK(rc == GOSSIP_OK && same(&before, &after) && sent == 0);
        now += FUZZ_SWIM_PERIOD_US / 4;
        FUZZ_CHECK(gossip_swim_tick(s, now) == GOSSIP_OK);
        sent = drain(s, now, &epoch);
        if (refused)
            FUZZ_CHECK(sent == 0);
    }
    gossip_swim_destroy(s);
    return 0;
}
