/*
 * cpu_simd.c - AVX2/F16C kernels for the CPU loops, chosen at run time.
 *
 * The library is built for the baseline x86-64 (SSE2) so that it runs on
 * any x86 CPU; the few loops where wider instructions pay most are
 * compiled here for AVX2 and F16C with GCC's target attribute and called
 * only after __builtin_cpu_supports has said yes:
 *   - f16 <-> f32 rows: one vcvtph2ps/vcvtps2ph per 8 values, where the
 *     portable mask form (cpu_loops.c) takes about ten SSE2 instructions
 *     per 4;
 *   - transposing block copies: 8x8 blocks loaded as 8 rows and written
 *     as 8 columns through register shuffles, where the portable tile
 *     moves one element per load and store;
 *   - row folds (sum, max, min) of f32 and f16 rows, into one value or
 *     element-wise into a row, and f16 rows times a broadcast value:
 *     f16 converted in the loop that folds it, where the portable path
 *     stages an f32 row first (and SSE2 gives half the width).
 * On other CPUs and compilers ein_cpu_avx2() is false and the kernels are
 * stubs that are never called. EINC_CPU_SIMD=0 forces the portable loops
 * (to compare the two), as does ein_cpu_simd_force_portable (tests).
 */
#include "cpu_simd.h"

#include <stdatomic.h>
#include <stdlib.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define EIN_HAVE_AVX2_KERNELS 1
#include <immintrin.h>
#include <cpuid.h>
#include <math.h>
#endif

/* -1: not yet asked; 0/1: what the CPU and EINC_CPU_SIMD allow. */
static atomic_int cpu_allows = -1;
static atomic_bool forced_portable = false;

static int detect(void) {
  const char *env = getenv("EINC_CPU_SIMD");
  if (env && env[0] == '0') return 0;
#ifdef EIN_HAVE_AVX2_KERNELS
  /* F16C read from CPUID leaf 1 (ECX bit 29): clang 14's
   * __builtin_cpu_supports does not know "f16c". AVX2 through the builtin,
   * which also checks that the OS saves the YMM registers F16C needs. */
  unsigned a, b, c, d;
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __get_cpuid(1, &a, &b, &c, &d) &&
         (c & bit_F16C);
#else
  return 0;
#endif
}

bool ein_cpu_avx2(void) {
  if (atomic_load_explicit(&forced_portable, memory_order_relaxed))
    return false;
  int a = atomic_load_explicit(&cpu_allows, memory_order_relaxed);
  if (a < 0) { /* racing first callers all store the same answer */
    a = detect();
    atomic_store_explicit(&cpu_allows, a, memory_order_relaxed);
  }
  return a == 1;
}

void ein_cpu_simd_force_portable(bool portable) {
  atomic_store_explicit(&forced_portable, portable, memory_order_relaxed);
}

#ifdef EIN_HAVE_AVX2_KERNELS
#define AVX2 __attribute__((target("avx2,f16c")))

AVX2 void ein_avx2_f16_to_f32(const uint16_t *p, int64_t n, float *out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(
                                  (const __m128i *)(const void *)(p + i))));
  if (i < n) { /* the tail through a zero-padded block */
    uint16_t h[8] = {0};
    float f[8];
    for (int64_t k = 0; k < n - i; k++) h[k] = p[i + k];
    _mm256_storeu_ps(f, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)
                                                            (void *)h)));
    for (int64_t k = 0; k < n - i; k++) out[i + k] = f[k];
  }
}

AVX2 void ein_avx2_f32_to_f16(const float *in, int64_t n, uint16_t *out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128((__m128i *)(void *)(out + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(in + i),
                                     _MM_FROUND_TO_NEAREST_INT));
  if (i < n) {
    float f[8] = {0};
    uint16_t h[8];
    for (int64_t k = 0; k < n - i; k++) f[k] = in[i + k];
    _mm_storeu_si128((__m128i *)(void *)h,
                     _mm256_cvtps_ph(_mm256_loadu_ps(f),
                                     _MM_FROUND_TO_NEAREST_INT));
    for (int64_t k = 0; k < n - i; k++) out[i + k] = h[k];
  }
}

/* One 8x8 block of 4-byte elements: rows of s (along b) become rows of d
 * (along a) in three rounds of shuffles (pairs, quads, 128-bit halves). */
