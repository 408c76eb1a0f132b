/* sim/arena — see arena.h. */
#include "sim/arena.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define PAGE_BYTES  ((size_t)4096)
#define HUGE_BYTES  ((size_t)2 << 20)
#define BIG_HEADER  ((size_t)64)
#define CHUNK_BYTES ((size_t)64 << 20)
#define BLOCK_ALIGN ((size_t)16)
#define BLOCK_HDR   ((size_t)16)
#define CLASSES     (SIM_ARENA_SMALL_MAX / BLOCK_ALIGN)

static _Atomic size_t mem_in_use;

size_t sim_mem_in_use(void)
{
    return atomic_load_explicit(&mem_in_use, memory_order_relaxed);
}

/* A zeroed mapping of at least `bytes` (a multiple of the page), aligned
 * to 2 MiB and advised to huge pages from 2 MiB on; *len its length. */
static uint8_t *map(size_t bytes, size_t *len)
{
    size_t need = (bytes + PAGE_BYTES - 1) & ~(PAGE_BYTES - 1);
    size_t align = need >= HUGE_BYTES ? HUGE_BYTES : PAGE_BYTES;
    size_t over = need + align - PAGE_BYTES;
    uint8_t *m = mmap(NULL, over, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    uint8_t *start = (uint8_t *)(((uintptr_t)m + align - 1) & ~(uintptr_t)(align - 1));
    if (start > m)
        munmap(m, (size_t)(start - m));
    if (m + over > start + need)
        munmap(start + need, (size_t)(m + over - (start + need)));
#ifdef MADV_HUGEPAGE
    if (need >= HUGE_BYTES)
        (void)madvise(start, need, MADV_HUGEPAGE); /* a hint: small pages if refused */
#endif
    *len = need;
    return start;
}

typedef struct big_header {
    size_t len;   /* of the mapping */
    size_t bytes; /* asked for */
} big_header;

void *sim_big_alloc(size_t bytes)
{
    if (bytes > SIZE_MAX / 2)
        return NULL;
    size_t len;
    uint8_t *p = map(bytes + BIG_HEADER, &len);
    if (!p)
        return NULL;
    *(big_header *)p = (big_header){len, bytes};
    atomic_fetch_add_explicit(&mem_in_use, bytes, memory_order_relaxed);
    return p + BIG_HEADER;
}

void sim_big_free(void *p)
{
    if (!p)
        return;
    uint8_t *base = (uint8_t *)p - BIG_HEADER;
    big_header h = *(big_header *)base;
    atomic_fetch_sub_explicit(&mem_in_use, h.bytes, memory_order_relaxed);
    munmap(base, h.len);
}

/* A block: a 16-byte header (its size class, 0 = malloc'd alone) and the
 * caller's bytes; a free block's first word links the next of its class. */
typedef struct chunk {
    struct chunk *next;
    size_t len;
} chunk;

struct sim_arena {
    uint8_t *cur, *end; /* the unused part of the newest chunk */
    chunk *chunks;
    void *free_list[CLASSES + 1];
};

sim_arena *sim_arena_create(void)
{
    return calloc(1, sizeof(sim_arena));
}

void sim_arena_destroy(sim_arena *a)
{
    if (!a)
        return;
    while (a->chunks) {
        chunk *c = a->chunks;
        a->chunks = c->next;
        munmap(c, c->len);
    }
    free(a);
}

void *sim_arena_alloc(sim_arena *a, size_t size)
{
    if (size > SIM_ARENA_SMALL_MAX) {
        uint8_t *h = malloc(BLOCK_HDR + size);
        if (!h)
            return NULL;
        *(uint32_t *)h = 0;
        return h + BLOCK_HDR;
    }
    size_t cls = size ? (size + BLOCK_ALIGN - 1) / BLOCK_ALIGN : 1;
    size_t block = BLOCK_HDR + cls * BLOCK_ALIGN;
    uint8_t *p = a->free_list[cls];
    if (p) {
        memcpy(&a->free_list[cls], p, sizeof(void *));
    } else {
        if (!a->cur || (size_t)(a->end - a->cur) < block) {
            size_t len;
            uint8_t *m = map(CHUNK_BYTES, &len);
            if (!m)
                return NULL;
            chunk *c = (chunk *)m;
            c->next = a->chunks;
            c->len = len;
            a->chunks = c;
            a->cur = m + BLOCK_ALIGN * ((sizeof(chunk) + BLOCK_ALIGN - 1) / BLOCK_ALIGN);
            a->end = m + len;
        }
        *(uint32_t *)a->cur = (uint32_t)cls;
        p = a->cur + BLOCK_HDR;
        a->cur += block;
    }
    atomic_fetch_add_explicit(&mem_in_use, block, memory_order_relaxed);
    return p;
}

void sim_arena_free(sim_arena *a, void *p)
{
    if (!p)
        return;
    uint8_t *h = (uint8_t *)p - BLOCK_HDR;
    uint32_t cls = *(uint32_t *)h;
    if (cls == 0) {
        free(h);
        return;
    }
    memcpy(p, &a->free_list[cls], sizeof(void *));
    a->free_list[cls] = p;
    atomic_fetch_sub_explicit(&mem_in_use, BLOCK_HDR + (size_t)cls * BLOCK_ALIGN,
                              memory_order_relaxed);
}
