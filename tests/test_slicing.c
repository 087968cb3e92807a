/*
 * test_slicing.c - sliced plans (ein_options.slice_axes) and the limits a
 * tensor network meets.
 *
 *   random networks   sliced and unsliced results equal, and both equal
 *                     the direct-sum reference (reference.h), f64 1e-12
 *                     and f32 1e-5 relative to the reference's norm, on
 *                     the CPU and the emulated device; slices over output
 *                     axes, summed axes, both, repeats, diagonals, mean;
 *   errors            an unknown or repeated name, a max over a sliced
 *                     summed axis;
 *   accessors         slices, sliced axes, FLOP totals, slice bytes;
 *   scale             a 100-operand matrix chain evaluated (past the old
 *                     64-operand limit), a 10,000-operand chain planned
 *                     with a given path, a 100,000-axis expression bound.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "reference.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static uint64_t rng(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

static int pick(int n) { return (int)(rng() % (uint64_t)n); }

/* A random network: n operands over axes a.. (sizes 1-4), each operand 1-3
 * axes (a diagonal now and then), the output a random subset of the axes
 * used (a repeat axis r=3 now and then). */
typedef struct net {
  char expr[256];
  int n;
  int ndims[6];
  int64_t shapes[6][4];
  char axes[6][4];
  char out[8];
  int nout;
  int64_t size[26];
  bool repeat;
  char slice[16];
} net;

static void random_net(net *c) {
  memset(c, 0, sizeof *c);
  int naxes = 2 + pick(5);
  for (int a = 0; a < naxes; a++) c->size[a] = 1 + pick(4);
  c->n = 2 + pick(4);
  bool used[26] = {false};
  size_t len = 0;
  for (int i = 0; i < c->n; i++) {
    c->ndims[i] = 1 + pick(3);
    for (int d = 0; d < c->ndims[i]; d++) {
      int a = pick(naxes);
      if (d > 0 && pick(8) == 0) a = c->axes[i][d - 1] - 'a'; /* diagonal */
      c->axes[i][d] = (char)('a' + a);
      c->shapes[i][d] = c->size[a];
      used[a] = true;
      len += (size_t)snprintf(c->expr + len, sizeof c->expr - len, "%s%c",
                              d ? " " : (i ? ", " : ""), 'a' + a);
    }
  }
  len += (size_t)snprintf(c->expr + len, sizeof c->expr - len, " ->");
  for (int a = 0; a < naxes; a++)
    if (used[a] && pick(2)) {
      c->out[c->nout++] = (char)('a' + a);
      len += (size_t)snprintf(c->expr + len, sizeof c->expr - len, " %c",
                              'a' + a);
    }
  c->repeat = pick(6) == 0;
  if (c->repeat) snprintf(c->expr + len, sizeof c->expr - len, " r");
  /* 1 to 3 distinct sliced axes among those used (or the repeat) */
  int ns = 1 + pick(3), have = 0;
  size_t sl = 0;
  for (int t = 0; t < 10 && have < ns; t++) {
    char name = c->repeat && pick(4) == 0 ? 'r' : (char)('a' + pick(naxes));
    if ((name != 'r' && !used[name - 'a']) || strchr(c->slice, name))
      continue;
    sl += (size_t)snprintf(c->slice + sl, sizeof c->slice - sl, "%s%c",
                           have ? "," : "", name);
    /* now and then in chunks: two slices of an even axis */
    if (name != 'r' && c->size[name - 'a'] % 2 == 0 && pick(2))
      sl += (size_t)snprintf(c->slice + sl, sizeof c->slice - sl, ":2");
    have++;
  }
}

/* Host tensors of a network, compact, filled with values in [-1, 1). */
typedef struct host {
  DLTensor t[7];
  const DLTensor *in[6];
  void *data[7];
  int64_t out_shape[8], numel_out;
} host;

static void fill(host *h, const net *c, ein_dtype dt, const ein_problem *p) {
  size_t es = ein_dtype_size(dt);
  for (int i = 0; i <= c->n; i++) {
    DLTensor *t = &h->t[i];
    memset(t, 0, sizeof *t);
    t->device = (DLDevice){kDLCPU, 0};
    t->dtype = ein_dtype_to_dl(dt);
    if (i < c->n) {
      t->ndim = c->ndims[i];
      t->shape = (int64_t *)c->shapes[i];
    } else {
      t->ndim = p->output.ndim;
      for (int d = 0; d < t->ndim; d++)
        h->out_shape[d] = p->output.dims[d].size;
      t->shape = h->out_shape;
    }
    int64_t numel = 1;
    for (int d = 0; d < t->ndim; d++) numel *= t->shape[d];
    h->data[i] = t->data = calloc((size_t)numel + 1, es);
    if (i < c->n) {
      for (int64_t e = 0; e < numel; e++)
        ref_store(dt, t->data, e, (double)(rng() % 2000) / 1000.0 - 1.0);
      h->in[i] = t;
    } else {
      h->numel_out = numel;
    }
  }
}

