/*
 * nvrtc_compile.c - CUDA C to cubin through NVRTC (nvrtc_compile.h).
 *
 * Kernels use no headers (f16/bf16 conversions are inline PTX and bit
 * operations), so -minimal keeps a compile near NVRTC's fixed cost. The
 * NVRTC prelude (codegen.h) goes before every source; a #line directive
 * keeps the compile log's line numbers those of the kernel's own source.
 */
#include "nvrtc_compile.h"

#include <nvrtc.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "codegen.h"
#include "cuda_libs.h"

/* -1: read EINC_FAULT_NVRTC on first use. Atomic because contexts on
 * several threads may compile at once. */
static atomic_int fault_injected = -1;

void ein_nvrtc_fault_inject(int on) { atomic_store(&fault_injected, on != 0); }

static int faulty(void) {
  int f = atomic_load(&fault_injected);
  if (f < 0) {
    const char *e = getenv("EINC_FAULT_NVRTC");
    f = e && *e && strcmp(e, "0") != 0;
    atomic_store(&fault_injected, f);
  }
  return f;
}

const char *ein_nvrtc_options(void) { return "-minimal -default-device"; }

int ein_nvrtc_version(void) {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS)
    return 0;
  return major * 1000 + minor * 10;
}

/* A failed NVRTC call, named, with NVRTC's own text for its result. */
static ein_status nvrtc_fail(ein_error_rec *err, const char *call,
                             nvrtcResult r) {
  return ein_fail_backend(err, "%s failed: %s", call, nvrtcGetErrorString(r));
}

/* Checks an NVRTC call in the manner of CU in cuda_backend.c: on failure
 * records "<function> failed: <NVRTC's text>" in err and returns
 * EIN_ERR_BACKEND from the calling function. */
