/*
 * contract.c - the contraction of several operands: dtypes checked, the
 * leaves (axes private to one operand summed first), the order from the
 * path search (path/, or the caller's), the tree built from it and emitted
 * top-down so each intermediate is written in the layout its consumer
 * wants (planner_internal.h's opening, points 3 and 4); an empty problem's fill.
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

ein_status check_dtypes(planner *pl, const ein_tensor_desc *inputs,
                        const ein_tensor_desc *output) {
  const ein_problem *p = pl->p;
  for (int i = 1; i < p->ninputs; i++)
    if (inputs[i].dtype != inputs[0].dtype)
      return ein_fail_dtype(pl->err,
                            "operand %d is %s but operand 1 is %s; einc "
                            "needs one dtype for all operands",
                            i + 1, ein_dtype_name(inputs[i].dtype),
                            ein_dtype_name(inputs[0].dtype));
  ein_dtype dt = inputs[0].dtype;
  if (output->dtype != dt)
    return ein_fail_dtype(pl->err, "the output is %s but the operands are %s",
                          ein_dtype_name(output->dtype), ein_dtype_name(dt));
  bool reduces = false;
  for (int a = 0; a < p->naxes; a++)
    reduces |= ein_axis_reduced(p, a) && p->axes[a].size != 1;
  ein_reduction r = p->reduction;
  if (dt == EIN_DT_BOOL) {
    if (p->ninputs > 1)
      return ein_fail_dtype(pl->err,
                            "bool operands cannot be multiplied and summed; "
                            "contractions need a numeric dtype");
    if (reduces && (r == EIN_REDUCE_SUM || r == EIN_REDUCE_MEAN ||
                    r == EIN_REDUCE_PROD))
      return ein_fail_dtype(pl->err,
                            "the reduction '%s' needs a numeric dtype, not "
                            "bool; use any, all, max or min",
                            ein_reduction_name(r));
  }
  /* Refused even when nothing is reduced, so that whether a call works
   * never hangs on an axis being of size 1. */
  if (ein_dtype_is_complex(dt) && r != EIN_REDUCE_SUM &&
      r != EIN_REDUCE_MEAN && r != EIN_REDUCE_PROD)
    return ein_fail_dtype(pl->err,
                          "the reduction '%s' is not defined on %s: complex "
                          "numbers have no order (and no truth value); use "
                          "sum, mean or prod",
                          ein_reduction_name(r), ein_dtype_name(dt));
  if (r == EIN_REDUCE_MEAN && reduces && !ein_dtype_is_float(dt) &&
      !ein_dtype_is_complex(dt))
    return ein_fail_dtype(pl->err,
                          "the reduction 'mean' needs a floating-point "
                          "dtype, not %s",
                          ein_dtype_name(dt));
  return EIN_OK;
}

/* The value of a reduction over nothing. */
static ein_status empty_value(planner *pl, double *v) {
  switch (pl->p->reduction) {
  case EIN_REDUCE_SUM: case EIN_REDUCE_ANY: *v = 0; return EIN_OK;
  case EIN_REDUCE_PROD: case EIN_REDUCE_ALL: *v = 1; return EIN_OK;
  case EIN_REDUCE_MEAN: *v = NAN; return EIN_OK;
  case EIN_REDUCE_MAX: case EIN_REDUCE_MIN: break;
  }
  return ein_fail(pl->err, EIN_ERR_BAD_REDUCTION,
                  "the reduction '%s' over an empty axis has no "
                  "value (no identity); einc refuses, as numpy does",
                  ein_reduction_name(pl->p->reduction));
}

ein_status plan_empty(planner *pl, const pview *outv) {
  double total = 1;
  for (int d = 0; d < pl->p->output.ndim; d++)
    total *= (double)pl->p->output.dims[d].size;
  if (total == 0) return EIN_OK; /* nothing to write */
  double v = 0;
  ein_status st = empty_value(pl, &v);
  if (st) return st;
  ein_step *s = add_step(pl);
  if (!s) return planner_internal(pl, "too many steps");
  s->kind = EIN_STEP_FILL;
  s->role = EIN_ROLE_EMPTY;
  s->fill = v;
  s->dst = (ein_ref){outv->buf, outv->off};
  s->dst_dtype = buffer_dtype(pl, outv->buf);
  s->axes = ein_arena_alloc(pl->arena, (size_t)(outv->n ? outv->n : 1),
                            sizeof *s->axes);
  if (!s->axes) return planner_no_memory(pl);
  for (int i = 0; i < outv->n; i++)
    s->axes[s->naxes++] = (ein_loop_axis){outv->ax[i], pl->size[outv->ax[i]],
                                          {outv->st[i], 0, 0}};
  s->bytes_written = total * (double)ein_dtype_size(s->dst_dtype);
  return EIN_OK;
}

