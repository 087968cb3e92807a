/*
 * tensors.c - the checks every API call makes of its tensors and options
 * before a plan is looked at, overlap tests, and the choice of backend and
 * device (tensors.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checked.h"
#include "cost.h"
#include "shape_text.h"
#include "tensors.h"

/* "input 2" or "the output", for messages. Spelled out by hand: every
 * check_tensor names its tensor, and snprintf there was a measurable part
 * of a small call's host time. */
const char *ein_tensor_name(int index, char *buf, size_t cap) {
  /* Callers read buf: "input " and 10 digits fit in their 32 bytes. */
  if (cap < 17) {
    snprintf(buf, cap, "%s", index < 0 ? "the output" : "an input");
    return buf;
  }
  if (index < 0) {
    memcpy(buf, "the output", sizeof "the output");
    return buf;
  }
  char digits[10];
  int n = 0;
  for (unsigned v = (unsigned)index + 1; v; v /= 10)
    digits[n++] = (char)('0' + v % 10);
  memcpy(buf, "input ", 6);
  for (int i = 0; i < n; i++) buf[6 + i] = digits[n - 1 - i];
  buf[6 + n] = '\0';
  return buf;
}

/* The bytes a non-empty tensor touches, as [lo, hi) around the start of
 * its first element (lo <= 0 < hi). False when they pass int64, with *dim
 * the dim whose stride did it (-1: the last element's own size). */
bool ein_tensor_reach(const DLTensor *t, int64_t esz, int64_t *lo,
                      int64_t *hi, int *dim) {
  *lo = 0;
  *hi = 0;
  for (int d = 0; d < t->ndim; d++) {
    int64_t reach;
    *dim = d;
    if (__builtin_mul_overflow(ein_tensor_stride(t, d), t->shape[d] - 1,
                               &reach) ||
        __builtin_mul_overflow(reach, esz, &reach) ||
        __builtin_add_overflow(reach < 0 ? *lo : *hi, reach,
                               reach < 0 ? lo : hi))
      return false;
  }
  *dim = -1;
  return !__builtin_add_overflow(*hi, esz, hi);
}

/* A non-empty tensor's byte reach must fit in int64 (every offset einc
 * computes does) and, with a data pointer, in the address space: a stride
 * that wraps around address 0 is a caller's bug that would otherwise read
 * wild memory. */
static ein_status check_extent(ein_thread_rec *me, const DLTensor *t,
                               const char *name, ein_dtype dt) {
  int64_t lo, hi;
  int d;
  if (!ein_tensor_reach(t, (int64_t)ein_dtype_size(dt), &lo, &hi, &d))
    return d < 0 ? ein_fail(&me->err, EIN_ERR_OVERFLOW,
                        "%s's strides reach past what int64 can count in "
                        "bytes",
                        name)
                 : ein_fail(&me->err, EIN_ERR_OVERFLOW,
                        "%s's strides reach past what int64 can count in "
                        "bytes (dim %d: stride %lld, size %lld)",
                        name, d, (long long)ein_tensor_stride(t, d),
                        (long long)t->shape[d]);
  if (!t->data) return EIN_OK;
  uintptr_t base = (uintptr_t)t->data, first;
  if (__builtin_add_overflow(base, (uintptr_t)t->byte_offset, &first) ||
      (uintptr_t)0 - (uintptr_t)lo > first ||
      UINTPTR_MAX - first < (uintptr_t)hi)
    return ein_fail(&me->err, EIN_ERR_INVALID_ARGUMENT,
                "%s's data pointer %p, byte offset %llu and strides reach "
                "from %lld to %lld bytes around its first element, past the "
                "ends of the address space",
                name, t->data, (unsigned long long)t->byte_offset,
                (long long)lo, (long long)hi);
  return EIN_OK;
}

