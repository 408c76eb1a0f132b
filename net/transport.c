/* net/transport — see transport.h for the design.
 *
 * Locking: one mutex (t->mtx) guards every field below, including each
 * connection's state; NNG callbacks take it, do a bounded amount of work
 * (no blocking call, no aio stop/free) and release it. Starting an NNG
 * operation under the mutex is safe because NNG completes aios on its own
 * task threads, never inline.
 *
 * Connection life: DIALING -> HANDSHAKE -> OPEN -> CLOSING. A closing
 * connection has its stream closed (which aborts its pending aios); when
 * the last of its aio callbacks has run (rx_busy, tx_busy, dial_busy, kick_busy all 0)
 * it moves to the graveyard, which the housekeeping thread frees:
 * nng_aio_free waits for a callback still finishing, and may not be called
 * from one.
 */
#include "net/transport.h"

#include <errno.h>
#include <fcntl.h>
#include <nng/nng.h>
#include <stdatomic.h>
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <sodium.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef enum conn_state { C_DIALING, C_HANDSHAKE, C_OPEN, C_CLOSING } conn_state;

typedef struct tx_item {
    struct tx_item *next;
    size_t len;       /* plaintext length (data) or record length (handshake) */
    size_t wire;      /* bytes to write once sealed: [4 length][record] */
    int sealed;       /* buf holds a complete record */
    uint32_t corrupt; /* faults: flip one byte of the sealed record (0 = no) */
    size_t cap;       /* frame bytes the buffer holds (net_transport_frame_alloc) */
    uint8_t buf[];    /* [4 length][13 header][plain][16 tag] */
} tx_item;

/* The item whose frame area (buf + 4 + header) is frame. */
static tx_item *item_of_frame(uint8_t *frame)
{
    return (tx_item *)(void *)(frame - 4 - NET_CHANNEL_HEADER_SIZE - offsetof(tx_item, buf));
}

typedef struct conn conn;
struct conn {
    net_transport *t;
    conn *prev, *next; /* t->conns, or t->graveyard (next only) */
    conn_state state;
    int dialed;
    char addr[GOSSIP_ADDR_MAX]; /* dialed address; "" for accepted */
    uint64_t pen_key;           /* penalty key of the remote host */
    gossip_time_us born_us;     /* accepted or dial started */
    uint64_t expect;            /* dialed: node id we want (0 = any) */
    uint64_t peer;              /* node id once OPEN */
    int penalize;               /* an authentication failure closed it */
    int carried;                /* a frame of ours was queued on it (find_conn) */
    uint64_t remote_key;        /* the remote IP address as seen on the socket, hashed (on_open) */
    gossip_time_us active_us;   /* last time bytes moved either way */
    nng_stream *s;
    nng_stream_dialer *dialer;
    nng_aio *rx_aio, *tx_aio, *dial_aio, *kick_aio;
    int rx_busy, tx_busy, dial_busy, kick_busy;
    net_channel *ch;
    /* receive: a length prefix, then the record */
    uint8_t rx_hdr[4];
    size_t rx_got;
    size_t rx_ahead; /* bytes of the next length prefix read with a body */
    uint8_t *rx_buf;
    size_t rx_len;
    int rx_body;
    /* a frame waiting for room in the inbox; reading is paused meanwhile */
    uint8_t *park_buf;
    const uint8_t *park_data;
    size_t park_len;
    /* send: handshake records first, then data frames */
    tx_item *hs_head, *hs_tail;
    tx_item *q_head, *q_tail;
    uint32_t q_frames;
    size_t q_bytes;
    tx_item *tx_cur; /* the batch being written (linked by next) */
    size_t tx_off, tx_total;
};

typedef struct book_entry {
    uint64_t id; /* 0 while unknown (a seed) */
    char addr[GOSSIP_ADDR_MAX];
    gossip_time_us next_dial_us;
    uint32_t backoff_ms;
} book_entry;

typedef struct inbox_item {
    uint64_t from;
    uint8_t *buf;
    const uint8_t *data;
    size_t len;
} inbox_item;

struct net_transport {
    pthread_mutex_t mtx;
    pthread_cond_t cv;      /* housekeeping: graveyard non-empty, or stop */
    pthread_cond_t idle_cv; /* destroy: all connections gone */
    pthread_t housekeeper;
    int housekeeper_started, stop, closing;

    net_identity self;
    uint8_t keys[NET_CHANNEL_KEYS_MAX][NET_NETWORK_KEY_SIZE]; /* ring; [0] = primary */
    size_t n_keys;
    net_seen *seen;     /* greatest HELLO timestamp per initiator key */
    uint64_t last_wall; /* HELLO timestamps strictly increase, even on a coarse clock */
    uint8_t *allow;     /* NULL: no allow-list; else allow_n keys (0 = admit nobody) */
    size_t allow_n;
    net_transport_config cfg; /* defaults filled in; pointers not used */
    net_penalty *penalty;

    nng_stream_listener *listener;
    nng_aio *accept_aio;
    int accept_busy, accept_sleeping;

    conn *conns;
    uint32_t n_conns;
    conn *graveyard;

    book_entry *book;
    uint32_t book_n;

    inbox_item *inbox;
    uint32_t in_head, in_count;
    size_t in_bytes;
    int woken;
    int pipe_fd[2];
    uint32_t n_parked; /* connections paused on a full inbox */

    net_transport_stats stats;
    _Atomic(net_faults *) faults; /* owned; NULL unless faults were enabled */
};

/* ThreadSanitizer (make SANITIZER=thread): Debian's NNG 1.5.2 is not built
 * with TSan and its frames cannot be unwound; TSan reports NNG's reaper
 * thread (nng:reap2) destroying an NNG-internal mutex that an earlier
 * nng_stream_dialer_free locked, with only libnng frames on both stacks.
 * Only races whose top frame is a mutex destroy are suppressed; murmur
 * destroys its own mutex only after every NNG callback has been stopped.
 * Defined here so that every binary using the transport (tests, the agent)
 * gets it; TSan looks this weak hook up at start-up, other builds ignore it. */
const char *__tsan_default_suppressions(void);
const char *__tsan_default_suppressions(void)
{
    return "race_top:pthread_mutex_destroy\n";
}

static uint64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static gossip_time_us now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (gossip_time_us)ts.tv_sec * 1000000u + (gossip_time_us)ts.tv_nsec / 1000u;
}

/* ---- buffer cache ---------------------------------------------------- */

/* Records of 64 KiB and more (send items and receive buffers) come from a
 * process-wide cache of free buffers in power-of-two classes rather than
 * straight from malloc: glibc serves such sizes with a fresh mmap (or trims
 * its heap after them), so every record of an allreduce cost one page fault
 * and one zeroed page per 4 KiB (perf, 2 agents, 64 MiB: clear_page_erms
 * and exc_page_fault were 11% of all cycles). Process-wide, so a message
 * may outlive its transport; at most BUF_CACHE_BYTES are kept free (64 MiB:
 * a full allreduce pipeline of 256 KiB frames both ways, many times over),
 * beyond that buffers go back to malloc. Smaller records use malloc. */
#define BUF_CLASS_MIN_SHIFT 16u
#define BUF_CLASS_MAX_SHIFT 31u
#define BUF_CACHE_BYTES     ((size_t)64u << 20)
_Static_assert(((size_t)1u << BUF_CLASS_MAX_SHIFT) >= NET_TRANSPORT_RECORD_MAX + 4u + 64u,
               "the largest class holds the largest record");

typedef struct buf_hdr {
    struct buf_hdr *next;
    size_t cls; /* 0: plain malloc; else log2 of the allocation */
} buf_hdr;
_Static_assert(sizeof(buf_hdr) % 16u == 0, "buffers stay 16-byte aligned");

static pthread_mutex_t buf_mtx = PTHREAD_MUTEX_INITIALIZER;
static buf_hdr *buf_list[BUF_CLASS_MAX_SHIFT + 1];
static size_t buf_cached;

static void *buf_alloc(size_t size)
{
    size_t need = size + sizeof(buf_hdr), cls = 0;
    if (need >= ((size_t)1 << BUF_CLASS_MIN_SHIFT)) {
        cls = BUF_CLASS_MIN_SHIFT;
        while (((size_t)1 << cls) < need)
            if (++cls > BUF_CLASS_MAX_SHIFT)
                return NULL;
        need = (size_t)1 << cls;
        pthread_mutex_lock(&buf_mtx);
        buf_hdr *h = buf_list[cls];
        if (h) {
            buf_list[cls] = h->next;
            buf_cached -= need;
        }
        pthread_mutex_unlock(&buf_mtx);
        if (h)
            return h + 1;
    }
    buf_hdr *h = malloc(need);
    if (!h)
        return NULL;
    h->cls = cls;
    return h + 1;
}

static void buf_free(void *p)
{
    if (!p)
        return;
    buf_hdr *h = (buf_hdr *)p - 1;
    if (h->cls) {
        size_t sz = (size_t)1 << h->cls;
        pthread_mutex_lock(&buf_mtx);
        int keep = buf_cached + sz <= BUF_CACHE_BYTES;
        if (keep) {
            h->next = buf_list[h->cls];
            buf_list[h->cls] = h;
            buf_cached += sz;
        }
        pthread_mutex_unlock(&buf_mtx);
        if (keep)
            return;
    }
    free(h);
}

