/*
 * path_internal.h - what the path search's files (path*.c) share: the
 * network in sorted-id form, a tensor's axis list, step and tree costs, a
 * seeded generator and a clock. Not part of the planner's interface
 * (path.h is).
 *
 * A tensor (an operand or an intermediate) is a sorted list of the axes it
 * keeps, each with how many operands under it have the axis. An axis whose
 * count reaches its total (operands having it, plus one when the output
 * has it) is summed where that happens and dropped from the list, so a
 * list's length is the tensor's rank and memory grows with the network's
 * size, not with operands times axes.
 */
#ifndef EIN_PATH_INTERNAL_H
#define EIN_PATH_INTERNAL_H

#include <math.h>

#include "path.h"

typedef struct plist {
  int len;
  int *ax;  /* sorted axis ids */
  int *cnt; /* operands under the tensor that have the axis */
} plist;

typedef struct pcost {
  double flops;   /* opt_einsum's count */
  double write;   /* elements written to intermediates */
  double largest; /* largest intermediate, elements */
} pcost;

typedef struct pnet {
  int n, naxes;
  double *sz;   /* per axis: its size, 1 while sliced */
  int *total;   /* per axis: operands having it, +1 when the output has it */
  plist *leaf;  /* the n operands, private axes removed */
  double limit; /* elements; 0: none */
  ein_path_objective objective;
  double alpha;
  /* Work done (list entries merged, DP splits), shared by copies of the
   * net; past work_limit (when nonzero) the search stops as at its
   * deadline. Counting work instead of reading the clock makes the
   * default search deterministic. */
  uint64_t *work;
  uint64_t work_limit;
  /* Reconfiguration also tries, where a window opened dearest first does
   * not improve, the window opened smallest subtree first (path_reconf.c);
   * off in the search before issue 36 (path.h's flat_bisection). */
  bool small_windows;
} pnet;

/* Builds the network from the query (ids checked, lists sorted). */
bool pnet_init(pnet *net, const ein_path_query *q, ein_arena *arena);

/* Product of sizes of l's axes. */
double plist_volume(const pnet *net, const plist *l);

/* The tensor of contracting a with b into out (whose arrays hold a->len +
 * b->len ids); returns the step's FLOPs. */
double plist_merge(const pnet *net, const plist *a, const plist *b,
                   plist *out);

/* Copies l into the arena. */
bool plist_copy(ein_arena *arena, const plist *l, plist *out);

/* Lists of every node of an SSA path (nodes[0..2n-2]), and its cost. */
bool ptree_eval(const pnet *net, const int (*pairs)[2], ein_arena *arena,
                plist *nodes, pcost *cost);

/* The objective's scalar score (lower is better) and the order it implies:
 * fitting the limit first (when set), then the score, then the other
 * measure. */
double pcost_score(const pnet *net, pcost c);
bool pcost_better(const pnet *net, pcost a, pcost b);
void pcost_add_step(const pnet *net, pcost *c, double flops, double size,
                    bool root);

/* splitmix64: the generator of every random choice. */
static inline uint64_t prng_next(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static inline double prng_unit(uint64_t *s) { /* in (0, 1) */
  return ((double)(prng_next(s) >> 11) + 0.5) / 9007199254740992.0;
}

double path_now(void); /* monotonic seconds */

/* Whether the search is over: the work limit or the deadline passed. */
static inline bool path_over(const pnet *net, double deadline) {
  if (net->work && net->work_limit && *net->work > net->work_limit)
    return true;
  return deadline < INFINITY && path_now() > deadline;
}

/* The exact DP over k <= EIN_PATH_DP_MAX tensors whose result keeps `out`:
 * fills pairs[0..k-2] (SSA over 0..k-1) and *cost (the steps' cost; the
 * last step counts as the root when `root`). Intermediates past the limit
 * are avoided first. Returns false when memory runs out. */
bool path_dp(const pnet *net, int k, const plist *const *leaves,
             const plist *out, bool root, ein_arena *arena, int (*pairs)[2],
             pcost *cost);

/* One greedy pass. temperature 0 and costmod 1: the plain greedy
 * (opt_einsum's memory-growth key); otherwise Boltzmann-sampled. */
bool path_greedy(const pnet *net, double temperature, double costmod,
                 uint64_t *rng, ein_arena *arena, int (*pairs)[2]);

/* A linear order (path_sweep.c): one tensor grown from a random operand,
 * absorbing the neighbour that leaves it smallest (noise of temperature
 * bits); pairs[0..n-2]. */
bool path_sweep(const pnet *net, double temperature, uint64_t *rng,
                ein_arena *arena, int (*pairs)[2]);

/* Recursive bisection of the operands' hypergraph, parts finished by the
 * greedy; pairs[0..n-2]. */
bool path_partition(const pnet *net, int leaf_size, double imbalance,
                    uint64_t *rng, ein_arena *arena, int (*pairs)[2]);

/* Subtree reconfiguration: rewrites pairs in place while windows of up to
 * `window` leaves improve, until `deadline` (path_now() seconds); *cost is
 * the tree's cost after. */
bool path_reconfigure(const pnet *net, int (*pairs)[2], int window,
                      double deadline, int max_passes, pcost *cost);

/* Simulated annealing of a tree (path_anneal.c): sweeps over the
 * internal nodes, each proposing one random rotation, taken when its two
 * steps get no dearer and otherwise with probability 2^(-beta * bits);
 * beta rises from beta0 to beta1 with the sweeps done or the work spent
 * (of what is left to net's work limit when annealing starts), whichever
 * is further. Stops at the deadline or the work limit; pairs become the
 * cheapest tree met (FLOPs). */
typedef struct path_anneal_plan {
  int sweeps;
  double beta0, beta1;
  double deadline;
} path_anneal_plan;
bool path_anneal(const pnet *net, int (*pairs)[2], const path_anneal_plan *p,
                 uint64_t *rng);

/* What a slicing aims at: one slice within net->limit, slicing no axis
 * no_slice marks (NULL: any), reconfiguring until deadline (and the
 * net's work limit); bound: every slice's FLOPs past which the slicing
 * gives up (INFINITY: never), as not fitting. */
typedef struct path_slice_goal {
  const bool *no_slice;
  double deadline;
  double bound;
} path_slice_goal;

/* Greedy slicing of the tree `pairs` until one slice's largest
 * intermediate is within net->limit, then reconfiguration with the sliced
 * axes fixed (sizes 1) and a pass that unslices any axis no longer needed.
 * net->sz is changed: sliced axes are 1 after. Fills sliced[] (room for
 * naxes ids), *nsliced and *cost (of one slice). Returns false when memory
 * runs out; *fits false when no slicing meets the limit. */
bool path_slice(pnet *net, int (*pairs)[2], const path_slice_goal *g,
                int *sliced, int *nsliced, pcost *cost, bool *fits);

/* The same with slicing and reconfiguration interleaved: one axis at a
 * time, each followed by a reconfiguration (windows of 6) for one slice's
 * FLOPs; once the slices fit, as path_slice. */
bool path_slice_reconf(pnet *net, int (*pairs)[2], const path_slice_goal *g,
                       int *sliced, int *nsliced, pcost *cost, bool *fits);

/* path_memo.c. find: q's unlimited result from the memo into *r (pairs
 * in arena) when the memo holds q's search; keep: q's result r into the
 * memo, in place of what it held (false: out of memory, memo empty). */
bool path_memo_find(ein_path_memo *m, const ein_path_query *q,
                    ein_arena *arena, ein_path_result *r);
bool path_memo_keep(ein_path_memo *m, const ein_path_query *q,
                    const ein_path_result *r);

#endif
