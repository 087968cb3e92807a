/*
 * plan_cache.h - a small LRU cache of plans, one per context, so a
 * repeated ein_eval skips parsing, binding and planning. Keys are byte
 * strings the plain path builds (the expression, the plan-shaping
 * options, the backend and device, each tensor's layout) or that a caller
 * of ein.h's ein_cache_find builds its own way (the Python extension):
 * one table, one least-recently-used eviction over both, each key
 * compared only with keys of its own space. It holds plans by reference
 * (plan_object.h), so a thread still running an evicted plan keeps it
 * alive. One lock guards the table.
 */
#ifndef EIN_PLAN_CACHE_H
#define EIN_PLAN_CACHE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ein.h"

/* Whose key an entry has: ein_eval's (plain_eval.c) or a caller's. */
typedef enum ein_key_space { EIN_KEY_CALL, EIN_KEY_CALLER } ein_key_space;

/* A caller's data on an entry and what frees it (ein.h, ein_cache_put). */
typedef struct ein_cache_data {
  void *data;
  void (*release)(void *data);
} ein_cache_data;

/* Keys up to this many bytes live in their entry (a hit then reads no
 * other memory of the cache's than the lock's line, the hashes and the
 * entry); longer ones are copied to the heap. */
enum { EIN_CACHE_INLINE_KEY = 96 };

/* A cached plan under its key (its hash is in ein_plan_cache.hashes). */
typedef struct ein_cache_entry {
  ein_key_space space;
  bool key_heap; /* key was allocated, else it is `small` */
  char *key;
  size_t key_len;
  ein_plan *plan;
  uint64_t last_use;
  ein_cache_data data; /* a caller's entry's; none for ein_eval's */
  char small[EIN_CACHE_INLINE_KEY];
} ein_cache_entry;

enum { EIN_PLAN_CACHE_SIZE = EIN_PLAN_CACHE_ENTRIES };

typedef struct ein_plan_cache {
  pthread_mutex_t lock; /* guards everything below */
  int n;
  uint64_t clock;
  uint64_t hits, misses, evictions;
  /* entries[i]'s key hash, apart so that a lookup scans 8 bytes a slot */
  uint64_t hashes[EIN_PLAN_CACHE_SIZE];
  ein_cache_entry entries[EIN_PLAN_CACHE_SIZE];
} ein_plan_cache;

uint64_t ein_hash_bytes(const void *data, size_t len);

void ein_plan_cache_init(ein_plan_cache *c);

/* The cached plan under key in space with a reference for the caller, or
 * NULL; counted as a hit or a miss. hash: the key's, by the space's own
 * function (ein_hash_bytes for ein_eval's; a caller's own for its keys:
 * equal hashes only send a lookup on to compare the bytes). */
ein_plan *ein_plan_cache_find(ein_plan_cache *c, ein_key_space space,
                              uint64_t hash, const char *key, size_t len);

/* Stores plan (taking a reference of its own) and data under a copy of
 * key, evicting the least recently used entry when full (its plan's
 * reference dropped and its data released outside the lock). False when the plan
 * is not cached: the allocation failed or another thread cached the same
 * key first. The caller's reference is untouched either way. */
bool ein_plan_cache_put(ein_plan_cache *c, ein_key_space space,
                        uint64_t hash, const char *key, size_t len,
                        ein_plan *plan, ein_cache_data data);

/* The data of the entry under key in space, or NULL; counted as a hit or
 * a miss. Takes no reference (ein.h, ein_cache_find). */
void *ein_plan_cache_find_data(ein_plan_cache *c, ein_key_space space,
                               uint64_t hash, const char *key, size_t len);

/* The counts and fill of the table, read under its lock. */
void ein_plan_cache_stats(ein_plan_cache *c, ein_cache_stats *out);

/* Releases every cached plan and the lock. */
void ein_plan_cache_destroy(ein_plan_cache *c);

#endif
