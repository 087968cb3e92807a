/*
 * cuda_libs.c - the CUDA runtime, cuBLAS and NVRTC opened with dlopen on
 * first use (cuda_libs.h).
 *
 * One list below names every CUDA function einc calls. From it come a
 * pointer per function, the dlsym that fills it when its library is
 * opened, and a forwarder with the header's own name and prototype that
 * calls through the pointer. The headers rename some functions with
 * macros (cublasCreate is cublasCreate_v2); the forwarder's name and the
 * dlsym string are both taken after macro expansion, so they are the
 * real symbol, and the compiler checks each prototype against the header.
 * Forwarders have hidden visibility: libein.so must not hand its versions
 * to a program that links the real libraries.
 *
 * A library counts as loaded only when every function of it resolves, so
 * a forwarder either calls the real function or returns the library's
 * generic failure; it never calls a null pointer. Each library is opened
 * under its own pthread_once, which also orders the pointer writes before
 * any forwarder reads them.
 */
#include "cuda_libs.h"
#include "trace.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nvrtc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef EIN_CUDA_MAJOR
#error "the build defines EIN_CUDA_MAJOR, the toolkit's major version"
#endif
#ifndef EIN_CUDA_LIBDIR
#define EIN_CUDA_LIBDIR ""
#endif

/* Stringized after expansion: the symbol a header macro stands for. */
#define EIN_STR_(x) #x
#define EIN_STR(x) EIN_STR_(x)
#define EIN_HIDDEN __attribute__((visibility("hidden")))

/* What a forwarder returns when its library is not loaded. */
#define RT_FAIL cudaErrorInitializationError
#define BLAS_FAIL CUBLAS_STATUS_NOT_INITIALIZED
#define NVRTC_FAIL NVRTC_ERROR_INTERNAL_ERROR
#define RT_NAME "cudaErrorInitializationError"
#define RT_TEXT "the CUDA runtime library is not loaded"
#define BLAS_NAME "CUBLAS_STATUS_NOT_INITIALIZED"
#define BLAS_TEXT "the cuBLAS library is not loaded"
#define NVRTC_TEXT "NVRTC_ERROR_INTERNAL_ERROR (the NVRTC library is not loaded)"

#define RT EIN_LIB_CUDART
#define BLAS EIN_LIB_CUBLAS
#define NVRTC EIN_LIB_NVRTC
#define BLASLT EIN_LIB_CUBLASLT

/* X(library, return type, value when not loaded, name, (parameters),
 * (arguments)): every CUDA, cuBLAS, cuBLASLt and NVRTC function einc
 * calls. */
