/*
 * emu_blas.c - the emulated device's cuBLAS GEMMs (emu_blas.h).
 *
 * A call is validated as cuBLAS validates it, then each batch runs in
 * three steps: op(A) and op(B) are packed into scratch in the compute
 * precision (rows of op(A) and columns of op(B) contiguous in k, inputs
 * widened, rounded for the FAST compute types, conjugated for OP_C), so
 * every element of C is one contiguous dot product; the dot products
 * accumulate in order of k; an epilogue applies alpha and beta and
 * converts to Ctype.
 *
 * Every multiply-add is an explicit fma/fmaf. That is what the GPU does
 * (FFMA, DFMA), and it pins the rounding: a compiler may not fuse or split
 * an fma call, whatever its -ffp-contract, so the emulation gives the same
 * bits on every host. Where cuBLAS leaves the arithmetic open (which
 * kernel, which order of k, split-k, how tensor cores round TF32 inputs
 * or f16 partial sums), the emulation takes the plainest reading, so a
 * GPU's bits may differ from these by rounding error; tests of einc's
 * results must compare within tolerances, as they do against cuBLAS.
 */
#include "emu_blas.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "alloc.h"
#include "checked.h"
#include "half.h"

/* ------------------------------------------------------------- kinds */

/* The precision a call computes in. */
typedef enum acc_kind { ACC_F32, ACC_F64, ACC_F16, ACC_C32, ACC_C64 } acc_kind;

/* What the FAST compute types do to each input before multiplying. */
typedef enum in_round { RND_NONE, RND_TF32, RND_BF16, RND_F16 } in_round;

/* One row of cuBLAS's table of (Atype = Btype, Ctype, computeType)
 * combinations that cublasGemmEx accepts. The int8 rows (CUDA_R_8I
 * inputs) are not emulated: einc never calls them, so they are refused
 * like any other combination. */
typedef struct type_row {
  int compute, ab, c;
  acc_kind acc;
  in_round round;
} type_row;

enum { R16F = EIN_EMU_R_16F, R16BF = EIN_EMU_R_16BF, R32F = EIN_EMU_R_32F,
       R64F = EIN_EMU_R_64F, C32F = EIN_EMU_C_32F, C64F = EIN_EMU_C_64F };

static const type_row type_rows[] = {
    {EIN_EMU_COMPUTE_16F, R16F, R16F, ACC_F16, RND_NONE},
    {EIN_EMU_COMPUTE_16F_PEDANTIC, R16F, R16F, ACC_F16, RND_NONE},
    {EIN_EMU_COMPUTE_32F, R16BF, R16BF, ACC_F32, RND_NONE},
    {EIN_EMU_COMPUTE_32F, R16F, R16F, ACC_F32, RND_NONE},
    {EIN_EMU_COMPUTE_32F, R16BF, R32F, ACC_F32, RND_NONE},
    {EIN_EMU_COMPUTE_32F, R16F, R32F, ACC_F32, RND_NONE},
    {EIN_EMU_COMPUTE_32F, R32F, R32F, ACC_F32, RND_NONE},
    {EIN_EMU_COMPUTE_32F, C32F, C32F, ACC_C32, RND_NONE},
    {EIN_EMU_COMPUTE_32F_PEDANTIC, R16BF, R16BF, ACC_F32, RND_NONE},
    {EIN_EMU_COMPUTE_32F_PEDANTIC, R16F, R16F, ACC_F32, RND_NONE},
    {EIN_EMU_COMPUTE_32F_PEDANTIC, R16BF, R32F, ACC_F32, RND_NONE},
    {EIN_EMU_COMPUTE_32F_PEDANTIC, R16F, R32F, ACC_F32, RND_NONE},
    {EIN_EMU_COMPUTE_32F_PEDANTIC, R32F, R32F, ACC_F32, RND_NONE},
    {EIN_EMU_COMPUTE_32F_PEDANTIC, C32F, C32F, ACC_C32, RND_NONE},
    {EIN_EMU_COMPUTE_32F_FAST_TF32, R32F, R32F, ACC_F32, RND_TF32},
    {EIN_EMU_COMPUTE_32F_FAST_TF32, C32F, C32F, ACC_C32, RND_TF32},
    {EIN_EMU_COMPUTE_32F_FAST_16BF, R32F, R32F, ACC_F32, RND_BF16},
    {EIN_EMU_COMPUTE_32F_FAST_16BF, C32F, C32F, ACC_C32, RND_BF16},
    {EIN_EMU_COMPUTE_32F_FAST_16F, R32F, R32F, ACC_F32, RND_F16},
    {EIN_EMU_COMPUTE_32F_FAST_16F, C32F, C32F, ACC_C32, RND_F16},
    {EIN_EMU_COMPUTE_64F, R64F, R64F, ACC_F64, RND_NONE},
    {EIN_EMU_COMPUTE_64F, C64F, C64F, ACC_C64, RND_NONE},
    {EIN_EMU_COMPUTE_64F_PEDANTIC, R64F, R64F, ACC_F64, RND_NONE},
    {EIN_EMU_COMPUTE_64F_PEDANTIC, C64F, C64F, ACC_C64, RND_NONE},
};

