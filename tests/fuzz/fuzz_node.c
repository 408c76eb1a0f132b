/* fuzz_node — libFuzzer target for gossip/node's frame entry point: whole
 * frames (header and payload, as the channel delivers them) decoded and
 * routed to membership, mixing and state transfer (docs/FUZZING.md).
 *
 * The node under test is member 1 at "self" with the swim fixture's
 * manifest (tests/fuzz/fuzz_fixture.h) and the mix fixture's model size
 * (rounds time out after two probe periods, eight frames).
 * Input: byte 0 = options (bit 0: fetch the model from peers before
 * mixing; bit 1: join through "a2"; bits 2..4: the mixing rule and bits
 * 5..6 its codec bits, fuzz_node_algo and fuzz_node_bits: gossip,
 * push-sum, dpsgd, choco, allreduce; bit 7: deliver mixing frames as they
 * are), then frames, each u8 sender byte (bits 0..5: 0 = unknown sender,
 * else one of the ids 2..13; bit 6: see below; bit 7: the caller's turn
 * after the frame), u16 length, then that many bytes of frame (clipped at
 * the input's end). The clock advances a quarter period and the node is
 * ticked between frames.
 * A mixing frame (types 0x1_) whose header decodes carries, unless bit 7
 * of the options, the view id of the node's current view in its header
 * (gossip_mix_view_prepare over gossip_node_view: the hash of the members
 * that dpsgd, choco and allreduce compare) and a round counted from the
 * mixer's (0 = its round), so the synchronous rules read past their view
 * and round checks; with bit 6 of the sender byte it carries instead the
 * id of that view with one member added (or removed if there), the one
 * its epoch field names (0: its sender), and its round as written: a
 * member that installed the next view first, whose frames the mixer keeps
 * until SWIM brings the node there.
 * The caller's turn is what the agent does: adopt the model once the node
 * holds one (FETCHED, RESUME, OWN -> READY), then take a finished round
 * and start the next one.
 * Properties, any violation aborts:
 *   - recv_frame returns OK or an error code, counted once in
 *     stats.rejected (OK counted in recv_frames);
 *   - a frame whose header does not decode, or whose sender is not the
 *     authenticated peer, changes nothing: the same view and model state,
 *     nothing to send (what is due at the frame's time anyway is sent
 *     before it arrives);
 *   - every frame out decodes, has our id as sender and a destination;
 *   - the view is sorted, holds self, and its epoch never decreases; the
 *     model state never goes back to JOINING;
 *   - adopting a model the node holds succeeds; a finished round is taken
 *     with outcome OK or EABORTED and finite values; a round starts (unless
 *     self is not in the view, or hostile values grew past the bound).
 */
#define _GNU_SOURCE
#include "tests/fuzz/fuzz_util.h"

#include <math.h>

#include "gossip/node.h"
#include "gossip/wire.h"
#include "model/rng.h"
#include "tests/fuzz/fuzz_fixture.h"

#define DIM FUZZ_MIX_DIM

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

/* The view id of the node's view, with `toggle` added to it or removed
 * from it (0: as it is). */
static uint64_t view_id(const gossip_node *n, uint64_t toggle)
{
    gossip_view v;
    gossip_node_view(n, &v);
    uint64_t ids[FUZZ_SWIM_MEMBERS + 1];
    uint32_t k = 0;
    int added = !toggle;
    FUZZ_CHECK(v.n <= FUZZ_SWIM_MEMBERS);
    for (uint32_t i = 0; i < v.n; i++) {
        if (!added && toggle < v.ids[i]) {
            ids[k++] = toggle;
            added = 1;
        }
        if (v.ids[i] == toggle)
            added = 1; /* removed */
        else
            ids[k++] = v.ids[i];
    }
    if (!added)
        ids[k++] = toggle;
    gossip_view t = {.epoch = v.epoch, .n = k, .ids = ids};
    gossip_mix_shared_view sv;
    FUZZ_CHECK(gossip_mix_view_prepare(&sv, &t) == GOSSIP_OK);
    return sv.view_id;
}

/* The caller's turn (the agent's loop): adopt a model the node holds, take
 * a finished round, start the next. */
