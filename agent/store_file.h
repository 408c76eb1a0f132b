/* agent/store_file — gossip_store (gossip/store.h) over files in a directory.
 *
 * Layout: one file per complete shard, DIR/<64 hex digits of the id>.msh;
 * a shard being written lives in DIR/<hex>.msh.part until commit, which
 * fsyncs it, renames it over the final name and fsyncs the directory, so a
 * crash leaves either no shard or the whole shard, never half of one. Stray
 * .part files from a crash are deleted by agent_store_file_open. Other files
 * in the directory are ignored (an operator may keep `murmur shard` output
 * or a catalog there).
 *
 * The store does not verify content (the contract of gossip/store.h): the
 * replicator verifies every byte it writes against the id, and the agent
 * verifies every shard it trains on when it loads it (model_shard_load), so
 * a file damaged at rest or copied in by hand under the wrong name is caught
 * and dropped there.
 *
 * Threads: the operations (the gossip_store table) are for one thread, the
 * agent's event loop. agent_store_file_path is pure and may be called from
 * any thread (the training thread loads shards through it); a shard dropped
 * while the trainer reads it stays readable through the trainer's open file.
 *
 * Limits: at most AGENT_STORE_FILE_WRITES_MAX writes open at once (the
 * replicator has at most GOSSIP_SHARDS_FETCH_MAX fetches in flight), shards
 * of at most shard_bytes_max bytes.
 */
#ifndef AGENT_STORE_FILE_H
#define AGENT_STORE_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "gossip/shards.h"
#include "gossip/store.h"

/* Open writes at once: twice the replicator's fetch maximum, so a fetch that
 * is aborted and restarted elsewhere never waits for a slot. */
#define AGENT_STORE_FILE_WRITES_MAX (2u * GOSSIP_SHARDS_FETCH_MAX)
/* Longest directory name, including the NUL; the file name adds 74 bytes. */
#define AGENT_STORE_FILE_DIR_MAX  1024u
#define AGENT_STORE_FILE_NAME     (2u * GOSSIP_STORE_ID_SIZE + sizeof ".msh.part")
#define AGENT_STORE_FILE_PATH_MAX (AGENT_STORE_FILE_DIR_MAX + AGENT_STORE_FILE_NAME + 1u)
#define AGENT_STORE_FILE_SUFFIX   ".msh"

_Static_assert(AGENT_STORE_FILE_WRITES_MAX >= GOSSIP_SHARDS_FETCH_MAX,
               "every fetch of the replicator can hold a write");

/* Open (creating the directory if missing, one level) a store over dir.
 * out->ops and out->ctx are set. Stray DIR/<hex>.msh.part files are removed.
 * Errors (err gets a sentence naming the directory): GOSSIP_EINVAL (dir
 * empty or too long, shard_bytes_max 0), GOSSIP_ENOTFOUND (the directory
 * cannot be created or read), GOSSIP_ENOMEM. */
int agent_store_file_open(gossip_store *out, const char *dir, uint64_t shard_bytes_max, char *err,
                          size_t errlen);
/* Abort open writes and free; out->ctx may be NULL. */
void agent_store_file_close(gossip_store *store);

/* Path of the complete shard with this id (whether it exists or not) for a
 * store over dir. Returns 0, or GOSSIP_ESPACE if cap is too small. Pure. */
int agent_store_file_path(const char *dir, const uint8_t id[GOSSIP_STORE_ID_SIZE], char *out,
                          size_t cap);
/* Complete shards in the directory (a directory scan; for tests, status). */
uint32_t agent_store_file_count(const gossip_store *store);

#endif
