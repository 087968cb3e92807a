/*
 * planner.c - the planner's building blocks (planner_internal.h): sets of
 * axes, strided views of axes on buffers, buffers and steps added to the
 * plan, the LOOP step, the numerics (storage and compute dtypes), and the
 * operands' views and recorded axes a plan starts from; the names of
 * steps and roles. The stages of a plan are in the files beside it:
 * contract.c (the contraction tree), gemm_steps.c (GEMM fitting),
 * slice.c (slicing), workspace.c (buffer packing) and build.c (the
 * driver, ein_plan_build).
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "path.h"
#include "path_given.h"
#include "planner_internal.h"


/* ein_options.objective reaches the search as it is (plan.h, path.h). */
_Static_assert((int)EIN_PATH_FLOPS == (int)EIN_OBJECTIVE_FLOPS &&
                   (int)EIN_PATH_SIZE == (int)EIN_OBJECTIVE_SIZE &&
                   (int)EIN_PATH_COMBO == (int)EIN_OBJECTIVE_COMBO,
               "path.h's objectives are ein.h's");

ein_status planner_no_memory(planner *pl) {
  return ein_fail_memory(pl->err, "out of memory while planning");
}

ein_status planner_internal(planner *pl, const char *what) {
  return ein_fail_internal(pl->err, "planner: %s", what);
}

/* -------------------------------------------------------------- sets */

axset set_new(planner *pl, int cap) {
  axset s = {0, ein_arena_alloc(pl->arena, (size_t)(cap ? cap : 1),
                                sizeof(int))};
  return s;
}

bool set_has(const axset *s, int a) {
  int lo = 0, hi = s->n;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (s->ax[mid] == a) return true;
    if (s->ax[mid] < a) lo = mid + 1;
    else hi = mid;
  }
  return false;
}

/* The merge of two sorted sets: which = 0 union, 1 intersection,
 * 2 difference (a minus b). An allocation failure leaves ax NULL, which
 * plan_build's arena check reports (pl->oom). */
static axset set_merge(planner *pl, axset a, axset b, int which) {
  axset r = set_new(pl, a.n + b.n);
  if (!r.ax) {
    pl->oom = true;
    return r;
  }
  int i = 0, j = 0;
  while (i < a.n || j < b.n) {
    int x = i < a.n ? a.ax[i] : INT32_MAX, y = j < b.n ? b.ax[j] : INT32_MAX;
    bool in_a = x <= y, in_b = y <= x;
    int v = in_a ? x : y;
    i += in_a;
    j += in_b;
    if (which == 0 || (which == 1 && in_a && in_b) ||
        (which == 2 && in_a && !in_b))
      r.ax[r.n++] = v;
  }
  return r;
}

axset set_or(planner *pl, axset a, axset b) {
  return set_merge(pl, a, b, 0);
}
axset set_and(planner *pl, axset a, axset b) {
  return set_merge(pl, a, b, 1);
}
axset set_minus(planner *pl, axset a, axset b) {
  return set_merge(pl, a, b, 2);
}
bool set_empty(axset s) { return s.n == 0; }

double set_volume(const planner *pl, axset s) {
  double v = 1;
  for (int i = 0; i < s.n; i++) v *= (double)pl->size[s.ax[i]];
  return v;
}

/* opt_einsum's FLOP count of one step that touches `touched` and keeps
 * `kept`: volume(touched) * (max(1, nterms - 1) + (anything summed)). */
double flop_count(planner *pl, axset touched, axset kept, int nterms) {
  bool summed = touched.n > kept.n;
  int factor = (nterms - 1 > 1 ? nterms - 1 : 1) + (summed ? 1 : 0);
  return set_volume(pl, touched) * factor;
}

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* ------------------------------------------------------------- views */

static bool view_alloc(planner *pl, pview *v, int cap) {
  v->n = 0;
  v->off = 0;
  v->ax = ein_arena_alloc(pl->arena, (size_t)(cap ? cap : 1), sizeof *v->ax);
  v->st = ein_arena_alloc(pl->arena, (size_t)(cap ? cap : 1), sizeof *v->st);
  return v->ax && v->st;
}

