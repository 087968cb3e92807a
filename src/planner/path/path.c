/*
 * path.c - the path search's outline (path.h): the exact DP for small
 * problems; randomized greedy trials (and, for large networks, recursive
 * bisection) refined by subtree reconfiguration beyond; slicing when the
 * limit is not met by any order found.
 *
 * Under a memory limit two candidates are kept: the best order within the
 * limit (trials are scored limit first) and the best order overall. The
 * first wins when it exists; otherwise the second is sliced.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "path_ml.h"
#include "path_internal.h"

/* Default budget: 40 ms at 100 operands, growing linearly, capped (the
 * search overruns its work count by up to ~15%: 51.6 ms at 100 operands
 * with 45 ms, over issue 26's 50 ms).
 * A budget, the default or the caller's, is spent as work
 * (WORK_PER_SECOND units a second, measured on the CPU of
 * bench/results/2026-11-25-paths-cpu.md), so the path is a function of the
 * seed; the clock only stops a search running far longer (clock_cap: 10x
 * the budget, and at least CLOCK_SLACK seconds past it, so that a loaded
 * machine still gives the seed's path; a very slow one is cut short). */
static double default_budget(int n) {
  double b = 0.002 + 0.00038 * n;
  return b < 2.0 ? b : 2.0;
}
#define WORK_PER_SECOND 6.0e7
#define CLOCK_CAP 10.0
#define CLOCK_SLACK 2.0

/* Seconds after which the clock stops a search with this budget. */
static double clock_cap(double budget) {
  return fmax(CLOCK_CAP * budget, budget + CLOCK_SLACK);
}

/* Networks at least this large also try recursive bisection. Trees are
 * reconfigured in windows of RECONF_FIRST leaves, then RECONF_WINDOW: the
 * small windows (a DP a hundredth the price) take most of the gain early,
 * so the large ones start from a better tree within the same budget. */
enum {
  PARTITION_MIN = 40,
  RECONF_FIRST = 6,
  RECONF_WINDOW = 10,
  RECONF_PASSES = 8
};

/* On hard networks ANNEAL_SHARE of the reconfiguration's work goes to
 * annealing the best tree afterwards, ANNEAL_SPLIT of that to the
 * annealing itself (up to ANNEAL_SWEEPS sweeps, beta from ANNEAL_BETA0
 * to ANNEAL_BETA1), the rest to reconfiguring what it found. */
#define ANNEAL_SHARE 0.3
#define ANNEAL_SPLIT 0.67
#define ANNEAL_BETA0 1.0
#define ANNEAL_BETA1 10.0
enum { ANNEAL_SWEEPS = 1 << 20 };

/* Every SWEEP_EVERY-th greedy-kind trial is a sweep instead. */
enum { SWEEP_EVERY = 4 };

/* The best few distinct trial trees are each reconfigured: the best before
 * reconfiguration is often not the best after. */
enum { TOP = 4 };

/* Under a limit no order meets, slicing gets SLICE_SHARE of the budget
 * more, spread over its attempts; SLICE_ROUNDS re-slicings of the best
 * tree at most. */
#define SLICE_SHARE 0.5
enum { SLICE_ROUNDS = 3 };
/* An attempt past this many times the best total FLOPs so far is given
 * up: slicing further only adds, and reconfiguration seldom wins back
 * that much. */
#define SLICE_PRUNE 16.0

typedef struct search {
  pnet *net;        /* limit as the caller set it */
  pnet free_net;    /* the same, no limit */
  const ein_path_query *q;
  double deadline;
  bool fixed;       /* trials given: ignore the clock and the work */
  uint64_t work_done; /* the nets' work counter */
  uint64_t greedy_work, part_work; /* of the trials of each kind */
  bool best_bisect;   /* the best trial tree so far is a bisection's */
  double t0, budget;
  uint64_t rng;
  ein_arena *work;
  int (*best_free)[2], (*best_fit)[2];
  pcost cost_free, cost_fit;
  int (*top[TOP])[2]; /* the best distinct unlimited trial trees */
  pcost top_cost[TOP];
  int ntop;
  bool collect;       /* trials: keep the top list */
  ml_tuner tuner;     /* the bisection's parameters across trials */
  bool multilevel;    /* bisection trials by path_ml.h, else flat */
  bool sweeps;        /* some greedy trials are sweeps (path_sweep.c) */
  bool have_free, have_fit;
  bool windowed;      /* limited: small-first windows and annealing too */
  double scale;       /* of the budget, default or given */
  const char *method;
} search;

