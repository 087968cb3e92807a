/*
 * Units of work (issue 29, item 1): a sliced plan's slices run one by one
 * or in ranges into partials the caller owns (ein_plan_run_units), from
 * several threads at once, on the CPU and the emulated device, and summed
 * the documented way (the partials as rows of one tensor, reduced with
 * "p ... -> ..."), and spread over 2-4 emulated devices
 * (ein_options.devices). Every result is compared with the double-precision
 * reference: whole, sliced in one call, unit by unit from 3 threads, and
 * in 3 ranges that cut pieces of the output in the middle.
 */
#include <pthread.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "reference.h"

enum { NTHREADS = 3, MAX_IN = 4 };

/* Under ThreadSanitizer (tests/run.sh's build-tsan) the emulated device
 * runs no kernels (its fibers are not annotated for TSan): the CPU's
 * threads are what that build checks here. */
#if defined(__SANITIZE_THREAD__)
#define UNITS_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNITS_TSAN 1
#endif
#endif
#ifndef UNITS_TSAN
#define UNITS_TSAN 0
#endif

typedef struct ucase {
  const char *expr;
  int n;
  int ndims[MAX_IN];
  int64_t shapes[MAX_IN][3];
  const char *slice;     /* slice_axes; NULL: the memory limit below */
  int64_t memory_limit;  /* bytes (f64) */
} ucase;

static const ucase cases[] = {
    /* an output axis in chunks and a summed one: pieces of summed units */
    {"i j k, k l m, m n i -> j l n", 3, {3, 3, 3},
     {{6, 4, 6}, {6, 5, 4}, {4, 3, 6}}, "j:2,k", 0},
    /* summed axes only: a scalar */
    {"a b, b c, c d, d a ->", 4, {2, 2, 2, 2},
     {{8, 6}, {6, 8}, {8, 6}, {6, 8}}, "a:4,c", 0},
    /* an output axis only: units write their piece in place */
    {"a b, b c -> a c", 2, {2, 2}, {{5, 6}, {6, 7}}, "a", 0},
    /* the planner's slices and chunks under a memory limit */
    {"i j k, k l m, m n i -> j l n", 3, {3, 3, 3},
     {{6, 4, 6}, {6, 5, 4}, {4, 3, 6}}, NULL, 600},
};

static uint64_t rng_state = 0x2545f4914f6cdd1du;
static double rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (double)(rng_state % 2000) / 1000.0 - 1.0;
}

/* A tensor on the CPU or the emulated device, with a host copy. */
typedef struct tensor {
  DLTensor t;
  int64_t shape[4];
  void *host, *dev;
  size_t bytes;
} tensor;

static ein_status make(ein_ctx *ctx, ein_backend_kind k, ein_dtype dt,
                       int ndim, const int64_t *shape, tensor *x) {
  memset(x, 0, sizeof *x);
  int64_t numel = 1;
  for (int d = 0; d < ndim; d++) numel *= (x->shape[d] = shape[d]);
  x->bytes = (size_t)numel * ein_dtype_size(dt);
  x->host = calloc(1, x->bytes + 16);
  x->t = (DLTensor){.data = x->host, .device = {kDLCPU, 0}, .ndim = ndim,
                    .dtype = ein_dtype_to_dl(dt), .shape = x->shape};
  if (k == EIN_BACKEND_CPU) return EIN_OK;
  ein_status st = ein_device_alloc(ctx, k, 0, x->bytes, &x->dev);
  x->t.data = x->dev;
  x->t.device = ein_backend_dl_device(k, 0);
  return st;
}

static ein_status to_device(ein_ctx *ctx, ein_backend_kind k, tensor *x) {
  if (k == EIN_BACKEND_CPU) return EIN_OK;
  return ein_device_copy(ctx, k, 0, x->dev, x->host, x->bytes,
                         EIN_COPY_HOST_TO_DEVICE);
}

static ein_status to_host(ein_ctx *ctx, ein_backend_kind k, tensor *x) {
  if (k == EIN_BACKEND_CPU) return EIN_OK;
  return ein_device_copy(ctx, k, 0, x->host, x->dev, x->bytes,
                         EIN_COPY_DEVICE_TO_HOST);
}

