/* common/text — small text helpers shared by every layer: number
 * formatting, enum name tables, and "did you mean" suggestions.
 *
 * Name tables. Every enum a user can name (a mixing algorithm, a topology,
 * a log level) has ONE table: a NULL-terminated array of words whose index
 * is the enum value, defined next to the enum by the module that owns it
 * (gossip_mix_algo_names in gossip/mix.h, ...). Config files, scenarios,
 * help texts and every line that prints a name use that table, so a name
 * cannot drift between two lists.
 *
 * Suggestions. common_nearest_* keeps the candidate closest to a mistyped
 * word by edit distance (Damerau-Levenshtein, optimal string alignment: one
 * insertion, deletion, substitution or swap of neighbours costs 1) and
 * offers it only when it is close enough to be the likely intent: distance
 * 1 for words up to 4 bytes, 2 up to 8, 3 beyond; or when the word is a
 * prefix of exactly one candidate.
 */
#ifndef COMMON_TEXT_H
#define COMMON_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest word the suggestion helpers compare (longer words never match). */
#define COMMON_WORD_MAX 64u

/* The shortest decimal text that reads back (strtod) as exactly v; whole
 * numbers below 1e15 without exponent ("30", not "3e+01"); "nan", "inf" or
 * "-inf" for non-finite values. Returns the length (as snprintf). */
int common_fmt_double(double v, char *buf, size_t len);

/* Strict unsigned decimal: digits only, no sign, no blanks, no overflow.
 * Returns true and the value, or false. */
bool common_parse_u64(const char *s, uint64_t *out);
/* A finite double (strtod syntax, nothing after it). */
bool common_parse_f64(const char *s, double *out);

/* Index of word in a NULL-terminated name table, or -1. */
int common_name_index(const char *const *names, const char *word);
/* names[i], or "unknown" when i is outside the table. */
const char *common_name_at(const char *const *names, int i);
/* Number of names before the NULL. */
size_t common_name_count(const char *const *names);
/* "a, b, c" (sep = ", ") into buf, cut to len - 1 bytes. */
void common_names_join(const char *const *names, const char *sep, char *buf, size_t len);

/* Edit distance (optimal string alignment) between a and b; words longer
 * than COMMON_WORD_MAX count as infinitely far (UINT_MAX). */
unsigned common_edit_distance(const char *a, const char *b);

typedef struct common_nearest {
    const char *word;           /* the mistyped word (borrowed) */
    char best[COMMON_WORD_MAX]; /* closest acceptable candidate so far, "" if none */
    unsigned best_distance;
    unsigned prefix_of; /* candidates the word is a prefix of */
    char prefix[COMMON_WORD_MAX];
} common_nearest;

void common_nearest_init(common_nearest *n, const char *word);
void common_nearest_offer(common_nearest *n, const char *candidate);
/* The suggestion, or NULL when no candidate is close enough. */
const char *common_nearest_best(const common_nearest *n);

#endif