static void reject(net_transport *t, int cause)
{
    if (cause >= 0 && cause < NET_REJECT_COUNT)
        t->stats.rejects[cause]++;
}

/* ---- address book --------------------------------------------------- */

static book_entry *book_by_id(net_transport *t, uint64_t id)
{
    for (uint32_t i = 0; i < t->book_n; i++)
        if (t->book[i].id == id)
            return &t->book[i];
    return NULL;
}

static book_entry *book_by_addr(net_transport *t, const char *addr)
{
    for (uint32_t i = 0; i < t->book_n; i++)
        if (!strcmp(t->book[i].addr, addr))
            return &t->book[i];
    return NULL;
}

/* Find or add the entry of addr (and id when known). NULL when full. */
static book_entry *book_put(net_transport *t, uint64_t id, const char *addr)
{
    book_entry *e = id ? book_by_id(t, id) : NULL;
    if (e) {
        if (strcmp(e->addr, addr)) { /* the peer moved: new address, fresh backoff */
            snprintf(e->addr, sizeof e->addr, "%s", addr);
            e->next_dial_us = 0;
            e->backoff_ms = 0;
        }
        return e;
    }
    e = book_by_addr(t, addr);
    if (e) {
        if (id)
            e->id = id;
        return e;
    }
    if (t->book_n >= NET_TRANSPORT_BOOK_MAX)
        return NULL;
    e = &t->book[t->book_n++];
    memset(e, 0, sizeof *e);
    e->id = id;
    snprintf(e->addr, sizeof e->addr, "%s", addr);
    return e;
}

static void book_failed(net_transport *t, const char *addr, gossip_time_us now)
{
    book_entry *e = book_by_addr(t, addr);
    if (!e)
        e = book_put(t, 0, addr);
    if (!e)
        return;
    uint32_t b = e->backoff_ms ? e->backoff_ms * 2 : t->cfg.dial_backoff_min_ms;
    if (b > t->cfg.dial_backoff_max_ms || b < e->backoff_ms)
        b = t->cfg.dial_backoff_max_ms;
    e->backoff_ms = b;
    e->next_dial_us = now + (gossip_time_us)b * 1000u;
}

/* Host part of a URL ("tcp://10.0.0.1:7000" -> "10.0.0.1") into out. */
static void host_of(const char *url, char *out, size_t cap)
{
    const char *p = strstr(url, "://");
    p = p ? p + 3 : url;
    const char *colon = strrchr(p, ':');
    size_t n = colon && !strncmp(url, "tcp", 3) ? (size_t)(colon - p) : strlen(p);
    if (n >= cap)
        n = cap - 1;
    memcpy(out, p, n);
    out[n] = 0;
}

/* ---- inbox ---------------------------------------------------------- */

static void pipe_signal(net_transport *t)
{
    char b = 1;
    ssize_t r = write(t->pipe_fd[1], &b, 1); /* full pipe: already signalled */
    (void)r;
}

static void pipe_drain(net_transport *t)
{
    char buf[64];
    while (read(t->pipe_fd[0], buf, sizeof buf) > 0)
        ;
}

static int inbox_has_room(const net_transport *t, size_t len)
{
    /* An empty inbox takes any frame, so one larger than inbox_bytes_max
     * still gets through. */
    return t->in_count == 0 ||
           (t->in_count < t->cfg.inbox_frames_max && t->in_bytes + len <= t->cfg.inbox_bytes_max);
}

/* Takes ownership of buf; the caller checked inbox_has_room. */
static void inbox_push(net_transport *t, uint64_t from, uint8_t *buf, const uint8_t *data,
                       size_t len)
{
    uint32_t slot = (t->in_head + t->in_count) % t->cfg.inbox_frames_max;
    t->inbox[slot] = (inbox_item){.from = from, .buf = buf, .data = data, .len = len};
    if (t->in_count++ == 0)
        pipe_signal(t);
    t->in_bytes += len;
    t->stats.frames_received++;
    t->stats.bytes_received += len;
}

/* ---- connections ---------------------------------------------------- */

static void rx_cb(void *arg);
static void tx_cb(void *arg);
static void dial_cb(void *arg);
static void kick_cb(void *arg);
static void pump(conn *c);

static void free_items(tx_item *it)
{
    while (it) {
        tx_item *n = it->next;
        buf_free(it);
        it = n;
    }
}

/* Move c to the graveyard once no aio of it is outstanding. */
static void maybe_bury(conn *c)
{
    net_transport *t = c->t;
    if (c->state != C_CLOSING || c->rx_busy || c->tx_busy || c->dial_busy || c->kick_busy)
        return;
    if (c->prev)
        c->prev->next = c->next;
    else
        t->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    t->n_conns--;
    c->prev = NULL;
    c->next = t->graveyard;
    t->graveyard = c;
    pthread_cond_signal(&t->cv);
}

static void conn_close(conn *c)
{
    net_transport *t = c->t;
    if (c->state == C_CLOSING)
        return;
    gossip_time_us now = now_us();
    int was_open = c->state == C_OPEN;
    c->state = C_CLOSING;
    t->stats.conns_closed++;
    /* Frames accepted by send that will never go out. */
    for (tx_item *it = c->q_head; it; it = it->next)
        reject(t, NET_REJECT_UNREACHABLE);
    free_items(c->q_head);
    free_items(c->hs_head);
    c->q_head = c->q_tail = c->hs_head = c->hs_tail = NULL;
    c->q_frames = 0;
    c->q_bytes = 0;
    if (c->park_buf) {
        buf_free(c->park_buf);
        c->park_buf = NULL;
        t->n_parked--;
    }
    if (c->penalize)
        net_penalty_fail(t->penalty, c->pen_key, now);
    /* A dialed link that never opened: back off that address. */
    if (c->dialed && !was_open)
        book_failed(t, c->addr, now);
    if (c->s)
        nng_stream_close(c->s);
    if (c->dialer)
        nng_stream_dialer_close(c->dialer);
    maybe_bury(c);
}

static int conn_alloc(net_transport *t, conn **out)
{
    conn *c = calloc(1, sizeof *c);
    if (!c)
        return NET_ENOMEM;
    c->t = t;
    c->active_us = c->born_us = now_us();
    if (nng_aio_alloc(&c->rx_aio, rx_cb, c) || nng_aio_alloc(&c->tx_aio, tx_cb, c) ||
        nng_aio_alloc(&c->dial_aio, dial_cb, c) || nng_aio_alloc(&c->kick_aio, kick_cb, c)) {
        nng_aio_free(c->rx_aio);
        nng_aio_free(c->tx_aio);
        nng_aio_free(c->dial_aio);
        nng_aio_free(c->kick_aio);
        free(c);
        return NET_ENOMEM;
    }
    c->next = t->conns;
    if (t->conns)
        t->conns->prev = c;
    t->conns = c;
    t->n_conns++;
    *out = c;
    return NET_OK;
}

static void conn_free(conn *c)
{
    nng_aio_free(c->rx_aio);
    nng_aio_free(c->tx_aio);
    nng_aio_free(c->dial_aio);
    nng_aio_free(c->kick_aio);
    if (c->s)
        nng_stream_free(c->s);
    if (c->dialer)
        nng_stream_dialer_free(c->dialer);
    net_channel_destroy(c->ch);
    buf_free(c->rx_buf);
    buf_free(c->park_buf);
    free_items(c->tx_cur);
    free_items(c->q_head);
    free_items(c->hs_head);
    free(c);
}

static int channel_for(conn *c, int initiator, gossip_time_us now)
{
    net_transport *t = c->t;
    uint64_t wall = wall_ns();
    if (wall <= t->last_wall)
        wall = t->last_wall + 1;
    t->last_wall = wall;
    net_channel_config cc = {
        .self = &t->self,
        .network_keys = t->keys[0],
        .network_keys_n = t->n_keys,
        .seen = t->seen,
        .wall_ns = wall,
        .auth_only = t->cfg.auth_only,
        .allow = t->allow,
        .allow_n = t->allow_n,
        .initiator = initiator,
        .expect_peer = c->expect,
        .rekey_frames = t->cfg.rekey_frames,
        .rekey_interval_us = (uint64_t)t->cfg.rekey_interval_ms * 1000u,
        .handshake_timeout_us = (uint64_t)t->cfg.handshake_timeout_ms * 1000u,
    };
    return net_channel_create(&c->ch, &cc, now);
}

/* Queue the channel's pending handshake record, if any. */
static int take_handshake(conn *c)
{
    const uint8_t *rec;
    size_t len;
    while (net_channel_poll_send(c->ch, &rec, &len)) {
        tx_item *it = buf_alloc(sizeof *it + 4 + len);
        if (!it)
            return NET_ENOMEM;
        it->next = NULL;
        it->len = 4 + len;
        it->sealed = 1;
        gossip_put_u32(it->buf, (uint32_t)len);
        memcpy(it->buf + 4, rec, len);
        if (c->hs_tail)
            c->hs_tail->next = it;
        else
            c->hs_head = it;
        c->hs_tail = it;
    }
    return NET_OK;
}

