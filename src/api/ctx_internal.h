/*
 * ctx_internal.h - what a context holds, for the API's own files: the
 * per-thread records (context.c), the opened devices (ctx_devices.c) and
 * the plan cache (plan_cache.h). The floors above it: tensors.h (checks),
 * plan_object.h (the plan), plain_eval.h (plan, cache and run), then
 * fp8_eval.h and spread.h, then eval.c's public entry points. The CLI and
 * the tests read what they need through inspect.h.
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
#include "inspect.h"
#include "plan_cache.h"
#include "strbuf.h"

enum {
  EIN_MAX_DEVICES = 16,   /* device ids 0..15 per backend */
  EIN_BACKEND_KINDS = 4   /* public kinds, AUTO included */
};

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

/* The context's open device of backend kind (opened under the context's
 * lock on first use); NULL with the error on me->err when it cannot be. */
ein_backend *ein_ctx_backend(ein_thread_rec *me, ein_backend_kind kind,
                             int device);

/* The device the context has opened for (kind, device), or NULL (never
 * opened, or ids out of range); opens nothing. */
ein_backend *ein_ctx_opened(ein_ctx *ctx, ein_backend_kind kind, int device);

/* The caps plans for kind are made with (a test's override, or the
 * backend's own). */
const ein_backend_caps *ein_ctx_caps(const ein_ctx *ctx,
                                     const ein_backend_entry *entry);

/* Destroys every device the context opened. */
void ein_ctx_close_backends(ein_ctx *ctx);

#endif
