/*
 * test_grad.c - gradients (ein_grad_create, ein_grad_execute) of random
 * expressions from the evaluation suite's generator (gen_expr.h:
 * contractions, splits and merges, repeats, diagonals, ellipsis broadcast,
 * the numpy dialect) under every reduction that has a gradient.
 *
 * The loss is L = sum(W * out) for a random W (so dOut = W). Each case
 * checks, for every input:
 *   f64   ein_grad_execute against central finite differences of L computed
 *         by the direct-sum reference (reference.h) on sampled elements:
 *         L is affine in each single element for sum, mean and prod, and
 *         piecewise affine for max and min, so the differences are exact
 *         up to rounding (h = 1e-3; 1e-6 for max and min, where the step
 *         must not cross a tie); tolerance 1e-6 of the norm;
 *   f32, f16, bf16   ein_grad_execute on inputs rounded to the dtype against
 *         the f64 gradient of the same rounded values (1e-5, 2e-2, 2e-2);
 *   c128  (some cases, sum/mean/prod) against finite differences of
 *         Re(sum(conj(W) * out)) in both parts: torch's convention,
 *         dX = dOut * conj(dOut/dX).
 * Inputs and dinput are C-contiguous or column-major at random. Forward
 * mode (ein_jvp_create) on the same cases, for every input and a random
 * tangent T: the output's tangent part against central differences of
 * the output along T (h = 1e-5, 1e-6 for max and min; 1e-6 of the norm;
 * not on tie cases, where differences are one-sided), and
 * <W, jvp> = <gradient, T> (the JVP is the transpose of the VJP, ties
 * included) to 1e-9. Then the tie rule (max/min ties share evenly),
 * prod's zeros, a diagonal's scatter, the JVP's ties and zeros, and the
 * error statuses are checked on hand-made cases.
 * EIN_SEED=N and EIN_CASES=N (default 800) select the run.
 */
#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ein.h"
#include "gen_expr.h"
#include "grad_device.h"
#include "harness.h"
#include "reference.h"

typedef struct tensor {
  DLTensor t;
  int64_t shape[EIN_MAX_DIMS], strides[EIN_MAX_DIMS];
  void *data;
} tensor;

static int64_t numel_of(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= shape[d];
  return n;
}

/* A zeroed tensor, C-contiguous or column-major. */
static void tensor_make(tensor *x, ein_dtype dt, int ndim,
                        const int64_t *shape, bool column_major) {
  memset(x, 0, sizeof *x);
  int64_t s = 1;
  for (int k = 0; k < ndim; k++) {
    int d = column_major ? k : ndim - 1 - k;
    x->shape[d] = shape[d];
    x->strides[d] = s;
    s *= shape[d] > 0 ? shape[d] : 1;
  }
  x->data = calloc((size_t)(s > 0 ? s : 1), ein_dtype_size(dt));
  x->t = (DLTensor){.data = x->data, .device = {kDLCPU, 0}, .ndim = ndim,
                    .dtype = ein_dtype_to_dl(dt), .shape = x->shape,
                    .strides = x->strides};
}

static void tensor_free(tensor *x) { free(x->data); }

/* The element offset of the i-th element in C order. */
static int64_t offset_of(const tensor *x, int64_t i) {
  int64_t off = 0;
  for (int d = x->t.ndim - 1; d >= 0; d--) {
    off += (i % x->shape[d]) * x->strides[d];
    i /= x->shape[d];
  }
  return off;
}

static double get(const tensor *x, int64_t i) {
  ein_dtype dt;
  ein_dtype_from_dl(x->t.dtype, &dt);
  return ref_load(dt, x->data, offset_of(x, i));
}

static void set(tensor *x, int64_t i, double v) {
  ein_dtype dt;
  ein_dtype_from_dl(x->t.dtype, &dt);
  ref_store(dt, x->data, offset_of(x, i), v);
}

/* --------------------------------------------------------- the cases */

enum { MAX_CHECKED = 24 };

typedef struct gcase {
  gen_case g;
  uint64_t seed;
  ein_binding *binding;
  const ein_problem *p;
  tensor in[TEST_MAX_OPERANDS];
  tensor w; /* the loss weights: dOut */
  int64_t out_numel;
} gcase;

static ein_ctx *ctx;
static int cases_run, checks_skipped, ties_run, complex_runs;
static int counted[EIN_REDUCE_ALL + 1];
static bool planted_note;

/* A value for a random input: away from zero for prod (so products stay
 * moderate) except for planted zeros; distinct values elsewhere. */
static bool tie_values; /* max/min cases of few distinct values */

static double draw(ein_reduction r) {
  if (tie_values) return 0.25 * rnd_int(3);
  if (r == EIN_REDUCE_PROD) {
    if (rnd_int(8) == 0) return 0;
    double m = 0.5 + rnd_unit();
    return rnd_int(2) ? m : -m;
  }
  return 2 * rnd_unit() - 1;
}

/* Draws a case whose dtype and reduction have a gradient: the generator's
 * expression, computed in f64, with any/all turned into max/min. */
