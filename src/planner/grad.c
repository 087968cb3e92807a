/*
 * grad.c - the gradient program of a bound problem (grad.h says what it
 * takes and gives; docs/design.md, "Gradients", why it is made this way).
 *
 * Every tensor a step reads or writes has a layout: an einops spec (one
 * identifier per axis, `1` for a unit or broadcast dim, `(a b)` for a dim
 * of several factors), its shape, and the set of axes the spec names. An
 * EINSUM step is its operands' specs, an arrow and its result's spec, with
 * the sizes of the result's axes that no operand names as lengths.
 */
#include "grad.h"

#include <stdio.h>
#include <string.h>

#include "strbuf.h"

enum { MAX_STEPS = 16 };

typedef struct layout {
  const char *spec;
  int ndim;
  int64_t *shape;
  bool *has;   /* has[a]: the spec names axis a */
  bool *plain; /* plain[a]: as a dim of its own, not in a group */
} layout;

typedef struct deriver {
  const ein_problem *p;
  int wrt;
  ein_arena *arena;
  ein_error_rec *err;
  const char **names; /* per axis, an identifier */
  ein_grad_step steps[MAX_STEPS];
  int nsteps;
  bool failed;    /* out of memory, or too many steps (below) */
  bool too_many;  /* a rule made more than MAX_STEPS steps: a bug */
} deriver;

const char *ein_grad_op_name(ein_grad_op op) {
  static const char *const names[] = {
      "einsum", "equal", "mul", "div", "scale", "is_zero", "zero_to_one",
      "prod_select", "scatter_diag"};
  return (unsigned)op < sizeof names / sizeof *names ? names[op] : "?";
}

/* ------------------------------------------------------------- naming */

static bool name_taken(const deriver *d, const char *name, int upto) {
  for (int a = 0; a < d->p->naxes; a++) {
    const char *other = a < upto ? d->names[a]
                        : d->p->axes[a].origin == AXIS_NAMED
                            ? d->p->axes[a].label
                            : NULL;
    if (other && strcmp(other, name) == 0) return true;
  }
  return false;
}

/* User names are identifiers already (the lexer takes Python's); numbers
 * and ellipsis dims get "n<k>" / "e<k>", renumbered past any user name. */
static bool name_axes(deriver *d) {
  int counter = 0;
  for (int a = 0; a < d->p->naxes; a++) {
    const ein_bound_axis *x = &d->p->axes[a];
    if (x->origin == AXIS_NAMED) {
      /* A copy: the program outlives the problem. */
      d->names[a] = ein_arena_strndup(d->arena, x->label, strlen(x->label));
      if (!d->names[a]) return false;
      continue;
    }
    char buf[32];
    do
      snprintf(buf, sizeof buf, "%c%d", x->origin == AXIS_ANON ? 'n' : 'e',
               counter++);
    while (name_taken(d, buf, a));
    d->names[a] = ein_arena_strndup(d->arena, buf, strlen(buf));
    if (!d->names[a]) return false;
  }
  return true;
}

/* ------------------------------------------------------------ layouts */

static bool layout_init(deriver *d, layout *l, int ndim) {
  l->ndim = ndim;
  l->spec = NULL;
  l->shape = ein_arena_alloc(d->arena, (size_t)ndim + 1, sizeof *l->shape);
  size_t n = (size_t)d->p->naxes + 1;
  l->has = ein_arena_alloc(d->arena, n, sizeof *l->has);
  l->plain = ein_arena_alloc(d->arena, n, sizeof *l->plain);
  if (!l->has || !l->plain) return false;
  memset(l->has, 0, n * sizeof *l->has);
  memset(l->plain, 0, n * sizeof *l->plain);
  return l->shape != NULL;
}

static bool layout_finish(deriver *d, layout *l, ein_strbuf *sb) {
  l->spec = sb->failed ? NULL
                       : ein_arena_strndup(d->arena, sb->data ? sb->data : "",
                                           sb->len);
  ein_strbuf_free(sb);
  return l->spec != NULL;
}

/* An operand as the problem binds it. Input broadcast dims are written
 * `1`: they must not bind their axis, whose size comes from elsewhere. */
