/*
 * cpu_loops.c - the CPU's LOOP and FILL steps: strided copies, permutes,
 * conversions, reductions and small products over any number of axes.
 *
 * A step's axes are split into kept axes (dst stride != 0) and reduced
 * axes (dst stride 0), size-1 axes dropped and neighbours that are
 * contiguous in every operand fused. The work then runs as rows of up to
 * ROW elements along one axis (the "row axis"):
 *   - along the innermost kept axis when the source's fastest axis is kept
 *     or nothing is reduced: each row of results accumulates over all
 *     reduced indices (column sums, copies, products);
 *   - along the innermost reduced axis when the source's fastest axis is
 *     reduced: each result is a scalar fold of contiguous rows (row sums).
 * Rows are loaded into an accumulator-typed buffer (f32 for f16/bf16/f32,
 * f64, i64 for integers and bool, C's float/double _Complex for c64/c128,
 * whose layout is numpy's), so the dtype switch happens per row,
 * not per element, and the inner loops vectorise. Outer kept indices are
 * split across OpenMP threads in chunks handed out dynamically when there
 * is enough work (over 2^16 element operations, or 256 KiB moved by a
 * copy; below that a parallel region costs more than it gains). f16 rows
 * and 2- and 4-byte transposes use cpu_simd.c's AVX2/F16C kernels where
 * the CPU has them, and so do the commonest f32-accumulated folds (sum,
 * mean, max, min of one f32 or f16 source) and f16 products with a
 * broadcast value: those read the source directly, without a staged
 * row, and a fold of the innermost axis alone (row sums, spatial maxima)
 * takes a run of rows per kernel call. A reduced axis that forms a window along a kept row (the w2 of a
 * pooling `(w w2) -> w`) is folded from the contiguous runs it makes
 * with the row, not read at the row's stride. A map that transposes (a
 * product, scaling or conversion with nothing reduced whose row is read
 * a cache line apart in a source: `j i, j i -> i j`) goes in tiles of
 * the row and an outer axis that source is contiguous along.
 */
#include "alloc.h"
#include "cpu_loops.h"

#include <complex.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_simd.h"
#include "half.h"
#include "loop_axes.h"

/* ROW: elements per row chunk (staged rows fit in L1); LANES: partial
 * accumulators of a row fold; ROW_MIN: copies along rows shorter than
 * this walk a plane with the next axis; TP x TQ: the block of a sum of
 * products read across one source's rows (run_rows_tiled; TP f32 values
 * fill a 64-byte line); ROWS_AHEAD: results ahead whose strided rows a
 * row fold prefetches (run_rows; 1, 2 and 4 measured level, 2 kept). */
enum { ROW = 512, LANES = 32, ROW_MIN = 16, TP = 16, TQ = 64,
       ROWS_AHEAD = 2 };

/* TILE_A x TILE_B: the tile of a transposing map (run_tiled): TILE_A
 * results along the row by TILE_B rows (for 4-byte values; as many
 * bytes for others), each source's tile loaded along the axis it is
 * contiguous in (32 f32 values: two cache lines). A unit
 * of work is TILE_U rows, walked a tile column at a time, so that a
 * source row (often a page of its own) is read 1 KiB of f32 at a visit:
 * with units of TILE_B rows, `j i, j i -> i j` (2048^2 f32) revisited
 * 4096 pages for 128 bytes each, 17 ms on one thread, against 6.7 ms
 * (TLB misses: the pages outnumber the second-level TLB's entries). */
enum { TILE_A = 64, TILE_B = 32, TILE_U = 256 };

#ifdef _OPENMP
#define OMP_PARALLEL_FOR                                                     \
  _Pragma("omp parallel for num_threads(threads) schedule(static)")
#else
#define OMP_PARALLEL_FOR
#endif

/* --------------------------------------------------- row conversion */

/* f16 -> f32 with masks instead of branches, so that a row loop of it
 * vectorises (SSE2 compares, and, or: GCC does not if-convert the ternary
 * form of this): the 15 value bits shifted into
 * place and the exponent rebased by 112; Inf/NaN rebased again to 255;
 * subnormals renormalised by a float subtraction (2^-14 (1 + m/1024) -
 * 2^-14 = m 2^-24). The same values as half.h's ein_f16_to_f32. */
static inline float f16_to_f32_vec(uint16_t h) {
  uint32_t o = (uint32_t)(h & 0x7fff) << 13;
  uint32_t e = o & 0x0f800000u;
  o += 0x38000000u;
  uint32_t special = o + 0x38000000u;
  uint32_t sub = ein_f32_to_bits(ein_bits_to_f32(o + 0x00800000u) -
                                 ein_bits_to_f32(0x38800000u));
  uint32_t is_special = 0u - (uint32_t)(e == 0x0f800000u);
  uint32_t is_sub = 0u - (uint32_t)(e == 0);
  uint32_t r = (o & ~(is_special | is_sub)) | (special & is_special) |
               (sub & is_sub);
  return ein_bits_to_f32(r | (uint32_t)(h & 0x8000) << 16);
}

