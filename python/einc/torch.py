"""torch.einsum's call form and contract, computed by einc:
``from einc.torch import einsum`` in place of ``torch.einsum``.

    einsum('ij,jk->ik', a, b)          # torch's equation, spaces allowed
    einsum('ij,jk', [a, b])            # the operands as one list
    einsum(a, [0, 1], b, [1, 2], [0, 2])  # the sublist form

The equation is always numpy's dialect (one letter per axis), as torch
reads it, whatever spaces it has. The result has torch's dtype: an
integer or bool tensor summed over an axis on its own is promoted to
int64 as torch.sum does (a uint8 sum does not wrap); a product of several
integer tensors keeps their dtype (and wraps) as torch's does; operands of
different dtypes are torch's RuntimeError (torch's own check, run once
per equation, dtypes and shapes on meta tensors). Errors of the expression are
einc.EincError, a RuntimeError as torch's are. (Tensors that require
grad go through einc's torch integration, as einc.einsum's do.)
"""

from __future__ import annotations

import torch as _torch

from . import _core, _einc
from ._core import _fast, _fast_setup, bool_einsum, evaluate

_LETTERS = ("ABCDEFGHIJKLMNOPQRSTUVWXYZ"
            "abcdefghijklmnopqrstuvwxyz")

# (equation, dtypes and shapes) -> the result dtype torch gives, found
# once by running torch.einsum itself on meta tensors of those dtypes and
# shapes (torch's own errors included: a miss that raises is not kept).
_result_dtype: dict = {}
_MAX_KEPT = 4096
# torch's equation -> einc's: whitespace dropped
_equations: dict = {}
_SAME = frozenset((_torch.float32, _torch.float64, _torch.float16,
                   _torch.bfloat16, _torch.complex64, _torch.complex128))


def _einsum_general(*args):
    """torch.einsum's whole contract, for the calls the builtin einsum
    does not serve itself."""
    equation = args[0] if args else None
    if equation.__class__ is str:
        operands = args[1:]
        if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
            operands = tuple(operands[0])
    else:
        equation, operands = _from_sublists(args)
    expr = _equations.get(equation)
    if expr is None:
        expr = "".join(equation.split())
        _equations[equation] = expr = equation if expr == equation else expr
    if "..." in expr and "->" in expr:
        expr = _summed_ellipsis(expr, operands)
    try:  # the common call: one or two operands of one floating dtype
        dtype = operands[0].dtype
        plain = dtype in _SAME and (len(operands) == 1 or (
            len(operands) == 2 and operands[1].dtype is dtype))
    except (AttributeError, IndexError):
        plain = False
    if not plain:
        operands = _with_torch_dtype(expr, operands)
        if len(operands) > 1 and operands[0].dtype is _torch.bool:
            return _bool_products(expr, operands)
    # torch's own call, as is, when nothing above changed it
    call = args if expr is equation and operands is args[1:] else (
        expr, *operands)
    result = _fast(call, True, None)
    if result is None and _fast_setup():
        result = _fast(call, True, None)
    if result is not None:
        return result
    return evaluate(expr, operands, numpy=True)


# The builtin (python/src/dropin.c) serves torch.einsum's plain call
# from einc's cached path (python/src/call.c): an equation first, the operands
# after it or as one list, no integer or bool operand (torch promotes
# their sums); everything else goes to _einsum_general.
einsum = _einc.fast_torch_einsum(
    _einsum_general,
    "einsum(*args)\n--\n\n"
    "torch.einsum(equation, *operands), einsum(equation, [operands]) or\n"
    "einsum(op1, sublist1, op2, sublist2, ..., [out_sublist]), computed by\n"
    "einc; torch's result dtype and exception types.")


def _summed_ellipsis(expr, operands):
    """torch sums the dims an input '...' stands for where the output has
    no '...' (einc's numpy dialect refuses): they are named with unused
    letters, as numpy's optimize= path names them (einc.numpy)."""
    from .numpy import _ellipsis_summed

    try:
        return _ellipsis_summed(expr, operands)
    except AttributeError:  # not tensors: einc's own error follows
        return expr


