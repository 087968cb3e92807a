/*
 * test_emu_blas.c - the emulated device's cuBLAS GEMMs (runtime/emu/
 * emu_blas.h). Random shapes (both transposes and OP_C, padded leading
 * dimensions, batch strides with gaps or 0) for every legal row of the
 * type table, compared with a double-precision reference written here
 * independently; elements of C outside the m x n windows must keep their
 * bits, and the pointer-array call must give the strided call's bits.
 * Hand cases pin the rounding model (f32 order of k, fma, tf32 inputs,
 * COMPUTE_16F, output rounding); every rejected argument must give
 * cuBLAS's status and leave C alone. Where the CUDA headers exist the
 * enum values are checked against cuBLAS's own at compile time.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "emu_blas.h"
#include "emu_blaslt.h"
#include "fp8.h"
#include "half.h"
#include "harness.h"

#if defined(__has_include)
#if __has_include(<cublas_api.h>)
#include <cublas_api.h>
#define SAME(ours, theirs) _Static_assert((int)(ours) == (int)(theirs), #ours)
SAME(EIN_EMU_BLAS_SUCCESS, CUBLAS_STATUS_SUCCESS);
SAME(EIN_EMU_BLAS_NOT_INITIALIZED, CUBLAS_STATUS_NOT_INITIALIZED);
SAME(EIN_EMU_BLAS_ALLOC_FAILED, CUBLAS_STATUS_ALLOC_FAILED);
SAME(EIN_EMU_BLAS_INVALID_VALUE, CUBLAS_STATUS_INVALID_VALUE);
SAME(EIN_EMU_BLAS_ARCH_MISMATCH, CUBLAS_STATUS_ARCH_MISMATCH);
SAME(EIN_EMU_BLAS_MAPPING_ERROR, CUBLAS_STATUS_MAPPING_ERROR);
SAME(EIN_EMU_BLAS_EXECUTION_FAILED, CUBLAS_STATUS_EXECUTION_FAILED);
SAME(EIN_EMU_BLAS_INTERNAL_ERROR, CUBLAS_STATUS_INTERNAL_ERROR);
SAME(EIN_EMU_BLAS_NOT_SUPPORTED, CUBLAS_STATUS_NOT_SUPPORTED);
SAME(EIN_EMU_BLAS_LICENSE_ERROR, CUBLAS_STATUS_LICENSE_ERROR);
SAME(EIN_EMU_OP_N, CUBLAS_OP_N);
SAME(EIN_EMU_OP_T, CUBLAS_OP_T);
SAME(EIN_EMU_OP_C, CUBLAS_OP_C);
SAME(EIN_EMU_R_16F, CUDA_R_16F);
SAME(EIN_EMU_R_16BF, CUDA_R_16BF);
SAME(EIN_EMU_R_32F, CUDA_R_32F);
SAME(EIN_EMU_R_64F, CUDA_R_64F);
SAME(EIN_EMU_C_32F, CUDA_C_32F);
SAME(EIN_EMU_C_64F, CUDA_C_64F);
SAME(EIN_EMU_COMPUTE_16F, CUBLAS_COMPUTE_16F);
SAME(EIN_EMU_COMPUTE_16F_PEDANTIC, CUBLAS_COMPUTE_16F_PEDANTIC);
SAME(EIN_EMU_COMPUTE_32F, CUBLAS_COMPUTE_32F);
SAME(EIN_EMU_COMPUTE_32F_PEDANTIC, CUBLAS_COMPUTE_32F_PEDANTIC);
SAME(EIN_EMU_COMPUTE_64F, CUBLAS_COMPUTE_64F);
SAME(EIN_EMU_COMPUTE_64F_PEDANTIC, CUBLAS_COMPUTE_64F_PEDANTIC);
SAME(EIN_EMU_COMPUTE_32I, CUBLAS_COMPUTE_32I);
SAME(EIN_EMU_COMPUTE_32I_PEDANTIC, CUBLAS_COMPUTE_32I_PEDANTIC);
SAME(EIN_EMU_COMPUTE_32F_FAST_16F, CUBLAS_COMPUTE_32F_FAST_16F);
SAME(EIN_EMU_COMPUTE_32F_FAST_16BF, CUBLAS_COMPUTE_32F_FAST_16BF);
SAME(EIN_EMU_COMPUTE_32F_FAST_TF32, CUBLAS_COMPUTE_32F_FAST_TF32);
SAME(EIN_EMU_R_8F_E4M3, CUDA_R_8F_E4M3);
SAME(EIN_EMU_R_8F_E5M2, CUDA_R_8F_E5M2);
#define HAVE_CUBLAS_HEADERS 1
#endif
#endif

enum { R16F = EIN_EMU_R_16F, R16BF = EIN_EMU_R_16BF, R32F = EIN_EMU_R_32F,
       R64F = EIN_EMU_R_64F, C32F = EIN_EMU_C_32F, C64F = EIN_EMU_C_64F };
enum { N = EIN_EMU_OP_N, T = EIN_EMU_OP_T, OPC = EIN_EMU_OP_C };
enum { INVALID = EIN_EMU_BLAS_INVALID_VALUE,
       UNSUPPORTED = EIN_EMU_BLAS_NOT_SUPPORTED };

/* ------------------------------------------------------------ values */

static uint64_t rng = 0x9e3779b97f4a7c15u;

static uint32_t next_u32(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (uint32_t)(rng >> 11);
}

static int below(int n) { return (int)(next_u32() % (uint32_t)n); }

static double uniform(void) { return (double)next_u32() / 2147483648.0 - 1; }

static bool is_complex(int t) { return t == C32F || t == C64F; }

static int64_t esz(int t) {
  switch (t) {
  case R16F: case R16BF: return 2;
  case R32F: return 4;
  case R64F: case C32F: return 8;
  default: return 16;
  }
}

/* Element idx of a buffer of type t as (re, im). */
static void get(const void *buf, int t, int64_t idx, double v[2]) {
  const char *p = (const char *)buf + idx * esz(t);
  uint16_t h;
  float f[2];
  v[1] = 0;
  switch (t) {
  case R16F: memcpy(&h, p, 2); v[0] = ein_f16_to_f32(h); break;
  case R16BF: memcpy(&h, p, 2); v[0] = ein_bf16_to_f32(h); break;
  case R32F: memcpy(f, p, 4); v[0] = f[0]; break;
  case C32F: memcpy(f, p, 8); v[0] = f[0], v[1] = f[1]; break;
  default: memcpy(v, p, (size_t)esz(t)); break;
  }
}