static bool case_setup(gcase *c, uint64_t seed) {
  memset(c, 0, sizeof *c);
  c->seed = seed;
  gen_seed(seed);
  generate(&c->g);
  ein_options *o = &c->g.opt;
  if (o->reduction == EIN_REDUCE_ANY) o->reduction = EIN_REDUCE_MAX;
  if (o->reduction == EIN_REDUCE_ALL) o->reduction = EIN_REDUCE_MIN;
  /* The generator draws mean rarely: one in three single-operand sums. */
  if (c->g.n == 1 && o->reduction == EIN_REDUCE_SUM && seed % 3 == 0 &&
      o->dialect == EIN_DIALECT_EINOPS)
    o->reduction = EIN_REDUCE_MEAN;
  const int64_t *shapes[TEST_MAX_OPERANDS];
  for (int i = 0; i < c->g.n; i++) shapes[i] = c->g.shapes[i];
  if (ein_bind_shapes(ctx, c->g.expr, shapes, c->g.ndims, c->g.n, o,
                      &c->binding) != EIN_OK)
    return false;
  c->p = ein_binding_problem(c->binding);
  bool empty;
  double terms = ref_count(c->p, &empty) *
                 (double)numel_of(ein_binding_output_ndim(c->binding),
                                  ein_binding_output_shape(c->binding));
  if (terms > 40000 || (empty && o->reduction >= EIN_REDUCE_MAX)) {
    ein_binding_destroy(c->binding);
    return false; /* the reference would be slow; max of nothing */
  }
  for (int i = 0; i < c->g.n; i++) {
    tensor_make(&c->in[i], EIN_DT_F64, c->g.ndims[i], c->g.shapes[i],
                rnd_int(3) == 0);
    int64_t n = numel_of(c->g.ndims[i], c->g.shapes[i]);
    for (int64_t e = 0; e < n; e++) set(&c->in[i], e, draw(o->reduction));
  }
  int ond = ein_binding_output_ndim(c->binding);
  tensor_make(&c->w, EIN_DT_F64, ond, ein_binding_output_shape(c->binding),
              false);
  c->out_numel = numel_of(ond, c->w.shape);
  for (int64_t e = 0; e < c->out_numel; e++) set(&c->w, e, 2 * rnd_unit() - 1);
  return true;
}

static void case_free(gcase *c) {
  for (int i = 0; i < c->g.n; i++) tensor_free(&c->in[i]);
  tensor_free(&c->w);
  ein_binding_destroy(c->binding);
}

static const DLTensor *const *input_ptrs(tensor *in, int n,
                                         const DLTensor **buf) {
  for (int i = 0; i < n; i++) buf[i] = &in[i].t;
  return buf;
}

/* L = sum(W * out) by the reference, on the f64 inputs. */
static double loss(gcase *c, double *scratch) {
  const DLTensor *ptrs[TEST_MAX_OPERANDS];
  ref_eval(c->p, input_ptrs(c->in, c->g.n, ptrs), scratch, c->out_numel);
  double l = 0;
  for (int64_t o = 0; o < c->out_numel; o++) l += get(&c->w, o) * scratch[o];
  return l;
}

/* The gradient w.r.t. input wrt by ein_grad_execute, in dtype dt, from
 * inputs and weights rounded to dt; *st the status. dinput comes back in
 * f64 (column-major at random), as a tensor of the caller's. */
static ein_status run_grad(gcase *c, int wrt, ein_dtype dt, tensor *grad) {
  tensor in[TEST_MAX_OPERANDS], w, out, dx;
  const DLTensor *ptrs[TEST_MAX_OPERANDS];
  for (int i = 0; i < c->g.n; i++) {
    tensor_make(&in[i], dt, c->g.ndims[i], c->g.shapes[i], rnd_int(2));
    int64_t n = numel_of(c->g.ndims[i], c->g.shapes[i]);
    for (int64_t e = 0; e < n; e++) set(&in[i], e, get(&c->in[i], e));
  }
  tensor_make(&w, dt, c->w.t.ndim, c->w.shape, false);
  tensor_make(&out, dt, c->w.t.ndim, c->w.shape, false);
  for (int64_t e = 0; e < c->out_numel; e++) set(&w, e, get(&c->w, e));
  tensor_make(&dx, dt, c->g.ndims[wrt], c->g.shapes[wrt], rnd_int(2));
  input_ptrs(in, c->g.n, ptrs);
  ein_status st = ein_eval(ctx, c->g.expr, ptrs, c->g.n, &out.t, &c->g.opt);
  if (!st)
    st = grad_run_on(ctx, false, c->g.expr, &c->g.opt, ptrs, c->g.n, wrt,
                     &out.t, &w.t, &dx.t, NULL);
  tensor_make(grad, EIN_DT_F64, c->g.ndims[wrt], c->g.shapes[wrt], false);
  int64_t n = numel_of(c->g.ndims[wrt], c->g.shapes[wrt]);
  for (int64_t e = 0; !st && e < n; e++) set(grad, e, get(&dx, e));
  for (int i = 0; i < c->g.n; i++) tensor_free(&in[i]);
  tensor_free(&w);
  tensor_free(&out);
  tensor_free(&dx);
  return st;
}

/* Up to MAX_CHECKED elements of input wrt (all of them when few). */
static int sample(int64_t n, int64_t *at) {
  if (n <= MAX_CHECKED) {
    for (int64_t e = 0; e < n; e++) at[e] = e;
    return (int)n;
  }
  for (int k = 0; k < MAX_CHECKED; k++) at[k] = (int64_t)(rnd() % (uint64_t)n);
  return MAX_CHECKED;
}

/* |a - b| / max(|b|, 1e-3) over the sampled elements, in 2-norm. */
static double rel_error(const double *a, const double *b, int n) {
  double diff = 0, norm = 0;
  for (int k = 0; k < n; k++) {
    diff += (a[k] - b[k]) * (a[k] - b[k]);
    norm += b[k] * b[k];
  }
  return sqrt(diff) / fmax(sqrt(norm), 1e-3);
}