AVX2 static inline void block8x8_4(uint32_t *d, const uint32_t *s,
                                   int64_t db, int64_t sa) {
  __m256 r[8], t[8], u[8];
  for (int a = 0; a < 8; a++)
    r[a] = _mm256_loadu_ps((const float *)(const void *)(s + a * sa));
  for (int k = 0; k < 4; k++) {
    t[2 * k] = _mm256_unpacklo_ps(r[2 * k], r[2 * k + 1]);
    t[2 * k + 1] = _mm256_unpackhi_ps(r[2 * k], r[2 * k + 1]);
  }
  for (int k = 0; k < 2; k++) {
    __m256 *tk = t + 4 * k, *uk = u + 4 * k;
    uk[0] = _mm256_shuffle_ps(tk[0], tk[2], 0x44);
    uk[1] = _mm256_shuffle_ps(tk[0], tk[2], 0xee);
    uk[2] = _mm256_shuffle_ps(tk[1], tk[3], 0x44);
    uk[3] = _mm256_shuffle_ps(tk[1], tk[3], 0xee);
  }
  for (int b = 0; b < 4; b++) {
    _mm256_storeu_ps((float *)(void *)(d + b * db),
                     _mm256_permute2f128_ps(u[b], u[b + 4], 0x20));
    _mm256_storeu_ps((float *)(void *)(d + (b + 4) * db),
                     _mm256_permute2f128_ps(u[b], u[b + 4], 0x31));
  }
}

/* One 8x8 block of 2-byte elements in SSE2 registers: interleave 16-bit
 * pairs, then 32-bit, then 64-bit halves. */
AVX2 static inline void block8x8_2(uint16_t *d, const uint16_t *s,
                                   int64_t db, int64_t sa) {
  __m128i r[8], t[8], u[8];
  for (int a = 0; a < 8; a++)
    r[a] = _mm_loadu_si128((const __m128i *)(const void *)(s + a * sa));
  for (int k = 0; k < 4; k++) {
    t[2 * k] = _mm_unpacklo_epi16(r[2 * k], r[2 * k + 1]);
    t[2 * k + 1] = _mm_unpackhi_epi16(r[2 * k], r[2 * k + 1]);
  }
  for (int k = 0; k < 2; k++) {
    __m128i *tk = t + 4 * k, *uk = u + 4 * k;
    uk[0] = _mm_unpacklo_epi32(tk[0], tk[2]);
    uk[1] = _mm_unpackhi_epi32(tk[0], tk[2]);
    uk[2] = _mm_unpacklo_epi32(tk[1], tk[3]);
    uk[3] = _mm_unpackhi_epi32(tk[1], tk[3]);
  }
  for (int k = 0; k < 4; k++) {
    _mm_storeu_si128((__m128i *)(void *)(d + 2 * k * db),
                     _mm_unpacklo_epi64(u[k], u[k + 4]));
    _mm_storeu_si128((__m128i *)(void *)(d + (2 * k + 1) * db),
                     _mm_unpackhi_epi64(u[k], u[k + 4]));
  }
}

/* What the blocks leave, element by element: the right edge (a >= a8)
 * of the block rows, and whole rows b >= b8. */
#define TRANSPOSE_EDGES                                                     \
  for (int64_t b = 0; b < bn; b++)                                          \
    for (int64_t a = b < b8 ? a8 : 0; a < an; a++)                          \
      d[a + b * db] = s[a * sa + b];

/* 8x8 blocks, in pairs along b when the tile spans more than 32 rows
 * along a (cpu_loops_copy.inc's large tiles): each source row's 64
 * bytes (a line, when aligned) are then read in one visit and each
 * destination line is finished by the next block along a, so the tile
 * needs no lines kept in cache between its block columns (rows that
 * alias in the cache, as 256 KiB apart in a 256^3 `a b c -> c b a`,
 * would evict them). Tiles of 32 rows or fewer go one block column at a
 * time: paired, those were slower (`b c h w -> b h w c`, rows 16 KiB
 * apart, 40%). */
