/*
 * cuda_backend.c - runs plans on an NVIDIA GPU (cuda_backend.h).
 *
 * A backend owns, for one device: a stream (or uses the caller's), a
 * cuBLAS handle with a 32 MiB workspace (and a cuBLASLt handle sharing it,
 * for FP8 GEMMs), a stream-ordered memory pool for
 * plan temporaries, and a kernel cache. run() is asynchronous: GEMM steps
 * are cuBLAS calls, the others launches of generated kernels, all queued
 * on the stream; the workspace is allocated and freed in stream order.
 * Every CUDA and cuBLAS call is checked and a failure names the call and
 * the library's message. The caller's current device is restored. The
 * libraries are opened at run time (cuda_libs.h): creating a backend or
 * allocating device memory first checks that the runtime is there; the
 * first run with a GEMM opens cuBLAS, the first kernel compile NVRTC.
 *
 * A cached plan's run looks nothing up: its kernels' handles are kept
 * with the plan's program for this backend (run_cache.h), and the pointer
 * arrays of a pointer-array GEMM stay on the device while the call and
 * its pointers are the same (ptr_arrays).
 */
#include "cuda_backend.h"
#include "cuda_device.h"

#include <cublasLt.h>
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
#include "run_cache.h"
#include "trace.h"

enum { CUBLAS_WORKSPACE = 32 << 20, PTR_ARRAY_SLOTS = 8 };

/* A pointer-array GEMM's arrays on the device, kept for later runs: they
 * hold exactly what would be uploaded again while the call matches g
 * (ein_gemm_arrays_match) and its base pointers are c, a, b. */
typedef struct ptr_arrays {
  bool used;
  ein_cublas_gemm g;
  const char *c, *a, *b;
  int64_t total; /* pointers per array */
  void *dev;     /* pool memory of `bytes`, kept when the slot is reused */
  size_t bytes;
} ptr_arrays;

typedef struct cuda_backend {
  ein_backend base;
  /* Serialises runs from threads sharing a context: the cuBLAS handle, the
   * kernel cache and the stream choice are one per backend. A run only
   * queues work, so the lock is held for host time alone. */
  pthread_mutex_t lock;
  int device, arch;
  cudaStream_t own_stream, stream;
  cublasHandle_t blas;
  cublasLtHandle_t lt; /* FP8 GEMMs; shares blas_workspace (one stream) */
  void *blas_workspace;
  uint64_t fp8_gemms;
  cudaMemPool_t pool;
  ein_kcache *kernels;
  /* Kernel launches whose handles came from the program (counted as the
   * kernel cache's memory hits, as each launch used to look up). */
  uint64_t kept_launches;
  /* Written and read on own_stream only: the calls that read an entry and
   * the upload that replaces it are ordered by that stream. */
  ptr_arrays arrays[PTR_ARRAY_SLOTS];
  unsigned arrays_next; /* the slot the next new entry takes */
} cuda_backend;

static ein_status blas_fail(ein_error_rec *err, const char *call,
                            cublasStatus_t s) {
  return ein_cuda_call_fail(err, call, s == CUBLAS_STATUS_ALLOC_FAILED,
                            cublasGetStatusName(s), cublasGetStatusString(s));
}

/* The same for a cuBLAS call, written BLAS(cublasFoo, (args)) so that a
 * failure names the function: EIN_ERR_DEVICE_MEMORY when cuBLAS could not
 * allocate, else EIN_ERR_BACKEND, with cuBLAS's name and text for it. */
