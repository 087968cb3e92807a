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
 * f64, or i64 for integers and bool), so the dtype switch happens per row,
 * not per element, and the inner loops vectorise. Outer kept indices are
 * split across OpenMP threads when there is enough work.
 */
#include "cpu_loops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "loop_axes.h"

enum { ROW = 512 };

typedef enum acc_kind { ACC_F32, ACC_F64, ACC_I64 } acc_kind;

static acc_kind acc_of(ein_dtype dt) {
  if (dt == EIN_DT_F64) return ACC_F64;
  if (ein_dtype_is_float(dt)) return ACC_F32;
  return ACC_I64;
}

/* --------------------------------------------------- row conversion */

#define LOAD_ROW(T, conv)                                                   \
  for (int64_t i = 0; i < n; i++) out[i] = (T)(conv);

static void load_f32(ein_dtype dt, const char *p, int64_t st, int64_t n,
                     float *out) {
  switch (dt) {
  case EIN_DT_F32:
    if (st == 1) {
      memcpy(out, p, (size_t)n * sizeof(float));
      return;
    }
    LOAD_ROW(float, ((const float *)p)[i * st]);
    return;
  case EIN_DT_F16: LOAD_ROW(float, ein_f16_to_f32(((const uint16_t *)p)[i * st])); return;
  case EIN_DT_BF16: LOAD_ROW(float, ein_bf16_to_f32(((const uint16_t *)p)[i * st])); return;
  case EIN_DT_F64: LOAD_ROW(float, ((const double *)p)[i * st]); return;
  default: return;
  }
}

