/* model_data — labelled data sets in memory, their loaders and normalisation.
 *
 * A data set is `count` samples of `dim` features with one label each in
 * [0, classes). Features are stored compactly in the file's own type
 * (uint8 for MNIST-style images, float32 for CSV) and are converted to
 * normalised float32 only when a mini-batch is gathered
 * (model_data_gather), so Fashion-MNIST costs 47 MB, not 188 MB.
 * Row-major: sample i's features are x[i*dim .. i*dim+dim-1].
 *
 * Loaders:
 * - IDX (the MNIST format), plain or gzip (zlib detects which). Images:
 *   magic 0x00000803 (uint8, 3 dims: count, rows, cols); labels: magic
 *   0x00000801 (uint8, 1 dim). All integers big-endian.
 * - Fashion-MNIST: the four IDX files in a directory, by default
 *   MODEL_FASHION_DIR (Debian package dataset-fashion-mnist).
 * - CSV: one sample per line, "label,f1,f2,...,fdim"; the label is a
 *   non-negative integer; an optional first header line (its first field is
 *   not a number) is skipped; blank lines are skipped; every line must have
 *   the same number of fields.
 * Every loader rejects truncated, corrupt or inconsistent input with a
 * model_err and a message naming the file and the problem.
 *
 * Normalisation (model_norm): an affine map per feature,
 * x' = x * scale[j] + offset[j], fitted once (on training data) and applied
 * at gather time. Modes: NONE; UNIT (uint8 -> x/255, data-independent, so
 * every agent applies the same map without seeing the others' data);
 * GLOBAL (one mean/std over all features, fitted); FEATURE (per-feature
 * z-score, fitted; constant features get scale 1).
 *
 * Ownership: a model_data owns its arrays; model_data_free releases them
 * and zeroes the struct. A zeroed model_data is a valid empty set.
 */
#ifndef MODEL_DATA_H
#define MODEL_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"
#include "model/rng.h"

#define MODEL_FASHION_DIR "/usr/share/datasets/fashion-mnist"

typedef enum model_dtype {
    MODEL_DTYPE_U8 = 1,  /* one byte per feature */
    MODEL_DTYPE_F32 = 2, /* IEEE-754 binary32 */
} model_dtype;

typedef struct model_data {
    uint32_t count;   /* samples */
    uint32_t dim;     /* features per sample */
    uint32_t classes; /* labels are in [0, classes) */
    model_dtype dtype;
    uint8_t *x_u8;    /* count*dim when dtype == U8, else NULL */
    float *x_f32;     /* count*dim when dtype == F32, else NULL */
    uint16_t *labels; /* count */
} model_data;

/* Allocate an uninitialised set. Errors: EINVAL (dim/classes 0 or dtype
 * unknown), ETOOBIG (above a MODEL_*_MAX), ENOMEM. */
int model_data_alloc(model_data *d, uint32_t count, uint32_t dim, uint32_t classes,
                     model_dtype dtype);
void model_data_free(model_data *d);

/* Bytes per feature of a dtype (1 or 4), 0 if unknown. */
size_t model_dtype_size(model_dtype dtype);

/* Copy rows[0..n-1] of src into a new set *out (same dim/classes/dtype).
 * Errors: EINVAL (row out of range), ENOMEM. */
int model_data_subset(model_data *out, const model_data *src, const uint32_t *rows, uint32_t n);

/* Concatenate n sets with the same dim and dtype into *out; classes is the
 * maximum. Errors: EEMPTY (n == 0), EDIM (dim or dtype differ; msg says
 * which part), ETOOBIG, ENOMEM. */
int model_data_concat(model_data *out, const model_data *parts, uint32_t n, char *msg,
                      size_t msg_len);

/* Load an IDX image file and its label file. classes == 0: infer as the
 * largest label + 1; otherwise every label must be < classes. Errors: EIO,
 * ETRUNC, ECORRUPT, EMAGIC, EMISMATCH (counts differ), ELABEL, ETOOBIG,
 * EEMPTY, ENOMEM. */
int model_idx_load(model_data *out, const char *images_path, const char *labels_path,
                   uint32_t classes, char *msg, size_t msg_len);

/* Load the Fashion-MNIST (or MNIST) training and test sets from dir (NULL:
 * MODEL_FASHION_DIR): train-images-idx3-ubyte(.gz), train-labels-idx1-ubyte(.gz),
 * t10k-images-idx3-ubyte(.gz), t10k-labels-idx1-ubyte(.gz). The test set
 * must have the train set's dim and classes. Errors: as model_idx_load,
 * plus EDIM. */
int model_fashion_load(model_data *train, model_data *test, const char *dir, char *msg,
                       size_t msg_len);

/* Load a CSV file (format above) as float32. classes == 0: infer as the
 * largest label + 1. Errors: EIO, ECSV (a field is not a number; msg gives
 * line and column), EDIM (a line with a different field count), ELABEL
 * (negative, fractional or >= classes label), ETOOBIG, EEMPTY, ENOMEM. */
int model_csv_load(model_data *out, const char *path, uint32_t classes, char *msg, size_t msg_len);

/* ---- normalisation ---- */

typedef enum model_norm_mode {
    MODEL_NORM_NONE = 0,
    MODEL_NORM_UNIT,    /* x / 255 for uint8 data; identity for float32 */
    MODEL_NORM_GLOBAL,  /* (x - mean) / std over all features */
    MODEL_NORM_FEATURE, /* (x - mean_j) / std_j per feature */
} model_norm_mode;

typedef struct model_norm {
    uint32_t dim;
    model_norm_mode mode;
    float *scale;  /* dim */
    float *offset; /* dim */
} model_norm;

/* Parse "none" | "unit" | "global" | "feature". Errors: EINVAL. */
int model_norm_parse(const char *name, model_norm_mode *out);
const char *model_norm_name(model_norm_mode mode);

/* Fit a normalisation of `mode` on d (mean/std in double precision).
 * Errors: EINVAL, EEMPTY (fitted modes need samples), ENOMEM. */
int model_norm_fit(model_norm *n, const model_data *d, model_norm_mode mode);
void model_norm_free(model_norm *n);

/* Gather rows[0..n-1] of d into x_out (n*dim floats, normalised by norm,
 * which may be NULL for none) and y_out (n labels, may be NULL). No
 * allocation: this is the per-step path. norm->dim must equal d->dim. */
void model_data_gather(const model_data *d, const model_norm *norm, const uint32_t *rows,
                       uint32_t n, float *x_out, uint16_t *y_out);

/* Ask the CPU to start loading rows[0..n-1] of d (features and labels)
 * into its caches, so that a later model_data_gather of the same rows does
 * not wait for memory: a training loop calls it with the next batch's rows
 * before the step that trains on this one. Rows are drawn at random from a
 * data set as large as the last-level cache or larger (Fashion-MNIST: 47
 * MB), so without it many rows of a batch wait for memory on the step's
 * critical path. A hint only: no result changes, no feature or label is
 * read, and rows must be in range as for model_data_gather. */
void model_data_prefetch(const model_data *d, const uint32_t *rows, uint32_t n);

/* Fill order[0..count-1] with a permutation of 0..count-1 drawn from rng
 * (deterministic for the rng's state): the sample order of one epoch. */
void model_data_shuffle(uint32_t *order, uint32_t count, model_rng *rng);

#endif
