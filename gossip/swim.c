/* gossip/swim — SWIM + Lifeguard membership. Design notes in swim.h and
 * docs/MEMBERSHIP.md. */
#include "gossip/swim.h"

#include "gossip/topology.h"

#include <assert.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Defaults; docs/MEMBERSHIP.md has the full derivations.
 * - interval 1 s, timeout 0.5 s: memberlist's LAN values; the rest of the
 *   period is for the indirect round (PING_REQ, relay ping, forwarded ack).
 * - k = 3 relays: with loss q per path, all k indirect paths fail with q^k.
 * - suspicion alpha = 4, beta = 6: min = alpha*max(1, log10 N) periods gives
 *   the suspect time to hear of it and its refutation time to spread (both
 *   O(log N) gossip periods); Lifeguard starts at beta*min and falls to min
 *   as k = alpha - 2 independent confirmations arrive.
 * - retransmit lambda = 4: an update sent t = lambda*ceil(log10(N+1)) times
 *   by every member that learns it misses a given member with probability
 *   about e^-t <= (N+1)^-(0.434*lambda), so N*e^-t < 1 needs lambda > 2.3;
 *   4 leaves ~0.05 missing members per update at N = 64, and the residue is
 *   caught by the verification ping, stale-suspicion replies and sync.
 * - awareness cap 8: memberlist's; stretches timeouts at most 8-fold.
 * - sync every max(16, 2N) periods: an exchange moves ~2*N records, so the
 *   per-member, per-period cost is ~1 record whatever N (flat bytes).
 * - reconnect every 4 periods, tombstones kept 120 periods: one small ping
 *   per 4 periods while someone is dead; partitions shorter than 2 minutes
 *   heal without the seeds. */
#define DEF_MEMBERS_MAX     1024u
#define DEF_PROBE_INTERVAL  1000000u
#define DEF_PROBE_TIMEOUT   500000u
#define DEF_INDIRECT_K      3u
#define DEF_SUSPICION_MULT  4u
#define DEF_SUSPICION_MAXM  6u
#define DEF_RETRANSMIT_MULT 4u
#define DEF_AWARENESS_MAX   8u
#define DEF_SYNC_MULT       2u
#define DEF_RECONNECT       4u
#define DEF_RETENTION       120u
/* Push-pull never more often than every SYNC_PERIODS_MIN probe periods. */
#define SYNC_PERIODS_MIN 16u
/* Last-chance pings before a death, and how long to wait for their ack. */
#define VERIFY_PINGS   2u
#define VERIFY_PERIODS 2u
/* Live-set changes that bring the next push-pull forward. */
#define CHURN_SYNC_MIN 8u
/* A lone joiner resends JOIN every JOIN_RETRY_PERIODS periods. A member
 * that is not alone but has a seed whose address no live member has (a
 * seed that was not listening yet when the others met, or is down) sends
 * that seed a JOIN too, at intervals doubling up to
 * JOIN_MISSING_MAX_PERIODS: two groups that formed apart, one round the
 * seed and one without it, merge without waiting for a sync to a seed. */
#define JOIN_RETRY_PERIODS       2u
#define JOIN_MISSING_MAX_PERIODS 64u
/* A lone joiner's first retry comes after this fraction of a period, and
 * the wait doubles up to JOIN_RETRY_PERIODS periods: agents started
 * together often send their first JOIN before the seed listens (the
 * transport drops it), and should not then wait two whole periods. */
#define JOIN_FIRST_RETRY_DIV 8u
/* Transmit counts told apart by the queue's buckets (a retransmit limit is
 * lambda * ceil(log10(N + 1)) <= 4 * 5 with the defaults). */
#define GOSSIP_SWIM_TBUCKETS 64u
/* Liveness changes patched into the sorted view one by one (a binary
 * search and a move each) before a rebuild and sort is cheaper. */
#define VIEW_CHANGES_MAX 64u
/* Entries of the once-a-period limits' table at create (a power of two). */
#define LIMITS_MIN 16u

typedef struct member {
    uint64_t id;
    gossip_time_us state_at; /* when the current state began */
    uint32_t inc;            /* a free slot: the index + 1 of the next free one (free_head) */
    uint32_t queue_pos;      /* index + 1 in the piggyback queue, 0 = none */
    /* SUSPECT: index + 1 of its suspicion in s->conf; DEAD: of its
     * declarer in s->tomb; 0 = none (no memory; member_from) */
    uint32_t conf;
    uint32_t addr_off; /* its address: s->abuf + addr_off, addr_len bytes and a NUL */
    uint8_t state;     /* gossip_member_state, NONE = free slot */
    uint8_t n_confirm;
    uint8_t addr_len;
} member;

/* A suspect's suspicion: who suspects it (n_confirm of them, the newest
 * last), when it is declared dead or pinged a last time, and that ping's
 * sequence number. A handful of members are suspects at a time; the
 * deadline and the sequence number were 12 bytes in every member slot. A
 * free entry's by[0] is the index + 1 of the next free one. */
typedef struct suspicion {
    uint64_t by[GOSSIP_SWIM_CONFIRM_MAX];
    gossip_time_us deadline;
    uint32_t verify_seq; /* last-chance ping in flight, 0 = none */
} suspicion;

/* Once-a-period limits of a member (at most one of each kind a period):
 * a sync started because it was dead to us, a SYNC answered, a notice to
 * an address it moved from. An entry older than a period limits nothing,
 * as none does, so the few members limited in the last period are all the
 * table holds (the three times were 28 bytes in every member slot). */
enum { LIMIT_RECONNECT, LIMIT_SYNC_REPLY, LIMIT_NOTICE, LIMIT_KINDS };
typedef struct swim_limit {
    uint32_t key;        /* slot * LIMIT_KINDS + kind, + 1; 0 = empty */
    uint32_t notice_key; /* LIMIT_NOTICE: a hash of the address */
    gossip_time_us at;   /* when */
} swim_limit;

/* A pending update: its member's slot (stable while queued: a member
 * leaves the queue before its slot is freed) and its record's size, kept
 * equal to record_size() of the member by queue_resize, so that choosing
 * what to piggyback reads the queue alone. */
typedef struct queued {
    uint64_t id;
    uint32_t transmits;
    uint32_t slot;
    uint32_t size;
} queued;

typedef struct outmsg {
    uint64_t dest;   /* 0: seed */
    uint64_t target; /* PING / PING_REQ target */
    uint32_t seq;
    uint32_t wait_us; /* PING_REQ relay wait */
    uint8_t type;
    uint8_t seed;          /* seed index when dest == 0 (and notice == 0) */
    uint8_t notice;        /* dest == 0: notice slot + 1 (an address, not a seed) */
    uint8_t manifest_only; /* SYNC_REPLY of a refusal: our manifest, no records */
} outmsg;

typedef struct relay {
    uint64_t requester;
    uint64_t target;
    gossip_time_us deadline;
    uint32_t req_seq;
    uint32_t our_seq;
    int used;
} relay;

typedef struct refused_peer {
    uint64_t id;
    gossip_time_us at; /* when refused; 0 = free slot */
} refused_peer;

typedef struct probe {
    uint64_t target;
    gossip_time_us timeout_at;
    uint32_t seq;
    uint32_t nacks_expected;
    uint32_t nacks;
    int active, acked, indirect_sent;
} probe;

struct gossip_swim {
    const gossip_env *env;
    gossip_swim_config cfg;
    char self_addr[GOSSIP_ADDR_MAX];
    uint32_t cap; /* members_max */

    member *members; /* cap slots */
    uint32_t hw;     /* slots [0, hw) have been used */
    /* Free slots below hw, last freed first: the index + 1 of the first in
     * free_head, each free slot's `inc` the index + 1 of the next (0 ends). */
    uint32_t free_head;
    uint32_t *hash; /* hash_entry(), 0 = empty; hash_mask + 1 entries */
    uint32_t hash_mask;
    uint32_t self_slot;
    uint32_t n_suspect, n_tomb;

    /* The suspicion of each suspect, in a table of its own (the
     * suspecters' 64 bytes kept in every member slot were a third of the
     * table). Grown by doubling when every entry is taken (at most cap
     * entries). */
    suspicion *conf;
    uint32_t conf_cap, conf_free;
    /* Who declared each dead member dead (the `from` its DEAD record
     * gossips), in a table of its own for the same reason: 8 bytes in
     * every slot for the few dead. A free entry holds the index + 1 of the
     * next free one. Grown by doubling, at most cap entries. */
    uint64_t *tomb;
    uint32_t tomb_cap, tomb_free;

    /* Every member's address, packed (a short address costs its length,
     * not GOSSIP_ADDR_MAX in every slot): [0, abuf_used) holds the members'
     * addresses and abuf_garbage bytes of replaced or removed ones; sized
     * at create for members_max addresses (addr_reserve); when a new one
     * does not fit, the live ones move to a buffer of the same size, or of
     * twice it when that would leave less than an eighth of them free. */
    char *abuf;
    size_t abuf_cap, abuf_used, abuf_garbage;

    /* Once-a-period limits (swim_limit), linear probing at most half full;
     * LIMITS_MIN entries from create, entries older than a period dropped
     * before it grows. */
    swim_limit *lim;
    uint32_t lim_cap, lim_n;

    uint32_t *probe_order;
    uint32_t probe_n, probe_pos;
    probe pr;

    queued *queue;
    uint32_t queue_n;
    /* Queue entries by transmit count (the last bucket: that many or more),
     * so that the most-sent entry is found without a scan of the queue. */
    uint32_t tcount[GOSSIP_SWIM_TBUCKETS];

    outmsg outq[GOSSIP_SWIM_OUTQ_MAX];
    uint32_t out_head, out_n;

    relay relays[GOSSIP_SWIM_RELAY_MAX];

    char seeds[GOSSIP_SWIM_SEEDS_MAX][GOSSIP_ADDR_MAX];
    uint32_t n_seeds;

    uint64_t *view_ids;
    uint32_t view_n;
    uint64_t epoch;
    int view_dirty;
    uint32_t n_live; /* members ALIVE or SUSPECT, self included */
    /* Ids whose liveness changed since the view was last built (the view
     * is patched with them, not rebuilt and sorted); past VIEW_CHANGES_MAX
     * of them the next build starts over. */
    uint64_t changed[VIEW_CHANGES_MAX];
    uint32_t n_changed;

    uint32_t awareness;
    uint32_t churn; /* live-set changes since our last push-pull */
    uint32_t seq;
    int started, left;
    gossip_time_us next_probe, next_sync, next_reconnect, next_join, next_suspect;
    uint32_t join_every;           /* periods to the next JOIN to a missing seed */
    gossip_time_us join_lone_wait; /* the lone joiner's next retry wait */

    uint8_t *frame; /* every message but the full-state ones */
    size_t frame_cap;
    uint8_t *big; /* the full-state frame last polled (freed by the next poll), or NULL */
    gossip_swim_stats stats;

    /* admission */
    gossip_manifest manifest;
    refused_peer refused_peers[GOSSIP_SWIM_REFUSED_MAX];
    gossip_swim_refusal refused; /* this object's own refusal (quiet for good) */
    gossip_swim_conflict conflict;
    gossip_time_us joined_at;         /* first view with another member; 0 = never */
    int claim_refuted;                /* we refuted a claim of our id at another address */
    char claim_addr[GOSSIP_ADDR_MAX]; /* the address of the latest claim */
    uint32_t foreign_answers;         /* ACK/NACKs for sequence numbers we never used */
    gossip_time_us foreign_at;        /* when the last of them was counted (0: never) */
    gossip_time_us next_stranger_sync;
    char notice_addr[GOSSIP_SWIM_NOTICES_MAX][GOSSIP_ADDR_MAX]; /* by-address destinations */
    uint8_t notice_busy[GOSSIP_SWIM_NOTICES_MAX];               /* a frame waits for it */
    char sent_addr[GOSSIP_ADDR_MAX]; /* dest_addr last polled: a notice's, or a canonical one */
};

/* ---------------------------------------------------------------- table */

static uint32_t hash_id(uint64_t id)
{
    id ^= id >> 33;
    id *= 0xff51afd7ed558ccdULL;
    id ^= id >> 33;
    return (uint32_t)id;
}

