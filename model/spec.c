#include "model/spec.h"

#include "model/net.h"

#include <string.h>

/* A decimal integer in [lo, hi] at *p (no sign, no leading zero); *p is
 * moved past it. -1 if there is none or it is out of range. */
static int spec_number(const char **p, uint32_t lo, uint32_t hi, uint32_t *out)
{
    const char *s = *p;
    if (*s < '0' || *s > '9' || (s[0] == '0' && s[1] >= '0' && s[1] <= '9'))
        return -1;
    uint64_t v = 0;
    while (*s >= '0' && *s <= '9') {
        v = v * 10 + (uint64_t)(*s - '0');
        if (v > hi)
            return -1;
        s++;
    }
    if (v < lo)
        return -1;
    *p = s;
    *out = (uint32_t)v;
    return 0;
}

/* "0.DIGITS" with at least one nonzero digit, at most 6 digits: a rate in
 * (0, 1). Parsed by hand, not strtod, so the locale cannot change it. */
static int spec_rate(const char **p, float *out)
{
    const char *s = *p;
    if (s[0] != '0' || s[1] != '.')
        return -1;
    s += 2;
    uint32_t v = 0, scale = 1;
    while (*s >= '0' && *s <= '9') {
        if (scale == 1000000)
            return -1;
        v = v * 10 + (uint32_t)(*s - '0');
        scale *= 10;
        s++;
    }
    if (v == 0)
        return -1;
    *p = s;
    *out = (float)v / (float)scale;
    return 0;
}

static model_op *spec_push(model_arch *a, model_op_kind kind, model_shape in)
{
    if (a->op_count == MODEL_OPS_MAX)
        return NULL;
    model_op *op = &a->ops[a->op_count++];
    *op = (model_op){.kind = kind, .in = in, .out = in};
    return op;
}

/* Give op its parameter slices, in order. */
static void spec_params(model_arch *a, model_op *op, size_t w_count, size_t b_count)
{
    op->w_off = a->param_count;
    op->w_count = w_count;
    op->b_off = a->param_count + w_count;
    op->b_count = b_count;
    a->param_count += w_count + b_count;
}

static model_shape spec_flat(model_shape s)
{
    return (model_shape){1, 1, (uint32_t)model_shape_size(s)};
}

/* Append a dense layer of `width` after the current shape. */
static int spec_dense(model_arch *a, model_shape *cur, uint32_t width, int relu)
{
    model_op *op = spec_push(a, MODEL_OP_DENSE, spec_flat(*cur));
    if (!op)
        return -1;
    op->out = (model_shape){1, 1, width};
    op->relu = relu;
    spec_params(a, op, (size_t)op->in.c * width, width);
    *cur = op->out;
    return 0;
}

static int spec_mlp(model_arch *a, const char *spec, uint32_t classes, char *msg, size_t msg_len)
{
    model_shape cur = a->input;
    if (!strcmp(spec, "softmax"))
        return spec_dense(a, &cur, classes, 0) ? MODEL_ESPEC : MODEL_OK;
    const char *p = spec + 4;
    for (;;) {
        const char *at = p;
        uint32_t w;
        if (*p < '0' || *p > '9') {
            model_msgf(msg, msg_len, "model spec '%s': expected a width at '%s'", spec, p);
            return MODEL_ESPEC;
        }
        if (spec_number(&p, 1, MODEL_WIDTH_MAX, &w)) {
            model_msgf(msg, msg_len, "model spec '%s': width '%.12s' not in [1, %u]", spec, at,
                       MODEL_WIDTH_MAX);
            return MODEL_ESPEC;
        }
        if (a->op_count + 1 >= MODEL_LAYERS_MAX) {
            model_msgf(msg, msg_len, "model spec '%s': more than %u hidden layers", spec,
                       MODEL_LAYERS_MAX - 1);
            return MODEL_ESPEC;
        }
        spec_dense(a, &cur, w, 1);
        if (*p == 0)
            break;
        if (*p != ',') {
            model_msgf(msg, msg_len, "model spec '%s': unexpected '%c'", spec, *p);
            return MODEL_ESPEC;
        }
        p++;
    }
    return spec_dense(a, &cur, classes, 0) ? MODEL_ESPEC : MODEL_OK;
}