static const type_row *find_row(int atype, int btype, int ctype, int compute) {
  if (atype != btype)
    return NULL;
  for (size_t i = 0; i < sizeof type_rows / sizeof type_rows[0]; i++) {
    const type_row *r = &type_rows[i];
    if (r->compute == compute && r->ab == atype && r->c == ctype)
      return r;
  }
  return NULL;
}

static int64_t type_size(int type) {
  switch (type) {
  case R16F: case R16BF: return 2;
  case R32F: return 4;
  case R64F: case C32F: return 8;
  default: return 16; /* C64F */
  }
}

static bool acc_complex(acc_kind a) { return a == ACC_C32 || a == ACC_C64; }
static bool acc_double(acc_kind a) { return a == ACC_F64 || a == ACC_C64; }

/* ------------------------------------------------------ element access */

/* Element at p of `type` as (re, im); exact for every type here. */
static void load(const char *p, int type, double v[2]) {
  uint16_t h;
  float f[2];
  v[1] = 0;
  switch (type) {
  case R16F: memcpy(&h, p, 2); v[0] = ein_f16_to_f32(h); break;
  case R16BF: memcpy(&h, p, 2); v[0] = ein_bf16_to_f32(h); break;
  case R32F: memcpy(f, p, 4); v[0] = f[0]; break;
  case R64F: memcpy(v, p, 8); break;
  case C32F: memcpy(f, p, 8); v[0] = f[0]; v[1] = f[1]; break;
  default: memcpy(v, p, 16); break; /* C64F */
  }
}

/* Stores (re, im) as `type`, rounding to nearest even. Values from an f32
 * computation arrive as doubles holding floats, so (float) is exact. */
static void store(char *p, int type, const double v[2]) {
  uint16_t h;
  float f[2] = {(float)v[0], (float)v[1]};
  switch (type) {
  case R16F: h = ein_f32_to_f16(f[0]); memcpy(p, &h, 2); break;
  case R16BF: h = ein_f32_to_bf16(f[0]); memcpy(p, &h, 2); break;
  case R32F: memcpy(p, f, 4); break;
  case R64F: memcpy(p, v, 8); break;
  case C32F: memcpy(p, f, 8); break;
  default: memcpy(p, v, 16); break; /* C64F */
  }
}

/* f32 to tf32 (10 fraction bits, f32's exponent), to nearest even; a
 * carry out of the largest finite value gives Inf, as rounding should.
 * (GPUs differ here: cvt.rna rounds ties away from zero, and tensor cores
 * fed raw f32 drop the low bits; cuBLAS does not document which it
 * does, and the difference is within TF32's own error.) */
static float round_tf32(float x) {
  uint32_t u = ein_f32_to_bits(x);
  if ((u & 0x7f800000u) == 0x7f800000u)
    return x; /* Inf, NaN */
  u += 0xfffu + ((u >> 13) & 1);
  return ein_bits_to_f32(u & ~0x1fffu);
}

static float round_f16(float x) { return ein_f16_to_f32(ein_f32_to_f16(x)); }

static float round_input(float x, in_round r) {
  switch (r) {
  case RND_TF32: return round_tf32(x);
  case RND_BF16: return ein_bf16_to_f32(ein_f32_to_bf16(x));
  case RND_F16: return round_f16(x);
  default: return x;
  }
}

