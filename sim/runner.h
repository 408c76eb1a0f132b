/* sim/runner — the state of one `murmur sim` run, shared by the files that
 * make up sim/run (internal header; nothing outside sim/ includes it).
 *
 * One run is the engine (sim/engine.h: queue, delivery, trace hash) plus
 * one part per concept, each in its own file with its own state:
 *
 *   run.c         setup and teardown, the rounds and timed main loops,
 *                 progress lines, sim_run
 *   models.c      what an agent trains: consensus, quadratic, a model/
 *                 network on real or synthetic data (a table of operations
 *                 per kind, sim_models)
 *   agents.c      an agent's protocol object (a gossip_mix, or a whole
 *                 gossip_node under SWIM) on the engine: start, crash,
 *                 restart, views (the membership oracle), mixing rounds,
 *                 state transfer (sim_agents)
 *   inject.c      the fault list applied to agents, network and compute
 *   shardsim.c    shard placement and copies (sim_shardsim)
 *   invariants.c  the safety checks of opts->check (sim_checks)
 *   report.c      samples (series.csv rows), figures and summary.json
 *                 (sim_report)
 *
 * Agent i is node id i + 1 with address "sim://i" and stream i of the
 * seed (the engine's). Times are the engine's (virtual microseconds).
 */
#ifndef SIM_RUNNER_H
#define SIM_RUNNER_H

#include <stdint.h>
#include <time.h>

#include "gossip/mix.h"
#include "gossip/node.h"
#include "gossip/placement.h"
#include "gossip/sched.h"
#include "gossip/shards.h"
#include "model/data.h"
#include "model/net.h"
#include "model/optim.h"
#include "model/rng.h"
#include "sim/compute.h"
#include "sim/engine.h"
#include "sim/faults.h"
#include "sim/output.h"
#include "sim/run.h"
#include "sim/scenario.h"

/* Host event kinds on the engine (timed mode). */
/* SIM_EV_ROUND: the agent's event loop takes the round its trainer made
 * due (timed mode with an event-loop cost: sim/engine.h). */
enum { SIM_EV_STEP = SIM_EV_USER, SIM_EV_FAULT, SIM_EV_SAMPLE, SIM_EV_ROUND };

/* Generator salts (streams) of the runner's own draws; agents use streams
 * 0..agents-1 of the seed. */
#define SIM_SALT_ORDER   0x5155000000000001ULL /* rounds-mode delivery order, loss */
#define SIM_SALT_MODEL   0x5155000000000002ULL /* initial vectors, data, placement */
#define SIM_SALT_STATE   0x5155000000000003ULL /* state-transfer source of a restart */
#define SIM_SALT_CORRUPT 0x5155000000000004ULL /* corrupt fault: which frames, which bit */
#define SIM_SALT_SHARDS  0x5155000000000005ULL /* + agent: an oracle agent's replicator */

/* One agent, besides its engine slot. */
typedef struct sim_agent_state {
    gossip_mix *mix;     /* its mixer (under SWIM: its node's) */
    gossip_sched *sched; /* its training/mixing schedule, as the agent's (gossip/sched) */
    float *x;            /* the model vector (for networks: the net's parameters) */
    model_rng *rng;      /* the engine's stream of this agent */
    uint8_t present, mixing;
    uint64_t mix_start_ns; /* engine clock when its round started (ns: mix_time_*_s exact) */
    uint64_t steps, mixes, aborted;
    double loss; /* loss of the last local step */
    model_net *net;
    model_sgd sgd;
    uint32_t *rows, nrows, cursor;
    /* membership.mode = swim: the agent's protocol core; mix is its mixer */
    gossip_node *node;
    uint8_t ready;  /* the node has an agreed model (READY): it may mix */
    uint8_t paused; /* a pause fault: no frame in or out (sim/inject) */
    uint32_t dim;   /* for the state-transfer snapshot */
    char addr[24];  /* "sim://<index>" */
    /* shards.mode = protocol: its replicator (oracle membership: its own,
     * beside the mixer; swim: its node's) */
    gossip_shards *shards;
    uint8_t shards_own; /* shards is this agent's own object (not the node's) */
    uint8_t rr;         /* oracle: which part poll_send asks first (round robin) */
    /* oracle: the replicator's own generator, so that adding shard
     * replication leaves the mixer's draws (the engine's stream) as they were */
    model_rng shards_rng;
    gossip_env shards_env;
} sim_agent_state;

