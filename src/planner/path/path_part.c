/*
 * path_part.c - contraction trees by recursive bisection of the operands'
 * hypergraph (path_internal.h), for large networks.
 *
 * A set of operands is split in two parts of about equal size whose cut
 * (the axes with operands on both sides, each weighing log2 of its size:
 * the bits of the tensor that crosses) is small: a breadth-first growth
 * from a random operand gives the first part, then Fiduccia-Mattheyses
 * passes move single operands across, the best move first even uphill,
 * keeping the best cut seen, within the balance. The two parts are built the same way and joined last.
 * A part of at most leaf_size operands (<= EIN_PATH_DP_MAX) is ordered
 * exactly by the DP.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "path_internal.h"

enum { FM_PASSES = 4, RESTARTS = 3, FM_PATIENCE = 20, FM_MAX = 2048 };

typedef struct part {
  const pnet *net;
  double imbalance;
  int leaf_size;
  uint64_t *rng;
  int **on, *non; /* per axis: operands having it */
  int *side;      /* per operand: 0 or 1 in the set being split, -1 out */
  int *pos;       /* per operand: its place in the set (fm_pass) */
  char *best_side; /* per operand: its side in the best split so far */
  int *ca, *cb;   /* per axis: operands of the set on side 0, side 1 */
  int *queue;
  ein_arena *arena;
  int (*pairs)[2];
  int np;
} part;

static bool part_init(part *p, ein_arena *arena) {
  const pnet *net = p->net;
  size_t na = (size_t)net->naxes + 1, n = (size_t)net->n;
  p->on = ein_arena_alloc(arena, na, sizeof *p->on);
  p->non = ein_arena_alloc(arena, na, sizeof *p->non);
  p->ca = ein_arena_alloc(arena, na, sizeof *p->ca);
  p->cb = ein_arena_alloc(arena, na, sizeof *p->cb);
  p->side = ein_arena_alloc(arena, n, sizeof *p->side);
  p->pos = ein_arena_alloc(arena, n, sizeof *p->pos);
  p->queue = ein_arena_alloc(arena, n, sizeof *p->queue);
  p->best_side = ein_arena_alloc(arena, n, 1);
  if (!p->on || !p->non || !p->ca || !p->cb || !p->side || !p->queue ||
      !p->best_side || !p->pos)
    return false;
  for (int i = 0; i < net->n; i++) {
    p->side[i] = -1;
    for (int x = 0; x < net->leaf[i].len; x++) p->non[net->leaf[i].ax[x]]++;
  }
  for (int a = 0; a < net->naxes; a++) {
    p->on[a] = ein_arena_alloc(arena, (size_t)p->non[a] + 1, sizeof(int));
    if (!p->on[a]) return false;
    p->non[a] = 0;
  }
  for (int i = 0; i < net->n; i++)
    for (int x = 0; x < net->leaf[i].len; x++) {
      int a = net->leaf[i].ax[x];
      p->on[a][p->non[a]++] = i;
    }
  return true;
}

/* The cut's change if operand v changes side (negative: it shrinks). */
static double move_delta(const part *p, int v) {
  const plist *l = &p->net->leaf[v];
  double d = 0;
  if (p->net->work) *p->net->work += (uint64_t)l->len + 1;
  for (int x = 0; x < l->len; x++) {
    int a = l->ax[x];
    int from = p->side[v] ? p->cb[a] : p->ca[a];
    int to = p->side[v] ? p->ca[a] : p->cb[a];
    bool before = from > 0 && to > 0, after = from - 1 > 0 && to + 1 > 0;
    d += (after - before) * log2(p->net->sz[a]);
  }
  return d;
}

static void move(part *p, int v) {
  const plist *l = &p->net->leaf[v];
  for (int x = 0; x < l->len; x++) {
    int a = l->ax[x];
    if (p->side[v]) p->cb[a]--, p->ca[a]++;
    else p->ca[a]--, p->cb[a]++;
  }
  p->side[v] ^= 1;
}

/* Side 0 grown breadth-first from random operands to half of s. */
static int grow(part *p, const int *s, int m) {
  int want = m / 2, have = 0, head = 0, tail = 0;
  while (have < want) {
    if (head == tail) { /* a new start: a random operand still on side 1 */
      int v = s[prng_next(p->rng) % (uint64_t)m];
      for (int k = 0; p->side[v] != 1; k++) v = s[k];
      move(p, v);
      have++;
      p->queue[tail++] = v;
      continue;
    }
    const plist *l = &p->net->leaf[p->queue[head++]];
    for (int x = 0; x < l->len && have < want; x++) {
      int a = l->ax[x];
      for (int y = 0; y < p->non[a] && have < want; y++) {
        int u = p->on[a][y];
        if (p->side[u] != 1) continue;
        move(p, u);
        have++;
        p->queue[tail++] = u;
      }
    }
  }
  return have;
}