static bool eval(const pnet *net, const int (*pairs)[2], pcost *c) {
  ein_arena scratch;
  ein_arena_init(&scratch);
  plist *nodes = ein_arena_alloc(&scratch, (size_t)(2 * net->n), sizeof *nodes);
  bool ok = nodes && ptree_eval(net, pairs, &scratch, nodes, c);
  ein_arena_destroy(&scratch);
  return ok;
}

/* Inserts a trial tree into the top list (distinct costs only). Under
 * SIZE the list is ranked by FLOPs: many trials tie on the largest step,
 * and the cheapest trees reconfigure best (reconfigure_top). */
static void keep_top(search *s, const int (*pairs)[2], pcost c) {
  size_t bytes = (size_t)(s->net->n - 1) * sizeof *pairs;
  pnet rank = s->free_net;
  if (rank.objective == EIN_PATH_SIZE) rank.objective = EIN_PATH_FLOPS;
  int at = s->ntop;
  for (int i = 0; i < s->ntop; i++) {
    if (s->top_cost[i].flops == c.flops && s->top_cost[i].largest == c.largest)
      return;
    if (at == s->ntop && pcost_better(&rank, c, s->top_cost[i])) at = i;
  }
  if (at == TOP) return;
  int last = s->ntop < TOP ? s->ntop++ : TOP - 1;
  int(*spare)[2] = s->top[last];
  for (int i = last; i > at; i--) {
    s->top[i] = s->top[i - 1];
    s->top_cost[i] = s->top_cost[i - 1];
  }
  s->top[at] = spare;
  memcpy(spare, pairs, bytes);
  s->top_cost[at] = c;
}

/* Keeps pairs when better than the best so far, unlimited or within. */
static bool consider(search *s, const int (*pairs)[2]) {
  size_t bytes = (size_t)(s->net->n - 1) * sizeof *pairs;
  pcost c;
  if (!eval(&s->free_net, pairs, &c)) return false;
  if (s->collect) keep_top(s, pairs, c);
  if (!s->have_free || pcost_better(&s->free_net, c, s->cost_free)) {
    memcpy(s->best_free, pairs, bytes);
    s->cost_free = c, s->have_free = true;
  }
  if (s->net->limit > 0 && c.largest <= s->net->limit &&
      (!s->have_fit || pcost_better(s->net, c, s->cost_fit))) {
    memcpy(s->best_fit, pairs, bytes);
    s->cost_fit = c, s->have_fit = true;
  }
  return true;
}

/* The output's axes as a list (for the DP's result). */
static bool output_list(const pnet *net, const ein_path_query *q,
                        ein_arena *arena, plist *out) {
  out->ax = ein_arena_alloc(arena, (size_t)q->output_naxes + 1, sizeof(int));
  out->cnt = ein_arena_alloc(arena, (size_t)q->output_naxes + 1, sizeof(int));
  if (!out->ax || !out->cnt) return false;
  char *seen = ein_arena_alloc(arena, (size_t)net->naxes + 1, 1);
  if (!seen) return false;
  for (int k = 0; k < q->output_naxes; k++) seen[q->output_axes[k]] = 1;
  out->len = 0;
  for (int a = 0; a < net->naxes; a++)
    if (seen[a] && net->total[a] > 1) out->ax[out->len++] = a;
  return true;
}

static bool search_dp(search *s, int (*pairs)[2]) {
  const pnet *net = s->net;
  plist out;
  const plist **leaves = ein_arena_alloc(s->work, (size_t)net->n, sizeof *leaves);
  if (!leaves || !output_list(net, s->q, s->work, &out)) return false;
  for (int i = 0; i < net->n; i++) leaves[i] = &net->leaf[i];
  pcost c;
  s->method = "dp";
  s->collect = true; /* both trees are candidates for slicing */
  if (!path_dp(&s->free_net, net->n, leaves, &out, true, s->work, pairs, &c) ||
      !consider(s, (const int(*)[2])pairs))
    return false;
  if (net->limit <= 0 || s->have_fit) return true;
  return path_dp(net, net->n, leaves, &out, true, s->work, pairs, &c) &&
         consider(s, (const int(*)[2])pairs);
}