/* f64: ein_grad_execute against central differences. */
static void check_f64(gcase *c, int wrt, const tensor *grad) {
  int64_t n = numel_of(c->g.ndims[wrt], c->g.shapes[wrt]), at[MAX_CHECKED];
  int m = sample(n, at);
  double *scratch = calloc((size_t)c->out_numel + 1, sizeof(double));
  double got[MAX_CHECKED], fd[MAX_CHECKED];
  bool extremum = c->g.opt.reduction == EIN_REDUCE_MAX ||
                  c->g.opt.reduction == EIN_REDUCE_MIN;
  double h = extremum ? 1e-6 : 1e-3;
  for (int k = 0; k < m; k++) {
    double x = get(&c->in[wrt], at[k]);
    set(&c->in[wrt], at[k], x + h);
    double up = loss(c, scratch);
    set(&c->in[wrt], at[k], x - h);
    double down = loss(c, scratch);
    set(&c->in[wrt], at[k], x);
    fd[k] = (up - down) / (2 * h);
    got[k] = get(grad, at[k]);
  }
  free(scratch);
  double err = rel_error(got, fd, m);
  int worst = 0;
  for (int k = 1; k < m; k++)
    if (fabs(got[k] - fd[k]) > fabs(got[worst] - fd[worst])) worst = k;
  CHECK(err <= 1e-6, "seed %llu %s wrt %d: f64 gradient vs finite "
        "differences: relative error %.3g (element %lld: got %.17g, fd %.17g)",
        (unsigned long long)c->seed, c->g.desc, wrt, err,
        m ? (long long)at[worst] : -1LL, m ? got[worst] : 0,
        m ? fd[worst] : 0);
}

/* Forward mode: input wrt's part of the output's tangent along tan, by
 * ein_jvp_create and ein_grad_execute in f64 (the result column-major at
 * random), into *jvp (the caller's). */
static ein_status run_jvp(gcase *c, int wrt, const tensor *tan,
                          tensor *jvp) {
  const DLTensor *ptrs[TEST_MAX_OPERANDS];
  tensor out;
  tensor_make(&out, EIN_DT_F64, c->w.t.ndim, c->w.shape, false);
  tensor_make(jvp, EIN_DT_F64, c->w.t.ndim, c->w.shape, rnd_int(2));
  input_ptrs(c->in, c->g.n, ptrs);
  ein_grad *g = NULL;
  ein_status st = ein_eval(ctx, c->g.expr, ptrs, c->g.n, &out.t, &c->g.opt);
  if (!st)
    st = grad_run_on(ctx, true, c->g.expr, &c->g.opt, ptrs, c->g.n, wrt,
                     &out.t, &tan->t, &jvp->t, &g);
  CHECK(st || ein_grad_is_jvp(g), "ein_grad_is_jvp");
  ein_grad_destroy(g);
  tensor_free(&out);
  return st;
}

/* Central differences of the output along tan: (f(x + h T) - f(x - h T))
 * / 2h by the reference, into fd (out_numel values). */
static void output_differences(gcase *c, int wrt, const tensor *tan,
                               double h, double *fd) {
  int64_t n = numel_of(c->g.ndims[wrt], c->g.shapes[wrt]);
  double *x = calloc((size_t)n + 1, sizeof *x);
  double *down = calloc((size_t)c->out_numel + 1, sizeof *down);
  const DLTensor *ptrs[TEST_MAX_OPERANDS];
  input_ptrs(c->in, c->g.n, ptrs);
  for (int64_t e = 0; e < n; e++) x[e] = get(&c->in[wrt], e);
  for (int side = 1; side >= -1; side -= 2) {
    for (int64_t e = 0; e < n; e++)
      set(&c->in[wrt], e, x[e] + side * h * get(tan, e));
    ref_eval(c->p, ptrs, side > 0 ? fd : down, c->out_numel);
  }
  for (int64_t e = 0; e < n; e++) set(&c->in[wrt], e, x[e]);
  for (int64_t o = 0; o < c->out_numel; o++)
    fd[o] = (fd[o] - down[o]) / (2 * h);
  free(x);
  free(down);
}

/* f64 forward mode against differences along a random tangent, and
 * against the gradient by duality: <W, J T> = <J^T W, T>. */
static void check_jvp(gcase *c, int wrt, const tensor *grad) {
  tensor tan, jvp;
  int64_t n = numel_of(c->g.ndims[wrt], c->g.shapes[wrt]);
  tensor_make(&tan, EIN_DT_F64, c->g.ndims[wrt], c->g.shapes[wrt],
              rnd_int(2));
  for (int64_t e = 0; e < n; e++) set(&tan, e, 2 * rnd_unit() - 1);
  ein_status st = run_jvp(c, wrt, &tan, &jvp);
  CHECK(st == EIN_OK, "seed %llu %s jvp of input %d: %s: %s",
        (unsigned long long)c->seed, c->g.desc, wrt, ein_status_name(st),
        ein_last_error(ctx)->message);
  double lhs = 0, rhs = 0, scale = 0;
  for (int64_t o = 0; !st && o < c->out_numel; o++) {
    lhs += get(&c->w, o) * get(&jvp, o);
    scale += fabs(get(&c->w, o) * get(&jvp, o));
  }
  for (int64_t e = 0; !st && e < n; e++) {
    rhs += get(grad, e) * get(&tan, e);
    scale += fabs(get(grad, e) * get(&tan, e));
  }
  CHECK(st || fabs(lhs - rhs) <= 1e-9 * fmax(scale, 1e-3),
        "seed %llu %s jvp of input %d: <W, jvp> %.17g but <grad, T> %.17g",
        (unsigned long long)c->seed, c->g.desc, wrt, lhs, rhs);
  if (!st && !tie_values) {
    bool extremum = c->g.opt.reduction == EIN_REDUCE_MAX ||
                    c->g.opt.reduction == EIN_REDUCE_MIN;
    double *fd = calloc((size_t)c->out_numel + 1, sizeof *fd);
    double *got = calloc((size_t)c->out_numel + 1, sizeof *got);
    output_differences(c, wrt, &tan, extremum ? 1e-6 : 1e-5, fd);
    double diff = 0, norm = 0;
    for (int64_t o = 0; o < c->out_numel; o++) {
      got[o] = get(&jvp, o);
      diff += (got[o] - fd[o]) * (got[o] - fd[o]);
      norm += fd[o] * fd[o];
    }
    double err = sqrt(diff) / fmax(sqrt(norm), 1e-3);
    CHECK(err <= 1e-6, "seed %llu %s jvp of input %d vs differences along "
          "T: relative error %.3g", (unsigned long long)c->seed, c->g.desc,
          wrt, err);
    free(fd);
    free(got);
  }
  tensor_free(&tan);
  tensor_free(&jvp);
}