AVX2 void ein_avx2_transpose_4(uint32_t *d, const uint32_t *s, int64_t an,
                               int64_t bn, int64_t db, int64_t sa) {
  int64_t a8 = an & ~(int64_t)7, b8 = bn & ~(int64_t)7,
          b16 = an > 32 ? bn & ~(int64_t)15 : 0;
  for (int64_t b = 0; b < b16; b += 16)
    for (int64_t a = 0; a < a8; a += 8) {
      block8x8_4(d + a + b * db, s + a * sa + b, db, sa);
      block8x8_4(d + a + (b + 8) * db, s + a * sa + b + 8, db, sa);
    }
  for (int64_t b = b16; b < b8; b += 8)
    for (int64_t a = 0; a < a8; a += 8)
      block8x8_4(d + a + b * db, s + a * sa + b, db, sa);
  TRANSPOSE_EDGES
}

/* One 8x16 block of 2-byte elements: the rounds of block8x8_2 on 256-bit
 * rows, which do two 8x8 blocks at once, one per 128-bit half; each half
 * of a result is then a destination row of its own (b and b + 8). Per
 * byte moved, half the loads and shuffles of two block8x8_2 calls: the
 * 8x8 form alone left the f16 transpose at 1.6x the copy floor (f32,
 * with 256-bit 8x8 blocks, was at 1.0x). */
AVX2 static inline void block8x16_2(uint16_t *d, const uint16_t *s,
                                    int64_t db, int64_t sa) {
  __m256i r[8], t[8], u[8];
  for (int a = 0; a < 8; a++)
    r[a] = _mm256_loadu_si256((const __m256i *)(const void *)(s + a * sa));
  for (int k = 0; k < 4; k++) {
    t[2 * k] = _mm256_unpacklo_epi16(r[2 * k], r[2 * k + 1]);
    t[2 * k + 1] = _mm256_unpackhi_epi16(r[2 * k], r[2 * k + 1]);
  }
  for (int k = 0; k < 2; k++) {
    __m256i *tk = t + 4 * k, *uk = u + 4 * k;
    uk[0] = _mm256_unpacklo_epi32(tk[0], tk[2]);
    uk[1] = _mm256_unpackhi_epi32(tk[0], tk[2]);
    uk[2] = _mm256_unpacklo_epi32(tk[1], tk[3]);
    uk[3] = _mm256_unpackhi_epi32(tk[1], tk[3]);
  }
  for (int k = 0; k < 4; k++) {
    __m256i lo = _mm256_unpacklo_epi64(u[k], u[k + 4]);
    __m256i hi = _mm256_unpackhi_epi64(u[k], u[k + 4]);
    _mm_storeu_si128((__m128i *)(void *)(d + 2 * k * db),
                     _mm256_castsi256_si128(lo));
    _mm_storeu_si128((__m128i *)(void *)(d + (2 * k + 1) * db),
                     _mm256_castsi256_si128(hi));
    _mm_storeu_si128((__m128i *)(void *)(d + (2 * k + 8) * db),
                     _mm256_extracti128_si256(lo, 1));
    _mm_storeu_si128((__m128i *)(void *)(d + (2 * k + 9) * db),
                     _mm256_extracti128_si256(hi, 1));
  }
}

/* Blocks of 8 (a) x 16 (b), one of 8 x 8 where 8 to 15 of b are left,
 * then the edges. Not in pairs along b as ein_avx2_transpose_4: for 2
 * bytes that order took 40% longer (64 planes of 512 x 512, and a
 * 256^3 `a b c -> c b a`). */
AVX2 void ein_avx2_transpose_2(uint16_t *d, const uint16_t *s, int64_t an,
                               int64_t bn, int64_t db, int64_t sa) {
  int64_t a8 = an & ~(int64_t)7, b8 = bn & ~(int64_t)7,
          b16 = bn & ~(int64_t)15;
  for (int64_t b = 0; b < b16; b += 16)
    for (int64_t a = 0; a < a8; a += 8)
      block8x16_2(d + a + b * db, s + a * sa + b, db, sa);
  if (b16 < b8)
    for (int64_t a = 0; a < a8; a += 8)
      block8x8_2(d + a + b16 * db, s + a * sa + b16, db, sa);
  TRANSPOSE_EDGES
}

/* One 4x4 block of 8-byte elements: pairs interleaved within 128-bit
 * lanes, then the lanes exchanged. */
