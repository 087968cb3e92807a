/*
 * test_cuda_faults.c - faults on the GPU path (docs/reliability.md):
 *   - device out of memory during a plan's temporaries: a clean
 *     EIN_ERR_DEVICE_MEMORY, a smaller problem still runs meanwhile, and the
 *     same call succeeds once memory is back;
 *   - NVRTC failing (fault injection): EIN_ERR_BACKEND with the log, and
 *     the same context computes the right answer afterwards;
 *   - the kernel cache directory unwritable, or holding truncated and
 *     corrupted entries: results stay right (the kernels are compiled
 *     again).
 * Every result is compared with the CPU backend on the same inputs.
 * Exits 77 (skipped) without a GPU.
 */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctx_internal.h"
#include "cuda_backend.h"
#include "harness.h"
#include "nvrtc_compile.h"

typedef struct problem {
  const char *expr;
  int n;
  int ndim[3];
  int64_t shape[3][2];
  int odim;
  int64_t oshape[2];
} problem;

static int64_t numel(int nd, const int64_t *s) {
  int64_t n = 1;
  for (int d = 0; d < nd; d++) n *= s[d];
  return n;
}

/* One problem's tensors on the host and on the device, with the CPU
 * backend's answer. */
typedef struct prepared {
  const problem *p;
  float *host[3], *want, *got;
  void *dev[3], *dout;
  DLTensor din[3], dtout;
  const DLTensor *dp[3];
} prepared;

/* Random inputs, copied to the device, and the CPU answer. */
static void prepare(prepared *r, const problem *p) {
  memset(r, 0, sizeof *r);
  r->p = p;
  ein_ctx *cpu_ctx;
  REQUIRE_OK(ein_ctx_create(&cpu_ctx));
  ein_error_rec err;
  ein_error_init(&err);
  DLTensor hin[3];
  const DLTensor *hp[3];
  for (int i = 0; i < p->n; i++) {
    int64_t n = numel(p->ndim[i], p->shape[i]);
    r->host[i] = malloc((size_t)n * sizeof(float));
    for (int64_t e = 0; e < n; e++)
      r->host[i][e] = (float)(rand() % 2001 - 1000) / 1000.0f;
    ein_cuda_malloc(0, &r->dev[i], (size_t)n * sizeof(float), &err);
    ein_cuda_copy_to_device(r->dev[i], r->host[i], (size_t)n * sizeof(float),
                            &err);
    hin[i] = (DLTensor){.data = r->host[i], .device = {kDLCPU, 0},
                        .ndim = p->ndim[i], .dtype = {kDLFloat, 32, 1},
                        .shape = (int64_t *)p->shape[i]};
    r->din[i] = hin[i];
    r->din[i].data = r->dev[i];
    r->din[i].device = (DLDevice){kDLCUDA, 0};
    hp[i] = &hin[i];
    r->dp[i] = &r->din[i];
  }
  int64_t on = numel(p->odim, p->oshape);
  r->want = malloc((size_t)on * sizeof(float));
  r->got = malloc((size_t)on * sizeof(float));
  ein_cuda_malloc(0, &r->dout, (size_t)on * sizeof(float), &err);
  DLTensor hout = {.data = r->want, .device = {kDLCPU, 0}, .ndim = p->odim,
                   .dtype = {kDLFloat, 32, 1}, .shape = (int64_t *)p->oshape};
  r->dtout = hout;
  r->dtout.data = r->dout;
  r->dtout.device = (DLDevice){kDLCUDA, 0};
  CHECK(ein_eval(cpu_ctx, p->expr, hp, p->n, &hout, NULL) == EIN_OK,
        "%s: CPU reference", p->expr);
  ein_error_clear(&err);
  ein_ctx_destroy(cpu_ctx);
}

/* Evaluates on the GPU; checks the result against the CPU's when the
 * status is EIN_OK, and returns the status. */
static ein_status run(ein_ctx *ctx, prepared *r, const char *what) {
  const problem *p = r->p;
  ein_status st = ein_eval(ctx, p->expr, r->dp, p->n, &r->dtout, NULL);
  if (st == EIN_OK) st = ein_ctx_synchronize(ctx);
  if (st != EIN_OK) return st;
  ein_error_rec err;
  ein_error_init(&err);
  int64_t on = numel(p->odim, p->oshape);
  ein_cuda_copy_to_host(r->got, r->dout, (size_t)on * sizeof(float), &err);
  ein_error_clear(&err);
  double e2 = 0, n2 = 0;
  for (int64_t i = 0; i < on; i++) {
    e2 += ((double)r->got[i] - r->want[i]) * ((double)r->got[i] - r->want[i]);
    n2 += (double)r->want[i] * r->want[i];
  }
  CHECK(sqrt(e2) <= 1e-5 * sqrt(n2), "%s: GPU differs from CPU by %g", what,
        sqrt(e2 / n2));
  return st;
}

static void release(prepared *r) {
  for (int i = 0; i < r->p->n; i++) {
    free(r->host[i]);
    ein_cuda_free(r->dev[i]);
  }
  ein_cuda_free(r->dout);
  free(r->want);
  free(r->got);
}

/* prepare, run, release. */
static ein_status eval_both(ein_ctx *ctx, const problem *p,
                            const char *what) {
  prepared r;
  prepare(&r, p);
  ein_status st = run(ctx, &r, what);
  release(&r);
  return st;
}

/* A chain whose intermediate needs 16 MiB of device workspace. */
static const problem chain = {"i j, j k, k l -> i l", 3, {2, 2, 2},
                              {{2048, 2048}, {2048, 2048}, {2048, 2048}}, 2,
                              {2048, 2048}};
/* A permute: no workspace, one generated kernel. */
static const problem permute = {"a b -> b a", 1, {2}, {{300, 70}}, 2,
                                {70, 300}};

