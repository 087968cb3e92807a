/*
 * bind.c - solves every axis size of an expression from the input shapes:
 * steps 1 and 2 and the driver (ein_bind_problem) here, step 3 in
 * bind_sizes.c, step 4 in bind_output.c, their shared helpers in
 * bind_common.c (bind_internal.h).
 *
 * The order of work, each step able to fail with a precise message:
 *   1. count: operands against tensors, ranks against terms, the ellipsis
 *      rank of every input;
 *   2. axes: one per name, one per number, E for the ellipsis, in order of
 *      first appearance; every operand becomes dims of axis lists;
 *   3. sizes: length bindings, then plain dims (numpy broadcasting of 1s for
 *      ellipsis dims, and for named dims in the numpy dialect), then splits
 *      solved by exact division until no split makes progress;
 *   4. the output: repeats need a size, names may not repeat, merges
 *      multiply; overflow of int64 is an error everywhere.
 * Every axis remembers where its size came from, so a conflict points at
 * both places.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "bind_internal.h"
#include "checked.h"
#include "shape_text.h"

/* ------------------------------------------------------------ step 1 */

/* Top-level terms other than '...', i.e. the dims an operand names. */
static int named_dims(const ein_operand *op) {
  int n = op->nterms;
  if (op->ellipsis_term >= 0 &&
      op->terms[op->ellipsis_term].kind == TERM_ELLIPSIS)
    n--;
  return n;
}

static ein_span operand_span(const ein_operand *op) {
  return span_of(op->offset, op->length);
}

static ein_status check_counts(binder *b, int ninputs) {
  const ein_ast *ast = b->ast;
  if (ninputs != ast->ninputs) {
    ein_span all = span_of(0, ast->explicit_output ? ast->arrow_offset
                                                   : ast->len);
    return bind_fail(b, EIN_ERR_OPERAND_COUNT, &all, 1,
                "the expression has %d input operand%s but %d tensor%s "
                "given",
                ast->ninputs, ast->ninputs == 1 ? "" : "s", ninputs,
                ninputs == 1 ? " was" : "s were");
  }
  b->E = 0;
  for (int i = 0; i < ninputs; i++) {
    const ein_operand *op = &ast->inputs[i];
    int nd = b->ndims[i];
    char shape[128];
    if (nd < 0 || nd > EIN_MAX_DIMS)
      return bind_fail(b, nd < 0 ? EIN_ERR_BAD_SHAPE : EIN_ERR_LIMIT, NULL, 0,
                  "tensor %d has %d dims; einc takes 0 to %d", i + 1, nd,
                  EIN_MAX_DIMS);
    if (nd > 0 && !b->shapes[i])
      return bind_fail(b, EIN_ERR_INVALID_ARGUMENT, NULL, 0,
                  "tensor %d has %d dims but no shape array", i + 1, nd);
    for (int d = 0; d < nd; d++)
      if (b->shapes[i][d] < 0) {
        ein_span at = operand_span(op);
        return bind_fail(b, EIN_ERR_BAD_SHAPE, &at, 1,
                    "dim %d of tensor %d is %lld; sizes must be 0 or more",
                    d, i + 1, (long long)b->shapes[i][d]);
      }
    int64_t span;
    bool empty;
    if (!ein_nonzero_span(nd, b->shapes[i], &span, &empty)) {
      ein_format_shape(shape, sizeof shape, b->shapes[i], nd);
      ein_span at = operand_span(op);
      return bind_fail(b, EIN_ERR_OVERFLOW, &at, 1,
                  empty ? "tensor %d (shape %s): its sizes other than 0 "
                          "multiply past what int64 can count"
                        : "tensor %d (shape %s) has more elements than "
                          "int64 can count",
                  i + 1, shape);
    }
    int named = named_dims(op);
    bool has_ellipsis = op->ellipsis_term >= 0;
    if (nd == named || (has_ellipsis && nd > named)) {
      b->ell_rank[i] = has_ellipsis ? nd - named : -1;
      if (b->ell_rank[i] > b->E) b->E = b->ell_rank[i];
      continue;
    }
    ein_format_shape(shape, sizeof shape, b->shapes[i], nd);
    ein_span at = operand_span(op);
    if (op->nterms == 0) at = span_of(op->offset, 0);
    return bind_fail(b, EIN_ERR_RANK_MISMATCH, &at, 1,
                "operand %d names %s%d dim%s but its tensor has %d (shape "
                "%s)",
                i + 1, has_ellipsis ? "at least " : "", named,
                named == 1 ? "" : "s", nd, shape);
  }
  return EIN_OK;
}

/* Doubles the axis table (cap_axes stays a power of two) and rehashes
 * the names. */
