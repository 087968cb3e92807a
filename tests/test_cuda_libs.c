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
 *   no-cublas  EINC_CUBLAS names a missing file: the runtime and NVRTC
 *              still load, and creating a backend does not need cuBLAS
 *              (without a GPU it fails for want of a device, not of
 *              cuBLAS). On a GPU: a GEMM plan fails naming libcublas
 *              with its output untouched, a transpose runs.
 *   no-cublaslt  EINC_CUBLASLT names a missing file: cuBLAS still
 *              loads; cuBLASLt (FP8 GEMMs) fails naming libcublasLt.
 *   no-nvrtc   EINC_NVRTC names a missing file: a compile names
 *              libnvrtc; creating a backend does not need it. On a GPU,
 *              with an empty kernel cache: a transpose fails naming
 *              libnvrtc with its output untouched, a cuBLAS-only GEMM
 *              runs.
 *   lazy       the real libraries: creating a backend (with or without a
 *              GPU) and making a kernel's disk-cache key open neither
 *              cuBLAS nor NVRTC.
 *   race       the real libraries, first used by 8 threads at once (run
 *              under TSan by tests/run.sh): every thread sees the same.
 *
 * Needs the CUDA toolkit's libraries for no-cublas, no-nvrtc, lazy and
 * race; a GPU only for the parts said to need one.
 */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctx_internal.h"
#include "cuda_backend.h"
#include "cuda_libs.h"
#include "cuda_program.h"
#include "ein.h"
#include "harness.h"
#include "kernel_cache.h"
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

/* Creating a backend needs the runtime alone: with a GPU it opens (and is
 * closed again; true is returned), without one it fails for want of a
 * device, never naming `lib`. */
static bool backend_opens_without(const char *lib) {
  ein_error_rec err;
  ein_error_init(&err);
  ein_backend *be = ein_cuda_backend_create(0, &err);
  CHECK(be || (err.pub.status == EIN_ERR_DEVICE && !has(err.message, lib) &&
               (has(err.message, "no usable CUDA device") ||
                has(err.message, "does not exist"))),
        "backend without %s: %s", lib, err.message);
  ein_error_clear(&err);
  if (be)
    be->destroy(be);
  return be != NULL;
}

enum { N = 256 }; /* 2 N^3 flops: past gemm_min_flops, so on cuBLAS */

typedef struct gpu_result {
  ein_status status;
  char message[512];
  bool gemm, kernels; /* what the plan's CUDA program has */
  float out0;         /* the output's first element afterwards */
} gpu_result;

/* On the GPU: expr over N x N f32 inputs of ones, into an output that
 * holds -7 before the run. */
static gpu_result eval_on_gpu(const char *expr, int nin) {
  gpu_result r = {.out0 = 0};
  ein_ctx *ctx = NULL;
  REQUIRE_OK(ein_ctx_create(&ctx));
  size_t bytes = (size_t)N * N * sizeof(float);
  float *ones = malloc(bytes), *out = malloc(bytes);
  for (size_t i = 0; i < (size_t)N * N; i++) ones[i] = 1, out[i] = -7;
  void *mem[3] = {NULL, NULL, NULL};
  for (int i = 0; i < 3; i++) {
    REQUIRE_OK(ein_device_alloc(ctx, EIN_BACKEND_CUDA, 0, bytes, &mem[i]));
    REQUIRE_OK(ein_device_copy(ctx, EIN_BACKEND_CUDA, 0, mem[i],
                               i < 2 ? ones : out, bytes,
                               EIN_COPY_HOST_TO_DEVICE));
  }
  int64_t shape[2] = {N, N};
  DLTensor t[3];
  for (int i = 0; i < 3; i++)
    t[i] = (DLTensor){.data = mem[i], .device = {kDLCUDA, 0}, .ndim = 2,
                      .dtype = {kDLFloat, 32, 1}, .shape = shape};
  const DLTensor *ins[2] = {&t[0], &t[1]};
  ein_plan *plan = NULL;
  REQUIRE_OK(ein_plan_create(ctx, expr, ins, nin, &t[2], NULL, &plan));
  const ein_cuda_program *prog = ein_plan_cuda_program(plan);
  for (int i = 0; i < prog->nsteps; i++) {
    r.gemm |= prog->steps[i].cublas;
    r.kernels |= !prog->steps[i].cublas &&
                 prog->steps[i].kernel.kind != EIN_KERNEL_NONE;
  }
  r.status = ein_plan_execute(ctx, plan, ins, nin, &t[2]);
  snprintf(r.message, sizeof r.message, "%s", ein_last_error(ctx)->message);
  REQUIRE_OK(ein_ctx_synchronize(ctx));
  REQUIRE_OK(ein_device_copy(ctx, EIN_BACKEND_CUDA, 0, out, mem[2], bytes,
                             EIN_COPY_DEVICE_TO_HOST));
  r.out0 = out[0];
  ein_plan_destroy(plan);
  for (int i = 0; i < 3; i++) ein_device_free(ctx, EIN_BACKEND_CUDA, 0, mem[i]);
  ein_ctx_destroy(ctx);
  free(ones);
  free(out);
  return r;
}