static void conn_fail(conn *c, int cause, int penalize);

/* A whole length prefix is in rx_hdr: check it against the receive limit
 * of the channel's current state and get the body's buffer. 0, or -1 when
 * c was closed. */
static int rx_header(conn *c)
{
    net_transport *t = c->t;
    uint32_t len = gossip_get_u32(c->rx_hdr);
    size_t limit = net_channel_established(c->ch) ? t->cfg.frame_max + NET_CHANNEL_OVERHEAD
                                                  : NET_CHANNEL_HS_MAX;
    if (len > limit) {
        conn_fail(c, NET_REJECT_OVERSIZE, 1);
    } else if (len == 0) {
        conn_fail(c, NET_REJECT_BAD_RECORD, 1);
    } else if (!(c->rx_buf = buf_alloc(len))) {
        conn_close(c);
    } else {
        c->rx_len = len;
        c->rx_got = 0;
        c->rx_body = 1;
        return 0;
    }
    return -1;
}

/* Arm the next read. Read-ahead: a body read also asks for the next
 * record's 4-byte length prefix (a second iov), so that records arriving
 * back to back cost one completion on an NNG thread (a wake-up and the
 * mutex) less each; the prefix is only checked once the record before it
 * has been consumed (rx_header, under the limit of the channel's state
 * then). */
static void rx_arm(conn *c)
{
    if (!c->rx_body && c->rx_got == sizeof c->rx_hdr && rx_header(c))
        return;
    nng_iov iov[2];
    unsigned n = 1;
    if (c->rx_body) {
        iov[0].iov_buf = c->rx_buf + c->rx_got;
        iov[0].iov_len = c->rx_len - c->rx_got;
        iov[1].iov_buf = c->rx_hdr;
        iov[1].iov_len = sizeof c->rx_hdr;
        n = 2;
    } else {
        iov[0].iov_buf = c->rx_hdr + c->rx_got;
        iov[0].iov_len = sizeof c->rx_hdr - c->rx_got;
    }
    nng_aio_set_iov(c->rx_aio, n, iov);
    gossip_time_us deadline = net_channel_deadline(c->ch);
    if (deadline == GOSSIP_TIME_NEVER) {
        nng_aio_set_timeout(c->rx_aio, NNG_DURATION_INFINITE);
    } else {
        gossip_time_us now = now_us();
        uint64_t ms = deadline > now ? (deadline - now) / 1000u + 1u : 1u;
        nng_aio_set_timeout(c->rx_aio, (nng_duration)(ms > 3600000u ? 3600000u : ms));
    }
    c->rx_busy = 1;
    nng_stream_recv(c->s, c->rx_aio);
}

/* Fail c for an authentication reason: count, penalise, close. */
static void conn_fail(conn *c, int cause, int penalize)
{
    reject(c->t, cause);
    c->penalize = penalize;
    conn_close(c);
}

static uint32_t links_in_use(const net_transport *t);

static void remote_host(nng_stream *s, char *out, size_t cap);

static void on_open(conn *c)
{
    net_transport *t = c->t;
    if (!c->dialed && links_in_use(t) >= t->cfg.conns_max) {
        reject(t, NET_REJECT_CONN_LIMIT); /* authenticated, but no room for one more link */
        conn_close(c);
        return;
    }
    c->state = C_OPEN;
    c->peer = net_channel_peer(c->ch);
    char host[GOSSIP_ADDR_MAX];
    remote_host(c->s, host, sizeof host);
    c->remote_key = net_penalty_key(host);
    t->stats.handshakes_ok++;
    net_penalty_forgive(t->penalty, c->pen_key);
    if (c->dialed) {
        book_entry *e = book_put(t, c->peer, c->addr);
        if (e) {
            e->backoff_ms = 0;
            e->next_dial_us = 0;
        }
    }
}

static void on_record(conn *c)
{
    net_transport *t = c->t;
    uint8_t *buf = c->rx_buf;
    size_t len = c->rx_len;
    c->rx_buf = NULL;
    c->rx_len = 0;
    c->rx_got = c->rx_ahead; /* bytes of the next prefix read ahead */
    c->rx_ahead = 0;
    c->rx_body = 0;
    uint8_t *plain = NULL;
    size_t plain_len = 0;
    int was_open = net_channel_established(c->ch);
    net_channel_op op;
    int rc = net_channel_open_begin(c->ch, buf, len, &op);
    if (rc == NET_OK) {
        /* A data record: open it without the mutex (~1 ms per MiB), so
         * that the other links, our own sends and the event loop go on
         * meanwhile. rx_busy keeps c alive; nothing else reads this link
         * before rx_arm below, so its records are still finished in order. */
        c->rx_busy = 1;
        pthread_mutex_unlock(&t->mtx);
        net_channel_crypt(&op, buf);
        pthread_mutex_lock(&t->mtx);
        c->rx_busy = 0;
        if (c->state == C_CLOSING) {
            buf_free(buf);
            maybe_bury(c);
            return;
        }
        rc = net_channel_open_end(c->ch, &op, buf, now_us(), &plain, &plain_len);
    } else if (rc == NET_ESTATE) { /* handshake and rekey records */
        rc = net_channel_recv(c->ch, buf, len, now_us(), &plain, &plain_len);
    }
    if (rc != NET_OK) {

        buf_free(buf);
        int cause = net_channel_last_reject(c->ch);
        /* Over a stream nothing is lost or reordered: any bad record is an
         * attack or a bug, so the connection goes. Dialing ourselves or an
         * address that now hosts another node is not an attack; a stale
         * HELLO cost us one small decryption, and penalising it would let
         * a replayer get the real sender's address (a shared NAT) cut off. */
        conn_fail(c, cause,
                  cause != NET_REJECT_SELF && cause != NET_REJECT_WRONG_PEER &&
                      cause != NET_REJECT_STALE_HELLO);
        return;
    }
    /* Control records (CONFIRM, REKEY_INIT/ACK) may come out of any recv. */
    if (take_handshake(c)) {
        buf_free(buf);
        conn_close(c);
        return;
    }
    if (plain && !inbox_has_room(t, plain_len)) {
        /* Backpressure: hold the frame and stop reading this connection
         * until the event loop drains the inbox; TCP then slows the peer. */
        c->park_buf = buf;
        c->park_data = plain;
        c->park_len = plain_len;
        t->n_parked++;
        t->stats.inbox_stalls++;
        pump(c);
        return;
    }
    if (plain) {
        inbox_push(t, c->peer, buf, plain, plain_len);
    } else {
        buf_free(buf);
        if (!was_open && net_channel_established(c->ch))
            on_open(c);
    }
    pump(c);
    if (c->state != C_CLOSING)
        rx_arm(c);
}

static void rx_cb(void *arg)
{
    conn *c = arg;
    net_transport *t = c->t;
    pthread_mutex_lock(&t->mtx);
    c->rx_busy = 0;
    int rv = nng_aio_result(c->rx_aio);
    if (c->state == C_CLOSING) {
        maybe_bury(c);
        pthread_mutex_unlock(&t->mtx);
        return;
    }
    if (rv != 0) {
        if (rv == NNG_ETIMEDOUT && !net_channel_established(c->ch)) {
            net_channel_check_timeout(c->ch, GOSSIP_TIME_NEVER - 1);
            conn_fail(c, NET_REJECT_HANDSHAKE_TIMEOUT, 1);
        } else {
            conn_close(c);
        }
        pthread_mutex_unlock(&t->mtx);
        return;
    }
    size_t got = nng_aio_count(c->rx_aio);
    c->active_us = now_us();
    if (c->rx_body) {
        size_t need = c->rx_len - c->rx_got;
        if (got > need) { /* the body, then part of the next prefix */
            c->rx_ahead = got - need;
            got = need;
        }
        c->rx_got += got;
        if (c->rx_got == c->rx_len) {
            on_record(c);
            pthread_mutex_unlock(&t->mtx);
            return;
        }
    } else {
        c->rx_got += got; /* rx_arm takes a whole prefix */
    }
    if (c->state != C_CLOSING)
        rx_arm(c);
    pthread_mutex_unlock(&t->mtx);
}

/* Batched sends: one nng_stream_send writes up to TX_BATCH_MAX records
 * (NNG 1.5.2 takes at most 8 iovs per aio) of at most TX_BATCH_BYTES in
 * all, so that a queue of allreduce chunks goes out with one completion
 * (one wake-up of an NNG thread) per batch rather than per record; 4 MiB
 * bounds the time the batch's sealing holds the mutex (~3 ms). */
#define TX_BATCH_MAX   8u
#define TX_BATCH_BYTES ((size_t)4u << 20)

/* Take the next record to send (handshake and control records first),
 * with it->wire set; a data frame gets its header and counter here
 * (net_channel_seal_begin, in send order) and *op what its AEAD needs
 * (*need_crypt = 1), which pump runs without the mutex. NULL when there is
 * none. May close c. */
