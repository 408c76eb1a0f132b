/* gossip/store — where an agent keeps its shard bytes (an interface).
 *
 * The replicator (gossip/shards.h) never touches files: it reads and writes
 * shards through this table of operations. The agent backs it with files
 * (one file per shard, named by the hex id, written to a temp name and
 * renamed on commit); the simulator and the tests use the in-memory store
 * below (gossip/store_mem.c).
 *
 * A shard is opaque bytes named by its 32-byte id. States: absent, writing
 * (after begin, before commit/abort), complete (after commit). Only complete
 * shards are visible to has/size/read; at most one write per id at a time.
 * The store does not verify content: the replicator verifies every byte
 * against the id before commit.
 *
 * Every operation returns 0 (GOSSIP_OK) or a gossip_err code:
 * GOSSIP_ENOTFOUND (no such complete / writing shard), GOSSIP_EINVAL (range
 * outside the shard, size above the store's bound, write already open),
 * GOSSIP_EFULL (no room), GOSSIP_ENOMEM. abort is infallible. Ranges are in
 * bytes; len may be 0.
 */
#ifndef GOSSIP_STORE_H
#define GOSSIP_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "gossip/env.h"

#define GOSSIP_STORE_ID_SIZE 32u

typedef struct gossip_store_ops {
    /* 1 if a complete shard with this id is held, else 0. */
    int (*has)(void *ctx, const uint8_t id[GOSSIP_STORE_ID_SIZE]);
    /* Size in bytes of a complete shard. */
    int (*size)(void *ctx, const uint8_t id[GOSSIP_STORE_ID_SIZE], uint64_t *size);
    /* Copy bytes [off, off+len) of a complete shard into buf. */
    int (*read)(void *ctx, const uint8_t id[GOSSIP_STORE_ID_SIZE], uint64_t off, void *buf,
                size_t len);
    /* Open a write of a shard of `size` bytes (replaces nothing: fails with
     * GOSSIP_EINVAL if the shard is complete or already being written). */
    int (*begin)(void *ctx, const uint8_t id[GOSSIP_STORE_ID_SIZE], uint64_t size);
    /* Write bytes [off, off+len) of an open write. */
    int (*write)(void *ctx, const uint8_t id[GOSSIP_STORE_ID_SIZE], uint64_t off, const void *buf,
                 size_t len);
    /* Make an open write complete and visible (atomically, for files). */
    int (*commit)(void *ctx, const uint8_t id[GOSSIP_STORE_ID_SIZE]);
    /* Discard an open write; no-op if none. */
    void (*abort)(void *ctx, const uint8_t id[GOSSIP_STORE_ID_SIZE]);
    /* Delete a complete shard. */
    int (*drop)(void *ctx, const uint8_t id[GOSSIP_STORE_ID_SIZE]);
    /* Optional (NULL = drop): take a complete shard whose bytes do not match
     * its id out of the store, keeping the bytes aside for inspection where
     * the store can (the file store renames it); afterwards has() is 0. */
    int (*quarantine)(void *ctx, const uint8_t id[GOSSIP_STORE_ID_SIZE]);
} gossip_store_ops;

typedef struct gossip_store {
    const gossip_store_ops *ops;
    void *ctx;
} gossip_store;

/* In-memory store (gossip/store_mem.c) for the simulator and the tests.
 * Holds at most shards_max shards (complete or writing) of at most
 * shard_bytes_max bytes each; memory comes from env. */
#define GOSSIP_STORE_MEM_SHARDS_MAX (1u << 20)

/* Create: *out->ops and *out->ctx set. Errors: GOSSIP_EINVAL (a bound is 0
 * or above its maximum), GOSSIP_ENOMEM (nothing left allocated). */
int gossip_store_mem_create(gossip_store *out, const gossip_env *env, uint32_t shards_max,
                            uint64_t shard_bytes_max);
/* Free every shard and the store; out->ctx may be NULL. */
void gossip_store_mem_destroy(gossip_store *store);
/* Complete shards held (for tests and census). */
uint32_t gossip_store_mem_count(const gossip_store *store);
/* Test hook: pointer to the bytes of a complete shard (NULL if absent), so a
 * test can corrupt data at rest. */
uint8_t *gossip_store_mem_bytes(const gossip_store *store, const uint8_t id[GOSSIP_STORE_ID_SIZE],
                                uint64_t *size);

#endif