static void free_host(host *h, int n) {
  for (int i = 0; i <= n; i++) free(h->data[i]);
}

/* Evaluates on backend k (CPU, or EMU through device buffers) into the
 * host output h->t[n]. */
static ein_status eval_on(ein_ctx *ctx, ein_backend_kind k, const net *c,
                          host *h, const ein_options *o) {
  if (k == EIN_BACKEND_CPU)
    return ein_eval(ctx, c->expr, h->in, c->n, &h->t[c->n], o);
  DLTensor dev[7];
  const DLTensor *ptrs[6];
  void *buf[7] = {0};
  ein_status st = EIN_OK;
  for (int i = 0; i <= c->n && !st; i++) {
    int64_t numel = 1;
    for (int d = 0; d < h->t[i].ndim; d++) numel *= h->t[i].shape[d];
    size_t bytes = (size_t)numel * (h->t[i].dtype.bits / 8);
    st = ein_device_alloc(ctx, k, 0, bytes, &buf[i]);
    if (!st && i < c->n)
      st = ein_device_copy(ctx, k, 0, buf[i], h->t[i].data, bytes,
                           EIN_COPY_HOST_TO_DEVICE);
    dev[i] = h->t[i];
    dev[i].data = buf[i];
    dev[i].device = ein_backend_dl_device(k, 0);
    if (i < c->n) ptrs[i] = &dev[i];
  }
  if (!st) st = ein_eval(ctx, c->expr, ptrs, c->n, &dev[c->n], o);
  if (!st)
    st = ein_device_copy(ctx, k, 0, h->t[c->n].data, buf[c->n],
                         (size_t)h->numel_out * (h->t[c->n].dtype.bits / 8),
                         EIN_COPY_DEVICE_TO_HOST);
  for (int i = 0; i <= c->n; i++) ein_device_free(ctx, k, 0, buf[i]);
  return st;
}

/* max |got - want| / max(1e-300, ||want||_inf) */
static double rel_err(ein_dtype dt, const void *got, const double *want,
                      int64_t n) {
  double err = 0, norm = 0;
  for (int64_t e = 0; e < n; e++) {
    err = fmax(err, fabs(ref_load(dt, got, e) - want[e]));
    norm = fmax(norm, fabs(want[e]));
  }
  return err / fmax(norm, 1e-300);
}

static int auto_sliced; /* networks planned under a small memory limit */

/* One network: unsliced and sliced on backend k, both against the
 * reference. */
static void check_net(ein_ctx *ctx, ein_backend_kind k, ein_dtype dt,
                      int mean, int *compared) {
  net c;
  random_net(&c);
  ein_length rep = {"r", 3};
  ein_options o = {.lengths = &rep, .nlengths = c.repeat, .backend = k};
  if (mean && c.n > 1) c.n = 1, c.expr[strcspn(c.expr, ",")] = 0;
  if (mean) {
    /* one operand: "x y z -> ..." rebuilt from its axes */
    size_t len = 0;
    for (int d = 0; d < c.ndims[0]; d++)
      len += (size_t)snprintf(c.expr + len, sizeof c.expr - len, "%s%c",
                              d ? " " : "", c.axes[0][d]);
    len += (size_t)snprintf(c.expr + len, sizeof c.expr - len, " ->");
    c.nout = 0;
    if (c.ndims[0] > 1)
      snprintf(c.expr + len, sizeof c.expr - len, " %c", c.axes[0][0]);
    snprintf(c.slice, sizeof c.slice, "%c", c.axes[0][c.ndims[0] - 1]);
    c.repeat = false;
    o.nlengths = 0;
    o.reduction = EIN_REDUCE_MEAN;
  }
  const int64_t *shp[6];
  for (int i = 0; i < c.n; i++) shp[i] = c.shapes[i];
  ein_binding *b;
  if (ein_bind_shapes(ctx, c.expr, shp, c.ndims, c.n, &o, &b)) return;
  const ein_problem *p = ein_binding_problem(b);
  host h;
  fill(&h, &c, dt, p);
  double *want = malloc(sizeof(double) * (size_t)(h.numel_out + 1));
  ref_eval(p, h.in, want, h.numel_out);
  ein_status st = eval_on(ctx, k, &c, &h, &o);
  double e0 = st ? -1 : rel_err(dt, h.t[c.n].data, want, h.numel_out);
  memset(h.t[c.n].data, 0x7f, (size_t)h.numel_out * ein_dtype_size(dt));
  o.slice_axes = c.slice;
  ein_status st2 = eval_on(ctx, k, &c, &h, &o);
  double e1 = st2 ? -1 : rel_err(dt, h.t[c.n].data, want, h.numel_out);
  /* a small memory limit: the path search slices on its own (or, with
   * nothing small enough, refuses) */
  memset(h.t[c.n].data, 0x7f, (size_t)h.numel_out * ein_dtype_size(dt));
  ein_options o3 = o;
  o3.slice_axes = NULL;
  o3.memory_limit = 16 * (int64_t)ein_dtype_size(dt);
  ein_status st3 = eval_on(ctx, k, &c, &h, &o3);
  double e2 = st3 ? 0 : rel_err(dt, h.t[c.n].data, want, h.numel_out);
  auto_sliced += !st3;
  double tol = dt == EIN_DT_F64 ? 1e-12 : 1e-5;
  CHECK((!st3 || st3 == EIN_ERR_LIMIT) && e2 <= tol,
        "%s %s '%s' limit 16 elements: status %d, error %.3g (%s)",
        ein_backend_name(k), ein_dtype_name(dt), c.expr, st3, e2,
        st3 ? ein_last_error(ctx)->message : "");
  CHECK(!st && !st2 && e0 <= tol && e1 <= tol,
        "%s %s '%s' slice '%s'%s: status %d/%d, errors unsliced %.3g sliced "
        "%.3g (%s)",
        ein_backend_name(k), ein_dtype_name(dt), c.expr, c.slice,
        mean ? " mean" : "", st, st2, e0, e1,
        st2 ? ein_last_error(ctx)->message : "");
  (*compared)++;
  free(want);
  free_host(&h, c.n);
  ein_binding_destroy(b);
}

