/*
 * hash.h - 64-bit FNV-1a, the hash of the kernel caches' keys (codegen
 * names a kernel by its source's hash) and of the disk cache's entries
 * (runtime/disk_cache.c checks keys and payloads with it): here, below
 * both, so that neither reaches into the other.
 */
#ifndef EIN_HASH_H
#define EIN_HASH_H

#include <stddef.h>
#include <stdint.h>

#define EIN_FNV_SEED 0xcbf29ce484222325ull

/* FNV-1a of len bytes, starting from `seed` (EIN_FNV_SEED: the standard
 * offset basis). */
static inline uint64_t ein_fnv1a(const void *data, size_t len,
                                 uint64_t seed) {
  const unsigned char *p = data;
  uint64_t h = seed;
  for (size_t i = 0; i < len; i++) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

#endif
