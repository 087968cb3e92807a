/*
 * test_path_hard.c - the path search on high-treewidth networks (issue
 * 36): random 3- and 4-regular graphs of 200 to 1,000 operands, where the
 * plain greedy's paths cost 1e17 FLOPs and more.
 *
 * Checks: the multilevel bisection (src/planner/path/path_ml.h) cuts
 * lattices near a straight cut and random 3-regular graphs below the flat
 * bisection's cuts (path_part.c); the search plans 1,000 operands within
 * its budget; on each hard graph it is never worse than the search before
 * issue 36 run beside it with the same budget and seed (flat_bisection),
 * deterministic under a seed, and its figures are the path's; the rule
 * that decides where the budget goes; the small-first reconfiguration
 * windows improve trees the dearest-first ones converged on; sweeps stay
 * small on a lattice. Budgets are given (work counted, not read from the
 * clock), so every run is a function of the seed, and the work spent is
 * what the budget check asserts on.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "path_ml.h"

/* A network as path queries take it: operand i's axes ax[i * deg ...]. */
typedef struct net {
  int n, deg, naxes;
  int *ax, *nax;
  int64_t *size;
  const int **rows;
} net;

/* Random deg-regular graph on n operands, bond 2 (configuration model,
 * self-loops dropped), from the seed. */
static void gen_regular(net *g, int n, int deg, uint64_t seed) {
  int m = n * deg, *stubs = malloc((size_t)m * sizeof *stubs);
  *g = (net){.n = n, .deg = deg};
  g->ax = malloc((size_t)m * sizeof *g->ax);
  g->nax = calloc((size_t)n, sizeof *g->nax);
  g->size = malloc((size_t)m * sizeof *g->size);
  g->rows = malloc((size_t)n * sizeof *g->rows);
  for (int k = 0; k < m; k++) stubs[k] = k / deg;
  for (int k = m - 1; k > 0; k--) {
    int j = (int)(prng_next(&seed) % (uint64_t)(k + 1)), t = stubs[k];
    stubs[k] = stubs[j], stubs[j] = t;
  }
  for (int k = 0; k + 1 < m; k += 2) {
    int a = stubs[k], b = stubs[k + 1];
    if (a == b) continue;
    g->ax[a * deg + g->nax[a]++] = g->naxes;
    g->ax[b * deg + g->nax[b]++] = g->naxes;
    g->size[g->naxes++] = 2;
  }
  for (int i = 0; i < n; i++) g->rows[i] = &g->ax[i * deg];
  free(stubs);
}

/* L x L lattice, bond 2: operand r * L + c. */
static void gen_lattice(net *g, int l) {
  int n = l * l;
  *g = (net){.n = n, .deg = 4};
  g->ax = malloc((size_t)n * 4 * sizeof *g->ax);
  g->nax = calloc((size_t)n, sizeof *g->nax);
  g->size = malloc((size_t)n * 2 * sizeof *g->size);
  g->rows = malloc((size_t)n * sizeof *g->rows);
  for (int v = 0; v < n; v++)
    for (int d = 0; d < 2; d++) {
      int u = d ? v + l : v + 1;
      if (d ? v / l + 1 >= l : v % l + 1 >= l) continue;
      g->ax[v * 4 + g->nax[v]++] = g->naxes;
      g->ax[u * 4 + g->nax[u]++] = g->naxes;
      g->size[g->naxes++] = 2;
    }
  for (int i = 0; i < n; i++) g->rows[i] = &g->ax[i * 4];
}

static void net_free(net *g) {
  free(g->ax), free(g->nax), free(g->size), free(g->rows);
}

static ein_path_query query_of(const net *g) {
  static const int none[1] = {0};
  return (ein_path_query){.n = g->n, .axes = g->rows, .naxes = g->nax,
                          .output_axes = none, .total_axes = g->naxes,
                          .sizes = g->size, .seed = 3};
}

/* ------------------------------------------------------- bisection */

/* Axes with operands on both sides of s[0..m0) | s[m0..n). */
static int cut_of(const net *g, const int *s, int m0) {
  char *side = calloc((size_t)g->n, 1);
  int *first = malloc((size_t)g->naxes * sizeof *first), cut = 0;
  for (int k = m0; k < g->n; k++) side[s[k]] = 1;
  for (int a = 0; a < g->naxes; a++) first[a] = -1;
  for (int i = 0; i < g->n; i++)
    for (int x = 0; x < g->nax[i]; x++) {
      int a = g->rows[i][x];
      if (first[a] < 0) first[a] = side[i];
      else if (first[a] != side[i]) cut++, first[a] = 2; /* counted */
    }
  free(side), free(first);
  return cut;
}