AVX2 static inline void block4x4_8(uint64_t *d, const uint64_t *s,
                                   int64_t db, int64_t sa) {
  __m256d r[4], t[4];
  for (int a = 0; a < 4; a++)
    r[a] = _mm256_loadu_pd((const double *)(const void *)(s + a * sa));
  t[0] = _mm256_unpacklo_pd(r[0], r[1]);
  t[1] = _mm256_unpackhi_pd(r[0], r[1]);
  t[2] = _mm256_unpacklo_pd(r[2], r[3]);
  t[3] = _mm256_unpackhi_pd(r[2], r[3]);
  for (int b = 0; b < 2; b++) {
    _mm256_storeu_pd((double *)(void *)(d + b * db),
                     _mm256_permute2f128_pd(t[b], t[b + 2], 0x20));
    _mm256_storeu_pd((double *)(void *)(d + (b + 2) * db),
                     _mm256_permute2f128_pd(t[b], t[b + 2], 0x31));
  }
}

/* 4x4 blocks, then the edges (a8 and b8 here: the block-aligned part,
 * multiples of 4). */
AVX2 void ein_avx2_transpose_8(uint64_t *d, const uint64_t *s, int64_t an,
                               int64_t bn, int64_t db, int64_t sa) {
  int64_t a8 = an & ~(int64_t)3, b8 = bn & ~(int64_t)3;
  for (int64_t b = 0; b < b8; b += 4)
    for (int64_t a = 0; a < a8; a += 4)
      block4x4_8(d + a + b * db, s + a * sa + b, db, sa);
  TRANSPOSE_EDGES
}

/* ------------------------------------------------------------ copies */

/* Interleaving copies, d[a + b an] = s[a sa + b] for a < an (2, 3 or 4)
 * and b < bn: an source rows merged into one contiguous destination run
 * (a few channels moved last, as in patchify's `(p1 p2 c)`). Blocks of
 * 8 along b: the an rows loaded as vectors, shuffled into an vectors of
 * the destination's order and stored whole; the tail element by element.
 * For 3 rows each is first permuted so that every destination vector is
 * a blend of the three (row k's element i goes to lane (3 i + k) mod 8). */
AVX2 static inline void interleave8_2(float *d, const float *s, int64_t sa) {
  __m256 x = _mm256_loadu_ps(s), y = _mm256_loadu_ps(s + sa);
  __m256 lo = _mm256_unpacklo_ps(x, y), hi = _mm256_unpackhi_ps(x, y);
  _mm256_storeu_ps(d, _mm256_permute2f128_ps(lo, hi, 0x20));
  _mm256_storeu_ps(d + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
}

AVX2 static inline void interleave8_3(float *d, const float *s, int64_t sa) {
  const __m256i px = _mm256_setr_epi32(0, 3, 6, 1, 4, 7, 2, 5);
  const __m256i py = _mm256_setr_epi32(5, 0, 3, 6, 1, 4, 7, 2);
  const __m256i pz = _mm256_setr_epi32(2, 5, 0, 3, 6, 1, 4, 7);
  __m256 x = _mm256_permutevar8x32_ps(_mm256_loadu_ps(s), px);
  __m256 y = _mm256_permutevar8x32_ps(_mm256_loadu_ps(s + sa), py);
  __m256 z = _mm256_permutevar8x32_ps(_mm256_loadu_ps(s + 2 * sa), pz);
  /* lanes of x: 0 3 6 | 1 4 7 | 2 5 in the three vectors, y one later,
   * z two later */
  _mm256_storeu_ps(d, _mm256_blend_ps(_mm256_blend_ps(x, y, 0x92), z, 0x24));
  _mm256_storeu_ps(d + 8,
                   _mm256_blend_ps(_mm256_blend_ps(x, y, 0x24), z, 0x49));
  _mm256_storeu_ps(d + 16,
                   _mm256_blend_ps(_mm256_blend_ps(x, y, 0x49), z, 0x92));
}

AVX2 static inline void interleave8_4(float *d, const float *s, int64_t sa) {
  __m256 r0 = _mm256_loadu_ps(s), r1 = _mm256_loadu_ps(s + sa),
         r2 = _mm256_loadu_ps(s + 2 * sa), r3 = _mm256_loadu_ps(s + 3 * sa);
  __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1),
         t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
  /* u_k: columns k and k + 4 of the 4 x 8 block */
  __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee),
         u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee);
  _mm256_storeu_ps(d, _mm256_permute2f128_ps(u0, u1, 0x20));
  _mm256_storeu_ps(d + 8, _mm256_permute2f128_ps(u2, u3, 0x20));
  _mm256_storeu_ps(d + 16, _mm256_permute2f128_ps(u0, u1, 0x31));
  _mm256_storeu_ps(d + 24, _mm256_permute2f128_ps(u2, u3, 0x31));
}

