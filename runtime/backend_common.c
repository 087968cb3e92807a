/*
 * backend_common.c - what the backends share (backend.h): a single-device
 * backend's making, the host's free memory, running a plan's steps one by
 * one with marks, and the FP8 GEMM's device check. Below every backend;
 * the table that names them is backends.c.
 */
#include "backend.h"

#include <stdio.h>
#include <unistd.h>

#include "alloc.h"

int ein_backend_one_device(void) { return 1; }

void *ein_backend_new_single(int device, size_t size, const char *not_one,
                             const char *oom, ein_error_rec *err) {
  if (device != 0) {
    ein_fail_device(err, not_one, device);
    return NULL;
  }
  void *b = ein_calloc(1, size);
  if (!b) ein_fail_memory(err, "%s", oom);
  return b;
}

/* MemAvailable from /proc/meminfo, in bytes; -1 where it cannot be read. */
static int64_t meminfo_available(void) {
  FILE *f = fopen("/proc/meminfo", "r");
  if (!f) return -1;
  char line[128];
  long long kib = -1;
  while (kib < 0 && fgets(line, sizeof line, f))
    if (sscanf(line, "MemAvailable: %lld kB", &kib) != 1) kib = -1;
  fclose(f);
  return kib < 0 ? -1 : (int64_t)kib * 1024;
}

ein_status ein_backend_temp_alloc(ein_backend *be, size_t bytes, void **ptr,
                                  ein_error_rec *err) {
  return (be->temp_alloc ? be->temp_alloc : be->alloc)(be, bytes, ptr, err);
}

void ein_backend_temp_free(ein_backend *be, void *ptr) {
  if (ptr) (be->temp_free ? be->temp_free : be->free)(be, ptr);
}

ein_status ein_host_free_memory(ein_backend *self, int64_t *bytes,
                                ein_error_rec *err) {
  (void)self;
  int64_t avail = meminfo_available();
  if (avail < 0) { /* no /proc: the free pages, a lower bound */
    long pages = sysconf(_SC_AVPHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    if (pages > 0 && size > 0) avail = (int64_t)pages * size;
  }
  if (avail < 0)
    return ein_fail(err, EIN_ERR_DEVICE,
                    "the host's free memory cannot be read (no "
                    "/proc/meminfo, no sysconf); give memory_limit in bytes");
  *bytes = avail;
  return EIN_OK;
}

ein_status ein_run_steps(const ein_plan_ir *plan, char *const *inputs,
                         char *output, char *workspace,
                         const ein_step_marks *marks, ein_step_fn run,
                         void *ctx, ein_error_rec *err) {
  for (int i = 0; i < plan->nsteps; i++) {
    const ein_step *s = &plan->steps[i];
    ein_step_mark(marks, i);
    const char *src[2];
    char *dst = ein_step_operands(plan, s, inputs, output, workspace, src);
    ein_status st = run(ctx, i, s, dst, src, err);
    if (st) return st;
  }
  ein_step_mark(marks, plan->nsteps);
  return EIN_OK;
}

ein_status ein_fp8_gemm_sm_check(int sm, ein_error_rec *err) {
  if (sm >= EIN_FP8_GEMM_MIN_SM) return EIN_OK;
  return ein_fail_device(err,
                         "an FP8 GEMM (cublasLtMatmul with fp8 A and B) needs "
                         "compute capability 8.9 or later (sm_%d: Ada, "
                         "Hopper, Blackwell); this device is sm_%d",
                         (int)EIN_FP8_GEMM_MIN_SM, sm);
}
