/* agent/store_file: the gossip_store contract over files — states (absent,
 * writing, complete), bounds, atomic commit, abort, drop, crash leftovers. */
#include "tests/harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/store_file.h"

static char dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/murmur-test-store-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd);
}

static void make_id(uint8_t id[GOSSIP_STORE_ID_SIZE], uint8_t seed)
{
    for (unsigned i = 0; i < GOSSIP_STORE_ID_SIZE; i++)
        id[i] = (uint8_t)(seed * 31u + i * 7u);
}

static int file_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

static void test_round_trip(void **state)
{
    (void)state;
    gossip_store s;
    char err[256];
    assert_int_equal(agent_store_file_open(&s, dir, 1u << 20, err, sizeof err), GOSSIP_OK);
    uint8_t id[GOSSIP_STORE_ID_SIZE];
    make_id(id, 1);
    assert_int_equal(s.ops->has(s.ctx, id), 0);
    uint8_t data[5000];
    for (unsigned i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)(i * 13u + 5u);
    assert_int_equal(s.ops->begin(s.ctx, id, sizeof data), GOSSIP_OK);
    /* writing is not visible */
    assert_int_equal(s.ops->has(s.ctx, id), 0);
    uint64_t size = 0;
    assert_int_equal(s.ops->size(s.ctx, id, &size), GOSSIP_ENOTFOUND);
    /* out of order writes land where they belong */
    assert_int_equal(s.ops->write(s.ctx, id, 3000, data + 3000, 2000), GOSSIP_OK);
    assert_int_equal(s.ops->write(s.ctx, id, 0, data, 3000), GOSSIP_OK);
    assert_int_equal(s.ops->commit(s.ctx, id), GOSSIP_OK);
    assert_int_equal(s.ops->has(s.ctx, id), 1);
    assert_int_equal(s.ops->size(s.ctx, id, &size), GOSSIP_OK);
    assert_int_equal(size, sizeof data);
    uint8_t back[sizeof data];
    memset(back, 0, sizeof back);
    assert_int_equal(s.ops->read(s.ctx, id, 0, back, sizeof back), GOSSIP_OK);
    assert_memory_equal(back, data, sizeof data);
    assert_int_equal(s.ops->read(s.ctx, id, 4990, back, 10), GOSSIP_OK);
    assert_memory_equal(back, data + 4990, 10);
    /* the file is where agent_store_file_path says, under the hex id */
    char path[AGENT_STORE_FILE_PATH_MAX];
    assert_int_equal(agent_store_file_path(dir, id, path, sizeof path), GOSSIP_OK);
    assert_true(file_exists(path));
    assert_non_null(strstr(path, "/1f262d34"));
    assert_int_equal(agent_store_file_count(&s), 1);
    agent_store_file_close(&s);
    /* reopened: still held */
    assert_int_equal(agent_store_file_open(&s, dir, 1u << 20, err, sizeof err), GOSSIP_OK);
    assert_int_equal(s.ops->has(s.ctx, id), 1);
    assert_int_equal(s.ops->drop(s.ctx, id), GOSSIP_OK);
    assert_int_equal(s.ops->has(s.ctx, id), 0);
    assert_false(file_exists(path));
    assert_int_equal(s.ops->drop(s.ctx, id), GOSSIP_ENOTFOUND);
    agent_store_file_close(&s);
}

