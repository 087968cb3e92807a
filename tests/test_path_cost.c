/*
 * test_path_cost.c - ein_path_cost (src/planner/path/path.h), the cost
 * every path search compares and reports, against counts done by hand
 * with opt_einsum's convention: a pairwise step costs the product of the
 * sizes of every axis its two operands have, twice when it sums an axis
 * away; the largest intermediate is the largest result before the last.
 * The other path tests compare the search's reported cost with this
 * function, so only a count made outside einc can show it wrong. The FLOP
 * counts below are also opt_einsum 3.4's (contract_path with the same
 * pairs; its largest_intermediate counts the output as well).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "harness.h"
#include "path.h"

/* A network of up to 4 operands of up to 3 axes each. */
typedef struct net {
  int n, nout, naxes;
  int ax[4][3], nax[4], out[3];
  int64_t size[8];
} net;

static ein_path_query query_of(const net *g, const int **rows) {
  for (int i = 0; i < g->n; i++) rows[i] = g->ax[i];
  return (ein_path_query){.n = g->n, .axes = rows, .naxes = g->nax,
                          .output_axes = g->out, .output_naxes = g->nout,
                          .total_axes = g->naxes, .sizes = g->size};
}

/* pairs holds one pair past the n-1 of the path (a valid pair of leaves),
 * so that a cost that read past the path would count it, not a stray
 * value. */
static void check_cost(const char *what, const net *g, const int (*pairs)[2],
                       const int *sliced, int nsliced, double want_flops,
                       double want_largest) {
  const int *rows[4];
  ein_path_query q = query_of(g, rows);
  double flops = -1, largest = -1;
  bool ok = ein_path_cost(&q, pairs, sliced, nsliced, &flops, &largest);
  CHECK(ok && flops == want_flops && largest == want_largest,
        "%s: FLOPs %g, largest %g; by hand %g, %g", what, flops, largest,
        want_flops, want_largest);
}

/* i j, j k, k l -> i l with i=2 j=3 k=4 l=5. */
static void chain(void) {
  net g = {.n = 3, .nout = 2, .naxes = 4,
           .ax = {{0, 1}, {1, 2}, {2, 3}}, .nax = {2, 2, 2}, .out = {0, 3},
           .size = {2, 3, 4, 5}};
  /* (ij, jk) -> ik: 2*3*4 = 24, j summed: 48; (ik, kl) -> il: 2*4*5 = 40,
   * k summed: 80. Largest intermediate: ik, 8 elements. */
  const int left[3][2] = {{0, 1}, {3, 2}, {0, 1}};
  check_cost("chain, left first", &g, left, NULL, 0, 128, 8);
  /* (jk, kl) -> jl: 3*4*5 = 60, k summed: 120; (ij, jl) -> il: 2*3*5 =
   * 30, j summed: 60. Largest: jl, 15. */
  const int right[3][2] = {{1, 2}, {0, 3}, {0, 1}};
  check_cost("chain, right first", &g, right, NULL, 0, 180, 15);
  /* One slice of k (k's size 1): (ij, jk) -> ik: 2*3*1 = 6, j summed:
   * 12; (ik, kl) -> il: 2*1*5 = 10, k summed: 20. Largest: ik, 2. */
  const int k_axis[1] = {2};
  check_cost("chain, left first, k sliced", &g, left, k_axis, 1, 32, 2);
}

/* An outer product then a sum: i, j, i j -> (nothing) with i=3 j=7: the
 * first pair sums nothing, the second sums both. */
static void outer_then_sum(void) {
  net g = {.n = 3, .nout = 0, .naxes = 2,
           .ax = {{0}, {1}, {0, 1}}, .nax = {1, 1, 2}, .size = {3, 7}};
  /* (i, j) -> ij: 21, nothing summed; (ij, ij) -> scalar: 21 * 2 = 42.
   * Largest: ij, 21. */
  const int pairs[3][2] = {{0, 1}, {3, 2}, {0, 1}};
  check_cost("outer product then a full sum", &g, pairs, NULL, 0, 63, 21);
}

int main(void) {
  chain();
  outer_then_sum();
  return test_summary("path_cost");
}
