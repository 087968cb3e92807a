/*
 * bind_output.c - the binder's step 4 (bind.c): the output's axes (the
 * implicit output of a numpy expression without '->'), its ellipsis and
 * names checked, axes only the output has given a size, the caller's axis
 * rules, and the output's dims sized.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "bind_internal.h"
#include "checked.h"
#include "shape_text.h"

/* ------------------------------------------------------------ step 4 */

/* Orders axis ids by their names' bytes: UTF-8's order is the code
 * points' (qsort's context through a file-scope pointer would not be
 * thread-safe, so each id carries its axis). */
typedef struct named_axis {
  const axis_work *w;
  int id;
} named_axis;

static int by_code_points(const void *x, const void *y) {
  const axis_work *a = ((const named_axis *)x)->w;
  const axis_work *c = ((const named_axis *)y)->w;
  size_t n = a->name_len < c->name_len ? a->name_len : c->name_len;
  int r = memcmp(a->name, c->name, n);
  return r ? r : (a->name_len > c->name_len) - (a->name_len < c->name_len);
}

/* The named axes used exactly once, in the order of their characters'
 * code points (numpy's uppercase first; opt_einsum's symbols past 52
 * after them), into picked[*n..] while there is room for EIN_MAX_DIMS+1. */
static ein_status once_used_sorted(binder *b, const int *count, int *picked,
                                   int *n) {
  named_axis *once = ein_malloc(((size_t)b->naxes + 1) * sizeof *once);
  if (!once) return bind_no_memory(b);
  int m = 0;
  for (int a = 0; a < b->naxes; a++)
    if (b->ax[a].origin == AXIS_NAMED && count[a] == 1)
      once[m++] = (named_axis){&b->ax[a], a};
  qsort(once, (size_t)m, sizeof *once, by_code_points);
  for (int k = 0; k < m && *n <= EIN_MAX_DIMS; k++) picked[(*n)++] = once[k].id;
  ein_free(once);
  return EIN_OK;
}

/* The numpy dialect's implicit output: '...' first, then the letters used
 * exactly once, in order of their code points (uppercase first). */
ein_status implicit_output(binder *b, ein_bound_operand *bo,
                           operand_work *w) {
  /* count, then the picked axes (count has one entry per axis; picked
   * stops past EIN_MAX_DIMS, which is refused below). */
  int *count = ein_calloc((size_t)b->naxes + 1, sizeof *count);
  if (!count) return bind_no_memory(b);
  bool any_ellipsis = false;
  for (int i = 0; i < b->ast->ninputs; i++) {
    const ein_bound_operand *in = &b->out->inputs[i];
    for (int f = 0; f < in->nfactors; f++) count[in->factors[f]]++;
    if (b->ell_rank[i] >= 0) any_ellipsis = true;
  }
  int picked[EIN_MAX_DIMS + 1], n = 0;
  if (any_ellipsis)
    for (int a = 0; a < b->naxes && n <= EIN_MAX_DIMS; a++)
      if (b->ax[a].origin == AXIS_ELLIPSIS) picked[n++] = a;
  ein_status st = once_used_sorted(b, count, picked, &n);
  ein_free(count);
  if (st) return st;
  if (n > EIN_MAX_DIMS)
    return bind_fail(b, EIN_ERR_LIMIT, NULL, 0,
                "the implicit output has %d dims; einc takes at most %d", n,
                EIN_MAX_DIMS);
  bo->ndim = bo->nfactors = n;
  bo->dims = ein_arena_alloc(b->arena, (size_t)n, sizeof *bo->dims);
  bo->factors = ein_arena_alloc(b->arena, (size_t)n, sizeof(int));
  w->dim_span = ein_arena_alloc(b->arena, (size_t)n, sizeof(ein_span));
  w->factor_span = ein_arena_alloc(b->arena, (size_t)n, sizeof(ein_span));
  w->dim_grouped = ein_arena_alloc(b->arena, (size_t)n, sizeof(bool));
  if (!bo->dims || !bo->factors || !w->dim_span || !w->factor_span ||
      !w->dim_grouped)
    return bind_no_memory(b);
  for (int k = 0; k < n; k++) {
    bo->dims[k] = (ein_bound_dim){.first = k, .count = 1};
    bo->factors[k] = picked[k];
    b->ax[picked[k]].in_output = true;
  }
  return EIN_OK;
}

/* '...' in the output needs one in an input; numpy's explicit output must
 * keep the inputs' '...' dims (it does not sum over them). */
static ein_status check_output_ellipsis(binder *b) {
  const ein_ast *ast = b->ast;
  bool input_ellipsis = false;
  for (int i = 0; i < ast->ninputs; i++)
    if (b->ell_rank[i] >= 0) input_ellipsis = true;
  bool output_ellipsis =
      ast->explicit_output && ast->output.ellipsis_term >= 0;

  if (output_ellipsis && !input_ellipsis) {
    const ein_term *t = &ast->output.terms[ast->output.ellipsis_term];
    ein_span at = span_of(t->offset, t->length);
    return bind_fail(b, EIN_ERR_BAD_ELLIPSIS, &at, 1,
                "'...' in the output but in no input: there is nothing for "
                "it to stand for");
  }
  if (ast->dialect == EIN_DIALECT_NUMPY && ast->explicit_output &&
      input_ellipsis && !output_ellipsis && b->E > 0) {
    ein_span at = span_of(ast->arrow_offset, 2);
    return bind_fail(b, EIN_ERR_BAD_ELLIPSIS, &at, 1,
                "the inputs' '...' stands for %d dim%s but the output has no "
                "'...' (numpy does not sum over them; the einops dialect "
                "does)",
                b->E, b->E == 1 ? "" : "s");
  }
  return EIN_OK;
}

