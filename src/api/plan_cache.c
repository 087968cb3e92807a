/*
 * plan_cache.c - a small LRU cache of plans on a context, so a repeated
 * ein_eval skips parsing, binding and planning. Keys are byte strings built
 * by the plain path (plain_eval.c); lookups compare a 64-bit hash first, then the bytes. One lock
 * guards the table; plans leave it by reference count (ein_plan_release),
 * so a thread still running an evicted plan keeps it alive.
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

/* The entry under key, or NULL; with the lock held. */
static ein_cache_entry *lookup(ein_plan_cache *c, uint64_t h, const char *key,
                               size_t len) {
  for (int i = 0; i < c->n; i++) {
    ein_cache_entry *e = &c->entries[i];
    if (e->hash == h && e->key_len == len && memcmp(e->key, key, len) == 0)
      return e;
  }
  return NULL;
}

ein_plan *ein_plan_cache_find(ein_plan_cache *c, const char *key,
                              size_t len) {
  uint64_t h = ein_hash_bytes(key, len);
  pthread_mutex_lock(&c->lock);
  ein_cache_entry *e = lookup(c, h, key, len);
  ein_plan *plan = NULL;
  if (e) {
    e->last_use = ++c->clock;
    c->hits++;
    plan = e->plan;
    ein_plan_retain(plan);
  } else {
    c->misses++;
  }
  pthread_mutex_unlock(&c->lock);
  return plan;
}

bool ein_plan_cache_put(ein_plan_cache *c, const char *key, size_t len,
                        ein_plan *plan) {
  uint64_t h = ein_hash_bytes(key, len);
  char *copy = ein_malloc(len ? len : 1);
  if (!copy) return false;
  memcpy(copy, key, len);
  ein_plan *evicted = NULL;
  char *evicted_key = NULL;
  pthread_mutex_lock(&c->lock);
  if (lookup(c, h, key, len)) { /* another thread planned it first */
    pthread_mutex_unlock(&c->lock);
    ein_free(copy);
    return false;
  }
  ein_cache_entry *e;
  if (c->n < EIN_PLAN_CACHE_SIZE) {
    e = &c->entries[c->n++];
  } else {
    e = &c->entries[0];
    for (int i = 1; i < c->n; i++)
      if (c->entries[i].last_use < e->last_use) e = &c->entries[i];
    evicted = e->plan;
    evicted_key = e->key;
  }
  e->hash = h;
  e->key = copy;
  e->key_len = len;
  e->plan = plan;
  e->last_use = ++c->clock;
  ein_plan_retain(plan);
  pthread_mutex_unlock(&c->lock);
  /* Outside the lock: destroying a plan can take a while (CUDA modules). */
  ein_plan_release(evicted);
  ein_free(evicted_key);
  return true;
}

void ein_plan_cache_destroy(ein_plan_cache *c) {
  for (int i = 0; i < c->n; i++) {
    ein_plan_release(c->entries[i].plan);
    ein_free(c->entries[i].key);
  }
  c->n = 0;
  pthread_mutex_destroy(&c->lock);
}
