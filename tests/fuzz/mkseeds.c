/* mkseeds — writes the generated seed inputs of the libFuzzer targets
 * (make fuzz-seeds; docs/FUZZING.md).
 *
 *   build/tests/fuzz/mkseeds CORPUS_DIR VECTORS_DIR
 *
 * Every seed is a small valid input made by murmur's own encoders (shard
 * files, checkpoints, config and scenario files, IDX and CSV files, frames)
 * or read from the golden vectors (tests/vectors/), laid out as the target's
 * opening comment describes. Output is deterministic: rerunning rewrites
 * the same bytes, so `git diff tests/fuzz/corpus` shows only real changes.
 * Seeds are named seed-*; files named crash-* or regress-* in the same
 * directories are regression inputs kept by hand and never touched here.
 */
#include <dirent.h>
#include <sodium.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/checkpoint.h"
#include "agent/config.h"
#include "agent/keys.h"
#include "common/json.h"
#include "model/data.h"
#include "model/model.h"
#include "model/shardfile.h"
#include "model/spec.h"
#include "gossip/mix.h"
#include "net/channel.h"
#include "net/net.h"
#include "gossip/swim.h"
#include "gossip/wire.h"
#include "model/rng.h"
#include "sim/scenario.h"
#include "tests/fuzz/fuzz_fixture.h"

static const char *corpus_dir;
static const char *vectors_dir;
static unsigned written;

static void die(const char *what)
{
    fprintf(stderr, "mkseeds: %s: %s\n", what, strerror(errno));
    exit(1);
}

/* Write corpus_dir/target/seed-name. */
static void put(const char *target, const char *name, const void *bytes, size_t len)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", corpus_dir, target);
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
        die(path);
    snprintf(path, sizeof path, "%s/%s/seed-%s", corpus_dir, target, name);
    FILE *f = fopen(path, "wb");
    if (!f)
        die(path);
    if (len && fwrite(bytes, 1, len, f) != len)
        die(path);
    if (fclose(f) != 0)
        die(path);
    written++;
}

/* The same with one leading selector byte. */
static void put_with(const char *target, const char *name, uint8_t first, const void *bytes,
                     size_t len)
{
    uint8_t *b = malloc(len + 1);
    if (!b)
        die("malloc");
    b[0] = first;
    memcpy(b + 1, bytes, len);
    put(target, name, b, len + 1);
    free(b);
}

/* A small data set: n samples of dim features, labels i % classes. */
static void small_set(model_data *d, uint32_t n, uint32_t dim, uint32_t classes, model_dtype t)
{
    if (model_data_alloc(d, n, dim, classes, t))
        die("model_data_alloc");
    for (uint32_t i = 0; i < n; i++) {
        d->labels[i] = (uint16_t)(i % classes);
        for (uint32_t j = 0; j < dim; j++) {
            if (t == MODEL_DTYPE_U8)
                d->x_u8[(size_t)i * dim + j] = (uint8_t)(i * 31 + j * 7);
            else
                d->x_f32[(size_t)i * dim + j] = (float)i - 0.25f * (float)j;
        }
    }
}

/* ---- fuzz_shardfile: flags byte, then a shard file ---- */
static void seeds_shardfile(void)
{
    static const struct {
        uint32_t n, dim, classes;
        model_dtype t;
        uint8_t flags;
        const char *name;
    } cases[] = {
        {3, 4, 3, MODEL_DTYPE_U8, 0, "u8"},
        {2, 3, 2, MODEL_DTYPE_F32, 2, "f32-path"},
        {1, 1, 1, MODEL_DTYPE_U8, 1, "one-fixhash"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        model_data d;
        small_set(&d, cases[c].n, cases[c].dim, cases[c].classes, cases[c].t);
        uint64_t n = model_shard_size(&d, d.count);
        uint8_t *b = malloc(n);
        if (!b || model_shard_encode(&d, NULL, d.count, 1, 3, b, n, NULL))
            die("model_shard_encode");
        put_with("fuzz_shardfile", cases[c].name, cases[c].flags, b, n);
        free(b);
        model_data_free(&d);
    }
}

/* Whole contents of a file (malloc'd) and its size. */
static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        die(path);
    size_t cap = 4096, n = 0;
    uint8_t *b = malloc(cap);
    for (;;) {
        if (!b)
            die("malloc");
        n += fread(b + n, 1, cap - n, f);
        if (n < cap)
            break;
        cap *= 2;
        b = realloc(b, cap);
    }
    fclose(f);
    *len = n;
    return b;
}

