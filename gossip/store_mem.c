/* In-memory gossip_store: a fixed table of entries, linear probing on the id.
 * The table is sized once at create (2 * shards_max slots, a power of two, so
 * probes stay short); shard bytes are allocated per shard at begin. Deleted
 * slots become tombstones so probe chains stay intact. */
#include <string.h>

#include "gossip/store.h"
#include "gossip/wire.h"

enum { SLOT_EMPTY = 0, SLOT_WRITING, SLOT_COMPLETE, SLOT_TOMB };

typedef struct mem_slot {
    uint8_t id[GOSSIP_STORE_ID_SIZE];
    uint8_t state;
    uint64_t size;
    uint8_t *data;
} mem_slot;

typedef struct mem_store {
    const gossip_env *env;
    mem_slot *slots;
    uint32_t mask; /* slots - 1 */
    uint32_t used; /* writing + complete */
    uint32_t complete;
    uint32_t shards_max;
    uint64_t shard_bytes_max;
} mem_store;

static uint32_t slot_hash(const uint8_t *id)
{
    return gossip_get_u32(id) ^ gossip_get_u32(id + 4);
}

/* Slot holding id (writing or complete), or NULL. */
static mem_slot *find(mem_store *m, const uint8_t *id)
{
    for (uint32_t i = slot_hash(id) & m->mask, probes = 0; probes <= m->mask;
         i = (i + 1) & m->mask, probes++) {
        mem_slot *s = &m->slots[i];
        if (s->state == SLOT_EMPTY)
            return NULL;
        if ((s->state == SLOT_WRITING || s->state == SLOT_COMPLETE) &&
            memcmp(s->id, id, GOSSIP_STORE_ID_SIZE) == 0)
            return s;
    }
    return NULL;
}

static void release(mem_store *m, mem_slot *s)
{
    if (s->state == SLOT_COMPLETE)
        m->complete--;
    gossip_free(m->env, s->data);
    s->data = NULL;
    s->state = SLOT_TOMB;
    m->used--;
}

static int m_has(void *ctx, const uint8_t *id)
{
    mem_slot *s = find(ctx, id);
    return s && s->state == SLOT_COMPLETE;
}

static int m_size(void *ctx, const uint8_t *id, uint64_t *size)
{
    mem_slot *s = find(ctx, id);
    if (!s || s->state != SLOT_COMPLETE)
        return GOSSIP_ENOTFOUND;
    *size = s->size;
    return GOSSIP_OK;
}

static int m_read(void *ctx, const uint8_t *id, uint64_t off, void *buf, size_t len)
{
    mem_slot *s = find(ctx, id);
    if (!s || s->state != SLOT_COMPLETE)
        return GOSSIP_ENOTFOUND;
    if (off > s->size || len > s->size - off)
        return GOSSIP_EINVAL;
    if (len)
        memcpy(buf, s->data + off, len);
    return GOSSIP_OK;
}

static int m_begin(void *ctx, const uint8_t *id, uint64_t size)
{
    mem_store *m = ctx;
    if (size > m->shard_bytes_max || find(m, id))
        return GOSSIP_EINVAL;
    if (m->used >= m->shards_max)
        return GOSSIP_EFULL;
    uint8_t *data = gossip_alloc(m->env, (size_t)(size ? size : 1));
    if (!data)
        return GOSSIP_ENOMEM;
    uint32_t i = slot_hash(id) & m->mask;
    while (m->slots[i].state == SLOT_WRITING || m->slots[i].state == SLOT_COMPLETE)
        i = (i + 1) & m->mask; /* terminates: used < shards_max <= slots / 2 */
    mem_slot *s = &m->slots[i];
    memcpy(s->id, id, GOSSIP_STORE_ID_SIZE);
    s->state = SLOT_WRITING;
    s->size = size;
    s->data = data;
    m->used++;
    return GOSSIP_OK;
}

static int m_write(void *ctx, const uint8_t *id, uint64_t off, const void *buf, size_t len)
{
    mem_slot *s = find(ctx, id);
    if (!s || s->state != SLOT_WRITING)
        return GOSSIP_ENOTFOUND;
    if (off > s->size || len > s->size - off)
        return GOSSIP_EINVAL;
    if (len)
        memcpy(s->data + off, buf, len);
    return GOSSIP_OK;
}

static int m_commit(void *ctx, const uint8_t *id)
{
    mem_store *m = ctx;
    mem_slot *s = find(m, id);
    if (!s || s->state != SLOT_WRITING)
        return GOSSIP_ENOTFOUND;
    s->state = SLOT_COMPLETE;
    m->complete++;
    return GOSSIP_OK;
}

static void m_abort(void *ctx, const uint8_t *id)
{
    mem_store *m = ctx;
    mem_slot *s = find(m, id);
    if (s && s->state == SLOT_WRITING)
        release(m, s);
}

static int m_drop(void *ctx, const uint8_t *id)
{
    mem_store *m = ctx;
    mem_slot *s = find(m, id);
    if (!s || s->state != SLOT_COMPLETE)
        return GOSSIP_ENOTFOUND;
    release(m, s);
    return GOSSIP_OK;
}

/* quarantine NULL: a bad shard is simply dropped (nothing to inspect). */
static const gossip_store_ops mem_ops = {m_has,    m_size,  m_read, m_begin, m_write,
                                         m_commit, m_abort, m_drop, NULL};

int gossip_store_mem_create(gossip_store *out, const gossip_env *env, uint32_t shards_max,
                            uint64_t shard_bytes_max)
{
    out->ops = NULL;
    out->ctx = NULL;
    if (shards_max == 0 || shards_max > GOSSIP_STORE_MEM_SHARDS_MAX || shard_bytes_max == 0 ||
        shard_bytes_max > SIZE_MAX / 2)
        return GOSSIP_EINVAL;
    uint32_t slots = 1;
    while (slots < 2 * shards_max)
        slots <<= 1;
    mem_store *m = gossip_calloc(env, 1, sizeof *m);
    if (!m)
        return GOSSIP_ENOMEM;
    m->slots = gossip_calloc(env, slots, sizeof *m->slots);
    if (!m->slots) {
        gossip_free(env, m);
        return GOSSIP_ENOMEM;
    }
    m->env = env;
    m->mask = slots - 1;
    m->shards_max = shards_max;
    m->shard_bytes_max = shard_bytes_max;
    out->ops = &mem_ops;
    out->ctx = m;
    return GOSSIP_OK;
}

void gossip_store_mem_destroy(gossip_store *store)
{
    mem_store *m = store->ctx;
    if (!m)
        return;
    for (uint32_t i = 0; i <= m->mask; i++)
        gossip_free(m->env, m->slots[i].data);
    gossip_free(m->env, m->slots);
    gossip_free(m->env, m);
    store->ctx = NULL;
}

uint32_t gossip_store_mem_count(const gossip_store *store)
{
    const mem_store *m = store->ctx;
    return m->complete;
}

uint8_t *gossip_store_mem_bytes(const gossip_store *store, const uint8_t id[GOSSIP_STORE_ID_SIZE],
                                uint64_t *size)
{
    mem_slot *s = find(store->ctx, id);
    if (!s || s->state != SLOT_COMPLETE)
        return NULL;
    if (size)
        *size = s->size;
    return s->data;
}
