/* gossip/wire — the murmur wire format: header, byte order, limits.
 *
 * Every protocol message is one frame: a fixed 32-byte header followed by a
 * type-specific payload. All integers are big-endian; floats are IEEE-754
 * binary32 sent as their big-endian bit pattern.
 *
 *   offset size field
 *   0      2    magic        0x4D52 ("MR")
 *   2      1    version      GOSSIP_WIRE_VERSION
 *   3      1    type         gossip_msg_type
 *   4      4    payload_len  bytes after the header, <= GOSSIP_PAYLOAD_MAX
 *   8      8    sender       node id of the sender
 *   16     8    epoch        sender's membership view epoch
 *   24     8    round        mixing round (or 0 where none applies)
 *
 * Readers and writers are bounds-checked cursors: a read past the end sets an
 * error flag and returns zero, so a decoder checks once at the end, never
 * reads out of bounds and never crashes on hostile input. Every length field
 * is checked against a named maximum before it is used.
 */
#ifndef GOSSIP_WIRE_H
#define GOSSIP_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define GOSSIP_WIRE_MAGIC   0x4D52u
#define GOSSIP_WIRE_VERSION 1u
#define GOSSIP_HEADER_SIZE  32u
/* The largest payload: a full 16 Mi-parameter vector at 32 bits plus its
 * block scales and metadata fits (16 Mi * 4 B = 64 MiB). Transports set their
 * receive limit to GOSSIP_FRAME_MAX. */
#define GOSSIP_PAYLOAD_MAX (64u * 1024u * 1024u + 1024u * 1024u)
#define GOSSIP_FRAME_MAX   (GOSSIP_HEADER_SIZE + GOSSIP_PAYLOAD_MAX)

/* Error codes of the protocol core; 0 is success. */
typedef enum gossip_err {
    GOSSIP_OK = 0,
    GOSSIP_ENOMEM,     /* an env allocation failed */
    GOSSIP_EINVAL,     /* bad argument from the caller */
    GOSSIP_ETRUNC,     /* frame shorter than its fields say */
    GOSSIP_EMAGIC,     /* wrong magic */
    GOSSIP_EVERSION,   /* unsupported version */
    GOSSIP_ETYPE,      /* unknown message type */
    GOSSIP_ETOOBIG,    /* a length exceeds its maximum */
    GOSSIP_EMALFORMED, /* fields inconsistent with each other */
    GOSSIP_ENONFINITE, /* a NaN or infinity where a finite value is required */
    GOSSIP_ESTALE,     /* from an old epoch or round; ignored */
    GOSSIP_EFULL,      /* a bounded queue or table is full */
    GOSSIP_ENOTFOUND,  /* unknown peer, shard or round */
    GOSSIP_ESPACE,     /* output buffer too small */
    GOSSIP_EABORTED,   /* an allreduce round was aborted */
    GOSSIP_ERR_COUNT
} gossip_err;

const char *gossip_strerror(int err);

/* Message types, grouped by subsystem so that each owns a range. */
typedef enum gossip_msg_type {
    /* 0x01-0x0f membership (SWIM) */
    GOSSIP_MSG_PING = 0x01,
    GOSSIP_MSG_ACK = 0x02,
    GOSSIP_MSG_PING_REQ = 0x03,
    GOSSIP_MSG_NACK = 0x04,
    GOSSIP_MSG_SYNC = 0x05,       /* push-pull state sync request */
    GOSSIP_MSG_SYNC_REPLY = 0x06, /* push-pull state sync answer */
    GOSSIP_MSG_JOIN = 0x07,
    GOSSIP_MSG_LEAVE = 0x08,
    /* 0x10-0x1f mixing */
    GOSSIP_MSG_MIX_PUSH = 0x10,  /* gossip / choco / dpsgd payload */
    GOSSIP_MSG_MIX_REPLY = 0x11, /* push-pull answer */
    GOSSIP_MSG_PUSHSUM = 0x12,   /* push-sum value and weight */
    GOSSIP_MSG_AR_CHUNK = 0x13,  /* allreduce chunk */
    GOSSIP_MSG_AR_ABORT = 0x14,  /* allreduce round aborted */
    /* 0x20-0x2f shard replication */
    GOSSIP_MSG_SHARD_WANT = 0x20,
    GOSSIP_MSG_SHARD_CHUNK = 0x21,
    GOSSIP_MSG_SHARD_NACK = 0x22,
    /* 0x30-0x3f state transfer */
    GOSSIP_MSG_MODEL_WANT = 0x30,
    GOSSIP_MSG_MODEL_CHUNK = 0x31,
    GOSSIP_MSG_MODEL_NACK = 0x32,
    /* 0x40-0x4f the node itself */
    GOSSIP_MSG_JOB_END = 0x40, /* the job is over: every agent leaves (gossip/node.h) */
} gossip_msg_type;

