/*
 * plan_view.c - ein_plan_output_view: whether a plan's output is only a
 * new way of reading one input's memory.
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
 * Reads the plan IR only; takes and owns nothing.
 */
#include <stdbool.h>

#include "ctx_internal.h"
#include "ein.h"
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

int ein_plan_output_view(const ein_plan *plan, int *input,
                         int64_t *view_strides, int64_t *view_offset) {
  const ein_plan_ir *ir = ein_plan_ir_of(plan);
  const ein_step *s = ir ? plain_copy_step(ir) : NULL;
  if (!s || !input || !view_strides || !view_offset ||
      !ein_plan_output_compact(plan))
    return 0;
  int used = 0, big = 0;
  int64_t outer = 1, inner_extent = 1; /* compact stride; the view's reach */
  for (int d = ir->out_ndim - 1; d >= 0; d--) {
    int64_t n = ir->out_shape[d];
    if (n == 0) return 0;
    if (n == 1) {
      view_strides[d] = inner_extent;
      continue;
    }
    if (!dim_stride(s, outer, n, &view_strides[d], &used)) return 0;
    inner_extent = view_strides[d] * n;
    outer *= n;
  }
  for (int i = 0; i < s->naxes; i++) big += s->axes[i].size > 1;
  if (used != big) return 0; /* an axis outside every dim: not a copy */
  *input = ir->buffers[s->src[0].buffer].input;
  *view_offset = s->src[0].offset;
  return 1;
}