static bool operand_layout(deriver *d, const ein_bound_operand *o,
                           bool input, layout *l) {
  if (!layout_init(d, l, o->ndim)) return false;
  ein_strbuf sb = {0};
  for (int k = 0; k < o->ndim; k++) {
    const ein_bound_dim *dim = &o->dims[k];
    l->shape[k] = dim->size;
    const char *sep = k ? " " : "";
    if (dim->count == 0 || (input && dim->broadcast)) {
      ein_strbuf_printf(&sb, "%s1", sep);
      continue;
    }
    ein_strbuf_printf(&sb, "%s%s", sep, dim->count > 1 ? "(" : "");
    for (int f = 0; f < dim->count; f++) {
      int a = o->factors[dim->first + f];
      l->has[a] = true;
      l->plain[a] |= dim->count == 1;
      ein_strbuf_printf(&sb, "%s%s", f ? " " : "", d->names[a]);
    }
    if (dim->count > 1) ein_strbuf_printf(&sb, ")");
  }
  return layout_finish(d, l, &sb);
}

/* Axes listed one per dim, in the order given. */
static bool axes_layout(deriver *d, const int *axes, int n, layout *l) {
  if (!layout_init(d, l, n)) return false;
  ein_strbuf sb = {0};
  for (int k = 0; k < n; k++) {
    l->shape[k] = d->p->axes[axes[k]].size;
    l->has[axes[k]] = l->plain[axes[k]] = true;
    ein_strbuf_printf(&sb, "%s%s", k ? " " : "", d->names[axes[k]]);
  }
  return layout_finish(d, l, &sb);
}

/* The distinct axes of an operand's non-broadcast dims, in factor order;
 * *repeats says whether one of them occurs twice (a diagonal). */
static int distinct_axes(const ein_bound_operand *o, int *axes,
                         bool *repeats) {
  int n = 0;
  *repeats = false;
  for (int k = 0; k < o->ndim; k++) {
    if (o->dims[k].broadcast) continue;
    for (int f = 0; f < o->dims[k].count; f++) {
      int a = o->factors[o->dims[k].first + f], seen = 0;
      for (int i = 0; i < n; i++) seen |= axes[i] == a;
      if (seen) *repeats = true;
      else axes[n++] = a;
    }
  }
  return n;
}

/* ---------------------------------------------------------------- steps */

static ein_grad_value val(ein_grad_value_kind kind, int index) {
  return (ein_grad_value){kind, index};
}

/* A new step shaped as l; -1 when there is no room (a bug). */
static int new_step(deriver *d, ein_grad_op op, const ein_grad_value *ops,
                    int n, const layout *l) {
  if (d->nsteps == MAX_STEPS) {
    d->failed = d->too_many = true;
    return -1;
  }
  ein_grad_value *copy = ein_arena_alloc(d->arena, (size_t)n, sizeof *copy);
  if (!copy) {
    d->failed = true;
    return -1;
  }
  memcpy(copy, ops, (size_t)n * sizeof *copy);
  ein_grad_step *s = &d->steps[d->nsteps];
  memset(s, 0, sizeof *s);
  s->op = op;
  s->reduction = EIN_REDUCE_SUM;
  s->noperands = n;
  s->operands = copy;
  s->ndim = l->ndim;
  s->shape = l->shape;
  return d->nsteps++;
}

/* Whether an EINSUM must be told axis a's size: it is in the result but
 * in no operand, or it is a factor of an operand's group (a split einc
 * would have to solve, possibly with several unknowns) and no operand
 * has it as a dim of its own. */
static bool needs_length(const layout *const *from, int n, const layout *to,
                         int a) {
  bool named = false, plain = false;
  for (int i = 0; i < n; i++) {
    named |= from[i]->has[a];
    plain |= from[i]->plain[a];
  }
  return named ? !plain : to->has[a];
}

/* EINSUM of operands (each in its layout) into layout `to`. */
static int einsum(deriver *d, const ein_grad_value *ops,
                  const layout *const *from, int n, const layout *to,
                  ein_reduction reduction) {
  if (d->failed) return -1;
  ein_strbuf sb = {0};
  for (int i = 0; i < n; i++)
    ein_strbuf_printf(&sb, "%s%s", i ? ", " : "", from[i]->spec);
  ein_strbuf_printf(&sb, " -> %s", to->spec);
  ein_length *len =
      ein_arena_alloc(d->arena, (size_t)d->p->naxes + 1, sizeof *len);
  int nlen = 0;
  for (int a = 0; len && a < d->p->naxes; a++)
    if (needs_length(from, n, to, a))
      len[nlen++] = (ein_length){d->names[a], d->p->axes[a].size};
  char *expr = sb.failed || !len ? NULL
                                 : ein_arena_strndup(d->arena, sb.data,
                                                     sb.len);
  ein_strbuf_free(&sb);
  int s = expr ? new_step(d, EIN_GRAD_EINSUM, ops, n, to) : -1;
  if (s < 0) {
    d->failed = true;
    return -1;
  }
  d->steps[s].expr = expr;
  d->steps[s].reduction = reduction;
  d->steps[s].lengths = len;
  d->steps[s].nlengths = nlen;
  return s;
}

