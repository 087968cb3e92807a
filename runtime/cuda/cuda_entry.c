/*
 * cuda_entry.c - the CUDA backend's entry in the backend table
 * (backend.h), the same with and without the toolkit: plans and programs
 * are pure C (cuda_program.c), so CUDA plans are made and shown anywhere;
 * device_count and open come from cuda_backend.c or, in builds without
 * CUDA, cuda_none.c.
 *
 * A plan's program is the CUDA program with, beside it, the kernel
 * handles the backends that run it resolve (ein_cuda_plan_program): they
 * live and die with the plan, which every backend running it shares.
 */
#include "alloc.h"
#include "backend.h"
#include "cuda_backend.h"
#include "cuda_program.h"
#include "run_cache.h"

static bool cuda_memory(DLDeviceType t) {
  return t == kDLCUDA || t == kDLCUDAManaged;
}

void ein_cuda_plan_program_free(void *program) {
  ein_cuda_plan_program *p = program;
  if (!p)
    return;
  ein_kernel_sets_destroy(p->kernels);
  ein_cuda_program_free(p->cuda);
  ein_free(p);
}

ein_status ein_cuda_plan_program_new(const ein_plan_ir *plan, size_t size,
                                     const char *oom, void **program,
                                     ein_error_rec *err) {
  *program = NULL;
  ein_cuda_plan_program *p = ein_calloc(1, size);
  if (!p)
    return ein_fail_memory(err, "%s", oom);
  void *cuda;
  ein_status st = ein_cuda_prepare(plan, &cuda, err);
  if (!st) {
    p->cuda = cuda;
    /* Per step: its kernel and its split pass 2, each main and vector. */
    p->kernels = ein_kernel_sets_create(4 * p->cuda->nsteps);
    if (!p->kernels)
      st = ein_fail_memory(err, "%s", oom);
  }
  if (st) {
    ein_cuda_plan_program_free(p);
    return st;
  }
  *program = p;
  return EIN_OK;
}

static ein_status cuda_prepare(const ein_plan_ir *plan, void **program,
                               ein_error_rec *err) {
  return ein_cuda_plan_program_new(plan, sizeof(ein_cuda_plan_program),
                                   "out of memory preparing a CUDA plan",
                                   program, err);
}

static void cuda_describe(const ein_plan_ir *plan, const void *program,
                          ein_strbuf *sb) {
  ein_cuda_describe(plan, ((const ein_cuda_plan_program *)program)->cuda, sb);
}

void ein_cuda_plan_describe_step_json(const ein_plan_ir *plan,
                                      const void *program, int step,
                                      ein_strbuf *sb) {
  ein_cuda_describe_step_json(
      plan, ((const ein_cuda_plan_program *)program)->cuda, step, sb);
}

const ein_cuda_program *ein_cuda_plan_cuda(const void *program) {
  return ((const ein_cuda_plan_program *)program)->cuda;
}

/* A device's backend, made by cuda_backend.c and given its entry here:
 * the entry names the backend's functions, the backend never names the
 * entry, so cuda_backend.c sits below this file. */
static ein_backend *cuda_open(int device, ein_error_rec *err) {
  ein_backend *be = ein_cuda_backend_create(device, err);
  if (be) be->entry = &ein_cuda_entry;
  return be;
}

const ein_backend_entry ein_cuda_entry = {
    .name = "cuda",
    .kind = EIN_BACKEND_CUDA,
    .memory = kDLCUDA,
    .memory_name = "CUDA device memory",
    .accepts = cuda_memory,
    .caps = ein_cuda_caps,
    .prepare = cuda_prepare,
    .program_free = ein_cuda_plan_program_free,
    .describe = cuda_describe,
    .describe_step_json = ein_cuda_plan_describe_step_json,
    .cuda_program = ein_cuda_plan_cuda,
    .device_count = ein_cuda_device_count,
    .open = cuda_open,
};
