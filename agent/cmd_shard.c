/* murmur shard — split a data set into content-addressed shard files, or
 * verify shard files.
 *
 * The split is deterministic for (data, shards, alpha, seed): the same
 * arguments give byte-identical files with the same content addresses on
 * every machine. Format: model/shardfile.h and docs/SHARDS.md.
 */
#include "agent/commands.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model/data.h"
#include "model/shardfile.h"

#define SHARD_PATH_MAX 4096u

static int write_catalog(const char *out_dir, const uint8_t *hashes, const uint32_t *samples,
                         uint32_t shards, const char *data, double alpha, unsigned long long seed);

static void shard_usage(FILE *out)
{
    fprintf(out,
            "usage: murmur shard --shards S --out DIR [OPTIONS]\n"
            "       murmur shard --verify FILE...\n"
            "\n"
            "Split a training set into S shard files DIR/shard-III-of-SSS.msh, each named\n"
            "inside by its BLAKE2b-256 content address, and print one line per shard\n"
            "(index, samples, per-class counts, hash, path). Deterministic for a seed.\n"
            "Also writes DIR/catalog: the content addresses of all S shards, one per\n"
            "line in index order, which every agent of a cluster needs (docs/AGENT.md).\n"
            "\n"
            "  --data D        fashion-mnist (%s, training set), a directory\n"
            "                  of IDX files, or a CSV file 'label,f1,...,fn' [fashion-mnist]\n"
            "  --shards S      number of shards, 1..%u\n"
            "  --out DIR       output directory (created if missing)\n"
            "  --alpha A       label skew: per-class shard proportions ~ Dirichlet(A);\n"
            "                  smaller is more skewed (0.1 strong, 100 nearly IID)\n"
            "                  [0 = IID: equal-sized random parts]\n"
            "  --seed S        seed of the split [1]\n"
            "  --verify F...   check shard files (structure, hash, labels) and print\n"
            "                  their content addresses; exit 1 if any is bad\n"
            "  --help          this text\n",
            MODEL_FASHION_DIR, MODEL_SHARDS_MAX);
}

static int verify_files(int argc, char **argv, int first)
{
    int bad = 0;
    char msg[MODEL_MSG_MAX];
    for (int i = first; i < argc; i++) {
        model_data d;
        model_shard_info info;
        msg[0] = 0;
        int rc = model_shard_load(&d, &info, argv[i], msg, sizeof msg);
        if (rc) {
            fprintf(stderr, "murmur shard: %s (%s)\n", msg, model_strerror(rc));
            printf("bad path=%s error=%s\n", argv[i], model_strerror(rc));
            bad = 1;
            continue;
        }
        char hex[2 * MODEL_SHARD_HASH_SIZE + 1];
        model_shard_hash_hex(info.hash, hex);
        printf("ok index=%u count=%u samples=%u dim=%u classes=%u hash=%s path=%s\n",
               info.shard_index, info.shard_count, info.sample_count, info.dim, info.classes, hex,
               argv[i]);
        model_data_free(&d);
    }
    return bad;
}