static tx_item *next_record(conn *c, net_channel_op *op, int *need_crypt)
{
    net_transport *t = c->t;
    tx_item *it = NULL;
    *need_crypt = 0;
    if (c->hs_head) {
        it = c->hs_head;
        c->hs_head = it->next;
        if (!c->hs_head)
            c->hs_tail = NULL;
        it->wire = it->len;
    } else if (c->state == C_OPEN && c->q_head) {
        it = c->q_head;
        c->q_head = it->next;
        if (!c->q_head)
            c->q_tail = NULL;
        c->q_frames--;
        c->q_bytes -= it->len;
        size_t rec_len = 0;
        int rc = net_channel_seal_begin(c->ch, it->len, it->buf + 4, it->len + NET_CHANNEL_OVERHEAD,
                                        &rec_len, now_us(), op);
        /* take_handshake: a REKEY_INIT the seal started goes out next */
        if (rc || take_handshake(c)) {
            sodium_memzero(op, sizeof *op);
            buf_free(it);
            reject(t, NET_REJECT_UNREACHABLE);
            conn_close(c);
            return NULL;
        }
        gossip_put_u32(it->buf, (uint32_t)rec_len);
        it->wire = 4 + rec_len;
        *need_crypt = 1;
    }
    if (it)
        it->next = NULL;
    return it;
}

/* Point the send aio at the unsent bytes of the batch c->tx_cur. */
static void tx_arm(conn *c)
{
    nng_iov iov[TX_BATCH_MAX];
    unsigned n = 0;
    size_t skip = c->tx_off;
    for (tx_item *it = c->tx_cur; it && n < TX_BATCH_MAX; it = it->next) {
        if (skip >= it->wire) {
            skip -= it->wire;
            continue;
        }
        iov[n].iov_buf = it->buf + skip;
        iov[n].iov_len = it->wire - skip;
        skip = 0;
        n++;
    }
    nng_aio_set_iov(c->tx_aio, n, iov);
    c->tx_busy = 1;
    nng_stream_send(c->s, c->tx_aio);
}

/* Start the next send if none is in flight. The batch's records are taken
 * (and numbered) under the mutex, sealed without it, then handed to NNG
 * under it again: sealing costs ~1 ms per MiB, and under the mutex it held
 * up the receive side of every link (opening records) and the event loop
 * (net_transport_send, net_transport_recv). tx_busy is set meanwhile, so
 * no other pump takes this link's records (they leave in counter order)
 * and c is not buried. The caller holds the mutex; pump may release and
 * retake it, so the caller must look at c->state again afterwards. */
static void pump(conn *c)
{
    if (c->tx_busy || c->state == C_CLOSING || c->state == C_DIALING)
        return;
    net_transport *t = c->t;
    tx_item *head = NULL, *tail = NULL;
    net_channel_op ops[TX_BATCH_MAX];
    tx_item *sealing[TX_BATCH_MAX];
    unsigned n_seal = 0;
    size_t total = 0;
    for (unsigned n = 0; n < TX_BATCH_MAX && total < TX_BATCH_BYTES; n++) {
        int need = 0;
        tx_item *it = next_record(c, &ops[n_seal], &need);
        if (!it)
            break;
        if (need)
            sealing[n_seal++] = it;
        if (tail)
            tail->next = it;
        else
            head = it;
        tail = it;
        total += it->wire;
    }
    if (c->state == C_CLOSING) { /* a seal failed: the batch never leaves */
        for (unsigned i = 0; i < n_seal; i++)
            sodium_memzero(&ops[i], sizeof ops[i]);
        for (tx_item *it = head; it; it = it->next)
            if (!it->sealed)
                reject(t, NET_REJECT_UNREACHABLE);
        free_items(head);
        return;
    }
    if (!head)
        return;
    c->tx_busy = 1;
    if (n_seal) {
        pthread_mutex_unlock(&t->mtx);
        for (unsigned i = 0; i < n_seal; i++) {
            tx_item *it = sealing[i];
            net_channel_crypt(&ops[i], it->buf + 4);
            size_t rec_len = it->wire - 4;
            if (it->corrupt) /* faults: one byte after the record header; the peer must refuse it */
                it->buf[4 + NET_CHANNEL_HEADER_SIZE +
                        it->corrupt % (rec_len - NET_CHANNEL_HEADER_SIZE)] ^= 0x20;
        }
        pthread_mutex_lock(&t->mtx);
        if (c->state == C_CLOSING) {
            for (tx_item *it = head; it; it = it->next)
                if (!it->sealed)
                    reject(t, NET_REJECT_UNREACHABLE);
            free_items(head);
            c->tx_busy = 0;
            maybe_bury(c);
            return;
        }
    }
    c->tx_cur = head;
    c->tx_off = 0;
    c->tx_total = total;
    tx_arm(c);
}

static void tx_cb(void *arg)
{
    conn *c = arg;
    net_transport *t = c->t;
    pthread_mutex_lock(&t->mtx);
    c->tx_busy = 0;
    int rv = nng_aio_result(c->tx_aio);
    if (c->state == C_CLOSING || rv != 0) {
        for (tx_item *it = c->tx_cur; it; it = it->next)
            if (!it->sealed)
                reject(t, NET_REJECT_UNREACHABLE);
        free_items(c->tx_cur);
        c->tx_cur = NULL;
        if (c->state == C_CLOSING)
            maybe_bury(c);
        else
            conn_close(c);
        pthread_mutex_unlock(&t->mtx);
        return;
    }
    c->tx_off += nng_aio_count(c->tx_aio);
    c->active_us = now_us();
    if (c->tx_off < c->tx_total) { /* short write: send the rest */
        tx_arm(c);
        pthread_mutex_unlock(&t->mtx);
        return;
    }
    for (tx_item *it = c->tx_cur; it; it = it->next)
        if (!it->sealed) {
            t->stats.frames_sent++;
            t->stats.bytes_sent += it->len;
        }
    free_items(c->tx_cur);
    c->tx_cur = NULL;
    pump(c);
    pthread_mutex_unlock(&t->mtx);
}

/* Sealing a batch costs ~1 ms per MiB: net_transport_send leaves a large
 * frame to an NNG thread (kick) instead of sealing it on the caller's
 * thread, which is the event loop that encodes and decodes the frames
 * (perf, bench allreduce: 4% of all cycles were seals on the event loop).
 * A small frame is sealed at once: the kick is two thread hops (NNG's
 * timer thread, then a task thread), which on a loaded host cost more than
 * sealing a few KiB (bench_net, 256 B frames: 4.3k frames/s kicked). */
#define KICK_MIN_BYTES (64u * 1024u)
static void kick(conn *c)
{
    if (c->tx_busy || c->kick_busy || c->state != C_OPEN)
        return;
    c->kick_busy = 1;
    /* Straight to a task thread: begin + finish, as a provider completes
     * an aio. (nng_sleep_aio(0) took NNG 1.5.2's timer thread, which polls
     * the clock until the millisecond of an aio due "now" has passed: 3% of
     * an agent's cycles, perf of 2 mixing agents, nng:aio:expire.) */
    if (nng_aio_begin(c->kick_aio))
        nng_aio_finish(c->kick_aio, 0);
    else
        c->kick_busy = 0; /* stopped: the transport is closing */
}

static void kick_cb(void *arg)
{
    conn *c = arg;
    net_transport *t = c->t;
    pthread_mutex_lock(&t->mtx);
    c->kick_busy = 0;
    if (c->state == C_CLOSING)
        maybe_bury(c);
    else
        pump(c);
    pthread_mutex_unlock(&t->mtx);
}

/* Socket options of every link (they fail harmlessly on ipc://). Keepalive
 * finds a peer that vanished without a FIN. TCP_NODELAY: NNG 1.5.2's
 * stream dialers and listeners leave Nagle's algorithm on, so a record
 * whose last segment is short waited for the ACK of the one before, which
 * the receiver delays (bench_net, 256 B frames in batches of 8: 26k
 * frames/s with Nagle, 241k without); murmur writes whole records, never
 * dribbles, so Nagle only adds latency. */
static void stream_options(nng_stream *s)
{
    nng_stream_set_bool(s, NNG_OPT_TCP_KEEPALIVE, true);
    nng_stream_set_bool(s, NNG_OPT_TCP_NODELAY, true);
}

static void dial_cb(void *arg)
{
    conn *c = arg;
    net_transport *t = c->t;
    pthread_mutex_lock(&t->mtx);
    c->dial_busy = 0;
    int rv = nng_aio_result(c->dial_aio);
    if (rv == 0)
        c->s = nng_aio_get_output(c->dial_aio, 0);
    if (c->state == C_CLOSING) {
        if (c->s)
            nng_stream_close(c->s);
        maybe_bury(c);
        pthread_mutex_unlock(&t->mtx);
        return;
    }
    if (rv != 0) {
        t->stats.dial_failures++;
        conn_close(c);
        pthread_mutex_unlock(&t->mtx);
        return;
    }
    gossip_time_us now = now_us();
    c->active_us = now;
    stream_options(c->s);
    if (channel_for(c, 1, now) || take_handshake(c)) {
        conn_close(c);
        pthread_mutex_unlock(&t->mtx);
        return;
    }
    c->state = C_HANDSHAKE;
    rx_arm(c);
    pump(c);
    pthread_mutex_unlock(&t->mtx);
}