/* Checks what every tensor must satisfy; index -1 is the output. */
ein_status ein_check_tensor(ein_thread_rec *me, const DLTensor *t, int index,
                            bool needs_data, ein_dtype *dt) {
  char name[32];
  ein_tensor_name(index, name, sizeof name);
  if (!t) return ein_fail(&me->err, EIN_ERR_INVALID_ARGUMENT, "%s is NULL", name);
  if (t->ndim < 0 || t->ndim > EIN_MAX_DIMS)
    return ein_fail(&me->err, t->ndim < 0 ? EIN_ERR_BAD_SHAPE : EIN_ERR_LIMIT,
                "%s has %d dims; einc takes 0 to %d", name, t->ndim,
                EIN_MAX_DIMS);
  if (t->ndim > 0 && !t->shape)
    return ein_fail(&me->err, EIN_ERR_INVALID_ARGUMENT,
                "%s has %d dims but no shape array", name, t->ndim);
  for (int d = 0; d < t->ndim; d++)
    if (t->shape[d] < 0)
      return ein_fail(&me->err, EIN_ERR_BAD_SHAPE, "%s has size %lld in dim %d", name,
                  (long long)t->shape[d], d);
  int64_t span;
  bool empty;
  if (!ein_nonzero_span(t->ndim, t->shape, &span, &empty))
    return ein_fail(&me->err, EIN_ERR_OVERFLOW,
                empty ? "%s's sizes other than 0 multiply past what int64 "
                        "can count"
                      : "%s has more elements than int64 can count",
                name);
  int64_t numel = empty ? 0 : span;
  if (!ein_dtype_from_dl(t->dtype, dt))
    return ein_fail(&me->err, EIN_ERR_DTYPE,
                "%s has a dtype einc does not support (DLPack code %u, %u "
                "bits, %u lanes)",
                name, t->dtype.code, t->dtype.bits, t->dtype.lanes);
  if (needs_data && numel > 0 && !t->data)
    return ein_fail(&me->err, EIN_ERR_INVALID_ARGUMENT,
                "%s has %lld elements but a NULL data pointer", name,
                (long long)numel);
  return numel > 0 ? check_extent(me, t, name, *dt) : EIN_OK;
}

ein_status ein_check_inputs(ein_thread_rec *me, const DLTensor *const *inputs,
                            int n, bool needs_data) {
  if (n < 0 || n > EIN_MAX_OPERANDS)
    return ein_fail(&me->err, n < 0 ? EIN_ERR_INVALID_ARGUMENT : EIN_ERR_LIMIT,
                "%d tensors given; einc takes 1 to %d", n, EIN_MAX_OPERANDS);
  if (n > 0 && !inputs)
    return ein_fail(&me->err, EIN_ERR_INVALID_ARGUMENT,
                "%d inputs but the tensor array is NULL", n);
  ein_dtype dt;
  for (int i = 0; i < n; i++) {
    ein_status st = ein_check_tensor(me, inputs[i], i, needs_data, &dt);
    if (st) return st;
  }
  return EIN_OK;
}

/* What the cache key reads from the options must be well formed before it
 * is read; the binder checks the rest (dialect, reduction, names). */
static ein_status check_options(ein_thread_rec *me, const ein_options *o) {
  if (o->nlengths < 0 || (o->nlengths > 0 && !o->lengths))
    return ein_fail(&me->err, EIN_ERR_INVALID_ARGUMENT,
                "options give %d length bindings but no array", o->nlengths);
  for (int i = 0; i < o->nlengths; i++)
    if (!o->lengths[i].name)
      return ein_fail(&me->err, EIN_ERR_INVALID_ARGUMENT,
                  "length binding %d has no name", i + 1);
  if (o->memory_limit < 0 && o->memory_limit != EIN_MEMORY_FREE)
    return ein_fail(&me->err, EIN_ERR_INVALID_ARGUMENT,
                "memory_limit is %lld; give 0 (no limit), a number of bytes "
                "or EIN_MEMORY_FREE (the device's free memory)",
                (long long)o->memory_limit);
  if (!(o->plan_time >= 0) || isinf(o->plan_time))
    return ein_fail(&me->err, EIN_ERR_INVALID_ARGUMENT,
                "plan_time is %g; give 0 (the default) or a number of "
                "seconds", o->plan_time);
  if (!ein_objective_name((int)o->objective))
    return ein_fail(&me->err, EIN_ERR_INVALID_ARGUMENT,
                "objective is %d; expected EIN_OBJECTIVE_FLOPS, _SIZE or "
                "_COMBO", (int)o->objective);
  return EIN_OK;
}

