/* common/settings — see settings.h for the sources, the syntax and the errors. */
#include "common/settings.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/errmsg.h"
#include "common/text.h"

static const char *const err_names[COMMON_SETTINGS_ERR_COUNT] = {
    [COMMON_SETTINGS_OK] = "ok",
    [COMMON_SETTINGS_EIO] = "cannot read a file",
    [COMMON_SETTINGS_ESYNTAX] = "syntax error",
    [COMMON_SETTINGS_EUNKNOWN] = "unknown option",
    [COMMON_SETTINGS_EVALUE] = "bad value",
    [COMMON_SETTINGS_ERANGE] = "value out of range",
    [COMMON_SETTINGS_ECONFLICT] = "conflicting options",
    [COMMON_SETTINGS_EUSAGE] = "bad command line",
    [COMMON_SETTINGS_EDUP] = "set twice",
};

const char *common_settings_strerror(int err)
{
    if (err < 0 || err >= COMMON_SETTINGS_ERR_COUNT)
        return "unknown error";
    return err_names[err];
}

/* ---- the struct's fields ---- */

static char *field(const common_option *o, void *base)
{
    return (char *)base + o->offset;
}

static const char *cfield(const common_option *o, const void *base)
{
    return (const char *)base + o->offset;
}

static char *origin_slot(const common_settings *s, void *base, size_t i)
{
    return (char *)base + s->origin_offset + i * COMMON_SETTINGS_ORIGIN_MAX;
}

static uint8_t *level_slot(const common_settings *s, void *base, size_t i)
{
    return (uint8_t *)base + s->level_offset + i;
}

static uint32_t *list_count(const common_option *o, void *base)
{
    return (uint32_t *)(void *)((char *)base + o->count_offset);
}

static uint32_t clist_count(const common_option *o, const void *base)
{
    uint32_t n;
    memcpy(&n, (const char *)base + o->count_offset, sizeof n);
    return n;
}

const char *common_settings_origin(const common_settings *s, const void *base, size_t i)
{
    assert(i < s->count);
    return (const char *)base + s->origin_offset + i * COMMON_SETTINGS_ORIGIN_MAX;
}

common_level common_settings_level(const common_settings *s, const void *base, size_t i)
{
    assert(i < s->count);
    return (common_level)((const uint8_t *)base)[s->level_offset + i];
}

void common_settings_set_origin(const common_settings *s, void *base, size_t i, const char *origin,
                                common_level level)
{
    assert(i < s->count);
    snprintf(origin_slot(s, base, i), COMMON_SETTINGS_ORIGIN_MAX, "%s", origin);
    *level_slot(s, base, i) = (uint8_t)level;
}

/* ---- names ---- */

int common_settings_find(const common_settings *s, const char *section, const char *key)
{
    for (size_t i = 0; i < s->count; i++)
        if (!strcmp(s->options[i].section, section) && !strcmp(s->options[i].key, key))
            return (int)i;
    return -1;
}

int common_settings_lookup(const common_settings *s, const char *name)
{
    const char *dot = strchr(name, '.');
    if (!dot)
        return -1;
    size_t sl = (size_t)(dot - name);
    for (size_t i = 0; i < s->count; i++) {
        const common_option *o = &s->options[i];
        if (strlen(o->section) == sl && !strncmp(o->section, name, sl) && !strcmp(o->key, dot + 1))
            return (int)i;
    }
    return -1;
}

void common_settings_name(const common_settings *s, size_t i, char *buf, size_t len)
{
    snprintf(buf, len, "%s.%s", s->options[i].section, s->options[i].key);
}

static bool known_section(const common_settings *s, const char *section)
{
    for (size_t i = 0; i < s->count; i++)
        if (!strcmp(s->options[i].section, section))
            return true;
    return false;
}

void common_settings_sections(const common_settings *s, char *buf, size_t len)
{
    size_t at = 0;
    if (!len)
        return;
    buf[0] = '\0';
    for (size_t i = 0; i < s->count; i++) {
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = !strcmp(s->options[j].section, s->options[i].section);
        if (seen)
            continue;
        int n = snprintf(buf + at, len - at, "%s%s", at ? ", " : "", s->options[i].section);
        if (n < 0 || (size_t)n >= len - at)
            return;
        at += (size_t)n;
    }
}

