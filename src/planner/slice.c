/*
 * slice.c - sliced plans (plan.h, ein_slicing): the axes to slice (the
 * caller's slice_axes or the search's), each axis's chunk, the input
 * strides from one slice to the next, and the small sub-plans that add,
 * store and zero the output's pieces.
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

/* ------------------------------------------------------------ slicing */

/* The sliced axis named text[0 .. len), or -1. */
static int axis_named(const planner *pl, const char *text, size_t len) {
  for (int a = 0; a < pl->p->naxes; a++)
    if (strlen(pl->p->axes[a].label) == len &&
        memcmp(pl->p->axes[a].label, text, len) == 0)
      return a;
  return -1;
}

/* Places the sliced axes ids[0 .. total) (marked in pl->slice_pos):
 * output axes first, summed ones after, each in the order given; ids
 * gets them in that order. */
static void place_slices(planner *pl, int *ids, int total) {
  int kept = 0, summed = 0;
  for (int k = 0; k < total; k++) kept += pl->p->axes[ids[k]].in_output;
  int next_kept = 0;
  for (int k = 0; k < total; k++) {
    int a = ids[k];
    pl->slice_pos[a] = pl->p->axes[a].in_output ? next_kept++
                                                 : kept + summed++;
  }
  for (int a = 0; a < pl->p->naxes; a++)
    if (pl->slice_pos[a] >= 0) ids[pl->slice_pos[a]] = a;
  pl->ir->slicing.nkept = kept;
}

/* The sliced axes the search chose, and the caller's named ones, from
 * limits->slice_ids (ein_plan_build's second plan), each of the chunk
 * given beside it (planned size, in size[]). */
ein_status slice_ids(planner *pl, const ein_plan_limits *limits,
                     int *ids, int64_t *size, int *n) {
  int total = 0;
  for (int k = 0; k < limits->nslice_ids; k++) {
    int a = limits->slice_ids[k];
    if (a < 0 || a >= pl->p->naxes || pl->slice_pos[a] != -1) continue;
    pl->slice_pos[a] = 0;
    size[a] = limits->slice_chunks ? limits->slice_chunks[k] : 1;
    ids[total++] = a;
  }
  place_slices(pl, ids, total);
  *n = total;
  return EIN_OK;
}

/* The number of slices after "name:" in a slice_axes text, as a chunk
 * size in size[a]: it must divide the axis (each slice plans one size). */
static ein_status read_slice_count(planner *pl, const char *text, int a,
                                   const char **c, int64_t *size) {
  char *end;
  long long count = strtoll(*c, &end, 10);
  int64_t full = pl->full[a];
  if (end == *c)
    return ein_fail_argument(pl->err,
                             "slice_axes '%.80s': '%s:' wants a number of "
                             "slices after ':'",
                             text, pl->p->axes[a].label);
  if (count < 1 || count > full || full % count != 0)
    return ein_fail_argument(
        pl->err, "slice_axes '%.80s': '%s:%.*s' asks for %.*s slices of an "
        "axis of size %lld; the count must divide the size",
        text, pl->p->axes[a].label, (int)(end - *c), *c, (int)(end - *c), *c,
        (long long)full);
  size[a] = full / count;
  *c = end;
  return EIN_OK;
}

/* Reads the comma-separated names, each "name" (one index per slice) or
 * "name:count" (that many slices), into pl->slice_pos, ids (output axes
 * first) and size[] (the chunks); *n is the count. */
static ein_status read_slice_names(planner *pl, const char *text, int *ids,
                                   int64_t *size, int *n) {
  int total = 0;
  for (const char *c = text; *c;) {
    while (*c == ' ' || *c == ',') c++;
    const char *end = c;
    while (*end && *end != ',' && *end != ' ' && *end != ':') end++;
    if (end == c) break;
    int a = axis_named(pl, c, (size_t)(end - c));
    if (a < 0 || pl->slice_pos[a] != -1)
      return ein_fail_argument(
          pl->err, "slice_axes '%.80s': '%.*s' %s", text, (int)(end - c), c,
          a < 0 ? "is no axis of the expression" : "is named twice");
    if (!pl->p->axes[a].in_output && pl->p->reduction != EIN_REDUCE_SUM &&
        pl->p->reduction != EIN_REDUCE_MEAN)
      return ein_fail_argument(
          pl->err, "slice_axes '%.80s': '%s' is reduced with '%s'; only "
                   "sum and mean add up over slices",
          text, pl->p->axes[a].label, ein_reduction_name(pl->p->reduction));
    pl->slice_pos[a] = 0; /* marked; placed below */
    size[a] = 1;
    ids[total++] = a;
    c = end;
    if (*c == ':') {
      c++;
      ein_status st = read_slice_count(pl, text, a, &c, size);
      if (st) return st;
    }
  }
  place_slices(pl, ids, total);
  *n = total;
  return EIN_OK;
}

