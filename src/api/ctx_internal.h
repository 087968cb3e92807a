/*
 * ctx_internal.h - what a context holds, shared by the API modules
 * (context.c: statuses, binding; eval.c: plans and evaluation;
 * plan_cache.c: the plan cache).
 */
#ifndef EIN_CTX_INTERNAL_H
#define EIN_CTX_INTERNAL_H

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
  ein_cache_entry entries[EIN_PLAN_CACHE_SIZE];
  int n;
  uint64_t clock;
  uint64_t hits, misses;
} ein_plan_cache;

struct ein_ctx {
  ein_error_rec err;
  ein_backend *cpu; /* created on first use */
  ein_backend *cuda[EIN_MAX_CUDA_DEVICES]; /* per device, on first use */
  void *cuda_stream; /* the caller's cudaStream_t, or NULL: own streams */
  /* Tests: plan CUDA steps with these caps instead of ein_cuda_caps(). */
  bool cuda_caps_set;
  ein_backend_caps cuda_caps;
  ein_plan_cache cache;
  ein_strbuf key; /* scratch for cache keys, reused across calls */
};

/* The plan IR behind a public plan, and its CUDA program (NULL for CPU
 * plans); for the CLI's plan and cuda-src commands. */
struct ein_plan_ir;
struct ein_cuda_program;
const struct ein_plan_ir *ein_plan_ir_of(const ein_plan *plan);
const struct ein_cuda_program *ein_plan_cuda_program(const ein_plan *plan);

/* The bound problem behind a public binding. */
const ein_problem *ein_binding_problem(const ein_binding *binding);

uint64_t ein_hash_bytes(const void *data, size_t len);

/* The cached plan under key, or NULL. */
ein_plan *ein_plan_cache_find(ein_plan_cache *c, const char *key, size_t len);

/* Stores plan under a copy of key, evicting the least recently used entry
 * when full. On allocation failure the plan is simply not cached: false,
 * and the caller still owns it. */
bool ein_plan_cache_put(ein_plan_cache *c, const char *key, size_t len,
                        ein_plan *plan);

/* Destroys every cached plan. */
void ein_plan_cache_clear(ein_plan_cache *c);

#endif
