/*
 * cpu_map.c - the CPU's LOOP steps whose map is not the plain product
 * (plan.h, ein_map_op: a gradient program's elementwise operations and
 * conjugating copies). These reduce nothing, so each element is one load
 * per source, the operation and one store, over the step's axes with
 * their strides. Values are computed in double (both parts for complex)
 * and rounded once into dst's dtype; for f32 sources a quotient computed
 * in double and rounded is the correctly rounded f32 quotient, as the
 * generated kernels' f32 division gives.
 */
#include "cpu_map.h"

#include "half.h"

/* ROW: elements of the innermost axis staged per pass (two doubles each
 * per source: 8 KiB, in L1). The dtype and the operation are switched on
 * once per row, so the inner loops are plain arithmetic that vectorises
 * (one switch per element ran max's mask at 10 ns an element). */
enum { ROW = 256 };

typedef struct row {
  double re[ROW], im[ROW];
} row;

static void load_row(ein_dtype dt, const char *p, int64_t st, int n,
                     row *r) {
  switch (dt) {
  case EIN_DT_F64:
    for (int i = 0; i < n; i++) r->re[i] = ((const double *)p)[i * st];
    break;
  case EIN_DT_F16:
    for (int i = 0; i < n; i++)
      r->re[i] = ein_f16_to_f32(((const uint16_t *)p)[i * st]);
    break;
  case EIN_DT_BF16:
    for (int i = 0; i < n; i++)
      r->re[i] = ein_bf16_to_f32(((const uint16_t *)p)[i * st]);
    break;
  case EIN_DT_C64:
    for (int i = 0; i < n; i++) {
      r->re[i] = ((const float *)p)[2 * i * st];
      r->im[i] = ((const float *)p)[2 * i * st + 1];
    }
    return;
  case EIN_DT_C128:
    for (int i = 0; i < n; i++) {
      r->re[i] = ((const double *)p)[2 * i * st];
      r->im[i] = ((const double *)p)[2 * i * st + 1];
    }
    return;
  default:
    for (int i = 0; i < n; i++) r->re[i] = ((const float *)p)[i * st];
  }
  for (int i = 0; i < n; i++) r->im[i] = 0;
}

static void store_row(ein_dtype dt, char *p, int64_t st, int n,
                      const row *r) {
  switch (dt) {
  case EIN_DT_F64:
    for (int i = 0; i < n; i++) ((double *)p)[i * st] = r->re[i];
    break;
  case EIN_DT_F16:
    for (int i = 0; i < n; i++)
      ((uint16_t *)p)[i * st] = ein_f32_to_f16((float)r->re[i]);
    break;
  case EIN_DT_BF16:
    for (int i = 0; i < n; i++)
      ((uint16_t *)p)[i * st] = ein_f32_to_bf16((float)r->re[i]);
    break;
  case EIN_DT_C64:
    for (int i = 0; i < n; i++) {
      ((float *)p)[2 * i * st] = (float)r->re[i];
      ((float *)p)[2 * i * st + 1] = (float)r->im[i];
    }
    break;
  case EIN_DT_C128:
    for (int i = 0; i < n; i++) {
      ((double *)p)[2 * i * st] = r->re[i];
      ((double *)p)[2 * i * st + 1] = r->im[i];
    }
    break;
  default:
    for (int i = 0; i < n; i++) ((float *)p)[i * st] = (float)r->re[i];
  }
}

/* a[i] / b[i] into d (complex: both parts; b real: parts divided). */
static void quotient(row *d, const row *a, const row *b, int i) {
  if (b->im[i] == 0) {
    d->re[i] = a->re[i] / b->re[i];
    d->im[i] = a->im[i] / b->re[i];
    return;
  }
  double den = b->re[i] * b->re[i] + b->im[i] * b->im[i];
  double re = (a->re[i] * b->re[i] + a->im[i] * b->im[i]) / den;
  d->im[i] = (a->im[i] * b->re[i] - a->re[i] * b->im[i]) / den;
  d->re[i] = re;
}

