/* murmur shard — split a data set into content-addressed shard files, or
 * verify shard files.
 *
 * The split is deterministic for (data, shards, alpha, seed): the same
 * arguments give byte-identical files with the same content addresses on
 * every machine. Format: model/shardfile.h and docs/SHARDS.md.
 *
 * An output directory holds one split: a directory that already holds
 * shard files or a catalog of other arguments (shards, data, alpha, seed)
 * is refused, so two splits never mix; the same arguments again rewrite
 * the same files.
 */
#include "agent/commands.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>

#include "common/cli.h"
#include "common/fs.h"
#include "common/text.h"
#include "model/data.h"
#include "model/shardfile.h"

#define SHARD_PATH_MAX 4096u
/* Most files one --verify checks. */
#define SHARD_VERIFY_MAX 4096
/* MODEL_SHARDS_MAX as the usage writes it */
#define SHARD_COUNT_MAX_TEXT "65536"
_Static_assert(MODEL_SHARDS_MAX == 65536u, "SHARD_COUNT_MAX_TEXT follows MODEL_SHARDS_MAX");

static int write_catalog(const char *out_dir, const uint8_t *hashes, const uint32_t *samples,
                         uint32_t shards, const char *data, double alpha, unsigned long long seed,
                         double test_fraction, uint32_t classes);

enum { SH_DATA, SH_SHARDS, SH_OUT, SH_ALPHA, SH_SEED, SH_VERIFY, SH_TEST_FRACTION, SH_HELP };
static const common_flag shard_flags[] = {
    {"data", 0, true, SH_DATA, "D",
     "fashion-mnist (" MODEL_FASHION_DIR ", training\n"
     "set), a directory of IDX files, or a CSV file\n"
     "'label,f1,...,fn' [fashion-mnist]",
     NULL},
    {"shards", 0, true, SH_SHARDS, "S", "number of shards, 1.." SHARD_COUNT_MAX_TEXT, NULL},
    {"out", 0, true, SH_OUT, "DIR",
     "output directory (created if missing); refused if it\n"
     "already holds shards of a different split",
     NULL},
    {"alpha", 0, true, SH_ALPHA, "A",
     "label skew: per-class shard proportions ~\n"
     "Dirichlet(A); smaller is more skewed (0.1 strong,\n"
     "100 nearly IID) [0 = IID: equal-sized random parts]",
     NULL},
    {"seed", 0, true, SH_SEED, "S", "seed of the split [1]", NULL},
    {"test-fraction", 0, true, SH_TEST_FRACTION, "F",
     "rows of a CSV held out of the shards, written to\n"
     "DIR/test.csv for model.test_dataset (seeded by\n"
     "--seed) [0.1 for a CSV; Fashion-MNIST and IDX have\n"
     "test files]",
     NULL},
    {"verify", 0, false, SH_VERIFY, "",
     "check the shard files given as arguments (structure,\n"
     "hash, labels) and print their content addresses;\n"
     "exit 1 if any is bad",
     NULL},
    {"help", 'h', false, SH_HELP, "", "this text", NULL},
};
#define SHARD_FLAGS (sizeof shard_flags / sizeof shard_flags[0])

static void shard_usage(FILE *out)
{
    common_cli cli;
    common_cli_init(&cli, "murmur shard", shard_flags, SHARD_FLAGS, 0, NULL);
    fprintf(out, "usage: murmur shard --shards S --out DIR [OPTIONS]\n"
                 "       murmur shard --verify FILE...\n"
                 "\n"
                 "Split a training set into S shard files DIR/shard-III-of-SSS.msh, each named\n"
                 "inside by its BLAKE2b-256 content address, and print one line per shard\n"
                 "(index, samples, per-class counts, hash, path). Deterministic for a seed.\n"
                 "Also writes DIR/catalog: the content addresses of all S shards, one per\n"
                 "line in index order, which every agent of a cluster needs (docs/DATA.md).\n"
                 "\n");
    common_cli_usage(&cli, out);
}