static void load_f16_contiguous(const uint16_t *restrict p, int64_t n,
                                float *restrict out) {
  for (int64_t i = 0; i < n; i++) out[i] = f16_to_f32_vec(p[i]);
}

static void load_bf16_contiguous(const uint16_t *restrict p, int64_t n,
                                 float *restrict out) {
  for (int64_t i = 0; i < n; i++) out[i] = ein_bf16_to_f32(p[i]);
}

#define LOAD_ROW(T, conv)                                                   \
  for (int64_t i = 0; i < n; i++) out[i] = (T)(conv);

static void load_f32(ein_dtype dt, const char *p, int64_t st, int64_t n,
                     float *out) {
  if (st == 0 && n > 1) { /* a broadcast: one conversion, then copies */
    load_f32(dt, p, 1, 1, out);
    for (int64_t i = 1; i < n; i++) out[i] = out[0];
    return;
  }
  switch (dt) {
  case EIN_DT_F32:
    if (st == 1) {
      memcpy(out, p, (size_t)n * sizeof(float));
      return;
    }
    LOAD_ROW(float, ((const float *)p)[i * st]);
    return;
  case EIN_DT_F16:
    if (st == 1 && ein_cpu_avx2()) {
      ein_avx2_f16_to_f32((const uint16_t *)p, n, out);
      return;
    }
    if (st == 1) { /* a separate loop, so that the compiler vectorises it */
      load_f16_contiguous((const uint16_t *)p, n, out);
      return;
    }
    LOAD_ROW(float, f16_to_f32_vec(((const uint16_t *)p)[i * st]));
    return;
  case EIN_DT_BF16:
    if (st == 1) {
      load_bf16_contiguous((const uint16_t *)p, n, out);
      return;
    }
    LOAD_ROW(float, ein_bf16_to_f32(((const uint16_t *)p)[i * st]));
    return;
  case EIN_DT_F64: LOAD_ROW(float, ((const double *)p)[i * st]); return;
  default: return;
  }
}

static void load_i64(ein_dtype dt, const char *p, int64_t st, int64_t n,
                     int64_t *out) {
  switch (dt) {
  case EIN_DT_I8: LOAD_ROW(int64_t, ((const int8_t *)p)[i * st]); return;
  case EIN_DT_I16: LOAD_ROW(int64_t, ((const int16_t *)p)[i * st]); return;
  case EIN_DT_I32: LOAD_ROW(int64_t, ((const int32_t *)p)[i * st]); return;
  case EIN_DT_I64: LOAD_ROW(int64_t, ((const int64_t *)p)[i * st]); return;
  case EIN_DT_U8: LOAD_ROW(int64_t, ((const uint8_t *)p)[i * st]); return;
  case EIN_DT_BOOL: LOAD_ROW(int64_t, ((const uint8_t *)p)[i * st] != 0); return;
  case EIN_DT_U16: LOAD_ROW(int64_t, ((const uint16_t *)p)[i * st]); return;
  case EIN_DT_U32: LOAD_ROW(int64_t, ((const uint32_t *)p)[i * st]); return;
  case EIN_DT_U64: LOAD_ROW(int64_t, ((const uint64_t *)p)[i * st]); return;
  default: return;
  }
}

/* The rows of the f64, c64 and c128 accumulators, which convert only
 * between a dtype and one partner (f64 and f32; c64 and c128). A row of
 * one dtype contiguous on both sides is a memcpy; other contiguous rows
 * keep a loop of their own, so that it vectorises whatever the caller's
 * strides. The switch is on `from` first: inlined where the source is an
 * accumulator (`from` a constant), only that dtype's loops remain, so
 * GCC -O3 does not see a c128 read from a c64 variable (-Warray-bounds). */
typedef float complex c64_t;
typedef double complex c128_t;
#define CONVERT(TO, FROM)                                                   \
  do {                                                                      \
    const FROM *x = (const FROM *)(const void *)src;                        \
    TO *y = (TO *)(void *)dst;                                              \
    if (dst_st == 1 && src_st == 1)                                         \
      for (int64_t i = 0; i < n; i++) y[i] = (TO)x[i];                      \
    else                                                                    \
      for (int64_t i = 0; i < n; i++) y[i * dst_st] = (TO)x[i * src_st];    \
  } while (0)

static void convert_row(ein_dtype to, char *dst, int64_t dst_st,
                        ein_dtype from, const char *src, int64_t src_st,
                        int64_t n) {
  if (to == from && dst_st == 1 && src_st == 1) {
    memcpy(dst, src, (size_t)n * ein_dtype_size(to));
    return;
  }
  switch (from) {
  case EIN_DT_F64:
    if (to == EIN_DT_F64) CONVERT(double, double);
    else if (to == EIN_DT_F32) CONVERT(float, double);
    return;
  case EIN_DT_F32:
    if (to == EIN_DT_F64) CONVERT(double, float);
    return;
  case EIN_DT_C64:
    if (to == EIN_DT_C64) CONVERT(c64_t, c64_t);
    else if (to == EIN_DT_C128) CONVERT(c128_t, c64_t);
    return;
  case EIN_DT_C128:
    if (to == EIN_DT_C128) CONVERT(c128_t, c128_t);
    else if (to == EIN_DT_C64) CONVERT(c64_t, c128_t);
    return;
  default: return;
  }
}

