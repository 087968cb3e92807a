/*
 * path_ml.c - multilevel bisection of a set of operands (path_ml.h), the
 * scheme of hypergraph partitioners such as KaHyPar reduced to what a
 * contraction tree needs:
 *
 * - coarsening: operands are matched in random order with the neighbour
 *   of heaviest rating (the weight of the axes they share, each axis's
 *   weight spread over its other operands, divided by the two weights)
 *   and merged, level after level, until few vertices are left or a
 *   level stops shrinking;
 * - initial bisection of the coarsest level: several growths from random
 *   vertices, each refined, the best cut kept;
 * - uncoarsening: the split projected level by level back to the
 *   operands, Fiduccia-Mattheyses refinement at each level (the best
 *   move first, uphill too, the best state of the pass kept).
 *
 * The cut is what a tree pays for a split: the axes with operands on both
 * sides, log2 of their sizes summed, are the bits of the intermediate
 * that crosses. Balance is by operand count: each side within
 * (1 + imbalance) * half. A state over the balance ranks by its excess
 * first, so refinement moves towards balance before it lowers the cut.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "path_ml.h"

/* Coarsening stops at COARSE_MIN vertices or when a level keeps more than
 * COARSE_SHRINK of its vertices; axes with more than FANOUT operands rate
 * no pair (quadratic otherwise); a merged vertex holds at most
 * 1/MAXW_DIV of the operands. INIT_TRIES growths at the coarsest level;
 * at most FM_PASSES refinement passes per level; VCYCLES V-cycles. */
enum { COARSE_MIN = 60, MAX_LEVELS = 40, FANOUT = 64, INIT_TRIES = 10,
       FM_PASSES = 6, VCYCLES = 2, MAXW_DIV = 12 };
#define COARSE_SHRINK 0.92
/* A pin visited here costs about this many of the search's work units
 * (heaps, arenas; measured against the clock on the bench machine). */
enum { ML_WORK_WEIGHT = 3 };

typedef struct hgraph {
  int nv, ne, wsum;
  int *vw;          /* vertex weights (operands under each) */
  double *ew;       /* edge weights */
  int *eptr, *epin; /* pins of edge e: epin[eptr[e]..eptr[e+1]) */
  int *vptr, *vinc; /* edges of vertex v: vinc[vptr[v]..vptr[v+1]) */
} hgraph;

typedef struct ml {
  uint64_t *rng;
  ein_arena *arena;
  uint64_t work; /* pins visited, added to the net's count at the end */
  int lo, hi;    /* side 0's weight allowed */
} ml;

#define ALLOC(c, n, T) ((T *)ein_arena_alloc((c)->arena, (size_t)(n) + 1, sizeof(T)))

/* Vertex-to-edge incidence from the pins. */
static bool incidence(ml *c, hgraph *h) {
  h->vptr = ALLOC(c, h->nv + 1, int);
  h->vinc = ALLOC(c, h->eptr[h->ne], int);
  int *fill = ALLOC(c, h->nv, int);
  if (!h->vptr || !h->vinc || !fill) return false;
  memset(h->vptr, 0, (size_t)(h->nv + 1) * sizeof(int));
  for (int k = 0; k < h->eptr[h->ne]; k++) h->vptr[h->epin[k] + 1]++;
  for (int v = 0; v < h->nv; v++) h->vptr[v + 1] += h->vptr[v];
  memcpy(fill, h->vptr, (size_t)h->nv * sizeof(int));
  for (int e = 0; e < h->ne; e++)
    for (int k = h->eptr[e]; k < h->eptr[e + 1]; k++)
      h->vinc[fill[h->epin[k]]++] = e;
  return true;
}

static double edge_weight(const pnet *net, const ml_params *p, int a,
                          uint64_t *rng) {
  if (!p->log_weights) return 1.0;
  double jit = 1.0 + p->jitter * -log(prng_unit(rng));
  return fmax(log2(net->sz[a] * jit), 1e-3);
}

