/* model_net — a feed-forward classifier whose parameters are ONE flat
 * float32 vector.
 *
 * Spec strings (the full grammar is in model/spec.h):
 *   "softmax"          softmax regression: one dense layer input -> classes
 *   "mlp:W1,W2,...,Wk" k hidden dense layers with ReLU, then a dense layer
 *                      to `classes` (e.g. "mlp:256,128,100" on Fashion-MNIST
 *                      is 784-256-128-100-10)
 *   "cnn:ITEM,..."     a convolutional net over images: convolutions
 *                      (c32k5: 32 filters 5x5, "same" padding, ReLU;
 *                      options s<stride>, p<pad>, g<groups> of group
 *                      normalisation), max (p2) and average (a2) pooling,
 *                      dense layers (f512, ReLU), dropout (d0.5), an
 *                      optional input shape first (i3x32x32); then a dense
 *                      layer to `classes`
 *   "cnn"              the documented default CNN, MODEL_CNN_DEFAULT in
 *                      model/spec.h
 * The input width and the class count come from the data, not the spec.
 * The loss is softmax cross-entropy, averaged over the mini-batch.
 *
 * Parameter layout (the contract the mixer, checkpoints and the simulator
 * rely on): each layer's parameters in spec order, then the output layer's.
 * A dense layer is W (out x in, row-major, W[o*in + i]) followed by b
 * (out) — so an mlp is exactly the per-layer W, b sequence it always was;
 * a convolution is W (Cout x K*K*Cin, index (co, ky, kx, ci)) then b (Cout,
 * absent with group normalisation), a group normalisation gamma (C) then
 * beta (C); pooling and dropout have none. Images flow NHWC, so the dense
 * layer after an image reads its features in (y, x, c) order
 * (model/layers.h). The gradient vector has the same layout and length.
 * model_net_params/model_net_grads return pointers into the net; they stay
 * valid until model_net_destroy, so a caller may read or overwrite the
 * parameters in place between calls (e.g. "apply this mix").
 *
 * Compute: dense layers and convolutions (im2col) are cblas_sgemm over the
 * mini-batch. The caller chooses the BLAS thread count (murmur sets 1 per
 * agent); model/ never changes it. Workspace for up to batch_max samples
 * (its forward buffers for up to 256, model_net_evaluate's chunk, where
 * that stays within 32 MiB) is allocated once by model_net_create;
 * forward/backward/evaluate never allocate. A net is not thread-safe: one
 * thread at a time (the agent's training thread owns it).
 *
 * Group normalisation, not batch normalisation: its statistics are those
 * of each sample, so the model is a pure function of the parameter vector,
 * identical in training and inference, and independent of the batch and of
 * which agent's data it saw. Batch normalisation's running statistics are
 * state outside the parameter vector that mixing does not average (and
 * batch statistics of non-IID shards differ per agent).
 *
 * Dropout draws its masks from a generator inside the net, seeded by
 * model_net_init from the caller's rng (or model_net_seed_dropout); it is
 * active in model_net_loss_grad only, never in model_net_forward or
 * model_net_evaluate.
 *
 * Determinism: for a fixed BLAS thread count, the same spec, init rng and
 * batches give bit-identical parameters.
 */
#ifndef MODEL_NET_H
#define MODEL_NET_H

#include <stddef.h>
#include <stdint.h>

#include "model/data.h"
#include "model/model.h"
#include "model/rng.h"

typedef struct model_net model_net;

/* Create a net for `spec` over inputs of input_dim features and `classes`
 * outputs, with workspace for mini-batches of up to batch_max samples.
 * Parameters are zero until model_net_init. Errors: ESPEC (msg says why),
 * EINVAL (a size is 0), ETOOBIG (a width, layer output, parameter count,
 * workspace or batch above its maximum), ENOMEM. */
int model_net_create(model_net **out, const char *spec, uint32_t input_dim, uint32_t classes,
                     uint32_t batch_max, char *msg, size_t msg_len);
void model_net_destroy(model_net *net);

/* Validate spec for input_dim/classes and give its parameter count without
 * allocating (e.g. to check a checkpoint or a peer's vector length before
 * creating a net). Errors: ESPEC, EINVAL, ETOOBIG, as model_net_create. */
int model_spec_param_count(const char *spec, uint32_t input_dim, uint32_t classes, size_t *count,
                           char *msg, size_t msg_len);

/* Check only the grammar of spec, before the data's shape is known (e.g.
 * a config file): 0 or ESPEC with msg saying what and where. A spec that
 * passes may still not fit the data (a window larger than the image),
 * which model_net_create reports. */
int model_spec_check(const char *spec, char *msg, size_t msg_len);

/* The flat parameter and gradient vectors (layout above) and their length. */
float *model_net_params(model_net *net);
float *model_net_grads(model_net *net);
size_t model_net_param_count(const model_net *net);

uint32_t model_net_input_dim(const model_net *net);
uint32_t model_net_classes(const model_net *net);
uint32_t model_net_batch_max(const model_net *net);
/* Layers (for an mlp: its dense layers, hidden + output; for a cnn every
 * layer the spec names, a convolution with group normalisation counting
 * two, plus the output layer) and the number of values per sample that
 * layer l outputs (0 if l >= layer count) — enough to print or check a
 * layout. */
uint32_t model_net_layer_count(const model_net *net);
uint32_t model_net_layer_width(const model_net *net, uint32_t l);

/* Initialise from rng: weights of layers followed by ReLU He-normal (std
 * sqrt(2/fan_in), fan_in = in for dense, K*K*Cin for a convolution), the
 * output layer Xavier-normal (std sqrt(2/(in+out))), biases 0, group
 * normalisation gamma 1 and beta 0. Draws from rng in parameter order, so
 * the same rng state gives the same parameters; a net with dropout then
 * draws one more value, the seed of its dropout stream. */
void model_net_init(model_net *net, model_rng *rng);

/* Reseed the dropout stream (e.g. one stream per agent of a cluster whose
 * agents share an init seed). No effect on a net without dropout. */
void model_net_seed_dropout(model_net *net, uint64_t seed);

/* Forward only on x (n x input_dim, row-major), n <= batch_max. Returns the
 * class probabilities (n x classes, row-major) in the net's workspace,
 * valid until the next call on net; NULL if n is 0 or > batch_max. */
const float *model_net_forward(model_net *net, const float *x, uint32_t n);

/* Forward and backward on a mini-batch: writes the mean cross-entropy over
 * the batch into *loss (may be NULL) and its gradient with respect to every
 * parameter into model_net_grads(net). Errors: EINVAL (n == 0 or >
 * batch_max), ELABEL (a label >= classes; grads are then unspecified). */
int model_net_loss_grad(model_net *net, const float *x, const uint16_t *labels, uint32_t n,
                        float *loss);

/* Mean cross-entropy and accuracy of the net on every sample of d,
 * normalised by norm (may be NULL), in mini-batches of batch_max using the
 * net's own workspace. Errors: EDIM (d->dim != input_dim), ELABEL (d has
 * more classes than the net), EEMPTY. */
int model_net_evaluate(model_net *net, const model_data *d, const model_norm *norm, double *loss,
                       double *accuracy);

/* Gather-buffer for callers that build mini-batches from a model_data:
 * batch_max x input_dim floats and batch_max labels owned by the net. The
 * training loop gathers into these and passes them to model_net_loss_grad;
 * model_net_evaluate also uses them (so their content is clobbered by it). */
float *model_net_input_buffer(model_net *net);
uint16_t *model_net_label_buffer(model_net *net);

#endif