/* ------------------------------------------------------------ a call */

/* A validated call. */
typedef struct gemm_call {
  int64_t m, n, k, lda, ldb, ldc;
  bool ta, tb;         /* op(A), op(B) transpose (OP_T or OP_C) */
  bool conj_a, conj_b; /* OP_C: conjugate too */
  int atype, btype, ctype;
  int64_t asz, bsz, csz; /* element bytes */
  type_row row;
  double alpha[2], beta[2]; /* in the scale type, widened exactly */
  bool beta_zero;
} gemm_call;

/* The scalar at p in the compute type's scale type, as (re, im). */
static void read_scalar(const void *p, acc_kind acc, double v[2]) {
  uint16_t h;
  v[1] = 0;
  switch (acc) {
  case ACC_F16: memcpy(&h, p, 2); v[0] = ein_f16_to_f32(h); break;
  case ACC_F32: load(p, R32F, v); break;
  case ACC_F64: load(p, R64F, v); break;
  case ACC_C32: load(p, C32F, v); break;
  case ACC_C64: load(p, C64F, v); break;
  }
}

static bool op_valid(int op) {
  return op == EIN_EMU_OP_N || op == EIN_EMU_OP_T || op == EIN_EMU_OP_C;
}

static int64_t max1(int64_t x) { return x > 1 ? x : 1; }

/* cuBLAS's argument checks, all CUBLAS_STATUS_INVALID_VALUE: an unknown
 * operation, a negative size or batch count, a leading dimension shorter
 * than the rows the matrix stores (lda >= max(1, m) for op N, else
 * max(1, k); ldb >= max(1, k) for op N, else max(1, n); ldc >= max(1, m)),
 * and alpha or beta NULL. */
static bool args_valid(int transa, int transb, int m, int n, int k, int lda,
                       int ldb, int ldc, int batch_count, const void *alpha,
                       const void *beta) {
  if (!op_valid(transa) || !op_valid(transb))
    return false;
  if (m < 0 || n < 0 || k < 0 || batch_count < 0)
    return false;
  if (lda < max1(transa == EIN_EMU_OP_N ? m : k) ||
      ldb < max1(transb == EIN_EMU_OP_N ? k : n) || ldc < max1(m))
    return false;
  return alpha && beta;
}

/* Validates the arguments both entry points share and fills *g.
 *
 * A (Atype, Btype, Ctype, computeType) that is not a row of cuBLAS's table
 * is CUBLAS_STATUS_NOT_SUPPORTED: cuBLAS documents that status for "the
 * combination of the parameters Atype, Btype and Ctype ... is not
 * supported", and INVALID_VALUE for sizes and leading dimensions. It does
 * not say which check comes first; here the argument checks do, so a call
 * wrong both ways reads INVALID_VALUE. A value that is no data or compute
 * type at all is one more unsupported combination: the documentation
 * names no other status for it. */
static int prepare(gemm_call *g, int transa, int transb, int m, int n, int k,
                   const void *alpha, int atype, int lda, int btype, int ldb,
                   const void *beta, int ctype, int ldc, int batch_count,
                   int compute) {
  if (!args_valid(transa, transb, m, n, k, lda, ldb, ldc, batch_count, alpha,
                  beta))
    return EIN_EMU_BLAS_INVALID_VALUE;
  const type_row *row = find_row(atype, btype, ctype, compute);
  if (!row)
    return EIN_EMU_BLAS_NOT_SUPPORTED;
  memset(g, 0, sizeof *g);
  g->m = m, g->n = n, g->k = k;
  g->lda = lda, g->ldb = ldb, g->ldc = ldc;
  /* OP_C on a real type is OP_T; conjugating a real is a no-op. */
  g->ta = transa != EIN_EMU_OP_N, g->tb = transb != EIN_EMU_OP_N;
  g->conj_a = transa == EIN_EMU_OP_C, g->conj_b = transb == EIN_EMU_OP_C;
  g->atype = atype, g->btype = btype, g->ctype = ctype;
  g->asz = type_size(atype), g->bsz = type_size(btype);
  g->csz = type_size(ctype);
  g->row = *row;
  read_scalar(alpha, row->acc, g->alpha);
  read_scalar(beta, row->acc, g->beta);
  g->beta_zero = g->beta[0] == 0 && g->beta[1] == 0;
  return EIN_EMU_BLAS_SUCCESS;
}

