/*
 * path_tree.h - a contraction tree as linked nodes, each with its tensor,
 * its step's FLOPs, its volume and the operands under it: what subtree
 * reconfiguration (path_reconf.c) and annealing (path_anneal.c) rewrite
 * in place before handing the tree back as SSA pairs.
 *
 * Takes: the search's network and an SSA path over it. Gives: nodes
 * 0..n-1 (the operands) and n..2n-2 (pair k's result is node n + k), the
 * root the node without a parent. Owns nothing: every array and every
 * rewritten list lives in the arena given.
 */
#ifndef EIN_PATH_TREE_H
#define EIN_PATH_TREE_H

#include "path_internal.h"

typedef struct ctree {
  const pnet *net;
  int n, nn;        /* operands; nodes (2n - 1) */
  int *left, *right, *parent;
  plist *t;         /* each node's tensor */
  double *flops;    /* each internal node's step */
  double *size;     /* each node's volume */
  int *leaves;      /* operands under each node */
  ein_arena *arena; /* where rewritten nodes' lists go */
} ctree;

/* The tree of pairs (n-1 SSA pairs over net's operands). */
bool ctree_init(ctree *tr, const pnet *net, const int (*pairs)[2],
                ein_arena *arena);

/* The tree back as SSA pairs (post-order from the root). */
bool ctree_pairs(const ctree *tr, int (*pairs)[2], ein_arena *arena);

#endif
