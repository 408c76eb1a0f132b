#include "model/shardfile.h"

#include <errno.h>
#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

_Static_assert(sizeof(MODEL_SHARD_MAGIC) - 1 == 8, "magic is 8 bytes");

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static uint16_t get16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}
static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get64(const uint8_t *p)
{
    return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

static uint64_t payload_len_for(uint32_t n, uint32_t dim, model_dtype dtype)
{
    return (uint64_t)n * 2u + (uint64_t)n * dim * model_dtype_size(dtype);
}

uint64_t model_shard_size(const model_data *d, uint32_t n)
{
    return MODEL_SHARD_HEADER_SIZE + payload_len_for(n, d->dim, d->dtype);
}

static void content_hash(const uint8_t *file, uint64_t payload_len,
                         uint8_t out[MODEL_SHARD_HASH_SIZE])
{
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, MODEL_SHARD_HASH_SIZE);
    crypto_generichash_update(&st, file + MODEL_SHARD_DESCRIPTOR_OFFSET,
                              MODEL_SHARD_DESCRIPTOR_SIZE);
    crypto_generichash_update(&st, file + MODEL_SHARD_HEADER_SIZE, payload_len);
    crypto_generichash_final(&st, out, MODEL_SHARD_HASH_SIZE);
}

int model_shard_encode(const model_data *d, const uint32_t *rows, uint32_t n, uint32_t index,
                       uint32_t count, uint8_t *out, size_t out_len,
                       uint8_t hash_out[MODEL_SHARD_HASH_SIZE])
{
    if (!rows)
        n = d->count;
    if (n == 0 || index >= count || count > MODEL_SHARDS_MAX || !model_dtype_size(d->dtype) ||
        out_len < model_shard_size(d, n))
        return MODEL_EINVAL;
    if (rows)
        for (uint32_t k = 0; k < n; k++)
            if (rows[k] >= d->count)
                return MODEL_EINVAL;
    uint64_t plen = payload_len_for(n, d->dim, d->dtype);
    memcpy(out, MODEL_SHARD_MAGIC, 8);
    put16(out + 8, MODEL_SHARD_VERSION);
    out[10] = (uint8_t)d->dtype;
    out[11] = 0;
    put32(out + 12, n);
    put32(out + 16, d->dim);
    put32(out + 20, d->classes);
    put32(out + 24, index);
    put32(out + 28, count);
    put64(out + 32, plen);
    uint8_t *lab = out + MODEL_SHARD_HEADER_SIZE;
    uint8_t *feat = lab + (size_t)n * 2;
    size_t rb = (size_t)d->dim * model_dtype_size(d->dtype);
    for (uint32_t k = 0; k < n; k++) {
        uint32_t r = rows ? rows[k] : k;
        put16(lab + (size_t)k * 2, d->labels[r]);
        uint8_t *dst = feat + (size_t)k * rb;
        if (d->dtype == MODEL_DTYPE_U8) {
            memcpy(dst, d->x_u8 + (size_t)r * d->dim, rb);
        } else {
            const float *src = d->x_f32 + (size_t)r * d->dim;
            for (uint32_t j = 0; j < d->dim; j++) {
                uint32_t bits;
                memcpy(&bits, &src[j], 4);
                put32(dst + (size_t)j * 4, bits);
            }
        }
    }
    content_hash(out, plen, out + MODEL_SHARD_HASH_OFFSET);
    if (hash_out)
        memcpy(hash_out, out + MODEL_SHARD_HASH_OFFSET, MODEL_SHARD_HASH_SIZE);
    return MODEL_OK;
}

