/* model_data: IDX (plain and gzip) and CSV loaders with every error path,
 * normalisation, gathering, shuffling, subsets; the installed Fashion-MNIST. */
#include "tests/harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "model/data.h"

static char dir[64];
static char msg[MODEL_MSG_MAX];

static int setup(void **state)
{
    (void)state;
    strcpy(dir, "/tmp/murmur-test-data-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static const char *path(const char *name)
{
    static char p[4][128];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static void write_bytes(const char *p, const uint8_t *b, size_t n, int gz)
{
    if (gz) {
        gzFile f = gzopen(p, "wb");
        assert_non_null(f);
        assert_int_equal(gzwrite(f, b, (unsigned)n), (int)n);
        assert_int_equal(gzclose(f), Z_OK);
    } else {
        FILE *f = fopen(p, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(b, 1, n, f), n);
        fclose(f);
    }
}

static void be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8),
    p[3] = (uint8_t)v;
}

/* count images of rows x cols, pixel = (i * 7 + j) & 255, label = i % classes */
static size_t idx_images(uint8_t *b, uint32_t count, uint32_t rows, uint32_t cols)
{
    be32(b, 0x803), be32(b + 4, count), be32(b + 8, rows), be32(b + 12, cols);
    size_t n = 16;
    for (uint32_t i = 0; i < count; i++)
        for (uint32_t j = 0; j < rows * cols; j++)
            b[n++] = (uint8_t)((i * 7 + j) & 255);
    return n;
}

static size_t idx_labels(uint8_t *b, uint32_t count, uint32_t classes)
{
    be32(b, 0x801), be32(b + 4, count);
    for (uint32_t i = 0; i < count; i++)
        b[8 + i] = (uint8_t)(i % classes);
    return 8 + count;
}

static void expect(int rc, int want, const char *needle)
{
    if (rc != want)
        fail_msg("got %d (%s), wanted %d (%s); message: %s", rc, model_strerror(rc), want,
                 model_strerror(want), msg);
    if (needle && !strstr(msg, needle))
        fail_msg("message '%s' does not mention '%s'", msg, needle);
}

static void idx_round_trip_plain_and_gzip(void **state)
{
    (void)state;
    static uint8_t img[16 + 30 * 12], lab[8 + 30];
    size_t ni = idx_images(img, 30, 3, 4), nl = idx_labels(lab, 30, 10);
    for (int gz = 0; gz < 2; gz++) {
        write_bytes(path("i"), img, ni, gz);
        write_bytes(path("l"), lab, nl, gz);
        model_data d;
        expect(model_idx_load(&d, path("i"), path("l"), 0, msg, sizeof msg), 0, NULL);
        assert_int_equal(d.count, 30);
        assert_int_equal(d.dim, 12);
        assert_int_equal(d.classes, 10);
        assert_int_equal(d.dtype, MODEL_DTYPE_U8);
        assert_memory_equal(d.x_u8, img + 16, 30 * 12);
        for (uint32_t i = 0; i < 30; i++)
            assert_int_equal(d.labels[i], i % 10);
        model_data_free(&d);
        assert_null(d.labels);
    }
}

static void idx_errors(void **state)
{
    (void)state;
    static uint8_t img[16 + 30 * 12], lab[8 + 30], gzbuf[4096];
    size_t ni = idx_images(img, 30, 3, 4), nl = idx_labels(lab, 30, 10);
    model_data d;
    write_bytes(path("l.gz"), lab, nl, 1);
    /* missing file */
    expect(model_idx_load(&d, path("nope"), path("l.gz"), 0, msg, sizeof msg), MODEL_EIO, "nope");
    /* truncated plain file */
    write_bytes(path("t"), img, ni - 5, 0);
    expect(model_idx_load(&d, path("t"), path("l.gz"), 0, msg, sizeof msg), MODEL_ETRUNC,
           "truncated");
    assert_non_null(strstr(msg, path("t")));
    /* truncated gzip stream: cut the compressed file in half */
    write_bytes(path("full.gz"), img, ni, 1);
    FILE *f = fopen(path("full.gz"), "rb");
    size_t gzn = fread(gzbuf, 1, sizeof gzbuf, f);
    fclose(f);
    write_bytes(path("cut.gz"), gzbuf, gzn / 2, 0);
    expect(model_idx_load(&d, path("cut.gz"), path("l.gz"), 0, msg, sizeof msg), MODEL_ETRUNC,
           "cut.gz");
    /* corrupt gzip: damage the deflate data */
    for (size_t k = 20; k < 40 && k < gzn; k++)
        gzbuf[k] ^= 0x5A;
    write_bytes(path("bad.gz"), gzbuf, gzn, 0);
    int rc = model_idx_load(&d, path("bad.gz"), path("l.gz"), 0, msg, sizeof msg);
    if (rc != MODEL_ECORRUPT && rc != MODEL_EMAGIC)
        fail_msg("corrupt gzip gave %s: %s", model_strerror(rc), msg);
    assert_non_null(strstr(msg, "bad.gz"));
    /* bad magic: labels given as images, and images as labels */
    write_bytes(path("i"), img, ni, 0);
    expect(model_idx_load(&d, path("l.gz"), path("l.gz"), 0, msg, sizeof msg), MODEL_EMAGIC,
           "magic");
    expect(model_idx_load(&d, path("i"), path("i"), 0, msg, sizeof msg), MODEL_EMAGIC, "labels");
    /* counts disagree */
    uint8_t lab29[8 + 29];
    write_bytes(path("l29"), lab29, idx_labels(lab29, 29, 10), 0);
    expect(model_idx_load(&d, path("i"), path("l29"), 0, msg, sizeof msg), MODEL_EMISMATCH,
           "29 labels");
    /* label out of range for the given class count */
    expect(model_idx_load(&d, path("i"), path("l.gz"), 5, msg, sizeof msg), MODEL_ELABEL,
           "label 5");
    /* trailing bytes after the announced data */
    uint8_t longer[sizeof img + 3] = {0};
    memcpy(longer, img, ni);
    write_bytes(path("long"), longer, ni + 3, 0);
    expect(model_idx_load(&d, path("long"), path("l.gz"), 0, msg, sizeof msg), MODEL_ECORRUPT,
           "trailing");
    /* empty and absurd headers */
    uint8_t hdr[16];
    be32(hdr, 0x803), be32(hdr + 4, 0), be32(hdr + 8, 3), be32(hdr + 12, 4);
    write_bytes(path("empty"), hdr, 16, 0);
    expect(model_idx_load(&d, path("empty"), path("l.gz"), 0, msg, sizeof msg), MODEL_EEMPTY, NULL);
    be32(hdr + 4, 0xFFFFFFFF), be32(hdr + 8, 0xFFFF), be32(hdr + 12, 0xFFFF);
    write_bytes(path("huge"), hdr, 16, 0);
    expect(model_idx_load(&d, path("huge"), path("l.gz"), 0, msg, sizeof msg), MODEL_ETOOBIG, NULL);
    assert_null(d.labels);
}

/* In a child limited to its current address space + 1 GiB: the result of
 * loading images/labels, or -1 if the child died. */
static int idx_load_limited(const char *images, const char *labels)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        long pages = 0;
        FILE *f = fopen("/proc/self/statm", "r");
        if (!f || fscanf(f, "%ld", &pages) != 1)
            _exit(100);
        fclose(f);
        rlim_t lim = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + (1ull << 30);
        struct rlimit rl = {lim, lim};
        if (setrlimit(RLIMIT_AS, &rl) != 0)
            _exit(101);
        model_data d;
        int rc = model_idx_load(&d, images, labels, 0, msg, sizeof msg);
        model_data_free(&d);
        _exit(rc);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Found while writing fuzz_idx: headers announcing 4 GiB of pixels in files of a few
 * bytes, plain or gzip, are refused as truncated before anything is
 * allocated for them (before the fix: ENOMEM under a 1 GiB limit, and a
 * 16 GiB allocation without one). */
static void idx_header_larger_than_file(void **state)
{
    (void)state;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    skip(); /* the sanitizers reserve terabytes of address space */
#endif
    uint8_t hdr[16], lhdr[8];
    be32(hdr, 0x803), be32(hdr + 4, 1u << 20), be32(hdr + 8, 64), be32(hdr + 12, 64);
    be32(lhdr, 0x801), be32(lhdr + 4, 1u << 20);
    write_bytes(path("big-i"), hdr, sizeof hdr, 0);
    write_bytes(path("big-l"), lhdr, sizeof lhdr, 0);
    write_bytes(path("big-i.gz"), hdr, sizeof hdr, 1);
    assert_int_equal(idx_load_limited(path("big-i"), path("big-l")), MODEL_ETRUNC);
    assert_int_equal(idx_load_limited(path("big-i.gz"), path("big-l")), MODEL_ETRUNC);
    model_data d;
    expect(model_idx_load(&d, path("big-i.gz"), path("big-l"), 0, msg, sizeof msg), MODEL_ETRUNC,
           "compressed file");
    expect(model_idx_load(&d, path("big-i"), path("big-l"), 0, msg, sizeof msg), MODEL_ETRUNC,
           "plain file");
    assert_null(d.labels);
}

static void fashion_dir_dim_mismatch(void **state)
{
    (void)state;
    static uint8_t img[16 + 30 * 12], lab[8 + 30];
    char sub[128];
    snprintf(sub, sizeof sub, "%s/fm", dir);
    assert_int_equal(mkdir(sub, 0700), 0);
    char p[256];
    snprintf(p, sizeof p, "%s/train-images-idx3-ubyte.gz", sub);
    write_bytes(p, img, idx_images(img, 30, 3, 4), 1);
    snprintf(p, sizeof p, "%s/train-labels-idx1-ubyte.gz", sub);
    write_bytes(p, lab, idx_labels(lab, 30, 10), 1);
    snprintf(p, sizeof p, "%s/t10k-labels-idx1-ubyte", sub); /* plain works too */
    write_bytes(p, lab, idx_labels(lab, 20, 10), 0);
    snprintf(p, sizeof p, "%s/t10k-images-idx3-ubyte.gz", sub);
    write_bytes(p, img, idx_images(img, 20, 4, 4), 1);
    model_data tr, te;
    expect(model_fashion_load(&tr, &te, sub, msg, sizeof msg), MODEL_EDIM, "16 features");
    write_bytes(p, img, idx_images(img, 20, 3, 4), 1);
    expect(model_fashion_load(&tr, &te, sub, msg, sizeof msg), 0, NULL);
    assert_int_equal(tr.count, 30);
    assert_int_equal(te.count, 20);
    /* the test set is checked against the training set's classes */
    snprintf(p, sizeof p, "%s/train-labels-idx1-ubyte.gz", sub);
    model_data_free(&tr);
    model_data_free(&te);
    write_bytes(p, lab, idx_labels(lab, 30, 5), 1);
    expect(model_fashion_load(&tr, &te, sub, msg, sizeof msg), MODEL_ELABEL, "t10k-labels");
}

static void write_text(const char *p, const char *s)
{
    write_bytes(p, (const uint8_t *)s, strlen(s), 0);
}

static void csv_loads_and_rejects(void **state)
{
    (void)state;
    model_data d;
    write_text(path("ok.csv"), "label,a,b,c\n1, 0.5,2,-3\r\n\n0,1e2,0,0\n2,1,1,1");
    expect(model_csv_load(&d, path("ok.csv"), 0, msg, sizeof msg), 0, NULL);
    assert_int_equal(d.count, 3);
    assert_int_equal(d.dim, 3);
    assert_int_equal(d.classes, 3);
    assert_int_equal(d.dtype, MODEL_DTYPE_F32);
    assert_true(d.x_f32[0] == 0.5f && d.x_f32[2] == -3.0f && d.x_f32[3] == 100.0f);
    assert_true(d.labels[0] == 1 && d.labels[1] == 0 && d.labels[2] == 2);
    model_data_free(&d);
    write_text(path("junk.csv"), "1,2,3\n0,4,x5\n");
    expect(model_csv_load(&d, path("junk.csv"), 0, msg, sizeof msg), MODEL_ECSV,
           "junk.csv:2: column 3");
    write_text(path("nan.csv"), "1,2,nan\n");
    expect(model_csv_load(&d, path("nan.csv"), 0, msg, sizeof msg), MODEL_ECSV, "column 3");
    write_text(path("empty_field.csv"), "1,2,,4\n");
    expect(model_csv_load(&d, path("empty_field.csv"), 0, msg, sizeof msg), MODEL_ECSV, NULL);
    write_text(path("ragged.csv"), "1,2,3\n0,4\n");
    expect(model_csv_load(&d, path("ragged.csv"), 0, msg, sizeof msg), MODEL_EDIM, "ragged.csv:2");
    write_text(path("neg.csv"), "1,2\n-1,3\n");
    expect(model_csv_load(&d, path("neg.csv"), 0, msg, sizeof msg), MODEL_ELABEL, "neg.csv:2");
    write_text(path("frac.csv"), "1.5,2\n");
    expect(model_csv_load(&d, path("frac.csv"), 0, msg, sizeof msg), MODEL_ELABEL, NULL);
    write_text(path("range.csv"), "1,2\n7,3\n");
    expect(model_csv_load(&d, path("range.csv"), 5, msg, sizeof msg), MODEL_ELABEL, "7");
    write_text(path("label_junk.csv"), "1,2\nabc,3\n");
    expect(model_csv_load(&d, path("label_junk.csv"), 0, msg, sizeof msg), MODEL_ECSV, "column 1");
    write_text(path("only_header.csv"), "label,x\n\n");
    expect(model_csv_load(&d, path("only_header.csv"), 0, msg, sizeof msg), MODEL_EEMPTY, NULL);
    write_text(path("nofeat.csv"), "1\n");
    expect(model_csv_load(&d, path("nofeat.csv"), 0, msg, sizeof msg), MODEL_EDIM, NULL);
    expect(model_csv_load(&d, path("missing.csv"), 0, msg, sizeof msg), MODEL_EIO, "missing.csv");
    assert_null(d.x_f32);
}

static void norm_and_gather(void **state)
{
    (void)state;
    model_data d;
    assert_int_equal(model_data_alloc(&d, 4, 2, 2, MODEL_DTYPE_U8), 0);
    static const uint8_t x[8] = {0, 10, 255, 10, 0, 10, 255, 10};
    memcpy(d.x_u8, x, 8);
    for (int i = 0; i < 4; i++)
        d.labels[i] = (uint16_t)(i & 1);
    model_norm n;
    float out[8];
    uint16_t y[4];
    uint32_t rows[4] = {3, 0, 1, 2};
    assert_int_equal(model_norm_fit(&n, &d, MODEL_NORM_UNIT), 0);
    model_data_gather(&d, &n, rows, 2, out, y);
    assert_true(out[0] == 1.0f && fabsf(out[1] - 10 / 255.0f) < 1e-7f && out[2] == 0.0f);
    assert_true(y[0] == 1 && y[1] == 0);
    model_norm_free(&n);
    assert_int_equal(model_norm_fit(&n, &d, MODEL_NORM_FEATURE), 0);
    model_data_gather(&d, &n, rows, 4, out, NULL);
    /* feature 0 is 0/255 half and half -> +-1; feature 1 constant -> 0 */
    for (int i = 0; i < 4; i++) {
        assert_true(fabsf(fabsf(out[2 * i]) - 1.0f) < 1e-6f);
        assert_true(fabsf(out[2 * i + 1]) < 1e-6f);
    }
    model_norm_free(&n);
    assert_int_equal(model_norm_fit(&n, &d, MODEL_NORM_GLOBAL), 0);
    model_data_gather(&d, &n, rows, 4, out, NULL);
    double s = 0, s2 = 0;
    for (int i = 0; i < 8; i++)
        s += out[i], s2 += (double)out[i] * out[i];
    assert_true(fabs(s / 8) < 1e-6 && fabs(s2 / 8 - 1) < 1e-5);
    model_norm_free(&n);
    model_data_gather(&d, NULL, rows, 1, out, NULL);
    assert_true(out[0] == 255.0f && out[1] == 10.0f);
    model_norm_mode m;
    assert_int_equal(model_norm_parse("feature", &m), 0);
    assert_int_equal(m, MODEL_NORM_FEATURE);
    assert_int_equal(model_norm_parse("zscore", &m), MODEL_EINVAL);
    model_data empty = {0};
    empty.dim = 2;
    assert_int_equal(model_norm_fit(&n, &empty, MODEL_NORM_FEATURE), MODEL_EEMPTY);
    /* subset and concat */
    model_data sub, cat;
    uint32_t pick[2] = {1, 2};
    uint32_t oob[1] = {4};
    assert_int_equal(model_data_subset(&sub, &d, oob, 1), MODEL_EINVAL);
    assert_int_equal(model_data_subset(&sub, &d, pick, 2), 0);
    assert_true(sub.x_u8[0] == 255 && sub.x_u8[2] == 0 && sub.labels[0] == 1 && sub.labels[1] == 0);
    model_data parts[2] = {d, sub};
    assert_int_equal(model_data_concat(&cat, parts, 2, msg, sizeof msg), 0);
    assert_int_equal(cat.count, 6);
    assert_memory_equal(cat.x_u8, d.x_u8, 8);
    assert_memory_equal(cat.x_u8 + 8, sub.x_u8, 4);
    model_data_free(&cat);
    parts[1].dim = 3;
    assert_int_equal(model_data_concat(&cat, parts, 2, msg, sizeof msg), MODEL_EDIM);
    model_data_free(&sub);
    model_data_free(&d);
}

/* The vectorised row loops of model_data_gather give the bits of the
 * element-wise formula at every width (a vector body and a tail), after
 * model_data_prefetch of the same rows, which changes nothing. */
static void gather_rows_same_bits_after_prefetch(void **state)
{
    (void)state;
    static const uint32_t dims[] = {1, 37, 800};
    for (size_t k = 0; k < sizeof dims / sizeof dims[0]; k++) {
        const uint32_t dim = dims[k], count = 5;
        for (int f32 = 0; f32 < 2; f32++) {
            model_data d;
            assert_int_equal(
                model_data_alloc(&d, count, dim, 3, f32 ? MODEL_DTYPE_F32 : MODEL_DTYPE_U8), 0);
            model_norm n = {.dim = dim, .mode = MODEL_NORM_FEATURE};
            n.scale = malloc(dim * sizeof *n.scale);
            n.offset = malloc(dim * sizeof *n.offset);
            float *out = malloc((size_t)count * dim * sizeof *out);
            assert_non_null(n.scale);
            assert_non_null(n.offset);
            assert_non_null(out);
            for (uint32_t j = 0; j < dim; j++) {
                n.scale[j] = 1.0f / (float)(j + 3);
                n.offset[j] = -0.1f * (float)(j % 7);
            }
            for (uint32_t i = 0; i < count * dim; i++) {
                if (f32)
                    d.x_f32[i] = 0.37f * (float)(i % 251) - 11.0f;
                else
                    d.x_u8[i] = (uint8_t)(i * 7 + 3);
            }
            for (uint32_t i = 0; i < count; i++)
                d.labels[i] = (uint16_t)(i % 3);
            uint32_t rows[5] = {4, 1, 3, 0, 2};
            uint16_t y[5];
            model_data_prefetch(&d, rows, count);
            model_data_gather(&d, &n, rows, count, out, y);
            for (uint32_t i = 0; i < count; i++) {
                assert_int_equal(y[i], rows[i] % 3);
                for (uint32_t j = 0; j < dim; j++) {
                    size_t at = (size_t)rows[i] * dim + j;
                    float v = f32 ? d.x_f32[at] : (float)d.x_u8[at];
                    float want = v * n.scale[j] + n.offset[j];
                    if (memcmp(&out[(size_t)i * dim + j], &want, sizeof want))
                        fail_msg("dim %u %s row %u feature %u: %a, want %a", dim,
                                 f32 ? "f32" : "u8", i, j, (double)out[(size_t)i * dim + j],
                                 (double)want);
                }
            }
            free(out);
            model_norm_free(&n);
            model_data_free(&d);
        }
    }
    model_data empty = {0};
    model_data_prefetch(&empty, NULL, 0); /* no rows, no features: nothing */
    empty.dim = 4;
    model_data_prefetch(&empty, (const uint32_t[]){0}, 1); /* no feature buffer: nothing */
}

static void shuffle_is_a_seeded_permutation(void **state)
{
    (void)state;
    enum { N = 1000 };
    static uint32_t a[N], b[N], c[N];
    uint64_t seed = test_seed(4);
    model_rng r1, r2, r3;
    model_rng_seed(&r1, seed, 1);
    model_rng_seed(&r2, seed, 1);
    model_rng_seed(&r3, seed + 1, 1);
    model_data_shuffle(a, N, &r1);
    model_data_shuffle(b, N, &r2);
    model_data_shuffle(c, N, &r3);
    assert_memory_equal(a, b, sizeof a);
    assert_true(memcmp(a, c, sizeof a) != 0);
    static uint8_t seen[N];
    int fixed = 0;
    for (int i = 0; i < N; i++) {
        assert_true(a[i] < N && !seen[a[i]]);
        seen[a[i]] = 1;
        fixed += a[i] == (uint32_t)i;
    }
    if (fixed > 10)
        fail_msg("seed %llu: %d fixed points, not shuffled", (unsigned long long)seed, fixed);
}

static void installed_fashion_mnist(void **state)
{
    (void)state;
    if (access(MODEL_FASHION_DIR "/train-images-idx3-ubyte.gz", R_OK) != 0)
        skip(); /* scripts/deps.sh installs dataset-fashion-mnist */
    model_data tr, te;
    expect(model_fashion_load(&tr, &te, NULL, msg, sizeof msg), 0, NULL);
    assert_int_equal(tr.count, 60000);
    assert_int_equal(te.count, 10000);
    assert_int_equal(tr.dim, 784);
    assert_int_equal(tr.classes, 10);
    assert_int_equal(te.classes, 10);
    uint32_t hist[10] = {0};
    for (uint32_t i = 0; i < te.count; i++)
        hist[te.labels[i]]++;
    for (int c = 0; c < 10; c++)
        assert_int_equal(hist[c], 1000); /* the test set is balanced */
    model_data_free(&tr);
    model_data_free(&te);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(idx_round_trip_plain_and_gzip),
        cmocka_unit_test(idx_errors),
        cmocka_unit_test(idx_header_larger_than_file),
        cmocka_unit_test(fashion_dir_dim_mismatch),
        cmocka_unit_test(csv_loads_and_rejects),
        cmocka_unit_test(norm_and_gather),
        cmocka_unit_test(gather_rows_same_bits_after_prefetch),
        cmocka_unit_test(shuffle_is_a_seeded_permutation),
        cmocka_unit_test(installed_fashion_mnist),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
