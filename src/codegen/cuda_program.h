/*
 * cuda_program.h - how the CUDA backend runs each step of a plan, decided
 * once per plan and without a GPU.
 *
 * Takes: a plan (plan.h). Gives: per step either a cuBLAS call (GEMM steps
 * whose matrices cuBLAS can address: transposes, leading dims, a batch
 * that collapses to one stride or loops over the rest; with its A/B, C and
 * compute types, a legal cublasGemmEx row) or a generated
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

/* cuBLAS's compute type (cublasComputeType_t without the CUDA header):
 * 32F for f16/bf16 (accumulation in f32, whatever C's dtype) and f32,
 * 32F_TF32 (CUBLAS_COMPUTE_32F_FAST_TF32) for f32 when the plan allows
 * TF32, 64F for f64; c64 and c128 the same as f32 and f64. alpha and beta
 * are f32 for the 32F kinds, f64 for 64F (two of them, re and im, for the
 * complex types). */
typedef enum ein_gemm_compute {
  EIN_GEMM_COMPUTE_32F,
  EIN_GEMM_COMPUTE_32F_TF32,
  EIN_GEMM_COMPUTE_64F
} ein_gemm_compute;

/* One column-major cuBLAS GEMM (cublasGemmStridedBatchedEx):
 * C = alpha op(A) op(B), batched `count` times with element strides, and
 * repeated over the outer batch axes `loops` (strides of cuBLAS's C, A, B;
 * none when the batch collapsed to one stride). The types are one of
 * cublasGemmEx's rows (ein_cublas_types_legal), fixed when the program is
 * built; the runtime passes them on as they are. */
typedef struct ein_cublas_gemm {
  ein_dtype ab_dtype;       /* A's and B's element type */
  ein_dtype c_dtype;        /* C's */
  ein_gemm_compute compute;
  bool a_is_step_a;      /* cuBLAS's A is the step's A (else its B) */
  bool trans_a, trans_b; /* op(A), op(B) are transposes */
  int64_t m, n, k, lda, ldb, ldc;
  int64_t count;
  int64_t stride_a, stride_b, stride_c; /* of cuBLAS's A, B and C */
  ein_loop_axes loops;
  /* An FP8 GEMM step (ein_gemm.scaled): one cublasLtMatmul, A (ab_dtype)
   * and B (b_dtype) fp8 in the TN layout, compute 32F, C = D of c_dtype,
   * A's and B's scales the f32s at plan inputs scale_input[0] and [1]
   * (A_SCALE_POINTER, B_SCALE_POINTER); no loops. */
  bool lt_fp8;
  ein_dtype b_dtype;
  int scale_input[2];
} ein_cublas_gemm;

/* True when the outer batch loops run as one pointer-array call. */
bool ein_cublas_pointer_array(const ein_cublas_gemm *g);

/* The host arrays of that call, for the matrices at c, a and b (cuBLAS's
 * C, A, B): C's pointers, then A's, then B's, *total of each (the outer
 * loops times count). Both backends that run CUDA programs make them
 * here. NULL with EIN_ERR_LIMIT (past cuBLAS's int count) or
 * EIN_ERR_NO_MEMORY on err; the caller frees with ein_free. */
const void **ein_cublas_pointer_arrays(const ein_cublas_gemm *g, char *c,
                                       const char *a, const char *b,
                                       int64_t *total, ein_error_rec *err);

typedef struct ein_cuda_step {
  bool cublas; /* a cuBLAS call; otherwise the kernels */
  ein_cublas_gemm gemm;
  ein_kernel_src kernel;  /* kind EIN_KERNEL_NONE: nothing to run */
  /* A split reduction's pass 2 (kind EIN_KERNEL_NONE when none): the
   * runtime launches `kernel` with d = the scratch buffer, then `finish`
   * with d = the step's dst, s0 = the scratch buffer, s1 = NULL. */
  ein_kernel_src finish;
  int64_t scratch_bytes;
} ein_cuda_step;

typedef struct ein_cuda_program {
  int nsteps;
  ein_cuda_step *steps;
  /* The largest scratch_bytes of any step: the runtime allocates one
   * buffer of this size per run, beside the plan's workspace. */
  int64_t scratch_bytes;
} ein_cuda_program;

/* Is (ab, c, compute) a row of cublasGemmEx's type table that einc uses?
 *   bf16, bf16 -> bf16 or f32   32F
 *   f16,  f16  -> f16 or f32    32F
 *   f32,  f32  -> f32           32F or 32F_TF32
 *   f64,  f64  -> f64           64F
 *   c64,  c64  -> c64           32F   (CUDA_C_32F: cublasCgemm's types)
 *   c128, c128 -> c128          64F   (CUDA_C_64F: cublasZgemm's) */
bool ein_cublas_types_legal(ein_dtype ab, ein_dtype c, ein_gemm_compute compute);

/* "32F", "32F_TF32", "64F". */
const char *ein_gemm_compute_name(ein_gemm_compute compute);

/* Maps a GEMM step onto cuBLAS; false when it cannot (A and B of two
 * dtypes, or types that are no legal row, strides without a unit
 * dimension, a batch C stride of 0, or a size past cuBLAS's 32-bit
 * arguments). allow_tf32: the plan lets f32 GEMMs use TF32. */
bool ein_cublas_map(const ein_step *step, bool allow_tf32,
                    ein_cublas_gemm *out);

/* Maps an FP8 GEMM step (fp8_gemm.h's orientation: cuBLASLt's A is the
 * step's B, D is C^T) onto one cublasLtMatmul; false when the step breaks
 * the FP8 layout rule (ein_fp8_gemm_fits) or passes int32 sizes. */
bool ein_cublaslt_map(const ein_step *step, ein_cublas_gemm *out);

/* The name of the library call of a mapped GEMM: "cublasLtMatmul" or
 * "cublasGemmStridedBatchedEx". */
const char *ein_cublas_call_name(const ein_cublas_gemm *g);

/* Builds the program of a plan. EIN_ERR_NO_MEMORY, EIN_ERR_LIMIT, or
 * EIN_ERR_INTERNAL for an FP8 GEMM step cuBLASLt cannot run. */
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

/* The JSON members of step `step` (the backend entry's describe_step_json):
 * "cuda" with the cuBLAS call or the kernels that ein_cuda_describe lists. */
void ein_cuda_describe_step_json(const ein_plan_ir *plan, const void *program,
                                 int step, ein_strbuf *sb);

/* The program itself (the CUDA entry's cuda_program accessor). */
const struct ein_cuda_program *ein_cuda_program_of(const void *program);

/* One line per step naming the cuBLAS call or the kernel and its launch
 * geometry, for `einc plan --backend cuda`. */
void ein_cuda_program_describe(const ein_cuda_program *prog,
                               const ein_plan_ir *plan, ein_strbuf *sb);

#endif
