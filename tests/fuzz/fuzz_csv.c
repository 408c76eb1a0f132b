/* fuzz_csv — libFuzzer target for model/data's CSV loader (docs/FUZZING.md).
 *
 * Input: byte 0 picks the classes asked for (0 = infer, 2, 10, 4096), the
 * rest is a CSV file, read through an in-memory file (the loader takes a
 * path).
 * Properties, any violation aborts:
 *   - the result is one of ECSV, EDIM, ELABEL, ETOOBIG, EEMPTY (with a
 *     message naming the file) or OK;
 *   - on error the data set is zeroed;
 *   - on success every label is below classes (as asked for, or the
 *     largest label + 1), every feature is finite, and at most one sample
 *     per line;
 *   - round trip: the set written back as CSV (labels as integers, features
 *     with 9 significant digits) loads again to exactly the same set.
 */
#define _GNU_SOURCE
#include "tests/fuzz/fuzz_util.h"

#include <math.h>

#include "model/data.h"
#include "model/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    static const uint32_t classes_opt[] = {0, 2, 10, 4096};
    uint32_t classes = classes_opt[data[0] & 3];
    data++, size--;
    char path[64];
    fuzz_memfile(0, data, size, path, sizeof path);
    model_data d;
    memset(&d, 0xA5, sizeof d);
    char msg[MODEL_MSG_MAX] = "";
    int rc = model_csv_load(&d, path, classes, msg, sizeof msg);
    FUZZ_CHECK(rc == MODEL_OK || rc == MODEL_ECSV || rc == MODEL_EDIM || rc == MODEL_ELABEL ||
               rc == MODEL_ETOOBIG || rc == MODEL_EEMPTY);
    if (rc != MODEL_OK) {
        static const model_data zero;
        FUZZ_CHECK(memcmp(&d, &zero, sizeof d) == 0);
        FUZZ_CHECK(fuzz_has_message(msg, sizeof msg) && strncmp(msg, path, strlen(path)) == 0);
        return 0;
    }
    FUZZ_CHECK(d.dtype == MODEL_DTYPE_F32 && d.count >= 1 && d.dim >= 1);
    FUZZ_CHECK(classes ? d.classes == classes : d.classes >= 1);
    size_t lines = 1;
    for (size_t i = 0; i < size; i++)
        lines += data[i] == '\n';
    FUZZ_CHECK(d.count <= lines);
    uint32_t max_label = 0;
    for (uint32_t i = 0; i < d.count; i++) {
        FUZZ_CHECK(d.labels[i] < d.classes);
        max_label = d.labels[i] > max_label ? d.labels[i] : max_label;
    }
    FUZZ_CHECK(classes || d.classes == max_label + 1);
    for (size_t k = 0; k < (size_t)d.count * d.dim; k++)
        FUZZ_CHECK(isfinite(d.x_f32[k]));

    char *text = NULL;
    size_t tlen = 0;
    FILE *f = open_memstream(&text, &tlen);
    FUZZ_CHECK(f != NULL);
    for (uint32_t i = 0; i < d.count; i++) {
        fprintf(f, "%u", d.labels[i]);
        for (uint32_t j = 0; j < d.dim; j++)
            fprintf(f, ",%.9g", (double)d.x_f32[(size_t)i * d.dim + j]);
        fputc('\n', f);
    }
    FUZZ_CHECK(fclose(f) == 0);
    char path2[64];
    fuzz_memfile(1, (const uint8_t *)text, tlen, path2, sizeof path2);
    free(text);
    model_data e;
    FUZZ_CHECK(model_csv_load(&e, path2, d.classes, msg, sizeof msg) == MODEL_OK);
    FUZZ_CHECK(e.count == d.count && e.dim == d.dim && e.classes == d.classes);
    FUZZ_CHECK(memcmp(e.labels, d.labels, d.count * sizeof *d.labels) == 0);
    FUZZ_CHECK(memcmp(e.x_f32, d.x_f32, (size_t)d.count * d.dim * sizeof(float)) == 0);
    model_data_free(&d);
    model_data_free(&e);
    return 0;
}
