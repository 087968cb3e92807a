"""einops' functional surface with einops' contract, computed by einc:
``from einc import einops`` (or ``import einc.einops as einops``) in
place of ``import einops``.

rearrange, reduce, repeat, einsum, pack, unpack, parse_shape and asnumpy
take einops' arguments and keep einops' rules where einc's own functions
are more lenient: rearrange neither reduces nor adds axes, reduce adds
none, repeat never reduces, einsum takes the tensors first and a pattern
with '->'. Errors are einc.einops.EinopsError, which is both an
einc.EincError and, when einops is installed, an einops.EinopsError, so
``except einops.EinopsError`` keeps working. einc.einsum, einc.rearrange
and the rest keep einc's own dialect.
"""

from __future__ import annotations

import inspect
import re
import string
import sys

from .. import _einc
from .._core import (RULE_NO_REDUCE, RULE_NO_REPEAT, EincError, _fast,
                    _fast_setup, _lengths, evaluate)
from .._einops import _REDUCTIONS, _rearrange_with, _reduce_callable, _single
from .._api import pack as _pack
from .._api import parse_shape as _parse_shape
from .._api import unpack as _unpack

try:
    import einops as _peer
except ImportError:  # einops absent: einc's error alone
    _peer = None

if _peer is not None:
    class EinopsError(_peer.EinopsError, EincError):
        """An error of einc.einops: an einops.EinopsError and an
        einc.EincError."""
else:
    class EinopsError(EincError):
        """An error of einc.einops (einops is not installed): an
        einc.EincError, a RuntimeError as einops' own is."""


def _einops_error(e: EincError) -> EinopsError:
    return e if isinstance(e, EinopsError) else EinopsError(str(e))


def _rearrange(tensor, pattern: str, **axes_lengths):
    try:
        return _rearrange_with(tensor, pattern, axes_lengths,
                               RULE_NO_REDUCE | RULE_NO_REPEAT)
    except EincError as e:
        raise _einops_error(e) from None


rearrange = _einc.fast_rearrange_einops(
    _rearrange,
    "rearrange(tensor, pattern, **axes_lengths)\n--\n\n"
    "einops.rearrange: reorders, splits, merges, squeezes and unsqueezes\n"
    "axes, and stacks a list of tensors first. Never reduces, never adds\n"
    "an axis (einops' rule); errors are EinopsError.")


def _reduce(tensor, pattern: str, reduction, **axes_lengths):
    """einops.reduce's whole contract, for the calls the builtin reduce
    does not serve itself."""
    if isinstance(reduction, str) and reduction in ("rearrange", "repeat"):
        f = rearrange if reduction == "rearrange" else repeat
        return f(tensor, pattern, **axes_lengths)
    try:
        if callable(reduction):
            _check_rules(tensor, pattern, axes_lengths, RULE_NO_REPEAT)
            return _reduce_callable(_single(tensor), pattern, reduction,
                                    axes_lengths)
        if reduction not in _REDUCTIONS:
            raise EinopsError(f"Unknown reduction {reduction!r}. Expect one "
                              f"of {_REDUCTIONS}.")
        x = _single(tensor)
        if not _reduces(pattern):  # einops calls no reduction: values
            return _reduce_type(tensor, pattern, _reduce_as_is(  # as-is
                x, pattern, "sum", axes_lengths))
        if reduction == "mean" and _not_floating(x):
            raise NotImplementedError("reduce_mean is not available for "
                                      "non-floating tensors")  # einops'
        want = _peer_dtype(x, reduction)
        if want is None:
            return _reduce_type(tensor, pattern, _reduce_as_is(
                x, pattern, reduction, axes_lengths))
        if reduction in ("sum", "prod"):
            x = _cast(x, want)  # promoted first: the sum must not wrap
        result = evaluate(pattern, (x,), reduce=reduction, numpy=False,
                          lengths=_lengths(axes_lengths),
                          rules=RULE_NO_REPEAT)
        if reduction in ("any", "all"):
            result = _cast(result, want)
    except EincError as e:
        raise _einops_error(e) from None
    return _reduce_type(tensor, pattern, result)


def _reduce_as_is(x, pattern, reduction, axes_lengths):
    """The reduction in x's dtype: the cached path, else ein_eval."""
    lengths = _lengths(axes_lengths) if axes_lengths else None
    result = _fast((x, pattern), False, reduction, lengths, RULE_NO_REPEAT)
    if result is None and _fast_setup():
        result = _fast((x, pattern), False, reduction, lengths,
                       RULE_NO_REPEAT)
    if result is None:
        result = evaluate(pattern, (x,), reduce=reduction, numpy=False,
                          lengths=_lengths(axes_lengths),
                          rules=RULE_NO_REPEAT)
    return result