static ein_status grow_axes(binder *b) {
  int cap = b->cap_axes ? 2 * b->cap_axes : 64;
  axis_work *ax = ein_realloc(b->ax, (size_t)cap * sizeof *ax);
  if (ax) b->ax = ax;
  int *by_name = ein_malloc(2 * (size_t)cap * sizeof *by_name);
  if (!ax || !by_name) {
    ein_free(by_name);
    return bind_no_memory(b);
  }
  ein_free(b->by_name);
  b->by_name = by_name;
  b->cap_axes = cap;
  memset(by_name, 0xff, 2 * (size_t)cap * sizeof *by_name);
  for (int a = 0; a < b->naxes; a++)
    if (b->ax[a].origin == AXIS_NAMED)
      by_name[name_slot(b, b->ax[a].name, b->ax[a].name_len)] = a;
  return EIN_OK;
}

static ein_status new_axis(binder *b, ein_axis_origin origin, ein_span at,
                           int *out) {
  if (b->naxes == EIN_MAX_AXES)
    return bind_fail(b, EIN_ERR_LIMIT, &at, 1,
                "more than %d distinct axes; einc takes at most %d",
                EIN_MAX_AXES, EIN_MAX_AXES);
  ein_status st;
  if (b->naxes == b->cap_axes && (st = grow_axes(b))) return st;
  axis_work *w = &b->ax[b->naxes];
  memset(w, 0, sizeof *w);
  w->origin = origin;
  w->size = -1;
  w->from = FROM_NONE;
  *out = b->naxes++;
  return EIN_OK;
}

/* The first of the E ellipsis axes, created at the first '...'. */
static ein_status ellipsis_axes(binder *b, ein_span at, int *first) {
  int found = b->ell_first;
  if (found < 0) {
    found = b->ell_first = b->naxes;
    for (int j = 0; j < b->E; j++) {
      int a = -1;
      ein_status st = new_axis(b, AXIS_ELLIPSIS, at, &a);
      if (st) return st;
      b->ax[a].ellipsis_pos = j;
    }
  }
  *first = found;
  return EIN_OK;
}

/* The axis of one non-group term (a name, a number); -1 for a unit. */
static ein_status term_axis(binder *b, const ein_term *t, bool is_output,
                            int *out) {
  ein_span at = span_of(t->offset, t->length);
  *out = -1;
  if (t->kind == TERM_UNIT) return EIN_OK;
  if (t->kind == TERM_NUMBER) {
    ein_status st = new_axis(b, AXIS_ANON, at, out);
    if (st) return st;
    axis_work *w = &b->ax[*out];
    w->size = t->value;
    w->from = FROM_LITERAL;
    w->from_span = at;
    w->from_operand = -1;
  } else {
    *out = find_named(b, t->name, t->name_len);
    if (*out < 0) {
      ein_status st = new_axis(b, AXIS_NAMED, at, out);
      if (st) return st;
      b->ax[*out].name = t->name;
      b->ax[*out].name_len = t->name_len;
      b->by_name[name_slot(b, t->name, t->name_len)] = *out;
    }
  }
  if (is_output)
    b->ax[*out].in_output = true;
  else
    b->ax[*out].in_input = true;
  return EIN_OK;
}

/* Counts the dims and factors of an operand (its '...' stands for
 * ell_rank dims; '(...)' in a group for E factors) and allocates its
 * tables. */
static ein_status alloc_operand(binder *b, const ein_operand *op,
                                bool is_output, int ell_rank,
                                ein_bound_operand *bo, operand_work *w) {
  int ndim = 0, nfactors = 0;
  for (int t = 0; t < op->nterms; t++) {
    const ein_term *term = &op->terms[t];
    if (term->kind == TERM_ELLIPSIS) {
      ndim += ell_rank;
      nfactors += ell_rank;
    } else {
      ndim++;
      nfactors += term->kind == TERM_GROUP ? term->nfactors + b->E : 1;
    }
  }
  if (ndim > EIN_MAX_DIMS) {
    ein_span at = operand_span(op);
    return bind_fail(b, EIN_ERR_LIMIT, &at, 1,
                "%s has %d dims; einc takes at most %d",
                is_output ? "the output" : "an operand", ndim, EIN_MAX_DIMS);
  }
  bo->dims = ein_arena_alloc(b->arena, (size_t)ndim, sizeof *bo->dims);
  bo->factors = ein_arena_alloc(b->arena, (size_t)nfactors, sizeof(int));
  w->dim_span = ein_arena_alloc(b->arena, (size_t)ndim, sizeof(ein_span));
  w->factor_span =
      ein_arena_alloc(b->arena, (size_t)nfactors, sizeof(ein_span));
  w->dim_grouped = ein_arena_alloc(b->arena, (size_t)ndim, sizeof(bool));
  if (!bo->dims || !bo->factors || !w->dim_span || !w->factor_span ||
      !w->dim_grouped)
    return bind_no_memory(b);
  bo->ndim = 0;
  bo->nfactors = 0;
  return EIN_OK;
}

