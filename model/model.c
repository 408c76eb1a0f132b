#include "model/model.h"

#include <stdarg.h>
#include <stdio.h>

static const char *const model_err_names[MODEL_ERR_COUNT] = {
    [MODEL_OK] = "success",
    [MODEL_ENOMEM] = "out of memory",
    [MODEL_EINVAL] = "invalid argument",
    [MODEL_ESPEC] = "model spec not understood",
    [MODEL_EIO] = "input/output error",
    [MODEL_ETRUNC] = "truncated data",
    [MODEL_ECORRUPT] = "corrupt data",
    [MODEL_EMAGIC] = "bad magic number",
    [MODEL_EVERSION] = "unsupported version",
    [MODEL_EDIM] = "dimension mismatch",
    [MODEL_ELABEL] = "label out of range",
    [MODEL_ECSV] = "malformed CSV",
    [MODEL_EHASH] = "content hash mismatch",
    [MODEL_ETOOBIG] = "size above its maximum",
    [MODEL_EMISMATCH] = "sample counts disagree",
    [MODEL_EEMPTY] = "no samples",
};

const char *model_strerror(int err)
{
    if (err < 0 || err >= MODEL_ERR_COUNT || !model_err_names[err])
        return "unknown error";
    return model_err_names[err];
}

void model_msgf(char *msg, size_t msg_len, const char *fmt, ...)
{
    if (!msg || !msg_len)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, msg_len, fmt, ap);
    va_end(ap);
}