/* Optional "s<S>" (and for a convolution "p<P>", "g<G>") suffixes. */
static int spec_suffix(const char **p, char letter, uint32_t lo, uint32_t hi, uint32_t *v)
{
    if (**p != letter)
        return 0;
    (*p)++;
    return spec_number(p, lo, hi, v) ? -1 : 1;
}

/* The image shape of a cnn: from "i<C>x<H>x<W>" at *p, or a square. */
static int spec_input(model_arch *a, const char **p, uint32_t input_dim, const char *spec,
                      char *msg, size_t msg_len)
{
    if (**p == 'i') {
        const char *s = *p + 1;
        uint32_t c, h, w;
        if (spec_number(&s, 1, MODEL_DIM_MAX, &c) || *s++ != 'x' ||
            spec_number(&s, 1, MODEL_DIM_MAX, &h) || *s++ != 'x' ||
            spec_number(&s, 1, MODEL_DIM_MAX, &w) || (*s != ',' && *s)) {
            model_msgf(msg, msg_len,
                       "model spec '%s': input shape must be i<C>x<H>x<W>, e.g. i3x32x32", spec);
            return MODEL_ESPEC;
        }
        if ((uint64_t)c * h * w != input_dim && !a->syntax_only) {
            model_msgf(msg, msg_len,
                       "model spec '%s': input shape %ux%ux%u has %llu features, the data %u", spec,
                       c, h, w, (unsigned long long)c * h * w, input_dim);
            return MODEL_ESPEC;
        }
        a->input = (model_shape){h, w, c};
        *p = *s ? s + 1 : s;
        return MODEL_OK;
    }
    if (a->syntax_only) {
        /* no data yet: an image large enough for any window */
        a->input = (model_shape){MODEL_DIM_MAX, MODEL_DIM_MAX, 1};
        return MODEL_OK;
    }
    uint32_t side = 1;
    while ((uint64_t)side * side < input_dim)
        side++;
    if ((uint64_t)side * side != input_dim) {
        model_msgf(msg, msg_len,
                   "model spec '%s': %u input features are not a square image; give the shape "
                   "first, e.g. cnn:i3x32x32,...",
                   spec, input_dim);
        return MODEL_ESPEC;
    }
    a->input = (model_shape){side, side, 1};
    return MODEL_OK;
}

/* conv: "c<N>k<K>[s<S>][p<P>][g<G>]" at *p (past the 'c'). */
static int spec_conv(model_arch *a, const char **p, model_shape *cur, char *why, size_t why_len)
{
    uint32_t n, k, s = 1, pad, g = 0;
    if (spec_number(p, 1, MODEL_WIDTH_MAX, &n) || *(*p)++ != 'k' ||
        spec_number(p, 1, MODEL_KERNEL_MAX, &k)) {
        model_msgf(why, why_len,
                   "a convolution is c<filters>k<kernel>[s<stride>][p<pad>][g<groups>]");
        return -1;
    }
    pad = (k - 1) / 2;
    if (spec_suffix(p, 's', 1, MODEL_STRIDE_MAX, &s) < 0 ||
        spec_suffix(p, 'p', 0, MODEL_KERNEL_MAX - 1, &pad) < 0 ||
        spec_suffix(p, 'g', 1, n, &g) < 0) {
        model_msgf(why, why_len, "bad stride, padding or groups (stride 1-%u, padding < %u)",
                   MODEL_STRIDE_MAX, MODEL_KERNEL_MAX);
        return -1;
    }
    if (g && n % g) {
        model_msgf(why, why_len, "%u groups do not divide %u filters", g, n);
        return -1;
    }
    if (pad >= k || cur->h + 2 * pad < k || cur->w + 2 * pad < k) {
        model_msgf(why, why_len, "kernel %u with padding %u does not fit the %ux%u input", k, pad,
                   cur->h, cur->w);
        return -1;
    }
    model_op *op = spec_push(a, MODEL_OP_CONV, *cur);
    if (!op) {
        model_msgf(why, why_len, "too many layers");
        return -1;
    }
    op->k = k;
    op->stride = s;
    op->pad = pad;
    model_conv_plan(&op->conv, *cur, n, k, s, pad, MODEL_CONV_AUTO);
    op->out = op->conv.out;
    spec_params(a, op, (size_t)n * k * k * cur->c, g ? 0 : n);
    *cur = op->out;
    if (!g) {
        op->relu = 1;
        return 0;
    }
    model_op *gn = spec_push(a, MODEL_OP_GROUPNORM, *cur);
    if (!gn) {
        model_msgf(why, why_len, "too many layers");
        return -1;
    }
    gn->groups = g;
    gn->relu = 1;
    spec_params(a, gn, n, n);
    return 0;
}

