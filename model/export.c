/* model/export — see export.h. */
#include "model/export.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "model/spec.h"

static const char *const export_names[MODEL_EXPORT_FORMAT_COUNT] = {"npz", "safetensors", "raw"};

const char *model_export_format_name(model_export_format f)
{
    return (unsigned)f < MODEL_EXPORT_FORMAT_COUNT ? export_names[f] : "?";
}

int model_export_format_parse(const char *name, model_export_format *out)
{
    for (unsigned i = 0; i < MODEL_EXPORT_FORMAT_COUNT; i++)
        if (!strcmp(name, export_names[i])) {
            *out = (model_export_format)i;
            return MODEL_OK;
        }
    return MODEL_EINVAL;
}

static int export_fail(char *msg, size_t len, int err, const char *fmt, ...)
{
    if (msg && len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, len, fmt, ap);
        va_end(ap);
    }
    return err;
}

static int tensor_add(model_tensor *out, uint32_t cap, uint32_t *n, uint32_t op, const char *what,
                      size_t off, size_t count, uint32_t ndim, const uint32_t *shape)
{
    if (*n >= cap)
        return MODEL_ETOOBIG;
    model_tensor *t = &out[(*n)++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%u.%s", op, what);
    t->ndim = ndim;
    memcpy(t->shape, shape, ndim * sizeof *shape);
    t->offset = off;
    t->count = count;
    return MODEL_OK;
}

int model_tensors(const char *spec, uint32_t input_dim, uint32_t classes, model_tensor *out,
                  uint32_t cap, uint32_t *n, char *msg, size_t msg_len)
{
    model_arch *a = malloc(sizeof *a);
    if (!a)
        return MODEL_ENOMEM;
    int rc = model_arch_parse(a, spec, input_dim, classes, msg, msg_len);
    *n = 0;
    for (uint32_t i = 0; !rc && i < a->op_count; i++) {
        const model_op *op = &a->ops[i];
        if (!op->w_count)
            continue;
        uint32_t w[4], b[1];
        uint32_t wd;
        switch (op->kind) {
        case MODEL_OP_DENSE:
            w[0] = op->out.c;
            w[1] = (uint32_t)(op->w_count / op->out.c);
            wd = 2;
            break;
        case MODEL_OP_CONV:
            w[0] = op->out.c;
            w[1] = op->k;
            w[2] = op->k;
            w[3] = op->in.c;
            wd = 4;
            break;
        default: /* group normalisation: gamma, beta per channel */
            w[0] = (uint32_t)op->w_count;
            wd = 1;
            break;
        }
        size_t prod = 1;
        for (uint32_t d = 0; d < wd; d++)
            prod *= w[d];
        if (prod != op->w_count) {
            rc = export_fail(msg, msg_len, MODEL_EINVAL,
                             "internal: op %u holds %zu weights, its shape says %zu", i,
                             op->w_count, prod);
            break;
        }
        rc = tensor_add(out, cap, n, i, "weight", op->w_off, op->w_count, wd, w);
        if (!rc && op->b_count) {
            b[0] = (uint32_t)op->b_count;
            rc = tensor_add(out, cap, n, i, "bias", op->b_off, op->b_count, 1, b);
        }
        if (rc == MODEL_ETOOBIG)
            export_fail(msg, msg_len, rc, "more than %u tensors", cap);
    }
    free(a);
    return rc;
}

/* ---- little writers over a FILE, failing once ---- */

typedef struct wr {
    FILE *f;
    int bad;
    uint64_t pos;
} wr;

static void wr_bytes(wr *w, const void *p, size_t n)
{
    if (!w->bad && n && fwrite(p, 1, n, w->f) != n)
        w->bad = 1;
    w->pos += n;
}

static void wr_u16(wr *w, uint16_t v)
{
    uint8_t b[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    wr_bytes(w, b, 2);
}

static void wr_u32(wr *w, uint32_t v)
{
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    wr_bytes(w, b, 4);
}

static void wr_u64(wr *w, uint64_t v)
{
    wr_u32(w, (uint32_t)v);
    wr_u32(w, (uint32_t)(v >> 32));
}

/* float32 values, little-endian on any host */
static void wr_floats(wr *w, const float *x, size_t n)
{
    uint8_t buf[4096];
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        buf[k++] = (uint8_t)u;
        buf[k++] = (uint8_t)(u >> 8);
        buf[k++] = (uint8_t)(u >> 16);
        buf[k++] = (uint8_t)(u >> 24);
        if (k == sizeof buf) {
            wr_bytes(w, buf, k);
            k = 0;
        }
    }
    wr_bytes(w, buf, k);
}

static uint32_t crc_floats(uint32_t crc, const float *x, size_t n)
{
    uint8_t buf[4096];
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        buf[k++] = (uint8_t)u;
        buf[k++] = (uint8_t)(u >> 8);
        buf[k++] = (uint8_t)(u >> 16);
        buf[k++] = (uint8_t)(u >> 24);
        if (k == sizeof buf) {
            crc = (uint32_t)crc32(crc, buf, (uInt)k);
            k = 0;
        }
    }
    return (uint32_t)crc32(crc, buf, (uInt)k);
}

