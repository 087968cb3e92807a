/*
 * backends.c - the table of backends (backend.h). Adding a backend is one
 * line here and one entry in its own file; nothing above runtime/ changes.
 */
#include "backend.h"

#include "alloc.h"

static const ein_backend_entry *const table[] = {
    &ein_cpu_entry,
    &ein_cuda_entry,
    &ein_emu_entry,
};

enum { NENTRIES = sizeof table / sizeof table[0] };

const ein_backend_entry *ein_backend_find(ein_backend_kind kind) {
  for (int i = 0; i < NENTRIES; i++)
    if (table[i]->kind == kind) return table[i];
  return NULL;
}

const ein_backend_entry *ein_backend_for_memory(DLDeviceType t) {
  for (int i = 0; i < NENTRIES; i++)
    if (table[i]->accepts(t)) return table[i];
  return NULL;
}

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