static void check_random(ein_ctx *ctx) {
  int compared = 0;
  ein_backend_kind kinds[2] = {EIN_BACKEND_CPU, EIN_BACKEND_EMU};
  ein_dtype dts[2] = {EIN_DT_F64, EIN_DT_F32};
  for (int kk = 0; kk < 2; kk++)
    for (int d = 0; d < 2; d++)
      for (int i = 0; i < (kk ? 30 : 80); i++)
        check_net(ctx, kinds[kk], dts[d], i % 10 == 9, &compared);
  CHECK(compared >= 200, "only %d networks compared", compared);
  CHECK(auto_sliced >= 50, "only %d networks planned under the limit",
        auto_sliced);
  printf("%d networks compared, %d under a 16-element limit\n", compared,
         auto_sliced);
}

/* A plan's slicing figures for "i j, j k, k l -> i l" sliced over j and
 * l: 3 x 5 slices, an output axis and a summed one. */
static void check_accessors(ein_ctx *ctx) {
  int64_t s1[2] = {2, 3}, s2[2] = {3, 4}, s3[2] = {4, 5};
  DLTensor t[3] = {{.ndim = 2, .shape = s1}, {.ndim = 2, .shape = s2},
                   {.ndim = 2, .shape = s3}};
  const DLTensor *in[3];
  for (int i = 0; i < 3; i++) {
    t[i].dtype = (DLDataType){kDLFloat, 64, 1};
    t[i].device = (DLDevice){kDLCPU, 0};
    in[i] = &t[i];
  }
  ein_options o = {.slice_axes = " l , j"};
  ein_plan *plan;
  REQUIRE_OK(ein_plan_create(ctx, "i j, j k, k l -> i l", in, 3, NULL, &o,
                             &plan));
  CHECK(ein_plan_nsliced(plan) == 2 && ein_plan_nslices(plan) == 15,
        "slices: %d axes, %g slices", ein_plan_nsliced(plan),
        ein_plan_nslices(plan));
  CHECK(strcmp(ein_plan_sliced_axis(plan, 0), "l") == 0 &&
            strcmp(ein_plan_sliced_axis(plan, 1), "j") == 0 &&
            ein_plan_sliced_axis(plan, 2) == NULL,
        "sliced axes: output first");
  /* unsliced: 2*3*4*2 + 2*4*5*2 = 128 or 3*4*5*2 + 2*3*5*2 = 180 */
  CHECK(ein_plan_unsliced_flops(plan) == 128,
        "unsliced FLOPs %g", ein_plan_unsliced_flops(plan));
  CHECK(ein_plan_flops(plan) >= ein_plan_unsliced_flops(plan),
        "sliced FLOPs %g below unsliced", ein_plan_flops(plan));
  /* one output slice is 2 x 1: three sums of 2 f64 */
  CHECK(ein_plan_slice_bytes(plan) ==
            ein_plan_workspace_bytes(plan) + 3 * 2 * 8,
        "slice bytes %lld", (long long)ein_plan_slice_bytes(plan));
  ein_plan_destroy(plan);
  const char *bad[3] = {"j,x", "j,j", "k,,k"};
  for (int i = 0; i < 3; i++) {
    o.slice_axes = bad[i];
    ein_status st = ein_plan_create(ctx, "i j, j k, k l -> i l", in, 3, NULL,
                                    &o, &plan);
    CHECK(st == EIN_ERR_INVALID_ARGUMENT, "slice '%s': %d", bad[i], st);
  }
  o = (ein_options){.slice_axes = "j", .reduction = EIN_REDUCE_MAX};
  ein_status st = ein_plan_create(ctx, "i j -> i", in, 1, NULL, &o, &plan);
  CHECK(st == EIN_ERR_INVALID_ARGUMENT &&
            strstr(ein_last_error(ctx)->message, "only sum and mean"),
        "max over a sliced axis: %d", st);
}

