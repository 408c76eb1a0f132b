/* common/settings — the one settings engine: option tables, the INI syntax,
 * files, the environment and command-line overrides.
 *
 * Used by the agent's config (agent/config.c) and the simulator's scenarios
 * (sim/scenario.c). Each of them keeps a plain typed struct (cfg->bits,
 * sc->network.latency_ms) and describes it with ONE table of
 * common_option rows, one row per option; the engine parses, checks,
 * prints and documents every option from that row. It knows nothing of
 * the protocol.
 *
 * Sources and precedence (common_level), lowest first:
 *   default < file < environment < command line.
 * Every value from every source goes through the same parser, so a
 * default, a file line, a variable and a flag are checked the same way.
 * Each option remembers where its value came from (its origin: "default",
 * "FILE:LINE", "env MURMUR_NODE_LISTEN", "--set", "--listen") for messages
 * and for printing the effective settings.
 *
 * File syntax (the same for config files and scenarios):
 *   # comment          ; comment          (whole line, after optional blanks)
 *   [section]
 *   key = value        # trailing comment (a '#' after a blank, or first)
 *   key = "value with # or \"quotes\" or  edge spaces"   ; comment
 * Sections and keys are lower case [a-z0-9_]. Unknown sections and keys
 * are errors (with the nearest known name suggested), never ignored. A key
 * given twice in one file is an error (EDUP), except list options, which
 * append.
 * Lines are at most COMMON_SETTINGS_LINE_MAX bytes, files at most
 * COMMON_SETTINGS_FILE_MAX; CR LF line ends are accepted.
 *
 * Environment: with an env_prefix ("MURMUR_"), the variable
 * PREFIX + SECTION + "_" + KEY in upper case sets section.key
 * (MURMUR_NODE_DATA_DIR=/srv/m sets node.data_dir). Section names hold no
 * '_', so the split is unambiguous. A variable with the prefix and a known
 * section but an unknown key is an error; other variables are ignored. A
 * list option takes several values separated by ','.
 *
 * List options: a repeated key appends. With COMMON_OPT_LIST_REPLACE, the
 * first value from a higher source replaces the items of the lower ones
 * (the command line's first --seed replaces the file's seeds; later ones
 * append).
 *
 * Errors: functions return 0 or a common_settings_err and write one line
 * naming the source, the option (section.key) and what is wrong, e.g.
 *   agent.conf:12: mixing.bits: '3' is not one of 1, 2, 4, 8, 16, 32
 * On error the struct may hold the values applied before the failing one.
 *
 * Storage: the typed struct holds, at the offsets the common_settings
 * descriptor gives, char origin[COMMON_SETTINGS_OPTIONS_MAX]
 * [COMMON_SETTINGS_ORIGIN_MAX] and uint8_t level[COMMON_SETTINGS_OPTIONS_MAX],
 * indexed like the table. Nothing is allocated except the text of a file
 * while it is parsed.
 */
#ifndef COMMON_SETTINGS_H
#define COMMON_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Most options in one table (origin slots in the user's struct). */
#define COMMON_SETTINGS_OPTIONS_MAX 128u
/* Where a value came from, including the NUL ("path/to/file.conf:123"). */
#define COMMON_SETTINGS_ORIGIN_MAX 96u
/* Longest line of a file (without its newline), and the largest file. */
#define COMMON_SETTINGS_LINE_MAX 4096u
#define COMMON_SETTINGS_FILE_MAX (1024u * 1024u)
/* Longest section name and longest "section.key", including the NUL. */
#define COMMON_SETTINGS_SECTION_MAX 32u
#define COMMON_SETTINGS_NAME_MAX    64u
/* Longest error message the engine writes (callers' buffers may be smaller). */
#define COMMON_SETTINGS_ERR_MAX 512u

_Static_assert(COMMON_SETTINGS_LINE_MAX <= COMMON_SETTINGS_FILE_MAX, "a line fits in a file");
_Static_assert(COMMON_SETTINGS_SECTION_MAX < COMMON_SETTINGS_NAME_MAX, "a section fits a name");