/* LOAD and STORE of the f64, c64 and c128 instances below: rows to and
 * from their NATIVE dtype, staged contiguously. */
#define CONVERT_LOAD(dt, p, st, n, out)                                     \
  convert_row(NATIVE, (char *)(out), 1, (dt), (p), (st), (n))
#define CONVERT_STORE(dt, p, st, n, in)                                     \
  convert_row((dt), (p), (st), NATIVE, (const char *)(in), 1, (n))

#define STORE_ROW(T, expr)                                                  \
  for (int64_t i = 0; i < n; i++) ((T *)p)[i * st] = (expr);

static void store_f32(ein_dtype dt, char *p, int64_t st, int64_t n,
                      const float *in) {
  switch (dt) {
  case EIN_DT_F32:
    if (st == 1 && n > 1) {
      memcpy(p, in, (size_t)n * sizeof(float));
      return;
    }
    STORE_ROW(float, in[i]);
    return;
  case EIN_DT_F16: /* one result (a row fold's) without the vector tail */
    if (st == 1 && n > 1 && ein_cpu_avx2()) {
      ein_avx2_f32_to_f16(in, n, (uint16_t *)p);
      return;
    }
    STORE_ROW(uint16_t, ein_f32_to_f16(in[i]));
    return;
  case EIN_DT_BF16: STORE_ROW(uint16_t, ein_f32_to_bf16(in[i])); return;
  case EIN_DT_F64: STORE_ROW(double, in[i]); return;
  default: return;
  }
}

static void store_i64(ein_dtype dt, char *p, int64_t st, int64_t n,
                      const int64_t *in) {
  switch (dt) {
  case EIN_DT_I8: STORE_ROW(int8_t, (int8_t)in[i]); return;
  case EIN_DT_I16: STORE_ROW(int16_t, (int16_t)in[i]); return;
  case EIN_DT_I32: STORE_ROW(int32_t, (int32_t)in[i]); return;
  case EIN_DT_I64: STORE_ROW(int64_t, in[i]); return;
  case EIN_DT_U8: STORE_ROW(uint8_t, (uint8_t)in[i]); return;
  case EIN_DT_BOOL: STORE_ROW(uint8_t, (uint8_t)(in[i] != 0)); return;
  case EIN_DT_U16: STORE_ROW(uint16_t, (uint16_t)in[i]); return;
  case EIN_DT_U32: STORE_ROW(uint32_t, (uint32_t)in[i]); return;
  case EIN_DT_U64: STORE_ROW(uint64_t, (uint64_t)in[i]); return;
  default: return;
  }
}

/* ---------------------------------------------------------- kernels */

typedef struct loop_job {
  const ein_step *s;
  char *dst;
  const char *src[2];
  size_t esz[3];   /* element sizes: dst, src0, src1 */
  ein_acc acc;
  ein_loop_axes outer;  /* kept axes except the row axis (mode K) / all kept */
  ein_loop_axes red;    /* reduced axes except the row axis (mode R) / all */
  int64_t row_n;    /* length of the row axis */
  int64_t row_st[3];
  bool row_reduced; /* mode R: the row axis is reduced */
  /* mode K: a window of `win` source elements per result, contiguous and
   * taken out of red (the 2x2 of a pooling's fastest axis), else 1 */
  int64_t win;
  bool simd;        /* rows go straight from the source to cpu_simd.c */
  bool simd_pairs;  /* ... a window of 2, red at most one axis */
  bool simd_scale;  /* f16 rows times a broadcast f16 value, f16 out */
  /* mode K: an outer axis taken out of outer (tile_plan) along which a
   * source strided along the row is contiguous, walked in tiles with the
   * row (a map, or a fold of the reduced axes); tile_n = 0 when there is
   * none */
  int64_t tile_n;
  int64_t tile_st[3];
} loop_job;

/* Results per row chunk: a window reads ROW source values per chunk. */
static inline int64_t row_chunk(const loop_job *j) { return ROW / j->win; }

/* Units of TILE_U rows along the tile axis (run_tiled). */
static inline int64_t tile_blocks(const loop_job *j) {
  return (j->tile_n + TILE_U - 1) / TILE_U;
}

/* ------------------------------------- AVX2 rows for f32 accumulators */

/* The kernels' fold for a step's reduction, or -1 when they have none. */
static int simd_fold_of(ein_reduction op) {
  switch (op) {
  case EIN_REDUCE_SUM: case EIN_REDUCE_MEAN: return EIN_SIMD_SUM;
  case EIN_REDUCE_MAX: return EIN_SIMD_MAX;
  case EIN_REDUCE_MIN: return EIN_SIMD_MIN;
  default: return -1;
  }
}

/* Decides once per step whether its f32-accumulated rows take the
 * kernels: one f32 or f16 source read along contiguous runs (the row,
 * or a window's rows) in a fold they do; or an f16 map `x * g` with g
 * broadcast along the row, unscaled, into a contiguous f16 row. */