/* A chain of n 2x2 matrices "a0 a1, a1 a2, ... -> a0 an" evaluated (the
 * path search's greedy) against the product computed here. */
static void check_long_chain(ein_ctx *ctx, int n) {
  char *expr = malloc((size_t)n * 16 + 32);
  size_t len = 0;
  for (int i = 0; i < n; i++)
    len += (size_t)sprintf(expr + len, "%sa%d a%d", i ? ", " : "", i, i + 1);
  sprintf(expr + len, " -> a0 a%d", n);
  int64_t shape[2] = {2, 2};
  double *data = malloc(sizeof(double) * 4 * (size_t)n), out[4];
  DLTensor *t = calloc((size_t)n + 1, sizeof *t);
  const DLTensor **in = malloc(sizeof *in * (size_t)n);
  double prod[4] = {1, 0, 0, 1};
  for (int i = 0; i < n; i++) {
    double *m = &data[4 * i];
    for (int e = 0; e < 4; e++) m[e] = 0.5 + (double)(rng() % 1000) / 1000.0;
    double r[4] = {prod[0] * m[0] + prod[1] * m[2],
                   prod[0] * m[1] + prod[1] * m[3],
                   prod[2] * m[0] + prod[3] * m[2],
                   prod[2] * m[1] + prod[3] * m[3]};
    double scale = 1 / (r[0] + r[1] + r[2] + r[3]); /* keep it near 1 */
    for (int e = 0; e < 4; e++) m[e] *= scale, prod[e] = r[e] * scale;
    t[i] = (DLTensor){.data = m, .device = {kDLCPU, 0}, .ndim = 2,
                      .dtype = {kDLFloat, 64, 1}, .shape = shape};
    in[i] = &t[i];
  }
  t[n] = (DLTensor){.data = out, .device = {kDLCPU, 0}, .ndim = 2,
                    .dtype = {kDLFloat, 64, 1}, .shape = shape};
  ein_status st = ein_eval(ctx, expr, in, n, &t[n], NULL);
  double err = 0;
  for (int e = 0; e < 4; e++) err = fmax(err, fabs(out[e] - prod[e]));
  CHECK(!st && err <= 1e-12, "%d-matrix chain: %d, error %.3g (%s)", n, st,
        err, st ? ein_last_error(ctx)->message : "");
  free(expr);
  free(data);
  free(t);
  free(in);
}

/* A 10,000-operand chain of 2x2 matrices planned with a given path, left
 * to right: in opt_einsum's linear form (0, 1), then the next input (at 0)
 * with the result so far (last, at N-1-k): 16 FLOPs a step. */
static void check_plan_10000(ein_ctx *ctx) {
  enum { N = 10000 };
  char *expr = malloc((size_t)N * 16 + 32), *path = malloc(12 * N + 8);
  size_t len = 0, plen = 1;
  path[0] = '[';
  for (int i = 0; i < N; i++) {
    len += (size_t)sprintf(expr + len, "%sa%d a%d", i ? ", " : "", i, i + 1);
    if (i)
      plen += (size_t)sprintf(path + plen, "%s(0,%d)", i > 1 ? "," : "",
                              i == 1 ? 1 : N - i);
  }
  sprintf(expr + len, " -> a0 a%d", N);
  strcpy(path + plen, "]");
  int64_t shape[2] = {2, 2};
  DLTensor *t = calloc(N, sizeof *t);
  const DLTensor **in = malloc(sizeof *in * N);
  for (int i = 0; i < N; i++) {
    t[i] = (DLTensor){.device = {kDLCPU, 0}, .ndim = 2,
                      .dtype = {kDLFloat, 32, 1}, .shape = shape};
    in[i] = &t[i];
  }
  ein_options o = {.path = path};
  ein_plan *plan = NULL;
  ein_status st = ein_plan_create(ctx, expr, in, N, NULL, &o, &plan);
  CHECK(!st && ein_plan_flops(plan) == 16.0 * (N - 1),
        "10,000-operand chain: %d, %g FLOPs (%s)", st,
        st ? 0 : ein_plan_flops(plan), st ? ein_last_error(ctx)->message : "");
  ein_plan_destroy(plan);
  free(expr);
  free(path);
  free(t);
  free(in);
}