/* Start dialing addr; the caller holds the mutex. */
static int conn_dial(net_transport *t, const char *addr, uint64_t expect, conn **out)
{
    conn *c;
    int rc = conn_alloc(t, &c);
    if (rc)
        return rc;
    c->dialed = 1;
    c->expect = expect;
    c->state = C_DIALING;
    snprintf(c->addr, sizeof c->addr, "%s", addr);
    char host[GOSSIP_ADDR_MAX];
    host_of(addr, host, sizeof host);
    c->pen_key = net_penalty_key(host);
    if (nng_stream_dialer_alloc(&c->dialer, addr) != 0) {
        c->dialer = NULL;
        c->state = C_CLOSING; /* bad url: not a failure of the peer */
        maybe_bury(c);
        return NET_EINVAL;
    }
    t->stats.conns_dialed++;
    nng_aio_set_timeout(c->dial_aio, NET_TRANSPORT_DIAL_TIMEOUT_MS);
    c->dial_busy = 1;
    nng_stream_dialer_dial(c->dialer, c->dial_aio);
    *out = c;
    return NET_OK;
}

/* ---- accepting ------------------------------------------------------- */

static void remote_host(nng_stream *s, char *out, size_t cap)
{
    nng_sockaddr sa;
    if (nng_stream_get_addr(s, NNG_OPT_REMADDR, &sa) != 0) {
        snprintf(out, cap, "unknown");
    } else if (sa.s_family == NNG_AF_INET) {
        const uint8_t *a = (const uint8_t *)&sa.s_in.sa_addr; /* network order */
        snprintf(out, cap, "%u.%u.%u.%u", a[0], a[1], a[2], a[3]);
    } else if (sa.s_family == NNG_AF_INET6) {
        size_t n = 0;
        for (int i = 0; i < 16 && n + 3 < cap; i++)
            n += (size_t)snprintf(out + n, cap - n, "%02x", sa.s_in6.sa_addr[i]);
    } else {
        snprintf(out, cap, "local");
    }
}

/* An accepted connection still in its handshake. */
static int unauthenticated_in(const conn *c)
{
    return !c->dialed && c->state == C_HANDSHAKE;
}

/* Make room for one more unauthenticated inbound connection from the host
 * `key`, or say why not: -1 (room, *pressure set when more than half of
 * the pool is in use), or NET_REJECT_HANDSHAKE_LIMIT when that host already
 * holds handshakes_per_host_max of them. The pool is separate from the
 * authenticated links and from our own dials, so idle sockets cannot keep
 * peers or our dials out. When the pool is full the oldest unauthenticated
 * connection is closed (as a SYN cache does); under pressure, those older
 * than handshake_pressure_ms are closed too, and newcomers get that
 * shorter deadline. */
static int handshake_room(net_transport *t, uint64_t key, gossip_time_us now, int *pressure)
{
    uint32_t in_pool = 0, from_host = 0;
    conn *oldest = NULL;
    for (conn *c = t->conns; c; c = c->next) {
        if (!unauthenticated_in(c))
            continue;
        in_pool++;
        from_host += c->pen_key == key;
        if (!oldest || c->born_us < oldest->born_us)
            oldest = c;
    }
    if (from_host >= t->cfg.handshakes_per_host_max)
        return NET_REJECT_HANDSHAKE_LIMIT;
    if (in_pool >= t->cfg.handshakes_max && oldest) {
        reject(t, NET_REJECT_HANDSHAKE_LIMIT);
        conn_close(oldest);
        in_pool--;
    }
    *pressure = 2 * (in_pool + 1) > t->cfg.handshakes_max;
    if (*pressure) {
        gossip_time_us limit = (gossip_time_us)t->cfg.handshake_pressure_ms * 1000u;
        for (conn *c = t->conns; c;) {
            conn *n = c->next; /* conn_close may bury c */
            if (unauthenticated_in(c) && now > c->born_us && now - c->born_us >= limit) {
                reject(t, NET_REJECT_HANDSHAKE_LIMIT);
                conn_close(c);
            }
            c = n;
        }
    }
    return -1;
}

static void accept_arm(net_transport *t)
{
    t->accept_busy = 1;
    nng_stream_listener_accept(t->listener, t->accept_aio);
}

static void accept_cb(void *arg)
{
    net_transport *t = arg;
    pthread_mutex_lock(&t->mtx);
    t->accept_busy = 0;
    int rv = nng_aio_result(t->accept_aio);
    if (t->accept_sleeping) { /* a pause after an accept error ended */
        t->accept_sleeping = 0;
        if (!t->closing)
            accept_arm(t);
        pthread_mutex_unlock(&t->mtx);
        return;
    }
    nng_stream *s = rv == 0 ? nng_aio_get_output(t->accept_aio, 0) : NULL;
    if (t->closing) {
        if (s)
            nng_stream_free(s);
        pthread_mutex_unlock(&t->mtx);
        return;
    }
    if (rv != 0) {
        /* Out of descriptors or similar: pause 100 ms rather than spin. */
        t->accept_sleeping = 1;
        t->accept_busy = 1;
        nng_sleep_aio(100, t->accept_aio);
        pthread_mutex_unlock(&t->mtx);
        return;
    }
    t->stats.conns_accepted++;
    gossip_time_us now = now_us();
    char host[GOSSIP_ADDR_MAX];
    remote_host(s, host, sizeof host);
    uint64_t key = net_penalty_key(host);
    conn *c = NULL;
    int cause = -1, pressure = 0;
    if (net_penalty_check(t->penalty, key, now) == NET_EBLOCKED)
        cause = NET_REJECT_CUT_OFF;
    else
        cause = handshake_room(t, key, now, &pressure);
    if (cause >= 0 || conn_alloc(t, &c) != NET_OK) {
        if (cause >= 0)
            reject(t, cause);
        nng_stream_close(s);
        nng_stream_free(s);
    } else {
        c->s = s;
        c->pen_key = key;
        stream_options(s);
        c->state = C_HANDSHAKE;
        if (channel_for(c, 0, now) != NET_OK) {
            conn_close(c);
        } else {
            if (pressure)
                net_channel_limit_deadline(
                    c->ch, now + (gossip_time_us)t->cfg.handshake_pressure_ms * 1000u);
            rx_arm(c);
        }
    }
    accept_arm(t);
    pthread_mutex_unlock(&t->mtx);
}

/* ---- housekeeping ------------------------------------------------------ */

/* Close open connections that moved no byte for idle_timeout_ms. */
static void close_idle(net_transport *t, gossip_time_us now)
{
    gossip_time_us idle_us = (gossip_time_us)t->cfg.idle_timeout_ms * 1000u;
    for (conn *c = t->conns; c;) {
        conn *n = c->next; /* conn_close may bury c */
        if (c->state == C_OPEN && !c->tx_busy && !c->q_head && !c->park_buf && now > c->active_us &&
            now - c->active_us >= idle_us)
            conn_close(c);
        c = n;
    }
}

static int send_now(net_transport *t, uint64_t to, const char *addr, const uint8_t *frame,
                    size_t len, uint32_t corrupt);

/* net/faults: how long the housekeeper may sleep before a held frame is due. */
static uint64_t held_wait_us(net_transport *t, uint64_t wait_us)
{
    net_faults *f = atomic_load(&t->faults);
    if (!f)
        return wait_us;
    gossip_time_us due = net_faults_next_due(f), now = now_us();
    if (due == GOSSIP_TIME_NEVER)
        return wait_us;
    return due <= now ? 0 : (due - now < wait_us ? due - now : wait_us);
}

/* net/faults: send the held frames that are due (without t->mtx). */
static void send_held(net_transport *t)
{
    net_faults *f = atomic_load(&t->faults);
    net_fault_held *h;
    while (f && net_faults_take_due(f, now_us(), &h)) {
        send_now(t, h->to, h->to ? NULL : h->addr, h->frame, h->len, h->corrupt);
        net_faults_held_free(h);
    }
}

static void *housekeeper(void *arg)
{
    net_transport *t = arg;
    /* Scan for idle links four times per idle timeout, at most once a second. */
    uint64_t scan_ms = t->cfg.idle_timeout_ms / 4u;
    if (scan_ms > 1000u)
        scan_ms = 1000u;
    if (scan_ms < 10u)
        scan_ms = 10u;
    pthread_mutex_lock(&t->mtx);
    for (;;) {
        if (!t->graveyard && !t->stop) {
            uint64_t wait_us = held_wait_us(t, scan_ms * 1000u);
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            uint64_t ns = (uint64_t)ts.tv_nsec + wait_us * 1000u;
            ts.tv_sec += (time_t)(ns / 1000000000u);
            ts.tv_nsec = (long)(ns % 1000000000u);
            pthread_cond_timedwait(&t->cv, &t->mtx, &ts);
        }
        if (!t->closing && t->cfg.idle_timeout_ms)
            close_idle(t, now_us());
        conn *dead = t->graveyard;
        t->graveyard = NULL;
        int stop = t->stop;
        int idle = t->n_conns == 0;
        pthread_mutex_unlock(&t->mtx);
        send_held(t);
        while (dead) {
            conn *n = dead->next;
            conn_free(dead);
            dead = n;
        }
        pthread_mutex_lock(&t->mtx);
        if (idle || t->n_conns == 0)
            pthread_cond_broadcast(&t->idle_cv);
        if (stop && !t->graveyard)
            break;
    }
    pthread_mutex_unlock(&t->mtx);
    return NULL;
}

