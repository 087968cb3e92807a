/*
 * path.c - contraction order by dynamic programming over subsets (exact)
 * or greedily (large problems). See path.h.
 */
#include "path.h"

#include <math.h>
#include <string.h>

double ein_axset_volume(ein_axset s, const int64_t *sizes) {
  double v = 1;
  for (int w = 0; w < 4; w++)
    for (uint64_t bits = s.w[w]; bits; bits &= bits - 1)
      v *= (double)sizes[w * 64 + __builtin_ctzll(bits)];
  return v;
}

double ein_step_flop_count(ein_axset touched, ein_axset kept, int nterms,
                           const int64_t *sizes) {
  bool summed = !ein_axset_empty(ein_axset_minus(touched, kept));
  int factor = (nterms - 1 > 1 ? nterms - 1 : 1) + (summed ? 1 : 0);
  return ein_axset_volume(touched, sizes) * factor;
}

/* The cost of a (sub)tree: FLOPs, then the largest intermediate. */
typedef struct cost {
  double flops, largest;
} cost;

static bool cheaper(cost a, cost b) {
  if (a.flops != b.flops) return a.flops < b.flops;
  return a.largest < b.largest;
}

/* ---------------------------------------------------------------- dp */

/* The DP's tables, one entry per subset of operands. */
typedef struct dp_tables {
  ein_axset *uni;  /* axes of the operands in the subset */
  ein_axset *res;  /* axes its intermediate keeps */
  double *vol;     /* that intermediate's volume */
  cost *best;      /* cheapest tree over the subset */
  uint32_t *split; /* its left part */
} dp_tables;

/* Cheapest split of subset m (two or more operands) into a and m ^ a,
 * subsets smaller than m being solved. Intermediates past the memory
 * limit are avoided; when the limit excludes every split it is ignored
 * for m. */
static void dp_best_split(const ein_path_query *q, dp_tables *t, uint32_t m,
                          uint32_t full) {
  cost *best = t->best;
  const double *vol = t->vol;
  best[m] = (cost){INFINITY, INFINITY};
  t->split[m] = 0;
  /* Submasks holding m's lowest operand: each split once. */
  uint32_t low = m & -m, rest = m ^ low;
  for (uint32_t s = rest;; s = (s - 1) & rest) {
    uint32_t a = s | low, b = m ^ a;
    if (b) {
      bool fits = q->memory_limit <= 0 ||
                  (((a & (a - 1)) == 0 || vol[a] <= q->memory_limit) &&
                   ((b & (b - 1)) == 0 || vol[b] <= q->memory_limit));
      if (fits && isfinite(best[a].flops) && isfinite(best[b].flops)) {
        ein_axset touched = ein_axset_or(t->res[a], t->res[b]);
        double f = ein_step_flop_count(touched, t->res[m], 2, q->sizes);
        cost c = {best[a].flops + best[b].flops + f,
                  fmax(fmax(best[a].largest, best[b].largest),
                       m == full ? 0 : vol[m])};
        if (cheaper(c, best[m])) {
          best[m] = c;
          t->split[m] = a;
        }
      }
    }
    if (s == 0) break;
  }
  if (!t->split[m]) { /* the limit excluded everything: ignore it here */
    uint32_t a = low, b = m ^ a;
    t->split[m] = a;
    best[m] = (cost){best[a].flops + best[b].flops, INFINITY};
  }
}

/* Unfolds the tree of splits in post-order into pairs; SSA ids are
 * assigned as pairs appear. */
static void dp_unfold(int n, uint32_t full, const uint32_t *split,
                      int (*pairs)[2]) {
  int npairs = 0;
  uint32_t stack[128];
  int state[128], sp = 0;
  stack[sp] = full;
  state[sp++] = 0;
  int result_stack[128], rsp = 0;
  while (sp) {
    uint32_t m = stack[sp - 1];
    if ((m & (m - 1)) == 0) {
      result_stack[rsp++] = __builtin_ctz(m);
      sp--;
      continue;
    }
    if (state[sp - 1] == 0) {
      state[sp - 1] = 1;
      stack[sp] = split[m];
      state[sp++] = 0;
    } else if (state[sp - 1] == 1) {
      state[sp - 1] = 2;
      stack[sp] = m ^ split[m];
      state[sp++] = 0;
    } else {
      int right = result_stack[--rsp], left = result_stack[--rsp];
      pairs[npairs][0] = left;
      pairs[npairs][1] = right;
      result_stack[rsp++] = n + npairs;
      npairs++;
      sp--;
    }
  }
}