/* The finest level: s's operands, an edge per axis two or more share. */
static bool finest(ml *c, const pnet *net, const ml_params *p, const int *s,
                   int m, hgraph *h) {
  int *cnt = ALLOC(c, net->naxes, int), *eid = ALLOC(c, net->naxes, int);
  if (!cnt || !eid) return false;
  memset(cnt, 0, (size_t)net->naxes * sizeof(int));
  int pins = 0;
  for (int k = 0; k < m; k++)
    for (int x = 0; x < net->leaf[s[k]].len; x++) cnt[net->leaf[s[k]].ax[x]]++;
  *h = (hgraph){.nv = m, .wsum = m};
  for (int a = 0; a < net->naxes; a++) {
    eid[a] = cnt[a] >= 2 ? h->ne++ : -1;
    if (cnt[a] >= 2) pins += cnt[a];
  }
  h->vw = ALLOC(c, m, int), h->ew = ALLOC(c, h->ne, double);
  h->eptr = ALLOC(c, h->ne + 1, int), h->epin = ALLOC(c, pins, int);
  if (!h->vw || !h->ew || !h->eptr || !h->epin) return false;
  h->eptr[0] = 0;
  for (int a = 0; a < net->naxes; a++)
    if (eid[a] >= 0) {
      h->ew[eid[a]] = edge_weight(net, p, a, c->rng);
      h->eptr[eid[a] + 1] = h->eptr[eid[a]] + cnt[a];
      cnt[a] = h->eptr[eid[a]]; /* now: the next pin's place */
    }
  for (int k = 0; k < m; k++) {
    h->vw[k] = 1;
    for (int x = 0; x < net->leaf[s[k]].len; x++) {
      int a = net->leaf[s[k]].ax[x];
      if (eid[a] >= 0) h->epin[cnt[a]++] = k;
    }
  }
  return incidence(c, h);
}

/* Heavy-edge matching: map[v] is v's vertex on the next level; returns
 * how many there are. keep (or NULL): only vertices on one side match. */
static int match(ml *c, const hgraph *h, int maxw, const int *keep,
                 int *map, double *score, int *touched, int *order) {
  for (int v = 0; v < h->nv; v++) order[v] = v, map[v] = -1, score[v] = 0;
  for (int v = h->nv - 1; v > 0; v--) {
    int j = (int)(prng_next(c->rng) % (uint64_t)(v + 1)), t = order[v];
    order[v] = order[j], order[j] = t;
  }
  int nc = 0;
  for (int i = 0; i < h->nv; i++) {
    int v = order[i], nt = 0, best = -1;
    if (map[v] >= 0) continue;
    for (int k = h->vptr[v]; k < h->vptr[v + 1]; k++) {
      int e = h->vinc[k], size = h->eptr[e + 1] - h->eptr[e];
      if (size > FANOUT) continue;
      c->work += (uint64_t)size;
      for (int q = h->eptr[e]; q < h->eptr[e + 1]; q++) {
        int u = h->epin[q];
        if (u == v || map[u] >= 0 || (keep && keep[u] != keep[v])) continue;
        if (score[u] == 0) touched[nt++] = u;
        score[u] += h->ew[e] / (size - 1);
      }
    }
    double br = 0;
    for (int k = 0; k < nt; k++) {
      int u = touched[k];
      double r = score[u] / ((double)h->vw[u] * h->vw[v]);
      if (h->vw[u] + h->vw[v] <= maxw && r > br) br = r, best = u;
      score[u] = 0;
    }
    map[v] = nc;
    if (best >= 0) map[best] = nc;
    nc++;
  }
  return nc;
}

