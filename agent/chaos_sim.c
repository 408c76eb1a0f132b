/* agent/chaos_sim — see chaos_sim.h. */
#include "agent/chaos_sim.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "agent/chaos_verdict.h"

/* The excuses of murmur chaos's checker (agent/cmd_chaos.c do_event,
 * restart_member): a paused or slowed member while the fault lasts and
 * 5 s more; a killed, restarted or cut-off one while it lasts and 30 s. */
#define CHAOS_SIM_EXCUSE_S 5.0
#define CHAOS_SIM_REJOIN_S 30.0

typedef struct sim_member {
    uint64_t step;
    double step_since, worst_stall, worst_stall_at;
    int up;
    uint32_t peers;
} sim_member;

/* What a fault did, from the samples in [at, at + for] and the first after. */
typedef struct sim_evidence {
    int opened, closed, mapped;
    uint64_t lost0, lost1, corrupt0, corrupt1; /* frames */
    uint64_t delayed0, delayed1, dup0, dup1;   /* frames */
    uint64_t bytes0, bytes1;                   /* sent by the target (bandwidth) */
    uint64_t step0, step1;                     /* the target's steps */
    double t0, t1;
    int down_seen, paused_seen;
    double back_s; /* kill: live again, s after the restart; < 0 not yet */
    uint32_t min_peers;
} sim_evidence;

struct chaos_sim {
    chaos_sched s;
    uint32_t n, replication;
    double stall_bound_s;
    sim_member *m;
    sim_evidence *ev;
    double first, last; /* first fault's start, last fault's end */
    int down_max;
    int pre_samples;
    double pre_level, end_level, converged_at, end_s;
    uint64_t shards_lost, under_replicated;
    uint64_t events, events_due, events_applied;
};

chaos_sim *chaos_sim_create(const chaos_sched *s, uint32_t agents, uint32_t replication,
                            double stall_bound_s)
{
    chaos_sim *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->s = *s;
    c->n = agents;
    c->replication = replication;
    c->stall_bound_s = stall_bound_s;
    c->m = calloc(agents ? agents : 1, sizeof *c->m);
    c->ev = calloc(s->n ? s->n : 1, sizeof *c->ev);
    if (!c->m || !c->ev) {
        chaos_sim_destroy(c);
        return NULL;
    }
    c->first = s->n ? s->ev[0].at_s : 0;
    for (size_t i = 0; i < s->n; i++) {
        char line[300];
        c->ev[i].mapped = chaos_event_sim_line(&s->ev[i], line, sizeof line);
        c->ev[i].back_s = -1;
        c->ev[i].min_peers = agents;
        if (s->ev[i].at_s < c->first)
            c->first = s->ev[i].at_s;
        if (s->ev[i].at_s + s->ev[i].for_s > c->last)
            c->last = s->ev[i].at_s + s->ev[i].for_s;
    }
    c->pre_level = NAN;
    c->end_level = NAN;
    c->converged_at = -1;
    return c;
}

void chaos_sim_destroy(chaos_sim *c)
{
    if (!c)
        return;
    free(c->m);
    free(c->ev);
    free(c);
}

static int touches(const chaos_event *e, uint32_t i)
{
    if (e->action == CHAOS_PARTITION)
        return (int)((e->side_a | e->side_b) >> i & 1);
    return e->on < 0 || e->on == (int)i;
}

/* Is member i excused from stalls at t (the rules of murmur chaos)? */
static int excused(const chaos_sim *c, uint32_t i, double t)
{
    for (size_t k = 0; k < c->s.n; k++) {
        const chaos_event *e = &c->s.ev[k];
        double extra;
        switch (e->action) {
        case CHAOS_PAUSE:
        case CHAOS_SLOW:
            extra = CHAOS_SIM_EXCUSE_S;
            break;
        case CHAOS_KILL:
        case CHAOS_PARTITION:
            extra = CHAOS_SIM_REJOIN_S;
            break;
        default:
            continue;
        }
        if (touches(e, i) && t >= e->at_s && t <= e->at_s + e->for_s + extra)
            return 1;
    }
    return 0;
}

