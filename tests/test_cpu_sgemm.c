/*
 * test_cpu_sgemm.c - f32 and f64 GEMM steps on the CPU (issue 35 item 2):
 * f32 GEMM calls over 4 x 65536 multiply-adds run on oneDNN's sgemm
 * where the CPU has AVX-512F and libdnnl.so.2 loads
 * (runtime/cpu/cpu_dnnl.c); smaller ones, matrix-vector products and f64
 * run on OpenBLAS. Each contraction is compared with a direct sum in
 * double (reference.h, seeded inputs) at 1e-5 (f32) and 1e-12 (f64) of
 * the reference's norm.
 *
 * The cases are the layouts a GEMM step meets: plain, A, B or C
 * transposed, a batch, a broadcast operand, a batch of small GEMMs (split
 * over the backend's own threads, one oneDNN thread each), a chain, odd
 * sizes, a long K, compact and with padded rows. Meson runs this
 * program twice: as the machine is, and with EINC_SGEMM=openblas. Where
 * the oneDNN path is expected (AVX-512F, the library, no EINC_SGEMM or
 * EINC_DNNL=0) it must be taken and must have run (its call counter) for
 * the large cases, and not for the small ones; under EINC_SGEMM=openblas
 * never. A child forked after oneDNN ran
 * on the OpenMP team runs f32 GEMMs too (no hang).
 */
#include <cpuid.h>
#include <dlfcn.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cpu_dnnl.h"
#include "child.h"
#include "harness.h"
#include "operand.h"
#include "reference.h"

typedef struct gcase {
  const char *expr;
  int n;
  int nd[3];
  int64_t dims[3][4];
  bool big; /* GEMM calls over 4 x 65536 multiply-adds (oneDNN's share) */
} gcase;

static const gcase cases[] = {
    {"i j, j k -> i k", 2, {2, 2}, {{64, 96}, {96, 80}}, true},
    {"j i, j k -> i k", 2, {2, 2}, {{96, 64}, {96, 80}}, true},
    {"i j, k j -> i k", 2, {2, 2}, {{64, 96}, {80, 96}}, true},
    {"i j, j k -> k i", 2, {2, 2}, {{64, 96}, {96, 80}}, true},
    {"b i j, b j k -> b i k", 2, {3, 3}, {{3, 64, 96}, {3, 96, 80}}, true},
    {"i j, b j k -> b i k", 2, {2, 3}, {{40, 48}, {3, 48, 56}}, false},
    {"b i j, b j k -> b i k", 2, {3, 3}, {{512, 24, 24}, {512, 24, 24}},
     false},
    {"i j, j k, k l -> i l", 3, {2, 2, 2}, {{48, 64}, {64, 80}, {80, 32}},
     false},
    {"i j, j k -> i k", 2, {2, 2}, {{73, 41}, {41, 57}}, false},
    {"i j, j k -> i k", 2, {2, 2}, {{32, 4096}, {4096, 32}}, true},
    {"i j, j k -> i k", 2, {2, 2}, {{300, 200}, {200, 260}}, true},
};
enum { NCASES = sizeof cases / sizeof *cases };

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static double uniform(void) { /* in [-1, 1) */
  rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
  return (double)((rng * 0x2545F4914F6CDD1Dull) >> 11) * 0x1p-52 - 1;
}

/* Fills x's buffer from its view's first element on. */
static void fill(operand *x, ein_dtype dt, int64_t count) {
  for (int64_t e = 0; e < count; e++) ref_store(dt, x->t.data, e, uniform());
}

static double rel_error(ein_dtype dt, const void *got, const double *want,
                        int64_t n) {
  double err = 0, norm = 0;
  for (int64_t e = 0; e < n; e++) {
    double d = ref_load(dt, got, e) - want[e];
    err += d * d;
    norm += want[e] * want[e];
  }
  return norm > 0 ? sqrt(err / norm) : sqrt(err);
}

/* Runs case c in dt against the reference; returns the oneDNN sgemm calls
 * the evaluation made. */
