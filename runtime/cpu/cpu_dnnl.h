/*
 * cpu_dnnl.h - bf16 (and f16) GEMM steps on the CPU's own half-precision
 * units, through oneDNN's matmul primitive (libdnnl.so.2, opened at run
 * time; docs/design.md, "Half-precision GEMMs on the CPU").
 *
 * Takes GEMM steps whose A and B are bf16 or f16 (the planner stores them
 * so only where ein_cpu_dnnl_gemm_dtype said yes) and runs them with f32
 * accumulation, C in f32 or in the half dtype. Owns the library handle and
 * one engine for the process, and per plan a program of primitives
 * (ein_cpu_dnnl_prepare), freed with the plan.
 */
#ifndef EIN_CPU_DNNL_H
#define EIN_CPU_DNNL_H

#include <stdbool.h>
#include <stddef.h>

#include "dtype.h"
#include "error.h"
#include "plan.h"
#include "strbuf.h"

/* Does the CPU backend's GEMM read dt (bf16, f16) itself? True when the
 * CPU has units for it (cpuid: AVX512-BF16 or AMX-BF16 for bf16,
 * AVX512-FP16 or AMX-FP16 for f16), libdnnl.so.2 loads (or the file
 * $EINC_DNNL names; EINC_DNNL=0 keeps the f32 path) and its matmul for dt
 * is not the reference one. The first call for a dtype decides, once per
 * process. False for other dtypes. */
bool ein_cpu_dnnl_gemm_dtype(ein_dtype dt);

/* Why the oneDNN path is or is not taken for dt, for reports and tests:
 * "oneDNN 2.6.3 matmul brg:avx512_core_bf16", "the CPU has no bf16 GEMM
 * units", the loader's message... */
void ein_cpu_dnnl_why(ein_dtype dt, char *buf, size_t cap);

/* The plan's primitives, one per half GEMM step (NULL and EIN_OK for a
 * plan without one): made once here, so a run only executes them. */
ein_status ein_cpu_dnnl_prepare(const ein_plan_ir *plan, void **program,
                                ein_error_rec *err);
void ein_cpu_dnnl_program_free(void *program);

/* The text report's lines for the program: "cpu gemm     step 1: oneDNN
 * brg:avx512_core_bf16 (bf16 in, f32 accumulation)" per half GEMM. */
void ein_cpu_dnnl_describe(const ein_plan_ir *plan, const void *program,
                           ein_strbuf *sb);

/* JSON members of step `step` (a half GEMM: "cpu_gemm":{...},). */
void ein_cpu_dnnl_describe_step_json(const ein_plan_ir *plan,
                                     const void *program, int step,
                                     ein_strbuf *sb);

/* Runs half GEMM step i of plan (its primitive from program where it was
 * prepared for this plan, else one made for the call) on `threads`
 * threads. EIN_ERR_BACKEND naming the oneDNN call that failed. */
ein_status ein_cpu_dnnl_run(const ein_plan_ir *plan, const void *program,
                            int i, char *c, const char *a, const char *b,
                            int threads, ein_error_rec *err);

/* One n^3 GEMM, row-major A and B in dt, C in f32 (the device model's
 * rate measurement); false where the path is not taken or a call fails. */
bool ein_cpu_dnnl_square(ein_dtype dt, int64_t n, const char *a,
                         const char *b, char *c);

/* Do f32 GEMM calls go to oneDNN's sgemm rather than OpenBLAS's? True
 * when einc has OpenMP (to size oneDNN's team: fork safety), the CPU has
 * AVX-512F and libdnnl.so.2 loads (EINC_DNNL=0 and
 * EINC_SGEMM=openblas keep OpenBLAS; EINC_SGEMM=onednn takes oneDNN on
 * any CPU). Decided once per process (docs/design.md, "f32 and f64 GEMMs:
 * which BLAS"). */
bool ein_cpu_dnnl_f32_gemm(void);

/* C = alpha op(A) op(B), row-major, on `threads` OpenMP threads, through
 * oneDNN's sgemm; false (C untouched or partly written: the caller runs
 * the call again elsewhere) where the path is not taken or the call
 * fails. */
bool ein_cpu_dnnl_sgemm(const ein_gemm_call *g, float alpha, const float *a,
                        const float *b, float *c, int threads);

/* Half GEMM calls this process ran through oneDNN, and f32 GEMM calls
 * through its sgemm (tests: the path ran). */
long ein_cpu_dnnl_calls(void);
long ein_cpu_dnnl_sgemm_calls(void);

#endif