/* Sets up slicing over the named axes: planned sizes of their chunks, the
 * tables of ein_slicing. Nothing is sliced when an axis is empty (the
 * plan fills the output). */
ein_status setup_slicing(planner *pl, const ein_plan_limits *limits,
                         bool empty) {
  const char *text = limits ? limits->slice_axes : NULL;
  bool ids_given = limits && limits->nslice_ids > 0;
  if ((!ids_given && (!text || !*text)) || empty) return EIN_OK;
  int naxes = pl->p->naxes;
  ein_slicing *sl = &pl->ir->slicing;
  pl->slice_pos = ein_arena_alloc(pl->arena, (size_t)naxes + 1, sizeof(int));
  int *ids = ein_arena_alloc(pl->arena, (size_t)naxes + 1, sizeof(int));
  int64_t *size = ein_arena_alloc(pl->arena, (size_t)naxes + 1,
                                  sizeof(int64_t));
  if (!pl->slice_pos || !ids || !size) return planner_no_memory(pl);
  for (int a = 0; a < naxes; a++) pl->slice_pos[a] = -1;
  memcpy(size, pl->full, sizeof(int64_t) * (size_t)naxes);
  ein_status st = ids_given ? slice_ids(pl, limits, ids, size, &sl->n)
                            : read_slice_names(pl, text, ids, size, &sl->n);
  if (st || sl->n == 0) {
    pl->slice_pos = NULL;
    return st;
  }
  int ni = pl->p->ninputs;
  sl->axes = ids;
  sl->sizes = ein_arena_alloc(pl->arena, (size_t)sl->n, sizeof(int64_t));
  sl->chunk = ein_arena_alloc(pl->arena, (size_t)sl->n, sizeof(int64_t));
  sl->in_stride = ein_arena_alloc(pl->arena, (size_t)sl->n * (size_t)ni,
                                  sizeof(int64_t));
  sl->out_stride = ein_arena_alloc(pl->arena, (size_t)sl->n, sizeof(int64_t));
  if (!sl->sizes || !sl->chunk || !sl->in_stride || !sl->out_stride)
    return planner_no_memory(pl);
  sl->count = 1;
  for (int k = 0; k < sl->n; k++) {
    sl->chunk[k] = size[ids[k]];
    sl->sizes[k] = pl->full[ids[k]] / sl->chunk[k];
    sl->count *= (double)sl->sizes[k];
  }
  pl->size = size;
  return EIN_OK;
}

/* A plan of its own for one LOOP step of the accumulation: input 0 and
 * the output of the main plan's dtype; it borrows the main plan's axis
 * tables (it is destroyed with it, first). *sub is a planner over it. */
static ein_status sub_plan(planner *pl, planner *sub, ein_plan_ir **out) {
  ein_arena arena;
  ein_arena_init(&arena);
  ein_plan_ir *ir = ein_arena_alloc(&arena, 1, sizeof *ir);
  if (!ir) {
    ein_arena_destroy(&arena);
    return planner_no_memory(pl);
  }
  ir->arena = arena;
  *out = ir;
  const ein_plan_ir *m = pl->ir;
  ir->dtype = m->dtype;
  ir->reduction = EIN_REDUCE_SUM;
  ir->naxes = m->naxes;
  ir->axis_labels = m->axis_labels;
  ir->axis_sizes = m->axis_sizes;
  ir->axis_roles = m->axis_roles;
  ir->ninputs = 1;
  ir->out_ndim = m->out_ndim;
  ir->out_shape = m->out_shape;
  ir->path_method = "slices";
  *sub = *pl;
  sub->ir = ir;
  sub->arena = &ir->arena;
  sub->cap_steps = 1;
  sub->cap_bufs = 2;
  ir->steps = ein_arena_alloc(sub->arena, 1, sizeof(ein_step));
  ir->buffers = ein_arena_alloc(sub->arena, 2, sizeof(ein_plan_buffer));
  if (!ir->steps || !ir->buffers) return planner_no_memory(pl);
  add_buffer(sub, EIN_BUF_INPUT, 0, m->dtype, 0);
  add_buffer(sub, EIN_BUF_OUTPUT, -1, m->dtype, 0);
  return EIN_OK;
}

static void finish_sub(ein_plan_ir *ir) {
  decide_numerics(&ir->steps[0]);
  ir->flops = ir->steps[0].flops;
  ir->bytes_moved = ir->steps[0].bytes_read + ir->steps[0].bytes_written;
}