/* A copy of c whose inputs and weights are c's rounded to dt (and made
 * nonnegative when `magnitude`), held in f64. */
static void rounded_case(const gcase *c, ein_dtype dt, bool magnitude,
                         gcase *r) {
  *r = *c;
  for (int i = -1; i < c->g.n; i++) {
    const tensor *from = i < 0 ? &c->w : &c->in[i];
    tensor *to = i < 0 ? &r->w : &r->in[i], tmp;
    tensor_make(to, EIN_DT_F64, from->t.ndim, from->shape, false);
    tensor_make(&tmp, dt, from->t.ndim, from->shape, false);
    int64_t n = numel_of(from->t.ndim, from->shape);
    for (int64_t e = 0; e < n; e++) {
      set(&tmp, e, get(from, e));
      set(to, e, magnitude ? fabs(get(&tmp, e)) : get(&tmp, e));
    }
    tensor_free(&tmp);
  }
}

static void rounded_free(gcase *r) {
  tensor_free(&r->w);
  for (int i = 0; i < r->g.n; i++) tensor_free(&r->in[i]);
}

static double norm_of(const tensor *x) {
  double s = 0;
  int64_t n = numel_of(x->t.ndim, x->shape);
  for (int64_t e = 0; e < n; e++) s += get(x, e) * get(x, e);
  return sqrt(s);
}

/* f32, f16, bf16: against the f64 gradient of the same rounded inputs,
 * relative to the gradient's norm; for sum and mean, whose gradients are
 * sums that may cancel, relative to the norm of the same gradient of the
 * magnitudes (what rounding errors in a sum scale with). */
static void check_low(gcase *c, int wrt, ein_dtype dt, double tol) {
  gcase r, m;
  rounded_case(c, dt, false, &r);
  tensor want, got, scale = {0};
  ein_status s1 = run_grad(&r, wrt, EIN_DT_F64, &want);
  ein_status s2 = run_grad(&r, wrt, dt, &got);
  double norm = s1 ? 0 : norm_of(&want);
  if (c->g.opt.reduction <= EIN_REDUCE_MEAN) {
    rounded_case(c, dt, true, &m);
    if (run_grad(&m, wrt, EIN_DT_F64, &scale) == EIN_OK)
      norm = fmax(norm, norm_of(&scale));
    tensor_free(&scale);
    rounded_free(&m);
  }
  int64_t n = numel_of(c->g.ndims[wrt], c->g.shapes[wrt]);
  double diff = 0;
  for (int64_t e = 0; !s1 && !s2 && e < n; e++) {
    double a = get(&got, e), b = get(&want, e);
    diff += (a - b) * (a - b);
  }
  double err = sqrt(diff) / fmax(norm, 1e-3);
  CHECK(!s1 && !s2 && err <= tol, "seed %llu %s wrt %d: %s gradient vs "
        "f64: relative error %.3g (statuses %d %d)",
        (unsigned long long)c->seed, c->g.desc, wrt, ein_dtype_name(dt), err,
        s1, s2);
  tensor_free(&want);
  tensor_free(&got);
  rounded_free(&r);
}

/* max and min with ties: torch.amax's rule computed directly. For each
 * combination of axis indices, the element read ties with its output
 * element or not; an output element's gradient W[o] is split evenly over
 * the combinations that tie (copies that a broadcast makes count, and
 * their shares add up again). */
static void check_ties(gcase *c, const tensor *grad) {
  const ein_problem *p = c->p;
  double *out = calloc((size_t)c->out_numel + 1, sizeof *out);
  double *cnt = calloc((size_t)c->out_numel + 1, sizeof *cnt);
  int64_t n = numel_of(c->g.ndims[0], c->g.shapes[0]);
  double *want = calloc((size_t)n + 1, sizeof *want);
  const DLTensor *ptrs[1] = {&c->in[0].t};
  ref_eval(p, ptrs, out, c->out_numel);
  ref_layout l;
  ref_layout_of(p, ptrs, &l);
  for (int pass = 0; pass < 2; pass++) {
    int64_t idx[TEST_MAX_AXES] = {0};
    do {
      int64_t e = ref_offset(&p->inputs[0], p->axes, idx, l.in[0]);
      int64_t o = ref_offset(&p->output, p->axes, idx, l.out);
      double x = ref_load(EIN_DT_F64, c->in[0].data, e);
      if (x != out[o]) continue;
      if (pass == 0) cnt[o] += 1;
      else want[e] += get(&c->w, o) / cnt[o];
    } while (ref_next(p, idx));
  }
  int bad = 0;
  for (int64_t e = 0; e < n; e++)
    bad += fabs(get(grad, e) - want[offset_of(&c->in[0], e)]) > 1e-12;
  CHECK(bad == 0, "seed %llu %s: %d of %lld gradient values differ from "
        "the even split of ties", (unsigned long long)c->seed, c->g.desc,
        bad, (long long)n);
  free(out);
  free(cnt);
  free(want);
}

