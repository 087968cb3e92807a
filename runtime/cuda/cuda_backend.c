/*
 * cuda_backend.c - runs plans on an NVIDIA GPU (cuda_backend.h).
 *
 * A backend owns, for one device: a stream (or uses the caller's), a
 * cuBLAS handle with a 32 MiB workspace, a stream-ordered memory pool for
 * plan temporaries, and a kernel cache. run() is asynchronous: GEMM steps
 * are cuBLAS calls, the others launches of generated kernels, all queued
 * on the stream; the workspace is allocated and freed in stream order.
 * Every CUDA and cuBLAS call is checked and a failure names the call and
 * the library's message. The caller's current device is restored. The
 * libraries are opened at run time (cuda_libs.h): creating a backend or
 * allocating device memory first checks that they are there.
 */
#include "cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "cuda_libs.h"
#include "cuda_program.h"
#include "kernel_cache.h"
#include "trace.h"

enum { CUBLAS_WORKSPACE = 32 << 20 };

typedef struct cuda_backend {
  ein_backend base;
  /* Serialises runs from threads sharing a context: the cuBLAS handle, the
   * kernel cache and the stream choice are one per backend. A run only
   * queues work, so the lock is held for host time alone. */
  pthread_mutex_t lock;
  int device, arch;
  cudaStream_t own_stream, stream;
  cublasHandle_t blas;
  void *blas_workspace;
  cudaMemPool_t pool;
  ein_kcache *kernels;
} cuda_backend;

static ein_status cuda_fail(ein_error_rec *err, const char *call,
                            cudaError_t e) {
  ein_status st =
      e == cudaErrorMemoryAllocation ? EIN_ERR_DEVICE_MEMORY : EIN_ERR_BACKEND;
  return ein_fail(err, st, "%s failed: %s (%s)", call, cudaGetErrorName(e),
                  cudaGetErrorString(e));
}

static ein_status blas_fail(ein_error_rec *err, const char *call,
                            cublasStatus_t s) {
  ein_status st =
      s == CUBLAS_STATUS_ALLOC_FAILED ? EIN_ERR_DEVICE_MEMORY : EIN_ERR_BACKEND;
  return ein_fail(err, st, "%s failed: %s (%s)", call, cublasGetStatusName(s),
                  cublasGetStatusString(s));
}

