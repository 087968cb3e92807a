/*
 * fp8_eval.c - ein_eval with float8 inputs (docs/design.md, "fp8 dtypes").
 *
 * Each input is decoded once, times its scale, into a C-contiguous f32
 * tensor in the backend's memory; the expression runs on those through
 * ein_eval as any f32 expression (its plan cached as any other); the f32
 * result is rounded once into the caller's f32, bf16 or f16 output. The
 * planner never sees fp8. On the CPU the decode and the rounding are host
 * loops over the tensors themselves; for device memory (the emulated
 * device, CUDA) the bytes an fp8 input or the output reaches are staged
 * through host memory with ein_device_copy.
 */
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "alloc.h"
#include "ctx_internal.h"
#include "dtype.h"
#include "fp8.h"
#include "half.h"

static ein_status fail(ein_thread_rec *me, ein_status st, const char *fmt,
                       ...) __attribute__((format(printf, 3, 4)));

static ein_status fail(ein_thread_rec *me, ein_status st, const char *fmt,
                       ...) {
  va_list ap;
  va_start(ap, fmt);
  ein_error_vset(&me->err, st, NULL, 0, NULL, 0, fmt, ap);
  va_end(ap);
  return st;
}

static ein_dtype dtype_of(const DLTensor *t) {
  ein_dtype dt = EIN_DT_F32;
  (void)ein_dtype_from_dl(t->dtype, &dt); /* checked by ein_eval */
  return dt;
}

bool ein_fp8_call(const DLTensor *const *inputs, int n, const ein_options *o) {
  if (o->scales || o->nscales) return true;
  for (int i = 0; i < n; i++)
    if (ein_dtype_is_fp8(dtype_of(inputs[i]))) return true;
  return false;
}

/* Every input fp8, the output f32/bf16/f16, one finite scale per input. */
static ein_status check_call(ein_thread_rec *me, const DLTensor *const *in,
                             int n, const DLTensor *out,
                             const ein_options *o) {
  for (int i = 0; i < n; i++)
    if (!ein_dtype_is_fp8(dtype_of(in[i])))
      return fail(me, EIN_ERR_DTYPE,
                  o->scales && n > 0 && !ein_dtype_is_fp8(dtype_of(in[0]))
                      ? "scales are given but input %d is %s: scales apply "
                        "to fp8 inputs (float8_e4m3fn, float8_e5m2) only"
                      : "input %d is %s but another input is fp8: an fp8 "
                        "evaluation takes fp8 inputs only",
                  i + 1, ein_dtype_name(dtype_of(in[i])));
  ein_dtype odt = dtype_of(out);
  if (odt != EIN_DT_F32 && odt != EIN_DT_BF16 && odt != EIN_DT_F16)
    return fail(me, EIN_ERR_DTYPE,
                "the output is %s; fp8 inputs give an f32, bf16 or f16 "
                "output (accumulated in f32)",
                ein_dtype_name(odt));
  if (o->nscales < 0 || (o->nscales > 0 && !o->scales) ||
      (o->scales && o->nscales != n))
    return fail(me, EIN_ERR_INVALID_ARGUMENT,
                "%d scales for %d inputs; give one scale per input (or "
                "none: all 1)",
                o->scales ? o->nscales : 0, n);
  for (int i = 0; o->scales && i < n; i++)
    if (!isfinite(o->scales[i]))
      return fail(me, EIN_ERR_INVALID_ARGUMENT,
                  "input %d's scale is %g; a scale must be finite", i + 1,
                  o->scales[i]);
  return EIN_OK;
}

static int64_t numel_of(const DLTensor *t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
  return n;
}

/* Byte offsets of a tensor's elements in C order: an odometer. */
typedef struct walk {
  const DLTensor *t;
  int64_t idx[EIN_MAX_DIMS], step[EIN_MAX_DIMS];
  int64_t off;
} walk;

static void walk_start(walk *w, const DLTensor *t, int64_t esz) {
  w->t = t;
  w->off = 0;
  for (int d = 0; d < t->ndim; d++) {
    w->idx[d] = 0;
    w->step[d] = ein_tensor_stride(t, d) * esz;
  }
}