static void put(void *buf, int t, int64_t idx, double re, double im) {
  char *p = (char *)buf + idx * esz(t);
  uint16_t h;
  float f[2] = {(float)re, (float)im};
  double d[2] = {re, im};
  switch (t) {
  case R16F: h = ein_f32_to_f16(f[0]); memcpy(p, &h, 2); break;
  case R16BF: h = ein_f32_to_bf16(f[0]); memcpy(p, &h, 2); break;
  case R32F: memcpy(p, f, 4); break;
  case C32F: memcpy(p, f, 8); break;
  default: memcpy(p, d, (size_t)esz(t)); break;
  }
}

/* alpha or beta in every scale type; `value` is what the call sees. */
typedef struct scalar {
  uint16_t h;
  float f[2];
  double d[2];
  double value[2];
} scalar;

static scalar make_scalar(double re, double im, int compute) {
  scalar s = {.h = ein_f32_to_f16((float)re), .f = {(float)re, (float)im},
              .d = {re, im}};
  if (compute == EIN_EMU_COMPUTE_16F || compute == EIN_EMU_COMPUTE_16F_PEDANTIC)
    s.value[0] = ein_f16_to_f32(s.h), s.value[1] = 0;
  else if (compute == EIN_EMU_COMPUTE_64F ||
           compute == EIN_EMU_COMPUTE_64F_PEDANTIC)
    s.value[0] = re, s.value[1] = im;
  else
    s.value[0] = s.f[0], s.value[1] = s.f[1];
  return s;
}

static const void *scalar_ptr(const scalar *s, int compute) {
  if (compute == EIN_EMU_COMPUTE_16F || compute == EIN_EMU_COMPUTE_16F_PEDANTIC)
    return &s->h;
  if (compute == EIN_EMU_COMPUTE_64F || compute == EIN_EMU_COMPUTE_64F_PEDANTIC)
    return s->d;
  return s->f;
}

/* ----------------------------------------------------- the type rows */

typedef struct type_case {
  int ab, c, compute;
  double tol; /* relative to the reference's scale */
} type_case;

/* The rows of cuBLAS's cublasGemmEx table the emulation takes. */
static const type_case legal[] = {
    {R64F, R64F, EIN_EMU_COMPUTE_64F, 1e-12},
    {R64F, R64F, EIN_EMU_COMPUTE_64F_PEDANTIC, 1e-12},
    {C64F, C64F, EIN_EMU_COMPUTE_64F, 1e-12},
    {C64F, C64F, EIN_EMU_COMPUTE_64F_PEDANTIC, 1e-12},
    {R32F, R32F, EIN_EMU_COMPUTE_32F, 1e-5},
    {R32F, R32F, EIN_EMU_COMPUTE_32F_PEDANTIC, 1e-5},
    {C32F, C32F, EIN_EMU_COMPUTE_32F, 1e-5},
    {C32F, C32F, EIN_EMU_COMPUTE_32F_PEDANTIC, 1e-5},
    {R32F, R32F, EIN_EMU_COMPUTE_32F_FAST_TF32, 1e-3},
    {C32F, C32F, EIN_EMU_COMPUTE_32F_FAST_TF32, 1e-3},
    {R32F, R32F, EIN_EMU_COMPUTE_32F_FAST_16BF, 2e-2},
    {C32F, C32F, EIN_EMU_COMPUTE_32F_FAST_16BF, 2e-2},
    {R32F, R32F, EIN_EMU_COMPUTE_32F_FAST_16F, 2e-2},
    {C32F, C32F, EIN_EMU_COMPUTE_32F_FAST_16F, 2e-2},
    {R16F, R16F, EIN_EMU_COMPUTE_32F, 2e-2},
    {R16F, R16F, EIN_EMU_COMPUTE_32F_PEDANTIC, 2e-2},
    {R16F, R32F, EIN_EMU_COMPUTE_32F, 2e-2},
    {R16F, R32F, EIN_EMU_COMPUTE_32F_PEDANTIC, 2e-2},
    {R16BF, R16BF, EIN_EMU_COMPUTE_32F, 2e-2},
    {R16BF, R16BF, EIN_EMU_COMPUTE_32F_PEDANTIC, 2e-2},
    {R16BF, R32F, EIN_EMU_COMPUTE_32F, 2e-2},
    {R16BF, R32F, EIN_EMU_COMPUTE_32F_PEDANTIC, 2e-2},
    {R16F, R16F, EIN_EMU_COMPUTE_16F, 2e-2},
    {R16F, R16F, EIN_EMU_COMPUTE_16F_PEDANTIC, 2e-2},
};
enum { NLEGAL = sizeof legal / sizeof legal[0] };

/* ------------------------------------------------------------ a call */

/* Every argument of a strided call, so a test changes one at a time. */
typedef struct call_args {
  int ta, tb, m, n, k;
  const void *alpha, *A;
  int atype, lda;
  long long sa;
  const void *B;
  int btype, ldb;
  long long sb;
  const void *beta;
  void *C;
  int ctype, ldc;
  long long sc;
  int batch, compute;
} call_args;

static int call_strided(const call_args *x) {
  return ein_emu_gemm_strided_batched(
      x->ta, x->tb, x->m, x->n, x->k, x->alpha, x->A, x->atype, x->lda, x->sa,
      x->B, x->btype, x->ldb, x->sb, x->beta, x->C, x->ctype, x->ldc, x->sc,
      x->batch, x->compute);
}

enum { MAX_BATCH = 8 };

/* The same call through pointer arrays built from the strides. */
static int call_batched(const call_args *x) {
  const void *pa[MAX_BATCH], *pb[MAX_BATCH];
  void *pc[MAX_BATCH];
  int nb = x->batch > 0 && x->batch <= MAX_BATCH ? x->batch : 0;
  for (int i = 0; i < nb; i++) {
    pa[i] = x->A ? (const char *)x->A + i * x->sa * esz(x->atype) : NULL;
    pb[i] = x->B ? (const char *)x->B + i * x->sb * esz(x->btype) : NULL;
    pc[i] = x->C ? (char *)x->C + i * x->sc * esz(x->ctype) : NULL;
  }
  return ein_emu_gemm_batched(x->ta, x->tb, x->m, x->n, x->k, x->alpha, pa,
                              x->atype, x->lda, pb, x->btype, x->ldb, x->beta,
                              pc, x->ctype, x->ldc, x->batch, x->compute);
}

