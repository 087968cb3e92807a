/*
 * checked.h - int64 arithmetic that reports overflow instead of wrapping.
 * Sizes come from users; a product of them must never silently wrap.
 */
#ifndef EIN_UTIL_CHECKED_H
#define EIN_UTIL_CHECKED_H

#include <stdbool.h>
#include <stdint.h>

/* *out = a * b; false on overflow. */
static inline bool ein_mul_i64(int64_t a, int64_t b, int64_t *out) {
  return !__builtin_mul_overflow(a, b, out);
}

/* *out = a + b; false on overflow. */
static inline bool ein_add_i64(int64_t a, int64_t b, int64_t *out) {
  return !__builtin_add_overflow(a, b, out);
}

/* *out = a - b; false on overflow. */
static inline bool ein_sub_i64(int64_t a, int64_t b, int64_t *out) {
  return !__builtin_sub_overflow(a, b, out);
}

#endif
