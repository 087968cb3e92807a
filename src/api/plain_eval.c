/*
 * plain_eval.c - the plain path (plain_eval.h): the cache key, binding and
 * planning, the backend's program, and the run, with the odometer over a
 * sliced plan's units.
 */
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "plain_eval.h"
#include "plan_key.h"
#include "tensors.h"
#include "trace.h"

/* A string option's part: its length with the NUL (0 for NULL, which
 * differs from ""), then its bytes. */
static void key_string(ein_strbuf *k, const char *s) {
  size_t len = s ? strlen(s) + 1 : 0;
  ein_strbuf_append(k, &len, sizeof len);
  if (len) ein_strbuf_append(k, s, len);
}

/* The expression and the plan-shaping options: the fixed-size ones in one
 * append (the key is built on every ein_eval; docs/design.md). */
static void key_options(ein_strbuf *k, const char *expr, size_t len,
                        const ein_options *o,
                        const ein_backend_entry *backend, int device) {
  int64_t head[11] = {(int64_t)len, o->dialect, o->reduction, o->nlengths,
                      backend->kind, o->allow_tf32 != 0, device,
                      (int64_t)o->axis_rules, o->memory_limit,
                      (int64_t)o->seed, (int64_t)o->objective};
  ein_strbuf_append(k, head, sizeof head);
  ein_strbuf_append(k, &o->plan_time, sizeof o->plan_time);
  ein_strbuf_append(k, expr, len);
  key_string(k, o->path);
  key_string(k, o->slice_axes);
  for (int i = 0; i < o->nlengths; i++) {
    key_string(k, o->lengths[i].name); /* check_options: not NULL */
    ein_strbuf_append(k, &o->lengths[i].size, sizeof(int64_t));
  }
}

/* The calling thread's reusable key buffer, emptied: keys and layout
 * checks on the hot path allocate nothing once it has grown. */
