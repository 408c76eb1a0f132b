/* agent/chaos_sched — the fault schedule of `murmur chaos` (docs/CHAOS.md).
 *
 * A schedule is a list of faults, each applied at `at_s` seconds after the
 * run starts and undone `for_s` seconds later, on members named by their
 * index (0-based, members sorted by node id, so an index names the same
 * agent whatever order they answered in). The text form, one fault a line:
 *
 *   # comment
 *   duration 120                    # optional: the run's length in seconds
 *   10 partition sides=0,1/2,3 for=15
 *   30 drop p=0.3 on=2 for=10       # on= one member; none = every member
 *   45 delay ms=200 jitter=50 for=10
 *   50 bandwidth bps=64000 on=1 for=10
 *   55 duplicate p=0.2 for=5
 *   58 reorder p=0.3 window=50 for=5
 *   60 corrupt p=0.02 on=1 for=5
 *   70 pause on=3 for=8
 *   85 slow on=0 factor=4 for=10
 *   100 kill on=1 for=10            # restarted after for=
 *
 * Random schedules (chaos_sched_random) are drawn from a seed: the same
 * seed, member count, duration and rate give the same schedule, printed by
 * chaos_sched_write in this text form (and read back identically).
 */
#ifndef AGENT_CHAOS_SCHED_H
#define AGENT_CHAOS_SCHED_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Faults in one schedule; members a schedule may name. */
#define CHAOS_EVENTS_MAX  256u
#define CHAOS_MEMBERS_MAX 64u

typedef enum chaos_action {
    CHAOS_PARTITION = 0,
    CHAOS_DROP,
    CHAOS_DELAY,
    CHAOS_BANDWIDTH,
    CHAOS_DUPLICATE,
    CHAOS_REORDER,
    CHAOS_CORRUPT,
    CHAOS_PAUSE,
    CHAOS_SLOW,
    CHAOS_KILL,
    CHAOS_ACTION_COUNT
} chaos_action;

extern const char *const chaos_action_names[];

typedef struct chaos_event {
    double at_s, for_s;
    chaos_action action;
    int on;          /* member index, -1 = every member */
    uint64_t side_a; /* partition: bit i = member i on side A */
    uint64_t side_b; /* partition: side B */
    double p;        /* drop, duplicate, reorder, corrupt */
    uint32_t ms;     /* delay */
    uint32_t jitter; /* delay */
    uint32_t window; /* reorder */
    uint64_t bps;    /* bandwidth */
    double factor;   /* slow */
} chaos_event;

typedef struct chaos_sched {
    double duration_s; /* 0 = last undo + the settle time */
    chaos_event ev[CHAOS_EVENTS_MAX];
    size_t n;
} chaos_sched;

/* Parse the text form; members bounds the indices. Returns 0, or -1 with
 * "LINE: why" in err. Events are sorted by at_s. */
int chaos_sched_parse(chaos_sched *s, const char *text, int members, char *err, size_t errlen);
/* Read a file (at most 64 KiB) and parse it. */
int chaos_sched_load(chaos_sched *s, const char *path, int members, char *err, size_t errlen);
/* Random schedules (docs/CHAOS.md, "Schedules"). Faults come one at a
 * time in [CHAOS_RANDOM_WARMUP_S, duration - CHAOS_RANDOM_SETTLE_S]: that
 * window is cut into k equal slots, one fault each, k =
 * chaos_sched_random_count (rate x duration, at most one slot per
 * CHAOS_RANDOM_SLOT_MIN_S). Coverage rule: the first min(k, kinds) slots
 * take distinct kinds, the seven of the nemesis first (kill, pause, slow,
 * partition, drop, bandwidth, corrupt; a random subset of them when k is
 * smaller), then delay, duplicate and reorder; further slots draw any kind.
 * So every kind appears at least once when k >= 10 and the seven when
 * k >= 7 (a 2-minute run at 4 a minute has k = 8). kill only when
 * allow_kill and n > 1, partition only when n > 1. A fault lasts 5 s up
 * to min(15 s, slot - CHAOS_RANDOM_GAP_S) and ends CHAOS_RANDOM_GAP_S
 * before the next slot. Kinds, order, times and parameters all come from
 * one generator seeded by seed. */
#define CHAOS_RANDOM_WARMUP_S   20.0
#define CHAOS_RANDOM_SETTLE_S   30.0
#define CHAOS_RANDOM_GAP_S      2.0
#define CHAOS_RANDOM_SLOT_MIN_S 7.0 /* the shortest fault (5 s) and the gap */
/* CHAOS_RANDOM_SLOT_MIN_S >= 5 s (the shortest fault) + CHAOS_RANDOM_GAP_S */
/* The number of faults (slots) of a random schedule. */
size_t chaos_sched_random_count(double duration_s, double rate_per_min);
void chaos_sched_random(chaos_sched *s, uint64_t seed, int n, double duration_s,
                        double rate_per_min, int allow_kill);
/* The text form. */
void chaos_sched_write(const chaos_sched *s, FILE *out);
/* The words of one event for murmur fault's request (apply or undo), for
 * the member `member` with the node ids of all members; "" when the event
 * is not a network/trainer fault of that member (kill, or not on it). */
void chaos_event_request(const chaos_event *e, int member, const uint64_t *ids, int n, int undo,
                         char *out, size_t cap);

/* The simulator's fault line (sim/faults.h) for one event: 1 and the line
 * in out, or 0 when the simulator has no counterpart. drop maps to loss on
 * every link (drop on= one member: that member's frames), kill to crash with restart_after,
 * pause/slow/corrupt/ partition and the link faults (delay with jitter, bandwidth in Mb/s,
 * duplicate, reorder: on the member's outgoing frames, or every member's)
 * to their own kinds. */
int chaos_event_sim_line(const chaos_event *e, char *out, size_t cap);

#endif
