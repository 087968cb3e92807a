/*
 * eval.c - plans and evaluation through the public API: checks the
 * tensors, binds and plans (or finds the plan in the context's cache),
 * and hands the plan to the backend that owns the tensors' memory.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "checked.h"
#include "ctx_internal.h"
#include "trace.h"
#include "plan.h"
#include "cost.h"
#include "report.h"
#include "shape_text.h"

struct ein_plan {
  ein_plan_ir *ir; /* owns the arena this struct lives in */
  atomic_int refs; /* ein_plan_retain / ein_plan_release */
  const char *expr;
  const ein_backend_entry *backend; /* where it runs */
  int device;                       /* the backend's device id */
  void *program; /* backend->prepare's result (NULL for the CPU) */
  /* the same for slicing's sub-plans: add, store, zero (SUB_*) */
  void *sub[3];
  int ninputs;
  int64_t memory_limit; /* the limit planned within (EIN_MEMORY_FREE
                           resolved); 0: none */
  /* The layouts the plan was made for, as cache-key bytes: tensor i's
   * part is layout[offset[i] .. offset[i+1]), the output last. */
  char *layout;
  size_t *offset;
};

/* "input 2" or "the output", for messages. Spelled out by hand: every
 * check_tensor names its tensor, and snprintf there was a measurable part
 * of a small call's host time. */
