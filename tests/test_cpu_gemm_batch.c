/*
 * test_cpu_gemm_batch.c - GEMM steps whose batch of calls is split over
 * threads of the CPU backend's own (runtime/cpu/cpu_threads.h,
 * ein_cpu_gemm_batch_threads): calls too small for OpenBLAS's threads,
 * enough of them to be worth a split. Each case is planned first and the
 * test checks that a GEMM step of it is split (so a change of thresholds
 * cannot leave the path untested), then evaluates it with 1, 2 and 3
 * backend threads (3: slices of uneven length) against the direct sum in
 * double of tests/reference.h, with compact inputs and with views (every
 * axis but the last padded, the start offset). Tolerances: f64 1e-12, f32
 * 1e-5 of the reference's norm; c64 and c128 likewise (not for the ring,
 * whose direct sum is long).
 */
#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "cpu_threads.h"
#include "ctx_internal.h"
#include "dtype.h"
#include "ein.h"
#include "harness.h"
#include "operand.h"
#include "plan.h"
#include "reference.h"

typedef struct bcase {
  const char *name, *expr, *shapes;
  bool real_only; /* its direct sum is long: f32 and f64 only */
} bcase;

static const bcase cases[] = {
    /* tn_ring3's first step: 144 calls of 32^3, A and B transposed */
    {"tn_ring3", "a i b, b j c, c k a -> i j k", "32x12x32 32x12x32 32x12x32",
     true},
    /* an odd batch of 37x41x43 calls */
    {"bmm", "b i k, b k j -> b i j", "71x37x43 71x43x41", false},
    /* B read transposed, C written with the batch axis inside */
    {"bmm_t", "b i k, b j k -> i b j", "71x31x70 71x29x70", false},
};

/* x laid out by operand_layout, filled with values in [-1, 1) by
 * position. */
static void make_operand(operand *x, ein_dtype dt, int nd, const int64_t *sh,
                         bool padded, int salt) {
  int64_t st = operand_layout(x, dt, nd, sh, padded);
  bool cplx = ein_dtype_is_complex(dt);
  for (int64_t e = 0; e < st; e++) {
    double re = (double)((e * 7919 + 13 + salt) % 2001) / 1000.0 - 1.0;
    double im = (double)((e * 104729 + 7 * salt) % 1999) / 1000.0 - 1.0;
    if (cplx)
      ref_store_complex(dt, x->t.data, e, CMPLX(re, im));
    else
      ref_store(dt, x->t.data, e, re);
  }
}

/* Does the plan of these inputs have a GEMM step whose batch is split
 * over 3 threads? */
static bool plan_splits(ein_ctx *ctx, const bcase *c, const DLTensor **ins,
                        int n) {
  ein_plan *plan = NULL;
  if (ein_plan_create(ctx, c->expr, ins, n, NULL, NULL, &plan)) return false;
  const ein_plan_ir *ir = ein_plan_ir_of(plan);
  bool split = false;
  for (int i = 0; i < ir->nsteps; i++)
    split |= ir->steps[i].kind == EIN_STEP_GEMM &&
             ein_cpu_gemm_batch_threads(&ir->steps[i].gemm, 3) == 3;
  ein_plan_destroy(plan);
  return split;
}

/* The reference of c on these inputs: nout values (complex doubles for a
 * complex dtype), from the direct sum; the output's shape in oshape. */
static void *reference(ein_ctx *ctx, const bcase *c, const case_input *in,
                       const DLTensor **ins, ein_dtype dt, int *ond,
                       int64_t *oshape, int64_t *nout) {
  const int64_t *shp[TEST_MAX_OPERANDS];
  for (int i = 0; i < in->n; i++) shp[i] = in->dims[i];
  ein_binding *b;
  REQUIRE_OK(ein_bind_shapes(ctx, c->expr, shp, in->ndims, in->n, NULL, &b));
  const ein_problem *p = ein_binding_problem(b);
  *nout = 1;
  *ond = ein_binding_output_ndim(b);
  for (int d = 0; d < *ond; d++) {
    oshape[d] = ein_binding_output_shape(b)[d];
    *nout *= oshape[d];
  }
  void *want = malloc(sizeof(double complex) * (size_t)*nout);
  if (ein_dtype_is_complex(dt))
    ref_eval_complex(p, ins, want, *nout);
  else
    ref_eval(p, ins, want, *nout);
  ein_binding_destroy(b);
  return want;
}

