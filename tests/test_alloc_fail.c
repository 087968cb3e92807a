/*
 * test_alloc_fail.c - every host allocation made while parsing, binding,
 * planning, describing and running fails in turn (as SQLite's
 * out-of-memory tests do). Each failure must come back as
 * EIN_ERR_NO_MEMORY with a message, the same context must then compute the
 * right answer, and nothing may leak (the ASan build checks that at exit).
 */
#include <stdbool.h>
#include <stdlib.h>

#include "alloc.h"
#include "ein.h"
#include "harness.h"

enum { MAX_POINTS = 20000 };

/* One scenario: a public call sequence that allocates. It writes its
 * numeric result (if any) to out[0..n). */
typedef struct scenario {
  const char *name;
  const char *expr;
  int ninputs;
  int64_t shapes[3][4];
  int ndims[3];
  ein_options opt;
  enum { BIND, PLAN, DESCRIBE, EVAL, GRAD, JVP } what;
} scenario;

static float inputs[3][1 << 17];
/* ein_plan_describe has no context to hold a message: it reports failure
 * by returning 0, and run() notes that here. */
static bool describe_failed;

static void fill_inputs(void) {
  uint64_t s = 0x2545F4914F6CDD1Dull;
  for (int i = 0; i < 3; i++)
    for (int k = 0; k < 1 << 17; k++) {
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      inputs[i][k] = (float)((double)(s >> 11) * 0x1p-52 - 1.0);
    }
}

/* The gradient w.r.t. input 0 of sum(out) (dout all ones), the forward
 * output made by ein_eval (max reads it), the program then described. */
static ein_status run_grad(ein_ctx *ctx, const scenario *sc,
                           const DLTensor *const *ins, float *out,
                           int64_t *out_n) {
  static float fwd[1 << 16], ones[1 << 16];
  int64_t shape[EIN_MAX_DIMS];
  int ndim;
  ein_status st = ein_output_shape(ctx, sc->expr, ins, sc->ninputs, &sc->opt,
                                   shape, &ndim);
  if (st) return st;
  for (int i = 0; i < 1 << 16; i++) ones[i] = 1;
  DLTensor o = {.data = fwd, .device = {kDLCPU, 0}, .ndim = ndim,
                .dtype = {kDLFloat, 32, 1}, .shape = shape};
  DLTensor d = o, dx = *ins[0];
  d.data = ones;
  dx.data = out;
  *out_n = 1;
  for (int k = 0; k < dx.ndim; k++) *out_n *= dx.shape[k];
  ein_grad *g = NULL;
  st = ein_eval(ctx, sc->expr, ins, sc->ninputs, &o, &sc->opt);
  if (!st) st = ein_grad_create(ctx, sc->expr, ins, sc->ninputs, &sc->opt, 0,
                                &g);
  if (!st) st = ein_grad_execute(ctx, g, ins, sc->ninputs, &o, &d, &dx);
  if (!st) {
    char buf[8192];
    describe_failed = ein_grad_describe(g, EIN_DESCRIBE_JSON, buf,
                                        sizeof buf) == 0;
    if (describe_failed) st = EIN_ERR_NO_MEMORY;
  }
  ein_grad_destroy(g);
  return st;
}

/* Input 0's part of the output's tangent (ein_jvp_create), its tangent
 * read from the third input array, the forward output made by ein_eval
 * (max reads it), the program then described. */
static ein_status run_jvp(ein_ctx *ctx, const scenario *sc,
                          const DLTensor *const *ins, float *out,
                          int64_t *out_n) {
  static float fwd[1 << 16];
  int64_t shape[EIN_MAX_DIMS];
  int ndim;
  ein_status st = ein_output_shape(ctx, sc->expr, ins, sc->ninputs, &sc->opt,
                                   shape, &ndim);
  if (st) return st;
  DLTensor o = {.data = fwd, .device = {kDLCPU, 0}, .ndim = ndim,
                .dtype = {kDLFloat, 32, 1}, .shape = shape};
  DLTensor tan = *ins[0], dy = o;
  tan.data = inputs[2];
  dy.data = out;
  *out_n = 1;
  for (int k = 0; k < ndim; k++) *out_n *= shape[k];
  ein_grad *g = NULL;
  st = ein_eval(ctx, sc->expr, ins, sc->ninputs, &o, &sc->opt);
  if (!st) st = ein_jvp_create(ctx, sc->expr, ins, sc->ninputs, &sc->opt, 0,
                               &g);
  if (!st) st = ein_grad_execute(ctx, g, ins, sc->ninputs, &o, &tan, &dy);
  if (!st) {
    char buf[8192];
    describe_failed = ein_grad_describe(g, EIN_DESCRIBE_JSON, buf,
                                        sizeof buf) == 0;
    if (describe_failed) st = EIN_ERR_NO_MEMORY;
  }
  ein_grad_destroy(g);
  return st;
}