static void run_case(uint64_t seed) {
  gcase c;
  tie_values = false;
  gen_seed(seed);
  { /* the reduction decides the values: peek at it */
    gen_case g;
    generate(&g);
    tie_values = seed % 2 == 0 && g.n == 1 &&
                 (g.opt.reduction == EIN_REDUCE_MAX ||
                  g.opt.reduction == EIN_REDUCE_MIN ||
                  g.opt.reduction == EIN_REDUCE_ANY ||
                  g.opt.reduction == EIN_REDUCE_ALL);
  }
  if (!case_setup(&c, seed)) return;
  ties_run += tie_values;
  cases_run++;
  counted[c.g.opt.reduction]++;
  for (int wrt = 0; wrt < c.g.n; wrt++) {
    tensor grad;
    ein_status st = run_grad(&c, wrt, EIN_DT_F64, &grad);
    if (st == EIN_ERR_BAD_REDUCTION &&
        c.g.opt.reduction == EIN_REDUCE_PROD) { /* prod over a broadcast */
      checks_skipped++;
      tensor_free(&grad);
      continue;
    }
    CHECK(st == EIN_OK, "seed %llu %s wrt %d: %s: %s",
          (unsigned long long)seed, c.g.desc, wrt, ein_status_name(st),
          ein_last_error(ctx)->message);
    if (st == EIN_OK) {
      if (tie_values) check_ties(&c, &grad);
      else check_f64(&c, wrt, &grad);
      check_jvp(&c, wrt, &grad);
      check_low(&c, wrt, EIN_DT_F32, 1e-5);
      if (seed % 4 == 0)
        check_low(&c, wrt, seed % 8 ? EIN_DT_F16 : EIN_DT_BF16, 2e-2);
    }
    tensor_free(&grad);
  }
  case_free(&c);
}

/* ------------------------------------------------------------- complex */

typedef struct ccase {
  gen_case g;
  uint64_t seed;
  ein_binding *binding;
  const ein_problem *p;
  tensor in[TEST_MAX_OPERANDS], w, out, dx;
  int64_t out_numel;
  int wrt;
} ccase;

/* A generated expression in c128 (sum, mean or prod), its inputs, W and
 * an input to differentiate; false when it does not bind or is large. */
static bool complex_setup(uint64_t seed, ccase *c) {
  memset(c, 0, sizeof *c);
  c->seed = seed;
  gen_seed(seed);
  generate(&c->g);
  ein_reduction *r = &c->g.opt.reduction;
  if (*r > EIN_REDUCE_MEAN && *r != EIN_REDUCE_PROD) *r = EIN_REDUCE_SUM;
  const int64_t *shapes[TEST_MAX_OPERANDS];
  for (int i = 0; i < c->g.n; i++) shapes[i] = c->g.shapes[i];
  if (ein_bind_shapes(ctx, c->g.expr, shapes, c->g.ndims, c->g.n, &c->g.opt,
                      &c->binding) != EIN_OK)
    return false;
  c->p = ein_binding_problem(c->binding);
  int ond = ein_binding_output_ndim(c->binding);
  const int64_t *oshape = ein_binding_output_shape(c->binding);
  c->out_numel = numel_of(ond, oshape);
  bool empty;
  if (ref_count(c->p, &empty) * (double)c->out_numel > 20000) {
    ein_binding_destroy(c->binding);
    return false;
  }
  for (int i = 0; i < c->g.n; i++) {
    tensor_make(&c->in[i], EIN_DT_C128, c->g.ndims[i], c->g.shapes[i],
                rnd_int(2));
    double complex *d = c->in[i].data;
    for (int64_t e = 0; e < numel_of(c->g.ndims[i], c->g.shapes[i]); e++)
      d[offset_of(&c->in[i], e)] = CMPLX(draw(*r), draw(EIN_REDUCE_SUM));
  }
  tensor_make(&c->w, EIN_DT_C128, ond, oshape, false);
  tensor_make(&c->out, EIN_DT_C128, ond, oshape, false);
  double complex *wd = c->w.data;
  for (int64_t e = 0; e < c->out_numel; e++)
    wd[e] = CMPLX(2 * rnd_unit() - 1, 2 * rnd_unit() - 1);
  c->wrt = rnd_int(c->g.n);
  tensor_make(&c->dx, EIN_DT_C128, c->g.ndims[c->wrt],
              c->g.shapes[c->wrt], rnd_int(2));
  return true;
}

static void complex_free(ccase *c) {
  for (int i = 0; i < c->g.n; i++) tensor_free(&c->in[i]);
  tensor_free(&c->w);
  tensor_free(&c->out);
  tensor_free(&c->dx);
  ein_binding_destroy(c->binding);
}

/* Re(sum(conj(W) * out)) by the reference. */
static double complex_loss(ccase *c, const DLTensor *const *ptrs,
                           double complex *ref) {
  ref_eval_complex(c->p, ptrs, ref, c->out_numel);
  const double complex *wd = c->w.data;
  double l = 0;
  for (int64_t o = 0; o < c->out_numel; o++) l += creal(conj(wd[o]) * ref[o]);
  return l;
}

/* Central differences in the real and the imaginary part of sampled
 * elements against the gradient's parts. */
