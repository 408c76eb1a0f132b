/* agent/log — see log.h for the line format and the threading rules. */
#include "agent/log.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int log_level = AGENT_LOG_INFO;
static FILE *log_out; /* NULL = stderr; guarded by log_lock */
static uint64_t (*_Atomic log_clock)(void);

const char *const agent_log_level_names[AGENT_LOG_OFF + 2] = {"debug", "info", "warn",
                                                              "error", "off",  NULL};

const char *agent_log_level_name(agent_log_level level)
{
    if ((unsigned)level > AGENT_LOG_OFF)
        return "unknown";
    return agent_log_level_names[level];
}

int agent_log_level_parse(const char *name, agent_log_level *out)
{
    for (int i = 0; i <= AGENT_LOG_OFF; i++) {
        if (name && !strcmp(name, agent_log_level_names[i])) {
            *out = (agent_log_level)i;
            return 0;
        }
    }
    return -1;
}

void agent_log_set_level(agent_log_level level)
{
    atomic_store(&log_level, (int)level);
}

agent_log_level agent_log_get_level(void)
{
    return (agent_log_level)atomic_load(&log_level);
}

bool agent_log_enabled(agent_log_level level)
{
    return level < AGENT_LOG_OFF && (int)level >= atomic_load(&log_level);
}

void agent_log_set_output(FILE *out)
{
    pthread_mutex_lock(&log_lock);
    log_out = out;
    pthread_mutex_unlock(&log_lock);
}

void agent_log_set_clock(uint64_t (*now_ms)(void))
{
    atomic_store(&log_clock, now_ms);
}

static uint64_t realtime_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t agent_log_monotonic_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static bool bare_byte(unsigned char c)
{
    return c > 0x20 && c < 0x7f && c != '"' && c != '=' && c != '\\';
}

bool agent_log_append_value(char *buf, size_t *len, size_t cap, const char *value, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *v = (const unsigned char *)value;
    bool bare = n > 0;
    for (size_t i = 0; i < n && bare; i++)
        bare = bare_byte(v[i]);
    size_t at = *len;
    if (bare) {
        if (cap - at < n + 1)
            return false;
        memcpy(buf + at, v, n);
        *len = at + n;
        buf[*len] = '\0';
        return true;
    }
    /* worst case 4 output bytes per input byte, plus 2 quotes and a NUL */
    char tmp[8];
    if (cap - at < 3)
        return false;
    buf[at++] = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = v[i];
        size_t k = 0;
        switch (c) {
        case '"':
            tmp[k++] = '\\', tmp[k++] = '"';
            break;
        case '\\':
            tmp[k++] = '\\', tmp[k++] = '\\';
            break;
        case '\n':
            tmp[k++] = '\\', tmp[k++] = 'n';
            break;
        case '\r':
            tmp[k++] = '\\', tmp[k++] = 'r';
            break;
        case '\t':
            tmp[k++] = '\\', tmp[k++] = 't';
            break;
        default:
            if (c < 0x20 || c > 0x7e) {
                tmp[k++] = '\\', tmp[k++] = 'x';
                tmp[k++] = hex[c >> 4], tmp[k++] = hex[c & 15];
            } else {
                tmp[k++] = (char)c;
            }
        }
        if (cap - at < k + 2) /* room for the closing quote and NUL */
            return false;
        memcpy(buf + at, tmp, k);
        at += k;
    }
    buf[at++] = '"';
    buf[at] = '\0';
    *len = at;
    return true;
}