/* ------------------------------------------------- the reference */

/* Rows and columns a matrix stores for op `t` of a rows x cols result. */
static int64_t stored_cols(int t, int64_t rows, int64_t cols) {
  return t == N ? cols : rows;
}

static int64_t buffer_elems(int t, int64_t rows, int64_t cols, int64_t ld,
                            long long stride, int batch) {
  int64_t one = ld * stored_cols(t, rows, cols);
  return one + (int64_t)(stride > 0 ? stride : 0) * (batch - 1) + 1;
}

/* op(X)(r, c) of batch b, conjugated for OP_C. */
static void op_elem(const void *x, int type, int t, int64_t ld,
                    long long stride, int b, int64_t r, int64_t c,
                    double v[2]) {
  int64_t idx = b * stride + (t == N ? r + c * ld : c + r * ld);
  get(x, type, idx, v);
  if (t == OPC)
    v[1] = -v[1];
}

/* alpha op(A) op(B) + beta C(i, j) of batch b in double, and its scale:
 * |alpha| sum |a||b| + |beta||c| (C read only where beta != 0). */
static void reference(const call_args *x, const double al[2],
                      const double be[2], const void *c_before, int b,
                      int64_t i, int64_t j, double r[2], double *scale) {
  double s[2] = {0, 0}, abs_sum = 0;
  for (int64_t l = 0; l < x->k; l++) {
    double a[2], bb[2];
    op_elem(x->A, x->atype, x->ta, x->lda, x->sa, b, i, l, a);
    op_elem(x->B, x->btype, x->tb, x->ldb, x->sb, b, l, j, bb);
    s[0] += a[0] * bb[0] - a[1] * bb[1];
    s[1] += a[0] * bb[1] + a[1] * bb[0];
    abs_sum += hypot(a[0], a[1]) * hypot(bb[0], bb[1]);
  }
  r[0] = al[0] * s[0] - al[1] * s[1];
  r[1] = al[0] * s[1] + al[1] * s[0];
  *scale = hypot(al[0], al[1]) * abs_sum;
  if (be[0] != 0 || be[1] != 0) {
    double c[2];
    get(c_before, x->ctype, b * x->sc + i + j * x->ldc, c);
    r[0] += be[0] * c[0] - be[1] * c[1];
    r[1] += be[0] * c[1] + be[1] * c[0];
    *scale += hypot(be[0], be[1]) * hypot(c[0], c[1]);
  }
}

/* Batch and (i, j) of C element idx, or false when idx is in no window. */
static bool in_window(const call_args *x, int64_t idx, int *b, int64_t *i,
                      int64_t *j) {
  for (*b = 0; *b < x->batch; (*b)++) {
    int64_t off = idx - *b * x->sc;
    if (off < 0)
      continue;
    *i = off % x->ldc, *j = off / x->ldc;
    if (*i < x->m && *j < x->n)
      return true;
  }
  return false;
}

/* Every element of C: in a window, within tol of the reference; outside,
 * its old bits. Prints the first bad element. */
static bool check_c(const call_args *x, const scalar *al, const scalar *be,
                    const void *before, int64_t nc, double tol) {
  int64_t sz = esz(x->ctype);
  for (int64_t idx = 0; idx < nc; idx++) {
    int b;
    int64_t i, j;
    const char *got_p = (const char *)x->C + idx * sz;
    if (!in_window(x, idx, &b, &i, &j)) {
      if (memcmp(got_p, (const char *)before + idx * sz, (size_t)sz) != 0) {
        fprintf(stderr, "  element %lld outside C changed\n", (long long)idx);
        return false;
      }
      continue;
    }
    double want[2], got[2], scale;
    reference(x, al->value, be->value, before, b, i, j, want, &scale);
    get(x->C, x->ctype, idx, got);
    double err = hypot(got[0] - want[0], got[1] - want[1]);
    if (!(err <= tol * scale + 1e-300)) {
      fprintf(stderr, "  batch %d (%lld,%lld): got %g%+gi want %g%+gi\n", b,
              (long long)i, (long long)j, got[0], got[1], want[0], want[1]);
      return false;
    }
  }
  return true;
}

/* ------------------------------------------------- random cases */

static int random_op(int type) {
  int t = below(3);
  return t == 2 && !is_complex(type) && below(2) ? N : t;
}

/* Random values in a buffer; NaN in C where beta == 0 must stay unread. */
static void fill(void *buf, int type, int64_t n, bool nan) {
  for (int64_t i = 0; i < n; i++)
    put(buf, type, i, nan ? NAN : uniform(), nan ? NAN : uniform());
}

/* A random shape with padded leading dimensions and gapped strides. */
static call_args random_shape(const type_case *tc) {
  call_args x = {0};
  x.ta = random_op(tc->ab), x.tb = random_op(tc->ab);
  x.m = below(8) ? 1 + below(40) : 0;
  x.n = below(8) ? 1 + below(40) : 0;
  x.k = below(8) ? 1 + below(40) : 0;
  x.batch = 1 + below(4);
  int ar = x.ta == N ? x.m : x.k, br = x.tb == N ? x.k : x.n;
  x.lda = (ar > 1 ? ar : 1) + below(3);
  x.ldb = (br > 1 ? br : 1) + below(3);
  x.ldc = (x.m > 1 ? x.m : 1) + below(3);
  int64_t a1 = x.lda * stored_cols(x.ta, x.m, x.k);
  int64_t b1 = x.ldb * stored_cols(x.tb, x.k, x.n);
  x.sa = below(4) ? a1 + below(5) : 0;
  x.sb = below(4) ? b1 + below(5) : 0;
  x.sc = (int64_t)x.ldc * x.n + below(5);
  x.atype = x.btype = tc->ab, x.ctype = tc->c, x.compute = tc->compute;
  return x;
}

