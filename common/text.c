/* common/text — see text.h. */
#include "common/text.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int common_fmt_double(double v, char *buf, size_t len)
{
    if (isnan(v))
        return snprintf(buf, len, "nan");
    if (isinf(v))
        return snprintf(buf, len, "%sinf", v < 0 ? "-" : "");
    if (v == floor(v) && fabs(v) < 1e15) /* 30, not 3e+01 */
        return snprintf(buf, len, "%.0f", v);
    char tmp[40];
    int n = 0;
    for (int prec = 1; prec <= 17; prec++) {
        n = snprintf(tmp, sizeof tmp, "%.*g", prec, v);
        if (strtod(tmp, NULL) == v)
            break;
    }
    (void)n;
    return snprintf(buf, len, "%s", tmp);
}

bool common_parse_u64(const char *s, uint64_t *out)
{
    if (!*s)
        return false;
    uint64_t x = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return false;
        unsigned d = (unsigned)(*s - '0');
        if (x > (UINT64_MAX - d) / 10)
            return false;
        x = x * 10 + d;
    }
    *out = x;
    return true;
}

bool common_parse_f64(const char *s, double *out)
{
    if (!*s)
        return false;
    char *end;
    errno = 0;
    double x = strtod(s, &end);
    if (*end || errno == ERANGE || !isfinite(x))
        return false;
    *out = x;
    return true;
}

int common_name_index(const char *const *names, const char *word)
{
    for (int i = 0; names && names[i]; i++)
        if (word && !strcmp(names[i], word))
            return i;
    return -1;
}

size_t common_name_count(const char *const *names)
{
    size_t n = 0;
    while (names && names[n])
        n++;
    return n;
}

const char *common_name_at(const char *const *names, int i)
{
    if (i < 0 || (size_t)i >= common_name_count(names))
        return "unknown";
    return names[i];
}

void common_names_join(const char *const *names, const char *sep, char *buf, size_t len)
{
    size_t at = 0;
    if (!len)
        return;
    buf[0] = '\0';
    for (size_t i = 0; names && names[i]; i++) {
        int n = snprintf(buf + at, len - at, "%s%s", i ? sep : "", names[i]);
        if (n < 0 || (size_t)n >= len - at)
            return;
        at += (size_t)n;
    }
}

unsigned common_edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > COMMON_WORD_MAX || lb > COMMON_WORD_MAX)
        return UINT_MAX;
    /* three rows of the optimal-string-alignment table */
    unsigned rows[3][COMMON_WORD_MAX + 1];
    unsigned *prev2 = rows[0], *prev = rows[1], *cur = rows[2];
    for (size_t j = 0; j <= lb; j++)
        prev[j] = (unsigned)j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = (unsigned)i;
        for (size_t j = 1; j <= lb; j++) {
            unsigned cost = a[i - 1] != b[j - 1];
            unsigned best = prev[j] + 1;
            if (cur[j - 1] + 1 < best)
                best = cur[j - 1] + 1;
            if (prev[j - 1] + cost < best)
                best = prev[j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                prev2[j - 2] + 1 < best)
                best = prev2[j - 2] + 1;
            cur[j] = best;
        }
        unsigned *t = prev2;
        prev2 = prev;
        prev = cur;
        cur = t;
    }
    return prev[lb];
}

void common_nearest_init(common_nearest *n, const char *word)
{
    memset(n, 0, sizeof *n);
    n->word = word;
    n->best_distance = UINT_MAX;
}

/* How far a suggestion may be from the word: see text.h. */
static unsigned nearest_limit(size_t len)
{
    return len <= 4 ? 1u : len <= 8 ? 2u : 3u;
}

void common_nearest_offer(common_nearest *n, const char *candidate)
{
    size_t lc = strlen(candidate), lw = strlen(n->word);
    if (lc >= COMMON_WORD_MAX || !strcmp(candidate, n->word))
        return;
    if (lw && lw < lc && !strncmp(candidate, n->word, lw)) {
        n->prefix_of++;
        memcpy(n->prefix, candidate, lc + 1);
    }
    unsigned d = common_edit_distance(n->word, candidate);
    if (d <= nearest_limit(lw > lc ? lw : lc) && d < n->best_distance) {
        n->best_distance = d;
        memcpy(n->best, candidate, lc + 1);
    }
}

const char *common_nearest_best(const common_nearest *n)
{
    if (n->best[0])
        return n->best;
    if (n->prefix_of == 1)
        return n->prefix;
    return NULL;
}
