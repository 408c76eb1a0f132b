/* agent/checkpoint — the model on disk, written atomically, loaded verified.
 *
 * File format, version 1 (all integers and floats little-endian):
 *
 *   offset       size     field
 *   0            8        magic "MRMRCKPT"
 *   8            4        version (AGENT_CHECKPOINT_VERSION)
 *   12           4        flags: bit 0 = a momentum vector follows the parameters;
 *                         other bits must be 0
 *   16           4        spec_len: bytes of the model spec, 1..AGENT_CHECKPOINT_SPEC_MAX-1
 *   20           4        dim: parameters, 1..AGENT_CHECKPOINT_DIM_MAX
 *   24           8        step   (local SGD steps done)
 *   32           8        round  (mixing rounds done)
 *   40           8        epoch  (membership view epoch when written)
 *   48           spec_len model spec, e.g. "mlp:256,128" (no NUL)
 *   ..           4*dim    parameters, IEEE-754 binary32, all finite
 *   ..           4*dim    momentum buffer (only when flags bit 0), all finite
 *   size-32      32       BLAKE2b-256 (libsodium crypto_generichash) of every byte before it
 *
 * The file size is exactly determined by spec_len, dim and flags; any other
 * size is rejected (truncated or trailing bytes).
 *
 * Atomicity: save writes a temp file "PATH.tmp.XXXXXX" in the same
 * directory, fsyncs it, renames it over PATH and fsyncs the directory. A
 * crash at any point leaves either the old checkpoint or the new one at PATH,
 * never a mix; at worst a stray temp file, which agent_checkpoint_remove_stale
 * deletes at start-up and which load never looks at.
 *
 * Loading reads and checks everything (size, magic, version, flags, lengths,
 * checksum, finite values, then the expected spec and dim) into private
 * buffers and copies into the caller's only when all checks pass: on any
 * error the caller's parameters, momentum and metadata are untouched.
 *
 * Threads: no shared state; the caller serialises saves to one path.
 * Ownership: the caller owns every buffer passed in.
 */
#ifndef AGENT_CHECKPOINT_H
#define AGENT_CHECKPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AGENT_CHECKPOINT_MAGIC       "MRMRCKPT"
#define AGENT_CHECKPOINT_VERSION     1u
#define AGENT_CHECKPOINT_HEADER_SIZE 48u
#define AGENT_CHECKPOINT_HASH_SIZE   32u
/* Longest model spec including a NUL (matches AGENT_CONFIG_SPEC_MAX). */
#define AGENT_CHECKPOINT_SPEC_MAX 128u
/* Most parameters: 2^28 float32 = 1 GiB, 2 GiB with momentum; far above
 * what one agent trains (the wire carries at most 16 Mi parameters). */
#define AGENT_CHECKPOINT_DIM_MAX (1u << 28)
/* Longest path of a checkpoint, including the NUL. */
#define AGENT_CHECKPOINT_PATH_MAX      1024u
#define AGENT_CHECKPOINT_FLAG_MOMENTUM 1u

_Static_assert(sizeof AGENT_CHECKPOINT_MAGIC - 1 == 8, "the magic is 8 bytes");

typedef enum agent_checkpoint_err {
    AGENT_CHECKPOINT_OK = 0,
    AGENT_CHECKPOINT_EIO,        /* open, read, write, fsync or rename failed */
    AGENT_CHECKPOINT_ENOENT,     /* no checkpoint at this path */
    AGENT_CHECKPOINT_ETRUNC,     /* the file is shorter than its header says */
    AGENT_CHECKPOINT_EMAGIC,     /* not a murmur checkpoint */
    AGENT_CHECKPOINT_EVERSION,   /* a version this build cannot read */
    AGENT_CHECKPOINT_EMALFORMED, /* bad lengths, unknown flags or trailing bytes */
    AGENT_CHECKPOINT_ECHECKSUM,  /* contents do not match the checksum */
    AGENT_CHECKPOINT_ENONFINITE, /* a NaN or infinity among the values */
    AGENT_CHECKPOINT_ESPEC,      /* written for a different model spec */
    AGENT_CHECKPOINT_EDIM,       /* written for a different parameter count */
    AGENT_CHECKPOINT_ENOMEM,     /* out of memory */
    AGENT_CHECKPOINT_EINVAL,     /* bad argument from the caller */
    AGENT_CHECKPOINT_ERR_COUNT
} agent_checkpoint_err;