/* One random call of a type row, strided and through pointer arrays. */
static bool random_case(const type_case *tc) {
  call_args x = random_shape(tc);
  int64_t na = buffer_elems(x.ta, x.m, x.k, x.lda, x.sa, x.batch);
  int64_t nb = buffer_elems(x.tb, x.k, x.n, x.ldb, x.sb, x.batch);
  int64_t nc = buffer_elems(N, x.m, x.n, x.ldc, x.sc, x.batch);
  void *A = malloc((size_t)(na * esz(x.atype)));
  void *B = malloc((size_t)(nb * esz(x.btype)));
  void *C = malloc((size_t)(nc * esz(x.ctype)));
  void *before = malloc((size_t)(nc * esz(x.ctype)));
  int kind = below(4); /* beta: 0 with NaN in C, 1, or random */
  scalar al = make_scalar(uniform() * 2, is_complex(x.ctype) ? uniform() : 0,
                          x.compute);
  scalar be = make_scalar(kind == 0 ? 0 : kind == 1 ? 1 : uniform(),
                          kind > 1 && is_complex(x.ctype) ? uniform() : 0,
                          x.compute);
  fill(A, x.atype, na, false);
  fill(B, x.btype, nb, false);
  fill(C, x.ctype, nc, false);
  for (int b = 0; kind == 0 && b < x.batch; b++)
    for (int j = 0; j < x.n; j++)
      fill((char *)C + (b * x.sc + j * x.ldc) * esz(x.ctype), x.ctype, x.m,
           true);
  memcpy(before, C, (size_t)(nc * esz(x.ctype)));
  x.A = A, x.B = B, x.C = C, x.alpha = scalar_ptr(&al, x.compute);
  x.beta = scalar_ptr(&be, x.compute);
  bool ok = call_strided(&x) == EIN_EMU_BLAS_SUCCESS &&
            check_c(&x, &al, &be, before, nc, tc->tol);
  /* The pointer-array call computes the same bits. */
  void *strided = malloc((size_t)(nc * esz(x.ctype)));
  memcpy(strided, C, (size_t)(nc * esz(x.ctype)));
  memcpy(C, before, (size_t)(nc * esz(x.ctype)));
  ok = ok && call_batched(&x) == EIN_EMU_BLAS_SUCCESS &&
       memcmp(strided, C, (size_t)(nc * esz(x.ctype))) == 0;
  if (!ok)
    fprintf(stderr, "  case: types %d->%d compute %d op %d %d m %d n %d k %d "
            "ld %d %d %d strides %lld %lld %lld batch %d beta kind %d\n",
            x.atype, x.ctype, x.compute, x.ta, x.tb, x.m, x.n, x.k, x.lda,
            x.ldb, x.ldc, x.sa, x.sb, x.sc, x.batch, kind);
  free(A), free(B), free(C), free(before), free(strided);
  return ok;
}

static void test_random(void) {
  for (int r = 0; r < NLEGAL; r++) {
    int bad = 0;
    for (int i = 0; i < 60; i++)
      bad += !random_case(&legal[r]);
    CHECK(bad == 0, "row %d (%d->%d, compute %d): %d of 60 cases wrong", r,
          legal[r].ab, legal[r].c, legal[r].compute, bad);
  }
}

/* ------------------------------------------------------- hand cases */

/* C = alpha A B + beta C, no transposes, tight leading dimensions. */
static int gemm_nn(int ab, int c, int compute, int m, int n, int k,
                   const void *A, const void *B, void *C, double alpha,
                   double beta) {
  scalar al = make_scalar(alpha, 0, compute), be = make_scalar(beta, 0, compute);
  call_args x = {N, N, m, n, k, scalar_ptr(&al, compute), A, ab, m > 1 ? m : 1,
                 0, B, ab, k > 1 ? k : 1, 0, scalar_ptr(&be, compute), C, c,
                 m > 1 ? m : 1, 0, 1, compute};
  return call_strided(&x);
}

static uint32_t bits(float f) { return ein_f32_to_bits(f); }

/* f32 sums in order of k, each product added with one rounding (fma). */
static void test_f32_rounding(void) {
  float A[3] = {1, 0x1p-24f, 0x1p-24f}, B[3] = {1, 1, 1}, C[1];
  int st = gemm_nn(R32F, R32F, EIN_EMU_COMPUTE_32F, 1, 1, 3, A, B, C, 1, 0);
  CHECK(st == 0 && C[0] == 1.0f && (float)(1.0 + 0x1p-23) != 1.0f,
        "1 + 2^-24 + 2^-24 in f32 order gives 1, not the f64 sum: %a", C[0]);
  float A2[2] = {1, 1 + 0x1p-12f}, B2[2] = {-1, 1 + 0x1p-12f};
  st = gemm_nn(R32F, R32F, EIN_EMU_COMPUTE_32F, 1, 1, 2, A2, B2, C, 1, 0);
  CHECK(st == 0 && C[0] == 0x1p-11f + 0x1p-24f,
        "-1 + (1+2^-12)^2 with one rounding (fma): %a", C[0]);
  double D[2] = {1, 0x1p-53}, E[2] = {1, 1}, F[1];
  st = gemm_nn(R64F, R64F, EIN_EMU_COMPUTE_64F, 1, 1, 2, D, E, F, 1, 0);
  CHECK(st == 0 && F[0] == 1.0, "f64: 1 + 2^-53 ties to 1: %a", F[0]);
}

/* The FAST compute types round each input before multiplying. */
static void test_fast_inputs(void) {
  float A[3] = {1 + 0x1p-11f, 1 + 0x3p-11f, 1 + 0x1p-11f + 0x1p-20f};
  float B[1] = {1 + 0x1p-11f}, C[3];
  int st = gemm_nn(R32F, R32F, EIN_EMU_COMPUTE_32F_FAST_TF32, 3, 1, 1, A, B,
                   C, 1, 0);
  CHECK(st == 0 && C[0] == 1.0f && C[1] == 1 + 0x1p-9f &&
            C[2] == 1 + 0x1p-10f,
        "tf32 inputs round to nearest even: %a %a %a", C[0], C[1], C[2]);
  st = gemm_nn(R32F, R32F, EIN_EMU_COMPUTE_32F, 3, 1, 1, A, B, C, 1, 0);
  CHECK(st == 0 && C[0] == 1 + 0x1p-10f + 0x1p-22f,
        "COMPUTE_32F keeps f32 inputs: %a", C[0]);
  float H[2] = {1 + 0x1p-8f, 70000}, one[1] = {1};
  st = gemm_nn(R32F, R32F, EIN_EMU_COMPUTE_32F_FAST_16BF, 2, 1, 1, H, one, C,
               1, 0);
  CHECK(st == 0 && C[0] == 1.0f && C[1] == 70144.0f,
        "bf16 inputs: %a %a", C[0], C[1]);
  st = gemm_nn(R32F, R32F, EIN_EMU_COMPUTE_32F_FAST_16F, 2, 1, 1, H, one, C,
               1, 0);
  CHECK(st == 0 && C[0] == 1 + 0x1p-8f && isinf(C[1]),
        "f16 inputs (f16's range too): %a %a", C[0], C[1]);
}

