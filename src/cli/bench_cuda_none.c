/* bench_cuda_none.c - bench_cuda_open in builds without the CUDA backend. */
#include <stdio.h>

#include "bench_device.h"

bench_device *bench_cuda_open(int device, ein_ctx *ctx, char *msg,
                              size_t cap) {
  (void)device, (void)ctx;
  snprintf(msg, cap, "this einc was built without the CUDA backend");
  return NULL;
}
