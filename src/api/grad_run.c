/*
 * grad_run.c - ein_grad_execute: runs a gradient program on host memory.
 *
 * Every value a step reads is C-contiguous: dout, the inputs and the
 * output are used in place when they already are (and need no
 * conjugation), else copied; each step's result is a fresh C-contiguous
 * temporary. EINSUM steps run through their plans; elementwise steps are
 * plain loops, in double (f16 and bf16 values are read through f32 and
 * rounded once when stored). The last result is copied into dinput with
 * dinput's strides. This is a reference for host memory: frameworks run
 * the same steps on their own devices.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "ctx_internal.h"
#include "grad_internal.h"
#include "half.h"
#include "tensors.h"

typedef struct cval {
  double re, im;
} cval;

static cval load(ein_dtype dt, const void *p, int64_t i) {
  switch (dt) {
  case EIN_DT_F64: return (cval){((const double *)p)[i], 0};
  case EIN_DT_F16: return (cval){ein_f16_to_f32(((const uint16_t *)p)[i]), 0};
  case EIN_DT_BF16:
    return (cval){ein_bf16_to_f32(((const uint16_t *)p)[i]), 0};
  case EIN_DT_C64:
    return (cval){((const float *)p)[2 * i], ((const float *)p)[2 * i + 1]};
  case EIN_DT_C128:
    return (cval){((const double *)p)[2 * i], ((const double *)p)[2 * i + 1]};
  default: return (cval){((const float *)p)[i], 0};
  }
}

static void store(ein_dtype dt, void *p, int64_t i, cval v) {
  switch (dt) {
  case EIN_DT_F64: ((double *)p)[i] = v.re; break;
  case EIN_DT_F16: ((uint16_t *)p)[i] = ein_f32_to_f16((float)v.re); break;
  case EIN_DT_BF16: ((uint16_t *)p)[i] = ein_f32_to_bf16((float)v.re); break;
  case EIN_DT_C64:
    ((float *)p)[2 * i] = (float)v.re;
    ((float *)p)[2 * i + 1] = (float)v.im;
    break;
  case EIN_DT_C128:
    ((double *)p)[2 * i] = v.re;
    ((double *)p)[2 * i + 1] = v.im;
    break;
  default: ((float *)p)[i] = (float)v.re;
  }
}

static cval cmul(cval a, cval b) {
  return (cval){a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
}

static cval cdiv(cval a, cval b) {
  if (b.im == 0) return (cval){a.re / b.re, a.im / b.re};
  double den = b.re * b.re + b.im * b.im;
  return (cval){(a.re * b.re + a.im * b.im) / den,
                (a.im * b.re - a.re * b.im) / den};
}

static bool is_zero(cval a) { return a.re == 0 && a.im == 0; }

/* One element of an elementwise step from its operands' elements. */
static cval apply(const ein_grad_step *s, const cval *v) {
  static const cval zero = {0, 0}, one = {1, 0};
  switch (s->op) {
  case EIN_GRAD_EQUAL:
    return v[0].re == v[1].re && v[0].im == v[1].im ? one : zero;
  case EIN_GRAD_MUL: return cmul(v[0], v[1]);
  case EIN_GRAD_DIV: return cdiv(v[0], v[1]);
  case EIN_GRAD_SCALE: return (cval){v[0].re * s->scale, v[0].im * s->scale};
  case EIN_GRAD_IS_ZERO: return is_zero(v[0]) ? one : zero;
  case EIN_GRAD_ZERO_TO_ONE: return is_zero(v[0]) ? one : v[0];
  case EIN_GRAD_PROD_SELECT: /* (g, p, x, z) */
    if (v[3].re == 0) return cdiv(cmul(v[0], v[1]), v[2]);
    return v[3].re == 1 && is_zero(v[2]) ? cmul(v[0], v[1]) : zero;
  default: return zero;
  }
}

static int64_t count(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= shape[d];
  return n;
}

static void run_elementwise(const ein_grad_step *s, ein_dtype dt,
                            void *const *ops, void *res) {
  int64_t n = count(s->ndim, s->shape);
  for (int64_t i = 0; i < n; i++) {
    cval v[4];
    for (int k = 0; k < s->noperands && k < 4; k++) v[k] = load(dt, ops[k], i);
    store(dt, res, i, apply(s, v));
  }
}

