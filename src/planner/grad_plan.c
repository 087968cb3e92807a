/*
 * grad_plan.c - plans for a gradient program's elementwise steps
 * (grad.h): each becomes a small plan IR of LOOP and FILL steps that
 * every backend runs as it runs any plan (the CPU's loops, CUDA's
 * generated kernels, the emulated device running those). The operation a
 * LOOP step applies per element is its `map` (plan.h, ein_map_op), so no
 * backend decides what a gradient step means: the planner has.
 *
 * Every operand is C-contiguous and the loops walk the flat index, except
 * the diagonal's scatter (a FILL of zeros, then a copy into the view of
 * its strides) and the copies (ein_plan_grad_copy), which walk dims.
 * PROD_SELECT's four operands become four two-operand steps through two
 * temporaries of the accumulator's dtype (f32 for f16 and bf16), so the
 * result is rounded once:
 *   t0 = g * p;  t1 = x == 0 ? t0 : t0 / x;  t0 = prod_mask(z, x);
 *   out = t1 * t0
 * (with z == 0 no element of the group is zero, so x != 0 and t1 =
 * g p / x; with z == 1 and x == 0, t1 = g p: the two cases of ein.h's
 * rule, and prod_mask is 0 in every other).
 */
#include <string.h>

#include "cost.h"
#include "grad.h"
#include "planner_internal.h"


static int64_t count(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= shape[d];
  return n;
}

/* An IR with ninputs inputs, the output (of shape ndim/shape) and ntemps
 * temporaries, room for nsteps steps; NULL when out of memory. */
static ein_plan_ir *ir_new(ein_dtype dt, int ninputs, int ntemps, int nsteps,
                           int ndim, const int64_t *shape) {
  ein_plan_ir *ir = ein_plan_ir_alloc(ninputs + 1 + ntemps, nsteps, ndim);
  if (!ir) return NULL;
  ir->dtype = dt;
  ir->reduction = EIN_REDUCE_SUM;
  ir->ninputs = ninputs;
  ir->path_method = "gradient";
  ir->out_ndim = ndim;
  ir->nbuffers = ninputs + 1 + ntemps;
  if (ndim) memcpy(ir->out_shape, shape, (size_t)ndim * sizeof(int64_t));
  for (int i = 0; i < ninputs; i++)
    ir->buffers[i] = (ein_plan_buffer){EIN_BUF_INPUT, i, dt, 0, 0};
  ir->buffers[ninputs] = (ein_plan_buffer){EIN_BUF_OUTPUT, -1, dt, 0, 0};
  return ir;
}

/* Temporary k (0-based) of n elements of dtype tdt, packed after the
 * ones before it. */
static void add_temp(ein_plan_ir *ir, int k, ein_dtype tdt, int64_t n) {
  int64_t at = ein_plan_ir_append_temp(ir, tdt, n, EIN_TEMP_ALIGN);
  ir->buffers[ir->ninputs + 1 + k] =
      (ein_plan_buffer){EIN_BUF_TEMP, -1, tdt, n, at};
}

/* A step over the flat index of n elements: dst buffer d, sources
 * s0 and s1 (-1: none), the map's operation. */
static ein_status flat_step(ein_plan_ir *ir, ein_error_rec *err, int64_t n,
                            ein_map_op map, double alpha, int d, int s0,
                            int s1) {
  ein_step *s = &ir->steps[ir->nsteps++];
  s->axes = ein_arena_alloc(&ir->arena, 1, sizeof *s->axes);
  if (!s->axes) return ein_fail_memory(err, "out of memory planning a "
                                       "gradient step");
  s->kind = EIN_STEP_LOOP;
  s->role = EIN_ROLE_GRAD;
  s->map = map;
  s->alpha = alpha;
  s->op = EIN_REDUCE_SUM;
  s->nsrc = s1 >= 0 ? 2 : 1;
  s->dst = (ein_ref){d, 0};
  s->dst_dtype = ir->buffers[d].dtype;
  int src[2] = {s0, s1};
  for (int k = 0; k < s->nsrc; k++) {
    s->src[k] = (ein_ref){src[k], 0};
    s->src_dtype[k] = ir->buffers[src[k]].dtype;
    s->bytes_read += (double)n * (double)ein_dtype_size(s->src_dtype[k]);
  }
  s->operand[0] = s->operand[1] = s->result = -1;
  s->naxes = 1;
  s->axes[0] = (ein_loop_axis){-1, n, {1, 1, s->nsrc == 2 ? 1 : 0}};
  bool moves = map == EIN_MAP_PRODUCT && s->nsrc == 1 && alpha == 1;
  s->flops = moves ? 0 : (double)n;
  s->bytes_written = (double)n * (double)ein_dtype_size(s->dst_dtype);
  decide_numerics(s);
  return EIN_OK;
}

