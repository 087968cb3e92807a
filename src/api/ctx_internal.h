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

enum { EIN_PLAN_CACHE_SIZE = 128, EIN_MAX_CUDA_DEVICES = 16 };

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
  pthread_mutex_t lock;    /* guards threads, cpu, cuda[] and cuda_stream */
  ein_thread_rec *threads; /* one per thread that has called; freed at
                              ein_ctx_destroy */
  ein_backend *cpu; /* created on first use */
  ein_backend *cuda[EIN_MAX_CUDA_DEVICES]; /* per device, on first use */
  void *cuda_stream; /* the caller's cudaStream_t, or NULL: own streams */
  /* Tests: plan CUDA steps with these caps instead of ein_cuda_caps(). */
  bool cuda_caps_set;
  ein_backend_caps cuda_caps;
  ein_plan_cache cache;
};

/* The calling thread's record on ctx with its error cleared, made on the
 * thread's first call; NULL when that allocation fails (the caller returns
 * EIN_ERR_NO_MEMORY and ein_last_error reports it). */
ein_thread_rec *ein_ctx_enter(ein_ctx *ctx);

/* The plan IR behind a public plan, and its CUDA program (NULL for CPU
 * plans); for the CLI's plan and cuda-src commands. */
struct ein_plan_ir;
struct ein_cuda_program;
const struct ein_plan_ir *ein_plan_ir_of(const ein_plan *plan);
const struct ein_cuda_program *ein_plan_cuda_program(const ein_plan *plan);

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