const char *common_settings_suggest(const common_settings *s, const char *name, char *buf,
                                    size_t len)
{
    common_nearest n;
    common_nearest_init(&n, name);
    for (size_t i = 0; i < s->count; i++) {
        char full[COMMON_SETTINGS_NAME_MAX];
        common_settings_name(s, i, full, sizeof full);
        common_nearest_offer(&n, full);
    }
    const char *best = common_nearest_best(&n);
    if (!best)
        return NULL;
    snprintf(buf, len, "%s", best);
    return buf;
}

void common_settings_type_text(const common_settings *s, size_t i, char *buf, size_t len)
{
    const common_option *o = &s->options[i];
    switch (o->type) {
    case COMMON_OPT_BOOL:
        snprintf(buf, len, "bool");
        break;
    case COMMON_OPT_U32:
    case COMMON_OPT_U64:
        if (o->names)
            common_names_join(o->names, "|", buf, len);
        else
            snprintf(buf, len, "integer");
        break;
    case COMMON_OPT_F64:
        snprintf(buf, len, "number");
        break;
    case COMMON_OPT_ENUM:
        common_names_join(o->names, "|", buf, len);
        break;
    case COMMON_OPT_STR:
        snprintf(buf, len, "string");
        break;
    case COMMON_OPT_LIST:
        snprintf(buf, len, "list");
        break;
    }
}

/* ---- values ---- */

static int parse_bool(const char *v, int *out)
{
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        if (!strcmp(v, yes[i]))
            return *out = 1, 0;
        if (!strcmp(v, no[i]))
            return *out = 0, 0;
    }
    return -1;
}

static void range_text(const common_option *o, char *buf, size_t len)
{
    char a[40], b[40];
    common_fmt_double(o->min, a, sizeof a);
    common_fmt_double(o->max, b, sizeof b);
    snprintf(buf, len, "%s%s, %s]%s%s", o->flags & COMMON_OPT_MIN_EXCLUSIVE ? "(" : "[", a, b,
             o->unit && *o->unit ? " " : "", o->unit ? o->unit : "");
}

static bool in_range(const common_option *o, double x)
{
    if (o->flags & COMMON_OPT_MIN_EXCLUSIVE ? x <= o->min : x < o->min)
        return false;
    return x <= o->max;
}

/* Parse value for option o into out (the field's type; STR and LIST: a
 * char[o->size]). Returns 0 or a code with the reason in why. */
static int parse_value(const common_option *o, const char *value, void *out, char *why,
                       size_t whylen)
{
    char list[256], range[128];
    switch (o->type) {
    case COMMON_OPT_BOOL:
        if (parse_bool(value, (int *)out))
            return common_errf(why, whylen, COMMON_SETTINGS_EVALUE, "'%s' is not true or false",
                               value);
        return 0;
    case COMMON_OPT_U32:
    case COMMON_OPT_U64: {
        if (o->names && common_name_index(o->names, value) < 0) {
            common_names_join(o->names, ", ", list, sizeof list);
            return common_errf(why, whylen, COMMON_SETTINGS_EVALUE, "'%s' is not one of %s", value,
                               list);
        }
        uint64_t x;
        if (!common_parse_u64(value, &x))
            return common_errf(why, whylen, COMMON_SETTINGS_EVALUE, "'%s' is not a whole number",
                               value);
        range_text(o, range, sizeof range);
        if (!in_range(o, (double)x) || (o->type == COMMON_OPT_U32 && x > UINT32_MAX))
            return common_errf(why, whylen, COMMON_SETTINGS_ERANGE, "%s is out of range %s", value,
                               range);
        if (o->type == COMMON_OPT_U32) {
            uint32_t x32 = (uint32_t)x;
            memcpy(out, &x32, sizeof x32);
        } else {
            memcpy(out, &x, sizeof x);
        }
        return 0;
    }
    case COMMON_OPT_F64: {
        double x;
        if (!common_parse_f64(value, &x))
            return common_errf(why, whylen, COMMON_SETTINGS_EVALUE, "'%s' is not a finite number",
                               value);
        range_text(o, range, sizeof range);
        if (!in_range(o, x))
            return common_errf(why, whylen, COMMON_SETTINGS_ERANGE, "%s is out of range %s", value,
                               range);
        memcpy(out, &x, sizeof x);
        return 0;
    }
    case COMMON_OPT_ENUM: {
        int i = common_name_index(o->names, value);
        if (i < 0) {
            common_names_join(o->names, ", ", list, sizeof list);
            return common_errf(why, whylen, COMMON_SETTINGS_EVALUE, "'%s' is not one of %s", value,
                               list);
        }
        memcpy(out, &i, sizeof i);
        return 0;
    }
    case COMMON_OPT_STR:
    case COMMON_OPT_LIST: {
        size_t n = strlen(value);
        if (n >= o->size)
            return common_errf(why, whylen, COMMON_SETTINGS_EVALUE, "%slonger than %zu bytes",
                               o->flags & COMMON_OPT_PATH ? "path " : "", o->size - 1);
        memcpy(out, value, n + 1);
        return 0;
    }
    }
    return common_errf(why, whylen, COMMON_SETTINGS_EVALUE, "internal: unknown option type %d",
                       (int)o->type);
}