/* COMPUTE_16F rounds the dot product and each later step to f16;
 * COMPUTE_32F rounds once, into Ctype. */
static void test_half_compute(void) {
  uint16_t A[2] = {0x3c00, 0x3c00}, B[2] = {0x3c00, 0x1000}, C[1] = {0x1000};
  /* 0x1000 is 2^-11: 1 + 2^-11 ties to 1 in f16 */
  int st = gemm_nn(R16F, R16F, EIN_EMU_COMPUTE_16F, 1, 1, 2, A, B, C, 1, 1);
  CHECK(st == 0 && C[0] == 0x3c00, "16F: (1 + 2^-11) + 2^-11 -> 1: %#x",
        C[0]);
  C[0] = 0x1000;
  st = gemm_nn(R16F, R16F, EIN_EMU_COMPUTE_32F, 1, 1, 2, A, B, C, 1, 1);
  CHECK(st == 0 && C[0] == 0x3c01, "32F: 1 + 2^-10 exactly: %#x", C[0]);
  uint16_t big[1] = {0x5cb0}; /* 300 */
  st = gemm_nn(R16F, R16F, EIN_EMU_COMPUTE_32F, 1, 1, 1, big, big, C, 1, 0);
  CHECK(st == 0 && C[0] == 0x7c00, "90000 overflows f16 to Inf: %#x", C[0]);
}

/* The result rounds into bf16 to nearest even. */
static void test_output_rounding(void) {
  uint16_t A[2] = {0x3f80, 0x3f80}, B[2] = {0x3f80, 0x3b80}, C[1]; /* 2^-8 */
  int st = gemm_nn(R16BF, R16BF, EIN_EMU_COMPUTE_32F, 1, 1, 2, A, B, C, 1, 0);
  CHECK(st == 0 && C[0] == 0x3f80, "1 + 2^-8 ties to 1 in bf16: %#x", C[0]);
  B[1] = 0x3c40; /* 3 * 2^-8 */
  st = gemm_nn(R16BF, R16BF, EIN_EMU_COMPUTE_32F, 1, 1, 2, A, B, C, 1, 0);
  CHECK(st == 0 && C[0] == 0x3f82, "1 + 3*2^-8 ties up to 1 + 2^-6: %#x",
        C[0]);
}

/* beta == 0 never reads C; beta == 1 adds; k == 0 is C = beta C. */
static void test_alpha_beta(void) {
  float A[1] = {2}, B[1] = {3}, C[1] = {NAN};
  int st = gemm_nn(R32F, R32F, EIN_EMU_COMPUTE_32F, 1, 1, 1, A, B, C, 1, 0);
  CHECK(st == 0 && C[0] == 6, "beta 0 ignores NaN in C: %g", C[0]);
  C[0] = 5;
  st = gemm_nn(R32F, R32F, EIN_EMU_COMPUTE_32F, 1, 1, 1, A, B, C, 1, 1);
  CHECK(st == 0 && C[0] == 11, "beta 1 accumulates: %g", C[0]);
  C[0] = 5;
  st = gemm_nn(R32F, R32F, EIN_EMU_COMPUTE_32F, 1, 1, 1, A, B, C, -0.5, 2);
  CHECK(st == 0 && C[0] == 7, "alpha -0.5, beta 2: %g", C[0]);
  C[0] = 3;
  st = gemm_nn(R32F, R32F, EIN_EMU_COMPUTE_32F, 1, 1, 0, NULL, NULL, C, NAN, 2);
  CHECK(st == 0 && C[0] == 6, "k 0: C = beta C, alpha unused: %g", C[0]);
  C[0] = NAN;
  st = gemm_nn(R32F, R32F, EIN_EMU_COMPUTE_32F, 1, 1, 0, NULL, NULL, C, 1, 0);
  CHECK(st == 0 && C[0] == 0 && !signbit(C[0]), "k 0, beta 0: C = 0: %g",
        C[0]);
  double Z[1] = {NAN};
  st = gemm_nn(R64F, R64F, EIN_EMU_COMPUTE_64F, 1, 1, 1, (double[]){2},
               (double[]){3}, Z, 1, 0);
  CHECK(st == 0 && Z[0] == 6, "f64 beta 0 ignores NaN: %g", Z[0]);
}

/* OP_C conjugates a complex operand; OP_T does not. */
static void test_conjugate(void) {
  float A[2] = {1, 2}, B[2] = {3, 4}, C[2];
  scalar one = make_scalar(1, 0, EIN_EMU_COMPUTE_32F);
  scalar zero = make_scalar(0, 0, EIN_EMU_COMPUTE_32F);
  call_args x = {OPC, N, 1, 1, 1, one.f, A, C32F, 1, 0, B, C32F, 1, 0,
                 zero.f, C, C32F, 1, 0, 1, EIN_EMU_COMPUTE_32F};
  int st = call_strided(&x);
  CHECK(st == 0 && C[0] == 11 && C[1] == -2, "conj(1+2i)(3+4i): %g%+gi",
        C[0], C[1]);
  x.ta = T;
  st = call_strided(&x);
  CHECK(st == 0 && C[0] == -5 && C[1] == 10, "(1+2i)(3+4i): %g%+gi", C[0],
        C[1]);
  x.ta = N, x.tb = OPC;
  st = call_strided(&x);
  CHECK(st == 0 && C[0] == 11 && C[1] == 2, "(1+2i)conj(3+4i): %g%+gi", C[0],
        C[1]);
}

/* --------------------------------------------------------- rejections */

enum { BUF = 64 };
static float buf_a[BUF], buf_b[BUF], buf_c[BUF];
static double scal_one[2] = {1, 0}, scal_zero[2] = {0, 0};

/* A valid f32 call: 2 x 2 times 2 x 2. */
static call_args base_call(void) {
  for (int i = 0; i < BUF; i++)
    buf_a[i] = (float)i, buf_b[i] = 1, buf_c[i] = -7;
  return (call_args){N, N, 2, 2, 2, scal_one, buf_a, R32F, 2, 4, buf_b, R32F,
                     2, 4, scal_zero, buf_c, R32F, 2, 4, 1,
                     EIN_EMU_COMPUTE_32F};
}