double reduced_count(const planner *pl) {
  double c = 1;
  for (int a = 0; a < pl->p->naxes; a++)
    if (ein_axis_reduced(pl->p, a)) c *= (double)pl->full[a];
  return c;
}

/* The leaves of the tree: each operand keeps the axes the output or
 * another operand has; the others are summed away by reduce_leaf.
 * count[a] says how many operands hold axis a (the output counting as
 * one), so each leaf is found in the time of its own axes. */
static ein_status make_leaves(planner *pl, const pview *inv, axset outset,
                              axset *sets, int *count) {
  int n = pl->p->ninputs;
  pl->nodes = ein_arena_alloc(pl->arena, (size_t)(2 * n), sizeof *pl->nodes);
  if (!pl->nodes) return planner_no_memory(pl);
  for (int i = 0; i < outset.n; i++) count[outset.ax[i]]++;
  for (int i = 0; i < n; i++)
    for (int k = 0; k < sets[i].n; k++) count[sets[i].ax[k]]++;
  for (int i = 0; i < n; i++) {
    node *nd = &pl->nodes[pl->nnodes++];
    nd->left = nd->right = nd->parent = -1;
    nd->opnum = i;
    nd->view = inv[i];
    nd->set = set_new(pl, sets[i].n);
    if (!nd->set.ax) return planner_no_memory(pl);
    for (int k = 0; k < sets[i].n; k++) {
      int a = sets[i].ax[k];
      if (count[a] > 1) nd->set.ax[nd->set.n++] = a;
    }
  }
  /* From here count[a] is the number of live nodes holding a (plus the
   * output), as build_tree keeps it. */
  for (int i = 0; i < n; i++) {
    for (int k = 0; k < sets[i].n; k++) count[sets[i].ax[k]]--;
    for (int k = 0; k < pl->nodes[i].set.n; k++)
      count[pl->nodes[i].set.ax[k]]++;
    sets[i] = pl->nodes[i].set;
  }
  return EIN_OK;
}

/* The largest intermediate of the tree (the root, the output, aside):
 * *at is its node, -1 when there is none. */
static double tree_largest(const planner *pl, int n, int *at) {
  double worst = 0;
  *at = -1;
  for (int k = n; k < pl->nnodes - 1; k++) {
    double v = set_volume(pl, pl->nodes[k].set);
    if (v > worst) worst = v, *at = k;
  }
  return worst;
}

/* A given path may need more than the limit: an EIN_ERR_LIMIT naming the
 * largest intermediate it needs. The root is the output, not an
 * intermediate. (A searched path is checked by search_path.) */
static ein_status check_memory_limit(planner *pl, int n) {
  if (pl->memory_limit <= 0 || !pl->given) return EIN_OK;
  int worst;
  double worst_elems = tree_largest(pl, n, &worst);
  if (worst < 0 || worst_elems <= pl->memory_limit) return EIN_OK;
  size_t es = ein_dtype_size(pl->cdtype);
  return ein_fail_limit(
      pl->err,
      "the given path needs %.0f bytes (%.0f elements of %s) for the result "
      "of its step %d, over the memory limit of %lld bytes; slice axes "
      "(slice_axes, --slice) to shrink it",
      worst_elems * (double)es, worst_elems, ein_dtype_name(pl->cdtype),
      worst - n + 1, (long long)pl->memory_limit_bytes);
}

