/* murmur export — a checkpoint's model in a format NumPy and PyTorch load.
 *
 *   murmur export CHECKPOINT --out FILE [--format npz|safetensors|raw]
 *                 [--data fashion-mnist|DIR|CSV | --input-dim N --classes C] [--force]
 *
 * The checkpoint (agent/checkpoint.h) holds model.spec and the flat
 * parameter vector; the input width and class count come from the data
 * set the model was trained on (--data, default fashion-mnist, as the
 * agent's model.dataset) or are given. model/export.h documents the tensor
 * names, shapes and formats; with npz and safetensors the input scaling the
 * agent's trainer applies (x / 255 for pixel data) is included as
 * input.scale and input.offset. The format defaults from FILE's extension
 * (.npz, .safetensors, otherwise raw). FILE is written whole or not at all,
 * and an existing FILE is refused without --force. Exit status 0, 1 (the
 * checkpoint or the data cannot be read, the write failed), 2 (usage).
 */
#include "agent/commands.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/checkpoint.h"
#include "common/cli.h"
#include "common/text.h"
#include "model/data.h"
#include "model/export.h"

enum { E_OUT, E_FORMAT, E_DATA, E_INPUT, E_CLASSES, E_FORCE, E_HELP };
static const common_flag export_flags[] = {
    {"out", 'o', true, E_OUT, "FILE", "where to write the model", NULL},
    {"format", 0, true, E_FORMAT, "FMT",
     "npz, safetensors or raw (default: from FILE's extension, else raw)", NULL},
    {"data", 0, true, E_DATA, "D",
     "the data set the model was trained on, for its input width, classes and scaling "
     "[fashion-mnist]",
     NULL},
    {"input-dim", 0, true, E_INPUT, "N", "input features (with --classes, instead of --data)",
     NULL},
    {"classes", 0, true, E_CLASSES, "C", "output classes (with --input-dim)", NULL},
    {"force", 0, false, E_FORCE, "", "replace FILE if it exists", NULL},
    {"help", 'h', false, E_HELP, "", "this text", NULL},
};
#define EXPORT_FLAGS (sizeof export_flags / sizeof export_flags[0])