/* " key=" with the key sanitised to [a-z0-9_.]. */
static bool append_key(char *buf, size_t *len, size_t cap, const char *key)
{
    size_t at = *len;
    size_t n = strnlen(key, AGENT_LOG_KEY_MAX);
    if (cap - at < n + 3)
        return false;
    buf[at++] = ' ';
    for (size_t i = 0; i < n; i++) {
        char c = key[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
        buf[at++] = ok ? c : '_';
    }
    buf[at++] = '=';
    buf[at] = '\0';
    *len = at;
    return true;
}

/* Room kept at the end of the buffer for " truncated=1\n". */
#define TRUNC_TAIL 16u

static void field(agent_log_line *l, const char *key, const char *value, size_t n)
{
    if (!l->enabled || l->truncated)
        return;
    size_t cap = sizeof l->buf - TRUNC_TAIL;
    size_t at = l->len;
    if (!append_key(l->buf, &at, cap, key) || !agent_log_append_value(l->buf, &at, cap, value, n)) {
        l->truncated = true;
        l->buf[l->len] = '\0';
        return;
    }
    l->len = at;
}

void agent_log_begin(agent_log_line *l, agent_log_level level, const char *event)
{
    l->len = 0;
    l->truncated = false;
    l->enabled = agent_log_enabled(level);
    l->buf[0] = '\0';
    if (!l->enabled)
        return;
    uint64_t (*clk)(void) = atomic_load(&log_clock);
    uint64_t ms = clk ? clk() : realtime_ms();
    time_t secs = (time_t)(ms / 1000u);
    struct tm tm;
    gmtime_r(&secs, &tm);
    int n = snprintf(l->buf, sizeof l->buf, "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03uZ level=%s",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     (unsigned)(ms % 1000u), agent_log_level_names[level]);
    l->len = (size_t)n;
    field(l, "event", event ? event : "", event ? strlen(event) : 0);
}

void agent_log_str(agent_log_line *l, const char *key, const char *value)
{
    if (!value)
        value = "";
    if (l->enabled)
        field(l, key, value, strlen(value));
}

void agent_log_bytes(agent_log_line *l, const char *key, const void *value, size_t len)
{
    field(l, key, value, len);
}

void agent_log_u64(agent_log_line *l, const char *key, uint64_t value)
{
    char t[24];
    int n = snprintf(t, sizeof t, "%" PRIu64, value);
    field(l, key, t, (size_t)n);
}

void agent_log_i64(agent_log_line *l, const char *key, int64_t value)
{
    char t[24];
    int n = snprintf(t, sizeof t, "%" PRId64, value);
    field(l, key, t, (size_t)n);
}

void agent_log_f64(agent_log_line *l, const char *key, double value)
{
    char t[32];
    int n;
    if (isnan(value))
        n = snprintf(t, sizeof t, "nan");
    else if (isinf(value))
        n = snprintf(t, sizeof t, "%sinf", value < 0 ? "-" : "");
    else
        n = snprintf(t, sizeof t, "%.6g", value);
    field(l, key, t, (size_t)n);
}

void agent_log_hex64(agent_log_line *l, const char *key, uint64_t value)
{
    char t[24];
    int n = snprintf(t, sizeof t, "%016" PRIx64, value);
    field(l, key, t, (size_t)n);
}

void agent_log_end(agent_log_line *l)
{
    if (!l->enabled)
        return;
    if (l->truncated) {
        int n = snprintf(l->buf + l->len, sizeof l->buf - l->len, " truncated=1");
        l->len += (size_t)n;
    }
    l->buf[l->len++] = '\n';
    pthread_mutex_lock(&log_lock);
    FILE *out = log_out ? log_out : stderr;
    fwrite(l->buf, 1, l->len, out);
    fflush(out);
    pthread_mutex_unlock(&log_lock);
    l->enabled = false; /* a second end() writes nothing */
}

void agent_log(agent_log_level level, const char *event, ...)
{
    if (!agent_log_enabled(level))
        return;
    agent_log_line l;
    agent_log_begin(&l, level, event);
    va_list ap;
    va_start(ap, event);
    for (;;) {
        const char *key = va_arg(ap, const char *);
        if (!key)
            break;
        const char *value = va_arg(ap, const char *);
        agent_log_str(&l, key, value);
    }
    va_end(ap);
    agent_log_end(&l);
}

int agent_log_limiter_init(agent_log_limiter *lim, uint64_t interval_ms, uint32_t burst)
{
    if (!lim || interval_ms == 0 || burst == 0)
        return -1;
    memset(lim->slots, 0, sizeof lim->slots);
    lim->interval_ms = interval_ms;
    lim->burst = burst;
    if (pthread_mutex_init(&lim->lock, NULL) != 0)
        return -1;
    return 0;
}

void agent_log_limiter_destroy(agent_log_limiter *lim)
{
    pthread_mutex_destroy(&lim->lock);
}

bool agent_log_limit(agent_log_limiter *lim, uint64_t key, uint64_t now_ms, uint64_t *suppressed)
{
    pthread_mutex_lock(&lim->lock);
    agent_log_limit_slot *s = NULL, *victim = NULL;
    for (unsigned i = 0; i < AGENT_LOG_LIMIT_SLOTS; i++) {
        agent_log_limit_slot *c = &lim->slots[i];
        if (c->used && c->key == key) {
            s = c;
            break;
        }
        /* victim: the first free slot, else the least recently seen key */
        if (!victim || (victim->used && (!c->used || c->last_seen_ms < victim->last_seen_ms)))
            victim = c;
    }
    if (!s) {
        s = victim;
        memset(s, 0, sizeof *s);
        s->used = true;
        s->key = key;
        s->window_start_ms = now_ms;
    }
    s->last_seen_ms = now_ms;
    if (now_ms < s->window_start_ms || now_ms - s->window_start_ms >= lim->interval_ms) {
        s->window_start_ms = now_ms;
        s->in_window = 0;
    }
    bool allow = s->in_window < lim->burst;
    if (allow) {
        s->in_window++;
        if (suppressed)
            *suppressed = s->suppressed;
        s->suppressed = 0;
    } else {
        s->suppressed++;
    }
    pthread_mutex_unlock(&lim->lock);
    return allow;
}