AVX2 void ein_avx2_interleave_4(uint32_t *d, const uint32_t *s, int64_t an,
                                int64_t bn, int64_t sa) {
  float *df = (float *)(void *)d;
  const float *sf = (const float *)(const void *)s;
  int64_t b8 = bn & ~(int64_t)7;
  for (int64_t b = 0; b < b8; b += 8) {
    if (an == 2) interleave8_2(df + 2 * b, sf + b, sa);
    else if (an == 3) interleave8_3(df + 3 * b, sf + b, sa);
    else interleave8_4(df + 4 * b, sf + b, sa);
  }
  for (int64_t b = b8; b < bn; b++)
    for (int64_t a = 0; a < an; a++) d[a + b * an] = s[a * sa + b];
}

/* ---------------------------------------------------------- row folds
 * Reductions and f16 maps read their rows straight from the source:
 * f16 is converted inside the vector loop (no staged f32 row and second
 * pass), and a row folded to one value keeps four vector accumulators,
 * so that neither the adds' latency nor one max chain limits it. */

/* 8 values at p + i as f32: loaded, or converted from f16. */
AVX2 static inline __m256 load8(const void *p, int64_t i, bool f16) {
  if (f16)
    return _mm256_cvtph_ps(_mm_loadu_si128(
        (const __m128i *)(const void *)((const uint16_t *)p + i)));
  return _mm256_loadu_ps((const float *)p + i);
}