/* The root split of one bisection: its cut (s reordered). */
static int bisect_cut(const net *g, double imbalance, uint64_t seed, int *m0) {
  ein_path_query q = query_of(g);
  ein_arena a;
  ein_arena_init(&a);
  pnet pn;
  int *s = malloc((size_t)g->n * sizeof *s), cut = -1;
  ml_params p = {.imbalance = 0.1, .jitter = 0.01, .cutoff = 8,
                 .log_weights = 1};
  for (int i = 0; i < g->n; i++) s[i] = i;
  if (pnet_init(&pn, &q, &a) &&
      (*m0 = path_ml_bisect(&pn, &p, imbalance, &seed, s, g->n)) > 0)
    cut = cut_of(g, s, *m0);
  free(s);
  ein_arena_destroy(&a);
  return cut;
}

/* The flat bisection's root cut (path_part.c): the leaves under the
 * root's first child are side 0. */
static int flat_cut(const net *g, double imbalance, uint64_t seed) {
  ein_path_query q = query_of(g);
  ein_arena a;
  ein_arena_init(&a);
  pnet pn;
  int n = g->n, (*pairs)[2] = malloc((size_t)n * sizeof *pairs), cut = -1;
  char *under = calloc((size_t)(2 * n), 1);
  int *s = malloc((size_t)n * sizeof *s), m0 = 0;
  if (pnet_init(&pn, &q, &a) &&
      path_partition(&pn, 8, imbalance, &seed, &a, pairs)) {
    under[pairs[n - 2][0]] = 1;
    for (int k = n - 2; k >= 0; k--) /* children come before parents */
      if (under[n + k]) under[pairs[k][0]] = under[pairs[k][1]] = 1;
    for (int i = 0; i < n; i++)
      if (under[i]) s[m0++] = i;
    for (int i = 0, j = m0; i < n; i++)
      if (!under[i]) s[j++] = i;
    cut = cut_of(g, s, m0);
  }
  free(pairs), free(under), free(s);
  ein_arena_destroy(&a);
  return cut;
}

/* Lattices: near a straight cut (L bonds), within the balance. Random
 * 3-regular graph of 500: every multilevel cut below the flat bisection's
 * mean at the same balance (kahypar's cuts of this graph: 62-66). */
static void check_cuts(void) {
  for (int l = 16; l <= 24; l += 8) {
    net g;
    gen_lattice(&g, l);
    int worst = 0;
    for (uint64_t t = 0; t < 4; t++) {
      int m0 = 0, cut = bisect_cut(&g, 0.2, 77 + t, &m0);
      CHECK(cut >= l && cut <= l * 7 / 5 && m0 >= g.n * 2 / 5 &&
                m0 <= g.n * 3 / 5,
            "lattice %dx%d, seed %d: multilevel split %d / %d cuts %d bonds "
            "(straight: %d)", l, l, (int)t, m0, g.n - m0, cut, l);
      if (cut > worst) worst = cut;
    }
    printf("multilevel bisection of a %dx%d lattice: root cut at most %d "
           "bonds in 4 tries (straight: %d)\n", l, l, worst, l);
    net_free(&g);
  }
  net g;
  gen_regular(&g, 500, 3, 500);
  double flat = 0;
  int worst = 0;
  for (uint64_t t = 0; t < 4; t++) flat += flat_cut(&g, 0.05, 5 + t) / 4.0;
  for (uint64_t t = 0; t < 4; t++) {
    int m0 = 0, cut = bisect_cut(&g, 0.1, 5 + t, &m0);
    CHECK(cut > 0 && cut < flat && m0 >= 225 && m0 <= 275,
          "3-regular 500, seed %d: multilevel cut %d (split %d / %d), flat "
          "mean %.1f", (int)t, cut, m0, 500 - m0, flat);
    if (cut > worst) worst = cut;
  }
  printf("3-regular graph of 500: multilevel cut at most %d in 4 tries, "
         "flat bisection's mean %.1f\n", worst, flat);
  net_free(&g);
}

/* -------------------------------------------------------- searches */

static bool close_rel(double a, double b) {
  return fabs(a - b) <= 1e-9 * fmax(fabs(a), fabs(b));
}

/* The search's work may pass its budget by what one step started before
 * the count was read costs: a trial or a reconfiguration window (path.c;
 * measured up to 1.13 on these graphs). */
#define WORK_OVERRUN 1.3

/* One hard graph with a given budget: valid, costed as reported, never
 * worse than the old search beside it, the same pairs and the same work
 * twice, the work within the budget's own accounting (the work count is
 * what stops the search; it does not depend on the machine's speed or
 * load, nor on instrumentation, unlike the CPU time, which is printed). */
