/*
 * test_threads.c - eight threads share one context (docs/reliability.md,
 * "Threads"). Each thread calls ein_eval with a mix of expressions every
 * thread uses with the same shapes (plan-cache hits after the first call)
 * and expressions with sizes of its own (new plans, which fill the cache
 * and evict plans other threads may be running), runs a plan made once on
 * the main thread, and makes errors of its own between the calls. Every
 * result is compared with the naive reference; every error must be the
 * calling thread's own.
 *
 * Run under ThreadSanitizer by tests/run.sh (build-tsan); here the threads
 * keep their own tallies and the main thread CHECKs them, because the
 * harness counters are plain globals.
 *
 * Arguments: [--cuda] [iterations per thread] (default 200). With --cuda the
 * shape cases run on GPU 0 (exit 77 without one) while plan runs stay on
 * the CPU, so one context drives both backends from eight threads.
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "ctx_internal.h"
#include "cuda_backend.h"
#include "harness.h"
#include "reference.h"

enum { THREADS = 8, MAX_ELEMS = 4096 };

typedef struct shape_case {
  const char *expr;
  int n;
  int ndims[3];
  int64_t shapes[3][4];
} shape_case;

/* Shapes every thread uses: after the first call, cache hits. */
static const shape_case shared_cases[] = {
    {"b i k, b k j -> b i j", 2, {3, 3}, {{2, 9, 7}, {2, 7, 5}}},
    {"a b c -> c a b", 1, {3}, {{4, 5, 6}}},
    {"b c (h 2) (w 2) -> b c h w", 1, {4}, {{2, 3, 4, 6}}},
    {"i j, j k, k l -> i l", 3, {2, 2, 2}, {{5, 6}, {6, 7}, {7, 3}}},
    {"a b -> a", 1, {2}, {{17, 33}}},
    {"i i -> i", 1, {2}, {{9, 9}}},
};
enum { NSHARED = sizeof shared_cases / sizeof shared_cases[0] };

typedef struct thread_state {
  ein_ctx *ctx;
  const ein_plan *plan; /* "i k, k j -> i j" for 6x4 by 4x5, made by main */
  int index, iterations;
  uint64_t rng;
  int evals, errors_checked, plan_runs;
  int failures;
  char first_failure[512];
} thread_state;

static uint64_t next(thread_state *t) {
  t->rng ^= t->rng << 13;
  t->rng ^= t->rng >> 7;
  t->rng ^= t->rng << 17;
  return t->rng;
}

static void fail(thread_state *t, const char *what, const char *expr) {
  if (!t->failures++)
    snprintf(t->first_failure, sizeof t->first_failure,
             "thread %d: %s: '%s' (%s)", t->index, what, expr,
             ein_last_error(t->ctx)->message);
}

static void fill(thread_state *t, double *x, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    x[i] = (double)(next(t) >> 11) / 9007199254740992.0 * 2 - 1;
}

static void make(DLTensor *x, double *data, int ndim, int64_t *shape) {
  *x = (DLTensor){.data = data, .device = {kDLCPU, 0}, .ndim = ndim,
                  .dtype = {kDLFloat, 64, 1}, .shape = shape};
}

static int64_t count(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= shape[d];
  return n;
}

