/*
 * test_cpu_loops.c - the CPU loops' vectorised paths against direct sums
 * in double, on inputs chosen to reach them (the random tests draw sizes
 * and values that rarely do):
 *   - reductions (sum, mean, max, min, prod) over the innermost and a
 *     middle axis, rows longer than the fold's lanes and of odd lengths,
 *     in f16, bf16, f32 and f64; f16 inputs made of subnormals, an Inf
 *     and a NaN, so the branch-free f16 conversion is checked on its
 *     special cases; inputs read backwards (negative strides); rows and
 *     columns longer than the AVX2 folds' 512-value blocks; row folds
 *     whose results run along an outer axis (wrapping, longer than a
 *     run, split across threads), f32 rows with NaN, Inf and signed
 *     zeros planted at every position for max and min;
 *   - windows folded along the row (poolings of 2x2, 2x3, 3x2 and 1x2,
 *     rows of results that end in part vectors, strided and offset
 *     inputs), and a long column of windows whose reduction is split
 *     across threads;
 *   - copies along short destination rows (nearest upsampling, pixel
 *     shuffle, repeats) and transposes (4-d and 3-d permutes with sides
 *     that are not multiples of the 8x8 blocks nor of the 32x32 tiles)
 *     for 1, 2, 4 and 8-byte elements, compared exactly;
 *   - issue 18's copy rows (patchify with 2 to 5 channels moved last, a
 *     p2 of two 8-blocks and a tail; repeat_kv; long diagonals; a
 *     transpose across several of the AVX2 kernels' tiles) on
 *     contiguous inputs and on strided, offset views;
 *   - outer products with rows longer than a row chunk, both ways round;
 *   - a product with a broadcast operand (channel scaling, either
 *     operand first) in f16, bf16, f32 and f64, whose f16 results are
 *     rounded once, by the f32 -> f16 row store or the AVX2 scale kernel;
 *   - sums of products that read one operand across its rows (`i j, j
 *     i ->` and its batched and 3-axis forms: the tiled pass), with sides
 *     that are not multiples of its blocks;
 *   - products that transpose (`j i, j i -> i j`, one operand
 *     transposed, a scalar or a vector times a transpose, batched: the
 *     tiles of run_tiled), with sides that are not multiples of the
 *     tiles nor of the 256-row units, in f16, bf16, f32, f64 and i32;
 *     and folds whose results transpose (`b j i -> i j` in every
 *     reduction, `j i k -> i j`, `j r i -> i j`, a sum of products `b
 *     j i, b j i -> i j`), the same tiles with a fold over the reduced
 *     axes;
 *   - steps of one long row (a product, a scaling, folds over a short
 *     axis), cut into pieces across threads;
 *   - folds of a reduced row with few results and many reduced rows each
 *     (threads take whole results, not a split of the reduction).
 * The expected values convert f16 with half.h's scalar ein_f16_to_f32.
 * Everything runs twice: with the portable loops forced, then with what
 * the CPU allows (the AVX2/F16C kernels of cpu_simd.c on most x86 CPUs);
 * the f16 products of the two passes must agree bit for bit.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_simd.h"
#include "dtype.h"
#include "ein.h"
#include "half.h"
#include "harness.h"

static ein_ctx *ctx;

static double load(ein_dtype dt, const void *p, int64_t i) {
  switch (dt) {
  case EIN_DT_F16: return ein_f16_to_f32(((const uint16_t *)p)[i]);
  case EIN_DT_BF16: return ein_bf16_to_f32(((const uint16_t *)p)[i]);
  case EIN_DT_F32: return ((const float *)p)[i];
  case EIN_DT_I32: return ((const int32_t *)p)[i];
  default: return ((const double *)p)[i];
  }
}

/* Element i of a test input: f16 gets raw bit patterns that include
 * subnormals (most of them), one Inf and one NaN when `special`; the
 * others values in [-1, 1), or in [0.9, 1.1) for products. */
static void fill(ein_dtype dt, void *p, int64_t n, bool prod, bool special) {
  uint32_t x = 12345;
  for (int64_t i = 0; i < n; i++) {
    x = x * 1664525u + 1013904223u;
    double v = prod ? 0.9 + 0.2 * (x >> 8) / 16777216.0
                    : (x >> 8) / 8388608.0 - 1.0;
    if (dt == EIN_DT_F16) {
      uint16_t h = special ? (uint16_t)((x >> 9) & 0x83ff)
                           : ein_f32_to_f16((float)v);
      if (special && i == n / 3) h = 0x7c00;     /* +Inf */
      if (special && i == n / 2) h = 0x7e01;     /* NaN */
      ((uint16_t *)p)[i] = h;
    } else if (dt == EIN_DT_BF16) {
      ((uint16_t *)p)[i] = ein_f32_to_bf16((float)v);
    } else if (dt == EIN_DT_F32) {
      ((float *)p)[i] = (float)v;
    } else if (dt == EIN_DT_I32) {
      ((int32_t *)p)[i] = (int32_t)(x >> 24) - 128;
    } else {
      ((double *)p)[i] = v;
    }
  }
}

static double fold(ein_reduction op, double acc, double v) {
  switch (op) {
  case EIN_REDUCE_MAX: return (v > acc || isnan(v)) ? v : acc;
  case EIN_REDUCE_MIN: return (v < acc || isnan(v)) ? v : acc;
  case EIN_REDUCE_PROD: return acc * v;
  default: return acc + v;
  }
}

static double ident(ein_reduction op) {
  return op == EIN_REDUCE_MAX ? -INFINITY : op == EIN_REDUCE_MIN ? INFINITY
         : op == EIN_REDUCE_PROD ? 1 : 0;
}

/* Checks out[o] against the reduction of its row; the tolerance is
 * relative to the row's magnitude (sum of |v|) in the dtype's precision. */
static void check_out(ein_dtype dt, ein_reduction op, const void *out,
                      int64_t o, double want, double mag, const char *what) {
  double got = load(dt, out, o);
  double eps = dt == EIN_DT_F16 ? 2e-3 : dt == EIN_DT_BF16 ? 1e-2
               : dt == EIN_DT_F32 ? 1e-5 : 1e-12;
  /* f16 results below 2^-14 are subnormal: rounded to half of 2^-24 */
  double subnormal_ulp = dt == EIN_DT_F16 ? 0x1p-25 : 1e-30;
  bool ok = isnan(want) ? isnan(got)
            : isinf(want) ? got == want
            : fabs(got - want) <= eps * (mag + fabs(want)) + subnormal_ulp;
  (void)op;
  CHECK(ok, "%s %s: out[%lld] = %.9g, want %.9g", what, ein_dtype_name(dt),
        (long long)o, got, want);
}

/* `p q r -> p q` (axis 2) or `p q r -> p r` (axis 1) of a P x Q x R
 * input, read backwards along r when `reverse`. */