/* ---- fuzz_checkpoint: flags byte, then a checkpoint file ---- */
static void seeds_checkpoint(void)
{
    char dir[] = "/tmp/murmur-mkseeds-XXXXXX";
    if (!mkdtemp(dir))
        die("mkdtemp");
    char path[64], err[256];
    snprintf(path, sizeof path, "%s/ck", dir);
    float p[5] = {0.5f, -1.0f, 2.25f, 0.0f, 1e-3f}, m[5] = {0.1f, 0.2f, -0.3f, 0.0f, 4.0f};
    static const struct {
        const char *spec;
        uint32_t dim;
        int momentum;
        uint8_t flags;
        const char *name;
    } cases[] = {
        {"softmax", 3, 1, 2 | 4, "softmax-momentum"},
        {"mlp:4", 5, 0, 1, "mlp-fixsum"},
        {"softmax", 1, 0, 8 | 16, "softmax-bare"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        agent_checkpoint ck = {.spec = cases[c].spec,
                               .dim = cases[c].dim,
                               .step = 1000 + c,
                               .round = 40 + c,
                               .epoch = 3,
                               .params = p,
                               .momentum = cases[c].momentum ? m : NULL};
        if (agent_checkpoint_save(path, &ck, err, sizeof err)) {
            fprintf(stderr, "mkseeds: %s\n", err);
            exit(1);
        }
        size_t n;
        uint8_t *b = slurp(path, &n);
        put_with("fuzz_checkpoint", cases[c].name, cases[c].flags, b, n);
        free(b);
    }
    unlink(path);
    rmdir(dir);
}

/* What f wrote into a memory stream, as a seed. */
static void put_stream(const char *target, const char *name, char *text, size_t len)
{
    put(target, name, text, len);
    free(text);
}

/* ---- fuzz_config: a config file ---- */
static void seeds_config(void)
{
    agent_config c;
    agent_config_defaults(&c);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        die("open_memstream");
    agent_config_write(&c, f);
    fclose(f);
    put_stream("fuzz_config", "defaults", text, len);
    /* the example of docs/CONFIG.md, plus quoting and comments */
    static const char example[] = "# one agent of a 16-host cluster\n"
                                  "[node]\n"
                                  "listen = 0.0.0.0:7000\n"
                                  "advertise = 10.0.0.5:7000\n"
                                  "data_dir = \"/var/lib/murmur # data\"   # quoted\n"
                                  "network_key_file = /etc/murmur/network.key\n"
                                  "\n"
                                  "[seeds]\n"
                                  "seed = 10.0.0.1:7000\n"
                                  "seed = 10.0.0.2:7000\n"
                                  "[model]\n"
                                  "spec = mlp:256,128\n"
                                  "dataset = fashion-mnist\n"
                                  "batch = 64\n"
                                  "lr = 0.05\n"
                                  "schedule = step:5000:0.5\n"
                                  "  ; indented comment\n"
                                  "[mixing]\n"
                                  "algorithm = gossip\n"
                                  "topology = one-peer-exponential\n"
                                  "bits = 8\n"
                                  "[checkpoint]\n"
                                  "every_steps = 500\n"
                                  "[metrics]\n"
                                  "listen = 127.0.0.1:9100\n"
                                  "[log]\n"
                                  "level = debug\n";
    put("fuzz_config", "example", example, sizeof example - 1);
}

/* ---- fuzz_scenario: a scenario file ---- */
static void seeds_scenario(void)
{
    static sim_scenario sc;
    sim_scenario_defaults(&sc);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        die("open_memstream");
    sim_scenario_write(&sc, f);
    fclose(f);
    put_stream("fuzz_scenario", "defaults", text, len);
    static const char *const files[] = {"sim/examples/fashion-gossip.ini",
                                        "sim/experiments/exp7_churn.ini",
                                        "sim/experiments/exp4_slownet.ini"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        size_t n;
        uint8_t *b = slurp(files[i], &n);
        const char *base = strrchr(files[i], '/') + 1;
        put("fuzz_scenario", base, b, n);
        free(b);
    }
}

static void be32_put(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8),
    p[3] = (uint8_t)v;
}

/* ---- fuzz_idx: flags, u16 image length, image file, label file ---- */
static void seeds_idx(void)
{
    static const struct {
        uint32_t n, rows, cols;
        uint8_t flags;
        const char *name;
    } cases[] = {
        {3, 2, 2, 0, "3x2x2"},
        {2, 1, 5, 1 | 2 | 4, "gzip-10classes"},
        {4, 3, 1, 8, "3classes"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        uint32_t n = cases[c].n, dim = cases[c].rows * cases[c].cols;
        size_t ilen = 16 + (size_t)n * dim, llen = 8 + n;
        uint8_t b[3 + 256];
        b[0] = cases[c].flags;
        b[1] = (uint8_t)(ilen >> 8), b[2] = (uint8_t)ilen;
        uint8_t *img = b + 3, *lab = img + ilen;
        be32_put(img, 0x803), be32_put(img + 4, n);
        be32_put(img + 8, cases[c].rows), be32_put(img + 12, cases[c].cols);
        for (size_t k = 0; k < (size_t)n * dim; k++)
            img[16 + k] = (uint8_t)(k * 37 + 11);
        be32_put(lab, 0x801), be32_put(lab + 4, n);
        for (uint32_t i = 0; i < n; i++)
            lab[8 + i] = (uint8_t)(i % 3);
        put("fuzz_idx", cases[c].name, b, 3 + ilen + llen);
    }
}

/* ---- fuzz_csv: classes selector, then a CSV file ---- */
static void seeds_csv(void)
{
    static const char plain[] = "0,0.5,1,-2\n1,3e-3,4,5\n2,-0,0.25,7e10\n";
    static const char header[] = "label,a,b\n\n1, 2.5 ,\t3\r\n0,1,2\n   \n";
    put_with("fuzz_csv", "plain", 0, plain, sizeof plain - 1);
    put_with("fuzz_csv", "header-blank-crlf", 2, header, sizeof header - 1);
}

/* A golden vector file: "key value" lines, then "bytes" and hex lines. */
typedef struct vec {
    char key[8][32];
    unsigned long long val[8];
    int nkeys;
    uint8_t bytes[8192];
    size_t len;
} vec;

static int vec_read(const char *path, vec *v)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    memset(v, 0, sizeof *v);
    char line[512];
    int in_bytes = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#')
            continue;
        if (in_bytes) {
            for (char *p = line; p[0] && p[1] && v->len < sizeof v->bytes; p += 2) {
                unsigned b;
                if (sscanf(p, "%2x", &b) != 1)
                    break;
                v->bytes[v->len++] = (uint8_t)b;
            }
            continue;
        }
        if (!strncmp(line, "bytes", 5)) {
            in_bytes = 1;
            continue;
        }
        if (v->nkeys < 8 &&
            sscanf(line, "%31s %lli", v->key[v->nkeys], (long long *)&v->val[v->nkeys]) == 2)
            v->nkeys++;
    }
    fclose(f);
    return 0;
}

static unsigned long long vec_get(const vec *v, const char *key, unsigned long long def)
{
    for (int i = 0; i < v->nkeys; i++)
        if (!strcmp(v->key[i], key))
            return v->val[i];
    return def;
}

