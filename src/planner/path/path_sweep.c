/*
 * path_sweep.c - linear contraction orders, "sweeps" (path_internal.h):
 * one tensor grows from a random operand by absorbing, step after step,
 * the neighbouring operand that leaves it smallest, exponential noise of
 * `temperature` bits breaking ties and exploring.
 *
 * Why: on 3D lattices the trees to beat are sweeps. cotengra's best tree
 * of the 5x5x5 lattice (bond 2) folds single operands into one wide
 * intermediate (37 steps for 90% of its FLOPs); every bisection trial
 * of einc's instead ended in a merge of two blocks of 50 and 30 operands
 * (2^25 each, 81% of its FLOPs), which no reconfiguration window can
 * reach (issue 36). A sweep costs a few list scans per step; the
 * reconfiguration that follows polishes its ends.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "path_internal.h"

typedef struct sweep {
  const pnet *net;
  int *cnt;         /* per axis: absorbed operands having it */
  int **on, *non;   /* per axis: operands having it */
  bool *taken, *seen; /* per operand: absorbed; offered as a candidate */
  int *cands, ncand; /* operands next to the grown tensor (some taken) */
  uint64_t work;
} sweep;

/* Bits the grown tensor gains by absorbing operand j. */
static double gain_bits(sweep *w, int j) {
  const plist *l = &w->net->leaf[j];
  double d = 0;
  w->work += (uint64_t)l->len;
  for (int x = 0; x < l->len; x++) {
    int a = l->ax[x];
    if (w->cnt[a] == 0) d += log2(w->net->sz[a]);
    else if (w->cnt[a] + 1 == w->net->total[a]) d -= log2(w->net->sz[a]);
  }
  return d;
}

static void absorb(sweep *w, int j) {
  const plist *l = &w->net->leaf[j];
  w->taken[j] = true;
  for (int x = 0; x < l->len; x++) {
    int a = l->ax[x];
    w->cnt[a]++;
    w->work += (uint64_t)w->non[a];
    for (int k = 0; k < w->non[a]; k++) {
      int u = w->on[a][k];
      if (!w->taken[u] && !w->seen[u]) w->seen[u] = true, w->cands[w->ncand++] = u;
    }
  }
}

/* The candidate to absorb next (taken ones dropped from the list), or
 * the first operand not taken when none is adjacent. */
static int pick(sweep *w, double temperature, uint64_t *rng, int *first) {
  int best = -1, kept = 0;
  double bs = INFINITY;
  for (int k = 0; k < w->ncand; k++) {
    int u = w->cands[k];
    if (w->taken[u]) continue;
    w->cands[kept++] = u;
    double s = gain_bits(w, u) - temperature * log(prng_unit(rng));
    if (s < bs) bs = s, best = u;
  }
  w->ncand = kept;
  while (best < 0 && w->taken[*first]) ++*first;
  return best >= 0 ? best : *first;
}

static bool sweep_init(sweep *w, const pnet *net, ein_arena *arena) {
  int n = net->n;
  *w = (sweep){.net = net};
  w->cnt = ein_arena_alloc(arena, (size_t)net->naxes + 1, sizeof *w->cnt);
  w->non = ein_arena_alloc(arena, (size_t)net->naxes + 1, sizeof *w->non);
  w->on = ein_arena_alloc(arena, (size_t)net->naxes + 1, sizeof *w->on);
  w->taken = ein_arena_alloc(arena, (size_t)n, sizeof *w->taken);
  w->seen = ein_arena_alloc(arena, (size_t)n, sizeof *w->seen);
  w->cands = ein_arena_alloc(arena, (size_t)n, sizeof *w->cands);
  if (!w->cnt || !w->non || !w->on || !w->taken || !w->seen || !w->cands)
    return false;
  memset(w->cnt, 0, (size_t)net->naxes * sizeof *w->cnt);
  memset(w->non, 0, (size_t)net->naxes * sizeof *w->non);
  memset(w->taken, 0, (size_t)n * sizeof *w->taken);
  memset(w->seen, 0, (size_t)n * sizeof *w->seen);
  for (int i = 0; i < n; i++)
    for (int x = 0; x < net->leaf[i].len; x++) w->non[net->leaf[i].ax[x]]++;
  for (int a = 0; a < net->naxes; a++) {
    w->on[a] = ein_arena_alloc(arena, (size_t)w->non[a] + 1, sizeof **w->on);
    if (!w->on[a]) return false;
    w->non[a] = 0;
  }
  for (int i = 0; i < n; i++)
    for (int x = 0; x < net->leaf[i].len; x++) {
      int a = net->leaf[i].ax[x];
      w->on[a][w->non[a]++] = i;
    }
  return true;
}

bool path_sweep(const pnet *net, double temperature, uint64_t *rng,
                ein_arena *arena, int (*pairs)[2]) {
  int n = net->n, first = 0;
  sweep w;
  if (!sweep_init(&w, net, arena)) return false;
  int start = (int)(prng_next(rng) % (uint64_t)n), acc = start;
  absorb(&w, start);
  for (int k = 0; k < n - 1; k++) {
    int j = pick(&w, temperature, rng, &first);
    absorb(&w, j);
    pairs[k][0] = acc, pairs[k][1] = j;
    acc = n + k;
  }
  if (net->work) *net->work += w.work;
  return true;
}
