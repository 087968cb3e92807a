/*
 * test_cpu_half.c - half-precision GEMMs on the CPU (issue 35): bf16 and
 * f16 contractions whose GEMM steps run through oneDNN where the CPU has
 * the units and the library loads (runtime/cpu/cpu_dnnl.c), else through
 * f32, each compared with a direct sum in double (reference.h) at bf16's
 * bound, 2e-2 of the reference's norm.
 *
 * The cases are a table of the layouts a GEMM step meets: plain, transposed
 * A, B or C, a batch, a broadcast operand, two batch axes that do not
 * merge, a chain (a half intermediate), a matrix-vector product, a
 * vector-matrix one, a batch of them (a LOOP: the planner's rule), a long K
 * (accumulation in f32), operands with padded rows; and one step run
 * directly, with a scale (alpha) and C in f32. Meson runs this program
 * twice: as the machine is, and with EINC_DNNL=0 (the f32 path), so both
 * paths are checked where the machine has both. Where the oneDNN path is
 * taken it must have run (its call counter and the plan's "cpu gemm" line);
 * where the CPU has AVX512-BF16 and libdnnl.so.2 loads it must be taken. A
 * child forked after oneDNN ran on the OpenMP team runs half GEMMs too (no
 * hang).
 */
#include <cpuid.h>
#include <dlfcn.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_dnnl.h"
#include "child.h"
#include "harness.h"
#include "operand.h"
#include "reference.h"

typedef struct hcase {
  const char *expr;
  int n;
  int nd[3];
  int64_t dims[3][5];
  ein_reduction red;
  bool loop; /* no GEMM step on either path (a batch of half GEMVs) */
  bool brg;  /* compact, one thread: brgemm where the 64^3 probe got it */
} hcase;

static const hcase cases[] = {
    {"i j, j k -> i k", 2, {2, 2}, {{64, 96}, {96, 80}}, EIN_REDUCE_SUM, false, false},
    {"j i, j k -> i k", 2, {2, 2}, {{96, 64}, {96, 80}}, EIN_REDUCE_SUM, false, false},
    {"i j, k j -> i k", 2, {2, 2}, {{64, 96}, {80, 96}}, EIN_REDUCE_SUM, false, false},
    {"i j, j k -> k i", 2, {2, 2}, {{64, 96}, {96, 80}}, EIN_REDUCE_SUM, false, false},
    {"b i j, b j k -> b i k", 2, {3, 3}, {{3, 40, 48}, {3, 48, 56}},
     EIN_REDUCE_SUM, false, false},
    {"i j, b j k -> b i k", 2, {2, 3}, {{40, 48}, {3, 48, 56}},
     EIN_REDUCE_SUM, false, false},
    {"a i b j, a b j k -> a b i k", 2, {4, 4},
     {{2, 24, 3, 32}, {2, 3, 32, 40}}, EIN_REDUCE_SUM, false, false},
    {"i j, j k, k l -> i l", 3, {2, 2, 2}, {{48, 64}, {64, 80}, {80, 32}},
     EIN_REDUCE_SUM, false, false},
    {"i j, j -> i", 2, {2, 1}, {{128, 256}, {256}}, EIN_REDUCE_SUM, false, false},
    {"i, i j -> j", 2, {1, 2}, {{256}, {256, 128}}, EIN_REDUCE_SUM, false, false},
    {"b i j, b i -> b j", 2, {3, 2}, {{8, 64, 48}, {8, 64}}, EIN_REDUCE_SUM,
     true, false},
    {"i j, j k -> i k", 2, {2, 2}, {{32, 4096}, {4096, 32}}, EIN_REDUCE_SUM,
     false, false},
    /* attention's merge: two batch axes, C's heads between its rows and
     * columns (oneDNN takes both axes, reordered by C's strides) */
    {"b h i j, b h j d -> b i h d", 2, {4, 4},
     {{2, 3, 40, 48}, {2, 3, 48, 24}}, EIN_REDUCE_SUM, false, false},
    {"b h i j, b h j d -> h b i d", 2, {4, 4},
     {{2, 3, 40, 48}, {2, 3, 48, 24}}, EIN_REDUCE_SUM, false, false},
    {"b h i j, h j d -> b i h d", 2, {4, 3}, {{2, 3, 40, 48}, {3, 48, 24}},
     EIN_REDUCE_SUM, false, true},
    /* layouts brgemm takes only with a batch axis looped (A's and C's
     * batch axes in different stride orders) or a size-1 axis first (C's
     * one batch axis inside its rows): cpu_dnnl.c's choose_split */
    {"b h i j, b h j d -> h b i d", 2, {4, 4},
     {{2, 3, 32, 48}, {2, 3, 48, 32}}, EIN_REDUCE_SUM, false, true},
    {"b h i d, b h j d -> h b i j", 2, {4, 4},
     {{3, 2, 32, 48}, {3, 2, 64, 48}}, EIN_REDUCE_SUM, false, true},
    {"b g r i d, b g j d -> b r g i j", 2, {5, 4},
     {{2, 2, 3, 32, 48}, {2, 2, 64, 48}}, EIN_REDUCE_SUM, false, true},
    {"e c d, e d f -> c e f", 2, {3, 3}, {{3, 32, 48}, {3, 48, 64}},
     EIN_REDUCE_SUM, false, true},
};
enum { NCASES = sizeof cases / sizeof *cases };

