/*
 * grad.c - gradients through the public API: binds the expression as
 * ein_plan_create would, derives the program (planner/grad.h), plans
 * every step for C-contiguous operands of the inputs' dtype on the
 * inputs' backend and device (EINSUM steps as any expression, the others
 * by planner/grad_plan.c), and describes the program. grad_run.c runs it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "ctx_internal.h"
#include "grad_internal.h"
#include "plain_eval.h"
#include "plan.h"
#include "report.h"
#include "shape_text.h"
#include "tensors.h"

static const ein_options default_options;

/* Every input present, of one floating or complex dtype. */
static ein_status check_grad_inputs(ein_thread_rec *me,
                                    const DLTensor *const *inputs, int n,
                                    ein_reduction r, ein_dtype *dt) {
  if (n < 1 || n > EIN_MAX_OPERANDS || !inputs)
    return ein_fail_argument(&me->err,
                             "ein_grad_create: %d inputs%s; einc takes 1 to "
                             "%d",
                             n, inputs ? "" : " (array NULL)",
                             EIN_MAX_OPERANDS);
  for (int i = 0; i < n; i++) {
    ein_dtype t;
    if (!inputs[i])
      return ein_fail_argument(&me->err, "input %d is NULL", i);
    if (!ein_dtype_from_dl(inputs[i]->dtype, &t))
      return ein_fail_dtype(&me->err, "input %d has a dtype einc does not "
                            "support", i);
    if (i > 0 && t != *dt)
      return ein_fail_dtype(&me->err, "input %d is %s but input 0 is %s; a "
                            "gradient takes inputs of one dtype",
                            i, ein_dtype_name(t), ein_dtype_name(*dt));
    *dt = t;
  }
  if (!ein_dtype_is_float(*dt) && !ein_dtype_is_complex(*dt))
    return ein_fail_dtype(&me->err, "the inputs are %s: integers and bool "
                          "have no gradient (f16, bf16, f32, f64, c64, c128 "
                          "have one)",
                          ein_dtype_name(*dt));
  if (ein_dtype_is_complex(*dt) &&
      (r == EIN_REDUCE_MAX || r == EIN_REDUCE_MIN))
    return ein_fail_dtype(&me->err, "'%s' of %s values is not defined (the "
                          "forward fails too)",
                          ein_reduction_name(r), ein_dtype_name(*dt));
  return EIN_OK;
}

/* The shapes an execute must match, copied from the inputs and the
 * binding. */
static bool keep_shapes(ein_grad *g, const DLTensor *const *inputs,
                        const ein_binding *b) {
  g->in_ndim = ein_arena_alloc(&g->arena, (size_t)g->ninputs, sizeof(int));
  g->in_shape =
      ein_arena_alloc(&g->arena, (size_t)g->ninputs, sizeof(int64_t *));
  if (!g->in_ndim || !g->in_shape) return false;
  for (int i = 0; i < g->ninputs; i++) {
    g->in_ndim[i] = inputs[i]->ndim;
    g->in_shape[i] = ein_arena_alloc(&g->arena, (size_t)inputs[i]->ndim + 1,
                                     sizeof(int64_t));
    if (!g->in_shape[i]) return false;
    if (inputs[i]->ndim)
      memcpy(g->in_shape[i], inputs[i]->shape,
             (size_t)inputs[i]->ndim * sizeof(int64_t));
  }
  g->out_ndim = ein_binding_output_ndim(b);
  memcpy(g->out_shape, ein_binding_output_shape(b),
         (size_t)g->out_ndim * sizeof(int64_t));
  return true;
}

/* The shape of a value a step reads. */
static void value_shape(const ein_grad *g, ein_grad_value v, int *ndim,
                        const int64_t **shape) {
  switch (v.kind) {
  case EIN_GRAD_VALUE_INPUT:
    *ndim = g->in_ndim[v.index];
    *shape = g->in_shape[v.index];
    break;
  case EIN_GRAD_VALUE_STEP:
    *ndim = g->prog.steps[v.index].ndim;
    *shape = g->prog.steps[v.index].shape;
    break;
  case EIN_GRAD_VALUE_TANGENT:
    *ndim = g->in_ndim[g->wrt];
    *shape = g->in_shape[g->wrt];
    break;
  default:
    *ndim = g->out_ndim;
    *shape = g->out_shape;
  }
}