/* A bare '...': the last ell_rank of the E ellipsis axes, one dim each. */
static ein_status add_ellipsis_dims(binder *b, ein_span at, bool is_output,
                                    int ell_rank, ein_bound_operand *bo,
                                    operand_work *w) {
  int first;
  ein_status st = ellipsis_axes(b, at, &first);
  if (st) return st;
  for (int j = 0; j < ell_rank; j++) {
    int a = first + b->E - ell_rank + j;
    if (is_output)
      b->ax[a].in_output = true;
    else
      b->ax[a].in_input = true;
    bo->dims[bo->ndim] = (ein_bound_dim){.first = bo->nfactors, .count = 1};
    w->dim_span[bo->ndim++] = at;
    w->factor_span[bo->nfactors] = at;
    bo->factors[bo->nfactors++] = a;
  }
  return EIN_OK;
}

/* One factor of a dim: an axis, nothing for a unit factor, or for
 * '(...)' (merged on the output) all E ellipsis axes. */
static ein_status add_factor(binder *b, const ein_term *fs, bool is_output,
                             ein_bound_operand *bo, operand_work *w) {
  ein_span fat = span_of(fs->offset, fs->length);
  if (fs->kind == TERM_ELLIPSIS) {
    int first;
    ein_status st = ellipsis_axes(b, fat, &first);
    if (st) return st;
    for (int j = 0; j < b->E; j++) {
      b->ax[first + j].in_output = true;
      w->factor_span[bo->nfactors] = fat;
      bo->factors[bo->nfactors++] = first + j;
    }
    return EIN_OK;
  }
  int a;
  ein_status st = term_axis(b, fs, is_output, &a);
  if (st || a < 0) return st;
  w->factor_span[bo->nfactors] = fat;
  bo->factors[bo->nfactors++] = a;
  return EIN_OK;
}

/* Lays out one operand as dims of axis lists. `index` is the input number,
 * or -1 for the output; `ell_rank` is how many dims its '...' covers. */
static ein_status build_operand(binder *b, const ein_operand *op, int index,
                                int ell_rank, ein_bound_operand *bo,
                                operand_work *w) {
  bool is_output = index < 0;
  ein_status st = alloc_operand(b, op, is_output, ell_rank, bo, w);
  if (st) return st;
  for (int t = 0; t < op->nterms; t++) {
    const ein_term *term = &op->terms[t];
    ein_span at = span_of(term->offset, term->length);
    if (term->kind == TERM_ELLIPSIS) {
      if ((st = add_ellipsis_dims(b, at, is_output, ell_rank, bo, w)))
        return st;
      continue;
    }
    int d = bo->ndim;
    bo->dims[d] = (ein_bound_dim){.first = bo->nfactors};
    w->dim_span[d] = at;
    w->dim_grouped[d] = term->kind == TERM_GROUP;
    int nf = term->kind == TERM_GROUP ? term->nfactors : 1;
    const ein_term *fs = term->kind == TERM_GROUP ? term->factors : term;
    for (int k = 0; k < nf; k++)
      if ((st = add_factor(b, &fs[k], is_output, bo, w))) return st;
    bo->dims[d].count = bo->nfactors - bo->dims[d].first;
    bo->ndim++;
  }
  return EIN_OK;
}

/* Marks size-1 input dims that stand for larger axes, and copies the axis
 * table out of the working state. */
static ein_status finish(binder *b) {
  ein_problem *p = b->out;
  for (int i = 0; i < p->ninputs; i++) {
    ein_bound_operand *bo = &p->inputs[i];
    for (int d = 0; d < bo->ndim; d++) {
      ein_bound_dim *dim = &bo->dims[d];
      if (dim->count != 1) continue;
      int64_t axis_size = b->ax[bo->factors[dim->first]].size;
      if (axis_size == dim->size) continue;
      if (dim->size != 1)
        return bind_fail(b, EIN_ERR_INTERNAL, NULL, 0,
                    "dim %d of operand %d disagrees with its axis", d, i + 1);
      dim->broadcast = true;
    }
  }
  p->naxes = b->naxes;
  p->axes = ein_arena_alloc(b->arena, (size_t)b->naxes, sizeof *p->axes);
  if (!p->axes && b->naxes) return bind_no_memory(b);
  for (int a = 0; a < b->naxes; a++) {
    const axis_work *w = &b->ax[a];
    ein_bound_axis *x = &p->axes[a];
    if (w->size < 0)
      return bind_fail(b, EIN_ERR_INTERNAL, NULL, 0, "axis %d has no size", a);
    char label[32];
    const char *text = label;
    size_t len;
    if (w->origin == AXIS_NAMED) {
      text = w->name;
      len = w->name_len;
    } else if (w->origin == AXIS_ANON) {
      len = (size_t)snprintf(label, sizeof label, "%lld", (long long)w->size);
    } else {
      len = (size_t)snprintf(label, sizeof label, "...%d", w->ellipsis_pos);
    }
    x->label = ein_arena_strndup(b->arena, text, len);
    if (!x->label) return bind_no_memory(b);
    x->origin = w->origin;
    x->size = w->size;
    x->ellipsis_pos = w->ellipsis_pos;
    x->in_input = w->in_input;
    x->in_output = w->in_output;
  }
  return EIN_OK;
}