static void export_usage(FILE *out)
{
    common_cli cli;
    common_cli_init(&cli, "murmur export", export_flags, EXPORT_FLAGS, 0, NULL);
    fprintf(out, "usage: murmur export CHECKPOINT --out FILE [--format npz|safetensors|raw]\n"
                 "                     [--data D | --input-dim N --classes C] [--force]\n"
                 "\n"
                 "Write the model of an agent's checkpoint as named float32 tensors that NumPy\n"
                 "(numpy.load) and PyTorch (safetensors) read; docs/EMBEDDING.md, \"Models out\n"
                 "of murmur\", lists the names and shapes.\n\n");
    common_cli_usage(&cli, out);
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

/* Input width, classes and whether the features are pixels (uint8) of a
 * data set given as --data: its test set only (the smaller file). */
static int data_shape(const char *data, uint32_t *dim, uint32_t *classes, int *pixels, char *msg,
                      size_t len)
{
    model_data d;
    int rc;
    struct stat st;
    if (!strcmp(data, "fashion-mnist") || (stat(data, &st) == 0 && S_ISDIR(st.st_mode))) {
        const char *dir = strcmp(data, "fashion-mnist") ? data : MODEL_FASHION_DIR;
        char img[1100], lab[1100];
        snprintf(img, sizeof img, "%s/t10k-images-idx3-ubyte.gz", dir);
        snprintf(lab, sizeof lab, "%s/t10k-labels-idx1-ubyte.gz", dir);
        if (access(img, R_OK)) {
            snprintf(img, sizeof img, "%s/t10k-images-idx3-ubyte", dir);
            snprintf(lab, sizeof lab, "%s/t10k-labels-idx1-ubyte", dir);
        }
        rc = model_idx_load(&d, img, lab, 0, msg, len);
    } else {
        rc = model_csv_load(&d, data, 0, msg, len);
    }
    if (rc)
        return rc;
    *dim = d.dim;
    *classes = d.classes < 10 ? 10 : d.classes; /* as the agent's trainer sizes its model */
    *pixels = d.dtype == MODEL_DTYPE_U8;
    model_data_free(&d);
    return 0;
}

int cmd_export(int argc, char **argv)
{
    const char *ckpt = NULL, *out = NULL, *data = "fashion-mnist";
    const char *format_name = NULL;
    uint64_t in_dim = 0, n_classes = 0;
    int force = 0;
    common_cli cli;
    common_cli_init(&cli, "murmur export", export_flags, EXPORT_FLAGS, argc, argv);
    for (int id; (id = common_cli_next(&cli)) != COMMON_CLI_END;) {
        switch (id) {
        case COMMON_CLI_ERROR:
            fprintf(stderr, "murmur export: %s\n", cli.err);
            return 2;
        case COMMON_CLI_POSITIONAL:
            if (ckpt) {
                fprintf(stderr, "murmur export: one checkpoint at a time ('%s' and '%s')\n", ckpt,
                        cli.arg);
                return 2;
            }
            ckpt = cli.arg;
            break;
        case E_OUT:
            out = cli.arg;
            break;
        case E_FORMAT:
            format_name = cli.arg;
            break;
        case E_DATA:
            data = cli.arg;
            break;
        case E_INPUT:
        case E_CLASSES:
            if (!common_parse_u64(cli.arg, id == E_INPUT ? &in_dim : &n_classes) ||
                (id == E_INPUT ? in_dim : n_classes) == 0 ||
                (id == E_INPUT ? in_dim : n_classes) > (1u << 24)) {
                fprintf(stderr, "murmur export: %s: '%s' is not a count of 1 to 2^24\n", cli.given,
                        cli.arg);
                return 2;
            }
            break;
        case E_FORCE:
            force = 1;
            break;
        case E_HELP:
            export_usage(stdout);
            return 0;
        }
    }
    if (!ckpt || !out) {
        export_usage(stderr);
        return 2;
    }
    if (!in_dim != !n_classes) {
        fprintf(stderr, "murmur export: --input-dim and --classes go together\n");
        return 2;
    }
    model_export_format fmt = ends_with(out, ".npz")           ? MODEL_EXPORT_NPZ
                              : ends_with(out, ".safetensors") ? MODEL_EXPORT_SAFETENSORS
                                                               : MODEL_EXPORT_RAW;
    if (format_name && model_export_format_parse(format_name, &fmt)) {
        fprintf(stderr, "murmur export: --format: '%s' is not npz, safetensors or raw\n",
                format_name);
        return 2;
    }
    char msg[1024] = "";
    agent_checkpoint_meta meta;
    if (agent_checkpoint_read_meta(ckpt, &meta, msg, sizeof msg)) {
        fprintf(stderr, "murmur export: %s\n", msg);
        return 1;
    }
    float *params = malloc((size_t)meta.dim * sizeof *params);
    if (!params) {
        fprintf(stderr, "murmur export: out of memory for %u parameters\n", meta.dim);
        return 1;
    }
    int rc = agent_checkpoint_load(ckpt, meta.spec, meta.dim, &meta, params, NULL, msg, sizeof msg);
    if (rc) {
        fprintf(stderr, "murmur export: %s\n", msg);
        free(params);
        return 1;
    }
    uint32_t dim = (uint32_t)in_dim, classes = (uint32_t)n_classes;
    int pixels = 0;
    if (!in_dim && data_shape(data, &dim, &classes, &pixels, msg, sizeof msg)) {
        fprintf(stderr, "murmur export: --data %s: %s\n", data, msg);
        free(params);
        return 1;
    }
    float *scale = malloc((size_t)dim * sizeof *scale), *offset = calloc(dim, sizeof *offset);
    if (!scale || !offset) {
        fprintf(stderr, "murmur export: out of memory\n");
        free(params), free(scale), free(offset);
        return 1;
    }
    for (uint32_t i = 0; i < dim; i++)
        scale[i] = pixels ? 1.0f / 255.0f : 1.0f;
    rc = model_export(meta.spec, dim, classes, params, meta.dim, scale, offset, fmt, out, force,
                      msg, sizeof msg);
    if (rc) {
        fprintf(stderr, "murmur export: %s (%s)\n", msg, model_strerror(rc));
    } else {
        printf("export checkpoint=%s model=%s params=%u input=%u classes=%u step=%llu format=%s "
               "out=%s\n",
               ckpt, meta.spec, meta.dim, dim, classes, (unsigned long long)meta.step,
               model_export_format_name(fmt), out);
    }
    free(params), free(scale), free(offset);
    return rc ? 1 : 0;
}
