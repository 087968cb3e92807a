/*
 * emu_blaslt.c - the emulated device's cuBLASLt FP8 matmul (emu_blaslt.h).
 *
 * Checked as cuBLASLt checks (types, then shapes, then the FP8 kernels'
 * layout rules), then each batch: the columns of op(A) and op(B) decoded
 * to f32 into scratch (A and B are K-contiguous in the TN layout, so each
 * is a plain run), one fmaf dot product per element of D, the scales
 * applied once, D rounded once.
 */
#include "emu_blaslt.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "alloc.h"
#include "fp8.h"
#include "half.h"

static bool is_fp8(int t) {
  return t == EIN_EMU_R_8F_E4M3 || t == EIN_EMU_R_8F_E5M2;
}

static bool is_out(int t) {
  return t == EIN_EMU_R_32F || t == EIN_EMU_R_16BF || t == EIN_EMU_R_16F;
}

static int64_t out_size(int t) { return t == EIN_EMU_R_32F ? 4 : 2; }

/* The row: fp8 A and B (not both e5m2), 32F compute and scale, C = D. */
static bool row_supported(const ein_emu_lt_desc *desc, int at, int bt,
                          int ct, int dt) {
  return desc->compute == EIN_EMU_COMPUTE_32F &&
         desc->scale_type == EIN_EMU_R_32F && is_fp8(at) && is_fp8(bt) &&
         !(at == EIN_EMU_R_8F_E5M2 && bt == EIN_EMU_R_8F_E5M2) &&
         is_out(dt) && ct == dt;
}

static bool layout_valid(const ein_emu_lt_layout *l) {
  return l->rows >= 0 && l->cols >= 0 && l->ld >= (l->rows > 1 ? l->rows : 1)
         && l->batch_count >= 1;
}

/* The shapes agree: A k x m (transposed), B k x n, C and D m x n, one
 * batch count; and every pointer the call reads or writes is there. */
static bool shapes_valid(const ein_emu_lt_layout *a,
                         const ein_emu_lt_layout *b,
                         const ein_emu_lt_layout *c,
                         const ein_emu_lt_layout *d, bool ta, bool tb) {
  if (!layout_valid(a) || !layout_valid(b) || !layout_valid(c) ||
      !layout_valid(d))
    return false;
  int64_t m = ta ? a->cols : a->rows, k = ta ? a->rows : a->cols;
  int64_t bk = tb ? b->cols : b->rows, n = tb ? b->rows : b->cols;
  return k == bk && c->rows == m && d->rows == m && c->cols == n &&
         d->cols == n && a->batch_count == d->batch_count &&
         b->batch_count == d->batch_count && c->batch_count == d->batch_count;
}

static bool aligned16(const void *p) { return (uintptr_t)p % 16 == 0; }

/* What the FP8 kernels need: TN, 16-byte pointers, lds and batch
 * strides, k and m multiples of 16. */
static bool fp8_layout_ok(const ein_emu_lt_desc *desc, const void *A,
                          const ein_emu_lt_layout *a, const void *B,
                          const ein_emu_lt_layout *b, const void *C,
                          const ein_emu_lt_layout *c, const void *D,
                          const ein_emu_lt_layout *d) {
  if (desc->transa != EIN_EMU_OP_T || desc->transb != EIN_EMU_OP_N)
    return false;
  const ein_emu_lt_layout *l[4] = {a, b, c, d};
  const void *p[4] = {A, B, C, D};
  for (int i = 0; i < 4; i++) {
    int64_t esz = i < 2 ? 1 : out_size(l[i]->type);
    if (!aligned16(p[i]) || (l[i]->ld * esz) % 16 ||
        (l[i]->batch_count > 1 && (l[i]->batch_stride * esz) % 16))
      return false;
  }
  return a->rows % 16 == 0 && a->cols % 16 == 0;
}

/* Decodes `cols` columns of k fp8 elements, ld apart, into dst. */
static void decode_cols(const uint8_t *src, int type, int64_t k, int64_t cols,
                        int64_t ld, float *dst) {
  const ein_fp8_format *f =
      type == EIN_EMU_R_8F_E4M3 ? &ein_fp8_e4m3fn : &ein_fp8_e5m2;
  float table[256];
  for (int v = 0; v < 256; v++) table[v] = (float)ein_fp8_decode(f, (uint8_t)v);
  for (int64_t j = 0; j < cols; j++)
    for (int64_t l = 0; l < k; l++) dst[j * k + l] = table[src[j * ld + l]];
}

