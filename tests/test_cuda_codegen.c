/*
 * test_cuda_codegen.c - every kind of kernel the CUDA code generator
 * emits, for a spread of expressions, shapes, strides and dtypes, planned
 * for the CUDA backend through the public API and compiled with NVRTC for
 * sm_80 and sm_90. Needs the CUDA toolkit, not a GPU (CI has none).
 * Also checks the cuBLAS mapping of typical GEMM steps and that NVRTC
 * failures come back as errors carrying the compile log.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "codegen.h"
#include "ctx_internal.h"
#include "cuda_program.h"
#include "ein.h"
#include "harness.h"
#include "nvrtc_compile.h"
#include "plan.h"

static int kinds_seen[EIN_KERNEL_KINDS], vec_seen, wide_seen, compiled,
    fallback_seen, half_map_seen, half_transpose_seen, runs_seen;

static void compile_both(const ein_kernel_src *k, const char *what) {
  static const int archs[2] = {80, 90};
  for (int a = 0; a < 2; a++) {
    ein_error_rec err;
    ein_error_init(&err);
    char *cubin = NULL;
    size_t size = 0;
    ein_status st =
        ein_nvrtc_compile(k->source, k->len, archs[a], &cubin, &size, &err);
    CHECK(st == EIN_OK && size > 0, "%s (%s) for sm_%d: %s\n%s", what,
          ein_kernel_kind_name(k->kind), archs[a], err.message, k->source);
    compiled += st == EIN_OK;
    free(cubin);
    ein_error_clear(&err);
  }
}

/* Plans expr on CUDA tensors of the given shapes (strides: "c" compact,
 * "f" reversed, i.e. Fortran order) and compiles every kernel. */
static void cover(ein_ctx *ctx, const char *expr, const char *shapes,
                  const char *opts, ein_dtype dt, char order) {
  case_input in;
  parse_case_shapes(shapes, &in);
  parse_case_opts(opts, &in);
  DLTensor t[TEST_MAX_OPERANDS];
  const DLTensor *p[TEST_MAX_OPERANDS];
  int64_t strides[TEST_MAX_OPERANDS][EIN_MAX_DIMS];
  for (int i = 0; i < in.n; i++) {
    memset(&t[i], 0, sizeof t[i]);
    t[i].device = (DLDevice){kDLCUDA, 0};
    t[i].ndim = in.ndims[i];
    t[i].shape = in.dims[i];
    t[i].dtype = ein_dtype_to_dl(dt);
    if (order == 'f') {
      int64_t s = 1;
      for (int d = 0; d < in.ndims[i]; d++) {
        strides[i][d] = s;
        s *= in.dims[i][d] ? in.dims[i][d] : 1;
      }
      t[i].strides = strides[i];
    }
    p[i] = &t[i];
  }
  in.options.backend = EIN_BACKEND_CUDA;
  ein_plan *plan;
  char what[300];
  snprintf(what, sizeof what, "'%s' %s %s %c", expr, shapes, ein_dtype_name(dt),
           order);
  ein_status st = ein_plan_create(ctx, expr, p, in.n, NULL, &in.options, &plan);
  CHECK(st == EIN_OK, "plan %s: %s", what, ein_last_error(ctx)->message);
  if (st)
    return;
  const ein_plan_ir *ir = ein_plan_ir_of(plan);
  const ein_cuda_program *prog = ein_plan_cuda_program(plan);
  CHECK(prog && prog->nsteps == ir->nsteps, "%s: no CUDA program", what);
  for (int i = 0; prog && i < prog->nsteps; i++) {
    const ein_cuda_step *cs = &prog->steps[i];
    if (cs->cublas) {
      /* also compile the direct-contraction form cuBLAS would replace */
      ein_loop_axis axes[TEST_MAX_AXES + 3];
      ein_step loop;
      ein_gemm_as_loop(&ir->steps[i], &loop, axes);
      ein_step_kernels k;
      CHECK(ein_codegen_step(&loop, &k) == EIN_OK, "%s: gemm as loop", what);
      if (k.main.source)
        compile_both(&k.main, what);
      if (k.finish.source)
        compile_both(&k.finish, what);
      fallback_seen++;
      ein_step_kernels_free(&k);
      continue;
    }
    const ein_kernel_src *ks[2] = {&cs->kernel, &cs->finish};
    for (int j = 0; j < 2; j++) {
      const ein_kernel_src *k = ks[j];
      if (j == 1 && k->kind == EIN_KERNEL_NONE)
        continue;
      kinds_seen[k->kind]++;
      if (!k->source)
        continue;
      vec_seen += k->has_vec;
      half_map_seen += strstr(k->source, "ein_map_half_vec<") != NULL;
      half_transpose_seen +=
          strstr(k->source, "ein_transpose_half<") != NULL;
      runs_seen += strstr(k->source, "ein_transpose_runs<") != NULL;
      wide_seen += strstr(k->source, "long long t_") != NULL;
      compile_both(k, what);
    }
  }
  ein_plan_destroy(plan);
}

