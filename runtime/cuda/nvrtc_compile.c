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

ein_status ein_nvrtc_compile(const char *source, size_t len, int arch,
                             char **cubin, size_t *size, ein_error_rec *err) {
  *cubin = NULL;
  *size = 0;
  if (faulty())
    return ein_fail_backend(err, "nvrtcCompileProgram failed: "
                                 "NVRTC_ERROR_COMPILATION (injected by "
                                 "EINC_FAULT_NVRTC)\ncompile log:\n"
                                 "einc_kernel.cu: error: fault injection");
  ein_status loaded = ein_cuda_lib_require(EIN_LIB_NVRTC, err);
  if (loaded)
    return loaded;
  /* NVRTC wants one NUL-terminated string. */
  static const char LINE[] = "#line 1 \"einc_kernel.cu\"\n";
  const char *prelude = ein_codegen_prelude(false);
  size_t plen = strlen(prelude), llen = sizeof LINE - 1;
  char *text = ein_malloc(plen + llen + len + 1);
  if (!text)
    return ein_fail_memory(err, "out of memory copying a kernel's source");
  memcpy(text, prelude, plen);
  memcpy(text + plen, LINE, llen);
  memcpy(text + plen + llen, source, len);
  text[plen + llen + len] = 0;
  nvrtcProgram prog;
  nvrtcResult r =
      nvrtcCreateProgram(&prog, text, "einc_kernel.cu", 0, NULL, NULL);
  ein_free(text);
  if (r != NVRTC_SUCCESS)
    return ein_fail_backend(err, "nvrtcCreateProgram failed: %s",
                            nvrtcGetErrorString(r));
  char archopt[32];
  snprintf(archopt, sizeof archopt, "--gpu-architecture=sm_%d", arch);
  const char *opts[] = {archopt, "-minimal", "-default-device"};
  r = nvrtcCompileProgram(prog, 3, opts);
  ein_status st = EIN_OK;
  if (r != NVRTC_SUCCESS) {
    size_t loglen = 0;
    char *log = NULL;
    if (nvrtcGetProgramLogSize(prog, &loglen) == NVRTC_SUCCESS && loglen > 1)
      log = ein_malloc(loglen);
    if (log && nvrtcGetProgramLog(prog, log) != NVRTC_SUCCESS)
      log[0] = 0;
    st = ein_fail_backend(err,
                          "nvrtcCompileProgram failed for sm_%d: %s\n"
                          "compile log:\n%s",
                          arch, nvrtcGetErrorString(r), log ? log : "(none)");
    ein_free(log);
  } else {
    size_t n = 0;
    r = nvrtcGetCUBINSize(prog, &n);
    char *img = r == NVRTC_SUCCESS && n ? ein_malloc(n) : NULL;
    if (r == NVRTC_SUCCESS && n && !img)
      st = ein_fail_memory(err, "out of memory holding a %zu-byte cubin", n);
    else if (r != NVRTC_SUCCESS || !n ||
             (r = nvrtcGetCUBIN(prog, img)) != NVRTC_SUCCESS) {
      ein_free(img);
      st = ein_fail_backend(err, "nvrtcGetCUBIN failed: %s",
                            nvrtcGetErrorString(r));
    } else {
      *cubin = img;
      *size = n;
    }
  }
  nvrtcDestroyProgram(&prog);
  return st;
}