static void load_f64(ein_dtype dt, const char *p, int64_t st, int64_t n,
                     double *out) {
  switch (dt) {
  case EIN_DT_F64:
    if (st == 1) {
      memcpy(out, p, (size_t)n * sizeof(double));
      return;
    }
    LOAD_ROW(double, ((const double *)p)[i * st]);
    return;
  case EIN_DT_F32: LOAD_ROW(double, ((const float *)p)[i * st]); return;
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

#define STORE_ROW(T, expr)                                                  \
  for (int64_t i = 0; i < n; i++) ((T *)p)[i * st] = (expr);

static void store_f32(ein_dtype dt, char *p, int64_t st, int64_t n,
                      const float *in) {
  switch (dt) {
  case EIN_DT_F32:
    if (st == 1) {
      memcpy(p, in, (size_t)n * sizeof(float));
      return;
    }
    STORE_ROW(float, in[i]);
    return;
  case EIN_DT_F16: STORE_ROW(uint16_t, ein_f32_to_f16(in[i])); return;
  case EIN_DT_BF16: STORE_ROW(uint16_t, ein_f32_to_bf16(in[i])); return;
  case EIN_DT_F64: STORE_ROW(double, in[i]); return;
  default: return;
  }
}

static void store_f64(ein_dtype dt, char *p, int64_t st, int64_t n,
                      const double *in) {
  switch (dt) {
  case EIN_DT_F64:
    if (st == 1) {
      memcpy(p, in, (size_t)n * sizeof(double));
      return;
    }
    STORE_ROW(double, in[i]);
    return;
  case EIN_DT_F32: STORE_ROW(float, (float)in[i]); return;
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
  acc_kind acc;
  ein_loop_axes outer;  /* kept axes except the row axis (mode K) / all kept */
  ein_loop_axes red;    /* reduced axes except the row axis (mode R) / all */
  int64_t row_n;    /* length of the row axis */
  int64_t row_st[3];
  bool row_reduced; /* mode R: the row axis is reduced */
} loop_job;

#define DEFINE_LOOP(SUFFIX, T, LOAD, STORE, IDENT_SUM, IDENT_PROD, MAXV,     \
                    MINV)                                                    \
  static T ident_##SUFFIX(ein_reduction op) {                                \
    switch (op) {                                                            \
    case EIN_REDUCE_PROD: case EIN_REDUCE_ALL: return IDENT_PROD;            \
    case EIN_REDUCE_MAX: return MINV;                                        \
    case EIN_REDUCE_MIN: return MAXV;                                        \
    default: return IDENT_SUM;                                               \
    }                                                                        \
  }                                                                          \
  static void fold_##SUFFIX(ein_reduction op, T *acc, const T *v,            \
                            int64_t n) {                                     \
    switch (op) {                                                            \
    case EIN_REDUCE_SUM: case EIN_REDUCE_MEAN:                               \
      for (int64_t i = 0; i < n; i++) acc[i] += v[i];                        \
      return;                                                                \
    case EIN_REDUCE_PROD:                                                    \
      for (int64_t i = 0; i < n; i++) acc[i] *= v[i];                        \
      return;                                                                \
    case EIN_REDUCE_MAX: /* NaN wins, as numpy's max */                      \
      for (int64_t i = 0; i < n; i++)                                        \
        acc[i] = (v[i] > acc[i] || v[i] != v[i]) ? v[i] : acc[i];            \
      return;                                                                \
    case EIN_REDUCE_MIN:                                                     \
      for (int64_t i = 0; i < n; i++)                                        \
        acc[i] = (v[i] < acc[i] || v[i] != v[i]) ? v[i] : acc[i];            \
      return;                                                                \
    case EIN_REDUCE_ANY:                                                     \
      for (int64_t i = 0; i < n; i++) acc[i] = (acc[i] != 0 || v[i] != 0);   \
      return;                                                                \
    case EIN_REDUCE_ALL:                                                     \
      for (int64_t i = 0; i < n; i++) acc[i] = (acc[i] != 0 && v[i] != 0);   \
      return;                                                                \
    }                                                                        \
  }                                                                          \
  /* Folds n values into one; sums keep 8 partial sums so they vectorise. */\
  static T reduce_row_##SUFFIX(ein_reduction op, T init, const T *v,        \
                               int64_t n) {                                  \
    if (op == EIN_REDUCE_SUM || op == EIN_REDUCE_MEAN) {                     \
      T part[8] = {0};                                                       \
      int64_t i = 0;                                                         \
      for (; i + 8 <= n; i += 8)                                             \
        for (int l = 0; l < 8; l++) part[l] += v[i + l];                     \
      for (; i < n; i++) part[0] += v[i];                                    \
      T total = init;                                                        \
      for (int l = 0; l < 8; l++) total += part[l];                          \
      return total;                                                          \
    }                                                                        \
    T acc = init;                                                            \
    for (int64_t i = 0; i < n; i++) fold_##SUFFIX(op, &acc, &v[i], 1);       \
    return acc;                                                              \
  }                                                                          \
  /* Loads n values along the row at element offsets off, multiplied when  \
   * there are two sources. */                                             \
  static void value_row_##SUFFIX(const loop_job *j, const int64_t off[3],   \
                                 int64_t n, T *v, T *tmp) {                  \
    LOAD(j->s->src_dtype[0], j->src[0] + off[1] * (int64_t)j->esz[1],       \
         j->row_st[1], n, v);                                                \
    if (j->s->nsrc == 2) {                                                   \
      LOAD(j->s->src_dtype[1], j->src[1] + off[2] * (int64_t)j->esz[2],     \
           j->row_st[2], n, tmp);                                            \
      for (int64_t i = 0; i < n; i++) v[i] *= tmp[i];                        \
    }                                                                        \
  }                                                                          \
  static void run_range_##SUFFIX(const loop_job *j, int64_t lo,            \
                                 int64_t hi) {                               \
    T acc[ROW], v[ROW], tmp[ROW];                                            \
    const ein_step *s = j->s;                                                \
    int64_t nred = ein_loop_axes_volume(&j->red);                            \
    int64_t chunks = j->row_reduced ? 1 : (j->row_n + ROW - 1) / ROW;        \
    for (int64_t o = lo; o < hi; o++) {                                      \
      int64_t base[3];                                                       \
      ein_loop_axes_offsets(&j->outer, o, base);                             \
      if (j->row_reduced) { /* one result, folded from rows */               \
        T total = ident_##SUFFIX(s->op);                                     \
        for (int64_t r = 0; r < nred; r++) {                                 \
          int64_t ro[3], off[3];                                             \
          ein_loop_axes_offsets(&j->red, r, ro);                             \
          for (int k = 0; k < 3; k++) off[k] = base[k] + ro[k];              \
          for (int64_t c0 = 0; c0 < j->row_n; c0 += ROW) {                   \
            int64_t n = j->row_n - c0 < ROW ? j->row_n - c0 : ROW;           \
            int64_t co[3];                                                   \
            for (int k = 0; k < 3; k++) co[k] = off[k] + c0 * j->row_st[k];  \
            value_row_##SUFFIX(j, co, n, v, tmp);                            \
            total = reduce_row_##SUFFIX(s->op, total, v, n);                 \
          }                                                                  \
        }                                                                    \
        total = (T)(total * (T)s->alpha);                                    \
        STORE(s->dst_dtype, j->dst + base[0] * (int64_t)j->esz[0], 1, 1,     \
              &total);                                                       \
        continue;                                                            \
      }                                                                      \
      for (int64_t c = 0; c < chunks; c++) {                                 \
        int64_t c0 = c * ROW;                                                \
        int64_t n = j->row_n - c0 < ROW ? j->row_n - c0 : ROW;               \
        if (nred == 1) {                                                     \
          int64_t co[3];                                                     \
          for (int k = 0; k < 3; k++) co[k] = base[k] + c0 * j->row_st[k];   \
          value_row_##SUFFIX(j, co, n, acc, tmp);                            \
          if (s->op == EIN_REDUCE_ANY || s->op == EIN_REDUCE_ALL)            \
            for (int64_t i = 0; i < n; i++) acc[i] = acc[i] != 0;            \
        } else {                                                             \
          for (int64_t i = 0; i < n; i++) acc[i] = ident_##SUFFIX(s->op);    \
          for (int64_t r = 0; r < nred; r++) {                               \
            int64_t ro[3], co[3];                                            \
            ein_loop_axes_offsets(&j->red, r, ro);                           \
            for (int k = 0; k < 3; k++)                                      \
              co[k] = base[k] + ro[k] + c0 * j->row_st[k];                   \
            value_row_##SUFFIX(j, co, n, v, tmp);                            \
            fold_##SUFFIX(s->op, acc, v, n);                                 \
          }                                                                  \
        }                                                                    \
        if (s->alpha != 1)                                                   \
          for (int64_t i = 0; i < n; i++) acc[i] = (T)(acc[i] * (T)s->alpha);\
        STORE(s->dst_dtype,                                                  \
              j->dst + (base[0] + c0 * j->row_st[0]) * (int64_t)j->esz[0],   \
              j->row_st[0], n, acc);                                         \
      }                                                                      \
    }                                                                        \
  }