# (library, dtype, reduction[, JAX's x64 flag]) -> the dtype of einops'
# reduction, or None where it keeps the input's
_peer_dtypes: dict = {}


def _peer_dtype(x, reduction):
    """The dtype einops' backend gives `reduction` of x where it differs
    from x's: numpy, torch and JAX promote a sum or product of integers
    or bools (int8 to int64, or JAX's int32), and any and all give bool
    (torch's uint8 stays uint8). Asked once per library and dtype, of
    the library's own reduction of a one-element array; None for mean,
    max and min, which keep the dtype (or fail as einc fails)."""
    if reduction not in ("sum", "prod", "any", "all") or not hasattr(
            x, "dtype"):
        return None
    module = type(x).__module__.partition(".")[0]
    key = (module, str(x.dtype), reduction)
    if module in ("jax", "jaxlib"):
        key += (bool(sys.modules["jax"].config.jax_enable_x64),)
    if key not in _peer_dtypes:
        got = getattr(_one_element(x, module), reduction)(0).dtype
        _peer_dtypes[key] = None if got == x.dtype else got
    return _peer_dtypes[key]


def _one_element(x, module):
    if module == "torch":  # no data, no device work
        return sys.modules["torch"].zeros(1, dtype=x.dtype, device="meta")
    if module == "numpy":
        return sys.modules["numpy"].zeros(1, x.dtype)
    return x.reshape(-1)[:1]


def _reduces(pattern):
    """Whether einops calls the backend's reduction: some axis of the
    input is missing from the output (else it only rearranges, and the
    dtype stays the input's)."""
    lhs, _, rhs = pattern.partition("->")
    names = re.compile(r"\.\.\.|[^\s()]+")
    return bool(set(names.findall(lhs)) - set(names.findall(rhs)))


def _not_floating(x):
    """einops' mean needs a floating dtype (complex is NotImplemented)."""
    return _dtype_kind(x).startswith(("int", "uint", "bool", "complex"))


def _integral(x):
    """Whether x holds integers or bools."""
    return _dtype_kind(x).startswith(("int", "uint", "bool"))


def _dtype_kind(x):
    """x's dtype name without a library prefix ('torch.int8' -> 'int8')."""
    return str(getattr(x, "dtype", "")).rpartition(".")[2]


def _cast(x, dtype):
    return x.to(dtype) if type(x).__module__.startswith("torch") else (
        x.astype(dtype))


def _reduce_type(tensor, pattern, result):
    """A 0-d numpy result as einops.reduce gives it (issue 37): a numpy
    scalar where einops calls numpy's reduction on some axes (an axis the
    pattern names, or one '...' stands for, is reduced) and reshapes
    nothing after it (no '()' in the output); else the 0-d ndarray its
    reshapes leave."""
    if type(result).__module__ != "numpy" or result.ndim != 0:
        return result
    lhs, _, rhs = pattern.partition("->")
    tokens = re.findall(r"\.\.\.|[^\s()]+|\(", lhs)
    named = any(t not in ("...", "(") and not t.isdigit() for t in tokens)
    if "..." in tokens:
        import numpy as _np  # loaded: the result is numpy's

        ndim = len(tensor) and 1 + _np.ndim(tensor[0]) if isinstance(
            tensor, (list, tuple)) else _np.ndim(tensor)
        items = len(re.findall(r"\.\.\.|\([^)]*\)|[^\s()]+", lhs))
        named = named or ndim > items - 1
    return result[()] if named and "(" not in rhs else result


_reduce._zero_d = lambda args, kwargs, result: _reduce_type(
    args[0], args[1], result)


# The builtin (python/src/dropin.c) serves reduce's plain call from
# einc's cached path (python/src/call.c): a reduction einc compiles, named by a
# str, and axis lengths as ints; everything else goes to _reduce.
reduce = _einc.fast_einops_reduce(
    _reduce,
    "reduce(tensor, pattern, reduction, **axes_lengths)\n--\n\n"
    "einops.reduce: rearranges and reduces the axes missing from the\n"
    "output with reduction ('min', 'max', 'sum', 'mean', 'prod', 'any',\n"
    "'all', a callable f(x, axes), or 'rearrange'/'repeat' as einops\n"
    "takes them). Adds no axis; errors are EinopsError; a 0-d numpy\n"
    "result is a numpy scalar, as einops' is.")


def _numpy_scalar(result):
    """A 0-d numpy result as the numpy scalar numpy's own reductions and
    einsum give (einops returns theirs)."""
    if type(result).__module__ == "numpy" and result.ndim == 0:
        return result[()]
    return result


