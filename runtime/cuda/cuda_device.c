/*
 * cuda_device.c - the CUDA runtime below the backend (cuda_device.h):
 * the failure of a runtime call as an ein_status, the devices, making one
 * current for a call and restoring the caller's, and device memory for
 * the CLI, the tests and the backend's allocations. cuda_backend.c builds
 * on it; nothing here knows a plan.
 */
#include "cuda_device.h"

#include <cuda_runtime_api.h>
#include <stdio.h>

#include "cuda_backend.h"
#include "cuda_libs.h"

/* A failed CUDA runtime or cuBLAS call: the library's name and text of
 * its status; EIN_ERR_DEVICE_MEMORY when it ran out of device memory. */
ein_status ein_cuda_call_fail(ein_error_rec *err, const char *call, bool oom,
                              const char *name, const char *text) {
  return ein_fail(err, oom ? EIN_ERR_DEVICE_MEMORY : EIN_ERR_BACKEND,
                  "%s failed: %s (%s)", call, name, text);
}

ein_status ein_cuda_fail(ein_error_rec *err, const char *call, cudaError_t e) {
  return ein_cuda_call_fail(err, call, e == cudaErrorMemoryAllocation,
                            cudaGetErrorName(e), cudaGetErrorString(e));
}

bool ein_cuda_built(void) { return true; }

/* Without the runtime library the forwarders fail, so this is 0. */
int ein_cuda_device_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError(); /* clear the sticky "no driver" error */
    return 0;
  }
  return n;
}

bool ein_cuda_device_name(int device, char *buf, size_t cap) {
  struct cudaDeviceProp prop;
  if (device < 0 || device >= ein_cuda_device_count() ||
      cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  snprintf(buf, cap, "%s", prop.name);
  return true;
}

/* Makes `device` current and remembers the caller's device. The runtime
 * is required first: a backend opened before a fork() reaches here in the
 * child, which must be told why CUDA fails there (cuda_libs.h). */
ein_status ein_cuda_enter(int device, int *prev, ein_error_rec *err) {
  ein_status st = ein_cuda_lib_require(EIN_LIB_CUDART, err);
  if (st)
    return st;
  CU(cudaGetDevice(prev));
  if (*prev != device)
    CU(cudaSetDevice(device));
  return EIN_OK;
}

void ein_cuda_leave(int device, int prev) {
  if (prev != device)
    cudaSetDevice(prev);
}

/* ------------------------------------------------------ device memory */

ein_status ein_cuda_malloc(int device, void **ptr, size_t bytes,
                           ein_error_rec *err) {
  *ptr = NULL;
  ein_status st = ein_cuda_lib_require(EIN_LIB_CUDART, err);
  if (st)
    return st;
  int count = ein_cuda_device_count();
  if (count <= device)
    return ein_fail_device(err,
                           "no CUDA device %d: the CUDA runtime sees %d "
                           "device%s (no GPU, or no driver); use the CPU "
                           "backend",
                           device, count, count == 1 ? "" : "s");
  int prev;
  st = ein_cuda_enter(device, &prev, err);
  if (st)
    return st;
  cudaError_t e = cudaMalloc(ptr, bytes ? bytes : 1);
  ein_cuda_leave(device, prev);
  if (e != cudaSuccess) {
    cudaGetLastError();
    *ptr = NULL;
    return ein_cuda_fail(err, "cudaMalloc", e);
  }
  return EIN_OK;
}

void ein_cuda_free(void *ptr) {
  if (ptr)
    cudaFree(ptr);
}

ein_status ein_cuda_copy_to_device(void *dst, const void *src, size_t bytes,
                                   ein_error_rec *err) {
  ein_status st = ein_cuda_lib_require(EIN_LIB_CUDART, err);
  if (st)
    return st;
  if (bytes)
    CU(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
  return EIN_OK;
}

ein_status ein_cuda_copy_to_host(void *dst, const void *src, size_t bytes,
                                 ein_error_rec *err) {
  ein_status st = ein_cuda_lib_require(EIN_LIB_CUDART, err);
  if (st)
    return st;
  if (bytes)
    CU(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
  return EIN_OK;
}