/* Each tensor's backend by where it lives: all must share one backend and
 * one device. *first is the first tensor found (-2: none). */
static ein_status tensors_backend(ein_thread_rec *me,
                                  const DLTensor *const *inputs, int n,
                                  const DLTensor *output,
                                  const ein_backend_entry **entry, int *first,
                                  int *device) {
  char name[32], other[32];
  *entry = NULL;
  *first = -2;
  *device = 0;
  for (int i = -1; i < n; i++) {
    const DLTensor *t = i < 0 ? output : inputs[i];
    if (!t) continue;
    const ein_backend_entry *e = ein_backend_for_memory(t->device.device_type);
    int id = e && e->kind != EIN_BACKEND_CPU ? t->device.device_id : 0;
    if (!e)
      return ein_fail(&me->err, EIN_ERR_DEVICE,
                  "%s lives on DLPack device type %d; einc reads host memory "
                  "(CPU backend), CUDA memory (CUDA backend) and kDLExtDev "
                  "memory (emulated device)",
                  ein_tensor_name(i, name, sizeof name),
                  (int)t->device.device_type);
    if (!*entry) {
      *entry = e;
      *first = i;
      *device = id;
    } else if (e != *entry) {
      return ein_fail(&me->err, EIN_ERR_DEVICE,
                  "%s is in %s but %s is in %s; einc evaluates on one "
                  "device: copy the tensors to one first (ein_device_copy)",
                  ein_tensor_name(i, name, sizeof name), e->memory_name,
                  ein_tensor_name(*first, other, sizeof other),
                  (*entry)->memory_name);
    } else if (id != *device) {
      return ein_fail(&me->err, EIN_ERR_DEVICE,
                  "%s is on %s device %d but %s is on device %d; einc "
                  "evaluates on one device",
                  ein_tensor_name(i, name, sizeof name), e->name, id,
                  ein_tensor_name(*first, other, sizeof other), *device);
    }
  }
  return EIN_OK;
}

/* Chooses the backend (and device) from the options and where the
 * tensors live. */
ein_status ein_resolve_backend(ein_thread_rec *me, const ein_options *o,
                               const DLTensor *const *inputs, int n,
                               const DLTensor *output,
                               const ein_backend_entry **out, int *device) {
  const ein_backend_entry *want = ein_backend_find(o->backend);
  if (o->backend != EIN_BACKEND_AUTO && !want)
    return ein_fail(&me->err, EIN_ERR_INVALID_ARGUMENT, "unknown backend %d",
                (int)o->backend);
  ein_status st = check_options(me, o);
  if (st) return st;
  const ein_backend_entry *have;
  int first;
  st = tensors_backend(me, inputs, n, output, &have, &first, device);
  if (st) return st;
  if (!have) have = ein_backend_find(EIN_BACKEND_CPU); /* no tensors */
  if (want && want != have) {
    char name[32];
    return ein_fail(&me->err, EIN_ERR_DEVICE,
                "%s is in %s but the %s backend reads %s only; copy it "
                "there first (ein_device_copy) or use the %s backend",
                ein_tensor_name(first, name, sizeof name), have->memory_name,
                want->name, want->memory_name, have->name);
  }
  if (*device < 0 || *device >= EIN_MAX_DEVICES)
    return ein_fail(&me->err, EIN_ERR_DEVICE, "%s device id %d is out of range",
                have->name, *device);
  *out = have;
  return EIN_OK;
}

/* bytes x EIN_MEMORY_FREE_SHARE kept to its 3 leading bits (ein.h). */
static int64_t free_share(int64_t bytes) {
  int64_t v = (int64_t)((double)bytes * EIN_MEMORY_FREE_SHARE);
  int shift = 0;
  while ((v >> shift) >= 8) shift++;
  return v > 0 ? (v >> shift) << shift : 1;
}