/* Copies ndim-dimensional elements between strided places (strides in
 * elements; NULL: C-contiguous). */
static void copy_strided(int ndim, const int64_t *shape, size_t esz,
                         char *dst, const int64_t *dst_st, const char *src,
                         const int64_t *src_st) {
  int64_t n = count(ndim, shape), idx[EIN_MAX_DIMS] = {0};
  int64_t cd[EIN_MAX_DIMS], cs[EIN_MAX_DIMS], c = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    cd[d] = dst_st ? dst_st[d] : c;
    cs[d] = src_st ? src_st[d] : c;
    c *= shape[d];
  }
  int64_t od = 0, os = 0;
  for (int64_t i = 0; i < n; i++) {
    memcpy(dst + od * (int64_t)esz, src + os * (int64_t)esz, esz);
    for (int d = ndim - 1; d >= 0; d--) {
      od += cd[d];
      os += cs[d];
      if (++idx[d] < shape[d]) break;
      od -= cd[d] * shape[d];
      os -= cs[d] * shape[d];
      idx[d] = 0;
    }
  }
}

/* SCATTER_DIAG: zeros (the buffer comes zeroed), operand 0 written into
 * the view of the step's view strides. */
static void run_scatter(const ein_grad_step *s, const ein_grad_step *from,
                        size_t esz, const void *op, void *res) {
  copy_strided(from->ndim, from->shape, esz, res, s->view_strides, op, NULL);
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

static void conjugate(ein_dtype dt, void *p, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    if (dt == EIN_DT_C64) ((float *)p)[2 * i + 1] *= -1;
    else ((double *)p)[2 * i + 1] *= -1;
  }
}

/* What one execution holds: each value's C-contiguous data and the
 * buffers it allocated. */
typedef struct run {
  const ein_grad *g;
  size_t esz;
  void **in, *out, *dout; /* in: one per input */
  void **steps;
  void **owned; /* copies: at most one per input, the output and dout */
  int nowned;
} run;

static void *alloc_zeroed(int64_t elems, size_t esz) {
  return ein_calloc((size_t)(elems > 0 ? elems : 1), esz);
}

/* t's data as a C-contiguous array, conjugated when asked: t's own
 * memory when possible, else a copy the run owns. */
