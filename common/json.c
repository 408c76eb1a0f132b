/* common/json — see json.h. */
#include "common/json.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "common/text.h"

void common_json_init_buf(common_json *j, char *buf, size_t cap, unsigned indent)
{
    memset(j, 0, sizeof *j);
    j->buf = buf;
    j->cap = cap;
    j->indent = indent;
    j->empty[0] = true;
    if (!buf || !cap)
        j->failed = true;
    else
        buf[0] = '\0';
}

void common_json_init_file(common_json *j, FILE *f, unsigned indent)
{
    memset(j, 0, sizeof *j);
    j->file = f;
    j->indent = indent;
    j->empty[0] = true;
    if (!f)
        j->failed = true;
}

static void put(common_json *j, const char *s, size_t n)
{
    if (j->failed)
        return;
    if (j->file) {
        if (n && fwrite(s, 1, n, j->file) != n)
            j->failed = true;
        j->len += n;
        return;
    }
    if (n >= j->cap - j->len) {
        j->failed = true;
        return;
    }
    memcpy(j->buf + j->len, s, n);
    j->len += n;
    j->buf[j->len] = '\0';
}

static void puts_(common_json *j, const char *s)
{
    put(j, s, strlen(s));
}

static void newline_indent(common_json *j, unsigned depth)
{
    static const char spaces[] = "                                ";
    put(j, "\n", 1);
    size_t n = (size_t)depth * j->indent;
    while (n) {
        size_t k = n < sizeof spaces - 1 ? n : sizeof spaces - 1;
        put(j, spaces, k);
        n -= k;
    }
}

static void put_string(common_json *j, const char *s)
{
    put(j, "\"", 1);
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        const unsigned char *run = p;
        while (*p >= 0x20 && *p != 0x7f && *p != '"' && *p != '\\')
            p++;
        put(j, (const char *)run, (size_t)(p - run));
        if (!*p)
            break;
        char esc[8];
        switch (*p) {
        case '"':
            puts_(j, "\\\"");
            break;
        case '\\':
            puts_(j, "\\\\");
            break;
        case '\n':
            puts_(j, "\\n");
            break;
        case '\r':
            puts_(j, "\\r");
            break;
        case '\t':
            puts_(j, "\\t");
            break;
        default:
            snprintf(esc, sizeof esc, "\\u%04x", *p);
            puts_(j, esc);
        }
        p++;
    }
    put(j, "\"", 1);
}

/* The separator, indentation and key before a value. */
static void member(common_json *j, const char *key)
{
    if (j->failed)
        return;
    if (j->depth == 0 && !j->empty[0]) {
        j->failed = true; /* one value per document */
        return;
    }
    if (!j->empty[j->depth])
        put(j, ",", 1);
    j->empty[j->depth] = false;
    if (j->indent && j->depth)
        newline_indent(j, j->depth);
    bool in_object = j->depth && j->close[j->depth] == '}';
    if (in_object != (key != NULL)) {
        j->failed = true; /* a key inside an object, none elsewhere */
        return;
    }
    if (key) {
        put_string(j, key);
        puts_(j, j->indent ? ": " : ":");
    }
}

static void open_container(common_json *j, const char *key, char open, char close)
{
    member(j, key);
    if (j->failed)
        return;
    if (j->depth == COMMON_JSON_DEPTH_MAX) {
        j->failed = true;
        return;
    }
    put(j, &open, 1);
    j->depth++;
    j->empty[j->depth] = true;
    j->close[j->depth] = close;
}

void common_json_object_begin(common_json *j, const char *key)
{
    open_container(j, key, '{', '}');
}

void common_json_array_begin(common_json *j, const char *key)
{
    open_container(j, key, '[', ']');
}

void common_json_end(common_json *j)
{
    if (j->failed)
        return;
    if (j->depth == 0) {
        j->failed = true;
        return;
    }
    if (j->indent && !j->empty[j->depth])
        newline_indent(j, j->depth - 1);
    put(j, &j->close[j->depth], 1);
    j->depth--;
}

void common_json_string(common_json *j, const char *key, const char *v)
{
    member(j, key);
    put_string(j, v ? v : "");
}

void common_json_u64(common_json *j, const char *key, uint64_t v)
{
    char t[24];
    snprintf(t, sizeof t, "%" PRIu64, v);
    member(j, key);
    puts_(j, t);
}

