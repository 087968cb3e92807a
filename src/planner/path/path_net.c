/*
 * path_net.c - the network of a path query in sorted-id form, tensor
 * merges, tree costs (path_internal.h), and ein_path_cost (path.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "path_internal.h"

double path_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* Operand i's ids, sorted and unique, into a fresh list (counts 1). */
static bool leaf_ids(const ein_path_query *q, int i, ein_arena *arena,
                     plist *l) {
  int m = q->naxes[i];
  l->ax = ein_arena_alloc(arena, (size_t)m + 1, sizeof *l->ax);
  l->cnt = ein_arena_alloc(arena, (size_t)m + 1, sizeof *l->cnt);
  if (!l->ax || !l->cnt) return false;
  if (m) memcpy(l->ax, q->axes[i], (size_t)m * sizeof *l->ax);
  qsort(l->ax, (size_t)m, sizeof *l->ax, cmp_int);
  l->len = 0;
  for (int k = 0; k < m; k++)
    if (l->len == 0 || l->ax[l->len - 1] != l->ax[k]) {
      l->ax[l->len] = l->ax[k];
      l->cnt[l->len++] = 1;
    }
  return true;
}

/* Drops from each leaf the axes no other operand nor the output has. */
static void drop_private(pnet *net) {
  for (int i = 0; i < net->n; i++) {
    plist *l = &net->leaf[i];
    int k = 0;
    for (int j = 0; j < l->len; j++)
      if (net->total[l->ax[j]] > 1) l->ax[k++] = l->ax[j];
    l->len = k;
  }
}

bool pnet_init(pnet *net, const ein_path_query *q, ein_arena *arena) {
  memset(net, 0, sizeof *net);
  net->n = q->n;
  net->naxes = q->total_axes;
  net->limit = q->memory_limit > 0 ? q->memory_limit : 0;
  net->objective = q->objective;
  net->alpha = q->combo_alpha > 0 ? q->combo_alpha : 64;
  size_t na = (size_t)q->total_axes + 1;
  net->sz = ein_arena_alloc(arena, na, sizeof *net->sz);
  net->total = ein_arena_alloc(arena, na, sizeof *net->total);
  net->leaf = ein_arena_alloc(arena, (size_t)q->n, sizeof *net->leaf);
  bool *in_out = ein_arena_alloc(arena, na, sizeof *in_out);
  if (!net->sz || !net->total || !net->leaf || !in_out) return false;
  for (int a = 0; a < q->total_axes; a++)
    net->sz[a] = q->sizes[a] > 1 ? (double)q->sizes[a] : 1;
  for (int i = 0; i < q->n; i++) {
    if (!leaf_ids(q, i, arena, &net->leaf[i])) return false;
    for (int k = 0; k < net->leaf[i].len; k++) net->total[net->leaf[i].ax[k]]++;
  }
  for (int k = 0; k < q->output_naxes; k++) in_out[q->output_axes[k]] = true;
  for (int a = 0; a < q->total_axes; a++) net->total[a] += in_out[a];
  drop_private(net);
  return true;
}

double plist_volume(const pnet *net, const plist *l) {
  double v = 1;
  for (int k = 0; k < l->len; k++) v *= net->sz[l->ax[k]];
  return v;
}

double plist_merge(const pnet *net, const plist *a, const plist *b,
                   plist *out) {
  int i = 0, j = 0, o = 0;
  double touched = 1;
  bool summed = false;
  while (i < a->len || j < b->len) {
    int ax, c;
    if (j >= b->len || (i < a->len && a->ax[i] < b->ax[j])) {
      ax = a->ax[i], c = a->cnt[i++];
    } else if (i >= a->len || b->ax[j] < a->ax[i]) {
      ax = b->ax[j], c = b->cnt[j++];
    } else {
      ax = a->ax[i], c = a->cnt[i++] + b->cnt[j++];
    }
    touched *= net->sz[ax];
    if (c >= net->total[ax]) {
      summed = true;
      continue;
    }
    out->ax[o] = ax;
    out->cnt[o++] = c;
  }
  out->len = o;
  if (net->work) *net->work += (uint64_t)(a->len + b->len + 1);
  return touched * (summed ? 2 : 1);
}