int model_shard_write(const char *path, const model_data *d, const uint32_t *rows, uint32_t n,
                      uint32_t index, uint32_t count, uint8_t hash_out[MODEL_SHARD_HASH_SIZE],
                      char *msg, size_t msg_len)
{
    uint64_t size = model_shard_size(d, rows ? n : d->count);
    if (size > SIZE_MAX)
        return MODEL_ETOOBIG;
    uint8_t *buf = malloc(size);
    if (!buf)
        return MODEL_ENOMEM;
    int rc = model_shard_encode(d, rows, n, index, count, buf, size, hash_out);
    if (rc) {
        free(buf);
        model_msgf(msg, msg_len, "%s: cannot encode shard %u of %u", path, index, count);
        return rc;
    }
    char tmp[4096];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", path) >= sizeof tmp) {
        free(buf);
        model_msgf(msg, msg_len, "%s: path too long", path);
        return MODEL_EINVAL;
    }
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        free(buf);
        model_msgf(msg, msg_len, "%s: cannot create: %s", tmp, strerror(errno));
        return MODEL_EIO;
    }
    int ok = fwrite(buf, 1, size, f) == size && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int saved = errno;
    ok = (fclose(f) == 0) && ok;
    free(buf);
    if (!ok || rename(tmp, path) != 0) {
        if (ok)
            saved = errno;
        remove(tmp);
        model_msgf(msg, msg_len, "%s: cannot write: %s", path, strerror(saved));
        return MODEL_EIO;
    }
    return MODEL_OK;
}

/* Structural checks of the header shared by hash and verify; fills info. */
static int check_header(const uint8_t *b, size_t len, model_shard_info *info, const char *name,
                        char *msg, size_t msg_len)
{
    if (len < MODEL_SHARD_HEADER_SIZE) {
        model_msgf(msg, msg_len, "%s: truncated: %zu bytes, a shard header is %u", name, len,
                   MODEL_SHARD_HEADER_SIZE);
        return MODEL_ETRUNC;
    }
    if (memcmp(b, MODEL_SHARD_MAGIC, 8)) {
        model_msgf(msg, msg_len, "%s: bad magic: not a murmur shard file", name);
        return MODEL_EMAGIC;
    }
    info->version = get16(b + 8);
    if (info->version != MODEL_SHARD_VERSION) {
        model_msgf(msg, msg_len, "%s: shard format version %u, this murmur reads version %u", name,
                   info->version, MODEL_SHARD_VERSION);
        return MODEL_EVERSION;
    }
    info->dtype = (model_dtype)b[10];
    info->sample_count = get32(b + 12);
    info->dim = get32(b + 16);
    info->classes = get32(b + 20);
    info->shard_index = get32(b + 24);
    info->shard_count = get32(b + 28);
    info->payload_len = get64(b + 32);
    memcpy(info->hash, b + MODEL_SHARD_HASH_OFFSET, MODEL_SHARD_HASH_SIZE);
    if (!model_dtype_size(info->dtype) || b[11] != 0) {
        model_msgf(msg, msg_len, "%s: unknown dtype %u", name, b[10]);
        return MODEL_ECORRUPT;
    }
    if (!info->sample_count || info->sample_count > MODEL_SAMPLES_MAX || !info->dim ||
        info->dim > MODEL_DIM_MAX || !info->classes || info->classes > MODEL_CLASSES_MAX ||
        !info->shard_count || info->shard_count > MODEL_SHARDS_MAX ||
        info->shard_index >= info->shard_count) {
        model_msgf(msg, msg_len,
                   "%s: header out of range: %u samples, dim %u, classes %u, shard %u of %u", name,
                   info->sample_count, info->dim, info->classes, info->shard_index,
                   info->shard_count);
        return MODEL_ECORRUPT;
    }
    uint64_t want = payload_len_for(info->sample_count, info->dim, info->dtype);
    if (info->payload_len != want) {
        model_msgf(msg, msg_len, "%s: payload_len %llu, the descriptor implies %llu", name,
                   (unsigned long long)info->payload_len, (unsigned long long)want);
        return MODEL_ECORRUPT;
    }
    uint64_t have = len - MODEL_SHARD_HEADER_SIZE;
    if (have < want) {
        model_msgf(msg, msg_len, "%s: truncated: payload has %llu of %llu bytes", name,
                   (unsigned long long)have, (unsigned long long)want);
        return MODEL_ETRUNC;
    }
    if (have > want) {
        model_msgf(msg, msg_len, "%s: %llu bytes after the payload", name,
                   (unsigned long long)(have - want));
        return MODEL_ECORRUPT;
    }
    return MODEL_OK;
}

int model_shard_hash(const uint8_t *bytes, size_t len, uint8_t out[MODEL_SHARD_HASH_SIZE])
{
    model_shard_info info;
    int rc = check_header(bytes, len, &info, "shard", NULL, 0);
    if (rc)
        return rc;
    content_hash(bytes, info.payload_len, out);
    return MODEL_OK;
}

