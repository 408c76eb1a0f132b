/* model — errors, limits and diagnostics shared by every part of model/.
 *
 * model/ is the maths of murmur: a network whose parameters are ONE flat
 * float32 vector (model/net.h), SGD with momentum and learning-rate
 * schedules (model/optim.h), data sets and their normalisation
 * (model/data.h), content-addressed shard files (model/shardfile.h) and the
 * caller-owned RNG (model/rng.h). It is part of the sans-IO core: no clock,
 * socket, thread, sleep or global RNG. Unlike gossip/ it allocates with
 * malloc, but only when an object is created or a file is loaded, never on
 * a per-step path.
 *
 * Errors: every function that can fail returns 0 (MODEL_OK) or a
 * model_err. Functions that read files or bytes also take a message buffer
 * (`char *msg, size_t msg_len`; msg may be NULL) into which they write one
 * line of context naming the file and the problem, e.g.
 *   "t10k-labels-idx1-ubyte.gz: label 12 at index 40 >= classes 10".
 * Bad input is an error code, never an abort.
 */
#ifndef MODEL_MODEL_H
#define MODEL_MODEL_H

#include <stddef.h>
#include <stdint.h>

typedef enum model_err {
    MODEL_OK = 0,
    MODEL_ENOMEM,    /* out of memory */
    MODEL_EINVAL,    /* bad argument from the caller (a bug, not bad data) */
    MODEL_ESPEC,     /* model spec string not understood */
    MODEL_EIO,       /* file could not be opened, read or written */
    MODEL_ETRUNC,    /* file or buffer ends before the data it announces */
    MODEL_ECORRUPT,  /* compressed stream corrupt (zlib error) */
    MODEL_EMAGIC,    /* wrong magic number: not the expected file type */
    MODEL_EVERSION,  /* shard file version not supported */
    MODEL_EDIM,      /* dimension mismatch (between files, rows or with the net) */
    MODEL_ELABEL,    /* label out of range */
    MODEL_ECSV,      /* CSV field that is not a number */
    MODEL_EHASH,     /* content hash does not match the payload */
    MODEL_ETOOBIG,   /* a size above its named maximum */
    MODEL_EMISMATCH, /* images and labels disagree on the sample count, etc. */
    MODEL_EEMPTY,    /* no samples */
    MODEL_ERR_COUNT
} model_err;

/* A short English description of `err` ("unknown error" if out of range). */
const char *model_strerror(int err);

/* Recommended size of a message buffer. */
#define MODEL_MSG_MAX 256

/* Limits (named maxima, checked before allocating). */
#define MODEL_CLASSES_MAX    4096u        /* labels are uint16_t */
#define MODEL_DIM_MAX        (1u << 20)   /* features per sample */
#define MODEL_SAMPLES_MAX    (1u << 26)   /* samples per data set */
#define MODEL_DATA_BYTES_MAX (1ull << 34) /* 16 GiB of features per data set */
#define MODEL_LAYERS_MAX     16u          /* dense layers in a net (hidden + output) */
#define MODEL_WIDTH_MAX      65536u       /* units in a hidden layer */
#define MODEL_SPEC_MAX       256u         /* characters in a spec string */
_Static_assert(MODEL_CLASSES_MAX <= 65536u, "labels are stored as uint16_t");
_Static_assert((uint64_t)MODEL_SAMPLES_MAX * 4u < UINT32_MAX * 2ull, "sample indices are uint32_t");

/* printf-style into msg (NULL-safe, always NUL-terminated). Internal helper
 * shared by the .c files of model/. */
void model_msgf(char *msg, size_t msg_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