/* The map of a two- or one-operand elementwise gradient step. */
static ein_map_op map_of(ein_grad_op op) {
  switch (op) {
  case EIN_GRAD_EQUAL: return EIN_MAP_EQUAL;
  case EIN_GRAD_DIV: return EIN_MAP_DIV;
  case EIN_GRAD_IS_ZERO: return EIN_MAP_IS_ZERO;
  case EIN_GRAD_ZERO_TO_ONE: return EIN_MAP_ZERO_TO_ONE;
  default: return EIN_MAP_PRODUCT; /* MUL, SCALE */
  }
}

/* The four steps of PROD_SELECT (the file's comment). */
static ein_status prod_select(ein_plan_ir *ir, ein_error_rec *err,
                              int64_t n) {
  ein_dtype t = ir->dtype == EIN_DT_F16 || ir->dtype == EIN_DT_BF16
                    ? EIN_DT_F32
                    : ir->dtype;
  add_temp(ir, 0, t, n);
  add_temp(ir, 1, t, n);
  int out = 4, t0 = 5, t1 = 6; /* inputs g p x z are buffers 0-3 */
  ein_status st = flat_step(ir, err, n, EIN_MAP_PRODUCT, 1, t0, 0, 1);
  if (!st) st = flat_step(ir, err, n, EIN_MAP_DIV_NONZERO, 1, t1, t0, 2);
  if (!st) st = flat_step(ir, err, n, EIN_MAP_PROD_MASK, 1, t0, 3, 2);
  if (!st) st = flat_step(ir, err, n, EIN_MAP_PRODUCT, 1, out, t1, t0);
  return st;
}

/* SCATTER_DIAG: zeros, then operand 0 (C-contiguous, of shape
 * from_ndim/from_shape) copied into the view of the step's strides. */
static ein_status scatter(ein_plan_ir *ir, ein_error_rec *err,
                          const ein_grad_step *gs, int from_ndim,
                          const int64_t *from_shape) {
  int64_t n = count(gs->ndim, gs->shape);
  ein_step *fill = &ir->steps[ir->nsteps++];
  fill->axes = ein_arena_alloc(&ir->arena, 1, sizeof *fill->axes);
  ein_step *copy = &ir->steps[ir->nsteps++];
  copy->axes = ein_arena_alloc(&ir->arena, (size_t)from_ndim + 1,
                               sizeof *copy->axes);
  if (!fill->axes || !copy->axes)
    return ein_fail_memory(err, "out of memory planning a gradient step");
  *fill = (ein_step){.kind = EIN_STEP_FILL, .role = EIN_ROLE_GRAD,
                     .dst = {1, 0}, .dst_dtype = ir->dtype, .alpha = 1,
                     .naxes = 1, .axes = fill->axes, .operand = {-1, -1},
                     .result = -1};
  fill->axes[0] = (ein_loop_axis){-1, n, {1, 0, 0}};
  fill->bytes_written = (double)n * (double)ein_dtype_size(ir->dtype);
  *copy = (ein_step){.kind = EIN_STEP_LOOP, .role = EIN_ROLE_GRAD,
                     .nsrc = 1, .dst = {1, 0}, .src = {{0, 0}},
                     .dst_dtype = ir->dtype, .src_dtype = {ir->dtype},
                     .alpha = 1, .naxes = from_ndim, .axes = copy->axes,
                     .operand = {-1, -1}, .result = -1};
  int64_t c = 1, m = count(from_ndim, from_shape);
  for (int d = from_ndim - 1; d >= 0; d--) {
    copy->axes[d] = (ein_loop_axis){-1, from_shape[d],
                                    {gs->view_strides[d], c, 0}};
    c *= from_shape[d];
  }
  copy->bytes_read = copy->bytes_written =
      (double)m * (double)ein_dtype_size(ir->dtype);
  decide_numerics(fill);
  decide_numerics(copy);
  return EIN_OK;
}