/* ---- public API -------------------------------------------------------- */

/* A private copy of an allow-list; never NULL on success, even for 0 keys. */
static uint8_t *allow_copy(const uint8_t *allow, size_t n)
{
    uint8_t *copy = malloc(n ? n * NET_PUBLIC_KEY_SIZE : 1);
    if (copy && n)
        memcpy(copy, allow, n * NET_PUBLIC_KEY_SIZE);
    return copy;
}

int net_transport_create(net_transport **out, const net_transport_config *cfg)
{
    if (!out || !cfg || !cfg->self || cfg->self->node_id == 0)
        return NET_EINVAL;
    if ((!cfg->network_key && !cfg->network_keys_n) || cfg->network_keys_n > NET_CHANNEL_KEYS_MAX ||
        (cfg->network_keys_n && !cfg->network_keys))
        return NET_EINVAL;
    *out = NULL;
    if (cfg->frame_max > GOSSIP_FRAME_MAX || cfg->allow_n > NET_CHANNEL_ALLOW_MAX ||
        (cfg->allow_n && !cfg->allow) || cfg->conns_max > NET_TRANSPORT_CONNS_MAX ||
        cfg->handshakes_max > NET_TRANSPORT_CONNS_MAX)
        return NET_EINVAL;
    if (net_init() != NET_OK)
        return NET_EIO;
    net_transport *t = calloc(1, sizeof *t);
    if (!t)
        return NET_ENOMEM;
    t->pipe_fd[0] = t->pipe_fd[1] = -1;
    t->cfg = *cfg;
    t->cfg.self = NULL;
    t->cfg.network_key = NULL;
    t->cfg.network_keys = NULL;
    t->cfg.allow = NULL;
    if (!t->cfg.frame_max)
        t->cfg.frame_max = GOSSIP_FRAME_MAX;
    if (!t->cfg.conns_max)
        t->cfg.conns_max = NET_TRANSPORT_CONNS_DEFAULT;
    if (!t->cfg.handshakes_max)
        t->cfg.handshakes_max = NET_TRANSPORT_HANDSHAKES_DEFAULT;
    if (!t->cfg.handshakes_per_host_max)
        t->cfg.handshakes_per_host_max = NET_TRANSPORT_HANDSHAKES_PER_HOST_DEFAULT;
    if (!t->cfg.handshake_pressure_ms)
        t->cfg.handshake_pressure_ms = NET_TRANSPORT_HANDSHAKE_PRESSURE_DEFAULT_MS;
    if (!t->cfg.queue_frames_max)
        t->cfg.queue_frames_max = NET_TRANSPORT_QUEUE_FRAMES_DEFAULT;
    if (!t->cfg.queue_bytes_max)
        t->cfg.queue_bytes_max = NET_TRANSPORT_QUEUE_BYTES_DEFAULT;
    if (!t->cfg.inbox_frames_max)
        t->cfg.inbox_frames_max = NET_TRANSPORT_INBOX_FRAMES_DEFAULT;
    if (!t->cfg.inbox_bytes_max)
        t->cfg.inbox_bytes_max = NET_TRANSPORT_INBOX_BYTES_DEFAULT;
    if (!t->cfg.dial_backoff_min_ms)
        t->cfg.dial_backoff_min_ms = NET_TRANSPORT_BACKOFF_MIN_DEFAULT_MS;
    if (!t->cfg.dial_backoff_max_ms)
        t->cfg.dial_backoff_max_ms = NET_TRANSPORT_BACKOFF_MAX_DEFAULT_MS;
    if (!t->cfg.idle_timeout_ms)
        t->cfg.idle_timeout_ms = NET_TRANSPORT_IDLE_DEFAULT_MS;
    if (t->cfg.dial_backoff_max_ms < t->cfg.dial_backoff_min_ms)
        t->cfg.dial_backoff_max_ms = t->cfg.dial_backoff_min_ms;
    t->self = *cfg->self;
    if (cfg->network_keys_n) {
        memcpy(t->keys, cfg->network_keys, cfg->network_keys_n * NET_NETWORK_KEY_SIZE);
        t->n_keys = cfg->network_keys_n;
    } else {
        memcpy(t->keys[0], cfg->network_key, NET_NETWORK_KEY_SIZE);
        t->n_keys = 1;
    }
    int rc = NET_ENOMEM;
    if (cfg->allow) {
        /* Copied even when empty: an empty list admits nobody. */
        if (!(t->allow = allow_copy(cfg->allow, cfg->allow_n)))
            goto fail;
        t->allow_n = cfg->allow_n;
    }
    t->book = calloc(NET_TRANSPORT_BOOK_MAX, sizeof *t->book);
    t->inbox = calloc(t->cfg.inbox_frames_max, sizeof *t->inbox);
    if (!t->book || !t->inbox)
        goto fail;
    if ((rc = net_penalty_create(&t->penalty, &cfg->penalty)) != NET_OK ||
        (rc = net_seen_create(&t->seen, NET_SEEN_DEFAULT)) != NET_OK)
        goto fail;
    rc = NET_EIO;
    if (pipe(t->pipe_fd) != 0)
        goto fail;
    for (int i = 0; i < 2; i++) {
        int fl = fcntl(t->pipe_fd[i], F_GETFL);
        fcntl(t->pipe_fd[i], F_SETFL, fl | O_NONBLOCK);
        fcntl(t->pipe_fd[i], F_SETFD, FD_CLOEXEC);
    }
    pthread_mutex_init(&t->mtx, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&t->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_cond_init(&t->idle_cv, NULL);
    if (nng_aio_alloc(&t->accept_aio, accept_cb, t) != 0)
        goto fail_sync;
    if (pthread_create(&t->housekeeper, NULL, housekeeper, t) != 0)
        goto fail_sync;
    t->housekeeper_started = 1;
    *out = t;
    return NET_OK;
fail_sync:
    nng_aio_free(t->accept_aio);
    pthread_cond_destroy(&t->idle_cv);
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mtx);
fail:
    if (t->pipe_fd[0] >= 0)
        close(t->pipe_fd[0]);
    if (t->pipe_fd[1] >= 0)
        close(t->pipe_fd[1]);
    net_penalty_destroy(t->penalty);
    net_seen_destroy(t->seen);
    free(t->inbox);
    free(t->book);
    free(t->allow);
    net_identity_wipe(&t->self);
    sodium_memzero(t->keys, sizeof t->keys);
    free(t);
    return rc;
}

void net_transport_destroy(net_transport *t)
{
    if (!t)
        return;
    pthread_mutex_lock(&t->mtx);
    t->closing = 1;
    for (conn *c = t->conns; c;) {
        conn *n = c->next; /* conn_close may move c to the graveyard */
        conn_close(c);
        c = n;
    }
    pthread_mutex_unlock(&t->mtx);
    if (t->listener)
        nng_stream_listener_close(t->listener);
    nng_aio_stop(t->accept_aio); /* waits for a running accept callback */
    pthread_mutex_lock(&t->mtx);
    while (t->n_conns || t->graveyard)
        pthread_cond_wait(&t->idle_cv, &t->mtx);
    t->stop = 1;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mtx);
    pthread_join(t->housekeeper, NULL);
    nng_aio_free(t->accept_aio);
    if (t->listener)
        nng_stream_listener_free(t->listener);
    for (uint32_t i = 0; i < t->in_count; i++)
        buf_free(t->inbox[(t->in_head + i) % t->cfg.inbox_frames_max].buf);
    close(t->pipe_fd[0]);
    close(t->pipe_fd[1]);
    pthread_cond_destroy(&t->idle_cv);
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mtx);
    net_penalty_destroy(t->penalty);
    net_seen_destroy(t->seen);
    net_faults_destroy(atomic_load(&t->faults));
    free(t->inbox);
    free(t->book);
    free(t->allow);
    net_identity_wipe(&t->self);
    sodium_memzero(t->keys, sizeof t->keys);
    free(t);
}