/* add: out[e] = in[e] + in[E + e], E = acc_elems, both compact. */
static ein_status plan_add(planner *pl, int64_t E) {
  planner sub;
  ein_plan_ir **add = &pl->ir->slicing.add;
  ein_status st = sub_plan(pl, &sub, add);
  if (st) return st;
  ein_step *s = add_step(&sub);
  s->axes = ein_arena_alloc(sub.arena, 2, sizeof *s->axes);
  if (!s->axes) return planner_no_memory(pl);
  s->kind = EIN_STEP_LOOP;
  s->role = EIN_ROLE_REDUCE;
  s->nsrc = 1;
  s->op = EIN_REDUCE_SUM;
  s->dst = (ein_ref){1, 0};
  s->src[0] = (ein_ref){0, 0};
  s->dst_dtype = s->src_dtype[0] = pl->dtype;
  s->naxes = 2;
  s->axes[0] = (ein_loop_axis){-1, E, {1, 1, 0}};
  s->axes[1] = (ein_loop_axis){-1, 2, {0, E, 0}};
  s->flops = (double)E;
  s->bytes_read = 2 * (double)E * (double)ein_dtype_size(pl->dtype);
  s->bytes_written = (double)E * (double)ein_dtype_size(pl->dtype);
  finish_sub(*add);
  return EIN_OK;
}

/* store: the compact sum `compact` copied into the caller's view `want`
 * (the same axes). */
static ein_status plan_store(planner *pl, const pview *compact,
                             const pview *want) {
  planner sub;
  ein_plan_ir **store = &pl->ir->slicing.store;
  ein_status st = sub_plan(pl, &sub, store);
  if (st) return st;
  pview src = *compact, dst = *want;
  src.buf = 0;
  dst.buf = 1;
  const pview *srcs[1] = {&src};
  if ((st = emit_loop(&sub, EIN_ROLE_STORE, &dst, 1, srcs, EIN_REDUCE_SUM, 1)))
    return st;
  finish_sub(*store);
  return EIN_OK;
}

/* zero: one FILL step of 0 over the output piece `outv` of one slice, so
 * that a range of units (ein_plan_run_units) leaves zeros in the pieces
 * it does not write and partials add up. */
ein_status plan_zero(planner *pl, const pview *outv) {
  if (pl->ir->slicing.nkept == 0) return EIN_OK;
  planner sub;
  ein_status st = sub_plan(pl, &sub, &pl->ir->slicing.zero);
  if (st) return st;
  ein_step *s = add_step(&sub);
  s->axes = ein_arena_alloc(sub.arena, (size_t)outv->n + 1, sizeof *s->axes);
  if (!s->axes) return planner_no_memory(pl);
  s->kind = EIN_STEP_FILL;
  s->role = EIN_ROLE_EMPTY;
  s->fill = 0;
  s->dst = (ein_ref){1, 0};
  s->dst_dtype = pl->dtype;
  double total = 1;
  for (int i = 0; i < outv->n; i++) {
    int64_t n = pl->size[outv->ax[i]];
    s->axes[s->naxes++] = (ein_loop_axis){outv->ax[i], n, {outv->st[i], 0, 0}};
    total *= (double)n;
  }
  s->bytes_written = total * (double)ein_dtype_size(pl->dtype);
  finish_sub(pl->ir->slicing.zero);
  return EIN_OK;
}

/* When a summed axis is sliced the plan writes a compact output slice
 * (the accumulation buffers) instead of the caller's output: outv is
 * made compact, and the store plan copies into the caller's layout. */
ein_status slice_output(planner *pl, pview *outv) {
  ein_slicing *sl = &pl->ir->slicing;
  if (sl->n == sl->nkept) return EIN_OK;
  pview want = *outv, compact;
  ein_status st;
  int *order = ein_arena_alloc(pl->arena, (size_t)outv->n + 1, sizeof(int));
  if (!order) return planner_no_memory(pl);
  view_sort(&want);
  memcpy(order, want.ax, sizeof(int) * (size_t)want.n);
  int64_t saved = pl->ir->workspace_bytes, largest = pl->ir->largest_intermediate;
  /* A temp's compact layout, on the output buffer: no workspace. */
  if ((st = temp_view(pl, order, want.n, pl->dtype, &compact))) return st;
  pl->ir->nbuffers--;
  pl->ir->workspace_bytes = saved;
  pl->ir->largest_intermediate = largest;
  compact.buf = outv->buf;
  sl->acc_elems = 1;
  for (int i = 0; i < compact.n; i++) sl->acc_elems *= pl->size[compact.ax[i]];
  if ((st = plan_store(pl, &compact, outv)) || (st = plan_add(pl, sl->acc_elems)))
    return st;
  *outv = compact;
  return EIN_OK;
}

int64_t ein_plan_slice_bytes_ir(const ein_plan_ir *ir) {
  const ein_slicing *sl = &ir->slicing;
  return ir->workspace_bytes +
         3 * sl->acc_elems * (int64_t)ein_dtype_size(ir->dtype);
}