int view_find(const pview *v, int axis) {
  for (int i = 0; i < v->n; i++)
    if (v->ax[i] == axis) return i;
  return -1;
}

int64_t view_stride(const pview *v, int axis) {
  int i = view_find(v, axis);
  return i < 0 ? 0 : v->st[i];
}

/* Adds an axis; size-1 axes vanish, a repeated axis sums its strides. */
static void view_add(planner *pl, pview *v, int axis, int64_t stride) {
  if (pl->slice_pos && pl->slice_pos[axis] >= 0 && pl->slice_acc)
    pl->slice_acc[pl->slice_pos[axis]] += stride * pl->size[axis];
  if (pl->size[axis] == 1) return;
  int i = view_find(v, axis);
  if (i >= 0) {
    v->st[i] += stride;
    return;
  }
  v->ax[v->n] = axis;
  v->st[v->n++] = stride;
}

axset view_set(planner *pl, const pview *v) {
  axset s = set_new(pl, v->n);
  if (!s.ax) {
    pl->oom = true;
    return s;
  }
  for (int i = 0; i < v->n; i++) s.ax[s.n++] = v->ax[i];
  qsort(s.ax, (size_t)s.n, sizeof(int), cmp_int);
  return s;
}

/* Elements a view touches: stride-0 axes are read once. */
double view_touched(const planner *pl, const pview *v) {
  double e = 1;
  for (int i = 0; i < v->n; i++)
    if (v->st[i] != 0) e *= (double)pl->size[v->ax[i]];
  return e;
}

static void compact_strides(int ndim, const int64_t *shape, int64_t *st) {
  int64_t s = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    st[d] = s;
    s *= shape[d] > 0 ? shape[d] : 1;
  }
}

/* The view of a bound operand on a tensor. */
static ein_status operand_view(planner *pl, const ein_bound_operand *op,
                               const ein_tensor_desc *t, int buf, pview *v) {
  if (!view_alloc(pl, v, op->nfactors)) return planner_no_memory(pl);
  v->buf = buf;
  int64_t strides[EIN_MAX_DIMS];
  if (t->strides)
    memcpy(strides, t->strides, sizeof(int64_t) * (size_t)t->ndim);
  else
    compact_strides(t->ndim, t->shape, strides);
  for (int d = 0; d < op->ndim; d++) {
    const ein_bound_dim *dim = &op->dims[d];
    if (dim->broadcast) {
      view_add(pl, v, op->factors[dim->first], 0);
      continue;
    }
    int64_t s = strides[d];
    for (int j = dim->count - 1; j >= 0; j--) {
      int a = op->factors[dim->first + j];
      view_add(pl, v, a, s);
      if (__builtin_mul_overflow(s, pl->full[a], &s))
        return ein_fail_shape(pl->err, "strides of dim %d overflow int64", d);
    }
  }
  return EIN_OK;
}

/* Sorts the axes outermost first (descending |stride|, stable), in place. */
void view_sort(pview *v) {
  for (int i = 1; i < v->n; i++)
    for (int j = i; j > 0; j--) {
      int64_t a = llabs(v->st[j - 1]), b = llabs(v->st[j]);
      if (a >= b) break;
      int t = v->ax[j];
      v->ax[j] = v->ax[j - 1];
      v->ax[j - 1] = t;
      int64_t s = v->st[j];
      v->st[j] = v->st[j - 1];
      v->st[j - 1] = s;
    }
}

/* ----------------------------------------------------- buffers, steps */

int add_buffer(planner *pl, ein_buffer_kind kind, int input,
               ein_dtype dt, int64_t elems) {
  ein_plan_ir *ir = pl->ir;
  if (ir->nbuffers == pl->cap_bufs) return -1;
  ein_plan_buffer *b = &ir->buffers[ir->nbuffers];
  b->kind = kind;
  b->input = input;
  b->dtype = dt;
  b->elems = elems;
  if (kind == EIN_BUF_TEMP) {
    b->offset = (ir->workspace_bytes + 63) & ~(int64_t)63;
    ir->workspace_bytes = b->offset + elems * (int64_t)ein_dtype_size(dt);
    if (elems > ir->largest_intermediate) ir->largest_intermediate = elems;
  }
  return ir->nbuffers++;
}

