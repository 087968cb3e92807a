/*
 * path_tree.c - contraction trees as linked nodes (path_tree.h).
 */
#include "path_tree.h"

bool ctree_init(ctree *tr, const pnet *net, const int (*pairs)[2],
                ein_arena *arena) {
  int n = net->n, nn = 2 * n - 1;
  *tr = (ctree){.net = net, .n = n, .nn = nn, .arena = arena};
  tr->left = ein_arena_alloc(arena, (size_t)nn, sizeof(int));
  tr->right = ein_arena_alloc(arena, (size_t)nn, sizeof(int));
  tr->parent = ein_arena_alloc(arena, (size_t)nn, sizeof(int));
  tr->t = ein_arena_alloc(arena, (size_t)nn, sizeof *tr->t);
  tr->flops = ein_arena_alloc(arena, (size_t)nn, sizeof(double));
  tr->size = ein_arena_alloc(arena, (size_t)nn, sizeof(double));
  tr->leaves = ein_arena_alloc(arena, (size_t)nn, sizeof(int));
  if (!tr->left || !tr->right || !tr->parent || !tr->t || !tr->flops ||
      !tr->size || !tr->leaves)
    return false;
  pcost c;
  if (!ptree_eval(net, pairs, arena, tr->t, &c)) return false;
  for (int k = 0; k < nn; k++) {
    tr->left[k] = tr->right[k] = tr->parent[k] = -1;
    tr->size[k] = plist_volume(net, &tr->t[k]);
    tr->leaves[k] = 1;
  }
  for (int k = 0; k < n - 1; k++) {
    int v = n + k, a = pairs[k][0], b = pairs[k][1];
    tr->left[v] = a, tr->right[v] = b;
    tr->parent[a] = tr->parent[b] = v;
    tr->leaves[v] = tr->leaves[a] + tr->leaves[b];
    plist scratch = tr->t[v];
    tr->flops[v] = plist_merge(net, &tr->t[a], &tr->t[b], &scratch);
  }
  return true;
}

bool ctree_pairs(const ctree *tr, int (*pairs)[2], ein_arena *arena) {
  int n = tr->n, root = 0, np = 0, sp = 0;
  while (tr->parent[root] >= 0) root = tr->parent[root];
  int *stack = ein_arena_alloc(arena, (size_t)tr->nn + 1, sizeof(int));
  int *state = ein_arena_alloc(arena, (size_t)tr->nn + 1, sizeof(int));
  int *id = ein_arena_alloc(arena, (size_t)tr->nn + 1, sizeof(int));
  if (!stack || !state || !id) return false;
  stack[sp] = root, state[sp++] = 0;
  while (sp) {
    int v = stack[sp - 1];
    if (v < n) {
      id[v] = v, sp--;
    } else if (state[sp - 1] < 2) {
      int c = state[sp - 1]++ == 0 ? tr->left[v] : tr->right[v];
      stack[sp] = c, state[sp++] = 0;
    } else {
      pairs[np][0] = id[tr->left[v]];
      pairs[np][1] = id[tr->right[v]];
      id[v] = n + np++;
      sp--;
    }
  }
  return true;
}

