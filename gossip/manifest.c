/* gossip/manifest — see manifest.h. */
#include "gossip/manifest.h"

#include <stdio.h>
#include <string.h>

#include "gossip/mix.h"

static size_t spec_len(const gossip_manifest *m)
{
    const char *z = memchr(m->spec, 0, sizeof m->spec);
    return z ? (size_t)(z - m->spec) : sizeof m->spec - 1;
}

size_t gossip_manifest_size(const gossip_manifest *m)
{
    return 2u + GOSSIP_MANIFEST_FIXED + spec_len(m);
}

void gossip_manifest_write(gossip_writer *w, const gossip_manifest *m)
{
    size_t sl = spec_len(m);
    gossip_w_u16(w, (uint16_t)(GOSSIP_MANIFEST_FIXED + sl));
    gossip_w_u16(w, (uint16_t)m->protocol);
    gossip_w_u64(w, m->params);
    gossip_w_u64(w, m->init_seed);
    gossip_w_u8(w, m->algo);
    gossip_w_u8(w, m->bits);
    gossip_w_u32(w, m->block);
    gossip_w_u8(w, (uint8_t)sl);
    gossip_w_bytes(w, m->spec, sl);
}

int gossip_manifest_read(gossip_reader *r, gossip_manifest *out)
{
    memset(out, 0, sizeof *out);
    uint16_t len = gossip_r_u16(r);
    if (r->err)
        return GOSSIP_ETRUNC;
    if (len < GOSSIP_MANIFEST_FIXED)
        return GOSSIP_EMALFORMED;
    const uint8_t *p = gossip_r_view(r, len);
    if (!p)
        return GOSSIP_ETRUNC;
    gossip_reader m;
    gossip_reader_init(&m, p, len);
    out->protocol = gossip_r_u16(&m);
    out->params = gossip_r_u64(&m);
    out->init_seed = gossip_r_u64(&m);
    out->algo = gossip_r_u8(&m);
    out->bits = gossip_r_u8(&m);
    out->block = gossip_r_u32(&m);
    uint8_t sl = gossip_r_u8(&m);
    if (sl >= GOSSIP_MANIFEST_SPEC_MAX || sl > gossip_r_left(&m))
        return GOSSIP_EMALFORMED;
    const uint8_t *spec = gossip_r_view(&m, sl);
    if (m.err || (sl && memchr(spec, 0, sl)))
        return GOSSIP_EMALFORMED;
    if (sl)
        memcpy(out->spec, spec, sl);
    out->spec[sl] = 0;
    return GOSSIP_OK; /* bytes after the spec: fields of a later version */
}

int gossip_manifest_equal(const gossip_manifest *a, const gossip_manifest *b)
{
    return a->protocol == b->protocol && a->params == b->params && a->init_seed == b->init_seed &&
           a->algo == b->algo && a->bits == b->bits && a->block == b->block &&
           strcmp(a->spec, b->spec) == 0;
}

static const char *algo_name(uint8_t a)
{
    return a < GOSSIP_MIX_ALGO_COUNT ? gossip_mix_algo_name((gossip_mix_algo)a) : "unknown";
}

size_t gossip_manifest_diff(const gossip_manifest *here, const gossip_manifest *peer, char *out,
                            size_t cap)
{
    int n = 0;
    if (!cap)
        return 0;
    out[0] = 0;
    if (here->protocol != peer->protocol)
        n = snprintf(out, cap, "protocol %u here, %u at the peer (mixed versions)",
                     (unsigned)here->protocol, (unsigned)peer->protocol);
    else if (strcmp(here->spec, peer->spec) != 0)
        n = snprintf(out, cap, "model.spec %s here, %s at the peer", here->spec, peer->spec);
    else if (here->params != peer->params)
        n = snprintf(out, cap, "%llu parameters here, %llu at the peer (another data set?)",
                     (unsigned long long)here->params, (unsigned long long)peer->params);
    else if (here->init_seed != peer->init_seed)
        n = snprintf(out, cap, "model.init_seed %llu here, %llu at the peer",
                     (unsigned long long)here->init_seed, (unsigned long long)peer->init_seed);
    else if (here->algo != peer->algo)
        n = snprintf(out, cap, "mixing.algorithm %s here, %s at the peer", algo_name(here->algo),
                     algo_name(peer->algo));
    else if (here->bits != peer->bits)
        n = snprintf(out, cap, "mixing.bits %u here, %u at the peer", (unsigned)here->bits,
                     (unsigned)peer->bits);
    else if (here->block != peer->block)
        n = snprintf(out, cap, "mixing.block %u here, %u at the peer", (unsigned)here->block,
                     (unsigned)peer->block);
    if (n < 0)
        return 0;
    return (size_t)n < cap ? (size_t)n : cap - 1;
}