static void check_search(const char *name, const net *g, double budget) {
  ein_path_query q = query_of(g);
  q.time_budget = budget;
  ein_arena a;
  ein_arena_init(&a);
  ein_path_result r, again, old;
  clock_t c0 = clock();
  ein_path_status st = ein_path_search(&q, &a, &r);
  double cpu = (double)(clock() - c0) / CLOCKS_PER_SEC;
  ein_path_status st2 = ein_path_search(&q, &a, &again);
  q.flat_bisection = true;
  ein_path_status st_old = ein_path_search(&q, &a, &old);
  CHECK(st == EIN_PATH_OK && st2 == st && st_old == st,
        "%s: status %d, again %d, old %d", name, st, st2, st_old);
  double f, l;
  CHECK(ein_path_valid(g->n, (const int(*)[2])r.pairs) &&
            ein_path_cost(&q, (const int(*)[2])r.pairs, NULL, 0, &f, &l) &&
            close_rel(f, r.flops) && close_rel(l, r.largest),
        "%s: invalid path, or reported %g / %g vs %g / %g", name, r.flops,
        r.largest, f, l);
  CHECK(r.flops <= old.flops * (1 + 1e-9),
        "%s: %g FLOPs, worse than the old search's %g", name, r.flops,
        old.flops);
  CHECK(!memcmp(r.pairs, again.pairs, (size_t)(g->n - 1) * sizeof *r.pairs) &&
            r.work == again.work,
        "%s: two runs with seed %d differ (work %.0f, %.0f)", name,
        (int)q.seed, r.work, again.work);
  CHECK(r.work_budget > 0 && r.work > 0.5 * r.work_budget &&
            r.work <= WORK_OVERRUN * r.work_budget,
        "%s: work %.3g for a budget of %.3g work units (%.2f s)", name,
        r.work, r.work_budget, budget);
  printf("%s: log10 FLOPs %.2f (old search %.2f), log2 largest %.1f, "
         "work %.3f of the budget's, %.2f s CPU for a %.2f s budget, %s\n",
         name, log10(r.flops), log10(old.flops), log2(r.largest),
         r.work / r.work_budget, cpu, budget, r.method);
  ein_arena_destroy(&a);
}

static void check_hard(void) {
  static const struct { int n, deg; double budget; } cs[] = {
      {300, 3, 0.4}, {200, 4, 0.5}, {1000, 3, 0.5}};
  for (int k = 0; k < 3; k++) {
    net g;
    char name[64];
    gen_regular(&g, cs[k].n, cs[k].deg, (uint64_t)cs[k].n);
    snprintf(name, sizeof name, "random %d-regular, %d operands", cs[k].deg,
             cs[k].n);
    check_search(name, &g, cs[k].budget);
    net_free(&g);
  }
}

/* ------------------------------------------------ windows, sweeps */

/* The small-first windows (path_reconf.c) find what the dearest-first
 * ones, run to convergence, cannot: on random 4-regular graphs of 100
 * the converged tree still folds clusters of operands into its widest
 * tensors whole (issue 36). */
static void check_small_windows(void) {
  for (uint64_t seed = 1; seed <= 2; seed++) {
    net g;
    gen_regular(&g, 100, 4, seed);
    ein_path_query q = query_of(&g);
    ein_arena a;
    ein_arena_init(&a);
    pnet pn;
    int(*pairs)[2] = malloc((size_t)g.n * sizeof *pairs);
    uint64_t rng = seed;
    pcost dear = {0}, small = {0};
    bool ok = pnet_init(&pn, &q, &a) &&
              path_greedy(&pn, 0, 1, &rng, &a, pairs) &&
              path_reconfigure(&pn, pairs, 10, INFINITY, 1000, &dear);
    pn.small_windows = true;
    ok = ok && path_reconfigure(&pn, pairs, 10, INFINITY, 1000, &small);
    CHECK(ok && ein_path_valid(g.n, (const int(*)[2])pairs) &&
              small.flops < 0.9 * dear.flops,
          "4-regular 100, seed %d: dearest-first windows converged at "
          "%g FLOPs, small-first then %g", (int)seed, dear.flops,
          small.flops);
    printf("4-regular 100, seed %d: windows converged at log10 %.2f, "
           "small-first windows then %.2f\n", (int)seed, log10(dear.flops),
           log10(small.flops));
    free(pairs);
    ein_arena_destroy(&a);
    net_free(&g);
  }
}

/* Annealing (path_anneal.c) leaves the local optimum reconfiguration
 * converges to: on random 4-regular graphs of 100, a tree reconfigured
 * until no window of 10 improves (both kinds), annealed and reconfigured
 * again, is cheaper; the same seed anneals to the same tree (issue 36:
 * annealing took the search's 4-regular 200 from 10^20.48 to 10^20.07). */
