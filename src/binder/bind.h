/*
 * bind.h - binding an expression to tensor shapes: the bound problem.
 *
 * Takes: a parsed expression (ein_ast), the input shapes, the options
 * (length bindings, reduction).
 * Gives: an ein_problem: every axis with its size and role, and for every
 * input and for the output the list of dims, each dim a row-major list of
 * axes (one axis for a plain dim, several for a split or a merge, none for a
 * unit dim). The planner turns this into strided views; nothing here looks
 * at strides or data.
 *
 * The problem is self-contained (labels are copied into the arena), so later
 * stages never look back at the syntax tree or the source text.
 */
#ifndef EIN_BIND_H
#define EIN_BIND_H

#include <stdbool.h>
#include <stdint.h>

#include "arena.h"
#include "ast.h"
#include "error.h"

typedef enum ein_axis_origin {
  AXIS_NAMED,   /* a name in the expression */
  AXIS_ANON,    /* a number in the expression: its own axis each time */
  AXIS_ELLIPSIS /* one of the dims that '...' stands for */
} ein_axis_origin;

typedef struct ein_bound_axis {
  ein_axis_origin origin;
  const char *label;  /* "h", "3", "...0": NUL-terminated, in the arena */
  int64_t size;
  int ellipsis_pos;   /* AXIS_ELLIPSIS: 0 is the outermost ellipsis dim */
  bool in_input;      /* appears in at least one input */
  bool in_output;     /* appears in the output */
} ein_bound_axis;

typedef struct ein_bound_dim {
  int first, count; /* axes are operand.factors[first .. first+count) */
  int64_t size;     /* inputs: the tensor's size; output: the product */
  bool broadcast;   /* input dim of size 1 standing for a larger axis (it
                       reads with stride 0); only when count == 1 */
} ein_bound_dim;

typedef struct ein_bound_operand {
  int ndim;
  ein_bound_dim *dims;
  int nfactors;
  int *factors; /* axis ids, row-major within each dim (outermost first) */
} ein_bound_operand;

typedef struct ein_problem {
  ein_dialect dialect;
  ein_reduction reduction;
  int naxes;
  ein_bound_axis *axes; /* in order of first appearance */
  int ninputs;
  ein_bound_operand *inputs;
  ein_bound_operand output;
} ein_problem;

/* Binds `ast` to ninputs shapes (shapes[i] has ndims[i] entries). Lengths
 * and reduction come from `options` (NULL: defaults). Allocates the problem
 * in `arena`; on failure records the error on `err`. */
ein_status ein_bind_problem(const ein_ast *ast, int ninputs, const int *ndims,
                            const int64_t *const *shapes,
                            const ein_options *options, ein_arena *arena,
                            ein_error_rec *err, ein_problem *out);

/* Axes reduced (in an input, not in the output): true for axis a. */
static inline bool ein_axis_reduced(const ein_problem *p, int a) {
  return p->axes[a].in_input && !p->axes[a].in_output;
}

/* Axes repeated (in the output only). */
static inline bool ein_axis_repeated(const ein_problem *p, int a) {
  return !p->axes[a].in_input && p->axes[a].in_output;
}

#endif