/* Nothing to compute or write: cuBLAS returns at once. */
static bool call_empty(const gemm_call *g, int batch_count) {
  return g->m == 0 || g->n == 0 || batch_count == 0;
}

/* True when a matrix stored as rows x cols with leading dimension ld,
 * repeated `batch` times `stride` elements apart, spans fewer than 2^63
 * bytes, so no offset computed from it wraps. */
static bool reach_fits(int64_t rows, int64_t cols, int64_t ld, int64_t stride,
                       int64_t batch, int64_t esz) {
  if (rows == 0 || cols == 0)
    return true;
  int64_t span = rows + (cols - 1) * ld; /* int sizes: below 2^63 */
  int64_t step, bytes;
  if (!ein_mul_i64(stride, batch - 1, &step) || step == INT64_MIN)
    return false;
  return ein_add_i64(span, step < 0 ? -step : step, &span) &&
         ein_mul_i64(span, esz, &bytes);
}

/* reach_fits for A, B and C (A and B only where read: k > 0). */
static bool reaches_fit(const gemm_call *g, int64_t sa, int64_t sb,
                        int64_t sc, int64_t batch) {
  int64_t k = g->k;
  return reach_fits(g->ta ? k : g->m, g->ta ? g->m : k, g->lda, sa, batch,
                    g->asz) &&
         reach_fits(g->tb ? g->n : k, g->tb ? k : g->n, g->ldb, sb, batch,
                    g->bsz) &&
         reach_fits(g->m, g->n, g->ldc, sc, batch, g->csz);
}

/* ------------------------------------------------------ packing */

/* Bytes of one packed element: the compute precision, twice if complex. */
static int64_t packed_size(const type_row *row) {
  return (acc_double(row->acc) ? 8 : 4) * (acc_complex(row->acc) ? 2 : 1);
}

/* One operand as `outer` vectors of k: element (o, l) at
 * src[o*s_outer + l*s_inner] (in elements of `type`). */
typedef struct pack_src {
  const char *src;
  int type;
  int64_t esz, outer, s_outer, s_inner;
  bool conj;
} pack_src;

/* Writes vector o of `p` to dst + o*k packed elements, widened to the
 * compute precision, rounded as the FAST compute types round, conjugated
 * for OP_C. */
static void pack(const pack_src *p, int64_t k, const type_row *row,
                 char *dst) {
  bool cplx = acc_complex(row->acc), dbl = acc_double(row->acc);
  int w = cplx ? 2 : 1;
  for (int64_t o = 0; o < p->outer; o++)
    for (int64_t l = 0; l < k; l++) {
      double v[2];
      load(p->src + (o * p->s_outer + l * p->s_inner) * p->esz, p->type, v);
      if (p->conj)
        v[1] = -v[1];
      int64_t at = (o * k + l) * w;
      for (int c = 0; c < w; c++) {
        if (dbl)
          ((double *)(void *)dst)[at + c] = v[c];
        else
          ((float *)(void *)dst)[at + c] = round_input((float)v[c], row->round);
      }
    }
}

/* Rows of op(A): (i, l) is A[i + l*lda], or A[l + i*lda] transposed. */
static pack_src pack_a(const gemm_call *g, const char *a) {
  return (pack_src){a, g->atype, g->asz, g->m, g->ta ? g->lda : 1,
                    g->ta ? 1 : g->lda, g->conj_a};
}

/* Columns of op(B): (l, j) is B[l + j*ldb], or B[j + l*ldb] transposed. */
static pack_src pack_b(const gemm_call *g, const char *b) {
  return (pack_src){b, g->btype, g->bsz, g->n, g->tb ? 1 : g->ldb,
                    g->tb ? g->ldb : 1, g->conj_b};
}

/* ------------------------------------------------- dot products */

static float dot_f32(const float *a, const float *b, int64_t k) {
  float acc = 0;
  for (int64_t l = 0; l < k; l++)
    acc = fmaf(a[l], b[l], acc);
  return acc;
}