typedef enum common_settings_err {
    COMMON_SETTINGS_OK = 0,
    COMMON_SETTINGS_EIO,       /* a file cannot be opened or read */
    COMMON_SETTINGS_ESYNTAX,   /* a line is not a section, key = value or comment */
    COMMON_SETTINGS_EUNKNOWN,  /* unknown section, key, variable or flag */
    COMMON_SETTINGS_EVALUE,    /* a value that does not parse for its option */
    COMMON_SETTINGS_ERANGE,    /* a number out of range, or a list too long */
    COMMON_SETTINGS_ECONFLICT, /* options that contradict each other (callers' checks) */
    COMMON_SETTINGS_EUSAGE,    /* malformed command line */
    COMMON_SETTINGS_EDUP,      /* a key set twice in one file */
    COMMON_SETTINGS_ERR_COUNT
} common_settings_err;

const char *common_settings_strerror(int err);

/* Where a value came from; a higher level overrides a lower one's lists. */
typedef enum common_level {
    COMMON_LEVEL_DEFAULT = 0,
    COMMON_LEVEL_FILE,
    COMMON_LEVEL_ENV,
    COMMON_LEVEL_CLI,
    COMMON_LEVEL_DERIVED /* filled in from other options by the caller's checks */
} common_level;

typedef enum common_opt_type {
    COMMON_OPT_BOOL, /* int field: true/false, yes/no, on/off, 1/0 */
    COMMON_OPT_U32,  /* uint32_t; names (if set) lists the allowed values */
    COMMON_OPT_U64,  /* uint64_t; likewise */
    COMMON_OPT_F64,  /* double, finite */
    COMMON_OPT_ENUM, /* int-sized enum; names = its name table */
    COMMON_OPT_STR,  /* char[size] */
    COMMON_OPT_LIST  /* char[items_max][size] + uint32_t count */
} common_opt_type;

/* Option flags. */
#define COMMON_OPT_MIN_EXCLUSIVE 0x01u /* numbers: the range is (min, max] */
#define COMMON_OPT_NONEMPTY      0x02u /* STR, LIST: "" is refused (except as a LIST default) */
#define COMMON_OPT_PATH          0x04u /* STR: messages call the value a path */
#define COMMON_OPT_LIST_REPLACE  0x08u /* LIST: a higher source replaces lower sources' items */
#define COMMON_OPT_LIST_UNIQUE   0x10u /* LIST: an item given twice is kept once */
#define COMMON_OPT_LIST_CLEAR    0x20u /* LIST: an empty value clears the list */
#define COMMON_OPT_ITEM_ORIGINS  0x40u /* LIST: origins_offset holds one origin per item */

typedef struct common_option common_option;

/* Optional check of a parsed value, called before it is stored. `value`
 * points to the parsed value in the field's type (STR and LIST items: a
 * char[o->size] holding the text, which the check may rewrite in place to
 * normalise it). Returns 0, or COMMON_SETTINGS_EVALUE / _ERANGE with the
 * reason in why (the engine adds the origin and the option's name). */
typedef int (*common_opt_check_fn)(const common_option *o, const char *text, void *value, char *why,
                                   size_t whylen);

struct common_option {
    const char *section; /* "mixing" */
    const char *key;     /* "bits" */
    common_opt_type type;
    size_t offset, size;       /* the field (LIST: the item array, one item's size) */
    double min, max;           /* numbers: the inclusive range */
    unsigned flags;            /* COMMON_OPT_* */
    const char *const *names;  /* ENUM: the enum's name table; U32/U64: allowed values */
    common_opt_check_fn check; /* optional */
    size_t count_offset;       /* LIST: uint32_t number of items */
    size_t origins_offset;     /* LIST + ITEM_ORIGINS: char[items_max][ORIGIN_MAX] */
    uint32_t items_max;        /* LIST: most items */
    const char *def;           /* default, parsed like any value ("" = none) */
    const char *unit;          /* "ms", "steps", "" (LIST: what an item is, "seeds") */
    const char *help;          /* one line */
};

/* A row's field: COMMON_OPT_FIELD(agent_config, bits) */
#define COMMON_OPT_FIELD(type, f) .offset = offsetof(type, f), .size = sizeof(((type *)0)->f)
/* A list row's storage: COMMON_OPT_LIST_FIELD(cfg, seeds, seed_count) */
#define COMMON_OPT_LIST_FIELD(type, f, count)                                                      \
    .offset = offsetof(type, f), .size = sizeof(((type *)0)->f[0]),                                \
    .count_offset = offsetof(type, count),                                                         \
    .items_max = (uint32_t)(sizeof(((type *)0)->f) / sizeof(((type *)0)->f[0]))

