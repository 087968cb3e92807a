/*
 * cpu_simd.h - the CPU loops' x86 AVX2/F16C kernels, chosen at run time
 * (see cpu_simd.c).
 *
 * ein_cpu_avx2() says whether they may be called: true on an x86 CPU with
 * AVX2 and F16C, unless the portable loops are forced (EINC_CPU_SIMD=0 in
 * the environment, read once, or ein_cpu_simd_force_portable from a
 * test). Callers keep their portable loop beside each call, so both
 * paths stay live and tested. The kernels own nothing and allocate
 * nothing; on other CPUs they exist but are never called.
 */
#ifndef EIN_CPU_SIMD_H
#define EIN_CPU_SIMD_H

#include <stdbool.h>
#include <stdint.h>

/* True when the AVX2/F16C kernels below are in use. */
bool ein_cpu_avx2(void);

/* Tests: true forces the portable loops from now on, false returns to
 * what the CPU (and EINC_CPU_SIMD) allows. */
void ein_cpu_simd_force_portable(bool portable);

/* n f16 values to f32, and back (round to nearest even, as half.h). */
void ein_avx2_f16_to_f32(const uint16_t *p, int64_t n, float *out);
void ein_avx2_f32_to_f16(const float *in, int64_t n, uint16_t *out);

/* A transposing block copy, d[a + b db] = s[a sa + b] for a < an,
 * b < bn: the destination contiguous along a, the source along b. Full
 * 8x8 blocks go through vector shuffles, the edges element by element.
 * Elements of 4 and of 2 bytes. */
void ein_avx2_transpose_4(uint32_t *d, const uint32_t *s, int64_t an,
                          int64_t bn, int64_t db, int64_t sa);
void ein_avx2_transpose_2(uint16_t *d, const uint16_t *s, int64_t an,
                          int64_t bn, int64_t db, int64_t sa);

/* An interleaving copy, d[a + b an] = s[a sa + b] for a < an, b < bn,
 * with an 2, 3 or 4: a few source rows merged into one contiguous run.
 * 4-byte elements. */
void ein_avx2_interleave_4(uint32_t *d, const uint32_t *s, int64_t an,
                           int64_t bn, int64_t sa);

#endif
