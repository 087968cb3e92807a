/*
 * cuda_program.h - how the CUDA backend runs each step of a plan, decided
 * once per plan and without a GPU.
 *
 * Takes: a plan (plan.h). Gives: per step either a cuBLAS call (GEMM steps
 * whose matrices cuBLAS can address: transposes, leading dims, a batch
 * that collapses to one stride or loops over the rest) or a generated
 * kernel (codegen.h) for LOOP and FILL steps and for GEMMs cuBLAS cannot
 * express. The runtime (runtime/cuda) only looks kernels up and launches.
 */
#ifndef EIN_CUDA_PROGRAM_H
#define EIN_CUDA_PROGRAM_H

#include <stdbool.h>
#include <stdint.h>

#include "codegen.h"
#include "loop_axes.h"
#include "plan.h"
#include "strbuf.h"

/* From this many outer batch iterations on, the runtime makes one
 * pointer-array call (cublasGemmBatchedEx) instead of a host loop. */
enum { EIN_CUBLAS_POINTER_ARRAY_MIN = 64 };

/* One column-major cuBLAS GEMM (cublasGemmStridedBatchedEx):
 * C = alpha op(A) op(B), batched `count` times with element strides, and
 * repeated over the outer batch axes `loops` (strides of cuBLAS's C, A, B;
 * none when the batch collapsed to one stride). */
typedef struct ein_cublas_gemm {
  bool a_is_step_a;      /* cuBLAS's A is the step's A (else its B) */
  bool trans_a, trans_b; /* op(A), op(B) are transposes */
  int64_t m, n, k, lda, ldb, ldc;
  int64_t count;
  int64_t stride_a, stride_b, stride_c; /* of cuBLAS's A, B and C */
  ein_loop_axes loops;
} ein_cublas_gemm;

/* True when the outer batch loops run as one pointer-array call. */
bool ein_cublas_pointer_array(const ein_cublas_gemm *g);

typedef struct ein_cuda_step {
  bool cublas;            /* a cuBLAS call; otherwise `kernel` */
  ein_cublas_gemm gemm;
  ein_kernel_src kernel;  /* kind EIN_KERNEL_NONE: nothing to run */
} ein_cuda_step;

typedef struct ein_cuda_program {
  int nsteps;
  ein_cuda_step *steps;
} ein_cuda_program;

/* Maps a GEMM step onto cuBLAS; false when it cannot (a dtype cuBLAS does
 * not take, strides without a unit dimension, a batch C stride of 0, or a
 * size past cuBLAS's 32-bit arguments). */
bool ein_cublas_map(const ein_step *step, ein_cublas_gemm *out);

/* Builds the program of a plan. EIN_ERR_NO_MEMORY or EIN_ERR_LIMIT. */
ein_status ein_cuda_program_build(const ein_plan_ir *plan,
                                  ein_cuda_program **out);

/* Frees a program (takes void * so plans can hold it opaquely). */
void ein_cuda_program_free(void *program);

/* ein_cuda_program_build for a backend table entry (backend.h): the CUDA
 * backend's and the emulated device's prepare, with the message on err. */
ein_status ein_cuda_prepare(const ein_plan_ir *plan, void **program,
                            ein_error_rec *err);

/* The caps and the plan-report lines of CUDA programs, for the entries of
 * both backends that run them. */
void ein_cuda_describe(const ein_plan_ir *plan, const void *program,
                       ein_strbuf *sb);

/* One line per step naming the cuBLAS call or the kernel and its launch
 * geometry, for `einc plan --backend cuda`. */
void ein_cuda_program_describe(const ein_cuda_program *prog,
                               const ein_plan_ir *plan, ein_strbuf *sb);

#endif
