/* model_sgd — stochastic gradient descent with momentum, optional Nesterov
 * momentum and L2 weight decay, over a flat float32 vector; and learning
 * rate schedules with linear warm-up.
 *
 * The update is PyTorch's torch.optim.SGD (dampening 0), element by element:
 *   g = grad + weight_decay * p
 *   v = momentum * v + g
 *   p -= lr * (nesterov ? g + momentum * v : v)
 * Weight decay applies to every parameter, biases included. The velocity
 * buffer is allocated once by model_sgd_init; model_sgd_step never
 * allocates. The learning rate is an argument of each step so that the
 * caller's schedule (model_schedule_lr) decides it.
 *
 * Schedules, as a function of the global step s (0-based) out of
 * total_steps:
 *   warm-up: for s < warmup_steps, lr = base_lr * (s + 1) / warmup_steps
 *   constant: base_lr
 *   step:     base_lr * gamma^floor((s - warmup_steps) / step_every)
 *   cosine:   min_lr + (base_lr - min_lr) * (1 + cos(pi * t)) / 2,
 *             t = (s - warmup_steps) / (total_steps - warmup_steps) in [0, 1]
 */
#ifndef MODEL_OPTIM_H
#define MODEL_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"
#include "model/net.h"

typedef struct model_sgd_config {
    float momentum;     /* 0 = plain SGD; [0, 1) */
    float weight_decay; /* L2 coefficient, >= 0 */
    int nesterov;       /* nonzero: Nesterov momentum (needs momentum > 0) */
} model_sgd_config;

typedef struct model_sgd {
    model_sgd_config cfg;
    size_t count;
    float *velocity; /* count, zero after init/reset */
} model_sgd;

/* Errors: EINVAL (count 0, momentum outside [0,1), weight_decay < 0 or not
 * finite, nesterov without momentum), ENOMEM. */
int model_sgd_init(model_sgd *s, size_t count, const model_sgd_config *cfg);
void model_sgd_free(model_sgd *s);
/* Zero the velocity (e.g. after the parameters were replaced wholesale). */
void model_sgd_reset(model_sgd *s);
/* One update of params (count) with grads (count) at learning rate lr. */
void model_sgd_step(model_sgd *s, float *params, const float *grads, float lr);

/* One training step on a mini-batch: model_net_loss_grad then
 * model_sgd_step. Errors: as model_net_loss_grad, plus EINVAL if the
 * optimizer's count differs from the net's. */
int model_train_step(model_net *net, model_sgd *s, const float *x, const uint16_t *labels,
                     uint32_t n, float lr, float *loss);

typedef enum model_lr_kind {
    MODEL_LR_CONSTANT = 0,
    MODEL_LR_STEP,
    MODEL_LR_COSINE,
} model_lr_kind;

typedef struct model_schedule {
    model_lr_kind kind;
    float base_lr;
    float min_lr;          /* cosine floor */
    float gamma;           /* step decay factor */
    uint64_t step_every;   /* step: decay every this many steps (> 0) */
    uint64_t warmup_steps; /* linear warm-up length; 0 = none */
    uint64_t total_steps;  /* cosine horizon (> warmup_steps) */
} model_schedule;

/* Parse "constant" | "step" | "cosine". Errors: EINVAL. */
int model_schedule_parse(const char *name, model_lr_kind *out);
const char *model_schedule_name(model_lr_kind kind);
/* Learning rate at step (formulas above); steps past total_steps keep the
 * last value. */
float model_schedule_lr(const model_schedule *s, uint64_t step);

#endif
