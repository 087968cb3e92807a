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
 * size enough that an axis can be unsliced again: each is tried in the
 * order sliced, and kept unsliced when the slice still fits.
 *
 * path_slice_reconf interleaves the two instead (cotengra's
 * "slice-reconf"): one axis, then a reconfiguration for one slice's FLOPs
 * alone, so each next choice is made on a tree already adapted to the
 * slices before it; the tree is held within the limit only once the
 * slices fit.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "path_internal.h"

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

/* Per axis, what slicing it alone changes, from one evaluation of the
 * tree: slicing axis a divides by size(a) every step that touches a and
 * every intermediate that keeps it, and nothing else. */
typedef struct axis_delta {
  double *flops;  /* change of one slice's FLOPs */
  double *excess; /* change of the excess (<= 0) */
} axis_delta;

/* Adds step k's share to the deltas of the candidate axes it touches (the
 * union of its operands' axes). */
static void step_deltas(const pnet *net, const plist *nodes, const int *pair,
                        const plist *out, const char *cand, axis_delta *d) {
  const plist *a = &nodes[pair[0]], *b = &nodes[pair[1]];
  int i = 0, j = 0, touched = 0;
  double vol = 1;
  while (i < a->len || j < b->len) {
    int x = j >= b->len || (i < a->len && a->ax[i] < b->ax[j]) ? a->ax[i++]
            : i >= a->len || b->ax[j] < a->ax[i]                ? b->ax[j++]
                                                  : (j++, a->ax[i++]);
    vol *= net->sz[x];
    touched++;
  }
  double flops = vol * (out->len < touched ? 2 : 1);
  if (net->work) *net->work += (uint64_t)touched + 1;
  for (i = 0, j = 0; i < a->len || j < b->len;) {
    int x = j >= b->len || (i < a->len && a->ax[i] < b->ax[j]) ? a->ax[i++]
            : i >= a->len || b->ax[j] < a->ax[i]                ? b->ax[j++]
                                                  : (j++, a->ax[i++]);
    if (cand[x]) d->flops[x] += flops * (1 / net->sz[x] - 1);
  }
}

/* Intermediate v's share of the excess deltas. */
static void node_deltas(const pnet *net, const plist *v, const char *cand,
                        axis_delta *d) {
  double size = plist_volume(net, v);
  if (size <= net->limit) return;
  double bits = log2(size / net->limit);
  for (int x = 0; x < v->len; x++) {
    int ax = v->ax[x];
    if (cand[ax]) d->excess[ax] += fmax(0, bits - log2(net->sz[ax])) - bits;
  }
}

/* The next axis to slice, or -1 when none reduces the excess: the least
 * bits of FLOP overhead per bit of excess removed. */
static void pick_axis(const pnet *net, const int (*pairs)[2],
                      const plist *nodes, double flops, const int *cand,
                      int m, const char *seen, axis_delta *d, int *pick) {
  int n = net->n;
  for (int k = 0; k < m; k++) d->flops[cand[k]] = d->excess[cand[k]] = 0;
  for (int k = 0; k < n - 1; k++) {
    step_deltas(net, nodes, pairs[k], &nodes[n + k], seen, d);
    if (k < n - 2) node_deltas(net, &nodes[n + k], seen, d);
  }
  double best = INFINITY;
  *pick = -1;
  for (int k = 0; k < m; k++) {
    int a = cand[k];
    double gain = -d->excess[a];
    if (gain <= 1e-9) continue;
    double ratio = (flops + d->flops[a]) * net->sz[a] / flops;
    double score = (log2(ratio) + 1e-3) / gain;
    if (score < best) best = score, *pick = a;
  }
}

/* One slicing in progress: the axes chosen so far and the scratch of the
 * choices. */
typedef struct slicer {
  pnet *net;
  const path_slice_goal *g;
  int64_t *full; /* the axes' sizes before slicing */
  int *sliced, *nsliced;
  int *cand;
  char *seen;
  axis_delta d;
} slicer;

static bool slicer_init(slicer *sl, pnet *net, const path_slice_goal *g,
                        int *sliced, int *nsliced) {
  size_t na = (size_t)net->naxes + 1;
  *sl = (slicer){net, g, malloc(na * sizeof(int64_t)), sliced, nsliced,
                 malloc(na * sizeof(int)), malloc(na),
                 {malloc(na * sizeof(double)), malloc(na * sizeof(double))}};
  *nsliced = 0;
  if (!sl->full || !sl->cand || !sl->seen || !sl->d.flops || !sl->d.excess)
    return false;
  for (int a = 0; a < net->naxes; a++) sl->full[a] = (int64_t)net->sz[a];
  return true;
}

static void slicer_free(slicer *sl) {
  free(sl->full);
  free(sl->cand);
  free(sl->seen);
  free(sl->d.flops);
  free(sl->d.excess);
}

/* Every slice's FLOPs given one slice's. */
static double total_flops(const slicer *sl, double flops) {
  for (int k = 0; k < *sl->nsliced; k++)
    flops *= (double)sl->full[sl->sliced[k]];
  return flops;
}