/* A multilevel bisection's trial: parameters from the tuner, the tree's
 * score back to it. The first one measures what a trial costs: when the
 * trials' half of the budget holds too few for the tuner to learn from,
 * the bisections are flat from then on (path_ml_affordable). */
static bool ml_trial(search *s, const pnet *net, ein_arena *scratch,
                     int (*pairs)[2]) {
  uint64_t before = s->work_done;
  pcost c;
  ml_tuner_sample(&s->tuner, &s->rng);
  if (!path_ml_tree(net, &s->tuner.last, &s->rng, scratch, pairs) ||
      !eval(net, (const int(*)[2])pairs, &c))
    return false;
  ml_tuner_report(&s->tuner, log10(pcost_score(net, c) + 1.0));
  if (!s->fixed && s->tuner.trials == 1)
    s->multilevel = path_ml_affordable(s->work_done - before,
                                       s->net->work_limit / 2);
  return true;
}

/* Trial t: 0 is the plain greedy; then temperature log-uniform in
 * [0.001, 1] and costmod uniform in [0.1, 4] (cotengra's ranges); under a
 * limit every other trial keys on the limit; from PARTITION_MIN operands
 * a bisection instead (flat, parts of 4-8 operands, or multilevel on
 * hard networks: first_estimate, ml_trial) as the work split asks (on
 * hard networks every SWEEP_EVERY-th greedy-kind trial is a sweep):
 * the kind that found the best tree so far gets two thirds of the trials'
 * work (the bisection wins on graph-like networks, the greedy on
 * circuits and hyperedges), measured as work, whatever one trial costs. */
static bool trial(search *s, int t, int (*pairs)[2]) {
  ein_arena scratch;
  ein_arena_init(&scratch);
  const pnet *net = (s->net->limit > 0 && (t & 1)) ? s->net : &s->free_net;
  uint64_t wp = s->part_work, wg = s->greedy_work;
  bool ok, bisect = t > 0 && net->n >= PARTITION_MIN &&
                    (s->best_bisect ? wp <= 2 * wg : 2 * wp <= wg);
  uint64_t before = s->work_done;
  pcost was = s->cost_free;
  if (bisect && !s->multilevel) {
    double imb = 0.05 + 0.3 * prng_unit(&s->rng);
    int leaf = 4 + (int)(prng_next(&s->rng) % 5); /* reconf polishes */
    ok = path_partition(net, leaf, imb, &s->rng, &scratch, pairs);
  } else if (bisect) {
    ok = ml_trial(s, net, &scratch, pairs);
  } else if (s->sweeps && t % SWEEP_EVERY == SWEEP_EVERY - 1) {
    double temp = exp(log(0.01) + prng_unit(&s->rng) * log(200.0));
    ok = path_sweep(net, temp, &s->rng, &scratch, pairs);
  } else {
    double temp = t ? exp(log(0.001) + prng_unit(&s->rng) * log(1000.0)) : 0;
    double costmod = t ? 0.1 + 3.9 * prng_unit(&s->rng) : 1;
    ok = path_greedy(net, temp, costmod, &s->rng, &scratch, pairs);
  }
  *(bisect ? &s->part_work : &s->greedy_work) += s->work_done - before;
  ein_arena_destroy(&scratch);
  if (!ok || !consider(s, (const int(*)[2])pairs)) return false;
  if (t > 0 && pcost_better(&s->free_net, s->cost_free, was))
    s->best_bisect = bisect;
  return true;
}

/* Whether the fraction `frac` of the budget is spent. */
static bool spent(const search *s, double frac) {
  if (s->fixed) return false;
  return (double)s->work_done > frac * (double)s->net->work_limit ||
         path_now() > s->t0 + clock_cap(s->budget);
}

/* Reconfigures pairs on net in windows of RECONF_FIRST, then
 * RECONF_WINDOW leaves, each result considered. */