#define CU(call)                                                               \
  do {                                                                         \
    cudaError_t e_ = (call);                                                   \
    if (e_ != cudaSuccess)                                                     \
      return cuda_fail(err, #call, e_);                                        \
  } while (0)

/* The same for a cuBLAS call, written BLAS(cublasFoo, (args)) so that a
 * failure names the function: EIN_ERR_DEVICE_MEMORY when cuBLAS could not
 * allocate, else EIN_ERR_BACKEND, with cuBLAS's name and text for it. */
#define BLAS(fn, args)                                                         \
  do {                                                                         \
    cublasStatus_t s_ = fn args;                                               \
    if (s_ != CUBLAS_STATUS_SUCCESS)                                           \
      return blas_fail(err, #fn, s_);                                          \
  } while (0)

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

/* Makes `device` current and remembers the caller's device. */
static ein_status enter(int device, int *prev, ein_error_rec *err) {
  CU(cudaGetDevice(prev));
  if (*prev != device)
    CU(cudaSetDevice(device));
  return EIN_OK;
}

static void leave(int device, int prev) {
  if (prev != device)
    cudaSetDevice(prev);
}

/* ------------------------------------------------------------- GEMMs */

static cudaDataType_t data_type(ein_dtype dt) {
  switch (dt) {
  case EIN_DT_F16: return CUDA_R_16F;
  case EIN_DT_BF16: return CUDA_R_16BF;
  case EIN_DT_F64: return CUDA_R_64F;
  case EIN_DT_C64: return CUDA_C_32F;
  case EIN_DT_C128: return CUDA_C_64F;
  default: return CUDA_R_32F;
  }
}

/* alpha and beta in the compute type's precision: f64 for 64F, f32 for
 * the 32F kinds; as (re, im) pairs, which complex GEMMs read whole and
 * real ones by their first element. */
typedef struct scalars {
  float af[2], bf[2];
  double ad[2], bd[2];
  const void *alpha, *beta;
} scalars;

/* The compute type the program recorded (cuda_program.c decides it). */
static cublasComputeType_t compute_of(const ein_cublas_gemm *g,
                                      const ein_step *s, scalars *sc) {
  bool f64 = g->compute == EIN_GEMM_COMPUTE_64F;
  *sc = (scalars){.af = {(float)s->alpha, 0}, .ad = {s->alpha, 0}};
  sc->alpha = f64 ? (const void *)sc->ad : (const void *)sc->af;
  sc->beta = f64 ? (const void *)sc->bd : (const void *)sc->bf;
  switch (g->compute) {
  case EIN_GEMM_COMPUTE_64F: return CUBLAS_COMPUTE_64F;
  case EIN_GEMM_COMPUTE_32F_TF32: return CUBLAS_COMPUTE_32F_FAST_TF32;
  case EIN_GEMM_COMPUTE_32F: break;
  }
  return CUBLAS_COMPUTE_32F;
}

/* One strided-batched call (or a plain GEMM for a batch of 1). */
static ein_status gemm_call(cuda_backend *cb, const ein_step *s,
                            const ein_cublas_gemm *g, char *c, const char *a,
                            const char *b, ein_error_rec *err) {
  cudaDataType_t tab = data_type(g->ab_dtype), tc = data_type(g->c_dtype);
  scalars sc;
  cublasComputeType_t ct = compute_of(g, s, &sc);
  BLAS(cublasGemmStridedBatchedEx,
       (cb->blas, g->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
        g->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, (int)g->m, (int)g->n,
        (int)g->k, sc.alpha, a, tab, (int)g->lda, g->stride_a, b, tab,
        (int)g->ldb, g->stride_b, sc.beta, c, tc, (int)g->ldc, g->stride_c,
        (int)g->count, ct, CUBLAS_GEMM_DEFAULT));
  return EIN_OK;
}

/* Many outer iterations: one cublasGemmBatchedEx over pointer arrays that
 * live in stream-ordered device memory. */
static ein_status gemm_pointer_array(cuda_backend *cb, const ein_step *s,
                                     const ein_cublas_gemm *g, char *c,
                                     const char *a, const char *b,
                                     ein_error_rec *err) {
  int64_t total;
  const void **host = ein_cublas_pointer_arrays(g, c, a, b, &total, err);
  if (!host)
    return err->pub.status;
  size_t bytes = (size_t)total * 3 * sizeof(void *);
  void *dev = NULL;
  cudaError_t e = cudaMallocFromPoolAsync(&dev, bytes, cb->pool, cb->stream);
  /* A pageable source is staged before cudaMemcpyAsync returns, so the
   * host array may go right after. */
  if (e == cudaSuccess)
    e = cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, cb->stream);
  ein_free(host);
  if (e != cudaSuccess) {
    if (dev)
      cudaFreeAsync(dev, cb->stream);
    return cuda_fail(err, "cudaMemcpyAsync (GEMM pointer arrays)", e);
  }
  void **pc = dev, **pa = pc + total, **pb = pa + total;
  cudaDataType_t tab = data_type(g->ab_dtype), tc = data_type(g->c_dtype);
  scalars sc;
  cublasComputeType_t ct = compute_of(g, s, &sc);
  cublasStatus_t r = cublasGemmBatchedEx(
      cb->blas, g->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
      g->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, (int)g->m, (int)g->n, (int)g->k,
      sc.alpha, (const void *const *)pa, tab, (int)g->lda,
      (const void *const *)pb, tab, (int)g->ldb, sc.beta, (void *const *)pc,
      tc, (int)g->ldc, (int)total, ct, CUBLAS_GEMM_DEFAULT);
  cudaFreeAsync(dev, cb->stream);
  if (r != CUBLAS_STATUS_SUCCESS)
    return blas_fail(err, "cublasGemmBatchedEx", r);
  return EIN_OK;
}

static ein_status run_gemm(cuda_backend *cb, const ein_step *s,
                           const ein_cublas_gemm *g, char *c,
                           const char *step_a, const char *step_b,
                           ein_error_rec *err) {
  const char *a = g->a_is_step_a ? step_a : step_b;
  const char *b = g->a_is_step_a ? step_b : step_a;
  if (ein_cublas_pointer_array(g))
    return gemm_pointer_array(cb, s, g, c, a, b, err);
  int64_t csz = (int64_t)ein_dtype_size(g->c_dtype),
          absz = (int64_t)ein_dtype_size(g->ab_dtype);
  int64_t outer = ein_loop_axes_volume(&g->loops);
  for (int64_t i = 0; i < outer; i++) {
    int64_t off[3];
    ein_loop_axes_offsets(&g->loops, i, off);
    ein_status st = gemm_call(cb, s, g, c + off[0] * csz, a + off[1] * absz,
                              b + off[2] * absz, err);
    if (st)
      return st;
  }
  return EIN_OK;
}

/* ----------------------------------------------------------- kernels */

/* One kernel; its vector variant when every pointer it takes is 16-byte
 * aligned (as the emulated device checks). */
static ein_status launch(cuda_backend *cb, const ein_kernel_src *k, char *dst,
                         const char *s0, const char *s1, ein_error_rec *err) {
  cudaKernel_t main_k, vec_k;
  ein_status st = ein_kcache_get(cb->kernels, k, &main_k, &vec_k, err);
  if (st)
    return st;
  bool vec = k->has_vec && ((uintptr_t)dst % 16) == 0 &&
             ((uintptr_t)s0 % 16) == 0 && ((uintptr_t)s1 % 16) == 0;
  void *args[3] = {&dst, &s0, &s1};
  const unsigned *grid = vec ? k->grid_vec : k->grid;
  dim3 g = {grid[0], grid[1], grid[2]};
  dim3 b = {k->block[0], k->block[1], k->block[2]};
  CU(cudaLaunchKernel((const void *)(vec ? vec_k : main_k), g, b, args, 0,
                      cb->stream));
  return EIN_OK;
}

/* A step's kernel; a split reduction's pass 1 into the scratch buffer,
 * then its pass 2 from there into dst (stream order separates them). */
static ein_status run_kernel(cuda_backend *cb, const ein_cuda_step *cs,
                             char *dst, const char *s0, const char *s1,
                             char *scratch, ein_error_rec *err) {
  if (cs->kernel.kind == EIN_KERNEL_NONE)
    return EIN_OK;
  if (cs->finish.kind == EIN_KERNEL_NONE)
    return launch(cb, &cs->kernel, dst, s0, s1, err);
  ein_status st = launch(cb, &cs->kernel, scratch, s0, s1, err);
  if (st)
    return st;
  return launch(cb, &cs->finish, dst, scratch, NULL, err);
}

/* -------------------------------------------------------------- run */

/* Workspace from the pool; on out-of-memory the pool gives back what it
 * caches and the allocation is tried once more. */
static ein_status workspace_alloc(cuda_backend *cb, int64_t bytes, void **out,
                                  ein_error_rec *err) {
  *out = NULL;
  if (bytes <= 0)
    return EIN_OK;
  cudaError_t e =
      cudaMallocFromPoolAsync(out, (size_t)bytes, cb->pool, cb->stream);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    cudaStreamSynchronize(cb->stream);
    cudaMemPoolTrimTo(cb->pool, 0);
    e = cudaMallocFromPoolAsync(out, (size_t)bytes, cb->pool, cb->stream);
  }
  if (e != cudaSuccess) {
    cudaGetLastError();
    *out = NULL;
    return ein_fail(err,
                    e == cudaErrorMemoryAllocation ? EIN_ERR_DEVICE_MEMORY
                                                   : EIN_ERR_BACKEND,
                    "cannot allocate %lld bytes of device workspace for "
                    "the plan's temporaries: %s",
                    (long long)bytes, cudaGetErrorString(e));
  }
  return EIN_OK;
}

