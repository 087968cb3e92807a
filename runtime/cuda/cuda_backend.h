/*
 * cuda_backend.h - the CUDA backend and the few device-memory helpers the
 * CLI and the tests need. With -Dcuda=disabled (or no toolkit) the same
 * functions exist and report that CUDA is not available, so callers never
 * need #ifdefs.
 *
 * Takes: plans (plan.h) with their programs (ein_cuda_plan_program below,
 * around cuda_program.h's), and device pointers. Gives: outputs written asynchronously on the backend's
 * stream: a stream the backend creates (blocking, so it orders with the
 * legacy default stream) unless the caller sets its own.
 */
#ifndef EIN_CUDA_BACKEND_H
#define EIN_CUDA_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

#include "backend.h"
#include "error.h"

/* The CUDA entry's program for a plan (cuda_entry.c): the plan's CUDA
 * program, and the kernel handles each backend that ran it resolved
 * (run_cache.h), so a later run looks nothing up. */
typedef struct ein_cuda_plan_program {
  struct ein_cuda_program *cuda;
  struct ein_kernel_sets *kernels; /* 4 handles per step (cuda_backend.c) */
} ein_cuda_plan_program;

/* The entry's program functions (cuda_entry.c), shared with the emulated
 * device, which runs the same program: its own program is `size` bytes
 * with an ein_cuda_plan_program first. ..._new fails with the message
 * `oom` (a literal) when memory runs out; ..._free frees the head's parts
 * and the whole block (the caller first releases what it added). */
ein_status ein_cuda_plan_program_new(const struct ein_plan_ir *plan,
                                     size_t size, const char *oom,
                                     void **program, ein_error_rec *err);
void ein_cuda_plan_program_free(void *program);
void ein_cuda_plan_describe_step_json(const struct ein_plan_ir *plan,
                                      const void *program, int step,
                                      ein_strbuf *sb);
const struct ein_cuda_program *ein_cuda_plan_cuda(const void *program);

/* True when this build has the CUDA backend. */
bool ein_cuda_built(void);

/* Devices the runtime sees: 0 without a driver, a GPU, the CUDA runtime
 * library, or CUDA support in this build. */
int ein_cuda_device_count(void);

/* The name of device `device` ("NVIDIA H100 80GB HBM3"); false when it
 * cannot be read (no runtime library, driver or such device). */
bool ein_cuda_device_name(int device, char *buf, size_t cap);

/* A backend for device `device`. On failure NULL and the reason on err
 * (EIN_ERR_DEVICE: no driver or device, or the CUDA runtime library cannot
 * be loaded, named with how to install it; EIN_ERR_BACKEND: a CUDA call
 * failed; EIN_ERR_NO_MEMORY). cuBLAS and NVRTC are opened later, by the
 * first run that needs them: a run fails with EIN_ERR_DEVICE naming the
 * missing one before it queues any work. */
ein_backend *ein_cuda_backend_create(int device, ein_error_rec *err);

/* Synchronous device memory for the CLI and tests. */
ein_status ein_cuda_malloc(int device, void **ptr, size_t bytes,
                           ein_error_rec *err);
void ein_cuda_free(void *ptr);
ein_status ein_cuda_copy_to_device(void *dst, const void *src, size_t bytes,
                                   ein_error_rec *err);
ein_status ein_cuda_copy_to_host(void *dst, const void *src, size_t bytes,
                                 ein_error_rec *err);

#endif