/* The largest value a row can hold in the scratch buffer of apply. */
#define VALUE_MAX (COMMON_SETTINGS_LINE_MAX + 1u)

static int add_item(const common_settings *s, void *base, size_t idx, const char *item,
                    const char *origin, common_level level, char *err, size_t errlen)
{
    const common_option *o = &s->options[idx];
    uint32_t *count = list_count(o, base);
    bool replace = (o->flags & COMMON_OPT_LIST_REPLACE) && level > *level_slot(s, base, idx);
    if (replace)
        *count = 0;
    if (o->flags & COMMON_OPT_LIST_UNIQUE)
        for (uint32_t i = 0; i < *count; i++)
            if (!strcmp(field(o, base) + (size_t)i * o->size, item))
                return 0; /* an item listed twice is one item */
    if (*count == o->items_max)
        return common_errf(err, errlen, COMMON_SETTINGS_ERANGE, "%s: %s.%s: more than %u %s",
                           origin, o->section, o->key, o->items_max,
                           o->unit && *o->unit ? o->unit : "values");
    memcpy(field(o, base) + (size_t)*count * o->size, item, strlen(item) + 1);
    if (o->flags & COMMON_OPT_ITEM_ORIGINS)
        snprintf((char *)base + o->origins_offset + (size_t)*count * COMMON_SETTINGS_ORIGIN_MAX,
                 COMMON_SETTINGS_ORIGIN_MAX, "%s", origin);
    (*count)++;
    return 0;
}

int common_settings_apply(const common_settings *s, void *base, size_t idx, const char *value,
                          const char *origin, common_level level, char *err, size_t errlen)
{
    assert(idx < s->count);
    const common_option *o = &s->options[idx];
    char why[COMMON_SETTINGS_ERR_MAX];
    /* scratch for the parsed value: numbers, or a string of up to o->size */
    union {
        uint64_t u;
        double d;
        int i;
        char text[VALUE_MAX];
    } v;
    int rc;
    if (!*value) {
        bool list = o->type == COMMON_OPT_LIST;
        if (list && (level == COMMON_LEVEL_DEFAULT || (o->flags & COMMON_OPT_LIST_CLEAR))) {
            *list_count(o, base) = 0; /* the default is no items; or an explicit clear */
            goto done;
        }
        if (list || o->type != COMMON_OPT_STR || (o->flags & COMMON_OPT_NONEMPTY))
            return common_errf(err, errlen, COMMON_SETTINGS_EVALUE, "%s: %s.%s: must not be empty",
                               origin, o->section, o->key);
        field(o, base)[0] = '\0'; /* an empty string is never checked further */
        goto done;
    }
    rc = parse_value(o, value, &v, why, sizeof why);
    if (!rc && o->check)
        rc = o->check(o, value, &v, why, sizeof why);
    if (rc)
        return common_errf(err, errlen, rc, "%s: %s.%s: %s", origin, o->section, o->key, why);
    switch (o->type) {
    case COMMON_OPT_LIST:
        if ((rc = add_item(s, base, idx, v.text, origin, level, err, errlen)))
            return rc;
        if (*level_slot(s, base, idx) > level) /* a list keeps its highest source */
            level = (common_level)*level_slot(s, base, idx);
        break;
    case COMMON_OPT_STR:
        memcpy(field(o, base), v.text, strlen(v.text) + 1);
        break;
    case COMMON_OPT_U32:
        memcpy(field(o, base), &v, sizeof(uint32_t));
        break;
    default: /* u64, f64 (8 bytes), enum, bool (int) */
        memcpy(field(o, base), &v, o->size);
        break;
    }
done:
    common_settings_set_origin(s, base, idx, origin, level);
    return 0;
}

