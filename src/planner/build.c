/*
 * build.c - ein_plan_build, the planner's driver: steps for an empty
 * problem, one operand or the contraction tree; the workspace packed; a
 * second plan over the search's slices, in chunks the memory limit allows;
 * a sliced plan's totals (its whole, unsliced FLOPs planned once more);
 * the plan of an order past int64, kept runnable only under a limit.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "cost.h"
#include "path.h"
#include "path_given.h"
#include "planner_internal.h"

/* The totals of a sliced plan: every slice's FLOPs and bytes, the adds,
 * and the FLOPs of the same expression planned whole. */
/* Every step's sector bytes, the slice sums' sub-plans' too (slice.c
 * made them; cost.c reads slice.c, so they are recorded here). */
static void record_sectors(ein_plan_ir *ir) {
  ein_plan_ir *subs[4] = {ir, ir->slicing.add, ir->slicing.store,
                          ir->slicing.zero};
  for (int i = 0; i < 4; i++)
    if (subs[i]) ein_cost_record_sectors(subs[i]);
}

static void slicing_totals(planner *pl, const ein_tensor_desc *inputs,
                           const ein_tensor_desc *output,
                           const ein_plan_limits *limits) {
  ein_plan_ir *ir = pl->ir;
  ein_slicing *sl = &ir->slicing;
  if (!sl->n) return;
  sl->slice_flops = ir->flops;
  double pieces = 1;
  for (int k = 0; k < sl->nkept; k++) pieces *= (double)sl->sizes[k];
  double adds = sl->add ? sl->count - pieces : 0;
  ir->flops = sl->slice_flops * sl->count + (sl->add ? adds * sl->add->flops : 0);
  ir->bytes_moved = ir->bytes_moved * sl->count +
                    (sl->add ? adds * sl->add->bytes_moved +
                                   pieces * sl->store->bytes_moved
                             : 0);
  sl->unsliced_largest = limits->unsliced_largest;
  if (limits->unsliced_flops > 0) {
    sl->unsliced_flops = limits->unsliced_flops;
    return;
  }
  ein_plan_limits whole = {.path = limits->path};
  ein_plan_ir *unsliced = NULL;
  ein_error_rec quiet = {0};
  if (ein_plan_build(pl->p, inputs, output, pl->caps, &whole, &quiet,
                     &unsliced) == EIN_OK)
    sl->unsliced_flops = unsliced->flops;
  ein_plan_ir_destroy(unsliced);
  ein_error_clear(&quiet);
}


/* The steps: a fill for an empty problem, one LOOP for one operand, else
 * the contraction tree. */
static ein_status plan_steps(planner *pl, bool empty, pview *inv,
                             pview *outv) {
  ein_plan_ir *ir = pl->ir;
  const ein_problem *p = pl->p;
  if (empty) {
    ir->path_method = "none";
    return plan_empty(pl, outv);
  }
  if (p->ninputs > 1) return plan_contraction(pl, inv, outv);
  ir->path_method = "single";
  double alpha = p->reduction == EIN_REDUCE_MEAN ? 1 / reduced_count(pl) : 1;
  const pview *src[1] = {&inv[0]};
  ein_status st =
      emit_loop(pl, EIN_ROLE_SINGLE, outv, 1, src, p->reduction, alpha);
  if (!st) {
    ir->steps[0].operand[0] = 0;
    ir->steps[0].result = 1;
  }
  return st;
}

/* The caller's contraction order, checked against the operand count
 * whether or not the plan contracts (one operand takes "[]"). */
static ein_status given_path(planner *pl, const char *text) {
  int n = pl->p->ninputs;
  pl->given = ein_arena_alloc(pl->arena, (size_t)n, sizeof *pl->given);
  if (!pl->given) return planner_no_memory(pl);
  return ein_path_given(text, n, pl->given, pl->err);
}

/* Sets up the planner over a new plan; checks the operand count and
 * dtypes and picks the compute dtype and the memory limit. */
