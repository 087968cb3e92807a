/*
 * plan_object.c - the public plan's life (retain, release) and what
 * ein.h's getters, reports and cost figures read of it (plan_object.h).
 * Every figure comes from the plan's IR and the cost model; nothing here
 * runs a plan.
 */
#include <string.h>

#include "cost.h"
#include "device_models.h"
#include "inspect.h"
#include "plan_key.h"
#include "plan_object.h"
#include "report.h"

void ein_plan_retain(ein_plan *plan) {
  atomic_fetch_add_explicit(&plan->refs, 1, memory_order_relaxed);
}

void ein_plan_release(ein_plan *plan) {
  if (!plan) return;
  /* acq_rel: the thread that frees sees every other thread's last use. */
  if (atomic_fetch_sub_explicit(&plan->refs, 1, memory_order_acq_rel) != 1)
    return;
  if (plan->program) plan->backend->program_free(plan->program);
  for (int i = 0; i < EIN_NSUB; i++)
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
  size_t lo = plan->offset[plan->ninputs], hi = plan->offset[plan->ninputs + 1];
  return ein_key_tensor_compact(plan->layout + lo, hi - lo);
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
