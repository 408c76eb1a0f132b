/* common/errmsg — the one helper that writes an error message.
 *
 * Every function of murmur that can fail with a message takes a caller's
 * buffer (char *err, size_t errlen) and returns an error code of its
 * module. common_errf formats the message into that buffer and returns the
 * code, so a failure path is one line:
 *
 *     return common_errf(err, errlen, AGENT_CONFIG_EVALUE, "%s: %s", where, why);
 *
 * Messages say what went wrong, where (file:line, flag, peer) and what to do
 * (docs/STYLE.md); they are one line, without a trailing newline or period.
 * err may be NULL or errlen 0: the message is dropped, the code returned.
 * A message longer than the buffer is cut, and always NUL-terminated.
 */
#ifndef COMMON_ERRMSG_H
#define COMMON_ERRMSG_H

#include <stdarg.h>
#include <stddef.h>

int common_errf(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int common_verrf(char *err, size_t errlen, int code, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));

#endif
