/*
 * eval.c - the public entry points that make and run plans: ein_eval,
 * ein_plan_create and the ein_plan_execute family. Each checks the call
 * (tensors.h), chooses the backend and device, and hands the work to one
 * floor below: ein_eval in one ordered fall-through, fp8 inputs or scales
 * to fp8_eval.h, several devices to spread.h, anything else to the plain
 * path (plain_eval.h); the plan calls run on the plain path directly.
 * What shapes a plan (the options the cache key reads) and what one call
 * passes (scales, devices: ein_call_args) part here.
 */
#include <string.h>

#include "fp8_eval.h"
#include "plain_eval.h"
#include "spread.h"
#include "tensors.h"

static const ein_options default_options;

/* The per-call half of the options: fp8 scales and the devices to spread
 * over, part of no plan. */
static ein_call_args call_args(const ein_options *o) {
  return (ein_call_args){o->scales, o->nscales, o->devices};
}

/* What every entry point checks first: the inputs and the output (when
 * given), then the backend, the device and the memory limit (*o: the
 * caller's options, or a copy with EIN_MEMORY_FREE resolved in *local). */
static ein_status check_call(ein_thread_rec *me,
                             const DLTensor *const *inputs, int n,
                             const DLTensor *output, bool needs_data,
                             const ein_options **o, ein_options *local,
                             const ein_backend_entry **backend,
                             int *device) {
  ein_status st = ein_check_inputs(me, inputs, n, needs_data);
  ein_dtype dt;
  if (!st && (output || needs_data)) /* ein_eval's output is not optional */
    st = ein_check_tensor(me, output, -1, needs_data, &dt);
  if (!st)
    st = ein_resolve_backend(me, *o, inputs, n, output, backend, device);
  if (!st) st = ein_resolve_memory_limit(me, *o, *backend, *device, local, o);
  return st;
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
  ein_options local;
  const ein_backend_entry *backend;
  int device;
  ein_status st = check_call(me, inputs, ninputs, output, false, &o, &local,
                             &backend, &device);
  const ein_call_args call = call_args(o);
  if (!st && ein_fp8_call(inputs, ninputs, &call))
    return ein_fail(&me->err, EIN_ERR_DTYPE,
                "ein_plan_create: fp8 inputs or scales; fp8 expressions run "
                "through ein_eval, which takes the scales per call (a plan "
                "would fix them)");
  if (!st)
    st = ein_plain_build(me, expr, inputs, ninputs, output, o, backend,
                         device, out);
  return st;
}

/* A plan made for a contiguous output (no output layout in its key) runs
 * into a C-contiguous output of its shape and dtype only. */
static ein_status check_compact_output(ein_thread_rec *me,
                                       const ein_plan *plan,
                                       const DLTensor *output, ein_dtype dt) {
  const ein_plan_ir *ir = plan->ir;
  bool same = output->ndim == ir->out_ndim && dt == ir->dtype;
  for (int d = 0; same && d < ir->out_ndim; d++)
    same = output->shape[d] == ir->out_shape[d];
  DLTensor compact = *output;
  compact.strides = NULL;
  for (int d = 0; same && d < output->ndim; d++)
    same = ein_tensor_stride(output, d) == ein_tensor_stride(&compact, d);
  if (same) return EIN_OK;
  return ein_fail(&me->err, EIN_ERR_BAD_SHAPE,
              "the output is not the C-contiguous %s tensor of the "
              "plan's output shape",
              ein_dtype_name(ir->dtype));
}

/* The tensors of an execute call against the plan: the count, each
 * tensor's own checks, the layouts the plan was made for, and the device
 * they live on. */
static ein_status check_execute(ein_thread_rec *me, const ein_plan *plan,
                                const DLTensor *const *inputs, int ninputs,
                                DLTensor *output) {
  if (ninputs != plan->ninputs)
    return ein_fail(&me->err, EIN_ERR_OPERAND_COUNT,
                "the plan takes %d inputs but %d were given", plan->ninputs,
                ninputs);
  ein_status st = ein_check_inputs(me, inputs, ninputs, true);
  ein_dtype dt;
  if (!st) st = ein_check_tensor(me, output, -1, true, &dt);
  for (int i = 0; i < ninputs && !st; i++)
    st = ein_plain_check_layout(me, plan, i, inputs[i], i);
  if (st) return st;
  st = plan->offset[ninputs + 1] > plan->offset[ninputs]
           ? ein_plain_check_layout(me, plan, ninputs, output, -1)
           : check_compact_output(me, plan, output, dt);
  if (st) return st;
  const ein_backend_entry *kind;
  int device;
  const ein_options o = {.backend = plan->backend->kind};
  if ((st = ein_resolve_backend(me, &o, inputs, ninputs, output, &kind,
                                &device)))
    return st;
  if (device != plan->device)
    return ein_fail(&me->err, EIN_ERR_DEVICE,
                "the tensors are on %s device %d but the plan was made "
                "for device %d",
                kind->name, device, plan->device);
  return EIN_OK;
}

/* ein_plan_execute, ein_plan_execute_marked (marks may be NULL) and
 * ein_plan_run_units (range: NULL for every unit). */
static ein_status execute(ein_ctx *ctx, const ein_plan *plan,
                          const DLTensor *const *inputs, int ninputs,
                          DLTensor *output, const ein_step_marks *marks,
                          const ein_unit_range *range) {
  if (!ctx) return EIN_ERR_INVALID_ARGUMENT;
  ein_thread_rec *me = ein_ctx_enter(ctx);
  if (!me) return EIN_ERR_NO_MEMORY;
  if (!plan) return ein_fail(&me->err, EIN_ERR_INVALID_ARGUMENT, "the plan is NULL");
  ein_unit_range all;
  ein_status st = ein_plain_all_units(me, plan, &all);
  if (st) return st;
  if (range && (range->first < 0 || range->count < 1 ||
                range->count > all.count - range->first))
    return ein_fail(&me->err, EIN_ERR_INVALID_ARGUMENT,
                "units %lld to %lld asked of a plan of %lld units (0 to "
                "%lld); a range is first >= 0 and count >= 1 within them",
                (long long)range->first,
                (long long)range->first + (long long)range->count - 1,
                (long long)all.count, (long long)all.count - 1);
  if ((st = check_execute(me, plan, inputs, ninputs, output))) return st;
  return ein_plain_run(me, plan, plan->device, inputs, ninputs, output, marks,
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
  const ein_unit_range range = {first, count};
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
  ein_options local;
  const ein_backend_entry *backend;
  int device;
  ein_status st = check_call(me, inputs, ninputs, output, true, &o, &local,
                             &backend, &device);
  if (st) return st;
  const ein_call_args call = call_args(o);
  if (ein_fp8_call(inputs, ninputs, &call))
    return ein_fp8_eval(me, expr, inputs, ninputs, output, o, &call, backend,
                        device);
  if (call.devices > 1)
    return ein_spread_eval(me, expr, inputs, ninputs, output, o, call.devices,
                           backend, device);
  return ein_plain_eval(me, expr, inputs, ninputs, output, o, backend,
                        device);
}
