/* fuzz_scenario — libFuzzer target for the simulator's scenario files
 * (sim/scenario.h; docs/FUZZING.md).
 *
 * Input: the whole input is a scenario file, read through the public file
 * entry point (sim_scenario_load on an in-memory file) on top of the
 * defaults.
 * Properties, any violation aborts:
 *   - the result is OK, ESYNTAX, EKEY, EVALUE, ERANGE, EDUP or ETOOMANY
 *     (EIO only for a file above 1 MiB), with a one-line message that names
 *     the file; an accepted file's cross-key check gives OK, ERANGE or
 *     EVALUE, also with a message;
 *   - round trip: the accepted scenario, written with sim_scenario_write and
 *     loaded again on top of the defaults, is accepted and writes the same
 *     text, and the cross-key check gives the same answer.
 */
#define _GNU_SOURCE
#include "tests/fuzz/fuzz_util.h"

#include "sim/scenario.h"

static sim_scenario sc1, sc2; /* about 100 KB each: not on the stack */

static char *written(const sim_scenario *sc, size_t *len)
{
    char *text = NULL;
    FILE *f = open_memstream(&text, len);
    FUZZ_CHECK(f != NULL);
    FUZZ_CHECK(sim_scenario_write(sc, f) == SIM_SCENARIO_OK);
    FUZZ_CHECK(fclose(f) == 0);
    return text;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64], err[512];
    fuzz_memfile(0, data, size, path, sizeof path);
    sim_scenario_defaults(&sc1);
    err[0] = '\0';
    int rc = sim_scenario_load(&sc1, path, err, sizeof err);
    FUZZ_CHECK(rc == SIM_SCENARIO_OK || rc == SIM_SCENARIO_ESYNTAX || rc == SIM_SCENARIO_EKEY ||
               rc == SIM_SCENARIO_EVALUE || rc == SIM_SCENARIO_ERANGE || rc == SIM_SCENARIO_EDUP ||
               rc == SIM_SCENARIO_ETOOMANY || (rc == SIM_SCENARIO_EIO && size > (1u << 20)));
    if (rc != SIM_SCENARIO_OK) {
        FUZZ_CHECK(fuzz_has_message(err, sizeof err));
        FUZZ_CHECK(strncmp(err, path, strlen(path)) == 0);
        FUZZ_CHECK(strchr(err, '\n') == NULL);
        return 0;
    }
    char cerr1[512] = "", cerr2[512] = "";
    int crc1 = sim_scenario_check(&sc1, cerr1, sizeof cerr1);
    FUZZ_CHECK(crc1 == SIM_SCENARIO_OK || crc1 == SIM_SCENARIO_ERANGE ||
               crc1 == SIM_SCENARIO_EVALUE);
    if (crc1 != SIM_SCENARIO_OK)
        FUZZ_CHECK(fuzz_has_message(cerr1, sizeof cerr1) && strchr(cerr1, '\n') == NULL);

    size_t n1, n2;
    char *t1 = written(&sc1, &n1);
    char path2[64];
    fuzz_memfile(1, (const uint8_t *)t1, n1, path2, sizeof path2);
    sim_scenario_defaults(&sc2);
    int rc2 = sim_scenario_load(&sc2, path2, err, sizeof err);
    if (rc2 != SIM_SCENARIO_OK)
        fprintf(stderr, "round trip refused: %s\n--- written:\n%s", err, t1);
    FUZZ_CHECK(rc2 == SIM_SCENARIO_OK);
    char *t2 = written(&sc2, &n2);
    if (n1 != n2 || memcmp(t1, t2, n1))
        fprintf(stderr, "--- first:\n%s--- read back:\n%s", t1, t2);
    FUZZ_CHECK(n1 == n2 && memcmp(t1, t2, n1) == 0);
    FUZZ_CHECK(sim_scenario_check(&sc2, cerr2, sizeof cerr2) == crc1);
    free(t1);
    free(t2);
    return 0;
}
