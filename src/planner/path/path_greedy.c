/*
 * path_greedy.c - greedy contraction orders, plain or Boltzmann-sampled
 * (path_internal.h).
 *
 * Candidates are pairs of live tensors that share an axis, in a heap keyed
 * by the memory the pair's result adds: size(result) - costmod * (size(a)
 * + size(b)), taken on a signed log scale so that one temperature means the
 * same on small and large networks. A positive temperature adds Gumbel
 * noise to each key, which samples candidates with probability
 * proportional to exp(-key / temperature) (the Gumbel-max trick), so many
 * trials explore around the greedy order. Keys past the memory limit are
 * pushed behind every key within it. Tensors left with no shared axis are
 * joined smallest first (outer products).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "path_internal.h"

/* Axes shared by more tensors than this offer no candidates through that
 * axis (a pair per two of them would be quadratic); other axes still do. */
enum { HYPER_FANOUT = 256 };

typedef struct cand {
  double key;
  int i, j;
} cand;

typedef struct greedy {
  const pnet *net;
  double temperature, costmod;
  uint64_t *rng;
  plist *t;      /* tensors: n operands then results */
  double *size;  /* their volumes */
  bool *alive;
  int **on;      /* per axis: live tensors having it */
  int *non;
  int *stamp;    /* per tensor: last tensor that offered it as a partner */
  plist scratch;
  cand *heap;
  size_t nheap, capheap;
} greedy;

static bool heap_push(greedy *g, cand c) {
  if (g->nheap == g->capheap) {
    size_t cap = g->capheap ? 2 * g->capheap : 1024;
    cand *h = realloc(g->heap, cap * sizeof *h);
    if (!h) return false;
    g->heap = h;
    g->capheap = cap;
  }
  size_t k = g->nheap++;
  while (k && g->heap[(k - 1) / 2].key > c.key) {
    g->heap[k] = g->heap[(k - 1) / 2];
    k = (k - 1) / 2;
  }
  g->heap[k] = c;
  return true;
}

static cand heap_pop(greedy *g) {
  cand top = g->heap[0], last = g->heap[--g->nheap];
  size_t k = 0;
  for (;;) {
    size_t c = 2 * k + 1;
    if (c >= g->nheap) break;
    if (c + 1 < g->nheap && g->heap[c + 1].key < g->heap[c].key) c++;
    if (g->heap[c].key >= last.key) break;
    g->heap[k] = g->heap[c];
    k = c;
  }
  if (g->nheap) g->heap[k] = last;
  return top;
}

/* The key of joining tensors i and j. */
static double cand_key(greedy *g, int i, int j) {
  plist_merge(g->net, &g->t[i], &g->t[j], &g->scratch);
  double s = plist_volume(g->net, &g->scratch);
  double c = s - g->costmod * (g->size[i] + g->size[j]);
  double key = (c < 0 ? -1 : 1) * log2(1 + fabs(c));
  if (g->net->limit > 0 && s > g->net->limit) key += 4096;
  if (g->temperature > 0)
    key += g->temperature * log(-log(prng_unit(g->rng)));
  return key;
}

/* Candidates pairing tensor k with each live tensor sharing an axis. */
static bool offer_partners(greedy *g, int k) {
  const plist *l = &g->t[k];
  for (int x = 0; x < l->len; x++) {
    int a = l->ax[x];
    if (g->non[a] > HYPER_FANOUT) continue;
    for (int y = 0; y < g->non[a]; y++) {
      int m = g->on[a][y];
      if (m >= k || !g->alive[m] || g->stamp[m] == k) continue;
      g->stamp[m] = k;
      if (!heap_push(g, (cand){cand_key(g, k, m), m, k})) return false;
    }
  }
  return true;
}

/* Replaces i and j by k in the lists of k's axes (dead ids dropped). */
static void update_incidence(greedy *g, int k) {
  const plist *l = &g->t[k];
  for (int x = 0; x < l->len; x++) {
    int a = l->ax[x], kept = 0;
    for (int y = 0; y < g->non[a]; y++)
      if (g->alive[g->on[a][y]]) g->on[a][kept++] = g->on[a][y];
    g->on[a][kept++] = k;
    g->non[a] = kept;
  }
}