static uint64_t rng = 0x2545F4914F6CDD1Dull;

static double uniform(void) { /* in [-1, 1) */
  rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
  return (double)((rng * 0x2545F4914F6CDD1Dull) >> 11) * 0x1p-52 - 1;
}

/* Lays x out compact, or padded: every row (and each matrix) one element
 * longer than its data, the view 3 elements into the buffer, so a GEMM
 * reads it with leading dimensions that are not its sizes. */
static void layout(operand *x, ein_dtype dt, int nd, const int64_t *sh,
                   bool padded) {
  int64_t st = 1;
  for (int d = nd - 1; d >= 0; d--) {
    x->shape[d] = sh[d];
    x->strides[d] = st;
    st = st * sh[d] + (padded ? 1 : 0);
  }
  int64_t off = padded ? 3 : 0;
  size_t esz = ein_dtype_size(dt);
  x->buf = calloc((size_t)(st + off), esz);
  x->t = (DLTensor){.data = x->buf + off * (int64_t)esz, .ndim = nd,
                    .shape = x->shape, .strides = x->strides,
                    .dtype = ein_dtype_to_dl(dt), .device = {kDLCPU, 0}};
}

/* Fills x's view with random values. */
static void fill(operand *x, ein_dtype dt) {
  int64_t count = 1;
  for (int d = 0; d < x->t.ndim; d++) count *= x->shape[d];
  int64_t idx[5] = {0};
  for (int64_t e = 0; e < count; e++) {
    int64_t off = 0;
    for (int d = 0; d < x->t.ndim; d++) off += idx[d] * x->strides[d];
    ref_store(dt, x->t.data, off, uniform());
    for (int d = x->t.ndim - 1; d >= 0; d--) {
      if (++idx[d] < x->shape[d]) break;
      idx[d] = 0;
    }
  }
}

/* ||got - want|| / ||want|| over the compact output. */
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

/* Does the plan's text report name oneDNN (the CPU backend's "cpu gemm"
 * line), and `impl` if not NULL? */
static bool plan_says_onednn(ein_ctx *ctx, const hcase *c,
                             const DLTensor *const *ins,
                             const ein_options *o, const char *impl) {
  ein_plan *plan = NULL;
  if (ein_plan_create(ctx, c->expr, ins, c->n, NULL, o, &plan) != EIN_OK)
    return false;
  char text[8192];
  (void)ein_plan_describe(plan, EIN_DESCRIBE_TEXT, NULL, text, sizeof text);
  ein_plan_destroy(plan);
  return strstr(text, "cpu gemm     step") && strstr(text, "oneDNN") &&
         (!impl || strstr(text, impl));
}

