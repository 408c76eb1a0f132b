/* agent/catalog — start-up data of the runtime: the shard catalog, import of
 * shard files under their content address, the test set. See runtime_internal.h. */

#include "agent/runtime_internal.h"

#include <dirent.h>
#include <errno.h>
#include <sodium.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/log.h"
#include "agent/store_file.h"
#include "model/shardfile.h"

/* Largest shard file the agent imports or fetches (gossip/shards default). */
#define AGENT_SHARD_BYTES_MAX GOSSIP_SHARDS_SHARD_BYTES_DEFAULT

/* ---- catalog and shard import ---- */

int agent_catalog_load(agent_runtime *a, char *err, size_t errlen)
{
    char path[AGENT_CONFIG_PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/catalog", a->cfg.shards_dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        agent_errf(err, errlen,
                   "%s: %s; copy the catalog that 'murmur shard --out DIR' wrote (DIR/catalog) "
                   "into the shards directory (shards.dir)",
                   path, strerror(errno));
        return -1;
    }
    a->catalog = calloc(AGENT_CATALOG_MAX, GOSSIP_SHARD_ID_SIZE);
    if (!a->catalog) {
        fclose(f);
        agent_errf(err, errlen, "out of memory for the shard catalog");
        return -1;
    }
    /* Lines of any length: the header comment holds the --data path of
     * `murmur shard`, which may be long (fgets into 512 bytes read the rest
     * of a long header as a shard line: found by fuzz_catalog). */
    char *line = NULL;
    size_t cap = 0;
    unsigned lineno = 0;
    int rc = 0;
    while (getline(&line, &cap, f) >= 0) {
        lineno++;
        char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '#' || *p == '\n' || *p == 0)
            continue;
        char hex[80];
        unsigned idx;
        unsigned long long samples = 0;
        int got = sscanf(p, "%79s %u %llu", hex, &idx, &samples);
        if (got == 3 && a->catalog_samples != UINT64_MAX)
            a->catalog_samples += samples;
        else
            a->catalog_samples = UINT64_MAX; /* unknown: marked, reset to 0 below */
        if (got < 2 || strlen(hex) != 64 || agent_keys_unhex(hex, 64, a->catalog[a->n_catalog]) ||
            idx != a->n_catalog) {
            agent_errf(
                err, errlen,
                "%s:%u: not a catalog line 'HASH INDEX SAMPLES' with index %u; was it written "
                "by 'murmur shard'?",
                path, lineno, a->n_catalog);
            rc = -1;
            break;
        }
        if (++a->n_catalog == AGENT_CATALOG_MAX) {
            agent_errf(err, errlen, "%s: more than %u shards", path, AGENT_CATALOG_MAX);
            rc = -1;
            break;
        }
    }
    free(line);
    fclose(f);
    if (a->catalog_samples == UINT64_MAX)
        a->catalog_samples = 0;
    if (!rc && a->n_catalog == 0) {
        agent_errf(err, errlen, "%s: lists no shard", path);
        rc = -1;
    }
    return rc;
}

long agent_catalog_find(const agent_runtime *a, const uint8_t id[GOSSIP_SHARD_ID_SIZE])
{
    for (uint32_t i = 0; i < a->n_catalog; i++)
        if (!memcmp(a->catalog[i], id, GOSSIP_SHARD_ID_SIZE))
            return i;
    return -1;
}

static int is_hex_name(const char *name)
{
    size_t n = strlen(name);
    if (n != 64 + strlen(AGENT_STORE_FILE_SUFFIX) || strcmp(name + 64, AGENT_STORE_FILE_SUFFIX))
        return 0;
    for (size_t i = 0; i < 64; i++)
        if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f')))
            return 0;
    return 1;
}

/* Shard files of the catalog under another name (shard-III-of-SSS.msh from
 * `murmur shard`) get a hard link under their content address, the name
 * the file store uses. Files that do not verify, or are not the catalog's,
 * are left as they are, with a warning that says why. */
void agent_shards_import(agent_runtime *a)
{
    DIR *d = opendir(a->cfg.shards_dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 5 || strcmp(e->d_name + n - 4, AGENT_STORE_FILE_SUFFIX) || is_hex_name(e->d_name))
            continue;
        char path[AGENT_STORE_FILE_PATH_MAX + 256];
        snprintf(path, sizeof path, "%s/%s", a->cfg.shards_dir, e->d_name);
        FILE *f = fopen(path, "rb");
        if (!f)
            continue;
        uint8_t *buf = NULL;
        long size = -1;
        if (!fseek(f, 0, SEEK_END) && (size = ftell(f)) > 0 &&
            size <= (long)AGENT_SHARD_BYTES_MAX && !fseek(f, 0, SEEK_SET) &&
            (buf = malloc((size_t)size)) && fread(buf, 1, (size_t)size, f) == (size_t)size) {
            model_shard_info info;
            char msg[MODEL_MSG_MAX];
            /* verify checked that the content hashes to info.hash: that is
             * the content address, no second pass needed */
            if (model_shard_verify(buf, (size_t)size, &info, msg, sizeof msg))
                agent_log(AGENT_LOG_WARN, "shard_import_failed", "file", path, "why", msg, NULL);
            else if (agent_catalog_find(a, info.hash) < 0)
                agent_log(AGENT_LOG_WARN, "shard_import_failed", "file", path, "why",
                          "not a shard of the catalog", NULL);
            else {
                char target[AGENT_STORE_FILE_PATH_MAX];
                struct stat st;
                if (!agent_store_file_path(a->cfg.shards_dir, info.hash, target, sizeof target) &&
                    stat(target, &st) != 0) {
                    if (link(path, target) == 0)
                        agent_log(AGENT_LOG_INFO, "shard_imported", "file", path, "as", target,
                                  NULL);
                    else
                        agent_log(AGENT_LOG_WARN, "shard_import_failed", "file", path, "why",
                                  strerror(errno), NULL);
                }
            }
        }
        free(buf);
        fclose(f);
    }
    closedir(d);
}
