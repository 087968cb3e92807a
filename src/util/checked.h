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

/* The product of the sizes other than 0 in *span, and whether any size is
 * 0 in *empty. Compact strides are products of those sizes even when a 0
 * empties the tensor, so every shape einc accepts must pass this. False
 * when the product passes int64. Sizes must not be negative. */
static inline bool ein_nonzero_span(int nd, const int64_t *shape,
                                    int64_t *span, bool *empty) {
  bool fits = true;
  *span = 1;
  *empty = false;
  for (int d = 0; d < nd; d++) {
    *empty |= shape[d] == 0;
    fits = fits && ein_mul_i64(*span, shape[d] ? shape[d] : 1, span);
  }
  return fits;
}

#endif
