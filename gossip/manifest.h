/* gossip/manifest — what every agent of one cluster must agree on.
 *
 * Purpose: an agent whose model, data or mixing set-up differs from the
 * cluster's cannot take part (its mixing frames do not decode, or decode
 * into nonsense), so it must not be admitted: admitted, it would take
 * primary shards it never trains and stall its neighbours' mixing. Every
 * full-state membership message (JOIN, SYNC, SYNC_REPLY) carries the
 * sender's manifest; gossip/swim refuses a sender whose manifest differs
 * (docs/MEMBERSHIP.md, "Admission").
 *
 * Fields: the protocol version, the model (spec and parameter count), the
 * init seed (every agent starts from the same initial model), and the
 * mixing algorithm, bits and block (the codec's frame layout). An all-zero
 * manifest (the simulator's) equals only another all-zero one.
 *
 * Wire form (big-endian, inside the membership payload):
 *   u16 length of what follows (GOSSIP_MANIFEST_FIXED + spec_len)
 *   u16 protocol, u64 params, u64 init_seed, u8 algo, u8 bits, u32 block,
 *   u8 spec_len, spec bytes (no NUL)
 * A longer length is accepted and the extra bytes ignored (fields appended
 * by a later version); a shorter one is malformed.
 *
 * Pure functions; no allocation.
 */
#ifndef GOSSIP_MANIFEST_H
#define GOSSIP_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "gossip/wire.h"

/* The protocol generation carried in the manifest: bump it with any
 * incompatible change of a payload format. */
#define GOSSIP_MANIFEST_PROTOCOL 1u
/* Longest model spec, including its NUL (matches the agent's spec limit). */
#define GOSSIP_MANIFEST_SPEC_MAX 128u
/* Fixed fields after the length: protocol 2, params 8, seed 8, algo 1,
 * bits 1, block 4, spec_len 1. */
#define GOSSIP_MANIFEST_FIXED 25u
/* Largest encoding: length + fixed + spec. */
#define GOSSIP_MANIFEST_WIRE_MAX (2u + GOSSIP_MANIFEST_FIXED + GOSSIP_MANIFEST_SPEC_MAX - 1u)
/* Longest description of a difference (gossip_manifest_diff), with NUL. */
#define GOSSIP_MANIFEST_DIFF_MAX 320u

_Static_assert(GOSSIP_MANIFEST_SPEC_MAX - 1u <= 255u, "spec_len is a u8 on the wire");

typedef struct gossip_manifest {
    uint32_t protocol;                   /* GOSSIP_MANIFEST_PROTOCOL (0 in an all-zero manifest) */
    char spec[GOSSIP_MANIFEST_SPEC_MAX]; /* model spec, NUL-terminated */
    uint64_t params;                     /* parameter count */
    uint64_t init_seed;
    uint8_t algo; /* gossip_mix_algo */
    uint8_t bits;
    uint32_t block;
} gossip_manifest;

/* Encoded size of m (spec must be NUL-terminated within its array). */
size_t gossip_manifest_size(const gossip_manifest *m);
/* Append m to w (w->err set if it does not fit). */
void gossip_manifest_write(gossip_writer *w, const gossip_manifest *m);
/* Read one manifest from r into *out. Returns GOSSIP_OK, GOSSIP_ETRUNC or
 * GOSSIP_EMALFORMED (length below the fixed part, spec_len past the
 * length or above the maximum, a NUL inside the spec). */
int gossip_manifest_read(gossip_reader *r, gossip_manifest *out);

/* 1 if a and b agree on every field, else 0. */
int gossip_manifest_equal(const gossip_manifest *a, const gossip_manifest *b);
/* One line naming the first field that differs and both values
 * ("model.spec mlp:64 here, mlp:128 at the peer"); "" when equal.
 * Returns the length written (truncated to cap - 1). */
size_t gossip_manifest_diff(const gossip_manifest *here, const gossip_manifest *peer, char *out,
                            size_t cap);

#endif