/* A new compact temporary holding `axes` (outermost first). */
ein_status temp_view(planner *pl, const int *axes, int n,
                     ein_dtype dt, pview *v) {
  if (!view_alloc(pl, v, n)) return planner_no_memory(pl);
  /* Sizes other than 0 multiply into strides, so check those; the
   * workspace must stay countable in bytes too. */
  int64_t stride = 1, bytes, end;
  bool empty = false, overflow = false;
  for (int i = n - 1; i >= 0; i--) {
    int64_t size = pl->size[axes[i]];
    v->ax[i] = axes[i];
    v->st[i] = stride;
    empty |= size == 0;
    overflow |= __builtin_mul_overflow(stride, size ? size : 1, &stride);
  }
  int64_t elems = empty ? 0 : stride;
  overflow |= __builtin_mul_overflow(stride, (int64_t)ein_dtype_size(dt),
                                     &bytes) ||
              __builtin_add_overflow(pl->ir->workspace_bytes + 64, bytes, &end);
  if (overflow)
    return ein_fail(pl->err, EIN_ERR_OVERFLOW,
                    "an intermediate of this contraction order would "
                    "hold more bytes than int64 can count");
  v->n = n;
  v->buf = add_buffer(pl, EIN_BUF_TEMP, -1, dt, elems);
  return v->buf < 0 ? planner_internal(pl, "too many buffers") : EIN_OK;
}

ein_step *add_step(planner *pl) {
  ein_plan_ir *ir = pl->ir;
  if (ir->nsteps == pl->cap_steps) return NULL;
  ein_step *s = &ir->steps[ir->nsteps++];
  memset(s, 0, sizeof *s);
  s->alpha = 1;
  s->operand[0] = s->operand[1] = s->result = -1;
  return s;
}

ein_dtype buffer_dtype(const planner *pl, int buf) {
  return pl->ir->buffers[buf].dtype;
}

/* dst = alpha * op over dst's missing axes of (src0 [* src1]). */
ein_status emit_loop(planner *pl, ein_step_role role, const pview *dst,
                     int nsrc, const pview *const *src,
                     ein_reduction op, double alpha) {
  ein_step *s = add_step(pl);
  if (!s) return planner_internal(pl, "too many steps");
  s->kind = EIN_STEP_LOOP;
  s->role = role;
  s->nsrc = nsrc;
  s->op = op;
  s->alpha = alpha;
  s->dst = (ein_ref){dst->buf, dst->off};
  s->dst_dtype = buffer_dtype(pl, dst->buf);
  axset all = view_set(pl, dst);
  for (int i = 0; i < nsrc; i++) {
    s->src[i] = (ein_ref){src[i]->buf, src[i]->off};
    s->src_dtype[i] = buffer_dtype(pl, src[i]->buf);
    all = set_or(pl, all, view_set(pl, src[i]));
  }
  int cap = dst->n;
  for (int i = 0; i < nsrc; i++) cap += src[i]->n;
  s->axes = ein_arena_alloc(pl->arena, (size_t)(cap ? cap : 1),
                            sizeof *s->axes);
  if (!s->axes) return planner_no_memory(pl);
  /* dst's axes first (its order), then each source's others. */
  const pview *views[3] = {dst, nsrc > 0 ? src[0] : NULL,
                           nsrc > 1 ? src[1] : NULL};
  for (int w = 0; w < 1 + nsrc; w++)
    for (int i = 0; i < views[w]->n; i++) {
      int a = views[w]->ax[i];
      bool seen = false;
      for (int j = 0; j < s->naxes; j++) seen |= s->axes[j].axis == a;
      if (seen) continue;
      ein_loop_axis *la = &s->axes[s->naxes++];
      la->axis = a;
      la->size = pl->size[a];
      for (int k = 0; k < 3; k++)
        la->stride[k] = k <= nsrc ? view_stride(views[k], a) : 0;
    }
  bool counts = role == EIN_ROLE_CONTRACT || role == EIN_ROLE_REDUCE ||
                role == EIN_ROLE_SINGLE;
  s->flops = counts ? flop_count(pl, all, view_set(pl, dst),
                                  nsrc > 1 ? nsrc : 1)
                    : 0;
  for (int i = 0; i < nsrc; i++)
    s->bytes_read +=
        view_touched(pl, src[i]) * (double)ein_dtype_size(s->src_dtype[i]);
  s->bytes_written =
      view_touched(pl, dst) * (double)ein_dtype_size(s->dst_dtype);
  return EIN_OK;
}