/* An id index entry: the slot + 1 in the low 16 bits (0 = empty), the top
 * 16 bits of the id's hash above them, so that a probe past another id
 * reads no member slot (a cache miss each at scale) unless the tags match. */
#define HASH_SLOT_BITS 16u
_Static_assert(GOSSIP_MEMBERS_MAX < (1u << HASH_SLOT_BITS) - 1u, "slot + 1 fits the entry");

static uint32_t hash_entry(uint32_t h, uint32_t slot)
{
    return (h >> HASH_SLOT_BITS) << HASH_SLOT_BITS | (slot + 1);
}

static uint32_t hash_slot(uint32_t v)
{
    return (v & ((1u << HASH_SLOT_BITS) - 1u)) - 1u;
}

static member *find(const gossip_swim *s, uint64_t id)
{
    uint32_t h = hash_id(id), tag = h >> HASH_SLOT_BITS;
    for (uint32_t i = h & s->hash_mask;; i = (i + 1) & s->hash_mask) {
        uint32_t v = s->hash[i];
        if (v == 0)
            return NULL;
        if (v >> HASH_SLOT_BITS == tag && s->members[hash_slot(v)].id == id)
            return &s->members[hash_slot(v)];
    }
}

static void hash_insert(gossip_swim *s, uint64_t id, uint32_t slot)
{
    uint32_t h = hash_id(id), i = h & s->hash_mask;
    while (s->hash[i] != 0)
        i = (i + 1) & s->hash_mask;
    s->hash[i] = hash_entry(h, slot);
}

/* Backward-shift deletion (no tombstones) in a linear-probing table: the
 * entry at j, whose home slot is `home`, stays where it is after slot i was
 * emptied iff home lies cyclically in (i, j]. */
static int probe_stays(uint32_t i, uint32_t j, uint32_t home)
{
    return i <= j ? (i < home && home <= j) : (i < home || home <= j);
}

/* Linear-probing delete with backward shift (no tombstones in the hash). */
static void hash_remove(gossip_swim *s, uint64_t id)
{
    uint32_t i = hash_id(id) & s->hash_mask;
    while (s->hash[i] != 0 && s->members[hash_slot(s->hash[i])].id != id)
        i = (i + 1) & s->hash_mask;
    if (s->hash[i] == 0)
        return;
    uint32_t j = i;
    for (;;) {
        s->hash[i] = 0;
        for (;;) {
            j = (j + 1) & s->hash_mask;
            if (s->hash[j] == 0)
                return;
            uint32_t home = hash_id(s->members[hash_slot(s->hash[j])].id) & s->hash_mask;
            /* move j back to i unless its home lies cyclically in (i, j] */
            if (probe_stays(i, j, home))
                continue;
            break;
        }
        s->hash[i] = s->hash[j];
        i = j;
    }
}

static uint32_t slot_of(const gossip_swim *s, const member *m)
{
    return (uint32_t)(m - s->members);
}

static int is_live(uint8_t st)
{
    return st == GOSSIP_MEMBER_ALIVE || st == GOSSIP_MEMBER_SUSPECT;
}

static int is_tomb(uint8_t st)
{
    return st == GOSSIP_MEMBER_DEAD || st == GOSSIP_MEMBER_LEFT;
}

static gossip_time_us period_us(const gossip_swim *s)
{
    return s->cfg.probe_interval_us;
}

/* The lone joiner's next wait: double the last, at most JOIN_RETRY_PERIODS
 * periods. */
static gossip_time_us join_lone_next(const gossip_swim *s)
{
    gossip_time_us cap = JOIN_RETRY_PERIODS * period_us(s);
    gossip_time_us w = s->join_lone_wait ? 2 * s->join_lone_wait : cap;
    return w < cap ? w : cap;
}

static void queue_remove(gossip_swim *s, member *m);
static void queue_resize(gossip_swim *s, const member *m);
static size_t record_size(const member *m);

/* The side tables (suspicions, declarers) grow by doubling up to cap
 * entries; a free entry's first 8 bytes hold the index + 1 of the next
 * free one. Returns the grown table (old entries copied, the new ones
 * put on the free list in index order), or NULL when it is at cap or
 * there is no memory (counted); the old table is then untouched. */
static void *side_grow(gossip_swim *s, void *tab, uint32_t *cap_io, uint32_t *free_io, size_t elem)
{
    uint32_t old = *cap_io, cap = old ? 2 * old : 8;
    if (cap > s->cap)
        cap = s->cap;
    if (cap <= old)
        return NULL;
    uint8_t *t = gossip_alloc(s->env, (size_t)cap * elem);
    if (!t) {
        s->stats.no_memory++;
        return NULL;
    }
    if (old)
        memcpy(t, tab, (size_t)old * elem);
    gossip_free(s->env, tab);
    for (uint32_t i = cap; i > old; i--) {
        uint64_t next = *free_io;
        memcpy(t + (size_t)(i - 1) * elem, &next, sizeof next);
        *free_io = i;
    }
    *cap_io = cap;
    return t;
}

/* A suspicion entry for m (SUSPECT); 0 when memory runs out, and then
 * confirmations of that suspicion are not counted, its timeout stays at
 * the longest (slower to declare a death, never faster) and it has no
 * last-chance ping (suspect_deadline, verify_suspect). */
/* A free suspicion entry, growing the table if needed: 0, or -1 when
 * memory runs out (counted). */
static int conf_reserve(gossip_swim *s)
{
    if (s->conf_free)
        return 0;
    suspicion *t = side_grow(s, s->conf, &s->conf_cap, &s->conf_free, sizeof *t);
    if (!t)
        return -1;
    s->conf = t;
    return 0;
}

static uint32_t conf_take(gossip_swim *s)
{
    _Static_assert(offsetof(suspicion, by) == 0, "the free list's link is by[0]");
    if (conf_reserve(s) != 0)
        return 0;
    uint32_t e = s->conf_free;
    s->conf_free = (uint32_t)s->conf[e - 1].by[0];
    s->conf[e - 1].verify_seq = 0;
    return e;
}

/* The declarer entry of a member going DEAD, 0 when memory runs out
 * (its DEAD record then names us: member_from). */
static uint32_t tomb_take(gossip_swim *s)
{
    if (!s->tomb_free) {
        uint64_t *t = side_grow(s, s->tomb, &s->tomb_cap, &s->tomb_free, sizeof *t);
        if (!t)
            return 0;
        s->tomb = t;
    }
    uint32_t e = s->tomb_free;
    s->tomb_free = (uint32_t)s->tomb[e - 1];
    return e;
}

/* Give back m's side entry (its suspicion, or its declarer): called with
 * m still in the state the entry belongs to. */
static void conf_release(gossip_swim *s, member *m)
{
    if (!m->conf)
        return;
    if (m->state == GOSSIP_MEMBER_SUSPECT) {
        s->conf[m->conf - 1].by[0] = s->conf_free;
        s->conf_free = m->conf;
    } else {
        assert(m->state == GOSSIP_MEMBER_DEAD);
        s->tomb[m->conf - 1] = s->tomb_free;
        s->tomb_free = m->conf;
    }
    m->conf = 0;
}

/* m's suspicion (SUSPECT), NULL without one */
static suspicion *susp(const gossip_swim *s, const member *m)
{
    return m->conf && m->state == GOSSIP_MEMBER_SUSPECT ? &s->conf[m->conf - 1] : NULL;
}

/* The `from` of m's SUSPECT or DEAD record: the newest of its suspecters
 * (others count it as a confirmation), or who declared it dead; without a
 * side entry (no memory), ourselves, who hold it so. */
static uint64_t member_from(const gossip_swim *s, const member *m)
{
    if (m->conf && m->state == GOSSIP_MEMBER_SUSPECT)
        return s->conf[m->conf - 1].by[m->n_confirm - 1];
    if (m->conf && m->state == GOSSIP_MEMBER_DEAD)
        return s->tomb[m->conf - 1];
    return s->cfg.self_id;
}

static gossip_time_us suspicion_timeout(const gossip_swim *s, uint32_t confirmations);

/* When suspect m is pinged a last time, or declared dead after that ping;
 * without a suspicion entry (no memory), the longest timeout from the
 * start of the suspicion, and no last-chance ping. */
static gossip_time_us suspect_deadline(const gossip_swim *s, const member *m)
{
    const suspicion *e = susp(s, m);
    return e ? e->deadline : m->state_at + suspicion_timeout(s, 0);
}

static void set_state(gossip_swim *s, member *m, uint8_t st, gossip_time_us now)
{
    conf_release(s, m);
    if (m->state == GOSSIP_MEMBER_SUSPECT)
        s->n_suspect--;
    if (is_tomb(m->state))
        s->n_tomb--;
    if (is_live(m->state) != is_live(st)) {
        s->view_dirty = 1, s->churn++;
        s->n_live += is_live(st) ? 1u : (uint32_t)-1;
        if (s->n_changed < VIEW_CHANGES_MAX)
            s->changed[s->n_changed] = m->id;
        s->n_changed++; /* counts on past the array: rebuild */
    }
    m->state = st;
    queue_resize(s, m);
    m->state_at = now;
    m->n_confirm = 0;
    if (st == GOSSIP_MEMBER_SUSPECT)
        s->n_suspect++;
    if (is_tomb(st))
        s->n_tomb++;
}

/* m is dead, declared so by `from` (gossiped in its DEAD record). */
static void set_dead(gossip_swim *s, member *m, uint64_t from, gossip_time_us now)
{
    set_state(s, m, GOSSIP_MEMBER_DEAD, now);
    m->conf = tomb_take(s);
    if (m->conf)
        s->tomb[m->conf - 1] = from;
}

/* ---------------------------------------------------------------- limits */

static uint32_t limit_key(const gossip_swim *s, const member *m, unsigned kind)
{
    return slot_of(s, m) * LIMIT_KINDS + kind + 1;
}

static uint32_t limit_home(uint32_t key, uint32_t cap)
{
    return hash_id(key) & (cap - 1);
}

static swim_limit *limit_find(const gossip_swim *s, uint32_t key)
{
    for (uint32_t i = limit_home(key, s->lim_cap);; i = (i + 1) & (s->lim_cap - 1)) {
        if (s->lim[i].key == key)
            return &s->lim[i];
        if (s->lim[i].key == 0)
            return NULL;
    }
}

static swim_limit *limit_put_at(swim_limit *t, uint32_t cap, swim_limit e)
{
    uint32_t i = limit_home(e.key, cap);
    while (t[i].key != 0)
        i = (i + 1) & (cap - 1);
    t[i] = e;
    return &t[i];
}

/* Remove the entry at index i (backward-shift deletion, no tombstones). */
static void limit_remove_at(gossip_swim *s, uint32_t i)
{
    uint32_t mask = s->lim_cap - 1, j = i;
    s->lim[i].key = 0;
    s->lim_n--;
    for (;;) {
        j = (j + 1) & mask;
        if (s->lim[j].key == 0)
            return;
        if (!probe_stays(i, j, limit_home(s->lim[j].key, s->lim_cap))) {
            s->lim[i] = s->lim[j];
            s->lim[j].key = 0;
            i = j;
        }
    }
}

/* Room for one more entry: drop those older than a period (in place),
 * then double if still half full. 0, or GOSSIP_ENOMEM (nothing lost). */
static int limit_room(gossip_swim *s, gossip_time_us now)
{
    if (2 * (s->lim_n + 1) <= s->lim_cap)
        return 0;
    for (uint32_t i = 0; i < s->lim_cap; i++)
        while (s->lim[i].key && now - s->lim[i].at >= period_us(s))
            limit_remove_at(s, i); /* re-check i: the shift may fill it */
    if (2 * (s->lim_n + 1) <= s->lim_cap)
        return 0;
    uint32_t cap = 2 * s->lim_cap;
    swim_limit *t = gossip_calloc(s->env, cap, sizeof *t);
    if (!t) {
        s->stats.no_memory++;
        return GOSSIP_ENOMEM;
    }
    for (uint32_t i = 0; i < s->lim_cap; i++)
        if (s->lim[i].key)
            limit_put_at(t, cap, s->lim[i]);
    gossip_free(s->env, s->lim);
    s->lim = t;
    s->lim_cap = cap;
    return 0;
}

/* Whether member m did `kind` in the last period (for a notice: to the
 * address of notice_key). */