static void caller_turn(gossip_node *n, float *x, gossip_time_us now)
{
    gossip_node_model st = gossip_node_model_state(n);
    if (st == GOSSIP_NODE_FETCHED) {
        uint64_t round;
        FUZZ_CHECK(gossip_node_model_result(n, x, &round) == GOSSIP_OK);
    }
    if (st == GOSSIP_NODE_FETCHED || st == GOSSIP_NODE_RESUME || st == GOSSIP_NODE_OWN)
        FUZZ_CHECK(gossip_node_model_adopt(n) == GOSSIP_OK);
    if (gossip_node_model_state(n) != GOSSIP_NODE_READY)
        return;
    gossip_mix *m = gossip_node_mix(n);
    if (gossip_mix_get_state(m) == GOSSIP_MIX_DONE) {
        int outcome;
        FUZZ_CHECK(gossip_mix_take(m, x, &outcome) == GOSSIP_OK);
        FUZZ_CHECK(outcome == GOSSIP_OK || outcome == GOSSIP_EABORTED);
        for (uint32_t i = 0; i < DIM; i++)
            FUZZ_CHECK(isfinite(x[i]));
    }
    if (gossip_mix_get_state(m) != GOSSIP_MIX_IDLE)
        return;
    int rc = gossip_mix_start(m, x, now);
    if (rc == GOSSIP_ENONFINITE) { /* hostile values pushed one past the bound */
        int big = 0;
        for (uint32_t i = 0; i < DIM; i++)
            big |= !(fabsf(x[i]) <= GOSSIP_MIX_VALUE_MAX);
        FUZZ_CHECK(big);
        for (uint32_t i = 0; i < DIM; i++)
            x[i] = 1.0f;
        rc = gossip_mix_start(m, x, now);
    }
    if (rc == GOSSIP_ENOTFOUND) { /* self not in the view: refused by membership */
        gossip_view v;
        gossip_node_view(n, &v);
        for (uint32_t i = 0; i < v.n; i++)
            FUZZ_CHECK(v.ids[i] != FUZZ_SWIM_SELF);
        return;
    }
    FUZZ_CHECK(rc == GOSSIP_OK);
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
    fuzz_mix_config(&c.mix, FUZZ_SWIM_SELF, fuzz_node_algo(data[0]), fuzz_node_bits(data[0]));
    c.mix.step_timeout_us = 2 * FUZZ_SWIM_PERIOD_US;
    c.xfer.snapshot = f_snapshot;
    c.xfer.chunk_values = 4;
    c.fetch_model = data[0] & 1;
    int as_they_are = data[0] & 0x80;
    gossip_node *n = NULL;
    FUZZ_CHECK(gossip_node_create(&n, &env, &c) == GOSSIP_OK);
    gossip_time_us now = 0;
    uint64_t epoch = 0;
    if (data[0] & 2) {
        const char *seed = "a2";
        FUZZ_CHECK(gossip_node_join(n, &seed, 1, now) == GOSSIP_OK);
    }
    drain(n, now, &epoch);
    float x[DIM];
    for (uint32_t i = 0; i < DIM; i++)
        x[i] = 0.5f * (float)i - 2.0f;
    gossip_node_model model = gossip_node_model_state(n);
    size_t at = 1;
    while (at + 3 <= size) {
        uint8_t sel = data[at] & 0x3f, fl = data[at];
        uint64_t from = sel ? 2u + sel % FUZZ_SWIM_SENDERS : 0;
        size_t len = ((size_t)data[at + 1] << 8) | data[at + 2];
        at += 3;
        if (len > size - at)
            len = size - at;
        uint8_t *frame = fuzz_dup(data + at, len);
        at += len;
        gossip_header h;
        int hrc = gossip_header_decode(frame, len, &h);
        if (hrc == GOSSIP_OK && h.type >> 4 == 1 && !as_they_are) {
            uint64_t round = h.round;
            if (!(fl & 0x40))
                round += gossip_mix_round(gossip_node_mix(n));
            uint64_t toggle = h.epoch ? h.epoch : h.sender;
            gossip_put_u64(frame + 16, view_id(n, fl & 0x40 ? toggle : 0));
            gossip_put_u64(frame + 24, round);
            FUZZ_CHECK(gossip_header_decode(frame, len, &h) == GOSSIP_OK);
        }
        int spoofed = hrc == GOSSIP_OK && from && h.sender != from;
        /* Send first what is due at `now` anyway, so that what leaves after
         * the frame is what the frame caused. */
        drain(n, now, &epoch);
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
        if (fl & 0x80) {
            caller_turn(n, x, now);
            drain(n, now, &epoch);
        }
        now += FUZZ_SWIM_PERIOD_US / 4;
        gossip_node_tick(n, now);
        drain(n, now, &epoch);
        gossip_node_model m2 = gossip_node_model_state(n);
        FUZZ_CHECK(model == GOSSIP_NODE_JOINING || m2 != GOSSIP_NODE_JOINING);
        model = m2;
    }
    /* The last round ends at its deadline; its result is taken as above. */
    gossip_mix *m = gossip_node_mix(n);
    if (gossip_mix_get_state(m) == GOSSIP_MIX_RUNNING) {
        gossip_mix_tick(m, gossip_mix_deadline(m));
        drain(n, now, &epoch);
    }
    if (gossip_mix_get_state(m) == GOSSIP_MIX_DONE)
        caller_turn(n, x, now);
    gossip_node_destroy(n);
    return 0;
}
