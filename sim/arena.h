/* sim/arena — memory for the per-agent state of large simulations.
 *
 * Purpose. At 10^5 agents and more a round's cost is cache and TLB misses:
 * every delivery lands on a random agent, whose state (its mixer, schedule,
 * engine slot) is several scattered 4 KiB pages of a heap of gigabytes, so
 * that each access walks the page tables as well. This module gives that
 * state transparent huge pages (2 MiB; madvise(MADV_HUGEPAGE), which works
 * when /sys/kernel/mm/transparent_hugepage/enabled is "madvise" or
 * "always") and packs it in allocation order, agent after agent:
 *   - sim_big_alloc: one zeroed, page-mapped block (the engine's per-agent
 *     array, the runner's), huge pages from 2 MiB on;
 *   - sim_arena: an allocator for the protocol objects' env (gossip_env
 *     alloc/free): blocks are carved in order from 64 MiB huge-page chunks
 *     and freed to a list per size (multiples of 16 bytes up to
 *     SIM_ARENA_SMALL_MAX; larger ones go to malloc). Memory goes back to
 *     the system only when the arena is destroyed.
 * Without THP (another kernel, "never") the calls still work, on small
 * pages. Nothing here changes what a simulation computes: only where its
 * bytes live.
 *
 * Accounting. sim_mem_in_use() is the bytes handed out by both (blocks
 * with their headers), which malloc's statistics (mallinfo2) do not see;
 * the heap bytes per agent that murmur sim reports add it.
 *
 * Alignment: sim_big_alloc 64 bytes, sim_arena_alloc 16 (as malloc). Not
 * thread-safe per arena; the counter is atomic.
 */
#ifndef SIM_ARENA_H
#define SIM_ARENA_H

#include <stddef.h>

#define SIM_ARENA_SMALL_MAX ((size_t)64 << 10)

/* bytes (>= 0) zeroed bytes, or NULL when out of memory. */
void *sim_big_alloc(size_t bytes);
/* p from sim_big_alloc, or NULL. */
void sim_big_free(void *p);

typedef struct sim_arena sim_arena;

/* NULL when out of memory. */
sim_arena *sim_arena_create(void);
/* Frees every block at once (the objects in it must be dead). */
void sim_arena_destroy(sim_arena *a);
/* size bytes (not zeroed: a reused block holds old bytes), or NULL. */
void *sim_arena_alloc(sim_arena *a, size_t size);
/* p from sim_arena_alloc on the same arena, or NULL. */
void sim_arena_free(sim_arena *a, void *p);

/* Bytes handed out by sim_big_alloc and every arena, not yet freed. */
size_t sim_mem_in_use(void);

#endif
