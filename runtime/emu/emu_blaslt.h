/*
 * emu_blaslt.h - the emulated CUDA device's cuBLASLt: a reference
 * cublasLtMatmul for the FP8 rows einc calls (docs/design.md, "fp8
 * dtypes"), on host memory.
 *
 * The call is cublasLtMatmul's with its descriptors flattened into two
 * structs: the matmul descriptor's attributes (compute and scale type,
 * TRANSA/TRANSB, A_SCALE_POINTER/B_SCALE_POINTER) and each matrix
 * layout's (type, rows, cols, ld, BATCH_COUNT, STRIDED_BATCH_OFFSET);
 * matrices are column-major as in cuBLAS, element (i, j) at X[i + j*ld],
 * batch b at X + b*stride. D = alpha (scaleA scaleB) op(A) op(B) + beta C.
 * The values carry emu_blas.h's enums and cuBLAS's numbers (a test checks
 * the fp8 type codes against library_types.h where it exists).
 *
 * Rows emulated: A and B CUDA_R_8F_E4M3 or CUDA_R_8F_E5M2, not both e5m2;
 * CUBLAS_COMPUTE_32F with scale type CUDA_R_32F; C and D of one type,
 * CUDA_R_32F, CUDA_R_16BF or CUDA_R_16F.
 *
 * Numerics: each fp8 element decoded exactly to f32; one f32 accumulator
 * per element of D, acc = fmaf(a, b, acc) in order of k; the factor
 * alpha x scaleA x scaleB formed in f32 (in that order) times acc; with
 * beta != 0, fmaf(beta, C, that); rounded once to D's type (to nearest
 * even, half.h). beta == 0: C is not read.
 *
 * Statuses, what real cuBLASLt gives for the same mistakes:
 *   ARCH_MISMATCH   sm (the emulated device's compute capability x 10)
 *                   below 89: FP8 GEMMs need Ada or later;
 *   NOT_SUPPORTED   a type or compute row above none of, e5m2 x e5m2, a
 *                   layout other than TN (A transposed, B not: both
 *                   K-contiguous), or an FP8 kernel's alignment rule
 *                   broken (no algorithm exists): A, B, C, D pointers,
 *                   every ld and batch stride in bytes a multiple of 16,
 *                   k and m multiples of 16 (m: torch's _scaled_mm's
 *                   rule, perhaps stricter than cuBLASLt; einc pads to it
 *                   anyway, so the emulation errs on the side that
 *                   catches mistakes);
 *   INVALID_VALUE   layouts that disagree with op(A) op(B) = D (rows,
 *                   cols, batch counts), ld below the rows, a negative
 *                   size, a NULL pointer the call reads, or alpha/beta
 *                   NULL.
 * A call that returns anything but SUCCESS has written nothing.
 */
#ifndef EIN_EMU_BLASLT_H
#define EIN_EMU_BLASLT_H

#include <stdint.h>

#include "emu_blas.h"

/* cudaDataType_t's fp8 codes */
enum { EIN_EMU_R_8F_E4M3 = 28, EIN_EMU_R_8F_E5M2 = 29 };

/* The FP8 GEMM's minimum compute capability (x 10): Ada, sm_89. */
enum { EIN_EMU_FP8_MIN_SM = 89 };

/* A cublasLtMatrixLayout_t's attributes. */
typedef struct ein_emu_lt_layout {
  int type;
  int64_t rows, cols, ld;
  int batch_count;      /* 1: not batched */
  int64_t batch_stride; /* elements */
} ein_emu_lt_layout;

/* A cublasLtMatmulDesc_t's attributes. */
typedef struct ein_emu_lt_desc {
  int compute, scale_type;
  int transa, transb;
  const float *a_scale, *b_scale; /* NULL: 1 */
} ein_emu_lt_desc;

/* cublasLtMatmul on the emulated device of compute capability sm.
 * Returns an EIN_EMU_BLAS_* status. */
int ein_emu_lt_matmul(int sm, const ein_emu_lt_desc *desc, const void *alpha,
                      const void *A, const ein_emu_lt_layout *a,
                      const void *B, const ein_emu_lt_layout *b,
                      const void *beta, const void *C,
                      const ein_emu_lt_layout *c, void *D,
                      const ein_emu_lt_layout *d);

#endif