static void reduce_case(ein_dtype dt, ein_reduction op, int axis,
                        bool reverse, bool special, int64_t P, int64_t Q,
                        int64_t R) {
  size_t esz = ein_dtype_size(dt);
  int64_t n = P * Q * R, on = axis == 2 ? P * Q : P * R;
  char *in = malloc((size_t)n * esz), *out = malloc((size_t)on * esz);
  fill(dt, in, n, op == EIN_REDUCE_PROD, special);
  int64_t shape[3] = {P, Q, R}, st[3] = {Q * R, R, reverse ? -1 : 1};
  int64_t oshape[2] = {P, axis == 2 ? Q : R};
  DLTensor a = {.data = reverse ? in + (R - 1) * esz : in, .ndim = 3,
                .shape = shape, .strides = st, .dtype = ein_dtype_to_dl(dt),
                .device = {kDLCPU, 0}};
  DLTensor c = {.data = out, .ndim = 2, .shape = oshape,
                .dtype = ein_dtype_to_dl(dt), .device = {kDLCPU, 0}};
  const DLTensor *ins[1] = {&a};
  ein_options opt = {.reduction = op};
  const char *expr = axis == 2 ? "p q r -> p q" : "p q r -> p r";
  char what[96];
  snprintf(what, sizeof what, "%s op %d%s%s", expr, (int)op,
           reverse ? " reversed" : "", special ? " f16 specials" : "");
  ein_status s = ein_eval(ctx, expr, ins, 1, &c, &opt);
  CHECK(s == EIN_OK, "%s: %s", what, ein_status_name(s));
  int64_t len = axis == 2 ? R : Q;
  for (int64_t o = 0; s == EIN_OK && o < on; o++) {
    double acc = ident(op), mag = 0;
    for (int64_t k = 0; k < len; k++) {
      int64_t p = o / oshape[1], u = o % oshape[1];
      int64_t q = axis == 2 ? u : k, r = axis == 2 ? k : u;
      int64_t rr = reverse ? R - 1 - r : r;
      double v = load(dt, in, p * Q * R + q * R + rr);
      acc = fold(op, acc, v);
      mag += fabs(v);
    }
    if (op == EIN_REDUCE_MEAN) acc /= (double)len, mag /= (double)len;
    if (op == EIN_REDUCE_PROD) mag = fabs(acc) * (double)len;
    check_out(dt, op, out, o, acc, mag, what);
  }
  free(in), free(out);
}

static void reductions(void) {
  static const ein_dtype dts[] = {EIN_DT_F16, EIN_DT_BF16, EIN_DT_F32,
                                  EIN_DT_F64};
  static const ein_reduction ops[] = {EIN_REDUCE_SUM, EIN_REDUCE_MEAN,
                                      EIN_REDUCE_MAX, EIN_REDUCE_MIN,
                                      EIN_REDUCE_PROD};
  for (int d = 0; d < 4; d++)
    for (int k = 0; k < 5; k++)
      for (int axis = 1; axis <= 2; axis++) {
        reduce_case(dts[d], ops[k], axis, false, false, 3, 37, 101);
        reduce_case(dts[d], ops[k], axis, true, false, 2, 5, 1000);
      }
  for (int k = 0; k < 5; k++)
    if (ops[k] != EIN_REDUCE_PROD)
      for (int axis = 1; axis <= 2; axis++) {
        reduce_case(EIN_DT_F16, ops[k], axis, false, true, 2, 9, 333);
        reduce_case(EIN_DT_F16, ops[k], axis, true, true, 2, 9, 64);
      }
  /* rows longer than the kernels' 512-value blocks, ending in a part
   * block, a part vector and single values (1100 = 2 x 512 + 64 + 8 + 4
   * + ...: 76 after the blocks); columns of 1100 in the other axis */
  for (int d = 0; d < 4; d++)
    for (int k = 0; k < 4; k++) {
      reduce_case(dts[d], ops[k], 2, false, false, 2, 3, 1100);
      reduce_case(dts[d], ops[k], 1, false, false, 2, 4, 1100);
    }
  for (int k = 0; k < 4; k++)
    reduce_case(EIN_DT_F16, ops[k], 2, false, true, 1, 2, 1100);
}

/* Row folds whose results run along an outer axis: `p q r -> q p`
 * (results P apart in the source, the run wrapping every P results,
 * threads splitting it mid-run) and `p q r -> p q` with more results
 * than a run of ROW; f32 rows of 45 (a 32-block, an 8-vector and a
 * tail) with NaN, Inf and signed zeros planted at every position, so the
 * max and min kernels' NaN watch and their refold are reached. The
 * second writes a strided output (every other element). */
static void row_run_case(ein_dtype dt, ein_reduction op, bool swap,
                         bool plant) {
  enum { P = 3, Q = 700, R = 45 };
  size_t esz = ein_dtype_size(dt);
  int64_t n = (int64_t)P * Q * R;
  /* `p q r -> p q` writes every other element of its output (a strided
   * destination run) */
  char *in = malloc((size_t)n * esz), *out = calloc((size_t)2 * P * Q, esz);
  fill(dt, in, n, false, false);
  for (int64_t row = 0; plant && row < P * Q; row++) {
    float *x = (float *)(void *)in + row * R;
    int64_t k = row % R;
    switch (row % 5) {
    case 0: x[k] = NAN; break;
    case 1: x[k] = op == EIN_REDUCE_MAX ? INFINITY : -INFINITY; break;
    case 2: x[k] = NAN, x[(k + 17) % R] = NAN; break;
    case 3: for (int64_t i = 0; i < R; i++) x[i] = i % 2 ? -0.0f : 0.0f; break;
    default: break;
    }
  }
  int64_t shape[3] = {P, Q, R}, oshape[2] = {swap ? Q : P, swap ? P : Q};
  DLTensor a = {.data = in, .ndim = 3, .shape = shape,
                .dtype = ein_dtype_to_dl(dt), .device = {kDLCPU, 0}};
  int64_t ost[2] = {2 * Q, 2};
  DLTensor c = {.data = out, .ndim = 2, .shape = oshape,
                .strides = swap ? NULL : ost, .dtype = ein_dtype_to_dl(dt),
                .device = {kDLCPU, 0}};
  const DLTensor *ins[1] = {&a};
  ein_options opt = {.reduction = op};
  const char *expr = swap ? "p q r -> q p" : "p q r -> p q";
  char what[96];
  snprintf(what, sizeof what, "%s op %d%s", expr, (int)op,
           plant ? " NaN/Inf/zeros" : "");
  ein_status s = ein_eval(ctx, expr, ins, 1, &c, &opt);
  CHECK(s == EIN_OK, "%s: %s", what, ein_status_name(s));
  for (int64_t row = 0; s == EIN_OK && row < P * Q; row++) {
    double acc = ident(op), mag = 0;
    for (int64_t k = 0; k < R; k++) {
      double v = load(dt, in, row * R + k);
      acc = fold(op, acc, v);
      mag += fabs(v);
    }
    if (op == EIN_REDUCE_MEAN) acc /= R, mag /= R;
    int64_t p = row / Q, q = row % Q;
    check_out(dt, op, out, swap ? q * P + p : 2 * row, acc, mag, what);
  }
  free(in), free(out);
}

