"""einops' functions with einops' signatures, compiled by einc:
rearrange, reduce, repeat, parse_shape, pack and unpack. ``import einc as
einops`` works for these calls; rearrange and reduce return views where the
result only re-reads the input, as einops does (repeat always copies), and
errors are einc.EincError, a RuntimeError as einops' EinopsError is.
"""

from __future__ import annotations

import inspect
import math
import re

from . import _einc
from ._api import (RULE_NO_REDUCE, EincError, _fast, _fast_setup, _lengths,
                   _shape_of, evaluate, shape_kept)
from ._arrays import stack

_REDUCTIONS = ("min", "max", "sum", "mean", "prod", "any", "all")


def _single(tensor):
    """einops' rule: a list or tuple of tensors is stacked first."""
    if isinstance(tensor, (list, tuple)):
        if not tensor:
            raise EincError("rearrange/reduce/repeat of an empty list")
        return stack(tensor)
    return tensor


def rearrange(tensor, pattern: str, **axes_lengths):
    """Reorders, splits, merges and squeezes axes::

        >>> images = np.zeros((32, 30, 40, 3))
        >>> einc.rearrange(images, 'b h w c -> b c h w').shape
        (32, 3, 30, 40)
        >>> einc.rearrange(np.zeros((2, 16)), 'b (h d) -> b h d', h=8).shape
        (2, 8, 2)

    Like einops, the result is a view of the tensor (numpy arrays and torch
    CPU tensors) when strides can express it: a transpose, a split, a merge
    of axes adjacent in memory, a squeeze. Writing into such a result
    writes into the tensor; ``.copy()`` (``.clone()``) gives one of your
    own. Other cases, and other array libraries, give a new array.

    A rearrange never reduces: an input axis missing from the output
    ('b s d -> b d') is an EincError with a caret under it; einc.reduce
    says how to reduce it.
    """
    if "->" not in pattern:
        raise EincError(f"rearrange needs '->' in its pattern: {pattern!r}")
    # numpy arrays and torch CPU tensors: a cached plan, or a view (tried
    # first in C; here for what C leaves, as numpy ints for lengths)
    return _rearrange_with(tensor, pattern, axes_lengths, RULE_NO_REDUCE)


def _rearrange_with(tensor, pattern, axes_lengths, rules):
    """rearrange under ein_options.axis_rules `rules` (einc's: never
    reduce; einops': nor repeat)."""
    lengths = _lengths(axes_lengths) if axes_lengths else None
    result = _fast((tensor, pattern), False, None, lengths, rules)
    if result is None and _fast_setup():  # numpy or torch just came
        result = _fast((tensor, pattern), False, None, lengths, rules)
    if result is not None:
        return result
    return evaluate(pattern, (_single(tensor),), numpy=False,
                    lengths=_lengths(axes_lengths), rules=rules)



# einc.rearrange is a builtin (python/src/fastpath.c) that serves the calls
# its plan table knows with no Python frame, and hands every other call to
# the Python function above (kept as _rearrange; its name stays
# 'rearrange' for Python's own errors), whose docstring it shows.
_rearrange = rearrange
rearrange = _einc.fast_rearrange(
    _rearrange,
    "rearrange(tensor, pattern, **axes_lengths)\n--\n\n" +
    inspect.cleandoc(_rearrange.__doc__))


def reduce(tensor, pattern: str, reduction, **axes_lengths):
    """Rearranges and reduces the axes missing from the output with
    reduction ('min', 'max', 'sum', 'mean', 'prod', 'any', 'all'), or with
    a callable as einops takes one: ``reduction(x, axes)`` gets x with the
    kept axes first (in the output's order) and the reduced ones last, and
    axes, the tuple of the reduced positions; ``np.max``, ``np.median``,
    ``torch.amax`` fit::

        >>> x = np.arange(16.).reshape(1, 1, 4, 4)
        >>> einc.reduce(x, 'b c (h 2) (w 2) -> b c h w', 'max')
        array([[[[ 5.,  7.],
                 [13., 15.]]]])
        >>> einc.reduce(x, 'b c (h 2) (w 2) -> b c h w', np.median)
        array([[[[ 2.5,  4.5],
                 [10.5, 12.5]]]])

    The named reductions are compiled into one pass; a callable runs
    between two compiled rearranges. When nothing is reduced the result
    may be a view of the tensor, as rearrange's is.
    """
    if callable(reduction):
        return _reduce_callable(_single(tensor), pattern, reduction,
                                axes_lengths)
    if reduction not in _REDUCTIONS:
        raise EincError(
            f"unknown reduction {reduction!r}: einc compiles "
            f"{', '.join(_REDUCTIONS)}, or give a callable fn(x, axes)")
    lengths = _lengths(axes_lengths) if axes_lengths else None
    result = _fast((tensor, pattern), False, reduction, lengths)
    if result is None and _fast_setup():
        result = _fast((tensor, pattern), False, reduction, lengths)
    if result is not None:
        return result
    return evaluate(pattern, (_single(tensor),), reduce=reduction,
                    numpy=False, lengths=_lengths(axes_lengths))


