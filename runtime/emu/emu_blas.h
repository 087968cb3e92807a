/*
 * emu_blas.h - the emulated CUDA device's cuBLAS: reference versions of
 * cublasGemmStridedBatchedEx and cublasGemmBatchedEx on host memory.
 *
 * The emulated device runs exactly the calls einc's CUDA backend makes, so
 * machines without a GPU still exercise the GPU path; these two functions
 * stand in for the cuBLAS GEMMs. They take cuBLAS's arguments with cuBLAS's
 * meaning (column-major, C = alpha op(A) op(B) + beta C, element (i, j) of a
 * matrix at X[i + j*ld], batch b at base + b*stride) and return cuBLAS's
 * statuses for the arguments cuBLAS rejects. The enums below carry the
 * numeric values of cublasStatus_t, cublasOperation_t, cudaDataType_t and
 * cublasComputeType_t (a test checks them against the CUDA headers where
 * those exist), so a caller passes its values through unchanged. No CUDA
 * header is needed to build this.
 *
 * Takes: host pointers the caller owns; nothing is kept after a call.
 * Gives: C written in place. Scratch memory is the module's own, freed
 * before return. Thread-safe (no state).
 *
 * Numerics (what is modelled; emu_blas.c says why):
 *  - f16 and bf16 inputs are widened exactly to f32.
 *  - COMPUTE_32F (and _PEDANTIC): one f32 accumulator per element of C,
 *    acc = fmaf(a, b, acc) in order of k; then fmaf(alpha, acc, beta c).
 *  - COMPUTE_32F_FAST_TF32 / _FAST_16BF / _FAST_16F: as 32F after rounding
 *    each input to tf32 / bf16 / f16 (to nearest even; f16 with its range,
 *    so a large input becomes Inf).
 *  - COMPUTE_64F: as 32F in f64 with fma. Complex types: the same, per
 *    real and imaginary part, each complex product as two fmas.
 *  - COMPUTE_16F: the f32 dot product rounded to f16, then alpha times it,
 *    beta times C and their sum each rounded to f16.
 *  - The result is converted to Ctype rounding to nearest even.
 *  - beta == 0: C is not read (NaN there does not propagate); k == 0:
 *    C = beta C, alpha unused; m == 0, n == 0 or batch_count == 0:
 *    SUCCESS with nothing read or written, whatever the pointers.
 *
 * Statuses: INVALID_VALUE for what cuBLAS rejects as such (an operation
 * other than N, T, C; m, n, k or batch_count < 0; a leading dimension
 * below max(1, rows stored); alpha or beta NULL); NOT_SUPPORTED for an
 * (Atype, Btype, Ctype, computeType) outside cuBLAS's table, int8 rows
 * included (not emulated); ALLOC_FAILED when host scratch is not to be
 * had. Beyond cuBLAS, which cannot check device pointers: a NULL matrix
 * or pointer array the call would read, or batch strides whose offsets
 * pass 2^63 bytes, are INVALID_VALUE rather than a crash. A call that
 * returns anything but SUCCESS has written nothing.
 */
#ifndef EIN_EMU_BLAS_H
#define EIN_EMU_BLAS_H

/* cublasStatus_t */
enum {
  EIN_EMU_BLAS_SUCCESS = 0,
  EIN_EMU_BLAS_NOT_INITIALIZED = 1,
  EIN_EMU_BLAS_ALLOC_FAILED = 3,
  EIN_EMU_BLAS_INVALID_VALUE = 7,
  EIN_EMU_BLAS_ARCH_MISMATCH = 8,
  EIN_EMU_BLAS_MAPPING_ERROR = 11,
  EIN_EMU_BLAS_EXECUTION_FAILED = 13,
  EIN_EMU_BLAS_INTERNAL_ERROR = 14,
  EIN_EMU_BLAS_NOT_SUPPORTED = 15,
  EIN_EMU_BLAS_LICENSE_ERROR = 16,
};

/* cublasOperation_t (CUBLAS_OP_CONJG, 3, is rejected as cuBLAS does) */
enum { EIN_EMU_OP_N = 0, EIN_EMU_OP_T = 1, EIN_EMU_OP_C = 2 };

/* cudaDataType_t: the types the emulation computes with */
enum {
  EIN_EMU_R_32F = 0,
  EIN_EMU_R_64F = 1,
  EIN_EMU_R_16F = 2,
  EIN_EMU_C_32F = 4,
  EIN_EMU_C_64F = 5,
  EIN_EMU_R_16BF = 14,
};

/* cublasComputeType_t. The scale type (what alpha and beta point to) is
 * uint16_t f16 bits for 16F; float for the 32F family (two floats, re and
 * im, with complex matrices); double for 64F (two with complex). */
enum {
  EIN_EMU_COMPUTE_16F = 64,
  EIN_EMU_COMPUTE_16F_PEDANTIC = 65,
  EIN_EMU_COMPUTE_32F = 68,
  EIN_EMU_COMPUTE_32F_PEDANTIC = 69,
  EIN_EMU_COMPUTE_64F = 70,
  EIN_EMU_COMPUTE_64F_PEDANTIC = 71,
  EIN_EMU_COMPUTE_32I = 72,
  EIN_EMU_COMPUTE_32I_PEDANTIC = 73,
  EIN_EMU_COMPUTE_32F_FAST_16F = 74,
  EIN_EMU_COMPUTE_32F_FAST_16BF = 75,
  EIN_EMU_COMPUTE_32F_FAST_TF32 = 77,
};

/* cuBLAS's name of a status ("CUBLAS_STATUS_INVALID_VALUE"), as
 * cublasGetStatusName gives it; "CUBLAS_STATUS_UNKNOWN" for other values. */
const char *ein_emu_blas_status_name(int status);

/* cublasGemmStridedBatchedEx: batch b multiplies A + b*stride_a and
 * B + b*stride_b (strides in elements, any sign, 0 reuses one matrix) into
 * C + b*stride_c. Returns an EIN_EMU_BLAS_* status. */
int ein_emu_gemm_strided_batched(int transa, int transb, int m, int n, int k,
                                 const void *alpha, const void *A, int atype,
                                 int lda, long long stride_a, const void *B,
                                 int btype, int ldb, long long stride_b,
                                 const void *beta, void *C, int ctype, int ldc,
                                 long long stride_c, int batch_count,
                                 int compute_type);

/* cublasGemmBatchedEx: batch b multiplies A[b] and B[b] into C[b]. */
int ein_emu_gemm_batched(int transa, int transb, int m, int n, int k,
                         const void *alpha, const void *const A[], int atype,
                         int lda, const void *const B[], int btype, int ldb,
                         const void *beta, void *const C[], int ctype, int ldc,
                         int batch_count, int compute_type);

#endif