static ein_status check_reduction(binder *b) {
  ein_reduction r = b->opt->reduction;
  if (r < EIN_REDUCE_SUM || r > EIN_REDUCE_ALL)
    return bind_fail(b, EIN_ERR_INVALID_ARGUMENT, NULL, 0,
                "unknown reduction %d", (int)r);
  if (r != EIN_REDUCE_SUM && b->ast->ninputs > 1) {
    ein_span all = span_of(0, b->ast->len);
    return bind_fail(b, EIN_ERR_BAD_REDUCTION, &all, 1,
                "the reduction '%s' takes a single operand, but the "
                "expression has %d; only 'sum' combines operands",
                ein_reduction_name(r), b->ast->ninputs);
  }
  return EIN_OK;
}

static ein_status bind_all(binder *b, int ninputs) {
  const ein_ast *ast = b->ast;
  ein_problem *p = b->out;
  ein_status st = check_counts(b, ninputs);
  if (!st) st = check_reduction(b);
  if (st) return st;

  p->dialect = ast->dialect;
  p->reduction = b->opt->reduction;
  p->ninputs = ninputs;
  p->inputs = ein_arena_alloc(b->arena, (size_t)ninputs, sizeof *p->inputs);
  if (!p->inputs && ninputs) return bind_no_memory(b);
  for (int i = 0; i < ninputs; i++) {
    st = build_operand(b, &ast->inputs[i], i, b->ell_rank[i], &p->inputs[i],
                       &b->work[i]);
    if (st) return st;
    for (int d = 0; d < p->inputs[i].ndim; d++)
      p->inputs[i].dims[d].size = b->shapes[i][d];
  }
  if (ast->explicit_output)
    st = build_operand(b, &ast->output, -1, b->E, &p->output,
                       &b->work[ninputs]);
  else
    st = implicit_output(b, &p->output, &b->work[ninputs]);
  if (!st) st = apply_lengths(b);
  if (!st) st = bind_input_sizes(b);
  if (!st) st = check_axis_rules(b);
  if (!st) st = check_output(b);
  if (!st) st = finish(b);
  return st;
}

ein_status ein_bind_problem(const ein_ast *ast, int ninputs, const int *ndims,
                            const int64_t *const *shapes,
                            const ein_options *options, ein_arena *arena,
                            ein_error_rec *err, ein_problem *out) {
  static const ein_options defaults = {0};
  memset(out, 0, sizeof *out);
  if (ninputs < 0 || ninputs > EIN_MAX_OPERANDS || (ninputs > 0 && !ndims))
    return ein_fail(err,
                    ninputs > EIN_MAX_OPERANDS ? EIN_ERR_LIMIT
                                               : EIN_ERR_INVALID_ARGUMENT,
                    "%d tensors given; einc takes 0 to %d with shapes", ninputs,
                    EIN_MAX_OPERANDS);
  binder *b = ein_calloc(1, sizeof *b);
  if (!b)
    return ein_fail_memory(err, "out of memory while binding shapes");
  b->ast = ast;
  b->opt = options ? options : &defaults;
  b->ndims = ndims;
  b->shapes = shapes;
  b->arena = arena;
  b->err = err;
  b->out = out;
  b->ell_first = -1;
  b->ell_rank = ein_calloc((size_t)ninputs + 1, sizeof *b->ell_rank);
  b->work = ein_calloc((size_t)ninputs + 1, sizeof *b->work);
  ein_status st = b->ell_rank && b->work
                      ? bind_all(b, ninputs)
                      : ein_fail_memory(err, "out of memory while binding "
                                             "shapes");
  ein_free(b->ell_rank);
  ein_free(b->work);
  ein_free(b->ax);
  ein_free(b->by_name);
  ein_free(b);
  return st;
}
