/*
 * test_path_slices.c - the sliced axes ein_path_search chooses under a
 * memory limit (src/planner/path/path_slice.c), checked with intermediate
 * sizes computed here from the returned path, not by the planner's own
 * cost function: one slice fits the limit, and every sliced axis is
 * needed (unslicing it alone, with the same path, passes the limit). The
 * slicer promises the second: it unslices, in the order sliced, each axis
 * the slice fits without, and unslicing more only grows the slice.
 *
 * Axis sizes and limits are powers of two, so an intermediate that lands
 * exactly on the limit is common: "fits" must include equality.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "path.h"

#define MAXN 14
#define MAXAX 48

typedef struct net {
  int n, naxes, nout;
  int ax[MAXN][MAXAX], nax[MAXN], out[MAXAX];
  int64_t size[MAXAX];
} net;

static uint64_t state = 0x2545f4914f6cdd1du;

static int rnd(int n) {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return (int)(state % (uint64_t)n);
}

static void give(net *g, int i, int a) {
  for (int k = 0; k < g->nax[i]; k++)
    if (g->ax[i][k] == a) return;
  g->ax[i][g->nax[i]++] = a;
}

/* A ring of n operands with random chords (bonds of size 2 or 4), now and
 * then a hyperedge on three operands, and a few open (output) axes. */
static void random_net(net *g) {
  memset(g, 0, sizeof *g);
  g->n = 6 + rnd(MAXN - 5);
  int bonds = g->n + rnd(g->n);
  for (int b = 0; b < bonds && g->naxes < MAXAX - 4; b++) {
    int i = b < g->n ? b : rnd(g->n);
    int j = b < g->n ? (b + 1) % g->n : rnd(g->n);
    if (i == j) continue;
    int a = g->naxes++;
    g->size[a] = 2 << rnd(2);
    give(g, i, a);
    give(g, j, a);
    if (rnd(8) == 0) give(g, rnd(g->n), a);
  }
  for (int k = 1 + rnd(3); k > 0; k--) {
    int a = g->naxes++;
    g->size[a] = 2;
    give(g, rnd(g->n), a);
    g->out[g->nout++] = a;
  }
}

static ein_path_query query_of(const net *g, const int **rows) {
  for (int i = 0; i < g->n; i++) rows[i] = g->ax[i];
  return (ein_path_query){.n = g->n, .axes = rows, .naxes = g->nax,
                          .output_axes = g->out, .output_naxes = g->nout,
                          .total_axes = g->naxes, .sizes = g->size,
                          .seed = 7, .trials = 4};
}

/* Whether operand i has axis a. */
static bool has(const net *g, int i, int a) {
  for (int k = 0; k < g->nax[i]; k++)
    if (g->ax[i][k] == a) return true;
  return false;
}

/* The largest intermediate (every step's result but the last) of the SSA
 * path with the axes marked in `one` at size 1: an intermediate keeps an
 * axis of its leaves that a leaf outside it or the output also has. */
static double largest_of(const net *g, const int (*pairs)[2], const bool *one) {
  uint32_t leaves[2 * MAXN];
  for (int i = 0; i < g->n; i++) leaves[i] = 1u << i;
  double largest = 0;
  for (int k = 0; k < g->n - 2; k++) {
    uint32_t in = leaves[pairs[k][0]] | leaves[pairs[k][1]];
    leaves[g->n + k] = in;
    double size = 1;
    for (int a = 0; a < g->naxes; a++) {
      bool inside = false, outside = false;
      for (int i = 0; i < g->n; i++)
        if (has(g, i, a)) *((in >> i) & 1 ? &inside : &outside) = true;
      for (int k2 = 0; k2 < g->nout; k2++) outside |= g->out[k2] == a;
      if (inside && outside && !one[a]) size *= (double)g->size[a];
    }
    if (size > largest) largest = size;
  }
  return largest;
}

/* One network at limit free_largest / 2^cut: the slice fits, and each
 * sliced axis is needed. Returns whether the search sliced. */
static bool check_needed(const net *g, int seed, int cut) {
  const int *rows[MAXN];
  ein_path_query q = query_of(g, rows);
  ein_arena arena;
  ein_arena_init(&arena);
  ein_path_result free_r, r;
  bool sliced = false;
  if (ein_path_search(&q, &arena, &free_r) != EIN_PATH_OK) {
    CHECK(false, "net %d: the unlimited search failed", seed);
    ein_arena_destroy(&arena);
    return false;
  }
  q.memory_limit = free_r.largest / (double)(1 << cut);
  ein_path_status st = ein_path_search(&q, &arena, &r);
  if (st == EIN_PATH_OK && r.nsliced > 0) {
    sliced = true;
    bool one[MAXAX] = {false};
    for (int s = 0; s < r.nsliced; s++) one[r.sliced[s]] = true;
    double fit = largest_of(g, (const int(*)[2])r.pairs, one);
    CHECK(fit <= q.memory_limit && fit == r.slice_largest,
          "net %d, limit %g: one slice's largest %g by hand, %g reported",
          seed, q.memory_limit, fit, r.slice_largest);
    for (int s = 0; s < r.nsliced; s++) {
      int a = r.sliced[s];
      one[a] = false;
      double without = largest_of(g, (const int(*)[2])r.pairs, one);
      one[a] = true;
      CHECK(without > q.memory_limit,
            "net %d, limit %g: axis %d (size %lld) is sliced, but the slice "
            "fits without it (largest %g)",
            seed, q.memory_limit, a, (long long)g->size[a], without);
    }
  }
  ein_arena_destroy(&arena);
  return sliced;
}

static void sliced_axes_needed(void) {
  int sliced = 0, tried = 0;
  for (int seed = 0; seed < 50; seed++) {
    net g;
    random_net(&g);
    for (int cut = 1; cut <= 4; cut++, tried++)
      sliced += check_needed(&g, seed, cut);
  }
  /* (the checks above run only on sliced results: most must be) */
  CHECK(sliced * 2 > tried, "only %d of %d limits were met by slicing",
        sliced, tried);
  printf("sliced axes needed: %d of %d limited searches sliced\n", sliced,
         tried);
}

int main(void) {
  sliced_axes_needed();
  return test_summary("path_slices");
}
