/*
 * test_cpu_contract.c - the CPU's contraction kernels (cpu_contract.h) on
 * the steps that reach them, against a direct sum in double:
 *   - tiny batched matrices: the vector-row form (rows of B and C
 *     contiguous, 2 to 4 long: 3x3 compositions, k unrolled or not) and
 *     the scalar form beside it (n = 5), with one batch axis and with
 *     several that do not fuse (the cursor);
 *   - outer products, the row read from either source, short rows and rows
 *     that are not a multiple of a vector, large enough to be split;
 *   - the transposed dot `i j, j i ->`, sides that are not multiples of
 *     the 8x8 tiles nor of the 64x64 blocks, small and split across threads;
 *   - one long contiguous dot, cut into pieces summed on 2 threads.
 * Each case is planned by the CPU planner; the test checks that its one
 * step is of the kernel's form (the kernel takes it) and runs the kernel
 * itself on 1 and 2 threads, with the portable loops forced and with what
 * the CPU allows (AVX2 on most x86 CPUs). Inputs are compact, or views
 * into a larger buffer (every axis but the last padded, and an offset
 * start), so strides are not those of a compact array.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "cpu_contract.h"
#include "cpu_simd.h"
#include "ctx_internal.h"
#include "dtype.h"
#include "ein.h"
#include "harness.h"
#include "operand.h"
#include "plan.h"
#include "reference.h"

typedef bool (*kernel_fn)(const ein_step *, char *, const char *,
                          const char *, int);

typedef struct kcase {
  const char *name, *expr, *shapes;
  kernel_fn kernel;
} kcase;

static const kcase cases[] = {
    {"comp3x3", "b i j, b j k -> b i k", "37x3x3 37x3x3",
     ein_cpu_tiny_contract},
    {"rows 2, k 4", "b i j, b j k -> b i k", "29x5x4 29x4x2",
     ein_cpu_tiny_contract},
    {"rows 4, k 7", "b i j, b j k -> b i k", "23x2x7 23x7x4",
     ein_cpu_tiny_contract},
    {"two batch axes", "a b i j, a b j k -> a b i k", "3x5x3x3 3x5x3x3",
     ein_cpu_tiny_contract},
    {"rows 5 (scalar)", "b i j, b j k -> b i k", "31x3x2 31x2x5",
     ein_cpu_tiny_contract},
    {"large comp3x3", "b i j, b j k -> b i k", "5000x3x3 5000x3x3",
     ein_cpu_tiny_contract},
    {"outer", "b i, b j -> b i j", "5x33 5x17", ein_cpu_outer},
    {"outer, row in src0", "b j, b i -> b i j", "4x19 4x7", ein_cpu_outer},
    {"outer, split", "b i, b j -> b i j", "8x100 8x91", ein_cpu_outer},
    {"trace 8x9", "i j, j i ->", "8x9 9x8", ein_cpu_trace_dot},
    {"trace 203x150", "i j, j i ->", "203x150 150x203", ein_cpu_trace_dot},
    {"trace 300x261", "i j, j i ->", "300x261 261x300", ein_cpu_trace_dot},
    {"long dot (split on 2 threads)", "i, i ->", "100003 100003",
     ein_cpu_tiny_contract},
};

/* x laid out by operand_layout, filled with values in [-1, 1) by
 * position. */
static void make_operand(operand *x, ein_dtype dt, int nd, const int64_t *sh,
                         bool padded) {
  int64_t st = operand_layout(x, dt, nd, sh, padded);
  for (int64_t e = 0; e < st; e++) {
    double v = (double)((e * 7919 + 13) % 2001) / 1000.0 - 1.0;
    ref_store(dt, x->t.data, e, v);
  }
}

/* The labels of a two-input expression of one-letter axes, by operand. */
typedef struct labels {
  char in[2][8], out[8];
  int nin[2], nout;
} labels;

static void parse_labels(const char *expr, labels *l) {
  memset(l, 0, sizeof *l);
  int part = 0;
  for (const char *p = expr; *p; p++) {
    if (*p == ',') part = 1;
    else if (*p == '>') part = 2;
    else if (*p >= 'a' && *p <= 'z') {
      if (part < 2) l->in[part][l->nin[part]++] = *p;
      else l->out[l->nout++] = *p;
    }
  }
}

