/* sim/shardsim — the data shards of a run: shards.count content ids drawn
 * from the seed, placed on shards.replication holders by the real
 * gossip/placement over the live agents at every view change. A new holder
 * has its copy after the transfer time of one shard at the network
 * bandwidth (instant when unlimited); a shard is lost when no live agent
 * holds a complete copy, and the loss is checked against the invariant
 * "no shard lost while fewer than r of its holders failed". */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/shards.h"
#include "sim/runner.h"

int sim_shardsim_init(runner *r, const sim_net_config *nc)
{
    const sim_scenario *sc = r->sc;
    sim_shardsim *sh = &r->sh;
    sh->nshards = sc->shards.count;
    sh->width = sc->shards.replication;
    sh->shard_ids = malloc((size_t)sh->nshards * sizeof *sh->shard_ids);
    sh->holders = calloc((size_t)sh->nshards * 2 * sh->width, sizeof *sh->holders);
    sh->nhold = calloc(sh->nshards, 1);
    sh->shard_lost = calloc(sh->nshards, 1);
    sh->hfail = calloc(sh->nshards ? sh->nshards : 1, 1);
    sh->prow = calloc((size_t)sh->nshards * sh->width, sizeof *sh->prow);
    if (!sh->shard_ids || !sh->holders || !sh->nhold || !sh->shard_lost || !sh->prow || !sh->hfail)
        return sim_runner_fail(r, SIM_RUN_ENOMEM, "out of memory (shards)");
    for (uint32_t s = 0; s < sh->nshards; s++)
        for (uint32_t k = 0; k < GOSSIP_SHARD_ID_SIZE; k += 8) {
            uint64_t v = model_rng_u64(&r->mrng);
            memcpy(sh->shard_ids[s] + k, &v, 8);
        }
    double shard_bytes = sim_models_shard_bytes(r);
    double bw = nc->up_bps > 0 && (nc->down_bps <= 0 || nc->up_bps < nc->down_bps) ? nc->up_bps
                                                                                   : nc->down_bps;
    sh->copy_us = bw > 0 ? (uint64_t)llround(shard_bytes * 8.0 / bw * 1e6) : 0;
    return 0;
}

void sim_shardsim_free(runner *r)
{
    sim_shardsim *sh = &r->sh;
    free(sh->shard_ids);
    free(sh->holders);
    free(sh->nhold);
    free(sh->shard_lost);
    free(sh->hfail);
    free(sh->prow);
}

/* Shards without min(r, live) complete live copies. */
/* Primaries per live agent of the placement just computed (row[0] of each
 * shard; agent i has id i + 1); invariant: floor(S/N)..ceil(S/N). */
static void primaries_check(runner *r, uint32_t width, uint32_t live)
{
    uint32_t *count = calloc(r->n, sizeof *count);
    if (!count) {
        sim_runner_fail(r, SIM_RUN_ENOMEM, "out of memory (primary counts)");
        return;
    }
    for (uint32_t s = 0; s < r->sh.nshards; s++)
        count[r->sh.prow[(size_t)s * width] - 1]++;
    uint32_t lo, hi;
    gossip_placement_primary_bounds(r->sh.nshards, live, &lo, &hi);
    r->sh.prim_min = UINT32_MAX;
    r->sh.prim_max = 0;
    for (uint32_t i = 0; i < r->n; i++) {
        if (!sim_runner_alive(r, i))
            continue;
        r->sh.prim_min = count[i] < r->sh.prim_min ? count[i] : r->sh.prim_min;
        r->sh.prim_max = count[i] > r->sh.prim_max ? count[i] : r->sh.prim_max;
        if (count[i] < lo || count[i] > hi)
            sim_checks_violate(r,
                               "agent %u is primary for %u shards; with %u shards over %u agents "
                               "the bounds are %u..%u",
                               i, count[i], r->sh.nshards, live, lo, hi);
    }
    free(count);
}

uint32_t sim_shardsim_under_replicated(const runner *r)
{
    uint32_t live = 0, bad = 0;
    for (uint32_t i = 0; i < r->n; i++)
        live += sim_runner_alive(r, i);
    uint32_t want = r->sh.width < live ? r->sh.width : live;
    for (uint32_t s = 0; s < r->sh.nshards; s++) {
        if (r->sh.shard_lost[s])
            continue;
        const shard_holder *h = r->sh.holders + (size_t)s * 2 * r->sh.width;
        uint32_t ready = 0;
        for (uint32_t j = 0; j < r->sh.nhold[s]; j++)
            ready += sim_runner_alive(r, h[j].agent) && h[j].ready_us <= sim_runner_now(r);
        bad += ready < want;
    }
    return bad;
}