static const char *tensor_name(int index, char *buf, size_t cap) {
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

/* The stride of dim d as the plan sees it: compact when strides is NULL,
 * and 0 for size-1 dims, whose stride never matters. */
int64_t ein_tensor_stride(const DLTensor *t, int d) {
  if (t->shape[d] == 1) return 0;
  if (t->strides) return t->strides[d];
  int64_t s = 1;
  for (int e = t->ndim - 1; e > d; e--) s *= t->shape[e] > 0 ? t->shape[e] : 1;
  return s;
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
static ein_status check_tensor(ein_thread_rec *me, const DLTensor *t,
                               int index, bool needs_data, ein_dtype *dt) {
  char name[32];
  tensor_name(index, name, sizeof name);
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

static void key_tensor(ein_strbuf *k, const DLTensor *t, ein_dtype dt) {
  unsigned char head[2] = {(unsigned char)dt, (unsigned char)t->ndim};
  ein_strbuf_append(k, head, 2);
  for (int d = 0; d < t->ndim; d++) {
    int64_t v[2] = {t->shape[d], ein_tensor_stride(t, d)};
    ein_strbuf_append(k, v, sizeof v);
  }
}

static void key_options(ein_strbuf *k, const char *expr, size_t len,
                        const ein_options *o,
                        const ein_backend_entry *backend, int device) {
  ein_strbuf_append(k, &len, sizeof len);
  ein_strbuf_append(k, expr, len);
  int32_t head[7] = {o->dialect, o->reduction, o->nlengths, backend->kind,
                     o->allow_tf32 != 0, device, (int32_t)o->axis_rules};
  ein_strbuf_append(k, head, sizeof head);
  ein_strbuf_append(k, &o->memory_limit, sizeof o->memory_limit);
  double search[2] = {o->plan_time, (double)o->objective};
  ein_strbuf_append(k, search, sizeof search);
  ein_strbuf_append(k, &o->seed, sizeof o->seed);
  size_t plen = o->path ? strlen(o->path) + 1 : 0; /* NULL differs from "" */
  ein_strbuf_append(k, &plen, sizeof plen);
  if (plen) ein_strbuf_append(k, o->path, plen);
  size_t slen = o->slice_axes ? strlen(o->slice_axes) + 1 : 0;
  ein_strbuf_append(k, &slen, sizeof slen);
  if (slen) ein_strbuf_append(k, o->slice_axes, slen);
  for (int i = 0; i < o->nlengths; i++) {
    const char *name = o->lengths[i].name; /* check_options: not NULL */
    size_t n = strlen(name);
    ein_strbuf_append(k, &n, sizeof n);
    ein_strbuf_append(k, name, n);
    ein_strbuf_append(k, &o->lengths[i].size, sizeof(int64_t));
  }
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
                  tensor_name(i, name, sizeof name),
                  (int)t->device.device_type);
    if (!*entry) {
      *entry = e;
      *first = i;
      *device = id;
    } else if (e != *entry) {
      return ein_fail(&me->err, EIN_ERR_DEVICE,
                  "%s is in %s but %s is in %s; einc evaluates on one "
                  "device: copy the tensors to one first (ein_device_copy)",
                  tensor_name(i, name, sizeof name), e->memory_name,
                  tensor_name(*first, other, sizeof other),
                  (*entry)->memory_name);
    } else if (id != *device) {
      return ein_fail(&me->err, EIN_ERR_DEVICE,
                  "%s is on %s device %d but %s is on device %d; einc "
                  "evaluates on one device",
                  tensor_name(i, name, sizeof name), e->name, id,
                  tensor_name(*first, other, sizeof other), *device);
    }
  }
  return EIN_OK;
}

/* Chooses the backend (and device) from the options and where the
 * tensors live. */
static ein_status resolve_backend(ein_thread_rec *me, const ein_options *o,
                                  const DLTensor *const *inputs, int n,
                                  const DLTensor *output,
                                  const ein_backend_entry **out,
                                  int *device) {
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
                tensor_name(first, name, sizeof name), have->memory_name,
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
static ein_status resolve_memory_limit(ein_thread_rec *me, const ein_options *o,
                                       const ein_backend_entry *kind,
                                       int device, ein_options *local,
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

/* The calling thread's reusable key buffer, emptied: keys and layout
 * checks on the hot path allocate nothing once it has grown. */
static ein_strbuf *scratch_key(ein_thread_rec *me) {
  me->key.len = 0;
  me->key.failed = false;
  return &me->key;
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
static void byte_range(const DLTensor *t, uintptr_t *lo, uintptr_t *hi) {
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
  byte_range(a, &alo, &ahi);
  byte_range(b, &blo, &bhi);
  return alo < bhi && blo < ahi;
}

/* The planner's view of the operands: dtype, shape and strides of each
 * input, and of the output (the expression's shape, in the output
 * tensor's dtype and strides when one is given, else the inputs'). */
static void describe_operands(const DLTensor *const *inputs, int n,
                              const DLTensor *output, int ndim,
                              const int64_t *shape, ein_tensor_desc *descs,
                              ein_tensor_desc *od) {
  ein_dtype in_dt = EIN_DT_F32;
  for (int i = 0; i < n; i++) {
    ein_dtype_from_dl(inputs[i]->dtype, &descs[i].dtype);
    descs[i].ndim = inputs[i]->ndim;
    descs[i].shape = inputs[i]->shape;
    descs[i].strides = inputs[i]->strides;
    in_dt = descs[0].dtype;
  }
  od->dtype = in_dt;
  od->ndim = ndim;
  od->shape = shape;
  od->strides = NULL;
  if (output) {
    ein_dtype_from_dl(output->dtype, &od->dtype);
    od->strides = output->strides;
  }
}

/* A given output tensor must have the expression's shape, and strides
 * that give each element its own address. */
static ein_status check_output_tensor(ein_thread_rec *me,
                                      const DLTensor *output, int ndim,
                                      const int64_t *shape) {
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

/* Binds the expression to the tensors and plans it for the backend. Plans
 * need no device: a backend's caps are static. */
static ein_status bind_and_plan(ein_thread_rec *me, const char *expr,
                                const DLTensor *const *inputs, int n,
                                const DLTensor *output, const ein_options *o,
                                const ein_backend_entry *backend,
                                ein_tensor_desc *descs, ein_tensor_desc *od,
                                ein_plan_ir **ir) {
  ein_binding *b;
  ein_status st = ein_bind(me->ctx, expr, inputs, n, o, &b);
  if (st) return st;
  int ndim = ein_binding_output_ndim(b);
  const int64_t *shape = ein_binding_output_shape(b);
  describe_operands(inputs, n, output, ndim, shape, descs, od);
  if (output && (st = check_output_tensor(me, output, ndim, shape))) {
    ein_binding_destroy(b);
    return st;
  }
  const ein_backend_caps *caps = ein_ctx_caps(me->ctx, backend);
  ein_plan_limits limits = {.memory_limit = o->memory_limit, .path = o->path,
                            .slice_axes = o->slice_axes,
                            .plan_time = o->plan_time, .seed = o->seed,
                            .objective = (int)o->objective};
  st = ein_plan_build(ein_binding_problem(b), descs, od, caps, &limits,
                      &me->err, ir);
  ein_binding_destroy(b);
  return st;
}

/* The layout key of the call (each tensor's dtype, shape and strides) in
 * the plan's arena, with the offset where each tensor's part starts;
 * NULL when out of memory. */
static char *layout_key(ein_plan_ir *ir, const DLTensor *const *inputs,
                        int n, const DLTensor *output,
                        const ein_tensor_desc *descs,
                        const ein_tensor_desc *od, size_t **offset) {
  *offset = ein_arena_alloc(&ir->arena, (size_t)n + 2, sizeof(size_t));
  ein_strbuf lk = {0};
  for (int i = 0; i < n; i++) {
    if (*offset) (*offset)[i] = lk.len;
    key_tensor(&lk, inputs[i], descs[i].dtype);
  }
  if (*offset) (*offset)[n] = lk.len;
  if (output) key_tensor(&lk, output, od->dtype);
  if (*offset) (*offset)[n + 1] = lk.len;
  char *layout = lk.failed || !*offset
                     ? NULL
                     : ein_arena_alloc(&ir->arena, lk.len + 1, 1);
  if (layout) memcpy(layout, lk.data ? lk.data : "", lk.len);
  ein_strbuf_free(&lk);
  return layout;
}

enum { SUB_ADD, SUB_STORE, SUB_ZERO };

/* The backend's programs of a sliced plan's sub-plans (plan.h,
 * ein_slicing: add and store when a summed axis is sliced, zero when an
 * output axis is); on failure none is kept. */
static ein_status prepare_slicing(const ein_backend_entry *backend,
                                  const ein_plan_ir *ir, void *sub[3],
                                  ein_error_rec *err) {
  const ein_plan_ir *subs[3] = {ir->slicing.add, ir->slicing.store,
                                ir->slicing.zero};
  ein_status st = EIN_OK;
  for (int i = 0; i < 3 && !st; i++)
    if (subs[i]) st = backend->prepare(subs[i], &sub[i], err);
  for (int i = 0; i < 3 && st; i++) {
    if (sub[i]) backend->program_free(sub[i]);
    sub[i] = NULL;
  }
  return st;
}

/* Binds, plans and prepares the backend's program; the plan owns the IR,
 * the program, a copy of the expression and the layout key it was made
 * for. */
static ein_status build_plan(ein_thread_rec *me, const char *expr,
                             const DLTensor *const *inputs, int n,
                             const DLTensor *output, const ein_options *o,
                             const ein_backend_entry *backend, int device,
                             ein_plan **out) {
  ein_tensor_desc *descs = ein_malloc(((size_t)n + 1) * sizeof *descs), od;
  if (!descs) return ein_fail(&me->err, EIN_ERR_NO_MEMORY, "out of memory while planning");
  ein_plan_ir *ir;
  double t0 = ein_trace_now();
  ein_status st = bind_and_plan(me, expr, inputs, n, output, o, backend,
                                descs, &od, &ir);
  if (st) ein_free(descs);
  ein_trace_end("plan (bind, contraction path, steps)", t0);
  if (st) return st;
  ir->allow_tf32 = o->allow_tf32 != 0;
  void *program = NULL;
  t0 = ein_trace_now();
  void *sub[3] = {NULL, NULL, NULL};
  if (backend->prepare &&
      ((st = backend->prepare(ir, &program, &me->err)) != EIN_OK ||
       (st = prepare_slicing(backend, ir, sub, &me->err)) != EIN_OK)) {
    if (program) backend->program_free(program);
    ein_free(descs);
    ein_plan_ir_destroy(ir);
    return st;
  }
  if (backend->prepare)
    ein_trace_end("backend program (kernel sources, cuBLAS calls)", t0);
  ein_plan *plan = ein_arena_alloc(&ir->arena, 1, sizeof *plan);
  char *copy = plan ? ein_arena_strndup(&ir->arena, expr, strlen(expr)) : NULL;
  size_t *offset = NULL;
  char *layout =
      copy ? layout_key(ir, inputs, n, output, descs, &od, &offset) : NULL;
  ein_free(descs);
  if (!layout) {
    if (program) backend->program_free(program);
    for (int i = 0; i < 3; i++)
      if (sub[i]) backend->program_free(sub[i]);
    ein_plan_ir_destroy(ir);
    return ein_fail(&me->err, EIN_ERR_NO_MEMORY, "out of memory while planning");
  }
  plan->ir = ir;
  atomic_init(&plan->refs, 1);
  plan->expr = copy;
  plan->backend = backend;
  plan->device = device;
  plan->program = program;
  memcpy(plan->sub, sub, sizeof sub);
  plan->ninputs = n;
  plan->memory_limit = o->memory_limit;
  plan->layout = layout;
  plan->offset = offset;
  *out = plan;
  return EIN_OK;
}

static const ein_options default_options;

static ein_status check_inputs(ein_thread_rec *me,
                               const DLTensor *const *inputs, int n,
                               bool needs_data) {
  if (n < 0 || n > EIN_MAX_OPERANDS)
    return ein_fail(&me->err, n < 0 ? EIN_ERR_INVALID_ARGUMENT : EIN_ERR_LIMIT,
                "%d tensors given; einc takes 1 to %d", n, EIN_MAX_OPERANDS);
  if (n > 0 && !inputs)
    return ein_fail(&me->err, EIN_ERR_INVALID_ARGUMENT,
                "%d inputs but the tensor array is NULL", n);
  ein_dtype dt;
  for (int i = 0; i < n; i++) {
    ein_status st = check_tensor(me, inputs[i], i, needs_data, &dt);
    if (st) return st;
  }
  return EIN_OK;
}

/* One slice's input pointers: each input moved by the slice index. */
static void slice_inputs(const ein_plan_ir *ir, const int64_t *idx,
                         char *const *base, char **at) {
  const ein_slicing *sl = &ir->slicing;
  int64_t es = (int64_t)ein_dtype_size(ir->dtype);
  for (int i = 0; i < ir->ninputs; i++) {
    int64_t off = 0;
    for (int k = 0; k < sl->n; k++)
      off += idx[k] * sl->in_stride[(size_t)i * (size_t)sl->n + (size_t)k];
    at[i] = base[i] + off * es;
  }
}

/* The accumulation of one piece of the output (the sliced summed axes
 * run innermost): the first unit of a piece writes R0; each next one
 * writes P and the add plan sums R and P into the other R (plan.h,
 * ein_slicing); after the piece's last unit the last R is stored into the
 * output at `out`. */
static ein_status accumulate(ein_backend *be, const ein_plan *plan,
                             char *const *in, char *acc, bool begin,
                             bool end, int *cur, char *out,
                             const ein_step_marks *marks, ein_error_rec *err) {
  const ein_plan_ir *ir = plan->ir;
  int64_t E = ir->slicing.acc_elems * (int64_t)ein_dtype_size(ir->dtype);
  char *r[2] = {acc, acc + 2 * E}, *p = acc + E;
  ein_status st;
  if (begin) {
    *cur = 0;
    st = be->run(be, ir, plan->program, in, r[0], marks, err);
  } else {
    char *rows = *cur == 0 ? r[0] : p; /* R0 then P, or P then R1 */
    st = be->run(be, ir, plan->program, in, p, marks, err);
    if (!st)
      st = be->run(be, ir->slicing.add, plan->sub[SUB_ADD], &rows, r[!*cur],
                   NULL, err);
    *cur = !*cur;
  }
  if (!st && end)
    st = be->run(be, ir->slicing.store, plan->sub[SUB_STORE], &r[*cur], out,
                 NULL, err);
  return st;
}

/* A range of units: [first, first + count) of a plan's slices (all of
 * them for a whole run). */
typedef struct unit_range {
  int64_t first, count;
} unit_range;

/* The sliced axes' indices of unit u (the last axis fastest). */
static void unit_index(const ein_slicing *sl, int64_t u, int64_t *idx) {
  for (int k = sl->n - 1; k >= 0; k--) {
    idx[k] = u % sl->sizes[k];
    u /= sl->sizes[k];
  }
}

/* The output offset (elements) of piece `piece` (a unit / the units of a
 * piece): the output axes' part of the odometer. */
static int64_t piece_offset(const ein_slicing *sl, int64_t piece) {
  int64_t off = 0;
  for (int k = sl->nkept - 1; k >= 0; k--) {
    off += piece % sl->sizes[k] * sl->out_stride[k];
    piece /= sl->sizes[k];
  }
  return off;
}

/* Zeros in the output pieces outside `range` (a partial holds only what
 * its units write, and partials add up). */
static ein_status zero_other_pieces(ein_backend *be, const ein_plan *plan,
                                    char *out, unit_range range, int64_t nsum,
                                    ein_error_rec *err) {
  const ein_plan_ir *ir = plan->ir;
  if (!ir->slicing.zero) return EIN_OK;
  int64_t es = (int64_t)ein_dtype_size(ir->dtype);
  int64_t pieces = (int64_t)(ir->slicing.count / (double)nsum);
  int64_t lo = range.first / nsum, hi = (range.first + range.count - 1) / nsum;
  ein_status st = EIN_OK;
  for (int64_t q = 0; q < pieces && !st; q++) {
    if (q >= lo && q <= hi) continue;
    char *at = out + piece_offset(&ir->slicing, q) * es;
    char *none[1] = {at}; /* the fill reads no input */
    st = be->run(be, ir->slicing.zero, plan->sub[SUB_ZERO], none, at, NULL,
                 err);
  }
  return st;
}

/* Runs units [first, first + count) of a sliced plan: an odometer over
 * the sliced axes, the last axis fastest, so the summed ones, which come
 * last, finish each piece of the output before the next. */
static ein_status run_sliced(ein_thread_rec *me, ein_backend *be,
                             const ein_plan *plan, char *const *ptrs,
                             char *out, const ein_step_marks *marks,
                             unit_range range) {
  const ein_plan_ir *ir = plan->ir;
  const ein_slicing *sl = &ir->slicing;
  int64_t es = (int64_t)ein_dtype_size(ir->dtype), nsum = 1;
  for (int k = sl->nkept; k < sl->n; k++) nsum *= sl->sizes[k];
  int64_t *idx = ein_calloc((size_t)sl->n, sizeof *idx);
  char **at = ein_malloc(((size_t)ir->ninputs + 1) * sizeof *at);
  void *acc = NULL;
  ein_status st = idx && at ? EIN_OK
                            : ein_fail(&me->err, EIN_ERR_NO_MEMORY, "out of memory");
  if (!st && sl->add)
    st = be->alloc(be, (size_t)(3 * sl->acc_elems * es), &acc, &me->err);
  if (!st) st = zero_other_pieces(be, plan, out, range, nsum, &me->err);
  int cur = 0;
  for (int64_t u = range.first; !st && u < range.first + range.count; u++) {
    unit_index(sl, u, idx);
    slice_inputs(ir, idx, ptrs, at);
    char *piece = out + piece_offset(sl, u / nsum) * es;
    bool begin = u % nsum == 0 || u == range.first;
    bool end = u % nsum == nsum - 1 || u == range.first + range.count - 1;
    st = sl->add ? accumulate(be, plan, at, acc, begin, end, &cur, piece,
                              marks, &me->err)
                 : be->run(be, ir, plan->program, at, piece, marks, &me->err);
  }
  if (acc) be->free(be, acc);
  ein_free(idx);
  ein_free(at);
  return st;
}

/* Runs a plan whose layouts are known to match the tensors: units
 * `range` of it (a plan that is not sliced is one unit), on `device` of
 * its backend (the plan's own, or another for spread.c). */
/* A plan whose order is past int64 (needs_limit_elems) runs only under a
 * memory limit: refused before anything runs, saying how to run it. */
static ein_status check_runnable(ein_thread_rec *me, const ein_plan *plan) {
  double elems = plan->ir->needs_limit_elems;
  if (!(elems > 0)) return EIN_OK;
  return ein_fail_limit(&me->err,
                  "this contraction's best order needs an intermediate of "
                  "%.4g elements, more than int64 counts; it runs only "
                  "sliced: give a memory limit (ein_options.memory_limit, "
                  "--memory-limit B or 'free', memory_limit=) and einc "
                  "slices it to fit", elems);
}

static ein_status run_plan_on(ein_thread_rec *me, const ein_plan *plan,
                              int device, const DLTensor *const *inputs,
                              int n, DLTensor *output,
                              const ein_step_marks *marks, unit_range range) {
  ein_status runnable = check_runnable(me, plan);
  if (runnable) return runnable;
  uintptr_t olo, ohi;
  byte_range(output, &olo, &ohi);
  char *small[16];
  char **ptrs = n <= 16 ? small : ein_malloc((size_t)n * sizeof *ptrs);
  if (!ptrs) return ein_fail(&me->err, EIN_ERR_NO_MEMORY, "out of memory");
  ein_status st = EIN_OK;
  for (int i = 0; i < n && !st; i++) {
    uintptr_t lo, hi;
    byte_range(inputs[i], &lo, &hi);
    if (lo < ohi && olo < hi)
      st = ein_fail(&me->err, EIN_ERR_INVALID_ARGUMENT,
                "the output overlaps input %d in memory; einc does not "
                "evaluate in place",
                i + 1);
    ptrs[i] = (char *)inputs[i]->data + inputs[i]->byte_offset;
  }
  ein_backend *be =
      st ? NULL : ein_ctx_backend(me, plan->backend->kind, device);
  if (!st && !be) st = me->err.pub.status;
  if (!st) {
    double t0 = ein_trace_now();
    char *out = (char *)output->data + output->byte_offset;
    st = plan->ir->slicing.n
             ? run_sliced(me, be, plan, ptrs, out, marks, range)
             : be->run(be, plan->ir, plan->program, ptrs, out, marks,
                       &me->err);
    ein_trace_end("run (queued; kernels compiled or loaded on first use)", t0);
  }
  if (ptrs != small) ein_free(ptrs);
  return st;
}

static ein_status run_plan(ein_thread_rec *me, const ein_plan *plan,
                           const DLTensor *const *inputs, int n,
                           DLTensor *output, const ein_step_marks *marks,
                           unit_range range) {
  return run_plan_on(me, plan, plan->device, inputs, n, output, marks, range);
}

ein_status ein_plan_run_units_on(ein_ctx *ctx, const ein_plan *plan,
                                 int device, const DLTensor *const *inputs,
                                 int n, DLTensor *partial, int64_t first,
                                 int64_t count) {
  ein_thread_rec *me = ein_ctx_enter(ctx);
  if (!me) return EIN_ERR_NO_MEMORY;
  return run_plan_on(me, plan, device, inputs, n, partial, NULL,
                     (unit_range){first, count});
}

ein_status ein_plan_create(ein_ctx *ctx, const char *expr,
                           const DLTensor *const *inputs, int ninputs,
                           const DLTensor *output, const ein_options *options,
                           ein_plan **out) {
  if (!ctx) return EIN_ERR_INVALID_ARGUMENT;
  ein_thread_rec *me = ein_ctx_enter(ctx);
  if (!me) return EIN_ERR_NO_MEMORY;
  if (!out || !expr)
    return ein_fail(&me->err, EIN_ERR_INVALID_ARGUMENT, "ein_plan_create: %s is NULL",
                !out ? "the result pointer" : "the expression");
  *out = NULL;
  const ein_options *o = options ? options : &default_options;
  ein_status st = check_inputs(me, inputs, ninputs, false);
  ein_dtype dt;
  if (!st && output) st = check_tensor(me, output, -1, false, &dt);
  const ein_backend_entry *kind;
  int device;
  if (!st)
    st = resolve_backend(me, o, inputs, ninputs, output, &kind, &device);
  ein_options local;
  if (!st) st = resolve_memory_limit(me, o, kind, device, &local, &o);
  if (!st && ein_fp8_call(inputs, ninputs, o))
    return ein_fail(&me->err, EIN_ERR_DTYPE,
                "ein_plan_create: fp8 inputs or scales; fp8 expressions run "
                "through ein_eval, which takes the scales per call (a plan "
                "would fix them)");
  if (!st)
    st = build_plan(me, expr, inputs, ninputs, output, o, kind, device, out);
  return st;
}

/* Compares a tensor with the layout the plan was made for. */
static ein_status check_layout(ein_thread_rec *me, const ein_plan *plan,
                               int slot, const DLTensor *t, int index) {
  ein_strbuf *k = scratch_key(me);
  ein_dtype dt;
  ein_dtype_from_dl(t->dtype, &dt);
  key_tensor(k, t, dt);
  if (k->failed) return ein_fail(&me->err, EIN_ERR_NO_MEMORY, "out of memory");
  size_t lo = plan->offset[slot], hi = plan->offset[slot + 1];
  bool same = k->len == hi - lo &&
              memcmp(k->data ? k->data : "", plan->layout + lo, k->len) == 0;
  if (same) return EIN_OK;
  char name[32];
  return ein_fail(&me->err, EIN_ERR_BAD_SHAPE,
              "%s has another dtype, shape or strides than the plan was made "
              "for; make a plan for this layout (or call ein_eval)",
              tensor_name(index, name, sizeof name));
}

/* Every unit of a plan; EIN_ERR_LIMIT past what int64 counts. */
static ein_status every_unit(ein_thread_rec *me, const ein_plan *plan,
                             unit_range *all) {
  *all = (unit_range){0, ein_plan_units(plan)};
  if (all->count >= 0) return EIN_OK;
  return ein_fail(&me->err, EIN_ERR_LIMIT,
              "the plan's %.4g slices are more than a run can count",
              ein_plan_nslices(plan));
}

/* ein_plan_execute, ein_plan_execute_marked (marks may be NULL) and
 * ein_plan_run_units (range: NULL for every unit). */
static ein_status execute(ein_ctx *ctx, const ein_plan *plan,
                          const DLTensor *const *inputs, int ninputs,
                          DLTensor *output, const ein_step_marks *marks,
                          const unit_range *range) {
  if (!ctx) return EIN_ERR_INVALID_ARGUMENT;
  ein_thread_rec *me = ein_ctx_enter(ctx);
  if (!me) return EIN_ERR_NO_MEMORY;
  if (!plan) return ein_fail(&me->err, EIN_ERR_INVALID_ARGUMENT, "the plan is NULL");
  unit_range all;
  ein_status st = every_unit(me, plan, &all);
  if (st) return st;
  if (range && (range->first < 0 || range->count < 1 ||
                range->count > all.count - range->first))
    return ein_fail(&me->err, EIN_ERR_INVALID_ARGUMENT,
                "units %lld to %lld asked of a plan of %lld units (0 to "
                "%lld); a range is first >= 0 and count >= 1 within them",
                (long long)range->first,
                (long long)range->first + (long long)range->count - 1,
                (long long)all.count, (long long)all.count - 1);
  if (ninputs != plan->ninputs)
    return ein_fail(&me->err, EIN_ERR_OPERAND_COUNT,
                "the plan takes %d inputs but %d were given", plan->ninputs,
                ninputs);
  st = check_inputs(me, inputs, ninputs, true);
  ein_dtype dt;
  if (!st) st = check_tensor(me, output, -1, true, &dt);
  if (st) return st;
  for (int i = 0; i < ninputs && !st; i++)
    st = check_layout(me, plan, i, inputs[i], i);
  if (st) return st;
  if (plan->offset[ninputs + 1] > plan->offset[ninputs]) {
    if ((st = check_layout(me, plan, ninputs, output, -1))) return st;
  } else {
    /* Made for a contiguous output: the output must be one. */
    const ein_plan_ir *ir = plan->ir;
    bool same = output->ndim == ir->out_ndim && dt == ir->dtype;
    for (int d = 0; same && d < ir->out_ndim; d++)
      same = output->shape[d] == ir->out_shape[d];
    DLTensor compact = *output;
    compact.strides = NULL;
    for (int d = 0; same && d < output->ndim; d++)
      same = ein_tensor_stride(output, d) == ein_tensor_stride(&compact, d);
    if (!same)
      return ein_fail(&me->err, EIN_ERR_BAD_SHAPE,
                  "the output is not the C-contiguous %s tensor of the "
                  "plan's output shape",
                  ein_dtype_name(ir->dtype));
  }
  const ein_backend_entry *kind;
  int device;
  const ein_options o = {.backend = plan->backend->kind};
  if ((st = resolve_backend(me, &o, inputs, ninputs, output, &kind,
                            &device)))
    return st;
  if (device != plan->device)
    return ein_fail(&me->err, EIN_ERR_DEVICE,
                "the tensors are on %s device %d but the plan was made "
                "for device %d",
                kind->name, device, plan->device);
  return run_plan(me, plan, inputs, ninputs, output, marks,
                  range ? *range : all);
}

ein_status ein_plan_execute(ein_ctx *ctx, const ein_plan *plan,
                            const DLTensor *const *inputs, int ninputs,
                            DLTensor *output) {
  return execute(ctx, plan, inputs, ninputs, output, NULL, NULL);
}

ein_status ein_plan_run_units(ein_ctx *ctx, const ein_plan *plan,
                              const DLTensor *const *inputs, int ninputs,
                              DLTensor *partial, int64_t first,
                              int64_t count) {
  const unit_range range = {first, count};
  return execute(ctx, plan, inputs, ninputs, partial, NULL, &range);
}

ein_status ein_plan_execute_marked(ein_ctx *ctx, const ein_plan *plan,
                                   const DLTensor *const *inputs,
                                   int ninputs, DLTensor *output,
                                   ein_step_mark_fn mark, void *arg) {
  if (!mark) return execute(ctx, plan, inputs, ninputs, output, NULL, NULL);
  const ein_step_marks marks = {mark, arg};
  return execute(ctx, plan, inputs, ninputs, output, &marks, NULL);
}

ein_status ein_eval(ein_ctx *ctx, const char *expr,
                    const DLTensor *const *inputs, int ninputs,
                    DLTensor *output, const ein_options *options) {
  if (!ctx) return EIN_ERR_INVALID_ARGUMENT;
  ein_thread_rec *me = ein_ctx_enter(ctx);
  if (!me) return EIN_ERR_NO_MEMORY;
  if (!expr)
    return ein_fail(&me->err, EIN_ERR_INVALID_ARGUMENT,
                "ein_eval: the expression is NULL");
  const ein_options *o = options ? options : &default_options;
  ein_status st = check_inputs(me, inputs, ninputs, true);
  ein_dtype dt;
  if (!st) st = check_tensor(me, output, -1, true, &dt);
  const ein_backend_entry *kind;
  int device;
  if (!st)
    st = resolve_backend(me, o, inputs, ninputs, output, &kind, &device);
  ein_options local;
  if (!st) st = resolve_memory_limit(me, o, kind, device, &local, &o);
  if (st) return st;
  if (ein_fp8_call(inputs, ninputs, o))
    return ein_fp8_eval(me, expr, inputs, ninputs, output, o, kind->kind,
                        device);
  size_t len = strnlen(expr, (size_t)EIN_MAX_EXPR_BYTES + 1);
  ein_plan *plan = NULL;
  ein_strbuf *k = scratch_key(me);
  bool cacheable = len <= EIN_MAX_EXPR_BYTES;
  if (cacheable) {
    key_options(k, expr, len, o, kind, device);
    for (int i = 0; i < ninputs; i++) {
      ein_dtype_from_dl(inputs[i]->dtype, &dt);
      key_tensor(k, inputs[i], dt);
    }
    ein_dtype_from_dl(output->dtype, &dt);
    key_tensor(k, output, dt);
    cacheable = !k->failed;
    if (cacheable) plan = ein_plan_cache_find(&me->ctx->cache, k->data, k->len);
  }
  if (!plan) {
    st = build_plan(me, expr, inputs, ninputs, output, o, kind, device,
                    &plan);
    if (st) return st;
    if (cacheable) ein_plan_cache_put(&me->ctx->cache, k->data, k->len, plan);
  }
  /* Our reference keeps the plan alive even if another thread evicts it
   * from the cache meanwhile. */
  unit_range all;
  st = every_unit(me, plan, &all);
  if (!st && o->devices > 1 && all.count > 1)
    st = ein_plan_spread(ctx, plan, inputs, ninputs, output, o->devices);
  else if (!st)
    st = run_plan(me, plan, inputs, ninputs, output, NULL, all);
  ein_plan_release(plan);
  return st;
}

void ein_plan_retain(ein_plan *plan) {
  atomic_fetch_add_explicit(&plan->refs, 1, memory_order_relaxed);
}

void ein_plan_release(ein_plan *plan) {
  if (!plan) return;
  /* acq_rel: the thread that frees sees every other thread's last use. */
  if (atomic_fetch_sub_explicit(&plan->refs, 1, memory_order_acq_rel) != 1)
    return;
  if (plan->program) plan->backend->program_free(plan->program);
  for (int i = 0; i < 3; i++)
    if (plan->sub[i]) plan->backend->program_free(plan->sub[i]);
  ein_plan_ir_destroy(plan->ir);
}

void ein_plan_destroy(ein_plan *plan) { ein_plan_release(plan); }

const struct ein_plan_ir *ein_plan_ir_of(const ein_plan *plan) {
  return plan ? plan->ir : NULL;
}

const struct ein_cuda_program *ein_plan_cuda_program(const ein_plan *plan) {
  return plan && plan->backend->cuda_program
             ? plan->backend->cuda_program(plan->program)
             : NULL;
}

/* The plan's figures, each read from its IR; a NULL plan reads as empty
 * (0, or NULL for the shape). */
#define PLAN_IR_FIELD(type, name, field)                                     \
  type name(const ein_plan *plan) { return plan ? plan->ir->field : 0; }

PLAN_IR_FIELD(int, ein_plan_output_ndim, out_ndim)
PLAN_IR_FIELD(const int64_t *, ein_plan_output_shape, out_shape)
PLAN_IR_FIELD(double, ein_plan_naive_flops, naive_flops)
PLAN_IR_FIELD(double, ein_plan_flops, flops)
PLAN_IR_FIELD(double, ein_plan_min_bytes, min_bytes)
PLAN_IR_FIELD(int64_t, ein_plan_largest_intermediate, largest_intermediate)
PLAN_IR_FIELD(int64_t, ein_plan_workspace_bytes, workspace_bytes)
PLAN_IR_FIELD(int, ein_plan_nsteps, nsteps)
#undef PLAN_IR_FIELD

int ein_plan_nsliced(const ein_plan *plan) {
  return plan ? plan->ir->slicing.n : 0;
}

const char *ein_plan_sliced_axis(const ein_plan *plan, int i) {
  if (!plan || i < 0 || i >= plan->ir->slicing.n) return NULL;
  return plan->ir->axis_labels[plan->ir->slicing.axes[i]];
}

int ein_plan_device(const ein_plan *plan) { return plan->device; }

int64_t ein_plan_memory_limit(const ein_plan *plan) {
  return plan ? plan->memory_limit : 0;
}

bool ein_plan_output_compact(const ein_plan *plan) {
  const char *k = plan->layout + plan->offset[plan->ninputs];
  size_t len = plan->offset[plan->ninputs + 1] - plan->offset[plan->ninputs];
  if (len == 0) return true;
  int ndim = (unsigned char)k[1];
  int64_t expect = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    int64_t v[2]; /* shape, effective stride (0 for size-1 dims) */
    memcpy(v, k + 2 + (size_t)d * sizeof v, sizeof v);
    if (v[0] == 1) continue;
    if (v[1] != expect) return false;
    expect *= v[0];
  }
  return true;
}

int64_t ein_plan_units(const ein_plan *plan) {
  if (!plan) return 0;
  double n = ein_plan_nslices(plan);
  return n < 0x1p63 ? (int64_t)n : -1;
}

double ein_plan_nslices(const ein_plan *plan) {
  return plan && plan->ir->slicing.n ? plan->ir->slicing.count : 1;
}

double ein_plan_unsliced_flops(const ein_plan *plan) {
  return plan ? ein_cost_model_flops(plan->ir) : 0;
}

int ein_plan_backend(const ein_plan *plan) {
  return plan ? (int)plan->backend->kind : EIN_BACKEND_AUTO;
}

int64_t ein_plan_slice_bytes(const ein_plan *plan) {
  return plan ? ein_plan_slice_bytes_ir(plan->ir) : 0;
}

int ein_plan_is_view(const ein_plan *plan) {
  return plan && plan->ir->view.is_view;
}

int ein_plan_output_view(const ein_plan *plan, int *input,
                         int64_t *view_strides, int64_t *view_offset) {
  if (!ein_plan_is_view(plan) || !input || !view_strides || !view_offset)
    return 0;
  const ein_plan_view *v = &plan->ir->view;
  memcpy(view_strides, v->strides, sizeof(int64_t) * (size_t)plan->ir->out_ndim);
  *input = v->input;
  *view_offset = v->offset;
  return 1;
}

int ein_plan_count_steps(const ein_plan *plan, const char *kind) {
  if (!plan || !kind) return 0;
  int n = 0;
  for (int i = 0; i < plan->ir->nsteps; i++) {
    const ein_step *s = &plan->ir->steps[i];
    n += strcmp(ein_step_name(s), kind) == 0 ||
         strcmp(ein_step_role_name(s->role), kind) == 0;
  }
  return n;
}

/* The model prices this plan's backend: a GPU model the CUDA backend's
 * and the emulated device's plans (the same program), the CPU model the
 * CPU's; a caller's model with backend 0 any. */
static bool model_fits(const ein_plan *plan, const ein_device_model *m) {
  if (!m || !ein_cost_model_usable(m)) return false;
  if (m->backend == EIN_BACKEND_AUTO) return true;
  ein_backend_kind k = plan->backend->kind;
  return m->backend == EIN_BACKEND_CUDA
             ? k == EIN_BACKEND_CUDA || k == EIN_BACKEND_EMU
             : (int)k == m->backend;
}

/* The name of the device a plan targets, for a NULL model name. */
static const char *own_model(const ein_plan *plan) {
  return plan->backend->kind == EIN_BACKEND_CPU ? "cpu" : "cuda";
}

size_t ein_plan_describe(const ein_plan *plan, ein_describe_format format,
                         const char *device_model, char *buf, size_t cap) {
  if (cap > 0 && buf) buf[0] = 0;
  if (!plan) return 0;
  ein_device_model m;
  if (ein_device_model_get(device_model ? device_model : own_model(plan),
                           &m) != EIN_OK)
    return 0;
  return ein_plan_describe_model(plan, format, &m, buf, cap);
}

ein_status ein_plan_spread_cost(const ein_plan *plan,
                                const ein_device_model *model, int workers,
                                double link_bytes_per_s,
                                ein_spread_cost *out) {
  if (!plan || !out || workers < 1 || !(link_bytes_per_s > 0))
    return EIN_ERR_INVALID_ARGUMENT;
  const ein_device_model *m =
      ein_cost_model_usable(model) ? model : ein_device_model_find(NULL);
  ein_plan_spread_cost_ir(plan->ir, m, workers, link_bytes_per_s, out);
  return EIN_OK;
}

size_t ein_plan_describe_model(const ein_plan *plan,
                               ein_describe_format format,
                               const ein_device_model *m, char *buf,
                               size_t cap) {
  if (cap > 0 && buf) buf[0] = 0;
  if (!plan || !model_fits(plan, m)) return 0;
  ein_strbuf sb = {0};
  bool json = format == EIN_DESCRIBE_JSON;
  ein_report_hook hook = {NULL, plan->program};
  if (plan->program) hook.step_json = plan->backend->describe_step_json;
  ein_plan_report(plan->ir, plan->expr, plan->backend->name, json, m, &hook,
                  &sb);
  if (plan->program && plan->backend->describe && !json)
    plan->backend->describe(plan->ir, plan->program, &sb);
  return ein_strbuf_deliver(&sb, buf, cap);
}

ein_peak_kind ein_plan_peak_kind(const ein_plan *plan) {
  return plan ? ein_cost_plan_kind(plan->ir) : EIN_PEAK_F32;
}

const char *ein_peak_kind_name(ein_peak_kind kind) {
  return ein_cost_kind_name(kind);
}

double ein_plan_peak_flops(const ein_plan *plan,
                           const ein_device_model *model) {
  if (!plan || !model) return 0;
  return ein_cost_plan_peak(plan->ir, model);
}

double ein_plan_predicted_seconds(const ein_plan *plan,
                                  const ein_device_model *model) {
  if (!plan || !model_fits(plan, model)) return -1;
  return ein_cost_predicted_seconds(plan->ir, model);
}

/* flops / seconds / the data-sheet peak of the plan's arithmetic. */
static double utilization(const ein_plan *plan, double flops, double seconds,
                          const ein_device_model *model) {
  double peak = ein_plan_peak_flops(plan, model);
  if (!(seconds > 0) || !(peak > 0)) return 0;
  return flops / seconds / peak;
}

double ein_plan_mfu(const ein_plan *plan, double seconds,
                    const ein_device_model *model) {
  return plan ? utilization(plan, ein_cost_model_flops(plan->ir), seconds,
                            model)
              : 0;
}

double ein_plan_hfu(const ein_plan *plan, double seconds,
                    const ein_device_model *model) {
  return plan ? utilization(plan, plan->ir->flops, seconds, model) : 0;
}

ein_status ein_plan_memory_get(const ein_plan *plan, ein_plan_memory *out) {
  if (!plan || !out) return EIN_ERR_INVALID_ARGUMENT;
  ein_cost_memory(plan->ir, out);
  return EIN_OK;
}

int ein_plan_ntemps(const ein_plan *plan) {
  return plan ? ein_cost_ntemps(plan->ir) : 0;
}

int64_t ein_plan_temp_bytes(const ein_plan *plan, int i) {
  return plan ? ein_cost_temp_bytes(plan->ir, i) : -1;
}