static ein_status planner_init(planner *pl, const ein_tensor_desc *inputs,
                               const ein_tensor_desc *output,
                               const ein_plan_limits *limits) {
  const ein_problem *p = pl->p;
  ein_plan_ir *ir = pl->ir;
  if (p->ninputs < 1)
    return ein_fail(pl->err, EIN_ERR_OPERAND_COUNT,
                    "an expression needs at least one input to evaluate");
  pl->dtype = inputs[0].dtype;
  ein_status st = check_dtypes(pl, inputs, output);
  if (st) return st;
  pl->cdtype = pl->caps->round_intermediates ? pl->dtype
                                              : ein_dtype_compute(pl->dtype);
  pl->limits = limits;
  if (limits && limits->memory_limit > 0) {
    pl->memory_limit_bytes = limits->memory_limit;
    pl->memory_limit =
        (double)limits->memory_limit / (double)ein_dtype_size(pl->cdtype);
    if (limits->search_limit > 0 && limits->search_limit < pl->memory_limit)
      pl->memory_limit = limits->search_limit;
  }
  if (limits && limits->ssa_path) {
    int n = pl->p->ninputs;
    pl->given = ein_arena_alloc(pl->arena, (size_t)n, sizeof *pl->given);
    if (!pl->given) return planner_no_memory(pl);
    memcpy(pl->given, limits->ssa_path, sizeof *pl->given * (size_t)(n - 1));
    pl->given_method = limits->path_method;
  } else if (limits && limits->path && *limits->path &&
             (st = given_path(pl, limits->path))) {
    return st;
  }
  ir->dtype = pl->dtype;
  ir->reduction = p->reduction;
  ir->ninputs = p->ninputs;
  ir->naxes = p->naxes;
  return EIN_OK;
}

/* The largest d <= cap dividing n (n >= 1, cap >= 1). */
static int64_t largest_divisor_within(int64_t n, double cap) {
  for (int64_t d = cap >= (double)n ? n : (int64_t)cap; d > 1; d--)
    if (n % d == 0) return d;
  return 1;
}

/* How many indices of each axis the search sliced one slice takes: the
 * one rule for chunks (docs/design.md, "Chunked slices"). The search sized
 * its slices at one index of each axis, its largest intermediate then
 * `slice_largest` elements; an intermediate grows at most by the product
 * of the chunks of the axes it holds, so each axis in turn takes the
 * largest chunk dividing its size within the headroom the limit leaves
 * (the fewest slices the limit allows: each slice pays fixed costs). */
static void choose_chunks(const planner *pl, const ein_path_result *r,
                          int64_t *chunks) {
  double headroom = r->slice_largest > 0
                        ? floor(pl->memory_limit / r->slice_largest)
                        : 1;
  for (int k = 0; k < r->nsliced; k++) {
    int64_t size = pl->full[r->sliced[k]];
    chunks[k] = headroom >= 2 ? largest_divisor_within(size, headroom) : 1;
    headroom = floor(headroom / (double)chunks[k]);
  }
}

/* What a second plan over the search's slices takes (ein_plan_build):
 * the sliced axes (the caller's first) and their chunks, the per-slice
 * path, in memory of their own since the first plan is destroyed. */
static ein_status reslice_limits(planner *pl, const ein_plan_limits *limits,
                                 ein_plan_limits *again) {
  const ein_path_result *r = pl->reslice;
  const ein_slicing *sl = &pl->ir->slicing;
  int n = pl->p->ninputs, nids = sl->n + r->nsliced;
  int *ids = ein_malloc(sizeof(int) * (size_t)(nids + 1));
  int64_t *chunks = ein_malloc(sizeof(int64_t) * (size_t)(nids + 1));
  int (*pairs)[2] = ein_malloc(sizeof *pairs * (size_t)n);
  if (!ids || !chunks || !pairs) {
    ein_free(ids);
    ein_free(chunks);
    ein_free(pairs);
    return planner_no_memory(pl);
  }
  for (int k = 0; k < sl->n; k++) ids[k] = sl->axes[k];
  for (int k = 0; k < sl->n; k++) chunks[k] = sl->chunk[k];
  for (int k = 0; k < r->nsliced; k++) ids[sl->n + k] = r->sliced[k];
  choose_chunks(pl, r, chunks + sl->n);
  memcpy(pairs, r->pairs, sizeof *pairs * (size_t)(n - 1));
  if (limits) *again = *limits;
  again->slice_ids = ids;
  again->slice_chunks = chunks;
  again->nslice_ids = nids;
  again->ssa_path = (const int(*)[2])pairs;
  again->path_method = r->method;
  again->unsliced_flops = r->free_flops;
  again->unsliced_largest = r->free_largest;
  return EIN_OK;
}

