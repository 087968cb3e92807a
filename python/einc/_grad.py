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