/* The cuBLAS handle and its 32 MiB workspace, made by the first plan that
 * has a GEMM (about 20 ms and the memory, which a plan of kernels alone
 * never needs); then set to the run's stream. With cb->lock held. */
static ein_status blas_ready(cuda_backend *cb, const ein_cuda_program *prog,
                             ein_error_rec *err) {
  bool gemm = false;
  for (int i = 0; i < prog->nsteps && !gemm; i++) gemm = prog->steps[i].cublas;
  if (!gemm) return EIN_OK;
  if (!cb->blas) {
    double t0 = ein_trace_now();
    if (!cb->blas_workspace)
      CU(cudaMalloc(&cb->blas_workspace, CUBLAS_WORKSPACE));
    cublasHandle_t h = NULL;
    BLAS(cublasCreate, (&h));
    cublasStatus_t r = cublasSetWorkspace(h, cb->blas_workspace,
                                          CUBLAS_WORKSPACE);
    if (r != CUBLAS_STATUS_SUCCESS) { /* the handle goes with the failure */
      cublasDestroy(h);
      return blas_fail(err, "cublasSetWorkspace", r);
    }
    cb->blas = h;
    ein_trace_end("cuda: create the cuBLAS handle and its workspace", t0);
  }
  BLAS(cublasSetStream, (cb->blas, cb->stream));
  return EIN_OK;
}