static double numel(int ndim, const int64_t *shape) {
  double n = 1;
  for (int d = 0; d < ndim; d++) n *= (double)shape[d];
  return n;
}

/* Plans EINSUM step i for C-contiguous operands on the inputs' device. */
static ein_status plan_step(ein_ctx *ctx, ein_grad *g, int i,
                            const ein_options *o, DLDevice dev) {
  ein_grad_step *s = &g->prog.steps[i];
  DLTensor *ts;
  const DLTensor **tp;
  if (!ein_grad_step_tensors(ctx, s->noperands, i, &ts, &tp))
    return EIN_ERR_NO_MEMORY;
  for (int k = 0; k < s->noperands; k++) {
    int ndim;
    const int64_t *shape;
    value_shape(g, s->operands[k], &ndim, &shape);
    ts[k] = (DLTensor){.device = dev, .ndim = ndim,
                       .dtype = ein_dtype_to_dl(g->dtype),
                       .shape = (int64_t *)shape};
    tp[k] = &ts[k];
  }
  ein_options so = {.dialect = EIN_DIALECT_EINOPS,
                    .reduction = s->reduction,
                    .lengths = s->lengths,
                    .nlengths = s->nlengths,
                    .backend = o->backend,
                    .allow_tf32 = o->allow_tf32,
                    .memory_limit = o->memory_limit,
                    .plan_time = o->plan_time,
                    .seed = o->seed,
                    .objective = o->objective};
  ein_status st =
      ein_plan_create(ctx, s->expr, tp, s->noperands, NULL, &so, &g->plans[i]);
  ein_free(ts);
  ein_free((void *)tp);
  if (st) return st;
  s->flops = ein_plan_flops(g->plans[i]);
  s->bytes = ein_plan_min_bytes(g->plans[i]);
  return EIN_OK;
}

/* Elementwise steps: one FLOP per element (none for the scatter), every
 * operand read and the result written once. */
static void count_elementwise(const ein_grad *g, ein_grad_step *s) {
  double esz = (double)ein_dtype_size(g->dtype), n = numel(s->ndim, s->shape);
  double read = 0;
  for (int k = 0; k < s->noperands; k++) {
    int ndim;
    const int64_t *shape;
    value_shape(g, s->operands[k], &ndim, &shape);
    read += numel(ndim, shape);
  }
  s->flops = s->op == EIN_GRAD_SCATTER_DIAG ? 0 : n;
  s->bytes = (read + n) * esz;
}

/* Plans elementwise step i (planner/grad_plan.c) for the gradient's
 * backend and device. */
static ein_status plan_map(ein_thread_rec *me, ein_grad *g, int i) {
  const ein_grad_step *s = &g->prog.steps[i];
  int ndim[4];
  const int64_t *shape[4];
  DLTensor ts[4];
  const DLTensor *tp[4];
  DLDevice dev = {g->backend->memory, g->device};
  for (int k = 0; k < s->noperands && k < 4; k++) {
    value_shape(g, s->operands[k], &ndim[k], &shape[k]);
    ts[k] = (DLTensor){.device = dev, .ndim = ndim[k],
                       .dtype = ein_dtype_to_dl(g->dtype),
                       .shape = (int64_t *)shape[k]};
    tp[k] = &ts[k];
  }
  ein_plan_ir *ir;
  ein_status st = ein_plan_grad_map(s, ndim, shape, g->dtype, &me->err, &ir);
  if (st) return st;
  return ein_plain_adopt(me, ir, ein_grad_op_name(s->op), tp, s->noperands,
                         NULL, 0, g->backend, g->device, &g->maps[i]);
}