#define ZERO(r, i) ((r)->re[i] == 0 && (r)->im[i] == 0)
#define SET(r, i, v) ((r)->re[i] = (v), (r)->im[i] = 0)

/* The row's results into a (b unused by one-source maps). */
static void apply_row(ein_map_op map, row *a, const row *b, int n) {
  switch (map) {
  case EIN_MAP_EQUAL:
    for (int i = 0; i < n; i++)
      SET(a, i, a->re[i] == b->re[i] && a->im[i] == b->im[i]);
    break;
  case EIN_MAP_DIV:
    for (int i = 0; i < n; i++) quotient(a, a, b, i);
    break;
  case EIN_MAP_IS_ZERO:
    for (int i = 0; i < n; i++) SET(a, i, ZERO(a, i));
    break;
  case EIN_MAP_ZERO_TO_ONE:
    for (int i = 0; i < n; i++)
      if (ZERO(a, i)) SET(a, i, 1);
    break;
  case EIN_MAP_DIV_NONZERO:
    for (int i = 0; i < n; i++)
      if (!ZERO(b, i)) quotient(a, a, b, i);
    break;
  case EIN_MAP_PROD_MASK: /* (z, x) */
    for (int i = 0; i < n; i++)
      SET(a, i, a->re[i] == 0 || (a->re[i] == 1 && ZERO(b, i)));
    break;
  case EIN_MAP_CONJ:
    for (int i = 0; i < n; i++) a->im[i] = -a->im[i];
    break;
  default: /* the product (ein_cpu_loop runs it) */
    for (int i = 0; i < n; i++) {
      double re = a->re[i] * b->re[i] - a->im[i] * b->im[i];
      a->im[i] = a->re[i] * b->im[i] + a->im[i] * b->re[i];
      a->re[i] = re;
    }
  }
}

/* One run of n elements of the innermost axis from the offsets off. */
static void run_row(const ein_step *s, char *dst, const char *src0,
                    const char *src1, const int64_t *off,
                    const int64_t *esz, const int64_t *st, int64_t n) {
  row a, b;
  for (int64_t i = 0; i < n; i += ROW) {
    int m = (int)(n - i < ROW ? n - i : ROW);
    load_row(s->src_dtype[0], src0 + (off[1] + i * st[1]) * esz[1], st[1],
             m, &a);
    if (s->nsrc > 1)
      load_row(s->src_dtype[1], src1 + (off[2] + i * st[2]) * esz[2],
               st[2], m, &b);
    apply_row(s->map, &a, &b, m);
    store_row(s->dst_dtype, dst + (off[0] + i * st[0]) * esz[0], st[0], m,
              &a);
  }
}

ein_status ein_cpu_map(const ein_step *s, char *dst, const char *src0,
                       const char *src1) {
  int64_t rows = 1, idx[EIN_MAX_DIMS] = {0}, off[3] = {0, 0, 0};
  static const ein_loop_axis scalar = {-1, 1, {0, 0, 0}};
  int last = s->naxes - 1;
  if (s->naxes > EIN_MAX_DIMS) return EIN_ERR_LIMIT;
  for (int d = 0; d < last; d++) rows *= s->axes[d].size;
  const ein_loop_axis *in = last >= 0 ? &s->axes[last] : &scalar;
  int64_t esz[3] = {(int64_t)ein_dtype_size(s->dst_dtype),
                    (int64_t)ein_dtype_size(s->src_dtype[0]),
                    s->nsrc > 1 ? (int64_t)ein_dtype_size(s->src_dtype[1])
                                : 0};
  for (int64_t r = 0; r < rows && in->size > 0; r++) {
    run_row(s, dst, src0, src1, off, esz, in->stride, in->size);
    for (int d = last - 1; d >= 0; d--) { /* the odometer, last fastest */
      const ein_loop_axis *ax = &s->axes[d];
      for (int k = 0; k < 3; k++) off[k] += ax->stride[k];
      if (++idx[d] < ax->size) break;
      for (int k = 0; k < 3; k++) off[k] -= ax->stride[k] * ax->size;
      idx[d] = 0;
    }
  }
  return EIN_OK;
}