static int verify(const uint8_t *bytes, size_t len, model_shard_info *info, const char *name,
                  char *msg, size_t msg_len)
{
    int rc = check_header(bytes, len, info, name, msg, msg_len);
    if (rc)
        return rc;
    uint8_t h[MODEL_SHARD_HASH_SIZE];
    content_hash(bytes, info->payload_len, h);
    if (sodium_memcmp(h, info->hash, MODEL_SHARD_HASH_SIZE) != 0) {
        char want[2 * MODEL_SHARD_HASH_SIZE + 1], got[2 * MODEL_SHARD_HASH_SIZE + 1];
        model_shard_hash_hex(info->hash, want);
        model_shard_hash_hex(h, got);
        model_msgf(msg, msg_len,
                   "%s: content hash mismatch: header says %.16s..., content hashes to "
                   "%.16s... (corrupt or tampered; fetch the shard again)",
                   name, want, got);
        return MODEL_EHASH;
    }
    const uint8_t *lab = bytes + MODEL_SHARD_HEADER_SIZE;
    for (uint32_t i = 0; i < info->sample_count; i++) {
        uint16_t l = get16(lab + (size_t)i * 2);
        if (l >= info->classes) {
            model_msgf(msg, msg_len, "%s: label %u of sample %u >= classes %u", name, l, i,
                       info->classes);
            return MODEL_ELABEL;
        }
    }
    return MODEL_OK;
}

int model_shard_verify(const uint8_t *bytes, size_t len, model_shard_info *info, char *msg,
                       size_t msg_len)
{
    model_shard_info tmp;
    return verify(bytes, len, info ? info : &tmp, "shard", msg, msg_len);
}

int model_shard_load_mem(model_data *out, model_shard_info *info, const uint8_t *bytes, size_t len,
                         const char *name, char *msg, size_t msg_len)
{
    memset(out, 0, sizeof *out);
    model_shard_info tmp;
    if (!info)
        info = &tmp;
    int rc = verify(bytes, len, info, name ? name : "shard", msg, msg_len);
    if (rc)
        return rc;
    rc = model_data_alloc(out, info->sample_count, info->dim, info->classes, info->dtype);
    if (rc)
        return rc;
    uint32_t n = info->sample_count;
    const uint8_t *lab = bytes + MODEL_SHARD_HEADER_SIZE;
    const uint8_t *feat = lab + (size_t)n * 2;
    for (uint32_t i = 0; i < n; i++)
        out->labels[i] = get16(lab + (size_t)i * 2);
    size_t m = (size_t)n * info->dim;
    if (info->dtype == MODEL_DTYPE_U8) {
        memcpy(out->x_u8, feat, m);
    } else {
        for (size_t k = 0; k < m; k++) {
            uint32_t bits = get32(feat + k * 4);
            memcpy(&out->x_f32[k], &bits, 4);
        }
    }
    return MODEL_OK;
}

int model_shard_load(model_data *out, model_shard_info *info, const char *path, char *msg,
                     size_t msg_len)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f) {
        model_msgf(msg, msg_len, "%s: cannot open: %s", path, strerror(errno));
        return MODEL_EIO;
    }
    long size = -1;
    if (fseek(f, 0, SEEK_END) == 0)
        size = ftell(f);
    if (size < 0 || fseek(f, 0, SEEK_SET) != 0) {
        model_msgf(msg, msg_len, "%s: cannot determine the size: %s", path, strerror(errno));
        fclose(f);
        return MODEL_EIO;
    }
    if ((uint64_t)size >
        MODEL_SHARD_HEADER_SIZE + MODEL_DATA_BYTES_MAX + 2ull * MODEL_SAMPLES_MAX) {
        model_msgf(msg, msg_len, "%s: %ld bytes, larger than any valid shard", path, size);
        fclose(f);
        return MODEL_ETOOBIG;
    }
    uint8_t *buf = malloc(size ? (size_t)size : 1);
    if (!buf) {
        fclose(f);
        return MODEL_ENOMEM;
    }
    size_t got = fread(buf, 1, (size_t)size, f);
    int err = ferror(f);
    fclose(f);
    if (err || got != (size_t)size) {
        free(buf);
        model_msgf(msg, msg_len, "%s: read error", path);
        return MODEL_EIO;
    }
    int rc = model_shard_load_mem(out, info, buf, (size_t)size, path, msg, msg_len);
    free(buf);
    return rc;
}