const char *agent_checkpoint_strerror(int err);

/* What to save. params (and momentum, when not NULL) hold dim floats. */
typedef struct agent_checkpoint {
    const char *spec;
    uint32_t dim;
    uint64_t step, round, epoch;
    const float *params;
    const float *momentum; /* NULL = no optimizer state */
} agent_checkpoint;

/* What a checkpoint holds besides the vectors. */
typedef struct agent_checkpoint_meta {
    char spec[AGENT_CHECKPOINT_SPEC_MAX];
    uint32_t dim;
    uint64_t step, round, epoch;
    bool has_momentum;
} agent_checkpoint_meta;

/* Save atomically (write_temp then commit). On error PATH is unchanged and
 * the temp file removed. Errors: EINVAL (NULL, empty or too long spec, dim 0
 * or above the maximum, path too long), ENONFINITE, EIO. err (may be NULL)
 * gets a message naming the path and the failing call. */
int agent_checkpoint_save(const char *path, const agent_checkpoint *ck, char *err, size_t errlen);

/* The two halves of save, exposed so tests can stop between them (a crash
 * after the temp file is written, before the rename). write_temp writes and
 * fsyncs "PATH.tmp.XXXXXX" and puts its name in tmp_path. */
int agent_checkpoint_write_temp(const char *path, const agent_checkpoint *ck, char *tmp_path,
                                size_t tmp_cap, char *err, size_t errlen);
/* rename(tmp_path, path) and fsync the directory. Errors: EIO. */
int agent_checkpoint_commit(const char *tmp_path, const char *path, char *err, size_t errlen);

/* Load and verify. want_spec (NULL = any) and want_dim (0 = any, but then
 * params must hold meta->dim floats: use agent_checkpoint_read_meta first)
 * must match the file. params gets dim floats; momentum (may be NULL) gets
 * dim floats when the file has them (meta->has_momentum), else is left
 * alone. meta (may be NULL) gets the header. Nothing is written on error.
 * Errors: ENOENT, EIO, ETRUNC, EMAGIC, EVERSION, EMALFORMED, ECHECKSUM,
 * ENONFINITE, ESPEC, EDIM, ENOMEM, EINVAL. */
int agent_checkpoint_load(const char *path, const char *want_spec, uint32_t want_dim,
                          agent_checkpoint_meta *meta, float *params, float *momentum, char *err,
                          size_t errlen);

/* Read and check the header and the file size only (no checksum): cheap,
 * for "is my checkpoint recent enough to resume from?". Errors as load,
 * except ECHECKSUM, ENONFINITE, ESPEC and EDIM. */
int agent_checkpoint_read_meta(const char *path, agent_checkpoint_meta *meta, char *err,
                               size_t errlen);

/* Longest suffix move_aside adds: ".unusable-YYYYmmddTHHMMSSZ-NN". */
#define AGENT_CHECKPOINT_ASIDE_SUFFIX_MAX 32u

/* Move a checkpoint the agent cannot use out of the way, so the next save
 * cannot overwrite it (the user may still want it: another model, a typo
 * in --model, a damaged disk): rename PATH to
 * "PATH.unusable-YYYYmmddTHHMMSSZ" (UTC of `when`; "-1", "-2", ... appended
 * when that name exists; never replaces a file). The new path goes to
 * moved (cap bytes). Errors: ENOENT (no file at PATH), EINVAL (path too
 * long), EIO (rename failed, or 100 names taken); err names the paths. */
int agent_checkpoint_move_aside(const char *path, int64_t when, char *moved, size_t cap, char *err,
                                size_t errlen);

/* Delete "PATH.tmp.*" files left by a crash during save. *removed (may be
 * NULL) gets how many. Errors: EIO (the directory cannot be read). */
int agent_checkpoint_remove_stale(const char *path, unsigned *removed);

#endif
