/*
 * fp8_eval.c - ein_eval with float8 inputs (docs/design.md, "fp8 dtypes").
 *
 * Each input is decoded once, times its scale, into a C-contiguous f32
 * tensor in the backend's memory; the expression runs on those through
 * the plain path as any f32 expression (its plan cached as any other;
 * spread over devices when the call asks for it); the f32
 * result is rounded once into the caller's f32, bf16 or f16 output. The
 * planner never sees fp8. On the CPU the decode and the rounding are host
 * loops over the tensors themselves; on a device (the emulated device,
 * CUDA) each is a plan of one LOOP step made here, which the backend runs
 * as a generated map kernel (codegen.c loads fp8 with the preludes'
 * ein_e4m3f/ein_e5m2f), the scale a one-element f32 device buffer read
 * with stride 0. Both give f32(decoded) x f32(scale), rounded once in
 * f32, so every backend decodes to the same bits.
 *
 * On a device of sm_89 or later, an expression whose f32 plan is one GEMM
 * of the two inputs runs instead as the FP8 GEMM plan (fp8_gemm.h): the
 * fp8 tensors go to cublasLtMatmul as they are (or copied into its
 * layout, still fp8), the scales to its scale pointers, the result into
 * the output's own dtype.
 */
#include <math.h>
#include <string.h>

#include "alloc.h"
#include "backend.h"
#include "dtype.h"
#include "fp8.h"
#include "fp8_eval.h"
#include "fp8_gemm.h"
#include "half.h"
#include "plain_eval.h"
#include "spread.h"
#include "tensors.h"

static ein_dtype dtype_of(const DLTensor *t) {
  ein_dtype dt = EIN_DT_F32;
  (void)ein_dtype_from_dl(t->dtype, &dt); /* checked by ein_eval */
  return dt;
}

bool ein_fp8_call(const DLTensor *const *inputs, int n,
                  const ein_call_args *call) {
  if (call->scales || call->nscales) return true;
  for (int i = 0; i < n; i++)
    if (ein_dtype_is_fp8(dtype_of(inputs[i]))) return true;
  return false;
}

