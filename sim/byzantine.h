/* sim/byzantine — byzantine senders in the simulator (issue 13, item 6;
 * docs/SIMULATOR.md "faults.byzantine_*", docs/experiments.md 9).
 *
 * faults.byzantine_agents = k agents, spread evenly over the indices
 * (agent (j + 1) n / k - 1 for j < k: with n = 25, k = 5 they are 4, 9,
 * 14, 19, 24, so no two are ring neighbours), train honestly on their own
 * data but lie in every mixing round: the vector they hand their mixer is
 * attack(x), and they keep their own model (they never apply what comes
 * back), so the attack never stops. The attacks, on the vector sent:
 *   scale      s x (faults.byzantine_scale, default 1e29: finite, decodes
 *              fine, far beyond any model), each value clamped to the
 *              codec's bound GOSSIP_MIX_VALUE_MAX so the frame is not
 *              refused outright;
 *   sign-flip  -x;
 *   bit-flip   each value has one random bit of its float32 flipped with
 *              probability SIM_BYZ_BITFLIP_P; a flip that makes it
 *              non-finite or beyond GOSSIP_MIX_VALUE_MAX is undone (a
 *              frame holding one would be refused whole by every receiver,
 *              a mere loss).
 * Whatever the mixer then sends derives from that vector (dpsgd, choco and
 * allreduce send it or its partial sums, gossip pushes it and answers from
 * it, push-sum adds it to its mass). The reports (loss, accuracy,
 * consensus distance) are over the honest agents only.
 *
 * Draws come from one stream of the run's seed, so a seed gives the same
 * run. */
#ifndef SIM_BYZANTINE_H
#define SIM_BYZANTINE_H

#include <stdint.h>

#include "model/rng.h"

typedef enum sim_byz_attack {
    SIM_BYZ_SCALE = 0,
    SIM_BYZ_SIGN_FLIP,
    SIM_BYZ_BIT_FLIP,
    SIM_BYZ_ATTACK_COUNT
} sim_byz_attack;

/* "scale", "sign-flip", "bit-flip", NULL */
extern const char *const sim_byz_attack_names[SIM_BYZ_ATTACK_COUNT + 1];

/* Fraction of values whose bits the bit-flip attack touches each round:
 * 1% of a 50 890-value MLP is ~500 values a round, most flips landing in
 * the mantissa (harmless) and ~1 in 4 in the exponent (a value up to 2^127
 * times larger, or tiny). */
#define SIM_BYZ_BITFLIP_P 0.01

typedef struct sim_byzantine sim_byzantine;

/* Agent i of n is byzantine when k of them are. */
int sim_byzantine_is(uint32_t n, uint32_t k, uint32_t i);

/* A run's byzantine senders; NULL (nothing to do) when k = 0. */
sim_byzantine *sim_byzantine_create(uint32_t n, uint32_t k, uint32_t dim, sim_byz_attack attack,
                                    double scale, uint64_t seed);
void sim_byzantine_destroy(sim_byzantine *b);
/* 1 if agent i lies. b may be NULL. */
int sim_byzantine_agent(const sim_byzantine *b, uint32_t i);
/* Agent i starts a round with x (its schedule's outgoing copy): the vector
 * its mixer gets, x itself for an honest agent. Remembers x. */
const float *sim_byzantine_outgoing(sim_byzantine *b, uint32_t i, const float *x);
/* Agent i's round ended with `mixed`: what its schedule gets. A byzantine
 * agent keeps its own model: the x it started from. */
const float *sim_byzantine_result(const sim_byzantine *b, uint32_t i, const float *mixed);

/* The attack on v (n values), in place; rng for bit-flip. */
void sim_byzantine_attack(sim_byz_attack a, double scale, model_rng *rng, float *v, uint32_t n);

#endif