static bool reconf_windows(search *s, const pnet *net, int (*pairs)[2],
                           double deadline) {
  static const int windows[2] = {RECONF_FIRST, RECONF_WINDOW};
  for (int k = 0; k < 2; k++) {
    pcost c;
    if (!path_reconfigure(net, pairs, windows[k], deadline, RECONF_PASSES,
                          &c) ||
        !consider(s, (const int(*)[2])pairs))
      return false;
  }
  return true;
}

/* Each of the top trees reconfigured in turn, with an equal share of what
 * is left of the budget (work or clock) up to the work `limit`. */
static bool reconfigure_top(search *s, int (*pairs)[2], double deadline,
                            uint64_t limit) {
  pnet *fn = &s->free_net;
  for (int i = 0; i < s->ntop; i++) {
    double share = 1.0 / (s->ntop - i);
    if (!s->fixed && limit > s->work_done)
      fn->work_limit = s->work_done + (uint64_t)((double)(limit - s->work_done) * share);
    memcpy(pairs, s->top[i], (size_t)(s->net->n - 1) * sizeof *pairs);
    /* SIZE's landscape is flat (one step sets the score): windows
     * reconfigured for FLOPs first shrink most steps, then SIZE's own */
    pnet by_flops = *fn;
    by_flops.objective = EIN_PATH_FLOPS;
    if ((fn->objective == EIN_PATH_SIZE &&
         !reconf_windows(s, &by_flops, pairs, deadline)) ||
        !reconf_windows(s, fn, pairs, deadline))
      return false;
    /* kept reconfigured: slicing starts from these */
    memcpy(s->top[i], pairs, (size_t)(s->net->n - 1) * sizeof *pairs);
  }
  fn->work_limit = s->net->work_limit;
  return true;
}

/* The best tree annealed (path_anneal.c) with ANNEAL_SPLIT of the work
 * left, then reconfigured again with the rest, each result considered. */
static bool anneal_best(search *s, int (*pairs)[2], double deadline) {
  pnet *fn = &s->free_net;
  uint64_t end = s->net->work_limit;
  if (end <= s->work_done) return true;
  memcpy(pairs, s->best_free, (size_t)(s->net->n - 1) * sizeof *pairs);
  fn->work_limit = s->work_done +
                   (uint64_t)(ANNEAL_SPLIT * (double)(end - s->work_done));
  path_anneal_plan p = {ANNEAL_SWEEPS, ANNEAL_BETA0, ANNEAL_BETA1, deadline};
  bool ok = path_anneal(fn, pairs, &p, &s->rng) &&
            consider(s, (const int(*)[2])pairs);
  fn->work_limit = end;
  return ok && reconf_windows(s, fn, pairs, deadline);
}

/* Whether the search anneals its best tree: hard networks (the first
 * estimate's sweeps), no limit (the limited search is as before: its
 * trees are sliced), a budget counted as work, FLOPs or COMBO (SIZE's
 * landscape is flat: one step sets the score). */
static bool anneals(const search *s) {
  return s->sweeps && (s->net->limit <= 0 || s->windowed) && !s->fixed &&
         s->free_net.objective != EIN_PATH_SIZE;
}

/* The plain greedy's FLOPs (trial 0) decide where the budget goes: a
 * hard network gets more of a default budget, sweeps among its trials
 * and, when large, the multilevel bisection (path_ml.h); an easy one the
 * search as before issue 36 (sweeps made 3 of test_path_search's small
 * networks up to 37% worse than it). */
static void first_estimate(search *s) {
  if (s->q->flat_bisection) return;
  double f = s->cost_free.flops;
  s->multilevel = path_ml_worth(f, s->net->n);
  s->sweeps = f >= ML_HARD_FLOPS;
  if (s->fixed || s->q->time_budget > 0) return;
  s->budget = s->scale * path_budget_stretch(s->budget / s->scale, f);
  s->net->work_limit = (uint64_t)(WORK_PER_SECOND * s->budget);
  s->free_net.work_limit = s->net->work_limit;
}