void common_json_i64(common_json *j, const char *key, int64_t v)
{
    char t[24];
    snprintf(t, sizeof t, "%" PRId64, v);
    member(j, key);
    puts_(j, t);
}

void common_json_number(common_json *j, const char *key, double v)
{
    char t[40] = "null";
    if (isfinite(v))
        common_fmt_double(v, t, sizeof t);
    member(j, key);
    puts_(j, t);
}

void common_json_bool(common_json *j, const char *key, bool v)
{
    member(j, key);
    puts_(j, v ? "true" : "false");
}

void common_json_null(common_json *j, const char *key)
{
    member(j, key);
    puts_(j, "null");
}

int common_json_finish(common_json *j, size_t *len)
{
    if (j->depth || j->empty[0])
        j->failed = true;
    put(j, "\n", 1);
    if (j->file && !j->failed && ferror(j->file))
        j->failed = true;
    if (j->failed)
        return -1;
    if (len)
        *len = j->len;
    return 0;
}

/* ---- reading ---- */

void common_json_reader_init(common_json_reader *r, const char *doc)
{
    r->p = doc;
    r->state = 0;
}

static const char *skip_ws(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
        p++;
    return p;
}

static unsigned hex_digit(char h)
{
    return h >= '0' && h <= '9'   ? (unsigned)(h - '0')
           : h >= 'a' && h <= 'f' ? (unsigned)(h - 'a' + 10)
           : h >= 'A' && h <= 'F' ? (unsigned)(h - 'A' + 10)
                                  : 16u;
}

/* A string at p (after the opening quote) into out; the position after
 * the closing quote, or NULL. */
static const char *read_string(const char *p, char *out, size_t cap)
{
    size_t n = 0;
    for (; *p && *p != '"'; p++) {
        char c = *p;
        if (c == '\\') {
            p++;
            switch (*p) {
            case 'n':
                c = '\n';
                break;
            case 't':
                c = '\t';
                break;
            case 'r':
                c = '\r';
                break;
            case 'b':
                c = '\b';
                break;
            case 'f':
                c = '\f';
                break;
            case 'u': {
                unsigned v = 0;
                for (int i = 1; i <= 4; i++) {
                    unsigned d = hex_digit(p[i]);
                    if (d == 16)
                        return NULL;
                    v = v * 16 + d;
                }
                p += 4;
                c = v >= 0x20 && v < 0x7f ? (char)v : '?';
                break;
            }
            case '"':
            case '\\':
            case '/':
                c = *p;
                break;
            default:
                return NULL;
            }
        }
        if (n + 1 < cap)
            out[n++] = c;
    }
    if (*p != '"')
        return NULL;
    if (cap)
        out[n] = '\0';
    return p + 1;
}

int common_json_next(common_json_reader *r, char *key, size_t kcap, char *val, size_t vcap)
{
    const char *p = skip_ws(r->p);
    if (r->state == 2)
        return 0;
    if (r->state == 0) {
        if (*p++ != '{')
            return -1;
        r->state = 1;
        p = skip_ws(p);
        if (*p == '}') {
            r->state = 2;
            r->p = p + 1;
            return 0;
        }
    } else {
        if (*p == '}') {
            r->state = 2;
            r->p = p + 1;
            return 0;
        }
        if (*p++ != ',')
            return -1;
        p = skip_ws(p);
    }
    if (*p++ != '"' || !(p = read_string(p, key, kcap)))
        return -1;
    p = skip_ws(p);
    if (*p++ != ':')
        return -1;
    p = skip_ws(p);
    if (*p == '"') {
        if (!(p = read_string(p + 1, val, vcap)))
            return -1;
    } else {
        size_t n = strcspn(p, ",} \t\r\n");
        if (n == 0 || *p == '{' || *p == '[')
            return -1;
        snprintf(val, vcap, "%.*s", (int)n, p);
        p += n;
    }
    r->p = p;
    return 1;
}

int common_json_get(const char *doc, const char *key, char *val, size_t vcap)
{
    common_json_reader r;
    common_json_reader_init(&r, doc);
    char k[128];
    int rc;
    /* A key that fills k may have been cut: it is nobody's (found by
     * fuzz_json: a 200-byte key answered for its 127-byte prefix). */
    while ((rc = common_json_next(&r, k, sizeof k, val, vcap)) == 1)
        if (strlen(k) < sizeof k - 1 && !strcmp(k, key))
            return 1;
    if (vcap)
        val[0] = '\0';
    return rc;
}
