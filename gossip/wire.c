#include "gossip/wire.h"

#include <string.h>

static const char *const err_names[GOSSIP_ERR_COUNT] = {
    [GOSSIP_OK] = "success",
    [GOSSIP_ENOMEM] = "out of memory",
    [GOSSIP_EINVAL] = "invalid argument",
    [GOSSIP_ETRUNC] = "truncated frame",
    [GOSSIP_EMAGIC] = "bad magic",
    [GOSSIP_EVERSION] = "unsupported wire version",
    [GOSSIP_ETYPE] = "unknown message type",
    [GOSSIP_ETOOBIG] = "length exceeds its maximum",
    [GOSSIP_EMALFORMED] = "malformed message",
    [GOSSIP_ENONFINITE] = "non-finite value",
    [GOSSIP_ESTALE] = "stale epoch or round",
    [GOSSIP_EFULL] = "bounded queue or table full",
    [GOSSIP_ENOTFOUND] = "not found",
    [GOSSIP_ESPACE] = "output buffer too small",
    [GOSSIP_EABORTED] = "round aborted",
};

const char *gossip_strerror(int err)
{
    if (err < 0 || err >= GOSSIP_ERR_COUNT || !err_names[err])
        return "unknown error";
    return err_names[err];
}

const char *gossip_msg_name(unsigned type)
{
    switch (type) {
    case GOSSIP_MSG_PING:
        return "ping";
    case GOSSIP_MSG_ACK:
        return "ack";
    case GOSSIP_MSG_PING_REQ:
        return "ping_req";
    case GOSSIP_MSG_NACK:
        return "nack";
    case GOSSIP_MSG_SYNC:
        return "sync";
    case GOSSIP_MSG_SYNC_REPLY:
        return "sync_reply";
    case GOSSIP_MSG_JOIN:
        return "join";
    case GOSSIP_MSG_LEAVE:
        return "leave";
    case GOSSIP_MSG_MIX_PUSH:
        return "mix_push";
    case GOSSIP_MSG_MIX_REPLY:
        return "mix_reply";
    case GOSSIP_MSG_PUSHSUM:
        return "pushsum";
    case GOSSIP_MSG_AR_CHUNK:
        return "ar_chunk";
    case GOSSIP_MSG_AR_ABORT:
        return "ar_abort";
    case GOSSIP_MSG_SHARD_WANT:
        return "shard_want";
    case GOSSIP_MSG_SHARD_CHUNK:
        return "shard_chunk";
    case GOSSIP_MSG_SHARD_NACK:
        return "shard_nack";
    case GOSSIP_MSG_MODEL_WANT:
        return "model_want";
    case GOSSIP_MSG_MODEL_CHUNK:
        return "model_chunk";
    case GOSSIP_MSG_MODEL_NACK:
        return "model_nack";
    case GOSSIP_MSG_JOB_END:
        return "job_end";
    default:
        return "unknown";
    }
}

int gossip_msg_known(unsigned type)
{
    return strcmp(gossip_msg_name(type), "unknown") != 0;
}

void gossip_header_encode(const gossip_header *h, uint8_t *out)
{
    gossip_put_u16(out, GOSSIP_WIRE_MAGIC);
    out[2] = GOSSIP_WIRE_VERSION;
    out[3] = h->type;
    gossip_put_u32(out + 4, h->payload_len);
    gossip_put_u64(out + 8, h->sender);
    gossip_put_u64(out + 16, h->epoch);
    gossip_put_u64(out + 24, h->round);
}

