/* agent/chaos_verdict — see chaos_verdict.h. */
#include "agent/chaos_verdict.h"

#include <inttypes.h>
#include <math.h>

int chaos_verdict_print(const chaos_verdict *v, FILE *out)
{
    int fail = 0;
    /* views converge */
    if (v->converged_at >= 0) {
        fprintf(out,
                "check views_converge: PASS every member sees the other %d, %.1f s after the "
                "last fault ended\n",
                v->n - 1, v->converged_at);
    } else {
        fail = 1;
        fprintf(out, "check views_converge: FAIL after %.0f s of settling:", v->settle_s);
        for (int i = 0; i < v->n; i++)
            fprintf(out, " m%d=%s%u", i, v->m[i].up ? "" : "down/", v->m[i].peers);
        fprintf(out, " peers (want %d)\n", v->n - 1);
    }
    /* shards */
    uint64_t missing = 0;
    for (int i = 0; i < v->n; i++)
        missing += v->m[i].shards_missing;
    if (v->down_max >= (int)v->replication) {
        fprintf(out,
                "check shards_not_lost: SKIP %d agents were down at once (>= r = %u): loss "
                "allowed\n",
                v->down_max, v->replication);
    } else if (missing) {
        fail = 1;
        fprintf(out,
                "check shards_not_lost: FAIL %" PRIu64 " shards missing after healing though at "
                "most %d of r = %u holders were down:",
                missing, v->down_max, v->replication);
        for (int i = 0; i < v->n; i++)
            fprintf(out, " m%d=%" PRIu64, i, v->m[i].shards_missing);
        fprintf(out, "\n");
    } else {
        fprintf(out,
                "check shards_not_lost: PASS no shard missing after healing (at most %d agents "
                "down at once, r = %u)\n",
                v->down_max, v->replication);
    }
    /* training stalls */
    int w = v->stall_member >= 0 && v->stall_member < v->n ? v->stall_member : 0;
    if (v->stall_s > v->stall_bound_s) {
        fail = 1;
        fprintf(out,
                "check training_stall: FAIL member %d (%016" PRIx64 ") took no step for %.1f s "
                "from t=%.1f s (bound %.0f s)\n",
                w, v->n ? v->m[w].id : 0, v->stall_s, v->stall_at, v->stall_bound_s);
    } else {
        fprintf(out,
                "check training_stall: PASS longest stall %.1f s (member %d; bound %.0f s; "
                "paused, killed and cut-off agents excused while the fault lasts)\n",
                v->stall_s, w, v->stall_bound_s);
    }
    /* consensus distance */
    if (!v->pre_samples || !isfinite(v->pre_level)) {
        fprintf(out, "check consensus_recovers: SKIP no consensus distance before the first "
                     "fault\n");
    } else if (isfinite(v->end_level) && v->end_level <= v->pre_level) {
        fprintf(out,
                "check consensus_recovers: PASS mean distance %.4g after healing <= %.4g before "
                "the first fault\n",
                v->end_level, v->pre_level);
    } else {
        fail = 1;
        fprintf(out,
                "check consensus_recovers: FAIL mean distance %.4g after healing > %.4g before "
                "the first fault\n",
                v->end_level, v->pre_level);
    }
    /* every fault counted */
    if (v->bad_member >= 0 || v->requests_failed || v->quiet) {
        fail = 1;
        fprintf(out, "check faults_counted: FAIL");
        if (v->quiet)
            fprintf(out, " %zu faults showed no effect (see their evidence above)", v->quiet);
        if (v->bad_member >= 0)
            fprintf(out,
                    " member %d counts %" PRIu64 " applied / %" PRIu64
                    " removed, the run made %" PRIu64 " / %" PRIu64,
                    v->bad_member, v->bad_applied, v->bad_removed, v->bad_want_applied,
                    v->bad_want_removed);
        if (v->requests_failed)
            fprintf(out, " %" PRIu64 " requests failed", v->requests_failed);
        fprintf(out, "\n");
    } else {
        fprintf(out, "check faults_counted: PASS ");
        if (v->counted_pass)
            fprintf(out, "%s", v->counted_pass);
        else
            fprintf(out,
                    "every member counted exactly the faults applied and removed (%" PRIu64
                    " applied in all)",
                    v->applied_all);
        fprintf(out, "; %zu of %zu faults showed their effect\n", v->acted, v->faults);
    }
    fprintf(out, "VERDICT: %s\n", fail ? "FAIL" : "PASS");
    return fail;
}
