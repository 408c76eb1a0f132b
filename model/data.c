#include "model/data.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "common/simd.h"

size_t model_dtype_size(model_dtype dtype)
{
    switch (dtype) {
    case MODEL_DTYPE_U8:
        return 1;
    case MODEL_DTYPE_F32:
        return 4;
    }
    return 0;
}

int model_data_alloc(model_data *d, uint32_t count, uint32_t dim, uint32_t classes,
                     model_dtype dtype)
{
    memset(d, 0, sizeof *d);
    size_t esize = model_dtype_size(dtype);
    if (!dim || !classes || !esize)
        return MODEL_EINVAL;
    if (count > MODEL_SAMPLES_MAX || dim > MODEL_DIM_MAX || classes > MODEL_CLASSES_MAX ||
        (uint64_t)count * dim * esize > MODEL_DATA_BYTES_MAX)
        return MODEL_ETOOBIG;
    size_t n = (size_t)count * dim;
    d->count = count;
    d->dim = dim;
    d->classes = classes;
    d->dtype = dtype;
    d->labels = malloc(count ? count * sizeof *d->labels : 1);
    if (dtype == MODEL_DTYPE_U8)
        d->x_u8 = malloc(n ? n : 1);
    else
        d->x_f32 = malloc(n ? n * sizeof(float) : 1);
    if (!d->labels || (!d->x_u8 && !d->x_f32)) {
        model_data_free(d);
        return MODEL_ENOMEM;
    }
    return MODEL_OK;
}

void model_data_free(model_data *d)
{
    if (!d)
        return;
    free(d->x_u8);
    free(d->x_f32);
    free(d->labels);
    memset(d, 0, sizeof *d);
}

static const uint8_t *row_bytes(const model_data *d, uint32_t i)
{
    size_t es = model_dtype_size(d->dtype);
    const uint8_t *base = d->dtype == MODEL_DTYPE_U8 ? d->x_u8 : (const uint8_t *)d->x_f32;
    return base + (size_t)i * d->dim * es;
}

int model_data_subset(model_data *out, const model_data *src, const uint32_t *rows, uint32_t n)
{
    for (uint32_t k = 0; k < n; k++)
        if (rows[k] >= src->count)
            return MODEL_EINVAL;
    int rc = model_data_alloc(out, n, src->dim, src->classes, src->dtype);
    if (rc)
        return rc;
    size_t rb = (size_t)src->dim * model_dtype_size(src->dtype);
    uint8_t *dst = src->dtype == MODEL_DTYPE_U8 ? out->x_u8 : (uint8_t *)out->x_f32;
    for (uint32_t k = 0; k < n; k++) {
        memcpy(dst + (size_t)k * rb, row_bytes(src, rows[k]), rb);
        out->labels[k] = src->labels[rows[k]];
    }
    return MODEL_OK;
}

int model_data_concat(model_data *out, const model_data *parts, uint32_t n, char *msg,
                      size_t msg_len)
{
    memset(out, 0, sizeof *out);
    if (n == 0)
        return MODEL_EEMPTY;
    uint64_t total = 0;
    uint32_t classes = 0;
    for (uint32_t p = 0; p < n; p++) {
        if (parts[p].dim != parts[0].dim || parts[p].dtype != parts[0].dtype) {
            model_msgf(msg, msg_len, "part %u has dim %u dtype %d, part 0 has dim %u dtype %d", p,
                       parts[p].dim, (int)parts[p].dtype, parts[0].dim, (int)parts[0].dtype);
            return MODEL_EDIM;
        }
        total += parts[p].count;
        if (parts[p].classes > classes)
            classes = parts[p].classes;
    }
    if (total > MODEL_SAMPLES_MAX)
        return MODEL_ETOOBIG;
    int rc = model_data_alloc(out, (uint32_t)total, parts[0].dim, classes, parts[0].dtype);
    if (rc)
        return rc;
    size_t rb = (size_t)parts[0].dim * model_dtype_size(parts[0].dtype);
    uint8_t *dst = out->dtype == MODEL_DTYPE_U8 ? out->x_u8 : (uint8_t *)out->x_f32;
    size_t at = 0;
    for (uint32_t p = 0; p < n; p++) {
        if (!parts[p].count)
            continue;
        memcpy(dst + at * rb, row_bytes(&parts[p], 0), parts[p].count * rb);
        memcpy(out->labels + at, parts[p].labels, parts[p].count * sizeof *out->labels);
        at += parts[p].count;
    }
    return MODEL_OK;
}

