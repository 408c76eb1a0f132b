/* common/cli — see cli.h. */
#include "common/cli.h"

#include <assert.h>
#include <string.h>

#include "common/text.h"

void common_cli_init(common_cli *c, const char *prog, const common_flag *flags, size_t count,
                     int argc, char **argv)
{
    assert(count <= COMMON_CLI_FLAGS_MAX);
    memset(c, 0, sizeof *c);
    c->prog = prog;
    c->flags = flags;
    c->count = count;
    c->argc = argc;
    c->argv = argv;
    /* '-': positionals in order; ':': a missing value returns ':' */
    size_t at = 0;
    c->shortopts[at++] = '-';
    c->shortopts[at++] = ':';
    for (size_t i = 0; i < count; i++) {
        assert(flags[i].id >= 0 && flags[i].id < 0x10000);
        c->longopts[i] =
            (struct option){flags[i].name, flags[i].has_value ? required_argument : no_argument,
                            NULL, 0x10000 + (int)i};
        if (flags[i].short_name) {
            c->shortopts[at++] = flags[i].short_name;
            if (flags[i].has_value)
                c->shortopts[at++] = ':';
        }
    }
    c->shortopts[at] = '\0';
    optind = 0; /* glibc: re-initialise getopt for a new command line */
    opterr = 0;
}

const char *common_cli_suggest(const common_flag *flags, size_t count, const char *word, char *buf,
                               size_t len)
{
    common_nearest n;
    common_nearest_init(&n, word);
    for (size_t i = 0; i < count; i++) {
        char full[COMMON_WORD_MAX];
        snprintf(full, sizeof full, "--%s", flags[i].name);
        common_nearest_offer(&n, full);
    }
    const char *best = common_nearest_best(&n);
    if (!best)
        return NULL;
    snprintf(buf, len, "%s", best);
    return buf;
}

/* The index of the flag returned by getopt_long for value v. */
static int flag_of(const common_cli *c, int v)
{
    if (v >= 0x10000)
        return v - 0x10000;
    for (size_t i = 0; i < c->count; i++)
        if (c->flags[i].short_name && c->flags[i].short_name == v)
            return (int)i;
    return -1;
}

static void name_given(common_cli *c, int i, bool as_short)
{
    if (as_short)
        snprintf(c->given_buf, sizeof c->given_buf, "-%c", c->flags[i].short_name);
    else
        snprintf(c->given_buf, sizeof c->given_buf, "--%s", c->flags[i].name);
    c->given = c->given_buf;
}

static int unknown(common_cli *c, const char *word)
{
    c->err_unknown = true;
    size_t wl = strcspn(word, "=");
    char w[COMMON_WORD_MAX];
    snprintf(w, sizeof w, "%.*s", (int)(wl < sizeof w ? wl : sizeof w - 1), word);
    /* a prefix of several flags */
    if (w[0] == '-' && w[1] == '-' && w[2]) {
        char list[256] = "";
        size_t at = 0, matches = 0;
        for (size_t i = 0; i < c->count; i++)
            if (!strncmp(c->flags[i].name, w + 2, strlen(w + 2))) {
                matches++;
                int n = snprintf(list + at, sizeof list - at, "%s--%s", at ? ", " : "",
                                 c->flags[i].name);
                if (n > 0 && (size_t)n < sizeof list - at)
                    at += (size_t)n;
            }
        if (matches > 1) {
            snprintf(c->err, sizeof c->err, "ambiguous flag '%s' (%s)", w, list);
            return COMMON_CLI_ERROR;
        }
    }
    char near[COMMON_WORD_MAX];
    if (common_cli_suggest(c->flags, c->count, w, near, sizeof near))
        snprintf(c->err, sizeof c->err, "unknown flag '%s'; did you mean %s?", w, near);
    else
        snprintf(c->err, sizeof c->err, "unknown flag '%s' (%s --help lists them)", w, c->prog);
    return COMMON_CLI_ERROR;
}

int common_cli_next(common_cli *c)
{
    c->arg = NULL;
    c->given = NULL;
    c->err_unknown = false;
    if (c->rest) {
        if (optind >= c->argc)
            return COMMON_CLI_END;
        c->arg = c->argv[optind++];
        return COMMON_CLI_POSITIONAL;
    }
    int v = getopt_long(c->argc, c->argv, c->shortopts, c->longopts, NULL);
    switch (v) {
    case -1:
        /* with '-' in shortopts, -1 before the end means "--": the rest is
         * positional */
        if (optind < c->argc) {
            c->rest = true;
            return common_cli_next(c);
        }
        return COMMON_CLI_END;
    case 1:
        c->arg = optarg;
        return COMMON_CLI_POSITIONAL;
    case ':': {
        int i = flag_of(c, optopt);
        assert(i >= 0);
        name_given(c, i, optopt < 0x10000);
        snprintf(c->err, sizeof c->err, "%s needs a value", c->given);
        return COMMON_CLI_ERROR;
    }
    case '?': {
        int i = optopt ? flag_of(c, optopt) : -1;
        if (i >= 0 && !c->flags[i].has_value) {
            name_given(c, i, optopt < 0x10000);
            snprintf(c->err, sizeof c->err, "%s takes no value", c->given);
            return COMMON_CLI_ERROR;
        }
        if (!optopt || optind < 1 || optind > c->argc)
            return unknown(c, c->argv[optind - 1 > 0 ? optind - 1 : 1]);
        char s[3] = {'-', (char)optopt, 0};
        return unknown(c, s);
    }
    default: {
        int i = flag_of(c, v);
        assert(i >= 0);
        name_given(c, i, v < 0x10000);
        c->arg = optarg;
        return c->flags[i].id;
    }
    }
}

void common_cli_usage(const common_cli *c, FILE *out)
{
    for (size_t i = 0; i < c->count; i++) {
        const common_flag *f = &c->flags[i];
        char left[80];
        if (f->short_name)
            snprintf(left, sizeof left, "-%c, --%s%s%s", f->short_name, f->name,
                     f->has_value ? " " : "", f->has_value ? f->metavar : "");
        else
            snprintf(left, sizeof left, "--%s%s%s", f->name, f->has_value ? " " : "",
                     f->has_value ? f->metavar : "");
        if (f->sets) {
            fprintf(out, "  %-26s same as --set %s=%s\n", left, f->sets, f->metavar);
            continue;
        }
        /* a help of several lines: the others under the first */
        const char *h = f->help;
        fprintf(out, "  %-26s ", left);
        for (size_t n; (n = strcspn(h, "\n")), h[n]; h += n + 1)
            fprintf(out, "%.*s\n  %-26s ", (int)n, h, "");
        fprintf(out, "%s\n", h);
    }
}