static ein_status plan_steps(ein_ctx *ctx, ein_grad *g, const ein_options *o,
                             DLDevice dev) {
  size_t n = (size_t)g->prog.nsteps;
  g->plans = ein_arena_alloc(&g->arena, n, sizeof *g->plans);
  g->maps = ein_arena_alloc(&g->arena, n, sizeof *g->maps);
  if (!g->plans || !g->maps) return EIN_ERR_NO_MEMORY;
  memset(g->plans, 0, n * sizeof *g->plans);
  memset(g->maps, 0, n * sizeof *g->maps);
  for (int i = 0; i < g->prog.nsteps; i++) {
    ein_grad_step *s = &g->prog.steps[i];
    ein_status st;
    if (s->op == EIN_GRAD_EINSUM) {
      st = plan_step(ctx, g, i, o, dev);
    } else {
      ein_thread_rec *me = ein_ctx_enter(ctx);
      st = me ? plan_map(me, g, i) : EIN_ERR_NO_MEMORY;
      count_elementwise(g, s);
    }
    if (st) return st;
    g->flops += s->flops;
    g->bytes += s->bytes;
  }
  return EIN_OK;
}

/* Binds, derives and plans into g. */
static ein_status build(ein_ctx *ctx, ein_thread_rec *me, ein_grad *g,
                        const char *expr, const DLTensor *const *inputs,
                        const ein_options *o) {
  ein_binding *b;
  ein_status st = ein_bind(ctx, expr, inputs, g->ninputs, o, &b);
  if (st) return st;
  me = ein_ctx_enter(ctx); /* ein_bind entered too: the record is ours */
  if (!me) {
    ein_binding_destroy(b);
    return EIN_ERR_NO_MEMORY;
  }
  st = (g->jvp ? ein_jvp_derive : ein_grad_derive)(
      ein_binding_problem(b), g->wrt, &g->arena, &me->err, &g->prog);
  if (!st && !keep_shapes(g, inputs, b))
    st = ein_fail_memory(&me->err, "out of memory while deriving a "
                         "gradient");
  ein_binding_destroy(b);
  if (st) return st;
  g->expr = ein_arena_strndup(&g->arena, expr, strlen(expr));
  if (!g->expr)
    return ein_fail_memory(&me->err, "out of memory while deriving a "
                           "gradient");
  st = ein_resolve_backend(me, o, inputs, g->ninputs, NULL, &g->backend,
                           &g->device);
  if (!st) st = plan_steps(ctx, g, o, inputs[0]->device);
  if (st == EIN_ERR_NO_MEMORY && (!g->plans || !g->maps))
    ein_fail_memory(&me->err, "out of memory while planning a gradient");
  return st;
}

/* ein_grad_create and ein_jvp_create: the same checks, binding and
 * planning around the two derivations. */
static ein_status create(ein_ctx *ctx, const char *expr,
                         const DLTensor *const *inputs, int ninputs,
                         const ein_options *options, int wrt, bool jvp,
                         ein_grad **out) {
  if (!ctx) return EIN_ERR_INVALID_ARGUMENT;
  ein_thread_rec *me = ein_ctx_enter(ctx);
  if (!me) return EIN_ERR_NO_MEMORY;
  if (!out || !expr)
    return ein_fail_argument(&me->err, "%s: %s is NULL",
                             jvp ? "ein_jvp_create" : "ein_grad_create",
                             !out ? "the result pointer" : "the expression");
  *out = NULL;
  const ein_options *o = options ? options : &default_options;
  ein_dtype dt = EIN_DT_F32;
  ein_status st = check_grad_inputs(me, inputs, ninputs, o->reduction, &dt);
  if (st) return st;
  ein_grad *g = ein_calloc(1, sizeof *g);
  if (!g) return ein_fail_memory(&me->err, "out of memory");
  ein_arena_init(&g->arena);
  g->ninputs = ninputs;
  g->wrt = wrt;
  g->dtype = dt;
  g->jvp = jvp;
  g->conjugates = !jvp && ein_dtype_is_complex(dt);
  st = build(ctx, me, g, expr, inputs, o);
  if (st) {
    ein_grad_destroy(g);
    return st;
  }
  *out = g;
  return EIN_OK;
}

ein_status ein_grad_create(ein_ctx *ctx, const char *expr,
                           const DLTensor *const *inputs, int ninputs,
                           const ein_options *options, int wrt,
                           ein_grad **out) {
  return create(ctx, expr, inputs, ninputs, options, wrt, false, out);
}