#define EIN_CUDA_FUNCTIONS(X)                                                  \
  X(RT, cudaError_t, RT_FAIL, cudaDeviceGetAttribute,                          \
    (int *v, enum cudaDeviceAttr a, int d), (v, a, d))                         \
  X(RT, cudaError_t, RT_FAIL, cudaEventCreate, (cudaEvent_t *e), (e))          \
  X(RT, cudaError_t, RT_FAIL, cudaEventDestroy, (cudaEvent_t e), (e))          \
  X(RT, cudaError_t, RT_FAIL, cudaEventElapsedTime,                            \
    (float *ms, cudaEvent_t a, cudaEvent_t b), (ms, a, b))                     \
  X(RT, cudaError_t, RT_FAIL, cudaEventRecord,                                 \
    (cudaEvent_t e, cudaStream_t s), (e, s))                                   \
  X(RT, cudaError_t, RT_FAIL, cudaEventSynchronize, (cudaEvent_t e), (e))      \
  X(RT, cudaError_t, RT_FAIL, cudaFree, (void *p), (p))                        \
  X(RT, cudaError_t, RT_FAIL, cudaFreeAsync, (void *p, cudaStream_t s),        \
    (p, s))                                                                    \
  X(RT, cudaError_t, RT_FAIL, cudaGetDevice, (int *d), (d))                    \
  X(RT, cudaError_t, RT_FAIL, cudaGetDeviceCount, (int *n), (n))               \
  X(RT, cudaError_t, RT_FAIL, cudaGetDeviceProperties,                         \
    (struct cudaDeviceProp * p, int d), (p, d))                                \
  X(RT, const char *, RT_NAME, cudaGetErrorName, (cudaError_t e), (e))         \
  X(RT, const char *, RT_TEXT, cudaGetErrorString, (cudaError_t e), (e))       \
  X(RT, cudaError_t, RT_FAIL, cudaGetLastError, (void), ())                    \
  X(RT, cudaError_t, RT_FAIL, cudaLaunchKernel,                                \
    (const void *f, dim3 g, dim3 b, void **args, size_t shm, cudaStream_t s),  \
    (f, g, b, args, shm, s))                                                   \
  X(RT, cudaError_t, RT_FAIL, cudaLibraryGetKernel,                            \
    (cudaKernel_t * k, cudaLibrary_t l, const char *name), (k, l, name))       \
  X(RT, cudaError_t, RT_FAIL, cudaLibraryLoadData,                             \
    (cudaLibrary_t * l, const void *code, enum cudaJitOption *jo,              \
     void **jv, unsigned jn, enum cudaLibraryOption *lo, void **lv,            \
     unsigned ln),                                                             \
    (l, code, jo, jv, jn, lo, lv, ln))                                         \
  X(RT, cudaError_t, RT_FAIL, cudaLibraryUnload, (cudaLibrary_t l), (l))       \
  X(RT, cudaError_t, RT_FAIL, cudaMalloc, (void **p, size_t n), (p, n))        \
  X(RT, cudaError_t, RT_FAIL, cudaMallocFromPoolAsync,                         \
    (void **p, size_t n, cudaMemPool_t m, cudaStream_t s), (p, n, m, s))       \
  X(RT, cudaError_t, RT_FAIL, cudaMemGetInfo, (size_t * f, size_t * t),      \
    (f, t))                                                                    \
  X(RT, cudaError_t, RT_FAIL, cudaMemPoolCreate,                               \
    (cudaMemPool_t * m, const struct cudaMemPoolProps *p), (m, p))             \
  X(RT, cudaError_t, RT_FAIL, cudaMemPoolDestroy, (cudaMemPool_t m), (m))      \
  X(RT, cudaError_t, RT_FAIL, cudaMemPoolSetAttribute,                         \
    (cudaMemPool_t m, enum cudaMemPoolAttr a, void *v), (m, a, v))             \
  X(RT, cudaError_t, RT_FAIL, cudaMemPoolTrimTo,                               \
    (cudaMemPool_t m, size_t keep), (m, keep))                                 \
  X(RT, cudaError_t, RT_FAIL, cudaMemcpy,                                      \
    (void *d, const void *s, size_t n, enum cudaMemcpyKind k), (d, s, n, k))   \
  X(RT, cudaError_t, RT_FAIL, cudaMemcpyAsync,                                 \
    (void *d, const void *s, size_t n, enum cudaMemcpyKind k,                  \
     cudaStream_t st),                                                         \
    (d, s, n, k, st))                                                          \
  X(RT, cudaError_t, RT_FAIL, cudaMemset, (void *p, int v, size_t n),          \
    (p, v, n))                                                                 \
  X(RT, cudaError_t, RT_FAIL, cudaRuntimeGetVersion, (int *v), (v))           \
  X(RT, cudaError_t, RT_FAIL, cudaSetDevice, (int d), (d))                     \
  X(RT, cudaError_t, RT_FAIL, cudaStreamCreate, (cudaStream_t * s), (s))       \
  X(RT, cudaError_t, RT_FAIL, cudaStreamCreateWithFlags,                       \
    (cudaStream_t * s, unsigned f), (s, f))                                    \
  X(RT, cudaError_t, RT_FAIL, cudaStreamDestroy, (cudaStream_t s), (s))        \
  X(RT, cudaError_t, RT_FAIL, cudaStreamSynchronize, (cudaStream_t s), (s))    \
  X(BLAS, cublasStatus_t, BLAS_FAIL, cublasCreate, (cublasHandle_t * h), (h))  \
  X(BLAS, cublasStatus_t, BLAS_FAIL, cublasDestroy, (cublasHandle_t h), (h))   \
  X(BLAS, cublasStatus_t, BLAS_FAIL, cublasGemmBatchedEx,                      \
    (cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,      \
     int n, int k, const void *alpha, const void *const a[], cudaDataType at,  \
     int lda, const void *const b[], cudaDataType bt, int ldb,                 \
     const void *beta, void *const c[], cudaDataType ct, int ldc, int count,   \
     cublasComputeType_t comp, cublasGemmAlgo_t algo),                         \
    (h, ta, tb, m, n, k, alpha, a, at, lda, b, bt, ldb, beta, c, ct, ldc,      \
     count, comp, algo))                                                       \
  X(BLAS, cublasStatus_t, BLAS_FAIL, cublasGemmEx,                             \
    (cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,      \
     int n, int k, const void *alpha, const void *a, cudaDataType at, int lda, \
     const void *b, cudaDataType bt, int ldb, const void *beta, void *c,       \
     cudaDataType ct, int ldc, cublasComputeType_t comp,                       \
     cublasGemmAlgo_t algo),                                                   \
    (h, ta, tb, m, n, k, alpha, a, at, lda, b, bt, ldb, beta, c, ct, ldc,      \
     comp, algo))                                                              \
  X(BLAS, cublasStatus_t, BLAS_FAIL, cublasGemmStridedBatchedEx,               \
    (cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,      \
     int n, int k, const void *alpha, const void *a, cudaDataType at, int lda, \
     long long sa, const void *b, cudaDataType bt, int ldb, long long sb,      \
     const void *beta, void *c, cudaDataType ct, int ldc, long long sc,        \
     int count, cublasComputeType_t comp, cublasGemmAlgo_t algo),              \
    (h, ta, tb, m, n, k, alpha, a, at, lda, sa, b, bt, ldb, sb, beta, c, ct,   \
     ldc, sc, count, comp, algo))                                              \
  X(BLAS, const char *, BLAS_NAME, cublasGetStatusName, (cublasStatus_t s),    \
    (s))                                                                       \
  X(BLAS, const char *, BLAS_TEXT, cublasGetStatusString,                      \
    (cublasStatus_t s), (s))                                                   \
  X(BLAS, cublasStatus_t, BLAS_FAIL, cublasSetStream,                          \
    (cublasHandle_t h, cudaStream_t s), (h, s))                                \
  X(BLAS, cublasStatus_t, BLAS_FAIL, cublasSetWorkspace,                       \
    (cublasHandle_t h, void *w, size_t n), (h, w, n))                          \
  X(BLASLT, cublasStatus_t, BLAS_FAIL, cublasLtCreate,                         \
    (cublasLtHandle_t * h), (h))                                               \
  X(BLASLT, cublasStatus_t, BLAS_FAIL, cublasLtDestroy, (cublasLtHandle_t h),  \
    (h))                                                                       \
  X(BLASLT, cublasStatus_t, BLAS_FAIL, cublasLtMatmul,                         \
    (cublasLtHandle_t h, cublasLtMatmulDesc_t d, const void *alpha,            \
     const void *A, cublasLtMatrixLayout_t la, const void *B,                  \
     cublasLtMatrixLayout_t lb, const void *beta, const void *C,               \
     cublasLtMatrixLayout_t lc, void *D, cublasLtMatrixLayout_t ld,            \
     const cublasLtMatmulAlgo_t *algo, void *ws, size_t wsn, cudaStream_t s),  \
    (h, d, alpha, A, la, B, lb, beta, C, lc, D, ld, algo, ws, wsn, s))         \
  X(BLASLT, cublasStatus_t, BLAS_FAIL, cublasLtMatmulAlgoGetHeuristic,         \
    (cublasLtHandle_t h, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t la,    \
     cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t lc,                     \
     cublasLtMatrixLayout_t ld, cublasLtMatmulPreference_t p, int n,           \
     cublasLtMatmulHeuristicResult_t *r, int *found),                          \
    (h, d, la, lb, lc, ld, p, n, r, found))                                    \
  X(BLASLT, cublasStatus_t, BLAS_FAIL, cublasLtMatmulDescCreate,               \
    (cublasLtMatmulDesc_t * d, cublasComputeType_t c, cudaDataType_t s),       \
    (d, c, s))                                                                 \
  X(BLASLT, cublasStatus_t, BLAS_FAIL, cublasLtMatmulDescDestroy,              \
    (cublasLtMatmulDesc_t d), (d))                                             \
  X(BLASLT, cublasStatus_t, BLAS_FAIL, cublasLtMatmulDescSetAttribute,         \
    (cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, const void *v,  \
     size_t n),                                                                \
    (d, a, v, n))                                                              \
  X(BLASLT, cublasStatus_t, BLAS_FAIL, cublasLtMatmulPreferenceCreate,         \
    (cublasLtMatmulPreference_t * p), (p))                                     \
  X(BLASLT, cublasStatus_t, BLAS_FAIL, cublasLtMatmulPreferenceDestroy,        \
    (cublasLtMatmulPreference_t p), (p))                                       \
  X(BLASLT, cublasStatus_t, BLAS_FAIL, cublasLtMatmulPreferenceSetAttribute,   \
    (cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t a,     \
     const void *v, size_t n),                                                 \
    (p, a, v, n))                                                              \
  X(BLASLT, cublasStatus_t, BLAS_FAIL, cublasLtMatrixLayoutCreate,             \
    (cublasLtMatrixLayout_t * l, cudaDataType t, uint64_t r, uint64_t c,       \
     int64_t ld),                                                              \
    (l, t, r, c, ld))                                                          \
  X(BLASLT, cublasStatus_t, BLAS_FAIL, cublasLtMatrixLayoutDestroy,            \
    (cublasLtMatrixLayout_t l), (l))                                           \
  X(BLASLT, cublasStatus_t, BLAS_FAIL, cublasLtMatrixLayoutSetAttribute,       \
    (cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t a,              \
     const void *v, size_t n),                                                 \
    (l, a, v, n))                                                              \
  X(NVRTC, nvrtcResult, NVRTC_FAIL, nvrtcCompileProgram,                       \
    (nvrtcProgram p, int n, const char *const *opts), (p, n, opts))            \
  X(NVRTC, nvrtcResult, NVRTC_FAIL, nvrtcCreateProgram,                        \
    (nvrtcProgram * p, const char *src, const char *name, int nh,              \
     const char *const *headers, const char *const *names),                    \
    (p, src, name, nh, headers, names))                                        \
  X(NVRTC, nvrtcResult, NVRTC_FAIL, nvrtcDestroyProgram, (nvrtcProgram * p),   \
    (p))                                                                       \
  X(NVRTC, nvrtcResult, NVRTC_FAIL, nvrtcGetCUBIN,                             \
    (nvrtcProgram p, char *cubin), (p, cubin))                                 \
  X(NVRTC, nvrtcResult, NVRTC_FAIL, nvrtcGetCUBINSize,                         \
    (nvrtcProgram p, size_t *n), (p, n))                                       \
  X(NVRTC, const char *, NVRTC_TEXT, nvrtcGetErrorString, (nvrtcResult r),     \
    (r))                                                                       \
  X(NVRTC, nvrtcResult, NVRTC_FAIL, nvrtcGetNumSupportedArchs, (int *n), (n)) \
  X(NVRTC, nvrtcResult, NVRTC_FAIL, nvrtcGetSupportedArchs, (int *archs),      \
    (archs))                                                                   \
  X(NVRTC, nvrtcResult, NVRTC_FAIL, nvrtcGetProgramLog,                        \
    (nvrtcProgram p, char *log), (p, log))                                     \
  X(NVRTC, nvrtcResult, NVRTC_FAIL, nvrtcGetProgramLogSize,                    \
    (nvrtcProgram p, size_t *n), (p, n))                                       \
  X(NVRTC, nvrtcResult, NVRTC_FAIL, nvrtcVersion, (int *major, int *minor),    \
    (major, minor))