static void run_case(ein_ctx *ctx, const hcase *c, ein_dtype dt,
                     bool padded, bool want_brg) {
  operand x[3];
  const DLTensor *ins[3];
  const int64_t *shp[3];
  for (int i = 0; i < c->n; i++) {
    layout(&x[i], dt, c->nd[i], c->dims[i], padded);
    fill(&x[i], dt);
    ins[i] = &x[i].t;
    shp[i] = c->dims[i];
  }
  ein_options o = {.reduction = c->red};
  ein_binding *b;
  REQUIRE_OK(ein_bind_shapes(ctx, c->expr, shp, c->nd, c->n, &o, &b));
  const ein_problem *p = ein_binding_problem(b);
  int ond = ein_binding_output_ndim(b);
  const int64_t *osh = ein_binding_output_shape(b);
  int64_t on = 1;
  for (int d = 0; d < ond; d++) on *= osh[d];
  double *want = malloc((size_t)on * sizeof *want);
  void *got = calloc((size_t)on, 2);
  DLTensor out = {got, {kDLCPU, 0}, ond, ein_dtype_to_dl(dt),
                  (int64_t *)osh, NULL, 0};
  CHECK(ref_eval(p, ins, want, on) == 0, "reference");
  bool native = ein_cpu_dnnl_gemm_dtype(dt);
  long before = ein_cpu_dnnl_calls();
  ein_status est = ein_eval(ctx, c->expr, ins, c->n, &out, &o);
  CHECK(est == EIN_OK, "%s %s%s: %s", c->expr, ein_dtype_name(dt),
        padded ? " padded" : "", ein_last_error(ctx)->message);
  long ran = ein_cpu_dnnl_calls() - before;
  double rel = rel_error(dt, got, want, on);
  CHECK(rel <= 2e-2, "%s %s%s%s: relative error %.3g", c->expr,
        ein_dtype_name(dt), "", padded ? " padded" : "", rel);
  bool gemm = native && !c->loop;
  CHECK(gemm ? ran > 0 : ran == 0, "%s %s: %ld oneDNN calls (path %s)",
        c->expr, ein_dtype_name(dt), ran, native ? "oneDNN" : "f32");
  CHECK(plan_says_onednn(ctx, c, ins, &o, NULL) == gemm, "%s %s: plan report",
        c->expr, ein_dtype_name(dt));
  char why[512];
  ein_cpu_dnnl_why(dt, why, sizeof why);
  if (gemm && want_brg && strstr(why, " brg:"))
    CHECK(plan_says_onednn(ctx, c, ins, &o, "brg:"), "%s %s: not oneDNN's "
          "brgemm (%s)", c->expr, ein_dtype_name(dt), why);
  ein_binding_destroy(b);
  free(want);
  free(got);
  for (int i = 0; i < c->n; i++) free(x[i].buf);
}

/* One bf16 GEMM step run directly (no plan, so its primitive is made
 * for the call): C (f32) = 0.25 A B^T, A 48x40, B 56x40 (B read
 * transposed), against the sum in double. */
static void scaled_step(void) {
  if (!ein_cpu_dnnl_gemm_dtype(EIN_DT_BF16)) return;
  enum { M = 48, N = 56, K = 40 };
  uint16_t a[M * K], b[N * K];
  float c[M * N];
  for (int i = 0; i < M * K; i++) ref_store(EIN_DT_BF16, a, i, uniform());
  for (int i = 0; i < N * K; i++) ref_store(EIN_DT_BF16, b, i, uniform());
  ein_step s = {.kind = EIN_STEP_GEMM, .dst_dtype = EIN_DT_F32,
                .src_dtype = {EIN_DT_BF16, EIN_DT_BF16}, .alpha = 0.25,
                .gemm = {.m = M, .n = N, .k = K, .a_ms = K, .a_ks = 1,
                         .b_ks = 1, .b_ns = K, .c_ms = N, .c_ns = 1}};
  ein_plan_ir ir = {.nsteps = 1, .steps = &s};
  ein_error_rec err;
  ein_error_init(&err);
  REQUIRE_OK(ein_cpu_dnnl_run(&ir, NULL, 0, (char *)c, (const char *)a,
                              (const char *)b, 2, &err));
  ein_error_clear(&err);
  double e = 0, n = 0;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double w = 0;
      for (int k = 0; k < K; k++)
        w += ref_load(EIN_DT_BF16, a, i * K + k) *
             ref_load(EIN_DT_BF16, b, j * K + k);
      w *= 0.25;
      e += (c[i * N + j] - w) * (c[i * N + j] - w);
      n += w * w;
    }
  CHECK(sqrt(e / n) <= 1e-5, "scaled step, C in f32: relative error %.3g",
        sqrt(e / n));
}