ein_status ein_jvp_create(ein_ctx *ctx, const char *expr,
                          const DLTensor *const *inputs, int ninputs,
                          const ein_options *options, int wrt,
                          ein_grad **out) {
  return create(ctx, expr, inputs, ninputs, options, wrt, true, out);
}

int ein_grad_is_jvp(const ein_grad *grad) { return grad && grad->jvp; }

void ein_grad_destroy(ein_grad *grad) {
  if (!grad) return;
  for (int i = 0; grad->plans && i < grad->prog.nsteps; i++)
    ein_plan_destroy(grad->plans[i]);
  for (int i = 0; grad->maps && i < grad->prog.nsteps; i++)
    ein_plan_destroy(grad->maps[i]);
  ein_arena_destroy(&grad->arena);
  ein_free(grad);
}

int ein_grad_nsteps(const ein_grad *grad) {
  return grad ? grad->prog.nsteps : 0;
}

const ein_grad_step *ein_grad_step_at(const ein_grad *grad, int i) {
  return grad && i >= 0 && i < grad->prog.nsteps ? &grad->prog.steps[i]
                                                 : NULL;
}

const ein_plan *ein_grad_step_plan(const ein_grad *grad, int i) {
  return grad && i >= 0 && i < grad->prog.nsteps ? grad->plans[i] : NULL;
}

int ein_grad_needs_output(const ein_grad *grad) {
  return grad && grad->prog.needs_output;
}

int ein_grad_conjugates(const ein_grad *grad) {
  return grad && grad->conjugates;
}

double ein_grad_flops(const ein_grad *grad) { return grad ? grad->flops : 0; }
double ein_grad_bytes(const ein_grad *grad) { return grad ? grad->bytes : 0; }

/* ------------------------------------------------------------ describe */

static const char *value_kind_name(ein_grad_value_kind k) {
  return k == EIN_GRAD_VALUE_DOUT     ? "dout"
         : k == EIN_GRAD_VALUE_INPUT  ? "input"
         : k == EIN_GRAD_VALUE_OUTPUT ? "output"
         : k == EIN_GRAD_VALUE_TANGENT ? "tangent"
                                      : "step";
}

static void text_step(const ein_grad *g, int i, ein_strbuf *sb) {
  const ein_grad_step *s = &g->prog.steps[i];
  char shape[EIN_SHAPE_TEXT_CAP];
  ein_strbuf_printf(sb, "  step %d  %-12s", i, ein_grad_op_name(s->op));
  for (int k = 0; k < s->noperands; k++) {
    ein_grad_value v = s->operands[k];
    ein_strbuf_printf(sb, "%s%s", k ? ", " : "", value_kind_name(v.kind));
    if (v.kind == EIN_GRAD_VALUE_INPUT || v.kind == EIN_GRAD_VALUE_STEP)
      ein_strbuf_printf(sb, " %d", v.index);
  }
  ein_strbuf_printf(sb, " -> %s   FLOPs %.4g   bytes %.4g\n",
                    ein_format_shape(shape, sizeof shape, s->shape, s->ndim),
                    s->flops, s->bytes);
  if (s->op == EIN_GRAD_EINSUM) {
    ein_strbuf_printf(sb, "          %s", s->expr);
    if (s->reduction != EIN_REDUCE_SUM)
      ein_strbuf_printf(sb, "   (%s)", ein_reduction_name(s->reduction));
    for (int k = 0; k < s->nlengths; k++)
      ein_strbuf_printf(sb, "%s%s=%lld", k ? " " : "   ", s->lengths[k].name,
                        (long long)s->lengths[k].size);
    ein_strbuf_printf(sb, "   path ");
    ein_plan_path_text(ein_plan_ir_of(g->plans[i]), sb);
    ein_strbuf_printf(sb, "\n");
  } else if (s->op == EIN_GRAD_SCALE) {
    ein_strbuf_printf(sb, "          scale %.17g\n", s->scale);
  }
}