/* 100,000 distinct axes: 2,000 operands of 50 axes of size 1 each. */
static void check_axes_100000(ein_ctx *ctx) {
  enum { OPS = 2000, PER = 50 };
  char *expr = malloc((size_t)OPS * PER * 8 + 16);
  size_t len = 0;
  for (int op = 0; op < OPS; op++)
    for (int i = 0; i < PER; i++)
      len += (size_t)sprintf(expr + len, "%sx%d", i ? " " : (op ? ", " : ""),
                             op * PER + i);
  strcpy(expr + len, " -> x7");
  int64_t ones[PER];
  for (int i = 0; i < PER; i++) ones[i] = 1;
  const int64_t **shapes = malloc(sizeof *shapes * OPS);
  int *ndims = malloc(sizeof *ndims * OPS);
  for (int op = 0; op < OPS; op++) shapes[op] = ones, ndims[op] = PER;
  ein_binding *b = NULL;
  ein_status st = ein_bind_shapes(ctx, expr, shapes, ndims, OPS, NULL, &b);
  const ein_problem *p = st ? NULL : ein_binding_problem(b);
  CHECK(!st && p->naxes == OPS * PER && p->axes[OPS * PER - 1].size == 1,
        "100,000 axes: %d (%s)", st, st ? ein_last_error(ctx)->message : "");
  ein_binding_destroy(b);
  free(expr);
  free(shapes);
  free(ndims);
}

/* Axes a step iterates that neither source has, outside a repeat: the
 * step computes the same values again along them. */
static int replicated_axes(const ein_plan_ir *ir) {
  int bad = 0;
  for (int i = 0; i < ir->nsteps; i++) {
    const ein_step *s = &ir->steps[i];
    if (s->role == EIN_ROLE_REPEAT || s->nsrc == 0) continue;
    int n = s->kind == EIN_STEP_GEMM ? s->gemm.nbatch : s->naxes;
    const ein_loop_axis *ax = s->kind == EIN_STEP_GEMM ? s->gemm.batch
                                                       : s->axes;
    for (int k = 0; k < n; k++)
      bad += ax[k].size > 1 && ax[k].stride[1] == 0 &&
             (s->nsrc < 2 || ax[k].stride[2] == 0);
  }
  return bad;
}

/* Temporaries live at the same step that share workspace bytes (the
 * packing of pack_workspace must keep them apart). */
static int overlapping_temps(const ein_plan_ir *ir) {
  int bad = 0;
  for (int a = 0; a < ir->nbuffers; a++)
    for (int b = a + 1; b < ir->nbuffers; b++) {
      const ein_plan_buffer *x = &ir->buffers[a], *y = &ir->buffers[b];
      if (x->kind != EIN_BUF_TEMP || y->kind != EIN_BUF_TEMP) continue;
      int64_t xe = x->offset + x->elems * (int64_t)ein_dtype_size(x->dtype),
              ye = y->offset + y->elems * (int64_t)ein_dtype_size(y->dtype);
      if (x->offset >= ye || y->offset >= xe) continue;
      int fx = -1, lx = -1, fy = -1, ly = -1; /* lives in steps */
      for (int i = 0; i < ir->nsteps; i++) {
        const ein_step *st = &ir->steps[i];
        for (int k = -1; k < st->nsrc; k++) {
          int buf = k < 0 ? st->dst.buffer : st->src[k].buffer;
          if (buf == a) lx = i, fx = fx < 0 ? i : fx;
          if (buf == b) ly = i, fy = fy < 0 ? i : fy;
        }
      }
      bad += fx >= 0 && fy >= 0 && fx <= ly && fy <= lx;
    }
  return bad;
}

/* n f32 CPU tensor descriptions (no data, for planning): tensor i has
 * ndims[i] dims, its shape at shapes + i * row. */
static void f32_descs(int n, const int *ndims, const int64_t *shapes,
                      int row, DLTensor *t, const DLTensor **in) {
  for (int i = 0; i < n; i++) {
    t[i] = (DLTensor){.device = {kDLCPU, 0}, .ndim = ndims[i],
                      .dtype = {kDLFloat, 32, 1},
                      .shape = (int64_t *)shapes + (size_t)i * (size_t)row};
    in[i] = &t[i];
  }
}

/* Issue 26, bug 4: opt_einsum's rand_equation(16, 3, seed=26) on its
 * greedy path; a GEMM's M axis moved into its batch (c) made the other
 * operand's producer compute its result replicated over c (32256 FLOPs
 * where 4032 suffice). opt_einsum 3.4.0 counts 133768 FLOPs for this
 * path; einc counts the same. */
