/*
 * ctx_internal.h - what a context holds, shared by the API modules
 * (context.c: statuses, binding, per-thread records; eval.c: plans and
 * evaluation; plan_cache.c: the plan cache).
 *
 * Threads may share a context. What a call writes for itself (its error,
 * its scratch key) lives in the calling thread's record; what calls share
 * (backends, the plan cache) sits behind the context's locks, and cached
 * plans are reference-counted so an eviction never frees a running plan.
 */
#ifndef EIN_CTX_INTERNAL_H
#define EIN_CTX_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "bind.h"
#include "error.h"
#include "strbuf.h"

/* A cached plan under its key (expression, options, tensor layouts,
 * backend). */
typedef struct ein_cache_entry {
  uint64_t hash;
  char *key;
  size_t key_len;
  ein_plan *plan;
  uint64_t last_use;
} ein_cache_entry;

enum {
  EIN_PLAN_CACHE_SIZE = 128,
  EIN_MAX_DEVICES = 16,   /* device ids 0..15 per backend */
  EIN_BACKEND_KINDS = 4   /* public kinds, AUTO included */
};

typedef struct ein_plan_cache {
  pthread_mutex_t lock; /* guards everything below */
  ein_cache_entry entries[EIN_PLAN_CACHE_SIZE];
  int n;
  uint64_t clock;
  uint64_t hits, misses;
} ein_plan_cache;

/* What one thread's calls on a context write: found (or made) on entry
 * to every API call, then used by that thread alone. */
typedef struct ein_thread_rec {
  pthread_t thread;
  ein_ctx *ctx;
  ein_error_rec err; /* what ein_last_error() shows this thread */
  ein_strbuf key;    /* scratch for cache keys, reused across calls */
  struct ein_thread_rec *next;
} ein_thread_rec;

struct ein_ctx {
  pthread_mutex_t lock;    /* guards threads, backends and stream */
  ein_thread_rec *threads; /* one per thread that has called; freed at
                              ein_ctx_destroy */
  /* Opened devices per backend kind, made on first use. */
  ein_backend *backends[EIN_BACKEND_KINDS][EIN_MAX_DEVICES];
  void *stream; /* the caller's cudaStream_t, or NULL: own streams */
  /* Tests: plan for backend kind k with caps[k] when caps_set[k] (e.g. a
   * GEMM threshold of 0, so small cases reach cuBLAS). */
  bool caps_set[EIN_BACKEND_KINDS];
  ein_backend_caps caps[EIN_BACKEND_KINDS];
  ein_plan_cache cache;
  /* Unique per context made in this process, so a thread's remembered
   * record (context.c) is never taken for a later context at the same
   * address. */
  uint64_t serial;
};

/* The calling thread's record on ctx with its error cleared, made on the
 * thread's first call; NULL when that allocation fails (the caller returns
 * EIN_ERR_NO_MEMORY and ein_last_error reports it). */
ein_thread_rec *ein_ctx_enter(ein_ctx *ctx);

/* The plan IR behind a public plan, and the program its backend made of
 * it (NULL for the CPU; a CUDA program for CUDA and the emulated device);
 * for the CLI's plan and cuda-src commands. */
struct ein_plan_ir;
struct ein_cuda_program;
const struct ein_plan_ir *ein_plan_ir_of(const ein_plan *plan);
const struct ein_cuda_program *ein_plan_cuda_program(const ein_plan *plan);

/* Units [first, first + count) of a plan (ein_plan_run_units) on device
 * `device` of its backend, tensors already there and checked; errors on
 * the calling thread's record. */
ein_status ein_plan_run_units_on(ein_ctx *ctx, const ein_plan *plan,
                                 int device, const DLTensor *const *inputs,
                                 int n, DLTensor *partial, int64_t first,
                                 int64_t count);

/* Runs a sliced plan over `ndevices` devices of its backend (spread.c,
 * ein_options.devices); the tensors passed ein_eval's checks. */
ein_status ein_plan_spread(ein_ctx *ctx, const ein_plan *plan,
                           const DLTensor *const *inputs, int n,
                           DLTensor *output, int ndevices);