/* A child forked after the parent ran oneDNN on its OpenMP team runs a
 * half GEMM too, on one thread (cpu_backend.c's fork rule: libgomp's
 * team does not survive fork, and a child's parallel region would wait
 * for it forever), within 60 s and right. */
static void forked_child(ein_ctx *ctx) {
  pid_t pid = fork();
  if (pid == 0) {
    int before = test_failed;
    run_case(ctx, &cases[0], EIN_DT_BF16, false, false);
    run_case(ctx, &cases[4], EIN_DT_BF16, true, false);
    _exit(test_failed != before);
  }
  CHECK(pid > 0, "fork");
  bool hung;
  CHECK(child_exits_ok(pid, 60, &hung), "a forked child's %s (%s)",
        "half GEMMs", hung ? "hung" : "failed");
}

/* AVX512-BF16 (cpuid leaf 7 subleaf 1, EAX bit 5). */
static bool cpu_has_bf16(void) {
  unsigned a, b, c, d;
  return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a >> 5 & 1);
}

/* Where the machine has what the path needs, the path is taken: a
 * silent fall back to f32 would pass every numeric check. */
static void path_taken(void) {
  char why[512];
  ein_cpu_dnnl_why(EIN_DT_BF16, why, sizeof why);
  printf("bf16 GEMMs: %s\n", why);
  const char *env = getenv("EINC_DNNL");
  void *h = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
  bool expect = cpu_has_bf16() && h && !(env && strcmp(env, "0") == 0);
#if defined(__SANITIZE_ADDRESS__)
  expect = expect && env; /* cpu_dnnl.c: only where EINC_DNNL names it */
#endif
  if (h) dlclose(h);
  if (expect)
    CHECK(ein_cpu_dnnl_gemm_dtype(EIN_DT_BF16), "AVX512-BF16 and oneDNN "
          "here, yet bf16 GEMMs are not taken: %s", why);
  if (env && strcmp(env, "0") == 0)
    CHECK(!ein_cpu_dnnl_gemm_dtype(EIN_DT_BF16) &&
              !ein_cpu_dnnl_gemm_dtype(EIN_DT_F16) && strstr(why, "EINC_DNNL"),
          "EINC_DNNL=0 keeps the f32 path: %s", why);
  CHECK(!ein_cpu_dnnl_gemm_dtype(EIN_DT_F32), "f32 is not a half dtype");
}

/* On one thread cpu_dnnl.c's choose_split loops a batch axis to reach
 * oneDNN's brgemm whatever the size (on more, only for large GEMMs, which
 * this test keeps small): the `brg` cases again there, compact, in a
 * context made after the thread count is set; where the probe got
 * brgemm, their plans must name it. */
static void one_thread_brgemm(void) {
  setenv("EINC_NUM_THREADS", "1", 1);
  ein_ctx *ctx;
  REQUIRE_OK(ein_ctx_create(&ctx));
  for (int i = 0; i < NCASES; i++)
    if (cases[i].brg) run_case(ctx, &cases[i], EIN_DT_BF16, false, true);
  ein_ctx_destroy(ctx);
  unsetenv("EINC_NUM_THREADS");
}

int main(void) {
  ein_ctx *ctx;
  REQUIRE_OK(ein_ctx_create(&ctx));
  path_taken();
  scaled_step();
  const ein_dtype dts[] = {EIN_DT_BF16, EIN_DT_F16};
  for (int d = 0; d < 2; d++)
    for (int i = 0; i < NCASES; i++)
      for (int padded = 0; padded < 2; padded++)
        run_case(ctx, &cases[i], dts[d], padded, false);
  forked_child(ctx);
  ein_ctx_destroy(ctx);
  one_thread_brgemm();
  return test_summary("cpu_half");
}