bool plist_copy(ein_arena *arena, const plist *l, plist *out) {
  size_t m = (size_t)l->len + 1;
  out->ax = ein_arena_alloc(arena, m, sizeof *out->ax);
  out->cnt = ein_arena_alloc(arena, m, sizeof *out->cnt);
  if (!out->ax || !out->cnt) return false;
  memcpy(out->ax, l->ax, (size_t)l->len * sizeof *l->ax);
  memcpy(out->cnt, l->cnt, (size_t)l->len * sizeof *l->cnt);
  out->len = l->len;
  return true;
}

void pcost_add_step(const pnet *net, pcost *c, double flops, double size,
                    bool root) {
  (void)net;
  c->flops += flops;
  if (root) return;
  c->write += size;
  if (size > c->largest) c->largest = size;
}

double pcost_score(const pnet *net, pcost c) {
  switch (net->objective) {
  case EIN_PATH_SIZE: return c.largest;
  case EIN_PATH_COMBO: return c.flops + net->alpha * c.write;
  case EIN_PATH_FLOPS: break;
  }
  return c.flops;
}

/* Relative comparison: sums of doubles in another order differ in the
 * last bits, which must not count as better. */
static int cmp_rel(double a, double b) {
  double tol = 1e-12 * fmax(fabs(a), fabs(b));
  return a < b - tol ? -1 : a > b + tol ? 1 : 0;
}

bool pcost_better(const pnet *net, pcost a, pcost b) {
  if (net->limit > 0) {
    bool fa = a.largest <= net->limit, fb = b.largest <= net->limit;
    if (fa != fb) return fa;
    if (!fa && cmp_rel(a.largest, b.largest)) /* neither fits: smaller */
      return a.largest < b.largest;
  }
  int s = cmp_rel(pcost_score(net, a), pcost_score(net, b));
  if (s) return s < 0;
  if (net->objective == EIN_PATH_SIZE) return cmp_rel(a.flops, b.flops) < 0;
  return cmp_rel(a.largest, b.largest) < 0;
}

bool ptree_eval(const pnet *net, const int (*pairs)[2], ein_arena *arena,
                plist *nodes, pcost *cost) {
  int n = net->n;
  *cost = (pcost){0, 0, 0};
  for (int i = 0; i < n; i++) nodes[i] = net->leaf[i];
  for (int k = 0; k < n - 1; k++) {
    const plist *a = &nodes[pairs[k][0]], *b = &nodes[pairs[k][1]];
    plist *o = &nodes[n + k];
    size_t m = (size_t)(a->len + b->len) + 1;
    o->ax = ein_arena_alloc(arena, m, sizeof *o->ax);
    o->cnt = ein_arena_alloc(arena, m, sizeof *o->cnt);
    if (!o->ax || !o->cnt) return false;
    double f = plist_merge(net, a, b, o);
    pcost_add_step(net, cost, f, plist_volume(net, o), k == n - 2);
  }
  return true;
}

bool ein_path_valid(int n, const int (*pairs)[2]) {
  if (n < 1) return false;
  char *used = calloc((size_t)(2 * n), 1);
  if (!used) return false;
  bool ok = true;
  for (int k = 0; k < n - 1 && ok; k++)
    for (int s = 0; s < 2 && ok; s++) {
      int id = pairs[k][s];
      ok = id >= 0 && id < n + k && !used[id];
      if (ok) used[id] = 1;
    }
  free(used);
  return ok;
}

bool ein_path_cost(const ein_path_query *q, const int (*pairs)[2],
                   const int *sliced, int nsliced, double *flops,
                   double *largest) {
  ein_arena arena;
  ein_arena_init(&arena);
  pnet net;
  bool ok = pnet_init(&net, q, &arena);
  for (int s = 0; ok && s < nsliced; s++) net.sz[sliced[s]] = 1;
  plist *nodes =
      ok ? ein_arena_alloc(&arena, (size_t)(2 * q->n), sizeof *nodes) : NULL;
  pcost c = {0, 0, 0};
  ok = nodes && ptree_eval(&net, pairs, &arena, nodes, &c);
  *flops = c.flops;
  *largest = c.largest;
  ein_arena_destroy(&arena);
  return ok;
}