/* The device a plan runs on (its backend: ein_plan_backend, ein.h). */
int ein_plan_device(const ein_plan *plan);

/* Whether the plan was made for a C-contiguous output (a NULL output in
 * ein_plan_create, or compact strides; size-1 dims' strides aside). */
bool ein_plan_output_compact(const ein_plan *plan);

/* Whether two elements of t share an address (writes would collide), and
 * whether the bytes two tensors touch overlap (for outputs: einc does not
 * compute in place). Sizes and strides must have passed the API checks. */
bool ein_tensor_self_overlapping(const DLTensor *t);

/* The stride of dim d in elements as plans see it: compact when strides
 * is NULL, 0 for a size-1 dim. */
int64_t ein_tensor_stride(const DLTensor *t, int d);

/* The bytes a non-empty tensor of esz-byte elements touches, as [lo, hi)
 * around the start of its first element (lo <= 0 < hi). False when they
 * pass int64, with *dim the dim whose stride did it (-1: the last
 * element's own size). */
bool ein_tensor_reach(const DLTensor *t, int64_t esz, int64_t *lo,
                      int64_t *hi, int *dim);

/* ein_eval's fp8 path (fp8_eval.c): inputs of a float8 dtype, or scales
 * given. The tensors have passed ein_eval's checks and live on backend
 * kind's device. */
bool ein_fp8_call(const DLTensor *const *inputs, int n, const ein_options *o);
ein_status ein_fp8_eval(ein_thread_rec *me, const char *expr,
                        const DLTensor *const *inputs, int n,
                        DLTensor *output, const ein_options *o,
                        ein_backend_kind kind, int device);
bool ein_tensors_overlap(const DLTensor *a, const DLTensor *b);

/* The context's open device of backend kind (opened under the context's
 * lock on first use); NULL with the error on me->err when it cannot be. */
ein_backend *ein_ctx_backend(ein_thread_rec *me, ein_backend_kind kind,
                             int device);

/* The caps plans for kind are made with (a test's override, or the
 * backend's own). */
const ein_backend_caps *ein_ctx_caps(const ein_ctx *ctx,
                                     const ein_backend_entry *entry);

/* Destroys every device the context opened. */
void ein_ctx_close_backends(ein_ctx *ctx);

/* Kernel cache counters of an opened device (zeros if not opened). */
void ein_ctx_backend_stats(ein_ctx *ctx, ein_backend_kind kind, int device,
                           ein_backend_stats *out);

/* The kernel launches of the last counting run of an opened device (the
 * emulated device with EINC_EMU_COUNTERS=1): up to cap into out, their
 * number returned (0 when none or not opened). */
size_t ein_ctx_backend_launches(ein_ctx *ctx, ein_backend_kind kind,
                                int device, ein_launch_counters *out,
                                size_t cap);

/* The bound problem behind a public binding. */
const ein_problem *ein_binding_problem(const ein_binding *binding);

uint64_t ein_hash_bytes(const void *data, size_t len);

/* Plans are reference-counted: ein_plan_create and the planner give one
 * reference; the cache holds one per entry and hands one to each finder.
 * ein_plan_release drops one and destroys the plan with the last. */
void ein_plan_retain(ein_plan *plan);
void ein_plan_release(ein_plan *plan);

void ein_plan_cache_init(ein_plan_cache *c);

/* The cached plan under key with a reference for the caller, or NULL. */
ein_plan *ein_plan_cache_find(ein_plan_cache *c, const char *key, size_t len);

/* Stores plan (taking a reference of its own) under a copy of key,
 * evicting the least recently used entry when full. False when the plan
 * is not cached: the allocation failed or another thread cached the same
 * key first. The caller's reference is untouched either way. */
bool ein_plan_cache_put(ein_plan_cache *c, const char *key, size_t len,
                        ein_plan *plan);

/* Releases every cached plan and the lock. */
void ein_plan_cache_destroy(ein_plan_cache *c);

#endif