static double dot_f64(const double *a, const double *b, int64_t k) {
  double acc = 0;
  for (int64_t l = 0; l < k; l++)
    acc = fma(a[l], b[l], acc);
  return acc;
}

static void dot_c32(const float *a, const float *b, int64_t k, float r[2]) {
  float re = 0, im = 0;
  for (int64_t l = 0; l < k; l++) {
    float ar = a[2 * l], ai = a[2 * l + 1], br = b[2 * l], bi = b[2 * l + 1];
    re = fmaf(-ai, bi, fmaf(ar, br, re));
    im = fmaf(ai, br, fmaf(ar, bi, im));
  }
  r[0] = re, r[1] = im;
}

static void dot_c64(const double *a, const double *b, int64_t k,
                    double r[2]) {
  double re = 0, im = 0;
  for (int64_t l = 0; l < k; l++) {
    double ar = a[2 * l], ai = a[2 * l + 1], br = b[2 * l], bi = b[2 * l + 1];
    re = fma(-ai, bi, fma(ar, br, re));
    im = fma(ai, br, fma(ar, bi, im));
  }
  r[0] = re, r[1] = im;
}

/* ---------------------------------------------------- epilogues */

/* Each computes C(i, j) = alpha acc + beta C(i, j) in its precision into
 * r, from the packed row a of op(A), the packed column b of op(B) and the
 * old C(i, j) in cv (read only when beta != 0). With k == 0 the result is
 * beta C, alpha unused, as in reference BLAS. */

static void finish_f32(const gemm_call *g, const void *a, const void *b,
                       const double cv[2], double r[2]) {
  float al = (float)g->alpha[0], be = (float)g->beta[0];
  float cb = g->beta_zero ? 0.0f : be * (float)cv[0];
  if (g->k == 0) {
    r[0] = cb;
    return;
  }
  float acc = dot_f32(a, b, g->k);
  r[0] = g->beta_zero ? al * acc : fmaf(al, acc, cb);
}

static void finish_f64(const gemm_call *g, const void *a, const void *b,
                       const double cv[2], double r[2]) {
  double al = g->alpha[0], be = g->beta[0];
  double cb = g->beta_zero ? 0.0 : be * cv[0];
  if (g->k == 0) {
    r[0] = cb;
    return;
  }
  double acc = dot_f64(a, b, g->k);
  r[0] = g->beta_zero ? al * acc : fma(al, acc, cb);
}

/* COMPUTE_16F. f16 products are exact in f32, so the dot product is the
 * f32 one, rounded to f16 once at the end (tensor cores that keep an f16
 * accumulator round more often; cuBLAS does not say which it uses). Each
 * f16 operation after that is done in f32 and rounded to f16, which is
 * the correctly rounded f16 result: f32 has more than 2*11+2 bits, so
 * that double rounding is harmless. */
static void finish_f16(const gemm_call *g, const void *a, const void *b,
                       const double cv[2], double r[2]) {
  float al = (float)g->alpha[0], be = (float)g->beta[0];
  float cb = g->beta_zero ? 0.0f : round_f16(be * (float)cv[0]);
  if (g->k == 0) {
    r[0] = cb;
    return;
  }
  float p = round_f16(al * round_f16(dot_f32(a, b, g->k)));
  r[0] = g->beta_zero ? p : round_f16(p + cb);
}

/* x * y for complex f32, each part with one rounding of its last term. */
static void cmul_f32(float xr, float xi, float yr, float yi, float out[2]) {
  out[0] = fmaf(xr, yr, -(xi * yi));
  out[1] = fmaf(xr, yi, xi * yr);
}

static void cmul_f64(double xr, double xi, double yr, double yi,
                     double out[2]) {
  out[0] = fma(xr, yr, -(xi * yi));
  out[1] = fma(xr, yi, xi * yr);
}

static void finish_c32(const gemm_call *g, const void *a, const void *b,
                       const double cv[2], double r[2]) {
  float q[2] = {0, 0}, p[2], acc[2];
  if (!g->beta_zero)
    cmul_f32((float)g->beta[0], (float)g->beta[1], (float)cv[0],
             (float)cv[1], q);
  if (g->k == 0) {
    r[0] = q[0], r[1] = q[1];
    return;
  }
  dot_c32(a, b, g->k, acc);
  cmul_f32((float)g->alpha[0], (float)g->alpha[1], acc[0], acc[1], p);
  r[0] = g->beta_zero ? p[0] : p[0] + q[0];
  r[1] = g->beta_zero ? p[1] : p[1] + q[1];
}