ein_plan_ir *ein_plan_ir_alloc(int nbuffers, int nsteps, int out_ndim) {
  ein_arena arena;
  ein_arena_init(&arena);
  ein_plan_ir *ir = ein_arena_alloc(&arena, 1, sizeof *ir);
  if (!ir) {
    ein_arena_destroy(&arena);
    return NULL;
  }
  ir->arena = arena;
  ir->buffers = ein_arena_alloc(&ir->arena, (size_t)nbuffers,
                                sizeof *ir->buffers);
  ir->steps = ein_arena_alloc(&ir->arena, (size_t)nsteps, sizeof *ir->steps);
  ir->out_shape = ein_arena_alloc(&ir->arena, (size_t)out_ndim + 1,
                                  sizeof *ir->out_shape);
  if (!ir->buffers || !ir->steps || !ir->out_shape) {
    ein_plan_ir_destroy(ir);
    return NULL;
  }
  return ir;
}

int64_t ein_plan_ir_append_temp(ein_plan_ir *ir, ein_dtype dt, int64_t elems,
                                int64_t align) {
  int64_t at = (ir->workspace_bytes + align - 1) / align * align;
  ir->workspace_bytes = at + elems * (int64_t)ein_dtype_size(dt);
  ir->peak_temp_bytes = ir->workspace_bytes;
  return at;
}

void ein_plan_ir_destroy(ein_plan_ir *plan) {
  if (!plan) return;
  ein_plan_ir_destroy(plan->slicing.add);
  ein_plan_ir_destroy(plan->slicing.store);
  ein_plan_ir_destroy(plan->slicing.zero);
  ein_arena arena = plan->arena;
  ein_arena_destroy(&arena);
}

/* Whether axis a (factor f of dim d) already appeared in op before,
 * outside broadcast dims. An operand has at most a few dozen factors. */
static bool seen_before(const ein_bound_operand *op, int d, int f, int a) {
  for (int e = 0; e <= d; e++) {
    const ein_bound_dim *dim = &op->dims[e];
    if (dim->broadcast) continue;
    for (int g = dim->first; g < dim->first + dim->count && g < f; g++)
      if (op->factors[g] == a) return true;
  }
  return false;
}

/* Bytes an evaluation must move at least: each input's distinct elements
 * read once (an axis repeated in one operand, a diagonal, counts once; a
 * broadcast dim of size 1 counts once) and the output written once. */
static double compulsory_bytes(const ein_problem *p,
                               const ein_tensor_desc *inputs,
                               const ein_tensor_desc *output) {
  double total = 0;
  for (int i = 0; i < p->ninputs; i++) {
    const ein_bound_operand *op = &p->inputs[i];
    double elems = 1;
    for (int d = 0; d < op->ndim; d++) {
      const ein_bound_dim *dim = &op->dims[d];
      if (dim->broadcast) continue;
      for (int f = dim->first; f < dim->first + dim->count; f++) {
        int a = op->factors[f];
        if (!seen_before(op, d, f, a)) elems *= (double)p->axes[a].size;
      }
    }
    total += elems * (double)ein_dtype_size(inputs[i].dtype);
  }
  double out_elems = 1;
  for (int d = 0; d < p->output.ndim; d++)
    out_elems *= (double)p->output.dims[d].size;
  return total + out_elems * (double)ein_dtype_size(output->dtype);
}

/* The inputs' and the output's bytes, whole (numel x element size): what
 * they hold in memory, beside compulsory_bytes' traffic. Counted in double
 * (an empty tensor's other dims may multiply past int64) and held at
 * INT64_MAX. */
