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
 * Elements of 8, 4 and 2 bytes. */
void ein_avx2_transpose_4(uint32_t *d, const uint32_t *s, int64_t an,
                          int64_t bn, int64_t db, int64_t sa);
void ein_avx2_transpose_2(uint16_t *d, const uint16_t *s, int64_t an,
                          int64_t bn, int64_t db, int64_t sa);
void ein_avx2_transpose_8(uint64_t *d, const uint64_t *s, int64_t an,
                          int64_t bn, int64_t db, int64_t sa);

/* An interleaving copy, d[a + b an] = s[a sa + b] for a < an, b < bn,
 * with an 2, 3 or 4: a few source rows merged into one contiguous run.
 * 4-byte elements. */
void ein_avx2_interleave_4(uint32_t *d, const uint32_t *s, int64_t an,
                           int64_t bn, int64_t sa);

/* ---- row folds (reductions and f16 maps) ----
 * The folds these kernels do: a sum (also a mean's), or a max or min in
 * which NaN wins (as numpy's, and as cpu_loops_acc.inc's portable fold:
 * a value replaces the accumulator when greater, or when it is NaN). */
typedef enum ein_simd_fold {
  EIN_SIMD_SUM,
  EIN_SIMD_MAX,
  EIN_SIMD_MIN
} ein_simd_fold;

/* init folded with n values of an f32 or f16 row (f16 converted in the
 * vector loop, never staged), in several vector accumulators. */
float ein_avx2_reduce_f32(ein_simd_fold op, float init, const float *p,
                          int64_t n);
float ein_avx2_reduce_f16(ein_simd_fold op, float init, const uint16_t *p,
                          int64_t n);

/* out[r] = the fold of the n values at p + r rst, for r < rows: many
 * rows folded in one call, each from the fold's identity. */
void ein_avx2_reduce_rows_f32(ein_simd_fold op, const float *p,
                              int64_t rows, int64_t rst, int64_t n,
                              float *out);
void ein_avx2_reduce_rows_f16(ein_simd_fold op, const uint16_t *p,
                              int64_t rows, int64_t rst, int64_t n,
                              float *out);

/* acc[i] = fold(acc[i], p[i]) for i < n, from an f32 or f16 row. */
void ein_avx2_fold_f32(ein_simd_fold op, float *acc, const float *p,
                       int64_t n);
void ein_avx2_fold_f16(ein_simd_fold op, float *acc, const uint16_t *p,
                       int64_t n);

/* acc[i] = the fold of the pairs p[r rst + 2i], p[r rst + 2i + 1] over
 * r < rows (rows >= 1), for i < n, acc overwritten: windows of two
 * along the row (a 2x2 pooling's fastest axis) in `rows` rows. */
void ein_avx2_fold_pairs_f32(ein_simd_fold op, const float *p, int64_t rows,
                             int64_t rst, int64_t n, float *acc);
void ein_avx2_fold_pairs_f16(ein_simd_fold op, const uint16_t *p,
                             int64_t rows, int64_t rst, int64_t n,
                             float *acc);

/* out[i] = f16(f32(p[i]) * s) for i < n: a row scaled by a broadcast
 * value, f16 in and out, rounded once (as the staged f32 row is). */
void ein_avx2_scale_f16(const uint16_t *p, int64_t n, float s,
                        uint16_t *out);

#endif
