/*
 * bench_cuda.c - a CUDA GPU as a bench_device: CUDA events on a stream the
 * bench owns (the context is told to queue there), cuBLAS GEMM 8192^3 in
 * the case's dtype and a 1 GiB device-to-device copy for the floors.
 */
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_device.h"
#include "cuda_libs.h"

typedef struct cuda_bench {
  bench_device base;
  ein_ctx *ctx; /* whose device memory the bench's buffers are */
  int device;
  cudaStream_t stream;
  cudaEvent_t start, stop;
  cublasHandle_t blas;
} cuda_bench;

static bool cuda_ok(cudaError_t e, const char *call, char *msg, size_t cap) {
  if (e == cudaSuccess) return true;
  snprintf(msg, cap, "%s failed: %s (%s)", call, cudaGetErrorName(e),
           cudaGetErrorString(e));
  return false;
}

static bool blas_ok(cublasStatus_t s, const char *call, char *msg,
                    size_t cap) {
  if (s == CUBLAS_STATUS_SUCCESS) return true;
  snprintf(msg, cap, "%s failed: %s", call, cublasGetStatusString(s));
  return false;
}

/* Buffers come from the library's public calls, as a user's would. */
static void *cuda_upload(bench_device *dev, const void *src, size_t bytes,
                         char *msg, size_t cap) {
  cuda_bench *cb = (cuda_bench *)dev;
  void *p = NULL;
  ein_status st =
      ein_device_alloc(cb->ctx, EIN_BACKEND_CUDA, cb->device, bytes, &p);
  if (!st && src)
    st = ein_device_copy(cb->ctx, EIN_BACKEND_CUDA, cb->device, p, src,
                         bytes, EIN_COPY_HOST_TO_DEVICE);
  if (!st) return p;
  snprintf(msg, cap, "%s", ein_last_error(cb->ctx)->message);
  ein_device_free(cb->ctx, EIN_BACKEND_CUDA, cb->device, p);
  return NULL;
}

static void cuda_release(bench_device *dev, void *p) {
  cuda_bench *cb = (cuda_bench *)dev;
  ein_device_free(cb->ctx, EIN_BACKEND_CUDA, cb->device, p);
}

static bool cuda_time(bench_device *dev, bench_work_fn work, void *arg,
                      int warmup, int runs, double *ms, char *msg,
                      size_t cap) {
  cuda_bench *cb = (cuda_bench *)dev;
  for (int r = 0; r < warmup; r++)
    if (!work(arg, r)) return false;
  if (!cuda_ok(cudaStreamSynchronize(cb->stream), "cudaStreamSynchronize",
               msg, cap))
    return false;
  for (int r = 0; r < runs; r++) {
    float t = 0;
    if (!cuda_ok(cudaEventRecord(cb->start, cb->stream), "cudaEventRecord",
                 msg, cap))
      return false;
    if (!work(arg, warmup + r)) return false;
    if (!cuda_ok(cudaEventRecord(cb->stop, cb->stream), "cudaEventRecord",
                 msg, cap) ||
        !cuda_ok(cudaEventSynchronize(cb->stop), "cudaEventSynchronize", msg,
                 cap) ||
        !cuda_ok(cudaEventElapsedTime(&t, cb->start, cb->stop),
                 "cudaEventElapsedTime", msg, cap))
      return false;
    ms[r] = t;
  }
  return true;
}

/* Per-step times on the GPU: an event recorded on the bench's stream at
 * each mark (the context queues the steps there), read once the run is
 * done. ev[i] is before step i, ev[n] after the last. */
typedef struct cuda_marks {
  cudaStream_t stream;
  cudaEvent_t *ev;
  cudaError_t failed; /* the first failed record */
} cuda_marks;

static void cuda_mark(void *arg, int step) {
  cuda_marks *m = arg;
  cudaError_t e = cudaEventRecord(m->ev[step], m->stream);
  if (e != cudaSuccess && m->failed == cudaSuccess) m->failed = e;
}