typedef struct runner runner;
typedef struct sim_inject sim_inject; /* inject.c: link faults and traces */

/* models.c: what an agent trains. */
typedef struct sim_model_ops {
    /* Shared state (data sets, optima); sets r->dim for vector models. */
    int (*init)(runner *r);
    /* Agent i's model; its vector is r->a[i].x (sets r->dim for networks). */
    int (*agent_init)(runner *r, uint32_t i);
    /* One local step on agent i's vector (NULL: none). */
    void (*step)(runner *r, uint32_t i);
    /* Loss and accuracy of agent i (NaN when undefined; NULL: both NaN). */
    void (*eval)(runner *r, uint32_t i, double *loss, double *acc);
    void (*agent_free)(runner *r, uint32_t i);
    void (*free)(runner *r);
    /* Bytes of one data shard. */
    double (*shard_bytes)(const runner *r);
} sim_model_ops;

typedef struct sim_models {
    const sim_model_ops *ops;
    float *quad_b;     /* quadratic: agents x dim optima */
    double *quad_mean; /* quadratic: dim */
    model_data train, test, eval;
    model_norm norm;
    int use_norm;
} sim_models;

/* shardsim.c: the data shards. Protocol mode: every agent runs
 * gossip/shards on a synthetic store (sim_shard_store: the bytes of shard s
 * are generated from the seed on every read, so only a state per (agent,
 * shard) is kept; writes are checked by the replicator against the id and
 * then discarded). Oracle mode: placement computed centrally over the live
 * agents, a copy ready after a fixed time (holders, copy_us). */
typedef struct shard_holder {
    uint32_t agent;
    uint64_t ready_us;
} shard_holder;

typedef struct sim_shard_store {
    runner *r;
    uint32_t agent;
    uint8_t *st; /* per shard: SIM_SHARD_ABSENT, _WRITING, _COMPLETE */
} sim_shard_store;

typedef struct sim_shard_index {
    uint64_t k0; /* first 8 bytes of the id (big-endian) */
    uint32_t s;
} sim_shard_index;

typedef struct sim_shardsim {
    uint32_t nshards, width;
    int protocol; /* shards.mode resolved: 1 = gossip/shards in every agent */
    int placed;   /* the initial placement is done */
    uint64_t bytes;
    uint8_t (*shard_ids)[GOSSIP_SHARD_ID_SIZE];
    uint8_t *shard_lost;
    uint64_t shards_lost;
    uint8_t *hfail;              /* holders with a complete copy lost since the shard last had r */
    uint32_t prim_min, prim_max; /* primaries per live agent in the last placement */
    uint64_t *prow;              /* placement rows (oracle; protocol: the initial one) */
    /* oracle */
    shard_holder *holders; /* nshards x 2 width */
    uint8_t *nhold;
    uint64_t copy_us;
    /* protocol */
    uint64_t content_key;
    sim_shard_index *index;   /* sorted by k0 */
    sim_shard_store *stores;  /* one per agent */
    uint8_t *st;              /* agents x nshards states */
    uint32_t *copies;         /* complete copies on live agents, per shard */
    uint64_t commits;         /* copies completed by the protocol */
    uint64_t fetch_bytes_max; /* shards.bytes rounded to the replicator's bound */
} sim_shardsim;

/* invariants.c: the safety checks (opts->check). */
typedef struct sim_checks {
    uint64_t *seen_epoch; /* per agent: highest view epoch seen */
    uint64_t violations;
    char violation[SIM_VIOLATION_MAX];
} sim_checks;

/* report.c: samples and figures. */
typedef struct sim_report {
    sim_output out;
    int out_open;
    uint64_t rows;
    double target_time, last_acc, last_loss, last_cd;
    double first_cd;         /* consensus distance of the first sample */
    uint64_t last_sample_us; /* timed mode: time of the last sample */
    double mem_per_agent;    /* heap bytes allocated by agent setup, per agent */
    double target_since;     /* first sample of the current stretch at or above the target */
    sim_diverge div;
} sim_report;