/* *use: o itself, or *local with EIN_MEMORY_FREE resolved into bytes on
 * the device the call runs on (opened for it). */
ein_status ein_resolve_memory_limit(ein_thread_rec *me, const ein_options *o,
                                    const ein_backend_entry *kind, int device,
                                    ein_options *local,
                                    const ein_options **use) {
  *use = o;
  if (o->memory_limit != EIN_MEMORY_FREE) return EIN_OK;
  ein_backend *be = ein_ctx_backend(me, kind->kind, device);
  if (!be) return me->err.pub.status;
  int64_t bytes = 0;
  ein_status st = be->free_memory(be, &bytes, &me->err);
  if (st) return st;
  *local = *o;
  local->memory_limit = free_share(bytes);
  *use = local;
  return EIN_OK;
}

/* True when two dims of t share an address (writes would collide). */
static bool self_overlapping(const DLTensor *t) {
  int64_t st[EIN_MAX_DIMS], sz[EIN_MAX_DIMS];
  int n = 0;
  for (int d = 0; d < t->ndim; d++) {
    if (t->shape[d] == 0) return false;
    if (t->shape[d] == 1) continue;
    st[n] = llabs(ein_tensor_stride(t, d));
    sz[n++] = t->shape[d];
  }
  for (int i = 1; i < n; i++) /* sort by stride */
    for (int j = i; j > 0 && st[j - 1] > st[j]; j--) {
      int64_t a = st[j]; st[j] = st[j - 1]; st[j - 1] = a;
      a = sz[j]; sz[j] = sz[j - 1]; sz[j - 1] = a;
    }
  int64_t extent = 1; /* elements spanned by the smaller dims */
  for (int i = 0; i < n; i++) {
    if (st[i] < extent) return true;
    extent = st[i] * (sz[i] - 1) + extent;
  }
  return false;
}

/* Byte range [lo, hi) a tensor touches. */
void ein_tensor_byte_range(const DLTensor *t, uintptr_t *lo, uintptr_t *hi) {
  ein_dtype dt = EIN_DT_U8;
  ein_dtype_from_dl(t->dtype, &dt);
  int64_t span, min, max;
  int d;
  bool empty;
  /* check_tensor made sure the sizes and the reach fit. */
  if (!ein_nonzero_span(t->ndim, t->shape, &span, &empty) || empty ||
      !ein_tensor_reach(t, (int64_t)ein_dtype_size(dt), &min, &max, &d)) {
    *lo = *hi = 0;
    return;
  }
  uintptr_t base = (uintptr_t)t->data + t->byte_offset;
  *lo = base + (uintptr_t)min;
  *hi = base + (uintptr_t)max;
}

bool ein_tensor_self_overlapping(const DLTensor *t) {
  return self_overlapping(t);
}

bool ein_tensors_overlap(const DLTensor *a, const DLTensor *b) {
  uintptr_t alo, ahi, blo, bhi;
  ein_tensor_byte_range(a, &alo, &ahi);
  ein_tensor_byte_range(b, &blo, &bhi);
  return alo < bhi && blo < ahi;
}

/* A given output tensor must have the expression's shape, and strides
 * that give each element its own address. */
ein_status ein_check_output_shape(ein_thread_rec *me, const DLTensor *output,
                                  int ndim, const int64_t *shape) {
  bool same = output->ndim == ndim;
  for (int d = 0; same && d < ndim; d++) same = output->shape[d] == shape[d];
  if (!same) {
    char want[EIN_SHAPE_TEXT_CAP], got[EIN_SHAPE_TEXT_CAP];
    return ein_fail(&me->err, EIN_ERR_BAD_SHAPE,
                "the output tensor has shape %s but the expression gives %s",
                ein_format_shape(got, sizeof got, output->shape, output->ndim),
                ein_format_shape(want, sizeof want, shape, ndim));
  }
  if (self_overlapping(output))
    return ein_fail(&me->err, EIN_ERR_BAD_SHAPE,
                "the output's strides make two elements share an address; "
                "einc writes every output element once");
  return EIN_OK;
}