static ein_status run_steps(cuda_backend *cb, const ein_plan_ir *plan,
                            const ein_cuda_program *prog, char *const *inputs,
                            char *output, char *workspace, char *scratch,
                            const ein_step_marks *marks, ein_error_rec *err) {
  ein_status bst = blas_ready(cb, prog, err);
  if (bst) return bst;
  for (int i = 0; i < plan->nsteps; i++) {
    const ein_step *s = &plan->steps[i];
    ein_step_mark(marks, i); /* the caller records an event on cb->stream */
    const ein_cuda_step *cs = &prog->steps[i];
    char *dst =
        ein_buffer_base(plan, s->dst.buffer, inputs, output, workspace) +
        s->dst.offset * (int64_t)ein_dtype_size(s->dst_dtype);
    const char *src[2] = {NULL, NULL};
    for (int k = 0; k < s->nsrc; k++)
      src[k] =
          ein_buffer_base(plan, s->src[k].buffer, inputs, output, workspace) +
          s->src[k].offset * (int64_t)ein_dtype_size(s->src_dtype[k]);
    ein_status st = cs->cublas
                        ? run_gemm(cb, s, &cs->gemm, dst, src[0], src[1], err)
                        : run_kernel(cb, cs, dst, src[0], src[1], scratch, err);
    if (st)
      return st;
  }
  ein_step_mark(marks, plan->nsteps);
  return EIN_OK;
}

