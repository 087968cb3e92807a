/*
 * plan_cache.c - a small LRU cache of plans on a context, so a repeated
 * ein_eval skips parsing, binding and planning. Keys are byte strings built
 * by eval.c; lookups compare a 64-bit hash first, then the bytes.
 */
#include <string.h>

#include "alloc.h"
#include "ctx_internal.h"

uint64_t ein_hash_bytes(const void *data, size_t len) {
  const unsigned char *p = data;
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (size_t i = 0; i < len; i++) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

ein_plan *ein_plan_cache_find(ein_plan_cache *c, const char *key,
                              size_t len) {
  uint64_t h = ein_hash_bytes(key, len);
  for (int i = 0; i < c->n; i++) {
    ein_cache_entry *e = &c->entries[i];
    if (e->hash == h && e->key_len == len && memcmp(e->key, key, len) == 0) {
      e->last_use = ++c->clock;
      c->hits++;
      return e->plan;
    }
  }
  c->misses++;
  return NULL;
}

bool ein_plan_cache_put(ein_plan_cache *c, const char *key, size_t len,
                        ein_plan *plan) {
  char *copy = ein_malloc(len ? len : 1);
  if (!copy) return false;
  memcpy(copy, key, len);
  ein_cache_entry *e;
  if (c->n < EIN_PLAN_CACHE_SIZE) {
    e = &c->entries[c->n++];
  } else {
    e = &c->entries[0];
    for (int i = 1; i < c->n; i++)
      if (c->entries[i].last_use < e->last_use) e = &c->entries[i];
    ein_plan_destroy(e->plan);
    ein_free(e->key);
  }
  e->hash = ein_hash_bytes(key, len);
  e->key = copy;
  e->key_len = len;
  e->plan = plan;
  e->last_use = ++c->clock;
  return true;
}

void ein_plan_cache_clear(ein_plan_cache *c) {
  for (int i = 0; i < c->n; i++) {
    ein_plan_destroy(c->entries[i].plan);
    ein_free(c->entries[i].key);
  }
  c->n = 0;
}