static void simd_plan(loop_job *j) {
  const ein_step *s = j->s;
  if (j->acc != EIN_ACC_F32 || s->kind == EIN_STEP_FILL || !ein_cpu_avx2())
    return;
  ein_dtype d0 = s->src_dtype[0];
  j->simd = s->nsrc == 1 && (d0 == EIN_DT_F32 || d0 == EIN_DT_F16) &&
            (j->row_st[1] == 1 || j->win > 1) && simd_fold_of(s->op) >= 0;
  j->simd_pairs = j->simd && j->win == 2 && j->red.n <= 1;
  j->simd_scale = s->nsrc == 2 && !j->row_reduced && j->red.n == 0 &&
                  d0 == EIN_DT_F16 && s->src_dtype[1] == EIN_DT_F16 &&
                  s->dst_dtype == EIN_DT_F16 && s->alpha == 1 &&
                  s->op != EIN_REDUCE_ANY && s->op != EIN_REDUCE_ALL &&
                  j->row_st[0] == 1 &&
                  ((j->row_st[1] == 1 && j->row_st[2] == 0) ||
                   (j->row_st[1] == 0 && j->row_st[2] == 1));
}

/* Decides once per step whether its rows go in tiles (run_tiled): mode
 * K (a product, a conversion, a scaling, a fold of other axes) whose row
 * is read from a source at a stride of a cache line or more, while an
 * outer axis is shorter-strided there (`j i, j i -> i j`, `, j i -> i
 * j`, `b j i -> i j`). Row by row each value would come from a line (and
 * a page) of its own, and the next row would need the same lines again
 * after row_n others per source and reduced index; a tile reads that
 * source along the outer axis instead. */
static void tile_plan(loop_job *j) {
  const ein_step *s = j->s;
  if (s->kind == EIN_STEP_FILL || j->row_reduced || j->win > 1 ||
      j->simd || j->simd_scale || j->row_n < 8)
    return;
  int best = -1, by = 1;
  for (int k = 1; k <= s->nsrc; k++) {
    int64_t sa = llabs(j->row_st[k]);
    if (sa * (int64_t)j->esz[k] < 64) continue;
    for (int i = 0; i < j->outer.n; i++) {
      int64_t sb = llabs(j->outer.st[i][k]);
      if (sb != 0 && sb < sa && j->outer.size[i] >= 8 &&
          (best < 0 || sb < llabs(j->outer.st[best][by])))
        best = i, by = k;
    }
  }
  if (best >= 0) ein_loop_axes_take(&j->outer, best, &j->tile_n, j->tile_st);
}

/* init folded with the n contiguous source values at element offset
 * off (j->simd). */
static float simd_reduce_row(const loop_job *j, int64_t off, int64_t n,
                             float init) {
  const char *p = j->src[0] + off * (int64_t)j->esz[1];
  ein_simd_fold op = (ein_simd_fold)simd_fold_of(j->s->op);
  if (j->s->src_dtype[0] == EIN_DT_F16)
    return ein_avx2_reduce_f16(op, init, (const uint16_t *)p, n);
  return ein_avx2_reduce_f32(op, init, (const float *)p, n);
}

/* Mode R with the row the only reduced axis (j->simd): results lo..hi
 * in runs along the innermost outer axis, up to ROW at a time, each run
 * folded by one call of the rows kernel, then scaled and stored as a
 * row. */
static void simd_rows(const loop_job *j, int64_t lo, int64_t hi) {
  float res[ROW];
  const ein_loop_axes *oa = &j->outer;
  int in = oa->n - 1;
  int64_t sst = in < 0 ? 0 : oa->st[in][1], dst = in < 0 ? 0 : oa->st[in][0];
  ein_simd_fold op = (ein_simd_fold)simd_fold_of(j->s->op);
  ein_loop_cursor oc;
  for (int64_t o = lo; o < hi;) {
    ein_loop_cursor_start(oa, o, &oc);
    int64_t run = in < 0 ? 1 : oa->size[in] - oc.idx[in];
    run = run < hi - o ? run : hi - o;
    run = run < ROW ? run : ROW;
    const char *p = j->src[0] + oc.off[1] * (int64_t)j->esz[1];
    if (j->s->src_dtype[0] == EIN_DT_F16)
      ein_avx2_reduce_rows_f16(op, (const uint16_t *)(const void *)p, run,
                               sst, j->row_n, res);
    else
      ein_avx2_reduce_rows_f32(op, (const float *)(const void *)p, run, sst,
                               j->row_n, res);
    if (j->s->alpha != 1)
      for (int64_t i = 0; i < run; i++) res[i] = (float)(res[i] * j->s->alpha);
    store_f32(j->s->dst_dtype, j->dst + oc.off[0] * (int64_t)j->esz[0], dst,
              run, res);
    o += run;
  }
}