static ein_status cuda_run(ein_backend *self, const ein_plan_ir *plan,
                           const void *program, char *const *inputs,
                           char *output, const ein_step_marks *marks,
                           ein_error_rec *err) {
  cuda_backend *cb = (cuda_backend *)self;
  const ein_cuda_program *prog = program;
  if (!prog || prog->nsteps != plan->nsteps)
    return ein_fail_internal(err, "cuda backend: the plan has no CUDA program");
  int prev;
  ein_status st = enter(cb->device, &prev, err);
  if (st)
    return st;
  /* The temporaries, then split reductions' partials, in one allocation
   * from the stream-ordered pool. */
  int64_t scratch_at = (plan->workspace_bytes + 255) / 256 * 256;
  void *ws = NULL;
  pthread_mutex_lock(&cb->lock);
  st = workspace_alloc(cb,
                       prog->scratch_bytes ? scratch_at + prog->scratch_bytes
                                           : plan->workspace_bytes,
                       &ws, err);
  if (!st)
    st = run_steps(cb, plan, prog, inputs, output, ws,
                   prog->scratch_bytes ? (char *)ws + scratch_at : NULL,
                   marks, err);
  if (ws)
    cudaFreeAsync(ws, cb->stream);
  pthread_mutex_unlock(&cb->lock);
  leave(cb->device, prev);
  return st;
}

/* ------------------------------------------------------- lifecycle */

static void cuda_destroy(ein_backend *self) {
  cuda_backend *cb = (cuda_backend *)self;
  int prev = cb->device;
  cudaGetDevice(&prev);
  cudaSetDevice(cb->device);
  if (cb->own_stream)
    cudaStreamSynchronize(cb->own_stream);
  if (cb->stream && cb->stream != cb->own_stream)
    cudaStreamSynchronize(cb->stream);
  ein_kcache_destroy(cb->kernels);
  if (cb->blas)
    cublasDestroy(cb->blas);
  if (cb->blas_workspace)
    cudaFree(cb->blas_workspace);
  if (cb->pool)
    cudaMemPoolDestroy(cb->pool);
  if (cb->own_stream)
    cudaStreamDestroy(cb->own_stream);
  if (prev != cb->device)
    cudaSetDevice(prev);
  pthread_mutex_destroy(&cb->lock);
  ein_free(cb);
}

/* Device memory of the backend's device, for ein_device_alloc. */
static ein_status cuda_alloc(ein_backend *self, size_t bytes, void **ptr,
                             ein_error_rec *err) {
  return ein_cuda_malloc(((cuda_backend *)self)->device, ptr, bytes, err);
}

static void cuda_free(ein_backend *self, void *ptr) {
  (void)self;
  ein_cuda_free(ptr);
}

static ein_status cuda_copy(ein_backend *self, void *dst, const void *src,
                            size_t bytes, ein_copy_dir dir,
                            ein_error_rec *err) {
  (void)self;
  return dir == EIN_COPY_TO_DEVICE ? ein_cuda_copy_to_device(dst, src, bytes, err)
                                   : ein_cuda_copy_to_host(dst, src, bytes, err);
}

static void cuda_set_stream(ein_backend *be, void *stream) {
  cuda_backend *cb = (cuda_backend *)be;
  pthread_mutex_lock(&cb->lock);
  cb->stream = stream ? (cudaStream_t)stream : cb->own_stream;
  pthread_mutex_unlock(&cb->lock);
}

static ein_status cuda_sync(ein_backend *be, ein_error_rec *err) {
  cuda_backend *cb = (cuda_backend *)be;
  int prev;
  ein_status st = enter(cb->device, &prev, err);
  if (st)
    return st;
  pthread_mutex_lock(&cb->lock);
  cudaStream_t stream = cb->stream;
  pthread_mutex_unlock(&cb->lock);
  cudaError_t e = cudaStreamSynchronize(stream);
  leave(cb->device, prev);
  if (e != cudaSuccess)
    return cuda_fail(err, "cudaStreamSynchronize", e);
  return EIN_OK;
}

static void cuda_stats(ein_backend *be, ein_backend_stats *out) {
  cuda_backend *cb = (cuda_backend *)be;
  pthread_mutex_lock(&cb->lock);
  ein_kcache_stats s = ein_kcache_get_stats(cb->kernels);
  pthread_mutex_unlock(&cb->lock);
  out->memory_hits = s.memory_hits;
  out->disk_hits = s.disk_hits;
  out->compiles = s.compiles;
}

