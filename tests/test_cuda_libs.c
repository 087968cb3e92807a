/*
 * test_cuda_libs.c - the CUDA libraries opened at run time
 * (runtime/cuda/cuda_libs.h). A library is opened once per process, so
 * each scenario is a run of its own, chosen by the first argument:
 *
 *   disabled   EINC_CUDA_LIBS_DISABLE=1: no device, and every way into
 *              the CUDA backend (ein_eval on CUDA tensors, a backend,
 *              ein_cuda_malloc, an NVRTC compile) fails with
 *              EIN_ERR_DEVICE naming libcudart (NVRTC: libnvrtc) and how
 *              to install it; a forwarder returns its library's failure.
 *   no-cublas  EINC_CUBLAS names a missing file: a backend names
 *              libcublas; the runtime and NVRTC still load.
 *   no-nvrtc   EINC_NVRTC names a missing file: a backend and a compile
 *              name libnvrtc.
 *   race       the real libraries, first used by 8 threads at once (run
 *              under TSan by tests/run.sh): every thread sees the same.
 *
 * Needs the CUDA toolkit's libraries for no-cublas, no-nvrtc and race; no
 * GPU.
 */
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_backend.h"
#include "cuda_libs.h"
#include "ein.h"
#include "harness.h"
#include "nvrtc_compile.h"

static char soname_of[3][32];

static bool has(const char *text, const char *part) {
  return text && strstr(text, part) != NULL;
}

/* ein_eval of a transpose on (fake) CUDA tensors: the pointers are never
 * touched, since the backend cannot be created. */
static void eval_on_cuda(const char *lib, const char *hint) {
  ein_ctx *ctx = NULL;
  CHECK(ein_ctx_create(&ctx) == EIN_OK, "context");
  if (!ctx)
    return;
  int64_t in_shape[2] = {3, 4}, out_shape[2] = {4, 3};
  DLTensor in = {.data = (void *)0x1000, .device = {kDLCUDA, 0}, .ndim = 2,
                 .dtype = {kDLFloat, 32, 1}, .shape = in_shape};
  DLTensor out = in;
  out.data = (void *)0x2000;
  out.shape = out_shape;
  const DLTensor *ins[1] = {&in};
  ein_options o = {0};
  ein_status st = ein_eval(ctx, "i j -> j i", ins, 1, &out, &o);
  const char *msg = ein_last_error(ctx)->message;
  CHECK(st == EIN_ERR_DEVICE && has(msg, lib) && has(msg, hint),
        "ein_eval on CUDA tensors: %s: %s", ein_status_name(st), msg);
  ein_ctx_destroy(ctx);
}

static void backend_fails(const char *lib, const char *hint) {
  ein_error_rec err;
  ein_error_init(&err);
  ein_backend *be = ein_cuda_backend_create(0, &err);
  CHECK(!be && err.pub.status == EIN_ERR_DEVICE && has(err.message, lib) &&
            has(err.message, hint),
        "backend without %s: %s", lib, err.message);
  ein_error_clear(&err);
}

static void compile_fails(const char *lib, const char *hint) {
  ein_error_rec err;
  ein_error_init(&err);
  char *cubin = NULL;
  size_t size = 0;
  static const char src[] = "extern \"C\" __global__ void ein_main() {}";
  ein_status st = ein_nvrtc_compile(src, strlen(src), 90, &cubin, &size, &err);
  CHECK(st == EIN_ERR_DEVICE && !cubin && has(err.message, lib) &&
            has(err.message, hint),
        "compile without NVRTC: %s", err.message);
  CHECK(ein_nvrtc_version() == 0, "no NVRTC version without NVRTC");
  free(cubin);
  ein_error_clear(&err);
}

