/*
 * grad_run.c - ein_grad_execute: runs a gradient program on the backend
 * and device it was made for, every step through that backend's plan
 * path (the plans grad.c made: EINSUM steps as any expression,
 * elementwise steps as planner/grad_plan.c's LOOP and FILL steps).
 *
 * Every value a step reads is C-contiguous in the device's memory: dout,
 * the inputs and the output are used in place when they already are (and
 * need no conjugation), else copied by a one-step copy plan; each step's
 * result is a temporary the backend allocates, except the last, which
 * writes a C-contiguous dinput directly (another dinput gets a copy plan
 * into its strides). Every check is made before anything runs, so a call
 * refused writes nothing; dinput is written only once every earlier step
 * has run.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "ctx_internal.h"
#include "grad_internal.h"
#include "plain_eval.h"
#include "tensors.h"

static int64_t count(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= shape[d];
  return n;
}

static bool compact(const DLTensor *t) {
  if (!t->strides) return true;
  int64_t expect = 1;
  for (int d = t->ndim - 1; d >= 0; d--) {
    if (t->shape[d] != 1 && t->strides[d] != expect) return false;
    expect *= t->shape[d];
  }
  return true;
}

/* What one execution holds: each value's C-contiguous data in the
 * device's memory and the buffers it allocated there. */
typedef struct run {
  ein_thread_rec *me;
  const ein_grad *g;
  ein_backend *be;
  size_t esz;
  void **in, *out, *dout; /* in: one per input */
  void **steps;
  void **owned; /* step results and copies, freed at the end */
  int nowned, cap;
} run;

/* A C-contiguous tensor of the gradient's dtype at data on its device. */
static DLTensor at(const run *r, void *data, int ndim, const int64_t *shape) {
  return (DLTensor){.data = data,
                    .device = {r->g->backend->memory, r->g->device},
                    .ndim = ndim, .dtype = ein_dtype_to_dl(r->g->dtype),
                    .shape = (int64_t *)shape};
}

/* Device memory for n elements, freed with the run; NULL with the error
 * on the record. */
static void *scratch(run *r, int64_t n) {
  void *p = NULL;
  if (r->nowned == r->cap) {
    ein_fail_memory(&r->me->err, "gradient: more buffers than counted");
    return NULL;
  }
  if (ein_backend_temp_alloc(r->be, (size_t)(n > 0 ? n : 1) * r->esz, &p,
                             &r->me->err))
    return NULL;
  r->owned[r->nowned++] = p;
  return p;
}

/* Every unit of a plan on the gradient's device. */
static ein_status run_plan(run *r, const ein_plan *plan,
                           const DLTensor *const *ins, int n, DLTensor *out) {
  ein_unit_range all;
  ein_status st = ein_plain_all_units(r->me, plan, &all);
  if (!st)
    st = ein_plain_run(r->me, plan, r->g->device, ins, n, out, NULL, all);
  return st;
}

/* src copied into dst (of one shape) between their layouts, conjugated
 * when asked, by a one-step plan made for the call. */
static ein_status copy(run *r, const DLTensor *src, DLTensor *dst,
                       bool conj) {
  ein_plan_ir *ir;
  ein_plan *plan = NULL;
  ein_status st = ein_plan_grad_copy(src->ndim, src->shape, dst->strides,
                                     src->strides, r->g->dtype, conj,
                                     &r->me->err, &ir);
  if (!st)
    st = ein_plain_adopt(r->me, ir, conj ? "conj" : "copy", &src, 1, dst, 0,
                         r->g->backend, r->g->device, &plan);
  if (!st) st = run_plan(r, plan, &src, 1, dst);
  ein_plan_destroy(plan);
  return st;
}

/* t's data as a C-contiguous array, conjugated when asked: t's own
 * memory when possible, else a copy the run owns. */
static ein_status contiguous(run *r, const DLTensor *t, bool conj,
                             void **data) {
  *data = (char *)t->data + t->byte_offset;
  if (compact(t) && !conj) return EIN_OK;
  void *p = scratch(r, count(t->ndim, t->shape));
  if (!p) return r->me->err.pub.status;
  DLTensor dst = at(r, p, t->ndim, t->shape);
  *data = p;
  return count(t->ndim, t->shape) ? copy(r, t, &dst, conj) : EIN_OK;
}

static void *value(const run *r, ein_grad_value v) {
  switch (v.kind) {
  case EIN_GRAD_VALUE_DOUT:
  case EIN_GRAD_VALUE_TANGENT: return r->dout; /* the seed, either way */
  case EIN_GRAD_VALUE_INPUT: return r->in[v.index];
  case EIN_GRAD_VALUE_OUTPUT: return r->out;
  default: return r->steps[v.index];
  }
}

