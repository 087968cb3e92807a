/*
 * reference.h - the naive evaluator the tests compare einc with: a direct
 * sum (or max, min, prod, any, all) over every combination of every axis,
 * in double precision (complex double for c64 and c128: ref_eval_complex,
 * sums, means and products). It shares only the binder with einc (whose shapes
 * are checked against numpy and einops in test_shapes); it knows nothing
 * of plans, views, GEMMs or backends.
 */
#ifndef EIN_TEST_REFERENCE_H
#define EIN_TEST_REFERENCE_H

#include <complex.h>

/* CMPLX for compilers whose <complex.h> lacks it (clang 14 with glibc):
 * the parts set through the array view C17 gives complex types. */
#ifndef CMPLX
static inline double complex ref_cmplx(double re, double im) {
  double complex z;
  ((double *)&z)[0] = re;
  ((double *)&z)[1] = im;
  return z;
}
#define CMPLX(re, im) ref_cmplx(re, im)
#endif
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bind.h"
#include "ctx_internal.h"
#include "dtype.h"
#include "half.h"
#include "test_limits.h"

/* Reads element `off` (elements from data) of a tensor as a double. */
static inline double ref_load(ein_dtype dt, const void *data, int64_t off) {
  switch (dt) {
  case EIN_DT_F16: return ein_f16_to_f32(((const uint16_t *)data)[off]);
  case EIN_DT_BF16: return ein_bf16_to_f32(((const uint16_t *)data)[off]);
  case EIN_DT_F32: return ((const float *)data)[off];
  case EIN_DT_F64: return ((const double *)data)[off];
  case EIN_DT_I8: return ((const int8_t *)data)[off];
  case EIN_DT_I16: return ((const int16_t *)data)[off];
  case EIN_DT_I32: return ((const int32_t *)data)[off];
  case EIN_DT_I64: return (double)((const int64_t *)data)[off];
  case EIN_DT_U8: return ((const uint8_t *)data)[off];
  case EIN_DT_U16: return ((const uint16_t *)data)[off];
  case EIN_DT_U32: return ((const uint32_t *)data)[off];
  case EIN_DT_U64: return (double)((const uint64_t *)data)[off];
  case EIN_DT_BOOL: return ((const uint8_t *)data)[off] != 0;
  default: return 0;
  }
}

static inline void ref_store(ein_dtype dt, void *data, int64_t off, double v) {
  switch (dt) {
  case EIN_DT_F16: ((uint16_t *)data)[off] = ein_f32_to_f16((float)v); return;
  case EIN_DT_BF16: ((uint16_t *)data)[off] = ein_f32_to_bf16((float)v); return;
  case EIN_DT_F32: ((float *)data)[off] = (float)v; return;
  case EIN_DT_F64: ((double *)data)[off] = v; return;
  case EIN_DT_I8: ((int8_t *)data)[off] = (int8_t)v; return;
  case EIN_DT_I16: ((int16_t *)data)[off] = (int16_t)v; return;
  case EIN_DT_I32: ((int32_t *)data)[off] = (int32_t)v; return;
  case EIN_DT_I64: ((int64_t *)data)[off] = (int64_t)v; return;
  case EIN_DT_U8: ((uint8_t *)data)[off] = (uint8_t)v; return;
  case EIN_DT_U16: ((uint16_t *)data)[off] = (uint16_t)v; return;
  case EIN_DT_U32: ((uint32_t *)data)[off] = (uint32_t)v; return;
  case EIN_DT_U64: ((uint64_t *)data)[off] = (uint64_t)v; return;
  case EIN_DT_BOOL: ((uint8_t *)data)[off] = v != 0; return;
  default: return;
  }
}

/* Element offset of a tensor at the current axis indices `idx`. */
static inline int64_t ref_offset(const ein_bound_operand *op,
                                 const ein_bound_axis *axes,
                                 const int64_t *idx, const int64_t *strides) {
  int64_t off = 0;
  for (int d = 0; d < op->ndim; d++) {
    const ein_bound_dim *dim = &op->dims[d];
    if (dim->broadcast) continue;
    int64_t i = 0;
    for (int j = 0; j < dim->count; j++) {
      int a = op->factors[dim->first + j];
      i = i * axes[a].size + idx[a];
    }
    off += i * strides[d];
  }
  return off;
}

/* The strides (elements) of every input and of the compact output, and
 * the inputs' dtypes. */
typedef struct ref_layout {
  int64_t in[TEST_MAX_OPERANDS][EIN_MAX_DIMS];
  int64_t out[EIN_MAX_DIMS];
  ein_dtype dts[TEST_MAX_OPERANDS];
} ref_layout;

static inline void ref_layout_of(const ein_problem *p, const DLTensor *const *in,
                                 ref_layout *l) {
  for (int i = 0; i < p->ninputs; i++) {
    ein_dtype_from_dl(in[i]->dtype, &l->dts[i]);
    int64_t s = 1;
    for (int d = in[i]->ndim - 1; d >= 0; d--) {
      l->in[i][d] = in[i]->strides ? in[i]->strides[d] : s;
      s *= in[i]->shape[d];
    }
  }
  int64_t s = 1;
  for (int d = p->output.ndim - 1; d >= 0; d--) {
    l->out[d] = s;
    s *= p->output.dims[d].size;
  }
}

/* The number of terms each output element reduces, and whether an axis is
 * empty. */
static inline double ref_count(const ein_problem *p, bool *empty) {
  double count = 1;
  *empty = false;
  for (int a = 0; a < p->naxes; a++) {
    if (ein_axis_reduced(p, a)) count *= (double)p->axes[a].size;
    *empty |= p->axes[a].size == 0;
  }
  return count;
}

