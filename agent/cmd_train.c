/* murmur train — train one model on one machine (no peers).
 *
 * Loads a data set (Fashion-MNIST by default, an IDX directory, a CSV file,
 * or shard files), trains with SGD and prints one key=value line per epoch
 * and a closing line starting with "final". The same seed and BLAS thread
 * count give bit-identical output except the timing fields, which are
 * always the last two of a line (seconds=, samples_per_s=) so that a test
 * can strip them and compare the rest.
 */
#include "agent/commands.h"

#include <assert.h>
#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/checkpoint.h"
#include "common/cli.h"
#include "common/text.h"
#include "model/data.h"
#include "model/export.h"
#include "model/net.h"
#include "model/optim.h"
#include "model/shardfile.h"
#include "model/spec.h"

/* Defaults, measured on Fashion-MNIST (docs/BENCHMARKS.md, "train"):
 * SGD with heavy-ball momentum 0.9 at lr 0.05 with a cosine decay to 0
 * over the run and one warm-up epoch reaches 0.89+ with mlp:256,128,100 and
 * 0.84+ with softmax in 20 epochs. Weight decay 5e-4 is the usual value for
 * this model size; it costs nothing on softmax and helps the MLP.
 * Written as plain literals: the usage shows them (TRAIN_STR), so the text
 * cannot drift from the values. */
#define TRAIN_DEFAULT_MODEL  "mlp:256,128,100"
#define TRAIN_DEFAULT_EPOCHS 20
/* A cnn (the default CNN, MODEL_CNN_DEFAULT) reaches 0.92+ in 15 epochs
 * with the same optimiser settings (docs/BENCHMARKS.md, "cnn"); each epoch
 * costs ~30x an MLP epoch, so its default is shorter. */
#define TRAIN_DEFAULT_EPOCHS_CNN    15
#define TRAIN_DEFAULT_BATCH         64
#define TRAIN_DEFAULT_LR            0.05
#define TRAIN_DEFAULT_MOMENTUM      0.9
#define TRAIN_DEFAULT_WEIGHT_DECAY  5e-4
#define TRAIN_DEFAULT_WARMUP_EPOCHS 1
#define TRAIN_DEFAULT_STEP_EPOCHS   5
#define TRAIN_DEFAULT_GAMMA         0.1
#define TRAIN_DEFAULT_HOLDOUT       0.1 /* CSV without --test: fraction held out */
#define TRAIN_SHARD_FILES_MAX       4096u
#define TRAIN_EPOCHS_MAX            100000u
#define TRAIN_STR_(x)               #x
#define TRAIN_STR(x)                TRAIN_STR_(x)

typedef struct train_opts {
    const char *model;
    uint32_t epochs, batch, test_every, blas_threads, step_epochs;
    uint32_t limit, test_limit;
    float lr, momentum, weight_decay, gamma, min_lr;
    double warmup_epochs;
    int nesterov;
    model_lr_kind schedule;
    int norm_set, epochs_set;
    model_norm_mode norm;
    uint64_t seed;
    const char *data, *test;
    const char *save; /* --save FILE, or NULL */
    int force;        /* --force: --save may replace FILE */
    const char *shards[TRAIN_SHARD_FILES_MAX];
    uint32_t shard_count;
} train_opts;

/* The flags, in the order the usage lists them; the usage's sections are
 * the ranges [0, T_DATA), [T_DATA, T_BLAS_THREADS) and the rest. */