static void drop(ein_ctx *ctx, ein_backend_kind k, tensor *x) {
  if (k != EIN_BACKEND_CPU) ein_device_free(ctx, k, 0, x->dev);
  free(x->host);
}

/* max |got - want| / max |want| */
static double rel_err(ein_dtype dt, const void *got, const double *want,
                      int64_t n) {
  double err = 0, norm = 0;
  for (int64_t e = 0; e < n; e++) {
    err = fmax(err, fabs(ref_load(dt, got, e) - want[e]));
    norm = fmax(norm, fabs(want[e]));
  }
  return err / fmax(norm, 1e-300);
}

/* Row r of a stacked tensor of partials: the output's shape, offset. */
static DLTensor row_of(const tensor *stack, int out_ndim, int64_t r) {
  DLTensor row = stack->t;
  row.ndim = out_ndim;
  row.shape = (int64_t *)stack->shape + 1;
  int64_t numel = 1;
  for (int d = 0; d < out_ndim; d++) numel *= row.shape[d];
  row.byte_offset = (uint64_t)(r * numel) * (uint64_t)(row.dtype.bits / 8);
  return row;
}

typedef struct job {
  ein_ctx *ctx;
  const ein_plan *plan;
  const DLTensor *const *in;
  int n, out_ndim, first_row;
  tensor *stack;
  int64_t units, stride; /* this thread runs first_row, + stride, ... */
  ein_status st;
} job;

static void *run_job(void *arg) {
  job *j = arg;
  for (int64_t u = j->first_row; u < j->units && !j->st; u += j->stride) {
    DLTensor row = row_of(j->stack, j->out_ndim, u);
    j->st = ein_plan_run_units(j->ctx, j->plan, j->in, j->n, &row, u, 1);
  }
  return NULL;
}

/* Sums the stack's rows into out the documented way. */
static ein_status sum_rows(ein_ctx *ctx, tensor *stack, tensor *out) {
  const DLTensor *p = &stack->t;
  return ein_eval(ctx, "p ... -> ...", &p, 1, &out->t, NULL);
}

/* Every unit from NTHREADS threads, each into its own row; summed. */
static ein_status by_threads(ein_ctx *ctx, ein_backend_kind k, ein_dtype dt,
                             const ein_plan *plan, const DLTensor *const *in,
                             int n, tensor *out) {
  int64_t units = ein_plan_units(plan), shape[5] = {units};
  int ondim = out->t.ndim;
  memcpy(shape + 1, out->shape, sizeof(int64_t) * (size_t)ondim);
  tensor stack;
  ein_status st = make(ctx, k, dt, ondim + 1, shape, &stack);
  job jobs[NTHREADS];
  pthread_t th[NTHREADS];
  for (int t = 0; t < NTHREADS && !st; t++) {
    jobs[t] = (job){ctx, plan, in, n, ondim, t, &stack, units, NTHREADS,
                    EIN_OK};
    pthread_create(&th[t], NULL, run_job, &jobs[t]);
  }
  for (int t = 0; t < NTHREADS && !st; t++) pthread_join(th[t], NULL);
  for (int t = 0; t < NTHREADS && !st; t++) st = jobs[t].st;
  if (!st) st = sum_rows(ctx, &stack, out);
  drop(ctx, k, &stack);
  return st;
}

/* Three ranges [0, a), [a, b), [b, units) cutting pieces in the middle
 * (fewer when there are fewer units), each into a row (the rows start dirty: a range must write all of its
 * row); summed. */
static ein_status by_ranges(ein_ctx *ctx, ein_backend_kind k, ein_dtype dt,
                            const ein_plan *plan, const DLTensor *const *in,
                            int n, tensor *out) {
  int64_t units = ein_plan_units(plan);
  int64_t cut[4] = {0, units / 3, units / 3 + (units + 1) / 3, units};
  int rows = 0; /* the non-empty ranges, each its row */
  for (int r = 0; r < 3; r++)
    if (cut[r + 1] > cut[r]) cut[rows++] = cut[r];
  cut[rows] = units;
  int64_t shape[5] = {rows};
  int ondim = out->t.ndim;
  memcpy(shape + 1, out->shape, sizeof(int64_t) * (size_t)ondim);
  tensor stack;
  ein_status st = make(ctx, k, dt, ondim + 1, shape, &stack);
  memset(stack.host, 0x7f, stack.bytes);
  if (!st) st = to_device(ctx, k, &stack);
  for (int r = 0; r < rows && !st; r++) {
    DLTensor row = row_of(&stack, ondim, r);
    st = ein_plan_run_units(ctx, plan, in, n, &row, cut[r],
                            cut[r + 1] - cut[r]);
  }
  if (!st) st = sum_rows(ctx, &stack, out);
  drop(ctx, k, &stack);
  return st;
}