static void disabled(void) {
  const char *rt = soname_of[EIN_LIB_CUDART];
  CHECK(ein_cuda_device_count() == 0, "no device without the runtime");
  void *p = (void *)1;
  ein_error_rec err;
  ein_error_init(&err);
  ein_status st = ein_cuda_malloc(0, &p, 64, &err);
  CHECK(st == EIN_ERR_DEVICE && !p && has(err.message, rt) &&
            has(err.message, "EINC_CUDA_LIBS_DISABLE") &&
            has(err.message, "nvidia-cuda-runtime"),
        "ein_cuda_malloc: %s", err.message);
  ein_error_clear(&err);
  eval_on_cuda(rt, "install the CUDA");
  backend_fails(rt, "EINC_CUDA_LIBS_DISABLE");
  compile_fails(soname_of[EIN_LIB_NVRTC], "nvidia-cuda-nvrtc");
  /* The forwarders themselves: the library's failure, never a crash. */
  void *q = NULL;
  CHECK(cudaMalloc(&q, 16) == cudaErrorInitializationError && !q,
        "cudaMalloc forwarder");
  CHECK(has(cudaGetErrorString(cudaErrorMemoryAllocation), "not loaded"),
        "cudaGetErrorString forwarder");
  cublasHandle_t h = NULL;
  CHECK(cublasCreate(&h) == CUBLAS_STATUS_NOT_INITIALIZED,
        "cublasCreate forwarder");
}

static void no_cublas(void) {
  ein_error_rec err;
  ein_error_init(&err);
  CHECK(ein_cuda_lib_require(EIN_LIB_CUDART, &err) == EIN_OK,
        "the runtime still loads: %s", err.message);
  CHECK(ein_cuda_lib_require(EIN_LIB_NVRTC, &err) == EIN_OK,
        "NVRTC still loads: %s", err.message);
  ein_error_clear(&err);
  CHECK(ein_nvrtc_version() > 0, "NVRTC answers");
  backend_fails(soname_of[EIN_LIB_CUBLAS], "/nonexistent/libcublas");
  backend_fails("EINC_CUBLAS", "nvidia-cublas");
}

static void no_nvrtc(void) {
  backend_fails(soname_of[EIN_LIB_NVRTC], "/nonexistent/libnvrtc");
  compile_fails(soname_of[EIN_LIB_NVRTC], "EINC_NVRTC");
}

typedef struct first_use {
  pthread_t thread;
  int which, devices, nvrtc;
  ein_status blas;
} first_use;

static void *first(void *arg) {
  first_use *f = arg;
  ein_error_rec err;
  ein_error_init(&err);
  /* Each thread starts with a different library so the loads overlap. */
  for (int i = 0; i < 3; i++) {
    switch ((f->which + i) % 3) {
    case 0: f->devices = ein_cuda_device_count(); break;
    case 1: f->nvrtc = ein_nvrtc_version(); break;
    default: f->blas = ein_cuda_lib_require(EIN_LIB_CUBLAS, &err); break;
    }
  }
  ein_error_clear(&err);
  return NULL;
}

static void race(void) {
  enum { N = 8 };
  first_use f[N];
  for (int i = 0; i < N; i++) {
    f[i] = (first_use){.which = i};
    pthread_create(&f[i].thread, NULL, first, &f[i]);
  }
  for (int i = 0; i < N; i++)
    pthread_join(f[i].thread, NULL);
  for (int i = 0; i < N; i++)
    CHECK(f[i].nvrtc > 0 && f[i].nvrtc == f[0].nvrtc &&
              f[i].devices == f[0].devices && f[i].blas == EIN_OK,
          "thread %d: nvrtc %d devices %d cublas %d", i, f[i].nvrtc,
          f[i].devices, f[i].blas);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "disabled";
  for (int lib = 0; lib < 3; lib++)
    snprintf(soname_of[lib], sizeof soname_of[lib], "lib%s.so.%d",
             lib == EIN_LIB_CUDART   ? "cudart"
             : lib == EIN_LIB_CUBLAS ? "cublas"
                                     : "nvrtc",
             EIN_CUDA_MAJOR);
  /* Set before anything opens a library: the choice is made once. */
  if (strcmp(mode, "disabled") == 0) {
    setenv("EINC_CUDA_LIBS_DISABLE", "1", 1);
    disabled();
  } else if (strcmp(mode, "no-cublas") == 0) {
    setenv("EINC_CUBLAS", "/nonexistent/libcublas.so", 1);
    no_cublas();
  } else if (strcmp(mode, "no-nvrtc") == 0) {
    setenv("EINC_NVRTC", "/nonexistent/libnvrtc.so", 1);
    no_nvrtc();
  } else if (strcmp(mode, "race") == 0) {
    race();
  } else {
    fprintf(stderr, "usage: test_cuda_libs [disabled|no-cublas|no-nvrtc|race]\n");
    return 2;
  }
  char name[64];
  snprintf(name, sizeof name, "cuda_libs_%s", mode);
  return test_summary(name);
}
