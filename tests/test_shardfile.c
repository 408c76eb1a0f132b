/* model_shard: the file format (golden bytes, hash cross-checked with
 * Python's hashlib.blake2b), round trips, tamper detection, every rejection,
 * and the IID / Dirichlet splits (skew, balance, determinism). */
#include "tests/harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/shardfile.h"

static char msg[MODEL_MSG_MAX];

static void expect(int rc, int want)
{
    if (rc != want)
        fail_msg("got %d (%s), wanted %d (%s); message: %s", rc, model_strerror(rc), want,
                 model_strerror(want), msg);
}

/* 2 samples, dim 3, classes 4, uint8; shard 0 of 1. Bytes and hash made by
 *   desc = struct.pack('<HBBIII', 1, 1, 0, 2, 3, 4)
 *   payload = struct.pack('<HH', 1, 3) + bytes([1, 2, 3, 4, 5, 6])
 *   hashlib.blake2b(desc + payload, digest_size=32) */
static const uint8_t golden[82] = {
    0x4D, 0x52, 0x4D, 0x53, 0x48, 0x41, 0x52, 0x44, 0x01, 0x00, 0x01, 0x00, 0x02, 0x00,
    0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x00, 0x00, 0x0A, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x24, 0x65,
    0xA3, 0x97, 0xEF, 0xC8, 0x22, 0xF7, 0xDC, 0x3D, 0x92, 0x33, 0x15, 0x59, 0x14, 0xEA,
    0xE4, 0xFE, 0x57, 0xCB, 0x80, 0x11, 0x57, 0x7E, 0x5F, 0x8D, 0x91, 0xC4, 0x68, 0x3A,
    0x1C, 0x3B, 0x01, 0x00, 0x03, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06};

static void tiny(model_data *d)
{
    assert_int_equal(model_data_alloc(d, 2, 3, 4, MODEL_DTYPE_U8), 0);
    static const uint8_t x[6] = {1, 2, 3, 4, 5, 6};
    memcpy(d->x_u8, x, 6);
    d->labels[0] = 1;
    d->labels[1] = 3;
}

static void golden_bytes_and_hash(void **state)
{
    (void)state;
    model_data d;
    tiny(&d);
    assert_int_equal(model_shard_size(&d, 2), sizeof golden);
    uint8_t buf[sizeof golden], h[32], h2[32];
    assert_int_equal(model_shard_encode(&d, NULL, 0, 0, 1, buf, sizeof buf, h), 0);
    assert_memory_equal(buf, golden, sizeof golden);
    assert_memory_equal(h, golden + 40, 32);
    assert_int_equal(model_shard_hash(golden, sizeof golden, h2), 0);
    assert_memory_equal(h2, golden + 40, 32);
    char hex[65];
    model_shard_hash_hex(h, hex);
    assert_string_equal(hex, "2465a397efc822f7dc3d9233155914eae4fe57cb8011577e5f8d91c4683a1c3b");
    /* the address ignores where the shard sits in its split */
    assert_int_equal(model_shard_encode(&d, NULL, 0, 5, 9, buf, sizeof buf, h2), 0);
    assert_memory_equal(h, h2, 32);
    assert_int_equal(model_shard_encode(&d, NULL, 0, 9, 9, buf, sizeof buf, h2), MODEL_EINVAL);
    assert_int_equal(model_shard_encode(&d, NULL, 0, 0, 1, buf, sizeof buf - 1, h2), MODEL_EINVAL);
    uint32_t oob[1] = {2};
    assert_int_equal(model_shard_encode(&d, oob, 1, 0, 1, buf, sizeof buf, h2), MODEL_EINVAL);
    model_data_free(&d);
}

static void random_data(model_data *d, uint32_t n, uint32_t dim, uint32_t classes, model_dtype dt,
                        model_rng *r)
{
    assert_int_equal(model_data_alloc(d, n, dim, classes, dt), 0);
    for (size_t k = 0; k < (size_t)n * dim; k++) {
        if (dt == MODEL_DTYPE_U8)
            d->x_u8[k] = (uint8_t)model_rng_u64(r);
        else
            d->x_f32[k] = (float)model_rng_normal(r);
    }
    for (uint32_t i = 0; i < n; i++)
        d->labels[i] = (uint16_t)model_rng_below(r, classes);
}