static void check_row(const common_option *o)
{
    size_t want = 0;
    switch (o->type) {
    case COMMON_OPT_BOOL:
    case COMMON_OPT_ENUM:
        want = sizeof(int);
        break;
    case COMMON_OPT_U32:
        want = sizeof(uint32_t);
        break;
    case COMMON_OPT_U64:
        want = sizeof(uint64_t);
        break;
    case COMMON_OPT_F64:
        want = sizeof(double);
        break;
    case COMMON_OPT_STR:
    case COMMON_OPT_LIST:
        want = o->size >= 2 && o->size <= VALUE_MAX ? o->size : 0;
        break;
    }
    if (want != o->size || (o->type == COMMON_OPT_ENUM && !o->names) ||
        (o->type == COMMON_OPT_LIST && !o->items_max) ||
        strlen(o->section) >= COMMON_SETTINGS_SECTION_MAX ||
        strlen(o->section) + strlen(o->key) + 2 > COMMON_SETTINGS_NAME_MAX ||
        strchr(o->section, '_')) {
        fprintf(stderr, "internal: settings row %s.%s is malformed\n", o->section, o->key);
        abort();
    }
}

void common_settings_defaults(const common_settings *s, void *base)
{
    assert(s->count <= COMMON_SETTINGS_OPTIONS_MAX);
    for (size_t i = 0; i < s->count; i++) {
        char err[COMMON_SETTINGS_ERR_MAX];
        check_row(&s->options[i]);
        if (common_settings_apply(s, base, i, s->options[i].def, "default", COMMON_LEVEL_DEFAULT,
                                  err, sizeof err)) {
            /* a default that does not parse is a bug in the table */
            fprintf(stderr, "internal: bad default: %s\n", err);
            abort();
        }
    }
}

int common_settings_set(const common_settings *s, void *base, const char *name, const char *value,
                        const char *origin, common_level level, char *err, size_t errlen)
{
    int idx = common_settings_lookup(s, name);
    char near[COMMON_SETTINGS_NAME_MAX];
    if (idx < 0 && common_settings_suggest(s, name, near, sizeof near))
        return common_errf(err, errlen, COMMON_SETTINGS_EUNKNOWN,
                           "%s: unknown option '%s'; did you mean '%s'? (see %s)", origin, name,
                           near, s->docs);
    if (idx < 0)
        return common_errf(err, errlen, COMMON_SETTINGS_EUNKNOWN,
                           "%s: unknown option '%s' (expected section.key, see %s)", origin, name,
                           s->docs);
    return common_settings_apply(s, base, (size_t)idx, value, origin, level, err, errlen);
}

static char *trim(char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    size_t n = strlen(p);
    while (n && (p[n - 1] == ' ' || p[n - 1] == '\t' || p[n - 1] == '\r'))
        p[--n] = '\0';
    return p;
}

int common_settings_assign(const common_settings *s, void *base, const char *assignment,
                           const char *origin, common_level level, char *err, size_t errlen)
{
    const char *eq = strchr(assignment, '=');
    if (!eq)
        return common_errf(err, errlen, COMMON_SETTINGS_EUSAGE,
                           "%s '%s': expected section.key=value", origin, assignment);
    char name[COMMON_SETTINGS_NAME_MAX + 16];
    size_t nl = (size_t)(eq - assignment);
    if (nl >= sizeof name)
        return common_errf(err, errlen, COMMON_SETTINGS_EUNKNOWN, "%s: unknown option '%.*s'",
                           origin, (int)nl, assignment);
    memcpy(name, assignment, nl);
    name[nl] = '\0';
    char value[VALUE_MAX + 1];
    if (strlen(eq + 1) >= sizeof value)
        return common_errf(err, errlen, COMMON_SETTINGS_EVALUE, "%s: value longer than %u bytes",
                           origin, (unsigned)sizeof value - 1);
    strcpy(value, eq + 1);
    char *key = trim(name);
    char where[COMMON_SETTINGS_ORIGIN_MAX];
    snprintf(where, sizeof where, "%s %s", origin, key);
    return common_settings_set(s, base, key, trim(value), where, level, err, errlen);
}