static const ein_dtype ALL[] = {EIN_DT_F16, EIN_DT_BF16, EIN_DT_F32, EIN_DT_F64,
                                EIN_DT_I8,  EIN_DT_I16,  EIN_DT_I32, EIN_DT_I64,
                                EIN_DT_U8,  EIN_DT_U16,  EIN_DT_U32, EIN_DT_U64,
                                EIN_DT_BOOL};
static const ein_dtype FLOATS[] = {EIN_DT_F16, EIN_DT_BF16, EIN_DT_F32,
                                   EIN_DT_F64};

static void test_kernels(ein_ctx *ctx) {
  for (size_t d = 0; d < sizeof ALL / sizeof ALL[0]; d++) {
    ein_dtype dt = ALL[d];
    cover(ctx, "a b -> b a", "64x48", NULL, dt, 'c');
    cover(ctx, "b h s d -> b (h r) s d", "2x3x5x32", "r=4", dt, 'c');
    cover(ctx, "b i i -> b i", "3x7x7", NULL, dt, 'c');
    cover(ctx, "b c h w -> b h w c", "2x32x8x8", NULL, dt, 'f');
    if (dt == EIN_DT_BOOL) {
      cover(ctx, "b s d -> b s", "4x6x40", "reduce=any", dt, 'c');
      cover(ctx, "b s d -> d", "4x6x40", "reduce=all", dt, 'c');
      continue;
    }
    cover(ctx, "b s d -> b s", "4x6x40", "reduce=max", dt, 'c');
    cover(ctx, "b s d -> d", "4x6x40", "reduce=min", dt, 'c');
    cover(ctx, "b s d -> b s", "4x6x40", "reduce=prod", dt, 'f');
    cover(ctx, "i j, j k -> i k", "5x6 6x7", NULL, dt, 'c');
    cover(ctx, "b i, b j -> b i j", "3x5 3x9", NULL, dt, 'c');
    /* split reductions (outer and inner layout), 2-byte vector variants */
    cover(ctx, "b s d -> d", "4x300x16", "reduce=max", dt, 'c');
    cover(ctx, "a b ->", "300x200", "reduce=sum", dt, 'c');
    cover(ctx, "b i, b j -> b i j", "3x5 3x16", NULL, dt, 'c');
    cover(ctx, "b c h w -> b h w c", "2x32x8x8", NULL, dt, 'c');
    /* odd pitch: 2-byte types move aligned runs (ein_transpose_runs) */
    cover(ctx, "a b -> b a", "1023x1025", NULL, dt, 'c');
  }
  for (size_t d = 0; d < sizeof FLOATS / sizeof FLOATS[0]; d++) {
    ein_dtype dt = FLOATS[d];
    cover(ctx, "b s d -> b s", "4x4x8192", "reduce=mean", dt, 'c');
    cover(ctx, "b c (h h2) (w w2) -> b c h w", "2x3x8x8",
          "reduce=mean,h2=2,w2=2", dt, 'c');
    cover(ctx, "a b -> a", "4x0", "reduce=mean", dt, 'c');
    cover(ctx, "b h i d, b h j d -> b h i j", "2x4x128x64 2x4x128x64", NULL, dt,
          'c');
    cover(ctx, "b h i j, b h j d -> b i (h d)", "2x4x128x128 2x4x128x64", NULL,
          dt, 'f');
    cover(ctx, "e a, f b, a b c d, g c, h d -> e f g h",
          "8x8 8x8 8x8x8x8 8x8 8x8", NULL, dt, 'c');
  }
  /* c64 and c128: the preludes' ein_c64/ein_c128 in every kernel form
   * they reach (sums, means and products; max and min are refused) */
  static const ein_dtype COMPLEX[] = {EIN_DT_C64, EIN_DT_C128};
  for (size_t d = 0; d < 2; d++) {
    ein_dtype dt = COMPLEX[d];
    cover(ctx, "a b -> b a", "64x48", NULL, dt, 'c');
    cover(ctx, "b i i -> b i", "3x7x7", NULL, dt, 'c');
    cover(ctx, "b c h w -> b h w c", "2x32x8x8", NULL, dt, 'c');
    cover(ctx, "b s d -> b s", "4x6x40", "reduce=prod", dt, 'f');
    cover(ctx, "b s d -> b s", "4x4x8192", "reduce=mean", dt, 'c');
    cover(ctx, "b s d -> d", "4x300x16", "reduce=sum", dt, 'c');
    cover(ctx, "a b ->", "300x200", "reduce=sum", dt, 'c');
    cover(ctx, "a b -> a", "4x0", "reduce=mean", dt, 'c');
    cover(ctx, "b i, b j -> b i j", "3x5 3x9", NULL, dt, 'c');
    cover(ctx, "i j, j k -> i k", "5x6 6x7", NULL, dt, 'c');
    cover(ctx, "b h i d, b h j d -> b h i j", "2x4x128x64 2x4x128x64", NULL,
          dt, 'c');
  }
  cover(ctx, "a b -> a", "4x0", "reduce=sum", EIN_DT_I32, 'c');
  /* 64-bit indexing: more than 2^30 elements (planned, never allocated) */
  cover(ctx, "a b -> b a", "40000x40000", NULL, EIN_DT_F16, 'c');
  cover(ctx, "a b -> b a", "40001x40001", NULL, EIN_DT_BF16, 'c');
  cover(ctx, "a b -> a", "40000x40000", "reduce=sum", EIN_DT_F32, 'c');

  CHECK(kinds_seen[EIN_KERNEL_FILL] > 0, "no fill kernel");
  CHECK(kinds_seen[EIN_KERNEL_MAP] > 0, "no map kernel");
  CHECK(kinds_seen[EIN_KERNEL_TRANSPOSE] > 0, "no transpose kernel");
  CHECK(kinds_seen[EIN_KERNEL_REDUCE_INNER] > 0, "no reduce_inner kernel");
  CHECK(kinds_seen[EIN_KERNEL_REDUCE_OUTER] > 0, "no reduce_outer kernel");
  CHECK(kinds_seen[EIN_KERNEL_REDUCE_THREAD] > 0, "no reduce_thread kernel");
  CHECK(kinds_seen[EIN_KERNEL_REDUCE_SPLIT] > 0, "no reduce_split kernel");
  CHECK(kinds_seen[EIN_KERNEL_REDUCE_FINISH] ==
            kinds_seen[EIN_KERNEL_REDUCE_SPLIT],
        "a reduce_split without its reduce_finish");
  CHECK(vec_seen > 0, "no 16-byte copy variant");
  CHECK(half_map_seen > 0, "no 2-byte map variant");
  CHECK(half_transpose_seen > 0, "no 2-byte transpose variant");
  CHECK(runs_seen > 0, "no odd-pitch 2-byte transpose (runs)");
  CHECK(wide_seen > 0, "no 64-bit indexed kernel");
  CHECK(fallback_seen > 0, "no cuBLAS step (and its fallback) planned");
  printf(
      "compiled %d kernels (sm_80 and sm_90): fill %d, map %d, transpose "
      "%d, reduce_inner %d, reduce_outer %d, reduce_thread %d, "
      "reduce_split %d, reduce_finish %d; vector variants %d (2-byte map "
      "%d, 2-byte transpose %d), 64-bit %d, GEMM fallbacks %d\n",
      compiled, kinds_seen[EIN_KERNEL_FILL], kinds_seen[EIN_KERNEL_MAP],
      kinds_seen[EIN_KERNEL_TRANSPOSE], kinds_seen[EIN_KERNEL_REDUCE_INNER],
      kinds_seen[EIN_KERNEL_REDUCE_OUTER], kinds_seen[EIN_KERNEL_REDUCE_THREAD],
      kinds_seen[EIN_KERNEL_REDUCE_SPLIT], kinds_seen[EIN_KERNEL_REDUCE_FINISH],
      vec_seen, half_map_seen, half_transpose_seen, wide_seen, fallback_seen);
}