/* ---- IDX ---- */

#define IDX_MAGIC_U8_1D 0x00000801u
#define IDX_MAGIC_U8_3D 0x00000803u

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* Read exactly len bytes or say why not. */
static int gz_read_exact(gzFile f, void *buf, size_t len, const char *path, const char *what,
                         char *msg, size_t msg_len)
{
    uint8_t *p = buf;
    size_t done = 0;
    while (done < len) {
        size_t want = len - done;
        if (want > (1u << 30))
            want = 1u << 30;
        int got = gzread(f, p + done, (unsigned)want);
        if (got <= 0) {
            int zerr = Z_OK;
            const char *zs = gzerror(f, &zerr);
            if (zerr == Z_DATA_ERROR || zerr == Z_STREAM_ERROR || zerr == Z_MEM_ERROR) {
                model_msgf(msg, msg_len, "%s: corrupt compressed data while reading %s (%s)", path,
                           what, zs);
                return MODEL_ECORRUPT;
            }
            if (zerr == Z_ERRNO) {
                model_msgf(msg, msg_len, "%s: read error while reading %s: %s", path, what,
                           strerror(errno));
                return MODEL_EIO;
            }
            model_msgf(msg, msg_len,
                       "%s: truncated: %s needs %zu bytes, file ends after %zu (re-download "
                       "or reinstall the file)",
                       path, what, len, done);
            return MODEL_ETRUNC;
        }
        done += (size_t)got;
    }
    return MODEL_OK;
}

/* After the announced data: the file must end here, and the gzip trailer
 * (CRC) must check. */
static int gz_expect_end(gzFile f, const char *path, char *msg, size_t msg_len)
{
    uint8_t extra;
    int got = gzread(f, &extra, 1);
    if (got == 1) {
        model_msgf(msg, msg_len, "%s: trailing bytes after the announced data", path);
        return MODEL_ECORRUPT;
    }
    int zerr = Z_OK;
    const char *zs = gzerror(f, &zerr);
    if (got < 0 && zerr != Z_BUF_ERROR) {
        model_msgf(msg, msg_len, "%s: corrupt compressed data at the end (%s)", path, zs);
        return MODEL_ECORRUPT;
    }
    if (got < 0) {
        model_msgf(msg, msg_len, "%s: truncated compressed stream (%s)", path, zs);
        return MODEL_ETRUNC;
    }
    return MODEL_OK;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static gzFile gz_open(const char *path, char *msg, size_t msg_len)
{
    gzFile f = gzopen(path, "rb");
    if (!f)
        model_msgf(msg, msg_len, "%s: cannot open: %s", path, strerror(errno));
    else
        gzbuffer(f, 1u << 17);
    return f;
}

/* Deflate's largest expansion: 1032 output bytes per input byte (zlib's
 * technical details); gzip adds at least 18 bytes of header and trailer. */
#define IDX_DEFLATE_RATIO_MAX 1032u

/* Before allocating for `need` bytes announced by a header of hdr bytes:
 * can the file at path hold them? A plain file must have them; a gzip file
 * must be large enough to expand to them. ETRUNC (with a message) if not;
 * files whose size is unknown (not regular) are left to the reads. Found
 * while writing fuzz_idx: a 24-byte pair of files announcing 2^26 images
 * of 256 pixels made the loader allocate 16 GiB before it noticed the end. */
static int idx_can_hold(gzFile f, const char *path, uint64_t hdr, uint64_t need, const char *what,
                        char *msg, size_t msg_len)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return MODEL_OK;
    uint64_t size = (uint64_t)st.st_size;
    uint64_t most = gzdirect(f)                                 ? (size > hdr ? size - hdr : 0)
                    : size > UINT64_MAX / IDX_DEFLATE_RATIO_MAX ? UINT64_MAX
                                                                : size * IDX_DEFLATE_RATIO_MAX;
    if (need <= most)
        return MODEL_OK;
    model_msgf(msg, msg_len,
               "%s: truncated: the header announces %llu bytes of %s, a %s file of %llu bytes "
               "cannot hold them",
               path, (unsigned long long)need, what, gzdirect(f) ? "plain" : "compressed",
               (unsigned long long)size);
    return MODEL_ETRUNC;
}