/* The real functions, filled when their library is opened. */
#define POINTER(lib, ret, fail, name, params, args)                            \
  static ret(*p_##name) params;
EIN_CUDA_FUNCTIONS(POINTER)

/* ------------------------------------------------------------ loading */

typedef struct lib_info {
  const char *base;  /* "cudart": the soname is lib<base>.so.<major> */
  const char *env;   /* variable naming a file to load instead */
  const char *what;  /* for messages, after the soname */
  const char *wheel; /* the PyPI package that ships it */
} lib_info;

static const lib_info infos[] = {
    [EIN_LIB_CUDART] = {"cudart", "EINC_CUDART", "the CUDA runtime",
                        "nvidia-cuda-runtime"},
    [EIN_LIB_CUBLAS] = {"cublas", "EINC_CUBLAS", "cuBLAS", "nvidia-cublas"},
    [EIN_LIB_NVRTC] = {"nvrtc", "EINC_NVRTC",
                       "NVRTC, the CUDA run-time compiler",
                       "nvidia-cuda-nvrtc"},
    [EIN_LIB_CUBLASLT] = {"cublasLt", "EINC_CUBLASLT",
                          "cuBLASLt (FP8 GEMMs)", "nvidia-cublas"},
};

typedef struct lib_state {
  pthread_once_t once;
  bool ok;
  char why[1024]; /* why it is not loaded */
} lib_state;

static lib_state states[] = {
    [EIN_LIB_CUDART] = {.once = PTHREAD_ONCE_INIT},
    [EIN_LIB_CUBLAS] = {.once = PTHREAD_ONCE_INIT},
    [EIN_LIB_NVRTC] = {.once = PTHREAD_ONCE_INIT},
    [EIN_LIB_CUBLASLT] = {.once = PTHREAD_ONCE_INIT},
};

static void soname(ein_cuda_lib lib, char *buf, size_t cap) {
  snprintf(buf, cap, "lib%s.so.%d", infos[lib].base, EIN_CUDA_MAJOR);
}

/* lib/name opened from the first directory that has it; the directories
 * tried in vain are listed in `tried`. Unset or repeated ones are skipped. */
static void *open_in_dirs(const char *const *dirs, int n, const char *name,
                          char *tried, size_t cap) {
  for (int i = 0; i < n; i++) {
    bool seen = !dirs[i][0];
    for (int j = 0; j < i && !seen; j++)
      seen = strcmp(dirs[i], dirs[j]) == 0;
    if (seen)
      continue;
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dirs[i], name);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h)
      return h;
    size_t used = strlen(tried);
    snprintf(tried + used, cap - used, "%s%s", used ? ", " : "", dirs[i]);
  }
  return NULL;
}

