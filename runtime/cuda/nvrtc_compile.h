/*
 * nvrtc_compile.h - CUDA C to a cubin with NVRTC. Needs no GPU: the CI
 * tests compile every kind of generated kernel for sm_80 and sm_90 on a
 * machine without one.
 */
#ifndef EIN_NVRTC_COMPILE_H
#define EIN_NVRTC_COMPILE_H

#include <stddef.h>

#include "error.h"

/* Compiles the NVRTC prelude (ein_codegen_prelude(false)) followed by
 * source (len bytes) for sm_<arch> (e.g. 90). On success *cubin
 * is a malloc'd image of *size bytes. On failure err holds NVRTC's message
 * and the compile log, and the status is EIN_ERR_BACKEND; EIN_ERR_DEVICE
 * when the NVRTC library cannot be loaded (cuda_libs.h). */
ein_status ein_nvrtc_compile(const char *source, size_t len, int arch,
                             char **cubin, size_t *size, ein_error_rec *err);

/* The same compile with ptxas' -v report (`--ptxas-options=-v`): on
 * success *log is that report (malloc'd, free with ein_free), one block
 * per entry function with its registers, stack frame, spills and shared
 * memory (kernel_resources.h reads it); the cubin is dropped. Errors as
 * ein_nvrtc_compile's. */
ein_status ein_nvrtc_compile_report(const char *source, size_t len, int arch,
                                    char **log, ein_error_rec *err);

/* The architectures this NVRTC compiles for (sm numbers: 80, 90, ...),
 * at most cap of them, into archs; *n their count. EIN_ERR_DEVICE
 * without NVRTC. */
ein_status ein_nvrtc_archs(int *archs, int cap, int *n, ein_error_rec *err);

/* NVRTC's version as major * 1000 + minor * 10, or 0 when unavailable. */
int ein_nvrtc_version(void);

/* The fixed option list (part of every kernel cache key). */
const char *ein_nvrtc_options(void);

/* Test hook: while set nonzero, every compile fails as NVRTC would with
 * a compilation error (also set by EINC_FAULT_NVRTC=1 in the environment). */
void ein_nvrtc_fault_inject(int on);

#endif
