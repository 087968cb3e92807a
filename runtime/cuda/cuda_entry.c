/*
 * cuda_entry.c - the CUDA backend's entry in the backend table
 * (backend.h), the same with and without the toolkit: plans and programs
 * are pure C (cuda_program.c), so CUDA plans are made and shown anywhere;
 * device_count and open come from cuda_backend.c or, in builds without
 * CUDA, cuda_none.c.
 */
#include "backend.h"
#include "cuda_backend.h"
#include "cuda_program.h"

static bool cuda_memory(DLDeviceType t) {
  return t == kDLCUDA || t == kDLCUDAManaged;
}

const ein_backend_entry ein_cuda_entry = {
    .name = "cuda",
    .kind = EIN_BACKEND_CUDA,
    .memory = kDLCUDA,
    .memory_name = "CUDA device memory",
    .accepts = cuda_memory,
    .caps = ein_cuda_caps,
    .prepare = ein_cuda_prepare,
    .program_free = ein_cuda_program_free,
    .describe = ein_cuda_describe,
    .describe_step_json = ein_cuda_describe_step_json,
    .cuda_program = ein_cuda_program_of,
    .device_count = ein_cuda_device_count,
    .open = ein_cuda_backend_create,
};