/* Trials until half the budget, then reconfiguration of the best. */
static bool search_heuristic(search *s, int (*pairs)[2]) {
  int ntrials = s->q->trials > 0 ? s->q->trials : 1 << 20;
  int t = 0;
  s->collect = true;
  for (; t < ntrials; t++) {
    if (!trial(s, t, pairs)) return false;
    if (t == 0) first_estimate(s);
    if (spent(s, 0.5)) {
      t++;
      break;
    }
  }
  s->collect = false;
  s->method = t > 1 ? "random-greedy+reconf" : "greedy+reconf";
  double deadline = s->fixed ? INFINITY : s->t0 + clock_cap(s->budget);
  if (s->have_fit) {
    memcpy(pairs, s->best_fit, (size_t)(s->net->n - 1) * sizeof *pairs);
    return reconf_windows(s, s->net, pairs, deadline);
  }
  if (!anneals(s))
    return reconfigure_top(s, pairs, deadline, s->net->work_limit);
  uint64_t left = s->net->work_limit > s->work_done
                      ? s->net->work_limit - s->work_done : 0;
  return reconfigure_top(s, pairs, deadline,
                         s->work_done + (uint64_t)((1 - ANNEAL_SHARE) *
                                                   (double)left)) &&
         anneal_best(s, pairs, deadline);
}

/* A candidate slicing: a tree, its sliced axes, one slice's cost. */
typedef struct slicing {
  int (*pairs)[2];
  int *axes;
  int naxes;
  pcost c;      /* of one slice */
  double total; /* FLOPs of every slice */
  bool fits;
} slicing;

static bool slicing_alloc(const pnet *net, ein_arena *arena, slicing *x) {
  *x = (slicing){0};
  x->pairs = ein_arena_alloc(arena, (size_t)net->n, sizeof *x->pairs);
  x->axes = ein_arena_alloc(arena, (size_t)net->naxes + 1, sizeof(int));
  return x->pairs && x->axes;
}

/* Fewer total FLOPs first, then the smaller slice; one that fits beats
 * one that does not, which ranks by its slice's size. */
static bool slicing_better(const slicing *a, const slicing *b) {
  if (a->fits != b->fits) return a->fits;
  if (!a->fits) return a->c.largest < b->c.largest;
  double tol = 1e-12 * fmax(a->total, b->total);
  if (a->total < b->total - tol) return true;
  return a->total <= b->total + tol && a->c.largest < b->c.largest;
}

typedef bool (*slice_fn)(pnet *, int (*)[2], const path_slice_goal *,
                         int *, int *, pcost *, bool *);

/* Slices tree into *x by method, from the full sizes; net->sz is left
 * with x's axes at 1. */
static bool slice_one(search *s, const int (*tree)[2], slice_fn method,
                      const path_slice_goal *g, slicing *x) {
  pnet *net = s->net;
  memcpy(net->sz, s->free_net.sz, (size_t)net->naxes * sizeof *net->sz);
  memcpy(x->pairs, tree, (size_t)(net->n - 1) * sizeof *x->pairs);
  if (!method(net, x->pairs, g, x->axes, &x->naxes, &x->c, &x->fits))
    return false;
  double nslices = 1;
  for (int k = 0; k < x->naxes; k++)
    nslices *= (double)s->q->sizes[x->axes[k]];
  x->total = x->c.flops * nslices;
  return true;
}

/* The trees to slice: the best unlimited one first, then the other top
 * trees (reconfigured, as the search left them) that differ from it. */
static int slice_trees(search *s, const int (*trees[TOP + 1])[2]) {
  size_t bytes = (size_t)(s->net->n - 1) * sizeof *s->best_free;
  int m = 0;
  trees[m++] = (const int(*)[2])s->best_free;
  for (int i = 0; i < s->ntop; i++) {
    bool seen = false;
    for (int j = 0; j < m && !seen; j++)
      seen = !memcmp(trees[j], s->top[i], bytes);
    if (!seen) trees[m++] = (const int(*)[2])s->top[i];
  }
  return m;
}

/* Sets the nets' work limit to an equal share of what is left of the
 * slicing's work (`end`) among `left` attempts. */
static void share_work(search *s, uint64_t end, int left) {
  if (s->fixed) return;
  uint64_t now = s->work_done;
  s->net->work_limit = now + (end > now ? (end - now) / (uint64_t)left : 0);
}

static void swap_slicings(slicing *a, slicing *b) {
  slicing t = *a;
  *a = *b, *b = t;
}

/* Slices tree by method into *cur and keeps the better of *cur and *best
 * in *best (the first attempt always); *gain says whether cur won. An
 * attempt gives up once past SLICE_PRUNE times the best total that fits
 * so far. */