static void check_anneal(void) {
  for (uint64_t seed = 1; seed <= 2; seed++) {
    net g;
    gen_regular(&g, 100, 4, seed);
    ein_path_query q = query_of(&g);
    ein_arena a;
    ein_arena_init(&a);
    pnet pn;
    size_t bytes = (size_t)g.n * sizeof(int[2]);
    int(*pairs)[2] = malloc(bytes), (*again)[2] = malloc(bytes);
    uint64_t rng = seed, r1 = seed + 100, r2 = seed + 100;
    pcost conv = {0}, ann = {0};
    path_anneal_plan p = {1000, 1.0, 10.0, INFINITY};
    bool ok = pnet_init(&pn, &q, &a) &&
              path_greedy(&pn, 0, 1, &rng, &a, pairs);
    pn.small_windows = true;
    ok = ok && path_reconfigure(&pn, pairs, 10, INFINITY, 1000, &conv);
    memcpy(again, pairs, bytes);
    ok = ok && path_anneal(&pn, pairs, &p, &r1) &&
         path_anneal(&pn, again, &p, &r2);
    CHECK(ok && !memcmp(pairs, again, bytes),
          "4-regular 100, seed %d: one seed annealed to two trees", (int)seed);
    ok = ok && path_reconfigure(&pn, pairs, 10, INFINITY, 1000, &ann);
    CHECK(ok && ein_path_valid(g.n, (const int(*)[2])pairs) &&
              ann.flops < 0.8 * conv.flops,
          "4-regular 100, seed %d: reconfiguration converged at %g FLOPs, "
          "annealed and reconfigured %g", (int)seed, conv.flops, ann.flops);
    printf("4-regular 100, seed %d: reconfiguration converged at log10 "
           "%.2f, annealed and reconfigured %.2f\n", (int)seed,
           log10(conv.flops), log10(ann.flops));
    free(pairs), free(again);
    ein_arena_destroy(&a);
    net_free(&g);
  }
}

/* A sweep (path_sweep.c) is a valid linear order that keeps its tensor
 * small: on a 12x12 lattice (bond 2), with noise of half a bit, at most
 * 2^24 elements (measured 2^18-2^21: a growing blob's boundary, where a
 * row-by-row sweep holds 2^13; one that takes the neighbour adding the
 * most reaches 2^148 and more). */
static void check_sweep(void) {
  net g;
  gen_lattice(&g, 12);
  ein_path_query q = query_of(&g);
  int(*pairs)[2] = malloc((size_t)g.n * sizeof *pairs);
  double worst = 0;
  for (uint64_t seed = 0; seed < 4; seed++) {
    ein_arena a;
    ein_arena_init(&a);
    pnet pn;
    uint64_t rng = seed;
    double f = 0, l = 0;
    bool ok = pnet_init(&pn, &q, &a) &&
              path_sweep(&pn, 0.5, &rng, &a, pairs) &&
              ein_path_valid(g.n, (const int(*)[2])pairs) &&
              ein_path_cost(&q, (const int(*)[2])pairs, NULL, 0, &f, &l);
    CHECK(ok && l <= 16777216, "12x12 lattice, seed %d: sweep's largest 2^%.1f",
          (int)seed, log2(l));
    worst = fmax(worst, l);
    ein_arena_destroy(&a);
  }
  printf("sweeps of a 12x12 lattice: largest intermediate at most 2^%.0f "
         "in 4 seeds\n", log2(worst));
  free(pairs);
  net_free(&g);
}

/* The first estimate: the multilevel bisection for hard networks of
 * 150-2500 operands only; the default budget stretched with the greedy's
 * FLOPs, between 1x and the cap. */
static void check_estimate(void) {
  CHECK(!path_ml_worth(1e9, 500) && path_ml_worth(1e10, 500) &&
            !path_ml_worth(1e20, 149) && path_ml_worth(1e20, 150) &&
            !path_ml_worth(1e20, 2501),
        "which networks get the multilevel bisection");
  CHECK(path_budget_stretch(0.1, 1e9) == 0.1 &&
            close_rel(path_budget_stretch(0.1, 1e12), 0.5) &&
            close_rel(path_budget_stretch(0.1, 1e40), 2.4) &&
            path_budget_stretch(0.5, 1e40) == 3.0 &&
            path_budget_stretch(4.0, 1e40) == 4.0,
        "stretched budgets %g %g %g %g %g", path_budget_stretch(0.1, 1e9),
        path_budget_stretch(0.1, 1e12), path_budget_stretch(0.1, 1e40),
        path_budget_stretch(0.5, 1e40), path_budget_stretch(4.0, 1e40));
}

int main(void) {
  check_estimate();
  check_small_windows();
  check_anneal();
  check_sweep();
  check_cuts();
  check_hard();
  return test_summary("path_hard");
}
