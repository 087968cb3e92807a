/*
 * path_slice.c - which axes to slice so that one slice's intermediates fit
 * the memory limit (path_internal.h).
 *
 * Greedy, one axis at a time: among the axes of the intermediates still
 * over the limit, the one that buys the most excess (sum over those
 * intermediates of log2(size / limit)) per bit of FLOP overhead (log2 of
 * the sliced total over the present total). Then the tree is reconfigured
 * with the sliced axes at size 1 (windows of 6 leaves, then 10, as the
 * search's own reconfiguration), which often lowers one slice's cost and
 * size enough that an axis can be unsliced again: each is tried, dearest
 * first, and kept unsliced when the slice still fits.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "path_internal.h"

/* One slice's cost and its excess over the limit. */
typedef struct sliced_cost {
  pcost c;
  double total;  /* FLOPs of every slice */
  double excess; /* bits over the limit, summed over intermediates */
} sliced_cost;

static bool eval_sliced(const pnet *net, const int (*pairs)[2],
                        double nslices, plist *nodes, ein_arena *arena,
                        sliced_cost *s) {
  if (!ptree_eval(net, pairs, arena, nodes, &s->c)) return false;
  s->total = s->c.flops * nslices;
  s->excess = 0;
  for (int v = net->n; v < 2 * net->n - 2; v++) {
    double size = plist_volume(net, &nodes[v]);
    if (size > net->limit) s->excess += log2(size / net->limit);
  }
  return true;
}

/* Marks the axes of intermediates over the limit that may be sliced. */
static int candidates(const pnet *net, const plist *nodes,
                      const bool *no_slice, int *cand, char *seen) {
  int m = 0;
  memset(seen, 0, (size_t)net->naxes);
  for (int v = net->n; v < 2 * net->n - 2; v++) {
    if (plist_volume(net, &nodes[v]) <= net->limit) continue;
    for (int x = 0; x < nodes[v].len; x++) {
      int a = nodes[v].ax[x];
      if (seen[a] || net->sz[a] <= 1 || (no_slice && no_slice[a])) continue;
      seen[a] = 1;
      cand[m++] = a;
    }
  }
  return m;
}

/* The next axis to slice, or -1 when none reduces the excess. */
static bool pick_axis(pnet *net, const int (*pairs)[2], double nslices,
                      const sliced_cost *now, const int *cand, int m,
                      int *pick) {
  double best = INFINITY;
  *pick = -1;
  for (int k = 0; k < m; k++) {
    int a = cand[k];
    double d = net->sz[a];
    net->sz[a] = 1;
    ein_arena scratch;
    ein_arena_init(&scratch);
    plist *nodes = ein_arena_alloc(&scratch, (size_t)(2 * net->n), sizeof *nodes);
    sliced_cost s;
    bool ok = nodes && eval_sliced(net, pairs, nslices * d, nodes, &scratch, &s);
    ein_arena_destroy(&scratch);
    net->sz[a] = d;
    if (!ok) return false;
    double gain = now->excess - s.excess;
    if (gain <= 1e-9) continue;
    double score = (log2(s.total / now->total) + 1e-3) / gain;
    if (score < best) best = score, *pick = a;
  }
  return true;
}

/* Slices greedily until one slice fits; *fits false when it cannot. */
static bool slice_greedy(pnet *net, const int (*pairs)[2],
                         const bool *no_slice, int *sliced, int *nsliced,
                         bool *fits) {
  int *cand = malloc(((size_t)net->naxes + 1) * sizeof *cand);
  char *seen = malloc((size_t)net->naxes + 1);
  bool ok = cand && seen;
  double nslices = 1;
  *fits = false;
  while (ok) {
    ein_arena scratch;
    ein_arena_init(&scratch);
    plist *nodes = ein_arena_alloc(&scratch, (size_t)(2 * net->n), sizeof *nodes);
    sliced_cost now;
    int a = -1;
    ok = nodes && eval_sliced(net, pairs, nslices, nodes, &scratch, &now);
    if (ok && now.c.largest <= net->limit) *fits = true;
    int m = ok && !*fits ? candidates(net, nodes, no_slice, cand, seen) : 0;
    if (m) ok = pick_axis(net, pairs, nslices, &now, cand, m, &a);
    ein_arena_destroy(&scratch);
    if (!ok || *fits || a < 0) break;
    nslices *= net->sz[a];
    net->sz[a] = 1;
    sliced[(*nsliced)++] = a;
  }
  free(cand);
  free(seen);
  return ok;
}

/* Unslices each sliced axis (largest first) that the slice fits without. */
static bool unslice(pnet *net, const int (*pairs)[2], const int64_t *full,
                    int *sliced, int *nsliced) {
  for (int k = 0; k < *nsliced;) {
    int a = sliced[k];
    net->sz[a] = (double)full[a];
    double f, largest;
    ein_arena scratch;
    ein_arena_init(&scratch);
    plist *nodes = ein_arena_alloc(&scratch, (size_t)(2 * net->n), sizeof *nodes);
    pcost c;
    bool ok = nodes && ptree_eval(net, pairs, &scratch, nodes, &c);
    ein_arena_destroy(&scratch);
    if (!ok) return false;
    f = c.flops, largest = c.largest;
    (void)f;
    if (largest <= net->limit) {
      sliced[k] = sliced[--*nsliced];
    } else {
      net->sz[a] = 1;
      k++;
    }
  }
  return true;
}

bool path_slice(pnet *net, int (*pairs)[2], const bool *no_slice,
                double deadline, int *sliced, int *nsliced, pcost *cost,
                bool *fits) {
  *nsliced = 0;
  int64_t *full = malloc(((size_t)net->naxes + 1) * sizeof *full);
  if (!full) return false;
  for (int a = 0; a < net->naxes; a++) full[a] = (int64_t)net->sz[a];
  bool ok = slice_greedy(net, (const int(*)[2])pairs, no_slice, sliced,
                         nsliced, fits);
  if (ok && *fits && *nsliced) {
    ok = path_reconfigure(net, pairs, 6, deadline, 4, cost) &&
         path_reconfigure(net, pairs, 10, deadline, 4, cost) &&
         unslice(net, (const int(*)[2])pairs, full, sliced, nsliced);
  }
  free(full);
  if (!ok) return false;
  ein_arena scratch;
  ein_arena_init(&scratch);
  plist *nodes = ein_arena_alloc(&scratch, (size_t)(2 * net->n), sizeof *nodes);
  ok = nodes && ptree_eval(net, (const int(*)[2])pairs, &scratch, nodes, cost);
  ein_arena_destroy(&scratch);
  return ok;
}
