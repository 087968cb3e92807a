/*
 * grad_internal.h - what a gradient (ein_grad, ein.h) holds, shared by
 * grad.c (deriving, planning, describing) and grad_run.c (running it on
 * its backend).
 */
#ifndef EIN_GRAD_INTERNAL_H
#define EIN_GRAD_INTERNAL_H

#include "alloc.h"
#include "arena.h"
#include "ctx_internal.h"
#include "dtype.h"
#include "grad.h"
#include "plan_object.h"

struct ein_grad {
  ein_arena arena; /* everything below that is not a plan */
  char *expr;      /* the forward expression */
  ein_grad_program prog;
  ein_plan **plans; /* per step: the EINSUM's plan, else NULL */
  ein_plan **maps;  /* per step: an elementwise step's plan, else NULL */
  const ein_backend_entry *backend; /* where every plan runs */
  int device;
  int ninputs, wrt;
  int *in_ndim;
  int64_t **in_shape;
  int out_ndim;
  int64_t out_shape[EIN_MAX_DIMS];
  ein_dtype dtype;
  bool conjugates;
  bool jvp; /* ein_jvp_create's: TANGENT in, the output's tangent out */
  double flops, bytes;
};

/* The operand arrays of EINSUM step i (sized by its operands: an
 * expression may have thousands), or NULL with the error on ctx. */
static inline bool ein_grad_step_tensors(ein_ctx *ctx, int noperands, int i,
                                         DLTensor **ts,
                                         const DLTensor ***tp) {
  *ts = ein_calloc((size_t)noperands + 1, sizeof **ts);
  *tp = ein_calloc((size_t)noperands + 1, sizeof **tp);
  if (*ts && *tp) return true;
  ein_free(*ts);
  ein_free((void *)*tp);
  ein_thread_rec *me = ein_ctx_enter(ctx);
  if (me)
    (void)ein_fail_memory(&me->err, "out of memory for gradient step %d", i);
  return false;
}

#endif
