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

/* NVRTC's version as major * 1000 + minor * 10, or 0 when unavailable. */
int ein_nvrtc_version(void);

/* The fixed option list (part of every kernel cache key). */
const char *ein_nvrtc_options(void);

/* Test hook: while set nonzero, every compile fails as NVRTC would with
 * a compilation error (also set by EINC_FAULT_NVRTC=1 in the environment). */
void ein_nvrtc_fault_inject(int on);

#endif
