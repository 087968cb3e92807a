/*
 * kernel_cache.c - memory and disk cache of compiled kernels
 * (kernel_cache.h). The memory part is an open-addressed table keyed by
 * the source's hash and compared by the whole source.
 */
#include "kernel_cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "disk_cache.h"
#include "hash.h"
#include "nvrtc_compile.h"
#include "run_cache.h"
#include "strbuf.h"
#include "trace.h"

typedef struct kentry {
  uint64_t hash;
  char *source; /* NULL: empty slot */
  size_t len;
  cudaLibrary_t lib;
  cudaKernel_t main, vec;
} kentry;

struct ein_kcache {
  int arch;
  uint64_t id; /* ein_kernel_owner_new */
  kentry *slots;
  size_t cap, n;
  ein_kcache_stats stats;
  char dir[4096];
  bool disk; /* a directory is named; cleared after a failed write */
};

ein_kcache *ein_kcache_create(int arch) {
  ein_kcache *c = ein_calloc(1, sizeof *c);
  if (!c)
    return NULL;
  c->arch = arch;
  c->id = ein_kernel_owner_new();
  c->cap = 64;
  c->slots = ein_calloc(c->cap, sizeof *c->slots);
  if (!c->slots) {
    ein_free(c);
    return NULL;
  }
  c->disk = ein_disk_cache_dir(c->dir, sizeof c->dir);
  return c;
}

void ein_kcache_destroy(ein_kcache *c) {
  if (!c)
    return;
  for (size_t i = 0; i < c->cap; i++)
    if (c->slots[i].source) {
      cudaLibraryUnload(c->slots[i].lib);
      ein_free(c->slots[i].source);
    }
  ein_free(c->slots);
  ein_free(c);
}

ein_kcache_stats ein_kcache_get_stats(const ein_kcache *c) { return c->stats; }

uint64_t ein_kcache_id(const ein_kcache *c) { return c->id; }

static kentry *find_slot(kentry *slots, size_t cap, uint64_t hash,
                         const char *src, size_t len) {
  for (size_t i = hash & (cap - 1);; i = (i + 1) & (cap - 1)) {
    kentry *e = &slots[i];
    if (!e->source)
      return e;
    if (e->hash == hash && e->len == len && memcmp(e->source, src, len) == 0)
      return e;
  }
}

static bool grow(ein_kcache *c) {
  size_t cap = c->cap * 2;
  kentry *slots = ein_calloc(cap, sizeof *slots);
  if (!slots)
    return false;
  for (size_t i = 0; i < c->cap; i++)
    if (c->slots[i].source)
      *find_slot(slots, cap, c->slots[i].hash, c->slots[i].source,
                 c->slots[i].len) = c->slots[i];
  ein_free(c->slots);
  c->slots = slots;
  c->cap = cap;
  return true;
}

static ein_status cuda_fail(ein_error_rec *err, const char *call,
                            cudaError_t e) {
  return ein_fail_backend(err, "%s failed: %s (%s)", call, cudaGetErrorName(e),
                          cudaGetErrorString(e));
}

/* Loads a cubin and finds its entry points. */
static ein_status load(const char *img, const ein_kernel_src *k, kentry *e,
                       ein_error_rec *err) {
  cudaError_t r =
      cudaLibraryLoadData(&e->lib, img, NULL, NULL, 0, NULL, NULL, 0);
  if (r != cudaSuccess)
    return cuda_fail(err, "cudaLibraryLoadData", r);
  r = cudaLibraryGetKernel(&e->main, e->lib, "ein_main");
  if (r == cudaSuccess && k->has_vec)
    r = cudaLibraryGetKernel(&e->vec, e->lib, "ein_vec");
  if (r != cudaSuccess) {
    cudaLibraryUnload(e->lib);
    return cuda_fail(err, "cudaLibraryGetKernel", r);
  }
  return EIN_OK;
}