DEFINE_LOOP(f32, float, load_f32, store_f32, 0.0f, 1.0f, INFINITY, -INFINITY)
DEFINE_LOOP(f64, double, load_f64, store_f64, 0.0, 1.0, INFINITY, -INFINITY)
DEFINE_LOOP(i64, int64_t, load_i64, store_i64, 0, 1, INT64_MAX, INT64_MIN)

static void run_range(const loop_job *j, int64_t lo, int64_t hi) {
  switch (j->acc) {
  case ACC_F32: run_range_f32(j, lo, hi); return;
  case ACC_F64: run_range_f64(j, lo, hi); return;
  case ACC_I64: run_range_i64(j, lo, hi); return;
  }
}

/* Moves axis `at` of `from` into the row fields of the job. */
static void take_row(loop_job *j, ein_loop_axes *from, int at) {
  ein_loop_axes_take(from, at, &j->row_n, j->row_st);
}

/* Pure copies between equal dtypes with unit strides on both sides are
 * memcpy; everything else goes through the row kernels. */
static bool try_memcpy(const loop_job *j) {
  const ein_step *s = j->s;
  if (s->nsrc != 1 || s->src_dtype[0] != s->dst_dtype || s->alpha != 1 ||
      s->op == EIN_REDUCE_ANY || s->op == EIN_REDUCE_ALL ||
      j->red.n != 0 || j->row_reduced || j->row_st[0] != 1 ||
      j->row_st[1] != 1)
    return false;
  int64_t nouter = ein_loop_axes_volume(&j->outer);
  size_t bytes = (size_t)j->row_n * j->esz[0];
  for (int64_t o = 0; o < nouter; o++) {
    int64_t off[3];
    ein_loop_axes_offsets(&j->outer, o, off);
    memcpy(j->dst + off[0] * (int64_t)j->esz[0],
           j->src[0] + off[1] * (int64_t)j->esz[1], bytes);
  }
  return true;
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
  j.acc = acc_of(s->nsrc ? s->src_dtype[0] : s->dst_dtype);
  if (j.acc == ACC_F32 && s->dst_dtype == EIN_DT_F64) j.acc = ACC_F64;
  ein_loop_axes kept, red;
  bool empty;
  if (!ein_loop_axes_split(s, &kept, &red, &empty)) return EIN_ERR_LIMIT;
  if (empty) return EIN_OK;
  /* The row axis: the source's fastest axis, if it is reduced. */
  int64_t kept_min = kept.n ? llabs(kept.st[kept.n - 1][1]) : INT64_MAX;
  int64_t red_min = red.n ? llabs(red.st[red.n - 1][1]) : INT64_MAX;
  if (s->kind == EIN_STEP_FILL) {
    j.row_n = 1;
  } else if (red.n && (red_min < kept_min || !kept.n)) {
    j.row_reduced = true;
    take_row(&j, &red, red.n - 1);
  } else if (kept.n) {
    take_row(&j, &kept, kept.n - 1);
  } else {
    j.row_n = 1; /* a scalar copy */
  }
  j.outer = kept;
  j.red = red;

  if (s->kind == EIN_STEP_FILL) {
    /* Fill: store the value through the row kernel's store. */
    int64_t n = ein_loop_axes_volume(&kept);
    for (int64_t o = 0; o < n; o++) {
      int64_t off[3];
      ein_loop_axes_offsets(&kept, o, off);
      char *p = dst + off[0] * (int64_t)j.esz[0];
      if (j.acc == ACC_I64) {
        int64_t v = (int64_t)s->fill;
        store_i64(s->dst_dtype, p, 1, 1, &v);
      } else if (j.acc == ACC_F64 || s->dst_dtype == EIN_DT_F64) {
        double v = s->fill;
        store_f64(s->dst_dtype, p, 1, 1, &v);
      } else {
        float v = (float)s->fill;
        store_f32(s->dst_dtype, p, 1, 1, &v);
      }
    }
    return EIN_OK;
  }
  if (try_memcpy(&j)) return EIN_OK;

  int64_t nouter = ein_loop_axes_volume(&j.outer);
  double work = (double)nouter * (double)ein_loop_axes_volume(&j.red) *
                (double)j.row_n;
#ifdef _OPENMP
  if (threads > 1 && nouter > 1 && work > 1 << 16) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t t = 0; t < threads; t++) {
      int64_t lo = nouter * t / threads, hi = nouter * (t + 1) / threads;
      run_range(&j, lo, hi);
    }
    return EIN_OK;
  }
#else
  (void)threads;
  (void)work;
#endif
  run_range(&j, 0, nouter);
  return EIN_OK;
}