/* Steps idx to the next combination of axis indices; false after the last. */
static inline bool ref_next(const ein_problem *p, int64_t *idx) {
  for (int a = p->naxes - 1; a >= 0; a--) {
    if (++idx[a] < p->axes[a].size) return true;
    idx[a] = 0;
  }
  return false;
}

/* The expected output, compact row-major, as doubles. Returns 0, or -1
 * when the reduction has no value (max/min over an empty axis). */
static inline int ref_eval(const ein_problem *p, const DLTensor *const *in,
                           double *out, int64_t out_numel) {
  int64_t idx[TEST_MAX_AXES] = {0};
  ref_layout l;
  ref_layout_of(p, in, &l);
  ein_reduction r = p->reduction;
  double ident = r == EIN_REDUCE_PROD || r == EIN_REDUCE_ALL ? 1
                 : r == EIN_REDUCE_MAX ? -INFINITY
                 : r == EIN_REDUCE_MIN ? INFINITY
                                       : 0;
  for (int64_t o = 0; o < out_numel; o++) out[o] = ident;
  bool empty;
  double count = ref_count(p, &empty);
  if (empty) {
    if (out_numel == 0) return 0;
    if (r == EIN_REDUCE_MAX || r == EIN_REDUCE_MIN) return -1;
    for (int64_t o = 0; o < out_numel; o++)
      out[o] = r == EIN_REDUCE_MEAN ? NAN : ident;
    return 0;
  }
  do {
    double v = 1;
    for (int i = 0; i < p->ninputs; i++) {
      const char *base = (const char *)in[i]->data + in[i]->byte_offset;
      v *= ref_load(l.dts[i], base,
                    ref_offset(&p->inputs[i], p->axes, idx, l.in[i]));
    }
    double *dst = &out[ref_offset(&p->output, p->axes, idx, l.out)];
    switch (r) {
    case EIN_REDUCE_SUM: case EIN_REDUCE_MEAN: *dst += v; break;
    case EIN_REDUCE_PROD: *dst *= v; break;
    case EIN_REDUCE_MAX: *dst = (v > *dst || isnan(v)) ? v : *dst; break;
    case EIN_REDUCE_MIN: *dst = (v < *dst || isnan(v)) ? v : *dst; break;
    case EIN_REDUCE_ANY: *dst = (*dst != 0 || v != 0); break;
    case EIN_REDUCE_ALL: *dst = (*dst != 0 && v != 0); break;
    }
  } while (ref_next(p, idx));
  if (r == EIN_REDUCE_MEAN)
    for (int64_t o = 0; o < out_numel; o++) out[o] /= count;
  return 0;
}

/* Element `off` of a c64 or c128 tensor (a real one's value + 0i). */
static inline double complex ref_load_complex(ein_dtype dt, const void *data,
                                              int64_t off) {
  switch (dt) {
  case EIN_DT_C64: return ((const float complex *)data)[off];
  case EIN_DT_C128: return ((const double complex *)data)[off];
  default: return ref_load(dt, data, off);
  }
}

static inline void ref_store_complex(ein_dtype dt, void *data, int64_t off,
                                     double complex v) {
  switch (dt) {
  case EIN_DT_C64: ((float complex *)data)[off] = (float complex)v; return;
  case EIN_DT_C128: ((double complex *)data)[off] = v; return;
  default: ref_store(dt, data, off, creal(v)); return;
  }
}

/* ref_eval in complex double, for sum, mean and prod (the reductions
 * complex numbers have): products written out as (ac - bd) + (ad + bc)i,
 * so the reference does not lean on the C library's complex multiply
 * that einc uses. -1 for the other reductions. */
static inline int ref_eval_complex(const ein_problem *p,
                                   const DLTensor *const *in,
                                   double complex *out, int64_t out_numel) {
  int64_t idx[TEST_MAX_AXES] = {0};
  ref_layout l;
  ref_layout_of(p, in, &l);
  ein_reduction r = p->reduction;
  if (r != EIN_REDUCE_SUM && r != EIN_REDUCE_MEAN && r != EIN_REDUCE_PROD)
    return -1;
  double ident = r == EIN_REDUCE_PROD ? 1 : 0;
  for (int64_t o = 0; o < out_numel; o++) out[o] = ident;
  bool empty;
  double count = ref_count(p, &empty);
  if (empty) {
    for (int64_t o = 0; o < out_numel; o++)
      out[o] = r == EIN_REDUCE_MEAN ? CMPLX(NAN, NAN) : ident;
    return 0;
  }
  do {
    double re = 1, im = 0;
    for (int i = 0; i < p->ninputs; i++) {
      const char *base = (const char *)in[i]->data + in[i]->byte_offset;
      double complex x = ref_load_complex(
          l.dts[i], base, ref_offset(&p->inputs[i], p->axes, idx, l.in[i]));
      double xr = creal(x), xi = cimag(x), t = re * xr - im * xi;
      im = re * xi + im * xr;
      re = t;
    }
    double complex *dst = &out[ref_offset(&p->output, p->axes, idx, l.out)];
    double dr = creal(*dst), di = cimag(*dst);
    if (r == EIN_REDUCE_PROD)
      *dst = CMPLX(dr * re - di * im, dr * im + di * re);
    else
      *dst = CMPLX(dr + re, di + im);
  } while (ref_next(p, idx));
  if (r == EIN_REDUCE_MEAN)
    for (int64_t o = 0; o < out_numel; o++) out[o] /= count;
  return 0;
}

#endif