static int64_t bytes_held(double bytes) {
  return bytes < 0x1p63 ? (int64_t)bytes : INT64_MAX;
}

static void whole_bytes(const ein_problem *p, const ein_tensor_desc *inputs,
                        const ein_tensor_desc *output, ein_plan_ir *ir) {
  double in = 0, out = (double)ein_dtype_size(output->dtype);
  for (int i = 0; i < p->ninputs; i++) {
    double n = (double)ein_dtype_size(inputs[i].dtype);
    for (int d = 0; d < inputs[i].ndim; d++) n *= (double)inputs[i].shape[d];
    in += n;
  }
  for (int d = 0; d < p->output.ndim; d++) out *= (double)p->output.dims[d].size;
  ir->input_bytes = bytes_held(in);
  ir->output_bytes = bytes_held(out);
}

/* The accumulator and plain-copy rules of ein_step (plan.h). */
void decide_numerics(ein_step *s) {
  ein_dtype in = s->nsrc ? s->src_dtype[0] : s->dst_dtype;
  if (ein_dtype_is_complex(in))
    s->acc_dtype = in == EIN_DT_C128 || s->dst_dtype == EIN_DT_C128
                       ? EIN_DT_C128
                       : EIN_DT_C64;
  else if (in == EIN_DT_F64 || s->dst_dtype == EIN_DT_F64)
    s->acc_dtype = ein_dtype_is_float(in) ? EIN_DT_F64 : EIN_DT_I64;
  else
    s->acc_dtype = ein_dtype_is_float(in) ? EIN_DT_F32 : EIN_DT_I64;
  bool reduces = false;
  for (int i = 0; i < s->naxes; i++)
    reduces |= s->axes[i].stride[0] == 0 && s->axes[i].size > 1;
  s->plain_copy = s->kind == EIN_STEP_LOOP && s->nsrc == 1 &&
                  s->map == EIN_MAP_PRODUCT &&
                  s->src_dtype[0] == s->dst_dtype && s->alpha == 1 &&
                  s->op != EIN_REDUCE_ANY && s->op != EIN_REDUCE_ALL &&
                  !reduces;
}

/* The plan's per-axis and per-step arrays, sized from the problem. */
ein_status alloc_plan_arrays(planner *pl) {
  const ein_problem *p = pl->p;
  ein_plan_ir *ir = pl->ir;
  int n = p->ninputs;
  pl->size = ein_arena_alloc(pl->arena, (size_t)(p->naxes + 1), sizeof(int64_t));
  ir->axis_labels = ein_arena_alloc(pl->arena, (size_t)(p->naxes + 1),
                                    sizeof(char *));
  ir->axis_roles = ein_arena_alloc(pl->arena, (size_t)(p->naxes + 1),
                                   sizeof(ein_axis_role));
  ir->out_shape = ein_arena_alloc(pl->arena, (size_t)(p->output.ndim + 1),
                                  sizeof(int64_t));
  pl->cap_steps = 6 * n + 8;
  pl->cap_bufs = 5 * n + 8;
  ir->steps = ein_arena_alloc(pl->arena, (size_t)pl->cap_steps, sizeof(ein_step));
  ir->buffers = ein_arena_alloc(pl->arena, (size_t)pl->cap_bufs,
                                sizeof(ein_plan_buffer));
  if (!pl->size || !ir->axis_labels || !ir->axis_roles || !ir->out_shape ||
      !ir->steps || !ir->buffers)
    return planner_no_memory(pl);
  ir->axis_sizes = pl->full = pl->size;
  return EIN_OK;
}

/* Copies sizes, labels and roles of the problem's axes and the output
 * shape into the plan; *empty says some axis has size 0. */