/* The leaves' and the output's axis id lists as path.h takes them. */
static ein_status path_query_of(planner *pl, axset outset, const axset *sets,
                                ein_path_query *q) {
  int n = pl->p->ninputs;
  const int **axes = ein_arena_alloc(pl->arena, (size_t)n, sizeof *axes);
  int *naxes = ein_arena_alloc(pl->arena, (size_t)n, sizeof *naxes);
  if (!axes || !naxes) return planner_no_memory(pl);
  for (int i = 0; i < n; i++) axes[i] = sets[i].ax, naxes[i] = sets[i].n;
  *q = (ein_path_query){.n = n, .axes = axes, .naxes = naxes,
                        .output_axes = outset.ax, .output_naxes = outset.n,
                        .total_axes = pl->p->naxes, .sizes = pl->size,
                        .memory_limit = pl->memory_limit};
  if (pl->limits) {
    q->time_budget = pl->limits->plan_time;
    q->seed = pl->limits->seed;
    q->objective = (ein_path_objective)pl->limits->objective;
    q->memo = pl->limits->path_memo;
    q->limited = pl->limits->path_limited;
  }
  /* Slicing a summed axis keeps sums of one output piece: where the whole
   * output is past the limit, only output axes are sliced (their pieces
   * need no sums). Axes a non-sum reduction combines are never sliced. */
  bool sum_ok = pl->p->reduction == EIN_REDUCE_SUM ||
                pl->p->reduction == EIN_REDUCE_MEAN;
  if (pl->memory_limit > 0 &&
      (!sum_ok || set_volume(pl, outset) > pl->memory_limit)) {
    bool *no = ein_arena_alloc(pl->arena, (size_t)pl->p->naxes + 1, 1);
    if (!no) return planner_no_memory(pl);
    for (int a = 0; a < pl->p->naxes; a++) no[a] = !pl->p->axes[a].in_output;
    q->no_slice = no;
  }
  return EIN_OK;
}

/* Even slicing cannot meet the limit: what the contraction needs (the
 * unlimited path's largest intermediate) and what slicing reaches. */
static ein_status limit_error(planner *pl, const ein_path_result *r) {
  double es = (double)ein_dtype_size(pl->cdtype);
  return ein_fail_limit(
      pl->err,
      "no contraction order keeps every intermediate within the memory "
      "limit of %lld bytes: the contraction's best order needs %.0f bytes "
      "(%.0f elements of %s) for its largest intermediate, and even "
      "slicing every axis leaves one of %.0f bytes; a limit of %.0f bytes "
      "would fit",
      (long long)pl->memory_limit_bytes, r->free_largest * es,
      r->free_largest, ein_dtype_name(pl->cdtype), r->fit_largest * es,
      r->fit_largest * es);
}

/* The searched order as SSA pairs. When it fits the limit only sliced,
 * the plan is made again over those slices (pl->reslice, ein_plan_build):
 * EIN_ERR_LIMIT stands in until then. */
static ein_status search_path(planner *pl, axset outset, const axset *sets,
                              int (**pairs)[2]) {
  ein_path_query q;
  ein_path_result r;
  ein_status st = path_query_of(pl, outset, sets, &q);
  if (st) return st;
  ein_path_status ps = ein_path_search(&q, pl->arena, &r);
  if (ps == EIN_PATH_NO_MEMORY) return planner_no_memory(pl);
  if (ps == EIN_PATH_TOO_LARGE) return limit_error(pl, &r);
  *pairs = r.pairs;
  pl->ir->path_method = r.method;
  if (!r.nsliced) return EIN_OK;
  pl->reslice = ein_arena_alloc(pl->arena, 1, sizeof *pl->reslice);
  if (!pl->reslice) return planner_no_memory(pl);
  *pl->reslice = r;
  return EIN_ERR_LIMIT;
}

/* The contraction order: the caller's, or the search's. */
static ein_status find_path(planner *pl, axset outset, const axset *sets,
                            int (**pairs)[2]) {
  if (pl->given) {
    *pairs = pl->given;
    pl->ir->path_method = pl->given_method ? pl->given_method : "given";
    return EIN_OK;
  }
  return search_path(pl, outset, sets, pairs);
}

/* The result of a pair keeps the axes the output or a node not yet
 * merged still holds: count[a] (make_leaves) counts those holders. */
