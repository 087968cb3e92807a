/*
 * fp8_gemm.h - the FP8 GEMM plan (docs/design.md, "fp8 dtypes"): an fp8
 * contraction whose f32 plan is one GEMM of the two fp8 inputs, remade to
 * run as one cuBLASLt FP8 matmul (CUDA and the emulated device).
 *
 * Takes: the f32 plan of the decoded problem, made with the fp8 inputs'
 * own strides (in elements, which are bytes for fp8) and an f32 output of
 * the caller's strides; the fp8 dtypes of inputs 0 and 1, the output's
 * dtype (f32, bf16 or f16), and whether each tensor's first element is
 * 16-byte aligned (a plan is made per call, so the pointers are known).
 * Gives: a new plan (owning its arena; nothing points into the f32 plan)
 * of four inputs, the two fp8 tensors and then their scales (one-element
 * f32 buffers), whose steps are
 *   for each operand not in the FP8 layout: a FILL of 0 (when padded) and
 *     a copy of its bytes (a u8 plain copy: fp8 moved unchanged) into a
 *     workspace temporary in that layout;
 *   one GEMM step with fp8 A and B (ein_gemm.scaled), into the output or,
 *     when the output is not in D's layout, into a temporary;
 *   then a copy of that temporary into the output.
 * or NULL (EIN_OK) when the f32 plan is not one GEMM of both inputs,
 * both inputs are e5m2 (cuBLASLt has no e5m2 x e5m2 row), or a size or
 * the batch passes int32: the caller then takes the decode path.
 *
 * The FP8 layout rule (ein_fp8_gemm_fits) lives here, once: cuBLASLt's
 * FP8 kernels take A transposed and B not ("TN": both K-contiguous), and
 * want 16-byte alignment of every pointer, leading dimension and batch
 * stride, and K and cuBLASLt's M multiples of 16 (what torch's
 * _scaled_mm asks too). The GEMM step computes C = A B in plan.h's
 * row-major terms; cuBLASLt computes D = C^T, so its A is the step's B
 * (n x k, K-contiguous) and its B the step's A (m x k, K-contiguous), and
 * D is C with unit stride along n (a C of unit stride along m takes the
 * step transposed, C^T = B^T A^T). Padding rows and columns are zeros, so
 * the padded product's extra elements are never stored.
 */
#ifndef EIN_FP8_GEMM_H
#define EIN_FP8_GEMM_H

#include <stdbool.h>

#include "error.h"
#include "plan.h"

/* The step's operands and result meet the FP8 layout rule (alignment of
 * the pointers aside: the plan's maker checks that). csize: C's element
 * bytes. */
bool ein_fp8_gemm_fits(const ein_gemm *g, int64_t csize);

/* See above. aligned[0], [1]: inputs 0 and 1; aligned[2]: the output.
 * EIN_ERR_NO_MEMORY on err; *out NULL when there is no FP8 GEMM plan. */
ein_status ein_fp8_gemm_plan(const ein_plan_ir *f32, const ein_dtype in[2],
                             ein_dtype out_dtype, const bool aligned[3],
                             ein_error_rec *err, ein_plan_ir **out);

#endif