static void row_runs(void) {
  static const ein_reduction ops[] = {EIN_REDUCE_SUM, EIN_REDUCE_MEAN,
                                      EIN_REDUCE_MAX, EIN_REDUCE_MIN};
  for (int k = 0; k < 4; k++)
    for (int swap = 0; swap < 2; swap++) {
      row_run_case(EIN_DT_F16, ops[k], swap, false);
      row_run_case(EIN_DT_F32, ops[k], swap, false);
      row_run_case(EIN_DT_F32, ops[k], swap, true);
    }
}

/* `p (q a) (r b) -> KEEP` with the window a x b folded, KEEP being
 * "p q r" (a pooling), "p r" (the windows of a column) or "q r" (p and a
 * reduced too: two reduced axes that do not fuse). The input has P x
 * Q*A x R*B values, its rows `pad` elements apart (a strided view), and
 * starts `off` elements into its buffer. */
static void window_case(ein_dtype dt, ein_reduction op, const char *keep,
                        bool special, int64_t P, int64_t Q, int64_t R,
                        int64_t A, int64_t B, int64_t pad, int64_t off) {
  size_t esz = ein_dtype_size(dt);
  bool kp = strchr(keep, 'p') != NULL, kq = strchr(keep, 'q') != NULL;
  int64_t rows = P * Q * A, wid = R * B + pad;
  int64_t np = kp ? P : 1, nq = kq ? Q : 1, on = np * nq * R;
  char *in = malloc((size_t)(off + rows * wid) * esz);
  char *out = malloc((size_t)on * esz);
  fill(dt, in, off + rows * wid, false, special);
  int64_t shape[3] = {P, Q * A, R * B}, st[3] = {Q * A * wid, wid, 1};
  int64_t oshape[3], nd = 0;
  if (kp) oshape[nd++] = P;
  if (kq) oshape[nd++] = Q;
  oshape[nd++] = R;
  DLTensor a = {.data = in, .ndim = 3, .shape = shape, .strides = st,
                .byte_offset = (uint64_t)off * esz,
                .dtype = ein_dtype_to_dl(dt), .device = {kDLCPU, 0}};
  DLTensor c = {.data = out, .ndim = (int)nd, .shape = oshape,
                .dtype = ein_dtype_to_dl(dt), .device = {kDLCPU, 0}};
  const DLTensor *ins[1] = {&a};
  ein_length len[2] = {{"a", A}, {"b", B}};
  ein_options opt = {.reduction = op, .lengths = len, .nlengths = 2};
  char expr[64], what[128];
  snprintf(expr, sizeof expr, "p (q a) (r b) -> %s", keep);
  snprintf(what, sizeof what, "'%s' %lldx%lld op %d, %lld outputs a row%s",
           expr, (long long)A, (long long)B, (int)op, (long long)R,
           special ? " f16 specials" : "");
  ein_status s = ein_eval(ctx, expr, ins, 1, &c, &opt);
  CHECK(s == EIN_OK, "%s: %s", what, ein_status_name(s));
  int64_t count = (P / np) * (Q / nq) * A * B;
  for (int64_t o = 0; s == EIN_OK && o < on; o++) {
    int64_t op_ = o / (nq * R), oq = o / R % nq, r = o % R;
    double acc = ident(op), mag = 0;
    for (int64_t p = kp ? op_ : 0; p < (kp ? op_ + 1 : P); p++)
      for (int64_t q = kq ? oq : 0; q < (kq ? oq + 1 : Q); q++)
        for (int64_t i = 0; i < A; i++)
          for (int64_t k = 0; k < B; k++) {
            double v = load(dt, in, off + (p * Q * A + q * A + i) * wid +
                                        r * B + k);
            acc = fold(op, acc, v);
            mag += fabs(v);
          }
    if (op == EIN_REDUCE_MEAN) acc /= (double)count, mag /= (double)count;
    check_out(dt, op, out, o, acc, mag, what);
  }
  free(in), free(out);
}

/* Windows of 2 along the row (the pair kernel: rows of results that
 * end in a part vector, one result, a row of 8), of 3 (staged in wide
 * rows), 1 x 2 (no other reduced axis), a long column of windows
 * (2000 x 2 rows into 37 results: the reduction split across threads),
 * and windows under two reduced axes that do not fuse. */
static void windows(void) {
  static const ein_dtype dts[] = {EIN_DT_F16, EIN_DT_BF16, EIN_DT_F32,
                                  EIN_DT_F64};
  static const ein_reduction ops[] = {EIN_REDUCE_SUM, EIN_REDUCE_MEAN,
                                      EIN_REDUCE_MAX, EIN_REDUCE_MIN};
  for (int d = 0; d < 4; d++)
    for (int k = 0; k < 4; k++) {
      window_case(dts[d], ops[k], "p q r", false, 2, 3, 13, 2, 2, 0, 0);
      window_case(dts[d], ops[k], "p q r", false, 2, 5, 1, 2, 2, 3, 1);
      window_case(dts[d], ops[k], "p q r", false, 1, 3, 8, 2, 2, 5, 3);
      window_case(dts[d], ops[k], "p q r", false, 2, 3, 11, 2, 3, 1, 2);
      window_case(dts[d], ops[k], "p q r", false, 3, 7, 29, 1, 2, 0, 1);
      window_case(dts[d], ops[k], "p r", false, 1, 2000, 37, 1, 2, 0, 0);
      window_case(dts[d], ops[k], "p r", false, 2, 30, 19, 3, 2, 1, 0);
      window_case(dts[d], ops[k], "q r", false, 3, 4, 21, 2, 2, 1, 0);
    }
  for (int k = 0; k < 4; k++) {
    window_case(EIN_DT_F16, ops[k], "p q r", true, 2, 9, 21, 2, 2, 0, 0);
    window_case(EIN_DT_F16, ops[k], "p q r", true, 2, 9, 21, 2, 3, 0, 0);
  }
}

/* A copy case: out[index] must equal in[src(index)] byte for byte. */
typedef int64_t (*src_index)(const int64_t *oi, const int64_t *lens);

/* b c h w -> b c (h 3) (w 2): nearest upsampling. */
static int64_t upsample_src(const int64_t *oi, const int64_t *in) {
  return ((oi[0] * in[1] + oi[1]) * in[2] + oi[2] / 3) * in[3] + oi[3] / 2;
}

/* b (c 2 2) h w -> b c (h 2) (w 2): pixel shuffle. */
static int64_t shuffle_src(const int64_t *oi, const int64_t *in) {
  int64_t c = oi[1], h = oi[2] / 2, r1 = oi[2] % 2, w = oi[3] / 2,
          r2 = oi[3] % 2;
  return ((oi[0] * in[1] + c * 4 + r1 * 2 + r2) * in[2] + h) * in[3] + w;
}