/* ---- fuzz_wire and fuzz_codec: from the golden vectors ---- */
static void seeds_vectors(void)
{
    DIR *d = opendir(vectors_dir);
    if (!d)
        die(vectors_dir);
    struct dirent *e;
    static vec v;
    while ((e = readdir(d)) != NULL) {
        size_t nl = strlen(e->d_name);
        if (nl < 5 || strcmp(e->d_name + nl - 4, ".hex"))
            continue;
        char path[1024], name[256];
        snprintf(path, sizeof path, "%s/%s", vectors_dir, e->d_name);
        snprintf(name, sizeof name, "%.*s", (int)(nl - 4), e->d_name);
        if (vec_read(path, &v))
            die(path);
        if (!strncmp(e->d_name, "wire_", 5)) {
            /* the frame: the bytes, zero-padded to frame_len when given */
            size_t n = (size_t)vec_get(&v, "frame_len", v.len);
            if (n < v.len || n > sizeof v.bytes)
                n = v.len;
            put("fuzz_wire", name, v.bytes, n);
        } else if (!strncmp(e->d_name, "codec_", 6)) {
            static const unsigned widths[] = {32, 16, 8, 4, 2, 1};
            unsigned bits = (unsigned)vec_get(&v, "bits", 8), w = 0;
            while (w < 5 && widths[w] != bits)
                w++;
            unsigned block = (unsigned)vec_get(&v, "block", 128) - 1;
            unsigned n = (unsigned)vec_get(&v, "n", 1) - 1;
            uint8_t *b = malloc(6 + v.len);
            if (!b)
                die("malloc");
            b[0] = (uint8_t)w, b[1] = (uint8_t)(block >> 8), b[2] = (uint8_t)block;
            b[3] = (uint8_t)(n >> 8), b[4] = (uint8_t)n, b[5] = 0; /* decode */
            memcpy(b + 6, v.bytes, v.len);
            put("fuzz_codec", name, b, 6 + v.len);
            free(b);
        }
    }
    closedir(d);
}

/* ---- fuzz_channel: op scripts (see the target) ---- */
static void seeds_channel(void)
{
    /* I1 <-> R1 handshake, a frame, its replay and a flipped copy */
    static const uint8_t i1r1[] = {0, 0, 0, 1, 0, 3, 0,   0,   3,   1,   1,   0,   0,   0,   0,  1,
                                   2, 3, 0, 6, 0, 5, 'h', 'e', 'l', 'l', 'o', 1,   3,   3,   0,  1,
                                   3, 3, 0, 2, 3, 3, 20,  1,   6,   3,   4,   'b', 'a', 'c', 'k'};
    /* I2 <-> R2, allow-list on (C is not on it: R2 refuses the HELLO) */
    static const uint8_t i2r2[] = {1, 0, 1, 1, 0, 4, 0, 0, 4, 1, 1, 1, 0, 0, 1, 1, 2, 4, 0};
    /* I3 (other network key) says HELLO to R1; I1 expects B but meets R2 */
    static const uint8_t wrong[] = {2, 0, 2, 1, 0, 3,  0, 0, 0, 1, 1, 4, 0, 0, 4,
                                    1, 2, 0, 0, 5, 60, 3, 7, 4, 3, 3, 1, 2, 3};
    /* I1's HELLO to R1, then replayed to R1b (same agent): refused */
    static const uint8_t replay[] = {0, 0, 0, 1, 0, 3, 0, 1, 0, 5, 0, 0, 3, 1, 1, 0, 0};
    /* key ring: I3 (K2) with R1 (K, K2), auth-only, a frame */
    static const uint8_t ring[] = {4 | 8, 0, 2, 1, 0, 3, 0, 0,   3,   1,   1, 2, 0, 0, 2,
                                   1,     2, 3, 0, 6, 2, 3, 'a', 'b', 'c', 1, 3, 3, 0};
    put("fuzz_channel", "i1-r1", i1r1, sizeof i1r1);
    put("fuzz_channel", "replay-r1b", replay, sizeof replay);
    put("fuzz_channel", "ring-auth-only", ring, sizeof ring);
    put("fuzz_channel", "i2-r2-allow", i2r2, sizeof i2r2);
    put("fuzz_channel", "wrong-key-peer", wrong, sizeof wrong);
}