int gossip_header_decode(const uint8_t *frame, size_t len, gossip_header *h)
{
    if (len < GOSSIP_HEADER_SIZE)
        return GOSSIP_ETRUNC;
    if (gossip_get_u16(frame) != GOSSIP_WIRE_MAGIC)
        return GOSSIP_EMAGIC;
    if (frame[2] != GOSSIP_WIRE_VERSION)
        return GOSSIP_EVERSION;
    if (!gossip_msg_known(frame[3]))
        return GOSSIP_ETYPE;
    uint32_t plen = gossip_get_u32(frame + 4);
    if (plen > GOSSIP_PAYLOAD_MAX)
        return GOSSIP_ETOOBIG;
    if ((size_t)plen != len - GOSSIP_HEADER_SIZE)
        return plen > len - GOSSIP_HEADER_SIZE ? GOSSIP_ETRUNC : GOSSIP_EMALFORMED;
    h->version = frame[2];
    h->type = frame[3];
    h->payload_len = plen;
    h->sender = gossip_get_u64(frame + 8);
    h->epoch = gossip_get_u64(frame + 16);
    h->round = gossip_get_u64(frame + 24);
    return GOSSIP_OK;
}

void gossip_writer_init(gossip_writer *w, uint8_t *buf, size_t cap)
{
    w->buf = buf;
    w->cap = cap;
    w->len = 0;
    w->err = 0;
}

uint8_t *gossip_w_reserve(gossip_writer *w, size_t n)
{
    if (w->err || n > w->cap - w->len) {
        w->err = 1;
        return NULL;
    }
    uint8_t *p = w->buf + w->len;
    w->len += n;
    return p;
}

void gossip_w_u8(gossip_writer *w, uint8_t v)
{
    uint8_t *p = gossip_w_reserve(w, 1);
    if (p)
        *p = v;
}

void gossip_w_u16(gossip_writer *w, uint16_t v)
{
    uint8_t *p = gossip_w_reserve(w, 2);
    if (p)
        gossip_put_u16(p, v);
}

void gossip_w_u32(gossip_writer *w, uint32_t v)
{
    uint8_t *p = gossip_w_reserve(w, 4);
    if (p)
        gossip_put_u32(p, v);
}

void gossip_w_u64(gossip_writer *w, uint64_t v)
{
    uint8_t *p = gossip_w_reserve(w, 8);
    if (p)
        gossip_put_u64(p, v);
}

void gossip_w_f32(gossip_writer *w, float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    gossip_w_u32(w, u);
}

void gossip_w_f64(gossip_writer *w, double v)
{
    uint64_t u;
    memcpy(&u, &v, 8);
    gossip_w_u64(w, u);
}

void gossip_w_bytes(gossip_writer *w, const void *src, size_t n)
{
    uint8_t *p = gossip_w_reserve(w, n);
    if (p && n)
        memcpy(p, src, n);
}

void gossip_reader_init(gossip_reader *r, const uint8_t *buf, size_t len)
{
    r->buf = buf;
    r->len = len;
    r->pos = 0;
    r->err = 0;
}

const uint8_t *gossip_r_view(gossip_reader *r, size_t n)
{
    if (r->err || n > r->len - r->pos) {
        r->err = 1;
        return NULL;
    }
    const uint8_t *p = r->buf + r->pos;
    r->pos += n;
    return p;
}

uint8_t gossip_r_u8(gossip_reader *r)
{
    const uint8_t *p = gossip_r_view(r, 1);
    return p ? *p : 0;
}

uint16_t gossip_r_u16(gossip_reader *r)
{
    const uint8_t *p = gossip_r_view(r, 2);
    return p ? gossip_get_u16(p) : 0;
}

uint32_t gossip_r_u32(gossip_reader *r)
{
    const uint8_t *p = gossip_r_view(r, 4);
    return p ? gossip_get_u32(p) : 0;
}

uint64_t gossip_r_u64(gossip_reader *r)
{
    const uint8_t *p = gossip_r_view(r, 8);
    return p ? gossip_get_u64(p) : 0;
}

float gossip_r_f32(gossip_reader *r)
{
    uint32_t u = gossip_r_u32(r);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

double gossip_r_f64(gossip_reader *r)
{
    uint64_t u = gossip_r_u64(r);
    double d;
    memcpy(&d, &u, 8);
    return d;
}

int gossip_r_bytes(gossip_reader *r, void *out, size_t n)
{
    const uint8_t *p = gossip_r_view(r, n);
    if (!p)
        return -1;
    if (n)
        memcpy(out, p, n);
    return 0;
}
