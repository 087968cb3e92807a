/*
 * workspace.c - the plan's temporaries packed into one workspace: each
 * buffer's life in steps, first fit by size into offsets (buffers whose
 * lives do not meet share bytes), and the check that every buffer is
 * within the memory limit.
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

/* Temporaries share the workspace where their lives do not overlap: a
 * buffer lives from the first step that touches it to the last, and takes
 * the lowest EIN_TEMP_ALIGN-aligned offset clear of every buffer live with it
 * (first fit, in order of first use). A network's plan then needs about
 * its live intermediates, not the sum of all of them. */
/* first[b] and last[b]: the first and last step touching buffer b. */
static void buffer_lives(const ein_plan_ir *ir, int *first, int *last) {
  for (int b = 0; b < ir->nbuffers; b++) first[b] = last[b] = -1;
  for (int i = 0; i < ir->nsteps; i++) {
    const ein_step *st = &ir->steps[i];
    int bufs[3] = {st->dst.buffer, st->nsrc > 0 ? st->src[0].buffer : -1,
                   st->nsrc > 1 ? st->src[1].buffer : -1};
    for (int k = 0; k < 3; k++)
      if (bufs[k] >= 0) {
        if (first[bufs[k]] < 0) first[bufs[k]] = i;
        last[bufs[k]] = i;
      }
  }
}

static int64_t buffer_end(const ein_plan_buffer *b) {
  return b->offset + b->elems * (int64_t)ein_dtype_size(b->dtype);
}

/* The lowest EIN_TEMP_ALIGN-aligned offset where `size` bytes overlap none of
 * the live buffers. */
static int64_t first_fit(const ein_plan_ir *ir, const int *live, int nlive,
                         int64_t size) {
  int64_t off = 0;
  for (bool moved = true; moved;) {
    moved = false;
    for (int k = 0; k < nlive; k++) {
      const ein_plan_buffer *o = &ir->buffers[live[k]];
      if (off < buffer_end(o) && o->offset < off + size) {
        off = (buffer_end(o) + EIN_TEMP_ALIGN - 1) /
              EIN_TEMP_ALIGN * EIN_TEMP_ALIGN;
        moved = true;
      }
    }
  }
  return off;
}

static int cmp_pair(const void *a, const void *b) {
  const int *x = a, *y = b;
  return x[0] != y[0] ? (x[0] > y[0]) - (x[0] < y[0])
                      : (x[1] > y[1]) - (x[1] < y[1]);
}

ein_status pack_workspace(planner *pl) {
  ein_plan_ir *ir = pl->ir;
  int nb = ir->nbuffers, nlive = 0, norder = 0;
  int *first = ein_malloc(sizeof(int) * (size_t)(nb + 1));
  int *last = ein_malloc(sizeof(int) * (size_t)(nb + 1));
  int *live = ein_malloc(sizeof(int) * (size_t)(nb + 1));
  int (*order)[2] = ein_malloc(sizeof *order * (size_t)(nb + 1));
  if (!first || !last || !live || !order) {
    ein_free(first), ein_free(last), ein_free(live), ein_free(order);
    return planner_no_memory(pl);
  }
  buffer_lives(ir, first, last);
  for (int b = 0; b < nb; b++) /* temporaries by (first use, id) */
    if (ir->buffers[b].kind == EIN_BUF_TEMP && first[b] >= 0)
      order[norder][0] = first[b], order[norder++][1] = b;
  qsort(order, (size_t)norder, sizeof *order, cmp_pair);
  int64_t top = 0;
  for (int j = 0; j < norder; j++) {
    int b = order[j][1], kept = 0;
    for (int k = 0; k < nlive; k++) /* drop the buffers dead by now */
      if (last[live[k]] >= first[b]) live[kept++] = live[k];
    nlive = kept;
    ein_plan_buffer *buf = &ir->buffers[b];
    buf->offset = first_fit(ir, live, nlive,
                            buf->elems * (int64_t)ein_dtype_size(buf->dtype));
    if (buffer_end(buf) > top) top = buffer_end(buf);
    live[nlive++] = b;
    int64_t live_bytes = 0; /* the temporaries alive at b's first step */
    for (int k = 0; k < nlive; k++)
      live_bytes += buffer_end(&ir->buffers[live[k]]) -
                    ir->buffers[live[k]].offset;
    if (live_bytes > ir->peak_temp_bytes) ir->peak_temp_bytes = live_bytes;
  }
  ein_free(first), ein_free(last), ein_free(live), ein_free(order);
  ir->workspace_bytes = top;
  return EIN_OK;
}

/* The memory limit covers every buffer the plan allocates, not only the
 * path's intermediates: pre-reductions, layout copies and stores too, and
 * a sliced plan's accumulation buffers: a limit that left them out
 * let a sliced plan allocate past it. */
ein_status check_buffers(planner *pl) {
  if (pl->memory_limit_bytes <= 0) return EIN_OK;
  const ein_plan_ir *ir = pl->ir;
  int worst = -1;
  int64_t worst_bytes = ir->slicing.acc_elems *
                        (int64_t)ein_dtype_size(ir->dtype);
  for (int b = 0; b < ir->nbuffers; b++) {
    const ein_plan_buffer *buf = &ir->buffers[b];
    int64_t bytes = buf->kind == EIN_BUF_TEMP
                        ? buf->elems * (int64_t)ein_dtype_size(buf->dtype)
                        : 0;
    if (bytes > worst_bytes) worst_bytes = bytes, worst = b;
  }
  if (worst_bytes <= pl->memory_limit_bytes) return EIN_OK;
  const char *what = "a sum of sliced output pieces";
  int step = 0;
  for (int i = 0; i < ir->nsteps && worst >= 0; i++)
    if (ir->steps[i].dst.buffer == worst) {
      what = ein_step_role_name(ir->steps[i].role);
      step = i + 1;
      break;
    }
  return ein_fail_limit(
      pl->err,
      "the plan needs a buffer of %lld bytes (%s%s%.0d) but the memory "
      "limit is %lld bytes; a limit of %lld bytes fits this plan, or slice "
      "axes (slice_axes, --slice) to shrink every buffer",
      (long long)worst_bytes, what, step ? ", written by step " : "", step,
      (long long)pl->memory_limit_bytes, (long long)worst_bytes);
}
