/*
 * shape_check.c - jaxtyping-style shape assertions (see ein.h).
 *
 * A check is transactional: it works out every binding the spec implies
 * against the memo plus the bindings made earlier in the same spec, and
 * commits them only when the whole shape matched. A failed check therefore
 * leaves the memo as it was.
 *
 * Order inside one spec: runs and plain names bind first, then size
 * expressions and groups are settled repeatedly (a group may solve one
 * unknown factor by exact division) until none makes progress.
 */
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "arena.h"
#include "checked.h"
#include "error.h"
#include "parser.h"

/* One bound name: a size, or a run of sizes. */
typedef struct binding {
  char *name;
  bool is_run;
  int64_t size;
  int run_len;
  int64_t run[EIN_MAX_DIMS];
  char *what; /* the tensor that bound it, its file and line */
  char *file;
  int line;
} binding;

struct ein_shape_memo {
  ein_error_rec err;
  binding **items;
  int n, cap;
};

/* The state of one check. */
typedef struct check {
  ein_shape_memo *memo;
  const ein_spec *spec;
  int ndim;
  const int64_t *shape;
  const char *what, *file;
  int line;
  int first_dim[EIN_MAX_DIMS + 1]; /* spec dim -> its first tensor dim */
  binding *pending[EIN_MAX_DIMS + 1];
  int npending;
} check;

ein_status ein_shape_memo_create(ein_shape_memo **out) {
  if (!out) return EIN_ERR_INVALID_ARGUMENT;
  *out = ein_calloc(1, sizeof **out);
  if (!*out) return EIN_ERR_NO_MEMORY;
  ein_error_init(&(*out)->err);
  return EIN_OK;
}

static void free_binding(binding *b) {
  if (!b) return;
  ein_free(b->name);
  ein_free(b->what);
  ein_free(b->file);
  ein_free(b);
}

void ein_shape_memo_clear(ein_shape_memo *memo) {
  if (!memo) return;
  for (int i = 0; i < memo->n; i++) free_binding(memo->items[i]);
  memo->n = 0;
  ein_error_clear(&memo->err);
}

void ein_shape_memo_destroy(ein_shape_memo *memo) {
  if (!memo) return;
  ein_shape_memo_clear(memo);
  ein_free(memo->items);
  ein_free(memo);
}

const ein_error *ein_shape_memo_error(const ein_shape_memo *memo) {
  return memo ? &memo->err.pub : NULL;
}

static binding *find_in(binding *const *items, int n, const char *name,
                        size_t len) {
  for (int i = 0; i < n; i++)
    if (strlen(items[i]->name) == len &&
        memcmp(items[i]->name, name, len) == 0)
      return items[i];
  return NULL;
}

int64_t ein_shape_memo_size(const ein_shape_memo *memo, const char *name) {
  if (!memo || !name) return -1;
  binding *b = find_in(memo->items, memo->n, name, strlen(name));
  return b && !b->is_run ? b->size : -1;
}

/* ------------------------------------------------------------ errors */

static void tensor_label(const check *c, char *buf, size_t cap) {
  if (c->what)
    snprintf(buf, cap, "'%.60s'", c->what);
  else
    snprintf(buf, cap, "the tensor");
}

static void shape_text(int ndim, const int64_t *shape, char *buf,
                       size_t cap) {
  size_t len = 0;
  if (ndim == 0) {
    snprintf(buf, cap, "()");
    return;
  }
  len += (size_t)snprintf(buf, cap, "(");
  for (int d = 0; d < ndim && len + 1 < cap; d++)
    len += (size_t)snprintf(buf + len, cap - len, "%s%lld", d ? ", " : "",
                            (long long)shape[d]);
  if (len + 1 < cap) snprintf(buf + len, cap - len, ")");
}

/* "bound by 'x' at test.c:12" */
static void origin_text(const binding *b, char *buf, size_t cap) {
  char what[80] = "an earlier check";
  if (b->what) snprintf(what, sizeof what, "'%.60s'", b->what);
  if (b->file)
    snprintf(buf, cap, "as bound by %s at %.80s:%d", what, b->file, b->line);
  else
    snprintf(buf, cap, "as bound by %s", what);
}

