/* sim/compute — how long one local training step takes on each agent.
 *
 * Purpose. The simulator asks sim_compute_step_us(c, agent) each time an
 * agent starts a local step and schedules the step's end that much later.
 *
 * Model (docs/SIMULATOR.md, "Compute model"):
 *
 *   step_time = step_ms / speed[agent] * draw
 *
 * - speed[agent] is 1, or drawn once per agent as exp(speed_sigma * Z)
 *   (lognormal heterogeneity, median 1) when speed_sigma > 0, times the
 *   agent's given factor (speeds[agent], a measured host's relative speed:
 *   make calibrate), divided by any slow-CPU factor set by a fault
 *   (sim_compute_set_slow).
 * - draw depends on the straggler model:
 *     NONE       1
 *     FIXED      `slowdown` for a fixed set of round(stragglers * agents)
 *                agents chosen from the seed, 1 for the others
 *     RANDOM     `slowdown` with probability slow_prob per step, else 1
 *     PARETO     Pareto(shape alpha, scale (alpha-1)/alpha): mean 1,
 *                heavy tail; needs alpha > 1
 *     LOGNORMAL  exp(sigma * Z - sigma^2 / 2): mean 1
 *   so step_ms is the mean step time of a non-straggler in every model
 *   except FIXED/RANDOM, whose slow steps are slower by `slowdown`.
 * - Every agent owns a generator seeded by (seed, agent): an agent's
 *   sequence of step times does not depend on what other agents do or on
 *   the order in which the simulator asks.
 *
 * Units: step_ms in milliseconds; results in microseconds (rounded to the
 * nearest, at least 1). Ownership: the model owns its per-agent arrays.
 */
#ifndef SIM_COMPUTE_H
#define SIM_COMPUTE_H

#include <stddef.h>
#include <stdint.h>

/* Most agents (as SIM_ENGINE_AGENTS_MAX). */
#define SIM_COMPUTE_AGENTS_MAX (1u << 24)
/* Longest step accepted, ms (one hour; a larger value is a typo). */
#define SIM_COMPUTE_STEP_MS_MAX 3600000.0
/* Largest slowdown factor (a straggler 10^6 times slower is a crash). */
#define SIM_COMPUTE_SLOWDOWN_MAX 1e6
/* Bound of a given speed factor (either way). */
#define SIM_COMPUTE_SPEED_MAX 1e6

typedef enum sim_compute_model {
    SIM_COMPUTE_NONE = 0,
    SIM_COMPUTE_FIXED,
    SIM_COMPUTE_RANDOM,
    SIM_COMPUTE_PARETO,
    SIM_COMPUTE_LOGNORMAL,
} sim_compute_model;

typedef struct sim_compute_config {
    uint32_t agents; /* 1..SIM_COMPUTE_AGENTS_MAX */
    uint64_t seed;
    double step_ms; /* > 0 */
    sim_compute_model model;
    double stragglers;      /* FIXED: fraction of agents in [0, 1] */
    double slowdown;        /* FIXED, RANDOM: factor >= 1 */
    double slow_prob;       /* RANDOM: probability per step in [0, 1] */
    double pareto_alpha;    /* PARETO: shape > 1 */
    double lognormal_sigma; /* LOGNORMAL: >= 0 */
    double speed_sigma;     /* per-agent lognormal speed spread, >= 0 (0 = all 1) */
    /* Given speed factors of agents 0 .. speeds_n - 1 (each in
     * (0, SIM_COMPUTE_SPEED_MAX]), 1 for the others; copied. */
    const double *speeds;
    uint32_t speeds_n; /* <= agents */
} sim_compute_config;

typedef struct sim_compute sim_compute;

typedef enum sim_compute_err {
    SIM_COMPUTE_OK = 0,
    SIM_COMPUTE_EINVAL = -1, /* a parameter out of its range (see the config) */
    SIM_COMPUTE_ENOMEM = -2,
} sim_compute_err;

/* Parse a list of speed factors, "1.1,0.9, 1" (commas, optional spaces;
 * empty = none), into out[0 .. max - 1]; *n = how many. Errors:
 * SIM_COMPUTE_EINVAL (not a number, <= 0 or above SIM_COMPUTE_SPEED_MAX,
 * more than max), with why (a message naming the item) filled. */
int sim_compute_parse_speeds(const char *text, double *out, uint32_t max, uint32_t *n, char *why,
                             size_t why_len);

/* Errors: SIM_COMPUTE_EINVAL, SIM_COMPUTE_ENOMEM. */
int sim_compute_create(sim_compute **out, const sim_compute_config *cfg);
void sim_compute_destroy(sim_compute *c);

/* Duration of the agent's next step in microseconds (>= 1); advances that
 * agent's generator. agent < agents (asserted). */
uint64_t sim_compute_step_us(sim_compute *c, uint32_t agent);

/* Slow-CPU fault: divide the agent's speed by factor (>= 1; 1 restores it).
 * Errors: SIM_COMPUTE_EINVAL (agent out of range, factor < 1 or too big). */
int sim_compute_set_slow(sim_compute *c, uint32_t agent, double factor);

/* The agent's speed (heterogeneity and slow-CPU factor included). */
double sim_compute_speed(const sim_compute *c, uint32_t agent);
/* 1 if the agent is one of the FIXED model's stragglers. */
int sim_compute_is_straggler(const sim_compute *c, uint32_t agent);

#endif