static ein_status run(ein_ctx *ctx, const scenario *sc, float *out,
                      int64_t *out_n) {
  DLTensor t[3];
  const DLTensor *ins[3];
  for (int i = 0; i < sc->ninputs; i++) {
    t[i] = (DLTensor){.data = inputs[i],
                      .device = {kDLCPU, 0},
                      .ndim = sc->ndims[i],
                      .dtype = {kDLFloat, 32, 1},
                      .shape = (int64_t *)sc->shapes[i]};
    ins[i] = &t[i];
  }
  if (sc->what == BIND) {
    ein_binding *b = NULL;
    const int64_t *sh[3] = {sc->shapes[0], sc->shapes[1], sc->shapes[2]};
    ein_status st = ein_bind_shapes(ctx, sc->expr, sh, sc->ndims,
                                    sc->ninputs, &sc->opt, &b);
    *out_n = 0;
    ein_binding_destroy(b);
    return st;
  }
  if (sc->what == PLAN || sc->what == DESCRIBE) {
    ein_plan *p = NULL;
    ein_status st =
        ein_plan_create(ctx, sc->expr, ins, sc->ninputs, NULL, &sc->opt, &p);
    *out_n = 0;
    if (!st && sc->what == DESCRIBE) {
      char buf[8192];
      /* Describing allocates too; a failure there reads as an empty
       * report, which the caller must be able to tell from success. */
      size_t len = ein_plan_describe(p, EIN_DESCRIBE_JSON, NULL, buf,
                                     sizeof buf);
      describe_failed = len == 0;
      if (len == 0) st = EIN_ERR_NO_MEMORY;
    }
    ein_plan_destroy(p);
    return st;
  }
  if (sc->what == GRAD) return run_grad(ctx, sc, ins, out, out_n);
  if (sc->what == JVP) return run_jvp(ctx, sc, ins, out, out_n);
  int64_t shape[EIN_MAX_DIMS];
  int ndim;
  ein_status st = ein_output_shape(ctx, sc->expr, ins, sc->ninputs, &sc->opt,
                                   shape, &ndim);
  if (st) return st;
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= shape[d];
  DLTensor o = {.data = out,
                .device = {kDLCPU, 0},
                .ndim = ndim,
                .dtype = {kDLFloat, 32, 1},
                .shape = shape};
  *out_n = n;
  return ein_eval(ctx, sc->expr, ins, sc->ninputs, &o, &sc->opt);
}

static const ein_length pool_len[] = {{"h2", 2}, {"w2", 2}};
static const ein_length split_len[] = {{"h", 4}};