static int limit_recent(const gossip_swim *s, const member *m, unsigned kind, uint32_t notice_key,
                        gossip_time_us now)
{
    const swim_limit *e = limit_find(s, limit_key(s, m, kind));
    return e && now - e->at < period_us(s) && (kind != LIMIT_NOTICE || e->notice_key == notice_key);
}

/* Record that member m did `kind` now. GOSSIP_ENOMEM without memory for
 * it (counted in stats.no_memory): the caller then does not do it, since
 * the limits bound work done for others and one that cannot be kept
 * must do less, not more. */
static int limit_record(gossip_swim *s, const member *m, unsigned kind, uint32_t notice_key,
                        gossip_time_us now)
{
    uint32_t key = limit_key(s, m, kind);
    swim_limit *e = limit_find(s, key);
    if (!e) {
        if (limit_room(s, now))
            return GOSSIP_ENOMEM;
        e = limit_put_at(s->lim, s->lim_cap, (swim_limit){key, 0, 0});
        s->lim_n++;
    }
    e->at = now ? now : 1; /* as the slot's times were: 0 read as never */
    e->notice_key = notice_key;
    return GOSSIP_OK;
}

/* A slot freed: its limits go with it (a member that takes the slot starts
 * with none, as a zeroed slot did). */
static void limit_forget(gossip_swim *s, const member *m)
{
    for (unsigned kind = 0; kind < LIMIT_KINDS; kind++) {
        swim_limit *e = limit_find(s, limit_key(s, m, kind));
        if (e)
            limit_remove_at(s, (uint32_t)(e - s->lim));
    }
}

/* ---------------------------------------------------------------- addresses */

/* addr_off of a member whose address is cfg.addr_of's for its id: no
 * bytes in abuf. */
#define ADDR_CANON UINT32_MAX

/* m's address (addr_len bytes and a NUL): in abuf, or written into tmp
 * (GOSSIP_ADDR_MAX bytes) when it is the canonical one. */
static const char *maddr(const gossip_swim *s, const member *m, char *tmp)
{
    if (m->addr_off != ADDR_CANON)
        return s->abuf + m->addr_off;
    size_t n = s->cfg.addr_of(s->cfg.addr_ctx, m->id, tmp);
    assert(n == m->addr_len);
    (void)n;
    return tmp;
}

static int addr_same(const gossip_swim *s, const member *m, const void *addr, size_t len)
{
    char tmp[GOSSIP_ADDR_MAX];
    return m->addr_len == len && memcmp(maddr(s, m, tmp), addr, len) == 0;
}

/* Bytes of abuf that m's address takes (0: canonical). */
static size_t addr_bytes(const member *m)
{
    return m->addr_off == ADDR_CANON ? 0 : (size_t)m->addr_len + 1;
}

/* Room for `need` more bytes of addresses; GOSSIP_ENOMEM (nothing changed)
 * when the buffer must move and there is no memory for it. */
static int addr_room(gossip_swim *s, size_t need)
{
    if (s->abuf_used + need <= s->abuf_cap)
        return GOSSIP_OK;
    /* Compacted in place of the same size when that leaves an eighth of
     * the live bytes free (replaced addresses), else doubled: a buffer
     * sized at create for members_max addresses (addr_reserve) rarely
     * grows, and never to twice what it holds. */
    size_t live = s->abuf_used - s->abuf_garbage, cap = s->abuf_cap;
    while (cap < live + need + live / 8)
        cap *= 2;
    char *b = gossip_alloc(s->env, cap);
    if (!b) {
        s->stats.no_memory++;
        return GOSSIP_ENOMEM;
    }
    size_t used = 0;
    for (uint32_t i = 0; i < s->hw; i++) {
        member *m = &s->members[i];
        if (m->state == GOSSIP_MEMBER_NONE || m->addr_off == ADDR_CANON)
            continue;
        memcpy(b + used, s->abuf + m->addr_off, (size_t)m->addr_len + 1);
        m->addr_off = (uint32_t)used;
        used += (size_t)m->addr_len + 1;
    }
    gossip_free(s->env, s->abuf);
    s->abuf = b;
    s->abuf_cap = cap;
    s->abuf_used = used;
    s->abuf_garbage = 0;
    return GOSSIP_OK;
}

/* The address buffer's size at create: members_max addresses as long as
 * our own and ADDR_SLACK bytes more (a cluster's addresses differ in a
 * few digits), at least four of the longest. Growing it by doubling from
 * a few addresses left a buffer of two to four times the addresses it
 * held, and in an allocator that keeps freed blocks by size (the
 * simulator's arena) every smaller one before it: at 8 192 simulated
 * members about 40 bytes a member of 106. */
#define ADDR_SLACK 4u
static size_t addr_reserve(const gossip_swim_config *c, uint32_t members_max, size_t self_len)
{
    if (c->addr_of) /* most addresses are the canonical ones: none stored */
        return 4u * GOSSIP_ADDR_MAX;
    size_t want = (size_t)members_max * (self_len + 1 + ADDR_SLACK);
    return want > 4u * GOSSIP_ADDR_MAX ? want : 4u * GOSSIP_ADDR_MAX;
}

/* Give m (a new member: old = 0) the address addr; addr_room(len + 1)
 * must have succeeded since the last change of the buffer. */
static void addr_put(gossip_swim *s, member *m, const void *addr, size_t len, int old)
{
    assert(s->abuf_used + len + 1 <= s->abuf_cap);
    if (old)
        s->abuf_garbage += addr_bytes(m);
    m->addr_len = (uint8_t)len;
    if (s->cfg.addr_of) {
        char canon[GOSSIP_ADDR_MAX];
        if (s->cfg.addr_of(s->cfg.addr_ctx, m->id, canon) == len && !memcmp(canon, addr, len)) {
            m->addr_off = ADDR_CANON;
            return;
        }
    }
    m->addr_off = (uint32_t)s->abuf_used;
    memcpy(s->abuf + s->abuf_used, addr, len);
    s->abuf[s->abuf_used + len] = 0;
    s->abuf_used += len + 1;
}

static void remove_member(gossip_swim *s, member *m)
{
    assert(m != &s->members[s->self_slot]);
    s->abuf_garbage += addr_bytes(m);
    queue_remove(s, m);
    set_state(s, m, GOSSIP_MEMBER_NONE, 0);
    hash_remove(s, m->id);
    limit_forget(s, m);
    m->id = 0;
    m->inc = s->free_head; /* a free slot's inc links the free list */
    s->free_head = slot_of(s, m) + 1;
}

/* Oldest tombstone, or NULL. */
static member *oldest_tomb(gossip_swim *s)
{
    member *best = NULL;
    for (uint32_t i = 0; i < s->hw; i++) {
        member *m = &s->members[i];
        if (is_tomb(m->state) && i != s->self_slot && (!best || m->state_at < best->state_at))
            best = m;
    }
    return best;
}

static member *add_member(gossip_swim *s, uint64_t id, const char *addr, size_t addr_len,
                          gossip_time_us now)
{
    if (addr_room(s, addr_len + 1))
        return NULL;
    if (s->free_head == 0 && s->hw == s->cap) {
        member *victim = oldest_tomb(s);
        if (!victim) {
            s->stats.table_full++;
            return NULL;
        }
        remove_member(s, victim);
    }
    uint32_t slot = s->hw;
    if (s->free_head) {
        slot = s->free_head - 1;
        s->free_head = s->members[slot].inc;
    } else
        s->hw++;
    member *m = &s->members[slot];
    memset(m, 0, sizeof *m);
    m->id = id;
    addr_put(s, m, addr, addr_len, 0); /* a victim's removal only left garbage */
    hash_insert(s, id, slot);
    set_state(s, m, GOSSIP_MEMBER_ALIVE, now);
    /* Insert at a random position of the rest of this probe round, so a
     * newcomer is probed within one round (memberlist does the same). */
    if (s->probe_n < s->cap) {
        uint32_t rest = s->probe_n - s->probe_pos;
        uint32_t at = s->probe_pos + (uint32_t)gossip_random_below(s->env, (uint64_t)rest + 1);
        s->probe_order[s->probe_n++] = s->probe_order[at];
        s->probe_order[at] = slot;
    }
    return m;
}

/* ---------------------------------------------------------------- view */

static void rebuild_view(gossip_swim *s)
{
    if (!s->view_dirty)
        return;
    s->view_dirty = 0;
    if (s->n_changed <= VIEW_CHANGES_MAX) {
        /* Patch: each changed id is in the view iff it is live now. */
        for (uint32_t k = 0; k < s->n_changed; k++) {
            uint64_t id = s->changed[k];
            const member *m = find(s, id);
            int live = m && is_live(m->state);
            uint32_t lo = gossip_ids_lower_bound(s->view_ids, 0, s->view_n, id);
            int in = lo < s->view_n && s->view_ids[lo] == id;
            if (live && !in) {
                memmove(s->view_ids + lo + 1, s->view_ids + lo,
                        (size_t)(s->view_n - lo) * sizeof *s->view_ids);
                s->view_ids[lo] = id;
                s->view_n++;
            } else if (!live && in) {
                memmove(s->view_ids + lo, s->view_ids + lo + 1,
                        (size_t)(s->view_n - lo - 1) * sizeof *s->view_ids);
                s->view_n--;
            }
        }
    } else {
        uint32_t n = 0;
        for (uint32_t i = 0; i < s->hw; i++)
            if (is_live(s->members[i].state))
                s->view_ids[n++] = s->members[i].id;
        gossip_ids_sort(s->view_ids, n); /* qsort's callback was a seventh of a cold start */
        s->view_n = n;
    }
    assert(s->view_n == s->n_live);
    s->n_changed = 0;
    s->epoch++;
}

/* Live members as the timeouts see them (self included, at least 1). */
static uint32_t n_live(const gossip_swim *s)
{
    return s->n_live ? s->n_live : 1; /* the view's size when it is clean */
}

/* ---------------------------------------------------------------- timing */

static uint32_t scale(const gossip_swim *s)
{
    return s->awareness + 1;
}

static void awareness_add(gossip_swim *s, int delta)
{
    int64_t a = (int64_t)s->awareness + delta;
    if (a < 0)
        a = 0;
    if (a > (int64_t)s->cfg.awareness_max - 1)
        a = (int64_t)s->cfg.awareness_max - 1;
    s->awareness = (uint32_t)a;
}

/* Lifeguard suspicion timeout: start at max and fall towards min as
 * independent confirmations c arrive, reaching min at k = alpha - 2 of them:
 *   min = alpha * max(1, log10 N) * interval,  max = beta * min,
 *   t(c) = max - (max - min) * log(c + 1) / log(k + 1). */
static gossip_time_us suspicion_timeout(const gossip_swim *s, uint32_t c)
{
    double n = (double)n_live(s);
    double nf = log10(n) < 1.0 ? 1.0 : log10(n);
    double min = (double)s->cfg.suspicion_mult * nf * (double)period_us(s);
    double max = (double)s->cfg.suspicion_max_mult * min;
    int64_t k = (int64_t)s->cfg.suspicion_mult - 2;
    if (k > (int64_t)n - 2)
        k = (int64_t)n - 2;
    if (k < 1)
        return (gossip_time_us)min;
    double frac = log((double)c + 1.0) / log((double)k + 1.0);
    double t = max - frac * (max - min);
    return (gossip_time_us)(t < min ? min : t);
}

/* Sends per update: lambda * ceil(log10(N + 1)); see MEMBERSHIP.md. */
static uint32_t retransmit_limit(const gossip_swim *s)
{
    double l = ceil(log10((double)n_live(s) + 1.0));
    return s->cfg.retransmit_mult * (uint32_t)(l < 1.0 ? 1.0 : l);
}

static gossip_time_us sync_every(const gossip_swim *s)
{
    uint64_t periods = (uint64_t)s->cfg.sync_mult * n_live(s);
    if (periods < SYNC_PERIODS_MIN)
        periods = SYNC_PERIODS_MIN;
    return periods * period_us(s);
}

static void refresh_suspect_deadline(gossip_swim *s)
{
    s->next_suspect = GOSSIP_TIME_NEVER;
    if (s->n_suspect == 0)
        return;
    for (uint32_t i = 0; i < s->hw; i++) {
        const member *m = &s->members[i];
        if (m->state != GOSSIP_MEMBER_SUSPECT)
            continue;
        gossip_time_us d = suspect_deadline(s, m);
        if (d < s->next_suspect)
            s->next_suspect = d;
    }
}

