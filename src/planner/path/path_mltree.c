/*
 * path_mltree.c - contraction trees by recursive multilevel bisection and
 * the tuner of its parameters (path_ml.h).
 *
 * A set larger than the cutoff is bisected (path_ml.c) with the
 * imbalance its depth gives, both halves built the same way and joined
 * last; a set within the cutoff is ordered by the DP (up to DP_PART
 * operands) or by the plain greedy with the axes it shares with the rest
 * kept. The tuner is a small evolution strategy: a prior first, then
 * mostly perturbations of the best sets found (the better ranked the
 * likelier), a share uniform over the space so the search does not
 * settle early. cotengra's HyperOptimizer does the same with optuna or CMA-ES;
 * the space is its kahypar space, adapted (docs/design.md,
 * "Partitioning at scale").
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "path_ml.h"

enum { DP_PART = 8, CUTOFF_MIN = 4, CUTOFF_MAX = 32 };
#define UNIFORM_SHARE 0.2
#define IMBALANCE_MIN 0.01
#define IMBALANCE_MAX 0.9
#define JITTER_MIN 0.01
#define JITTER_MAX 10.0

typedef struct mtree {
  const pnet *net;
  const ml_params *p;
  uint64_t *rng;
  ein_arena *arena;
  int (*pairs)[2];
  int np;
  int *cnt; /* per axis, scratch: operands of a part having it */
} mtree;

/* The axes part s keeps: those an operand outside it or the output has. */
static bool part_output(mtree *t, const int *s, int m, plist *out) {
  const pnet *net = t->net;
  int len = 0;
  for (int k = 0; k < m; k++) len += net->leaf[s[k]].len;
  out->ax = ein_arena_alloc(t->arena, (size_t)len + 1, sizeof(int));
  out->cnt = ein_arena_alloc(t->arena, (size_t)len + 1, sizeof(int));
  if (!out->ax || !out->cnt) return false;
  out->len = 0;
  for (int k = 0; k < m; k++)
    for (int x = 0; x < net->leaf[s[k]].len; x++) {
      int a = net->leaf[s[k]].ax[x];
      if (t->cnt[a]++ == 0) out->ax[out->len++] = a;
    }
  int kept = 0;
  for (int j = 0; j < out->len; j++) {
    int a = out->ax[j];
    if (t->cnt[a] < net->total[a]) out->ax[kept++] = a;
    t->cnt[a] = 0;
  }
  out->len = kept;
  return true;
}

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* Orders part s exactly or greedily; its root's SSA id in *root. */
static bool solve_part(mtree *t, const int *s, int m, int *root) {
  if (m == 1) {
    *root = s[0];
    return true;
  }
  int(*local)[2] = ein_arena_alloc(t->arena, (size_t)m, sizeof *local);
  int *map = ein_arena_alloc(t->arena, (size_t)(2 * m), sizeof *map);
  pnet sub = *t->net;
  sub.n = m;
  sub.leaf = ein_arena_alloc(t->arena, (size_t)m, sizeof *sub.leaf);
  if (!local || !map || !sub.leaf) return false;
  for (int k = 0; k < m; k++) sub.leaf[k] = t->net->leaf[s[k]], map[k] = s[k];
  if (m <= DP_PART) {
    const plist *leaves[DP_PART];
    plist out;
    pcost c;
    for (int k = 0; k < m; k++) leaves[k] = &sub.leaf[k];
    if (!part_output(t, s, m, &out)) return false;
    qsort(out.ax, (size_t)out.len, sizeof(int), cmp_int);
    if (!path_dp(t->net, m, leaves, &out, false, t->arena, local, &c))
      return false;
  } else if (!path_greedy(&sub, 0, 1, t->rng, t->arena, local)) {
    return false;
  }
  for (int q = 0; q < m - 1; q++) {
    t->pairs[t->np][0] = map[local[q][0]];
    t->pairs[t->np][1] = map[local[q][1]];
    map[m + q] = t->net->n + t->np++;
  }
  *root = map[2 * m - 2];
  return true;
}

/* The imbalance for a part holding share s of the operands. */
static double imbalance_at(const ml_params *p, double s) {
  if (p->decay >= 0) return p->imbalance * pow(s, p->decay);
  return 1.0 - pow(s, -p->decay) * (1.0 - p->imbalance);
}

static bool build(mtree *t, int *s, int m, int *root) {
  if (m <= t->p->cutoff) return solve_part(t, s, m, root);
  double imb = imbalance_at(t->p, (double)m / t->net->n);
  int m0 = path_ml_bisect(t->net, t->p, fmin(imb, IMBALANCE_MAX), t->rng,
                          s, m), r0, r1;
  if (m0 < 0 || !build(t, s, m0, &r0) || !build(t, s + m0, m - m0, &r1))
    return false;
  t->pairs[t->np][0] = r0;
  t->pairs[t->np][1] = r1;
  *root = t->net->n + t->np++;
  return true;
}