#define BLAS(fn, args)                                                         \
  do {                                                                         \
    cublasStatus_t s_ = fn args;                                               \
    if (s_ != CUBLAS_STATUS_SUCCESS)                                           \
      return blas_fail(err, #fn, s_);                                          \
  } while (0)

/* ------------------------------------------------------------- GEMMs */

static cudaDataType_t data_type(ein_dtype dt) {
  switch (dt) {
  case EIN_DT_F16: return CUDA_R_16F;
  case EIN_DT_BF16: return CUDA_R_16BF;
  case EIN_DT_F64: return CUDA_R_64F;
  case EIN_DT_C64: return CUDA_C_32F;
  case EIN_DT_C128: return CUDA_C_64F;
  case EIN_DT_F8E4M3: return CUDA_R_8F_E4M3;
  case EIN_DT_F8E5M2: return CUDA_R_8F_E5M2;
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

/* The kept arrays of call g at c, a, b, or NULL. */
static ptr_arrays *arrays_find(cuda_backend *cb, const ein_cublas_gemm *g,
                               const char *c, const char *a, const char *b) {
  for (int i = 0; i < PTR_ARRAY_SLOTS; i++) {
    ptr_arrays *p = &cb->arrays[i];
    if (p->used && p->c == c && p->a == a && p->b == b &&
        ein_gemm_arrays_match(&p->g, g))
      return p;
  }
  return NULL;
}

/* Builds the arrays of call g on the host and uploads them into slot's
 * memory (grown when too small), or, without a slot, into memory for this
 * run alone (*dev, which the caller frees in stream order). */
static ein_status arrays_upload(cuda_backend *cb, const ein_cublas_gemm *g,
                                char *c, const char *a, const char *b,
                                ptr_arrays *slot, void **dev,
                                int64_t *total, ein_error_rec *err) {
  *dev = NULL;
  const void **host = ein_cublas_pointer_arrays(g, c, a, b, total, err);
  if (!host)
    return err->pub.status;
  size_t bytes = (size_t)*total * 3 * sizeof(void *);
  cudaError_t e = cudaSuccess;
  if (slot && slot->bytes < bytes && slot->dev) {
    cudaFreeAsync(slot->dev, cb->stream);
    slot->dev = NULL;
    slot->bytes = 0;
  }
  void *d = slot ? slot->dev : NULL;
  if (!d)
    e = cudaMallocFromPoolAsync(&d, bytes, cb->pool, cb->stream);
  if (e == cudaSuccess && slot && !slot->dev) {
    slot->dev = d;
    slot->bytes = bytes;
  }
  /* A pageable source is staged before cudaMemcpyAsync returns, so the
   * host array may go right after. */
  if (e == cudaSuccess)
    e = cudaMemcpyAsync(d, host, bytes, cudaMemcpyHostToDevice, cb->stream);
  ein_free(host);
  if (e != cudaSuccess) {
    if (d && !slot)
      cudaFreeAsync(d, cb->stream);
    return ein_cuda_fail(err, "cudaMemcpyAsync (GEMM pointer arrays)", e);
  }
  *dev = d;
  return EIN_OK;
}

/* The device arrays of a pointer-array call. On the backend's own stream
 * they are kept and uploaded again only when the call or its pointers
 * change; on a caller's stream (which may be another at the next run) they
 * are made for this run (*temp) and freed after the call. */
static ein_status pointer_arrays(cuda_backend *cb, const ein_cublas_gemm *g,
                                 char *c, const char *a, const char *b,
                                 void **dev, int64_t *total, bool *temp,
                                 ein_error_rec *err) {
  *temp = cb->stream != cb->own_stream;
  if (*temp)
    return arrays_upload(cb, g, c, a, b, NULL, dev, total, err);
  ptr_arrays *p = arrays_find(cb, g, c, a, b);
  if (p) {
    *dev = p->dev;
    *total = p->total;
    return EIN_OK;
  }
  p = &cb->arrays[cb->arrays_next++ % PTR_ARRAY_SLOTS];
  p->used = false;
  ein_status st = arrays_upload(cb, g, c, a, b, p, dev, total, err);
  if (st)
    return st;
  p->g = *g;
  p->c = c;
  p->a = a;
  p->b = b;
  p->total = *total;
  p->used = true;
  return EIN_OK;
}

/* Many outer iterations: one cublasGemmBatchedEx over pointer arrays in
 * device memory. */
static ein_status gemm_pointer_array(cuda_backend *cb, const ein_step *s,
                                     const ein_cublas_gemm *g, char *c,
                                     const char *a, const char *b,
                                     ein_error_rec *err) {
  void *dev;
  int64_t total;
  bool temp;
  ein_status st = pointer_arrays(cb, g, c, a, b, &dev, &total, &temp, err);
  if (st)
    return st;
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
  if (temp)
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

/* ------------------------------------------------------- FP8 GEMMs */

/* cuBLASLt's descriptors of one FP8 call; NULL where not made. */
typedef struct lt_descs {
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t l[3]; /* A, B, and C = D */
  cublasLtMatmulPreference_t pref;
} lt_descs;

static void lt_descs_free(lt_descs *d) {
  if (d->pref) cublasLtMatmulPreferenceDestroy(d->pref);
  for (int i = 0; i < 3; i++)
    if (d->l[i]) cublasLtMatrixLayoutDestroy(d->l[i]);
  if (d->op) cublasLtMatmulDescDestroy(d->op);
}

/* A column-major rows x cols matrix, `count` of them `stride` apart. */
static ein_status lt_layout(cublasLtMatrixLayout_t *l, ein_dtype dt,
                            int64_t rows, int64_t cols, int64_t ld,
                            int64_t count, int64_t stride,
                            ein_error_rec *err) {
  BLAS(cublasLtMatrixLayoutCreate,
       (l, data_type(dt), (uint64_t)rows, (uint64_t)cols, ld));
  if (count <= 1) return EIN_OK;
  int32_t n = (int32_t)count;
  BLAS(cublasLtMatrixLayoutSetAttribute,
       (*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &n, sizeof n));
  BLAS(cublasLtMatrixLayoutSetAttribute,
       (*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
        sizeof stride));
  return EIN_OK;
}

/* The call's descriptors: TN, compute and scale f32, the scales' device
 * pointers sa and sb, and the workspace cuBLASLt may use. */
static ein_status lt_describe(const ein_cublas_gemm *g, const float *sa,
                              const float *sb, lt_descs *d,
                              ein_error_rec *err) {
  BLAS(cublasLtMatmulDescCreate, (&d->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t t = CUBLAS_OP_T, n = CUBLAS_OP_N;
  BLAS(cublasLtMatmulDescSetAttribute,
       (d->op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t));
  BLAS(cublasLtMatmulDescSetAttribute,
       (d->op, CUBLASLT_MATMUL_DESC_TRANSB, &n, sizeof n));
  BLAS(cublasLtMatmulDescSetAttribute,
       (d->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa));
  BLAS(cublasLtMatmulDescSetAttribute,
       (d->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof sb));
  ein_status st = lt_layout(&d->l[0], g->ab_dtype, g->k, g->m, g->lda,
                            g->count, g->stride_a, err);
  if (!st)
    st = lt_layout(&d->l[1], g->b_dtype, g->k, g->n, g->ldb, g->count,
                   g->stride_b, err);
  if (!st)
    st = lt_layout(&d->l[2], g->c_dtype, g->m, g->n, g->ldc, g->count,
                   g->stride_c, err);
  if (st) return st;
  BLAS(cublasLtMatmulPreferenceCreate, (&d->pref));
  uint64_t ws = CUBLAS_WORKSPACE;
  BLAS(cublasLtMatmulPreferenceSetAttribute,
       (d->pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  return EIN_OK;
}

/* Queues the described call with cuBLASLt's first heuristic choice. */
static ein_status lt_queue(cuda_backend *cb, const ein_step *s,
                           const lt_descs *d, char *c, const char *a,
                           const char *b, ein_error_rec *err) {
  cublasLtMatmulHeuristicResult_t h;
  int found = 0;
  BLAS(cublasLtMatmulAlgoGetHeuristic, (cb->lt, d->op, d->l[0], d->l[1],
                                         d->l[2], d->l[2], d->pref, 1, &h,
                                         &found));
  if (found < 1)
    return ein_fail_backend(err, "cublasLtMatmulAlgoGetHeuristic found no "
                                 "FP8 algorithm for this GEMM");
  float alpha = (float)s->alpha, beta = 0;
  BLAS(cublasLtMatmul, (cb->lt, d->op, &alpha, a, d->l[0], b, d->l[1], &beta,
                        c, d->l[2], c, d->l[2], &h.algo, cb->blas_workspace,
                        CUBLAS_WORKSPACE, cb->stream));
  cb->fp8_gemms++;
  return EIN_OK;
}

/* An FP8 GEMM step: one cublasLtMatmul, on a device of sm_89 or later. */
static ein_status run_lt(cuda_backend *cb, const ein_step *s,
                         const ein_cublas_gemm *g, char *const *inputs,
                         char *c, const char *step_a, const char *step_b,
                         ein_error_rec *err) {
  ein_status st = ein_fp8_gemm_sm_check(cb->base.sm, err);
  if (st) return st;
  const char *a = g->a_is_step_a ? step_a : step_b;
  const char *b = g->a_is_step_a ? step_b : step_a;
  lt_descs d = {0};
  st = lt_describe(g, (const float *)(void *)inputs[g->scale_input[0]],
                   (const float *)(void *)inputs[g->scale_input[1]], &d, err);
  if (!st) st = lt_queue(cb, s, &d, c, a, b, err);
  lt_descs_free(&d);
  return st;
}

/* ----------------------------------------------------------- kernels */

/* Where a plan's handle set holds step i's kernel (j 0) or split pass 2
 * (j 1): its main handle, then its vector variant's (NULL when none). */
static int handle_at(int step, int j) { return 4 * step + 2 * j; }

/* The handles of every kernel the plan launches, from the kernel cache
 * (memory, disk or NVRTC), in a new set for this backend's cache. All
 * are looked up before anything is queued, so a compile that fails (or
 * NVRTC missing) leaves the outputs as they were. With cb->lock held. */
static ein_status resolve_kernels(cuda_backend *cb,
                                  const ein_cuda_plan_program *pp,
                                  void *const **out, ein_error_rec *err) {
  const ein_cuda_program *prog = pp->cuda;
  void **h = ein_calloc((size_t)prog->nsteps * 4 + 1, sizeof *h);
  if (!h)
    return ein_fail_memory(err, "out of memory for a plan's kernels");
  ein_status st = EIN_OK;
  for (int i = 0; i < prog->nsteps && !st; i++) {
    const ein_cuda_step *cs = &prog->steps[i];
    const ein_kernel_src *k[2] = {&cs->kernel, &cs->finish};
    /* What run_kernel launches: nothing for a GEMM or an empty kernel. */
    if (cs->cublas || cs->kernel.kind == EIN_KERNEL_NONE)
      continue;
    for (int j = 0; j < 2 && !st; j++) {
      if (k[j]->kind == EIN_KERNEL_NONE)
        continue;
      cudaKernel_t m = NULL, v = NULL;
      st = ein_kcache_get(cb->kernels, k[j], &m, &v, err);
      h[handle_at(i, j)] = m;
      h[handle_at(i, j) + 1] = v;
    }
  }
  if (!st) {
    *out = ein_kernel_sets_add(pp->kernels, ein_kcache_id(cb->kernels), h);
    if (!*out)
      st = ein_fail_memory(err, "out of memory for a plan's kernels");
  }
  ein_free(h);
  return st;
}

/* The plan's kernel handles for this backend: the set kept with the
 * program (*kept), else resolved now. With cb->lock held. */
static ein_status kernel_handles(cuda_backend *cb,
                                 const ein_cuda_plan_program *pp,
                                 void *const **out, bool *kept,
                                 ein_error_rec *err) {
  *out = ein_kernel_sets_find(pp->kernels, ein_kcache_id(cb->kernels));
  *kept = *out != NULL;
  return *kept ? EIN_OK : resolve_kernels(cb, pp, out, err);
}

/* One kernel (h: its main and vector handles); the vector variant when
 * every pointer it takes is 16-byte aligned (as the emulated device
 * checks). */
static ein_status launch(cuda_backend *cb, const ein_kernel_src *k,
                         void *const *h, char *dst, const char *s0,
                         const char *s1, ein_error_rec *err) {
  bool vec = k->has_vec && ((uintptr_t)dst % 16) == 0 &&
             ((uintptr_t)s0 % 16) == 0 && ((uintptr_t)s1 % 16) == 0;
  void *args[3] = {&dst, &s0, &s1};
  const unsigned *grid = vec ? k->grid_vec : k->grid;
  dim3 g = {grid[0], grid[1], grid[2]};
  dim3 b = {k->block[0], k->block[1], k->block[2]};
  CU(cudaLaunchKernel((const void *)(vec ? h[1] : h[0]), g, b, args,
                      k->dynamic_smem, cb->stream));
  return EIN_OK;
}

/* A step's kernel (h: the step's handles, from handle_at(step, 0)); a
 * split reduction's pass 1 into the scratch buffer, then its pass 2 from
 * there into dst (stream order separates them). */
static ein_status run_kernel(cuda_backend *cb, const ein_cuda_step *cs,
                             void *const *h, char *dst, const char *s0,
                             const char *s1, char *scratch,
                             ein_error_rec *err) {
  if (cs->kernel.kind == EIN_KERNEL_NONE)
    return EIN_OK;
  if (cs->finish.kind == EIN_KERNEL_NONE)
    return launch(cb, &cs->kernel, h, dst, s0, s1, err);
  ein_status st = launch(cb, &cs->kernel, h, scratch, s0, s1, err);
  if (st)
    return st;
  return launch(cb, &cs->finish, h + 2, dst, scratch, NULL, err);
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

static bool program_has_lt(const ein_cuda_program *prog) {
  for (int i = 0; i < prog->nsteps; i++)
    if (prog->steps[i].cublas && prog->steps[i].gemm.lt_fp8) return true;
  return false;
}

/* The cuBLAS handle and its 32 MiB workspace, made by the first plan that
 * has a GEMM (about 20 ms and the memory, which a plan of kernels alone
 * never needs), after opening the cuBLAS library (~150 ms) if no plan did
 * yet; then set to the run's stream. With cb->lock held. */
static ein_status blas_ready(cuda_backend *cb, const ein_cuda_program *prog,
                             ein_error_rec *err) {
  bool gemm = false;
  for (int i = 0; i < prog->nsteps && !gemm; i++) gemm = prog->steps[i].cublas;
  if (!gemm) return EIN_OK;
  if (!cb->blas) {
    ein_status st = ein_cuda_lib_require(EIN_LIB_CUBLAS, err);
    if (st)
      return st;
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
  if (!cb->lt && program_has_lt(prog)) {
    ein_status st = ein_cuda_lib_require(EIN_LIB_CUBLASLT, err);
    if (st)
      return st;
    BLAS(cublasLtCreate, (&cb->lt));
  }
  BLAS(cublasSetStream, (cb->blas, cb->stream));
  return EIN_OK;
}

/* cuBLAS and every kernel are ready before the first step is queued. */
/* What a CUDA run's steps share: the backend, the program, the kernel
 * handles resolved for it and the split reductions' scratch. */
typedef struct cuda_run_ctx {
  cuda_backend *cb;
  char *const *inputs; /* the FP8 GEMM's scales are among them */
  const ein_cuda_program *prog;
  void *const *handles;
  bool kept;
  char *scratch;
} cuda_run_ctx;

/* One step queued on cb->stream (the caller records the marks' events
 * there): a cuBLAS GEMM or the step's kernel. */
static ein_status cuda_step(void *ctx, int i, const ein_step *s, char *dst,
                            const char *src[2], ein_error_rec *err) {
  cuda_run_ctx *r = ctx;
  const ein_cuda_step *cs = &r->prog->steps[i];
  if (r->kept && !cs->cublas && cs->kernel.kind != EIN_KERNEL_NONE)
    r->cb->kept_launches += cs->finish.kind == EIN_KERNEL_NONE ? 1 : 2;
  if (cs->cublas && cs->gemm.lt_fp8)
    return run_lt(r->cb, s, &cs->gemm, r->inputs, dst, src[0], src[1], err);
  return cs->cublas
             ? run_gemm(r->cb, s, &cs->gemm, dst, src[0], src[1], err)
             : run_kernel(r->cb, cs, r->handles + handle_at(i, 0), dst,
                          src[0], src[1], r->scratch, err);
}

static ein_status run_steps(cuda_backend *cb, const ein_plan_ir *plan,
                            const ein_cuda_plan_program *pp,
                            char *const *inputs, char *output,
                            char *workspace, char *scratch,
                            const ein_step_marks *marks, ein_error_rec *err) {
  cuda_run_ctx r = {.cb = cb, .inputs = inputs, .prog = pp->cuda,
                    .scratch = scratch};
  ein_status st = blas_ready(cb, r.prog, err);
  if (!st)
    st = kernel_handles(cb, pp, &r.handles, &r.kept, err);
  if (st) return st;
  return ein_run_steps(plan, inputs, output, workspace, marks, cuda_step, &r,
                       err);
}

static ein_status cuda_run(ein_backend *self, const ein_plan_ir *plan,
                           const void *program, char *const *inputs,
                           char *output, const ein_step_marks *marks,
                           ein_error_rec *err) {
  cuda_backend *cb = (cuda_backend *)self;
  const ein_cuda_plan_program *pp = program;
  const ein_cuda_program *prog = pp ? pp->cuda : NULL;
  if (!prog || prog->nsteps != plan->nsteps)
    return ein_fail_internal(err, "cuda backend: the plan has no CUDA program");
  int prev;
  ein_status st = ein_cuda_enter(cb->device, &prev, err);
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
    st = run_steps(cb, plan, pp, inputs, output, ws,
                   prog->scratch_bytes ? (char *)ws + scratch_at : NULL,
                   marks, err);
  if (ws)
    cudaFreeAsync(ws, cb->stream);
  pthread_mutex_unlock(&cb->lock);
  ein_cuda_leave(cb->device, prev);
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
  /* Kept GEMM pointer arrays: pool memory, freed before the pool goes. */
  for (int i = 0; i < PTR_ARRAY_SLOTS; i++)
    if (cb->arrays[i].dev)
      cudaFreeAsync(cb->arrays[i].dev, cb->own_stream);
  if (cb->own_stream)
    cudaStreamSynchronize(cb->own_stream);
  ein_kcache_destroy(cb->kernels);
  if (cb->lt)
    cublasLtDestroy(cb->lt);
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

/* A run's temporaries from the stream-ordered pool, on the current
 * stream (ein_backend.temp_alloc). */
static ein_status cuda_temp_alloc(ein_backend *self, size_t bytes, void **ptr,
                                  ein_error_rec *err) {
  cuda_backend *cb = (cuda_backend *)self;
  int prev;
  ein_status st = ein_cuda_enter(cb->device, &prev, err);
  if (st)
    return st;
  pthread_mutex_lock(&cb->lock);
  st = workspace_alloc(cb, bytes ? (int64_t)bytes : 1, ptr, err);
  pthread_mutex_unlock(&cb->lock);
  ein_cuda_leave(cb->device, prev);
  return st;
}

static void cuda_temp_free(ein_backend *self, void *ptr) {
  cuda_backend *cb = (cuda_backend *)self;
  ein_error_rec ignored = {0};
  int prev;
  if (ein_cuda_enter(cb->device, &prev, &ignored))
    return;
  pthread_mutex_lock(&cb->lock);
  cudaFreeAsync(ptr, cb->stream);
  pthread_mutex_unlock(&cb->lock);
  ein_cuda_leave(cb->device, prev);
}

static ein_status cuda_copy(ein_backend *self, void *dst, const void *src,
                            size_t bytes, ein_copy_dir dir,
                            ein_error_rec *err) {
  (void)self;
  return dir == EIN_COPY_TO_DEVICE ? ein_cuda_copy_to_device(dst, src, bytes, err)
                                   : ein_cuda_copy_to_host(dst, src, bytes, err);
}

static ein_status free_info(size_t *free_bytes, size_t *total,
                            ein_error_rec *err) {
  CU(cudaMemGetInfo(free_bytes, total));
  return EIN_OK;
}

static ein_status cuda_free_memory(ein_backend *self, int64_t *bytes,
                                   ein_error_rec *err) {
  int device = ((cuda_backend *)self)->device, prev;
  ein_status st = ein_cuda_enter(device, &prev, err);
  if (st) return st;
  size_t free_bytes = 0, total = 0;
  st = free_info(&free_bytes, &total, err);
  ein_cuda_leave(device, prev);
  if (!st) *bytes = (int64_t)free_bytes;
  return st;
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
  ein_status st = ein_cuda_enter(cb->device, &prev, err);
  if (st)
    return st;
  pthread_mutex_lock(&cb->lock);
  cudaStream_t stream = cb->stream;
  pthread_mutex_unlock(&cb->lock);
  cudaError_t e = cudaStreamSynchronize(stream);
  ein_cuda_leave(cb->device, prev);
  if (e != cudaSuccess)
    return ein_cuda_fail(err, "cudaStreamSynchronize", e);
  return EIN_OK;
}

static void cuda_stats(ein_backend *be, ein_backend_stats *out) {
  cuda_backend *cb = (cuda_backend *)be;
  pthread_mutex_lock(&cb->lock);
  ein_kcache_stats s = ein_kcache_get_stats(cb->kernels);
  uint64_t kept = cb->kept_launches, fp8 = cb->fp8_gemms;
  pthread_mutex_unlock(&cb->lock);
  out->memory_hits = s.memory_hits + kept;
  out->disk_hits = s.disk_hits;
  out->compiles = s.compiles;
  out->fp8_gemms = fp8;
}

static ein_status setup(cuda_backend *cb, ein_error_rec *err) {
  int major = 0, minor = 0;
  CU(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor,
                            cb->device));
  CU(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor,
                            cb->device));
  cb->arch = major * 10 + minor;
  cb->base.sm = cb->arch;
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

/* Opens the runtime only: cuBLAS and NVRTC wait for a run that needs
 * them (blas_ready, the kernel cache's compile). */
ein_backend *ein_cuda_backend_create(int device, ein_error_rec *err) {
  if (ein_cuda_lib_require(EIN_LIB_CUDART, err))
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
  cb->base.run = cuda_run;
  cb->base.alloc = cuda_alloc;
  cb->base.free = cuda_free;
  cb->base.temp_alloc = cuda_temp_alloc;
  cb->base.temp_free = cuda_temp_free;
  cb->base.copy = cuda_copy;
  cb->base.free_memory = cuda_free_memory;
  cb->base.sync = cuda_sync;
  cb->base.set_stream = cuda_set_stream;
  cb->base.stats = cuda_stats;
  cb->base.destroy = cuda_destroy;
  int prev;
  t0 = ein_trace_now();
  ein_status st = ein_cuda_enter(device, &prev, err);
  if (!st) {
    st = setup(cb, err);
    ein_cuda_leave(device, prev);
  }
  ein_trace_end("cuda: open the device (context, stream, memory pool)", t0);
  if (st) {
    cuda_destroy(&cb->base);
    return NULL;
  }
  return &cb->base;
}