AVX2 static inline float load1(const void *p, int64_t i, bool f16) {
  return f16 ? _cvtsh_ss(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

/* The fold of v into acc, lane by lane: the portable fold's rule (a
 * greater value, or a NaN, replaces the accumulator), as compares and a
 * blend, since vmaxps alone would let a number replace a NaN. */
AVX2 static inline __m256 fold8(ein_simd_fold op, __m256 acc, __m256 v) {
  if (op == EIN_SIMD_SUM) return _mm256_add_ps(acc, v);
  __m256 better = op == EIN_SIMD_MAX ? _mm256_cmp_ps(v, acc, _CMP_GT_OQ)
                                     : _mm256_cmp_ps(acc, v, _CMP_GT_OQ);
  __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
  return _mm256_blendv_ps(acc, v, _mm256_or_ps(better, nan));
}

static inline float fold1(ein_simd_fold op, float acc, float v) {
  switch (op) {
  case EIN_SIMD_MAX: return (v > acc || v != v) ? v : acc;
  case EIN_SIMD_MIN: return (v < acc || v != v) ? v : acc;
  default: return acc + v;
  }
}

/* The fold of v's 8 lanes: halves, then quarters, then pairs. */
AVX2 static inline float fold_lanes(ein_simd_fold op, __m256 v) {
  v = fold8(op, v, _mm256_permute2f128_ps(v, v, 1));
  v = fold8(op, v, _mm256_permute_ps(v, 0x4e));
  v = fold8(op, v, _mm256_permute_ps(v, 0xb1));
  return _mm256_cvtss_f32(v);
}

/* A row is folded in blocks of 512 values, each into four fresh
 * accumulators that then join the running one: a long sum so rounds as
 * the portable fold of 512-value chunks does (about sqrt(512) values per
 * partial sum), not as 32 partials of the whole row. */
AVX2 static inline __attribute__((always_inline)) float
reduce_row_blocks(ein_simd_fold op, float init, const void *p, int64_t n,
                  bool f16) {
  float id = op == EIN_SIMD_SUM ? 0.0f
             : op == EIN_SIMD_MAX ? -INFINITY : INFINITY;
  __m256 total = _mm256_set1_ps(id);
  int64_t i = 0;
  while (i + 32 <= n) {
    __m256 a0 = _mm256_set1_ps(id), a1 = a0, a2 = a0, a3 = a0;
    int64_t end = n - i > 512 ? i + 512 : n;
    for (; i + 32 <= end; i += 32) {
      a0 = fold8(op, a0, load8(p, i, f16));
      a1 = fold8(op, a1, load8(p, i + 8, f16));
      a2 = fold8(op, a2, load8(p, i + 16, f16));
      a3 = fold8(op, a3, load8(p, i + 24, f16));
    }
    total = fold8(op, total, fold8(op, fold8(op, a0, a1), fold8(op, a2, a3)));
  }
  for (; i + 8 <= n; i += 8) total = fold8(op, total, load8(p, i, f16));
  float acc = fold1(op, init, fold_lanes(op, total));
  for (; i < n; i++) acc = fold1(op, acc, load1(p, i, f16));
  return acc;
}

/* A max or min of a row, first by vmaxps/vminps, which take the second
 * operand (the accumulator, never NaN here) where either is NaN, with
 * NaNs noted on the side by one compare of each pair of vectors: 3
 * instructions per vector where fold8's rule takes 5, which lets the
 * out-of-order window reach further ahead of a row read from memory
 * (spatial max: as fast as a sum). A row with a NaN is folded again by
 * reduce_row_blocks, whose rule picks the NaN as the portable fold does. */
AVX2 static inline __attribute__((always_inline)) float
reduce_row_ordered(ein_simd_fold op, float init, const void *p, int64_t n,
                   bool f16) {
  __m256 a0 = _mm256_set1_ps(op == EIN_SIMD_MAX ? -INFINITY : INFINITY);
  __m256 a1 = a0, a2 = a0, a3 = a0, nan = _mm256_setzero_ps();
  int64_t i = 0;
#define ORDERED(a, x)                                                       \
  (op == EIN_SIMD_MAX ? _mm256_max_ps(x, a) : _mm256_min_ps(x, a))
  for (; i + 32 <= n; i += 32) {
    __m256 x0 = load8(p, i, f16), x1 = load8(p, i + 8, f16),
           x2 = load8(p, i + 16, f16), x3 = load8(p, i + 24, f16);
    a0 = ORDERED(a0, x0), a1 = ORDERED(a1, x1);
    a2 = ORDERED(a2, x2), a3 = ORDERED(a3, x3);
    nan = _mm256_or_ps(nan, _mm256_or_ps(_mm256_cmp_ps(x0, x1, _CMP_UNORD_Q),
                                         _mm256_cmp_ps(x2, x3, _CMP_UNORD_Q)));
  }
#undef ORDERED
  if (!_mm256_testz_ps(nan, nan))
    return reduce_row_blocks(op, init, p, n, f16);
  __m256 total = fold8(op, fold8(op, a0, a1), fold8(op, a2, a3));
  for (; i + 8 <= n; i += 8) total = fold8(op, total, load8(p, i, f16));
  float acc = fold1(op, init, fold_lanes(op, total));
  for (; i < n; i++) acc = fold1(op, acc, load1(p, i, f16));
  return acc;
}

/* Always inlined, so that where op is a constant (reduce_rows) no test
 * of it is left in the loops. */
AVX2 static inline __attribute__((always_inline)) float
reduce_row(ein_simd_fold op, float init, const void *p, int64_t n, bool f16) {
  if (op != EIN_SIMD_SUM)
    return reduce_row_ordered(op, init, p, n, f16);
  return reduce_row_blocks(op, init, p, n, f16);
}

/* out[r] = the fold of row r (n values at p + r rst) for r < rows: the
 * rows of a reduction over the innermost axis in one call, so that
 * nothing but the fold itself runs between one row's loads and the
 * next's (the per-row calls, switches and stores of cpu_loops.c left
 * 16384 rows of 512 f32 25% slower than a plain loop, single-threaded:
 * the out-of-order window then covers fewer loads ahead). */
AVX2 static inline __attribute__((always_inline)) void
reduce_rows(ein_simd_fold op, const void *p, int64_t rows, int64_t rst,
            int64_t n, bool f16, float *out) {
  float id = op == EIN_SIMD_SUM ? 0.0f
             : op == EIN_SIMD_MAX ? -INFINITY : INFINITY;
  int64_t esz = f16 ? 2 : 4;
  for (int64_t r = 0; r < rows; r++)
    out[r] = reduce_row(op, id, (const char *)p + r * rst * esz, n, f16);
}

/* reduce_rows with op a constant in each instance. */
#define REDUCE_ROWS_BY_OP(f16)                                              \
  switch (op) {                                                             \
  case EIN_SIMD_SUM: reduce_rows(EIN_SIMD_SUM, p, rows, rst, n, f16, out);  \
    return;                                                                 \
  case EIN_SIMD_MAX: reduce_rows(EIN_SIMD_MAX, p, rows, rst, n, f16, out);  \
    return;                                                                 \
  case EIN_SIMD_MIN: reduce_rows(EIN_SIMD_MIN, p, rows, rst, n, f16, out);  \
    return;                                                                 \
  }

AVX2 void ein_avx2_reduce_rows_f32(ein_simd_fold op, const float *p,
                                   int64_t rows, int64_t rst, int64_t n,
                                   float *out) {
  REDUCE_ROWS_BY_OP(false)
}

AVX2 void ein_avx2_reduce_rows_f16(ein_simd_fold op, const uint16_t *p,
                                   int64_t rows, int64_t rst, int64_t n,
                                   float *out) {
  REDUCE_ROWS_BY_OP(true)
}

AVX2 float ein_avx2_reduce_f32(ein_simd_fold op, float init, const float *p,
                               int64_t n) {
  return reduce_row(op, init, p, n, false);
}

AVX2 float ein_avx2_reduce_f16(ein_simd_fold op, float init,
                               const uint16_t *p, int64_t n) {
  return reduce_row(op, init, p, n, true);
}

AVX2 static inline void fold_row(ein_simd_fold op, float *acc, const void *p,
                                 int64_t n, bool f16) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256 x0 = fold8(op, _mm256_loadu_ps(acc + i), load8(p, i, f16));
    __m256 x1 = fold8(op, _mm256_loadu_ps(acc + i + 8), load8(p, i + 8, f16));
    _mm256_storeu_ps(acc + i, x0);
    _mm256_storeu_ps(acc + i + 8, x1);
  }
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(acc + i,
                     fold8(op, _mm256_loadu_ps(acc + i), load8(p, i, f16)));
  for (; i < n; i++) acc[i] = fold1(op, acc[i], load1(p, i, f16));
}