static const scenario scenarios[] = {
    {"bind split", "b (h d) -> b h d", 1, {{8, 16}}, {2}, {.lengths = split_len, .nlengths = 1}, BIND},
    /* numpy's implicit output: the once-used letters, sorted (bind_output.c) */
    {"bind implicit output", "ij,jk", 2, {{4, 3}, {3, 5}}, {2, 2}, {.dialect = EIN_DIALECT_NUMPY}, BIND},
    {"plan chain", "i j, j k, k l -> i l", 3, {{40, 8}, {8, 40}, {40, 8}}, {2, 2, 2}, {0}, PLAN},
    {"describe", "b h i d, b h j d -> b h i j", 2, {{2, 2, 16, 8}, {2, 2, 16, 8}}, {4, 4}, {0}, DESCRIBE},
    {"eval gemm", "b i d, b j d -> b i j", 2, {{2, 64, 32}, {2, 64, 32}}, {3, 3}, {0}, EVAL},
    {"eval pool", "b c (h h2) (w w2) -> b c h w", 1, {{2, 3, 8, 8}}, {4},
     {.lengths = pool_len, .nlengths = 2, .reduction = EIN_REDUCE_MEAN}, EVAL},
    {"eval split reduction", "b s d -> d", 1, {{16, 1024, 8}}, {3}, {.reduction = EIN_REDUCE_MAX}, EVAL},
    {"eval three operands", "b i, i j k, b j -> b k", 3, {{8, 6}, {6, 5, 7}, {8, 5}}, {2, 3, 2}, {0}, EVAL},
    {"eval permute", "a b c -> c a b", 1, {{16, 32, 8}}, {3}, {0}, EVAL},
    {"grad chain", "i j, j k, k l -> i l", 3, {{40, 8}, {8, 40}, {40, 8}}, {2, 2, 2}, {0}, GRAD},
    {"grad max split", "b (h d) -> b h", 1, {{8, 16}}, {2}, {.lengths = split_len, .nlengths = 1, .reduction = EIN_REDUCE_MAX}, GRAD},
    {"grad prod diagonal", "i i j -> j", 1, {{5, 5, 3}}, {3}, {.reduction = EIN_REDUCE_PROD}, GRAD},
    {"jvp chain", "i j, j k, k l -> i l", 3, {{40, 8}, {8, 40}, {40, 8}}, {2, 2, 2}, {0}, JVP},
    {"jvp max split", "b (h d) -> b h", 1, {{8, 16}}, {2}, {.lengths = split_len, .nlengths = 1, .reduction = EIN_REDUCE_MAX}, JVP},
    {"jvp prod diagonal", "i i j -> j", 1, {{5, 5, 3}}, {3}, {.reduction = EIN_REDUCE_PROD}, JVP},
};

static float want[1 << 16], got[1 << 16];

/* The last run gave got[0..n_got), bit for bit the clean run's want[0..n). */
static bool same_result(int64_t n_got, int64_t n) {
  bool same = n_got == n;
  for (int64_t i = 0; same && i < n; i++) same = got[i] == want[i];
  return same;
}

static void check_scenario(const scenario *sc) {
  ein_ctx *ctx;
  int64_t n = 0, n2 = 0;
  if (ein_ctx_create(&ctx) != EIN_OK) abort();
  ein_status st = run(ctx, sc, want, &n);
  CHECK(st == EIN_OK, "%s: clean run failed: %s", sc->name,
        ein_last_error(ctx)->message);
  ein_ctx_destroy(ctx);
  int points = 0, absorbed = 0;
  for (long k = 0; k < MAX_POINTS; k++) {
    if (ein_ctx_create(&ctx) != EIN_OK) abort();
    ein_alloc_fail_after(k);
    describe_failed = false;
    st = run(ctx, sc, got, &n2);
    bool fired = !ein_alloc_fail_pending();
    ein_alloc_fail_after(-1);
    if (!fired) { /* every allocation of the call has been failed once */
      ein_ctx_destroy(ctx);
      break;
    }
    if (st == EIN_OK) { /* absorbed: a fallback path (split reductions) */
      CHECK(same_result(n2, n), "%s: allocation %ld absorbed, but a wrong "
            "result",
            sc->name, k);
      absorbed++;
      ein_ctx_destroy(ctx);
      continue;
    }
    points++;
    CHECK(st == EIN_ERR_NO_MEMORY, "%s: allocation %ld failed: status %s",
          sc->name, k, ein_status_name(st));
    CHECK(describe_failed || ein_last_error(ctx)->message[0] != '\0',
          "%s: allocation %ld: no message", sc->name, k);
    /* The same context still works and gets the right answer. */
    st = run(ctx, sc, got, &n2);
    CHECK(st == EIN_OK, "%s: after allocation %ld failed, the next call "
          "failed: %s", sc->name, k, ein_last_error(ctx)->message);
    CHECK(same_result(n2, n), "%s: after allocation %ld failed, a wrong result",
          sc->name, k);
    ein_ctx_destroy(ctx);
  }
  printf("%-22s %d allocation points failed in turn, %d absorbed by a "
         "fallback\n", sc->name, points, absorbed);
  CHECK(points > 0, "%s: no allocation was made", sc->name);
}

int main(void) {
  fill_inputs();
  /* Creating a context is itself an allocation. */
  ein_ctx *ctx = (ein_ctx *)1;
  ein_alloc_fail_after(0);
  ein_status st = ein_ctx_create(&ctx);
  ein_alloc_fail_after(-1);
  CHECK(st == EIN_ERR_NO_MEMORY && ctx == NULL, "ein_ctx_create: %s",
        ein_status_name(st));
  for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++)
    check_scenario(&scenarios[i]);
  return test_summary("alloc_fail");
}