int net_transport_listen(net_transport *t, const char *url, char *bound, size_t cap)
{
    if (!t || !url || (!bound && cap))
        return NET_EINVAL;
    pthread_mutex_lock(&t->mtx);
    int busy = t->listener != NULL || t->closing;
    pthread_mutex_unlock(&t->mtx);
    if (busy)
        return NET_ESTATE;
    nng_stream_listener *l;
    if (nng_stream_listener_alloc(&l, url) != 0)
        return NET_EINVAL;
    if (nng_stream_listener_listen(l) != 0) {
        nng_stream_listener_free(l);
        return NET_EIO;
    }
    char addr[GOSSIP_ADDR_MAX];
    int n;
    int port = 0;
    if (!strncmp(url, "tcp", 3) &&
        nng_stream_listener_get_int(l, NNG_OPT_TCP_BOUND_PORT, &port) == 0) {
        char host[GOSSIP_ADDR_MAX];
        host_of(url, host, sizeof host);
        n = snprintf(addr, sizeof addr, "tcp://%s:%d", host, port);
    } else {
        n = snprintf(addr, sizeof addr, "%s", url);
    }
    if (n < 0 || (size_t)n >= sizeof addr || (bound && (size_t)n >= cap)) {
        nng_stream_listener_free(l);
        return NET_ESPACE;
    }
    if (bound)
        memcpy(bound, addr, (size_t)n + 1);
    pthread_mutex_lock(&t->mtx);
    t->listener = l;
    accept_arm(t);
    pthread_mutex_unlock(&t->mtx);
    return NET_OK;
}

int net_transport_set_addr(net_transport *t, uint64_t id, const char *addr)
{
    if (!t || !id || !addr || strlen(addr) >= GOSSIP_ADDR_MAX)
        return NET_EINVAL;
    pthread_mutex_lock(&t->mtx);
    int rc = book_put(t, id, addr) ? NET_OK : NET_EFULL;
    pthread_mutex_unlock(&t->mtx);
    return rc;
}

/* Open links plus our own dials in progress: what conns_max bounds.
 * Accepted connections still in their handshake are not counted (they
 * have their own pool), so they cannot keep us from dialing. */
static uint32_t links_in_use(const net_transport *t)
{
    uint32_t n = 0;
    for (const conn *c = t->conns; c; c = c->next)
        n += c->state == C_OPEN || (c->dialed && c->state != C_CLOSING);
    return n;
}

/* An open connection to id, else one being set up for it; NULL if none. */
static conn *find_conn(net_transport *t, uint64_t id, const char *addr)
{
    conn *pending = NULL;
    /* The link that carried our frames to id keeps carrying them while it
     * lives, so that one sender's frames arrive in order even when both
     * peers dialed each other (the allreduce ring needs it): two sockets
     * are read by two aios, and nothing orders frames across them. */
    conn *sticky = NULL;
    for (conn *c = t->conns; id && c && !sticky; c = c->next)
        if (c->carried && c->state != C_CLOSING &&
            ((c->peer == id && c->state == C_OPEN) || (c->dialed && c->expect == id)))
            sticky = c;
    /* ... unless another open link claims id from another host: two
     * processes hold one key (a duplicate identity, gossip/node refuses the
     * newcomer). Frames then go where they did before stickiness (the first
     * open link), so the newcomer hears the answers that tell it so rather
     * than nothing at all. */
    for (conn *c = t->conns; sticky && c; c = c->next)
        if (c != sticky && c->state == C_OPEN && c->peer == id && sticky->state == C_OPEN &&
            c->remote_key != sticky->remote_key)
            sticky = NULL;
    if (sticky)
        return sticky;
    for (conn *c = t->conns; c; c = c->next) {
        if (c->state == C_CLOSING)
            continue;
        if (id && c->peer == id && c->state == C_OPEN)
            return c;
        if (c->dialed && !pending &&
            ((id && c->expect == id) || (!id && addr && !strcmp(c->addr, addr))))
            pending = c;
    }
    return pending;
}

static tx_item *item_alloc(size_t cap)
{
    tx_item *it = buf_alloc(sizeof *it + 4 + NET_CHANNEL_OVERHEAD + cap);
    if (!it)
        return NULL;
    it->next = NULL;
    it->len = 0;
    it->sealed = 0;
    it->corrupt = 0;
    it->cap = cap;
    return it;
}

static int send_item(net_transport *t, uint64_t to, const char *addr, tx_item *it, size_t len,
                     uint32_t corrupt);

/* Queue a copy of a frame now (net_transport_send after the faults decided). */
static int send_now(net_transport *t, uint64_t to, const char *addr, const uint8_t *frame,
                    size_t len, uint32_t corrupt)
{
    tx_item *it = item_alloc(len);
    if (!it)
        return NET_ENOMEM;
    if (len)
        memcpy(it->buf + 4 + NET_CHANNEL_HEADER_SIZE, frame, len);
    return send_item(t, to, addr, it, len, corrupt);
}

/* Queue the frame in `it` (len bytes at its frame area); takes it. */
static int send_item(net_transport *t, uint64_t to, const char *addr, tx_item *it, size_t len,
                     uint32_t corrupt)
{
    it->next = NULL;
    it->len = len;
    it->sealed = 0;
    it->corrupt = corrupt;
    int rc = NET_OK;
    pthread_mutex_lock(&t->mtx);
    if (t->closing) {
        rc = NET_ECLOSED;
        goto drop;
    }
    conn *c = find_conn(t, to, addr);
    if (!c && to && !addr) {
        book_entry *e = book_by_id(t, to);
        if (!e) {
            rc = NET_ENOTFOUND;
            goto drop;
        }
        addr = e->addr;
    }
    if (!c && !to) {
        /* A seed may already be connected under its node id. */
        book_entry *e = book_by_addr(t, addr);
        if (e && e->id)
            c = find_conn(t, e->id, NULL);
    }
    if (!c) {
        gossip_time_us now = now_us();
        book_entry *e = book_put(t, to, addr);
        if (!e) {
            rc = NET_EFULL;
            goto drop;
        }
        char where[GOSSIP_ADDR_MAX];
        snprintf(where, sizeof where, "%s", e->addr); /* addr may point into the book */
        char host[GOSSIP_ADDR_MAX];
        host_of(where, host, sizeof host);
        if (now < e->next_dial_us) {
            reject(t, NET_REJECT_UNREACHABLE);
            rc = NET_EAGAIN;
            goto drop;
        }
        if (net_penalty_check(t->penalty, net_penalty_key(host), now) == NET_EBLOCKED) {
            reject(t, NET_REJECT_CUT_OFF);
            rc = NET_EBLOCKED;
            goto drop;
        }
        if (links_in_use(t) >= t->cfg.conns_max) {
            reject(t, NET_REJECT_CONN_LIMIT);
            rc = NET_EFULL;
            goto drop;
        }
        rc = conn_dial(t, where, to, &c);
        if (rc)
            goto drop;
    }
    if (c->q_frames >= t->cfg.queue_frames_max || c->q_bytes + len > t->cfg.queue_bytes_max) {
        reject(t, NET_REJECT_QUEUE_FULL);
        rc = NET_EFULL;
        goto drop;
    }
    if (c->q_tail)
        c->q_tail->next = it;
    else
        c->q_head = it;
    c->q_tail = it;
    c->q_frames++;
    c->q_bytes += len;
    c->carried = 1;
    if (len >= KICK_MIN_BYTES)
        kick(c);
    else
        pump(c);
    pthread_mutex_unlock(&t->mtx);
    return NET_OK;
drop:
    pthread_mutex_unlock(&t->mtx);
    buf_free(it);
    return rc;
}

/* net/faults: decide the frame's fate; delayed copies wait in the faults'
 * held queue until the housekeeper sends them. A lost frame is NET_OK, as
 * a frame lost by the network would be. */
static int send_faulty(net_transport *t, net_faults *f, uint64_t to, const char *addr,
                       const uint8_t *frame, size_t len)
{
    uint64_t peer = to;
    if (!peer) {
        pthread_mutex_lock(&t->mtx);
        book_entry *e = book_by_addr(t, addr);
        peer = e ? e->id : 0;
        pthread_mutex_unlock(&t->mtx);
    }
    gossip_time_us now = now_us();
    net_fault_verdict v;
    net_faults_send(f, peer, len, now, &v);
    int rc = NET_OK;
    for (int i = 0; i < v.copies; i++) {
        if (v.due_us[i] <= now) {
            rc = send_now(t, to, addr, frame, len, v.corrupt[i]);
        } else if (net_faults_hold(f, to, addr, frame, len, v.due_us[i], v.corrupt[i]) == NET_OK) {
            pthread_mutex_lock(&t->mtx);
            pthread_cond_signal(&t->cv); /* the housekeeper may sleep past this frame */
            pthread_mutex_unlock(&t->mtx);
        }
    }
    return rc;
}

int net_transport_send(net_transport *t, uint64_t to, const char *addr, const uint8_t *frame,
                       size_t len)
{
    if (!t || (!to && !addr) || (!frame && len) || (addr && strlen(addr) >= GOSSIP_ADDR_MAX) ||
        to == t->self.node_id)
        return NET_EINVAL;
    if (len > t->cfg.frame_max)
        return NET_ETOOBIG;
    net_faults *f = atomic_load(&t->faults);
    return f ? send_faulty(t, f, to, addr, frame, len) : send_now(t, to, addr, frame, len, 0);
}

uint8_t *net_transport_frame_alloc(size_t cap)
{
    if (cap > GOSSIP_FRAME_MAX)
        return NULL;
    tx_item *it = item_alloc(cap);
    return it ? it->buf + 4 + NET_CHANNEL_HEADER_SIZE : NULL;
}