/* ---- fuzz_session: op scripts (see the target) ---- */
static void seeds_session(void)
{
    /* rekey every 2 frames and every millisecond: seal, deliver, replay, both
     * ways, a flipped bit, a cut record, garbage, lost frames, a HELLO */
    static const uint8_t rekey[] = {0x05, 0, 3, 'a', 'b', 'c', 1, 0, 1, 0, 8,  2, 'x', 'y', 9,
                                    0,    5, 5, 0,   1,   'z', 1, 1, 2, 1, 14, 3, 3,   1,   10,
                                    4,    3, 1, 2,   3,   6,   2, 7, 1, 0, 0,  1, 2};
    /* default bounds: out of order, then 1024 lost frames push the first
     * ones out of the window */
    static const uint8_t window[] = {0x00, 0, 1, 'a', 0, 1, 'b', 0, 1, 'c', 1, 2,  1,
                                     0,    1, 1, 1,   1, 6, 63,  0, 1, 'd', 1, 3,  1,
                                     0,    8, 0, 9,   0, 1, 3,   3, 0, 5,   0, 11, 9};
    put("fuzz_session", "rekey", rekey, sizeof rekey);
    put("fuzz_session", "window", window, sizeof window);

    /* The layout of a real REKEY_INIT (a session of our own, rekeying after
     * 2 frames, opened with the receiver's key), forged into the target's
     * session by the peer: a well-formed, badly signed rekey. */
    if (net_init() != NET_OK)
        die("net_init");
    net_identity ia, ib;
    uint8_t seed[32], pk[32], sk[64], key[NET_NETWORK_KEY_SIZE];
    memset(seed, 0x61, sizeof seed);
    crypto_sign_seed_keypair(pk, sk, seed);
    net_identity_from_secret(&ia, sk);
    memset(seed, 0x62, sizeof seed);
    crypto_sign_seed_keypair(pk, sk, seed);
    net_identity_from_secret(&ib, sk);
    memset(key, 0x5A, sizeof key);
    net_channel_config ci = {.self = &ia, .network_key = key, .initiator = 1, .rekey_frames = 2};
    net_channel_config cr = {.self = &ib, .network_key = key, .rekey_frames = 2};
    net_channel *i = NULL, *r = NULL;
    if (net_channel_create(&i, &ci, 0) || net_channel_create(&r, &cr, 0))
        die("net_channel_create");
    for (int k = 0; k < 3; k++) {
        net_channel *from = k == 1 ? r : i, *to = k == 1 ? i : r;
        const uint8_t *rec;
        size_t len;
        uint8_t buf[NET_CHANNEL_HS_MAX], *plain;
        size_t pl;
        if (net_channel_poll_send(from, &rec, &len) != 1)
            die("handshake");
        memcpy(buf, rec, len);
        net_channel_recv(to, buf, len, 0, &plain, &pl);
    }
    uint8_t out[64], content[NET_CHANNEL_REKEY_PAYLOAD];
    size_t ol;
    const uint8_t *rec = NULL;
    size_t len = 0;
    for (int k = 0; k < 4 && !rec; k++) {
        if (net_channel_seal(i, (const uint8_t *)"x", 1, out, sizeof out, &ol, 0))
            die("net_channel_seal");
        if (net_channel_poll_send(i, &rec, &len) != 1)
            rec = NULL;
    }
    if (!rec || len != NET_CHANNEL_REKEY_SIZE)
        die("no REKEY_INIT");
    uint8_t tx[32], rx[32], nonce[12] = {0};
    net_channel_debug_keys(r, tx, rx);
    memcpy(nonce + 4, rec + 5, 8);
    if (crypto_aead_chacha20poly1305_ietf_decrypt_detached(
            content, NULL, rec + NET_CHANNEL_HEADER_SIZE, NET_CHANNEL_REKEY_PAYLOAD,
            rec + NET_CHANNEL_HEADER_SIZE + NET_CHANNEL_REKEY_PAYLOAD, rec, NET_CHANNEL_HEADER_SIZE,
            nonce, rx))
        die("REKEY_INIT does not open");
    net_channel_destroy(i);
    net_channel_destroy(r);
    /* Keep its kind and epoch; a fixed ephemeral key and a signature by a
     * fixed key make the seed the same on every run (the real ones are
     * random, and no signature of our session is valid in the target's). */
    uint8_t esk[32];
    memset(esk, 0x63, sizeof esk);
    crypto_scalarmult_base(content + 5, esk);
    crypto_sign_detached(content + 37, NULL, content, 37, ia.sk);
    uint8_t b[16 + NET_CHANNEL_REKEY_PAYLOAD];
    size_t n = 0;
    b[n++] = 0x00;                        /* no rekey bound in reach */
    b[n++] = 0, b[n++] = 1, b[n++] = 'a'; /* a frame I -> R */
    b[n++] = 1, b[n++] = 0;               /* delivered */
    b[n++] = 7, b[n++] = 0x81;            /* forge a REKEY record from I */
    b[n++] = NET_CHANNEL_REKEY_PAYLOAD;
    memcpy(b + n, content, sizeof content);
    n += sizeof content;
    put("fuzz_session", "forged-rekey-init", b, n);
    b[6] = 0x0f; /* from R instead (the direction bit) */
    put("fuzz_session", "forged-rekey-from-r", b, n);
}

/* ---- fuzz_swim: options byte, then frames to member 1 ---- */
static void *m_alloc(void *ctx, size_t n)
{
    (void)ctx;
    return malloc(n ? n : 1);
}

static void m_free(void *ctx, void *p)
{
    (void)ctx;
    free(p);
}

/* The fuzz_node seed of the run where member 2 joins through member 1
 * ("join-to-us"): the start of the mixing seeds (seeds_node_mix). */
static uint8_t node_join[16384];
static size_t node_join_len;

/* Members 1 ("self"), 2 ("a2") and 3 ("a3") run for `periods` probe
 * periods; member `joiner` joins through `seed_addr`. Every frame to member
 * 1 is appended to the seed as one fuzz_swim frame. */
static void swim_run(const char *name, uint8_t options, uint64_t joiner, const char *seed_addr,
                     int periods)
{
    static uint8_t seed[16384], node_seed[16384];
    size_t n = 0, nn = 0;
    seed[n++] = options;
    node_seed[nn++] = (uint8_t)(options << 1); /* fuzz_node: bit 1 joins */
    gossip_manifest man;
    fuzz_swim_manifest(&man);
    model_rng rng[3];
    gossip_env env[3];
    gossip_swim *sw[3];
    static const char *const addrs[3] = {"self", "a2", "a3"};
    for (int i = 0; i < 3; i++) {
        model_rng_seed(&rng[i], 11 + (uint64_t)i, 0);
        env[i] = (gossip_env){m_alloc, m_free, model_rng_callback, NULL, &rng[i]};
        gossip_swim_config c = {.self_id = (uint64_t)i + 1,
                                .self_addr = addrs[i],
                                .members_max = FUZZ_SWIM_MEMBERS,
                                .probe_interval_us = FUZZ_SWIM_PERIOD_US,
                                .manifest = &man};
        if (gossip_swim_create(&sw[i], &env[i], &c))
            die("gossip_swim_create");
    }
    for (int i = 0; i < 3; i++)
        if (i + 1 != (int)joiner && i != 0 && gossip_swim_join(sw[i], &addrs[0], 1, 0))
            die("gossip_swim_join");
    if (gossip_swim_join(sw[joiner - 1], &seed_addr, 1, 0))
        die("gossip_swim_join");
    for (gossip_time_us now = 0; now < (gossip_time_us)periods * FUZZ_SWIM_PERIOD_US;
         now += FUZZ_SWIM_PERIOD_US / 4) {
        for (int i = 0; i < 3; i++) {
            gossip_swim_tick(sw[i], now);
            gossip_send o;
            while (gossip_swim_poll_send(sw[i], &o, now) == 1) {
                int to = -1;
                for (int k = 0; k < 3; k++)
                    if (o.dest == (uint64_t)k + 1 ||
                        (o.dest_addr && !strcmp(o.dest_addr, addrs[k])))
                        to = k;
                gossip_header h;
                if (to < 0 || gossip_header_decode(o.frame, o.len, &h))
                    continue;
                const uint8_t *pl = o.frame + GOSSIP_HEADER_SIZE;
                size_t len = o.len - GOSSIP_HEADER_SIZE;
                if (to == 0 && n + 4 + len <= sizeof seed) {
                    seed[n++] = (uint8_t)(h.type - 1);
                    seed[n++] = (uint8_t)(h.sender - 2);
                    seed[n++] = (uint8_t)(len >> 8);
                    seed[n++] = (uint8_t)len;
                    memcpy(seed + n, pl, len);
                    n += len;
                }
                if (to == 0 && nn + 3 + o.len <= sizeof node_seed) {
                    node_seed[nn++] = (uint8_t)(h.sender - 2 + FUZZ_SWIM_SENDERS);
                    node_seed[nn++] = (uint8_t)(o.len >> 8);
                    node_seed[nn++] = (uint8_t)o.len;
                    memcpy(node_seed + nn, o.frame, o.len);
                    nn += o.len;
                }
                gossip_swim_recv(sw[to], h.sender, &h, pl, len, now);
            }
        }
    }
    put("fuzz_swim", name, seed, n);
    put("fuzz_node", name, node_seed, nn);
    if (joiner == 2) {
        memcpy(node_join, node_seed, nn);
        node_join_len = nn;
    }
    for (int i = 0; i < 3; i++)
        gossip_swim_destroy(sw[i]);
}

