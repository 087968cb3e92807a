/*
 * host_overhead.c - einc's own host time per call (issue 5's 2 us target).
 *
 * The case is torch's anchor for host overhead: `b i, i j -> b j` with
 * 4x64 and 64x64 f32, the plan cached. On the host it times, per call:
 *   eval     ein_eval (key, cache lookup, checks, run)
 *   execute  ein_plan_execute on a plan made once
 *   blas     the one cblas_sgemm the plan makes, called directly
 * and reports einc's own work as eval - blas and execute - blas. Where a
 * GPU exists it also times ein_eval on device tensors: each call queues
 * work without waiting, so calls/second is the host's rate (a sync every
 * 1000 calls keeps the queue bounded).
 *
 * usage: host_overhead [CALLS]   (default 200000)
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cuda_backend.h"
#include "ein.h"
#ifdef EIN_HAVE_CBLAS
#include <cblas.h>
#endif

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static const char *expr = "b i, i j -> b j";
static int64_t sa[2] = {4, 64}, sb[2] = {64, 64}, sc[2] = {4, 64};

static DLTensor tensor(void *data, int64_t *shape, DLDevice dev) {
  DLTensor t = {0};
  t.data = data;
  t.device = dev;
  t.ndim = 2;
  t.shape = shape;
  t.dtype = (DLDataType){kDLFloat, 32, 1};
  return t;
}

/* Best of 5 rounds of `calls` calls; us per call. */
#define TIME_PER_CALL(calls, body)                                             \
  ({                                                                           \
    double best_ = 1e300;                                                      \
    for (int round_ = 0; round_ < 5; round_++) {                               \
      double t0_ = now_us();                                                   \
      for (long c_ = 0; c_ < (calls); c_++) { body; }                          \
      double per_ = (now_us() - t0_) / (double)(calls);                        \
      if (per_ < best_) best_ = per_;                                          \
    }                                                                          \
    best_;                                                                     \
  })

int main(int argc, char **argv) {
  long calls = argc > 1 ? atol(argv[1]) : 200000;
  if (calls < 1) calls = 1;
  static float a[4 * 64], b[64 * 64], c[4 * 64];
  for (int i = 0; i < 4 * 64; i++) a[i] = (float)((i * 37) % 17) / 8 - 1;
  for (int i = 0; i < 64 * 64; i++) b[i] = (float)((i * 53) % 29) / 14 - 1;
  DLDevice cpu = {kDLCPU, 0};
  DLTensor ta = tensor(a, sa, cpu), tb = tensor(b, sb, cpu),
           tc = tensor(c, sc, cpu);
  const DLTensor *ins[2] = {&ta, &tb};
  ein_ctx *ctx;
  if (ein_ctx_create(&ctx) != EIN_OK) return 1;
  ein_plan *plan;
  if (ein_plan_create(ctx, expr, ins, 2, NULL, NULL, &plan) != EIN_OK ||
      ein_eval(ctx, expr, ins, 2, &tc, NULL) != EIN_OK) {
    fprintf(stderr, "host_overhead: %s\n", ein_last_error(ctx)->message);
    return 1;
  }
  int failures = 0;
  double eval = TIME_PER_CALL(calls, failures += ein_eval(ctx, expr, ins, 2,
                                                          &tc, NULL) != 0);
  double exec = TIME_PER_CALL(
      calls, failures += ein_plan_execute(ctx, plan, ins, 2, &tc) != 0);
  double blas = 0;
#ifdef EIN_HAVE_CBLAS
  blas = TIME_PER_CALL(calls, cblas_sgemm(CblasRowMajor, CblasNoTrans,
                                          CblasNoTrans, 4, 64, 64, 1.0f, a,
                                          64, b, 64, 0.0f, c, 64));
#endif
  printf("case            %s  4x64 64x64 f32, cached plan, best of 5 x %ld "
         "calls\n",
         expr, calls);
  printf("cpu ein_eval    %.3f us/call  (einc's own: %.3f us)\n", eval,
         eval - blas);
  printf("cpu execute     %.3f us/call  (einc's own: %.3f us)\n", exec,
         exec - blas);
  printf("cpu sgemm       %.3f us/call  (the BLAS call alone)\n", blas);

  if (ein_cuda_device_count() > 0) {
    void *da = NULL, *db = NULL, *dc = NULL;
    ein_error_rec err;
    ein_error_init(&err);
    if (ein_cuda_malloc(0, &da, sizeof a, &err) ||
        ein_cuda_malloc(0, &db, sizeof b, &err) ||
        ein_cuda_malloc(0, &dc, sizeof c, &err) ||
        ein_cuda_copy_to_device(da, a, sizeof a, &err) ||
        ein_cuda_copy_to_device(db, b, sizeof b, &err)) {
      fprintf(stderr, "host_overhead: %s\n", err.message);
      return 1;
    }
    DLDevice gpu = {kDLCUDA, 0};
    DLTensor ga = tensor(da, sa, gpu), gb = tensor(db, sb, gpu),
             gc = tensor(dc, sc, gpu);
    const DLTensor *gins[2] = {&ga, &gb};
    if (ein_eval(ctx, expr, gins, 2, &gc, NULL) != EIN_OK) {
      fprintf(stderr, "host_overhead: %s\n", ein_last_error(ctx)->message);
      return 1;
    }
    failures += ein_ctx_synchronize(ctx) != EIN_OK;
    double gpu_eval = TIME_PER_CALL(calls, {
      failures += ein_eval(ctx, expr, gins, 2, &gc, NULL) != 0;
      if (c_ % 1000 == 999) failures += ein_ctx_synchronize(ctx) != EIN_OK;
    });
    failures += ein_ctx_synchronize(ctx) != EIN_OK;
    printf("cuda ein_eval   %.3f us/call  (host time; one kernel launch "
           "per call)\n",
           gpu_eval);
    ein_cuda_free(da), ein_cuda_free(db), ein_cuda_free(dc);
    ein_error_clear(&err);
  }
  ein_plan_destroy(plan);
  ein_ctx_destroy(ctx);
  if (failures) fprintf(stderr, "host_overhead: %d calls failed\n", failures);
  return failures != 0;
}
