/* fuzz_node — libFuzzer target for gossip/node's frame entry point: whole
 * frames (header and payload, as the channel delivers them) decoded and
 * routed to membership, mixing and state transfer (docs/FUZZING.md).
 *
 * The node under test is member 1 at "self" with the swim fixture's
 * manifest (tests/fuzz/fuzz_fixture.h) and the mix fixture's model size.
 * Input: byte 0 = options (bit 0: fetch the model from peers before
 * mixing; bit 1: join through "a2"), then frames, each u8 sender selector
 * (0: unknown sender, else one of the ids 2..13), u16 length, then that
 * many bytes of frame (clipped at the input's end). The clock advances a
 * quarter period and the node is ticked between frames.
 * Properties, any violation aborts:
 *   - recv_frame returns OK or an error code, counted once in
 *     stats.rejected (OK counted in recv_frames);
 *   - a frame whose header does not decode, or whose sender is not the
 *     authenticated peer, changes nothing: the same view and model state,
 *     nothing to send;
 *   - every frame out decodes, has our id as sender and a destination;
 *   - the view is sorted, holds self, and its epoch never decreases; the
 *     model state never goes back to JOINING.
 */
#define _GNU_SOURCE
#include "tests/fuzz/fuzz_util.h"

#include "gossip/node.h"
#include "gossip/wire.h"
#include "model/rng.h"
#include "tests/fuzz/fuzz_fixture.h"

static int f_snapshot(void *ctx, float *out, uint32_t dim, uint64_t *round)
{
    (void)ctx;
    for (uint32_t i = 0; i < dim; i++)
        out[i] = (float)i;
    *round = 3;
    return 0;
}

static int drain(gossip_node *n, gossip_time_us now, uint64_t *epoch)
{
    gossip_send o;
    int k = 0;
    for (; k < 100000 && gossip_node_poll_send(n, &o, now) == 1; k++) {
        gossip_header h;
        FUZZ_CHECK(gossip_header_decode(o.frame, o.len, &h) == GOSSIP_OK);
        FUZZ_CHECK(h.sender == FUZZ_SWIM_SELF);
        FUZZ_CHECK(o.dest != FUZZ_SWIM_SELF && (o.dest != 0 || o.dest_addr != NULL));
    }
    gossip_view v;
    gossip_node_view(n, &v);
    FUZZ_CHECK(v.epoch >= *epoch);
    *epoch = v.epoch;
    int self = 0;
    for (uint32_t i = 0; i < v.n; i++) {
        FUZZ_CHECK(i == 0 || v.ids[i - 1] < v.ids[i]);
        self |= v.ids[i] == FUZZ_SWIM_SELF;
    }
    FUZZ_CHECK(self || gossip_node_refused(n) != GOSSIP_SWIM_ADMITTED);
    return k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    model_rng rng;
    model_rng_seed(&rng, size, 0);
    gossip_env env = {fuzz_alloc, fuzz_free, model_rng_callback, NULL, &rng};
    gossip_manifest man;
    fuzz_swim_manifest(&man);
    gossip_node_config c;
    gossip_node_config_default(&c);
    c.self = FUZZ_SWIM_SELF;
    c.self_addr = "self";
    c.swim.members_max = FUZZ_SWIM_MEMBERS;
    c.swim.manifest = &man;
    fuzz_mix_config(&c.mix, FUZZ_SWIM_SELF, GOSSIP_MIX_GOSSIP, 8);
    c.xfer.snapshot = f_snapshot;
    c.xfer.chunk_values = 4;
    c.fetch_model = data[0] & 1;
    gossip_node *n = NULL;
    FUZZ_CHECK(gossip_node_create(&n, &env, &c) == GOSSIP_OK);
    gossip_time_us now = 0;
    uint64_t epoch = 0;
    if (data[0] & 2) {
        const char *seed = "a2";
        FUZZ_CHECK(gossip_node_join(n, &seed, 1, now) == GOSSIP_OK);
    }
    drain(n, now, &epoch);
    gossip_node_model model = gossip_node_model_state(n);
    size_t at = 1;
    while (at + 3 <= size) {
        uint64_t from = data[at] ? 2u + data[at] % FUZZ_SWIM_SENDERS : 0;
        size_t len = ((size_t)data[at + 1] << 8) | data[at + 2];
        at += 3;
        if (len > size - at)
            len = size - at;
        uint8_t *frame = fuzz_dup(data + at, len);
        at += len;
        gossip_header h;
        int hrc = gossip_header_decode(frame, len, &h);
        int spoofed = hrc == GOSSIP_OK && from && h.sender != from;
        gossip_node_stats before = *gossip_node_stats_get(n);
        gossip_view v;
        gossip_node_view(n, &v);
        uint64_t view_epoch = v.epoch;
        gossip_node_model model_before = gossip_node_model_state(n);
        int rc = gossip_node_recv_frame(n, from, frame, len, now);
        free(frame);
        FUZZ_CHECK(rc >= 0 && rc < GOSSIP_ERR_COUNT);
        const gossip_node_stats *after = gossip_node_stats_get(n);
        if (rc == GOSSIP_OK)
            FUZZ_CHECK(after->recv_frames == before.recv_frames + 1);
        else
            FUZZ_CHECK(after->rejected[rc] == before.rejected[rc] + 1 &&
                       after->recv_frames == before.recv_frames);
        if (hrc != GOSSIP_OK)
            FUZZ_CHECK(rc == hrc);
        if (spoofed)
            FUZZ_CHECK(rc == GOSSIP_EMALFORMED);
        int sent = drain(n, now, &epoch);
        if (hrc != GOSSIP_OK || spoofed) {
            gossip_node_view(n, &v);
            FUZZ_CHECK(sent == 0 && v.epoch == view_epoch &&
                       gossip_node_model_state(n) == model_before);
        }
        now += FUZZ_SWIM_PERIOD_US / 4;
        gossip_node_tick(n, now);
        drain(n, now, &epoch);
        gossip_node_model m2 = gossip_node_model_state(n);
        FUZZ_CHECK(model == GOSSIP_NODE_JOINING || m2 != GOSSIP_NODE_JOINING);
        model = m2;
    }
    gossip_node_destroy(n);
    return 0;
}