static void seeds_swim(void)
{
    gossip_manifest man;
    fuzz_swim_manifest(&man);
    uint8_t mb[GOSSIP_MANIFEST_WIRE_MAX];
    gossip_writer w;
    gossip_writer_init(&w, mb, sizeof mb);
    gossip_manifest_write(&w, &man);
    put("fuzz_manifest", "fixture", mb, w.len);
    memset(&man, 0, sizeof man);
    gossip_writer_init(&w, mb, sizeof mb);
    gossip_manifest_write(&w, &man);
    put("fuzz_manifest", "zero", mb, w.len);
    swim_run("join-to-us", 0, 2, "self", 4);
    swim_run("we-join", 1, 1, "a2", 4);
}

/* ---- fuzz_shards, fuzz_xfer: options byte, then network ops ---- */
static void seeds_network(void)
{
    uint8_t b[64];
    size_t n = 0;
    b[n++] = 0x03; /* chunks of 4 bytes, window 1 */
    for (int k = 0; k < 16; k++)
        b[n++] = 0x00, b[n++] = 0x08; /* deliver both ways, in order */
    put("fuzz_shards", "in-order", b, n);
    /* a flipped bit, a drop, a duplicate, a reordering, a cut frame, time,
     * an injected WANT */
    static const uint8_t hostile[] = {0x0a, 0x00, 0x08, 0x02, 40,   3,    0x00, 0x08, 0x01, 0x09,
                                      0x04, 100,  0x05, 0x0d, 0x06, 0x0e, 0x00, 0x08, 0x07, 20,
                                      0x0f, 9,    0x03, 0,    47,   0x00, 0x08, 0x00, 0x08};
    put("fuzz_shards", "hostile", hostile, sizeof hostile);
    /* r = 1: surplus copies move to their holder; a partition and back */
    n = 0;
    b[n++] = 0x23;
    for (int k = 0; k < 8; k++)
        b[n++] = 0x00, b[n++] = 0x08;
    b[n++] = 0x04, b[n++] = 0x81; /* node 1 alone */
    b[n++] = 0x04, b[n++] = 60;   /* 1.2 s */
    b[n++] = 0x04, b[n++] = 0x80; /* node 1 back to {1, 2} */
    for (int k = 0; k < 8; k++)
        b[n++] = 0x00, b[n++] = 0x08;
    put("fuzz_shards", "r1-partition", b, n);
    n = 0;
    b[n++] = 0x11; /* 2 values a chunk, window 1, node 1 has a checkpoint */
    for (int k = 0; k < 16; k++)
        b[n++] = 0x00, b[n++] = 0x08;
    put("fuzz_xfer", "in-order", b, n);
    b[0] = 0x21; /* 2 values a chunk, window 1, node 2 has a recent checkpoint */
    put("fuzz_xfer", "resume", b, n);
    static const uint8_t xhostile[] = {0x06, 0x00, 0x08, 0x02, 30,   5,    0x00, 0x08, 0x01, 0x09,
                                       0x04, 60,   0x05, 0x0d, 0x06, 0x0e, 0x00, 0x08, 0x07, 12,
                                       0x0f, 4,    0x03, 1,    7,    11,   0x00, 0x08, 0x00, 0x08};
    put("fuzz_xfer", "hostile", xhostile, sizeof xhostile);
}

/* ---- fuzz_mix: algorithm byte, then frames to mixer 2 ---- */
typedef struct mframe {
    int to;
    size_t len;
    uint8_t *f;
} mframe;

#define MQ_MAX 4096u

/* Tick the nm mixers (ids 1..nm) that are due at now and append every frame
 * they send to one of them to q (at most MQ_MAX frames in all). */
static void mix_collect(gossip_mix **mx, int nm, gossip_time_us now, mframe *q, size_t *qt)
{
    for (int i = 0; i < nm; i++) {
        if (gossip_mix_deadline(mx[i]) <= now)
            gossip_mix_tick(mx[i], now);
        gossip_send o;
        while (gossip_mix_poll_send(mx[i], &o, now) == 1 && *qt < MQ_MAX) {
            if (o.dest < 1 || o.dest > (uint64_t)nm)
                continue;
            q[*qt].to = (int)o.dest - 1;
            q[*qt].len = o.len;
            q[*qt].f = malloc(o.len);
            if (!q[*qt].f)
                die("malloc");
            memcpy(q[*qt].f, o.frame, o.len);
            (*qt)++;
        }
    }
}

/* Create nm mixers (ids[i], generator seeded seed0 + i, view v) running
 * algo at bits, and start a round on each, member i on its own vector. */
