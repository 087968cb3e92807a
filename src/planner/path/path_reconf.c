/*
 * path_reconf.c - subtree reconfiguration (path_internal.h): each internal
 * node of the tree, dearest step first, grows a window downwards (always
 * opening its dearest internal frontier node) until the window has
 * `window` leaves; the window's order is re-solved exactly by the DP and
 * replaced when that is better. Where that window does not improve and
 * the net asks for it (small_windows), a second window at the same node
 * opens its smallest frontier subtrees first: a wide intermediate merged
 * with a cheap cluster of a few operands is then re-solved with the
 * cluster's operands free to join the wide tensor one at a time, which
 * the dearest-first window never offers (it keeps opening the wide
 * side). A window's leaves and result are fixed, so nothing outside it
 * changes: the comparison is local. Passes repeat while any window
 * improved, up to max_passes or the deadline.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "path_tree.h"

/* The window under v: its frontier (leaves) and internal nodes (v first). */
typedef struct window {
  int nleaf, nint;
  int leaf[EIN_PATH_DP_MAX], in[EIN_PATH_DP_MAX];
} window;

/* Whether frontier node f opens before g: the dearest step first, or
 * (small) the one with the fewest operands under it, so that a cheap
 * cluster beside a wide intermediate opens into its operands and the DP
 * can fold them in one at a time (issue 36: the wide steps of random
 * 4-regular graphs and 3D lattices). */
static bool opens_before(const ctree *tr, int f, int g, bool small) {
  if (small && tr->leaves[f] != tr->leaves[g])
    return tr->leaves[f] < tr->leaves[g];
  return tr->flops[f] > tr->flops[g];
}

static void grow_window(const ctree *tr, int v, int want, bool small,
                        window *w) {
  w->nleaf = 2;
  w->leaf[0] = tr->left[v];
  w->leaf[1] = tr->right[v];
  w->nint = 1;
  w->in[0] = v;
  while (w->nleaf < want) {
    int pick = -1;
    for (int i = 0; i < w->nleaf; i++) {
      int f = w->leaf[i];
      if (f >= tr->n &&
          (pick < 0 || opens_before(tr, f, w->leaf[pick], small)))
        pick = i;
    }
    if (pick < 0) break;
    int f = w->leaf[pick];
    w->leaf[pick] = tr->left[f];
    w->leaf[w->nleaf++] = tr->right[f];
    w->in[w->nint++] = f;
  }
}

/* The window's present cost; v's own size is fixed, so not counted. */
static pcost window_cost(const ctree *tr, const window *w) {
  pcost c = {0, 0, 0};
  for (int i = 0; i < w->nint; i++)
    pcost_add_step(tr->net, &c, tr->flops[w->in[i]], tr->size[w->in[i]],
                   i == 0);
  return c;
}

/* Installs the DP's pairs over the window: pair p's node is in[p + 1],
 * the last pair's is v (in[0]). */
static bool rewrite(ctree *tr, const window *w, const int (*pairs)[2]) {
  int k = w->nleaf, map[2 * EIN_PATH_DP_MAX];
  for (int i = 0; i < k; i++) map[i] = w->leaf[i];
  for (int p = 0; p < k - 1; p++) map[k + p] = p == k - 2 ? w->in[0] : w->in[p + 1];
  for (int p = 0; p < k - 1; p++) {
    int v = map[k + p], a = map[pairs[p][0]], b = map[pairs[p][1]];
    tr->left[v] = a, tr->right[v] = b;
    tr->parent[a] = tr->parent[b] = v;
    tr->leaves[v] = tr->leaves[a] + tr->leaves[b];
    size_t m = (size_t)(tr->t[a].len + tr->t[b].len) + 1;
    plist o = {0, ein_arena_alloc(tr->arena, m, sizeof(int)),
               ein_arena_alloc(tr->arena, m, sizeof(int))};
    if (!o.ax || !o.cnt) return false;
    tr->flops[v] = plist_merge(tr->net, &tr->t[a], &tr->t[b], &o);
    tr->t[v] = o;
    tr->size[v] = plist_volume(tr->net, &o);
  }
  return true;
}

/* Re-solves the window under v; *better when it was replaced. */
static bool improve_at(ctree *tr, int v, int want, bool small, bool *better) {
  window w;
  grow_window(tr, v, want, small, &w);
  *better = false;
  if (w.nleaf < 3) return true;
  const plist *leaves[EIN_PATH_DP_MAX];
  for (int i = 0; i < w.nleaf; i++) leaves[i] = &tr->t[w.leaf[i]];
  ein_arena scratch;
  ein_arena_init(&scratch);
  int pairs[EIN_PATH_DP_MAX][2];
  pcost c;
  bool ok = path_dp(tr->net, w.nleaf, leaves, &tr->t[v], true, &scratch,
                    pairs, &c);
  if (ok && pcost_better(tr->net, c, window_cost(tr, &w))) {
    ok = rewrite(tr, &w, (const int(*)[2])pairs);
    *better = ok;
  }
  ein_arena_destroy(&scratch);
  return ok;
}

typedef struct ranked {
  double flops;
  int node;
} ranked;

static int by_flops_desc(const void *a, const void *b) {
  const ranked *x = a, *y = b;
  if (x->flops != y->flops) return x->flops > y->flops ? -1 : 1;
  return x->node - y->node;
}

/* One pass over the internal nodes, dearest first. */
static bool reconf_pass(ctree *tr, int want, double deadline, ranked *order,
                        bool *any) {
  int m = tr->n - 1;
  for (int k = 0; k < m; k++)
    order[k] = (ranked){tr->flops[tr->n + k], tr->n + k};
  qsort(order, (size_t)m, sizeof *order, by_flops_desc);
  *any = false;
  for (int k = 0; k < m; k++) {
    bool better;
    if (!improve_at(tr, order[k].node, want, false, &better) ||
        (!better && tr->net->small_windows &&
         !improve_at(tr, order[k].node, want, true, &better)))
      return false;
    *any |= better;
    if (path_over(tr->net, deadline)) break;
  }
  return true;
}

bool path_reconfigure(const pnet *net, int (*pairs)[2], int window,
                      double deadline, int max_passes, pcost *cost) {
  int n = net->n;
  if (window > EIN_PATH_DP_MAX) window = EIN_PATH_DP_MAX;
  ein_arena work;
  ein_arena_init(&work);
  ctree tr;
  ranked *order = ein_arena_alloc(&work, (size_t)n, sizeof *order);
  bool ok = order && ctree_init(&tr, net, (const int(*)[2])pairs, &work);
  bool any = true;
  for (int p = 0; ok && any && p < max_passes && n > 3; p++) {
    ok = reconf_pass(&tr, window, deadline, order, &any);
    if (path_over(net, deadline)) break;
  }
  if (ok && n > 3) ok = ctree_pairs(&tr, pairs, &work);
  plist *nodes = ok ? ein_arena_alloc(&work, (size_t)(2 * n), sizeof *nodes)
                    : NULL;
  ok = nodes && ptree_eval(net, (const int(*)[2])pairs, &work, nodes, cost);
  ein_arena_destroy(&work);
  return ok;
}