/* ---- files ---- */

static bool name_byte(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_';
}

/* Cut a trailing comment from an unquoted value, or unquote a quoted one
 * (\" and \\ escapes; only a comment may follow). */
static int value_text(char **value, const char *where, const char *section, const char *key,
                      char *err, size_t errlen)
{
    char *v = *value;
    if (*v != '"') {
        for (char *p = v; *p; p++)
            if (*p == '#' && (p == v || p[-1] == ' ' || p[-1] == '\t')) {
                *p = '\0';
                break;
            }
        *value = trim(v);
        return 0;
    }
    char *r = v + 1, *w = v;
    for (;;) {
        if (*r == '\0')
            return common_errf(err, errlen, COMMON_SETTINGS_ESYNTAX,
                               "%s: %s.%s: unterminated quote", where, section, key);
        if (*r == '"')
            break;
        if (*r == '\\' && (r[1] == '"' || r[1] == '\\'))
            r++;
        *w++ = *r++;
    }
    char *rest = trim(r + 1);
    *w = '\0';
    if (*rest && *rest != '#' && *rest != ';')
        return common_errf(err, errlen, COMMON_SETTINGS_ESYNTAX,
                           "%s: %s.%s: text after the quoted value", where, section, key);
    return 0;
}

static int section_line(const common_settings *s, char *p, const char *where, char *section,
                        char *err, size_t errlen)
{
    char *end = strchr(p, ']');
    if (!end)
        return common_errf(err, errlen, COMMON_SETTINGS_ESYNTAX, "%s: section header without ']'",
                           where);
    *end = '\0';
    char *rest = trim(end + 1);
    if (*rest && *rest != '#' && *rest != ';')
        return common_errf(err, errlen, COMMON_SETTINGS_ESYNTAX, "%s: text after [%s]", where,
                           p + 1);
    char *name = trim(p + 1);
    if (!known_section(s, name)) {
        char list[512];
        common_settings_sections(s, list, sizeof list);
        common_nearest n;
        common_nearest_init(&n, name);
        for (size_t i = 0; i < s->count; i++)
            common_nearest_offer(&n, s->options[i].section);
        const char *best = common_nearest_best(&n);
        return common_errf(
            err, errlen, COMMON_SETTINGS_EUNKNOWN, "%s: unknown section [%s]%s%s%s (sections: %s)",
            where, name, best ? "; did you mean [" : "", best ? best : "", best ? "]?" : "", list);
    }
    strcpy(section, name); /* known, so shorter than COMMON_SETTINGS_SECTION_MAX */
    return 0;
}

/* Parse one line (modified in place); section holds the current section,
 * seen[i] the line where option i was set in this text (0 = not yet). */