static axset merged_set(planner *pl, const node *l, const node *r,
                        int *count) {
  axset touched = set_or(pl, l->set, r->set), kept = set_new(pl, touched.n);
  if (!touched.ax || !kept.ax) {
    pl->oom = true;
    return kept;
  }
  for (int k = 0; k < touched.n; k++) {
    int a = touched.ax[k];
    count[a] -= set_has(&l->set, a) + set_has(&r->set, a);
    if (count[a] > 0) {
      kept.ax[kept.n++] = a;
      count[a]++;
    }
  }
  return kept;
}

/* The path in opt_einsum's linear form (plan.h). A node's position in
 * the live list is the number of live nodes before it (results are
 * appended, so the list is in SSA order): a Fenwick tree over the 2n - 1
 * SSA ids counts them in log time, so a 10,000-operand path converts in
 * milliseconds. lin[k] keeps the order of the plan's own pair (opt_einsum
 * takes either order), so the path given back through --path makes this
 * very plan again. */
static ein_status linear_path(planner *pl, int n, int (*pairs)[2]) {
  int total = 2 * n, (*lin)[2] = ein_arena_alloc(pl->arena, (size_t)n,
                                                 sizeof *lin);
  int *tree = ein_calloc((size_t)total + 1, sizeof *tree);
  if (!lin || !tree) {
    ein_free(tree);
    return planner_no_memory(pl);
  }
  for (int i = 1; i <= n; i++) /* inputs live: add 1 at ids 0..n-1 */
    for (int j = i; j <= total; j += j & -j) tree[j]++;
  for (int k = 0; k < n - 1; k++) {
    for (int s = 0; s < 2; s++) {
      int pos = 0; /* live ids below pairs[k][s] */
      for (int j = pairs[k][s]; j > 0; j -= j & -j) pos += tree[j];
      lin[k][s] = pos;
    }
    for (int s = 0; s < 2; s++)
      for (int j = pairs[k][s] + 1; j <= total; j += j & -j) tree[j]--;
    for (int j = n + k + 1; j <= total; j += j & -j) tree[j]++;
  }
  ein_free(tree);
  pl->ir->path_linear = lin;
  return EIN_OK;
}

/* The contraction tree from the path: SSA id k >= n is node n + (k - n). */
static ein_status build_tree(planner *pl, axset outset, const axset *sets,
                             int *count) {
  int n = pl->p->ninputs, (*pairs)[2] = NULL;
  ein_status st = find_path(pl, outset, sets, &pairs);
  if (st) return st;
  pl->ir->path = pairs;
  pl->ir->npath = n - 1;
  for (int k = 0; k < n - 1; k++) {
    int l = pairs[k][0], r = pairs[k][1];
    if (l < 0 || r < 0 || l >= n + k || r >= n + k || l == r ||
        pl->nodes[l].parent >= 0 || pl->nodes[r].parent >= 0)
      return planner_internal(pl, "the path names an operand that is not live");
    node *nd = &pl->nodes[pl->nnodes++];
    nd->left = l;
    nd->right = r;
    nd->parent = -1;
    nd->opnum = n + k;
    pl->nodes[l].parent = pl->nodes[r].parent = n + k;
    nd->set = merged_set(pl, &pl->nodes[l], &pl->nodes[r], count);
    if (pl->oom) return planner_no_memory(pl);
  }
  return linear_path(pl, n, pairs);
}

/* Sums leaf i's private axes into a temporary, stored in the dtype of
 * its reader: the GEMM operand dtype when its parent is a GEMM, else the
 * compute dtype. Runs after build_tree so the parent is known; the steps
 * still come first in the plan. */
static ein_status reduce_leaf(planner *pl, int i, const pview *in) {
  node *nd = &pl->nodes[i];
  if (set_empty(set_minus(pl, view_set(pl, in), nd->set))) return EIN_OK;
  int parent = nd->parent;
  ein_dtype dt = parent >= 0 && node_gemm(pl, parent) ? gemm_ab_dtype(pl)
                                                      : pl->cdtype;
  int *axes = ein_arena_alloc(pl->arena, (size_t)(in->n + 1), sizeof(int));
  if (!axes) return planner_no_memory(pl);
  int na = group_order(pl, in, nd->set, axes);
  pview t;
  ein_status st = temp_view(pl, axes, na, dt, &t);
  if (st) return st;
  const pview *src[1] = {in};
  if ((st = emit_loop(pl, EIN_ROLE_REDUCE, &t, 1, src, EIN_REDUCE_SUM, 1)))
    return st;
  pl->ir->steps[pl->ir->nsteps - 1].operand[0] = i;
  pl->ir->steps[pl->ir->nsteps - 1].result = i;
  nd->view = t;
  return EIN_OK;
}