# einc.reduce is a builtin as rearrange is: it serves the named
# reductions the plan table knows and hands the rest (callables, unknown
# names, lists of tensors, misses) to the Python reduce above.
_reduce = reduce
reduce = _einc.fast_reduce(
    _reduce,
    "reduce(tensor, pattern, reduction, **axes_lengths)\n--\n\n" +
    inspect.cleandoc(_reduce.__doc__))


_TOKEN = re.compile(r"\.\.\.|[()]|[^\s()]+")


def _dims(side: str):
    """'b (h 2) ... ()' -> [['b'], ['h', '2'], ['...'], []]: the names of
    each dim. Malformed sides come back as they can; the rearranges made
    from them raise einc's own error."""
    dims, group = [], None
    for token in _TOKEN.findall(side):
        if token == "(":
            group = []
        elif token == ")":
            dims.append(group or [])
            group = None
        elif group is not None:
            group.append(token)
        else:
            dims.append([token])
    if group is not None:
        dims.append(group)
    return dims


def _reduce_callable(tensor, pattern, fn, axes_lengths):
    """einops' reduce with a callable: x rearranged to (kept in the
    output's order, reduced in the input's), fn(x, reduced positions),
    then the kept axes rearranged into the output's pattern."""
    left, arrow, right = pattern.partition("->")
    if not arrow:
        raise EincError(f"reduce needs '->' in its pattern: {pattern!r}")
    lengths, left_dims = dict(axes_lengths), _dims(left)
    for d in left_dims:  # anonymous axes ('(h 2)') are named to be moved
        for i, name in enumerate(d):
            if name.isdigit():
                d[i] = f"_einc_anon{len(lengths)}"
                lengths[d[i]] = int(name)
    left_names = [n for d in left_dims for n in d]
    right_names = [n for d in _dims(right) for n in d if not n.isdigit()]
    kept = right_names
    reduced = [n for n in left_names if n not in kept]
    ell = (len(_shape_of(tensor)) - len(left_dims) + 1
           if ["..."] in left_dims else 0)
    width = sum(ell if n == "..." else 1 for n in kept)
    nreduced = sum(ell if n == "..." else 1 for n in reduced)
    source = " ".join(f"({' '.join(d)})" if len(d) != 1 else d[0]
                      for d in left_dims)
    x = rearrange(tensor, f"{source} -> {' '.join(kept + reduced)}",
                  **lengths)
    # einops calls fn only when something is reduced
    y = fn(x, tuple(range(width, width + nreduced))) if nreduced else x
    if " ".join(kept) == " ".join(right.split()):
        return y
    return rearrange(y, f"{' '.join(kept)} -> {right}")


def repeat(tensor, pattern: str, **axes_lengths):
    """Rearranges and adds (repeats along) new axes::

        >>> image = np.eye(2)
        >>> einc.repeat(image, 'h w -> h w c', c=3).shape
        (2, 2, 3)
        >>> einc.repeat(image, 'h w -> (h 2) (w 2)')
        array([[1., 1., 0., 0.],
               [1., 1., 0., 0.],
               [0., 0., 1., 1.],
               [0., 0., 1., 1.]])

    The result is always a new array (einops' torch backend may return an
    expanded view; a writable view repeating elements is a trap). A repeat
    never reduces: every input axis is in the output.
    """
    return evaluate(pattern, (_single(tensor),), numpy=False,
                    lengths=_lengths(axes_lengths), rules=RULE_NO_REDUCE)