int cmd_shard(int argc, char **argv)
{
    const char *data = "fashion-mnist", *out_dir = NULL;
    uint32_t shards = 0;
    double alpha = 0;
    unsigned long long seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            shard_usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--verify")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "murmur shard: --verify wants at least one file\n");
                return 2;
            }
            return verify_files(argc, argv, i + 1);
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "murmur shard: unknown or incomplete option '%s' (see --help)\n", a);
            return 2;
        }
        const char *v = argv[++i];
        char *end;
        errno = 0;
        if (!strcmp(a, "--data")) {
            data = v;
        } else if (!strcmp(a, "--out")) {
            out_dir = v;
        } else if (!strcmp(a, "--shards")) {
            unsigned long s = strtoul(v, &end, 10);
            if (!*v || *end || errno || *v == '-' || s == 0 || s > MODEL_SHARDS_MAX) {
                fprintf(stderr, "murmur shard: --shards wants an integer in [1, %u], not '%s'\n",
                        MODEL_SHARDS_MAX, v);
                return 2;
            }
            shards = (uint32_t)s;
        } else if (!strcmp(a, "--alpha")) {
            alpha = strtod(v, &end);
            if (!*v || *end || errno || !(alpha >= 0 && alpha <= 1e6)) {
                fprintf(stderr, "murmur shard: --alpha wants a number in [0, 1e6], not '%s'\n", v);
                return 2;
            }
        } else if (!strcmp(a, "--seed")) {
            seed = strtoull(v, &end, 0);
            if (!*v || *end || errno || *v == '-') {
                fprintf(stderr, "murmur shard: --seed wants a non-negative integer, not '%s'\n", v);
                return 2;
            }
        } else {
            fprintf(stderr, "murmur shard: unknown option '%s' (see --help)\n", a);
            return 2;
        }
    }
    if (!shards || !out_dir) {
        fprintf(stderr, "murmur shard: --shards and --out are required (see --help)\n");
        return 2;
    }
    char msg[MODEL_MSG_MAX] = "";
    model_data d = {0}, test = {0};
    struct stat st;
    int rc;
    if (!strcmp(data, "fashion-mnist") || (stat(data, &st) == 0 && S_ISDIR(st.st_mode))) {
        rc = model_fashion_load(&d, &test, strcmp(data, "fashion-mnist") ? data : NULL, msg,
                                sizeof msg);
        model_data_free(&test);
    } else {
        rc = model_csv_load(&d, data, 0, msg, sizeof msg);
    }
    if (rc) {
        fprintf(stderr, "murmur shard: %s (%s)\n", msg, model_strerror(rc));
        return 1;
    }
    if (shards > d.count) {
        fprintf(stderr, "murmur shard: %u shards but only %u samples\n", shards, d.count);
        model_data_free(&d);
        return 2;
    }
    if (mkdir(out_dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "murmur shard: cannot create %s: %s\n", out_dir, strerror(errno));
        model_data_free(&d);
        return 1;
    }
    int status = 1;
    uint32_t *assign = malloc((size_t)d.count * sizeof *assign);
    uint32_t *rows = malloc((size_t)d.count * sizeof *rows);
    uint32_t *hist = malloc((size_t)d.classes * sizeof *hist);
    uint8_t *hashes = malloc((size_t)shards * MODEL_SHARD_HASH_SIZE);
    uint32_t *counts = malloc((size_t)shards * sizeof *counts);
    if (!assign || !rows || !hist || !hashes || !counts) {
        fprintf(stderr, "murmur shard: out of memory\n");
        goto out;
    }
    model_rng rng;
    model_rng_seed(&rng, seed, 0);
    rc = model_shard_split(&d, shards, alpha, &rng, assign);
    if (rc) {
        fprintf(stderr,
                "murmur shard: cannot split %u samples into %u shards with alpha %g: %s%s\n",
                d.count, shards, alpha, model_strerror(rc),
                rc == MODEL_EEMPTY ? " (some shard stayed empty; raise --alpha or lower --shards)"
                                   : "");
        goto out;
    }
    printf("split data=%s samples=%u dim=%u classes=%u shards=%u alpha=%g seed=%llu\n", data,
           d.count, d.dim, d.classes, shards, alpha, seed);
    for (uint32_t s = 0; s < shards; s++) {
        uint32_t n = 0;
        memset(hist, 0, d.classes * sizeof *hist);
        for (uint32_t i = 0; i < d.count; i++)
            if (assign[i] == s) {
                rows[n++] = i;
                hist[d.labels[i]]++;
            }
        char path[SHARD_PATH_MAX];
        if ((size_t)snprintf(path, sizeof path, "%s/shard-%03u-of-%03u.msh", out_dir, s, shards) >=
            sizeof path) {
            fprintf(stderr, "murmur shard: output path too long\n");
            goto out;
        }
        uint8_t hash[MODEL_SHARD_HASH_SIZE];
        msg[0] = 0;
        rc = model_shard_write(path, &d, rows, n, s, shards, hash, msg, sizeof msg);
        if (rc) {
            fprintf(stderr, "murmur shard: %s (%s)\n", msg, model_strerror(rc));
            goto out;
        }
        char hex[2 * MODEL_SHARD_HASH_SIZE + 1];
        model_shard_hash_hex(hash, hex);
        printf("shard index=%u samples=%u labels=", s, n);
        for (uint32_t c = 0; c < d.classes; c++)
            printf("%s%u", c ? "," : "", hist[c]);
        printf(" hash=%s path=%s\n", hex, path);
        memcpy(hashes + (size_t)s * MODEL_SHARD_HASH_SIZE, hash, MODEL_SHARD_HASH_SIZE);
        counts[s] = n;
    }
    if (write_catalog(out_dir, hashes, counts, shards, data, alpha, seed))
        goto out;
    status = 0;
out:
    free(hashes);
    free(counts);
    free(assign);
    free(rows);
    free(hist);
    model_data_free(&d);
    return status;
}

/* DIR/catalog (docs/AGENT.md): a comment line, then one line per shard in
 * index order, "HASH INDEX SAMPLES". Written to a temp name and renamed. */
static int write_catalog(const char *out_dir, const uint8_t *hashes, const uint32_t *samples,
                         uint32_t shards, const char *data, double alpha, unsigned long long seed)
{
    char path[SHARD_PATH_MAX], tmp[SHARD_PATH_MAX + 8];
    if ((size_t)snprintf(path, sizeof path, "%s/catalog", out_dir) >= sizeof path ||
        (size_t)snprintf(tmp, sizeof tmp, "%s.tmp", path) >= sizeof tmp) {
        fprintf(stderr, "murmur shard: output path too long\n");
        return -1;
    }
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "murmur shard: cannot write %s: %s\n", tmp, strerror(errno));
        return -1;
    }
    fprintf(f, "# murmur catalog v1 shards=%u data=%s alpha=%g seed=%llu\n", shards, data, alpha,
            seed);
    for (uint32_t s = 0; s < shards; s++) {
        char hex[2 * MODEL_SHARD_HASH_SIZE + 1];
        model_shard_hash_hex(hashes + (size_t)s * MODEL_SHARD_HASH_SIZE, hex);
        fprintf(f, "%s %u %u\n", hex, s, samples[s]);
    }
    int bad = ferror(f);
    if (fclose(f) || bad || rename(tmp, path)) {
        fprintf(stderr, "murmur shard: cannot write %s: %s\n", path, strerror(errno));
        remove(tmp);
        return -1;
    }
    printf("catalog shards=%u path=%s\n", shards, path);
    return 0;
}
