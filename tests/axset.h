/*
 * axset.h - fixed sets of up to 256 axis ids and opt_einsum's FLOP count
 * of a step, for the tests' brute-force references (test_plan.c's
 * exhaustive contraction order). Written apart from the planner's own
 * sets and count (planner_internal.h: axset, flop_count) on purpose: the
 * test compares the path search's cost with one counted independently.
 */
#ifndef EIN_AXSET_H
#define EIN_AXSET_H

#include <stdbool.h>
#include <stdint.h>

typedef struct ein_axset {
  uint64_t w[4];
} ein_axset;

static inline void ein_axset_add(ein_axset *s, int a) {
  s->w[a >> 6] |= (uint64_t)1 << (a & 63);
}
static inline bool ein_axset_has(const ein_axset *s, int a) {
  return (s->w[a >> 6] >> (a & 63)) & 1;
}
static inline ein_axset ein_axset_or(ein_axset a, ein_axset b) {
  for (int i = 0; i < 4; i++) a.w[i] |= b.w[i];
  return a;
}
static inline ein_axset ein_axset_and(ein_axset a, ein_axset b) {
  for (int i = 0; i < 4; i++) a.w[i] &= b.w[i];
  return a;
}
static inline ein_axset ein_axset_minus(ein_axset a, ein_axset b) {
  for (int i = 0; i < 4; i++) a.w[i] &= ~b.w[i];
  return a;
}
static inline bool ein_axset_empty(ein_axset a) {
  return !(a.w[0] | a.w[1] | a.w[2] | a.w[3]);
}

/* Product of the sizes of the axes in s (a double: it may exceed int64). */
static inline double ein_axset_volume(ein_axset s, const int64_t *sizes) {
  double v = 1;
  for (int w = 0; w < 4; w++)
    for (uint64_t bits = s.w[w]; bits; bits &= bits - 1)
      v *= (double)sizes[w * 64 + __builtin_ctzll(bits)];
  return v;
}

/* opt_einsum's FLOP count of one step that touches `touched` and keeps
 * `kept`: volume(touched) * (max(1, nterms - 1) + (anything summed)). */
static inline double ein_step_flop_count(ein_axset touched, ein_axset kept,
                                         int nterms, const int64_t *sizes) {
  bool summed = !ein_axset_empty(ein_axset_minus(touched, kept));
  int factor = (nterms - 1 > 1 ? nterms - 1 : 1) + (summed ? 1 : 0);
  return ein_axset_volume(touched, sizes) * factor;
}

#endif