static void no_cublas(void) {
  const char *blas = soname_of[EIN_LIB_CUBLAS];
  ein_error_rec err;
  ein_error_init(&err);
  CHECK(ein_cuda_lib_require(EIN_LIB_CUDART, &err) == EIN_OK,
        "the runtime still loads: %s", err.message);
  CHECK(ein_cuda_lib_require(EIN_LIB_NVRTC, &err) == EIN_OK,
        "NVRTC still loads: %s", err.message);
  ein_error_clear(&err);
  CHECK(ein_nvrtc_version() > 0, "NVRTC answers");
  if (!backend_opens_without(blas))
    return;
  gpu_result g = eval_on_gpu("i j, j k -> i k", 2);
  CHECK(g.gemm && g.status == EIN_ERR_DEVICE && has(g.message, blas) &&
            has(g.message, "EINC_CUBLAS") && g.out0 == -7,
        "GEMM plan without cuBLAS: %s: %s (output %g)",
        ein_status_name(g.status), g.message, g.out0);
  gpu_result t = eval_on_gpu("i j -> j i", 1);
  CHECK(!t.gemm && t.status == EIN_OK && t.out0 == 1,
        "transpose without cuBLAS: %s (output %g)", t.message, t.out0);
}

static void no_nvrtc(void) {
  const char *nvrtc = soname_of[EIN_LIB_NVRTC];
  compile_fails(nvrtc, "EINC_NVRTC");
  if (!backend_opens_without(nvrtc))
    return;
  char dir[] = "/tmp/einc-no-nvrtc-XXXXXX"; /* no kernel on disk */
  CHECK(mkdtemp(dir) != NULL, "temporary cache directory");
  setenv("EINC_CACHE_DIR", dir, 1);
  gpu_result t = eval_on_gpu("i j -> j i", 1);
  CHECK(t.kernels && t.status == EIN_ERR_DEVICE && has(t.message, nvrtc) &&
            t.out0 == -7,
        "kernel plan without NVRTC: %s: %s (output %g)",
        ein_status_name(t.status), t.message, t.out0);
  gpu_result g = eval_on_gpu("i j, j k -> i k", 2);
  CHECK(g.gemm && !g.kernels && g.status == EIN_OK && g.out0 == N,
        "cuBLAS-only plan without NVRTC: %s (output %g)", g.message, g.out0);
  rmdir(dir);
}

/* cuBLASLt, opened by the first FP8 GEMM alone: missing, cuBLAS still
 * loads; requiring it names the library, its variable and its wheel, and
 * its forwarders return cuBLAS's generic failure. */
static void no_cublaslt(void) {
  char lt[32];
  snprintf(lt, sizeof lt, "libcublasLt.so.%d", EIN_CUDA_MAJOR);
  ein_error_rec err;
  ein_error_init(&err);
  CHECK(ein_cuda_lib_require(EIN_LIB_CUBLAS, &err) == EIN_OK,
        "cuBLAS still loads: %s", err.message);
  ein_status st = ein_cuda_lib_require(EIN_LIB_CUBLASLT, &err);
  CHECK(st == EIN_ERR_DEVICE && has(err.message, lt) &&
            has(err.message, "EINC_CUBLASLT") &&
            has(err.message, "nvidia-cublas"),
        "cuBLASLt missing: %s: %s", ein_status_name(st), err.message);
  ein_error_clear(&err);
  cublasLtHandle_t h = NULL;
  CHECK(cublasLtCreate(&h) == CUBLAS_STATUS_NOT_INITIALIZED && !h,
        "cublasLtCreate forwarder");
}

/* Whether a library whose path contains `part` is mapped. */
static int find_mapped(struct dl_phdr_info *info, size_t size, void *part) {
  (void)size;
  return info->dlpi_name && strstr(info->dlpi_name, part) != NULL;
}

static bool mapped(const char *part) {
  return dl_iterate_phdr(find_mapped, (void *)part) != 0;
}

static void lazy(void) {
  CHECK(!mapped("libcublas") && !mapped("libnvrtc"), "nothing opened yet");
  backend_opens_without("libcublas");
  CHECK(mapped("libcudart"), "creating a backend opens the runtime");
  CHECK(!mapped("libcublas"), "creating a backend does not open cuBLAS");
  CHECK(!mapped("libnvrtc"), "creating a backend does not open NVRTC");
  /* A kernel found on disk is loaded by its key: making the key must not
   * need NVRTC either. */
  ein_kcache *c = ein_kcache_create(90);
  static char src[] = "extern \"C\" __global__ void ein_main() {}";
  ein_kernel_src k = {.kind = EIN_KERNEL_MAP, .source = src,
                      .len = sizeof src - 1};
  ein_strbuf key = {0};
  if (c)
    ein_kcache_disk_key(c, &k, &key);
  CHECK(c && !key.failed && key.len > k.len && strstr(key.data, src),
        "a disk key is made");
  CHECK(!mapped("libnvrtc"), "a disk key does not open NVRTC");
  ein_strbuf_free(&key);
  ein_kcache_destroy(c);
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
  } else if (strcmp(mode, "no-cublaslt") == 0) {
    setenv("EINC_CUBLASLT", "/nonexistent/libcublasLt.so", 1);
    no_cublaslt();
  } else if (strcmp(mode, "no-nvrtc") == 0) {
    setenv("EINC_NVRTC", "/nonexistent/libnvrtc.so", 1);
    no_nvrtc();
  } else if (strcmp(mode, "lazy") == 0) {
    lazy();
  } else if (strcmp(mode, "race") == 0) {
    race();
  } else {
    fprintf(stderr, "usage: test_cuda_libs "
                    "[disabled|no-cublas|no-cublaslt|no-nvrtc|lazy|"
                    "race]\n");
    return 2;
  }
  char name[64];
  snprintf(name, sizeof name, "cuda_libs_%s", mode);
  return test_summary(name);
}