static void round_trip_file_and_memory(void **state)
{
    (void)state;
    uint64_t seed = test_seed(8);
    model_rng r;
    model_rng_seed(&r, seed, 0);
    char dir[] = "/tmp/murmur-test-shard-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char p[128];
    snprintf(p, sizeof p, "%s/s.msh", dir);
    for (int dt = MODEL_DTYPE_U8; dt <= MODEL_DTYPE_F32; dt++) {
        model_data d, back;
        random_data(&d, 300, 17, 7, (model_dtype)dt, &r);
        uint32_t rows[100];
        for (uint32_t k = 0; k < 100; k++)
            rows[k] = k * 3;
        uint8_t h[32];
        expect(model_shard_write(p, &d, rows, 100, 2, 3, h, msg, sizeof msg), 0);
        model_shard_info info;
        expect(model_shard_load(&back, &info, p, msg, sizeof msg), 0);
        assert_int_equal(info.sample_count, 100);
        assert_int_equal(info.dim, 17);
        assert_int_equal(info.classes, 7);
        assert_int_equal(info.shard_index, 2);
        assert_int_equal(info.shard_count, 3);
        assert_int_equal(info.dtype, dt);
        assert_memory_equal(info.hash, h, 32);
        size_t es = model_dtype_size((model_dtype)dt);
        for (uint32_t k = 0; k < 100; k++) {
            assert_int_equal(back.labels[k], d.labels[rows[k]]);
            const uint8_t *a = dt == MODEL_DTYPE_U8 ? d.x_u8 : (const uint8_t *)d.x_f32;
            const uint8_t *b = dt == MODEL_DTYPE_U8 ? back.x_u8 : (const uint8_t *)back.x_f32;
            assert_memory_equal(b + k * 17 * es, a + rows[k] * 17 * es, 17 * es);
        }
        /* from memory: the same bytes give the same data and hash */
        size_t len = model_shard_size(&d, 100);
        uint8_t *buf = malloc(len);
        FILE *f = fopen(p, "rb");
        assert_int_equal(fread(buf, 1, len + 1, f), len);
        fclose(f);
        model_data mem;
        expect(model_shard_load_mem(&mem, NULL, buf, len, "peer", msg, sizeof msg), 0);
        assert_memory_equal(mem.labels, back.labels, 200);
        assert_memory_equal(dt == MODEL_DTYPE_U8 ? (void *)mem.x_u8 : (void *)mem.x_f32,
                            dt == MODEL_DTYPE_U8 ? (void *)back.x_u8 : (void *)back.x_f32,
                            100 * 17 * es);
        uint8_t h2[32];
        assert_int_equal(model_shard_hash(buf, len, h2), 0);
        assert_memory_equal(h, h2, 32);
        /* re-encoding the loaded data reproduces the file byte for byte */
        uint8_t *again = malloc(len);
        assert_int_equal(model_shard_encode(&back, NULL, 0, 2, 3, again, len, NULL), 0);
        assert_memory_equal(again, buf, len);
        free(again);
        free(buf);
        model_data_free(&mem);
        model_data_free(&back);
        model_data_free(&d);
    }
    expect(model_shard_load(&(model_data){0}, NULL, "/nonexistent/x.msh", msg, sizeof msg),
           MODEL_EIO);
    unlink(p);
    rmdir(dir);
}