ein_status record_axes(planner *pl, bool *empty) {
  const ein_problem *p = pl->p;
  ein_plan_ir *ir = pl->ir;
  *empty = false;
  for (int a = 0; a < p->naxes; a++) {
    pl->size[a] = p->axes[a].size;
    ir->axis_labels[a] = ein_arena_strndup(pl->arena, p->axes[a].label,
                                           strlen(p->axes[a].label));
    if (!ir->axis_labels[a]) return planner_no_memory(pl);
    *empty |= pl->size[a] == 0;
    ir->axis_roles[a] = ein_axis_reduced(p, a)    ? EIN_AXIS_REDUCED
                        : ein_axis_repeated(p, a) ? EIN_AXIS_REPEATED
                                                  : EIN_AXIS_KEPT;
  }
  ir->out_ndim = p->output.ndim;
  for (int d = 0; d < p->output.ndim; d++)
    ir->out_shape[d] = p->output.dims[d].size;
  return EIN_OK;
}

/* The yardsticks a plan is reported against: the naive cost, every input
 * axis visited once per term (opt_einsum), and the compulsory bytes. */
void record_baselines(planner *pl, const ein_tensor_desc *inputs,
                      const ein_tensor_desc *output) {
  const ein_problem *p = pl->p;
  axset in_axes = set_new(pl, p->naxes), kept = set_new(pl, p->naxes);
  if (!in_axes.ax || !kept.ax) {
    pl->oom = true;
    return;
  }
  for (int a = 0; a < p->naxes; a++) {
    if (p->axes[a].in_input) in_axes.ax[in_axes.n++] = a;
    if (p->axes[a].in_input && p->axes[a].in_output) kept.ax[kept.n++] = a;
  }
  pl->ir->naive_flops = flop_count(pl, in_axes, kept, p->ninputs);
  pl->ir->min_bytes = compulsory_bytes(p, inputs, output);
  whole_bytes(p, inputs, output, pl->ir);
}

/* Buffers for the inputs and the output and their views (no input views
 * when the problem is empty). */
ein_status operand_views(planner *pl, const ein_tensor_desc *inputs,
                         const ein_tensor_desc *output, bool empty,
                         pview **inv, pview *outv) {
  const ein_problem *p = pl->p;
  int n = p->ninputs;
  for (int i = 0; i < n; i++)
    add_buffer(pl, EIN_BUF_INPUT, i, inputs[i].dtype, 0);
  int outbuf = add_buffer(pl, EIN_BUF_OUTPUT, -1, output->dtype, 0);
  *inv = ein_arena_alloc(pl->arena, (size_t)n, sizeof **inv);
  if (!*inv) return planner_no_memory(pl);
  ein_status st = EIN_OK;
  const ein_slicing *sl = &pl->ir->slicing;
  if (!empty)
    for (int i = 0; i < n && !st; i++) {
      pl->slice_acc = sl->n ? &sl->in_stride[(size_t)i * (size_t)sl->n] : NULL;
      st = operand_view(pl, &p->inputs[i], &inputs[i], i, &(*inv)[i]);
    }
  pl->slice_acc = sl->out_stride;
  if (!st) st = operand_view(pl, &p->output, output, outbuf, outv);
  pl->slice_acc = NULL;
  return st;
}


const char *ein_step_role_name(ein_step_role role) {
  switch (role) {
  case EIN_ROLE_CONTRACT: return "contract";
  case EIN_ROLE_REDUCE: return "pre-reduce";
  case EIN_ROLE_SINGLE: return "single";
  case EIN_ROLE_LAYOUT: return "layout";
  case EIN_ROLE_CONVERT: return "convert";
  case EIN_ROLE_STORE: return "store";
  case EIN_ROLE_REPEAT: return "repeat";
  case EIN_ROLE_EMPTY: return "empty";
  case EIN_ROLE_GRAD: return "grad";
  }
  return "?";
}

const char *ein_step_name(const ein_step *s) {
  if (s->view) return "view";
  if (s->kind == EIN_STEP_GEMM) return "gemm";
  if (s->kind == EIN_STEP_FILL) return "fill";
  bool reduces = false;
  for (int i = 0; i < s->naxes; i++)
    reduces |= s->axes[i].stride[0] == 0 && s->axes[i].size > 1;
  if (s->nsrc == 2) return reduces ? "contract" : "product";
  return reduces ? "reduce" : "copy";
}