void chaos_sim_sample(void *ctx, const sim_observation *o)
{
    chaos_sim *c = ctx;
    double t = o->time_s;
    int down = 0, all = 1;
    for (uint32_t i = 0; i < c->n && i < o->agents; i++) {
        sim_agent_observation a;
        sim_observation_agent(o, i, &a);
        sim_member *m = &c->m[i];
        m->up = a.live;
        m->peers = a.peers;
        down += !a.live;
        all &= a.live && a.peers == c->n - 1;
        if (!a.live || a.steps != m->step || excused(c, i, t)) {
            m->step = a.steps;
            m->step_since = t;
        } else if (t - m->step_since > m->worst_stall) {
            m->worst_stall = t - m->step_since;
            m->worst_stall_at = m->step_since;
        }
        for (size_t k = 0; k < c->s.n; k++) {
            const chaos_event *e = &c->s.ev[k];
            sim_evidence *v = &c->ev[k];
            if (!v->mapped || t < e->at_s)
                continue;
            int during = t <= e->at_s + e->for_s;
            if (during && touches(e, i) && a.peers < v->min_peers && a.live)
                v->min_peers = a.peers;
            if (e->on != (int)i)
                continue;
            if (during && e->action == CHAOS_KILL && !a.live)
                v->down_seen = 1;
            if (!during && e->action == CHAOS_KILL && a.live && v->back_s < 0)
                v->back_s = t - (e->at_s + e->for_s);
            if (during && e->action == CHAOS_PAUSE && a.paused) {
                if (!v->paused_seen)
                    v->step0 = a.steps;
                v->paused_seen = 1;
                v->step1 = a.steps;
            }
            if (e->action == CHAOS_SLOW && !v->closed) {
                if (!v->opened)
                    v->step0 = a.steps;
                v->step1 = a.steps;
            }
            if (e->action == CHAOS_BANDWIDTH && !v->closed) {
                if (!v->opened)
                    v->bytes0 = a.bytes_sent;
                v->bytes1 = a.bytes_sent;
            }
        }
    }
    if (down > c->down_max)
        c->down_max = down;
    /* frame counts over each fault: from its first sample to the first after it */
    for (size_t k = 0; k < c->s.n; k++) {
        const chaos_event *e = &c->s.ev[k];
        sim_evidence *v = &c->ev[k];
        if (!v->mapped || t < e->at_s || v->closed)
            continue;
        if (!v->opened) {
            v->opened = 1;
            v->t0 = t;
            v->lost0 = o->frames_lost;
            v->corrupt0 = o->frames_corrupted;
            v->delayed0 = o->frames_delayed;
            v->dup0 = o->frames_duplicated;
        }
        v->t1 = t;
        v->lost1 = o->frames_lost;
        v->corrupt1 = o->frames_corrupted;
        v->delayed1 = o->frames_delayed;
        v->dup1 = o->frames_duplicated;
        if (t > e->at_s + e->for_s)
            v->closed = 1;
    }
    double cd = o->consensus_distance;
    if (t < c->first && isfinite(cd)) {
        c->pre_level = c->pre_samples ? fmax(c->pre_level, cd) : cd;
        c->pre_samples++;
    }
    if (t >= c->last) {
        if (isfinite(cd) && (!isfinite(c->end_level) || cd < c->end_level))
            c->end_level = cd;
        if (c->converged_at < 0 && all)
            c->converged_at = t - c->last;
    }
    c->shards_lost = o->shards_lost;
    c->under_replicated = o->shards_under_replicated;
    c->events = o->fault_events;
    c->events_due = o->fault_events_due;
    c->events_applied = o->fault_events_applied;
    c->end_s = t;
}