static int einsum1(deriver *d, ein_grad_value v, const layout *from,
                   const layout *to, ein_reduction reduction) {
  return einsum(d, &v, &from, 1, to, reduction);
}

static int elementwise(deriver *d, ein_grad_op op, const layout *l, int n,
                       ein_grad_value a, ein_grad_value b, ein_grad_value c,
                       ein_grad_value e) {
  if (d->failed) return -1;
  ein_grad_value ops[4] = {a, b, c, e};
  return new_step(d, op, ops, n, l);
}

#define STEP(j) val(EIN_GRAD_VALUE_STEP, (j))
#define NONE val(EIN_GRAD_VALUE_DOUT, 0)

/* ------------------------------------------------------- the gradient */

/* Where the gradient is computed before it takes the input's shape: the
 * input's own layout, or its distinct axes when it has a diagonal. */
typedef struct target {
  layout x;      /* the input as it is read (broadcast dims `1`) */
  layout g;      /* the gradient's layout before the scatter */
  bool diagonal; /* g is the distinct axes: SCATTER_DIAG at the end */
  int *axes;    /* in the arena: at most the problem's axes */
  int naxes;
} target;

static bool make_target(deriver *d, target *t) {
  const ein_bound_operand *x = &d->p->inputs[d->wrt];
  if (!operand_layout(d, x, true, &t->x)) return false;
  t->axes = ein_arena_alloc(d->arena, (size_t)d->p->naxes + 1,
                            sizeof *t->axes);
  if (!t->axes) return false;
  t->naxes = distinct_axes(x, t->axes, &t->diagonal);
  if (!t->diagonal) {
    t->g = t->x;
    return true;
  }
  return axes_layout(d, t->axes, t->naxes, &t->g);
}

/* The input's C-contiguous element strides summed per distinct axis: the
 * view of the result that is its diagonal. */
static int64_t *diagonal_strides(deriver *d, const target *t) {
  const ein_bound_operand *x = &d->p->inputs[d->wrt];
  int64_t *vs = ein_arena_alloc(d->arena, (size_t)t->naxes + 1, sizeof *vs);
  if (!vs) return NULL;
  memset(vs, 0, ((size_t)t->naxes + 1) * sizeof *vs);
  int64_t dim_stride = 1;
  for (int k = x->ndim - 1; k >= 0; k--) {
    const ein_bound_dim *dim = &x->dims[k];
    int64_t inner = dim_stride;
    for (int f = dim->count - 1; f >= 0 && !dim->broadcast; f--) {
      int a = x->factors[dim->first + f];
      for (int i = 0; i < t->naxes; i++)
        if (t->axes[i] == a) vs[i] += inner;
      inner *= d->p->axes[a].size;
    }
    dim_stride *= dim->size;
  }
  return vs;
}

/* The last step's result, scattered onto the input's diagonal if it has
 * one. */
static void finish_target(deriver *d, const target *t, int last) {
  if (!t->diagonal || d->failed) return;
  int s = elementwise(d, EIN_GRAD_SCATTER_DIAG, &t->x, 1, STEP(last), NONE,
                      NONE, NONE);
  int64_t *vs = s < 0 ? NULL : diagonal_strides(d, t);
  if (!vs) {
    d->failed = true;
    return;
  }
  /* The scatter's shape is the input's, broadcast dims (size 1) too. */
  d->steps[s].ndim_view = t->naxes;
  d->steps[s].view_strides = vs;
}

