/* fuzz_config — libFuzzer target for the agent's config files
 * (agent/config.h; docs/FUZZING.md).
 *
 * Input: the whole input is a config file, read through the public file
 * entry point (agent_config_load_file on an in-memory file), on top of the
 * defaults.
 * Properties, any violation aborts:
 *   - the result is OK, ESYNTAX, EUNKNOWN, EVALUE, ERANGE or EDUP (an
 *     existing, readable file never gives EIO unless it is too large);
 *   - an error comes with a one-line message that names the file;
 *   - round trip: the accepted config, written with agent_config_write and
 *     read back on top of the defaults, is accepted and writes the same
 *     text again (origin comments aside: they name the file and line).
 */
#define _GNU_SOURCE
#include "tests/fuzz/fuzz_util.h"

#include "agent/config.h"

static agent_config c1, c2;

/* Write c, dropping the "   # origin" comment that ends some lines. */
static char *written(const agent_config *c, size_t *len)
{
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    FUZZ_CHECK(f != NULL);
    agent_config_write(c, f);
    FUZZ_CHECK(fclose(f) == 0);
    char *out = malloc(n + 1);
    FUZZ_CHECK(out != NULL);
    size_t o = 0;
    for (char *line = text; *line;) {
        char *nl = strchr(line, '\n');
        size_t ln = nl ? (size_t)(nl - line) : strlen(line);
        char *cut = memmem(line, ln, "   # ", 5);
        size_t keep = cut ? (size_t)(cut - line) : ln;
        memcpy(out + o, line, keep);
        o += keep;
        out[o++] = '\n';
        line += ln + (nl != NULL);
    }
    out[o] = '\0';
    *len = n;
    free(text);
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64], err[AGENT_CONFIG_ERR_MAX];
    fuzz_memfile(0, data, size, path, sizeof path);
    agent_config_defaults(&c1);
    err[0] = '\0';
    int rc = agent_config_load_file(&c1, path, err, sizeof err);
    FUZZ_CHECK(rc == AGENT_CONFIG_OK || rc == AGENT_CONFIG_ESYNTAX || rc == AGENT_CONFIG_EUNKNOWN ||
               rc == AGENT_CONFIG_EVALUE || rc == AGENT_CONFIG_ERANGE || rc == AGENT_CONFIG_EDUP ||
               (rc == AGENT_CONFIG_EIO && size > AGENT_CONFIG_FILE_MAX));
    if (rc != AGENT_CONFIG_OK) {
        FUZZ_CHECK(fuzz_has_message(err, sizeof err));
        FUZZ_CHECK(strncmp(err, path, strlen(path)) == 0);
        FUZZ_CHECK(strchr(err, '\n') == NULL);
        return 0;
    }
    size_t n1;
    char *t1 = written(&c1, &n1);
    char *full = NULL;
    size_t fn = 0;
    FILE *f = open_memstream(&full, &fn);
    FUZZ_CHECK(f != NULL);
    agent_config_write(&c1, f);
    FUZZ_CHECK(fclose(f) == 0);
    char path2[64];
    fuzz_memfile(1, (const uint8_t *)full, fn, path2, sizeof path2);
    agent_config_defaults(&c2);
    int rc2 = agent_config_load_file(&c2, path2, err, sizeof err);
    if (rc2 != AGENT_CONFIG_OK)
        fprintf(stderr, "round trip refused: %s\n--- written:\n%s", err, full);
    FUZZ_CHECK(rc2 == AGENT_CONFIG_OK);
    size_t n2;
    char *t2 = written(&c2, &n2);
    if (strcmp(t1, t2))
        fprintf(stderr, "--- first:\n%s--- read back:\n%s", t1, t2);
    FUZZ_CHECK(strcmp(t1, t2) == 0);
    free(full);
    free(t1);
    free(t2);
    return 0;
}