static bool search_dp(const ein_path_query *q, ein_arena *arena,
                      int (*pairs)[2]) {
  int n = q->n;
  uint32_t full = (n == 32) ? UINT32_MAX : ((uint32_t)1 << n) - 1;
  size_t nsub = (size_t)full + 1;
  dp_tables t = {
      .uni = ein_arena_alloc(arena, nsub, sizeof *t.uni),
      .res = ein_arena_alloc(arena, nsub, sizeof *t.res),
      .vol = ein_arena_alloc(arena, nsub, sizeof *t.vol),
      .best = ein_arena_alloc(arena, nsub, sizeof *t.best),
      .split = ein_arena_alloc(arena, nsub, sizeof *t.split),
  };
  if (!t.uni || !t.res || !t.vol || !t.best || !t.split) return false;

  for (uint32_t m = 1; m <= full; m++) {
    int low = __builtin_ctz(m);
    t.uni[m] = ein_axset_or(t.uni[m & (m - 1)], q->operands[low]);
  }
  /* An intermediate keeps the axes that the output or an operand outside
   * it still needs. */
  for (uint32_t m = 1; m <= full; m++) {
    t.res[m] = ein_axset_and(t.uni[m], ein_axset_or(q->output, t.uni[full ^ m]));
    t.vol[m] = ein_axset_volume(t.res[m], q->sizes);
  }
  for (uint32_t m = 1; m <= full; m++) {
    if ((m & (m - 1)) == 0)
      t.best[m] = (cost){0, 0};
    else
      dp_best_split(q, &t, m, full);
  }
  dp_unfold(n, full, t.split, pairs);
  return true;
}

/* ------------------------------------------------------------ greedy */

static bool search_greedy(const ein_path_query *q, ein_arena *arena,
                          int (*pairs)[2]) {
  int n = q->n, total = 2 * n - 1;
  ein_axset *sets = ein_arena_alloc(arena, (size_t)total, sizeof *sets);
  bool *alive = ein_arena_alloc(arena, (size_t)total, sizeof *alive);
  if (!sets || !alive) return false;
  for (int i = 0; i < n; i++) {
    sets[i] = q->operands[i];
    alive[i] = true;
  }
  for (int step = 0; step < n - 1; step++) {
    int bi = -1, bj = -1;
    bool best_shares = false;
    cost best = {INFINITY, INFINITY};
    ein_axset best_res = {{0}};
    int top = n + step;
    for (int i = 0; i < top; i++) {
      if (!alive[i]) continue;
      for (int j = i + 1; j < top; j++) {
        if (!alive[j]) continue;
        bool shares = !ein_axset_empty(ein_axset_and(sets[i], sets[j]));
        if (best_shares && !shares) continue;
        ein_axset others = q->output;
        for (int o = 0; o < top; o++)
          if (alive[o] && o != i && o != j)
            others = ein_axset_or(others, sets[o]);
        ein_axset touched = ein_axset_or(sets[i], sets[j]);
        ein_axset r = ein_axset_and(touched, others);
        double vr = ein_axset_volume(r, q->sizes);
        if (q->memory_limit > 0 && vr > q->memory_limit && bi >= 0) continue;
        /* Greedy key: the growth of memory (as opt_einsum), then FLOPs. */
        cost c = {vr - ein_axset_volume(sets[i], q->sizes) -
                      ein_axset_volume(sets[j], q->sizes),
                  ein_step_flop_count(touched, r, 2, q->sizes)};
        if ((shares && !best_shares) || cheaper(c, best)) {
          best = c;
          bi = i;
          bj = j;
          best_res = r;
          best_shares = shares;
        }
      }
    }
    pairs[step][0] = bi;
    pairs[step][1] = bj;
    alive[bi] = alive[bj] = false;
    sets[top] = best_res;
    alive[top] = true;
  }
  return true;
}

bool ein_path_search(const ein_path_query *q, ein_arena *arena,
                     int (*pairs)[2], const char **method) {
  if (q->n <= EIN_PATH_DP_MAX) {
    *method = "dp";
    return q->n < 2 || search_dp(q, arena, pairs);
  }
  *method = "greedy";
  return search_greedy(q, arena, pairs);
}