/* A copy case: out[index] must equal in[src(index)] byte for byte. The
 * input is 4-d; the output has ndo axes (out4[0..ndo)). With pad > 0 the
 * input is a view into a larger buffer: its rows pad elements apart more
 * than their length and its first element pad elements in (byte_offset),
 * so strided and offset sources reach the copy paths too. */
static void copy_view_case(ein_dtype dt, const char *expr,
                           const int64_t in4[4], int ndo,
                           const int64_t out4[4], src_index src,
                           const ein_length *lens, int nlens, int64_t pad) {
  size_t esz = ein_dtype_size(dt);
  int64_t st[4] = {0, 0, 0, 1}, on = 1;
  st[2] = in4[3] + pad, st[1] = st[2] * in4[2], st[0] = st[1] * in4[1];
  int64_t n = st[0] * in4[0] + pad; /* buffer elements, the offset included */
  for (int k = 0; k < ndo; k++) on *= out4[k];
  unsigned char *in = malloc((size_t)n * esz), *out = calloc((size_t)on, esz);
  for (int64_t i = 0; i < n * (int64_t)esz; i++)
    in[i] = (unsigned char)(i * 7 + i / 251); /* distinct-ish bytes */
  if (dt == EIN_DT_F16) /* no NaN patterns: they could be quietened */
    for (int64_t i = 0; i < n; i++) ((uint16_t *)in)[i] &= 0x3fff;
  int64_t ish[4], osh[4];
  memcpy(ish, in4, sizeof ish), memcpy(osh, out4, sizeof osh);
  DLTensor a = {.data = in, .ndim = 4, .shape = ish, .strides = pad ? st : NULL,
                .byte_offset = (uint64_t)pad * esz,
                .dtype = ein_dtype_to_dl(dt), .device = {kDLCPU, 0}};
  DLTensor c = {.data = out, .ndim = ndo, .shape = osh,
                .dtype = ein_dtype_to_dl(dt), .device = {kDLCPU, 0}};
  const DLTensor *ins[1] = {&a};
  ein_options opt = {.lengths = lens, .nlengths = nlens};
  ein_status s = ein_eval(ctx, expr, ins, 1, &c, &opt);
  CHECK(s == EIN_OK, "%s %s: %s", expr, ein_dtype_name(dt),
        ein_status_name(s));
  int64_t bad = 0, oi[4] = {0};
  for (int64_t o = 0; s == EIN_OK && o < on; o++) {
    int64_t r = o, at = pad;
    for (int k = ndo - 1; k >= 0; k--) oi[k] = r % out4[k], r /= out4[k];
    int64_t li = src(oi, in4); /* the logical C-order index, in the view */
    for (int k = 3; k >= 0; k--) at += li % in4[k] * st[k], li /= in4[k];
    bad += memcmp(out + o * (int64_t)esz, in + at * (int64_t)esz, esz) != 0;
  }
  CHECK(bad == 0, "%s %s (pad %lld): %lld of %lld elements wrong", expr,
        ein_dtype_name(dt), (long long)pad, (long long)bad, (long long)on);
  free(in), free(out);
}

static void copy_case(ein_dtype dt, const char *expr, const int64_t in4[4],
                      const int64_t out4[4], src_index src,
                      const ein_length *lens, int nlens) {
  copy_view_case(dt, expr, in4, 4, out4, src, lens, nlens, 0);
}

/* b c h w -> b h w c: channels last. */
static int64_t nhwc_src(const int64_t *oi, const int64_t *in) {
  return ((oi[0] * in[1] + oi[3]) * in[2] + oi[1]) * in[3] + oi[2];
}

/* a b c d -> a d c b (as the 3-d `a b c -> c b a` under a size-1 a). */
static int64_t adcb_src(const int64_t *oi, const int64_t *in) {
  return ((oi[0] * in[1] + oi[3]) * in[2] + oi[2]) * in[3] + oi[1];
}

/* b c (h 3) (w 19) -> b (h w) (3 19 c): patchify, c channels moved
 * last (2 to 4 of them: the AVX2 interleave; 5: the tiles), p2 = 19 a
 * block of 8 twice and a tail of 3. */
enum { PF1 = 3, PF2 = 19 };
static int64_t patch_src(const int64_t *oi, const int64_t *in) {
  int64_t nc = in[1], nw = in[3] / PF2, h = oi[1] / nw, w = oi[1] % nw,
          p1 = oi[2] / (PF2 * nc), p2 = oi[2] / nc % PF2, c = oi[2] % nc;
  return ((oi[0] * nc + c) * in[2] + h * PF1 + p1) * in[3] + w * PF2 + p2;
}

/* b h s d -> b (h 3) s d: repeat_kv, whole (s d) blocks repeated. */
static int64_t repeat_src(const int64_t *oi, const int64_t *in) {
  return ((oi[0] * in[1] + oi[1] / 3) * in[2] + oi[2]) * in[3] + oi[3];
}

/* a b i i -> a b i: diagonals, rows read a line apart. */
static int64_t diag_src(const int64_t *oi, const int64_t *in) {
  return ((oi[0] * in[1] + oi[1]) * in[2] + oi[2]) * in[3] + oi[2];
}

/* The cases of issue 18's copy rows, contiguous and as strided, offset
 * views (pad 5). */
static void view_copies(ein_dtype dt, int64_t pad) {
  const ein_length pl[2] = {{"p1", PF1}, {"p2", PF2}};
  for (int64_t c = 2; c <= 5; c++) {
    const int64_t in[4] = {2, c, 2 * PF1, 3 * PF2},
                  out[4] = {2, 6, PF1 * PF2 * c, 1};
    copy_view_case(dt, "b c (h p1) (w p2) -> b (h w) (p1 p2 c)", in, 3, out,
                   patch_src, pl, 2, pad);
  }
  const ein_length r3[1] = {{"r", 3}};
  const int64_t r_in[4] = {2, 3, 5, 37}, r_out[4] = {2, 9, 5, 37};
  copy_view_case(dt, "b h s d -> b (h r) s d", r_in, 4, r_out, repeat_src,
                 r3, 1, pad);
  const int64_t d_in[4] = {2, 3, 100, 100}, d_out[4] = {2, 3, 100, 1};
  copy_view_case(dt, "a b i i -> a b i", d_in, 3, d_out, diag_src, NULL, 0,
                 pad);
  /* a transpose over several tiles of the AVX2 kernels each way (tiles
   * of 512 x 128 f16, 256 x 64 for 4 bytes): 530 along a (the
   * destination's rows) and 150 along b, both ending in part tiles of
   * 8-blocks and a tail (and for f16 an 8 x 8 block after the 8 x 16) */
  const int64_t t_in[4] = {1, 530, 1, 150}, t_out[4] = {1, 1, 150, 530};
  copy_view_case(dt, "b c h w -> b h w c", t_in, 4, t_out, nhwc_src, NULL, 0,
                 pad);
  /* source rows over 4 KiB apart for 4 bytes (1100 values): 32 x 32
   * tiles, their blocks one column at a time */
  const int64_t f_in[4] = {1, 40, 1, 1100}, f_out[4] = {1, 1, 1100, 40};
  copy_view_case(dt, "b c h w -> b h w c", f_in, 4, f_out, nhwc_src, NULL, 0,
                 pad);
  /* enough lines read (4096 of them) for the gather to take threads */
  const int64_t e_in[4] = {4, 4, 256, 256}, e_out[4] = {4, 4, 256, 1};
  copy_view_case(dt, "a b i i -> a b i", e_in, 3, e_out, diag_src, NULL, 0,
                 pad);
}