/* The coarse level of map: pins merged, edges left with one pin dropped. */
static bool contract(ml *c, const hgraph *h, const int *map, int nc,
                     hgraph *out) {
  *out = (hgraph){.nv = nc, .wsum = h->wsum};
  out->vw = ALLOC(c, nc, int), out->ew = ALLOC(c, h->ne, double);
  out->eptr = ALLOC(c, h->ne + 1, int);
  out->epin = ALLOC(c, h->eptr[h->ne], int);
  int *stamp = ALLOC(c, nc, int);
  if (!out->vw || !out->ew || !out->eptr || !out->epin || !stamp) return false;
  memset(out->vw, 0, (size_t)nc * sizeof(int));
  for (int v = 0; v < h->nv; v++) out->vw[map[v]] += h->vw[v];
  for (int v = 0; v < nc; v++) stamp[v] = -1;
  int np = 0;
  out->eptr[0] = 0;
  for (int e = 0; e < h->ne; e++) {
    int start = np;
    for (int q = h->eptr[e]; q < h->eptr[e + 1]; q++) {
      int u = map[h->epin[q]];
      if (stamp[u] != e) stamp[u] = e, out->epin[np++] = u;
    }
    if (np - start < 2) {
      np = start;
      continue;
    }
    out->ew[out->ne] = h->ew[e];
    out->eptr[++out->ne] = np;
  }
  c->work += (uint64_t)h->eptr[h->ne];
  return incidence(c, out);
}

/* ------------------------------------------------------ refinement */

typedef struct entry {
  double gain;
  uint32_t tie; /* random: equal gains in random order */
  int v, ver;
} entry;

typedef struct heap {
  entry *a;
  int n, cap;
} heap;

static bool above(const entry *x, const entry *y) {
  return x->gain > y->gain || (x->gain == y->gain && x->tie > y->tie);
}

static bool heap_push(heap *q, entry x) {
  if (q->n == q->cap) {
    int cap = q->cap ? 2 * q->cap : 256;
    entry *a = realloc(q->a, (size_t)cap * sizeof *a);
    if (!a) return false;
    q->a = a, q->cap = cap;
  }
  int k = q->n++;
  while (k && above(&x, &q->a[(k - 1) / 2])) {
    q->a[k] = q->a[(k - 1) / 2];
    k = (k - 1) / 2;
  }
  q->a[k] = x;
  return true;
}


static void heap_pop(heap *q) {
  entry x = q->a[--q->n];
  int k = 0;
  for (;;) {
    int l = 2 * k + 1, r = l + 1, m = k;
    const entry *best = &x;
    if (l < q->n && above(&q->a[l], best)) m = l, best = &q->a[l];
    if (r < q->n && above(&q->a[r], best)) m = r;
    if (m == k) break;
    q->a[k] = q->a[m];
    k = m;
  }
  if (q->n) q->a[k] = x;
}

/* A pass's state: sides, per-edge pin counts per side, gains. */
typedef struct fm {
  const hgraph *h;
  int *side, *pc; /* pc[2e + s]: pins of e on side s */
  int *ver, *moved, *stamp;
  bool *locked;
  heap q[2]; /* moves out of side 0, out of side 1 */
  int w0;     /* side 0's weight */
  double cut;
} fm;

static double gain_of(ml *c, const fm *f, int v) {
  const hgraph *h = f->h;
  int from = f->side[v];
  double g = 0;
  c->work += (uint64_t)(h->vptr[v + 1] - h->vptr[v]);
  for (int k = h->vptr[v]; k < h->vptr[v + 1]; k++) {
    int e = h->vinc[k], a = f->pc[2 * e + from], b = f->pc[2 * e + 1 - from];
    if (a == 1 && b > 0) g += h->ew[e];
    else if (b == 0 && a > 1) g -= h->ew[e];
  }
  return g;
}

static int excess(const ml *c, int w0) {
  return w0 < c->lo ? c->lo - w0 : w0 > c->hi ? w0 - c->hi : 0;
}

/* Whether state (x, cut) beats (bx, bcut): less excess, then less cut. */
static bool state_better(int x, double cut, int bx, double bcut) {
  return x != bx ? x < bx : cut < bcut - 1e-9;
}