/* The disk key of a kernel: everything that changes the cubin, the
 * prelude NVRTC compiles before the source included. The CUDA runtime's
 * version stands for the toolkit's: asking NVRTC its own would open
 * NVRTC (~20 ms) in a process that compiles nothing. */
void ein_kcache_disk_key(const ein_kcache *c, const ein_kernel_src *k,
                         ein_strbuf *key) {
  const char *prelude = ein_codegen_prelude(false);
  int runtime = 0;
  if (cudaRuntimeGetVersion(&runtime) != cudaSuccess)
    runtime = 0;
  ein_strbuf_printf(key, "einc kernel v3\nsm_%d\ncudart %d\n%s\n", c->arch,
                    runtime, ein_nvrtc_options());
  ein_strbuf_printf(key, "prelude %016llx\n",
                    (unsigned long long)ein_fnv1a(prelude, strlen(prelude),
                                                  EIN_FNV_SEED));
  ein_strbuf_append(key, k->source, k->len);
}

/* Loads the kernel from the disk cache, or compiles it (and stores the
 * cubin there), into e. */
static ein_status load_or_compile(ein_kcache *c, const ein_kernel_src *k,
                                  const ein_strbuf *key, kentry *e,
                                  ein_error_rec *err) {
  char *img = NULL;
  size_t size = 0;
  double t0 = ein_trace_now();
  if (!key->failed && c->disk &&
      ein_disk_cache_load(c->dir, key->data, key->len, &img, &size)) {
    /* A damaged cubin that still passed the checksum is recompiled. */
    ein_error_rec ignored = {0};
    bool loaded = load(img, k, e, &ignored) == EIN_OK;
    ein_free(img);
    img = NULL;
    if (loaded) {
      c->stats.disk_hits++;
      ein_trace_end("cuda: kernel from the disk cache (read, module load)",
                    t0);
      return EIN_OK;
    }
  }
  t0 = ein_trace_now();
  ein_status st = ein_nvrtc_compile(k->source, k->len, c->arch, &img, &size,
                                    err);
  ein_trace_end("cuda: NVRTC compile of a kernel", t0);
  if (!st) {
    c->stats.compiles++;
    t0 = ein_trace_now();
    st = load(img, k, e, err);
    ein_trace_end("cuda: module load (cudaLibraryLoadData)", t0);
  }
  if (!st && c->disk && !key->failed) {
    t0 = ein_trace_now();
    bool stored = ein_disk_cache_store(c->dir, key->data, key->len, img,
                                       size);
    ein_trace_end("cuda: disk cache write", t0);
    if (stored)
      c->stats.disk_writes++;
    else
      c->stats.disk_write_failures++;
  }
  ein_free(img);
  return st;
}

ein_status ein_kcache_get(ein_kcache *c, const ein_kernel_src *k,
                          cudaKernel_t *main, cudaKernel_t *vec,
                          ein_error_rec *err) {
  kentry *e = find_slot(c->slots, c->cap, k->hash, k->source, k->len);
  if (e->source) {
    c->stats.memory_hits++;
    *main = e->main;
    *vec = e->vec;
    return EIN_OK;
  }
  if ((c->n + 1) * 2 > c->cap) {
    if (!grow(c))
      return ein_fail_memory(err, "out of memory growing the kernel cache");
    e = find_slot(c->slots, c->cap, k->hash, k->source, k->len);
  }
  kentry fresh = {.hash = k->hash, .len = k->len};
  fresh.source = ein_malloc(k->len + 1);
  if (!fresh.source)
    return ein_fail_memory(err, "out of memory caching a kernel");
  memcpy(fresh.source, k->source, k->len + 1);
  ein_strbuf key = {0};
  ein_kcache_disk_key(c, k, &key);
  ein_status st = load_or_compile(c, k, &key, &fresh, err);
  ein_strbuf_free(&key);
  if (st) {
    ein_free(fresh.source);
    return st;
  }
  *e = fresh;
  c->n++;
  *main = e->main;
  *vec = e->vec;
  return EIN_OK;
}
