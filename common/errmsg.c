/* common/errmsg — see errmsg.h. */
#include "common/errmsg.h"

#include <stdio.h>

int common_verrf(char *err, size_t errlen, int code, const char *fmt, va_list ap)
{
    if (err && errlen)
        vsnprintf(err, errlen, fmt, ap);
    return code;
}

int common_errf(char *err, size_t errlen, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    common_verrf(err, errlen, code, fmt, ap);
    va_end(ap);
    return code;
}