/* One case on one backend and dtype: whole, sliced, by threads, by
 * ranges, each against the reference. */
static void check_case(ein_ctx *ctx, const ucase *c, ein_backend_kind k,
                       ein_dtype dt) {
  const int64_t *shp[MAX_IN];
  for (int i = 0; i < c->n; i++) shp[i] = c->shapes[i];
  ein_binding *b;
  REQUIRE_OK(ein_bind_shapes(ctx, c->expr, shp, c->ndims, c->n, NULL, &b));
  const ein_problem *p = ein_binding_problem(b);
  tensor in[MAX_IN], out;
  const DLTensor *inp[MAX_IN], *hostp[MAX_IN];
  ein_status st = EIN_OK;
  for (int i = 0; i < c->n && !st; i++) {
    st = make(ctx, k, dt, c->ndims[i], c->shapes[i], &in[i]);
    int64_t numel = (int64_t)(in[i].bytes / ein_dtype_size(dt));
    for (int64_t e = 0; e < numel; e++) ref_store(dt, in[i].host, e, rnd());
    if (!st) st = to_device(ctx, k, &in[i]);
    inp[i] = &in[i].t;
  }
  int64_t oshape[4], onumel = 1;
  for (int d = 0; d < p->output.ndim; d++)
    onumel *= (oshape[d] = p->output.dims[d].size);
  if (!st) st = make(ctx, k, dt, p->output.ndim, oshape, &out);
  REQUIRE_OK(st);
  DLTensor hin[MAX_IN];
  for (int i = 0; i < c->n; i++) {
    hin[i] = in[i].t;
    hin[i].data = in[i].host;
    hin[i].device = (DLDevice){kDLCPU, 0};
    hostp[i] = &hin[i];
  }
  double *want = malloc(sizeof(double) * (size_t)(onumel + 1));
  ref_eval(p, hostp, want, onumel);
  ein_options o = {.backend = k, .slice_axes = c->slice,
                   .memory_limit = c->memory_limit};
  ein_plan *plan;
  REQUIRE_OK(ein_plan_create(ctx, c->expr, inp, c->n, &out.t, &o, &plan));
  double tol = dt == EIN_DT_F64 ? 1e-12 : 1e-5, err[7];
  const char *what[7] = {"whole", "sliced", "unit by unit, 3 threads",
                         "3 ranges", "devices=2", "devices=3", "devices=4"};
  ein_options whole = {.backend = k}, spread = o;
  for (int w = 0; w < (k == EIN_BACKEND_EMU ? 7 : 4); w++) {
    memset(out.host, 0x7f, out.bytes);
    st = to_device(ctx, k, &out);
    spread.devices = w - 2; /* w 4..6: over 2..4 emulated devices */
    if (!st)
      st = w == 0   ? ein_eval(ctx, c->expr, inp, c->n, &out.t, &whole)
           : w == 1 ? ein_plan_execute(ctx, plan, inp, c->n, &out.t)
           : w == 2 ? by_threads(ctx, k, dt, plan, inp, c->n, &out)
           : w == 3 ? by_ranges(ctx, k, dt, plan, inp, c->n, &out)
                    : ein_eval(ctx, c->expr, inp, c->n, &out.t, &spread);
    if (!st) st = to_host(ctx, k, &out);
    err[w] = st ? INFINITY : rel_err(dt, out.host, want, onumel);
    CHECK(!st && err[w] <= tol, "%s %s '%s' slice %s (%lld units) %s: "
          "status %d, error %.3g (%s)", ein_backend_name(k),
          ein_dtype_name(dt), c->expr, c->slice ? c->slice : "(limit)",
          (long long)ein_plan_units(plan), what[w], st, err[w],
          st ? ein_last_error(ctx)->message : "");
  }
  CHECK(ein_plan_units(plan) > 1 && ein_plan_units(plan) == ein_plan_nslices(plan),
        "'%s': %lld units", c->expr, (long long)ein_plan_units(plan));
  ein_plan_destroy(plan);
  free(want);
  for (int i = 0; i < c->n; i++) drop(ctx, k, &in[i]);
  drop(ctx, k, &out);
  ein_binding_destroy(b);
}