/* ---------------------------------------------------------------- queues */

static uint32_t tbucket(uint32_t transmits)
{
    return transmits < GOSSIP_SWIM_TBUCKETS ? transmits : GOSSIP_SWIM_TBUCKETS - 1;
}

static void queue_set_transmits(gossip_swim *s, queued *q, uint32_t transmits)
{
    s->tcount[tbucket(q->transmits)]--;
    s->tcount[tbucket(transmits)]++;
    q->transmits = transmits;
}

static void queue_remove(gossip_swim *s, member *m)
{
    if (!m->queue_pos)
        return;
    uint32_t i = m->queue_pos - 1;
    m->queue_pos = 0;
    s->tcount[tbucket(s->queue[i].transmits)]--;
    s->queue[i] = s->queue[--s->queue_n];
    if (i < s->queue_n) {
        member *moved = &s->members[s->queue[i].slot];
        assert(moved->id == s->queue[i].id);
        moved->queue_pos = i + 1;
    }
}

/* m's record may have changed size (its state or address): keep its queue
 * entry's copy equal. */
static void queue_resize(gossip_swim *s, const member *m)
{
    if (m->queue_pos)
        s->queue[m->queue_pos - 1].size = (uint32_t)record_size(m);
}

/* Announce m's current state: (re)start its retransmit count. */
static void enqueue_news(gossip_swim *s, member *m)
{
    if (m->queue_pos) {
        queue_set_transmits(s, &s->queue[m->queue_pos - 1], 0);
        queue_resize(s, m);
        return;
    }
    if (s->queue_n == GOSSIP_SWIM_QUEUE_MAX) {
        /* The first entry of the most transmits: the highest bucket in use
         * tells how many that is, unless it is the last (open) one. */
        uint32_t b = GOSSIP_SWIM_TBUCKETS - 1;
        while (b > 0 && !s->tcount[b])
            b--;
        uint32_t worst = 0;
        if (b == GOSSIP_SWIM_TBUCKETS - 1) {
            for (uint32_t i = 1; i < s->queue_n; i++)
                if (s->queue[i].transmits > s->queue[worst].transmits)
                    worst = i;
        } else {
            while (s->queue[worst].transmits != b)
                worst++;
        }
        member *w = &s->members[s->queue[worst].slot];
        assert(w->id == s->queue[worst].id);
        queue_remove(s, w);
        s->stats.queue_drops++;
    }
    s->queue[s->queue_n].id = m->id;
    s->queue[s->queue_n].transmits = 0;
    s->tcount[0]++;
    s->queue[s->queue_n].slot = slot_of(s, m);
    s->queue[s->queue_n].size = (uint32_t)record_size(m);
    m->queue_pos = ++s->queue_n;
}

static outmsg *out_push(gossip_swim *s, uint8_t type, uint64_t dest)
{
    if (s->out_n == GOSSIP_SWIM_OUTQ_MAX) {
        s->stats.outq_drops++;
        return NULL;
    }
    outmsg *o = &s->outq[(s->out_head + s->out_n++) % GOSSIP_SWIM_OUTQ_MAX];
    memset(o, 0, sizeof *o);
    o->type = type;
    o->dest = dest;
    return o;
}

/* ---------------------------------------------------------------- records */

typedef struct record {
    uint64_t id;
    uint64_t from;
    uint32_t inc;
    uint8_t state;
    uint8_t addr_len;
    const uint8_t *addr;
} record;

static size_t record_size(const member *m)
{
    switch (m->state) {
    case GOSSIP_MEMBER_ALIVE:
        return 1 + 8 + 4 + 1 + m->addr_len;
    case GOSSIP_MEMBER_SUSPECT:
    case GOSSIP_MEMBER_DEAD:
        return GOSSIP_SWIM_SUSPECT_RECORD_SIZE;
    default:
        return 1 + 8 + 4;
    }
}

static void write_record(const gossip_swim *s, gossip_writer *w, const member *m)
{
    gossip_w_u8(w, m->state);
    gossip_w_u64(w, m->id);
    gossip_w_u32(w, m->inc);
    if (m->state == GOSSIP_MEMBER_ALIVE) {
        gossip_w_u8(w, m->addr_len);
        char tmp[GOSSIP_ADDR_MAX];
        gossip_w_bytes(w, maddr(s, m, tmp), m->addr_len);
    } else if (m->state != GOSSIP_MEMBER_LEFT) {
        gossip_w_u64(w, member_from(s, m));
    }
}

/* Read one record; returns 0 or a gossip_err. */
static int read_record(gossip_reader *r, record *out)
{
    out->state = gossip_r_u8(r);
    out->id = gossip_r_u64(r);
    out->inc = gossip_r_u32(r);
    out->from = 0;
    out->addr_len = 0;
    out->addr = NULL;
    switch (out->state) {
    case GOSSIP_MEMBER_ALIVE:
        out->addr_len = gossip_r_u8(r);
        out->addr = gossip_r_view(r, out->addr_len);
        if (r->err)
            return GOSSIP_ETRUNC;
        if (out->addr_len == 0 || out->addr_len >= GOSSIP_ADDR_MAX ||
            memchr(out->addr, 0, out->addr_len))
            return GOSSIP_EMALFORMED;
        break;
    case GOSSIP_MEMBER_SUSPECT:
    case GOSSIP_MEMBER_DEAD:
        out->from = gossip_r_u64(r);
        break;
    case GOSSIP_MEMBER_LEFT:
        break;
    default:
        return r->err ? GOSSIP_ETRUNC : GOSSIP_EMALFORMED;
    }
    if (r->err)
        return GOSSIP_ETRUNC;
    /* id 0 is nobody, as suspecter or declarer too (a suspicion's
     * confirmers are counted by id: nobody must not count as one);
     * UINT32_MAX could not be refuted (no higher value) */
    if (out->id == 0 || out->inc == UINT32_MAX ||
        ((out->state == GOSSIP_MEMBER_SUSPECT || out->state == GOSSIP_MEMBER_DEAD) &&
         out->from == 0))
        return GOSSIP_EMALFORMED;
    return GOSSIP_OK;
}

/* Validate `count` records from r without applying them (pass 1). */
static int check_records(gossip_reader r, uint32_t count)
{
    record rec;
    for (uint32_t i = 0; i < count; i++) {
        int rc = read_record(&r, &rec);
        if (rc)
            return rc;
    }
    return gossip_r_left(&r) == 0 ? GOSSIP_OK : GOSSIP_EMALFORMED;
}

/* ---------------------------------------------------------------- admission */

static int refused_has(const gossip_swim *s, uint64_t id)
{
    for (uint32_t i = 0; i < GOSSIP_SWIM_REFUSED_MAX; i++)
        if (s->refused_peers[i].at && s->refused_peers[i].id == id)
            return 1;
    return 0;
}

static void refused_clear(gossip_swim *s, uint64_t id)
{
    for (uint32_t i = 0; i < GOSSIP_SWIM_REFUSED_MAX; i++)
        if (s->refused_peers[i].at && s->refused_peers[i].id == id)
            s->refused_peers[i].at = 0;
}

/* Remember a refused peer (the oldest entry goes when full); entries older
 * than the tombstone retention expire. */
static void refused_add(gossip_swim *s, uint64_t id, gossip_time_us now)
{
    gossip_time_us keep = (gossip_time_us)s->cfg.dead_retention_periods * period_us(s);
    refused_peer *slot = NULL;
    for (uint32_t i = 0; i < GOSSIP_SWIM_REFUSED_MAX; i++) {
        refused_peer *e = &s->refused_peers[i];
        if (e->at && now - e->at >= keep)
            e->at = 0;
        if (e->at && e->id == id) {
            slot = e;
            break;
        }
        if (!slot || (slot->at && (!e->at || e->at < slot->at)))
            slot = e;
    }
    assert(slot);
    slot->id = id;
    slot->at = now ? now : 1;
}

/* This object gives up for good: nothing more is sent or applied. */
static void go_quiet(gossip_swim *s, gossip_swim_refusal why)
{
    s->refused = why;
    s->conflict.fatal = 1;
    s->out_n = 0;
    memset(s->notice_busy, 0, sizeof s->notice_busy);
    while (s->queue_n)
        queue_remove(s, &s->members[s->queue[0].slot]);
    for (uint32_t i = 0; i < GOSSIP_SWIM_RELAY_MAX; i++)
        s->relays[i].used = 0;
    s->pr.active = 0;
}

static void conflict_note(gossip_swim *s, gossip_swim_refusal kind, uint64_t peer)
{
    memset(&s->conflict.addr, 0, sizeof s->conflict.addr);
    memset(&s->conflict.theirs, 0, sizeof s->conflict.theirs);
    s->conflict.seq++;
    s->conflict.kind = kind;
    s->conflict.fatal = 0;
    s->conflict.peer = peer;
}

/* A full-state message (type) from peer carried another manifest. The peer
 * is not admitted: it is dropped from the view (gossiped dead), its frames
 * are refused for a while, and a JOIN or SYNC gets our manifest back so the
 * other side learns why. A joiner refused by its seeds while it knows nobody
 * else gives up (the caller exits). */
static void refuse_manifest(gossip_swim *s, uint64_t peer, uint8_t type,
                            const gossip_manifest *theirs, gossip_time_us now)
{
    s->stats.refused_manifest++;
    conflict_note(s, GOSSIP_SWIM_REFUSED_MANIFEST, peer);
    s->conflict.theirs = *theirs;
    refused_add(s, peer, now);
    member *m = find(s, peer);
    if (m && is_live(m->state)) {
        set_dead(s, m, s->cfg.self_id, now);
        enqueue_news(s, m);
    }
    if (type == GOSSIP_MSG_JOIN || type == GOSSIP_MSG_SYNC) {
        outmsg *o = out_push(s, GOSSIP_MSG_SYNC_REPLY, peer);
        if (o)
            o->manifest_only = 1;
    } else if (!s->joined_at && n_live(s) <= 1) {
        go_quiet(s, GOSSIP_SWIM_REFUSED_MANIFEST);
    }
}

/* An ALIVE record of our own id at another address, at or above our own
 * incarnation (we never announced it). Returns 1 if we gave up (the caller
 * must not refute). See
 * "Duplicate identity" in docs/MEMBERSHIP.md: an established member is the
 * incumbent and refutes; a newcomer refutes once (the record may be an
 * older life of ours that died at another address) and yields at the
 * second claim, which only a live process with our id can make. */
static int claim_heard(gossip_swim *s, const record *r, gossip_time_us now)
{
    s->stats.id_claims++;
    memset(s->claim_addr, 0, sizeof s->claim_addr);
    memcpy(s->claim_addr, r->addr, r->addr_len);
    int newcomer = !s->joined_at ||
                   now - s->joined_at < (gossip_time_us)GOSSIP_SWIM_NEWCOMER_PERIODS * period_us(s);
    if (newcomer && !s->claim_refuted) {
        s->claim_refuted = 1; /* maybe our own older life: take the id over once */
        return 0;
    }
    conflict_note(s, GOSSIP_SWIM_REFUSED_DUPLICATE, s->cfg.self_id);
    memcpy(s->conflict.addr, r->addr, r->addr_len);
    if (!newcomer) {
        s->stats.duplicates++;
        return 0;
    }
    go_quiet(s, GOSSIP_SWIM_REFUSED_DUPLICATE);
    return 1;
}

/* An ACK or NACK for a sequence number we never used: the answer to a probe
 * of another process with our id, handed to us by a transport that holds a
 * connection to each (it routes by id). A live twin causes them in every
 * probe period. So can an older life of ours, but only once: the answers a
 * peer still owed it when it crashed, if that peer was paused meanwhile and
 * answers on waking, by dialing our address afresh (soak seed 5881: a
 * member restarted while a peer was paused took its older life's answers
 * for a twin's, yielded, and stayed out of every view). So foreign answers
 * count once per probe period: a newcomer that sees them in
 * GOSSIP_SWIM_FOREIGN_ANSWERS periods yields, as at a second claim; an
 * incumbent counts a duplicate. */