static ein_status fail(check *c, ein_status status, const ein_spec_dim *at,
                       const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static ein_status fail(check *c, ein_status status, const ein_spec_dim *at,
                       const char *fmt, ...) {
  char msg[EIN_MESSAGE_BYTES - 160], where[160] = "", label[80],
                                    shape[96];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  tensor_label(c, label, sizeof label);
  shape_text(c->ndim, c->shape, shape, sizeof shape);
  if (c->file)
    snprintf(where, sizeof where, " [%s, shape %s, at %.60s:%d]", label,
             shape, c->file, c->line);
  else
    snprintf(where, sizeof where, " [%s, shape %s]", label, shape);
  ein_span span = {at ? at->offset : 0, at ? at->length : 0};
  return ein_error_set(&c->memo->err, status, c->spec->src, c->spec->len,
                       &span, at ? 1 : 0, "%s%s", msg, where);
}

static ein_status no_memory(check *c) {
  return ein_fail_memory(&c->memo->err, "out of memory in a shape check");
}

/* ----------------------------------------------------------- bindings */

static binding *lookup(check *c, const char *name, size_t len) {
  binding *b = find_in(c->pending, c->npending, name, len);
  return b ? b : find_in(c->memo->items, c->memo->n, name, len);
}

static ein_status add_pending(check *c, const char *name, size_t len,
                              binding **out) {
  binding *b = ein_calloc(1, sizeof *b);
  if (!b) return no_memory(c);
  b->name = ein_strndup(name, len);
  b->what = c->what ? ein_strndup(c->what, strlen(c->what)) : NULL;
  b->file = c->file ? ein_strndup(c->file, strlen(c->file)) : NULL;
  b->line = c->line;
  if (!b->name || (c->what && !b->what) || (c->file && !b->file)) {
    free_binding(b);
    return no_memory(c);
  }
  c->pending[c->npending++] = b;
  *out = b;
  return EIN_OK;
}

static ein_status commit(check *c) {
  ein_shape_memo *m = c->memo;
  if (m->n + c->npending > m->cap) {
    int cap = m->cap ? m->cap : 16;
    while (cap < m->n + c->npending) cap *= 2;
    binding **items = ein_realloc(m->items, (size_t)cap * sizeof *items);
    if (!items) return no_memory(c);
    m->items = items;
    m->cap = cap;
  }
  for (int i = 0; i < c->npending; i++) m->items[m->n++] = c->pending[i];
  c->npending = 0;
  return EIN_OK;
}

/* Checks or binds a plain name against a tensor size. */
static ein_status check_name(check *c, const ein_spec_dim *d, int64_t size,
                             int dim) {
  binding *b = lookup(c, d->name, d->name_len);
  char name[64];
  ein_quote_name(name, sizeof name, d->name, d->name_len);
  if (b && b->is_run)
    return fail(c, EIN_ERR_SIZE_MISMATCH, d,
                "%s names a run of dims (*%.*s) elsewhere, not a single dim",
                name, (int)d->name_len, d->name);
  if (!b) {
    ein_status st = add_pending(c, d->name, d->name_len, &b);
    if (st) return st;
    b->size = size;
    return EIN_OK;
  }
  if (b->size == size) return EIN_OK;
  if (d->kind == SPEC_BCAST && size == 1) return EIN_OK;
  char origin[200];
  origin_text(b, origin, sizeof origin);
  return fail(c, EIN_ERR_SIZE_MISMATCH, d, "axis %s is %lld at dim %d but %lld %s",
              name, (long long)size, dim, (long long)b->size, origin);
}

static ein_status check_run(check *c, const ein_spec_dim *d, int first,
                            int len) {
  if (!d->name) return EIN_OK; /* *_ */
  /* a scalar's shape may be NULL: no arithmetic on it */
  const int64_t *dims = c->shape ? c->shape + first : NULL;
  binding *b = lookup(c, d->name, d->name_len);
  char name[64];
  ein_quote_name(name, sizeof name, d->name, d->name_len);
  if (!b) {
    ein_status st = add_pending(c, d->name, d->name_len, &b);
    if (st) return st;
    b->is_run = true;
    b->run_len = len;
    if (len > 0) memcpy(b->run, dims, (size_t)len * sizeof *b->run);
    return EIN_OK;
  }
  char origin[200], want[96], got[96];
  origin_text(b, origin, sizeof origin);
  if (!b->is_run)
    return fail(c, EIN_ERR_SIZE_MISMATCH, d,
                "%s is a single dim %s, not a run of dims", name, origin);
  shape_text(b->run_len, b->run, want, sizeof want);
  shape_text(len, dims, got, sizeof got);
  if (b->run_len != len)
    return fail(c, EIN_ERR_RANK_MISMATCH, d,
                "the run %s covers %d dims %s here but %d %s %s", name, len,
                got, b->run_len, want, origin);
  for (int k = 0; k < len; k++) {
    int64_t s = dims[k];
    if (s == b->run[k] || (d->broadcast && s == 1)) continue;
    return fail(c, EIN_ERR_SIZE_MISMATCH, d,
                "the run %s is %s here but %s %s (they differ at its dim %d)",
                name, got, want, origin, k);
  }
  return EIN_OK;
}

/* ----------------------------------------------- expressions, groups */

typedef enum eval_result { EVAL_OK, EVAL_UNBOUND, EVAL_OVERFLOW } eval_result;

/* Evaluates a size expression; on EVAL_UNBOUND *unbound is the first name
 * that has no size yet. Trees are at most MAX_SX_NODES deep (parser). */
static eval_result eval(check *c, const ein_sexpr *e, int64_t *out,
                        const ein_sexpr **unbound) {
  if (e->kind == SEXPR_NUMBER) {
    *out = e->value;
    return EVAL_OK;
  }
  if (e->kind == SEXPR_NAME) {
    binding *b = lookup(c, e->name, e->name_len);
    if (!b || b->is_run) {
      *unbound = e;
      return EVAL_UNBOUND;
    }
    *out = b->size;
    return EVAL_OK;
  }
  int64_t l, r;
  eval_result res = eval(c, e->lhs, &l, unbound);
  if (res != EVAL_OK) return res;
  res = eval(c, e->rhs, &r, unbound);
  if (res != EVAL_OK) return res;
  bool ok = e->kind == SEXPR_ADD   ? ein_add_i64(l, r, out)
            : e->kind == SEXPR_SUB ? ein_sub_i64(l, r, out)
                                   : ein_mul_i64(l, r, out);
  return ok ? EVAL_OK : EVAL_OVERFLOW;
}

/* Settles a SPEC_EXPR dim if its names are bound. */
static ein_status settle_expr(check *c, const ein_spec_dim *d, int dim,
                              bool *done) {
  int64_t v;
  const ein_sexpr *unbound = NULL;
  eval_result res = eval(c, d->expr, &v, &unbound);
  *done = res != EVAL_UNBOUND;
  if (res == EVAL_UNBOUND) return EIN_OK;
  if (res == EVAL_OVERFLOW)
    return fail(c, EIN_ERR_OVERFLOW, d,
                "the size expression '%.*s' overflows int64",
                (int)d->length, c->spec->src + d->offset);
  if (v != c->shape[dim])
    return fail(c, EIN_ERR_SIZE_MISMATCH, d,
                "dim %d is %lld but '%.*s' is %lld", dim,
                (long long)c->shape[dim], (int)d->length,
                c->spec->src + d->offset, (long long)v);
  return EIN_OK;
}

/* Settles a group: checks the product, or solves its one unknown name. */
static ein_status settle_group(check *c, const ein_spec_dim *d, int dim,
                               bool *done, bool *progress) {
  int64_t known = 1, size = c->shape[dim];
  const ein_spec_dim *unknown = NULL;
  int nunknown = 0;
  *done = false;
  for (int k = 0; k < d->nfactors; k++) {
    const ein_spec_dim *f = &d->factors[k];
    int64_t v;
    const ein_sexpr *unbound = NULL;
    eval_result res = EVAL_OK;
    if (f->kind == SPEC_FIXED) {
      v = f->value;
    } else if (f->kind == SPEC_NAME) {
      binding *b = lookup(c, f->name, f->name_len);
      if (b && b->is_run)
        return fail(c, EIN_ERR_SIZE_MISMATCH, f,
                    "'%.*s' names a run of dims, not a factor",
                    (int)f->name_len, f->name);
      if (!b) { /* a second unknown, even the same name, is not solvable */
        if (!unknown) unknown = f;
        nunknown++;
        continue;
      }
      v = b->size;
    } else {
      res = eval(c, f->expr, &v, &unbound);
      if (res == EVAL_UNBOUND) {
        nunknown += 2; /* expressions are not solved for */
        continue;
      }
    }
    if (res == EVAL_OVERFLOW || !ein_mul_i64(known, v, &known))
      return fail(c, EIN_ERR_OVERFLOW, d, "the group overflows int64");
  }
  if (nunknown > 1) return EIN_OK;
  if (nunknown == 0) {
    *done = true;
    if (known != size)
      return fail(c, EIN_ERR_SIZE_MISMATCH, d,
                  "dim %d is %lld but the group is %lld", dim,
                  (long long)size, (long long)known);
    return EIN_OK;
  }
  if (known == 0 || size % known != 0)
    return fail(c, known == 0 && size == 0 ? EIN_ERR_AMBIGUOUS_SPLIT
                                           : EIN_ERR_INDIVISIBLE,
                d, "dim %d (%lld) cannot be split into this group: the known "
                   "factors multiply to %lld",
                dim, (long long)size, (long long)known);
  binding *b;
  ein_status st = add_pending(c, unknown->name, unknown->name_len, &b);
  if (st) return st;
  b->size = size / known;
  *done = true;
  *progress = true;
  return EIN_OK;
}

/* Reports the first expression or group that could not be settled. */
static ein_status report_unsettled(check *c, const bool *done) {
  for (int i = 0; i < c->spec->ndims; i++) {
    if (done[i]) continue;
    const ein_spec_dim *d = &c->spec->dims[i];
    const ein_sexpr *unbound = NULL;
    int64_t v;
    if (d->kind == SPEC_EXPR && eval(c, d->expr, &v, &unbound) == EVAL_UNBOUND)
      return fail(c, EIN_ERR_UNKNOWN_AXIS, d,
                  "'%.*s' in '%.*s' is not bound yet; bind it as a plain dim "
                  "first (size expressions are evaluated, not solved)",
                  (int)unbound->name_len, unbound->name, (int)d->length,
                  c->spec->src + d->offset);
    if (d->kind == SPEC_GROUP)
      return fail(c, EIN_ERR_AMBIGUOUS_SPLIT, d,
                  "cannot solve the group at dim %d: more than one factor is "
                  "unknown",
                  c->first_dim[i]);
  }
  return fail(c, EIN_ERR_INTERNAL, NULL, "a spec dim stayed unsettled");
}

static ein_status run_check(check *c) {
  const ein_spec *spec = c->spec;
  int fixed = spec->ndims - (spec->run_index >= 0 ? 1 : 0);
  int run_len = c->ndim - fixed;
  if (run_len < 0 || (spec->run_index < 0 && run_len != 0)) {
    ein_spec_dim whole = {.offset = 0, .length = spec->len};
    return fail(c, EIN_ERR_RANK_MISMATCH, &whole,
                "expected %s%d dim%s, found %d", spec->run_index >= 0
                ? "at least " : "", fixed, fixed == 1 ? "" : "s", c->ndim);
  }
  for (int i = 0, dim = 0; i < spec->ndims; i++) {
    c->first_dim[i] = dim;
    dim += i == spec->run_index ? run_len : 1;
  }
  bool done[EIN_MAX_DIMS + 1] = {false};
  /* runs, names, fixed sizes and wildcards */
  for (int i = 0; i < spec->ndims; i++) {
    const ein_spec_dim *d = &spec->dims[i];
    int dim = c->first_dim[i];
    ein_status st = EIN_OK;
    switch (d->kind) {
    case SPEC_RUN: st = check_run(c, d, dim, run_len); break;
    case SPEC_NAME: st = check_name(c, d, c->shape[dim], dim); break;
    case SPEC_BCAST:
      if (c->shape[dim] != 1) st = check_name(c, d, c->shape[dim], dim);
      break;
    case SPEC_FIXED:
      if (c->shape[dim] != d->value)
        st = fail(c, EIN_ERR_SIZE_MISMATCH, d, "dim %d is %lld, expected %lld",
                  dim, (long long)c->shape[dim], (long long)d->value);
      break;
    case SPEC_ANY: break;
    case SPEC_EXPR:
    case SPEC_GROUP: continue;
    }
    if (st) return st;
    done[i] = true;
  }
  /* expressions and groups, until none makes progress */
  bool progress = true, open = true;
  while (progress && open) {
    progress = open = false;
    for (int i = 0; i < spec->ndims; i++) {
      if (done[i]) continue;
      const ein_spec_dim *d = &spec->dims[i];
      ein_status st = d->kind == SPEC_EXPR
                          ? settle_expr(c, d, c->first_dim[i], &done[i])
                          : settle_group(c, d, c->first_dim[i], &done[i],
                                         &progress);
      if (st) return st;
      if (done[i])
        progress = true;
      else
        open = true;
    }
  }
  return open ? report_unsettled(c, done) : EIN_OK;
}

ein_status ein_shape_check_dims(ein_shape_memo *memo, const char *spec,
                                int ndim, const int64_t *shape,
                                const char *what, const char *file,
                                int line) {
  if (!memo) return EIN_ERR_INVALID_ARGUMENT;
  ein_error_clear(&memo->err);
  if (!spec || ndim < 0 || ndim > EIN_MAX_DIMS || (ndim > 0 && !shape))
    return ein_fail_argument(&memo->err, "shape check: %s",
                             !spec ? "the spec is NULL"
                             : ndim < 0 || ndim > EIN_MAX_DIMS
                                 ? "the rank is out of range"
                                 : "the shape array is NULL");
  for (int d = 0; d < ndim; d++)
    if (shape[d] < 0)
      return ein_fail_shape(&memo->err,
                            "shape check: dim %d is %lld; sizes must be 0 or "
                            "more",
                            d, (long long)shape[d]);
  ein_arena arena;
  ein_arena_init(&arena);
  ein_spec parsed;
  size_t len = strnlen(spec, (size_t)EIN_MAX_EXPR_BYTES + 1);
  ein_status st = ein_parse_spec(spec, len, &arena, &memo->err, &parsed);
  if (!st) {
    check c = {.memo = memo, .spec = &parsed, .ndim = ndim, .shape = shape,
               .what = what, .file = file, .line = line};
    st = run_check(&c);
    if (!st) st = commit(&c);
    for (int i = 0; i < c.npending; i++) free_binding(c.pending[i]);
  }
  ein_arena_destroy(&arena);
  return st;
}

ein_status ein_shape_check_tensor(ein_shape_memo *memo, const char *spec,
                                  const DLTensor *tensor, const char *what,
                                  const char *file, int line) {
  if (!memo) return EIN_ERR_INVALID_ARGUMENT;
  if (!tensor) {
    ein_error_clear(&memo->err);
    return ein_fail_argument(&memo->err, "shape check: the tensor is NULL");
  }
  return ein_shape_check_dims(memo, spec, tensor->ndim, tensor->shape, what,
                              file, line);
}
