/*
 * bind_internal.h - what the binder's files share (bind.c, bind_common.c,
 * bind_sizes.c, bind_output.c): the working state of one binding and the
 * helpers that name axes and operands and fail with a span. Nothing
 * outside src/binder includes it.
 */
#ifndef EIN_BIND_INTERNAL_H
#define EIN_BIND_INTERNAL_H

#include "bind.h"

typedef enum size_source {
  FROM_NONE,    /* not known yet */
  FROM_TENSOR,  /* a plain dim of an input tensor */
  FROM_LENGTH,  /* a length binding */
  FROM_LITERAL, /* a number written in the expression */
  FROM_SPLIT    /* solved from a split */
} size_source;

typedef struct axis_work {
  ein_axis_origin origin;
  const char *name; /* AXIS_NAMED: slice of the source */
  size_t name_len;
  int64_t size;
  int ellipsis_pos;
  bool in_input, in_output;
  size_source from;
  ein_span from_span; /* where the size came from (not for FROM_LENGTH) */
  int from_operand, from_dim, from_length;
} axis_work;

/* Per operand: the span of each dim and each factor, for messages. */
typedef struct operand_work {
  ein_span *dim_span;
  ein_span *factor_span;
  bool *dim_grouped; /* the dim was written as a group */
} operand_work;

typedef struct binder {
  const ein_ast *ast;
  const ein_options *opt;
  const int *ndims;
  const int64_t *const *shapes;
  ein_arena *arena;
  ein_error_rec *err;
  int naxes, cap_axes;
  axis_work *ax; /* cap_axes entries, grown as axes appear */
  /* Named axes by name: open addressing, -1 empty, 2 * cap_axes slots,
   * so that a network of 100,000 axes binds in linear time. */
  int *by_name;
  int E; /* dims covered by '...' after broadcasting: the largest rank */
  int ell_first; /* the first ellipsis axis once made, else -1 */
  int *ell_rank;      /* per input; -1 without '...' */
  operand_work *work; /* inputs, then the output */
  ein_problem *out;
} binder;

/* bind_common.c */
ein_span span_of(size_t offset, size_t length);
ein_status bind_fail(binder *b, ein_status status, const ein_span *spans,
                     int nspans, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
ein_status bind_no_memory(binder *b);
void axis_name(const binder *b, int a, char *buf, size_t cap);
void operand_name(int operand, char *buf, size_t cap);
size_t name_slot(const binder *b, const char *name, size_t len);
int find_named(const binder *b, const char *name, size_t len);

/* bind_sizes.c */
int hint_len(const axis_work *w);
ein_status apply_lengths(binder *b);
ein_status bind_input_sizes(binder *b);

/* bind_output.c */
ein_status implicit_output(binder *b, ein_bound_operand *bo,
                           operand_work *w);
ein_status check_axis_rules(binder *b);
ein_status check_output(binder *b);

#endif