static void device_out_of_memory(void) {
  ein_ctx *ctx;
  REQUIRE_OK(ein_ctx_create(&ctx));
  /* The permute warms the backend up without putting workspace into its
   * memory pool, which would otherwise keep it for the chain. */
  CHECK(eval_both(ctx, &permute, "warm-up") == EIN_OK, "warm-up: %s",
        ein_last_error(ctx)->message);
  prepared big, small;
  prepare(&big, &chain);
  prepare(&small, &permute);
  /* Take all but a few MiB of device memory. */
  static void *hog[8192];
  int nhog = 0;
  for (size_t chunk = (size_t)1 << 30; chunk >= ((size_t)1 << 20);
       chunk /= 2)
    while (nhog < 8192 && cudaMalloc(&hog[nhog], chunk) == cudaSuccess)
      nhog++;
  cudaGetLastError();
  ein_status st = run(ctx, &big, "chain while memory is full");
  CHECK(st == EIN_ERR_DEVICE_MEMORY, "full device: status %d (%s): %s", st,
        ein_status_name(st), ein_last_error(ctx)->message);
  CHECK(strstr(ein_last_error(ctx)->message, "cannot allocate") != NULL,
        "message: %s", ein_last_error(ctx)->message);
  CHECK(run(ctx, &small, "small problem while memory is full") == EIN_OK,
        "small problem on a full device: %s", ein_last_error(ctx)->message);
  for (int i = 0; i < nhog; i++) cudaFree(hog[i]);
  CHECK(run(ctx, &big, "chain after memory came back") == EIN_OK,
        "after memory came back: %s", ein_last_error(ctx)->message);
  release(&big);
  release(&small);
  ein_ctx_destroy(ctx);
}

static void nvrtc_failure(const char *root) {
  char dir[512];
  snprintf(dir, sizeof dir, "%s/nvrtc", root);
  setenv("EINC_CACHE_DIR", dir, 1); /* empty: every kernel is compiled */
  ein_ctx *ctx;
  REQUIRE_OK(ein_ctx_create(&ctx));
  ein_nvrtc_fault_inject(1);
  ein_status st = eval_both(ctx, &permute, "NVRTC failing");
  CHECK(st == EIN_ERR_BACKEND, "NVRTC failing: status %d", st);
  CHECK(strstr(ein_last_error(ctx)->message, "compile log") != NULL,
        "the message carries the log: %s", ein_last_error(ctx)->message);
  ein_nvrtc_fault_inject(0);
  CHECK(eval_both(ctx, &permute, "after NVRTC came back") == EIN_OK,
        "after the fault: %s", ein_last_error(ctx)->message);
  ein_ctx_destroy(ctx);
}

/* Flips a byte in, or truncates, every entry in dir. */
static void damage_entries(const char *dir, bool truncate) {
  char cmd[1024];
  if (truncate)
    snprintf(cmd, sizeof cmd,
             "for f in %s/*; do head -c 100 \"$f\" > \"$f.x\" && mv \"$f.x\" "
             "\"$f\"; done",
             dir);
  else
    snprintf(cmd, sizeof cmd,
             "for f in %s/*; do printf '\\377' | dd of=\"$f\" bs=1 seek=200 "
             "conv=notrunc 2>/dev/null; done",
             dir);
  if (system(cmd) != 0) fprintf(stderr, "could not damage %s\n", dir);
}

static unsigned long long compiles_of(ein_ctx *ctx) {
  ein_backend_stats bs;
  ein_ctx_backend_stats(ctx, EIN_BACKEND_CUDA, 0, &bs);
  return bs.compiles;
}

static void cache_directory_faults(const char *root) {
  char dir[512];
  /* unwritable: a path through a regular file */
  snprintf(dir, sizeof dir, "%s/file", root);
  FILE *f = fopen(dir, "w");
  if (f) fclose(f);
  snprintf(dir, sizeof dir, "%s/file/cache", root);
  setenv("EINC_CACHE_DIR", dir, 1);
  ein_ctx *ctx;
  REQUIRE_OK(ein_ctx_create(&ctx));
  CHECK(eval_both(ctx, &permute, "unwritable cache") == EIN_OK,
        "unwritable cache directory: %s", ein_last_error(ctx)->message);
  ein_ctx_destroy(ctx);
  /* damaged entries: a new context (no memory cache) compiles again */
  for (int truncate = 0; truncate < 2; truncate++) {
    snprintf(dir, sizeof dir, "%s/damaged%d", root, truncate);
    setenv("EINC_CACHE_DIR", dir, 1);
    REQUIRE_OK(ein_ctx_create(&ctx));
    CHECK(eval_both(ctx, &permute, "filling the cache") == EIN_OK, "fill: %s",
          ein_last_error(ctx)->message);
    ein_ctx_destroy(ctx);
    damage_entries(dir, truncate);
    REQUIRE_OK(ein_ctx_create(&ctx));
    CHECK(eval_both(ctx, &permute, "damaged cache") == EIN_OK,
          "%s entries: %s", truncate ? "truncated" : "corrupted",
          ein_last_error(ctx)->message);
    CHECK(compiles_of(ctx) > 0, "%s entries were used instead of compiling",
          truncate ? "truncated" : "corrupted");
    ein_ctx_destroy(ctx);
  }
}

int main(void) {
  if (ein_cuda_device_count() == 0) {
    printf("no GPU: skipped\n");
    return 77;
  }
  char root[] = "/tmp/einc-cuda-faults-XXXXXX";
  if (!mkdtemp(root)) return 1;
  srand(3);
  device_out_of_memory();
  nvrtc_failure(root);
  cache_directory_faults(root);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf %s", root);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", root);
  return test_summary("cuda_faults");
}
