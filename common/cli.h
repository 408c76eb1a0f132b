/* common/cli — command lines through getopt_long, with one flag table per
 * command that also prints its usage, and errors that name the nearest
 * flag.
 *
 * A command describes its flags with common_flag rows and loops:
 *
 *     common_cli cli;
 *     common_cli_init(&cli, "murmur status", flags, n, argc, argv);
 *     for (int id; (id = common_cli_next(&cli)) != COMMON_CLI_END;) {
 *         if (id == COMMON_CLI_ERROR) { fprintf(stderr, "%s\n", cli.err); return 2; }
 *         if (id == COMMON_CLI_POSITIONAL) ...cli.arg...
 *         if (id == FLAG_JSON) ...
 *     }
 *
 * Flags are `--name VALUE`, `--name=VALUE`, or a unique prefix of a name
 * (getopt_long's rules); a flag with a short name also takes `-x VALUE`.
 * Positional arguments come back in order, interleaved with the flags;
 * after `--` every argument is positional. Errors (COMMON_CLI_ERROR, the
 * message in cli.err, one line; the caller prefixes the program name):
 *   unknown flag '--listn'; did you mean --listen?
 *   unknown flag '--frobnicate' (murmur agent --help lists them)
 *   --listen needs a value
 *   --json takes no value
 *   ambiguous flag '--se' (--seed, --set)
 *
 * getopt_long keeps global state: parse one command line at a time, on one
 * thread (a command's main). common_cli_init resets that state, so a
 * command line may be parsed again (two passes, or tests).
 */
#ifndef COMMON_CLI_H
#define COMMON_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Most flags of one command, and the longest message. */
#define COMMON_CLI_FLAGS_MAX 64u
#define COMMON_CLI_ERR_MAX   512u

enum {
    COMMON_CLI_END = -1,
    COMMON_CLI_ERROR = -2,
    COMMON_CLI_POSITIONAL = -3,
};

typedef struct common_flag {
    const char *name;    /* "timeout-ms" (without the dashes) */
    char short_name;     /* 'h', or 0 */
    bool has_value;      /* takes a value */
    int id;              /* returned by common_cli_next; >= 0 */
    const char *metavar; /* "MS", for the usage */
    const char *help;    /* for the usage; lines after a \n are indented under the
                            first; NULL with `sets` */
    const char *sets;    /* the setting this flag is a name for ("node.listen"), or NULL;
                            the usage then says "same as --set node.listen=METAVAR" */
} common_flag;

typedef struct common_cli {
    const char *prog;
    const common_flag *flags;
    size_t count;
    int argc;
    char **argv;
    struct option longopts[COMMON_CLI_FLAGS_MAX + 1];
    char shortopts[3 * COMMON_CLI_FLAGS_MAX + 4];
    bool rest;         /* after "--": everything is positional */
    const char *arg;   /* the value of the flag just returned, or the positional */
    const char *given; /* the flag as written ("--listen"), for origins */
    char given_buf[64];
    char err[COMMON_CLI_ERR_MAX];
    bool err_unknown; /* the error is an unknown or ambiguous flag (else a missing value...) */
} common_cli;

void common_cli_init(common_cli *c, const char *prog, const common_flag *flags, size_t count,
                     int argc, char **argv);
/* The next flag's id, COMMON_CLI_POSITIONAL, COMMON_CLI_END or
 * COMMON_CLI_ERROR (see above). argv[0] (the command) is skipped. */
int common_cli_next(common_cli *c);
/* "  --name METAVAR    help" lines of every flag. */
void common_cli_usage(const common_cli *c, FILE *out);
/* The nearest flag to a mistyped "--word" (NULL if none), into buf. */
const char *common_cli_suggest(const common_flag *flags, size_t count, const char *word, char *buf,
                               size_t len);

#endif