static void count_pins(ml *c, fm *f) {
  const hgraph *h = f->h;
  f->w0 = 0, f->cut = 0;
  for (int v = 0; v < h->nv; v++)
    if (!f->side[v]) f->w0 += h->vw[v];
  for (int e = 0; e < h->ne; e++) {
    f->pc[2 * e] = f->pc[2 * e + 1] = 0;
    for (int q = h->eptr[e]; q < h->eptr[e + 1]; q++)
      f->pc[2 * e + f->side[h->epin[q]]]++;
    if (f->pc[2 * e] && f->pc[2 * e + 1]) f->cut += h->ew[e];
  }
  c->work += (uint64_t)h->eptr[h->ne];
}

static void flip(fm *f, int v) {
  const hgraph *h = f->h;
  int from = f->side[v];
  for (int k = h->vptr[v]; k < h->vptr[v + 1]; k++) {
    int e = h->vinc[k];
    bool was = f->pc[2 * e] && f->pc[2 * e + 1];
    f->pc[2 * e + from]--, f->pc[2 * e + 1 - from]++;
    bool is = f->pc[2 * e] && f->pc[2 * e + 1];
    f->cut += (is - was) * h->ew[e];
  }
  f->side[v] = 1 - from;
  f->w0 += from ? h->vw[v] : -h->vw[v];
}

/* The best allowed move's vertex (stale entries dropped), or -1. */
static int pick(const ml *c, fm *f) {
  int best = -1;
  double bg = -INFINITY;
  for (int s = 0; s < 2; s++) {
    heap *q = &f->q[s];
    while (q->n && (f->locked[q->a[0].v] || q->a[0].ver != f->ver[q->a[0].v]))
      heap_pop(q);
    if (!q->n) continue;
    int v = q->a[0].v, w0 = f->w0 + (s ? f->h->vw[v] : -f->h->vw[v]);
    bool ok = excess(c, w0) == 0 || excess(c, w0) < excess(c, f->w0);
    if (ok && q->a[0].gain > bg) bg = q->a[0].gain, best = v;
  }
  return best;
}

/* Renews the gains of the unlocked pins of v's edges. */
static bool renew(ml *c, fm *f, int v, int tick) {
  const hgraph *h = f->h;
  for (int k = h->vptr[v]; k < h->vptr[v + 1]; k++)
    for (int q = h->eptr[h->vinc[k]]; q < h->eptr[h->vinc[k] + 1]; q++) {
      int u = h->epin[q];
      if (f->locked[u] || f->stamp[u] == tick) continue;
      f->stamp[u] = tick;
      entry x = {gain_of(c, f, u), (uint32_t)prng_next(c->rng), u, ++f->ver[u]};
      if (!heap_push(&f->q[f->side[u]], x)) return false;
    }
  return true;
}

/* One FM pass; *better when the state improved. */
static bool fm_pass(ml *c, fm *f, bool *better) {
  const hgraph *h = f->h;
  int patience = 30 + h->nv / 16, nmoved = 0, at_best = 0;
  int bx = excess(c, f->w0);
  double bcut = f->cut;
  f->q[0].n = f->q[1].n = 0;
  for (int v = 0; v < h->nv; v++) {
    f->locked[v] = false, f->stamp[v] = -1;
    entry x = {gain_of(c, f, v), (uint32_t)prng_next(c->rng), v, ++f->ver[v]};
    if (!heap_push(&f->q[f->side[v]], x)) return false;
  }
  while (nmoved - at_best < patience) {
    int v = pick(c, f);
    if (v < 0) break;
    flip(f, v);
    f->locked[v] = true;
    f->moved[nmoved++] = v;
    if (!renew(c, f, v, nmoved)) return false;
    if (state_better(excess(c, f->w0), f->cut, bx, bcut))
      bx = excess(c, f->w0), bcut = f->cut, at_best = nmoved;
  }
  while (nmoved > at_best) flip(f, f->moved[--nmoved]);
  *better = at_best > 0;
  return true;
}

