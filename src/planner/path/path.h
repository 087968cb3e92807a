/*
 * path.h - contraction order: which pair of operands to contract next, and
 * which axes to slice when no order keeps the intermediates within a limit.
 *
 * Takes: each operand's axis ids (any number of operands and axes; ids are
 * 0..total_axes-1, repeats in one operand count once), the output's axis
 * ids and every axis's size. An axis that only one operand has and the
 * output lacks is summed before any pair (the planner's pre-reduction), so
 * it costs the path nothing.
 * Gives: n-1 pairs in opt_einsum's "SSA" numbering (operands 0..n-1 are the
 * inputs, n+i the result of the i-th pair), the method that found them, the
 * path's FLOPs (opt_einsum's count) and largest intermediate, and, when the
 * memory limit cannot be met by ordering alone, the axes to slice: the
 * contraction is then run once per slice (each sliced axis fixed to one
 * index; the results summed into the output, or written to their part of
 * it for an output axis) with the same pairs.
 * Owns: nothing; everything it returns lives in the caller's arena.
 *
 * Method: an exact dynamic programme over subsets up to EIN_PATH_DP_MAX
 * operands; beyond, randomized greedy trials (Boltzmann-sampled greedy)
 * refined by subtree reconfiguration (windows of up to 8 leaves re-solved
 * by the DP), with recursive-bisection trials for the largest networks
 * (multilevel, parameters tuned across trials, and a budget stretched by
 * the plain greedy's FLOPs on hard ones: path/path_ml.h) and, on hard
 * ones, simulated annealing of the best tree (path_anneal.c); under a
 * limit, that unlimited search first, its tree kept when it fits;
 * then, if a limit is set and not met, the limited search: trials keyed
 * on the limit, then slicing of the best few trees (greedy slicing and
 * reconfiguration with the sliced axes fixed, one after the other or
 * interleaved), the least total FLOPs kept; on hard networks run twice,
 * as before and with the unlimited search's small-first windows and
 * annealing at half the budget, the cheaper sliced result kept.
 * docs/design.md, "Contraction order at scale and slicing".
 *
 * An "intermediate" is the result of a pair other than the last one (the
 * last writes the output); inputs and the output are not counted.
 */
#ifndef EIN_PATH_H
#define EIN_PATH_H

#include <stdbool.h>
#include <stdint.h>

#include "arena.h"

enum { EIN_PATH_DP_MAX = 12 };

/* What the search minimises. FLOPS: opt_einsum's FLOP count, ties broken by
 * the largest intermediate. SIZE: the largest intermediate, then FLOPs.
 * COMBO: FLOPs + alpha * (elements written to intermediates), cotengra's
 * 'combo' (alpha 64 by default), ties by the largest intermediate. */
typedef enum ein_path_objective {
  EIN_PATH_FLOPS = 0,
  EIN_PATH_SIZE,
  EIN_PATH_COMBO,
} ein_path_objective;

typedef struct ein_path_memo ein_path_memo;

enum { EIN_PATH_LIMITED_PLAIN = 1, EIN_PATH_LIMITED_WINDOWED = 2 };

typedef struct ein_path_query {
  int n;                  /* operands, >= 1 */
  const int *const *axes; /* axes[i][0..naxes[i]-1]: operand i's axis ids */
  const int *naxes;       /* per operand */
  const int *output_axes; /* the output's axis ids */
  int output_naxes;
  int total_axes;         /* ids are 0..total_axes-1 */
  const int64_t *sizes;   /* per axis id, >= 1 */
  /* Options; zero is the default of each. */
  double memory_limit; /* elements of one intermediate; 0: none */
  double time_budget;  /* seconds of search past the DP; 0: a default
                          that grows with n (about 45 ms at 100 operands on
                          the bench machine). Counted as work calibrated
                          to seconds rather than read from the clock, so
                          the path depends on the seed only (the clock
                          stops it only at 10x, or 2 s past the budget) */
  uint64_t seed;       /* the random trials are a function of it */
  int trials;          /* greedy trials; 0: as many as half the budget
                          allows, then reconfiguration until the budget
                          ends. Given: exactly that many, reconfiguration
                          to convergence (at most 8 passes), the clock
                          ignored, so the path depends on the seed only. */
  ein_path_objective objective;
  double combo_alpha;  /* COMBO's alpha; 0: 64 */
  const bool *no_slice; /* per axis id: never slice it (NULL: any axis) */
  int slice_trees;     /* when slicing: how many of the search's best
                          distinct trees are sliced; 0: all it keeps (up to
                          5); 1: the FLOP-best alone, sliced then
                          reconfigured once (the cheapest; the method
                          before 2026-11-28) */
  bool flat_bisection; /* the bisection trials split by path_part.c's
                          single-level growth and refinement, and the
                          default budget is not stretched: the search
                          before issue 36, kept for comparison (tests,
                          bench); false: multilevel bisection with tuned
                          parameters (path/path_ml.h) */
  ein_path_memo *memo; /* under a limit: the unlimited search's result,
                          kept across the caller's searches (NULL: none) */
  int limited;         /* under a limit the unlimited search's tree does
                          not meet, the limited searches run (path.c
                          search_limited): 0 both on hard networks, the
                          cheaper sliced result kept; EIN_PATH_LIMITED_PLAIN
                          the one before 2026-11-29 alone;
                          EIN_PATH_LIMITED_WINDOWED the one with small-first
                          windows and annealing alone (tests, bench) */
} ein_path_query;