/* acc[i] folded with the n contiguous source values at off (j->simd). */
static void simd_fold_row(const loop_job *j, int64_t off, int64_t n,
                          float *acc) {
  const char *p = j->src[0] + off * (int64_t)j->esz[1];
  ein_simd_fold op = (ein_simd_fold)simd_fold_of(j->s->op);
  if (j->s->src_dtype[0] == EIN_DT_F16)
    ein_avx2_fold_f16(op, acc, (const uint16_t *)p, n);
  else
    ein_avx2_fold_f32(op, acc, (const float *)p, n);
}

/* acc[0..n) = the windows of two of the n results at off, over reduced
 * indices rlo..rhi (j->simd_pairs: their rows lie one stride apart). */
static void simd_pairs_chunk(const loop_job *j, int64_t off, int64_t n,
                             int64_t rlo, int64_t rhi, float *acc) {
  int64_t rst = j->red.n ? j->red.st[0][1] : 0;
  const char *p = j->src[0] + (off + rlo * rst) * (int64_t)j->esz[1];
  ein_simd_fold op = (ein_simd_fold)simd_fold_of(j->s->op);
  if (j->s->src_dtype[0] == EIN_DT_F16)
    ein_avx2_fold_pairs_f16(op, (const uint16_t *)p, rhi - rlo, rst, n, acc);
  else
    ein_avx2_fold_pairs_f32(op, (const float *)p, rhi - rlo, rst, n, acc);
}

/* The n results of a row at offsets off (j->simd_scale): the contiguous
 * source times the broadcast one, f16 to f16. */
static void simd_scale_row(const loop_job *j, const int64_t off[3],
                           int64_t n) {
  int row = j->row_st[1] == 1 ? 1 : 2, g = 3 - row;
  const uint16_t *x = (const uint16_t *)(const void *)j->src[row - 1];
  const uint16_t *gp = (const uint16_t *)(const void *)j->src[g - 1];
  ein_avx2_scale_f16(x + off[row], n, ein_f16_to_f32(gp[off[g]]),
                     (uint16_t *)(void *)j->dst + off[0]);
}

/* The row kernels, one instance per accumulator type (see the .inc). */
#define T float
#define SUFFIX f32
#define NATIVE EIN_DT_F32
#define LOAD load_f32
#define STORE store_f32
#define IDENT_SUM 0.0f
#define IDENT_PROD 1.0f
#define MAXV INFINITY
#define MINV (-INFINITY)
#define IS_NAN(x) ((x) != (x))
#define TRANSPOSE_AVX2 ein_avx2_transpose_4
#define SIMD_ROWS
#include "cpu_loops_acc.inc"

#define T double
#define SUFFIX f64
#define NATIVE EIN_DT_F64
#define LOAD CONVERT_LOAD
#define STORE CONVERT_STORE
#define IDENT_SUM 0.0
#define IDENT_PROD 1.0
#define MAXV INFINITY
#define MINV (-INFINITY)
#define IS_NAN(x) ((x) != (x))
#define TRANSPOSE_AVX2 ein_avx2_transpose_8
#include "cpu_loops_acc.inc"

#define T int64_t
#define SUFFIX i64
#define NATIVE EIN_DT_I64
#define LOAD load_i64
#define STORE store_i64
#define IDENT_SUM 0
#define IDENT_PROD 1
#define MAXV INT64_MAX
#define MINV INT64_MIN
#define IS_NAN(x) 0
#include "cpu_loops_acc.inc"

/* Complex accumulators have no max or min (the planner refuses them):
 * UNORDERED leaves those folds out of these instances. */
#define T float complex
#define SUFFIX c64
#define NATIVE EIN_DT_C64
#define LOAD CONVERT_LOAD
#define STORE CONVERT_STORE
#define IDENT_SUM 0.0f
#define IDENT_PROD 1.0f
#define UNORDERED
#include "cpu_loops_acc.inc"

#define T double complex
#define SUFFIX c128
#define NATIVE EIN_DT_C128
#define LOAD CONVERT_LOAD
#define STORE CONVERT_STORE
#define IDENT_SUM 0.0
#define IDENT_PROD 1.0
#define UNORDERED
#include "cpu_loops_acc.inc"

static void run_range(const loop_job *j, int64_t lo, int64_t hi) {
  switch (j->acc) {
  case EIN_ACC_F32: run_range_f32(j, lo, hi); return;
  case EIN_ACC_F64: run_range_f64(j, lo, hi); return;
  case EIN_ACC_I64: run_range_i64(j, lo, hi); return;
  case EIN_ACC_C64: run_range_c64(j, lo, hi); return;
  case EIN_ACC_C128: run_range_c128(j, lo, hi); return;
  }
}

static bool run_split(const loop_job *j, int threads) {
  switch (j->acc) {
  case EIN_ACC_F32: return run_split_f32(j, threads);
  case EIN_ACC_F64: return run_split_f64(j, threads);
  case EIN_ACC_I64: return run_split_i64(j, threads);
  case EIN_ACC_C64: return run_split_c64(j, threads);
  case EIN_ACC_C128: return run_split_c128(j, threads);
  }
  return false;
}

/* Threaded steps hand out their outer rows in chunks, a few per thread,
 * to whichever thread asks next (dynamic scheduling): on a loaded
 * machine a thread that is not scheduled for a while then delays one
 * small chunk, not a fixed half of the step. */