static void mixers_start(gossip_mix **mx, gossip_env *env, model_rng *rng, int nm,
                         const uint64_t *ids, const gossip_view *v, gossip_mix_algo algo,
                         unsigned bits, uint64_t seed0)
{
    float x[FUZZ_MIX_DIM];
    for (int i = 0; i < nm; i++) {
        model_rng_seed(&rng[i], seed0 + (uint64_t)i, 0);
        env[i] = (gossip_env){m_alloc, m_free, model_rng_callback, NULL, &rng[i]};
        gossip_mix_config c;
        fuzz_mix_config(&c, ids[i], algo, bits);
        if (gossip_mix_create(&mx[i], &env[i], &c) || gossip_mix_set_view(mx[i], v, 0))
            die("gossip_mix_create");
        for (uint32_t k = 0; k < FUZZ_MIX_DIM; k++)
            x[k] = (float)(i + 1) * 0.25f * (float)k - 1.0f;
        if (gossip_mix_start(mx[i], x, 0))
            die("gossip_mix_start");
    }
}

/* Four real mixers run two rounds of algo at 8 bits; every frame to mixer
 * 2 becomes one fuzz_mix frame, its round given relative to mixer 2's. */
static void mix_run(gossip_mix_algo algo)
{
    static const uint8_t types[] = {GOSSIP_MSG_MIX_PUSH, GOSSIP_MSG_MIX_REPLY, GOSSIP_MSG_PUSHSUM,
                                    GOSSIP_MSG_AR_CHUNK, GOSSIP_MSG_AR_ABORT};
    static uint8_t seed[32768];
    size_t n = 0;
    seed[n++] = (uint8_t)((2u << 3) | (unsigned)algo); /* widths[2] = 8 bits */
    model_rng rng[4];
    gossip_env env[4];
    gossip_mix *mx[4];
    uint64_t ids[4] = {1, 2, 3, 4};
    gossip_view v = {.epoch = FUZZ_MIX_EPOCH, .n = 4, .ids = ids};
    float x[FUZZ_MIX_DIM];
    mixers_start(mx, env, rng, 4, ids, &v, algo, 8, 21);
    static mframe q[MQ_MAX];
    size_t qh = 0, qt = 0;
    int rounds_done = 0;
    for (gossip_time_us now = 0; now < 200000 && rounds_done < 8; now += 100) {
        mix_collect(mx, 4, now, q, &qt);
        while (qh < qt) {
            mframe *fr = &q[qh++];
            gossip_header h;
            if (!gossip_header_decode(fr->f, fr->len, &h)) {
                const uint8_t *pl = fr->f + GOSSIP_HEADER_SIZE;
                size_t len = fr->len - GOSSIP_HEADER_SIZE;
                int ti = 0;
                while (ti < 5 && types[ti] != h.type)
                    ti++;
                if (fr->to == 1 && ti < 5 && h.sender != 2 && n + 6 + len <= sizeof seed) {
                    long off = (long)h.round - (long)gossip_mix_round(mx[1]) + 1;
                    seed[n++] = (uint8_t)ti;
                    seed[n++] = (uint8_t)(h.sender == 1 ? 0 : h.sender - 2);
                    seed[n++] = (uint8_t)(off < 0 ? 0 : off > 3 ? 3 : off);
                    seed[n++] = 2; /* take and restart when done */
                    seed[n++] = (uint8_t)(len >> 8);
                    seed[n++] = (uint8_t)len;
                    memcpy(seed + n, pl, len);
                    n += len;
                }
                gossip_mix_recv(mx[fr->to], h.sender, &h, pl, len, now);
            }
            free(fr->f);
        }
        qh = qt = 0;
        for (int i = 0; i < 4; i++)
            if (gossip_mix_get_state(mx[i]) == GOSSIP_MIX_DONE) {
                int outcome;
                gossip_mix_take(mx[i], x, &outcome);
                gossip_mix_start(mx[i], x, now);
                rounds_done++;
            }
    }
    put("fuzz_mix", gossip_mix_algo_names[algo], seed, n);
    for (int i = 0; i < 4; i++)
        gossip_mix_destroy(mx[i]);
}

static void seeds_mix(void)
{
    for (int a = 0; a < GOSSIP_MIX_ALGO_COUNT; a++)
        mix_run((gossip_mix_algo)a);
}

/* ---- fuzz_node: membership traffic, then real mixing frames ---- */

/* The "join-to-us" membership traffic brings members 2 and 3 into node
 * 1's view; then real mixers run rounds of the rule fuzz_node_algo(options)
 * picks, and every frame to mixer 1 is appended as one fuzz_node frame with
 * the caller's turn after it (sender byte bit 7) and its round counted from
 * mixer 1's, as the target counts it (the target puts the node's view id
 * on it). Three mixers of the view {1, 2, 3}; with `late`, four of
 * {1, 2, 3, 4}, and member 4's JOIN reaches node 1 only once mixer 1's first
 * round is over: the frames of that round name the view with member 4
 * (bit 6, epoch field 4), so the node keeps them until the JOIN brings it
 * to that view and replays them then. */