static void check_no_replicated_step(ein_ctx *ctx) {
  static const char *expr =
      "c h n o l,f r v,a i,b w h j x,c t,x,m d g e j n v,s w u g,l t,e p o,"
      "b d,f r k,k a q,q s u i,p,m -> ";
  static const int64_t shapes[16][7] = {
      {8, 7, 3, 9, 4}, {8, 3, 7}, {7, 4}, {8, 8, 7, 2, 9}, {8, 8}, {9},
      {7, 2, 5, 3, 2, 3, 7}, {6, 8, 2, 5}, {4, 8}, {3, 5, 9}, {8, 2},
      {8, 3, 6}, {6, 7, 7}, {7, 6, 2, 4}, {5}, {7}};
  static const int ndims[16] = {5, 3, 2, 5, 2, 1, 7, 4, 2, 3, 2, 3, 3, 4, 1, 1};
  DLTensor t[16];
  const DLTensor *in[16];
  f32_descs(16, ndims, shapes[0], 7, t, in);
  ein_options o = {.path = "[(6, 15), (3, 5), (7, 13), (1, 7), (9, 11), "
                           "(1, 6), (5, 9), (2, 8), (6, 7), (5, 6), (0, 5), "
                           "(2, 4), (2, 3), (0, 1), (0, 1)]"};
  ein_plan *plan;
  REQUIRE_OK(ein_plan_create(ctx, expr, in, 16, NULL, &o, &plan));
  int bad = replicated_axes(ein_plan_ir_of(plan));
  int overlaps = overlapping_temps(ein_plan_ir_of(plan));
  CHECK(overlaps == 0 && ein_plan_ir_of(plan)->nbuffers > 20,
        "rand_equation(16, 3, 26): %d live temporaries share bytes", overlaps);
  CHECK(bad == 0 && ein_plan_flops(plan) == 133768,
        "rand_equation(16, 3, 26): %d replicated axes, %g FLOPs (want 133768)",
        bad, ein_plan_flops(plan));
  ein_plan_destroy(plan);
}

/* Issue 26, bug 2: the memory limit covers layout copies. On the path
 * the search takes without a limit the intermediates keep within 3240
 * bytes but a copy of input 6 for a GEMM takes 12960: given that path, the
 * plan is refused with the size that would fit; searched, the plan is
 * sliced until every buffer fits. */
static void check_limit_covers_copies(ein_ctx *ctx) {
  static const int64_t shapes[6][5] = {{4, 7}, {7, 9, 4}, {5, 8, 6, 3},
                                       {4, 4, 2}, {2, 8, 3}, {3, 4, 6, 5, 9}};
  static const int ndims[6] = {2, 3, 4, 3, 3, 5};
  DLTensor t[6];
  const DLTensor *in[6];
  f32_descs(6, ndims, shapes[0], 5, t, in);
  const char *expr = "a f, f g h, c j d b, e h i, i j k, k e d c g -> b a";
  ein_plan *plan = NULL;
  REQUIRE_OK(ein_plan_create(ctx, expr, in, 6, NULL, NULL, &plan));
  char path[256];
  size_t len = 1;
  path[0] = '[';
  const ein_plan_ir *ir = ein_plan_ir_of(plan);
  for (int k = 0; k < ir->npath; k++)
    len += (size_t)snprintf(path + len, sizeof path - len, "%s(%d,%d)",
                            k ? "," : "", ir->path_linear[k][0],
                            ir->path_linear[k][1]);
  snprintf(path + len, sizeof path - len, "]");
  ein_plan_destroy(plan);
  ein_options o = {.memory_limit = 3240, .path = path};
  ein_status st = ein_plan_create(ctx, expr, in, 6, NULL, &o, &plan);
  CHECK(st == EIN_ERR_LIMIT &&
            strstr(ein_last_error(ctx)->message, "a limit of 12960 bytes fits"),
        "a layout copy past the limit: %d %s", st,
        st ? ein_last_error(ctx)->message : "");
  ein_plan_destroy(plan);
  for (int searched = 0; searched < 2; searched++) {
    o = (ein_options){.memory_limit = 3240,
                      .slice_axes = searched ? NULL : "c"};
    REQUIRE_OK(ein_plan_create(ctx, expr, in, 6, NULL, &o, &plan));
    ir = ein_plan_ir_of(plan);
    int64_t worst = 0;
    for (int b = 0; b < ir->nbuffers; b++)
      if (ir->buffers[b].kind == EIN_BUF_TEMP)
        worst = ir->buffers[b].elems * 4 > worst ? ir->buffers[b].elems * 4
                                                 : worst;
    CHECK(worst <= 3240 && ein_plan_nslices(plan) > 1,
          "%s: largest buffer %lld bytes, %g slices",
          searched ? "searched" : "sliced over c", (long long)worst,
          ein_plan_nslices(plan));
    ein_plan_destroy(plan);
  }
}

/* A 3x3x2 lattice of bond 4 (18 operands, bonds numbered as
 * bench/paths.py's lattice) as an expression and its shapes. */
static void lattice_332(char *expr, size_t cap, int64_t (*shapes)[6],
                        int *ndims) {
  static const int dims[3] = {3, 3, 2};
  int nb = 0;
  size_t len = 0;
  char terms[18][64] = {{0}};
  for (int i = 0; i < 18; i++) ndims[i] = 0;
  for (int c = 0; c < 18; c++) /* c = (x * 3 + y) * 2 + z */
    for (int ax = 0; ax < 3; ax++) {
      int co[3] = {c / 6, c / 2 % 3, c % 2};
      if (++co[ax] >= dims[ax]) continue;
      int d = (co[0] * 3 + co[1]) * 2 + co[2];
      for (int e = 0; e < 2; e++) {
        int op = e ? d : c;
        size_t at = strlen(terms[op]);
        snprintf(terms[op] + at, sizeof terms[op] - at, " b%d", nb);
        shapes[op][ndims[op]++] = 4;
      }
      nb++;
    }
  for (int i = 0; i < 18; i++)
    len += (size_t)snprintf(expr + len, cap - len, "%s%s", i ? "," : "",
                            terms[i]);
  snprintf(expr + len, cap - len, " -> ");
}