/* cuBLAS mapping of the attention GEMM: scores = Q K^T per (b, h). */
static void test_cublas_map(ein_ctx *ctx) {
  case_input in;
  parse_case_shapes("8x16x256x64 8x16x128x64", &in);
  parse_case_opts(NULL, &in);
  DLTensor t[2];
  const DLTensor *p[2];
  for (int i = 0; i < 2; i++) {
    memset(&t[i], 0, sizeof t[i]);
    t[i].device = (DLDevice){kDLCUDA, 0};
    t[i].ndim = 4;
    t[i].shape = in.dims[i];
    t[i].dtype = ein_dtype_to_dl(EIN_DT_BF16);
    p[i] = &t[i];
  }
  ein_options o = {.backend = EIN_BACKEND_CUDA};
  ein_plan *plan;
  ein_status st = ein_plan_create(ctx, "b h i d, b h j d -> b h i j", p, 2,
                                  NULL, &o, &plan);
  CHECK(st == EIN_OK, "attention plan: %s", ein_last_error(ctx)->message);
  if (st)
    return;
  const ein_cuda_program *prog = ein_plan_cuda_program(plan);
  CHECK(prog->nsteps == 1 && prog->steps[0].cublas,
        "attention: one cuBLAS call");
  const ein_cublas_gemm *g = &prog->steps[0].gemm;
  /* column-major: C^T[j,i] = K[j,d] Q^T[d,i]: A = K transposed, B = Q */
  CHECK(!g->a_is_step_a && g->trans_a && !g->trans_b, "attention ops");
  CHECK(g->ab_dtype == EIN_DT_BF16 && g->c_dtype == EIN_DT_BF16 &&
            g->compute == EIN_GEMM_COMPUTE_32F,
        "attention types: bf16,bf16->bf16 compute 32F");
  CHECK(g->m == 128 && g->n == 256 && g->k == 64,
        "attention m n k %lld %lld %lld", (long long)g->m, (long long)g->n,
        (long long)g->k);
  CHECK(g->lda == 64 && g->ldb == 64 && g->ldc == 128, "attention lds");
  CHECK(g->count == 128 && g->loops.n == 0, "attention batch %lld",
        (long long)g->count);
  CHECK(g->stride_a == 128 * 64 && g->stride_b == 256 * 64 &&
            g->stride_c == 256 * 128,
        "attention batch strides");
  ein_plan_destroy(plan);
}

