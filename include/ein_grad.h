/*
 * ein_grad.h - gradients and tangents of an expression: programs the
 * planner derives, made of einc steps, run by the library on the backend
 * and device they were made for.
 *
 * Part of einc's public C API: ein.h includes this header, and this
 * header includes ein.h, so a program includes either. ein.h's
 * conventions (statuses, errors on the context, NULL options) hold here.
 */
#ifndef EIN_PUBLIC_GRAD_H
#define EIN_PUBLIC_GRAD_H

#include "ein.h"

#ifdef __cplusplus
extern "C" {
#endif

/* [[nodiscard]] in C before C23 is an extension -pedantic reports (ein.h). */
#if defined(__GNUC__) && !defined(__cplusplus)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#endif

/* ------------------------------------------------------------ gradients */

/*
 * The backward of an expression with respect to one input, derived by
 * einc as a small program whose heavy steps are einc expressions, each
 * planned like any other (its own contraction order, views, GEMMs):
 *
 *   contraction / sum   dX_k = einsum(dOut, X_j for j != k -> X_k's dims):
 *                       axes private to X_k become repeats (broadcasts),
 *                       repeats of the forward become sums, splits, merges
 *                       and permutes invert, an input dim of size 1 that
 *                       broadcast gets the gradient summed into it;
 *   mean                the same, scaled by 1 / (elements reduced per
 *                       output element);
 *   max, min            the gradient goes to the arg-extremum; ties share
 *                       it evenly (torch.amax's rule, which einops'
 *                       reduce(..., 'max') follows on torch):
 *                       mask = X == bcast(Out), dX = mask * bcast(dOut /
 *                       sum(mask));
 *   prod                the product of the others, exact where inputs are
 *                       zero: with no zero in the group dOut * Out / x,
 *                       with one zero dOut * (product of the nonzeros) at
 *                       the zero and 0 elsewhere, with two or more 0;
 *   diagonal (`i i`)    the gradient is computed on the diagonal and
 *                       scattered onto it (zero elsewhere).
 *
 * Step results are C-contiguous temporaries; the last step's result is the
 * gradient, shaped as the input. Values named by a step: */
typedef enum ein_grad_value_kind {
  EIN_GRAD_VALUE_DOUT = 0,   /* the gradient of the loss w.r.t. the output */
  EIN_GRAD_VALUE_INPUT = 1,  /* forward input `index` */
  EIN_GRAD_VALUE_OUTPUT = 2, /* the forward output */
  EIN_GRAD_VALUE_STEP = 3,   /* the result of step `index` (an earlier one) */
  EIN_GRAD_VALUE_TANGENT = 4 /* a JVP's (ein_jvp_create): the tangent of
                                input wrt, shaped as that input */
} ein_grad_value_kind;

typedef struct ein_grad_value {
  ein_grad_value_kind kind;
  int index;
} ein_grad_value;

/* Step operations. Elementwise ones take operands of one shape (the
 * step's) and the gradient's dtype. */
typedef enum ein_grad_op {
  EIN_GRAD_EINSUM = 0,  /* expr (einops dialect, with lengths) over the
                           operands, with `reduction`: sum; prod (prod's
                           product of nonzeros); max or min (broadcasting
                           a max/min output whose axes the forward
                           repeated: exact on the copies) */
  EIN_GRAD_EQUAL,       /* a == b ? 1 : 0 */
  EIN_GRAD_MUL,         /* a * b */
  EIN_GRAD_DIV,         /* a / b */
  EIN_GRAD_SCALE,       /* a * scale */
  EIN_GRAD_IS_ZERO,     /* a == 0 ? 1 : 0 */
  EIN_GRAD_ZERO_TO_ONE, /* a == 0 ? 1 : a */
  EIN_GRAD_PROD_SELECT, /* (g, p, x, z): z == 0 ? g * p / x
                           : (z == 1 && x == 0 ? g * p : 0) */
  EIN_GRAD_SCATTER_DIAG /* zeros of the step's shape, with operand 0 written
                           into the view of `ndim_view` dims whose element
                           strides (in the C-contiguous result) are
                           `view_strides` (a diagonal: sums of strides) */
} ein_grad_op;

typedef struct ein_grad_step {
  ein_grad_op op;
  const char *expr;             /* EINSUM: "b h j, b h i j -> b h i" */
  ein_reduction reduction;      /* EINSUM */
  const ein_length *lengths;    /* EINSUM: sizes of output-only axes */
  int nlengths;
  int noperands;
  const ein_grad_value *operands; /* noperands of them: an EINSUM of the
                                     gradient of a sum names dout and every
                                     other input */
  double scale;                 /* SCALE */
  int ndim;                     /* the result's rank and shape */
  const int64_t *shape;
  int ndim_view;                /* SCATTER_DIAG */
  const int64_t *view_strides;  /* SCATTER_DIAG */
  double flops;                 /* as ein_plan_flops counts (EINSUM: its
                                   plan's), elementwise: one per element */
  double bytes;                 /* least traffic, as ein_plan_min_bytes */
} ein_grad_step;

typedef struct ein_grad ein_grad;

/* Derives the gradient of expr (as ein_plan_create would plan it for these
 * inputs and options) with respect to input `wrt`, and plans its einsum
 * steps for the options' backend (C-contiguous operands of the inputs'
 * dtype). EIN_ERR_DTYPE when the dtype has no gradient (integers, bool;
 * complex max and min), EIN_ERR_BAD_REDUCTION for any and all (and a prod
 * over a dim of input wrt that broadcasts), EIN_ERR_INVALID_ARGUMENT for a
 * wrt out of range. Independent of ctx once created. */
EIN_NODISCARD
EIN_API ein_status ein_grad_create(ein_ctx *ctx, const char *expr,
                                   const DLTensor *const *inputs, int ninputs,
                                   const ein_options *options, int wrt,
                                   ein_grad **out);

/* Forward mode: input wrt's part of the output's tangent (the JVP of the
 * expression is the sum of these over the inputs that have a tangent),
 * derived as a program of the same steps, whose TANGENT value is input
 * wrt's tangent and whose last result is shaped as the output:
 *
 *   sum, mean   the expression itself with input wrt replaced by its
 *               tangent (each is linear in every input);
 *   max, min    the tangent at the arg-extremum, ties averaged:
 *               sum(mask * T) / sum(mask), the derivative of torch.amax
 *               and the transpose of the gradient's even split;
 *   prod        sum of T times the product of the others (PROD_SELECT
 *               with T as its first operand: exact with zeros).
 *
 * No value enters conjugated (a JVP is linear, not conjugate-linear).
 * Errors, destroy, steps, plans and describe as for ein_grad_create;
 * ein_grad_execute runs it with `dout` the tangent of input wrt and
 * `dinput` receiving the output's tangent part. */
EIN_NODISCARD
EIN_API ein_status ein_jvp_create(ein_ctx *ctx, const char *expr,
                                  const DLTensor *const *inputs, int ninputs,
                                  const ein_options *options, int wrt,
                                  ein_grad **out);

/* Whether grad is a JVP program (ein_jvp_create). */
EIN_API int ein_grad_is_jvp(const ein_grad *grad);

EIN_API void ein_grad_destroy(ein_grad *grad);

/* Steps, in order; the last one's result is the gradient. Pointers stay
 * valid while the grad lives. */
EIN_API int ein_grad_nsteps(const ein_grad *grad);
EIN_API const ein_grad_step *ein_grad_step_at(const ein_grad *grad, int i);

/* The plan of EINSUM step i (NULL for other steps), owned by the grad. */
EIN_API const ein_plan *ein_grad_step_plan(const ein_grad *grad, int i);

/* Whether the program reads the forward output (max and min; prod's
 * program recomputes what it needs from the input, zeros included). */
EIN_API int ein_grad_needs_output(const ein_grad *grad);

/* Complex dtypes: every forward value (an input or the output) enters the
 * program conjugated (torch's convention: the gradient of a real loss is
 * dOut * conj(d Out / d X)); 0 for real dtypes. */
EIN_API int ein_grad_conjugates(const ein_grad *grad);

/* Totals over the steps. */
EIN_API double ein_grad_flops(const ein_grad *grad);
EIN_API double ein_grad_bytes(const ein_grad *grad);

/* Describes the program: per step its operation, expression, operands,
 * shape, path (EINSUM: as ein_plan_describe's), FLOPs and bytes, and the
 * totals. Returns the full length as snprintf does. */
EIN_API size_t ein_grad_describe(const ein_grad *grad,
                                 ein_describe_format format, char *buf,
                                 size_t cap);

/* Runs the program on the backend and device it was made for (the
 * inputs' of ein_grad_create: host memory, a CUDA device, the emulated
 * device), every step through that backend's plans: inputs as for the
 * forward, the forward output (may be NULL unless
 * ein_grad_needs_output), dout shaped as the output, dinput shaped as
 * input wrt (any strides; it must not overlap the others or itself:
 * EIN_ERR_INVALID_ARGUMENT, EIN_ERR_BAD_SHAPE), all in that memory
 * (EIN_ERR_DEVICE for a tensor elsewhere), of the gradient's dtype
 * (EIN_ERR_DTYPE) and shapes (EIN_ERR_BAD_SHAPE). Every check comes
 * before any step runs, so a refused call writes nothing. Elementwise
 * steps compute in the accumulator's precision (double on the CPU) and
 * round once to the dtype. Like ein_eval, the work is queued on the
 * device's stream (ein_ctx_synchronize waits for it). */
EIN_NODISCARD
EIN_API ein_status ein_grad_execute(ein_ctx *ctx, const ein_grad *grad,
                                    const DLTensor *const *inputs,
                                    int ninputs, const DLTensor *output,
                                    const DLTensor *dout, DLTensor *dinput);

#if defined(__GNUC__) && !defined(__cplusplus)
#pragma GCC diagnostic pop
#endif

#ifdef __cplusplus
}
#endif

#endif /* EIN_PUBLIC_GRAD_H */
