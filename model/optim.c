#include "model/optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/simd.h"

int model_sgd_init(model_sgd *s, size_t count, const model_sgd_config *cfg)
{
    memset(s, 0, sizeof *s);
    if (!count || !(cfg->momentum >= 0.0f && cfg->momentum < 1.0f) ||
        !(cfg->weight_decay >= 0.0f && isfinite(cfg->weight_decay)) ||
        (cfg->nesterov && cfg->momentum == 0.0f))
        return MODEL_EINVAL;
    s->velocity = calloc(count, sizeof *s->velocity);
    if (!s->velocity)
        return MODEL_ENOMEM;
    s->cfg = *cfg;
    s->count = count;
    return MODEL_OK;
}

void model_sgd_free(model_sgd *s)
{
    if (!s)
        return;
    free(s->velocity);
    memset(s, 0, sizeof *s);
}

void model_sgd_reset(model_sgd *s)
{
    memset(s->velocity, 0, s->count * sizeof *s->velocity);
}

/* The update, one element at a time: element-wise, so every vector width
 * gives the same bits (common/simd.h). A whole-model pass every step, over
 * three model-sized arrays that do not fit the core's cache: at SSE width
 * it was 5-8% of a training step's time (docs/BENCHMARKS.md). Nesterov's
 * form steps along g + mu * v instead of v. */
SIMD_CLONES static void sgd_update(float *restrict params, const float *restrict grads,
                                   float *restrict v, size_t n, float lr, float mu, float wd,
                                   int nesterov)
{
    for (size_t i = 0; i < n; i++) {
        float g = grads[i] + wd * params[i];
        float vi = mu * v[i] + g;
        v[i] = vi;
        params[i] -= lr * (nesterov ? g + mu * vi : vi);
    }
}

void model_sgd_step(model_sgd *s, float *restrict params, const float *restrict grads, float lr)
{
    sgd_update(params, grads, s->velocity, s->count, lr, s->cfg.momentum, s->cfg.weight_decay,
               s->cfg.nesterov);
}

int model_train_step(model_net *net, model_sgd *s, const float *x, const uint16_t *labels,
                     uint32_t n, float lr, float *loss)
{
    if (s->count != model_net_param_count(net))
        return MODEL_EINVAL;
    int rc = model_net_loss_grad(net, x, labels, n, loss);
    if (rc)
        return rc;
    model_sgd_step(s, model_net_params(net), model_net_grads(net), lr);
    return MODEL_OK;
}

static const char *const lr_names[] = {"constant", "step", "cosine"};

int model_schedule_parse(const char *name, model_lr_kind *out)
{
    for (int i = 0; i < 3; i++)
        if (!strcmp(name, lr_names[i])) {
            *out = (model_lr_kind)i;
            return MODEL_OK;
        }
    return MODEL_EINVAL;
}

const char *model_schedule_name(model_lr_kind kind)
{
    return (unsigned)kind < 3 ? lr_names[kind] : "?";
}

float model_schedule_lr(const model_schedule *s, uint64_t step)
{
    if (step < s->warmup_steps)
        return s->base_lr * (float)(step + 1) / (float)s->warmup_steps;
    uint64_t t = step - s->warmup_steps;
    switch (s->kind) {
    case MODEL_LR_CONSTANT:
        break;
    case MODEL_LR_STEP: {
        uint64_t k = s->step_every ? t / s->step_every : 0;
        return s->base_lr * (float)pow(s->gamma, (double)k);
    }
    case MODEL_LR_COSINE: {
        uint64_t span = s->total_steps > s->warmup_steps ? s->total_steps - s->warmup_steps : 1;
        double f = t >= span ? 1.0 : (double)t / (double)span;
        return s->min_lr + (s->base_lr - s->min_lr) * (float)(0.5 * (1.0 + cos(M_PI * f)));
    }
    }
    return s->base_lr;
}
