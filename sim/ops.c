/* sim/ops — ready-made sim_node_ops tables (sim/engine.h) for the protocol
 * core's objects: each forwards the sans-IO shape unchanged. */
#include "gossip/mix.h"
#include "gossip/node.h"
#include "gossip/shards.h"
#include "gossip/swim.h"
#include "gossip/xfer.h"
#include "sim/engine.h"

#define SIM_OPS(NAME, TYPE, PREFETCH)                                                              \
    static int NAME##_recv(void *n, uint64_t from, const gossip_header *h, const uint8_t *p,       \
                           size_t len, gossip_time_us now)                                         \
    {                                                                                              \
        return gossip_##NAME##_recv((TYPE *)n, from, h, p, len, now);                              \
    }                                                                                              \
    static int NAME##_tick(void *n, gossip_time_us now)                                            \
    {                                                                                              \
        return gossip_##NAME##_tick((TYPE *)n, now);                                               \
    }                                                                                              \
    static int NAME##_poll(void *n, gossip_send *out, gossip_time_us now)                          \
    {                                                                                              \
        return gossip_##NAME##_poll_send((TYPE *)n, out, now);                                     \
    }                                                                                              \
    static gossip_time_us NAME##_deadline(const void *n)                                           \
    {                                                                                              \
        return gossip_##NAME##_deadline((const TYPE *)n);                                          \
    }                                                                                              \
    const sim_node_ops sim_ops_##NAME = {NAME##_recv, NAME##_tick, NAME##_poll, NAME##_deadline,   \
                                         PREFETCH};

static void mix_prefetch(const void *n)
{
    gossip_mix_prefetch(n);
}

SIM_OPS(mix, gossip_mix, mix_prefetch)
SIM_OPS(node, gossip_node, NULL)
SIM_OPS(swim, gossip_swim, NULL)
SIM_OPS(shards, gossip_shards, NULL)
SIM_OPS(xfer, gossip_xfer, NULL)