#define GOSSIP_SWIM_FOREIGN_ANSWERS 3u
static void foreign_answer(gossip_swim *s, uint32_t seq, gossip_time_us now)
{
    if ((int32_t)(seq - s->seq) <= 0)
        return; /* one of ours (or older than our counter: ambiguous) */
    if (s->foreign_at && now >= s->foreign_at && now - s->foreign_at < period_us(s))
        return; /* a burst: the backlog of one peer, counted once */
    s->foreign_at = now ? now : 1;
    if (++s->foreign_answers < GOSSIP_SWIM_FOREIGN_ANSWERS)
        return;
    s->foreign_answers = 0;
    int newcomer = !s->joined_at ||
                   now - s->joined_at < (gossip_time_us)GOSSIP_SWIM_NEWCOMER_PERIODS * period_us(s);
    conflict_note(s, GOSSIP_SWIM_REFUSED_DUPLICATE, s->cfg.self_id);
    memcpy(s->conflict.addr, s->claim_addr, sizeof s->conflict.addr);
    if (!newcomer) {
        s->stats.duplicates++;
        return;
    }
    go_quiet(s, GOSSIP_SWIM_REFUSED_DUPLICATE);
}

/* ---- one id at two addresses ----
 * A transport routes a frame for an id to one of the connections
 * authenticated as that id. When two processes hold one key on one host (one
 * remote IP for both), it keeps choosing the incumbent's, so the newcomer
 * hears nothing by id: no claim, no foreign answer, and it never yields. What
 * the membership knows is where each claimant says it listens (the address
 * in its own record), so whatever concerns "the other one" goes there by
 * address (dest 0), which reaches whoever listens at it:
 * - a JOIN or SYNC whose sender gives itself another address than the one
 *   we hold for that live member is answered at that address;
 * - a live member that moves to another address (a newer record) gets our
 *   state at the address it left.
 * A twin then hears the other's record and refutes or yields (claim_heard);
 * a process restarted elsewhere has nobody at its old address (one failed
 * dial); a restart at the same address triggers neither. */

/* FNV-1a of an address (which address a member's last notice went to). */
static uint32_t addr_key(const char *a, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)a[i]) * 16777619u;
    return h;
}

/* Queue a full-state message (SYNC or SYNC_REPLY) to addr, by address. */
static void notice_push(gossip_swim *s, uint8_t type, const char *addr, size_t len)
{
    assert(type == GOSSIP_MSG_SYNC || type == GOSSIP_MSG_SYNC_REPLY);
    assert(len > 0 && len < GOSSIP_ADDR_MAX);
    uint32_t k = 0;
    while (k < GOSSIP_SWIM_NOTICES_MAX && s->notice_busy[k])
        k++;
    if (k == GOSSIP_SWIM_NOTICES_MAX) {
        s->stats.addr_notice_drops++;
        return;
    }
    outmsg *o = out_push(s, type, 0);
    if (!o)
        return;
    memcpy(s->notice_addr[k], addr, len);
    s->notice_addr[k][len] = 0;
    s->notice_busy[k] = 1;
    o->notice = (uint8_t)(k + 1);
    s->stats.addr_notices++;
}

/* Live member m is about to move to another address: send our state to the
 * one it leaves, at most once a period for one address. */
static void moved_away(gossip_swim *s, member *m, gossip_time_us now)
{
    char tmp[GOSSIP_ADDR_MAX];
    uint32_t key = addr_key(maddr(s, m, tmp), m->addr_len);
    if (limit_recent(s, m, LIMIT_NOTICE, key, now) || limit_record(s, m, LIMIT_NOTICE, key, now))
        return;
    notice_push(s, GOSSIP_MSG_SYNC, maddr(s, m, tmp), m->addr_len);
}

/* The address a full-state message's sender gives for itself, into out,
 * when we hold that sender live at another one: its length, else 0. */
static size_t sender_elsewhere(const gossip_swim *s, gossip_reader r, uint32_t count,
                               uint64_t sender, char *out)
{
    const member *m = find(s, sender);
    if (!m || !is_live(m->state))
        return 0;
    record rec;
    for (uint32_t i = 0; i < count; i++) {
        int rc = read_record(&r, &rec);
        assert(rc == GOSSIP_OK);
        (void)rc;
        if (rec.id != sender || rec.state != GOSSIP_MEMBER_ALIVE)
            continue;
        if (addr_same(s, m, rec.addr, rec.addr_len))
            return 0;
        memcpy(out, rec.addr, rec.addr_len);
        out[rec.addr_len] = 0;
        return rec.addr_len;
    }
    return 0;
}

/* ---------------------------------------------------------------- merge */

static void refute(gossip_swim *s, uint32_t seen_inc)
{
    member *self = &s->members[s->self_slot];
    if (seen_inc >= self->inc)
        self->inc = seen_inc + 1;
    s->stats.refutations++;
    awareness_add(s, 1); /* Lifeguard: being suspected hints we are slow */
    enqueue_news(s, self);
}

static void start_suspect(gossip_swim *s, member *m, uint32_t inc, uint64_t from, int confirmed,
                          gossip_time_us now)
{
    /* A peer's suspicion is taken up only with an entry to name its
     * suspecter in our record: without one the record would name us
     * (member_from), peers would count us as a confirmation we never made,
     * and the member would be declared dead sooner over there. It stays as
     * it is (a later death, never an earlier one); our own probes may
     * still suspect it. A member already suspected frees its entry below,
     * so only a new suspicion can lack one. */
    if (from != s->cfg.self_id && !susp(s, m) && conf_reserve(s) != 0)
        return;
    m->inc = inc;
    set_state(s, m, GOSSIP_MEMBER_SUSPECT, now);
    m->n_confirm = 1; /* the first suspecter; confirmations are the others */
    m->conf = conf_take(s);
    suspicion *e = susp(s, m);
    if (e) {
        e->by[0] = from;
        /* A death reported by a full-state sync was confirmed over there:
         * give the subject the minimum time to refute (it still gets it). */
        e->deadline = now + suspicion_timeout(s, confirmed ? GOSSIP_SWIM_CONFIRM_MAX : 0);
    }
    gossip_time_us d = suspect_deadline(s, m);
    if (d < s->next_suspect)
        s->next_suspect = d;
    s->stats.suspicions++;
    enqueue_news(s, m);
}

static void confirm_suspect(gossip_swim *s, member *m, uint64_t from)
{
    if (!m->conf) /* no memory for its suspecters: not counted */
        return;
    suspicion *e = susp(s, m);
    uint64_t *who = e->by;
    for (uint32_t i = 0; i < m->n_confirm; i++)
        if (who[i] == from)
            return;
    if (m->n_confirm == GOSSIP_SWIM_CONFIRM_MAX)
        return;
    who[m->n_confirm++] = from; /* gossiped as the newest (member_from): others count it */
    gossip_time_us d = m->state_at + suspicion_timeout(s, m->n_confirm - 1u);
    if (d < e->deadline) {
        e->deadline = d;
        if (d < s->next_suspect)
            s->next_suspect = d;
    }
    /* Our own independent suspicion is news; re-gossiping every confirmation
     * we hear would reset the retransmit count of a hot entry over and over
     * and starve older news when many members fail at once. */
    if (from == s->cfg.self_id)
        enqueue_news(s, m);
}

/* Apply one record. from_sync: a dead record from a full-state exchange is
 * taken as a suspicion (memberlist does the same) so a healed partition, in
 * which each side declared the other dead, cannot kill a live member whose
 * refutation has not arrived yet; the subject refutes it. */
static void apply(gossip_swim *s, const record *r, int from_sync, gossip_time_us now)
{
    member *self = &s->members[s->self_slot];
    uint8_t st = r->state;
    if (from_sync && st == GOSSIP_MEMBER_DEAD)
        st = GOSSIP_MEMBER_SUSPECT;
    if (r->id == self->id) {
        if (s->left)
            return;
        if (st == GOSSIP_MEMBER_ALIVE) {
            /* An older life of ours, or a confused peer with a newer one,
             * or another process with our key (another address). */
            if (r->inc < self->inc)
                return;
            int elsewhere = !addr_same(s, self, r->addr, r->addr_len);
            if (!elsewhere && r->inc == self->inc)
                return; /* our own record */
            if (elsewhere && claim_heard(s, r, now))
                return;
            refute(s, r->inc);
        } else if (r->inc >= self->inc) {
            refute(s, r->inc);
        } else {
            /* a stale suspicion: someone missed our refutation; repeat it */
            enqueue_news(s, self);
        }
        return;
    }
    if (st == GOSSIP_MEMBER_ALIVE && refused_has(s, r->id))
        return; /* refused for its manifest: not back through hearsay */
    member *m = find(s, r->id);
    if (!m) {
        if (st != GOSSIP_MEMBER_ALIVE)
            return; /* nothing to learn about a stranger's death */
        m = add_member(s, r->id, (const char *)r->addr, r->addr_len, now);
        if (!m)
            return;
        m->inc = r->inc;
        enqueue_news(s, m);
        return;
    }
    switch (st) {
    case GOSSIP_MEMBER_ALIVE:
        if (r->inc <= m->inc)
            return;
        int moved = !addr_same(s, m, r->addr, r->addr_len);
        if (moved && addr_room(s, (size_t)r->addr_len + 1))
            return; /* no memory for the new address: a later record brings it */
        if (moved && is_live(m->state))
            moved_away(s, m, now);
        m->inc = r->inc;
        if (moved)
            addr_put(s, m, r->addr, r->addr_len, 1);
        set_state(s, m, GOSSIP_MEMBER_ALIVE, now);
        enqueue_news(s, m);
        return;
    case GOSSIP_MEMBER_SUSPECT:
        if (r->inc < m->inc || is_tomb(m->state))
            return;
        if (m->state == GOSSIP_MEMBER_SUSPECT && r->inc == m->inc) {
            confirm_suspect(s, m, r->from);
            return;
        }
        start_suspect(s, m, r->inc, r->from, from_sync && r->state == GOSSIP_MEMBER_DEAD, now);
        return;
    default: /* DEAD, LEFT */
        if (r->inc < m->inc || is_tomb(m->state))
            return;
        m->inc = r->inc;
        if (st == GOSSIP_MEMBER_DEAD)
            set_dead(s, m, r->from, now);
        else
            set_state(s, m, st, now);
        enqueue_news(s, m);
        return;
    }
}

/* Apply count records already checked by check_records; with only_self,
 * just the records about ourselves (from a sender we do not know yet: a
 * suspicion of us is refuted at once, news of others waits for the sync). */
static void apply_records(gossip_swim *s, gossip_reader *r, uint32_t count, int from_sync,
                          int only_self, gossip_time_us now)
{
    record rec;
    for (uint32_t i = 0; i < count; i++) {
        int rc = read_record(r, &rec);
        assert(rc == GOSSIP_OK);
        (void)rc;
        if (only_self && rec.id != s->cfg.self_id)
            continue;
        apply(s, &rec, from_sync, now);
        if (s->refused)
            return;
    }
}

/* ---------------------------------------------------------------- create */

static int config_fill(gossip_swim_config *c, const gossip_swim_config *in)
{
    *c = *in;
    if (c->self_id == 0 || !c->self_addr)
        return GOSSIP_EINVAL;
    size_t al = strlen(c->self_addr);
    if (al == 0 || al >= GOSSIP_ADDR_MAX)
        return GOSSIP_EINVAL;
#define DEF(f, v)                                                                                  \
    if (c->f == 0)                                                                                 \
    c->f = (v)
    DEF(members_max, DEF_MEMBERS_MAX);
    DEF(probe_interval_us, DEF_PROBE_INTERVAL);
    DEF(probe_timeout_us, DEF_PROBE_TIMEOUT);
    DEF(indirect_k, DEF_INDIRECT_K);
    DEF(suspicion_mult, DEF_SUSPICION_MULT);
    DEF(suspicion_max_mult, DEF_SUSPICION_MAXM);
    DEF(retransmit_mult, DEF_RETRANSMIT_MULT);
    DEF(awareness_max, DEF_AWARENESS_MAX);
    DEF(sync_mult, DEF_SYNC_MULT);
    DEF(reconnect_periods, DEF_RECONNECT);
    DEF(dead_retention_periods, DEF_RETENTION);
#undef DEF
    if (c->members_max < 2 || c->members_max > GOSSIP_MEMBERS_MAX)
        return GOSSIP_EINVAL;
    if (c->probe_timeout_us >= c->probe_interval_us || c->indirect_k > GOSSIP_SWIM_INDIRECT_MAX ||
        c->awareness_max > GOSSIP_SWIM_AWARENESS_MAX || c->suspicion_mult < 1 ||
        c->suspicion_max_mult < 1)
        return GOSSIP_EINVAL;
    return GOSSIP_OK;
}

