/*
 * bind.c - solves every axis size of an expression from the input shapes.
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
#include "bind.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "checked.h"
#include "shape_text.h"

typedef enum size_source {
  FROM_NONE,    /* not known yet */
  FROM_TENSOR,  /* a plain dim of an input tensor */
  FROM_LENGTH,  /* a length binding */
  FROM_LITERAL, /* a number written in the expression */
  FROM_SPLIT    /* solved from a split */
} size_source;

typedef struct axis_work {
  ein_axis_origin origin;
  const char *name; /* AXIS_NAMED: slice of the source */
  size_t name_len;
  int64_t size;
  int ellipsis_pos;
  bool in_input, in_output;
  size_source from;
  ein_span from_span; /* where the size came from (not for FROM_LENGTH) */
  int from_operand, from_dim, from_length;
} axis_work;

/* Per operand: the span of each dim and each factor, for messages. */
typedef struct operand_work {
  ein_span *dim_span;
  ein_span *factor_span;
  bool *dim_grouped; /* the dim was written as a group */
} operand_work;

typedef struct binder {
  const ein_ast *ast;
  const ein_options *opt;
  const int *ndims;
  const int64_t *const *shapes;
  ein_arena *arena;
  ein_error_rec *err;
  int naxes, cap_axes;
  axis_work *ax; /* cap_axes entries, grown as axes appear */
  /* Named axes by name: open addressing, -1 empty, 2 * cap_axes slots,
   * so that a network of 100,000 axes binds in linear time. */
  int *by_name;
  int E; /* dims covered by '...' after broadcasting: the largest rank */
  int ell_first; /* the first ellipsis axis once made, else -1 */
  int *ell_rank;      /* per input; -1 without '...' */
  operand_work *work; /* inputs, then the output */
  ein_problem *out;
} binder;

static ein_span span_of(size_t offset, size_t length) {
  return (ein_span){offset, length};
}

static ein_status fail(binder *b, ein_status status, const ein_span *spans,
                       int nspans, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static ein_status fail(binder *b, ein_status status, const ein_span *spans,
                       int nspans, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  ein_error_vset(b->err, status, b->ast->src, b->ast->len, spans, nspans, fmt,
                 ap);
  va_end(ap);
  return status;
}

static ein_status no_memory(binder *b) {
  return ein_fail_memory(b->err, "out of memory while binding shapes");
}

/* The axis's name for messages: 'h', '3' or "dim 0 of '...'". */
static void axis_name(const binder *b, int a, char *buf, size_t cap) {
  const axis_work *w = &b->ax[a];
  switch (w->origin) {
  case AXIS_NAMED: ein_quote_name(buf, cap, w->name, w->name_len); break;
  case AXIS_ANON: snprintf(buf, cap, "'%lld'", (long long)w->size); break;
  case AXIS_ELLIPSIS:
    snprintf(buf, cap, "dim %d of '...'", w->ellipsis_pos);
    break;
  }
}

/* "operand 2" or "the output". */
static void operand_name(int operand, char *buf, size_t cap) {
  if (operand < 0)
    snprintf(buf, cap, "the output");
  else
    snprintf(buf, cap, "operand %d", operand + 1);
}

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
    return fail(b, EIN_ERR_OPERAND_COUNT, &all, 1,
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
      return fail(b, nd < 0 ? EIN_ERR_BAD_SHAPE : EIN_ERR_LIMIT, NULL, 0,
                  "tensor %d has %d dims; einc takes 0 to %d", i + 1, nd,
                  EIN_MAX_DIMS);
    if (nd > 0 && !b->shapes[i])
      return fail(b, EIN_ERR_INVALID_ARGUMENT, NULL, 0,
                  "tensor %d has %d dims but no shape array", i + 1, nd);
    for (int d = 0; d < nd; d++)
      if (b->shapes[i][d] < 0) {
        ein_span at = operand_span(op);
        return fail(b, EIN_ERR_BAD_SHAPE, &at, 1,
                    "dim %d of tensor %d is %lld; sizes must be 0 or more",
                    d, i + 1, (long long)b->shapes[i][d]);
      }
    int64_t span;
    bool empty;
    if (!ein_nonzero_span(nd, b->shapes[i], &span, &empty)) {
      ein_format_shape(shape, sizeof shape, b->shapes[i], nd);
      ein_span at = operand_span(op);
      return fail(b, EIN_ERR_OVERFLOW, &at, 1,
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
    return fail(b, EIN_ERR_RANK_MISMATCH, &at, 1,
                "operand %d names %s%d dim%s but its tensor has %d (shape "
                "%s)",
                i + 1, has_ellipsis ? "at least " : "", named,
                named == 1 ? "" : "s", nd, shape);
  }
  return EIN_OK;
}

/* ------------------------------------------------------------ step 2 */

static size_t name_hash(const char *name, size_t len) {
  size_t h = 1469598103934665603u;
  for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)name[i]) * 1099511628211u;
  return h;
}