/* sum and mean: dX_k = einsum(dOut, X_j for j != k -> X_k). */
static void derive_sum(deriver *d, const target *t, const layout *out,
                       const layout *in) {
  size_t cap = (size_t)d->p->ninputs + 1;
  const layout **from = ein_arena_alloc(d->arena, cap, sizeof *from);
  ein_grad_value *ops = ein_arena_alloc(d->arena, cap, sizeof *ops);
  if (!from || !ops) {
    d->failed = true;
    return;
  }
  from[0] = out;
  ops[0] = val(EIN_GRAD_VALUE_DOUT, 0);
  int n = 1;
  for (int j = 0; j < d->p->ninputs; j++) {
    if (j == d->wrt) continue;
    from[n] = &in[j];
    ops[n++] = val(EIN_GRAD_VALUE_INPUT, j);
  }
  int s = einsum(d, ops, from, n, &t->g, EIN_REDUCE_SUM);
  if (d->p->reduction == EIN_REDUCE_MEAN && s >= 0) {
    double count = 1;
    for (int a = 0; a < d->p->naxes; a++)
      if (ein_axis_reduced(d->p, a)) count *= (double)d->p->axes[a].size;
    s = elementwise(d, EIN_GRAD_SCALE, &t->g, 1, STEP(s), NONE, NONE, NONE);
    if (s >= 0) d->steps[s].scale = count > 0 ? 1.0 / count : 0.0;
  }
  finish_target(d, t, s);
}

/* The input as the gradient's layout reads it: itself, or its diagonal. */
static ein_grad_value input_in_g(deriver *d, const target *t) {
  ein_grad_value x = val(EIN_GRAD_VALUE_INPUT, d->wrt);
  if (!t->diagonal) return x;
  return STEP(einsum1(d, x, &t->x, &t->g, EIN_REDUCE_SUM));
}

static bool has_repeats(const ein_problem *p) {
  for (int a = 0; a < p->naxes; a++)
    if (ein_axis_repeated(p, a)) return true;
  return false;
}

/* max and min, both rules: where the input equals the output broadcast
 * to the gradient's layout (1), elsewhere 0. */
static int extremum_mask(deriver *d, const target *t, const layout *out) {
  ein_grad_value x = input_in_g(d, t);
  /* Broadcasting Out to X must not sum the copies of a repeat: reduce
   * them with the forward's own reduction, which is exact on copies. */
  ein_reduction r = has_repeats(d->p) ? d->p->reduction : EIN_REDUCE_SUM;
  int ob = einsum1(d, val(EIN_GRAD_VALUE_OUTPUT, 0), out, &t->g, r);
  return elementwise(d, EIN_GRAD_EQUAL, &t->g, 2, x, STEP(ob), NONE, NONE);
}

/* max and min: the gradient to the extremum, shared evenly by ties. */
static void derive_extremum(deriver *d, const target *t, const layout *out) {
  int mask = extremum_mask(d, t, out);
  int cnt = einsum1(d, STEP(mask), &t->g, out, EIN_REDUCE_SUM);
  int q = elementwise(d, EIN_GRAD_DIV, out, 2, val(EIN_GRAD_VALUE_DOUT, 0),
                      STEP(cnt), NONE, NONE);
  int qb = einsum1(d, STEP(q), out, &t->g, EIN_REDUCE_SUM);
  int g = elementwise(d, EIN_GRAD_MUL, &t->g, 2, STEP(mask), STEP(qb), NONE,
                      NONE);
  finish_target(d, t, g);
}

/* prod: the product of the others, exact where inputs are zero. Zero
 * counts and products of nonzeros live in the kept axes' layout (not the
 * output's, whose repeats a broadcast back would sum). */
/* What both prod rules read, in the gradient's layout: the input x, the
 * zeros in its group (zb) and the product of its group's nonzeros (pb),
 * broadcast back from the kept axes' layout. False when out of memory. */
static bool prod_parts(deriver *d, const target *t, ein_grad_value *x,
                       int *pb, int *zb) {
  int *kept = ein_arena_alloc(d->arena, (size_t)d->p->naxes + 1,
                              sizeof *kept);
  int nk = 0;
  if (!kept) return d->failed = true, false;
  const ein_bound_operand *o = &d->p->output;
  for (int f = 0; f < o->nfactors; f++)
    if (t->g.has[o->factors[f]]) kept[nk++] = o->factors[f];
  layout k;
  if (!axes_layout(d, kept, nk, &k)) return d->failed = true, false;
  *x = input_in_g(d, t);
  int iz = elementwise(d, EIN_GRAD_IS_ZERO, &t->g, 1, *x, NONE, NONE, NONE);
  int z = einsum1(d, STEP(iz), &t->g, &k, EIN_REDUCE_SUM);
  *zb = einsum1(d, STEP(z), &k, &t->g, EIN_REDUCE_SUM);
  int nz = elementwise(d, EIN_GRAD_ZERO_TO_ONE, &t->g, 1, *x, NONE, NONE,
                       NONE);
  int p = einsum1(d, STEP(nz), &t->g, &k, EIN_REDUCE_PROD);
  *pb = einsum1(d, STEP(p), &k, &t->g, EIN_REDUCE_SUM);
  return true;
}

