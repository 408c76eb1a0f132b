/* agent/chaos_verdict — the checker's verdict of docs/CHAOS.md, printed in
 * one format whoever observed the cluster: `murmur chaos` (live agents,
 * polled over /status) and `murmur sim --schedule` (simulated agents,
 * observed at every sample). The observer fills a chaos_verdict with what
 * it saw; chaos_verdict_print judges the five properties and prints one
 * line each, then "VERDICT: PASS" or "VERDICT: FAIL":
 *
 *   views_converge      every member sees the n - 1 others after the last
 *                       fault ended (converged_at >= 0)
 *   shards_not_lost     no shard missing after healing while fewer than r
 *                       members were down at once (SKIP otherwise)
 *   training_stall      no member's steps stood still longer than the
 *                       bound, outside the faults that excuse it
 *   consensus_recovers  the consensus distance after healing falls to the
 *                       highest level seen before the first fault
 *   faults_counted      every fault applied and removed was counted, no
 *                       request failed, every fault showed its effect
 *
 * Nothing here observes anything: the numbers come from the caller. */
#ifndef AGENT_CHAOS_VERDICT_H
#define AGENT_CHAOS_VERDICT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct chaos_verdict_member {
    int up;
    uint32_t peers;
    uint64_t id;
    uint64_t shards_missing;
} chaos_verdict_member;

typedef struct chaos_verdict {
    int n; /* members; m[0..n) */
    const chaos_verdict_member *m;
    /* views_converge: seconds after the last fault ended, < 0 never within settle_s */
    double converged_at, settle_s;
    /* shards_not_lost */
    int down_max;
    uint32_t replication;
    /* training_stall: the longest stall and whose */
    int stall_member;
    double stall_s, stall_at, stall_bound_s;
    /* consensus_recovers: pre_samples = 0 when nothing was seen before the first fault */
    int pre_samples;
    double pre_level, end_level;
    /* faults_counted: bad_member >= 0 names a member whose counts differ */
    int bad_member;
    uint64_t bad_applied, bad_removed, bad_want_applied, bad_want_removed;
    uint64_t requests_failed; /* control requests without an answer */
    uint64_t applied_all;     /* faults applied, over every member */
    size_t acted, quiet;      /* faults with and without evidence of an effect */
    size_t faults;            /* faults in the schedule */
    /* the PASS sentence of faults_counted; NULL = the live agents' one */
    const char *counted_pass;
} chaos_verdict;

/* Print the five check lines and the verdict to out. Returns 0 PASS, 1
 * FAIL. */
int chaos_verdict_print(const chaos_verdict *v, FILE *out);

#endif