static void test_bounds_and_states(void **state)
{
    (void)state;
    gossip_store s;
    assert_int_equal(agent_store_file_open(&s, dir, 1000, NULL, 0), GOSSIP_OK);
    uint8_t id[GOSSIP_STORE_ID_SIZE], other[GOSSIP_STORE_ID_SIZE];
    make_id(id, 2);
    make_id(other, 3);
    uint8_t buf[1001] = {0};
    /* above the bound */
    assert_int_equal(s.ops->begin(s.ctx, id, 1001), GOSSIP_EINVAL);
    /* write/commit without begin */
    assert_int_equal(s.ops->write(s.ctx, id, 0, buf, 1), GOSSIP_ENOTFOUND);
    assert_int_equal(s.ops->commit(s.ctx, id), GOSSIP_ENOTFOUND);
    assert_int_equal(s.ops->begin(s.ctx, id, 100), GOSSIP_OK);
    /* second write of the same id refused */
    assert_int_equal(s.ops->begin(s.ctx, id, 100), GOSSIP_EINVAL);
    /* range outside the shard */
    assert_int_equal(s.ops->write(s.ctx, id, 90, buf, 11), GOSSIP_EINVAL);
    assert_int_equal(s.ops->write(s.ctx, id, 101, buf, 0), GOSSIP_EINVAL);
    /* commit before every byte is there fails and discards the write */
    assert_int_equal(s.ops->write(s.ctx, id, 0, buf, 50), GOSSIP_OK);
    assert_int_equal(s.ops->commit(s.ctx, id), GOSSIP_EINVAL);
    assert_int_equal(s.ops->has(s.ctx, id), 0);
    assert_int_equal(s.ops->write(s.ctx, id, 50, buf, 50), GOSSIP_ENOTFOUND);
    /* abort discards; abort of nothing is a no-op */
    assert_int_equal(s.ops->begin(s.ctx, other, 10), GOSSIP_OK);
    assert_int_equal(s.ops->write(s.ctx, other, 0, buf, 10), GOSSIP_OK);
    s.ops->abort(s.ctx, other);
    s.ops->abort(s.ctx, other);
    assert_int_equal(s.ops->has(s.ctx, other), 0);
    assert_int_equal(agent_store_file_count(&s), 0);
    /* begin on a complete shard refused; reads outside it refused */
    assert_int_equal(s.ops->begin(s.ctx, other, 10), GOSSIP_OK);
    assert_int_equal(s.ops->write(s.ctx, other, 0, buf, 10), GOSSIP_OK);
    assert_int_equal(s.ops->commit(s.ctx, other), GOSSIP_OK);
    assert_int_equal(s.ops->begin(s.ctx, other, 10), GOSSIP_EINVAL);
    assert_int_equal(s.ops->read(s.ctx, other, 5, buf, 6), GOSSIP_EINVAL);
    assert_int_equal(s.ops->read(s.ctx, other, 11, buf, 0), GOSSIP_EINVAL);
    assert_int_equal(s.ops->read(s.ctx, other, 10, buf, 0), GOSSIP_OK);
    assert_int_equal(s.ops->read(s.ctx, id, 0, buf, 1), GOSSIP_ENOTFOUND);
    /* the table of open writes is bounded */
    uint8_t many[AGENT_STORE_FILE_WRITES_MAX + 1][GOSSIP_STORE_ID_SIZE];
    for (unsigned i = 0; i <= AGENT_STORE_FILE_WRITES_MAX; i++) {
        make_id(many[i], (uint8_t)(100 + i));
        assert_int_equal(s.ops->begin(s.ctx, many[i], 1),
                         i < AGENT_STORE_FILE_WRITES_MAX ? GOSSIP_OK : GOSSIP_EFULL);
    }
    /* close aborts the open writes: nothing is left behind */
    agent_store_file_close(&s);
    assert_int_equal(agent_store_file_open(&s, dir, 1000, NULL, 0), GOSSIP_OK);
    assert_int_equal(agent_store_file_count(&s), 1);
    for (unsigned i = 0; i < AGENT_STORE_FILE_WRITES_MAX; i++)
        assert_int_equal(s.ops->has(s.ctx, many[i]), 0);
    assert_int_equal(s.ops->drop(s.ctx, other), GOSSIP_OK);
    agent_store_file_close(&s);
}

/* A crash mid-write leaves DIR/<hex>.msh.part: never visible as a shard, and
 * removed at the next open. Foreign files are left alone. */
static void test_crash_leftovers(void **state)
{
    (void)state;
    uint8_t id[GOSSIP_STORE_ID_SIZE];
    make_id(id, 9);
    char path[AGENT_STORE_FILE_PATH_MAX], part[AGENT_STORE_FILE_PATH_MAX + 8];
    assert_int_equal(agent_store_file_path(dir, id, path, sizeof path), GOSSIP_OK);
    snprintf(part, sizeof part, "%s.part", path);
    FILE *f = fopen(part, "wb");
    assert_non_null(f);
    fputs("half a shard", f);
    fclose(f);
    char foreign[128];
    snprintf(foreign, sizeof foreign, "%s/catalog", dir);
    f = fopen(foreign, "wb");
    assert_non_null(f);
    fputs("x\n", f);
    fclose(f);
    gossip_store s;
    assert_int_equal(agent_store_file_open(&s, dir, 1000, NULL, 0), GOSSIP_OK);
    assert_false(file_exists(part));
    assert_true(file_exists(foreign));
    assert_int_equal(s.ops->has(s.ctx, id), 0);
    assert_int_equal(agent_store_file_count(&s), 0);
    agent_store_file_close(&s);
    unlink(foreign);
}

static void test_bad_open(void **state)
{
    (void)state;
    gossip_store s;
    char err[256] = "";
    assert_int_equal(agent_store_file_open(&s, "", 1000, err, sizeof err), GOSSIP_EINVAL);
    assert_true(strlen(err) > 0);
    assert_int_equal(agent_store_file_open(&s, dir, 0, err, sizeof err), GOSSIP_EINVAL);
    assert_int_equal(agent_store_file_open(&s, "/nonexistent-murmur/a/b", 1000, err, sizeof err),
                     GOSSIP_ENOTFOUND);
    assert_non_null(strstr(err, "/nonexistent-murmur/a/b"));
    assert_null(s.ctx);
    agent_store_file_close(&s); /* NULL ctx is fine */
    char small[8];
    uint8_t id[GOSSIP_STORE_ID_SIZE] = {0};
    assert_int_equal(agent_store_file_path(dir, id, small, sizeof small), GOSSIP_ESPACE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bounds_and_states, setup, teardown),
        cmocka_unit_test_setup_teardown(test_crash_leftovers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_open, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