static ein_status setup(cuda_backend *cb, ein_error_rec *err) {
  int major = 0, minor = 0;
  CU(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor,
                            cb->device));
  CU(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor,
                            cb->device));
  cb->arch = major * 10 + minor;
  CU(cudaStreamCreate(&cb->own_stream));
  cb->stream = cb->own_stream;
  struct cudaMemPoolProps props;
  memset(&props, 0, sizeof props);
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = cb->device;
  CU(cudaMemPoolCreate(&cb->pool, &props));
  /* Keep freed workspace for the next run instead of returning it at
   * every synchronisation. */
  uint64_t keep = UINT64_MAX;
  CU(cudaMemPoolSetAttribute(cb->pool, cudaMemPoolAttrReleaseThreshold, &keep));
  cb->kernels = ein_kcache_create(cb->arch);
  if (!cb->kernels)
    return ein_fail_memory(err, "out of memory creating the kernel cache");
  return EIN_OK;
}

ein_backend *ein_cuda_backend_create(int device, ein_error_rec *err) {
  if (ein_cuda_libs_require_all(err))
    return NULL;
  int count = 0;
  double t0 = ein_trace_now();
  cudaError_t e = cudaGetDeviceCount(&count);
  ein_trace_end("cuda: cudaGetDeviceCount (driver initialisation)", t0);
  if (e != cudaSuccess || device < 0 || device >= count) {
    cudaGetLastError();
    if (e != cudaSuccess)
      ein_fail_device(err,
                      "no usable CUDA device: cudaGetDeviceCount failed: %s "
                      "(%s)",
                      cudaGetErrorName(e), cudaGetErrorString(e));
    else
      ein_fail_device(err,
                      "CUDA device %d does not exist (%d device%s visible)",
                      device, count, count == 1 ? "" : "s");
    return NULL;
  }
  cuda_backend *cb = ein_calloc(1, sizeof *cb);
  if (!cb) {
    ein_fail_memory(err, "out of memory creating the CUDA backend");
    return NULL;
  }
  pthread_mutex_init(&cb->lock, NULL);
  cb->device = device;
  cb->base.entry = &ein_cuda_entry;
  cb->base.run = cuda_run;
  cb->base.alloc = cuda_alloc;
  cb->base.free = cuda_free;
  cb->base.copy = cuda_copy;
  cb->base.sync = cuda_sync;
  cb->base.set_stream = cuda_set_stream;
  cb->base.stats = cuda_stats;
  cb->base.destroy = cuda_destroy;
  int prev;
  t0 = ein_trace_now();
  ein_status st = enter(device, &prev, err);
  if (!st) {
    st = setup(cb, err);
    leave(device, prev);
  }
  ein_trace_end("cuda: open the device (context, stream, memory pool)", t0);
  if (st) {
    cuda_destroy(&cb->base);
    return NULL;
  }
  return &cb->base;
}


/* ------------------------------------------------ memory helpers */

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
  st = enter(device, &prev, err);
  if (st)
    return st;
  cudaError_t e = cudaMalloc(ptr, bytes ? bytes : 1);
  leave(device, prev);
  if (e != cudaSuccess) {
    cudaGetLastError();
    *ptr = NULL;
    return cuda_fail(err, "cudaMalloc", e);
  }
  return EIN_OK;
}

void ein_cuda_free(void *ptr) {
  if (ptr)
    cudaFree(ptr);
}

ein_status ein_cuda_copy_to_device(void *dst, const void *src, size_t bytes,
                                   ein_error_rec *err) {
  if (bytes)
    CU(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
  return EIN_OK;
}

ein_status ein_cuda_copy_to_host(void *dst, const void *src, size_t bytes,
                                 ein_error_rec *err) {
  if (bytes)
    CU(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
  return EIN_OK;
}
