/* model_shard — content-addressed shard files: one part of a data set.
 *
 * `murmur shard` splits a training set into S shard files, IID or
 * label-skewed (Dirichlet(alpha) class proportions per shard), deterministic
 * for a seed. Agents hold, replicate and train on shards; a shard is named
 * by its content address, the BLAKE2b-256 hash below, which is checked on
 * every load. docs/SHARDS.md has the same format with examples.
 *
 * File format, version 1. All integers little-endian; 72-byte header, then
 * the payload:
 *
 *   offset size field
 *        0    8 magic        "MRMSHARD" (4D 52 4D 53 48 41 52 44)
 *        8    2 version      1
 *       10    1 dtype        1 = uint8 features, 2 = float32 (IEEE-754 LE)
 *       11    1 reserved     0
 *       12    4 sample_count n, 1 <= n <= MODEL_SAMPLES_MAX
 *       16    4 dim          features per sample, 1 <= dim <= MODEL_DIM_MAX
 *       20    4 classes      labels are < classes <= MODEL_CLASSES_MAX
 *       24    4 shard_index  0 <= index < shard_count
 *       28    4 shard_count  S, the number of shards of the split
 *       32    8 payload_len  n * 2 + n * dim * sizeof(dtype)
 *       40   32 hash         BLAKE2b-256 (unkeyed) of bytes 8..23 of the
 *                            header (the 16-byte descriptor: version,
 *                            dtype, reserved, sample_count, dim, classes)
 *                            followed by the payload
 *       72    - payload      n labels (uint16 LE), then n*dim features,
 *                            sample-major (sample i's features contiguous)
 *
 * The file is exactly 72 + payload_len bytes. The hash is the shard's
 * content address: it covers every byte that determines the samples
 * (descriptor and payload) but not shard_index/shard_count, which only say
 * where the shard came from in its split (two shards holding the same
 * samples have the same address). Fashion-MNIST pixels stay uint8, so a
 * 1/10 shard of its training set is 72 + 6000 * 786 bytes (about 4.7 MB).
 *
 * Loading (from a path or from bytes in memory, for shards received from a
 * peer) checks in this order: size >= header (ETRUNC), magic (EMAGIC),
 * version (EVERSION), dtype, sizes within their MODEL_*_MAX and
 * index < count (ECORRUPT), payload_len against the descriptor (ECORRUPT)
 * and against the size (ETRUNC if short, ECORRUPT if long), the hash
 * (EHASH), every label < classes (ELABEL).
 */
#ifndef MODEL_SHARDFILE_H
#define MODEL_SHARDFILE_H

#include <stddef.h>
#include <stdint.h>

#include "model/data.h"
#include "model/model.h"
#include "model/rng.h"

#define MODEL_SHARD_MAGIC             "MRMSHARD"
#define MODEL_SHARD_VERSION           1u
#define MODEL_SHARD_HEADER_SIZE       72u
#define MODEL_SHARD_HASH_SIZE         32u
#define MODEL_SHARD_DESCRIPTOR_OFFSET 8u
#define MODEL_SHARD_DESCRIPTOR_SIZE   16u
#define MODEL_SHARD_HASH_OFFSET       40u
#define MODEL_SHARDS_MAX              65536u /* shards in one split */
_Static_assert(MODEL_SHARD_HASH_OFFSET + MODEL_SHARD_HASH_SIZE == MODEL_SHARD_HEADER_SIZE,
               "the hash closes the header");
_Static_assert(MODEL_SHARD_DESCRIPTOR_OFFSET + MODEL_SHARD_DESCRIPTOR_SIZE == 24u,
               "descriptor is bytes 8..23");

/* What a shard header says (after validation). */
typedef struct model_shard_info {
    uint32_t version;
    model_dtype dtype;
    uint32_t sample_count;
    uint32_t dim;
    uint32_t classes;
    uint32_t shard_index;
    uint32_t shard_count;
    uint64_t payload_len;
    uint8_t hash[MODEL_SHARD_HASH_SIZE]; /* the content address */
} model_shard_info;

/* Encoded size of a shard of n samples of d's shape. */
uint64_t model_shard_size(const model_data *d, uint32_t n);

/* Encode rows[0..n-1] of d (all of d when rows is NULL, n = d->count) as
 * shard `index` of `count` into out (out_len >= model_shard_size(d, n));
 * the hash is written into the header and into hash_out (may be NULL).
 * Errors: EINVAL (index >= count, n == 0, row out of range, buffer too
 * small). */
int model_shard_encode(const model_data *d, const uint32_t *rows, uint32_t n, uint32_t index,
                       uint32_t count, uint8_t *out, size_t out_len,
                       uint8_t hash_out[MODEL_SHARD_HASH_SIZE]);

/* Encode as above and write to path atomically (temp file + rename).
 * Errors: as model_shard_encode, plus EIO, ENOMEM. */
int model_shard_write(const char *path, const model_data *d, const uint32_t *rows, uint32_t n,
                      uint32_t index, uint32_t count, uint8_t hash_out[MODEL_SHARD_HASH_SIZE],
                      char *msg, size_t msg_len);

/* Compute the content address of the shard in bytes[0..len) (a whole
 * shard file) from its descriptor and payload, checking the header's
 * structure but NOT comparing with the stored hash (model_shard_verify does
 * that). Errors: ETRUNC, EMAGIC, EVERSION, ECORRUPT. */
int model_shard_hash(const uint8_t *bytes, size_t len, uint8_t out[MODEL_SHARD_HASH_SIZE]);

/* Parse and check a whole shard in memory (every check of the list above,
 * including the hash) without copying it. info may be NULL. Errors: as
 * listed above. */
int model_shard_verify(const uint8_t *bytes, size_t len, model_shard_info *info, char *msg,
                       size_t msg_len);

/* Verify then copy the shard in bytes[0..len) into a new data set.
 * `name` (may be NULL) is used in messages. Errors: as model_shard_verify,
 * plus ENOMEM. */
int model_shard_load_mem(model_data *out, model_shard_info *info, const uint8_t *bytes, size_t len,
                         const char *name, char *msg, size_t msg_len);

/* Read a shard file and load it as model_shard_load_mem. Errors: EIO, plus
 * those of model_shard_load_mem. */
int model_shard_load(model_data *out, model_shard_info *info, const char *path, char *msg,
                     size_t msg_len);

/* Split d's samples into `shards` parts: assign[i] = shard of sample i.
 * alpha <= 0: IID (a random permutation dealt into parts whose sizes
 * differ by at most one). alpha > 0: label skew; for each class, shard
 * proportions are drawn from Dirichlet(alpha, ..., alpha) (Gamma draws
 * from rng) and the class's shuffled samples are cut by them (Hsu et al.
 * 2019); smaller alpha means more skew. Redrawn (up to
 * MODEL_SHARD_SPLIT_TRIES times) until every shard has a sample.
 * Deterministic for the rng state. Errors: EINVAL (shards 0 or > count or
 * > MODEL_SHARDS_MAX), EEMPTY (no draw gave every shard a sample: use a
 * larger alpha or fewer shards), ENOMEM. */
#define MODEL_SHARD_SPLIT_TRIES 100u
int model_shard_split(const model_data *d, uint32_t shards, double alpha, model_rng *rng,
                      uint32_t *assign);

/* Lowercase hex of a hash into out (2*MODEL_SHARD_HASH_SIZE + 1 bytes). */
void model_shard_hash_hex(const uint8_t hash[MODEL_SHARD_HASH_SIZE],
                          char out[2 * MODEL_SHARD_HASH_SIZE + 1]);

#endif