enum {
    T_MODEL,
    T_EPOCHS,
    T_BATCH,
    T_LR,
    T_MOMENTUM,
    T_NESTEROV,
    T_WEIGHT_DECAY,
    T_SCHEDULE,
    T_WARMUP_EPOCHS,
    T_STEP_EPOCHS,
    T_GAMMA,
    T_MIN_LR,
    T_SEED,
    T_DATA,
    T_TEST,
    T_SHARDS,
    T_NORM,
    T_LIMIT,
    T_TEST_LIMIT,
    T_TEST_EVERY,
    T_BLAS_THREADS,
    T_SAVE,
    T_FORCE,
    T_HELP,
    T_FLAG_COUNT
};
static const common_flag train_flags[] = {
    {"model", 0, true, T_MODEL, "SPEC",
     "'softmax', 'mlp:W1,W2,...' (hidden widths), 'cnn'\n"
     "(the default CNN,\n" MODEL_CNN_DEFAULT ")\n"
     "or 'cnn:LAYERS', LAYERS from\n"
     "c<N>k<K>[s<S>][p<P>][g<G>] (convolution, G groups\n"
     "of group norm), p<K>[s<S>] (max pool), a<K>[s<S>]\n"
     "(average pool), f<N> (dense), d<RATE> (dropout),\n"
     "first i<C>x<H>x<W> for a non-square or colour\n"
     "input [" TRAIN_DEFAULT_MODEL "]",
     NULL},
    {"epochs", 0, true, T_EPOCHS, "N",
     "passes over the training set [" TRAIN_STR(TRAIN_DEFAULT_EPOCHS) "; " TRAIN_STR(
         TRAIN_DEFAULT_EPOCHS_CNN) " for a cnn]",
     NULL},
    {"batch", 0, true, T_BATCH, "N", "mini-batch size [" TRAIN_STR(TRAIN_DEFAULT_BATCH) "]", NULL},
    {"lr", 0, true, T_LR, "F", "peak learning rate [" TRAIN_STR(TRAIN_DEFAULT_LR) "]", NULL},
    {"momentum", 0, true, T_MOMENTUM, "F",
     "SGD momentum in [0,1) [" TRAIN_STR(TRAIN_DEFAULT_MOMENTUM) "]", NULL},
    {"nesterov", 0, false, T_NESTEROV, "", "Nesterov momentum [off]", NULL},
    {"weight-decay", 0, true, T_WEIGHT_DECAY, "F",
     "L2 weight decay [" TRAIN_STR(TRAIN_DEFAULT_WEIGHT_DECAY) "]", NULL},
    {"schedule", 0, true, T_SCHEDULE, "S", "constant | step | cosine [cosine]", NULL},
    {"warmup-epochs", 0, true, T_WARMUP_EPOCHS, "F",
     "linear warm-up in epochs (fractions ok) [" TRAIN_STR(TRAIN_DEFAULT_WARMUP_EPOCHS) "]", NULL},
    {"step-epochs", 0, true, T_STEP_EPOCHS, "N",
     "step schedule: decay every N epochs [" TRAIN_STR(TRAIN_DEFAULT_STEP_EPOCHS) "]", NULL},
    {"gamma", 0, true, T_GAMMA, "F",
     "step schedule: decay factor [" TRAIN_STR(TRAIN_DEFAULT_GAMMA) "]", NULL},
    {"min-lr", 0, true, T_MIN_LR, "F", "cosine schedule: final learning rate [0]", NULL},
    {"seed", 0, true, T_SEED, "S", "seed of initialisation and shuffling [1]", NULL},
    {"data", 0, true, T_DATA, "D",
     "fashion-mnist (" MODEL_FASHION_DIR "),\n"
     "a directory of IDX files (train-/t10k-images-\n"
     "idx3-ubyte[.gz], ...-labels-idx1-ubyte[.gz]) or a\n"
     "CSV file 'label,f1,...,fn' [fashion-mnist]",
     NULL},
    {"test", 0, true, T_TEST, "PATH",
     "CSV test set for a CSV --data (default: hold out\n"
     "a fraction " TRAIN_STR(TRAIN_DEFAULT_HOLDOUT) " of --data, chosen by the seed;\n"
                                                    "required with --shards)",
     NULL},
    {"shards", 0, true, T_SHARDS, "FILE...",
     "train on these shard files (from 'murmur shard');\n"
     "the test set still comes from --data / --test",
     NULL},
    {"norm", 0, true, T_NORM, "M",
     "none | unit (x/255) | global | feature (z-score\n"
     "fitted on the training data) [unit for uint8 data,\n"
     "feature for CSV]",
     NULL},
    {"limit", 0, true, T_LIMIT, "N", "use only the first N training samples [all]", NULL},
    {"test-limit", 0, true, T_TEST_LIMIT, "N", "use only the first N test samples [all]", NULL},
    {"test-every", 0, true, T_TEST_EVERY, "N", "evaluate on the test set every N epochs [1]", NULL},
    {"blas-threads", 0, true, T_BLAS_THREADS, "N", "OpenBLAS threads [1]", NULL},
    {"save", 0, true, T_SAVE, "FILE",
     "write the trained model: FILE.npz or\n"
     "FILE.safetensors (NumPy, PyTorch;\n"
     "docs/EMBEDDING.md), FILE.raw (float32), anything\n"
     "else a murmur checkpoint (an agent resumes from it;\n"
     "murmur export converts it); an existing FILE is\n"
     "refused",
     NULL},
    {"force", 0, false, T_FORCE, "", "let --save replace FILE", NULL},
    {"help", 'h', false, T_HELP, "", "this text", NULL},
};
#define TRAIN_FLAGS (sizeof train_flags / sizeof train_flags[0])
_Static_assert(TRAIN_FLAGS == T_FLAG_COUNT, "one row per flag, in enum order");