static inline int64_t chunk_count(int64_t nouter, int threads) {
  int64_t n = 8 * (int64_t)threads;
  return nouter < n ? nouter : n;
}

/* Moves axis `at` of `from` into the row fields of the job. */
static void take_row(loop_job *j, ein_loop_axes *from, int at) {
  ein_loop_axes_take(from, at, &j->row_n, j->row_st);
}

/* ------------------------------------------------------------ copies */

/* Pure data movement (one source, same dtype, no scaling, nothing
 * reduced): permutes, repeats, diagonals, strided views. Elements move as
 * 1, 2, 4, 8 or 16-byte words (c128 as a pair of 8-byte ones). When the destination's fastest axis is not the
 * source's, the two axes are walked in 32x32 tiles so both sides stay in
 * cache (a transpose); otherwise rows are copied along the destination's
 * fastest axis. The AVX2 transposes take larger tiles (copy_plane). */
#define TILE 32
#define GATHER_AHEAD 64
#define W 1
#define T uint8_t
#include "cpu_loops_copy.inc"
#define W 2
#define T uint16_t
#define TRANSPOSE_AVX2 ein_avx2_transpose_2
#include "cpu_loops_copy.inc"
#define W 4
#define T uint32_t
#define TRANSPOSE_AVX2 ein_avx2_transpose_4
#define INTERLEAVE_AVX2 ein_avx2_interleave_4
#include "cpu_loops_copy.inc"
#define W 8
#define T uint64_t
#define TRANSPOSE_AVX2 ein_avx2_transpose_8
#include "cpu_loops_copy.inc"
typedef struct word16 {
  uint64_t lo, hi;
} word16;
#define W 16
#define T word16
#include "cpu_loops_copy.inc"

/* The plane of a copy: a, the destination's fastest axis, and b, the
 * source's fastest other axis when the source is faster along it than
 * along a (nb = 1 when there is none), both taken out of kept. A repeat
 * (source stride 0) is never b: it transposes nothing, and as b it would
 * cut long contiguous rows into tiles of TILE elements. */
static void choose_plane(ein_loop_axes *kept, int64_t *na, int64_t sta[3],
                         int64_t *nb, int64_t stb[3]) {
  *na = *nb = 1;
  if (!kept->n) return;
  int ia = kept->n - 1, ib = -1;
  for (int i = 0; i < kept->n; i++)
    if (i != ia && kept->st[i][1] != 0 &&
        llabs(kept->st[i][1]) < llabs(kept->st[ia][1]) &&
        (ib < 0 || llabs(kept->st[i][1]) < llabs(kept->st[ib][1])))
      ib = i;
  /* Short rows with no transposition (repeats along the fastest axis, as
   * in nearest upsampling): the next axis of the destination joins them
   * as the plane's b, so the outer cursor steps once per plane row, not
   * once per few elements. */
  if (ib < 0 && kept->n > 1 && kept->size[ia] < ROW_MIN) ib = ia - 1;
  if (ib >= 0) {
    ein_loop_axes_take(kept, ib, nb, stb);
    if (ib < ia) ia--;
  }
  ein_loop_axes_take(kept, ia, na, sta);
}

/* Elements of one plane that are contiguous in operand k (0: dst, 1:
 * src): the run along a, or along b, or both when one continues the
 * other. */
static int64_t plane_run(int k, int64_t na, const int64_t sta[3], int64_t nb,
                         const int64_t stb[3]) {
  if (sta[k] == 1) return nb > 1 && stb[k] == na ? na * nb : na;
  return nb > 1 && stb[k] == 1 ? nb : 1;
}

/* The order of the outer planes. The kept axes come sorted for the
 * destination; when a plane's source runs are shorter than its
 * destination run (a few channels moved last, as in patchify: three
 * 64-byte source rows per 192-byte destination run), that order makes
 * the source reads jump between many rows at once, defeating the
 * hardware prefetchers, while each plane still writes whole lines in
 * any order: the outer axes are then walked in the source's order. */
static void order_planes(ein_loop_axes *kept, int64_t na,
                         const int64_t sta[3], int64_t nb,
                         const int64_t stb[3]) {
  if (plane_run(1, na, sta, nb, stb) < plane_run(0, na, sta, nb, stb))
    ein_loop_axes_sort(kept, 1);
}

typedef void (*copy_fn)(const ein_loop_axes *, int64_t, int64_t, char *,
                        const char *, int64_t, const int64_t *, int64_t,
                        const int64_t *);

/* Fewer planes than threads (a 2-d transpose is one plane): each plane
 * is cut along b into strips of whole 32-row tiles, handed out as the
 * planes are otherwise. */