/* agents.c: counts of what happened to the agents. */
typedef struct sim_tally {
    uint64_t mix_done, mix_aborted, crashes, restarts, transfers;
    uint64_t faults; /* fault events applied (sim/inject) */
    double mix_time_sum, mix_time_max;
} sim_tally;

struct runner {
    const sim_scenario *sc;
    const sim_run_opts *opts;
    uint32_t n, dim;
    int timed;
    int swim; /* membership.mode = swim */
    sim_engine *e;
    sim_agent_state *a;
    sim_compute *comp;
    sim_fault_list faults;
    size_t next_fault; /* rounds mode */
    gossip_mix_config mcfg;
    sim_byzantine *byz; /* faults.byzantine_agents (sim/byzantine.h); NULL when none */
    gossip_sched_config scfg;
    float *mix_out; /* dim: a finished round's vector on its way to the schedule */
    model_rng state, mrng;
    gossip_env renv; /* the runner's env (placement scratch) */
    gossip_time_us end_us;
    uint64_t epoch; /* oracle view epoch */
    uint64_t *ids;  /* scratch: live ids */
    /* Oracle: the current view, shared by every mixer (gossip_mix_set_view_shared:
     * one copy for the run, not one per agent); two buffers, the previous view
     * stays valid while the new one is installed. */
    uint64_t *vids[2];
    gossip_mix_shared_view views[2];
    int vcur;
    uint32_t *group; /* partition groups, NULL = none */
    /* corrupt fault (sim/inject): probability and the stream of its draws */
    double corrupt_p;
    model_rng corrupt_rng;
    uint64_t corrupted; /* frames corrupted */
    uint32_t n_paused;
    sim_inject *inj; /* link faults and traces (sim/inject) */
    double *matrix;  /* latency matrix until the engine copied it */
    sim_models m;
    sim_shardsim sh;
    sim_checks chk;
    sim_report rep;
    sim_tally tally;
    struct timespec t0, last_print;
    char err[512];
    int failed;
    int interrupted; /* opts->stop was seen */
};

/* The run stops early: failed, interrupted or diverged (under opts->check,
 * the soak, a divergence is only marked: the invariants see what follows). */
static inline int sim_runner_halted(runner *r)
{
    if (r->opts->stop && *r->opts->stop)
        r->interrupted = 1;
    return r->failed || r->interrupted || (r->rep.div.diverged && !r->opts->check);
}

