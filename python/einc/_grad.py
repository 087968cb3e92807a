"""Gradient programs: how einc differentiates an expression.

`program` returns what ein_grad_create (ein.h) derives for one input, as
plain values the framework layers run with their own tensors: a list of
steps, each an einc expression (EINSUM, planned by einc like any other)
or an elementwise operation. With jvp=True it is ein_jvp_create's
forward-mode program instead: the same kinds of steps, seeded with the
input's tangent, giving its part of the output's tangent. The result is
cached: a training loop asks for the same program at every step.
"""
from __future__ import annotations

import functools

from . import _einc
from ._core import _lengths, _reduction_name, numpy_dialect


@functools.lru_cache(maxsize=1024)
def program(expr: str, shapes: tuple, *, wrt: int, reduce: str = "sum",
            numpy: bool = False, dtype: str = "float32",
            lengths: tuple = (), jvp: bool = False) -> dict:
    """The gradient program of expr (on inputs of these shapes, a tuple of
    tuples) with respect to input `wrt`, or with jvp its forward-mode
    program. The dict is shared by every caller with the same arguments:
    do not change it."""
    return _einc.grad_program(expr, shapes, bool(numpy), reduce, lengths,
                              int(wrt), dtype, bool(jvp))


def _training_cost(expr, shapes, dtype, numpy, reduce, lengths,
                   forward_flops, forward_bytes):
    """Forward + backward (FLOPs, least bytes) as `einc plan --grad`
    totals them: the forward plan's and every input's gradient program's
    (ein_grad_flops, ein_grad_bytes); an input without a gradient adds
    nothing."""
    shapes = tuple(tuple(int(d) for d in s) for s in shapes)
    if numpy is None:
        numpy = numpy_dialect(expr, [len(s) for s in shapes])
    flops, nbytes = forward_flops, forward_bytes
    for wrt in range(len(shapes)):
        try:
            prog = program(expr, shapes, wrt=wrt,
                           reduce=_reduction_name(reduce), numpy=bool(numpy),
                           dtype=_dtype_name(dtype), lengths=_lengths(lengths))
        except _einc.EincError:
            continue
        flops += prog["flops"]
        nbytes += prog["bytes"]
    return flops, nbytes


def _dtype_name(dtype):
    import numpy as np
    try:
        return np.dtype(dtype).name
    except TypeError:
        return str(dtype)


def group_steps(prog: dict, step: dict) -> tuple:
    """The two einsum steps of prod's gradient program that reduce a value
    in x's layout to its group (the axes the product runs over, one value
    per kept position) and broadcast it back: those that made the zero
    count, PROD_SELECT's fourth operand (src/planner/grad.c,
    prod_parts)."""
    kind, back = step["operands"][3]
    back_step = prog["steps"][back] if kind == "step" else None
    kind, reduce = back_step["operands"][0] if back_step else (None, 0)
    reduce_step = prog["steps"][reduce] if kind == "step" else None
    if (not reduce_step or reduce_step["op"] != "einsum"
            or back_step["op"] != "einsum"):
        raise ValueError("prod_select: its zero count is not a group's "
                         "reduction broadcast back")
    return reduce_step, back_step


def exact_prod_select(where, g, p, x, z, group_prod, group_sum):
    """PROD_SELECT's value, g times the product of the rest of x's group
    (p: the product of the group's nonzeros, z: its zero count), written
    so that its derivative is exact where x has zeros: for a framework
    that differentiates the program again (a Hessian, a double backward).

    Each x_k is a_k b_k with a_k = x_k at a zero, else 1, and b_k = x_k
    off the zeros, else 1, both selected by x_k == 0 and each the identity
    along the branch taken. Off the zeros the result is g (p / x) times
    the product of the group's a (the zeros themselves, so the value is 0
    with any zero, and the derivative along each zero is the product of
    the others). At a zero it is g p times the product of the other
    zeros: 1 with one, the other zero as (sum of the group's zeros) -
    this one with two, and 0 with three or more (value and first
    derivative exact, as a Hessian needs; higher ones are not). The selects never take a
    division by zero, so no branch gives an inf to multiply by 0.
    group_prod and group_sum reduce over the group and broadcast back."""
    zero = x == 0
    kept = where(zero, x, 0)
    zeros_prod = group_prod(where(zero, x, 1))
    off = g * (p / where(zero, 1, x)) * zeros_prod
    others = where(z == 2, group_sum(kept) - kept, 0)
    at = g * p * where(z == 1, 1, others)
    return where(zero, at, off)