/* Ranges outside the units fail before anything runs; an unsliced plan
 * is one unit. */
static void check_bad_ranges(ein_ctx *ctx) {
  int64_t s[2] = {4, 6};
  double a[24] = {0}, out[4];
  int64_t os[1] = {4};
  DLTensor t = {.data = a, .device = {kDLCPU, 0}, .ndim = 2,
                .dtype = {kDLFloat, 64, 1}, .shape = s};
  DLTensor o = {.data = out, .device = {kDLCPU, 0}, .ndim = 1,
                .dtype = {kDLFloat, 64, 1}, .shape = os};
  const DLTensor *in[1] = {&t};
  ein_options opt = {.slice_axes = "j:3"};
  ein_plan *plan;
  REQUIRE_OK(ein_plan_create(ctx, "i j -> i", in, 1, &o, &opt, &plan));
  CHECK(ein_plan_units(plan) == 3, "%lld units", (long long)ein_plan_units(plan));
  const int64_t bad[4][2] = {{-1, 1}, {0, 0}, {2, 2}, {3, 1}};
  for (int i = 0; i < 4; i++) {
    out[0] = 42;
    ein_status st = ein_plan_run_units(ctx, plan, in, 1, &o, bad[i][0],
                                       bad[i][1]);
    CHECK(st == EIN_ERR_INVALID_ARGUMENT && out[0] == 42 &&
              strstr(ein_last_error(ctx)->message, "a plan of 3 units"),
          "units %lld+%lld: status %d, '%s'", (long long)bad[i][0],
          (long long)bad[i][1], st, ein_last_error(ctx)->message);
  }
  ein_plan_destroy(plan);
  REQUIRE_OK(ein_plan_create(ctx, "i j -> i", in, 1, &o, NULL, &plan));
  CHECK(ein_plan_units(plan) == 1, "unsliced: %lld units",
        (long long)ein_plan_units(plan));
  CHECK(ein_plan_run_units(ctx, plan, in, 1, &o, 0, 1) == EIN_OK,
        "unsliced unit 0");
  ein_plan_destroy(plan);
  CHECK(ein_plan_units(NULL) == 0, "NULL plan");
}

/* The spread cost model (ein_plan_spread_cost) on a plan of 12 units: one
 * worker is the plan itself; 5 workers run 3 units each, the inputs and
 * partials take 3 tree rounds; past the units each worker runs one. */
static void check_spread_cost(ein_ctx *ctx) {
  int64_t s[2] = {4, 6}, os[1] = {4};
  DLTensor t = {.device = {kDLCPU, 0}, .ndim = 2, .dtype = {kDLFloat, 64, 1},
                .shape = s};
  DLTensor o = {.device = {kDLCPU, 0}, .ndim = 1, .dtype = {kDLFloat, 64, 1},
                .shape = os};
  const DLTensor *in[1] = {&t};
  ein_options opt = {.slice_axes = "i:2,j:6"};
  ein_plan *plan;
  REQUIRE_OK(ein_plan_create(ctx, "i j -> i", in, 1, &o, &opt, &plan));
  ein_device_model m = {.name = "test", .bytes_per_s = 1e9};
  for (int k = 0; k < EIN_NPEAK; k++) m.peak[k] = 1e9;
  ein_spread_cost one, five, many;
  REQUIRE_OK(ein_plan_spread_cost(plan, &m, 1, 1e6, &one));
  REQUIRE_OK(ein_plan_spread_cost(plan, &m, 5, 1e6, &five));
  REQUIRE_OK(ein_plan_spread_cost(plan, &m, 20, 1e6, &many));
  double T = one.one_seconds, in_s = 3 * 24 * 8 / 1e6, part = 3 * 4 * 8 / 1e6;
  CHECK(one.units == 12 && fabs(one.seconds - T) <= 1e-12 * T && T > 0 &&
            fabs(one.efficiency - 1) <= 1e-12 && one.input_seconds == 0,
        "1 worker: %g units, %g s of %g", one.units, one.seconds, T);
  CHECK(five.units_per_worker == 3 &&
            fabs(five.compute_seconds - T * 3 / 12) <= 1e-15 &&
            fabs(five.input_seconds - in_s) <= 1e-15 &&
            fabs(five.partial_seconds - part) <= 1e-15 &&
            fabs(five.efficiency - T / five.seconds / 5) <= 1e-12,
        "5 workers: %g per worker, compute %g, inputs %g (want %g), "
        "partials %g (want %g)", five.units_per_worker, five.compute_seconds,
        five.input_seconds, in_s, five.partial_seconds, part);
  CHECK(many.units_per_worker == 1, "20 workers: %g per worker",
        many.units_per_worker);
  ein_spread_cost c;
  CHECK(ein_plan_spread_cost(plan, &m, 0, 1e9, &c) == EIN_ERR_INVALID_ARGUMENT &&
            ein_plan_spread_cost(plan, &m, 2, 0, &c) == EIN_ERR_INVALID_ARGUMENT,
        "bad workers or bandwidth accepted");
  ein_plan_destroy(plan);
}

