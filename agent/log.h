/* agent/log — one line per event, key=value, thread-safe.
 *
 * Every line has the same shape, so `grep`, `awk` and log shippers can read
 * it without a parser:
 *
 *   ts=2026-11-22T05:44:29.123Z level=info event=peer_joined peer=1f2e... addr=tcp://10.0.0.2:7000
 *
 * - ts is UTC wall-clock time with milliseconds (RFC 3339, "Z" suffix).
 * - level is debug, info, warn or error; lines below the current level are
 *   dropped before any formatting is done.
 * - event is a short snake_case name; then the fields in the order given.
 * - A value is written bare when it is non-empty and made only of printable
 *   ASCII other than space, '"', '=' and '\'; otherwise it is quoted, with
 *   \" \\ \n \r \t escaped and every other byte below 0x20 or above 0x7e
 *   written as \xNN. A log line therefore never contains a raw newline or a
 *   non-ASCII byte, whatever a peer or a file sent us.
 * - A key is made of [a-z0-9_.]; any other byte is written as '_'.
 * - A line longer than AGENT_LOG_LINE_MAX is cut at a field boundary and ends
 *   with truncated=1.
 *
 * Threads: the event loop, the training thread and NNG callbacks all log. A
 * line is formatted in the caller's stack buffer and written with one
 * fwrite + fflush under a process-wide mutex, so lines never interleave.
 *
 * Rate limiting: bad input from peers arrives in bursts; STYLE.md asks us to
 * "log once with context, count, go on". agent_log_limiter keeps a small table
 * keyed by the caller (e.g. peer id x cause) and lets `burst` lines per key
 * through each `interval_ms`; the first line after a quiet period reports how
 * many were suppressed (field suppressed=N).
 *
 * Ownership: the output FILE* is borrowed (stderr by default); the caller
 * keeps it open while logging.
 */
#ifndef AGENT_LOG_H
#define AGENT_LOG_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Longest line including the trailing newline. 1 KiB holds a timestamp,
 * level, event and ~15 typical fields (a 64-byte address, a 16-hex id...);
 * longer lines are cut, never split. */
#define AGENT_LOG_LINE_MAX 1024u
/* Longest event name or key; longer ones are cut. */
#define AGENT_LOG_KEY_MAX 48u
_Static_assert(AGENT_LOG_LINE_MAX > 4 * AGENT_LOG_KEY_MAX + 64u,
               "a line must hold ts, level, event and a few keys");

typedef enum agent_log_level {
    AGENT_LOG_DEBUG = 0,
    AGENT_LOG_INFO = 1,
    AGENT_LOG_WARN = 2,
    AGENT_LOG_ERROR = 3,
    AGENT_LOG_OFF = 4 /* only as a threshold: log nothing */
} agent_log_level;

/* The name table of agent_log_level, NULL-terminated: "debug", "info",
 * "warn", "error", "off" (log.level in the config uses it). */
extern const char *const agent_log_level_names[AGENT_LOG_OFF + 2];
const char *agent_log_level_name(agent_log_level level);
/* Parse a level name (as above, lower case). 0 on success, -1 if unknown. */
int agent_log_level_parse(const char *name, agent_log_level *out);

/* Threshold: lines below it are dropped. Default AGENT_LOG_INFO. */
void agent_log_set_level(agent_log_level level);
agent_log_level agent_log_get_level(void);
bool agent_log_enabled(agent_log_level level);
/* Where lines go; NULL restores stderr. The stream is borrowed. */
void agent_log_set_output(FILE *out);
/* Wall clock for ts= in milliseconds since the Unix epoch; NULL restores
 * CLOCK_REALTIME. Tests use it for fixed timestamps. */
void agent_log_set_clock(uint64_t (*now_ms)(void));

/* One line being built. Fields are appended in order; agent_log_end writes
 * the line. When the level is below the threshold every call is a no-op. */
typedef struct agent_log_line {
    char buf[AGENT_LOG_LINE_MAX];
    size_t len;
    bool enabled;
    bool truncated;
} agent_log_line;

void agent_log_begin(agent_log_line *l, agent_log_level level, const char *event);
void agent_log_str(agent_log_line *l, const char *key, const char *value);
/* A value of exactly `len` bytes (may contain NUL or binary; escaped). */
void agent_log_bytes(agent_log_line *l, const char *key, const void *value, size_t len);
void agent_log_u64(agent_log_line *l, const char *key, uint64_t value);
void agent_log_i64(agent_log_line *l, const char *key, int64_t value);
/* %.6g; non-finite values are written nan, inf, -inf. */
void agent_log_f64(agent_log_line *l, const char *key, double value);
/* 16 lower-case hex digits, the way node ids are shown everywhere. */
void agent_log_hex64(agent_log_line *l, const char *key, uint64_t value);
void agent_log_end(agent_log_line *l);

/* Convenience: string fields as key, value pairs ending with NULL:
 *   agent_log(AGENT_LOG_WARN, "config_ignored", "file", path, "why", msg, NULL); */
void agent_log(agent_log_level level, const char *event, ...);

/* Append `value` to buf[*len..cap) with the quoting rules above. Returns
 * false (and leaves *len unchanged) if it does not fit. Exposed for tests and
 * for other key=value writers. */
bool agent_log_append_value(char *buf, size_t *len, size_t cap, const char *value, size_t n);

/* Milliseconds on CLOCK_MONOTONIC, for rate limiting. */
uint64_t agent_log_monotonic_ms(void);

/* Keys one limiter tracks. 64 covers the causes of bad input times a few
 * peers misbehaving at once; beyond that the least recently seen key is
 * evicted (it may then log one extra line: harmless). */
#define AGENT_LOG_LIMIT_SLOTS 64u

typedef struct agent_log_limit_slot {
    uint64_t key;
    uint64_t window_start_ms;
    uint64_t last_seen_ms;
    uint32_t in_window;  /* lines let through in the current window */
    uint64_t suppressed; /* lines held back since the last one let through */
    bool used;
} agent_log_limit_slot;

typedef struct agent_log_limiter {
    pthread_mutex_t lock;
    uint64_t interval_ms;
    uint32_t burst;
    agent_log_limit_slot slots[AGENT_LOG_LIMIT_SLOTS];
} agent_log_limiter;

/* interval_ms >= 1, burst >= 1. Returns 0, or -1 on a bad argument. */
int agent_log_limiter_init(agent_log_limiter *lim, uint64_t interval_ms, uint32_t burst);
void agent_log_limiter_destroy(agent_log_limiter *lim);
/* Should the event with this key be logged at time now_ms? Returns true at
 * most `burst` times per key per interval; when it returns true,
 * *suppressed (if not NULL) is how many were held back since the previous
 * line for this key (add it to the line as suppressed=N when non-zero).
 * Thread-safe. */
bool agent_log_limit(agent_log_limiter *lim, uint64_t key, uint64_t now_ms, uint64_t *suppressed);

#endif