/* One marked run's step times into ms[0, nsteps). */
static bool marked_run(cuda_marks *m, bench_marked_fn work, void *arg,
                       int run, int nsteps, double *ms, char *msg,
                       size_t cap) {
  if (!work(arg, run, cuda_mark, m)) {
    *msg = '\0'; /* the work printed its failure */
    return false;
  }
  if (!cuda_ok(m->failed, "cudaEventRecord (step)", msg, cap) ||
      !cuda_ok(cudaEventSynchronize(m->ev[nsteps]), "cudaEventSynchronize",
               msg, cap))
    return false;
  for (int i = 0; i < nsteps; i++) {
    float t = 0;
    if (!cuda_ok(cudaEventElapsedTime(&t, m->ev[i], m->ev[i + 1]),
                 "cudaEventElapsedTime (step)", msg, cap))
      return false;
    ms[i] = t;
  }
  return true;
}

static bool cuda_time_steps(bench_device *dev, bench_marked_fn work,
                            void *arg, int runs, int nsteps, double *ms,
                            char *msg, size_t cap) {
  cuda_bench *cb = (cuda_bench *)dev;
  cuda_marks m = {cb->stream, calloc((size_t)nsteps + 1, sizeof *m.ev),
                  cudaSuccess};
  if (!m.ev) {
    snprintf(msg, cap, "out of memory");
    return false;
  }
  int made = 0;
  bool ok = true;
  for (; made <= nsteps && ok; made++)
    ok = cuda_ok(cudaEventCreate(&m.ev[made]), "cudaEventCreate", msg, cap);
  if (!ok) made--; /* the last create failed */
  for (int r = 0; r < runs && ok; r++)
    ok = marked_run(&m, work, arg, r, nsteps, ms + r * nsteps, msg, cap);
  for (int i = 0; i < made; i++) cudaEventDestroy(m.ev[i]);
  free(m.ev);
  return ok;
}

/* A floor measurement: a GEMM or a copy, timed by cuda_time like a case. */
typedef struct floor_op {
  cuda_bench *cb;
  bool gemm;
  int n;
  cudaDataType_t type;
  cublasComputeType_t compute;
  void *a, *c;
  size_t bytes;
  char *msg; /* where a failure is described */
  size_t cap;
} floor_op;

static bool floor_once(void *arg, int run) {
  floor_op *op = arg;
  (void)run;
  if (op->gemm) {
    float one32 = 1, zero32 = 0;
    double one64 = 1, zero64 = 0;
    bool f64 = op->compute == CUBLAS_COMPUTE_64F;
    return blas_ok(cublasGemmEx(op->cb->blas, CUBLAS_OP_N, CUBLAS_OP_N,
                                op->n, op->n, op->n,
                                f64 ? (void *)&one64 : (void *)&one32, op->a,
                                op->type, op->n, op->a, op->type, op->n,
                                f64 ? (void *)&zero64 : (void *)&zero32,
                                op->c, op->type, op->n, op->compute,
                                CUBLAS_GEMM_DEFAULT),
                   "cublasGemmEx (floor)", op->msg, op->cap);
  }
  return cuda_ok(cudaMemcpyAsync(op->c, op->a, op->bytes,
                                 cudaMemcpyDeviceToDevice, op->cb->stream),
                 "cudaMemcpyAsync (floor)", op->msg, op->cap);
}

/* Median milliseconds of `runs` operations after 2 warm-ups; negative on
 * error (described in op->msg). */
static double floor_time(floor_op *op, int runs) {
  double t[16];
  if (!cuda_time(&op->cb->base, floor_once, op, 2, runs, t, op->msg,
                 op->cap))
    return -1;
  return bench_median(t, runs);
}

static bool cuda_gemm_rate(bench_device *dev, ein_dtype dt, double *rate,
                           char *msg, size_t cap) {
  cuda_bench *cb = (cuda_bench *)dev;
  *rate = 0;
  floor_op op = {cb, true, 8192, CUDA_R_32F, CUBLAS_COMPUTE_32F,
                 NULL, NULL, 0, msg, cap};
  switch (dt) {
  case EIN_DT_F64: op.type = CUDA_R_64F, op.compute = CUBLAS_COMPUTE_64F;
    break;
  case EIN_DT_F32: break; /* FP32 compute, no TF32: what einc uses */
  case EIN_DT_F16: op.type = CUDA_R_16F; break;
  case EIN_DT_BF16: op.type = CUDA_R_16BF; break;
  default: return true; /* integers: no GEMM floor, memory only */
  }
  size_t count = (size_t)op.n * op.n, bytes = count * ein_dtype_size(dt);
  void *host = bench_random_data(dt, count, 88172645463325252ull);
  if (!host) {
    snprintf(msg, cap, "out of host memory for the GEMM floor");
    return false;
  }
  op.a = cuda_upload(dev, host, bytes, msg, cap);
  free(host);
  if (!op.a) return false;
  op.c = cuda_upload(dev, NULL, bytes, msg, cap);
  double ms = op.c ? floor_time(&op, 5) : -1;
  cuda_release(dev, op.a);
  cuda_release(dev, op.c);
  if (ms <= 0) return false;
  *rate = 2.0 * op.n * (double)op.n * op.n / (ms * 1e-3);
  return true;
}

