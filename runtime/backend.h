/*
 * backend.h - the interface every backend implements (CPU, CUDA).
 *
 * Takes: a plan (plan.h), what the backend compiled of it, and the data
 * pointers of its inputs and output (already offset by
 * DLTensor.byte_offset).
 * Gives: the output written; on failure an error on err and an output whose
 * contents are unspecified (the caller's buffer; nothing else is touched).
 */
#ifndef EIN_BACKEND_H
#define EIN_BACKEND_H

#include "error.h"
#include "plan.h"

typedef struct ein_backend ein_backend;

struct ein_backend {
  const char *name;         /* "cpu", "cuda" */
  ein_backend_caps caps;    /* what the planner may ask of it */
  /* Runs every step of plan. inputs[i] is operand i's first element.
   * `program` is what the backend's compiler made of the plan when it was
   * created (the CUDA program, cuda_program.h), or NULL (CPU). */
  ein_status (*run)(ein_backend *self, const ein_plan_ir *plan,
                    const void *program, char *const *inputs, char *output,
                    ein_error_rec *err);
  void (*destroy)(ein_backend *self);
};

/* The first byte of plan buffer `buf` given the run's pointers. */
static inline char *ein_buffer_base(const ein_plan_ir *plan, int buf,
                                    char *const *inputs, char *output,
                                    char *workspace) {
  const ein_plan_buffer *b = &plan->buffers[buf];
  switch (b->kind) {
  case EIN_BUF_INPUT: return inputs[b->input];
  case EIN_BUF_OUTPUT: return output;
  case EIN_BUF_TEMP: return workspace + b->offset;
  }
  return NULL;
}

/* The CPU backend (BLAS for GEMMs, C loops otherwise). NULL when out of
 * memory. */
ein_backend *ein_cpu_backend_create(void);

#endif