bool path_ml_tree(const pnet *net, const ml_params *p, uint64_t *rng,
                  ein_arena *arena, int (*pairs)[2]) {
  mtree t = {.net = net, .p = p, .rng = rng, .arena = arena, .pairs = pairs};
  int *s = ein_arena_alloc(arena, (size_t)net->n, sizeof *s);
  t.cnt = ein_arena_alloc(arena, (size_t)net->naxes + 1, sizeof *t.cnt);
  if (!s || !t.cnt) return false;
  memset(t.cnt, 0, (size_t)(net->naxes + 1) * sizeof *t.cnt);
  for (int i = 0; i < net->n; i++) s[i] = i;
  int root;
  return build(&t, s, net->n, &root);
}

/* ------------------------------------------------------------ tuner */

static double gauss(uint64_t *rng) {
  double u = prng_unit(rng), v = prng_unit(rng);
  return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

static double clampd(double x, double lo, double hi) {
  return x < lo ? lo : x > hi ? hi : x;
}

static void uniform(ml_params *p, uint64_t *rng) {
  p->imbalance = IMBALANCE_MIN + (IMBALANCE_MAX - IMBALANCE_MIN) * prng_unit(rng);
  p->decay = -5.0 + 10.0 * prng_unit(rng);
  p->jitter = exp(log(JITTER_MIN) + log(JITTER_MAX / JITTER_MIN) * prng_unit(rng));
  p->cutoff = CUTOFF_MIN + (int)(prng_next(rng) % (CUTOFF_MAX - CUTOFF_MIN + 1));
  p->log_weights = (int)(prng_next(rng) & 1);
}

/* A step from p: a tenth of each range, the choice flipped at times. */
static void perturb(ml_params *p, uint64_t *rng) {
  p->imbalance = clampd(p->imbalance + 0.09 * gauss(rng), IMBALANCE_MIN,
                        IMBALANCE_MAX);
  p->decay = clampd(p->decay + 1.0 * gauss(rng), -5.0, 5.0);
  p->jitter = clampd(p->jitter * exp(0.7 * gauss(rng)), JITTER_MIN, JITTER_MAX);
  int c = p->cutoff + (int)lround(3.5 * gauss(rng));
  p->cutoff = c < CUTOFF_MIN ? CUTOFF_MIN : c > CUTOFF_MAX ? CUTOFF_MAX : c;
  if (prng_unit(rng) < 0.1) p->log_weights ^= 1;
}

/* Where the tuner starts: near balance at the top, looser further down,
 * parts of 8 ordered exactly, sizes weighed by their logs, a little
 * noise; the best of the bench's 3-regular and 4-regular graphs' trials
 * (bench/paths.py) lie around it. A default budget of a few trials must
 * not be spent on uniform draws, which mostly lose to the greedy. */
static const ml_params PRIOR = {.imbalance = 0.3, .decay = -3,
                                .jitter = 0.2, .cutoff = 12, .log_weights = 1};

void ml_tuner_sample(ml_tuner *t, uint64_t *rng) {
  if (t->trials == 0) {
    t->last = PRIOR;
    return;
  }
  if (prng_unit(rng) < UNIFORM_SHARE) {
    uniform(&t->last, rng);
    return;
  }
  double u = prng_unit(rng);
  t->last = t->nbest ? t->best[(int)(u * u * t->nbest)] : PRIOR;
  perturb(&t->last, rng);
}

void ml_tuner_report(ml_tuner *t, double score) {
  t->trials++;
  int at = t->nbest;
  while (at > 0 && score < t->score[at - 1]) at--;
  if (at >= ML_KEEP) return;
  int last = t->nbest < ML_KEEP ? t->nbest++ : ML_KEEP - 1;
  for (int i = last; i > at; i--) {
    t->best[i] = t->best[i - 1];
    t->score[i] = t->score[i - 1];
  }
  t->best[at] = t->last;
  t->score[at] = score;
}

bool path_ml_worth(double greedy_flops, int n) {
  return greedy_flops >= ML_HARD_FLOPS && n >= ML_MIN_OPERANDS &&
         n <= ML_MAX_OPERANDS;
}

bool path_ml_affordable(uint64_t trial_work, uint64_t work) {
  return trial_work * ML_MIN_TRIALS <= work;
}

/* Where the budget goes: a network the greedy already contracts cheaply
 * gains little from partitioning; one whose greedy path is past 1e10
 * FLOPs (seconds of contraction and more) is where the bisection's trees
 * beat the greedy's by orders of magnitude, and only given many trials
 * (issue 36's high-treewidth graphs). */
#define BUDGET_STRETCH_MAX 24.0
#define BUDGET_STRETCH_CAP 3.0
double path_budget_stretch(double budget, double greedy_flops) {
  double f = 1.0 + 2.0 * log10(fmax(greedy_flops, 1.0) / ML_HARD_FLOPS);
  f = clampd(f, 1.0, BUDGET_STRETCH_MAX);
  return fmax(budget, fmin(budget * f, BUDGET_STRETCH_CAP));
}
