/* gossip/types — small types shared by every protocol object in the core.
 * See docs/ARCHITECTURE.md, "The sans-IO core contract". */
#ifndef GOSSIP_TYPES_H
#define GOSSIP_TYPES_H

#include <stddef.h>
#include <stdint.h>

#include "gossip/env.h"
#include "gossip/wire.h"

/* Longest peer address, including the terminating NUL. */
#define GOSSIP_ADDR_MAX 64u
/* Most members one view can hold. */
#define GOSSIP_MEMBERS_MAX 16384u

/* One frame for the caller to send. */
typedef struct gossip_send {
    uint64_t dest;         /* node id, or 0 when only the address is known (a seed) */
    const char *dest_addr; /* NUL-terminated, or NULL when dest is known */
    const uint8_t *frame;  /* header + payload, owned by the producing object */
    size_t len;
} gossip_send;

/* A membership view: epoch and sorted ids of live members (self included). */
typedef struct gossip_view {
    uint64_t epoch;
    uint32_t n;
    const uint64_t *ids; /* ascending, n entries, owned by the producer */
} gossip_view;

#endif