typedef enum ein_path_status {
  EIN_PATH_OK = 0,
  EIN_PATH_NO_MEMORY,
  EIN_PATH_TOO_LARGE, /* even slicing every sliceable axis cannot meet the
                         limit; fit_largest says what can */
} ein_path_status;

typedef struct ein_path_result {
  int (*pairs)[2];     /* n-1 SSA pairs, in the caller's arena */
  const char *method;  /* "single", "dp", "greedy", "random-greedy",
                          "partition" (+ "+reconf", "+slice") */
  double flops;        /* of the path over the full sizes */
  double largest;      /* elements of its largest intermediate */
  /* Slicing (nsliced 0: none; then nslices 1 and the sliced figures equal
   * the unsliced ones). */
  int nsliced;
  int *sliced;         /* axis ids, in the caller's arena */
  double nslices;      /* product of the sliced axes' sizes */
  double slice_largest; /* largest intermediate of one slice, elements */
  double sliced_flops; /* nslices * FLOPs of one slice */
  /* The unlimited search's best path, for messages: its FLOPs and largest
   * intermediate (equal to the above when no limit is set). */
  double free_flops, free_largest;
  double fit_largest;  /* EIN_PATH_TOO_LARGE: the least largest
                          intermediate slicing reaches */
  /* The budget's own accounting: the work the search spent and the work
   * its budget allowed (the budget, stretched by the first estimate when
   * it is the default, times the search's work rate; slicing's share
   * included when it ran; 0 when trials were given). A function of the
   * seed, unlike the clock: tests assert on it. */
  double work, work_budget;
} ein_path_result;

/* The unlimited search's result kept across the searches of one planning
 * call: ein_plan_build plans again with the search held 4x tighter when a
 * layout copy or a sum is past the limit, and the unlimited search, which
 * the limit does not enter, would find the same tree each time. Owned by
 * that call (no global state: planners on several threads each have
 * their own). Keyed by all the unlimited search reads (the network, the
 * budget, seed, trials, objective, alpha and flat_bisection): another
 * query's search runs afresh and takes its place. */
struct ein_path_memo {
  ein_arena arena;     /* the key's and the result's copies */
  bool have;
  ein_path_query key;  /* memory_limit 0; no_slice, slice_trees unset */
  ein_path_result free; /* its pairs in arena */
  int searches;        /* unlimited searches run through it */
  int reused;          /* searches its result stood in for */
};

void ein_path_memo_init(ein_path_memo *m);
void ein_path_memo_destroy(ein_path_memo *m);

/* Fills *r. On EIN_PATH_TOO_LARGE the pairs (unsliced, the best order) are
 * still filled. */
ein_path_status ein_path_search(const ein_path_query *q, ein_arena *arena,
                                ein_path_result *r);

/* FLOPs and largest intermediate of the given SSA path (n-1 pairs assumed
 * valid: every operand and result used once), with the axes in sliced[]
 * fixed to one index (the cost of one slice; NULL/0: none). Returns false
 * only when memory runs out. */
bool ein_path_cost(const ein_path_query *q, const int (*pairs)[2],
                   const int *sliced, int nsliced, double *flops,
                   double *largest);

/* Checks that pairs is a valid SSA path for n operands: each id < n + k at
 * pair k, each operand and result used exactly once. */
bool ein_path_valid(int n, const int (*pairs)[2]);

#endif