/* "$VAR/lib64", or "" when VAR is unset or empty. */
static void lib64_of(const char *var, char *buf, size_t cap) {
  const char *root = getenv(var);
  snprintf(buf, cap, "%s%s", root && *root ? root : "",
           root && *root ? "/lib64" : "");
}

/* The library's handle, or NULL with the reason in st->why. The soname's
 * own error is the one reported: it says what the loader looked for. */
static void *open_lib(ein_cuda_lib lib, lib_state *st) {
  const char *file = getenv(infos[lib].env);
  if (file && *file) {
    void *h = dlopen(file, RTLD_NOW | RTLD_LOCAL);
    if (!h)
      snprintf(st->why, sizeof st->why, "%s (named by %s)", dlerror(),
               infos[lib].env);
    return h;
  }
  char name[64];
  soname(lib, name, sizeof name);
  void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (h)
    return h;
  snprintf(st->why, sizeof st->why, "%s", dlerror());
  /* RUNPATH no longer points at the toolkit: look where the build found
   * it and where the usual variables say it is. */
  char home[4096], path[4096], tried[2048] = "";
  lib64_of("CUDA_HOME", home, sizeof home);
  lib64_of("CUDA_PATH", path, sizeof path);
  const char *dirs[] = {EIN_CUDA_LIBDIR, home, path};
  h = open_in_dirs(dirs, 3, name, tried, sizeof tried);
  if (!h && tried[0]) {
    size_t used = strlen(st->why);
    snprintf(st->why + used, sizeof st->why - used, " (nor is it in %s)",
             tried);
  }
  return h;
}