def _check_rules(tensor, pattern, axes_lengths, rules):
    """The binder's check of `rules` on the tensor's shape alone."""
    from .._core import _shape_of

    x = _single(tensor)
    _einc.bind(pattern, (_shape_of(x),), False, "sum", "auto",
               _lengths(axes_lengths), rules)


def repeat(tensor, pattern: str, **axes_lengths):
    """einops.repeat: rearranges and adds (repeats along) new axes, whose
    sizes come as keywords or numbers. Never reduces; a new array (einops
    may return a view); errors are EinopsError."""
    try:
        return evaluate(pattern, (_single(tensor),), numpy=False,
                        lengths=_lengths(axes_lengths), rules=RULE_NO_REDUCE)
    except EincError as e:
        raise _einops_error(e) from None


def _einsum(*tensors_and_pattern):
    """einops.einsum's whole contract, for the calls the builtin einsum
    does not serve itself; a pattern that passes einops' checks is kept
    in _checked with its numpy form, which the builtin serves.

    einops maps the names onto numpy's letters and calls the backend's
    einsum, which broadcasts a size-1 dim against a named axis
    ('b i, b i -> b' on shapes (4, 3) and (1, 3)); einc's einops dialect
    does not, so the call runs in numpy's dialect too (issue 38), and an
    error is reported with the pattern's own names where einc's einops
    dialect finds one (_einsum_error)."""
    if len(tensors_and_pattern) <= 1:
        raise ValueError("`einops.einsum` takes the tensors (at least one) "
                         "and then the pattern")
    *tensors, pattern = tensors_and_pattern
    if not isinstance(pattern, str):
        raise ValueError("The last argument of einsum is its pattern, a "
                         f"str, not {type(pattern).__name__}")
    if "->" not in pattern:
        raise ValueError(f"Einsum pattern needs '->': {pattern!r}")
    _check_einsum_axes(pattern)
    expr = _numpy_form(pattern)
    if len(_checked) >= _MAX_CHECKED:
        _checked.clear()
    _checked[pattern] = expr
    try:
        result = _einsum_first(tuple(tensors), expr)
    except EincError as e:
        raise _einsum_error(tuple(tensors), pattern, expr, e) from None
    return _numpy_scalar(result)


def _numpy_form(pattern: str) -> str:
    """The pattern as einops hands it to a backend's einsum: each name a
    letter, in order of first appearance ('...' kept, spaces dropped).
    The names were checked (_check_einsum_axes): plain, at most 52."""
    letters = {}

    def term(side):
        names = side.split()
        return "".join(n if n == "..." else letters.setdefault(
            n, string.ascii_letters[len(letters)]) for n in names)

    lhs, _, rhs = pattern.partition("->")
    return ",".join(term(t) for t in lhs.split(",")) + "->" + term(rhs)


def _einsum_error(tensors, pattern, expr, error):
    """The error of a failed call, told with the pattern's names where
    einc's einops dialect finds it on the shapes, unless that finding is
    only the broadcast that numpy's dialect allows; else numpy's message,
    with the letters' names."""
    from .._core import _shape_of, bind

    try:
        bind(pattern, [_shape_of(t) for t in tensors], numpy=False)
    except EincError as named:
        if "do not broadcast in the einops dialect" not in str(named):
            return _einops_error(named)
    names = [n for n in re.split(r"[\s,]+|->", pattern.replace("...", " "))
             if n]
    letters = dict(zip(dict.fromkeys(names),
                       string.ascii_letters))  # (first appearance order)
    return EinopsError(f"{error}\n(the pattern in numpy's letters: " +
                       ", ".join(f"{n}={c}" for n, c in letters.items()) +
                       ")")


def _einsum_first(tensors, expr):
    """A pattern's first call (expr: its numpy form): the cached path
    first, as the builtin's later calls take it, so that the first result
    is a view where later ones are (numpy and torch views of a one-tensor
    pattern). Integer, bool and mixed dtypes go to the backend's einsum
    drop-in (einc.numpy's, einc.torch's), whose rules einops' einsum
    keeps: it calls the backend's einsum."""
    dropin = _backend_einsum(tensors)
    if dropin is not None:
        try:
            return dropin(expr, *tensors)
        except (ValueError, TypeError) as e:  # numpy's types
            raise EincError(str(e)) from None
    call = tensors + (expr,)
    result = _fast(call, True, None)
    if result is None and _fast_setup():  # numpy or torch just came
        result = _fast(call, True, None)
    if result is not None:
        return result
    return evaluate(expr, tensors, numpy=True)


