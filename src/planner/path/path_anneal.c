/*
 * path_anneal.c - simulated annealing of a contraction tree
 * (path_internal.h): at each internal node v in turn, a random rotation
 * moves one grandchild g up beside a new child that joins g's sibling
 * with v's other child ((g, o), s) -> ((o, s), g); v's operands, hence
 * its tensor and everything above it, stay the same, so the move changes
 * two steps and is costed by two merges. A move that makes those two
 * steps dearer is taken with probability 2^(-beta * bits) (bits: log2 of
 * their FLOPs after over before), beta rising over the sweeps; the best
 * tree met is what comes back.
 *
 * Why: reconfiguration only takes windows that improve, so it stops at
 * the first local optimum of windows of <= 10 leaves; on random 4-regular
 * graphs the trees that beat it are reached through dearer intermediate
 * trees (issue 36; TreeSA, Kalachev et al. 2021, and cotengra anneal
 * trees the same way, by local rotations scored on log FLOPs).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "path_tree.h"

typedef struct anneal {
  ctree tr;
  plist joined, top; /* a proposal's new child and v's step */
  int *cap;          /* per node: room in t[v]'s arrays */
  int *best_left, *best_right;
  double total, best;
  uint64_t *rng;
} anneal;

static bool anneal_init(anneal *an, const pnet *net, const int (*pairs)[2],
                        uint64_t *rng, ein_arena *arena) {
  memset(an, 0, sizeof *an);
  an->rng = rng;
  if (!ctree_init(&an->tr, net, pairs, arena)) return false;
  int nn = an->tr.nn;
  size_t m = (size_t)net->naxes + 1;
  an->joined = (plist){0, ein_arena_alloc(arena, m, sizeof(int)),
                       ein_arena_alloc(arena, m, sizeof(int))};
  an->top = (plist){0, ein_arena_alloc(arena, m, sizeof(int)),
                    ein_arena_alloc(arena, m, sizeof(int))};
  an->cap = ein_arena_alloc(arena, (size_t)nn, sizeof(int));
  an->best_left = ein_arena_alloc(arena, (size_t)nn, sizeof(int));
  an->best_right = ein_arena_alloc(arena, (size_t)nn, sizeof(int));
  if (!an->joined.ax || !an->joined.cnt || !an->top.ax || !an->top.cnt ||
      !an->cap || !an->best_left || !an->best_right)
    return false;
  for (int v = 0; v < nn; v++) {
    an->cap[v] = an->tr.t[v].len;
    if (v >= an->tr.n) an->total += an->tr.flops[v];
  }
  an->best = an->total;
  memcpy(an->best_left, an->tr.left, (size_t)nn * sizeof(int));
  memcpy(an->best_right, an->tr.right, (size_t)nn * sizeof(int));
  return true;
}

/* Copies l into node x's arrays, growing them when short. */
static bool store(anneal *an, int x, const plist *l) {
  plist *t = &an->tr.t[x];
  if (l->len > an->cap[x]) {
    int c = 2 * l->len;
    t->ax = ein_arena_alloc(an->tr.arena, (size_t)c, sizeof(int));
    t->cnt = ein_arena_alloc(an->tr.arena, (size_t)c, sizeof(int));
    if (!t->ax || !t->cnt) return false;
    an->cap[x] = c;
  }
  memcpy(t->ax, l->ax, (size_t)l->len * sizeof(int));
  memcpy(t->cnt, l->cnt, (size_t)l->len * sizeof(int));
  t->len = l->len;
  return true;
}

/* Installs x = (o, s), v = (x, g), the proposal costed in an->joined. */
static bool rotate(anneal *an, int v, int x, int o, int s, int g, double fx,
                   double fv) {
  ctree *tr = &an->tr;
  if (!store(an, x, &an->joined)) return false;
  tr->left[x] = o, tr->right[x] = s;
  tr->parent[o] = tr->parent[s] = x;
  tr->left[v] = x, tr->right[v] = g;
  tr->parent[g] = v;
  tr->leaves[x] = tr->leaves[o] + tr->leaves[s];
  tr->size[x] = plist_volume(tr->net, &tr->t[x]);
  an->total += fx + fv - tr->flops[x] - tr->flops[v];
  tr->flops[x] = fx, tr->flops[v] = fv;
  return true;
}

/* One proposal at internal node v with inverse temperature beta. */
static bool propose(anneal *an, int v, double beta) {
  ctree *tr = &an->tr;
  const pnet *net = tr->net;
  int l = tr->left[v], r = tr->right[v];
  bool li = l >= tr->n, ri = r >= tr->n;
  if (!li && !ri) return true;
  uint64_t bits = prng_next(an->rng);
  int x = li && (!ri || (bits & 1)) ? l : r, s = x == l ? r : l;
  int g = bits & 2 ? tr->left[x] : tr->right[x];
  int o = g == tr->left[x] ? tr->right[x] : tr->left[x];
  double fx = plist_merge(net, &tr->t[o], &tr->t[s], &an->joined);
  if (net->limit > 0 && plist_volume(net, &an->joined) > net->limit)
    return true;
  double fv = plist_merge(net, &an->joined, &tr->t[g], &an->top);
  double was = tr->flops[x] + tr->flops[v], now = fx + fv;
  if (now > was && prng_unit(an->rng) >= exp2(-beta * log2(now / was)))
    return true;
  return rotate(an, v, x, o, s, g, fx, fv);
}

/* Keeps the tree as the best when it is cheaper than the best so far. */
static void keep_best(anneal *an) {
  if (an->total >= an->best * (1 - 1e-9)) return;
  an->best = an->total;
  memcpy(an->best_left, an->tr.left, (size_t)an->tr.nn * sizeof(int));
  memcpy(an->best_right, an->tr.right, (size_t)an->tr.nn * sizeof(int));
}

/* How far the schedule is, 0..1: sweeps done or work spent. */
static double progress(const pnet *net, const path_anneal_plan *p, int k,
                       uint64_t w0) {
  double f = (double)k / p->sweeps;
  if (net->work && net->work_limit > w0)
    f = fmax(f, (double)(*net->work - w0) / (double)(net->work_limit - w0));
  return fmin(f, 1.0);
}

bool path_anneal(const pnet *net, int (*pairs)[2], const path_anneal_plan *p,
                 uint64_t *rng) {
  if (net->n < 4) return true;
  ein_arena work;
  ein_arena_init(&work);
  anneal an;
  uint64_t w0 = net->work ? *net->work : 0;
  bool ok = anneal_init(&an, net, (const int(*)[2])pairs, rng, &work);
  for (int k = 0; ok && k < p->sweeps && !path_over(net, p->deadline); k++) {
    double beta = p->beta0 + progress(net, p, k, w0) * (p->beta1 - p->beta0);
    for (int v = an.tr.n; ok && v < an.tr.nn; v++) {
      ok = propose(&an, v, beta);
      keep_best(&an);
    }
  }
  if (ok) {
    memcpy(an.tr.left, an.best_left, (size_t)an.tr.nn * sizeof(int));
    memcpy(an.tr.right, an.best_right, (size_t)an.tr.nn * sizeof(int));
    ok = ctree_pairs(&an.tr, pairs, &work);
  }
  ein_arena_destroy(&work);
  return ok;
}