static ein_strbuf *scratch_key(ein_thread_rec *me) {
  me->key.len = 0;
  me->key.failed = false;
  return &me->key;
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
  if (output && (st = ein_check_output_shape(me, output, ndim, shape))) {
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
                        int n, const DLTensor *output, size_t **offset) {
  *offset = ein_arena_alloc(&ir->arena, (size_t)n + 2, sizeof(size_t));
  ein_strbuf lk = {0};
  ein_dtype dt;
  for (int i = 0; i < n; i++) {
    if (*offset) (*offset)[i] = lk.len;
    ein_dtype_from_dl(inputs[i]->dtype, &dt);
    ein_key_tensor(&lk, inputs[i], dt);
  }
  if (*offset) (*offset)[n] = lk.len;
  if (output && ein_dtype_from_dl(output->dtype, &dt))
    ein_key_tensor(&lk, output, dt);
  if (*offset) (*offset)[n + 1] = lk.len;
  char *layout = lk.failed || !*offset
                     ? NULL
                     : ein_arena_alloc(&ir->arena, lk.len + 1, 1);
  if (layout) memcpy(layout, lk.data ? lk.data : "", lk.len);
  ein_strbuf_free(&lk);
  return layout;
}

/* The backend's programs of a sliced plan's sub-plans (plan.h,
 * ein_slicing: add and store when a summed axis is sliced, zero when an
 * output axis is); on failure none is kept. */
static ein_status prepare_slicing(const ein_backend_entry *backend,
                                  const ein_plan_ir *ir, void *sub[EIN_NSUB],
                                  ein_error_rec *err) {
  const ein_plan_ir *subs[EIN_NSUB] = {ir->slicing.add, ir->slicing.store,
                                       ir->slicing.zero};
  ein_status st = EIN_OK;
  for (int i = 0; i < EIN_NSUB && !st; i++)
    if (subs[i]) st = backend->prepare(subs[i], &sub[i], err);
  for (int i = 0; i < EIN_NSUB && st; i++) {
    if (sub[i]) backend->program_free(sub[i]);
    sub[i] = NULL;
  }
  return st;
}

/* Binds, plans and prepares the backend's program; the plan owns the IR,
 * the program, a copy of the expression and the layout key it was made
 * for. */
ein_status ein_plain_build(ein_thread_rec *me, const char *expr,
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
  ein_free(descs);
  ein_trace_end("plan (bind, contraction path, steps)", t0);
  if (st) return st;
  ir->allow_tf32 = o->allow_tf32 != 0;
  return ein_plain_adopt(me, ir, expr, inputs, n, output, o->memory_limit,
                         backend, device, out);
}

ein_status ein_plain_adopt(ein_thread_rec *me, ein_plan_ir *ir,
                           const char *expr, const DLTensor *const *inputs,
                           int n, const DLTensor *output,
                           int64_t memory_limit,
                           const ein_backend_entry *backend, int device,
                           ein_plan **out) {
  void *program = NULL;
  double t0 = ein_trace_now();
  void *sub[EIN_NSUB] = {NULL};
  ein_status st;
  if (backend->prepare &&
      ((st = backend->prepare(ir, &program, &me->err)) != EIN_OK ||
       (st = prepare_slicing(backend, ir, sub, &me->err)) != EIN_OK)) {
    if (program) backend->program_free(program);
    ein_plan_ir_destroy(ir);
    return st;
  }
  if (backend->prepare)
    ein_trace_end("backend program (kernel sources, cuBLAS calls)", t0);
  ein_plan *plan = ein_arena_alloc(&ir->arena, 1, sizeof *plan);
  char *copy = plan ? ein_arena_strndup(&ir->arena, expr, strlen(expr)) : NULL;
  size_t *offset = NULL;
  char *layout = copy ? layout_key(ir, inputs, n, output, &offset) : NULL;
  if (!layout) {
    if (program) backend->program_free(program);
    for (int i = 0; i < EIN_NSUB; i++)
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
  plan->memory_limit = memory_limit;
  plan->layout = layout;
  plan->offset = offset;
  *out = plan;
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
      st = be->run(be, ir->slicing.add, plan->sub[EIN_SUB_ADD], &rows, r[!*cur],
                   NULL, err);
    *cur = !*cur;
  }
  if (!st && end)
    st = be->run(be, ir->slicing.store, plan->sub[EIN_SUB_STORE], &r[*cur], out,
                 NULL, err);
  return st;
}

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
                                    char *out, ein_unit_range range, int64_t nsum,
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
    st = be->run(be, ir->slicing.zero, plan->sub[EIN_SUB_ZERO], none, at, NULL,
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
                             ein_unit_range range) {
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
    st = ein_backend_temp_alloc(be, (size_t)(3 * sl->acc_elems * es), &acc,
                                &me->err);
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
  ein_backend_temp_free(be, acc);
  ein_free(idx);
  ein_free(at);
  return st;
}

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

ein_status ein_plain_run(ein_thread_rec *me, const ein_plan *plan, int device,
                         const DLTensor *const *inputs, int n,
                         DLTensor *output, const ein_step_marks *marks,
                         ein_unit_range range) {
  ein_status runnable = check_runnable(me, plan);
  if (runnable) return runnable;
  uintptr_t olo, ohi;
  ein_tensor_byte_range(output, &olo, &ohi);
  char *small[16];
  char **ptrs = n <= 16 ? small : ein_malloc((size_t)n * sizeof *ptrs);
  if (!ptrs) return ein_fail(&me->err, EIN_ERR_NO_MEMORY, "out of memory");
  ein_status st = EIN_OK;
  for (int i = 0; i < n && !st; i++) {
    uintptr_t lo, hi;
    ein_tensor_byte_range(inputs[i], &lo, &hi);
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


/* Compares a tensor with the layout the plan was made for. */
ein_status ein_plain_check_layout(ein_thread_rec *me, const ein_plan *plan,
                                  int slot, const DLTensor *t, int index) {
  ein_strbuf *k = scratch_key(me);
  ein_dtype dt;
  ein_dtype_from_dl(t->dtype, &dt);
  ein_key_tensor(k, t, dt);
  if (k->failed) return ein_fail(&me->err, EIN_ERR_NO_MEMORY, "out of memory");
  size_t lo = plan->offset[slot], hi = plan->offset[slot + 1];
  bool same = k->len == hi - lo &&
              memcmp(k->data ? k->data : "", plan->layout + lo, k->len) == 0;
  if (same) return EIN_OK;
  char name[32];
  return ein_fail(&me->err, EIN_ERR_BAD_SHAPE,
              "%s has another dtype, shape or strides than the plan was made "
              "for; make a plan for this layout (or call ein_eval)",
              ein_tensor_name(index, name, sizeof name));
}

/* Every unit of a plan; EIN_ERR_LIMIT past what int64 counts. */
ein_status ein_plain_all_units(ein_thread_rec *me, const ein_plan *plan,
                               ein_unit_range *all) {
  *all = (ein_unit_range){0, ein_plan_units(plan)};
  if (all->count >= 0) return EIN_OK;
  return ein_fail(&me->err, EIN_ERR_LIMIT,
              "the plan's %.4g slices are more than a run can count",
              ein_plan_nslices(plan));
}

/* The call's cache key: the expression, the plan-shaping options, the
 * backend and device, each tensor's layout; false when it cannot be made
 * (an expression past the limit, out of memory): the call then plans
 * without the cache. */
static bool call_key(ein_strbuf *k, const char *expr,
                     const DLTensor *const *inputs, int n,
                     const DLTensor *output, const ein_options *o,
                     const ein_backend_entry *backend, int device) {
  size_t len = strnlen(expr, (size_t)EIN_MAX_EXPR_BYTES + 1);
  if (len > EIN_MAX_EXPR_BYTES) return false;
  ein_dtype dt;
  key_options(k, expr, len, o, backend, device);
  for (int i = 0; i < n; i++) {
    ein_dtype_from_dl(inputs[i]->dtype, &dt);
    ein_key_tensor(k, inputs[i], dt);
  }
  ein_dtype_from_dl(output->dtype, &dt);
  ein_key_tensor(k, output, dt);
  return !k->failed;
}

ein_status ein_plain_plan(ein_thread_rec *me, const char *expr,
                          const DLTensor *const *inputs, int n,
                          const DLTensor *output, const ein_options *o,
                          const ein_backend_entry *backend, int device,
                          ein_plan **out) {
  ein_strbuf *k = scratch_key(me);
  bool cacheable = call_key(k, expr, inputs, n, output, o, backend, device);
  ein_plan_cache *cache = &me->ctx->cache;
  uint64_t h = cacheable ? ein_hash_bytes(k->data, k->len) : 0;
  *out = cacheable
             ? ein_plan_cache_find(cache, EIN_KEY_CALL, h, k->data, k->len)
             : NULL;
  if (*out) return EIN_OK;
  ein_status st =
      ein_plain_build(me, expr, inputs, n, output, o, backend, device, out);
  if (!st && cacheable)
    ein_plan_cache_put(cache, EIN_KEY_CALL, h, k->data, k->len, *out,
                       (ein_cache_data){0});
  return st;
}

ein_status ein_plain_eval(ein_thread_rec *me, const char *expr,
                          const DLTensor *const *inputs, int n,
                          DLTensor *output, const ein_options *o,
                          const ein_backend_entry *backend, int device) {
  ein_plan *plan;
  ein_status st =
      ein_plain_plan(me, expr, inputs, n, output, o, backend, device, &plan);
  if (st) return st;
  /* Our reference keeps the plan alive even if another thread evicts it
   * from the cache meanwhile. */
  ein_unit_range all;
  st = ein_plain_all_units(me, plan, &all);
  if (!st)
    st = ein_plain_run(me, plan, plan->device, inputs, n, output, NULL, all);
  ein_plan_release(plan);
  return st;
}
