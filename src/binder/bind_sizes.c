/*
 * bind_sizes.c - the binder's step 3 (bind.c): every axis's size from
 * length bindings, then plain dims (broadcasting size-1 dims where the
 * dialect allows), then splits solved by exact division until none makes
 * progress; each size remembers where it came from, so a conflict points
 * at both places.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "bind_internal.h"
#include "checked.h"
#include "shape_text.h"

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
int hint_len(const axis_work *w) {
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

ein_status apply_lengths(binder *b) {
  const ein_options *o = b->opt;
  if (o->nlengths < 0 || (o->nlengths > 0 && !o->lengths))
    return bind_fail(b, EIN_ERR_INVALID_ARGUMENT, NULL, 0,
                "options give %d length bindings but no array", o->nlengths);
  for (int i = 0; i < o->nlengths; i++) {
    const ein_length *l = &o->lengths[i];
    if (!l->name)
      return bind_fail(b, EIN_ERR_INVALID_ARGUMENT, NULL, 0,
                  "length binding %d has no name", i + 1);
    size_t len = strlen(l->name);
    char name[64], binding[96];
    ein_quote_name(name, sizeof name, l->name, len);
    snprintf(binding, sizeof binding, "%.40s%s=%lld", l->name,
             len > 40 ? "..." : "", (long long)l->size);
    if (l->size < 0)
      return bind_fail(b, EIN_ERR_BAD_SHAPE, NULL, 0,
                  "the length binding %s is negative; sizes must be 0 or "
                  "more",
                  binding);
    int a = find_named(b, l->name, len);
    if (a < 0)
      return bind_fail(b, EIN_ERR_UNKNOWN_AXIS, NULL, 0,
                  "the length binding %s names no axis of the expression",
                  binding);
    axis_work *w = &b->ax[a];
    if (w->from == FROM_LENGTH && w->size != l->size) {
      const ein_length *prev = &o->lengths[w->from_length];
      return bind_fail(b, EIN_ERR_SIZE_MISMATCH, NULL, 0,
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
    return bind_fail(b, EIN_ERR_SIZE_MISMATCH, &at, 1,
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
  return bind_fail(b, EIN_ERR_SIZE_MISMATCH, spans, nspans,
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
    return bind_fail(b, EIN_ERR_AMBIGUOUS_SPLIT, &at, 1,
                "cannot solve %s from the split %s at dim %d of operand "
                "%d: the other factors multiply to 0, so any size fits; "
                "give it with a length binding",
                name, parts, d, i + 1);
  if (known == 0)
    return bind_fail(b, EIN_ERR_INDIVISIBLE, &at, 1,
                "cannot split dim %d of operand %d (size %lld) into %s: the "
                "known factors multiply to 0",
                d, i + 1, (long long)dim->size, parts);
  if (dim->size % known != 0)
    return bind_fail(b, EIN_ERR_INDIVISIBLE, &at, 1,
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
    return bind_fail(b, EIN_ERR_OVERFLOW, &at, 1,
                "the split %s at dim %d of operand %d overflows int64", parts,
                d, i + 1);
  }
  if (nunknown == 0 && known != dim->size) {
    describe_split(b, bo, d, parts, sizeof parts);
    return bind_fail(b, EIN_ERR_SIZE_MISMATCH, &at, 1,
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
        return bind_fail(b, EIN_ERR_SIZE_MISMATCH, &at, 1,
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
    return bind_fail(b, EIN_ERR_AMBIGUOUS_SPLIT, &at, 1,
                "cannot solve the split at dim %d of operand %d (size "
                "%lld): %s appears in it more than once, so exact "
                "division cannot find it; give it with a length binding, "
                "e.g. %.*s=N",
                d, i + 1, (long long)dim->size, first_name,
                hint_len(&b->ax[first]), b->ax[first].name);
  return bind_fail(b, EIN_ERR_AMBIGUOUS_SPLIT, &at, 1,
              "cannot solve the split at dim %d of operand %d (size "
              "%lld): %s are unknown; give all but one with length "
              "bindings, e.g. %.*s=N",
              d, i + 1, (long long)dim->size, names,
              hint_len(&b->ax[first]), b->ax[first].name);
}

/* Sizes of the input axes: plain dims, then splits; a split left open is
 * reported (the first one). */
ein_status bind_input_sizes(binder *b) {
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
  return bind_fail(b, EIN_ERR_INTERNAL, NULL, 0, "a split stayed unsolved");
}