static void walk_next(walk *w) {
  for (int d = w->t->ndim - 1; d >= 0; d--) {
    w->off += w->step[d];
    if (++w->idx[d] < w->t->shape[d]) return;
    w->off -= w->step[d] * w->idx[d];
    w->idx[d] = 0;
  }
}

/* dst[i] = the i-th element of t (at host address base) x scale. */
static void decode(const DLTensor *t, const char *base, double scale,
                   float *dst) {
  const ein_fp8_format *f =
      dtype_of(t) == EIN_DT_F8E4M3 ? &ein_fp8_e4m3fn : &ein_fp8_e5m2;
  float table[256];
  for (int b = 0; b < 256; b++)
    table[b] = (float)(ein_fp8_decode(f, (uint8_t)b) * scale);
  walk w;
  walk_start(&w, t, 1);
  int64_t n = numel_of(t);
  for (int64_t i = 0; i < n; i++, walk_next(&w))
    dst[i] = table[(uint8_t)base[w.off]];
}

/* The i-th element of t (at host address base) = src[i], rounded. */
static void round_into(const float *src, const DLTensor *t, char *base) {
  ein_dtype dt = dtype_of(t);
  walk w;
  walk_start(&w, t, (int64_t)ein_dtype_size(dt));
  int64_t n = numel_of(t);
  for (int64_t i = 0; i < n; i++, walk_next(&w)) {
    uint16_t h = dt == EIN_DT_BF16 ? ein_f32_to_bf16(src[i])
                                   : ein_f32_to_f16(src[i]);
    if (dt == EIN_DT_F32)
      memcpy(base + w.off, &src[i], sizeof(float));
    else
      memcpy(base + w.off, &h, sizeof h);
  }
}

/* Where the f32 tensors live, and how bytes get there. */
typedef struct place {
  ein_thread_rec *me;
  ein_backend_kind kind; /* CPU: host memory, used in place */
  int device;
} place;

static ein_status place_alloc(const place *p, size_t bytes, void **ptr) {
  *ptr = NULL;
  if (p->kind == EIN_BACKEND_CPU) {
    *ptr = ein_malloc(bytes ? bytes : 1);
    return *ptr ? EIN_OK
                : fail(p->me, EIN_ERR_NO_MEMORY,
                       "out of memory for an fp8 operand's f32 copy "
                       "(%zu bytes)",
                       bytes);
  }
  return ein_device_alloc(p->me->ctx, p->kind, p->device, bytes, ptr);
}

static void place_free(const place *p, void *ptr) {
  if (p->kind == EIN_BACKEND_CPU)
    ein_free(ptr);
  else if (ptr)
    ein_device_free(p->me->ctx, p->kind, p->device, ptr);
}

/* A host view of the bytes t reaches: t's own memory on the CPU, else a
 * host copy of them (*stage, freed by the caller). *base is element 0. */
static ein_status host_view(const place *p, const DLTensor *t, char **base,
                            char **stage, int64_t *lo, int64_t *hi) {
  int64_t esz = (int64_t)ein_dtype_size(dtype_of(t));
  int dim;
  char *first = (char *)t->data + t->byte_offset;
  *stage = NULL;
  (void)ein_tensor_reach(t, esz, lo, hi, &dim); /* checked by ein_eval */
  if (p->kind == EIN_BACKEND_CPU) {
    *base = first;
    return EIN_OK;
  }
  if (!(*stage = ein_malloc((size_t)(*hi - *lo))))
    return fail(p->me, EIN_ERR_NO_MEMORY, "out of memory staging a tensor");
  *base = *stage - *lo;
  return ein_device_copy(p->me->ctx, p->kind, p->device, *stage, first + *lo,
                         (size_t)(*hi - *lo), EIN_COPY_DEVICE_TO_HOST);
}

/* The f32 tensor of input t x scale in p's memory (data owned by the
 * caller, freed with place_free). */