/* Every input fp8, the output f32/bf16/f16, one finite scale per input. */
static ein_status check_call(ein_thread_rec *me, const DLTensor *const *in,
                             int n, const DLTensor *out,
                             const ein_call_args *o) {
  for (int i = 0; i < n; i++)
    if (!ein_dtype_is_fp8(dtype_of(in[i])))
      return ein_fail(&me->err, EIN_ERR_DTYPE,
                  o->scales && n > 0 && !ein_dtype_is_fp8(dtype_of(in[0]))
                      ? "scales are given but input %d is %s: scales apply "
                        "to fp8 inputs (float8_e4m3fn, float8_e5m2) only"
                      : "input %d is %s but another input is fp8: an fp8 "
                        "evaluation takes fp8 inputs only",
                  i + 1, ein_dtype_name(dtype_of(in[i])));
  ein_dtype odt = dtype_of(out);
  if (odt != EIN_DT_F32 && odt != EIN_DT_BF16 && odt != EIN_DT_F16)
    return ein_fail(&me->err, EIN_ERR_DTYPE,
                "the output is %s; fp8 inputs give an f32, bf16 or f16 "
                "output (accumulated in f32)",
                ein_dtype_name(odt));
  if (o->nscales < 0 || (o->nscales > 0 && !o->scales) ||
      (o->scales && o->nscales != n))
    return ein_fail(&me->err, EIN_ERR_INVALID_ARGUMENT,
                "%d scales for %d inputs; give one scale per input (or "
                "none: all 1)",
                o->scales ? o->nscales : 0, n);
  for (int i = 0; o->scales && i < n; i++)
    if (!isfinite(o->scales[i]))
      return ein_fail(&me->err, EIN_ERR_INVALID_ARGUMENT,
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
    table[b] = (float)ein_fp8_decode(f, (uint8_t)b) * (float)scale;
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

/* Where the f32 tensors live. */
typedef struct place {
  ein_thread_rec *me;
  ein_backend_kind kind; /* CPU: host loops; else kernels */
  int device;
  const ein_backend_entry *backend; /* kind's */
  int devices;                      /* the call's (spread.h) */
} place;

static ein_status place_alloc(const place *p, size_t bytes, void **ptr) {
  *ptr = NULL;
  if (p->kind == EIN_BACKEND_CPU) {
    *ptr = ein_malloc(bytes ? bytes : 1);
    return *ptr ? EIN_OK
                : ein_fail(&p->me->err, EIN_ERR_NO_MEMORY,
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

/* A plan of one LOOP step over a tensor's dims, for a device backend:
 * dst = src0 [* src1], src1 (the scale) read with stride 0 everywhere. */
typedef struct mini_plan {
  ein_plan_ir ir;
  ein_plan_buffer buf[3];
  ein_step step;
  ein_loop_axis axes[EIN_MAX_DIMS];
} mini_plan;

/* dst (dst_dt, strides dst_st) = src0 (s0_dt, strides s0_st) [x scale]
 * over t's shape; strides in elements, NULL: compact. */
static void mini_plan_make(mini_plan *m, const DLTensor *t, ein_dtype dst_dt,
                           const DLTensor *dst_layout, ein_dtype s0_dt,
                           const DLTensor *s0_layout, bool scaled) {
  memset(m, 0, sizeof *m);
  int nsrc = scaled ? 2 : 1;
  for (int b = 0; b < nsrc; b++)
    m->buf[b] = (ein_plan_buffer){.kind = EIN_BUF_INPUT, .input = b,
                                  .dtype = b ? EIN_DT_F32 : s0_dt};
  m->buf[nsrc] = (ein_plan_buffer){.kind = EIN_BUF_OUTPUT, .dtype = dst_dt};
  ein_step *s = &m->step;
  s->kind = EIN_STEP_LOOP;
  s->role = EIN_ROLE_CONVERT;
  s->nsrc = nsrc;
  s->dst = (ein_ref){nsrc, 0};
  s->src[0] = (ein_ref){0, 0};
  s->src[1] = (ein_ref){scaled ? 1 : 0, 0};
  s->dst_dtype = dst_dt;
  s->src_dtype[0] = s0_dt;
  s->src_dtype[1] = EIN_DT_F32;
  s->alpha = 1;
  s->op = EIN_REDUCE_SUM;
  s->acc_dtype = EIN_DT_F32;
  s->operand[0] = s->operand[1] = s->result = -1;
  s->naxes = t->ndim;
  s->axes = m->axes;
  for (int d = 0; d < t->ndim; d++)
    m->axes[d] = (ein_loop_axis){-1, t->shape[d],
                                 {ein_tensor_stride(dst_layout, d),
                                  ein_tensor_stride(s0_layout, d), 0}};
  m->ir.dtype = dst_dt;
  m->ir.ninputs = nsrc;
  m->ir.nbuffers = nsrc + 1;
  m->ir.buffers = m->buf;
  m->ir.nsteps = 1;
  m->ir.steps = s;
}

/* Runs a plan made here on p's device: its program prepared (kernels
 * generated, compiled or found in the kernel cache) and run. */
static ein_status device_plan_run(const place *p, const ein_plan_ir *ir,
                                  char *const *inputs, char *dst) {
  ein_backend *be = ein_ctx_backend(p->me, p->kind, p->device);
  if (!be) return p->me->err.pub.status;
  void *program = NULL;
  ein_status st = be->entry->prepare(ir, &program, &p->me->err);
  if (!st) st = be->run(be, ir, program, inputs, dst, NULL, &p->me->err);
  if (program) be->entry->program_free(program);
  return st;
}

static ein_status mini_plan_run(const place *p, const mini_plan *m,
                                char *src0, char *scale, char *dst) {
  char *inputs[2] = {src0, scale};
  return device_plan_run(p, &m->ir, inputs, dst);
}

/* The device path's decode: f32 (compact) = t x scale, as a kernel. */
static ein_status decode_on_device(const place *p, const DLTensor *t,
                                   double scale, DLTensor *f32) {
  float s = (float)scale;
  void *sbuf = NULL;
  ein_status st = place_alloc(p, sizeof s, &sbuf);
  if (!st)
    st = ein_device_copy(p->me->ctx, p->kind, p->device, sbuf, &s, sizeof s,
                         EIN_COPY_HOST_TO_DEVICE);
  mini_plan m;
  mini_plan_make(&m, t, EIN_DT_F32, f32, dtype_of(t), t, true);
  if (!st)
    st = mini_plan_run(p, &m, (char *)t->data + t->byte_offset, sbuf,
                       f32->data);
  place_free(p, sbuf);
  return st;
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
  size_t bytes = (size_t)numel_of(t) * sizeof(float);
  ein_status st = place_alloc(p, bytes, &f32->data);
  if (st || numel_of(t) == 0) return st;
  if (p->kind != EIN_BACKEND_CPU) return decode_on_device(p, t, scale, f32);
  decode(t, (const char *)t->data + t->byte_offset, scale, f32->data);
  return EIN_OK;
}

/* Rounds the f32 result (in p's memory, C-contiguous) into out. */
static ein_status store_output(const place *p, const DLTensor *res,
                               DLTensor *out) {
  char *first = (char *)out->data + out->byte_offset;
  if (numel_of(out) == 0) return EIN_OK;
  if (p->kind == EIN_BACKEND_CPU) {
    round_into(res->data, out, first);
    return EIN_OK;
  }
  mini_plan m; /* a kernel writes out's elements, and nothing between */
  mini_plan_make(&m, out, dtype_of(out), out, EIN_DT_F32, res, false);
  return mini_plan_run(p, &m, res->data, NULL, first);
}

/* The f32 expression on the decoded inputs: the plain path, or spread
 * over the call's devices. */
static ein_status run_f32(const place *p, const char *expr,
                          const DLTensor *const *f32, int n, DLTensor *out,
                          const ein_options *o) {
  return p->devices > 1 ? ein_spread_eval(p->me, expr, f32, n, out, o,
                                          p->devices, p->backend, p->device)
                        : ein_plain_eval(p->me, expr, f32, n, out, o,
                                         p->backend, p->device);
}

/* The evaluation of the decoded inputs, into out itself when it is f32,
 * else into an f32 temporary rounded into it. */
static ein_status eval_f32(const place *p, const char *expr,
                           const DLTensor *const *f32, int n, DLTensor *out,
                           const ein_options *o) {
  if (dtype_of(out) == EIN_DT_F32) return run_f32(p, expr, f32, n, out, o);
  DLTensor res = *out;
  res.dtype = (DLDataType){kDLFloat, 32, 1};
  res.strides = NULL;
  res.byte_offset = 0;
  ein_status st =
      place_alloc(p, (size_t)numel_of(out) * sizeof(float), &res.data);
  if (!st) st = run_f32(p, expr, f32, n, &res, o);
  if (!st) st = store_output(p, &res, out);
  place_free(p, res.data);
  return st;
}

/* ------------------------------------------------------ the FP8 GEMM */

static char *first_of(const DLTensor *t) {
  return (char *)t->data + t->byte_offset;
}

/* Whether the f32 plan may be made for out: the expression's shape, no
 * element written twice, no byte shared with an input. Otherwise the
 * decode path runs, and the plain path reports what is wrong. */
static bool output_usable(ein_binding *b, const DLTensor *const *in,
                          const DLTensor *out) {
  int ndim = ein_binding_output_ndim(b);
  const int64_t *shape = ein_binding_output_shape(b);
  bool ok = out->ndim == ndim && !ein_tensor_self_overlapping(out);
  for (int d = 0; ok && d < ndim; d++) ok = out->shape[d] == shape[d];
  for (int i = 0; ok && i < 2; i++) ok = !ein_tensors_overlap(in[i], out);
  return ok;
}

/* The f32 plan of the decoded problem, made with the fp8 tensors' own
 * strides (NULL when the output is not usable). */
static ein_status plan_f32(const place *p, const char *expr,
                           const DLTensor *const *in, const DLTensor *out,
                           const ein_options *o, ein_plan_ir **ir) {
  *ir = NULL;
  DLTensor f[2];
  const DLTensor *fp[2];
  ein_tensor_desc d[2];
  for (int i = 0; i < 2; i++) {
    f[i] = *in[i];
    f[i].dtype = (DLDataType){kDLFloat, 32, 1};
    fp[i] = &f[i];
    d[i] = (ein_tensor_desc){EIN_DT_F32, in[i]->ndim, in[i]->shape,
                             in[i]->strides};
  }
  ein_options fo = *o;
  fo.scales = NULL;
  fo.nscales = 0;
  ein_binding *b;
  ein_status st = ein_bind(p->me->ctx, expr, fp, 2, &fo, &b);
  if (st || !output_usable(b, in, out)) {
    if (!st) ein_binding_destroy(b);
    return st;
  }
  ein_tensor_desc od = {EIN_DT_F32, out->ndim, out->shape, out->strides};
  ein_plan_limits limits = {.memory_limit = o->memory_limit, .path = o->path,
                            .slice_axes = o->slice_axes,
                            .plan_time = o->plan_time, .seed = o->seed,
                            .objective = (int)o->objective};
  st = ein_plan_build(ein_binding_problem(b), d, &od,
                      ein_ctx_caps(p->me->ctx, ein_backend_find(p->kind)),
                      &limits, &p->me->err, ir);
  ein_binding_destroy(b);
  return st;
}

/* The FP8 GEMM plan of the call (fp8_gemm.h), or NULL. */
static ein_status plan_fp8(const place *p, const char *expr,
                           const DLTensor *const *in, const DLTensor *out,
                           const ein_options *o, ein_plan_ir **fp8) {
  *fp8 = NULL;
  ein_plan_ir *f32;
  ein_status st = plan_f32(p, expr, in, out, o, &f32);
  if (st || !f32) return st;
  const ein_dtype dt[2] = {dtype_of(in[0]), dtype_of(in[1])};
  const bool aligned[3] = {(uintptr_t)first_of(in[0]) % 16 == 0,
                           (uintptr_t)first_of(in[1]) % 16 == 0,
                           (uintptr_t)first_of(out) % 16 == 0};
  st = ein_fp8_gemm_plan(f32, dt, dtype_of(out), aligned, &p->me->err, fp8);
  ein_plan_ir_destroy(f32);
  return st;
}

/* Runs the FP8 GEMM plan: inputs 2 and 3 are the scales, as f32 in one
 * device buffer. */
static ein_status run_fp8(const place *p, const ein_plan_ir *ir,
                          const DLTensor *const *in, DLTensor *out,
                          const double *scales) {
  float s[2] = {(float)(scales ? scales[0] : 1.0),
                (float)(scales ? scales[1] : 1.0)};
  void *sbuf = NULL;
  ein_status st = place_alloc(p, sizeof s, &sbuf);
  if (!st)
    st = ein_device_copy(p->me->ctx, p->kind, p->device, sbuf, s, sizeof s,
                         EIN_COPY_HOST_TO_DEVICE);
  char *inputs[4] = {first_of(in[0]), first_of(in[1]), sbuf,
                     (char *)sbuf + sizeof(float)};
  if (!st) st = device_plan_run(p, ir, inputs, first_of(out));
  place_free(p, sbuf);
  return st;
}

/* The FP8 GEMM path on a device: taken (*done) when the device runs FP8
 * GEMMs (sm_89 or later; older GPUs take the decode path, which runs
 * anywhere) and the f32 plan is one GEMM of the two inputs, not both
 * e5m2 (fp8_gemm.h). */
static ein_status fp8_gemm_eval(const place *p, const char *expr,
                                const DLTensor *const *in, int n,
                                DLTensor *out, const ein_options *o,
                                const double *scales, bool *done) {
  *done = false;
  if (n != 2) return EIN_OK;
  ein_backend *be = ein_ctx_backend(p->me, p->kind, p->device);
  if (!be) return p->me->err.pub.status;
  if (be->sm < EIN_FP8_GEMM_MIN_SM) return EIN_OK;
  ein_plan_ir *ir;
  ein_status st = plan_fp8(p, expr, in, out, o, &ir);
  if (st || !ir) return st;
  st = run_fp8(p, ir, in, out, scales);
  ein_plan_ir_destroy(ir);
  *done = true;
  return st;
}

ein_status ein_fp8_eval(ein_thread_rec *me, const char *expr,
                        const DLTensor *const *inputs, int n,
                        DLTensor *output, const ein_options *o,
                        const ein_call_args *call,
                        const ein_backend_entry *backend, int device) {
  ein_status st = check_call(me, inputs, n, output, call);
  if (st) return st;
  const place p = {me, backend->kind, device, backend, call->devices};
  if (p.kind != EIN_BACKEND_CPU && numel_of(output) > 0) {
    bool done;
    st = fp8_gemm_eval(&p, expr, inputs, n, output, o, call->scales, &done);
    if (st || done) return st;
  }
  DLTensor *f32 = ein_calloc((size_t)n + 1, sizeof *f32);
  const DLTensor **ptrs = ein_calloc((size_t)n + 1, sizeof *ptrs);
  if (!f32 || !ptrs) {
    ein_free(f32), ein_free(ptrs);
    return ein_fail(&me->err, EIN_ERR_NO_MEMORY, "out of memory for fp8 operands");
  }
  int made = 0;
  for (; made < n && !st; made++) {
    st = decode_input(&p, inputs[made],
                      call->scales ? call->scales[made] : 1.0,
                      &f32[made]);
    ptrs[made] = &f32[made];
  }
  if (!st) st = eval_f32(&p, expr, ptrs, n, output, o);
  for (int i = 0; i < made; i++) place_free(&p, f32[i].data);
  ein_free(f32), ein_free(ptrs);
  return st;
}
