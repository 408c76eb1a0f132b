/* common/json — the one JSON writer (the agent's /status, the simulator's
 * summary.json, `murmur status --json`).
 *
 * A streaming writer over a caller's buffer or a FILE*: begin/end an object
 * or array, then values, each with a key inside an object (key NULL inside
 * an array or at the top). It never allocates. Output is either compact
 * ({"a":1,"b":"x"}) or indented by `indent` spaces per level with one member
 * a line ("a": 1). Strings are escaped (\" \\ \n \r \t, other bytes below
 * 0x20 and 0x7f as \u00XX; bytes >= 0x80 are copied, so UTF-8 passes
 * through). Numbers: whole numbers as integers, other doubles in the
 * shortest form that reads back exactly (common_fmt_double); NaN and
 * infinities are written as null, as JSON has no such numbers.
 *
 * Errors are sticky: a full buffer, nesting deeper than
 * COMMON_JSON_DEPTH_MAX, an end that does not match its begin, or a FILE
 * write error marks the writer failed; later calls do nothing, and
 * common_json_finish reports it. A failed buffer's content is unspecified.
 */
#ifndef COMMON_JSON_H
#define COMMON_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define COMMON_JSON_DEPTH_MAX 16u

typedef struct common_json {
    char *buf; /* buffer sink (NUL-terminated while not failed), or NULL */
    size_t len, cap;
    FILE *file; /* file sink, or NULL */
    unsigned indent;
    unsigned depth;
    bool empty[COMMON_JSON_DEPTH_MAX + 1]; /* no member written yet at this depth */
    char close[COMMON_JSON_DEPTH_MAX + 1]; /* '}' or ']' per open container */
    bool failed;
} common_json;

void common_json_init_buf(common_json *j, char *buf, size_t cap, unsigned indent);
void common_json_init_file(common_json *j, FILE *f, unsigned indent);

void common_json_object_begin(common_json *j, const char *key);
void common_json_array_begin(common_json *j, const char *key);
/* Ends the innermost object or array, whichever it is. */
void common_json_end(common_json *j);

void common_json_string(common_json *j, const char *key, const char *v);
void common_json_u64(common_json *j, const char *key, uint64_t v);
void common_json_i64(common_json *j, const char *key, int64_t v);
void common_json_number(common_json *j, const char *key, double v);
void common_json_bool(common_json *j, const char *key, bool v);
void common_json_null(common_json *j, const char *key);

/* Close the document with a newline. Returns 0 and the byte count in *len
 * (may be NULL), or -1 if anything failed or a container is still open. */
int common_json_finish(common_json *j, size_t *len);

/* ---- reading a flat object ----
 *
 * The documents murmur reads back (an agent's /status) are one flat object
 * whose values are strings, numbers, true, false or null. The reader walks
 * its members in order: strings are unescaped (\uXXXX outside printable
 * ASCII becomes '?'), other values are given as written. Keys and values
 * longer than the caller's buffers are cut. Nested objects or arrays, or
 * anything else malformed, end the walk with -1. */
typedef struct common_json_reader {
    const char *p;
    int state; /* 0 before '{', 1 inside, 2 after '}' */
} common_json_reader;

void common_json_reader_init(common_json_reader *r, const char *doc);
/* 1 and the next member, 0 at the end of the object, -1 if malformed. */
int common_json_next(common_json_reader *r, char *key, size_t kcap, char *val, size_t vcap);
/* The value of key in a flat object: 1 found, 0 absent, -1 malformed.
 * Keys of 127 bytes or more are never found. */
int common_json_get(const char *doc, const char *key, char *val, size_t vcap);

#endif