/* One table and where its struct keeps the origins. */
typedef struct common_settings {
    const common_option *options;
    size_t count;
    size_t origin_offset;   /* char [COMMON_SETTINGS_OPTIONS_MAX][COMMON_SETTINGS_ORIGIN_MAX] */
    size_t level_offset;    /* uint8_t [COMMON_SETTINGS_OPTIONS_MAX] */
    const char *what;       /* "config file", "scenario": for I/O messages */
    const char *docs;       /* "docs/CONFIG.md": where every option is listed */
    const char *env_prefix; /* "MURMUR_", or NULL when the environment is not read */
} common_settings;

/* Fill every option with its default (origin "default"). The caller zeroes
 * the struct first. A default that does not parse is a bug in the table:
 * it aborts. */
void common_settings_defaults(const common_settings *s, void *base);

/* Index of section.key, or -1. */
int common_settings_find(const common_settings *s, const char *section, const char *key);
/* Index of "section.key", or -1. */
int common_settings_lookup(const common_settings *s, const char *name);
/* "section.key" of option i into buf. */
void common_settings_name(const common_settings *s, size_t i, char *buf, size_t len);

/* Apply one value to option idx from a source of the given level; origin
 * names the source in messages and in the printed settings. Errors:
 * EVALUE, ERANGE. */
int common_settings_apply(const common_settings *s, void *base, size_t idx, const char *value,
                          const char *origin, common_level level, char *err, size_t errlen);

/* Same, by name ("section.key"); an unknown name is EUNKNOWN with the
 * nearest name suggested. */
int common_settings_set(const common_settings *s, void *base, const char *name, const char *value,
                        const char *origin, common_level level, char *err, size_t errlen);

/* Apply "section.key=value" (as --set). origin is the flag ("--set"); the
 * value's origin becomes "--set section.key". Errors: EUSAGE (no '='), and
 * those of common_settings_set. Blanks around the name and the value are
 * cut. */
int common_settings_assign(const common_settings *s, void *base, const char *assignment,
                           const char *origin, common_level level, char *err, size_t errlen);

/* Apply the text of a file (NUL-terminated); name is used in origins.
 * Errors: ESYNTAX, EUNKNOWN, EVALUE, ERANGE, EDUP. */
int common_settings_load_string(const common_settings *s, void *base, const char *name,
                                const char *text, char *err, size_t errlen);

/* Apply a file. Errors: EIO (missing, unreadable, a directory, larger than
 * COMMON_SETTINGS_FILE_MAX), ESYNTAX (a NUL byte), and those above. */
int common_settings_load_file(const common_settings *s, void *base, const char *path, char *err,
                              size_t errlen);

/* Apply the variables of envp (NULL-terminated "NAME=value" strings, as
 * environ) that start with s->env_prefix, in envp order. Does nothing
 * without a prefix. Errors: EUNKNOWN, EVALUE, ERANGE. */
int common_settings_load_env(const common_settings *s, void *base, char *const *envp, char *err,
                             size_t errlen);

/* The environment variable of option i ("MURMUR_NODE_DATA_DIR"). */
void common_settings_env_name(const common_settings *s, size_t i, char *buf, size_t len);

/* Option i's value as text, as a file would hold it (LIST: the number of
 * items). */
void common_settings_format(const common_settings *s, const void *base, size_t i, char *buf,
                            size_t len);

/* Where option i's value came from. */
const char *common_settings_origin(const common_settings *s, const void *base, size_t i);
common_level common_settings_level(const common_settings *s, const void *base, size_t i);
/* Record a value the caller filled in itself (derived from other options). */
void common_settings_set_origin(const common_settings *s, void *base, size_t i, const char *origin,
                                common_level level);

/* Write every option, section by section, in the file syntax; reading the
 * text back gives the same values. With COMMON_WRITE_ORIGINS each line ends
 * with "   # ORIGIN". A DERIVED value is written as key = "" (so that it is
 * derived again) with the value in the comment. Returns 0 or EIO. */
#define COMMON_WRITE_ORIGINS 0x1u
int common_settings_write(const common_settings *s, const void *base, FILE *out, unsigned flags);

/* "node, seeds, model, ..." (the sections in table order). */
void common_settings_sections(const common_settings *s, char *buf, size_t len);

/* The type of option i for help texts: "integer", "number", "string",
 * "bool", "list" or "a|b|c" (an enum's names). */
void common_settings_type_text(const common_settings *s, size_t i, char *buf, size_t len);

/* The nearest option name to a mistyped "section.key" (NULL if none). */
const char *common_settings_suggest(const common_settings *s, const char *name, char *buf,
                                    size_t len);

#endif