def parse_shape(x, pattern: str) -> dict:
    """{name: size} for the names of pattern, which lists x's dims
    (``_`` skips one, ``...`` any run)::

        >>> einc.parse_shape(np.zeros((2, 3, 5, 7)), 'batch _ h w')
        {'batch': 2, 'h': 5, 'w': 7}
    """
    spec = re.sub(r"\(\s*\)", " 1 ", pattern)  # '()' is a dim of 1
    if "(" in spec:
        raise EincError(f"parse_shape takes no composite axes: {pattern!r}")
    memo = _einc.ShapeMemo()
    memo.check(spec, _shape_of(x), "x")
    names = [t for t in pattern.split() if t.isidentifier() and t != "_"]
    return {name: memo.size(name) for name in names}


def _star_split(pattern: str):
    """'i j * k' -> (['i', 'j'], ['k']): the names around the one '*'."""
    names = pattern.split()
    if names.count("*") != 1:
        raise EincError(f"pack/unpack patterns have exactly one '*': {pattern!r}")
    at = names.index("*")
    before, after = names[:at], names[at + 1:]
    for n in before + after:
        if not n.isidentifier():
            raise EincError(f"pack/unpack patterns take only names: {n!r}")
    return before, after


def _concatenate(parts, axis):
    first = parts[0]
    if type(first).__module__.startswith("torch"):
        import torch

        return torch.cat(parts, dim=axis)
    if type(first).__module__.startswith("jax"):
        import jax

        return jax.numpy.concatenate(parts, axis=axis)
    import numpy

    return numpy.concatenate(parts, axis=axis)


def pack(tensors, pattern: str):
    """Packs tensors into one along the '*' of pattern; returns (packed,
    shapes), the shapes that unpack needs::

        >>> a, b = np.zeros((2, 3, 5)), np.ones((2, 3, 4, 5))
        >>> packed, shapes = einc.pack([a, b], 'i j * k')
        >>> packed.shape, shapes
        ((2, 3, 5, 5), [(), (4,)])
    """
    before, after = _star_split(pattern)
    fixed = len(before) + len(after)
    flat, shapes = [], []
    for t in tensors:
        shape = shape_kept(t)
        if len(shape) < fixed:
            raise EincError(
                f"pack: a tensor of {len(shape)} dims does not fit {pattern!r}")
        star = [f"_s{i}" for i in range(len(shape) - fixed)]
        src = " ".join(before + star + after)
        dst = " ".join(before + [f"({' '.join(star)})"] + after)
        flat.append(rearrange(t, f"{src} -> {dst}"))
        shapes.append(shape[len(before):len(shape) - len(after)])
    return _concatenate(flat, len(before)), shapes


def unpack(tensor, packed_shapes, pattern: str):
    """The inverse of pack: a list of tensors of the given '*' shapes (one
    may have a -1, solved from the rest)::

        >>> packed = np.zeros((2, 3, 5, 5))
        >>> [t.shape for t in einc.unpack(packed, [(), (-1,)], 'i j * k')]
        [(2, 3, 5), (2, 3, 4, 5)]
    """
    before, after = _star_split(pattern)
    shape = shape_kept(tensor)
    if len(shape) != len(before) + len(after) + 1:
        raise EincError(f"unpack: a tensor of {len(shape)} dims does not fit "
                        f"{pattern!r}")
    total = shape[len(before)]
    shapes = _solve_unknown(packed_shapes, total)
    out, start = [], 0
    for s in shapes:
        n = math.prod(s)
        index = (slice(None),) * len(before) + (slice(start, start + n),)
        start += n
        star = [f"_s{i}" for i in range(len(s))]
        src = " ".join(before + [f"({' '.join(star)})"] + after)
        dst = " ".join(before + star + after)
        out.append(rearrange(tensor[index], f"{src} -> {dst}",
                             **dict(zip(star, s))))
    return out


def _solve_unknown(packed_shapes, total):
    shapes = [shape_kept(s) for s in packed_shapes]
    unknown = [i for i, s in enumerate(shapes) if -1 in s]
    # (lists, not generators: Dynamo's math.prod takes no generator)
    known = sum([math.prod(s) for s in shapes if -1 not in s])
    if len(unknown) > 1:
        raise EincError("unpack: at most one shape may hold -1")
    if unknown:
        s = shapes[unknown[0]]
        rest = math.prod([d for d in s if d != -1])
        if rest == 0 or (total - known) % rest:
            raise EincError(f"unpack: cannot solve {s} for {total - known}")
        shapes[unknown[0]] = tuple((total - known) // rest if d == -1 else d
                                   for d in s)
    elif known != total:
        raise EincError(f"unpack: shapes hold {known} elements, the axis {total}")
    return shapes