def _bool_products(expr, operands):
    """torch.einsum of bool operands it keeps bool (nothing summed first):
    products are ands, computed; a sum over an axis longer than 1 is
    torch's NotImplementedError (its bmm has no bool kernel on the CPU);
    a sum over size-1 axes only is no sum."""
    lhs, arrow, rhs = expr.partition("->")
    if not arrow:  # the implicit output: the letters seen once
        letters = lhs.replace(",", "").replace(".", "")
        rhs = "".join(c for c in letters if letters.count(c) == 1)
    sizes = {}
    for term, o in zip(lhs.split(","), operands):
        body = term.replace("...", "")
        head = term.split("...")[0]
        tail = body[len(head):]
        dims = list(o.shape[:len(head)]) + (list(o.shape[-len(tail):])
                                            if tail else [])
        for c, d in zip(head + tail, dims):
            sizes[c] = max(sizes.get(c, 1), d)
    empty = any(o.numel() == 0 for o in operands)  # torch returns early
    if not empty and any(d != 1 for c, d in sizes.items() if c not in rhs):
        raise NotImplementedError('"bmm" not implemented for \'Bool\'')
    return bool_einsum(expr, operands, numpy=True)


def _with_torch_dtype(expr, operands):
    """The operands in the dtype torch computes in (promoted to int64
    where torch.einsum's result is), after torch's own checks."""
    try:
        first = operands[0].dtype
        same = all(o.dtype is first for o in operands[1:])
    except (AttributeError, IndexError):
        _torch_probe(expr, operands)  # torch's TypeError or RuntimeError
        raise
    if same and first in _SAME:
        return operands
    key = (expr, *[(o.dtype, tuple(o.shape)) for o in operands])
    dtype = _result_dtype.get(key)
    if dtype is None:
        dtype = _torch_probe(expr, operands).dtype
        if len(_result_dtype) >= _MAX_KEPT:
            _result_dtype.clear()
        _result_dtype[key] = dtype
    if all(o.dtype is dtype for o in operands):
        return operands
    # torch promotes mixed operands where its path has no bmm ('b,de->d'
    # of float16 and int32: float16): einc computes in that dtype
    return tuple(o if o.dtype is dtype else o.to(dtype) for o in operands)


def _torch_probe(expr, operands):
    """torch.einsum on meta tensors of the operands' dtypes and shapes
    (no data, no work): its result, or torch's exception."""
    probes = [_torch.empty(o.shape, dtype=o.dtype, device="meta")
              if isinstance(o, _torch.Tensor) else o for o in operands]
    try:
        return _torch.einsum(expr, *probes)
    except Exception:  # noqa: BLE001
        # the meta kernels raise where the real call returns early (empty
        # operands of mixed dtypes) or raises another type (bmm of bool
        # and int64: NotImplementedError): the real call says which
        return _torch.einsum(expr, *operands)


def _from_sublists(args):
    """(equation, operands) of the sublist form: operand, sublist pairs
    and an optional output sublist; ints 0-51 name axes (A-Z, a-z) and
    Ellipsis stands for '...', as in torch."""
    pairs, out = args, None
    if len(args) % 2 == 1:
        pairs, out = args[:-1], args[-1]
    operands = tuple(pairs[0::2])
    terms = [_sublist_term(s) for s in pairs[1::2]]
    equation = ",".join(terms)
    if out is not None:
        equation += "->" + _sublist_term(out)
    return equation, operands


def _sublist_term(sublist) -> str:
    try:
        items = list(sublist)
    except TypeError:
        raise TypeError("einsum(): a sublist must be a list of ints and "
                        f"Ellipsis, not {type(sublist).__name__}") from None
    term = []
    for s in items:
        if s is Ellipsis:
            term.append("...")
        elif isinstance(s, int) and not isinstance(s, bool) and 0 <= s < 52:
            term.append(_LETTERS[s])
        else:
            raise ValueError("einsum(): subscript in subscript list is not "
                             f"within the valid range [0, 52): {s!r}")
    return "".join(term)


def _install_dynamo():
    """einsum as Dynamo traces it (issue 38): the builtin starts in C,
    which Dynamo cannot trace (it raised "Attempted to call function
    marked as skipped" under fullgraph, and explain counted no break for a
    call left outside the graph). Floating operands of one dtype go to
    einc's operator; others to torch.einsum itself, whose promotions and
    errors are the contract."""
    @_torch.compiler.substitute_in_graph(einsum)
    def traced(*args):
        equation = args[0] if args else None
        if isinstance(equation, str):
            operands = args[1:]
            if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
                operands = tuple(operands[0])
        else:
            equation, operands = _from_sublists(args)
        expr = "".join(equation.split())
        first = operands[0].dtype if operands else None
        if first not in _SAME or any(o.dtype != first for o in operands):
            return _torch.einsum(expr, *operands)
        # (the torch adapter's, which it sets on the core when it loads)
        return _core.traced_call(expr, tuple(operands), "sum", True, ())


_core.after_import("torch._dynamo", _install_dynamo)

__all__ = ["einsum"]