static void complex_compare(ccase *c, const DLTensor *const *ptrs) {
  int64_t n = numel_of(c->g.ndims[c->wrt], c->g.shapes[c->wrt]);
  int64_t at[MAX_CHECKED];
  int m = sample(n, at);
  double got[2 * MAX_CHECKED], fd[2 * MAX_CHECKED];
  double complex *x = c->in[c->wrt].data, *gd = c->dx.data;
  double complex *ref = calloc((size_t)c->out_numel + 1, sizeof *ref);
  for (int k = 0; k < m; k++) {
    int64_t off = offset_of(&c->in[c->wrt], at[k]);
    double complex x0 = x[off], gv = gd[offset_of(&c->dx, at[k])];
    for (int part = 0; part < 2; part++) {
      double h = 1e-3, l[2];
      for (int s = 0; s < 2; s++) {
        double step = s ? -h : h;
        x[off] = x0 + (part ? CMPLX(0, step) : step);
        l[s] = complex_loss(c, ptrs, ref);
      }
      x[off] = x0;
      fd[2 * k + part] = (l[0] - l[1]) / (2 * h);
    }
    got[2 * k] = creal(gv);
    got[2 * k + 1] = cimag(gv);
  }
  free(ref);
  double err = rel_error(got, fd, 2 * m);
  CHECK(err <= 1e-6, "seed %llu %s c128 wrt %d: relative error %.3g",
        (unsigned long long)c->seed, c->g.desc, c->wrt, err);
}

/* c128: against finite differences of Re(sum(conj(W) * out)) in both
 * parts (exact for these affine functions up to rounding, h = 1e-3). */
static void check_complex(uint64_t seed) {
  ccase c;
  if (!complex_setup(seed, &c)) return;
  const DLTensor *ptrs[TEST_MAX_OPERANDS];
  for (int i = 0; i < c.g.n; i++) ptrs[i] = &c.in[i].t;
  ein_grad *gr = NULL;
  ein_status st = ein_eval(ctx, c.g.expr, ptrs, c.g.n, &c.out.t, &c.g.opt);
  if (!st)
    st = grad_run_on(ctx, false, c.g.expr, &c.g.opt, ptrs, c.g.n, c.wrt,
                     &c.out.t, &c.w.t, &c.dx.t, &gr);
  if (!st) CHECK(ein_grad_conjugates(gr), "c128 conjugates");
  bool prod_broadcast =
      st == EIN_ERR_BAD_REDUCTION && c.g.opt.reduction == EIN_REDUCE_PROD;
  CHECK(st == EIN_OK || prod_broadcast, "seed %llu %s c128 wrt %d: %s",
        (unsigned long long)seed, c.g.desc, c.wrt,
        ein_last_error(ctx)->message);
  if (st == EIN_OK) complex_compare(&c, ptrs);
  complex_runs += st == EIN_OK;
  ein_grad_destroy(gr);
  complex_free(&c);
}

/* ---------------------------------------------------------- hand cases */

/* The gradient of one f64 expression of one input, given values, dout and
 * (optionally) the output: ein_eval's. */
static ein_status grad_of(const char *expr, ein_reduction r, int ndim,
                          const int64_t *shape, const double *x, int ondim,
                          const int64_t *oshape, const double *dout,
                          double *dx) {
  DLDataType f64 = {kDLFloat, 64, 1};
  DLTensor in = {(void *)x, {kDLCPU, 0}, ndim, f64, (int64_t *)shape, NULL, 0};
  double out_data[64];
  DLTensor out = {out_data, {kDLCPU, 0}, ondim, f64, (int64_t *)oshape, NULL,
                  0};
  DLTensor dt = {(void *)dout, {kDLCPU, 0}, ondim, f64, (int64_t *)oshape,
                 NULL, 0};
  DLTensor dd = {dx, {kDLCPU, 0}, ndim, f64, (int64_t *)shape, NULL, 0};
  const DLTensor *ins[1] = {&in};
  ein_options o = {.reduction = r};
  ein_grad *g = NULL;
  ein_status st = ein_eval(ctx, expr, ins, 1, &out, &o);
  if (!st) st = grad_run_on(ctx, false, expr, &o, ins, 1, 0, &out, &dt, &dd,
                           &g);
  ein_grad_destroy(g);
  return st;
}

/* The tangent of one f64 expression of one input along t: ein_jvp's. */
static ein_status jvp_of(const char *expr, ein_reduction r, int ndim,
                         const int64_t *shape, const double *x,
                         const double *t, int ondim, const int64_t *oshape,
                         double *dy) {
  DLDataType f64 = {kDLFloat, 64, 1};
  DLTensor in = {(void *)x, {kDLCPU, 0}, ndim, f64, (int64_t *)shape, NULL, 0};
  DLTensor tan = {(void *)t, {kDLCPU, 0}, ndim, f64, (int64_t *)shape, NULL,
                  0};
  double out_data[64];
  DLTensor out = {out_data, {kDLCPU, 0}, ondim, f64, (int64_t *)oshape, NULL,
                  0};
  DLTensor res = {dy, {kDLCPU, 0}, ondim, f64, (int64_t *)oshape, NULL, 0};
  const DLTensor *ins[1] = {&in};
  ein_options o = {.reduction = r};
  ein_grad *g = NULL;
  ein_status st = ein_eval(ctx, expr, ins, 1, &out, &o);
  if (!st) st = grad_run_on(ctx, true, expr, &o, ins, 1, 0, &out, &tan, &res,
                           &g);
  ein_grad_destroy(g);
  return st;
}

static void check_values(const char *what, const double *got,
                         const double *want, int n) {
  int bad = 0;
  for (int i = 0; i < n; i++) bad += fabs(got[i] - want[i]) > 1e-12;
  CHECK(bad == 0, "%s: %d of %d values differ (first: got %g want %g)", what,
        bad, n, got[0], want[0]);
}