/* One evidence line; returns 1 effect seen, 0 none, -1 not judged. */
static int evidence_line(const chaos_sim *c, size_t k, FILE *out)
{
    const chaos_event *e = &c->s.ev[k];
    const sim_evidence *v = &c->ev[k];
    char who[32] = "";
    if (e->on >= 0)
        snprintf(who, sizeof who, " on=%d", e->on);
    fprintf(out, "fault %zu %s%s at %g s for %g s: ", k, chaos_action_names[e->action], who,
            e->at_s, e->for_s);
    if (!v->mapped) {
        fprintf(out, "no simulator counterpart; not judged\n");
        return -1;
    }
    if (!v->opened) {
        fprintf(out, "after the end of the run; not judged\n");
        return -1;
    }
    int ok = 0;
    uint64_t lost = v->lost1 - v->lost0, corrupt = v->corrupt1 - v->corrupt0;
    switch (e->action) {
    case CHAOS_KILL:
        ok = v->down_seen && v->back_s >= 0;
        if (ok)
            fprintf(out, "down, live again %.1f s after the restart\n", v->back_s);
        else
            fprintf(out, "%s, %s\n", v->down_seen ? "down" : "never seen down",
                    v->back_s >= 0 ? "back" : "not back");
        break;
    case CHAOS_PAUSE:
        ok = v->paused_seen && v->step1 == v->step0;
        fprintf(out, "paused seen, %" PRIu64 " steps meanwhile\n", v->step1 - v->step0);
        break;
    case CHAOS_SLOW: {
        double rate = v->t1 > v->t0 ? (double)(v->step1 - v->step0) / (v->t1 - v->t0) : 0;
        ok = v->opened;
        fprintf(out, "slowed by %g, %.1f steps/s meanwhile\n", e->factor, rate);
        break;
    }
    case CHAOS_CORRUPT:
        ok = corrupt > 0;
        fprintf(out, "%" PRIu64 " frames corrupted (and refused)\n", corrupt);
        break;
    case CHAOS_DELAY:
    case CHAOS_REORDER:
        ok = v->delayed1 > v->delayed0;
        fprintf(out, "%" PRIu64 " frames held back\n", v->delayed1 - v->delayed0);
        break;
    case CHAOS_DUPLICATE:
        ok = v->dup1 > v->dup0;
        fprintf(out, "%" PRIu64 " frames sent twice\n", v->dup1 - v->dup0);
        break;
    case CHAOS_BANDWIDTH: {
        /* the member's sending rate stayed under the cap (on=-1: not
         * judged per member, only that frames went out) */
        double bps = v->t1 > v->t0 ? (double)(v->bytes1 - v->bytes0) * 8 / (v->t1 - v->t0) : 0;
        ok = e->on < 0 || (v->bytes1 > v->bytes0 && bps <= (double)e->bps * 1.05);
        if (e->on >= 0)
            fprintf(out, "member %d sent %.0f b/s under a cap of %" PRIu64 " b/s\n", e->on, bps,
                    e->bps);
        else
            fprintf(out, "cap of %" PRIu64 " b/s on every member\n", e->bps);
        break;
    }
    default:
        ok = lost > 0;
        fprintf(out, "%" PRIu64 " frames lost", lost);
        if (e->action == CHAOS_PARTITION)
            fprintf(out, ", fewest peers seen %u of %u", v->min_peers, c->n - 1);
        fprintf(out, "\n");
        break;
    }
    return ok;
}

int chaos_sim_verdict(chaos_sim *c, FILE *out)
{
    size_t acted = 0, quiet = 0, judged = 0;
    for (size_t k = 0; k < c->s.n; k++) {
        int r = evidence_line(c, k, out);
        if (r >= 0) {
            judged++;
            (*(r ? &acted : &quiet))++;
        }
    }
    chaos_verdict_member *vm = calloc(c->n ? c->n : 1, sizeof *vm);
    if (!vm)
        return 1;
    chaos_verdict v = {.n = (int)c->n,
                       .m = vm,
                       .converged_at = c->converged_at,
                       .settle_s = c->end_s - c->last,
                       .down_max = c->down_max,
                       .replication = c->replication,
                       .stall_bound_s = c->stall_bound_s,
                       .pre_samples = c->pre_samples,
                       .pre_level = c->pre_level,
                       .end_level = c->end_level,
                       .bad_member = -1,
                       .acted = acted,
                       .quiet = quiet,
                       .faults = c->s.n};
    for (uint32_t i = 0; i < c->n; i++) {
        vm[i] = (chaos_verdict_member){c->m[i].up, c->m[i].peers, (uint64_t)i + 1, 0};
        if (c->m[i].worst_stall > c->m[v.stall_member].worst_stall)
            v.stall_member = (int)i;
    }
    vm[0].shards_missing = c->shards_lost; /* the simulator counts shards, not holders */
    v.stall_s = c->m[v.stall_member].worst_stall;
    v.stall_at = c->m[v.stall_member].worst_stall_at;
    char pass[256];
    snprintf(pass, sizeof pass,
             "the simulator applied every event of the schedule's faults (%" PRIu64 " of %" PRIu64
             ", each fault and its undo; %zu faults judged)",
             c->events_applied, c->events, judged);
    v.counted_pass = pass;
    if (c->events_applied != c->events_due) {
        v.bad_member = 0; /* reported as the simulator's count */
        v.bad_applied = c->events_applied;
        v.bad_want_applied = c->events_due;
    }
    int rc = chaos_verdict_print(&v, out);
    free(vm);
    return rc;
}