#define NVRTC(fn, args)                                                        \
  do {                                                                         \
    nvrtcResult r_ = fn args;                                                  \
    if (r_ != NVRTC_SUCCESS) return nvrtc_fail(err, #fn, r_);                  \
  } while (0)

/* The prelude, a #line directive that keeps the compile log's line
 * numbers those of the kernel's own source, and the source: NVRTC wants
 * one NUL-terminated string. NULL when out of memory. */
static char *kernel_text(const char *source, size_t len) {
  static const char LINE[] = "#line 1 \"einc_kernel.cu\"\n";
  const char *prelude = ein_codegen_prelude(false);
  size_t plen = strlen(prelude), llen = sizeof LINE - 1;
  char *text = ein_malloc(plen + llen + len + 1);
  if (!text) return NULL;
  memcpy(text, prelude, plen);
  memcpy(text + plen, LINE, llen);
  memcpy(text + plen + llen, source, len);
  text[plen + llen + len] = 0;
  return text;
}

/* A failed compile, with NVRTC's log in the message. */
static ein_status compile_failed(nvrtcProgram prog, int arch, nvrtcResult r,
                                 ein_error_rec *err) {
  size_t loglen = 0;
  char *log = NULL;
  if (nvrtcGetProgramLogSize(prog, &loglen) == NVRTC_SUCCESS && loglen > 1)
    log = ein_malloc(loglen);
  if (log && nvrtcGetProgramLog(prog, log) != NVRTC_SUCCESS)
    log[0] = 0;
  ein_status st = ein_fail_backend(err,
                                   "nvrtcCompileProgram failed for sm_%d: %s\n"
                                   "compile log:\n%s",
                                   arch, nvrtcGetErrorString(r),
                                   log ? log : "(none)");
  ein_free(log);
  return st;
}

/* The compiled cubin, in memory the caller frees with ein_free. */
static ein_status take_cubin(nvrtcProgram prog, char **cubin, size_t *size,
                             ein_error_rec *err) {
  size_t n = 0;
  nvrtcResult r = nvrtcGetCUBINSize(prog, &n);
  if (r != NVRTC_SUCCESS || !n) return nvrtc_fail(err, "nvrtcGetCUBIN", r);
  char *img = ein_malloc(n);
  if (!img)
    return ein_fail_memory(err, "out of memory holding a %zu-byte cubin", n);
  if ((r = nvrtcGetCUBIN(prog, img)) != NVRTC_SUCCESS) {
    ein_free(img);
    return nvrtc_fail(err, "nvrtcGetCUBIN", r);
  }
  *cubin = img;
  *size = n;
  return EIN_OK;
}

/* The compile log, malloc'd and NUL-terminated (ptxas' -v report when
 * asked for). */
static ein_status take_log(nvrtcProgram prog, char **log, ein_error_rec *err) {
  size_t n = 0;
  NVRTC(nvrtcGetProgramLogSize, (prog, &n));
  char *text = ein_malloc(n + 1);
  if (!text)
    return ein_fail_memory(err, "out of memory holding a compile log");
  text[0] = text[n] = 0;
  nvrtcResult r = nvrtcGetProgramLog(prog, text);
  if (r != NVRTC_SUCCESS) {
    ein_free(text);
    return nvrtc_fail(err, "nvrtcGetProgramLog", r);
  }
  *log = text;
  return EIN_OK;
}

/* Compiles the whole text for sm_<arch> with the fixed options; with a
 * log, ptxas' -v report too, and the log is what comes back (the same
 * code: -v only makes ptxas describe what it did). */
static ein_status compile_text(const char *text, int arch, char **cubin,
                               size_t *size, char **log, ein_error_rec *err) {
  nvrtcProgram prog;
  NVRTC(nvrtcCreateProgram, (&prog, text, "einc_kernel.cu", 0, NULL, NULL));
  char archopt[32];
  snprintf(archopt, sizeof archopt, "--gpu-architecture=sm_%d", arch);
  const char *opts[] = {archopt, "-minimal", "-default-device",
                        "--ptxas-options=-v"};
  nvrtcResult r = nvrtcCompileProgram(prog, log ? 4 : 3, opts);
  ein_status st = r != NVRTC_SUCCESS ? compile_failed(prog, arch, r, err)
                  : log              ? take_log(prog, log, err)
                                     : take_cubin(prog, cubin, size, err);
  nvrtcDestroyProgram(&prog);
  return st;
}

/* The checks and the text every compile starts with. */
static ein_status compile_source(const char *source, size_t len, int arch,
                                 char **cubin, size_t *size, char **log,
                                 ein_error_rec *err) {
  if (faulty())
    return ein_fail_backend(err, "nvrtcCompileProgram failed: "
                                 "NVRTC_ERROR_COMPILATION (injected by "
                                 "EINC_FAULT_NVRTC)\ncompile log:\n"
                                 "einc_kernel.cu: error: fault injection");
  ein_status st = ein_cuda_lib_require(EIN_LIB_NVRTC, err);
  if (st) return st;
  char *text = kernel_text(source, len);
  if (!text)
    return ein_fail_memory(err, "out of memory copying a kernel's source");
  st = compile_text(text, arch, cubin, size, log, err);
  ein_free(text);
  return st;
}

ein_status ein_nvrtc_archs(int *archs, int cap, int *n, ein_error_rec *err) {
  *n = 0;
  ein_status st = ein_cuda_lib_require(EIN_LIB_NVRTC, err);
  if (st) return st;
  int count = 0;
  NVRTC(nvrtcGetNumSupportedArchs, (&count));
  if (count < 0 || count > cap)
    return ein_fail_backend(err, "NVRTC lists %d architectures, more than "
                                 "the %d expected", count, cap);
  NVRTC(nvrtcGetSupportedArchs, (archs));
  *n = count;
  return EIN_OK;
}

ein_status ein_nvrtc_compile(const char *source, size_t len, int arch,
                             char **cubin, size_t *size, ein_error_rec *err) {
  *cubin = NULL;
  *size = 0;
  return compile_source(source, len, arch, cubin, size, NULL, err);
}

ein_status ein_nvrtc_compile_report(const char *source, size_t len, int arch,
                                    char **log, ein_error_rec *err) {
  *log = NULL;
  return compile_source(source, len, arch, NULL, NULL, log, err);
}
