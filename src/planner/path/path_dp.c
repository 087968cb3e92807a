/*
 * path_dp.c - the exact contraction order of up to EIN_PATH_DP_MAX tensors
 * by dynamic programming over subsets (path_internal.h). Used for whole
 * small problems and for the windows that reconfiguration re-solves.
 *
 * The tensors' axes are renumbered 0..L-1 and held as bitsets of
 * ceil(L/64) words per subset, so a window of intermediates with many axes
 * costs words, not a fixed width. Every split is tried (outer products
 * included), so the result is as good as opt_einsum's 'optimal'.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "path_internal.h"

typedef struct dp {
  const pnet *net;
  int k, nw, nloc;
  uint32_t full;
  int *glob;      /* local axis -> global id */
  uint64_t *uni;  /* per subset: nw words, axes of its tensors */
  uint64_t *res;  /* per subset: axes its result keeps */
  uint64_t *outw; /* the result's axes */
  double *vol;    /* per subset: volume of res */
  pcost *best;
  uint32_t *split;
  bool root;
  bool prune;   /* no limit: bound by the best so far (a sum, or SIZE's max) */
  double bound; /* the best score of the subset being split */
} dp;

static int find_local(const dp *d, int id) {
  int lo = 0, hi = d->nloc - 1;
  while (lo <= hi) {
    int mid = (lo + hi) / 2;
    if (d->glob[mid] == id) return mid;
    if (d->glob[mid] < id) lo = mid + 1; else hi = mid - 1;
  }
  return -1;
}

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* The local axes: the sorted union of the tensors' and the result's ids. */
static bool dp_axes(dp *d, const plist *const *leaves, const plist *out,
                    ein_arena *arena) {
  int m = out->len;
  for (int i = 0; i < d->k; i++) m += leaves[i]->len;
  d->glob = ein_arena_alloc(arena, (size_t)m + 1, sizeof *d->glob);
  if (!d->glob) return false;
  int c = 0;
  for (int i = 0; i < d->k; i++)
    for (int j = 0; j < leaves[i]->len; j++) d->glob[c++] = leaves[i]->ax[j];
  for (int j = 0; j < out->len; j++) d->glob[c++] = out->ax[j];
  qsort(d->glob, (size_t)c, sizeof *d->glob, cmp_int);
  d->nloc = 0;
  for (int j = 0; j < c; j++)
    if (!d->nloc || d->glob[d->nloc - 1] != d->glob[j])
      d->glob[d->nloc++] = d->glob[j];
  d->nw = (d->nloc + 63) / 64 > 0 ? (d->nloc + 63) / 64 : 1;
  return true;
}

static void set_bits(const dp *d, uint64_t *w, const plist *l) {
  for (int j = 0; j < l->len; j++) {
    int b = find_local(d, l->ax[j]);
    w[b >> 6] |= (uint64_t)1 << (b & 63);
  }
}

static double words_volume(const dp *d, const uint64_t *w) {
  double v = 1;
  for (int i = 0; i < d->nw; i++)
    for (uint64_t bits = w[i]; bits; bits &= bits - 1)
      v *= d->net->sz[d->glob[i * 64 + __builtin_ctzll(bits)]];
  return v;
}

/* uni, res and vol of every subset. */
static void dp_tables(dp *d, const plist *const *leaves) {
  int nw = d->nw;
  for (int i = 0; i < d->k; i++)
    set_bits(d, d->uni + ((size_t)1 << i) * nw, leaves[i]);
  for (uint32_t m = 1; m <= d->full; m++) {
    uint64_t *u = d->uni + (size_t)m * nw;
    const uint64_t *lo = d->uni + (size_t)(m & -m) * nw,
                   *rest = d->uni + (size_t)(m & (m - 1)) * nw;
    for (int w = 0; w < nw; w++) u[w] = lo[w] | rest[w];
  }
  for (uint32_t m = 1; m <= d->full; m++) {
    const uint64_t *u = d->uni + (size_t)m * nw,
                   *c = d->uni + (size_t)(d->full ^ m) * nw;
    uint64_t *r = d->res + (size_t)m * nw;
    for (int w = 0; w < nw; w++) r[w] = u[w] & (d->outw[w] | c[w]);
    d->vol[m] = words_volume(d, r);
  }
}