static void finish_c64(const gemm_call *g, const void *a, const void *b,
                       const double cv[2], double r[2]) {
  double q[2] = {0, 0}, p[2], acc[2];
  if (!g->beta_zero)
    cmul_f64(g->beta[0], g->beta[1], cv[0], cv[1], q);
  if (g->k == 0) {
    r[0] = q[0], r[1] = q[1];
    return;
  }
  dot_c64(a, b, g->k, acc);
  cmul_f64(g->alpha[0], g->alpha[1], acc[0], acc[1], p);
  r[0] = g->beta_zero ? p[0] : p[0] + q[0];
  r[1] = g->beta_zero ? p[1] : p[1] + q[1];
}

/* One element of C: old value read only when beta != 0, new one stored. */
static void element(const gemm_call *g, const void *a, const void *b,
                    char *c) {
  double cv[2] = {0, 0}, r[2] = {0, 0};
  if (!g->beta_zero)
    load(c, g->ctype, cv);
  switch (g->row.acc) {
  case ACC_F32: finish_f32(g, a, b, cv, r); break;
  case ACC_F64: finish_f64(g, a, b, cv, r); break;
  case ACC_F16: finish_f16(g, a, b, cv, r); break;
  case ACC_C32: finish_c32(g, a, b, cv, r); break;
  case ACC_C64: finish_c64(g, a, b, cv, r); break;
  }
  store(c, g->ctype, r);
}

/* ------------------------------------------------------ batches */

/* Where batch b's matrices are: pointer arrays, or bases and strides. */
typedef struct operands {
  const void *const *pa, *const *pb;
  void *const *pc;
  const char *a, *b;
  char *c;
  int64_t sa, sb, sc; /* bytes */
} operands;

static void batch_at(const operands *o, int64_t i, const char **a,
                     const char **b, char **c) {
  if (o->pc) {
    *a = o->pa ? o->pa[i] : NULL;
    *b = o->pb ? o->pb[i] : NULL;
    *c = o->pc[i];
  } else {
    *a = o->a ? o->a + i * o->sa : NULL;
    *b = o->b ? o->b + i * o->sb : NULL;
    *c = o->c + i * o->sc;
  }
}

/* The scratch holding packed op(A) and op(B); *bytes_a splits it. NULL
 * when k == 0 (nothing is packed) or on failure (*failed). */
static char *scratch_alloc(const gemm_call *g, int64_t *bytes_a,
                           bool *failed) {
  int64_t es = packed_size(&g->row), mk, nk, ba, bb, total;
  *failed = false;
  if (g->k == 0)
    return NULL;
  if (!ein_mul_i64(g->m, g->k, &mk) || !ein_mul_i64(g->n, g->k, &nk) ||
      !ein_mul_i64(mk, es, &ba) || !ein_mul_i64(nk, es, &bb) ||
      !ein_add_i64(ba, bb, &total) || (uint64_t)total > SIZE_MAX) {
    *failed = true;
    return NULL;
  }
  char *s = ein_malloc((size_t)total);
  *failed = !s;
  *bytes_a = ba;
  return s;
}

/* C of one batch from packed op(A) (pa) and op(B) (pb), NULL if k == 0. */
static void multiply(const gemm_call *g, const char *pa, const char *pb,
                     char *c) {
  int64_t row = g->k * packed_size(&g->row);
  for (int64_t j = 0; j < g->n; j++)
    for (int64_t i = 0; i < g->m; i++)
      element(g, pa ? pa + i * row : NULL, pb ? pb + j * row : NULL,
              c + (i + j * g->ldc) * g->csz);
}

/* Runs every batch. A and B are repacked only when their matrix changes
 * (a stride of 0 reuses one). ALLOC_FAILED comes before anything is
 * written. */
