/*
 * kernel_cache.h - generated kernels, compiled once: in memory for the
 * life of a CUDA backend, on disk (disk_cache.h) across processes.
 *
 * Takes a kernel's source (codegen.h); gives loaded kernels
 * (cudaLibraryLoadData + cudaLibraryGetKernel, the runtime API, so einc
 * never links the driver library). A lookup tries memory, then disk, then
 * NVRTC; a compiled cubin is written to disk for the next process. The
 * disk key is the source, the architecture, the CUDA runtime's version,
 * the compile options and a hash of the NVRTC prelude; it needs no NVRTC,
 * so a process whose kernels are all on disk never opens NVRTC (a cubin
 * the driver cannot load is compiled again).
 */
#ifndef EIN_KERNEL_CACHE_H
#define EIN_KERNEL_CACHE_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "codegen.h"
#include "error.h"
#include "strbuf.h"

typedef struct ein_kcache ein_kcache;

typedef struct ein_kcache_stats {
  uint64_t memory_hits, disk_hits, compiles, disk_writes, disk_write_failures;
} ein_kcache_stats;

/* A cache for kernels of sm_<arch>. NULL when out of memory. */
ein_kcache *ein_kcache_create(int arch);

/* Unloads every library. */
void ein_kcache_destroy(ein_kcache *c);

/* The cache's owner id (run_cache.h): no other cache of the process has
 * it, so handles kept under it are this cache's, and valid while it
 * lives. */
uint64_t ein_kcache_id(const ein_kcache *c);

/* The kernels of k: *main always, *vec when k->has_vec (else NULL).
 * Errors: EIN_ERR_BACKEND with NVRTC's log or the CUDA call that failed;
 * EIN_ERR_NO_MEMORY. */
ein_status ein_kcache_get(ein_kcache *c, const ein_kernel_src *k,
                          cudaKernel_t *main, cudaKernel_t *vec,
                          ein_error_rec *err);

ein_kcache_stats ein_kcache_get_stats(const ein_kcache *c);

/* Appends the disk key of k to key (for tests: it must not need NVRTC). */
void ein_kcache_disk_key(const ein_kcache *c, const ein_kernel_src *k,
                         ein_strbuf *key);

#endif