/* The direct sum in double, and the sum of |terms| per output element. */
static void reference(const labels *l, const operand x[2], ein_dtype dt,
                      double *want, double *mag, int64_t nout) {
  int64_t size[26] = {0};
  for (int k = 0; k < 2; k++)
    for (int d = 0; d < l->nin[k]; d++) size[l->in[k][d] - 'a'] = x[k].shape[d];
  memset(want, 0, (size_t)nout * sizeof *want);
  memset(mag, 0, (size_t)nout * sizeof *mag);
  int axes[26], na = 0;
  for (int a = 0; a < 26; a++)
    if (size[a]) axes[na++] = a;
  int64_t idx[26] = {0};
  for (;;) {
    double v = 1;
    for (int k = 0; k < 2; k++) {
      int64_t off = 0;
      for (int d = 0; d < l->nin[k]; d++)
        off += idx[l->in[k][d] - 'a'] * x[k].strides[d];
      v *= ref_load(dt, x[k].t.data, off);
    }
    int64_t o = 0;
    for (int d = 0; d < l->nout; d++)
      o = o * size[l->out[d] - 'a'] + idx[l->out[d] - 'a'];
    want[o] += v, mag[o] += fabs(v);
    int k = na - 1;
    for (; k >= 0 && ++idx[axes[k]] == size[axes[k]]; k--) idx[axes[k]] = 0;
    if (k < 0) break;
  }
}

/* Runs the kernel of c on its plan's step and compares the result. */
static void run_kernel(const kcase *c, const ein_step *s, const operand x[2],
                       ein_dtype dt, const double *want, const double *mag,
                       int64_t nout, int threads) {
  size_t esz = ein_dtype_size(dt);
  char *out = malloc((size_t)nout * esz);
  memset(out, 0xff, (size_t)nout * esz); /* NaN where nothing is written */
  bool took = c->kernel(s, out, x[0].t.data, x[1].t.data, threads);
  CHECK(took, "%s (%s): the kernel did not take the step", c->name,
        ein_dtype_name(dt));
  double tol = dt == EIN_DT_F64 ? 1e-12 : 1e-5;
  int64_t bad = 0;
  for (int64_t o = 0; took && o < nout; o++) {
    double got = ref_load(dt, out, o);
    if (!(fabs(got - want[o]) <= tol * (mag[o] + 1e-30))) bad++;
  }
  CHECK(bad == 0, "%s (%s, %d threads, %s): %lld of %lld values wrong",
        c->name, ein_dtype_name(dt), threads,
        ein_cpu_avx2() ? "simd" : "portable", (long long)bad,
        (long long)nout);
  free(out);
}

static void run_case(ein_ctx *ctx, const kcase *c, ein_dtype dt,
                     bool padded) {
  case_input in;
  parse_case_shapes(c->shapes, &in);
  operand x[2];
  for (int k = 0; k < 2; k++)
    make_operand(&x[k], dt, in.ndims[k], in.dims[k], padded);
  const DLTensor *ins[2] = {&x[0].t, &x[1].t};
  ein_plan *plan = NULL;
  ein_status st = ein_plan_create(ctx, c->expr, ins, 2, NULL, NULL, &plan);
  CHECK(st == EIN_OK, "plan %s: %s", c->name, ein_last_error(ctx)->message);
  const ein_plan_ir *ir = st ? NULL : ein_plan_ir_of(plan);
  CHECK(!ir || ir->nsteps == 1, "%s: %d steps, not one", c->name,
        ir ? ir->nsteps : 0);
  if (ir && ir->nsteps == 1) {
    labels l;
    parse_labels(c->expr, &l);
    int64_t nout = 1;
    for (int d = 0; d < ir->out_ndim; d++) nout *= ir->out_shape[d];
    double *want = malloc((size_t)nout * sizeof *want);
    double *mag = malloc((size_t)nout * sizeof *mag);
    reference(&l, x, dt, want, mag, nout);
    for (int portable = 1; portable >= 0; portable--) {
      ein_cpu_simd_force_portable(portable);
      for (int threads = 1; threads <= 2; threads++)
        run_kernel(c, &ir->steps[0], x, dt, want, mag, nout, threads);
    }
    ein_cpu_simd_force_portable(false);
    free(want), free(mag);
  }
  ein_plan_destroy(plan);
  for (int k = 0; k < 2; k++) free(x[k].buf);
}

int main(void) {
  ein_ctx *ctx;
  REQUIRE_OK(ein_ctx_create(&ctx));
  static const ein_dtype dts[] = {EIN_DT_F32, EIN_DT_F64};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    for (int d = 0; d < 2; d++)
      for (int padded = 0; padded <= 1; padded++)
        run_case(ctx, &cases[i], dts[d], padded);
  ein_ctx_destroy(ctx);
  return test_summary("cpu_contract");
}