static void copy_strips(copy_fn fn, const ein_loop_axes *kept,
                        int64_t nouter, char *dst, const char *src,
                        int64_t w, int64_t na, const int64_t sta[3],
                        int64_t nb, const int64_t stb[3], int threads) {
  int64_t strips = nb / 64 < 4 * threads ? nb / 64 : 4 * threads;
  int64_t units = nouter * strips;
#ifdef _OPENMP
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
#endif
  for (int64_t u = 0; u < units; u++) {
    int64_t o = u / strips, k = u % strips;
    int64_t b0 = (nb * k / strips) & ~(int64_t)31;
    int64_t b1 = k == strips - 1 ? nb : (nb * (k + 1) / strips) & ~(int64_t)31;
    fn(kept, o, o + 1, dst + b0 * stb[0] * w, src + b0 * stb[1] * w, na, sta,
       b1 - b0, stb);
  }
}

static bool try_copy(const ein_step *s, ein_loop_axes *kept,
                     const ein_loop_axes *red, char *dst, const char *src,
                     int threads) {
  size_t w = ein_dtype_size(s->dst_dtype);
  if (!s->plain_copy || red->n != 0 ||
      !(w == 1 || w == 2 || w == 4 || w == 8 || w == 16))
    return false;
  int64_t na, nb, sta[3] = {0}, stb[3] = {0};
  choose_plane(kept, &na, sta, &nb, stb);
  order_planes(kept, na, sta, nb, stb);
  int64_t nouter = ein_loop_axes_volume(kept);
  copy_fn fn = w == 1   ? copy_range_1
               : w == 2 ? copy_range_2
               : w == 4 ? copy_range_4
               : w == 8 ? copy_range_8
                        : copy_range_16;
  /* Bytes moved: each element written, and read from a line of its own
   * when the source row is strided by a line or more (diagonals, column
   * gathers: 16 times the written bytes for f32). */
  double rd = nb == 1 ? (double)llabs(sta[1]) * (double)w : (double)w;
  double bytes = (double)nouter * (double)na * (double)nb *
                 ((double)w + (rd < 64 ? (double)w : 64));
#ifdef _OPENMP
  if (threads > 1 && bytes > 1 << 18 && nouter < 2 * threads &&
      nb >= 128) {
    copy_strips(fn, kept, nouter, dst, src, (int64_t)w, na, sta, nb, stb,
                threads);
    return true;
  }
  if (threads > 1 && nouter > 1 && bytes > 1 << 18) {
    int64_t nchunks = chunk_count(nouter, threads);
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (int64_t c = 0; c < nchunks; c++)
      fn(kept, nouter * c / nchunks, nouter * (c + 1) / nchunks, dst, src,
         na, sta, nb, stb);
    return true;
  }
#else
  (void)threads;
  (void)bytes;
  (void)copy_strips;
#endif
  fn(kept, 0, nouter, dst, src, na, sta, nb, stb);
  return true;
}

/* A window along a kept row (mode K, one source): a reduced axis of
 * source stride 1 whose length is the row's source stride, as the w2 of
 * `b c h (w w2) -> b c h w`. It leaves red: each chunk of results then
 * folds contiguous source runs of win x its length (vector loads,
 * where the row itself would be read at stride win), and folds each
 * result's window at the end. */
static void take_window(loop_job *j, ein_loop_axes *red) {
  if (j->s->nsrc != 1 || j->row_st[1] < 2 || j->row_st[1] > ROW / 16)
    return;
  for (int i = 0; i < red->n; i++)
    if (red->st[i][1] == 1 && red->size[i] == j->row_st[1]) {
      int64_t st[3];
      ein_loop_axes_take(red, i, &j->win, st);
      return;
    }
}

/* The row axis: the source's fastest axis if it is reduced and long
 * enough to be worth folding as a row (short ones, like the 2x2 window
 * of a pooling, are better folded element-wise along a kept row). */
static void choose_row(loop_job *j, ein_loop_axes *kept, ein_loop_axes *red) {
  /* the source's fastest kept axis, whether or not it is the
   * destination's: a reduced axis slower than it (`a b c d -> d b`, c's
   * 32 against d's 1) is no row to fold, while mode K reads d along its
   * rows (in tiles: tile_plan) */
  int64_t kept_min = INT64_MAX;
  for (int i = 0; i < kept->n; i++)
    if (kept->st[i][1] != 0 && llabs(kept->st[i][1]) < kept_min)
      kept_min = llabs(kept->st[i][1]);
  int64_t red_min = red->n ? llabs(red->st[red->n - 1][1]) : INT64_MAX;
  if (j->s->kind == EIN_STEP_FILL) {
    j->row_n = 1;
  } else if (red->n && (!kept->n || (red_min < kept_min &&
                                     red->size[red->n - 1] >= 16))) {
    j->row_reduced = true;
    take_row(j, red, red->n - 1);
  } else if (kept->n) {
    take_row(j, kept, kept->n - 1);
    take_window(j, red);
  } else {
    j->row_n = 1; /* a scalar copy */
  }
  j->outer = *kept;
  j->red = *red;
}

