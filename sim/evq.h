/* sim/evq — the simulator's event queue.
 *
 * A binary min-heap of events ordered by (time_ns, seq). seq is assigned by
 * sim_evq_push from a counter, so events at the same virtual time pop in the
 * order they were pushed: the order is total and the same seed always gives
 * the same trace. The queue grows by doubling up to cap_max events; a push
 * beyond that fails (the simulator reports it rather than running unbounded).
 *
 * The payload is small and fixed (kind, agent, two integers and a pointer);
 * bulk data (message bytes) lives elsewhere and is referenced by ptr.
 */
#ifndef SIM_EVQ_H
#define SIM_EVQ_H

#include <stddef.h>
#include <stdint.h>

typedef struct sim_event {
    uint64_t time_ns;
    uint64_t seq;
    uint32_t kind;
    uint32_t agent;
    uint64_t a;
    uint64_t b;
    void *ptr;
} sim_event;

typedef struct sim_evq {
    sim_event *heap;
    size_t len;
    size_t cap;
    size_t cap_max;
    uint64_t next_seq;
} sim_evq;

/* Returns 0, or -1 if out of memory. cap_max bounds the number of queued events. */
int sim_evq_init(sim_evq *q, size_t cap_initial, size_t cap_max);
void sim_evq_free(sim_evq *q);
/* Push a copy of ev (its seq is overwritten). Returns 0, or -1 when full or
 * out of memory. */
int sim_evq_push(sim_evq *q, const sim_event *ev);
/* Pop the earliest event into out. Returns 0, or -1 when empty. */
int sim_evq_pop(sim_evq *q, sim_event *out);
/* Time of the earliest event, or UINT64_MAX when empty. */
uint64_t sim_evq_peek_time(const sim_evq *q);
static inline size_t sim_evq_len(const sim_evq *q)
{
    return q->len;
}

#endif