/* The shape of a value a step reads. */
static void value_shape(const ein_grad *g, ein_grad_value v, int *ndim,
                        const int64_t **shape) {
  const ein_grad_step *src =
      v.kind == EIN_GRAD_VALUE_STEP ? &g->prog.steps[v.index] : NULL;
  int input = v.kind == EIN_GRAD_VALUE_INPUT     ? v.index
              : v.kind == EIN_GRAD_VALUE_TANGENT ? g->wrt
                                                 : -1;
  *ndim = src ? src->ndim : input >= 0 ? g->in_ndim[input] : g->out_ndim;
  *shape = src ? src->shape : input >= 0 ? g->in_shape[input] : g->out_shape;
}

/* Step i through its plan into `into` (C-contiguous). */
static ein_status run_step(run *r, int i, void *into) {
  const ein_grad *g = r->g;
  const ein_grad_step *s = &g->prog.steps[i];
  DLTensor *ts;
  const DLTensor **tp;
  if (!ein_grad_step_tensors(r->me->ctx, s->noperands, i, &ts, &tp))
    return EIN_ERR_NO_MEMORY;
  for (int k = 0; k < s->noperands; k++) {
    int ndim;
    const int64_t *shape;
    value_shape(g, s->operands[k], &ndim, &shape);
    ts[k] = at(r, value(r, s->operands[k]), ndim, shape);
    tp[k] = &ts[k];
  }
  DLTensor out = at(r, into, s->ndim, s->shape);
  const ein_plan *plan = g->plans[i] ? g->plans[i] : g->maps[i];
  ein_status st = run_plan(r, plan, tp, s->noperands, &out);
  ein_free(ts);
  ein_free((void *)tp);
  return st;
}

/* Every step; the last into dinput when it is C-contiguous, else into a
 * temporary copied into dinput's strides. */
static ein_status run_steps(run *r, DLTensor *dinput) {
  const ein_grad *g = r->g;
  int last = g->prog.nsteps - 1;
  bool direct = compact(dinput);
  for (int i = 0; i <= last; i++) {
    const ein_grad_step *s = &g->prog.steps[i];
    r->steps[i] = i == last && direct
                      ? (char *)dinput->data + dinput->byte_offset
                      : scratch(r, count(s->ndim, s->shape));
    if (!r->steps[i]) return r->me->err.pub.status;
    ein_status st = run_step(r, i, r->steps[i]);
    if (st) return st;
  }
  if (direct || count(dinput->ndim, dinput->shape) == 0) return EIN_OK;
  const ein_grad_step *s = &g->prog.steps[last];
  DLTensor res = at(r, r->steps[last], s->ndim, s->shape);
  return copy(r, &res, dinput, false);
}

static bool same_shape(const DLTensor *t, int ndim, const int64_t *shape) {
  if (t->ndim != ndim) return false;
  for (int d = 0; d < ndim; d++)
    if (t->shape[d] != shape[d]) return false;
  return true;
}

/* A tensor the program reads or writes: present (when required), on the
 * gradient's backend and device, of its dtype and the expected shape. */
static ein_status check_one(ein_thread_rec *me, const ein_grad *g,
                            const DLTensor *t, const char *what, int index,
                            int ndim, const int64_t *shape) {
  char name[48];
  if (index >= 0) snprintf(name, sizeof name, "%s %d", what, index);
  else snprintf(name, sizeof name, "%s", what);
  if (!t) return ein_fail_argument(&me->err, "%s is NULL", name);
  if (!g->backend->accepts(t->device.device_type) ||
      t->device.device_id != g->device)
    return ein_fail_device(&me->err,
                           "%s is on DLPack device type %d id %d; the "
                           "gradient was made for %s device %d (%s)",
                           name, (int)t->device.device_type,
                           (int)t->device.device_id, g->backend->name,
                           g->device, g->backend->memory_name);
  ein_dtype dt;
  if (!ein_dtype_from_dl(t->dtype, &dt) || dt != g->dtype)
    return ein_fail_dtype(&me->err, "%s is not %s, the gradient's dtype",
                          name, ein_dtype_name(g->dtype));
  if (!same_shape(t, ndim, shape))
    return ein_fail_shape(&me->err, "%s does not have the shape the "
                          "gradient was made for",
                          name);
  if (!t->data && count(ndim, shape) > 0)
    return ein_fail_argument(&me->err, "%s has no data", name);
  return EIN_OK;
}

