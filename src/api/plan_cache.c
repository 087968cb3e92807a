/*
 * plan_cache.c - a small LRU cache of plans on a context, so a repeated
 * ein_eval skips parsing, binding and planning. Keys are byte strings built
 * by the plain path (plain_eval.c) or by a caller of ein_cache_find (the
 * Python extension), each in its own space; lookups compare a 64-bit hash
 * first, then the space and the bytes. One lock guards the table; plans
 * leave it by reference count (ein_plan_release), so a thread still
 * running an evicted plan keeps it alive.
 */
#include <string.h>

#include "alloc.h"
#include "plan_cache.h"
#include "plan_object.h"

/* murmur3's 64-bit finalizer: every input bit reaches every output bit. */
static uint64_t finish(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  return h ^ (h >> 33);
}

static uint64_t step(uint64_t h, uint64_t w) {
  h ^= w * 0x9e3779b97f4a7c15ull;
  return ((h << 27) | (h >> 37)) * 0xbf58476d1ce4e5b9ull;
}

/* Sixteen bytes a step in two independent lanes (a byte-at-a-time FNV-1a
 * here was 9.5% of a cache hit's samples, docs/design.md): each word
 * multiplied in, rotated and multiplied again; the last words and the
 * zero-padded tail into the lanes, the length folded in. Equal hashes
 * only send a lookup on to compare the bytes, so the hash needs spread,
 * not strength. */
uint64_t ein_hash_bytes(const void *data, size_t len) {
  const unsigned char *p = data;
  uint64_t a = (uint64_t)len, b = ~(uint64_t)len, w[2];
  for (; len >= 16; p += 16, len -= 16) {
    memcpy(w, p, 16);
    a = step(a, w[0]);
    b = step(b, w[1]);
  }
  if (len >= 8) {
    memcpy(w, p, 8);
    a = step(a, w[0]);
    p += 8, len -= 8;
  }
  w[0] = 0;
  if (len) memcpy(w, p, len);
  b = step(b, w[0]);
  return finish(a + ((b << 32) | (b >> 32)));
}

void ein_plan_cache_init(ein_plan_cache *c) {
  pthread_mutex_init(&c->lock, NULL);
}

/* The entry under key in space, or NULL; with the lock held. */
static ein_cache_entry *lookup(ein_plan_cache *c, uint64_t h,
                               ein_key_space space, const char *key,
                               size_t len) {
  for (int i = 0; i < c->n; i++) {
    if (c->hashes[i] != h) continue;
    ein_cache_entry *e = &c->entries[i];
    if (e->space == space && e->key_len == len &&
        memcmp(e->key, key, len) == 0)
      return e;
  }
  return NULL;
}

/* The entry under key, counted as a hit (and made the most recently used)
 * or a miss; with the lock held. */
static ein_cache_entry *find(ein_plan_cache *c, uint64_t h,
                             ein_key_space space, const char *key,
                             size_t len) {
  ein_cache_entry *e = lookup(c, h, space, key, len);
  if (e) {
    e->last_use = ++c->clock;
    c->hits++;
  } else {
    c->misses++;
  }
  return e;
}

ein_plan *ein_plan_cache_find(ein_plan_cache *c, ein_key_space space,
                              uint64_t h, const char *key, size_t len) {
  pthread_mutex_lock(&c->lock);
  ein_cache_entry *e = find(c, h, space, key, len);
  ein_plan *plan = e ? e->plan : NULL;
  if (plan) ein_plan_retain(plan);
  pthread_mutex_unlock(&c->lock);
  return plan;
}

void *ein_plan_cache_find_data(ein_plan_cache *c, ein_key_space space,
                               uint64_t h, const char *key, size_t len) {
  pthread_mutex_lock(&c->lock);
  ein_cache_entry *e = find(c, h, space, key, len);
  void *data = e ? e->data.data : NULL;
  pthread_mutex_unlock(&c->lock);
  return data;
}

/* Drops what an entry that left the table held; outside the lock:
 * destroying a plan can take a while (CUDA modules), and a caller's
 * release callback is the caller's code. */
static void drop(ein_cache_entry *gone) {
  ein_plan_release(gone->plan);
  if (gone->key_heap) ein_free(gone->key);
  if (gone->data.release) gone->data.release(gone->data.data);
}

/* The slot a new entry takes: a free one, else the least recently used
 * one of either space (one eviction rule for the whole table), copied to
 * *gone for the caller to drop outside the lock. */
static int victim(ein_plan_cache *c, ein_cache_entry *gone) {
  if (c->n < EIN_PLAN_CACHE_SIZE) return c->n++;
  int v = 0;
  for (int i = 1; i < c->n; i++)
    if (c->entries[i].last_use < c->entries[v].last_use) v = i;
  *gone = c->entries[v];
  c->evictions++;
  return v;
}

bool ein_plan_cache_put(ein_plan_cache *c, ein_key_space space,
                        uint64_t h, const char *key, size_t len,
                        ein_plan *plan, ein_cache_data data) {
  bool heap = len > EIN_CACHE_INLINE_KEY;
  char *copy = heap ? ein_malloc(len) : NULL;
  if (heap && !copy) return false;
  if (heap) memcpy(copy, key, len);
  ein_cache_entry gone = {0};
  pthread_mutex_lock(&c->lock);
  if (lookup(c, h, space, key, len)) { /* another thread planned it first */
    pthread_mutex_unlock(&c->lock);
    ein_free(copy);
    return false;
  }
  int v = victim(c, &gone);
  ein_cache_entry *e = &c->entries[v];
  c->hashes[v] = h;
  *e = (ein_cache_entry){space, heap, copy, len, plan, ++c->clock, data, {0}};
  if (!heap) e->key = memcpy(e->small, key, len);
  ein_plan_retain(plan);
  pthread_mutex_unlock(&c->lock);
  drop(&gone);
  return true;
}

void ein_plan_cache_stats(ein_plan_cache *c, ein_cache_stats *out) {
  pthread_mutex_lock(&c->lock);
  *out = (ein_cache_stats){c->hits, c->misses, c->evictions, c->n,
                           EIN_PLAN_CACHE_SIZE};
  pthread_mutex_unlock(&c->lock);
}

void ein_plan_cache_destroy(ein_plan_cache *c) {
  for (int i = 0; i < c->n; i++) drop(&c->entries[i]);
  c->n = 0;
  pthread_mutex_destroy(&c->lock);
}
