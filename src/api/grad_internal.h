/*
 * grad_internal.h - what a gradient (ein_grad, ein.h) holds, shared by
 * grad.c (deriving, planning, describing) and grad_run.c (running it on
 * host memory).
 */
#ifndef EIN_GRAD_INTERNAL_H
#define EIN_GRAD_INTERNAL_H

#include "arena.h"
#include "dtype.h"
#include "grad.h"

struct ein_grad {
  ein_arena arena; /* everything below that is not a plan */
  char *expr;      /* the forward expression */
  ein_grad_program prog;
  ein_plan **plans; /* per step: the EINSUM's plan, else NULL */
  int ninputs, wrt;
  int *in_ndim;
  int64_t **in_shape;
  int out_ndim;
  int64_t out_shape[EIN_MAX_DIMS];
  ein_dtype dtype;
  bool conjugates;
  double flops, bytes;
};

#endif