/* Refines side[] on h: passes while they improve. */
static bool refine(ml *c, const hgraph *h, int *side) {
  fm f = {.h = h, .side = side};
  f.pc = ALLOC(c, 2 * h->ne, int), f.ver = ALLOC(c, h->nv, int);
  f.moved = ALLOC(c, h->nv, int), f.stamp = ALLOC(c, h->nv, int);
  f.locked = ALLOC(c, h->nv, bool);
  bool ok = f.pc && f.ver && f.moved && f.stamp && f.locked, better = true;
  if (ok) {
    memset(f.ver, 0, (size_t)h->nv * sizeof(int));
    count_pins(c, &f);
  }
  for (int p = 0; ok && better && p < FM_PASSES; p++) ok = fm_pass(c, &f, &better);
  free(f.q[0].a);
  free(f.q[1].a);
  return ok;
}

/* ------------------------------------------------ initial bisection */

/* Side 0 grown breadth-first from a random vertex to half the weight. */
static void grow(ml *c, const hgraph *h, int *side, int *queue) {
  int w0 = 0, head = 0, tail = 0, want = h->wsum / 2;
  for (int v = 0; v < h->nv; v++) side[v] = 1;
  while (w0 < want) {
    if (head == tail) {
      int v = (int)(prng_next(c->rng) % (uint64_t)h->nv);
      while (!side[v]) v = (v + 1) % h->nv;
      side[v] = 0, w0 += h->vw[v], queue[tail++] = v;
      continue;
    }
    int v = queue[head++];
    for (int k = h->vptr[v]; k < h->vptr[v + 1] && w0 < want; k++)
      for (int q = h->eptr[h->vinc[k]]; q < h->eptr[h->vinc[k] + 1]; q++) {
        int u = h->epin[q];
        if (!side[u] || w0 >= want) continue;
        side[u] = 0, w0 += h->vw[u], queue[tail++] = u;
      }
  }
}

static double cut_of(const hgraph *h, const int *side, int *w0) {
  double cut = 0;
  *w0 = 0;
  for (int v = 0; v < h->nv; v++)
    if (!side[v]) *w0 += h->vw[v];
  for (int e = 0; e < h->ne; e++) {
    int s0 = side[h->epin[h->eptr[e]]];
    for (int q = h->eptr[e] + 1; q < h->eptr[e + 1]; q++)
      if (side[h->epin[q]] != s0) {
        cut += h->ew[e];
        break;
      }
  }
  return cut;
}

/* The best of INIT_TRIES refined growths into side[]. */
static bool initial(ml *c, const hgraph *h, int *side) {
  int *try = ALLOC(c, h->nv, int), *queue = ALLOC(c, h->nv, int);
  if (!try || !queue) return false;
  int bx = 0;
  double bcut = INFINITY;
  for (int t = 0; t < INIT_TRIES; t++) {
    grow(c, h, try, queue);
    if (!refine(c, h, try)) return false;
    int w0;
    double cut = cut_of(h, try, &w0);
    if (t == 0 || state_better(excess(c, w0), cut, bx, bcut)) {
      bx = excess(c, w0), bcut = cut;
      memcpy(side, try, (size_t)h->nv * sizeof(int));
    }
  }
  return true;
}

/* ----------------------------------------------------------- driver */

/* Coarsens lv[0] level by level into lv[1..]; given sides (sides[0]:
 * level 0's split), only vertices on one side merge and sides[l] follows
 * each level. Returns the coarsest level's index, -1 when memory runs
 * out. */