/* Both entry points return `want`; a rejected call leaves C alone. The
 * pointer-array call runs only where its arrays can be built. */
static void expect(call_args x, int want, const char *what) {
  float before[BUF];
  memcpy(before, buf_c, sizeof before);
  int got = call_strided(&x);
  bool kept = want == 0 || memcmp(before, buf_c, sizeof before) == 0;
  CHECK(got == want && kept, "%s: strided gave %s, want %s%s", what,
        ein_emu_blas_status_name(got), ein_emu_blas_status_name(want),
        kept ? "" : " (C written)");
  memcpy(buf_c, before, sizeof before);
  got = call_batched(&x);
  kept = want == 0 || memcmp(before, buf_c, sizeof before) == 0;
  CHECK(got == want && kept, "%s: batched gave %s, want %s%s", what,
        ein_emu_blas_status_name(got), ein_emu_blas_status_name(want),
        kept ? "" : " (C written)");
}

static void test_invalid_values(void) {
  call_args x = base_call();
  expect(x, 0, "the base call");
  x.ta = 3, expect(x, INVALID, "transa CONJG"), x.ta = N;
  x.ta = -1, expect(x, INVALID, "transa -1"), x.ta = N;
  x.tb = 4, expect(x, INVALID, "transb 4"), x.tb = N;
  x.m = -1, expect(x, INVALID, "m -1"), x.m = 2;
  x.n = -1, expect(x, INVALID, "n -1"), x.n = 2;
  x.k = -1, expect(x, INVALID, "k -1"), x.k = 2;
  x.batch = -1, expect(x, INVALID, "batch -1"), x.batch = 1;
  x.lda = 1, expect(x, INVALID, "lda < m (op N)"), x.lda = 2;
  x.ldb = 1, expect(x, INVALID, "ldb < k (op N)"), x.ldb = 2;
  x.ldc = 1, expect(x, INVALID, "ldc < m"), x.ldc = 2;
  x.alpha = NULL, expect(x, INVALID, "alpha NULL"), x.alpha = scal_one;
  x.beta = NULL, expect(x, INVALID, "beta NULL"), x.beta = scal_zero;
  /* Transposed: lda covers k, ldb covers n. */
  x.ta = T, x.m = 5, x.ldc = 5;
  expect(x, 0, "op(A) T, lda = k < m");
  x.lda = 1, expect(x, INVALID, "op(A) T, lda < k"), x.lda = 2;
  x.ta = N, x.m = 2, x.ldc = 2, x.tb = T, x.n = 3, x.ldb = 3;
  expect(x, 0, "op(B) T, ldb = n");
  x.ldb = 2, expect(x, INVALID, "op(B) T, ldb < n"), x.tb = N, x.n = 2;
  /* max(1, 0) = 1: a zero leading dimension is wrong even when empty. */
  x = base_call(), x.m = 0, x.lda = 0;
  expect(x, INVALID, "m 0, lda 0");
  x = base_call(), x.m = -1, x.atype = R64F;
  expect(x, INVALID, "a bad size outranks a bad type");
}

/* Empty calls succeed and touch nothing, whatever the pointers. */
static void test_empty(void) {
  call_args x = base_call();
  x.m = 0, x.C = NULL, x.A = NULL, x.B = NULL;
  expect(x, 0, "m 0");
  x = base_call(), x.n = 0, x.C = NULL;
  expect(x, 0, "n 0");
  x = base_call(), x.batch = 0, x.C = NULL;
  expect(x, 0, "batch 0");
  x = base_call(), x.A = x.B = NULL, x.k = 0;
  expect(x, 0, "k 0 reads neither A nor B");
  CHECK(buf_c[0] == 0 && buf_c[3] == 0 && buf_c[4] == -7,
        "k 0, beta 0 zeroes the window only: %g %g %g", buf_c[0], buf_c[3],
        buf_c[4]);
}

/* Pointers the emulation would dereference, and wrapping offsets. */
static void test_pointers(void) {
  call_args x = base_call();
  x.A = NULL, expect(x, INVALID, "A NULL");
  x = base_call(), x.C = NULL, expect(x, INVALID, "C NULL");
  /* Strided only: pointer arrays cannot hold such addresses. */
  x = base_call(), x.sa = LLONG_MAX / 4, x.batch = 3;
  int got = call_strided(&x);
  CHECK(got == INVALID && buf_c[0] == -7,
        "A's batches span past 2^63 bytes: %s", ein_emu_blas_status_name(got));
  x.batch = 1, expect(x, 0, "one batch: the stride is not used");
  x = base_call(), x.sc = -(LLONG_MAX / 2), x.batch = 2;
  got = call_strided(&x);
  CHECK(got == INVALID && buf_c[0] == -7, "C's negative stride wraps: %s",
        ein_emu_blas_status_name(got));
  const void *pa[2] = {buf_a, NULL}, *pb[2] = {buf_b, buf_b};
  void *pc[2] = {buf_c, buf_c + 8};
  float one = 1, zero = 0;
  got = ein_emu_gemm_batched(N, N, 2, 2, 2, &one, pa, R32F, 2, pb, R32F, 2,
                             &zero, pc, R32F, 2, 2, EIN_EMU_COMPUTE_32F);
  CHECK(got == INVALID && buf_c[0] == -7, "a NULL in A's array: %s",
        ein_emu_blas_status_name(got));
  got = ein_emu_gemm_batched(N, N, 2, 2, 2, &one, NULL, R32F, 2, pb, R32F, 2,
                             &zero, pc, R32F, 2, 2, EIN_EMU_COMPUTE_32F);
  CHECK(got == INVALID, "A's array NULL: %s", ein_emu_blas_status_name(got));
}

/* Scratch that cannot be had: ALLOC_FAILED, nothing written. */
static void test_alloc_failure(void) {
  call_args x = base_call();
  ein_alloc_fail_after(0);
  int got = call_strided(&x);
  ein_alloc_fail_after(-1);
  CHECK(got == EIN_EMU_BLAS_ALLOC_FAILED && buf_c[0] == -7,
        "allocation failure: %s", ein_emu_blas_status_name(got));
}

