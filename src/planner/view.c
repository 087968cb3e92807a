/*
 * view.c - ein_plan_find_view (plan.h): whether a plan's output is only a
 * new way of reading one input's memory, decided once by the planner.
 *
 * A one-operand plan whose single step is a plain copy moves elements
 * without changing them. When every output dim walks its input with one
 * stride, the caller can skip the copy and hand back a strided view of the
 * input, as numpy.einsum does for 'ij->ji' and einops for rearrange (the
 * Python package does; docs/design.md, "Views"). The step's axes say, per
 * problem axis, its stride in the output and in the input; an output dim
 * is the run of axes whose output strides fall inside it, and it is a
 * view when those axes' input strides chain as their output strides do
 * (each the next one's times its size).
 *
 * The answer is the plan's (ein_plan_ir.view): the report reads it (a view
 * costs 0 FLOPs and 0 bytes, its step is named "view"), ein.h's
 * ein_plan_is_view and ein_plan_output_view hand it out, and the Python
 * package returns views by it; a backend asked to write a separate output
 * still runs the copy step.
 */
#include <stdbool.h>

#include "plan.h"

/* The step axis whose output stride is `dst` (sizes above 1 only, and in
 * a compact output no two share one), or -1. */
static int axis_at(const ein_step *s, int64_t dst) {
  for (int i = 0; i < s->naxes; i++)
    if (s->axes[i].size > 1 && s->axes[i].stride[0] == dst) return i;
  return -1;
}

/* The input stride of an output dim of `size` elements that starts at
 * compact stride `outer`: its axes, innermost first, must chain in the
 * input as they do in the output. Counts the axes used in *used. */
static bool dim_stride(const ein_step *s, int64_t outer, int64_t size,
                       int64_t *stride, int *used) {
  int64_t covered = 1, next_src = 0;
  while (covered < size) {
    int i = axis_at(s, outer * covered);
    if (i < 0) return false;
    const ein_loop_axis *a = &s->axes[i];
    if (covered == 1)
      *stride = a->stride[1];
    else if (a->stride[1] != next_src)
      return false;
    next_src = a->stride[1] * a->size;
    covered *= a->size;
    ++*used;
  }
  return covered == size;
}

/* One plain copy from an input into the output, nothing repeated. */
static const ein_step *plain_copy_step(const ein_plan_ir *ir) {
  if (ir->nsteps != 1) return NULL;
  const ein_step *s = &ir->steps[0];
  if (s->kind != EIN_STEP_LOOP || !s->plain_copy || s->nsrc != 1 ||
      ir->buffers[s->src[0].buffer].kind != EIN_BUF_INPUT ||
      ir->buffers[s->dst.buffer].kind != EIN_BUF_OUTPUT || s->dst.offset != 0)
    return NULL;
  for (int i = 0; i < s->naxes; i++) {
    const ein_loop_axis *a = &s->axes[i];
    if (a->size == 0 || (a->size > 1 && a->stride[0] <= 0)) return NULL;
    if (a->size > 1 && a->axis >= 0 &&
        ir->axis_roles[a->axis] == EIN_AXIS_REPEATED)
      return NULL; /* a write through it would land on many elements */
  }
  return s;
}

/* Whether the output is C-contiguous (size-1 dims' strides never matter):
 * only then is "the output" the caller's fresh array that a view replaces. */
static bool output_compact(const ein_plan_ir *ir, const ein_tensor_desc *out) {
  int64_t expect = 1;
  for (int d = ir->out_ndim - 1; d >= 0; d--) {
    int64_t n = ir->out_shape[d];
    if (n == 1) continue;
    if (out->strides && out->strides[d] != expect) return false;
    expect *= n;
  }
  return true;
}

/* The view's strides, output dim by output dim, innermost first; false
 * when some dim does not walk the input with one stride, or some axis of
 * the copy lies outside every dim. */
static bool view_strides(const ein_plan_ir *ir, const ein_step *s,
                         int64_t *strides) {
  int used = 0, big = 0;
  int64_t outer = 1, inner_extent = 1; /* compact stride; the view's reach */
  for (int d = ir->out_ndim - 1; d >= 0; d--) {
    int64_t n = ir->out_shape[d];
    if (n == 0) return false;
    if (n == 1) {
      strides[d] = inner_extent;
      continue;
    }
    if (!dim_stride(s, outer, n, &strides[d], &used)) return false;
    inner_extent = strides[d] * n;
    outer *= n;
  }
  for (int i = 0; i < s->naxes; i++) big += s->axes[i].size > 1;
  return used == big;
}

ein_status ein_plan_find_view(ein_plan_ir *ir, const ein_tensor_desc *output) {
  ir->view = (ein_plan_view){0};
  ein_step *s = (ein_step *)plain_copy_step(ir);
  if (!s || !output_compact(ir, output)) return EIN_OK;
  int64_t *strides = ein_arena_alloc(&ir->arena,
                                     (size_t)(ir->out_ndim ? ir->out_ndim : 1),
                                     sizeof *strides);
  if (!strides) return EIN_ERR_NO_MEMORY;
  if (!view_strides(ir, s, strides)) return EIN_OK;
  ir->view = (ein_plan_view){true, ir->buffers[s->src[0].buffer].input,
                             s->src[0].offset, strides};
  /* nothing runs where the caller takes the view: no FLOPs, no bytes */
  s->view = true;
  s->flops = s->bytes_read = s->bytes_written = 0;
  return EIN_OK;
}
