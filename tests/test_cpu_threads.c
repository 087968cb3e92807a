/*
 * test_cpu_threads.c - which plans run their LOOP steps on one thread
 * (ein_cpu_loop_threads, runtime/cpu/cpu_backend.c): those whose GEMMs,
 * threaded by OpenBLAS, take longer than their loops, so that our OpenMP
 * team never spins on the cores OpenBLAS's threads need (and the other way
 * round); where oneDNN's sgemm runs the f32 GEMMs (on the loops' own
 * team) no such rule applies. Plans are the CPU planner's own, for the bench cases where this
 * was measured, and for plans it must leave alone.
 */
#include <stdio.h>
#include <string.h>

#include "cases.h"
#include "ctx_internal.h"
#include "ein.h"
#include "harness.h"
#include "cpu_dnnl.h"
#include "cpu_threads.h"
#include "plan.h"

static const DLDataType F32 = {kDLFloat, 32, 1};

/* The LOOP threads of the CPU plan of expr over shapes, given 2 threads. */
static int loop_threads(ein_ctx *ctx, const char *expr, const char *text,
                        const ein_options *o) {
  case_input in;
  parse_case_shapes(text, &in);
  DLTensor t[TEST_MAX_OPERANDS];
  const DLTensor *p[TEST_MAX_OPERANDS];
  memset(t, 0, sizeof t);
  for (int i = 0; i < in.n; i++) {
    t[i].device = (DLDevice){kDLCPU, 0};
    t[i].ndim = in.ndims[i];
    t[i].shape = in.dims[i];
    t[i].dtype = F32;
    p[i] = &t[i];
  }
  ein_plan *plan = NULL;
  ein_status st = ein_plan_create(ctx, expr, p, in.n, NULL, o, &plan);
  CHECK(st == EIN_OK, "plan '%s': %s", expr, ein_last_error(ctx)->message);
  if (st) return -1;
  int n = ein_cpu_loop_threads(ein_plan_ir_of(plan), 2);
  ein_plan_destroy(plan);
  return n;
}

int main(void) {
  ein_ctx *ctx;
  REQUIRE_OK(ein_ctx_create(&ctx));
  /* A GEMM beside a loop, the GEMM the longer: the loop on one thread,
   * where OpenBLAS's pool runs the GEMM; where oneDNN's sgemm does (on
   * the loops' own OpenMP team: cpu_dnnl.h), both threads. Meson runs
   * this program as the machine is and with EINC_SGEMM=openblas. */
  int beside = ein_cpu_dnnl_f32_gemm() ? 2 : 1;
  printf("f32 GEMMs on %s: loops beside them on %d thread(s)\n",
         beside == 2 ? "oneDNN" : "OpenBLAS", beside);
  CHECK(loop_threads(ctx, "b i, i j k, b j -> b k",
                     "512x64 64x64x64 512x64", NULL) == beside,
        "bilinear: product then GEMM");
  CHECK(loop_threads(ctx, "i j, j k, i k -> i",
                     "1024x1024 1024x1024 1024x1024", NULL) == beside,
        "quadform: GEMM then a row-dot loop");
  ein_length h16 = {"h", 16};
  ein_options qkv = {.lengths = &h16, .nlengths = 1};
  CHECK(loop_threads(ctx, "b s e, e (h d) -> b h s d", "2x512x1024 1024x1024",
                     &qkv) == beside,
        "qkv_split: GEMM then a store");
  /* No GEMM, a GEMM OpenBLAS keeps on one thread, or loops that take
   * longer than the GEMM: the loops keep both threads. */
  CHECK(loop_threads(ctx, "a b c -> c b a", "64x64x64", NULL) == 2,
        "a permute");
  CHECK(loop_threads(ctx, "b i j, b j k -> b i k", "4096x3x3 4096x3x3",
                     NULL) == 2,
        "tiny batched products (a LOOP)");
  CHECK(loop_threads(ctx, "i j, j k, i k -> i", "64x64 64x64 64x64", NULL) ==
            2,
        "quadform at 64^3: OpenBLAS runs that GEMM on one thread");
  CHECK(loop_threads(ctx, "a r b, b c -> a c", "128x512x128 128x128", NULL) ==
            2,
        "a pre-reduction over r that moves more than the GEMM computes");
  ein_ctx_destroy(ctx);
  return test_summary("cpu_threads");
}