/* run.c */
int sim_runner_fail(runner *r, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The run's error, taking over the engine's first one. */
int sim_runner_failed(runner *r);

static inline gossip_time_us sim_runner_now(const runner *r)
{
    return sim_engine_now(r->e);
}
static inline int sim_runner_alive(const runner *r, uint32_t i)
{
    return sim_engine_alive(r->e, i);
}

/* models.c */
int sim_models_init(runner *r);
int sim_models_agent_init(runner *r, uint32_t i);
/* The stream the nets' initial parameters are drawn from (model.init_seed,
 * else run.seed). */
void sim_models_init_rng(const sim_scenario *sc, model_rng *init);
/* One local step of agent i (counted and traced). */
void sim_models_step(runner *r, uint32_t i);
void sim_models_eval(runner *r, uint32_t i, double *loss, double *acc);
void sim_models_free(runner *r);
double sim_models_shard_bytes(const runner *r);

/* agents.c */
uint64_t sim_agents_step_us(runner *r, uint32_t i);
/* Create agent i's protocol object and put it on the engine, up. */
int sim_agents_start(runner *r, uint32_t i);
void sim_agents_destroy(runner *r, uint32_t i);
/* Swim: join through up to 3 live agents drawn from the seed. */
void sim_agents_join(runner *r, uint32_t i);
void sim_agents_up(runner *r, uint32_t i, int restart);
void sim_agents_down(runner *r, uint32_t i);
/* Oracle: install the view of the live agents on every live mixer. */
void sim_agents_view_change(runner *r);
/* What murmur_mix does after the trainer's local step (agent/api.c), on
 * agent i: the schedule applies a finished round (params += mixed - sent),
 * counts the step and, when a round is due, hands its vector to the mixer
 * (what the agent's event loop does, agent/runtime.c on_mixing). Returns 1
 * if a round started or, with an event-loop cost, was handed to the loop
 * (it starts at SIM_EV_ROUND). */
int sim_agents_host_step(runner *r, uint32_t i);
/* SIM_EV_ROUND: agent i's loop takes its due round now. */
void sim_agents_loop_round(runner *r, uint32_t i);
/* Take agent i's mixing result if its round ended. */
void sim_agents_check_done(runner *r, uint32_t i);
void sim_agents_hook_prepare(void *ctx, uint32_t i);
void sim_agents_hook_after(void *ctx, uint32_t i);
void sim_agents_hook_prefetch(void *ctx, uint32_t i);

/* inject.c */
/* Load the scenario's traces (bandwidth and latency changes join the fault
 * list; availability stretches steps) and set up the link faults' state.
 * After the fault list is built; 0 or the run's error. */
int sim_inject_init(runner *r);
void sim_inject_free(runner *r);
void sim_inject_fault(runner *r, const sim_fault *ft);
/* How long a step of work_us (at full speed) started now lasts on agent
 * i under its availability trace (work_us without one). */
uint64_t sim_inject_step_us(runner *r, uint32_t i, uint64_t work_us);
/* The engine's delay and duplicate hooks (ctx is the runner): the delay,
 * jitter and reordering faults of the sender; its duplicate fault. */
uint64_t sim_inject_delay(void *ctx, uint32_t from, uint32_t to);
int sim_inject_duplicate(void *ctx, uint32_t from, uint32_t to);
/* Frames the delay hook held so far (the observation of sim_run_opts.on_sample). */
uint64_t sim_inject_frames_delayed(const runner *r);
/* The engine's drop hook: the sender's drop fault. */
int sim_inject_drop(void *ctx, uint32_t from, uint32_t to);
/* The engine's filter hook (sim_engine_hooks.filter; ctx is the runner):
 * drops frames from and to paused agents, corrupts frames while a corrupt
 * fault lasts. */
int sim_inject_filter(void *ctx, uint32_t from, uint32_t to, uint8_t *frame, size_t len);

/* shardsim.c */
/* Catalog, stores and the initial placement over the agents present at the
 * start (before any agent starts). */
int sim_shardsim_init(runner *r, const sim_net_config *nc);
/* Protocol mode: agent i's replicator config (catalog, its store). Returns
 * 0, or -1 when the run has no protocol shards. */
int sim_shardsim_config(runner *r, uint32_t i, gossip_shards_config *c);
/* Protocol mode, oracle membership: install the view on every live agent's
 * replicator (the caller drains). */
void sim_shardsim_view(runner *r, const gossip_view *v);
/* After a membership change: oracle mode re-places and times the copies;
 * protocol mode checks the primaries of the agents' own placements. */
void sim_shardsim_update(runner *r);
/* Agent i is about to go down: its complete copies are gone (a shard lost
 * now is checked against the invariant), its store emptied. */
void sim_shardsim_crash(runner *r, uint32_t i);
/* Primaries per live agent from the agents' own replicators (protocol
 * mode): fills prim_min / prim_max, checks floor(S/N)..ceil(S/N) of each
 * agent's own view. */
void sim_shardsim_primaries(runner *r);
uint32_t sim_shardsim_under_replicated(const runner *r);
void sim_shardsim_free(runner *r);

/* invariants.c */
int sim_checks_init(runner *r);
void sim_checks_violate(runner *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Safety invariants at a quiet point (between rounds, a sample, a fault). */
void sim_checks_run(runner *r);
void sim_checks_free(runner *r);

/* report.c */
void sim_report_sample(runner *r, uint64_t rounds);
uint64_t sim_report_round(const runner *r, uint64_t rounds);
void sim_report_summary(runner *r, uint64_t rounds, sim_summary *out);

#endif