static float load_out(const char *p, int type) {
  uint16_t h;
  float f;
  if (type == EIN_EMU_R_32F) {
    memcpy(&f, p, 4);
    return f;
  }
  memcpy(&h, p, 2);
  return type == EIN_EMU_R_16BF ? ein_bf16_to_f32(h) : ein_f16_to_f32(h);
}

static void store_out(char *p, int type, float v) {
  uint16_t h = type == EIN_EMU_R_16BF ? ein_f32_to_bf16(v) : ein_f32_to_f16(v);
  if (type == EIN_EMU_R_32F)
    memcpy(p, &v, 4);
  else
    memcpy(p, &h, 2);
}

/* One validated call's arguments. */
typedef struct lt_call {
  int64_t m, n, k;
  float factor, beta;
  const ein_emu_lt_layout *a, *b, *c, *d;
} lt_call;

/* Batch `at` of D from the decoded columns of op(A) (m of k) and op(B)
 * (n of k). */
static void batch_product(const lt_call *g, const float *ca, const float *cb,
                          const char *C, char *D) {
  int64_t csz = out_size(g->d->type);
  for (int64_t j = 0; j < g->n; j++)
    for (int64_t i = 0; i < g->m; i++) {
      float acc = 0;
      for (int64_t l = 0; l < g->k; l++)
        acc = fmaf(ca[i * g->k + l], cb[j * g->k + l], acc);
      float v = g->factor * acc;
      if (g->beta != 0)
        v = fmaf(g->beta, load_out(C + (i + j * g->c->ld) * csz, g->c->type),
                 v);
      store_out(D + (i + j * g->d->ld) * csz, g->d->type, v);
    }
}

static int run_batches(const lt_call *g, const uint8_t *A, const uint8_t *B,
                       const char *C, char *D) {
  float *ca = ein_malloc((size_t)(g->m * g->k + 1) * sizeof *ca);
  float *cb = ein_malloc((size_t)(g->n * g->k + 1) * sizeof *cb);
  if (!ca || !cb) {
    ein_free(ca), ein_free(cb);
    return EIN_EMU_BLAS_ALLOC_FAILED;
  }
  int64_t csz = out_size(g->d->type);
  for (int64_t bt = 0; bt < g->d->batch_count; bt++) {
    decode_cols(A + bt * g->a->batch_stride, g->a->type, g->k, g->m, g->a->ld,
                ca);
    decode_cols(B + bt * g->b->batch_stride, g->b->type, g->k, g->n, g->b->ld,
                cb);
    batch_product(g, ca, cb, C + bt * g->c->batch_stride * csz,
                  D + bt * g->d->batch_stride * csz);
  }
  ein_free(ca), ein_free(cb);
  return EIN_EMU_BLAS_SUCCESS;
}

int ein_emu_lt_matmul(int sm, const ein_emu_lt_desc *desc, const void *alpha,
                      const void *A, const ein_emu_lt_layout *a,
                      const void *B, const ein_emu_lt_layout *b,
                      const void *beta, const void *C,
                      const ein_emu_lt_layout *c, void *D,
                      const ein_emu_lt_layout *d) {
  if (!desc || !a || !b || !c || !d || !alpha || !beta)
    return EIN_EMU_BLAS_INVALID_VALUE;
  if (sm < EIN_EMU_FP8_MIN_SM) return EIN_EMU_BLAS_ARCH_MISMATCH;
  if (!row_supported(desc, a->type, b->type, c->type, d->type))
    return EIN_EMU_BLAS_NOT_SUPPORTED;
  bool ta = desc->transa != EIN_EMU_OP_N, tb = desc->transb != EIN_EMU_OP_N;
  if (!shapes_valid(a, b, c, d, ta, tb)) return EIN_EMU_BLAS_INVALID_VALUE;
  lt_call g = {.m = d->rows, .n = d->cols, .k = ta ? a->rows : a->cols,
               .a = a, .b = b, .c = c, .d = d};
  if (g.m == 0 || g.n == 0) return EIN_EMU_BLAS_SUCCESS;
  memcpy(&g.beta, beta, sizeof g.beta);
  if (!D || (g.k > 0 && (!A || !B)) || (g.beta != 0 && !C))
    return EIN_EMU_BLAS_INVALID_VALUE;
  if (!fp8_layout_ok(desc, A, a, B, b, g.beta != 0 ? C : D, c, D, d))
    return EIN_EMU_BLAS_NOT_SUPPORTED;
  float al, sa = desc->a_scale ? *desc->a_scale : 1.0f,
            sb = desc->b_scale ? *desc->b_scale : 1.0f;
  memcpy(&al, alpha, sizeof al);
  g.factor = al * sa * sb;
  return run_batches(&g, A, B, C, D);
}