/* dinput gets each element written once, and reads nothing it writes. */
static ein_status check_dinput_alone(ein_thread_rec *me,
                                     const DLTensor *const *inputs, int n,
                                     const DLTensor *output,
                                     const DLTensor *dout,
                                     const DLTensor *dinput) {
  if (count(dinput->ndim, dinput->shape) == 0) return EIN_OK;
  if (ein_tensor_self_overlapping(dinput))
    return ein_fail_shape(&me->err, "dinput's strides make two elements "
                          "share an address; einc writes every element of "
                          "the gradient once");
  for (int i = -2; i < n; i++) {
    const DLTensor *t = i == -2 ? dout : i == -1 ? output : inputs[i];
    if (!t || !ein_tensors_overlap(t, dinput)) continue;
    char name[32];
    if (i >= 0) snprintf(name, sizeof name, "input %d", i);
    else snprintf(name, sizeof name, "%s", i == -2 ? "dout" : "the output");
    return ein_fail_argument(&me->err, "dinput overlaps %s in memory; the "
                             "gradient is not computed in place",
                             name);
  }
  return EIN_OK;
}

static ein_status check_all(ein_thread_rec *me, const ein_grad *g,
                            const DLTensor *const *inputs, int n,
                            const DLTensor *output, const DLTensor *dout,
                            const DLTensor *dinput) {
  if (n != g->ninputs || !inputs)
    return ein_fail(&me->err, EIN_ERR_OPERAND_COUNT,
                    "the gradient takes %d inputs but %d were given",
                    g->ninputs, inputs ? n : 0);
  ein_status st = EIN_OK;
  for (int i = 0; i < n && !st; i++)
    st = check_one(me, g, inputs[i], "input", i, g->in_ndim[i],
                   g->in_shape[i]);
  if (!st && (output || g->prog.needs_output))
    st = check_one(me, g, output, "the output", -1, g->out_ndim,
                   g->out_shape);
  /* A JVP's seed is input wrt's tangent and its result the output's. */
  int seed_ndim = g->jvp ? g->in_ndim[g->wrt] : g->out_ndim;
  const int64_t *seed = g->jvp ? g->in_shape[g->wrt] : g->out_shape;
  int res_ndim = g->jvp ? g->out_ndim : g->in_ndim[g->wrt];
  const int64_t *res = g->jvp ? g->out_shape : g->in_shape[g->wrt];
  if (!st) st = check_one(me, g, dout, "dout", -1, seed_ndim, seed);
  if (!st) st = check_one(me, g, dinput, "dinput", -1, res_ndim, res);
  return st ? st : check_dinput_alone(me, inputs, n, output, dout, dinput);
}

static void run_free(run *r) {
  for (int i = 0; i < r->nowned; i++)
    ein_backend_temp_free(r->be, r->owned[i]);
  ein_free(r->owned);
  ein_free(r->steps);
  ein_free(r->in);
}

/* Points the run at each value's C-contiguous data (copies where not). */
static ein_status gather(run *r, const DLTensor *const *inputs,
                         const DLTensor *output, const DLTensor *dout) {
  bool conj = r->g->conjugates;
  size_t n = (size_t)r->g->ninputs, nsteps = (size_t)r->g->prog.nsteps;
  r->cap = (int)(n + 2 + nsteps);
  r->in = ein_calloc(n + 1, sizeof *r->in);
  r->owned = ein_calloc((size_t)r->cap, sizeof *r->owned);
  r->steps = ein_calloc(nsteps, sizeof *r->steps);
  if (!r->in || !r->owned || !r->steps)
    return ein_fail_memory(&r->me->err, "out of memory for the gradient's "
                           "operands");
  ein_status st = EIN_OK;
  for (int i = 0; i < r->g->ninputs && !st; i++)
    st = contiguous(r, inputs[i], conj, &r->in[i]);
  if (!st && output) st = contiguous(r, output, conj, &r->out);
  if (!st) st = contiguous(r, dout, false, &r->dout);
  return st;
}

ein_status ein_grad_execute(ein_ctx *ctx, const ein_grad *grad,
                            const DLTensor *const *inputs, int ninputs,
                            const DLTensor *output, const DLTensor *dout,
                            DLTensor *dinput) {
  if (!ctx) return EIN_ERR_INVALID_ARGUMENT;
  ein_thread_rec *me = ein_ctx_enter(ctx);
  if (!me) return EIN_ERR_NO_MEMORY;
  if (!grad) return ein_fail_argument(&me->err, "the gradient is NULL");
  ein_status st = check_all(me, grad, inputs, ninputs, output, dout, dinput);
  if (st) return st;
  run r = {.me = me, .g = grad, .esz = ein_dtype_size(grad->dtype)};
  r.be = ein_ctx_backend(me, grad->backend->kind, grad->device);
  if (!r.be) return me->err.pub.status;
  st = gather(&r, inputs, output, dout);
  if (!st) st = run_steps(&r, dinput);
  run_free(&r);
  return st;
}