/* The step joining a and b into m: FLOPs of opt_einsum's count. */
static double step_flops(const dp *d, uint32_t a, uint32_t b, uint32_t m) {
  int nw = d->nw;
  const uint64_t *ra = d->res + (size_t)a * nw, *rb = d->res + (size_t)b * nw,
                 *rm = d->res + (size_t)m * nw;
  double v = 1;
  bool summed = false;
  for (int w = 0; w < nw; w++) {
    uint64_t t = ra[w] | rb[w];
    summed |= (t & ~rm[w]) != 0;
    for (uint64_t bits = t; bits; bits &= bits - 1)
      v *= d->net->sz[d->glob[w * 64 + __builtin_ctzll(bits)]];
  }
  return v * (summed ? 2 : 1);
}

/* The best split of m; pcost_better puts trees within the limit first, so
 * a subset that no split keeps within it still gets its cheapest tree,
 * ranked after every tree that fits. */
static void dp_best_split(dp *d, uint32_t m) {
  uint32_t low = m & -m, rest = m ^ low;
  bool have = false;
  if (d->net->work) /* the splits about to be tried */
    *d->net->work += ((uint64_t)1 << __builtin_popcount(rest)) * (uint64_t)(d->nw + 2);
  for (uint32_t s = rest;; s = (s - 1) & rest) {
    uint32_t a = s | low, b = m ^ a;
    if (b && have && d->prune) { /* bound: the parts alone cost more */
      double lb = d->best[a].flops + d->best[b].flops;
      if (d->net->objective == EIN_PATH_COMBO)
        lb += d->net->alpha * (d->best[a].write + d->best[b].write);
      if (d->net->objective == EIN_PATH_SIZE)
        lb = fmax(d->best[a].largest, d->best[b].largest);
      if (lb > d->bound * (1 + 1e-9)) b = 0;
    }
    if (b) {
      pcost c = d->best[a];
      c.flops += d->best[b].flops;
      c.write += d->best[b].write;
      c.largest = fmax(c.largest, d->best[b].largest);
      pcost_add_step(d->net, &c, step_flops(d, a, b, m), d->vol[m],
                     d->root && m == d->full);
      if (!have || pcost_better(d->net, c, d->best[m])) {
        d->best[m] = c;
        d->split[m] = a;
        d->bound = pcost_score(d->net, c);
        have = true;
      }
    }
    if (s == 0) break;
  }
}

/* The tree of splits in post-order as SSA pairs over 0..k-1. */
static int dp_unfold(const dp *d, uint32_t m, int (*pairs)[2], int *np) {
  if ((m & (m - 1)) == 0) return __builtin_ctz(m);
  int l = dp_unfold(d, d->split[m], pairs, np);
  int r = dp_unfold(d, m ^ d->split[m], pairs, np);
  pairs[*np][0] = l;
  pairs[*np][1] = r;
  return d->k + (*np)++;
}

bool path_dp(const pnet *net, int k, const plist *const *leaves,
             const plist *out, bool root, ein_arena *arena, int (*pairs)[2],
             pcost *cost) {
  dp d = {.net = net, .k = k, .root = root,
          .prune = net->limit <= 0};
  *cost = (pcost){0, 0, 0};
  if (k < 2) return true;
  d.full = (uint32_t)((1u << k) - 1);
  if (!dp_axes(&d, leaves, out, arena)) return false;
  size_t nsub = (size_t)d.full + 1;
  d.uni = ein_arena_alloc(arena, nsub * (size_t)d.nw, sizeof *d.uni);
  d.res = ein_arena_alloc(arena, nsub * (size_t)d.nw, sizeof *d.res);
  d.outw = ein_arena_alloc(arena, (size_t)d.nw, sizeof *d.outw);
  d.vol = ein_arena_alloc(arena, nsub, sizeof *d.vol);
  d.best = ein_arena_alloc(arena, nsub, sizeof *d.best);
  d.split = ein_arena_alloc(arena, nsub, sizeof *d.split);
  if (!d.uni || !d.res || !d.outw || !d.vol || !d.best || !d.split)
    return false;
  set_bits(&d, d.outw, out);
  dp_tables(&d, leaves);
  for (uint32_t m = 1; m <= d.full; m++)
    if (m & (m - 1)) dp_best_split(&d, m);
  int np = 0;
  dp_unfold(&d, d.full, pairs, &np);
  *cost = d.best[d.full];
  return true;
}
