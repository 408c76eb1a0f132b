#include "sim/evq.h"

#include <stdlib.h>

static inline int before(const sim_event *a, const sim_event *b)
{
    return a->time_ns < b->time_ns || (a->time_ns == b->time_ns && a->seq < b->seq);
}

int sim_evq_init(sim_evq *q, size_t cap_initial, size_t cap_max)
{
    if (cap_initial == 0)
        cap_initial = 64;
    if (cap_max < cap_initial)
        cap_max = cap_initial;
    q->heap = malloc(cap_initial * sizeof *q->heap);
    if (!q->heap)
        return -1;
    q->len = 0;
    q->cap = cap_initial;
    q->cap_max = cap_max;
    q->next_seq = 0;
    return 0;
}

void sim_evq_free(sim_evq *q)
{
    free(q->heap);
    q->heap = NULL;
    q->len = q->cap = 0;
}

int sim_evq_push(sim_evq *q, const sim_event *ev)
{
    if (q->len == q->cap) {
        if (q->cap >= q->cap_max)
            return -1;
        size_t ncap = q->cap * 2 > q->cap_max ? q->cap_max : q->cap * 2;
        sim_event *h = realloc(q->heap, ncap * sizeof *h);
        if (!h)
            return -1;
        q->heap = h;
        q->cap = ncap;
    }
    sim_event e = *ev;
    e.seq = q->next_seq++;
    size_t i = q->len++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!before(&e, &q->heap[parent]))
            break;
        q->heap[i] = q->heap[parent];
        i = parent;
    }
    q->heap[i] = e;
    return 0;
}

int sim_evq_pop(sim_evq *q, sim_event *out)
{
    if (q->len == 0)
        return -1;
    *out = q->heap[0];
    sim_event last = q->heap[--q->len];
    size_t i = 0, n = q->len;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= n)
            break;
        if (child + 1 < n && before(&q->heap[child + 1], &q->heap[child]))
            child++;
        if (!before(&q->heap[child], &last))
            break;
        q->heap[i] = q->heap[child];
        i = child;
    }
    if (n)
        q->heap[i] = last;
    return 0;
}

uint64_t sim_evq_peek_time(const sim_evq *q)
{
    return q->len ? q->heap[0].time_ns : UINT64_MAX;
}