static bool join(greedy *g, int i, int j, int k, ein_arena *arena,
                 int (*pairs)[2]) {
  size_t m = (size_t)(g->t[i].len + g->t[j].len) + 1;
  plist *o = &g->t[k];
  o->ax = ein_arena_alloc(arena, m, sizeof *o->ax);
  o->cnt = ein_arena_alloc(arena, m, sizeof *o->cnt);
  if (!o->ax || !o->cnt) return false;
  plist_merge(g->net, &g->t[i], &g->t[j], o);
  g->size[k] = plist_volume(g->net, o);
  g->alive[i] = g->alive[j] = false;
  g->alive[k] = true;
  pairs[k - g->net->n][0] = i;
  pairs[k - g->net->n][1] = j;
  update_incidence(g, k);
  return true;
}

static bool greedy_init(greedy *g, ein_arena *arena) {
  const pnet *net = g->net;
  int n = net->n, tot = 2 * n;
  g->t = ein_arena_alloc(arena, (size_t)tot, sizeof *g->t);
  g->size = ein_arena_alloc(arena, (size_t)tot, sizeof *g->size);
  g->alive = ein_arena_alloc(arena, (size_t)tot, sizeof *g->alive);
  g->stamp = ein_arena_alloc(arena, (size_t)tot, sizeof *g->stamp);
  g->on = ein_arena_alloc(arena, (size_t)net->naxes + 1, sizeof *g->on);
  g->non = ein_arena_alloc(arena, (size_t)net->naxes + 1, sizeof *g->non);
  int maxlen = 0;
  if (!g->t || !g->size || !g->alive || !g->stamp || !g->on || !g->non)
    return false;
  for (int i = 0; i < n; i++) {
    g->t[i] = net->leaf[i];
    g->size[i] = plist_volume(net, &net->leaf[i]);
    g->alive[i] = true;
    if (net->leaf[i].len > maxlen) maxlen = net->leaf[i].len;
    for (int x = 0; x < net->leaf[i].len; x++) g->non[net->leaf[i].ax[x]]++;
  }
  for (int i = 0; i < tot; i++) g->stamp[i] = -1;
  for (int a = 0; a < net->naxes; a++) {
    g->on[a] = ein_arena_alloc(arena, (size_t)g->non[a] + 1, sizeof **g->on);
    if (!g->on[a]) return false;
    g->non[a] = 0;
  }
  for (int i = 0; i < n; i++)
    for (int x = 0; x < net->leaf[i].len; x++) {
      int a = net->leaf[i].ax[x];
      g->on[a][g->non[a]++] = i;
    }
  /* A result has at most every axis once: the scratch holds any merge. */
  g->scratch.ax = ein_arena_alloc(arena, (size_t)net->naxes + 1, sizeof(int));
  g->scratch.cnt = ein_arena_alloc(arena, (size_t)net->naxes + 1, sizeof(int));
  return g->scratch.ax && g->scratch.cnt;
}

typedef struct sized {
  double size;
  int id;
} sized;

static int by_size(const void *a, const void *b) {
  const sized *x = a, *y = b;
  if (x->size != y->size) return x->size < y->size ? -1 : 1;
  return (x->id > y->id) - (x->id < y->id);
}

/* Joins the live tensors that share no axis, smallest first. */
static bool join_rest(greedy *g, int next, ein_arena *arena,
                      int (*pairs)[2]) {
  int n = g->net->n, m = 0;
  sized *live = ein_arena_alloc(arena, (size_t)(2 * n), sizeof *live);
  if (!live) return false;
  for (int i = 0; i < next; i++)
    if (g->alive[i]) live[m++] = (sized){g->size[i], i};
  qsort(live, (size_t)m, sizeof *live, by_size);
  int acc = m ? live[0].id : -1;
  for (int a = 1; a < m; a++, next++) {
    if (!join(g, acc, live[a].id, next, arena, pairs)) return false;
    acc = next;
  }
  return true;
}

bool path_greedy(const pnet *net, double temperature, double costmod,
                 uint64_t *rng, ein_arena *arena, int (*pairs)[2]) {
  greedy g = {.net = net, .temperature = temperature, .costmod = costmod,
              .rng = rng};
  bool ok = greedy_init(&g, arena);
  for (int i = 0; ok && i < net->n; i++) ok = offer_partners(&g, i);
  int next = net->n;
  while (ok && g.nheap && next < 2 * net->n - 1) {
    /* past the work limit the rest is joined by size alone: one sampled
     * trial on 1,000 operands can cost the whole budget (issue 36) */
    if (path_over(net, INFINITY)) break;
    cand c = heap_pop(&g);
    if (!g.alive[c.i] || !g.alive[c.j]) continue;
    ok = join(&g, c.i, c.j, next, arena, pairs) && offer_partners(&g, next);
    next++;
  }
  if (ok) ok = join_rest(&g, next, arena, pairs);
  free(g.heap);
  return ok;
}