int gossip_swim_create(gossip_swim **out, const gossip_env *env, const gossip_swim_config *cfg)
{
    if (!out || !env || !cfg)
        return GOSSIP_EINVAL;
    *out = NULL;
    gossip_swim_config c;
    int rc = config_fill(&c, cfg);
    if (rc)
        return rc;
    gossip_swim *s = gossip_calloc(env, 1, sizeof *s);
    if (!s)
        return GOSSIP_ENOMEM;
    s->env = env;
    s->cfg = c;
    s->cap = c.members_max;
    strcpy(s->self_addr, cfg->self_addr);
    s->cfg.self_addr = s->self_addr;
    if (cfg->manifest)
        s->manifest = *cfg->manifest;
    s->manifest.spec[GOSSIP_MANIFEST_SPEC_MAX - 1] = 0;
    s->cfg.manifest = &s->manifest;
    /* Linear probing with the table at most 2/3 full: 6 to 12 bytes per
     * member slot (8, at most half full, for members_max = N + 8 at a
     * power-of-two N, as the simulator sets it), not 8 to 16 (16 there)
     * as when it was at most half full whatever members_max. */
    uint32_t hsize = 4;
    while (hsize < s->cap + s->cap / 2)
        hsize *= 2;
    s->hash_mask = hsize - 1;
    /* A probe message, or a JOIN (our manifest and one record). A SYNC or
     * SYNC_REPLY holds a record per member: its frame is allocated when it
     * is polled and freed by the next poll (with members_max near N, a
     * buffer for it kept by each of N members would be most of the N^2). */
    s->frame_cap = GOSSIP_HEADER_SIZE + GOSSIP_MANIFEST_WIRE_MAX + 4 + GOSSIP_SWIM_RECORD_MAX;
    if (s->frame_cap <
        GOSSIP_HEADER_SIZE + GOSSIP_SWIM_PROBE_FIXED_MAX + GOSSIP_SWIM_PIGGYBACK_BYTES_MAX)
        s->frame_cap =
            GOSSIP_HEADER_SIZE + GOSSIP_SWIM_PROBE_FIXED_MAX + GOSSIP_SWIM_PIGGYBACK_BYTES_MAX;
    s->members = gossip_calloc(env, s->cap, sizeof *s->members);
    s->hash = s->members ? gossip_calloc(env, hsize, sizeof *s->hash) : NULL;
    s->probe_order = s->hash ? gossip_calloc(env, s->cap, sizeof *s->probe_order) : NULL;
    s->queue = s->probe_order ? gossip_calloc(env, GOSSIP_SWIM_QUEUE_MAX, sizeof *s->queue) : NULL;
    s->view_ids = s->queue ? gossip_calloc(env, s->cap, sizeof *s->view_ids) : NULL;
    s->frame = s->view_ids ? gossip_alloc(env, s->frame_cap) : NULL;
    s->abuf_cap = addr_reserve(&c, s->cap, strlen(s->self_addr));
    s->abuf = s->frame ? gossip_alloc(env, s->abuf_cap) : NULL;
    s->lim_cap = LIMITS_MIN;
    s->lim = s->abuf ? gossip_calloc(env, s->lim_cap, sizeof *s->lim) : NULL;
    if (!s->lim) {
        gossip_swim_destroy(s);
        return GOSSIP_ENOMEM;
    }
    s->next_probe = s->next_sync = s->next_reconnect = GOSSIP_TIME_NEVER;
    s->next_join = s->next_suspect = GOSSIP_TIME_NEVER;
    member *self = add_member(s, c.self_id, s->self_addr, strlen(s->self_addr), 0);
    assert(self);
    self->inc = c.incarnation;
    s->self_slot = slot_of(s, self);
    s->probe_n = s->probe_pos = 0; /* self is never probed */
    rebuild_view(s);
    *out = s;
    return GOSSIP_OK;
}

void gossip_swim_destroy(gossip_swim *s)
{
    if (!s)
        return;
    const gossip_env *env = s->env;
    gossip_free(env, s->frame);
    gossip_free(env, s->big);
    gossip_free(env, s->conf);
    gossip_free(env, s->tomb);
    gossip_free(env, s->lim);
    gossip_free(env, s->abuf);
    gossip_free(env, s->view_ids);
    gossip_free(env, s->queue);
    gossip_free(env, s->probe_order);
    gossip_free(env, s->hash);
    gossip_free(env, s->members);
    gossip_free(env, s);
}

/* ---------------------------------------------------------------- picks */

/* Up to want distinct random live members other than self and `skip`. */
static uint32_t pick_live(gossip_swim *s, uint64_t skip, uint64_t *out, uint32_t want)
{
    rebuild_view(s);
    uint64_t self = s->cfg.self_id;
    uint32_t got = 0;
    uint32_t tries = 4 * want + 8;
    uint32_t n = s->view_n;
    if (n == 0)
        return 0;
    while (got < want && tries--) {
        uint64_t id = s->view_ids[gossip_random_below(s->env, n)];
        if (id == self || id == skip)
            continue;
        uint32_t j = 0;
        while (j < got && out[j] != id)
            j++;
        if (j == got)
            out[got++] = id;
    }
    return got;
}

/* Next probe target in shuffled round-robin order, or NULL. */
static member *next_target(gossip_swim *s)
{
    for (int pass = 0; pass < 2; pass++) {
        while (s->probe_pos < s->probe_n) {
            member *m = &s->members[s->probe_order[s->probe_pos++]];
            if (is_live(m->state) && m->id != s->cfg.self_id)
                return m;
        }
        /* round over: reshuffle the live members */
        s->probe_n = 0;
        s->probe_pos = 0;
        for (uint32_t i = 0; i < s->hw; i++)
            if (is_live(s->members[i].state) && i != s->self_slot)
                s->probe_order[s->probe_n++] = i;
        for (uint32_t i = s->probe_n; i > 1; i--) {
            uint32_t j = (uint32_t)gossip_random_below(s->env, i);
            uint32_t t = s->probe_order[i - 1];
            s->probe_order[i - 1] = s->probe_order[j];
            s->probe_order[j] = t;
        }
    }
    return NULL;
}

/* ---------------------------------------------------------------- timers */

/* JOIN to every seed, or (missing_only) to every seed whose address no live
 * member has; returns how many were queued. */
static uint32_t send_joins(gossip_swim *s, int missing_only)
{
    uint32_t sent = 0;
    for (uint32_t i = 0; i < s->n_seeds; i++) {
        size_t len = strlen(s->seeds[i]);
        int known = 0;
        for (uint32_t k = 0; missing_only && k < s->hw && !known; k++) {
            const member *m = &s->members[k];
            known = is_live(m->state) && addr_same(s, m, s->seeds[i], len);
        }
        if (known)
            continue;
        outmsg *o = out_push(s, GOSSIP_MSG_JOIN, 0);
        if (o) {
            o->seed = (uint8_t)i;
            sent++;
        }
    }
    return sent;
}

static void start_sync(gossip_swim *s, uint64_t dest)
{
    out_push(s, GOSSIP_MSG_SYNC, dest);
}

static void finish_probe(gossip_swim *s, gossip_time_us now)
{
    probe *p = &s->pr;
    if (!p->active)
        return;
    p->active = 0;
    if (p->acked) {
        awareness_add(s, -1);
        return;
    }
    s->stats.probe_failures++;
    /* Lifeguard: missing nacks mean *we* may be the slow one. */
    if (p->nacks_expected > 0)
        awareness_add(s, (int)(p->nacks_expected - p->nacks));
    else
        awareness_add(s, 1);
    member *m = find(s, p->target);
    if (!m || !is_live(m->state))
        return;
    if (m->state == GOSSIP_MEMBER_SUSPECT)
        confirm_suspect(s, m, s->cfg.self_id);
    else
        start_suspect(s, m, m->inc, s->cfg.self_id, 0, now);
}

static void start_probe(gossip_swim *s, gossip_time_us now)
{
    member *m = next_target(s);
    if (!m)
        return;
    probe *p = &s->pr;
    memset(p, 0, sizeof *p);
    p->active = 1;
    p->target = m->id;
    p->seq = ++s->seq;
    p->timeout_at = now + s->cfg.probe_timeout_us * scale(s);
    s->stats.probes++;
    outmsg *o = out_push(s, GOSSIP_MSG_PING, m->id);
    if (o) {
        o->seq = p->seq;
        o->target = m->id;
    }
}

static void send_indirect(gossip_swim *s, gossip_time_us now)
{
    probe *p = &s->pr;
    p->indirect_sent = 1;
    uint64_t via[GOSSIP_SWIM_INDIRECT_MAX];
    uint32_t n = pick_live(s, p->target, via, s->cfg.indirect_k);
    /* The relays answer (ack or nack) before our period ends. */
    gossip_time_us left = s->next_probe > now ? s->next_probe - now : 0;
    gossip_time_us wait = left * 3 / 4;
    if (wait > UINT32_MAX)
        wait = UINT32_MAX;
    for (uint32_t i = 0; i < n; i++) {
        outmsg *o = out_push(s, GOSSIP_MSG_PING_REQ, via[i]);
        if (!o)
            break;
        o->seq = p->seq;
        o->target = p->target;
        o->wait_us = (uint32_t)wait;
        p->nacks_expected++;
    }
}

static void reap_tombs(gossip_swim *s, gossip_time_us now)
{
    if (s->n_tomb == 0)
        return;
    gossip_time_us keep = (gossip_time_us)s->cfg.dead_retention_periods * period_us(s);
    for (uint32_t i = 0; i < s->hw; i++) {
        member *m = &s->members[i];
        if (is_tomb(m->state) && now - m->state_at >= keep && !m->queue_pos && i != s->self_slot)
            remove_member(s, m);
    }
}

static void reconnect(gossip_swim *s)
{
    /* Ping a random tombstone (dead, not left): if it answers, the partition
     * that killed it has healed, and recv() starts a push-pull with it. */
    uint32_t dead = 0;
    if (s->n_tomb == 0)
        return; /* the common case, without touching the table */
    for (uint32_t i = 0; i < s->hw; i++)
        dead += s->members[i].state == GOSSIP_MEMBER_DEAD;
    if (dead == 0)
        return;
    uint32_t k = (uint32_t)gossip_random_below(s->env, dead);
    for (uint32_t i = 0; i < s->hw; i++) {
        member *m = &s->members[i];
        if (m->state != GOSSIP_MEMBER_DEAD)
            continue;
        if (k-- == 0) {
            outmsg *o = out_push(s, GOSSIP_MSG_PING, m->id);
            if (o) {
                o->seq = ++s->seq; /* matches no probe: only wakes the peer */
                o->target = m->id;
            }
            return;
        }
    }
}

/* Last chance before declaring death: the suspicion timer ran out without
 * a refutation reaching us. Ping the suspect directly (twice, so one lost
 * frame cannot kill it); the ping carries the suspicion (buddy system), so a
 * live suspect refutes and its ack brings the refutation. An ack restarts
 * the suspicion clock; silence for VERIFY_PERIODS periods means dead. This
 * covers the e^-(sends) chance that a refutation's gossip missed us. */
static void verify_suspect(gossip_swim *s, member *m, gossip_time_us now)
{
    suspicion *e = susp(s, m);
    e->verify_seq = ++s->seq;
    e->deadline = now + VERIFY_PERIODS * period_us(s) * scale(s);
    for (uint32_t i = 0; i < VERIFY_PINGS; i++) {
        outmsg *o = out_push(s, GOSSIP_MSG_PING, m->id);
        if (o) {
            o->seq = e->verify_seq;
            o->target = m->id;
        }
    }
}