static void derive_prod(deriver *d, const target *t, const layout *out) {
  ein_grad_value x;
  int pb, zb;
  if (!prod_parts(d, t, &x, &pb, &zb)) return;
  int g = einsum1(d, val(EIN_GRAD_VALUE_DOUT, 0), out, &t->g,
                  EIN_REDUCE_SUM);
  int s = elementwise(d, EIN_GRAD_PROD_SELECT, &t->g, 4, STEP(g), STEP(pb),
                      x, STEP(zb));
  finish_target(d, t, s);
}

/* What has no gradient here: any and all (boolean), and a prod whose input
 * repeats a broadcast dim (its product would count the copies). */
static ein_status check_problem(deriver *d) {
  const ein_problem *p = d->p;
  if (d->wrt < 0 || d->wrt >= p->ninputs)
    return ein_fail_argument(d->err,
                             "gradient with respect to input %d, but the "
                             "expression has inputs 0 to %d",
                             d->wrt, p->ninputs - 1);
  if (p->reduction == EIN_REDUCE_ANY || p->reduction == EIN_REDUCE_ALL)
    return ein_fail(d->err, EIN_ERR_BAD_REDUCTION,
                    "the reduction '%s' is boolean and has no gradient; "
                    "sum, mean, max, min and prod have one",
                    ein_reduction_name(p->reduction));
  if (p->reduction != EIN_REDUCE_PROD) return EIN_OK;
  const ein_bound_operand *x = &p->inputs[d->wrt];
  for (int k = 0; k < x->ndim; k++) {
    if (!x->dims[k].broadcast) continue;
    int a = x->factors[x->dims[k].first], elsewhere = 0;
    for (int j = 0; j < x->ndim; j++)
      for (int f = 0; f < x->dims[j].count && !x->dims[j].broadcast; f++)
        elsewhere |= x->factors[x->dims[j].first + f] == a;
    if (!elsewhere)
      return ein_fail(d->err, EIN_ERR_BAD_REDUCTION,
                      "dim %d of input %d has size 1 but stands for axis "
                      "'%s' of size %lld: einc has no gradient of a 'prod' "
                      "over a broadcast dim; expand the input first",
                      k, d->wrt, p->axes[a].label,
                      (long long)p->axes[a].size);
  }
  return EIN_OK;
}

/* The output's and every input's layout and the target's, for either
 * direction; false (and d->failed) when any cannot be made. */
static bool layouts_and_target(deriver *d, layout *out, layout **in,
                               target *t) {
  *in = ein_arena_alloc(d->arena, (size_t)d->p->ninputs, sizeof **in);
  bool ok = *in && operand_layout(d, &d->p->output, false, out);
  for (int j = 0; ok && j < d->p->ninputs; j++)
    ok = operand_layout(d, &d->p->inputs[j], true, &(*in)[j]);
  if (ok && make_target(d, t)) return true;
  d->failed = true;
  return false;
}

static void derive_all(deriver *d) {
  layout out, *in;
  target t;
  if (!layouts_and_target(d, &out, &in, &t)) return;
  switch (d->p->reduction) {
  case EIN_REDUCE_MAX:
  case EIN_REDUCE_MIN: derive_extremum(d, &t, &out); break;
  case EIN_REDUCE_PROD: derive_prod(d, &t, &out); break;
  default: derive_sum(d, &t, &out, in); break;
  }
}

/* ------------------------------------------------------------ the JVP */

#define TANGENT val(EIN_GRAD_VALUE_TANGENT, 0)

/* The tangent of input wrt as the gradient's layout reads it: itself, or
 * its diagonal. */
static ein_grad_value tangent_in_g(deriver *d, const target *t) {
  if (!t->diagonal) return TANGENT;
  return STEP(einsum1(d, TANGENT, &t->x, &t->g, EIN_REDUCE_SUM));
}

/* sum and mean are linear in each input: the forward expression with
 * input wrt replaced by its tangent, with the forward's reduction. */
static void jvp_sum(deriver *d, const layout *out, const layout *in) {
  size_t cap = (size_t)d->p->ninputs + 1;
  const layout **from = ein_arena_alloc(d->arena, cap, sizeof *from);
  ein_grad_value *ops = ein_arena_alloc(d->arena, cap, sizeof *ops);
  if (!from || !ops) {
    d->failed = true;
    return;
  }
  for (int j = 0; j < d->p->ninputs; j++) {
    from[j] = &in[j];
    ops[j] = j == d->wrt ? TANGENT : val(EIN_GRAD_VALUE_INPUT, j);
  }
  einsum(d, ops, from, d->p->ninputs, out, d->p->reduction);
}