static int parse_line(const common_settings *s, void *base, char *line, const char *where,
                      unsigned lineno, char *section, unsigned *seen, char *err, size_t errlen)
{
    char *p = trim(line);
    if (!*p || *p == '#' || *p == ';')
        return 0;
    if (*p == '[')
        return section_line(s, p, where, section, err, errlen);
    char *eq = strchr(p, '=');
    if (!eq)
        return common_errf(err, errlen, COMMON_SETTINGS_ESYNTAX,
                           "%s: expected 'key = value', '[section]' or a # comment", where);
    *eq = '\0';
    char *key = trim(p);
    for (char *k = key; *k; k++)
        if (!name_byte(*k))
            return common_errf(err, errlen, COMMON_SETTINGS_ESYNTAX,
                               "%s: bad key '%s' (keys are lower case a-z, 0-9, _)", where, key);
    if (!*key)
        return common_errf(err, errlen, COMMON_SETTINGS_ESYNTAX, "%s: empty key before '='", where);
    if (!*section)
        return common_errf(err, errlen, COMMON_SETTINGS_ESYNTAX,
                           "%s: '%s' is outside any [section]", where, key);
    char *v = trim(eq + 1);
    int rc = value_text(&v, where, section, key, err, errlen);
    if (rc)
        return rc;
    int idx = common_settings_find(s, section, key);
    if (idx < 0) {
        common_nearest n;
        common_nearest_init(&n, key);
        for (size_t i = 0; i < s->count; i++)
            if (!strcmp(s->options[i].section, section))
                common_nearest_offer(&n, s->options[i].key);
        const char *best = common_nearest_best(&n);
        return common_errf(err, errlen, COMMON_SETTINGS_EUNKNOWN,
                           "%s: unknown key '%s' in section [%s]%s%s%s", where, key, section,
                           best ? "; did you mean '" : "", best ? best : "", best ? "'?" : "");
    }
    if (s->options[idx].type != COMMON_OPT_LIST && seen[idx])
        return common_errf(err, errlen, COMMON_SETTINGS_EDUP,
                           "%s: %s.%s set twice (first at line %u)", where, section, key,
                           seen[idx]);
    seen[idx] = lineno;
    return common_settings_apply(s, base, (size_t)idx, v, where, COMMON_LEVEL_FILE, err, errlen);
}

int common_settings_load_string(const common_settings *s, void *base, const char *name,
                                const char *text, char *err, size_t errlen)
{
    char section[COMMON_SETTINGS_SECTION_MAX] = "";
    unsigned seen[COMMON_SETTINGS_OPTIONS_MAX] = {0};
    char line[COMMON_SETTINGS_LINE_MAX + 1];
    char where[COMMON_SETTINGS_ORIGIN_MAX];
    /* keep the tail of a long file name: it is the informative part */
    size_t nlen = strlen(name);
    const char *shown = nlen > 60 ? name + nlen - 60 : name;
    unsigned lineno = 0;
    const char *p = text;
    while (*p) {
        lineno++;
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        snprintf(where, sizeof where, "%s:%u", shown, lineno);
        if (n > COMMON_SETTINGS_LINE_MAX)
            return common_errf(err, errlen, COMMON_SETTINGS_ESYNTAX,
                               "%s: line longer than %u bytes", where, COMMON_SETTINGS_LINE_MAX);
        memcpy(line, p, n);
        line[n] = '\0';
        int rc = parse_line(s, base, line, where, lineno, section, seen, err, errlen);
        if (rc)
            return rc;
        p = nl ? nl + 1 : p + n;
    }
    return 0;
}

int common_settings_load_file(const common_settings *s, void *base, const char *path, char *err,
                              size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return common_errf(err, errlen, COMMON_SETTINGS_EIO, "%s: cannot open %s: %s", path,
                           s->what, strerror(errno));
    char *buf = malloc(COMMON_SETTINGS_FILE_MAX + 1);
    if (!buf) {
        fclose(f);
        return common_errf(err, errlen, COMMON_SETTINGS_EIO, "%s: out of memory reading it", path);
    }
    size_t n = fread(buf, 1, COMMON_SETTINGS_FILE_MAX + 1, f);
    int rd_err = ferror(f);
    int saved = errno;
    fclose(f);
    int rc = 0;
    if (rd_err)
        rc = common_errf(err, errlen, COMMON_SETTINGS_EIO, "%s: read error: %s", path,
                         strerror(saved));
    else if (n > COMMON_SETTINGS_FILE_MAX)
        rc = common_errf(err, errlen, COMMON_SETTINGS_EIO, "%s: larger than %u bytes; not a %s?",
                         path, COMMON_SETTINGS_FILE_MAX, s->what);
    else if (memchr(buf, '\0', n))
        rc = common_errf(err, errlen, COMMON_SETTINGS_ESYNTAX,
                         "%s: contains a NUL byte; not a text file", path);
    if (!rc) {
        buf[n] = '\0';
        rc = common_settings_load_string(s, base, path, buf, err, errlen);
    }
    free(buf);
    return rc;
}

/* ---- the environment ---- */