def _backend_einsum(tensors):
    """einc.numpy.einsum or einc.torch.einsum for tensors of integer,
    bool or mixed dtypes of that library; None for the plain case."""
    dtypes = {str(getattr(t, "dtype", "")) for t in tensors}
    floating = len(dtypes) == 1 and not _integral(tensors[0])
    module = type(tensors[0]).__module__.partition(".")[0]
    if floating or module not in ("numpy", "torch"):
        return None
    if module == "torch":
        from ..torch import einsum as dropin
    else:
        from ..numpy import einsum as dropin
    return dropin


_checked: dict = {}
_MAX_CHECKED = 4096
# The builtin (python/src/dropin.c) serves einsum's plain call from
# einc's cached path (python/src/call.c): a pattern already in _checked;
# everything else goes to _einsum.
einsum = _einc.fast_einops_einsum(
    _einsum,
    "einsum(*tensors_and_pattern)\n--\n\n"
    "einops.einsum(t1, t2, ..., pattern): the tensors first, then a\n"
    "pattern of named axes with '->' ('batch h w, h w c -> batch c').\n"
    "Composite and anonymous axes are NotImplementedError, as in einops;\n"
    "a 0-d numpy result is a numpy scalar, as numpy.einsum's is.",
    _checked)


_EINSUM_LETTERS = 52  # einops maps the names onto numpy's letters


def _check_einsum_axes(pattern: str):
    """einops' einsum takes plain names (and '_') and '...' only, at most
    52 of them, and no output name missing from the inputs."""
    lhs, _, rhs = pattern.partition("->")
    seen = []
    for side, is_output in [(t, False) for t in lhs.split(",")] + [(rhs, True)]:
        for name in re.findall(r"\(\s*\)|\([^)]*\)|\S+", side):
            _check_einsum_name(name, pattern)
            if name == "...":
                continue
            if is_output and name not in seen:
                raise EinopsError(f"Unknown axis {name} in the output of "
                                  f"{pattern!r}: in no input")
            if name not in seen:
                seen.append(name)
    if len(seen) > _EINSUM_LETTERS:
        raise EinopsError(f"Too many axes in {pattern!r}: einsum takes at "
                          f"most {_EINSUM_LETTERS}")


def _check_einsum_name(name: str, pattern: str):
    if name.startswith("("):
        if not name[1:-1].strip():
            raise NotImplementedError(
                f"Singleton () axes are not taken by einsum: {pattern!r}")
        raise NotImplementedError(
            f"Shape rearrangement ({name}) is not taken by einsum: "
            f"{pattern!r}")
    if name.isdigit():
        raise NotImplementedError(
            f"Anonymous axes ({name}) are not taken by einsum: {pattern!r}")
    if name not in ("...", "_") and not _valid_name(name):
        raise EinopsError(f"Invalid axis identifier {name!r} in {pattern!r}")


def _valid_name(name: str) -> bool:
    """einops' axis names: identifiers with no leading or trailing '_'."""
    return (name.isidentifier() and not name.startswith("_")
            and not name.endswith("_"))


def _check_pack_pattern(pattern: str, opname: str):
    """einops' pack/unpack patterns: one '*', distinct valid names."""
    names = pattern.split()
    if len(set(names)) != len(names):
        raise EinopsError(f"{opname}: a name twice in {pattern!r}")
    if "*" not in names:
        raise EinopsError(f"{opname}: no '*' in {pattern!r}")
    for name in names:
        if name != "*" and not _valid_name(name):
            raise EinopsError(f"{opname}: invalid axis name {name!r} in "
                              f"{pattern!r}")


def pack(tensors, pattern: str):
    """einops.pack: (packed, packed_shapes); errors are EinopsError."""
    _check_pack_pattern(pattern, "pack")
    try:
        return _pack(tensors, pattern)
    except EincError as e:
        raise _einops_error(e) from None


def unpack(tensor, packed_shapes, pattern: str):
    """einops.unpack: the inverse of pack; errors are EinopsError."""
    _check_pack_pattern(pattern, "unpack")
    try:
        return _unpack(tensor, packed_shapes, pattern)
    except EincError as e:
        raise _einops_error(e) from None


def parse_shape(x, pattern: str) -> dict:
    """einops.parse_shape: {name: size} ('_' skips a dim)."""
    try:
        return _parse_shape(x, pattern)
    except EincError as e:
        raise _einops_error(e) from None


def asnumpy(tensor):
    """einops.asnumpy: a numpy array of the tensor (torch tensors are
    detached and brought to the CPU)."""
    import numpy

    if type(tensor).__module__.startswith("torch"):
        return tensor.detach().cpu().numpy()
    return numpy.asarray(tensor)


for _f in (repeat, pack, unpack, parse_shape, asnumpy):
    _f.__doc__ = inspect.cleandoc(_f.__doc__)

__all__ = ["EinopsError", "asnumpy", "einsum", "pack", "parse_shape",
           "rearrange", "reduce", "repeat", "unpack"]