static void run_timers(gossip_swim *s, gossip_time_us now)
{
    if (!s->started) {
        s->started = 1;
        gossip_time_us p = period_us(s);
        s->next_probe = now + gossip_random_below(s->env, p);
        s->next_sync = now + p + gossip_random_below(s->env, sync_every(s));
        s->next_reconnect = now + (gossip_time_us)s->cfg.reconnect_periods * p;
    }
    for (uint32_t i = 0; i < GOSSIP_SWIM_RELAY_MAX; i++) {
        relay *r = &s->relays[i];
        if (r->used && r->deadline <= now) {
            r->used = 0;
            outmsg *o = out_push(s, GOSSIP_MSG_NACK, r->requester);
            if (o)
                o->seq = r->req_seq;
        }
    }
    probe *p = &s->pr;
    if (p->active && !p->acked && !p->indirect_sent && now >= p->timeout_at)
        send_indirect(s, now);
    if (now >= s->next_probe) {
        finish_probe(s, now);
        reap_tombs(s, now);
        s->next_probe = now + period_us(s) * scale(s);
        start_probe(s, now);
    }
    if (now >= s->next_suspect) {
        for (uint32_t i = 0; i < s->hw; i++) {
            member *m = &s->members[i];
            if (m->state != GOSSIP_MEMBER_SUSPECT || suspect_deadline(s, m) > now)
                continue;
            if (m->conf && susp(s, m)->verify_seq == 0) {
                verify_suspect(s, m, now);
                continue;
            }
            set_dead(s, m, s->cfg.self_id, now);
            s->stats.deaths++;
            enqueue_news(s, m);
        }
        refresh_suspect_deadline(s);
    }
    /* Churn brings the next push-pull forward: after a mass failure or join
     * the piggyback queues are long and a member may miss some news; one
     * full-state exchange repairs that. Steady state pays nothing. */
    if (s->churn >= CHURN_SYNC_MIN) {
        gossip_time_us soon = now + period_us(s) + gossip_random_below(s->env, 4 * period_us(s));
        if (soon < s->next_sync)
            s->next_sync = soon;
    }
    if (now >= s->next_sync) {
        s->churn = 0;
        s->next_sync = now + sync_every(s);
        uint64_t peer;
        /* One sync in four goes to a seed, so two halves that forgot each
         * other entirely (tombstones reaped) still find each other. */
        if (s->n_seeds && gossip_random_below(s->env, 4) == 0) {
            outmsg *o = out_push(s, GOSSIP_MSG_SYNC, 0);
            if (o)
                o->seed = (uint8_t)gossip_random_below(s->env, s->n_seeds);
        } else if (pick_live(s, 0, &peer, 1) == 1) {
            start_sync(s, peer);
        }
    }
    if (now >= s->next_reconnect) {
        s->next_reconnect = now + (gossip_time_us)s->cfg.reconnect_periods * period_us(s);
        reconnect(s);
    }
    if (now >= s->next_join) {
        rebuild_view(s);
        if (s->view_n <= 1 && s->n_seeds) {
            send_joins(s, 0);
            s->join_every = JOIN_RETRY_PERIODS;
            s->join_lone_wait = join_lone_next(s);
            s->next_join = now + s->join_lone_wait;
        } else if (send_joins(s, 1)) {
            s->join_every = s->join_every < JOIN_MISSING_MAX_PERIODS / 2 ? 2 * s->join_every
                                                                         : JOIN_MISSING_MAX_PERIODS;
            s->next_join = now + (gossip_time_us)s->join_every * period_us(s);
        } else {
            s->next_join = GOSSIP_TIME_NEVER;
        }
    }
}

int gossip_swim_tick(gossip_swim *s, gossip_time_us now)
{
    if (s->left || s->refused)
        return GOSSIP_OK;
    run_timers(s, now);
    rebuild_view(s);
    if (!s->joined_at && s->view_n >= 2)
        s->joined_at = now ? now : 1;
    return GOSSIP_OK;
}

gossip_time_us gossip_swim_deadline(const gossip_swim *s)
{
    if (s->left || s->refused)
        return GOSSIP_TIME_NEVER;
    if (!s->started)
        return 0;
    gossip_time_us d = s->next_probe;
#define MIN(x)                                                                                     \
    if ((x) < d)                                                                                   \
    d = (x)
    MIN(s->next_sync);
    MIN(s->next_reconnect);
    MIN(s->next_join);
    MIN(s->next_suspect);
    if (s->pr.active && !s->pr.acked && !s->pr.indirect_sent)
        MIN(s->pr.timeout_at);
    for (uint32_t i = 0; i < GOSSIP_SWIM_RELAY_MAX; i++)
        if (s->relays[i].used)
            MIN(s->relays[i].deadline);
#undef MIN
    return d;
}

/* ---------------------------------------------------------------- join/leave */

int gossip_swim_join(gossip_swim *s, const char *const *seeds, size_t n, gossip_time_us now)
{
    if (!seeds || n > GOSSIP_SWIM_SEEDS_MAX)
        return GOSSIP_EINVAL;
    for (size_t i = 0; i < n; i++) {
        if (!seeds[i])
            return GOSSIP_EINVAL;
        size_t l = strlen(seeds[i]);
        if (l == 0 || l >= GOSSIP_ADDR_MAX)
            return GOSSIP_EINVAL;
    }
    s->n_seeds = 0;
    for (size_t i = 0; i < n; i++)
        if (strcmp(seeds[i], s->self_addr) != 0)
            strcpy(s->seeds[s->n_seeds++], seeds[i]);
    if (s->left)
        return GOSSIP_OK;
    send_joins(s, 0);
    s->join_lone_wait = period_us(s) / JOIN_FIRST_RETRY_DIV;
    if (!s->join_lone_wait)
        s->join_lone_wait = 1;
    s->next_join = now + s->join_lone_wait;
    s->join_every = JOIN_RETRY_PERIODS;
    return GOSSIP_OK;
}

int gossip_swim_leave(gossip_swim *s, gossip_time_us now)
{
    if (s->left || s->refused)
        return GOSSIP_OK;
    member *self = &s->members[s->self_slot];
    if (self->inc < UINT32_MAX - 1)
        self->inc++;
    set_state(s, self, GOSSIP_MEMBER_LEFT, now);
    s->left = 1;
    rebuild_view(s);
    /* The LEAVE goes to k+1 members; they gossip it on. */
    uint64_t to[GOSSIP_SWIM_INDIRECT_MAX + 1];
    uint32_t n = pick_live(s, 0, to, s->cfg.indirect_k + 1);
    /* Only the left record rides on LEAVE: flush the rest. */
    while (s->queue_n)
        queue_remove(s, &s->members[s->queue[0].slot]);
    enqueue_news(s, self);
    for (uint32_t i = 0; i < n; i++)
        out_push(s, GOSSIP_MSG_LEAVE, to[i]);
    return GOSSIP_OK;
}

/* ---------------------------------------------------------------- recv */

static relay *relay_find(gossip_swim *s, uint32_t our_seq)
{
    for (uint32_t i = 0; i < GOSSIP_SWIM_RELAY_MAX; i++)
        if (s->relays[i].used && s->relays[i].our_seq == our_seq)
            return &s->relays[i];
    return NULL;
}

static int reject(gossip_swim *s, int err)
{
    s->stats.rejected[err]++;
    return err;
}

int gossip_swim_recv(gossip_swim *s, uint64_t from, const gossip_header *h, const uint8_t *payload,
                     size_t len, gossip_time_us now)
{
    if (!h || (!payload && len))
        return GOSSIP_EINVAL;
    if (h->type < GOSSIP_MSG_PING || h->type > GOSSIP_MSG_LEAVE)
        return reject(s, GOSSIP_ETYPE);
    if (s->refused)
        return GOSSIP_OK; /* quiet for good */
    if (h->sender == 0 || (from != 0 && from != h->sender) || h->sender == s->cfg.self_id)
        return reject(s, GOSSIP_EMALFORMED);
    if (len > GOSSIP_PAYLOAD_MAX)
        return reject(s, GOSSIP_ETOOBIG);
    uint64_t sender = h->sender;
    gossip_reader r;
    gossip_reader_init(&r, payload, len);
    uint32_t seq = 0, wait = 0, count;
    uint64_t target = 0;
    int full_state = 0;
    gossip_manifest theirs;
    switch (h->type) {
    case GOSSIP_MSG_PING:
        seq = gossip_r_u32(&r);
        target = gossip_r_u64(&r);
        break;
    case GOSSIP_MSG_PING_REQ:
        seq = gossip_r_u32(&r);
        target = gossip_r_u64(&r);
        wait = gossip_r_u32(&r);
        break;
    case GOSSIP_MSG_ACK:
    case GOSSIP_MSG_NACK:
        seq = gossip_r_u32(&r);
        break;
    case GOSSIP_MSG_SYNC:
    case GOSSIP_MSG_SYNC_REPLY:
    case GOSSIP_MSG_JOIN:
        full_state = 1;
        break;
    default: /* LEAVE */
        break;
    }
    if (full_state) {
        int mrc = gossip_manifest_read(&r, &theirs);
        if (mrc)
            return reject(s, mrc);
        count = gossip_r_u32(&r);
        if (!r.err && count > GOSSIP_MEMBERS_MAX)
            return reject(s, GOSSIP_ETOOBIG);
    } else {
        count = gossip_r_u8(&r);
        if (!r.err && count > GOSSIP_SWIM_PIGGYBACK_MAX)
            return reject(s, GOSSIP_ETOOBIG);
    }
    if (r.err)
        return reject(s, GOSSIP_ETRUNC);
    if ((h->type == GOSSIP_MSG_PING || h->type == GOSSIP_MSG_PING_REQ) && target == 0)
        return reject(s, GOSSIP_EMALFORMED);
    int rc = check_records(r, count);
    if (rc)
        return reject(s, rc);
    if (h->type == GOSSIP_MSG_PING && target != s->cfg.self_id)
        return reject(s, GOSSIP_ENOTFOUND);
    s->stats.recv_msgs[h->type & 15]++;
    if (s->left)
        return GOSSIP_OK;

    /* Admission: a full-state message proves the sender's manifest; other
     * frames are believed only from members we know (learned through such
     * messages, directly or from members who checked them). */
    if (full_state) {
        if (!gossip_manifest_equal(&s->manifest, &theirs)) {
            refuse_manifest(s, sender, h->type, &theirs, now);
            rebuild_view(s);
            return GOSSIP_OK;
        }
        refused_clear(s, sender);
    } else if (refused_has(s, sender)) {
        s->stats.refused_frames++;
        return reject(s, GOSSIP_ENOTFOUND);
    }
    member *sm = find(s, sender);
    int stranger = !full_state && !sm;
    char elsewhere[GOSSIP_ADDR_MAX];
    size_t elsewhere_len = h->type == GOSSIP_MSG_JOIN || h->type == GOSSIP_MSG_SYNC
                               ? sender_elsewhere(s, r, count, sender, elsewhere)
                               : 0;
    apply_records(s, &r, count, full_state, stranger, now);
    if (s->refused)
        return GOSSIP_OK;
    if (stranger)
        s->stats.strangers++;
    sm = find(s, sender);

    /* A frame from someone we hold dead: the path is back (healed partition
     * or a restart). Push-pull with it, at most once per period. */
    if (sm && sm->state == GOSSIP_MEMBER_DEAD && h->type != GOSSIP_MSG_SYNC &&
        h->type != GOSSIP_MSG_JOIN && !limit_recent(s, sm, LIMIT_RECONNECT, 0, now) &&
        limit_record(s, sm, LIMIT_RECONNECT, 0, now) == GOSSIP_OK) {
        start_sync(s, sender);
    }

    switch (h->type) {
    case GOSSIP_MSG_PING: {
        outmsg *o = out_push(s, GOSSIP_MSG_ACK, sender);
        if (o)
            o->seq = seq;
        break;
    }
    case GOSSIP_MSG_ACK: {
        if (s->pr.active && seq == s->pr.seq) {
            s->pr.acked = 1;
            break;
        }
        foreign_answer(s, seq, now);
        if (s->refused)
            return GOSSIP_OK;
        suspicion *se = sm && sm->state == GOSSIP_MEMBER_SUSPECT ? susp(s, sm) : NULL;
        if (se && se->verify_seq == seq && seq) {
            /* it answers: wait for its refutation, clock restarted */
            se->verify_seq = 0;
            sm->state_at = now;
            se->deadline = now + suspicion_timeout(s, sm->n_confirm - 1u);
            if (se->deadline < s->next_suspect)
                s->next_suspect = se->deadline;
            break;
        }
        relay *rl = relay_find(s, seq);
        if (rl) {
            rl->used = 0;
            outmsg *o = out_push(s, GOSSIP_MSG_ACK, rl->requester);
            if (o)
                o->seq = rl->req_seq;
        }
        break;
    }
    case GOSSIP_MSG_NACK:
        if (s->pr.active && seq == s->pr.seq)
            s->pr.nacks++;
        foreign_answer(s, seq, now);
        if (s->refused)
            return GOSSIP_OK;
        break;
    case GOSSIP_MSG_PING_REQ: {
        member *t = find(s, target);
        relay *rl = NULL;
        for (uint32_t i = 0; i < GOSSIP_SWIM_RELAY_MAX && !rl; i++)
            if (!s->relays[i].used)
                rl = &s->relays[i];
        if (!t || !is_live(t->state) || target == s->cfg.self_id) {
            outmsg *o = out_push(s, GOSSIP_MSG_NACK, sender);
            if (o)
                o->seq = seq;
            break;
        }
        if (!rl) {
            rebuild_view(s);
            return reject(s, GOSSIP_EFULL);
        }
        outmsg *o = out_push(s, GOSSIP_MSG_PING, target);
        if (!o)
            break;
        rl->used = 1;
        rl->requester = sender;
        rl->target = target;
        rl->req_seq = seq;
        rl->our_seq = ++s->seq;
        /* a peer cannot pin a relay slot for longer than our longest period */
        gossip_time_us wait_max = period_us(s) * s->cfg.awareness_max;
        rl->deadline = now + (wait < wait_max ? wait : wait_max);
        o->seq = rl->our_seq;
        o->target = target;
        break;
    }
    case GOSSIP_MSG_SYNC:
    case GOSSIP_MSG_JOIN:
        /* A full state is O(N) bytes: answer one SYNC per member and period
         * (a JOIN always: a restarted process must learn its state). */
        if (h->type == GOSSIP_MSG_SYNC && sm && limit_recent(s, sm, LIMIT_SYNC_REPLY, 0, now))
            break;
        if (sm && limit_record(s, sm, LIMIT_SYNC_REPLY, 0, now) && h->type == GOSSIP_MSG_SYNC)
            break;         /* no memory to keep the limit: not answered (a JOIN is) */
        if (elsewhere_len) /* to the process that sent it, not the id's other one */
            notice_push(s, GOSSIP_MSG_SYNC_REPLY, elsewhere, elsewhere_len);
        else
            out_push(s, GOSSIP_MSG_SYNC_REPLY, sender);
        break;
    default:
        break;
    }
    /* After the answer: push-pull with a sender we do not know (at most one
     * such sync a period), which checks its manifest both ways. */
    if (stranger && now >= s->next_stranger_sync) {
        s->next_stranger_sync = now + period_us(s);
        start_sync(s, sender);
    }
    rebuild_view(s);
    if (!s->joined_at && s->view_n >= 2)
        s->joined_at = now ? now : 1;
    return GOSSIP_OK;
}