/* pooling: "<K>[s<S>]" at *p (past the 'p' or 'a'). */
static int spec_pool(model_arch *a, const char **p, model_op_kind kind, model_shape *cur, char *why,
                     size_t why_len)
{
    uint32_t k, s;
    if (spec_number(p, 1, MODEL_KERNEL_MAX, &k)) {
        model_msgf(why, why_len, "a pooling is p<size>[s<stride>] or a<size>[s<stride>], size 1-%u",
                   MODEL_KERNEL_MAX);
        return -1;
    }
    s = k;
    if (spec_suffix(p, 's', 1, MODEL_STRIDE_MAX, &s) < 0) {
        model_msgf(why, why_len, "bad stride (1-%u)", MODEL_STRIDE_MAX);
        return -1;
    }
    if (k > cur->h || k > cur->w) {
        model_msgf(why, why_len, "window %u does not fit the %ux%u input", k, cur->h, cur->w);
        return -1;
    }
    model_op *op = spec_push(a, kind, *cur);
    if (!op) {
        model_msgf(why, why_len, "too many layers");
        return -1;
    }
    op->k = k;
    op->stride = s;
    op->out = (model_shape){(cur->h - k) / s + 1, (cur->w - k) / s + 1, cur->c};
    *cur = op->out;
    return 0;
}

/* One item at *p; 0 or -1 with the reason in why. */
static int spec_item(model_arch *a, const char **p, model_shape *cur, int *flat, char *why,
                     size_t why_len)
{
    char kind = *(*p)++;
    uint32_t n;
    if ((kind == 'c' || kind == 'p' || kind == 'a') && *flat) {
        model_msgf(why, why_len, "a convolution or pooling cannot follow a dense layer");
        return -1;
    }
    switch (kind) {
    case 'c':
        return spec_conv(a, p, cur, why, why_len);
    case 'p':
        return spec_pool(a, p, MODEL_OP_MAXPOOL, cur, why, why_len);
    case 'a':
        return spec_pool(a, p, MODEL_OP_AVGPOOL, cur, why, why_len);
    case 'f':
        if (spec_number(p, 1, MODEL_WIDTH_MAX, &n)) {
            model_msgf(why, why_len, "a dense layer is f<units>, units 1-%u", MODEL_WIDTH_MAX);
            return -1;
        }
        *flat = 1;
        if (spec_dense(a, cur, n, 1)) {
            model_msgf(why, why_len, "too many layers");
            return -1;
        }
        return 0;
    case 'd': {
        float rate;
        if (spec_rate(p, &rate)) {
            model_msgf(why, why_len,
                       "a dropout is d<rate>, rate a fraction in (0, 1) such as d0.5");
            return -1;
        }
        model_op *op = spec_push(a, MODEL_OP_DROPOUT, *cur);
        if (!op) {
            model_msgf(why, why_len, "too many layers");
            return -1;
        }
        op->rate = rate;
        return 0;
    }
    case 'i':
        model_msgf(why, why_len, "the input shape can only be the first item");
        return -1;
    case 0:
    case ',':
        model_msgf(why, why_len, "empty item");
        return -1;
    default:
        model_msgf(why, why_len,
                   "unknown layer '%c': use c (convolution), p (max pooling), a (average "
                   "pooling), f (dense) or d (dropout)",
                   kind ? kind : ' ');
        return -1;
    }
}