static bool is_legal(int at, int bt, int ct, int compute) {
  for (int i = 0; i < NLEGAL; i++)
    if (at == bt && legal[i].ab == at && legal[i].c == ct &&
        legal[i].compute == compute)
      return true;
  return false;
}

/* Every (Atype, Btype, Ctype, compute) over known and unknown values:
 * SUCCESS exactly for the table's rows, else NOT_SUPPORTED. */
static void test_type_table(void) {
  static const int types[] = {R16F, R16BF, R32F, R64F, C32F, C64F,
                              3 /* 8I */, 10 /* 32I */, 6 /* C_16F */, 99};
  static const int computes[] = {64, 65, 68, 69, 70, 71, 72, 73, 74, 75, 77,
                                 78, 79, 0, -1};
  enum { NT = sizeof types / sizeof types[0] };
  enum { NCOMP = sizeof computes / sizeof computes[0] };
  double A[2] = {0}, B[2] = {0}, C[2] = {0}, s[2] = {0};
  int wrong = 0, accepted = 0;
  for (int a = 0; a < NT; a++)
    for (int b = 0; b < NT; b++)
      for (int c = 0; c < NT; c++)
        for (int p = 0; p < NCOMP; p++) {
          bool ok = is_legal(types[a], types[b], types[c], computes[p]);
          int got = ein_emu_gemm_strided_batched(
              N, N, 1, 1, 1, s, A, types[a], 1, 0, B, types[b], 1, 0, s, C,
              types[c], 1, 0, 1, computes[p]);
          accepted += got == 0;
          if (got != (ok ? 0 : UNSUPPORTED) && wrong++ == 0)
            fprintf(stderr, "  types %d %d %d compute %d: %s\n", types[a],
                    types[b], types[c], computes[p],
                    ein_emu_blas_status_name(got));
        }
  CHECK(wrong == 0 && accepted == NLEGAL,
        "%d combinations wrong, %d accepted of %d legal", wrong, accepted,
        NLEGAL);
}

static void test_status_names(void) {
  CHECK_STR(ein_emu_blas_status_name(0), "CUBLAS_STATUS_SUCCESS", "0");
  CHECK_STR(ein_emu_blas_status_name(7), "CUBLAS_STATUS_INVALID_VALUE", "7");
  CHECK_STR(ein_emu_blas_status_name(15), "CUBLAS_STATUS_NOT_SUPPORTED",
            "15");
  CHECK_STR(ein_emu_blas_status_name(3), "CUBLAS_STATUS_ALLOC_FAILED", "3");
  CHECK_STR(ein_emu_blas_status_name(2), "CUBLAS_STATUS_UNKNOWN", "2");
}

/* --------------------------------------------------------------- size */

/* A 256^3 f32 GEMM: right, and its time printed (no bound: sanitizer and
 * valgrind runs are slower). */
static void test_large(void) {
  static const type_case tc = {R32F, R32F, EIN_EMU_COMPUTE_32F, 1e-5};
  enum { S = 256 };
  float *A = malloc(sizeof(float) * S * S), *B = malloc(sizeof(float) * S * S);
  float *C = malloc(sizeof(float) * S * S), *before = malloc(sizeof(float) * S * S);
  fill(A, R32F, S * S, false), fill(B, R32F, S * S, false);
  fill(C, R32F, S * S, false);
  memcpy(before, C, sizeof(float) * S * S);
  scalar al = make_scalar(1, 0, tc.compute), be = make_scalar(0.5, 0, tc.compute);
  call_args x = {T, N, S, S, S, al.f, A, R32F, S, 0, B, R32F, S, 0, be.f, C,
                 R32F, S, 0, 1, tc.compute};
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int st = call_strided(&x);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  printf("256x256x256 f32 GEMM: %.3f s\n", secs);
  CHECK(st == 0 && check_c(&x, &al, &be, before, S * S, tc.tol),
        "256^3 f32 GEMM against the reference");
  free(A), free(B), free(C), free(before);
}

/* ------------------------------------------------- cuBLASLt FP8 matmul */

/* One FP8 call's buffers and arguments: A k x m (TN: A transposed), B
 * k x n, D m x n, `batch` of each. */
typedef struct lt_case {
  int64_t m, n, k, batch;
  ein_emu_lt_desc desc;
  ein_emu_lt_layout a, b, d;
  uint8_t *A, *B;
  char *D;
  float sa, sb, alpha, beta;
  int sm;
} lt_case;

static uint64_t lt_rng = 12345;

static uint8_t random_fp8(int type) {
  lt_rng = lt_rng * 6364136223846793005ull + 1442695040888963407ull;
  double x = ((double)(lt_rng >> 11) / 9007199254740992.0 - 0.5) * 8;
  return ein_fp8_encode(type == EIN_EMU_R_8F_E4M3 ? &ein_fp8_e4m3fn
                                                  : &ein_fp8_e5m2, x);
}

/* 64-byte aligned memory (aligned_alloc wants a multiple of 64 bytes). */
static void *alloc64(int64_t bytes) {
  return aligned_alloc(64, (size_t)((bytes + 64) / 64 * 64));
}

static void lt_make(lt_case *c, int at, int bt, int dt, int64_t m, int64_t n,
                    int64_t k, int64_t batch) {
  memset(c, 0, sizeof *c);
  c->m = m, c->n = n, c->k = k, c->batch = batch;
  c->desc = (ein_emu_lt_desc){EIN_EMU_COMPUTE_32F, EIN_EMU_R_32F, EIN_EMU_OP_T,
                              EIN_EMU_OP_N, &c->sa, &c->sb};
  int64_t lda = (k + 15) / 16 * 16 + 16, ldb = (k + 15) / 16 * 16;
  c->a = (ein_emu_lt_layout){at, k, m, lda, (int)batch, lda * m};
  c->b = (ein_emu_lt_layout){bt, k, n, ldb, (int)batch, ldb * n};
  c->d = (ein_emu_lt_layout){dt, m, n, m, (int)batch, m * n};
  c->A = alloc64(lda * m * batch);
  c->B = alloc64(ldb * n * batch);
  c->D = alloc64(m * n * batch * 4);
  for (int64_t i = 0; i < lda * m * batch; i++) c->A[i] = random_fp8(at);
  for (int64_t i = 0; i < ldb * n * batch; i++) c->B[i] = random_fp8(bt);
  memset(c->D, 0x7e, (size_t)(m * n * batch * 4));
  c->sa = 0.5f, c->sb = 3.0f, c->alpha = 1.0f, c->beta = 0.0f;
  c->sm = 90;
}

