/*
 * cuda_none.c - cuda_backend.h for builds without the CUDA toolkit: every
 * entry point says that this build has no CUDA backend.
 */
#include "cuda_backend.h"
#include "kernel_resources.h"


static ein_status unavailable(ein_error_rec *err) {
  return ein_fail_device(err,
                         "this build of einc has no CUDA backend (built "
                         "without the CUDA toolkit or with -Dcuda=disabled)");
}

bool ein_cuda_built(void) { return false; }
int ein_cuda_device_count(void) { return 0; }

bool ein_cuda_device_name(int device, char *buf, size_t cap) {
  (void)device;
  (void)buf;
  (void)cap;
  return false;
}

ein_backend *ein_cuda_backend_create(int device, ein_error_rec *err) {
  (void)device;
  unavailable(err);
  return NULL;
}

ein_status ein_cuda_malloc(int device, void **ptr, size_t bytes,
                           ein_error_rec *err) {
  (void)device;
  (void)bytes;
  *ptr = 0;
  return unavailable(err);
}

void ein_cuda_free(void *ptr) { (void)ptr; }

ein_status ein_cuda_copy_to_device(void *dst, const void *src, size_t bytes,
                                   ein_error_rec *err) {
  (void)dst;
  (void)src;
  (void)bytes;
  return unavailable(err);
}

ein_status ein_cuda_copy_to_host(void *dst, const void *src, size_t bytes,
                                 ein_error_rec *err) {
  (void)dst;
  (void)src;
  (void)bytes;
  return unavailable(err);
}

ein_status ein_kernel_resources_report(const ein_cuda_program *prog, bool json,
                                       ein_strbuf *sb, ein_error_rec *err) {
  (void)prog;
  (void)json;
  (void)sb;
  return unavailable(err);
}

ein_status ein_kernel_model_report(const ein_plan_ir *plan,
                                   const ein_cuda_program *prog,
                                   const ein_device_model *m, bool json,
                                   ein_strbuf *sb, ein_error_rec *err) {
  (void)plan;
  (void)prog;
  (void)m;
  (void)json;
  (void)sb;
  return unavailable(err);
}
