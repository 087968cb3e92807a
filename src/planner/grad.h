/*
 * grad.h - deriving the backward of a bound problem: the gradient program.
 *
 * Takes: a bound problem (bind.h) and the input the gradient is for.
 * Gives: the program of ein_grad_step (ein.h) whose last result is the
 * gradient, shaped as that input: EINSUM steps as einc expressions in the
 * einops dialect (one identifier per axis; user names kept, numbers and
 * ellipsis dims given generated names that no user name equals), with the
 * sizes of their output-only axes as lengths, and elementwise steps.
 * Nothing here knows dtypes, strides, plans or data: the API stage plans
 * each EINSUM step and counts its FLOPs.
 *
 * The rules (docs/design.md, "Gradients"):
 *   sum        dX_k = einsum(dOut, X_j for j != k -> X_k)
 *   mean       the same, then SCALE by 1 / (product of reduced axis sizes)
 *   max, min   mask = EQUAL(X, Out broadcast to X), cnt = einsum(mask ->
 *              Out), q = DIV(dOut, cnt), dX = MUL(mask, q broadcast to X):
 *              ties share the gradient evenly (torch.amax's rule)
 *   prod       z = zeros per output element, p = product of the nonzeros,
 *              both broadcast back, then PROD_SELECT (exact with zeros)
 * An input with a repeated axis (a diagonal) gets its gradient in the
 * layout of its distinct axes and ends with SCATTER_DIAG; a broadcast dim
 * (size 1 standing for a larger axis) is written `1`, so the gradient is
 * summed into it.
 *
 * Everything (steps, expressions, shapes) lives in the arena.
 */
#ifndef EIN_GRAD_H
#define EIN_GRAD_H

#include <stdbool.h>

#include "arena.h"
#include "bind.h"
#include "error.h"
#include "plan.h"

typedef struct ein_grad_program {
  int nsteps;
  ein_grad_step *steps; /* flops and bytes left 0: the API counts them */
  bool needs_output;    /* some step reads the forward output */
} ein_grad_program;

/* Derives d(loss)/d(input wrt). EIN_ERR_BAD_REDUCTION for any and all,
 * EIN_ERR_INVALID_ARGUMENT for wrt out of range; errors go to err. */
ein_status ein_grad_derive(const ein_problem *p, int wrt, ein_arena *arena,
                           ein_error_rec *err, ein_grad_program *out);

/* Derives input wrt's part of the output's tangent (the JVP: the output's
 * tangent is the sum of these over the inputs that have a tangent), as a
 * program of the same steps whose TANGENT value is input wrt's tangent:
 *   sum, mean  the forward expression with input wrt replaced by its
 *              tangent (each is linear in every input)
 *   max, min   sum(mask * T) / sum(mask), mask as for the gradient: the
 *              tangent at the arg-extremum, ties averaged (torch.amax's
 *              derivative)
 *   prod       sum(PROD_SELECT(T, p, x, z)): T times the product of the
 *              others, exact with zeros
 * The last step's result is shaped as the output. Errors as
 * ein_grad_derive's. */
ein_status ein_jvp_derive(const ein_problem *p, int wrt, ein_arena *arena,
                          ein_error_rec *err, ein_grad_program *out);

/* The plan of an elementwise step (any op but EINSUM): operand k
 * C-contiguous of shape ndim[k]/shape[k], all of dtype dt; the result
 * C-contiguous of the step's shape (grad_plan.c says how each op is
 * planned). Errors (EIN_ERR_NO_MEMORY) on err; *out owned by the caller
 * (ein_plan_ir_destroy). */
ein_status ein_plan_grad_map(const ein_grad_step *step, const int *ndim,
                             const int64_t *const *shape, ein_dtype dt,
                             ein_error_rec *err, ein_plan_ir **out);

/* A one-step plan copying a tensor of ndim/shape between strides (in
 * elements; NULL: C-contiguous), conjugated when conj and dt is complex:
 * how a gradient's operands become C-contiguous and its result reaches
 * the caller's layout. */
ein_status ein_plan_grad_copy(int ndim, const int64_t *shape,
                              const int64_t *dst_strides,
                              const int64_t *src_strides, ein_dtype dt,
                              bool conj, ein_error_rec *err,
                              ein_plan_ir **out);

/* The name of a step operation: "einsum", "equal", "mul", "div", "scale",
 * "is_zero", "zero_to_one", "prod_select", "scatter_diag". */
const char *ein_grad_op_name(ein_grad_op op);

#endif
