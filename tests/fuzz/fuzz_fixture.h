/* tests/fuzz/fuzz_fixture.h — values shared by the libFuzzer targets and
 * mkseeds, so that generated seeds fit the targets' fixtures
 * (docs/FUZZING.md).
 */
#ifndef TESTS_FUZZ_FIXTURE_H
#define TESTS_FUZZ_FIXTURE_H

#include <string.h>

#include "gossip/manifest.h"
#include "gossip/mix.h"

/* fuzz_swim: the object under test is member 1 at "self"; senders are the
 * members 2..13 at "a2".."a13"; every one runs this manifest. */
#define FUZZ_SWIM_SELF      1u
#define FUZZ_SWIM_SENDERS   12u
#define FUZZ_SWIM_MEMBERS   16u
#define FUZZ_SWIM_PERIOD_US 1000000u

static inline void fuzz_swim_manifest(gossip_manifest *m)
{
    memset(m, 0, sizeof *m);
    m->protocol = GOSSIP_MANIFEST_PROTOCOL;
    strcpy(m->spec, "mlp:8");
    m->params = 6442;
    m->init_seed = 7;
    m->algo = 1;
    m->bits = 8;
    m->block = 256;
}

/* fuzz_mix: mixer `self` of the view {1, 2, 3, 4} at epoch 5, 11 values,
 * chunks of 4 values, codec blocks of 4, a ring, 2 links, 1 ms steps. The
 * target's mixer is member 2; frames come from 1, 3, 4 or a stranger. */
#define FUZZ_MIX_DIM   11u
#define FUZZ_MIX_EPOCH 5u

static inline void fuzz_mix_config(gossip_mix_config *c, uint64_t self, gossip_mix_algo algo,
                                   unsigned bits)
{
    memset(c, 0, sizeof *c);
    c->self = self;
    c->dim = FUZZ_MIX_DIM;
    c->algo = algo;
    c->topology = GOSSIP_TOPO_RING;
    c->bits = bits;
    c->block = 4;
    c->chunk_values = 4;
    c->links_max = 2;
    c->step_timeout_us = 1000;
}

/* fuzz_node: the mixing rule and codec bits its options byte selects
 * (bits 2..4 and 5..6; mkseeds writes seeds for them). Zero is what the
 * target ran before it chose (pairwise gossip at 8 bits); the synchronous
 * rules, whose frames need the view id, come twice. */
static inline gossip_mix_algo fuzz_node_algo(unsigned options)
{
    static const gossip_mix_algo a[8] = {GOSSIP_MIX_GOSSIP, GOSSIP_MIX_PUSHSUM,   GOSSIP_MIX_DPSGD,
                                         GOSSIP_MIX_CHOCO,  GOSSIP_MIX_ALLREDUCE, GOSSIP_MIX_DPSGD,
                                         GOSSIP_MIX_CHOCO,  GOSSIP_MIX_ALLREDUCE};
    return a[(options >> 2) & 7];
}

static inline unsigned fuzz_node_bits(unsigned options)
{
    static const unsigned b[4] = {8, 32, 4, 1};
    return b[(options >> 5) & 3];
}

#endif