/* One Fiduccia-Mattheyses pass: the best move allowed by the balance
 * (lo..hi operands on side 0), even one that raises the cut, each operand
 * moved once, up to FM_PATIENCE moves past the best cut seen; then the
 * moves after the best are undone. Uphill moves let the split leave a
 * local minimum that single improving moves cannot. Each operand's gain
 * is kept in gain[] (by place in s) and renewed only for the operands
 * sharing an axis with the one moved. True when the cut dropped. */
static bool fm_pass(part *p, const int *s, int m, int lo, int hi,
                    int *count0, double *gain, int *moved) {
  double cut = 0, best = 0;
  int nmoved = 0, at_best = 0;
  for (int k = 0; k < m; k++) {
    p->pos[s[k]] = k;
    gain[k] = move_delta(p, s[k]);
  }
  while (nmoved < m && nmoved - at_best < FM_PATIENCE) {
    int pick = -1;
    if (p->net->work) *p->net->work += (uint64_t)m / 4 + 1; /* the scan */
    for (int k = 0; k < m; k++) {
      int c0 = *count0 + (p->side[s[k]] ? 1 : -1);
      if (gain[k] < INFINITY && c0 >= lo && c0 <= hi &&
          (pick < 0 || gain[k] < gain[pick]))
        pick = k;
    }
    if (pick < 0) break;
    int v = s[pick];
    cut += gain[pick];
    move(p, v);
    *count0 += p->side[v] ? -1 : 1;
    gain[pick] = INFINITY; /* locked */
    moved[nmoved++] = pick;
    if (cut < best - 1e-9) best = cut, at_best = nmoved;
    const plist *l = &p->net->leaf[v];
    for (int x = 0; x < l->len; x++)
      for (int y = 0, a = l->ax[x]; y < p->non[a]; y++) {
        int u = p->on[a][y];
        if (p->side[u] >= 0 && gain[p->pos[u]] < INFINITY)
          gain[p->pos[u]] = move_delta(p, u);
      }
  }
  while (nmoved > at_best) {
    int k = moved[--nmoved];
    move(p, s[k]);
    *count0 += p->side[s[k]] ? -1 : 1;
  }
  return at_best > 0;
}

/* Moves that lower the cut and keep each side within the imbalance: FM
 * passes on sets up to FM_MAX operands (a pass scans the set per move),
 * single improving moves beyond. */
static void refine(part *p, const int *s, int m, int *count0) {
  int lo = (int)floor(m * (0.5 - p->imbalance)),
      hi = (int)ceil(m * (0.5 + p->imbalance));
  if (lo < 1) lo = 1;
  if (hi > m - 1) hi = m - 1;
  if (m <= FM_MAX) {
    double *gain = ein_arena_alloc(p->arena, (size_t)m, sizeof *gain);
    int *moved = ein_arena_alloc(p->arena, (size_t)m, sizeof *moved);
    if (gain && moved) {
      for (int pass = 0; pass < FM_PASSES; pass++)
        if (!fm_pass(p, s, m, lo, hi, count0, gain, moved)) break;
      return;
    }
  }
  for (int pass = 0; pass < FM_PASSES; pass++) {
    int moved = 0;
    for (int k = 0; k < m; k++) {
      int v = s[k], c0 = *count0 + (p->side[v] ? 1 : -1);
      if (c0 < lo || c0 > hi || move_delta(p, v) >= -1e-9) continue;
      move(p, v);
      *count0 = c0;
      moved++;
    }
    if (!moved) break;
  }
}

/* Every operand of s on side 1, the counts to match. */
static void reset_sides(part *p, const int *s, int m) {
  for (int k = 0; k < m; k++) {
    p->side[s[k]] = 1;
    const plist *l = &p->net->leaf[s[k]];
    for (int x = 0; x < l->len; x++) p->ca[l->ax[x]] = 0, p->cb[l->ax[x]] = 0;
  }
  for (int k = 0; k < m; k++) {
    const plist *l = &p->net->leaf[s[k]];
    for (int x = 0; x < l->len; x++) p->cb[l->ax[x]]++;
  }
}

