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

typedef struct cval {
  double re, im;
} cval;

static cval load(ein_dtype dt, const char *p) {
  switch (dt) {
  case EIN_DT_F64: return (cval){*(const double *)p, 0};
  case EIN_DT_F16: return (cval){ein_f16_to_f32(*(const uint16_t *)p), 0};
  case EIN_DT_BF16: return (cval){ein_bf16_to_f32(*(const uint16_t *)p), 0};
  case EIN_DT_C64:
    return (cval){((const float *)p)[0], ((const float *)p)[1]};
  case EIN_DT_C128:
    return (cval){((const double *)p)[0], ((const double *)p)[1]};
  default: return (cval){*(const float *)p, 0};
  }
}

static void store(ein_dtype dt, char *p, cval v) {
  switch (dt) {
  case EIN_DT_F64: *(double *)p = v.re; break;
  case EIN_DT_F16: *(uint16_t *)p = ein_f32_to_f16((float)v.re); break;
  case EIN_DT_BF16: *(uint16_t *)p = ein_f32_to_bf16((float)v.re); break;
  case EIN_DT_C64:
    ((float *)p)[0] = (float)v.re;
    ((float *)p)[1] = (float)v.im;
    break;
  case EIN_DT_C128:
    ((double *)p)[0] = v.re;
    ((double *)p)[1] = v.im;
    break;
  default: *(float *)p = (float)v.re;
  }
}

static cval quotient(cval a, cval b) {
  if (b.im == 0) return (cval){a.re / b.re, a.im / b.re};
  double den = b.re * b.re + b.im * b.im;
  return (cval){(a.re * b.re + a.im * b.im) / den,
                (a.im * b.re - a.re * b.im) / den};
}

static bool zero(cval a) { return a.re == 0 && a.im == 0; }

/* One element from its sources' values (b unused by one-source maps). */
static cval apply(ein_map_op map, cval a, cval b) {
  static const cval none = {0, 0}, one = {1, 0};
  switch (map) {
  case EIN_MAP_EQUAL: return a.re == b.re && a.im == b.im ? one : none;
  case EIN_MAP_DIV: return quotient(a, b);
  case EIN_MAP_IS_ZERO: return zero(a) ? one : none;
  case EIN_MAP_ZERO_TO_ONE: return zero(a) ? one : a;
  case EIN_MAP_DIV_NONZERO: return zero(b) ? a : quotient(a, b);
  case EIN_MAP_PROD_MASK:
    return a.re == 0 || (a.re == 1 && zero(b)) ? one : none;
  case EIN_MAP_CONJ: return (cval){a.re, -a.im};
  default: /* the product (ein_cpu_loop runs it) */
    return (cval){a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
  }
}

ein_status ein_cpu_map(const ein_step *s, char *dst, const char *src0,
                       const char *src1) {
  int64_t n = 1, idx[EIN_MAX_DIMS] = {0}, off[3] = {0, 0, 0};
  if (s->naxes > EIN_MAX_DIMS) return EIN_ERR_LIMIT;
  for (int d = 0; d < s->naxes; d++) n *= s->axes[d].size;
  int64_t esz[3] = {(int64_t)ein_dtype_size(s->dst_dtype),
                    (int64_t)ein_dtype_size(s->src_dtype[0]),
                    s->nsrc > 1 ? (int64_t)ein_dtype_size(s->src_dtype[1])
                                : 0};
  for (int64_t i = 0; i < n; i++) {
    cval a = load(s->src_dtype[0], src0 + off[1] * esz[1]);
    cval b = s->nsrc > 1 ? load(s->src_dtype[1], src1 + off[2] * esz[2]) : a;
    store(s->dst_dtype, dst + off[0] * esz[0], apply(s->map, a, b));
    for (int d = s->naxes - 1; d >= 0; d--) { /* the odometer, last fastest */
      const ein_loop_axis *ax = &s->axes[d];
      for (int k = 0; k < 3; k++) off[k] += ax->stride[k];
      if (++idx[d] < ax->size) break;
      for (int k = 0; k < 3; k++) off[k] -= ax->stride[k] * ax->size;
      idx[d] = 0;
    }
  }
  return EIN_OK;
}