AVX2 void ein_avx2_fold_f32(ein_simd_fold op, float *acc, const float *p,
                            int64_t n) {
  fold_row(op, acc, p, n, false);
}

AVX2 void ein_avx2_fold_f16(ein_simd_fold op, float *acc, const uint16_t *p,
                            int64_t n) {
  fold_row(op, acc, p, n, true);
}

/* The 8 pairs p[k + 2l], p[k + 2l + 1] (l < 8) folded, in order: the
 * 16 values loaded as two vectors, split into even and odd lanes
 * (within each 128-bit half), folded together, then put back in order. */
AVX2 static inline __m256 pair8(ein_simd_fold op, const void *p, int64_t k,
                                bool f16) {
  __m256 lo = load8(p, k, f16), hi = load8(p, k + 8, f16);
  __m256 pair = fold8(op, _mm256_shuffle_ps(lo, hi, 0x88),
                      _mm256_shuffle_ps(lo, hi, 0xdd));
  return _mm256_castpd_ps(
      _mm256_permute4x64_pd(_mm256_castps_pd(pair), 0xd8));
}

AVX2 static inline float pair1(ein_simd_fold op, const void *p, int64_t k,
                               bool f16) {
  return fold1(op, load1(p, k, f16), load1(p, k + 1, f16));
}

/* The pairs of `rows` rows, rst elements apart, folded into the n
 * results (overwritten): all rows of a block of 8 results at once, so
 * that a 2x2 pooling takes one call per chunk and no identity fill. */
AVX2 static inline void fold_pairs(ein_simd_fold op, float *acc,
                                   const void *p, int64_t rows, int64_t rst,
                                   int64_t n, bool f16) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 a = pair8(op, p, 2 * i, f16);
    for (int64_t r = 1; r < rows; r++)
      a = fold8(op, a, pair8(op, p, r * rst + 2 * i, f16));
    _mm256_storeu_ps(acc + i, a);
  }
  for (; i < n; i++) {
    float a = pair1(op, p, 2 * i, f16);
    for (int64_t r = 1; r < rows; r++)
      a = fold1(op, a, pair1(op, p, r * rst + 2 * i, f16));
    acc[i] = a;
  }
}