/* Fill: store the value through the row kernel's store. */
static void run_fill(const loop_job *j) {
  const ein_step *s = j->s;
  int64_t n = ein_loop_axes_volume(&j->outer);
  ein_loop_cursor c;
  ein_loop_cursor_start(&j->outer, 0, &c);
  for (int64_t o = 0; o < n; o++, ein_loop_cursor_next(&j->outer, &c)) {
    char *p = j->dst + c.off[0] * (int64_t)j->esz[0];
    if (j->acc == EIN_ACC_I64) {
      int64_t v = (int64_t)s->fill;
      store_i64(s->dst_dtype, p, 1, 1, &v);
    } else if (j->acc == EIN_ACC_C64 || j->acc == EIN_ACC_C128) {
      /* the mean of nothing is nan+nanj, as numpy's */
      /* parts set through the array view C17 gives complex types (6.2.5),
       * since clang's <complex.h> lacks CMPLX and a nan times I is not
       * a nan imaginary part */
      double complex v;
      ((double *)&v)[0] = s->fill;
      ((double *)&v)[1] = isnan(s->fill) ? s->fill : 0;
      convert_row(s->dst_dtype, p, 1, EIN_DT_C128, (const char *)&v, 1, 1);
    } else if (j->acc == EIN_ACC_F64 || s->dst_dtype == EIN_DT_F64) {
      double v = s->fill;
      convert_row(s->dst_dtype, p, 1, EIN_DT_F64, (const char *)&v, 1, 1);
    } else {
      float v = (float)s->fill;
      store_f32(s->dst_dtype, p, 1, 1, &v);
    }
  }
}

/* Runs the job over its outer rows, across threads when the work is
 * large; few outer rows but a long reduction split the reduction. */
/* Mode K with fewer outer rows than threads and long rows (a contiguous
 * conversion or scaling is one fused row): each row is cut into pieces
 * of whole ROW chunks, each run as a job of its own over that piece
 * (its pointers moved to the piece's start), handed out dynamically. A
 * 4096^2 f16 -> f32 conversion ran on one core: 8.4 ms. */
static void run_row_pieces(const loop_job *j, int64_t nouter, int threads) {
  int64_t pieces = 4 * (int64_t)threads;
  int64_t len = (j->row_n + pieces - 1) / pieces;
  len = (len + ROW - 1) / ROW * ROW;
#ifdef _OPENMP
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
#endif
  for (int64_t u = 0; u < nouter * pieces; u++) {
    int64_t o = u / pieces, c0 = u % pieces * len;
    if (c0 >= j->row_n) continue;
    loop_job part = *j;
    part.row_n = j->row_n - c0 < len ? j->row_n - c0 : len;
    part.dst += c0 * j->row_st[0] * (int64_t)j->esz[0];
    for (int k = 0; k < j->s->nsrc; k++)
      part.src[k] += c0 * j->row_st[k + 1] * (int64_t)j->esz[k + 1];
    run_range(&part, o, o + 1);
  }
}

static void run_job(loop_job *j, int threads) {
  int64_t nouter = ein_loop_axes_volume(&j->outer);
  int64_t nred = ein_loop_axes_volume(&j->red);
  double work = (double)nouter * (double)nred * (double)j->row_n;
  if (j->tile_n) { /* the units are (outer row, tile of rows) pairs */
    work *= (double)j->tile_n;
    nouter *= tile_blocks(j);
  }
#ifdef _OPENMP
  if (threads > 1 && work > 1 << 16) {
    if (!j->row_reduced && !j->tile_n && nouter < 4 * threads &&
        nred >= 8 * threads &&
        (double)nouter * (double)j->row_n <= 1 << 20 && run_split(j, threads))
      return;
    if (!j->row_reduced && !j->tile_n && nouter < threads &&
        j->row_n >= 8 * ROW * (int64_t)threads) {
      run_row_pieces(j, nouter, threads);
      return;
    }
    if (nouter > 1) {
      int64_t nchunks = chunk_count(nouter, threads);
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
      for (int64_t c = 0; c < nchunks; c++)
        run_range(j, nouter * c / nchunks, nouter * (c + 1) / nchunks);
      return;
    }
  }
#else
  (void)threads;
  (void)work;
  (void)run_split;
  (void)run_row_pieces;
#endif
  run_range(j, 0, nouter);
}

ein_status ein_cpu_loop(const ein_step *s, char *dst, const char *src0,
                        const char *src1, int threads) {
  loop_job j;
  memset(&j, 0, sizeof j);
  j.s = s;
  j.dst = dst;
  j.src[0] = src0;
  j.src[1] = src1;
  j.esz[0] = ein_dtype_size(s->dst_dtype);
  j.esz[1] = s->nsrc > 0 ? ein_dtype_size(s->src_dtype[0]) : 1;
  j.esz[2] = s->nsrc > 1 ? ein_dtype_size(s->src_dtype[1]) : 1;
  j.acc = ein_acc_of(s->acc_dtype);
  j.win = 1;
  ein_loop_axes kept, red;
  bool empty;
  if (!ein_loop_axes_split(s, &kept, &red, &empty)) return EIN_ERR_LIMIT;
  if (empty) return EIN_OK;
  if (try_copy(s, &kept, &red, dst, src0, threads)) return EIN_OK;
  choose_row(&j, &kept, &red);
  simd_plan(&j);
  tile_plan(&j);
  if (s->kind == EIN_STEP_FILL)
    run_fill(&j);
  else
    run_job(&j, threads);
  return EIN_OK;
}