static int verify_files(int argc, char **argv)
{
    int bad = 0;
    char msg[MODEL_MSG_MAX];
    for (int i = 0; i < argc; i++) {
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

/* The first line of DIR/catalog for these arguments (write_catalog adds
 * classes=N: every label of the data set, so agents size their model). */
static void catalog_header(char *buf, size_t len, uint32_t shards, const char *data, double alpha,
                           unsigned long long seed, double test_fraction)
{
    snprintf(buf, len, "# murmur catalog v1 shards=%u data=%s alpha=%g seed=%llu", shards, data,
             alpha, seed);
    if (test_fraction > 0) {
        size_t at = strlen(buf);
        snprintf(buf + at, len - at, " test=test.csv test_fraction=%g", test_fraction);
    }
}

/* Move a seeded test_fraction of d's rows to DIR/test.csv (the labels and
 * features as text, float32 values exactly); d keeps the others. */
static int hold_out(model_data *d, double fraction, unsigned long long seed, const char *out_dir)
{
    uint32_t n_test = (uint32_t)((double)d->count * fraction + 0.5);
    if (n_test == 0 || n_test >= d->count) {
        fprintf(stderr, "murmur shard: --test-fraction %g of %u rows leaves no %s rows\n", fraction,
                d->count, n_test ? "training" : "test");
        return -1;
    }
    uint32_t *order = malloc((size_t)d->count * sizeof *order);
    if (!order)
        return -1;
    for (uint32_t i = 0; i < d->count; i++)
        order[i] = i;
    model_rng rng;
    model_rng_seed(&rng, seed, 2); /* stream 2: the split itself uses stream 0 */
    model_data_shuffle(order, d->count, &rng);
    char path[SHARD_PATH_MAX];
    snprintf(path, sizeof path, "%s/test.csv", out_dir);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "murmur shard: cannot write %s: %s\n", path, strerror(errno));
        free(order);
        return -1;
    }
    for (uint32_t k = 0; k < n_test; k++) {
        uint32_t r = order[k];
        fprintf(f, "%u", d->labels[r]);
        for (uint32_t j = 0; j < d->dim; j++)
            fprintf(f, ",%.9g", (double)d->x_f32[(size_t)r * d->dim + j]);
        fputc('\n', f);
    }
    int bad = ferror(f);
    if (fclose(f) || bad) {
        fprintf(stderr, "murmur shard: cannot write %s\n", path);
        free(order);
        return -1;
    }
    model_data train;
    uint32_t classes = d->classes;
    int rc = model_data_subset(&train, d, order + n_test, d->count - n_test);
    free(order);
    if (rc)
        return -1;
    model_data_free(d);
    *d = train;
    d->classes = classes; /* every label of the file, even one only in the test rows */
    printf("test rows=%u path=%s\n", n_test, path);
    return 0;
}

/* May DIR receive the split described by header? Yes when it holds no
 * shard file and no catalog, or a catalog of the same split. Returns 0, or
 * 1 after printing why not. */