static void copies(void) {
  static const ein_dtype dts[] = {EIN_DT_U8, EIN_DT_F16, EIN_DT_F32,
                                  EIN_DT_F64};
  for (int d = 0; d < 4; d++) {
    const int64_t up_in[4] = {2, 3, 5, 37}, up_out[4] = {2, 3, 15, 74};
    const ein_length up[2] = {{"h2", 3}, {"w2", 2}};
    copy_case(dts[d], "b c h w -> b c (h h2) (w w2)", up_in, up_out,
              upsample_src, up, 2);
    const int64_t ps_in[4] = {2, 12, 7, 33}, ps_out[4] = {2, 3, 14, 66};
    const ein_length ps[2] = {{"r1", 2}, {"r2", 2}};
    copy_case(dts[d], "b (c r1 r2) h w -> b c (h r1) (w r2)", ps_in, ps_out,
              shuffle_src, ps, 2);
    const int64_t t_in[4] = {2, 45, 3, 13}, t_out[4] = {2, 3, 13, 45};
    copy_case(dts[d], "b c h w -> b h w c", t_in, t_out, nhwc_src, NULL, 0);
    const int64_t u_in[4] = {1, 70, 5, 9}, u_out[4] = {1, 5, 9, 70};
    copy_case(dts[d], "b c h w -> b h w c", u_in, u_out, nhwc_src, NULL, 0);
    const int64_t v_in[4] = {1, 37, 3, 41}, v_out[4] = {1, 41, 3, 37};
    copy_case(dts[d], "a b c d -> a d c b", v_in, v_out, adcb_src, NULL, 0);
    view_copies(dts[d], 0);
    view_copies(dts[d], 5);
  }
}

/* `b c h w, c -> b c h w` (channel scaling), or with the operands
 * swapped: each result against the product in double; the f16 results
 * are kept in `keep` (when not NULL) or compared bit for bit with it. */
enum { SCALE_N = 2 * 5 * 3 * 67 };

static void scale_case(ein_dtype dt, uint16_t *keep, bool compare,
                       bool swap) {
  enum { B = 2, C = 5, H = 3, Wd = 67, N = SCALE_N };
  size_t esz = ein_dtype_size(dt);
  char *x = malloc(N * esz), *g = malloc(C * esz), *out = malloc(N * esz);
  fill(dt, x, N, false, dt == EIN_DT_F16);
  fill(dt, g, C, true, false);
  int64_t xs[4] = {B, C, H, Wd}, gs[1] = {C};
  DLTensor a = {.data = x, .ndim = 4, .shape = xs,
                .dtype = ein_dtype_to_dl(dt), .device = {kDLCPU, 0}};
  DLTensor b = {.data = g, .ndim = 1, .shape = gs,
                .dtype = ein_dtype_to_dl(dt), .device = {kDLCPU, 0}};
  DLTensor c = {.data = out, .ndim = 4, .shape = xs,
                .dtype = ein_dtype_to_dl(dt), .device = {kDLCPU, 0}};
  const DLTensor *ins[2] = {swap ? &b : &a, swap ? &a : &b};
  ein_status s = ein_eval(ctx, swap ? "c, b c h w -> b c h w"
                                    : "b c h w, c -> b c h w",
                          ins, 2, &c, NULL);
  CHECK(s == EIN_OK, "channel scaling %s: %s", ein_dtype_name(dt),
        ein_status_name(s));
  for (int64_t o = 0; s == EIN_OK && o < N; o++) {
    double want = load(dt, x, o) * load(dt, g, o / (H * Wd) % C);
    check_out(dt, EIN_REDUCE_SUM, out, o, want, fabs(want),
              "channel scaling");
  }
  if (dt == EIN_DT_F16 && keep && !compare)
    memcpy(keep, out, N * esz);
  if (dt == EIN_DT_F16 && keep && compare) {
    int64_t differ = 0;
    for (int64_t o = 0; o < N; o++) {
      uint16_t h = ((uint16_t *)out)[o];
      bool nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
      differ += !nan && h != keep[o];
    }
    CHECK(differ == 0, "channel scaling f16: %lld results differ between "
          "the portable and the AVX2 rows", (long long)differ);
  }
  free(x), free(g), free(out);
}

/* `b i, b j -> b i j` and `b i, b j -> b j i` (outer products: nothing
 * reduced, rows longer than a ROW chunk of the loops and of odd length,
 * written straight into the destination in f32 and f64) against the
 * product in double. */
static void outer_case(ein_dtype dt, bool swap) {
  enum { B = 3, I = 5, J = 1100 };
  size_t esz = ein_dtype_size(dt);
  char *x = malloc(B * I * esz), *y = malloc(B * J * esz),
       *out = malloc((size_t)B * I * J * esz);
  fill(dt, x, B * I, false, false);
  fill(dt, y, B * J, true, false);
  int64_t xs[2] = {B, I}, ys[2] = {B, J};
  int64_t os[3] = {B, swap ? J : I, swap ? I : J};
  DLTensor a = {.data = x, .ndim = 2, .shape = xs,
                .dtype = ein_dtype_to_dl(dt), .device = {kDLCPU, 0}};
  DLTensor b = {.data = y, .ndim = 2, .shape = ys,
                .dtype = ein_dtype_to_dl(dt), .device = {kDLCPU, 0}};
  DLTensor c = {.data = out, .ndim = 3, .shape = os,
                .dtype = ein_dtype_to_dl(dt), .device = {kDLCPU, 0}};
  const DLTensor *ins[2] = {&a, &b};
  const char *expr = swap ? "b i, b j -> b j i" : "b i, b j -> b i j";
  ein_status s = ein_eval(ctx, expr, ins, 2, &c, NULL);
  CHECK(s == EIN_OK, "%s %s: %s", expr, ein_dtype_name(dt),
        ein_status_name(s));
  for (int64_t o = 0; s == EIN_OK && o < B * I * J; o++) {
    int64_t bb = o / (I * J), r = o % (I * J);
    int64_t i = swap ? r % I : r / J, j = swap ? r / I : r % J;
    double want = load(dt, x, bb * I + i) * load(dt, y, bb * J + j);
    check_out(dt, EIN_REDUCE_SUM, out, o, want, fabs(want), expr);
  }
  free(x), free(y), free(out);
}

