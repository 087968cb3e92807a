"""What einops' functions (einc.rearrange, reduce, repeat, parse_shape,
pack and unpack: einc/_api.py) share with einc.einops, the drop-in:
stacking a list of tensors, a rearrange under axis rules, a reduction
by a callable, the names of a pattern's sides, pack's and unpack's
pieces.
"""

from __future__ import annotations

import math
import re

from ._arrays import stack
from ._core import (RULE_NO_REDUCE, EincError, _fast, _fast_setup, _lengths,
                    _shape_of, evaluate, shape_kept)

_REDUCTIONS = ("min", "max", "sum", "mean", "prod", "any", "all")


def _single(tensor):
    """einops' rule: a list or tuple of tensors is stacked first."""
    if isinstance(tensor, (list, tuple)):
        if not tensor:
            raise EincError("rearrange/reduce/repeat of an empty list")
        return stack(tensor)
    return tensor


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
    x = _rearrange_with(tensor, f"{source} -> {' '.join(kept + reduced)}",
                        lengths, RULE_NO_REDUCE)
    # einops calls fn only when something is reduced
    y = fn(x, tuple(range(width, width + nreduced))) if nreduced else x
    if " ".join(kept) == " ".join(right.split()):
        return y
    return _rearrange_with(y, f"{' '.join(kept)} -> {right}", {},
                           RULE_NO_REDUCE)


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