static ein_status decode_input(const place *p, const DLTensor *t,
                               double scale, DLTensor *f32) {
  *f32 = *t;
  f32->dtype = (DLDataType){kDLFloat, 32, 1};
  f32->strides = NULL;
  f32->byte_offset = 0;
  f32->data = NULL;
  int64_t n = numel_of(t);
  size_t bytes = (size_t)n * sizeof(float);
  ein_status st = place_alloc(p, bytes, &f32->data);
  if (st || n == 0) return st;
  char *base, *stage;
  int64_t lo, hi;
  float *host = p->kind == EIN_BACKEND_CPU ? f32->data : ein_malloc(bytes);
  if (!host) return fail(p->me, EIN_ERR_NO_MEMORY, "out of memory staging");
  st = host_view(p, t, &base, &stage, &lo, &hi);
  if (!st) decode(t, base, scale, host);
  if (!st && host != f32->data)
    st = ein_device_copy(p->me->ctx, p->kind, p->device, f32->data, host,
                         bytes, EIN_COPY_HOST_TO_DEVICE);
  ein_free(stage);
  if (host != f32->data) ein_free(host);
  return st;
}

/* Rounds the f32 result (in p's memory, C-contiguous) into out. */
static ein_status store_output(const place *p, const DLTensor *res,
                               DLTensor *out) {
  int64_t n = numel_of(out);
  if (n == 0) return EIN_OK;
  size_t bytes = (size_t)n * sizeof(float);
  float *host = p->kind == EIN_BACKEND_CPU ? res->data : ein_malloc(bytes);
  if (!host) return fail(p->me, EIN_ERR_NO_MEMORY, "out of memory staging");
  ein_status st = EIN_OK;
  if (host != res->data)
    st = ein_device_copy(p->me->ctx, p->kind, p->device, host, res->data,
                         bytes, EIN_COPY_DEVICE_TO_HOST);
  char *base, *stage = NULL;
  int64_t lo, hi;
  if (!st) st = host_view(p, out, &base, &stage, &lo, &hi);
  if (!st) round_into(host, out, base);
  if (!st && stage)
    st = ein_device_copy(p->me->ctx, p->kind, p->device,
                         (char *)out->data + out->byte_offset + lo, stage,
                         (size_t)(hi - lo), EIN_COPY_HOST_TO_DEVICE);
  ein_free(stage);
  if (host != res->data) ein_free(host);
  return st;
}

/* ein_eval on the decoded inputs, into out itself when it is f32, else
 * into an f32 temporary rounded into it. */
static ein_status eval_f32(const place *p, const char *expr,
                           const DLTensor *const *f32, int n, DLTensor *out,
                           const ein_options *o) {
  ein_options fo = *o;
  fo.scales = NULL;
  fo.nscales = 0;
  if (dtype_of(out) == EIN_DT_F32)
    return ein_eval(p->me->ctx, expr, f32, n, out, &fo);
  DLTensor res = *out;
  res.dtype = (DLDataType){kDLFloat, 32, 1};
  res.strides = NULL;
  res.byte_offset = 0;
  ein_status st =
      place_alloc(p, (size_t)numel_of(out) * sizeof(float), &res.data);
  if (!st) st = ein_eval(p->me->ctx, expr, f32, n, &res, &fo);
  if (!st) st = store_output(p, &res, out);
  place_free(p, res.data);
  return st;
}

ein_status ein_fp8_eval(ein_thread_rec *me, const char *expr,
                        const DLTensor *const *inputs, int n,
                        DLTensor *output, const ein_options *o,
                        ein_backend_kind kind, int device) {
  ein_status st = check_call(me, inputs, n, output, o);
  if (st) return st;
  const place p = {me, kind, device};
  DLTensor *f32 = ein_calloc((size_t)n + 1, sizeof *f32);
  const DLTensor **ptrs = ein_calloc((size_t)n + 1, sizeof *ptrs);
  if (!f32 || !ptrs) {
    ein_free(f32), ein_free(ptrs);
    return fail(me, EIN_ERR_NO_MEMORY, "out of memory for fp8 operands");
  }
  int made = 0;
  for (; made < n && !st; made++) {
    st = decode_input(&p, inputs[made], o->scales ? o->scales[made] : 1.0,
                      &f32[made]);
    ptrs[made] = &f32[made];
  }
  if (!st) st = eval_f32(&p, expr, ptrs, n, output, o);
  for (int i = 0; i < made; i++) place_free(&p, f32[i].data);
  ein_free(f32), ein_free(ptrs);
  return st;
}