/* The cut of the present split (each crossing axis counted once). */
static double cut_weight(part *p, const int *s, int m) {
  double w = 0;
  for (int k = 0; k < m; k++) {
    const plist *l = &p->net->leaf[s[k]];
    for (int x = 0; x < l->len; x++) {
      int a = l->ax[x];
      if (p->ca[a] > 0 && p->cb[a] > 0) {
        w += log2(p->net->sz[a]);
        p->ca[a] = -p->ca[a]; /* counted: unmark below */
      }
    }
  }
  for (int k = 0; k < m; k++) {
    const plist *l = &p->net->leaf[s[k]];
    for (int x = 0; x < l->len; x++)
      if (p->ca[l->ax[x]] < 0) p->ca[l->ax[x]] = -p->ca[l->ax[x]];
  }
  return w;
}

/* Splits s[0..m) in place, the best cut of RESTARTS growths: side 0
 * first; returns its size. */
static int bisect(part *p, int *s, int m) {
  double best = INFINITY;
  for (int r = 0; r < RESTARTS; r++) {
    reset_sides(p, s, m);
    int count0 = grow(p, s, m);
    refine(p, s, m, &count0);
    double w = cut_weight(p, s, m);
    if (w < best) {
      best = w;
      for (int k = 0; k < m; k++) p->best_side[s[k]] = (char)p->side[s[k]];
    }
  }
  int i = 0;
  for (int k = 0; k < m; k++)
    if (p->best_side[s[k]] == 0) {
      int t = s[i];
      s[i++] = s[k];
      s[k] = t;
    }
  for (int k = 0; k < m; k++) p->side[s[k]] = -1;
  return i;
}

/* The axes a part keeps: those some operand outside it or the output has. */
static bool part_output(part *p, const int *s, int m, plist *out) {
  int len = 0;
  for (int k = 0; k < m; k++) len += p->net->leaf[s[k]].len;
  out->ax = ein_arena_alloc(p->arena, (size_t)len + 1, sizeof(int));
  out->cnt = ein_arena_alloc(p->arena, (size_t)len + 1, sizeof(int));
  if (!out->ax || !out->cnt) return false;
  for (int k = 0; k < m; k++) {
    const plist *l = &p->net->leaf[s[k]];
    for (int x = 0; x < l->len; x++) p->ca[l->ax[x]] = 0;
  }
  out->len = 0;
  for (int k = 0; k < m; k++) {
    const plist *l = &p->net->leaf[s[k]];
    for (int x = 0; x < l->len; x++) {
      int a = l->ax[x];
      if (p->ca[a]++ == 0) out->ax[out->len++] = a;
    }
  }
  int kept = 0;
  for (int j = 0; j < out->len; j++)
    if (p->ca[out->ax[j]] < p->net->total[out->ax[j]])
      out->ax[kept++] = out->ax[j];
  out->len = kept;
  return true;
}

/* A small part exactly; returns its root's SSA id via *root. */
static bool solve_leaf(part *p, const int *s, int m, int *root) {
  if (m == 1) {
    *root = s[0];
    return true;
  }
  const plist *leaves[EIN_PATH_DP_MAX];
  for (int k = 0; k < m; k++) leaves[k] = &p->net->leaf[s[k]];
  plist out;
  int local[EIN_PATH_DP_MAX][2], map[2 * EIN_PATH_DP_MAX];
  pcost c;
  if (!part_output(p, s, m, &out) ||
      !path_dp(p->net, m, leaves, &out, false, p->arena, local, &c))
    return false;
  for (int k = 0; k < m; k++) map[k] = s[k];
  for (int q = 0; q < m - 1; q++) {
    p->pairs[p->np][0] = map[local[q][0]];
    p->pairs[p->np][1] = map[local[q][1]];
    map[m + q] = p->net->n + p->np++;
  }
  *root = map[2 * m - 2];
  return true;
}

static bool build(part *p, int *s, int m, int *root) {
  if (m <= p->leaf_size) return solve_leaf(p, s, m, root);
  int m0 = bisect(p, s, m), r0, r1;
  if (!build(p, s, m0, &r0) || !build(p, s + m0, m - m0, &r1)) return false;
  p->pairs[p->np][0] = r0;
  p->pairs[p->np][1] = r1;
  *root = p->net->n + p->np++;
  return true;
}

bool path_partition(const pnet *net, int leaf_size, double imbalance,
                    uint64_t *rng, ein_arena *arena, int (*pairs)[2]) {
  if (leaf_size > EIN_PATH_DP_MAX) leaf_size = EIN_PATH_DP_MAX;
  if (leaf_size < 2) leaf_size = 2;
  part p = {.net = net, .imbalance = imbalance, .leaf_size = leaf_size,
            .rng = rng, .arena = arena, .pairs = pairs};
  int *s = ein_arena_alloc(arena, (size_t)net->n, sizeof *s);
  if (!s || !part_init(&p, arena)) return false;
  for (int i = 0; i < net->n; i++) s[i] = i;
  int root;
  return build(&p, s, net->n, &root);
}
