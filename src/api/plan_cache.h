/*
 * plan_cache.h - a small LRU cache of plans, one per context, so a
 * repeated ein_eval skips parsing, binding and planning. Keys are byte
 * strings the plain path builds (the expression, the plan-shaping
 * options, the backend and device, each tensor's layout); it holds plans
 * by reference (plan_object.h), so a thread still running an evicted plan
 * keeps it alive. One lock guards the table.
 */
#ifndef EIN_PLAN_CACHE_H
#define EIN_PLAN_CACHE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ein.h"

/* A cached plan under its key. */
typedef struct ein_cache_entry {
  uint64_t hash;
  char *key;
  size_t key_len;
  ein_plan *plan;
  uint64_t last_use;
} ein_cache_entry;

enum { EIN_PLAN_CACHE_SIZE = 128 };

typedef struct ein_plan_cache {
  pthread_mutex_t lock; /* guards everything below */
  ein_cache_entry entries[EIN_PLAN_CACHE_SIZE];
  int n;
  uint64_t clock;
  uint64_t hits, misses;
} ein_plan_cache;

uint64_t ein_hash_bytes(const void *data, size_t len);

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