static void text_report(const ein_grad *g, ein_strbuf *sb) {
  ein_strbuf_printf(sb,
                    g->jvp ? "jvp of %s: the tangent of input %d (%s)%s%s\n"
                           : "gradient of %s with respect to input %d "
                             "(%s)%s%s\n",
                    g->expr, g->wrt, ein_dtype_name(g->dtype),
                    g->prog.needs_output ? ", reads the output" : "",
                    g->conjugates ? ", forward values conjugated" : "");
  for (int i = 0; i < g->prog.nsteps; i++) text_step(g, i, sb);
  ein_strbuf_printf(sb, "  total FLOPs %.4g   bytes %.4g\n", g->flops,
                    g->bytes);
}

static void json_ints(ein_strbuf *sb, const int64_t *v, int n) {
  ein_strbuf_printf(sb, "[");
  for (int k = 0; k < n; k++)
    ein_strbuf_printf(sb, "%s%lld", k ? "," : "", (long long)v[k]);
  ein_strbuf_printf(sb, "]");
}

static void json_step(const ein_grad *g, int i, ein_strbuf *sb) {
  const ein_grad_step *s = &g->prog.steps[i];
  ein_strbuf_printf(sb, "%s{\"op\":\"%s\",\"expr\":", i ? "," : "",
                    ein_grad_op_name(s->op));
  if (s->expr) ein_strbuf_json_string(sb, s->expr);
  else ein_strbuf_printf(sb, "null");
  ein_strbuf_printf(sb, ",\"reduction\":\"%s\",\"lengths\":{",
                    ein_reduction_name(s->reduction));
  for (int k = 0; k < s->nlengths; k++) {
    ein_strbuf_printf(sb, "%s", k ? "," : "");
    ein_strbuf_json_string(sb, s->lengths[k].name);
    ein_strbuf_printf(sb, ":%lld", (long long)s->lengths[k].size);
  }
  ein_strbuf_printf(sb, "},\"operands\":[");
  for (int k = 0; k < s->noperands; k++)
    ein_strbuf_printf(sb, "%s[\"%s\",%d]", k ? "," : "",
                      value_kind_name(s->operands[k].kind),
                      s->operands[k].index);
  ein_strbuf_printf(sb, "],\"shape\":");
  json_ints(sb, s->shape, s->ndim);
  ein_strbuf_printf(sb, ",\"scale\":%.17g,\"view_strides\":", s->scale);
  json_ints(sb, s->view_strides, s->ndim_view);
  ein_strbuf_printf(sb, ",\"path\":");
  if (g->plans[i]) {
    ein_strbuf path = {0};
    ein_plan_path_text(ein_plan_ir_of(g->plans[i]), &path);
    ein_strbuf_json_string(sb, path.failed ? "" : path.data);
    ein_strbuf_free(&path);
  } else {
    ein_strbuf_printf(sb, "null");
  }
  ein_strbuf_printf(sb, ",\"flops\":%.17g,\"bytes\":%.17g}", s->flops,
                    s->bytes);
}

static void json_report(const ein_grad *g, ein_strbuf *sb) {
  ein_strbuf_printf(sb, "{\"expression\":");
  ein_strbuf_json_string(sb, g->expr);
  ein_strbuf_printf(sb,
                    ",%s\"wrt\":%d,\"dtype\":\"%s\",\"needs_output\":%s,"
                    "\"conjugates\":%s,\"flops\":%.17g,\"bytes\":%.17g,"
                    "\"steps\":[",
                    g->jvp ? "\"jvp\":true," : "", g->wrt,
                    ein_dtype_name(g->dtype),
                    g->prog.needs_output ? "true" : "false",
                    g->conjugates ? "true" : "false", g->flops, g->bytes);
  for (int i = 0; i < g->prog.nsteps; i++) json_step(g, i, sb);
  ein_strbuf_printf(sb, "]}");
}

size_t ein_grad_describe(const ein_grad *grad, ein_describe_format format,
                         char *buf, size_t cap) {
  if (cap > 0 && buf) buf[0] = 0;
  if (!grad) return 0;
  ein_strbuf sb = {0};
  if (format == EIN_DESCRIBE_JSON) json_report(grad, &sb);
  else text_report(grad, &sb);
  return ein_strbuf_deliver(&sb, buf, cap);
}