static int split_iid(uint32_t count, uint32_t shards, model_rng *rng, uint32_t *assign,
                     uint32_t *perm)
{
    model_data_shuffle(perm, count, rng);
    for (uint32_t s = 0; s < shards; s++) {
        uint32_t lo = (uint32_t)((uint64_t)count * s / shards);
        uint32_t hi = (uint32_t)((uint64_t)count * (s + 1) / shards);
        for (uint32_t k = lo; k < hi; k++)
            assign[perm[k]] = s;
    }
    return MODEL_OK;
}

int model_shard_split(const model_data *d, uint32_t shards, double alpha, model_rng *rng,
                      uint32_t *assign)
{
    if (shards == 0 || shards > d->count || shards > MODEL_SHARDS_MAX || !d->classes)
        return MODEL_EINVAL;
    uint32_t *perm = malloc((size_t)d->count * sizeof *perm);
    uint32_t *start = calloc((size_t)d->classes + 1, sizeof *start);
    uint32_t *sizes = calloc(shards, sizeof *sizes);
    double *prop = malloc(shards * sizeof *prop);
    int rc = MODEL_OK;
    if (!perm || !start || !sizes || !prop) {
        rc = MODEL_ENOMEM;
        goto done;
    }
    if (!(alpha > 0.0)) {
        rc = split_iid(d->count, shards, rng, assign, perm);
        goto done;
    }
    /* Counting sort by class: perm[start[c] .. start[c+1]) are class c. */
    for (uint32_t i = 0; i < d->count; i++)
        start[d->labels[i] + 1]++;
    for (uint32_t c = 0; c < d->classes; c++)
        start[c + 1] += start[c];
    {
        uint32_t *fill = malloc((size_t)d->classes * sizeof *fill);
        if (!fill) {
            rc = MODEL_ENOMEM;
            goto done;
        }
        memcpy(fill, start, (size_t)d->classes * sizeof *fill);
        for (uint32_t i = 0; i < d->count; i++)
            perm[fill[d->labels[i]]++] = i;
        free(fill);
    }
    rc = MODEL_EEMPTY;
    for (uint32_t attempt = 0; attempt < MODEL_SHARD_SPLIT_TRIES; attempt++) {
        memset(sizes, 0, shards * sizeof *sizes);
        for (uint32_t c = 0; c < d->classes; c++) {
            uint32_t lo = start[c], n = start[c + 1] - lo;
            if (!n)
                continue;
            model_rng_shuffle_u32(rng, perm + lo, n);
            double sum = 0;
            for (uint32_t s = 0; s < shards; s++)
                sum += prop[s] = model_rng_gamma(rng, alpha);
            if (!(sum > 0)) { /* every draw underflowed: give the class to one shard */
                uint32_t s0 = (uint32_t)model_rng_below(rng, shards);
                for (uint32_t s = 0; s < shards; s++)
                    prop[s] = s == s0;
                sum = 1;
            }
            double cum = 0;
            uint32_t k = 0;
            for (uint32_t s = 0; s < shards; s++) {
                cum += prop[s] / sum;
                uint32_t end = s + 1 == shards ? n : (uint32_t)floor(cum * n + 0.5);
                if (end > n)
                    end = n;
                for (; k < end; k++)
                    assign[perm[lo + k]] = s;
            }
        }
        for (uint32_t i = 0; i < d->count; i++)
            sizes[assign[i]]++;
        uint32_t empty = 0;
        for (uint32_t s = 0; s < shards; s++)
            empty += sizes[s] == 0;
        if (!empty) {
            rc = MODEL_OK;
            break;
        }
    }
done:
    free(perm);
    free(start);
    free(sizes);
    free(prop);
    return rc;
}

void model_shard_hash_hex(const uint8_t hash[MODEL_SHARD_HASH_SIZE],
                          char out[2 * MODEL_SHARD_HASH_SIZE + 1])
{
    static const char hex[] = "0123456789abcdef";
    for (unsigned i = 0; i < MODEL_SHARD_HASH_SIZE; i++) {
        out[2 * i] = hex[hash[i] >> 4];
        out[2 * i + 1] = hex[hash[i] & 15];
    }
    out[2 * MODEL_SHARD_HASH_SIZE] = 0;
}