static void tampering_and_malformed_are_rejected(void **state)
{
    (void)state;
    uint8_t b[sizeof golden + 1];
    model_data d;
    model_shard_info info;
    expect(model_shard_verify(golden, sizeof golden, &info, msg, sizeof msg), 0);
    /* each payload byte and each descriptor byte is covered by the hash */
    for (size_t k = 72; k < sizeof golden; k++) {
        memcpy(b, golden, sizeof golden);
        b[k] ^= 1;
        expect(model_shard_load_mem(&d, NULL, b, sizeof golden, "t", msg, sizeof msg), MODEL_EHASH);
        assert_non_null(strstr(msg, "hash mismatch"));
    }
    memcpy(b, golden, sizeof golden);
    b[20] = 5; /* classes 4 -> 5: same sizes, different content address */
    expect(model_shard_verify(b, sizeof golden, NULL, msg, sizeof msg), MODEL_EHASH);
    memcpy(b, golden, sizeof golden);
    b[45] ^= 0x80; /* the stored hash itself */
    expect(model_shard_verify(b, sizeof golden, NULL, msg, sizeof msg), MODEL_EHASH);
    /* structure */
    expect(model_shard_verify(golden, 71, NULL, msg, sizeof msg), MODEL_ETRUNC);
    expect(model_shard_verify(golden, sizeof golden - 1, NULL, msg, sizeof msg), MODEL_ETRUNC);
    memcpy(b, golden, sizeof golden);
    b[sizeof golden] = 0;
    expect(model_shard_verify(b, sizeof golden + 1, NULL, msg, sizeof msg), MODEL_ECORRUPT);
    memcpy(b, golden, sizeof golden);
    b[0] = 'X';
    expect(model_shard_verify(b, sizeof golden, NULL, msg, sizeof msg), MODEL_EMAGIC);
    memcpy(b, golden, sizeof golden);
    b[8] = 2;
    expect(model_shard_verify(b, sizeof golden, NULL, msg, sizeof msg), MODEL_EVERSION);
    memcpy(b, golden, sizeof golden);
    b[10] = 3; /* dtype */
    expect(model_shard_verify(b, sizeof golden, NULL, msg, sizeof msg), MODEL_ECORRUPT);
    memcpy(b, golden, sizeof golden);
    b[32] = 11; /* payload_len */
    expect(model_shard_verify(b, sizeof golden, NULL, msg, sizeof msg), MODEL_ECORRUPT);
    memcpy(b, golden, sizeof golden);
    b[24] = 1; /* index 1 of 1 */
    expect(model_shard_verify(b, sizeof golden, NULL, msg, sizeof msg), MODEL_ECORRUPT);
    memcpy(b, golden, sizeof golden);
    b[12] = 0; /* zero samples */
    expect(model_shard_verify(b, sizeof golden, NULL, msg, sizeof msg), MODEL_ECORRUPT);
    uint8_t h[32];
    assert_int_equal(model_shard_hash(b, sizeof golden, h), MODEL_ECORRUPT);
    /* a label >= classes under a valid hash (a buggy writer) */
    model_data bad;
    tiny(&bad);
    bad.labels[1] = 4;
    uint8_t enc[sizeof golden];
    assert_int_equal(model_shard_encode(&bad, NULL, 0, 0, 1, enc, sizeof enc, NULL), 0);
    expect(model_shard_verify(enc, sizeof enc, NULL, msg, sizeof msg), MODEL_ELABEL);
    model_data_free(&bad);
    /* hostile random bytes never crash and never pass */
    model_rng r;
    model_rng_seed(&r, test_seed(2), 0);
    for (int t = 0; t < 2000; t++) {
        memcpy(b, golden, sizeof golden);
        int flips = 1 + (int)model_rng_below(&r, 4);
        for (int k = 0; k < flips; k++)
            b[8 + model_rng_below(&r, sizeof golden - 8)] ^=
                (uint8_t)(1 + model_rng_below(&r, 255));
        size_t len = 72 + model_rng_below(&r, sizeof golden - 71);
        int rc = model_shard_verify(b, len, NULL, msg, sizeof msg);
        /* accepted only if every hashed byte is intact (index/count may differ) */
        if (rc == 0)
            assert_true(len == sizeof golden && !memcmp(b, golden, 24) &&
                        !memcmp(b + 32, golden + 32, len - 32));
    }
}

/* Total-variation distance between a shard's label distribution and the
 * data set's, averaged over shards. */