/* A plan held 4x tighter because a layout copy is past the limit (the
 * lattice at 1024 bytes: 1 retry) runs the unlimited path search once:
 * the retry takes its tree from the planning call's memo. */
static void check_retry_reuses_search(ein_ctx *ctx) {
  char expr[512];
  int64_t shapes[18][6];
  int ndims[18];
  DLTensor t[18];
  const DLTensor *in[18];
  lattice_332(expr, sizeof expr, shapes, ndims);
  f32_descs(18, ndims, shapes[0], 6, t, in);
  ein_options o = {.memory_limit = 1024, .seed = 3};
  ein_plan *a = NULL, *b = NULL;
  REQUIRE_OK(ein_plan_create(ctx, expr, in, 18, NULL, &o, &a));
  REQUIRE_OK(ein_plan_create(ctx, expr, in, 18, NULL, &o, &b));
  const ein_plan_ir *ia = ein_plan_ir_of(a), *ib = ein_plan_ir_of(b);
  CHECK(ia->path_free_searches == 1 && ia->path_free_reused >= 1,
        "retried plan: %d unlimited searches, %d reused (want 1, >= 1)",
        ia->path_free_searches, ia->path_free_reused);
  CHECK(ia->npath == ib->npath &&
            !memcmp(ia->path, ib->path, sizeof *ia->path * (size_t)ia->npath) &&
            ein_plan_nslices(a) == ein_plan_nslices(b),
        "the same seed planned two paths");
  ein_plan_destroy(a);
  ein_plan_destroy(b);
}

/* EIN_MEMORY_FREE (issue 37): resolved on the CPU to a third of the
 * host's MemAvailable kept to 3 leading bits, so a second plan has the same
 * limit; a CUDA plan without a GPU cannot read a device's free memory
 * (EIN_ERR_DEVICE); a negative limit other than it is refused. */
static void check_memory_free(ein_ctx *ctx) {
  static const int64_t shapes[2][2] = {{6, 5}, {5, 7}};
  static const int ndims[2] = {2, 2};
  DLTensor t[2];
  const DLTensor *in[2];
  f32_descs(2, ndims, shapes[0], 2, t, in);
  ein_options o = {.memory_limit = EIN_MEMORY_FREE};
  ein_plan *a = NULL, *b = NULL;
  REQUIRE_OK(ein_plan_create(ctx, "i j, j k -> i k", in, 2, NULL, &o, &a));
  REQUIRE_OK(ein_plan_create(ctx, "i j, j k -> i k", in, 2, NULL, &o, &b));
  int64_t limit = ein_plan_memory_limit(a), bits = 0;
  for (int64_t v = limit; v; v &= v - 1) bits++;
  FILE *f = fopen("/proc/meminfo", "r");
  long long kib = 0;
  char line[128];
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "MemAvailable: %lld kB", &kib) == 1) break;
  if (f) fclose(f);
  double share = (double)limit / ((double)kib * 1024);
  CHECK(limit > 0 && bits <= 3 && limit == ein_plan_memory_limit(b) &&
            (kib == 0 || (share > 0.2 && share <= 0.31)),
        "EIN_MEMORY_FREE resolved to %lld bytes (%lld bits set, %.3g of "
        "MemAvailable), then %lld", (long long)limit, (long long)bits, share,
        (long long)ein_plan_memory_limit(b));
  CHECK(ein_plan_nslices(a) == 1, "a small plan under the free memory is "
        "not sliced: %g", ein_plan_nslices(a));
  ein_plan_destroy(a);
  ein_plan_destroy(b);
  o.backend = EIN_BACKEND_CUDA;
  for (int i = 0; i < 2; i++) t[i].device = (DLDevice){kDLCUDA, 0};
  ein_status st = ein_plan_create(ctx, "i j, j k -> i k", in, 2, NULL, &o, &a);
  CHECK(st == EIN_ERR_DEVICE || (st == EIN_OK && ein_plan_memory_limit(a) > 0),
        "EIN_MEMORY_FREE for a CUDA plan: %s", ein_status_name(st));
  if (!st) ein_plan_destroy(a);
  for (int i = 0; i < 2; i++) t[i].device = (DLDevice){kDLCPU, 0};
  o = (ein_options){.memory_limit = -2};
  st = ein_plan_create(ctx, "i j, j k -> i k", in, 2, NULL, &o, &a);
  CHECK(st == EIN_ERR_INVALID_ARGUMENT, "memory_limit -2: %s",
        ein_status_name(st));
}

