/* model_blas — the OpenBLAS core under every dense and convolution layer.
 *
 * OpenBLAS built with DYNAMIC_ARCH (Debian's) picks its kernels when it is
 * loaded, from the CPU's family and model numbers. A model it does not know
 * makes it fall back to its oldest x86-64 kernels, "Prescott" (SSE3, two
 * floats per multiply): OpenBLAS 0.3.21 (Debian 12) does so on Intel family 6
 * model 207 (0xCF, Emerald Rapids), a CPU with AVX-512, where its SkylakeX
 * sgemm kernel is 2-4x faster (docs/BENCHMARKS.md, "the default CNN").
 * model_blas_init asks OpenBLAS to choose again with the core type the
 * CPU's own feature flags name: SkylakeX with AVX-512 (F, CD, BW, DQ, VL),
 * Haswell with AVX2 and FMA, Sandybridge with AVX.
 *
 * It changes nothing when OpenBLAS chose anything but Prescott, when the
 * user set OPENBLAS_CORETYPE (OpenBLAS obeyed it), when the CPU has no
 * AVX, or when this OpenBLAS has no run-time core choice (then the symbols
 * it needs are absent: they are weak references).
 *
 * Process-wide state: call it once at the start of main, before any other
 * thread exists and before the first BLAS call (it sets and then removes
 * OPENBLAS_CORETYPE in the environment, which is how OpenBLAS's selector
 * takes a core by name).
 */
#ifndef MODEL_BLAS_H
#define MODEL_BLAS_H

#include <stddef.h>

/* Re-selects the OpenBLAS core when OpenBLAS fell back to Prescott on a CPU
 * with AVX (above). Returns 1 when it switched (note then says from what to
 * what and why, when note is not NULL), else 0. Never fails: at worst
 * OpenBLAS keeps the core it had. */
int model_blas_init(char *note, size_t note_len);

/* The name of the core OpenBLAS runs ("SkylakeX", "Haswell", ...). */
const char *model_blas_core(void);

#endif
