/* model/export — a model's flat parameter vector as named tensors, written
 * in formats NumPy and PyTorch read: .npz (numpy.load), .safetensors
 * (safetensors / the format's published byte layout) and raw float32.
 *
 * Tensors, in parameter order (model/net.h gives the layout), named by
 * their op's index i in the parsed spec (model/spec.h; the output layer is
 * the last op):
 *   dense       "i.weight" (out, in), "i.bias" (out)
 *   convolution "i.weight" (Cout, K, K, Cin) — murmur's (co, ky, kx, ci)
 *               order; PyTorch's Conv2d wants weight.permute(0, 3, 1, 2) —
 *               and "i.bias" (Cout) unless group normalisation follows
 *   group norm  "i.weight" (C) = gamma, "i.bias" (C) = beta
 * A dense layer that reads an image reads its features in (y, x, c) order
 * (NHWC). With an input normalisation, two more tensors follow (npz and
 * safetensors only): "input.scale" and "input.offset" (input_dim each): the
 * model's input is raw * scale + offset (x / 255 for pixels: scale 1/255,
 * offset 0). Values are little-endian IEEE-754 float32 in every format.
 *
 * Formats:
 *   npz          a ZIP archive (stored, no compression, CRC-32 from zlib)
 *                of one .npy file (format 1.0) per tensor
 *   safetensors  8-byte little-endian header length, a JSON header
 *                {"NAME": {"dtype": "F32", "shape": [...], "data_offsets":
 *                [begin, end]}, ..., "__metadata__": {"spec": ..., ...}}
 *                padded with spaces to a multiple of 8, then the data
 *   raw          the flat vector as it is, dim x 4 bytes (the layout above
 *                tells where each tensor lies)
 * Writes go to PATH.tmp then rename: an export never leaves half a file
 * under PATH; an existing PATH is refused unless `overwrite`.
 */
#ifndef MODEL_EXPORT_H
#define MODEL_EXPORT_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"

#define MODEL_TENSOR_NAME_MAX 32u
#define MODEL_TENSOR_DIMS_MAX 4u
/* Most tensors of one model: two per op. */
#define MODEL_TENSORS_MAX 256u

typedef enum model_export_format {
    MODEL_EXPORT_NPZ = 0,
    MODEL_EXPORT_SAFETENSORS,
    MODEL_EXPORT_RAW,
    MODEL_EXPORT_FORMAT_COUNT
} model_export_format;

typedef struct model_tensor {
    char name[MODEL_TENSOR_NAME_MAX];
    uint32_t ndim;
    uint32_t shape[MODEL_TENSOR_DIMS_MAX];
    size_t offset; /* into the flat vector, in values */
    size_t count;
} model_tensor;

/* "npz", "safetensors", "raw"; parse returns MODEL_OK or MODEL_EINVAL. */
const char *model_export_format_name(model_export_format f);
int model_export_format_parse(const char *name, model_export_format *out);

/* The tensors of spec over input_dim features and `classes` outputs: up to
 * cap of them into out, their number into *n. Errors: as
 * model_arch_parse (ESPEC, EINVAL, ETOOBIG; msg says why), ETOOBIG when
 * more than cap. */
int model_tensors(const char *spec, uint32_t input_dim, uint32_t classes, model_tensor *out,
                  uint32_t cap, uint32_t *n, char *msg, size_t msg_len);

/* Write params (dim values, which must be the spec's parameter count) and,
 * when in_scale and in_offset are not NULL, the input normalisation
 * (input_dim values each) to path in `format`. Errors: ESPEC/EINVAL/
 * ETOOBIG (spec), EDIM (dim is not the spec's count), EIO (path exists and
 * !overwrite, or a write failed; msg names the path and the call). */
int model_export(const char *spec, uint32_t input_dim, uint32_t classes, const float *params,
                 size_t dim, const float *in_scale, const float *in_offset,
                 model_export_format format, const char *path, int overwrite, char *msg,
                 size_t msg_len);

#endif