/* Issue 36: a network whose best order has an intermediate past int64
 * (a random 3-regular graph of 500 tensors of bond 2: about 2^86
 * elements) is planned, not refused: the plan reports its path, FLOPs and
 * the elements it needs (needs_limit_elems); running it is EIN_ERR_LIMIT
 * naming the memory limit, with the output untouched; under a memory
 * limit it is a sliced plan that may run. */
enum { NET = 500 };
static void regular_net(char *expr, size_t cap, int *ndims) {
  static int stub[NET * 3], deg[NET];
  static char ax[NET][3][8];
  memset(deg, 0, sizeof deg);
  for (int k = 0; k < NET * 3; k++) stub[k] = k / 3;
  for (int k = NET * 3 - 1; k > 0; k--) { /* a seeded shuffle */
    int j = (int)(rng() % (uint64_t)(k + 1)), t = stub[k];
    stub[k] = stub[j], stub[j] = t;
  }
  for (int k = 0, e = 0; k + 1 < NET * 3; k += 2) {
    int a = stub[k], b = stub[k + 1];
    if (a == b) continue;
    snprintf(ax[a][deg[a]++], 8, "e%d", e);
    snprintf(ax[b][deg[b]++], 8, "e%d", e++);
  }
  size_t len = 0;
  for (int i = 0; i < NET; i++) {
    ndims[i] = deg[i];
    len += (size_t)snprintf(expr + len, cap - len, "%s", i ? ", " : "");
    for (int d = 0; d < deg[i]; d++)
      len += (size_t)snprintf(expr + len, cap - len, "%s%s", d ? " " : "",
                              ax[i][d]);
  }
  snprintf(expr + len, cap - len, " ->");
}

static void check_past_int64(ein_ctx *ctx) {
  static char expr[NET * 16];
  static int ndims[NET];
  static int64_t shapes[NET][3];
  static float data[NET][8];
  static DLTensor t[NET];
  static const DLTensor *in[NET];
  regular_net(expr, sizeof expr, ndims);
  for (int i = 0; i < NET; i++) {
    shapes[i][0] = shapes[i][1] = shapes[i][2] = 2;
    for (int e = 0; e < 8; e++) data[i][e] = 0.5f;
  }
  f32_descs(NET, ndims, shapes[0], 3, t, in);
  ein_plan *plan = NULL;
  ein_status st = ein_plan_create(ctx, expr, in, NET, NULL, NULL, &plan);
  double need = st ? 0 : ein_plan_ir_of(plan)->needs_limit_elems;
  CHECK(st == EIN_OK && need > 9.3e18 && ein_plan_flops(plan) > 0,
        "a network past int64 planned: %s, needs %g elements",
        ein_status_name(st), need);
  size_t len = st ? 0 : ein_plan_describe(plan, EIN_DESCRIBE_JSON, NULL,
                                            NULL, 0);
  char *report = calloc(len + 1, 1);
  if (len) ein_plan_describe(plan, EIN_DESCRIBE_JSON, NULL, report, len + 1);
  CHECK(len && strstr(report, "\"needs_memory_limit\":") &&
            !strstr(report, "\"needs_memory_limit\":null"),
        "its JSON names the memory it needs");
  free(report);
  ein_plan_destroy(plan);
  for (int i = 0; i < NET; i++) t[i].data = data[i];
  float out = 42;
  DLTensor o = {.data = &out, .device = {kDLCPU, 0}, .ndim = 0,
                .dtype = {kDLFloat, 32, 1}};
  st = ein_eval(ctx, expr, in, NET, &o, NULL);
  CHECK(st == EIN_ERR_LIMIT && out == 42 &&
            strstr(ein_last_error(ctx)->message, "give a memory limit"),
        "running it: %s '%s'", ein_status_name(st),
        ein_last_error(ctx)->message);
  ein_options lim = {.memory_limit = (int64_t)1 << 40};
  st = ein_plan_create(ctx, expr, in, NET, NULL, &lim, &plan);
  CHECK(st == EIN_OK && ein_plan_ir_of(plan)->needs_limit_elems == 0 &&
            ein_plan_nslices(plan) > 1,
        "under a memory limit: %s, sliced in %g", ein_status_name(st),
        st ? 0 : ein_plan_nslices(plan));
  if (!st) ein_plan_destroy(plan);
}

int main(void) {
  ein_ctx *ctx;
  REQUIRE_OK(ein_ctx_create(&ctx));
  check_random(ctx);
  check_accessors(ctx);
  check_no_replicated_step(ctx);
  check_limit_covers_copies(ctx);
  check_retry_reuses_search(ctx);
  check_memory_free(ctx);
  check_past_int64(ctx);
  check_long_chain(ctx, 100);
  check_plan_10000(ctx);
  check_axes_100000(ctx);
  ein_ctx_destroy(ctx);
  return test_summary("slicing");
}
