/* common/simd — one function compiled for several vector widths.
 *
 * murmur is built for x86-64-v2 (SSE4.2), so that one binary runs on any
 * x86-64 host of the last decade. Loops that dominate a profile (sgemm's
 * neighbours in model/, the mixer's passes in gossip/) are marked
 * SIMD_CLONES: GCC compiles them for AVX-512 and AVX2 too and the loader
 * picks the widest the CPU has (target_clones, an ifunc). Only loops whose
 * results do not depend on the width may be marked: element-wise maths,
 * integer maxima, sums with a fixed order of their own (-std=c11 forbids
 * contracting a multiply and an add into one FMA, so every clone rounds
 * the same way).
 *
 * Not under ThreadSanitizer (it instruments the ifunc resolver, which the
 * loader runs before the sanitizer's runtime is up: a crash at start-up),
 * nor with Clang or elsewhere: there the portable loop is all there is. */
#ifndef MURMUR_COMMON_SIMD_H
#define MURMUR_COMMON_SIMD_H

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
#define SIMD_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define SIMD_CLONES
#endif

#endif
