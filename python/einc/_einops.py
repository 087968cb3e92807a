"""einops' functions with einops' signatures, compiled by einc:
rearrange, reduce, repeat, parse_shape, pack and unpack. ``import einc as
einops`` works for these calls; results are new arrays (einops returns views
where it can), and errors are einc.EincError, a RuntimeError as einops'
EinopsError is.
"""

from __future__ import annotations

import math
import re

from . import _einc
from ._api import EincError, _fast, _lengths, _shape_of, evaluate
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

        >>> einc.rearrange(images, 'b h w c -> b c h w')
        >>> einc.rearrange(x, 'b (h d) -> b h d', h=8)
    """
    if "->" not in pattern:
        raise EincError(f"rearrange needs '->' in its pattern: {pattern!r}")
    if not axes_lengths:
        result = _fast((tensor, pattern), False, None)  # plain numpy, cached
        if result is not None:
            return result
    return evaluate(pattern, (_single(tensor),), numpy=False,
                    lengths=_lengths(axes_lengths))


def reduce(tensor, pattern: str, reduction: str, **axes_lengths):
    """Rearranges and reduces the axes missing from the output with
    reduction ('min', 'max', 'sum', 'mean', 'prod', 'any', 'all')::

        >>> einc.reduce(x, 'b c (h 2) (w 2) -> b c h w', 'max')
    """
    if callable(reduction) or reduction not in _REDUCTIONS:
        raise EincError(
            f"unknown reduction {reduction!r}: einc compiles "
            f"{', '.join(_REDUCTIONS)}")
    if not axes_lengths:
        result = _fast((tensor, pattern), False, reduction)
        if result is not None:
            return result
    return evaluate(pattern, (_single(tensor),), reduce=reduction,
                    numpy=False, lengths=_lengths(axes_lengths))


def repeat(tensor, pattern: str, **axes_lengths):
    """Rearranges and adds (repeats along) new axes::

        >>> einc.repeat(image, 'h w -> h w c', c=3)
        >>> einc.repeat(image, 'h w -> (h 2) (w 2)')
    """
    return evaluate(pattern, (_single(tensor),), numpy=False,
                    lengths=_lengths(axes_lengths))


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
    import numpy

    return numpy.concatenate(parts, axis=axis)


def pack(tensors, pattern: str):
    """Packs tensors into one along the '*' of pattern; returns (packed,
    shapes), the shapes that unpack needs::

        >>> packed, shapes = einc.pack([a, b], 'b * c')
    """
    before, after = _star_split(pattern)
    fixed = len(before) + len(after)
    flat, shapes = [], []
    for t in tensors:
        shape = _shape_of(t)
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
    may have a -1, solved from the rest)."""
    before, after = _star_split(pattern)
    shape = _shape_of(tensor)
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
    shapes = [tuple(int(d) for d in s) for s in packed_shapes]
    unknown = [i for i, s in enumerate(shapes) if -1 in s]
    known = sum(math.prod(s) for s in shapes if -1 not in s)
    if len(unknown) > 1:
        raise EincError("unpack: at most one shape may hold -1")
    if unknown:
        s = shapes[unknown[0]]
        rest = math.prod(d for d in s if d != -1)
        if rest == 0 or (total - known) % rest:
            raise EincError(f"unpack: cannot solve {s} for {total - known}")
        shapes[unknown[0]] = tuple((total - known) // rest if d == -1 else d
                                   for d in s)
    elif known != total:
        raise EincError(f"unpack: shapes hold {known} elements, the axis {total}")
    return shapes