/* A sum of products of two operands over axes b i j k (sizes n, element
 * strides sa and sb; the result indexed by b): `expr` in ein's words. */
static void dot_case(ein_dtype dt, const char *expr, const int64_t n[4],
                     const int64_t sa[4], const int64_t sb[4], int nda,
                     const int64_t *sha, int ndb, const int64_t *shb) {
  size_t esz = ein_dtype_size(dt);
  int64_t tot = n[0] * n[1] * n[2] * n[3], per = tot / n[0];
  char *x = malloc((size_t)tot * esz), *y = malloc((size_t)tot * esz);
  char *out = malloc((size_t)n[0] * esz);
  fill(dt, x, tot, false, false);
  fill(dt, y, tot, true, false);
  int64_t osh[1] = {n[0]}, sh_a[4], sh_b[4];
  memcpy(sh_a, sha, (size_t)nda * sizeof *sh_a);
  memcpy(sh_b, shb, (size_t)ndb * sizeof *sh_b);
  DLTensor a = {.data = x, .ndim = nda, .shape = sh_a,
                .dtype = ein_dtype_to_dl(dt), .device = {kDLCPU, 0}};
  DLTensor b = {.data = y, .ndim = ndb, .shape = sh_b,
                .dtype = ein_dtype_to_dl(dt), .device = {kDLCPU, 0}};
  DLTensor c = {.data = out, .ndim = n[0] > 1 ? 1 : 0, .shape = osh,
                .dtype = ein_dtype_to_dl(dt), .device = {kDLCPU, 0}};
  const DLTensor *ins[2] = {&a, &b};
  ein_status s = ein_eval(ctx, expr, ins, 2, &c, NULL);
  CHECK(s == EIN_OK, "%s %s: %s", expr, ein_dtype_name(dt),
        ein_status_name(s));
  for (int64_t o = 0; s == EIN_OK && o < n[0]; o++) {
    double want = 0, mag = 0;
    for (int64_t r = 0; r < per; r++) {
      int64_t i = r / (n[2] * n[3]), jj = r / n[3] % n[2], k = r % n[3];
      double v = load(dt, x, o * sa[0] + i * sa[1] + jj * sa[2] + k * sa[3]) *
                 load(dt, y, o * sb[0] + i * sb[1] + jj * sb[2] + k * sb[3]);
      want += v, mag += fabs(v);
    }
    check_out(dt, EIN_REDUCE_SUM, out, o, want, mag, expr);
  }
  free(x), free(y), free(out);
}

static void dots(void) {
  static const ein_dtype dts[] = {EIN_DT_F16, EIN_DT_F32, EIN_DT_F64};
  for (int d = 0; d < 3; d++) {
    /* i j, j i -> with I = 37, J = 70 */
    const int64_t n1[4] = {1, 37, 70, 1}, a1[4] = {0, 70, 1, 0},
                  b1[4] = {0, 1, 37, 0}, s1a[2] = {37, 70}, s1b[2] = {70, 37};
    dot_case(dts[d], "i j, j i ->", n1, a1, b1, 2, s1a, 2, s1b);
    /* b i j, b j i -> b with B = 5, I = 9, J = 13 */
    const int64_t n2[4] = {5, 9, 13, 1}, a2[4] = {117, 13, 1, 0},
                  b2[4] = {117, 1, 9, 0}, s2a[3] = {5, 9, 13},
                  s2b[3] = {5, 13, 9};
    dot_case(dts[d], "b i j, b j i -> b", n2, a2, b2, 3, s2a, 3, s2b);
    /* i j k, k j i -> with I = 20, J = 3, K = 70 */
    const int64_t n3[4] = {1, 20, 3, 70}, a3[4] = {0, 210, 70, 1},
                  b3[4] = {0, 1, 20, 60}, s3a[3] = {20, 3, 70},
                  s3b[3] = {70, 3, 20};
    dot_case(dts[d], "i j k, k j i ->", n3, a3, b3, 3, s3a, 3, s3b);
  }
}

/* A product of two operands with nothing reduced, out[b i j] (sizes n)
 * = x[b i j] y[b i j] read at element strides sa and sb (all 0 for a
 * scalar): `expr` in ein's words, the operands' shapes sha and shb. */
static void map_case(ein_dtype dt, const char *expr, const int64_t n[3],
                     const int64_t sa[3], const int64_t sb[3], int nda,
                     const int64_t *sha, int ndb, const int64_t *shb) {
  size_t esz = ein_dtype_size(dt);
  int64_t tot = n[0] * n[1] * n[2], na = 1, nb = 1;
  for (int d = 0; d < nda; d++) na *= sha[d];
  for (int d = 0; d < ndb; d++) nb *= shb[d];
  char *x = malloc((size_t)na * esz), *y = malloc((size_t)nb * esz);
  char *out = malloc((size_t)tot * esz);
  fill(dt, x, na, false, false);
  fill(dt, y, nb, true, false);
  int64_t sh_a[3], sh_b[3], osh[3] = {n[0], n[1], n[2]};
  if (nda) memcpy(sh_a, sha, (size_t)nda * sizeof *sh_a);
  if (ndb) memcpy(sh_b, shb, (size_t)ndb * sizeof *sh_b);
  DLTensor a = {.data = x, .ndim = nda, .shape = sh_a,
                .dtype = ein_dtype_to_dl(dt), .device = {kDLCPU, 0}};
  DLTensor b = {.data = y, .ndim = ndb, .shape = sh_b,
                .dtype = ein_dtype_to_dl(dt), .device = {kDLCPU, 0}};
  int nd = n[0] > 1 ? 3 : 2;
  DLTensor c = {.data = out, .ndim = nd, .shape = osh + 3 - nd,
                .dtype = ein_dtype_to_dl(dt), .device = {kDLCPU, 0}};
  const DLTensor *ins[2] = {&a, &b};
  ein_status s = ein_eval(ctx, expr, ins, 2, &c, NULL);
  CHECK(s == EIN_OK, "%s %s: %s", expr, ein_dtype_name(dt),
        ein_status_name(s));
  for (int64_t o = 0; s == EIN_OK && o < tot; o++) {
    int64_t bb = o / (n[1] * n[2]), i = o / n[2] % n[1], jj = o % n[2];
    double want = load(dt, x, bb * sa[0] + i * sa[1] + jj * sa[2]) *
                  load(dt, y, bb * sb[0] + i * sb[1] + jj * sb[2]);
    check_out(dt, EIN_REDUCE_SUM, out, o, want, fabs(want), expr);
  }
  free(x), free(y), free(out);
}

/* A fold over r of one operand or a product of two, out[i j] (I x J)
 * = op over r < R of x[r i j] (times y[r i j]), read at element
 * strides sa and sb (ndb 0: no second operand): `expr` in ein's words,
 * the operands' shapes sha and shb. */