void sim_shardsim_update(runner *r)
{
    /* gossip/placement places over views of at most GOSSIP_MEMBERS_MAX
     * members: a larger run places no shards (docs/SIMULATOR.md, scale). */
    if (!r->sh.nshards || r->n > GOSSIP_MEMBERS_MAX)
        return;
    uint32_t live = 0;
    for (uint32_t i = 0; i < r->n; i++)
        if (sim_runner_alive(r, i))
            r->ids[live++] = (uint64_t)i + 1;
    uint32_t w2 = 2 * r->sh.width;
    /* Drop holders that are down; a shard with no complete live copy is lost. */
    for (uint32_t s = 0; s < r->sh.nshards; s++) {
        if (r->sh.shard_lost[s] || !r->sh.placed)
            continue;
        shard_holder *h = r->sh.holders + (size_t)s * w2;
        uint32_t k = 0, ready = 0, had = 0;
        /* Every listed holder was up until this event (each crash updates). */
        for (uint32_t j = 0; j < r->sh.nhold[s]; j++)
            had += h[j].ready_us <= sim_runner_now(r);
        if (had >= r->sh.width)
            r->sh.hfail[s] = 0;
        for (uint32_t j = 0; j < r->sh.nhold[s]; j++)
            if (sim_runner_alive(r, h[j].agent)) {
                h[k++] = h[j];
                ready += h[j].ready_us <= sim_runner_now(r);
            } else if (h[j].ready_us <= sim_runner_now(r) && r->sh.hfail[s] < UINT8_MAX) {
                r->sh.hfail[s]++;
            }
        r->sh.nhold[s] = (uint8_t)k;
        if (!ready) {
            r->sh.shard_lost[s] = 1;
            r->sh.shards_lost++;
            sim_engine_trace(r->e, 0x5A4D000000000000ULL | s);
            if (r->sh.hfail[s] < r->sh.width)
                sim_checks_violate(
                    r, "shard %u lost after %u holder failure(s) with shards.replication = %u", s,
                    (unsigned)r->sh.hfail[s], r->sh.width);
        }
    }
    if (!live)
        return;
    gossip_placement_config pc;
    gossip_placement_config_default(&pc);
    pc.r = r->sh.width;
    gossip_view v = {.epoch = r->epoch, .n = live, .ids = r->ids};
    uint32_t width = gossip_placement_width(pc.r, live);
    if (gossip_placement_compute(&r->renv, &pc,
                                 (const uint8_t(*)[GOSSIP_SHARD_ID_SIZE])r->sh.shard_ids,
                                 r->sh.nshards, &v, r->sh.prow, NULL) != GOSSIP_OK) {
        sim_runner_fail(r, SIM_RUN_ENOMEM, "shard placement failed");
        return;
    }
    primaries_check(r, width, live);
    for (uint32_t s = 0; s < r->sh.nshards; s++) {
        if (r->sh.shard_lost[s])
            continue;
        shard_holder *h = r->sh.holders + (size_t)s * w2;
        shard_holder nh[2 * GOSSIP_PLACEMENT_R_MAX];
        uint32_t k = 0, all_ready = 1;
        for (uint32_t j = 0; j < width; j++) {
            uint32_t ag = (uint32_t)(r->sh.prow[(size_t)s * width + j] - 1);
            uint64_t ready = sim_runner_now(r) + r->sh.copy_us;
            for (uint32_t m = 0; m < r->sh.nhold[s]; m++)
                if (h[m].agent == ag && h[m].ready_us < ready)
                    ready = h[m].ready_us;
            nh[k++] = (shard_holder){ag, ready};
            all_ready &= ready <= sim_runner_now(r);
        }
        /* Former holders keep (and serve) their copy until the new ones have it. */
        if (!all_ready)
            for (uint32_t m = 0; m < r->sh.nhold[s] && k < w2; m++) {
                int in = 0;
                for (uint32_t j = 0; j < width; j++)
                    in |= nh[j].agent == h[m].agent;
                if (!in && h[m].ready_us <= sim_runner_now(r))
                    nh[k++] = h[m];
            }
        memcpy(h, nh, k * sizeof *h);
        r->sh.nhold[s] = (uint8_t)k;
    }
    r->sh.placed = 1;
}