/* max and min: the tangent at the arg-extremum, ties averaged (the
 * derivative of torch.amax, and the transpose of the even split the
 * backward makes): sum(mask * T) / sum(mask) per output element. */
static void jvp_extremum(deriver *d, const target *t, const layout *out) {
  int mask = extremum_mask(d, t, out);
  ein_grad_value tg = tangent_in_g(d, t);
  int picked = elementwise(d, EIN_GRAD_MUL, &t->g, 2, STEP(mask), tg, NONE,
                           NONE);
  /* Into the output's layout a sum adds the reduced axes' elements and
   * copies the repeated axes: exactly what both sums need. */
  int num = einsum1(d, STEP(picked), &t->g, out, EIN_REDUCE_SUM);
  int cnt = einsum1(d, STEP(mask), &t->g, out, EIN_REDUCE_SUM);
  elementwise(d, EIN_GRAD_DIV, out, 2, STEP(num), STEP(cnt), NONE, NONE);
}

/* prod: sum over each group of T * (the product of the others), exact
 * where inputs are zero: PROD_SELECT with the tangent in the gradient's
 * place gives T * d(prod)/dx per element (derive_prod's counts and
 * products of nonzeros), and a sum takes it to the output. */
static void jvp_prod(deriver *d, const target *t, const layout *out) {
  ein_grad_value x;
  int pb, zb;
  if (!prod_parts(d, t, &x, &pb, &zb)) return;
  ein_grad_value tg = tangent_in_g(d, t);
  int s = elementwise(d, EIN_GRAD_PROD_SELECT, &t->g, 4, tg, STEP(pb), x,
                      STEP(zb));
  einsum1(d, STEP(s), &t->g, out, EIN_REDUCE_SUM);
}

static void derive_jvp(deriver *d) {
  layout out, *in;
  target t;
  if (!layouts_and_target(d, &out, &in, &t)) return;
  switch (d->p->reduction) {
  case EIN_REDUCE_MAX:
  case EIN_REDUCE_MIN: jvp_extremum(d, &t, &out); break;
  case EIN_REDUCE_PROD: jvp_prod(d, &t, &out); break;
  default: jvp_sum(d, &out, in); break;
  }
}

/* ------------------------------------------------------------- entry */

static ein_status derive(const ein_problem *p, int wrt, bool jvp,
                         ein_arena *arena, ein_error_rec *err,
                         ein_grad_program *out) {
  deriver *d = ein_arena_alloc(arena, 1, sizeof *d);
  if (!d) return ein_fail_memory(err, "out of memory deriving a gradient");
  memset(d, 0, sizeof *d);
  d->p = p;
  d->wrt = wrt;
  d->arena = arena;
  d->err = err;
  ein_status st = check_problem(d);
  if (st) return st;
  d->names = ein_arena_alloc(arena, (size_t)p->naxes + 1, sizeof *d->names);
  if (!d->names || !name_axes(d))
    return ein_fail_memory(err, "out of memory deriving a gradient");
  if (jvp) derive_jvp(d);
  else derive_all(d);
  if (d->too_many || (!d->failed && d->nsteps == 0))
    return ein_fail_internal(err, "the gradient program of input %d has "
                             "%d steps, more than the %d a rule makes",
                             wrt, d->nsteps, MAX_STEPS);
  if (d->failed)
    return ein_fail_memory(err, "out of memory deriving a gradient");
  out->nsteps = d->nsteps;
  out->steps = d->steps;
  out->needs_output = false;
  for (int s = 0; s < d->nsteps; s++)
    for (int i = 0; i < d->steps[s].noperands; i++)
      out->needs_output |=
          d->steps[s].operands[i].kind == EIN_GRAD_VALUE_OUTPUT;
  return EIN_OK;
}

ein_status ein_grad_derive(const ein_problem *p, int wrt, ein_arena *arena,
                           ein_error_rec *err, ein_grad_program *out) {
  return derive(p, wrt, false, arena, err, out);
}

ein_status ein_jvp_derive(const ein_problem *p, int wrt, ein_arena *arena,
                          ein_error_rec *err, ein_grad_program *out) {
  return derive(p, wrt, true, arena, err, out);
}