int model_idx_load(model_data *out, const char *images_path, const char *labels_path,
                   uint32_t classes, char *msg, size_t msg_len)
{
    memset(out, 0, sizeof *out);
    if (classes > MODEL_CLASSES_MAX)
        return MODEL_EINVAL;
    int rc;
    uint8_t hdr[16];
    gzFile fi = gz_open(images_path, msg, msg_len);
    if (!fi)
        return MODEL_EIO;
    gzFile fl = gz_open(labels_path, msg, msg_len);
    if (!fl) {
        gzclose(fi);
        return MODEL_EIO;
    }
    rc = gz_read_exact(fi, hdr, 16, images_path, "the IDX header", msg, msg_len);
    if (rc)
        goto done;
    if (be32(hdr) != IDX_MAGIC_U8_3D) {
        model_msgf(msg, msg_len,
                   "%s: bad magic 0x%08x, expected 0x%08x (IDX uint8 images, 3 dimensions)",
                   images_path, be32(hdr), IDX_MAGIC_U8_3D);
        rc = MODEL_EMAGIC;
        goto done;
    }
    uint32_t count = be32(hdr + 4), rows = be32(hdr + 8), cols = be32(hdr + 12);
    uint64_t dim = (uint64_t)rows * cols;
    if (count == 0 || dim == 0) {
        model_msgf(msg, msg_len, "%s: empty: %u images of %ux%u", images_path, count, rows, cols);
        rc = MODEL_EEMPTY;
        goto done;
    }
    if (count > MODEL_SAMPLES_MAX || dim > MODEL_DIM_MAX || count * dim > MODEL_DATA_BYTES_MAX) {
        model_msgf(msg, msg_len, "%s: %u images of %ux%u is above the limits", images_path, count,
                   rows, cols);
        rc = MODEL_ETOOBIG;
        goto done;
    }
    rc = gz_read_exact(fl, hdr, 8, labels_path, "the IDX header", msg, msg_len);
    if (rc)
        goto done;
    if (be32(hdr) != IDX_MAGIC_U8_1D) {
        model_msgf(msg, msg_len,
                   "%s: bad magic 0x%08x, expected 0x%08x (IDX uint8 labels, 1 dimension)",
                   labels_path, be32(hdr), IDX_MAGIC_U8_1D);
        rc = MODEL_EMAGIC;
        goto done;
    }
    if (be32(hdr + 4) != count) {
        model_msgf(msg, msg_len, "%s: %u labels but %s has %u images", labels_path, be32(hdr + 4),
                   base_name(images_path), count);
        rc = MODEL_EMISMATCH;
        goto done;
    }
    rc = idx_can_hold(fi, images_path, 16, count * dim, "pixels", msg, msg_len);
    if (!rc)
        rc = idx_can_hold(fl, labels_path, 8, count, "labels", msg, msg_len);
    if (rc)
        goto done;
    rc = model_data_alloc(out, count, (uint32_t)dim, classes ? classes : 1, MODEL_DTYPE_U8);
    if (rc)
        goto done;
    rc = gz_read_exact(fi, out->x_u8, (size_t)count * dim, images_path, "the pixels", msg, msg_len);
    if (!rc)
        rc = gz_expect_end(fi, images_path, msg, msg_len);
    if (rc)
        goto done;
    /* Labels are uint8 in the file; read them into the tail of the uint16
     * array and widen from the front (no second buffer). */
    uint8_t *raw = (uint8_t *)out->labels + count;
    rc = gz_read_exact(fl, raw, count, labels_path, "the labels", msg, msg_len);
    if (!rc)
        rc = gz_expect_end(fl, labels_path, msg, msg_len);
    if (rc)
        goto done;
    uint32_t max_label = 0;
    for (uint32_t i = 0; i < count; i++) {
        uint8_t l = raw[i];
        out->labels[i] = l;
        if (classes && l >= classes) {
            model_msgf(msg, msg_len, "%s: label %u at index %u >= classes %u", labels_path, l, i,
                       classes);
            rc = MODEL_ELABEL;
            goto done;
        }
        if (l > max_label)
            max_label = l;
    }
    out->classes = classes ? classes : max_label + 1;
done:
    gzclose(fi);
    gzclose(fl);
    if (rc)
        model_data_free(out);
    return rc;
}