void net_transport_frame_free(uint8_t *frame)
{
    if (frame)
        buf_free(item_of_frame(frame));
}

int net_transport_send_frame(net_transport *t, uint64_t to, const char *addr, uint8_t *frame,
                             size_t len)
{
    if (!frame)
        return NET_EINVAL;
    tx_item *it = item_of_frame(frame);
    int rc = NET_OK;
    if (!t || (!to && !addr) || (addr && strlen(addr) >= GOSSIP_ADDR_MAX) ||
        to == t->self.node_id || len > it->cap)
        rc = NET_EINVAL;
    else if (len > t->cfg.frame_max)
        rc = NET_ETOOBIG;
    if (rc) {
        buf_free(it);
        return rc;
    }
    net_faults *f = atomic_load(&t->faults);
    if (f) { /* faults copy or hold frames: the copying path */
        rc = send_faulty(t, f, to, addr, frame, len);
        buf_free(it);
        return rc;
    }
    return send_item(t, to, addr, it, len, 0);
}

int net_transport_faults_enable(net_transport *t, uint64_t seed, net_faults **out)
{
    if (!t || !out)
        return NET_EINVAL;
    pthread_mutex_lock(&t->mtx);
    int rc = NET_OK;
    net_faults *f = atomic_load(&t->faults);
    if (!f && (rc = net_faults_create(&f, seed)) == NET_OK)
        atomic_store(&t->faults, f);
    pthread_mutex_unlock(&t->mtx);
    *out = f;
    return rc;
}

/* Move parked frames into the inbox while there is room, and let their
 * connections read again. */
static void resume_parked(net_transport *t)
{
    for (conn *c = t->conns; c && t->n_parked; c = c->next) {
        if (!c->park_buf || !inbox_has_room(t, c->park_len))
            continue;
        inbox_push(t, c->peer, c->park_buf, c->park_data, c->park_len);
        c->park_buf = NULL;
        t->n_parked--;
        if (c->state != C_CLOSING)
            rx_arm(c);
    }
}

int net_transport_recv(net_transport *t, net_message *msg)
{
    if (!t || !msg)
        return NET_EINVAL;
    pthread_mutex_lock(&t->mtx);
    if (t->in_count == 0) {
        pipe_drain(t);
        t->woken = 0;
        pthread_mutex_unlock(&t->mtx);
        return NET_EAGAIN;
    }
    inbox_item *it = &t->inbox[t->in_head];
    net_faults *f = atomic_load(&t->faults);
    if (f && net_faults_recv(f, it->from)) { /* partitioned: as if never received */
        buf_free(it->buf);
        it->buf = NULL;
        t->in_head = (t->in_head + 1) % t->cfg.inbox_frames_max;
        t->in_count--;
        t->in_bytes -= it->len;
        if (t->n_parked)
            resume_parked(t);
        pthread_mutex_unlock(&t->mtx);
        return net_transport_recv(t, msg);
    }
    msg->from = it->from;
    msg->data = it->data;
    msg->len = it->len;
    msg->owned = it->buf;
    t->in_head = (t->in_head + 1) % t->cfg.inbox_frames_max;
    t->in_count--;
    t->in_bytes -= it->len;
    if (t->n_parked)
        resume_parked(t);
    if (!t->in_count && !t->woken)
        pipe_drain(t);
    pthread_mutex_unlock(&t->mtx);
    return NET_OK;
}

void net_message_release(net_message *msg)
{
    if (!msg)
        return;
    buf_free(msg->owned);
    msg->owned = NULL;
    msg->data = NULL;
    msg->len = 0;
}

int net_transport_wait(net_transport *t, int timeout_ms)
{
    if (!t)
        return NET_EINVAL;
    gossip_time_us deadline =
        timeout_ms < 0 ? GOSSIP_TIME_NEVER : now_us() + (gossip_time_us)timeout_ms * 1000u;
    for (;;) {
        pthread_mutex_lock(&t->mtx);
        int ready = t->in_count > 0 || t->woken;
        t->woken = 0;
        if (!ready)
            pipe_drain(t); /* no frame and no wake: any byte left is stale */
        pthread_mutex_unlock(&t->mtx);
        if (ready)
            return NET_OK;
        int wait_ms = -1;
        if (deadline != GOSSIP_TIME_NEVER) {
            gossip_time_us now = now_us();
            if (now >= deadline)
                return NET_EAGAIN;
            wait_ms = (int)((deadline - now + 999u) / 1000u);
        }
        struct pollfd pfd = {.fd = t->pipe_fd[0], .events = POLLIN};
        if (poll(&pfd, 1, wait_ms) < 0 && errno != EINTR)
            return NET_EIO;
    }
}

void net_transport_wake(net_transport *t)
{
    if (!t)
        return;
    pthread_mutex_lock(&t->mtx);
    t->woken = 1;
    pipe_signal(t);
    pthread_mutex_unlock(&t->mtx);
}

int net_transport_fd(const net_transport *t)
{
    return t ? t->pipe_fd[0] : -1;
}

int net_transport_forget(net_transport *t, uint64_t id)
{
    if (!t || !id)
        return NET_EINVAL;
    pthread_mutex_lock(&t->mtx);
    for (conn *c = t->conns; c;) {
        conn *n = c->next;
        if (c->state != C_CLOSING && (c->peer == id || c->expect == id))
            conn_close(c);
        c = n;
    }
    book_entry *e = book_by_id(t, id);
    if (e) {
        *e = t->book[--t->book_n];
    }
    pthread_mutex_unlock(&t->mtx);
    return NET_OK;
}

int net_transport_set_allow(net_transport *t, const uint8_t *allow, size_t allow_n)
{
    if (!t || allow_n > NET_CHANNEL_ALLOW_MAX || (allow_n && !allow))
        return NET_EINVAL;
    uint8_t *copy = NULL;
    if (allow && !(copy = allow_copy(allow, allow_n)))
        return NET_ENOMEM;
    pthread_mutex_lock(&t->mtx);
    uint8_t *old = t->allow;
    t->allow = copy;
    t->allow_n = copy ? allow_n : 0;
    /* Every channel, closing ones included, drops its pointer to the old
     * list before it is freed; open links of keys no longer listed close. */
    for (conn *c = t->conns; c;) {
        conn *n = c->next; /* conn_close may bury c */
        if (c->ch) {
            net_channel_set_allow(c->ch, t->allow, t->allow_n);
            const uint8_t *pk = net_channel_peer_key(c->ch);
            if (c->state == C_OPEN && pk && !net_channel_allowed(c->ch, pk)) {
                reject(t, NET_REJECT_NOT_ALLOWED);
                conn_close(c);
            }
        }
        c = n;
    }
    pthread_mutex_unlock(&t->mtx);
    free(old);
    return NET_OK;
}

static int key_in_ring(const uint8_t *keys, size_t n, const uint8_t *k)
{
    int found = 0;
    for (size_t i = 0; i < n; i++)
        found |= sodium_memcmp(keys + i * NET_NETWORK_KEY_SIZE, k, NET_NETWORK_KEY_SIZE) == 0;
    return found;
}

int net_transport_set_network_keys(net_transport *t, const uint8_t *keys, size_t n)
{
    if (!t || !keys || n == 0 || n > NET_CHANNEL_KEYS_MAX)
        return NET_EINVAL;
    pthread_mutex_lock(&t->mtx);
    /* Links under a key that left the ring close (they are re-dialed under
     * the primary); so do handshakes that have not chosen a key yet, since
     * their channel holds the old ring. */
    for (conn *c = t->conns; c;) {
        conn *n_ = c->next; /* conn_close may bury c */
        if (c->ch && c->state != C_CLOSING) {
            const uint8_t *k = net_channel_network_key(c->ch);
            if (!k || !key_in_ring(keys, n, k)) {
                if (k)
                    reject(t, NET_REJECT_KEY_RETIRED);
                conn_close(c);
            }
        }
        c = n_;
    }
    sodium_memzero(t->keys, sizeof t->keys);
    memcpy(t->keys, keys, n * NET_NETWORK_KEY_SIZE);
    t->n_keys = n;
    pthread_mutex_unlock(&t->mtx);
    return NET_OK;
}

int net_transport_connected(net_transport *t, uint64_t id)
{
    if (!t || !id)
        return 0;
    pthread_mutex_lock(&t->mtx);
    int found = 0;
    for (conn *c = t->conns; c && !found; c = c->next)
        found = c->state == C_OPEN && c->peer == id;
    pthread_mutex_unlock(&t->mtx);
    return found;
}

void net_transport_stats_get(net_transport *t, net_transport_stats *out)
{
    if (!t || !out)
        return;
    pthread_mutex_lock(&t->mtx);
    *out = t->stats;
    out->conns_open = t->n_conns;
    out->conns_auth_only = 0;
    for (conn *c = t->conns; c; c = c->next)
        out->conns_auth_only += c->state == C_OPEN && net_channel_auth_only(c->ch);
    pthread_mutex_unlock(&t->mtx);
}