/* Stores dlsym's answer in a function pointer (POSIX guarantees that a
 * data pointer holds a function's address). */
static bool resolve(void *handle, const char *symbol, void *slot) {
  void *sym = dlsym(handle, symbol);
  if (sym)
    memcpy(slot, &sym, sizeof sym);
  return sym != NULL;
}

/* Opens lib and resolves all of its functions; states[lib] says how it
 * went. A handle whose functions are not all there stays open, unused. */
static void load(ein_cuda_lib lib) {
  lib_state *st = &states[lib];
  const char *off = getenv("EINC_CUDA_LIBS_DISABLE");
  if (off && *off && strcmp(off, "0") != 0) {
    snprintf(st->why, sizeof st->why,
             "loading is disabled by EINC_CUDA_LIBS_DISABLE=%s", off);
    return;
  }
  void *h = open_lib(lib, st);
  if (!h)
    return;
  const char *missing = NULL;
#define RESOLVE(l, ret, fail, name, params, args)                              \
  if (l == lib && !missing && !resolve(h, EIN_STR(name), &p_##name))           \
    missing = EIN_STR(name);
  EIN_CUDA_FUNCTIONS(RESOLVE)
#undef RESOLVE
  if (missing) {
    char name[64];
    soname(lib, name, sizeof name);
    snprintf(st->why, sizeof st->why,
             "%s was found but has no %s (an older or damaged copy?)", name,
             missing);
    return;
  }
  st->ok = true;
}

/* fork() (docs/design.md, "Fork safety"): CUDA cannot be used in a child
 * forked after the parent initialised it (the driver's state, its
 * threads and its device mappings stay with the parent; calls fail or
 * hang). einc loads the runtime only to call it, so a child forked after
 * the runtime was loaded is marked, and there the runtime and cuBLAS
 * count as not loaded: every forwarder fails without calling CUDA, and
 * ein_cuda_lib_require says why. NVRTC, a compiler, still works. */
static atomic_bool forked_after_load;

static void mark_forked_child(void) {
  atomic_store_explicit(&forked_after_load, true, memory_order_relaxed);
}

static bool unusable_after_fork(ein_cuda_lib lib) {
  return lib != EIN_LIB_NVRTC &&
         atomic_load_explicit(&forked_after_load, memory_order_relaxed);
}

/* Each library is opened once (pthread_once); the trace shows its cost. */
static void load_cudart(void) {
  double t0 = ein_trace_now();
  load(EIN_LIB_CUDART);
  if (states[EIN_LIB_CUDART].ok)
    pthread_atfork(NULL, NULL, mark_forked_child);
  ein_trace_end("cuda: open the CUDA runtime library", t0);
}
static void load_cublas(void) {
  double t0 = ein_trace_now();
  load(EIN_LIB_CUBLAS);
  ein_trace_end("cuda: open the cuBLAS library", t0);
}
static void load_nvrtc(void) {
  double t0 = ein_trace_now();
  load(EIN_LIB_NVRTC);
  ein_trace_end("cuda: open the NVRTC library", t0);
}
static void load_cublaslt(void) {
  double t0 = ein_trace_now();
  load(EIN_LIB_CUBLASLT);
  ein_trace_end("cuda: open the cuBLASLt library", t0);
}

static bool ready(ein_cuda_lib lib) {
  static void (*const loaders[])(void) = {load_cudart, load_cublas,
                                          load_nvrtc, load_cublaslt};
  pthread_once(&states[lib].once, loaders[lib]);
  return states[lib].ok && !unusable_after_fork(lib);
}

ein_status ein_cuda_lib_require(ein_cuda_lib lib, ein_error_rec *err) {
  if (ready(lib))
    return EIN_OK;
  if (unusable_after_fork(lib))
    return ein_fail_device(
        err,
        "CUDA cannot be used in this process: it was forked (fork()) after "
        "its parent had loaded the CUDA runtime, and CUDA's state does not "
        "survive fork(); start the process with 'spawn' or 'forkserver' "
        "(multiprocessing's start method, DataLoader(multiprocessing_context"
        "='spawn')), or use the CPU here");
  const lib_info *li = &infos[lib];
  char name[64], wheel[96];
  soname(lib, name, sizeof name);
  /* From CUDA 13 on, PyPI's wheels are versioned (nvidia-cublas==13.*)
   * instead of named per release (nvidia-cublas-cu12). */
  if (EIN_CUDA_MAJOR >= 13)
    snprintf(wheel, sizeof wheel, "'%s==%d.*'", li->wheel, EIN_CUDA_MAJOR);
  else
    snprintf(wheel, sizeof wheel, "%s-cu%d", li->wheel, EIN_CUDA_MAJOR);
  return ein_fail_device(
      err,
      "the CUDA backend needs %s (%s, from CUDA %d), which could not be "
      "loaded: %s; install the CUDA %d toolkit, or `pip install %s` and "
      "add its lib directory to LD_LIBRARY_PATH (or name the file in %s)",
      name, li->what, EIN_CUDA_MAJOR, states[lib].why, EIN_CUDA_MAJOR, wheel,
      li->env);
}

ein_status ein_cuda_libs_require_all(ein_error_rec *err) {
  ein_status st = ein_cuda_lib_require(EIN_LIB_CUDART, err);
  if (!st)
    st = ein_cuda_lib_require(EIN_LIB_CUBLAS, err);
  if (!st)
    st = ein_cuda_lib_require(EIN_LIB_NVRTC, err);
  return st;
}

/* --------------------------------------------------------- forwarders */

#define FORWARD(lib, ret, fail, name, params, args)                            \
  EIN_HIDDEN ret name params { return ready(lib) ? p_##name args : (fail); }
EIN_CUDA_FUNCTIONS(FORWARD)