static bool attempt(search *s, const int (*tree)[2], slice_fn method,
                    path_slice_goal *g, slicing *best, slicing *cur,
                    int *done, bool *gain) {
  g->bound = *done && best->fits ? SLICE_PRUNE * best->total : INFINITY;
  if (!slice_one(s, tree, method, g, cur)) return false;
  *gain = !(*done)++ || slicing_better(cur, best);
  if (*gain) swap_slicings(best, cur);
  return true;
}

/* Whether the slicing's work (to `end`) is spent. */
static bool slicing_spent(const search *s, uint64_t end) {
  return !s->fixed && s->work_done >= end;
}

/* First the FLOP-best tree the old way (slicing, then reconfiguring) with
 * the old share of work, so the result is never worse than that; then
 * each tree both ways and rounds from the best (its tree sliced afresh,
 * interleaved, while that improves), sharing as much work again, no
 * attempt starting once it is spent. q->slice_trees 1: the old way alone.
 * Leaves the best in *best. */
static bool slice_search(search *s, slicing *best, slicing *cur) {
  static const slice_fn methods[2] = {path_slice, path_slice_reconf};
  const int (*trees[TOP + 1])[2];
  int m = slice_trees(s, trees), done = 0, want = s->q->slice_trees;
  if (want > 0 && want < m) m = want;
  int attempts = 2 * m + SLICE_ROUNDS;
  uint64_t share = (uint64_t)(SLICE_SHARE * (double)s->net->work_limit);
  uint64_t end = s->work_done + 2 * share;
  double clock = clock_cap(2 * SLICE_SHARE * s->budget);
  path_slice_goal g = {s->q->no_slice,
                       s->fixed ? INFINITY : path_now() + clock, INFINITY};
  bool gain = true;
  if (!s->fixed) s->net->work_limit = s->work_done + share;
  if (!attempt(s, trees[0], path_slice, &g, best, cur, &done, &gain))
    return false;
  if (want == 1) return true;
  for (int t = 0; t < m; t++)
    for (int k = !t; k < 2 && !slicing_spent(s, end); k++) {
      share_work(s, end, attempts - done);
      if (!attempt(s, trees[t], methods[k], &g, best, cur, &done, &gain))
        return false;
    }
  gain = true;
  for (int round = 0; round < SLICE_ROUNDS && best->fits && gain &&
                      !slicing_spent(s, end); round++) {
    share_work(s, end, attempts - done);
    if (!attempt(s, (const int(*)[2])best->pairs, path_slice_reconf, &g,
                 best, cur, &done, &gain))
      return false;
  }
  return true;
}

/* The sliced path when no order fits: the best of slicing several trees. */
static ein_path_status finish_sliced(search *s, ein_arena *arena,
                                     ein_path_result *r) {
  pnet *net = s->net;
  slicing best, cur;
  if (!slicing_alloc(net, s->work, &best) || !slicing_alloc(net, s->work, &cur))
    return EIN_PATH_NO_MEMORY;
  if (!slice_search(s, &best, &cur)) return EIN_PATH_NO_MEMORY;
  r->sliced = ein_arena_alloc(arena, (size_t)net->naxes + 1, sizeof(int));
  if (!r->sliced) return EIN_PATH_NO_MEMORY;
  if (!best.fits) {
    r->fit_largest = best.c.largest;
    memcpy(r->pairs, s->best_free, (size_t)(net->n - 1) * sizeof *r->pairs);
    r->nsliced = 0;
    return EIN_PATH_TOO_LARGE;
  }
  memcpy(r->pairs, best.pairs, (size_t)(net->n - 1) * sizeof *r->pairs);
  memcpy(r->sliced, best.axes, (size_t)best.naxes * sizeof *r->sliced);
  r->nsliced = best.naxes;
  r->nslices = 1;
  for (int k = 0; k < r->nsliced; k++)
    r->nslices *= (double)s->q->sizes[r->sliced[k]];
  r->slice_largest = best.c.largest;
  r->sliced_flops = best.total;
  pcost c;
  if (!eval(&s->free_net, (const int(*)[2])r->pairs, &c))
    return EIN_PATH_NO_MEMORY;
  r->flops = c.flops, r->largest = c.largest;
  return EIN_PATH_OK;
}