static void test_nvrtc_errors(void) {
  ein_error_rec err;
  ein_error_init(&err);
  const char *bad = "extern \"C\" __global__ void ein_main() { nonsense; }";
  char *cubin;
  size_t size;
  ein_status st = ein_nvrtc_compile(bad, strlen(bad), 90, &cubin, &size, &err);
  CHECK(st == EIN_ERR_BACKEND, "bad source: %d", st);
  CHECK(strstr(err.message, "nvrtcCompileProgram") &&
            strstr(err.message, "nonsense"),
        "message names the call and carries the log: %s", err.message);
  ein_nvrtc_fault_inject(1);
  const char *good = "extern \"C\" __global__ void ein_main() {}";
  st = ein_nvrtc_compile(good, strlen(good), 90, &cubin, &size, &err);
  CHECK(st == EIN_ERR_BACKEND && strstr(err.message, "injected"),
        "fault injection: %s", err.message);
  ein_nvrtc_fault_inject(0);
  st = ein_nvrtc_compile(good, strlen(good), 90, &cubin, &size, &err);
  CHECK(st == EIN_OK, "after the fault: %s", err.message);
  if (!st)
    free(cubin);
  ein_error_clear(&err);
  CHECK(ein_nvrtc_version() >= 12000, "NVRTC version %d", ein_nvrtc_version());
}

/* The steps src/api/fp8_eval.c runs on a device, as it builds them: fp8
 * x a broadcast f32 scale -> compact f32 (both fp8 types, strided), and
 * f32 -> bf16/f16 into a padded output. Each must load fp8 through the
 * prelude's ein_e4m3f/ein_e5m2f and compile. */
static void test_fp8_kernels(void) {
  ein_loop_axis dec[2] = {{-1, 33, {7, 1, 0}}, {-1, 7, {1, 33, 0}}};
  ein_loop_axis rnd[2] = {{-1, 33, {8, 7, 0}}, {-1, 7, {1, 1, 0}}};
  const ein_dtype src[2] = {EIN_DT_F8E4M3, EIN_DT_F8E5M2};
  const ein_dtype dst[2] = {EIN_DT_BF16, EIN_DT_F16};
  for (int i = 0; i < 4; i++) {
    bool decode = i < 2;
    ein_step s = {.kind = EIN_STEP_LOOP, .role = EIN_ROLE_CONVERT,
                  .nsrc = decode ? 2 : 1, .alpha = 1, .naxes = 2,
                  .axes = decode ? dec : rnd, .acc_dtype = EIN_DT_F32};
    s.dst_dtype = decode ? EIN_DT_F32 : dst[i - 2];
    s.src_dtype[0] = decode ? src[i] : EIN_DT_F32;
    s.src_dtype[1] = EIN_DT_F32;
    ein_step_kernels k;
    REQUIRE_OK(ein_codegen_step(&s, &k));
    const char *load = i == 0 ? "ein_e4m3f(" : i == 1 ? "ein_e5m2f(" : "";
    CHECK(strstr(k.main.source, load) != NULL, "fp8 kernel %d loads with "
          "%s:\n%s", i, load, k.main.source);
    compile_both(&k.main, decode ? "fp8 decode" : "fp8 path rounding");
    ein_step_kernels_free(&k);
  }
}

int main(void) {
  ein_ctx *ctx;
  REQUIRE_OK(ein_ctx_create(&ctx));
  test_nvrtc_errors();
  test_fp8_kernels();
  test_cublas_map(ctx);
  test_kernels(ctx);
  ein_ctx_destroy(ctx);
  return test_summary("cuda_codegen");
}