static ein_status plan_build(const ein_problem *p, const ein_tensor_desc *inputs,
                             const ein_tensor_desc *output,
                             const ein_backend_caps *caps,
                             const ein_plan_limits *limits, ein_error_rec *err,
                             ein_plan_ir **out, ein_plan_limits *again,
                             bool *over) {
  ein_arena arena;
  ein_arena_init(&arena);
  ein_plan_ir *ir = ein_arena_alloc(&arena, 1, sizeof *ir);
  if (!ir) {
    ein_arena_destroy(&arena);
    return ein_fail_memory(err, "out of memory while planning");
  }
  ir->arena = arena;
  planner pl = {.p = p, .caps = caps, .ir = ir, .arena = &ir->arena,
                .err = err};
  bool empty;
  pview *inv, outv;
  ein_status st;
  *over = false;
  if ((st = planner_init(&pl, inputs, output, limits)) ||
      (st = alloc_plan_arrays(&pl)) || (st = record_axes(&pl, &empty)))
    goto fail;
  record_baselines(&pl, inputs, output);
  if ((st = setup_slicing(&pl, limits, empty)) ||
      (st = operand_views(&pl, inputs, output, empty, &inv, &outv)) ||
      (!empty && pl.ir->slicing.n && (st = plan_zero(&pl, &outv))) ||
      (!empty && (st = slice_output(&pl, &outv))) ||
      (st = plan_steps(&pl, empty, inv, &outv))) {
    if (pl.reslice && again) st = reslice_limits(&pl, limits, again);
    if (!st) st = EIN_ERR_LIMIT;
    goto fail;
  }
  if (pl.oom) {
    st = planner_no_memory(&pl);
    goto fail;
  }
  if ((st = pack_workspace(&pl))) goto fail;
  if ((st = check_buffers(&pl))) {
    *over = true;
    goto fail;
  }
  for (int i = 0; i < ir->nsteps; i++) decide_numerics(&ir->steps[i]);
  if (!ir->slicing.n && (st = ein_plan_find_view(ir, output))) {
    st = planner_no_memory(&pl);
    goto fail;
  }
  record_sectors(ir);
  for (int i = 0; i < ir->nsteps; i++) {
    ir->flops += ir->steps[i].flops;
    ir->bytes_moved += ir->steps[i].bytes_read + ir->steps[i].bytes_written;
  }
  slicing_totals(&pl, inputs, output, limits);
  *out = ir;
  return EIN_OK;
fail:
  ein_plan_ir_destroy(ir);
  return st;
}

/* One plan at the limits; when the search fits only sliced, a second plan
 * over those slices. *over: the plan failed only because a layout copy
 * or a sum exceeds the limit (check_buffers). */
static ein_status plan_round(const ein_problem *p,
                             const ein_tensor_desc *inputs,
                             const ein_tensor_desc *output,
                             const ein_backend_caps *caps,
                             const ein_plan_limits *limits,
                             ein_error_rec *err, ein_plan_ir **out,
                             bool *over) {
  ein_plan_limits again = {0};
  ein_status st =
      plan_build(p, inputs, output, caps, limits, err, out, &again, over);
  if (st != EIN_ERR_LIMIT || !again.ssa_path) return st;
  ein_error_clear(err);
  st = plan_build(p, inputs, output, caps, &again, err, out, NULL, over);
  if (st == EIN_ERR_LIMIT && *over) {
    /* chunks bound intermediates, not layout copies: one index each */
    ein_free((void *)again.slice_chunks);
    again.slice_chunks = NULL;
    ein_error_clear(err);
    st = plan_build(p, inputs, output, caps, &again, err, out, NULL, over);
  }
  ein_free((void *)again.slice_ids);
  ein_free((void *)again.slice_chunks);
  ein_free((void *)again.ssa_path);
  return st;
}

/* A plan whose searched order has an intermediate past what int64 counts
 * (EIN_ERR_OVERFLOW with no memory limit, path or slices given): made
 * again sliced at EIN_PLAN_COUNTABLE_BYTES, so that any network gets a
 * path, its costs and its largest intermediate; marked needs_limit_elems
 * (refused at execution). st when that cannot be made either. */