/* |got - want| and |want| over every element, as 2-norms. */
static double rel_error(ein_dtype dt, const void *got, const void *want,
                        int64_t n) {
  double err = 0, norm = 0;
  for (int64_t o = 0; o < n; o++) {
    double complex g, w;
    if (ein_dtype_is_complex(dt)) {
      g = ref_load_complex(dt, got, o);
      w = ((const double complex *)want)[o];
    } else {
      g = ref_load(dt, got, o);
      w = ((const double *)want)[o];
    }
    double e = cabs(g - w);
    err += isnan(e) ? INFINITY : e * e;
    norm += cabs(w) * cabs(w);
  }
  return sqrt(err) / (sqrt(norm) + 1e-300);
}

/* Evaluates c with `threads` backend threads (a context of its own: the
 * CPU backend reads EINC_NUM_THREADS when it opens) and compares. */
static void eval_threads(const bcase *c, const DLTensor **ins, int n,
                         ein_dtype dt, const char *layout, int ond,
                         int64_t *oshape, int64_t nout, const void *want,
                         int threads) {
  char nt[8];
  snprintf(nt, sizeof nt, "%d", threads);
  setenv("EINC_NUM_THREADS", nt, 1);
  ein_ctx *ctx;
  REQUIRE_OK(ein_ctx_create(&ctx));
  CHECK(plan_splits(ctx, c, ins, n), "%s (%s): no GEMM step split",
        c->name, ein_dtype_name(dt));
  size_t esz = ein_dtype_size(dt);
  char *out = malloc((size_t)nout * esz);
  memset(out, 0xff, (size_t)nout * esz); /* NaN where nothing is written */
  DLTensor ot = {.data = out, .ndim = ond, .shape = oshape,
                 .dtype = ein_dtype_to_dl(dt), .device = {kDLCPU, 0}};
  ein_status st = ein_eval(ctx, c->expr, ins, n, &ot, NULL);
  CHECK(st == EIN_OK, "%s (%s): %s", c->name, ein_dtype_name(dt),
        ein_last_error(ctx)->message);
  double tol = dt == EIN_DT_F64 || dt == EIN_DT_C128 ? 1e-12 : 1e-5;
  double err = st ? INFINITY : rel_error(dt, out, want, nout);
  CHECK(err <= tol, "%s (%s, %s, %d threads): relative error %.3g",
        c->name, ein_dtype_name(dt), layout, threads, err);
  free(out);
  ein_ctx_destroy(ctx);
}

static int max_threads = 3; /* EIN_GEMM_THREADS */

/* Case c in dt, inputs compact or views: the reference once, then 1, 2
 * and 3 threads (3: slices of uneven length). */
static void run_case(const bcase *c, ein_dtype dt, bool padded) {
  case_input in;
  parse_case_shapes(c->shapes, &in);
  operand x[TEST_MAX_OPERANDS];
  const DLTensor *ins[TEST_MAX_OPERANDS];
  for (int k = 0; k < in.n; k++) {
    make_operand(&x[k], dt, in.ndims[k], in.dims[k], padded, k);
    ins[k] = &x[k].t;
  }
  ein_ctx *ctx;
  REQUIRE_OK(ein_ctx_create(&ctx));
  int64_t nout, oshape[8];
  int ond;
  void *want = reference(ctx, c, &in, ins, dt, &ond, oshape, &nout);
  ein_ctx_destroy(ctx);
  for (int threads = 1; threads <= max_threads; threads++)
    eval_threads(c, ins, in.n, dt, padded ? "views" : "compact", ond, oshape,
                 nout, want, threads);
  free(want);
  for (int k = 0; k < in.n; k++) free(x[k].buf);
}

int main(void) {
  /* EIN_GEMM_THREADS: the most threads each case runs on (default 3; the
   * sanitizer builds take 2, where each run is slow) */
  const char *env = getenv("EIN_GEMM_THREADS");
  max_threads = env && atoi(env) > 0 ? atoi(env) : 3;
  static const ein_dtype dts[] = {EIN_DT_F32, EIN_DT_F64, EIN_DT_C64,
                                  EIN_DT_C128};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    for (size_t d = 0; d < (cases[i].real_only ? 2 : sizeof dts / sizeof dts[0]);
         d++)
      for (int padded = 0; padded < 2; padded++)
        run_case(&cases[i], dts[d], padded);
  return test_summary("cpu_gemm_batch");
}