/* Human-readable name of a message type ("ping", "mix_push", ...) or "unknown". */
const char *gossip_msg_name(unsigned type);
/* 1 if type is one of gossip_msg_type. */
int gossip_msg_known(unsigned type);

typedef struct gossip_header {
    uint8_t version;
    uint8_t type;
    uint32_t payload_len;
    uint64_t sender;
    uint64_t epoch;
    uint64_t round;
} gossip_header;

/* Encode h into out[GOSSIP_HEADER_SIZE]. */
void gossip_header_encode(const gossip_header *h, uint8_t *out);
/* Decode and validate the header of a frame of len bytes: magic, version,
 * known type, payload_len <= GOSSIP_PAYLOAD_MAX and == len - header.
 * Returns GOSSIP_OK, GOSSIP_ETRUNC, GOSSIP_EMAGIC, GOSSIP_EVERSION,
 * GOSSIP_ETYPE, GOSSIP_ETOOBIG or GOSSIP_EMALFORMED. */
int gossip_header_decode(const uint8_t *frame, size_t len, gossip_header *h);

/* Big-endian put/get on raw memory. */
static inline void gossip_put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}
static inline void gossip_put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}
static inline void gossip_put_u64(uint8_t *p, uint64_t v)
{
    gossip_put_u32(p, (uint32_t)(v >> 32));
    gossip_put_u32(p + 4, (uint32_t)v);
}
static inline uint16_t gossip_get_u16(const uint8_t *p)
{
    return (uint16_t)((p[0] << 8) | p[1]);
}
static inline uint32_t gossip_get_u32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}
static inline uint64_t gossip_get_u64(const uint8_t *p)
{
    return ((uint64_t)gossip_get_u32(p) << 32) | gossip_get_u32(p + 4);
}

/* Bounds-checked writer. On overflow `err` is set and further puts are no-ops. */
typedef struct gossip_writer {
    uint8_t *buf;
    size_t cap;
    size_t len;
    int err;
} gossip_writer;

void gossip_writer_init(gossip_writer *w, uint8_t *buf, size_t cap);
void gossip_w_u8(gossip_writer *w, uint8_t v);
void gossip_w_u16(gossip_writer *w, uint16_t v);
void gossip_w_u32(gossip_writer *w, uint32_t v);
void gossip_w_u64(gossip_writer *w, uint64_t v);
void gossip_w_f32(gossip_writer *w, float v);
void gossip_w_f64(gossip_writer *w, double v);
void gossip_w_bytes(gossip_writer *w, const void *p, size_t n);
/* Reserve n bytes and return a pointer to them (NULL on overflow). */
uint8_t *gossip_w_reserve(gossip_writer *w, size_t n);

/* Bounds-checked reader. Reading past the end sets `err` and yields zeros. */
typedef struct gossip_reader {
    const uint8_t *buf;
    size_t len;
    size_t pos;
    int err;
} gossip_reader;

void gossip_reader_init(gossip_reader *r, const uint8_t *buf, size_t len);
uint8_t gossip_r_u8(gossip_reader *r);
uint16_t gossip_r_u16(gossip_reader *r);
uint32_t gossip_r_u32(gossip_reader *r);
uint64_t gossip_r_u64(gossip_reader *r);
float gossip_r_f32(gossip_reader *r);
double gossip_r_f64(gossip_reader *r);
/* Copy n bytes out; returns 0 on success, -1 (and sets err) if short. */
int gossip_r_bytes(gossip_reader *r, void *out, size_t n);
/* Borrow n bytes in place; NULL (and err) if short. */
const uint8_t *gossip_r_view(gossip_reader *r, size_t n);
static inline size_t gossip_r_left(const gossip_reader *r)
{
    return r->len - r->pos;
}

#endif