static ein_status plan_past_int64(const ein_problem *p,
                                  const ein_tensor_desc *inputs,
                                  const ein_tensor_desc *output,
                                  const ein_backend_caps *caps,
                                  const ein_plan_limits *limits,
                                  ein_error_rec *err, ein_plan_ir **out,
                                  ein_status st) {
  ein_plan_limits countable = limits ? *limits : (ein_plan_limits){0};
  if (st != EIN_ERR_OVERFLOW || countable.memory_limit ||
      (countable.path && *countable.path) ||
      (countable.slice_axes && *countable.slice_axes))
    return st;
  countable.memory_limit = EIN_PLAN_COUNTABLE_BYTES;
  /* Planned for its report and refused at execution: the plain limited
   * search, as before 2026-11-29. The windowed one's cheaper tree for
   * test_slicing's network past int64 had more intermediates at 2^60
   * bytes than the int64 workspace sums, and the second search cost the
   * test 5 s of CPU. */
  countable.path_limited = EIN_PATH_LIMITED_PLAIN;
  ein_error_rec quiet = {0};
  ein_plan_ir *ir = NULL;
  ein_status again = ein_plan_build(p, inputs, output, caps, &countable,
                                    &quiet, &ir);
  ein_error_clear(&quiet);
  if (again) return st;
  ein_error_clear(err);
  ir->needs_limit_elems = ir->slicing.unsliced_largest > 0
                              ? ir->slicing.unsliced_largest
                              : 9.3e18; /* (past int64, by its failure) */
  *out = ir;
  return EIN_OK;
}

/* Plans at `tight` (which carries the call's path memo), holding the
 * search tighter while layout copies or sums exceed the limit. */
static ein_status plan_tightening(const ein_problem *p,
                                  const ein_tensor_desc *inputs,
                                  const ein_tensor_desc *output,
                                  const ein_backend_caps *caps,
                                  const ein_plan_limits *limits,
                                  ein_plan_limits tight, ein_error_rec *err,
                                  ein_plan_ir **out) {
  ein_status st = EIN_OK;
  /* Layout copies and sums past the limit: the search held 4x tighter,
   * a few times, before giving up with the first message. */
  for (int round = 0; round < 6; round++) {
    bool over = false;
    st = plan_round(p, inputs, output, caps, &tight, err, out, &over);
    if (st == EIN_ERR_OVERFLOW)
      return plan_past_int64(p, inputs, output, caps, limits, err, out, st);
    if (st != EIN_ERR_LIMIT || !over || tight.path) return st;
    ein_plan_ir *probe = NULL;
    ein_error_rec quiet = {0};
    double elems = (double)tight.memory_limit /
                   (double)ein_dtype_size(ein_dtype_compute(inputs[0].dtype));
    tight.search_limit = (tight.search_limit > 0 ? tight.search_limit : elems) / 4;
    if (tight.search_limit < 1) return st;
    ein_status again = plan_round(p, inputs, output, caps, &tight, &quiet,
                                  &probe, &over);
    ein_error_clear(&quiet);
    if (!again) {
      ein_error_clear(err);
      *out = probe;
      return EIN_OK;
    }
  }
  return st;
}

/* A plan; when the path search fits the memory limit only by slicing, a
 * second plan over those slices (the caller's sliced axes kept), on the
 * per-slice path the search found; past int64, plan_past_int64's. One
 * path memo for the call: its retries reuse the unlimited search. */
ein_status ein_plan_build(const ein_problem *p, const ein_tensor_desc *inputs,
                          const ein_tensor_desc *output,
                          const ein_backend_caps *caps,
                          const ein_plan_limits *limits, ein_error_rec *err,
                          ein_plan_ir **out) {
  ein_plan_limits tight = limits ? *limits : (ein_plan_limits){0};
  ein_path_memo memo;
  ein_path_memo_init(&memo);
  tight.path_memo = &memo;
  ein_status st =
      plan_tightening(p, inputs, output, caps, limits, tight, err, out);
  if (!st && *out && !(*out)->path_free_searches) {
    (*out)->path_free_searches = memo.searches;
    (*out)->path_free_reused = memo.reused;
  }
  ein_path_memo_destroy(&memo);
  return st;
}
