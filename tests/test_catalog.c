/* agent/catalog: the shard catalog loader (SHARDS_DIR/catalog, as
 * `murmur shard` writes it): shard lines, comments, errors. */
#include "tests/harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/stat.h>

#include "agent/runtime_internal.h"
#include "agent/store_file.h"
#include "model/shardfile.h"

static char dir[64];

static int setup(void **state)
{
    (void)state;
    strcpy(dir, "/tmp/murmur-test-catalog-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof path, "%s/catalog", dir);
    unlink(path);
    return rmdir(dir);
}

/* Write text as dir/catalog and load it into a fresh runtime. */
static agent_runtime *load(const char *text, int *rc, char *err, size_t errlen)
{
    char path[128];
    snprintf(path, sizeof path, "%s/catalog", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
    agent_runtime *a = calloc(1, sizeof *a);
    assert_non_null(a);
    snprintf(a->cfg.shards_dir, sizeof a->cfg.shards_dir, "%s", dir);
    *rc = agent_catalog_load(a, err, errlen);
    return a;
}

static void release(agent_runtime *a)
{
    free(a->catalog);
    free(a);
}

/* Found by fuzz_catalog: `murmur shard` writes its --data path into the
 * header comment; a header longer than 511 bytes was read in two pieces
 * and its tail refused as a shard line, so the agent could not start on a
 * catalog murmur itself wrote. */
static void long_header_comment(void **state)
{
    (void)state;
    char text[2048], hex[65];
    int n = snprintf(text, sizeof text, "# murmur catalog v1 shards=2 data=/");
    memset(text + n, 'd', 700);
    n += 700;
    n += snprintf(text + n, sizeof text - (size_t)n, " alpha=0 seed=1 classes=10\n");
    for (int s = 0; s < 2; s++) {
        memset(hex, s ? 'b' : 'a', 64);
        hex[64] = '\0';
        n += snprintf(text + n, sizeof text - (size_t)n, "%s %d %d\n", hex, s, 100 + s);
    }
    int rc;
    char err[512] = "";
    agent_runtime *a = load(text, &rc, err, sizeof err);
    if (rc)
        fail_msg("refused: %s", err);
    assert_int_equal(a->n_catalog, 2);
    assert_int_equal(a->catalog_samples, 201);
    assert_int_equal(a->catalog[0][0], 0xaa);
    assert_int_equal(a->catalog[1][31], 0xbb);
    release(a);
}

static void bad_catalogs(void **state)
{
    (void)state;
    char hex[65], text[512], err[512];
    memset(hex, 'c', 64);
    hex[64] = '\0';
    int rc;
    /* an index out of sequence names its line */
    snprintf(text, sizeof text, "# header\n%s 0 5\n%s 2 5\n", hex, hex);
    agent_runtime *a = load(text, &rc, err, sizeof err);
    assert_int_equal(rc, -1);
    assert_non_null(strstr(err, "catalog:3:"));
    release(a);
    /* comments only: no shard */
    a = load("# header\n\n   # another\n", &rc, err, sizeof err);
    assert_int_equal(rc, -1);
    assert_non_null(strstr(err, "lists no shard"));
    release(a);
    /* a hash that is not 64 hex digits */
    snprintf(text, sizeof text, "%.63s 0 5\n", hex);
    a = load(text, &rc, err, sizeof err);
    assert_int_equal(rc, -1);
    release(a);
}

/* Write rows [first, first + n) of d as shard `index` of `count` into
 * dir/name; its content address into id. */
static void put_shard(const model_data *d, uint32_t first, uint32_t n, uint32_t index,
                      uint32_t count, const char *name, uint8_t id[MODEL_SHARD_HASH_SIZE])
{
    uint32_t rows[16];
    for (uint32_t i = 0; i < n; i++)
        rows[i] = first + i;
    char path[160], msg[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (model_shard_write(path, d, rows, n, index, count, id, msg, sizeof msg))
        fail_msg("%s", msg);
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static uint64_t file_sum(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    uint64_t sum = 0;
    for (int c; (c = getc(f)) != EOF;)
        sum = sum * 31 + (uint64_t)c;
    fclose(f);
    return sum;
}

/* Import: a shard file of the catalog gets its content address (a link to
 * the same bytes); a damaged one and one of another split are neither
 * linked nor changed. */
static void import_links_verified_shards_only(void **state)
{
    (void)state;
    model_data d;
    assert_int_equal(model_data_alloc(&d, 30, 4, 3, MODEL_DTYPE_U8), 0);
    for (uint32_t i = 0; i < 30 * 4; i++)
        d.x_u8[i] = (uint8_t)(i * 7);
    for (uint32_t i = 0; i < 30; i++)
        d.labels[i] = (uint16_t)(i % 3);
    uint8_t good[MODEL_SHARD_HASH_SIZE], bad[MODEL_SHARD_HASH_SIZE], other[MODEL_SHARD_HASH_SIZE];
    put_shard(&d, 0, 10, 0, 2, "shard-000-of-002.msh", good);
    put_shard(&d, 10, 10, 1, 2, "shard-001-of-002.msh", bad);
    put_shard(&d, 20, 10, 0, 1, "shard-000-of-001.msh", other);
    model_data_free(&d);
    char path[160];
    snprintf(path, sizeof path, "%s/shard-001-of-002.msh", dir);
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    assert_int_equal(fseek(f, -1, SEEK_END), 0);
    int last = getc(f);
    assert_int_equal(fseek(f, -1, SEEK_END), 0);
    putc(last ^ 0x40, f); /* a pixel of its last sample */
    assert_int_equal(fclose(f), 0);
    uint64_t bad_sum = file_sum(path);
    char text[256], hg[65], hb[65];
    model_shard_hash_hex(good, hg);
    model_shard_hash_hex(bad, hb);
    snprintf(text, sizeof text, "# test\n%s 0 10\n%s 1 10\n", hg, hb);
    int rc;
    char err[256];
    agent_runtime *a = load(text, &rc, err, sizeof err);
    assert_int_equal(rc, 0);
    agent_shards_import(a);
    char target[AGENT_STORE_FILE_PATH_MAX];
    struct stat s1, s2;
    assert_int_equal(agent_store_file_path(dir, good, target, sizeof target), 0);
    snprintf(path, sizeof path, "%s/shard-000-of-002.msh", dir);
    assert_int_equal(stat(target, &s1), 0);
    assert_int_equal(stat(path, &s2), 0);
    assert_true(s1.st_ino == s2.st_ino); /* a link, not a copy */
    unlink(target);
    assert_int_equal(agent_store_file_path(dir, bad, target, sizeof target), 0);
    assert_false(exists(target));
    snprintf(path, sizeof path, "%s/shard-001-of-002.msh", dir);
    assert_true(file_sum(path) == bad_sum);
    assert_int_equal(agent_store_file_path(dir, other, target, sizeof target), 0);
    assert_false(exists(target));
    static const char *const names[] = {"shard-000-of-002.msh", "shard-001-of-002.msh",
                                        "shard-000-of-001.msh"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        assert_true(exists(path));
        unlink(path);
    }
    release(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(long_header_comment, setup, teardown),
        cmocka_unit_test_setup_teardown(bad_catalogs, setup, teardown),
        cmocka_unit_test_setup_teardown(import_links_verified_shards_only, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