/* devices past the backend's, or on the CPU, fail before any work. */
static void check_bad_devices(ein_ctx *ctx) {
  int64_t s[2] = {4, 6}, os[1] = {4};
  double a[24] = {0}, out[4] = {42, 42, 42, 42};
  DLTensor t = {.data = a, .device = {kDLCPU, 0}, .ndim = 2,
                .dtype = {kDLFloat, 64, 1}, .shape = s};
  DLTensor o = {.data = out, .device = {kDLCPU, 0}, .ndim = 1,
                .dtype = {kDLFloat, 64, 1}, .shape = os};
  const DLTensor *in[1] = {&t};
  ein_options opt = {.slice_axes = "j:3", .devices = 2};
  ein_status st = ein_eval(ctx, "i j -> i", in, 1, &o, &opt);
  CHECK(st == EIN_ERR_INVALID_ARGUMENT && out[0] == 42 &&
            strstr(ein_last_error(ctx)->message, "the CPU backend is one"),
        "devices=2 on the CPU: %d '%s'", st, ein_last_error(ctx)->message);
  tensor dt, dout;
  REQUIRE_OK(make(ctx, EIN_BACKEND_EMU, EIN_DT_F64, 2, s, &dt));
  REQUIRE_OK(make(ctx, EIN_BACKEND_EMU, EIN_DT_F64, 1, os, &dout));
  const DLTensor *din[1] = {&dt.t};
  opt.devices = 5;
  st = ein_eval(ctx, "i j -> i", din, 1, &dout.t, &opt);
  CHECK(st == EIN_ERR_DEVICE &&
            strstr(ein_last_error(ctx)->message, "which has 4 here"),
        "devices=5 of 4: %d '%s'", st, ein_last_error(ctx)->message);
  drop(ctx, EIN_BACKEND_EMU, &dt);
  drop(ctx, EIN_BACKEND_EMU, &dout);
}

/* Spreading has no input limit of its own (it stopped at 64 inputs): a
 * chain of 70 f64 2x2 matrices sliced over its first axis, spread over 2
 * emulated devices, equals the product taken here. */