static int out_dir_free(const char *out_dir, const char *header)
{
    char path[SHARD_PATH_MAX];
    snprintf(path, sizeof path, "%s/catalog", out_dir);
    FILE *f = fopen(path, "r");
    if (f) {
        char line[SHARD_PATH_MAX + 128] = "";
        if (!fgets(line, sizeof line, f))
            line[0] = '\0';
        fclose(f);
        line[strcspn(line, "\r\n")] = '\0';
        size_t hl = strlen(header);
        /* the header, then the classes= that write_catalog adds */
        if (strncmp(line, header, hl) || (line[hl] && strncmp(line + hl, " classes=", 9))) {
            fprintf(stderr,
                    "murmur shard: %s holds another split (%s); this one would be\n"
                    "  (%s). Give an empty directory, or the same arguments again.\n",
                    out_dir, line[0] == '#' ? line + 2 : "unreadable catalog", header + 2);
            return 1;
        }
        return 0;
    }
    DIR *d = opendir(out_dir);
    if (!d)
        return 0; /* created later */
    const char *found = NULL;
    char name[256];
    for (struct dirent *e; (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        if (n > 10 && !strncmp(e->d_name, "shard-", 6) && !strcmp(e->d_name + n - 4, ".msh")) {
            snprintf(name, sizeof name, "%s", e->d_name);
            found = name;
            break;
        }
    }
    closedir(d);
    if (found) {
        fprintf(stderr,
                "murmur shard: %s already holds shard files (%s) but no catalog: another split\n"
                "  may be there. Give an empty directory.\n",
                out_dir, found);
        return 1;
    }
    return 0;
}

int cmd_shard(int argc, char **argv)
{
    const char *data = "fashion-mnist", *out_dir = NULL;
    uint32_t shards = 0;
    double alpha = 0;
    unsigned long long seed = 1;
    bool verify = false;
    double test_fraction = -1; /* -1: the default of the data's kind */
    const char *files[SHARD_VERIFY_MAX];
    int nfiles = 0;
    common_cli cli;
    common_cli_init(&cli, "murmur shard", shard_flags, SHARD_FLAGS, argc, argv);
    for (int id; (id = common_cli_next(&cli)) != COMMON_CLI_END;) {
        const char *v = cli.arg;
        uint64_t u;
        switch (id) {
        case SH_HELP:
            shard_usage(stdout);
            return 0;
        case SH_VERIFY:
            verify = true;
            break;
        case SH_DATA:
            data = v;
            break;
        case SH_OUT:
            out_dir = v;
            break;
        case SH_SHARDS:
            if (!common_parse_u64(v, &u) || u == 0 || u > MODEL_SHARDS_MAX) {
                fprintf(stderr, "murmur shard: --shards wants an integer in [1, %u], not '%s'\n",
                        MODEL_SHARDS_MAX, v);
                return 2;
            }
            shards = (uint32_t)u;
            break;
        case SH_ALPHA:
            if (!common_parse_f64(v, &alpha) || !(alpha >= 0 && alpha <= 1e6)) {
                fprintf(stderr, "murmur shard: --alpha wants a number in [0, 1e6], not '%s'\n", v);
                return 2;
            }
            break;
        case SH_TEST_FRACTION:
            if (!common_parse_f64(v, &test_fraction) || test_fraction < 0 || test_fraction >= 1) {
                fprintf(stderr,
                        "murmur shard: --test-fraction wants a number in [0, 1), not '%s'\n", v);
                return 2;
            }
            break;
        case SH_SEED:
            if (!common_parse_u64(v, &u)) {
                fprintf(stderr, "murmur shard: --seed wants a non-negative integer, not '%s'\n", v);
                return 2;
            }
            seed = u;
            break;
        case COMMON_CLI_POSITIONAL:
            if (nfiles == SHARD_VERIFY_MAX) {
                fprintf(stderr, "murmur shard: more than %d files\n", SHARD_VERIFY_MAX);
                return 2;
            }
            files[nfiles++] = v;
            break;
        default:
            fprintf(stderr, "murmur shard: %s\n", cli.err);
            return 2;
        }
    }
    if (verify) {
        if (!nfiles) {
            fprintf(stderr, "murmur shard: --verify wants at least one file\n");
            return 2;
        }
        return verify_files(nfiles, (char **)files);
    }
    if (nfiles) {
        fprintf(stderr, "murmur shard: unexpected argument '%s' (files go after --verify)\n",
                files[0]);
        return 2;
    }
    if (!shards || !out_dir) {
        fprintf(stderr, "murmur shard: --shards and --out are required (see --help)\n");
        return 2;
    }
    struct stat st;
    bool csv = strcmp(data, "fashion-mnist") && !(stat(data, &st) == 0 && S_ISDIR(st.st_mode));
    if (test_fraction < 0)
        test_fraction = csv ? 0.1 : 0;
    if (test_fraction > 0 && !csv) {
        fprintf(stderr, "murmur shard: --test-fraction is for a CSV file; %s has test files\n",
                data);
        return 2;
    }
    char header[SHARD_PATH_MAX + 160];
    catalog_header(header, sizeof header, shards, data, alpha, seed, test_fraction);
    if (out_dir_free(out_dir, header))
        return 1;
    char msg[MODEL_MSG_MAX] = "";
    model_data d = {0}, test = {0};
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
    if (common_mkdirs(out_dir, 0777, msg, sizeof msg)) {
        fprintf(stderr, "murmur shard: %s\n", msg);
        model_data_free(&d);
        return 1;
    }
    if (test_fraction > 0 && hold_out(&d, test_fraction, seed, out_dir)) {
        model_data_free(&d);
        return 1;
    }
    if (shards > d.count) {
        fprintf(stderr, "murmur shard: %u shards but only %u training samples\n", shards, d.count);
        model_data_free(&d);
        return 2;
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
    if (write_catalog(out_dir, hashes, counts, shards, data, alpha, seed, test_fraction, d.classes))
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
                         uint32_t shards, const char *data, double alpha, unsigned long long seed,
                         double test_fraction, uint32_t classes)
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
    char header[SHARD_PATH_MAX + 160];
    catalog_header(header, sizeof header, shards, data, alpha, seed, test_fraction);
    fprintf(f, "%s classes=%u\n", header, classes);
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