/* ---------------------------------------------------------------- send */

/* Piggyback pending updates: fewest transmissions first, within the count
 * and byte budgets. `first` (the probe target, if suspect) goes first: the
 * Lifeguard buddy system, so a suspected member learns it at once. */
/* The smallest record of any kind (LEFT: state, id, incarnation). */
#define RECORD_MIN (1u + 8u + 4u)

static int cmp_key(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Queue indices in (transmits, index) order, the entry of id `skip`
 * left out; returns how many. Sorted by counting, unless an entry is in
 * the last (open) bucket of s->tcount: then the slow way. */
static uint32_t queue_order(const gossip_swim *s, uint64_t skip, uint32_t *order)
{
    uint32_t n = 0;
    if (s->tcount[GOSSIP_SWIM_TBUCKETS - 1]) {
        uint64_t keys[GOSSIP_SWIM_QUEUE_MAX];
        for (uint32_t i = 0; i < s->queue_n; i++)
            if (s->queue[i].id != skip)
                keys[n++] = (uint64_t)s->queue[i].transmits << 32 | i;
        qsort(keys, n, sizeof *keys, cmp_key);
        for (uint32_t k = 0; k < n; k++)
            order[k] = (uint32_t)keys[k];
        return n;
    }
    uint32_t start[GOSSIP_SWIM_TBUCKETS] = {0};
    for (uint32_t i = 0; i < s->queue_n; i++)
        if (s->queue[i].id != skip)
            start[s->queue[i].transmits + 1]++;
    for (uint32_t t = 0; t + 1 < GOSSIP_SWIM_TBUCKETS; t++)
        start[t + 1] += start[t];
    for (uint32_t i = 0; i < s->queue_n; i++)
        if (s->queue[i].id != skip)
            order[start[s->queue[i].transmits]++] = i, n++;
    return n;
}

static void write_updates(gossip_swim *s, gossip_writer *w, uint64_t first)
{
    uint8_t *countp = gossip_w_reserve(w, 1);
    if (!countp)
        return;
    uint32_t count = 0;
    size_t budget = GOSSIP_SWIM_PIGGYBACK_BYTES_MAX;
    if (first) {
        member *m = find(s, first);
        if (m && m->state == GOSSIP_MEMBER_SUSPECT) {
            write_record(s, w, m);
            budget -= record_size(m);
            count++;
        } else {
            first = 0;
        }
    }
    uint32_t limit = retransmit_limit(s);
    /* The updates least sent so far (lowest queue index on a tie), 16 times
     * over, each the first in that order whose record fits what is left of
     * the budget. An entry that does not fit now never fits later (the
     * budget only shrinks), so this is one walk through the queue in
     * (transmits, index) order, stopped when 16 are picked or the budget is
     * below the smallest record. */
    uint32_t order[GOSSIP_SWIM_QUEUE_MAX];
    uint32_t n_order = queue_order(s, first, order);
    uint32_t picked[GOSSIP_SWIM_PIGGYBACK_MAX];
    uint32_t n_picked = 0;
    for (uint32_t k = 0; k < n_order && count < GOSSIP_SWIM_PIGGYBACK_MAX && budget >= RECORD_MIN;
         k++) {
        const queued *q = &s->queue[order[k]];
        if (q->size > budget)
            continue;
        const member *m = &s->members[q->slot];
        assert(m->id == q->id && record_size(m) == q->size);
        write_record(s, w, m);
        budget -= q->size;
        picked[n_picked++] = order[k];
        count++;
    }
    *countp = (uint8_t)count;
    /* Count the sends; drop what has been sent often enough. Remove from the
     * highest index down so swap-removal does not move a picked entry. */
    for (uint32_t a = 0; a < n_picked; a++)
        for (uint32_t b = a + 1; b < n_picked; b++)
            if (picked[b] > picked[a]) {
                uint32_t t = picked[a];
                picked[a] = picked[b];
                picked[b] = t;
            }
    for (uint32_t a = 0; a < n_picked; a++) {
        queued *q = &s->queue[picked[a]];
        queue_set_transmits(s, q, q->transmits + 1);
        if (q->transmits >= limit)
            queue_remove(s, &s->members[q->slot]);
    }
}

static void write_state(gossip_swim *s, gossip_writer *w)
{
    uint8_t *countp = gossip_w_reserve(w, 4);
    if (!countp)
        return;
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->hw; i++) {
        const member *m = &s->members[i];
        if (m->state == GOSSIP_MEMBER_NONE)
            continue;
        write_record(s, w, m);
        n++;
    }
    gossip_put_u32(countp, n);
}

int gossip_swim_poll_send(gossip_swim *s, gossip_send *out, gossip_time_us now)
{
    if (s->big) { /* the caller is done with the frame of the last poll */
        gossip_free(s->env, s->big);
        s->big = NULL;
    }
    while (s->out_n && !s->refused) {
        outmsg o = s->outq[s->out_head];
        s->out_head = (s->out_head + 1) % GOSSIP_SWIM_OUTQ_MAX;
        s->out_n--;
        const char *addr = NULL;
        if (o.dest == 0 && o.notice) {
            memcpy(s->sent_addr, s->notice_addr[o.notice - 1], sizeof s->sent_addr);
            s->notice_busy[o.notice - 1] = 0;
            addr = s->sent_addr;
        } else if (o.dest == 0) {
            if (o.seed >= s->n_seeds)
                continue;
            addr = s->seeds[o.seed];
        } else {
            const member *m = find(s, o.dest);
            if (m)
                addr = maddr(s, m, s->sent_addr);
        }
        uint8_t *buf = s->frame;
        size_t cap = s->frame_cap;
        if ((o.type == GOSSIP_MSG_SYNC || o.type == GOSSIP_MSG_SYNC_REPLY) && !o.manifest_only) {
            cap = GOSSIP_HEADER_SIZE + GOSSIP_MANIFEST_WIRE_MAX + 4 +
                  (size_t)s->hw * GOSSIP_SWIM_RECORD_MAX;
            if (!(buf = s->big = gossip_alloc(s->env, cap))) {
                s->stats.outq_drops++; /* out of memory: the next sync repairs */
                s->stats.no_memory++;
                continue;
            }
        }
        gossip_writer w;
        gossip_writer_init(&w, buf + GOSSIP_HEADER_SIZE, cap - GOSSIP_HEADER_SIZE);
        switch (o.type) {
        case GOSSIP_MSG_PING:
            gossip_w_u32(&w, o.seq);
            gossip_w_u64(&w, o.target);
            write_updates(s, &w, o.target);
            break;
        case GOSSIP_MSG_PING_REQ:
            gossip_w_u32(&w, o.seq);
            gossip_w_u64(&w, o.target);
            gossip_w_u32(&w, o.wait_us);
            write_updates(s, &w, 0);
            break;
        case GOSSIP_MSG_ACK:
        case GOSSIP_MSG_NACK:
            gossip_w_u32(&w, o.seq);
            write_updates(s, &w, 0);
            break;
        case GOSSIP_MSG_LEAVE:
            write_updates(s, &w, 0);
            break;
        case GOSSIP_MSG_JOIN: {
            /* just ourselves: the seed answers with its full state */
            gossip_manifest_write(&w, &s->manifest);
            gossip_w_u32(&w, 1);
            write_record(s, &w, &s->members[s->self_slot]);
            break;
        }
        default: /* SYNC, SYNC_REPLY */
            gossip_manifest_write(&w, &s->manifest);
            if (o.manifest_only)
                gossip_w_u32(&w, 0);
            else
                write_state(s, &w);
            break;
        }
        assert(!w.err);
        gossip_header h = {.type = o.type,
                           .payload_len = (uint32_t)w.len,
                           .sender = s->cfg.self_id,
                           .epoch = s->epoch,
                           .round = 0};
        gossip_header_encode(&h, buf);
        out->dest = o.dest;
        out->dest_addr = addr;
        out->frame = buf;
        out->len = GOSSIP_HEADER_SIZE + w.len;
        s->stats.sent_msgs[o.type & 15]++;
        s->stats.sent_bytes[o.type & 15] += out->len;
        return 1;
    }
    (void)now;
    return 0;
}

/* ---------------------------------------------------------------- queries */

void gossip_swim_view(const gossip_swim *s, gossip_view *out)
{
    out->epoch = s->epoch;
    out->n = s->view_n;
    out->ids = s->view_ids;
}

int gossip_swim_lookup(const gossip_swim *s, uint64_t id, gossip_swim_member *out)
{
    const member *m = id ? find(s, id) : NULL;
    if (!m)
        return GOSSIP_ENOTFOUND;
    out->id = m->id;
    out->incarnation = m->inc;
    out->state = (gossip_member_state)m->state;
    memset(out->addr, 0, GOSSIP_ADDR_MAX);
    char tmp[GOSSIP_ADDR_MAX];
    memcpy(out->addr, maddr(s, m, tmp), m->addr_len);
    return GOSSIP_OK;
}

gossip_swim_refusal gossip_swim_refused(const gossip_swim *s)
{
    return s->refused;
}

const gossip_swim_conflict *gossip_swim_conflict_get(const gossip_swim *s)
{
    return &s->conflict;
}

uint32_t gossip_swim_health(const gossip_swim *s)
{
    return s->awareness;
}

uint32_t gossip_swim_incarnation(const gossip_swim *s)
{
    return s->members[s->self_slot].inc;
}

const gossip_swim_stats *gossip_swim_stats_get(const gossip_swim *s)
{
    return &s->stats;
}
