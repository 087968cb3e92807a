/*
 * cuda_libs.h - the CUDA runtime, cuBLAS, cuBLASLt and NVRTC, opened at
 * run time.
 *
 * einc links none of the CUDA libraries, so libein.so and einc load on a
 * machine that has none of them. cuda_libs.c defines every CUDA, cuBLAS
 * and NVRTC function einc calls, under the headers' own names, as a
 * forwarder to the real function; the library is opened with dlopen on
 * the first call into it. Callers keep including <cuda_runtime_api.h>,
 * <cublas_v2.h> and <nvrtc.h> and call the API as usual.
 *
 * A library is looked for by its soname (major version of the toolkit the
 * build saw, e.g. libcudart.so.13) on the loader's search path, then in
 * the toolkit's library directory found at build time, then in
 * $CUDA_HOME/lib64 and $CUDA_PATH/lib64. EINC_CUDART, EINC_CUBLAS,
 * EINC_CUBLASLT and EINC_NVRTC name a file to load instead (nothing else
 * is tried), and
 * EINC_CUDA_LIBS_DISABLE=1 makes every load fail (tests of the "not
 * installed" path on a machine that has the libraries). Each library is
 * opened at most once per process (thread-safe) and never closed: the
 * runtime's exit handlers must stay mapped.
 *
 * A forwarder whose library is missing returns that library's generic
 * failure (cudaErrorInitializationError, CUBLAS_STATUS_NOT_INITIALIZED,
 * NVRTC_ERROR_INTERNAL_ERROR; error-string functions return a sentence
 * saying the library is not loaded). Entry points that start CUDA work
 * call ein_cuda_lib_require first so the user is told what is missing.
 */
#ifndef EIN_CUDA_LIBS_H
#define EIN_CUDA_LIBS_H

#include <stdbool.h>

#include "error.h"

typedef enum ein_cuda_lib {
  EIN_LIB_CUDART,
  EIN_LIB_CUBLAS,
  EIN_LIB_NVRTC,
  EIN_LIB_CUBLASLT, /* FP8 GEMMs only: opened by the first one */
} ein_cuda_lib;

/* Opens lib on first use. EIN_OK when it and every function einc needs
 * from it are there; otherwise EIN_ERR_DEVICE with a message naming the
 * library, why it could not be loaded and how to install it. In a child
 * forked after the runtime was loaded, the runtime and cuBLAS are not
 * usable (their forwarders fail without calling CUDA): EIN_ERR_DEVICE
 * saying so (docs/design.md, "Fork safety"). */
ein_status ein_cuda_lib_require(ein_cuda_lib lib, ein_error_rec *err);

/* ein_cuda_lib_require for the runtime, cuBLAS and NVRTC in that order,
 * for `einc bench`, which calls all three itself. The backend opens the
 * runtime when it is created, cuBLAS when a plan with a GEMM first runs,
 * cuBLASLt when a plan with an FP8 GEMM first runs, and NVRTC when a
 * kernel must be compiled (cuda_backend.c). */
ein_status ein_cuda_libs_require_all(ein_error_rec *err);

#endif