/* dir/name if it exists, else dir/name.gz. */
static void idx_path(char *out, size_t out_len, const char *dir, const char *name)
{
    snprintf(out, out_len, "%s/%s", dir, name);
    FILE *f = fopen(out, "rb");
    if (f) {
        fclose(f);
        return;
    }
    snprintf(out, out_len, "%s/%s.gz", dir, name);
}

int model_fashion_load(model_data *train, model_data *test, const char *dir, char *msg,
                       size_t msg_len)
{
    memset(train, 0, sizeof *train);
    memset(test, 0, sizeof *test);
    if (!dir)
        dir = MODEL_FASHION_DIR;
    char pi[4096], pl[4096];
    idx_path(pi, sizeof pi, dir, "train-images-idx3-ubyte");
    idx_path(pl, sizeof pl, dir, "train-labels-idx1-ubyte");
    int rc = model_idx_load(train, pi, pl, 0, msg, msg_len);
    if (rc)
        return rc;
    idx_path(pi, sizeof pi, dir, "t10k-images-idx3-ubyte");
    idx_path(pl, sizeof pl, dir, "t10k-labels-idx1-ubyte");
    rc = model_idx_load(test, pi, pl, train->classes, msg, msg_len);
    if (!rc && test->dim != train->dim) {
        model_msgf(msg, msg_len, "%s: test images have %u features, training images %u", pi,
                   test->dim, train->dim);
        rc = MODEL_EDIM;
    }
    if (rc) {
        model_data_free(train);
        model_data_free(test);
    }
    return rc;
}

/* ---- CSV ---- */

