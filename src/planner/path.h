/*
 * path.h - contraction order: which pair of operands to contract next.
 *
 * Takes: the axis set of each operand (after axes private to one operand
 * were summed away), the output's axis set and the axis sizes.
 * Gives: n-1 pairs in opt_einsum's "SSA" numbering: operands 0..n-1 are
 * the inputs, n+i is the result of the i-th pair. The search minimises the
 * FLOPs of opt_einsum's count, breaking ties by the largest intermediate,
 * and skips intermediates larger than an optional limit. Up to
 * EIN_PATH_DP_MAX operands it is an exact dynamic programme over subsets
 * (outer products included, so it is as good as opt_einsum's 'optimal');
 * beyond, a greedy search.
 */
#ifndef EIN_PATH_H
#define EIN_PATH_H

#include <stdbool.h>
#include <stdint.h>

#include "arena.h"

enum { EIN_PATH_DP_MAX = 12 };

/* A set of axis ids (up to 256). */
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
double ein_axset_volume(ein_axset s, const int64_t *sizes);

/* opt_einsum's FLOP count of one step that touches `touched` and keeps
 * `kept`: volume(touched) * (max(1, nterms - 1) + (anything summed)). */
double ein_step_flop_count(ein_axset touched, ein_axset kept, int nterms,
                           const int64_t *sizes);

typedef struct ein_path_query {
  int n;
  const ein_axset *operands;
  ein_axset output;
  const int64_t *sizes;
  double memory_limit; /* elements of one intermediate; 0: none */
} ein_path_query;

/* Fills pairs[0..n-2]. *method is "dp" or "greedy". Returns false only
 * when memory runs out. */
bool ein_path_search(const ein_path_query *q, ein_arena *arena,
                     int (*pairs)[2], const char **method);

#endif