void common_settings_env_name(const common_settings *s, size_t i, char *buf, size_t len)
{
    const common_option *o = &s->options[i];
    int n = snprintf(buf, len, "%s%s_%s", s->env_prefix ? s->env_prefix : "", o->section, o->key);
    size_t start = s->env_prefix ? strlen(s->env_prefix) : 0;
    for (size_t k = start; n > 0 && k < (size_t)n && k < len; k++)
        buf[k] = (char)toupper((unsigned char)buf[k]);
}

/* Apply one variable NAME=value (NAME without the prefix, upper case). */
static int env_one(const common_settings *s, void *base, const char *var, const char *value,
                   char *err, size_t errlen)
{
    char origin[COMMON_SETTINGS_ORIGIN_MAX];
    snprintf(origin, sizeof origin, "env %s%s", s->env_prefix, var);
    const char *us = strchr(var, '_');
    char section[COMMON_SETTINGS_SECTION_MAX], key[COMMON_SETTINGS_NAME_MAX];
    if (!us || (size_t)(us - var) >= sizeof section || strlen(us + 1) >= sizeof key)
        return 0; /* not one of ours */
    size_t sl = (size_t)(us - var), kl = strlen(us + 1);
    for (size_t k = 0; k < sl; k++)
        section[k] = (char)tolower((unsigned char)var[k]);
    section[sl] = '\0';
    for (size_t k = 0; k < kl; k++)
        key[k] = (char)tolower((unsigned char)us[1 + k]);
    key[kl] = '\0';
    for (const char *c = var; *c; c++)
        if (!((*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_'))
            return 0; /* lower case or punctuation: not a settings variable */
    if (!known_section(s, section))
        return 0;
    int idx = common_settings_find(s, section, key);
    if (idx < 0) {
        char name[2 * COMMON_SETTINGS_NAME_MAX], near[COMMON_SETTINGS_NAME_MAX];
        snprintf(name, sizeof name, "%s.%s", section, key);
        int n = common_settings_suggest(s, name, near, sizeof near)
                    ? common_settings_lookup(s, near)
                    : -1;
        char env[COMMON_SETTINGS_NAME_MAX + 16] = "";
        if (n >= 0)
            common_settings_env_name(s, (size_t)n, env, sizeof env);
        return common_errf(err, errlen, COMMON_SETTINGS_EUNKNOWN,
                           "%s: unknown option '%s'%s%s%s (see %s)", origin, name,
                           n >= 0 ? "; did you mean " : "", env, n >= 0 ? "?" : "", s->docs);
    }
    const common_option *o = &s->options[idx];
    if (o->type != COMMON_OPT_LIST)
        return common_settings_apply(s, base, (size_t)idx, value, origin, COMMON_LEVEL_ENV, err,
                                     errlen);
    /* a list: values separated by ',' */
    char item[VALUE_MAX];
    const char *p = value;
    do {
        size_t n = strcspn(p, ",");
        if (n >= sizeof item)
            n = sizeof item - 1;
        memcpy(item, p, n);
        item[n] = '\0';
        int rc = common_settings_apply(s, base, (size_t)idx, trim(item), origin, COMMON_LEVEL_ENV,
                                       err, errlen);
        if (rc)
            return rc;
        p += strcspn(p, ",");
    } while (*p++ == ',');
    return 0;
}

int common_settings_load_env(const common_settings *s, void *base, char *const *envp, char *err,
                             size_t errlen)
{
    if (!s->env_prefix || !envp)
        return 0;
    size_t pl = strlen(s->env_prefix);
    for (size_t i = 0; envp[i]; i++) {
        const char *e = envp[i];
        const char *eq = strchr(e, '=');
        if (!eq || strncmp(e, s->env_prefix, pl) || (size_t)(eq - e) <= pl)
            continue;
        char var[COMMON_SETTINGS_NAME_MAX + 16];
        size_t n = (size_t)(eq - e) - pl;
        if (n >= sizeof var)
            continue;
        memcpy(var, e + pl, n);
        var[n] = '\0';
        int rc = env_one(s, base, var, eq + 1, err, errlen);
        if (rc)
            return rc;
    }
    return 0;
}

/* ---- printing ---- */

void common_settings_format(const common_settings *s, const void *base, size_t i, char *buf,
                            size_t len)
{
    const common_option *o = &s->options[i];
    const char *f = cfield(o, base);
    union {
        uint32_t u32;
        uint64_t u64;
        double d;
        int i;
    } v;
    switch (o->type) {
    case COMMON_OPT_BOOL:
        memcpy(&v.i, f, sizeof v.i);
        snprintf(buf, len, "%s", v.i ? "true" : "false");
        break;
    case COMMON_OPT_U32:
        memcpy(&v.u32, f, sizeof v.u32);
        snprintf(buf, len, "%u", v.u32);
        break;
    case COMMON_OPT_U64:
        memcpy(&v.u64, f, sizeof v.u64);
        snprintf(buf, len, "%llu", (unsigned long long)v.u64);
        break;
    case COMMON_OPT_F64:
        memcpy(&v.d, f, sizeof v.d);
        common_fmt_double(v.d, buf, len);
        break;
    case COMMON_OPT_ENUM:
        memcpy(&v.i, f, sizeof v.i);
        snprintf(buf, len, "%s", common_name_at(o->names, v.i));
        break;
    case COMMON_OPT_STR:
        snprintf(buf, len, "%s", f);
        break;
    case COMMON_OPT_LIST:
        snprintf(buf, len, "%u", clist_count(o, base));
        break;
    }
}

/* A string value, quoted when it would not read back as itself. */
static void write_string(FILE *out, const char *v)
{
    bool plain = *v && v[0] != '"' && v[0] != ' ' && v[strlen(v) - 1] != ' ';
    for (const char *p = v; *p && plain; p++)
        if (*p == '#' || *p == '\\' || *p == '\t')
            plain = false;
    if (plain) {
        fputs(v, out);
        return;
    }
    fputc('"', out);
    for (const char *p = v; *p; p++) {
        if (*p == '"' || *p == '\\')
            fputc('\\', out);
        fputc(*p, out);
    }
    fputc('"', out);
}

static void write_option(const common_settings *s, const void *base, size_t i, FILE *out,
                         unsigned flags)
{
    const common_option *o = &s->options[i];
    const char *origin = common_settings_origin(s, base, i);
    bool origins = flags & COMMON_WRITE_ORIGINS;
    if (o->type == COMMON_OPT_LIST) {
        uint32_t n = clist_count(o, base);
        if (!n)
            fprintf(out, "# %s =   (none: %s)\n", o->key, o->help);
        for (uint32_t k = 0; k < n; k++) {
            fprintf(out, "%s = ", o->key);
            write_string(out, cfield(o, base) + (size_t)k * o->size);
            if (origins)
                fprintf(out, "   # %s",
                        o->flags & COMMON_OPT_ITEM_ORIGINS
                            ? (const char *)base + o->origins_offset +
                                  (size_t)k * COMMON_SETTINGS_ORIGIN_MAX
                            : origin);
            fputc('\n', out);
        }
        return;
    }
    char text[VALUE_MAX];
    common_settings_format(s, base, i, text, sizeof text);
    if (common_settings_level(s, base, i) == COMMON_LEVEL_DERIVED) {
        fprintf(out, "%s = \"\"", o->key);
        if (origins) {
            fprintf(out, "   # %s: ", origin);
            write_string(out, text);
        }
        fputc('\n', out);
        return;
    }
    fprintf(out, "%s = ", o->key);
    if (o->type == COMMON_OPT_STR)
        write_string(out, text);
    else
        fputs(text, out);
    if (origins)
        fprintf(out, "   # %s", origin);
    fputc('\n', out);
}

int common_settings_write(const common_settings *s, const void *base, FILE *out, unsigned flags)
{
    for (size_t i = 0; i < s->count; i++) {
        const char *section = s->options[i].section;
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = !strcmp(s->options[j].section, section);
        if (seen)
            continue; /* written with the section's first option */
        fprintf(out, "%s[%s]\n", i ? "\n" : "", section);
        for (size_t j = i; j < s->count; j++)
            if (!strcmp(s->options[j].section, section))
                write_option(s, base, j, out, flags);
    }
    return ferror(out) ? COMMON_SETTINGS_EIO : 0;
}