static void node_mix_run(const char *name, uint8_t options, int late)
{
    static uint8_t seed[16384];
    static mframe q[MQ_MAX];
    if (!node_join_len)
        die("node_mix_run: no membership traffic");
    size_t n = 0;
    seed[n++] = options;
    memcpy(seed + n, node_join + 1, node_join_len - 1);
    n += node_join_len - 1;
    gossip_mix_algo algo = fuzz_node_algo(options);
    int nm = late ? 4 : 3;
    model_rng rng[4];
    gossip_env env[4];
    gossip_mix *mx[4];
    uint64_t ids[4] = {1, 2, 3, 4};
    gossip_view v = {.epoch = 1, .n = (uint32_t)nm, .ids = ids};
    float x[FUZZ_MIX_DIM];
    mixers_start(mx, env, rng, nm, ids, &v, algo, fuzz_node_bits(options), 31);
    /* member 4's JOIN to "self" */
    uint8_t join[GOSSIP_HEADER_SIZE + 512];
    size_t join_len = 0;
    if (late) {
        gossip_manifest man;
        fuzz_swim_manifest(&man);
        model_rng r4;
        model_rng_seed(&r4, 14, 0);
        gossip_env e4 = {m_alloc, m_free, model_rng_callback, NULL, &r4};
        gossip_swim_config c = {.self_id = 4,
                                .self_addr = "a4",
                                .members_max = FUZZ_SWIM_MEMBERS,
                                .probe_interval_us = FUZZ_SWIM_PERIOD_US,
                                .manifest = &man};
        gossip_swim *sw;
        const char *self = "self";
        if (gossip_swim_create(&sw, &e4, &c) || gossip_swim_join(sw, &self, 1, 0))
            die("gossip_swim_create");
        gossip_swim_tick(sw, 0);
        gossip_send o;
        while (gossip_swim_poll_send(sw, &o, 0) == 1)
            if (!join_len && o.dest_addr && !strcmp(o.dest_addr, "self") && o.len <= sizeof join) {
                memcpy(join, o.frame, o.len);
                join_len = o.len;
            }
        gossip_swim_destroy(sw);
        if (!join_len)
            die("node_mix_run: no JOIN");
    }
    size_t qh = 0, qt = 0;
    int rounds_done = 0;
    for (gossip_time_us now = 0; now < 200000 && rounds_done < 6; now += 100) {
        mix_collect(mx, nm, now, q, &qt);
        while (qh < qt) {
            mframe *fr = &q[qh++];
            gossip_header h;
            if (!gossip_header_decode(fr->f, fr->len, &h)) {
                if (fr->to == 0 && n + 3 + fr->len <= sizeof seed) {
                    uint8_t sender = (uint8_t)(h.sender - 2 + FUZZ_SWIM_SENDERS);
                    if (late && !rounds_done) { /* the view with member 4, round as is */
                        gossip_put_u64(fr->f + 16, 4);
                        sender |= 0x40;
                    } else {
                        gossip_put_u64(fr->f + 24, h.round - gossip_mix_round(mx[0]));
                        sender |= 0x80;
                    }
                    seed[n++] = sender;
                    seed[n++] = (uint8_t)(fr->len >> 8);
                    seed[n++] = (uint8_t)fr->len;
                    memcpy(seed + n, fr->f, fr->len);
                    n += fr->len;
                }
                gossip_mix_recv(mx[fr->to], h.sender, &h, fr->f + GOSSIP_HEADER_SIZE,
                                fr->len - GOSSIP_HEADER_SIZE, now);
            }
            free(fr->f);
        }
        qh = qt = 0;
        for (int i = 0; i < nm; i++)
            if (gossip_mix_get_state(mx[i]) == GOSSIP_MIX_DONE) {
                int outcome;
                gossip_mix_take(mx[i], x, &outcome);
                gossip_mix_start(mx[i], x, now);
                if (i != 0)
                    continue;
                if (late && !rounds_done && n + 3 + join_len <= sizeof seed) {
                    seed[n++] = 0x80 | (4 - 2 + FUZZ_SWIM_SENDERS); /* JOIN, then our turn */
                    seed[n++] = (uint8_t)(join_len >> 8);
                    seed[n++] = (uint8_t)join_len;
                    memcpy(seed + n, join, join_len);
                    n += join_len;
                }
                rounds_done++;
            }
    }
    put("fuzz_node", name, seed, n);
    for (int i = 0; i < nm; i++)
        gossip_mix_destroy(mx[i]);
}

static void seeds_node_mix(void)
{
    /* options bits 2..4: gossip, push-sum, dpsgd, choco, allreduce at 8
     * bits; choco also at 4 bits (bits 5..6 = 2) */
    node_mix_run("mix-gossip", 0 << 2, 0);
    node_mix_run("mix-push-sum", 1 << 2, 0);
    node_mix_run("mix-dpsgd", 2 << 2, 0);
    node_mix_run("mix-choco", 3 << 2, 0);
    node_mix_run("mix-allreduce", 4 << 2, 0);
    node_mix_run("mix-choco-4bit", 3 << 2 | 2 << 5, 0);
    /* member 4 joins late: frames of its view kept, then replayed */
    node_mix_run("mix-dpsgd-late-join", 2 << 2, 1);
    node_mix_run("mix-allreduce-late-join", 4 << 2, 1);
}

/* ---- fuzz_keys: reader and mode selector, then a key file ---- */
static void seeds_keys(void)
{
    if (sodium_init() < 0)
        die("sodium_init");
    uint8_t pk[2][32], sk[2][64], seed[32];
    for (int i = 0; i < 2; i++) {
        memset(seed, 0x40 + i, sizeof seed);
        crypto_sign_seed_keypair(pk[i], sk[i], seed);
    }
    char h0[AGENT_KEYS_HEX_SIZE], h1[AGENT_KEYS_HEX_SIZE], text[512];
    agent_keys_hex(pk[0], h0);
    agent_keys_hex(pk[1], h1);
    int n = snprintf(text, sizeof text, "# cluster\n\n%s\n  %s \r\n# %s\n", h0, h1, h0);
    put_with("fuzz_keys", "allow-list", 0 | 1 << 2, text, (size_t)n); /* 0644 */
    n = snprintf(text, sizeof text, "%s\n", h0);
    put_with("fuzz_keys", "public", 1, text, (size_t)n);
    put_with("fuzz_keys", "secret", 2, sk[0], 64);
    memset(seed, 0x5A, sizeof seed);
    put_with("fuzz_keys", "network", 3, seed, 32);
}

/* ---- fuzz_json: mode byte, then a document or member descriptions ---- */
static void seeds_json(void)
{
    char buf[1024];
    buf[0] = 0; /* reader */
    common_json j;
    common_json_init_buf(&j, buf + 1, sizeof buf - 1, 2);
    common_json_object_begin(&j, NULL);
    common_json_string(&j, "state", "training");
    common_json_u64(&j, "step", 21000);
    common_json_number(&j, "accuracy", 0.8712);
    common_json_string(&j, "address", "tcp://10.0.0.5:7000");
    common_json_bool(&j, "ready", 1);
    common_json_null(&j, "last_error");
    common_json_string(&j, "note", "tab\there \"quoted\" \x01");
    common_json_end(&j);
    size_t len;
    if (common_json_finish(&j, &len))
        die("common_json_finish");
    put("fuzz_json", "status", buf, 1 + len);
    /* writer: a string, a u64, an i64, a number, a bool, a null */
    static const uint8_t members[] = {
        1,    0,    5,    's',  't',  'a',  't',  'e', 3, 'o', 'k', '\n', 1,    4,    's',
        't',  'e',  'p',  0,    0,    0,    0,    0,   0, 82,  8,   2,    1,    'i',  0xff,
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe, 3,   3, 'a', 'c', 'c',  0x3f, 0xeb, 0xe0,
        0xde, 0xd2, 0x88, 0xce, 0x70, 4,    1,    'b', 1, 5,   1,   'z'};
    put("fuzz_json", "writer", members, sizeof members);
}