static void hand_cases(void) {
  int64_t s23[2] = {2, 3}, s2[1] = {2}, s33[2] = {3, 3}, s3[1] = {3};
  /* max: ties share evenly (torch.amax), the lone maximum takes all. */
  double x[6] = {1, 3, 3, 2, 2, 2}, dout[2] = {1, 3}, dx[9];
  double want_max[6] = {0, 0.5, 0.5, 1, 1, 1};
  CHECK(!grad_of("a b -> a", EIN_REDUCE_MAX, 2, s23, x, 1, s2, dout, dx),
        "max ties");
  check_values("max ties", dx, want_max, 6);
  double y[6] = {-1, 4, -1, 0, 7, -2}, want_min[6] = {0.5, 0, 0.5, 0, 0, 3};
  CHECK(!grad_of("a b -> a", EIN_REDUCE_MIN, 2, s23, y, 1, s2, dout, dx),
        "min");
  check_values("min ties", dx, want_min, 6);
  /* prod: no zero, one zero, two zeros. */
  double z[9] = {2, 3, 4, 0, 5, 6, 0, 0, 7}, ones[3] = {1, 1, 1};
  double want_prod[9] = {12, 8, 6, 30, 0, 0, 0, 0, 0};
  CHECK(!grad_of("a b -> a", EIN_REDUCE_PROD, 2, s33, z, 1, s3, ones, dx),
        "prod");
  check_values("prod with zeros", dx, want_prod, 9);
  /* A diagonal: the gradient lands on it, zeros elsewhere. */
  double d[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, g3[3] = {10, 20, 30};
  double want_diag[9] = {10, 0, 0, 0, 20, 0, 0, 0, 30};
  CHECK(!grad_of("i i -> i", EIN_REDUCE_SUM, 2, s33, d, 1, s3, g3, dx),
        "diagonal");
  check_values("diagonal scatter", dx, want_diag, 9);
  /* mean over 3: a third each. */
  double third = 1.0 / 3, want_mean[6] = {third, third, third, 1, 1, 1};
  CHECK(!grad_of("a b -> a", EIN_REDUCE_MEAN, 2, s23, x, 1, s2, dout, dx),
        "mean");
  check_values("mean scaled", dx, want_mean, 6);
  /* Forward mode: ties average the tangent, prod's zeros are exact, a
   * diagonal reads the tangent's diagonal. */
  double t[9] = {10, 20, 40, 1, 2, 6, 0, 0, 0}, dy[3];
  double want_jmax[2] = {30, 3};
  CHECK(!jvp_of("a b -> a", EIN_REDUCE_MAX, 2, s23, x, t, 1, s2, dy),
        "jvp max");
  check_values("jvp max ties", dy, want_jmax, 2);
  double t1[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1}, want_jprod[3] = {26, 30, 0};
  CHECK(!jvp_of("a b -> a", EIN_REDUCE_PROD, 2, s33, z, t1, 1, s3, dy),
        "jvp prod");
  check_values("jvp prod with zeros", dy, want_jprod, 3);
  double want_jdiag[3] = {1, 5, 9};
  CHECK(!jvp_of("i i -> i", EIN_REDUCE_SUM, 2, s33, d, d, 1, s3, dy),
        "jvp diagonal");
  check_values("jvp diagonal", dy, want_jdiag, 3);
}

/* ---------------------------------------------------------------- errors */

static ein_status create_with(const char *expr, DLDataType dt, int64_t *shape,
                              ein_reduction r, int wrt, ein_grad **g) {
  DLTensor t = {NULL, {kDLCPU, 0}, 2, dt, shape, NULL, 0};
  const DLTensor *ins[1] = {&t};
  ein_options o = {.reduction = r};
  *g = NULL;
  return ein_grad_create(ctx, expr, ins, 1, &o, wrt, g);
}

static void check_status(ein_status got, ein_status want, const char *what) {
  const char *msg = ein_last_error(ctx)->message;
  CHECK(got == want && msg && *msg, "%s: got %s (%s), want %s", what,
        ein_status_name(got), msg ? msg : "", ein_status_name(want));
}

static void create_errors(void) {
  int64_t shape[2] = {2, 3};
  DLDataType f64 = {kDLFloat, 64, 1}, i32 = {kDLInt, 32, 1},
             c64 = {kDLComplex, 64, 1};
  ein_grad *g;
  check_status(create_with("a b -> a", i32, shape, EIN_REDUCE_SUM, 0, &g),
               EIN_ERR_DTYPE, "int32");
  check_status(create_with("a b -> a", c64, shape, EIN_REDUCE_MAX, 0, &g),
               EIN_ERR_DTYPE, "complex max");
  check_status(create_with("a b -> a", f64, shape, EIN_REDUCE_ANY, 0, &g),
               EIN_ERR_BAD_REDUCTION, "any");
  check_status(create_with("a b -> a", f64, shape, EIN_REDUCE_ALL, 0, &g),
               EIN_ERR_BAD_REDUCTION, "all");
  check_status(create_with("a b -> a", f64, shape, EIN_REDUCE_SUM, 1, &g),
               EIN_ERR_INVALID_ARGUMENT, "wrt 1 of 1 input");
  check_status(create_with("a b -> a", f64, shape, EIN_REDUCE_SUM, -1, &g),
               EIN_ERR_INVALID_ARGUMENT, "wrt -1");
  CHECK(create_with("a c -> a", f64, shape, EIN_REDUCE_SUM, 0, &g) == EIN_OK,
        "a plain reduction: %s", ein_last_error(ctx)->message);
  ein_grad_destroy(g);
  { /* a prod whose input broadcasts a dim: its copies would multiply */
    int64_t s21[2] = {2, 1};
    DLTensor t = {NULL, {kDLCPU, 0}, 2, f64, s21, NULL, 0};
    const DLTensor *ins[1] = {&t};
    ein_length j5 = {"j", 5};
    ein_options o = {.dialect = EIN_DIALECT_NUMPY,
                     .reduction = EIN_REDUCE_PROD, .lengths = &j5,
                     .nlengths = 1};
    check_status(ein_grad_create(ctx, "ij->i", ins, 1, &o, 0, &g),
                 EIN_ERR_BAD_REDUCTION, "prod over a broadcast dim");
    o.reduction = EIN_REDUCE_SUM; /* a sum is summed into the 1 */
    CHECK(ein_grad_create(ctx, "ij->i", ins, 1, &o, 0, &g) == EIN_OK &&
              strcmp(ein_grad_step_at(g, 0)->expr, "i -> i 1") == 0,
          "sum over a broadcast dim");
    ein_grad_destroy(g);
  }
  check_status(create_with("a (b", f64, shape, EIN_REDUCE_SUM, 0, &g),
               EIN_ERR_SYNTAX, "syntax");
  CHECK(ein_grad_create(NULL, "a -> a", NULL, 0, NULL, 0, &g) ==
            EIN_ERR_INVALID_ARGUMENT,
        "NULL context");
}

static void execute_errors(void) {
  int64_t shape[2] = {2, 3}, oshape[1] = {2}, bad[1] = {3};
  DLDataType f64 = {kDLFloat, 64, 1}, f32 = {kDLFloat, 32, 1};
  double x[6] = {0}, o[2] = {0}, dx[6] = {7, 7, 7, 7, 7, 7};
  float o32[2];
  DLTensor in = {x, {kDLCPU, 0}, 2, f64, shape, NULL, 0};
  DLTensor out = {o, {kDLCPU, 0}, 1, f64, oshape, NULL, 0};
  DLTensor dout = out, d = {dx, {kDLCPU, 0}, 2, f64, shape, NULL, 0};
  const DLTensor *ins[1] = {&in};
  ein_grad *g;
  REQUIRE_OK(create_with("a b -> a", f64, shape, EIN_REDUCE_MAX, 0, &g));
  CHECK(ein_grad_needs_output(g), "max reads the output");
  check_status(ein_grad_execute(ctx, g, ins, 1, NULL, &dout, &d),
               EIN_ERR_INVALID_ARGUMENT, "max without the output");
  DLTensor wrong = dout;
  wrong.shape = bad;
  check_status(ein_grad_execute(ctx, g, ins, 1, &out, &wrong, &d),
               EIN_ERR_BAD_SHAPE, "dout of another shape");
  wrong = dout;
  wrong.dtype = f32;
  wrong.data = o32;
  check_status(ein_grad_execute(ctx, g, ins, 1, &out, &wrong, &d),
               EIN_ERR_DTYPE, "dout of another dtype");
  wrong = d;
  wrong.device = (DLDevice){kDLCUDA, 0};
  check_status(ein_grad_execute(ctx, g, ins, 1, &out, &dout, &wrong),
               EIN_ERR_DEVICE, "dinput on a GPU");
  wrong = d;
  wrong.strides = (int64_t[]){1, 0}; /* every row on one address each */
  check_status(ein_grad_execute(ctx, g, ins, 1, &out, &dout, &wrong),
               EIN_ERR_BAD_SHAPE, "dinput with a stride of 0");
  wrong = d;
  wrong.data = x; /* dinput is input 0 */
  check_status(ein_grad_execute(ctx, g, ins, 1, &out, &dout, &wrong),
               EIN_ERR_INVALID_ARGUMENT, "dinput on input 0");
  CHECK(strstr(ein_last_error(ctx)->message, "input 0"), "names input 0: %s",
        ein_last_error(ctx)->message);
  check_status(ein_grad_execute(ctx, g, ins, 2, &out, &dout, &d),
               EIN_ERR_OPERAND_COUNT, "two inputs");
  check_status(ein_grad_execute(ctx, NULL, ins, 1, &out, &dout, &d),
               EIN_ERR_INVALID_ARGUMENT, "NULL gradient");
  int untouched = 0;
  for (int i = 0; i < 6; i++) untouched += dx[i] == 7;
  CHECK(untouched == 6, "refused calls wrote %d of dinput's 6 values",
        6 - untouched);
  CHECK(ein_grad_execute(ctx, g, ins, 1, &out, &dout, &d) == EIN_OK,
        "a good call after the bad ones");
  char text[4096], json[8192];
  size_t n = ein_grad_describe(g, EIN_DESCRIBE_TEXT, text, sizeof text);
  size_t m = ein_grad_describe(g, EIN_DESCRIBE_JSON, json, sizeof json);
  CHECK(n > 0 && n < sizeof text && strstr(text, "a -> a b") &&
            strstr(text, "equal"),
        "text report: %s", text);
  CHECK(m > 0 && m < sizeof json && json[0] == '{' && json[m - 1] == '}' &&
            strstr(json, "\"op\":\"div\""),
        "JSON report: %s", json);
  ein_grad_destroy(g);
}

int main(void) {
  REQUIRE_OK(ein_ctx_create(&ctx));
  grad_backend_from_env();
  const char *env = getenv("EIN_SEED");
  uint64_t base = env ? strtoull(env, NULL, 10) : 1;
  env = getenv("EIN_CASES");
  int ncases = env ? atoi(env) : 800;
  for (int k = 0; k < ncases; k++) run_case(base + (uint64_t)k);
  for (int k = 0; k < ncases / 3; k++) check_complex(base + 100000 + (uint64_t)k);
  hand_cases();
  create_errors();
  execute_errors();
  if (grad_backend != EIN_BACKEND_CPU) device_errors(ctx);
  printf("%s: gradients of %d random cases (sum %d, mean %d, max %d, min %d, "
         "prod %d; %d of max/min with ties), %d prod-over-broadcast inputs "
         "skipped, %d c128 gradients\n",
         grad_backend_name(), cases_run, counted[EIN_REDUCE_SUM], counted[EIN_REDUCE_MEAN],
         counted[EIN_REDUCE_MAX], counted[EIN_REDUCE_MIN],
         counted[EIN_REDUCE_PROD], ties_run, checks_skipped, complex_runs);
  (void)planted_note;
  ein_ctx_destroy(ctx);
  return test_summary("grad");
}