static double mean_skew(const model_data *d, const uint32_t *assign, uint32_t shards)
{
    double *h = calloc((size_t)shards * d->classes, sizeof *h), *g = calloc(d->classes, sizeof *g);
    double *n = calloc(shards, sizeof *n);
    for (uint32_t i = 0; i < d->count; i++) {
        h[(size_t)assign[i] * d->classes + d->labels[i]]++;
        g[d->labels[i]]++;
        n[assign[i]]++;
    }
    double tv = 0;
    for (uint32_t s = 0; s < shards; s++) {
        double t = 0;
        for (uint32_t c = 0; c < d->classes; c++)
            t += fabs(h[(size_t)s * d->classes + c] / n[s] - g[c] / d->count);
        tv += t / 2;
    }
    free(h);
    free(g);
    free(n);
    return tv / shards;
}

static void splits_iid_and_dirichlet(void **state)
{
    (void)state;
    uint64_t seed = test_seed(31);
    model_rng r;
    model_rng_seed(&r, seed, 0);
    model_data d;
    random_data(&d, 20000, 1, 10, MODEL_DTYPE_U8, &r);
    enum { S = 10 };
    uint32_t *a = malloc(d.count * sizeof *a), *b = malloc(d.count * sizeof *b);
    /* IID: sizes within one, label mix close to the whole */
    model_rng_seed(&r, seed, 1);
    assert_int_equal(model_shard_split(&d, S, 0, &r, a), 0);
    uint32_t sizes[S] = {0};
    for (uint32_t i = 0; i < d.count; i++) {
        assert_true(a[i] < S);
        sizes[a[i]]++;
    }
    for (int s = 0; s < S; s++)
        assert_int_equal(sizes[s], 2000);
    double iid = mean_skew(&d, a, S);
    /* expected TV for 2000 multinomial draws over 10 classes is ~0.03 */
    if (iid > 0.05)
        fail_msg("seed %llu: IID split skew %g", (unsigned long long)seed, iid);
    /* deterministic for the seed, different for another */
    model_rng_seed(&r, seed, 1);
    assert_int_equal(model_shard_split(&d, S, 0, &r, b), 0);
    assert_memory_equal(a, b, d.count * sizeof *a);
    model_rng_seed(&r, seed + 1, 1);
    assert_int_equal(model_shard_split(&d, S, 0, &r, b), 0);
    assert_true(memcmp(a, b, d.count * sizeof *a) != 0);
    /* Dirichlet 0.1: strongly skewed; 1000: nearly IID; deterministic */
    model_rng_seed(&r, seed, 2);
    assert_int_equal(model_shard_split(&d, S, 0.1, &r, a), 0);
    double skewed = mean_skew(&d, a, S);
    if (skewed < 0.5)
        fail_msg("seed %llu: Dirichlet(0.1) skew only %g", (unsigned long long)seed, skewed);
    model_rng_seed(&r, seed, 2);
    assert_int_equal(model_shard_split(&d, S, 0.1, &r, b), 0);
    assert_memory_equal(a, b, d.count * sizeof *a);
    memset(sizes, 0, sizeof sizes);
    for (uint32_t i = 0; i < d.count; i++)
        sizes[a[i]]++;
    for (int s = 0; s < S; s++)
        assert_true(sizes[s] > 0);
    model_rng_seed(&r, seed, 3);
    assert_int_equal(model_shard_split(&d, S, 1000, &r, a), 0);
    double mild = mean_skew(&d, a, S);
    if (mild > 0.08)
        fail_msg("seed %llu: Dirichlet(1000) skew %g", (unsigned long long)seed, mild);
    /* arguments */
    assert_int_equal(model_shard_split(&d, 0, 0, &r, a), MODEL_EINVAL);
    assert_int_equal(model_shard_split(&d, d.count + 1, 0, &r, a), MODEL_EINVAL);
    /* a shard that cannot get a sample: 3 samples of one class, 3 shards, tiny alpha */
    model_data small;
    random_data(&small, 3, 1, 1, MODEL_DTYPE_U8, &r);
    assert_int_equal(model_shard_split(&small, 3, 1e-3, &r, a), MODEL_EEMPTY);
    model_data_free(&small);
    free(a);
    free(b);
    model_data_free(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(golden_bytes_and_hash),
        cmocka_unit_test(round_trip_file_and_memory),
        cmocka_unit_test(tampering_and_malformed_are_rejected),
        cmocka_unit_test(splits_iid_and_dirichlet),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