static long run_case(ein_ctx *ctx, const gcase *c, ein_dtype dt,
                     bool padded) {
  operand x[3];
  const DLTensor *ins[3];
  const int64_t *shp[3];
  for (int i = 0; i < c->n; i++) {
    fill(&x[i], dt, operand_layout(&x[i], dt, c->nd[i], c->dims[i], padded));
    ins[i] = &x[i].t;
    shp[i] = c->dims[i];
  }
  ein_options o = {.reduction = EIN_REDUCE_SUM};
  ein_binding *b;
  REQUIRE_OK(ein_bind_shapes(ctx, c->expr, shp, c->nd, c->n, &o, &b));
  int ond = ein_binding_output_ndim(b);
  const int64_t *osh = ein_binding_output_shape(b);
  int64_t on = 1;
  for (int d = 0; d < ond; d++) on *= osh[d];
  double *want = malloc((size_t)on * sizeof *want);
  void *got = calloc((size_t)on, ein_dtype_size(dt));
  DLTensor out = {got, {kDLCPU, 0}, ond, ein_dtype_to_dl(dt),
                  (int64_t *)osh, NULL, 0};
  CHECK(ref_eval(ein_binding_problem(b), ins, want, on) == 0, "reference");
  long before = ein_cpu_dnnl_sgemm_calls();
  CHECK(ein_eval(ctx, c->expr, ins, c->n, &out, &o) == EIN_OK, "%s %s: %s",
        c->expr, ein_dtype_name(dt), ein_last_error(ctx)->message);
  long ran = ein_cpu_dnnl_sgemm_calls() - before;
  double rel = rel_error(dt, got, want, on);
  double tol = dt == EIN_DT_F64 ? 1e-12 : 1e-5;
  CHECK(rel <= tol, "%s %s%s: relative error %.3g (bound %g)", c->expr,
        ein_dtype_name(dt), padded ? " padded" : "", rel, tol);
  ein_binding_destroy(b);
  free(want);
  free(got);
  for (int i = 0; i < c->n; i++) free(x[i].buf);
  return ran;
}

static bool cpu_has_avx512f(void) {
  unsigned a, b, c, d;
  return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b >> 16 & 1);
}

/* Whether this process should take oneDNN for f32 GEMMs: a silent fall
 * back to OpenBLAS would pass every numeric check. */
static bool expect_onednn(void) {
  const char *dnnl = getenv("EINC_DNNL"), *pick = getenv("EINC_SGEMM");
  if ((dnnl && strcmp(dnnl, "0") == 0) ||
      (pick && strcmp(pick, "openblas") == 0))
    return false;
  void *h = dlopen(dnnl && *dnnl ? dnnl : "libdnnl.so.2",
                   RTLD_NOW | RTLD_LOCAL);
  bool expect = h && (cpu_has_avx512f() ||
                      (pick && strcmp(pick, "onednn") == 0));
#if defined(__SANITIZE_ADDRESS__)
  expect = expect && dnnl; /* cpu_dnnl.c: only where EINC_DNNL names it */
#endif
#ifndef _OPENMP
  expect = false; /* cpu_dnnl.c: oneDNN's team could not be sized */
#endif
  if (h) dlclose(h);
  return expect;
}

static void all_cases(ein_ctx *ctx, bool onednn) {
  for (int i = 0; i < NCASES; i++)
    for (int padded = 0; padded < 2; padded++) {
      long ran = run_case(ctx, &cases[i], EIN_DT_F32, padded);
      bool want = onednn && cases[i].big;
      CHECK(want ? ran > 0 : ran == 0, "%s f32: %ld oneDNN sgemm calls "
            "(expected the %s path)", cases[i].expr, ran,
            want ? "oneDNN" : "OpenBLAS");
      CHECK(run_case(ctx, &cases[i], EIN_DT_F64, padded) == 0,
            "%s f64: oneDNN has no f64 GEMM", cases[i].expr);
    }
}

/* A child forked after the parent ran oneDNN's sgemm on its OpenMP team
 * runs f32 GEMMs too (on one thread: cpu_backend.c's fork rule), within
 * 60 s and right. */
static void forked_child(ein_ctx *ctx) {
  pid_t pid = fork();
  if (pid == 0) {
    int before = test_failed;
    run_case(ctx, &cases[4], EIN_DT_F32, false);
    run_case(ctx, &cases[10], EIN_DT_F32, true);
    _exit(test_failed != before);
  }
  CHECK(pid > 0, "fork");
  bool hung;
  CHECK(child_exits_ok(pid, 60, &hung), "a forked child's %s (%s)",
        "f32 GEMMs", hung ? "hung" : "failed");
}

int main(void) {
  ein_ctx *ctx;
  REQUIRE_OK(ein_ctx_create(&ctx));
  bool onednn = expect_onednn();
  printf("f32 GEMMs: %s\n", onednn ? "oneDNN sgemm" : "OpenBLAS");
  CHECK(ein_cpu_dnnl_f32_gemm() == onednn, "f32 GEMM path: oneDNN %s, "
        "expected %s", ein_cpu_dnnl_f32_gemm() ? "taken" : "not taken",
        onednn ? "taken" : "not");
  all_cases(ctx, onednn);
  forked_child(ctx);
  ein_ctx_destroy(ctx);
  return test_summary("cpu_sgemm");
}