static bool search_init(search *s, const ein_path_query *q, pnet *net,
                        ein_arena *work, double scale) {
  memset(s, 0, sizeof *s);
  s->q = q, s->net = net, s->work = work, s->scale = scale;
  s->windowed = q->memory_limit > 0 && q->limited == EIN_PATH_LIMITED_WINDOWED;
  s->rng = q->seed ^ 0x5eedc0de12345678ull;
  s->fixed = q->trials > 0;
  s->t0 = path_now();
  s->budget = scale * (q->time_budget > 0 ? q->time_budget
                                          : default_budget(q->n));
  if (!pnet_init(net, q, work)) return false;
  net->work = &s->work_done;
  net->small_windows =
      !q->flat_bisection && (q->memory_limit <= 0 || s->windowed);
  if (!s->fixed) net->work_limit = (uint64_t)(WORK_PER_SECOND * s->budget);
  s->free_net = *net; /* its own sizes: slicing changes net's */
  s->free_net.limit = 0;
  s->free_net.sz = ein_arena_alloc(work, (size_t)net->naxes + 1, sizeof(double));
  if (!s->free_net.sz) return false;
  memcpy(s->free_net.sz, net->sz, (size_t)net->naxes * sizeof(double));
  size_t np = (size_t)q->n;
  s->best_free = ein_arena_alloc(work, np, sizeof *s->best_free);
  s->best_fit = ein_arena_alloc(work, np, sizeof *s->best_fit);
  for (int i = 0; i < TOP; i++)
    if (!(s->top[i] = ein_arena_alloc(work, np, sizeof *s->top[i])))
      return false;
  return s->best_free && s->best_fit;
}

static const char *sliced_name(const char *method) {
  if (!strcmp(method, "dp")) return "dp+slice";
  if (!strcmp(method, "greedy+reconf")) return "greedy+reconf+slice";
  return "random-greedy+reconf+slice";
}

/* Fills the result's figures from the chosen unsliced pairs. */
static bool fill_costs(search *s, ein_path_result *r) {
  pcost c;
  if (!eval(&s->free_net, (const int(*)[2])r->pairs, &c)) return false;
  r->flops = c.flops, r->largest = c.largest;
  r->free_flops = s->cost_free.flops, r->free_largest = s->cost_free.largest;
  r->nslices = 1, r->slice_largest = c.largest, r->sliced_flops = c.flops;
  return true;
}

/* One search of q as it stands, limited or not: trials, reconfiguration
 * and, under a limit no order found meets, slicing; with `scale` times
 * the budget (default or given). */
static ein_path_status search_scaled(const ein_path_query *q, ein_arena *arena,
                                     ein_path_result *r, double scale) {
  memset(r, 0, sizeof *r);
  r->nslices = 1;
  r->pairs = ein_arena_alloc(arena, (size_t)q->n, sizeof *r->pairs);
  if (!r->pairs) return EIN_PATH_NO_MEMORY;
  if (q->n < 2) {
    r->method = "single";
    return EIN_PATH_OK;
  }
  ein_arena work;
  ein_arena_init(&work);
  pnet net;
  search s;
  ein_path_status st = EIN_PATH_NO_MEMORY;
  bool ok = search_init(&s, q, &net, &work, scale);
  if (ok)
    ok = q->n <= EIN_PATH_DP_MAX ? search_dp(&s, r->pairs)
                                 : search_heuristic(&s, r->pairs);
  if (ok) {
    memcpy(r->pairs, s.have_fit ? s.best_fit : s.best_free,
           (size_t)(q->n - 1) * sizeof *r->pairs);
    ok = fill_costs(&s, r);
  }
  if (ok) {
    st = EIN_PATH_OK;
    r->method = s.method;
    double share = 1.0;
    if (net.limit > 0 && !s.have_fit) {
      st = finish_sliced(&s, arena, r);
      if (st == EIN_PATH_OK && r->nsliced) r->method = sliced_name(s.method);
      share += 2 * SLICE_SHARE;
    }
    r->work = (double)s.work_done;
    r->work_budget = s.fixed ? 0 : share * WORK_PER_SECOND * s.budget;
  }
  ein_arena_destroy(&work);
  return st;
}