/* emit_node recurses once per level of the tree: a chain contracted in
 * order is as deep as it is long (10,000 levels of a frame of ~0.7 KiB,
 * ~1.9 KiB under ASan). Deep trees are emitted on a thread of their own
 * with a stack sized for them, so no network overflows the caller's. */
typedef struct emit_job {
  planner *pl;
  int root;
  const pview *want;
  pview *out;
  ein_status st;
} emit_job;

static void *emit_thread(void *arg) {
  emit_job *job = arg;
  job->st = emit_node(job->pl, job->root, job->want, job->out);
  return NULL;
}

enum { EMIT_DIRECT_DEPTH = 256, EMIT_BYTES_PER_LEVEL = 8192 };

static ein_status emit_tree(planner *pl, int root, const pview *want,
                            pview *out) {
  int n = pl->p->ninputs, depth = 0;
  int *level = ein_calloc((size_t)pl->nnodes + 1, sizeof *level);
  if (!level) return planner_no_memory(pl);
  for (int k = n; k < pl->nnodes; k++) { /* children come first */
    int l = level[pl->nodes[k].left], r = level[pl->nodes[k].right];
    level[k] = 1 + (l > r ? l : r);
    if (level[k] > depth) depth = level[k];
  }
  ein_free(level);
  if (depth <= EMIT_DIRECT_DEPTH) return emit_node(pl, root, want, out);
  emit_job job = {pl, root, want, out, EIN_OK};
  pthread_attr_t attr;
  pthread_t t;
  size_t stack = (size_t)depth * EMIT_BYTES_PER_LEVEL + (1u << 20);
  if (pthread_attr_init(&attr)) return planner_no_memory(pl);
  bool made = !pthread_attr_setstacksize(&attr, stack) &&
              !pthread_create(&t, &attr, emit_thread, &job);
  pthread_attr_destroy(&attr);
  if (!made)
    return ein_fail_memory(pl->err, "cannot start a thread with a %zu-byte "
                                    "stack to plan a tree %d levels deep",
                           stack, depth);
  pthread_join(t, NULL);
  return job.st;
}

ein_status plan_contraction(planner *pl, pview *inv,
                            const pview *outv) {
  int n = pl->p->ninputs;
  axset *sets = ein_arena_alloc(pl->arena, (size_t)n, sizeof *sets);
  int *count = ein_calloc((size_t)pl->p->naxes + 1, sizeof *count);
  if (!sets || !count) {
    ein_free(count);
    return planner_no_memory(pl);
  }
  for (int i = 0; i < n; i++) sets[i] = view_set(pl, &inv[i]);
  /* The output's axes that some input has: repeats come last. */
  axset outall = view_set(pl, outv), outset = set_new(pl, outall.n);
  if (outset.ax)
    for (int i = 0; i < n; i++)
      for (int k = 0; k < sets[i].n; k++) count[sets[i].ax[k]] = 1;
  if (outset.ax)
    for (int k = 0; k < outall.n; k++)
      if (count[outall.ax[k]]) outset.ax[outset.n++] = outall.ax[k];
  memset(count, 0, sizeof *count * (size_t)pl->p->naxes);
  ein_status st = pl->oom || !outset.ax ? planner_no_memory(pl) : EIN_OK;
  if (!st) st = make_leaves(pl, inv, outset, sets, count);
  if (!st) st = build_tree(pl, outset, sets, count);
  ein_free(count);
  if (!st) st = check_memory_limit(pl, n);
  for (int i = 0; i < n && !st; i++) st = reduce_leaf(pl, i, &inv[i]);
  if (st) return st;
  int root = pl->nnodes - 1;
  pview r;
  bool repeats = outall.n > outset.n;
  if (!repeats) return emit_tree(pl, root, outv, &r);
  if ((st = emit_tree(pl, root, NULL, &r))) return st;
  const pview *src[1] = {&r};
  return emit_loop(pl, EIN_ROLE_REPEAT, outv, 1, src, EIN_REDUCE_SUM, 1);
}