AVX2 void ein_avx2_fold_pairs_f32(ein_simd_fold op, const float *p,
                                  int64_t rows, int64_t rst, int64_t n,
                                  float *acc) {
  fold_pairs(op, acc, p, rows, rst, n, false);
}

AVX2 void ein_avx2_fold_pairs_f16(ein_simd_fold op, const uint16_t *p,
                                  int64_t rows, int64_t rst, int64_t n,
                                  float *acc) {
  fold_pairs(op, acc, p, rows, rst, n, true);
}

AVX2 void ein_avx2_scale_f16(const uint16_t *p, int64_t n, float s,
                             uint16_t *out) {
  __m256 vs = _mm256_set1_ps(s);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128((__m128i *)(void *)(out + i),
                     _mm256_cvtps_ph(_mm256_mul_ps(load8(p, i, true), vs),
                                     _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; i++)
    out[i] = _cvtss_sh(_cvtsh_ss(p[i]) * s, _MM_FROUND_TO_NEAREST_INT);
}

#else /* no AVX2 kernels: never called, since ein_cpu_avx2() is false */

void ein_avx2_f16_to_f32(const uint16_t *p, int64_t n, float *out) {
  (void)p, (void)n, (void)out;
}
void ein_avx2_f32_to_f16(const float *in, int64_t n, uint16_t *out) {
  (void)in, (void)n, (void)out;
}
void ein_avx2_transpose_4(uint32_t *d, const uint32_t *s, int64_t an,
                          int64_t bn, int64_t db, int64_t sa) {
  (void)d, (void)s, (void)an, (void)bn, (void)db, (void)sa;
}
void ein_avx2_transpose_2(uint16_t *d, const uint16_t *s, int64_t an,
                          int64_t bn, int64_t db, int64_t sa) {
  (void)d, (void)s, (void)an, (void)bn, (void)db, (void)sa;
}
void ein_avx2_transpose_8(uint64_t *d, const uint64_t *s, int64_t an,
                          int64_t bn, int64_t db, int64_t sa) {
  (void)d, (void)s, (void)an, (void)bn, (void)db, (void)sa;
}
void ein_avx2_interleave_4(uint32_t *d, const uint32_t *s, int64_t an,
                           int64_t bn, int64_t sa) {
  (void)d, (void)s, (void)an, (void)bn, (void)sa;
}

float ein_avx2_reduce_f32(ein_simd_fold op, float init, const float *p,
                          int64_t n) {
  (void)op, (void)p, (void)n;
  return init;
}
float ein_avx2_reduce_f16(ein_simd_fold op, float init, const uint16_t *p,
                          int64_t n) {
  (void)op, (void)p, (void)n;
  return init;
}
void ein_avx2_reduce_rows_f32(ein_simd_fold op, const float *p,
                              int64_t rows, int64_t rst, int64_t n,
                              float *out) {
  (void)op, (void)p, (void)rows, (void)rst, (void)n, (void)out;
}
void ein_avx2_reduce_rows_f16(ein_simd_fold op, const uint16_t *p,
                              int64_t rows, int64_t rst, int64_t n,
                              float *out) {
  (void)op, (void)p, (void)rows, (void)rst, (void)n, (void)out;
}
void ein_avx2_fold_f32(ein_simd_fold op, float *acc, const float *p,
                       int64_t n) {
  (void)op, (void)acc, (void)p, (void)n;
}
void ein_avx2_fold_f16(ein_simd_fold op, float *acc, const uint16_t *p,
                       int64_t n) {
  (void)op, (void)acc, (void)p, (void)n;
}
void ein_avx2_scale_f16(const uint16_t *p, int64_t n, float s,
                        uint16_t *out) {
  (void)p, (void)n, (void)s, (void)out;
}
void ein_avx2_fold_pairs_f32(ein_simd_fold op, const float *p, int64_t rows,
                             int64_t rst, int64_t n, float *acc) {
  (void)op, (void)p, (void)rows, (void)rst, (void)n, (void)acc;
}
void ein_avx2_fold_pairs_f16(ein_simd_fold op, const uint16_t *p,
                             int64_t rows, int64_t rst, int64_t n,
                             float *acc) {
  (void)op, (void)p, (void)rows, (void)rst, (void)n, (void)acc;
}
#endif