static ein_path_status search_query(const ein_path_query *q, ein_arena *arena,
                                    ein_path_result *r) {
  return search_scaled(q, arena, r, 1.0);
}

/* The unlimited search of q (memory_limit 0), or its result from q's
 * memo when the memo holds it (path.h, ein_path_memo). */
static ein_path_status search_free(const ein_path_query *q, ein_arena *arena,
                                   ein_path_result *r) {
  if (path_memo_find(q->memo, q, arena, r)) return EIN_PATH_OK;
  ein_path_status st = search_query(q, arena, r);
  if (q->memo) {
    q->memo->searches++;
    if (st == EIN_PATH_OK) path_memo_keep(q->memo, q, r);
  }
  return st;
}

/* The windowed limited search's budget, a share of the plain one's. */
#define WINDOWED_SCALE 0.5

/* The limited searches (q->limited): the plain one, exactly as before
 * 2026-11-29, then the windowed one (small-first windows and annealing,
 * as the unlimited search) with WINDOWED_SCALE of its budget, when the
 * plain one's sliced tree fits; the windowed result replaces it only when
 * it fits too with fewer total FLOPs. So the status is the plain
 * search's and the result never dearer than its for the same query and
 * seed, by construction: the windowed search alone was up to 1.125x
 * dearer on some rows (bench/results/2026-11-29-paths-limited.md). When
 * the plain search finds nothing that fits, its answer stands. Only on
 * hard networks (the unlimited tree's FLOPs, `free_flops`, past
 * ML_HARD_FLOPS, where annealing runs at all): on the small networks of
 * the path tests the second search cost 3.7 s of CI CPU for little. */
static ein_path_status search_limited(const ein_path_query *q,
                                      ein_arena *arena, ein_path_result *r,
                                      double free_flops) {
  ein_path_query plain = *q, windowed = *q;
  plain.limited = EIN_PATH_LIMITED_PLAIN;
  windowed.limited = EIN_PATH_LIMITED_WINDOWED;
  if (q->limited == EIN_PATH_LIMITED_WINDOWED)
    return search_scaled(&windowed, arena, r, WINDOWED_SCALE);
  ein_path_status st = search_query(&plain, arena, r);
  if (q->limited == EIN_PATH_LIMITED_PLAIN || st != EIN_PATH_OK ||
      free_flops < ML_HARD_FLOPS)
    return st;
  ein_path_result w;
  ein_path_status sw = search_scaled(&windowed, arena, &w, WINDOWED_SCALE);
  if (sw == EIN_PATH_NO_MEMORY) return sw;
  double work = r->work + w.work, budget = r->work_budget + w.work_budget;
  if (sw == EIN_PATH_OK && w.sliced_flops < r->sliced_flops) *r = w;
  r->work = work, r->work_budget = budget;
  return st;
}

/* Under a limit the heuristic search first runs exactly as without one
 * (the same trials, small-first windows and budget): when its tree fits,
 * that tree is the answer, so a limit the unlimited order meets never
 * costs FLOPs (the limited search alone returned 10^8.67 where its own
 * unlimited tree, 10^8.06, fitted: bench 2026-11-29-paths-60s). When it
 * does not fit, the limited search (trials keyed on the limit, then
 * slicing) follows with a budget of its own, as before; its unlimited
 * figures are the first search's. The DP compares both trees itself
 * (search_dp); the flat search (before issue 36) keeps the limited
 * search alone. The unlimited search's result is kept in q->memo, so the
 * planner's retries under a tighter limit run only the limited search. */
ein_path_status ein_path_search(const ein_path_query *q, ein_arena *arena,
                                ein_path_result *r) {
  if (q->memory_limit <= 0 || q->n <= EIN_PATH_DP_MAX || q->flat_bisection)
    return search_query(q, arena, r);
  ein_path_query free_q = *q;
  free_q.memory_limit = 0, free_q.no_slice = NULL, free_q.slice_trees = 0;
  free_q.limited = 0;
  ein_path_status st = search_free(&free_q, arena, r);
  if (st != EIN_PATH_OK || r->largest <= q->memory_limit) return st;
  ein_path_result u = *r;
  st = search_limited(q, arena, r, u.flops);
  r->work += u.work, r->work_budget += u.work_budget;
  r->free_flops = u.flops, r->free_largest = u.largest;
  return st;
}