/* Slices greedily, appending to sl->sliced, until one slice fits or
 * max_new axes are added; *fits says whether it fits. Gives up (not
 * fitting) once every slice's FLOPs pass the goal's bound: slicing more
 * only adds. */
static bool slice_greedy(slicer *sl, const int (*pairs)[2], int max_new,
                         bool *fits) {
  pnet *net = sl->net;
  bool ok = true;
  *fits = false;
  for (int added = 0; ok; added++) {
    ein_arena scratch;
    ein_arena_init(&scratch);
    plist *nodes = ein_arena_alloc(&scratch, (size_t)(2 * net->n), sizeof *nodes);
    pcost now;
    int a = -1, m = 0;
    ok = nodes && ptree_eval(net, pairs, &scratch, nodes, &now);
    if (ok && now.largest <= net->limit) *fits = true;
    if (ok && !*fits && added < max_new &&
        total_flops(sl, now.flops) <= sl->g->bound)
      m = candidates(net, nodes, sl->g->no_slice, sl->cand, sl->seen);
    if (m)
      pick_axis(net, pairs, nodes, now.flops, sl->cand, m, sl->seen, &sl->d,
                &a);
    ein_arena_destroy(&scratch);
    if (!ok || *fits || a < 0) break;
    net->sz[a] = 1;
    sl->sliced[(*sl->nsliced)++] = a;
  }
  return ok;
}

/* Unslices each sliced axis, in the order sliced, that the slice fits
 * without. */
static bool unslice(slicer *sl, const int (*pairs)[2]) {
  pnet *net = sl->net;
  for (int k = 0; k < *sl->nsliced;) {
    int a = sl->sliced[k];
    net->sz[a] = (double)sl->full[a];
    ein_arena scratch;
    ein_arena_init(&scratch);
    plist *nodes = ein_arena_alloc(&scratch, (size_t)(2 * net->n), sizeof *nodes);
    pcost c;
    bool ok = nodes && ptree_eval(net, pairs, &scratch, nodes, &c);
    ein_arena_destroy(&scratch);
    if (!ok) return false;
    if (c.largest <= net->limit) {
      sl->sliced[k] = sl->sliced[--*sl->nsliced];
    } else {
      net->sz[a] = 1;
      k++;
    }
  }
  return true;
}

/* One slice's cost of pairs on net into *cost. */
static bool slice_cost(const pnet *net, const int (*pairs)[2], pcost *cost) {
  ein_arena scratch;
  ein_arena_init(&scratch);
  plist *nodes = ein_arena_alloc(&scratch, (size_t)(2 * net->n), sizeof *nodes);
  bool ok = nodes && ptree_eval(net, pairs, &scratch, nodes, cost);
  ein_arena_destroy(&scratch);
  return ok;
}

/* Reconfiguration unless the work is already spent: an attempt past its
 * share keeps its slices as chosen. */
static bool reconf(const pnet *net, int (*pairs)[2], int window,
                   double deadline, int passes) {
  pcost c;
  return path_over(net, deadline) ||
         path_reconfigure(net, pairs, window, deadline, passes, &c);
}

/* Once the slices fit: reconfiguration within the limit (windows of 6,
 * then 10), then unslicing what the slice fits without. */
static bool finish(slicer *sl, int (*pairs)[2]) {
  double deadline = sl->g->deadline;
  return reconf(sl->net, pairs, 6, deadline, 4) &&
         reconf(sl->net, pairs, 10, deadline, 4) &&
         unslice(sl, (const int(*)[2])pairs);
}

bool path_slice(pnet *net, int (*pairs)[2], const path_slice_goal *g,
                int *sliced, int *nsliced, pcost *cost, bool *fits) {
  slicer sl;
  bool ok = slicer_init(&sl, net, g, sliced, nsliced) &&
            slice_greedy(&sl, (const int(*)[2])pairs, INT32_MAX, fits);
  if (ok && *fits && *nsliced) ok = finish(&sl, pairs);
  slicer_free(&sl);
  return ok && slice_cost(net, (const int(*)[2])pairs, cost);
}

bool path_slice_reconf(pnet *net, int (*pairs)[2], const path_slice_goal *g,
                       int *sliced, int *nsliced, pcost *cost, bool *fits) {
  slicer sl;
  pnet flops_only = *net; /* shares sz: sees the slices */
  flops_only.limit = 0;
  bool ok = slicer_init(&sl, net, g, sliced, nsliced);
  *fits = false;
  while (ok && !*fits) {
    int had = *nsliced;
    ok = slice_greedy(&sl, (const int(*)[2])pairs, 1, fits);
    if (!ok || *fits || *nsliced == had) break; /* or nothing to slice */
    ok = reconf(&flops_only, pairs, 6, g->deadline, 2);
  }
  if (ok && *fits && *nsliced) ok = finish(&sl, pairs);
  slicer_free(&sl);
  return ok && slice_cost(net, (const int(*)[2])pairs, cost);
}