static bool cuda_copy_rate(bench_device *dev, double *rate, char *msg,
                           size_t cap) {
  cuda_bench *cb = (cuda_bench *)dev;
  floor_op op = {cb, false, 0, CUDA_R_32F, CUBLAS_COMPUTE_32F,
                 NULL, NULL, (size_t)1 << 30, msg, cap};
  op.a = cuda_upload(dev, NULL, op.bytes, msg, cap);
  if (!op.a) return false;
  op.c = cuda_upload(dev, NULL, op.bytes, msg, cap);
  double ms = op.c ? floor_time(&op, 10) : -1;
  cuda_release(dev, op.a);
  cuda_release(dev, op.c);
  if (ms <= 0) return false;
  *rate = 2.0 * (double)op.bytes / (ms * 1e-3);
  return true;
}

static void cuda_close(bench_device *dev) {
  cuda_bench *cb = (cuda_bench *)dev;
  if (cb->blas) cublasDestroy(cb->blas);
  if (cb->start) cudaEventDestroy(cb->start);
  if (cb->stop) cudaEventDestroy(cb->stop);
  if (cb->stream) cudaStreamDestroy(cb->stream);
  free(cb);
}

bench_device *bench_cuda_open(int device, ein_ctx *ctx, char *msg,
                              size_t cap) {
  ein_error_rec err;
  ein_error_init(&err);
  if (ein_cuda_libs_require_all(&err)) {
    snprintf(msg, cap, "%s", err.message);
    ein_error_clear(&err);
    return NULL;
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || device >= count) {
    snprintf(msg, cap, "no CUDA device %d on this machine", device);
    return NULL;
  }
  cuda_bench *cb = calloc(1, sizeof *cb);
  if (!cb) {
    snprintf(msg, cap, "out of memory");
    return NULL;
  }
  cb->ctx = ctx;
  cb->device = device;
  struct cudaDeviceProp prop;
  int l2 = 0;
  bool ok = cuda_ok(cudaSetDevice(device), "cudaSetDevice", msg, cap) &&
            cuda_ok(cudaGetDeviceProperties(&prop, device),
                    "cudaGetDeviceProperties", msg, cap) &&
            cuda_ok(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize,
                                           device),
                    "cudaDeviceGetAttribute", msg, cap) &&
            cuda_ok(cudaStreamCreateWithFlags(&cb->stream,
                                              cudaStreamNonBlocking),
                    "cudaStreamCreate", msg, cap) &&
            cuda_ok(cudaEventCreate(&cb->start), "cudaEventCreate", msg,
                    cap) &&
            cuda_ok(cudaEventCreate(&cb->stop), "cudaEventCreate", msg,
                    cap) &&
            blas_ok(cublasCreate(&cb->blas), "cublasCreate", msg, cap) &&
            blas_ok(cublasSetStream(cb->blas, cb->stream), "cublasSetStream",
                    msg, cap);
  if (!ok) {
    cuda_close(&cb->base);
    return NULL;
  }
  static char name[16];
  snprintf(name, sizeof name, "cuda:%d", device);
  cb->base.name = name;
  snprintf(cb->base.description, sizeof cb->base.description, "%s",
           prop.name);
  cb->base.dl = (DLDevice){kDLCUDA, device};
  cb->base.cache_bytes = l2 > 0 ? l2 : 50 << 20;
  cb->base.upload = cuda_upload;
  cb->base.release = cuda_release;
  cb->base.time = cuda_time;
  cb->base.time_steps = cuda_time_steps;
  cb->base.gemm_rate = cuda_gemm_rate;
  cb->base.copy_rate = cuda_copy_rate;
  cb->base.close = cuda_close;
  ein_ctx_set_cuda_stream(ctx, cb->stream);
  return &cb->base;
}
