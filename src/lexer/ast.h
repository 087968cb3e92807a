/*
 * ast.h - the syntax trees of einc: expressions and shape specs.
 *
 * Everything lives in the arena passed to the parser, and every node keeps
 * its span (byte offset and length in the source) so that any later stage
 * can point at it. Names are slices of the source, not copies: the source
 * must outlive the tree.
 */
#ifndef EIN_AST_H
#define EIN_AST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ein.h"

/* ------------------------------------------------------- expressions */

typedef enum ein_term_kind {
  TERM_NAME,     /* h */
  TERM_NUMBER,   /* 3: an anonymous axis of that size (value > 1) */
  TERM_UNIT,     /* 1: a unit axis */
  TERM_ELLIPSIS, /* ... */
  TERM_GROUP     /* (h w): a split on an input, a merge on the output;
                    () has no factors and is a unit axis */
} ein_term_kind;

typedef struct ein_term {
  ein_term_kind kind;
  size_t offset, length;      /* span in the source */
  const char *name;           /* TERM_NAME: slice of the source */
  size_t name_len;
  int64_t value;              /* TERM_NUMBER */
  struct ein_term *factors;   /* TERM_GROUP: NAME, NUMBER, UNIT, ELLIPSIS */
  int nfactors;
} ein_term;

typedef struct ein_operand {
  ein_term *terms;
  int nterms;
  size_t offset, length; /* span from its first to its last term */
  int ellipsis_term;     /* index of the term holding '...' (a top-level
                            ellipsis or a group containing one), or -1 */
} ein_operand;

typedef struct ein_ast {
  const char *src;
  size_t len;
  ein_dialect dialect;
  ein_operand *inputs;
  int ninputs;
  ein_operand output;
  bool explicit_output; /* false: numpy implicit output, output is empty */
  size_t arrow_offset;  /* offset of '->' when explicit */
} ein_ast;

/* --------------------------------------------------------- shape specs */

typedef enum ein_sexpr_kind {
  SEXPR_NUMBER,
  SEXPR_NAME,
  SEXPR_ADD,
  SEXPR_SUB,
  SEXPR_MUL
} ein_sexpr_kind;

/* An integer expression in a shape spec, such as n+1 or 2*h. */
typedef struct ein_sexpr {
  ein_sexpr_kind kind;
  size_t offset, length;
  const char *name;        /* SEXPR_NAME */
  size_t name_len;
  int64_t value;           /* SEXPR_NUMBER */
  struct ein_sexpr *lhs, *rhs;
} ein_sexpr;

typedef enum ein_spec_kind {
  SPEC_NAME,  /* binds or checks a name */
  SPEC_FIXED, /* a fixed size */
  SPEC_ANY,   /* _ */
  SPEC_RUN,   /* *name, *_ or ... */
  SPEC_BCAST, /* #name: the bound size or 1 */
  SPEC_EXPR,  /* n+1 */
  SPEC_GROUP  /* (h d): a product of NAME, FIXED and EXPR factors */
} ein_spec_kind;

typedef struct ein_spec_dim {
  ein_spec_kind kind;
  size_t offset, length;
  const char *name;       /* NAME, BCAST, RUN ("..." for an ellipsis, NULL
                             for the anonymous run *_) */
  size_t name_len;
  bool broadcast;         /* RUN: written *#name, each dim may be 1 */
  int64_t value;          /* FIXED */
  ein_sexpr *expr;        /* EXPR */
  struct ein_spec_dim *factors; /* GROUP */
  int nfactors;
} ein_spec_dim;

typedef struct ein_spec {
  const char *src;
  size_t len;
  ein_spec_dim *dims;
  int ndims;
  int run_index; /* index of the SPEC_RUN dim, or -1 */
} ein_spec;

#endif