static int coarsen(ml *c, hgraph *lv, int **map, int **sides) {
  int L = 0, maxw = lv[0].wsum / MAXW_DIV;
  if (maxw < 2) maxw = 2;
  double *score = ALLOC(c, lv[0].nv, double);
  int *touched = ALLOC(c, lv[0].nv, int), *order = ALLOC(c, lv[0].nv, int);
  if (!score || !touched || !order) return -1;
  while (lv[L].nv > COARSE_MIN && L + 1 < MAX_LEVELS) {
    if (!(map[L] = ALLOC(c, lv[L].nv, int))) return -1;
    int nc = match(c, &lv[L], maxw, sides ? sides[L] : NULL, map[L], score,
                   touched, order);
    if (nc > COARSE_SHRINK * lv[L].nv) break;
    if (!contract(c, &lv[L], map[L], nc, &lv[L + 1])) return -1;
    if (sides) {
      if (!(sides[L + 1] = ALLOC(c, nc, int))) return -1;
      for (int v = 0; v < lv[L].nv; v++) sides[L + 1][map[L][v]] = sides[L][v];
    }
    L++;
  }
  return L;
}

/* Projects level L's split `top` back to level 0 (into side), refining
 * at each level. */
static bool uncoarsen(ml *c, hgraph *lv, int **map, int L, int *top,
                      int *side) {
  int *sides = top;
  for (int l = L - 1; l >= 0; l--) {
    int *fine = l ? ALLOC(c, lv[l].nv, int) : side;
    if (!fine) return false;
    for (int v = 0; v < lv[l].nv; v++) fine[v] = sides[map[l][v]];
    if (!refine(c, &lv[l], fine)) return false;
    sides = fine;
  }
  if (sides != side) memcpy(side, sides, (size_t)lv[0].nv * sizeof(int));
  return true;
}

/* A V-cycle (coarsen, bisect the coarsest, refine on the way back), then
 * VCYCLES - 1 more that keep the split (vertices merge within a side
 * only, so the coarse levels see it whole and can move larger pieces):
 * never worse, as each level's refinement keeps its best state. */
static bool vcycles(ml *c, hgraph *lv, int **map, int *side) {
  int L = coarsen(c, lv, map, NULL);
  int *top = L >= 0 ? ALLOC(c, lv[L].nv, int) : NULL;
  if (!top || !initial(c, &lv[L], top) || !uncoarsen(c, lv, map, L, top, side))
    return false;
  for (int k = 1; k < VCYCLES; k++) {
    int *sides[MAX_LEVELS];
    sides[0] = side;
    if ((L = coarsen(c, lv, map, sides)) < 0 || !refine(c, &lv[L], sides[L]) ||
        !uncoarsen(c, lv, map, L, sides[L], side))
      return false;
  }
  return true;
}

/* Side 0 first in s; a split with an empty side is replaced by halves. */
static int arrange(int *s, int m, const int *side, int *tmp) {
  int m0 = 0, k1 = 0;
  for (int k = 0; k < m; k++) {
    if (!side[k]) s[m0++] = s[k]; /* m0 <= k: in place */
    else tmp[k1++] = s[k];
  }
  memcpy(s + m0, tmp, (size_t)k1 * sizeof(int));
  return m0 > 0 && m0 < m ? m0 : m / 2;
}

int path_ml_bisect(const pnet *net, const ml_params *p, double imbalance,
                   uint64_t *rng, int *s, int m) {
  if (m < 2) return m;
  ein_arena scratch;
  ein_arena_init(&scratch);
  ml c = {.rng = rng, .arena = &scratch};
  double half = 0.5 * m * (1.0 + imbalance);
  c.hi = (int)floor(half);
  if (c.hi > m - 1) c.hi = m - 1;
  if (c.hi < (m + 1) / 2) c.hi = (m + 1) / 2;
  c.lo = m - c.hi;
  hgraph lv[MAX_LEVELS];
  int *map[MAX_LEVELS];
  int *side = ALLOC(&c, m, int), *tmp = ALLOC(&c, m, int), m0 = -1;
  if (side && tmp && finest(&c, net, p, s, m, &lv[0]) &&
      vcycles(&c, lv, map, side))
    m0 = arrange(s, m, side, tmp);
  if (net->work) *net->work += ML_WORK_WEIGHT * c.work;
  ein_arena_destroy(&scratch);
  return m0;
}