static void *contiguous(run *r, const DLTensor *t, bool conj) {
  char *data = (char *)t->data + t->byte_offset;
  if (compact(t) && !conj) return data;
  int64_t n = count(t->ndim, t->shape);
  void *copy = alloc_zeroed(n, r->esz);
  if (!copy) return NULL;
  r->owned[r->nowned++] = copy;
  if (n > 0)
    copy_strided(t->ndim, t->shape, r->esz, copy, NULL, data, t->strides);
  if (conj) conjugate(r->g->dtype, copy, n);
  return copy;
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

/* EINSUM step i through its plan, on C-contiguous host tensors. */
static ein_status run_einsum(ein_ctx *ctx, const run *r, int i) {
  const ein_grad *g = r->g;
  const ein_grad_step *s = &g->prog.steps[i];
  DLTensor *ts, out;
  const DLTensor **tp;
  if (!ein_grad_step_tensors(ctx, s->noperands, i, &ts, &tp))
    return EIN_ERR_NO_MEMORY;
  DLDataType dl = ein_dtype_to_dl(g->dtype);
  for (int k = 0; k < s->noperands; k++) {
    ein_grad_value v = s->operands[k];
    const ein_grad_step *src =
        v.kind == EIN_GRAD_VALUE_STEP ? &g->prog.steps[v.index] : NULL;
    int input = v.kind == EIN_GRAD_VALUE_INPUT     ? v.index
                : v.kind == EIN_GRAD_VALUE_TANGENT ? g->wrt
                                                   : -1;
    int ndim = src          ? src->ndim
               : input >= 0 ? g->in_ndim[input]
                            : g->out_ndim;
    const int64_t *shape = src          ? src->shape
                           : input >= 0 ? g->in_shape[input]
                                        : g->out_shape;
    ts[k] = (DLTensor){.data = value(r, v), .device = {kDLCPU, 0},
                       .ndim = ndim, .dtype = dl, .shape = (int64_t *)shape};
    tp[k] = &ts[k];
  }
  out = (DLTensor){.data = r->steps[i], .device = {kDLCPU, 0},
                   .ndim = s->ndim, .dtype = dl, .shape = (int64_t *)s->shape};
  ein_status st = ein_plan_execute(ctx, g->plans[i], tp, s->noperands, &out);
  ein_free(ts);
  ein_free((void *)tp);
  return st;
}

static ein_status run_steps(ein_ctx *ctx, ein_thread_rec *me, run *r) {
  const ein_grad *g = r->g;
  for (int i = 0; i < g->prog.nsteps; i++) {
    const ein_grad_step *s = &g->prog.steps[i];
    r->steps[i] = alloc_zeroed(count(s->ndim, s->shape), r->esz);
    if (!r->steps[i])
      return ein_fail_memory(&me->err, "out of memory for gradient step %d",
                             i);
    void *ops[4] = {NULL, NULL, NULL, NULL};
    for (int k = 0; k < s->noperands && k < 4; k++)
      ops[k] = value(r, s->operands[k]);
    if (s->op == EIN_GRAD_EINSUM) {
      ein_status st = run_einsum(ctx, r, i);
      if (st) return st;
    } else if (s->op == EIN_GRAD_SCATTER_DIAG) {
      run_scatter(s, &g->prog.steps[s->operands[0].index], r->esz, ops[0],
                  r->steps[i]);
    } else {
      run_elementwise(s, g->dtype, ops, r->steps[i]);
    }
  }
  return EIN_OK;
}

static bool same_shape(const DLTensor *t, int ndim, const int64_t *shape) {
  if (t->ndim != ndim) return false;
  for (int d = 0; d < ndim; d++)
    if (t->shape[d] != shape[d]) return false;
  return true;
}

/* A tensor the program reads or writes: present (when required), on the
 * host, of the gradient's dtype and the expected shape. */
static ein_status check_one(ein_thread_rec *me, const ein_grad *g,
                            const DLTensor *t, const char *what, int index,
                            int ndim, const int64_t *shape) {
  char name[48];
  if (index >= 0) snprintf(name, sizeof name, "%s %d", what, index);
  else snprintf(name, sizeof name, "%s", what);
  if (!t) return ein_fail_argument(&me->err, "%s is NULL", name);
  if (t->device.device_type != kDLCPU &&
      t->device.device_type != kDLCUDAHost)
    return ein_fail_device(&me->err,
                           "%s is on DLPack device type %d; "
                           "ein_grad_execute runs on host memory only",
                           name, (int)t->device.device_type);
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
  for (int i = 0; r->steps && i < r->g->prog.nsteps; i++)
    ein_free(r->steps[i]);
  ein_free(r->steps);
  for (int i = 0; i < r->nowned; i++) ein_free(r->owned[i]);
  ein_free(r->owned);
  ein_free(r->in);
}

/* Points the run at each value's C-contiguous data. */
static bool gather(run *r, const DLTensor *const *inputs,
                   const DLTensor *output, const DLTensor *dout) {
  bool conj = r->g->conjugates;
  size_t n = (size_t)r->g->ninputs;
  r->in = ein_calloc(n + 1, sizeof *r->in);
  r->owned = ein_calloc(n + 2, sizeof *r->owned);
  if (!r->in || !r->owned) return false;
  for (int i = 0; i < r->g->ninputs; i++)
    if (!(r->in[i] = contiguous(r, inputs[i], conj))) return false;
  if (output && !(r->out = contiguous(r, output, conj))) return false;
  r->dout = contiguous(r, dout, false);
  r->steps = ein_calloc((size_t)r->g->prog.nsteps, sizeof *r->steps);
  return r->dout && r->steps;
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
  run r = {.g = grad, .esz = ein_dtype_size(grad->dtype)};
  if (!gather(&r, inputs, output, dout)) {
    run_free(&r);
    return ein_fail_memory(&me->err, "out of memory copying the gradient's "
                           "operands");
  }
  st = run_steps(ctx, me, &r);
  if (!st) {
    const ein_grad_step *last = &grad->prog.steps[grad->prog.nsteps - 1];
    if (count(last->ndim, last->shape) > 0)
      copy_strided(last->ndim, last->shape, r.esz,
                   (char *)dinput->data + dinput->byte_offset,
                   dinput->strides, r.steps[grad->prog.nsteps - 1], NULL);
  }
  run_free(&r);
  return st;
}
