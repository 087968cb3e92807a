/*
 * path_ml.h - contraction trees by multilevel recursive bisection, with
 * the bisection's parameters sampled and tuned across trials: the search's
 * answer to high-treewidth graphs (random regular graphs, circuits),
 * where the trees that partitioning finds beat any greedy order by orders
 * of magnitude (issue 36).
 *
 * Takes: the search's network (path_internal.h), a tuner kept across one
 * search's trials, its generator and a scratch arena.
 * Gives: n-1 SSA pairs per trial; the tuner learns from each trial's
 * cost, reported back by the caller.
 * Owns: nothing past the call; the tuner is a plain struct the caller
 * keeps.
 *
 * docs/design.md, "Partitioning at scale".
 */
#ifndef EIN_PATH_ML_H
#define EIN_PATH_ML_H

#include <stdint.h>

#include "path_internal.h"

/* One trial's bisection parameters (cotengra's kahypar space, adapted):
 * imbalance: how far a part's weight may pass half, as a fraction of
 * half; decay: how the imbalance changes with depth (s = part's share of
 * the network: imbalance * s^decay for decay >= 0, else
 * 1 - s^-decay * (1 - imbalance)); cutoff: parts this small are finished
 * by the greedy (the DP up to 8); log_weights: an axis weighs log2 of its
 * size (else 1); jitter: sizes times 1 + jitter * Exp(1) before
 * weighing, so trials differ. */
typedef struct ml_params {
  double imbalance, decay, jitter;
  int cutoff;
  int log_weights;
} ml_params;

enum { ML_KEEP = 6 };

/* The tuner: the best parameter sets so far with their scores (log10 of
 * the trial tree's score, lower is better). */
typedef struct ml_tuner {
  ml_params best[ML_KEEP];
  double score[ML_KEEP];
  int nbest, trials;
  ml_params last; /* the parameters of the trial in progress */
} ml_tuner;

/* Draws the next trial's parameters into t->last: the first trials (and a
 * share of all) uniformly over the space, the rest perturbed from one of
 * the best sets kept. */
void ml_tuner_sample(ml_tuner *t, uint64_t *rng);

/* Records the score of the trial drawn last. */
void ml_tuner_report(ml_tuner *t, double score);

/* A contraction tree by recursive multilevel bisection with parameters
 * p: pairs[0..n-2]. False only when memory runs out. */
bool path_ml_tree(const pnet *net, const ml_params *p, uint64_t *rng,
                  ein_arena *arena, int (*pairs)[2]);

/* Multilevel bisection of the operands s[0..m) of net (edges: axes with
 * two or more of them; weights as p says): reorders s so that side 0
 * comes first and returns its size (1..m-1 for m >= 2). imbalance: each
 * side within (1 + imbalance) * half of the operands. Returns -1 when
 * memory runs out. */
int path_ml_bisect(const pnet *net, const ml_params *p, double imbalance,
                   uint64_t *rng, int *s, int m);

/* Whether a network of n operands whose plain greedy path costs
 * greedy_flops is one for the multilevel bisection: at least
 * ML_HARD_FLOPS, and ML_MIN_OPERANDS to ML_MAX_OPERANDS operands. Below,
 * the greedy trials and the flat bisection of path_part.c (cheaper
 * trials, more of them) find trees as good or better within the same
 * budget; above, one multilevel tree costs most of a budget of seconds
 * (a 100x100 lattice: 1.7 s) and the trials starve
 * (docs/design.md, "Partitioning at scale"). */
#define ML_HARD_FLOPS 1e10
enum { ML_MIN_OPERANDS = 150, ML_MAX_OPERANDS = 2500 };
bool path_ml_worth(double greedy_flops, int n);

/* Whether `work` (what the trials may spend) holds ML_MIN_TRIALS
 * multilevel trials of trial_work each (the first one's). */
enum { ML_MIN_TRIALS = 6 };
bool path_ml_affordable(uint64_t trial_work, uint64_t work);

/* The default budget for a network whose plain greedy path costs
 * greedy_flops: `budget` times 1 + 2 log10(FLOPs / ML_HARD_FLOPS), at
 * least 1 and at most BUDGET_STRETCH_MAX times, within
 * BUDGET_STRETCH_CAP seconds (never below `budget`). */
double path_budget_stretch(double budget, double greedy_flops);

#endif