/* ---- .npy (format 1.0) and .npz (ZIP, stored) ---- */

/* The .npy header of a tensor: magic, version 1.0, header length, the dict
 * padded with spaces and a newline so the data starts at a multiple of 64. */
static size_t npy_header(const model_tensor *t, uint8_t *out, size_t cap)
{
    char dict[256];
    int n = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (");
    for (uint32_t d = 0; d < t->ndim; d++)
        n += snprintf(dict + n, sizeof dict - (size_t)n, "%u%s", t->shape[d],
                      t->ndim == 1 ? "," : (d + 1 < t->ndim ? ", " : ""));
    n += snprintf(dict + n, sizeof dict - (size_t)n, "), }");
    size_t total = 10 + (size_t)n + 1;
    size_t padded = (total + 63) / 64 * 64;
    if (padded > cap)
        return 0;
    memcpy(out, "\x93NUMPY\x01\x00", 8);
    uint16_t hl = (uint16_t)(padded - 10);
    out[8] = (uint8_t)hl;
    out[9] = (uint8_t)(hl >> 8);
    memcpy(out + 10, dict, (size_t)n);
    memset(out + 10 + n, ' ', padded - 10 - (size_t)n - 1);
    out[padded - 1] = '\n';
    return padded;
}

typedef struct npz_entry {
    char name[MODEL_TENSOR_NAME_MAX + 8];
    uint32_t crc, size;
    uint64_t offset;
} npz_entry;

static int write_npz(wr *w, const model_tensor *ts, uint32_t n, const float *params)
{
    npz_entry *e = calloc(n ? n : 1, sizeof *e);
    if (!e)
        return MODEL_ENOMEM;
    uint8_t hdr[256];
    for (uint32_t i = 0; i < n; i++) {
        const model_tensor *t = &ts[i];
        size_t hl = npy_header(t, hdr, sizeof hdr);
        uint64_t size = hl + 4 * (uint64_t)t->count;
        if (!hl || size > UINT32_MAX - 1u || w->pos > UINT32_MAX - 1u) { /* no ZIP64 */
            free(e);
            return MODEL_ETOOBIG;
        }
        snprintf(e[i].name, sizeof e[i].name, "%s.npy", t->name);
        e[i].crc = crc_floats((uint32_t)crc32(0L, hdr, (uInt)hl), params + t->offset, t->count);
        e[i].size = (uint32_t)size;
        e[i].offset = w->pos;
        uint16_t nl = (uint16_t)strlen(e[i].name);
        wr_u32(w, 0x04034b50u); /* local file header */
        wr_u16(w, 20);          /* version needed */
        wr_u16(w, 0);           /* flags */
        wr_u16(w, 0);           /* stored */
        wr_u16(w, 0);           /* time */
        wr_u16(w, 0x21);        /* date: 1980-01-01 */
        wr_u32(w, e[i].crc);
        wr_u32(w, e[i].size);
        wr_u32(w, e[i].size);
        wr_u16(w, nl);
        wr_u16(w, 0);
        wr_bytes(w, e[i].name, nl);
        wr_bytes(w, hdr, hl);
        wr_floats(w, params + t->offset, t->count);
    }
    uint64_t cd = w->pos;
    for (uint32_t i = 0; i < n; i++) {
        uint16_t nl = (uint16_t)strlen(e[i].name);
        wr_u32(w, 0x02014b50u); /* central directory header */
        wr_u16(w, 20);
        wr_u16(w, 20);
        wr_u16(w, 0);
        wr_u16(w, 0);
        wr_u16(w, 0);
        wr_u16(w, 0x21);
        wr_u32(w, e[i].crc);
        wr_u32(w, e[i].size);
        wr_u32(w, e[i].size);
        wr_u16(w, nl);
        wr_u16(w, 0);
        wr_u16(w, 0);
        wr_u16(w, 0);
        wr_u16(w, 0);
        wr_u32(w, 0);
        wr_u32(w, (uint32_t)e[i].offset);
        wr_bytes(w, e[i].name, nl);
    }
    uint64_t cd_size = w->pos - cd;
    wr_u32(w, 0x06054b50u); /* end of central directory */
    wr_u16(w, 0);
    wr_u16(w, 0);
    wr_u16(w, (uint16_t)n);
    wr_u16(w, (uint16_t)n);
    wr_u32(w, (uint32_t)cd_size);
    wr_u32(w, (uint32_t)cd);
    wr_u16(w, 0);
    free(e);
    return MODEL_OK;
}

/* ---- safetensors ---- */

static int write_safetensors(wr *w, const char *spec, uint32_t input_dim, uint32_t classes,
                             const model_tensor *ts, uint32_t n, const float *params)
{
    size_t cap = 256 + (size_t)n * 160 + strlen(spec) * 2;
    char *j = malloc(cap);
    if (!j)
        return MODEL_ENOMEM;
    size_t at = 0;
    uint64_t data = 0;
    at += (size_t)snprintf(j + at, cap - at, "{");
    for (uint32_t i = 0; i < n; i++) {
        at +=
            (size_t)snprintf(j + at, cap - at, "\"%s\":{\"dtype\":\"F32\",\"shape\":[", ts[i].name);
        for (uint32_t d = 0; d < ts[i].ndim; d++)
            at += (size_t)snprintf(j + at, cap - at, "%s%u", d ? "," : "", ts[i].shape[d]);
        at += (size_t)snprintf(j + at, cap - at, "],\"data_offsets\":[%llu,%llu]},",
                               (unsigned long long)data,
                               (unsigned long long)(data + 4 * (uint64_t)ts[i].count));
        data += 4 * (uint64_t)ts[i].count;
    }
    /* the spec is model/spec.h grammar: letters, digits, ",:." only */
    at += (size_t)snprintf(j + at, cap - at,
                           "\"__metadata__\":{\"format\":\"murmur\",\"spec\":\"%s\","
                           "\"input_dim\":\"%u\",\"classes\":\"%u\"}}",
                           spec, input_dim, classes);
    while (at % 8)
        j[at++] = ' ';
    wr_u64(w, at);
    wr_bytes(w, j, at);
    free(j);
    for (uint32_t i = 0; i < n; i++) /* tensors are already in offset order */
        wr_floats(w, params + ts[i].offset, ts[i].count);
    return MODEL_OK;
}

int model_export(const char *spec, uint32_t input_dim, uint32_t classes, const float *params,
                 size_t dim, const float *in_scale, const float *in_offset,
                 model_export_format format, const char *path, int overwrite, char *msg,
                 size_t msg_len)
{
    if (!spec || !params || !path || (unsigned)format >= MODEL_EXPORT_FORMAT_COUNT)
        return export_fail(msg, msg_len, MODEL_EINVAL, "model_export: bad argument");
    for (const char *p = spec; *p; p++)
        if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20)
            return export_fail(msg, msg_len, MODEL_ESPEC,
                               "spec '%s': a character JSON needs escaped", spec);
    model_tensor *ts = calloc(MODEL_TENSORS_MAX, sizeof *ts);
    if (!ts)
        return MODEL_ENOMEM;
    uint32_t n = 0;
    int rc = model_tensors(spec, input_dim, classes, ts, MODEL_TENSORS_MAX, &n, msg, msg_len);
    size_t total = 0;
    for (uint32_t i = 0; !rc && i < n; i++)
        total += ts[i].count;
    if (!rc && total != dim)
        rc = export_fail(msg, msg_len, MODEL_EDIM,
                         "%zu parameters, but %s over %u inputs and %u classes has %zu", dim, spec,
                         input_dim, classes, total);
    /* The input normalisation: two more tensors over a copy of params with
     * scale and offset appended (npz and safetensors). */
    float *src = (float *)params;
    if (!rc && in_scale && in_offset && format != MODEL_EXPORT_RAW) {
        if (n + 2 > MODEL_TENSORS_MAX)
            rc =
                export_fail(msg, msg_len, MODEL_ETOOBIG, "more than %u tensors", MODEL_TENSORS_MAX);
        else if (!(src = malloc((dim + 2 * (size_t)input_dim) * sizeof *src)))
            rc = MODEL_ENOMEM;
        else {
            memcpy(src, params, dim * sizeof *src);
            memcpy(src + dim, in_scale, input_dim * sizeof *src);
            memcpy(src + dim + input_dim, in_offset, input_dim * sizeof *src);
            uint32_t shape[1] = {input_dim};
            tensor_add(ts, MODEL_TENSORS_MAX, &n, 0, "x", dim, input_dim, 1, shape);
            snprintf(ts[n - 1].name, sizeof ts[n - 1].name, "input.scale");
            tensor_add(ts, MODEL_TENSORS_MAX, &n, 0, "x", dim + input_dim, input_dim, 1, shape);
            snprintf(ts[n - 1].name, sizeof ts[n - 1].name, "input.offset");
        }
    }
    if (!rc && !overwrite && access(path, F_OK) == 0)
        rc = export_fail(msg, msg_len, MODEL_EIO,
                         "%s exists; not overwritten (--force replaces it)", path);
    char tmp[4096];
    if (!rc && snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        rc = export_fail(msg, msg_len, MODEL_EIO, "%s: path too long", path);
    FILE *f = NULL;
    if (!rc && !(f = fopen(tmp, "wb")))
        rc = export_fail(msg, msg_len, MODEL_EIO, "%s: %s", tmp, strerror(errno));
    if (!rc) {
        wr w = {.f = f};
        if (format == MODEL_EXPORT_NPZ)
            rc = write_npz(&w, ts, n, src);
        else if (format == MODEL_EXPORT_SAFETENSORS)
            rc = write_safetensors(&w, spec, input_dim, classes, ts, n, src);
        else
            wr_floats(&w, params, dim);
        int closed = fclose(f);
        if (!rc && (w.bad || closed))
            rc =
                export_fail(msg, msg_len, MODEL_EIO, "%s: write failed (%s)", tmp, strerror(errno));
        else if (rc == MODEL_ETOOBIG)
            export_fail(msg, msg_len, rc, "%s: a tensor above 4 GiB needs ZIP64 (use raw)", path);
        if (!rc && rename(tmp, path))
            rc = export_fail(msg, msg_len, MODEL_EIO, "rename %s -> %s: %s", tmp, path,
                             strerror(errno));
        if (rc)
            unlink(tmp);
    }
    if (src != params)
        free(src);
    free(ts);
    return rc;
}