static int spec_cnn(model_arch *a, const char *spec, uint32_t input_dim, uint32_t classes,
                    char *msg, size_t msg_len)
{
    a->is_cnn = 1;
    const char *p = strcmp(spec, "cnn") ? spec + 4 : &MODEL_CNN_DEFAULT[4];
    int rc = spec_input(a, &p, input_dim, spec, msg, msg_len);
    if (rc)
        return rc;
    model_shape cur = a->input;
    int flat = 0;
    uint32_t items = 0;
    /* "cnn:i<C>x<H>x<W>" alone is softmax regression on the image */
    for (int more = *p || p == spec + 4; more;) {
        const char *at = p;
        char why[160] = "";
        if (++items >= MODEL_LAYERS_MAX) {
            model_msgf(msg, msg_len, "model spec '%s': more than %u layers", spec,
                       MODEL_LAYERS_MAX - 1);
            return MODEL_ESPEC;
        }
        if (spec_item(a, &p, &cur, &flat, why, sizeof why) || (*p && *p != ',')) {
            if (!why[0])
                model_msgf(why, sizeof why, "unexpected '%c'", *p);
            int len = (int)strcspn(at, ",");
            model_msgf(msg, msg_len, "model spec '%s': at '%.*s': %s", spec, len, at, why);
            return MODEL_ESPEC;
        }
        if (model_shape_size(cur) > MODEL_ACT_MAX && !a->syntax_only) {
            model_msgf(msg, msg_len,
                       "model spec '%s': layer '%.*s' outputs %zu values per sample, above the "
                       "maximum %u",
                       spec, (int)(p - at), at, model_shape_size(cur), MODEL_ACT_MAX);
            return MODEL_ETOOBIG;
        }
        more = *p == ',';
        p += more;
    }
    if (spec_dense(a, &cur, classes, 0)) {
        model_msgf(msg, msg_len, "model spec '%s': too many layers", spec);
        return MODEL_ESPEC;
    }
    /* ReLU then max pooling = max pooling then ReLU: move it on. */
    for (uint32_t i = 0; i + 1 < a->op_count; i++)
        if (a->ops[i].relu && a->ops[i + 1].kind == MODEL_OP_MAXPOOL) {
            a->ops[i].relu = 0;
            a->ops[i + 1].relu = 1;
        }
    return MODEL_OK;
}

/* Parse; with syntax_only, input_dim and classes are nominal and the
 * checks against the data's shape are skipped. */
static int spec_parse(model_arch *a, const char *spec, uint32_t input_dim, uint32_t classes,
                      int syntax_only, char *msg, size_t msg_len)
{
    memset(a, 0, sizeof *a);
    a->syntax_only = syntax_only;
    if (!spec || strlen(spec) > MODEL_SPEC_MAX) {
        model_msgf(msg, msg_len, "model spec missing or longer than %u characters", MODEL_SPEC_MAX);
        return MODEL_ESPEC;
    }
    int cnn = !strcmp(spec, "cnn") || !strncmp(spec, "cnn:", 4);
    if (strcmp(spec, "softmax") && strncmp(spec, "mlp:", 4) && !cnn) {
        model_msgf(msg, msg_len,
                   "model spec '%s' not understood: use 'softmax', 'mlp:W1,W2,...' (hidden "
                   "widths, e.g. mlp:256,128,100), 'cnn' or 'cnn:LAYERS' (e.g. "
                   "cnn:c32k5,p2,c64k5,p2,f512)",
                   spec);
        return MODEL_ESPEC;
    }
    if (!input_dim || !classes) {
        model_msgf(msg, msg_len, "input_dim and classes must be positive");
        return MODEL_EINVAL;
    }
    if (input_dim > MODEL_DIM_MAX || classes > MODEL_CLASSES_MAX) {
        model_msgf(msg, msg_len, "input %u or classes %u above its maximum", input_dim, classes);
        return MODEL_ETOOBIG;
    }
    a->input = (model_shape){1, 1, input_dim};
    int rc = cnn ? spec_cnn(a, spec, input_dim, classes, msg, msg_len)
                 : spec_mlp(a, spec, classes, msg, msg_len);
    if (rc)
        return rc;
    if (a->param_count > MODEL_PARAMS_MAX && !a->syntax_only) {
        model_msgf(msg, msg_len, "model spec '%s': %zu parameters, above the maximum", spec,
                   a->param_count);
        return MODEL_ETOOBIG;
    }
    return MODEL_OK;
}

int model_arch_parse(model_arch *a, const char *spec, uint32_t input_dim, uint32_t classes,
                     char *msg, size_t msg_len)
{
    /* The grammar first: the sizes are checked layer by layer, and a layer
     * too large for its input must not hide a syntax error further on (a
     * spec model_spec_check refuses is ESPEC here too, with its message). */
    int rc = spec_parse(a, spec, 1, 1, 1, msg, msg_len);
    return rc ? rc : spec_parse(a, spec, input_dim, classes, 0, msg, msg_len);
}

int model_spec_check(const char *spec, char *msg, size_t msg_len)
{
    model_arch a;
    return spec_parse(&a, spec, 1, 1, 1, msg, msg_len);
}