enum { CHAIN = 70 };
static void check_many_inputs(ein_ctx *ctx) {
  static char expr[CHAIN * 16 + 32];
  size_t len = 0;
  for (int i = 0; i < CHAIN; i++)
    len += (size_t)snprintf(expr + len, sizeof expr - len, "%sx%d x%d",
                            i ? ", " : "", i, i + 1);
  snprintf(expr + len, sizeof expr - len, " -> x0 x%d", CHAIN);
  static tensor in[CHAIN];
  const DLTensor *inp[CHAIN];
  int64_t s[2] = {2, 2};
  double want[4] = {1, 0, 0, 1}, next[4];
  for (int i = 0; i < CHAIN; i++) {
    REQUIRE_OK(make(ctx, EIN_BACKEND_EMU, EIN_DT_F64, 2, s, &in[i]));
    double *m = in[i].host;
    for (int e = 0; e < 4; e++) m[e] = rnd();
    for (int r = 0; r < 2; r++)
      for (int c = 0; c < 2; c++)
        next[2 * r + c] = want[2 * r] * m[c] + want[2 * r + 1] * m[2 + c];
    memcpy(want, next, sizeof want);
    REQUIRE_OK(to_device(ctx, EIN_BACKEND_EMU, &in[i]));
    inp[i] = &in[i].t;
  }
  tensor out;
  REQUIRE_OK(make(ctx, EIN_BACKEND_EMU, EIN_DT_F64, 2, s, &out));
  ein_options o = {.backend = EIN_BACKEND_EMU, .slice_axes = "x0",
                   .devices = 2};
  ein_status st = ein_eval(ctx, expr, inp, CHAIN, &out.t, &o);
  if (!st) st = to_host(ctx, EIN_BACKEND_EMU, &out);
  double err = st ? INFINITY : rel_err(EIN_DT_F64, out.host, want, 4);
  CHECK(!st && err <= 1e-12, "%d inputs over 2 devices: status %d (%s), "
        "error %.3g", CHAIN, st, st ? ein_last_error(ctx)->message : "", err);
  for (int i = 0; i < CHAIN; i++) drop(ctx, EIN_BACKEND_EMU, &in[i]);
  drop(ctx, EIN_BACKEND_EMU, &out);
}

/* Inputs of device 0 that say they are on device 1 (a caller's bug), the
 * output on device 1: the GEMM runs on device 1, whose cuBLAS may not
 * reach device 0's memory, so the call fails as it would on GPUs instead
 * of reading it through the host memory the emulated devices share. */
static void check_foreign_memory(ein_ctx *ctx) {
  int64_t s[2] = {256, 256}; /* a cuBLAS GEMM, no kernel */
  tensor a, b, out;
  REQUIRE_OK(make(ctx, EIN_BACKEND_EMU, EIN_DT_F32, 2, s, &a));
  REQUIRE_OK(make(ctx, EIN_BACKEND_EMU, EIN_DT_F32, 2, s, &b));
  REQUIRE_OK(make(ctx, EIN_BACKEND_CPU, EIN_DT_F32, 2, s, &out));
  REQUIRE_OK(ein_device_alloc(ctx, EIN_BACKEND_EMU, 1, out.bytes, &out.dev));
  out.t.data = out.dev;
  out.t.device = ein_backend_dl_device(EIN_BACKEND_EMU, 1);
  a.t.device.device_id = b.t.device.device_id = 1;
  const DLTensor *in[2] = {&a.t, &b.t};
  ein_options o = {.backend = EIN_BACKEND_EMU};
  ein_status st = ein_eval(ctx, "i j, j k -> i k", in, 2, &out.t, &o);
  CHECK(st == EIN_ERR_DEVICE &&
            strstr(ein_last_error(ctx)->message, "cuBLAS reaches only"),
        "device 1's GEMM on device 0's memory: status %d (%s)", st,
        st ? ein_last_error(ctx)->message : "");
  drop(ctx, EIN_BACKEND_EMU, &a);
  drop(ctx, EIN_BACKEND_EMU, &b);
  ein_device_free(ctx, EIN_BACKEND_EMU, 1, out.dev);
  free(out.host);
}

int main(void) {
  /* four emulated devices for ein_options.devices */
  setenv("EINC_EMU_DEVICES", "4", 1);
  ein_ctx *ctx;
  REQUIRE_OK(ein_ctx_create(&ctx));
  ein_backend_kind kinds[2] = {EIN_BACKEND_CPU, EIN_BACKEND_EMU};
  ein_dtype dts[2] = {EIN_DT_F64, EIN_DT_F32};
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
    for (int k = 0; k < (UNITS_TSAN ? 1 : 2); k++)
      for (int d = 0; d < 2; d++) check_case(ctx, &cases[c], kinds[k], dts[d]);
  check_bad_ranges(ctx);
  check_bad_devices(ctx);
  if (!UNITS_TSAN) check_many_inputs(ctx);
  check_foreign_memory(ctx);
  check_spread_cost(ctx);
  ein_ctx_destroy(ctx);
  return test_summary("units");
}
