/* agent/catalog: the shard catalog loader (SHARDS_DIR/catalog, as
 * `murmur shard` writes it): shard lines, comments, errors. */
#include "tests/harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/runtime_internal.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(long_header_comment, setup, teardown),
        cmocka_unit_test_setup_teardown(bad_catalogs, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
