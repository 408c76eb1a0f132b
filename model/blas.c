/* model_blas — re-selecting OpenBLAS's core when it misdetects the CPU
 * (model/blas.h says when and why). */
#include "model/blas.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* OpenBLAS's run-time core selector (driver/others/dynamic.c), present only
 * in DYNAMIC_ARCH builds, hence weak: quit forgets the core, init chooses
 * one again, by OPENBLAS_CORETYPE when it is set, and runs its init. */
extern void gotoblas_dynamic_init(void) __attribute__((weak));
extern void gotoblas_dynamic_quit(void) __attribute__((weak));

/* The core type the CPU's feature flags name, or NULL. */
static const char *blas_core_for_cpu(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return "Haswell";
    if (__builtin_cpu_supports("avx"))
        return "Sandybridge";
#endif
    return NULL;
}

const char *model_blas_core(void)
{
    const char *name = openblas_get_corename();
    return name ? name : "unknown";
}

int model_blas_init(char *note, size_t note_len)
{
    if (note && note_len)
        note[0] = '\0';
    if (!gotoblas_dynamic_init || !gotoblas_dynamic_quit || getenv("OPENBLAS_CORETYPE"))
        return 0;
    char was[32];
    snprintf(was, sizeof was, "%s", model_blas_core());
    if (strcmp(was, "Prescott") != 0)
        return 0;
    const char *want = blas_core_for_cpu();
    if (!want)
        return 0;
    if (setenv("OPENBLAS_CORETYPE", want, 1) != 0)
        return 0;
    gotoblas_dynamic_quit();
    gotoblas_dynamic_init();
    unsetenv("OPENBLAS_CORETYPE");
    if (note && note_len)
        snprintf(note, note_len,
                 "OpenBLAS chose its %s kernels, not knowing this CPU; its feature flags name %s, "
                 "now in use: %s",
                 was, want, model_blas_core());
    return 1;
}