/* |got - want| / |want| over the whole output (f64: 1e-12). */
static bool close_to(const double *got, const double *want, int64_t n) {
  double err = 0, norm = 0;
  for (int64_t i = 0; i < n; i++) {
    err += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  return sqrt(err) <= 1e-12 * (sqrt(norm) > 1 ? sqrt(norm) : 1);
}

/* --cuda: the shapes' evaluations run on GPU 0 (plan runs and errors stay
 * on the host, so one context serves both backends at once). */
static bool on_gpu;

/* Evaluates on the GPU: the host tensors copied to device buffers, the
 * result copied back into o's data. */
static ein_status eval_on_gpu(thread_state *t, const char *expr,
                              const DLTensor *x, int n, DLTensor *o) {
  DLTensor dx[3], dout = *o;
  const DLTensor *dxs[3];
  void *buf[4] = {NULL, NULL, NULL, NULL};
  ein_error_rec err;
  ein_error_init(&err);
  ein_status st = EIN_OK;
  for (int i = 0; i <= n && !st; i++) {
    const DLTensor *h = i < n ? &x[i] : o;
    size_t bytes = (size_t)count(h->ndim, h->shape) * sizeof(double);
    st = ein_cuda_malloc(0, &buf[i], bytes ? bytes : 8, &err);
    if (!st && i < n) st = ein_cuda_copy_to_device(buf[i], h->data, bytes, &err);
    DLTensor *d = i < n ? &dx[i] : &dout;
    *d = *h;
    d->data = buf[i];
    d->device = (DLDevice){kDLCUDA, 0};
    if (i < n) dxs[i] = &dx[i];
  }
  if (!st) st = ein_eval(t->ctx, expr, dxs, n, &dout, NULL);
  if (!st) st = ein_ctx_synchronize(t->ctx);
  if (!st)
    st = ein_cuda_copy_to_host(
        o->data, buf[n], (size_t)count(o->ndim, o->shape) * sizeof(double),
        &err);
  for (int i = 0; i <= n; i++) ein_cuda_free(buf[i]);
  ein_error_clear(&err);
  return st;
}

/* Evaluates c on ctx with fresh random inputs and checks the result. */
static void eval_case(thread_state *t, const shape_case *c) {
  static _Thread_local double in[3][MAX_ELEMS], out[MAX_ELEMS],
      want[MAX_ELEMS];
  int64_t shapes[3][4];
  DLTensor x[3];
  const DLTensor *xs[3];
  const int64_t *sp[3];
  for (int i = 0; i < c->n; i++) {
    memcpy(shapes[i], c->shapes[i], sizeof shapes[i]);
    fill(t, in[i], count(c->ndims[i], shapes[i]));
    make(&x[i], in[i], c->ndims[i], shapes[i]);
    xs[i] = &x[i];
    sp[i] = shapes[i];
  }
  /* Binding on the shared context is part of what is under test too. */
  ein_binding *b;
  if (ein_bind_shapes(t->ctx, c->expr, sp, c->ndims, c->n, NULL, &b)) {
    fail(t, "bind", c->expr);
    return;
  }
  int64_t oshape[EIN_MAX_DIMS];
  int ondim = ein_binding_output_ndim(b);
  memcpy(oshape, ein_binding_output_shape(b), (size_t)ondim * sizeof *oshape);
  int64_t on = count(ondim, oshape);
  ref_eval(ein_binding_problem(b), xs, want, on);
  ein_binding_destroy(b);
  DLTensor o;
  make(&o, out, ondim, oshape);
  ein_status st = on_gpu ? eval_on_gpu(t, c->expr, x, c->n, &o)
                         : ein_eval(t->ctx, c->expr, xs, c->n, &o, NULL);
  if (st != EIN_OK) {
    fail(t, "eval", c->expr);
    return;
  }
  if (ein_last_error(t->ctx)->status != EIN_OK) fail(t, "status", c->expr);
  if (!close_to(out, want, on)) fail(t, "result", c->expr);
  t->evals++;
}

/* A case with sizes drawn for this call: mostly a new plan. */
static void eval_new(thread_state *t) {
  shape_case c = shared_cases[next(t) % NSHARED];
  for (int i = 0; i < c.n; i++)
    for (int d = 0; d < c.ndims[i]; d++)
      c.shapes[i][d] += (int64_t)(next(t) % 5);
  /* Keep what the expression ties together consistent. */
  if (strcmp(c.expr, "b i k, b k j -> b i j") == 0) {
    c.shapes[1][0] = c.shapes[0][0];
    c.shapes[1][1] = c.shapes[0][2];
  } else if (strcmp(c.expr, "i j, j k, k l -> i l") == 0) {
    c.shapes[1][0] = c.shapes[0][1];
    c.shapes[2][0] = c.shapes[1][1];
  } else if (strcmp(c.expr, "b c (h 2) (w 2) -> b c h w") == 0) {
    c.shapes[0][2] &= ~(int64_t)1;
    c.shapes[0][3] &= ~(int64_t)1;
  } else if (strcmp(c.expr, "i i -> i") == 0) {
    c.shapes[0][1] = c.shapes[0][0];
  }
  eval_case(t, &c);
}

/* An error only this thread makes: its message must name this thread's
 * axis, whatever the other threads are doing meanwhile. */
static void make_error(thread_state *t) {
  char expr[64], want[64];
  snprintf(expr, sizeof expr, "a t%d -> a q%d", t->index, t->index);
  snprintf(want, sizeof want, "axis 'q%d'", t->index);
  int64_t shape[2] = {2, 3};
  DLTensor x, o;
  double in[6], out[2];
  make(&x, in, 2, shape);
  make(&o, out, 1, shape);
  const DLTensor *xs[1] = {&x};
  ein_status st = ein_eval(t->ctx, expr, xs, 1, &o, NULL);
  const ein_error *e = ein_last_error(t->ctx);
  if (st != EIN_ERR_MISSING_LENGTH || e->status != st ||
      !strstr(e->message, want))
    fail(t, "own error", expr);
  t->errors_checked++;
}

static void run_plan(thread_state *t) {
  int64_t as[2] = {6, 4}, bs[2] = {4, 5}, os[2] = {6, 5};
  double a[24], b[20], out[30], want[30];
  fill(t, a, 24);
  fill(t, b, 20);
  for (int i = 0; i < 6; i++)
    for (int j = 0; j < 5; j++) {
      want[i * 5 + j] = 0;
      for (int k = 0; k < 4; k++)
        want[i * 5 + j] += a[i * 4 + k] * b[k * 5 + j];
    }
  DLTensor x, y, o;
  make(&x, a, 2, as);
  make(&y, b, 2, bs);
  make(&o, out, 2, os);
  const DLTensor *xs[2] = {&x, &y};
  if (ein_plan_execute(t->ctx, t->plan, xs, 2, &o) != EIN_OK)
    fail(t, "plan", "i k, k j -> i j");
  else if (!close_to(out, want, 30))
    fail(t, "plan result", "i k, k j -> i j");
  t->plan_runs++;
}

static void *worker(void *arg) {
  thread_state *t = arg;
  for (int it = 0; it < t->iterations; it++) {
    switch (next(t) % 6) {
    case 0: case 1: eval_case(t, &shared_cases[next(t) % NSHARED]); break;
    case 2: case 3: eval_new(t); break;
    case 4: make_error(t); break;
    case 5: run_plan(t); break;
    }
  }
  return NULL;
}

int main(int argc, char **argv) {
  on_gpu = argc > 1 && strcmp(argv[1], "--cuda") == 0;
  if (on_gpu) {
    argc--;
    argv++;
    if (ein_cuda_device_count() == 0) {
      printf("no GPU: skipped\n");
      return 77;
    }
  }
  int iterations = argc > 1 ? atoi(argv[1]) : 200;
  ein_ctx *ctx;
  CHECK(ein_ctx_create(&ctx) == EIN_OK, "context");
  int64_t as[2] = {6, 4}, bs[2] = {4, 5};
  DLTensor x, y;
  make(&x, NULL, 2, as);
  make(&y, NULL, 2, bs);
  const DLTensor *xs[2] = {&x, &y};
  ein_plan *plan;
  CHECK(ein_plan_create(ctx, "i k, k j -> i j", xs, 2, NULL, NULL, &plan) ==
            EIN_OK,
        "plan: %s", ein_last_error(ctx)->message);

  thread_state ts[THREADS];
  pthread_t th[THREADS];
  for (int i = 0; i < THREADS; i++) {
    ts[i] = (thread_state){.ctx = ctx, .plan = plan, .index = i,
                           .iterations = iterations,
                           .rng = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1)};
    CHECK(pthread_create(&th[i], NULL, worker, &ts[i]) == 0, "thread %d", i);
  }
  int evals = 0, errors = 0, plans = 0;
  for (int i = 0; i < THREADS; i++) {
    pthread_join(th[i], NULL);
    CHECK(ts[i].failures == 0, "%d failures; first: %s", ts[i].failures,
          ts[i].first_failure);
    CHECK(ts[i].evals + ts[i].errors_checked + ts[i].plan_runs ==
              iterations,
          "thread %d did %d of %d calls", i,
          ts[i].evals + ts[i].errors_checked + ts[i].plan_runs, iterations);
    evals += ts[i].evals;
    errors += ts[i].errors_checked;
    plans += ts[i].plan_runs;
  }
  /* The main thread made no error: its record is still clean. */
  CHECK(ein_last_error(ctx)->status == EIN_OK, "main thread's error: %s",
        ein_last_error(ctx)->message);
  pthread_mutex_lock(&ctx->cache.lock);
  unsigned long long hits = ctx->cache.hits, misses = ctx->cache.misses;
  pthread_mutex_unlock(&ctx->cache.lock);
  CHECK(hits > 0 && misses > 0, "cache hits %llu, misses %llu", hits, misses);
  printf("%d threads: %d evaluations, %d own errors, %d plan runs; cache "
         "%llu hits, %llu misses\n",
         THREADS, evals, errors, plans, hits, misses);
  ein_plan_destroy(plan);
  ein_ctx_destroy(ctx);
  return test_summary("threads");
}