/* Parse one number field [s, e); 0 on success. */
static int csv_number(const char *s, const char *e, double *out)
{
    while (s < e && (*s == ' ' || *s == '\t'))
        s++;
    while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    if (s == e)
        return -1;
    char buf[64];
    size_t n = (size_t)(e - s);
    if (n >= sizeof buf)
        return -1;
    memcpy(buf, s, n);
    buf[n] = 0;
    char *end;
    errno = 0;
    double v = strtod(buf, &end);
    if (end != buf + n || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

static size_t csv_fields(const char *line)
{
    size_t n = 1;
    for (const char *p = line; *p; p++)
        n += *p == ',';
    return n;
}

int model_csv_load(model_data *out, const char *path, uint32_t classes, char *msg, size_t msg_len)
{
    memset(out, 0, sizeof *out);
    if (classes > MODEL_CLASSES_MAX)
        return MODEL_EINVAL;
    FILE *f = fopen(path, "r");
    if (!f) {
        model_msgf(msg, msg_len, "%s: cannot open: %s", path, strerror(errno));
        return MODEL_EIO;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    uint64_t lineno = 0;
    uint32_t dim = 0, count = 0, max_label = 0;
    size_t cap_rows = 0;
    float *x = NULL;
    uint16_t *y = NULL;
    int rc = MODEL_OK;
    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = 0;
        if (strspn(line, " \t") == (size_t)len)
            continue;
        size_t fields = csv_fields(line);
        const char *s = line;
        const char *e = strchr(s, ',');
        if (!e)
            e = s + len;
        double label;
        if (csv_number(s, e, &label)) {
            if (count == 0 && dim == 0 && lineno == 1)
                continue; /* header line */
            model_msgf(msg, msg_len, "%s:%llu: column 1 (label) is not a number: '%.*s'", path,
                       (unsigned long long)lineno, (int)(e - s > 32 ? 32 : e - s), s);
            rc = MODEL_ECSV;
            break;
        }
        if (fields < 2) {
            model_msgf(msg, msg_len, "%s:%llu: a label and no features", path,
                       (unsigned long long)lineno);
            rc = MODEL_EDIM;
            break;
        }
        if (dim == 0) {
            if (fields - 1 > MODEL_DIM_MAX) {
                model_msgf(msg, msg_len, "%s:%llu: %zu features, maximum %u", path,
                           (unsigned long long)lineno, fields - 1, MODEL_DIM_MAX);
                rc = MODEL_ETOOBIG;
                break;
            }
            dim = (uint32_t)(fields - 1);
        } else if (fields - 1 != dim) {
            model_msgf(msg, msg_len, "%s:%llu: %zu features, earlier lines have %u", path,
                       (unsigned long long)lineno, fields - 1, dim);
            rc = MODEL_EDIM;
            break;
        }
        uint32_t limit = classes ? classes : MODEL_CLASSES_MAX;
        if (label < 0 || label != floor(label) || label >= limit) {
            model_msgf(msg, msg_len, "%s:%llu: label %g is not an integer in [0, %u)", path,
                       (unsigned long long)lineno, label, limit);
            rc = MODEL_ELABEL;
            break;
        }
        if (count == cap_rows) {
            size_t nc = cap_rows ? cap_rows * 2 : 1024;
            if (nc > MODEL_SAMPLES_MAX)
                nc = MODEL_SAMPLES_MAX;
            if (count >= nc || (uint64_t)nc * dim * sizeof(float) > MODEL_DATA_BYTES_MAX) {
                model_msgf(msg, msg_len, "%s:%llu: more samples than the maximum", path,
                           (unsigned long long)lineno);
                rc = MODEL_ETOOBIG;
                break;
            }
            float *nx = realloc(x, nc * dim * sizeof *x);
            if (nx)
                x = nx;
            uint16_t *ny = realloc(y, nc * sizeof *y);
            if (ny)
                y = ny;
            if (!nx || !ny) {
                rc = MODEL_ENOMEM;
                break;
            }
            cap_rows = nc;
        }
        y[count] = (uint16_t)label;
        if ((uint32_t)label > max_label)
            max_label = (uint32_t)label;
        float *row = x + (size_t)count * dim;
        for (uint32_t j = 0; j < dim; j++) {
            s = e + 1;
            e = strchr(s, ',');
            if (!e)
                e = line + len;
            double v;
            if (csv_number(s, e, &v) || fabs(v) > 3.0e38) {
                model_msgf(msg, msg_len, "%s:%llu: column %u is not a finite number: '%.*s'", path,
                           (unsigned long long)lineno, j + 2, (int)(e - s > 32 ? 32 : e - s), s);
                rc = MODEL_ECSV;
                break;
            }
            row[j] = (float)v;
        }
        if (rc)
            break;
        count++;
    }
    if (!rc && ferror(f)) {
        model_msgf(msg, msg_len, "%s: read error: %s", path, strerror(errno));
        rc = MODEL_EIO;
    }
    if (!rc && count == 0) {
        model_msgf(msg, msg_len, "%s: no samples", path);
        rc = MODEL_EEMPTY;
    }
    free(line);
    fclose(f);
    if (rc) {
        free(x);
        free(y);
        return rc;
    }
    out->count = count;
    out->dim = dim;
    out->classes = classes ? classes : max_label + 1;
    out->dtype = MODEL_DTYPE_F32;
    out->x_f32 = x;
    out->labels = y;
    return MODEL_OK;
}

/* ---- normalisation ---- */

static const char *const norm_names[] = {"none", "unit", "global", "feature"};

int model_norm_parse(const char *name, model_norm_mode *out)
{
    for (int i = 0; i < 4; i++)
        if (!strcmp(name, norm_names[i])) {
            *out = (model_norm_mode)i;
            return MODEL_OK;
        }
    return MODEL_EINVAL;
}

const char *model_norm_name(model_norm_mode mode)
{
    return (unsigned)mode < 4 ? norm_names[mode] : "?";
}

static double value_at(const model_data *d, size_t k)
{
    return d->dtype == MODEL_DTYPE_U8 ? (double)d->x_u8[k] : (double)d->x_f32[k];
}

int model_norm_fit(model_norm *n, const model_data *d, model_norm_mode mode)
{
    memset(n, 0, sizeof *n);
    if (!d->dim || (unsigned)mode > MODEL_NORM_FEATURE)
        return MODEL_EINVAL;
    if ((mode == MODEL_NORM_GLOBAL || mode == MODEL_NORM_FEATURE) && d->count == 0)
        return MODEL_EEMPTY;
    n->dim = d->dim;
    n->mode = mode;
    n->scale = malloc(d->dim * sizeof *n->scale);
    n->offset = malloc(d->dim * sizeof *n->offset);
    double *sum = calloc(d->dim, sizeof *sum), *sum2 = calloc(d->dim, sizeof *sum2);
    if (!n->scale || !n->offset || !sum || !sum2) {
        free(sum);
        free(sum2);
        model_norm_free(n);
        return MODEL_ENOMEM;
    }
    for (uint32_t j = 0; j < d->dim; j++) {
        n->scale[j] = 1.0f;
        n->offset[j] = 0.0f;
    }
    if (mode == MODEL_NORM_UNIT && d->dtype == MODEL_DTYPE_U8) {
        for (uint32_t j = 0; j < d->dim; j++)
            n->scale[j] = 1.0f / 255.0f;
    } else if (mode == MODEL_NORM_GLOBAL || mode == MODEL_NORM_FEATURE) {
        for (uint32_t i = 0; i < d->count; i++)
            for (uint32_t j = 0; j < d->dim; j++) {
                double v = value_at(d, (size_t)i * d->dim + j);
                sum[j] += v;
                sum2[j] += v * v;
            }
        if (mode == MODEL_NORM_GLOBAL) {
            double s = 0, s2 = 0;
            for (uint32_t j = 0; j < d->dim; j++)
                s += sum[j], s2 += sum2[j];
            double cnt = (double)d->count * d->dim;
            double mean = s / cnt, var = s2 / cnt - mean * mean;
            double sd = var > 1e-12 ? sqrt(var) : 1.0;
            for (uint32_t j = 0; j < d->dim; j++) {
                n->scale[j] = (float)(1.0 / sd);
                n->offset[j] = (float)(-mean / sd);
            }
        } else {
            for (uint32_t j = 0; j < d->dim; j++) {
                double mean = sum[j] / d->count, var = sum2[j] / d->count - mean * mean;
                double sd = var > 1e-12 ? sqrt(var) : 1.0;
                n->scale[j] = (float)(1.0 / sd);
                n->offset[j] = (float)(-mean / sd);
            }
        }
    }
    free(sum);
    free(sum2);
    return MODEL_OK;
}

void model_norm_free(model_norm *n)
{
    if (!n)
        return;
    free(n->scale);
    free(n->offset);
    memset(n, 0, sizeof *n);
}

/* One row of model_data_gather: element-wise, so every vector width gives
 * the same bits (common/simd.h). */
SIMD_CLONES static void gather_u8_norm(float *restrict o, const uint8_t *restrict s,
                                       const float *restrict sc, const float *restrict of,
                                       uint32_t dim)
{
    for (uint32_t j = 0; j < dim; j++)
        o[j] = (float)s[j] * sc[j] + of[j];
}

SIMD_CLONES static void gather_f32_norm(float *restrict o, const float *restrict s,
                                        const float *restrict sc, const float *restrict of,
                                        uint32_t dim)
{
    for (uint32_t j = 0; j < dim; j++)
        o[j] = s[j] * sc[j] + of[j];
}

void model_data_gather(const model_data *d, const model_norm *norm, const uint32_t *rows,
                       uint32_t n, float *x_out, uint16_t *y_out)
{
    const uint32_t dim = d->dim;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t r = rows[k];
        float *restrict o = x_out + (size_t)k * dim;
        if (y_out)
            y_out[k] = d->labels[r];
        if (d->dtype == MODEL_DTYPE_U8) {
            const uint8_t *restrict s = d->x_u8 + (size_t)r * dim;
            if (norm) {
                gather_u8_norm(o, s, norm->scale, norm->offset, dim);
            } else {
                for (uint32_t j = 0; j < dim; j++)
                    o[j] = (float)s[j];
            }
        } else {
            const float *restrict s = d->x_f32 + (size_t)r * dim;
            if (norm) {
                gather_f32_norm(o, s, norm->scale, norm->offset, dim);
            } else {
                memcpy(o, s, dim * sizeof *o);
            }
        }
    }
}

void model_data_prefetch(const model_data *d, const uint32_t *rows, uint32_t n)
{
    const size_t row_bytes =
        (size_t)d->dim * (d->dtype == MODEL_DTYPE_U8 ? sizeof *d->x_u8 : sizeof *d->x_f32);
    const char *base = d->dtype == MODEL_DTYPE_U8 ? (const char *)d->x_u8 : (const char *)d->x_f32;
    if (!row_bytes || !base)
        return;
    for (uint32_t k = 0; k < n; k++) {
        const char *row = base + (size_t)rows[k] * row_bytes;
        __builtin_prefetch(&d->labels[rows[k]]);
        /* every 64-byte line the row touches, the last one included */
        for (size_t off = 0; off < row_bytes; off += 64)
            __builtin_prefetch(row + off);
        __builtin_prefetch(row + row_bytes - 1);
    }
}

void model_data_shuffle(uint32_t *order, uint32_t count, model_rng *rng)
{
    for (uint32_t i = 0; i < count; i++)
        order[i] = i;
    model_rng_shuffle_u32(rng, order, count);
}