static int run(const gemm_call *g, const operands *o, int64_t batch) {
  int64_t bytes_a = 0;
  bool failed;
  char *scratch = scratch_alloc(g, &bytes_a, &failed);
  if (failed)
    return EIN_EMU_BLAS_ALLOC_FAILED;
  char *pa = scratch, *pb = scratch ? scratch + bytes_a : NULL;
  const char *last_a = NULL, *last_b = NULL;
  for (int64_t i = 0; i < batch; i++) {
    const char *a, *b;
    char *c;
    batch_at(o, i, &a, &b, &c);
    if (scratch && (i == 0 || a != last_a)) {
      pack_src s = pack_a(g, a);
      pack(&s, g->k, &g->row, pa);
    }
    if (scratch && (i == 0 || b != last_b)) {
      pack_src s = pack_b(g, b);
      pack(&s, g->k, &g->row, pb);
    }
    last_a = a, last_b = b;
    multiply(g, pa, pb, c);
  }
  ein_free(scratch);
  return EIN_EMU_BLAS_SUCCESS;
}

/* -------------------------------------------------- entry points */

int ein_emu_gemm_strided_batched(int transa, int transb, int m, int n, int k,
                                 const void *alpha, const void *A, int atype,
                                 int lda, long long stride_a, const void *B,
                                 int btype, int ldb, long long stride_b,
                                 const void *beta, void *C, int ctype, int ldc,
                                 long long stride_c, int batch_count,
                                 int compute_type) {
  gemm_call g;
  int st = prepare(&g, transa, transb, m, n, k, alpha, atype, lda, btype, ldb,
                   beta, ctype, ldc, batch_count, compute_type);
  if (st || call_empty(&g, batch_count))
    return st;
  if (batch_count == 1) /* unused then, and may be anything */
    stride_a = stride_b = stride_c = 0;
  /* cuBLAS cannot check device pointers (a bad one faults the kernel);
   * the emulation refuses what it would have to dereference, and offsets
   * that would wrap, instead of crashing the host. */
  if (!C || (k > 0 && (!A || !B)) ||
      !reaches_fit(&g, stride_a, stride_b, stride_c, batch_count))
    return EIN_EMU_BLAS_INVALID_VALUE;
  operands o = {.a = A, .b = B, .c = C, .sa = stride_a * g.asz,
                .sb = stride_b * g.bsz, .sc = stride_c * g.csz};
  if (k == 0)
    o.a = o.b = NULL;
  return run(&g, &o, batch_count);
}

/* Every pointer the call dereferences is there (as in the strided call,
 * the emulation's own check). */
static bool arrays_present(const gemm_call *g, const void *const A[],
                           const void *const B[], void *const C[],
                           int batch) {
  if (!C || (g->k > 0 && (!A || !B)))
    return false;
  for (int i = 0; i < batch; i++)
    if (!C[i] || (g->k > 0 && (!A[i] || !B[i])))
      return false;
  return true;
}

int ein_emu_gemm_batched(int transa, int transb, int m, int n, int k,
                         const void *alpha, const void *const A[], int atype,
                         int lda, const void *const B[], int btype, int ldb,
                         const void *beta, void *const C[], int ctype, int ldc,
                         int batch_count, int compute_type) {
  gemm_call g;
  int st = prepare(&g, transa, transb, m, n, k, alpha, atype, lda, btype, ldb,
                   beta, ctype, ldc, batch_count, compute_type);
  if (st || call_empty(&g, batch_count))
    return st;
  if (!arrays_present(&g, A, B, C, batch_count) ||
      !reaches_fit(&g, 0, 0, 0, 1))
    return EIN_EMU_BLAS_INVALID_VALUE;
  operands o = {.pa = k > 0 ? A : NULL, .pb = k > 0 ? B : NULL, .pc = C};
  return run(&g, &o, batch_count);
}

const char *ein_emu_blas_status_name(int status) {
  switch (status) {
  case EIN_EMU_BLAS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
  case EIN_EMU_BLAS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
  case EIN_EMU_BLAS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
  case EIN_EMU_BLAS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
  case EIN_EMU_BLAS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
  case EIN_EMU_BLAS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
  case EIN_EMU_BLAS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
  case EIN_EMU_BLAS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
  case EIN_EMU_BLAS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  case EIN_EMU_BLAS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
  default: return "CUBLAS_STATUS_UNKNOWN";
  }
}