/* ---- fuzz_catalog: a catalog as `murmur shard` writes it ---- */
static void seeds_catalog(void)
{
    char text[1024];
    int n = snprintf(text, sizeof text,
                     "# murmur catalog v1 shards=3 data=fashion-mnist alpha=0 seed=1 classes=10\n");
    for (int s = 0; s < 3; s++) {
        uint8_t id[32];
        for (int k = 0; k < 32; k++)
            id[k] = (uint8_t)(s * 77 + k * 13);
        char hex[AGENT_KEYS_HEX_SIZE];
        agent_keys_hex(id, hex);
        n += snprintf(text + n, sizeof text - (size_t)n, "%s %d %d\n", hex, s, 20000 - s);
    }
    put("fuzz_catalog", "three", text, (size_t)n);
}

/* ---- fuzz_hello: options, then forged HELLOs (see the target) ---- */
static size_t hello(uint8_t *b, int flags, int key, int who, int rid, int dsec, int sig, int eph0,
                    int tamper)
{
    size_t n = 0;
    b[n++] = (uint8_t)flags, b[n++] = (uint8_t)key, b[n++] = (uint8_t)who, b[n++] = (uint8_t)rid;
    b[n++] = (uint8_t)((unsigned)dsec >> 8), b[n++] = (uint8_t)dsec, b[n++] = 7;
    b[n++] = (uint8_t)sig;
    if (sig == 1)
        b[n++] = 9; /* flip this bit */
    b[n++] = (uint8_t)eph0;
    if (eph0)
        memset(b + n, 0, 32), n += 32; /* the all-zero point: low order */
    b[n++] = (uint8_t)tamper;
    return n;
}

static void seeds_hello(void)
{
    uint8_t b[1024];
    size_t n = 0;
    b[n++] = 0;                                 /* no allow-list, one key, no clock check */
    n += hello(b + n, 0, 0, 0, 1, 0, 0, 0, 0);  /* A to B: accepted */
    n += hello(b + n, 0, 0, 0, 1, 0, 0, 0, 0);  /* the same again: a replay */
    n += hello(b + n, 0, 0, 0, 0, 1, 0, 0, 0);  /* newer, to anyone: accepted */
    n += hello(b + n, 0, 0, 0, 2, 2, 0, 0, 0);  /* meant for A: wrong peer */
    n += hello(b + n, 0, 0, 2, 1, 3, 0, 0, 0);  /* B's own key */
    n += hello(b + n, 1, 0, 1, 1, 4, 0, 0, 0);  /* C, auth-only flag */
    n += hello(b + n, 4, 0, 1, 1, 5, 0, 0, 0);  /* unknown flag bit */
    n += hello(b + n, 0, 2, 0, 1, 6, 0, 0, 0);  /* a key B lacks */
    n += hello(b + n, 0, 0, 0, 1, 7, 0, 0, 1);  /* tampered seal */
    n += hello(b + n, 0, 0, 0, 1, 8, 1, 0, 0);  /* a flipped signature bit */
    n += hello(b + n, 0, 0, 0, 1, 9, 2, 0, 0);  /* signed by another key */
    n += hello(b + n, 0, 0, 0, 1, 10, 0, 1, 0); /* weak ephemeral key */
    put("fuzz_hello", "checks", b, n);
    n = 0;
    b[n++] = 1 | 2 | 4;                           /* allow-list {A, B}, ring {K, K2}, clock check */
    n += hello(b + n, 0, 1, 0, 1, 0, 0, 0, 0);    /* A under K2: accepted */
    n += hello(b + n, 0, 0, 1, 1, 1, 0, 0, 0);    /* C: not allowed */
    n += hello(b + n, 0, 0, 0, 1, -700, 0, 0, 0); /* 700 s old: stale */
    n += hello(b + n, 0, 0, 0, 1, -1, 0, 0, 0);   /* 1 s older than the last: the window */
    put("fuzz_hello", "ring-allow-clock", b, n);
}

/* ---- fuzz_spec: shape selector, then a model spec ---- */
static void seeds_spec(void)
{
    static const struct {
        uint8_t shape;
        const char *spec, *name;
    } cases[] = {
        {0, "softmax", "softmax"},
        {0, "mlp:16,8", "mlp"},
        {0, "cnn:c4k3g2,p2,c8k3,p2,f16,d0.5", "cnn-28"},
        {1, "cnn:i3x32x32,c8k5s2p1g4,a2,f10,d0.25", "cnn-32-rgb"},
        {4, "cnn:c4k3,p2s1,c8k2s2p0,f8", "cnn-odd-2classes"},
        {0, MODEL_CNN_DEFAULT, "cnn-default"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        put_with("fuzz_spec", cases[c].name, cases[c].shape, cases[c].spec, strlen(cases[c].spec));
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: mkseeds CORPUS_DIR VECTORS_DIR\n");
        return 2;
    }
    corpus_dir = argv[1];
    vectors_dir = argv[2];
    if (mkdir(corpus_dir, 0755) != 0 && errno != EEXIST)
        die(corpus_dir);
    seeds_vectors();
    seeds_shardfile();
    seeds_channel();
    seeds_session();
    seeds_swim();
    seeds_network();
    seeds_mix();
    seeds_node_mix();
    seeds_keys();
    seeds_json();
    seeds_catalog();
    seeds_hello();
    seeds_spec();
    seeds_checkpoint();
    seeds_config();
    seeds_scenario();
    seeds_idx();
    seeds_csv();
    printf("mkseeds: %u seeds written under %s\n", written, corpus_dir);
    return 0;
}