/* An output names each axis once. */
static ein_status check_output_names(binder *b) {
  const ein_bound_operand *bo = &b->out->output;
  const operand_work *w = &b->work[b->ast->ninputs];
  for (int f = 0; f < bo->nfactors; f++) {
    int a = bo->factors[f], seen_at = -1;
    for (int g = 0; g < f && seen_at < 0; g++)
      if (bo->factors[g] == a) seen_at = g;
    if (seen_at >= 0) {
      char name[64];
      axis_name(b, a, name, sizeof name);
      ein_span spans[2] = {w->factor_span[f], w->factor_span[seen_at]};
      return bind_fail(b, EIN_ERR_DUPLICATE_AXIS, spans, 2,
                  "axis %s appears twice in the output; an output names each "
                  "axis once",
                  name);
    }
  }
  return EIN_OK;
}

/* Output-only axes are repeats, which need a size (numpy has none). */
static ein_status check_output_only_axes(binder *b) {
  const ein_ast *ast = b->ast;
  const ein_bound_operand *bo = &b->out->output;
  const operand_work *w = &b->work[ast->ninputs];
  for (int f = 0; f < bo->nfactors; f++) {
    int a = bo->factors[f];
    axis_work *x = &b->ax[a];
    if (x->in_input || x->size >= 0) continue;
    char name[64];
    axis_name(b, a, name, sizeof name);
    if (ast->dialect == EIN_DIALECT_NUMPY)
      return bind_fail(b, EIN_ERR_UNKNOWN_AXIS, &w->factor_span[f], 1,
                  "output subscript %s appears in no input", name);
    return bind_fail(b, EIN_ERR_MISSING_LENGTH, &w->factor_span[f], 1,
                "axis %s is in the output but in no input, so its size is "
                "unknown; give it with a length binding (%.*s=N) or write a "
                "number",
                name, hint_len(x), x->name);
  }
  return EIN_OK;
}

/* Merges: each output dim is the product of its axes, and the output's
 * element count must fit int64. */
static ein_status size_output_dims(binder *b) {
  ein_bound_operand *bo = &b->out->output;
  const operand_work *w = &b->work[b->ast->ninputs];
  for (int d = 0; d < bo->ndim; d++) {
    ein_bound_dim *dim = &bo->dims[d];
    int64_t size = 1;
    for (int k = 0; k < dim->count; k++)
      if (!ein_mul_i64(size, b->ax[bo->factors[dim->first + k]].size,
                       &size))
        return bind_fail(b, EIN_ERR_OVERFLOW, &w->dim_span[d], 1,
                    "the size of output dim %d overflows int64", d);
    dim->size = size;
  }
  int64_t out_shape[EIN_MAX_DIMS];
  for (int d = 0; d < bo->ndim; d++) out_shape[d] = bo->dims[d].size;
  int64_t span;
  bool empty;
  if (!ein_nonzero_span(bo->ndim, out_shape, &span, &empty))
    return bind_fail(b, EIN_ERR_OVERFLOW, NULL, 0,
                empty ? "the output's sizes other than 0 multiply past what "
                        "int64 can count"
                      : "the output has more elements than int64 can count");
  return EIN_OK;
}

/* The first factor of axis a in operand work w (of bo), for a caret. */
static ein_span factor_at(const ein_bound_operand *bo, const operand_work *w,
                          int a) {
  for (int f = 0; f < bo->nfactors; f++)
    if (bo->factors[f] == a) return w->factor_span[f];
  return span_of(0, 0);
}

/* options.axis_rules: an input axis missing from the output, or an output
 * axis in no input, where the caller's contract forbids one. */
ein_status check_axis_rules(binder *b) {
  unsigned rules = b->opt->axis_rules;
  const ein_problem *p = b->out;
  for (int a = 0; rules && a < b->naxes; a++) {
    const axis_work *x = &b->ax[a];
    bool reduced = x->in_input && !x->in_output;
    bool repeated = !x->in_input && x->in_output;
    if (!(reduced && (rules & EIN_RULE_NO_REDUCE)) &&
        !(repeated && (rules & EIN_RULE_NO_REPEAT)))
      continue;
    char name[64];
    axis_name(b, a, name, sizeof name);
    if (repeated) {
      ein_span at = factor_at(&p->output, &b->work[p->ninputs], a);
      return bind_fail(b, EIN_ERR_UNKNOWN_AXIS, &at, 1,
                  "axis %s is in the output but in no input, and this call "
                  "never repeats (a rearrange): use repeat for new axes",
                  name);
    }
    int i = 0;
    while (i < p->ninputs - 1 &&
           factor_at(&p->inputs[i], &b->work[i], a).length == 0)
      i++;
    ein_span at = factor_at(&p->inputs[i], &b->work[i], a);
    return bind_fail(b, EIN_ERR_BAD_REDUCTION, &at, 1,
                "axis %s is in the input but not in the output, and this "
                "call never reduces (a rearrange or a repeat): name it in "
                "the output, or reduce it with reduce(x, pattern, 'sum')",
                name);
  }
  return EIN_OK;
}

ein_status check_output(binder *b) {
  ein_status st;
  if ((st = check_output_ellipsis(b)) || (st = check_output_names(b)) ||
      (st = check_output_only_axes(b)))
    return st;
  return size_output_dims(b);
}
