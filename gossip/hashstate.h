/* gossip/hashstate — a BLAKE2b state inside a heap object.
 *
 * libsodium declares crypto_generichash_state 64-byte aligned, but the
 * env's allocator promises only malloc's 16 (glibc, the simulator's arena),
 * so a state embedded in an allocated struct may be misaligned (undefined
 * behaviour; UBSan reports it). A gossip_hash_slot holds room for one state
 * plus the slack to align it; gossip_hash_state returns the aligned state.
 * The slot must not be copied or moved while a hash is in progress (the
 * offset of the state depends on the slot's address). */
#ifndef GOSSIP_HASHSTATE_H
#define GOSSIP_HASHSTATE_H

#include <sodium.h>
#include <stdint.h>

typedef struct gossip_hash_slot {
    unsigned char b[sizeof(crypto_generichash_state) + 63];
} gossip_hash_slot;

static inline crypto_generichash_state *gossip_hash_state(gossip_hash_slot *s)
{
    return (crypto_generichash_state *)(((uintptr_t)s->b + 63) & ~(uintptr_t)63);
}

#endif