static void fold_case(ein_dtype dt, ein_reduction op, const char *expr,
                      const int64_t n[3], const int64_t sa[3],
                      const int64_t sb[3], int nda, const int64_t *sha,
                      int ndb, const int64_t *shb) {
  size_t esz = ein_dtype_size(dt);
  int64_t tot = n[1] * n[2], na = 1, nb = 1;
  for (int d = 0; d < nda; d++) na *= sha[d];
  for (int d = 0; d < ndb; d++) nb *= shb[d];
  bool prod = op == EIN_REDUCE_PROD;
  char *x = malloc((size_t)na * esz), *y = malloc((size_t)nb * esz);
  char *out = malloc((size_t)tot * esz);
  fill(dt, x, na, prod, false);
  fill(dt, y, nb, true, false);
  int64_t sh_a[3], sh_b[3], osh[2] = {n[1], n[2]};
  memcpy(sh_a, sha, (size_t)nda * sizeof *sh_a);
  if (ndb) memcpy(sh_b, shb, (size_t)ndb * sizeof *sh_b);
  DLTensor a = {.data = x, .ndim = nda, .shape = sh_a,
                .dtype = ein_dtype_to_dl(dt), .device = {kDLCPU, 0}};
  DLTensor b = {.data = y, .ndim = ndb, .shape = sh_b,
                .dtype = ein_dtype_to_dl(dt), .device = {kDLCPU, 0}};
  DLTensor c = {.data = out, .ndim = 2, .shape = osh,
                .dtype = ein_dtype_to_dl(dt), .device = {kDLCPU, 0}};
  const DLTensor *ins[2] = {&a, &b};
  ein_options opt = {.reduction = op};
  ein_status s = ein_eval(ctx, expr, ins, ndb ? 2 : 1, &c, &opt);
  CHECK(s == EIN_OK, "%s op %d %s: %s", expr, (int)op, ein_dtype_name(dt),
        ein_status_name(s));
  for (int64_t o = 0; s == EIN_OK && o < tot; o++) {
    int64_t i = o / n[2], jj = o % n[2];
    double acc = ident(op), mag = 0;
    for (int64_t r = 0; r < n[0]; r++) {
      double v = load(dt, x, r * sa[0] + i * sa[1] + jj * sa[2]);
      if (ndb) v *= load(dt, y, r * sb[0] + i * sb[1] + jj * sb[2]);
      acc = fold(op, acc, v);
      mag += fabs(v);
    }
    if (op == EIN_REDUCE_MEAN) acc /= (double)n[0], mag /= (double)n[0];
    if (prod) mag = fabs(acc) * (double)n[0];
    check_out(dt, op, out, o, acc, mag, expr);
  }
  free(x), free(y), free(out);
}

/* Folds whose results transpose the operands' rows (the tiles of
 * run_tiled with reduced axes): over a batch, over a fastest axis, of
 * a product; I = 300 and J = 70 as in maps(). */
static void transposing_folds(void) {
  static const ein_dtype dts[] = {EIN_DT_F16, EIN_DT_BF16, EIN_DT_F32,
                                  EIN_DT_F64, EIN_DT_I32};
  static const ein_reduction ops[] = {EIN_REDUCE_SUM, EIN_REDUCE_MEAN,
                                      EIN_REDUCE_MAX, EIN_REDUCE_MIN,
                                      EIN_REDUCE_PROD};
  enum { R = 5, I = 300, J = 70, K = 4 };
  const int64_t n[3] = {R, I, J}, bji[3] = {R, J, I}, t[3] = {J * I, 1, I},
                nk[3] = {K, I, J}, jik[3] = {J, I, K}, tk[3] = {1, K, I * K},
                vj[1] = {J}, w[3] = {0, 0, 1};
  const int64_t n20[3] = {20, I, J}, jri[3] = {J, 20, I},
                t20[3] = {I, 1, 20 * I};
  for (int d = 0; d < 5; d++) {
    for (int o = 0; o < 5; o++) {
      /* i32: a mean is not an integer; a product of 5 values wraps */
      if (dts[d] == EIN_DT_I32 && (ops[o] == EIN_REDUCE_MEAN ||
                                   ops[o] == EIN_REDUCE_PROD))
        continue;
      fold_case(dts[d], ops[o], "b j i -> i j", n, t, t, 3, bji, 0, NULL);
    }
    fold_case(dts[d], EIN_REDUCE_MAX, "j i k -> i j", nk, tk, tk, 3, jik, 0,
              NULL);
    fold_case(dts[d], EIN_REDUCE_SUM, "j i k -> i j", nk, tk, tk, 3, jik, 0,
              NULL);
    fold_case(dts[d], EIN_REDUCE_SUM, "b j i, b j i -> i j", n, t, t, 3, bji,
              3, bji);
    fold_case(dts[d], EIN_REDUCE_SUM, "b j i, j -> i j", n, t, w, 3, bji, 1,
              vj);
    /* the reduced axis between the source's fastest (kept) axis and the
     * destination's: folded as tiles, not as rows read I apart */
    fold_case(dts[d], EIN_REDUCE_SUM, "j r i -> i j", n20, t20, t20, 3, jri,
              0, NULL);
    fold_case(dts[d], EIN_REDUCE_MAX, "j r i -> i j", n20, t20, t20, 3, jri,
              0, NULL);
  }
}

/* Transposing products, I = 300 (a unit of 256 rows and a part one),
 * J = 70 (a tile of 64 and a part one). */
static void maps(void) {
  static const ein_dtype dts[] = {EIN_DT_F16, EIN_DT_BF16, EIN_DT_F32,
                                  EIN_DT_F64, EIN_DT_I32};
  enum { I = 300, J = 70, B = 3, I2 = 40, J2 = 33 };
  const int64_t n[3] = {1, I, J}, ji[2] = {J, I}, ij[2] = {I, J},
                vi[1] = {I}, t[3] = {0, 1, I}, s[3] = {0, J, 1},
                v[3] = {0, 1, 0}, z[3] = {0, 0, 0};
  const int64_t n2[3] = {B, I2, J2}, bji[3] = {B, J2, I2}, vj[1] = {J2},
                t2[3] = {J2 * I2, 1, I2}, w2[3] = {0, 0, 1};
  for (int d = 0; d < 5; d++) {
    map_case(dts[d], "j i, j i -> i j", n, t, t, 2, ji, 2, ji);
    map_case(dts[d], "j i, i j -> i j", n, t, s, 2, ji, 2, ij);
    map_case(dts[d], "i j, j i -> i j", n, s, t, 2, ij, 2, ji);
    map_case(dts[d], ", j i -> i j", n, z, t, 0, NULL, 2, ji);
    map_case(dts[d], "j i, i -> i j", n, t, v, 2, ji, 1, vi);
    map_case(dts[d], "b j i, j -> b i j", n2, t2, w2, 3, bji, 1, vj);
  }
}