static int lt_call(lt_case *c) {
  return ein_emu_lt_matmul(c->sm, &c->desc, &c->alpha, c->A, &c->a, c->B,
                           &c->b, &c->beta, c->D, &c->d, c->D, &c->d);
}

static double fp8_value(int type, uint8_t v) {
  return ein_fp8_decode(
      type == EIN_EMU_R_8F_E4M3 ? &ein_fp8_e4m3fn : &ein_fp8_e5m2, v);
}

/* D against the f64 sum of the decoded products times the scales. */
static double lt_error(const lt_case *c) {
  double e = 0, w = 0;
  int64_t csz = c->d.type == EIN_EMU_R_32F ? 4 : 2;
  for (int64_t bt = 0; bt < c->batch; bt++)
    for (int64_t j = 0; j < c->n; j++)
      for (int64_t i = 0; i < c->m; i++) {
        double want = 0;
        for (int64_t l = 0; l < c->k; l++)
          want += fp8_value(c->a.type, c->A[bt * c->a.batch_stride +
                                            i * c->a.ld + l]) *
                  fp8_value(c->b.type, c->B[bt * c->b.batch_stride +
                                            j * c->b.ld + l]);
        want *= (double)c->sa * c->sb * c->alpha;
        const char *p = c->D + (bt * c->d.batch_stride + i + j * c->d.ld) * csz;
        uint16_t h;
        float f;
        memcpy(&h, p, 2);
        memcpy(&f, p, 4);
        double got = c->d.type == EIN_EMU_R_32F    ? f
                     : c->d.type == EIN_EMU_R_16BF ? ein_bf16_to_f32(h)
                                                   : ein_f16_to_f32(h);
        e += (got - want) * (got - want), w += want * want;
      }
  return sqrt(e) / fmax(sqrt(w), 1e-300);
}

static void lt_free(lt_case *c) { free(c->A), free(c->B), free(c->D); }

static void test_lt_results(void) {
  const int pairs[3][2] = {{EIN_EMU_R_8F_E4M3, EIN_EMU_R_8F_E4M3},
                           {EIN_EMU_R_8F_E4M3, EIN_EMU_R_8F_E5M2},
                           {EIN_EMU_R_8F_E5M2, EIN_EMU_R_8F_E4M3}};
  const int outs[3] = {EIN_EMU_R_32F, EIN_EMU_R_16BF, EIN_EMU_R_16F};
  for (int p = 0; p < 3; p++)
    for (int o = 0; o < 3; o++) {
      lt_case c;
      lt_make(&c, pairs[p][0], pairs[p][1], outs[o], 32, 5, 48, 3);
      CHECK(lt_call(&c) == EIN_EMU_BLAS_SUCCESS, "lt row %d/%d", p, o);
      double err = lt_error(&c), tol = o ? 2e-2 : 1e-5;
      CHECK(err <= tol, "lt row %d/%d: error %.3g > %g", p, o, err, tol);
      lt_free(&c);
    }
}

/* What cuBLASLt refuses, each from a good call changed in one way, and
 * D left as it was. */
static void test_lt_refusals(void) {
  enum { N = 11 };
  static const char *const what[N] = {
      "sm_80", "e5m2 x e5m2", "A not transposed", "B transposed",
      "lda not a multiple of 16", "A misaligned", "k not a multiple of 16",
      "C and D of two types", "compute 64F", "lda below k",
      "batch counts differ"};
  static const int want[N] = {
      EIN_EMU_BLAS_ARCH_MISMATCH,  EIN_EMU_BLAS_NOT_SUPPORTED,
      EIN_EMU_BLAS_NOT_SUPPORTED,  EIN_EMU_BLAS_NOT_SUPPORTED,
      EIN_EMU_BLAS_NOT_SUPPORTED,  EIN_EMU_BLAS_NOT_SUPPORTED,
      EIN_EMU_BLAS_NOT_SUPPORTED,  EIN_EMU_BLAS_NOT_SUPPORTED,
      EIN_EMU_BLAS_NOT_SUPPORTED,  EIN_EMU_BLAS_INVALID_VALUE,
      EIN_EMU_BLAS_INVALID_VALUE};
  for (int t = 0; t < N; t++) {
    lt_case c;
    lt_make(&c, EIN_EMU_R_8F_E4M3, EIN_EMU_R_8F_E4M3, EIN_EMU_R_32F, 32, 16,
            32, 2);
    ein_emu_lt_layout d2 = c.d;
    const void *A = c.A;
    switch (t) {
    case 0: c.sm = 80; break;
    case 1: c.a.type = c.b.type = EIN_EMU_R_8F_E5M2; break;
    case 2: c.desc.transa = EIN_EMU_OP_N; c.a.rows = 32, c.a.cols = 32; break;
    case 3: c.desc.transb = EIN_EMU_OP_T; c.b.rows = 16, c.b.cols = 32;
            c.b.ld = 16; break;
    case 4: c.a.ld = 40; break;
    case 5: A = c.A + 1; break;
    case 6: c.a.rows = c.b.rows = 24; break;
    case 7: d2.type = EIN_EMU_R_16BF; break;
    case 8: c.desc.compute = EIN_EMU_COMPUTE_64F; break;
    case 9: c.a.ld = 16; break;
    case 10: c.b.batch_count = 1; break;
    }
    int r = ein_emu_lt_matmul(c.sm, &c.desc, &c.alpha, A, &c.a, c.B, &c.b,
                              &c.beta, c.D, &c.d, c.D, &d2);
    CHECK(r == want[t], "%s: %s, not %s", what[t],
          ein_emu_blas_status_name(r), ein_emu_blas_status_name(want[t]));
    CHECK((unsigned char)c.D[0] == 0x7e, "%s: D written", what[t]);
    lt_free(&c);
  }
}

int main(void) {
#ifdef HAVE_CUBLAS_HEADERS
  printf("enum values checked against cublas_api.h\n");
#endif
  test_f32_rounding();
  test_fast_inputs();
  test_half_compute();
  test_output_rounding();
  test_alpha_beta();
  test_conjugate();
  test_invalid_values();
  test_empty();
  test_pointers();
  test_alloc_failure();
  test_type_table();
  test_status_names();
  test_random();
  test_large();
  test_lt_results();
  test_lt_refusals();
  return test_summary("emu_blas");
}