static void totals(ein_plan_ir *ir) {
  ein_cost_record_sectors(ir);
  for (int i = 0; i < ir->nsteps; i++) {
    ir->flops += ir->steps[i].flops;
    ir->bytes_moved += ir->steps[i].bytes_read + ir->steps[i].bytes_written;
  }
  ir->naive_flops = ir->flops;
  ir->output_bytes = count(ir->out_ndim, ir->out_shape) *
                     (int64_t)ein_dtype_size(ir->dtype);
  ir->min_bytes = ir->bytes_moved;
}

ein_status ein_plan_grad_map(const ein_grad_step *gs, const int *ndim,
                             const int64_t *const *shape, ein_dtype dt,
                             ein_error_rec *err, ein_plan_ir **out) {
  bool select = gs->op == EIN_GRAD_PROD_SELECT;
  int nsteps = select ? 4 : gs->op == EIN_GRAD_SCATTER_DIAG ? 2 : 1;
  ein_plan_ir *ir = ir_new(dt, gs->noperands, select ? 2 : 0, nsteps,
                           gs->ndim, gs->shape);
  if (!ir) return ein_fail_memory(err, "out of memory planning a gradient "
                                  "step");
  int64_t n = count(gs->ndim, gs->shape);
  int o = gs->noperands;
  ein_status st;
  if (gs->op == EIN_GRAD_EINSUM || gs->noperands < 1 || gs->noperands > 4)
    st = ein_fail_argument(err, "a gradient's %s step is no elementwise "
                           "step", ein_grad_op_name(gs->op));
  else if (select) st = prod_select(ir, err, n);
  else if (gs->op == EIN_GRAD_SCATTER_DIAG)
    st = scatter(ir, err, gs, ndim[0], shape[0]);
  else
    st = flat_step(ir, err, n, map_of(gs->op),
                   gs->op == EIN_GRAD_SCALE ? gs->scale : 1, o, 0,
                   gs->noperands > 1 ? 1 : -1);
  for (int k = 0; k < gs->noperands; k++)
    ir->input_bytes += count(ndim[k], shape[k]) * (int64_t)ein_dtype_size(dt);
  if (st) {
    ein_plan_ir_destroy(ir);
    return st;
  }
  totals(ir);
  *out = ir;
  return EIN_OK;
}

ein_status ein_plan_grad_copy(int ndim, const int64_t *shape,
                              const int64_t *dst_strides,
                              const int64_t *src_strides, ein_dtype dt,
                              bool conj, ein_error_rec *err,
                              ein_plan_ir **out) {
  ein_plan_ir *ir = ir_new(dt, 1, 0, 1, ndim, shape);
  ein_step *s = ir ? &ir->steps[0] : NULL;
  ein_loop_axis *axes =
      s ? ein_arena_alloc(&ir->arena, (size_t)ndim + 1, sizeof *axes) : NULL;
  if (!axes) {
    ein_plan_ir_destroy(ir);
    return ein_fail_memory(err, "out of memory planning a gradient copy");
  }
  int64_t c = 1, n = count(ndim, shape);
  for (int d = ndim - 1; d >= 0; d--) {
    axes[d] = (ein_loop_axis){-1, shape[d],
                              {dst_strides ? dst_strides[d] : c,
                               src_strides ? src_strides[d] : c, 0}};
    c *= shape[d];
  }
  bool complex = ein_dtype_is_complex(dt);
  *s = (ein_step){.kind = EIN_STEP_LOOP, .role = EIN_ROLE_GRAD,
                  .map = conj && complex ? EIN_MAP_CONJ : EIN_MAP_PRODUCT,
                  .nsrc = 1, .dst = {1, 0}, .src = {{0, 0}},
                  .dst_dtype = dt, .src_dtype = {dt}, .alpha = 1,
                  .naxes = ndim, .axes = axes, .operand = {-1, -1},
                  .result = -1};
  s->bytes_read = s->bytes_written = (double)n * (double)ein_dtype_size(dt);
  decide_numerics(s);
  ir->nsteps = 1;
  ir->input_bytes = n * (int64_t)ein_dtype_size(dt);
  totals(ir);
  *out = ir;
  return EIN_OK;
}
