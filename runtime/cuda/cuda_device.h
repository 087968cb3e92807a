/*
 * cuda_device.h - the CUDA runtime's devices, errors and memory, under
 * the backend (cuda_device.c): what cuda_backend.c needs of the runtime
 * besides cuBLAS. Internal to runtime/cuda; built only with CUDA.
 *
 * Takes: device numbers, runtime statuses. Gives: ein_status values with
 * the call's name and the runtime's text (EIN_ERR_DEVICE_MEMORY when the
 * device ran out), and the device made current until ein_cuda_leave.
 */
#ifndef EIN_CUDA_DEVICE_H
#define EIN_CUDA_DEVICE_H

#include <cuda_runtime_api.h>
#include <stdbool.h>

#include "error.h"

/* A failed runtime or library call: its name, the library's name and text
 * for the status; oom picks EIN_ERR_DEVICE_MEMORY over EIN_ERR_BACKEND. */
ein_status ein_cuda_call_fail(ein_error_rec *err, const char *call, bool oom,
                              const char *name, const char *text);
ein_status ein_cuda_fail(ein_error_rec *err, const char *call, cudaError_t e);

/* The one check of a CUDA runtime call, in a function with an
 * ein_error_rec *err that returns ein_status. */
#define CU(call)                                                               \
  do {                                                                         \
    cudaError_t e_ = (call);                                                   \
    if (e_ != cudaSuccess)                                                     \
      return ein_cuda_fail(err, #call, e_);                                    \
  } while (0)

/* Makes `device` current, keeping the caller's in *prev for
 * ein_cuda_leave. */
ein_status ein_cuda_enter(int device, int *prev, ein_error_rec *err);
void ein_cuda_leave(int device, int prev);

#endif