/* The by_name slot of a name: its axis, or the empty slot it would take. */
static size_t name_slot(const binder *b, const char *name, size_t len) {
  size_t mask = 2 * (size_t)b->cap_axes - 1;
  for (size_t i = name_hash(name, len) & mask;; i = (i + 1) & mask) {
    int a = b->by_name[i];
    if (a < 0 || (b->ax[a].name_len == len &&
                  memcmp(b->ax[a].name, name, len) == 0))
      return i;
  }
}

static int find_named(const binder *b, const char *name, size_t len) {
  return b->cap_axes ? b->by_name[name_slot(b, name, len)] : -1;
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
    return no_memory(b);
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
    return fail(b, EIN_ERR_LIMIT, &at, 1,
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
    return fail(b, EIN_ERR_LIMIT, &at, 1,
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
    return no_memory(b);
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

/* ------------------------------------------------------------ step 3 */

/* Records that an axis's size was read from (or solved at) dim d of input
 * i, at span `at`, so later conflicts can point back here. */
static void set_size(axis_work *w, int64_t size, size_source from,
                     ein_span at, int i, int d) {
  w->size = size;
  w->from = from;
  w->from_span = at;
  w->from_operand = i;
  w->from_dim = d;
}

/* A name as written, cut to 40 bytes, for "give it as h=N" hints. */
static int hint_len(const axis_work *w) {
  return w->name_len > 40 ? 40 : (int)w->name_len;
}

/* Where an axis's size came from, for "... but 8 <where>". */
static void describe_source(const binder *b, const axis_work *w, int operand,
                            char *buf, size_t cap) {
  char name[64];
  switch (w->from) {
  case FROM_TENSOR:
    operand_name(w->from_operand, name, sizeof name);
    if (w->from_operand == operand)
      snprintf(buf, cap, "at dim %d of %s", w->from_dim, name);
    else
      snprintf(buf, cap, "in %s", name);
    return;
  case FROM_LENGTH: {
    const ein_length *l = &b->opt->lengths[w->from_length];
    snprintf(buf, cap, "in the length binding %.40s=%lld", l->name,
             (long long)l->size);
    return;
  }
  case FROM_LITERAL: snprintf(buf, cap, "as written"); return;
  case FROM_SPLIT:
    operand_name(w->from_operand, name, sizeof name);
    snprintf(buf, cap, "as solved from the split at dim %d of %s",
             w->from_dim, name);
    return;
  case FROM_NONE: break;
  }
  snprintf(buf, cap, "elsewhere");
}

static ein_status apply_lengths(binder *b) {
  const ein_options *o = b->opt;
  if (o->nlengths < 0 || (o->nlengths > 0 && !o->lengths))
    return fail(b, EIN_ERR_INVALID_ARGUMENT, NULL, 0,
                "options give %d length bindings but no array", o->nlengths);
  for (int i = 0; i < o->nlengths; i++) {
    const ein_length *l = &o->lengths[i];
    if (!l->name)
      return fail(b, EIN_ERR_INVALID_ARGUMENT, NULL, 0,
                  "length binding %d has no name", i + 1);
    size_t len = strlen(l->name);
    char name[64], binding[96];
    ein_quote_name(name, sizeof name, l->name, len);
    snprintf(binding, sizeof binding, "%.40s%s=%lld", l->name,
             len > 40 ? "..." : "", (long long)l->size);
    if (l->size < 0)
      return fail(b, EIN_ERR_BAD_SHAPE, NULL, 0,
                  "the length binding %s is negative; sizes must be 0 or "
                  "more",
                  binding);
    int a = find_named(b, l->name, len);
    if (a < 0)
      return fail(b, EIN_ERR_UNKNOWN_AXIS, NULL, 0,
                  "the length binding %s names no axis of the expression",
                  binding);
    axis_work *w = &b->ax[a];
    if (w->from == FROM_LENGTH && w->size != l->size) {
      const ein_length *prev = &o->lengths[w->from_length];
      return fail(b, EIN_ERR_SIZE_MISMATCH, NULL, 0,
                  "axis %s is given twice, as %lld and as %lld", name,
                  (long long)prev->size, (long long)l->size);
    }
    w->size = l->size;
    w->from = FROM_LENGTH;
    w->from_length = i;
  }
  return EIN_OK;
}

/* One plain input dim (a single axis) of size `size` at dim d of input i.
 * Broadcasting of 1s is allowed for ellipsis dims, and for named dims in the
 * numpy dialect, as numpy does. */
static ein_status bind_plain(binder *b, int i, int d, int a, int64_t size) {
  axis_work *w = &b->ax[a];
  ein_span at = b->work[i].factor_span[b->out->inputs[i].dims[d].first];
  bool may_broadcast = w->origin == AXIS_ELLIPSIS ||
                       (w->origin == AXIS_NAMED &&
                        b->ast->dialect == EIN_DIALECT_NUMPY);
  if (w->from == FROM_NONE) {
    set_size(w, size, FROM_TENSOR, at, i, d);
    return EIN_OK;
  }
  if (w->size == size) return EIN_OK;
  if (may_broadcast && size == 1) return EIN_OK; /* marked in finish */
  if (may_broadcast && w->size == 1 && w->from == FROM_TENSOR) {
    set_size(w, size, FROM_TENSOR, at, i, d); /* earlier 1s broadcast */
    return EIN_OK;
  }
  char name[64], where[96], here[64];
  axis_name(b, a, name, sizeof name);
  const char *noun = w->origin == AXIS_ELLIPSIS ? "" : "axis ";
  describe_source(b, w, i, where, sizeof where);
  if (w->from == FROM_TENSOR && w->from_operand == i)
    snprintf(here, sizeof here, "at dim %d of operand %d", d, i + 1);
  else
    snprintf(here, sizeof here, "in operand %d", i + 1);
  if (w->origin == AXIS_ANON)
    return fail(b, EIN_ERR_SIZE_MISMATCH, &at, 1,
                "expected a dim of size %lld %s, found %lld",
                (long long)w->size, here, (long long)size);
  const char *hint = "";
  if (w->origin == AXIS_ELLIPSIS)
    hint = " (ellipsis dims broadcast only where one size is 1)";
  else if (w->from == FROM_TENSOR && w->from_operand == i)
    hint = " (a name repeated in one operand is a diagonal: its dims must "
           "agree)";
  else if (size == 1 || w->size == 1)
    hint = " (named axes do not broadcast in the einops dialect; use '...' "
           "or the numpy dialect)";
  ein_span spans[2] = {at, w->from_span};
  int nspans = w->from == FROM_TENSOR || w->from == FROM_SPLIT ? 2 : 1;
  return fail(b, EIN_ERR_SIZE_MISMATCH, spans, nspans,
              "%s%s is %lld %s but %lld %s%s", noun, name, (long long)size,
              here, (long long)w->size, where, hint);
}

/* A split as written, with what is known: "(h=2 w=? 3)". */
static void describe_split(const binder *b, const ein_bound_operand *bo,
                           int d, char *buf, size_t cap) {
  const ein_bound_dim *dim = &bo->dims[d];
  size_t len = (size_t)snprintf(buf, cap, "(");
  for (int k = 0; k < dim->count && len + 1 < cap; k++) {
    const axis_work *w = &b->ax[bo->factors[dim->first + k]];
    const char *sep = k ? " " : "";
    if (w->origin == AXIS_ANON)
      len += (size_t)snprintf(buf + len, cap - len, "%s%lld", sep,
                              (long long)w->size);
    else if (w->size >= 0)
      len += (size_t)snprintf(buf + len, cap - len, "%s%.*s=%lld", sep,
                              (int)(w->name_len > 40 ? 40 : w->name_len),
                              w->name, (long long)w->size);
    else
      len += (size_t)snprintf(buf + len, cap - len, "%s%.*s=?", sep,
                              (int)(w->name_len > 40 ? 40 : w->name_len),
                              w->name);
  }
  if (len + 1 < cap) snprintf(buf + len, cap - len, ")");
}

/* Tries to settle one split dim. *progress is set when it solved an axis;
 * *settled when every factor is known and checked. */
/* The product of the split's known factors (false when it overflows), its
 * unknown factor and how many unknown factors it has (a name twice in one
 * split counts twice: it is not linear). */
static bool split_factors(const binder *b, const ein_bound_operand *bo,
                          const ein_bound_dim *dim, int64_t *known,
                          int *unknown, int *nunknown) {
  bool fits = true;
  *known = 1;
  *unknown = -1;
  *nunknown = 0;
  for (int k = 0; k < dim->count; k++) {
    int a = bo->factors[dim->first + k];
    if (b->ax[a].size >= 0) {
      if (!ein_mul_i64(*known, b->ax[a].size, known)) fits = false;
    } else {
      (*nunknown)++;
      *unknown = a;
    }
  }
  return fits;
}

/* The one unknown factor of the split at dim d of operand i is the dim's
 * size over `known`, when that divides exactly. */
static ein_status solve_unknown(binder *b, int i, int d, int64_t known,
                                int unknown) {
  const ein_bound_operand *bo = &b->out->inputs[i];
  const ein_bound_dim *dim = &bo->dims[d];
  ein_span at = b->work[i].dim_span[d];
  char parts[256], name[64];
  axis_name(b, unknown, name, sizeof name);
  describe_split(b, bo, d, parts, sizeof parts);
  if (known == 0 && dim->size == 0)
    return fail(b, EIN_ERR_AMBIGUOUS_SPLIT, &at, 1,
                "cannot solve %s from the split %s at dim %d of operand "
                "%d: the other factors multiply to 0, so any size fits; "
                "give it with a length binding",
                name, parts, d, i + 1);
  if (known == 0)
    return fail(b, EIN_ERR_INDIVISIBLE, &at, 1,
                "cannot split dim %d of operand %d (size %lld) into %s: the "
                "known factors multiply to 0",
                d, i + 1, (long long)dim->size, parts);
  if (dim->size % known != 0)
    return fail(b, EIN_ERR_INDIVISIBLE, &at, 1,
                "cannot split dim %d of operand %d (size %lld) into %s: "
                "%lld is not divisible by %lld",
                d, i + 1, (long long)dim->size, parts, (long long)dim->size,
                (long long)known);
  set_size(&b->ax[unknown], dim->size / known, FROM_SPLIT, at, i, d);
  return EIN_OK;
}

static ein_status solve_split(binder *b, int i, int d, bool *progress,
                              bool *settled) {
  const ein_bound_operand *bo = &b->out->inputs[i];
  const ein_bound_dim *dim = &bo->dims[d];
  ein_span at = b->work[i].dim_span[d];
  int64_t known;
  int unknown, nunknown;
  bool fits = split_factors(b, bo, dim, &known, &unknown, &nunknown);
  *settled = false;
  if (nunknown > 1) return EIN_OK; /* maybe later */
  char parts[256];
  if (!fits) {
    describe_split(b, bo, d, parts, sizeof parts);
    return fail(b, EIN_ERR_OVERFLOW, &at, 1,
                "the split %s at dim %d of operand %d overflows int64", parts,
                d, i + 1);
  }
  if (nunknown == 0 && known != dim->size) {
    describe_split(b, bo, d, parts, sizeof parts);
    return fail(b, EIN_ERR_SIZE_MISMATCH, &at, 1,
                "the split %s at dim %d of operand %d has size %lld but "
                "the dim is %lld",
                parts, d, i + 1, (long long)known, (long long)dim->size);
  }
  if (nunknown == 1) {
    ein_status st = solve_unknown(b, i, d, known, unknown);
    if (st) return st;
    *progress = true;
  }
  *settled = true;
  return EIN_OK;
}

/* Plain dims first: they fix sizes that splits then divide by; a unit
 * axis must meet a dim of size 1. */
static ein_status bind_plain_dims(binder *b) {
  const ein_problem *p = b->out;
  for (int i = 0; i < p->ninputs; i++) {
    const ein_bound_operand *bo = &p->inputs[i];
    for (int d = 0; d < bo->ndim; d++) {
      const ein_bound_dim *dim = &bo->dims[d];
      if (dim->count == 0 && dim->size != 1) {
        ein_span at = b->work[i].dim_span[d];
        return fail(b, EIN_ERR_SIZE_MISMATCH, &at, 1,
                    "expected a dim of size 1 for the unit axis at dim %d of "
                    "operand %d, found %lld",
                    d, i + 1, (long long)dim->size);
      }
      if (dim->count == 1) {
        ein_status st =
            bind_plain(b, i, d, bo->factors[dim->first], dim->size);
        if (st) return st;
      }
    }
  }
  return EIN_OK;
}

/* Solves splits until none makes progress; *open says some split still
 * has unknown factors. */
static ein_status bind_splits(binder *b, bool *open) {
  const ein_problem *p = b->out;
  bool progress = true;
  *open = true;
  while (progress && *open) {
    progress = false;
    *open = false;
    for (int i = 0; i < p->ninputs; i++) {
      const ein_bound_operand *bo = &p->inputs[i];
      for (int d = 0; d < bo->ndim; d++) {
        if (bo->dims[d].count < 2) continue;
        bool settled;
        ein_status st = solve_split(b, i, d, &progress, &settled);
        if (st) return st;
        if (!settled) *open = true;
      }
    }
  }
  return EIN_OK;
}

/* The error for the split at dim d of operand i when some of its factors
 * are still unknown, naming them; EIN_OK when none is. */
static ein_status report_open_split(binder *b, int i, int d) {
  const ein_problem *p = b->out;
  const ein_bound_dim *dim = &p->inputs[i].dims[d];
  char names[160] = "";
  size_t len = 0;
  int nunknown = 0, first = -1;
  for (int k = 0; k < dim->count; k++) {
    int a = p->inputs[i].factors[dim->first + k];
    bool listed = false;
    for (int j = 0; j < k; j++)
      listed |= p->inputs[i].factors[dim->first + j] == a;
    if (b->ax[a].size >= 0 || listed) continue;
    char name[64];
    axis_name(b, a, name, sizeof name);
    if (len + 1 < sizeof names)
      len += (size_t)snprintf(names + len, sizeof names - len, "%s%s",
                              nunknown ? " and " : "", name);
    if (first < 0) first = a;
    nunknown++;
  }
  if (nunknown == 0) return EIN_OK;
  char first_name[64];
  axis_name(b, first, first_name, sizeof first_name);
  ein_span at = b->work[i].dim_span[d];
  if (nunknown == 1) /* the one unknown appears more than once */
    return fail(b, EIN_ERR_AMBIGUOUS_SPLIT, &at, 1,
                "cannot solve the split at dim %d of operand %d (size "
                "%lld): %s appears in it more than once, so exact "
                "division cannot find it; give it with a length binding, "
                "e.g. %.*s=N",
                d, i + 1, (long long)dim->size, first_name,
                hint_len(&b->ax[first]), b->ax[first].name);
  return fail(b, EIN_ERR_AMBIGUOUS_SPLIT, &at, 1,
              "cannot solve the split at dim %d of operand %d (size "
              "%lld): %s are unknown; give all but one with length "
              "bindings, e.g. %.*s=N",
              d, i + 1, (long long)dim->size, names,
              hint_len(&b->ax[first]), b->ax[first].name);
}

/* Sizes of the input axes: plain dims, then splits; a split left open is
 * reported (the first one). */
static ein_status bind_input_sizes(binder *b) {
  const ein_problem *p = b->out;
  bool open;
  ein_status st = bind_plain_dims(b);
  if (!st) st = bind_splits(b, &open);
  if (st || !open) return st;
  for (int i = 0; i < p->ninputs; i++)
    for (int d = 0; d < p->inputs[i].ndim; d++)
      if (p->inputs[i].dims[d].count >= 2 &&
          (st = report_open_split(b, i, d)))
        return st;
  return fail(b, EIN_ERR_INTERNAL, NULL, 0, "a split stayed unsolved");
}

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
  if (!once) return no_memory(b);
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
static ein_status implicit_output(binder *b, ein_bound_operand *bo,
                                  operand_work *w) {
  /* count, then the picked axes (count has one entry per axis; picked
   * stops past EIN_MAX_DIMS, which is refused below). */
  int *count = ein_calloc((size_t)b->naxes + 1, sizeof *count);
  if (!count) return no_memory(b);
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
    return fail(b, EIN_ERR_LIMIT, NULL, 0,
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
    return no_memory(b);
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
    return fail(b, EIN_ERR_BAD_ELLIPSIS, &at, 1,
                "'...' in the output but in no input: there is nothing for "
                "it to stand for");
  }
  if (ast->dialect == EIN_DIALECT_NUMPY && ast->explicit_output &&
      input_ellipsis && !output_ellipsis && b->E > 0) {
    ein_span at = span_of(ast->arrow_offset, 2);
    return fail(b, EIN_ERR_BAD_ELLIPSIS, &at, 1,
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
      return fail(b, EIN_ERR_DUPLICATE_AXIS, spans, 2,
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
      return fail(b, EIN_ERR_UNKNOWN_AXIS, &w->factor_span[f], 1,
                  "output subscript %s appears in no input", name);
    return fail(b, EIN_ERR_MISSING_LENGTH, &w->factor_span[f], 1,
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
        return fail(b, EIN_ERR_OVERFLOW, &w->dim_span[d], 1,
                    "the size of output dim %d overflows int64", d);
    dim->size = size;
  }
  int64_t out_shape[EIN_MAX_DIMS];
  for (int d = 0; d < bo->ndim; d++) out_shape[d] = bo->dims[d].size;
  int64_t span;
  bool empty;
  if (!ein_nonzero_span(bo->ndim, out_shape, &span, &empty))
    return fail(b, EIN_ERR_OVERFLOW, NULL, 0,
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
static ein_status check_axis_rules(binder *b) {
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
      return fail(b, EIN_ERR_UNKNOWN_AXIS, &at, 1,
                  "axis %s is in the output but in no input, and this call "
                  "never repeats (a rearrange): use repeat for new axes",
                  name);
    }
    int i = 0;
    while (i < p->ninputs - 1 &&
           factor_at(&p->inputs[i], &b->work[i], a).length == 0)
      i++;
    ein_span at = factor_at(&p->inputs[i], &b->work[i], a);
    return fail(b, EIN_ERR_BAD_REDUCTION, &at, 1,
                "axis %s is in the input but not in the output, and this "
                "call never reduces (a rearrange or a repeat): name it in "
                "the output, or reduce it with reduce(x, pattern, 'sum')",
                name);
  }
  return EIN_OK;
}

static ein_status check_output(binder *b) {
  ein_status st;
  if ((st = check_output_ellipsis(b)) || (st = check_output_names(b)) ||
      (st = check_output_only_axes(b)))
    return st;
  return size_output_dims(b);
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
        return fail(b, EIN_ERR_INTERNAL, NULL, 0,
                    "dim %d of operand %d disagrees with its axis", d, i + 1);
      dim->broadcast = true;
    }
  }
  p->naxes = b->naxes;
  p->axes = ein_arena_alloc(b->arena, (size_t)b->naxes, sizeof *p->axes);
  if (!p->axes && b->naxes) return no_memory(b);
  for (int a = 0; a < b->naxes; a++) {
    const axis_work *w = &b->ax[a];
    ein_bound_axis *x = &p->axes[a];
    if (w->size < 0)
      return fail(b, EIN_ERR_INTERNAL, NULL, 0, "axis %d has no size", a);
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
    if (!x->label) return no_memory(b);
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
    return fail(b, EIN_ERR_INVALID_ARGUMENT, NULL, 0,
                "unknown reduction %d", (int)r);
  if (r != EIN_REDUCE_SUM && b->ast->ninputs > 1) {
    ein_span all = span_of(0, b->ast->len);
    return fail(b, EIN_ERR_BAD_REDUCTION, &all, 1,
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
  if (!p->inputs && ninputs) return no_memory(b);
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