/* Steps of one long row (run_row_pieces: fewer outer rows than
 * threads, the row cut into pieces across them): a product, a scaling
 * and a fold over a short axis, N = 50001 (not a multiple of a piece). */
static void long_rows(void) {
  static const ein_dtype dts[] = {EIN_DT_F16, EIN_DT_F32, EIN_DT_F64,
                                  EIN_DT_I32};
  enum { N = 50001, R = 3 };
  const int64_t n[3] = {1, 1, N}, sh[2] = {1, N}, t[3] = {0, N, 1},
                z[3] = {0, 0, 0}, nr[3] = {R, 1, N}, shr[3] = {R, 1, N},
                tr[3] = {N, N, 1};
  for (int d = 0; d < 4; d++) {
    map_case(dts[d], "i j, i j -> i j", n, t, t, 2, sh, 2, sh);
    map_case(dts[d], ", i j -> i j", n, z, t, 0, NULL, 2, sh);
    fold_case(dts[d], EIN_REDUCE_SUM, "r i j -> i j", nr, tr, tr, 3, shr, 0,
              NULL);
    fold_case(dts[d], EIN_REDUCE_MAX, "r i j -> i j", nr, tr, tr, 3, shr, 0,
              NULL);
  }
}

/* Batches of traces, `b i i -> b` and `b i i, b i i -> b`: folds of rows
 * read a line or more apart (run_rows prefetches the next results' rows;
 * 1500 results, so threads split them into ranges). */
static void traces(void) {
  static const ein_dtype dts[] = {EIN_DT_F16, EIN_DT_F32, EIN_DT_F64};
  enum { B = 1500, I = 48 };
  for (int d = 0; d < 3; d++) {
    size_t esz = ein_dtype_size(dts[d]);
    char *x = malloc((size_t)B * I * I * esz), *out = malloc(B * esz);
    fill(dts[d], x, (int64_t)B * I * I, false, false);
    int64_t sh[3] = {B, I, I}, osh[1] = {B};
    DLTensor a = {.data = x, .ndim = 3, .shape = sh,
                  .dtype = ein_dtype_to_dl(dts[d]), .device = {kDLCPU, 0}};
    DLTensor c = {.data = out, .ndim = 1, .shape = osh,
                  .dtype = ein_dtype_to_dl(dts[d]), .device = {kDLCPU, 0}};
    const DLTensor *ins[2] = {&a, &a};
    for (int n = 1; n <= 2; n++) {
      const char *expr = n == 1 ? "b i i -> b" : "b i i, b i i -> b";
      ein_status st = ein_eval(ctx, expr, ins, n, &c, NULL);
      CHECK(st == EIN_OK, "%s %s: %s", expr, ein_dtype_name(dts[d]),
            ein_status_name(st));
      for (int64_t o = 0; st == EIN_OK && o < B; o++) {
        double want = 0, mag = 0;
        for (int64_t i = 0; i < I; i++) {
          double v = load(dts[d], x, o * I * I + i * (I + 1));
          v = n == 1 ? v : v * v;
          want += v, mag += fabs(v);
        }
        check_out(dts[d], EIN_REDUCE_SUM, out, o, want, mag, expr);
      }
    }
    free(x), free(out);
  }
}

/* Folds of a reduced row with a few results and many reduced rows each
 * (`p q r -> p`, 2 results of 64 x 1024 values, rows padded so that q and
 * r stay two axes): the threads take whole
 * results (run_rows), never a split of the reduced rows, whose partial
 * rows are laid out for kept rows (run_split). */
static void few_row_folds(void) {
  static const ein_dtype dts[] = {EIN_DT_F32, EIN_DT_F64};
  static const ein_reduction ops[] = {EIN_REDUCE_SUM, EIN_REDUCE_MAX};
  enum { P = 2, Q = 64, R = 1024, L = R + 8 }; /* L: a row's stride */
  for (int d = 0; d < 2; d++)
    for (int k = 0; k < 2; k++) {
      size_t esz = ein_dtype_size(dts[d]);
      char *x = malloc((size_t)P * Q * L * esz), *out = malloc(P * esz);
      fill(dts[d], x, (int64_t)P * Q * L, false, false);
      int64_t sh[3] = {P, Q, R}, st3[3] = {Q * L, L, 1}, osh[1] = {P};
      DLTensor a = {.data = x, .ndim = 3, .shape = sh, .strides = st3,
                    .dtype = ein_dtype_to_dl(dts[d]), .device = {kDLCPU, 0}};
      DLTensor c = {.data = out, .ndim = 1, .shape = osh,
                    .dtype = ein_dtype_to_dl(dts[d]), .device = {kDLCPU, 0}};
      const DLTensor *ins[1] = {&a};
      ein_options opt = {.reduction = ops[k]};
      ein_status st = ein_eval(ctx, "p q r -> p", ins, 1, &c, &opt);
      CHECK(st == EIN_OK, "p q r -> p %s: %s", ein_dtype_name(dts[d]),
            ein_status_name(st));
      for (int64_t o = 0; st == EIN_OK && o < P; o++) {
        double want = ident(ops[k]), mag = 0;
        for (int64_t q = 0; q < Q; q++)
          for (int64_t r = 0; r < R; r++) {
            double v = load(dts[d], x, (o * Q + q) * L + r);
            want = fold(ops[k], want, v), mag += fabs(v);
          }
        check_out(dts[d], ops[k], out, o, want, mag, "p q r -> p");
      }
      free(x), free(out);
    }
}

/* One pass over every case; `f16_out` carries the f16 products from the
 * portable pass (compare false) to the other (compare true). */
static void all_cases(uint16_t *f16_out, bool compare) {
  reductions();
  row_runs();
  windows();
  copies();
  scale_case(EIN_DT_F16, f16_out, compare, false);
  scale_case(EIN_DT_F16, f16_out + SCALE_N, compare, true);
  scale_case(EIN_DT_F32, NULL, false, false);
  scale_case(EIN_DT_F64, NULL, false, false);
  scale_case(EIN_DT_BF16, NULL, false, true);
  static const ein_dtype odt[] = {EIN_DT_F16, EIN_DT_F32, EIN_DT_F64};
  for (int d = 0; d < 3; d++)
    for (int swap = 0; swap < 2; swap++) outer_case(odt[d], swap);
  dots();
  maps();
  transposing_folds();
  long_rows();
  traces();
  few_row_folds();
}

int main(void) {
  REQUIRE_OK(ein_ctx_create(&ctx));
  static uint16_t f16_out[2 * SCALE_N];
  ein_cpu_simd_force_portable(true);
  all_cases(f16_out, false);
  ein_cpu_simd_force_portable(false);
  printf("cpu_loops: the portable pass, then the %s pass\n",
         ein_cpu_avx2() ? "AVX2/F16C" : "portable (no AVX2/F16C here)");
  all_cases(f16_out, true);
  ein_ctx_destroy(ctx);
  return test_summary("cpu_loops");
}