/* The usage of a slice [from, to) of the table. */
static void train_usage_rows(FILE *out, size_t from, size_t to)
{
    common_cli cli;
    common_cli_init(&cli, "murmur train", train_flags + from, to - from, 0, NULL);
    common_cli_usage(&cli, out);
}

static void train_usage(FILE *out)
{
    fprintf(out, "usage: murmur train [OPTIONS]\n"
                 "\n"
                 "Train a classifier on one machine and print one key=value line per epoch\n"
                 "(epoch, lr, train_loss, test_loss, test_accuracy, seconds, samples_per_s)\n"
                 "and a final line 'final ... test_accuracy=...'.\n"
                 "\n"
                 "model and optimiser:\n");
    train_usage_rows(out, 0, T_DATA);
    fprintf(out, "\ndata:\n");
    train_usage_rows(out, T_DATA, T_BLAS_THREADS);
    fprintf(out, "\n");
    train_usage_rows(out, T_BLAS_THREADS, TRAIN_FLAGS);
    fprintf(out, "\nSame seed and --blas-threads give identical output except the seconds= and\n"
                 "samples_per_s= fields.\n");
}

static int parse_u32(const char *flag, const char *s, uint32_t lo, uint32_t hi, uint32_t *out)
{
    uint64_t v;
    if (!common_parse_u64(s, &v) || v < lo || v > hi) {
        fprintf(stderr, "murmur train: %s wants an integer in [%u, %u], not '%s'\n", flag, lo, hi,
                s);
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

static int parse_double(const char *flag, const char *s, double lo, double hi, double *out)
{
    if (!common_parse_f64(s, out) || !(*out >= lo && *out <= hi)) {
        fprintf(stderr, "murmur train: %s wants a number in [%g, %g], not '%s'\n", flag, lo, hi, s);
        return -1;
    }
    return 0;
}

static int parse_float(const char *flag, const char *s, double lo, double hi, float *out)
{
    double v;
    if (parse_double(flag, s, lo, hi, &v))
        return -1;
    *out = (float)v;
    return 0;
}

/* One flag with its value v. 0, 1 (--help shown) or -1 (message printed). */
static int apply_flag(train_opts *o, int id, const char *flag, const char *v)
{
    switch (id) {
    case T_HELP:
        train_usage(stdout);
        return 1;
    case T_FORCE:
        o->force = 1;
        return 0;
    case T_NESTEROV:
        o->nesterov = 1;
        return 0;
    case T_MODEL:
        o->model = v;
        return 0;
    case T_DATA:
        o->data = v;
        return 0;
    case T_TEST:
        o->test = v;
        return 0;
    case T_SAVE:
        o->save = v;
        return 0;
    case T_EPOCHS:
        o->epochs_set = 1;
        return parse_u32(flag, v, 1, TRAIN_EPOCHS_MAX, &o->epochs);
    case T_BATCH:
        return parse_u32(flag, v, 1, 65536, &o->batch);
    case T_TEST_EVERY:
        return parse_u32(flag, v, 1, TRAIN_EPOCHS_MAX, &o->test_every);
    case T_BLAS_THREADS:
        return parse_u32(flag, v, 1, 1024, &o->blas_threads);
    case T_STEP_EPOCHS:
        return parse_u32(flag, v, 1, TRAIN_EPOCHS_MAX, &o->step_epochs);
    case T_LIMIT:
        return parse_u32(flag, v, 1, MODEL_SAMPLES_MAX, &o->limit);
    case T_TEST_LIMIT:
        return parse_u32(flag, v, 1, MODEL_SAMPLES_MAX, &o->test_limit);
    case T_LR:
        return parse_float(flag, v, 0, 100, &o->lr);
    case T_MOMENTUM:
        return parse_float(flag, v, 0, 0.999999, &o->momentum);
    case T_WEIGHT_DECAY:
        return parse_float(flag, v, 0, 1, &o->weight_decay);
    case T_GAMMA:
        return parse_float(flag, v, 0, 1, &o->gamma);
    case T_MIN_LR:
        return parse_float(flag, v, 0, 100, &o->min_lr);
    case T_WARMUP_EPOCHS:
        return parse_double(flag, v, 0, TRAIN_EPOCHS_MAX, &o->warmup_epochs);
    case T_SEED:
        if (!common_parse_u64(v, &o->seed)) {
            fprintf(stderr, "murmur train: %s wants a non-negative integer, not '%s'\n", flag, v);
            return -1;
        }
        return 0;
    case T_SCHEDULE:
        if (model_schedule_parse(v, &o->schedule)) {
            fprintf(stderr, "murmur train: %s is constant, step or cosine, not '%s'\n", flag, v);
            return -1;
        }
        return 0;
    case T_NORM:
        if (model_norm_parse(v, &o->norm)) {
            fprintf(stderr, "murmur train: %s is none, unit, global or feature, not '%s'\n", flag,
                    v);
            return -1;
        }
        o->norm_set = 1;
        return 0;
    default:
        assert(!"a flag of the table without a case");
        return -1;
    }
}

/* Add one shard file. 0, or -1 after a message. */
static int add_shard(train_opts *o, const char *path)
{
    if (!strncmp(path, "--", 2) || !path[0]) {
        fprintf(stderr, "murmur train: --shards wants at least one file, not '%s'\n", path);
        return -1;
    }
    if (o->shard_count == TRAIN_SHARD_FILES_MAX) {
        fprintf(stderr, "murmur train: more than %u shard files\n", TRAIN_SHARD_FILES_MAX);
        return -1;
    }
    o->shards[o->shard_count++] = path;
    return 0;
}

/* 0, 1 (--help shown: exit 0) or -1 (usage error, message printed). */
static int parse_args(int argc, char **argv, train_opts *o)
{
    *o = (train_opts){.model = TRAIN_DEFAULT_MODEL,
                      .epochs = TRAIN_DEFAULT_EPOCHS,
                      .batch = TRAIN_DEFAULT_BATCH,
                      .test_every = 1,
                      .blas_threads = 1,
                      .step_epochs = TRAIN_DEFAULT_STEP_EPOCHS,
                      .lr = (float)TRAIN_DEFAULT_LR,
                      .momentum = (float)TRAIN_DEFAULT_MOMENTUM,
                      .weight_decay = (float)TRAIN_DEFAULT_WEIGHT_DECAY,
                      .gamma = (float)TRAIN_DEFAULT_GAMMA,
                      .warmup_epochs = TRAIN_DEFAULT_WARMUP_EPOCHS,
                      .schedule = MODEL_LR_COSINE,
                      .seed = 1,
                      .data = "fashion-mnist"};
    common_cli cli;
    common_cli_init(&cli, "murmur train", train_flags, TRAIN_FLAGS, argc, argv);
    /* --shards FILE...: the files are its value and the positional
     * arguments up to the next flag */
    bool in_shards = false;
    for (int id; (id = common_cli_next(&cli)) != COMMON_CLI_END;) {
        int rc;
        if (id == COMMON_CLI_ERROR) {
            fprintf(stderr, "murmur train: %s\n", cli.err);
            return -1;
        }
        if (id == COMMON_CLI_POSITIONAL) {
            if (!in_shards) {
                fprintf(stderr,
                        "murmur train: unexpected argument '%s' (every option is a flag; "
                        "see --help)\n",
                        cli.arg);
                return -1;
            }
            rc = add_shard(o, cli.arg);
        } else if (id == T_SHARDS) {
            in_shards = true;
            rc = add_shard(o, cli.arg);
        } else {
            in_shards = false;
            rc = apply_flag(o, id, cli.given, cli.arg);
        }
        if (rc)
            return rc;
    }
    if (!o->epochs_set && !strncmp(o->model, "cnn", 3))
        o->epochs = TRAIN_DEFAULT_EPOCHS_CNN;
    if (o->save && !o->force && access(o->save, F_OK) == 0) {
        fprintf(stderr, "murmur train: --save %s: the file exists; it is not replaced (--force)\n",
                o->save);
        return -1;
    }
    if (o->nesterov && o->momentum == 0.0f) {
        fprintf(stderr, "murmur train: --nesterov needs --momentum > 0\n");
        return -1;
    }
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Load train and test sets as the options say. 0 or a model_err. */
static int load_data(const train_opts *o, model_data *train, model_data *test, char *msg,
                     size_t msg_len)
{
    memset(train, 0, sizeof *train);
    memset(test, 0, sizeof *test);
    int rc;
    model_data base_train = {0};
    if (!strcmp(o->data, "fashion-mnist") || is_dir(o->data)) {
        rc = model_fashion_load(&base_train, test,
                                strcmp(o->data, "fashion-mnist") ? o->data : NULL, msg, msg_len);
        if (rc)
            return rc;
    } else {
        if (o->shard_count && !o->test) {
            /* shards cut from this CSV hold all of it: a held-out part would
             * overlap the training data */
            model_msgf(msg, msg_len, "training on shards of a CSV data set needs --test PATH");
            return MODEL_EINVAL;
        }
        rc = model_csv_load(&base_train, o->data, 0, msg, msg_len);
        if (rc)
            return rc;
        if (o->test) {
            rc = model_csv_load(test, o->test, 0, msg, msg_len);
            if (!rc && test->dim != base_train.dim) {
                model_msgf(msg, msg_len, "%s: %u features, but %s has %u", o->test, test->dim,
                           o->data, base_train.dim);
                rc = MODEL_EDIM;
            }
            if (rc) {
                model_data_free(&base_train);
                return rc;
            }
        } else {
            /* Hold out a fraction chosen by the seed (stream 2). */
            uint32_t n = base_train.count;
            uint32_t n_test = (uint32_t)(n * TRAIN_DEFAULT_HOLDOUT);
            if (n_test == 0 || n_test == n) {
                model_msgf(msg, msg_len,
                           "%s: %u samples are too few to hold out a test set; "
                           "give --test",
                           o->data, n);
                model_data_free(&base_train);
                return MODEL_EEMPTY;
            }
            uint32_t *perm = malloc((size_t)n * sizeof *perm);
            if (!perm) {
                model_data_free(&base_train);
                return MODEL_ENOMEM;
            }
            model_rng r;
            model_rng_seed(&r, o->seed, 2);
            model_data_shuffle(perm, n, &r);
            model_data tr = {0};
            rc = model_data_subset(test, &base_train, perm, n_test);
            if (!rc)
                rc = model_data_subset(&tr, &base_train, perm + n_test, n - n_test);
            free(perm);
            model_data_free(&base_train);
            if (rc) {
                model_data_free(test);
                return rc;
            }
            base_train = tr;
        }
        /* A class present only in one of the two sets still needs an output. */
        uint32_t c = base_train.classes > test->classes ? base_train.classes : test->classes;
        base_train.classes = test->classes = c;
    }
    if (o->shard_count) {
        model_data_free(&base_train);
        model_data *parts = calloc(o->shard_count, sizeof *parts);
        if (!parts) {
            model_data_free(test);
            return MODEL_ENOMEM;
        }
        for (uint32_t s = 0; s < o->shard_count && !rc; s++)
            rc = model_shard_load(&parts[s], NULL, o->shards[s], msg, msg_len);
        if (!rc)
            rc = model_data_concat(&base_train, parts, o->shard_count, msg, msg_len);
        for (uint32_t s = 0; s < o->shard_count; s++)
            model_data_free(&parts[s]);
        free(parts);
        if (!rc && (base_train.dim != test->dim || base_train.dtype != test->dtype)) {
            model_msgf(msg, msg_len,
                       "shards have %u features (dtype %d), the test set %u (dtype %d): were "
                       "they cut from the same data set?",
                       base_train.dim, (int)base_train.dtype, test->dim, (int)test->dtype);
            rc = MODEL_EDIM;
        }
        if (rc) {
            model_data_free(&base_train);
            model_data_free(test);
            return rc;
        }
        if (test->classes > base_train.classes)
            base_train.classes = test->classes;
    }
    if (o->limit && o->limit < base_train.count)
        base_train.count = o->limit; /* arrays keep their size; free() is unaffected */
    if (o->test_limit && o->test_limit < test->count)
        test->count = o->test_limit;
    *train = base_train;
    return MODEL_OK;
}

/* First 8 bytes of BLAKE2b-256 of the parameter bytes, as hex: a short
 * fingerprint that proves two runs ended with identical parameters. */
static void param_fingerprint(const float *p, size_t n, char out[17])
{
    uint8_t h[32];
    crypto_generichash(h, sizeof h, (const uint8_t *)p, n * sizeof *p, NULL, 0);
    for (int i = 0; i < 8; i++)
        sprintf(out + 2 * i, "%02x", h[i]);
}

static int has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

/* --save FILE: by extension a model for NumPy/PyTorch (model/export.h, with
 * the input normalisation) or a murmur checkpoint. Returns 0, or -1 after a
 * message (training results are printed already; nothing half-written). */
static int save_model(const train_opts *o, model_net *net, const model_sgd *sgd,
                      const model_norm *norm, uint64_t steps)
{
    if (!o->save)
        return 0;
    char msg[1024] = "";
    const char *kind;
    int rc;
    if (has_suffix(o->save, ".npz") || has_suffix(o->save, ".safetensors") ||
        has_suffix(o->save, ".raw")) {
        model_export_format f = has_suffix(o->save, ".npz")           ? MODEL_EXPORT_NPZ
                                : has_suffix(o->save, ".safetensors") ? MODEL_EXPORT_SAFETENSORS
                                                                      : MODEL_EXPORT_RAW;
        kind = model_export_format_name(f);
        rc = model_export(o->model, model_net_input_dim(net), model_net_classes(net),
                          model_net_params(net), model_net_param_count(net), norm->scale,
                          norm->offset, f, o->save, o->force, msg, sizeof msg);
    } else {
        kind = "checkpoint";
        agent_checkpoint ck = {.spec = o->model,
                               .dim = (uint32_t)model_net_param_count(net),
                               .step = steps,
                               .params = model_net_params(net),
                               .momentum = sgd->velocity};
        rc = agent_checkpoint_save(o->save, &ck, msg, sizeof msg);
    }
    if (rc) {
        fprintf(stderr, "murmur train: --save %s: %s\n", o->save, msg);
        return -1;
    }
    printf("saved path=%s format=%s\n", o->save, kind);
    return 0;
}

int cmd_train(int argc, char **argv)
{
    train_opts o;
    int prc = parse_args(argc, argv, &o);
    if (prc)
        return prc > 0 ? 0 : 2;
    openblas_set_num_threads((int)o.blas_threads);
    char msg[MODEL_MSG_MAX] = "";
    model_data train, test;
    int rc = load_data(&o, &train, &test, msg, sizeof msg);
    if (rc) {
        fprintf(stderr, "murmur train: %s (%s)\n", msg[0] ? msg : "cannot load data",
                model_strerror(rc));
        return rc == MODEL_EINVAL ? 2 : 1;
    }
    model_norm_mode mode =
        o.norm_set ? o.norm
                   : (train.dtype == MODEL_DTYPE_U8 ? MODEL_NORM_UNIT : MODEL_NORM_FEATURE);
    model_norm norm = {0};
    model_net *net = NULL;
    model_sgd sgd = {0};
    uint32_t *order = NULL;
    int status = 1;
    rc = model_norm_fit(&norm, &train, mode);
    if (rc) {
        fprintf(stderr, "murmur train: cannot fit the normalisation: %s\n", model_strerror(rc));
        goto out;
    }
    rc = model_net_create(&net, o.model, train.dim, train.classes, o.batch, msg, sizeof msg);
    if (rc) {
        fprintf(stderr, "murmur train: %s (%s)\n", msg[0] ? msg : "cannot create the model",
                model_strerror(rc));
        status = rc == MODEL_ESPEC ? 2 : 1;
        goto out;
    }
    model_sgd_config sc = {
        .momentum = o.momentum, .weight_decay = o.weight_decay, .nesterov = o.nesterov};
    rc = model_sgd_init(&sgd, model_net_param_count(net), &sc);
    order = malloc((size_t)train.count * sizeof *order);
    if (rc || !order) {
        fprintf(stderr, "murmur train: cannot set up the optimiser: %s\n",
                model_strerror(rc ? rc : MODEL_ENOMEM));
        goto out;
    }
    model_rng init_rng, shuffle_rng;
    model_rng_seed(&init_rng, o.seed, 0);
    model_rng_seed(&shuffle_rng, o.seed, 1);
    model_net_init(net, &init_rng);

    uint64_t steps_per_epoch = (train.count + o.batch - 1) / o.batch;
    model_schedule sched = {.kind = o.schedule,
                            .base_lr = o.lr,
                            .min_lr = o.min_lr,
                            .gamma = o.gamma,
                            .step_every = o.step_epochs * steps_per_epoch,
                            .warmup_steps = (uint64_t)(o.warmup_epochs * steps_per_epoch),
                            .total_steps = o.epochs * steps_per_epoch};
    printf("train model=%s params=%zu input=%u classes=%u train_samples=%u test_samples=%u "
           "epochs=%u batch=%u lr=%g momentum=%g nesterov=%d weight_decay=%g schedule=%s "
           "warmup_epochs=%g norm=%s seed=%llu blas_threads=%u\n",
           o.model, model_net_param_count(net), train.dim, train.classes, train.count, test.count,
           o.epochs, o.batch, (double)o.lr, (double)o.momentum, o.nesterov, (double)o.weight_decay,
           model_schedule_name(o.schedule), o.warmup_epochs, model_norm_name(mode),
           (unsigned long long)o.seed, o.blas_threads);
    fflush(stdout);

    float *xb = model_net_input_buffer(net);
    uint16_t *yb = model_net_label_buffer(net);
    uint64_t step = 0;
    double train_loss = 0, test_loss = NAN, test_acc = NAN, total_s = 0;
    uint64_t total_samples = 0;
    for (uint32_t epoch = 1; epoch <= o.epochs; epoch++) {
        double t0 = now_s();
        model_data_shuffle(order, train.count, &shuffle_rng);
        double loss_sum = 0;
        float lr = 0;
        for (uint32_t at = 0; at < train.count; at += o.batch) {
            uint32_t n = train.count - at < o.batch ? train.count - at : o.batch;
            model_data_gather(&train, &norm, order + at, n, xb, yb);
            if (at + n < train.count) /* the next batch loads while this one trains */
                model_data_prefetch(&train, order + at + n,
                                    train.count - at - n < o.batch ? train.count - at - n
                                                                   : o.batch);
            lr = model_schedule_lr(&sched, step++);
            float loss;
            rc = model_train_step(net, &sgd, xb, yb, n, lr, &loss);
            if (rc) {
                fprintf(stderr, "murmur train: step %llu failed: %s\n", (unsigned long long)step,
                        model_strerror(rc));
                goto out;
            }
            loss_sum += (double)loss * n;
        }
        double train_s = now_s() - t0;
        total_s += train_s;
        total_samples += train.count;
        train_loss = loss_sum / train.count;
        if (!isfinite(train_loss)) {
            fprintf(stderr, "murmur train: the training loss diverged at epoch %u; lower --lr\n",
                    epoch);
            goto out;
        }
        printf("epoch=%u lr=%.6g train_loss=%.6f", epoch, (double)lr, train_loss);
        if (epoch % o.test_every == 0 || epoch == o.epochs) {
            rc = model_net_evaluate(net, &test, &norm, &test_loss, &test_acc);
            if (rc) {
                fprintf(stderr, "murmur train: evaluation failed: %s\n", model_strerror(rc));
                goto out;
            }
            printf(" test_loss=%.6f test_accuracy=%.4f", test_loss, test_acc);
        }
        printf(" seconds=%.2f samples_per_s=%.0f\n", train_s, train.count / train_s);
        fflush(stdout);
    }
    char fp[17];
    param_fingerprint(model_net_params(net), model_net_param_count(net), fp);
    printf("final epochs=%u train_loss=%.6f test_loss=%.6f test_accuracy=%.4f params=%zu "
           "param_hash=%s seconds=%.2f samples_per_s=%.0f\n",
           o.epochs, train_loss, test_loss, test_acc, model_net_param_count(net), fp, total_s,
           total_samples / total_s);
    status = save_model(&o, net, &sgd, &norm, o.epochs * steps_per_epoch) ? 1 : 0;
out:
    free(order);
    model_sgd_free(&sgd);
    model_net_destroy(net);
    model_norm_free(&norm);
    model_data_free(&train);
    model_data_free(&test);
    return status;
}
